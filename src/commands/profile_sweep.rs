//! `profile-sweep`: client latency under each mClock profile during a controlled recovery.

use std::process::ExitCode;

use anyhow::Context;

use ceph_recovery_budget::cli::{ProfileSweepArgs, StatusFormat};
use ceph_recovery_budget::tuning;

use super::{ceph_client, finish, interruptible, optional_command, print_out, split_command};

pub fn run(args: ProfileSweepArgs) -> ExitCode {
    finish(profile_sweep(args))
}

fn profile_sweep(args: ProfileSweepArgs) -> anyhow::Result<ExitCode> {
    let client = ceph_client(&args.ceph)?;
    if !(args.multiplier > 1.0 && args.multiplier.is_finite()) {
        anyhow::bail!("--multiplier {} must be a number above 1", args.multiplier);
    }
    let plan = tuning::sweep::SweepPlan {
        window: args.window.0,
        settle: args.settle.0,
        fio: split_command("--fio-cmd", &args.fio_cmd)?,
        start_recovery: optional_command("--start-recovery", &args.start_recovery)?,
        stop_recovery: optional_command("--stop-recovery", &args.stop_recovery)?,
        wait_recovery: args.wait_recovery.0,
        multiplier: args.multiplier,
    };
    let result = interruptible(async |progress, cancel| {
        tuning::sweep::sweep(
            &client,
            &tuning::measure::ProcessFio,
            &plan,
            progress,
            cancel,
        )
        .await
    })?;
    match args.format {
        StatusFormat::Json => print_out(
            &(serde_json::to_string_pretty(&result).context("encoding the result")? + "\n"),
        ),
        StatusFormat::Text => print_out(&tuning::sweep::render(&result)),
    }
    Ok(if result.complete {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
