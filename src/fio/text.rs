//! fio's classic text report (`--output-format=normal`), fio 2.x and 3.x.

use super::aggregate::{aggregate, Dir, DirStats, JobStats};
use super::{describe, parse_decimal, FioError, FioSummary};

/// At most this many `fio: ...` lines are passed on as warnings.
const MAX_FIO_MESSAGES: usize = 5;

/// The lines of the report, 1-based. `\r\n` ends a line like `\n`; a line holding bare `\r`s
/// (fio's progress line, rewritten in place) is what a terminal shows: the part after the last.
fn lines(report: &str) -> impl Iterator<Item = (usize, &str)> {
    report.split('\n').enumerate().map(|(i, l)| {
        let l = l.strip_suffix('\r').unwrap_or(l);
        let l = match l.rfind('\r') {
            Some(p) => l.get(p + 1..).unwrap_or(""),
            None => l,
        };
        (i + 1, l)
    })
}

/// The kind of a direction line.
#[derive(Debug, Clone, Copy, PartialEq)]
enum DirLine {
    Dir(Dir),
    /// `mixed:` (unified_rw_reporting): reads and writes together.
    Mixed,
}

/// Where we are inside a percentile block.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Block {
    None,
    /// A clat block for this direction of the last job; values are in 1/`per_second` seconds
    /// (dividing, rather than multiplying by 1e-6, gives the double nearest the exact value).
    Clat {
        dir: Dir,
        per_second: f64,
    },
    /// Another kind (lat, slat, sync): skipped.
    Other,
}

struct TextJob {
    stats: JobStats,
    header_line: usize,
    /// The line of each direction's stats line.
    dir_lines: [Option<usize>; 3],
}

struct Parser {
    jobs: Vec<TextJob>,
    current_dir: Option<Dir>,
    /// Inside a `mixed:` section, whose percentile blocks are skipped like the section itself.
    in_mixed: bool,
    block: Block,
    run_status_line: Option<usize>,
    saw_fio_marker: bool,
    mixed_seen: bool,
    fio_messages: Vec<(usize, String)>,
    warnings: Vec<String>,
    last_line: usize,
    /// How many reports the input holds (more than one with `--status-interval`).
    reports: usize,
    /// The report before the current one: its jobs and warnings.
    previous: Option<(Vec<TextJob>, Vec<String>)>,
}

/// Parses fio's text report.
pub(crate) fn parse_text(report: &str) -> Result<FioSummary, FioError> {
    if report.trim().is_empty() {
        return Err(FioError::Empty);
    }
    let last_line = lines(report)
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(n, _)| n)
        .last()
        .unwrap_or(0);
    let mut p = Parser {
        jobs: Vec::new(),
        current_dir: None,
        in_mixed: false,
        block: Block::None,
        run_status_line: None,
        saw_fio_marker: false,
        mixed_seen: false,
        fio_messages: Vec::new(),
        warnings: Vec::new(),
        last_line,
        reports: 1,
        previous: None,
    };
    for (no, line) in lines(report) {
        p.line(no, line)?;
    }
    p.finish(report)
}

impl Parser {
    /// A malformed line: an error, unless it is the last line of a report that was cut short,
    /// in which case it becomes a warning and the line is dropped.
    fn malformed(&mut self, no: usize, message: String) -> Result<(), FioError> {
        if no == self.last_line {
            self.warnings.push(format!(
                "line {no} (the last) is cut short and was dropped: {message}"
            ));
            Ok(())
        } else {
            Err(FioError::Text { line: no, message })
        }
    }

    fn line(&mut self, no: usize, line: &str) -> Result<(), FioError> {
        let t = line.trim();
        if t.is_empty() {
            self.block = Block::None;
            return Ok(());
        }
        if let Some(rest) = t.strip_prefix('|') {
            match self.block {
                Block::Clat { dir, per_second } => {
                    return self.percentile_entries(no, rest, dir, per_second)
                }
                Block::Other => return Ok(()),
                Block::None => {}
            }
        }
        self.block = Block::None;

        if let Some(found) = job_header(line) {
            return self.job_header(no, found);
        }
        if let Some((kind, rest)) = direction_line(line) {
            return self.direction(no, kind, rest);
        }
        if let Some((kind, unit)) = percentile_header(t) {
            return self.percentile_header(no, kind, unit);
        }
        if t.starts_with("Run status group") {
            if self.run_status_line.is_none() {
                self.run_status_line = Some(no);
            }
            self.current_dir = None;
            self.in_mixed = false;
        } else if t.starts_with("fio: ") {
            self.fio_messages.push((no, t.to_string()));
        } else if t.starts_with("fio-")
            || (t.contains(": (g=") && t.contains("rw="))
            || (t.starts_with("Starting ") && (t.contains("process") || t.contains("thread")))
        {
            self.saw_fio_marker = true;
        } else if t.starts_with("fsync/fdatasync/sync_file_range:") {
            // The sync statistics that follow belong to no direction.
            self.current_dir = None;
            self.in_mixed = false;
        }
        Ok(())
    }

    fn job_header(
        &mut self,
        no: usize,
        found: Result<(String, u64, i64), String>,
    ) -> Result<(), FioError> {
        let (name, group, err) = match found {
            Ok(h) => h,
            Err(message) => return self.malformed(no, message),
        };
        if self.run_status_line.is_some() {
            // A job header after the `Run status group` summary starts another report:
            // `--status-interval` prints one per interval, each cumulative since the start.
            let jobs = std::mem::take(&mut self.jobs);
            let warnings = std::mem::take(&mut self.warnings);
            self.previous = Some((jobs, warnings));
            self.reports += 1;
            self.run_status_line = None;
        }
        if err != 0 {
            self.warnings.push(format!(
                "job `{name}` (line {no}) ended with err={err}; its numbers may cover only part of \
                 the run"
            ));
        }
        self.jobs.push(TextJob {
            stats: JobStats {
                name,
                group: Some(group),
                dirs: [None, None, None],
            },
            header_line: no,
            dir_lines: [None, None, None],
        });
        self.current_dir = None;
        self.in_mixed = false;
        Ok(())
    }

    fn direction(&mut self, no: usize, kind: DirLine, rest: &str) -> Result<(), FioError> {
        self.current_dir = None;
        self.in_mixed = false;
        let dir = match kind {
            DirLine::Mixed => {
                self.mixed_seen = true;
                self.in_mixed = true;
                return Ok(());
            }
            DirLine::Dir(dir) => dir,
        };
        let (iops, bw_bytes) = match direction_fields(rest) {
            Ok(v) => v,
            Err(message) => {
                return self.malformed(no, format!("`{}:` line: {message}", dir.name()));
            }
        };
        if self.jobs.is_empty() {
            self.warnings.push(format!(
                "line {no}: `{}:` statistics before any job header (the report's beginning is \
                 missing?)",
                dir.name()
            ));
            self.jobs.push(TextJob {
                stats: JobStats::default(),
                header_line: no,
                dir_lines: [None, None, None],
            });
        }
        let Some(job) = self.jobs.last_mut() else {
            return Ok(());
        };
        if let Some(first) = job.dir_lines[dir.index()] {
            return Err(FioError::Text {
                line: no,
                message: format!(
                    "a second `{}:` line for job `{}` (the first is on line {first})",
                    dir.name(),
                    job.stats.name
                ),
            });
        }
        job.dir_lines[dir.index()] = Some(no);
        job.stats.dirs[dir.index()] = Some(DirStats {
            iops,
            bw_bytes,
            percentiles: Vec::new(),
            bins: None,
        });
        self.current_dir = Some(dir);
        Ok(())
    }

    fn percentile_header(&mut self, no: usize, kind: &str, unit: &str) -> Result<(), FioError> {
        if kind != "clat" || self.in_mixed {
            self.block = Block::Other;
            return Ok(());
        }
        let per_second = match unit {
            "nsec" => 1e9,
            "usec" => 1e6,
            "msec" => 1e3,
            "sec" => 1.0,
            other => {
                return self.malformed(
                    no,
                    format!("unknown unit `{other}` in `clat percentiles ({other}):`, expected nsec, usec or msec"),
                )
            }
        };
        let Some(dir) = self.current_dir else {
            return Err(FioError::Text {
                line: no,
                message: "`clat percentiles` outside a `read:`/`write:`/`trim:` section"
                    .to_string(),
            });
        };
        let Some(job) = self.jobs.last() else {
            return Ok(());
        };
        if job.stats.dirs[dir.index()]
            .as_ref()
            .is_some_and(|d| !d.percentiles.is_empty())
        {
            return Err(FioError::Text {
                line: no,
                message: format!(
                    "a second `clat percentiles` block for {} in job `{}`",
                    dir.name(),
                    job.stats.name
                ),
            });
        }
        self.block = Block::Clat { dir, per_second };
        Ok(())
    }

    fn percentile_entries(
        &mut self,
        no: usize,
        rest: &str,
        dir: Dir,
        per_second: f64,
    ) -> Result<(), FioError> {
        let mut parsed = Vec::new();
        let mut bad = None;
        for piece in rest.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            match percentile_entry(piece) {
                Some(entry) => parsed.push(entry),
                None => {
                    bad = Some(piece.chars().take(40).collect::<String>());
                    break;
                }
            }
        }
        if let Some(piece) = bad {
            let message = format!(
                "malformed percentile entry `{piece}`: expected `<percent>th=[<value>]` such as \
                 `99.00th=[ 7584]`"
            );
            if no != self.last_line {
                return Err(FioError::Text { line: no, message });
            }
            self.warnings.push(format!(
                "line {no} (the last) is cut short: {message}; the entries before it are kept"
            ));
        }
        let Some(d) = self
            .jobs
            .last_mut()
            .and_then(|j| j.stats.dirs[dir.index()].as_mut())
        else {
            return Ok(());
        };
        for (percent, value) in parsed {
            if !d
                .percentiles
                .iter()
                .any(|(p, _)| (p - percent).abs() < 1e-9)
            {
                d.percentiles.push((percent, value as f64 / per_second));
            }
        }
        Ok(())
    }

    fn finish(mut self, report: &str) -> Result<FioSummary, FioError> {
        let mut complete = self.run_status_line.is_some();
        let mut front = Vec::new();
        if self.reports > 1 {
            let has_results = self
                .jobs
                .iter()
                .any(|j| j.stats.dirs.iter().any(Option::is_some));
            let mut note = format!(
                "the input holds {} fio text reports one after another (fio --status-interval \
                 prints one per interval, each cumulative since the start); ",
                self.reports
            );
            match self.previous.take() {
                Some((jobs, warnings)) if !has_results => {
                    note.push_str(
                        "the last one is cut short before any result, so the one before it \
                         is used",
                    );
                    self.jobs = jobs;
                    self.warnings = warnings;
                    complete = true;
                }
                _ => note.push_str("the last one is used"),
            }
            front.push(note);
        }
        // fio's own messages first, in order.
        front.extend(
            self.fio_messages
                .iter()
                .take(MAX_FIO_MESSAGES)
                .map(|(no, m)| format!("fio said (line {no}): {m}")),
        );
        if self.fio_messages.len() > MAX_FIO_MESSAGES {
            front.push(format!(
                "... and {} more `fio:` lines",
                self.fio_messages.len() - MAX_FIO_MESSAGES
            ));
        }
        self.warnings.splice(0..0, front);
        if self.jobs.is_empty() {
            if self.saw_fio_marker || !self.fio_messages.is_empty() {
                let said = self
                    .fio_messages
                    .first()
                    .map(|(no, m)| format!("; fio said on line {no}: {m}"))
                    .unwrap_or_default();
                return Err(FioError::NoResults {
                    reason: format!(
                        "this fio text report has no job results: it ends (line {}) before the \
                         first `<job>: (groupid=...)` section, so it was cut short or fio \
                         failed before running{said}",
                        self.last_line
                    ),
                });
            }
            return Err(FioError::NotFio {
                looks_like: describe(report),
            });
        }
        if !complete {
            self.warnings.push(format!(
                "the text report ends (line {}) without fio's `Run status group` summary: it \
                 looks cut short; the results are from what is there",
                self.last_line
            ));
        }
        if self.mixed_seen {
            self.warnings.push(
                "the report has `mixed:` statistics (unified_rw_reporting), which combine reads \
                 and writes and are not mapped to read/write; left out"
                    .to_string(),
            );
        }
        let headers: Vec<usize> = self.jobs.iter().map(|j| j.header_line).collect();
        let jobs: Vec<JobStats> = self.jobs.into_iter().map(|j| j.stats).collect();
        let summary = aggregate(&jobs, self.warnings);
        if summary.directions().next().is_none() {
            return Err(FioError::NoResults {
                reason: format!(
                    "the fio text report's {} job section(s) (from line {}) have no `read:`, \
                     `write:` or `trim:` statistics with I/O",
                    jobs.len(),
                    headers.first().copied().unwrap_or(0)
                ),
            });
        }
        Ok(summary)
    }
}

/// `name: (groupid=0, jobs=1): err= 0: pid=...` -> (name, groupid, err). `None` if the line is
/// not a job header; `Some(Err)` if it is one but its numbers are unreadable.
fn job_header(line: &str) -> Option<Result<(String, u64, i64), String>> {
    let (name, rest) = line.split_once(": (groupid=")?;
    if name.starts_with(char::is_whitespace) {
        return None;
    }
    Some(job_header_fields(name, rest))
}

fn job_header_fields(name: &str, rest: &str) -> Result<(String, u64, i64), String> {
    let expected = "a job header like `name: (groupid=0, jobs=1): err= 0: pid=...`";
    let (group, rest) = rest
        .split_once(',')
        .ok_or_else(|| format!("expected {expected}"))?;
    let group: u64 = group.trim().parse().map_err(|_| {
        format!(
            "expected a number after `groupid=` in {expected}, found `{}`",
            group.trim()
        )
    })?;
    let err = match rest.split_once("err=") {
        Some((_, e)) => {
            let e = e.trim_start();
            let digits: String = e
                .chars()
                .take_while(|c| c.is_ascii_digit() || *c == '-')
                .collect();
            digits
                .parse::<i64>()
                .map_err(|_| format!("expected a number after `err=` in {expected}"))?
        }
        None => 0,
    };
    Ok((name.to_string(), group, err))
}

/// `  read: IOPS=...` / `  write: IOPS=...` / `  read : io=...` (indented, unlike job lines).
fn direction_line(line: &str) -> Option<(DirLine, &str)> {
    if !line.starts_with(char::is_whitespace) {
        return None;
    }
    let t = line.trim_start();
    for (word, kind) in [
        ("read", DirLine::Dir(Dir::Read)),
        ("write", DirLine::Dir(Dir::Write)),
        ("trim", DirLine::Dir(Dir::Trim)),
        ("mixed", DirLine::Mixed),
    ] {
        if let Some(rest) = t.strip_prefix(word) {
            if let Some(rest) = rest.trim_start().strip_prefix(':') {
                if rest.contains('=') {
                    return Some((kind, rest));
                }
            }
        }
    }
    None
}

/// IOPS and bytes/s from the rest of a direction line:
/// 3.x `IOPS=716, BW=2865KiB/s (2934kB/s)(56.0MiB/20015msec); 0 zone resets`,
/// 2.x `io=15360MB, bw=176625KB/s, iops=44156, runt= 89051msec`.
fn direction_fields(rest: &str) -> Result<(f64, f64), String> {
    let mut iops = None;
    let mut bw = None;
    for part in rest.split(',') {
        let Some((key, value)) = part.split_once('=') else {
            continue;
        };
        let key = key.trim();
        let token = value
            .trim()
            .split(|c: char| c.is_whitespace() || c == '(' || c == ';')
            .next()
            .unwrap_or("");
        match key {
            "IOPS" | "iops" => {
                iops =
                    Some(parse_count(token).ok_or_else(|| {
                        format!("expected a number after `{key}=`, found `{token}`")
                    })?);
            }
            "BW" | "bw" => {
                bw = Some(parse_rate(token, key == "bw").ok_or_else(|| {
                    format!("expected a rate like `2865KiB/s` after `{key}=`, found `{token}`")
                })?);
            }
            _ => {}
        }
    }
    match (iops, bw) {
        (Some(i), Some(b)) => Ok((i, b)),
        _ => Err(
            "expected `IOPS=<number>, BW=<rate>` (fio 3.x) or `bw=<rate>, iops=<number>` (fio 2.x)"
                .to_string(),
        ),
    }
}

/// `716`, `44.2k`, `2541k`, `1.2M` (fio's num2str, base 1000).
pub(super) fn parse_count(token: &str) -> Option<f64> {
    let (number, factor) = match token.char_indices().last() {
        Some((i, c)) if c.is_ascii_alphabetic() => {
            let factor = match c {
                'k' | 'K' => 1e3,
                'M' => 1e6,
                'G' => 1e9,
                'T' => 1e12,
                'P' => 1e15,
                _ => return None,
            };
            (token.get(..i)?, factor)
        }
        _ => (token, 1.0),
    };
    parse_decimal(number)
        .map(|v| v * factor)
        .filter(|v| v.is_finite())
}

/// A rate like `2865KiB/s`, `19.3MiB/s`, `10.4GB/s`, `0B/s`, `22.9Mibit/s` in bytes/s.
/// `legacy` (fio 2.x `bw=`): `KB`, `MB`, `GB` are powers of 1024, as fio 2.x meant them.
pub(super) fn parse_rate(token: &str, legacy: bool) -> Option<f64> {
    let body = token.strip_suffix("/s")?;
    let split = body
        .char_indices()
        .find(|(_, c)| !(c.is_ascii_digit() || *c == '.'))
        .map(|(i, _)| i)?;
    let number = parse_decimal(body.get(..split)?)?;
    let unit = body.get(split..)?;
    let (prefix, per_unit) = if let Some(p) = unit.strip_suffix("bit") {
        (p, 1.0 / 8.0)
    } else if let Some(p) = unit.strip_suffix('B') {
        (p, 1.0)
    } else {
        return None;
    };
    let k: f64 = 1000.0;
    let ki: f64 = 1024.0;
    let factor = match prefix {
        "" => 1.0,
        "Ki" => ki,
        "Mi" => ki.powi(2),
        "Gi" => ki.powi(3),
        "Ti" => ki.powi(4),
        "Pi" => ki.powi(5),
        "k" => k,
        // fio 3.x never prints `KB`; fio 2.x means 1024 by it.
        "K" => ki,
        "M" if legacy => ki.powi(2),
        "G" if legacy => ki.powi(3),
        "T" if legacy => ki.powi(4),
        "P" if legacy => ki.powi(5),
        "M" => k.powi(2),
        "G" => k.powi(3),
        "T" => k.powi(4),
        "P" => k.powi(5),
        _ => return None,
    };
    Some(number * factor * per_unit).filter(|v| v.is_finite())
}

/// `clat percentiles (usec):` -> ("clat", "usec"); likewise `lat`, `slat`, `sync`.
fn percentile_header(t: &str) -> Option<(&str, &str)> {
    let rest = t.strip_suffix(':')?;
    let (head, unit) = rest.rsplit_once('(')?;
    let unit = unit.strip_suffix(')')?.trim();
    let kind = head.trim_end().strip_suffix("percentiles")?.trim();
    Some((kind, unit))
}

/// `99.00th=[ 7584]` -> (99.0, 7584).
fn percentile_entry(piece: &str) -> Option<(f64, u64)> {
    let (label, rest) = piece.split_once("th=[")?;
    let percent = parse_decimal(label.trim()).filter(|p| *p <= 100.0)?;
    let value = rest.strip_suffix(']')?.trim();
    if value.is_empty() || !value.chars().all(|c| c.is_ascii_digit()) {
        return None;
    }
    Some((percent, value.parse::<u64>().ok()?))
}
