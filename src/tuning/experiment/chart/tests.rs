use std::time::Duration;

use serde_json::json;

use super::*;
use crate::ceph::parse::test_support::fixture_str;
use crate::tuning::experiment::{build_row, ExperimentRow, RowKind};
use crate::tuning::svg_check::{assert_well_formed, attr, content, ids, num, tag};

/// The real periodic json+ recording (fio 3.33, 2-s reports, stopped with SIGINT): window p99s
/// -, -, 19.8, 6.1, 5.6, 8.7, 11.9, 4.0 ms; fio started at this Unix time.
const REAL: &str = "fio/local_status_interval_2s_sigint.jsonplus.out";
const STARTED: f64 = 1796148845.055;

fn real_row(kind: RowKind) -> ExperimentRow {
    // Baseline 5 ms: bound 10 ms, between the recording's window p99s.
    build_row(
        kind,
        2.0,
        Some(0.005),
        Duration::from_secs(2),
        Ok(fixture_str(REAL)),
        None,
        None,
    )
}

/// A row whose windows have these p99s (ms), 2 s each.
fn row_with(kind: RowKind, p99_ms: &[f64]) -> ExperimentRow {
    let mut row = real_row(kind);
    row.windows = p99_ms
        .iter()
        .enumerate()
        .map(|(i, p)| RowWindow {
            start_seconds: i as f64 * 2.0,
            end_seconds: (i + 1) as f64 * 2.0,
            writes: 400,
            p99_seconds: Some(p / 1000.0),
            enforcer_p99_seconds: None,
        })
        .collect();
    row
}

fn decisions() -> Vec<Value> {
    vec![
        // Before fio ran: not on the chart.
        json!({"time": STARTED - 5.0, "event": "THROTTLE", "performed": true, "message": "early"}),
        json!({"time": STARTED + 3.0, "event": "BREACH", "performed": false, "message": "p99 over"}),
        json!({"time": STARTED + 4.0, "event": "THROTTLE", "performed": true, "message": "THROTTLE: osd_mclock_profile=high_client_ops"}),
        json!({"time": STARTED + 9.0, "event": "ESCALATE", "performed": true, "message": "ESCALATE: rung 2 left client p99 write 19.8 ms > bound 10.0 ms after 5s; escalating to rung 3 (pause, 30% of each 10 s)"}),
        // The same cycle: one label with the escalation.
        json!({"time": STARTED + 9.1, "event": "PAUSE", "performed": true, "message": "PAUSE: ceph osd set nobackfill, norecover for 3 s of this 10 s period (share 30%); paused 0s in this recovery so far"}),
        json!({"time": STARTED + 16.0, "event": "DESCEND", "performed": true, "message": "client p99 write 4.0 ms below 50% of the bound 10.0 ms for 10s; rung 3 -> rung 2 (custom profile, recovery limit 300 IOPS per OSD)"}),
        // Observe mode would have: not an action on the cluster.
        json!({"time": STARTED + 17.0, "event": "PAUSE", "performed": false, "message": "(observe mode) would PAUSE"}),
        json!({"time": STARTED + 24.0, "event": "RESTORE", "performed": true, "message": "recovery finished"}),
    ]
}

fn result(rows: Vec<ExperimentRow>, decisions: Vec<Value>) -> ExperimentResult {
    ExperimentResult {
        baseline_p99_seconds: Some(0.005),
        multiplier: 2.0,
        window_seconds: 2.0,
        bound_seconds: Some(0.010),
        rows,
        enforcer: None,
        decisions,
        notes: vec![],
        restored: vec![],
        not_restored: vec![],
        complete: true,
        interrupted: false,
    }
}

fn three_rows() -> ExperimentResult {
    result(
        vec![
            row_with(RowKind::NoRecovery, &[4.0, 4.5, 5.0, 4.2, 4.8]),
            row_with(
                RowKind::Profile("balanced"),
                &[30.0, 25.0, 18.0, 12.0, 9.0, 8.0],
            ),
            real_row(RowKind::Enforced),
        ],
        decisions(),
    )
}

/// The points of a polyline as (x, y).
fn points(svg: &str, id: &str) -> Vec<(f64, f64)> {
    let t = tag(svg, id).unwrap_or_else(|| panic!("no {id}"));
    attr(t, "points")
        .split(' ')
        .map(|p| {
            let (x, y) = p.split_once(',').unwrap();
            (x.parse().unwrap(), y.parse().unwrap())
        })
        .collect()
}

/// Reads a value off an axis from its labelled ticks, as a reader does: the x (or y) of the
/// tick labels `a` and `b` and their values.
fn linear(at_a: f64, a: f64, at_b: f64, b: f64, value: f64) -> f64 {
    at_a + (value - a) / (b - a) * (at_b - at_a)
}

#[test]
fn the_chart_is_a_well_formed_self_contained_svg() {
    let svg = svg(&three_rows());
    assert_well_formed(&svg);
    assert!(svg.starts_with(r#"<svg xmlns="http://www.w3.org/2000/svg""#));
    for banned in [
        "<script",
        "<style",
        "href",
        "url(",
        "@import",
        "<foreignObject",
    ] {
        assert!(!svg.contains(banned), "{banned}");
    }
    assert!(svg.contains(">Client write p99 per 2-s window, per row</text>"));
    assert!(svg.contains(">client write p99 (log scale)</text>"));
    assert!(svg.contains(">time since the row's fio started (m:ss)</text>"));
    assert!(svg.contains("bound 10.0 ms = 2x the no-recovery p99 (5.0 ms)"));
}

#[test]
fn one_line_per_row_in_time_order() {
    let svg = svg(&three_rows());
    assert_eq!(ids(&svg, "line"), vec![0, 1, 2]);
    assert_eq!(svg.matches("<polyline").count(), 3, "no row is broken");
    // The real row: its two windows with no write (fio's start delay) are not points; the six
    // others are, left to right.
    let real = points(&svg, "line-2");
    assert_eq!(real.len(), 6);
    assert!(real.windows(2).all(|p| p[0].0 < p[1].0));
    // Higher latency is higher on the page: 19.8 ms (3rd window) above 4.0 ms (the last).
    assert!(real[0].1 < real[5].1);
    // The two windows with no write are marked on the time axis and say so.
    assert_eq!(
        svg.matches("no write completed (no p99)</title>").count(),
        2
    );
    assert!(svg.contains("enforced (2x), 0:00-0:02: no write completed (no p99)"));
    assert!(svg.contains("<title>enforced (2x), 0:04-0:06: p99 19.8 ms over 346 writes</title>"));
}

#[test]
fn the_bound_sits_at_its_value_on_the_log_axis() {
    let svg = svg(&three_rows());
    let bound = tag(&svg, "bound").unwrap();
    let y = num(bound, "y1");
    assert_eq!(num(bound, "y2"), y, "horizontal");
    assert_eq!(attr(bound, "stroke"), BOUND_COLOUR);
    // The axis from its tick labels: 2, 5, 10, 20, 50 ms (the data spans 4 to 30 ms).
    let ticks: Vec<(String, f64)> = ids(&svg, "y-tick")
        .into_iter()
        .map(|k| {
            let id = format!("y-tick-{k}");
            (
                content(&svg, &id).to_string(),
                num(tag(&svg, &id).unwrap(), "y"),
            )
        })
        .collect();
    let labels: Vec<&str> = ticks.iter().map(|t| t.0.as_str()).collect();
    assert_eq!(labels, vec!["2 ms", "5 ms", "10 ms", "20 ms", "50 ms"]);
    let at = |label: &str| ticks.iter().find(|t| t.0 == label).unwrap().1;
    assert!((y - at("10 ms")).abs() < 0.2, "bound at {y}");
    // A point reads as its value: balanced's first window, 30 ms, between 20 and 50 ms.
    let balanced = points(&svg, "line-1");
    let (lo, hi) = (at("20 ms"), at("50 ms"));
    let expected = linear(lo, 20f64.log10(), hi, 50f64.log10(), 30f64.log10());
    assert!((balanced[0].1 - expected).abs() < 0.2, "{balanced:?}");
}

#[test]
fn the_enforcers_actions_are_marked_where_they_happened() {
    let svg = svg(&three_rows());
    // In time order (they are drawn right to left).
    let mut marks = ids(&svg, "mark");
    marks.sort_unstable();
    let labels: Vec<String> = marks
        .into_iter()
        .map(|i| {
            let g = tag(&svg, &format!("mark-{i}")).unwrap();
            let start = svg.find(g).unwrap();
            let body = &svg[start..start + svg[start..].find("</g>").unwrap()];
            let text_at = body.rfind("\">").unwrap() + 2;
            body[text_at..body[text_at..].find('<').unwrap() + text_at].to_string()
        })
        .collect();
    assert_eq!(
        labels,
        vec![
            "THROTTLE",
            "ESCALATE rung 3 + PAUSE 30%",
            "DESCEND rung 2",
            "RESTORE"
        ]
    );
    // Where: read the time axis from its ticks (0:00 and the last one).
    let x_ticks = ids(&svg, "x-tick");
    let tick = |k: usize| {
        let id = format!("x-tick-{k}");
        let c = content(&svg, &id).to_string();
        let (m, s) = c.split_once(':').unwrap();
        (
            m.parse::<f64>().unwrap() * 60.0 + s.parse::<f64>().unwrap(),
            num(tag(&svg, &id).unwrap(), "x"),
        )
    };
    let (t0, x0) = tick(x_ticks[0]);
    let (t1, x1) = tick(*x_ticks.last().unwrap());
    let mark_x = |i: usize| {
        let id = format!("mark-{i}");
        let g = tag(&svg, &id).unwrap();
        let start = svg.find(g).unwrap();
        let line = &svg[start + svg[start..].find("<line").unwrap()..];
        num(&line[..line.find('>').unwrap()], "x1")
    };
    // THROTTLE 4 s after fio started, RESTORE at 24 s (after the last window, 22.4 s).
    assert!((mark_x(0) - linear(x0, t0, x1, t1, 4.0)).abs() < 0.2);
    assert!((mark_x(3) - linear(x0, t0, x1, t1, 24.0)).abs() < 0.2);
    // The hover text has each decision's own words.
    assert!(svg.contains("0:09 ESCALATE: rung 2 left client p99 write"));
    assert!(svg.contains("| 0:09 PAUSE: ceph osd set nobackfill, norecover"));
    assert!(!svg.contains("early"), "before fio ran");
    assert!(!svg.contains("would PAUSE"), "not performed");
    assert!(!svg.contains("p99 over"), "a note, not an action");
}

#[test]
fn the_legend_reads_without_the_table() {
    let svg = svg(&three_rows());
    assert_eq!(
        content(&svg, "legend-0"),
        "no recovery: 100% of 5 windows within the bound, worst 5.0 ms"
    );
    assert_eq!(
        content(&svg, "legend-1"),
        "balanced: 33% of 6 windows within the bound, worst 30.0 ms"
    );
    // Windows with no write are not within: 4 of the 8.
    assert_eq!(
        content(&svg, "legend-2"),
        "enforced (2x): 50% of 8 windows within the bound, worst 19.8 ms, reaction 2s"
    );
    assert!(svg.contains(">the bound; × a window in which no write completed"));
    assert!(svg.contains(">the enforcer's actions during the enforced row"));
}

#[test]
fn a_window_with_no_write_breaks_the_line() {
    let mut r = three_rows();
    r.rows[1].windows[2].p99_seconds = None;
    r.rows[1].windows[2].writes = 0;
    let svg = svg(&r);
    assert_well_formed(&svg);
    assert_eq!(points(&svg, "line-1").len(), 2);
    assert_eq!(points(&svg, "seg-1-1").len(), 3);
}

#[test]
fn rows_without_windows_say_why_and_the_chart_still_draws() {
    let mut r = three_rows();
    for row in &mut r.rows {
        row.windows.clear();
        row.fio_started_at = None;
        row.windows_missing = Some("fio's report 1 has writes but no `clat_ns.bins` histogram: run fio with --output-format=json+".into());
    }
    r.bound_seconds = None;
    r.baseline_p99_seconds = None;
    let svg = svg(&r);
    assert_well_formed(&svg);
    assert!(!svg.contains("<polyline"));
    assert!(tag(&svg, "bound").is_none());
    assert!(ids(&svg, "mark").is_empty(), "no clock to place them on");
    assert!(content(&svg, "legend-2").starts_with(
        "enforced (2x): no windows (fio&apos;s report 1 has writes but no `clat_ns.bins`"
    ));
}

#[test]
fn labels_are_escaped() {
    let mut r = three_rows();
    r.rows[0].label = r#"a <b> & "c""#.into();
    r.decisions
        .push(json!({"time": STARTED + 5.0, "event": "THROTTLE", "message": "<&>"}));
    let svg = svg(&r);
    assert_well_formed(&svg);
    assert!(content(&svg, "legend-0").starts_with("a &lt;b&gt; &amp; &quot;c&quot;:"));
}

#[test]
fn log_axis_spans_the_data_from_and_to_a_1_2_5_tick() {
    let close = |a: LogAxis, lo: f64, hi: f64| {
        assert!(
            (a.lo - lo).abs() < 1e-12 * lo && (a.hi - hi).abs() < 1e-12 * hi,
            "{a:?} is not {lo}..{hi}"
        )
    };
    close(LogAxis::covering([0.004, 0.03].into_iter()), 0.002, 0.05);
    // A recovery's first window at 1.765 s and a 14 ms baseline.
    let a = LogAxis::covering([1.765, 0.0144].into_iter());
    close(a, 0.01, 2.0);
    let labels: Vec<String> = a.ticks().into_iter().map(latency_tick).collect();
    assert_eq!(
        labels,
        vec!["10 ms", "20 ms", "50 ms", "100 ms", "200 ms", "500 ms", "1 s", "2 s"]
    );
    close(LogAxis::covering([0.01].into_iter()), 0.01, 0.02);
    assert_eq!(
        LogAxis::covering(std::iter::empty()),
        LogAxis { lo: 1e-3, hi: 1.0 }
    );
    assert_eq!(latency_tick(0.0005), "0.5 ms");
    assert_eq!(time_step(22.4), 5.0);
    assert_eq!(time_step(185.0), 30.0);
}

/// Run F's decision log (docs/records, the lab on 2026-12-04): the lever's entry and each
/// change of its level are marked, though their records are notes (what carries them out is
/// its own record); its releases, and a line that changes nothing, are not.
#[test]
fn the_backfill_levers_entry_and_levels_are_marked_from_a_real_log() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/docs/records/experiment-2026-12-04-pause-over-bound/decisions.json"
    );
    let text = std::fs::read_to_string(path).unwrap();
    let log: Vec<Value> = serde_json::from_str(&text).unwrap();
    let started = log[0]["time"].as_f64().unwrap();
    let labels: Vec<String> = marks(&log, started).into_iter().map(|m| m.label).collect();
    assert_eq!(
        labels,
        vec![
            "ESCALATE rung 3",
            "ops 1->4",
            "DESCEND",
            "N 1->2",
            "RESTORE"
        ]
    );
    // The same in observe mode: nothing was done, nothing is marked but what says it was.
    let observed: Vec<Value> = log
        .iter()
        .map(|d| {
            let mut d = d.clone();
            d["mode"] = json!("observe");
            d["performed"] = json!(false);
            d
        })
        .collect();
    assert!(marks(&observed, started).is_empty());
}

#[test]
fn the_levers_lines_are_labelled_by_what_they_change() {
    let label = |m: &str| mark_label("BACKFILL_LIMIT", m);
    assert_eq!(
        label("BACKFILL_LIMIT at most 3 -> 2 PGs backfilling at once (4 recovery ops each): raising it to 3 let client p99 write back over the aim").as_deref(),
        Some("N 3->2")
    );
    assert_eq!(
        label("BACKFILL_LIMIT recovery ops per backfilling PG 4 -> 1 (osd_recovery_max_single_start; at most 1 PG backfilling at once): client p99 write 137 ms").as_deref(),
        Some("ops 4->1")
    );
    assert_eq!(
        label("BACKFILL_LIMIT ended: redundancy at risk (1 PGs undersized): recovery first; every PG it holds is released").as_deref(),
        Some("lever ended")
    );
    assert_eq!(
        label("BACKFILL_LIMIT: N = 2 has room, but releases wait while client p99 write 114 ms is above the aim 102 ms: N is judged first"),
        None
    );
    assert_eq!(
        label("BACKFILL_LIMIT: 2.1 is no longer held by the enforcer: its upmap entry is gone"),
        None
    );
}

/// The enforcer's own reading per window is drawn dashed beside the client's line, on the same
/// axes, and the legend says what it is; a result without readings has neither.
#[test]
fn what_the_enforcer_saw_is_drawn_beside_the_clients_line() {
    let plain = three_rows();
    let mut seen = three_rows();
    let enforced = seen.rows.last_mut().unwrap();
    // The same p99 as the client's in the windows that have one, none in the rest.
    for w in &mut enforced.windows {
        w.enforcer_p99_seconds = w.p99_seconds;
    }
    let svg_seen = svg(&seen);
    assert_well_formed(&svg_seen);
    let client = points(&svg_seen, "line-2");
    let theirs = points(&svg_seen, "seen-0");
    assert_eq!(theirs, client, "equal readings sit on the client's points");
    assert!(svg_seen.contains("what the enforcer saw in each window"));
    let svg_plain = svg(&plain);
    assert!(!svg_plain.contains("seen-0"));
    assert!(!svg_plain.contains("what the enforcer saw"));
    // One legend line more.
    let h = |s: &str| -> f64 {
        let start = s.find("height=\"").unwrap() + 8;
        s[start..].split('"').next().unwrap().parse().unwrap()
    };
    assert!(h(&svg_seen) > h(&svg_plain));

    // A reading above the client's is drawn higher on the page.
    let mut higher = three_rows();
    for w in &mut higher.rows.last_mut().unwrap().windows {
        w.enforcer_p99_seconds = w.p99_seconds.map(|p| p * 2.0);
    }
    let svg_higher = svg(&higher);
    let client = points(&svg_higher, "line-2");
    let theirs = points(&svg_higher, "seen-0");
    assert!(client
        .iter()
        .zip(&theirs)
        .all(|(c, t)| c.0 == t.0 && t.1 < c.1));
}
