use std::time::Duration;

use tokio::sync::watch;

use super::*;
use crate::tuning::fake_cluster::{FakeCluster, Fio, State};
use crate::tuning::measure::RecordedProgress;

/// No recovery 16 ms; under recovery by profile, the example table.
fn p99_by_profile(s: &State) -> f64 {
    if s.remaining_at_start == 0.0 {
        return 16.0;
    }
    match s.running("osd_mclock_profile").as_str() {
        "balanced" => 38.0,
        "high_recovery_ops" => 71.0,
        _ => 21.0,
    }
}

fn mclock_cluster() -> FakeCluster {
    let cluster = FakeCluster::new(0.0);
    cluster.with(|s| {
        s.defaults
            .insert("osd_op_queue".into(), "mclock_scheduler".into());
    });
    cluster
}

fn plan() -> SweepPlan {
    SweepPlan {
        window: Duration::from_secs(60),
        settle: Duration::from_secs(10),
        fio: vec!["fio".into(), "runbook.fio".into()],
        start_recovery: Some(vec!["start-recovery".into()]),
        stop_recovery: Some(vec!["stop-recovery".into()]),
        wait_recovery: Duration::from_secs(60),
        multiplier: 2.0,
    }
}

async fn run(
    cluster: &FakeCluster,
    plan: &SweepPlan,
    cancel_after: Option<u64>,
) -> Result<SweepResult, TuningError> {
    let fio = Fio {
        cluster: cluster.clone(),
        runtime: Duration::from_secs(55),
        p99_ms: p99_by_profile,
    };
    let (tx, mut cancel) = watch::channel(false);
    if let Some(secs) = cancel_after {
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_secs(secs)).await;
            let _ = tx.send(true);
        });
    } else {
        std::mem::forget(tx);
    }
    sweep(
        cluster,
        &fio,
        plan,
        &mut RecordedProgress::default(),
        &mut cancel,
    )
    .await
}

#[tokio::test(start_paused = true)]
async fn sweep_measures_every_profile_and_restores_the_one_found() {
    let cluster = mclock_cluster();
    cluster.with(|s| {
        s.db.insert("osd_mclock_profile".into(), "high_client_ops".into());
    });
    let r = run(&cluster, &plan(), None).await.unwrap();
    assert!(r.complete, "{r:#?}");
    let p99: Vec<_> = r.rows.iter().map(|r| r.p99_seconds.unwrap()).collect();
    assert_eq!(p99, vec![0.016, 0.038, 0.071, 0.021]);
    assert_eq!(r.rows[0].recovery_objects_per_second, None);
    assert!(r.rows[1..]
        .iter()
        .all(|r| r.recovery_objects_per_second == Some(100.0)));
    assert_eq!(r.suggested_bound_seconds, Some(0.032));
    assert_eq!(
        cluster.db().get("osd_mclock_profile").map(String::as_str),
        Some("high_client_ops")
    );
    let text = render(&r);
    assert_eq!(
        text,
        "no recovery:              p50 5.3 ms  p95 11 ms   p99 16 ms
recovery, balanced:       p50 13 ms   p95 25 ms   p99 38 ms   100 obj/s
recovery, high_recovery:  p50 24 ms   p95 47 ms   p99 71 ms   100 obj/s
recovery, high_client:    p50 7.0 ms  p95 14 ms   p99 21 ms   100 obj/s

suggested bound: p99 32 ms (2x the no-recovery p99 of 16 ms)
profile restored: high_client_ops (set in the config database)
"
    );
    let calls = cluster.with(|s| s.calls.clone());
    let order: Vec<&String> = calls
        .iter()
        .filter(|c| {
            c.starts_with("run ") && !c.starts_with("run fio")
                || c.starts_with("config set")
                || c.starts_with("config rm")
        })
        .collect();
    assert_eq!(
        order,
        vec![
            "run start-recovery",
            "config set osd osd_mclock_profile balanced",
            "config set osd osd_mclock_profile high_recovery_ops",
            "config set osd osd_mclock_profile high_client_ops",
            "run stop-recovery",
            "config set osd osd_mclock_profile high_client_ops",
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn a_profile_not_set_goes_back_to_not_set_even_on_ctrl_c() {
    let cluster = mclock_cluster();
    // Ctrl-C during the high_recovery_ops row.
    let r = run(&cluster, &plan(), Some(170)).await.unwrap();
    assert!(!r.complete);
    assert_eq!(r.rows.len(), 3, "{r:#?}");
    assert!(r.rows[2].interrupted.as_deref().unwrap().contains("Ctrl-C"));
    assert!(!cluster.db().contains_key("osd_mclock_profile"));
    let calls = cluster.with(|s| s.calls.clone());
    assert!(
        calls.contains(&"run stop-recovery".to_string()),
        "{calls:#?}"
    );
    assert!(calls.contains(&"config rm osd osd_mclock_profile".to_string()));
    assert!(render(&r).contains("not measured: interrupted (Ctrl-C or a signal)"));
    assert!(render(&r).contains("incomplete"));
}

#[tokio::test(start_paused = true)]
async fn sweeps_that_cannot_mean_anything_are_refused() {
    // wpq: no profiles.
    let cluster = FakeCluster::new(0.0);
    let e = run(&cluster, &plan(), None).await.unwrap_err().to_string();
    assert!(e.contains("osd_op_queue wpq"), "{e}");
    // A recovery already running: the first row would be wrong.
    let cluster = mclock_cluster();
    cluster.with(|s| s.remaining_at_start = 5_000.0);
    let e = run(&cluster, &plan(), None).await.unwrap_err().to_string();
    assert!(e.contains("already running"), "{e}");
    assert!(cluster.writes().is_empty());
}

#[tokio::test(start_paused = true)]
async fn a_recovery_that_never_starts_ends_the_sweep_and_restores() {
    let cluster = mclock_cluster();
    let mut p = plan();
    p.start_recovery = None;
    p.stop_recovery = None;
    let e = run(&cluster, &p, None).await.unwrap_err().to_string();
    assert!(e.contains("no recovery showed up within 1m"), "{e}");
    assert_eq!(cluster.writes(), vec!["config rm osd osd_mclock_profile"]);
}

#[tokio::test(start_paused = true)]
async fn a_recovery_that_ends_early_is_said() {
    let cluster = mclock_cluster();
    // 100 obj/s from 100 000 objects = 1000 s; windows of 400 s: the third row sees it end.
    let mut p = plan();
    p.window = Duration::from_secs(400);
    let fio = Fio {
        cluster: cluster.clone(),
        runtime: Duration::from_secs(30),
        p99_ms: p99_by_profile,
    };
    let (_tx, mut cancel) = watch::channel(false);
    let r = sweep(
        &cluster,
        &fio,
        &p,
        &mut RecordedProgress::default(),
        &mut cancel,
    )
    .await
    .unwrap();
    // Rows run 10..410 s, 420..820 s and 830..1230 s after the start: the last sees it end.
    assert!(r.complete, "{r:#?}");
    assert_eq!(r.rows.len(), 4);
    assert!(
        r.notes
            .iter()
            .any(|n| n
                .contains("into the high_client_ops row: its latency is partly without recovery")),
        "{r:#?}"
    );
    assert!(render(&r).contains("note: the recovery ended"));
}
