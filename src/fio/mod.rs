//! A parser for fio's output, any version: the classic text report (fio 2.x and 3.x) and the JSON
//! reports (`--output-format=json` and `json+`), reduced to what this project needs per direction:
//! IOPS, bandwidth and the completion-latency (clat) percentiles p50/p95/p99.
//!
//! [`parse`] is a pure, total function: any input yields a [`FioSummary`] or a [`FioError`] that
//! says what was wrong and where; nothing panics on input.
//!
//! # What is read
//!
//! * **JSON** (preferred: exact numbers). `iops`; `bw_bytes` (fio 3.x) or else `bw` (KiB/s, fio
//!   2.x); clat percentiles from `clat_ns.percentile` (ns, fio 3.x) or else `clat.percentile`
//!   (µs, fio 2.x), keys like `"99.000000"`. Non-JSON lines before the JSON (fio's own warnings
//!   such as `fio: terminating on signal 2`, or the job banner of `--output-format=normal,json`)
//!   and anything after it (the text report of `normal,json`) are skipped; `fio: ...` lines before
//!   it are passed on as warnings.
//! * **Text**. Job headers `name: (groupid=0, jobs=1): err= 0: ...`; direction lines
//!   `read: IOPS=44.2k, BW=173MiB/s (181MB/s)(...)` (3.x) or `read : io=..., bw=176625KB/s,
//!   iops=44156, runt=...` (2.x); `clat percentiles (nsec|usec|msec):` blocks of `|`-lines
//!   `1.00th=[  434],  5.00th=[  764], ...` (labels are `50th` when every `--percentile_list`
//!   entry is whole). Text numbers are rounded by fio (IOPS and bandwidth to 3-4 significant
//!   digits, percentiles rounded *up* to the unit printed), so JSON is the better source.
//!   Units: fio 3.x prints `KiB/MiB/GiB` (1024) and `kB/MB/GB` (1000); fio 2.x prints `KB/MB/GB`
//!   meaning 1024 (its default `kb_base`); the dialect is told by the line (`BW=` vs `bw=`).
//!
//! Only clat percentiles are used: `lat`, `slat` and `sync` percentile blocks are skipped.
//!
//! With `--status-interval`, fio prints a whole report (text or JSON) per interval, each
//! cumulative since the start: the last one is fio's final report and is the one used (a warning
//! says so); if it is cut short before any result, the one before it is used. `fio: ...` lines
//! between JSON reports (fio prints `fio: terminating on signal 2` there) are skipped. The
//! writes of each interval, from two consecutive `json+` reports, are [`write_windows`]'.
//!
//! # Missing data is left out, never guessed
//!
//! A direction that did no I/O (`total_ios` 0, or IOPS and bandwidth 0 with no percentiles, or
//! no line at all in a text report) is `None`. A percentile the report does not contain (a custom
//! `--percentile_list=50:99` has no 95) is `None` and a warning says so; nothing is interpolated.
//! A text report without fio's closing `Run status group` summary is flagged as cut short, and
//! what it does contain is returned (or [`FioError::NoResults`] if nothing usable is there).
//!
//! # Several jobs
//!
//! IOPS and bandwidth are rates of jobs that run together, so they are **summed** over the job
//! entries of the report (with `group_reporting`, fio already prints one entry per group).
//! Percentiles of separate jobs **cannot be combined** from the percentiles alone (the p99 of two
//! jobs is not their mean, max or any other function of the two p99s), so per direction:
//!
//! * one job entry did that direction's I/O (a single job, a `group_reporting` group, or e.g. a
//!   reader job next to a writer job): its percentiles are used as they are;
//! * several entries did, and all carry `json+` histograms (`clat_ns.bins`): the histograms are
//!   merged and the percentiles computed from them exactly as fio does for `group_reporting`
//!   (first bucket whose cumulative count reaches p% of all samples; values have fio's usual
//!   bucket resolution, 1/64 of the value). Only percentiles that every job reported are computed;
//! * otherwise the percentiles are left out, with a warning saying to rerun with
//!   `--group_reporting` or `--output-format=json+`.
//!
//! Neither "the job with the most I/O" nor an average would be honest: both report a latency no
//! request distribution actually had. When a direction's jobs belong to several reporting groups
//! (`stonewall`, `new_group`), the sums are taken across groups too, and a warning says they are
//! only meaningful if the groups ran at the same time.

mod aggregate;
mod json;
mod text;
mod windows;

pub use windows::{write_windows, WindowsError, WriteWindow};

#[cfg(test)]
mod tests;

/// What a fio report says, per direction. Directions that did no I/O are `None`.
///
/// Serialized (serde) as `{"write": {"iops": N, "bandwidth_bytes_per_second": N,
/// "latency_seconds": {"p50": S, "p95": S, "p99": S}}}`, absent directions and percentiles
/// omitted; `warnings` are not serialized.
#[derive(Debug, Clone, PartialEq, Default, serde::Serialize, serde::Deserialize)]
pub struct FioSummary {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub read: Option<DirectionSummary>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub write: Option<DirectionSummary>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trim: Option<DirectionSummary>,
    /// Things the caller should know (data left out, report cut short, fio's own warnings), one
    /// sentence each, meant for stderr.
    #[serde(skip, default)]
    pub warnings: Vec<String>,
}

impl FioSummary {
    /// The directions present, in the order read, write, trim, with their names.
    pub fn directions(&self) -> impl Iterator<Item = (&'static str, &DirectionSummary)> {
        [
            ("read", self.read.as_ref()),
            ("write", self.write.as_ref()),
            ("trim", self.trim.as_ref()),
        ]
        .into_iter()
        .filter_map(|(name, d)| d.map(|d| (name, d)))
    }
}

/// One direction (read, write or trim), summed over the jobs that did it.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct DirectionSummary {
    /// I/O operations per second.
    pub iops: f64,
    /// Bytes per second (not KiB, not bits).
    pub bandwidth_bytes_per_second: f64,
    /// Completion latency (clat) percentiles, in seconds.
    pub latency_seconds: Percentiles,
}

/// Latency percentiles in seconds; `None` when the report does not contain them.
#[derive(Debug, Clone, PartialEq, Default, serde::Serialize, serde::Deserialize)]
pub struct Percentiles {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub p50: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub p95: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub p99: Option<f64>,
}

/// Why a fio report could not be used.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum FioError {
    /// Nothing but whitespace.
    #[error("empty fio report: the input is empty or only whitespace")]
    Empty,
    /// Not fio output at all; `looks_like` says what it seems to be instead.
    #[error(
        "not a fio report: this looks like {looks_like}; expected fio's text report (a job \
         header `<job>: (groupid=0, jobs=1): err= 0: ...` followed by `read: IOPS=...` / \
         `write: IOPS=...` lines) or its JSON output (`--output-format=json`)"
    )]
    NotFio { looks_like: String },
    /// The JSON part is not valid JSON (e.g. cut short); `line`/`column` are 1-based and refer to
    /// the whole input, including any lines before the JSON.
    #[error("fio JSON report is not valid JSON at line {line}, column {column}: {message}")]
    Json {
        line: usize,
        column: usize,
        message: String,
    },
    /// Valid JSON of the wrong shape: `path` names the field (`jobs[0].write.iops`, `(top level)`).
    #[error("fio JSON report has the wrong shape at `{path}`: expected {expected}, found {found}")]
    Shape {
        path: String,
        expected: String,
        found: String,
    },
    /// A text report line that should hold numbers does not; `line` is 1-based.
    #[error("fio text report, line {line}: {message}")]
    Text { line: usize, message: String },
    /// Recognisably fio, but nothing to report (cut short before any result, or no I/O at all).
    #[error("fio report has no usable results: {reason}")]
    NoResults { reason: String },
}

/// Parses a fio report, telling JSON (`--output-format=json`, `json+`, `normal,json`) from the
/// classic text report by itself. See the module documentation for what is read and how several
/// jobs are combined.
pub fn parse(report: &str) -> Result<FioSummary, FioError> {
    if report.trim().is_empty() {
        return Err(FioError::Empty);
    }
    match json::find_start(report) {
        None => text::parse_text(report),
        Some(start) => match json::parse_from(report, start) {
            Ok(summary) => Ok(summary),
            Err(json_error) => {
                // A line starting with `{` inside an otherwise good text report: use the text.
                match text::parse_text(report) {
                    Ok(mut summary) => {
                        summary.warnings.insert(
                            0,
                            format!(
                                "ignored a part that is not a usable JSON report ({json_error}); \
                                 the results are from the text report"
                            ),
                        );
                        Ok(summary)
                    }
                    Err(_) => Err(json_error),
                }
            }
        },
    }
}

/// Parses fio's classic text report (`--output-format=normal`) only.
pub fn parse_text(report: &str) -> Result<FioSummary, FioError> {
    text::parse_text(report)
}

/// Parses fio's JSON report (`json`, `json+`) only; lines before the JSON and anything after it
/// are skipped.
pub fn parse_json(report: &str) -> Result<FioSummary, FioError> {
    if report.trim().is_empty() {
        return Err(FioError::Empty);
    }
    match json::find_start(report) {
        Some(start) => json::parse_from(report, start),
        None => Err(FioError::NotFio {
            looks_like: describe(report),
        }),
    }
}

/// One line per direction, units on every number, e.g.
/// `write: 674 IOPS, 2.63 MiB/s, clat p50 22.7 ms, p95 42.7 ms, p99 56.9 ms`.
/// Warnings are not included (print `summary.warnings` separately).
pub fn render_human(s: &FioSummary) -> String {
    let lines: Vec<String> = s
        .directions()
        .map(|(name, d)| {
            let p = &d.latency_seconds;
            let pcts: Vec<String> = [("p50", p.p50), ("p95", p.p95), ("p99", p.p99)]
                .into_iter()
                .filter_map(|(label, v)| v.map(|v| format!("{label} {}", human_seconds(v))))
                .collect();
            let latency = if pcts.is_empty() {
                "clat percentiles not reported".to_string()
            } else {
                format!("clat {}", pcts.join(", "))
            };
            format!(
                "{name}: {} IOPS, {}, {latency}",
                human_iops(d.iops),
                human_bandwidth(d.bandwidth_bytes_per_second)
            )
        })
        .collect();
    if lines.is_empty() {
        "no read, write or trim I/O reported".to_string()
    } else {
        lines.join("\n")
    }
}

/// About three significant digits, no exponent.
fn sig3(x: f64) -> String {
    if !x.is_finite() {
        return format!("{x}");
    }
    let a = x.abs();
    if a >= 100.0 {
        format!("{x:.0}")
    } else if a >= 10.0 {
        format!("{x:.1}")
    } else {
        format!("{x:.2}")
    }
}

fn human_iops(iops: f64) -> String {
    if iops >= 100.0 {
        format!("{iops:.0}")
    } else {
        sig3(iops)
    }
}

fn human_bandwidth(bytes_per_second: f64) -> String {
    const UNITS: [&str; 6] = ["B/s", "KiB/s", "MiB/s", "GiB/s", "TiB/s", "PiB/s"];
    let mut v = bytes_per_second;
    let mut unit = 0;
    while v >= 1024.0 && unit + 1 < UNITS.len() {
        v /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{v:.0} {}", UNITS[0])
    } else {
        format!("{} {}", sig3(v), UNITS[unit])
    }
}

fn human_seconds(s: f64) -> String {
    if s < 1e-6 {
        format!("{:.0} ns", s * 1e9)
    } else if s < 1e-3 {
        format!("{} µs", sig3(s * 1e6))
    } else if s < 1.0 {
        format!("{} ms", sig3(s * 1e3))
    } else {
        format!("{} s", sig3(s))
    }
}

/// What an input that is not fio output seems to be, for [`FioError::NotFio`].
pub(crate) fn describe(report: &str) -> String {
    let sample: String = report.chars().take(4096).collect();
    let total = sample.chars().count();
    let odd = sample
        .chars()
        .filter(|&c| (c.is_control() && !matches!(c, '\n' | '\r' | '\t')) || c == '\u{FFFD}')
        .count();
    if odd > 0 && (sample.contains('\0') || odd * 20 > total) {
        return format!(
            "binary data, not text ({odd} of the first {total} characters are control characters \
             or invalid UTF-8)"
        );
    }
    if sample.contains("Total writes made")
        || sample.contains("Total reads made")
        || sample.contains("Bandwidth (MB/sec)")
        || (sample.contains("Cur ops") && sample.contains("started") && sample.contains("finished"))
    {
        return "`rados bench` output".to_string();
    }
    let first = sample
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("");
    let fields: Vec<&str> = first.split(';').collect();
    if fields.len() >= 10 && fields[0].chars().all(|c| c.is_ascii_digit()) {
        return "fio's terse output (`--minimal` / `--output-format=terse`), which is not \
                supported: use `--output-format=json`"
            .to_string();
    }
    let shown: String = first.chars().take(80).collect();
    let ellipsis = if first.chars().count() > 80 {
        "..."
    } else {
        ""
    };
    format!("text with no fio job section; its first line is `{shown}{ellipsis}`")
}

/// Parses a plain decimal (`12`, `99.90`, `.5`): ASCII digits and at most one dot, nothing else
/// (no sign, exponent, `inf` or `nan`, which `str::parse::<f64>` would accept).
pub(crate) fn parse_decimal(s: &str) -> Option<f64> {
    let digits = s.chars().filter(|c| c.is_ascii_digit()).count();
    let dots = s.chars().filter(|&c| c == '.').count();
    if digits == 0 || dots > 1 || digits + dots != s.chars().count() {
        return None;
    }
    s.parse::<f64>().ok().filter(|v| v.is_finite())
}
