//! What the enforcer remembers across cycles and restarts (persisted in the state file).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::backfill_limit::{LeverState, LEVER_RUNG, PAUSE_RUNG};
use super::event::DecisionEvent;
use super::pause::PauseState;
use super::stored::{self, NotOurs, WrittenBy};
use super::types::Refused;
pub use super::types::Time;
use crate::backfill::Record;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ActionKind {
    /// Slow recovery to protect client latency.
    Throttle,
    /// Recovery first: redundancy is at risk.
    Suspend,
    /// Redundancy is back during recovery: undo the suspension, the bound applies again.
    Resume,
    /// Recovery finished: put back what the operator had.
    Restore,
    /// The rung held did not bring p99 within the bound: the next, stronger one.
    Escalate,
    /// p99 well below the bound: one rung (or step) down.
    Descend,
    /// Blind for `--enforcer.blind-restore-after`: the operator's originals back while the
    /// enforcer cannot see (retried like any action; the episode is judged afresh afterwards).
    BlindRestore,
}

impl ActionKind {
    /// The decision log's event for this action (the pause flags are effects of their own).
    pub fn event(self) -> DecisionEvent {
        match self {
            ActionKind::Throttle => DecisionEvent::Throttle,
            ActionKind::Suspend => DecisionEvent::Suspend,
            ActionKind::Resume => DecisionEvent::Resume,
            ActionKind::Restore => DecisionEvent::Restore,
            ActionKind::Escalate => DecisionEvent::Escalate,
            ActionKind::Descend => DecisionEvent::Descend,
            ActionKind::BlindRestore => DecisionEvent::Blind,
        }
    }

    pub fn as_str(self) -> &'static str {
        self.event().as_str()
    }

    /// Puts the operator's values back (RESTORE, BLIND, and RESUME, which ends a suspension).
    pub fn gives_back(self) -> bool {
        matches!(
            self,
            ActionKind::Restore | ActionKind::BlindRestore | ActionKind::Resume
        )
    }

    /// Moves away from the operator's values, so its changes' `from` become the originals
    /// to put back (THROTTLE, SUSPEND, ESCALATE, DESCEND): the opposite of [`Self::gives_back`].
    pub fn records_originals(self) -> bool {
        !self.gives_back()
    }

    /// Whether the change limits (`--enforcer.min-interval`, `--enforcer.max-changes-per-hour`)
    /// hold and count it: only the steps that slow recovery down (THROTTLE, ESCALATE). Every
    /// step back towards recovery (SUSPEND, DESCEND) and every give-back goes at once and is
    /// not counted: the limits exist to stop the enforcer flapping the cluster, never to keep
    /// recovery slowed while redundancy is at risk (a flapping OSD could otherwise use up the
    /// hour's budget and hold SUSPEND back for up to an hour).
    pub fn limited(self) -> bool {
        matches!(self, ActionKind::Throttle | ActionKind::Escalate)
    }
}

/// What the enforcer set and still holds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Applied {
    pub kind: ActionKind,
    /// key -> value set with `ceph config set osd`.
    pub values: BTreeMap<String, String>,
    pub at: Time,
    /// Observe mode: nothing was really set.
    pub simulated: bool,
    /// The OSDs' effective profile was checked.
    pub verified: bool,
    /// OSDs that did not take the profile (set once, of those that answered the check).
    pub not_taken: Vec<String>,
    /// After a latency window: did p99 come back within the bound?
    pub effective: Option<bool>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Retry {
    pub kind: ActionKind,
    pub attempts: u32,
    pub next_at: Time,
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Learned {
    pub p99_seconds: f64,
    pub at: Time,
}

/// The phase shown to people and in `ceph_recovery_budget_state{state}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    /// No recovery, nothing changed.
    #[default]
    Idle,
    /// Recovery running, p99 within the bound (or breached for less than `for`).
    Watching,
    /// p99 above the bound for `for` but not throttled (rate limit, failure, no effect possible).
    Breached,
    Throttled,
    Suspended,
    /// Recovery finished; waiting `settle` before restoring.
    Settling,
    /// A person changed what the enforcer set; hands off until recovery ends.
    Overridden,
    /// Observations stale or failing: no action on old data.
    Holding,
    /// Another instance holds the lease and acts; this one only watches (never persisted: the
    /// view shows it, the state keeps its own phase).
    Standby,
}

impl Phase {
    pub const ALL: [Phase; 9] = [
        Phase::Idle,
        Phase::Watching,
        Phase::Breached,
        Phase::Throttled,
        Phase::Suspended,
        Phase::Settling,
        Phase::Overridden,
        Phase::Holding,
        Phase::Standby,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Idle => "idle",
            Phase::Watching => "watching",
            Phase::Breached => "breached",
            Phase::Throttled => "throttled",
            Phase::Suspended => "suspended",
            Phase::Settling => "settling",
            Phase::Overridden => "overridden",
            Phase::Holding => "holding",
            Phase::Standby => "standby",
        }
    }
}

/// Where the enforcer stands on the escalation ladder (issue #7). Rung 1 is the throttle
/// (`applied` of kind THROTTLE), rung 2 a recovery-rate limit stepped down, rung 3 the backfill
/// lever (at most N PGs backfill at once), rung 4 the duty-cycled pause.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(default)]
pub struct LadderState {
    /// 0: nothing held; 1: throttle; 2: recovery limit; 3: backfill lever; 4: pause.
    pub rung: u8,
    /// Index into the policy's rung-2 steps.
    pub step: usize,
    /// When the rung (or step) held now was entered: judged after the ladder's settle time.
    pub since: Time,
    /// Since when p99 has stayed below the lower threshold (hysteresis for going down).
    pub below_since: Option<Time>,
    /// The pause rung's duty cycle, while on rung 4.
    pub pause: Option<PauseState>,
    /// The backfill lever's N, while on rung 3 (and kept under the pause, at N = 1).
    pub lever: Option<LeverState>,
    /// Highest rung reached in this recovery.
    pub top: u8,
    /// When this recovery started (RECOVERY_STARTED); `None` in states written before it was
    /// kept. The backfill lever's entry on the recovery's first window is gentler
    /// ([`super::backfill_limit::entry_n`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub started: Option<Time>,
    /// Seconds recovery was paused by the enforcer in this recovery (kept after it ends, for
    /// the metric and the alert, until the next recovery starts).
    pub paused_seconds: f64,
    /// Someone cleared the enforcer's pause flags by hand: no pause again in this recovery.
    pub no_pause: bool,
    /// The p99 that made the enforcer enter the rung it holds (to see whether the rung made
    /// things worse).
    pub entered_p99: Option<f64>,
    /// The recovery limit made p99 worse in this recovery: it was taken back, and is skipped.
    pub limit_hurt: bool,
    /// For each rung held now (1 throttle, 2 limit, 3 backfill lever, 4 pause): when it was entered and the p99
    /// that led to it, so that `status` shows "p99 then, p99 now" for what is in force. At most
    /// four.
    pub acted: BTreeMap<u8, Acted>,
    /// The pause share to start at when the pause rung is entered through a config change (a
    /// limit taken back on the way up): chosen by the ladder from the breach and the memory.
    pub entry_share: Option<f64>,
    /// Moves of the ladder whose effect on p99 is judged one latency window later (EFFECT):
    /// each is dropped once judged (or replaced by the same move), all when the recovery ends,
    /// so at most the moves of one window (one a cycle).
    pub watch: Vec<Watch>,
}

/// A move of the ladder (a rung, a pause share) and the p99 that led to it: one latency window
/// later the decision log says what p99 it produced.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Watch {
    /// "ESCALATE to rung 3 (pause 50% of each 10 s)"
    pub what: String,
    pub at: Time,
    pub p99_before: Option<f64>,
}

/// What the enforcer learned about this cluster, kept across recoveries and restarts (in the
/// lease object with the rest of the state): the levers that made client p99 worse here, and
/// what held the bound in the last recovery, where the next one starts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(default)]
pub struct ClusterMemory {
    /// Lever name ([`super::ladder::lever_key`]) -> when and how it hurt.
    pub hurt: BTreeMap<String, Hurt>,
    /// What held the bound in the last recovery that needed the ladder.
    pub held: Option<Held>,
    /// What held the bound in the last recovery that needed the level controller.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub level_held: Option<LevelHeld>,
}

/// The level with the most recovery below the operator's whose windows held at the aim, in the
/// last recovery that went below the operator's level (`--enforcer.controller levels`): a
/// window over the bound in the next recovery moves at least down to it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LevelHeld {
    /// When that recovery ended.
    pub at: Time,
    pub level: super::levels::list::Level,
}

/// A lever that made client p99 worse on this cluster: skipped until `at` + [`HURT_FORGET_AFTER`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Hurt {
    pub at: Time,
    /// "rung 2 (custom profile, recovery limit 1000 IOPS per OSD)"
    pub what: String,
    pub p99_before: f64,
    pub p99_after: f64,
}

/// A cluster changes (hardware, Ceph release, load): a lever that hurt is tried again after 30
/// days, with the same judgement.
pub const HURT_FORGET_AFTER: f64 = 30.0 * 86_400.0;

/// The rung (and pause share, backfill N) in force the last time a period ended with p99 within
/// the bound.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Held {
    pub at: Time,
    pub rung: u8,
    pub share: Option<f64>,
    /// At most this many PGs backfilled at once (the backfill lever, rung 3 or under the pause).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub n: Option<usize>,
}

impl ClusterMemory {
    /// The lever `key` made p99 worse here, recently enough to still be skipped.
    pub fn hurts(&self, key: &str, now: Time) -> Option<&Hurt> {
        self.hurt
            .get(key)
            .filter(|h| now - h.at < HURT_FORGET_AFTER)
    }
}

/// When the enforcer entered a rung, and the client p99 (over its latency window) that led to it.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Acted {
    pub at: Time,
    pub p99_seconds: Option<f64>,
}

impl LadderState {
    /// Records that rung `rung` was entered now on `p99` (`keep`: a rung gone back to keeps
    /// the time and p99 it was first entered with); rungs above it are no longer held.
    pub fn entered(&mut self, rung: u8, at: Time, p99: Option<f64>, keep: bool) {
        self.acted.retain(|r, _| *r < rung);
        let fresh = Acted {
            at,
            p99_seconds: p99,
        };
        if keep {
            self.acted.entry(rung).or_insert(fresh);
        } else {
            self.acted.insert(rung, fresh);
        }
    }

    /// The rung in force and when, with the p99 that led to it; `None` on rung 0.
    pub fn in_force(&self) -> Option<(u8, Acted)> {
        (self.rung >= 1)
            .then(|| self.acted.get(&self.rung).map(|a| (self.rung, *a)))
            .flatten()
    }
}

impl LadderState {
    /// Seconds paused in this recovery, counting a pause still under way (a pause state
    /// starts from the seconds paused before it).
    pub fn paused_so_far(&self, now: Time) -> f64 {
        match &self.pause {
            Some(p) => p.paused_so_far(now),
            None => self.paused_seconds,
        }
    }
}

/// Stored whole (the state file, the lease object, which a takeover reads back up to
/// `lease::rados::MAX_STATE_BYTES`, 1 MiB), so every collection in it is bounded: by a cap, or
/// by what exists now. Each field says what bounds it; docs/benchmarks.md has the size measured
/// with 10,000 PGs refused by the backfill lever.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(default)]
pub struct EnforcerState {
    /// The operator's values before the enforcer first changed them in this recovery episode;
    /// `None` = was not set (restored with `ceph config rm`). Bounded by the keys the enforcer
    /// may change (its levers, a fixed list).
    pub original: BTreeMap<String, Option<String>>,
    pub applied: Option<Applied>,
    pub phase: Phase,
    pub recovery_active: bool,
    pub breach_since: Option<Time>,
    pub recovery_ended_at: Option<Time>,
    /// Times of changes made in the last hour, for the limits: older ones are dropped each
    /// cycle, and only changes the limits allowed are counted (`--enforcer.max-changes-per-hour`).
    pub changes: Vec<Time>,
    pub overridden: bool,
    pub retry: Option<Retry>,
    pub learned: Option<Learned>,
    /// Why observations are not usable, while holding.
    pub holding: Option<String>,
    /// One-shot notes already logged in this episode (so a condition is said once, not every
    /// cycle); cleared when the recovery ends. Added through [`EnforcerState::note`], which
    /// keeps at most [`NOTED_PER_KIND`] keys of a kind (the part before the first `:`) and
    /// digests a key longer than [`NOTED_KEY_MAX`]. The kinds are a fixed list, so this stays a
    /// few KiB whatever the cluster: the lever's PGs it cannot hold are one key, a count and a
    /// digest of the set (`lever_unheld:<count>:<digest>`), not the set itself. The few keys
    /// inserted directly are bounded by what they name: `top:<rung>:<step>` (the ladder's
    /// steps), `rate_limited:<action>`, `pause_budget`, `lever_no_grant`.
    pub noted: BTreeSet<String>,
    pub ladder: LadderState,
    /// OSD map flags (nobackfill, norecover) the enforcer set and has not seen unset yet. Written
    /// to the state file *before* they are set, so that a restart clears them. At most those two.
    pub flags_set: BTreeSet<String>,
    /// Since when observations have been stale or failing without a break (not a hold for
    /// someone else's flags: then the enforcer sees). Kept across a restart: time nobody
    /// watched counts towards `--enforcer.blind-restore-after`.
    pub blind_since: Option<Time>,
    /// The last command Ceph refused for lack of a cephx capability, and when, until a command
    /// needing the same grant works: what `status` says. Not persisted: a restart learns it
    /// again at the first refusal.
    #[serde(skip)]
    pub refused: Option<(Refused, Time)>,
    /// The level controller's list and position in this recovery (`--enforcer.controller
    /// levels`); `None` with the ladder, and between recoveries. Bounded: one list of at most
    /// a few dozen levels, each level's last windows.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub levels: Option<super::levels::controller::Run>,
    /// The pause share of the last PAUSE line in the decision log: each slice at the same share
    /// is counted and logged at debug level only, so the log stays readable. Not persisted.
    #[serde(skip)]
    pub logged_pause_share: Option<f64>,
    /// Since when client p99 has been above the bound with no recovery running (fresh data,
    /// recent writes). Not persisted: a restart judges again.
    #[serde(skip)]
    pub baseline_high_since: Option<Time>,
    /// p99 stayed above the bound without recovery for `for`: the baseline looks too low.
    /// Kept through a recovery (it cannot be judged then); cleared by a p99 within the bound
    /// without recovery. Not persisted.
    #[serde(skip)]
    pub baseline_suspect: bool,
    /// The action this cycle wanted and the change limits deferred, and until when. Set by
    /// each decision afresh (not persisted).
    #[serde(skip)]
    pub deferred: Option<(ActionKind, Time)>,
    /// Since when some PG has been inactive (peering, activating) without a break: that puts
    /// redundancy at risk once it lasts `redundancy::INACTIVE_GRACE`. Not persisted: after a
    /// restart the grace starts again.
    #[serde(skip)]
    pub inactive_since: Option<Time>,
    /// What the enforcer learned about this cluster (kept across recoveries and restarts):
    /// `hurt` is keyed by lever (a fixed list, each entry replaced), `held` is one entry.
    pub memory: ClusterMemory,
    /// The backfill lever's record: every upmap entry it added (in it before it is added,
    /// removed from it only once removed from the cluster) and the balancer as it was. `held`:
    /// PGs that exist now (checked against the OSD map each cycle), at most
    /// [`crate::backfill::plan::MAX_HELD`], each entry a pool's size of items; `releasing`:
    /// PGs released in the last minute (`RELEASE_SETTLES`).
    pub backfill: Record,
    /// The numbering of the ladder's rungs this state was written with: 0 (missing) is before
    /// the backfill lever, when the pause was rung 3 (read as rung 4, [`LADDER_VERSION`]).
    #[serde(default = "LadderVersion::before_lever")]
    pub ladder_version: LadderVersion,
}

/// Rungs 1 throttle, 2 limit, 3 backfill lever, 4 pause.
pub const LADDER_VERSION: u32 = 2;

/// The most one-shot notes of one kind ([`EnforcerState::note`]): more than any kind needs in a
/// recovery (a rung's steps, the lever's N), few enough that no kind can grow the state.
pub const NOTED_PER_KIND: usize = 16;
/// The longest note key kept as it is ([`EnforcerState::note`]).
pub const NOTED_KEY_MAX: usize = 96;

/// FNV-1a, 64 bits: a digest that stays the same across builds and restarts (the std hasher
/// does not promise to), for keys kept in the stored state.
pub fn digest(text: &str) -> u64 {
    text.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// See [`EnforcerState::ladder_version`]: a new state is of this version, and is always written
/// as such.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
pub struct LadderVersion(pub u32);

impl LadderVersion {
    fn before_lever() -> Self {
        LadderVersion(0)
    }
}

impl Default for LadderVersion {
    fn default() -> Self {
        LadderVersion(LADDER_VERSION)
    }
}

impl Serialize for LadderVersion {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u32(LADDER_VERSION)
    }
}

#[derive(Debug, thiserror::Error)]
pub enum StateFileError {
    #[error("cannot read enforcer state file {path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error("enforcer state file {path} is not valid ({source}); move it aside only if you know the cluster holds no setting the enforcer made (see README: state file)")]
    Parse {
        path: String,
        source: serde_json::Error,
    },
    #[error("cannot write enforcer state file {path}: {source} (see --enforcer.state-file)")]
    Write {
        path: String,
        source: std::io::Error,
    },
    /// Written by a newer binary (issue 33): not read, never overwritten.
    #[error("the enforcer state in {path} {why}")]
    NotOurs { path: String, why: NotOurs },
}

impl EnforcerState {
    /// The operator's value of `key` (None: unset): what was recorded before the enforcer
    /// first changed it, else what the config database says now; `None` when neither is known
    /// this cycle.
    pub fn operators(
        &self,
        obs: &super::observation::Observation,
        key: &str,
    ) -> Option<Option<String>> {
        match self.original.get(key) {
            Some(v) => Some(v.clone()),
            None if obs.configured_known => Some(obs.configured.get(key).cloned().flatten()),
            None => None,
        }
    }

    /// Loads the state file; a missing file is a fresh state.
    pub fn load(path: &Path) -> Result<Self, StateFileError> {
        match std::fs::read(path) {
            Ok(bytes) => Self::from_bytes(&bytes, &path.display().to_string()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Self::default()),
            Err(source) => Err(StateFileError::Read {
                path: path.display().to_string(),
                source,
            }),
        }
    }

    /// Writes atomically (see [`crate::atomic_file::write`]).
    pub fn save(&self, path: &Path) -> Result<(), StateFileError> {
        let err = |source| StateFileError::Write {
            path: path.display().to_string(),
            source,
        };
        let bytes = self.to_bytes().map_err(|e| err(std::io::Error::other(e)))?;
        crate::atomic_file::write(path, &bytes).map_err(err)
    }

    /// The stored form, in the file and in the lease object alike (readable with `rados get`),
    /// with who wrote it first ([`stored`]).
    pub fn to_bytes(&self) -> Result<Vec<u8>, serde_json::Error> {
        #[derive(Serialize)]
        struct Stored<'a> {
            written_by: WrittenBy,
            #[serde(flatten)]
            state: &'a EnforcerState,
        }
        serde_json::to_vec_pretty(&Stored {
            written_by: WrittenBy::this(),
            state: self,
        })
    }

    /// The stored form read back from `place` (named in the error); refused when a newer
    /// binary wrote it ([`stored`]).
    pub fn from_bytes(bytes: &[u8], place: &str) -> Result<Self, StateFileError> {
        let parse = |source| StateFileError::Parse {
            path: place.to_string(),
            source,
        };
        let not_ours = |why| StateFileError::NotOurs {
            path: place.to_string(),
            why,
        };
        let value: serde_json::Value = serde_json::from_slice(bytes).map_err(parse)?;
        stored::check_format(&value).map_err(not_ours)?;
        let state: Self = serde_json::from_value(value.clone()).map_err(parse)?;
        let known = serde_json::to_value(&state).map_err(parse)?;
        stored::check_fields(&value, &known).map_err(not_ours)?;
        Ok(state.migrated())
    }

    /// A state written before the backfill lever numbered the pause 3: it is rung 4 now.
    pub fn migrated(mut self) -> Self {
        if self.ladder_version.0 < LADDER_VERSION {
            let up = |r: &mut u8| {
                if *r >= LEVER_RUNG {
                    *r = PAUSE_RUNG;
                }
            };
            up(&mut self.ladder.rung);
            up(&mut self.ladder.top);
            if let Some(a) = self.ladder.acted.remove(&LEVER_RUNG) {
                self.ladder.acted.insert(PAUSE_RUNG, a);
            }
            if let Some(h) = self.memory.held.as_mut() {
                up(&mut h.rung);
            }
            self.ladder_version = LadderVersion::default();
        }
        self
    }

    /// Notes `key` as said ([`EnforcerState::noted`]); whether it was new (then say it). A key
    /// longer than [`NOTED_KEY_MAX`] is kept as its kind and a digest; a kind that has
    /// [`NOTED_PER_KIND`] keys already loses one of them first (its line may then be said
    /// again, once).
    pub fn note(&mut self, key: impl Into<String>) -> bool {
        let mut key: String = key.into();
        let kind = key.split(':').next().unwrap_or_default().to_string();
        if key.len() > NOTED_KEY_MAX {
            key = format!("{kind}:#{:016x}", digest(&key));
        }
        if self.noted.contains(&key) {
            return false;
        }
        let prefix = format!("{kind}:");
        let same_kind: Vec<String> = self
            .noted
            .iter()
            .filter(|k| k.starts_with(&prefix))
            .cloned()
            .collect();
        for old in same_kind.iter().skip(NOTED_PER_KIND.saturating_sub(1)) {
            self.noted.remove(old);
        }
        self.noted.insert(key)
    }

    /// Entries of the backfill lever still recorded (held, or the balancer paused by it).
    pub fn lever_holds(&self) -> bool {
        !self.backfill.is_empty()
    }

    /// The lever keeps the recovery on at `now`: it holds PGs (active+clean, their data still
    /// to move), or released one so lately that Ceph's stats may not show its backfill yet.
    pub fn lever_keeps_recovery_on(&self, now: Time) -> bool {
        self.lever_holds() || self.backfill.released_lately(now)
    }

    /// The part worth persisting changed (notes and phase alone do not need a write).
    pub fn persistent_eq(&self, other: &Self) -> bool {
        self.original == other.original
            && self.applied == other.applied
            && self.changes == other.changes
            && self.overridden == other.overridden
            && self.learned == other.learned
            && self.recovery_ended_at == other.recovery_ended_at
            && self.recovery_active == other.recovery_active
            && self.flags_set == other.flags_set
            && self.ladder == other.ladder
            && self.blind_since == other.blind_since
            && self.memory == other.memory
            && self.backfill == other.backfill
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn state_round_trips_through_the_file_atomically() {
        let dir = std::env::temp_dir().join(format!("crb-state-{}", std::process::id()));
        let path = dir.join("sub/state.json");
        let mut s = EnforcerState::default();
        s.original.insert("osd_mclock_profile".into(), None);
        s.applied = Some(Applied {
            kind: ActionKind::Throttle,
            values: BTreeMap::from([("osd_mclock_profile".into(), "high_client_ops".into())]),
            at: 1000.0,
            simulated: false,
            verified: false,
            not_taken: vec![],
            effective: None,
        });
        s.save(&path).unwrap();
        assert!(!path.with_extension("json.tmp").exists());
        assert_eq!(EnforcerState::load(&path).unwrap(), s);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_state_from_before_the_backfill_lever_reads_its_pause_as_rung_4() {
        let old = br#"{"ladder": {"rung": 3, "top": 3, "acted": {"3": {"at": 5.0, "p99_seconds": 0.2}},
            "pause": {"share": 0.5, "period_start": 0.0, "paused": true, "paused_total": 0.0, "paused_at": 1.0}},
            "memory": {"held": {"at": 1.0, "rung": 3, "share": 0.6}}}"#;
        let s = EnforcerState::from_bytes(old, "old").unwrap();
        assert_eq!((s.ladder.rung, s.ladder.top), (4, 4));
        assert!(s.ladder.acted.contains_key(&4) && !s.ladder.acted.contains_key(&3));
        assert_eq!(s.memory.held.as_ref().map(|h| h.rung), Some(4));
        assert!(s.ladder.pause.is_some() && s.ladder.lever.is_none());
        // Written back with the new numbering: read as it is.
        let again = EnforcerState::from_bytes(&s.to_bytes().unwrap(), "new").unwrap();
        assert_eq!(again.ladder.rung, 4);
        let mut lever = EnforcerState::default();
        lever.ladder.rung = 3;
        let again = EnforcerState::from_bytes(&lever.to_bytes().unwrap(), "new").unwrap();
        assert_eq!(again.ladder.rung, 3, "a new state's rung 3 is the lever");
    }

    /// The releases on their way were kept with the lever's N before they moved to the record
    /// (`backfill.releasing`): such a state still loads.
    #[test]
    fn a_state_with_the_lever_releasing_of_before_still_loads() {
        let old = br#"{"ladder": {"rung": 3, "top": 3, "lever": {"n": 2, "period_start": 5.0,
            "releasing": {"2.a": 7.5}}}, "backfill": {"version": 1, "held": {}, "next_seq": 4}, "ladder_version": 2}"#;
        let s = EnforcerState::from_bytes(old, "old").unwrap();
        assert_eq!(s.ladder.rung, 3);
        assert_eq!(s.ladder.lever.as_ref().map(|l| l.n), Some(2));
        assert_eq!(s.backfill.next_seq, 4);
    }

    #[test]
    fn missing_file_is_fresh_and_corrupt_file_is_an_error() {
        let dir = std::env::temp_dir().join(format!("crb-state2-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        assert_eq!(
            EnforcerState::load(&dir.join("none.json")).unwrap(),
            EnforcerState::default()
        );
        let bad = dir.join("bad.json");
        std::fs::write(&bad, b"{\"original\": ").unwrap();
        let err = EnforcerState::load(&bad).unwrap_err().to_string();
        assert!(
            err.contains("bad.json") && err.contains("not valid"),
            "{err}"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
