//! `ceph osd pool ls detail --format json`.
//!
//! Release differences handled:
//! - Reef+ add `read_balance` with scores printed as a bare `inf` (invalid JSON): read as `null`
//!   by the lenient pre-pass, and the field is ignored anyway.
//! - The pool id is `pool_id` in `osd pool ls detail` and `pool` in `osd dump`'s `pools` array;
//!   both are accepted, and so is the whole `osd dump` document (`{"pools":[..],..}`).

use serde_json::Value;

use super::json::{self, Path};
use super::ParseError;

/// `pg_pool_t::TYPE_ERASURE`.
const TYPE_ERASURE: u64 = 3;

#[derive(Debug, Clone, PartialEq)]
pub struct Pool {
    pub id: u64,
    pub name: String,
    pub size: u32,
    pub min_size: u32,
    pub pg_num: u32,
    /// `type` 3 (erasure-coded); 1 is replicated.
    pub erasure: bool,
}

pub fn parse(out: &[u8]) -> Result<Vec<Pool>, ParseError> {
    let v = json::parse_value(out)?;
    from_value(&v)
}

/// Same, from an already-parsed document.
pub fn from_value(v: &Value) -> Result<Vec<Pool>, ParseError> {
    let root = Path::Root;
    let pools_at = root.key("pools");
    let (list, at) = match v {
        Value::Object(o) => match o.get("pools") {
            Some(p) => (json::as_array(p, &pools_at)?, &pools_at),
            None => return Err(root.mismatch("an array of pools", v)),
        },
        _ => (json::as_array(v, &root)?, &root),
    };
    list.iter()
        .enumerate()
        .map(|(i, p)| pool(p, &at.index(i)))
        .collect()
}

fn pool(v: &Value, at: &Path<'_>) -> Result<Pool, ParseError> {
    let obj = json::as_object(v, at)?;
    let id = match (obj.get("pool_id"), obj.get("pool")) {
        (Some(id), _) => json::as_u64(id, &at.key("pool_id"))?,
        (None, Some(id)) => json::as_u64(id, &at.key("pool"))?,
        (None, None) => return Err(at.key("pool_id").missing(json::NON_NEG_INT)),
    };
    Ok(Pool {
        id,
        name: json::req_str(obj, "pool_name", at)?.to_string(),
        size: json::req_u32(obj, "size", at)?,
        min_size: json::req_u32(obj, "min_size", at)?,
        pg_num: json::req_u32(obj, "pg_num", at)?,
        erasure: json::req_u64(obj, "type", at)? == TYPE_ERASURE,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ceph::parse::test_support::{fixture, fixture_str, half, hostile_inputs, STATES};

    fn lab_pools() -> Vec<Pool> {
        vec![
            Pool {
                id: 1,
                name: "device_health_metrics".into(),
                size: 3,
                min_size: 2,
                pg_num: 1,
                erasure: false,
            },
            Pool {
                id: 2,
                name: "rbd-vms".into(),
                size: 3,
                min_size: 2,
                pg_num: 32,
                erasure: false,
            },
        ]
    }

    fn edited(edit: impl FnOnce(&mut Value)) -> Vec<u8> {
        let mut v: Value =
            serde_json::from_slice(&fixture("healthy-idle/ceph_osd_pool_ls_detail.json")).unwrap();
        edit(&mut v);
        serde_json::to_vec(&v).unwrap()
    }

    fn shape(r: Result<Vec<Pool>, ParseError>) -> String {
        match r {
            Err(e @ ParseError::Shape { .. }) => e.to_string(),
            other => panic!("expected a Shape error, got {other:?}"),
        }
    }

    #[test]
    fn every_state() {
        for state in STATES {
            let rel = format!("{state}/ceph_osd_pool_ls_detail.json");
            let pools = parse(&fixture(&rel)).unwrap_or_else(|e| panic!("{rel}: {e}"));
            assert_eq!(pools, lab_pools(), "{rel}");
        }
    }

    #[test]
    fn hostile_inputs_are_errors() {
        for (what, input) in hostile_inputs() {
            assert!(parse(&input).is_err(), "{what} parsed");
        }
        assert_eq!(parse(b"\n"), Err(ParseError::Empty));
        assert_eq!(
            shape(parse(b"null")),
            "(top level): expected an array, found null"
        );
        assert_eq!(
            shape(parse(b"{}")),
            "(top level): expected an array of pools, found an object"
        );
        assert!(matches!(
            parse(b"Error ENOENT: unrecognized pool 'x'\n"),
            Err(ParseError::Json {
                line: 1,
                column: 1,
                ..
            })
        ));
        for state in STATES {
            let full = fixture(&format!("{state}/ceph_osd_pool_ls_detail.json"));
            assert!(
                matches!(parse(half(&full)), Err(ParseError::Json { .. })),
                "{state}"
            );
        }
    }

    #[test]
    fn no_pools() {
        assert_eq!(parse(b"\n[]\n"), Ok(vec![]));
    }

    #[test]
    fn wrong_types_name_the_field() {
        assert_eq!(
            shape(parse(&edited(|v| v[1]["min_size"] = Value::from("2")))),
            "[1].min_size: expected a non-negative integer, found string"
        );
        assert_eq!(
            shape(parse(&edited(|v| v[0]["size"] = Value::from(1u64 << 40)))),
            "[0].size: expected an integer up to 4294967295, found 1099511627776"
        );
        assert_eq!(
            shape(parse(&edited(|v| {
                v[1].as_object_mut().unwrap().remove("pg_num");
            }))),
            "[1].pg_num: expected a non-negative integer, found nothing (the key is absent)"
        );
        assert_eq!(
            shape(parse(&edited(|v| v[0]["pool_name"] = Value::Null))),
            "[0].pool_name: expected a string, found null"
        );
        assert_eq!(
            shape(parse(&edited(|v| v[0]["type"] = Value::from("replicated")))),
            "[0].type: expected a non-negative integer, found string"
        );
        assert_eq!(
            shape(parse(&edited(|v| v[1] = Value::from(2)))),
            "[1]: expected an object, found a non-negative integer"
        );
        assert_eq!(
            shape(parse(&edited(|v| {
                v[1].as_object_mut().unwrap().remove("pool_id");
            }))),
            "[1].pool_id: expected a non-negative integer, found nothing (the key is absent)"
        );
    }

    /// Reef (18) prints a `read_balance` section whose scores can be a bare `inf`, e.g.
    /// `"read_balance":{"score_type":"Fair distribution","score_acting":inf,"score_stable":inf,
    /// "optimal_score":0,"raw_score_acting":0,"raw_score_stable":0,"primary_affinity_weighted":1,
    /// "average_primary_affinity":1,"average_primary_affinity_weighted":1}`.
    #[test]
    fn reef_read_balance_with_bare_inf() {
        let text = fixture_str("healthy-idle/ceph_osd_pool_ls_detail.json");
        let rb = "\"read_balance\":{\"score_type\":\"Fair distribution\",\"score_acting\":inf,\"score_stable\":-inf,\"optimal_score\":nan,\"raw_score_acting\":0,\"raw_score_stable\":0,\"primary_affinity_weighted\":1,\"average_primary_affinity\":1,\"average_primary_affinity_weighted\":1},";
        let reef = text.replace("\"pool_name\":", &format!("{rb}\"pool_name\":"));
        assert_eq!(reef.matches("score_acting\":inf").count(), 2);
        assert!(
            serde_json::from_str::<Value>(&reef).is_err(),
            "strict JSON must reject it"
        );
        assert_eq!(parse(reef.as_bytes()).unwrap(), lab_pools());
    }

    /// Erasure-coded pools (type 3), as Ceph prints them for `ceph osd pool create x erasure`.
    #[test]
    fn erasure_pool() {
        let out = edited(|v| {
            v[1]["type"] = Value::from(3);
            v[1]["size"] = Value::from(6);
            v[1]["min_size"] = Value::from(5);
            v[1]["erasure_code_profile"] = Value::from("k4m2");
        });
        let pools = parse(&out).unwrap();
        assert!(pools[1].erasure && !pools[0].erasure);
        assert_eq!((pools[1].size, pools[1].min_size), (6, 5));
    }

    /// `ceph osd dump -f json` carries the same pool objects under `pools`, with the id as `pool`.
    #[test]
    fn osd_dump_pools() {
        let out = edited(|v| {
            for p in v.as_array_mut().unwrap() {
                let o = p.as_object_mut().unwrap();
                let id = o.remove("pool_id").unwrap();
                o.insert("pool".into(), id);
            }
            *v = serde_json::json!({"epoch": 23, "pools": v.take()});
        });
        assert_eq!(parse(&out).unwrap(), lab_pools());
        assert_eq!(
            shape(parse(br#"{"epoch":1,"pools":{}}"#)),
            "pools: expected an array, found an object"
        );
    }

    /// Live lab (16.2.15): the same pools, healthy and with osd.3 down.
    #[test]
    fn lab_live_pools() {
        for rel in [
            "lab/healthy.osd-pool-ls-detail.out",
            "lab/osd3-down.osd-pool-ls-detail.out",
        ] {
            assert_eq!(parse(&fixture(rel)).unwrap(), lab_pools(), "{rel}");
        }
    }
}
