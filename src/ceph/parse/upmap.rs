//! What the backfill lever (`crate::backfill`) reads of the OSD map (`ceph osd dump -f json`):
//! the upmap entries (`pg_upmap_items`, `pg_upmap`), each pool's kind (replicated or erasure
//! coded: for EC the position of an OSD in the set is its shard), each OSD's up/in/reweight,
//! `require_min_compat_client`, the fsid and the epoch; and `ceph balancer status -f json`.
//!
//! Shapes (16.2.15, `tests/fixtures/upmap/`): `"pg_upmap_items":[{"pgid":"2.a","mappings":
//! [{"from":2,"to":3}]}]`, `"pg_upmap":[{"pgid":..,"osds":[..]}]`, pools `"type"` 1 =
//! replicated, 3 = erasure; OSDs `"weight"` is the reweight (0..1, 0 = out).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::json::{self, Keep, Path};
use super::ParseError;

/// A placement group id: pool id and placement seed (`2.1f`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PgId {
    pub pool: u64,
    pub seed: u32,
}

impl fmt::Display for PgId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{:x}", self.pool, self.seed)
    }
}

/// Why a string is not a PG id.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0:?} is not a PG id (pool id, '.', hex seed, e.g. 2.1f)")]
pub struct BadPgId(pub String);

impl FromStr for PgId {
    type Err = BadPgId;

    /// `2.1f`; an EC shard suffix (`2.1fs0`) is not a PG id here.
    fn from_str(s: &str) -> Result<Self, BadPgId> {
        let bad = || BadPgId(s.to_string());
        let (pool, seed) = s.split_once('.').ok_or_else(bad)?;
        let digits = |t: &str, hex: bool| {
            !t.is_empty()
                && t.bytes().all(|b| {
                    if hex {
                        b.is_ascii_hexdigit()
                    } else {
                        b.is_ascii_digit()
                    }
                })
        };
        if !digits(pool, false) || !digits(seed, true) {
            return Err(bad());
        }
        Ok(PgId {
            pool: pool.parse().map_err(|_| bad())?,
            seed: u32::from_str_radix(seed, 16).map_err(|_| bad())?,
        })
    }
}

impl Serialize for PgId {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for PgId {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

/// One `pg_upmap_items` pair: where CRUSH puts `from`, Ceph puts `to`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct UpmapItem {
    pub from: u32,
    pub to: u32,
}

impl fmt::Display for UpmapItem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}->{}", self.from, self.to)
    }
}

/// `[2->3, 1->0]`
pub fn items_text(items: &[UpmapItem]) -> String {
    let parts: Vec<String> = items.iter().map(ToString::to_string).collect();
    format!("[{}]", parts.join(", "))
}

/// How a pool keeps its copies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum PoolKind {
    /// Type 1: every OSD of the set holds the whole object; order only picks the primary.
    Replicated,
    /// Type 3: the OSD at position i holds shard i; positions matter.
    Erasure,
    /// Any other type number (none exists in 16.2; kept so that it is refused, not guessed).
    Other(u64),
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PoolInfo {
    pub name: String,
    pub kind: PoolKind,
    pub size: u64,
    pub min_size: u64,
    /// Its PGs are seeds 0..pg_num: a PG at or past it was merged away by a pg_num reduction
    /// (`OSDMap::pg_exists`, which the monitors check before an upmap command).
    pub pg_num: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct OsdInfo {
    pub up: bool,
    pub is_in: bool,
    /// The reweight, 0..1 (0 = out): Ceph ignores an upmap item whose target has 0.
    pub weight: f64,
}

/// What the backfill lever needs of the OSD map.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct UpmapView {
    pub epoch: u64,
    pub fsid: String,
    /// `luminous` on a Luminous+ cluster created so; `jewel` or older forbids upmap.
    pub require_min_compat_client: String,
    pub pools: BTreeMap<u64, PoolInfo>,
    pub osds: BTreeMap<u32, OsdInfo>,
    pub pg_upmap_items: BTreeMap<PgId, Vec<UpmapItem>>,
    /// PGs with a whole-set `pg_upmap` entry (the older form; nothing of ours).
    pub pg_upmap: BTreeSet<PgId>,
}

static KEEP_UPMAP: Keep = Keep {
    fields: Some(&[
        ("epoch", &Keep::ALL),
        ("fsid", &Keep::ALL),
        ("require_min_compat_client", &Keep::ALL),
        ("pools", &KEEP_POOLS),
        ("osds", &KEEP_OSDS),
        ("pg_upmap_items", &Keep::ALL),
        ("pg_upmap", &Keep::ALL),
    ]),
    each: None,
};
static KEEP_POOLS: Keep = Keep {
    fields: None,
    each: Some(&Keep {
        fields: Some(&[
            ("pool", &Keep::ALL),
            ("pool_name", &Keep::ALL),
            ("type", &Keep::ALL),
            ("size", &Keep::ALL),
            ("min_size", &Keep::ALL),
            ("pg_num", &Keep::ALL),
        ]),
        each: None,
    }),
};
static KEEP_OSDS: Keep = Keep {
    fields: None,
    each: Some(&Keep {
        fields: Some(&[
            ("osd", &Keep::ALL),
            ("up", &Keep::ALL),
            ("in", &Keep::ALL),
            ("weight", &Keep::ALL),
        ]),
        each: None,
    }),
};

/// Parses `ceph osd dump -f json` into an [`UpmapView`].
pub fn view(out: &[u8]) -> Result<UpmapView, ParseError> {
    let v = json::parse_kept(out, &KEEP_UPMAP)?;
    let root = Path::Root;
    let top = json::as_object(&v, &root)?;
    let mut view = UpmapView {
        epoch: json::req_u64(top, "epoch", &root)?,
        fsid: json::req_str(top, "fsid", &root)?.to_string(),
        // Luminous+ always print it; absent = a pre-Luminous map: upmap impossible.
        require_min_compat_client: json::maybe_str(top, "require_min_compat_client", &root)?
            .unwrap_or("")
            .to_string(),
        ..UpmapView::default()
    };
    for (i, p) in list(top, "pools", &root)?.iter().enumerate() {
        let at = root.key("pools");
        let at = at.index(i);
        let o = json::as_object(p, &at)?;
        let kind = match json::req_u64(o, "type", &at)? {
            1 => PoolKind::Replicated,
            3 => PoolKind::Erasure,
            n => PoolKind::Other(n),
        };
        view.pools.insert(
            json::req_u64(o, "pool", &at)?,
            PoolInfo {
                name: json::maybe_str(o, "pool_name", &at)?
                    .unwrap_or("")
                    .to_string(),
                kind,
                size: json::req_u64(o, "size", &at)?,
                min_size: json::req_u64(o, "min_size", &at)?,
                pg_num: json::req_u64(o, "pg_num", &at)?,
            },
        );
    }
    for (i, d) in list(top, "osds", &root)?.iter().enumerate() {
        let at = root.key("osds");
        let at = at.index(i);
        let o = json::as_object(d, &at)?;
        let weight = match json::field(o, "weight") {
            Some(w) => json::as_f64(w, &at.key("weight"))?,
            None => return Err(at.key("weight").missing("a number")),
        };
        view.osds.insert(
            json::req_u32(o, "osd", &at)?,
            OsdInfo {
                up: json::req_u64(o, "up", &at)? != 0,
                is_in: json::req_u64(o, "in", &at)? != 0,
                weight,
            },
        );
    }
    for (i, e) in list(top, "pg_upmap_items", &root)?.iter().enumerate() {
        let at = root.key("pg_upmap_items");
        let at = at.index(i);
        let o = json::as_object(e, &at)?;
        let pgid = pgid_at(o, &at)?;
        let m_at = at.key("mappings");
        let mut items = Vec::new();
        for (j, m) in list(o, "mappings", &at)?.iter().enumerate() {
            let at = m_at.index(j);
            let m = json::as_object(m, &at)?;
            items.push(UpmapItem {
                from: json::req_u32(m, "from", &at)?,
                to: json::req_u32(m, "to", &at)?,
            });
        }
        if view.pg_upmap_items.insert(pgid, items).is_some() {
            return Err(at.error(format!("expected one entry per PG, found {pgid} twice")));
        }
    }
    for (i, e) in list(top, "pg_upmap", &root)?.iter().enumerate() {
        let at = root.key("pg_upmap");
        let at = at.index(i);
        let o = json::as_object(e, &at)?;
        view.pg_upmap.insert(pgid_at(o, &at)?);
    }
    Ok(view)
}

/// An array field; absent or `null` is empty (older releases omit empty upmap lists).
fn list<'v>(
    obj: &'v serde_json::Map<String, Value>,
    key: &str,
    at: &Path<'_>,
) -> Result<&'v [Value], ParseError> {
    match json::field(obj, key) {
        Some(v) => json::as_array(v, &at.key(key)),
        None => Ok(&[]),
    }
}

fn pgid_at(obj: &serde_json::Map<String, Value>, at: &Path<'_>) -> Result<PgId, ParseError> {
    let s = json::req_str(obj, "pgid", at)?;
    s.parse()
        .map_err(|e: BadPgId| at.key("pgid").error(e.to_string()))
}

/// `ceph balancer status -f json`: whether the mgr balancer runs, and in which mode.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BalancerStatus {
    pub active: bool,
    /// `upmap`, `crush-compat` or `none`.
    pub mode: String,
}

/// `on, mode upmap`: how the decision log and the status page name a balancer's state.
impl fmt::Display for BalancerStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let on = if self.active { "on" } else { "off" };
        write!(f, "{on}, mode {}", self.mode)
    }
}

pub fn balancer_status(out: &[u8]) -> Result<BalancerStatus, ParseError> {
    let v = json::parse_value(out)?;
    let root = Path::Root;
    let top = json::as_object(&v, &root)?;
    let active = match top.get("active") {
        Some(Value::Bool(b)) => *b,
        Some(other) => return Err(root.key("active").mismatch("a boolean", other)),
        None => return Err(root.key("active").missing("a boolean")),
    };
    Ok(BalancerStatus {
        active,
        mode: json::req_str(top, "mode", &root)?.to_string(),
    })
}

/// Ceph's release names in order; `require_min_compat_client` is one of them.
pub const RELEASES: &[&str] = &[
    "argonaut",
    "bobtail",
    "cuttlefish",
    "dumpling",
    "emperor",
    "firefly",
    "giant",
    "hammer",
    "infernalis",
    "jewel",
    "kraken",
    "luminous",
    "mimic",
    "nautilus",
    "octopus",
    "pacific",
    "quincy",
    "reef",
    "squid",
    "tentacle",
];

/// Where `name` is in [`RELEASES`] (`None`: a name this program does not know).
pub fn release_rank(name: &str) -> Option<usize> {
    RELEASES.iter().position(|r| *r == name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ceph::parse::test_support::{fixture, hostile_inputs};

    fn pg(s: &str) -> PgId {
        s.parse().unwrap()
    }

    fn items(pairs: &[(u32, u32)]) -> Vec<UpmapItem> {
        pairs
            .iter()
            .map(|&(from, to)| UpmapItem { from, to })
            .collect()
    }

    #[test]
    fn pg_ids_read_and_print_as_ceph_does() {
        assert_eq!(pg("2.1f"), PgId { pool: 2, seed: 31 });
        assert_eq!(pg("2.1f").to_string(), "2.1f");
        assert_eq!(pg("10.0").to_string(), "10.0");
        assert_eq!(pg("2.A").to_string(), "2.a");
        for bad in ["", "2", "2.", ".1", "x.1", "2.g", "2.1fs0", "-1.1", "2.1.1"] {
            assert!(bad.parse::<PgId>().is_err(), "{bad}");
        }
        assert!("2.123456789".parse::<PgId>().is_err());
        assert!(pg("1.1") < pg("1.a") && pg("1.ff") < pg("2.0"));
        let j = serde_json::to_string(&pg("3.1e")).unwrap();
        assert_eq!(j, "\"3.1e\"");
        assert_eq!(serde_json::from_str::<PgId>(&j).unwrap(), pg("3.1e"));
        assert!(serde_json::from_str::<PgId>("\"3\"").is_err());
    }

    #[test]
    fn the_healthy_lab_map() {
        let v = view(&fixture("upmap/00-healthy.ceph_osd_dump.json")).unwrap();
        assert_eq!(v.fsid, "ae347111-d76e-406c-9066-df6128c01492");
        assert_eq!(v.require_min_compat_client, "luminous");
        assert!(v.pg_upmap_items.is_empty() && v.pg_upmap.is_empty());
        assert_eq!(v.pools[&2].kind, PoolKind::Replicated);
        assert_eq!(v.pools[&2].name, "rbd-vms");
        assert_eq!(v.pools[&3].kind, PoolKind::Erasure);
        assert_eq!((v.pools[&3].size, v.pools[&3].min_size), (3, 2));
        assert_eq!((v.pools[&2].pg_num, v.pools[&3].pg_num), (32, 8));
        assert_eq!(v.osds.len(), 4);
        assert!(v.osds.values().all(|o| o.up && o.is_in && o.weight == 1.0));
    }

    #[test]
    fn upmap_items_ours_and_the_balancers() {
        // 2.a and 3.2 set by hand (30-hold) beside the balancer's 2.b and 2.1e (it was on, in
        // upmap mode, during the rebalance); later 2.a cleared, and the balancer had moved on
        // from 2.b to 2.d (60-compat).
        let held = view(&fixture("upmap/30-hold.ceph_osd_dump.json")).unwrap();
        assert_eq!(
            held.pg_upmap_items,
            BTreeMap::from([
                (pg("2.a"), items(&[(2, 3)])),
                (pg("2.b"), items(&[(3, 0)])),
                (pg("2.1e"), items(&[(3, 2)])),
                (pg("3.2"), items(&[(1, 3)]))
            ])
        );
        // osd.3 reweighted to 0.2 (the rebalance): in, weight 0.2.
        assert!((held.osds[&3].weight - 0.2).abs() < 1e-3 && held.osds[&3].is_in);
        let later = view(&fixture("upmap/60-compat.ceph_osd_dump.json")).unwrap();
        assert_eq!(
            later.pg_upmap_items,
            BTreeMap::from([
                (pg("2.d"), items(&[(3, 0)])),
                (pg("2.1e"), items(&[(3, 2)])),
                (pg("3.2"), items(&[(1, 3)]))
            ])
        );
        assert!(later.epoch > held.epoch);
        let jewel = view(&fixture("upmap/64-jewel.ceph_osd_dump.json")).unwrap();
        assert_eq!(jewel.require_min_compat_client, "jewel");
        assert!(jewel.pg_upmap_items.is_empty());
    }

    #[test]
    fn shapes_that_are_refused() {
        for (what, input) in hostile_inputs() {
            assert!(view(&input).is_err(), "{what}");
        }
        let base = r#""epoch":1,"fsid":"f","pools":[],"osds":[]"#;
        let ok = view(format!("{{{base}}}").as_bytes()).unwrap();
        assert_eq!(ok.require_min_compat_client, "");
        let twice = format!(
            r#"{{{base},"pg_upmap_items":[{{"pgid":"1.0","mappings":[]}},{{"pgid":"1.0","mappings":[]}}]}}"#
        );
        assert!(view(twice.as_bytes())
            .unwrap_err()
            .to_string()
            .contains("1.0 twice"));
        let bad_pg = format!(r#"{{{base},"pg_upmap":[{{"pgid":"x","osds":[]}}]}}"#);
        assert!(view(bad_pg.as_bytes())
            .unwrap_err()
            .to_string()
            .starts_with("pg_upmap[0].pgid"));
        let bad_to = format!(
            r#"{{{base},"pg_upmap_items":[{{"pgid":"1.0","mappings":[{{"from":1,"to":-1}}]}}]}}"#
        );
        assert!(view(bad_to.as_bytes())
            .unwrap_err()
            .to_string()
            .contains("mappings[0].to"));
        let pool = r#""epoch":1,"fsid":"f","osds":[],"pools":[{"pool":1,"type":2,"size":3,"min_size":2,"pg_num":8}]"#;
        let v = view(format!("{{{pool}}}").as_bytes()).unwrap();
        assert_eq!(v.pools[&1].kind, PoolKind::Other(2));
        // pg_num is what tells a PG merged away (every release prints it).
        let no_pg_num = pool.replace(r#","pg_num":8"#, "");
        assert!(view(format!("{{{no_pg_num}}}").as_bytes()).is_err());
        let no_weight = r#"{"epoch":1,"fsid":"f","pools":[],"osds":[{"osd":0,"up":1,"in":1}]}"#;
        assert!(view(no_weight.as_bytes()).is_err());
    }

    #[test]
    fn balancer_status_on_off_and_modes() {
        let on = balancer_status(&fixture("upmap/00-healthy.ceph_balancer_status.json")).unwrap();
        assert_eq!(
            on,
            BalancerStatus {
                active: true,
                mode: "upmap".into()
            }
        );
        let off =
            balancer_status(&fixture("upmap/63-balancer-off.ceph_balancer_status.json")).unwrap();
        assert!(!off.active);
        let cc =
            balancer_status(&fixture("upmap/66-crush-compat.ceph_balancer_status.json")).unwrap();
        assert_eq!(cc.mode, "crush-compat");
        assert!(balancer_status(br#"{"active":"yes","mode":"upmap"}"#).is_err());
        assert!(balancer_status(br#"{"mode":"upmap"}"#).is_err());
        assert!(balancer_status(br#"{"active":true}"#).is_err());
    }

    #[test]
    fn releases_are_ordered() {
        assert!(release_rank("jewel") < release_rank("luminous"));
        assert!(release_rank("luminous") < release_rank("pacific"));
        assert_eq!(release_rank("luminous"), Some(11));
        assert_eq!(release_rank("zebra"), None);
    }
}
