//! `experiment --chart FILE.svg`: the client's write p99 per window over time, one line per row,
//! the bound across, and the enforcer's actions marked where they happened on the enforced row's
//! clock. Readable without the table: the legend carries each row's window summary. The SVG is
//! self-contained (no scripts, fonts, stylesheets or links); hovering a point or a mark shows
//! its numbers (SVG `<title>`, no script needed).
//!
//! The y axis is logarithmic: a recovery's first seconds can be 50x the bound while the question
//! is what happens around the bound, and both must be legible.

use serde_json::Value;

use super::windows::{clock, reaction, within_fraction, worst_p99, Reaction, RowWindow};
use super::ExperimentResult;
use crate::tuning::chart::esc;
use crate::units::fmt_ms;

const WIDTH: f64 = 900.0;
const LEFT: f64 = 80.0;
const RIGHT: f64 = 870.0;
/// The band of action labels starts here, under the subtitle; the plot under it.
const BAND_TOP: f64 = 58.0;
/// One line of action labels.
const LABEL_ROW: f64 = 13.0;
/// At most this many lines of action labels; more share the emptiest line.
const LABEL_ROWS: usize = 6;
/// Rough width of a character of an action label (font-size 10).
const LABEL_CHAR: f64 = 6.0;
const PLOT_HEIGHT: f64 = 300.0;
const LEGEND_LINE: f64 = 18.0;
/// Marks closer than this (px) share one label: an ESCALATE to the pause and its first PAUSE
/// come in the same cycle.
const MARK_GAP: f64 = 14.0;

const BOUND_COLOUR: &str = "#d32f2f";
const MARK_COLOUR: &str = "#6a1b9a";
const GRID_COLOUR: &str = "#e0e0e0";
const NOTE_COLOUR: &str = "#666666";

/// The enforcer's decisions that change something on the cluster (a rung, the backfill lever's
/// level, the pause, the operator's values back). The lever's own releases and holds
/// (`BACKFILL`) are not marked: they follow its level, one every minute or so, and would bury
/// the changes that say why.
const MARKED: [&str; 10] = [
    "THROTTLE",
    "ESCALATE",
    "DESCEND",
    "PAUSE",
    "UNPAUSE",
    "BACKFILL_LIMIT",
    "RESTORE",
    "SUSPEND",
    "RESUME",
    "BLIND",
];

/// Decisions whose record is a note (`performed: false` in enforce mode too) because what
/// carries them out is a record of its own: an ESCALATE to the lever or the pause (its holds
/// or its first PAUSE follow), a change of the lever's level (its holds, releases or the ops
/// per PG follow).
const DECIDED_IN_NOTES: [&str; 2] = ["ESCALATE", "BACKFILL_LIMIT"];

/// Each row's colour: the enforced row black and thickest, the baseline grey.
fn colour(row: &str) -> (&'static str, f64) {
    match row {
        "no-recovery" => ("#9e9e9e", 1.5),
        "balanced" => ("#1f77b4", 1.5),
        "high_client_ops" => ("#2ca02c", 1.5),
        "high_recovery_ops" => ("#ff7f0e", 1.5),
        "enforced" => ("#000000", 2.5),
        "enforced-pause-only" => ("#9467bd", 2.0),
        "enforced-levels" => ("#d62728", 2.5),
        _ => ("#8c564b", 1.5),
    }
}

/// An enforcer action on the enforced row's clock.
#[derive(Debug, Clone, PartialEq)]
pub struct Mark {
    /// Seconds from the enforced row's fio start.
    pub at: f64,
    /// E.g. `ESCALATE rung 2`, `PAUSE 30%`.
    pub label: String,
    /// The decision's message, for the tooltip.
    pub message: String,
}

/// The actions among the decisions (oldest first) at or after `fio_started_at` (Unix seconds),
/// with their times from it. Pure.
pub fn marks(decisions: &[Value], fio_started_at: f64) -> Vec<Mark> {
    decisions
        .iter()
        .filter_map(|d| {
            let event = d.get("event")?.as_str()?;
            let performed = d.get("performed").and_then(Value::as_bool) != Some(false);
            let enforced = d.get("mode").and_then(Value::as_str) != Some("observe");
            if !MARKED.contains(&event)
                || !(performed || enforced && DECIDED_IN_NOTES.contains(&event))
            {
                return None;
            }
            let at = d.get("time")?.as_f64().filter(|t| t.is_finite())? - fio_started_at;
            if at < 0.0 {
                return None; // before fio ran: nothing of the row's windows to relate it to
            }
            let message = d
                .get("message")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string();
            Some(Mark {
                at,
                label: mark_label(event, &message)?,
                message,
            })
        })
        .collect()
}

/// The event, with where it went when its message says: `ESCALATE rung 3`, `PAUSE 40%`,
/// `N 1->2` and `ops 1->4` for the lever's level. `None`: a BACKFILL_LIMIT line that changes
/// nothing (a release waiting, a PG no longer held).
fn mark_label(event: &str, message: &str) -> Option<String> {
    if event == "BACKFILL_LIMIT" {
        return lever_label(message);
    }
    Some(event_label(event, message))
}

/// `N 1->2` (at most 1 -> 2 PGs backfilling at once), `ops 1->4` (the recovery ops per PG),
/// `lever ended`, `lever + PAUSE` (the lever joining the pause).
fn lever_label(message: &str) -> Option<String> {
    let pair = |key: &str| {
        let rest = &message[message.find(key)? + key.len()..];
        let num = |s: &str| -> Option<(String, usize)> {
            let n: String = s.chars().take_while(char::is_ascii_digit).collect();
            let len = n.len();
            (!n.is_empty()).then_some((n, len))
        };
        let (from, len) = num(rest)?;
        let rest = rest[len..].strip_prefix(" -> ")?;
        let (to, _) = num(rest)?;
        Some(format!("{from}->{to}"))
    };
    if message.contains("BACKFILL_LIMIT ended") {
        Some("lever ended".to_string())
    } else if message.contains("joins the pause") {
        Some("lever + PAUSE".to_string())
    } else if let Some(p) = pair("recovery ops per backfilling PG ") {
        Some(format!("ops {p}"))
    } else {
        pair("at most ").map(|p| format!("N {p}"))
    }
}

fn event_label(event: &str, message: &str) -> String {
    let after = |key: &str| {
        message
            .find(key)
            .map(|i| &message[i + key.len()..])
            .and_then(|rest| {
                let rest = rest.strip_prefix("rung ")?;
                let n: String = rest.chars().take_while(char::is_ascii_digit).collect();
                (!n.is_empty()).then(|| format!("{event} rung {n}"))
            })
    };
    match event {
        "ESCALATE" => after("escalating to ").unwrap_or_else(|| event.to_string()),
        "DESCEND" => after("-> ").unwrap_or_else(|| event.to_string()),
        "PAUSE" => message
            .find("(share ")
            .and_then(|i| {
                let n: String = message[i + 7..]
                    .chars()
                    .take_while(char::is_ascii_digit)
                    .collect();
                (!n.is_empty()).then(|| format!("PAUSE {n}%"))
            })
            .unwrap_or_else(|| event.to_string()),
        _ => event.to_string(),
    }
}

/// A logarithmic y axis, in seconds, from and to a 1, 2 or 5 of a decade around the data.
#[derive(Debug, Clone, Copy, PartialEq)]
struct LogAxis {
    lo: f64,
    hi: f64,
}

/// Relative slack when comparing tick values (decades come from `powf`, not exact).
const EPS: f64 = 1e-9;

fn decade(v: f64) -> f64 {
    10f64.powf(v.log10().floor())
}

/// The largest 1, 2 or 5 x 10^k at most `v`.
fn snap_down(v: f64) -> f64 {
    let d = decade(v);
    [5.0, 2.0, 1.0]
        .into_iter()
        .map(|m| m * d)
        .find(|t| *t <= v * (1.0 + EPS))
        .unwrap_or(d)
}

/// The smallest 1, 2 or 5 x 10^k at least `v`.
fn snap_up(v: f64) -> f64 {
    let d = decade(v);
    [1.0, 2.0, 5.0, 10.0]
        .into_iter()
        .map(|m| m * d)
        .find(|t| *t >= v * (1.0 - EPS))
        .unwrap_or(10.0 * d)
}

impl LogAxis {
    fn covering(values: impl Iterator<Item = f64>) -> LogAxis {
        let (min, max) = values
            .filter(|v| v.is_finite() && *v > 0.0)
            .fold((f64::INFINITY, 0.0f64), |(lo, hi), v| {
                (lo.min(v), hi.max(v))
            });
        if !min.is_finite() {
            return LogAxis { lo: 1e-3, hi: 1.0 };
        }
        let lo = snap_down(min);
        let mut hi = snap_up(max);
        if hi <= lo * (1.0 + EPS) {
            hi = snap_up(lo * 1.5);
        }
        LogAxis { lo, hi }
    }

    /// The y coordinate of `v` in a plot spanning `top..bottom`.
    fn y(self, v: f64, top: f64, bottom: f64) -> f64 {
        let v = v.clamp(self.lo, self.hi);
        bottom - (v / self.lo).log10() / (self.hi / self.lo).log10() * (bottom - top)
    }

    /// 1, 2 and 5 of each decade, from `lo` to `hi`.
    fn ticks(self) -> Vec<f64> {
        let mut out = Vec::new();
        let mut d = decade(self.lo);
        while d <= self.hi * (1.0 + EPS) {
            for m in [1.0, 2.0, 5.0] {
                let v = m * d;
                if v >= self.lo * (1.0 - EPS) && v <= self.hi * (1.0 + EPS) {
                    out.push(v);
                }
            }
            d *= 10.0;
        }
        out
    }
}

/// "20 ms", "1.5 ms", "2 s".
fn latency_tick(seconds: f64) -> String {
    if seconds >= 1.0 {
        format!("{} s", trim_number(seconds))
    } else {
        format!("{} ms", trim_number(seconds * 1000.0))
    }
}

fn trim_number(v: f64) -> String {
    let s = format!("{v:.3}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// Seconds per tick on the time axis: about 8 ticks, on a round number of seconds.
fn time_step(max: f64) -> f64 {
    const STEPS: [f64; 10] = [
        5.0, 10.0, 15.0, 30.0, 60.0, 120.0, 300.0, 600.0, 900.0, 1800.0,
    ];
    STEPS
        .into_iter()
        .find(|s| max / s <= 10.0)
        .unwrap_or(3600.0)
}

/// The chart as a standalone SVG document. Pure.
pub fn svg(result: &ExperimentResult) -> String {
    let bound = result.bound_seconds.filter(|b| b.is_finite() && *b > 0.0);
    let enforced = result
        .rows
        .iter()
        .find(|r| r.row == super::RowKind::Enforced.name() && !r.windows.is_empty());
    let marks = match enforced.and_then(|r| r.fio_started_at) {
        Some(start) => marks(
            &result
                .decisions_of(&super::RowKind::Enforced.name())
                .cloned()
                .collect::<Vec<_>>(),
            start,
        ),
        None => Vec::new(),
    };
    let window_end = result
        .rows
        .iter()
        .filter_map(|r| r.windows.last().map(|w| w.end_seconds))
        .fold(0.0f64, f64::max);
    // Actions a little after the last window (RESTORE once the recovery is seen done) are kept.
    let marks: Vec<Mark> = marks
        .into_iter()
        .filter(|m| m.at <= window_end + 60.0)
        .collect();
    let t_max = marks
        .iter()
        .map(|m| m.at)
        .fold(window_end, f64::max)
        .max(1.0);
    let step = time_step(t_max);
    let t_axis = (t_max / step).ceil() * step;
    let x = |t: f64| LEFT + t / t_axis * (RIGHT - LEFT);
    let axis = LogAxis::covering(
        result
            .rows
            .iter()
            .flat_map(|r| {
                r.windows
                    .iter()
                    .flat_map(|w| [w.p99_seconds, w.enforcer_p99_seconds])
                    .flatten()
            })
            .chain(bound),
    );

    // The actions' labels, in lines above the plot: each on the first line where it does not
    // run into the label before it, its dotted line going down through the plot.
    let mut groups: Vec<(f64, Vec<&Mark>)> = Vec::new();
    for m in &marks {
        match groups.last_mut() {
            Some((gx, members)) if x(m.at) - *gx < MARK_GAP => members.push(m),
            _ => groups.push((x(m.at), vec![m])),
        }
    }
    let mut line_ends: Vec<f64> = Vec::new();
    let placed: Vec<(f64, Vec<&Mark>, String, usize, bool)> = groups
        .into_iter()
        .map(|(gx, members)| {
            let label = members
                .iter()
                .map(|m| m.label.as_str())
                .collect::<Vec<_>>()
                .join(" + ");
            let width = label.chars().count() as f64 * LABEL_CHAR;
            // Near the right edge the label ends at its line instead of starting there.
            let leftward = gx + 3.0 + width > WIDTH - 4.0;
            let (from, to) = if leftward {
                (gx - 3.0 - width, gx)
            } else {
                (gx, gx + 3.0 + width)
            };
            let line = match line_ends.iter().position(|end| *end + 4.0 <= from) {
                Some(l) => l,
                None if line_ends.len() < LABEL_ROWS => {
                    line_ends.push(f64::NEG_INFINITY);
                    line_ends.len() - 1
                }
                None => line_ends
                    .iter()
                    .enumerate()
                    .min_by(|a, b| a.1.total_cmp(b.1))
                    .map_or(0, |(l, _)| l),
            };
            line_ends[line] = to;
            (gx, members, label, line, leftward)
        })
        .collect();
    let top = BAND_TOP + line_ends.len() as f64 * LABEL_ROW + 10.0;
    let bottom = top + PLOT_HEIGHT;
    let legend_top = bottom + 60.0;
    // The enforcer's own readings, where the result has them (recorded since run J).
    let seen = enforced.filter(|r| r.has_enforcer_readings());
    let legend_lines =
        result.rows.len() + 1 + usize::from(!marks.is_empty()) + usize::from(seen.is_some());
    let height = legend_top + LEGEND_LINE * (legend_lines - 1) as f64 + 12.0;
    let mut out = String::new();
    out.push_str(&format!(
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" viewBox="0 0 {WIDTH} {height}" font-family="sans-serif" font-size="11">"#
    ));
    out.push('\n');
    out.push_str("<title>Experiment: client write p99 per window</title>\n");
    out.push_str(&format!(
        r#"<rect x="0" y="0" width="{WIDTH}" height="{height}" fill="white"/>"#
    ));
    out.push('\n');
    out.push_str(&format!(
        r#"<text x="{LEFT}" y="24" font-size="15" font-weight="bold">Client write p99 per {}-s window, per row</text>"#,
        trim_number(result.window_seconds)
    ));
    out.push('\n');
    let subtitle = match (result.baseline_p99_seconds, bound) {
        (Some(b), Some(bound)) => format!(
            "bound {} = {}x the no-recovery p99 ({}); each row's clock starts with its fio run (the recovery starts with it)",
            fmt_ms(bound),
            result.multiplier,
            fmt_ms(b)
        ),
        _ => "no bound: the no-recovery row has no p99; each row's clock starts with its fio run".to_string(),
    };
    out.push_str(&format!(
        r#"<text x="{LEFT}" y="44" fill="{NOTE_COLOUR}">{}</text>"#,
        esc(&subtitle)
    ));
    out.push('\n');

    // Frame, grid and ticks.
    for (k, v) in axis.ticks().into_iter().enumerate() {
        let y = axis.y(v, top, bottom);
        out.push_str(&format!(
            r#"<line x1="{LEFT}" y1="{y:.1}" x2="{RIGHT}" y2="{y:.1}" stroke="{GRID_COLOUR}"/><text id="y-tick-{k}" x="{:.1}" y="{y:.1}" text-anchor="end" dominant-baseline="middle">{}</text>"#,
            LEFT - 6.0,
            latency_tick(v)
        ));
        out.push('\n');
    }
    let mut k = 0;
    let mut t = 0.0;
    while t <= t_axis + 1e-9 {
        let xt = x(t);
        out.push_str(&format!(
            r#"<line x1="{xt:.1}" y1="{top}" x2="{xt:.1}" y2="{bottom}" stroke="{GRID_COLOUR}"/><text id="x-tick-{k}" x="{xt:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
            bottom + 16.0,
            clock(t)
        ));
        out.push('\n');
        k += 1;
        t += step;
    }
    out.push_str(&format!(
        r#"<line x1="{LEFT}" y1="{top}" x2="{LEFT}" y2="{bottom}" stroke="black"/><line x1="{LEFT}" y1="{bottom}" x2="{RIGHT}" y2="{bottom}" stroke="black"/>"#
    ));
    out.push('\n');
    let mid = (top + bottom) / 2.0;
    out.push_str(&format!(
        r#"<text x="20" y="{mid:.1}" text-anchor="middle" transform="rotate(-90 20 {mid:.1})">client write p99 (log scale)</text>"#
    ));
    out.push('\n');
    out.push_str(&format!(
        r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">time since the row's fio started (m:ss)</text>"#,
        (LEFT + RIGHT) / 2.0,
        bottom + 34.0
    ));
    out.push('\n');

    // The bound, under the lines.
    if let Some(b) = bound {
        let y = axis.y(b, top, bottom);
        out.push_str(&format!(
            r#"<line id="bound" x1="{LEFT}" y1="{y:.1}" x2="{RIGHT}" y2="{y:.1}" stroke="{BOUND_COLOUR}" stroke-width="1.5" stroke-dasharray="6 4"/>"#
        ));
        out.push_str(&format!(
            r#"<text x="{:.1}" y="{:.1}" text-anchor="end" fill="{BOUND_COLOUR}">bound {}</text>"#,
            RIGHT - 4.0,
            y - 4.0,
            esc(&fmt_ms(b))
        ));
        out.push('\n');
    }

    // The enforcer's actions: a dotted line each, from its label down through the plot. Drawn
    // right to left, each label with a white halo: a later action's line, which goes down
    // through the label lines below its own, passes under the earlier labels.
    for (i, (gx, members, label, line, leftward)) in placed.iter().enumerate().rev() {
        let tip = members
            .iter()
            .map(|m| format!("{} {}", clock(m.at), m.message))
            .collect::<Vec<_>>()
            .join(" | ");
        let ty = BAND_TOP + LABEL_ROW * (*line as f64 + 1.0);
        let (tx, anchor) = if *leftward {
            (gx - 3.0, "end")
        } else {
            (gx + 3.0, "start")
        };
        out.push_str(&format!(
            r#"<g id="mark-{i}"><title>{}</title><line x1="{gx:.1}" y1="{:.1}" x2="{gx:.1}" y2="{bottom}" stroke="{MARK_COLOUR}" stroke-width="1" stroke-dasharray="2 3"/><text x="{tx:.1}" y="{ty:.1}" text-anchor="{anchor}" fill="{MARK_COLOUR}" font-size="10" stroke="white" stroke-width="3" paint-order="stroke">{}</text></g>"#,
            esc(&tip),
            ty - 9.0,
            esc(label)
        ));
        out.push('\n');
    }

    // A window's value at the middle of its time span.
    let at = |w: &RowWindow, p: f64| {
        (
            x((w.start_seconds + w.end_seconds) / 2.0),
            axis.y(p, top, bottom),
        )
    };
    // One line per row; a window with no write breaks it (no p99 is not a small p99) and is
    // marked on the time axis.
    for (i, row) in result.rows.iter().enumerate() {
        let (stroke, width) = colour(&row.row);
        let point = |w: &RowWindow| w.p99_seconds.map(|p| at(w, p));
        let points: Vec<Option<(f64, f64)>> = row.windows.iter().map(point).collect();
        for (segment, coords) in polyline_points(&points).into_iter().enumerate() {
            let id = if segment == 0 {
                format!("line-{i}")
            } else {
                format!("seg-{i}-{segment}")
            };
            out.push_str(&format!(
                r#"<polyline id="{id}" points="{coords}" fill="none" stroke="{stroke}" stroke-width="{width}" stroke-linejoin="round"/>"#
            ));
            out.push('\n');
        }
        for w in &row.windows {
            let span = format!(
                "{}, {}-{}",
                row.label,
                clock(w.start_seconds),
                clock(w.end_seconds)
            );
            match point(w) {
                Some((px, py)) => out.push_str(&format!(
                    r#"<circle cx="{px:.1}" cy="{py:.1}" r="2.5" fill="{stroke}"><title>{}: p99 {} over {} writes</title></circle>"#,
                    esc(&span),
                    esc(&w.p99_seconds.map_or_else(String::new, fmt_ms)),
                    w.writes
                )),
                None => {
                    let px = x((w.start_seconds + w.end_seconds) / 2.0);
                    out.push_str(&format!(
                        r#"<text x="{px:.1}" y="{:.1}" text-anchor="middle" fill="{stroke}" font-weight="bold">×<title>{}: no write completed (no p99)</title></text>"#,
                        bottom - 4.0,
                        esc(&span)
                    ));
                }
            }
        }
        out.push('\n');
    }

    // What the enforcer judged by, dashed under the client's line: where they part, it acted on
    // its own reading (run I's windows over the bound were not over by its reckoning).
    let seen_colour = seen.map(|r| colour(&r.row).0);
    if let (Some(row), Some(stroke)) = (seen, seen_colour) {
        let points: Vec<Option<(f64, f64)>> = row
            .windows
            .iter()
            .map(|w| w.enforcer_p99_seconds.map(|p| at(w, p)))
            .collect();
        for (k, coords) in polyline_points(&points).into_iter().enumerate() {
            out.push_str(&format!(
                r#"<polyline id="seen-{k}" points="{coords}" fill="none" stroke="{stroke}" stroke-width="1" stroke-dasharray="3 3" opacity="0.8"/>"#
            ));
            out.push('\n');
        }
    }

    // Legend: what each line is, and what it says against the bound.
    let mut y = legend_top;
    for (i, row) in result.rows.iter().enumerate() {
        let (stroke, width) = colour(&row.row);
        out.push_str(&legend_entry(
            y,
            &format!(r#"stroke="{stroke}" stroke-width="{width}""#),
            &format!(r#" id="legend-{i}""#),
            &esc(&legend_text(row, bound)),
        ));
        y += LEGEND_LINE;
    }
    if let Some(stroke) = seen_colour {
        out.push_str(&legend_entry(
            y,
            &format!(r#"stroke="{stroke}" stroke-width="1" stroke-dasharray="3 3""#),
            "",
            "what the enforcer saw in each window: its own p99 (the OSDs' write-latency histogram), which it acted on",
        ));
        y += LEGEND_LINE;
    }
    out.push_str(&legend_entry(
        y,
        &format!(r#"stroke="{BOUND_COLOUR}" stroke-width="1.5" stroke-dasharray="6 4""#),
        "",
        "the bound; × a window in which no write completed (no p99, not within the bound)",
    ));
    if !marks.is_empty() {
        y += LEGEND_LINE;
        out.push_str(&format!(
            r#"<line x1="{:.1}" y1="{:.1}" x2="{:.1}" y2="{:.1}" stroke="{MARK_COLOUR}" stroke-dasharray="2 3"/><text x="{:.1}" y="{y:.1}">the enforcer's actions during the enforced row (its rung changes, pause shares and restore), on that row's clock</text>"#,
            LEFT + 12.0,
            y - 12.0,
            LEFT + 12.0,
            y + 2.0,
            LEFT + 30.0
        ));
        out.push('\n');
    }
    out.push_str("</svg>\n");
    out
}

/// One legend line at `y`: a short stroke drawn as `stroke` (its SVG attributes) and the text,
/// already escaped; `text_attrs` goes into the text element (e.g. its id).
fn legend_entry(y: f64, stroke: &str, text_attrs: &str, text: &str) -> String {
    format!(
        r#"<line x1="{LEFT}" y1="{:.1}" x2="{:.1}" y2="{:.1}" {stroke}/><text{text_attrs} x="{:.1}" y="{y:.1}">{text}</text>"#,
        y - 4.0,
        LEFT + 24.0,
        y - 4.0,
        LEFT + 30.0
    ) + "\n"
}

/// A polyline's `points` per unbroken run: a window with no value breaks the line (no p99 is
/// not a small p99).
fn polyline_points(points: &[Option<(f64, f64)>]) -> Vec<String> {
    points
        .split(Option::is_none)
        .filter(|r| !r.is_empty())
        .map(|run| {
            run.iter()
                .flatten()
                .map(|(px, py)| format!("{px:.1},{py:.1}"))
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect()
}

/// "enforced (2x): 83% of 18 windows within the bound, worst 420 ms, reaction 40s".
fn legend_text(row: &super::ExperimentRow, bound: Option<f64>) -> String {
    let w = &row.windows;
    if w.is_empty() {
        return format!(
            "{}: no windows ({})",
            row.label,
            row.windows_missing.as_deref().unwrap_or("not measured")
        );
    }
    let mut parts = Vec::new();
    if let Some(b) = bound {
        if let Some(f) = within_fraction(w, b) {
            parts.push(format!(
                "{:.0}% of {} windows within the bound",
                f * 100.0,
                w.len()
            ));
        }
    } else {
        parts.push(format!("{} windows", w.len()));
    }
    if let Some(worst) = worst_p99(w) {
        parts.push(format!("worst {}", fmt_ms(worst)));
    }
    if row.row == super::RowKind::Enforced.name() {
        if let Some(b) = bound {
            match reaction(w, b) {
                r @ Reaction::Back { .. } => parts.push(format!("reaction {}", r.cell())),
                Reaction::NotBack { .. } => parts.push("not back within the bound".to_string()),
                Reaction::NoBreach => parts.push("never over the bound".to_string()),
            }
        }
    }
    format!("{}: {}", row.label, parts.join(", "))
}

#[cfg(test)]
mod tests;
