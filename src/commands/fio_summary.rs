//! `fio-summary`: IOPS, bandwidth and clat percentiles of a fio report.

use std::process::ExitCode;

use anyhow::Context;

use ceph_recovery_budget::cli::{FioSummaryArgs, StatusFormat};

use super::{finish, print_out};

pub fn run(args: FioSummaryArgs) -> ExitCode {
    finish(fio_summary(args))
}

fn fio_summary(args: FioSummaryArgs) -> anyhow::Result<ExitCode> {
    use std::io::Read;
    let text = if args.file.as_os_str() == "-" {
        let mut t = String::new();
        std::io::stdin()
            .read_to_string(&mut t)
            .context("reading the fio report from standard input")?;
        t
    } else {
        std::fs::read_to_string(&args.file)
            .with_context(|| format!("reading the fio report {}", args.file.display()))?
    };
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
