//! A real Prometheus (Debian's 2.42) scrapes `/metrics` in the protobuf exposition, and gets the
//! same answers as one that scrapes OpenMetrics text: every series, every recording rule, every
//! alert expression and every dashboard query. The exporter serves a fixed snapshot built from
//! recorded outputs of the lab cluster (four OSDs with their write-latency histograms and sums),
//! so both see the same values; no Ceph is needed. Where prometheus is missing the test is
//! skipped with a line saying what to install (with CRB_REQUIRE_TOOLS=1 it fails instead).

mod common;

use std::sync::Arc;
use std::time::Duration;

use ceph_recovery_budget::ceph::fake::{FakeClient, Reply};
use ceph_recovery_budget::collect::{commands, CollectSettings, Collector, Snapshot};
use ceph_recovery_budget::enforcer::policy::Policy;
use ceph_recovery_budget::enforcer::EnforcerView;
use ceph_recovery_budget::http::{self, scrape::MetricsCache};
use ceph_recovery_budget::metrics::encode::Format;

use common::prom::{
    dashboard, dashboard_queries, percent_encode, query, start_prometheus_with, substitute,
    tool_or_skip, wait_until, yaml, Server, TempDir, ALERTS, RULES,
};
use serde_json::Value;

fn fixture(path: &str) -> Vec<u8> {
    std::fs::read(format!(
        "{}/tests/fixtures/{path}",
        env!("CARGO_MANIFEST_DIR")
    ))
    .expect("fixture")
}

/// The lab's healthy state: status, pools, PGs, and four OSDs' histograms with their sums.
async fn lab_snapshot() -> Snapshot {
    let c = FakeClient::new();
    for (cmd, file) in [
        (commands::status(), "healthy-idle/ceph_status.json"),
        (
            commands::pools(),
            "healthy-idle/ceph_osd_pool_ls_detail.json",
        ),
        (
            commands::undersized_pgs(),
            "healthy-idle/ceph_pg_ls_undersized.json",
        ),
        (
            commands::histograms(),
            "lab/healthy.tell-osd-all-perf-histogram-dump-osd-op_w_latency_in_bytes_histogram.out",
        ),
        (
            commands::write_latency_sums(),
            "lab/healthy.tell-osd-all-perf-dump-osd-op_w_latency.out",
        ),
    ] {
        c.set(&cmd, Reply::ok(fixture(file)));
    }
    c.set(
        &commands::osd_config_get("osd_op_queue"),
        Reply::ok(&b"\nosd.0: {\"osd_op_queue\":\"mclock_scheduler\"}\n"[..]),
    );
    c.set(
        &commands::osd_config_get("osd_mclock_profile"),
        Reply::ok(&b"\nosd.0: {\"osd_mclock_profile\":\"high_client_ops\"}\n"[..]),
    );
    let mut col = Collector::new(
        c,
        CollectSettings {
            // Long enough that the snapshot's data stays fresh for the whole test.
            interval: Duration::from_secs(600),
            recovery_window: Duration::from_secs(300),
            latency_window: Duration::from_secs(300),
            ..Default::default()
        },
    );
    col.collect_once().await
}

fn config(port: u16) -> String {
    format!(
        r#"global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files:
  - {rules}
  - {alerts}
scrape_configs:
  - job_name: ceph-recovery-budget
    static_configs:
      - targets: ["127.0.0.1:{port}"]
        labels:
          cluster: lab
"#,
        rules = common::repo().join(RULES).display(),
        alerts = common::repo().join(ALERTS).display(),
    )
}

/// A query's answer in a form to compare: each series' labels and its value (NaN equal to NaN).
fn answer(prom: &Server, expr: &str) -> Vec<String> {
    sorted(query(prom, expr).unwrap_or_else(|e| panic!("{expr}: {e}")))
}

/// The answer as of the Unix time `at`: two servers compared at the same instant (some queries
/// use `time()`).
fn answer_at(prom: &Server, expr: &str, at: f64) -> Vec<String> {
    let path = format!("/api/v1/query?query={}&time={at:.3}", percent_encode(expr));
    let (code, body) = common::http_get(prom.port, &path);
    let v: Value =
        serde_json::from_str(&body).unwrap_or_else(|e| panic!("HTTP {code} ({e}): {body}"));
    assert_eq!(v["status"], "success", "{expr}: {body}");
    sorted(v["data"]["result"].as_array().cloned().unwrap_or_default())
}

fn sorted(result: Vec<Value>) -> Vec<String> {
    let mut out: Vec<String> = result
        .iter()
        .map(|s: &Value| {
            let v = s["value"][1].as_str().unwrap_or("?");
            format!("{} {v}", s["metric"])
        })
        .collect();
    out.sort();
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_real_prometheus_scrapes_protobuf_and_gets_the_same_answers_as_from_text() {
    if tool_or_skip("prometheus", "prometheus").is_none() {
        return;
    }
    let snapshot = Arc::new(lab_snapshot().await);
    let (_tx, rx) = tokio::sync::watch::channel(snapshot);
    let cache = Arc::new(MetricsCache::new());
    let state = http::AppState {
        snapshots: rx,
        telemetry_path: "/metrics".into(),
        enforcer: Some(Arc::new(std::sync::Mutex::new(EnforcerView::new(
            &Policy::default(),
        )))),
    };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let app = http::router_with_cache(state, Arc::clone(&cache));
    tokio::spawn(async move { axum::serve(listener, app).await });

    let cache2 = Arc::clone(&cache);
    tokio::task::spawn_blocking(move || {
        let dir_proto = TempDir::new("protobuf-scrape");
        let dir_text = TempDir::new("text-scrape");
        // 2.42 asks for protobuf first with native histograms on, OpenMetrics otherwise.
        let proto = start_prometheus_with(
            &dir_proto,
            &config(port),
            "",
            &["--enable-feature=native-histograms"],
        );
        let text = start_prometheus_with(&dir_text, &config(port), "", &[]);

        // Up, with a few scrapes in (rules need two samples for rate()).
        for prom in [&proto, &text] {
            wait_until(Duration::from_secs(60), "scrapes in", || {
                let up = answer(prom, "count_over_time(up[1m])");
                let n: f64 = up
                    .first()?
                    .rsplit_once(' ')
                    .and_then(|(_, v)| v.parse().ok())?;
                (n >= 5.0).then_some(())
            });
            let up = answer(prom, "up");
            assert_eq!(up.len(), 1, "{up:?}");
            assert!(up[0].ends_with(" 1"), "{up:?}");
        }
        assert!(
            cache2.renders_in(Format::Protobuf) > 0,
            "no protobuf body was rendered: Prometheus did not negotiate it"
        );
        assert!(cache2.renders_in(Format::OpenMetrics100) > 0);

        // Every series, by name and labels, with its value.
        let all = r#"{__name__=~"ceph_.*"}"#;
        let series = answer(&proto, all);
        assert!(series.len() > 150, "{} series", series.len());
        assert_eq!(series, answer(&text, all));
        // The histogram in particular: 4 OSDs x 31 buckets, _sum and _count.
        let buckets = answer(&proto, "ceph_osd_op_w_latency_bucket");
        assert_eq!(buckets.len(), 4 * 31, "{buckets:?}");
        assert_eq!(buckets, answer(&text, "ceph_osd_op_w_latency_bucket"));
        let sums = answer(&proto, "ceph_osd_op_w_latency_sum");
        assert!(
            sums.iter()
                .any(|s| s.contains("\"osd.0\"") && s.ends_with(" 89.899070622")),
            "{sums:?}"
        );
        let counts = answer(&proto, "ceph_osd_op_w_latency_count");
        assert!(
            counts
                .iter()
                .any(|s| s.contains("\"osd.0\"") && s.ends_with(" 5776")),
            "{counts:?}"
        );

        // Recording rules, alert expressions, dashboard queries: the same answers.
        let mut exprs: Vec<String> = Vec::new();
        for file in [RULES, ALERTS] {
            for group in yaml(file)["groups"].as_array().expect("groups") {
                for rule in group["rules"].as_array().expect("rules") {
                    if let Some(record) = rule["record"].as_str() {
                        exprs.push(record.to_string());
                    }
                    if let Some(expr) = rule["expr"].as_str() {
                        exprs.push(expr.to_string());
                    }
                }
            }
        }
        for (_, expr, _) in dashboard_queries(&dashboard()) {
            exprs.push(substitute(&expr, "lab"));
        }
        assert!(exprs.len() > 30, "{} expressions", exprs.len());
        // The rules are evaluated each second by each server on its own clock: the answers of
        // a moment can differ while a rule's first evaluations come in, so compare until
        // equal, then all at once.
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        let differ = loop {
            // A second ago: both servers have evaluated their rules up to then.
            let at = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_secs_f64()
                - 1.0;
            let differ: Vec<String> = exprs
                .iter()
                .filter_map(|e| {
                    let (p, t) = (answer_at(&proto, e, at), answer_at(&text, e, at));
                    (p != t).then(|| format!("{e}\n  protobuf: {p:?}\n  text:     {t:?}"))
                })
                .collect();
            if differ.is_empty() || std::time::Instant::now() > deadline {
                break differ;
            }
            std::thread::sleep(Duration::from_secs(1));
        };
        assert!(
            differ.is_empty(),
            "different answers:\n{}",
            differ.join("\n")
        );
        let with_data = exprs
            .iter()
            .filter(|e| !answer(&proto, e).is_empty())
            .count();
        eprintln!(
            "{} expressions, {with_data} with data, the same from protobuf and text scrapes",
            exprs.len()
        );
        assert!(with_data > 20, "{with_data}");
    })
    .await
    .unwrap();
}
