use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::{sleep, Instant};

use super::fake::{FakeCluster, FakeLockStore};
use super::*;

const S: Duration = Duration::from_secs(1);

/// 10 s lease, 6 s renew deadline, 2 s retry period.
fn config() -> LeaseConfig {
    LeaseConfig::new(10 * S, 6 * S, 2 * S).expect("valid")
}

fn holder(store: &FakeLockStore) -> Option<Holder> {
    Some(store.me().clone())
}

type Log = Arc<Mutex<Vec<(Duration, LeaseEvent)>>>;

/// Steps `lease` every retry period until `until` (from `start`), logging events with their
/// time since `start`.
async fn drive(
    mut lease: Lease<FakeLockStore>,
    start: Instant,
    until: Duration,
    log: Log,
) -> Lease<FakeLockStore> {
    let retry = lease.elector().config().retry_period;
    while start.elapsed() < until {
        let step = lease.step().await;
        let t = start.elapsed();
        log.lock()
            .unwrap_or_else(|e| e.into_inner())
            .extend(step.events.into_iter().map(|e| (t, e)));
        sleep(retry).await;
    }
    lease
}

fn events(log: &Log) -> Vec<(Duration, LeaseEvent)> {
    log.lock().unwrap_or_else(|e| e.into_inner()).clone()
}

#[test]
fn config_orderings_are_checked_with_the_change_to_make() {
    assert!(LeaseConfig::DEFAULT.validate().is_ok());
    let e = LeaseConfig::new(10 * S, 10 * S, 2 * S).unwrap_err().0;
    assert!(
        e.contains("renew deadline (10s) must be shorter than the lease duration (10s)"),
        "{e}"
    );
    assert!(
        e.contains("lower the renew deadline or raise the lease duration"),
        "{e}"
    );
    let e = LeaseConfig::new(10 * S, 6 * S, 6 * S).unwrap_err().0;
    assert!(
        e.contains("retry period (6s) must be shorter than the renew deadline (6s)"),
        "{e}"
    );
    assert!(
        e.contains("lower the retry period or raise the renew deadline"),
        "{e}"
    );
    let e = LeaseConfig::new(10 * S, 6 * S, Duration::ZERO)
        .unwrap_err()
        .0;
    assert!(e.contains("retry period is 0"), "{e}");
}

/// Issue 33.4: the gap between stopping and a possible takeover holds a Ceph command and the
/// margin; a cycle's commands fit in the renew deadline.
#[test]
fn the_gap_must_hold_a_ceph_command_and_a_cycle_fits_the_renew_deadline() {
    let ten = 10 * S;
    assert!(LeaseConfig::DEFAULT.check_command_timeout(ten).is_ok());
    assert!(LeaseConfig::DEFAULT.check_command_timeout(13 * S).is_ok());
    let e = LeaseConfig::DEFAULT
        .check_command_timeout(14 * S)
        .unwrap_err()
        .0;
    assert!(e.contains("leaves 15s between a leader's stop and a possible takeover, less than the Ceph command timeout (14s) plus a 2s margin"), "{e}");
    // The 6/4/1 s lease of the lab tests leaves 2 s: too little for any command.
    let short = LeaseConfig::new(6 * S, 4 * S, S).expect("valid");
    assert!(short
        .check_command_timeout(Duration::from_millis(1))
        .is_err());
    assert!(LeaseConfig::new(16 * S, 4 * S, S)
        .expect("valid")
        .check_command_timeout(ten)
        .is_ok());
    // (25 s - 2 s) / 10 s: two rounds; never none.
    assert_eq!(LeaseConfig::DEFAULT.command_rounds(ten), 2);
    assert_eq!(LeaseConfig::DEFAULT.command_rounds(S), 23);
    assert_eq!(short.command_rounds(ten), 1);
    assert_eq!(short.command_rounds(Duration::ZERO), 1);
}

#[tokio::test(start_paused = true)]
async fn a_leader_stops_acting_exactly_at_the_renew_deadline_counted_from_the_send() {
    let mut e = Elector::new(config(), "a");
    let t0 = Instant::now();
    assert!(!e.is_leader_now(t0));
    // The answer came 1 s after the call was sent: the deadline counts from the send.
    let events = e.observe(t0, Outcome::TryLock(&Ok(Acquire::Acquired)), t0 + S);
    assert_eq!(
        events,
        vec![LeaseEvent::Acquired {
            me: "a".into(),
            previous: None
        }]
    );
    assert!(e.is_leader_now(t0 + 6 * S - Duration::from_nanos(1)));
    assert!(!e.is_leader_now(t0 + 6 * S));
    assert_eq!(e.tick(t0 + 5 * S), None);
    let lost = e.tick(t0 + 6 * S);
    assert!(
        matches!(
            &lost,
            Some(LeaseEvent::Lost { to: None, reason: LostReason::RenewDeadline { since_renew, .. }, .. }) if *since_renew == 6 * S
        ),
        "{lost:?}"
    );
    assert_eq!(e.next_op(), Op::TryLock);
}

/// The lock expired between a refused take and `lock info` (held by nobody known), then this
/// instance took it: the takeover still names the holder it saw before (fault row 4 on CI).
#[tokio::test(start_paused = true)]
async fn a_holder_seen_is_named_at_takeover_even_after_a_look_that_found_nobody() {
    let a = Holder {
        instance: "a".into(),
        client: "client.4100".into(),
    };
    let mut e = Elector::new(config(), "b");
    let t0 = Instant::now();
    let held = |by: Option<Holder>| Ok(Acquire::Held { by });
    let first = e.observe(t0, Outcome::TryLock(&held(Some(a.clone()))), t0);
    assert!(matches!(&first[..], [LeaseEvent::Standby { holder: Some(h), .. }] if *h == a));
    e.observe(t0 + 2 * S, Outcome::TryLock(&held(None)), t0 + 2 * S);
    let took = e.observe(
        t0 + 4 * S,
        Outcome::TryLock(&Ok(Acquire::Acquired)),
        t0 + 4 * S,
    );
    assert_eq!(
        took,
        vec![LeaseEvent::Acquired {
            me: "b".into(),
            previous: Some(a)
        }]
    );
}

#[tokio::test(start_paused = true)]
async fn a_success_answered_after_its_renew_deadline_does_not_count() {
    let mut e = Elector::new(config(), "a");
    let t0 = Instant::now();
    let events = e.observe(t0, Outcome::TryLock(&Ok(Acquire::Acquired)), t0 + 6 * S);
    assert!(events.is_empty(), "{events:?}");
    assert!(!e.is_leader_now(t0 + 6 * S));
}

#[tokio::test(start_paused = true)]
async fn renew_errors_keep_the_leader_until_the_deadline_and_are_named_when_it_stops() {
    let mut e = Elector::new(config(), "a");
    let t0 = Instant::now();
    e.observe(t0, Outcome::TryLock(&Ok(Acquire::Acquired)), t0);
    let err: Result<Renew, LeaseError> = Err(LeaseError::Failed {
        op: "renewing the lease",
        object: "p/o".into(),
        detail: "EIO".into(),
    });
    assert!(e
        .observe(t0 + 2 * S, Outcome::Renew(&err), t0 + 3 * S)
        .is_empty());
    assert!(e.is_leader_now(t0 + 5 * S));
    let Some(lost) = e.tick(t0 + 6 * S) else {
        panic!("no Lost at the renew deadline")
    };
    let line = lost.to_string();
    assert!(
        line.contains("lease lost by a, now held by nobody yet"),
        "{line}"
    );
    assert!(line.contains("not renewed for 6s"), "{line}");
    assert!(
        line.contains("last error: renewing the lease on p/o failed: EIO"),
        "{line}"
    );
}

#[tokio::test(start_paused = true)]
async fn only_the_holder_renews_and_a_second_instance_waits_while_it_does() {
    let cluster = FakeCluster::new();
    let a = cluster.instance("host-a/pid 1/x");
    let b = cluster.instance("host-b/pid 2/y");
    assert_eq!(a.try_lock(10 * S).await.unwrap(), Acquire::Acquired);
    // B can neither renew A's lock nor take it; it is told who holds it.
    assert_eq!(
        b.renew(10 * S).await.unwrap(),
        Renew::Lost { by: holder(&a) }
    );
    assert_eq!(
        b.try_lock(10 * S).await.unwrap(),
        Acquire::Held { by: holder(&a) }
    );
    // A's try_lock on its own lock renews it.
    assert_eq!(a.try_lock(10 * S).await.unwrap(), Acquire::Acquired);

    // Both loops for a minute: A leads throughout, B waits, one Standby line naming A.
    cluster.instance("unused"); // client ids need not be consecutive
    let start = Instant::now();
    let (log_a, log_b) = (Log::default(), Log::default());
    let ta = tokio::spawn(drive(
        Lease::new(a.clone(), config()),
        start,
        60 * S,
        log_a.clone(),
    ));
    let tb = tokio::spawn(drive(
        Lease::new(b.clone(), config()),
        start,
        60 * S,
        log_b.clone(),
    ));
    let (la, lb) = (ta.await.unwrap(), tb.await.unwrap());
    assert_eq!(
        events(&log_a),
        vec![(
            Duration::ZERO,
            LeaseEvent::Acquired {
                me: "host-a/pid 1/x".into(),
                previous: None
            }
        )]
    );
    assert_eq!(
        events(&log_b),
        vec![(
            Duration::ZERO,
            LeaseEvent::Standby {
                me: "host-b/pid 2/y".into(),
                holder: holder(&a)
            }
        )]
    );
    assert!(la.is_leader_now());
    assert!(!lb.is_leader_now());
    assert_eq!(cluster.holder(), holder(&a));
}

#[tokio::test(start_paused = true)]
async fn a_standby_takes_over_only_once_the_dead_leaders_lock_expired() {
    let cluster = FakeCluster::new();
    let a = cluster.instance("a");
    let b = cluster.instance("b");
    let start = Instant::now();
    // A leads for 7 s (steps at 0, 2, 4, 6 s), then dies: its last renewal was sent at 6 s.
    let log_a = Log::default();
    let la = drive(Lease::new(a.clone(), config()), start, 7 * S, log_a.clone()).await;
    drop(la);
    let log_b = Log::default();
    let start_b = Instant::now();
    assert_eq!(start_b - start, 8 * S);
    let lb = drive(
        Lease::new(b.clone(), config()),
        start,
        30 * S,
        log_b.clone(),
    )
    .await;
    let acquired: Vec<_> = events(&log_b)
        .into_iter()
        .filter(|(_, e)| matches!(e, LeaseEvent::Acquired { .. }))
        .collect();
    // The lock expires at 6 + 10 = 16 s; B tries at 8, 10, ..., 16 s: the one at 16 s wins.
    assert_eq!(
        acquired,
        vec![(
            16 * S,
            LeaseEvent::Acquired {
                me: "b".into(),
                previous: holder(&a)
            }
        )]
    );
    assert!(lb.is_leader_now());
    let line = acquired[0].1.to_string();
    assert_eq!(line, "lease acquired by b, previous holder a (client.4100)");
}

#[tokio::test(start_paused = true)]
async fn a_partitioned_leader_stops_at_its_renew_deadline_before_the_lock_expires() {
    let cluster = FakeCluster::new();
    let a = cluster.instance("a");
    let b = cluster.instance("b");
    let start = Instant::now();
    let (log_a, log_b) = (Log::default(), Log::default());
    let mut la = Lease::new(a.clone(), config());
    la.step().await;
    assert!(la.is_leader_now());
    la.write_state(b"a's state")
        .await
        .expect("the leader writes");

    // B waits in its own loop; A renews at 2 s, then loses the network at 3 s.
    let tb = tokio::spawn(drive(
        Lease::new(b.clone(), config()),
        start,
        30 * S,
        log_b.clone(),
    ));
    sleep(2 * S).await;
    assert!(la.step().await.events.is_empty());
    let last_renew = start.elapsed();
    assert_eq!(last_renew, 2 * S);
    sleep(S).await;
    a.set_partitioned(true);
    // A's loop: each step hangs until the time left before its deadline runs out.
    let ta = tokio::spawn(async move {
        let mut stopped_at = None;
        while start.elapsed() < 30 * S {
            let step = la.step().await;
            let t = start.elapsed();
            if stopped_at.is_none() && !la.is_leader_now() {
                stopped_at = Some(t);
            }
            log_a
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .extend(step.events.into_iter().map(|e| (t, e)));
            sleep(la.elector().config().retry_period).await;
        }
        (la, stopped_at, log_a)
    });
    let (la, stopped_at, log_a) = ta.await.unwrap();
    let mut lb = tb.await.unwrap();

    // A stopped acting at 2 + 6 = 8 s, B acquired at the first try after 2 + 10 = 12 s.
    assert_eq!(stopped_at, Some(8 * S));
    let a_events = events(&log_a);
    assert!(
        matches!(
            a_events.first(),
            Some((t, LeaseEvent::Lost { reason: LostReason::RenewDeadline { since_renew, error: Some(err) }, .. }))
                if *t == 8 * S && *since_renew == 6 * S && err.contains("no answer within")
        ),
        "{a_events:?}"
    );
    let b_acquired: Vec<Duration> = events(&log_b)
        .into_iter()
        .filter(|(_, e)| matches!(e, LeaseEvent::Acquired { .. }))
        .map(|(t, _)| t)
        .collect();
    assert_eq!(b_acquired, vec![12 * S]);
    assert!(stopped_at < b_acquired.first().copied());
    // B's loop ended first (A's hung steps kept A's going longer): one more round for B.
    lb.step().await;
    assert!(lb.is_leader_now() && !la.is_leader_now());

    // A refuses locally, and once the network is back the cluster refuses its write too.
    let refused = la.write_state(b"a's late state").await.unwrap_err();
    assert!(matches!(refused, LeaseError::NotLeader { .. }), "{refused}");
    a.set_partitioned(false);
    let fenced = a.write_state(b"a's late state").await.unwrap_err();
    assert!(matches!(fenced, LeaseError::NotHolder { .. }), "{fenced}");
    lb.write_state(b"b's state")
        .await
        .expect("the new leader writes");
    assert_eq!(
        a.read_state().await.unwrap().as_deref(),
        Some(&b"b's state"[..])
    );
}

#[tokio::test(start_paused = true)]
async fn state_writes_are_fenced_by_the_lock() {
    let cluster = FakeCluster::new();
    let a = cluster.instance("a");
    let b = cluster.instance("b");
    assert_eq!(a.read_state().await.unwrap(), None);
    let mut la = Lease::new(a.clone(), config());
    let mut lb = Lease::new(b.clone(), config());
    la.step().await;
    lb.step().await;
    // B is refused locally (standby) and by the store.
    assert!(matches!(
        lb.write_state(b"b").await,
        Err(LeaseError::NotLeader { .. })
    ));
    let e = b.write_state(b"b").await.unwrap_err();
    assert!(matches!(e, LeaseError::NotHolder { .. }), "{e}");
    assert!(
        e.to_string()
            .contains("this instance (b) does not hold the lease"),
        "{e}"
    );
    la.write_state(b"a").await.unwrap();
    assert_eq!(b.read_state().await.unwrap().as_deref(), Some(&b"a"[..]));
    assert_eq!(cluster.writes(), 1);
}

#[tokio::test(start_paused = true)]
async fn a_release_hands_over_at_once_and_the_new_leader_names_the_old() {
    let cluster = FakeCluster::new();
    let a = cluster.instance("a");
    let b = cluster.instance("b");
    let mut la = Lease::new(a.clone(), config());
    let mut lb = Lease::new(b.clone(), config());
    la.step().await;
    let standby = lb.step().await.events;
    assert_eq!(
        standby.iter().map(ToString::to_string).collect::<Vec<_>>(),
        vec!["standby: b does not hold the lease, held by a (client.4100)"]
    );
    let released = la.release().await;
    assert_eq!(
        released.events,
        vec![LeaseEvent::Lost {
            me: "a".into(),
            to: None,
            reason: LostReason::Released { error: None }
        }]
    );
    assert!(!la.is_leader_now());
    // Well before A's lock would have expired.
    sleep(S).await;
    let acquired = lb.step().await.events;
    assert_eq!(
        acquired,
        vec![LeaseEvent::Acquired {
            me: "b".into(),
            previous: holder(&a)
        }]
    );
    // A, back as a standby, sees B.
    let seen = la.step().await.events;
    assert_eq!(
        seen.iter().map(ToString::to_string).collect::<Vec<_>>(),
        vec!["standby: a does not hold the lease, held by b (client.4101)"]
    );
}

#[tokio::test(start_paused = true)]
async fn a_leader_told_another_holds_the_lock_steps_down_naming_it() {
    let mut e = Elector::new(config(), "a");
    let t0 = Instant::now();
    e.observe(t0, Outcome::TryLock(&Ok(Acquire::Acquired)), t0);
    let b = Holder {
        instance: "b".into(),
        client: "client.7".into(),
    };
    let events = e.observe(
        t0 + 2 * S,
        Outcome::Renew(&Ok(Renew::Lost {
            by: Some(b.clone()),
        })),
        t0 + 2 * S,
    );
    assert_eq!(
        events.iter().map(ToString::to_string).collect::<Vec<_>>(),
        vec!["lease lost by a, now held by b (client.7): the cluster refused the renewal (the lock expired or another instance holds it)"]
    );
    assert!(!e.is_leader_now(t0 + 2 * S));
    assert_eq!(e.holder_seen(), Some(&b));
}

/// Issue 33 (a): two instances given different lease pools hold two locks; only the one whose
/// lease object is the cluster's registered one leads, the other releases its lock and says
/// what to change. Both pools on one cluster share its monitors' `config-key` store.
#[tokio::test(start_paused = true)]
async fn an_instance_on_another_lease_pool_never_leads_beside_the_registered_one() {
    let mgr = FakeCluster::new();
    let other = mgr.pool("rbd-meta");
    let mut a = Lease::new(mgr.instance("a"), config());
    let mut b = Lease::new(other.instance("b"), config());
    let step = a.step().await;
    assert!(step.error.is_none() && step.unchecked.is_none(), "{step:?}");
    assert!(a.is_leader_now());
    assert_eq!(
        mgr.registered().as_deref(),
        Some(r#"{"pool":"fake","object":"ceph-recovery-budget.lease"}"#)
    );
    for _ in 0..3 {
        let step = b.step().await;
        assert!(!b.is_leader_now());
        let e = step.error.expect("refused").to_string();
        assert_eq!(e.split(": an instance").next(), Some("this instance's lease object is rbd-meta/ceph-recovery-budget.lease, but the cluster's is registered as fake/ceph-recovery-budget.lease (ceph config-key get ceph-recovery-budget/lease)"));
        assert!(
            e.contains("Give every instance the same --enforcer.lease-pool")
                && e.contains("ceph config-key rm ceph-recovery-budget/lease"),
            "{e}"
        );
        assert_eq!(other.holder(), None, "its lock is released at once");
        sleep(2 * S).await;
        a.step().await;
    }
    // Another instance on the registered pool takes over as before once `a` is gone.
    a.release().await;
    let mut c = Lease::new(mgr.instance("c"), config());
    let step = c.step().await;
    assert!(step.error.is_none(), "{step:?}");
    assert!(c.is_leader_now());
}

/// Without the grant for `config-key` (an existing deployment) the leader leads as before, and
/// the step says the check could not be made.
#[tokio::test(start_paused = true)]
async fn a_registry_that_cannot_be_read_does_not_stop_a_leader_but_is_said() {
    let cluster = FakeCluster::new();
    cluster.set_refuse_registry(true);
    let mut a = Lease::new(cluster.instance("a"), config());
    let step = a.step().await;
    assert!(a.is_leader_now());
    let e = step.unchecked.expect("said").to_string();
    assert!(e.contains(registry::CAPS), "{e}");
    // Renewals do not ask again.
    sleep(2 * S).await;
    assert!(a.step().await.unchecked.is_none());
}
