//! Recovery rate from the exporter's own samples: how fast degraded + misplaced objects go down.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// Samples of "objects still to recover" (degraded + misplaced) over a sliding window, each
/// with Ceph's own rate (`recovering_objects_per_sec`) at that moment.
#[derive(Debug, Clone)]
pub struct RecoveryWindow {
    window: Duration,
    samples: VecDeque<Sample>,
}

#[derive(Debug, Clone, Copy)]
struct Sample {
    at: Instant,
    remaining: u64,
    ceph_rate: f64,
}

/// The recovery rate over the window, ours and Ceph's over the same stretches of time.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct WindowRates {
    /// Objects recovered per second: the decreases of degraded + misplaced over `span`.
    pub ours: f64,
    /// Ceph's `recovering_objects_per_sec` averaged over the same `span`, each sample standing
    /// for the stretch that ends with it: so the two numbers cover the same time (a pause
    /// slice counts in both), and disagree only as much as Ceph's counting does.
    pub ceph: f64,
    /// The time they cover: the window, less the time before the recovery began.
    pub span: Duration,
}

impl RecoveryWindow {
    pub fn new(window: Duration) -> Self {
        Self {
            window,
            samples: VecDeque::new(),
        }
    }

    /// Adds a sample and forgets those older than the window, keeping the newest sample at or
    /// before the window start as the base so a full window is covered.
    pub fn push(&mut self, at: Instant, remaining: u64, ceph_rate: f64) {
        self.samples.push_back(Sample {
            at,
            remaining,
            ceph_rate,
        });
        let start = at.checked_sub(self.window).unwrap_or(at);
        while self.samples.len() > 2 && self.samples[1].at <= start {
            self.samples.pop_front();
        }
    }

    /// Objects recovered per second over the window: the sum of every decrease between
    /// consecutive samples divided by the time covered. Like the runbook's `(a - b) / 900` while
    /// counts only fall; when they rise (a new failure adds work) that step counts as 0, never
    /// negative, and the decreases around it still count. `None` until two samples exist.
    pub fn rate(&self) -> Option<f64> {
        if self.samples.len() < 2 {
            return None;
        }
        Some(self.over(self.samples.iter()).map_or(0.0, |r| r.ours))
    }

    /// [`Self::rate`] of the recovery running now, with Ceph's rate over the same time: from the
    /// newest sample with nothing to recover on, so that `span` is "the last N" contiguously up to
    /// now. The time before a recovery would dilute its rate (168 instead of 232 obj/s on
    /// `recovery/samples.tsv`), and an earlier recovery in the window is another one (lab,
    /// 2026-12-01: one finished at 21:10:53, the next began at 21:13:38, and at 21:13:45 the
    /// window said "73 obj/s over the last 2m30s" of a recovery 7 s old). `None` with fewer than
    /// two samples, with nothing to recover now, or when the recovery began with the newest sample
    /// (nothing measured yet).
    pub fn rates(&self) -> Option<WindowRates> {
        let start = self
            .samples
            .iter()
            .rposition(|s| s.remaining == 0)
            .map_or(0, |i| i + 1);
        self.over(self.samples.iter().skip(start))
    }

    /// The rates over `samples` (in order), skipping stretches that began with nothing to do.
    fn over<'a>(&self, samples: impl Iterator<Item = &'a Sample> + Clone) -> Option<WindowRates> {
        let last = samples.clone().last()?;
        if last.remaining == 0 {
            return None;
        }
        let mut span = 0.0;
        let (mut decreased, mut ceph) = (0u64, 0.0);
        for (a, b) in samples.clone().zip(samples.skip(1)) {
            if a.remaining == 0 {
                continue;
            }
            let dt = b.at.checked_duration_since(a.at)?.as_secs_f64();
            span += dt;
            decreased += a.remaining.saturating_sub(b.remaining);
            ceph += b.ceph_rate * dt;
        }
        (span > 0.0).then(|| WindowRates {
            ours: decreased as f64 / span,
            ceph: ceph / span,
            span: Duration::from_secs_f64(span),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn window_of(points: &[(u64, u64)], window_s: u64) -> RecoveryWindow {
        let t0 = Instant::now();
        let mut w = RecoveryWindow::new(Duration::from_secs(window_s));
        for &(t, v) in points {
            w.push(t0 + Duration::from_secs(t), v, 0.0);
        }
        w
    }

    #[test]
    fn no_rate_from_one_sample() {
        assert_eq!(window_of(&[(0, 100)], 300).rate(), None);
    }

    #[test]
    fn matches_the_runbook_formula_while_counts_fall() {
        // (a - b) / 900 from the runbook: 15000 -> 6000 objects in 15 minutes = 10 obj/s.
        let w = window_of(&[(0, 15000), (300, 12000), (600, 9000), (900, 6000)], 900);
        assert_eq!(w.rate(), Some(10.0));
    }

    #[test]
    fn real_recovery_samples_give_the_observed_rate() {
        // fixtures/recovery/samples.tsv: degraded objects 10440 @ 1796045008.57 .. 370 @ 1796045051.94.
        let w = window_of(
            &[(0, 10440), (29, 3608), (34, 2405), (39, 1266), (43, 370)],
            300,
        );
        let rate = w.rate().unwrap();
        assert!((rate - (10440.0 - 370.0) / 43.0).abs() < 1e-9, "{rate}");
    }

    #[test]
    fn ours_and_cephs_rate_cover_the_same_time_from_the_recoverys_start() {
        // recovery/samples.tsv: degraded objects and Ceph's recovering_objects_per_sec, sampled
        // from before osd.3 went out (epochs relative to sample 0, 1796044992.15).
        let t0 = Instant::now();
        let mut w = RecoveryWindow::new(Duration::from_secs(300));
        for (t, left, ceph) in [
            (0.0, 0, 0.0),
            (8.49, 0, 0.0),
            (11.22, 0, 0.0),
            (16.42, 10440, 1.0),
            (45.43, 3608, 187.0),
            (50.63, 2405, 233.0),
            (55.38, 1266, 283.0),
            (59.79, 370, 224.0),
        ] {
            w.push(t0 + Duration::from_secs_f64(t), left, ceph);
        }
        let r = w.rates().unwrap();
        // From the first sample with objects to recover: 10070 objects in 43.37 s.
        assert!((r.span.as_secs_f64() - 43.37).abs() < 0.01, "{r:?}");
        assert!((r.ours - 232.2).abs() < 0.5, "{r:?}");
        // Ceph's own, averaged over the same 43 s, agrees within 15%.
        assert!((r.ceph - 206.8).abs() < 0.5, "{r:?}");
        assert!((r.ours - r.ceph).abs() / r.ours < 0.15, "{r:?}");
        // Done: nothing to recover, no rate to finish at.
        w.push(t0 + Duration::from_secs_f64(63.0), 0, 92.0);
        assert_eq!(w.rates(), None);
        assert_eq!(w.rate(), Some(0.0));
    }

    #[test]
    fn the_rate_of_a_recovery_is_its_own_not_an_earlier_ones_in_the_window() {
        // Lab, 2026-12-01: osd.2 out, recovered in a minute; back in 3 minutes later, and data
        // moves back. The window holds both; the second's rate and span are its own.
        let w = window_of(
            &[
                (0, 11000),
                (15, 8000),
                (30, 4000),
                (45, 0),
                (60, 0),
                (200, 0),
                (215, 1706),
                (230, 600),
            ],
            300,
        );
        let r = w.rates().unwrap();
        assert_eq!(r.span, Duration::from_secs(15), "{r:?}");
        assert!((r.ours - 1106.0 / 15.0).abs() < 1e-9, "{r:?}");
        // The metric's rate (every decrease over the window) is unchanged.
        assert_eq!(w.rate(), Some((11000.0 + 1106.0) / 60.0));
        // The first sample of the second recovery: nothing measured yet.
        let w = window_of(&[(0, 11000), (15, 0), (30, 0), (45, 1706)], 300);
        assert_eq!(w.rates(), None);
    }

    #[test]
    fn no_rate_yet_in_the_first_cycle_of_a_recovery() {
        let w = window_of(&[(0, 0), (15, 0), (30, 5000)], 300);
        assert_eq!(w.rates(), None);
        assert_eq!(w.rate(), Some(0.0));
    }

    #[test]
    fn a_new_failure_never_makes_the_rate_negative() {
        let w = window_of(&[(0, 1000), (10, 5000)], 300);
        assert_eq!(w.rate(), Some(0.0));
        // Recovery before and after the jump still counts.
        let w = window_of(&[(0, 1000), (10, 900), (20, 5000), (30, 4800)], 300);
        assert_eq!(w.rate(), Some(300.0 / 30.0));
    }

    #[test]
    fn old_samples_leave_the_window() {
        let w = window_of(&[(0, 100_000), (100, 1000), (400, 700), (500, 600)], 300);
        // Base is the sample at t=100 (newest at or before 500-300=200): (1000-600)/400 = 1.
        assert_eq!(w.rate(), Some(1.0));
    }

    proptest! {
        #[test]
        fn rate_is_never_negative_and_bounded_by_total_decrease(
            values in proptest::collection::vec(1u64..1_000_000, 2..40)
        ) {
            let points: Vec<(u64, u64)> = values.iter().enumerate().map(|(i, v)| (i as u64 * 15, *v)).collect();
            let w = window_of(&points, 100_000);
            let rate = w.rate().unwrap();
            prop_assert!(rate >= 0.0);
            let span = (points.len() as u64 - 1) * 15;
            let max_drop: u64 = values.windows(2).map(|p| p[0].saturating_sub(p[1])).sum();
            prop_assert!((rate * span as f64 - max_drop as f64).abs() < 1e-6);
        }
    }
}
