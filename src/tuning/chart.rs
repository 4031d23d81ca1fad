//! The tuning record as one picture: recovery rate (bars, top) over client p99 write (points and
//! line, bottom), one column per measurement, with the latency bound drawn across. The SVG is
//! self-contained (no scripts, fonts, stylesheets or links) so it can be attached to a ticket or
//! opened from a mail client and look the same everywhere.

use crate::tuning::record::{Action, Measurement, Step, TuningRecord};
use crate::tuning::report::{date_part, fmt_latency, fmt_rate, step_label};

const WIDTH: f64 = 800.0;
const HEIGHT: f64 = 500.0;
const PLOT_LEFT: f64 = 72.0;
const PLOT_RIGHT: f64 = 780.0;
const RATE_TOP: f64 = 78.0;
const RATE_BOTTOM: f64 = 218.0;
const P99_TOP: f64 = 242.0;
const P99_BOTTOM: f64 = 382.0;
/// Baseline of the x-axis labels, below the bottom panel (they belong to both panels).
const LABEL_Y: f64 = 398.0;
/// Rough width of one character at the label size, to decide when labels must slant.
const CHAR_WIDTH: f64 = 6.6;

const BASELINE_COLOUR: &str = "#1f77b4";
const KEPT_COLOUR: &str = "#2e7d32";
const REVERTED_COLOUR: &str = "#9e9e9e";
const UNDECIDED_STROKE: &str = "#455a64";
const BOUND_COLOUR: &str = "#d32f2f";
const LINE_COLOUR: &str = "#555555";
const GRID_COLOUR: &str = "#e0e0e0";
const NOTE_COLOUR: &str = "#666666";
const FONT: &str = r#"font-family="sans-serif""#;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Status {
    Baseline,
    Kept,
    Reverted,
    Undecided,
}

impl Status {
    fn word(self) -> &'static str {
        match self {
            Status::Baseline => "baseline",
            Status::Kept => "kept",
            Status::Reverted => "reverted",
            Status::Undecided => "undecided",
        }
    }

    /// Fill and stroke attributes. Undecided is outlined only: it has not earned a colour yet.
    fn paint(self) -> String {
        match self {
            Status::Baseline => format!(r#"fill="{BASELINE_COLOUR}""#),
            Status::Kept => format!(r#"fill="{KEPT_COLOUR}""#),
            Status::Reverted => format!(r#"fill="{REVERTED_COLOUR}""#),
            Status::Undecided => format!(
                r#"fill="white" stroke="{UNDECIDED_STROKE}" stroke-width="1.5" stroke-dasharray="4 2""#
            ),
        }
    }
}

/// One column of the chart: the baseline or a step, with why a number is missing when it is.
struct Entry {
    label: String,
    status: Status,
    rate: Result<f64, &'static str>,
    p99_ms: Result<f64, &'static str>,
}

impl Entry {
    fn new(label: String, status: Status, m: Option<&Measurement>) -> Entry {
        let (rate, p99_ms) = match m {
            None => (Err("not measured"), Err("not measured")),
            // An interrupted window is kept for the record, never plotted as if it were complete.
            Some(m) if m.interrupted.is_some() => (Err("interrupted"), Err("interrupted")),
            Some(m) => {
                let rate = match (m.recovery.running, m.recovery.objects_per_second) {
                    (false, _) => Err("no recovery"),
                    (true, Some(r)) if r.is_finite() && r >= 0.0 => Ok(r),
                    (true, _) => Err("rate n/a"),
                };
                let p99 = match m.client.as_ref().and_then(|c| c.write_p99()) {
                    Some(s) if s.is_finite() && s >= 0.0 => Ok(s * 1000.0),
                    _ => Err("p99 n/a"),
                };
                (rate, p99)
            }
        };
        Entry {
            label,
            status,
            rate,
            p99_ms,
        }
    }
}

fn entries(record: &TuningRecord) -> Vec<Entry> {
    let mut out = vec![Entry::new(
        "baseline".into(),
        Status::Baseline,
        Some(&record.baseline.measurement),
    )];
    out.extend(
        record
            .steps
            .iter()
            .map(|s| Entry::new(step_label(s), step_status(s), s.measurement.as_ref())),
    );
    out
}

fn step_status(step: &Step) -> Status {
    match step.decision.as_ref().map(|d| d.action) {
        None => Status::Undecided,
        Some(Action::Kept) => Status::Kept,
        Some(Action::Reverted) => Status::Reverted,
    }
}

/// A y axis from 0 to a round number, ticks every 1, 2 or 5 x 10^n.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Axis {
    max: f64,
    step: f64,
}

impl Axis {
    fn covering(data_max: f64) -> Axis {
        // An empty panel still needs a scale; 0..1 draws a sensible empty frame.
        let max = if data_max.is_finite() && data_max > 0.0 {
            data_max
        } else {
            1.0
        };
        let step = nice_step(max / 4.0);
        Axis {
            max: (max / step).ceil() * step,
            step,
        }
    }

    fn ticks(self) -> impl Iterator<Item = f64> {
        let n = (self.max / self.step).round() as u32;
        (0..=n).map(move |k| f64::from(k) * self.step)
    }

    /// Enough decimals to tell the ticks apart, no more.
    fn tick_label(self, value: f64) -> String {
        let decimals = if self.step >= 1.0 {
            0
        } else {
            (-self.step.log10().floor()).max(0.0) as usize
        };
        format!("{value:.decimals$}")
    }

    /// The y coordinate of `value` in a panel spanning `top..bottom`.
    fn y(self, value: f64, top: f64, bottom: f64) -> f64 {
        bottom - value / self.max * (bottom - top)
    }
}

fn nice_step(raw: f64) -> f64 {
    let base = 10f64.powf(raw.log10().floor());
    let fraction = raw / base;
    let multiple = if fraction <= 1.0 {
        1.0
    } else if fraction <= 2.0 {
        2.0
    } else if fraction <= 5.0 {
        5.0
    } else {
        10.0
    };
    multiple * base
}

/// The chart as a standalone SVG document.
pub fn svg(record: &TuningRecord) -> String {
    let entries = entries(record);
    let bound_ms = record
        .bound_seconds()
        .filter(|b| b.is_finite() && *b >= 0.0)
        .map(|b| b * 1000.0);

    let rate_axis = Axis::covering(
        entries
            .iter()
            .filter_map(|e| e.rate.ok())
            .fold(0.0, f64::max),
    );
    // The bound is part of the range so its line is drawn even when every point is far below.
    let p99_axis = Axis::covering(
        entries
            .iter()
            .filter_map(|e| e.p99_ms.ok())
            .chain(bound_ms)
            .fold(0.0, f64::max),
    );

    let slot = (PLOT_RIGHT - PLOT_LEFT) / entries.len() as f64;
    let centre = |i: usize| PLOT_LEFT + slot * (i as f64 + 0.5);
    let bar_width = (slot * 0.6).min(70.0);
    // Values are printed only where there is room for them.
    let show_values = slot >= 48.0;

    let mut out = String::new();
    out.push_str(&format!(
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" viewBox="0 0 {WIDTH} {HEIGHT}" {FONT} font-size="11">"#
    ));
    out.push('\n');
    out.push_str(&format!(
        "<title>Tuning record: {}</title>\n",
        esc(&record.cluster.name)
    ));
    out.push_str(&format!(
        r#"<rect x="0" y="0" width="{WIDTH}" height="{HEIGHT}" fill="white"/>"#
    ));
    out.push('\n');
    out.push_str(&format!(
        r#"<text x="{PLOT_LEFT}" y="24" font-size="15" font-weight="bold">{}: recovery rate vs client p99 write ({})</text>"#,
        esc(&record.cluster.name),
        esc(&date_part(&record.baseline.date))
    ));
    out.push('\n');
    legend(&mut out);

    // Top panel: recovery rate.
    axis(
        &mut out,
        "rate",
        rate_axis,
        RATE_TOP,
        RATE_BOTTOM,
        "recovery (obj/s)",
    );
    for (i, e) in entries.iter().enumerate() {
        let x = centre(i);
        match e.rate {
            Ok(rate) => {
                let top = rate_axis.y(rate, RATE_TOP, RATE_BOTTOM);
                let text = fmt_rate(Some(rate), true);
                out.push_str(&format!(
                    r#"<rect id="bar-{i}" x="{:.1}" y="{top:.1}" width="{bar_width:.1}" height="{:.1}" {}><title>{}: {}, {}</title></rect>"#,
                    x - bar_width / 2.0,
                    RATE_BOTTOM - top,
                    e.status.paint(),
                    esc(&e.label),
                    esc(&text),
                    e.status.word()
                ));
                out.push('\n');
                if show_values {
                    out.push_str(&format!(
                        r#"<text x="{x:.1}" y="{:.1}" text-anchor="middle" font-size="10">{}</text>"#,
                        top - 4.0,
                        esc(text.trim_end_matches(" obj/s"))
                    ));
                    out.push('\n');
                }
            }
            Err(why) => note(&mut out, x, RATE_BOTTOM - 8.0, why),
        }
    }

    // Bottom panel: client p99 write, the bound first so points are drawn over it.
    axis(
        &mut out,
        "p99",
        p99_axis,
        P99_TOP,
        P99_BOTTOM,
        "client p99 write (ms)",
    );
    match bound_ms {
        Some(bound) => {
            let y = p99_axis.y(bound, P99_TOP, P99_BOTTOM);
            out.push_str(&format!(
                r#"<line id="bound" x1="{PLOT_LEFT}" y1="{y:.1}" x2="{PLOT_RIGHT}" y2="{y:.1}" stroke="{BOUND_COLOUR}" stroke-width="1.5" stroke-dasharray="6 4"/>"#
            ));
            out.push('\n');
            // Labelled at the left: the baseline point there sits at bound / multiplier, well
            // clear of the line, while later points crowd up to it.
            out.push_str(&format!(
                r#"<text x="{:.1}" y="{:.1}" fill="{BOUND_COLOUR}">bound {} ({}x baseline)</text>"#,
                PLOT_LEFT + 4.0,
                y - 4.0,
                esc(&fmt_latency(bound / 1000.0)),
                record.multiplier
            ));
            out.push('\n');
        }
        None => {
            out.push_str(&format!(
                r#"<text x="{:.1}" y="{:.1}" text-anchor="end" fill="{NOTE_COLOUR}">no bound: the baseline has no client p99 write</text>"#,
                PLOT_RIGHT - 4.0,
                P99_TOP + 12.0
            ));
            out.push('\n');
        }
    }
    // The line breaks where a measurement is missing rather than bridging it: a gap is a fact.
    let points: Vec<Option<(f64, f64)>> = entries
        .iter()
        .enumerate()
        .map(|(i, e)| {
            e.p99_ms
                .ok()
                .map(|ms| (centre(i), p99_axis.y(ms, P99_TOP, P99_BOTTOM)))
        })
        .collect();
    for run in points.split(Option::is_none) {
        if run.len() < 2 {
            continue;
        }
        let coords: Vec<String> = run
            .iter()
            .flatten()
            .map(|(x, y)| format!("{x:.1},{y:.1}"))
            .collect();
        out.push_str(&format!(
            r#"<polyline points="{}" fill="none" stroke="{LINE_COLOUR}" stroke-width="1.5"/>"#,
            coords.join(" ")
        ));
        out.push('\n');
    }
    for (i, (e, point)) in entries.iter().zip(&points).enumerate() {
        match (e.p99_ms, point) {
            (Ok(ms), Some((x, y))) => {
                let text = fmt_latency(ms / 1000.0);
                out.push_str(&format!(
                    r#"<circle id="point-{i}" cx="{x:.1}" cy="{y:.1}" r="4" {}><title>{}: p99 write {}, {}</title></circle>"#,
                    e.status.paint(),
                    esc(&e.label),
                    esc(&text),
                    e.status.word()
                ));
                out.push('\n');
                if show_values {
                    out.push_str(&format!(
                        r#"<text x="{:.1}" y="{:.1}" font-size="10">{}</text>"#,
                        x + 6.0,
                        y - 6.0,
                        esc(&text)
                    ));
                    out.push('\n');
                }
            }
            (Err(why), _) => note(&mut out, centre(i), P99_BOTTOM - 8.0, why),
            // Unreachable by construction (points come from p99_ms); nothing to draw.
            (Ok(_), None) => {}
        }
    }

    // Shared x axis labels; slanted when they would collide.
    let longest = entries
        .iter()
        .map(|e| e.label.chars().count())
        .max()
        .unwrap_or(0) as f64;
    let slant = longest * CHAR_WIDTH > slot - 6.0;
    for (i, e) in entries.iter().enumerate() {
        let x = centre(i);
        let placement = if slant {
            format!(r#"text-anchor="end" transform="rotate(-30 {x:.1} {LABEL_Y:.1})""#)
        } else {
            r#"text-anchor="middle""#.to_string()
        };
        out.push_str(&format!(
            r#"<text id="label-{i}" x="{x:.1}" y="{LABEL_Y:.1}" {placement}>{}</text>"#,
            esc(&e.label)
        ));
        out.push('\n');
    }

    out.push_str("</svg>\n");
    out
}

fn legend(out: &mut String) {
    let mut x = PLOT_LEFT;
    let y = 46.0;
    for status in [
        Status::Baseline,
        Status::Kept,
        Status::Reverted,
        Status::Undecided,
    ] {
        out.push_str(&format!(
            r#"<rect x="{x:.1}" y="{:.1}" width="12" height="12" {}/>"#,
            y - 10.0,
            status.paint()
        ));
        out.push_str(&format!(
            r#"<text x="{:.1}" y="{y:.1}">{}</text>"#,
            x + 16.0,
            status.word()
        ));
        out.push('\n');
        x += 16.0 + status.word().len() as f64 * CHAR_WIDTH + 18.0;
    }
    out.push_str(&format!(
        r#"<line x1="{x:.1}" y1="{:.1}" x2="{:.1}" y2="{:.1}" stroke="{BOUND_COLOUR}" stroke-width="1.5" stroke-dasharray="6 4"/>"#,
        y - 4.0,
        x + 20.0,
        y - 4.0
    ));
    out.push_str(&format!(
        r#"<text x="{:.1}" y="{y:.1}">client p99 bound</text>"#,
        x + 24.0
    ));
    out.push('\n');
}

/// Gridlines, tick labels, the axis lines and the rotated unit label of one panel.
fn axis(out: &mut String, id: &str, axis: Axis, top: f64, bottom: f64, unit: &str) {
    for (k, value) in axis.ticks().enumerate() {
        let y = axis.y(value, top, bottom);
        out.push_str(&format!(
            r#"<line x1="{PLOT_LEFT}" y1="{y:.1}" x2="{PLOT_RIGHT}" y2="{y:.1}" stroke="{GRID_COLOUR}"/>"#
        ));
        out.push_str(&format!(
            r#"<text id="{id}-tick-{k}" x="{:.1}" y="{y:.1}" text-anchor="end" dominant-baseline="middle">{}</text>"#,
            PLOT_LEFT - 6.0,
            axis.tick_label(value)
        ));
        out.push('\n');
    }
    out.push_str(&format!(
        r#"<line x1="{PLOT_LEFT}" y1="{top:.1}" x2="{PLOT_LEFT}" y2="{bottom:.1}" stroke="black"/>"#
    ));
    out.push_str(&format!(
        r#"<line x1="{PLOT_LEFT}" y1="{bottom:.1}" x2="{PLOT_RIGHT}" y2="{bottom:.1}" stroke="black"/>"#
    ));
    let mid = (top + bottom) / 2.0;
    out.push_str(&format!(
        r#"<text x="18" y="{mid:.1}" text-anchor="middle" transform="rotate(-90 18 {mid:.1})">{}</text>"#,
        esc(unit)
    ));
    out.push('\n');
}

/// Why an entry has no bar or point, where the bar or point would be.
fn note(out: &mut String, x: f64, y: f64, text: &str) {
    out.push_str(&format!(
        r#"<text x="{x:.1}" y="{y:.1}" text-anchor="middle" font-style="italic" fill="{NOTE_COLOUR}">{}</text>"#,
        esc(text)
    ));
    out.push('\n');
}

/// Text for XML content and attribute values. Control characters XML 1.0 forbids are dropped
/// (they can only come from odd names and would make the whole file unreadable).
pub(crate) fn esc(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            '\t' | '\n' | '\r' => out.push(' '),
            c if c < ' ' || c == '\u{FFFE}' || c == '\u{FFFF}' => {}
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tuning::record::tests::{measurement, operators_record};
    use crate::tuning::svg_check::{assert_well_formed, attr, content, ids, num, tag};

    /// The operator's record with a few awkward entries: interrupted, no recovery, undecided.
    fn mixed_record() -> TuningRecord {
        let mut r = operators_record();
        r.steps[1].measurement = Some(measurement(None, Some(19.0)));
        if let Some(m) = r.steps[2].measurement.as_mut() {
            m.interrupted = Some("Ctrl-C".into());
        }
        r.steps[3].decision = None;
        r
    }

    // ---- tests ----

    #[test]
    fn chart_is_well_formed_and_self_contained() {
        for record in [operators_record(), mixed_record()] {
            let svg = svg(&record);
            assert_well_formed(&svg);
            assert!(svg.starts_with("<svg xmlns=\"http://www.w3.org/2000/svg\""));
            assert!(svg.contains(r#"width="800" height="500""#), "{svg}");
            assert!(svg.contains("<title>Tuning record: prod-ceph-01</title>"));
            for banned in [
                "<script",
                "<style",
                "href",
                "url(",
                "@import",
                "<foreignObject",
            ] {
                assert!(!svg.contains(banned), "{banned} in {svg}");
            }
        }
    }

    #[test]
    fn one_bar_per_entry_with_a_rate() {
        assert_eq!(ids(&svg(&operators_record()), "bar"), vec![0, 1, 2, 3, 4]);

        let svg = svg(&mixed_record());
        // Step 2 had no recovery, step 3 was interrupted: no bar, a word instead.
        assert_eq!(ids(&svg, "bar"), vec![0, 1, 4]);
        assert!(svg.contains(">no recovery</text>"), "{svg}");
        assert!(svg.contains(">interrupted</text>"), "{svg}");

        // Taller bar for the faster step, all standing on the same axis line.
        let bar = |i: usize| tag(&svg, &format!("bar-{i}")).unwrap().to_string();
        let height = |i: usize| num(&bar(i), "height");
        assert!(height(4) > height(1) && height(1) > height(0));
        let foot = |i: usize| num(&bar(i), "y") + height(i);
        assert!((foot(0) - foot(4)).abs() < 0.2);
    }

    #[test]
    fn bound_line_sits_at_24_ms_on_the_axis() {
        let svg = svg(&operators_record());
        let bound = tag(&svg, "bound").unwrap();
        let y = num(bound, "y1");
        assert_eq!(num(bound, "y2"), y, "horizontal");
        assert!(attr(bound, "stroke-dasharray").contains(' '), "dashed");
        assert_eq!(attr(bound, "stroke"), BOUND_COLOUR);
        assert!(svg.contains(">bound 24 ms (2x baseline)</text>"), "{svg}");

        // Read the axis as a user would: two tick labels and their heights.
        let ticks: Vec<(f64, f64)> = ids(&svg, "p99-tick")
            .into_iter()
            .map(|k| {
                let id = format!("p99-tick-{k}");
                (
                    content(&svg, &id).parse().unwrap(),
                    num(tag(&svg, &id).unwrap(), "y"),
                )
            })
            .collect();
        let (v0, y0) = ticks[0];
        let (v1, y1) = ticks[ticks.len() - 1];
        assert_eq!(v0, 0.0, "axis starts at 0");
        // 34 ms is the slowest point: ticks every 10 up to 40.
        assert_eq!(
            ticks.iter().map(|t| t.0).collect::<Vec<_>>(),
            vec![0.0, 10.0, 20.0, 30.0, 40.0]
        );
        let expected = y0 + (24.0 - v0) / (v1 - v0) * (y1 - y0);
        assert!(
            (y - expected).abs() < 0.2,
            "bound at {y}, 24 ms at {expected}"
        );
    }

    #[test]
    fn bound_is_inside_the_panel_even_above_every_point() {
        let mut record = operators_record();
        record.steps.clear();
        let svg = svg(&record);
        let y = num(tag(&svg, "bound").unwrap(), "y1");
        assert!((P99_TOP..P99_BOTTOM).contains(&y), "{y}");
        let point = num(tag(&svg, "point-0").unwrap(), "cy");
        assert!(point > y, "12 ms is drawn below the 24 ms bound");
    }

    #[test]
    fn baseline_only_record_renders() {
        let mut record = operators_record();
        record.steps.clear();
        let svg = svg(&record);
        assert_well_formed(&svg);
        assert_eq!(ids(&svg, "bar"), vec![0]);
        assert_eq!(ids(&svg, "point"), vec![0]);
        assert_eq!(content(&svg, "label-0"), "baseline");
        assert!(!svg.contains("<polyline"), "one point, no line");
    }

    #[test]
    fn labels_are_present_and_escaped() {
        let mut record = operators_record();
        record.cluster.name = r#"prod "<&>" 01"#.into();
        record.steps[0].setting = "osd_weird<&>".into();
        let svg = svg(&record);
        assert_well_formed(&svg);
        assert!(svg.contains("<title>Tuning record: prod &quot;&lt;&amp;&gt;&quot; 01</title>"));
        assert_eq!(content(&svg, "label-1"), "weird&lt;&amp;&gt; 2");
        assert!(!svg.contains("<&>"));
        let labels: Vec<&str> = (0..5)
            .map(|i| content(&svg, &format!("label-{i}")))
            .collect();
        assert_eq!(
            labels,
            vec![
                "baseline",
                "weird&lt;&amp;&gt; 2",
                "max_backfills 4",
                "max_backfills 8",
                "recovery_sleep_hdd 0"
            ]
        );
        assert!(svg.contains(">recovery (obj/s)</text>"));
        assert!(svg.contains(">client p99 write (ms)</text>"));
        for word in [
            "baseline",
            "kept",
            "reverted",
            "undecided",
            "client p99 bound",
        ] {
            assert!(svg.contains(&format!(">{word}</text>")), "legend {word}");
        }
    }

    #[test]
    fn points_follow_the_steps_in_order() {
        let svg = svg(&operators_record());
        assert_eq!(ids(&svg, "point"), vec![0, 1, 2, 3, 4]);
        let point = |i: usize| {
            let t = tag(&svg, &format!("point-{i}")).unwrap();
            (num(t, "cx"), num(t, "cy"))
        };
        let points: Vec<(f64, f64)> = (0..5).map(point).collect();
        // Left to right in step order, each under its own label.
        for (i, w) in points.windows(2).enumerate() {
            assert!(w[0].0 < w[1].0, "point {i} left of point {}", i + 1);
        }
        for (i, p) in points.iter().enumerate() {
            let label = tag(&svg, &format!("label-{i}")).unwrap();
            assert!((num(label, "x") - p.0).abs() < 0.2);
        }
        // 12, 14, 19, 34, 21 ms: higher latency is higher on the page (smaller y).
        let cy: Vec<f64> = points.iter().map(|p| p.1).collect();
        assert!(
            cy[0] > cy[1] && cy[1] > cy[2] && cy[2] > cy[4] && cy[4] > cy[3],
            "{cy:?}"
        );
        // The line joins them in the same order.
        let at = svg.find("<polyline points=\"").unwrap() + "<polyline points=\"".len();
        let line: Vec<String> = svg[at..at + svg[at..].find('"').unwrap()]
            .split(' ')
            .map(String::from)
            .collect();
        let expected: Vec<String> = points
            .iter()
            .map(|(x, y)| format!("{x:.1},{y:.1}"))
            .collect();
        assert_eq!(line, expected);
    }

    #[test]
    fn missing_latency_breaks_the_line() {
        let svg = svg(&mixed_record());
        // Step 3 was interrupted: two runs of points, 0-1-2 and 4 alone (not drawn as a line).
        assert_eq!(ids(&svg, "point"), vec![0, 1, 2, 4]);
        assert_eq!(svg.matches("<polyline").count(), 1);
    }

    #[test]
    fn decisions_are_told_apart() {
        let mut record = mixed_record();
        record.steps[1].measurement = Some(measurement(Some(610.0), Some(19.0)));
        record.steps[2].measurement = Some(measurement(Some(640.0), Some(34.0)));
        let svg = svg(&record);
        let paint = |i: usize| {
            let t = tag(&svg, &format!("bar-{i}")).unwrap();
            (attr(t, "fill"), t.contains("stroke-dasharray"))
        };
        let (baseline, kept1, kept2, reverted, undecided) =
            (paint(0), paint(1), paint(2), paint(3), paint(4));
        assert_eq!(kept1, kept2);
        assert_eq!(reverted.0, REVERTED_COLOUR);
        assert_ne!(baseline.0, kept1.0);
        assert_ne!(kept1.0, reverted.0);
        assert_eq!(undecided, ("white".to_string(), true), "outlined");
    }

    #[test]
    fn no_bound_without_a_baseline_p99() {
        let mut record = operators_record();
        record.baseline.measurement = measurement(Some(240.0), None);
        let svg = svg(&record);
        assert_well_formed(&svg);
        assert!(tag(&svg, "bound").is_none());
        assert!(svg.contains("no bound: the baseline has no client p99 write"));
    }

    #[test]
    fn axes_use_nice_ticks_from_zero() {
        let a = Axis::covering(34.0);
        assert_eq!((a.max, a.step), (40.0, 10.0));
        let a = Axis::covering(700.0);
        assert_eq!((a.max, a.step), (800.0, 200.0));
        let a = Axis::covering(0.9);
        assert!(
            (a.max - 1.0).abs() < 1e-9 && (a.step - 0.5).abs() < 1e-9,
            "{a:?}"
        );
        assert_eq!(a.tick_label(0.5), "0.5");
        let a = Axis::covering(0.0);
        assert_eq!((a.max, a.step), (1.0, 0.5));
        assert_eq!(
            Axis::covering(24.0).ticks().collect::<Vec<_>>(),
            vec![0.0, 10.0, 20.0, 30.0]
        );
        for raw in [0.03, 0.7, 1.0, 3.3, 42.0, 999.0] {
            let step = nice_step(raw);
            let mantissa = step / 10f64.powf(step.log10().floor());
            assert!(
                [1.0, 2.0, 5.0, 10.0]
                    .iter()
                    .any(|m| (mantissa - m).abs() < 1e-9),
                "{raw} -> {step}"
            );
            assert!(step >= raw);
        }
    }

    #[test]
    fn many_steps_slant_their_labels() {
        let mut record = operators_record();
        let template = record.steps[0].clone();
        for n in 5..=12 {
            let mut s = template.clone();
            s.number = n;
            s.setting = "osd_recovery_max_active_hdd".into();
            s.value = n.to_string();
            record.steps.push(s);
        }
        let svg = svg(&record);
        assert_well_formed(&svg);
        assert!(tag(&svg, "label-12").unwrap().contains("rotate(-30"));
        let wide = svg_for_baseline_only();
        assert!(!tag(&wide, "label-0").unwrap().contains("rotate"));
    }

    fn svg_for_baseline_only() -> String {
        let mut record = operators_record();
        record.steps.clear();
        svg(&record)
    }
}
