//! `experiment`: the same controlled recovery per mClock profile and with the enforcer.

use std::process::ExitCode;

use anyhow::Context;

use ceph_recovery_budget::cli::{ExperimentArgs, StatusFormat};
use ceph_recovery_budget::tuning;

use super::{ceph_client, finish, interruptible, optional_command, print_out, split_command};

pub fn run(args: ExperimentArgs) -> ExitCode {
    finish(experiment(args))
}

/// Exit 0: every row measured and the cluster put back; 1: incomplete; 2: bad arguments or
/// refused (a recovery running, pause flags set, no mClock); 130: interrupted.
fn experiment(args: ExperimentArgs) -> anyhow::Result<ExitCode> {
    use tuning::experiment as ex;
    let refused = |e: &dyn std::fmt::Display| {
        eprintln!("error: {e:#}");
        Ok(ExitCode::from(2))
    };
    if let Some(path) = &args.from_result {
        let result = match read_result(path) {
            Ok(r) => r,
            Err(e) => return refused(&e),
        };
        output(&args, &result)?;
        return Ok(ExitCode::SUCCESS);
    }
    let Some(fio_cmd) = &args.fio_cmd else {
        return refused(&"--fio-cmd is required (or --from-result to redraw a recorded run)");
    };
    let serve_words = match split_command("--serve-args", &args.serve_args) {
        Ok(w) => w,
        Err(_) if args.serve_args.trim().is_empty() => Vec::new(),
        Err(e) => return refused(&e),
    };
    if let Err(e) = ex::check_serve_args(&serve_words) {
        return refused(&e);
    }
    let serve_words = ex::with_default_serve_args(&serve_words);
    let plan = (|| -> anyhow::Result<ex::ExperimentPlan> {
        let plan = ex::ExperimentPlan {
            fio: split_command("--fio-cmd", fio_cmd)?,
            start_recovery: optional_command("--start-recovery", &args.start_recovery)?,
            stop_recovery: optional_command("--stop-recovery", &args.stop_recovery)?,
            rows: ex::parse_rows(&args.rows).map_err(anyhow::Error::msg)?,
            baseline_window: args.baseline_window.0,
            multiplier: args.multiplier,
            max_recovery: args.max_recovery.0,
            poll_every: std::time::Duration::from_secs(3),
            enforcer_ready_within: std::time::Duration::from_secs(60),
            enforcer_idle_within: std::time::Duration::from_secs(120),
            metrics_path: ex::telemetry_path(&serve_words),
            window: ex::WINDOW,
        };
        plan.check().map_err(anyhow::Error::msg)?;
        Ok(plan)
    })();
    let plan = match plan {
        Ok(p) => p,
        Err(e) => return refused(&e),
    };
    let client = match ceph_client(&args.ceph) {
        Ok(c) => c,
        Err(e) => return refused(&e),
    };
    let mut serve_rest = ex::serve_ceph_args(
        &args.ceph.ceph_cmd,
        args.ceph.ceph_conf.as_deref(),
        args.ceph.ceph_name.as_deref(),
        args.ceph.ceph_keyring.as_deref(),
        args.ceph.ceph_timeout.0,
    );
    serve_rest.extend(ex::serve_lease_args(args.ceph.ceph_timeout.0, &serve_words));
    serve_rest.extend(serve_words);
    let exe = std::env::current_exe()
        .context("finding this program's path (the enforced row runs it as `serve`)")?;
    let dir = std::env::temp_dir().join(format!(
        "ceph-recovery-budget-experiment-{}",
        std::process::id()
    ));
    let procs = ex::processes::RealProcesses::new(exe, serve_rest, dir);
    let result = match interruptible(async |progress, cancel| {
        ex::experiment(&client, &procs, &plan, progress, cancel).await
    }) {
        Ok(r) => r,
        Err(e) if matches!(e.downcast_ref(), Some(tuning::TuningError::Refused(_))) => {
            return refused(&e)
        }
        Err(e) => return Err(e),
    };
    output(&args, &result)?;
    Ok(ExitCode::from(result.exit_code()))
}

/// A result that `--format json` wrote.
fn read_result(path: &std::path::Path) -> anyhow::Result<tuning::experiment::ExperimentResult> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("--from-result: reading {}", path.display()))?;
    serde_json::from_str(&text).with_context(|| {
        format!(
            "--from-result: {} is not a result of `experiment --format json`",
            path.display()
        )
    })
}

/// The decisions file, the chart and the table (or JSON) of a result.
fn output(
    args: &ExperimentArgs,
    result: &tuning::experiment::ExperimentResult,
) -> anyhow::Result<()> {
    use tuning::experiment as ex;
    if let Some(path) = &args.decisions_out {
        if result.enforcer.is_some() {
            let json = serde_json::to_string_pretty(&result.decisions)
                .context("encoding the decisions")?;
            ceph_recovery_budget::atomic_file::write(path, (json + "\n").as_bytes())
                .with_context(|| format!("writing the decisions to {}", path.display()))?;
            eprintln!(
                "decisions of the enforced row written to {}",
                path.display()
            );
        } else {
            eprintln!("no enforced row ran: {} not written", path.display());
        }
    }
    if let Some(path) = &args.chart {
        ceph_recovery_budget::atomic_file::write(path, ex::chart::svg(result).as_bytes())
            .with_context(|| format!("writing the chart to {}", path.display()))?;
        eprintln!(
            "chart of the client's p99 per window written to {}",
            path.display()
        );
    }
    match args.format {
        StatusFormat::Json => print_out(
            &(serde_json::to_string_pretty(result).context("encoding the result")? + "\n"),
        ),
        StatusFormat::Text => print_out(&ex::render(result)),
    }
    Ok(())
}
