//! Is a step a good trade? Pure functions over the recorded numbers.
//!
//! A step is favourable only when client p99 stays within the bound (`multiplier x` the
//! baseline's p99) *and* recovery got faster than the reference (the last kept step, else the
//! baseline) by more than the noise margin. A faster recovery that breaks the bound is never
//! favourable; a measurement that is incomplete is never favourable either: a change whose
//! benefit was not measured is not kept by `--auto`.

use std::time::Duration;

use super::record::{GoalOutcome, Measurement, Verdict};
use super::report::{fmt_latency, fmt_magnitude as fmt_rate};

/// Recovery must beat the reference by more than this fraction to count as faster: two windows
/// of the same recovery differ by a few percent on their own.
pub const DEFAULT_MIN_GAIN: f64 = 0.05;

/// What the operator asked for, so the cycle knows when to stop.
#[derive(Debug, Clone, PartialEq)]
pub enum Goal {
    /// `--goal-rate 600obj/s`
    Rate(f64),
    /// `--goal-recovery-time 4h`: the data of one failed OSD (`objects` object copies, the
    /// fullest OSD's) recovered within `target`.
    RecoveryTime {
        target: Duration,
        objects: u64,
        osd: String,
    },
}

impl Goal {
    /// The rate that meets the goal, in objects per second.
    pub fn rate_needed(&self) -> f64 {
        match self {
            Goal::Rate(r) => *r,
            Goal::RecoveryTime {
                target, objects, ..
            } => *objects as f64 / target.as_secs_f64().max(1.0),
        }
    }

    pub fn describe(&self) -> String {
        match self {
            Goal::Rate(r) => format!("{} obj/s", fmt_rate(*r)),
            Goal::RecoveryTime {
                target,
                objects,
                osd,
            } => format!(
                "one failed OSD recovered within {} ({objects} objects on {osd}, the fullest: {} obj/s)",
                humantime::format_duration(*target),
                fmt_rate(self.rate_needed())
            ),
        }
    }

    pub fn reached_by(&self, rate: Option<f64>) -> bool {
        rate.is_some_and(|r| r >= self.rate_needed())
    }

    pub fn outcome(&self, rate: Option<f64>) -> GoalOutcome {
        let reached = self.reached_by(rate);
        let detail = match (rate, self) {
            (None, _) => "no recovery rate was measured".to_string(),
            (Some(r), Goal::Rate(_)) => format!(
                "{} obj/s {} the goal of {} obj/s",
                fmt_rate(r),
                if reached { "meets" } else { "is below" },
                fmt_rate(self.rate_needed())
            ),
            (Some(r), Goal::RecoveryTime { objects, .. }) => format!(
                "at {} obj/s one failed OSD ({objects} objects) recovers in about {}",
                fmt_rate(r),
                fmt_eta(*objects as f64 / r)
            ),
        };
        GoalOutcome {
            goal: self.describe(),
            reached,
            detail,
        }
    }
}

/// Parses `600obj/s`, `600 obj/s` or `600`.
pub fn parse_goal_rate(s: &str) -> Result<f64, String> {
    let t = s.trim();
    let number = t
        .strip_suffix("obj/s")
        .or_else(|| t.strip_suffix("objects/s"))
        .unwrap_or(t)
        .trim();
    match number.parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 => Ok(v),
        _ => Err(format!(
            "{s:?} is not a recovery rate: expected a positive number of objects per second, e.g. 600obj/s"
        )),
    }
}

/// Judges a step's measurement against the reference and the bound.
pub fn judge(
    bound_seconds: f64,
    multiplier: f64,
    reference_label: &str,
    reference: &Measurement,
    step: &Measurement,
    min_gain: f64,
) -> Verdict {
    let (favourable, reason) = judge_numbers(
        bound_seconds,
        multiplier,
        reference_label,
        reference,
        step,
        min_gain,
    );
    Verdict {
        favourable,
        reason,
        goal: None,
    }
}

fn judge_numbers(
    bound: f64,
    multiplier: f64,
    reference_label: &str,
    reference: &Measurement,
    step: &Measurement,
    min_gain: f64,
) -> (bool, String) {
    if let Some(why) = &step.interrupted {
        return (false, format!("not measured: {why}"));
    }
    let Some(p99) = step.client.as_ref().and_then(|c| c.write_p99()) else {
        return (
            false,
            "not judged: the fio report has no write p99".to_string(),
        );
    };
    if p99 > bound {
        return (
            false,
            format!(
                "poor trade: p99 {} above the {} bound ({multiplier}x baseline)",
                fmt_latency(p99),
                fmt_latency(bound)
            ),
        );
    }
    let Some(rate) = step
        .recovery
        .objects_per_second
        .filter(|_| step.recovery.running)
    else {
        return (
            false,
            "not judged: no recovery ran during the step, so its effect on recovery is unknown"
                .to_string(),
        );
    };
    let Some(before) = reference
        .recovery
        .objects_per_second
        .filter(|_| reference.recovery.running)
    else {
        return (
            false,
            format!("not judged: no recovery ran during the {reference_label} measurement to compare with"),
        );
    };
    if before <= 0.0 {
        // Objects were added faster than recovered (balancer, a new failure): no speed to beat.
        return (
            false,
            format!(
                "not judged: the {reference_label} measurement shows no net recovery ({} obj/s)",
                fmt_rate(before)
            ),
        );
    }
    if rate <= before * (1.0 + min_gain) {
        return (
            false,
            format!(
                "no gain: {} obj/s vs {} obj/s with {reference_label} (needs > {:.0}% faster)",
                fmt_rate(rate),
                fmt_rate(before),
                min_gain * 100.0
            ),
        );
    }
    (
        true,
        format!(
            "faster: {} -> {} obj/s (+{:.0}%), p99 {} within the {} bound",
            fmt_rate(before),
            fmt_rate(rate),
            (rate / before - 1.0) * 100.0,
            fmt_latency(p99),
            fmt_latency(bound)
        ),
    )
}

fn fmt_eta(seconds: f64) -> String {
    if !seconds.is_finite() || seconds < 0.0 {
        return "never at this rate".to_string();
    }
    humantime::format_duration(Duration::from_secs(seconds.round() as u64)).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tuning::record::tests::measurement;

    const BOUND: f64 = 0.024; // 2 x 12 ms

    fn verdict(reference: (Option<f64>, Option<f64>), step: (Option<f64>, Option<f64>)) -> Verdict {
        judge(
            BOUND,
            2.0,
            "baseline",
            &measurement(reference.0, reference.1),
            &measurement(step.0, step.1),
            DEFAULT_MIN_GAIN,
        )
    }

    #[test]
    fn the_operators_cycle_is_judged_as_they_did() {
        // (reference rate, step rate, step p99 ms, favourable) from the record.
        let table = [
            (240.0, 460.0, 14.0, true),
            (460.0, 610.0, 19.0, true),
            (610.0, 640.0, 34.0, false),
            (610.0, 700.0, 21.0, true),
        ];
        for (before, rate, p99, expected) in table {
            let v = verdict((Some(before), Some(12.0)), (Some(rate), Some(p99)));
            assert_eq!(
                v.favourable, expected,
                "{before} -> {rate} @ {p99} ms: {v:?}"
            );
        }
        let v = verdict((Some(610.0), Some(12.0)), (Some(640.0), Some(34.0)));
        assert_eq!(
            v.reason,
            "poor trade: p99 34 ms above the 24 ms bound (2x baseline)"
        );
    }

    #[test]
    fn faster_recovery_never_buys_a_broken_bound() {
        let v = verdict((Some(100.0), Some(12.0)), (Some(10_000.0), Some(24.5)));
        assert!(!v.favourable && v.reason.starts_with("poor trade"), "{v:?}");
        // Exactly at the bound is within it.
        let v = verdict((Some(100.0), Some(12.0)), (Some(200.0), Some(24.0)));
        assert!(v.favourable, "{v:?}");
    }

    #[test]
    fn gains_within_noise_or_losses_are_not_favourable() {
        for rate in [240.0, 250.0, 252.0, 100.0, -5.0] {
            let v = verdict((Some(240.0), Some(12.0)), (Some(rate), Some(13.0)));
            assert!(!v.favourable, "{rate}: {v:?}");
            assert!(v.reason.starts_with("no gain"), "{v:?}");
        }
        let v = verdict((Some(240.0), Some(12.0)), (Some(253.0), Some(13.0)));
        assert!(v.favourable, "{v:?}");
        assert!(v.reason.contains("+5%"), "{v:?}");
    }

    #[test]
    fn unmeasured_things_are_never_favourable() {
        let v = verdict((Some(240.0), Some(12.0)), (None, Some(13.0)));
        assert!(!v.favourable && v.reason.contains("no recovery ran during the step"));
        let v = verdict((None, Some(12.0)), (Some(300.0), Some(13.0)));
        assert!(!v.favourable && v.reason.contains("during the baseline measurement"));
        let v = verdict((Some(240.0), Some(12.0)), (Some(300.0), None));
        assert!(!v.favourable && v.reason.contains("no write p99"));
        let mut interrupted = measurement(Some(900.0), Some(5.0));
        interrupted.interrupted = Some("Ctrl-C after 3m".into());
        let v = judge(
            BOUND,
            2.0,
            "baseline",
            &measurement(Some(1.0), Some(12.0)),
            &interrupted,
            DEFAULT_MIN_GAIN,
        );
        assert_eq!(
            (v.favourable, v.reason.as_str()),
            (false, "not measured: Ctrl-C after 3m")
        );
    }

    #[test]
    fn goals_know_when_they_are_reached() {
        let g = Goal::Rate(600.0);
        assert!(!g.reached_by(Some(599.0)));
        assert!(g.reached_by(Some(600.0)));
        assert!(!g.reached_by(None));
        assert_eq!(
            g.outcome(Some(610.0)).detail,
            "610 obj/s meets the goal of 600 obj/s"
        );
        let g = Goal::RecoveryTime {
            target: Duration::from_secs(3600),
            objects: 1_800_000,
            osd: "osd.7".into(),
        };
        assert_eq!(g.rate_needed(), 500.0);
        let o = g.outcome(Some(250.0));
        assert!(!o.reached);
        assert_eq!(
            o.detail,
            "at 250 obj/s one failed OSD (1800000 objects) recovers in about 2h"
        );
        assert!(g.describe().contains("osd.7"), "{}", g.describe());
        assert!(g.outcome(Some(500.0)).reached);
    }

    #[test]
    fn goal_rates_parse_with_or_without_unit() {
        assert_eq!(parse_goal_rate("600obj/s"), Ok(600.0));
        assert_eq!(parse_goal_rate(" 600 obj/s"), Ok(600.0));
        assert_eq!(parse_goal_rate("12.5"), Ok(12.5));
        for bad in ["", "fast", "0", "-3obj/s", "NaN", "600MB/s"] {
            let e = parse_goal_rate(bad).unwrap_err();
            assert!(e.contains("e.g. 600obj/s"), "{bad}: {e}");
        }
    }
}
