//! `experiment --chart`'s SVG as a user opens it: in a real browser (Debian's `chromium`,
//! headless), whose XML parser refuses a malformed file with an error page, then as a
//! screenshot. The chart is drawn from the windows of a real fio run
//! (tests/fixtures/fio/local_status_interval_2s_sigint.jsonplus.out). Where chromium is missing
//! the test is skipped with a line saying what to install; with CRB_REQUIRE_TOOLS=1 it fails.

mod common;

use std::time::Duration;

use ceph_recovery_budget::tuning::experiment::chart::svg;
use ceph_recovery_budget::tuning::experiment::windows::{from_fio, within_fraction, worst_p99};
use ceph_recovery_budget::tuning::experiment::{ExperimentResult, ExperimentRow};

use common::chromium;
use common::prom::{tool_or_skip, TempDir};

fn row(name: &str, label: &str, report: &str, bound: f64) -> ExperimentRow {
    let fio = ceph_recovery_budget::fio::write_windows(report, Duration::from_secs(2))
        .expect("the recorded report's windows");
    let (started, windows) = from_fio(&fio).expect("windows");
    ExperimentRow {
        row: name.into(),
        label: label.into(),
        p50_seconds: None,
        p95_seconds: None,
        p99_seconds: Some(0.0074),
        p99_over_baseline: None,
        within_bound: None,
        recovery_seconds: None,
        recovery_objects: None,
        objects_per_second: None,
        incomplete: None,
        fio_started_at: Some(started),
        windows_within_bound: within_fraction(&windows, bound),
        worst_window_p99_seconds: worst_p99(&windows),
        reaction_seconds: None,
        windows_missing: None,
        windows,
    }
}

#[test]
fn the_experiment_chart_opens_in_a_real_browser() {
    let Some(browser) = tool_or_skip("chromium", "chromium") else {
        return;
    };
    let report = std::fs::read_to_string(
        common::repo().join("tests/fixtures/fio/local_status_interval_2s_sigint.jsonplus.out"),
    )
    .expect("the recorded fio report");
    let bound = 0.010;
    let enforced = row("enforced", "enforced (2x)", &report, bound);
    let started = enforced.fio_started_at.unwrap_or(0.0);
    let result = ExperimentResult {
        baseline_p99_seconds: Some(0.005),
        multiplier: 2.0,
        window_seconds: 2.0,
        bound_seconds: Some(bound),
        rows: vec![row("balanced", "balanced", &report, bound), enforced],
        enforcer: None,
        decisions: vec![
            serde_json::json!({"time": started + 4.0, "event": "THROTTLE", "performed": true, "message": "THROTTLE <&>"}),
            serde_json::json!({"time": started + 9.0, "event": "ESCALATE", "performed": true, "message": "escalating to rung 3 (pause)"}),
        ],
        notes: vec![],
        restored: vec![],
        not_restored: vec![],
        complete: true,
        interrupted: false,
    };
    let dir = TempDir::new("chart");
    let file = dir.write("chart.svg", &svg(&result));
    let url = format!("file://{}", file.display());

    let dom = String::from_utf8_lossy(&chromium(&browser, &dir, "dom", "--dump-dom", &url).stdout)
        .into_owned();
    assert!(
        !dom.contains("parsererror") && !dom.contains("This page contains the following errors"),
        "chromium's XML parser refused the chart:\n{dom}"
    );
    assert!(dom.starts_with("<svg"), "{dom}");
    assert_eq!(dom.matches("<polyline").count(), 2, "one line per row");
    assert!(
        dom.contains("THROTTLE &lt;&amp;&gt;"),
        "the decision's words, escaped"
    );

    let png = dir.path().join("chart.png");
    chromium(
        &browser,
        &dir,
        "shot",
        &format!("--screenshot={}", png.display()),
        &url,
    );
    let bytes = std::fs::read(&png).expect("the screenshot");
    assert!(bytes.starts_with(b"\x89PNG"), "a PNG");
    assert!(
        bytes.len() > 10_000,
        "a drawn chart, not a blank page ({} bytes)",
        bytes.len()
    );
}
