//! The escalation ladder (issue #7) through `decide`: climbing, the pause rung's duty cycle,
//! going down with hysteresis, and the safety rules around the pause flags.

use std::collections::BTreeSet;
use std::time::Duration;

use super::decide::*;
use super::effect::{Action, Change};
use super::event::DecisionRecord;
use super::ladder::{MCLOCK_RECOVERY_LIM, MCLOCK_RECOVERY_RES};
use super::observation::{Observation, OpQueue};
use super::policy::*;
use super::state::*;
use super::tests::{finished, policy, recovering, undersized, Sim, T0};

fn kinds(actions: &[Action]) -> Vec<ActionKind> {
    actions.iter().map(|a| a.kind).collect()
}

/// The decision log's messages of one event, in order.
pub(super) fn messages<'a>(sim: &'a Sim, event: &str) -> Vec<&'a str> {
    sim.notes
        .iter()
        .filter(|n| n.event == event)
        .map(|n| n.message.as_str())
        .collect()
}

pub(super) fn paused(sim: &Sim) -> bool {
    sim.state.ladder.pause.as_ref().is_some_and(|p| p.paused)
}

/// Throttle after 15 minutes, then a stronger rung every 5 minutes up to the pause.
fn climb_to_pause(sim: &mut Sim, p99_ms: f64) {
    sim.run(&recovering(p99_ms), 15 * 60 + 15 + 4 * 5 * 60);
    assert_eq!(sim.state.ladder.rung, 4, "{:?}", sim.state.ladder);
}

#[test]
fn the_ladder_climbs_one_rung_at_a_time_each_judged_after_settle_in_numbers() {
    let mut sim = Sim::new(policy());
    let actions = sim.run(&recovering(350.0), 15 * 60 + 15 + 3 * 5 * 60);
    assert_eq!(
        kinds(&actions),
        vec![
            ActionKind::Throttle,
            ActionKind::Escalate,
            ActionKind::Escalate,
            ActionKind::Escalate
        ]
    );
    // Each rung held the ladder's settle time (5 minutes) before the next.
    let at: Vec<Time> = sim.actions.iter().map(|(t, _)| *t).collect();
    assert!(at.windows(2).all(|w| w[1] - w[0] == 300.0), "{at:?}");
    assert_eq!(
        actions[1].reason,
        "rung 1 (high_client_ops) left client p99 write 350 ms over the last 5m > bound 32.0 ms after 5m0s; escalating to rung 2 (custom profile, recovery limit 1000 IOPS per OSD)"
    );
    // Rung 2 under mClock: a custom profile whose recovery limit binds, pushed to the OSDs too.
    let set: Vec<(String, Option<String>)> = actions[1]
        .changes
        .iter()
        .map(|c| (c.key.clone(), c.to.clone()))
        .collect();
    assert_eq!(
        set,
        vec![
            (MCLOCK_PROFILE_KEY.into(), Some("custom".into())),
            (MCLOCK_RECOVERY_LIM.into(), Some("1000".into())),
            (MCLOCK_RECOVERY_RES.into(), Some("1".into())),
        ]
    );
    assert!(actions[1]
        .push
        .contains(&(MCLOCK_RECOVERY_LIM.to_string(), "1000".to_string())));
    // Then only the limit steps down.
    assert_eq!(
        actions[3].changes,
        vec![Change {
            key: MCLOCK_RECOVERY_LIM.into(),
            from: Some("300".into()),
            to: Some("100".into())
        }]
    );
    // The operator had neither custom key: they are remembered as unset.
    assert_eq!(sim.state.original.get(MCLOCK_RECOVERY_LIM), Some(&None));
    assert_eq!(sim.state.ladder.rung, 2);

    // The last step of rung 2 left p99 above the bound too: the pause, with no config change.
    assert!(sim.run(&recovering(350.0), 5 * 60).is_empty());
    assert_eq!(sim.state.ladder.rung, 4);
    assert_eq!(sim.state.ladder.top, 4);
    let esc = sim
        .notes
        .iter()
        .rfind(|n| n.event == "ESCALATE")
        .expect("escalate note");
    assert_eq!(
        esc.message,
        "ESCALATE: rung 2 (custom profile, recovery limit 100 IOPS per OSD) left client p99 write 350 ms over the last 5m > bound 32.0 ms after 5m0s; escalating to rung 4 (pause nobackfill+norecover 80% of each 60 s) (p99 10.9x the bound: 80% instead of 30%)"
    );
}

#[test]
fn the_pause_grows_while_p99_stays_high_but_never_past_the_maximum_share() {
    let mut sim = Sim::new(policy());
    climb_to_pause(&mut sim, 350.0);
    // 20 minutes above the bound, one decision every 15 s: count paused decisions.
    let mut paused_ticks = 0;
    let ticks = 20 * 60 / 15;
    for _ in 0..ticks {
        sim.now += 15.0;
        sim.step(recovering(350.0));
        paused_ticks += usize::from(paused(&sim));
    }
    let share = sim.state.ladder.pause.as_ref().map(|p| p.share);
    assert_eq!(share, Some(0.8));
    // 80% of 60 s decided every 15 s: 45 s of each minute, never all of it.
    assert!(
        paused_ticks * 100 <= ticks * 80,
        "{paused_ticks} of {ticks}"
    );
    assert!(
        paused_ticks * 100 >= ticks * 60,
        "{paused_ticks} of {ticks}"
    );
    // p99 11x the bound: the pause starts at the maximum share, not 30% creeping up by 10%.
    assert!(!sim.notes.iter().any(|n| n.event == "PAUSE_SHARE"));
    // The time paused is counted for the metric and the alert.
    let secs = sim.state.ladder.paused_so_far(sim.now);
    assert!((700.0..=960.0).contains(&secs), "{secs}");
}

#[test]
fn going_down_is_one_rung_at_a_time_below_the_lower_threshold() {
    let mut p = policy();
    p.max_changes_per_hour = 20;
    let mut sim = Sim::new(p);
    climb_to_pause(&mut sim, 350.0);
    // p99 well below 70% of the 32 ms bound: the pause shrinks to nothing, then rung 2 steps
    // down one by one, each after 5 minutes below, then back to rung 1.
    let actions = sim.run(&recovering(10.0), 40 * 60);
    assert_eq!(
        kinds(&actions),
        vec![
            ActionKind::Descend,
            ActionKind::Descend,
            ActionKind::Descend
        ]
    );
    assert!(sim.state.ladder.pause.is_none());
    assert_eq!(sim.state.ladder.rung, 1);
    let ended = sim
        .notes
        .iter()
        .find(|n| n.event == "PAUSE_ENDED")
        .expect("pause ended");
    assert!(
        ended.message.contains("pause no longer needed"),
        "{}",
        ended.message
    );
    assert_eq!(
        actions[0].changes,
        vec![Change {
            key: MCLOCK_RECOVERY_LIM.into(),
            from: Some("100".into()),
            to: Some("300".into())
        }]
    );
    // Off rung 2: the throttle profile again, the custom keys removed (they were not set).
    let last: Vec<(String, Option<String>)> = actions[2]
        .changes
        .iter()
        .map(|c| (c.key.clone(), c.to.clone()))
        .collect();
    assert_eq!(
        last,
        vec![
            (MCLOCK_PROFILE_KEY.into(), Some("high_client_ops".into())),
            (MCLOCK_RECOVERY_LIM.into(), None),
            (MCLOCK_RECOVERY_RES.into(), None),
        ]
    );
    assert!(
        actions[2].reason.starts_with(
        "client p99 write 10.0 ms over the last 5m below 70% of the bound 32.0 ms for 5m0s; rung 2 (custom profile, recovery limit 1000 IOPS per OSD) -> rung 1 (high_client_ops)"
        ),
        "{}",
        actions[2].reason
    );
    // Rung 1 stays until the recovery ends.
    assert!(sim.run(&recovering(10.0), 30 * 60).is_empty());
    // Between the thresholds nothing moves either way.
    let mut sim = Sim::new(policy());
    sim.run(&recovering(350.0), 15 * 60 + 15 + 5 * 60);
    assert_eq!(sim.state.ladder.rung, 2);
    assert!(sim.run(&recovering(28.0), 30 * 60).is_empty());
}

/// No client write in the window is no client latency to protect: the ladder comes down as
/// it does below the bound, one step per settle time, to rung 1, which stays until the
/// recovery ends; the writes back over the bound climb it again. (On the lab, rung 2 held
/// with nobody writing kept a rebalance at 4 objects/s for 20 minutes.)
#[test]
fn with_no_client_writes_the_ladder_comes_down_to_rung_1() {
    let quiet = || Observation {
        p99: None,
        p99_note: Some("no client writes in the last 5m".into()),
        ..recovering(0.0)
    };
    let mut sim = Sim::new(policy());
    sim.run(&recovering(350.0), 15 * 60 + 15 + 5 * 60);
    assert_eq!(sim.state.ladder.rung, 2);
    let actions = sim.run(&quiet(), 4 * 60);
    assert!(
        actions.is_empty(),
        "not before the settle time: {actions:?}"
    );
    let actions = sim.run(&quiet(), 2 * 60);
    assert_eq!(kinds(&actions), vec![ActionKind::Descend]);
    assert_eq!(sim.state.ladder.rung, 1);
    assert!(
        actions[0].reason.starts_with(
            "no client writes in the last 5m for 5m0s: no client latency to protect; rung 2"
        ),
        "{}",
        actions[0].reason
    );
    // Rung 1 stays until the recovery ends.
    assert!(sim.run(&quiet(), 30 * 60).is_empty());
    assert_eq!(sim.state.ladder.rung, 1);
    // Writes again, over the bound: the ladder climbs again (as fast as this recovery has
    // shown it needs).
    let actions = sim.run(&recovering(350.0), 6 * 60);
    assert_eq!(kinds(&actions)[0], ActionKind::Escalate);
    assert!(sim.state.ladder.rung >= 2);
}

/// From the pause too: with nobody writing, the pause's share comes down and the ladder with
/// it, to rung 1.
#[test]
fn with_no_client_writes_the_pause_ends_and_the_ladder_comes_down() {
    let quiet = Observation {
        p99: None,
        p99_note: Some("no client writes in the last 5m".into()),
        ..recovering(0.0)
    };
    let mut p = policy();
    p.max_changes_per_hour = 20;
    let mut sim = Sim::new(p);
    climb_to_pause(&mut sim, 350.0);
    sim.run(&quiet, 60 * 60);
    assert!(sim.state.ladder.pause.is_none());
    assert!(!paused(&sim));
    assert_eq!(sim.state.ladder.rung, 1, "{:?}", sim.state.ladder);
}

/// Redundancy first, within the collection interval that sees the risk: the pause ends and
/// SUSPEND (with the recovery limit lifted) goes in the same decision, although the change
/// limits would hold any throttle for 10 minutes; and it is not counted against them.
#[test]
fn redundancy_at_risk_ends_the_pause_and_suspends_at_once_whatever_the_change_limits() {
    let mut p = policy();
    p.min_interval = Duration::from_secs(600);
    p.max_changes_per_hour = 100;
    let mut sim = Sim::new(p);
    while !paused(&sim) {
        sim.now += 15.0;
        sim.step(recovering(350.0));
        assert!(sim.now < T0 + 4.0 * 3600.0, "{:?}", sim.state.ladder);
    }
    let counted = sim.state.changes.len();
    assert!(crate::enforcer::decide::limit_wait(&sim.policy, &sim.state, sim.now) > 0.0);
    // One OSD down: PGs undersized.
    sim.now += 15.0;
    let a = sim.step(undersized(350.0));
    assert!(sim.state.ladder.pause.is_none());
    assert_eq!(sim.state.changes.len(), counted, "not counted");
    let ended = sim
        .notes
        .iter()
        .rfind(|n| n.event == "PAUSE_ENDED")
        .unwrap();
    assert!(
        ended.message.contains("redundancy at risk"),
        "{}",
        ended.message
    );
    // The suspension also lifts the recovery limit.
    let actions: Vec<Action> = a.into_iter().collect();
    assert_eq!(kinds(&actions), vec![ActionKind::Suspend]);
    let keys: Vec<(&str, Option<&str>)> = actions[0]
        .changes
        .iter()
        .map(|c| (c.key.as_str(), c.to.as_deref()))
        .collect();
    assert_eq!(
        keys,
        vec![
            (MCLOCK_PROFILE_KEY, Some("high_recovery_ops")),
            (MCLOCK_RECOVERY_LIM, None),
            (MCLOCK_RECOVERY_RES, None),
        ]
    );
    assert_eq!(sim.state.ladder.rung, 0);
    // The operator's original profile is still what RESUME and RESTORE put back.
    assert_eq!(
        sim.state.original.get(MCLOCK_PROFILE_KEY),
        Some(&Some("balanced".to_string()))
    );
}

#[test]
fn recovery_end_unpauses_at_once_and_the_restore_removes_everything() {
    let mut sim = Sim::new(policy());
    climb_to_pause(&mut sim, 350.0);
    sim.now += 15.0;
    sim.step(finished());
    assert!(sim.state.ladder.pause.is_none(), "no pause after recovery");
    let actions = sim.run(&finished(), 6 * 60);
    assert_eq!(kinds(&actions), vec![ActionKind::Restore]);
    assert_eq!(
        sim.configured.get(MCLOCK_PROFILE_KEY),
        Some(&Some("balanced".to_string()))
    );
    assert_eq!(sim.configured.get(MCLOCK_RECOVERY_LIM), Some(&None));
    assert_eq!(sim.configured.get(MCLOCK_RECOVERY_RES), Some(&None));
    // The paused time stays visible until the next recovery starts.
    assert!(sim.state.ladder.paused_seconds > 0.0);
    sim.now += 15.0;
    sim.step(recovering(20.0));
    assert_eq!(sim.state.ladder.paused_seconds, 0.0);
}

#[test]
fn stale_observations_end_the_pause() {
    let mut sim = Sim::new(policy());
    climb_to_pause(&mut sim, 350.0);
    sim.now += 15.0;
    sim.step(Observation {
        stale: Some("collector latency is down (timeout)".into()),
        ..recovering(350.0)
    });
    assert!(sim.state.ladder.pause.is_none());
    assert_eq!(sim.state.ladder.rung, 2, "back to the last recovery limit");
}

fn with_flags(obs: Observation, flags: &[&str]) -> Observation {
    Observation {
        osd_flags: Some(flags.iter().map(|f| f.to_string()).collect()),
        ..obs
    }
}

#[test]
fn an_operators_pause_flag_makes_the_enforcer_hold_and_is_never_ours() {
    let mut sim = Sim::new(policy());
    climb_to_pause(&mut sim, 350.0);
    // Someone sets nobackfill by hand (not in the enforcer's flags_set).
    let obs = with_flags(recovering(350.0), &["sortbitwise", "nobackfill"]);
    let actions = sim.run(&obs, 10 * 60);
    assert!(actions.is_empty());
    assert!(sim.state.ladder.pause.is_none());
    assert_eq!(sim.state.phase, Phase::Holding);
    assert!(sim.state.flags_set.is_empty(), "their flag is not ours");
    let holds: Vec<&DecisionRecord> = sim.notes.iter().filter(|n| n.event == "HOLD").collect();
    assert_eq!(holds.len(), 1, "said once");
    assert!(holds[0]
        .message
        .contains("nobackfill set, not by the enforcer"));
    // Unset again: the enforcer goes on from the rung it holds.
    sim.run(&with_flags(recovering(350.0), &["sortbitwise"]), 60);
    assert_ne!(sim.state.phase, Phase::Holding);
}

#[test]
fn pause_flags_cleared_by_hand_are_respected_for_the_rest_of_the_recovery() {
    let mut sim = Sim::new(policy());
    climb_to_pause(&mut sim, 350.0);
    while !paused(&sim) {
        sim.now += 15.0;
        sim.step(recovering(350.0));
    }
    // What the loop records when it sets them.
    sim.state.flags_set = BTreeSet::from(["nobackfill".to_string(), "norecover".to_string()]);
    sim.now += 15.0;
    sim.step(with_flags(recovering(350.0), &["sortbitwise"]));
    assert!(sim.state.ladder.no_pause);
    assert!(sim.state.flags_set.is_empty());
    assert!(sim.state.ladder.pause.is_none());
    // Still above the bound: no pause again; the top is said once.
    sim.run(&with_flags(recovering(350.0), &["sortbitwise"]), 20 * 60);
    assert!(sim.state.ladder.pause.is_none());
    let top: Vec<&DecisionRecord> = sim
        .notes
        .iter()
        .filter(|n| n.event == "LADDER_TOP")
        .collect();
    assert_eq!(top.len(), 1);
    assert!(
        top[0].message.contains("ended by hand"),
        "{}",
        top[0].message
    );
    // A new recovery may pause again.
    sim.run(&finished(), 6 * 60);
    sim.now += 15.0;
    sim.step(recovering(20.0));
    assert!(!sim.state.ladder.no_pause);
}

#[test]
fn wpq_steps_the_recovery_sleep() {
    let mut sim = Sim::new(policy());
    sim.configured = std::collections::BTreeMap::new();
    let wpq = Observation {
        op_queue: OpQueue::Other("wpq".into()),
        ..recovering(350.0)
    };
    let actions = sim.run(&wpq, 15 * 60 + 15 + 2 * 5 * 60);
    assert_eq!(
        kinds(&actions),
        vec![
            ActionKind::Throttle,
            ActionKind::Escalate,
            ActionKind::Escalate
        ]
    );
    assert_eq!(
        actions[1].reason,
        "rung 1 (osd_max_backfills=1, osd_recovery_sleep_hdd=0.1) left client p99 write 350 ms over the last 5m > bound 32.0 ms after 5m0s; escalating to rung 2 (osd_recovery_sleep 0.2 s, osd_recovery_max_active 1)"
    );
    assert_eq!(
        sim.configured.get("osd_recovery_sleep"),
        Some(&Some("0.5".to_string()))
    );
    assert!(
        actions[1].push.is_empty(),
        "wpq takes config set at runtime"
    );
}

#[test]
fn max_rung_and_the_pause_budget_stop_the_climb_and_say_so() {
    let mut p = policy();
    p.ladder.max_rung = 2;
    let mut sim = Sim::new(p);
    sim.run(&recovering(350.0), 15 * 60 + 15 + 4 * 5 * 60 + 30 * 60);
    assert_eq!(sim.state.ladder.rung, 2);
    let top: Vec<&str> = messages(&sim, "LADDER_TOP");
    assert_eq!(top.len(), 1);
    assert!(top[0].contains("--enforcer.max-rung is 2"), "{}", top[0]);

    let mut p = policy();
    p.ladder.pause.max_total = 120.0;
    let mut sim = Sim::new(p);
    climb_to_pause(&mut sim, 350.0);
    sim.run(&recovering(350.0), 20 * 60);
    assert!(sim.state.ladder.pause.is_none());
    assert!(sim.state.ladder.paused_seconds <= 120.0 + 15.0);
    assert!(sim
        .notes
        .iter()
        .any(|n| n.message.contains("pause budget used up")));
}

#[test]
fn observe_mode_shows_the_whole_ladder_it_would_climb() {
    let mut p = policy();
    p.mode = Mode::Observe;
    let mut sim = Sim::new(p);
    climb_to_pause(&mut sim, 350.0);
    let kinds: Vec<ActionKind> = sim.actions.iter().map(|(_, a)| a.kind).collect();
    assert_eq!(
        kinds,
        vec![
            ActionKind::Throttle,
            ActionKind::Escalate,
            ActionKind::Escalate,
            ActionKind::Escalate
        ]
    );
    assert!(sim
        .notes
        .iter()
        .any(|n| n.message.starts_with("(observe mode) would: ESCALATE:")
            && n.message.contains("rung 4 (pause")));
    assert!(sim.state.applied.as_ref().is_some_and(|a| a.simulated));
    assert!(sim.state.flags_set.is_empty());
}

#[test]
fn the_operators_own_throttle_profile_counts_as_rung_1() {
    let mut sim = Sim::new(policy());
    sim.configured
        .insert(MCLOCK_PROFILE_KEY.into(), Some("high_client_ops".into()));
    let actions = sim.run(&recovering(350.0), 15 * 60 + 15 + 5 * 60);
    assert_eq!(kinds(&actions), vec![ActionKind::Escalate]);
    assert!(sim
        .notes
        .iter()
        .any(|n| n.event == "NOTHING_TO_DO" && n.message.contains("rung 1 is in force")));
    assert_eq!(sim.state.ladder.rung, 2);
    let _ = T0;
}

#[test]
fn a_recovery_starting_again_before_the_restore_keeps_judging_the_limit_held() {
    let mut p = policy();
    p.max_changes_per_hour = 20;
    let mut sim = Sim::new(p);
    sim.run(&recovering(350.0), 15 * 60 + 15 + 5 * 60);
    assert_eq!(sim.state.ladder.rung, 2);
    // Finished for two minutes (settle is 5), then the next OSD drains.
    sim.run(&finished(), 2 * 60);
    sim.run(&recovering(10.0), 2 * 60);
    assert_eq!(sim.state.ladder.rung, 2, "the limit is still held");
    // Well below the bound: it comes off like any rung.
    let actions = sim.run(&recovering(10.0), 10 * 60);
    assert_eq!(kinds(&actions), vec![ActionKind::Descend]);
    assert_eq!(sim.configured.get(MCLOCK_RECOVERY_LIM), Some(&None));
}

#[test]
fn no_pause_with_pgs_undersized_even_when_only_pools_at_min_size_suspend() {
    let mut p = policy();
    p.suspend_when = SuspendWhen::PoolAtMinSize;
    let mut sim = Sim::new(p);
    let obs = Observation {
        pools_at_min_size: vec![],
        ..undersized(350.0)
    };
    sim.run(&obs, 15 * 60 + 15 + 6 * 5 * 60);
    assert!(sim.state.ladder.pause.is_none(), "{:?}", sim.state.ladder);
    assert!(sim
        .notes
        .iter()
        .any(|n| n.event == "LADDER_TOP"
            && n.message.contains("no pause while redundancy is reduced")));
}

/// A flapping OSD has used the hour's changes up: SUSPEND still goes at the first cycle that
/// sees PGs undersized, and when redundancy is back the steps down go too (the throttle's
/// steps up wait for the hour).
#[test]
fn suspend_goes_at_once_with_the_hours_changes_used_up() {
    let mut p = policy();
    p.breach_for = Duration::from_secs(0);
    p.min_interval = Duration::from_secs(60);
    p.max_changes_per_hour = 2;
    p.ladder.settle = Duration::from_secs(60);
    let mut sim = Sim::new(p);
    sim.run(&recovering(350.0), 10 * 60);
    let kinds_now: Vec<ActionKind> = sim.actions.iter().map(|(_, a)| a.kind).collect();
    assert_eq!(kinds_now, vec![ActionKind::Throttle, ActionKind::Escalate]);
    assert!(crate::enforcer::decide::limit_wait(&sim.policy, &sim.state, sim.now) > 600.0);
    sim.now += 15.0;
    let a = sim.step(undersized(350.0));
    assert_eq!(a.map(|a| a.kind), Some(ActionKind::Suspend));
    assert_eq!(sim.state.changes.len(), 2, "SUSPEND is not counted");
}

#[test]
fn mixed_or_unknown_op_queues_do_not_jump_to_the_pause() {
    let mut sim = Sim::new(policy());
    let obs = Observation {
        op_queue: OpQueue::Mixed,
        ..recovering(350.0)
    };
    // The operator's profile is already the throttle (nothing to set on a mixed cluster).
    sim.configured
        .insert(MCLOCK_PROFILE_KEY.into(), Some("high_client_ops".into()));
    sim.run(&obs, 60 * 60);
    assert!(sim.state.ladder.pause.is_none());
    assert!(sim.state.ladder.rung <= 1);
}

#[test]
fn a_recovery_limit_that_made_p99_worse_is_taken_back_on_the_way_to_the_pause() {
    let mut p = policy();
    p.ladder.recovery_limits = vec![super::policy::RecoveryLimit::Iops(100)];
    let mut sim = Sim::new(p);
    // Rung 1 leaves 328 ms; rung 2 (the custom limit) makes it 810 ms, as on the lab.
    sim.run(&recovering(328.0), 15 * 60 + 15 + 5 * 60);
    assert_eq!(sim.state.ladder.rung, 2);
    let actions = sim.run(&recovering(810.0), 5 * 60);
    assert_eq!(kinds(&actions), vec![ActionKind::Escalate]);
    let back: Vec<(&str, Option<&str>)> = actions[0]
        .changes
        .iter()
        .map(|c| (c.key.as_str(), c.to.as_deref()))
        .collect();
    assert_eq!(
        back,
        vec![
            (MCLOCK_PROFILE_KEY, Some("high_client_ops")),
            (MCLOCK_RECOVERY_LIM, None),
            (MCLOCK_RECOVERY_RES, None),
        ]
    );
    assert!(
        actions[0].reason.starts_with("rung 2 (custom profile, recovery limit 100 IOPS per OSD) made client p99 write worse (810 ms over the last 5m after 5m0s, 328 ms when it was set; bound 32.0 ms): taken back, and not used on this cluster for 30 days (remembered); escalating to rung 4"),
        "{}",
        actions[0].reason
    );
    assert_eq!(sim.state.ladder.rung, 4);
    assert!(sim.state.ladder.pause.is_some());
    assert!(sim.state.ladder.limit_hurt);
    // The pause runs; when it is over the ladder is back on rung 1 and does not try the limit
    // again in this recovery.
    sim.run(&recovering(10.0), 10 * 60);
    assert_eq!(sim.state.ladder.rung, 1);
    let again = sim.run(&recovering(328.0), 6 * 60);
    assert!(
        again.iter().all(|a| a.kind != ActionKind::Escalate),
        "{again:?}"
    );
    assert!(sim.state.ladder.pause.is_some(), "straight to the pause");
}

fn osd_versions(
    lines: &[(&str, u64)],
) -> Result<Vec<(crate::ceph::parse::versions::OsdVersion, u64)>, String> {
    Ok(lines
        .iter()
        .map(|(l, n)| (crate::ceph::parse::versions::version_line(l), *n))
        .collect())
}

const QUINCY: &str =
    "ceph version 17.2.6 (d7ff0d10654d2280e08f1ab989c7cdf3064446a5) quincy (stable)";
const PACIFIC: &str =
    "ceph version 16.2.15 (618f440892089921c3e944a991122ddc44e60516) pacific (stable)";

#[test]
fn osds_not_on_pacific_skip_the_iops_limit_and_go_from_rung_1_to_the_pause() {
    let mut sim = Sim::new(policy());
    // Mid-upgrade: two OSDs already on Quincy, where the limit would be read as a fraction.
    let obs = Observation {
        osd_versions: osd_versions(&[(PACIFIC, 10), (QUINCY, 2)]),
        ..recovering(350.0)
    };
    let actions = sim.run(&obs, 15 * 60 + 15 + 5 * 60);
    assert_eq!(kinds(&actions), vec![ActionKind::Throttle]);
    assert_eq!(sim.state.ladder.rung, 4, "{:?}", sim.state.ladder);
    // Nothing of rung 2 was written.
    assert!(sim
        .actions
        .iter()
        .flat_map(|(_, a)| &a.changes)
        .all(|c| c.key != MCLOCK_RECOVERY_LIM && c.key != MCLOCK_RECOVERY_RES));
    let skips: Vec<&str> = messages(&sim, "LADDER_SKIP");
    // Rung 3 needs the PG states, which this observation has none of: the pause follows.
    assert_eq!(skips.len(), 2, "{skips:?}");
    // Which OSDs read the limit otherwise, and how to write it for them.
    assert!(
        skips[0].starts_with("rung 2 (recovery limit) skipped: 2 OSDs run 17.2.6 quincy (reading a fraction of each OSD's capacity)")
            && skips[0].ends_with("(write e.g. --enforcer.recovery-limits 5%,3% for it)"),
        "{}",
        skips[0]
    );
    assert_eq!(skips[1], "rung 3 (backfill lever) skipped: cannot see which PGs backfill (the PG states and the OSD map were not read); the ladder goes on to the pause (rung 4)");
    let esc = sim
        .notes
        .iter()
        .rfind(|n| n.event == "ESCALATE")
        .expect("escalate note");
    assert!(
        esc.message
            .starts_with("ESCALATE: rung 1 (high_client_ops) left client p99 write 350 ms")
            && esc
                .message
                .ends_with("escalating to rung 4 (pause nobackfill+norecover 80% of each 60 s) (p99 10.9x the bound: 80% instead of 30%)"),
        "{}",
        esc.message
    );
}

const REEF: &str = "ceph version 18.2.7 (6b0e988052ec84cf2d4a54ff9bbbc5e720b621ad) reef (stable)";

/// The settings rung 2 leaves in the config database, by key.
fn rung2_configured(sim: &Sim) -> Vec<(&'static str, Option<String>)> {
    [
        MCLOCK_PROFILE_KEY,
        MCLOCK_RECOVERY_RES,
        MCLOCK_RECOVERY_LIM,
        super::types::MCLOCK_BEST_EFFORT_LIM,
    ]
    .into_iter()
    .map(|k| (k, sim.configured.get(k).cloned().flatten()))
    .collect()
}

#[test]
fn on_reef_rung_2_writes_shares_of_capacity_steps_them_down_and_gives_them_back() {
    let mut p = policy();
    p.ladder.recovery_limits = vec![RecoveryLimit::Percent(5), RecoveryLimit::Percent(3)];
    let mut sim = Sim::new(p);
    let reef = |obs: Observation| Observation {
        osd_versions: osd_versions(&[(REEF, 4)]),
        ..obs
    };
    // Throttle after 15 minutes, then rung 2's two steps 5 minutes apart.
    let actions = sim.run(&reef(recovering(350.0)), 15 * 60 + 15 + 2 * 5 * 60);
    assert_eq!(
        kinds(&actions),
        vec![
            ActionKind::Throttle,
            ActionKind::Escalate,
            ActionKind::Escalate
        ]
    );
    assert_eq!((sim.state.ladder.rung, sim.state.ladder.step), (2, 1));
    // What the lever table measured as limit-3 on Reef: custom, the recovery reservation at
    // custom's own 0 (balanced's 0.5 would be served whatever the limit), recovery and
    // best-effort (backfill) limits at 3% of each OSD's capacity, told to the running OSDs.
    assert_eq!(
        rung2_configured(&sim),
        vec![
            (MCLOCK_PROFILE_KEY, Some("custom".into())),
            (MCLOCK_RECOVERY_RES, Some("0".into())),
            (MCLOCK_RECOVERY_LIM, Some("0.03".into())),
            (super::types::MCLOCK_BEST_EFFORT_LIM, Some("0.03".into())),
        ]
    );
    assert!(actions[1].push.contains(&(
        super::types::MCLOCK_BEST_EFFORT_LIM.to_string(),
        "0.05".to_string()
    )));
    // No OSD ever read a number of IOPS as a share: every limit written is a fraction.
    assert!(sim
        .actions
        .iter()
        .flat_map(|(_, a)| &a.changes)
        .filter(|c| c.key.ends_with("_lim"))
        .all(|c| c
            .to
            .as_deref()
            .and_then(|v| v.parse::<f64>().ok())
            .is_some_and(|v| v > 0.0 && v <= 1.0)));
    assert!(messages(&sim, "LADDER_SKIP").is_empty());
    // Recovery over: everything back as the operator had it (balanced, the rest unset).
    sim.run(&reef(finished()), 6 * 60);
    assert_eq!(
        rung2_configured(&sim),
        vec![
            (MCLOCK_PROFILE_KEY, Some("balanced".into())),
            (MCLOCK_RECOVERY_RES, None),
            (MCLOCK_RECOVERY_LIM, None),
            (super::types::MCLOCK_BEST_EFFORT_LIM, None),
        ]
    );
}

#[test]
fn a_limit_written_in_iops_by_an_earlier_run_is_taken_back_once_the_osds_read_shares() {
    // Rung 2 in IOPS on Pacific; then (an upgrade and a restart later) the policy says shares
    // and every OSD runs Reef: the IOPS on the cluster (res 1 = the whole capacity there) go.
    let mut sim = Sim::new(policy());
    sim.run(&recovering(350.0), 15 * 60 + 15 + 5 * 60);
    assert_eq!(sim.state.ladder.rung, 2);
    sim.policy.ladder.recovery_limits = vec![RecoveryLimit::Percent(5)];
    let reef = Observation {
        osd_versions: osd_versions(&[(REEF, 4)]),
        ..recovering(350.0)
    };
    let actions = sim.run(&reef, 5 * 60);
    assert_eq!(kinds(&actions)[0], ActionKind::Descend, "{actions:?}");
    assert_eq!(sim.configured.get(MCLOCK_RECOVERY_RES), Some(&None));
    assert_eq!(sim.configured.get(MCLOCK_RECOVERY_LIM), Some(&None));
}

#[test]
fn shares_are_not_written_to_pacific_osds_which_would_read_them_as_iops() {
    let mut p = policy();
    p.ladder.recovery_limits = vec![RecoveryLimit::Percent(5)];
    let mut sim = Sim::new(p);
    // `recovering` reports Pacific on every OSD.
    sim.run(&recovering(350.0), 15 * 60 + 15 + 5 * 60);
    assert_ne!(sim.state.ladder.rung, 2);
    assert!(sim
        .actions
        .iter()
        .flat_map(|(_, a)| &a.changes)
        .all(|c| !c.key.ends_with("_lim") && !c.key.ends_with("_res")));
    let skips = messages(&sim, "LADDER_SKIP");
    assert!(
        skips.first().is_some_and(|s| s
            .contains("4 OSDs run 16.2.15 pacific (reading IOPS per OSD)")
            && s.contains("--enforcer.recovery-limits 1000,300")),
        "{skips:?}"
    );
}

#[test]
fn an_unreadable_version_skips_the_limit_like_another_release() {
    let mut sim = Sim::new(policy());
    let obs = Observation {
        osd_versions: osd_versions(&[("something odd", 4)]),
        ..recovering(350.0)
    };
    sim.run(&obs, 15 * 60 + 15 + 5 * 60);
    assert_eq!(sim.state.ladder.rung, 4);
    let skip = messages(&sim, "LADDER_SKIP");
    assert!(
        skip.len() == 2
            && skip[0].contains("4 OSDs run something")
            && skip[1].starts_with("rung 3 (backfill lever) skipped"),
        "{skip:?}"
    );
}

#[test]
fn versions_not_known_now_hold_rung_1_and_the_next_read_decides() {
    for versions in [
        Err("cannot read `ceph versions`: `ceph versions` did not finish within 10s".to_string()),
        Ok(Vec::new()),
    ] {
        let mut sim = Sim::new(policy());
        let unknown = Observation {
            osd_versions: versions,
            ..recovering(350.0)
        };
        // A failed read is not a reason for the stronger pause: rung 1 is held, cycle after cycle.
        sim.run(&unknown, 15 * 60 + 15 + 10 * 60);
        assert_eq!(sim.state.ladder.rung, 1, "{:?}", sim.state.ladder);
        assert!(sim.state.ladder.pause.is_none());
        let wait = messages(&sim, "LADDER_WAIT");
        assert_eq!(wait.len(), 1, "{wait:?}");
        assert!(
            wait[0].starts_with("rung 2 (recovery limit) waits: ")
                && wait[0]
                    .ends_with("so rung 1 (high_client_ops) is held until the versions are read"),
            "{}",
            wait[0]
        );
        // Read again: Pacific, so the limit comes at once (the rung has long had its settle time).
        let actions = sim.run(&recovering(350.0), 15);
        assert_eq!(kinds(&actions), vec![ActionKind::Escalate]);
        assert_eq!(sim.state.ladder.rung, 2);
    }
}

#[test]
fn an_upgrade_under_way_takes_the_limit_back_and_the_ladder_goes_on_without_it() {
    let mut sim = Sim::new(policy());
    sim.run(&recovering(350.0), 15 * 60 + 15 + 5 * 60);
    assert_eq!(sim.state.ladder.rung, 2);
    // Two OSDs restarted on Quincy while rung 2 holds: the IOPS limit goes at once.
    let upgraded = Observation {
        osd_versions: osd_versions(&[(PACIFIC, 2), (QUINCY, 2)]),
        ..recovering(350.0)
    };
    // At once, as far as the change limits allow (5 minutes between changes).
    let actions = sim.run(&upgraded, 5 * 60);
    assert_eq!(kinds(&actions), vec![ActionKind::Descend]);
    assert!(
        actions[0].reason.starts_with(
            "rung 2 (custom profile, recovery limit 1000 IOPS per OSD) taken back: 2 OSDs run 17.2.6 quincy ("
        ),
        "{}",
        actions[0].reason
    );
    let back: Vec<(String, Option<String>)> = actions[0]
        .changes
        .iter()
        .map(|c| (c.key.clone(), c.to.clone()))
        .collect();
    assert!(
        back.contains(&(MCLOCK_RECOVERY_LIM.to_string(), None)),
        "{back:?}"
    );
    assert!(
        back.contains(&(
            MCLOCK_PROFILE_KEY.to_string(),
            Some("high_client_ops".into())
        )),
        "{back:?}"
    );
    assert_eq!(sim.state.ladder.rung, 1);
    // Still above the bound after the settle time: the pause, and no second try of the limit.
    sim.run(&upgraded, 5 * 60);
    assert_eq!(sim.state.ladder.rung, 4);
    assert!(
        sim.actions
            .iter()
            .filter(|(_, a)| a.kind == ActionKind::Escalate)
            .count()
            == 1
    );
}

#[test]
fn pacific_everywhere_climbs_to_the_limit_and_wpq_never_asks() {
    // The default observation is the lab's: 16.2.15 on every OSD.
    let mut sim = Sim::new(policy());
    sim.run(&recovering(350.0), 15 * 60 + 15 + 5 * 60);
    assert_eq!(sim.state.ladder.rung, 2);
    assert!(sim.notes.iter().all(|n| n.event != "LADDER_SKIP"));
    // Under wpq rung 2 is osd_recovery_sleep, whatever the release.
    let mut sim = Sim::new(policy());
    let wpq = Observation {
        op_queue: OpQueue::Other("wpq".into()),
        osd_versions: osd_versions(&[(QUINCY, 4)]),
        ..recovering(350.0)
    };
    sim.run(&wpq, 15 * 60 + 15 + 5 * 60);
    assert_eq!(sim.state.ladder.rung, 2);
    assert!(sim.notes.iter().all(|n| n.event != "LADDER_SKIP"));
}

#[test]
fn with_max_rung_2_a_refused_limit_holds_rung_1_and_says_so() {
    let mut p = policy();
    p.ladder.max_rung = 2;
    let mut sim = Sim::new(p);
    let obs = Observation {
        osd_versions: osd_versions(&[(QUINCY, 4)]),
        ..recovering(350.0)
    };
    let actions = sim.run(&obs, 15 * 60 + 15 + 10 * 60);
    assert_eq!(kinds(&actions), vec![ActionKind::Throttle]);
    assert_eq!(sim.state.ladder.rung, 1);
    let top: Vec<&str> = messages(&sim, "LADDER_TOP");
    assert_eq!(top.len(), 1, "{top:?}");
    assert!(
        top[0].contains("rung 2 skipped (above) and --enforcer.max-rung is 2"),
        "{}",
        top[0]
    );
}

/// Issue 15: after a recovery limit was taken back, RESTORE lists only what still differs from
/// the operator's (the profile), not the limit keys that are already unset (`(unset) -> (unset)`).
#[test]
fn restore_lists_only_the_keys_that_change() {
    let mut p = policy();
    p.ladder.recovery_limits = vec![super::policy::RecoveryLimit::Iops(100)];
    let mut sim = Sim::new(p);
    sim.run(&recovering(328.0), 15 * 60 + 15 + 5 * 60);
    sim.run(&recovering(810.0), 5 * 60);
    assert!(sim.state.ladder.limit_hurt, "the limit was taken back");
    assert_eq!(sim.configured.get(MCLOCK_RECOVERY_LIM), Some(&None));
    let actions = sim.run(&finished(), 6 * 60);
    let restore = actions
        .iter()
        .find(|a| a.kind == ActionKind::Restore)
        .expect("a restore");
    assert_eq!(
        restore.changes,
        vec![Change {
            key: MCLOCK_PROFILE_KEY.into(),
            from: Some("high_client_ops".into()),
            to: Some("balanced".into())
        }]
    );
    assert!(
        restore.describe().starts_with(
            "RESTORE osd_mclock_profile high_client_ops -> balanced: recovery finished"
        ),
        "{}",
        restore.describe()
    );
    assert!(!restore.describe().contains("(unset) -> (unset)"));
}

/// Issue 15: once the recovery is over, no line says "in this recovery so far" or that
/// recovery "runs unpaused".
#[test]
fn the_pause_is_not_said_to_go_on_after_the_recovery_ended() {
    let mut sim = Sim::new(policy());
    climb_to_pause(&mut sim, 350.0);
    // Step until a slice is paused, so that the end of the recovery unsets the flags.
    while !paused(&sim) {
        sim.now += 15.0;
        sim.step(recovering(350.0));
    }
    sim.state.flags_set = BTreeSet::from(["nobackfill".into(), "norecover".into()]);
    sim.now += 15.0;
    // The config database as the enforcer left it.
    let obs = Observation {
        configured: sim.configured.clone(),
        ..finished()
    };
    let d = decide(&sim.policy, &obs, &sim.state, sim.now);
    let ended = d
        .notes
        .iter()
        .find(|n| n.event == "PAUSE_ENDED")
        .expect("PAUSE_ENDED");
    assert!(
        ended
            .message
            .starts_with("PAUSE ended: recovery finished; paused ")
            && ended.message.ends_with(" in the recovery that ended"),
        "{}",
        ended.message
    );
    let unset = d
        .effects
        .iter()
        .find(|p| matches!(p.effect, super::effect::Effect::UnsetFlags { .. }))
        .expect("the flags come off");
    let after = super::apply_outcome(
        &sim.policy,
        &obs,
        d.next.clone(),
        &unset.effect,
        &super::effect::Outcome::Flags {
            set: vec![],
            unset: vec![("nobackfill".into(), Ok(())), ("norecover".into(), Ok(()))],
        },
        sim.now,
    );
    let line = &after.records[0].message;
    assert!(
        line.starts_with(
            "UNPAUSE: ceph osd unset nobackfill, norecover: the pause has ended; paused "
        ) && line.ends_with(" in the recovery that ended")
            && !line.contains("so far"),
        "{line}"
    );
}

/// The rung in force keeps when it was entered and the p99 that led to it, for `status`.
#[test]
fn each_rung_in_force_remembers_when_and_on_which_p99_it_was_entered() {
    let mut sim = Sim::new(policy());
    sim.run(&recovering(350.0), 15 * 60 + 15);
    let (rung, acted) = sim.state.ladder.in_force().expect("rung 1");
    assert_eq!((rung, acted.p99_seconds), (1, Some(0.35)));
    let throttled_at = acted.at;
    sim.run(&recovering(400.0), 5 * 60);
    let (rung, acted) = sim.state.ladder.in_force().expect("rung 2");
    assert_eq!((rung, acted.p99_seconds), (2, Some(0.4)));
    assert_eq!(acted.at, throttled_at + 300.0);
    // Recovery over and restored: nothing in force.
    sim.run(&finished(), 6 * 60);
    assert_eq!(sim.state.ladder.in_force(), None);
}

/// A SIGTERM while the pause rung holds: the flags come off (`flags::release`) and the pause
/// ends with the enforcer, its time paused still counted for the recovery. Before, the state
/// kept the pause, and the next start said "PAUSE ended: recovery finished" about a pause
/// nobody ran (an `experiment` row read its predecessor's).
#[test]
fn a_pause_ends_with_the_enforcer_at_shutdown() {
    let mut sim = Sim::new(policy());
    climb_to_pause(&mut sim, 350.0);
    sim.run(&recovering(350.0), 5 * 60);
    let paused_before = sim.state.ladder.paused_so_far(sim.now);
    assert!(paused_before > 0.0);
    let obs = Observation {
        configured: sim.configured.clone(),
        ..recovering(350.0)
    };
    let (d, _) = on_exit(&sim.policy, &obs, &sim.state, sim.now);
    assert!(d.next.ladder.pause.is_none(), "{:?}", d.next.ladder.pause);
    assert!(d.next.ladder.rung < 4, "rung {}", d.next.ladder.rung);
    assert_eq!(d.next.ladder.paused_seconds, paused_before);
    let said: Vec<&str> = d.notes.iter().map(|n| n.message.as_str()).collect();
    assert!(
        said.iter()
            .any(|m| m
                .starts_with("PAUSE ended: the enforcer stopped; recovery runs unpaused (paused ")),
        "{said:?}"
    );
    // The next start, with the recovery over, has no pause of its predecessor to end.
    let mut next = Sim::new(policy());
    next.state = at_start(d.next);
    next.now = sim.now + 60.0;
    next.step(finished());
    assert!(
        !next.notes.iter().any(|n| n.message.contains("PAUSE ended")),
        "{:?}",
        next.notes
    );
}
