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
    PAUSED_BY_ENFORCER, RULES, RULES_TEST, SUSPENDED,
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
    let Some((webhook, _dir, am)) = example_alertmanager() else {
        return;
    };
    let alerts = json!([
        posted(SUSPENDED, "lab", "info", &[]),
        posted(EXCEEDED, "lab", "warning", &[]),
        posted(EXCEEDED, "other", "warning", &[]),
    ]);
    let (code, body) = http_post_json(am.port, "/api/v2/alerts", &alerts.to_string());
    assert_eq!(code, 200, "posting alerts: {body}");

    wait_for_states(
        &am,
        &[
            (EXCEEDED, "lab", "suppressed"),
            (EXCEEDED, "other", "active"),
            (SUSPENDED, "lab", "active"),
        ],
    );
    assert_eq!(
        notifications(&webhook, 2),
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

/// Issue 15: while the enforcer's own pause holds (RecoveryPausedByEnforcer fires), alerts on
/// Ceph's OSDMAP_FLAGS health check (the mgr module's `ceph_health_detail{name="OSDMAP_FLAGS"}`,
/// which keep its `name` label) are muted for that cluster, and only then: the same alert of a
/// cluster where no pause of ours holds (a human's flag) is notified, the ceph-mixin's
/// CephHealthWarning is never muted, and once the pause alert resolves the muted alert is
/// notified.
#[test]
fn alertmanager_example_inhibits_osdmap_flags_only_while_the_enforcer_pauses() {
    let Some((webhook, _dir, am)) = example_alertmanager() else {
        return;
    };
    const FLAGS: &str = "CephOSDMapFlags"; // any alertname: the target is name="OSDMAP_FLAGS"
    const MIXIN: &str = "CephHealthWarning";
    let osdmap_flags = &[("name", "OSDMAP_FLAGS"), ("type", "ceph_default")];
    let pause = |ends: Option<&str>| {
        let mut a = posted(
            PAUSED_BY_ENFORCER,
            "lab",
            "info",
            &[("instance", "crb:9939"), ("job", "ceph-recovery-budget")],
        );
        if let Some(t) = ends {
            a["endsAt"] = json!(t);
        }
        a
    };
    let alerts = json!([
        pause(None),
        posted(FLAGS, "lab", "warning", osdmap_flags),
        posted(FLAGS, "other", "warning", osdmap_flags),
        posted(MIXIN, "lab", "warning", &[("type", "ceph_default")]),
    ]);
    let (code, body) = http_post_json(am.port, "/api/v2/alerts", &alerts.to_string());
    assert_eq!(code, 200, "posting alerts: {body}");
    wait_for_states(
        &am,
        &[
            (FLAGS, "lab", "suppressed"),
            (FLAGS, "other", "active"),
            (MIXIN, "lab", "active"),
            (PAUSED_BY_ENFORCER, "lab", "active"),
        ],
    );
    assert_eq!(
        notifications(&webhook, 3),
        vec![
            (
                "/storage-info".to_string(),
                PAUSED_BY_ENFORCER.to_string(),
                "lab".to_string()
            ),
            (
                "/storage-oncall".to_string(),
                MIXIN.to_string(),
                "lab".to_string()
            ),
            (
                "/storage-oncall".to_string(),
                FLAGS.to_string(),
                "other".to_string()
            ),
        ],
        "while the pause holds: OSDMAP_FLAGS of lab muted, the rest notified (sorted)"
    );

    // The enforcer's flags are gone (its alert resolves) but Ceph still reports OSDMAP_FLAGS:
    // a flag someone else set. It must now be notified.
    let ended =
        humantime::format_rfc3339_seconds(std::time::SystemTime::now() - Duration::from_secs(60))
            .to_string();
    let (code, body) = http_post_json(
        am.port,
        "/api/v2/alerts",
        &json!([
            pause(Some(&ended)),
            posted(FLAGS, "lab", "warning", osdmap_flags)
        ])
        .to_string(),
    );
    assert_eq!(code, 200, "posting alerts: {body}");
    wait_for_states(&am, &[(FLAGS, "lab", "active")]);
    wait_until(
        Duration::from_secs(30),
        "the OSDMAP_FLAGS alert of lab notified once the pause ended",
        || {
            notifications_now(&webhook)
                .contains(&(
                    "/storage-oncall".to_string(),
                    FLAGS.to_string(),
                    "lab".to_string(),
                ))
                .then_some(())
        },
    );
}

/// An alert as Prometheus posts it to Alertmanager.
fn posted(name: &str, cluster: &str, severity: &str, extra: &[(&str, &str)]) -> Value {
    let mut labels = json!({"alertname": name, "cluster": cluster, "severity": severity});
    for (k, v) in extra {
        labels[*k] = json!(v);
    }
    json!({"labels": labels, "annotations": {"summary": "posted by tests/promtool.rs"}})
}

/// A real Alertmanager running alerts/alertmanager.example.yml (after `amtool check-config`),
/// its webhooks pointed at a local receiver and its group_wait and group_interval at 1 s; `None`
/// (skipped) when the programs are not installed.
fn example_alertmanager() -> Option<(Webhook, TempDir, common::prom::Server)> {
    let amtool = tool_or_skip("amtool", "prometheus-alertmanager")?;
    tool_or_skip("prometheus-alertmanager", "prometheus-alertmanager")?;
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
        example.contains("http://127.0.0.1:5001/")
            && example.contains("group_wait: 30s")
            && example.contains("group_interval: 5m"),
        "the test rewrites the example's webhook URLs, group_wait and group_interval: update it"
    );
    let config = example
        .replace(
            "http://127.0.0.1:5001/",
            &format!("http://127.0.0.1:{}/", webhook.port),
        )
        .replace("group_wait: 30s", "group_wait: 1s")
        .replace("group_interval: 5m", "group_interval: 1s");
    let config = dir.write("alertmanager.yml", &config);
    let am = start_alertmanager(&dir, &config);
    Some((webhook, dir, am))
}

/// Polls Alertmanager's alert list until each (alertname, cluster) has its expected state
/// (`active`, `suppressed`): inhibition is applied as Alertmanager processes the alerts.
fn wait_for_states(am: &common::prom::Server, expected: &[(&str, &str, &str)]) {
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
            return;
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "expected (alertname, cluster, state) {expected:?}; Alertmanager lists:\n{last:#}"
        );
        std::thread::sleep(Duration::from_millis(300));
    }
}

/// (path, alertname, cluster) of every alert notified so far, sorted, without repeats.
fn notifications_now(webhook: &Webhook) -> Vec<(String, String, String)> {
    let mut notified = Vec::new();
    for (path, body) in webhook.received() {
        let v: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
        for a in v["alerts"].as_array().cloned().unwrap_or_default() {
            if a["status"] != "firing" {
                continue;
            }
            notified.push((
                path.clone(),
                a["labels"]["alertname"].as_str().unwrap_or("?").to_string(),
                a["labels"]["cluster"].as_str().unwrap_or("?").to_string(),
            ));
        }
    }
    notified.sort();
    notified.dedup();
    notified
}

/// Waits for `n` distinct notified alerts, then a little more for any unexpected one.
fn notifications(webhook: &Webhook, n: usize) -> Vec<(String, String, String)> {
    wait_until(
        Duration::from_secs(30),
        &format!("{n} webhook notifications"),
        || (notifications_now(webhook).len() >= n).then_some(()),
    );
    std::thread::sleep(Duration::from_secs(3));
    notifications_now(webhook)
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
