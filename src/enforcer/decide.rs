//! The pure core: `decide(policy, observation, state, now) -> Decision`, every effect to carry
//! out (config changes and the pause flags alike) with the lines to log and the next state.
//! `apply_outcome` (in `outcome.rs`) adds what happened when the loop acted. No I/O, no clock.

use std::collections::BTreeMap;

use super::backfill_limit::LEVER_RUNG;
use super::ctx::Ctx;
pub use super::effect::Decision;
use super::effect::{Action, Change, Effect, LogLine, Planned, Want};
use super::event::{DecisionEvent, DecisionRecord};
use super::flags;
pub use super::ladder::MCLOCK_PROFILE_KEY;
use super::ladder::{self, changes_to, same_setting, throttle_values};
use super::observation::{Observation, OpQueue};
use super::pause::foreign_flags;
use super::policy::{BaselineSpec, Controller, Mode, OnExit, Policy};
use super::redundancy;
use super::state::{ActionKind, Applied, EnforcerState, LadderState, Phase, Time};
use crate::units::{fmt_ms, fmt_secs};

const HOUR: f64 = 3600.0;

/// What a HOLD is about, without the error texts: "collector status; collector latency".
fn hold_key(reason: &str) -> String {
    top_level_parts(reason)
        .into_iter()
        .map(|part| {
            part.split(" is down")
                .next()
                .unwrap_or(part)
                .split(" (")
                .next()
                .unwrap_or(part)
                .split(':')
                .next()
                .unwrap_or(part)
                .trim()
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// `reason` split at the "; " between its parts, not at those inside an error's parentheses
/// ("collector status is down (librados: not connected (...); next attempt in 4s)"): the
/// countdown in there changes every cycle and would make every cycle a new HOLD.
fn top_level_parts(reason: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let (mut depth, mut start) = (0usize, 0usize);
    for (i, c) in reason.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            ';' if depth == 0 && reason[i..].starts_with("; ") => {
                parts.push(&reason[start..i]);
                start = i + 2;
            }
            _ => {}
        }
    }
    parts.push(&reason[start..]);
    parts
}

/// Seconds until another change is allowed, or 0.
pub fn limit_wait(policy: &Policy, state: &EnforcerState, now: Time) -> f64 {
    let max = policy.max_changes_per_hour.max(1);
    // A change stamped in the future (the wall clock was set back) counts as made now.
    let recent: Vec<Time> = state
        .changes
        .iter()
        .map(|t| t.min(now))
        .filter(|t| now - t < HOUR)
        .collect();
    let mut wait: f64 = 0.0;
    if let Some(last) = recent.iter().copied().reduce(f64::max) {
        wait = wait.max(last + policy.min_interval.as_secs_f64() - now);
    }
    if recent.len() as u32 >= max {
        // The oldest change in the hour must age out first.
        let mut sorted = recent.clone();
        sorted.sort_by(f64::total_cmp);
        let idx = recent.len() - max as usize;
        if let Some(t) = sorted.get(idx) {
            wait = wait.max(t + HOUR - now);
        }
    }
    wait.max(0.0)
}

/// Why redundancy is at risk now under the policy's rule (`redundancy.rs`), or `None`.
/// `state.inactive_since` says how long PGs have been inactive.
fn at_risk(policy: &Policy, obs: &Observation, state: &EnforcerState, now: Time) -> Option<String> {
    let inactive_for = state.inactive_since.map(|t| now - t);
    redundancy::describe(&redundancy::risks(policy.suspend_when, obs, inactive_for))
}

/// What a person changed of what the enforcer set (anything but its value), one "KEY is X (we
/// set Y, the original was Z)" each; empty when nothing was, or the configured values are not
/// known. A key set back to the operator's original by hand counts too: someone took the
/// decision back, and setting it again would fight them. Not while an action of the enforcer's
/// is being retried: a give-back that went through for some keys and failed for others leaves
/// those keys at their originals by the enforcer's own hand.
fn hand_changed(state: &EnforcerState, obs: &Observation) -> Vec<String> {
    let Some(applied) = &state.applied else {
        return Vec::new();
    };
    if applied.simulated || !obs.configured_known {
        return Vec::new();
    }
    applied
        .values
        .iter()
        .filter(|(k, ours)| {
            let now_v = obs.configured.get(*k).cloned().flatten();
            let original = state.original.get(*k).cloned().flatten();
            !same_setting(&now_v, &Some((*ours).clone()))
                && (state.retry.is_none() || !same_setting(&now_v, &original))
        })
        .map(|(k, ours)| {
            format!(
                "{k} is {} (we set {ours}, the original was {})",
                obs.configured
                    .get(k)
                    .cloned()
                    .flatten()
                    .unwrap_or_else(|| "(unset)".into()),
                state
                    .original
                    .get(k)
                    .cloned()
                    .flatten()
                    .unwrap_or_else(|| "(unset)".into())
            )
        })
        .collect()
}

fn changes_back(state: &EnforcerState, obs: &Observation) -> Vec<Change> {
    let applied = state.applied.as_ref();
    state
        .original
        .iter()
        .map(|(k, orig)| {
            let ours = applied.and_then(|a| a.values.get(k).cloned());
            // In observe mode nothing was really set: show what would be undone.
            let from = if applied.is_some_and(|a| a.simulated) {
                ours
            } else {
                obs.configured.get(k).cloned().flatten().or(ours)
            };
            Change {
                key: k.clone(),
                from,
                to: orig.clone(),
            }
        })
        .collect()
}

/// Decides what to do now. `state` is what the enforcer remembered; the returned `next` is what
/// it remembers if no effect is carried out: `apply_outcome` adds each result. The effects come
/// in the order to run them: the pause flags coming off first (that never waits for a config
/// change), then the config change, then the pause flags going on.
pub fn decide(policy: &Policy, obs: &Observation, state: &EnforcerState, now: Time) -> Decision {
    // `--enforcer.memory off`: decided as if nothing were remembered about this cluster, and
    // what is remembered is handed on untouched (an experiment row must not change it).
    let forgetful;
    let seen = if policy.memory {
        state
    } else {
        forgetful = EnforcerState {
            memory: Default::default(),
            ..state.clone()
        };
        &forgetful
    };
    let Core {
        action,
        notes,
        mut next,
    } = decide_core(policy, obs, seen, now);
    if !policy.memory {
        next.memory = state.memory.clone();
    }
    let was_paused = state.ladder.pause.as_ref().is_some_and(|p| p.paused);
    let flags = flags::plan(policy, was_paused, &next);
    let mut effects = Vec::new();
    let (unset_first, set_last) = match flags {
        Some(
            p @ Planned {
                effect: Effect::UnsetFlags { .. },
                ..
            },
        ) => (Some(p), None),
        other => (None, other),
    };
    effects.extend(unset_first);
    if let Some(action) = action {
        effects.push(Planned {
            // The operator's original values are on disk before anything changes.
            persist_first: (state.original != next.original).then_some("before acting"),
            effect: Effect::Config(action),
        });
    }
    let mut notes = notes;
    // Rung 3: the PGs held and released this cycle (releases first), or everything back.
    let ctx = Ctx::new(policy, obs, now);
    let give_back = lever_give_back(policy, obs, &next, now);
    effects.extend(super::lever::plan_effect(
        &ctx, &mut next, &mut notes, give_back,
    ));
    effects.extend(set_last);
    Decision {
        effects,
        notes,
        next,
    }
}

/// Whether everything the backfill lever holds goes back now, and why: blind for
/// `--enforcer.blind-restore-after` (BLIND), a hand change (OVERRIDE), redundancy at risk.
fn lever_give_back(
    policy: &Policy,
    obs: &Observation,
    next: &EnforcerState,
    now: Time,
) -> Option<String> {
    if obs.stale.is_some() {
        let blind_for = now - next.blind_since.unwrap_or(now);
        return (blind_for >= policy.blind_restore_after.as_secs_f64()).then(|| {
            format!(
                "BLIND: no fresh data for {}: a lever nobody watches is not kept",
                fmt_secs(blind_for)
            )
        });
    }
    if next.overridden {
        return Some("someone changed what the enforcer set by hand (OVERRIDE): hands off".into());
    }
    at_risk(policy, obs, next, now)
        .map(|risk| format!("redundancy at risk ({risk}): recovery first"))
}

/// The state a new run starts from: "below the bound since" from before a restart is not
/// evidence for going down now.
pub fn at_start(mut state: EnforcerState) -> EnforcerState {
    state.ladder.below_since = None;
    state
}

/// What a clean exit (SIGTERM, SIGINT) hands back, in the order to run it: the pause flags the
/// enforcer set (`flags::release`), then the rung-2 recovery limits (their pushed values
/// unset, the operator's values back), then with `--enforcer.on-exit restore` the profile and
/// every other key the enforcer changed, back to the same originals the end-of-recovery
/// RESTORE uses. `keep-throttle` keeps the rung-1 throttle (or the suspend profile): the state
/// file keeps its originals, so the next start restores them when recovery ends. A key changed
/// by hand (OVERRIDE, now or earlier) means nothing of the config is touched, as during a
/// recovery. Observe mode changes nothing. Each effect goes through `apply_outcome`, so the
/// state file records what was handed back.
pub fn on_exit(
    policy: &Policy,
    obs: &Observation,
    state: &EnforcerState,
    now: Time,
) -> (Decision, Vec<LogLine>) {
    const WHEN: &str = "SHUTDOWN";
    let (mut decision, mut lines) = flags::release(policy, state, WHEN, now);
    // The pause goes with the enforcer (its flags come off above): a stored pause would be
    // read by the next start as one still running, in another recovery perhaps. The time
    // paused so far stays counted for this recovery.
    let ctx = Ctx::new(policy, obs, now);
    ladder::end_pause(
        &ctx,
        &mut decision.next,
        &mut decision.notes,
        "the enforcer stopped",
    );
    let Some(applied) = state.applied.as_ref().filter(|a| !a.simulated) else {
        return (decision, lines);
    };
    if policy.mode != Mode::Enforce || state.original.is_empty() {
        return (decision, lines);
    }
    let by_hand = hand_changed(state, obs);
    if state.overridden || !by_hand.is_empty() {
        let what = if by_hand.is_empty() {
            "someone changed what the enforcer set by hand during this recovery".to_string()
        } else {
            format!(
                "someone changed what the enforcer set by hand: {}",
                by_hand.join("; ")
            )
        };
        lines.push(LogLine::Warn(format!(
            "{WHEN}: {what}; as during a recovery (OVERRIDE) the enforcer touches none of the settings: the hand-set values stay"
        )));
        return (decision, lines);
    }
    // Already as the operator had them (a fresh read says so): no command needed.
    let needed = |c: &Change| !(obs.configured_known && same_setting(&c.from, &c.to));
    let (rung2, rest): (Vec<Change>, Vec<Change>) = changes_back(state, obs)
        .into_iter()
        .filter(|c| needed(c))
        .partition(|c| ladder::above_rung1_keys().contains(&c.key.as_str()));
    // Held PGs kept for the next leader (keep-throttle) keep the ladder at the lever's rung.
    let lever_kept = super::lever::kept_at_exit(policy, state);
    let rung = if lever_kept { (LEVER_RUNG, 0) } else { (1, 0) };
    let step = |kind, changes, reason: String| Planned {
        effect: Effect::Config(Action {
            kind,
            changes,
            reason,
            push: Vec::new(),
            rung: Some(rung),
            lifecycle: Some(WHEN),
        }),
        persist_first: None,
    };
    // The level controller's level: a push above the operator's settings goes back whatever
    // --enforcer.on-exit says (only a restraint is kept for the next instance), and a
    // restraint is kept whole (the next instance goes on from the stored position).
    let level_below_home = state.levels.as_ref().map(|r| r.position.at > r.levels.home);
    let on_exit = match level_below_home {
        Some(false) => OnExit::Restore,
        _ => policy.on_exit,
    };
    match on_exit {
        OnExit::Restore => {
            let why = if on_exit == policy.on_exit {
                "--enforcer.on-exit restore: a stopped enforcer watches neither p99 nor redundancy, so it leaves nothing throttled".to_string()
            } else {
                "the level controller's push above the operator's settings goes back at exit (--enforcer.on-exit keep-throttle keeps only a restraint)".to_string()
            };
            // The last step is the RESTORE that forgets the originals; a step before it keeps
            // them (a DESCEND), so that if it fails the next start still restores everything.
            match (rung2.is_empty(), rest.is_empty()) {
                // Nothing differs from the operator's: forget the episode as RESTORE would.
                (true, true) => decision.effects.push(step(
                    ActionKind::Restore,
                    Vec::new(),
                    "--enforcer.on-exit restore: every setting is already the operator's"
                        .to_string(),
                )),
                (false, true) => decision.effects.push(step(ActionKind::Restore, rung2, why)),
                (true, false) => decision.effects.push(step(ActionKind::Restore, rest, why)),
                (false, false) => {
                    decision.effects.push(step(
                        ActionKind::Descend,
                        rung2,
                        format!("{why}; recovery limits first, the profile next"),
                    ));
                    decision.effects.push(step(ActionKind::Restore, rest, why));
                }
            }
        }
        OnExit::KeepThrottle => {
            // What stays: the rung-1 throttle, and with the lever's holds kept its own key (the
            // ops each backfilling PG may start), which goes with them.
            // The level controller's restraint stays whole.
            let stays = |k: &str| {
                level_below_home.is_some()
                    || !ladder::above_rung1_keys().contains(&k)
                    || (lever_kept && k == super::types::RECOVERY_MAX_SINGLE_START)
                    // The wpq throttle's own backfills (a rung-1 lever there).
                    || (k == ladder::MAX_BACKFILLS
                        && level_below_home.is_none()
                        && policy.wpq_levers.contains_key(k))
            };
            let held = applied
                .values
                .keys()
                .filter(|k| stays(k))
                .cloned()
                .collect::<Vec<_>>();
            let mut changes: Vec<Change> = rung2.into_iter().filter(|c| !stays(&c.key)).collect();
            if !changes.is_empty()
                && applied.kind == ActionKind::Throttle
                && level_below_home.is_none()
            {
                // Rung 2 under mClock runs the `custom` profile: back to the rung-1 profile.
                let rung1 = ladder::throttle_values(policy, obs).unwrap_or_else(|| {
                    if applied.values.contains_key(MCLOCK_PROFILE_KEY) {
                        BTreeMap::from([(
                            MCLOCK_PROFILE_KEY.to_string(),
                            policy.throttle_profile.clone(),
                        )])
                    } else {
                        policy.wpq_levers.clone()
                    }
                });
                changes.extend(
                    changes_to(&rung1, obs)
                        .into_iter()
                        .filter(|c| !same_setting(&c.from, &c.to)),
                );
            }
            let keeps: Vec<String> = held
                .iter()
                .map(|k| {
                    let v = changes
                        .iter()
                        .find(|c| &c.key == k)
                        .and_then(|c| c.to.clone())
                        .or_else(|| applied.values.get(k).cloned())
                        .unwrap_or_default();
                    let orig = state
                        .original
                        .get(k)
                        .cloned()
                        .flatten()
                        .unwrap_or_else(|| "(unset)".into());
                    format!("{k} {v} (the operator's: {orig})")
                })
                .collect();
            if !changes.is_empty() {
                decision.effects.push(step(
                    ActionKind::Descend,
                    changes,
                    "--enforcer.on-exit keep-throttle: recovery limits back, the rung-1 throttle stays".to_string(),
                ));
            }
            lines.push(LogLine::Warn(format!(
                "{WHEN}: --enforcer.on-exit keep-throttle: keeping {} as the enforcer set it ({}); the state file keeps the operator's originals and the next start restores them when recovery ends. Nobody watches p99 or redundancy until then: restore by hand if no enforcer starts again",
                if keeps.is_empty() { "nothing".to_string() } else { keeps.join(", ") },
                match applied.kind {
                    ActionKind::Suspend => "the suspend profile: redundancy was at risk",
                    _ if level_below_home.is_some() => "the level controller's restraint",
                    _ => "the rung-1 throttle",
                }
            )));
        }
    }
    (decision, lines)
}

/// Whether a blind restore may come this cycle if the data is still stale (the loop then reads
/// the config database afresh first).
pub fn blind_restore_due(policy: &Policy, state: &EnforcerState, now: Time) -> bool {
    state.blind_since.is_some_and(|since| {
        now - since >= policy.blind_restore_after.as_secs_f64()
            && !state.original.is_empty()
            && !state.overridden
    })
}

/// Blind (observations stale or failing since `blind_since`) for
/// `--enforcer.blind-restore-after` while holding settings of the operator's: they go back, as
/// the mgr prometheus module fails open on a stale cache. A throttle (or a suspension) nobody
/// watches is not kept: recovery runs at the operator's settings until the enforcer can see and
/// judge afresh. Never after a hand change (OVERRIDE, now or earlier: hands off); a fresh read
/// of the config database, when Ceph answered one, shows a change made while blind. The pause
/// flags need nothing here: they came off when the data went stale (`ladder::end_pause`),
/// retried every cycle while that fails. The restore itself goes through the change limits and
/// the retry backoff like any action.
fn blind_restore(
    policy: &Policy,
    ctx: &Ctx<'_>,
    state: &EnforcerState,
    next: &mut EnforcerState,
    notes: &mut Vec<DecisionRecord>,
    reason: &str,
) -> Option<Want> {
    if !blind_restore_due(policy, next, ctx.now) {
        return None;
    }
    let blind_for = ctx.now - next.blind_since.unwrap_or(ctx.now);
    let by_hand = hand_changed(state, ctx.obs);
    if !by_hand.is_empty() {
        notes.push(ctx.record(
            DecisionEvent::Override,
            format!(
                "OVERRIDE: someone changed the setting by hand while the enforcer was blind: {}; the enforcer restores nothing and stops acting until this recovery ends",
                by_hand.join("; ")
            ),
        ));
        next.overridden = true;
        return None;
    }
    let flags = if next.flags_set.is_empty() {
        String::new()
    } else {
        format!(
            "; its pause flags {} did not come off yet: unset again this cycle and every cycle until Ceph takes it",
            next.flags_set.iter().cloned().collect::<Vec<_>>().join(", ")
        )
    };
    Some(Want::new(
        ActionKind::BlindRestore,
        changes_back(state, ctx.obs),
        format!(
            "no fresh data for {} ({reason}){flags}",
            fmt_secs(blind_for)
        ),
    ))
}

/// What the policy wants of the config, before the pause flags are worked out from `next`.
struct Core {
    action: Option<Action>,
    notes: Vec<DecisionRecord>,
    next: EnforcerState,
}

fn decide_core(policy: &Policy, obs: &Observation, state: &EnforcerState, now: Time) -> Core {
    let mut next = state.clone();
    next.changes.retain(|t| now - t < HOUR);
    next.deferred = None;
    let ctx = Ctx::new(policy, obs, now);
    let bound = ctx.bound;
    let mut notes = Vec::new();

    // 7. Never act on old data; but never stay throttled blind either (BLIND below).
    if let Some(reason) = &obs.stale {
        next.blind_since.get_or_insert(now);
        // Said again only when what is down changes, not when its error text does.
        let key = hold_key(reason);
        if state.holding.as_deref() != Some(key.as_str()) {
            let then = if state.original.is_empty() || state.overridden {
                String::new()
            } else {
                format!(
                    "; if it stays blind {} in all (--enforcer.blind-restore-after), the operator's settings {}",
                    fmt_secs(policy.blind_restore_after.as_secs_f64()),
                    if policy.mode == Mode::Enforce {
                        "go back"
                    } else {
                        "would go back (observe mode)"
                    }
                )
            };
            notes.push(ctx.record(
                DecisionEvent::Hold,
                format!("HOLD: {reason}; no action on old data until observations are fresh again{then}"),
            ));
        }
        // Time not seen does not count towards `for`: the breach starts again when data is back.
        if let Some(since) = next.breach_since.take() {
            notes.push(ctx.record(
                DecisionEvent::BreachEnded,
                format!(
                    "BREACH no longer tracked after {}: observations are stale",
                    fmt_secs(now - since)
                ),
            ));
        }
        ladder::end_pause(
            &ctx,
            &mut next,
            &mut notes,
            "observations are stale: no pausing on old data",
        );
        next.holding = Some(key);
        next.phase = Phase::Holding;
        next.baseline_high_since = None;
        let want = blind_restore(policy, &ctx, state, &mut next, &mut notes, reason);
        let action = to_action(policy, &ctx, state, &mut next, &mut notes, want);
        return Core {
            action,
            notes,
            next,
        };
    }
    next.blind_since = None;
    next.inactive_since = if obs.pg_safety.inactive > 0 {
        Some(state.inactive_since.unwrap_or(now))
    } else {
        None
    };
    if state.holding.is_some() {
        notes.push(ctx.record(
            DecisionEvent::HoldEnded,
            "HOLD ended: observations are fresh again".to_string(),
        ));
        next.holding = None;
    }

    // Pause flags someone else set: their recovery pause, hands off entirely.
    let foreign = foreign_flags(obs.osd_flags.as_ref(), &state.flags_set);
    if !foreign.is_empty() {
        ladder::end_pause(
            &ctx,
            &mut next,
            &mut notes,
            &format!(
                "{} set by someone else: their pause, not the enforcer's; its own flags come off",
                foreign.join(" and ")
            ),
        );
        let key = format!("flags {}", foreign.join(","));
        if state.holding.as_deref() != Some(key.as_str()) {
            notes.push(ctx.record(DecisionEvent::Hold,
                format!(
                    "HOLD: {} set, not by the enforcer: someone paused recovery by hand; the enforcer changes nothing (and never touches their flags) until it is unset",
                    foreign.join(" and ")
                ),
            ));
        }
        next.holding = Some(key);
        next.phase = Phase::Holding;
        return Core {
            action: None,
            notes,
            next,
        };
    }
    // Our flags gone while we hold them: a person unset them. Respect it for this recovery.
    if let Some(flags) = &obs.osd_flags {
        let gone: Vec<String> = state
            .flags_set
            .iter()
            .filter(|f| !flags.contains(*f))
            .cloned()
            .collect();
        if !gone.is_empty() && state.ladder.pause.as_ref().is_some_and(|p| p.paused) {
            next.ladder.no_pause = true;
            for f in &gone {
                next.flags_set.remove(f);
            }
            ladder::end_pause(
                &ctx,
                &mut next,
                &mut notes,
                &format!(
                    "{} unset by someone else while the enforcer held them; no pause again in this recovery",
                    gone.join(" and ")
                ),
            );
        }
    }

    // Held PGs are active+clean: the recovery is not over while the backfill lever holds any,
    // or all of them would be released at once and backfill together; nor while the stats may
    // not show the last released one's backfill yet.
    let recovering = recovering(state, obs, now);
    if recovering && !state.recovery_active {
        // A new recovery: a new pause budget. A recovery limit still held (it started again
        // before the restore) stays the rung held, so it can be judged and stepped down.
        let held = state
            .applied
            .as_ref()
            .is_some_and(|a| a.kind == ActionKind::Throttle);
        let rung = if held { state.ladder.rung.min(2) } else { 0 };
        next.ladder = LadderState {
            rung,
            step: state.ladder.step,
            since: now,
            started: Some(now),
            acted: state
                .ladder
                .acted
                .iter()
                .filter(|(r, _)| **r <= rung)
                .map(|(r, a)| (*r, *a))
                .collect(),
            ..LadderState::default()
        };
        next.levels = None;
        notes.push(ctx.record(
            DecisionEvent::RecoveryStarted,
            format!(
                "RECOVERY started: {} degraded, {} misplaced objects; {}",
                obs.degraded_objects,
                obs.misplaced_objects,
                ctx.pg_summary()
            ),
        ));
        // A lever that made p99 worse on this cluster is not tried again (for 30 days).
        let lever = ladder::lever_key(&obs.op_queue);
        if let Some(h) = state.memory.hurts(lever, now) {
            next.ladder.limit_hurt = true;
            if policy.ladder.max_rung >= 2 {
                notes.push(ctx.record(
                    DecisionEvent::LadderSkip,
                    format!(
                        "{} is not used in this recovery: it made client p99 write worse on this cluster {} ({} when it was set, {} after); remembered until {}",
                        h.what,
                        crate::units::fmt_when(h.at, now),
                        fmt_ms(h.p99_before),
                        fmt_ms(h.p99_after),
                        crate::units::fmt_when(h.at + super::state::HURT_FORGET_AFTER, now)
                    ),
                ));
            }
        }
    }
    next.recovery_active = recovering;

    // 6. A person changed what we set: hands off until the recovery ends.
    if !state.overridden {
        let changed = hand_changed(state, obs);
        if !changed.is_empty() {
            notes.push(ctx.record(DecisionEvent::Override,
                format!(
                    "OVERRIDE: someone changed the setting by hand: {}; the enforcer stops acting until this recovery ends and will not restore anything",
                    changed.join("; ")
                ),
            ));
            next.overridden = true;
        }
    }
    if next.overridden {
        ladder::end_pause(
            &ctx,
            &mut next,
            &mut notes,
            "someone changed what the enforcer set: hands off",
        );
        super::lever::end(&mut next, now);
        if !recovering {
            notes.push(ctx.record(DecisionEvent::OverrideEnded,
                "OVERRIDE ended: recovery finished; the enforcer resumes the policy (the hand-set value stays)".to_string(),
            ));
            next = EnforcerState {
                learned: next.learned,
                memory: next.memory,
                changes: next.changes,
                // Flags it set are still its own to unset, whatever happened to the config;
                // so are the PGs the backfill lever holds.
                flags_set: next.flags_set,
                backfill: next.backfill,
                ..EnforcerState::default()
            };
            next.phase = Phase::Idle;
        } else {
            next.phase = Phase::Overridden;
        }
        return Core {
            action: None,
            notes,
            next,
        };
    }

    let mut want: Option<Want> = None;

    if !recovering {
        // 1 and 5: no recovery: nothing to do but restore, after the settle time.
        if let Some(since) = next.breach_since.take() {
            notes.push(ctx.record(
                DecisionEvent::BreachEnded,
                format!(
                    "BREACH ended after {}: recovery finished",
                    fmt_secs(now - since)
                ),
            ));
        }
        ladder::end_pause(&ctx, &mut next, &mut notes, "recovery finished");
        super::lever::end(&mut next, now);
        // The level controller's list is this recovery's; the level that held the bound in
        // it is remembered for the next (in enforce mode: in observe mode the windows were the
        // operator's settings', whatever level it would have set).
        if let Some(run) = state
            .levels
            .as_ref()
            .filter(|_| policy.mode == Mode::Enforce)
        {
            if let Some(h) = run.position.held {
                next.memory.level_held = Some(super::state::LevelHeld {
                    at: now,
                    level: run.levels.get(h).clone(),
                });
            }
        }
        next.levels = None;
        // The releases that kept the recovery on are past the stats' lag: forgotten.
        next.backfill.tidy_at(now);
        // What a move produced is no longer a judgement of anything once the recovery ended.
        next.ladder.watch.clear();
        if state.recovery_active {
            notes.push(ctx.record(DecisionEvent::RecoveryFinished, "RECOVERY finished: no degraded or misplaced objects, no PG recovering or backfilling".to_string()));
        }
        baseline_check(&ctx, &mut next, &mut notes);
        // Anything changed in this episode is put back, even after a partly failed action.
        if !state.original.is_empty() {
            let ended = *next.recovery_ended_at.get_or_insert(now);
            let waited = now - ended;
            if waited >= policy.settle.as_secs_f64() {
                want = Some(Want::new(
                    ActionKind::Restore,
                    changes_back(state, obs),
                    format!(
                        "recovery finished {} ago (settle {})",
                        fmt_secs(waited),
                        fmt_secs(policy.settle.as_secs_f64())
                    ),
                ));
            }
            next.phase = Phase::Settling;
        } else {
            // Nothing of the operator's was changed (e.g. the profile was already right).
            next.applied = None;
            next.recovery_ended_at = None;
            next.phase = Phase::Idle;
            next.noted.clear();
        }
    } else {
        next.recovery_ended_at = None;
        // Latency during recovery says nothing about the baseline.
        next.baseline_high_since = None;
        if let Some(risk) = at_risk(policy, obs, &next, now) {
            // 4: redundancy at risk: the bound is suspended whatever the latency.
            ladder::end_pause(
                &ctx,
                &mut next,
                &mut notes,
                &format!("redundancy at risk ({risk}): recovery first"),
            );
            if next.ladder.lever.is_some() {
                super::lever::end(&mut next, now);
                notes.push(ctx.record(
                    DecisionEvent::BackfillLimit,
                    format!(
                        "{}BACKFILL_LIMIT ended: redundancy at risk ({risk}): recovery first; every PG it holds is released",
                        super::ctx::observe_prefix(policy)
                    ),
                ));
            }
            if let Some(since) = next.breach_since.take() {
                notes.push(ctx.record(
                    DecisionEvent::BreachEnded,
                    format!(
                        "BREACH no longer counts after {}: bound suspended ({risk})",
                        fmt_secs(now - since)
                    ),
                ));
            }
            let already = state
                .applied
                .as_ref()
                .is_some_and(|a| a.kind == ActionKind::Suspend);
            if !already {
                match &obs.op_queue {
                    OpQueue::Mclock => {
                        let values = BTreeMap::from([(
                            MCLOCK_PROFILE_KEY.to_string(),
                            policy.suspend_profile.clone(),
                        )]);
                        let mut changes = changes_to(&values, obs);
                        // A recovery limit of rung 2 goes too: recovery first.
                        changes.extend(ladder::above_rung1_back(state, obs, &values));
                        want = Some(Want::new(
                            ActionKind::Suspend,
                            changes,
                            format!("redundancy at risk: {risk}; latency bound suspended, recovery first"),
                        ));
                    }
                    _ if state.applied.is_some() => {
                        // No profile to raise recovery without mClock: undo the throttle
                        // (backfills the level controller raised stay: recovery first).
                        let keep = ladder::raised_backfills(state);
                        want = Some(Want::new(
                            ActionKind::Suspend,
                            changes_back(state, obs)
                                .into_iter()
                                .filter(|c| !(keep && c.key == ladder::MAX_BACKFILLS))
                                .collect(),
                            format!("redundancy at risk: {risk}; latency bound suspended, throttle removed"),
                        ));
                    }
                    _ => {
                        ctx.note_once(&mut next, &mut notes, "suspended_nothing_to_do", DecisionEvent::Suspended, || format!("bound SUSPENDED: {risk}; nothing to change (OSDs do not run mClock and nothing is throttled)"));
                    }
                }
            }
            next.phase = Phase::Suspended;
        } else if state
            .applied
            .as_ref()
            .is_some_and(|a| a.kind == ActionKind::Suspend)
        {
            want = Some(Want::new(
                ActionKind::Resume,
                changes_back(state, obs),
                format!("redundancy restored while recovery continues ({}); the latency bound applies again", ctx.pg_summary()),
            ));
            next.phase = Phase::Suspended;
        } else {
            // 2 and 3: the bound applies.
            next.phase = if state.ladder.rung >= 1
                || state
                    .applied
                    .as_ref()
                    .is_some_and(|a| a.kind == ActionKind::Throttle)
            {
                Phase::Throttled
            } else {
                Phase::Watching
            };
            match (obs.p99, bound, obs.baseline) {
                (_, None, _) | (_, _, None) => {
                    ctx.note_once(
                        &mut next,
                        &mut notes,
                        "no_baseline",
                        DecisionEvent::NoBaseline,
                        || {
                            format!(
                            "cannot judge latency: no baseline yet ({}); suspension still applies",
                            obs.baseline_note.as_deref().unwrap_or("baseline unknown")
                        )
                        },
                    );
                }
                (None, _, _) => {
                    // No p99 from recent writes: nothing is decided on older ones.
                    if let Some(since) = next.breach_since.take() {
                        notes.push(ctx.record(
                            DecisionEvent::BreachEnded,
                            format!(
                                "BREACH no longer tracked after {}: {}; nothing is decided on a p99 of writes that have stopped",
                                fmt_secs(now - since),
                                obs.p99_note.as_deref().unwrap_or("no client writes in the window")
                            ),
                        ));
                    }
                }
                (Some(p99), Some(bound), Some(baseline)) => {
                    if p99 > bound {
                        let since = *next.breach_since.get_or_insert(now);
                        if state.breach_since.is_none() {
                            notes.push(ctx.record(DecisionEvent::Breach,
                                format!(
                                    "BREACH: {} > bound {} ({} x baseline {}); acting after {} if it lasts; {}",
                                    ctx.p99(p99),
                                    fmt_ms(bound),
                                    policy.multiplier,
                                    fmt_ms(baseline),
                                    fmt_secs(policy.breach_for.as_secs_f64()),
                                    ctx.pg_summary()
                                ),
                            ));
                        }
                        let lasted = now - since;
                        if lasted >= policy.breach_for.as_secs_f64()
                            && next.phase != Phase::Throttled
                            && policy.ladder.controller == Controller::Ladder
                        {
                            next.phase = Phase::Breached;
                            match throttle_values(policy, obs) {
                                Some(values) => {
                                    next.ladder.entered_p99 = Some(p99);
                                    want = Some(Want::new(
                                        ActionKind::Throttle,
                                        changes_to(&values, obs),
                                        format!(
                                            "{} > bound {} ({} x baseline {}) for {}; {}",
                                            ctx.p99(p99),
                                            fmt_ms(bound),
                                            policy.multiplier,
                                            fmt_ms(baseline),
                                            fmt_secs(lasted),
                                            ctx.pg_summary()
                                        ),
                                    ));
                                }
                                None => {
                                    ctx.note_once(&mut next, &mut notes, "op_queue_unknown", DecisionEvent::NoLever, || format!("cannot throttle: the OSDs' op queue is {}; fix the OSDs or the collector first", obs.op_queue.describe()));
                                }
                            }
                        }
                    } else if let Some(since) = next.breach_since.take() {
                        notes.push(ctx.record(
                            DecisionEvent::BreachEnded,
                            format!(
                                "BREACH ended after {}: {} <= bound {}",
                                fmt_secs(now - since),
                                ctx.p99(p99),
                                fmt_ms(bound)
                            ),
                        ));
                    }
                }
            }
            ladder::judge_watches(&ctx, &mut next, &mut notes);
            match (policy.ladder.controller, bound) {
                // One position on the list of levels, moved both ways by each window.
                (Controller::Levels, Some(b)) => {
                    want = super::levels::drive::step(&ctx, state, &mut next, &mut notes, b);
                }
                (Controller::Levels, _) => {}
                (Controller::Ladder, _) => {
                    // The throttle held and the bound still not met (or well met): the ladder.
                    if let (None, Some(b), true) = (&want, bound, state.ladder.rung >= 1) {
                        want = ladder::climb(policy, &ctx, state, &mut next, &mut notes, b);
                    }
                    // The backfill lever's ops per PG follow its level (and go back once it
                    // ends).
                    if want.is_none() {
                        want = super::lever::ops_want(&ctx, &next);
                    }
                }
            }
        }
    }

    // 3: did the OSDs take the profile?  10: did the throttle help?
    if let Some(applied) = next.applied.as_mut() {
        let rung = match next.ladder.rung {
            0 | 1 => ActionKind::Throttle.as_str().to_string(),
            r => ladder::rung_name(policy, &obs.op_queue, r, next.ladder.step, None),
        };
        // The p99 that led to the rung held, for the judgement one window later.
        let before = next
            .ladder
            .acted
            .get(&next.ladder.rung.max(1))
            .and_then(|a| a.p99_seconds);
        check_applied(policy, &ctx, applied, (&rung, before), &mut notes);
    }

    let action = to_action(policy, &ctx, state, &mut next, &mut notes, want);
    Core {
        action,
        notes,
        next,
    }
}

/// Every change sets the mClock profile to what every OSD already runs (none left unknown).
fn already_running(obs: &Observation, changes: &[Change]) -> bool {
    !changes.is_empty()
        && !obs.osd_profiles.is_empty()
        && changes.iter().all(|c| {
            c.key == MCLOCK_PROFILE_KEY
                && c.to
                    .as_ref()
                    .is_some_and(|to| obs.osd_profiles.values().all(|p| p == to))
        })
}

/// Whether `decide` counts this cycle as part of a recovery: Ceph's counts say so, or the
/// backfill lever holds PGs or released one lately (see above). The loop reads the cluster
/// (configured values, flags) on the same test, through [`super::involved`].
pub(super) fn recovering(state: &EnforcerState, obs: &Observation, now: Time) -> bool {
    obs.recovery_active() || state.lever_keeps_recovery_on(now)
}

/// What `decide` wants, through the limits: nothing to change, a retry's backoff, the change
/// limits. The originals of a first change of the episode go into `next`.
fn to_action(
    policy: &Policy,
    ctx: &Ctx<'_>,
    state: &EnforcerState,
    next: &mut EnforcerState,
    notes: &mut Vec<DecisionRecord>,
    want: Option<Want>,
) -> Option<Action> {
    let now = ctx.now;
    // A change that records the operator's originals is made from the configured values read
    // this cycle, never from values not read: an unread profile would be taken for unset, and
    // the RESTORE would remove the operator's setting. The loop reads them whenever `decide`
    // counts a recovery (`involved`); this is the guard should that ever differ again.
    if !ctx.obs.configured_known
        && want
            .as_ref()
            .is_some_and(|w| w.kind.records_originals() && !w.changes.is_empty())
    {
        ctx.note_once(next, notes, "configured_unknown", DecisionEvent::Hold, || {
            "HOLD: the configured values (ceph config dump) were not read this cycle; nothing is changed without them".to_string()
        });
        return None;
    }
    let action = want.and_then(|w| {
        let Want {
            kind,
            changes,
            reason,
            push,
            rung,
        } = w;
        let action = |changes| Action {
            kind,
            changes,
            reason: reason.clone(),
            push: push.clone(),
            rung,
            lifecycle: None,
        };
        // Only keys that change. A recovery limit the enforcer still holds goes back even when
        // the config database already has the operator's value: its value told to the running
        // OSDs is unset with it.
        let changes: Vec<Change> = changes
            .into_iter()
            .filter(|c| {
                !same_setting(&c.from, &c.to)
                    || (matches!(kind, ActionKind::Restore | ActionKind::BlindRestore)
                        && ladder::pushed_and_held(state, &c.key))
            })
            .collect();
        // The throttle profile unset in the config database but run by every OSD already (it
        // is Pacific's default): setting it would change nothing, so it is no action.
        let changes = if kind == ActionKind::Throttle && already_running(ctx.obs, &changes) {
            Vec::new()
        } else {
            changes
        };
        if changes.is_empty() && kind != ActionKind::Throttle {
            // Already as wanted (the operator's profile is the suspend profile, say): no
            // command, no change counted, but the state must move on.
            return Some(action(changes));
        }
        if changes.is_empty() {
            // The operator's own setting is rung 1: the ladder starts above it.
            if next.ladder.rung == 0 {
                next.ladder.rung = 1;
                // Nothing changed, so there is no effect to wait for: the next rung is judged
                // at the next cycle, not after the ladder's settle time.
                next.ladder.since = now - policy.ladder.settle.as_secs_f64();
                next.ladder.top = next.ladder.top.max(1);
                next.ladder.entered(1, now, ctx.obs.p99, false);
                next.phase = Phase::Throttled;
                let then = if policy.ladder.max_rung >= 2 {
                    "nothing changed, so the next rung is judged at the next cycle"
                } else {
                    "no stronger rung (--enforcer.max-rung 1)"
                };
                notes.push(ctx.record(DecisionEvent::NothingToDo,
                    format!("THROTTLE wanted but the OSDs already run it (rung 1 is in force, no change made); {then}: {reason}"),
                ));
            }
            return None;
        }
        if let Some(r) = &state.retry {
            if r.kind == kind && now < r.next_at {
                return None;
            }
        }
        // Only the steps that slow recovery wait for the change limits (`ActionKind::limited`).
        let wait = if !kind.limited() || to_originals(next, &changes) {
            0.0
        } else {
            limit_wait(policy, next, now)
        };
        if wait > 0.0 {
            next.deferred = Some((kind, now + wait));
            if next.noted.insert(format!("rate_limited:{}", kind.as_str())) {
                notes.push(ctx.record(DecisionEvent::RateLimited,
                    format!(
                        "{} deferred {}: at most {} changes per hour and {} between changes ({} in the last hour); {reason}",
                        kind.as_str(),
                        fmt_secs(wait),
                        policy.max_changes_per_hour,
                        fmt_secs(policy.min_interval.as_secs_f64()),
                        next.changes.len()
                    ),
                ));
            }
            return None;
        }
        Some(action(changes))
    });
    if let Some(a) = &action {
        // Remember what the operator had before our first change of this episode.
        for c in &a.changes {
            if a.kind.records_originals() && !next.original.contains_key(&c.key) {
                next.original.insert(c.key.clone(), c.from.clone());
            }
        }
    }
    action
}

/// Every change puts back the operator's value the state recorded (the backfill lever's ops
/// per PG coming down, say): a give-back, never held by the change limits nor counted.
pub(super) fn to_originals(state: &EnforcerState, changes: &[Change]) -> bool {
    !changes.is_empty()
        && changes.iter().all(|c| {
            state
                .original
                .get(&c.key)
                .is_some_and(|o| same_setting(o, &c.to))
        })
}

/// Without recovery, a client p99 (of recent writes) above the bound for `for` means the
/// baseline is too low for this cluster's load: every recovery would start in breach and be
/// throttled for it. Said once, as a warning, until p99 comes back within the bound.
/// How long p99 must stay above the bound without recovery before the baseline is suspect:
/// `for`, but at least 15 minutes (a short `for` makes the enforcer quick to act in a recovery;
/// a baseline is judged on a longer stretch of ordinary load, not on one busy minute).
pub fn baseline_suspect_after(policy: &Policy) -> f64 {
    policy.breach_for.as_secs_f64().max(900.0)
}

fn baseline_check(ctx: &Ctx<'_>, next: &mut EnforcerState, notes: &mut Vec<DecisionRecord>) {
    let (policy, obs, now) = (ctx.policy, ctx.obs, ctx.now);
    let (Some(p99), Some(bound), Some(baseline)) = (obs.p99, ctx.bound, obs.baseline) else {
        // No recent writes, or no bound: nothing to judge, and no time counted.
        next.baseline_high_since = None;
        return;
    };
    if p99 <= bound {
        next.baseline_high_since = None;
        next.baseline_suspect = false;
        return;
    }
    let since = *next.baseline_high_since.get_or_insert(now);
    let lasted = now - since;
    if lasted < baseline_suspect_after(policy) || next.baseline_suspect {
        return;
    }
    next.baseline_suspect = true;
    // What it measures now, rounded up to a whole millisecond, as a starting point.
    let measured = format!("{:.0}ms", (p99 * 1000.0).ceil());
    notes.push(ctx.record(
        DecisionEvent::BaselineSuspect,
        format!(
            "BASELINE looks too low: no recovery, yet {} has stayed above the bound {} ({} x baseline {}, {}) for {}; every recovery would start in breach and be throttled for it. Set a baseline measured without recovery with --enforcer.baseline: `learned` (the p99 of {} of writes without recovery), a number (without recovery it is about {measured} now), or `fio:FILE` (the write p99 of a fio report)",
            ctx.p99(p99),
            fmt_ms(bound),
            policy.multiplier,
            fmt_ms(baseline),
            match &policy.baseline {
                BaselineSpec::Fixed(_) => "the number --enforcer.baseline gives".to_string(),
                BaselineSpec::Learned => "learned".to_string(),
                BaselineSpec::Fio(_) => format!("from --enforcer.baseline {}", policy.baseline),
            },
            fmt_secs(lasted),
            crate::units::fmt_window(policy.learn_window.as_secs_f64()),
        ),
    ));
}

fn check_applied(
    policy: &Policy,
    ctx: &Ctx<'_>,
    applied: &mut Applied,
    (rung, before): (&str, Option<f64>),
    notes: &mut Vec<DecisionRecord>,
) {
    let age = ctx.now - applied.at;
    // Without the OSDs' answers (their collector failed) there is nothing to verify yet.
    if !applied.verified
        && !applied.simulated
        && !ctx.obs.osd_profiles.is_empty()
        && age >= policy.verify_after.as_secs_f64()
    {
        if let Some(profile) = applied.values.get(MCLOCK_PROFILE_KEY) {
            applied.verified = true;
            applied.not_taken = ctx
                .obs
                .osd_profiles
                .iter()
                .filter(|(_, p)| *p != profile)
                .map(|(osd, p)| format!("{osd} ({p})"))
                .collect();
            if applied.not_taken.is_empty() {
                let answered = ctx.obs.osd_profiles.len() as u64;
                // "all 3 OSDs" of 4 needs saying why one is missing.
                let of = match ctx.obs.osds {
                    Some((n, up)) if answered < n => {
                        format!(" ({n} in the cluster, {} down)", n.saturating_sub(up))
                    }
                    _ => String::new(),
                };
                let which = if of.is_empty() { "" } else { " that answered" };
                notes.push(ctx.record(
                    DecisionEvent::Verified,
                    format!("VERIFIED: all {answered} OSDs{which} run {profile}{of}"),
                ));
            } else {
                notes.push(ctx.record(DecisionEvent::NotTaken,
                    format!(
                        "NOT TAKEN: {} still run another profile than {profile} {} after the change: a value in their ceph.conf (or set with ceph tell) wins over ceph config set; remove it there",
                        applied.not_taken.join(", "),
                        fmt_secs(age)
                    ),
                ));
            }
        }
    }
    // Nothing was set in observe mode: there is no effect to measure. Nor once the recovery
    // ended: a judgement of its rung would no longer be true of anything. The level controller
    // judges each level itself (its LEVEL lines).
    if applied.kind == ActionKind::Throttle
        && policy.ladder.controller == Controller::Ladder
        && ctx.obs.recovery_active()
        && !applied.simulated
        && applied.effective.is_none()
        && age >= policy.latency_window.as_secs_f64()
    {
        if let (Some(p99), Some(bound)) = (ctx.obs.p99, ctx.bound) {
            let helped = p99 <= bound;
            applied.effective = Some(helped);
            // Each action's line names the p99 that led to it; this one, a window later, both.
            let then = before
                .map(|b| format!(" ({} when it was set)", fmt_ms(b)))
                .unwrap_or_default();
            let msg = if helped {
                format!(
                    "{rung} helped: {} <= bound {} after {}{then}",
                    ctx.p99(p99),
                    fmt_ms(bound),
                    fmt_secs(age)
                )
            } else {
                format!(
                    "{rung} had no effect: {} is still above the bound {} after {}{then}; {}",
                    ctx.p99(p99),
                    fmt_ms(bound),
                    fmt_secs(age),
                    if rung.starts_with("rung 4") {
                        "the pause share follows p99 period by period".to_string()
                    } else if rung.starts_with("rung 3") {
                        "the backfill lever's N follows p99 period by period".to_string()
                    } else if policy.ladder.max_rung >= 2 {
                        format!(
                            "the ladder's next rung is tried once the rung held has had {}",
                            fmt_secs(policy.ladder.settle.as_secs_f64())
                        )
                    } else {
                        "keeping it (--enforcer.max-rung 1: no stronger lever)".to_string()
                    }
                )
            };
            notes.push(ctx.record(
                if helped {
                    DecisionEvent::Effective
                } else {
                    DecisionEvent::NoEffect
                },
                msg,
            ));
        }
    }
}
