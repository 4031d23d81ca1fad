//! Parses the command line and runs the command's module (`commands/`).

mod commands;

use std::process::ExitCode;

use clap::Parser;

use ceph_recovery_budget::cli::{Cli, Command};

fn main() -> ExitCode {
    match Cli::parse().command {
        Command::Serve(args) => commands::serve::run(*args),
        Command::CheckConfig(args) => commands::check_config::run(args),
        Command::Status(args) => commands::status::run(args),
        Command::FioSummary(args) => commands::fio_summary::run(args),
        Command::Baseline(args) => commands::baseline::run(args),
        Command::Tune(command) => commands::tune::run(command),
        Command::ProfileSweep(args) => commands::profile_sweep::run(args),
        Command::Experiment(args) => commands::experiment::run(args),
        Command::Lint(args) => commands::lint::run(args),
        Command::Backfill(command) => commands::backfill::run(command),
    }
}
