//! The tuning record as a storage admin writes it by hand: a short header, one line per
//! measurement (baseline, then every step in order) and the settings that stayed. The layout
//! follows the operator's own notes from issue #4, so it can be pasted into a ticket as is.

use crate::tuning::record::{Action, Measurement, Step, TuningRecord};

/// The command that settles an undecided step; shown so the reader knows what is pending.
const DECIDE_COMMAND: &str = "ceph-recovery-budget tune decide --keep|--revert";

/// Spaces between the padded label column and the numbers, and between the numbers and `<-`.
const GAP: usize = 3;

/// Renders the whole record; the text ends with a newline.
pub fn render(record: &TuningRecord) -> String {
    let mut out = String::new();
    out.push_str(&format!(
        "Cluster: {} (fsid {})\n",
        one_line(&record.cluster.name),
        one_line(&record.cluster.fsid)
    ));
    out.push_str(&format!("Date: {}\n", date_part(&record.baseline.date)));
    if let Some(hardware) = &record.hardware {
        out.push_str(&format!("Hardware: {}\n", one_line(hardware)));
    }
    out.push_str(&format!(
        "Scheduler: {}\n",
        scheduler(
            &record.baseline.scheduler.op_queue,
            record.baseline.scheduler.mclock_profile.as_deref()
        )
    ));
    out.push_str(&format!("Bound: {}\n", bound(record)));
    out.push('\n');

    // Labels carry their colon so the numbers start in one column whatever the longest name is.
    let baseline_label = "baseline:".to_string();
    let step_labels: Vec<String> = record
        .steps
        .iter()
        .map(|s| format!("{}:", step_label(s)))
        .collect();
    let label_width = step_labels
        .iter()
        .chain(std::iter::once(&baseline_label))
        .map(|l| l.chars().count())
        .max()
        .unwrap_or(0)
        + GAP;

    out.push_str(&format!(
        "{:<label_width$}{}\n",
        baseline_label,
        baseline_numbers(&record.baseline.measurement)
    ));

    // The arrows line up too, so the decisions read as a column.
    let step_numbers: Vec<String> = record.steps.iter().map(step_numbers).collect();
    let numbers_width = step_numbers
        .iter()
        .map(|n| n.chars().count())
        .max()
        .unwrap_or(0)
        + GAP;
    for ((step, label), numbers) in record.steps.iter().zip(&step_labels).zip(&step_numbers) {
        out.push_str(&format!(
            "{:<label_width$}{:<numbers_width$}<- {}\n",
            label,
            numbers,
            outcome(step)
        ));
    }

    out.push('\n');
    out.push_str(&format!("final: {}\n", final_line(record)));
    out
}

/// `osd_max_backfills` -> `max_backfills`: every setting tuned here is an OSD one, so the prefix
/// only adds width.
pub fn short_name(setting: &str) -> &str {
    setting.strip_prefix("osd_").unwrap_or(setting)
}

/// `max_backfills 4`: how a step is named in the report, the chart and progress lines.
pub fn step_label(step: &Step) -> String {
    one_line(&format!("{} {}", short_name(&step.setting), step.value))
}

/// A recovery rate for people: no decimals from 10 obj/s, one below. Without recovery there is
/// no rate at all, which must not read as "0 obj/s" (that would mean recovery stalled).
pub fn fmt_rate(objects_per_second: Option<f64>, running: bool) -> String {
    if !running {
        return "no recovery".into();
    }
    match objects_per_second {
        Some(rate) if rate.is_finite() => format!("{} obj/s", fmt_magnitude(rate)),
        _ => "recovery rate n/a".into(),
    }
}

/// A latency for people: whole ms from 10 ms, one decimal from 1 ms, whole µs below 1 ms.
pub fn fmt_latency(seconds: f64) -> String {
    if !seconds.is_finite() {
        return "n/a".into();
    }
    let ms = seconds * 1000.0;
    let us = seconds * 1_000_000.0;
    // Decide on the rounded value so 999.7 µs shows as "1.0 ms", not "1000 µs".
    if us.round() < 1000.0 {
        format!("{us:.0} µs")
    } else {
        format!("{} ms", fmt_magnitude(ms))
    }
}

/// No decimals from 10, one below; decided after rounding so 9.96 shows as "10", not "10.0".
pub fn fmt_magnitude(value: f64) -> String {
    let one_decimal = (value * 10.0).round() / 10.0;
    if one_decimal.abs() >= 10.0 {
        format!("{value:.0}")
    } else {
        format!("{value:.1}")
    }
}

pub(crate) fn date_part(date: &str) -> String {
    one_line(date.split(['T', ' ']).next().unwrap_or(date))
}

fn scheduler(op_queue: &str, profile: Option<&str>) -> String {
    match (op_queue, profile) {
        ("mclock_scheduler", Some(p)) => format!("mclock, {} profile", one_line(p)),
        ("mclock_scheduler", None) => "mclock".into(),
        (other, _) => one_line(other),
    }
}

fn bound(record: &TuningRecord) -> String {
    let baseline_p99 = record
        .baseline
        .measurement
        .client
        .as_ref()
        .and_then(|c| c.write_p99());
    match (baseline_p99, record.bound_seconds()) {
        (Some(p99), Some(bound)) => format!(
            "client p99 write within {}x the baseline's {} = {}",
            record.multiplier,
            fmt_latency(p99),
            fmt_latency(bound)
        ),
        _ => "none, the baseline has no client p99 write".into(),
    }
}

fn baseline_numbers(m: &Measurement) -> String {
    if let Some(reason) = &m.interrupted {
        return interrupted(reason);
    }
    let rate = fmt_rate(m.recovery.objects_per_second, m.recovery.running);
    // "recovery" names the first column once; the step lines drop it for width.
    let rate = if m.recovery.running && m.recovery.objects_per_second.is_some() {
        format!("{rate} recovery")
    } else {
        rate
    };
    format!("{rate}, {}", p99(m, "p99 write"))
}

fn step_numbers(step: &Step) -> String {
    match &step.measurement {
        None => "not measured".into(),
        Some(m) => match &m.interrupted {
            Some(reason) => interrupted(reason),
            None => format!(
                "{}, {}",
                fmt_rate(m.recovery.objects_per_second, m.recovery.running),
                p99(m, "p99")
            ),
        },
    }
}

fn interrupted(reason: &str) -> String {
    format!("interrupted ({})", one_line(reason))
}

fn p99(m: &Measurement, prefix: &str) -> String {
    match m.client.as_ref().and_then(|c| c.write_p99()) {
        Some(seconds) => format!("{prefix} {}", fmt_latency(seconds)),
        None => "p99 write n/a".into(),
    }
}

/// The text after `<-`: what was decided and, where it matters, why.
fn outcome(step: &Step) -> String {
    let Some(decision) = &step.decision else {
        return with_goal(format!("undecided: run `{DECIDE_COMMAND}`"), step);
    };
    let action = match decision.action {
        Action::Kept => "kept",
        Action::Reverted => "reverted",
    };
    let text = if decision.by == "interrupted" {
        format!("{action}, interrupted")
    } else {
        match &step.verdict {
            None => action.to_string(),
            Some(verdict) => {
                let agrees = verdict.favourable == (decision.action == Action::Kept);
                let reason = one_line(&verdict.reason);
                if !agrees {
                    // A human overrode the numbers; next year's reader needs both sides.
                    let who = if decision.by == "operator" {
                        "operator's choice".to_string()
                    } else {
                        format!("decided by {}", one_line(&decision.by))
                    };
                    format!("{action} ({who}; verdict: {reason})")
                } else if decision.action == Action::Reverted {
                    format!("{action}, {reason}")
                } else {
                    action.to_string()
                }
            }
        }
    };
    with_goal(text, step)
}

fn with_goal(text: String, step: &Step) -> String {
    match step.verdict.as_ref().and_then(|v| v.goal.as_ref()) {
        Some(goal) if goal.reached => format!("{text}; goal {} reached", one_line(&goal.goal)),
        _ => text,
    }
}

fn final_line(record: &TuningRecord) -> String {
    let settings = record.final_settings();
    if settings.is_empty() {
        return "no change from the baseline".into();
    }
    settings
        .iter()
        .map(|(name, value)| one_line(&format!("{} {value}", short_name(name))))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Free text (fio errors, --hardware) may hold line breaks; one entry must stay one line.
fn one_line(text: &str) -> String {
    if text.contains(['\n', '\r']) {
        text.split(['\n', '\r'])
            .map(str::trim)
            .filter(|part| !part.is_empty())
            .collect::<Vec<_>>()
            .join(" ")
    } else {
        text.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tuning::record::tests::{measurement, operators_record, step};
    use crate::tuning::record::{Decision, GoalOutcome, Verdict};

    const OPERATORS_TEXT: &str = "\
Cluster: prod-ceph-01 (fsid 5a3b5c1e-0000-4000-8000-000000000001)
Date: 2026-08-18
Hardware: 12x 16TB HDD per host, NVMe DB, 25GbE cluster network
Scheduler: mclock, balanced profile
Bound: client p99 write within 2x the baseline's 12 ms = 24 ms

baseline:               240 obj/s recovery, p99 write 12 ms
max_backfills 2:        460 obj/s, p99 14 ms   <- kept
max_backfills 4:        610 obj/s, p99 19 ms   <- kept
max_backfills 8:        640 obj/s, p99 34 ms   <- reverted, poor trade: p99 34 ms above the 24 ms bound
recovery_sleep_hdd 0:   700 obj/s, p99 21 ms   <- kept

final: max_backfills 4, recovery_sleep_hdd 0
";

    /// The fixture, with the reverted step's reason as the operator wrote it.
    fn record() -> TuningRecord {
        let mut r = operators_record();
        if let Some(v) = r.steps[2].verdict.as_mut() {
            v.reason = "poor trade: p99 34 ms above the 24 ms bound".into();
        }
        r
    }

    fn lines(text: &str) -> Vec<&str> {
        text.lines().collect()
    }

    fn line_for<'a>(text: &'a str, label: &str) -> &'a str {
        text.lines()
            .find(|l| l.starts_with(&format!("{label}:")))
            .unwrap_or_else(|| panic!("no line for {label} in\n{text}"))
    }

    #[test]
    fn operators_record_renders_as_the_operator_wrote_it() {
        assert_eq!(render(&record()), OPERATORS_TEXT);
    }

    #[test]
    fn numbers_start_in_one_column_whatever_the_longest_label() {
        let mut r = record();
        r.steps[0].setting = "osd_recovery_max_active_hdd".into();
        let text = render(&r);
        let columns: Vec<usize> = text
            .lines()
            .skip_while(|l| !l.starts_with("baseline:"))
            .take(1 + r.steps.len())
            .map(|l| {
                let colon = l.find(':').unwrap();
                colon + 1 + l[colon + 1..].find(|c: char| c != ' ').unwrap()
            })
            .collect();
        assert_eq!(columns.len(), 5, "{text}");
        assert!(columns.iter().all(|&c| c == columns[0]), "{text}");
        assert_eq!(columns[0], "recovery_max_active_hdd 2:".len() + 3, "{text}");
    }

    #[test]
    fn no_recovery_is_said_not_shown_as_zero() {
        let mut r = record();
        r.baseline.measurement = measurement(None, Some(12.0));
        r.steps[0].measurement = Some(measurement(None, Some(14.0)));
        let text = render(&r);
        assert_eq!(
            line_for(&text, "baseline"),
            "baseline:               no recovery, p99 write 12 ms"
        );
        assert!(line_for(&text, "max_backfills 2").contains("no recovery, p99 14 ms   <- kept"));
        assert!(!text.contains(" 0 obj/s"), "{text}");
        assert!(!text.contains(" 0.0 obj/s"), "{text}");
    }

    #[test]
    fn interrupted_measurements_show_the_reason_instead_of_numbers() {
        let mut r = record();
        let mut m = measurement(Some(500.0), None);
        m.interrupted = Some("Ctrl-C\nduring fio".into());
        r.steps[3].measurement = Some(m);
        r.steps[3].decision = Some(Decision {
            action: Action::Reverted,
            by: "interrupted".into(),
            at: "2026-08-18T12:00:00Z".into(),
        });
        r.steps[1].measurement = None;
        let text = render(&r);
        assert!(
            line_for(&text, "recovery_sleep_hdd 0")
                .ends_with("interrupted (Ctrl-C during fio)   <- reverted, interrupted"),
            "{text}"
        );
        assert!(
            line_for(&text, "max_backfills 4").contains("not measured"),
            "{text}"
        );
        assert!(!line_for(&text, "recovery_sleep_hdd 0").contains("obj/s"));
        assert_eq!(text.lines().last(), Some("final: max_backfills 4"));
    }

    #[test]
    fn missing_write_p99_is_na() {
        let mut r = record();
        r.steps[0].measurement = Some(measurement(Some(460.0), None));
        let text = render(&r);
        assert!(
            line_for(&text, "max_backfills 2").contains("460 obj/s, p99 write n/a"),
            "{text}"
        );
    }

    #[test]
    fn undecided_step_says_how_to_decide() {
        let mut r = record();
        r.steps[3].decision = None;
        let text = render(&r);
        assert!(
            line_for(&text, "recovery_sleep_hdd 0")
                .ends_with("<- undecided: run `ceph-recovery-budget tune decide --keep|--revert`"),
            "{text}"
        );
        assert_eq!(text.lines().last(), Some("final: max_backfills 4"));
    }

    #[test]
    fn operator_overriding_the_verdict_shows_both() {
        let mut r = record();
        // Kept although the verdict said no.
        if let Some(d) = r.steps[2].decision.as_mut() {
            d.action = Action::Kept;
        }
        // Reverted although the verdict said yes.
        if let Some(d) = r.steps[3].decision.as_mut() {
            d.action = Action::Reverted;
        }
        let text = render(&r);
        assert!(line_for(&text, "max_backfills 8").ends_with(
            "<- kept (operator's choice; verdict: poor trade: p99 34 ms above the 24 ms bound)"
        ));
        assert!(line_for(&text, "recovery_sleep_hdd 0")
            .ends_with("<- reverted (operator's choice; verdict: faster within the bound)"));
        assert_eq!(text.lines().last(), Some("final: max_backfills 8"));
    }

    #[test]
    fn reverted_without_verdict_and_not_set_before_is_plain() {
        let mut r = record();
        r.steps[2].verdict = None;
        r.steps[2].before = None;
        let text = render(&r);
        assert!(line_for(&text, "max_backfills 8").ends_with("p99 34 ms   <- reverted"));
    }

    #[test]
    fn reached_goal_is_appended() {
        let mut r = record();
        r.steps[1].verdict = Some(Verdict {
            favourable: true,
            reason: "faster within the bound".into(),
            goal: Some(GoalOutcome {
                goal: "600 obj/s".into(),
                reached: true,
                detail: "610 >= 600".into(),
            }),
        });
        r.steps[0].verdict = Some(Verdict {
            favourable: true,
            reason: "faster within the bound".into(),
            goal: Some(GoalOutcome {
                goal: "600 obj/s".into(),
                reached: false,
                detail: "460 < 600".into(),
            }),
        });
        let text = render(&r);
        assert!(line_for(&text, "max_backfills 4").ends_with("<- kept; goal 600 obj/s reached"));
        assert!(line_for(&text, "max_backfills 2").ends_with("<- kept"));
    }

    #[test]
    fn wpq_and_other_schedulers() {
        let mut r = record();
        r.baseline.scheduler.op_queue = "wpq".into();
        r.baseline.scheduler.mclock_profile = None;
        assert!(lines(&render(&r)).contains(&"Scheduler: wpq"));
        r.baseline.scheduler.op_queue = "debug_random".into();
        assert!(lines(&render(&r)).contains(&"Scheduler: debug_random"));
        r.baseline.scheduler.op_queue = "mclock_scheduler".into();
        r.baseline.scheduler.mclock_profile = Some("high_recovery_ops".into());
        assert!(lines(&render(&r)).contains(&"Scheduler: mclock, high_recovery_ops profile"));
    }

    #[test]
    fn no_hardware_no_steps_no_kept_steps() {
        let mut r = record();
        r.hardware = None;
        for s in &mut r.steps {
            if let Some(d) = s.decision.as_mut() {
                d.action = Action::Reverted;
            }
            s.verdict = None;
        }
        let text = render(&r);
        assert!(!text.contains("Hardware:"), "{text}");
        assert_eq!(
            text.lines().last(),
            Some("final: no change from the baseline")
        );

        r.steps.clear();
        let text = render(&r);
        assert_eq!(
            line_for(&text, "baseline"),
            "baseline:   240 obj/s recovery, p99 write 12 ms"
        );
        assert_eq!(
            text.lines().last(),
            Some("final: no change from the baseline")
        );
    }

    #[test]
    fn sub_millisecond_latencies_in_microseconds() {
        let mut r = record();
        r.multiplier = 1.5;
        r.baseline.measurement = measurement(Some(8.24), Some(0.6));
        r.steps[0].measurement = Some(measurement(Some(9.5), Some(0.85)));
        r.steps[1].measurement = Some(measurement(Some(12.0), Some(4.24)));
        let text = render(&r);
        assert!(lines(&text)
            .contains(&"Bound: client p99 write within 1.5x the baseline's 600 µs = 900 µs"));
        assert!(line_for(&text, "baseline").ends_with("8.2 obj/s recovery, p99 write 600 µs"));
        assert!(line_for(&text, "max_backfills 2").contains("9.5 obj/s, p99 850 µs"));
        assert!(line_for(&text, "max_backfills 4").contains("12 obj/s, p99 4.2 ms"));
    }

    #[test]
    fn no_bound_without_baseline_p99() {
        let mut r = record();
        r.baseline.measurement = measurement(Some(240.0), None);
        let text = render(&r);
        assert!(lines(&text).contains(&"Bound: none, the baseline has no client p99 write"));
        assert!(line_for(&text, "baseline").ends_with("240 obj/s recovery, p99 write n/a"));
    }

    #[test]
    fn number_formats_round_across_unit_boundaries() {
        assert_eq!(fmt_latency(0.012), "12 ms");
        assert_eq!(fmt_latency(0.0042), "4.2 ms");
        assert_eq!(fmt_latency(0.00996), "10 ms");
        assert_eq!(fmt_latency(0.00085), "850 µs");
        assert_eq!(fmt_latency(0.0009996), "1.0 ms");
        assert_eq!(fmt_latency(f64::NAN), "n/a");
        assert_eq!(fmt_rate(Some(240.4), true), "240 obj/s");
        assert_eq!(fmt_rate(Some(9.96), true), "10 obj/s");
        assert_eq!(fmt_rate(Some(0.0), true), "0.0 obj/s");
        assert_eq!(fmt_rate(Some(0.0), false), "no recovery");
        assert_eq!(fmt_rate(None, false), "no recovery");
        assert_eq!(fmt_rate(None, true), "recovery rate n/a");
        assert_eq!(short_name("osd_max_backfills"), "max_backfills");
        assert_eq!(short_name("bluestore_cache_size"), "bluestore_cache_size");
        assert_eq!(
            step_label(&step(1, "osd_max_backfills", "2", 1.0, 1.0, true)),
            "max_backfills 2"
        );
    }
}
