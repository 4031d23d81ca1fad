//! Rung 3 in `decide`: entering the backfill lever, its N each cycle ([`super::backfill_limit`]),
//! and the effect that makes the cluster follow it: which PGs to hold and release
//! ([`crate::backfill::plan`], whose safety rules apply as they are, and which keeps a released
//! PG still peering in its place among the N) and the balancer. Pure.
//!
//! Everything held is given back (released, the balancer put back as it was) when the bound is
//! suspended (redundancy at risk), after an OVERRIDE, on BLIND, when the lever is refused (an
//! undersized PG, `require_min_compat_client` below luminous) and whenever the lever is no
//! longer in force; at SHUTDOWN (unless keep-throttle leaves them to the next leader,
//! [`kept_at_exit`]) and at a START or TAKEOVER that does not run the lever by [`give_back`].

use super::backfill_limit::{
    entry_n, is_first_window, lever_step, LeverInput, LeverPolicy, LeverState, LEVER_RUNG,
};
use super::ctx::{observe_prefix, watch, Ctx};
use super::effect::{BackfillEffect, Effect, Planned, Want};
use super::event::{DecisionEvent, DecisionRecord};
use super::observation::{BackfillView, Observation};
use super::policy::{Controller, Mode, OnExit, Policy};
use super::state::{ActionKind, EnforcerState, Held};
use super::types::{Change, Time, RECOVERY_MAX_SINGLE_START, SINGLE_START_DEFAULT};
use crate::backfill::{self, balancer_step, BalancerStep, Forget, Plan, Trim};
use crate::ceph::parse::upmap::{BalancerStatus, PgId};
use crate::units::fmt_ms;

type Notes = Vec<DecisionRecord>;

/// Noted when Ceph refused a lever command for lack of a cephx grant: no lever again in this
/// recovery (what to grant is in the FAILED line and in `status`).
pub const NO_GRANT: &str = "lever_no_grant";

/// "rung 3 (backfill lever: at most 2 PGs backfilling at once)".
pub fn lever_name(n: Option<usize>) -> String {
    match n {
        Some(n) => format!("rung 3 (backfill lever: at most {n} PGs backfilling at once)"),
        None => "rung 3 (backfill lever)".to_string(),
    }
}

pub(super) fn lever_policy(policy: &Policy, (ops_from, ops_to): (u32, u32)) -> LeverPolicy {
    LeverPolicy {
        period: policy.latency_window.as_secs_f64(),
        lower: policy.ladder.descend_below,
        aim: policy.ladder.aim,
        aim_step: super::backfill_limit::AIM_STEP_PER_PG,
        settle: policy.ladder.settle.as_secs_f64(),
        ops_from,
        ops_to,
    }
}

/// The operator's recovery ops per PG (what the state recorded before the enforcer changed
/// them, else what the config database says; unset is Pacific's 1) and the lever's. When the
/// operator's are not known this cycle, or not a number, or already as high: no step up (the
/// pair is equal), though ops already raised still come down.
fn ops(ctx: &Ctx<'_>, next: &EnforcerState, fast: bool) -> (u32, u32) {
    let key = RECOVERY_MAX_SINGLE_START;
    let to = ctx.policy.ladder.ops_per_pg;
    let operator = next.operators(ctx.obs, key);
    let from = match operator {
        Some(None) => Some(SINGLE_START_DEFAULT),
        Some(Some(v)) => v.trim().parse::<u32>().ok(),
        None => None,
    };
    match from {
        Some(from) => (from, to),
        None if fast => (SINGLE_START_DEFAULT, to),
        None => (to, to),
    }
}

/// The config change that makes `osd_recovery_max_single_start` follow the lever: its raised
/// value while the lever's level has it (`LeverState::fast`), the operator's back once it does
/// not (the lever stepped down, ended or gave way to the pause). Reconciled each cycle from
/// what the config database says, so a change deferred by the change limits or failed is
/// asked for again, and the way back needs no memory of its own: the operator's value is in
/// `original` from the first raise. `None`: as wanted already, or not known this cycle.
pub(super) fn ops_want(ctx: &Ctx<'_>, next: &EnforcerState) -> Option<Want> {
    let key = RECOVERY_MAX_SINGLE_START;
    let obs = ctx.obs;
    if !obs.configured_known {
        return None;
    }
    let lever = next.ladder.lever.as_ref();
    let fast = lever.is_some_and(|l| l.fast);
    // In observe mode nothing was set: what the enforcer would hold stands for the cluster.
    let now_v = match next.applied.as_ref() {
        Some(a) if a.simulated => a
            .values
            .get(key)
            .cloned()
            .or_else(|| obs.configured.get(key).cloned().flatten()),
        _ => obs.configured.get(key).cloned().flatten(),
    };
    let (want_v, kind, why) = if fast {
        let n = lever.map_or(1, |l| l.n);
        (
            Some(ctx.policy.ladder.ops_per_pg.to_string()),
            // More recovery: a step down the ladder.
            ActionKind::Descend,
            format!(
                "{}: each backfilling PG may start {} recovery ops at once (the BACKFILL_LIMIT line above says why)",
                lever_name(Some(n)),
                ctx.policy.ladder.ops_per_pg
            ),
        )
    } else {
        let orig = next.original.get(key)?.clone();
        match lever {
            // Less recovery: a step up the ladder.
            Some(l) => (
                orig,
                ActionKind::Escalate,
                format!(
                    "{}: the recovery ops per PG back to the operator's (the BACKFILL_LIMIT line above says why)",
                    lever_name(Some(l.n))
                ),
            ),
            // The lever's way out, as the release of its holds.
            None => (
                orig,
                ActionKind::Descend,
                "the backfill lever no longer in force: the recovery ops per PG back to the operator's".to_string(),
            ),
        }
    };
    if super::types::same_setting(&now_v, &want_v) {
        return None;
    }
    let mut w = Want::new(
        kind,
        vec![Change {
            key: key.to_string(),
            from: now_v,
            to: want_v,
        }],
        why,
    );
    w.rung = Some((next.ladder.rung, next.ladder.step));
    Some(w)
}

/// The N that held the bound in the last recovery that needed the lever.
fn remembered_n(state: &EnforcerState) -> Option<usize> {
    state
        .memory
        .held
        .as_ref()
        .filter(|h| h.rung >= LEVER_RUNG)
        .and_then(|h| h.n)
}

fn view<'a>(ctx: &Ctx<'a>) -> Result<&'a BackfillView, String> {
    match &ctx.obs.backfill {
        Some(Ok(v)) => Ok(v),
        Some(Err(e)) => Err(e.clone()),
        None => Err("the PG states and the OSD map were not read".to_string()),
    }
}

/// Enters rung 3 at an N from the breach and the memory; `Err`: why the lever cannot be used
/// (the ladder goes on to the pause).
pub(super) fn enter(
    ctx: &Ctx<'_>,
    state: &EnforcerState,
    next: &mut EnforcerState,
    breach: (f64, f64),
) -> Result<usize, String> {
    let n = start(ctx, state, next, breach)?;
    let now = ctx.now;
    next.ladder.rung = LEVER_RUNG;
    next.ladder.since = now;
    next.ladder.below_since = None;
    next.ladder.top = next.ladder.top.max(LEVER_RUNG);
    Ok(n)
}

/// The pause is in force without the lever (skipped at the escalation: nothing backfilled yet,
/// as when a recovery starts from the PG log and backfill comes later) and PGs now wait for
/// backfill: the lever joins the pause at an N from the breach, so that the unpaused part of
/// each period no longer lets every PG backfill at once. The rung stays the pause's; once the
/// pause winds down, rung 3 drives N. `Err`: still nothing to hold, or why not.
pub(super) fn join_pause(
    ctx: &Ctx<'_>,
    state: &EnforcerState,
    next: &mut EnforcerState,
    breach: (f64, f64),
) -> Result<usize, String> {
    start(ctx, state, next, breach)
}

/// The PGs and the OSD map, if the lever may hold PGs now; `Err`: why not.
fn usable<'a>(ctx: &Ctx<'a>, next: &EnforcerState) -> Result<&'a BackfillView, String> {
    if !ctx.policy.ladder.backfill_lever {
        return Err("--enforcer.backfill-lever is off".to_string());
    }
    if next.noted.contains(NO_GRANT) {
        return Err("Ceph refused its commands in this recovery for lack of a cephx grant (see the PERMISSION DENIED line)".to_string());
    }
    let v = view(ctx).map_err(|e| format!("cannot see which PGs backfill ({e})"))?;
    if let Some(refusal) = backfill::lever_refusal(&v.pgs, &v.map, &next.backfill) {
        return Err(refusal.to_string());
    }
    if let Err(e) = &v.balancer {
        return Err(format!(
            "the mgr balancer's state cannot be read ({e}): it must be paused while PGs are held"
        ));
    }
    Ok(v)
}

/// The level controller's lever: at most `n` PGs backfill at once from now on (the lever
/// started if it was not in force). `Err`: why the lever cannot be used now; nothing changed.
pub(super) fn follow(ctx: &Ctx<'_>, next: &mut EnforcerState, n: usize) -> Result<(), String> {
    if let Some(l) = next.ladder.lever.as_mut() {
        if l.n != n {
            l.n = n;
            l.period_start = ctx.now;
        }
        return Ok(());
    }
    usable(ctx, next)?;
    next.ladder.lever = Some(LeverState::start(n, ctx.now));
    next.ladder.entered(LEVER_RUNG, ctx.now, ctx.obs.p99, false);
    Ok(())
}

/// The level controller left the lever's levels: what the lever holds is released at its pace
/// (room under an N as large as the cluster's PGs), not all at once, which on the lab
/// re-peered every held PG in the same window (505 ms against a bound of 133); the lever ends
/// once nothing is held.
pub(super) fn wind_down(ctx: &Ctx<'_>, next: &mut EnforcerState) {
    if next.ladder.lever.is_none() {
        return;
    }
    if next.backfill.held.is_empty() {
        end(next, ctx.now);
        return;
    }
    let all = view(ctx).map_or(usize::MAX / 2, |v| v.pgs.len().max(1));
    if let Some(l) = next.ladder.lever.as_mut() {
        l.n = all;
    }
}

/// Whether the loop reads the lever's view (`pg dump pgs_brief`, `osd dump`, `balancer
/// status`) this cycle: the lever is in force or holds something, or it may be entered soon. The
/// ladder may enter it from rung 1 on; the level controller counts the PGs backfilling for its
/// list at the recovery's start, and again only in the cycle its position is judged (once a
/// latency window), and in every cycle its level in force asks for the lever while the lever
/// is not yet in force (it comes in as soon as it can: after copies were missing, after a read
/// that failed): `pg dump` is the heaviest read, a mgr call listing every PG. `now` is the
/// read's time, never before the cycle's: a cycle that `decide` judges has its view.
pub(super) fn view_needed(
    policy: &Policy,
    state: &EnforcerState,
    obs: &Observation,
    now: Time,
) -> bool {
    let l = &policy.ladder;
    let may_enter = l.backfill_lever
        && l.max_rung >= LEVER_RUNG
        && obs.stale.is_none()
        && obs.recovery_active()
        && match l.controller {
            Controller::Ladder => state.ladder.rung >= 1,
            Controller::Levels => state.levels.as_ref().is_none_or(|run| {
                run.position.due(policy.latency_window.as_secs_f64(), now)
                    || (run.levels.get(run.position.at).backfilling_pgs.is_some()
                        && !obs.copies_missing())
            }),
        };
    may_enter || state.ladder.lever.is_some() || state.lever_holds()
}

/// How many PGs are backfilling now (not waiting for it), if they can be seen: what the
/// cluster's own limits let run at once.
pub(super) fn backfilling_now(ctx: &Ctx<'_>) -> Option<usize> {
    view(ctx)
        .ok()
        .map(|v| v.pgs.iter().filter(|p| p.has_state("backfilling")).count())
}

/// The lever's state at an N from the breach and the memory, if there is something to hold;
/// its action is noted with the p99 that led to it (for the EFFECT line one window later).
fn start(
    ctx: &Ctx<'_>,
    state: &EnforcerState,
    next: &mut EnforcerState,
    (p99, bound): (f64, f64),
) -> Result<usize, String> {
    let v = usable(ctx, next)?;
    let backfilling = v.backfilling();
    let first = first_window(ctx, next.ladder.started);
    let n = entry_n(p99 / bound, backfilling, remembered_n(state), first);
    let plan = backfill::plan(&v.pgs, &v.map, &next.backfill, n, ctx.now);
    if plan.hold.is_empty() {
        let why = if backfilling == 0 {
            "no PG waits for or does backfill (recovery from the PG log, or degraded objects only): nothing to hold".to_string()
        } else if backfilling <= n {
            format!("{backfilling} PGs backfill, at most {n} would: nothing to hold")
        } else {
            let refused: Vec<String> = plan
                .refused
                .iter()
                .take(3)
                .map(|(id, r)| format!("{id} {r}"))
                .collect();
            format!(
                "no PG of the {backfilling} that backfill can be held ({}{})",
                refused.join("; "),
                if plan.refused.len() > 3 { "; ..." } else { "" }
            )
        };
        return Err(why);
    }
    next.ladder.lever = Some(LeverState::start(n, ctx.now));
    next.ladder.entered(LEVER_RUNG, ctx.now, Some(p99), false);
    Ok(n)
}

/// The breach's window holds the peering of the recovery that started at `started` (see
/// [`entry_n`]).
fn first_window(ctx: &Ctx<'_>, started: Option<Time>) -> bool {
    let window = ctx.policy.latency_window.as_secs_f64();
    is_first_window(started, ctx.now, window)
}

/// Why the N is what it is, for the ESCALATE line; `started`: when this recovery started (the
/// next state's: it may have started this cycle).
pub(super) fn entry_why(
    state: &EnforcerState,
    started: Option<Time>,
    ctx: &Ctx<'_>,
    p99: f64,
    bound: f64,
) -> String {
    let backfilling = view(ctx).map(BackfillView::backfilling).unwrap_or(0);
    let from_breach = entry_n(p99 / bound, backfilling, None, first_window(ctx, started));
    match remembered_n(state) {
        Some(r) if r < from_breach => format!(
            " ({backfilling} PGs backfill now; {r} held the bound in the last recovery of this cluster)"
        ),
        _ if from_breach > entry_n(p99 / bound, backfilling, None, false) => format!(
            " ({backfilling} PGs backfill now; p99 {:.1}x the bound over the recovery's first window, mostly its own peering: halved {} times at most)",
            p99 / bound,
            super::backfill_limit::FIRST_WINDOW_HALVINGS
        ),
        _ => format!(
            " ({backfilling} PGs backfill now; p99 {:.1}x the bound)",
            p99 / bound
        ),
    }
}

/// What rung 3 does next.
pub(super) enum AtRung {
    Stay,
    /// N = 1 did not hold the bound for the settle time: the pause, keeping the holds.
    Escalate(String),
    /// The lever ended (no longer needed, or refused now): one rung down, or to the pause.
    Ended {
        why: String,
        refused: bool,
    },
}

/// One cycle on rung 3: N from the p99 of the period that ended.
pub(super) fn at_rung(
    ctx: &Ctx<'_>,
    next: &mut EnforcerState,
    notes: &mut Notes,
    bound: f64,
) -> AtRung {
    let policy = ctx.policy;
    let now = ctx.now;
    let Some(ls) = next.ladder.lever.clone() else {
        return AtRung::Ended {
            why: "no backfill limit in force".to_string(),
            refused: false,
        };
    };
    match view(ctx) {
        Ok(v) => {
            if let Some(r) = backfill::lever_refusal(&v.pgs, &v.map, &next.backfill) {
                return AtRung::Ended {
                    why: r.to_string(),
                    refused: true,
                };
            }
        }
        // Not seen this cycle: N stays, nothing is held or released on old data.
        Err(_) => return AtRung::Stay,
    }
    // The last recovery of this cluster needed the pause: N = 1 gets no settle time.
    if let (1, false, Some(p99), Some(h)) = (
        ls.n,
        ls.fast,
        ctx.obs.p99.filter(|p| *p > bound),
        next.memory
            .held
            .as_ref()
            .filter(|h| h.rung >= super::backfill_limit::PAUSE_RUNG),
    ) {
        return AtRung::Escalate(format!(
            "{} left {} > bound {}; the last recovery of this cluster needed the pause to hold the bound ({}), so N = 1 is not given {}",
            lever_name(Some(1)),
            ctx.p99(p99),
            fmt_ms(bound),
            crate::units::fmt_when(h.at, now),
            crate::units::fmt_secs(policy.ladder.settle.as_secs_f64())
        ));
    }
    let held = held_count(ctx, next, ls.n);
    let lp = lever_policy(policy, ops(ctx, next, ls.fast));
    let step = lever_step(
        &lp,
        &ls,
        &LeverInput {
            now,
            p99: ctx.obs.p99,
            bound,
            held,
        },
    );
    if let Some(n) = step.held {
        next.memory.held = Some(Held {
            at: now,
            rung: LEVER_RUNG,
            share: None,
            n: Some(n),
        });
    }
    if step.escalate {
        let p99 = ctx.obs.p99.unwrap_or(0.0);
        // Say what it means for this cluster: on-call reads why recovery is now paused, and
        // that no setting of the lever would have held the bound (on the lab, a bound of
        // 98 ms at 2x a 49-ms baseline sat at one PG's cost).
        return AtRung::Escalate(format!(
            "{} left {} > {} for {} at N = 1 with {} recovery op{} per PG, the least backfill the lever runs: on this cluster even one backfilling PG costs clients more than the bound allows, so the pause shares out the time",
            lever_name(Some(1)),
            ctx.p99(p99),
            lp.over_what(p99, bound, 1),
            crate::units::fmt_secs(now - ls.at_one_since.unwrap_or(now)),
            lp.ops_from,
            if lp.ops_from == 1 { "" } else { "s" }
        ));
    }
    match step.next {
        Some(n) => {
            if let Some(note) = step.note {
                notes.push(ctx.record(
                    DecisionEvent::BackfillLimit,
                    format!("{}BACKFILL_LIMIT {note}", observe_prefix(policy)),
                ));
                if (n.n, n.fast) != (ls.n, ls.fast) {
                    watch(
                        next,
                        format!(
                            "BACKFILL_LIMIT {}",
                            lp.change((ls.n, ls.fast), (n.n, n.fast))
                        ),
                        now,
                        ctx.obs.p99,
                    );
                }
            }
            next.ladder.lever = Some(n);
            AtRung::Stay
        }
        None => AtRung::Ended {
            why: step
                .note
                .unwrap_or_else(|| "backfill limit over".to_string()),
            refused: false,
        },
    }
}

/// Client p99 over the last window and what it is over (the aim at N, the same N is judged
/// against, or the bound), when p99 is above that aim.
fn over_aim(ctx: &Ctx<'_>, n: usize) -> Option<(f64, String)> {
    let bound = ctx.bound?;
    // The ops per PG do not move the aim.
    let lp = lever_policy(ctx.policy, (1, 1));
    ctx.obs
        .p99
        .filter(|p| *p > bound * lp.aim_at(n))
        .map(|p| (p, lp.over_what(p, bound, n)))
}

/// PGs held now: in enforce mode those the state records; in observe mode those it would hold.
fn held_count(ctx: &Ctx<'_>, next: &EnforcerState, n: usize) -> usize {
    if ctx.policy.mode == Mode::Enforce {
        return next.backfill.held.len();
    }
    view(ctx).map_or(0, |v| v.backfilling().saturating_sub(n))
}

/// Ends the lever: nothing is held from now on (the effect releases what is).
pub(super) fn end(next: &mut EnforcerState, now: f64) {
    if next.ladder.lever.take().is_some() {
        next.ladder.acted.remove(&LEVER_RUNG);
        if next.ladder.rung == LEVER_RUNG {
            next.ladder.rung = if next.applied.as_ref().is_some_and(|a| {
                super::types::rung2_keys()
                    .iter()
                    .any(|k| a.values.contains_key(*k))
            }) {
                2
            } else {
                1
            };
            next.ladder.since = now;
            next.ladder.below_since = None;
        }
    }
}

/// The lever's effect for this cycle, from `next` (after the ladder moved): holds and releases
/// towards at most N backfilling, or everything back. Entries gone from the OSD map (or changed
/// by someone) are dropped from the record here, with a line.
/// `give_back`: everything goes back, and why (decided by the caller: BLIND, OVERRIDE,
/// redundancy at risk); otherwise N is followed, and with no N in force everything goes back
/// too. On stale data without `give_back` nothing is held or released.
pub(super) fn plan_effect(
    ctx: &Ctx<'_>,
    next: &mut EnforcerState,
    notes: &mut Notes,
    give_back: Option<String>,
) -> Option<Planned> {
    let policy = ctx.policy;
    if next.ladder.lever.is_none() && next.backfill.is_empty() {
        return None;
    }
    if ctx.obs.stale.is_some() && give_back.is_none() {
        return None;
    }
    let give_back = give_back.or_else(|| {
        next.ladder
            .lever
            .is_none()
            .then(|| "the backfill limit is not in force".to_string())
    });
    let v = match view(ctx) {
        Ok(v) => v,
        Err(e) => {
            let held = next.backfill.held.len();
            if held > 0 {
                ctx.note_once(next, notes, "lever_blind", DecisionEvent::BackfillLimit, || {
                    format!(
                        "BACKFILL_LIMIT cannot see the PGs it holds ({e}): {held} PGs stay held until the next cycle that reads them"
                    )
                });
            }
            return None;
        }
    };
    next.noted.remove("lever_blind");
    let n = next.ladder.lever.as_ref().map(|l| l.n);
    let (mut hold, release, (forget, trim), why, refusal) = match (&give_back, n) {
        (None, Some(n)) => {
            // A PG released lately and still peering keeps its place (the plan counts it); the
            // outcome records each release Ceph did.
            let p = backfill::plan(&v.pgs, &v.map, &next.backfill, n, ctx.now);
            next.backfill.room(p.has_room(), ctx.now);
            note_unheld(ctx, next, notes, &p, n);
            // With nothing backfilling, p99 over the aim is not the recovery's doing: one PG
            // still goes, or a client burst would stop the recovery altogether.
            let moving = p.backfilling + p.on_the_way.len() > 0;
            // The level controller judges N itself: releases follow it.
            let over_aim = over_aim(ctx, n).filter(|_| {
                p.has_room() && moving && policy.ladder.controller == Controller::Ladder
            });
            if let Some((p99, what)) = &over_aim {
                ctx.note_once(
                    next,
                    notes,
                    format!("lever_release_wait:{n}"),
                    DecisionEvent::BackfillLimit,
                    || {
                        format!(
                            "{}BACKFILL_LIMIT: N = {n} has room, but releases wait while client p99 write {} is above the {what}: N is judged first",
                            observe_prefix(policy),
                            fmt_ms(*p99)
                        )
                    },
                );
            }
            let p = p
                .spaced(&next.backfill, ctx.now, backfill::RELEASE_GAP)
                .held_back(over_aim.is_some());
            next.backfill.keep_releasing(&p.on_the_way);
            let why = match &p.refusal {
                Some(r) => format!("the backfill lever stands down: {r}"),
                None => lever_name(Some(n)),
            };
            (p.hold, p.release, (p.forget, p.trim), why, p.refusal)
        }
        _ => {
            let u = backfill::undo(&v.map, &next.backfill, None);
            if let Some(other) = &u.other_cluster {
                ctx.note_once(next, notes, "lever_other_cluster", DecisionEvent::BackfillLimit, || {
                    format!("BACKFILL_LIMIT: the enforcer's record of held PGs is of cluster {other}, this is {}: nothing is touched", v.map.fsid)
                });
                return None;
            }
            let why = give_back.unwrap_or_default();
            (Vec::new(), u.remove, (u.forget, u.trim), why, None)
        }
    };
    forget_entries(ctx, next, notes, &forget, v.map.epoch);
    trim_entries(ctx, next, notes, &trim);
    let ours_after = next.backfill.held.len() - release.len() + hold.len();
    let balancer = match &v.balancer {
        Ok(Some(b)) => balancer_step(b, &next.backfill, ours_after > 0),
        Ok(None) => {
            if !hold.is_empty() {
                ctx.note_once(next, notes, "lever_no_balancer", DecisionEvent::Backfill, || {
                    "BACKFILL: the mgr offers no balancer module (ceph balancer status: command not known): nothing can remove the lever's entries, so none is paused".to_string()
                });
            }
            if let Some(b) = next.backfill.balancer.take() {
                notes.push(ctx.record(
                    DecisionEvent::BackfillLimit,
                    gone_balancer("BACKFILL_LIMIT", &b),
                ));
            }
            BalancerStep::Nothing
        }
        Err(e) => {
            if !hold.is_empty() {
                ctx.note_once(next, notes, "lever_balancer_unknown", DecisionEvent::BackfillLimit, || {
                    format!("BACKFILL_LIMIT holds no new PG: the mgr balancer's state cannot be read ({e}) and it must be paused while PGs are held")
                });
                hold.clear();
            }
            BalancerStep::Nothing
        }
    };
    let backfilling = v
        .pgs
        .iter()
        .filter(|p| backfill::plan::backfills(p))
        .filter(|p| {
            p.pgid
                .parse::<PgId>()
                .is_ok_and(|id| !next.backfill.held.contains_key(&id))
        })
        .count();
    let effect = BackfillEffect {
        backfilling: (
            backfilling,
            backfilling - hold.len().min(backfilling) + release.len(),
        ),
        restore: next.backfill.restores(&release),
        hold,
        release,
        balancer,
        fsid: v.map.fsid.clone(),
        epoch: v.map.epoch,
        why,
        lifecycle: None,
    };
    if let Some(r) = refusal {
        ctx.note_once(
            next,
            notes,
            format!("lever_refused:{r}"),
            DecisionEvent::LadderSkip,
            || {
                format!(
                    "{}{} stands down: {r}; what it holds is released",
                    observe_prefix(policy),
                    lever_name(None)
                )
            },
        );
    }
    planned(effect)
}

/// The kind of note [`note_unheld`] keeps.
const UNHELD: &str = "lever_unheld";

/// When PGs the lever cannot hold keep more than N backfilling, which and why, once per set:
/// on-call sees "at most N" with more PGs backfilling, and this says why.
fn note_unheld(ctx: &Ctx<'_>, next: &mut EnforcerState, notes: &mut Notes, p: &Plan, n: usize) {
    if p.refusal.is_some() || p.backfilling_after <= n || p.refused.is_empty() {
        return;
    }
    let mut refused = p.refused.clone();
    refused.sort_by_key(|(id, _)| *id);
    let ids: Vec<String> = refused.iter().map(|(id, _)| id.to_string()).collect();
    let why: Vec<String> = refused
        .iter()
        .take(3)
        .map(|(id, r)| format!("{id} {r}"))
        .collect();
    // One key for the set now, its size and a digest of its PGs: the line is said again when
    // the set changes, and the stored state keeps no list of PGs (an OSD drained with `osd out`
    // gives a new set each cycle; with 10,000 PGs the ids took 60 KB a cycle).
    let key = format!(
        "{UNHELD}:{}:{:016x}",
        ids.len(),
        super::state::digest(&ids.join(","))
    );
    if !next.noted.contains(&key) {
        next.noted.retain(|k| !k.starts_with(UNHELD));
    }
    ctx.note_once(
        next,
        notes,
        key,
        DecisionEvent::BackfillLimit,
        || {
            format!(
                "{}BACKFILL_LIMIT: N = {n}, but {} PGs backfill: {} of them cannot be held ({}{}); they backfill beside the N",
                observe_prefix(ctx.policy),
                p.backfilling_after,
                p.refused.len(),
                why.join("; "),
                if p.refused.len() > 3 { "; ..." } else { "" }
            )
        },
    );
}

/// A balancer the lever paused and the mgr no longer offers (its module failed since): nothing
/// can put it back now, so the record forgets it with this line, which says what to do once
/// the module is back.
fn gone_balancer(when: &str, before: &BalancerStatus) -> String {
    format!(
        "{when}: the mgr balancer the lever paused (it was {before}) is no longer offered by the mgr (ceph balancer status: command not known); once its module is back: {}",
        if before.active { format!("ceph balancer mode {}; ceph balancer on", before.mode) } else { format!("ceph balancer mode {}", before.mode) }
    )
}

/// The effect with what must be stored before it (a hold, the balancer's state before it is
/// paused); `None` when there is nothing for Ceph to do.
pub(super) fn planned(effect: BackfillEffect) -> Option<Planned> {
    if effect.is_empty() {
        return None;
    }
    let first = !effect.hold.is_empty()
        || matches!(effect.balancer, BalancerStep::Pause { remember: Some(_) });
    Some(Planned {
        persist_first: first
            .then_some("before holding PGs (pg-upmap-items) or pausing the balancer"),
        effect: Effect::Backfill(effect),
    })
}

fn forget_entries(
    ctx: &Ctx<'_>,
    next: &mut EnforcerState,
    notes: &mut Notes,
    forget: &[(PgId, Forget)],
    epoch: u64,
) {
    for (id, why) in forget {
        if !may_forget(next, id, why, epoch) {
            continue;
        }
        if next.backfill.held.remove(id).is_some() && says_forget(why) {
            notes.push(forgot(ctx, *id, why));
        }
    }
    next.backfill.tidy_at(ctx.now);
}

/// Whether dropping an entry for `why` is worth a line: not for the lever's own course (its
/// entry gone or theirs back after a release or a failed hold), but when someone changed the
/// items or the PG is gone (the cluster changed under the hold).
fn says_forget(why: &Forget) -> bool {
    !matches!(why, Forget::Gone | Forget::Restored { .. })
}

/// "BACKFILL_LIMIT: 9.0 is no longer held by the enforcer: ...": an entry dropped from the
/// record without a command (also on the outcome of a release Ceph refused with ENOENT).
pub(super) fn forgot(ctx: &Ctx<'_>, id: PgId, why: &Forget) -> DecisionRecord {
    ctx.record(
        DecisionEvent::BackfillLimit,
        format!("BACKFILL_LIMIT: {id} is no longer held by the enforcer: {why}"),
    )
}

/// Saved items naming OSDs that are gone come out of the record before the releases (whose
/// commands are built from it), with a line each.
fn trim_entries(ctx: &Ctx<'_>, next: &mut EnforcerState, notes: &mut Notes, trim: &[(PgId, Trim)]) {
    for (id, t) in trim {
        if !next.backfill.trim(*id, &t.osds).is_empty() {
            notes.push(trimmed(ctx, *id, t));
        }
    }
}

/// "BACKFILL_LIMIT: 2.b: osd.42 no longer in the OSD map ...".
pub(super) fn trimmed(ctx: &Ctx<'_>, id: PgId, t: &Trim) -> DecisionRecord {
    ctx.record(
        DecisionEvent::BackfillLimit,
        format!("BACKFILL_LIMIT: {id}: {t}"),
    )
}

/// Whether an entry the OSD map does not show as ours may leave the record: not when it is
/// missing from a map no newer than the one its hold was planned from (a map that cannot show
/// it yet, e.g. from a monitor that lags): it stays recorded until a newer map says. A PG
/// that is gone is judged the same way: the map its hold was planned from had it.
fn may_forget(next: &EnforcerState, id: &PgId, why: &Forget, epoch: u64) -> bool {
    match (why, next.backfill.held.get(id)) {
        (
            Forget::Gone | Forget::Restored { .. } | Forget::PoolGone | Forget::MergedAway { .. },
            Some(h),
        ) => epoch > h.epoch,
        _ => true,
    }
}

/// SHUTDOWN with `--enforcer.on-exit keep-throttle` (rolling restarts, another instance taking
/// over at once) while the lever is in force: its holds stay in the stored record for the next
/// leader, which takes them on and releases them at the lever's pace, instead of every held PG
/// re-peering and starting its backfill in the same minute. With `restore` (the default), in
/// observe mode, or with the lever out of force they go back.
pub(super) fn kept_at_exit(policy: &Policy, state: &EnforcerState) -> bool {
    policy.on_exit == OnExit::KeepThrottle
        && policy.mode == Mode::Enforce
        && state.ladder.lever.is_some()
        && !state.backfill.is_empty()
}

/// At START (a record left by a crash), SHUTDOWN and TAKEOVER: everything the record holds back,
/// and the balancer as it was, from a fresh view of the cluster. Observe mode only says so.
pub fn give_back(
    policy: &Policy,
    state: &EnforcerState,
    view: &BackfillView,
    when: &'static str,
) -> (EnforcerState, Option<Planned>, Vec<String>) {
    let mut next = state.clone();
    let mut lines = Vec::new();
    if state.backfill.is_empty() {
        return (next, None, lines);
    }
    if policy.mode != Mode::Enforce {
        lines.push(format!(
            "{when}: the state says the enforcer (enforce mode) holds {} PGs with pg-upmap-items; observe mode does not touch the cluster: `ceph-recovery-budget backfill release` does it by hand",
            state.backfill.held.len()
        ));
        return (next, None, lines);
    }
    let u = backfill::undo(&view.map, &state.backfill, None);
    if let Some(other) = u.other_cluster {
        lines.push(format!(
            "{when}: the record of held PGs is of cluster {other}, this is {}: nothing is touched",
            view.map.fsid
        ));
        return (next, None, lines);
    }
    for (id, why) in &u.forget {
        if may_forget(&next, id, why, view.map.epoch)
            && next.backfill.held.remove(id).is_some()
            && says_forget(why)
        {
            lines.push(format!(
                "{when}: {id} is no longer held by the enforcer: {why}"
            ));
        }
    }
    // The releases below put back only the items Ceph still takes.
    for (id, t) in &u.trim {
        lines.push(format!("{when}: {id}: {t}"));
    }
    next.backfill.apply_trims(&u.trim);
    let balancer = match &view.balancer {
        Ok(Some(b)) => balancer_step(b, &next.backfill, false),
        Ok(None) => {
            if let Some(b) = next.backfill.balancer.take() {
                lines.push(gone_balancer(when, &b));
            }
            BalancerStep::Nothing
        }
        Err(e) => {
            if next.backfill.balancer.is_some() {
                lines.push(format!("{when}: the mgr balancer's state cannot be read ({e}); it stays paused: `ceph balancer on` if it was on"));
            }
            BalancerStep::Nothing
        }
    };
    let effect = BackfillEffect {
        hold: Vec::new(),
        restore: next.backfill.restores(&u.remove),
        release: u.remove,
        balancer,
        fsid: view.map.fsid.clone(),
        epoch: view.map.epoch,
        why: "the enforcer leaves no PG held".to_string(),
        backfilling: (view.backfilling(), view.backfilling()),
        lifecycle: Some(when),
    };
    next.backfill.tidy();
    (next, planned(effect), lines)
}
