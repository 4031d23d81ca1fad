//! `apply_outcome`: what the enforcer remembers, and tells, once the loop carried out an effect
//! (or, in observe mode, pretended to). Pure, like `decide`; the loop only runs the commands.

use std::collections::BTreeMap;

use super::ctx::Ctx;
use super::effect::{Action, Effect, FlagResult, FlagsFor, LogLine, Outcome, ReadBack};
use super::event::{DecisionEvent, DecisionRecord};
use super::ladder::{same_setting, MCLOCK_PROFILE_KEY, MCLOCK_RECOVERY_LIM, MCLOCK_RECOVERY_RES};
use super::observation::Observation;
use super::pause::{PauseState, PAUSE_FLAGS};
use super::policy::{Mode, Policy};
use super::state::{ActionKind, Applied, EnforcerState, Phase, Retry};
use super::types::Time;
use crate::units::fmt_secs;

/// What [`apply_outcome`] returns: the state now, and what to tell.
#[derive(Debug, Clone, PartialEq)]
pub struct AfterEffect {
    pub next: EnforcerState,
    /// Lines for the decision log.
    pub records: Vec<DecisionRecord>,
    /// Lines counted but logged at debug level only (a pause slice like the last).
    pub quiet: Vec<DecisionRecord>,
    /// Plain log lines.
    pub lines: Vec<LogLine>,
    /// The effect failed: counted in `action_failures_total`.
    pub failed: bool,
    /// The command failed (this error) but the values read back show it applied: counted as done.
    pub took_anyway: Option<String>,
    /// Write the state file now.
    pub persist: Option<Persist>,
}

/// A write of the state file after an effect.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Persist {
    /// The reason, for the log.
    pub why: &'static str,
    /// Written before the effect's lines are logged (a failed pause says what stays set only
    /// once that is on disk).
    pub before_logging: bool,
}

impl Persist {
    fn after_logging(why: &'static str) -> Option<Self> {
        Some(Persist {
            why,
            before_logging: false,
        })
    }
}

impl AfterEffect {
    fn new(next: EnforcerState) -> Self {
        AfterEffect {
            next,
            records: Vec::new(),
            quiet: Vec::new(),
            lines: Vec::new(),
            failed: false,
            took_anyway: None,
            persist: None,
        }
    }
}

/// Backoff after failed attempts: 10 s, 20 s, 40 s, ... at most 5 minutes.
pub fn retry_delay(attempts: u32) -> f64 {
    (10.0 * 2f64.powi(attempts.saturating_sub(1).min(10) as i32)).min(300.0)
}

/// What must be remembered before `effect` runs, so that it is in the state file first (the
/// loop writes it when the effect is planned with `persist_first`): the pause flags about to be
/// set, so that whatever happens next a restart clears them. (A config change's originals are
/// already in `decide`'s next state.)
pub fn remember_first(mut state: EnforcerState, effect: &Effect) -> EnforcerState {
    if let Effect::SetFlags {
        flags,
        for_: FlagsFor::Pause,
    } = effect
    {
        state.flags_set.extend(flags.iter().cloned());
    }
    state
}

/// Adds what happened when the loop carried out `effect` to `state`; `obs` gives the cycle's
/// numbers for the log lines.
pub fn apply_outcome(
    policy: &Policy,
    obs: &Observation,
    state: EnforcerState,
    effect: &Effect,
    outcome: &Outcome,
    now: Time,
) -> AfterEffect {
    let ctx = Ctx::new(policy, obs, now);
    match effect {
        Effect::Config(action) => config_outcome(&ctx, state, action, outcome),
        Effect::SetFlags { flags, .. } => pause_outcome(&ctx, state, flags, outcome),
        Effect::UnsetFlags {
            for_: FlagsFor::Pause,
            ..
        } => unpause_outcome(&ctx, state, outcome),
        Effect::UnsetFlags {
            flags,
            for_: FlagsFor::Lifecycle(when),
        } => release_outcome(state, flags, when, outcome),
    }
}

/// An outcome that does not belong to the effect (a bug in the loop): a failure, never a success.
const MISMATCH: &str = "internal error: the outcome does not match the effect";

fn config_outcome(
    ctx: &Ctx<'_>,
    state: EnforcerState,
    action: &Action,
    outcome: &Outcome,
) -> AfterEffect {
    let policy = ctx.policy;
    let mut took_anyway = None;
    let (result, read_back): (Result<(), String>, Option<&ReadBack>) = match outcome {
        Outcome::Simulated => (Ok(()), None),
        Outcome::NotSaved { read_back, why } => (
            Err(format!("not changing the cluster: {why}")),
            read_back.as_ref(),
        ),
        Outcome::Config { result: Ok(()), .. } => (Ok(()), None),
        Outcome::Config {
            result: Err(e),
            read_back,
        } => {
            // A timed-out `config set` may still have been applied by the mon.
            let all_took = read_back.as_ref().is_some_and(|rb| {
                action
                    .changes
                    .iter()
                    .all(|c| rb.values.get(&c.key).cloned().flatten() == c.to)
            });
            if all_took {
                took_anyway = Some(e.clone());
                (Ok(()), None)
            } else {
                (Err(e.clone()), read_back.as_ref())
            }
        }
        Outcome::Flags { .. } => (Err(MISMATCH.to_string()), None),
    };
    let mut rec = ctx.record(action.kind.event(), action.describe());
    rec.changes = action.changes.clone();
    let mut failed = false;
    match &result {
        Ok(()) if policy.mode == Mode::Enforce => rec.performed = true,
        Ok(()) if action.kind == ActionKind::BlindRestore => rec.message = action.blind_line(false),
        Ok(()) => rec.message = format!("(observe mode) would {}", rec.message),
        Err(e) if action.lifecycle.is_some() => {
            // Stopping: no retry, but the commands that finish the job by hand.
            rec.event = DecisionEvent::ActionFailed.as_str().to_string();
            rec.message = format!(
                "{}: FAILED to hand back {}: {e}; not retried (the enforcer is stopping); the state file keeps the operator's originals for the next start. Run by hand: {}",
                action.lifecycle.unwrap_or("SHUTDOWN"),
                action.changes.iter().map(|c| c.describe()).collect::<Vec<_>>().join(", "),
                by_hand(&Effect::Config(action.clone())).join("; ")
            );
            failed = true;
        }
        Err(e) => {
            let attempts = state
                .retry
                .as_ref()
                .filter(|r| r.kind == action.kind)
                .map_or(0, |r| r.attempts)
                + 1;
            rec.event = DecisionEvent::ActionFailed.as_str().to_string();
            rec.message = if action.kind == ActionKind::BlindRestore {
                // Nothing went back: the originals stay remembered for the next attempt.
                format!(
                    "FAILED BLIND: {}; could not restore {}: {e}; attempt {attempts}, retrying in {}; the state file keeps the operator's originals",
                    action.reason,
                    action.changes.iter().map(|c| c.describe()).collect::<Vec<_>>().join(", "),
                    fmt_secs(retry_delay(attempts))
                )
            } else {
                format!(
                    "FAILED {}: {e}; attempt {attempts}, retrying in {}",
                    action.describe(),
                    fmt_secs(retry_delay(attempts))
                )
            };
            failed = true;
        }
    }
    let mut next = apply_result(policy, state, action, result.is_ok(), ctx.now);
    if result.is_ok() {
        remember_why(&mut next, action, ctx.obs.p99, ctx.now);
    }
    let mut persist = None;
    if failed && policy.mode == Mode::Enforce {
        if let Some(rb) = read_back {
            if hold_what_took(&mut next, action, rb) {
                persist = Persist::after_logging("after a partly applied change");
            }
        }
    }
    AfterEffect {
        records: vec![rec],
        failed,
        took_anyway,
        persist,
        ..AfterEffect::new(next)
    }
}

/// The rung an action put in force, with when and the p99 that led to it (for `status`'s
/// "then and now"); going back to a rung keeps when it was first entered.
fn remember_why(next: &mut EnforcerState, action: &Action, p99: Option<f64>, now: Time) {
    match action.kind {
        ActionKind::Throttle | ActionKind::Escalate | ActionKind::Descend => {
            let rung = next.ladder.rung;
            if rung >= 1 {
                let keep = action.kind == ActionKind::Descend;
                next.ladder.entered(rung, now, p99, keep);
            }
        }
        // Suspend holds no rung; the operator's values back: nothing is in force.
        _ => next.ladder.acted.clear(),
    }
}

/// A multi-key action failed half-way (the profile set, the limit not): what did take is the
/// enforcer's now, so that it is not mistaken for a person's change and is restored. True when
/// something took.
fn hold_what_took(state: &mut EnforcerState, action: &Action, read_back: &ReadBack) -> bool {
    use ActionKind::{Descend, Escalate, Suspend, Throttle};
    if !matches!(action.kind, Throttle | Suspend | Escalate | Descend) {
        return false;
    }
    let took: Vec<_> = action
        .changes
        .iter()
        .filter(|c| {
            same_setting(&read_back.values.get(&c.key).cloned().flatten(), &c.to)
                && !same_setting(&c.from, &c.to)
        })
        .collect();
    if took.is_empty() {
        return false;
    }
    let applied = state.applied.get_or_insert_with(|| Applied {
        kind: if action.kind == Suspend {
            Suspend
        } else {
            Throttle
        },
        values: BTreeMap::new(),
        at: read_back.at,
        simulated: false,
        verified: false,
        not_taken: Vec::new(),
        effective: None,
    });
    for c in took {
        match &c.to {
            Some(v) => applied.values.insert(c.key.clone(), v.clone()),
            None => applied.values.remove(&c.key),
        };
    }
    true
}

/// A PAUSE/UNPAUSE line: in the decision log when something changed (a new share, the pause
/// over, a failure); otherwise counted and logged at debug level, one slice being like the last.
fn slice_line(
    after: &mut AfterEffect,
    event: DecisionEvent,
    rec: DecisionRecord,
    paused: bool,
    share: f64,
) {
    let next = &mut after.next;
    let notable = match event {
        DecisionEvent::Pause => next.logged_pause_share != Some(share),
        DecisionEvent::Unpause => next.ladder.pause.is_none(),
        _ => true,
    };
    if notable {
        after.records.push(rec);
        if event == DecisionEvent::Pause {
            next.logged_pause_share = Some(share);
        }
    } else {
        after.quiet.push(rec);
    }
    if !paused && next.ladder.pause.is_none() {
        next.logged_pause_share = None;
    }
}

/// A line about the pause flags, with the cycle's numbers.
fn flag_record(ctx: &Ctx<'_>, event: DecisionEvent, message: String) -> DecisionRecord {
    DecisionRecord {
        performed: ctx.policy.mode == Mode::Enforce,
        ..ctx.record(event, message)
    }
}

fn pause_outcome(
    ctx: &Ctx<'_>,
    state: EnforcerState,
    flags: &[String],
    outcome: &Outcome,
) -> AfterEffect {
    let policy = ctx.policy;
    let share = state.ladder.pause.as_ref().map_or(0.0, |p| p.share);
    let period = policy.ladder.pause.period;
    let names = PAUSE_FLAGS.join(", ");
    let mut after = AfterEffect::new(state);
    if policy.mode != Mode::Enforce {
        let rec = flag_record(ctx, DecisionEvent::Pause, format!("(observe mode) would PAUSE: ceph osd set {names} for {:.0} s of each {period:.0} s", policy.ladder.pause.planned(share)));
        slice_line(&mut after, DecisionEvent::Pause, rec, true, share);
        return after;
    }
    let (failed, take_back): (Option<String>, &[FlagResult]) = match outcome {
        Outcome::NotSaved { why, .. } => {
            for f in flags {
                after.next.flags_set.remove(f);
            }
            (Some(format!("not pausing: {why}")), &[])
        }
        Outcome::Flags { set, unset } => (
            set.iter()
                .find_map(|(f, r)| r.as_ref().err().map(|e| format!("ceph osd set {f}: {e}"))),
            unset,
        ),
        Outcome::Simulated | Outcome::Config { .. } => (Some(MISMATCH.to_string()), &[]),
    };
    let rec = match failed {
        None => flag_record(
            ctx,
            DecisionEvent::Pause,
            format!(
                "PAUSE: ceph osd set {names} for {:.0} s of this {period:.0} s period (share {:.0}%); paused {} in this recovery so far",
                policy.ladder.pause.planned(share),
                share * 100.0,
                fmt_secs(after.next.ladder.paused_so_far(ctx.now))
            ),
        ),
        Some(e) => {
            // Not paused: what this attempt may have set was taken back, so that the next
            // attempt starts clean (and no half pause stays).
            let next = &mut after.next;
            if let Some(p) = next.ladder.pause.as_mut() {
                p.cancel();
            }
            let mut left = Vec::new();
            for (f, r) in take_back {
                match r {
                    Ok(()) => {
                        next.flags_set.remove(f);
                    }
                    Err(_) => left.push(f.clone()),
                }
            }
            let then = if left.is_empty() {
                "nothing of it stays set; the pause is tried again in its next slot".to_string()
            } else {
                format!(
                    "{} may still be set: unsetting it is retried every cycle",
                    left.join(" and ")
                )
            };
            after.failed = true;
            after.persist = Some(Persist {
                why: "after a failed pause",
                before_logging: true,
            });
            DecisionRecord {
                performed: false,
                ..flag_record(
                    ctx,
                    DecisionEvent::ActionFailed,
                    format!("FAILED PAUSE: {e}; {then}"),
                )
            }
        }
    };
    let event = if after.failed {
        DecisionEvent::ActionFailed
    } else {
        DecisionEvent::Pause
    };
    slice_line(&mut after, event, rec, true, share);
    after
}

fn unpause_outcome(ctx: &Ctx<'_>, state: EnforcerState, outcome: &Outcome) -> AfterEffect {
    let policy = ctx.policy;
    let share = state.ladder.pause.as_ref().map_or(0.0, |p| p.share);
    let period = policy.ladder.pause.period;
    let names = PAUSE_FLAGS.join(", ");
    let mut after = AfterEffect::new(state);
    if policy.mode != Mode::Enforce {
        let rec = flag_record(
            ctx,
            DecisionEvent::Unpause,
            format!("(observe mode) would UNPAUSE: ceph osd unset {names}"),
        );
        slice_line(&mut after, DecisionEvent::Unpause, rec, false, share);
        return after;
    }
    let errors = forget_unset(&mut after.next, outcome);
    let (event, rec) = if errors.is_empty() {
        let why = if after.next.ladder.pause.is_some() {
            format!(
                "recovery runs for the rest of this {period:.0} s period ({:.0}% paused)",
                share * 100.0
            )
        } else {
            "the pause has ended".to_string()
        };
        // "so far" only while the recovery goes on.
        let paused = fmt_secs(after.next.ladder.paused_so_far(ctx.now));
        let total = if after.next.recovery_active {
            format!("paused {paused} in this recovery so far")
        } else {
            format!("paused {paused} in the recovery that ended")
        };
        let rec = flag_record(
            ctx,
            DecisionEvent::Unpause,
            format!("UNPAUSE: ceph osd unset {names}: {why}; {total}"),
        );
        (DecisionEvent::Unpause, rec)
    } else {
        after.failed = true;
        let rec = DecisionRecord {
            performed: false,
            ..flag_record(
                ctx,
                DecisionEvent::ActionFailed,
                format!(
                    "FAILED UNPAUSE: {}; trying again every cycle (recovery stays paused until it works: check the cluster)",
                    errors.join("; ")
                ),
            )
        };
        (DecisionEvent::ActionFailed, rec)
    };
    slice_line(&mut after, event, rec, false, share);
    after.persist = Persist::after_logging("after unsetting the pause flags");
    after
}

/// START/SHUTDOWN: the enforcer's own flags unset (each one that worked is no longer its own).
fn release_outcome(
    state: EnforcerState,
    flags: &[String],
    when: &'static str,
    outcome: &Outcome,
) -> AfterEffect {
    let mut after = AfterEffect::new(state);
    let failed = forget_unset(&mut after.next, outcome);
    after.lines.push(if failed.is_empty() {
        LogLine::Info(format!("{when}: unset {} (set by the enforcer's pause rung); recovery is not paused by the enforcer", flags.join(", ")))
    } else {
        LogLine::Error(format!("{when}: could not unset the enforcer's pause flags: {}; RECOVERY MAY STAY PAUSED: run `ceph osd unset nobackfill; ceph osd unset norecover`", failed.join("; ")))
    });
    after.persist = Persist::after_logging(when);
    after
}

/// The state once `action` was carried out (`ok`) or failed (retried with backoff).
fn apply_result(
    policy: &Policy,
    mut state: EnforcerState,
    action: &Action,
    ok: bool,
    now: Time,
) -> EnforcerState {
    if ok {
        state.retry = None;
        if !action.changes.is_empty() {
            state.changes.push(now);
        }
        state.noted.retain(|n| !n.starts_with("rate_limited:"));
        let wpq_suspension = action.kind == ActionKind::Suspend
            && !action.changes.iter().any(|c| c.key == MCLOCK_PROFILE_KEY);
        match action.kind {
            ActionKind::Throttle
            | ActionKind::Suspend
            | ActionKind::Escalate
            | ActionKind::Descend
                if !wpq_suspension =>
            {
                // What the enforcer holds now: what it held, with these changes.
                let mut values = match action.kind {
                    ActionKind::Throttle => BTreeMap::new(),
                    _ => state
                        .applied
                        .as_ref()
                        .map(|a| a.values.clone())
                        .unwrap_or_default(),
                };
                for c in &action.changes {
                    match &c.to {
                        Some(v) => values.insert(c.key.clone(), v.clone()),
                        None => values.remove(&c.key),
                    };
                }
                let kind = if action.kind == ActionKind::Suspend {
                    ActionKind::Suspend
                } else {
                    ActionKind::Throttle
                };
                state.applied = Some(Applied {
                    kind,
                    values,
                    at: now,
                    simulated: policy.mode != Mode::Enforce,
                    verified: false,
                    not_taken: Vec::new(),
                    effective: None,
                });
                let (rung, step) = match action.kind {
                    ActionKind::Throttle => (1, 0),
                    ActionKind::Suspend => (0, 0),
                    _ => action.rung.unwrap_or((1, 0)),
                };
                state.ladder.rung = rung;
                state.ladder.step = step;
                state.ladder.since = now;
                state.ladder.below_since = None;
                state.ladder.top = state.ladder.top.max(rung);
                // Onto the pause together with a config change (a limit taken back).
                if rung >= 3 && state.ladder.pause.is_none() {
                    let mut ps = PauseState::start(&policy.ladder.pause, now);
                    ps.paused_total = state.ladder.paused_seconds;
                    state.ladder.pause = Some(ps);
                }
                state.phase = if kind == ActionKind::Throttle {
                    Phase::Throttled
                } else {
                    Phase::Suspended
                };
            }
            // Back to the operator's values (Restore, Resume, BlindRestore, or a wpq
            // suspension). A blind restore leaves the phase alone: still holding.
            _ => {
                state.applied = None;
                state.original.clear();
                state.ladder.rung = 0;
                state.ladder.step = 0;
                state.ladder.below_since = None;
                if action.kind == ActionKind::Restore {
                    state.recovery_ended_at = None;
                    state.noted.clear();
                    state.phase = Phase::Idle;
                }
            }
        }
    } else {
        let attempts = state
            .retry
            .as_ref()
            .filter(|r| r.kind == action.kind)
            .map_or(0, |r| r.attempts)
            + 1;
        state.retry = Some(Retry {
            kind: action.kind,
            attempts,
            next_at: now + retry_delay(attempts),
        });
    }
    state
}

/// The commands that do what `effect` hands back, for a person to run when the enforcer could
/// not (a failure or the deadline at exit).
pub fn by_hand(effect: &Effect) -> Vec<String> {
    match effect {
        Effect::Config(action) => {
            let mut cmds = Vec::new();
            for c in &action.changes {
                // A value told to the running OSDs goes first, as the loop does it.
                let pushed = [MCLOCK_RECOVERY_LIM, MCLOCK_RECOVERY_RES];
                if pushed.contains(&c.key.as_str()) && !action.push.iter().any(|(k, _)| *k == c.key)
                {
                    cmds.push(format!("ceph tell 'osd.*' config unset {}", c.key));
                }
            }
            for c in &action.changes {
                cmds.push(match &c.to {
                    Some(v) => format!("ceph config set osd {} {v}", c.key),
                    None => format!("ceph config rm osd {}", c.key),
                });
            }
            cmds
        }
        Effect::UnsetFlags { flags, .. } => flags
            .iter()
            .map(|f| format!("ceph osd unset {f}"))
            .collect(),
        Effect::SetFlags { flags, .. } => {
            flags.iter().map(|f| format!("ceph osd set {f}")).collect()
        }
    }
}

/// Drops each flag the `osd unset` of `outcome` did unset from what the enforcer holds; the
/// failures, one line each (a flag not unset stays the enforcer's, to be tried again).
fn forget_unset(next: &mut EnforcerState, outcome: &Outcome) -> Vec<String> {
    let Outcome::Flags { unset, .. } = outcome else {
        return vec![MISMATCH.to_string()];
    };
    let mut failed = Vec::new();
    for (f, r) in unset {
        match r {
            Ok(()) => {
                next.flags_set.remove(f);
            }
            Err(e) => failed.push(format!("ceph osd unset {f}: {e}")),
        }
    }
    failed
}
