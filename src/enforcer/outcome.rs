//! `apply_outcome`: what the enforcer remembers, and tells, once the loop carried out an effect
//! (or, in observe mode, pretended to). Pure, like `decide`; the loop only runs the commands.

use std::collections::BTreeMap;

use super::ctx::Ctx;
use super::effect::{
    Action, BackfillEffect, CommandError, Effect, FlagResult, FlagsFor, LogLine, Outcome, ReadBack,
    Refused,
};
use super::event::{DecisionEvent, DecisionRecord};
use super::ladder::{same_setting, MCLOCK_PROFILE_KEY};
use super::observation::Observation;
use super::pause::{PauseState, PAUSE_FLAGS};
use super::policy::{Mode, Policy};
use super::state::{ActionKind, Applied, EnforcerState, Phase, Retry};
use super::types::Time;
use super::types::MCLOCK_PUSHED;
use crate::backfill::{BalancerStep, Forget, Trim};
use crate::ceph::caps;
use crate::ceph::ops::Missing;
use crate::ceph::parse::upmap::PgId;
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

/// The longest wait before a failed change is tried again, and the wait after a refusal for
/// lack of a cephx capability (EACCES): no retry can fix that, only a person granting it.
pub const MAX_RETRY_DELAY: f64 = 300.0;

/// Backoff after failed attempts: 10 s, 20 s, 40 s, ... at most 5 minutes.
pub fn retry_delay(attempts: u32) -> f64 {
    (10.0 * 2f64.powi(attempts.saturating_sub(1).min(10) as i32)).min(MAX_RETRY_DELAY)
}

/// The wait before trying again after `error`, the `attempts`-th failure in a row.
fn delay_after(error: &CommandError, attempts: u32) -> f64 {
    if error.refused.is_some() {
        MAX_RETRY_DELAY
    } else {
        retry_delay(attempts)
    }
}

/// One line for a command Ceph refused: what, which cephx user lacks which grant, and the
/// command that grants it (with the whole list: `ceph auth caps` replaces every cap).
pub fn refused_line(policy: &Policy, r: &Refused) -> String {
    let (user, name) = match &policy.ceph_user {
        Some(u) => (u.clone(), u.as_str()),
        None => (
            "this exporter runs as (client.admin unless --ceph-name or CEPH_ARGS name another)"
                .to_string(),
            "client.NAME",
        ),
    };
    format!(
        "PERMISSION DENIED: Ceph refused `{}` (EACCES): the cephx user {user} lacks {}; grant it with `ceph auth caps {name} {}` (auth caps replaces all of a user's caps: this is the whole enforce-mode list of docs/deployment.md)",
        r.command,
        r.cap,
        caps::ENFORCER
    )
}

/// Keeps the last refusal for `status` (`now`: when it came) until a command needing the same
/// grant works (`worked`: the grants of the commands that did).
fn track_refusal(
    state: &mut EnforcerState,
    worked: &[String],
    refused: Option<&Refused>,
    now: Time,
) {
    if state
        .refused
        .as_ref()
        .is_some_and(|(r, _)| worked.contains(&r.cap))
    {
        state.refused = None;
    }
    if let Some(r) = refused {
        state.refused = Some((r.clone(), now));
    }
}

/// The grants of the flag commands of `results` that worked (`verb`: set or unset).
fn flag_grants_that_worked(verb: &str, results: &[FlagResult]) -> Vec<String> {
    results
        .iter()
        .filter(|(_, r)| r.is_ok())
        .map(|(f, _)| caps::osd_flag(verb, f))
        .collect()
}

/// The first refusal among `results`.
fn first_refusal(results: &[FlagResult]) -> Option<&Refused> {
    results
        .iter()
        .find_map(|(_, r)| r.as_ref().err().and_then(|e| e.refused.as_ref()))
}

/// What must be remembered before `effect` runs, so that it is in the state file first (the
/// loop writes it when the effect is planned with `persist_first`): the pause flags about to be
/// set, so that whatever happens next a restart clears them. (A config change's originals are
/// already in `decide`'s next state.)
pub fn remember_first(mut state: EnforcerState, effect: &Effect) -> EnforcerState {
    match effect {
        Effect::SetFlags {
            flags,
            for_: FlagsFor::Pause,
        } => state.flags_set.extend(flags.iter().cloned()),
        // Every upmap entry the lever adds is in the record before it is added, and the
        // balancer's state before it is paused.
        Effect::Backfill(b) => {
            for h in &b.hold {
                h.record_in(&mut state.backfill, &b.fsid, b.epoch);
            }
            if let BalancerStep::Pause {
                remember: Some(before),
            } = &b.balancer
            {
                state
                    .backfill
                    .balancer
                    .get_or_insert_with(|| before.clone());
            }
        }
        _ => {}
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
        } => release_outcome(state, flags, when, outcome, now),
        Effect::Backfill(b) => backfill_outcome(&ctx, state, b, outcome),
    }
}

/// "2.a, 2.b, 3.4" (at most 8 named).
fn pg_list(ids: &[crate::ceph::parse::upmap::PgId]) -> String {
    let mut v: Vec<String> = ids.iter().take(8).map(ToString::to_string).collect();
    if ids.len() > 8 {
        v.push(format!("... ({} in all)", ids.len()));
    }
    v.join(", ")
}

/// What the balancer step does, in words.
fn balancer_words(step: &BalancerStep) -> Option<String> {
    match step {
        BalancerStep::Nothing => None,
        BalancerStep::Pause { .. } => Some(
            "mgr balancer paused (ceph balancer off: it would remove the entries), put back once nothing is held".to_string(),
        ),
        BalancerStep::Restore { to, .. } => {
            Some(format!("mgr balancer put back as it was ({to})"))
        }
    }
}

/// The backfill lever's commands: the record follows what Ceph did. A hold stays recorded
/// whatever its command answered (a timed-out `pg-upmap-items` may still be applied; the next
/// cycle's OSD map says, and an entry not there is dropped); a release leaves the record only
/// once Ceph removed it, and is then kept as on its way to backfill (`releasing`, counted by the
/// next plans); the balancer's state before the pause is forgotten only once it is put back.
fn backfill_outcome(
    ctx: &Ctx<'_>,
    state: EnforcerState,
    b: &BackfillEffect,
    outcome: &Outcome,
) -> AfterEffect {
    let mut after = AfterEffect::new(state);
    let held_ids: Vec<_> = b.hold.iter().map(|h| h.pgid).collect();
    let held_now = |next: &EnforcerState| next.backfill.held.len();
    let bal = balancer_words(&b.balancer);
    let prefix = b.lifecycle.map(|w| format!("{w}: ")).unwrap_or_default();
    match outcome {
        Outcome::Simulated => {
            let key = format!("lever_would:{}:{}:{}", b.why, b.hold.len(), b.release.len());
            if after.next.note(key) {
                let mut what = Vec::new();
                if !b.hold.is_empty() {
                    what.push(format!(
                        "held {} PGs ({}) where their data is",
                        b.hold.len(),
                        pg_list(&held_ids)
                    ));
                }
                if !b.release.is_empty() {
                    what.push(format!(
                        "released {} PGs ({})",
                        b.release.len(),
                        pg_list(&b.release)
                    ));
                }
                what.extend(bal);
                after.records.push(ctx.record(
                    DecisionEvent::Backfill,
                    format!(
                        "(observe mode) BACKFILL: {prefix}would have {}: {}; {} PGs backfill now, {} would; nothing was changed on the cluster",
                        what.join(", "),
                        b.why,
                        b.backfilling.0,
                        b.backfilling.1
                    ),
                ));
            }
        }
        Outcome::NotSaved { why, .. } => {
            // Nothing was added: the entries remembered first come out again.
            for id in &held_ids {
                after.next.backfill.held.remove(id);
            }
            if matches!(b.balancer, BalancerStep::Pause { remember: Some(_) })
                && after.next.backfill.held.is_empty()
            {
                after.next.backfill.balancer = None;
            }
            after.failed = true;
            after.records.push(ctx.record(
                DecisionEvent::ActionFailed,
                format!(
                    "FAILED BACKFILL: {prefix}not changing the cluster: {why}; no PG held ({})",
                    b.why
                ),
            ));
        }
        Outcome::Backfill {
            released,
            held,
            balancer,
        } => {
            let mut failures = Vec::new();
            // A refusal for lack of a cephx grant: said as such, kept for `status`, and the
            // lever is not used again in this recovery (retrying cannot help).
            let refusal = released
                .iter()
                .chain(held.iter())
                .find_map(|(_, r)| r.as_ref().err().and_then(|e| e.refused.clone()))
                .or_else(|| {
                    balancer
                        .iter()
                        .find_map(|(_, r)| r.as_ref().err().and_then(|e| e.refused.clone()))
                });
            track_refusal(&mut after.next, &[], refusal.as_ref(), ctx.now);
            if let Some(r) = &refusal {
                failures.push(refused_line(ctx.policy, r));
                if b.lifecycle.is_none() {
                    after.next.noted.insert(super::lever::NO_GRANT.to_string());
                    super::lever::end(&mut after.next, ctx.now);
                }
            }
            let mut released_ok = Vec::new();
            for (id, r) in released {
                match r {
                    Ok(()) => {
                        // On its way to backfill: it keeps its place among the N meanwhile.
                        after.next.backfill.released(*id, ctx.now);
                        released_ok.push(*id);
                    }
                    Err(e) => {
                        if let Some(line) = release_refused(ctx, &mut after.next, *id, e) {
                            after.records.push(line);
                        } else {
                            // Behind every other held PG: one the monitors keep refusing
                            // must not stop the releases of the rest.
                            after.next.backfill.requeue(*id);
                            failures.push(format!(
                                "{}: {e} (still held; tried again after the other held PGs)",
                                b.release_command(*id)
                            ));
                        }
                    }
                }
            }
            let mut held_ok = Vec::new();
            for (id, r) in held {
                match r {
                    Ok(()) => held_ok.push(*id),
                    Err(e) => {
                        // Refused, or timed out and maybe applied: the next OSD map says (an
                        // epoch of 0 lets any map drop it when it is not there).
                        if let Some(h) = after.next.backfill.held.get_mut(id) {
                            h.epoch = 0;
                        }
                        let cmd = b
                            .hold
                            .iter()
                            .find(|h| h.pgid == *id)
                            .map(|h| h.command())
                            .unwrap_or_else(|| format!("ceph osd pg-upmap-items {id}"));
                        failures.push(format!("{cmd}: {e}"))
                    }
                }
            }
            // Held or released, a PG re-peers: N is judged from after it (a raise judged on its
            // own release's peering was taken back and capped N at 1 for a whole lab recovery).
            if !held_ok.is_empty() || !released_ok.is_empty() {
                if let Some(l) = after.next.ladder.lever.as_mut() {
                    l.moved(ctx.now);
                }
            }
            let balancer_ok = balancer.iter().all(|(_, r)| r.is_ok());
            for (cmd, r) in balancer {
                if let Err(e) = r {
                    failures.push(format!("ceph {cmd}: {e}"));
                }
            }
            if balancer_ok && matches!(b.balancer, BalancerStep::Restore { .. }) {
                after.next.backfill.balancer = None;
            }
            after.next.backfill.tidy_at(ctx.now);
            let mut what = Vec::new();
            if !held_ok.is_empty() {
                let how: Vec<String> = b
                    .hold
                    .iter()
                    .filter(|h| held_ok.contains(&h.pgid))
                    .take(3)
                    .map(|h| format!("{} ({}) {}", h.pgid, h.state, h.items_words()))
                    .collect();
                what.push(format!(
                    "held {} PGs ({}) where their data is, mapped back to their acting OSDs (e.g. {})",
                    held_ok.len(),
                    pg_list(&held_ok),
                    how.join("; ")
                ));
            }
            if !released_ok.is_empty() {
                let put_back = released_ok
                    .iter()
                    .filter(|id| b.restore.contains_key(id))
                    .count();
                let put_back = if put_back > 0 {
                    format!(", {put_back} with the upmap items they had before put back")
                } else {
                    String::new()
                };
                what.push(format!(
                    "released {} PGs ({}{put_back}): they backfill again",
                    released_ok.len(),
                    pg_list(&released_ok)
                ));
            }
            if balancer_ok {
                what.extend(bal);
            }
            if !what.is_empty() {
                // Carried out on the cluster (its failures, if any, in the FAILED line below).
                after.records.push(DecisionRecord {
                    performed: true,
                    ..ctx.record(
                        DecisionEvent::Backfill,
                        format!(
                            "BACKFILL: {prefix}{}: {}; {} PGs backfill now, {} held by the enforcer",
                            what.join(", "),
                            b.why,
                            b.backfilling.1,
                            held_now(&after.next)
                        ),
                    )
                });
            }
            if !failures.is_empty() {
                after.failed = true;
                after.records.push(ctx.record(
                    DecisionEvent::ActionFailed,
                    format!("FAILED BACKFILL: {prefix}{}; the state keeps every PG the enforcer may hold", failures.join("; ")),
                ));
            }
            after.persist = Persist::after_logging("after the backfill lever's commands");
        }
        _ => {
            after.failed = true;
            after
                .records
                .push(ctx.record(DecisionEvent::ActionFailed, MISMATCH.to_string()));
        }
    }
    after
}

/// A release the monitors refused for naming what does not exist: the PG (its entry leaves the
/// record: nothing is left to release) or an OSD among the items put back (those items leave
/// it: the next release puts back the rest). The line that says so; `None` for any other
/// failure.
fn release_refused(
    ctx: &Ctx<'_>,
    next: &mut EnforcerState,
    id: PgId,
    e: &CommandError,
) -> Option<DecisionRecord> {
    match e.missing? {
        Missing::Pg => {
            let why = Forget::NoSuchPg;
            next.backfill
                .held
                .remove(&id)
                .map(|_| super::lever::forgot(ctx, id, &why))
        }
        Missing::Osd(osd) => {
            let dropped = next.backfill.trim(id, &[osd]);
            (!dropped.is_empty()).then(|| {
                let t = Trim {
                    osds: vec![osd],
                    dropped,
                };
                super::lever::trimmed(ctx, id, &t)
            })
        }
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
    let (result, read_back): (Result<(), CommandError>, Option<&ReadBack>) = match outcome {
        Outcome::Simulated => (Ok(()), None),
        Outcome::NotSaved { read_back, why } => (
            Err(format!("not changing the cluster: {why}").into()),
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
                took_anyway = Some(e.message.clone());
                (Ok(()), None)
            } else {
                (Err(e.clone()), read_back.as_ref())
            }
        }
        Outcome::Flags { .. } | Outcome::Backfill { .. } => (Err(MISMATCH.into()), None),
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
            rec.message = match &e.refused {
                Some(r) => format!(
                    "FAILED {}: {}; attempt {attempts}, not tried again for {}: a missing cap does not come back by retrying",
                    action.describe(),
                    refused_line(policy, r),
                    fmt_secs(MAX_RETRY_DELAY)
                ),
                // Nothing went back: the originals stay remembered for the next attempt.
                None if action.kind == ActionKind::BlindRestore => format!(
                    "FAILED BLIND: {}; could not restore {}: {e}; attempt {attempts}, retrying in {}; the state file keeps the operator's originals",
                    action.reason,
                    action.changes.iter().map(|c| c.describe()).collect::<Vec<_>>().join(", "),
                    fmt_secs(retry_delay(attempts))
                ),
                None => format!(
                    "FAILED {}: {e}; attempt {attempts}, retrying in {}",
                    action.describe(),
                    fmt_secs(retry_delay(attempts))
                ),
            };
            failed = true;
        }
    }
    let mut next = apply_result(policy, state, action, result.as_ref().err(), ctx.now);
    if policy.mode == Mode::Enforce {
        let worked: Vec<String> = match &result {
            Ok(()) => action
                .changes
                .iter()
                .map(|c| caps::config_change(if c.to.is_some() { "set" } else { "rm" }, "osd"))
                .collect(),
            Err(_) => Vec::new(),
        };
        let refused = result.as_ref().err().and_then(|e| e.refused.as_ref());
        track_refusal(&mut next, &worked, refused, ctx.now);
        if result.is_ok() {
            remember_why(ctx, &mut next, action);
        }
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
fn remember_why(ctx: &Ctx<'_>, next: &mut EnforcerState, action: &Action) {
    let (p99, now) = (ctx.obs.p99, ctx.now);
    match action.kind {
        ActionKind::Throttle | ActionKind::Escalate | ActionKind::Descend => {
            let rung = next.ladder.rung;
            if rung >= 1 {
                let keep = action.kind == ActionKind::Descend;
                // Its effect one window later is judged with the rung it set (EFFECTIVE /
                // NO_EFFECT in `decide`); the pause's own moves are watched in `ladder`.
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
    let mut refused = None;
    let (failed, take_back): (Option<String>, &[FlagResult]) = match outcome {
        Outcome::NotSaved { why, .. } => {
            for f in flags {
                after.next.flags_set.remove(f);
            }
            (Some(format!("not pausing: {why}")), &[])
        }
        Outcome::Flags { set, unset } => {
            refused = first_refusal(set).cloned();
            let mut worked = flag_grants_that_worked("set", set);
            worked.extend(flag_grants_that_worked("unset", unset));
            track_refusal(&mut after.next, &worked, refused.as_ref(), ctx.now);
            let failed = set.iter().find_map(|(f, r)| {
                r.as_ref().err().map(|e| match &e.refused {
                    Some(r) => refused_line(policy, r),
                    None => format!("ceph osd set {f}: {e}"),
                })
            });
            (failed, unset)
        }
        Outcome::Simulated | Outcome::Config { .. } | Outcome::Backfill { .. } => {
            (Some(MISMATCH.to_string()), &[])
        }
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
            let again = if refused.is_some() {
                // Every period would be refused the same way: no pause until much later.
                if let Some(p) = next.ladder.pause.as_mut() {
                    p.held_until = Some(ctx.now + MAX_RETRY_DELAY);
                }
                format!(
                    "no pause is tried for {}: a missing cap does not come back by retrying",
                    fmt_secs(MAX_RETRY_DELAY)
                )
            } else {
                "the pause is tried again in its next slot".to_string()
            };
            let then = if left.is_empty() {
                format!("nothing of it stays set; {again}")
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
    let errors = forget_unset(&mut after.next, outcome, ctx.now);
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
    now: Time,
) -> AfterEffect {
    let mut after = AfterEffect::new(state);
    let failed = forget_unset(&mut after.next, outcome, now);
    after.lines.push(if failed.is_empty() {
        LogLine::Info(format!("{when}: unset {} (set by the enforcer's pause rung); recovery is not paused by the enforcer", flags.join(", ")))
    } else {
        LogLine::Error(format!("{when}: could not unset the enforcer's pause flags: {}; RECOVERY MAY STAY PAUSED: run `ceph osd unset nobackfill; ceph osd unset norecover`", failed.join("; ")))
    });
    after.persist = Persist::after_logging(when);
    after
}

/// The state once `action` was carried out (`failure` none) or failed (retried with backoff).
fn apply_result(
    policy: &Policy,
    mut state: EnforcerState,
    action: &Action,
    failure: Option<&CommandError>,
    now: Time,
) -> EnforcerState {
    if let Some(error) = failure {
        let attempts = state
            .retry
            .as_ref()
            .filter(|r| r.kind == action.kind)
            .map_or(0, |r| r.attempts)
            + 1;
        state.retry = Some(Retry {
            kind: action.kind,
            attempts,
            next_at: now + delay_after(error, attempts),
        });
    } else {
        state.retry = None;
        // Only the steps that slow recovery count against the change limits (see
        // `ActionKind::limited`).
        if !action.changes.is_empty()
            && action.kind.limited()
            && !super::decide::to_originals(&state, &action.changes)
        {
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
                if rung >= super::backfill_limit::PAUSE_RUNG && state.ladder.pause.is_none() {
                    let share = state
                        .ladder
                        .entry_share
                        .take()
                        .unwrap_or(policy.ladder.pause.start_share);
                    let mut ps = PauseState::start_at(&policy.ladder.pause, now, share);
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
                if MCLOCK_PUSHED.contains(&c.key.as_str())
                    && !action.push.iter().any(|(k, _)| *k == c.key)
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
        Effect::Backfill(b) => {
            let mut cmds: Vec<String> = b.release.iter().map(|id| b.release_command(*id)).collect();
            if let BalancerStep::Restore {
                to,
                set_mode,
                turn_on,
            } = &b.balancer
            {
                if *set_mode {
                    cmds.push(format!("ceph balancer mode {}", to.mode));
                }
                if *turn_on {
                    cmds.push("ceph balancer on".to_string());
                }
            }
            cmds
        }
    }
}

/// Drops each flag the `osd unset` of `outcome` did unset from what the enforcer holds; the
/// failures, one line each (a flag not unset stays the enforcer's, to be tried again: recovery
/// stays paused until it is, so not even a refusal slows that down).
fn forget_unset(next: &mut EnforcerState, outcome: &Outcome, now: Time) -> Vec<String> {
    let Outcome::Flags { unset, .. } = outcome else {
        return vec![MISMATCH.to_string()];
    };
    let worked = flag_grants_that_worked("unset", unset);
    track_refusal(next, &worked, first_refusal(unset), now);
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ceph::ops::OpsError;
    use crate::ceph::{CephCommand, Output};
    use crate::enforcer::decide::decide;
    use crate::enforcer::pause::{pause_step, PauseInput};
    use crate::enforcer::tests::{policy, undersized, T0};
    use crate::enforcer::view::EnforcerView;

    /// What a command refused by the mon becomes on its way to the enforcer: the CLI's exit
    /// code 13 and message, through the same conversions as in the loop.
    fn refused(words: &[&str]) -> CommandError {
        let command = CephCommand::new(words.iter().copied());
        let out = Output {
            stdout: Vec::new(),
            stderr: "Error EACCES: access denied".into(),
            code: Some(13),
            elapsed: std::time::Duration::ZERO,
        };
        let e = out
            .success(&command)
            .expect_err("exit code 13 is a failure");
        OpsError::from(e).into()
    }

    fn as_user() -> Policy {
        Policy {
            ceph_user: Some("client.recovery-budget".into()),
            ..policy()
        }
    }

    /// A `config set` the cephx user may not make: one line that names the command, the user,
    /// the missing grant and the `ceph auth caps` that fixes it; no fast retries (the next
    /// attempt 5 minutes later, not 10 s); `status` says it until a change works again.
    #[test]
    fn a_refused_change_says_what_to_grant_and_waits_the_longest() {
        let p = as_user();
        let obs = undersized(500.0);
        let mut state = EnforcerState::default();
        let mut now = T0;
        let mut attempts_at = Vec::new();
        let mut lines = Vec::new();
        for _ in 0..(700 / 5) {
            let d = decide(&p, &obs, &state, now);
            state = d.next.clone();
            if let Some(a) = d.action().cloned() {
                attempts_at.push(now - T0);
                let words: Vec<String> = vec!["config".into(), "set".into(), "osd".into()];
                let c = &a.changes[0];
                let mut words: Vec<&str> = words.iter().map(String::as_str).collect();
                words.extend([c.key.as_str(), c.to.as_deref().unwrap_or_default()]);
                let error = refused(&words);
                let after = apply_outcome(
                    &p,
                    &obs,
                    state,
                    &Effect::Config(a),
                    &Outcome::failed(error),
                    now,
                );
                assert!(after.failed);
                lines.extend(after.records.iter().map(|r| r.message.clone()));
                state = after.next;
            }
            now += 5.0;
        }
        assert_eq!(attempts_at, vec![0.0, 300.0, 600.0], "no fast retries");
        assert_eq!(lines.len(), 3);
        let line = &lines[0];
        for part in [
            "PERMISSION DENIED",
            "`ceph config set osd osd_mclock_profile high_recovery_ops`",
            r#"the cephx user client.recovery-budget lacks mon 'allow command "config set" with who=osd'"#,
            &format!("ceph auth caps client.recovery-budget {}", caps::ENFORCER),
            "not tried again for 5m0s",
        ] {
            assert!(line.contains(part), "{part:?} not in {line}");
        }
        let mut view = EnforcerView::new(&p);
        view.update_mode_only(&p, &state);
        let said = view.permission_denied.clone().unwrap_or_default();
        assert!(
            said.contains(r#"lacks mon 'allow command "config set" with who=osd'"#),
            "{said}"
        );

        // Granted: the next attempt works and `status` no longer says it.
        now = T0 + 900.0;
        let d = decide(&p, &obs, &state, now);
        let a = d.action().cloned().expect("tried again after the wait");
        let after = apply_outcome(&p, &obs, d.next, &Effect::Config(a), &Outcome::done(), now);
        assert!(!after.failed);
        view.update_mode_only(&p, &after.next);
        assert_eq!(view.permission_denied, None);
    }

    /// Without --ceph-name the line still gives a command to run, with a placeholder.
    #[test]
    fn without_a_user_name_the_line_says_which_user() {
        let r = refused(&["config", "rm", "osd", "osd_mclock_profile"])
            .refused
            .expect("refused");
        let line = refused_line(&policy(), &r);
        assert!(line.contains("client.admin unless --ceph-name"), "{line}");
        assert!(
            line.contains("ceph auth caps client.NAME mon 'allow r, "),
            "{line}"
        );
        assert!(
            line.contains(r#"lacks mon 'allow command "config rm" with who=osd'"#),
            "{line}"
        );
    }

    /// Other failures keep the short backoff: only a refusal waits the longest at once.
    #[test]
    fn a_timeout_is_not_a_refusal() {
        let e = CommandError::from(OpsError::Ceph(crate::ceph::CephError::Timeout {
            command: "ceph config set osd k v".into(),
            timeout: std::time::Duration::from_secs(10),
        }));
        assert_eq!(e.refused, None);
        assert_eq!(delay_after(&e, 1), 10.0);
        assert_eq!(
            delay_after(&refused(&["osd", "set", "nobackfill"]), 1),
            MAX_RETRY_DELAY
        );
    }

    /// `ceph osd set nobackfill` refused: nothing stays set, the line says what to grant, and
    /// no pause is tried for 5 minutes (not at every 60 s period).
    #[test]
    fn a_refused_pause_is_not_tried_again_at_every_period() {
        let p = as_user();
        let obs = undersized(500.0);
        let now = T0;
        let mut state = EnforcerState::default();
        let mut ps = PauseState::start(&p.ladder.pause, now);
        ps.paused = true;
        ps.paused_at = Some(now);
        state.ladder.pause = Some(ps);
        state.flags_set = PAUSE_FLAGS.iter().map(|f| f.to_string()).collect();
        let outcome = Outcome::Flags {
            set: vec![(
                "nobackfill".into(),
                Err(refused(&["osd", "set", "nobackfill"])),
            )],
            unset: vec![("nobackfill".into(), Ok(())), ("norecover".into(), Ok(()))],
        };
        let effect = Effect::SetFlags {
            flags: PAUSE_FLAGS.iter().map(|f| f.to_string()).collect(),
            for_: FlagsFor::Pause,
        };
        let after = apply_outcome(&p, &obs, state, &effect, &outcome, now);
        assert!(after.failed);
        assert!(after.next.flags_set.is_empty(), "nothing of it stays set");
        let line = &after.records[0].message;
        assert!(
            line.contains(r#"lacks mon 'allow command "osd set" with key=nobackfill'"#)
                && line.contains("no pause is tried for 5m0s"),
            "{line}"
        );
        let held = after.next.ladder.pause.clone().expect("the rung stays");
        assert_eq!(held.held_until, Some(now + MAX_RETRY_DELAY));
        let bound = 0.032;
        let paused_at = |t: Time| {
            pause_step(
                &p.ladder.pause,
                &held,
                &PauseInput {
                    now: t,
                    p99: Some(0.5),
                    bound,
                    window: 60.0,
                },
            )
            .next
            .is_some_and(|n| n.paused)
        };
        assert!(!paused_at(now + 60.0) && !paused_at(now + 240.0));
        assert!(paused_at(now + 300.0), "tried again once the wait is over");
    }
}
