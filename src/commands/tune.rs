//! `tune step`, `tune decide`, `tune report`: the tuning cycle over a record.

use std::process::ExitCode;

use anyhow::Context;

use ceph_recovery_budget::cli::{TuneCommand, TuneDecideArgs, TuneReportArgs, TuneStepArgs};
use ceph_recovery_budget::tuning;

use super::{ceph_client, finish, fio_plan, interruptible, print_out, runtime, INTERRUPTED};

pub fn run(command: TuneCommand) -> ExitCode {
    finish(match command {
        TuneCommand::Step(args) => tune_step(args),
        TuneCommand::Decide(args) => tune_decide(args),
        TuneCommand::Report(args) => tune_report(args),
    })
}

fn tune_step(args: TuneStepArgs) -> anyhow::Result<ExitCode> {
    use tuning::cycle::{DecideMode, GoalSpec, StepEnd};
    let [setting] = args.set.as_slice() else {
        anyhow::bail!(
            "--set was given {} times: a step changes exactly one setting, so that its effect can be told apart. Run one step per setting.",
            args.set.len()
        );
    };
    let (name, value) = tuning::cycle::parse_setting(setting).map_err(anyhow::Error::msg)?;
    let goal = match (&args.goal_rate, &args.goal_recovery_time) {
        (Some(r), _) => Some(GoalSpec::Rate(
            tuning::judge::parse_goal_rate(r).map_err(anyhow::Error::msg)?,
        )),
        (None, Some(t)) => Some(GoalSpec::RecoveryTime(t.0)),
        (None, None) => None,
    };
    if !(args.min_gain >= 0.0 && args.min_gain.is_finite()) {
        anyhow::bail!("--min-gain {} must be a percentage >= 0", args.min_gain);
    }
    let plan = tuning::cycle::StepPlan {
        record: args.record.clone(),
        setting: name,
        value,
        settle: args.settle.0,
        window: args.window.0,
        fio: fio_plan(&args.fio)?,
        decide: if args.keep {
            DecideMode::Keep
        } else if args.revert {
            DecideMode::Revert
        } else if args.auto {
            DecideMode::Auto
        } else {
            DecideMode::Ask
        },
        force: args.force,
        goal,
        min_gain: args.min_gain / 100.0,
    };
    let client = ceph_client(&args.ceph)?;
    let outcome = interruptible(async |progress, cancel| {
        let asker = &mut tuning::cycle::TerminalAsker;
        tuning::cycle::step(
            &client,
            &tuning::measure::ProcessFio,
            &plan,
            asker,
            progress,
            cancel,
        )
        .await
    })?;
    print_out(&tuning::report::render(&outcome.record));
    Ok(match outcome.end {
        StepEnd::Kept | StepEnd::Reverted => ExitCode::SUCCESS,
        // Applied and waiting for `tune decide`: not a failure, but not finished either.
        StepEnd::Undecided => ExitCode::from(3),
        StepEnd::Interrupted => ExitCode::from(INTERRUPTED),
    })
}

fn tune_decide(args: TuneDecideArgs) -> anyhow::Result<ExitCode> {
    let client = ceph_client(&args.ceph)?;
    let (record, line) =
        runtime()?.block_on(tuning::cycle::decide(&client, &args.record, args.keep))?;
    eprintln!("{line}");
    print_out(&tuning::report::render(&record));
    Ok(ExitCode::SUCCESS)
}

fn tune_report(args: TuneReportArgs) -> anyhow::Result<ExitCode> {
    let record = tuning::record::TuningRecord::load(&args.record)?;
    if let Some(chart) = &args.chart {
        ceph_recovery_budget::atomic_file::write(chart, tuning::chart::svg(&record).as_bytes())
            .with_context(|| format!("writing the chart {}", chart.display()))?;
        eprintln!("chart written to {}", chart.display());
    }
    print_out(&tuning::report::render(&record));
    Ok(ExitCode::SUCCESS)
}
