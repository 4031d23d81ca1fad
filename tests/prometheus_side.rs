//! The Prometheus side (rules/, alerts/, dashboards/, the Dockerfile, deploy/kubernetes/),
//! tested with the real programs: promtool, prometheus, alertmanager and amtool (Debian's
//! `prometheus` and `prometheus-alertmanager` packages; .ci/run installs them).
//!
//! Plain tests run everywhere those programs exist and fail with a clear message where they do
//! not. The tests marked `#[ignore]` need the lab cluster (scripts/ceph-lab) and CRB_LAB=1:
//! - `dashboard_queries_return_data_from_a_real_scrape` only reads the cluster;
//! - `alerts_follow_a_real_rebalance_and_a_real_failure` disturbs it (rebalance, stops osd.3)
//!   and puts it back as it found it.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use common::{free_port, http_get, http_post_json, lab, lab_enabled, repo, Exporter};

const RULES: &str = "rules/ceph-recovery-budget.rules.yml";
const ALERTS: &str = "alerts/ceph-recovery-budget.alerts.yml";
const AM_EXAMPLE: &str = "alerts/alertmanager.example.yml";
const RULES_TEST: &str = "tests/prometheus/rules_test.yml";
const ALERTS_TEST: &str = "tests/prometheus/alerts_test.yml";
const DASHBOARD: &str = "dashboards/ceph-recovery-budget.json";
const RUNBOOK: &str = "docs/runbook.md";
const K8S: &str = "deploy/kubernetes";

const EXCEEDED: &str = "RecoveryLatencyBudgetExceeded";
const SUSPENDED: &str = "RecoveryLatencyBudgetSuspended";

/// The recorded cluster-wide p99 that RecoveryLatencyBudgetExceeded compares with the bound.
const P99: &str =
    "cluster_quantile:ceph_osd_op_w_latency_seconds:histogram_quantile5m{quantile=\"0.99\"}";

// ------------------------------------------------------------------------------------------
// Helpers
// ------------------------------------------------------------------------------------------

fn read(rel: &str) -> String {
    let path = repo().join(rel);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()))
}

/// A YAML file as JSON values (serde-saphyr is a dependency of the crate).
fn yaml(rel: &str) -> Value {
    serde_saphyr::from_str(&read(rel)).unwrap_or_else(|e| panic!("{rel} is not valid YAML: {e}"))
}

/// A program from PATH, or a failure that says what to install.
fn tool(name: &str, package: &str) -> PathBuf {
    std::env::var_os("PATH")
        .and_then(|paths| {
            std::env::split_paths(&paths)
                .map(|dir| dir.join(name))
                .find(|p| p.is_file())
        })
        .unwrap_or_else(|| {
            panic!(
                "`{name}` is not installed: these tests run the real program. Install Debian's \
                 `{package}` package (apt-get install {package}); .ci/run does."
            )
        })
}

/// Runs a command to completion; panics with its output unless it succeeds. Returns stdout.
fn run_ok(cmd: &mut Command, what: &str) -> String {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("{what}: cannot run {cmd:?}: {e}"));
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "{what} failed ({}):\n--- stdout\n{stdout}\n--- stderr\n{stderr}",
        out.status
    );
    stdout + &stderr
}

/// A scratch directory, removed when the test passes and kept (and named) when it fails.
struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> Self {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        let dir = std::env::temp_dir().join(format!(
            "crb-prometheus-side-{tag}-{}-{nanos}",
            std::process::id()
        ));
        std::fs::create_dir_all(&dir).expect("create a temp dir");
        TempDir(dir)
    }

    fn path(&self) -> &Path {
        &self.0
    }

    fn write(&self, name: &str, text: &str) -> PathBuf {
        let p = self.0.join(name);
        std::fs::write(&p, text).unwrap_or_else(|e| panic!("write {}: {e}", p.display()));
        p
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("kept {} for inspection", self.0.display());
        } else {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

fn percent_encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

fn wait_until<T>(timeout: Duration, what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let start = Instant::now();
    loop {
        if let Some(v) = f() {
            eprintln!("{what}: after {:.0} s", start.elapsed().as_secs_f64());
            return v;
        }
        assert!(
            start.elapsed() < timeout,
            "timed out after {timeout:?} waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// prometheus or alertmanager, started on a free port, killed on drop (its log shown then if
/// the test failed).
struct Server {
    name: &'static str,
    child: Child,
    port: u16,
    log: PathBuf,
}

impl Server {
    fn start(name: &'static str, program: &Path, args: &[String], log: PathBuf, port: u16) -> Self {
        Self::start_under(name, program, args, log, port, "")
    }

    /// A server whose routes live under `prefix` (`--web.route-prefix`).
    fn start_under(
        name: &'static str,
        program: &Path,
        args: &[String],
        log: PathBuf,
        port: u16,
        prefix: &str,
    ) -> Self {
        let file = std::fs::File::create(&log).expect("create a log file");
        let child = Command::new(program)
            .args(args)
            .stdin(Stdio::null())
            .stdout(file.try_clone().expect("dup log file"))
            .stderr(file)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", program.display()));
        let mut server = Server {
            name,
            child,
            port,
            log,
        };
        let start = Instant::now();
        loop {
            if http_get(server.port, &format!("{prefix}/-/ready")).0 == 200 {
                break;
            }
            if let Ok(Some(status)) = server.child.try_wait() {
                panic!(
                    "{name} exited ({status}) before it was ready:\n{}",
                    server.log_tail()
                );
            }
            assert!(
                start.elapsed() < Duration::from_secs(60),
                "{name} not ready on 127.0.0.1:{} after 60 s:\n{}",
                server.port,
                server.log_tail()
            );
            std::thread::sleep(Duration::from_millis(200));
        }
        server
    }

    fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(30)..].join("\n")
    }

    fn get_json(&self, path: &str) -> Value {
        let (code, body) = http_get(self.port, path);
        assert_eq!(code, 200, "{} GET {path}: {body}", self.name);
        serde_json::from_str(&body)
            .unwrap_or_else(|e| panic!("{} GET {path}: not JSON ({e}): {body}", self.name))
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if std::thread::panicking() {
            eprintln!("--- last lines of {} ({})", self.name, self.log.display());
            eprintln!("{}", self.log_tail());
        }
    }
}

fn start_prometheus(dir: &TempDir, config: &str) -> Server {
    start_prometheus_under(dir, config, "")
}

/// A Prometheus serving under `prefix` (as behind a reverse proxy at `/prometheus`).
fn start_prometheus_under(dir: &TempDir, config: &str, prefix: &str) -> Server {
    let prometheus = tool("prometheus", "prometheus");
    let port = free_port();
    let config_file = dir.write("prometheus.yml", config);
    let mut args = vec![
        format!("--config.file={}", config_file.display()),
        format!("--storage.tsdb.path={}", dir.path().join("data").display()),
        format!("--web.listen-address=127.0.0.1:{port}"),
    ];
    if !prefix.is_empty() {
        args.push(format!("--web.route-prefix={prefix}"));
    }
    Server::start_under(
        "prometheus",
        &prometheus,
        &args,
        dir.path().join("prometheus.log"),
        port,
        prefix,
    )
}

fn start_alertmanager(dir: &TempDir, config: &Path) -> Server {
    let alertmanager = tool("prometheus-alertmanager", "prometheus-alertmanager");
    let port = free_port();
    let args = vec![
        format!("--config.file={}", config.display()),
        format!(
            "--storage.path={}",
            dir.path().join("alertmanager").display()
        ),
        format!("--web.listen-address=127.0.0.1:{port}"),
        // No HA gossip: a single instance on loopback.
        "--cluster.listen-address=".to_string(),
    ];
    Server::start(
        "alertmanager",
        &alertmanager,
        &args,
        dir.path().join("alertmanager.log"),
        port,
    )
}

/// An instant query: the result vector, or Prometheus' error (a parse error, for example).
fn query(prom: &Server, expr: &str) -> Result<Vec<Value>, String> {
    let path = format!("/api/v1/query?query={}", percent_encode(expr));
    let (code, body) = http_get(prom.port, &path);
    let v: Value =
        serde_json::from_str(&body).map_err(|e| format!("HTTP {code}, not JSON ({e}): {body}"))?;
    if v["status"] != "success" {
        return Err(format!(
            "{}: {}",
            v["errorType"].as_str().unwrap_or("?"),
            v["error"].as_str().unwrap_or(&body)
        ));
    }
    Ok(v["data"]["result"].as_array().cloned().unwrap_or_default())
}

fn sample_value(sample: &Value) -> f64 {
    sample["value"][1]
        .as_str()
        .and_then(|s| s.parse().ok())
        .unwrap_or(f64::NAN)
}

/// The alert rules of a rule file: name -> rule.
fn alert_rules(rel: &str) -> BTreeMap<String, Value> {
    let doc = yaml(rel);
    let mut out = BTreeMap::new();
    for group in doc["groups"].as_array().expect("groups") {
        for rule in group["rules"].as_array().expect("rules") {
            if let Some(name) = rule["alert"].as_str() {
                out.insert(name.to_string(), rule.clone());
            }
        }
    }
    out
}

fn recording_rule_names() -> BTreeSet<String> {
    yaml(RULES)["groups"]
        .as_array()
        .expect("groups")
        .iter()
        .flat_map(|g| g["rules"].as_array().cloned().unwrap_or_default())
        .filter_map(|r| r["record"].as_str().map(str::to_string))
        .collect()
}

/// Every PromQL expression of the dashboard: (where, expr, must return data).
fn dashboard_queries(dashboard: &Value) -> Vec<(String, String, bool)> {
    let mut out = Vec::new();
    for panel in dashboard["panels"].as_array().expect("panels") {
        for t in panel["targets"].as_array().cloned().unwrap_or_default() {
            out.push((
                format!(
                    "panel {:?} target {}",
                    panel["title"].as_str().unwrap_or("?"),
                    t["refId"].as_str().unwrap_or("?")
                ),
                t["expr"].as_str().unwrap_or_default().to_string(),
                true,
            ));
        }
    }
    // Annotations mark events (decisions, firing alerts): none may have happened, so they
    // must parse but may be empty.
    for a in dashboard["annotations"]["list"]
        .as_array()
        .expect("annotations")
    {
        if let Some(expr) = a["expr"].as_str() {
            out.push((
                format!("annotation {:?}", a["name"].as_str().unwrap_or("?")),
                expr.to_string(),
                false,
            ));
        }
    }
    out
}

/// Grafana's variables, as Grafana would substitute them for a query.
fn substitute(expr: &str, cluster: &str) -> String {
    expr.replace("$__rate_interval", "1m")
        .replace("$__interval", "15s")
        .replace("${cluster}", cluster)
        .replace("$cluster", cluster)
}

/// `label_values(METRIC, LABEL)` of a Grafana variable.
fn label_values_query(q: &str) -> Option<(String, String)> {
    let inner = q.trim().strip_prefix("label_values(")?.strip_suffix(')')?;
    let (metric, label) = inner.rsplit_once(',')?;
    Some((metric.trim().to_string(), label.trim().to_string()))
}

/// `ceph_*` metric names used in PromQL text (recording-rule names have colons and are skipped).
fn ceph_metric_names(expr: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let bytes = expr.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        let is_ident = |b: u8| b.is_ascii_alphanumeric() || b == b'_' || b == b':';
        if is_ident(bytes[i]) && (i == 0 || !is_ident(bytes[i - 1])) {
            let start = i;
            while i < bytes.len() && is_ident(bytes[i]) {
                i += 1;
            }
            let word = &expr[start..i];
            // `ceph_pg_*` in a comment is a prefix, not a name.
            if word.starts_with("ceph_") && !word.contains(':') && !word.ends_with('_') {
                out.insert(word.to_string());
            }
        } else {
            i += 1;
        }
    }
    out
}

// ------------------------------------------------------------------------------------------
// Rules and alerts
// ------------------------------------------------------------------------------------------

#[test]
fn rule_files_pass_promtool_check() {
    let promtool = tool("promtool", "prometheus");
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
    let promtool = tool("promtool", "prometheus");
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

/// The unit tests must keep covering, for every alert: firing, a case where it stays quiet,
/// and pending before `for` has elapsed; for the budget alert also below the bound, without
/// recovery and while suspended.
#[test]
fn every_alert_has_unit_tests_that_fire_stay_quiet_and_pend() {
    let tests = yaml(ALERTS_TEST);
    let cases = tests["tests"].as_array().expect("tests");
    let rule_files: Vec<&str> = tests["rule_files"]
        .as_array()
        .expect("rule_files")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(
        rule_files.iter().any(|f| f.ends_with(RULES))
            && rule_files.iter().any(|f| f.ends_with(ALERTS)),
        "{ALERTS_TEST} must load {RULES} and {ALERTS}: {rule_files:?}"
    );
    for (alert, rule) in alert_rules(ALERTS) {
        let mut fires = 0;
        let mut quiet = 0;
        let mut pending = 0;
        let mut quiet_names = Vec::new();
        for case in cases {
            let name = case["name"].as_str().unwrap_or("?");
            for t in case["alert_rule_test"]
                .as_array()
                .cloned()
                .unwrap_or_default()
            {
                if t["alertname"] != alert.as_str() {
                    continue;
                }
                if t["exp_alerts"].as_array().is_some_and(|a| !a.is_empty()) {
                    fires += 1;
                } else {
                    quiet += 1;
                    quiet_names.push(name.to_string());
                }
            }
            for t in case["promql_expr_test"]
                .as_array()
                .cloned()
                .unwrap_or_default()
            {
                let expr = t["expr"].as_str().unwrap_or_default();
                let pends = t["exp_samples"].as_array().is_some_and(|s| {
                    s.iter().any(|s| {
                        s["labels"]
                            .as_str()
                            .is_some_and(|l| l.contains("alertstate=\"pending\""))
                    })
                });
                if expr.contains(&format!("alertname=\"{alert}\"")) && pends {
                    pending += 1;
                }
            }
        }
        assert!(fires > 0, "no unit test where {alert} fires");
        assert!(quiet > 0, "no unit test where {alert} stays quiet");
        assert!(
            pending > 0,
            "no unit test that {alert} is pending before its `for` ({})",
            rule["for"].as_str().unwrap_or("?")
        );
        if alert == EXCEEDED {
            for needed in ["below the bound", "without recovery", "suspended"] {
                assert!(
                    quiet_names.iter().any(|n| n.contains(needed)),
                    "no unit test that {alert} stays quiet {needed}; quiet tests: {quiet_names:#?}"
                );
            }
        }
    }
}

#[test]
fn alerts_carry_severity_summary_description_and_a_runbook_section() {
    let alerts = alert_rules(ALERTS);
    let expected: BTreeSet<&str> = [
        EXCEEDED,
        SUSPENDED,
        "RecoveryBudgetCollectorDown",
        "RecoveryBudgetEnforcerHolding",
        "CephRecoveryStalled",
        "RecoveryPausedByEnforcerTooLong",
        "RecoveryPauseFlagStuck",
    ]
    .into_iter()
    .collect();
    assert_eq!(
        alerts.keys().map(String::as_str).collect::<BTreeSet<_>>(),
        expected,
        "the alerts in {ALERTS}"
    );
    let runbook = read(RUNBOOK);
    for (name, rule) in &alerts {
        let severity = rule["labels"]["severity"].as_str().unwrap_or_default();
        assert!(
            ["info", "warning", "critical"].contains(&severity),
            "{name}: severity {severity:?}"
        );
        for key in ["summary", "description", "runbook_url"] {
            assert!(
                rule["annotations"][key]
                    .as_str()
                    .is_some_and(|s| !s.trim().is_empty()),
                "{name}: annotation {key} missing"
            );
        }
        let url = rule["annotations"]["runbook_url"]
            .as_str()
            .unwrap_or_default();
        assert_eq!(
            url,
            format!("{RUNBOOK}#{}", name.to_lowercase()),
            "{name}: runbook_url must point at its section of {RUNBOOK}"
        );
        assert!(
            runbook.lines().any(|l| l.trim() == format!("## {name}")),
            "{RUNBOOK} has no section `## {name}`"
        );
    }
    let exceeded = &alerts[EXCEEDED];
    assert_eq!(
        exceeded["annotations"]["summary"],
        "Client p99 exceeds 2x baseline during recovery"
    );
    assert_eq!(exceeded["for"], "15m");
    assert_eq!(exceeded["labels"]["severity"], "warning");
    assert_eq!(alerts[SUSPENDED]["labels"]["severity"], "info");
    let expr = exceeded["expr"].as_str().unwrap_or_default();
    assert!(
        expr.contains("cluster:ceph_recovery_budget_bound_seconds:max_or_default")
            && !expr.contains("0.032"),
        "{EXCEEDED} takes its threshold from the bound, not a constant: {expr}"
    );
    let section = runbook
        .split(&format!("## {EXCEEDED}"))
        .nth(1)
        .and_then(|s| s.split("\n## ").next())
        .unwrap_or_default();
    for needed in [
        "ceph config set osd osd_mclock_profile high_client_ops",
        "accept and document",
    ] {
        assert!(
            section.to_lowercase().contains(&needed.to_lowercase()),
            "the runbook's {EXCEEDED} section must say `{needed}`"
        );
    }
}

/// The example's inhibit rule and routes, in a real Alertmanager: with both alerts for one
/// cluster, Exceeded is suppressed and never notified; Exceeded of another cluster is notified
/// to the on-call receiver and Suspended (severity info) to the info receiver.
#[test]
fn alertmanager_example_routes_and_inhibits_exceeded_while_suspended() {
    let amtool = tool("amtool", "prometheus-alertmanager");
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
               "annotations": {"summary": "posted by tests/prometheus_side.rs"}})
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

fn dashboard() -> Value {
    serde_json::from_str(&read(DASHBOARD))
        .unwrap_or_else(|e| panic!("{DASHBOARD} is not valid JSON: {e}"))
}

#[test]
fn dashboard_is_importable_with_datasource_and_cluster_variables() {
    let d = dashboard();
    assert!(d["title"].as_str().is_some_and(|t| !t.is_empty()), "title");
    assert_eq!(d["uid"], "ceph-recovery-budget");
    assert!(
        d["schemaVersion"].as_u64().is_some_and(|v| v >= 36),
        "schemaVersion"
    );

    let vars = d["templating"]["list"].as_array().expect("templating.list");
    let var = |name: &str| {
        vars.iter()
            .find(|v| v["name"] == name)
            .unwrap_or_else(|| panic!("no dashboard variable {name}"))
    };
    let ds = var("datasource");
    assert_eq!(ds["type"], "datasource");
    assert_eq!(ds["query"], "prometheus");
    let cluster = var("cluster");
    assert_eq!(cluster["type"], "query");
    assert_eq!(cluster["datasource"]["uid"], "${datasource}");
    let (metric, label) = label_values_query(cluster["query"].as_str().unwrap_or_default())
        .expect("cluster variable: label_values(METRIC, cluster)");
    assert_eq!(label, "cluster");
    assert_eq!(metric, "ceph_recovery_budget_build_info");
    assert_eq!(cluster["includeAll"], true);
    assert_eq!(
        cluster["allValue"], ".*",
        "All must also match series without a cluster label"
    );

    // No data source is hard-coded: everything goes through ${datasource}.
    fn walk<'a>(v: &'a Value, out: &mut Vec<&'a Value>) {
        match v {
            Value::Object(m) => {
                if let Some(ds) = m.get("datasource") {
                    out.push(ds);
                }
                m.values().for_each(|x| walk(x, out));
            }
            Value::Array(a) => a.iter().for_each(|x| walk(x, out)),
            _ => {}
        }
    }
    let mut sources = Vec::new();
    walk(&d, &mut sources);
    for s in sources {
        let ok = s["uid"] == "${datasource}" || s["uid"] == "-- Grafana --";
        assert!(ok, "hard-coded data source {s}");
    }

    let mut ids = BTreeSet::new();
    let mut boxes: Vec<(String, [u64; 4])> = Vec::new();
    for p in d["panels"].as_array().expect("panels") {
        let title = p["title"].as_str().unwrap_or("?").to_string();
        assert!(
            ids.insert(p["id"].as_u64().expect("panel id")),
            "duplicate panel id in {title}"
        );
        let g = &p["gridPos"];
        let b = ["x", "y", "w", "h"].map(|k| g[k].as_u64().unwrap_or(u64::MAX));
        assert!(
            b[0] + b[2] <= 24,
            "panel {title:?} is wider than the grid: {g}"
        );
        for (other, o) in &boxes {
            let overlap = b[0] < o[0] + o[2]
                && o[0] < b[0] + b[2]
                && b[1] < o[1] + o[3]
                && o[1] < b[1] + b[3];
            assert!(!overlap, "panels {title:?} and {other:?} overlap");
        }
        boxes.push((title.clone(), b));
        if p["type"] == "row" {
            continue;
        }
        let targets = p["targets"].as_array().expect("targets");
        assert!(!targets.is_empty(), "panel {title:?} has no query");
        for t in targets {
            let expr = t["expr"].as_str().unwrap_or_default();
            assert!(
                expr.contains("cluster=~\"$cluster\""),
                "panel {title:?}: every query filters on $cluster: {expr}"
            );
        }
    }

    // What the issue asks the dashboard to show.
    let all: String = dashboard_queries(&d)
        .into_iter()
        .map(|(_, e, _)| e + "\n")
        .collect();
    for needed in [
        "ceph_recovery_objects_per_second",
        "ceph_degraded_objects",
        "ceph_misplaced_objects",
        "histogram_quantile(0.5,",
        "histogram_quantile(0.95,",
        "histogram_quantile(0.99,",
        "ceph_recovery_budget_baseline_seconds",
        "ceph_recovery_budget_bound_seconds",
        "ceph_osd_mclock_profile_info",
        "ceph_pg_recovering",
        "ceph_pg_backfilling",
        "ceph_pg_undersized",
        "ceph_pool_at_min_size",
        "ceph_recovery_budget_state",
        "ceph_recovery_budget_decisions_total",
        "ceph_recovery_budget_collector_up",
    ] {
        assert!(all.contains(needed), "no dashboard query uses {needed}");
    }
    let decisions_annotation = d["annotations"]["list"]
        .as_array()
        .expect("annotations")
        .iter()
        .any(|a| {
            a["expr"]
                .as_str()
                .is_some_and(|e| e.contains("ceph_recovery_budget_decisions_total"))
        });
    assert!(
        decisions_annotation,
        "an annotation marks changes of ceph_recovery_budget_decisions_total"
    );
}

/// Every query of the dashboard, and every rule, parses in a real Prometheus (no scrape
/// needed: a parse error is an error whatever the data).
#[test]
fn dashboard_queries_parse_in_a_real_prometheus() {
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

/// Rules, alerts and dashboard use only metric names that the exporter publishes (its family
/// names in src/metrics/mod.rs, plus the `_total` / `_info` / `_bucket` suffixes its encoder
/// adds), so a renamed metric breaks this test rather than an alert in production.
#[test]
fn rules_alerts_and_dashboard_use_only_metrics_the_exporter_publishes() {
    let source = read("src/metrics/mod.rs");
    let pg_states: Vec<String> = source
        .split("pub const PG_STATES")
        .nth(1)
        .and_then(|s| s.split("];").next())
        .map(|s| {
            s.split('"')
                .skip(1)
                .step_by(2)
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default();
    assert!(
        pg_states.contains(&"undersized".to_string()),
        "PG_STATES not found in src/metrics/mod.rs (moved?): update this test"
    );
    let published = |name: &str| -> bool {
        let mut candidates = vec![name.to_string()];
        for suffix in ["_total", "_info", "_bucket", "_count", "_sum"] {
            if let Some(base) = name.strip_suffix(suffix) {
                candidates.push(base.to_string());
            }
        }
        candidates.iter().any(|c| {
            source.contains(&format!("\"{c}\""))
                || c.strip_prefix("ceph_pg_")
                    .is_some_and(|w| pg_states.iter().any(|s| s == w))
        })
    };
    let mut texts = vec![
        (RULES.to_string(), read(RULES)),
        (ALERTS.to_string(), read(ALERTS)),
    ];
    for (what, expr, _) in dashboard_queries(&dashboard()) {
        texts.push((what, expr));
    }
    let mut unknown = BTreeSet::new();
    for (what, text) in &texts {
        // Only PromQL: the alerts' comments quote the operators' original expression too,
        // which uses published names anyway.
        for name in ceph_metric_names(text) {
            if !published(&name) {
                unknown.insert(format!("{name} (in {what})"));
            }
        }
    }
    assert!(
        unknown.is_empty(),
        "names the exporter does not publish: {unknown:#?}"
    );
    assert!(
        recording_rule_names().len() >= 8,
        "recording rules found in {RULES}"
    );
}

// ------------------------------------------------------------------------------------------
// Dockerfile
// ------------------------------------------------------------------------------------------

/// Dockerfile instructions: continuation lines joined, comments dropped.
fn dockerfile_instructions(text: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut current = String::new();
    for line in text.lines() {
        let t = line.trim();
        if current.is_empty() && (t.is_empty() || t.starts_with('#')) {
            continue;
        }
        if let Some(stripped) = t.strip_suffix('\\') {
            current.push_str(stripped);
            current.push(' ');
            continue;
        }
        current.push_str(t);
        let (word, rest) = current
            .split_once(char::is_whitespace)
            .unwrap_or((&current, ""));
        out.push((word.to_uppercase(), rest.trim().to_string()));
        current.clear();
    }
    out
}

/// The `docker build ...` commands written in a text, one per line, whitespace-normalized.
fn docker_build_commands(text: &str) -> Vec<String> {
    text.lines()
        .filter_map(|l| {
            let l = l.trim().trim_start_matches('#').trim();
            l.starts_with("docker build ")
                .then(|| l.split_whitespace().collect::<Vec<_>>().join(" "))
        })
        .collect()
}

fn cargo_toml_value(key: &str) -> String {
    read("Cargo.toml")
        .lines()
        .find_map(|l| {
            let (k, v) = l.split_once('=')?;
            (k.trim() == key).then(|| v.trim().trim_matches('"').to_string())
        })
        .unwrap_or_else(|| panic!("no {key} in Cargo.toml"))
}

#[test]
fn dockerfile_is_multi_stage_non_root_with_healthcheck_and_pinned_bases() {
    let text = read("Dockerfile");
    let ins = dockerfile_instructions(&text);
    let froms: Vec<(usize, &str)> = ins
        .iter()
        .enumerate()
        .filter(|(_, (w, _))| w == "FROM")
        .map(|(i, (_, r))| (i, r.as_str()))
        .collect();
    assert!(froms.len() >= 2, "multi-stage: {froms:?}");

    for (_, from) in &froms {
        let image = from.split_whitespace().next().unwrap_or_default();
        let (name, tag) = image
            .split_once('@')
            .map(|(n, _)| n)
            .unwrap_or(image)
            .split_once(':')
            .unwrap_or_else(|| panic!("base image {image} has no tag: pin it"));
        assert!(
            tag != "latest" && tag.chars().any(|c| c.is_ascii_digit()),
            "base image {name}:{tag} must be pinned to a version tag"
        );
    }
    let builder = froms[0].1;
    assert!(
        builder.starts_with("rust:")
            && builder.contains("-slim-bookworm")
            && builder.to_lowercase().ends_with(" as builder"),
        "builder stage: {builder}"
    );
    // The builder's Rust is at least the crate's rust-version.
    let rust_version = cargo_toml_value("rust-version");
    let builder_version = builder
        .trim_start_matches("rust:")
        .split('-')
        .next()
        .unwrap_or_default();
    let parse = |v: &str| -> Vec<u64> { v.split('.').filter_map(|x| x.parse().ok()).collect() };
    assert!(
        parse(builder_version) >= parse(&rust_version),
        "builder rust {builder_version} < rust-version {rust_version}"
    );

    let (last_from, runtime) = *froms.last().expect("a FROM");
    assert!(
        runtime.starts_with("debian:") && (runtime.contains("bookworm") || runtime.contains(":12")),
        "runtime stage on Debian 12 (bookworm): {runtime}"
    );
    let final_stage = &ins[last_from..];
    let get = |word: &str| -> Vec<&str> {
        final_stage
            .iter()
            .filter(|(w, _)| w == word)
            .map(|(_, r)| r.as_str())
            .collect()
    };
    let runs = get("RUN").join("\n");
    assert!(
        runs.contains("apt-get install")
            && runs.contains("--no-install-recommends")
            && runs.contains("ceph-common"),
        "the runtime stage installs ceph-common: {runs}"
    );
    assert!(
        get("COPY").iter().any(|c| c.starts_with("--from=builder")),
        "the binary comes from the builder stage"
    );

    let user = get("USER");
    let user = user.last().copied().unwrap_or("root");
    let uid = user.split(':').next().unwrap_or_default();
    assert!(
        !["root", "0", ""].contains(&uid),
        "the final stage runs as root (USER {user:?})"
    );
    assert!(
        get("EXPOSE")
            .iter()
            .any(|e| e.split_whitespace().any(|p| p == "9939" || p == "9939/tcp")),
        "EXPOSE 9939"
    );

    let health = get("HEALTHCHECK");
    assert_eq!(health.len(), 1, "one HEALTHCHECK in the final stage");
    let health = health[0];
    assert!(
        health.contains("/-/healthy") && health.contains(":9939"),
        "HEALTHCHECK probes /-/healthy on 9939: {health}"
    );
    // The probe's program exists in the image: python3 comes with ceph-common; curl or wget
    // would have to be installed.
    let cmd = health.split("CMD").nth(1).unwrap_or_default();
    let program = cmd
        .trim()
        .trim_start_matches('[')
        .split([',', ' '])
        .next()
        .unwrap_or_default()
        .trim_matches('"');
    match program {
        "python3" => assert!(
            runs.contains("ceph-common"),
            "python3 comes with ceph-common"
        ),
        "curl" | "wget" => assert!(
            runs.contains(program),
            "HEALTHCHECK uses {program}: install it"
        ),
        other => panic!("HEALTHCHECK runs {other:?}: is it in the runtime image?"),
    }
    let entrypoint = get("ENTRYPOINT").join(" ");
    assert!(
        entrypoint.contains("ceph-recovery-budget"),
        "ENTRYPOINT: {entrypoint}"
    );

    // Every file the Dockerfile copies from the context passes .dockerignore.
    let ignore = read(".dockerignore");
    let ignore: Vec<&str> = ignore
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .collect();
    let included = |path: &str| -> bool {
        let mut inc = true;
        for pat in &ignore {
            let (neg, pat) = pat.strip_prefix('!').map_or((false, *pat), |p| (true, p));
            let pat = pat.trim_end_matches('/');
            let hit = pat == "*" || path == pat || path.starts_with(&format!("{pat}/"));
            if hit {
                inc = neg;
            }
        }
        inc
    };
    for (w, rest) in &ins {
        if w != "COPY" || rest.starts_with("--from") {
            continue;
        }
        let parts: Vec<&str> = rest
            .split_whitespace()
            .filter(|p| !p.starts_with("--"))
            .collect();
        for src in &parts[..parts.len().saturating_sub(1)] {
            let src = src.trim_end_matches('/');
            assert!(
                included(src),
                ".dockerignore excludes {src}, which the Dockerfile copies"
            );
            assert!(
                repo().join(src).exists(),
                "the Dockerfile copies {src}, which does not exist"
            );
        }
    }

    // The image's default config is valid for the exporter.
    run_ok(
        Command::new(env!("CARGO_BIN_EXE_ceph-recovery-budget"))
            .args(["check-config", "deploy/config.yml"])
            .current_dir(repo()),
        "ceph-recovery-budget check-config deploy/config.yml",
    );

    // The build command is the one the READMEs document, and it tags the crate's version,
    // which is what the Kubernetes Deployment runs.
    let documented = docker_build_commands(&text);
    assert_eq!(
        documented.len(),
        1,
        "one `docker build` line in the Dockerfile's header"
    );
    let build = &documented[0];
    let version = cargo_toml_value("version");
    assert_eq!(
        build,
        &format!("docker build -t ceph-recovery-budget:{version} ."),
        "the documented build command tags the crate's version"
    );
    for doc in ["README.md", "deploy/kubernetes/README.md"] {
        assert!(
            docker_build_commands(&read(doc)).contains(build),
            "{doc} does not document `{build}` (the Dockerfile's build command); the README \
             section is in /tmp/prom-readme-section.md"
        );
    }
    let readme = read("README.md");
    for path in [
        "/etc/ceph/ceph.conf",
        "/etc/ceph/keyring",
        "/etc/ceph-recovery-budget/config.yml",
    ] {
        assert!(
            readme.contains(path),
            "README.md documents the mount {path}"
        );
    }
}

// ------------------------------------------------------------------------------------------
// Kubernetes
// ------------------------------------------------------------------------------------------

#[test]
fn prometheusrule_is_generated_from_the_rule_files() {
    let dir = TempDir::new("prometheusrule");
    let fresh = dir.path().join("prometheusrule.yaml");
    run_ok(
        Command::new(repo().join(K8S).join("generate-prometheusrule.sh")).arg(&fresh),
        "deploy/kubernetes/generate-prometheusrule.sh",
    );
    let fresh_text = std::fs::read_to_string(&fresh).expect("generated file");
    let checked_in = read(&format!("{K8S}/prometheusrule.yaml"));
    assert!(
        fresh_text == checked_in,
        "{K8S}/prometheusrule.yaml is out of date: run deploy/kubernetes/generate-prometheusrule.sh"
    );

    let rule: Value = serde_saphyr::from_str(&checked_in).expect("PrometheusRule is YAML");
    assert_eq!(rule["apiVersion"], "monitoring.coreos.com/v1");
    assert_eq!(rule["kind"], "PrometheusRule");
    let mut groups = yaml(RULES)["groups"].as_array().cloned().expect("groups");
    groups.extend(yaml(ALERTS)["groups"].as_array().cloned().expect("groups"));
    assert_eq!(
        rule["spec"]["groups"],
        Value::Array(groups),
        "the PrometheusRule's groups are those of {RULES} and {ALERTS}"
    );
    // And they are a valid rule file for Prometheus (JSON is YAML).
    let as_rule_file = dir.write(
        "from-prometheusrule.yml",
        &json!({"groups": rule["spec"]["groups"]}).to_string(),
    );
    run_ok(
        Command::new(tool("promtool", "prometheus"))
            .args(["check", "rules"])
            .arg(&as_rule_file),
        "promtool check rules on the PrometheusRule's groups",
    );
}

#[test]
fn kubernetes_manifests_run_one_non_root_exporter_with_read_only_ceph_credentials() {
    let k = |f: &str| yaml(&format!("{K8S}/{f}"));
    let deployment = k("deployment.yaml");
    let service = k("service.yaml");
    let monitor = k("servicemonitor.yaml");
    let kustomization = k("kustomization.yaml");

    assert_eq!(deployment["kind"], "Deployment");
    assert_eq!(deployment["spec"]["replicas"], 1, "one enforcer");
    assert_eq!(
        deployment["spec"]["strategy"]["type"], "Recreate",
        "never two enforcers during a rollout"
    );
    let pod = &deployment["spec"]["template"];
    let labels = &pod["metadata"]["labels"];
    assert_eq!(deployment["spec"]["selector"]["matchLabels"], *labels);
    let sc = &pod["spec"]["securityContext"];
    assert_eq!(sc["runAsNonRoot"], true);
    let dockerfile_user = dockerfile_instructions(&read("Dockerfile"))
        .into_iter()
        .filter(|(w, _)| w == "USER")
        .map(|(_, r)| r)
        .next_back()
        .unwrap_or_default();
    assert_eq!(
        sc["runAsUser"].as_u64().map(|u| u.to_string()),
        dockerfile_user.split(':').next().map(str::to_string),
        "runAsUser is the image's USER"
    );
    let containers = pod["spec"]["containers"].as_array().expect("containers");
    assert_eq!(containers.len(), 1);
    let c = &containers[0];
    let version = cargo_toml_value("version");
    assert_eq!(
        c["image"],
        format!("ceph-recovery-budget:{version}"),
        "the image the README's docker build produces"
    );
    assert_eq!(c["ports"][0]["containerPort"], 9939);
    assert_eq!(c["ports"][0]["name"], "metrics");
    assert_eq!(c["livenessProbe"]["httpGet"]["path"], "/-/healthy");
    assert_eq!(c["readinessProbe"]["httpGet"]["path"], "/-/ready");
    assert_eq!(c["securityContext"]["readOnlyRootFilesystem"], true);
    assert_eq!(c["securityContext"]["allowPrivilegeEscalation"], false);
    let config_env = c["env"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|e| e["name"] == "CEPH_RECOVERY_BUDGET_CONFIG")
        .map(|e| e["value"].clone());
    assert_eq!(
        config_env,
        Some(json!("/etc/ceph-recovery-budget/config.yml"))
    );

    let mounts: BTreeMap<String, &Value> = c["volumeMounts"]
        .as_array()
        .expect("volumeMounts")
        .iter()
        .map(|m| (m["mountPath"].as_str().unwrap_or_default().to_string(), m))
        .collect();
    for path in ["/etc/ceph", "/etc/ceph-recovery-budget"] {
        let m = mounts
            .get(path)
            .unwrap_or_else(|| panic!("nothing mounted at {path}"));
        assert_eq!(m["readOnly"], true, "{path} is mounted read-only");
    }
    let volumes = pod["spec"]["volumes"].as_array().expect("volumes");
    let volume = |name: &Value| {
        volumes
            .iter()
            .find(|v| v["name"] == *name)
            .unwrap_or_else(|| panic!("no volume {name}"))
    };
    let ceph = volume(&mounts["/etc/ceph"]["name"]);
    let files: BTreeSet<String> = ceph["projected"]["sources"]
        .as_array()
        .expect("/etc/ceph: a projected volume")
        .iter()
        .flat_map(|s| {
            let src = if s["configMap"].is_object() {
                &s["configMap"]
            } else {
                &s["secret"]
            };
            src["items"].as_array().cloned().unwrap_or_default()
        })
        .filter_map(|i| i["path"].as_str().map(str::to_string))
        .collect();
    assert_eq!(
        files,
        ["ceph.conf", "keyring"]
            .map(str::to_string)
            .into_iter()
            .collect(),
        "/etc/ceph holds ceph.conf and the keyring"
    );
    let config_volume = volume(&mounts["/etc/ceph-recovery-budget"]["name"]);
    let config_map = config_volume["configMap"]["name"]
        .as_str()
        .unwrap_or_default();
    assert!(
        mounts.contains_key("/var/lib/ceph-recovery-budget"),
        "a writable volume for the enforcer's state file"
    );

    assert_eq!(service["kind"], "Service");
    assert_eq!(
        service["spec"]["selector"], *labels,
        "the Service selects the pod"
    );
    assert_eq!(service["spec"]["ports"][0]["name"], "metrics");
    assert_eq!(service["spec"]["ports"][0]["port"], 9939);

    assert_eq!(monitor["kind"], "ServiceMonitor");
    for (k, v) in monitor["spec"]["selector"]["matchLabels"]
        .as_object()
        .expect("matchLabels")
    {
        assert_eq!(
            service["metadata"]["labels"][k], *v,
            "the ServiceMonitor selects the Service"
        );
    }
    let endpoint = &monitor["spec"]["endpoints"][0];
    assert_eq!(endpoint["port"], "metrics");
    assert!(
        endpoint["relabelings"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|r| r["targetLabel"] == "cluster"),
        "the ServiceMonitor sets the `cluster` label the rules and dashboard group by"
    );

    let resources: BTreeSet<&str> = kustomization["resources"]
        .as_array()
        .expect("resources")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    for f in [
        "deployment.yaml",
        "service.yaml",
        "servicemonitor.yaml",
        "prometheusrule.yaml",
    ] {
        assert!(resources.contains(f), "kustomization.yaml lists {f}");
        assert!(repo().join(K8S).join(f).is_file(), "{K8S}/{f} exists");
    }
    let generator = &kustomization["configMapGenerator"][0];
    assert_eq!(
        generator["name"], config_map,
        "the config ConfigMap comes from the generator"
    );
    let config_file = generator["files"][0].as_str().unwrap_or_default();
    run_ok(
        Command::new(env!("CARGO_BIN_EXE_ceph-recovery-budget"))
            .args(["check-config", config_file])
            .current_dir(repo().join(K8S)),
        "ceph-recovery-budget check-config deploy/kubernetes/config.yml",
    );
    let config = k(config_file);
    assert_eq!(config["ceph"]["conf"], "/etc/ceph/ceph.conf");
    assert_eq!(config["ceph"]["keyring"], "/etc/ceph/keyring");

    // The README says which caps the user needs.
    let readme = read(&format!("{K8S}/README.md"));
    for needed in [
        "mon 'allow r'",
        "osd 'allow *'",
        "allow command \"config set\" with who=osd",
        "rook-ceph-tools",
    ] {
        assert!(readme.contains(needed), "{K8S}/README.md mentions {needed}");
    }
}

// ------------------------------------------------------------------------------------------
// Against the lab cluster
// ------------------------------------------------------------------------------------------

fn require_lab() {
    assert!(
        lab_enabled(),
        "set CRB_LAB=1 after scripts/ceph-lab start (scripts/test does both)"
    );
}

/// The lab's mgr prometheus module address, from `scripts/ceph-lab status`.
fn lab_mgr_prometheus() -> Option<String> {
    let out = Command::new(repo().join("scripts/ceph-lab"))
        .arg("status")
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    let after = text.split("prometheus ").nth(1)?;
    let addr: String = after
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == '.' || *c == ':')
        .collect();
    addr.contains(':').then_some(addr)
}

fn scrape_config(exporter_port: u16, interval: &str, extra_jobs: &str) -> String {
    [
        "global:".to_string(),
        format!("  scrape_interval: {interval}"),
        format!("  evaluation_interval: {interval}"),
        "scrape_configs:".to_string(),
        "  - job_name: ceph-recovery-budget".to_string(),
        "    static_configs:".to_string(),
        format!("      - targets: ['127.0.0.1:{exporter_port}']"),
        "        labels:".to_string(),
        "          cluster: lab".to_string(),
        extra_jobs.to_string(),
    ]
    .join("\n")
}

fn rule_files_config(files: &[&Path]) -> String {
    let mut out = "rule_files:\n".to_string();
    for f in files {
        out.push_str(&format!("  - {}\n", f.display()));
    }
    out
}

/// Light client writes on the lab image for `secs` seconds, in the background.
struct Writes {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Writes {
    fn start(iops: u32, secs: Option<u32>) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let stop2 = Arc::clone(&stop);
        let thread = std::thread::spawn(move || {
            let start = Instant::now();
            while !stop2.load(Ordering::Relaxed)
                && secs.is_none_or(|s| start.elapsed() < Duration::from_secs(u64::from(s)))
            {
                // 10 s chunks so that a stop takes effect soon.
                let out = Command::new(repo().join("scripts/ceph-lab"))
                    .args(["fio-load", "10", &format!("--rate_iops={iops}")])
                    .stdout(Stdio::null())
                    .stderr(Stdio::piped())
                    .output();
                if !out.as_ref().is_ok_and(|o| o.status.success()) {
                    eprintln!("lab: fio-load failed: {out:?}");
                    std::thread::sleep(Duration::from_secs(2));
                }
            }
        });
        Writes {
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for Writes {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// `serve` with short windows and a 1 ms baseline, the enforcer observing (it changes nothing).
fn start_observing_exporter(state: &Path) -> Exporter {
    Exporter::start(&[
        "--collect.interval",
        "2s",
        "--latency.window",
        "30s",
        "--recovery.window",
        "20s",
        "--enforcer.mode",
        "observe",
        "--enforcer.baseline",
        "1ms",
        "--enforcer.latency-window",
        "30s",
        "--enforcer.state-file",
        state.to_str().expect("utf-8 temp path"),
    ])
}

/// Scrapes the exporter (and the lab's mgr prometheus module, which publishes ceph_pg_* under
/// the same names) with a real Prometheus that loads rules/ and alerts/, and runs every query
/// of the dashboard: each must parse and return data. Reads the cluster only (the enforcer in
/// observe mode changes nothing); writes a little (a rate-limited fio) so latency has data.
#[test]
#[ignore = "needs the lab cluster: scripts/test runs it"]
fn dashboard_queries_return_data_from_a_real_scrape() {
    require_lab();
    lab(&["start"]);
    let dir = TempDir::new("dashboard-lab");
    let state = dir.path().join("enforcer-state.json");
    let exporter = start_observing_exporter(&state);
    let _writes = Writes::start(50, Some(60));

    let mgr =
        lab_mgr_prometheus().expect("the lab's mgr prometheus address (scripts/ceph-lab status)");
    let mgr_job = [
        "  - job_name: ceph-mgr",
        "    static_configs:",
        &format!("      - targets: ['{mgr}']"),
        "        labels:",
        "          cluster: lab",
        "",
    ]
    .join("\n");
    let mut config = scrape_config(exporter.port, "1s", &mgr_job);
    config.push_str(&rule_files_config(&[
        &repo().join(RULES),
        &repo().join(ALERTS),
    ]));
    let prom = start_prometheus(&dir, &config);

    wait_until(
        Duration::from_secs(120),
        "3 scrapes of both targets and latency data",
        || {
            let scrapes = query(&prom, "count_over_time(up[1m]) >= 3 and up == 1").ok()?;
            let p99 = query(&prom, &format!("{P99} >= 0")).ok()?;
            let enforcer = query(&prom, "ceph_recovery_budget_p99_seconds >= 0").ok()?;
            (scrapes.len() == 2 && !p99.is_empty() && !enforcer.is_empty()).then_some(())
        },
    );

    // Every rule evaluates without error on real series (duplicates from the mgr module included).
    let rules = prom.get_json("/api/v1/rules");
    let mut bad = Vec::new();
    for g in rules["data"]["groups"].as_array().expect("groups") {
        for r in g["rules"].as_array().expect("rules") {
            if r["health"] != "ok" {
                bad.push(format!("{}: {} {}", r["name"], r["health"], r["lastError"]));
            }
        }
    }
    assert!(bad.is_empty(), "rules failing on real data: {bad:#?}");
    let mgr_series = query(&prom, "ceph_pg_undersized{job=\"ceph-mgr\"}").expect("query");
    assert!(
        !mgr_series.is_empty(),
        "the mgr module's ceph_pg_undersized is scraped (the test covers the name collision)"
    );
    for rule in [
        "cluster:ceph_pg_undersized:max",
        "cluster:ceph_pg_recovery_or_backfill:sum",
    ] {
        let r = query(&prom, rule).expect("query");
        assert_eq!(
            r.len(),
            1,
            "{rule}: one series for the one cluster, not per pool: {r:?}"
        );
    }

    // The cluster variable.
    let d = dashboard();
    let cluster_var = d["templating"]["list"]
        .as_array()
        .expect("templating")
        .iter()
        .find(|v| v["name"] == "cluster")
        .expect("cluster variable")
        .clone();
    let (metric, label) = label_values_query(cluster_var["query"].as_str().unwrap_or_default())
        .expect("label_values");
    let values = prom.get_json(&format!(
        "/api/v1/label/{label}/values?match[]={}",
        percent_encode(&metric)
    ));
    assert!(
        values["data"]
            .as_array()
            .is_some_and(|v| v.contains(&json!("lab"))),
        "variable cluster: label_values({metric}, {label}) = {values}"
    );

    let mut failures = Vec::new();
    for (what, expr, must_have_data) in dashboard_queries(&d) {
        for cluster in ["lab", ".*"] {
            let q = substitute(&expr, cluster);
            match query(&prom, &q) {
                Err(e) => failures.push(format!("{what}: {e}\n    {q}")),
                Ok(result) if must_have_data => {
                    if !result.iter().any(|s| sample_value(s).is_finite()) {
                        failures.push(format!("{what}: no data (result {result:?})\n    {q}"));
                    }
                }
                Ok(_) => {}
            }
        }
    }
    assert!(
        failures.is_empty(),
        "dashboard queries without data from a real scrape:\n{}",
        failures.join("\n")
    );
}

/// What an alert looks like in Prometheus' /api/v1/alerts.
fn prometheus_alert_states(prom: &Server, name: &str) -> Vec<String> {
    prom.get_json("/api/v1/alerts")["data"]["alerts"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|a| a["labels"]["alertname"] == name && a["labels"]["cluster"] == "lab")
        .map(|a| a["state"].as_str().unwrap_or("?").to_string())
        .collect()
}

fn alertmanager_states(am: &Server, name: &str) -> Vec<String> {
    am.get_json("/api/v2/alerts")
        .as_array()
        .into_iter()
        .flatten()
        .filter(|a| a["labels"]["alertname"] == name && a["labels"]["cluster"] == "lab")
        .map(|a| a["status"]["state"].as_str().unwrap_or("?").to_string())
        .collect()
}

/// Puts the lab back as the e2e test found it, whatever happened.
#[derive(Default)]
struct LabRestore {
    rebalance: bool,
    osd_down: bool,
}

fn lab_quiet(args: &[&str]) {
    match Command::new(repo().join("scripts/ceph-lab"))
        .args(args)
        .output()
    {
        Ok(o) if o.status.success() => {}
        other => eprintln!("restore: scripts/ceph-lab {args:?}: {other:?}"),
    }
}

fn ceph_quiet(args: &[&str]) {
    match Command::new("ceph")
        .args(args)
        .envs(common::lab_env())
        .output()
    {
        Ok(o) if o.status.success() => {}
        other => eprintln!("restore: ceph {args:?}: {other:?}"),
    }
}

impl Drop for LabRestore {
    fn drop(&mut self) {
        if !self.rebalance && !self.osd_down {
            return;
        }
        if self.rebalance {
            lab_quiet(&["rebalance-stop"]);
        }
        if self.osd_down {
            lab_quiet(&["osd-start", "3"]);
            lab_quiet(&["osd-in", "3"]);
            ceph_quiet(&["osd", "unset", "noout"]);
        }
        lab_quiet(&["wait-clean", "900"]);
    }
}

/// End to end: Prometheus scrapes the exporter and loads rules/ and alerts/ (with `for:`
/// shortened), Alertmanager runs the example config. A rebalance (recovery without undersized
/// PGs) with a tiny baseline makes RecoveryLatencyBudgetExceeded pending, then firing, then
/// reach Alertmanager; a stopped and out OSD (recovery with undersized PGs) gives
/// RecoveryLatencyBudgetSuspended instead, and Exceeded stays quiet although latency is far
/// above the bound during recovery. DISTURBS the lab: it rebalances and stops osd.3, and puts
/// everything back (also on failure).
#[test]
#[ignore = "needs the lab cluster: scripts/test runs it"]
fn alerts_follow_a_real_rebalance_and_a_real_failure() {
    require_lab();
    lab(&["start"]);
    lab(&["wait-clean", "600"]);
    lab(&["fill"]);
    let dir = TempDir::new("alerts-lab");
    let state = dir.path().join("enforcer-state.json");
    let exporter = start_observing_exporter(&state);

    // Alertmanager with the example config (its webhooks point at a port nobody listens on:
    // the test reads Alertmanager's API).
    let am = start_alertmanager(&dir, &repo().join(AM_EXAMPLE));

    // The rules verbatim, the alerts with `for:` shortened.
    let alerts = read(ALERTS);
    assert!(
        alerts.contains("for: 15m") && alerts.contains("for: 2m"),
        "the test shortens {EXCEEDED}'s `for: 15m` and {SUSPENDED}'s `for: 2m`: update it"
    );
    let alerts = alerts
        .replace("for: 15m", "for: 30s")
        .replace("for: 2m", "for: 10s");
    let rules_file = dir.write("rules.yml", &read(RULES));
    let alerts_file = dir.write("alerts.yml", &alerts);
    let mut config = scrape_config(exporter.port, "2s", "");
    config.push_str(&rule_files_config(&[&rules_file, &alerts_file]));
    config.push_str(&format!(
        "alerting:\n  alertmanagers:\n    - static_configs:\n        - targets: ['127.0.0.1:{}']\n",
        am.port
    ));
    let prom = start_prometheus(&dir, &config);
    let _writes = Writes::start(200, None);
    let mut restore = LabRestore::default();

    // 0. Healthy: neither alert.
    wait_until(
        Duration::from_secs(60),
        "the rules see latency data",
        || {
            let r = query(&prom, &format!("{P99} > 0")).ok()?;
            (!r.is_empty()).then_some(())
        },
    );
    assert!(
        prometheus_alert_states(&prom, EXCEEDED).is_empty(),
        "{EXCEEDED} on a clean cluster"
    );
    assert!(
        prometheus_alert_states(&prom, SUSPENDED).is_empty(),
        "{SUSPENDED} on a clean cluster"
    );

    // 1. Rebalance: PGs backfill, none undersized; p99 far above the 2 ms bound.
    restore.rebalance = true;
    lab(&["rebalance-start"]);
    let mut seen = BTreeSet::new();
    wait_until(
        Duration::from_secs(300),
        "Exceeded pending then firing in Prometheus",
        || {
            let states = prometheus_alert_states(&prom, EXCEEDED);
            seen.extend(states.iter().cloned());
            assert!(
                !prometheus_alert_states(&prom, SUSPENDED).contains(&"firing".to_string()),
                "{SUSPENDED} fired during a rebalance, which has no undersized PGs"
            );
            states.contains(&"firing".to_string()).then_some(())
        },
    );
    assert!(
        seen.contains("pending"),
        "{EXCEEDED} was pending before firing: {seen:?}"
    );
    wait_until(
        Duration::from_secs(120),
        "Exceeded active in Alertmanager",
        || {
            alertmanager_states(&am, EXCEEDED)
                .contains(&"active".to_string())
                .then_some(())
        },
    );
    lab(&["rebalance-stop"]);
    lab(&["wait-clean", "900"]);
    restore.rebalance = false;
    wait_until(
        Duration::from_secs(120),
        "Exceeded resolved after the rebalance",
        || {
            prometheus_alert_states(&prom, EXCEEDED)
                .is_empty()
                .then_some(())
        },
    );

    // 2. A failure: noout, osd.3 stopped then out: PGs undersized while they recover. The bound
    //    is suspended: Suspended fires, Exceeded stays quiet.
    restore.osd_down = true;
    common::ceph(&["osd", "set", "noout"]);
    lab(&["osd-stop", "3"]);
    wait_until(
        Duration::from_secs(180),
        "Suspended firing in Prometheus",
        || {
            prometheus_alert_states(&prom, SUSPENDED)
                .contains(&"firing".to_string())
                .then_some(())
        },
    );
    wait_until(
        Duration::from_secs(120),
        "Suspended active in Alertmanager",
        || {
            alertmanager_states(&am, SUSPENDED)
                .contains(&"active".to_string())
                .then_some(())
        },
    );
    lab(&["osd-out", "3"]);
    // Watch while the cluster recovers with undersized PGs: the Exceeded condition without the
    // suspension (p99 above the bound during recovery) must hold long enough that Exceeded
    // would have fired, and it must not.
    let would_fire = format!(
        "{P99} > on (cluster) cluster:ceph_recovery_budget_bound_seconds:max_or_default \
         and on (cluster) cluster:ceph_pg_recovery_or_backfill:sum > 0 \
         and on (cluster) cluster:ceph_recovery_budget_suspended:max_or_undersized == 1"
    );
    let start = Instant::now();
    let mut suspended_and_over = Duration::ZERO;
    let mut last = Instant::now();
    while start.elapsed() < Duration::from_secs(300) && suspended_and_over < Duration::from_secs(60)
    {
        let states = prometheus_alert_states(&prom, EXCEEDED);
        assert!(
            !states.contains(&"firing".to_string()),
            "{EXCEEDED} fired while the bound was suspended (after {:.0} s)",
            start.elapsed().as_secs_f64()
        );
        assert!(
            !alertmanager_states(&am, EXCEEDED).contains(&"active".to_string()),
            "{EXCEEDED} active in Alertmanager while suspended"
        );
        let now = Instant::now();
        if query(&prom, &would_fire).is_ok_and(|r| !r.is_empty()) {
            suspended_and_over += now - last;
        }
        last = now;
        std::thread::sleep(Duration::from_secs(1));
    }
    assert!(
        suspended_and_over >= Duration::from_secs(36),
        "recovery with undersized PGs and p99 above the bound lasted only {suspended_and_over:?}: \
         the test proves nothing (is the lab's pool filled? scripts/ceph-lab fill)"
    );

    // 3. Back to normal: Suspended resolves.
    lab(&["osd-start", "3"]);
    lab(&["osd-in", "3"]);
    common::ceph(&["osd", "unset", "noout"]);
    lab(&["wait-clean", "900"]);
    restore.osd_down = false;
    wait_until(Duration::from_secs(120), "Suspended resolved", || {
        prometheus_alert_states(&prom, SUSPENDED)
            .is_empty()
            .then_some(())
    });
}

/// The large-cluster layout on the lab: a host-mode exporter publishes the OSD histograms from
/// the admin sockets, a real Prometheus scrapes it, and the cluster-mode exporter running the
/// enforcer reads its p99 from that Prometheus (`--latency.source prometheus`) and collects no
/// histogram itself.
#[test]
#[ignore = "needs the lab cluster: scripts/test runs it"]
fn the_enforcer_reads_p99_from_prometheus_over_host_mode_exporters() {
    require_lab();
    lab(&["start"]);
    let dir = TempDir::new("host-mode-lab");
    let asok_dir = common::lab_env()
        .into_iter()
        .find(|(k, _)| k == "CEPH_CONF")
        .map(|(_, conf)| Path::new(&conf).with_file_name("run"))
        .expect("the lab's CEPH_CONF");
    let host = Exporter::start(&[
        "--mode",
        "host",
        "--host.asok-dir",
        asok_dir.to_str().expect("utf-8 path"),
        "--collect.interval",
        "2s",
        "--latency.window",
        "10s",
        "--recovery.window",
        "10s",
    ]);
    let prom = start_prometheus(&dir, &scrape_config(host.port, "1s", ""));
    let _writes = Writes::start(50, Some(90));
    let state = dir.path().join("enforcer-state.json");
    let cluster = Exporter::start(&[
        "--collect.interval",
        "2s",
        "--latency.source",
        "prometheus",
        "--prometheus.url",
        &format!("http://127.0.0.1:{}", prom.port),
        "--enforcer.mode",
        "observe",
        "--enforcer.baseline",
        "1ms",
        "--enforcer.latency-window",
        "20s",
        "--enforcer.state-file",
        state.to_str().expect("utf-8 temp path"),
    ]);
    let m = cluster.wait_metrics(
        Duration::from_secs(120),
        "the enforcer's p99 from Prometheus",
        |m| {
            m.get("ceph_recovery_budget_p99_seconds")
                .is_some_and(|v| v > 0.0)
        },
    );
    let ours = m
        .get("ceph_recovery_budget_p99_seconds")
        .unwrap_or(f64::NAN);
    let direct = query(
        &prom,
        "histogram_quantile(0.99, sum by (le) (rate(ceph_osd_op_w_latency_bucket[20s])))",
    )
    .expect("query");
    let theirs = direct.first().map(sample_value).unwrap_or(f64::NAN);
    // Ceph's buckets double: two evaluations a few seconds apart agree within a bucket.
    assert!(
        ours > 0.0 && theirs > 0.0 && ours / theirs < 2.5 && theirs / ours < 2.5,
        "enforcer p99 {ours} vs Prometheus {theirs}"
    );
    assert!(
        m.with_prefix("ceph_osd_op_w_latency_bucket").is_empty(),
        "the cluster-mode exporter collects no histogram with --latency.source prometheus"
    );
    assert_eq!(
        m.get("ceph_recovery_budget_collector_up{collector=\"latency\"}"),
        None
    );
    assert_eq!(
        m.get("ceph_recovery_budget_collector_up{collector=\"status\"}"),
        Some(1.0)
    );
    drop(cluster);
    drop(host);
}

/// `--prometheus.url` may carry a path prefix (a Prometheus behind `--web.route-prefix` or a
/// reverse proxy at `/prometheus`): the enforcer's query goes under it, not to the root.
#[test]
fn the_enforcers_prometheus_query_goes_under_the_urls_path_prefix() {
    use ceph_recovery_budget::latency::prometheus::{parse_answer, query_path};
    let dir = TempDir::new("route-prefix");
    let prom = start_prometheus_under(&dir, "global:\n  scrape_interval: 15s\n", "/prometheus");
    let path = query_path("vector(0.25)");
    let under = format!("http://127.0.0.1:{}/prometheus/", prom.port);
    let ask = |url: &str| {
        use ceph_recovery_budget::http_client::{get_ok, HttpTarget, Options};
        let target = HttpTarget::parse(url).unwrap();
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
            .block_on(get_ok(&target, &path, Options::json()))
    };
    let body = ask(&under).unwrap_or_else(|e| panic!("query under the prefix: {e}"));
    assert_eq!(parse_answer(&body), Ok(Some(0.25)));
    // The same Prometheus has no API at the root: the prefix is what made the query work.
    let root = format!("http://127.0.0.1:{}", prom.port);
    assert!(ask(&root).is_err());

    // `serve` as configured for a large cluster, with the URL as an operator writes it: the p99
    // it judges comes from that Prometheus.
    let state = dir.path().join("enforcer-state.json");
    // Every ceph call answers the lab's recorded `ceph status`: enough to be ready.
    let ceph = format!(
        "sh -c 'cat {}/tests/fixtures/lab/healthy.status.out' ceph",
        env!("CARGO_MANIFEST_DIR")
    );
    let serve = Exporter::start_without_lab(&[
        "--ceph.backend",
        "cli",
        "--ceph-cmd",
        &ceph,
        "--collect.interval",
        "1s",
        "--latency.source",
        "prometheus",
        "--prometheus.url",
        &under,
        "--prometheus.query",
        "vector(0.25)",
        "--enforcer.mode",
        "observe",
        "--enforcer.baseline",
        "16ms",
        "--enforcer.state-file",
        state.to_str().expect("utf-8 temp path"),
    ]);
    serve.wait_metrics(Duration::from_secs(30), "p99 from Prometheus", |m| {
        m.get("ceph_recovery_budget_p99_seconds") == Some(0.25)
    });
}
