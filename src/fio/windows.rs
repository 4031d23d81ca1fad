//! Client write latency per time window, from fio's periodic `json+` reports.
//!
//! With `--status-interval=N --output-format=json+`, fio prints a whole JSON report every N
//! seconds and a final one when it ends (also after SIGINT), each **cumulative** since the start:
//! `write.clat_ns.bins` maps a latency bucket (ns) to the number of writes that completed in it
//! so far. The difference of two consecutive reports, bucket by bucket, is the histogram of the
//! writes that completed between them, and its p99 is computed exactly as fio computes its own
//! (the first bucket whose cumulative count reaches 99% of the samples).
//!
//! What real reports look like (fio 3.33, recorded in `tests/fixtures/fio/`):
//!
//! * a report with no write yet has no `bins` at all (`total_ios` 0);
//! * `fio: terminating on signal 2` is printed on stdout between the last periodic report and
//!   the final one;
//! * reports are not evenly spaced: fio gathers them from its job threads, so while a job is
//!   stalled (blocked on I/O, or sleeping) the report waits, and the window it closes is longer
//!   than the interval; the next one may follow a fraction of a second later. The final report,
//!   printed when fio is stopped, closes a window of any length.
//!
//! So the windows are taken as fio reported them, each with its own start and end (the reports'
//! `timestamp_ms`, wall-clock), except that a window shorter than half the interval is added to
//! the one before it (the first: to the one after it): a p99 over a fraction of a second is
//! noise, and no write is dropped.

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::Value;

use super::aggregate::{histogram_percentile, Dir};
use super::json::{documents, find_start, read_document};
use super::FioError;

/// The writes that completed in one window.
#[derive(Debug, Clone, PartialEq)]
pub struct WriteWindow {
    /// Unix time (seconds) the window starts: the report before it, or for the first window
    /// fio's start (the first report's time minus the job's runtime then).
    pub start: f64,
    /// Unix time (seconds) of the report that closes it.
    pub end: f64,
    /// Writes completed in the window.
    pub writes: u64,
    /// Their completion-latency p99, in seconds; `None` when no write completed.
    pub p99_seconds: Option<f64>,
}

/// Why a report has no per-window latencies.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum WindowsError {
    // Transparent: with "{0}" the inner error, also its source, shows twice in a chain (`{:#}`).
    #[error(transparent)]
    Fio(#[from] FioError),
    #[error(
        "fio's report {report} has writes but no `clat_ns.bins` histogram: run fio with \
         --output-format=json+"
    )]
    NoHistogram { report: usize },
    #[error(
        "fio printed one report for {seconds:.0} s of writes: run fio with --status-interval \
         (one cumulative report per interval)"
    )]
    NotPeriodic { seconds: f64 },
    #[error("fio's report {report} has no `timestamp_ms`: not fio 3.x JSON")]
    NoTimestamp { report: usize },
    #[error(
        "fio's report {report} counts fewer writes ({now}) than the report before it ({before}): \
         the reports are not one run's cumulative reports"
    )]
    NotCumulative {
        report: usize,
        before: u64,
        now: u64,
    },
}

/// One report: when it was printed, the job's runtime then (ms), and the merged write histogram.
struct Snapshot {
    at_ms: u64,
    runtime_ms: u64,
    bins: BTreeMap<u64, u64>,
}

/// The write windows of fio's output (`--status-interval` with `--output-format=json+`), in
/// order. `interval` is the `--status-interval` fio ran with: windows shorter than half of it
/// are merged into a neighbour. Pure; never panics on input.
pub fn write_windows(report: &str, interval: Duration) -> Result<Vec<WriteWindow>, WindowsError> {
    if report.trim().is_empty() {
        return Err(FioError::Empty.into());
    }
    let Some(start) = find_start(report) else {
        return Err(FioError::NotFio {
            looks_like: super::describe(report),
        }
        .into());
    };
    let before = report.get(..start).unwrap_or("");
    let json_text = report.get(start..).unwrap_or("");
    let docs = documents(json_text, before.matches('\n').count())?;
    let snapshots = docs
        .values
        .iter()
        .enumerate()
        .map(|(i, v)| snapshot(v, i + 1))
        .collect::<Result<Vec<_>, _>>()?;
    windows_of(&snapshots, interval)
}

fn snapshot(doc: &Value, report: usize) -> Result<Snapshot, WindowsError> {
    let at_ms = doc
        .get("timestamp_ms")
        .and_then(Value::as_u64)
        .ok_or(WindowsError::NoTimestamp { report })?;
    // The warnings of the report (job errors and such) are the row summary's business.
    let jobs = read_document(doc, &mut Vec::new())?;
    let mut bins: BTreeMap<u64, u64> = BTreeMap::new();
    for job in &jobs {
        let Some(write) = job.dirs[Dir::Write.index()].as_ref() else {
            continue; // no write yet: fio prints no histogram
        };
        let Some(job_bins) = write.bins.as_ref() else {
            return Err(WindowsError::NoHistogram { report });
        };
        for &(ns, count) in job_bins {
            let slot = bins.entry(ns).or_insert(0);
            *slot = slot.saturating_add(count);
        }
    }
    // Several jobs run together: the earliest started is the longest running.
    let runtime_ms = doc
        .get("jobs")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|j| j.get("job_runtime").and_then(Value::as_u64))
        .max()
        .unwrap_or(0);
    Ok(Snapshot {
        at_ms,
        runtime_ms,
        bins,
    })
}

/// A histogram's sample count.
fn total(bins: &BTreeMap<u64, u64>) -> u64 {
    bins.values().fold(0u64, |a, &c| a.saturating_add(c))
}

fn windows_of(
    snapshots: &[Snapshot],
    interval: Duration,
) -> Result<Vec<WriteWindow>, WindowsError> {
    let Some(first) = snapshots.first() else {
        return Ok(Vec::new());
    };
    let mut raw: Vec<(u64, u64, BTreeMap<u64, u64>)> = Vec::new();
    let mut prev_at = first.at_ms.saturating_sub(first.runtime_ms);
    let mut prev_bins = BTreeMap::new();
    for (i, s) in snapshots.iter().enumerate() {
        let (before, now) = (total(&prev_bins), total(&s.bins));
        if now < before {
            return Err(WindowsError::NotCumulative {
                report: i + 1,
                before,
                now,
            });
        }
        // Per bucket a count never falls between two reports of one run; saturating keeps a
        // racy snapshot (fio reads the counters while jobs update them) from wrapping around.
        let diff: BTreeMap<u64, u64> = s
            .bins
            .iter()
            .map(|(&ns, &c)| {
                (
                    ns,
                    c.saturating_sub(prev_bins.get(&ns).copied().unwrap_or(0)),
                )
            })
            .filter(|&(_, c)| c > 0)
            .collect();
        let end = s.at_ms.max(prev_at);
        raw.push((prev_at, end, diff));
        prev_at = end;
        prev_bins = s.bins.clone();
    }
    let interval_ms = interval.as_millis().min(u128::from(u64::MAX)) as u64;
    if let [(from, to, bins)] = raw.as_slice() {
        // One report over much more than an interval: fio ran without --status-interval.
        if interval_ms > 0 && (to - from) > interval_ms.saturating_mul(3) / 2 && total(bins) > 0 {
            return Err(WindowsError::NotPeriodic {
                seconds: (to - from) as f64 / 1000.0,
            });
        }
    }
    let merged = merge_short(raw, interval_ms / 2);
    Ok(merged
        .into_iter()
        .map(|(from, to, bins)| {
            let writes = total(&bins);
            WriteWindow {
                start: from as f64 / 1000.0,
                end: to as f64 / 1000.0,
                writes,
                p99_seconds: histogram_percentile(&bins, u128::from(writes), 99)
                    .map(|ns| ns as f64 / 1e9),
            }
        })
        .collect())
}

/// Adds each window shorter than `min_ms` to the one after it; the last one, if short, to the
/// one before it. After a stall fio's report comes late and the next one a moment later with
/// the writes that caught up: merged forward, the stalled window keeps exactly what completed
/// during it, so the catch-up does not dilute its p99.
fn merge_short(
    raw: Vec<(u64, u64, BTreeMap<u64, u64>)>,
    min_ms: u64,
) -> Vec<(u64, u64, BTreeMap<u64, u64>)> {
    fn add(into: &mut BTreeMap<u64, u64>, from: &BTreeMap<u64, u64>) {
        for (&ns, &c) in from {
            let slot = into.entry(ns).or_insert(0);
            *slot = slot.saturating_add(c);
        }
    }
    let n = raw.len();
    let mut out: Vec<(u64, u64, BTreeMap<u64, u64>)> = Vec::new();
    let mut carry: Option<(u64, BTreeMap<u64, u64>)> = None;
    for (i, (from, to, mut bins)) in raw.into_iter().enumerate() {
        let from = match carry.take() {
            Some((start, carried)) => {
                add(&mut bins, &carried);
                start
            }
            None => from,
        };
        let last = i + 1 == n;
        if to - from >= min_ms {
            out.push((from, to, bins));
        } else if !last {
            carry = Some((from, bins));
        } else if let Some(before) = out.last_mut() {
            before.1 = to;
            add(&mut before.2, &bins);
        } else {
            out.push((from, to, bins));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ceph::parse::test_support::fixture_str;

    /// fio 3.33, 4k random writes at 200 IOPS with a 4 s start delay, a 6 s think time every
    /// 1600 writes, `--status-interval=2 --output-format=json+`, stopped with SIGINT after
    /// 22.5 s (tests/fixtures/fio/README.md).
    const PERIODIC: &str = "fio/local_status_interval_2s_sigint.jsonplus.out";
    const T0: f64 = 1796148845.055;

    fn two_s() -> Duration {
        Duration::from_secs(2)
    }

    /// (start, end) relative to fio's start, writes, p99 in ns.
    fn shape(w: &[WriteWindow]) -> Vec<(f64, f64, u64, Option<u64>)> {
        let r = |t: f64| ((t - T0) * 1000.0).round() / 1000.0;
        w.iter()
            .map(|w| {
                (
                    r(w.start),
                    r(w.end),
                    w.writes,
                    w.p99_seconds.map(|s| (s * 1e9).round() as u64),
                )
            })
            .collect()
    }

    #[test]
    fn windows_of_a_real_run_stopped_with_sigint() {
        let w = write_windows(&fixture_str(PERIODIC), two_s()).unwrap();
        // Computed independently (a Python script over the same file): per-bucket differences
        // of consecutive reports, p99 as fio computes it.
        assert_eq!(
            shape(&w),
            vec![
                // The start delay: reports with no write and no histogram.
                (0.0, 2.098, 0, None),
                (2.098, 4.098, 0, None),
                (4.098, 6.099, 346, Some(19_791_872)),
                (6.099, 8.247, 403, Some(6_127_616)),
                (8.247, 10.1, 397, Some(5_603_328)),
                (10.1, 12.098, 399, Some(8_716_288)),
                // The job slept 6 s: its report came late, holding the 55 writes before the
                // sleep; the 1240 that caught up 0.2 s later went into the next window.
                (12.098, 18.381, 55, Some(11_862_016)),
                // ... which also took in the final report, printed 21 ms after the last
                // periodic one on SIGINT (after `fio: terminating on signal 2`).
                (18.381, 22.394, 1600, Some(3_981_312)),
            ]
        );
        // No write is lost or counted twice: the final report's total_ios.
        assert_eq!(w.iter().map(|w| w.writes).sum::<u64>(), 3200);
        // Each window starts where the one before ended.
        assert!(w.windows(2).all(|p| p[0].end == p[1].start));
    }

    #[test]
    fn the_row_summary_comes_from_the_final_report_after_sigint() {
        let s = crate::fio::parse(&fixture_str(PERIODIC)).unwrap();
        // The 10th report (the final one, after `fio: terminating on signal 2`): p99 7372800 ns.
        let w = s.write.unwrap();
        assert_eq!(w.latency_seconds.p99, Some(7_372_800e-9));
        assert!(
            s.warnings.iter().any(|x| x.contains("10 JSON reports")),
            "{:?}",
            s.warnings
        );
        assert!(
            s.warnings.iter().any(|x| x
                .contains("between its JSON reports (line 4542): fio: terminating on signal 2")),
            "{:?}",
            s.warnings
        );
    }

    #[test]
    fn reports_without_what_windows_need_say_what_to_run() {
        // Periodic plain JSON: no histograms to subtract.
        let e = write_windows(&fixture_str("fio/local_status_interval.json"), two_s());
        assert_eq!(e, Err(WindowsError::NoHistogram { report: 1 }));
        assert!(e.unwrap_err().to_string().contains("--output-format=json+"));
        // One json+ report of a 2 s run: one window when the interval is longer...
        let one = fixture_str("fio/local_numjobs2.jsonplus.json");
        let w = write_windows(&one, Duration::from_secs(10)).unwrap();
        assert_eq!(w.len(), 1);
        // ... with both jobs' writes (10840 + 11006), the longer-running job giving the start.
        assert_eq!(w[0].writes, 21846);
        assert!((w[0].end - w[0].start - 2.004).abs() < 1e-6, "{w:?}");
        // ... and an error when it covers many intervals: fio ran without --status-interval.
        let e = write_windows(&one, Duration::from_secs(1)).unwrap_err();
        assert!(e.to_string().contains("--status-interval"), "{e}");
        // Text and garbage.
        assert!(matches!(
            write_windows(&fixture_str("fio/fio_base.txt"), two_s()),
            Err(WindowsError::Fio(FioError::NotFio { .. }))
        ));
        assert_eq!(
            write_windows("  \n", two_s()),
            Err(WindowsError::Fio(FioError::Empty))
        );
        // Two runs pasted together are not one run's cumulative reports.
        let twice = fixture_str(PERIODIC).repeat(2);
        assert!(matches!(
            write_windows(&twice, two_s()),
            Err(WindowsError::NotCumulative {
                report: 11,
                before: 3200,
                now: 0
            })
        ));
    }

    /// A periodic json+ report: (time in ms, runtime in ms, cumulative bins).
    fn doc(at_ms: u64, runtime_ms: u64, bins: &[(u64, u64)]) -> String {
        let total: u64 = bins.iter().map(|b| b.1).sum();
        let bins: Vec<String> = bins
            .iter()
            .map(|(ns, c)| format!("\"{ns}\": {c}"))
            .collect();
        format!(
            r#"{{"fio version": "fio-3.33", "timestamp_ms": {at_ms}, "jobs": [{{"jobname": "w", "job_runtime": {runtime_ms},
"write": {{"iops": 1.0, "bw_bytes": 4096, "total_ios": {total}, "clat_ns": {{"percentile": {{"99.000000": 1}}, "bins": {{{}}}}}}}}}]}}"#,
            bins.join(", ")
        )
    }

    #[test]
    fn short_windows_join_the_next_one_and_the_last_the_one_before() {
        let ms = 1_000_000;
        let report = [
            doc(10_000, 10_000, &[(ms, 100)]),
            // 12 s late (a stall): 10 slow writes.
            doc(22_000, 22_000, &[(ms, 100), (900 * ms, 10)]),
            // 0.3 s later: 500 writes that caught up; joins the next window.
            doc(22_300, 22_300, &[(ms, 600), (900 * ms, 10)]),
            doc(32_000, 32_000, &[(ms, 700), (900 * ms, 10)]),
            // SIGINT 0.5 s later: joins the one before.
            doc(32_500, 32_500, &[(ms, 750), (900 * ms, 10)]),
        ]
        .join("\nfio: terminating on signal 2\n");
        let w = write_windows(&report, Duration::from_secs(10)).unwrap();
        let got: Vec<(f64, f64, u64, Option<f64>)> = w
            .iter()
            .map(|w| (w.start, w.end, w.writes, w.p99_seconds))
            .collect();
        assert_eq!(
            got,
            vec![
                (0.0, 10.0, 100, Some(0.001)),
                // The stall keeps its p99: 10 of 10 writes took 900 ms.
                (10.0, 22.0, 10, Some(0.9)),
                (22.0, 32.5, 650, Some(0.001)),
            ]
        );
    }
}
