//! The policy, as validated plain data.

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use serde::Serialize;

pub use crate::ceph::parse::versions::LimitUnit;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// No enforcer at all.
    Off,
    /// Decide and log "would ..." but change nothing on the cluster.
    Observe,
    /// Decide and act.
    Enforce,
}

impl Mode {
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Off => "off",
            Mode::Observe => "observe",
            Mode::Enforce => "enforce",
        }
    }
}

/// Where the no-recovery p99 comes from.
#[derive(Debug, Clone, PartialEq)]
pub enum BaselineSpec {
    /// A number the operator measured, e.g. `16ms`.
    Fixed(Duration),
    /// The write p99 of a fio report (text or JSON), read at start.
    Fio(PathBuf),
    /// The p99 the exporter measured while no recovery ran, over `learn_window`; persisted.
    Learned,
}

impl std::str::FromStr for BaselineSpec {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let s = s.trim();
        if s == "learned" {
            return Ok(BaselineSpec::Learned);
        }
        if let Some(path) = s.strip_prefix("fio:") {
            if path.is_empty() {
                return Err("fio: needs a path, e.g. fio:/root/fio-baseline.json".into());
            }
            return Ok(BaselineSpec::Fio(PathBuf::from(path)));
        }
        match humantime::parse_duration(s) {
            Ok(d) if !d.is_zero() => Ok(BaselineSpec::Fixed(d)),
            _ => Err(format!(
                "invalid baseline {s:?}; expected a duration like 16ms, `learned`, or `fio:PATH` to a fio report"
            )),
        }
    }
}

impl<'de> serde::Deserialize<'de> for BaselineSpec {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

impl fmt::Display for BaselineSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BaselineSpec::Fixed(d) => write!(f, "{}", crate::units::fmt_ms(d.as_secs_f64())),
            BaselineSpec::Fio(p) => write!(f, "fio:{}", p.display()),
            BaselineSpec::Learned => f.write_str("learned"),
        }
    }
}

/// When redundancy counts as at risk, which lifts the latency bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
#[value(rename_all = "snake_case")]
pub enum SuspendWhen {
    /// The policy's rule: some object has at most min_size copies (a PG undersized, or degraded
    /// in a pool where one missing copy leaves min_size), or some PG cannot serve I/O (down,
    /// incomplete, stale, unknown, or inactive for longer than peering takes). See
    /// `redundancy.rs`.
    RedundancyAtRisk,
    /// Narrower: any PG undersized (fewer copies than the pool size).
    AnyUndersized,
    /// Any pool with a PG at or below min_size.
    PoolAtMinSize,
}

impl SuspendWhen {
    pub fn as_str(self) -> &'static str {
        match self {
            SuspendWhen::RedundancyAtRisk => "redundancy_at_risk",
            SuspendWhen::AnyUndersized => "any_undersized",
            SuspendWhen::PoolAtMinSize => "pool_at_min_size",
        }
    }
}

/// What a clean exit (SIGTERM, SIGINT) hands back in enforce mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
#[value(rename_all = "kebab-case")]
pub enum OnExit {
    /// Everything: pause flags, rung-2 limits, then the profile (or wpq levers) back to the
    /// operator's. A stopped enforcer watches neither p99 nor redundancy, so nothing it set stays.
    Restore,
    /// Pause flags and rung-2 limits only; the rung-1 throttle (or the suspend profile) stays,
    /// its originals in the state file, for a rolling restart where another instance takes over.
    KeepThrottle,
}

impl OnExit {
    pub fn as_str(self) -> &'static str {
        match self {
            OnExit::Restore => "restore",
            OnExit::KeepThrottle => "keep-throttle",
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Policy {
    pub mode: Mode,
    pub baseline: BaselineSpec,
    pub learn_window: Duration,
    pub multiplier: f64,
    /// How long p99 must stay above the bound, during recovery, before acting.
    pub breach_for: Duration,
    pub latency_window: Duration,
    pub suspend_when: SuspendWhen,
    pub throttle_profile: String,
    pub suspend_profile: String,
    /// Settings used instead of a profile when the OSDs do not run mClock.
    pub wpq_levers: BTreeMap<String, String>,
    /// How long recovery must stay finished before restoring.
    pub settle: Duration,
    pub min_interval: Duration,
    pub max_changes_per_hour: u32,
    /// How long OSDs get to take a profile before one that did not is reported.
    pub verify_after: Duration,
    pub state_file: PathBuf,
    /// The cephx user the commands run as (`--ceph-name`), for the line that says what to
    /// grant when Ceph refuses a change; `None`: the CLI's default (client.admin unless
    /// CEPH_ARGS names another).
    pub ceph_user: Option<String>,
    pub ladder: LadderPolicy,
    /// What a clean exit hands back.
    pub on_exit: OnExit,
    /// How long the exit may take to hand it back; shorter than the manifest's
    /// `terminationGracePeriodSeconds`, so the process is never killed half-way.
    pub exit_timeout: Duration,
    /// Blind (observations stale or failing) for this long: the operator's originals go back,
    /// as the mgr prometheus module fails open on a stale cache; judged afresh once it sees.
    pub blind_restore_after: Duration,
    /// `--enforcer.memory`: false = decisions ignore what is remembered about this cluster
    /// (`EnforcerState::memory`), and leave it as it was.
    pub memory: bool,
}

/// Which controller moves recovery during a recovery (`--enforcer.controller`).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, serde::Deserialize, clap::ValueEnum,
)]
#[serde(rename_all = "lowercase")]
pub enum Controller {
    /// The escalation ladder: throttle profile on a breach, then the rungs above it.
    #[default]
    Ladder,
    /// One position on an ordered list of levels, moved both ways by the window's p99
    /// (`super::levels`): throttles over the aim, spends the budget on recovery speed under it,
    /// up to `--enforcer.max-level`.
    Levels,
}

impl Controller {
    pub fn as_str(self) -> &'static str {
        match self {
            Controller::Ladder => "ladder",
            Controller::Levels => "levels",
        }
    }
}

/// The escalation ladder above the throttle (issue #7).
#[derive(Debug, Clone, PartialEq)]
pub struct LadderPolicy {
    /// The ladder, or the level controller (which uses the ladder's lever, pause and aim).
    pub controller: Controller,
    /// The level controller's fastest level.
    pub max_level: super::levels::list::Ceiling,
    /// The level controller's time limit: a recovery takes at most this many times as long as
    /// at the operator's settings (the bound yields past it).
    pub max_slowdown: super::levels::controller::MaxSlowdown,
    /// Highest rung the enforcer may climb: 1 throttle only, 2 + recovery limit, 3 + backfill
    /// lever (at most N PGs backfill at once), 4 + duty-cycled pause.
    pub max_rung: u8,
    /// Rung 3, the backfill lever: off = skipped (LADDER_SKIP), the pause follows rung 2.
    pub backfill_lever: bool,
    /// Rung 3's second dimension: the first raise after the entry lets each backfilling PG
    /// start this many recovery ops at once (`osd_recovery_max_single_start`) before N is
    /// raised; back to the operator's value before N = 1 is left for the pause. 1, or not above
    /// the operator's value: no such step.
    pub ops_per_pg: u32,
    /// How long a rung (or step) is held before its effect is judged, up or down.
    pub settle: Duration,
    /// Rung 2 under mClock: `custom` profile with the background limits at each of these in
    /// turn, all in one unit (IOPS for Pacific, shares of capacity for Quincy 17.2.6+).
    pub recovery_limits: Vec<RecoveryLimit>,
    /// Rung 2 without mClock (wpq): osd_recovery_sleep (seconds) at each of these in turn, with
    /// osd_recovery_max_active 1.
    pub recovery_sleeps: Vec<f64>,
    /// Going down needs p99 below this fraction of the bound for `settle` (hysteresis).
    pub descend_below: f64,
    /// Once the ladder acts, it steers p99 to this fraction of the bound: a rung, N or share
    /// that leaves p99 above it is not enough. The OSDs' op_w_latency misses the client's own
    /// share (network, messenger, client queue): on the lab it read 5-15% below fio's p99 for
    /// the same windows, so steering to the bound itself left clients just over it.
    pub aim: f64,
    pub pause: super::pause::PausePolicy,
}

impl LadderPolicy {
    /// The unit of rung 2's mClock limits (one for the whole list: the settings check refuses a
    /// mix); None without limits.
    pub fn limit_unit(&self) -> Option<LimitUnit> {
        self.recovery_limits.first().map(|l| l.unit())
    }
}

/// One step of rung 2 under mClock, in the unit the OSDs' release reads. Ordered by value
/// within a unit (a list mixing units is refused before order matters).
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd, Serialize)]
pub enum RecoveryLimit {
    /// `osd_mclock_scheduler_background_recovery_lim` in IOPS per OSD (Pacific).
    Iops(u32),
    /// The background recovery and best-effort (backfill) limits at this percentage of each
    /// OSD's capacity (Quincy 17.2.6 on: `osd_mclock_scheduler_*_lim` 0.03 for 3).
    Percent(u8),
}

impl RecoveryLimit {
    pub fn unit(self) -> LimitUnit {
        match self {
            RecoveryLimit::Iops(_) => LimitUnit::Iops,
            RecoveryLimit::Percent(_) => LimitUnit::Share,
        }
    }

    /// The value written to the config database.
    pub fn value(self) -> String {
        match self {
            RecoveryLimit::Iops(n) => n.to_string(),
            RecoveryLimit::Percent(p) => format!("{:.2}", f64::from(p) / 100.0),
        }
    }
}

impl fmt::Display for RecoveryLimit {
    /// As the operator writes it: `300` (IOPS) or `3%`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RecoveryLimit::Iops(n) => write!(f, "{n}"),
            RecoveryLimit::Percent(p) => write!(f, "{p}%"),
        }
    }
}

impl Default for LadderPolicy {
    fn default() -> Self {
        Self {
            controller: Controller::Ladder,
            max_level: Default::default(),
            max_slowdown: Default::default(),
            max_rung: 4,
            backfill_lever: true,
            // On the lab, N = 1 with four ops per PG recovered twice as fast as with one, with
            // as many windows within the bound (docs/records/experiment-history.md, "2026-12-03, night").
            ops_per_pg: 4,
            settle: Duration::from_secs(60),
            // Under mClock, Pacific's `custom` profile with a recovery limit made client p99
            // worse in every lab run (docs/enforcer.md, "Defaults"): off unless configured.
            recovery_limits: Vec::new(),
            recovery_sleeps: vec![0.2, 0.5, 1.0],
            descend_below: 0.7,
            aim: super::pause::DEFAULT_AIM,
            pause: super::pause::PausePolicy::default(),
        }
    }
}

pub const DEFAULT_STATE_FILE: &str = "/var/lib/ceph-recovery-budget/enforcer-state.json";

impl Default for Policy {
    fn default() -> Self {
        Self {
            mode: Mode::Observe,
            baseline: BaselineSpec::Learned,
            learn_window: Duration::from_secs(3600),
            multiplier: 2.0,
            breach_for: Duration::from_secs(30),
            latency_window: Duration::from_secs(60),
            suspend_when: SuspendWhen::RedundancyAtRisk,
            throttle_profile: "high_client_ops".into(),
            suspend_profile: "high_recovery_ops".into(),
            wpq_levers: BTreeMap::from([
                ("osd_max_backfills".to_string(), "1".to_string()),
                ("osd_recovery_sleep_hdd".to_string(), "0.1".to_string()),
            ]),
            settle: Duration::from_secs(300),
            min_interval: Duration::from_secs(60),
            max_changes_per_hour: 6,
            verify_after: Duration::from_secs(30),
            state_file: PathBuf::from(DEFAULT_STATE_FILE),
            ceph_user: None,
            ladder: LadderPolicy::default(),
            on_exit: OnExit::Restore,
            exit_timeout: Duration::from_secs(20),
            blind_restore_after: Duration::from_secs(180),
            memory: true,
        }
    }
}

/// `on` or `off` (a setting that is a switch).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum OnOff {
    On,
    Off,
}

impl OnOff {
    pub fn as_str(self) -> &'static str {
        match self {
            OnOff::On => "on",
            OnOff::Off => "off",
        }
    }

    pub fn from_bool(on: bool) -> Self {
        if on {
            OnOff::On
        } else {
            OnOff::Off
        }
    }
}

/// mClock profiles a `ceph config set osd osd_mclock_profile` accepts.
pub const MCLOCK_PROFILES: [&str; 4] =
    ["high_client_ops", "high_recovery_ops", "balanced", "custom"];
