//! The level controller in the loop (`--enforcer.controller levels`). Each cycle of a recovery
//! under the bound, the position moves on this recovery's list ([`super::controller`]) and the
//! level in force becomes what the cluster is asked for:
//! - its `osd` settings, as the difference from what Ceph reports ([`super::reconcile::plan`]),
//!   one config action whose originals `decide` records before anything changes;
//! - the backfill lever's N (`lever::follow`: its holds, its record and its balancer pause
//!   stay the lever's own);
//! - the pause share (the duty cycle of `pause::cycle`, its flags planned by `flags`).
//!
//! The ladder's safety rules stay around this, where they are: redundancy first (`decide`
//! suspends before this is called and gives the lever's holds back), no pause while copies
//! are missing, BLIND, OVERRIDE (a key changed by hand: hands off), the restore of exactly what
//! the operator had when the recovery ends. Pure, like `decide`, which calls it.

use super::controller::{Decision, Position, Progress, Run, Tuning, Why};
use super::list::{levels, Allowed, Facts, Level, Levels, Queue};
use super::reconcile::{desired, plan, Owned, LEVEL_KEYS, MAX_BACKFILLS, MCLOCK_OVERRIDE};
use crate::ceph::parse::versions::LimitUnit;
use crate::enforcer::backfill_limit::{LEVER_RUNG, PAUSE_RUNG};
use crate::enforcer::ctx::{observe_prefix, Ctx};
use crate::enforcer::effect::Want;
use crate::enforcer::event::{DecisionEvent, DecisionRecord, LevelMove};
use crate::enforcer::observation::{LimitGate, OpQueue};
use crate::enforcer::pause::{self, PauseState};
use crate::enforcer::policy::Policy;
use crate::enforcer::state::{ActionKind, EnforcerState, Phase};
use crate::enforcer::types::{backfills, MCLOCK_PROFILE_KEY};
use crate::enforcer::{ladder, lever};
use crate::tuning::report::fmt_magnitude as fmt_rate;
use crate::units::fmt_ms;

type Notes = Vec<DecisionRecord>;

/// One cycle of the level controller while the bound applies; the config change the level in
/// force asks for, if any (the lever and the pause are set in `next`).
pub(in crate::enforcer) fn step(
    ctx: &Ctx<'_>,
    state: &EnforcerState,
    next: &mut EnforcerState,
    notes: &mut Notes,
    bound: f64,
) -> Option<Want> {
    let policy = ctx.policy;
    let now = ctx.now;
    let allowed = allowed(policy, next);
    let mut run = match next.levels.take() {
        Some(run) => run,
        None => {
            let facts = match facts(ctx, next) {
                Ok(f) => f,
                Err(why) => {
                    ctx.note_once(next, notes, "levels_wait", DecisionEvent::LadderWait, || {
                        format!("LEVEL: the list of levels waits: {why}; nothing is changed until it is known")
                    });
                    return None;
                }
            };
            let list = levels(&facts, &allowed);
            let held = next.memory.level_held.as_ref();
            let position = Position::remembering(&list, held.map(|h| &h.level), now);
            let memory = match (held, position.remembered) {
                (Some(h), Some(m)) => format!(
                    "; a window over the bound moves at least to {} ({} held the bound in the recovery that ended {})",
                    list.get(m).describe(),
                    h.level.describe(),
                    crate::units::fmt_when(h.at, now)
                ),
                _ => String::new(),
            };
            notes.push(ctx.record(
                DecisionEvent::Level,
                format!(
                    "{}LEVEL: {} levels for this recovery, from {} (the fastest allowed, --enforcer.max-level {}) to {}; starting at the operator's settings{memory}",
                    observe_prefix(policy),
                    list.list.len(),
                    list.get(list.top()).describe(),
                    policy.ladder.max_level,
                    list.get(list.bottom()).describe()
                ),
            ));
            Run {
                position,
                levels: list,
                facts,
            }
        }
    };
    // The operator's settings went back while the enforcer could not see (BLIND): judged
    // afresh from them, as after a restore.
    if state.phase == Phase::Holding
        && state.original.is_empty()
        && state.ladder.lever.is_none()
        && run.position.at != run.levels.home
    {
        // What this recovery learned stays (the level that held, the memory spent or not).
        run.position = Position {
            held: run.position.held,
            memory_spent: run.position.memory_spent,
            ..Position::start(&run.levels, now)
        };
    }
    remake(ctx, &allowed, &mut run, notes);
    // The memory on the list in force, from what is remembered (nothing with
    // `--enforcer.memory off`, whatever a stored position said), until a window over the
    // bound spent it.
    run.position.remembered = match &next.memory.level_held {
        Some(h) if !run.position.memory_spent => run.levels.restraining_as_much(&h.level),
        _ => None,
    };
    let reduced = ctx.obs.copies_missing();
    let in_force = run.levels.get(run.position.at);
    let unrealized = reduced && (in_force.backfilling_pgs.is_some() || in_force.pause_share > 0.0);
    let tuning = tuning(policy);
    // Before this cycle's reading: its deadline, once known, is said once.
    let known = run.position.deadline(&tuning);
    // What is seen while redundancy comes first, or while the level's holds and pause cannot
    // be in force (copies missing), is not this level's.
    let not_the_level =
        state.phase == Phase::Suspended || state.phase == Phase::Holding || unrealized;
    // The recovery's progress, for the time limit: the objects Ceph counts left only while no
    // PG is held (a held PG's objects are not misplaced then).
    let obs = ctx.obs;
    run.position.read(
        &run.levels,
        Progress {
            remaining: state
                .ladder
                .lever
                .is_none()
                .then_some(obs.degraded_objects + obs.misplaced_objects),
            rate: obs.ceph_recovery_rate,
            level_in_force: !not_the_level,
        },
        now,
    );
    // Judged afresh afterwards.
    if not_the_level {
        run.position.afresh(now);
    }

    let d = run
        .position
        .step(&run.levels, &tuning, ctx.obs.p99, bound, now);
    if let (None, Some(dl)) = (known, run.position.deadline(&tuning)) {
        let start = dl.start;
        let mut rec = ctx.record(
            DecisionEvent::Level,
            format!(
                "{}LEVEL: at the operator's settings this recovery runs at {} obj/s: its {:.0} objects would take {}; --enforcer.max-slowdown {} lets it take until {}, {} from its start: a level too slow for the objects left to end by then is left, whatever client p99",
                observe_prefix(policy),
                fmt_rate(dl.reference),
                dl.work,
                crate::units::fmt_secs(dl.at_operators - start),
                policy.ladder.max_slowdown,
                crate::units::fmt_when(dl.by, now),
                crate::units::fmt_secs(dl.by - start)
            ),
        );
        rec.deadline = Some(dl);
        notes.push(rec);
    }
    if d.to != d.from {
        notes.push(move_record(ctx, &run.levels, &d));
    } else if let Why::BelowTooSlow { rate, need } = d.why {
        let key = format!("level_slow:{}", d.to + 1);
        ctx.note_once(next, notes, key, DecisionEvent::Level, || {
            format!(
                "{}LEVEL: client p99 is over the aim, but {} recovers {} obj/s and the objects left need {} obj/s to end within --enforcer.max-slowdown {}: held at {}",
                observe_prefix(policy),
                run.levels.get(d.to + 1).describe(),
                fmt_rate(rate),
                fmt_rate(need),
                policy.ladder.max_slowdown,
                run.levels.get(d.to).describe()
            )
        });
    } else if matches!(d.why, Why::TimeUp) {
        ctx.note_once(next, notes, "level_time_up", DecisionEvent::Level, || {
            format!(
                "{}LEVEL: the time --enforcer.max-slowdown {} allows this recovery is spent: {} until it ends, whatever client p99",
                observe_prefix(policy),
                policy.ladder.max_slowdown,
                run.levels.get(d.to).describe()
            )
        });
    } else if matches!(d.why, Why::AtBottom) {
        let key = format!("level_bottom:{}", d.to);
        ctx.note_once(next, notes, key, DecisionEvent::LadderTop, || {
            format!(
                "{}LEVEL: {} is the least recovery allowed and client p99 is still over the aim: held (a higher --enforcer.pause-max-share or --enforcer.max-rung would allow less)",
                observe_prefix(policy),
                run.levels.get(d.to).describe()
            )
        });
    }
    let level = run.levels.get(run.position.at).clone();
    let (home, queue) = (run.levels.home, run.facts.queue);
    next.levels = Some(run);
    realize(ctx, next, notes, &level, (d, home), (queue, reduced))
}

/// The controller's constants with the operator's aim, time limit and window.
pub(crate) fn tuning(policy: &Policy) -> Tuning {
    Tuning {
        aim: policy.ladder.aim,
        max_slowdown: policy.ladder.max_slowdown.0,
        ..Tuning::for_window(policy.latency_window.as_secs_f64())
    }
}

/// What the operator's settings allow the list (`--enforcer.max-level`, `--enforcer.max-rung`,
/// `--enforcer.backfill-lever`, the pause's maximum share, the wpq sleeps), and no pause once
/// someone took the enforcer's pause flags off by hand in this recovery.
fn allowed(policy: &Policy, next: &EnforcerState) -> Allowed {
    let lp = &policy.ladder;
    Allowed {
        ceiling: lp.max_level,
        lever: lp.backfill_lever && lp.max_rung >= LEVER_RUNG,
        pause_max_share: if lp.max_rung >= PAUSE_RUNG && !next.ladder.no_pause {
            lp.pause.max_share
        } else {
            0.0
        },
        recovery_sleeps: if lp.max_rung >= 2 {
            lp.recovery_sleeps.clone()
        } else {
            Vec::new()
        },
    }
}

/// The cluster, for the list, read once at the recovery's start; `Err`: what is not known yet.
fn facts(ctx: &Ctx<'_>, next: &EnforcerState) -> Result<Facts, String> {
    let obs = ctx.obs;
    let queue = match &obs.op_queue {
        OpQueue::Mclock => Queue::Mclock {
            // Quincy 17.2.6 and later read limits as shares, and honour osd_max_backfills
            // with the override.
            backfills_honoured: match obs.mclock_limit_gate(LimitUnit::Share) {
                LimitGate::Reads => true,
                LimitGate::Refused(_) => false,
                LimitGate::Unknown(why) => return Err(why),
            },
        },
        OpQueue::Other(_) => Queue::Wpq,
        q => return Err(format!("the OSDs' op queue is {}", q.describe())),
    };
    if !obs.configured_known {
        return Err("the configured values (ceph config dump) were not read".to_string());
    }
    let running = {
        let mut seen: Vec<&String> = obs.osd_profiles.values().collect();
        seen.dedup();
        (seen.len() == 1).then(|| seen[0].clone())
    };
    let operators = |key| next.operators(obs, key).flatten();
    let operator_profile = match (&queue, operators(MCLOCK_PROFILE_KEY), running) {
        (Queue::Wpq, _, _) => String::new(),
        (_, Some(p), _) | (_, None, Some(p)) => p,
        (_, None, None) => {
            return Err("the mClock profile the OSDs run is not known (unset in the config database, and the OSDs did not all answer with one)".to_string())
        }
    };
    // Under mClock the OSDs run the release's backfills (1) unless the override is on.
    let overridden = operators(MCLOCK_OVERRIDE).is_some_and(|v| v.trim() == "true");
    let operator_backfills = match queue {
        Queue::Mclock { .. } if !overridden => 1,
        _ => backfills(operators(MAX_BACKFILLS).as_deref()),
    };
    Ok(Facts {
        queue,
        operator_profile,
        operator_backfills,
        moving_pgs: lever::backfilling_now(ctx).unwrap_or(0),
    })
}

/// The list made again when what it depends on changed since the recovery's start: more PGs
/// backfill at once than it was made for (a recovery from the PG logs that reaches the PGs
/// that need backfill, PGs still peering at the start), or the operator's limits changed (a
/// restart with other flags, the pause flags taken off by hand). Levels that stay keep what was
/// seen of them; the position stays on the same level, or the nearest that remains.
fn remake(ctx: &Ctx<'_>, allowed: &Allowed, run: &mut Run, notes: &mut Notes) {
    let mut facts = run.facts.clone();
    // Counted where the lever begins, not while it holds PGs (then fewer backfill).
    if run.levels.get(run.position.at).backfilling_pgs.is_none() {
        if let Some(now) = lever::backfilling_now(ctx) {
            facts.moving_pgs = facts.moving_pgs.max(now);
        }
    }
    let list = levels(&facts, allowed);
    run.facts = facts;
    if list == run.levels {
        return;
    }
    let old = std::mem::replace(&mut run.levels, list);
    let new = &run.levels;
    let find = |l: &Level| {
        new.list.iter().position(|x| x == l).or_else(|| {
            // The pause gone: the same level without it; the lever come or gone: the same
            // pause share with the lever at its least, or without it.
            new.list
                .iter()
                .position(|x| {
                    Level {
                        pause_share: 0.0,
                        ..x.clone()
                    } == Level {
                        pause_share: 0.0,
                        ..l.clone()
                    }
                })
                .filter(|_| l.pause_share > 0.0)
                .or_else(|| {
                    new.list
                        .iter()
                        .position(|x| x.pause_share > 0.0 && x.pause_share == l.pause_share)
                })
        })
    };
    let at = find(old.get(run.position.at)).unwrap_or(new.home);
    let same = |i: usize| new.list.iter().position(|x| x == old.get(i));
    run.position.held = run.position.held.and_then(same);
    let seen = std::mem::take(&mut run.position.seen);
    run.position.seen = seen
        .into_iter()
        .filter_map(|(i, s)| same(i).map(|j| (j, s)))
        .collect();
    if at != run.position.at || old.get(run.position.at) != new.get(at) {
        run.position.fresh = Some(false);
    }
    run.position.at = at;
    notes.push(ctx.record(
        DecisionEvent::Level,
        format!(
            "{}LEVEL: the list is made again for {} PGs backfilling at once and the limits in force: {} levels, from {} to {}; the level in force is {}",
            observe_prefix(ctx.policy),
            run.facts.moving_pgs,
            new.list.len(),
            new.get(new.top()).describe(),
            new.get(new.bottom()).describe(),
            new.get(at).describe()
        ),
    ));
}

/// The LEVEL line of a move, its fields typed.
fn move_record(ctx: &Ctx<'_>, levels: &Levels, d: &Decision) -> DecisionRecord {
    let aim = ctx.policy.ladder.aim;
    let (from, to) = (levels.get(d.from).describe(), levels.get(d.to).describe());
    let way = if d.to > d.from {
        "less recovery"
    } else {
        "more recovery"
    };
    let pct = |x: f64| format!("{:.0}%", x * 100.0);
    let why = match &d.why {
        Why::OverBound { p99, remembered } => format!(
            "the last window's p99 was {} of the bound{}",
            pct(*p99),
            if *remembered {
                "; down to the level that held the bound in the last recovery on this cluster"
            } else {
                ""
            }
        ),
        Why::OverAim { mean } => format!(
            "its windows average {} of the bound, over the aim of {}",
            pct(*mean),
            pct(aim)
        ),
        Why::Room { mean } => format!(
            "its windows average {} of the bound, under the aim of {}: the budget goes to recovery speed",
            pct(*mean),
            pct(aim)
        ),
        Why::NoWrites => "no client wrote in the last window: nothing to protect".to_string(),
        Why::TooSlow { rate, need } => format!(
            "its windows recover {} obj/s and the objects left need {} obj/s to end within --enforcer.max-slowdown {}: the time limit before the bound",
            fmt_rate(*rate),
            fmt_rate(*need),
            ctx.policy.ladder.max_slowdown
        ),
        Why::TimeUp => format!(
            "the time --enforcer.max-slowdown {} allows this recovery is spent: the operator's settings until it ends, whatever client p99",
            ctx.policy.ladder.max_slowdown
        ),
        other => format!("{other:?}"),
    };
    let mut rec = ctx.record(
        DecisionEvent::Level,
        format!(
            "{}LEVEL {} -> {} ({way}): {why}; {} -> {}",
            observe_prefix(ctx.policy),
            d.from,
            d.to,
            from,
            to
        ),
    );
    rec.level = Some(LevelMove {
        from: d.from,
        to: d.to,
        from_level: from,
        to_level: to,
        why: d.why.clone(),
    });
    rec
}

/// Makes the cluster say `level`: the lever's N and the pause share in `next`, and the config
/// change as the returned want. `(d, home)`: this cycle's decision and the operator's level;
/// `reduced`: a copy is missing (never a pause nor a held PG then, whatever the suspension
/// policy).
fn realize(
    ctx: &Ctx<'_>,
    next: &mut EnforcerState,
    notes: &mut Notes,
    level: &Level,
    (d, home): (Decision, usize),
    (queue, reduced): (Queue, bool),
) -> Option<Want> {
    let (policy, obs, now) = (ctx.policy, ctx.obs, ctx.now);
    match level.backfilling_pgs.filter(|_| !reduced) {
        Some(n) => {
            if let Err(why) = lever::follow(ctx, next, n) {
                ctx.note_once(next, notes, format!("level_lever:{why}"), DecisionEvent::LadderSkip, || {
                    format!(
                        "{}LEVEL {}: no PG is held ({why}); the level acts through its other settings",
                        observe_prefix(policy),
                        level.describe()
                    )
                });
            }
        }
        // Redundancy first: everything goes back at once (as `decide` gives it back).
        None if reduced => lever::end(next, now),
        None => lever::wind_down(ctx, next),
    }
    let pp = &policy.ladder.pause;
    if level.pause_share > 0.0 && !reduced && !next.ladder.no_pause {
        let paused_before = next.ladder.paused_seconds;
        let ps = next.ladder.pause.get_or_insert_with(|| {
            let mut p = PauseState::start_at(pp, now, level.pause_share);
            p.paused_total = paused_before;
            p
        });
        ps.share = level.pause_share.min(pp.max_share);
        if ps.paused_so_far(now) >= pp.max_total {
            next.ladder.no_pause = true;
            ladder::end_pause(
                ctx,
                next,
                notes,
                &format!(
                    "the pause budget is used up ({} in this recovery, --enforcer.pause-max-total)",
                    crate::units::fmt_secs(pp.max_total)
                ),
            );
        } else {
            pause::cycle(pp, ps, now);
        }
    } else if next.ladder.pause.is_some() {
        let why = if reduced {
            "PGs undersized: never paused while redundancy is reduced".to_string()
        } else {
            format!("the level in force is {}", level.describe())
        };
        ladder::end_pause(ctx, next, notes, &why);
    }
    // The rung that says what is in force, for `status`, the metrics and the loop's reads.
    let rung = if next.ladder.pause.is_some() {
        PAUSE_RUNG
    } else if next.ladder.lever.is_some() {
        LEVER_RUNG
    } else {
        u8::from(d.to != home)
    };
    next.ladder.rung = rung;
    next.ladder.top = next.ladder.top.max(rung);
    let owned = Owned {
        originals: next
            .original
            .iter()
            .filter(|(k, _)| LEVEL_KEYS.contains(&k.as_str()))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
        applied: Default::default(),
        given_up: Default::default(),
    };
    // In observe mode nothing was set: the cluster is compared as it would be, so that each
    // move is said once.
    let mut configured = obs.configured.clone();
    if let Some(a) = next.applied.as_ref().filter(|a| a.simulated) {
        for (k, original) in &next.original {
            configured.insert(k.clone(), a.values.get(k).cloned().or(original.clone()));
        }
    }
    let p = plan(&desired(level, queue), &configured, &owned);
    if p.changes.is_empty() {
        return None;
    }
    // Less recovery than the operator's settings counts against the change limits; more, or
    // the way back, goes at once. A move from above the operator's level to below it gives the
    // push back first, at once, and slows recovery at the next cycle: a deferred change must
    // not keep recovery pushed while p99 is over the bound.
    let slower = d.to > home;
    // What the enforcer holds now pushes recovery above the operator's settings.
    let pushed = ladder::raised_backfills(next)
        || next.applied.as_ref().is_some_and(|a| {
            a.values.get(MCLOCK_PROFILE_KEY).map(String::as_str) == Some("high_recovery_ops")
        });
    let (kind, changes) = if slower && pushed {
        let to_home = plan(&desired(&Level::operator(), queue), &configured, &owned);
        (ActionKind::Descend, to_home.changes)
    } else if slower {
        (ActionKind::Escalate, p.changes)
    } else {
        (ActionKind::Descend, p.changes)
    };
    let mut w = Want::new(
        kind,
        changes,
        format!(
            "level {}: {}{}",
            d.to,
            level.describe(),
            obs.p99
                .map(|p| format!(" (client p99 write {} over the last window)", fmt_ms(p)))
                .unwrap_or_default()
        ),
    );
    w.rung = Some((rung, 0));
    Some(w)
}
