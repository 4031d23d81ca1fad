//! Recovery rate from the exporter's own samples: how fast degraded + misplaced objects go down.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// Samples of "objects still to recover" (degraded + misplaced) over a sliding window.
#[derive(Debug, Clone)]
pub struct RecoveryWindow {
    window: Duration,
    samples: VecDeque<(Instant, u64)>,
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
    pub fn push(&mut self, at: Instant, remaining: u64) {
        self.samples.push_back((at, remaining));
        let start = at.checked_sub(self.window).unwrap_or(at);
        while self.samples.len() > 2 && self.samples[1].0 <= start {
            self.samples.pop_front();
        }
    }

    /// Objects recovered per second over the window: the sum of every decrease between
    /// consecutive samples divided by the time covered. Like the runbook's `(a - b) / 900` while
    /// counts only fall; when they rise (a new failure adds work) that step counts as 0, never
    /// negative, and the decreases around it still count. `None` until two samples exist.
    pub fn rate(&self) -> Option<f64> {
        let (first, last) = (self.samples.front()?, self.samples.back()?);
        let span = last.0.checked_duration_since(first.0)?.as_secs_f64();
        if span <= 0.0 {
            return None;
        }
        let decreased: u64 = self
            .samples
            .iter()
            .zip(self.samples.iter().skip(1))
            .map(|(a, b)| a.1.saturating_sub(b.1))
            .sum();
        Some(decreased as f64 / span)
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
            w.push(t0 + Duration::from_secs(t), v);
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
            values in proptest::collection::vec(0u64..1_000_000, 2..40)
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
