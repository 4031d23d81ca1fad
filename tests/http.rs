//! The HTTP side as Prometheus and on-call see it: content negotiation, readiness, decisions,
//! the status report and the `status` command's lines.

use std::sync::Arc;
use std::time::Duration;

use ceph_recovery_budget::ceph::fake::{FakeClient, Reply};
use ceph_recovery_budget::collect::{commands, CollectSettings, Collector, Snapshot};
use ceph_recovery_budget::enforcer::policy::Policy;
use ceph_recovery_budget::enforcer::{DecisionRecord, EnforcerView};
use ceph_recovery_budget::http::{self, report::StatusReport};
use ceph_recovery_budget::http_client::{get, get_ok, HttpTarget, Options, Response};

fn fixture(path: &str) -> Vec<u8> {
    std::fs::read(format!(
        "{}/tests/fixtures/{path}",
        env!("CARGO_MANIFEST_DIR")
    ))
    .expect("fixture")
}

async fn undersized_snapshot() -> Snapshot {
    let c = FakeClient::new();
    c.set(
        &commands::status(),
        Reply::ok(fixture("undersized/ceph_status.json")),
    );
    c.set(
        &commands::pools(),
        Reply::ok(fixture("undersized/ceph_osd_pool_ls_detail.json")),
    );
    c.set(
        &commands::undersized_pgs(),
        Reply::ok(fixture("undersized/ceph_pg_ls_undersized.json")),
    );
    c.set(&commands::histograms(), Reply::Timeout);
    c.set(
        &commands::osd_config_get("osd_op_queue"),
        Reply::ok(&b"\nosd.0: {\"osd_op_queue\":\"mclock_scheduler\"}\n"[..]),
    );
    c.set(
        &commands::osd_config_get("osd_mclock_profile"),
        Reply::ok(&b"\nosd.0: {\"osd_mclock_profile\":\"high_recovery_ops\"}\n"[..]),
    );
    let mut col = Collector::new(
        c,
        CollectSettings {
            interval: Duration::from_secs(15),
            recovery_window: Duration::from_secs(300),
            latency_window: Duration::from_secs(300),
            ..Default::default()
        },
    );
    col.collect_once().await
}

/// GET `path` asking for `accept`, as Prometheus or a browser would.
async fn get_accepting(port: u16, path: &str, accept: &'static str) -> Response {
    let target = HttpTarget::parse(&format!("http://127.0.0.1:{port}")).unwrap();
    let options = Options {
        accept: Some(accept),
        ..Options::default()
    };
    get(&target, path, options)
        .await
        .unwrap_or_else(|e| panic!("{e}"))
}

fn content_type(r: &Response) -> String {
    r.content_type.as_deref().unwrap_or("").to_lowercase()
}

struct Server {
    port: u16,
    snapshots: tokio::sync::watch::Sender<Arc<Snapshot>>,
}

async fn serve(view: Option<EnforcerView>) -> Server {
    let (tx, rx) = tokio::sync::watch::channel(Arc::new(Snapshot::empty(Duration::from_secs(15))));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let app = http::router(http::AppState {
        snapshots: rx,
        telemetry_path: "/metrics".into(),
        enforcer: view.map(|v| Arc::new(std::sync::Mutex::new(v))),
    });
    tokio::spawn(async move { axum::serve(listener, app).await });
    Server {
        port,
        snapshots: tx,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prometheus_gets_openmetrics_when_it_asks_and_text_otherwise() {
    let srv = serve(None).await;
    srv.snapshots
        .send(Arc::new(undersized_snapshot().await))
        .unwrap();
    let port = srv.port;
    let r = get_accepting(port, "/metrics", "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1").await;
    assert!(
        content_type(&r).contains("application/openmetrics-text; version=1.0.0"),
        "{r:?}"
    );
    assert!(r.body.ends_with("# EOF\n"), "OpenMetrics ends with # EOF");
    assert!(
        r.body.contains("ceph_pool_at_min_size{pool=\"rbd-vms\"} 1"),
        "{}",
        r.body
    );
    let r = get_accepting(port, "/metrics", "*/*").await;
    assert!(
        content_type(&r).contains("text/plain; version=0.0.4"),
        "{r:?}"
    );
    let body = r.body;
    assert!(!body.contains("# EOF"));
    // The latency collector timed out: its families are absent, the collector is down, the rest is served.
    assert!(body.contains("ceph_recovery_budget_collector_up{collector=\"latency\"} 0"));
    assert!(!body.contains("ceph_osd_op_w_latency_bucket"));
    assert!(body.contains("ceph_pg_undersized 19"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ready_only_after_the_first_status_and_healthy_always() {
    let srv = serve(None).await;
    let port = srv.port;
    let r = get_accepting(port, "/-/ready", "*/*").await;
    assert_eq!(r.status, 503, "{r:?}");
    assert!(r.body.contains("not been read yet"));
    let r = get_accepting(port, "/-/healthy", "*/*").await;
    assert_eq!(r.status, 200, "{r:?}");
    srv.snapshots
        .send(Arc::new(undersized_snapshot().await))
        .unwrap();
    let r = get_accepting(port, "/-/ready", "*/*").await;
    assert_eq!(r.status, 200, "{r:?}");
    // The enforcer is off: /decisions says so.
    let r = get_accepting(port, "/decisions", "*/*").await;
    assert!(
        r.status == 404 && r.body.contains("enforcer is off"),
        "{r:?}"
    );
}

fn record(event: &str, message: &str, time: f64) -> DecisionRecord {
    DecisionRecord {
        time,
        mode: "enforce",
        event: event.into(),
        performed: true,
        message: message.into(),
        changes: vec![],
        p99_seconds: Some(0.0412),
        bound_seconds: Some(0.032),
        baseline_seconds: Some(0.016),
        pgs_recovering: 12,
        pgs_undersized: 0,
        degraded_objects: 0,
        misplaced_objects: 4210,
        pools_at_min_size: vec![],
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn decisions_status_and_landing_page_for_on_call() {
    let mut view = EnforcerView::new(&Policy::default());
    view.push_decision(record(
        "BREACH",
        "BREACH: client p99 write 41.2 ms > bound 32.0 ms",
        1.8e9,
    ));
    view.push_decision(record(
        "THROTTLE",
        "THROTTLE osd_mclock_profile balanced -> high_client_ops: because",
        1.8e9 + 900.0,
    ));
    view.baseline_seconds = Some(0.016);
    view.bound_seconds = Some(0.032);
    view.p99_seconds = Some(0.0412);
    view.breach_seconds = 1050.0;
    view.applied
        .insert("osd_mclock_profile".into(), "high_client_ops".into());
    let srv = serve(Some(view)).await;
    srv.snapshots
        .send(Arc::new(undersized_snapshot().await))
        .unwrap();
    let target = HttpTarget::parse(&format!("http://127.0.0.1:{}", srv.port)).unwrap();
    let json = Options::json();
    let decisions = get_ok(&target, "/decisions?limit=1", json).await.unwrap();
    let status = get_ok(&target, "/api/status", json).await.unwrap();
    let landing = get_ok(&target, "/", json).await.unwrap();
    let d: serde_json::Value = serde_json::from_str(&decisions).unwrap();
    assert_eq!(d.as_array().map(Vec::len), Some(1), "limit=1");
    assert_eq!(d[0]["event"], "THROTTLE", "newest first");
    assert_eq!(d[0]["bound_seconds"], 0.032);

    let report: StatusReport = serde_json::from_str(&status).unwrap();
    let lines = report.lines();
    let text = lines.join("\n");
    assert!(
        text.contains("enforcer: observe mode, state IDLE"),
        "{text}"
    );
    assert!(text.contains("client p99 write 41.2 ms, bound 32.0 ms (2 x baseline 16.0 ms), ABOVE the bound for 17m30s"), "{text}");
    assert!(text.contains("recovery: 7880 degraded + 0 misplaced objects, rate not measured yet (Ceph says 0 obj/s)"), "{text}");
    assert!(
        text.contains(
            "redundancy: 19 PGs undersized; pools at min_size: device_health_metrics, rbd-vms"
        ),
        "{text}"
    );
    assert!(
        text.contains("mclock profile in force: high_recovery_ops"),
        "{text}"
    );
    assert!(
        text.contains("set by the enforcer: osd_mclock_profile=high_client_ops"),
        "{text}"
    );
    assert!(text.contains("collectors down: latency"), "{text}");
    assert!(
        text.contains(
            "2027-01-15T08:15:00Z THROTTLE osd_mclock_profile balanced -> high_client_ops"
        ),
        "{text}"
    );
    assert!(lines.len() <= 12, "a few plain lines, not a page: {text}");

    assert!(landing.contains("<pre>enforcer: observe mode"), "{landing}");
    assert!(
        landing.contains("THROTTLE osd_mclock_profile balanced -&gt; high_client_ops"),
        "{landing}"
    );
}
