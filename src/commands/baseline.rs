//! `baseline`: the first entry of a tuning record, before any change.

use std::process::ExitCode;

use anyhow::Context;

use ceph_recovery_budget::cli::BaselineArgs;
use ceph_recovery_budget::tuning;

use super::{
    ceph_client, finish, fio_plan, interruptible, print_out, settings_of_file, INTERRUPTED,
};

pub fn run(args: BaselineArgs) -> ExitCode {
    finish(baseline(args))
}

fn baseline(args: BaselineArgs) -> anyhow::Result<ExitCode> {
    let client = ceph_client(&args.ceph)?;
    let fio = fio_plan(&args.fio)?.context(
        "the baseline needs client latency: give --fio-output FILE (a fio report) or --fio-cmd 'fio ...'",
    )?;
    // The same bound as the enforcer's policy, when its config file is given.
    let multiplier = match (args.multiplier, &args.config_file) {
        (Some(m), _) => m,
        (None, Some(path)) => settings_of_file(path)?.policy.multiplier,
        (None, None) => 2.0,
    };
    let plan = tuning::cycle::BaselinePlan {
        record: args.record.clone(),
        window: args.window.0,
        fio,
        hardware: args.hardware,
        cluster_name: args.cluster_name,
        multiplier,
    };
    let record = interruptible(async |progress, cancel| {
        tuning::cycle::baseline(
            &client,
            &tuning::measure::ProcessFio,
            &plan,
            progress,
            cancel,
        )
        .await
    })?;
    print_out(&tuning::report::render(&record));
    let m = &record.baseline.measurement;
    if let Some(why) = &m.interrupted {
        eprintln!(
            "the baseline was not completed ({why}); {} says so. Run baseline again into a new record.",
            args.record.display()
        );
        return Ok(ExitCode::from(if why.contains("Ctrl-C") {
            INTERRUPTED
        } else {
            1
        }));
    }
    eprintln!("baseline written to {}", args.record.display());
    Ok(ExitCode::SUCCESS)
}
