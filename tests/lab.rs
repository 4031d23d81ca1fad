//! Against a real throwaway Ceph cluster (scripts/ceph-lab): the exporter's numbers agree with
//! what `ceph status` says, and PG safety and recovery signals follow real failures.
//! Run by scripts/test (CRB_LAB=1, after `scripts/ceph-lab start`).

mod common;

use std::time::Duration;

use common::*;

#[test]
#[ignore = "needs the lab cluster: scripts/test runs it"]
fn exporter_follows_a_real_failure_and_recovery() {
    assert!(
        lab_enabled(),
        "set CRB_LAB=1 after scripts/ceph-lab start (scripts/test does both)"
    );
    lab(&["start"]);
    lab(&["wait-clean", "300"]);
    // Enough objects that recovery lasts several collection cycles.
    lab(&["fill"]);

    let exporter = Exporter::start(&[
        "--collect.interval",
        "2s",
        "--recovery.window",
        "20s",
        "--latency.window",
        "30s",
    ]);

    // 1. Healthy: numbers agree with ceph status.
    let status = ceph_json(&["status"]);
    let num_pgs = status["pgmap"]["num_pgs"].as_f64().expect("num_pgs");
    let m = exporter.wait_metrics(Duration::from_secs(60), "every collector up", |m| {
        ["status", "pools", "pgs", "latency", "scheduler"]
            .iter()
            .all(|c| {
                m.get(&format!(
                    "ceph_recovery_budget_collector_up{{collector=\"{c}\"}}"
                )) == Some(1.0)
            })
    });
    assert_eq!(m.get("ceph_pg_total"), Some(num_pgs));
    assert_eq!(m.get("ceph_pg_active"), Some(num_pgs), "all PGs active");
    assert_eq!(m.get("ceph_pg_clean"), Some(num_pgs), "all PGs clean");
    assert_eq!(m.get("ceph_pg_undersized"), Some(0.0));
    assert_eq!(m.get("ceph_degraded_objects"), Some(0.0));
    assert_eq!(m.get("ceph_osd_count"), Some(4.0));
    assert_eq!(m.get("ceph_pool_size{pool=\"rbd-vms\"}"), Some(3.0));
    assert_eq!(m.get("ceph_pool_min_size{pool=\"rbd-vms\"}"), Some(2.0));
    assert_eq!(m.get("ceph_pool_at_min_size{pool=\"rbd-vms\"}"), Some(0.0));
    for osd in 0..4 {
        let count = m.get(&format!(
            "ceph_osd_op_w_latency_count{{ceph_daemon=\"osd.{osd}\"}}"
        ));
        assert!(
            count.is_some(),
            "latency histogram of osd.{osd} missing:\n{}",
            m.text
        );
        let inf = m.get(&format!(
            "ceph_osd_op_w_latency_bucket{{ceph_daemon=\"osd.{osd}\",le=\"+Inf\"}}"
        ));
        assert_eq!(inf, count, "+Inf bucket equals _count for osd.{osd}");
        assert_eq!(
            m.get(&format!(
                "ceph_osd_op_queue_info{{ceph_daemon=\"osd.{osd}\",queue=\"mclock_scheduler\"}}"
            )),
            Some(1.0)
        );
        assert!(!m
            .with_prefix(&format!(
                "ceph_osd_mclock_profile_info{{ceph_daemon=\"osd.{osd}\""
            ))
            .is_empty());
    }

    // Client writes give the cluster-wide quantiles.
    lab(&["fio-load", "8"]);
    let m = exporter.wait_metrics(Duration::from_secs(30), "write latency p99", |m| {
        m.get("ceph_client_write_latency_seconds{quantile=\"0.99\"}")
            .is_some()
    });
    let p50 = m
        .get("ceph_client_write_latency_seconds{quantile=\"0.5\"}")
        .unwrap_or(f64::NAN);
    let p99 = m
        .get("ceph_client_write_latency_seconds{quantile=\"0.99\"}")
        .unwrap_or(f64::NAN);
    assert!(p50 > 0.0 && p50 <= p99 && p99 < 30.0, "p50 {p50} p99 {p99}");

    // 2. noout + one OSD stopped: PGs undersized, the pool at min_size (3 copies, 2 left).
    ceph(&["osd", "set", "noout"]);
    lab(&["osd-stop", "3"]);
    let m = exporter.wait_metrics(
        Duration::from_secs(90),
        "undersized PGs and rbd-vms at min_size",
        |m| {
            m.get("ceph_pg_undersized").unwrap_or(0.0) > 0.0
                && m.get("ceph_pool_at_min_size{pool=\"rbd-vms\"}") == Some(1.0)
        },
    );
    assert!(
        m.get("ceph_pool_pgs_at_min_size{pool=\"rbd-vms\"}")
            .unwrap_or(0.0)
            > 0.0
    );
    assert!(m.get("ceph_degraded_objects").unwrap_or(0.0) > 0.0);
    // The other OSDs still report latency with one down.
    assert!(m
        .get("ceph_osd_op_w_latency_count{ceph_daemon=\"osd.0\"}")
        .is_some());
    assert_eq!(
        m.get("ceph_recovery_budget_collector_up{collector=\"latency\"}"),
        Some(1.0)
    );

    // 3. Mark it out: data moves, both recovery rates are positive at some point.
    lab(&["osd-out", "3"]);
    let m = exporter.wait_metrics(
        Duration::from_secs(180),
        "positive recovery rate (delta and ceph)",
        |m| {
            m.get("ceph_recovery_objects_per_second{method=\"delta\"}")
                .unwrap_or(0.0)
                > 0.0
                && m.get("ceph_recovery_objects_per_second{method=\"ceph\"}")
                    .unwrap_or(0.0)
                    > 0.0
        },
    );
    eprintln!(
        "lab: recovery delta {:?} obj/s, ceph {:?} obj/s",
        m.get("ceph_recovery_objects_per_second{method=\"delta\"}"),
        m.get("ceph_recovery_objects_per_second{method=\"ceph\"}")
    );

    // 4. Bring it back: the cluster returns to clean and every signal to 0.
    lab(&["osd-start", "3"]);
    lab(&["osd-in", "3"]);
    ceph(&["osd", "unset", "noout"]);
    let m = exporter.wait_metrics(Duration::from_secs(300), "clean again, signals at 0", |m| {
        m.get("ceph_pg_clean") == Some(num_pgs)
            && m.get("ceph_pg_undersized") == Some(0.0)
            && m.get("ceph_degraded_objects") == Some(0.0)
            && m.get("ceph_misplaced_objects") == Some(0.0)
            && m.get("ceph_pool_at_min_size{pool=\"rbd-vms\"}") == Some(0.0)
    });
    assert_eq!(
        m.get("ceph_pool_pgs_undersized{pool=\"rbd-vms\"}"),
        Some(0.0)
    );
}
