//! `experiment`: issue #7's proof on the lab, by one command. Under the runbook's fio load, the
//! same controlled recovery (one where no PG is undersized, so the latency bound applies) runs
//! once per row: with no recovery (the baseline), under each mClock profile, and with the
//! enforcer (this binary's `serve --enforcer.mode enforce`, as a child) holding `multiplier x`
//! the baseline p99. One table answers "does the enforcer hold the bound, and what does that
//! cost the recovery?".
//!
//! Each recovery row: set the profile (the enforced row: the profile found, then start the
//! enforcer), start fio (a long runtime; it is stopped with SIGINT, on which fio ends its jobs
//! and still prints its whole report), run `--start-recovery`, wait until `ceph status` shows
//! objects degraded or misplaced, then until none are and no PG is recovering or backfilling
//! (at most `--max-recovery`), stop fio, and run `--stop-recovery` and wait, unmeasured, until
//! the cluster is clean again before the next row.
//!
//! The cluster is put back as it was found whatever happens (all rows done, a row failing or
//! timing out, Ctrl-C): the recovery stopped, `osd_mclock_profile` in the config database's
//! `osd` section as it was (`config rm` when it was not set), what the enforcer's state file
//! says it has not restored, and no nobackfill/norecover flag left set (the experiment refuses
//! to start while one is set, so one found later was set during the experiment).
//!
//! The pure parts (rows, judgement, rate, table, the enforcer's /metrics and /api/status) are
//! functions; the processes (fio, the recovery commands, the enforcer child) are behind
//! [`Processes`], so the orchestration runs against fakes under tokio's paused clock.

pub mod chart;
pub mod processes;
pub mod windows;

use std::collections::BTreeMap;
use std::future::Future;
use std::path::Path;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::sync::watch;
use tokio::time::Instant;

use super::cluster;
use super::cycle::daemons_took_it;
use super::measure::{cancelled, Progress};
use super::report::fmt_magnitude;
use super::TuningError;
use crate::ceph::parse::status::ClusterStatus;
use crate::ceph::Client;
use crate::units::{fmt_ms, fmt_secs};

/// Every row, in the order they run by default.
pub const DEFAULT_ROWS: &str = "no-recovery,balanced,high_client_ops,high_recovery_ops,enforced";

/// What the enforcer child gets besides what the experiment sets itself: short enough timings
/// that a lab recovery of a few minutes shows the whole ladder.
pub const DEFAULT_SERVE_ARGS: &str = "--collect.interval 2s --enforcer.for 4s --enforcer.latency-window 10s --enforcer.settle 5s --enforcer.min-interval 1s --enforcer.max-changes-per-hour 1000 --enforcer.ladder-settle 10s --enforcer.pause-period 10s";

/// The OSD map flags the enforcer's pause rung sets.
pub const PAUSE_FLAGS: [&str; 2] = ["nobackfill", "norecover"];

const PROFILE: &str = "osd_mclock_profile";

/// The client's write p99 is judged per window of this length: fio prints a cumulative report
/// this often (`--status-interval`); the enforced row's `serve` judges 10-s windows too (its
/// `--enforcer.latency-window` in [`DEFAULT_SERVE_ARGS`]).
pub const WINDOW: Duration = Duration::from_secs(10);

/// One row of the table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RowKind {
    NoRecovery,
    Profile(&'static str),
    Enforced,
    /// The enforcer with the backfill lever off (`--enforcer.backfill-lever off`): the ladder
    /// goes from the throttle to the duty-cycled pause, as before the lever existed; the row
    /// that measures the lever against the pause.
    EnforcedPauseOnly,
    /// The enforcer with the level controller (`--enforcer.controller levels`): the row that
    /// measures it against the ladder on the same recovery (issue 35's matrix).
    EnforcedLevels,
    /// One lever held for the whole recovery, without the enforcer: what it does to clients
    /// and recovery on this cluster and release (docs/enforcer.md, "Each lever on each release").
    Level(Level),
}

/// A lever at a fixed setting, on top of the operator's profile (`Limit` sets `custom`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    /// `osd_mclock_override_recovery_settings true` and `osd_max_backfills N`: honoured from
    /// Quincy 17.2.6 on (Pacific's mClock forces 1000 and has no override).
    Backfills(u8),
    /// The `custom` profile with the background recovery reservation at 0 and the recovery and
    /// best-effort (backfill) limits at this percentage of each OSD's capacity: mClock's units
    /// from Quincy 17.2.6 on (Pacific reads IOPS, so the row refuses there); the enforcer's rung
    /// 2 with `--enforcer.recovery-limits P%`.
    Limit(u8),
}

impl Level {
    /// The settings in the config database's `osd` section, in the order they are set (and put
    /// back in reverse).
    pub fn settings(self) -> Vec<(&'static str, String)> {
        match self {
            Level::Backfills(n) => vec![
                ("osd_mclock_override_recovery_settings", "true".to_string()),
                ("osd_max_backfills", n.to_string()),
            ],
            // Exactly what the enforcer's rung 2 writes for `--enforcer.recovery-limits P%`, so
            // the row measures the enforcer's lever.
            Level::Limit(pct) => crate::enforcer::ladder::mclock_limit_values(
                crate::enforcer::policy::RecoveryLimit::Percent(pct),
            ),
        }
    }

    /// Why the OSDs' release (every OSD's major version) cannot run this level, if it cannot.
    pub fn refusal(self, osd_release: Option<u32>) -> Option<String> {
        let what = match self {
            Level::Backfills(_) => "osd_max_backfills is honoured under mClock only with osd_mclock_override_recovery_settings, from Quincy 17.2.6 on",
            Level::Limit(_) => "mClock's limits are fractions of each OSD's capacity from Quincy 17.2.6 on (Pacific reads IOPS: 0.10 would be a tenth of an IOPS)",
        };
        match osd_release {
            Some(r) if r >= 18 => None,
            Some(r) => Some(format!(
                "row {}: the OSDs run Ceph {r}, and {what}; this row needs Reef (18) or later",
                RowKind::Level(self).name()
            )),
            None => Some(format!(
                "row {}: the OSDs' release is unknown or not the same on every OSD (`ceph versions`), and {what}",
                RowKind::Level(self).name()
            )),
        }
    }
}

impl RowKind {
    pub const PROFILES: [&'static str; 3] = ["balanced", "high_client_ops", "high_recovery_ops"];

    /// As given to `--rows`.
    pub fn name(self) -> String {
        match self {
            RowKind::NoRecovery => "no-recovery".into(),
            RowKind::Profile(p) => p.into(),
            RowKind::Enforced => "enforced".into(),
            RowKind::EnforcedPauseOnly => "enforced-pause-only".into(),
            RowKind::EnforcedLevels => "enforced-levels".into(),
            RowKind::Level(Level::Backfills(n)) => format!("backfills-{n}"),
            RowKind::Level(Level::Limit(pct)) => format!("limit-{pct}"),
        }
    }

    /// A row run with the enforcer as a child.
    pub fn is_enforced(self) -> bool {
        matches!(
            self,
            RowKind::Enforced | RowKind::EnforcedPauseOnly | RowKind::EnforcedLevels
        )
    }

    /// Flags the row's `serve` gets after `--serve-args`.
    pub fn serve_extra(self) -> &'static [&'static str] {
        match self {
            RowKind::EnforcedPauseOnly => &["--enforcer.backfill-lever", "off"],
            RowKind::EnforcedLevels => &["--enforcer.controller", "levels"],
            _ => &[],
        }
    }

    /// As shown in the table.
    pub fn label(self, multiplier: f64) -> String {
        match self {
            RowKind::NoRecovery => "no recovery".to_string(),
            RowKind::Profile(p) => p.to_string(),
            RowKind::Enforced => format!("enforced ({multiplier}x)"),
            RowKind::EnforcedPauseOnly => format!("enforced, pause only ({multiplier}x)"),
            RowKind::EnforcedLevels => format!("enforced, levels ({multiplier}x)"),
            RowKind::Level(Level::Backfills(n)) => {
                format!("osd_max_backfills {n} (override on)")
            }
            RowKind::Level(Level::Limit(pct)) => {
                format!("custom, recovery and backfill limit {pct}% of capacity")
            }
        }
    }
}

/// Whether a row of the result (by its `--rows` name) ran the enforcer.
fn is_enforced_row(name: &str) -> bool {
    [
        RowKind::Enforced,
        RowKind::EnforcedPauseOnly,
        RowKind::EnforcedLevels,
    ]
    .iter()
    .any(|k| k.name() == name)
}

/// `--rows`: comma-separated, no repeats, starting with no-recovery (its p99 is the baseline
/// every other row and the enforcer's bound are judged by).
pub fn parse_rows(s: &str) -> Result<Vec<RowKind>, String> {
    let mut rows = Vec::new();
    for word in s.split(',').map(str::trim).filter(|w| !w.is_empty()) {
        let row = match word {
            "no-recovery" | "no_recovery" => RowKind::NoRecovery,
            "enforced" => RowKind::Enforced,
            "enforced-pause-only" => RowKind::EnforcedPauseOnly,
            "enforced-levels" => RowKind::EnforcedLevels,
            other => match RowKind::PROFILES.iter().find(|p| **p == other) {
                Some(p) => RowKind::Profile(p),
                None => match parse_level(other) {
                    Some(level) => RowKind::Level(level?),
                    None => {
                        return Err(format!(
                            "--rows: unknown row {other:?}; the rows are {}, enforced-pause-only, enforced-levels, backfills-N (1-16) and limit-P (1-100)",
                            DEFAULT_ROWS.replace(',', ", ")
                        ))
                    }
                },
            },
        };
        if rows.contains(&row) {
            return Err(format!("--rows: {word} is given twice"));
        }
        rows.push(row);
    }
    match rows.first() {
        Some(RowKind::NoRecovery) => Ok(rows),
        _ => Err(format!(
            "--rows must start with no-recovery: its p99 is the baseline every other row, and the enforcer's bound, is judged by (e.g. --rows {DEFAULT_ROWS})"
        )),
    }
}

/// `backfills-N` or `limit-P`; `None` when the word is neither.
fn parse_level(word: &str) -> Option<Result<Level, String>> {
    let (what, number, max) = if let Some(n) = word.strip_prefix("backfills-") {
        ("backfills", n, 16)
    } else if let Some(p) = word.strip_prefix("limit-") {
        ("limit", p, 100)
    } else {
        return None;
    };
    Some(match number.parse::<u8>() {
        Ok(n) if (1..=max).contains(&n) => Ok(if what == "backfills" {
            Level::Backfills(n)
        } else {
            Level::Limit(n)
        }),
        _ => Err(format!(
            "--rows: {word}: {what}-N takes a whole number from 1 to {max} (e.g. {what}-{})",
            if what == "backfills" { 2 } else { 10 }
        )),
    })
}

#[derive(Debug, Clone)]
pub struct ExperimentPlan {
    /// The fio command (argv): runs until stopped with SIGINT, then prints its report.
    pub fio: Vec<String>,
    pub start_recovery: Option<Vec<String>>,
    pub stop_recovery: Option<Vec<String>>,
    pub rows: Vec<RowKind>,
    pub baseline_window: Duration,
    pub multiplier: f64,
    /// A recovery row (and the clean-up after it) gets at most this long.
    pub max_recovery: Duration,
    /// How often `ceph status` (and the enforcer's /metrics) is read during a row.
    pub poll_every: Duration,
    /// How long the enforcer child gets to answer on /metrics after it starts.
    pub enforcer_ready_within: Duration,
    /// How long the enforcer gets, after the recovery finished, to restore what it set.
    pub enforcer_idle_within: Duration,
    /// The enforcer child's metrics path (`--web.telemetry-path`).
    pub metrics_path: String,
    /// fio reports every this long; each row's p99 is also judged per window of it.
    pub window: Duration,
}

impl ExperimentPlan {
    /// The plan's own consistency; nothing asked of the cluster yet.
    pub fn check(&self) -> Result<(), String> {
        if self.fio.is_empty() {
            return Err("--fio-cmd is empty".into());
        }
        if !(self.multiplier > 1.0 && self.multiplier.is_finite()) {
            return Err(format!(
                "--multiplier {} must be a number above 1",
                self.multiplier
            ));
        }
        if self.rows.first() != Some(&RowKind::NoRecovery) {
            return Err("the rows must start with no-recovery".into());
        }
        if self.window.as_secs() == 0 {
            return Err("the window must be at least 1 s (fio's --status-interval)".into());
        }
        if self.baseline_window.is_zero() || self.max_recovery.is_zero() {
            return Err("--baseline-window and --max-recovery must be longer than 0".into());
        }
        if self.rows.len() > 1 && (self.start_recovery.is_none() || self.stop_recovery.is_none()) {
            return Err(format!(
                "the rows {} run a controlled recovery: give --start-recovery and --stop-recovery (e.g. 'scripts/ceph-lab rebalance-start 3 0.2' and 'scripts/ceph-lab rebalance-stop')",
                self.rows[1..]
                    .iter()
                    .map(|r| r.name())
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
        Ok(())
    }
}

/// The fio command as run: the user's, then a cumulative `json+` report every window (later
/// options win in fio, so these replace an `--output-format` given before them).
pub fn fio_argv(fio: &[String], window: Duration) -> Vec<String> {
    let mut argv = fio.to_vec();
    argv.push(format!("--status-interval={}", window.as_secs().max(1)));
    argv.push("--output-format=json+".to_string());
    argv
}

/// A row is within the bound when its p99 is at most `multiplier x` the baseline p99.
pub fn within_bound(p99: f64, baseline_p99: f64, multiplier: f64) -> bool {
    p99 <= multiplier * baseline_p99
}

/// The recovery rate of a row: the most objects seen degraded + misplaced at once (what the
/// recovery had to move; the count only falls once it has started) divided by the recovery
/// time, from running `--start-recovery` to the first `ceph status` showing none left and no PG
/// recovering or backfilling. `None` when there is nothing to divide.
pub fn recovery_rate(peak_objects: u64, recovery: Duration) -> Option<f64> {
    let secs = recovery.as_secs_f64();
    (peak_objects > 0 && secs > 0.0).then(|| peak_objects as f64 / secs)
}

fn remaining(status: &ClusterStatus) -> u64 {
    status
        .degraded_objects
        .saturating_add(status.misplaced_objects)
}

/// Nothing left to move and every PG active+clean (scrubbing or not): the cluster as a row
/// must start on.
pub fn all_clean(status: &ClusterStatus) -> bool {
    let clean: u64 = status
        .pgs_by_state
        .iter()
        .filter(|(state, _)| {
            let words: Vec<&str> = state.split('+').collect();
            words.contains(&"active") && words.contains(&"clean")
        })
        .map(|(_, n)| *n)
        .sum();
    !status.recovery_running() && clean == status.num_pgs
}

/// The value of an unlabelled sample in Prometheus' text format (the first sample of `name`,
/// labels or not). `None` when absent or not a number.
pub fn metric_value(text: &str, name: &str) -> Option<f64> {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.starts_with('#'))
        .find_map(|line| {
            let rest = line.strip_prefix(name)?;
            let rest = if rest.starts_with('{') {
                &rest[rest.rfind('}')? + 1..]
            } else if rest.starts_with([' ', '\t']) {
                rest
            } else {
                return None; // another metric whose name starts with this one
            };
            rest.split_whitespace().next()?.parse::<f64>().ok()
        })
}

/// `enforcer.phase` of `/api/status` ("idle", "throttled", ...).
/// How many PGs the enforcer's backfill lever holds, from its `/api/status`.
pub fn held_pgs(status_json: &str) -> Option<u64> {
    let v: serde_json::Value = serde_json::from_str(status_json).ok()?;
    v.get("enforcer")?.get("backfill_held")?.as_u64()
}

/// Whether the enforcer counts the recovery as running (`/api/status`); `None` when not said.
pub fn enforcer_recovering(status_json: &str) -> Option<bool> {
    let v: serde_json::Value = serde_json::from_str(status_json).ok()?;
    v.get("enforcer")?.get("recovery_active")?.as_bool()
}

pub fn enforcer_phase(status_json: &str) -> Option<String> {
    let v: serde_json::Value = serde_json::from_str(status_json).ok()?;
    v.get("enforcer")?
        .get("phase")?
        .as_str()
        .map(str::to_string)
}

/// `/decisions` (newest first) as a list, oldest first.
pub fn decisions_oldest_first(json: &str) -> Result<Vec<serde_json::Value>, String> {
    match serde_json::from_str::<serde_json::Value>(json) {
        Ok(serde_json::Value::Array(mut list)) => {
            list.reverse();
            Ok(list)
        }
        Ok(_) => Err("/decisions did not answer a JSON array".into()),
        Err(e) => Err(format!("/decisions did not answer JSON: {e}")),
    }
}

/// `--enforcer.baseline` for a p99 in seconds: "45.5ms" (to the microsecond).
pub fn baseline_arg(p99_seconds: f64) -> String {
    let us = (p99_seconds * 1e6).round().max(1.0) as u64;
    let ms = format!("{}.{:03}", us / 1000, us % 1000);
    format!("{}ms", ms.trim_end_matches('0').trim_end_matches('.'))
}

/// The enforcer child's command line (after the program): what the experiment sets, then
/// `rest` (the ceph connection and `--serve-args`).
pub fn serve_argv(
    listen: &str,
    baseline_p99_seconds: f64,
    multiplier: f64,
    state_file: &Path,
    rest: &[String],
) -> Vec<String> {
    let mut argv: Vec<String> = [
        "serve",
        "--web.listen-address",
        listen,
        "--enforcer.mode",
        "enforce",
        "--enforcer.baseline",
        &baseline_arg(baseline_p99_seconds),
        "--enforcer.multiplier",
        &multiplier.to_string(),
        // Each enforced row starts from the breach alone, whatever an earlier row (or a real
        // recovery) left in the cluster's memory, and leaves that memory as it was.
        "--enforcer.memory",
        "off",
        "--enforcer.state-file",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    argv.push(state_file.display().to_string());
    argv.extend(rest.iter().cloned());
    argv
}

/// The experiment's ceph connection, as `serve` flags (`serve` takes the same ones).
pub fn serve_ceph_args(
    ceph_cmd: &str,
    conf: Option<&str>,
    name: Option<&str>,
    keyring: Option<&str>,
    timeout: Duration,
) -> Vec<String> {
    let mut out = vec!["--ceph-cmd".to_string(), ceph_cmd.to_string()];
    for (flag, value) in [
        ("--ceph-conf", conf),
        ("--ceph-name", name),
        ("--ceph-keyring", keyring),
    ] {
        if let Some(v) = value {
            out.push(flag.to_string());
            out.push(v.to_string());
        }
    }
    out.push("--ceph-timeout".to_string());
    out.push(humantime::format_duration(timeout).to_string());
    out
}

/// The lease `serve` needs for the experiment's Ceph timeout: the gap between its renew deadline
/// and the lease's expiry must hold one command (`LeaseConfig::check_command_timeout`), and the
/// experiment's timeout (30 s by default) is longer than serve's. The default renew deadline
/// stays; the lease lasts that much longer. Nothing when `--serve-args` sets the lease itself.
pub fn serve_lease_args(timeout: Duration, serve_words: &[String]) -> Vec<String> {
    let set_by_hand = serve_words.iter().any(|w| {
        w.starts_with("--enforcer.lease-duration")
            || w.starts_with("--enforcer.lease-renew-deadline")
    });
    let lease = crate::lease::LeaseConfig::DEFAULT;
    if set_by_hand || lease.check_command_timeout(timeout).is_ok() {
        return Vec::new();
    }
    let duration = lease.renew_deadline + timeout + crate::lease::LeaseConfig::COMMAND_MARGIN;
    vec![
        "--enforcer.lease-duration".to_string(),
        humantime::format_duration(duration).to_string(),
    ]
}

/// Flags the experiment sets itself (or passes on from its own flags): not in `--serve-args`.
const OWN_SERVE_FLAGS: [(&str, &str); 11] = [
    ("--web.listen-address", "a free port on 127.0.0.1 is chosen"),
    (
        "--web.config.file",
        "the child listens on 127.0.0.1 only, in plain HTTP, where the experiment reads its /metrics and /api/status",
    ),
    ("--enforcer.mode", "the enforced row runs enforce mode"),
    (
        "--enforcer.baseline",
        "the no-recovery row's p99 is the baseline",
    ),
    ("--enforcer.multiplier", "give --multiplier"),
    ("--enforcer.state-file", "a fresh state file is used"),
    (
        "--enforcer.memory",
        "off: rows are compared from the same start, and the cluster's memory is left as it was",
    ),
    ("--ceph-cmd", "give the experiment's --ceph-cmd"),
    ("--ceph-conf", "give the experiment's --ceph-conf"),
    ("--ceph-name", "give the experiment's --ceph-name"),
    ("--ceph-keyring", "give the experiment's --ceph-keyring"),
];

/// The enforced row's `serve` flags: [`DEFAULT_SERVE_ARGS`] (timings for 10-s windows) with
/// `words` after them, so that `--serve-args '--enforcer.recovery-limits 3%'` adds to the
/// timings instead of dropping them. A default is left out where `words` gives the same flag
/// or one it must follow (serve checks the ladder's settle against the latency window and the
/// pause period against the collection interval), and all of them with `--config.file`, whose
/// own timings would otherwise be overridden.
pub fn with_default_serve_args(words: &[String]) -> Vec<String> {
    let given: Vec<&str> = words
        .iter()
        .filter(|w| w.starts_with("--"))
        .map(|w| w.split_once('=').map_or(w.as_str(), |(f, _)| f))
        .collect();
    if given.contains(&"--config.file") {
        return words.to_vec();
    }
    // (a default, the flag it follows)
    const FOLLOWS: [(&str, &str); 2] = [
        ("--enforcer.ladder-settle", "--enforcer.latency-window"),
        ("--enforcer.pause-period", "--collect.interval"),
    ];
    let defaults: Vec<&str> = DEFAULT_SERVE_ARGS.split_whitespace().collect();
    defaults
        .chunks(2)
        .filter(|pair| {
            let flag = pair[0];
            !given.contains(&flag)
                && !FOLLOWS
                    .iter()
                    .any(|(d, on)| *d == flag && given.contains(on))
        })
        .flatten()
        .map(|w| w.to_string())
        .chain(words.iter().cloned())
        .collect()
}

/// Refuses `--serve-args` that set what the experiment sets.
pub fn check_serve_args(words: &[String]) -> Result<(), String> {
    for w in words {
        for (flag, why) in OWN_SERVE_FLAGS {
            if w == flag || w.starts_with(&format!("{flag}=")) {
                return Err(format!(
                    "--serve-args must not contain {flag}: the experiment sets it ({why})"
                ));
            }
        }
        if w == "--ceph-timeout" || w.starts_with("--ceph-timeout=") {
            return Err("--serve-args must not contain --ceph-timeout: give the experiment's --ceph-timeout (passed on to serve)".into());
        }
    }
    Ok(())
}

/// `--web.telemetry-path` in `--serve-args`, else serve's default.
pub fn telemetry_path(words: &[String]) -> String {
    let flag = "--web.telemetry-path";
    let mut it = words.iter();
    while let Some(w) = it.next() {
        if w == flag {
            if let Some(v) = it.next() {
                return v.clone();
            }
        } else if let Some(v) = w.strip_prefix(&format!("{flag}=")) {
            return v.to_string();
        }
    }
    "/metrics".to_string()
}

/// Starts and runs the processes of a row. The real one is [`processes::RealProcesses`].
pub trait Processes: Send + Sync {
    type Fio: RunningFio;
    type Enforcer: RunningEnforcer;
    /// Runs a short command (`--start-recovery`, `--stop-recovery`) to its end; its stdout.
    fn run(&self, argv: &[String]) -> impl Future<Output = Result<String, String>> + Send;
    /// Starts the fio command; it runs until [`RunningFio::stop`].
    fn start_fio(&self, argv: &[String]) -> Result<Self::Fio, String>;
    /// Starts `serve --enforcer.mode enforce` with this baseline (seconds) and multiplier.
    fn start_enforcer(
        &self,
        baseline_p99_seconds: f64,
        multiplier: f64,
        extra: &[&str],
    ) -> Result<Self::Enforcer, String>;
}

/// fio running for a row.
pub trait RunningFio: Send {
    /// `Some(how)` once fio has ended by itself (it should run until stopped).
    fn ended(&mut self) -> Option<String>;
    /// Stops fio (SIGINT: it ends its jobs and prints its whole report) and returns its report;
    /// the report it printed when it ended by itself; or why there is none.
    fn stop(self) -> impl Future<Output = Result<String, String>> + Send;
}

/// The enforcer child (`serve`).
pub trait RunningEnforcer: Send {
    /// The body of `GET path` (status 200 only).
    fn get(&self, path: &str) -> impl Future<Output = Result<String, String>> + Send;
    /// `Some(why)` once it has exited, with the last lines it wrote.
    fn exited(&mut self) -> Option<String>;
    /// SIGTERM (it clears its pause flags on the way out), then waits for it to exit.
    fn stop(self) -> impl Future<Output = EnforcerEnd> + Send;
}

/// How the enforcer child ended.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct EnforcerEnd {
    /// `Some(what went wrong)`: it did not exit cleanly on SIGTERM.
    pub problem: Option<String>,
    /// From its state file: what it changed and has not restored, with the value before
    /// (`None`: was not set).
    pub unrestored: BTreeMap<String, Option<String>>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExperimentRow {
    /// As given to `--rows`.
    pub row: String,
    pub label: String,
    pub p50_seconds: Option<f64>,
    pub p95_seconds: Option<f64>,
    pub p99_seconds: Option<f64>,
    pub p99_over_baseline: Option<f64>,
    /// p99 <= multiplier x the baseline p99.
    pub within_bound: Option<bool>,
    /// From `--start-recovery` to finished.
    pub recovery_seconds: Option<f64>,
    /// The most objects seen degraded + misplaced at once.
    pub recovery_objects: Option<u64>,
    /// `recovery_objects / recovery_seconds`.
    pub objects_per_second: Option<f64>,
    /// Why the row is not complete (timed out, failed, interrupted).
    pub incomplete: Option<String>,
    /// When fio started (Unix seconds): the windows' times are from it.
    pub fio_started_at: Option<f64>,
    /// The client's write p99 per window, from fio's periodic reports.
    pub windows: Vec<windows::RowWindow>,
    /// Why there are no windows (fio's output had no periodic json+ reports...).
    pub windows_missing: Option<String>,
    /// The fraction (0..1) of the windows whose p99 is at most the bound; a window with no
    /// write counts as not within.
    pub windows_within_bound: Option<f64>,
    pub worst_window_p99_seconds: Option<f64>,
    /// The enforced row: from the first window over the bound to the first of three
    /// consecutive windows back within it (`None`: never over, or never back).
    pub reaction_seconds: Option<f64>,
}

impl ExperimentRow {
    /// The enforcer's own p99 was read in at least one of the row's windows.
    pub fn has_enforcer_readings(&self) -> bool {
        self.windows
            .iter()
            .any(|w| w.enforcer_p99_seconds.is_some())
    }
}

/// The enforced row's view of the enforcer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EnforcerSummary {
    /// The highest `ceph_recovery_budget_ladder_rung` seen during the row.
    pub top_rung: u8,
    /// `ceph_recovery_budget_paused_seconds` at the end of the row.
    pub paused_seconds: Option<f64>,
    /// The enforcer reported phase idle (it had restored what it set) after the recovery.
    pub idle_after_recovery: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExperimentResult {
    pub baseline_p99_seconds: Option<f64>,
    pub multiplier: f64,
    /// The windows' length (fio's `--status-interval`).
    pub window_seconds: f64,
    /// multiplier x the baseline p99.
    pub bound_seconds: Option<f64>,
    pub rows: Vec<ExperimentRow>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub enforcer: Option<EnforcerSummary>,
    /// The enforcer's decision records of the enforced rows, oldest first, each with the row
    /// it came from (`experiment_row`, its `--rows` name).
    pub decisions: Vec<serde_json::Value>,
    pub notes: Vec<String>,
    /// What was put back at the end.
    pub restored: Vec<String>,
    /// What could not be put back: to do by hand.
    pub not_restored: Vec<String>,
    /// Every row ran to its end.
    pub complete: bool,
    /// Stopped by Ctrl-C or a signal.
    pub interrupted: bool,
}

impl ExperimentResult {
    /// The decisions of one enforced row (its `--rows` name), oldest first. A decision without
    /// `experiment_row` (a result of a version with one enforced row) is the enforced row's.
    pub fn decisions_of<'a>(&'a self, row: &'a str) -> impl Iterator<Item = &'a serde_json::Value> {
        self.decisions.iter().filter(move |d| {
            d.get("experiment_row")
                .and_then(|r| r.as_str())
                .unwrap_or("enforced")
                == row
        })
    }

    /// 0: every row done and everything put back; 130: interrupted; 1: otherwise.
    pub fn exit_code(&self) -> u8 {
        if self.interrupted {
            130
        } else if self.complete && self.not_restored.is_empty() {
            0
        } else {
            1
        }
    }
}

fn refuse(msg: impl Into<String>) -> TuningError {
    TuningError::Refused(msg.into())
}

/// Why a stage of a row ended.
#[derive(Debug, Clone, PartialEq)]
enum Ended {
    Done,
    Failed(String),
    /// The row could not be measured fully; the row says why.
    Incomplete,
    /// Ctrl-C or a signal; says after how long.
    Cancelled(String),
}

/// What was seen of a recovery.
#[derive(Debug, Clone, Default)]
struct Watched {
    peak: u64,
    left: u64,
    finished_after: Option<Duration>,
    undersized_peak: u64,
    top_rung: u8,
    paused_seconds: Option<f64>,
    /// PGs the enforcer's backfill lever held at the last poll.
    held: u64,
    /// The enforcer's own p99 at each poll: (Unix seconds, p99 seconds).
    enforcer_p99: Vec<(f64, f64)>,
}

/// A row from what was measured. Pure.
fn build_row(
    kind: RowKind,
    multiplier: f64,
    baseline: Option<f64>,
    window: Duration,
    report: Result<String, String>,
    watched: Option<&Watched>,
    mut incomplete: Option<String>,
) -> ExperimentRow {
    let mut row = ExperimentRow {
        row: kind.name().to_string(),
        label: kind.label(multiplier),
        p50_seconds: None,
        p95_seconds: None,
        p99_seconds: None,
        p99_over_baseline: None,
        within_bound: None,
        recovery_seconds: None,
        recovery_objects: None,
        objects_per_second: None,
        incomplete: None,
        fio_started_at: None,
        windows: Vec::new(),
        windows_missing: None,
        windows_within_bound: None,
        worst_window_p99_seconds: None,
        reaction_seconds: None,
    };
    let fio_windows = report
        .as_ref()
        .ok()
        .map(|text| crate::fio::write_windows(text, window));
    match report.and_then(|text| {
        crate::fio::parse(&text).map_err(|e| format!("fio's output is not a usable report: {e}"))
    }) {
        Ok(summary) => match summary.write.as_ref().map(|w| &w.latency_seconds) {
            Some(p) if p.p99.is_some() => {
                row.p50_seconds = p.p50;
                row.p95_seconds = p.p95;
                row.p99_seconds = p.p99;
            }
            _ => {
                incomplete.get_or_insert_with(|| "fio's report has no write completion-latency p99: the fio job must write and report percentiles".to_string());
            }
        },
        Err(e) => {
            incomplete.get_or_insert(e);
        }
    }
    let baseline = match kind {
        RowKind::NoRecovery => row.p99_seconds,
        _ => baseline,
    };
    if let (Some(p99), Some(b)) = (row.p99_seconds, baseline.filter(|b| *b > 0.0)) {
        row.p99_over_baseline = Some(p99 / b);
        row.within_bound = Some(within_bound(p99, b, multiplier));
    }
    let bound = baseline.filter(|b| *b > 0.0).map(|b| b * multiplier);
    match fio_windows {
        Some(Ok(w)) => {
            if let Some((start, w)) = windows::from_fio(&w) {
                row.fio_started_at = Some(start);
                row.worst_window_p99_seconds = windows::worst_p99(&w);
                if let Some(b) = bound {
                    row.windows_within_bound = windows::within_fraction(&w, b);
                    if kind.is_enforced() {
                        row.reaction_seconds = windows::reaction(&w, b).seconds();
                    }
                }
                row.windows = w;
                if let Some(seen) = watched {
                    windows::attach_enforcer_p99(&mut row.windows, start, &seen.enforcer_p99);
                }
            } else {
                row.windows_missing = Some("fio printed no report".to_string());
            }
        }
        Some(Err(e)) => row.windows_missing = Some(e.to_string()),
        None => {}
    }
    if let Some(w) = watched {
        row.recovery_objects = (w.peak > 0).then_some(w.peak);
        if let Some(t) = w.finished_after {
            row.recovery_seconds = Some(t.as_secs_f64());
            row.objects_per_second = recovery_rate(w.peak, t);
        }
    }
    row.incomplete = incomplete;
    row
}

struct Run<'a, C, P> {
    client: &'a C,
    procs: &'a P,
    plan: &'a ExperimentPlan,
    /// `osd_mclock_profile` in the config database's `osd` section when the experiment started.
    found: Option<String>,
    found_text: String,
    /// What the OSDs ran then.
    running_at_start: Option<String>,
    /// A `--start-recovery` ran and its `--stop-recovery` has not.
    recovery_started: bool,
    /// The profile (or another setting) may differ from what was found.
    changed: bool,
    /// What the enforcer's state file said it had not restored.
    leftovers: BTreeMap<String, Option<String>>,
    /// The config database's value (`None`: not set) of each setting a level row set and has
    /// not put back yet, as found before the row.
    levels_found: BTreeMap<String, Option<String>>,
    result: ExperimentResult,
}

/// Runs the experiment. Refuses (before changing anything) when the OSDs do not run mClock, a
/// recovery is running, or nobackfill/norecover is set. Afterwards it always returns the rows
/// measured, having put the cluster back (what it could not is in `not_restored`).
pub async fn experiment<C: Client, P: Processes>(
    client: &C,
    procs: &P,
    plan: &ExperimentPlan,
    progress: &mut dyn Progress,
    cancel: &mut watch::Receiver<bool>,
) -> Result<ExperimentResult, TuningError> {
    plan.check().map_err(refuse)?;
    let (facts, warnings) = cluster::scheduler_facts(client).await?;
    if facts.is_mclock() != Some(true) {
        return Err(refuse(format!(
            "the OSDs run osd_op_queue {}: the experiment compares mClock profiles, which only exist under mclock_scheduler (osd_op_queue in ceph.conf, read at OSD start)",
            facts.op_queue.as_deref().unwrap_or("(they do not agree)")
        )));
    }
    // A level the release does not read as meant is refused before anything changes.
    let refusals: Vec<String> = plan
        .rows
        .iter()
        .filter_map(|r| match r {
            RowKind::Level(l) => l.refusal(facts.osd_release),
            _ => None,
        })
        .collect();
    if !refusals.is_empty() {
        return Err(refuse(refusals.join("; ")));
    }
    let now = cluster::status(client).await?;
    if now.recovery_running() {
        return Err(refuse(format!(
            "a recovery is already running ({}): the no-recovery row would be wrong; start on a clean cluster",
            now.recovery_counts().describe()
        )));
    }
    let flags = cluster::osd_flags(client).await?;
    let set: Vec<&str> = PAUSE_FLAGS
        .into_iter()
        .filter(|f| flags.contains(*f))
        .collect();
    if !set.is_empty() {
        return Err(refuse(format!(
            "{} set (`ceph osd dump | grep flags`): recovery is paused, so no row would recover; unset with `ceph osd unset {}` if nobody needs it, then run again",
            set.join(" and "),
            set.join("; ceph osd unset ")
        )));
    }
    let found = cluster::osd_section_value(&cluster::config_dump(client).await?, PROFILE);
    let found_text = match &found {
        Some(p) => format!("{p} (set in the config database)"),
        None => format!(
            "not set in the config database (the OSDs ran {})",
            facts.mclock_profile.as_deref().unwrap_or("?")
        ),
    };
    let mut run = Run {
        client,
        procs,
        plan,
        found,
        found_text,
        running_at_start: facts.mclock_profile.clone(),
        recovery_started: false,
        changed: false,
        leftovers: BTreeMap::new(),
        levels_found: BTreeMap::new(),
        result: ExperimentResult {
            baseline_p99_seconds: None,
            multiplier: plan.multiplier,
            window_seconds: plan.window.as_secs_f64(),
            bound_seconds: None,
            rows: Vec::new(),
            enforcer: None,
            decisions: Vec::new(),
            notes: warnings,
            restored: Vec::new(),
            not_restored: Vec::new(),
            complete: false,
            interrupted: false,
        },
    };

    let total = plan.rows.len();
    let mut ended = Ended::Done;
    for (i, kind) in plan.rows.iter().enumerate() {
        progress.say(&format!(
            "row {}/{total}: {}",
            i + 1,
            kind.label(plan.multiplier)
        ));
        ended = match *kind {
            RowKind::NoRecovery => run.no_recovery_row(progress, cancel).await,
            RowKind::Profile(p) => run.profile_row(p, progress, cancel).await,
            k @ (RowKind::Enforced | RowKind::EnforcedPauseOnly | RowKind::EnforcedLevels) => {
                run.enforced_row(k, progress, cancel).await
            }
            RowKind::Level(level) => run.level_row(level, progress, cancel).await,
        };
        if ended != Ended::Done {
            break;
        }
    }
    match &ended {
        Ended::Done => run.result.complete = true,
        Ended::Failed(why) => run.result.notes.push(format!("incomplete: {why}")),
        Ended::Incomplete => {}
        Ended::Cancelled(_) => run.result.interrupted = true,
    }
    run.restore_all(progress).await;
    Ok(run.result)
}

impl<C: Client, P: Processes> Run<'_, C, P> {
    fn baseline(&self) -> Option<f64> {
        self.result.baseline_p99_seconds
    }

    fn push(&mut self, row: ExperimentRow, progress: &mut dyn Progress) {
        progress.say(&row_line(&row, self.baseline()));
        self.result.rows.push(row);
    }

    /// A row that ends before anything was measured.
    fn failed_row(&mut self, kind: RowKind, why: String, progress: &mut dyn Progress) -> Ended {
        let row = build_row(
            kind,
            self.plan.multiplier,
            self.baseline(),
            self.plan.window,
            Err(why.clone()),
            None,
            Some(why.clone()),
        );
        self.push(row, progress);
        Ended::Incomplete
    }

    async fn no_recovery_row(
        &mut self,
        progress: &mut dyn Progress,
        cancel: &mut watch::Receiver<bool>,
    ) -> Ended {
        let kind = RowKind::NoRecovery;
        let window = self.plan.baseline_window;
        progress.say(&format!(
            "no recovery: fio for {} ({})",
            fmt_secs(window.as_secs_f64()),
            shell_words::join(&self.plan.fio)
        ));
        let mut fio = match self
            .procs
            .start_fio(&fio_argv(&self.plan.fio, self.plan.window))
        {
            Ok(f) => f,
            Err(e) => return self.failed_row(kind, format!("fio did not start: {e}"), progress),
        };
        let start = Instant::now();
        let end = start + window;
        let mut ended = Ended::Done;
        let mut moved = false;
        loop {
            if let Some(how) = fio.ended() {
                self.result.notes.push(format!(
                    "fio ended on its own {} into the no-recovery row ({how}), before the {} window: the baseline covers that much",
                    fmt_secs(start.elapsed().as_secs_f64()),
                    fmt_secs(window.as_secs_f64())
                ));
                break;
            }
            if let Ok(s) = cluster::status(self.client).await {
                if s.recovery_running() && !moved {
                    moved = true;
                    self.result.notes.push(format!(
                        "objects became degraded or misplaced during the no-recovery row ({} left): the baseline is not one without recovery",
                        remaining(&s)
                    ));
                }
            }
            let now = Instant::now();
            if now >= end {
                break;
            }
            progress.update(&format!(
                "no recovery: {} of {}, fio running",
                fmt_secs((now - start).as_secs_f64()),
                fmt_secs(window.as_secs_f64())
            ));
            tokio::select! {
                _ = tokio::time::sleep_until((now + self.plan.poll_every).min(end)) => {}
                _ = cancelled(cancel) => { ended = Ended::Cancelled(interrupted_after(start)); break; }
            }
        }
        progress.done();
        let report = fio.stop().await;
        let incomplete = match &ended {
            Ended::Cancelled(why) => Some(why.clone()),
            _ => None,
        };
        let row = build_row(
            kind,
            self.plan.multiplier,
            None,
            self.plan.window,
            report,
            None,
            incomplete,
        );
        let why = row.incomplete.clone();
        if why.is_none() {
            self.result.baseline_p99_seconds = row.p99_seconds;
            self.result.bound_seconds = row.p99_seconds.map(|p| p * self.plan.multiplier);
        }
        self.push(row, progress);
        match (ended, why) {
            (Ended::Cancelled(why), _) => Ended::Cancelled(why),
            (_, Some(_)) => Ended::Incomplete,
            (e, None) => e,
        }
    }

    async fn profile_row(
        &mut self,
        profile: &'static str,
        progress: &mut dyn Progress,
        cancel: &mut watch::Receiver<bool>,
    ) -> Ended {
        let kind = RowKind::Profile(profile);
        self.changed = true;
        if let Err(e) = cluster::set(self.client, PROFILE, profile).await {
            return self.failed_row(kind, format!("setting {PROFILE} failed: {e}"), progress);
        }
        if let Some(w) = daemons_took_it(self.client, PROFILE, profile, progress, cancel).await {
            self.result.notes.push(format!("{profile}: {w}"));
        }
        let mut fio = match self
            .procs
            .start_fio(&fio_argv(&self.plan.fio, self.plan.window))
        {
            Ok(f) => f,
            Err(e) => return self.failed_row(kind, format!("fio did not start: {e}"), progress),
        };
        let (watched, ended) = self
            .drive_recovery::<P::Enforcer>(profile, &mut fio, None, progress, cancel)
            .await;
        let report = fio.stop().await;
        self.finish_recovery_row(kind, report, &watched, ended, progress, cancel)
            .await
    }

    /// One lever held for the recovery: the operator's profile, the level's settings (checked
    /// on the OSDs: a note says which did not take one), fio and the recovery, the settings put
    /// back as found before the data moves back.
    async fn level_row(
        &mut self,
        level: Level,
        progress: &mut dyn Progress,
        cancel: &mut watch::Receiver<bool>,
    ) -> Ended {
        let kind = RowKind::Level(level);
        let label = kind.label(self.plan.multiplier);
        if let Err(ended) = self.operators_profile(kind, progress).await {
            return ended;
        }
        let dump = match cluster::config_dump(self.client).await {
            Ok(d) => d,
            Err(e) => {
                return self.failed_row(
                    kind,
                    format!("the config database could not be read: {e}"),
                    progress,
                )
            }
        };
        for (name, value) in level.settings() {
            if name != PROFILE && !self.levels_found.contains_key(name) {
                self.levels_found
                    .insert(name.to_string(), cluster::osd_section_value(&dump, name));
            }
            if let Err(e) = cluster::set(self.client, name, &value).await {
                self.restore_levels().await;
                return self.failed_row(
                    kind,
                    format!("setting {name} {value} failed: {e}"),
                    progress,
                );
            }
        }
        for (name, value) in level.settings() {
            if let Some(w) = daemons_took_it(self.client, name, &value, progress, cancel).await {
                self.result.notes.push(format!("{label}: {w}"));
            }
        }
        let mut fio = match self
            .procs
            .start_fio(&fio_argv(&self.plan.fio, self.plan.window))
        {
            Ok(f) => f,
            Err(e) => {
                self.restore_levels().await;
                return self.failed_row(kind, format!("fio did not start: {e}"), progress);
            }
        };
        let (watched, ended) = self
            .drive_recovery::<P::Enforcer>(&label, &mut fio, None, progress, cancel)
            .await;
        let report = fio.stop().await;
        // Back as found before the data moves back: the next row starts from the same place.
        self.restore_levels().await;
        if let Err(e) = cluster::restore(self.client, PROFILE, self.found.as_deref()).await {
            self.result.notes.push(format!(
                "{label}: putting {PROFILE} back to {} failed ({e}); tried again at the end",
                self.found_text
            ));
        }
        self.finish_recovery_row(kind, report, &watched, ended, progress, cancel)
            .await
    }

    /// The profile found at the start back in the config database, as the enforced and level
    /// rows start from it (as the enforcer would in production); the row fails if it cannot be.
    async fn operators_profile(
        &mut self,
        kind: RowKind,
        progress: &mut dyn Progress,
    ) -> Result<(), Ended> {
        self.changed = true;
        match cluster::restore(self.client, PROFILE, self.found.as_deref()).await {
            Ok(()) => Ok(()),
            Err(e) => Err(self.failed_row(
                kind,
                format!("putting {PROFILE} back to {} failed: {e}", self.found_text),
                progress,
            )),
        }
    }

    /// Puts every setting a level row set back as found. What fails stays in `levels_found`
    /// for [`Run::restore_all`], which tries again and says what is left.
    async fn restore_levels(&mut self) {
        for (name, before) in std::mem::take(&mut self.levels_found) {
            if cluster::restore(self.client, &name, before.as_deref())
                .await
                .is_err()
            {
                self.levels_found.insert(name, before);
            }
        }
    }

    async fn enforced_row(
        &mut self,
        kind: RowKind,
        progress: &mut dyn Progress,
        cancel: &mut watch::Receiver<bool>,
    ) -> Ended {
        let label = kind.label(self.plan.multiplier);
        let Some(baseline) = self.baseline() else {
            return self.failed_row(kind, "no baseline p99".into(), progress);
        };
        // The enforcer starts from the operator's profile, as it would in production.
        if let Err(ended) = self.operators_profile(kind, progress).await {
            return ended;
        }
        if let Some(p) = self.running_at_start.clone() {
            if let Some(w) = daemons_took_it(self.client, PROFILE, &p, progress, cancel).await {
                self.result.notes.push(format!("{label}: {w}"));
            }
        }
        progress.say(&format!(
            "{label}: starting the enforcer (serve --enforcer.mode enforce --enforcer.baseline {} --enforcer.multiplier {})",
            baseline_arg(baseline),
            self.plan.multiplier
        ));
        let mut child =
            match self
                .procs
                .start_enforcer(baseline, self.plan.multiplier, kind.serve_extra())
            {
                Ok(c) => c,
                Err(e) => {
                    return self.failed_row(
                        kind,
                        format!("the enforcer did not start: {e}"),
                        progress,
                    )
                }
            };
        let (report, watched, ended) = self
            .with_enforcer(kind, &label, &mut child, progress, cancel)
            .await;
        progress.say(&format!("{label}: stopping the enforcer (SIGTERM)"));
        let end = child.stop().await;
        if let Some(p) = end.problem {
            self.result.notes.push(format!("{label}: the enforcer {p}"));
        }
        if !end.unrestored.is_empty() {
            self.result.notes.push(format!(
                "{label}: the enforcer's state file says it has not restored {}; the experiment restores them",
                end.unrestored.keys().cloned().collect::<Vec<_>>().join(", ")
            ));
        }
        self.leftovers.extend(end.unrestored);
        // Its pause flags would hold the clean-up rebalance back.
        self.clear_pause_flags().await;
        self.finish_recovery_row(kind, report, &watched, ended, progress, cancel)
            .await
    }

    /// The enforced row while the child runs: ready, fio, the recovery, the enforcer back to
    /// idle, its decisions.
    async fn with_enforcer(
        &mut self,
        kind: RowKind,
        label: &str,
        child: &mut P::Enforcer,
        progress: &mut dyn Progress,
        cancel: &mut watch::Receiver<bool>,
    ) -> (Result<String, String>, Watched, Ended) {
        let no_fio = |why: &str| Err(format!("fio not run: {why}"));
        let mut watched = Watched::default();
        let metrics = self.plan.metrics_path.clone();
        let ready = self
            .wait_ready(label, child, &metrics, progress, cancel)
            .await;
        if ready != Ended::Done {
            return (no_fio("the enforcer was not ready"), watched, ready);
        }
        let mut fio = match self
            .procs
            .start_fio(&fio_argv(&self.plan.fio, self.plan.window))
        {
            Ok(f) => f,
            Err(e) => {
                let why = format!("fio did not start: {e}");
                return (no_fio(&why), watched, Ended::Failed(why));
            }
        };
        let (w, mut ended) = self
            .drive_recovery(label, &mut fio, Some(child), progress, cancel)
            .await;
        watched = w;
        let report = fio.stop().await;
        let mut idle = false;
        if ended == Ended::Done {
            let deadline = Instant::now() + self.plan.enforcer_idle_within;
            loop {
                if let Some(why) = child.exited() {
                    self.result.notes.push(format!(
                        "{label}: the enforcer exited after the recovery: {why}"
                    ));
                    break;
                }
                poll_metrics(child, &metrics, &mut watched).await;
                let phase = child
                    .get("/api/status")
                    .await
                    .ok()
                    .and_then(|s| enforcer_phase(&s));
                if phase.as_deref() == Some("idle") {
                    idle = true;
                    break;
                }
                let now = Instant::now();
                if now >= deadline {
                    self.result.notes.push(format!(
                        "{label}: the enforcer was still {} {} after the recovery finished: it had not restored what it set (the experiment does, below)",
                        phase.as_deref().unwrap_or("(no answer)"),
                        fmt_secs(self.plan.enforcer_idle_within.as_secs_f64())
                    ));
                    break;
                }
                progress.update(&format!(
                    "{label}: recovery finished; waiting for the enforcer to restore what it set (phase {})",
                    phase.as_deref().unwrap_or("?")
                ));
                tokio::select! {
                    _ = tokio::time::sleep(self.plan.poll_every.min(deadline - now)) => {}
                    _ = cancelled(cancel) => { ended = Ended::Cancelled("interrupted (Ctrl-C or a signal) after the recovery".into()); break; }
                }
            }
            progress.done();
        }
        if child.exited().is_none() {
            poll_metrics(child, &metrics, &mut watched).await;
            match child.get("/decisions?limit=1000").await {
                Ok(body) => match decisions_oldest_first(&body) {
                    Ok(list) => self.result.decisions.extend(list.into_iter().map(|mut d| {
                        if let Some(o) = d.as_object_mut() {
                            o.insert("experiment_row".into(), kind.name().into());
                        }
                        d
                    })),
                    Err(e) => self.result.notes.push(format!("{label}: {e}")),
                },
                Err(e) => self
                    .result
                    .notes
                    .push(format!("{label}: the decisions could not be read: {e}")),
            }
        }
        let summary = EnforcerSummary {
            top_rung: watched.top_rung,
            paused_seconds: watched.paused_seconds,
            idle_after_recovery: idle,
        };
        self.result.notes.push(format!(
            "{label}: ladder reached rung {} ({}), paused {} in total; {}",
            summary.top_rung,
            rung_name(summary.top_rung),
            summary.paused_seconds.map_or("? s".to_string(), fmt_secs),
            if self.result.decisions_of(&kind.name()).next().is_none() {
                "no decisions"
            } else {
                "decisions below"
            }
        ));
        self.result.enforcer = Some(summary);
        (report, watched, ended)
    }

    /// Until the child answers on /metrics.
    async fn wait_ready(
        &mut self,
        label: &str,
        child: &mut P::Enforcer,
        metrics: &str,
        progress: &mut dyn Progress,
        cancel: &mut watch::Receiver<bool>,
    ) -> Ended {
        let deadline = Instant::now() + self.plan.enforcer_ready_within;
        loop {
            if let Some(why) = child.exited() {
                return Ended::Failed(format!("the enforcer (serve) exited at start: {why}"));
            }
            let last = match child.get(metrics).await {
                Ok(_) => {
                    progress.done();
                    return Ended::Done;
                }
                Err(e) => e,
            };
            let now = Instant::now();
            if now >= deadline {
                progress.done();
                return Ended::Failed(format!(
                    "the enforcer did not answer on {metrics} within {}: {last}",
                    fmt_secs(self.plan.enforcer_ready_within.as_secs_f64())
                ));
            }
            progress.update(&format!("{label}: waiting for the enforcer to answer"));
            tokio::select! {
                _ = tokio::time::sleep(Duration::from_secs(1).min(deadline - now)) => {}
                _ = cancelled(cancel) => { progress.done(); return Ended::Cancelled("interrupted (Ctrl-C or a signal) while the enforcer started".into()); }
            }
        }
    }

    /// Starts the recovery and follows it to its end (or `--max-recovery`).
    async fn drive_recovery<E: RunningEnforcer>(
        &mut self,
        label: &str,
        fio: &mut P::Fio,
        mut enforcer: Option<&mut E>,
        progress: &mut dyn Progress,
        cancel: &mut watch::Receiver<bool>,
    ) -> (Watched, Ended) {
        let mut watched = Watched::default();
        let Some(start_cmd) = self.plan.start_recovery.as_ref() else {
            return (watched, Ended::Failed("no --start-recovery".into()));
        };
        if *cancel.borrow() {
            return (
                watched,
                Ended::Cancelled("interrupted (Ctrl-C or a signal) before the recovery".into()),
            );
        }
        let metrics = self.plan.metrics_path.clone();
        progress.say(&format!(
            "{label}: fio running; starting the recovery: {}",
            shell_words::join(start_cmd)
        ));
        let start = Instant::now();
        self.recovery_started = true;
        if let Err(e) = self.procs.run(start_cmd).await {
            return (
                watched,
                Ended::Failed(format!("--start-recovery failed: {e}")),
            );
        }
        let max = self.plan.max_recovery;
        let mut seen = false;
        let mut failures = 0u32;
        let ended = loop {
            if let Some(how) = fio.ended() {
                break Ended::Failed(format!(
                    "fio ended on its own {} into the recovery ({how}), before it finished: give fio a longer runtime",
                    fmt_secs(start.elapsed().as_secs_f64())
                ));
            }
            if let Some(e) = enforcer.as_deref_mut() {
                if let Some(why) = e.exited() {
                    break Ended::Failed(format!(
                        "the enforcer (serve) exited during the recovery: {why}"
                    ));
                }
                poll_metrics(e, &metrics, &mut watched).await;
            }
            match cluster::status(self.client).await {
                Ok(s) => {
                    failures = 0;
                    watched.left = remaining(&s);
                    watched.peak = watched.peak.max(watched.left);
                    watched.undersized_peak = watched
                        .undersized_peak
                        .max(s.recovery_counts().undersized_pgs);
                    seen |= watched.left > 0;
                    // PGs the enforcer's backfill lever holds are active+clean with their data
                    // still to move: the recovery is not over until it has released them, nor
                    // while the enforcer says so (a PG released a moment ago shows clean in
                    // `ceph status` until the OSDs report its backfill).
                    let status = match enforcer.as_deref_mut() {
                        Some(e) if seen => e.get("/api/status").await.ok(),
                        _ => None,
                    };
                    watched.held = status.as_deref().and_then(held_pgs).unwrap_or(0);
                    let enforcer_on = status.as_deref().and_then(enforcer_recovering) == Some(true);
                    if seen && !s.recovery_running() && watched.held == 0 && !enforcer_on {
                        watched.finished_after = Some(start.elapsed());
                        break Ended::Done;
                    }
                }
                Err(e) => {
                    failures += 1;
                    if failures >= 5 {
                        break Ended::Failed(format!(
                            "`ceph status` failed 5 times in a row during the recovery: {e}"
                        ));
                    }
                }
            }
            let elapsed = start.elapsed();
            if elapsed >= max {
                break Ended::Failed(if seen {
                    format!(
                        "the recovery did not finish within {} (--max-recovery): {} objects degraded or misplaced left, {} PGs held back by the enforcer",
                        fmt_secs(max.as_secs_f64()),
                        watched.left,
                        watched.held
                    )
                } else {
                    format!(
                        "no recovery showed in `ceph status` (nothing degraded or misplaced) within {} of --start-recovery",
                        fmt_secs(max.as_secs_f64())
                    )
                });
            }
            let mut line = if seen {
                format!(
                    "{label}: recovering for {}, {} objects degraded + misplaced left (at most {}){}",
                    fmt_secs(elapsed.as_secs_f64()),
                    watched.left,
                    watched.peak,
                    if watched.held > 0 {
                        format!(", {} PGs held back by the enforcer", watched.held)
                    } else {
                        String::new()
                    }
                )
            } else {
                format!(
                    "{label}: waiting for the recovery to show in `ceph status` ({})",
                    fmt_secs(elapsed.as_secs_f64())
                )
            };
            if enforcer.is_some() {
                line.push_str(&format!(", enforcer rung up to {}", watched.top_rung));
            }
            progress.update(&line);
            tokio::select! {
                _ = tokio::time::sleep(self.plan.poll_every.min(max - elapsed)) => {}
                _ = cancelled(cancel) => break Ended::Cancelled(interrupted_after(start)),
            }
        };
        progress.done();
        if watched.undersized_peak > 0 {
            self.result.notes.push(format!(
                "{label}: up to {} PGs were undersized during the recovery: the bound is lifted then (redundancy first), so this was not the recovery the experiment needs (see NOTES: async recovery off, reweight a running OSD)",
                watched.undersized_peak
            ));
        }
        (watched, ended)
    }

    /// The row from what was measured; after a finished recovery, `--stop-recovery` and the
    /// unmeasured wait for a clean cluster.
    async fn finish_recovery_row(
        &mut self,
        kind: RowKind,
        report: Result<String, String>,
        watched: &Watched,
        ended: Ended,
        progress: &mut dyn Progress,
        cancel: &mut watch::Receiver<bool>,
    ) -> Ended {
        let (ended, why) = match ended {
            Ended::Done => (Ended::Done, None),
            Ended::Cancelled(why) => (Ended::Cancelled(why.clone()), Some(why)),
            Ended::Failed(why) => (Ended::Incomplete, Some(why)),
            Ended::Incomplete => (Ended::Incomplete, Some("not measured to its end".into())),
        };
        let row = build_row(
            kind,
            self.plan.multiplier,
            self.baseline(),
            self.plan.window,
            report,
            Some(watched),
            why,
        );
        let measured_badly = row.incomplete.clone();
        self.push(row, progress);
        match (ended, measured_badly) {
            (Ended::Done, Some(_)) => Ended::Incomplete,
            (Ended::Done, None) => self.stop_and_wait_clean(kind, progress, cancel).await,
            (other, _) => other,
        }
    }

    /// `--stop-recovery`, then waits (unmeasured) until the data moved back and every PG is
    /// active+clean, so the next row starts as this one did.
    async fn stop_and_wait_clean(
        &mut self,
        kind: RowKind,
        progress: &mut dyn Progress,
        cancel: &mut watch::Receiver<bool>,
    ) -> Ended {
        let label = kind.label(self.plan.multiplier);
        let Some(stop) = self.plan.stop_recovery.clone() else {
            return Ended::Failed("no --stop-recovery".into());
        };
        progress.say(&format!(
            "{label}: stopping the recovery: {}",
            shell_words::join(&stop)
        ));
        if let Err(e) = self.procs.run(&stop).await {
            return Ended::Failed(format!("{}: --stop-recovery failed: {e}", kind.name()));
        }
        self.recovery_started = false;
        let start = Instant::now();
        let max = self.plan.max_recovery;
        // Ceph's status lags a change by a few seconds: the data moving back is waited for
        // before "clean" is believed (or, if it never shows, for this long).
        let settle = (self.plan.poll_every * 5).min(max);
        let mut seen = false;
        loop {
            let elapsed = start.elapsed();
            let left = match cluster::status(self.client).await {
                Ok(s) => {
                    seen |= !all_clean(&s);
                    if all_clean(&s) && (seen || elapsed >= settle) {
                        progress.done();
                        return Ended::Done;
                    }
                    Some(remaining(&s))
                }
                Err(_) => None,
            };
            if elapsed >= max {
                progress.done();
                return Ended::Failed(format!(
                    "the cluster was not clean {} after --stop-recovery: the next row would start during a recovery",
                    fmt_secs(max.as_secs_f64())
                ));
            }
            progress.update(&format!(
                "{label}: recovery stopped; waiting (not measured) for the cluster to be clean again: {} objects degraded + misplaced, {}",
                left.map_or("?".to_string(), |n| n.to_string()),
                fmt_secs(elapsed.as_secs_f64())
            ));
            tokio::select! {
                _ = tokio::time::sleep(self.plan.poll_every.min(max - elapsed)) => {}
                _ = cancelled(cancel) => {
                    progress.done();
                    return Ended::Cancelled("interrupted (Ctrl-C or a signal) while the cluster moved the data back".into());
                }
            }
        }
    }

    /// Unsets nobackfill/norecover if set (they were not when the experiment started).
    async fn clear_pause_flags(&mut self) {
        match cluster::osd_flags(self.client).await {
            Ok(flags) => {
                for f in PAUSE_FLAGS.into_iter().filter(|f| flags.contains(*f)) {
                    match cluster::unset_flag(self.client, f).await {
                        Ok(()) => self.result.restored.push(format!(
                            "{f} unset (left set during the experiment; it was not set before)"
                        )),
                        Err(e) => self.result.not_restored.push(format!(
                            "{f} is set and could not be unset ({e}): `ceph osd unset {f}`"
                        )),
                    }
                }
            }
            Err(e) => self.result.not_restored.push(format!(
                "the OSD map flags could not be read ({e}): check `ceph osd dump | grep flags` for nobackfill/norecover and unset them"
            )),
        }
    }

    /// Puts the cluster back: the recovery stopped, the profile as found, what the enforcer
    /// left, no pause flags.
    async fn restore_all(&mut self, progress: &mut dyn Progress) {
        if self.recovery_started {
            if let Some(stop) = self.plan.stop_recovery.clone() {
                progress.say(&format!(
                    "stopping the recovery: {}",
                    shell_words::join(&stop)
                ));
                match self.procs.run(&stop).await {
                    Ok(_) => {
                        self.recovery_started = false;
                        self.result.restored.push(format!(
                            "recovery stopped ({}); the data moves back now: `ceph status` shows when the cluster is clean",
                            shell_words::join(&stop)
                        ));
                    }
                    Err(e) => self.result.not_restored.push(format!(
                        "--stop-recovery failed ({e}): stop the recovery by hand"
                    )),
                }
            }
        }
        if !self.changed {
            return;
        }
        match cluster::restore(self.client, PROFILE, self.found.as_deref()).await {
            Ok(()) => self
                .result
                .restored
                .push(format!("{PROFILE}: {}", self.found_text)),
            Err(e) => self.result.not_restored.push(format!(
                "{PROFILE} NOT RESTORED ({e}): set it back by hand to {}",
                self.found_text
            )),
        }
        // A level row's settings not put back at its end (a failure, or Ctrl-C mid-row), then
        // what the enforcer's state file said it had not restored.
        let levels = std::mem::take(&mut self.levels_found);
        let leftovers = std::mem::take(&mut self.leftovers);
        let owed = levels
            .into_iter()
            .map(|(name, before)| (name, before, "a level row had set it"))
            .chain(
                leftovers
                    .into_iter()
                    .filter(|(name, _)| !cluster::same_option(name, PROFILE))
                    .map(|(name, before)| (name, before, "the enforcer had changed it")),
            );
        for (name, before, who) in owed {
            let was = before.as_deref().unwrap_or("not set");
            match cluster::restore(self.client, &name, before.as_deref()).await {
                Ok(()) => self.result.restored.push(format!("{name}: {was} ({who})")),
                Err(e) => self.result.not_restored.push(format!(
                    "{name} NOT RESTORED ({e}): set it back by hand to {was}"
                )),
            }
        }
        self.clear_pause_flags().await;
        for line in &self.result.restored {
            progress.say(&format!("restored: {line}"));
        }
        for line in &self.result.not_restored {
            progress.say(&format!("NOT RESTORED: {line}"));
        }
    }
}

fn interrupted_after(start: Instant) -> String {
    format!(
        "interrupted (Ctrl-C or a signal) after {}",
        fmt_secs(start.elapsed().as_secs_f64())
    )
}

async fn poll_metrics<E: RunningEnforcer>(child: &E, path: &str, watched: &mut Watched) {
    if let Ok(text) = child.get(path).await {
        if let Some(r) = metric_value(&text, "ceph_recovery_budget_ladder_rung") {
            if r.is_finite() && r >= 0.0 {
                watched.top_rung = watched.top_rung.max(r.min(255.0) as u8);
            }
        }
        if let Some(p) = metric_value(&text, "ceph_recovery_budget_paused_seconds") {
            watched.paused_seconds = Some(p);
        }
        // Wall-clock, as fio stamps its windows: the two are matched by Unix time.
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
        if let (Some(p), Ok(now)) = (metric_value(&text, "ceph_recovery_budget_p99_seconds"), now) {
            watched.enforcer_p99.push((now.as_secs_f64(), p));
        }
    }
}

/// The ladder's rungs, as the table's notes name them.
pub fn rung_name(rung: u8) -> &'static str {
    match rung {
        0 => "no action",
        1 => "throttle profile",
        2 => "recovery limit",
        3 => "backfill lever",
        _ => "pause",
    }
}

/// The one line said when a row is done.
fn row_line(row: &ExperimentRow, baseline: Option<f64>) -> String {
    let mut line = format!("{}: ", row.label);
    match row.p99_seconds {
        Some(p99) => line.push_str(&format!("p99 {}", fmt_ms(p99))),
        None => line.push_str("no p99"),
    }
    if let (Some(r), Some(_)) = (row.p99_over_baseline, baseline) {
        line.push_str(&format!(" ({r:.1}x the baseline)"));
    }
    if let Some(t) = row.recovery_seconds {
        line.push_str(&format!(", recovery {}", fmt_secs(t)));
    }
    if let Some(r) = row.objects_per_second {
        line.push_str(&format!(", {} obj/s", fmt_magnitude(r)));
    }
    if let Some(why) = &row.incomplete {
        line.push_str(&format!("; incomplete: {why}"));
    }
    line
}

/// The table, the notes, what was restored, and the enforcer's decisions. Pure.
pub fn render(result: &ExperimentResult) -> String {
    let m = result.multiplier;
    let header: Vec<String> = [
        "row",
        "p50",
        "p95",
        "p99",
        "p99/baseline",
        &format!("within {m}x"),
        "recovery time",
        "rate",
        &format!("windows within {m}x"),
        "worst window",
        "reaction",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let dash = || "-".to_string();
    let lat = |v: Option<f64>| v.map_or_else(dash, fmt_ms);
    let mut table = vec![header];
    let bound = result.bound_seconds;
    for r in &result.rows {
        let windows_within = match r.windows_within_bound {
            Some(f) => format!(
                "{:.0}% ({}/{})",
                f * 100.0,
                r.windows
                    .iter()
                    .filter(|w| bound.is_some_and(|b| w.within(b)))
                    .count(),
                r.windows.len()
            ),
            None => dash(),
        };
        let reaction = match bound {
            Some(b) if is_enforced_row(&r.row) && !r.windows.is_empty() => {
                windows::reaction(&r.windows, b).cell()
            }
            _ => dash(),
        };
        let recovery = match (r.row.as_str(), r.recovery_seconds) {
            ("no-recovery", _) => dash(),
            (_, Some(t)) => fmt_secs(t),
            (_, None) if r.incomplete.is_some() => "incomplete".to_string(),
            (_, None) => dash(),
        };
        table.push(vec![
            r.label.clone(),
            lat(r.p50_seconds),
            lat(r.p95_seconds),
            lat(r.p99_seconds),
            r.p99_over_baseline
                .map_or_else(dash, |x| format!("{x:.1}x")),
            r.within_bound
                .map_or_else(dash, |w| if w { "yes" } else { "no" }.to_string()),
            recovery,
            r.objects_per_second
                .map_or_else(dash, |x| format!("{} obj/s", fmt_magnitude(x))),
            windows_within,
            lat(r.worst_window_p99_seconds),
            reaction,
        ]);
    }
    let widths: Vec<usize> = (0..table[0].len())
        .map(|c| {
            table
                .iter()
                .map(|row| row[c].chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for row in &table {
        let mut line = String::new();
        for (c, cell) in row.iter().enumerate() {
            line.push_str(cell);
            let pad = widths[c] + 2 - cell.chars().count();
            line.push_str(&" ".repeat(pad));
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out.push('\n');
    match (result.baseline_p99_seconds, result.bound_seconds) {
        (Some(b), Some(bound)) => out.push_str(&format!(
            "baseline: p99 {} without recovery; bound: p99 {} ({m}x)\n",
            fmt_ms(b),
            fmt_ms(bound)
        )),
        _ => out.push_str("baseline: none (the no-recovery row did not complete)\n"),
    }
    for r in &result.rows {
        if let Some(why) = &r.incomplete {
            out.push_str(&format!("{}: incomplete: {why}\n", r.label));
        }
    }
    out.push_str(&windows_text(result));
    for n in &result.notes {
        out.push_str(&format!("note: {n}\n"));
    }
    for r in &result.restored {
        out.push_str(&format!("restored: {r}\n"));
    }
    for r in &result.not_restored {
        out.push_str(&format!("NOT RESTORED: {r}\n"));
    }
    if result.interrupted {
        out.push_str(
            "interrupted: the rows above are the ones measured before Ctrl-C (or a signal)\n",
        );
    } else if !result.complete {
        out.push_str("incomplete: not every row was measured\n");
    }
    for r in result.rows.iter().filter(|r| is_enforced_row(&r.row)) {
        let list: Vec<&serde_json::Value> = result.decisions_of(&r.row).collect();
        if list.is_empty() {
            continue;
        }
        out.push_str(&format!(
            "\ndecisions of the {} row ({}, oldest first):\n",
            r.label,
            list.len()
        ));
        for d in list {
            out.push_str(&format!("  {}\n", decision_line(d)));
        }
    }
    out
}

/// The label of the enforcer's own per-window p99 line.
const ENFORCER_SEEN: &str = "enforcer saw";

/// The per-window lines under the table: each row's window p99s in ms, why a row has none, and
/// the enforced row's reaction.
fn windows_text(result: &ExperimentResult) -> String {
    let bound = result.bound_seconds;
    let mut out = String::new();
    let width = result
        .rows
        .iter()
        .map(|r| r.label.chars().count())
        .chain(
            result
                .rows
                .iter()
                .any(ExperimentRow::has_enforcer_readings)
                .then(|| ENFORCER_SEEN.chars().count()),
        )
        .max()
        .unwrap_or(0);
    let with_windows: Vec<&ExperimentRow> = result
        .rows
        .iter()
        .filter(|r| !r.windows.is_empty())
        .collect();
    if !with_windows.is_empty() {
        out.push_str(&format!(
            "client write p99 per {}-s window, in ms (! over the bound, - no write completed):\n",
            result.window_seconds
        ));
        // Under each enforced row's, what its enforcer judged by: where they differ it acted
        // on its own reading (one line per enforced row, right under it).
        for r in &with_windows {
            out.push_str(&format!(
                "  {:<width$}  {}\n",
                r.label,
                windows::sparkline(&r.windows, bound)
            ));
            if r.has_enforcer_readings() {
                out.push_str(&format!(
                    "  {:<width$}  {}\n",
                    ENFORCER_SEEN,
                    windows::enforcer_sparkline(&r.windows, bound)
                ));
            }
        }
        if with_windows.iter().any(|r| r.has_enforcer_readings()) {
            out.push_str("  (enforcer saw: the p99 the row above's enforcer read last in each window, the OSDs' write-latency histogram over its latency window; - not read)\n");
        }
    }
    for r in &result.rows {
        if let Some(why) = &r.windows_missing {
            out.push_str(&format!("{}: no per-window p99: {why}\n", r.label));
        }
        if let (true, Some(b)) = (is_enforced_row(&r.row), bound) {
            if !r.windows.is_empty() {
                out.push_str(&format!(
                    "{}: {}\n",
                    r.label,
                    windows::reaction(&r.windows, b).explain()
                ));
            }
            out.push_str(&levels_text(result, r, b));
        }
    }
    out
}

/// The level controller's row: its windows by the level in force, so that what each level did
/// to the clients is read from the windows (which held the bound, which never did).
fn levels_text(result: &ExperimentResult, r: &ExperimentRow, bound: f64) -> String {
    let Some(started) = r.fio_started_at else {
        return String::new();
    };
    let decisions: Vec<&serde_json::Value> = result.decisions_of(&r.row).collect();
    let groups = windows::by_level(&r.windows, started, &decisions);
    if groups.is_empty() {
        return String::new();
    }
    let width = groups
        .iter()
        .map(|g| g.level.chars().count())
        .max()
        .unwrap_or(0);
    let mut out = format!(
        "{}: windows by the level in force at their middle (p99 in ms, ! over the bound):\n",
        r.label
    );
    for g in &groups {
        out.push_str(&format!(
            "  {:<width$}  {:>2} of {:>2} within  {}\n",
            g.level,
            g.within(bound),
            g.windows.len(),
            windows::sparkline(&g.windows, Some(bound))
        ));
    }
    out
}

/// "20:51:03 THROTTLE p99 180 ms above the bound ..." from one decision record.
pub fn decision_line(d: &serde_json::Value) -> String {
    let time = d
        .get("time")
        .and_then(serde_json::Value::as_f64)
        .filter(|t| t.is_finite() && *t >= 0.0)
        .map(|t| {
            let stamp = humantime::format_rfc3339_seconds(
                std::time::UNIX_EPOCH + Duration::from_secs_f64(t),
            )
            .to_string();
            stamp
                .split('T')
                .nth(1)
                .unwrap_or(&stamp)
                .trim_end_matches('Z')
                .to_string()
        })
        .unwrap_or_else(|| "--:--:--".to_string());
    let field = |k: &str| {
        d.get(k)
            .and_then(serde_json::Value::as_str)
            .unwrap_or("")
            .to_string()
    };
    let event = field("event");
    let message = field("message");
    format!("{time} {event:<9} {}", message.replace('\n', " "))
        .trim_end()
        .to_string()
}

#[cfg(test)]
mod tests;
