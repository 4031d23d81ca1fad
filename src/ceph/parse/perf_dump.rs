//! `perf dump osd op_w_latency` of an OSD (`ceph tell osd.N ...`, `ceph daemon osd.N ...`, or
//! librados' `perf dump` with `logger`/`counter`): the `op_w_latency` counter, `{"osd":
//! {"op_w_latency": {"avgcount": N, "sum": S, "avgtime": A}}}`. `sum` is in seconds (Ceph's
//! time counters print seconds with 9 decimals), `avgtime` is sum/avgcount since the OSD started.
//! An unfiltered `perf dump` holds the same object among ~500 others; it parses too.

use serde_json::Value;

use super::json::{self, Keep, Path};
use super::ParseError;
use crate::latency::LatencySum;

const GROUP: &str = "osd";
const NAME: &str = "op_w_latency";

static KEEP_GROUP: Keep = Keep {
    fields: Some(&[(NAME, &Keep::ALL)]),
    each: None,
};
static KEEP_TOP: Keep = Keep {
    fields: Some(&[(GROUP, &KEEP_GROUP)]),
    each: None,
};

/// The write-latency counter of one `perf dump` document.
pub fn parse_write_latency_sum(out: &[u8]) -> Result<LatencySum, ParseError> {
    let v = json::parse_kept(out, &KEEP_TOP)?;
    write_latency_sum_from_value(&v)
}

/// Same, from an already-parsed document.
pub fn write_latency_sum_from_value(v: &Value) -> Result<LatencySum, ParseError> {
    let root = Path::Root;
    let top = json::as_object(v, &root)?;
    let group_at = root.key(GROUP);
    let group = json::req_object(top, GROUP, &group_at, "an object (the OSD's perf counters)")?;
    let at = group_at.key(NAME);
    let counter = json::req_object(group, NAME, &at, "an object {avgcount, sum, avgtime}")?;
    let count = json::req_u64(counter, "avgcount", &at)?;
    let sum_at = at.key("sum");
    let seconds = match counter.get("sum") {
        Some(s) => json::as_f64(s, &sum_at)?,
        None => return Err(sum_at.missing("a number of seconds")),
    };
    // A counter of durations: a negative or infinite total is not something to publish.
    if !seconds.is_finite() || seconds < 0.0 {
        return Err(sum_at.error(format!(
            "expected a non-negative number of seconds, found {seconds}"
        )));
    }
    Ok(LatencySum { count, seconds })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ceph::parse::tell;
    use crate::ceph::parse::test_support::{fixture, fixture_str, half, hostile_inputs};

    #[test]
    fn reads_count_and_seconds_of_a_filtered_and_a_full_dump() {
        // One OSD's body of `ceph tell 'osd.*' perf dump osd op_w_latency` (lab, under fio).
        let body = br#"{"osd":{"op_w_latency":{"avgcount":3396,"sum":45.768574448,"avgtime":0.013477200}}}"#;
        assert_eq!(
            parse_write_latency_sum(body).unwrap(),
            LatencySum {
                count: 3396,
                seconds: 45.768574448
            }
        );
        // The whole `perf dump` (all loggers) of the earlier fixtures holds the same counter.
        for state in ["healthy-idle", "client-load"] {
            let full = fixture(&format!("{state}/ceph_tell_osd.0_perf_dump.json"));
            let s = parse_write_latency_sum(&full).unwrap();
            let doc: Value = serde_json::from_slice(&full).unwrap();
            assert_eq!(
                s.count,
                doc["osd"]["op_w_latency"]["avgcount"].as_u64().unwrap()
            );
            assert!(s.count > 0 && s.seconds > 0.0, "{state}: {s:?}");
        }
    }

    #[test]
    fn every_osd_of_the_recorded_tell_output_parses() {
        for rel in [
            "lab/healthy.tell-osd-all-perf-dump-osd-op_w_latency.out",
            "lab/load.tell-osd-all-perf-dump-osd-op_w_latency.out",
        ] {
            let text = fixture_str(rel);
            let parts = tell::split(&text);
            assert_eq!(parts.len(), 4, "{rel}");
            for part in parts {
                let d = part.unwrap();
                let s = parse_write_latency_sum(d.body.as_bytes()).unwrap();
                assert!(s.seconds >= 0.0, "{rel} {}", d.daemon);
            }
        }
    }

    #[test]
    fn rejects_what_is_not_the_counter() {
        for (what, input) in hostile_inputs() {
            assert!(parse_write_latency_sum(&input).is_err(), "{what}");
        }
        let body = br#"{"osd":{"op_w_latency":{"avgcount":3396,"sum":45.768574448,"avgtime":0.013477200}}}"#;
        assert!(parse_write_latency_sum(half(body)).is_err());
        for (what, bad) in [
            ("no osd logger", &br#"{"bluestore":{}}"#[..]),
            ("no counter", br#"{"osd":{"op_w":12}}"#),
            (
                "count negative",
                br#"{"osd":{"op_w_latency":{"avgcount":-1,"sum":1.0}}}"#,
            ),
            (
                "count fractional",
                br#"{"osd":{"op_w_latency":{"avgcount":1.5,"sum":1.0}}}"#,
            ),
            ("sum missing", br#"{"osd":{"op_w_latency":{"avgcount":1}}}"#),
            (
                "sum a string",
                br#"{"osd":{"op_w_latency":{"avgcount":1,"sum":"1.0"}}}"#,
            ),
            (
                "sum negative",
                br#"{"osd":{"op_w_latency":{"avgcount":1,"sum":-0.5}}}"#,
            ),
            (
                "a plain number (op_w, not op_w_latency)",
                br#"{"osd":{"op_w_latency":7}}"#,
            ),
        ] {
            assert!(parse_write_latency_sum(bad).is_err(), "{what}");
        }
    }
}
