//! What the enforcer does to the cluster, as data: [`Effect`]s out of `decide`, and the
//! [`Outcome`] of each that the loop feeds back into `apply_outcome`.

use std::collections::BTreeMap;

use super::event::DecisionRecord;
use super::state::{ActionKind, EnforcerState};
use super::types::Time;
pub use super::types::{Change, Refused};
use crate::backfill::{BalancerStep, PlannedHold};
use crate::ceph::ops::{Missing, OpsError};
use crate::ceph::parse::upmap::{PgId, UpmapItem};
use crate::ceph::CephError;

/// A change of the OSDs' configuration: one step of the policy (throttle, suspend, a rung...).
#[derive(Debug, Clone, PartialEq)]
pub struct Action {
    pub kind: ActionKind,
    pub changes: Vec<Change>,
    /// Why, in numbers.
    pub reason: String,
    /// Values also pushed to the running OSDs (`ceph tell osd.* config set`): Pacific keeps a
    /// built-in profile's scheduler values over the config database's, so a `custom` limit
    /// set with `config set` alone would not bind until the OSDs restart.
    pub push: Vec<(String, String)>,
    /// Where the ladder stands (rung, step) once the action is carried out.
    pub rung: Option<(u8, usize)>,
    /// `Some("SHUTDOWN")`: handing back at exit, said as such (and never retried).
    pub lifecycle: Option<&'static str>,
}

impl Action {
    pub fn describe(&self) -> String {
        if self.kind == ActionKind::BlindRestore && self.lifecycle.is_none() {
            return self.blind_line(true);
        }
        let Some(when) = self.lifecycle else {
            if self.changes.is_empty() {
                return format!(
                    "{}: nothing to change, every setting is already as wanted: {}",
                    self.kind.as_str(),
                    self.reason
                );
            }
            let changes: Vec<String> = self.changes.iter().map(describe_change).collect();
            return format!(
                "{} {}: {}",
                self.kind.as_str(),
                changes.join(", "),
                self.reason
            );
        };
        if self.changes.is_empty() {
            return format!("{when}: {}", self.reason);
        }
        format!("{when}: {}; {}", self.handed_back(), self.reason)
    }

    /// The BLIND line: why (the reason says how long and what is down), what went back, and
    /// what that means until the enforcer sees again. `done` false: observe mode, nothing was.
    pub fn blind_line(&self, done: bool) -> String {
        let changes: Vec<String> = self.changes.iter().map(describe_change).collect();
        let what = if changes.is_empty() {
            "every setting was already the operator's".to_string()
        } else if done {
            format!("restored {}", changes.join(", "))
        } else {
            format!("would have restored {}", changes.join(", "))
        };
        if done {
            format!("BLIND: {}; {what}; recovery runs at the operator's settings until the enforcer can see again", self.reason)
        } else {
            format!(
                "(observe mode) BLIND: {}; {what}; nothing was changed on the cluster",
                self.reason
            )
        }
    }

    /// "restored osd_mclock_profile balanced (was high_client_ops, set by the enforcer)", for
    /// each change, in words an on-call engineer reads without the code.
    pub fn handed_back(&self) -> String {
        let each: Vec<String> = self
            .changes
            .iter()
            .map(|c| {
                let was = c.from.as_deref().unwrap_or("(unset)");
                match &c.to {
                    Some(v) => format!("restored {} {v} (was {was}, set by the enforcer)", c.key),
                    None => format!(
                        "removed {} (the operator had it unset; was {was}, set by the enforcer)",
                        c.key
                    ),
                }
            })
            .collect();
        each.join(", ")
    }
}

/// One change for the log. A key whose value in the config database is already the one wanted
/// is listed only when it still changes on the running OSDs (a recovery limit told to them).
fn describe_change(c: &Change) -> String {
    if c.from == c.to {
        format!(
            "{} unset on the running OSDs (the config database already has {})",
            c.key,
            c.to.as_deref().unwrap_or("it unset")
        )
    } else {
        c.describe()
    }
}

/// What `decide` wants done, before the limits are checked.
pub(super) struct Want {
    pub(super) kind: ActionKind,
    pub(super) changes: Vec<Change>,
    pub(super) reason: String,
    pub(super) push: Vec<(String, String)>,
    pub(super) rung: Option<(u8, usize)>,
}

impl Want {
    pub(super) fn new(kind: ActionKind, changes: Vec<Change>, reason: String) -> Self {
        Self {
            kind,
            changes,
            reason,
            push: Vec::new(),
            rung: None,
        }
    }
}

/// Why flags are changed: the pause rung's duty cycle, or the enforcer starting or stopping
/// (its own flags never outlive a run).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FlagsFor {
    /// The pause rung (PAUSE / UNPAUSE in the decision log).
    Pause,
    /// START or SHUTDOWN: every flag the state file says the enforcer set.
    Lifecycle(&'static str),
}

/// One thing to do to the cluster. The loop runs them in order (in observe mode it runs
/// nothing and reports [`Outcome::Simulated`]).
#[derive(Debug, Clone, PartialEq)]
pub enum Effect {
    /// Runs in order: `tell osd.* config unset` of a pushed recovery limit the action drops,
    /// `config set/rm osd` of each change (stopping at the first failure), then the pushes.
    Config(Action),
    /// `ceph osd set FLAG` for each, in order; after a failure each is unset again (`take_back`),
    /// so that no half pause stays.
    SetFlags { flags: Vec<String>, for_: FlagsFor },
    /// `ceph osd unset FLAG` for each (all are tried).
    UnsetFlags { flags: Vec<String>, for_: FlagsFor },
    /// The backfill lever (rung 3): `ceph osd rm-pg-upmap-items` of each PG to release (ours
    /// only; the items it had before put back where it had some), `ceph osd pg-upmap-items` of
    /// each to hold (each in the state before it runs), and
    /// the balancer paused (`balancer off`) or put back as it was. The releases run first.
    Backfill(BackfillEffect),
}

/// One step of the backfill lever.
#[derive(Debug, Clone, PartialEq)]
pub struct BackfillEffect {
    pub hold: Vec<PlannedHold>,
    pub release: Vec<PgId>,
    /// Of `release`, those held over someone else's items: theirs, put back
    /// (`pg-upmap-items`) in place of `rm-pg-upmap-items`.
    pub restore: BTreeMap<PgId, Vec<UpmapItem>>,
    pub balancer: BalancerStep,
    /// The cluster (recorded with the first entry) and the OSD map epoch the holds come from.
    pub fsid: String,
    pub epoch: u64,
    /// Why, for the log: "at most 2 PGs backfill at once (rung 3)", "redundancy at risk".
    pub why: String,
    /// PGs backfilling (not held) before, and after if Ceph does as planned.
    pub backfilling: (usize, usize),
    /// `Some("SHUTDOWN")` etc.: handing back at a lifecycle step.
    pub lifecycle: Option<&'static str>,
}

impl BackfillEffect {
    /// The items releasing `id` puts back (none: its entry is removed).
    pub fn restore_items(&self, id: PgId) -> &[UpmapItem] {
        self.restore.get(&id).map_or(&[], Vec::as_slice)
    }

    /// The command that releases `id`.
    pub fn release_command(&self, id: PgId) -> String {
        crate::backfill::record::set_items_command(id, self.restore_items(id))
    }

    /// Nothing for Ceph to do.
    pub fn is_empty(&self) -> bool {
        self.hold.is_empty()
            && self.release.is_empty()
            && matches!(self.balancer, BalancerStep::Nothing)
    }
}

/// An effect with what must be on disk before it runs.
#[derive(Debug, Clone, PartialEq)]
pub struct Planned {
    pub effect: Effect,
    /// Write the state file first (the reason, for the log); when it cannot be written the
    /// effect is not run ([`Outcome::NotSaved`]).
    pub persist_first: Option<&'static str>,
}

/// Configured values read back after a failed config change: a timed-out `config set` may still
/// have been applied by the mon.
#[derive(Debug, Clone, PartialEq)]
pub struct ReadBack {
    pub values: BTreeMap<String, Option<String>>,
    /// When they were read.
    pub at: Time,
}

/// Why a command of an effect failed, as the log says it; when Ceph refused it for lack of a
/// cephx capability (EACCES), which command and the grant it needs: retrying cannot help until
/// someone grants it, and the line must say what to grant.
#[derive(Debug, Clone, PartialEq)]
pub struct CommandError {
    pub message: String,
    pub refused: Option<Refused>,
    /// An upmap command refused for naming a PG or an OSD that does not exist (ENOENT):
    /// asking again cannot work, so the lever's record drops or trims the entry.
    pub missing: Option<Missing>,
}

impl std::fmt::Display for CommandError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl From<OpsError> for CommandError {
    fn from(e: OpsError) -> Self {
        let refused = match &e {
            OpsError::Ceph(CephError::PermissionDenied { command, cap, .. }) => Some(Refused {
                command: command.clone(),
                cap: cap.clone(),
            }),
            _ => None,
        };
        CommandError {
            missing: e.missing(),
            message: e.to_string(),
            refused,
        }
    }
}

impl From<String> for CommandError {
    fn from(message: String) -> Self {
        CommandError {
            message,
            refused: None,
            missing: None,
        }
    }
}

impl From<&str> for CommandError {
    fn from(message: &str) -> Self {
        message.to_string().into()
    }
}

/// One flag command: the flag, and what the command answered.
pub type FlagResult = (String, Result<(), CommandError>);

/// What happened when the loop carried out an effect.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// Observe mode: nothing was run.
    Simulated,
    /// Not run: the state file could not be written first. For a config change, the keys read
    /// back afterwards (`None`: the read failed).
    NotSaved {
        read_back: Option<ReadBack>,
        /// Why, as the rest of "not changing the cluster: ...".
        why: String,
    },
    /// A config change ran: `Err` is the first failed command's error; after a failure the keys
    /// are read back (`None`: the read failed).
    Config {
        result: Result<(), CommandError>,
        read_back: Option<ReadBack>,
    },
    /// Flag commands ran: each flag's result, in order. For `SetFlags`, `set` stops at the first
    /// failure and `unset` holds the take-back that follows it.
    Flags {
        set: Vec<FlagResult>,
        unset: Vec<FlagResult>,
    },
    /// The backfill lever's commands ran: each release, each hold, then the balancer commands
    /// (`balancer off`, or `balancer mode M` / `balancer on`), each with its result.
    Backfill {
        released: Vec<(PgId, Result<(), CommandError>)>,
        held: Vec<(PgId, Result<(), CommandError>)>,
        balancer: Vec<(String, Result<(), CommandError>)>,
    },
}

impl Outcome {
    /// A config change that ran without error.
    pub fn done() -> Self {
        Outcome::Config {
            result: Ok(()),
            read_back: None,
        }
    }

    /// A config change that failed, nothing read back.
    pub fn failed(error: impl Into<CommandError>) -> Self {
        Outcome::Config {
            result: Err(error.into()),
            read_back: None,
        }
    }
}

/// A line for the log that is not a decision record (start, shutdown, learned baseline).
#[derive(Debug, Clone, PartialEq)]
pub enum LogLine {
    Info(String),
    Warn(String),
    Error(String),
}

/// What `decide` (or another pure step of the loop) wants: effects, log lines, the next state.
#[derive(Debug, Clone, PartialEq)]
pub struct Decision {
    /// In order; the loop runs each, then `apply_outcome` with its result.
    pub effects: Vec<Planned>,
    /// Lines for the decision log.
    pub notes: Vec<DecisionRecord>,
    /// What the enforcer remembers if no effect is carried out: `apply_outcome` adds each result.
    pub next: EnforcerState,
}

impl Decision {
    /// The config change among the effects, if any.
    pub fn action(&self) -> Option<&Action> {
        self.effects.iter().find_map(|p| match &p.effect {
            Effect::Config(a) => Some(a),
            _ => None,
        })
    }
}
