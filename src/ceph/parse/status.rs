//! `ceph status --format json`.
//!
//! Release differences handled:
//! - `pgmap.degraded_*`, `misplaced_*`, `unfound_objects`, `recovering_*`, `*_op_per_sec` are
//!   **absent** when zero (all releases): absent reads as 0.
//! - Luminous/Nautilus nest the OSD counts one level deeper, `osdmap.osdmap.num_osds`; Octopus+
//!   print `osdmap.num_osds`.
//! - Luminous+ put the overall health in `health.status`; Jewel/Kraken in
//!   `health.overall_status` (Luminous also prints a deprecated `overall_status`, which we ignore
//!   when `status` is there).
//! - `pgs_by_state` entries are `{state_name, count}`; `ceph report` spells them `{state, num}`:
//!   both are accepted.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use super::json::{self, Path};
use super::ParseError;

/// The parts of `ceph status` the exporter uses.
#[derive(Debug, Clone, PartialEq)]
pub struct ClusterStatus {
    pub fsid: Option<String>,
    /// `HEALTH_OK` / `HEALTH_WARN` / `HEALTH_ERR` as Ceph prints it.
    pub health: Option<String>,
    /// Full state strings as Ceph prints them (`active+undersized+degraded`), with PG counts, in
    /// Ceph's order.
    pub pgs_by_state: Vec<(String, u64)>,
    pub num_pgs: u64,
    pub num_objects: u64,
    pub degraded_objects: u64,
    pub degraded_total: u64,
    pub misplaced_objects: u64,
    pub misplaced_total: u64,
    pub unfound_objects: u64,
    pub recovering_objects_per_sec: f64,
    pub recovering_bytes_per_sec: f64,
    pub read_op_per_sec: f64,
    pub write_op_per_sec: f64,
    /// `None` when the status has no osdmap section.
    pub num_osds: Option<u64>,
    pub num_up_osds: Option<u64>,
    pub num_in_osds: Option<u64>,
    /// When the set of up OSDs last changed (`osdmap.osd_up_since`, Unix seconds; Octopus+).
    pub osd_up_since: Option<u64>,
    /// `health.checks` (Luminous+), by name; empty when the status has none.
    pub health_checks: BTreeMap<String, HealthCheck>,
    /// `mgrmap.available`: whether an mgr is active. Without one the `pgmap` is the last the
    /// mgr reported before it went (recorded on the lab: 25 PGs `active+undersized+degraded`
    /// shown while all 33 were `active+clean`). `None`: not in the status.
    pub mgr_available: Option<bool>,
}

/// One of Ceph's health checks as `ceph status` summarizes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HealthCheck {
    /// `HEALTH_WARN`, `HEALTH_ERR`.
    pub severity: Option<String>,
    /// `"1 osds down"`, `"noout flag(s) set"`.
    pub message: Option<String>,
    pub count: Option<u64>,
}

/// PG state words of data still moving: recovering, backfilling, waiting for either, or stuck
/// on a full OSD.
pub const MOVING_PG_STATES: [&str; 6] = [
    "recovering",
    "recovery_wait",
    "recovery_toofull",
    "backfilling",
    "backfill_wait",
    "backfill_toofull",
];

/// The counts that say whether a recovery is running: the one definition the enforcer, the
/// exporter's status, `experiment`, `profile-sweep` and `tune` all use.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RecoveryCounts {
    pub degraded_objects: u64,
    pub misplaced_objects: u64,
    /// PGs whose data is moving ([`MOVING_PG_STATES`]).
    pub pgs_moving: u64,
    /// PGs with fewer copies than the pool's size: redundancy is not back yet, even before
    /// any object is counted degraded.
    pub undersized_pgs: u64,
}

impl RecoveryCounts {
    /// A recovery runs while objects are degraded or misplaced, PGs recover or backfill (or wait
    /// to), or PGs are undersized.
    pub fn running(&self) -> bool {
        self.degraded_objects > 0
            || self.misplaced_objects > 0
            || self.pgs_moving > 0
            || self.undersized_pgs > 0
    }

    /// One phrase for messages: "12 degraded, 340 misplaced objects, 5 PGs recovering or
    /// backfilling, 3 PGs undersized".
    pub fn describe(&self) -> String {
        format!(
            "{} degraded, {} misplaced objects, {} PGs recovering or backfilling, {} PGs undersized",
            self.degraded_objects, self.misplaced_objects, self.pgs_moving, self.undersized_pgs
        )
    }
}

impl ClusterStatus {
    /// See [`RecoveryCounts`].
    pub fn recovery_counts(&self) -> RecoveryCounts {
        let words = self.pg_state_word_counts();
        RecoveryCounts {
            degraded_objects: self.degraded_objects,
            misplaced_objects: self.misplaced_objects,
            pgs_moving: self
                .pgs_by_state
                .iter()
                .filter(|(state, _)| state.split('+').any(|w| MOVING_PG_STATES.contains(&w)))
                .map(|(_, n)| *n)
                .sum(),
            undersized_pgs: words.get("undersized").copied().unwrap_or(0),
        }
    }

    /// OSDs down but still in, as the `OSD_DOWN` health check counts them (it counts only
    /// OSDs that are in: a stopped OSD marked out raises none, see `recovery/ceph_status.json`).
    pub fn osds_down_in(&self) -> u64 {
        self.health_checks
            .get("OSD_DOWN")
            .and_then(|c| c.count)
            .unwrap_or(0)
    }

    /// The flags the `OSDMAP_FLAGS` health check names (`"noout flag(s) set"`,
    /// `"nobackfill,norecover flag(s) set"`); empty when it is not raised.
    pub fn osdmap_flags(&self) -> Vec<String> {
        self.health_checks
            .get("OSDMAP_FLAGS")
            .and_then(|c| c.message.as_deref())
            .and_then(|m| m.split(" flag(s) set").next())
            .map(|list| {
                list.split(',')
                    .map(str::trim)
                    .filter(|f| !f.is_empty() && !f.contains(' '))
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Whether a recovery is running (see [`RecoveryCounts::running`]).
    pub fn recovery_running(&self) -> bool {
        self.recovery_counts().running()
    }

    /// Counts per state WORD: a PG "active+undersized+degraded" counts in active, undersized and
    /// degraded (once each, even if Ceph ever repeated a word).
    pub fn pg_state_word_counts(&self) -> BTreeMap<String, u64> {
        let mut out: BTreeMap<String, u64> = BTreeMap::new();
        for (state, count) in &self.pgs_by_state {
            let mut seen: Vec<&str> = Vec::new();
            for word in state.split('+').filter(|w| !w.is_empty()) {
                if seen.contains(&word) {
                    continue;
                }
                seen.push(word);
                let slot = out.entry(word.to_string()).or_insert(0);
                *slot = slot.saturating_add(*count);
            }
        }
        out
    }
}

/// Parses `ceph status --format json` (or `ceph -s -f json`).
pub fn parse(out: &[u8]) -> Result<ClusterStatus, ParseError> {
    let v = json::parse_value(out)?;
    from_value(&v)
}

/// Same, from an already-parsed document (e.g. a librados `mon_command` reply).
pub fn from_value(v: &Value) -> Result<ClusterStatus, ParseError> {
    let root = Path::Root;
    let top = json::as_object(v, &root)?;

    let fsid = json::maybe_str(top, "fsid", &root)?.map(str::to_string);
    let health = health(top, &root)?;

    let pgmap_at = root.key("pgmap");
    let pgmap = json::req_object(top, "pgmap", &pgmap_at, "an object")?;
    let pgs_by_state = pgs_by_state(pgmap, &pgmap_at)?;

    let (num_osds, num_up_osds, num_in_osds, osd_up_since) = osd_counts(top, &root)?;

    Ok(ClusterStatus {
        fsid,
        health,
        pgs_by_state,
        num_pgs: json::req_u64(pgmap, "num_pgs", &pgmap_at)?,
        num_objects: json::opt_u64(pgmap, "num_objects", &pgmap_at)?,
        degraded_objects: json::opt_u64(pgmap, "degraded_objects", &pgmap_at)?,
        degraded_total: json::opt_u64(pgmap, "degraded_total", &pgmap_at)?,
        misplaced_objects: json::opt_u64(pgmap, "misplaced_objects", &pgmap_at)?,
        misplaced_total: json::opt_u64(pgmap, "misplaced_total", &pgmap_at)?,
        unfound_objects: json::opt_u64(pgmap, "unfound_objects", &pgmap_at)?,
        recovering_objects_per_sec: json::opt_f64(pgmap, "recovering_objects_per_sec", &pgmap_at)?,
        recovering_bytes_per_sec: json::opt_f64(pgmap, "recovering_bytes_per_sec", &pgmap_at)?,
        read_op_per_sec: json::opt_f64(pgmap, "read_op_per_sec", &pgmap_at)?,
        write_op_per_sec: json::opt_f64(pgmap, "write_op_per_sec", &pgmap_at)?,
        num_osds,
        num_up_osds,
        num_in_osds,
        osd_up_since,
        health_checks: health_checks(top),
        mgr_available: top
            .get("mgrmap")
            .and_then(|m| m.get("available"))
            .and_then(Value::as_bool),
    })
}

/// `health.checks`, read leniently: they only add words to what on-call reads, so a check of
/// another shape (another release) is left out rather than failing the whole status.
fn health_checks(top: &Map<String, Value>) -> BTreeMap<String, HealthCheck> {
    let Some(checks) = top
        .get("health")
        .and_then(|h| h.get("checks"))
        .and_then(Value::as_object)
    else {
        return BTreeMap::new();
    };
    checks
        .iter()
        .filter_map(|(name, c)| {
            let c = c.as_object()?;
            let summary = c.get("summary").and_then(Value::as_object);
            Some((
                name.clone(),
                HealthCheck {
                    severity: c
                        .get("severity")
                        .and_then(Value::as_str)
                        .map(str::to_string),
                    message: summary
                        .and_then(|s| s.get("message"))
                        .and_then(Value::as_str)
                        .map(str::to_string),
                    count: summary.and_then(|s| s.get("count")).and_then(Value::as_u64),
                },
            ))
        })
        .collect()
}

fn health(top: &Map<String, Value>, root: &Path<'_>) -> Result<Option<String>, ParseError> {
    let at = root.key("health");
    let Some(h) = json::field(top, "health") else {
        // Pre-Luminous `ceph status` also had a top-level `overall_status` in some builds.
        return Ok(json::maybe_str(top, "overall_status", root)?.map(str::to_string));
    };
    let h = json::as_object(h, &at)?;
    if let Some(s) = json::maybe_str(h, "status", &at)? {
        return Ok(Some(s.to_string()));
    }
    Ok(json::maybe_str(h, "overall_status", &at)?.map(str::to_string))
}

fn pgs_by_state(
    pgmap: &Map<String, Value>,
    at: &Path<'_>,
) -> Result<Vec<(String, u64)>, ParseError> {
    let list_at = at.key("pgs_by_state");
    let Some(list) = json::field(pgmap, "pgs_by_state") else {
        // A cluster without pools: nothing to list.
        return Ok(Vec::new());
    };
    let list = json::as_array(list, &list_at)?;
    let mut out = Vec::with_capacity(list.len());
    for (i, entry) in list.iter().enumerate() {
        let at = list_at.index(i);
        let obj = json::as_object(entry, &at)?;
        let state = match (obj.get("state_name"), obj.get("state")) {
            (Some(v), _) => json::as_str(v, &at.key("state_name"))?,
            (None, Some(v)) => json::as_str(v, &at.key("state"))?,
            (None, None) => return Err(at.key("state_name").missing("a string")),
        };
        let count = match (obj.get("count"), obj.get("num")) {
            (Some(v), _) => json::as_u64(v, &at.key("count"))?,
            (None, Some(v)) => json::as_u64(v, &at.key("num"))?,
            (None, None) => return Err(at.key("count").missing(json::NON_NEG_INT)),
        };
        out.push((state.to_string(), count));
    }
    Ok(out)
}

type OsdCounts = (Option<u64>, Option<u64>, Option<u64>, Option<u64>);

fn osd_counts(top: &Map<String, Value>, root: &Path<'_>) -> Result<OsdCounts, ParseError> {
    let at = root.key("osdmap");
    let Some(osdmap) = json::field(top, "osdmap") else {
        return Ok((None, None, None, None));
    };
    let outer = json::as_object(osdmap, &at)?;
    // Luminous/Nautilus: {"osdmap":{"osdmap":{"epoch":..,"num_osds":..}}}.
    let inner_at = at.key("osdmap");
    let (obj, at) = match json::field(outer, "osdmap") {
        Some(inner) => (json::as_object(inner, &inner_at)?, &inner_at),
        None => (outer, &at),
    };
    Ok((
        json::maybe_u64(obj, "num_osds", at)?,
        json::maybe_u64(obj, "num_up_osds", at)?,
        json::maybe_u64(obj, "num_in_osds", at)?,
        // Informational: another type (or a release without it) is not an error.
        obj.get("osd_up_since").and_then(Value::as_u64),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ceph::parse::test_support::{
        fixture, fixture_str, half, hostile_inputs, subdirs, STATES,
    };

    fn parse_fixture(rel: &str) -> ClusterStatus {
        parse(&fixture(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
    }

    fn shape_path(r: Result<ClusterStatus, ParseError>) -> (String, String) {
        match r {
            Err(ParseError::Shape { path, expected }) => (path, expected),
            other => panic!("expected a Shape error, got {other:?}"),
        }
    }

    /// Edits a real fixture as a `serde_json::Value` and re-serializes it.
    fn edited(rel: &str, edit: impl FnOnce(&mut Value)) -> Vec<u8> {
        let mut v: Value = serde_json::from_slice(&fixture(rel)).unwrap();
        edit(&mut v);
        let mut out = b"\n".to_vec();
        out.extend(serde_json::to_vec(&v).unwrap());
        out
    }

    #[test]
    fn healthy_idle() {
        let s = parse_fixture("healthy-idle/ceph_status.json");
        assert_eq!(
            s.fsid.as_deref(),
            Some("d8dca3e0-8654-4279-9291-d22447ac51f4")
        );
        assert_eq!(s.health.as_deref(), Some("HEALTH_OK"));
        assert_eq!(s.pgs_by_state, vec![("active+clean".to_string(), 33)]);
        assert_eq!(s.num_pgs, 33);
        assert_eq!(s.num_objects, 13946);
        // Absent when zero.
        assert_eq!((s.degraded_objects, s.degraded_total), (0, 0));
        assert_eq!(
            (s.misplaced_objects, s.misplaced_total, s.unfound_objects),
            (0, 0, 0)
        );
        assert_eq!((s.read_op_per_sec, s.write_op_per_sec), (0.0, 0.0));
        // A healthy cluster can still show a small leftover recovery rate.
        assert_eq!(s.recovering_objects_per_sec, 3.0);
        assert_eq!(s.recovering_bytes_per_sec, 14840.0);
        assert_eq!(
            (s.num_osds, s.num_up_osds, s.num_in_osds),
            (Some(4), Some(4), Some(4))
        );
        let words = s.pg_state_word_counts();
        assert_eq!(words.get("active"), Some(&33));
        assert_eq!(words.get("clean"), Some(&33));
        assert_eq!(words.len(), 2);
    }

    #[test]
    fn recovery() {
        let s = parse_fixture("recovery/ceph_status.json");
        assert_eq!(s.health.as_deref(), Some("HEALTH_WARN"));
        assert_eq!(
            s.pgs_by_state,
            vec![
                (
                    "active+recovering+undersized+degraded+remapped".to_string(),
                    24
                ),
                ("active+clean".to_string(), 9)
            ]
        );
        assert_eq!((s.degraded_objects, s.degraded_total), (9305, 41838));
        assert_eq!(s.misplaced_objects, 0);
        assert_eq!(s.recovering_objects_per_sec, 114.0);
        assert_eq!(s.recovering_bytes_per_sec, 468538.0);
        assert_eq!((s.read_op_per_sec, s.write_op_per_sec), (0.0, 210.0));
        assert_eq!(
            (s.num_osds, s.num_up_osds, s.num_in_osds),
            (Some(4), Some(3), Some(3))
        );
        let w = s.pg_state_word_counts();
        assert_eq!(w["active"], 33);
        assert_eq!(w["clean"], 9);
        for word in ["recovering", "undersized", "degraded", "remapped"] {
            assert_eq!(w[word], 24, "{word}");
        }
    }

    #[test]
    fn the_down_osd_and_the_flags_from_the_health_checks() {
        // osd.2 stopped with noout: OSD_DOWN counts it (down, still in), OSDMAP_FLAGS names noout.
        let s = parse_fixture("undersized/ceph_status.json");
        assert_eq!(s.osds_down_in(), 1);
        assert_eq!(s.osdmap_flags(), vec!["noout".to_string()]);
        assert_eq!(s.osd_up_since, Some(1796045195));
        assert_eq!(
            s.health_checks["OSD_DOWN"].message.as_deref(),
            Some("1 osds down")
        );
        // osd.3 stopped and marked out: no OSD_DOWN, nothing down and in.
        let r = parse_fixture("recovery/ceph_status.json");
        assert_eq!(r.osds_down_in(), 0);
        assert!(r.osdmap_flags().is_empty());
        assert!(parse_fixture("healthy-idle/ceph_status.json")
            .health_checks
            .is_empty());
    }

    #[test]
    fn undersized() {
        let s = parse_fixture("undersized/ceph_status.json");
        assert_eq!(s.health.as_deref(), Some("HEALTH_WARN"));
        assert_eq!((s.degraded_objects, s.degraded_total), (7880, 41838));
        assert_eq!(
            (s.num_osds, s.num_up_osds, s.num_in_osds),
            (Some(4), Some(3), Some(4))
        );
        assert_eq!(s.recovering_objects_per_sec, 0.0);
        assert_eq!((s.read_op_per_sec, s.write_op_per_sec), (2.0, 264.0));
        let w = s.pg_state_word_counts();
        assert_eq!(w["undersized"], 19);
        assert_eq!(w["degraded"], 18);
        assert_eq!(w["active"], 33);
        assert_eq!(w["clean"], 14);
    }

    #[test]
    fn rebalance() {
        let s = parse_fixture("rebalance/ceph_status.json");
        assert_eq!(s.health.as_deref(), Some("HEALTH_OK"));
        assert_eq!((s.misplaced_objects, s.misplaced_total), (6001, 61221));
        assert_eq!((s.degraded_objects, s.degraded_total), (0, 0));
        assert_eq!(s.recovering_objects_per_sec, 185.0);
        assert_eq!(s.write_op_per_sec, 378.0);
        // `read_op_per_sec` is printed (0) while `read_bytes_sec` is absent here: no assumption
        // that related keys come and go together.
        assert_eq!(s.read_op_per_sec, 0.0);
        let w = s.pg_state_word_counts();
        assert_eq!(w["backfilling"], 5);
        assert_eq!(w["recovering"], 8);
        assert_eq!(w["remapped"], 6);
        assert_eq!(w.get("undersized"), None);
    }

    #[test]
    fn every_state_parses_and_counts_add_up() {
        let mut rels: Vec<String> = STATES
            .iter()
            .map(|s| format!("{s}/ceph_status.json"))
            .collect();
        for state in ["recovery", "rebalance"] {
            for d in subdirs(&format!("{state}/samples")) {
                rels.push(format!("{d}/ceph_status.json"));
            }
        }
        assert!(rels.len() >= 5 + 10 + 12, "{rels:?}");
        for rel in rels {
            let s = parse_fixture(&rel);
            let sum: u64 = s.pgs_by_state.iter().map(|(_, c)| c).sum();
            assert_eq!(sum, s.num_pgs, "{rel}");
            assert!(s.health.is_some() && s.fsid.is_some(), "{rel}");
            assert!(s.degraded_objects <= s.degraded_total, "{rel}");
            assert!(s.misplaced_objects <= s.misplaced_total, "{rel}");
            assert_eq!(s.num_osds, Some(4), "{rel}");
        }
    }

    /// The capture scripts' own summaries (`samples.tsv`, computed with jq from the same files)
    /// agree with the parser on every sample.
    #[test]
    fn samples_agree_with_the_capture_summary() {
        for state in ["recovery", "rebalance"] {
            let tsv = fixture_str(&format!("{state}/samples.tsv"));
            let mut lines = tsv.lines();
            let header: Vec<&str> = lines.next().unwrap().split('\t').collect();
            let col = |name: &str| header.iter().position(|h| *h == name).unwrap();
            let mut n = 0;
            for line in lines.filter(|l| !l.trim().is_empty()) {
                let f: Vec<&str> = line.split('\t').collect();
                let rel = format!(
                    "{state}/samples/{:03}/ceph_status.json",
                    f[col("sample")].parse::<u32>().unwrap()
                );
                let s = parse_fixture(&rel);
                let num = |name: &str| -> u64 {
                    let t = f[col(name)];
                    if t.is_empty() {
                        0
                    } else {
                        t.parse().unwrap()
                    }
                };
                assert_eq!(s.num_pgs, num("num_pgs"), "{rel}");
                assert_eq!(s.degraded_objects, num("degraded_objects"), "{rel}");
                assert_eq!(s.misplaced_objects, num("misplaced_objects"), "{rel}");
                assert_eq!(
                    s.recovering_objects_per_sec,
                    num("recovering_objects_per_sec") as f64,
                    "{rel}"
                );
                if header.contains(&"degraded_total") {
                    assert_eq!(s.degraded_total, num("degraded_total"), "{rel}");
                }
                let clean = s
                    .pgs_by_state
                    .iter()
                    .find(|(st, _)| st == "active+clean")
                    .map_or(0, |(_, c)| *c);
                assert_eq!(clean, num("active_clean"), "{rel}");
                let states: Vec<String> = s
                    .pgs_by_state
                    .iter()
                    .map(|(st, c)| format!("{st}={c}"))
                    .collect();
                assert_eq!(states.join(";"), f[col("pg_states")], "{rel}");
                n += 1;
            }
            assert!(n >= 10, "{state}: {n} samples");
        }
    }

    #[test]
    fn peering_and_activating_words() {
        // recovery sample 1: "peering=24;active+clean=9" (PGs neither active nor clean).
        let s = parse_fixture("recovery/samples/001/ceph_status.json");
        let w = s.pg_state_word_counts();
        assert_eq!(w["peering"], 24);
        assert_eq!(w["active"], 9);
        // rebalance sample 1 has "remapped+peering", "activating+degraded".
        let s = parse_fixture("rebalance/samples/001/ceph_status.json");
        let w = s.pg_state_word_counts();
        assert_eq!(w["peering"], 3);
        assert_eq!(w["activating"], 2);
        assert_eq!(w["remapped"], 6);
    }

    #[test]
    fn hostile_inputs_are_errors() {
        for (what, input) in hostile_inputs() {
            assert!(parse(&input).is_err(), "{what} parsed");
        }
        assert_eq!(parse(b""), Err(ParseError::Empty));
        assert_eq!(parse(b"\n \n"), Err(ParseError::Empty));
        assert_eq!(
            shape_path(parse(b"\nnull\n")),
            (
                "(top level)".to_string(),
                "expected an object, found null".to_string()
            )
        );
        assert!(matches!(parse(b"[]"), Err(ParseError::Shape { .. })));
        match parse(b"Error EINVAL: invalid command\n") {
            Err(ParseError::Json {
                line: 1,
                column: 1,
                message,
            }) => {
                assert!(
                    message.contains("Error EINVAL: invalid command"),
                    "{message}"
                )
            }
            other => panic!("{other:?}"),
        }
        match parse(b"\n<html><body>502</body></html>") {
            Err(ParseError::Json {
                line: 2, message, ..
            }) => assert!(message.contains("<html>"), "{message}"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn truncated_fixtures_are_json_errors() {
        for state in STATES {
            let full = fixture(&format!("{state}/ceph_status.json"));
            match parse(half(&full)) {
                Err(ParseError::Json { line, message, .. }) => {
                    // Line 2: the output starts with a blank line.
                    assert_eq!(line, 2, "{state}");
                    assert!(message.contains("EOF"), "{state}: {message}");
                }
                other => panic!("{state}: {other:?}"),
            }
        }
    }

    #[test]
    fn wrong_types_are_errors_with_paths() {
        let rel = "undersized/ceph_status.json";
        let bad = edited(rel, |v| {
            v["pgmap"]["pgs_by_state"][2]["count"] = Value::from("1")
        });
        assert_eq!(
            parse(&bad).unwrap_err().to_string(),
            "pgmap.pgs_by_state[2].count: expected a non-negative integer, found string"
        );
        let bad = edited(rel, |v| {
            v["pgmap"]["pgs_by_state"][0]["count"] = Value::from(-1)
        });
        assert_eq!(
            shape_path(parse(&bad)),
            (
                "pgmap.pgs_by_state[0].count".into(),
                "expected a non-negative integer, found a negative integer".into()
            )
        );
        let bad = edited(rel, |v| {
            v["pgmap"]["pgs_by_state"][1]["count"] = Value::from(1.5)
        });
        assert_eq!(shape_path(parse(&bad)).0, "pgmap.pgs_by_state[1].count");
        let bad = edited(rel, |v| {
            v["pgmap"]["degraded_objects"] = Value::from("7880")
        });
        assert_eq!(shape_path(parse(&bad)).0, "pgmap.degraded_objects");
        let bad = edited(rel, |v| {
            v["pgmap"]["write_op_per_sec"] = Value::from("fast")
        });
        assert_eq!(shape_path(parse(&bad)).0, "pgmap.write_op_per_sec");
        let bad = edited(rel, |v| v["pgmap"]["pgs_by_state"] = serde_json::json!({}));
        assert_eq!(
            shape_path(parse(&bad)),
            (
                "pgmap.pgs_by_state".into(),
                "expected an array, found an object".into()
            )
        );
        let bad = edited(rel, |v| {
            v["pgmap"]["pgs_by_state"][0] = serde_json::json!({"count": 3})
        });
        assert_eq!(
            shape_path(parse(&bad)).0,
            "pgmap.pgs_by_state[0].state_name"
        );
        let bad = edited(rel, |v| {
            v["pgmap"].as_object_mut().unwrap().remove("num_pgs");
        });
        assert_eq!(
            shape_path(parse(&bad)),
            (
                "pgmap.num_pgs".into(),
                "expected a non-negative integer, found nothing (the key is absent)".into()
            )
        );
        let bad = edited(rel, |v| {
            v.as_object_mut().unwrap().remove("pgmap");
        });
        assert_eq!(shape_path(parse(&bad)).0, "pgmap");
        let bad = edited(rel, |v| v["pgmap"] = Value::Null);
        assert_eq!(shape_path(parse(&bad)).0, "pgmap");
        let bad = edited(rel, |v| v["osdmap"]["num_up_osds"] = Value::from(true));
        assert_eq!(shape_path(parse(&bad)).0, "osdmap.num_up_osds");
        let bad = edited(rel, |v| v["health"] = Value::from("HEALTH_OK"));
        assert_eq!(shape_path(parse(&bad)).0, "health");
        let bad = edited(rel, |v| v["fsid"] = Value::from(7));
        assert_eq!(shape_path(parse(&bad)).0, "fsid");
    }

    #[test]
    fn null_counters_read_as_absent() {
        // A non-finite rate printed bare (`nan`) is read as null, and null as "not printed".
        let mut text = fixture_str("recovery/ceph_status.json");
        text = text.replace(
            "\"recovering_objects_per_sec\":114",
            "\"recovering_objects_per_sec\":nan",
        );
        assert!(text.contains(":nan"));
        let s = parse(text.as_bytes()).unwrap();
        assert_eq!(s.recovering_objects_per_sec, 0.0);
        assert_eq!(s.degraded_objects, 9305);
    }

    /// Luminous (12) and Nautilus (14) print `"osdmap":{"osdmap":{"epoch":..,"num_osds":..,
    /// "num_up_osds":..,"num_in_osds":..,"full":false,"nearfull":false,"num_remapped_pgs":0}}`
    /// and Luminous still prints the deprecated `health.overall_status`.
    #[test]
    fn luminous_nested_osdmap() {
        let out = edited("recovery/ceph_status.json", |v| {
            let inner = v["osdmap"].take();
            let mut inner = inner;
            inner["full"] = Value::Bool(false);
            inner["nearfull"] = Value::Bool(false);
            v["osdmap"] = serde_json::json!({ "osdmap": inner });
            v["health"]["overall_status"] = Value::from("HEALTH_WARN");
            v["health"]["checks"] = serde_json::json!({});
        });
        let s = parse(&out).unwrap();
        assert_eq!(
            (s.num_osds, s.num_up_osds, s.num_in_osds),
            (Some(4), Some(3), Some(3))
        );
        assert_eq!(s.health.as_deref(), Some("HEALTH_WARN"));
        // The same but for the health checks this edit empties.
        let expected = ClusterStatus {
            health_checks: BTreeMap::new(),
            ..parse_fixture("recovery/ceph_status.json")
        };
        assert_eq!(s, expected);

        let bad = edited("recovery/ceph_status.json", |v| {
            let inner = v["osdmap"].take();
            v["osdmap"] = serde_json::json!({ "osdmap": inner });
            v["osdmap"]["osdmap"]["num_osds"] = Value::from("4");
        });
        assert_eq!(shape_path(parse(&bad)).0, "osdmap.osdmap.num_osds");
    }

    /// Jewel (10) / Kraken (11): `health.overall_status`, no `health.status`.
    #[test]
    fn pre_luminous_overall_status() {
        let out = edited("undersized/ceph_status.json", |v| {
            v["health"] = serde_json::json!({"health": {"health_services": []}, "summary": [], "overall_status": "HEALTH_WARN", "detail": []});
        });
        assert_eq!(parse(&out).unwrap().health.as_deref(), Some("HEALTH_WARN"));
        let out = edited("undersized/ceph_status.json", |v| {
            v.as_object_mut().unwrap().remove("health");
        });
        assert_eq!(parse(&out).unwrap().health, None);
    }

    /// `ceph report`'s pgmap spells the entries `{state, num}`.
    #[test]
    fn report_style_state_entries() {
        let out = edited("undersized/ceph_status.json", |v| {
            v["pgmap"]["pgs_by_state"] = serde_json::json!([
                {"state": "active+undersized+degraded", "num": 18},
                {"state": "active+clean", "num": 14},
                {"state": "active+undersized", "num": 1}
            ]);
        });
        assert_eq!(
            parse(&out).unwrap(),
            parse_fixture("undersized/ceph_status.json")
        );
    }

    /// Without osdmap, and without `pgs_by_state` (a cluster with no pools yet), the rest parses.
    #[test]
    fn optional_sections() {
        let out = edited("healthy-idle/ceph_status.json", |v| {
            let o = v.as_object_mut().unwrap();
            o.remove("osdmap");
            o.remove("fsid");
            let p = o["pgmap"].as_object_mut().unwrap();
            p.remove("pgs_by_state");
            p.insert("num_pgs".into(), Value::from(0));
        });
        let s = parse(&out).unwrap();
        assert_eq!(
            (s.num_osds, s.num_up_osds, s.num_in_osds),
            (None, None, None)
        );
        assert_eq!(s.fsid, None);
        assert!(s.pgs_by_state.is_empty());
        assert!(s.pg_state_word_counts().is_empty());
    }

    /// Quincy+ add `muted` to health checks and new top-level sections; unknown fields are ignored.
    #[test]
    fn unknown_fields_are_ignored() {
        let out = edited("recovery/ceph_status.json", |v| {
            v["health"]["checks"]["PG_DEGRADED"]["muted"] = Value::Bool(false);
            v["pgmap"]["future_counter"] = serde_json::json!({"x": [1, 2]});
            v["something_new"] = Value::from("x");
        });
        assert_eq!(
            parse(&out).unwrap(),
            parse_fixture("recovery/ceph_status.json")
        );
    }

    #[test]
    fn floating_point_rates_are_accepted() {
        let out = edited("recovery/ceph_status.json", |v| {
            v["pgmap"]["recovering_objects_per_sec"] = Value::from(114.5);
        });
        assert_eq!(parse(&out).unwrap().recovering_objects_per_sec, 114.5);
    }

    /// Recorded on the lab with the mgr killed: the status still lists the PG states the mgr
    /// last reported (25 undersized; all were clean again), and says no mgr is available.
    #[test]
    fn a_status_without_an_mgr_says_so() {
        let s = parse_fixture("redundancy/no-mgr.ceph_status.out");
        assert_eq!(s.mgr_available, Some(false));
        assert_eq!(s.recovery_counts().undersized_pgs, 25);
        let s = parse_fixture("redundancy/osd-restarted-recovering.ceph_status.out");
        assert_eq!(s.mgr_available, Some(true));
    }

    #[test]
    fn word_counts_are_per_pg_and_saturate() {
        let s = ClusterStatus {
            fsid: None,
            health: None,
            pgs_by_state: vec![
                ("active+clean".into(), 3),
                ("active+clean+clean".into(), 1),
                ("active+undersized+degraded".into(), u64::MAX),
                ("".into(), 5),
            ],
            num_pgs: 0,
            num_objects: 0,
            degraded_objects: 0,
            degraded_total: 0,
            misplaced_objects: 0,
            misplaced_total: 0,
            unfound_objects: 0,
            recovering_objects_per_sec: 0.0,
            recovering_bytes_per_sec: 0.0,
            read_op_per_sec: 0.0,
            write_op_per_sec: 0.0,
            num_osds: None,
            num_up_osds: None,
            num_in_osds: None,
            osd_up_since: None,
            health_checks: BTreeMap::new(),
            mgr_available: None,
        };
        let w = s.pg_state_word_counts();
        assert_eq!(w["clean"], 4);
        assert_eq!(w["active"], u64::MAX);
        assert_eq!(w["degraded"], u64::MAX);
        assert!(!w.contains_key(""));
    }

    /// Live lab (16.2.15, `ceph --format json status`): healthy, then osd.3 stopped with noout.
    #[test]
    fn lab_status() {
        let s = parse_fixture("lab/healthy.status.out");
        assert_eq!(s.health.as_deref(), Some("HEALTH_OK"));
        assert_eq!(s.pgs_by_state, vec![("active+clean".to_string(), 33)]);
        assert_eq!(
            (s.num_osds, s.num_up_osds, s.num_in_osds),
            (Some(4), Some(4), Some(4))
        );
        assert_eq!((s.degraded_objects, s.misplaced_objects), (0, 0));
        let s = parse_fixture("lab/osd3-down.status.out");
        assert_eq!(s.health.as_deref(), Some("HEALTH_WARN"));
        assert_eq!(
            s.pgs_by_state,
            vec![
                ("active+undersized+degraded".to_string(), 25),
                ("active+clean".to_string(), 8)
            ]
        );
        assert_eq!(
            (s.num_osds, s.num_up_osds, s.num_in_osds),
            (Some(4), Some(3), Some(4))
        );
        assert_eq!((s.degraded_objects, s.degraded_total), (10454, 40119));
        assert_eq!(s.pg_state_word_counts()["undersized"], 25);
        assert!(fixture_str("lab/osd3-down.status.err").is_empty());
    }
}
