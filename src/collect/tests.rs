//! The collector over recorded outputs of a real cluster (tests/fixtures), under a paused clock.

use std::time::Duration;

use super::*;
use crate::ceph::fake::{FakeClient, Reply};
use crate::metrics::encode::Format;

fn fixture(path: &str) -> Vec<u8> {
    let full = format!("{}/tests/fixtures/{path}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read(&full).unwrap_or_else(|e| panic!("fixture {full}: {e}"))
}

/// `tell osd.* ...` prints each OSD's compact JSON after `osd.N: `
/// (fixtures/healthy-idle/ceph_tell_osd.STAR_perf_histogram_dump_f_json.txt).
fn as_tell_output(per_osd: &[(&str, Vec<u8>)]) -> Vec<u8> {
    let mut out = String::new();
    for (osd, body) in per_osd {
        let v: serde_json::Value = serde_json::from_slice(body).expect("fixture JSON");
        out.push_str(&format!("\n{osd}: {v}\n"));
    }
    out.into_bytes()
}

fn settings() -> CollectSettings {
    CollectSettings {
        interval: Duration::from_secs(15),
        recovery_window: Duration::from_secs(300),
        latency_window: Duration::from_secs(300),
        ..Default::default()
    }
}

/// A fake cluster answering like the recorded one in `state`.
fn cluster(state: &str) -> FakeClient {
    let c = FakeClient::new();
    c.set(
        &commands::status(),
        Reply::ok(fixture(&format!("{state}/ceph_status.json"))),
    );
    c.set(
        &commands::pools(),
        Reply::ok(fixture(&format!("{state}/ceph_osd_pool_ls_detail.json"))),
    );
    c.set(
        &commands::pgs_brief(),
        Reply::ok(fixture(&format!("{state}/ceph_pg_dump_pgs_brief.json"))),
    );
    let hist = fixture(&format!("{state}/ceph_tell_osd.0_perf_histogram_dump.json"));
    c.set(
        &commands::histograms(),
        Reply::ok(as_tell_output(&[("osd.0", hist)])),
    );
    c.set(
        &commands::osd_config_get("osd_op_queue"),
        Reply::ok(&b"\nosd.0: {\"osd_op_queue\":\"mclock_scheduler\"}\n"[..]),
    );
    c.set(
        &commands::osd_config_get("osd_mclock_profile"),
        Reply::ok(&b"\nosd.0: {\"osd_mclock_profile\":\"high_client_ops\"}\n"[..]),
    );
    c
}

fn render(s: &Snapshot) -> String {
    text_in(s, Format::Text004)
}

fn text_in(s: &Snapshot, format: Format) -> String {
    String::from_utf8(crate::metrics::render(s, Instant::now(), format).unwrap()).unwrap()
}

fn value(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| {
            l.strip_prefix(series)
                .and_then(|rest| rest.strip_prefix(' '))
        })
        .and_then(|v| v.trim().parse().ok())
}

#[tokio::test(start_paused = true)]
async fn healthy_cluster_lists_no_pgs_and_reports_clean() {
    let client = cluster("healthy-idle");
    let mut c = Collector::new(client.clone(), settings());
    let s = c.collect_once().await;
    let text = render(&s);
    assert_eq!(value(&text, "ceph_pgs"), Some(33.0));
    assert_eq!(value(&text, "ceph_pg_clean"), Some(33.0));
    assert_eq!(value(&text, "ceph_pg_undersized"), Some(0.0));
    assert_eq!(
        value(&text, "ceph_pool_at_min_size{pool=\"rbd-vms\"}"),
        Some(0.0)
    );
    // Healthy: no undersized state in the status, so the PGs are not listed at all.
    assert!(!client.calls().contains(&commands::pgs_brief()));
    assert!(!client.calls().contains(&commands::undersized_pgs()));
    for name in CollectorName::ALL {
        assert_eq!(
            value(
                &text,
                &format!(
                    "ceph_recovery_budget_collector_up{{collector=\"{}\"}}",
                    name.as_str()
                )
            ),
            Some(1.0),
            "{text}"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn undersized_cluster_shows_pool_at_min_size() {
    let client = cluster("undersized");
    let mut c = Collector::new(client.clone(), settings());
    let s = c.collect_once().await;
    let text = render(&s);
    // 18 active+undersized+degraded + 1 active+undersized (fixtures/undersized/ceph_status.json).
    assert_eq!(value(&text, "ceph_pg_undersized"), Some(19.0));
    assert_eq!(value(&text, "ceph_pg_degraded"), Some(18.0));
    assert!(client.calls().contains(&commands::pgs_brief()));
    assert!(!client.calls().contains(&commands::undersized_pgs()));
    assert_eq!(
        value(&text, "ceph_pool_at_min_size{pool=\"rbd-vms\"}"),
        Some(1.0)
    );
    assert!(value(&text, "ceph_pool_pgs_at_min_size{pool=\"rbd-vms\"}").unwrap_or(0.0) > 0.0);
    assert_eq!(value(&text, "ceph_degraded_objects"), Some(7880.0));
}

#[tokio::test(start_paused = true)]
async fn an_osd_down_but_in_is_named_from_the_osd_map() {
    // The status raises OSD_DOWN (osd.2 stopped with noout): `osd dump` says which.
    let client = cluster("undersized");
    client.set(
        &commands::osd_dump(),
        Reply::ok(fixture("undersized/ceph_osd_dump.json")),
    );
    let mut c = Collector::new(client.clone(), settings());
    let s = c.collect_once().await;
    let down = s.status.as_ref().and_then(|st| st.value.down_in.clone());
    let down = down.expect("read").expect("parsed");
    assert_eq!(
        (down.osds, down.latest_change, down.noout),
        (vec![2], Some(2), true)
    );
    // An OSD stopped and marked out raises no OSD_DOWN: the map is not read.
    let client = cluster("recovery");
    let mut c = Collector::new(client.clone(), settings());
    let s = c.collect_once().await;
    assert!(!client.calls().contains(&commands::osd_dump()));
    assert!(s
        .status
        .as_ref()
        .is_some_and(|st| st.value.down_in.is_none()));
    // The read failing costs only the names, not the status.
    let client = cluster("undersized");
    let mut c = Collector::new(client.clone(), settings());
    let s = c.collect_once().await;
    let st = s.status.as_ref().expect("status");
    assert!(
        matches!(&st.value.down_in, Some(Err(e)) if e.contains("osd dump")),
        "{:?}",
        st.value.down_in
    );
    assert!(s
        .collectors
        .iter()
        .all(|h| h.name != CollectorName::Status || h.last_ok));
}

#[tokio::test(start_paused = true)]
async fn recovery_rate_from_two_samples() {
    let client = cluster("recovery");
    let mut c = Collector::new(client.clone(), settings());
    let s1 = c.collect_once().await;
    // One sample: no delta rate yet, Ceph's own is there.
    let text = render(&s1);
    assert_eq!(
        value(&text, "ceph_recovery_objects_per_second{method=\"delta\"}"),
        None
    );
    assert_eq!(
        value(&text, "ceph_recovery_objects_per_second{method=\"ceph\"}"),
        Some(114.0)
    );
    // 15 s later Ceph reports 1500 fewer degraded objects: 100 obj/s.
    tokio::time::advance(Duration::from_secs(15)).await;
    let mut status: serde_json::Value =
        serde_json::from_slice(&fixture("recovery/ceph_status.json")).unwrap();
    status["pgmap"]["degraded_objects"] = serde_json::json!(9305 - 1500);
    client.set(&commands::status(), Reply::ok(status.to_string()));
    let s2 = c.collect_once().await;
    let rate = value(
        &render(&s2),
        "ceph_recovery_objects_per_second{method=\"delta\"}",
    )
    .unwrap();
    assert!((rate - 100.0).abs() < 1.0, "{rate}");
}

#[tokio::test(start_paused = true)]
async fn one_failing_collector_does_not_blank_the_others() {
    let client = cluster("healthy-idle");
    client.set(
        &commands::pools(),
        Reply::fail(22, "Error EINVAL: unrecognized command"),
    );
    client.set(&commands::histograms(), Reply::Timeout);
    let mut c = Collector::new(client, settings());
    let s = c.collect_once().await;
    let text = render(&s);
    assert_eq!(
        value(
            &text,
            "ceph_recovery_budget_collector_up{collector=\"pools\"}"
        ),
        Some(0.0)
    );
    assert_eq!(
        value(
            &text,
            "ceph_recovery_budget_collector_up{collector=\"latency\"}"
        ),
        Some(0.0)
    );
    assert_eq!(
        value(
            &text,
            "ceph_recovery_budget_collector_up{collector=\"status\"}"
        ),
        Some(1.0)
    );
    assert_eq!(value(&text, "ceph_pgs"), Some(33.0));
    assert_eq!(
        value(&text, "ceph_recovery_budget_collector_errors_total{collector=\"pools\",reason=\"exit_status\"}"),
        Some(1.0)
    );
    assert_eq!(
        value(
            &text,
            "ceph_recovery_budget_collector_errors_total{collector=\"latency\",reason=\"timeout\"}"
        ),
        Some(1.0)
    );
    let pools = s
        .collectors
        .iter()
        .find(|h| h.name == CollectorName::Pools)
        .unwrap();
    assert!(
        pools
            .last_error
            .as_deref()
            .unwrap_or("")
            .contains("Error EINVAL"),
        "{:?}",
        pools.last_error
    );
    assert!(!text.contains("ceph_pool_size"));
}

#[tokio::test(start_paused = true)]
async fn garbage_output_is_a_parse_error_counted_as_such() {
    let client = cluster("healthy-idle");
    let full = fixture("healthy-idle/ceph_status.json");
    client.set(
        &commands::status(),
        Reply::ok(full[..full.len() / 2].to_vec()),
    );
    let mut c = Collector::new(client, settings());
    let s = c.collect_once().await;
    let text = render(&s);
    assert_eq!(
        value(
            &text,
            "ceph_recovery_budget_collector_errors_total{collector=\"status\",reason=\"parse\"}"
        ),
        Some(1.0)
    );
    assert!(!s.ready(Instant::now()));
    // Status failed, so undersized PGs are listed to be safe (healthy fixture: none).
    assert_eq!(
        value(&text, "ceph_pool_at_min_size{pool=\"rbd-vms\"}"),
        Some(0.0)
    );
}

#[tokio::test(start_paused = true)]
async fn data_older_than_three_intervals_is_dropped_and_its_collector_down() {
    let client = cluster("healthy-idle");
    let mut c = Collector::new(client.clone(), settings());
    let s = c.collect_once().await;
    assert!(render(&s).contains("ceph_pgs 33"));
    // The status command starts failing; for up to 3 intervals the last good data is served.
    client.set(&commands::status(), Reply::Timeout);
    tokio::time::advance(Duration::from_secs(15)).await;
    let s = c.collect_once().await;
    let text = render(&s);
    assert!(text.contains("ceph_pgs 33"), "still within 3 intervals");
    assert_eq!(
        value(
            &text,
            "ceph_recovery_budget_collector_up{collector=\"status\"}"
        ),
        Some(0.0)
    );
    tokio::time::advance(Duration::from_secs(31)).await;
    let s = c.collect_once().await;
    let text = render(&s);
    assert!(
        !text.contains("ceph_pgs"),
        "46 s old data is stale:\n{text}"
    );
    assert_eq!(
        value(&text, "ceph_pool_size{pool=\"rbd-vms\"}"),
        Some(3.0),
        "others unaffected"
    );
}

#[tokio::test(start_paused = true)]
async fn a_scrape_of_an_old_snapshot_drops_everything_stale() {
    // The collection loop itself is stuck: scrapes must not serve old data as fresh.
    let client = cluster("healthy-idle");
    let mut c = Collector::new(client, settings());
    let s = c.collect_once().await;
    tokio::time::advance(Duration::from_secs(46)).await;
    let text = render(&s);
    assert!(!text.contains("ceph_pgs"));
    assert_eq!(
        value(
            &text,
            "ceph_recovery_budget_collector_up{collector=\"status\"}"
        ),
        Some(0.0)
    );
}

#[tokio::test(start_paused = true)]
async fn scheduler_and_latency_per_osd() {
    let client = cluster("client-load");
    let mut c = Collector::new(client, settings());
    let s = c.collect_once().await;
    let text = render(&s);
    assert_eq!(
        value(
            &text,
            "ceph_osd_op_queue_info{ceph_daemon=\"osd.0\",queue=\"mclock_scheduler\"}"
        ),
        Some(1.0)
    );
    assert_eq!(
        value(
            &text,
            "ceph_osd_mclock_profile_info{ceph_daemon=\"osd.0\",profile=\"high_client_ops\"}"
        ),
        Some(1.0)
    );
    // client-load osd.0: 13412 writes in the histogram, all below 1.6384 s.
    let count = value(&text, "ceph_osd_op_w_latency_count{ceph_daemon=\"osd.0\"}").unwrap();
    assert_eq!(
        value(
            &text,
            "ceph_osd_op_w_latency_bucket{ceph_daemon=\"osd.0\",le=\"+Inf\"}"
        ),
        Some(count)
    );
    assert!(count > 1000.0);
    // One sample: no quantile yet.
    assert!(!text.contains("ceph_client_write_latency_seconds{"));
}

#[tokio::test(start_paused = true)]
async fn the_loop_publishes_every_interval_and_stops_on_shutdown() {
    let client = cluster("healthy-idle");
    let c = Collector::new(client.clone(), settings());
    let (tx, mut rx) = watch::channel(Arc::new(Snapshot::empty(Duration::from_secs(15))));
    let (stop_tx, stop_rx) = watch::channel(false);
    let task = tokio::spawn(c.run(tx, stop_rx));
    rx.changed().await.unwrap();
    assert_eq!(rx.borrow().cycle, 1);
    tokio::time::advance(Duration::from_secs(15)).await;
    rx.changed().await.unwrap();
    assert_eq!(rx.borrow().cycle, 2);
    stop_tx.send(true).unwrap();
    task.await.unwrap();
    let status_calls = client
        .calls()
        .iter()
        .filter(|c| **c == commands::status())
        .count();
    assert_eq!(status_calls, 2);
}

fn lab_fixture(name: &str) -> Reply {
    let out = fixture(&format!("lab/{name}.out"));
    let err = String::from_utf8_lossy(&fixture(&format!("lab/{name}.err"))).into_owned();
    // tests/fixtures/lab/README.md lists the exit codes.
    let code = if name.starts_with("osd3-down.tell-osd-all") {
        6
    } else {
        0
    };
    Reply::Output {
        stdout: out,
        stderr: err,
        code,
    }
}

/// A fake cluster answering every collector command with the lab's recorded outputs of `state`.
fn lab_cluster(state: &str) -> FakeClient {
    let c = FakeClient::new();
    for (cmd, name) in [
        (commands::status(), "status"),
        (commands::pools(), "osd-pool-ls-detail"),
        (commands::undersized_pgs(), "pg-ls-undersized"),
        (commands::histograms(), "tell-osd-all-perf-histogram-dump"),
        (
            commands::osd_config_get("osd_op_queue"),
            "tell-osd-all-config-get-osd_op_queue",
        ),
        (
            commands::osd_config_get("osd_mclock_profile"),
            "tell-osd-all-config-get-osd_mclock_profile",
        ),
    ] {
        c.set(&cmd, lab_fixture(&format!("{state}.{name}")));
    }
    // Not recorded with these: the user has the caps documented before `pg dump` was read
    // (`mgr 'allow command "pg ls"'`), so the PGs come from the recorded `pg ls` (the mgr's
    // refusal as the CLI prints it: `Error EACCES: access denied`, exit code 13).
    c.set(
        &commands::pgs_brief(),
        Reply::fail(13, "Error EACCES: access denied"),
    );
    c
}

/// The real lab outputs with osd.3 stopped (noout): `tell osd.*` exits 6 but the other three
/// OSDs answer, and `pg ls undersized` lists the PGs at min_size.
#[tokio::test(start_paused = true)]
async fn real_outputs_with_one_osd_down() {
    let c = lab_cluster("osd3-down");
    let mut col = Collector::new(c, settings());
    let s = col.collect_once().await;
    let text = render(&s);
    assert!(value(&text, "ceph_pg_undersized").unwrap() > 0.0, "{text}");
    assert_eq!(
        value(&text, "ceph_pool_at_min_size{pool=\"rbd-vms\"}"),
        Some(1.0)
    );
    // Counted from the recorded `pg ls undersized` (`pg dump` refused, see lab_cluster).
    assert_eq!(
        value(
            &text,
            "ceph_recovery_budget_collector_up{collector=\"pgs\"}"
        ),
        Some(1.0)
    );
    assert_eq!(
        value(&text, "ceph_pool_pgs_undersized{pool=\"rbd-vms\"}"),
        Some(25.0)
    );
    assert_eq!(
        value(
            &text,
            "ceph_recovery_budget_collector_up{collector=\"latency\"}"
        ),
        Some(1.0)
    );
    for osd in 0..3 {
        assert!(value(
            &text,
            &format!("ceph_osd_op_w_latency_count{{ceph_daemon=\"osd.{osd}\"}}")
        )
        .is_some());
    }
    assert!(
        !text.contains("ceph_daemon=\"osd.3\""),
        "the down OSD has no series"
    );
    let lat = s.latency.as_ref().unwrap();
    assert!(
        lat.value.missing.contains_key("osd.3"),
        "{:?}",
        lat.value.missing
    );
    assert_eq!(
        value(
            &text,
            "ceph_osd_op_queue_info{ceph_daemon=\"osd.0\",queue=\"mclock_scheduler\"}"
        ),
        Some(1.0)
    );
}

/// A cephx user allowed `pg ls` but not `pg dump` (the caps documented before the collector
/// read `pg dump`): the PGs are counted from `pg ls undersized`, to the same numbers, and the
/// collector stays up.
#[tokio::test(start_paused = true)]
async fn pg_dump_refused_falls_back_to_pg_ls_with_the_same_counts() {
    let direct = render(
        &Collector::new(cluster("undersized"), settings())
            .collect_once()
            .await,
    );
    let c = cluster("undersized");
    c.set(
        &commands::pgs_brief(),
        Reply::fail(13, "Error EACCES: access denied"),
    );
    c.set(
        &commands::undersized_pgs(),
        Reply::ok(fixture("undersized/ceph_pg_ls_undersized.json")),
    );
    let via_ls = render(&Collector::new(c.clone(), settings()).collect_once().await);
    assert!(c.calls().contains(&commands::undersized_pgs()));
    assert_eq!(
        value(&via_ls, "ceph_pool_pgs_undersized{pool=\"rbd-vms\"}"),
        Some(18.0)
    );
    for series in [
        "ceph_pool_pgs_undersized{pool=\"rbd-vms\"}",
        "ceph_pool_pgs_at_min_size{pool=\"rbd-vms\"}",
        "ceph_pool_at_min_size{pool=\"rbd-vms\"}",
        "ceph_recovery_budget_collector_up{collector=\"pgs\"}",
    ] {
        assert!(value(&direct, series).is_some(), "{series}");
        assert_eq!(value(&direct, series), value(&via_ls, series), "{series}");
    }
}

/// Neither listing allowed: the PG collector is down as `permission_denied`, and its error names
/// the grant the collector wants (`pg dump`), not the fallback's.
#[tokio::test(start_paused = true)]
async fn pgs_refused_both_ways_name_the_pg_dump_grant() {
    let c = cluster("undersized");
    for cmd in [commands::pgs_brief(), commands::undersized_pgs()] {
        c.set(&cmd, Reply::fail(13, "Error EACCES: access denied"));
    }
    let s = Collector::new(c, settings()).collect_once().await;
    let h = s
        .collectors
        .iter()
        .find(|h| h.name == CollectorName::Pgs)
        .expect("pgs collector");
    assert!(!h.last_ok);
    assert_eq!(h.errors_total.get("permission_denied"), Some(&1));
    let e = h.last_error.as_deref().unwrap_or_default();
    assert!(
        e.contains("`ceph pg dump pgs_brief`")
            && e.contains(r#"lacks mgr 'allow command "pg dump"'"#),
        "{e}"
    );
}

#[tokio::test(start_paused = true)]
async fn real_healthy_outputs_of_the_lab() {
    let c = lab_cluster("healthy");
    let mut col = Collector::new(c, settings());
    let text = render(&col.collect_once().await);
    for osd in 0..4 {
        assert_eq!(
            value(&text, &format!("ceph_osd_mclock_profile_info{{ceph_daemon=\"osd.{osd}\",profile=\"high_client_ops\"}}")),
            Some(1.0)
        );
        assert!(value(
            &text,
            &format!("ceph_osd_op_w_latency_bucket{{ceph_daemon=\"osd.{osd}\",le=\"+Inf\"}}")
        )
        .is_some());
    }
    assert_eq!(value(&text, "ceph_pg_clean"), Some(33.0));
}

#[test]
fn a_slow_cluster_stretches_the_staleness_limit_to_three_cycles() {
    let mut s = Snapshot::empty(Duration::from_secs(2));
    assert_eq!(s.max_age(), Duration::from_secs(6));
    // Each cycle took 5 s (CLI calls under load): data is not stale between two cycles.
    s.cycle_duration = Duration::from_secs(5);
    assert_eq!(s.max_age(), Duration::from_secs(15));
}

#[test]
fn every_error_reason_is_published_from_the_start() {
    let errors = [
        CollectError::Ops(OpsError::Ceph(CephError::Spawn {
            program: "ceph".into(),
            source: std::io::Error::other("x"),
        })),
        CollectError::Ops(OpsError::Ceph(CephError::Timeout {
            command: "c".into(),
            timeout: Duration::from_secs(1),
        })),
        CollectError::Ops(OpsError::Ceph(CephError::Failed {
            command: "c".into(),
            code: Some(22),
            stderr: String::new(),
        })),
        CollectError::Ops(OpsError::Ceph(CephError::Io {
            command: "c".into(),
            source: std::io::Error::other("x"),
        })),
        CollectError::Ops(OpsError::Parse {
            command: "c".into(),
            source: crate::ceph::parse::ParseError::Empty,
        }),
        CollectError::Ops(OpsError::NoDaemonAnswered {
            command: "c".into(),
            detail: String::new(),
        }),
        CollectError::Ops(OpsError::Ceph(CephError::PermissionDenied {
            command: "c".into(),
            stderr: String::new(),
            cap: String::new(),
        })),
    ];
    for e in errors {
        assert!(
            crate::metrics::ERROR_REASONS.contains(&e.reason()),
            "{}",
            e.reason()
        );
    }
    let text = render(&Snapshot::empty(Duration::from_secs(15)));
    assert!(text.contains(
        "ceph_recovery_budget_collector_errors_total{collector=\"latency\",reason=\"timeout\"} 0"
    ));
}

/// The real 4-OSD `tell osd.* perf histogram dump` of the lab after it was filled.
fn four_osds(client: &FakeClient) {
    client.set(
        &commands::histograms(),
        Reply::ok(fixture("lab/healthy.tell-osd-all-perf-histogram-dump.out")),
    );
}

/// `_bucket{LABELS}` series of the histogram with `le="+Inf"`, as (labels, value).
fn inf_buckets(text: &str) -> Vec<(String, f64)> {
    text.lines()
        .filter_map(|l| l.strip_prefix("ceph_osd_op_w_latency_bucket"))
        .filter(|l| l.contains("le=\"+Inf\""))
        .filter_map(|l| {
            let (labels, v) = l.rsplit_once(' ')?;
            Some((labels.to_string(), v.parse().ok()?))
        })
        .collect()
}

#[tokio::test(start_paused = true)]
async fn host_mode_collects_only_the_local_histograms() {
    let client = FakeClient::new();
    four_osds(&client);
    let mut c = Collector::new(
        client.clone(),
        CollectSettings {
            cluster_state: false,
            ..settings()
        },
    );
    let s = c.collect_once().await;
    assert!(s.ready(Instant::now()), "ready on histograms alone");
    let mut calls = client.calls();
    calls.sort_by_key(|c| c.to_string());
    assert_eq!(
        calls,
        vec![commands::write_latency_sums(), commands::histograms()],
        "the histograms and their op_w_latency counters, nothing else"
    );
    let text = render(&s);
    assert_eq!(inf_buckets(&text).len(), 4, "{text}");
    assert_eq!(
        value(
            &text,
            "ceph_recovery_budget_collector_up{collector=\"latency\"}"
        ),
        Some(1.0)
    );
    // Nothing claims to know the cluster: no status families, no "down" status collector.
    assert_eq!(value(&text, "ceph_pgs"), None);
    assert!(!text.contains("collector=\"status\""), "{text}");
}

#[tokio::test(start_paused = true)]
async fn aggregated_histograms_sum_the_osds_per_host_or_cluster() {
    let client = cluster("healthy-idle");
    four_osds(&client);
    let per_osd = {
        let mut c = Collector::new(client.clone(), settings());
        let text = render(&c.collect_once().await);
        inf_buckets(&text).iter().map(|(_, v)| v).sum::<f64>()
    };
    assert!(per_osd > 0.0);

    let mut c = Collector::new(
        client.clone(),
        CollectSettings {
            grouping: Grouping::Cluster,
            ..settings()
        },
    );
    let text = render(&c.collect_once().await);
    assert_eq!(
        inf_buckets(&text),
        vec![("{le=\"+Inf\"}".to_string(), per_osd)]
    );

    // Per host, from the lab's real `osd tree` (all four OSDs on host "vm").
    client.set(
        &commands::osd_tree(),
        Reply::ok(fixture("lab/healthy.osd-tree.out")),
    );
    let mut c = Collector::new(
        client.clone(),
        CollectSettings {
            grouping: Grouping::Host,
            ..settings()
        },
    );
    let text = render(&c.collect_once().await);
    assert_eq!(
        inf_buckets(&text),
        vec![("{host=\"vm\",le=\"+Inf\"}".to_string(), per_osd)]
    );
}

/// The recorded lab pair (healthy, idle after fio): `perf dump osd op_w_latency` and the filtered
/// histogram of the same four OSDs, read 2 s apart with no write in between.
fn four_osds_with_sums(client: &FakeClient) {
    client.set(
        &commands::histograms(),
        Reply::ok(fixture(
            "lab/healthy.tell-osd-all-perf-histogram-dump-osd-op_w_latency_in_bytes_histogram.out",
        )),
    );
    client.set(
        &commands::write_latency_sums(),
        Reply::ok(fixture(
            "lab/healthy.tell-osd-all-perf-dump-osd-op_w_latency.out",
        )),
    );
}

/// Average write latency works: each OSD's histogram has `_sum` (Ceph's op_w_latency seconds)
/// beside `_count`, the `_count` is the histogram's total and, read with nothing written in
/// between, equals the counter's own count; in both formats (OpenMetrics writes `_count` only
/// with `_sum`, so before it had neither).
#[tokio::test(start_paused = true)]
async fn the_histogram_has_sum_and_count_so_that_average_latency_works() {
    let client = cluster("healthy-idle");
    four_osds_with_sums(&client);
    let mut c = Collector::new(client, settings());
    let s = c.collect_once().await;
    let lat = &s.latency.as_ref().unwrap().value;
    for (osd, h) in &lat.per_osd {
        assert_eq!(
            h.total(),
            lat.sums[osd].count,
            "{osd}: histogram total = avgcount"
        );
    }
    for format in [Format::Text004, Format::OpenMetrics100] {
        let text = text_in(&s, format);
        let v = |series: &str| value(&text, series).unwrap_or_else(|| panic!("{series}: {text}"));
        for (osd, count, sum) in [
            ("osd.0", 5776.0, 89.899070622),
            ("osd.3", 8202.0, 128.025170293),
        ] {
            let l = format!("{{ceph_daemon=\"{osd}\"}}");
            assert_eq!(v(&format!("ceph_osd_op_w_latency_count{l}")), count);
            assert_eq!(v(&format!("ceph_osd_op_w_latency_sum{l}")), sum);
            // prometheus-client writes `le` first in OpenMetrics, last in text (Prometheus sorts
            // labels: the same series).
            let inf = if format == Format::OpenMetrics100 {
                format!("ceph_osd_op_w_latency_bucket{{le=\"+Inf\",ceph_daemon=\"{osd}\"}}")
            } else {
                format!("ceph_osd_op_w_latency_bucket{{ceph_daemon=\"{osd}\",le=\"+Inf\"}}")
            };
            assert_eq!(v(&inf), count);
            // 15.6 ms, Ceph's own avgtime for osd.0.
            let avg = sum / count;
            assert!((0.015..0.016).contains(&avg), "{osd}: {avg}");
        }
    }

    // --latency.aggregate cluster: one _sum, the four OSDs' seconds added up.
    let client = cluster("healthy-idle");
    four_osds_with_sums(&client);
    let mut c = Collector::new(
        client,
        CollectSettings {
            grouping: Grouping::Cluster,
            ..settings()
        },
    );
    let text = render(&c.collect_once().await);
    let total = 89.899070622 + 81.711337797 + 70.126797533 + 128.025170293;
    let sum = value(&text, "ceph_osd_op_w_latency_sum").unwrap();
    assert!((sum - total).abs() < 1e-9, "{sum} vs {total}");
    assert_eq!(
        value(&text, "ceph_osd_op_w_latency_count"),
        Some((5776 + 5295 + 4589 + 8202) as f64)
    );
}

/// Without the counters (an older Ceph that cannot filter perf dump, a timeout), the histograms
/// are still served and the collector is up; only `_sum` is unknown: NaN (prometheus-client, like
/// the protobuf format, always writes `_sum` with `_count`; NaN rather than a false 0 mean).
#[tokio::test(start_paused = true)]
async fn without_the_counters_the_histograms_are_served_with_an_unknown_sum() {
    let client = cluster("healthy-idle");
    four_osds_with_sums(&client);
    client.set(&commands::write_latency_sums(), Reply::Timeout);
    let mut c = Collector::new(client, settings());
    let s = c.collect_once().await;
    let text = render(&s);
    assert_eq!(inf_buckets(&text).len(), 4, "{text}");
    let sums: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("ceph_osd_op_w_latency_sum"))
        .collect();
    assert_eq!(sums.len(), 4, "{text}");
    assert!(sums.iter().all(|l| l.ends_with(" NaN")), "{sums:?}");
    assert_eq!(
        value(
            &text,
            "ceph_recovery_budget_collector_up{collector=\"latency\"}"
        ),
        Some(1.0)
    );
}
