//! The enforcer's loop over recorded real cluster states (tests/fixtures), under a paused tokio
//! clock, with a fake actor recording every command it is asked to run.

use std::sync::Arc;
use std::time::Duration;

use ceph_recovery_budget::ceph::fake::{FakeClient, Reply};
use ceph_recovery_budget::collect::{commands, CollectSettings, Collector};
use ceph_recovery_budget::enforcer::actor::FakeActor;
use ceph_recovery_budget::enforcer::policy::{BaselineSpec, Mode, OnExit, Policy};
use ceph_recovery_budget::enforcer::state::Phase;
use ceph_recovery_budget::enforcer::{Enforcer, EnforcerState, LogStyle, TokioClock};

const INTERVAL: Duration = Duration::from_secs(15);

fn fixture(path: &str) -> Vec<u8> {
    let full = format!("{}/tests/fixtures/{path}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read(&full).unwrap_or_else(|e| panic!("fixture {full}: {e}"))
}

/// Real cluster states: `rebalance` is a recovery with no PG undersized (async recovery off),
/// `undersized` has 19 PGs undersized, `healthy-idle` is clean.
/// `log_recovery` is osd.3 back from a restart under writes, recovering from its PG log (25 PGs
/// `active+recovering+degraded`, none undersized); `no_mgr` a status with no mgr active, whose
/// PG states are the last the mgr reported (tests/fixtures/redundancy).
#[derive(Clone, Copy, Debug)]
enum ClusterState {
    Healthy,
    Rebalance,
    Undersized,
    LogRecovery,
    NoMgr,
}

impl ClusterState {
    fn dir(self) -> &'static str {
        match self {
            ClusterState::Healthy => "healthy-idle",
            ClusterState::Rebalance => "rebalance",
            ClusterState::Undersized => "undersized",
            ClusterState::LogRecovery | ClusterState::NoMgr => "redundancy",
        }
    }

    /// The recorded reply to a command (`ceph_status`, ...) in this state.
    fn reply(self, command: &str) -> Vec<u8> {
        match self {
            ClusterState::LogRecovery => fixture(&format!(
                "redundancy/osd-restarted-recovering.{command}.out"
            )),
            // No mgr: `pg dump` hangs; the pools and the PG listing as they were.
            ClusterState::NoMgr if command == "ceph_status" => {
                fixture("redundancy/no-mgr.ceph_status.out")
            }
            ClusterState::NoMgr => fixture(&format!(
                "redundancy/osd-restarted-recovering.{command}.out"
            )),
            _ => fixture(&format!("{}/{command}.json", self.dir())),
        }
    }
}

/// A fake cluster whose per-OSD write-latency counters grow by `ops` writes per cycle in latency
/// bucket `bucket` (raw bucket 7 = 3.2-6.4 ms, 12 = 102.4-204.8 ms), whose OSDs run whatever
/// profile the actor's config database says.
struct Cluster {
    client: FakeClient,
    actor: FakeActor,
    counts: [u64; 32],
    template: serde_json::Value,
}

impl Cluster {
    fn new(actor: FakeActor) -> Self {
        let template: serde_json::Value = serde_json::from_slice(&fixture(
            "healthy-idle/ceph_tell_osd.0_perf_histogram_dump.json",
        ))
        .unwrap();
        let c = Cluster {
            client: FakeClient::new(),
            actor,
            counts: [0; 32],
            template,
        };
        c.client.set(
            &commands::osd_config_get("osd_op_queue"),
            Reply::ok(
                (0..4)
                    .map(|i| format!("\nosd.{i}: {{\"osd_op_queue\":\"mclock_scheduler\"}}\n"))
                    .collect::<String>(),
            ),
        );
        c
    }

    fn set_state(&mut self, state: ClusterState, slow: bool) {
        self.client
            .set(&commands::status(), Reply::ok(state.reply("ceph_status")));
        self.client.set(
            &commands::pools(),
            Reply::ok(state.reply("ceph_osd_pool_ls_detail")),
        );
        self.client.set(
            &commands::pgs_brief(),
            Reply::ok(state.reply("ceph_pg_dump_pgs_brief")),
        );
        // 200 writes per cycle per OSD: fast ones, or slow ones during a bad recovery.
        self.counts[if slow { 12 } else { 7 }] += 200;
        let mut values = vec![vec![0u64; 32]; 32];
        for (k, n) in self.counts.iter().enumerate() {
            values[k][5] = *n;
        }
        let mut doc = self.template.clone();
        doc["osd"]["op_w_latency_in_bytes_histogram"]["values"] = serde_json::json!(values);
        let tell: String = (0..4).map(|i| format!("\nosd.{i}: {doc}\n")).collect();
        self.client.set(&commands::histograms(), Reply::ok(tell));
        // The OSDs run what the config database says (default high_client_ops when unset).
        let profile = self
            .actor
            .db
            .lock()
            .unwrap()
            .get("osd_mclock_profile")
            .cloned()
            .unwrap_or_else(|| "high_client_ops".into());
        self.client.set(
            &commands::osd_config_get("osd_mclock_profile"),
            Reply::ok(
                (0..4)
                    .map(|i| format!("\nosd.{i}: {{\"osd_mclock_profile\":\"{profile}\"}}\n"))
                    .collect::<String>(),
            ),
        );
    }
}

fn policy(mode: Mode, state_file: &str) -> Policy {
    Policy {
        mode,
        baseline: BaselineSpec::Fixed(Duration::from_millis(10)),
        breach_for: Duration::from_secs(60),
        latency_window: Duration::from_secs(30),
        settle: Duration::from_secs(60),
        min_interval: Duration::from_secs(30),
        verify_after: Duration::from_secs(15),
        state_file: state_file.into(),
        ..Policy::default()
    }
}

fn temp_state(name: &str) -> String {
    let p = std::env::temp_dir().join(format!("crb-loop-{name}-{}.json", std::process::id()));
    let _ = std::fs::remove_file(&p);
    p.display().to_string()
}

struct Rig {
    cluster: Cluster,
    collector: Collector<FakeClient>,
    enforcer: Enforcer<FakeActor, TokioClock>,
}

impl Rig {
    fn new(mode: Mode, state_file: &str, state: EnforcerState) -> Self {
        Self::new_at(mode, state_file, state, 1.8e9)
    }

    fn new_at(mode: Mode, state_file: &str, state: EnforcerState, wall: f64) -> Self {
        Self::with_policy(policy(mode, state_file), state, wall, Some(0.010))
    }

    fn with_policy(p: Policy, state: EnforcerState, wall: f64, fixed: Option<f64>) -> Self {
        let actor = FakeActor::default();
        actor.set_by_hand("osd_mclock_profile", "balanced");
        Self::with_actor(p, state, wall, fixed, actor)
    }

    /// On the cluster `actor` stands for (several rigs can share one: several instances).
    fn with_actor(
        p: Policy,
        state: EnforcerState,
        wall: f64,
        fixed: Option<f64>,
        actor: FakeActor,
    ) -> Self {
        let cluster = Cluster::new(actor.clone());
        let collector = Collector::new(
            cluster.client.clone(),
            CollectSettings {
                interval: INTERVAL,
                recovery_window: Duration::from_secs(60),
                latency_window: Duration::from_secs(30),
                ..Default::default()
            },
        );
        let enforcer = Enforcer::new(
            p,
            actor,
            TokioClock::starting_at(wall),
            state,
            fixed,
            INTERVAL,
            LogStyle::Text,
        );
        Rig {
            cluster,
            collector,
            enforcer,
        }
    }

    /// `cycles` collection cycles in `state`, each followed by an enforcer step.
    async fn play(&mut self, state: ClusterState, slow: bool, cycles: u32) {
        for _ in 0..cycles {
            // A sleep, not `advance`: other tasks' timers (the lease's renewals) fire in order.
            tokio::time::sleep(INTERVAL).await;
            self.cluster.set_state(state, slow);
            let snapshot = self.collector.collect_once().await;
            self.enforcer.step(&snapshot).await;
        }
    }

    fn commands(&self) -> Vec<String> {
        self.cluster.actor.commands()
    }

    fn events(&self) -> Vec<String> {
        let shared = self.enforcer.shared();
        let v = shared.lock().unwrap();
        v.decisions.iter().map(|d| d.event.clone()).collect()
    }
}

/// A cephx user without the write grants, in enforce mode, through the whole loop: the refusal
/// reaches the decision log as one PERMISSION DENIED line naming the grant, the change is not
/// tried again for 5 minutes, `status` says it; once granted, the next attempt works and `status`
/// no longer says it.
#[tokio::test(start_paused = true)]
async fn a_user_without_the_write_grants_is_told_what_to_grant() {
    use std::sync::atomic::Ordering;
    let file = temp_state("refused");
    let mut rig = Rig::new(Mode::Enforce, &file, EnforcerState::default());
    rig.cluster.actor.refuse.store(true, Ordering::SeqCst);
    let attempts = |rig: &Rig| {
        rig.commands()
            .iter()
            .filter(|c| c.starts_with("config set"))
            .count()
    };
    rig.play(ClusterState::Undersized, true, 2).await;
    assert_eq!(attempts(&rig), 1, "{:?}", rig.commands());
    let (line, said) = {
        let shared = rig.enforcer.shared();
        let v = shared.lock().unwrap();
        let failed = v.decisions.iter().find(|d| d.event == "ACTION_FAILED");
        (
            failed.map(|d| d.message.clone()).unwrap_or_default(),
            v.permission_denied.clone().unwrap_or_default(),
        )
    };
    let grant = r#"lacks mon 'allow command "config set" with who=osd'"#;
    assert!(
        line.contains("PERMISSION DENIED")
            && line.contains(grant)
            && line.contains("ceph auth caps"),
        "{line}"
    );
    assert!(said.contains(grant), "{said}");
    // 18 cycles of 15 s: 4.5 minutes without another attempt.
    rig.play(ClusterState::Undersized, true, 18).await;
    assert_eq!(attempts(&rig), 1, "{:?}", rig.commands());

    rig.cluster.actor.refuse.store(false, Ordering::SeqCst);
    rig.play(ClusterState::Undersized, true, 3).await;
    assert_eq!(attempts(&rig), 2, "{:?}", rig.commands());
    assert_eq!(rig.enforcer.state().phase, Phase::Suspended);
    let shared = rig.enforcer.shared();
    assert_eq!(shared.lock().unwrap().permission_denied, None);
}

#[tokio::test(start_paused = true)]
async fn a_whole_recovery_episode_in_enforce_mode() {
    let file = temp_state("episode");
    let mut rig = Rig::new(Mode::Enforce, &file, EnforcerState::default());

    rig.play(ClusterState::Healthy, false, 4).await;
    assert!(rig.commands().is_empty(), "healthy: nothing to do");

    // Recovery with no PG undersized and slow writes: breach, then throttle after 60 s.
    rig.play(ClusterState::Rebalance, true, 3).await;
    assert!(
        rig.commands().is_empty(),
        "breach younger than `for`: {:?}",
        rig.commands()
    );
    rig.play(ClusterState::Rebalance, true, 3).await;
    assert_eq!(
        rig.commands(),
        ["config set osd osd_mclock_profile high_client_ops"]
    );
    assert_eq!(rig.enforcer.state().phase, Phase::Throttled);
    // The state file knows the operator's original before anything else happens.
    let saved = EnforcerState::load(std::path::Path::new(&file)).unwrap();
    assert_eq!(
        saved.original.get("osd_mclock_profile"),
        Some(&Some("balanced".to_string()))
    );

    // Redundancy at risk: suspend, recovery first.
    rig.play(ClusterState::Undersized, true, 3).await;
    assert_eq!(
        rig.commands().last().unwrap(),
        "config set osd osd_mclock_profile high_recovery_ops"
    );
    assert_eq!(rig.enforcer.state().phase, Phase::Suspended);

    // Redundancy back, recovery continues: the bound applies again (resume, then throttle again).
    rig.play(ClusterState::Rebalance, true, 8).await;
    let cmds = rig.commands();
    assert_eq!(
        cmds[2], "config set osd osd_mclock_profile balanced",
        "{cmds:?}"
    );
    assert_eq!(
        cmds.last().unwrap(),
        "config set osd osd_mclock_profile high_client_ops",
        "{cmds:?}"
    );

    // Recovery done: after the settle time, exactly the original comes back.
    rig.play(ClusterState::Healthy, false, 6).await;
    let cmds = rig.commands();
    assert_eq!(
        cmds,
        [
            "config set osd osd_mclock_profile high_client_ops",
            "config set osd osd_mclock_profile high_recovery_ops",
            "config set osd osd_mclock_profile balanced",
            "config set osd osd_mclock_profile high_client_ops",
            "config set osd osd_mclock_profile balanced",
        ]
    );
    assert_eq!(rig.enforcer.state().phase, Phase::Idle);
    let events = rig.events();
    for e in [
        "RECOVERY_STARTED",
        "BREACH",
        "THROTTLE",
        "VERIFIED",
        "SUSPEND",
        "RESUME",
        "RECOVERY_FINISHED",
        "RESTORE",
    ] {
        assert!(events.iter().any(|x| x == e), "{e} missing from {events:?}");
    }
    // The throttle did not bring p99 down (the writes stayed slow): said plainly.
    assert!(events.iter().any(|x| x == "NO_EFFECT"), "{events:?}");
    let _ = std::fs::remove_file(&file);
}

/// The policy's exception on the recorded states of the lab: an OSD back from a restart under
/// writes leaves 25 PGs `active+recovering+degraded` and none undersized; every degraded object
/// of rbd-vms (size 3 / min_size 2) has 2 copies. The enforcer, throttling a rebalance with the
/// hour's only change spent, sets `high_recovery_ops` at the first cycle that sees it. A status
/// without an active mgr (its PG states are old) is blind: HOLD, nothing changed.
#[tokio::test(start_paused = true)]
async fn degraded_objects_at_min_size_suspend_the_bound_at_once_whatever_the_limits() {
    let file = temp_state("degraded");
    let mut p = policy(Mode::Enforce, &file);
    p.max_changes_per_hour = 1;
    p.min_interval = Duration::from_secs(600);
    let mut rig = Rig::with_policy(p, EnforcerState::default(), 1.8e9, Some(0.010));
    rig.play(ClusterState::Rebalance, true, 6).await;
    assert_eq!(
        rig.commands(),
        ["config set osd osd_mclock_profile high_client_ops"]
    );
    rig.play(ClusterState::LogRecovery, true, 1).await;
    assert_eq!(
        rig.commands().last().map(String::as_str),
        Some("config set osd osd_mclock_profile high_recovery_ops")
    );
    assert_eq!(rig.enforcer.state().phase, Phase::Suspended);
    assert_eq!(rig.enforcer.state().changes.len(), 1, "SUSPEND not counted");
    // Blind: the PG states are the mgr's last report. Nothing is changed on them.
    let before = rig.commands().len();
    rig.play(ClusterState::NoMgr, true, 3).await;
    assert_eq!(rig.commands().len(), before, "{:?}", rig.commands());
    assert_eq!(rig.enforcer.state().phase, Phase::Holding);
    // Redundancy back (the mgr too): the bound applies again.
    rig.play(ClusterState::Rebalance, true, 1).await;
    assert_eq!(
        rig.commands().last().map(String::as_str),
        Some("config set osd osd_mclock_profile balanced")
    );
    let _ = std::fs::remove_file(&file);
}

#[tokio::test(start_paused = true)]
async fn a_restart_in_the_middle_of_recovery_still_restores_the_original() {
    let file = temp_state("restart");
    let mut rig = Rig::new(Mode::Enforce, &file, EnforcerState::default());
    rig.play(ClusterState::Rebalance, true, 7).await;
    assert_eq!(
        rig.commands(),
        ["config set osd osd_mclock_profile high_client_ops"]
    );
    let db = rig.cluster.actor.db.clone();
    drop(rig);

    // A new process: state from the file, the cluster's config as the old one left it.
    let state = EnforcerState::load(std::path::Path::new(&file)).unwrap();
    // The wall clock went on while the process was down.
    let mut rig = Rig::new_at(Mode::Enforce, &file, state, 1.8e9 + 600.0);
    *rig.cluster.actor.db.lock().unwrap() = db.lock().unwrap().clone();
    rig.play(ClusterState::Healthy, false, 6).await;
    assert_eq!(
        rig.commands(),
        ["config set osd osd_mclock_profile balanced"]
    );
    let _ = std::fs::remove_file(&file);
}

#[tokio::test(start_paused = true)]
async fn observe_mode_changes_nothing_but_says_what_it_would_do() {
    let file = temp_state("observe");
    let mut rig = Rig::new(Mode::Observe, &file, EnforcerState::default());
    rig.play(ClusterState::Rebalance, true, 7).await;
    rig.play(ClusterState::Healthy, false, 6).await;
    assert!(rig.commands().is_empty(), "{:?}", rig.commands());
    let shared = rig.enforcer.shared();
    let v = shared.lock().unwrap();
    let would: Vec<&str> = v
        .decisions
        .iter()
        .filter(|d| !d.performed && d.message.starts_with("(observe mode) would"))
        .map(|d| d.event.as_str())
        .collect();
    assert_eq!(would, ["THROTTLE", "RESTORE"]);
    let _ = std::fs::remove_file(&file);
}

/// What `status` and the landing page read: in observe mode the simulated change is reported as
/// what the enforcer would have set, never as "set by the enforcer".
#[tokio::test(start_paused = true)]
async fn observe_mode_status_says_would_have_set_not_set_by_the_enforcer() {
    let file = temp_state("observe-status");
    let mut rig = Rig::new(Mode::Observe, &file, EnforcerState::default());
    rig.play(ClusterState::Undersized, true, 2).await;
    let view = rig.enforcer.shared().lock().unwrap().clone();
    assert!(!view.applied.is_empty(), "{:?}", view.applied);
    let report = ceph_recovery_budget::http::report::StatusReport {
        enforcer: Some(serde_json::to_value(&view).unwrap()),
        ..Default::default()
    };
    let text = report.lines().join("\n");
    assert!(
        text.contains("observe mode, would have set: osd_mclock_profile=high_recovery_ops"),
        "{text}"
    );
    assert!(!text.contains("set by the enforcer"), "{text}");
    assert!(rig.commands().is_empty(), "{:?}", rig.commands());
    let _ = std::fs::remove_file(&file);
}

#[tokio::test(start_paused = true)]
async fn a_failing_config_set_is_retried_with_backoff_and_counted() {
    let file = temp_state("fail");
    let mut rig = Rig::new(Mode::Enforce, &file, EnforcerState::default());
    rig.cluster
        .actor
        .fail_next
        .store(2, std::sync::atomic::Ordering::SeqCst);
    rig.play(ClusterState::Undersized, true, 1).await;
    rig.play(ClusterState::Undersized, true, 1).await;
    rig.play(ClusterState::Undersized, true, 1).await;
    rig.play(ClusterState::Undersized, true, 2).await;
    let cmds = rig.commands();
    // Attempt at 15 s fails, retry after 10 s (at 30 s) fails, next after 20 s (at 60 s) succeeds.
    assert_eq!(cmds.len(), 3, "{cmds:?}");
    let shared = rig.enforcer.shared();
    let v = shared.lock().unwrap();
    assert_eq!(v.action_failures_total, 2);
    assert_eq!(
        v.decisions
            .iter()
            .filter(|d| d.event == "ACTION_FAILED")
            .count(),
        2
    );
    assert_eq!(v.phase, Phase::Suspended);
    let _ = std::fs::remove_file(&file);
}

#[tokio::test(start_paused = true)]
async fn the_run_loop_holds_when_snapshots_stop_arriving() {
    let file = temp_state("hold");
    let mut rig = Rig::new(Mode::Enforce, &file, EnforcerState::default());
    rig.cluster.set_state(ClusterState::Undersized, true);
    let snapshot = rig.collector.collect_once().await;
    let (tx, rx) = tokio::sync::watch::channel(Arc::new(snapshot));
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let shared = rig.enforcer.shared();
    let actor = rig.cluster.actor.clone();
    let task = tokio::spawn(rig.enforcer.run(rx, stop_rx));
    tx.send_modify(|_| {});
    // No new snapshot for a minute: the data is older than 3 intervals.
    tokio::time::sleep(Duration::from_secs(61)).await;
    {
        let v = shared.lock().unwrap();
        assert_eq!(v.phase, Phase::Holding, "{:?}", v.decisions);
    }
    stop_tx.send(true).unwrap();
    task.await.unwrap();
    // It acted once on fresh data (suspend), then held; the exit handed the profile back.
    assert_eq!(
        actor.commands(),
        [
            "config set osd osd_mclock_profile high_recovery_ops",
            "config set osd osd_mclock_profile balanced"
        ]
    );
    let _ = std::fs::remove_file(&file);
}

#[tokio::test(start_paused = true)]
async fn a_learned_baseline_comes_from_writes_without_recovery_and_survives_a_restart() {
    let file = temp_state("learned");
    let mut p = policy(Mode::Enforce, &file);
    p.baseline = BaselineSpec::Learned;
    p.learn_window = Duration::from_secs(60);
    let mut rig = Rig::with_policy(p.clone(), EnforcerState::default(), 1.8e9, None);
    // Slow writes during a recovery are never learned, and without a baseline nothing is throttled.
    rig.play(ClusterState::Rebalance, true, 8).await;
    assert!(rig.commands().is_empty());
    assert!(rig.enforcer.state().learned.is_none());
    assert!(rig.events().iter().any(|e| e == "NO_BASELINE"));
    // A minute of fast writes without recovery: p99 within 3.2-6.4 ms is learned.
    rig.play(ClusterState::Healthy, false, 6).await;
    let learned = rig
        .enforcer
        .state()
        .learned
        .expect("learned baseline")
        .p99_seconds;
    assert!((0.0032..=0.0064).contains(&learned), "{learned}");
    drop(rig);
    // A restart keeps it; the next bad recovery is throttled against it.
    let state = EnforcerState::load(std::path::Path::new(&file)).unwrap();
    assert_eq!(state.learned.map(|l| l.p99_seconds), Some(learned));
    let mut rig = Rig::with_policy(p, state, 1.8e9 + 600.0, None);
    rig.play(ClusterState::Rebalance, true, 7).await;
    assert_eq!(
        rig.commands(),
        ["config set osd osd_mclock_profile high_client_ops"]
    );
    let _ = std::fs::remove_file(&file);
}

#[tokio::test(start_paused = true)]
async fn a_set_that_timed_out_but_took_effect_counts_as_done() {
    let file = temp_state("took-effect");
    let mut rig = Rig::new(Mode::Enforce, &file, EnforcerState::default());
    rig.cluster
        .actor
        .apply_then_fail
        .store(1, std::sync::atomic::Ordering::SeqCst);
    rig.play(ClusterState::Rebalance, true, 7).await;
    assert_eq!(
        rig.commands(),
        ["config set osd osd_mclock_profile high_client_ops"]
    );
    assert_eq!(rig.enforcer.state().phase, Phase::Throttled);
    // Recovery ends: the original comes back, no false OVERRIDE.
    rig.play(ClusterState::Healthy, false, 6).await;
    assert_eq!(
        rig.commands().last().unwrap(),
        "config set osd osd_mclock_profile balanced"
    );
    assert!(!rig.events().iter().any(|e| e == "OVERRIDE"));
    let _ = std::fs::remove_file(&file);
}

/// `--latency.source prometheus`: the enforcer judges by the p99 Prometheus answers (here fast
/// writes in the collected histograms, but a slow p99 from Prometheus), and holds when the
/// answers stop or fail.
#[tokio::test(start_paused = true)]
async fn p99_from_prometheus_drives_the_throttle_and_its_absence_holds() {
    use ceph_recovery_budget::latency::prometheus::ExternalP99;
    let file = temp_state("prometheus");
    let (tx, rx) = tokio::sync::watch::channel(None);
    let mut rig = Rig::new(Mode::Enforce, &file, EnforcerState::default());
    rig.enforcer = std::mem::replace(
        &mut rig.enforcer,
        Enforcer::new(
            policy(Mode::Enforce, &file),
            rig.cluster.actor.clone(),
            TokioClock::starting_at(1.8e9),
            EnforcerState::default(),
            Some(0.010),
            INTERVAL,
            LogStyle::Text,
        ),
    )
    .with_external_p99(rx);

    // No answer yet: stale, so nothing is done even during a recovery.
    rig.play(ClusterState::Rebalance, false, 6).await;
    assert!(rig.commands().is_empty(), "{:?}", rig.commands());
    assert!(
        rig.events().contains(&"HOLD".to_string()),
        "{:?}",
        rig.events()
    );

    // Prometheus says 150 ms (bound 20 ms), answering every cycle: throttle after `for`.
    for _ in 0..6 {
        tx.send(Some(ExternalP99 {
            at: tokio::time::Instant::now() + INTERVAL,
            value: Ok(Some(0.150)),
        }))
        .unwrap();
        rig.play(ClusterState::Rebalance, false, 1).await;
    }
    assert_eq!(
        rig.commands(),
        ["config set osd osd_mclock_profile high_client_ops"]
    );

    // The query fails: held, and said with Prometheus' reason.
    tx.send(Some(ExternalP99 {
        at: tokio::time::Instant::now() + INTERVAL,
        value: Err("bad_data: parse error".into()),
    }))
    .unwrap();
    rig.play(ClusterState::Rebalance, false, 1).await;
    let shared = rig.enforcer.shared();
    let decisions: Vec<_> = shared.lock().unwrap().decisions.iter().cloned().collect();
    assert!(
        decisions.iter().any(
            |d| d.event == "HOLD" && d.message.contains("query to Prometheus failed: bad_data")
        ),
        "{decisions:#?}"
    );
    // Nothing acted on while blind.
    assert_eq!(rig.commands().len(), 1);
    let _ = std::fs::remove_file(&file);
}

/// A policy that climbs straight from the throttle to the pause (no recovery-limit steps),
/// judging each rung after 30 s, pausing half of each minute.
/// The pause (rung 4) straight after the throttle: the backfill lever (rung 3) is off here, it
/// has its own loop test (`the_backfill_lever_holds_releases_and_hands_everything_back`).
fn pause_policy(file: &str) -> Policy {
    let mut p = policy(Mode::Enforce, file);
    p.ladder.settle = Duration::from_secs(30);
    p.ladder.backfill_lever = false;
    p.ladder.recovery_limits = Vec::new();
    p.ladder.pause.period = 60.0;
    p.ladder.pause.start_share = 0.5;
    p.ladder.pause.tick = INTERVAL.as_secs_f64();
    p
}

fn flag_commands(rig: &Rig) -> Vec<String> {
    rig.commands()
        .into_iter()
        .filter(|c| c.starts_with("osd "))
        .collect()
}

#[tokio::test(start_paused = true)]
async fn the_pause_rung_records_its_flags_first_and_clears_them_on_shutdown() {
    let file = temp_state("pause");
    let mut rig = Rig::with_policy(
        pause_policy(&file),
        EnforcerState::default(),
        1.8e9,
        Some(0.010),
    );
    *rig.cluster.actor.state_file.lock().unwrap() = Some(file.clone().into());
    // Slow writes during a rebalance: throttle after 60 s, pause 30 s later, duty-cycled.
    rig.play(ClusterState::Rebalance, true, 14).await;
    let flags = flag_commands(&rig);
    assert!(
        flags.starts_with(&[
            "osd set nobackfill".to_string(),
            "osd set norecover".to_string(),
            "osd unset nobackfill".to_string(),
            "osd unset norecover".to_string(),
        ]),
        "{flags:?}"
    );
    // Every flag was in the state file before it was set.
    let seen = rig
        .cluster
        .actor
        .flag_in_state_file_when_set
        .lock()
        .unwrap()
        .clone();
    assert!(!seen.is_empty() && seen.iter().all(|s| *s), "{seen:?}");
    assert!(rig.events().contains(&"PAUSE".to_string()));
    let m = rig.enforcer.shared();
    let paused_seconds = m.lock().unwrap().paused_seconds;
    assert!(paused_seconds >= 30.0, "{paused_seconds}");

    // Get it paused, then stop the enforcer (SIGTERM): its flags go, the operator's stay.
    for _ in 0..4 {
        if rig.enforcer.state().flags_set.is_empty() {
            rig.play(ClusterState::Rebalance, true, 1).await;
        }
    }
    assert!(!rig.enforcer.state().flags_set.is_empty(), "paused now");
    rig.cluster.actor.flag_by_hand("noout", true);
    let actor = rig.cluster.actor.clone();
    let (_snap_tx, snap_rx) = tokio::sync::watch::channel(Arc::new(
        ceph_recovery_budget::collect::Snapshot::empty(INTERVAL),
    ));
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let task = tokio::spawn(rig.enforcer.run(snap_rx, stop_rx));
    tokio::task::yield_now().await;
    stop_tx.send(true).unwrap();
    task.await.unwrap();
    let now = actor.flags_now();
    assert!(
        !now.contains("nobackfill") && !now.contains("norecover"),
        "{now:?}"
    );
    assert!(now.contains("noout"), "someone else's flag stays");
    let saved = EnforcerState::load(std::path::Path::new(&file)).unwrap();
    assert!(saved.flags_set.is_empty(), "{:?}", saved.flags_set);
}

#[tokio::test(start_paused = true)]
async fn flags_a_previous_run_left_are_cleared_at_start() {
    let file = temp_state("pause-start");
    let left = EnforcerState {
        flags_set: ["nobackfill".to_string(), "norecover".to_string()].into(),
        ..Default::default()
    };
    left.save(std::path::Path::new(&file)).unwrap();
    let rig = Rig::with_policy(pause_policy(&file), left, 1.8e9, Some(0.010));
    let actor = rig.cluster.actor.clone();
    actor.flag_by_hand("nobackfill", true);
    actor.flag_by_hand("norecover", true);
    let (_snap_tx, snap_rx) = tokio::sync::watch::channel(Arc::new(
        ceph_recovery_budget::collect::Snapshot::empty(INTERVAL),
    ));
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let task = tokio::spawn(rig.enforcer.run(snap_rx, stop_rx));
    tokio::time::advance(Duration::from_secs(1)).await;
    tokio::task::yield_now().await;
    assert!(actor.flags_now().is_empty(), "{:?}", actor.flags_now());
    stop_tx.send(true).unwrap();
    task.await.unwrap();
    assert_eq!(
        actor.commands(),
        ["osd unset nobackfill", "osd unset norecover"]
    );
}

#[tokio::test(start_paused = true)]
async fn an_operators_nobackfill_is_never_touched_and_makes_the_enforcer_hold() {
    let file = temp_state("pause-foreign");
    let mut rig = Rig::with_policy(
        pause_policy(&file),
        EnforcerState::default(),
        1.8e9,
        Some(0.010),
    );
    rig.play(ClusterState::Rebalance, true, 6).await;
    rig.cluster.actor.flag_by_hand("nobackfill", true);
    rig.play(ClusterState::Rebalance, true, 12).await;
    assert!(
        !rig.commands().iter().any(|c| c.contains("nobackfill")),
        "{:?}",
        rig.commands()
    );
    assert_eq!(rig.enforcer.state().phase, Phase::Holding);
    assert!(rig.cluster.actor.flags_now().contains("nobackfill"));
}

#[tokio::test(start_paused = true)]
async fn observe_mode_never_sets_a_flag() {
    let file = temp_state("pause-observe");
    let mut p = pause_policy(&file);
    p.mode = Mode::Observe;
    let mut rig = Rig::with_policy(p, EnforcerState::default(), 1.8e9, Some(0.010));
    rig.play(ClusterState::Rebalance, true, 20).await;
    assert!(flag_commands(&rig).is_empty(), "{:?}", rig.commands());
    assert!(
        rig.events().contains(&"PAUSE".to_string()),
        "{:?}",
        rig.events()
    );
}

#[tokio::test(start_paused = true)]
async fn a_failed_osd_set_is_taken_back_and_tried_again_not_blamed_on_a_person() {
    let file = temp_state("pause-fail");
    let mut rig = Rig::with_policy(
        pause_policy(&file),
        EnforcerState::default(),
        1.8e9,
        Some(0.010),
    );
    // The first `osd set` fails (nobackfill), everything after works.
    rig.cluster
        .actor
        .fail_flags
        .store(1, std::sync::atomic::Ordering::SeqCst);
    rig.play(ClusterState::Rebalance, true, 20).await;
    let events = rig.events();
    assert!(events.contains(&"ACTION_FAILED".to_string()), "{events:?}");
    assert!(
        events.contains(&"PAUSE".to_string()),
        "paused on a later try: {events:?}"
    );
    let shared = rig.enforcer.shared();
    let v = shared.lock().unwrap();
    assert!(
        !v.decisions
            .iter()
            .any(|d| d.message.contains("unset by someone else")),
        "a failure is not a person"
    );
}

/// Rung 2's mClock limit is written in Pacific's IOPS: the loop reads `ceph versions` before it
/// and, with an OSD on Quincy, goes from the throttle to the pause without writing the limit.
#[tokio::test(start_paused = true)]
async fn an_osd_on_another_release_skips_the_iops_limit_in_the_loop() {
    for (quincy, expect_limit) in [(false, true), (true, false)] {
        let file = temp_state(&format!("versions-{quincy}"));
        let mut p = pause_policy(&file);
        p.ladder.recovery_limits =
            vec![ceph_recovery_budget::enforcer::policy::RecoveryLimit::Iops(
                300,
            )];
        let mut rig = Rig::with_policy(p, EnforcerState::default(), 1.8e9, Some(0.010));
        if quincy {
            let line =
                "ceph version 17.2.6 (d7ff0d10654d2280e08f1ab989c7cdf3064446a5) quincy (stable)";
            *rig.cluster.actor.versions.lock().unwrap() =
                Some(Ok(std::collections::BTreeMap::from([(
                    ceph_recovery_budget::ceph::parse::versions::version_line(line),
                    4,
                )])));
        }
        // Throttle after 60 s; the next rung 30 s later.
        rig.play(ClusterState::Rebalance, true, 10).await;
        let wrote_limit = rig
            .commands()
            .iter()
            .any(|c| c.contains("osd_mclock_scheduler_background_recovery_lim 300"));
        assert_eq!(wrote_limit, expect_limit, "{:?}", rig.commands());
        let skipped_limit = {
            let shared = rig.enforcer.shared();
            let v = shared.lock().unwrap();
            v.decisions
                .iter()
                .any(|d| d.event == "LADDER_SKIP" && d.message.starts_with("rung 2"))
        };
        assert_eq!(skipped_limit, quincy, "{:?}", rig.events());
        if quincy {
            assert!(
                flag_commands(&rig).contains(&"osd set nobackfill".to_string()),
                "{:?}",
                rig.commands()
            );
        }
        let _ = std::fs::remove_file(&file);
    }
}

/// The lab's rebalance as the backfill lever reads it (tests/fixtures/upmap/20-rebalance: 19
/// PGs backfilling at once under mClock, the balancer on in upmap mode).
fn upmap_rebalance() -> ceph_recovery_budget::enforcer::actor::FakeUpmap {
    use ceph_recovery_budget::ceph::parse::{pgs, upmap};
    let read = |name: &str| {
        std::fs::read(format!(
            "{}/tests/fixtures/upmap/20-rebalance.{name}",
            env!("CARGO_MANIFEST_DIR")
        ))
        .unwrap()
    };
    ceph_recovery_budget::enforcer::actor::FakeUpmap {
        pgs: pgs::parse(&read("ceph_pg_dump_pgs_brief.json")).unwrap(),
        map: upmap::view(&read("ceph_osd_dump.json")).unwrap(),
        balancer: Some(upmap::balancer_status(&read("ceph_balancer_status.json")).unwrap()),
        no_balancer_module: false,
        before: Default::default(),
    }
}

/// The pause policy with the backfill lever on, on the lab's rebalance; each upmap command
/// takes `takes` (the fake monitor's commit).
fn lever_rig(file: &str, takes: Duration) -> Rig {
    let mut p = pause_policy(file);
    p.ladder.backfill_lever = true;
    let rig = Rig::with_policy(p, EnforcerState::default(), 1.8e9, Some(0.010));
    *rig.cluster.actor.upmap.lock().unwrap() = Some(upmap_rebalance());
    *rig.cluster.actor.upmap_takes.lock().unwrap() = takes;
    rig
}

/// Slow writes during the rebalance until the ladder is on rung 3 (at most 12 cycles).
async fn to_rung3(rig: &mut Rig) {
    for _ in 0..12 {
        rig.play(ClusterState::Rebalance, true, 1).await;
        if rig.enforcer.state().ladder.rung == 3 {
            break;
        }
    }
}

/// Rung 3 through the loop: after the throttle (no change: the OSDs' own profile would be it on
/// Pacific; here a change), the lever pauses the balancer and holds PGs, each recorded in the
/// state file first; SHUTDOWN releases exactly those and puts the balancer back.
#[tokio::test(start_paused = true)]
async fn the_backfill_lever_holds_releases_and_hands_everything_back() {
    let file = temp_state("lever");
    let mut rig = lever_rig(&file, Duration::ZERO);
    to_rung3(&mut rig).await;
    let cmds = rig.commands();
    let first_hold = cmds
        .iter()
        .position(|c| c.starts_with("osd pg-upmap-items"))
        .unwrap_or_else(|| panic!("no hold: {cmds:?} {:?}", rig.events()));
    let off = cmds
        .iter()
        .position(|c| c == "balancer off")
        .expect("balancer off");
    assert!(off < first_hold, "{cmds:?}");
    assert!(
        !cmds.iter().any(|c| c.starts_with("osd set")),
        "the lever, not the pause: {cmds:?}"
    );
    let state = rig.enforcer.state().clone();
    assert_eq!(state.ladder.rung, 3);
    let held: Vec<String> = state.backfill.held.keys().map(|k| k.to_string()).collect();
    assert!(!held.is_empty());
    // The state file has every held PG (written before the holds).
    let saved = EnforcerState::load(std::path::Path::new(&file)).unwrap();
    assert_eq!(saved.backfill.held.len(), held.len());
    let shared = rig.enforcer.shared();
    {
        let v = shared.lock().unwrap();
        assert_eq!(v.backfill_held, held.len());
        assert!(v
            .ladder_rung_name
            .starts_with("rung 3 (backfill lever: at most "));
        assert_eq!(
            v.backfill_balancer_paused.as_deref(),
            Some("on, mode upmap")
        );
    }

    // Slow writes all along: N = 1 did not hold the bound, so the pause follows, the holds kept.
    rig.play(ClusterState::Rebalance, true, 6).await;
    assert_eq!(rig.enforcer.state().ladder.rung, 4);
    assert_eq!(rig.enforcer.state().backfill.held.len(), held.len());
    assert!(rig.commands().iter().any(|c| c == "osd set nobackfill"));

    rig.enforcer.shut_down().await;
    let cmds = rig.commands();
    assert!(cmds.iter().any(|c| c == "osd unset nobackfill"), "{cmds:?}");
    for pg in &held {
        assert!(
            cmds.contains(&format!("osd rm-pg-upmap-items {pg}")),
            "{pg} not released: {cmds:?}"
        );
    }
    let cluster = rig.cluster.actor.upmap_now().unwrap();
    assert!(
        cluster.balancer.as_ref().unwrap().active,
        "balancer back on"
    );
    // Only the balancer's own two items are left.
    assert_eq!(
        cluster.map.pg_upmap_items.len(),
        2,
        "{:?}",
        cluster.map.pg_upmap_items
    );
    let saved = EnforcerState::load(std::path::Path::new(&file)).unwrap();
    assert!(saved.backfill.is_empty(), "{:?}", saved.backfill);
    let _ = std::fs::remove_file(&file);
}

/// The entry's holds go to the monitors together: with each command taking 1 s (a monitor
/// committing each in its own OSD map), the BACKFILL line (logged once they are done) follows
/// the ESCALATE by a second per eight PGs, not by a second per PG (on the lab, 12 holds one
/// after the other took 12 s, every held PG re-peering in its own epoch).
#[tokio::test(start_paused = true)]
async fn the_lever_holds_its_pgs_together() {
    let file = temp_state("lever-together");
    let mut rig = lever_rig(&file, Duration::from_secs(1));
    to_rung3(&mut rig).await;
    let held = rig.enforcer.state().backfill.held.len();
    assert!(held >= 9, "{held} held: {:?}", rig.commands());
    let time_of = |event: &str| {
        let shared = rig.enforcer.shared();
        let v = shared.lock().unwrap();
        v.decisions
            .iter()
            .find(|d| d.event == event)
            .map(|d| d.time)
            .unwrap_or_else(|| panic!("no {event}: {:?}", v.decisions))
    };
    let took = time_of("BACKFILL") - time_of("ESCALATE");
    // Eight at a time: a second per eight PGs.
    let rounds = held.div_ceil(8) as f64;
    assert!(
        (1.0..=rounds + 0.5).contains(&took),
        "{held} holds took {took} s"
    );
    let _ = std::fs::remove_file(&file);
}

/// PGs gone under the holds (issue 33): the EC pool deleted (the monitors drop its upmap
/// entries with it) and the newest held PG of the other merged away by a pg_num reduction
/// (its entry still listed). SHUTDOWN drops them from the record without a command (the fake
/// monitors would refuse one with the lab's ENOENT), releases every other and puts the
/// balancer back: the stored state holds nothing.
#[tokio::test(start_paused = true)]
async fn pgs_gone_under_the_holds_leave_the_record_and_the_rest_is_handed_back() {
    use ceph_recovery_budget::ceph::parse::upmap::PgId;
    let file = temp_state("lever-gone");
    let mut rig = lever_rig(&file, Duration::ZERO);
    to_rung3(&mut rig).await;
    let held: Vec<PgId> = rig.enforcer.state().backfill.held.keys().copied().collect();
    assert!(held.iter().any(|id| id.pool == 3), "{held:?}");
    let merged = held
        .iter()
        .filter(|id| id.pool == 2)
        .max_by_key(|id| id.seed)
        .copied()
        .expect("a held PG of pool 2");
    {
        let mut guard = rig.cluster.actor.upmap.lock().unwrap();
        let c = guard.as_mut().unwrap();
        c.map.pools.remove(&3);
        c.map.pg_upmap_items.retain(|id, _| id.pool != 3);
        c.pgs.retain(|p| p.pool_id != 3);
        let pg_num = u64::from(merged.seed);
        c.map.pools.get_mut(&2).unwrap().pg_num = pg_num;
        c.pgs.retain(|p| {
            p.pgid
                .parse::<PgId>()
                .is_ok_and(|id| id.pool != 2 || u64::from(id.seed) < pg_num)
        });
        c.map.epoch += 1;
    }
    let from = rig.commands().len();
    rig.enforcer.shut_down().await;
    let cmds = commands_since(&rig, from);
    for id in &held {
        let released = cmds.iter().any(|c| c.ends_with(&format!(" {id}")));
        assert_eq!(released, id.pool == 2 && *id != merged, "{id}: {cmds:?}");
    }
    let cluster = rig.cluster.actor.upmap_now().unwrap();
    assert!(cluster.balancer.as_ref().unwrap().active, "{cmds:?}");
    assert!(
        saved(&file).backfill.is_empty(),
        "{:?}",
        saved(&file).backfill
    );
    let _ = std::fs::remove_file(&file);
}

// ---- Clean exit (SIGTERM, SIGINT): what `--enforcer.on-exit` hands back, within the deadline.

/// The commands the actor ran from the `from`-th on.
fn commands_since(rig: &Rig, from: usize) -> Vec<String> {
    rig.commands().into_iter().skip(from).collect()
}

fn saved(file: &str) -> EnforcerState {
    EnforcerState::load(std::path::Path::new(file)).unwrap()
}

/// Rung 2 under mClock (one recovery limit, 300 IOPS), no pause rung.
fn rung2_policy(file: &str) -> Policy {
    let mut p = pause_policy(file);
    p.ladder.recovery_limits = vec![ceph_recovery_budget::enforcer::policy::RecoveryLimit::Iops(
        300,
    )];
    p.ladder.max_rung = 2;
    p
}

/// Slow writes during a rebalance until the enforcer holds rung 2.
async fn up_to_rung2(rig: &mut Rig) {
    for _ in 0..16 {
        if rig.enforcer.state().ladder.rung >= 2 {
            return;
        }
        rig.play(ClusterState::Rebalance, true, 1).await;
    }
    panic!("no rung 2: {:?}", rig.commands());
}

#[tokio::test(start_paused = true)]
async fn sigterm_during_a_throttle_restores_the_operators_profile() {
    let file = temp_state("exit-throttle");
    let mut rig = Rig::new(Mode::Enforce, &file, EnforcerState::default());
    rig.play(ClusterState::Rebalance, true, 7).await;
    assert_eq!(
        rig.commands(),
        ["config set osd osd_mclock_profile high_client_ops"]
    );
    // SIGTERM as `serve` delivers it: the run loop's shutdown channel fires.
    let actor = rig.cluster.actor.clone();
    let shared = rig.enforcer.shared();
    let (_snap_tx, snap_rx) = tokio::sync::watch::channel(Arc::new(
        ceph_recovery_budget::collect::Snapshot::empty(INTERVAL),
    ));
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let task = tokio::spawn(rig.enforcer.run(snap_rx, stop_rx));
    tokio::task::yield_now().await;
    stop_tx.send(true).unwrap();
    task.await.unwrap();
    assert_eq!(
        actor.commands(),
        [
            "config set osd osd_mclock_profile high_client_ops",
            "config set osd osd_mclock_profile balanced"
        ]
    );
    // The state file says so: nothing left to restore at the next start.
    let s = saved(&file);
    assert!(s.original.is_empty() && s.applied.is_none(), "{s:?}");
    let v = shared.lock().unwrap();
    let last = v.decisions.back().unwrap();
    assert_eq!(last.event, "RESTORE");
    assert!(
        last.message.starts_with(
            "SHUTDOWN: restored osd_mclock_profile balanced (was high_client_ops, set by the enforcer)"
        ),
        "{}",
        last.message
    );
    let _ = std::fs::remove_file(&file);
}

#[tokio::test(start_paused = true)]
async fn sigterm_at_rung_2_takes_the_limit_back_before_the_profile() {
    let file = temp_state("exit-rung2");
    let mut rig = Rig::with_policy(
        rung2_policy(&file),
        EnforcerState::default(),
        1.8e9,
        Some(0.010),
    );
    up_to_rung2(&mut rig).await;
    let from = rig.commands().len();
    rig.enforcer.shut_down().await;
    assert_eq!(
        commands_since(&rig, from),
        [
            "tell osd.* config unset osd_mclock_scheduler_background_recovery_lim",
            "tell osd.* config unset osd_mclock_scheduler_background_recovery_res",
            "config rm osd osd_mclock_scheduler_background_recovery_lim",
            "config rm osd osd_mclock_scheduler_background_recovery_res",
            "config set osd osd_mclock_profile balanced",
        ]
    );
    let s = saved(&file);
    assert!(s.original.is_empty() && s.applied.is_none(), "{s:?}");
    let db = rig.cluster.actor.db.lock().unwrap().clone();
    assert_eq!(
        db.get("osd_mclock_profile").map(String::as_str),
        Some("balanced")
    );
    assert!(
        !db.contains_key("osd_mclock_scheduler_background_recovery_lim"),
        "{db:?}"
    );
    let _ = std::fs::remove_file(&file);
}

#[tokio::test(start_paused = true)]
async fn sigterm_during_a_pause_slice_unsets_the_flags_first() {
    let file = temp_state("exit-pause");
    let mut rig = Rig::with_policy(
        pause_policy(&file),
        EnforcerState::default(),
        1.8e9,
        Some(0.010),
    );
    for _ in 0..24 {
        if !rig.enforcer.state().flags_set.is_empty() {
            break;
        }
        rig.play(ClusterState::Rebalance, true, 1).await;
    }
    assert!(!rig.enforcer.state().flags_set.is_empty(), "paused now");
    rig.cluster.actor.flag_by_hand("noout", true);
    let from = rig.commands().len();
    rig.enforcer.shut_down().await;
    let cmds = commands_since(&rig, from);
    assert_eq!(
        cmds[..2],
        ["osd unset nobackfill", "osd unset norecover"],
        "{cmds:?}"
    );
    assert_eq!(
        cmds.last().map(String::as_str),
        Some("config set osd osd_mclock_profile balanced"),
        "{cmds:?}"
    );
    let now = rig.cluster.actor.flags_now();
    assert!(
        now.contains("noout") && now.len() == 1,
        "someone else's flag stays: {now:?}"
    );
    let s = saved(&file);
    assert!(s.flags_set.is_empty() && s.original.is_empty(), "{s:?}");
    let _ = std::fs::remove_file(&file);
}

#[tokio::test(start_paused = true)]
async fn keep_throttle_keeps_the_profile_and_hands_back_the_rest() {
    let file = temp_state("exit-keep");
    let mut p = rung2_policy(&file);
    p.on_exit = OnExit::KeepThrottle;
    let mut rig = Rig::with_policy(p, EnforcerState::default(), 1.8e9, Some(0.010));
    up_to_rung2(&mut rig).await;
    let from = rig.commands().len();
    rig.enforcer.shut_down().await;
    // Rung 2 goes (its limit, and the `custom` profile back to the rung-1 throttle).
    assert_eq!(
        commands_since(&rig, from),
        [
            "tell osd.* config unset osd_mclock_scheduler_background_recovery_lim",
            "tell osd.* config unset osd_mclock_scheduler_background_recovery_res",
            "config rm osd osd_mclock_scheduler_background_recovery_lim",
            "config rm osd osd_mclock_scheduler_background_recovery_res",
            "config set osd osd_mclock_profile high_client_ops",
        ]
    );
    // The throttle stays, and the state file still knows the operator's profile.
    let s = saved(&file);
    assert_eq!(
        s.original.get("osd_mclock_profile"),
        Some(&Some("balanced".to_string()))
    );
    assert_eq!(s.ladder.rung, 1);
    // The next start restores it when recovery has ended.
    let db = rig.cluster.actor.db.clone();
    drop(rig);
    let mut rig = Rig::new_at(Mode::Enforce, &file, s, 1.8e9 + 600.0);
    *rig.cluster.actor.db.lock().unwrap() = db.lock().unwrap().clone();
    rig.play(ClusterState::Healthy, false, 6).await;
    assert!(
        rig.commands()
            .contains(&"config set osd osd_mclock_profile balanced".to_string()),
        "{:?}",
        rig.commands()
    );
    assert!(saved(&file).original.is_empty());
    let _ = std::fs::remove_file(&file);
}

#[tokio::test(start_paused = true)]
async fn a_key_changed_by_hand_is_not_touched_at_exit() {
    let file = temp_state("exit-hand");
    let mut rig = Rig::new(Mode::Enforce, &file, EnforcerState::default());
    rig.play(ClusterState::Rebalance, true, 7).await;
    assert_eq!(rig.enforcer.state().phase, Phase::Throttled);
    // Between two cycles the operator takes over; the exit reads the config afresh.
    rig.cluster
        .actor
        .set_by_hand("osd_mclock_profile", "high_recovery_ops");
    let from = rig.commands().len();
    rig.enforcer.shut_down().await;
    assert!(
        commands_since(&rig, from).is_empty(),
        "{:?}",
        rig.commands()
    );
    let db = rig.cluster.actor.db.lock().unwrap().clone();
    assert_eq!(
        db.get("osd_mclock_profile").map(String::as_str),
        Some("high_recovery_ops")
    );
    let _ = std::fs::remove_file(&file);
}

#[tokio::test(start_paused = true)]
async fn a_failing_config_set_at_exit_is_reported_with_the_command_to_run() {
    let file = temp_state("exit-fail");
    let mut rig = Rig::new(Mode::Enforce, &file, EnforcerState::default());
    rig.play(ClusterState::Rebalance, true, 7).await;
    rig.cluster
        .actor
        .fail_next
        .store(1, std::sync::atomic::Ordering::SeqCst);
    let started = tokio::time::Instant::now();
    rig.enforcer.shut_down().await;
    assert!(started.elapsed() <= Duration::from_secs(20));
    let shared = rig.enforcer.shared();
    let v = shared.lock().unwrap();
    let last = v.decisions.back().unwrap();
    assert_eq!(last.event, "ACTION_FAILED");
    assert!(
        last.message
            .contains("Run by hand: ceph config set osd osd_mclock_profile balanced"),
        "{}",
        last.message
    );
    // Still the enforcer's to restore at the next start.
    let s = saved(&file);
    assert_eq!(
        s.original.get("osd_mclock_profile"),
        Some(&Some("balanced".to_string()))
    );
    let _ = std::fs::remove_file(&file);
}

#[tokio::test(start_paused = true)]
async fn a_hanging_mon_at_exit_does_not_hold_the_process_past_the_deadline() {
    let file = temp_state("exit-stall");
    let mut rig = Rig::with_policy(
        rung2_policy(&file),
        EnforcerState::default(),
        1.8e9,
        Some(0.010),
    );
    up_to_rung2(&mut rig).await;
    rig.cluster
        .actor
        .stall_next
        .store(1, std::sync::atomic::Ordering::SeqCst);
    let started = tokio::time::Instant::now();
    rig.enforcer.shut_down().await;
    let took = started.elapsed();
    assert!(
        took >= Duration::from_secs(20) && took <= Duration::from_secs(21),
        "{took:?}"
    );
    // The profile step never ran; the state file keeps every original for the next start.
    let s = saved(&file);
    assert_eq!(
        s.original.get("osd_mclock_profile"),
        Some(&Some("balanced".to_string()))
    );
    assert!(
        !rig.commands()
            .iter()
            .any(|c| c.ends_with("osd_mclock_profile balanced")),
        "{:?}",
        rig.commands()
    );
    let _ = std::fs::remove_file(&file);
}

#[tokio::test(start_paused = true)]
async fn observe_mode_changes_nothing_at_exit() {
    let file = temp_state("exit-observe");
    let mut rig = Rig::new(Mode::Observe, &file, EnforcerState::default());
    rig.play(ClusterState::Rebalance, true, 7).await;
    assert!(
        rig.enforcer.state().applied.is_some(),
        "a simulated throttle"
    );
    rig.enforcer.shut_down().await;
    assert!(rig.commands().is_empty(), "{:?}", rig.commands());
    let _ = std::fs::remove_file(&file);
}

// ------------------------------------------------------------------------------------------
// The lease (issue 12, points 1 and 2): one active enforcer per cluster, its state stored with
// the lease. Several instances share one cluster (one FakeActor: one config database and OSD
// map) and one lease store (FakeCluster: the lock and the state object).
// ------------------------------------------------------------------------------------------

use ceph_recovery_budget::lease::fake::{FakeCluster, FakeLockStore};
use ceph_recovery_budget::lease::{task, LeaseConfig};

fn lease_config() -> LeaseConfig {
    LeaseConfig::new(
        Duration::from_secs(6),
        Duration::from_secs(4),
        Duration::from_secs(1),
    )
    .expect("valid")
}

/// An instance with its own (empty) local directory, on the shared cluster and lease.
fn instance(p: Policy, actor: &FakeActor, store: FakeLockStore) -> Rig {
    instance_at(p, actor, store, 1.8e9)
}

/// Started at wall-clock time `wall` (one timeline for instances started one after another).
fn instance_at(p: Policy, actor: &FakeActor, store: FakeLockStore, wall: f64) -> Rig {
    let rig = Rig::with_actor(
        p,
        EnforcerState::default(),
        wall,
        Some(0.010),
        actor.clone(),
    );
    Rig {
        enforcer: rig.enforcer.with_lease(task::spawn(store, lease_config())),
        ..rig
    }
}

/// Cycles of two instances side by side on one cluster.
async fn play_both(a: &mut Rig, b: &mut Rig, state: ClusterState, slow: bool, cycles: u32) {
    for _ in 0..cycles {
        tokio::time::sleep(INTERVAL).await;
        for rig in [&mut *a, &mut *b] {
            rig.cluster.set_state(state, slow);
            let snapshot = rig.collector.collect_once().await;
            rig.enforcer.step(&snapshot).await;
        }
    }
}

fn stored(cluster: &FakeCluster) -> EnforcerState {
    let store = cluster.instance("reader");
    let bytes = futures_read(&store);
    EnforcerState::from_bytes(&bytes, "fake").expect("stored state parses")
}

fn futures_read(store: &FakeLockStore) -> Vec<u8> {
    use ceph_recovery_budget::lease::LockStore;
    let fut = store.read_state();
    // The fake answers at once; no runtime needed beyond one poll.
    let waker = std::task::Waker::noop();
    let mut cx = std::task::Context::from_waker(waker);
    let mut fut = std::pin::pin!(fut);
    match fut.as_mut().poll(&mut cx) {
        std::task::Poll::Ready(r) => r.expect("read").expect("a state was stored"),
        std::task::Poll::Pending => panic!("the fake store answers at once"),
    }
}

use std::future::Future;

#[tokio::test(start_paused = true)]
async fn two_instances_on_one_cluster_only_the_leader_changes_it_and_the_operators_profile_comes_back(
) {
    let cluster = FakeCluster::new();
    let actor = FakeActor::default();
    actor.set_by_hand("osd_mclock_profile", "balanced");
    let mut a = instance(
        rung2_policy(&temp_state("lease-a")),
        &actor,
        cluster.instance("a"),
    );
    tokio::time::sleep(Duration::from_millis(10)).await;
    let mut b = instance(
        rung2_policy(&temp_state("lease-b")),
        &actor,
        cluster.instance("b"),
    );
    tokio::time::sleep(Duration::from_millis(10)).await;
    assert_eq!(cluster.holder().map(|h| h.instance), Some("a".to_string()));

    // The sequence of the issue: a rebalance with slow writes, both instances watching.
    play_both(&mut a, &mut b, ClusterState::Rebalance, true, 14).await;
    let cmds = actor.commands();
    assert_eq!(
        cmds.iter()
            .filter(|c| c.contains("high_client_ops"))
            .count(),
        1,
        "one throttle, by the leader alone: {cmds:?}"
    );
    assert_eq!(a.enforcer.state().ladder.rung, 2, "{cmds:?}");
    {
        let v = b.enforcer.shared();
        let v = v.lock().unwrap();
        assert_eq!(v.phase, Phase::Standby);
        assert_eq!(v.leader, Some(false));
        assert!(
            v.lease_holder.as_deref().unwrap_or("").starts_with("a "),
            "{:?}",
            v.lease_holder
        );
        assert!(v.applied.is_empty(), "a standby shows nothing as its own");
    }
    // What the leader must hand back is stored with the lease.
    let s = stored(&cluster);
    assert_eq!(
        s.original.get("osd_mclock_profile"),
        Some(&Some("balanced".to_string()))
    );

    // Recovery over: the leader restores; the operator's `balanced` is back, no limit left.
    play_both(&mut a, &mut b, ClusterState::Healthy, false, 8).await;
    let db = actor.db.lock().unwrap().clone();
    assert_eq!(
        db.get("osd_mclock_profile").map(String::as_str),
        Some("balanced"),
        "{db:?}"
    );
    assert!(
        !db.contains_key("osd_mclock_scheduler_background_recovery_lim"),
        "{db:?}"
    );
    let standby_cmds: Vec<String> = actor.commands();
    assert!(
        standby_cmds.iter().all(|c| !c.is_empty()),
        "sanity: {standby_cmds:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn the_leader_dies_at_rung_2_and_a_standby_with_an_empty_disk_restores_exactly_the_operators_settings(
) {
    let cluster = FakeCluster::new();
    let actor = FakeActor::default();
    actor.set_by_hand("osd_mclock_profile", "balanced");
    let before = actor.db.lock().unwrap().clone();
    let t0 = tokio::time::Instant::now();
    let file_a = temp_state("dies-a");
    let mut a = instance(rung2_policy(&file_a), &actor, cluster.instance("a"));
    tokio::time::sleep(Duration::from_millis(10)).await;
    up_to_rung2(&mut a).await;
    assert_ne!(
        *actor.db.lock().unwrap(),
        before,
        "rung 2 changed the cluster"
    );
    // SIGKILL: no hand-back, no release; its local file goes with its node.
    drop(a);
    let _ = std::fs::remove_file(&file_a);

    let file_b = temp_state("dies-b");
    let wall = 1.8e9 + t0.elapsed().as_secs_f64();
    let mut b = instance_at(rung2_policy(&file_b), &actor, cluster.instance("b"), wall);
    // Standby until the dead leader's lock expires (6 s), then it takes over.
    b.play(ClusterState::Rebalance, true, 1).await;
    let took_over = b.enforcer.shared().lock().unwrap().leader;
    assert_eq!(took_over, Some(true));
    let cmds_before = actor.commands().len();
    // Recovery ends: B restores what A changed, from the state A stored before each change.
    b.play(ClusterState::Healthy, false, 8).await;
    let log: Vec<String> = b
        .enforcer
        .shared()
        .lock()
        .unwrap()
        .decisions
        .iter()
        .map(|d| d.message.clone())
        .collect();
    assert_eq!(
        *actor.db.lock().unwrap(),
        before,
        "{:?} {log:#?}",
        commands_since(&b, cmds_before)
    );
    let s = stored(&cluster);
    assert!(s.original.is_empty() && s.applied.is_none(), "{s:?}");
    let _ = std::fs::remove_file(&file_b);
}

#[tokio::test(start_paused = true)]
async fn a_new_leader_clears_the_pause_flags_the_dead_one_set() {
    let cluster = FakeCluster::new();
    let actor = FakeActor::default();
    actor.set_by_hand("osd_mclock_profile", "balanced");
    let mut a = instance(
        pause_policy(&temp_state("pause-a")),
        &actor,
        cluster.instance("a"),
    );
    tokio::time::sleep(Duration::from_millis(10)).await;
    for _ in 0..24 {
        if !a.enforcer.state().flags_set.is_empty() {
            break;
        }
        a.play(ClusterState::Rebalance, true, 1).await;
    }
    assert!(
        !actor.flags_now().is_empty(),
        "paused: {:?}",
        actor.commands()
    );
    // The flags were stored with the lease before they were set.
    assert!(!stored(&cluster).flags_set.is_empty());
    drop(a);
    let mut b = instance(
        pause_policy(&temp_state("pause-b")),
        &actor,
        cluster.instance("b"),
    );
    b.play(ClusterState::Rebalance, true, 1).await;
    assert!(
        actor.flags_now().is_empty(),
        "the new leader unset them at takeover: {:?}",
        actor.commands()
    );
}

#[tokio::test(start_paused = true)]
async fn a_leader_whose_state_cannot_be_stored_changes_nothing_and_says_why() {
    let cluster = FakeCluster::new();
    let actor = FakeActor::default();
    actor.set_by_hand("osd_mclock_profile", "balanced");
    let store = cluster.instance("a");
    let mut a = instance(
        policy(Mode::Enforce, &temp_state("refuse")),
        &actor,
        store.clone(),
    );
    tokio::time::sleep(Duration::from_millis(10)).await;
    a.play(ClusterState::Healthy, false, 2).await;
    store.set_refuse_writes(true);
    a.play(ClusterState::Rebalance, true, 8).await;
    assert!(
        !actor.commands().iter().any(|c| c.contains("config set")),
        "{:?}",
        actor.commands()
    );
    let failed: Vec<String> = a
        .enforcer
        .shared()
        .lock()
        .unwrap()
        .decisions
        .iter()
        .filter(|d| d.event == "ACTION_FAILED")
        .map(|d| d.message.clone())
        .collect();
    assert!(
        failed
            .iter()
            .any(|m| m.contains("could not be stored first in fake/ceph-recovery-budget.lease")),
        "{failed:?}"
    );
    // Storage back: the throttle goes through (after the retry backoff).
    store.set_refuse_writes(false);
    a.play(ClusterState::Rebalance, true, 8).await;
    assert!(
        actor
            .commands()
            .contains(&"config set osd osd_mclock_profile high_client_ops".to_string()),
        "{:?}",
        actor.commands()
    );
}

#[tokio::test(start_paused = true)]
async fn a_partitioned_leader_stops_changing_the_cluster_and_the_other_takes_over() {
    let cluster = FakeCluster::new();
    let actor = FakeActor::default();
    actor.set_by_hand("osd_mclock_profile", "balanced");
    let store_a = cluster.instance("a");
    let mut a = instance(
        policy(Mode::Enforce, &temp_state("part-a")),
        &actor,
        store_a.clone(),
    );
    tokio::time::sleep(Duration::from_millis(10)).await;
    let mut b = instance(
        policy(Mode::Enforce, &temp_state("part-b")),
        &actor,
        cluster.instance("b"),
    );
    play_both(&mut a, &mut b, ClusterState::Rebalance, true, 7).await;
    assert_eq!(
        actor.commands(),
        ["config set osd osd_mclock_profile high_client_ops"]
    );
    // A loses the cluster for the lease (its Ceph commands still work: the worst case).
    store_a.set_partitioned(true);
    play_both(&mut a, &mut b, ClusterState::Healthy, false, 8).await;
    assert_eq!(a.enforcer.shared().lock().unwrap().phase, Phase::Standby);
    assert_eq!(b.enforcer.shared().lock().unwrap().leader, Some(true));
    // B restored the operator's profile from A's stored state; A did nothing more.
    assert_eq!(
        actor.commands(),
        [
            "config set osd osd_mclock_profile high_client_ops",
            "config set osd osd_mclock_profile balanced"
        ]
    );
}

/// Issue 33 (a): B was given another lease pool. Its lock there is free, but the cluster's lease
/// object is registered as A's: B never leads, says why, and only A changes the cluster.
#[tokio::test(start_paused = true)]
async fn an_instance_given_another_lease_pool_stays_standby_and_says_why() {
    let cluster = FakeCluster::new();
    let actor = FakeActor::default();
    actor.set_by_hand("osd_mclock_profile", "balanced");
    let mut a = instance(
        policy(Mode::Enforce, &temp_state("pool-a")),
        &actor,
        cluster.instance("a"),
    );
    tokio::time::sleep(Duration::from_millis(10)).await;
    let mut b = instance(
        policy(Mode::Enforce, &temp_state("pool-b")),
        &actor,
        cluster.pool("rbd-meta").instance("b"),
    );
    play_both(&mut a, &mut b, ClusterState::Rebalance, true, 7).await;
    assert_eq!(
        actor.commands(),
        ["config set osd osd_mclock_profile high_client_ops"],
        "A alone throttled"
    );
    assert_eq!(a.enforcer.shared().lock().unwrap().leader, Some(true));
    let v = b.enforcer.shared().lock().unwrap().clone();
    assert_eq!(v.phase, Phase::Standby);
    assert_eq!(v.leader, Some(false));
    assert_eq!(v.lease_error_reason, Some("elsewhere"));
    assert!(
        v.lease_error
            .as_deref()
            .unwrap_or("")
            .contains("rbd-meta/ceph-recovery-budget.lease, but the cluster's is registered as fake/ceph-recovery-budget.lease"),
        "{:?}",
        v.lease_error
    );
}

#[tokio::test(start_paused = true)]
async fn the_run_loop_logs_gaining_and_losing_the_lease_naming_both_holders() {
    let cluster = FakeCluster::new();
    let actor = FakeActor::default();
    let a = instance(
        policy(Mode::Enforce, &temp_state("log-a")),
        &actor,
        cluster.instance("a"),
    );
    let b = instance(
        policy(Mode::Enforce, &temp_state("log-b")),
        &actor,
        cluster.instance("b"),
    );
    let (shared_a, shared_b) = (a.enforcer.shared(), b.enforcer.shared());
    let (_snap_tx, snap_rx) = tokio::sync::watch::channel(Arc::new(
        ceph_recovery_budget::collect::Snapshot::empty(INTERVAL),
    ));
    let (stop_a_tx, stop_a) = tokio::sync::watch::channel(false);
    let (_stop_b_tx, stop_b) = tokio::sync::watch::channel(false);
    let task_a = tokio::spawn(a.enforcer.run(snap_rx.clone(), stop_a));
    tokio::time::sleep(Duration::from_millis(100)).await;
    let task_b = tokio::spawn(b.enforcer.run(snap_rx, stop_b));
    tokio::time::sleep(Duration::from_secs(2)).await;
    // A clean exit releases: B takes over at its next try, naming A.
    stop_a_tx.send(true).unwrap();
    task_a.await.unwrap();
    tokio::time::sleep(Duration::from_secs(2)).await;
    let lines = |s: &ceph_recovery_budget::enforcer::Shared| -> Vec<String> {
        s.lock()
            .unwrap()
            .decisions
            .iter()
            .map(|d| d.message.clone())
            .collect()
    };
    let la = lines(&shared_a);
    let lb = lines(&shared_b);
    assert!(
        la.iter().any(
            |m| m.starts_with("LEASE_ACQUIRED: lease acquired by a, previous holder none seen")
        ),
        "{la:?}"
    );
    assert!(
        la.iter()
            .any(|m| m.starts_with("LEASE_LOST: lease lost by a") && m.contains("released")),
        "{la:?}"
    );
    assert!(
        lb.iter()
            .any(|m| m
                .starts_with("STANDBY: standby: b does not hold the lease, held by a (client.")),
        "{lb:?}"
    );
    assert!(
        lb.iter()
            .any(|m| m
                .starts_with("LEASE_ACQUIRED: lease acquired by b, previous holder a (client.")),
        "{lb:?}"
    );
    task_b.abort();
}

/// Found by the lab's fault matrix (tests/lab_faults.rs, row 1): a new leader whose local
/// cache holds a pause in progress (its own older episode, or the dead leader's last slice) must
/// not end that slice, unset flags and store its cache over the state the previous leader
/// stored, in the moment between taking the lease and reading the stored state.
#[tokio::test(start_paused = true)]
async fn a_new_leader_never_acts_on_or_stores_its_local_cache_before_reading_the_stored_state() {
    use ceph_recovery_budget::enforcer::pause::PauseState;
    use ceph_recovery_budget::enforcer::state::LadderState;
    let cluster = FakeCluster::new();
    let actor = FakeActor::default();
    actor.set_by_hand("osd_mclock_profile", "balanced");
    // A throttles: the operator's `balanced` is stored with the lease; then A is SIGKILLed.
    let mut a = instance(
        policy(Mode::Enforce, &temp_state("stale-a")),
        &actor,
        cluster.instance("a"),
    );
    tokio::time::sleep(Duration::from_millis(10)).await;
    a.play(ClusterState::Rebalance, true, 7).await;
    assert_eq!(
        actor.commands(),
        ["config set osd osd_mclock_profile high_client_ops"]
    );
    let stored_by_a = stored(&cluster);
    assert_eq!(
        stored_by_a.original.get("osd_mclock_profile"),
        Some(&Some("balanced".to_string()))
    );
    drop(a);

    // B's local file: a pause slice of long ago, its deadline well past.
    let wall = 1.8e9 + 200.0;
    let stale = EnforcerState {
        flags_set: ["nobackfill", "norecover"]
            .iter()
            .map(|f| f.to_string())
            .collect(),
        ladder: LadderState {
            rung: 3,
            top: 3,
            pause: Some(PauseState {
                share: 0.5,
                period_start: 1.8e9,
                paused: true,
                paused_total: 0.0,
                paused_at: Some(1.8e9),
                unpaused_at: None,
                held_until: None,
                floor: 0.0,
                floor_until: None,
                floor_times: 0,
                lowered_from: None,
            }),
            ..LadderState::default()
        },
        ..EnforcerState::default()
    };
    let file_b = temp_state("stale-b");
    let rig = Rig::with_actor(
        pause_policy(&file_b),
        stale,
        wall,
        Some(0.010),
        actor.clone(),
    );
    let store_b = cluster.instance("b");
    let b = rig
        .enforcer
        .with_lease(task::spawn(store_b.clone(), lease_config()));
    let shared_b = b.shared();
    // The run loop with no snapshot yet: B takes the lease when A's expires (6 s), and has
    // read nothing stored so far.
    let (_snap_tx, snap_rx) = tokio::sync::watch::channel(Arc::new(
        ceph_recovery_budget::collect::Snapshot::empty(INTERVAL),
    ));
    let (stop_tx, stop) = tokio::sync::watch::channel(false);
    let task_b = tokio::spawn(b.run(snap_rx, stop));
    tokio::time::sleep(Duration::from_secs(20)).await;
    assert_eq!(shared_b.lock().unwrap().leader, Some(true));
    assert_eq!(
        actor.commands(),
        ["config set osd osd_mclock_profile high_client_ops"],
        "B changed nothing on its stale cache"
    );
    assert_eq!(
        stored(&cluster),
        stored_by_a,
        "A's stored state (the operator's originals) is intact"
    );
    // Cut off from the lease before reading the stored state: losing it unsets no flag of the
    // stale cache (they may be the next leader's by now).
    store_b.set_partitioned(true);
    tokio::time::sleep(Duration::from_secs(10)).await;
    assert_eq!(shared_b.lock().unwrap().leader, Some(false));
    assert_eq!(
        actor.commands(),
        ["config set osd osd_mclock_profile high_client_ops"],
        "B unset nothing when it lost the lease"
    );
    stop_tx.send(true).unwrap();
    task_b.await.unwrap();
    assert_eq!(stored(&cluster), stored_by_a, "nor stored at exit");
    let _ = std::fs::remove_file(&file_b);
}

/// What is logged on this thread while the guard lives.
#[derive(Clone, Default)]
struct Captured(Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Captured {
    fn start(&self) -> tracing::subscriber::DefaultGuard {
        let writer = self.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_writer(move || writer.clone())
            .with_ansi(false)
            .finish();
        tracing::subscriber::set_default(subscriber)
    }

    fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }
}

/// Found by the lab's fault matrix (row 8, the lease object refusing writes): the refusal was
/// logged twice per cycle for as long as it lasted.
#[tokio::test(start_paused = true)]
async fn a_store_that_keeps_refusing_is_said_once_not_every_cycle() {
    let captured = Captured::default();
    let _guard = captured.start();
    let cluster = FakeCluster::new();
    let actor = FakeActor::default();
    actor.set_by_hand("osd_mclock_profile", "balanced");
    let store = cluster.instance("a");
    store.set_refuse_writes(true);
    let mut a = instance(
        policy(Mode::Enforce, &temp_state("refuse-once")),
        &actor,
        store.clone(),
    );
    tokio::time::sleep(Duration::from_millis(10)).await;
    a.play(ClusterState::Rebalance, true, 8).await;
    assert!(actor.commands().is_empty(), "{:?}", actor.commands());
    let text = captured.text();
    assert_eq!(
        text.matches("changes that need it first are not made")
            .count(),
        1,
        "{text}"
    );
    assert_eq!(
        text.matches("no enforcer state stored in").count(),
        1,
        "{text}"
    );
    // Storage back: said, and the enforcer goes on.
    store.set_refuse_writes(false);
    a.play(ClusterState::Rebalance, true, 1).await;
    assert!(
        captured
            .text()
            .contains("the enforcer state is stored in fake/ceph-recovery-budget.lease again"),
        "{}",
        captured.text()
    );
}

// ---- Blind (`--enforcer.blind-restore-after`, 3m by default) and settings found at start.

impl Rig {
    /// `cycles` collection cycles in which `ceph status` times out (a mon that stopped
    /// answering): the collector's data goes stale, the enforcer is blind.
    async fn play_blind(&mut self, cycles: u32) {
        for _ in 0..cycles {
            tokio::time::advance(INTERVAL).await;
            self.cluster.set_state(ClusterState::Rebalance, true);
            self.cluster.client.set(&commands::status(), Reply::Timeout);
            let snapshot = self.collector.collect_once().await;
            self.enforcer.step(&snapshot).await;
        }
    }

    fn decision(&self, event: &str) -> Option<String> {
        let shared = self.enforcer.shared();
        let v = shared.lock().unwrap();
        v.decisions
            .iter()
            .rev()
            .find(|d| d.event == event)
            .map(|d| d.message.clone())
    }
}

/// Throttled and pausing (rung 3) during a rebalance, in enforce mode.
async fn paused_rig(file: &str) -> Rig {
    let mut rig = Rig::with_policy(
        pause_policy(file),
        EnforcerState::default(),
        1.8e9,
        Some(0.010),
    );
    for _ in 0..24 {
        if !rig.enforcer.state().flags_set.is_empty() {
            break;
        }
        rig.play(ClusterState::Rebalance, true, 1).await;
    }
    assert!(
        rig.cluster.actor.flags_now().contains("nobackfill"),
        "paused: {:?}",
        rig.commands()
    );
    assert_eq!(profile(&rig).as_deref(), Some("high_client_ops"));
    rig
}

fn profile(rig: &Rig) -> Option<String> {
    rig.cluster
        .actor
        .db
        .lock()
        .unwrap()
        .get("osd_mclock_profile")
        .cloned()
}

#[tokio::test(start_paused = true)]
async fn blind_for_3m_hands_back_the_operators_settings_then_judges_afresh() {
    let file = temp_state("blind");
    let mut rig = paused_rig(&file).await;
    let from = rig.commands().len();
    // The mon stops answering `ceph status`: the pause ends at once (never paused blind), the
    // throttle stays for the first 3 minutes (a short outage changes nothing).
    rig.play_blind(12).await;
    assert_eq!(
        commands_since(&rig, from),
        ["osd unset nobackfill", "osd unset norecover"]
    );
    assert!(rig.cluster.actor.flags_now().is_empty());
    assert_eq!(profile(&rig).as_deref(), Some("high_client_ops"));
    assert_eq!(rig.enforcer.state().phase, Phase::Holding);
    // 3 minutes blind: the operator's profile is back, said in one line.
    rig.play_blind(1).await;
    assert_eq!(
        commands_since(&rig, from),
        [
            "osd unset nobackfill",
            "osd unset norecover",
            "config set osd osd_mclock_profile balanced"
        ]
    );
    assert_eq!(profile(&rig).as_deref(), Some("balanced"));
    let line = rig.decision("BLIND").expect("a BLIND line");
    assert!(
        line.starts_with("BLIND: no fresh data for 3m0s (collector status is down (")
            && line.ends_with("); restored osd_mclock_profile high_client_ops -> balanced; recovery runs at the operator's settings until the enforcer can see again"),
        "{line}"
    );
    let s = saved(&file);
    assert!(
        s.original.is_empty() && s.applied.is_none() && s.flags_set.is_empty(),
        "nothing left to restore: {s:?}"
    );
    // Still blind: nothing more happens.
    rig.play_blind(20).await;
    assert_eq!(commands_since(&rig, from).len(), 3, "{:?}", rig.commands());
    // Seeing again: judged afresh, throttled again once the breach has lasted `for` (1m).
    rig.play(ClusterState::Rebalance, true, 3).await;
    assert_eq!(commands_since(&rig, from).len(), 3, "{:?}", rig.commands());
    rig.play(ClusterState::Rebalance, true, 3).await;
    assert_eq!(
        rig.commands().last().map(String::as_str),
        Some("config set osd osd_mclock_profile high_client_ops"),
        "{:?}",
        rig.commands()
    );
    assert_eq!(
        saved(&file).original.get("osd_mclock_profile"),
        Some(&Some("balanced".to_string()))
    );
    let _ = std::fs::remove_file(&file);
}

#[tokio::test(start_paused = true)]
async fn a_blind_restore_that_fails_is_retried_and_keeps_the_originals() {
    let file = temp_state("blind-fail");
    let mut rig = paused_rig(&file).await;
    rig.play_blind(12).await;
    // Ceph refuses the first `config set` too.
    rig.cluster
        .actor
        .fail_next
        .store(1, std::sync::atomic::Ordering::SeqCst);
    rig.play_blind(1).await;
    assert_eq!(profile(&rig).as_deref(), Some("high_client_ops"));
    let failed = rig.decision("ACTION_FAILED").expect("said");
    assert!(
        failed.starts_with("FAILED BLIND: no fresh data for 3m0s")
            && failed.contains(
                "attempt 1, retrying in 10s; the state file keeps the operator's originals"
            ),
        "{failed}"
    );
    assert_eq!(
        saved(&file).original.get("osd_mclock_profile"),
        Some(&Some("balanced".to_string()))
    );
    // The retry, a cycle later, takes.
    rig.play_blind(1).await;
    assert_eq!(profile(&rig).as_deref(), Some("balanced"));
    assert!(saved(&file).original.is_empty());
    let shared = rig.enforcer.shared();
    assert_eq!(shared.lock().unwrap().action_failures_total, 1);
    let _ = std::fs::remove_file(&file);
}

#[tokio::test(start_paused = true)]
async fn observe_mode_says_what_it_would_have_restored_when_blind() {
    let file = temp_state("blind-observe");
    let mut rig = Rig::new(Mode::Observe, &file, EnforcerState::default());
    rig.play(ClusterState::Rebalance, true, 7).await;
    rig.play_blind(13).await;
    assert!(rig.commands().is_empty(), "{:?}", rig.commands());
    let line = rig.decision("BLIND").expect("a BLIND line");
    assert!(
        line.starts_with("(observe mode) BLIND: no fresh data for 3m0s")
            && line.ends_with("would have restored osd_mclock_profile high_client_ops -> balanced; nothing was changed on the cluster"),
        "{line}"
    );
}

/// What an earlier enforcer with a lost state file may have left (a rung-2 limit, `custom`, a
/// pause flag) is named at start in one line and a metric, and never touched; the list follows
/// what the cycles read.
#[tokio::test(start_paused = true)]
async fn settings_found_at_start_without_a_record_are_named_never_touched() {
    use ceph_recovery_budget::collect::Snapshot;
    use ceph_recovery_budget::metrics::{encode::Format, render_enforcer_section};

    let file = temp_state("unowned");
    let rig = Rig::new(Mode::Enforce, &file, EnforcerState::default());
    let actor = rig.cluster.actor.clone();
    actor.set_by_hand("osd_mclock_profile", "custom");
    actor.set_by_hand("osd_mclock_scheduler_background_recovery_lim", "100");
    actor.flag_by_hand("nobackfill", true);
    actor.flag_by_hand("noout", true);
    let Rig {
        mut cluster,
        mut collector,
        enforcer,
    } = rig;
    let shared = enforcer.shared();
    let (snap_tx, snap_rx) = tokio::sync::watch::channel(Arc::new(Snapshot::empty(INTERVAL)));
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let task = tokio::spawn(enforcer.run(snap_rx, stop_rx));
    tokio::time::advance(Duration::from_secs(1)).await;
    tokio::task::yield_now().await;
    let metric = |name: &str| -> bool {
        let view = shared.lock().unwrap().clone();
        String::from_utf8(render_enforcer_section(&view, Format::Text004).unwrap())
            .unwrap()
            .contains(&format!(
                "ceph_recovery_budget_unowned_settings{{{name}}} 1"
            ))
    };
    {
        let v = shared.lock().unwrap();
        let found: Vec<&str> = v
            .decisions
            .iter()
            .filter(|d| d.event == "UNOWNED")
            .map(|d| d.message.as_str())
            .collect();
        assert_eq!(found.len(), 1, "one line: {:?}", v.decisions);
        assert!(
            found[0].starts_with("UNOWNED: found at start, not set by this enforcer (no record), left as they are: nobackfill flag; osd_mclock_profile=custom; osd_mclock_scheduler_background_recovery_lim=100."),
            "{}",
            found[0]
        );
    }
    assert!(metric(r#"kind="flag",name="nobackfill""#));
    assert!(metric(r#"kind="config",name="osd_mclock_profile""#));
    assert!(metric(
        r#"kind="config",name="osd_mclock_scheduler_background_recovery_lim""#
    ));
    assert!(!metric(r#"kind="flag",name="noout""#), "not a pause flag");

    // The operator unsets nobackfill during a rebalance: the next cycle's read drops it.
    actor.flag_by_hand("nobackfill", false);
    tokio::time::advance(INTERVAL).await;
    cluster.set_state(ClusterState::Rebalance, false);
    snap_tx
        .send(Arc::new(collector.collect_once().await))
        .unwrap();
    for _ in 0..5 {
        tokio::task::yield_now().await;
    }
    assert!(!metric(r#"kind="flag",name="nobackfill""#));
    assert!(metric(r#"kind="config",name="osd_mclock_profile""#));

    stop_tx.send(true).unwrap();
    task.await.unwrap();
    assert!(actor.commands().is_empty(), "{:?}", actor.commands());
    assert_eq!(actor.flags_now(), ["noout".to_string()].into());
    let db = actor.db.lock().unwrap().clone();
    assert_eq!(
        db.get("osd_mclock_profile").map(String::as_str),
        Some("custom")
    );
    let _ = std::fs::remove_file(&file);
}

/// Issue 33.6: the lease object (and with it the state) was deleted while the backfill lever
/// held PGs: their upmap entries stay and the balancer stays off, with the held-PG gauge at 0.
/// The instance that takes the lease names them (one UNOWNED line, the metric with
/// kind="upmap_items" and kind="balancer_off") and touches neither.
#[tokio::test(start_paused = true)]
async fn upmap_entries_and_a_balancer_off_without_a_record_are_named_at_takeover_never_touched() {
    use ceph_recovery_budget::ceph::parse::upmap;
    use ceph_recovery_budget::metrics::{encode::Format, render_enforcer_section};
    let read = |name: &str| {
        std::fs::read(format!(
            "{}/tests/fixtures/upmap/{name}",
            env!("CARGO_MANIFEST_DIR")
        ))
        .unwrap()
    };
    let actor = FakeActor::default();
    // The lab with 2.a and 3.2 held (and the balancer's 2.b, 2.1e), the balancer off.
    *actor.upmap.lock().unwrap() = Some(ceph_recovery_budget::enforcer::actor::FakeUpmap {
        pgs: ceph_recovery_budget::ceph::parse::pgs::parse(&read(
            "30-hold.ceph_pg_dump_pgs_brief.json",
        ))
        .unwrap(),
        map: upmap::view(&read("30-hold.ceph_osd_dump.json")).unwrap(),
        balancer: Some(
            upmap::balancer_status(&read("63-balancer-off.ceph_balancer_status.json")).unwrap(),
        ),
        no_balancer_module: false,
        before: Default::default(),
    });
    let cluster = FakeCluster::new();
    let mut a = instance(
        policy(Mode::Enforce, &temp_state("unowned-upmap")),
        &actor,
        cluster.instance("a"),
    );
    a.play(ClusterState::Healthy, false, 2).await;
    let shared = a.enforcer.shared();
    let view = shared.lock().unwrap().clone();
    assert_eq!(view.leader, Some(true));
    let found: Vec<&str> = view
        .decisions
        .iter()
        .filter(|d| d.event == "UNOWNED")
        .map(|d| d.message.as_str())
        .collect();
    assert_eq!(found.len(), 1, "{:?}", view.decisions);
    assert!(
        found[0].starts_with("UNOWNED: found at start, not set by this enforcer (no record), left as they are: pg_upmap_items=4 PGs: 2.a [2->3], 2.b [3->0], 2.1e [3->2], 3.2 [1->3]; balancer=off (mode upmap)."),
        "{}",
        found[0]
    );
    let text = String::from_utf8(render_enforcer_section(&view, Format::Text004).unwrap()).unwrap();
    assert!(
        text.contains(
            r#"ceph_recovery_budget_unowned_settings{kind="upmap_items",name="pg_upmap_items"} 4"#
        ),
        "{text}"
    );
    assert!(
        text.contains(
            r#"ceph_recovery_budget_unowned_settings{kind="balancer_off",name="balancer"} 1"#
        ),
        "{text}"
    );
    assert!(
        !actor
            .commands()
            .iter()
            .any(|c| c.contains("upmap") || c.starts_with("balancer")),
        "{:?}",
        actor.commands()
    );
    assert_eq!(actor.upmap_now().unwrap().map.pg_upmap_items.len(), 4);
}

#[tokio::test(start_paused = true)]
async fn a_leader_cut_off_from_the_lease_unsets_its_pause_flags_at_its_renew_deadline() {
    let cluster = FakeCluster::new();
    let actor = FakeActor::default();
    actor.set_by_hand("osd_mclock_profile", "balanced");
    let store = cluster.instance("a");
    let mut a = instance(pause_policy(&temp_state("cut-a")), &actor, store.clone());
    tokio::time::sleep(Duration::from_millis(10)).await;
    for _ in 0..24 {
        if !a.enforcer.state().flags_set.is_empty() {
            break;
        }
        a.play(ClusterState::Rebalance, true, 1).await;
    }
    assert!(
        !actor.flags_now().is_empty(),
        "paused: {:?}",
        actor.commands()
    );
    let shared = a.enforcer.shared();
    let (_snap_tx, snap_rx) = tokio::sync::watch::channel(Arc::new(
        ceph_recovery_budget::collect::Snapshot::empty(INTERVAL),
    ));
    let (_stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    store.set_partitioned(true);
    let task = tokio::spawn(a.enforcer.run(snap_rx, stop_rx));
    // The renew deadline is 4 s: the lease is lost then, and the flags come off at once,
    // although nobody else can take over (the lock lives 6 s) and this one may not act.
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert!(
        actor.flags_now().is_empty(),
        "fails open: {:?}",
        actor.commands()
    );
    let lines: Vec<String> = shared
        .lock()
        .unwrap()
        .decisions
        .iter()
        .map(|d| d.message.clone())
        .collect();
    assert!(
        lines
            .iter()
            .any(|m| m.starts_with("LEASE_LOST: lease lost by a")),
        "{lines:?}"
    );
    task.abort();
}
