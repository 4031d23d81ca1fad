//! Histogram arithmetic shared by the exporter and the enforcer: per-OSD latency histograms as
//! Ceph keeps them, their increase over a window (with counter resets), the cluster-wide merge,
//! and quantiles computed exactly like Prometheus' `histogram_quantile`.
//!
//! Everything here is pure: no I/O and no clock reads (the caller passes the time in).

pub mod aggregate;
pub mod prometheus;
mod quantile;
mod window;

pub use quantile::quantile;
pub use window::LatencyWindow;

use std::sync::Arc;

/// One OSD's write-latency histogram at one instant: Ceph's per-bucket counters (not cumulative
/// across buckets), which only grow until the OSD restarts.
#[derive(Debug, Clone, PartialEq)]
pub struct Histogram {
    /// Inclusive upper bound of each bucket in seconds, strictly ascending; the last is
    /// `f64::INFINITY`. Shared: every OSD of one cluster has the same axis.
    pub bounds: Arc<[f64]>,
    /// Operations counted in each bucket; same length as `bounds`.
    pub counts: Vec<u64>,
}

/// Ceph's `osd.op_w_latency` perf counter of one OSD: client writes counted and their summed
/// latency. Updated by the OSD together with `op_w_latency_in_bytes_histogram` for the same
/// writes, so `count` equals the histogram's total when both are read at the same instant; it
/// gives the histogram the `_sum` that Ceph's buckets lack. Only grows until the OSD restarts.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LatencySum {
    /// Writes counted (`avgcount`).
    pub count: u64,
    /// Their latencies added up, in seconds (`sum`).
    pub seconds: f64,
}

/// Why two histograms (or one) cannot be combined.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum LatencyError {
    /// The two histograms do not share the same bucket bounds (for example two OSDs of different
    /// Ceph versions, or an axis that changed across an OSD restart).
    #[error(
        "histogram bucket bounds differ: {left_len} vs {right_len} buckets, first difference at \
         bucket {index} ({} vs {})",
        fmt_bound(.left),
        fmt_bound(.right)
    )]
    BoundsMismatch {
        left_len: usize,
        right_len: usize,
        /// First index at which the bounds differ (or where the shorter one ends).
        index: usize,
        /// The bound at `index` on each side; `None` past the end.
        left: Option<f64>,
        right: Option<f64>,
    },
    /// `counts` and `bounds` do not have the same length.
    #[error("histogram has {counts} bucket counts for {bounds} bucket bounds")]
    LengthMismatch { bounds: usize, counts: usize },
    /// The bounds break the invariant (non-empty, strictly ascending, last one `+Inf`).
    #[error("invalid histogram bounds: {reason} (bucket {index}, bound {bound})")]
    InvalidBounds {
        index: usize,
        bound: f64,
        reason: &'static str,
    },
}

fn fmt_bound(b: &Option<f64>) -> String {
    match b {
        Some(v) => v.to_string(),
        None => "none".to_string(),
    }
}

impl Histogram {
    /// A histogram with every count 0 on `bounds`.
    pub fn zeros(bounds: Arc<[f64]>) -> Self {
        let counts = vec![0; bounds.len()];
        Histogram { bounds, counts }
    }

    /// Checks the invariants: as many counts as bounds, at least one bound, bounds strictly
    /// ascending (no NaN), the last one `+Inf`.
    pub fn validate(&self) -> Result<(), LatencyError> {
        if self.counts.len() != self.bounds.len() {
            return Err(LatencyError::LengthMismatch {
                bounds: self.bounds.len(),
                counts: self.counts.len(),
            });
        }
        let Some(&last) = self.bounds.last() else {
            return Err(LatencyError::InvalidBounds {
                index: 0,
                bound: f64::NAN,
                reason: "no buckets",
            });
        };
        for (i, &b) in self.bounds.iter().enumerate() {
            if b.is_nan() {
                return Err(LatencyError::InvalidBounds {
                    index: i,
                    bound: b,
                    reason: "bound is NaN",
                });
            }
            if i > 0 && b <= self.bounds[i - 1] {
                return Err(LatencyError::InvalidBounds {
                    index: i,
                    bound: b,
                    reason: "bounds are not strictly ascending",
                });
            }
        }
        if last != f64::INFINITY {
            return Err(LatencyError::InvalidBounds {
                index: self.bounds.len() - 1,
                bound: last,
                reason: "last bound is not +Inf",
            });
        }
        Ok(())
    }

    /// Operations counted in all buckets (saturating at `u64::MAX`).
    pub fn total(&self) -> u64 {
        self.counts.iter().fold(0u64, |a, &c| a.saturating_add(c))
    }

    /// Cumulative counts for Prometheus `le` buckets (same length as `bounds`): element `i` is
    /// the number of operations at or below `bounds[i]`; the last one equals [`Self::total`].
    pub fn cumulative(&self) -> Vec<u64> {
        let mut acc = 0u64;
        self.counts
            .iter()
            .map(|&c| {
                acc = acc.saturating_add(c);
                acc
            })
            .collect()
    }

    /// Bucket-wise sum (saturating); errors, leaving `self` unchanged, if the bounds differ.
    pub fn add(&mut self, other: &Histogram) -> Result<(), LatencyError> {
        check_compatible(self, other)?;
        for (a, &b) in self.counts.iter_mut().zip(&other.counts) {
            *a = a.saturating_add(b);
        }
        Ok(())
    }
}

/// Both histograms have the same bounds and as many counts as bounds.
fn check_compatible(left: &Histogram, right: &Histogram) -> Result<(), LatencyError> {
    for h in [left, right] {
        if h.counts.len() != h.bounds.len() {
            return Err(LatencyError::LengthMismatch {
                bounds: h.bounds.len(),
                counts: h.counts.len(),
            });
        }
    }
    if Arc::ptr_eq(&left.bounds, &right.bounds) || left.bounds[..] == right.bounds[..] {
        return Ok(());
    }
    let index = left
        .bounds
        .iter()
        .zip(right.bounds.iter())
        .position(|(a, b)| a != b)
        .unwrap_or_else(|| left.bounds.len().min(right.bounds.len()));
    Err(LatencyError::BoundsMismatch {
        left_len: left.bounds.len(),
        right_len: right.bounds.len(),
        index,
        left: left.bounds.get(index).copied(),
        right: right.bounds.get(index).copied(),
    })
}

/// Adds the increase from `prev` to `cur` (one step of one OSD's counters) into `acc`.
///
/// A step is a counter reset (the OSD restarted between the two samples) when the total went
/// down or any single bucket went down: Ceph's counters only grow while the daemon runs, so
/// either proves a restart, and then every bucket started again from 0 and `cur` itself is the
/// increase (as Prometheus' `increase()` adds the post-reset value). Otherwise the increase is
/// the per-bucket difference. The caller has checked that all three are compatible.
fn add_step(acc: &mut [u64], prev: &Histogram, cur: &Histogram) {
    let reset =
        cur.total() < prev.total() || cur.counts.iter().zip(&prev.counts).any(|(c, p)| c < p);
    for ((a, &c), &p) in acc.iter_mut().zip(&cur.counts).zip(&prev.counts) {
        let step = if reset { c } else { c - p };
        *a = a.saturating_add(step);
    }
}

/// Accumulates the increase over consecutive samples of one OSD (oldest first); `None` with
/// fewer than two samples. Errors if any sample's bounds differ from the first one's.
fn increase_of<'a, I>(samples: I) -> Result<Option<Histogram>, LatencyError>
where
    I: IntoIterator<Item = &'a Histogram>,
{
    let mut iter = samples.into_iter();
    let Some(first) = iter.next() else {
        return Ok(None);
    };
    let mut acc: Option<Histogram> = None;
    let mut prev = first;
    for cur in iter {
        check_compatible(first, cur)?;
        let acc = acc.get_or_insert_with(|| Histogram::zeros(first.bounds.clone()));
        add_step(&mut acc.counts, prev, cur);
        prev = cur;
    }
    if acc.is_none() {
        // A single sample: still report a malformed one rather than hide it.
        check_compatible(first, first)?;
    }
    Ok(acc)
}

/// Increase of one OSD's counters over consecutive samples (oldest first), with counter-reset
/// handling the way Prometheus' `increase()` treats resets: between two consecutive samples, if
/// the total went down (the OSD restarted), the later sample's counts are the increase for that
/// step, else the per-bucket difference. A bucket that went down while the total did not is also
/// a reset of the whole step (every Ceph counter restarts together), so the later sample's
/// counts are used for every bucket of that step. No extrapolation. `None` if fewer than 2
/// samples; an error if the samples' bounds differ.
pub fn increase(samples: &[&Histogram]) -> Result<Option<Histogram>, LatencyError> {
    increase_of(samples.iter().copied())
}

#[cfg(test)]
pub(crate) mod test_support {
    use super::Histogram;
    use std::sync::Arc;

    /// Ceph's write-latency axis: 100 µs, 200 µs, 400 µs, ... (`n - 1` finite bounds), +Inf.
    pub fn ceph_bounds(n: usize) -> Arc<[f64]> {
        let mut b: Vec<f64> = (0..n - 1).map(|k| 0.0001 * f64::from(1u32 << k)).collect();
        b.push(f64::INFINITY);
        b.into()
    }

    pub fn hist(bounds: &Arc<[f64]>, counts: &[u64]) -> Histogram {
        assert_eq!(bounds.len(), counts.len());
        Histogram {
            bounds: bounds.clone(),
            counts: counts.to_vec(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::test_support::{ceph_bounds, hist};
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn ceph_bounds_are_the_documented_axis() {
        let b = ceph_bounds(5);
        assert_eq!(&b[..], &[0.0001, 0.0002, 0.0004, 0.0008, f64::INFINITY]);
        assert!(Histogram::zeros(ceph_bounds(32)).validate().is_ok());
    }

    #[test]
    fn total_and_cumulative() {
        let b = ceph_bounds(4);
        let h = hist(&b, &[3, 0, 5, 2]);
        assert_eq!(h.total(), 10);
        assert_eq!(h.cumulative(), vec![3, 3, 8, 10]);
        let empty = Histogram::zeros(b.clone());
        assert_eq!(empty.total(), 0);
        assert_eq!(empty.cumulative(), vec![0, 0, 0, 0]);
        let single = hist(&Arc::from(vec![f64::INFINITY]), &[7]);
        assert_eq!(single.total(), 7);
        assert_eq!(single.cumulative(), vec![7]);
        let huge = hist(&ceph_bounds(2), &[u64::MAX, 1]);
        assert_eq!(huge.total(), u64::MAX);
        assert_eq!(huge.cumulative(), vec![u64::MAX, u64::MAX]);
    }

    #[test]
    fn validate_rejects_broken_invariants() {
        let ok = hist(&ceph_bounds(3), &[1, 2, 3]);
        assert_eq!(ok.validate(), Ok(()));
        let short = Histogram {
            bounds: ceph_bounds(3),
            counts: vec![1, 2],
        };
        assert_eq!(
            short.validate(),
            Err(LatencyError::LengthMismatch {
                bounds: 3,
                counts: 2
            })
        );
        let empty = Histogram {
            bounds: Arc::from(Vec::new()),
            counts: vec![],
        };
        assert!(matches!(
            empty.validate(),
            Err(LatencyError::InvalidBounds {
                reason: "no buckets",
                ..
            })
        ));
        let no_inf = hist(&Arc::from(vec![0.1, 0.2]), &[1, 1]);
        assert!(matches!(
            no_inf.validate(),
            Err(LatencyError::InvalidBounds { index: 1, .. })
        ));
        let unsorted = hist(&Arc::from(vec![0.2, 0.1, f64::INFINITY]), &[1, 1, 1]);
        assert!(matches!(
            unsorted.validate(),
            Err(LatencyError::InvalidBounds { index: 1, .. })
        ));
        let dup = hist(&Arc::from(vec![0.1, 0.1, f64::INFINITY]), &[1, 1, 1]);
        assert!(dup.validate().is_err());
        let nan = hist(&Arc::from(vec![f64::NAN, f64::INFINITY]), &[1, 1]);
        assert!(nan.validate().is_err());
    }

    #[test]
    fn add_sums_buckets_and_checks_bounds() {
        let b = ceph_bounds(3);
        let mut a = hist(&b, &[1, 2, 3]);
        a.add(&hist(&b, &[10, 0, 1])).unwrap();
        assert_eq!(a.counts, vec![11, 2, 4]);
        // Equal bounds in a different allocation are the same axis.
        let b2: Arc<[f64]> = Arc::from(b.to_vec());
        a.add(&hist(&b2, &[1, 1, 1])).unwrap();
        assert_eq!(a.counts, vec![12, 3, 5]);

        let before = a.clone();
        let other = hist(&Arc::from(vec![0.0001, 0.0003, f64::INFINITY]), &[1, 1, 1]);
        let err = a.add(&other).unwrap_err();
        assert_eq!(
            err,
            LatencyError::BoundsMismatch {
                left_len: 3,
                right_len: 3,
                index: 1,
                left: Some(0.0002),
                right: Some(0.0003),
            }
        );
        assert_eq!(
            err.to_string(),
            "histogram bucket bounds differ: 3 vs 3 buckets, first difference at bucket 1 \
             (0.0002 vs 0.0003)"
        );
        assert_eq!(a, before, "a failed add leaves the histogram unchanged");

        let longer = Histogram::zeros(ceph_bounds(4));
        let err = a.add(&longer).unwrap_err();
        assert_eq!(
            err,
            LatencyError::BoundsMismatch {
                left_len: 3,
                right_len: 4,
                index: 2,
                left: Some(f64::INFINITY),
                right: Some(0.0004),
            }
        );
        let prefix = hist(&Arc::from(vec![0.0001, 0.0002]), &[0, 0]);
        let err = a.add(&prefix).unwrap_err();
        assert!(matches!(
            err,
            LatencyError::BoundsMismatch {
                index: 2,
                left: Some(_),
                right: None,
                ..
            }
        ));
        assert!(err.to_string().contains("(inf vs none)"), "{err}");

        let mut saturating = hist(&ceph_bounds(2), &[u64::MAX - 1, 0]);
        saturating.add(&hist(&ceph_bounds(2), &[5, 5])).unwrap();
        assert_eq!(saturating.counts, vec![u64::MAX, 5]);
    }

    #[test]
    fn increase_needs_two_samples() {
        let b = ceph_bounds(3);
        let h = hist(&b, &[1, 2, 3]);
        assert_eq!(increase(&[]), Ok(None));
        assert_eq!(increase(&[&h]), Ok(None));
        assert_eq!(increase(&[&h, &h]), Ok(Some(Histogram::zeros(b.clone()))));
    }

    #[test]
    fn increase_plain_difference_without_reset() {
        let b = ceph_bounds(4);
        let s0 = hist(&b, &[10, 5, 0, 1]);
        let s1 = hist(&b, &[12, 5, 3, 1]);
        let s2 = hist(&b, &[20, 9, 3, 2]);
        let inc = increase(&[&s0, &s1, &s2]).unwrap().unwrap();
        assert_eq!(inc.counts, vec![10, 4, 3, 1]);
        assert!(Arc::ptr_eq(&inc.bounds, &b));
    }

    #[test]
    fn increase_total_went_down_is_a_reset() {
        let b = ceph_bounds(3);
        let s0 = hist(&b, &[100, 50, 10]);
        let s1 = hist(&b, &[110, 55, 10]); // +10, +5, 0
        let s2 = hist(&b, &[3, 1, 0]); // restart: counts themselves
        let s3 = hist(&b, &[5, 1, 2]); // +2, 0, +2
        let inc = increase(&[&s0, &s1, &s2, &s3]).unwrap().unwrap();
        assert_eq!(inc.counts, vec![10 + 3 + 2, 5 + 1, 2]);
    }

    #[test]
    fn increase_restart_to_zero() {
        let b = ceph_bounds(2);
        let s0 = hist(&b, &[7, 1]);
        let s1 = hist(&b, &[0, 0]);
        assert_eq!(increase(&[&s0, &s1]).unwrap().unwrap().counts, vec![0, 0]);
    }

    #[test]
    fn increase_bucket_down_total_not_down_is_a_reset_of_the_step() {
        // The OSD restarted and, by the next sample, saw more slow ops than it had in total
        // before: the total went up, yet bucket 0 went down. Every counter restarted, so the
        // later sample is the step's increase in every bucket (not 0 for bucket 0 and the
        // difference elsewhere).
        let b = ceph_bounds(3);
        let s0 = hist(&b, &[10, 2, 0]);
        let s1 = hist(&b, &[4, 3, 9]);
        assert_eq!(
            increase(&[&s0, &s1]).unwrap().unwrap().counts,
            vec![4, 3, 9]
        );
        // Equal total with a shifted bucket is also a reset.
        let s2 = hist(&b, &[9, 3, 0]);
        let s3 = hist(&b, &[8, 4, 0]);
        assert_eq!(
            increase(&[&s2, &s3]).unwrap().unwrap().counts,
            vec![8, 4, 0]
        );
    }

    #[test]
    fn increase_rejects_mismatched_bounds() {
        let s0 = hist(&ceph_bounds(3), &[1, 1, 1]);
        let s1 = hist(&ceph_bounds(4), &[1, 1, 1, 1]);
        assert!(matches!(
            increase(&[&s0, &s1]),
            Err(LatencyError::BoundsMismatch { .. })
        ));
        let bad = Histogram {
            bounds: ceph_bounds(3),
            counts: vec![1],
        };
        assert!(matches!(
            increase(&[&s0, &bad]),
            Err(LatencyError::LengthMismatch { .. })
        ));
        assert!(matches!(
            increase(&[&bad]),
            Err(LatencyError::LengthMismatch { .. })
        ));
    }

    /// A sequence of cumulative-counter samples of one OSD: each step either grows every
    /// bucket by a random amount or restarts the counters at small random values.
    fn samples_strategy() -> impl Strategy<Value = (Vec<Vec<u64>>, Vec<bool>)> {
        (1usize..6, 2usize..8).prop_flat_map(|(nb, ns)| {
            (
                prop::collection::vec(0u64..1_000_000, nb),
                prop::collection::vec(
                    (prop::collection::vec(0u64..1000, nb), any::<bool>()),
                    ns - 1,
                ),
            )
                .prop_map(|(start, steps)| {
                    let mut samples = vec![start];
                    let mut resets = Vec::new();
                    for (delta, restart) in steps {
                        let prev = samples.last().unwrap();
                        let next: Vec<u64> = if restart {
                            delta.clone()
                        } else {
                            prev.iter().zip(&delta).map(|(p, d)| p + d).collect()
                        };
                        resets.push(restart);
                        samples.push(next);
                    }
                    (samples, resets)
                })
        })
    }

    proptest! {
        #[test]
        fn prop_increase_matches_model((samples, resets) in samples_strategy()) {
            let b = ceph_bounds(samples[0].len() + 1);
            let hs: Vec<Histogram> = samples
                .iter()
                .map(|s| {
                    let mut c = s.clone();
                    c.push(0);
                    hist(&b, &c)
                })
                .collect();
            let refs: Vec<&Histogram> = hs.iter().collect();
            let inc = increase(&refs).unwrap().unwrap();
            // Model: per step, the difference, or on a detected reset the later counts.
            let mut expect = vec![0u64; b.len()];
            for w in hs.windows(2) {
                let reset = w[1].counts.iter().zip(&w[0].counts).any(|(c, p)| c < p);
                for (e, (c, p)) in expect.iter_mut().zip(w[1].counts.iter().zip(&w[0].counts)) {
                    *e += if reset { *c } else { c - p };
                }
            }
            prop_assert_eq!(&inc.counts, &expect);
            // A step whose counters never went down is a plain difference: with no restart in
            // the sequence the increase is last - first.
            if !resets.iter().any(|&r| r) {
                let first = &hs[0];
                let last = &hs[hs.len() - 1];
                let diff: Vec<u64> =
                    last.counts.iter().zip(&first.counts).map(|(l, f)| l - f).collect();
                prop_assert_eq!(&inc.counts, &diff);
            }
            // Never below what the samples after each restart account for.
            prop_assert!(inc.total() >= hs[hs.len() - 1].total().saturating_sub(hs[0].total()));
        }

        #[test]
        fn prop_increase_with_arbitrary_counters_never_panics(
            raw in prop::collection::vec(prop::collection::vec(any::<u64>(), 3), 2..6)
        ) {
            // Arbitrary (even decreasing, even huge) counters: no panic, no underflow, and each
            // bucket's increase is at most the sum of the later samples' counts.
            let b = ceph_bounds(3);
            let hs: Vec<Histogram> = raw.iter().map(|c| hist(&b, c)).collect();
            let refs: Vec<&Histogram> = hs.iter().collect();
            let inc = increase(&refs).unwrap().unwrap();
            for i in 0..3 {
                let bound = hs[1..].iter().fold(0u64, |a, h| a.saturating_add(h.counts[i]));
                prop_assert!(inc.counts[i] <= bound);
            }
        }

        #[test]
        fn prop_add_is_commutative(
            a in prop::collection::vec(0u64..1 << 40, 4),
            c in prop::collection::vec(0u64..1 << 40, 4),
        ) {
            let b = ceph_bounds(4);
            let mut x = hist(&b, &a);
            x.add(&hist(&b, &c)).unwrap();
            let mut y = hist(&b, &c);
            y.add(&hist(&b, &a)).unwrap();
            prop_assert_eq!(&x, &y);
            prop_assert_eq!(x.total(), a.iter().sum::<u64>() + c.iter().sum::<u64>());
        }
    }
}
