//! The Prometheus side end to end, with a real Prometheus (and Alertmanager) scraping a running
//! exporter. The tests marked `#[ignore]` need the lab cluster (scripts/ceph-lab) and CRB_LAB=1
//! (scripts/test runs them):
//! - `dashboard_queries_return_data_from_a_real_scrape` only reads the cluster;
//! - `alerts_follow_a_real_rebalance_and_a_real_failure` disturbs it (rebalance, stops osd.3)
//!   and puts it back as it found it;
//! - `the_enforcer_reads_p99_from_prometheus_over_host_mode_exporters` only reads it;
//! - `ours_and_the_mgr_modules_latency_series_in_one_prometheus_count_each_osd_once` only reads
//!   it (and writes a little through fio).
//!
//! The route-prefix test runs everywhere Prometheus is installed. Where prometheus or
//! alertmanager is missing these tests are skipped with a line saying what to install; with
//! CRB_REQUIRE_TOOLS=1 (scripts/test) they fail.

mod common;

use std::collections::BTreeSet;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde_json::json;

use common::prom::{
    dashboard, dashboard_queries, label_values_query, percent_encode, query, read, sample_value,
    start_alertmanager, start_prometheus, start_prometheus_under, substitute, tool_or_skip,
    wait_until, Server, TempDir, ALERTS, AM_EXAMPLE, EXCEEDED, RULES, SUSPENDED,
};
use common::{ceph, ceph_quiet, http_get, lab, lab_enabled, lab_env, lab_quiet, repo, Exporter};

/// The recorded cluster-wide p99 that RecoveryLatencyBudgetExceeded compares with the bound.
const P99: &str =
    "cluster_quantile:ceph_osd_op_w_latency_seconds:histogram_quantile5m{quantile=\"0.99\"}";

fn require_lab() {
    assert!(
        lab_enabled(),
        "set CRB_LAB=1 after scripts/ceph-lab start (scripts/test does both)"
    );
}

/// The lab's mgr prometheus module address, from `scripts/ceph-lab status`, once it answers
/// there (within 60 s: after an mgr restart it binds late). None on Reef's lab alone, which has
/// the port but no module (trixie's mgr cannot load it); on any other a module that does not
/// answer fails the test instead of dropping its part.
fn lab_mgr_prometheus() -> Option<String> {
    if std::env::var("CEPH_LAB_RELEASE").as_deref() == Ok("reef") {
        return None;
    }
    let addr =
        lab_prometheus_port().expect("the lab's mgr prometheus address (scripts/ceph-lab status)");
    let port: u16 = addr
        .rsplit(':')
        .next()
        .and_then(|p| p.parse().ok())
        .expect("a port in the module's address");
    let start = Instant::now();
    while http_get(port, "/metrics").0 != 200 {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "the lab's mgr prometheus module does not answer on {addr}"
        );
        std::thread::sleep(Duration::from_secs(1));
    }
    Some(addr)
}

/// The address `scripts/ceph-lab status` gives for the mgr prometheus module.
fn lab_prometheus_port() -> Option<String> {
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

/// The scrape job of the mgr prometheus module at `addr`, under the same `cluster` as ours.
fn mgr_job(addr: &str) -> String {
    [
        "  - job_name: ceph-mgr",
        "    static_configs:",
        &format!("      - targets: ['{addr}']"),
        "        labels:",
        "          cluster: lab",
        "",
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
    if tool_or_skip("prometheus", "prometheus").is_none() {
        return;
    }
    lab(&["start"]);
    let dir = TempDir::new("dashboard-lab");
    let state = dir.path().join("enforcer-state.json");
    let exporter = start_observing_exporter(&state);
    let _writes = Writes::start(50, Some(60));

    // Reef's lab (Debian trixie's build) loads no mgr Python module, so there is no mgr
    // prometheus module to scrape beside ours: the rules and the dashboard run on ours alone.
    let mgr = lab_mgr_prometheus();
    if mgr.is_none() {
        eprintln!("lab: Reef's lab has no mgr prometheus module: ours alone");
    }
    let mgr_job = mgr.as_deref().map(mgr_job).unwrap_or_default();
    let targets = if mgr.is_some() { 2 } else { 1 };
    let mut config = scrape_config(exporter.port, "1s", &mgr_job);
    config.push_str(&rule_files_config(&[
        &repo().join(RULES),
        &repo().join(ALERTS),
    ]));
    let prom = start_prometheus(&dir, &config);

    wait_until(
        Duration::from_secs(120),
        "3 scrapes of every target and latency data",
        || {
            let scrapes = query(&prom, "count_over_time(up[1m]) >= 3 and up == 1").ok()?;
            let p99 = query(&prom, &format!("{P99} >= 0")).ok()?;
            let enforcer = query(&prom, "ceph_recovery_budget_p99_seconds >= 0").ok()?;
            (scrapes.len() == targets && !p99.is_empty() && !enforcer.is_empty()).then_some(())
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
    if mgr.is_some() {
        let mgr_series = query(&prom, "ceph_pg_undersized{job=\"ceph-mgr\"}").expect("query");
        assert!(
            !mgr_series.is_empty(),
            "the mgr module's ceph_pg_undersized is scraped (the test covers the name collision)"
        );
    }
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

/// One instant query at a given time (so that two expressions see the same data).
fn query_at(prom: &Server, expr: &str, time: f64) -> Vec<serde_json::Value> {
    let path = format!(
        "/api/v1/query?query={}&time={time:.3}",
        percent_encode(expr)
    );
    let (code, body) = http_get(prom.port, &path);
    let v: serde_json::Value =
        serde_json::from_str(&body).unwrap_or_else(|e| panic!("HTTP {code} ({e}): {body}"));
    assert_eq!(v["status"], "success", "{expr}: {body}");
    v["data"]["result"].as_array().cloned().unwrap_or_default()
}

/// The one value of a query expected to give one series.
fn one_value(prom: &Server, expr: &str, time: f64) -> f64 {
    let r = query_at(prom, expr, time);
    assert_eq!(r.len(), 1, "{expr}: one series expected: {r:?}");
    sample_value(&r[0])
}

/// The rule file's expression of a recording rule.
fn rule_expr(record: &str) -> String {
    let rules = common::prom::yaml(RULES);
    rules["groups"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|g| g["rules"].as_array().cloned().unwrap_or_default())
        .find(|r| r["record"] == record)
        .and_then(|r| r["expr"].as_str().map(str::to_string))
        .unwrap_or_else(|| panic!("no recording rule {record} in {RULES}"))
}

/// Our `ceph_osd_op_w_latency_sum/_count` have the same names and labels (`ceph_daemon`) as the
/// mgr prometheus module's; both scraped into one Prometheus under the same `cluster`, the
/// rules' and the dashboard's mean and p99 count each OSD once: they equal the same queries
/// restricted to our job. Also checks, on real scrapes, that our `_count` is the histogram's
/// total and that the mean lies where the histogram says the writes are.
#[test]
#[ignore = "needs the lab cluster: scripts/test runs it"]
fn ours_and_the_mgr_modules_latency_series_in_one_prometheus_count_each_osd_once() {
    require_lab();
    if tool_or_skip("prometheus", "prometheus").is_none() {
        return;
    }
    lab(&["start"]);
    let dir = TempDir::new("mgr-collision");
    let exporter = Exporter::start(&["--collect.interval", "2s", "--enforcer.mode", "off"]);
    let _writes = Writes::start(100, Some(90));
    let mgr = lab_mgr_prometheus().expect(
        "a mgr prometheus module (not on Reef's lab: scripts/test runs this test on the others)",
    );
    // Reef and later: the module leaves the daemons' perf counters to ceph-exporter by default
    // (`mgr/prometheus/exclude_perf_counters` true), so there is no collision unless an operator
    // turns that off (Debian packages no ceph-exporter to make it the other way). The default is
    // checked, then the collision made.
    let _perf_counters = MgrPerfCounters::published(&mgr);
    let mut config = scrape_config(exporter.port, "1s", &mgr_job(&mgr));
    config.push_str(&rule_files_config(&[&repo().join(RULES)]));
    let prom = start_prometheus(&dir, &config);

    const MEAN: &str = "cluster:ceph_osd_op_w_latency_seconds:mean5m";
    wait_until(
        Duration::from_secs(150),
        "30 s of scrapes of both targets with writes, and the mean and p99 rules",
        || {
            let scrapes = query(&prom, "count_over_time(up[1m]) >= 30 and up == 1").ok()?;
            let mean = query(&prom, &format!("{MEAN} > 0")).ok()?;
            let p99 = query(&prom, &format!("{P99} > 0")).ok()?;
            let mgr = query(
                &prom,
                "rate(ceph_osd_op_w_latency_count{job=\"ceph-mgr\"}[1m]) > 0",
            )
            .ok()?;
            (scrapes.len() == 2 && !mean.is_empty() && !p99.is_empty() && !mgr.is_empty())
                .then_some(())
        },
    );
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_secs_f64()
        - 2.0;

    // The collision is real: both targets publish each OSD's _sum and _count, same labels.
    for name in ["ceph_osd_op_w_latency_sum", "ceph_osd_op_w_latency_count"] {
        for r in query_at(&prom, &format!("count by (ceph_daemon) ({name})"), t) {
            assert_eq!(
                sample_value(&r),
                2.0,
                "{name}: ours and the mgr module's: {r}"
            );
        }
        let ours = query_at(
            &prom,
            &format!(
                "count by (ceph_daemon) ({name} and on (job, instance) ceph_recovery_budget_build_info)"
            ),
            t,
        );
        assert_eq!(ours.len(), 4, "{name}: the 4 lab OSDs: {ours:?}");
        assert!(ours.iter().all(|r| sample_value(r) == 1.0), "{ours:?}");
    }

    // The rules count each OSD once: their expressions give what the same queries restricted to
    // our job give (at one instant, so on the same samples).
    let ours_only = "job=\"ceph-recovery-budget\"";
    let mean = one_value(&prom, &rule_expr(MEAN), t);
    let mean_ours = one_value(
        &prom,
        &format!(
            "sum(rate(ceph_osd_op_w_latency_sum{{{ours_only}}}[5m])) / sum(rate(ceph_osd_op_w_latency_count{{{ours_only}}}[5m]))"
        ),
        t,
    );
    assert!(
        (mean - mean_ours).abs() <= 1e-9 * mean_ours,
        "mean write latency: rule {mean} s, ours alone {mean_ours} s"
    );
    let p99_expr =
        "histogram_quantile(0.99, sum by (cluster, le) (rate(ceph_osd_op_w_latency_bucket[5m])))";
    let p99 = one_value(&prom, p99_expr, t);
    let p99_ours = one_value(
        &prom,
        &format!(
            "histogram_quantile(0.99, sum by (le) (rate(ceph_osd_op_w_latency_bucket{{{ours_only}}}[5m])))"
        ),
        t,
    );
    assert_eq!(p99, p99_ours, "p99: rule's expression vs ours alone");
    // Writes per second: our _count (as the mean's denominator selects it) is the histogram's
    // total, each OSD once.
    let writes = one_value(
        &prom,
        "sum(rate(ceph_osd_op_w_latency_count[5m]) and rate(ceph_osd_op_w_latency_sum[5m]) and on (job, instance) ceph_recovery_budget_build_info)",
        t,
    );
    let writes_hist = one_value(
        &prom,
        "sum(rate(ceph_osd_op_w_latency_bucket{le=\"+Inf\"}[5m]))",
        t,
    );
    assert!(
        (writes - writes_hist).abs() <= 1e-9 * writes_hist && writes > 1.0,
        "writes/s from _count {writes}, from the +Inf bucket {writes_hist}"
    );
    // What a naive sum over both targets would say: every write twice, ours plus the module's
    // (which reads the same counters every few seconds, so it trails ours a little).
    let naive = one_value(&prom, "sum(rate(ceph_osd_op_w_latency_count[5m]))", t);
    let mgr_writes = one_value(
        &prom,
        "sum(rate(ceph_osd_op_w_latency_count{job=\"ceph-mgr\"}[5m]))",
        t,
    );
    assert!(
        mgr_writes > 0.5 * writes && (naive - (writes + mgr_writes)).abs() <= 1e-9 * naive,
        "without the selection the mgr module's count is added: {naive} = {writes} + {mgr_writes}"
    );
    // The mean lies where the histogram puts the writes: between its p50 / 2 and its p99
    // (factor-2 buckets), and it is of the order of the mgr module's own mean (below).
    let p50 = one_value(
        &prom,
        "histogram_quantile(0.5, sum by (le) (rate(ceph_osd_op_w_latency_bucket[5m])))",
        t,
    );
    assert!(
        mean > p50 / 2.0 && mean < p99,
        "mean {mean} s, p50 {p50} s, p99 {p99} s"
    );
    let mean_mgr = one_value(
        &prom,
        "sum(rate(ceph_osd_op_w_latency_sum{job=\"ceph-mgr\"}[5m])) / sum(rate(ceph_osd_op_w_latency_count{job=\"ceph-mgr\"}[5m]))",
        t,
    );
    // Same counters, same unit: within 2x. Not closer: the module gets the OSDs' counters every
    // few seconds on its own schedule, so over the minute of a bursty fio load its rate covers
    // another slice of it (seen on the lab: 11.2 vs 11.3 ms, 6.1 vs 3.8 ms, 4.6 vs 2.8 ms).
    // A unit slip (ns, µs) would be 1000x off.
    assert!(
        mean / mean_mgr > 0.5 && mean / mean_mgr < 2.0,
        "our mean {mean} s vs the mgr module's {mean_mgr} s"
    );
    eprintln!(
        "lab: mean write latency {:.1} ms (mgr module {:.1} ms), p50 {:.1} ms, p99 {:.1} ms, {writes:.0} writes/s (a naive sum says {naive:.0})",
        mean * 1e3,
        mean_mgr * 1e3,
        p50 * 1e3,
        p99 * 1e3
    );

    // The dashboard's mean (panel "Client write latency vs baseline and bound") is the rule's.
    let d = dashboard();
    let dash_mean = dashboard_queries(&d)
        .into_iter()
        .find(|(_, e, _)| e.contains("ceph_osd_op_w_latency_sum"))
        .map(|(_, e, _)| substitute(&e, "lab"))
        .expect("the dashboard shows the mean write latency");
    let dm = one_value(&prom, &dash_mean, t);
    assert!(
        (dm - mean).abs() <= 1e-9 * mean,
        "dashboard mean {dm} s vs rule {mean} s"
    );
}

/// The mgr prometheus module made to publish the daemons' perf counters where a release
/// excludes them by default (Reef and later); the default is put back on drop.
struct MgrPerfCounters {
    changed: bool,
}

impl MgrPerfCounters {
    const KEY: &'static str = "mgr/prometheus/exclude_perf_counters";

    fn published(mgr: &str) -> Self {
        let out = Command::new("ceph")
            .args(["config", "get", "mgr", Self::KEY])
            .envs(lab_env())
            .output()
            .expect("run ceph");
        // Pacific has no such option (the module always publishes them).
        let excluded =
            out.status.success() && String::from_utf8_lossy(&out.stdout).trim() == "true";
        if !excluded {
            return Self { changed: false };
        }
        let port: u16 = mgr
            .rsplit(':')
            .next()
            .and_then(|p| p.parse().ok())
            .expect("the module's port");
        let (code, body) = http_get(port, "/metrics");
        assert_eq!(code, 200, "the mgr prometheus module: {body}");
        assert!(
            !body.contains("\nceph_osd_op_w_latency_count{"),
            "{} is true, yet the module publishes ceph_osd_op_w_latency_count",
            Self::KEY
        );
        eprintln!("lab: the mgr module excludes perf counters by default ({} true): no collision; made for the test", Self::KEY);
        ceph(&["config", "set", "mgr", Self::KEY, "false"]);
        Self { changed: true }
    }
}

impl Drop for MgrPerfCounters {
    fn drop(&mut self) {
        if self.changed {
            // The module follows `config set` but not `config rm` (measured on Tentacle: after
            // the rm it went on publishing them), so the default is set, then the key removed.
            ceph_quiet(&["config", "set", "mgr", Self::KEY, "true"]);
            // Apart, so that the mgr sees the set before the rm it ignores.
            std::thread::sleep(Duration::from_secs(3));
            ceph_quiet(&["config", "rm", "mgr", Self::KEY]);
        }
    }
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
    profile: bool,
}

impl LabRestore {
    /// Runs the OSDs under `profile` for a part of the test; the drop removes it again.
    fn profile(&mut self, profile: &str) {
        self.profile = true;
        common::ceph(&["config", "set", "osd", "osd_mclock_profile", profile]);
    }
}

impl Drop for LabRestore {
    fn drop(&mut self) {
        if self.profile {
            ceph_quiet(&["config", "rm", "osd", "osd_mclock_profile"]);
        }
        if !self.rebalance && !self.osd_down {
            return;
        }
        if self.rebalance {
            lab_quiet(&["rebalance-stop"]);
            lab_quiet(&["pg-logs-default"]);
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
    if tool_or_skip("prometheus", "prometheus").is_none() {
        return;
    }
    if tool_or_skip("prometheus-alertmanager", "prometheus-alertmanager").is_none() {
        return;
    }
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

    // 1. Rebalance: PGs backfill, none undersized; p99 far above the 2 ms bound. Short PG logs
    //    make the moved PGs backfill (objects misplaced) on every release: with long logs
    //    Tentacle recovers a moved PG from its log with the new OSD already acting and its
    //    objects degraded, at min_size: redundancy at risk, the bound rightly suspended.
    restore.rebalance = true;
    lab(&["pg-logs-short"]);
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
    // The PGs that finished their backfill go back by backfill: under the test's writes that
    // ran at 2-8 objects/s on the Tentacle lab (`balanced`, one backfill per OSD), past the
    // wait; recovery first for the way back, on every release.
    restore.profile("high_recovery_ops");
    lab(&["rebalance-stop"]);
    lab(&["pg-logs-default"]);
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
    // The recovery must outlast Exceeded's `for:` with p99 over the bound. With the default
    // `balanced` of Reef and later it was over in 32 s on the Tentacle lab (518 objects/s);
    // `high_client_ops` (Pacific's default) gives recovery the smaller share on every release.
    restore.profile("high_client_ops");
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
    while start.elapsed() < Duration::from_secs(300) && suspended_and_over < Duration::from_secs(40)
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

    // 3. Back to normal: Suspended resolves (recovery first for the way back, as after 1).
    restore.profile("high_recovery_ops");
    lab(&["osd-start", "3"]);
    lab(&["osd-in", "3"]);
    common::ceph(&["osd", "unset", "noout"]);
    lab(&["wait-clean", "900"]);
    restore.osd_down = false;
    common::ceph(&["config", "rm", "osd", "osd_mclock_profile"]);
    restore.profile = false;
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
    if tool_or_skip("prometheus", "prometheus").is_none() {
        return;
    }
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
    let writing = Instant::now();
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
    // Compared once both 20-s windows hold 20 s of writes: the enforcer's first reading, from
    // the first scrapes, once read 5.6 ms against 25.6 ms for the fuller window a moment later.
    let m = cluster.wait_metrics(
        Duration::from_secs(120),
        "the enforcer's p99 from Prometheus over a full window",
        |m| {
            writing.elapsed() >= Duration::from_secs(25)
                && m.get("ceph_recovery_budget_p99_seconds")
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
    if tool_or_skip("prometheus", "prometheus").is_none() {
        return;
    }
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
