//! What the enforcer tells people: one [`DecisionEvent`] per kind of line in the decision log,
//! and the [`DecisionRecord`] that carries it with the cycle's numbers.

use serde::Serialize;

use super::types::{Change, Time};

/// Declares the events once: the enum, its log names and the list metrics publish from the start.
macro_rules! decision_events {
    ($($(#[$doc:meta])* $variant:ident => $name:literal,)+) => {
        /// Everything the decision log can say; `as_str` is the `event` field and the
        /// `action` label of `ceph_recovery_budget_decisions_total`.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum DecisionEvent {
            $($(#[$doc])* $variant,)+
        }

        impl DecisionEvent {
            /// Every event, published at 0 from the start so that `increase()` sees the first.
            pub const ALL: &'static [DecisionEvent] = &[$(DecisionEvent::$variant,)+];

            pub fn as_str(self) -> &'static str {
                match self {
                    $(DecisionEvent::$variant => $name,)+
                }
            }
        }
    };
}

decision_events! {
    /// The actions (each `ActionKind` logs as its event).
    Throttle => "THROTTLE",
    Suspend => "SUSPEND",
    Resume => "RESUME",
    Restore => "RESTORE",
    Escalate => "ESCALATE",
    Descend => "DESCEND",
    /// Blind for `--enforcer.blind-restore-after`: the operator's originals restored.
    Blind => "BLIND",
    Pause => "PAUSE",
    Unpause => "UNPAUSE",
    /// A command of an action failed (retried with backoff).
    ActionFailed => "ACTION_FAILED",
    LadderSkip => "LADDER_SKIP",
    LadderTop => "LADDER_TOP",
    LadderWait => "LADDER_WAIT",
    PauseEnded => "PAUSE_ENDED",
    PauseShare => "PAUSE_SHARE",
    /// The level controller moved (`--enforcer.controller levels`): the record's `level`
    /// says from where, to where and why.
    Level => "LEVEL",
    /// The backfill lever's N changed (or it ended): at most N PGs backfill at once.
    BackfillLimit => "BACKFILL_LIMIT",
    /// The backfill lever held or released PGs (pg-upmap-items), or paused or put back the
    /// balancer.
    Backfill => "BACKFILL",
    Breach => "BREACH",
    BreachEnded => "BREACH_ENDED",
    Effective => "EFFECTIVE",
    /// One latency window after a move of the ladder: the p99 it produced.
    Effect => "EFFECT",
    Hold => "HOLD",
    HoldEnded => "HOLD_ENDED",
    NotTaken => "NOT_TAKEN",
    NothingToDo => "NOTHING_TO_DO",
    NoBaseline => "NO_BASELINE",
    NoEffect => "NO_EFFECT",
    NoLever => "NO_LEVER",
    Override => "OVERRIDE",
    OverrideEnded => "OVERRIDE_ENDED",
    RateLimited => "RATE_LIMITED",
    RecoveryFinished => "RECOVERY_FINISHED",
    RecoveryStarted => "RECOVERY_STARTED",
    Suspended => "SUSPENDED",
    /// At start: pause flags or lever keys on the cluster the enforcer has no record of setting
    /// (named, never touched).
    Unowned => "UNOWNED",
    Verified => "VERIFIED",
    /// No recovery, yet client p99 above the bound for `for`: the baseline looks too low
    /// (a warning: every recovery would start in breach).
    BaselineSuspect => "BASELINE_SUSPECT",
    /// This instance took the lease: it acts from now on, from the state stored with it.
    LeaseAcquired => "LEASE_ACQUIRED",
    /// This instance stopped holding the lease (renew deadline, taken, released).
    LeaseLost => "LEASE_LOST",
    /// Another instance holds the lease; this one watches.
    Standby => "STANDBY",
}

impl DecisionEvent {
    /// Events logged as warnings: something the operator must change, not a decision.
    pub fn warns(event: &str) -> bool {
        event == DecisionEvent::BaselineSuspect.as_str()
    }
}

impl std::fmt::Display for DecisionEvent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A line of the decision log, also served as JSON on /decisions.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DecisionRecord {
    pub time: Time,
    pub mode: &'static str,
    /// A [`DecisionEvent`]'s name: THROTTLE, SUSPEND, RESUME, RESTORE, or a state change
    /// (BREACH, HOLD, ...). Text, as served and as read back by `status`.
    pub event: String,
    /// The action was carried out (false: observe mode, or a note).
    pub performed: bool,
    pub message: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub changes: Vec<Change>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub p99_seconds: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bound_seconds: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub baseline_seconds: Option<f64>,
    pub pgs_recovering: u64,
    pub pgs_undersized: u64,
    pub degraded_objects: u64,
    pub misplaced_objects: u64,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub pools_at_min_size: Vec<String>,
    /// A LEVEL line's move, as fields.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub level: Option<LevelMove>,
    /// The LEVEL line that states the time limit's deadline, as fields.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deadline: Option<super::levels::controller::Deadline>,
}

/// A move of the level controller: the indexes on this recovery's list (0 the most recovery),
/// what each level asks, and why (p99 and means as fractions of the bound).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LevelMove {
    pub from: usize,
    pub to: usize,
    pub from_level: String,
    pub to_level: String,
    pub why: super::levels::controller::Why,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn event_names_are_unique_screaming_snake_case() {
        let names: std::collections::BTreeSet<&str> =
            DecisionEvent::ALL.iter().map(|e| e.as_str()).collect();
        assert_eq!(names.len(), DecisionEvent::ALL.len());
        assert!(names
            .iter()
            .all(|n| n.chars().all(|c| c.is_ascii_uppercase() || c == '_')));
    }
}
