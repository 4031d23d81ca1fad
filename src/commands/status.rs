//! `status`: what a running `serve` says about itself, in a few plain lines or JSON.

use std::process::ExitCode;

use anyhow::Context;

use ceph_recovery_budget::cli::{StatusArgs, StatusFormat};
use ceph_recovery_budget::http;

use super::{finish, print_out, runtime};

pub fn run(args: StatusArgs) -> ExitCode {
    finish(status(args))
}

fn status(args: StatusArgs) -> anyhow::Result<ExitCode> {
    use ceph_recovery_budget::http_client::{get_ok, HttpTarget, Options};
    let target = HttpTarget::parse(&args.url).map_err(|e| anyhow::anyhow!("--url {e}"))?;
    let body = runtime()?
        .block_on(get_ok(&target, "/api/status", Options::json()))
        .with_context(|| {
            format!(
                "--url {}: is `ceph-recovery-budget serve` running there?",
                args.url
            )
        })?;
    if args.format == StatusFormat::Json {
        print_out(&format!("{body}\n"));
        return Ok(ExitCode::SUCCESS);
    }
    let report: http::report::StatusReport = serde_json::from_str(&body).with_context(|| {
        format!(
            "{} did not answer /api/status with a status report",
            args.url
        )
    })?;
    print_out(&(report.lines().join("\n") + "\n"));
    Ok(ExitCode::SUCCESS)
}
