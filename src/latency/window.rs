//! Sliding window of per-OSD histogram samples.

use std::collections::{BTreeMap, VecDeque};
use std::time::{Duration, Instant};

use super::{increase_of, Histogram, LatencyError};

/// Sliding window of per-OSD samples for the cluster-wide write-latency quantiles the exporter
/// publishes and the enforcer uses. Time is passed in by the caller.
///
/// Samples are kept per OSD, so an OSD that did not answer one collection (or a collection that
/// failed for some OSDs) costs only that OSD's sample, and each OSD keeps its own base sample:
/// the newest one at or before the window start, so that once the window is full its increase
/// covers the whole window. (If an OSD was silent around the window start, its base is its last
/// sample before the silence, so its increase may reach back somewhat further than the window.)
#[derive(Debug, Clone)]
pub struct LatencyWindow {
    window: Duration,
    /// Per OSD (`osd.N`), its samples oldest first.
    osds: BTreeMap<String, VecDeque<(Instant, Histogram)>>,
    /// Time of the newest sample pushed.
    newest: Option<Instant>,
}

impl LatencyWindow {
    pub fn new(window: Duration) -> Self {
        LatencyWindow {
            window,
            osds: BTreeMap::new(),
            newest: None,
        }
    }

    /// The window length this was created with.
    pub fn window(&self) -> Duration {
        self.window
    }

    /// Adds one collection's per-OSD histograms taken at `at`, then drops samples older than
    /// `window` before the newest sample's time, keeping, per OSD, the newest sample at or before
    /// the window start as the base (so the increase covers the full window once it is full).
    /// An OSD with no sample after the window start is forgotten. A sample older than the newest
    /// one is inserted in time order.
    pub fn push(&mut self, at: Instant, per_osd: BTreeMap<String, Histogram>) {
        for (osd, h) in per_osd {
            let samples = self.osds.entry(osd).or_default();
            let pos = samples.partition_point(|(t, _)| *t <= at);
            samples.insert(pos, (at, h));
        }
        let newest = self.newest.map_or(at, |n| n.max(at));
        self.newest = Some(newest);
        let Some(start) = newest.checked_sub(self.window) else {
            return; // the window reaches back before the clock's origin: nothing is too old
        };
        self.osds.retain(|_, samples| {
            while samples.len() >= 2 && samples[1].0 <= start {
                samples.pop_front();
            }
            samples.back().is_some_and(|(t, _)| *t > start)
        });
    }

    /// Cluster-wide increase over the window: per OSD, [`super::increase`] over that OSD's samples
    /// in the window (an OSD that appears part-way through contributes from its first sample,
    /// like a new Prometheus series; one that disappeared contributes what it did while
    /// present), then summed over OSDs. `None` when no OSD has 2 samples. An error when OSDs'
    /// (or one OSD's successive) histograms have different bounds.
    pub fn increase(&self) -> Result<Option<Histogram>, LatencyError> {
        let mut sum: Option<Histogram> = None;
        for samples in self.osds.values() {
            let Some(inc) = increase_of(samples.iter().map(|(_, h)| h))? else {
                continue;
            };
            match &mut sum {
                None => sum = Some(inc),
                Some(s) => s.add(&inc)?,
            }
        }
        Ok(sum)
    }

    /// Writes in the newest collection: per OSD sampled then, its count since its previous
    /// sample (a restarted OSD's counters start again from 0: its count then is all new),
    /// summed. `None` when no OSD sampled in the newest collection has an earlier sample. A
    /// window can hold writes while none of them is recent: their p99 describes writes that
    /// have stopped, not what clients see now.
    pub fn newest_writes(&self) -> Option<u64> {
        let newest = self.newest?;
        let mut sum = None;
        for samples in self.osds.values() {
            let n = samples.len();
            if n < 2 || samples[n - 1].0 != newest {
                continue;
            }
            let (last, prev) = (samples[n - 1].1.total(), samples[n - 2].1.total());
            let new = if last >= prev { last - prev } else { last };
            sum = Some(sum.unwrap_or(0u64).saturating_add(new));
        }
        sum
    }

    /// Covered span: newest minus oldest sample time over all OSDs (zero when empty), so callers
    /// can tell a half-filled window. Once full it is about `window` plus up to one collection
    /// interval (the base sample lies at or before the window start).
    pub fn span(&self) -> Duration {
        let oldest = self
            .osds
            .values()
            .filter_map(|s| s.front())
            .map(|(t, _)| *t)
            .min();
        match (oldest, self.newest) {
            (Some(o), Some(n)) => n.saturating_duration_since(o),
            _ => Duration::ZERO,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_support::{ceph_bounds, hist};
    use super::*;
    use proptest::prelude::*;
    use std::sync::Arc;

    fn sample(bounds: &Arc<[f64]>, osds: &[(&str, &[u64])]) -> BTreeMap<String, Histogram> {
        osds.iter()
            .map(|(name, counts)| (name.to_string(), hist(bounds, counts)))
            .collect()
    }

    fn secs(s: u64) -> Duration {
        Duration::from_secs(s)
    }

    #[test]
    fn empty_and_single_sample() {
        let b = ceph_bounds(3);
        let mut w = LatencyWindow::new(secs(60));
        assert_eq!(w.window(), secs(60));
        assert_eq!(w.increase(), Ok(None));
        assert_eq!(w.span(), Duration::ZERO);
        let t0 = Instant::now();
        w.push(t0, sample(&b, &[("osd.0", &[1, 2, 3])]));
        assert_eq!(w.increase(), Ok(None));
        assert_eq!(w.span(), Duration::ZERO);
        w.push(t0 + secs(10), BTreeMap::new());
        assert_eq!(
            w.increase(),
            Ok(None),
            "an empty collection adds no OSD sample"
        );
        assert_eq!(w.span(), secs(10));
    }

    #[test]
    fn sums_over_osds() {
        let b = ceph_bounds(3);
        let t0 = Instant::now();
        let mut w = LatencyWindow::new(secs(60));
        w.push(
            t0,
            sample(&b, &[("osd.0", &[1, 0, 0]), ("osd.1", &[5, 5, 5])]),
        );
        w.push(
            t0 + secs(10),
            sample(&b, &[("osd.0", &[3, 1, 0]), ("osd.1", &[6, 5, 7])]),
        );
        let inc = w.increase().unwrap().unwrap();
        assert_eq!(inc.counts, vec![2 + 1, 1, 2]);
        assert_eq!(w.span(), secs(10));
    }

    #[test]
    fn osd_appearing_and_disappearing() {
        let b = ceph_bounds(2);
        let t0 = Instant::now();
        let mut w = LatencyWindow::new(secs(100));
        w.push(t0, sample(&b, &[("osd.0", &[10, 0])]));
        // osd.1 appears: its first sample is its base, not an increase from zero.
        w.push(
            t0 + secs(10),
            sample(&b, &[("osd.0", &[12, 0]), ("osd.1", &[500, 9])]),
        );
        w.push(
            t0 + secs(20),
            sample(&b, &[("osd.0", &[15, 1]), ("osd.1", &[501, 9])]),
        );
        // osd.0 disappears: it keeps contributing what it did while present.
        w.push(t0 + secs(30), sample(&b, &[("osd.1", &[504, 10])]));
        let inc = w.increase().unwrap().unwrap();
        assert_eq!(inc.counts, vec![5 + 4, 1 + 1]);
        // osd.2 with a single sample contributes nothing.
        w.push(
            t0 + secs(40),
            sample(&b, &[("osd.1", &[504, 10]), ("osd.2", &[7, 7])]),
        );
        assert_eq!(w.increase().unwrap().unwrap().counts, vec![9, 2]);
    }

    #[test]
    fn pruning_keeps_the_base_at_or_before_the_window_start() {
        let b = ceph_bounds(2);
        let t0 = Instant::now();
        let mut w = LatencyWindow::new(secs(30));
        // One op per second, sampled every 10 s.
        for i in 0..=10u64 {
            w.push(t0 + secs(10 * i), sample(&b, &[("osd.0", &[10 * i, 0])]));
        }
        // Newest at 100 s, window start at 70 s: samples at 70, 80, 90, 100 remain.
        assert_eq!(w.span(), secs(30));
        assert_eq!(w.increase().unwrap().unwrap().counts, vec![30, 0]);
        // A sample off the 10 s grid: start 75 s, base is the one at 70 s.
        w.push(t0 + secs(105), sample(&b, &[("osd.0", &[105, 0])]));
        assert_eq!(w.span(), secs(35));
        assert_eq!(w.increase().unwrap().unwrap().counts, vec![35, 0]);
    }

    #[test]
    fn half_filled_window() {
        let b = ceph_bounds(2);
        let t0 = Instant::now();
        let mut w = LatencyWindow::new(secs(300));
        w.push(t0, sample(&b, &[("osd.0", &[0, 0])]));
        w.push(t0 + secs(15), sample(&b, &[("osd.0", &[4, 1])]));
        assert_eq!(w.span(), secs(15));
        assert_eq!(w.increase().unwrap().unwrap().counts, vec![4, 1]);
    }

    #[test]
    fn writes_in_the_newest_collection() {
        let b = ceph_bounds(2);
        let t0 = Instant::now();
        let mut w = LatencyWindow::new(secs(300));
        w.push(t0, sample(&b, &[("osd.0", &[10, 0]), ("osd.1", &[5, 0])]));
        assert_eq!(w.newest_writes(), None, "one sample: nothing to compare");
        w.push(
            t0 + secs(15),
            sample(&b, &[("osd.0", &[30, 2]), ("osd.1", &[5, 0])]),
        );
        assert_eq!(w.newest_writes(), Some(22));
        // Writes stopped: the window still holds 22, the newest collection none.
        w.push(
            t0 + secs(30),
            sample(&b, &[("osd.0", &[30, 2]), ("osd.1", &[5, 0])]),
        );
        assert_eq!(w.newest_writes(), Some(0));
        assert_eq!(w.increase().unwrap().unwrap().total(), 22);
        // osd.1 restarted (counters from 0) with 3 writes since.
        w.push(
            t0 + secs(45),
            sample(&b, &[("osd.0", &[30, 2]), ("osd.1", &[3, 0])]),
        );
        assert_eq!(w.newest_writes(), Some(3));
    }

    #[test]
    fn restart_inside_the_window() {
        let b = ceph_bounds(2);
        let t0 = Instant::now();
        let mut w = LatencyWindow::new(secs(60));
        w.push(t0, sample(&b, &[("osd.0", &[1000, 10])]));
        w.push(t0 + secs(10), sample(&b, &[("osd.0", &[1010, 10])]));
        w.push(t0 + secs(20), sample(&b, &[("osd.0", &[2, 0])])); // restarted
        w.push(t0 + secs(30), sample(&b, &[("osd.0", &[5, 1])]));
        assert_eq!(w.increase().unwrap().unwrap().counts, vec![10 + 2 + 3, 1]);
    }

    #[test]
    fn silent_osd_keeps_its_base_through_a_short_gap() {
        let b = ceph_bounds(2);
        let t0 = Instant::now();
        let mut w = LatencyWindow::new(secs(25));
        w.push(t0, sample(&b, &[("osd.0", &[0, 0]), ("osd.1", &[0, 0])]));
        // osd.1 misses the collection at 10 s and 20 s.
        w.push(t0 + secs(10), sample(&b, &[("osd.0", &[1, 0])]));
        w.push(t0 + secs(20), sample(&b, &[("osd.0", &[2, 0])]));
        // At 30 s (start 5 s) it is back: its base is its sample at 0 s, so its increase spans
        // 30 s, like osd.0's (base at 0 s too, the newest at or before the start).
        w.push(
            t0 + secs(30),
            sample(&b, &[("osd.0", &[3, 0]), ("osd.1", &[8, 0])]),
        );
        assert_eq!(w.increase().unwrap().unwrap().counts, vec![3 + 8, 0]);
        assert_eq!(w.span(), secs(30));
    }

    #[test]
    fn osd_silent_for_a_whole_window_is_forgotten() {
        let b = ceph_bounds(2);
        let t0 = Instant::now();
        let mut w = LatencyWindow::new(secs(20));
        w.push(t0, sample(&b, &[("osd.0", &[0, 0]), ("osd.1", &[0, 0])]));
        w.push(t0 + secs(10), sample(&b, &[("osd.0", &[1, 0])]));
        // At 20 s (start 0 s) osd.1 has no sample after the start: forgotten.
        w.push(t0 + secs(20), sample(&b, &[("osd.0", &[2, 0])]));
        assert_eq!(w.osds.len(), 1);
        // Back at 30 s it starts over like a new series: no increase from its old sample.
        w.push(
            t0 + secs(30),
            sample(&b, &[("osd.0", &[3, 0]), ("osd.1", &[8, 0])]),
        );
        assert_eq!(w.increase().unwrap().unwrap().counts, vec![2, 0]);
        w.push(
            t0 + secs(40),
            sample(&b, &[("osd.0", &[4, 0]), ("osd.1", &[9, 1])]),
        );
        assert_eq!(w.increase().unwrap().unwrap().counts, vec![2 + 1, 1]);
        // Everyone silent for a whole window: nothing left.
        w.push(t0 + secs(61), BTreeMap::new());
        assert!(w.osds.is_empty());
        assert_eq!(w.increase(), Ok(None));
        assert_eq!(w.span(), Duration::ZERO);
    }

    #[test]
    fn out_of_order_push_is_sorted_in() {
        let b = ceph_bounds(2);
        let t0 = Instant::now();
        let mut w = LatencyWindow::new(secs(60));
        w.push(t0 + secs(20), sample(&b, &[("osd.0", &[9, 0])]));
        w.push(t0, sample(&b, &[("osd.0", &[1, 0])]));
        w.push(t0 + secs(10), sample(&b, &[("osd.0", &[4, 0])]));
        assert_eq!(w.increase().unwrap().unwrap().counts, vec![8, 0]);
        assert_eq!(w.span(), secs(20));
    }

    #[test]
    fn zero_window_keeps_only_the_newest() {
        let b = ceph_bounds(2);
        let t0 = Instant::now();
        let mut w = LatencyWindow::new(Duration::ZERO);
        w.push(t0, sample(&b, &[("osd.0", &[1, 0])]));
        w.push(t0 + secs(1), sample(&b, &[("osd.0", &[2, 0])]));
        assert_eq!(w.increase(), Ok(None));
    }

    #[test]
    fn mismatched_bounds_are_an_error() {
        let t0 = Instant::now();
        let mut w = LatencyWindow::new(secs(60));
        let b3 = ceph_bounds(3);
        let b4 = ceph_bounds(4);
        w.push(t0, sample(&b3, &[("osd.0", &[0, 0, 0])]));
        w.push(t0, sample(&b4, &[("osd.1", &[0, 0, 0, 0])]));
        w.push(t0 + secs(1), sample(&b3, &[("osd.0", &[1, 0, 0])]));
        w.push(t0 + secs(1), sample(&b4, &[("osd.1", &[1, 0, 0, 0])]));
        assert!(matches!(
            w.increase(),
            Err(LatencyError::BoundsMismatch { .. })
        ));
    }

    proptest! {
        /// Pruning never loses coverage: with one OSD sampled at arbitrary increasing times, the
        /// window's increase equals the plain difference from the newest sample at or before the
        /// window start (or the first sample) to the newest sample, and every kept sample but
        /// the base lies inside the window.
        #[test]
        fn prop_window_pruning(
            gaps in prop::collection::vec(0u64..40, 1..30),
            incs in prop::collection::vec(0u64..100, 30),
            window in 1u64..120,
        ) {
            let b = ceph_bounds(2);
            let t0 = Instant::now();
            let mut w = LatencyWindow::new(secs(window));
            let mut t = 0u64;
            let mut count = 0u64;
            let mut all = vec![];
            for (i, g) in gaps.iter().enumerate() {
                t += g;
                count += incs[i];
                all.push((t, count));
                w.push(t0 + secs(t), sample(&b, &[("osd.0", &[count, 0])]));
            }
            let newest = t;
            let start = newest.saturating_sub(window);
            let base = if newest >= window {
                all.iter().rev().find(|(ts, _)| *ts <= start).copied().unwrap_or(all[0])
            } else {
                all[0]
            };
            let kept = &w.osds["osd.0"];
            prop_assert!(kept.iter().skip(1).all(|(ts, _)| *ts > t0 + secs(start) || newest < window));
            prop_assert_eq!(kept.front().unwrap().1.counts[0], base.1);
            let expect = count - base.1;
            match w.increase().unwrap() {
                Some(inc) => prop_assert_eq!(inc.counts[0], expect),
                None => prop_assert_eq!(kept.len(), 1),
            }
            prop_assert_eq!(w.span(), secs(newest - base.0));
        }
    }
}
