//! fio's JSON reports: `--output-format=json`, `json+`, and the JSON part of `normal,json`.

use serde_json::{Map, Value};

use super::aggregate::{aggregate, Dir, DirStats, JobStats};
use super::{describe, parse_decimal, FioError, FioSummary};

/// At most this many `fio: ...` lines before the JSON are passed on as warnings.
const MAX_FIO_MESSAGES: usize = 5;

/// The byte offset of the first line that starts (after blanks) with `{` or `[`.
pub(crate) fn find_start(report: &str) -> Option<usize> {
    let mut offset = 0;
    for line in report.split_inclusive('\n') {
        let t = line.trim_start();
        if t.starts_with('{') || t.starts_with('[') {
            return Some(offset);
        }
        offset += line.len();
    }
    None
}

/// Parses the JSON value starting at byte `start` (a line start found by [`find_start`]).
pub(crate) fn parse_from(report: &str, start: usize) -> Result<FioSummary, FioError> {
    let (jobs, warnings) = read_jobs(report, start)?;
    let summary = aggregate(&jobs, warnings);
    if summary.directions().next().is_none() {
        return Err(FioError::NoResults {
            reason: format!(
                "none of the {} job(s) in the JSON report did any read, write or trim I/O",
                jobs.len()
            ),
        });
    }
    Ok(summary)
}

/// The job entries of the JSON value starting at byte `start`, and the warnings so far.
pub(crate) fn read_jobs(
    report: &str,
    start: usize,
) -> Result<(Vec<JobStats>, Vec<String>), FioError> {
    let Some(json_text) = report.get(start..) else {
        return Err(FioError::NotFio {
            looks_like: describe(report),
        });
    };
    let before = report.get(..start).unwrap_or("");
    let lines_before = before.matches('\n').count();

    let docs = documents(json_text, lines_before)?;
    let documents = docs.values.len();
    let cut_after = docs.cut_at_line;
    let Some(value) = docs.values.last() else {
        return Err(FioError::Json {
            line: lines_before + 1,
            column: 1,
            message: "expected a JSON value".to_string(),
        });
    };

    let mut warnings = Vec::new();
    if documents > 1 {
        warnings.push(format!(
            "the output holds {documents} JSON reports one after another (fio \
             --status-interval prints one per interval, each cumulative since the start); the \
             last one is used"
        ));
    }
    if let Some(line) = cut_after {
        warnings.push(format!(
            "a further JSON report after the one used is cut short (at line {line}); ignored"
        ));
    }
    let fio_lines: Vec<(usize, &str)> = before
        .lines()
        .enumerate()
        .map(|(i, l)| (i + 1, l.trim()))
        .filter(|(_, l)| l.starts_with("fio: "))
        .collect();
    for (no, l) in fio_lines.iter().take(MAX_FIO_MESSAGES) {
        warnings.push(format!("fio said before its JSON report (line {no}): {l}"));
    }
    if fio_lines.len() > MAX_FIO_MESSAGES {
        warnings.push(format!(
            "... and {} more `fio:` lines before the JSON report",
            fio_lines.len() - MAX_FIO_MESSAGES
        ));
    }
    for (no, l) in docs.fio_lines.iter().take(MAX_FIO_MESSAGES) {
        warnings.push(format!(
            "fio said between its JSON reports (line {no}): {l}"
        ));
    }

    let jobs = read_document(value, &mut warnings)?;
    Ok((jobs, warnings))
}

/// The JSON documents of a report, one after another.
pub(crate) struct Documents {
    /// At least one; the first is the report, later ones (`--status-interval`) have `jobs`.
    pub values: Vec<Value>,
    /// A further document was cut short at this line (1-based, of the whole input).
    pub cut_at_line: Option<usize>,
    /// `fio: ...` lines between documents (fio prints `fio: terminating on signal 2` on stdout
    /// between the last periodic report and the final one): (line, text).
    pub fio_lines: Vec<(usize, String)>,
}

/// Reads the JSON document at the start of `json_text`, then any further ones (`--status-interval`
/// prints one per interval, each cumulative since the start). Between them only blank lines and
/// `fio: ...` lines are skipped; anything else (the text report of `normal,json`) ends the list.
/// `lines_before`: lines of the input before `json_text`, for line numbers.
pub(crate) fn documents(json_text: &str, lines_before: usize) -> Result<Documents, FioError> {
    let line_at = |offset: usize| {
        lines_before
            + json_text
                .get(..offset)
                .map_or(0, |t| t.matches('\n').count())
    };
    let mut docs = Documents {
        values: Vec::new(),
        cut_at_line: None,
        fio_lines: Vec::new(),
    };
    let mut offset = 0;
    while let Some(rest) = json_text.get(offset..) {
        let trimmed = rest.trim_start();
        if trimmed.is_empty() {
            break;
        }
        let at = offset + (rest.len() - trimmed.len());
        if !docs.values.is_empty() && !trimmed.starts_with('{') {
            // Only fio's own messages are skipped: anything else is not part of the reports.
            if !trimmed.starts_with("fio: ") {
                break;
            }
            let line_end = trimmed.find('\n').unwrap_or(trimmed.len());
            docs.fio_lines
                .push((line_at(at) + 1, trimmed[..line_end].trim().to_string()));
            offset = at + line_end;
            continue;
        }
        let from = json_text.get(at..).unwrap_or("");
        let mut stream = serde_json::Deserializer::from_str(from).into_iter::<Value>();
        match stream.next() {
            Some(Ok(v)) => {
                if !docs.values.is_empty() && v.get("jobs").is_none() {
                    break;
                }
                docs.values.push(v);
                offset = at + stream.byte_offset();
            }
            Some(Err(e)) if docs.values.is_empty() => {
                return Err(json_error(&e, line_at(at)));
            }
            Some(Err(e)) => {
                if e.is_eof() {
                    docs.cut_at_line = Some(line_at(at) + e.line());
                }
                break;
            }
            None => break,
        }
    }
    Ok(docs)
}

fn json_error(e: &serde_json::Error, lines_before: usize) -> FioError {
    let full = e.to_string();
    let position = format!(" at line {} column {}", e.line(), e.column());
    let mut message = full.strip_suffix(&position).unwrap_or(&full).to_string();
    if e.is_eof() {
        message.push_str(" (the JSON ends early: the report looks cut short)");
    }
    FioError::Json {
        line: e.line() + lines_before,
        column: e.column(),
        message,
    }
}

fn kind(v: &Value) -> String {
    match v {
        Value::Null => "null".to_string(),
        Value::Bool(b) => format!("the boolean {b}"),
        Value::Number(n) => format!("the number {n}"),
        Value::String(s) => {
            let shown: String = s.chars().take(40).collect();
            format!("the string \"{shown}\"")
        }
        Value::Array(a) => format!("an array of {} element(s)", a.len()),
        Value::Object(_) => "an object".to_string(),
    }
}

fn shape(path: &str, expected: &str, found: String) -> FioError {
    FioError::Shape {
        path: path.to_string(),
        expected: expected.to_string(),
        found,
    }
}

pub(crate) fn read_document(
    value: &Value,
    warnings: &mut Vec<String>,
) -> Result<Vec<JobStats>, FioError> {
    let Value::Object(top) = value else {
        return Err(shape(
            "(top level)",
            "a JSON object with fio's `jobs` array",
            kind(value),
        ));
    };
    let Some(jobs) = top.get("jobs") else {
        if top.contains_key("client_stats") {
            return Err(shape(
                "jobs",
                "fio's `jobs` array",
                "no `jobs` but `client_stats`: fio client/server (`--client`) output, which is \
                 not supported"
                    .to_string(),
            ));
        }
        if !top.contains_key("fio version") {
            let keys: Vec<&str> = top.keys().take(8).map(String::as_str).collect();
            return Err(FioError::NotFio {
                looks_like: format!(
                    "JSON that is not fio's (no `fio version` or `jobs`; its top-level keys: {})",
                    if keys.is_empty() {
                        "none".to_string()
                    } else {
                        keys.join(", ")
                    }
                ),
            });
        }
        return Err(shape(
            "jobs",
            "fio's `jobs` array",
            "nothing (missing)".to_string(),
        ));
    };
    let Value::Array(jobs) = jobs else {
        return Err(shape("jobs", "an array of job results", kind(jobs)));
    };
    if jobs.is_empty() {
        return Err(FioError::NoResults {
            reason: "the JSON report's `jobs` array is empty".to_string(),
        });
    }
    jobs.iter()
        .enumerate()
        .map(|(i, job)| read_job(job, &format!("jobs[{i}]"), warnings))
        .collect()
}

fn read_job(job: &Value, path: &str, warnings: &mut Vec<String>) -> Result<JobStats, FioError> {
    let Value::Object(job) = job else {
        return Err(shape(path, "a job object", kind(job)));
    };
    let name = match job.get("jobname") {
        Some(Value::String(s)) => s.clone(),
        _ => path.to_string(),
    };
    let group = match job.get("groupid") {
        None | Some(Value::Null) => None,
        Some(v) => Some(v.as_u64().ok_or_else(|| {
            shape(
                &format!("{path}.groupid"),
                "a non-negative integer",
                kind(v),
            )
        })?),
    };
    match job.get("error") {
        None | Some(Value::Null) => {}
        Some(v) => match v.as_i64() {
            Some(0) => {}
            Some(code) => warnings.push(format!(
                "job `{name}` ended with error {code}; its numbers may cover only part of the run"
            )),
            None => {
                return Err(shape(
                    &format!("{path}.error"),
                    "an integer error code",
                    kind(v),
                ));
            }
        },
    }
    if let Some(mixed) = job.get("mixed") {
        let mixed_path = format!("{path}.mixed");
        if let Some(stats) = read_direction(mixed, &mixed_path)? {
            if stats.iops > 0.0 || stats.bw_bytes > 0.0 {
                warnings.push(format!(
                    "job `{name}`: `mixed` statistics (unified_rw_reporting) combine reads and \
                     writes and are not mapped to read/write; left out"
                ));
            }
        }
    }

    let mut stats = JobStats {
        name,
        group,
        dirs: [None, None, None],
    };
    for dir in Dir::ALL {
        if let Some(v) = job.get(dir.name()) {
            stats.dirs[dir.index()] = read_direction(v, &format!("{path}.{}", dir.name()))?;
        }
    }
    Ok(stats)
}

/// A non-negative finite number at `obj[key]`, `None` if absent or null.
fn number(obj: &Map<String, Value>, key: &str, path: &str) -> Result<Option<f64>, FioError> {
    match obj.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => match v.as_f64() {
            Some(x) if x.is_finite() && x >= 0.0 => Ok(Some(x)),
            _ => Err(shape(
                &format!("{path}.{key}"),
                "a non-negative number",
                kind(v),
            )),
        },
    }
}

/// One direction object; `None` when it did no I/O.
fn read_direction(v: &Value, path: &str) -> Result<Option<DirStats>, FioError> {
    let Value::Object(d) = v else {
        return Err(shape(
            path,
            "an object with the direction's statistics",
            kind(v),
        ));
    };
    let iops = number(d, "iops", path)?.ok_or_else(|| {
        shape(
            &format!("{path}.iops"),
            "a number (I/Os per second)",
            "nothing (missing)".to_string(),
        )
    })?;
    let bw_bytes = match number(d, "bw_bytes", path)? {
        Some(b) => b,
        None => match number(d, "bw", path)? {
            // fio 2.x has only `bw`, in KiB/s.
            Some(kib) if (kib * 1024.0).is_finite() => kib * 1024.0,
            Some(_) => {
                return Err(shape(
                    &format!("{path}.bw"),
                    "a bandwidth in KiB/s that fits a double once in bytes/s",
                    "a larger number".to_string(),
                ))
            }
            None => {
                return Err(shape(
                    &format!("{path}.bw_bytes"),
                    "a bandwidth (`bw_bytes` in bytes/s, or fio 2.x's `bw` in KiB/s)",
                    "nothing (missing)".to_string(),
                ))
            }
        },
    };
    if let Some(total) = number(d, "total_ios", path)? {
        if total == 0.0 {
            return Ok(None);
        }
    } else if iops == 0.0 && bw_bytes == 0.0 {
        return Ok(None);
    }

    // fio 3.x: clat_ns (ns); fio 2.x: clat (µs).
    let (clat_key, ns_per_unit) = if d.contains_key("clat_ns") {
        ("clat_ns", 1u64)
    } else {
        ("clat", 1000u64)
    };
    let mut stats = DirStats {
        iops,
        bw_bytes,
        percentiles: Vec::new(),
        bins: None,
    };
    let clat_path = format!("{path}.{clat_key}");
    match d.get(clat_key) {
        None | Some(Value::Null) => {}
        Some(Value::Object(clat)) => {
            stats.percentiles = read_percentiles(clat, &clat_path, ns_per_unit)?;
            stats.bins = read_bins(clat, &clat_path, ns_per_unit)?;
        }
        Some(other) => {
            return Err(shape(
                &clat_path,
                "an object with latency statistics",
                kind(other),
            ));
        }
    }
    Ok(Some(stats))
}

fn read_percentiles(
    clat: &Map<String, Value>,
    path: &str,
    ns_per_unit: u64,
) -> Result<Vec<(f64, f64)>, FioError> {
    let path = format!("{path}.percentile");
    let list = match clat.get("percentile") {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::Object(list)) => list,
        Some(other) => {
            return Err(shape(
                &path,
                "an object like {\"99.000000\": value}",
                kind(other),
            ));
        }
    };
    let mut out = Vec::with_capacity(list.len());
    for (key, v) in list {
        let percent = parse_decimal(key).filter(|p| *p <= 100.0).ok_or_else(|| {
            shape(
                &path,
                "percentages as keys, like \"99.000000\"",
                format!("the key \"{}\"", key.chars().take(40).collect::<String>()),
            )
        })?;
        let value = match v.as_f64() {
            Some(x) if x.is_finite() && x >= 0.0 => x,
            _ => {
                return Err(shape(
                    &format!("{path}.\"{key}\""),
                    "a non-negative latency",
                    kind(v),
                ))
            }
        };
        // fio 2.x pads the object with `"0.00": 0` entries (duplicate keys); never a wanted one.
        out.push((percent, value * ns_per_unit as f64 / 1e9));
    }
    Ok(out)
}

fn read_bins(
    clat: &Map<String, Value>,
    path: &str,
    ns_per_unit: u64,
) -> Result<Option<Vec<(u64, u64)>>, FioError> {
    let path = format!("{path}.bins");
    let bins = match clat.get("bins") {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::Object(bins)) => bins,
        Some(other) => {
            return Err(shape(
                &path,
                "an object like {\"2256\": count}",
                kind(other),
            ));
        }
    };
    let mut out = Vec::with_capacity(bins.len());
    for (key, v) in bins {
        let value: u64 = key
            .parse::<u64>()
            .ok()
            .filter(|_| key.chars().all(|c| c.is_ascii_digit()))
            .ok_or_else(|| {
                shape(
                    &path,
                    "latencies as keys, like \"2256\"",
                    format!("the key \"{}\"", key.chars().take(40).collect::<String>()),
                )
            })?;
        let count = v
            .as_u64()
            .ok_or_else(|| shape(&format!("{path}.\"{key}\""), "a sample count", kind(v)))?;
        out.push((value.saturating_mul(ns_per_unit), count));
    }
    Ok(Some(out))
}
