//! A row's client write p99 per window, and what it says against the bound: the share of
//! windows within it, the worst window, and how long the enforcer took to bring a breach back.
//! Pure functions over the windows fio reported (see [`crate::fio::write_windows`]).

use serde::{Deserialize, Serialize};

use crate::enforcer::levels::list::OPERATORS_LEVEL;
use crate::fio::WriteWindow;
use crate::units::{fmt_ms, fmt_secs};

/// Windows in a row within the bound that count as "back within it".
pub const BACK_WITHIN: usize = 3;

/// One window of a row, its times from fio's start.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RowWindow {
    pub start_seconds: f64,
    pub end_seconds: f64,
    /// Writes completed in the window.
    pub writes: u64,
    /// Their p99; `None` (JSON null) when no write completed: no p99, and not within the bound.
    pub p99_seconds: Option<f64>,
    /// The enforcer's own p99 as it read last inside the window (its
    /// `ceph_recovery_budget_p99_seconds`: the OSDs' write-latency histogram over its latency
    /// window), beside the client's: where they differ, the enforcer acted on the OSD side's.
    /// Enforced row only; absent when not read (and in results recorded before it existed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enforcer_p99_seconds: Option<f64>,
}

impl RowWindow {
    /// Has a p99, and it is at most the bound.
    pub fn within(&self, bound: f64) -> bool {
        self.p99_seconds.is_some_and(|p| p <= bound)
    }

    pub fn over(&self, bound: f64) -> bool {
        self.p99_seconds.is_some_and(|p| p > bound)
    }
}

/// fio's start (Unix seconds) and the windows with times from it. `None` for no windows.
pub fn from_fio(windows: &[WriteWindow]) -> Option<(f64, Vec<RowWindow>)> {
    let start = windows.first()?.start;
    let row = windows
        .iter()
        .map(|w| RowWindow {
            start_seconds: round_ms(w.start - start),
            end_seconds: round_ms(w.end - start),
            writes: w.writes,
            p99_seconds: w.p99_seconds,
            enforcer_p99_seconds: None,
        })
        .collect();
    Some((start, row))
}

/// Gives each window the enforcer's p99 read last inside it. `samples` are (Unix seconds, p99)
/// in the order read; the enforcer's window trails its reading, so the last one inside fio's
/// window covers nearly the same seconds.
pub fn attach_enforcer_p99(windows: &mut [RowWindow], fio_started_at: f64, samples: &[(f64, f64)]) {
    for w in windows.iter_mut() {
        let (from, to) = (
            fio_started_at + w.start_seconds,
            fio_started_at + w.end_seconds,
        );
        w.enforcer_p99_seconds = samples
            .iter()
            .rev()
            .find(|(t, p)| *t > from && *t <= to && p.is_finite() && *p >= 0.0)
            .map(|(_, p)| *p);
    }
}

/// fio stamps its reports to the millisecond; differences of Unix times in f64 are not exact.
fn round_ms(seconds: f64) -> f64 {
    (seconds * 1000.0).round() / 1000.0
}

/// The fraction (0..1) of the windows whose p99 is at most the bound; a window with no write
/// has no p99 and counts as not within. `None` when there are no windows.
pub fn within_fraction(windows: &[RowWindow], bound: f64) -> Option<f64> {
    (!windows.is_empty())
        .then(|| windows.iter().filter(|w| w.within(bound)).count() as f64 / windows.len() as f64)
}

/// The highest window p99; `None` when no window has one.
pub fn worst_p99(windows: &[RowWindow]) -> Option<f64> {
    windows
        .iter()
        .filter_map(|w| w.p99_seconds)
        .fold(None, |m, p| Some(m.map_or(p, |m: f64| m.max(p))))
}

/// How a row came back within the bound after its first window over it.
#[derive(Debug, Clone, PartialEq)]
pub enum Reaction {
    /// No window was over the bound.
    NoBreach,
    /// From the start of the first window over the bound to the start of the first of
    /// [`BACK_WITHIN`] consecutive windows within it.
    Back {
        first_over: f64,
        first_over_p99: f64,
        back_at: f64,
    },
    /// Over the bound at `first_over`, and never [`BACK_WITHIN`] windows in a row within it
    /// after that (a window with no write breaks the run: its latency is unknown).
    NotBack {
        first_over: f64,
        first_over_p99: f64,
    },
}

impl Reaction {
    pub fn seconds(&self) -> Option<f64> {
        match self {
            Reaction::Back {
                first_over,
                back_at,
                ..
            } => Some(round_ms(back_at - first_over)),
            _ => None,
        }
    }

    /// The table's cell.
    pub fn cell(&self) -> String {
        match self {
            Reaction::NoBreach => "no breach".to_string(),
            Reaction::Back { .. } => self.seconds().map_or_else(String::new, fmt_secs),
            Reaction::NotBack { .. } => "not back".to_string(),
        }
    }

    /// One sentence for the notes.
    pub fn explain(&self) -> String {
        match self {
            Reaction::NoBreach => "no window was over the bound".to_string(),
            Reaction::Back {
                first_over,
                first_over_p99,
                back_at,
            } => format!(
                "first window over the bound at {} (p99 {}); back within it ({BACK_WITHIN} windows in a row) from {}: reaction {}",
                clock(*first_over),
                fmt_ms(*first_over_p99),
                clock(*back_at),
                self.seconds().map_or_else(String::new, fmt_secs)
            ),
            Reaction::NotBack {
                first_over,
                first_over_p99,
            } => format!(
                "first window over the bound at {} (p99 {}); never {BACK_WITHIN} windows in a row within it afterwards",
                clock(*first_over),
                fmt_ms(*first_over_p99)
            ),
        }
    }
}

/// From the first window over the bound to the first of [`BACK_WITHIN`] consecutive windows
/// back within it.
pub fn reaction(windows: &[RowWindow], bound: f64) -> Reaction {
    let Some(first) = windows.iter().position(|w| w.over(bound)) else {
        return Reaction::NoBreach;
    };
    let first_over = windows[first].start_seconds;
    let first_over_p99 = windows[first].p99_seconds.unwrap_or(f64::NAN);
    let after = &windows[first + 1..];
    match after
        .windows(BACK_WITHIN)
        .find(|run| run.iter().all(|w| w.within(bound)))
    {
        Some(run) => Reaction::Back {
            first_over,
            first_over_p99,
            back_at: run[0].start_seconds,
        },
        None => Reaction::NotBack {
            first_over,
            first_over_p99,
        },
    }
}

/// The windows a level of the level controller (`serve --enforcer.controller levels`) was in
/// force for, in one row: what each level did to the clients, read from the windows.
#[derive(Debug, Clone, PartialEq)]
pub struct LevelWindows {
    /// As the LEVEL records name it ("at most 2 PGs backfilling", "the operator's settings"),
    /// or "redundancy first" while the bound was suspended.
    pub level: String,
    /// The row's windows the level was in force for, in time order.
    pub windows: Vec<RowWindow>,
}

impl LevelWindows {
    pub fn within(&self, bound: f64) -> usize {
        self.windows.iter().filter(|w| w.within(bound)).count()
    }
}

/// Name of the stretch while redundancy came first (SUSPEND to RESUME).
pub const SUSPENDED_LEVEL: &str = "redundancy first (the bound suspended)";

/// The row's windows grouped by the level in force at each window's middle, levels in the
/// order first reached. The level in force follows the row's decision records (oldest first):
/// from the list's making (the first LEVEL record without a move: the operator's settings)
/// through each LEVEL move (`level.to_level`) and SUSPEND/RESUME, until RECOVERY_FINISHED.
/// Windows outside a recovery are left out; a level reached in two recoveries of the row is one
/// group. A change of the level in force that writes no LEVEL record (the list made again
/// without a move, hands off after an OVERRIDE) is not seen. Empty when the row has no LEVEL
/// record (another controller).
pub fn by_level(
    windows: &[RowWindow],
    fio_started_at: f64,
    decisions: &[&serde_json::Value],
) -> Vec<LevelWindows> {
    // (time, what is in force from then: None outside a recovery)
    let mut changes: Vec<(f64, Option<String>)> = Vec::new();
    let (mut level, mut suspended): (Option<String>, bool) = (None, false);
    let mut levels_controller = false;
    for d in decisions {
        let Some(t) = d.get("time").and_then(serde_json::Value::as_f64) else {
            continue;
        };
        let event = d
            .get("event")
            .and_then(serde_json::Value::as_str)
            .unwrap_or("");
        let moved = d
            .get("level")
            .and_then(|l| l.get("to_level"))
            .and_then(serde_json::Value::as_str);
        levels_controller |= event == "LEVEL";
        match (event, moved) {
            ("LEVEL", Some(to)) => level = Some(to.to_string()),
            ("LEVEL", None) if level.is_none() => level = Some(OPERATORS_LEVEL.to_string()),
            ("SUSPEND", _) => suspended = true,
            ("RESUME", _) => suspended = false,
            ("RECOVERY_FINISHED", _) => (level, suspended) = (None, false),
            _ => continue,
        }
        let now = match (&level, suspended) {
            (_, true) => Some(SUSPENDED_LEVEL.to_string()),
            (l, false) => l.clone(),
        };
        changes.push((t, now));
    }
    if !levels_controller {
        return Vec::new();
    }
    let mut out: Vec<LevelWindows> = Vec::new();
    for w in windows {
        let middle = fio_started_at + (w.start_seconds + w.end_seconds) / 2.0;
        let Some(Some(name)) = changes
            .iter()
            .take_while(|(t, _)| *t <= middle)
            .last()
            .map(|(_, l)| l.clone())
        else {
            continue;
        };
        match out.iter_mut().find(|g| g.level == name) {
            Some(g) => g.windows.push(w.clone()),
            None => out.push(LevelWindows {
                level: name,
                windows: vec![w.clone()],
            }),
        }
    }
    out
}

/// "1:05" for 65 s from the row's start.
pub fn clock(seconds: f64) -> String {
    let s = seconds.max(0.0).round() as u64;
    format!("{}:{:02}", s / 60, s % 60)
}

/// The window p99s of a row on one line, in ms, e.g. `14 15 !165 - 20`: `!` over the bound,
/// `-` no write.
pub fn sparkline(windows: &[RowWindow], bound: Option<f64>) -> String {
    sparkline_of(windows.iter().map(|w| w.p99_seconds), bound)
}

/// The same for the enforcer's own p99 in each window (`-`: not read in that window).
pub fn enforcer_sparkline(windows: &[RowWindow], bound: Option<f64>) -> String {
    sparkline_of(windows.iter().map(|w| w.enforcer_p99_seconds), bound)
}

fn sparkline_of(p99s: impl Iterator<Item = Option<f64>>, bound: Option<f64>) -> String {
    p99s.map(|p| match p {
        None => "-".to_string(),
        Some(p) => {
            let ms = p * 1000.0;
            let n = if ms >= 10.0 {
                format!("{ms:.0}")
            } else {
                format!("{ms:.1}")
            };
            if bound.is_some_and(|b| p > b) {
                format!("!{n}")
            } else {
                n
            }
        }
    })
    .collect::<Vec<_>>()
    .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ceph::parse::test_support::fixture_str;
    use std::time::Duration;

    fn w(start: f64, p99_ms: Option<f64>) -> RowWindow {
        RowWindow {
            start_seconds: start,
            end_seconds: start + 10.0,
            writes: if p99_ms.is_some() { 100 } else { 0 },
            p99_seconds: p99_ms.map(|m| m / 1000.0),
            enforcer_p99_seconds: None,
        }
    }

    fn row(p99s: &[Option<f64>]) -> Vec<RowWindow> {
        p99s.iter()
            .enumerate()
            .map(|(i, p)| w(i as f64 * 10.0, *p))
            .collect()
    }

    #[test]
    fn a_real_runs_windows_against_a_bound() {
        let report = fixture_str("fio/local_status_interval_2s_sigint.jsonplus.out");
        let fio = crate::fio::write_windows(&report, Duration::from_secs(2)).unwrap();
        let (start, windows) = from_fio(&fio).unwrap();
        assert_eq!(start, 1796148845.055);
        assert_eq!(windows[0].start_seconds, 0.0);
        assert_eq!(windows[7].end_seconds, 22.394);
        // p99s: -, -, 19.8, 6.1, 5.6, 8.7, 11.9, 4.0 ms. With a 10 ms bound, 4 of 8 windows
        // are within: the two with no write are not.
        let bound = 0.010;
        assert_eq!(within_fraction(&windows, bound), Some(0.5));
        assert_eq!(worst_p99(&windows), Some(0.019791872));
        assert_eq!(
            sparkline(&windows, Some(bound)),
            "- - !20 6.1 5.6 8.7 !12 4.0"
        );
        // Over at 4.1 s; 6.1, 5.6, 8.7 from 6.1 s: back 2 s later.
        let r = reaction(&windows, bound);
        assert_eq!(r.seconds(), Some(2.001));
        assert_eq!(r.cell(), "2s");
        assert_eq!(
            r.explain(),
            "first window over the bound at 0:04 (p99 19.8 ms); back within it (3 windows in a row) from 0:06: reaction 2s"
        );
    }

    #[test]
    fn reaction_needs_three_windows_in_a_row_back_within() {
        let bound = 0.1;
        // Over at 10 s; two within, over again, then three within from 50 s.
        let r = reaction(
            &row(&[
                Some(50.0),
                Some(400.0),
                Some(90.0),
                Some(80.0),
                Some(150.0),
                Some(90.0),
                Some(90.0),
                Some(99.0),
            ]),
            bound,
        );
        assert_eq!(r.seconds(), Some(40.0));
        // A window with no write breaks the run: its latency is unknown.
        let r = reaction(
            &row(&[Some(400.0), Some(90.0), None, Some(90.0), Some(90.0)]),
            bound,
        );
        assert!(matches!(r, Reaction::NotBack { first_over, .. } if first_over == 0.0));
        assert_eq!(r.cell(), "not back");
        assert_eq!(r.seconds(), None);
        // Never over: nothing to react to.
        let r = reaction(&row(&[Some(90.0), None, Some(100.0)]), bound);
        assert_eq!(r, Reaction::NoBreach);
        assert_eq!(r.cell(), "no breach");
    }

    #[test]
    fn the_enforcers_reads_go_to_the_window_they_were_read_in() {
        let mut ws = row(&[Some(10.0), Some(10.0), Some(10.0)]);
        // Windows 0-10, 10-20, 20-30 s after fio's start at 1000 s.
        attach_enforcer_p99(
            &mut ws,
            1000.0,
            &[
                (1010.0, 0.020),    // at window 0's end: window 0's
                (1012.0, f64::NAN), // not a reading
                (1015.0, 0.030),
                (1019.9, 0.025), // the last read in window 1
                (1031.0, 0.9),   // after the last window
            ],
        );
        let got: Vec<_> = ws.iter().map(|w| w.enforcer_p99_seconds).collect();
        assert_eq!(got, [Some(0.020), Some(0.025), None]);
        assert_eq!(enforcer_sparkline(&ws, Some(0.024)), "20 !25 -");
    }

    fn record(time: f64, event: &str, to: Option<&str>) -> serde_json::Value {
        let mut d = serde_json::json!({"time": time, "event": event});
        if let Some(to) = to {
            d["level"] = serde_json::json!({"from": 1, "to": 2, "from_level": "x", "to_level": to});
        }
        d
    }

    #[test]
    fn the_windows_go_to_the_level_in_force_at_their_middle() {
        // fio from 1000 s, windows of 10 s; the recovery from 1012 to 1068 s.
        let ws = row(&[
            Some(10.0),  // 0-10: before the recovery: left out
            Some(300.0), // 10-20 (middle 15): the operator's settings
            Some(120.0), // 20-30 (middle 25): moved to 2 PGs at 24
            Some(40.0),  // 30-40: 2 PGs
            None,        // 40-50: suspended from 1041: no write
            Some(60.0),  // 50-60: resumed at 1052: 2 PGs again
            Some(50.0),  // 60-70 (middle 65): the paused level from 1063
            Some(12.0),  // 70-80: the recovery finished at 1068: left out
        ]);
        let ds = [
            record(1005.0, "LEASE_ACQUIRED", None),
            record(1012.0, "LEVEL", None),
            record(1024.0, "LEVEL", Some("at most 2 PGs backfilling")),
            record(1041.0, "SUSPEND", None),
            record(1052.0, "RESUME", None),
            record(
                1063.0,
                "LEVEL",
                Some("at most 1 PGs backfilling, paused 50% of each period"),
            ),
            record(1068.0, "RECOVERY_FINISHED", None),
        ];
        let refs: Vec<&serde_json::Value> = ds.iter().collect();
        let got = by_level(&ws, 1000.0, &refs);
        let p99s = |g: &LevelWindows| g.windows.iter().map(|w| w.p99_seconds).collect::<Vec<_>>();
        let names: Vec<&str> = got.iter().map(|g| g.level.as_str()).collect();
        assert_eq!(
            names,
            [
                OPERATORS_LEVEL,
                "at most 2 PGs backfilling",
                SUSPENDED_LEVEL,
                "at most 1 PGs backfilling, paused 50% of each period"
            ]
        );
        assert_eq!(p99s(&got[0]), [Some(0.3)]);
        assert_eq!(p99s(&got[1]), [Some(0.12), Some(0.04), Some(0.06)]);
        assert_eq!(got[1].within(0.1), 2);
        assert_eq!(p99s(&got[2]), [None]);
        assert_eq!(got[2].within(1.0), 0, "no write is never within");
        // Another controller's row (no LEVEL record): nothing to group by.
        let ladder = [record(1012.0, "THROTTLE", None)];
        assert!(by_level(&ws, 1000.0, &[&ladder[0]]).is_empty());
    }

    /// The lab's Pacific `osd-out` cell (2026-12-07): the least recovery allowed (one PG, paused
    /// 80%) was in force for most of it and over the bound in most of its windows.
    #[test]
    fn a_recorded_cell_shows_what_the_least_recovery_allowed_did() {
        let dir = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/docs/records/matrix/pacific-osd-out"
        );
        let read = |f: &str| {
            std::fs::read_to_string(format!("{dir}/{f}")).unwrap_or_else(|e| panic!("{f}: {e}"))
        };
        let result: super::super::ExperimentResult =
            serde_json::from_str(&read("result.json")).expect("result.json");
        let row = result
            .rows
            .iter()
            .find(|r| r.row == "enforced-levels")
            .expect("the levels row");
        let decisions: Vec<&serde_json::Value> = result.decisions_of(&row.row).collect();
        let groups = by_level(
            &row.windows,
            row.fio_started_at.expect("fio start"),
            &decisions,
        );
        let bound = result.bound_seconds.expect("bound");
        let least = groups
            .iter()
            .find(|g| g.level == "at most 1 PGs backfilling, paused 80% of each period")
            .expect("the least recovery allowed");
        // Within: two windows under the bound and two exactly at it.
        assert_eq!((least.within(bound), least.windows.len()), (4, 24));
        assert_eq!(groups[0].level, OPERATORS_LEVEL);
        let counted: usize = groups.iter().map(|g| g.windows.len()).sum();
        assert!(
            counted < row.windows.len(),
            "windows outside the recovery left out"
        );
    }

    #[test]
    fn windows_with_no_write_are_never_within_and_have_no_p99() {
        let windows = row(&[None, Some(10.0), None, Some(500.0)]);
        assert_eq!(within_fraction(&windows, 1.0), Some(0.5));
        assert_eq!(worst_p99(&windows), Some(0.5));
        assert_eq!(within_fraction(&[], 1.0), None);
        assert_eq!(worst_p99(&row(&[None, None])), None);
        assert_eq!(clock(125.4), "2:05");
    }
}
