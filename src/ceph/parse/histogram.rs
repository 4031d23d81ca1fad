//! `perf histogram dump` of an OSD (`ceph tell osd.N ...` or `ceph daemon osd.N ...`): the
//! write-latency histogram `osd.op_w_latency_in_bytes_histogram`.
//!
//! That histogram is 2-D, `values[latency][request size]`, each cell a counter that only grows
//! until the OSD restarts (counts per bucket, not cumulative across buckets). We sum over the
//! request-size axis.
//!
//! Units: the latency axis is labelled "Latency (usec)" with `quant_size` 100000, but the OSD
//! records `latency.to_nsec()`: the values are **nanoseconds** (the histogram's mean matches
//! `perf dump`'s `op_w_latency` average; see NOTES.md). Bucket 1 is therefore [0, 100 µs), then
//! factor-2 buckets up to an open-ended last one. The bounds are derived from the axis' `ranges`,
//! never hard-coded: a range `{min, max}` has the upper bound `(max + 1)` ns; the open-ended last
//! range is +Inf (Ceph also clamps larger values into the last bucket); the underflow range
//! `{"max": -1}` (values < 0, never populated) is folded into the following bucket.

use std::sync::Arc;

use serde_json::{Map, Value};

use super::json::{self, Keep, Path};
use super::ParseError;
use crate::latency::Histogram;

const GROUP: &str = "osd";
const NAME: &str = "op_w_latency_in_bytes_histogram";

/// The write-latency histogram of one `perf histogram dump` document.
pub fn parse_write_latency(out: &[u8]) -> Result<Histogram, ParseError> {
    // Build only the write histogram; the other three are skipped unallocated.
    let v = json::parse_kept(out, &KEEP_TOP)?;
    write_latency_from_value(&v)
}

static KEEP_GROUP: Keep = Keep {
    fields: Some(&[(NAME, &Keep::ALL)]),
    each: None,
};
static KEEP_TOP: Keep = Keep {
    fields: Some(&[(GROUP, &KEEP_GROUP)]),
    each: None,
};

/// Same, from an already-parsed document (e.g. one OSD's body of a `tell 'osd.*'` output).
pub fn write_latency_from_value(v: &Value) -> Result<Histogram, ParseError> {
    let root = Path::Root;
    let top = json::as_object(v, &root)?;
    let group_at = root.key(GROUP);
    let group = json::req_object(
        top,
        GROUP,
        &group_at,
        "an object (the OSD's perf histograms)",
    )?;
    let hist_at = group_at.key(NAME);
    let hist = json::req_object(
        group,
        NAME,
        &hist_at,
        "an object (the write-latency histogram)",
    )?;
    histogram(hist, &hist_at)
}

fn histogram(hist: &Map<String, Value>, at: &Path<'_>) -> Result<Histogram, ParseError> {
    let axes_at = at.key("axes");
    let axes = match hist.get("axes") {
        Some(a) => json::as_array(a, &axes_at)?,
        None => return Err(axes_at.missing("an array of 2 axes")),
    };
    if axes.len() != 2 {
        return Err(axes_at.error(format!(
            "expected 2 axes (latency, request size), found {}",
            axes.len()
        )));
    }
    let lat_at = axes_at.index(0);
    let size_at = axes_at.index(1);
    let lat_axis = json::as_object(&axes[0], &lat_at)?;
    let size_axis = json::as_object(&axes[1], &size_at)?;

    // The latency axis must come first: values are indexed [axis 0][axis 1].
    let size_name_at = size_at.key("name");
    if let Some(name) = json::maybe_str(size_axis, "name", &size_at)? {
        if name.contains("atency") {
            return Err(size_name_at.error(format!(
                "expected the latency axis first (values are indexed [latency][size]), found \
                 {name:?} as axis 1"
            )));
        }
    }
    json::maybe_str(lat_axis, "name", &lat_at)?;

    let lat = latency_axis(lat_axis, &lat_at)?;
    let size_buckets = bucket_count(size_axis, &size_at)?;

    let values_at = at.key("values");
    let rows = match hist.get("values") {
        Some(v) => json::as_array(v, &values_at)?,
        None => return Err(values_at.missing("an array of rows (one per latency bucket)")),
    };
    if rows.len() != lat.ranges {
        return Err(values_at.error(format!(
            "expected {} rows (one per latency bucket), found {}",
            lat.ranges,
            rows.len()
        )));
    }

    let mut counts = Vec::with_capacity(lat.bounds.len());
    for (i, row) in rows.iter().enumerate() {
        let row_at = values_at.index(i);
        let cells = json::as_array(row, &row_at)?;
        if cells.len() != size_buckets {
            return Err(row_at.error(format!(
                "expected {size_buckets} cells (one per request-size bucket), found {}",
                cells.len()
            )));
        }
        let mut sum: u64 = 0;
        for (j, cell) in cells.iter().enumerate() {
            let n = json::as_u64(cell, &row_at.index(j))?;
            sum = sum
                .checked_add(n)
                .ok_or_else(|| row_at.error("expected counts whose sum fits in 64 bits"))?;
        }
        if i == 0 && lat.underflow {
            counts.push(sum); // folded into the next bucket below
        } else if i == 1 && lat.underflow {
            let under = counts.pop().unwrap_or(0);
            counts.push(
                sum.checked_add(under)
                    .ok_or_else(|| row_at.error("expected counts whose sum fits in 64 bits"))?,
            );
        } else {
            counts.push(sum);
        }
    }
    debug_assert_eq!(counts.len(), lat.bounds.len());
    Ok(Histogram {
        bounds: lat.bounds,
        counts,
    })
}

struct LatencyAxis {
    /// Upper bounds in seconds of the published buckets (underflow folded).
    bounds: Arc<[f64]>,
    /// Number of ranges (= rows of `values`), including the underflow range.
    ranges: usize,
    underflow: bool,
}

fn latency_axis(axis: &Map<String, Value>, at: &Path<'_>) -> Result<LatencyAxis, ParseError> {
    let ranges_at = at.key("ranges");
    let ranges = match axis.get("ranges") {
        Some(r) => json::as_array(r, &ranges_at)?,
        None => return Err(ranges_at.missing("an array of bucket ranges")),
    };
    if let Some(n) = json::maybe_u64(axis, "buckets", at)? {
        if n != ranges.len() as u64 {
            return Err(at.key("buckets").error(format!(
                "expected the bucket count to match the {} ranges, found {n}",
                ranges.len()
            )));
        }
    }
    if ranges.is_empty() {
        return Err(ranges_at.error("expected at least one bucket range, found none"));
    }
    let mut bounds: Vec<f64> = Vec::with_capacity(ranges.len());
    let mut underflow = false;
    let last = ranges.len() - 1;
    for (i, r) in ranges.iter().enumerate() {
        let r_at = ranges_at.index(i);
        let obj = json::as_object(r, &r_at)?;
        let min = int_field(obj, "min", &r_at)?;
        let max = int_field(obj, "max", &r_at)?;
        if min.is_none() {
            // The underflow range `{"max": -1}`: only as the first of several ranges.
            if i != 0 || last == 0 {
                return Err(r_at.error(
                    "expected a range with \"min\" (only the first of several ranges may be the \
                     underflow range without one)",
                ));
            }
            if max.is_none() {
                return Err(r_at.key("max").missing("an integer"));
            }
            underflow = true;
            continue;
        }
        let bound = if i == last {
            f64::INFINITY
        } else {
            match (min, max) {
                (Some(lo), Some(hi)) if hi >= lo => (hi as f64 + 1.0) / 1e9,
                (Some(lo), Some(hi)) => {
                    return Err(r_at.error(format!("expected max >= min, found min {lo}, max {hi}")))
                }
                _ => {
                    return Err(r_at
                        .key("max")
                        .missing("an integer (only the last range may be open-ended)"))
                }
            }
        };
        if let Some(prev) = bounds.last() {
            if bound <= *prev {
                return Err(r_at.error(format!(
                    "expected bucket bounds strictly ascending, found {bound} s after {prev} s"
                )));
            }
        }
        bounds.push(bound);
    }
    Ok(LatencyAxis {
        bounds: bounds.into(),
        ranges: ranges.len(),
        underflow,
    })
}

/// An optional integer field of a range (`min`/`max` may be negative: `{"max": -1}`).
fn int_field(
    obj: &Map<String, Value>,
    key: &str,
    at: &Path<'_>,
) -> Result<Option<i128>, ParseError> {
    match json::field(obj, key) {
        None => Ok(None),
        Some(Value::Number(n)) if n.is_i64() || n.is_u64() => Ok(n
            .as_i64()
            .map(i128::from)
            .or_else(|| n.as_u64().map(i128::from))),
        Some(v) => Err(at.key(key).mismatch("an integer", v)),
    }
}

/// Number of buckets of the request-size axis: `ranges` length, checked against `buckets`.
fn bucket_count(axis: &Map<String, Value>, at: &Path<'_>) -> Result<usize, ParseError> {
    let buckets = json::maybe_u64(axis, "buckets", at)?;
    let ranges = match json::field(axis, "ranges") {
        Some(r) => Some(json::as_array(r, &at.key("ranges"))?.len()),
        None => None,
    };
    match (buckets, ranges) {
        (Some(b), Some(r)) if b != r as u64 => Err(at.key("buckets").error(format!(
            "expected the bucket count to match the {r} ranges, found {b}"
        ))),
        (_, Some(r)) => Ok(r),
        (Some(b), None) => usize::try_from(b).map_err(|_| {
            at.key("buckets")
                .error(format!("expected a bucket count, found {b}"))
        }),
        (None, None) => Err(at.key("ranges").missing("an array of bucket ranges")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ceph::parse::test_support::{files, fixture, half, hostile_inputs, subdirs, STATES};

    fn hist(rel: &str) -> Histogram {
        parse_write_latency(&fixture(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
    }

    fn shape(r: Result<Histogram, ParseError>) -> String {
        match r {
            Err(e @ ParseError::Shape { .. }) => e.to_string(),
            other => panic!("expected a Shape error, got {other:?}"),
        }
    }

    fn doc(rel: &str) -> Value {
        serde_json::from_slice(&fixture(rel)).unwrap()
    }

    fn edited(edit: impl FnOnce(&mut Value)) -> Result<Histogram, ParseError> {
        let mut v = doc("healthy-idle/ceph_tell_osd.0_perf_histogram_dump.json");
        edit(&mut v);
        write_latency_from_value(&v)
    }

    fn w(v: &mut Value) -> &mut Value {
        &mut v["osd"]["op_w_latency_in_bytes_histogram"]
    }

    /// The bounds derived from the 16.2.15 axis: 100 µs, 200 µs, ... doubling, then +Inf.
    #[test]
    fn bounds_are_nanosecond_ranges() {
        let h = hist("healthy-idle/ceph_tell_osd.0_perf_histogram_dump.json");
        assert_eq!(h.bounds.len(), 31);
        assert_eq!(h.counts.len(), 31);
        assert_eq!(h.bounds[0], 100_000.0 / 1e9);
        for k in 1..30 {
            let expected = 100_000.0 * 2f64.powi(k as i32) / 1e9;
            assert!(
                (h.bounds[k] - expected).abs() < 1e-15,
                "bound {k}: {} vs {expected}",
                h.bounds[k]
            );
        }
        assert_eq!(h.bounds[29], 53_687_091_200_000.0 / 1e9);
        assert_eq!(h.bounds[30], f64::INFINITY);
        assert!(h.bounds.windows(2).all(|w| w[0] < w[1]));
        // Summed over the size axis (raw rows 6..=11 and 15 are populated, shifted by the
        // folded underflow row).
        assert_eq!(
            h.counts,
            vec![
                0, 0, 0, 0, 0, 83, 840, 1891, 4644, 2049, 50, 0, 0, 0, 15, 0, 0, 0, 0, 0, 0, 0, 0,
                0, 0, 0, 0, 0, 0, 0, 0
            ]
        );
    }

    /// Oracle: the histogram's total equals `perf dump`'s `osd.op_w` (exactly on the idle
    /// cluster; under load the two captures are ~0.2 s apart), and its mean computed from
    /// bucket midpoints matches `op_w_latency.avgtime` within the factor-2 resolution, which
    /// confirms the nanosecond reading (a microsecond reading would be 1000x off).
    #[test]
    fn totals_and_mean_agree_with_perf_dump() {
        for state in STATES {
            let h = hist(&format!("{state}/ceph_tell_osd.0_perf_histogram_dump.json"));
            let perf = doc(&format!("{state}/ceph_tell_osd.0_perf_dump.json"));
            let op_w = perf["osd"]["op_w"].as_u64().unwrap();
            let avg = perf["osd"]["op_w_latency"]["avgtime"].as_f64().unwrap();
            let total: u64 = h.counts.iter().sum();
            if *state == "healthy-idle" {
                assert_eq!(total, op_w, "{state}");
            }
            assert!(
                total >= op_w && total - op_w < op_w / 100 + 100,
                "{state}: {total} vs {op_w}"
            );
            let mut lower = 0.0;
            let mut weighted = 0.0;
            for (b, c) in h.bounds.iter().zip(&h.counts) {
                if b.is_finite() {
                    weighted += (lower + b) / 2.0 * *c as f64;
                }
                lower = *b;
            }
            let mean = weighted / total as f64;
            assert!(
                mean > avg / 1.6 && mean < avg * 1.6,
                "{state}: mean {mean} s vs perf dump {avg} s"
            );
        }
    }

    /// `ceph tell` and `ceph daemon` (admin socket) print the same document.
    #[test]
    fn tell_and_daemon_agree() {
        for state in STATES {
            let tell = hist(&format!("{state}/ceph_tell_osd.0_perf_histogram_dump.json"));
            let daemon = hist(&format!(
                "{state}/ceph_daemon_osd.0_perf_histogram_dump.json"
            ));
            assert_eq!(tell.bounds, daemon.bounds, "{state}");
            let (t, d): (u64, u64) = (tell.counts.iter().sum(), daemon.counts.iter().sum());
            assert!(
                d >= t && d - t < 200,
                "{state}: tell {t}, daemon {d} (captured right after)"
            );
        }
    }

    /// Every sample histogram (recovery: osd.0 every 3-5 s; rebalance: all four OSDs, compact
    /// JSON) parses, and per OSD the counters never decrease from one sample to the next.
    #[test]
    fn samples_parse_and_counters_grow() {
        let mut n = 0;
        for state in ["recovery", "rebalance"] {
            let mut previous: std::collections::BTreeMap<String, Histogram> = Default::default();
            for dir in subdirs(&format!("{state}/samples")) {
                for rel in files(&dir, |f| f.ends_with("_perf_histogram_dump.json")) {
                    let h = hist(&rel);
                    assert_eq!(h.bounds.len(), h.counts.len(), "{rel}");
                    let osd = rel.rsplit('/').next().unwrap().to_string();
                    if let Some(prev) = previous.get(&osd) {
                        assert_eq!(prev.bounds, h.bounds, "{rel}");
                        for (a, b) in prev.counts.iter().zip(&h.counts) {
                            assert!(b >= a, "{rel}: counter went down");
                        }
                    }
                    previous.insert(osd, h);
                    n += 1;
                }
            }
        }
        assert_eq!(n, 10 + 12 * 4);
    }

    #[test]
    fn hostile_inputs_are_errors() {
        for (what, input) in hostile_inputs() {
            assert!(parse_write_latency(&input).is_err(), "{what} parsed");
        }
        assert_eq!(parse_write_latency(b"\n"), Err(ParseError::Empty));
        assert_eq!(
            shape(parse_write_latency(b"null")),
            "(top level): expected an object, found null"
        );
        assert_eq!(
            shape(parse_write_latency(b"{}")),
            "osd: expected an object (the OSD's perf histograms), found nothing (the key is absent)"
        );
        assert_eq!(
            shape(parse_write_latency(b"{\"osd\":{}}")),
            "osd.op_w_latency_in_bytes_histogram: expected an object (the write-latency histogram), found nothing (the key is absent)"
        );
        let full = fixture("healthy-idle/ceph_tell_osd.0_perf_histogram_dump.json");
        assert!(matches!(
            parse_write_latency(half(&full)),
            Err(ParseError::Json { .. })
        ));
        let full = fixture("rebalance/samples/000/ceph_tell_osd.2_perf_histogram_dump.json");
        assert!(matches!(
            parse_write_latency(half(&full)),
            Err(ParseError::Json { .. })
        ));
        assert!(matches!(
            parse_write_latency(b"Error ENXIO: problem getting command descriptions from osd.3\n"),
            Err(ParseError::Json { .. })
        ));
    }

    #[test]
    fn structural_errors_name_the_path() {
        let p = "osd.op_w_latency_in_bytes_histogram";
        assert_eq!(
            shape(edited(|v| {
                w(v).as_object_mut().unwrap().remove("axes");
            })),
            format!("{p}.axes: expected an array of 2 axes, found nothing (the key is absent)")
        );
        assert_eq!(
            shape(edited(|v| {
                w(v)["axes"].as_array_mut().unwrap().pop();
            })),
            format!("{p}.axes: expected 2 axes (latency, request size), found 1")
        );
        assert_eq!(
            shape(edited(|v| w(v)["axes"].as_array_mut().unwrap().swap(0, 1))),
            format!(
                "{p}.axes[1].name: expected the latency axis first (values are indexed [latency][size]), found \"Latency (usec)\" as axis 1"
            )
        );
        assert_eq!(
            shape(edited(|v| {
                w(v)["values"].as_array_mut().unwrap().pop();
            })),
            format!("{p}.values: expected 32 rows (one per latency bucket), found 31")
        );
        assert_eq!(
            shape(edited(|v| {
                w(v)["values"][7].as_array_mut().unwrap().pop();
            })),
            format!("{p}.values[7]: expected 32 cells (one per request-size bucket), found 31")
        );
        assert_eq!(
            shape(edited(|v| w(v)["values"][7][3] = Value::from("5"))),
            format!("{p}.values[7][3]: expected a non-negative integer, found string")
        );
        assert_eq!(
            shape(edited(|v| w(v)["values"][7][3] = Value::from(-5))),
            format!("{p}.values[7][3]: expected a non-negative integer, found a negative integer")
        );
        assert_eq!(
            shape(edited(|v| w(v)["values"][2] = Value::Null)),
            format!("{p}.values[2]: expected an array, found null")
        );
        assert_eq!(
            shape(edited(|v| w(v)["axes"][0]["buckets"] = Value::from(33))),
            format!(
                "{p}.axes[0].buckets: expected the bucket count to match the 32 ranges, found 33"
            )
        );
        assert_eq!(
            shape(edited(|v| w(v)["axes"][1]["buckets"] = Value::from(16))),
            format!(
                "{p}.axes[1].buckets: expected the bucket count to match the 32 ranges, found 16"
            )
        );
        assert_eq!(
            shape(edited(
                |v| w(v)["axes"][0]["ranges"][5]["max"] = Value::from(1000)
            )),
            format!("{p}.axes[0].ranges[5]: expected max >= min, found min 800000, max 1000")
        );
        assert_eq!(
            shape(edited(
                |v| w(v)["axes"][0]["ranges"][5] = serde_json::json!({"min": 800000, "max": 99999})
            )),
            format!("{p}.axes[0].ranges[5]: expected max >= min, found min 800000, max 99999")
        );
        assert_eq!(
            shape(edited(|v| w(v)["axes"][0]["ranges"][5] = serde_json::json!({"min": 0, "max": 99999}))),
            format!("{p}.axes[0].ranges[5]: expected bucket bounds strictly ascending, found 0.0001 s after 0.0008 s")
        );
        assert_eq!(
            shape(edited(|v| {
                w(v)["axes"][0]["ranges"][5].as_object_mut().unwrap().remove("max");
            })),
            format!("{p}.axes[0].ranges[5].max: expected an integer (only the last range may be open-ended), found nothing (the key is absent)")
        );
        assert_eq!(
            shape(edited(|v| {
                w(v)["axes"][0]["ranges"][5].as_object_mut().unwrap().remove("min");
            })),
            format!("{p}.axes[0].ranges[5]: expected a range with \"min\" (only the first of several ranges may be the underflow range without one)")
        );
        assert_eq!(
            shape(edited(
                |v| w(v)["axes"][0]["ranges"][5]["min"] = Value::from("800000")
            )),
            format!("{p}.axes[0].ranges[5].min: expected an integer, found string")
        );
        assert_eq!(
            shape(edited(
                |v| w(v)["axes"][0]["ranges"][5]["min"] = Value::from(1.5)
            )),
            format!(
                "{p}.axes[0].ranges[5].min: expected an integer, found a floating-point number"
            )
        );
        assert_eq!(
            shape(edited(|v| w(v)["axes"][0]["ranges"] = serde_json::json!([]))),
            format!(
                "{p}.axes[0].buckets: expected the bucket count to match the 0 ranges, found 32"
            )
        );
        assert_eq!(
            shape(edited(|v| w(v)["values"][8][3] = Value::from(u64::MAX))),
            format!("{p}.values[8]: expected counts whose sum fits in 64 bits")
        );
        assert_eq!(
            shape(edited(|v| v["osd"] = Value::from(1))),
            "osd: expected an object, found a non-negative integer"
        );
    }

    /// The bounds come from the ranges, not from a table: a hypothetical axis in microseconds
    /// with linear 1 ms buckets and no underflow range gives 1 ms, 2 ms, 3 ms, +Inf.
    #[test]
    fn bounds_follow_the_ranges() {
        let v = serde_json::json!({"osd": {"op_w_latency_in_bytes_histogram": {
            "axes": [
                {"name": "Latency (nsec)", "min": 0, "quant_size": 1000000, "buckets": 4, "scale_type": "linear",
                 "ranges": [{"min": 0, "max": 999999}, {"min": 1000000, "max": 1999999}, {"min": 2000000, "max": 2999999}, {"min": 3000000}]},
                {"name": "Request size (bytes)", "buckets": 2, "ranges": [{"min": 0, "max": 4095}, {"min": 4096}]}
            ],
            "values": [[1, 2], [3, 4], [5, 6], [7, 8]]
        }}});
        let h = write_latency_from_value(&v).unwrap();
        assert_eq!(&*h.bounds, &[0.001, 0.002, 0.003, f64::INFINITY]);
        assert_eq!(h.counts, vec![3, 7, 11, 15]);
    }

    /// The underflow row's counts (never populated by Ceph) are added to the next bucket.
    #[test]
    fn underflow_is_folded() {
        let h = edited(|v| {
            w(v)["values"][0][4] = Value::from(7);
            w(v)["values"][1][2] = Value::from(5);
        })
        .unwrap();
        let base = hist("healthy-idle/ceph_tell_osd.0_perf_histogram_dump.json");
        assert_eq!(h.counts[0], base.counts[0] + 12);
        assert_eq!(&h.counts[1..], &base.counts[1..]);
    }

    /// A single range (open-ended) is one +Inf bucket; an underflow range alone is an error.
    #[test]
    fn degenerate_axes() {
        let mk = |ranges: Value, values: Value| {
            serde_json::json!({"osd": {"op_w_latency_in_bytes_histogram": {
                "axes": [{"name": "Latency (usec)", "ranges": ranges}, {"name": "Request size (bytes)", "buckets": 1}],
                "values": values
            }}})
        };
        let h = write_latency_from_value(&mk(
            serde_json::json!([{"min": 0}]),
            serde_json::json!([[4]]),
        ))
        .unwrap();
        assert_eq!(
            (&*h.bounds, h.counts.as_slice()),
            (&[f64::INFINITY][..], &[4u64][..])
        );
        let e = write_latency_from_value(&mk(
            serde_json::json!([{"max": -1}]),
            serde_json::json!([[4]]),
        ));
        assert!(shape(e).contains("ranges[0]: expected a range with \"min\""));
        let e = write_latency_from_value(&mk(serde_json::json!([]), serde_json::json!([])));
        assert!(shape(e).contains("ranges: expected at least one bucket range"));
        let e = write_latency_from_value(&mk(
            serde_json::json!([{}, {"min": 0}]),
            serde_json::json!([[1], [2]]),
        ));
        assert!(shape(e).contains("ranges[0].max: expected an integer"));
        // Size axis without ranges nor buckets.
        let v = serde_json::json!({"osd": {"op_w_latency_in_bytes_histogram": {
            "axes": [{"name": "Latency (usec)", "ranges": [{"min": 0}]}, {"name": "Request size (bytes)"}],
            "values": [[1]]
        }}});
        assert!(shape(write_latency_from_value(&v))
            .contains("axes[1].ranges: expected an array of bucket ranges"));
    }

    /// Unnamed axes: position 0 is taken as latency.
    #[test]
    fn unnamed_axes() {
        let h = edited(|v| {
            for a in w(v)["axes"].as_array_mut().unwrap() {
                a.as_object_mut().unwrap().remove("name");
            }
        })
        .unwrap();
        assert_eq!(
            h,
            hist("healthy-idle/ceph_tell_osd.0_perf_histogram_dump.json")
        );
    }

    /// Only the write histogram is read: the others may be anything.
    #[test]
    fn other_histograms_are_ignored() {
        let h = edited(|v| {
            v["osd"]["op_r_latency_out_bytes_histogram"] = Value::from("garbage");
            v["bluestore"] = Value::Null;
        })
        .unwrap();
        assert_eq!(
            h,
            hist("healthy-idle/ceph_tell_osd.0_perf_histogram_dump.json")
        );
    }
}
