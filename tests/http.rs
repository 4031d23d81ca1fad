//! The HTTP side as Prometheus and on-call see it: content negotiation, readiness, decisions,
//! the status report and the `status` command's lines.

use std::sync::Arc;
use std::time::Duration;

use ceph_recovery_budget::ceph::fake::{FakeClient, Reply};
use ceph_recovery_budget::collect::{commands, CollectSettings, Collector, Snapshot};
use ceph_recovery_budget::enforcer::policy::Policy;
use ceph_recovery_budget::enforcer::{DecisionRecord, EnforcerView};
use ceph_recovery_budget::http::scrape::MetricsCache;
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
        &commands::pgs_brief(),
        Reply::ok(fixture("undersized/ceph_pg_dump_pgs_brief.json")),
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
    serve_with(view.map(|v| Arc::new(std::sync::Mutex::new(v))), None).await
}

async fn serve_with(
    enforcer: Option<ceph_recovery_budget::enforcer::Shared>,
    cache: Option<Arc<MetricsCache>>,
) -> Server {
    let (tx, rx) = tokio::sync::watch::channel(Arc::new(Snapshot::empty(Duration::from_secs(15))));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let state = http::AppState {
        snapshots: rx,
        telemetry_path: "/metrics".into(),
        enforcer,
    };
    let app = match cache {
        Some(c) => http::router_with_cache(state, c),
        None => http::router(state),
    };
    tokio::spawn(async move { axum::serve(listener, app).await });
    Server {
        port,
        snapshots: tx,
    }
}

/// A GET with extra request headers; the body as bytes (it may be gzip).
fn get_with(port: u16, path: &str, headers: &[(&str, &str)]) -> (String, Vec<u8>) {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    let mut req = format!("GET {path} HTTP/1.0\r\nHost: x\r\n");
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    s.write_all(req.as_bytes()).unwrap();
    let mut buf = Vec::new();
    s.read_to_end(&mut buf).unwrap();
    let split = buf.windows(4).position(|w| w == b"\r\n\r\n").unwrap();
    (
        String::from_utf8_lossy(&buf[..split]).to_lowercase(),
        buf[split + 4..].to_vec(),
    )
}

fn gunzip(b: &[u8]) -> String {
    use std::io::Read;
    let mut out = String::new();
    flate2::read::GzDecoder::new(b)
        .read_to_string(&mut out)
        .expect("a valid gzip body");
    out
}

const PROMETHEUS_ACCEPT: &str = "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";

/// What Prometheus sends gets a gzip body (Content-Encoding, Vary), the same exposition as the
/// plain one; a scraper that does not offer gzip gets plain text. Bodies are rendered once per
/// snapshot and format and compressed once, however many scrapers ask.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scrapes_get_gzip_when_they_accept_it_and_one_body_is_built_per_snapshot() {
    let cache = Arc::new(MetricsCache::new());
    let srv = serve_with(None, Some(Arc::clone(&cache))).await;
    srv.snapshots
        .send(Arc::new(undersized_snapshot().await))
        .unwrap();
    let port = srv.port;
    let gz = [("Accept", PROMETHEUS_ACCEPT), ("Accept-Encoding", "gzip")];
    let (results, plain) = tokio::task::spawn_blocking(move || {
        // 20 scrapers at once, as Prometheus asks.
        let threads: Vec<_> = (0..20)
            .map(|_| std::thread::spawn(move || get_with(port, "/metrics", &gz)))
            .collect();
        let results: Vec<_> = threads.into_iter().map(|t| t.join().unwrap()).collect();
        let plain = get_with(port, "/metrics", &[("Accept", PROMETHEUS_ACCEPT)]);
        (results, plain)
    })
    .await
    .unwrap();
    let (plain_head, plain_body) = plain;
    assert!(!plain_head.contains("content-encoding"), "{plain_head}");
    let plain_text = String::from_utf8(plain_body).unwrap();
    assert!(plain_text.ends_with("# EOF\n"));
    for (head, body) in &results {
        assert!(head.contains("content-encoding: gzip"), "{head}");
        assert!(head.contains("vary: accept, accept-encoding"), "{head}");
        assert!(
            head.contains("content-type: application/openmetrics-text; version=1.0.0"),
            "{head}"
        );
        assert!(
            body.len() < plain_text.len() / 3,
            "{} vs {}",
            body.len(),
            plain_text.len()
        );
        assert_eq!(gunzip(body), plain_text, "the same exposition, compressed");
    }
    assert_eq!(
        (cache.renders(), cache.compressions()),
        (1, 1),
        "21 scrapes of one snapshot in one format: one render, one compression"
    );

    // A new snapshot: rendered again, once.
    srv.snapshots
        .send(Arc::new(undersized_snapshot().await))
        .unwrap();
    let (_, body) = tokio::task::spawn_blocking(move || {
        get_with(port, "/metrics", &[("Accept-Encoding", "gzip, deflate")]);
        get_with(port, "/metrics", &[("Accept-Encoding", "gzip, deflate")])
    })
    .await
    .unwrap();
    let text = gunzip(&body);
    assert!(
        text.contains("ceph_pg_undersized 19\n") && !text.contains("# EOF"),
        "text 0.0.4"
    );
    assert_eq!((cache.renders(), cache.compressions()), (2, 2));
}

/// The cache never serves what a render would not give now: the enforcer's families follow its
/// view at once (no new snapshot needed), and data that became stale since the snapshot was
/// published is dropped, with collector_up 0.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cached_bodies_follow_the_enforcer_and_the_age_of_the_data() {
    let shared = Arc::new(std::sync::Mutex::new(EnforcerView::new(&Policy::default())));
    let srv = serve_with(Some(Arc::clone(&shared)), None).await;
    let mut snapshot = undersized_snapshot().await;
    // The status was read 44.5 s ago: stale (older than 3 x 15 s) in half a second.
    if let Some(status) = snapshot.status.as_mut() {
        status.at -= Duration::from_millis(44_500);
    }
    srv.snapshots.send(Arc::new(snapshot)).unwrap();
    let port = srv.port;
    let scrape = move || {
        let (_, body) = get_with(port, "/metrics", &[("Accept-Encoding", "gzip")]);
        gunzip(&body)
    };
    let before = tokio::task::spawn_blocking(scrape).await.unwrap();
    assert!(
        before.contains("ceph_recovery_budget_breached 0\n"),
        "{before}"
    );
    assert!(before.contains("ceph_degraded_objects "), "{before}");
    assert!(before.contains("ceph_recovery_budget_collector_up{collector=\"status\"} 1\n"));

    // The enforcer sees a breach: the very next scrape says so.
    if let Ok(mut v) = shared.lock() {
        v.breached = true;
        v.breach_seconds = 12.0;
    }
    let after = tokio::task::spawn_blocking(scrape).await.unwrap();
    assert!(
        after.contains("ceph_recovery_budget_breached 1\n"),
        "{after}"
    );
    assert!(
        after.contains("ceph_recovery_budget_breach_seconds 12\n"),
        "{after}"
    );

    tokio::time::sleep(Duration::from_millis(700)).await;
    let stale = tokio::task::spawn_blocking(scrape).await.unwrap();
    assert!(!stale.contains("ceph_degraded_objects "), "{stale}");
    assert!(
        stale.contains("ceph_recovery_budget_collector_up{collector=\"status\"} 0\n"),
        "{stale}"
    );
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

/// `/-/ready` as a readiness probe sees it, and the metrics served meanwhile.
async fn probe(port: u16) -> (u16, String, String) {
    let ready = get_accepting(port, "/-/ready", "*/*").await;
    let metrics = get_accepting(port, "/metrics", "*/*").await;
    (ready.status, ready.body, metrics.body)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ready_is_lost_again_when_the_status_cannot_be_read_or_goes_stale() {
    let srv = serve(None).await;
    let port = srv.port;
    let client = FakeClient::new();
    client.set(
        &commands::status(),
        Reply::ok(fixture("healthy-idle/ceph_status.json")),
    );
    let mut col = Collector::new(client.clone(), CollectSettings::default());
    srv.snapshots
        .send(Arc::new(col.collect_once().await))
        .unwrap();
    let (status, body, _) = probe(port).await;
    assert_eq!(status, 200, "{body}");

    // Ceph stops answering: the next cycle's status times out.
    client.set(&commands::status(), Reply::Timeout);
    srv.snapshots
        .send(Arc::new(col.collect_once().await))
        .unwrap();
    let (status, body, metrics) = probe(port).await;
    assert_eq!(status, 503, "{body}");
    assert!(
        body.starts_with("Not ready: the status collector is down")
            && body.contains("`ceph status` did not finish within"),
        "the reason is in the body: {body}"
    );
    assert!(
        metrics.contains("ceph_recovery_budget_collector_up{collector=\"status\"} 0\n"),
        "{metrics}"
    );

    // Ceph answers again: ready again.
    client.set(
        &commands::status(),
        Reply::ok(fixture("healthy-idle/ceph_status.json")),
    );
    let fresh = col.collect_once().await;
    srv.snapshots.send(Arc::new(fresh.clone())).unwrap();
    let (status, _, _) = probe(port).await;
    assert_eq!(status, 200);

    // The collector hangs (no new snapshot is published): the last status, taken 60 s ago, is
    // older than three 15 s intervals.
    let mut stale = fresh;
    if let Some(status) = stale.status.as_mut() {
        status.at -= Duration::from_secs(60);
    }
    srv.snapshots.send(Arc::new(stale)).unwrap();
    let (status, body, metrics) = probe(port).await;
    assert_eq!(status, 503, "{body}");
    assert!(
        body.contains("last data 60 s old, older than 45 s"),
        "{body}"
    );
    assert!(
        metrics.contains("ceph_recovery_budget_collector_up{collector=\"status\"} 0\n"),
        "{metrics}"
    );
    assert!(
        !metrics.contains("ceph_degraded_objects"),
        "stale status data is not served: {metrics}"
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
        level: None,
        deadline: None,
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
    // Every p99 names its window.
    assert!(text.contains("client p99 write 41.2 ms over the last 1m, bound 32.0 ms (2 x baseline 16.0 ms), ABOVE the bound for 17m30s"), "{text}");
    // It opens with what is happening and what to do: an OSD down but in (the OSD map was not
    // read here, so it says where to look).
    assert!(
        lines[0]
            .starts_with("NOW: 1 OSD (which: `ceph osd tree down`; reading the OSD map failed: ")
            && lines[0].contains("is down but still in"),
        "{text}"
    );
    assert!(
        lines[1].starts_with("DO: Bring the down OSD (`ceph osd tree down`) back"),
        "{text}"
    );
    assert_eq!(
        report.headline.as_ref().map(|h| h.case),
        Some(http::headline::Case::OsdsDownNotOut)
    );
    // Nothing can recover while the OSD is down but in (noout): no rate, no time to finish.
    assert!(text.contains("recovery: 7880 degraded + 0 misplaced objects, nothing recovers them while 1 OSD is down but in"), "{text}");
    assert!(
        text.contains("pools at min_size: device_health_metrics, rbd-vms; OSDs: 3 of 4 up, 4 in (1 down but in, noout set)"),
        "{text}"
    );
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
        landing.contains("<div class=\"headline\"><p class=\"what\">1 OSD (which:"),
        "{landing}"
    );
    assert!(
        landing.contains("THROTTLE osd_mclock_profile balanced -&gt; high_client_ops"),
        "{landing}"
    );
}
