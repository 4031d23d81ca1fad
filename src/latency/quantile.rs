//! `histogram_quantile` as Prometheus computes it for classic (`le`) buckets.

use super::Histogram;

/// q-quantile of `h` with exactly the semantics of Prometheus' `histogram_quantile` over classic
/// buckets (`bucketQuantile` in promql/quantile.go, as of Prometheus 2.42), so that a number the
/// exporter publishes and the same expression evaluated by Prometheus over the same bucket
/// counts agree to the bit:
///
/// - `q` NaN gives `Some(NaN)`, `q < 0` gives `Some(-Inf)`, `q > 1` gives `Some(+Inf)`; these
///   are checked first, as in Prometheus, so they hold even for an empty histogram.
/// - Where Prometheus gives NaN for lack of data we give `None` (we publish nothing): no
///   observation at all, fewer than two buckets, or a histogram that breaks the [`Histogram`]
///   invariants (counts/bounds lengths differ, bounds not strictly ascending, last bound not
///   `+Inf`; Prometheus would sort, merge equal bounds, or give NaN there).
/// - rank = q * total; the bucket is the first one (searching all but the `+Inf` bucket) whose
///   cumulative count is >= rank, so among buckets with equal cumulative counts the lowest wins.
///   If none is, the rank is in the `+Inf` bucket and the result is the upper bound of the last
///   finite bucket.
/// - If that is the first bucket and its upper bound is <= 0, that bound is the result.
///   Otherwise the lower bound of the first bucket is 0, and the result is interpolated linearly
///   inside the bucket: `start + (end - start) * ((rank - cum[b-1]) / count[b])`, evaluated in
///   the same order of f64 operations as Prometheus.
/// - One Prometheus quirk is kept on purpose: `q == 0` with an empty first bucket is
///   `Some(NaN)` (rank 0 selects the empty first bucket and interpolation divides 0 by 0).
///
/// Prometheus' repairs of non-monotonic bucket series ("ensureMonotonic", and since 2.49 the
/// 1e-12 relative small-delta tolerance) never apply here: our cumulative counts are exact
/// integer running sums, monotonic by construction, and their conversion to f64 is monotonic
/// too. (The tolerance could only matter above 1e12 operations in one window.)
pub fn quantile(q: f64, h: &Histogram) -> Option<f64> {
    if q.is_nan() {
        return Some(f64::NAN);
    }
    if q < 0.0 {
        return Some(f64::NEG_INFINITY);
    }
    if q > 1.0 {
        return Some(f64::INFINITY);
    }
    if h.validate().is_err() || h.bounds.len() < 2 {
        return None;
    }
    let bounds = &h.bounds[..];
    let n = bounds.len();
    let observations = h.total() as f64;
    if observations == 0.0 {
        return None;
    }
    let mut rank = q * observations;

    // sort.Search over buckets[0..n-1] for the first cumulative count >= rank; cumulative
    // counts are monotonic, so the first hit of a linear scan is the same bucket.
    let mut cum = 0u64;
    let mut prev_cum = 0u64;
    let mut b = n - 1;
    for (i, &c) in h.counts[..n - 1].iter().enumerate() {
        prev_cum = cum;
        cum = cum.saturating_add(c);
        if cum as f64 >= rank {
            b = i;
            break;
        }
    }
    if b == n - 1 {
        return Some(bounds[n - 2]);
    }
    if b == 0 && bounds[0] <= 0.0 {
        return Some(bounds[0]);
    }
    let bucket_end = bounds[b];
    let mut count = cum as f64;
    let mut bucket_start = 0.0;
    if b > 0 {
        bucket_start = bounds[b - 1];
        count -= prev_cum as f64;
        rank -= prev_cum as f64;
    }
    Some(bucket_start + (bucket_end - bucket_start) * (rank / count))
}

#[cfg(test)]
mod tests {
    use super::super::test_support::{ceph_bounds, hist};
    use super::*;
    use proptest::prelude::*;
    use std::sync::Arc;

    fn q(qv: f64, bounds: &Arc<[f64]>, counts: &[u64]) -> Option<f64> {
        quantile(qv, &hist(bounds, counts))
    }

    /// Asserts bit-for-bit equality, NaN included.
    fn assert_bits(got: Option<f64>, want: Option<f64>) {
        match (got, want) {
            (Some(g), Some(w)) if g.is_nan() && w.is_nan() => {}
            (Some(g), Some(w)) => assert_eq!(g.to_bits(), w.to_bits(), "got {g:e}, want {w:e}"),
            _ => assert_eq!(got, want),
        }
    }

    // ---- Hand-computed cases -------------------------------------------------------------

    #[test]
    fn special_q_values_come_first() {
        let b = ceph_bounds(4);
        let some = [1, 2, 3, 4];
        let empty = [0, 0, 0, 0];
        for counts in [&some[..], &empty[..]] {
            assert!(q(f64::NAN, &b, counts).unwrap().is_nan());
            assert_eq!(q(-0.01, &b, counts), Some(f64::NEG_INFINITY));
            assert_eq!(q(f64::NEG_INFINITY, &b, counts), Some(f64::NEG_INFINITY));
            assert_eq!(q(1.01, &b, counts), Some(f64::INFINITY));
            assert_eq!(q(f64::INFINITY, &b, counts), Some(f64::INFINITY));
        }
        // Even on a malformed histogram, like Prometheus (it checks q before the buckets).
        let bad = Histogram {
            bounds: ceph_bounds(2),
            counts: vec![],
        };
        assert_eq!(quantile(2.0, &bad), Some(f64::INFINITY));
        assert_eq!(quantile(-2.0, &bad), Some(f64::NEG_INFINITY));
    }

    #[test]
    fn no_data_is_none() {
        let b = ceph_bounds(4);
        for qv in [0.0, 0.5, 0.99, 1.0] {
            assert_eq!(q(qv, &b, &[0, 0, 0, 0]), None, "empty, q={qv}");
            // A single (+Inf) bucket: Prometheus needs at least two buckets.
            assert_eq!(q(qv, &Arc::from(vec![f64::INFINITY]), &[5]), None);
        }
        // Malformed histograms publish nothing.
        let no_inf = hist(&Arc::from(vec![0.1, 0.2]), &[1, 1]);
        assert_eq!(quantile(0.5, &no_inf), None);
        let unsorted = hist(&Arc::from(vec![0.2, 0.1, f64::INFINITY]), &[1, 1, 1]);
        assert_eq!(quantile(0.5, &unsorted), None);
        let short = Histogram {
            bounds: ceph_bounds(3),
            counts: vec![1, 1],
        };
        assert_eq!(quantile(0.5, &short), None);
    }

    #[test]
    fn interpolates_inside_the_bucket() {
        let b = ceph_bounds(4); // 0.0001, 0.0002, 0.0004, +Inf
                                // 10 ops: 2 <= 100 µs, 4 in (100, 200], 4 in (200, 400].
        let c = [2, 4, 4, 0];
        // rank 5 -> bucket 1 (cum 6), 3 of its 4 ops: 0.0001 + 0.0001 * 0.75.
        assert_bits(
            q(0.5, &b, &c),
            Some(0.0001 + (0.0002 - 0.0001) * (3.0 / 4.0)),
        );
        assert!((q(0.5, &b, &c).unwrap() - 0.000175).abs() < 1e-15);
        // rank 1 -> first bucket from 0: 0 + 0.0001 * 1/2.
        assert_bits(q(0.1, &b, &c), Some(0.00005));
        // rank 9.9 -> bucket 2: 0.0002 + 0.0002 * (3.9 / 4).
        let want = 0.0002 + (0.0004 - 0.0002) * ((0.99 * 10.0 - 6.0) / 4.0);
        assert_bits(q(0.99, &b, &c), Some(want));
        assert!((want - 0.000395).abs() < 1e-12);
        // q = 1: rank 10 = cum of bucket 2 -> its upper bound.
        assert_bits(q(1.0, &b, &c), Some(0.0004));
    }

    #[test]
    fn rank_in_the_inf_bucket_gives_the_last_finite_bound() {
        let b = ceph_bounds(4);
        // Everything in +Inf: every q in (0, 1] gives the last finite bound.
        for qv in [0.01, 0.5, 0.99, 1.0] {
            assert_bits(q(qv, &b, &[0, 0, 0, 7]), Some(0.0004));
        }
        // q = 0 there: rank 0 hits the empty first bucket: 0 * (0 / 0) = NaN, as Prometheus.
        assert!(q(0.0, &b, &[0, 0, 0, 7]).unwrap().is_nan());
        // Part in +Inf: q beyond the finite share lands in +Inf.
        assert_bits(q(0.95, &b, &[5, 0, 4, 1]), Some(0.0004));
        assert_bits(q(0.9, &b, &[5, 0, 4, 1]), Some(0.0004)); // rank 9 = cum[2]
                                                              // With only two buckets (one finite) the answer is that bound.
        let two: Arc<[f64]> = Arc::from(vec![0.5, f64::INFINITY]);
        assert_bits(q(0.99, &two, &[0, 3]), Some(0.5));
        assert_bits(q(0.5, &two, &[2, 2]), Some(0.5));
        assert_bits(q(0.25, &two, &[2, 2]), Some(0.25));
    }

    #[test]
    fn q_zero_and_one() {
        let b = ceph_bounds(4);
        // q = 0 with a non-empty first bucket: its lower bound, 0.
        assert_bits(q(0.0, &b, &[1, 0, 5, 0]), Some(0.0));
        // q = 0 with an empty first bucket: NaN (Prometheus' 0/0).
        assert!(q(0.0, &b, &[0, 3, 5, 0]).unwrap().is_nan());
        // q = 1: upper bound of the last non-empty finite bucket when +Inf is empty...
        assert_bits(q(1.0, &b, &[1, 0, 5, 0]), Some(0.0004));
        assert_bits(q(1.0, &b, &[1, 4, 0, 0]), Some(0.0002));
        // ...and the last finite bound when +Inf has anything.
        assert_bits(q(1.0, &b, &[1, 4, 0, 1]), Some(0.0004));
    }

    #[test]
    fn equal_count_buckets_pick_the_lowest() {
        let b = ceph_bounds(6); // 0.0001 .. 0.0016, +Inf
                                // cum = 0, 10, 10, 10, 20, 20: rank 10 is reached first in bucket 1 -> its upper bound,
                                // not anywhere in the empty buckets 2 and 3.
        let c = [0, 10, 0, 0, 10, 0];
        assert_bits(
            q(0.5, &b, &c),
            Some(0.0001 + (0.0002 - 0.0001) * (10.0 / 10.0)),
        );
        // Just above: skips the empty buckets into bucket 4 (0.0008, 0.0016].
        let want = 0.0008 + (0.0016 - 0.0008) * ((0.55 * 20.0 - 10.0) / 10.0);
        assert_bits(q(0.55, &b, &c), Some(want));
        // Upper empty buckets: q = 1 stops at the last bucket that reached the total.
        assert_bits(q(1.0, &b, &c), Some(0.0016));
    }

    #[test]
    fn non_positive_first_bound() {
        // An underflow bucket at 0 (or below): its bound is returned, no interpolation.
        let b: Arc<[f64]> = Arc::from(vec![0.0, 0.0001, f64::INFINITY]);
        assert_bits(q(0.25, &b, &[2, 2, 0]), Some(0.0));
        assert_bits(q(0.75, &b, &[2, 2, 0]), Some(0.0 + 0.0001 * (1.0 / 2.0)));
        let neg: Arc<[f64]> = Arc::from(vec![-1.0, 1.0, f64::INFINITY]);
        assert_bits(q(0.1, &neg, &[5, 5, 0]), Some(-1.0));
        assert_bits(q(0.75, &neg, &[5, 5, 0]), Some(-1.0 + 2.0 * (2.5 / 5.0)));
        // q = 0 with an empty non-positive first bucket: the bound, not NaN.
        assert_bits(q(0.0, &neg, &[0, 5, 0]), Some(-1.0));
    }

    #[test]
    fn counts_beyond_f64_precision_do_not_panic() {
        let b = ceph_bounds(3);
        let v = q(0.5, &b, &[u64::MAX, u64::MAX, 0]).unwrap();
        assert!((0.0..=0.0002).contains(&v));
    }

    // ---- Cases confirmed by real Prometheus 2.42 ----------------------------------------
    //
    // Each row was evaluated by `promtool test rules` (Prometheus 2.42.0, /usr/bin/promtool)
    // with the bucket series below as `m_bucket{le="..."}` (cumulative counts, one sample at
    // t=0) and the expression `histogram_quantile(Q, m_bucket)` at eval_time 0; the expected
    // value in the test file is the one in the row, and promtool compares it with
    // reflect.DeepEqual, i.e. bit for bit. NaN rows used `X != bool X` (1 exactly when X is
    // NaN). The test file, for the first row:
    //
    // ```yaml
    // rule_files: []
    // evaluation_interval: 1m
    // tests:
    //   - interval: 1m
    //     input_series:
    //       - series: 'm_bucket{le="0.0001"}'
    //         values: '2'
    //       - series: 'm_bucket{le="0.0002"}'
    //         values: '6'
    //       - series: 'm_bucket{le="0.0004"}'
    //         values: '10'
    //       - series: 'm_bucket{le="+Inf"}'
    //         values: '10'
    //     promql_expr_test:
    //       - expr: histogram_quantile(0.99, m_bucket)
    //         eval_time: 0
    //         exp_samples:
    //           - labels: '{}'
    //             value: 3.9500000000000004e-04
    // ```
    //
    // The whole file is reproduced by `promtool_rule_file()` below and checked again by
    // `promtool_agrees_on_the_quantile_table` whenever promtool is installed.

    /// (q, finite bounds, per-bucket counts incl. +Inf, Prometheus' answer; None = NaN).
    type Row = (f64, &'static [f64], &'static [u64], Option<f64>);

    const B4: &[f64] = &[0.0001, 0.0002, 0.0004];
    const B6: &[f64] = &[0.0001, 0.0002, 0.0004, 0.0008, 0.0016];
    /// Part of Ceph's real axis: 12.8 ms .. 409.6 ms.
    const CEPH: &[f64] = &[0.0128, 0.0256, 0.0512, 0.1024, 0.2048, 0.4096];

    const PROMETHEUS_ROWS: &[Row] = &[
        (0.99, B4, &[2, 4, 4, 0], Some(3.9500000000000004e-04)),
        (0.5, B4, &[2, 4, 4, 0], Some(1.7500000000000003e-04)),
        (0.1, B4, &[2, 4, 4, 0], Some(5e-05)),
        (1.0, B4, &[2, 4, 4, 0], Some(4e-04)),
        (0.0, B4, &[2, 4, 4, 0], Some(0.0)),
        // all in +Inf
        (0.99, B4, &[0, 0, 0, 7], Some(4e-04)),
        (0.0, B4, &[0, 0, 0, 7], None),
        // empty first bucket, q = 0
        (0.0, B4, &[0, 3, 5, 0], None),
        // equal cumulative counts: lowest bucket wins
        (0.5, B6, &[0, 10, 0, 0, 10, 0], Some(2e-04)),
        (0.55, B6, &[0, 10, 0, 0, 10, 0], Some(8.8e-04)),
        (1.0, B6, &[0, 10, 0, 0, 10, 0], Some(1.6e-03)),
        // a realistic window during recovery (Ceph's axis, ms range)
        (
            0.99,
            CEPH,
            &[120, 800, 2400, 900, 300, 60, 20],
            Some(3.208533333333333e-01),
        ),
        (
            0.5,
            CEPH,
            &[120, 800, 2400, 900, 300, 60, 20],
            Some(4.032e-02),
        ),
        (
            0.95,
            CEPH,
            &[120, 800, 2400, 900, 300, 60, 20],
            Some(1.5360000000000001e-01),
        ),
        // empty histogram
        (0.99, B4, &[0, 0, 0, 0], None),
    ];

    #[test]
    fn matches_prometheus_table() {
        for &(qv, finite, counts, want) in PROMETHEUS_ROWS {
            let h = hist_from(finite, counts);
            let got = quantile(qv, &h);
            match want {
                // Prometheus NaN: the empty histogram is None for us, the q=0 quirk Some(NaN).
                None if h.total() == 0 => assert_eq!(got, None),
                None => assert!(got.unwrap().is_nan(), "q={qv} {counts:?}: {got:?}"),
                Some(w) => assert_bits(got, Some(w)),
            }
        }
    }

    fn hist_from(finite: &[f64], counts: &[u64]) -> Histogram {
        let mut b = finite.to_vec();
        b.push(f64::INFINITY);
        hist(&Arc::from(b), counts)
    }

    /// Go's shortest float rendering is what we also write here (Rust's `{:e}` gives the same
    /// digits), so the file states exactly the f64 under test.
    fn promtool_rule_file() -> String {
        let mut s = String::from("rule_files: []\nevaluation_interval: 1m\ntests:\n");
        for &(qv, finite, counts, want) in PROMETHEUS_ROWS {
            s.push_str("  - interval: 1m\n    input_series:\n");
            let mut cum = 0;
            for (i, c) in counts.iter().enumerate() {
                cum += c;
                let le = finite.get(i).map_or("+Inf".to_string(), |b| format!("{b}"));
                s.push_str(&format!(
                    "      - series: 'm_bucket{{le=\"{le}\"}}'\n        values: '{cum}'\n"
                ));
            }
            s.push_str("    promql_expr_test:\n");
            let (expr, value) = match want {
                Some(w) => (format!("histogram_quantile({qv}, m_bucket)"), format!("{w:e}")),
                None => (
                    format!("histogram_quantile({qv}, m_bucket) != bool histogram_quantile({qv}, m_bucket)"),
                    "1".to_string(),
                ),
            };
            s.push_str(&format!(
                "      - expr: {expr}\n        eval_time: 0\n        exp_samples:\n          - labels: '{{}}'\n            value: {value}\n"
            ));
        }
        s
    }

    #[test]
    fn promtool_agrees_on_the_quantile_table() {
        let promtool = std::path::Path::new("/usr/bin/promtool");
        if !promtool.exists() {
            eprintln!("NOTICE: /usr/bin/promtool not found; skipping the live Prometheus check");
            return;
        }
        let dir = std::env::temp_dir().join(format!("crb-quantile-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("quantile_test.yml");
        std::fs::write(&file, promtool_rule_file()).unwrap();
        let out = std::process::Command::new(promtool)
            .arg("test")
            .arg("rules")
            .arg(&file)
            .output()
            .expect("run promtool");
        let _ = std::fs::remove_dir_all(&dir);
        assert!(
            out.status.success(),
            "promtool disagrees:\n{}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }

    // ---- Properties ---------------------------------------------------------------------

    fn hist_strategy() -> impl Strategy<Value = Histogram> {
        (2usize..12)
            .prop_flat_map(|n| prop::collection::vec(0u64..50, n))
            .prop_map(|counts| hist(&ceph_bounds(counts.len()), &counts))
    }

    proptest! {
        #[test]
        fn prop_monotonic_in_q(h in hist_strategy(), a in 0.0f64..=1.0, b in 0.0f64..=1.0) {
            let (lo, hi) = if a <= b { (a, b) } else { (b, a) };
            match (quantile(lo, &h), quantile(hi, &h)) {
                (None, None) => prop_assert_eq!(h.total(), 0),
                // q = 0 over an empty first bucket is NaN; nothing to compare.
                (Some(x), Some(_)) if x.is_nan() => prop_assert!(lo == 0.0 && h.counts[0] == 0),
                (Some(x), Some(y)) => prop_assert!(x <= y, "q {} -> {}, q {} -> {}", lo, x, hi, y),
                other => prop_assert!(false, "{:?}", other),
            }
        }

        #[test]
        fn prop_within_the_selected_bucket(h in hist_strategy(), qv in 0.0f64..=1.0) {
            let Some(v) = quantile(qv, &h) else {
                prop_assert_eq!(h.total(), 0);
                return Ok(());
            };
            if v.is_nan() {
                prop_assert!(qv == 0.0 && h.counts[0] == 0);
                return Ok(());
            }
            let n = h.bounds.len();
            let last_finite = h.bounds[n - 2];
            prop_assert!((0.0..=last_finite).contains(&v), "{} outside [0, {}]", v, last_finite);
            // The value lies in the bucket holding the rank (or is the last finite bound).
            let cum = h.cumulative();
            let rank = qv * h.total() as f64;
            match cum[..n - 1].iter().position(|&c| c as f64 >= rank) {
                Some(b) => {
                    let lo = if b == 0 { 0.0 } else { h.bounds[b - 1] };
                    prop_assert!(v >= lo && v <= h.bounds[b], "{} not in [{}, {}]", v, lo, h.bounds[b]);
                }
                None => prop_assert_eq!(v, last_finite),
            }
        }

        #[test]
        fn prop_quantile_of_scaled_histogram_is_the_same(h in hist_strategy(), qv in 0.01f64..=1.0, k in 1u64..5) {
            // Multiplying every count by k moves no rank across a bucket boundary.
            let scaled = Histogram { bounds: h.bounds.clone(), counts: h.counts.iter().map(|c| c * k).collect() };
            match (quantile(qv, &h), quantile(qv, &scaled)) {
                (Some(a), Some(b)) => prop_assert!((a - b).abs() <= 1e-12 * a.abs().max(1e-9), "{} vs {}", a, b),
                (a, b) => prop_assert_eq!(a, b),
            }
        }
    }
}
