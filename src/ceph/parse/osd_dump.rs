//! `ceph osd dump --format json`: the cluster-wide OSD map flags (`nobackfill`, `norecover`,
//! `noout`, ...), and with [`down_in`] which OSDs are down but still in. Only those fields are
//! read; the rest of the map (every pool and blocklist entry: large on a big cluster) is checked
//! for syntax and skipped.
//!
//! `flags` is one comma-separated string (`"nobackfill,norecover,sortbitwise,..."`, all
//! releases since Luminous); Nautilus+ also print `flags_set`, the same as an array. The string
//! is read when present, the array otherwise (see `tests/fixtures/lab/*.osd-dump.out`).

use std::collections::BTreeSet;

use super::json::{self, Keep, Path};
use super::ParseError;

static KEEP_FLAGS: Keep = Keep {
    fields: Some(&[("flags", &Keep::ALL), ("flags_set", &Keep::ALL)]),
    each: None,
};

/// The OSD map flags set now, e.g. {"nobackfill", "sortbitwise"}.
pub fn flags(out: &[u8]) -> Result<BTreeSet<String>, ParseError> {
    let v = json::parse_kept(out, &KEEP_FLAGS)?;
    flags_of(&v)
}

static KEEP_OSD: Keep = Keep {
    fields: Some(&[
        ("osd", &Keep::ALL),
        ("up", &Keep::ALL),
        ("in", &Keep::ALL),
        ("up_from", &Keep::ALL),
        ("down_at", &Keep::ALL),
    ]),
    each: None,
};
static KEEP_OSDS: Keep = Keep {
    fields: None,
    each: Some(&KEEP_OSD),
};
static KEEP_DOWN_IN: Keep = Keep {
    fields: Some(&[
        ("flags", &Keep::ALL),
        ("flags_set", &Keep::ALL),
        ("osds", &KEEP_OSDS),
    ]),
    each: None,
};

/// The OSDs that are down but still in: their PGs are degraded and nothing recovers them
/// until each is back or marked out (by Ceph after `mon_osd_down_out_interval`, unless
/// `noout` holds it).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct DownIn {
    /// Their ids, ascending.
    pub osds: Vec<u32>,
    /// Among them, the one whose going down is the OSD map's latest up/down change (no OSD came
    /// up or went down after it): `ceph status`'s `osd_up_since` is then when it went down.
    pub latest_change: Option<u32>,
    /// The cluster-wide `noout` flag is set: Ceph marks no OSD out.
    pub noout: bool,
}

/// Which OSDs are down but in (`osds[].up` 0, `in` 1), from the same `osd dump`.
pub fn down_in(out: &[u8]) -> Result<DownIn, ParseError> {
    let v = json::parse_kept(out, &KEEP_DOWN_IN)?;
    let noout = flags_of(&v)?.contains("noout");
    let root = Path::Root;
    let top = json::as_object(&v, &root)?;
    let list_at = root.key("osds");
    let list = match top.get("osds") {
        Some(l) => json::as_array(l, &list_at)?,
        None => return Err(list_at.missing("an array")),
    };
    let mut down = Vec::new();
    let mut newest_change = 0u64;
    let mut newest_down: Option<(u64, u32)> = None;
    for (i, entry) in list.iter().enumerate() {
        let at = list_at.index(i);
        let o = json::as_object(entry, &at)?;
        let id = json::req_u32(o, "osd", &at)?;
        let up = json::req_u64(o, "up", &at)? != 0;
        let is_in = json::req_u64(o, "in", &at)? != 0;
        let up_from = json::opt_u64(o, "up_from", &at)?;
        let down_at = json::opt_u64(o, "down_at", &at)?;
        newest_change = newest_change.max(up_from).max(down_at);
        if !up && is_in {
            down.push(id);
            if newest_down.is_none_or(|(e, _)| down_at > e) {
                newest_down = Some((down_at, id));
            }
        }
    }
    down.sort_unstable();
    Ok(DownIn {
        osds: down,
        latest_change: newest_down
            .filter(|(e, _)| *e > 0 && *e >= newest_change)
            .map(|(_, id)| id),
        noout,
    })
}

fn flags_of(v: &serde_json::Value) -> Result<BTreeSet<String>, ParseError> {
    let root = Path::Root;
    let top = json::as_object(v, &root)?;
    if let Some(s) = json::maybe_str(top, "flags", &root)? {
        return Ok(s
            .split(',')
            .map(str::trim)
            .filter(|f| !f.is_empty())
            .map(str::to_string)
            .collect());
    }
    let set_at = root.key("flags_set");
    match top.get("flags_set") {
        Some(list) => json::as_array(list, &set_at)?
            .iter()
            .enumerate()
            .map(|(i, f)| json::as_str(f, &set_at.index(i)).map(str::to_string))
            .collect(),
        None => Err(root
            .key("flags")
            .missing("a comma-separated string (or flags_set, an array)")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ceph::parse::test_support::{fixture, hostile_inputs};

    fn set(words: &[&str]) -> BTreeSet<String> {
        words.iter().map(|w| w.to_string()).collect()
    }

    #[test]
    fn the_lab_flags_with_and_without_the_pause() {
        let healthy = flags(&fixture("lab/healthy.osd-dump.out")).unwrap();
        assert_eq!(
            healthy,
            set(&[
                "sortbitwise",
                "recovery_deletes",
                "purged_snapdirs",
                "pglog_hardlimit"
            ])
        );
        let paused = flags(&fixture("lab/paused.osd-dump.out")).unwrap();
        assert!(paused.contains("nobackfill") && paused.contains("norecover"));
        assert_eq!(paused.len(), healthy.len() + 2);
    }

    #[test]
    fn the_down_osd_that_is_still_in() {
        // osd.2 stopped with noout set (undersized/events.txt); osd.3 had been down before and
        // came back: osd.2's going down (epoch 57) is the latest up/down change.
        let d = down_in(&fixture("undersized/ceph_osd_dump.json")).unwrap();
        assert_eq!(
            d,
            DownIn {
                osds: vec![2],
                latest_change: Some(2),
                noout: true
            }
        );
        // osd.3 stopped and marked out: down, but not in.
        let r = down_in(&fixture("recovery/ceph_osd_dump.json")).unwrap();
        assert_eq!(r, DownIn::default());
        assert_eq!(
            down_in(&fixture("lab/healthy.osd-dump.out")).unwrap(),
            DownIn::default()
        );
    }

    #[test]
    fn a_down_osd_that_is_not_the_latest_change_has_no_known_time() {
        let out = br#"{"flags":"sortbitwise","osds":[
            {"osd":0,"up":0,"in":1,"up_from":8,"down_at":20},
            {"osd":1,"up":1,"in":1,"up_from":25,"down_at":12}]}"#;
        let d = down_in(out).unwrap();
        assert_eq!((d.osds, d.latest_change, d.noout), (vec![0], None, false));
        let e = down_in(br#"{"flags":"","osds":[{"osd":0,"up":"no","in":1}]}"#)
            .unwrap_err()
            .to_string();
        assert!(e.contains("osds[0].up"), "{e}");
    }

    #[test]
    fn the_array_is_read_when_the_string_is_absent() {
        assert_eq!(
            flags(br#"{"epoch":3,"flags_set":["noout","sortbitwise"]}"#).unwrap(),
            set(&["noout", "sortbitwise"])
        );
        // No flag at all is an empty string, not an error.
        assert!(flags(br#"{"flags":""}"#).unwrap().is_empty());
    }

    #[test]
    fn hostile_inputs_are_errors() {
        for (what, input) in hostile_inputs() {
            assert!(flags(&input).is_err(), "{what}");
        }
        let e = flags(br#"{"epoch":3}"#).unwrap_err().to_string();
        assert!(e.contains("flags"), "{e}");
        let e = flags(br#"{"flags":3}"#).unwrap_err().to_string();
        assert!(e.contains("flags"), "{e}");
        let e = flags(br#"{"flags_set":[1]}"#).unwrap_err().to_string();
        assert!(e.contains("flags_set[0]"), "{e}");
    }
}
