//! The Prometheus side with the real programs: promtool checks and unit-tests rules/ and
//! alerts/, Alertmanager routes and inhibits with the example config, a real Prometheus parses
//! every dashboard query. They come from Debian's `prometheus` and `prometheus-alertmanager`
//! packages (scripts/test installs them). Where a program is missing, its tests are skipped
//! with a line saying what to install; with CRB_REQUIRE_TOOLS=1 (scripts/test) they fail.

mod common;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use common::prom::{
    dashboard, dashboard_queries, query, read, run_ok, start_alertmanager, start_prometheus,
    substitute, tool_or_skip, wait_until, TempDir, ALERTS, ALERTS_TEST, AM_EXAMPLE, EXCEEDED,
    RULES, RULES_TEST, SUSPENDED,
};
use common::{http_post_json, repo};

// ------------------------------------------------------------------------------------------
// Rules and alerts
// ------------------------------------------------------------------------------------------

#[test]
fn rule_files_pass_promtool_check() {
    let Some(promtool) = tool_or_skip("promtool", "prometheus") else {
        return;
    };
    let out = run_ok(
        Command::new(&promtool)
            .args(["check", "rules", RULES, ALERTS])
            .current_dir(repo()),
        "promtool check rules",
    );
    assert_eq!(
        out.matches("SUCCESS").count(),
        2,
        "both files checked:\n{out}"
    );
}

#[test]
fn promtool_unit_tests_of_rules_and_alerts_pass() {
    let Some(promtool) = tool_or_skip("promtool", "prometheus") else {
        return;
    };
    let out = run_ok(
        Command::new(&promtool)
            .args(["test", "rules", RULES_TEST, ALERTS_TEST])
            .current_dir(repo()),
        "promtool test rules (tests/prometheus/)",
    );
    assert_eq!(
        out.matches("SUCCESS").count(),
        2,
        "both test files ran:\n{out}"
    );
}

/// The example's inhibit rule and routes, in a real Alertmanager: with both alerts for one
/// cluster, Exceeded is suppressed and never notified; Exceeded of another cluster is notified
/// to the on-call receiver and Suspended (severity info) to the info receiver.
#[test]
fn alertmanager_example_routes_and_inhibits_exceeded_while_suspended() {
    let Some(amtool) = tool_or_skip("amtool", "prometheus-alertmanager") else {
        return;
    };
    if tool_or_skip("prometheus-alertmanager", "prometheus-alertmanager").is_none() {
        return;
    }
    run_ok(
        Command::new(&amtool)
            .args(["check-config", AM_EXAMPLE])
            .current_dir(repo()),
        "amtool check-config",
    );

    let webhook = Webhook::start();
    let dir = TempDir::new("alertmanager");
    let example = read(AM_EXAMPLE);
    assert!(
        example.contains("http://127.0.0.1:5001/") && example.contains("group_wait: 30s"),
        "the test rewrites the example's webhook URLs and group_wait: update it"
    );
    let config = example
        .replace(
            "http://127.0.0.1:5001/",
            &format!("http://127.0.0.1:{}/", webhook.port),
        )
        .replace("group_wait: 30s", "group_wait: 1s");
    let config = dir.write("alertmanager.yml", &config);
    let am = start_alertmanager(&dir, &config);

    let alert = |name: &str, cluster: &str, severity: &str| {
        json!({"labels": {"alertname": name, "cluster": cluster, "severity": severity},
               "annotations": {"summary": "posted by tests/promtool.rs"}})
    };
    let alerts = json!([
        alert(SUSPENDED, "lab", "info"),
        alert(EXCEEDED, "lab", "warning"),
        alert(EXCEEDED, "other", "warning"),
    ]);
    let (code, body) = http_post_json(am.port, "/api/v2/alerts", &alerts.to_string());
    assert_eq!(code, 200, "posting alerts: {body}");

    // Inhibition is applied as Alertmanager processes the alerts: poll until it settles.
    let expected = [
        (EXCEEDED, "lab", "suppressed"),
        (EXCEEDED, "other", "active"),
        (SUSPENDED, "lab", "active"),
    ];
    let start = Instant::now();
    loop {
        let last = am.get_json("/api/v2/alerts");
        let state = |name: &str, cluster: &str| -> Option<String> {
            last.as_array()?
                .iter()
                .find(|a| a["labels"]["alertname"] == name && a["labels"]["cluster"] == cluster)
                .and_then(|a| a["status"]["state"].as_str().map(str::to_string))
        };
        if expected
            .iter()
            .all(|(n, c, s)| state(n, c).as_deref() == Some(*s))
        {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "expected {EXCEEDED}/lab suppressed (inhibited by {SUSPENDED}/lab), {EXCEEDED}/other \
             and {SUSPENDED}/lab active; Alertmanager lists:\n{last:#}"
        );
        std::thread::sleep(Duration::from_millis(300));
    }

    // Notifications: wait for both expected ones, then a little more for any unexpected one.
    wait_until(
        Duration::from_secs(30),
        "both webhook notifications",
        || (webhook.received().len() >= 2).then_some(()),
    );
    std::thread::sleep(Duration::from_secs(3));
    let mut notified: Vec<(String, String, String)> = Vec::new();
    for (path, body) in webhook.received() {
        let v: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
        for a in v["alerts"].as_array().cloned().unwrap_or_default() {
            notified.push((
                path.clone(),
                a["labels"]["alertname"].as_str().unwrap_or("?").to_string(),
                a["labels"]["cluster"].as_str().unwrap_or("?").to_string(),
            ));
        }
    }
    notified.sort();
    notified.dedup();
    assert_eq!(
        notified,
        vec![
            (
                "/storage-info".to_string(),
                SUSPENDED.to_string(),
                "lab".to_string()
            ),
            (
                "/storage-oncall".to_string(),
                EXCEEDED.to_string(),
                "other".to_string()
            ),
        ],
        "what the example config notifies, and where"
    );
}

/// A webhook receiver on loopback recording (path, body) of each POST.
struct Webhook {
    port: u16,
    got: Arc<Mutex<Vec<(String, String)>>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Webhook {
    fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind a webhook port");
        listener.set_nonblocking(true).expect("nonblocking");
        let port = listener.local_addr().expect("local addr").port();
        let got = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (got2, stop2) = (Arc::clone(&got), Arc::clone(&stop));
        let thread = std::thread::spawn(move || {
            while !stop2.load(Ordering::Relaxed) {
                match listener.accept() {
                    Ok((stream, _)) => {
                        if let Some(req) = read_http_request(stream) {
                            if let Ok(mut g) = got2.lock() {
                                g.push(req);
                            }
                        }
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(50)),
                }
            }
        });
        Webhook {
            port,
            got,
            stop,
            thread: Some(thread),
        }
    }

    fn received(&self) -> Vec<(String, String)> {
        self.got.lock().map(|g| g.clone()).unwrap_or_default()
    }
}

impl Drop for Webhook {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Reads one HTTP request (head + Content-Length body), answers 200, returns (path, body).
fn read_http_request(mut stream: TcpStream) -> Option<(String, String)> {
    stream.set_nonblocking(false).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    let head_end = loop {
        let n = stream.read(&mut chunk).ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
    let path = head.split_whitespace().nth(1)?.to_string();
    let len: usize = head
        .lines()
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.eq_ignore_ascii_case("content-length")
                .then(|| v.trim().parse().ok())?
        })
        .unwrap_or(0);
    while buf.len() < head_end + len {
        let n = stream.read(&mut chunk).ok()?;
        if n == 0 {
            break;
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    let body = String::from_utf8_lossy(&buf[head_end..]).into_owned();
    let _ = stream.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
    Some((path, body))
}

// ------------------------------------------------------------------------------------------
// Dashboard
// ------------------------------------------------------------------------------------------

/// Every query of the dashboard, and every rule, parses in a real Prometheus (no scrape
/// needed: a parse error is an error whatever the data).
#[test]
fn dashboard_queries_parse_in_a_real_prometheus() {
    if tool_or_skip("prometheus", "prometheus").is_none() {
        return;
    }
    let dir = TempDir::new("parse");
    let prom = start_prometheus(&dir, "global:\n  scrape_interval: 15s\n");
    let d = dashboard();
    let mut failures = Vec::new();
    for (what, expr, _) in dashboard_queries(&d) {
        for cluster in ["lab", ".*"] {
            let q = substitute(&expr, cluster);
            if let Err(e) = query(&prom, &q) {
                failures.push(format!("{what}: {e}\n    {q}"));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "queries Prometheus rejects:\n{}",
        failures.join("\n")
    );
}
