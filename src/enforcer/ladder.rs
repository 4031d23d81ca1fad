//! The escalation ladder above the throttle (issue #7). Rung 1 is the throttle profile (or the
//! wpq levers); rung 2 a recovery-rate limit stepped down; rung 3 the backfill lever (at most N
//! PGs backfill at once, [`super::lever`]); rung 4 the duty-cycled pause of [`super::pause`]. Each rung is held for the ladder's settle time and judged by the p99 it
//! left, up (still above the bound) or down (below `descend_below x bound` for the settle
//! time), one rung or step at a time. Pure, like `decide`, which calls it.

use std::collections::BTreeMap;

use super::backfill_limit::{LEVER_RUNG, PAUSE_RUNG};
use super::ctx::{observe_prefix, watch, Ctx};
use super::effect::Want;
use super::event::{DecisionEvent, DecisionRecord};
use super::lever::{self, AtRung};
use super::observation::{LimitGate, Observation, OpQueue};
use super::pause::{pause_step, PauseInput, PauseState};
use super::policy::{LadderPolicy, LimitUnit, Policy, RecoveryLimit};
use super::state::{ActionKind, EnforcerState, Held, Hurt, Watch};
use super::types::{Change, Time};
use crate::units::{fmt_ms, fmt_secs};

type DecisionNotes = Vec<DecisionRecord>;

pub use super::types::{
    above_rung1_keys, backfills, rung2_keys, same_setting, MAX_BACKFILLS, MCLOCK_BEST_EFFORT_LIM,
    MCLOCK_OVERRIDE, MCLOCK_PROFILE_KEY, MCLOCK_RECOVERY_LIM, MCLOCK_RECOVERY_RES,
    RECOVERY_MAX_ACTIVE, RECOVERY_SLEEP,
};
/// A rung whose p99 is this much above the p99 that led to it made things worse.
const WORSE: f64 = 1.2;

/// Whether `key` is a recovery limit the enforcer holds and also told the running OSDs: going
/// back unsets it there too, whatever the config database says already.
pub(super) fn pushed_and_held(state: &EnforcerState, key: &str) -> bool {
    super::types::MCLOCK_PUSHED.contains(&key)
        && state
            .applied
            .as_ref()
            .is_some_and(|a| a.values.contains_key(key))
}

/// The memory's name for rung 2's lever on op queue `q` (the limit under mClock and the sleep
/// under wpq are different levers: one hurting says nothing of the other).
pub fn lever_key(q: &OpQueue) -> &'static str {
    match q {
        OpQueue::Mclock => "mclock_recovery_limit",
        _ => "wpq_recovery_sleep",
    }
}

/// The share the pause starts at for `p99` against `bound`, from the breach and from what held
/// the bound in the last recovery of this cluster.
pub(super) fn pause_entry(policy: &Policy, state: &EnforcerState, p99: f64, bound: f64) -> f64 {
    let remembered = remembered_share(state).map(|(s, _)| s);
    policy.ladder.pause.entry_share(p99 / bound, remembered)
}

/// The pause share that held the bound in the last recovery that needed the pause, and when.
fn remembered_share(state: &EnforcerState) -> Option<(f64, Time)> {
    let h = state
        .memory
        .held
        .as_ref()
        .filter(|h| h.rung >= PAUSE_RUNG)?;
    h.share.map(|s| (s, h.at))
}

/// Why the entry share is what it is, for the ESCALATE line.
fn entry_why(
    policy: &Policy,
    state: &EnforcerState,
    now: Time,
    (p99, bound): (f64, f64),
    share: f64,
) -> String {
    let pp = &policy.ladder.pause;
    let remembered = remembered_share(state);
    let from_breach = pp.entry_share(p99 / bound, None);
    match remembered {
        Some((s, at)) if s >= from_breach && s > pp.start_share => format!(
            " (the share that held the bound in the last recovery, {})",
            crate::units::fmt_when(at, now)
        ),
        _ if share > pp.start_share => format!(
            " (p99 {:.1}x the bound: {:.0}% instead of {:.0}%)",
            p99 / bound,
            share * 100.0,
            pp.start_share * 100.0
        ),
        _ => String::new(),
    }
}

/// One latency window after each move of the ladder, what p99 it produced: "EFFECT of ...".
/// Judgements stop with the recovery (the caller clears the watches then).
pub(super) fn judge_watches(ctx: &Ctx<'_>, next: &mut EnforcerState, notes: &mut DecisionNotes) {
    let window = ctx.policy.latency_window.as_secs_f64();
    let now = ctx.now;
    let (due, keep): (Vec<Watch>, Vec<Watch>) = std::mem::take(&mut next.ladder.watch)
        .into_iter()
        .partition(|w| now - w.at >= window);
    next.ladder.watch = keep;
    for w in due {
        let before = w.p99_before.map_or("n/a".to_string(), crate::units::fmt_ms);
        let (after, verdict) = match (ctx.obs.p99, ctx.bound) {
            (Some(p), Some(b)) => {
                let trend = match w.p99_before {
                    Some(x) if p < x * 0.9 => "better",
                    Some(x) if p > x * 1.1 => "worse",
                    Some(_) => "about the same",
                    None => "",
                };
                let place = if p <= b { "within" } else { "above" };
                (
                    crate::units::fmt_ms(p),
                    format!(
                        "{trend}{}{place} the bound {}",
                        if trend.is_empty() { "" } else { ", " },
                        fmt_ms(b)
                    ),
                )
            }
            _ => (
                "n/a".to_string(),
                "no client writes in the window".to_string(),
            ),
        };
        notes.push(ctx.record(
            DecisionEvent::Effect,
            format!(
                "EFFECT of {} ({} ago): client p99 write over the last {} {before} when decided, {after} one window later: {verdict}",
                w.what,
                fmt_secs(now - w.at),
                crate::units::fmt_window(window),
            ),
        ));
    }
}

/// The values the policy sets to throttle, for the op queue the OSDs run.
pub(super) fn throttle_values(
    policy: &Policy,
    obs: &Observation,
) -> Option<BTreeMap<String, String>> {
    match &obs.op_queue {
        OpQueue::Mclock => Some(BTreeMap::from([(
            MCLOCK_PROFILE_KEY.to_string(),
            policy.throttle_profile.clone(),
        )])),
        OpQueue::Other(_) => Some(policy.wpq_levers.clone()),
        OpQueue::Mixed | OpQueue::Unknown => None,
    }
}

pub(super) fn changes_to(values: &BTreeMap<String, String>, obs: &Observation) -> Vec<Change> {
    values
        .iter()
        .map(|(k, v)| Change {
            key: k.clone(),
            from: obs.configured.get(k).cloned().flatten(),
            to: Some(v.clone()),
        })
        .collect()
}

fn steps(policy: &Policy, q: &OpQueue) -> usize {
    match q {
        OpQueue::Mclock => policy.ladder.recovery_limits.len(),
        OpQueue::Other(_) => policy.ladder.recovery_sleeps.len(),
        OpQueue::Mixed | OpQueue::Unknown => 0,
    }
}

/// Whether the OSDs' versions decide anything at `rung`: rung 2 under mClock (limits in IOPS or
/// in shares of capacity, each read so by some releases only) may come next (rung 1) or is held
/// (rung 2).
pub fn versions_matter(policy: &Policy, q: &OpQueue, rung: u8) -> bool {
    *q == OpQueue::Mclock
        && matches!(rung, 1 | 2)
        && policy.ladder.max_rung >= 2
        && steps(policy, q) > 0
}

/// Values set in the config database, and those pushed to the running OSDs as well.
pub type RungValues = (BTreeMap<String, String>, Vec<(String, String)>);

/// Whether every OSD reads rung 2's mClock limits in the unit they are configured in.
fn limit_gate(policy: &Policy, obs: &Observation) -> LimitGate {
    match policy.ladder.limit_unit() {
        Some(unit) => obs.mclock_limit_gate(unit),
        None => LimitGate::Reads,
    }
}

/// Why the limit rung 2 holds on the cluster is not in the unit configured now, if it is not:
/// written by an earlier run with other limits (a restart after the OSDs were upgraded and the
/// limits rewritten for them). The enforcer writes IOPS as whole numbers and shares with a
/// decimal point.
fn written_otherwise(policy: &Policy, state: &EnforcerState) -> Option<String> {
    let unit = policy.ladder.limit_unit()?;
    let held = state.applied.as_ref()?.values.get(MCLOCK_RECOVERY_LIM)?;
    let written = if held.contains('.') {
        LimitUnit::Share
    } else {
        LimitUnit::Iops
    };
    (written != unit).then(|| {
        format!(
            "the recovery limit on the cluster, {held}, was written as {} by an earlier run",
            written.describe()
        )
    })
}

/// What the configured limits are and what the OSDs would need, for a refusal.
fn limit_unit_words(policy: &Policy) -> String {
    let shown: Vec<String> = policy
        .ladder
        .recovery_limits
        .iter()
        .map(ToString::to_string)
        .collect();
    let unit = policy.ladder.limit_unit().unwrap_or(LimitUnit::Iops);
    let other = match unit {
        LimitUnit::Share => "Pacific and Quincy before 17.2.6 read IOPS (write e.g. --enforcer.recovery-limits 1000,300 for them)",
        LimitUnit::Iops => "Quincy 17.2.6+ reads a fraction of each OSD's capacity (write e.g. --enforcer.recovery-limits 5%,3% for it)",
    };
    format!(
        "its limits --enforcer.recovery-limits {} are {}, while {other}",
        shown.join(","),
        unit.describe()
    )
}

/// The values rung 2 sets at `step`.
pub fn rung2_values(policy: &Policy, q: &OpQueue, step: usize) -> Option<RungValues> {
    match q {
        OpQueue::Mclock => {
            let lim = *policy.ladder.recovery_limits.get(step)?;
            let values = BTreeMap::from_iter(
                mclock_limit_values(lim)
                    .into_iter()
                    .map(|(k, v)| (k.to_string(), v)),
            );
            let push = values
                .iter()
                .filter(|(k, _)| super::types::MCLOCK_PUSHED.contains(&k.as_str()))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            Some((values, push))
        }
        OpQueue::Other(_) => {
            let sleep = policy.ladder.recovery_sleeps.get(step)?;
            Some((
                BTreeMap::from([
                    (RECOVERY_SLEEP.to_string(), format!("{sleep}")),
                    (RECOVERY_MAX_ACTIVE.to_string(), "1".to_string()),
                ]),
                Vec::new(),
            ))
        }
        OpQueue::Mixed | OpQueue::Unknown => None,
    }
}

/// What rung 2 under mClock writes for `lim`, in the order it is set: the same values the
/// experiment's `limit-P` rows measured on each release (docs/enforcer.md, "Each lever on each
/// release"), so what the table says is what the enforcer does.
pub fn mclock_limit_values(lim: RecoveryLimit) -> Vec<(&'static str, String)> {
    let custom = (MCLOCK_PROFILE_KEY, "custom".to_string());
    match lim {
        // The reservation is what recovery gets whatever the limit: down to 1 IOPS so the limit
        // binds (the built-in profiles reserve far more).
        RecoveryLimit::Iops(_) => vec![
            custom,
            (MCLOCK_RECOVERY_RES, "1".to_string()),
            (MCLOCK_RECOVERY_LIM, lim.value()),
        ],
        // `custom` keeps the profile's values it does not name (on Reef `balanced`'s recovery
        // reservation 0.5, above any limit here): the reservation goes to Ceph's own default
        // for `custom`, 0, so the limit binds log-based recovery too; backfill runs in the
        // best-effort class, which has its own limit.
        RecoveryLimit::Percent(_) => vec![
            custom,
            (MCLOCK_RECOVERY_RES, "0".to_string()),
            (MCLOCK_RECOVERY_LIM, lim.value()),
            (MCLOCK_BEST_EFFORT_LIM, lim.value()),
        ],
    }
}

/// "rung 2 (recovery limit 300 IOPS per OSD)", for the log.
pub fn rung_name(
    policy: &Policy,
    q: &OpQueue,
    rung: u8,
    step: usize,
    share: Option<f64>,
) -> String {
    match rung {
        0 => "no rung".to_string(),
        1 => match q {
            OpQueue::Other(_) => {
                let levers: Vec<String> = policy
                    .wpq_levers
                    .iter()
                    .map(|(k, v)| format!("{k}={v}"))
                    .collect();
                format!("rung 1 ({})", levers.join(", "))
            }
            _ => format!("rung 1 ({})", policy.throttle_profile),
        },
        2 => match q {
            OpQueue::Other(_) => format!(
                "rung 2 (osd_recovery_sleep {} s, osd_recovery_max_active 1)",
                policy
                    .ladder
                    .recovery_sleeps
                    .get(step)
                    .map_or("?".to_string(), |s| s.to_string())
            ),
            _ => match policy.ladder.recovery_limits.get(step) {
                Some(l @ RecoveryLimit::Iops(_)) => {
                    format!("rung 2 (custom profile, recovery limit {l} IOPS per OSD)")
                }
                Some(l @ RecoveryLimit::Percent(_)) => format!(
                    "rung 2 (custom profile, recovery and backfill limits {l} of each OSD's capacity)"
                ),
                None => "rung 2 (custom profile, recovery limit ?)".to_string(),
            },
        },
        LEVER_RUNG => lever::lever_name(None),
        _ => match share {
            Some(s) => format!(
                "rung 4 (pause nobackfill+norecover {:.0}% of each {:.0} s)",
                s * 100.0,
                policy.ladder.pause.period
            ),
            None => "rung 4 (pause nobackfill+norecover)".to_string(),
        },
    }
}

/// How the lever's aim falls with N, for [`describe`].
fn lever_aim(l: &LadderPolicy) -> String {
    // The settings keep the aim above `descend_below`, so the aim always has room to fall.
    let lowest = super::backfill_limit::lowest_aim(l.aim, l.descend_below);
    format!(
        "its aim {:.0}% of the bound lower per PG backfilling above one, down to {:.0}%",
        super::backfill_limit::AIM_STEP_PER_PG * 100.0,
        lowest * 100.0
    )
}

/// The whole ladder in one line, for the start-up log and observe mode.
pub fn describe(policy: &Policy) -> String {
    let mut rungs = vec![format!(
        "1 {} (wpq: {})",
        policy.throttle_profile,
        policy
            .wpq_levers
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(",")
    )];
    let l = &policy.ladder;
    if l.max_rung >= 2 {
        let mclock = if l.recovery_limits.is_empty() {
            "none under mClock (--enforcer.recovery-limits none)".to_string()
        } else {
            let unit = match l.limit_unit() {
                Some(LimitUnit::Share) => {
                    "of capacity, recovery and backfill (custom profile, Quincy 17.2.6+ OSDs only)"
                }
                _ => "IOPS (custom profile, Pacific OSDs only)",
            };
            format!(
                "recovery limit {} {unit}",
                l.recovery_limits
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join("/")
            )
        };
        rungs.push(format!(
            "2 {mclock}; wpq: osd_recovery_sleep {} s",
            l.recovery_sleeps
                .iter()
                .map(f64::to_string)
                .collect::<Vec<_>>()
                .join("/")
        ));
    }
    if l.max_rung >= 3 {
        rungs.push(if l.backfill_lever && l.ops_per_pg > 1 {
            format!("3 backfill lever (at most N PGs backfill at once, the others held with pg-upmap-items; {} recovery ops per PG before N is raised; {})", l.ops_per_pg, lever_aim(l))
        } else if l.backfill_lever {
            format!("3 backfill lever (at most N PGs backfill at once, the others held with pg-upmap-items; {})", lever_aim(l))
        } else {
            "3 backfill lever off (--enforcer.backfill-lever off)".to_string()
        });
    }
    if l.max_rung >= 4 {
        rungs.push(format!(
            "4 pause nobackfill+norecover {:.0}%..{:.0}% of each {:.0} s, at most {} per recovery{}",
            l.pause.start_share * 100.0,
            l.pause.max_share * 100.0,
            l.pause.period,
            fmt_secs(l.pause.max_total),
            if l.max_rung >= 3 && l.backfill_lever {
                " (from rung 3 once N = 1 stays over the bound itself)"
            } else {
                ""
            }
        ));
    }
    format!(
        "ladder: {}; each rung judged after {}, up above {:.0}% of the bound (the aim), down below {:.0}%{}",
        rungs.join("; "),
        fmt_secs(l.settle.as_secs_f64()),
        l.aim * 100.0,
        l.descend_below * 100.0,
        if policy.memory {
            ""
        } else {
            "; memory off (--enforcer.memory off): each recovery starts from the breach alone"
        }
    )
}

/// The rung above (rung, step), if the policy and the op queue allow one.
fn up(
    policy: &Policy,
    q: &OpQueue,
    rung: u8,
    step: usize,
    no_pause: bool,
    no_limit: bool,
) -> Option<(u8, usize)> {
    let max = policy.ladder.max_rung;
    let n = if no_limit { 0 } else { steps(policy, q) };
    let pause = (max >= PAUSE_RUNG && !no_pause).then_some((PAUSE_RUNG, step));
    // The lever is tried when allowed; `lever::enter` says why not (LADDER_SKIP) and the pause
    // follows.
    let lever = (max >= LEVER_RUNG && !no_pause)
        .then_some((LEVER_RUNG, step))
        .or(pause);
    // OSDs whose op queue is not known (or not the same everywhere): no jump past rung 2.
    if matches!(q, OpQueue::Mixed | OpQueue::Unknown) && rung < 2 {
        return None;
    }
    match rung {
        1 if max >= 2 && n > 0 => Some((2, 0)),
        1 => lever,
        2 if step + 1 < n => Some((2, step + 1)),
        2 => lever,
        LEVER_RUNG => pause,
        _ => None,
    }
}

/// Ends the pause rung at once (redundancy at risk, recovery over, stale data, hands off);
/// the loop then unsets the flags the enforcer set.
pub(super) fn end_pause(
    ctx: &Ctx<'_>,
    next: &mut EnforcerState,
    notes: &mut DecisionNotes,
    why: &str,
) {
    let Some(ps) = next.ladder.pause.take() else {
        return;
    };
    let now = ctx.now;
    next.ladder.paused_seconds = ps.paused_so_far(now);
    next.ladder.acted.remove(&PAUSE_RUNG);
    if next.ladder.rung >= PAUSE_RUNG && next.ladder.lever.is_some() {
        // Back to the backfill lever at N = 1, which gets its settle time again.
        next.ladder.rung = LEVER_RUNG;
        next.ladder.since = now;
        next.ladder.below_since = None;
        if let Some(l) = next.ladder.lever.as_mut() {
            l.period_start = now;
            l.at_one_since = Some(now);
        }
    } else if next.ladder.rung >= PAUSE_RUNG {
        next.ladder.rung = if next
            .applied
            .as_ref()
            .is_some_and(|a| rung2_keys().iter().any(|k| a.values.contains_key(*k)))
        {
            2
        } else {
            1
        };
        next.ladder.since = now;
        next.ladder.below_since = None;
    }
    // Once the recovery is over there is nothing to run unpaused, and "this recovery" is past.
    let then = if next.recovery_active {
        format!(
            "recovery runs unpaused (paused {} in this recovery)",
            fmt_secs(next.ladder.paused_seconds)
        )
    } else {
        format!(
            "paused {} in the recovery that ended",
            fmt_secs(next.ladder.paused_seconds)
        )
    };
    notes.push(ctx.record(
        DecisionEvent::PauseEnded,
        format!("{}PAUSE ended: {why}; {then}", observe_prefix(ctx.policy)),
    ));
}

/// Rungs 2, 3 and 4, while rung 1 (or more) is held and the bound applies.
pub(super) fn climb(
    policy: &Policy,
    ctx: &Ctx<'_>,
    state: &EnforcerState,
    next: &mut EnforcerState,
    notes: &mut DecisionNotes,
    bound: f64,
) -> Option<Want> {
    let lp = &policy.ladder;
    let obs: &Observation = ctx.obs;
    let now = ctx.now;
    // What this decision already changed (a pause ended above) counts.
    let l = &next.ladder.clone();
    let q = &obs.op_queue;
    let settle = lp.settle.as_secs_f64();
    // Whatever the suspension policy: never paused while any copy is missing.
    let reduced = obs.copies_missing();
    if reduced && l.lever.is_some() {
        lever::end(next, now);
    }
    if reduced && l.pause.is_some() {
        end_pause(
            ctx,
            next,
            notes,
            &format!(
                "{} PGs undersized: never paused while redundancy is reduced",
                obs.undersized_pgs
            ),
        );
        return None;
    }
    if l.rung >= PAUSE_RUNG {
        let Some(ps) = l.pause.as_ref() else {
            next.ladder.rung = if l.lever.is_some() { LEVER_RUNG } else { 2 };
            return None;
        };
        if l.lever.is_none() && lp.backfill_lever && lp.max_rung >= LEVER_RUNG {
            if let Some(p99) = obs.p99.filter(|p| *p > bound * lp.aim) {
                if let Ok(n) = lever::join_pause(ctx, state, next, (p99, bound)) {
                    let to = lever::lever_name(Some(n));
                    notes.push(ctx.record(
                        DecisionEvent::BackfillLimit,
                        format!(
                            "{}BACKFILL_LIMIT: PGs now wait for backfill and {} is still above the {}: {to} joins the pause{}; PGs above {n} are held where their data is (pg-upmap-items), so the unpaused part of each period no longer lets them all backfill at once",
                            observe_prefix(policy),
                            ctx.p99(p99),
                            super::pause::over_what(p99, bound, lp.aim),
                            lever::entry_why(state, next.ladder.started, ctx, p99, bound)
                        ),
                    ));
                    watch(
                        next,
                        format!("BACKFILL_LIMIT {to} under the pause"),
                        now,
                        Some(p99),
                    );
                }
            }
        }
        let step = pause_step(
            &lp.pause,
            ps,
            &PauseInput {
                now,
                p99: obs.p99,
                bound,
                window: policy.latency_window.as_secs_f64(),
            },
        );
        if let Some(share) = step.held {
            next.memory.held = Some(Held {
                at: now,
                rung: PAUSE_RUNG,
                share: Some(share),
                n: l.lever.as_ref().map(|l| l.n),
            });
        }
        match step.next {
            Some(n) => {
                if let Some(note) = step.note {
                    notes.push(ctx.record(
                        DecisionEvent::PauseShare,
                        format!("{}{note}", observe_prefix(policy)),
                    ));
                    if n.share != ps.share {
                        watch(
                            next,
                            format!(
                                "PAUSE share {:.0}% -> {:.0}%",
                                ps.share * 100.0,
                                n.share * 100.0
                            ),
                            now,
                            obs.p99,
                        );
                    }
                }
                next.ladder.pause = Some(n);
            }
            None => {
                // The duty cycle is over (share down to 0, or the budget used up): one rung down.
                end_pause(
                    ctx,
                    next,
                    notes,
                    step.note.as_deref().unwrap_or("pause over"),
                );
            }
        }
        return None;
    }
    if l.rung == LEVER_RUNG {
        match lever::at_rung(ctx, next, notes, bound) {
            AtRung::Stay => return None,
            AtRung::Ended { why, refused } => {
                lever::end(next, now);
                notes.push(ctx.record(
                    DecisionEvent::BackfillLimit,
                    format!(
                        "{}BACKFILL_LIMIT ended: {why}; {}",
                        observe_prefix(policy),
                        if refused {
                            "every PG it holds is released; the pause is next if p99 stays above the bound"
                        } else {
                            "every PG it held is released"
                        }
                    ),
                ));
                return None;
            }
            AtRung::Escalate(why) => {
                let p99 = obs.p99?;
                if lp.max_rung < PAUSE_RUNG || l.no_pause {
                    let key = format!("top:{LEVER_RUNG}:{}", l.step);
                    ctx.note_once(next, notes, key, DecisionEvent::LadderTop, || {
                        format!(
                            "{why}; no stronger rung ({}): holding it",
                            if l.no_pause {
                                "the pause was ended by hand in this recovery".to_string()
                            } else {
                                format!("--enforcer.max-rung is {}", lp.max_rung)
                            }
                        )
                    });
                    return None;
                }
                return enter_pause(policy, ctx, state, next, notes, (p99, bound), &why);
            }
        }
    }
    let name = rung_name(policy, q, l.rung, l.step, None);
    // An OSD that now runs another release (an upgrade under way) must not keep a limit it
    // reads in another unit.
    if l.rung == 2 && versions_matter(policy, q, l.rung) {
        let refused = match limit_gate(policy, obs) {
            LimitGate::Refused(why) => Some(why),
            _ => written_otherwise(policy, state),
        };
        if let Some(why) = refused {
            next.ladder.limit_hurt = true;
            let mut w = Want::new(
                ActionKind::Descend,
                down_to_rung1(policy, state, obs),
                format!(
                    "{name} taken back: {why}; {}; the ladder goes on from rung 1 without it",
                    limit_unit_words(policy)
                ),
            );
            w.rung = Some((1, 0));
            return Some(w);
        }
    }
    let held = now - l.since;
    let Some(p99) = obs.p99 else {
        // No client write in the window: no client latency to protect, which is room, as the
        // backfill lever ends without writes. Left on, rung 2 kept the recovery at its limit
        // with nobody writing (on the lab, 4 objects/s for the 20 minutes after the load
        // stopped). Down one step per settle time, as below the bound; rung 1 stays.
        let quiet = *next.ladder.below_since.get_or_insert(now);
        return step_down(policy, ctx, state, (l, &name, held), quiet, |for_| {
            format!(
                "{} for {}: no client latency to protect",
                obs.p99_note
                    .as_deref()
                    .unwrap_or("no client writes in the window"),
                fmt_secs(for_)
            )
        });
    };
    // Judged against the aim below the bound (`LadderPolicy::aim`): the OSDs' p99 misses the
    // client's own share of its latency.
    if p99 > bound * lp.aim {
        let over = super::pause::over_what(p99, bound, lp.aim);
        next.ladder.below_since = None;
        // The last recovery of this cluster needed a higher rung: no waiting on this one.
        let needed = state
            .memory
            .held
            .as_ref()
            .filter(|h| h.rung > l.rung && lp.max_rung >= h.rung);
        if held < settle {
            let h = needed?;
            ctx.note_once(next, notes, format!("memory:{}", l.rung), DecisionEvent::LadderSkip, || {
                format!(
                    "{}{name} is not given {}: the last recovery of this cluster needed {} to hold the bound ({})",
                    observe_prefix(policy),
                    fmt_secs(settle),
                    if h.rung == LEVER_RUNG {
                        lever::lever_name(h.n)
                    } else {
                        rung_name(policy, q, h.rung, 0, h.share)
                    },
                    crate::units::fmt_when(h.at, now)
                )
            });
        }
        next.ladder.entered_p99 = Some(p99);
        // Rung 2's mClock limits mean what they say only to the releases that read their unit.
        let gate = if l.rung == 1 && !l.limit_hurt && versions_matter(policy, q, l.rung) {
            limit_gate(policy, obs)
        } else {
            LimitGate::Reads
        };
        let refused = match gate {
            LimitGate::Reads => None,
            LimitGate::Refused(why) => Some(why),
            LimitGate::Unknown(why) => {
                // Not a reason for the stronger pause: ask again next cycle.
                ctx.note_once(next, notes, "limit_wait", DecisionEvent::LadderWait, || {
                    format!(
                        "{}rung 2 (recovery limit) waits: {why}; its limits mean {} only to some releases, so {name} is held until the versions are read",
                        observe_prefix(policy),
                        policy.ladder.limit_unit().map_or("IOPS", LimitUnit::describe)
                    )
                });
                return None;
            }
        };
        if let Some(why) = &refused {
            ctx.note_once(
                next,
                notes,
                "limit_refused",
                DecisionEvent::LadderSkip,
                || {
                    format!(
                        "{}rung 2 (recovery limit) skipped: {why}; {}",
                        observe_prefix(policy),
                        limit_unit_words(policy)
                    )
                },
            );
        }
        match up(
            policy,
            q,
            l.rung,
            l.step,
            l.no_pause || reduced,
            l.limit_hurt || refused.is_some(),
        ) {
            None => {
                if next.noted.insert(format!("top:{}:{}", l.rung, l.step)) {
                    let why = if l.no_pause {
                        "the pause was ended by hand in this recovery".to_string()
                    } else if reduced {
                        "PGs undersized: no pause while redundancy is reduced".to_string()
                    } else if matches!(q, OpQueue::Mixed | OpQueue::Unknown) {
                        format!("the OSDs' op queue is {}", q.describe())
                    } else if refused.is_some() {
                        "rung 2 skipped (above) and --enforcer.max-rung is 2".to_string()
                    } else if l.rung >= 2 || lp.max_rung < 2 {
                        format!("--enforcer.max-rung is {}", lp.max_rung)
                    } else {
                        format!("no recovery limit for op queue {}", q.describe())
                    };
                    notes.push(ctx.record(DecisionEvent::LadderTop,
                        format!(
                            "{name} left {} > {over} after {}; no stronger rung ({why}): holding it",
                            ctx.p99(p99),
                            fmt_secs(held)
                        ),
                    ));
                }
                None
            }
            Some((to_rung @ (LEVER_RUNG | PAUSE_RUNG), _)) => {
                // A recovery limit that made p99 worse is taken back on the way up: the pause
                // then works with recovery at the throttle profile's pace (measured on the lab:
                // the custom limit raised p99 from 328 ms to 810 ms).
                if let Some(before) = l.entered_p99.filter(|b| l.rung == 2 && p99 > b * WORSE) {
                    if l.paused_seconds < lp.pause.max_total && lp.max_rung >= PAUSE_RUNG {
                        next.ladder.limit_hurt = true;
                        next.memory.hurt.insert(
                            lever_key(q).to_string(),
                            Hurt {
                                at: now,
                                what: name.clone(),
                                p99_before: before,
                                p99_after: p99,
                            },
                        );
                        let share = pause_entry(policy, state, p99, bound);
                        next.ladder.entry_share = Some(share);
                        let mut w = Want::new(
                            ActionKind::Escalate,
                            down_to_rung1(policy, state, obs),
                            format!(
                                "{name} made client p99 write worse ({} over the last {} after {}, {} when it was set; bound {}): taken back, and not used on this cluster for 30 days (remembered); escalating to {}{}",
                                fmt_ms(p99),
                                crate::units::fmt_window(policy.latency_window.as_secs_f64()),
                                fmt_secs(held),
                                fmt_ms(before),
                                fmt_ms(bound),
                                rung_name(policy, q, PAUSE_RUNG, l.step, Some(share)),
                                entry_why(policy, state, now, (p99, bound), share)
                            ),
                        );
                        w.rung = Some((PAUSE_RUNG, 0));
                        return Some(w);
                    }
                }
                let from = format!(
                    "{name} left {} > {over} after {}",
                    ctx.p99(p99),
                    fmt_secs(held)
                );
                if to_rung == LEVER_RUNG {
                    match lever::enter(ctx, state, next, (p99, bound)) {
                        Ok(n) => {
                            let to = lever::lever_name(Some(n));
                            notes.push(ctx.record(
                                DecisionEvent::Escalate,
                                format!(
                                    "{}ESCALATE: {from}; escalating to {to}{}: PGs above {n} are held where their data is (pg-upmap-items), released as p99 allows",
                                    observe_prefix(policy),
                                    lever::entry_why(state, next.ladder.started, ctx, p99, bound)
                                ),
                            ));
                            watch(next, format!("ESCALATE to {to}"), now, Some(p99));
                            return None;
                        }
                        Err(why) => {
                            let then = if lp.max_rung >= PAUSE_RUNG {
                                "the ladder goes on to the pause (rung 4)"
                            } else {
                                "no stronger rung (--enforcer.max-rung 3)"
                            };
                            ctx.note_once(
                                next,
                                notes,
                                format!("lever_skip:{why}"),
                                DecisionEvent::LadderSkip,
                                || {
                                    format!(
                                        "{}rung 3 (backfill lever) skipped: {why}; {then}",
                                        observe_prefix(policy)
                                    )
                                },
                            );
                            if lp.max_rung < PAUSE_RUNG {
                                return None;
                            }
                        }
                    }
                }
                enter_pause(policy, ctx, state, next, notes, (p99, bound), &from)
            }
            Some((rung, step)) => {
                let (values, push) = rung2_values(policy, q, step)?;
                let mut w = Want::new(
                    ActionKind::Escalate,
                    changes_to(&values, obs),
                    format!(
                        "{name} left {} > {over} after {}; escalating to {}",
                        ctx.p99(p99),
                        fmt_secs(held),
                        rung_name(policy, q, rung, step, None)
                    ),
                );
                w.push = push;
                w.rung = Some((rung, step));
                Some(w)
            }
        }
    } else if p99 < lp.descend_below * bound {
        let below = *next.ladder.below_since.get_or_insert(now);
        step_down(policy, ctx, state, (l, &name, held), below, |for_| {
            format!(
                "{} below {:.0}% of the bound {} for {}",
                ctx.p99(p99),
                lp.descend_below * 100.0,
                fmt_ms(bound),
                fmt_secs(for_)
            )
        })
    } else {
        next.ladder.below_since = None;
        None
    }
}

/// One step down the ladder (rung 2's step, then rung 1) once there has been room since
/// `since` for the settle time and the rung has been held that long; `why` says what the room
/// was, given how long it lasted. Rung 1 is kept until the recovery ends: the least intrusive
/// lever, and no flapping.
fn step_down(
    policy: &Policy,
    ctx: &Ctx<'_>,
    state: &EnforcerState,
    (l, name, held): (&super::state::LadderState, &str, f64),
    since: Time,
    why: impl FnOnce(f64) -> String,
) -> Option<Want> {
    let settle = policy.ladder.settle.as_secs_f64();
    let (obs, q) = (ctx.obs, &ctx.obs.op_queue);
    if l.rung < 2 || ctx.now - since < settle || held < settle {
        return None;
    }
    let (rung, step) = if l.step > 0 { (2, l.step - 1) } else { (1, 0) };
    let reason = format!(
        "{}; {name} -> {}",
        why(ctx.now - since),
        rung_name(policy, q, rung, step, None)
    );
    let mut w = if rung == 2 {
        let (values, push) = rung2_values(policy, q, step)?;
        let mut w = Want::new(ActionKind::Descend, changes_to(&values, obs), reason);
        w.push = push;
        w
    } else {
        Want::new(
            ActionKind::Descend,
            down_to_rung1(policy, state, obs),
            reason,
        )
    };
    w.rung = Some((rung, step));
    Some(w)
}

/// Enters the pause (rung 4) at a share from the breach and the memory; `from`: the rung it
/// comes from and why, for the ESCALATE line. The backfill lever's holds (N = 1) stay.
fn enter_pause(
    policy: &Policy,
    ctx: &Ctx<'_>,
    state: &EnforcerState,
    next: &mut EnforcerState,
    notes: &mut DecisionNotes,
    (p99, bound): (f64, f64),
    from: &str,
) -> Option<Want> {
    let lp = &policy.ladder;
    let now = ctx.now;
    let l = next.ladder.clone();
    if l.paused_seconds >= lp.pause.max_total {
        if next.noted.insert("pause_budget".into()) {
            notes.push(ctx.record(
                DecisionEvent::LadderTop,
                format!(
                    "{from}; the pause budget of {} per recovery is used up: holding it",
                    fmt_secs(lp.pause.max_total)
                ),
            ));
        }
        return None;
    }
    let share = pause_entry(policy, state, p99, bound);
    let mut ps = PauseState::start_at(&lp.pause, now, share);
    ps.paused_total = l.paused_seconds;
    let first = pause_step(
        &lp.pause,
        &ps,
        &PauseInput {
            now,
            p99: Some(p99),
            bound,
            window: policy.latency_window.as_secs_f64(),
        },
    );
    next.ladder.rung = PAUSE_RUNG;
    next.ladder.entered(PAUSE_RUNG, now, Some(p99), false);
    next.ladder.since = now;
    next.ladder.below_since = None;
    next.ladder.top = PAUSE_RUNG;
    next.ladder.pause = first.next.or(Some(ps));
    let to = rung_name(policy, &ctx.obs.op_queue, PAUSE_RUNG, l.step, Some(share));
    let kept = match &l.lever {
        Some(lv) => format!(
            "; the backfill lever's holds stay (at most {} PGs backfilling at once)",
            lv.n
        ),
        None => String::new(),
    };
    notes.push(ctx.record(
        DecisionEvent::Escalate,
        format!(
            "{}ESCALATE: {from}; escalating to {to}{}{kept}",
            observe_prefix(policy),
            entry_why(policy, state, now, (p99, bound), share)
        ),
    ));
    watch(next, format!("ESCALATE to {to}"), now, Some(p99));
    None
}

/// From rung 2 back to rung 1: the throttle's values, and rung 2's keys back to the operator's.
fn down_to_rung1(policy: &Policy, state: &EnforcerState, obs: &Observation) -> Vec<Change> {
    let rung1 = throttle_values(policy, obs).unwrap_or_default();
    let mut changes = changes_to(&rung1, obs);
    changes.extend(above_rung1_back(state, obs, &rung1));
    changes
}

/// The level controller holds `osd_max_backfills` above the operator's: recovery first keeps
/// what speeds recovery (SUSPEND), and RESUME or RESTORE gives it back.
pub(super) fn raised_backfills(state: &EnforcerState) -> bool {
    let Some(ours) = state
        .applied
        .as_ref()
        .and_then(|a| a.values.get(MAX_BACKFILLS))
    else {
        return false;
    };
    let theirs = state.original.get(MAX_BACKFILLS).cloned().flatten();
    backfills(Some(ours)) > backfills(theirs.as_deref())
}

/// The keys above rung 1 the enforcer holds (rung 2's, the backfill lever's ops per PG), but
/// those in `set`, each back to the operator's value.
pub(super) fn above_rung1_back(
    state: &EnforcerState,
    obs: &Observation,
    set: &BTreeMap<String, String>,
) -> Vec<Change> {
    let Some(applied) = &state.applied else {
        return Vec::new();
    };
    let raised = raised_backfills(state);
    above_rung1_keys()
        .into_iter()
        .filter(|key| !(raised && [MAX_BACKFILLS, MCLOCK_OVERRIDE].contains(key)))
        .filter(|key| applied.values.contains_key(*key) && !set.contains_key(*key))
        .map(|key| Change {
            key: key.to_string(),
            from: obs.configured.get(key).cloned().flatten(),
            to: state.original.get(key).cloned().flatten(),
        })
        .collect()
}
