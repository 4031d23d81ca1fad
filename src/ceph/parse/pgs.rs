//! `ceph pg ls <states> --format json` and `ceph pg dump pgs_brief --format json` (and the
//! `pg_stats` of a full `pg dump`).
//!
//! Shapes by release (all accepted):
//! - Luminous/Mimic: a bare array of PG objects.
//! - Nautilus+: `{"pg_ready":true,"pg_stats":[..]}`; when no PG matches, `pg_stats` is absent
//!   (`{"pg_ready":true}`, seen on 16.2.15).
//! - Reef `pg dump` (all): `{"pg_ready":..,"pg_map":{..,"pg_stats":[..]}}`.
//!
//! A document with both `pg_stats` and `pg_map.pg_stats` (no release prints one) is an error:
//! it would count each PG twice.
//!
//! The listing is read in one pass, each PG handed on as soon as it is read ([`undersized`]
//! counts them): `pg dump pgs_brief` lists every PG of the cluster, and holding them all as
//! values would cost several times the reply.
//!
//! `pg_ready: false` (the mgr restarted and has not heard from every up OSD yet; Ceph adds
//! "Warning: due to ceph-mgr restart, some PG states may not be up to date" on stderr) is an
//! error: the states may be stale, and an empty list would read as "no PG undersized".
//!
//! A missing member of an EC PG's up/acting set (CRUSH_ITEM_NONE) is printed as 2147483647, or
//! as `"NONE"` by newer releases; both become `None`.

use std::collections::BTreeMap;
use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};

use super::json::{self, Keep, Path};
use super::ParseError;

/// CRUSH_ITEM_NONE: an empty slot in an up/acting set.
const CRUSH_ITEM_NONE: u64 = 0x7fff_ffff;

#[derive(Debug, Clone, PartialEq)]
pub struct PgBrief {
    /// `2.1f`: pool id, a dot, the placement seed in hex.
    pub pgid: String,
    pub pool_id: u64,
    /// Full state string as Ceph prints it (`active+undersized+degraded`).
    pub state: String,
    pub up: Vec<Option<u32>>,
    /// `None` = missing shard (2147483647 or `"NONE"`).
    pub acting: Vec<Option<u32>>,
}

impl PgBrief {
    /// Live entries of the acting set (what "at min_size" is computed from).
    pub fn acting_members(&self) -> usize {
        self.acting.iter().filter(|o| o.is_some()).count()
    }

    /// Whether `word` is one of the `+`-separated words of the state.
    pub fn has_state(&self, word: &str) -> bool {
        self.state.split('+').any(|w| w == word)
    }
}

/// The undersized PGs of a listing, counted per pool by how many OSDs of their acting set are
/// live: all that "PGs undersized" and "PGs at min_size" per pool need, in memory that grows
/// with pools and set sizes, never with the number of PGs.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct UndersizedPgs {
    /// Pool id -> (live acting members -> PGs).
    pub by_pool: BTreeMap<u64, BTreeMap<usize, u64>>,
    /// Pool id -> degraded PGs (some object has fewer copies than the pool's size), when the
    /// listing held every PG (`pg dump pgs_brief`); `None` when it held only undersized ones
    /// (`pg ls undersized`, the fallback), which says nothing of the degraded PGs with a full
    /// acting set (an OSD back from a restart, recovering from its log).
    pub degraded_by_pool: Option<BTreeMap<u64, u64>>,
}

impl UndersizedPgs {
    /// An empty tally of a listing that holds every PG: degraded PGs are counted too.
    pub fn of_every_pg() -> Self {
        Self {
            by_pool: BTreeMap::new(),
            degraded_by_pool: Some(BTreeMap::new()),
        }
    }

    /// Degraded PGs of `pool`; `None` when the listing did not say.
    pub fn degraded_in(&self, pool: u64) -> Option<u64> {
        self.degraded_by_pool
            .as_ref()
            .map(|m| m.get(&pool).copied().unwrap_or(0))
    }

    /// Counts `pg` if it is undersized (and, for a listing of every PG, if it is degraded).
    pub fn add(&mut self, pg: &PgBrief) {
        if let Some(degraded) = self.degraded_by_pool.as_mut() {
            if pg.has_state("degraded") {
                *degraded.entry(pg.pool_id).or_insert(0) += 1;
            }
        }
        if pg.has_state("undersized") {
            *self
                .by_pool
                .entry(pg.pool_id)
                .or_default()
                .entry(pg.acting_members())
                .or_insert(0) += 1;
        }
    }

    pub fn total(&self) -> u64 {
        self.by_pool.keys().map(|p| self.in_pool(*p)).sum()
    }

    /// Undersized PGs of `pool`.
    pub fn in_pool(&self, pool: u64) -> u64 {
        self.by_pool.get(&pool).map_or(0, |m| m.values().sum())
    }

    /// Undersized PGs of `pool` with at most `members` live OSDs in their acting set.
    pub fn with_at_most(&self, pool: u64, members: usize) -> u64 {
        self.by_pool
            .get(&pool)
            .map_or(0, |m| m.range(..=members).map(|(_, n)| n).sum())
    }

    /// The fewest live members in the acting set of any undersized PG of `pool`.
    pub fn fewest(&self, pool: u64) -> Option<usize> {
        self.by_pool
            .get(&pool)
            .and_then(|m| m.iter().find(|(_, n)| **n > 0).map(|(k, _)| *k))
    }
}

/// Every PG of the listing.
pub fn parse(out: &[u8]) -> Result<Vec<PgBrief>, ParseError> {
    let mut pgs = Vec::new();
    for_each(out, &mut |pg| pgs.push(pg))?;
    Ok(pgs)
}

/// The undersized PGs of the listing, counted ([`UndersizedPgs`]) while it is read: no list of
/// PGs is built, whatever its length. `pg dump pgs_brief` lists every PG of the cluster, ~110
/// bytes each: this is what keeps reading it bounded by the reply itself.
pub fn undersized(out: &[u8]) -> Result<UndersizedPgs, ParseError> {
    let mut tally = UndersizedPgs::of_every_pg();
    for_each(out, &mut |pg| tally.add(&pg))?;
    Ok(tally)
}

/// Reads the listing in one pass and hands each PG to `sink` as soon as it is read.
fn for_each(out: &[u8], sink: &mut dyn FnMut(PgBrief)) -> Result<(), ParseError> {
    let mut walk = Walk {
        sink,
        error: None,
        lists: 0,
    };
    let read = json::parse_with(out, Top(&mut walk));
    // A shape error is kept aside by the walk (serde's error type cannot carry it).
    match (walk.error, read) {
        (Some(e), _) => Err(e),
        (None, r) => r,
    }
}

static KEEP_PG: Keep = Keep {
    fields: Some(&[
        ("pgid", &Keep::ALL),
        ("state", &Keep::ALL),
        ("up", &Keep::ALL),
        ("acting", &Keep::ALL),
    ]),
    each: None,
};

/// State of one pass over a listing.
struct Walk<'s> {
    sink: &'s mut dyn FnMut(PgBrief),
    /// The shape error that stopped the pass.
    error: Option<ParseError>,
    /// PG lists read: Ceph prints one; two (`pg_stats` and `pg_map.pg_stats`) would count each
    /// PG twice.
    lists: u8,
}

impl Walk<'_> {
    /// Stops the pass with `e` (the walk's error wins over serde's placeholder).
    fn fail<E: de::Error>(&mut self, e: ParseError) -> E {
        self.error.get_or_insert(e);
        E::custom("shape error")
    }

    /// A value that is not the container expected at `at`: the same words as the tree-based
    /// parsers ("expected an array, found string").
    fn wrong<E: de::Error>(&mut self, at: Where, what: &str, v: &Value) -> E {
        let e = at.with_path(|p| p.mismatch(what, v));
        self.fail(e)
    }
}

/// Where a value of the listing is: one of the places Ceph releases put the PG list.
#[derive(Clone, Copy)]
enum Where {
    Root,
    Stats,
    PgMap,
    PgMapStats,
}

impl Where {
    fn with_path<R>(self, f: impl FnOnce(&Path<'_>) -> R) -> R {
        let root = Path::Root;
        let stats = root.key("pg_stats");
        let map = root.key("pg_map");
        let map_stats = map.key("pg_stats");
        f(match self {
            Where::Root => &root,
            Where::Stats => &stats,
            Where::PgMap => &map,
            Where::PgMapStats => &map_stats,
        })
    }
}

/// The `visit_*` methods of a visitor that wants one kind of container: any other scalar is a
/// shape error at `self.at` (`null` is left to each visitor).
macro_rules! reject_scalars {
    ($what:expr) => {
        fn visit_bool<E: de::Error>(self, v: bool) -> Result<Self::Value, E> {
            Err(self.walk.wrong(self.at, $what, &Value::Bool(v)))
        }
        fn visit_i64<E: de::Error>(self, v: i64) -> Result<Self::Value, E> {
            Err(self.walk.wrong(self.at, $what, &Value::from(v)))
        }
        fn visit_u64<E: de::Error>(self, v: u64) -> Result<Self::Value, E> {
            Err(self.walk.wrong(self.at, $what, &Value::from(v)))
        }
        fn visit_f64<E: de::Error>(self, v: f64) -> Result<Self::Value, E> {
            Err(self.walk.wrong(self.at, $what, &Value::from(v)))
        }
        fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
            Err(self.walk.wrong(self.at, $what, &Value::from(v)))
        }
    };
}

/// The document: a bare list (Luminous/Mimic), or an object with `pg_stats` (Nautilus+) or
/// `pg_map.pg_stats` (Reef `pg dump`).
struct Top<'w, 's>(&'w mut Walk<'s>);

impl<'de> DeserializeSeed<'de> for Top<'_, '_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(TopVisitor {
            walk: self.0,
            at: Where::Root,
        })
    }
}

struct TopVisitor<'w, 's> {
    walk: &'w mut Walk<'s>,
    at: Where,
}

const TOP: &str = "an array of PGs or an object with pg_stats";

impl<'de> Visitor<'de> for TopVisitor<'_, '_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(TOP)
    }

    reject_scalars!(TOP);

    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        Err(self.walk.wrong(self.at, TOP, &Value::Null))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<(), A::Error> {
        list(self.walk, Where::Root, seq)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        // Whether the object is a listing at all; a null field counts as absent.
        let mut known = false;
        while let Some(key) = map.next_key::<String>()? {
            match key.as_str() {
                "pg_ready" => {
                    let v = map.next_value::<Value>()?;
                    if let Err(e) = check_ready(&v) {
                        return Err(self.walk.fail(e));
                    }
                    // Nautilus+ print `{"pg_ready":true}` alone when no PG matches.
                    known = true;
                }
                "pg_stats" => {
                    known |= map.next_value_seed(List {
                        walk: &mut *self.walk,
                        at: Where::Stats,
                    })?;
                }
                "pg_map" => known |= map.next_value_seed(PgMap(&mut *self.walk))?,
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        if !known {
            let e = Path::Root.error(format!("expected {TOP}, found an object without them"));
            return Err(self.walk.fail(e));
        }
        Ok(())
    }
}

/// `pg_map` (Reef): an object whose `pg_stats` is the list; the rest is skipped. `false` when it
/// is `null` (taken as absent).
struct PgMap<'w, 's>(&'w mut Walk<'s>);

impl<'de> DeserializeSeed<'de> for PgMap<'_, '_> {
    type Value = bool;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<bool, D::Error> {
        d.deserialize_any(PgMapVisitor {
            walk: self.0,
            at: Where::PgMap,
        })
    }
}

struct PgMapVisitor<'w, 's> {
    walk: &'w mut Walk<'s>,
    at: Where,
}

impl<'de> Visitor<'de> for PgMapVisitor<'_, '_> {
    type Value = bool;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an object")
    }

    reject_scalars!("an object");

    fn visit_unit<E: de::Error>(self) -> Result<bool, E> {
        Ok(false)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, _seq: A) -> Result<bool, A::Error> {
        let found = Value::Array(Vec::new());
        Err(self.walk.wrong(self.at, "an object", &found))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<bool, A::Error> {
        while let Some(key) = map.next_key::<String>()? {
            if key == "pg_stats" {
                map.next_value_seed(List {
                    walk: &mut *self.walk,
                    at: Where::PgMapStats,
                })?;
            } else {
                map.next_value::<IgnoredAny>()?;
            }
        }
        Ok(true)
    }
}

/// A list of PGs, each handed to the sink as it is read. `false` when it is `null` (taken as
/// absent).
struct List<'w, 's> {
    walk: &'w mut Walk<'s>,
    at: Where,
}

impl<'de> DeserializeSeed<'de> for List<'_, '_> {
    type Value = bool;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<bool, D::Error> {
        d.deserialize_any(ListVisitor {
            walk: self.walk,
            at: self.at,
        })
    }
}

struct ListVisitor<'w, 's> {
    walk: &'w mut Walk<'s>,
    at: Where,
}

impl<'de> Visitor<'de> for ListVisitor<'_, '_> {
    type Value = bool;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an array")
    }

    reject_scalars!("an array");

    fn visit_unit<E: de::Error>(self) -> Result<bool, E> {
        Ok(false)
    }

    fn visit_map<A: MapAccess<'de>>(self, _map: A) -> Result<bool, A::Error> {
        let found = Value::Object(Map::new());
        Err(self.walk.wrong(self.at, "an array", &found))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<bool, A::Error> {
        list(self.walk, self.at, seq).map(|()| true)
    }
}

fn list<'de, A: SeqAccess<'de>>(
    walk: &mut Walk<'_>,
    at: Where,
    mut seq: A,
) -> Result<(), A::Error> {
    walk.lists += 1;
    if walk.lists > 1 {
        let e = at.with_path(|p| {
            p.error("expected one list of PGs, found a second one (pg_stats and pg_map.pg_stats)")
        });
        return Err(walk.fail(e));
    }
    let mut i = 0;
    // Each PG is built on its own (the 4 fields read, ~100 bytes) and dropped once counted.
    while let Some(v) = seq.next_element_seed(&KEEP_PG)? {
        match at.with_path(|p| pg_brief(&v, &p.index(i))) {
            Ok(pg) => (walk.sink)(pg),
            Err(e) => return Err(walk.fail(e)),
        }
        i += 1;
    }
    Ok(())
}

fn check_ready(v: &Value) -> Result<(), ParseError> {
    let at = Path::Root;
    let at = at.key("pg_ready");
    match v {
        Value::Bool(true) => Ok(()),
        Value::Bool(false) => Err(at.error(
            "expected true, found false (the mgr restarted and has not heard from every OSD yet: \
             PG states may be stale)",
        )),
        other => Err(at.mismatch("a boolean", other)),
    }
}

fn pg_brief(v: &Value, at: &Path<'_>) -> Result<PgBrief, ParseError> {
    let obj = json::as_object(v, at)?;
    let pgid = json::req_str(obj, "pgid", at)?;
    let pool_id = pool_of(pgid).ok_or_else(|| {
        at.key("pgid").error(format!(
            "expected a PG id like \"2.1f\" (pool id, '.', hex seed), found {pgid:?}"
        ))
    })?;
    Ok(PgBrief {
        pgid: pgid.to_string(),
        pool_id,
        state: json::req_str(obj, "state", at)?.to_string(),
        up: osd_set(obj, "up", at)?,
        acting: osd_set(obj, "acting", at)?,
    })
}

/// The pool id of a PG id `<pool>.<hex seed>`, optionally with an EC shard suffix `s<n>`.
fn pool_of(pgid: &str) -> Option<u64> {
    let (pool, seed) = pgid.split_once('.')?;
    if pool.is_empty() || !pool.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let (seed, shard) = match seed.split_once('s') {
        Some((seed, shard)) => (seed, Some(shard)),
        None => (seed, None),
    };
    let hex_ok = !seed.is_empty() && seed.bytes().all(|b| b.is_ascii_hexdigit());
    let shard_ok = shard.is_none_or(|s| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()));
    if !(hex_ok && shard_ok) {
        return None;
    }
    pool.parse().ok()
}

fn osd_set(
    obj: &Map<String, Value>,
    key: &str,
    at: &Path<'_>,
) -> Result<Vec<Option<u32>>, ParseError> {
    let at = at.key(key);
    let list = match obj.get(key) {
        Some(v) => json::as_array(v, &at)?,
        None => return Err(at.missing("an array of OSD ids")),
    };
    list.iter()
        .enumerate()
        .map(|(i, v)| osd_slot(v, &at.index(i)))
        .collect()
}

fn osd_slot(v: &Value, at: &Path<'_>) -> Result<Option<u32>, ParseError> {
    const WHAT: &str = "an OSD id (or 2147483647 / \"NONE\" for a missing shard)";
    match v {
        Value::Number(n) => match n.as_u64() {
            Some(CRUSH_ITEM_NONE) => Ok(None),
            Some(id) if id < CRUSH_ITEM_NONE => Ok(Some(id as u32)),
            _ => Err(at.error(format!("expected {WHAT}, found {n}"))),
        },
        Value::String(s) if s == "NONE" => Ok(None),
        _ => Err(at.mismatch(WHAT, v)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ceph::parse::test_support::{fixture, fixture_str, half, hostile_inputs, STATES};
    use std::collections::BTreeMap;

    fn parse_fixture(rel: &str) -> Vec<PgBrief> {
        parse(&fixture(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
    }

    fn shape(r: Result<Vec<PgBrief>, ParseError>) -> String {
        match r {
            Err(e @ ParseError::Shape { .. }) => e.to_string(),
            other => panic!("expected a Shape error, got {other:?}"),
        }
    }

    fn edited(rel: &str, edit: impl FnOnce(&mut Value)) -> Vec<u8> {
        let mut v: Value = serde_json::from_slice(&fixture(rel)).unwrap();
        edit(&mut v);
        serde_json::to_vec(&v).unwrap()
    }

    fn by_state(pgs: &[PgBrief]) -> BTreeMap<String, u64> {
        let mut m = BTreeMap::new();
        for pg in pgs {
            *m.entry(pg.state.clone()).or_insert(0) += 1;
        }
        m
    }

    /// The PG dump of every state agrees with `ceph status` of the same state on state counts.
    #[test]
    fn pg_dump_pgs_brief_every_state() {
        for state in STATES {
            let rel = format!("{state}/ceph_pg_dump_pgs_brief.json");
            let pgs = parse_fixture(&rel);
            assert_eq!(pgs.len(), 33, "{rel}");
            assert_eq!(pgs.iter().filter(|p| p.pool_id == 1).count(), 1, "{rel}");
            assert_eq!(pgs.iter().filter(|p| p.pool_id == 2).count(), 32, "{rel}");
            for pg in &pgs {
                assert!(pg.up.iter().all(Option::is_some), "{rel} {}", pg.pgid);
                assert!(
                    pg.acting_members() >= 2 && pg.acting_members() <= 3,
                    "{rel} {pg:?}"
                );
                assert_eq!(
                    pg.has_state("undersized"),
                    pg.acting_members() < 3,
                    "{rel} {pg:?}"
                );
            }
            let status =
                crate::ceph::parse::status::parse(&fixture(&format!("{state}/ceph_status.json")))
                    .unwrap();
            let expected: BTreeMap<String, u64> = status.pgs_by_state.iter().cloned().collect();
            // The captures are a few seconds apart; compare only where the cluster was steady.
            if matches!(*state, "healthy-idle" | "client-load" | "undersized") {
                assert_eq!(by_state(&pgs), expected, "{rel}");
            }
        }
    }

    #[test]
    fn healthy_pg_dump_details() {
        let pgs = parse_fixture("healthy-idle/ceph_pg_dump_pgs_brief.json");
        assert_eq!(
            pgs[0],
            PgBrief {
                pgid: "2.1f".into(),
                pool_id: 2,
                state: "active+clean".into(),
                up: vec![Some(0), Some(3), Some(2)],
                acting: vec![Some(0), Some(3), Some(2)],
            }
        );
        assert!(pgs
            .iter()
            .all(|p| p.state == "active+clean" && p.acting_members() == 3));
    }

    #[test]
    fn recovery_acting_sets_shrink() {
        // Async recovery takes the target out of the acting set: up has 3, acting 2.
        let pgs = parse_fixture("recovery/ceph_pg_dump_pgs_brief.json");
        let rec: Vec<&PgBrief> = pgs.iter().filter(|p| p.has_state("recovering")).collect();
        assert_eq!(rec.len(), 24);
        for pg in rec {
            assert_eq!(pg.up.len(), 3, "{pg:?}");
            assert_eq!(pg.acting_members(), 2, "{pg:?}");
            assert!(
                pg.has_state("undersized") && pg.has_state("degraded") && pg.has_state("remapped")
            );
            assert!(!pg.has_state("recover"), "whole words only");
        }
    }

    #[test]
    fn pg_ls_undersized_every_state() {
        let expected = [
            ("healthy-idle", 0),
            ("client-load", 0),
            ("rebalance", 0),
            ("recovery", 24),
            ("undersized", 19),
        ];
        for (state, n) in expected {
            let rel = format!("{state}/ceph_pg_ls_undersized.json");
            let pgs = parse_fixture(&rel);
            assert_eq!(pgs.len(), n, "{rel}");
            for pg in &pgs {
                assert!(pg.has_state("undersized"), "{rel} {pg:?}");
                assert_eq!(pg.acting_members(), 2, "{rel} {pg:?}");
            }
        }
        let pgs = parse_fixture("undersized/ceph_pg_ls_undersized.json");
        assert_eq!(
            pgs[0],
            PgBrief {
                pgid: "1.0".into(),
                pool_id: 1,
                state: "active+undersized".into(),
                up: vec![Some(1), Some(0)],
                acting: vec![Some(1), Some(0)],
            }
        );
        assert_eq!(pgs.iter().filter(|p| p.has_state("degraded")).count(), 18);
        // osd.2 was stopped (events.txt): it is in no acting set.
        assert!(pgs
            .iter()
            .all(|p| !p.acting.contains(&Some(2)) && !p.up.contains(&Some(2))));
    }

    #[test]
    fn nothing_matched_is_an_empty_list() {
        // 16.2.15 prints `{"pg_ready":true}` (no pg_stats) when no PG matches.
        assert_eq!(
            fixture_str("healthy-idle/ceph_pg_ls_undersized.json").trim(),
            "{\"pg_ready\":true}"
        );
        assert_eq!(parse(b"\n{\"pg_ready\":true}\n"), Ok(vec![]));
        assert_eq!(parse(b"{\"pg_ready\":true,\"pg_stats\":[]}"), Ok(vec![]));
        // A null field is an absent one, as in every parser here.
        assert_eq!(parse(b"{\"pg_ready\":true,\"pg_stats\":null}"), Ok(vec![]));
        assert!(shape(parse(b"{\"pg_stats\":null}")).ends_with("found an object without them"));
        assert_eq!(parse(b"[]"), Ok(vec![]));
    }

    #[test]
    fn pg_ready_false_is_an_error() {
        let out = fixture_str("undersized/ceph_pg_ls_undersized.json")
            .replace("\"pg_ready\":true", "\"pg_ready\":false");
        let msg = shape(parse(out.as_bytes()));
        assert!(
            msg.starts_with("pg_ready: expected true, found false"),
            "{msg}"
        );
        assert_eq!(
            shape(parse(b"{\"pg_ready\":\"yes\",\"pg_stats\":[]}")),
            "pg_ready: expected a boolean, found string"
        );
    }

    /// Luminous (12) / Mimic (13) print `pg ls` and `pg dump pgs_brief` as a bare array.
    #[test]
    fn luminous_bare_array() {
        for rel in [
            "undersized/ceph_pg_ls_undersized.json",
            "recovery/ceph_pg_dump_pgs_brief.json",
        ] {
            let out = edited(rel, |v| *v = v["pg_stats"].take());
            assert!(out.starts_with(b"["));
            assert_eq!(parse(&out).unwrap(), parse_fixture(rel), "{rel}");
        }
    }

    /// Reef (18) `pg dump -f json`: `{"pg_ready":true,"pg_map":{"version":..,"stamp":..,
    /// "last_osdmap_epoch":..,"pg_stats":[..],"pool_stats":[..],"osd_stats":[..],..}}`.
    #[test]
    fn reef_pg_map_wrapper() {
        let rel = "recovery/ceph_pg_ls_undersized.json";
        let out = edited(rel, |v| {
            let stats = v["pg_stats"].take();
            *v = serde_json::json!({
                "pg_ready": true,
                "pg_map": {"version": 1234, "stamp": "2026-11-30T13:26:51.127180+0000", "last_osdmap_epoch": 0,
                           "pg_stats": stats, "pool_stats": [], "osd_stats": []}
            });
        });
        assert_eq!(parse(&out).unwrap(), parse_fixture(rel));
        assert_eq!(
            parse(br#"{"pg_ready":true,"pg_map":{"version":1}}"#),
            Ok(vec![])
        );
        assert_eq!(
            shape(parse(br#"{"pg_ready":true,"pg_map":{"pg_stats":{}}}"#)),
            "pg_map.pg_stats: expected an array, found an object"
        );
        let bad = edited(rel, |v| {
            let stats = v["pg_stats"].take();
            *v = serde_json::json!({"pg_ready": true, "pg_map": {"pg_stats": stats}});
            v["pg_map"]["pg_stats"][3]["acting"][1] = Value::from(-1);
        });
        assert_eq!(
            shape(parse(&bad)),
            "pg_map.pg_stats[3].acting[1]: expected an OSD id (or 2147483647 / \"NONE\" for a missing shard), found -1"
        );
    }

    /// EC pool with a missing shard: older releases print CRUSH_ITEM_NONE as 2147483647, Reef
    /// prints `"NONE"` in places.
    #[test]
    fn missing_shards() {
        let out = edited("undersized/ceph_pg_dump_pgs_brief.json", |v| {
            let pg = &mut v["pg_stats"][0];
            pg["pgid"] = Value::from("3.7");
            pg["up"] = serde_json::json!([0, 2147483647, 1, 2]);
            pg["acting"] = serde_json::json!([0, "NONE", 1, 2147483647]);
            pg["state"] = Value::from("active+undersized+degraded");
        });
        let pgs = parse(&out).unwrap();
        assert_eq!(pgs[0].pool_id, 3);
        assert_eq!(pgs[0].up, vec![Some(0), None, Some(1), Some(2)]);
        assert_eq!(pgs[0].acting, vec![Some(0), None, Some(1), None]);
        assert_eq!(pgs[0].acting_members(), 2);
        assert!(pgs[0].has_state("undersized"));
    }

    #[test]
    fn pgid_validation() {
        assert_eq!(pool_of("2.1f"), Some(2));
        assert_eq!(pool_of("12.0"), Some(12));
        assert_eq!(pool_of("2.1fs0"), Some(2));
        for bad in [
            "",
            "2",
            "2.",
            ".1f",
            "x.1f",
            "2.1g",
            "-2.1",
            "2.1fs",
            "2.s0",
            "2.1f.0",
            "99999999999999999999999.1",
        ] {
            assert_eq!(pool_of(bad), None, "{bad:?}");
        }
        let bad = edited("healthy-idle/ceph_pg_dump_pgs_brief.json", |v| {
            v["pg_stats"][5]["pgid"] = Value::from("1f")
        });
        assert_eq!(
            shape(parse(&bad)),
            "pg_stats[5].pgid: expected a PG id like \"2.1f\" (pool id, '.', hex seed), found \"1f\""
        );
    }

    #[test]
    fn wrong_types_name_the_field() {
        let rel = "undersized/ceph_pg_dump_pgs_brief.json";
        type Edit = Box<dyn Fn(&mut Value)>;
        let cases: Vec<(Edit, &str)> = vec![
            (
                Box::new(|v| v["pg_stats"][2]["state"] = Value::from(1)),
                "pg_stats[2].state: expected a string, found a non-negative integer",
            ),
            (
                Box::new(|v| v["pg_stats"][2]["up"] = Value::from("0,1")),
                "pg_stats[2].up: expected an array, found string",
            ),
            (
                Box::new(|v| v["pg_stats"][2]["acting"][0] = Value::from("3")),
                "pg_stats[2].acting[0]: expected an OSD id (or 2147483647 / \"NONE\" for a missing shard), found string",
            ),
            (
                Box::new(|v| v["pg_stats"][2]["acting"][0] = Value::from(1.0)),
                "pg_stats[2].acting[0]: expected an OSD id (or 2147483647 / \"NONE\" for a missing shard), found 1.0",
            ),
            (
                Box::new(|v| v["pg_stats"][2]["acting"][0] = Value::from(4294967296u64)),
                "pg_stats[2].acting[0]: expected an OSD id (or 2147483647 / \"NONE\" for a missing shard), found 4294967296",
            ),
            (
                Box::new(|v| {
                    v["pg_stats"][4].as_object_mut().unwrap().remove("acting");
                }),
                "pg_stats[4].acting: expected an array of OSD ids, found nothing (the key is absent)",
            ),
            (
                Box::new(|v| {
                    v["pg_stats"][4].as_object_mut().unwrap().remove("pgid");
                }),
                "pg_stats[4].pgid: expected a string, found nothing (the key is absent)",
            ),
            (
                Box::new(|v| v["pg_stats"][0] = Value::Null),
                "pg_stats[0]: expected an object, found null",
            ),
            (
                Box::new(|v| v["pg_stats"] = Value::from("none")),
                "pg_stats: expected an array, found string",
            ),
        ];
        for (edit, want) in cases {
            assert_eq!(shape(parse(&edited(rel, edit))), want);
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
            "(top level): expected an array of PGs or an object with pg_stats, found null"
        );
        assert!(shape(parse(b"{\"x\":1}")).starts_with("(top level): expected an array of PGs"));
        for state in STATES {
            for f in ["ceph_pg_dump_pgs_brief.json", "ceph_pg_ls_undersized.json"] {
                let full = fixture(&format!("{state}/{f}"));
                assert!(
                    matches!(parse(half(&full)), Err(ParseError::Json { .. })),
                    "{state}/{f}"
                );
            }
        }
    }

    #[test]
    fn has_state_is_whole_word() {
        let pg = PgBrief {
            pgid: "2.0".into(),
            pool_id: 2,
            state: "active+recovery_wait+undersized+degraded".into(),
            up: vec![],
            acting: vec![],
        };
        assert!(pg.has_state("recovery_wait"));
        assert!(!pg.has_state("recovery"));
        assert!(!pg.has_state("wait"));
        assert!(!pg.has_state(""));
        assert_eq!(pg.acting_members(), 0);
    }

    /// Live lab (16.2.15): `pg ls undersized` healthy (none) and with osd.3 down (25 PGs, each
    /// with 2 of 3 replicas = min_size), consistent with `ceph status` taken just before.
    #[test]
    fn lab_pg_ls_undersized() {
        assert_eq!(parse_fixture("lab/healthy.pg-ls-undersized.out"), vec![]);
        let pgs = parse_fixture("lab/osd3-down.pg-ls-undersized.out");
        assert_eq!(pgs.len(), 25);
        for pg in &pgs {
            assert_eq!(pg.state, "active+undersized+degraded");
            assert_eq!(pg.acting_members(), 2, "{pg:?}");
            assert!(
                !pg.acting.contains(&Some(3)) && !pg.up.contains(&Some(3)),
                "{pg:?}"
            );
        }
        let status =
            crate::ceph::parse::status::parse(&fixture("lab/osd3-down.status.out")).unwrap();
        assert_eq!(
            status.pg_state_word_counts()["undersized"],
            pgs.len() as u64
        );
    }

    /// `pg ls` with an invalid state exits 22 (EINVAL, message on stderr) yet prints
    /// `{"pg_ready":true}` on stdout, which parses as "no PG": callers must check the exit code.
    #[test]
    fn lab_invalid_state_prints_an_empty_list() {
        assert_eq!(parse_fixture("lab/error.pg-ls-undersizedX.out"), vec![]);
        let err = fixture_str("lab/error.pg-ls-undersizedX.err");
        assert!(
            err.starts_with("Error EINVAL: 'undersizedX' is not a valid pg state"),
            "{err}"
        );
    }

    fn tally(rel: &str) -> UndersizedPgs {
        undersized(&fixture(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
    }

    /// What the collector reads (`pg dump pgs_brief`, every PG) and what it read before (`pg ls
    /// undersized`, ~20x the bytes per PG) count the same undersized PGs per pool and acting-set
    /// size, in every captured state.
    #[test]
    fn pg_dump_and_pg_ls_count_the_same_undersized_pgs() {
        for state in STATES {
            let brief = tally(&format!("{state}/ceph_pg_dump_pgs_brief.json"));
            let ls = tally(&format!("{state}/ceph_pg_ls_undersized.json"));
            assert_eq!(brief.by_pool, ls.by_pool, "{state}");
        }
        // undersized/events.txt: osd.2 stopped with noout; every undersized PG has 2 of 3.
        let t = tally("undersized/ceph_pg_dump_pgs_brief.json");
        assert_eq!(
            t.by_pool,
            BTreeMap::from([
                (1, BTreeMap::from([(2, 1)])),
                (2, BTreeMap::from([(2, 18)]))
            ])
        );
        assert_eq!(t.total(), 19);
        assert_eq!(
            (t.in_pool(2), t.with_at_most(2, 2), t.with_at_most(2, 1)),
            (18, 18, 0)
        );
        assert_eq!(t.in_pool(7), 0);
        assert_eq!(tally("recovery/ceph_pg_dump_pgs_brief.json").total(), 24);
        assert_eq!(
            tally("healthy-idle/ceph_pg_dump_pgs_brief.json"),
            UndersizedPgs::of_every_pg()
        );
        assert_eq!(tally("lab/osd3-down.pg-ls-undersized.out").total(), 25);
    }

    /// Counting takes the same PGs as listing them: same shapes, same errors.
    #[test]
    fn counting_reads_like_listing() {
        for state in STATES {
            for f in ["ceph_pg_dump_pgs_brief.json", "ceph_pg_ls_undersized.json"] {
                let rel = format!("{state}/{f}");
                let mut by_list = UndersizedPgs::of_every_pg();
                for pg in parse_fixture(&rel) {
                    by_list.add(&pg);
                }
                assert_eq!(tally(&rel), by_list, "{rel}");
                let full = fixture(&rel);
                assert!(
                    matches!(undersized(half(&full)), Err(ParseError::Json { .. })),
                    "{rel}"
                );
            }
        }
        let bad = edited("undersized/ceph_pg_dump_pgs_brief.json", |v| {
            v["pg_stats"][3]["acting"][1] = Value::from("x")
        });
        assert_eq!(
            shape(parse(&bad)),
            shape(undersized(&bad).map(|_| Vec::new()))
        );
    }

    /// A big cluster at its worst: 100k PGs, all undersized, in 10 pools, built from the real
    /// `pg dump pgs_brief` entries with new ids (~11 MiB, where `pg ls undersized` would be
    /// 223 MiB). Counted exactly; the memory this takes is measured by scripts/bench-undersized.
    #[test]
    fn a_hundred_thousand_undersized_pgs_are_counted_per_pool() {
        let v: Value =
            serde_json::from_slice(&fixture("undersized/ceph_pg_dump_pgs_brief.json")).unwrap();
        let entries: Vec<&Value> = v["pg_stats"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|pg| pg["state"].as_str().unwrap().contains("undersized"))
            .collect();
        let mut out = String::from("\n{\"pg_ready\":true,\"pg_stats\":[");
        for i in 0..100_000u64 {
            let mut pg = entries[i as usize % entries.len()].clone();
            pg["pgid"] = Value::from(format!("{}.{:x}", 1 + i % 10, i / 10));
            if i % 1000 == 0 {
                // An EC-like PG down to 1 live member of 3: below min_size.
                pg["acting"] = serde_json::json!([0, 2147483647, "NONE"]);
            }
            if i > 0 {
                out.push(',');
            }
            out.push_str(&pg.to_string());
        }
        out.push_str("]}\n");
        let t = undersized(out.as_bytes()).unwrap();
        assert_eq!(t.total(), 100_000);
        for pool in 1..=10 {
            assert_eq!(t.in_pool(pool), 10_000, "pool {pool}");
        }
        // i % 1000 == 0 puts all 100 of those in pool 1 (i % 10 == 0).
        assert_eq!(t.with_at_most(1, 1), 100);
        assert_eq!(t.with_at_most(1, 2), 10_000);
        assert_eq!(t.with_at_most(2, 1), 0);
    }

    #[test]
    fn two_lists_are_an_error_not_a_double_count() {
        let out = br#"{"pg_ready":true,"pg_stats":[],"pg_map":{"pg_stats":[]}}"#;
        assert_eq!(
            shape(parse(out)),
            "pg_map.pg_stats: expected one list of PGs, found a second one (pg_stats and pg_map.pg_stats)"
        );
        // pg_ready after the list (no release prints it so; the answer is the same).
        let late = br#"{"pg_stats":[],"pg_ready":false}"#;
        assert!(shape(parse(late)).starts_with("pg_ready: expected true, found false"));
        assert_eq!(
            shape(parse(br#"{"pg_ready":true,"pg_map":[]}"#)),
            "pg_map: expected an object, found an array"
        );
    }
}
