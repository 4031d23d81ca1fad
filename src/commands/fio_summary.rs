//! `fio-summary`: IOPS, bandwidth and clat percentiles of a fio report; with `--windows`, the
//! write p99 per status interval.

use std::process::ExitCode;

use anyhow::Context;
use serde::Serialize;

use ceph_recovery_budget::cli::{FioSummaryArgs, StatusFormat};
use ceph_recovery_budget::tuning::experiment::windows::{from_fio, within_fraction, RowWindow};
use ceph_recovery_budget::units::fmt_ms;

use super::{finish, print_out};

pub fn run(args: FioSummaryArgs) -> ExitCode {
    finish(fio_summary(args))
}

fn fio_summary(args: FioSummaryArgs) -> anyhow::Result<ExitCode> {
    use std::io::Read;
    let stdin = args.file.as_os_str() == "-";
    let text = if stdin {
        let mut t = String::new();
        std::io::stdin()
            .read_to_string(&mut t)
            .context("reading the fio report from standard input")?;
        t
    } else {
        std::fs::read_to_string(&args.file)
            .with_context(|| format!("reading the fio report {}", args.file.display()))?
    };
    if args.windows {
        let name = if stdin {
            "the fio report on standard input".to_string()
        } else {
            format!("the fio report {}", args.file.display())
        };
        return windows(&args, &name, &text);
    }
    let summary = ceph_recovery_budget::fio::parse(&text)
        .with_context(|| format!("{} is not a usable fio report", args.file.display()))?;
    for w in &summary.warnings {
        eprintln!("warning: {w}");
    }
    match args.format {
        StatusFormat::Json => {
            print_out(&(serde_json::to_string(&summary).context("encoding the summary")? + "\n"))
        }
        StatusFormat::Text => {
            print_out(&(ceph_recovery_budget::fio::render_human(&summary) + "\n"))
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// One window in `--windows --format json`: `experiment`'s fields, and the Unix times a script
/// compares with the times it recorded itself.
#[derive(Serialize)]
struct JsonWindow<'a> {
    #[serde(flatten)]
    window: &'a RowWindow,
    start_unix: f64,
    end_unix: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    within_bound: Option<bool>,
}

/// The windows `experiment` computes (the same functions), printed.
fn windows(args: &FioSummaryArgs, name: &str, text: &str) -> anyhow::Result<ExitCode> {
    let fio = ceph_recovery_budget::fio::write_windows(text, args.interval.0)
        .with_context(|| format!("{name} gives no write latency per window"))?;
    // write_windows reads at least one report or fails; this is only for safety.
    let (start, rows) =
        from_fio(&fio).with_context(|| format!("{name} holds no fio report with a timestamp"))?;
    let bound = args.bound_ms.map(|ms| ms / 1000.0);
    match args.format {
        StatusFormat::Json => {
            let out: Vec<JsonWindow> = rows
                .iter()
                .zip(&fio)
                .map(|(w, f)| JsonWindow {
                    window: w,
                    start_unix: f.start,
                    end_unix: f.end,
                    within_bound: bound.map(|b| w.within(b)),
                })
                .collect();
            print_out(&(serde_json::to_string(&out).context("encoding the windows")? + "\n"));
        }
        StatusFormat::Text => print_out(&render_windows(start, &rows, args.bound_ms)),
    }
    Ok(ExitCode::SUCCESS)
}

fn render_windows(start: f64, rows: &[RowWindow], bound_ms: Option<f64>) -> String {
    let mut out = format!(
        "fio started at {start:.3} (Unix seconds); write p99 per window, in seconds from then:\n"
    );
    for w in rows {
        let p99 = w
            .p99_seconds
            .map_or_else(|| "no p99".to_string(), |p| format!("p99 {}", fmt_ms(p)));
        out += &format!(
            "{:.1}-{:.1} s: {} writes, {p99}\n",
            w.start_seconds, w.end_seconds, w.writes
        );
    }
    if let Some(ms) = bound_ms {
        if let Some(f) = within_fraction(rows, ms / 1000.0) {
            // The same cell as experiment's "windows within" column.
            let within = (f * rows.len() as f64).round();
            out += &format!(
                "within {ms} ms: {:.0}% ({within}/{})\n",
                f * 100.0,
                rows.len()
            );
        }
    }
    out
}
