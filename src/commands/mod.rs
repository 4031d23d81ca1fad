//! One module per subcommand, each with `run(args) -> ExitCode`, and what they share: printing,
//! the async runtime, the Ceph client, the signals that stop a command, fio and command words.

pub mod backfill;
pub mod baseline;
pub mod check_config;
pub mod experiment;
pub mod fio_summary;
pub mod lint;
pub mod profile_sweep;
pub mod serve;
pub mod signals;
pub mod status;
pub mod tune;

use std::path::Path;
use std::process::ExitCode;

use anyhow::Context;
use tokio::sync::watch;

use ceph_recovery_budget::ceph::cli::CliClient;
use ceph_recovery_budget::cli::{CephArgs, FioArgs};
use ceph_recovery_budget::config::Settings;
use ceph_recovery_budget::settings::FileConfig;
use ceph_recovery_budget::tuning;

/// The log target of the commands' own lines: the crate's name, as when they were written in
/// main.rs (log filters and searches use it).
pub const LOG: &str = "ceph_recovery_budget";

/// 130 after Ctrl-C, as shells expect.
pub const INTERRUPTED: u8 = 130;

/// The exit code of a command; an error is said on stderr with its causes, exit 1.
pub fn finish(result: anyhow::Result<ExitCode>) -> ExitCode {
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// Writes to stdout; a closed pipe (`| head`) is not an error worth a panic.
pub fn print_out(text: &str) {
    use std::io::Write;
    let _ = std::io::stdout().write_all(text.as_bytes());
}

/// The settings `serve` would run with, from this config file (no flags).
pub fn settings_of_file(path: &Path) -> anyhow::Result<Settings> {
    let file = FileConfig::load(path)?;
    Ok(Settings::resolve(&file, path, &Default::default())?)
}

/// The write p99 of a fio report, in seconds.
pub fn fio_baseline(path: &Path) -> anyhow::Result<f64> {
    let text = std::fs::read_to_string(path).with_context(|| {
        format!(
            "reading the fio report {} (--enforcer.baseline fio:FILE)",
            path.display()
        )
    })?;
    let summary = ceph_recovery_budget::fio::parse(&text)
        .with_context(|| format!("parsing the fio report {}", path.display()))?;
    summary
        .write
        .as_ref()
        .and_then(|w| w.latency_seconds.p99)
        .with_context(|| {
            format!(
                "the fio report {} has no write clat p99 (a write job with percentiles is needed)",
                path.display()
            )
        })
}

/// A small runtime for the commands that talk to the cluster directly.
pub fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")
}

pub fn ceph_client(args: &CephArgs) -> anyhow::Result<CliClient> {
    let settings = args.settings().map_err(anyhow::Error::msg)?;
    Ok(CliClient::new(&settings))
}

/// Runs a long tuning command with progress on stderr, stopping cleanly on Ctrl-C/SIGTERM.
pub fn interruptible<T>(
    f: impl AsyncFnOnce(
        &mut tuning::measure::TerminalProgress,
        &mut watch::Receiver<bool>,
    ) -> Result<T, tuning::TuningError>,
) -> anyhow::Result<T> {
    Ok(runtime()?.block_on(async {
        let mut cancel = signals::cancel_on_signals();
        let mut progress = tuning::measure::TerminalProgress::new();
        f(&mut progress, &mut cancel).await
    })?)
}

pub fn fio_plan(args: &FioArgs) -> anyhow::Result<Option<tuning::measure::FioPlan>> {
    match (&args.fio_output, &args.fio_cmd) {
        (Some(path), _) => Ok(Some(
            tuning::measure::FioPlan::report(path).map_err(anyhow::Error::msg)?,
        )),
        (None, Some(cmd)) => Ok(Some(tuning::measure::FioPlan::Command(split_command(
            "--fio-cmd",
            cmd,
        )?))),
        (None, None) => Ok(None),
    }
}

pub fn split_command(flag: &str, cmd: &str) -> anyhow::Result<Vec<String>> {
    let argv = shell_words::split(cmd).with_context(|| format!("{flag} {cmd:?}"))?;
    if argv.is_empty() {
        anyhow::bail!("{flag} is empty");
    }
    Ok(argv)
}

/// An optional command flag (`--start-recovery` and the like), split into words.
pub fn optional_command(flag: &str, cmd: &Option<String>) -> anyhow::Result<Option<Vec<String>>> {
    cmd.as_deref().map(|c| split_command(flag, c)).transpose()
}
