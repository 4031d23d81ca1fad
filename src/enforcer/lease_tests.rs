//! The lease before each command (issue 33, point 4), under a paused clock: a leader on the
//! in-memory lock store, the backfill lever's holds sent through the fake actor, and what the
//! state keeps of a step that did not all reach Ceph.

use std::time::Duration;

use super::actor::{FakeActor, FakeUpmap};
use super::effect::{BackfillEffect, Effect, Planned};
use super::policy::{BaselineSpec, Mode, OnExit, Policy};
use super::state::EnforcerState;
use super::{Enforcer, LogStyle, Observation, TokioClock};
use crate::backfill::{BalancerStep, PlannedHold};
use crate::ceph::parse::upmap::{self, PgId, UpmapItem};
use crate::lease::fake::FakeCluster;
use crate::lease::{task, LeaseConfig};

fn fixture(name: &str) -> Vec<u8> {
    let path = format!(
        "{}/tests/fixtures/upmap/20-rebalance.{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// The lab's rebalance as the lever reads it (balancer on, mode upmap; two items of its own).
fn lab_upmap() -> FakeUpmap {
    FakeUpmap {
        pgs: crate::ceph::parse::pgs::parse(&fixture("ceph_pg_dump_pgs_brief.json")).expect("pgs"),
        map: upmap::view(&fixture("ceph_osd_dump.json")).expect("osd dump"),
        balancer: Some(upmap::balancer_status(&fixture("ceph_balancer_status.json")).expect("bal")),
        no_balancer_module: false,
        before: Default::default(),
    }
}

struct Leader {
    enforcer: Enforcer<FakeActor, TokioClock>,
    actor: FakeActor,
    cluster: FakeCluster,
    file: std::path::PathBuf,
}

impl Drop for Leader {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.file);
    }
}

/// An enforce-mode instance that took the (default 40/25/5 s) lease and read its empty stored
/// state, whose Ceph commands time out after `timeout` and whose monitor takes `takes` to
/// commit each upmap change.
async fn leader(name: &str, timeout: Duration, takes: Duration) -> Leader {
    let file = std::env::temp_dir().join(format!("crb-lease-{name}-{}.json", std::process::id()));
    let _ = std::fs::remove_file(&file);
    let policy = Policy {
        mode: Mode::Enforce,
        baseline: BaselineSpec::Fixed(Duration::from_millis(10)),
        state_file: file.clone(),
        ..Policy::default()
    };
    let actor = FakeActor::default();
    *actor.upmap.lock().expect("upmap") = Some(lab_upmap());
    *actor.upmap_takes.lock().expect("takes") = takes;
    let cluster = FakeCluster::new();
    let link = task::spawn(cluster.instance(name), LeaseConfig::DEFAULT);
    let mut enforcer = Enforcer::new(
        policy,
        actor.clone(),
        TokioClock::starting_at(1.8e9),
        EnforcerState::default(),
        Some(0.010),
        Duration::from_secs(15),
        LogStyle::Text,
    )
    .with_lease(link)
    .with_command_timeout(timeout);
    tokio::time::sleep(Duration::from_millis(10)).await;
    enforcer.take_over().await.expect("takes over");
    Leader {
        enforcer,
        actor,
        cluster,
        file,
    }
}

/// `n` holds (2.0 .. 2.(n-1) mapped 3->1) with the balancer paused first, as the lever's entry.
fn entry(n: u32) -> Planned {
    let hold = |seed| PlannedHold {
        pgid: PgId { pool: 2, seed },
        state: "active+remapped+backfilling".into(),
        up: vec![Some(3), Some(2), Some(0)],
        acting: vec![Some(1), Some(2), Some(0)],
        items: vec![UpmapItem { from: 3, to: 1 }],
        before: Vec::new(),
    };
    Planned {
        effect: Effect::Backfill(BackfillEffect {
            hold: (0..n).map(hold).collect(),
            release: Vec::new(),
            restore: Default::default(),
            balancer: BalancerStep::Pause {
                remember: Some(upmap::BalancerStatus {
                    active: true,
                    mode: "upmap".into(),
                }),
            },
            fsid: "ae347111-d76e-406c-9066-df6128c01492".into(),
            epoch: 52,
            why: "at most 2 PGs backfill at once (rung 3)".into(),
            backfilling: (19, 2),
            lifecycle: None,
        }),
        persist_first: Some("before the backfill lever's commands"),
    }
}

fn holds_sent(actor: &FakeActor) -> Vec<String> {
    actor
        .commands()
        .into_iter()
        .filter(|c| c.starts_with("osd pg-upmap-items 2."))
        .collect()
}

/// The PGs the record holds, as the OSD map's `pg-upmap-items` commands name them.
fn recorded(state: &EnforcerState) -> Vec<String> {
    state
        .backfill
        .held
        .iter()
        .map(|(id, h)| crate::backfill::record::set_items_command(*id, &h.items))
        .map(|c| c.trim_start_matches("ceph ").to_string())
        .collect()
}

fn messages(enforcer: &Enforcer<FakeActor, TokioClock>) -> Vec<String> {
    let shared = enforcer.shared();
    let v = shared.lock().expect("view");
    v.decisions.iter().map(|d| d.message.clone()).collect()
}

/// The lease is lost while the entry's holds go out eight at a time: the chunks after the
/// loss are not sent, and the state records exactly the holds that were.
#[tokio::test(start_paused = true)]
async fn the_lease_lost_mid_batch_stops_the_holds_and_the_record_is_what_was_sent() {
    // 2 s commands: (25 s - 2 s) / 2 s = 11 rounds, room for all 40 holds and `balancer off`.
    let mut l = leader("mid", Duration::from_secs(2), Duration::from_secs(2)).await;
    let cluster = l.cluster.clone();
    // Half a second in, the lock is another's (it expired on the OSD's clock): the renewal at
    // the next retry (5 s after the take) is refused and this instance stops acting then, in
    // the middle of the third round of holds.
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(500)).await;
        cluster.hand_to("b");
    });
    let failed = l
        .enforcer
        .execute(entry(40), &Observation::quiet(), 1.8e9)
        .await;
    assert!(failed, "a step cut short is a failed one");
    let sent = holds_sent(&l.actor);
    assert_eq!(
        sent.len(),
        24,
        "three rounds of 8 before the loss: {sent:?}"
    );
    assert_eq!(
        l.actor
            .commands()
            .iter()
            .filter(|c| *c == "balancer off")
            .count(),
        1
    );
    // What the state says is held is what Ceph got, command for command.
    let mut sent_sorted = sent.clone();
    sent_sorted.sort();
    let mut rec = recorded(l.enforcer.state());
    rec.sort();
    assert_eq!(rec, sent_sorted);
    let on_cluster = l.actor.upmap_now().expect("cluster").map.pg_upmap_items;
    for id in l.enforcer.state().backfill.held.keys() {
        assert!(on_cluster.contains_key(id), "{id} recorded but not held");
    }
    assert!(
        l.enforcer.state().backfill.balancer.is_some(),
        "the balancer was paused: its state to put back stays"
    );
    let said = messages(&l.enforcer);
    assert!(
        said.iter().any(|m| m.starts_with(
            "NOT SENT: the backfill lever's step: the lease was lost on the way, 16 command(s) not sent (ceph osd pg-upmap-items 2.18 3 1;"
        )),
        "{said:#?}"
    );
    assert!(
        said.iter().any(|m| m.starts_with("BACKFILL: held 24 PGs")),
        "{said:#?}"
    );
}

/// The leader is stopped (SIGSTOP, a paused VM) right after `balancer off` answered, past
/// the point where it checked the lease for the first holds, and another instance takes the
/// lease meanwhile (the lab's fault row 12). When it resumes, its holds are stopped by the
/// fence, not sent: Ceph gets none, the record keeps none, the step counts as failed, and the
/// balancer's state to put back stays for the next leader.
#[tokio::test(start_paused = true)]
async fn a_leader_stopped_between_the_lease_check_and_its_holds_sends_none_of_them() {
    let mut l = leader("stopped", Duration::from_secs(2), Duration::ZERO).await;
    *l.actor.stop_after_balancer_off.lock().expect("stop") = Some(Duration::from_secs(40));
    let (actor, cluster) = (l.actor.clone(), l.cluster.clone());
    tokio::spawn(async move {
        while actor
            .stopped_until
            .lock()
            .map(|s| s.is_none())
            .unwrap_or(false)
        {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        cluster.hand_to("b");
    });
    let failed = l
        .enforcer
        .execute(entry(10), &Observation::quiet(), 1.8e9)
        .await;
    assert!(failed, "a step cut short is a failed one");
    assert_eq!(
        l.actor.commands(),
        vec!["balancer off".to_string()],
        "nothing after the stop"
    );
    assert!(l.enforcer.state().backfill.held.is_empty());
    assert!(
        l.enforcer.state().backfill.balancer.is_some(),
        "the balancer was paused: its state to put back stays"
    );
    let said = messages(&l.enforcer);
    assert!(
        said.iter()
            .any(|m| m.starts_with("NOT SENT: the backfill lever's step: the lease was lost")),
        "{said:#?}"
    );
}

/// An entry of 40 holds with the default lease (25 s renew deadline) and 10 s commands: two
/// rounds fit, `balancer off` and 8 holds; the other 32 are left for the next cycle, and only
/// the 8 are recorded (stored with the lease too).
#[tokio::test(start_paused = true)]
async fn a_long_entry_is_cut_to_what_fits_in_the_renew_deadline() {
    let mut l = leader("cut", Duration::from_secs(10), Duration::from_secs(1)).await;
    let failed = l
        .enforcer
        .execute(entry(40), &Observation::quiet(), 1.8e9)
        .await;
    assert!(!failed, "holds left for later are no failure");
    let sent = holds_sent(&l.actor);
    assert_eq!(
        sent,
        (0..8)
            .map(|s| format!("osd pg-upmap-items 2.{s:x} 3 1"))
            .collect::<Vec<_>>()
    );
    let state = l.enforcer.state().clone();
    assert_eq!(recorded(&state), sent);
    // The copy stored with the lease (written after the step) says the same.
    let bytes = l
        .enforcer
        .lease
        .as_ref()
        .expect("lease")
        .memory()
        .read()
        .await
        .expect("read")
        .expect("stored");
    let stored = EnforcerState::from_bytes(&bytes, "fake").expect("parses");
    assert_eq!(recorded(&stored), sent);
    let said = messages(&l.enforcer);
    assert!(
        said.iter().any(|m| m.starts_with(
            "BACKFILL: 32 holds left for the next cycle (2.8, 2.9, 2.a, 2.b, 2.c, 2.d, 2.e, 2.f, ...): at most 2 round(s)"
        )),
        "{said:#?}"
    );
    assert!(
        said.iter().any(|m| m.starts_with("BACKFILL: held 8 PGs")),
        "{said:#?}"
    );
}

/// Without the lease nothing of a step is sent, and nothing of it stays recorded: the state
/// write before it is refused first (the change is not made), whatever the step.
#[tokio::test(start_paused = true)]
async fn a_former_leader_sends_nothing() {
    let mut l = leader("gone", Duration::from_secs(2), Duration::ZERO).await;
    l.cluster.hand_to("b");
    tokio::time::sleep(Duration::from_secs(6)).await;
    l.enforcer
        .execute(entry(4), &Observation::quiet(), 1.8e9)
        .await;
    assert!(l.actor.commands().is_empty(), "{:?}", l.actor.commands());
    assert!(l.enforcer.state().backfill.is_empty());
}

/// Issue 33: a state stored by a newer binary (a newer format, or a field this one does not
/// know) is neither acted on nor overwritten: the takeover stops with what to do.
#[tokio::test(start_paused = true)]
async fn a_state_a_newer_binary_stored_is_left_alone() {
    use crate::lease::LockStore;
    let mut current = EnforcerState::default();
    current.flags_set.insert("nobackfill".into());
    let mut ours: serde_json::Value =
        serde_json::from_slice(&current.to_bytes().expect("bytes")).expect("json");
    let mut newer_format = ours.clone();
    newer_format["written_by"]["format"] = serde_json::json!(super::stored::STATE_FORMAT + 1);
    ours["written_by"]["version"] = serde_json::json!("999.0.0");
    ours["backfill"]["pinned_by_hand"] = serde_json::json!(["2.a"]);
    for (stored, says) in [
        (newer_format, "newer than this binary"),
        (
            ours,
            "has fields this binary does not know (backfill.pinned_by_hand)",
        ),
    ] {
        let cluster = FakeCluster::new();
        let writer = cluster.instance("newer");
        writer.try_lock(Duration::from_secs(1)).await.expect("lock");
        let bytes = serde_json::to_vec(&stored).expect("bytes");
        writer.write_state(&bytes).await.expect("write");
        writer.unlock().await.expect("unlock");
        let actor = FakeActor::default();
        actor.flag_by_hand("nobackfill", true);
        let mut enforcer = Enforcer::new(
            Policy {
                mode: Mode::Enforce,
                baseline: BaselineSpec::Fixed(Duration::from_millis(10)),
                state_file: std::env::temp_dir()
                    .join(format!("crb-lease-newer-{}.json", std::process::id())),
                ..Policy::default()
            },
            actor.clone(),
            TokioClock::starting_at(1.8e9),
            EnforcerState::default(),
            Some(0.010),
            Duration::from_secs(15),
            LogStyle::Text,
        )
        .with_lease(task::spawn(cluster.instance("a"), LeaseConfig::DEFAULT));
        tokio::time::sleep(Duration::from_millis(10)).await;
        let why = enforcer.take_over().await.expect_err("refused");
        assert!(
            why.starts_with("the enforcer state in fake/ceph-recovery-budget.lease ")
                && why.contains(says),
            "{why}"
        );
        assert!(why.contains("never overwrites it"), "{why}");
        // Its nobackfill was not unset, and the stored state is as the newer one wrote it.
        assert!(actor.commands().is_empty(), "{:?}", actor.commands());
        let reader = cluster.instance("reader");
        assert_eq!(
            reader.read_state().await.expect("read").as_deref(),
            Some(&bytes[..])
        );
    }
}

/// A second instance on `l`'s fake cluster and actor, with `policy` (the leader's file
/// replaced by its own), that takes over once `l` released the lease.
async fn successor(l: &mut Leader, name: &str, change: impl FnOnce(&mut Policy)) -> Leader {
    let file = std::env::temp_dir().join(format!("crb-lease-{name}-{}.json", std::process::id()));
    let _ = std::fs::remove_file(&file);
    let mut policy = Policy {
        state_file: file.clone(),
        ..l.enforcer.policy.clone()
    };
    change(&mut policy);
    let link = task::spawn(l.cluster.instance(name), LeaseConfig::DEFAULT);
    if let Some(mut old) = l.enforcer.lease.take() {
        old.release(Duration::from_secs(5)).await;
    }
    let mut enforcer = Enforcer::new(
        policy,
        l.actor.clone(),
        TokioClock::starting_at(1.8e9 + 60.0),
        EnforcerState::default(),
        Some(0.010),
        Duration::from_secs(15),
        LogStyle::Text,
    )
    .with_lease(link)
    .with_command_timeout(Duration::from_secs(2));
    // The next retry (5 s) takes the released lock.
    tokio::time::sleep(Duration::from_secs(6)).await;
    enforcer.take_over().await.expect("takes over");
    Leader {
        enforcer,
        actor: l.actor.clone(),
        cluster: l.cluster.clone(),
        file,
    }
}

/// A leader whose lever holds 10 PGs (rung 3, N = 1), stored with the lease.
async fn holding_leader(name: &str) -> Leader {
    let mut l = leader(name, Duration::from_secs(2), Duration::ZERO).await;
    assert!(
        !l.enforcer
            .execute(entry(10), &Observation::quiet(), 1.8e9)
            .await
    );
    l.enforcer.state.ladder.rung = 3;
    l.enforcer.state.ladder.lever = Some(super::backfill_limit::LeverState::start(1, 1.8e9));
    assert!(l.enforcer.persist("the lever in force").await);
    assert_eq!(l.enforcer.state().backfill.held.len(), 10);
    l
}

/// The cluster as `l` sees it still holds every PG its record lists, the balancer paused.
fn assert_still_held(l: &Leader) {
    let on_cluster = l.actor.upmap_now().expect("cluster");
    assert!(
        !on_cluster.balancer.expect("balancer").active,
        "still paused"
    );
    for id in l.enforcer.state().backfill.held.keys() {
        assert!(
            on_cluster.map.pg_upmap_items.contains_key(id),
            "{id} released"
        );
    }
}

/// None of `held` is held any more on `l`'s cluster, and the balancer is back on.
fn assert_given_back(l: &Leader, held: &[PgId]) {
    let on_cluster = l.actor.upmap_now().expect("cluster");
    assert!(on_cluster.balancer.expect("balancer").active, "back on");
    for id in held {
        assert!(
            !on_cluster.map.pg_upmap_items.contains_key(id),
            "{id} still held"
        );
    }
}

/// A change of leader is not a reason for a p99 spike: the new leader takes the lever's
/// record on as it is (the PGs stay held, the balancer paused) and sends nothing at its
/// TAKEOVER; its cycles release them at the lever's pace. Given back at once, all ten PGs
/// re-peered and started their backfill in the same minute, what the lever exists to prevent.
#[tokio::test(start_paused = true)]
async fn a_new_leader_takes_the_levers_holds_on_and_sends_nothing_at_takeover() {
    let mut a = holding_leader("takeon-a").await;
    let sent_before = a.actor.commands().len();
    let b = successor(&mut a, "takeon-b", |_| {}).await;
    assert_eq!(
        a.actor.commands().len(),
        sent_before,
        "nothing sent at the takeover: {:?}",
        &a.actor.commands()[sent_before..]
    );
    assert_eq!(b.enforcer.state().backfill.held.len(), 10);
    assert!(b.enforcer.state().backfill.balancer.is_some());
    assert_still_held(&b);
}

/// A rolling restart with `--enforcer.on-exit keep-throttle`: the stopping leader leaves its
/// holds (and the balancer paused) in the stored record, and the next leader takes them on, so
/// no PG is released by the restart itself. With `restore`, the default, the stopping leader
/// gives every hold back and the balancer too: nobody may come to release them.
#[tokio::test(start_paused = true)]
async fn keep_throttle_leaves_the_holds_to_the_next_leader_and_restore_gives_them_back() {
    let mut a = holding_leader("keepholds-a").await;
    a.enforcer.policy.on_exit = OnExit::KeepThrottle;
    let sent_before = a.actor.commands().len();
    a.enforcer.shut_down().await;
    assert_eq!(
        a.actor.commands().len(),
        sent_before,
        "nothing sent at shutdown: {:?}",
        &a.actor.commands()[sent_before..]
    );
    assert!(a.enforcer.state().ladder.lever.is_some(), "kept in force");
    let b = successor(&mut a, "keepholds-b", |_| {}).await;
    assert_eq!(b.enforcer.state().backfill.held.len(), 10);
    assert!(b.enforcer.state().ladder.lever.is_some());
    assert_still_held(&b);

    let mut c = holding_leader("restoreholds-c").await;
    let held: Vec<PgId> = c.enforcer.state().backfill.held.keys().copied().collect();
    c.enforcer.shut_down().await;
    assert!(c.enforcer.state().backfill.is_empty());
    // Out of force in the record too: the next start must not follow the old N.
    assert!(c.enforcer.state().ladder.lever.is_none());
    assert_given_back(&c, &held);
}

/// Where the new leader does not run the lever (here `--enforcer.backfill-lever off`), nobody
/// would release the PGs at its pace: the TAKEOVER gives them all back and the balancer too.
#[tokio::test(start_paused = true)]
async fn a_new_leader_without_the_lever_gives_the_holds_back_at_takeover() {
    let mut a = holding_leader("giveback-a").await;
    let held: Vec<PgId> = a.enforcer.state().backfill.held.keys().copied().collect();
    let b = successor(&mut a, "giveback-b", |p| p.ladder.backfill_lever = false).await;
    assert!(b.enforcer.state().backfill.is_empty());
    // Its cycles must not hold PGs at the old leader's N.
    assert!(b.enforcer.state().ladder.lever.is_none());
    assert_given_back(&b, &held);
}
