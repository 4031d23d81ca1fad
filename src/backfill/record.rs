//! What the lever added, kept in a small JSON file written atomically *before* each change: the
//! upmap items of every PG it holds, the mgr balancer as it was before the lever paused it, the
//! cluster's fsid, and the PGs released lately that do not show backfill yet (so the next step
//! does not release more in their place, [`crate::backfill::plan`]). From it, [`undo`] plans
//! the removal of exactly ours: on release, on restore, on SIGTERM and at the next start after
//! a crash.
//!
//! Crash windows, all safe:
//! - written, then crashed before `pg-upmap-items`: the entry is in the record, not in the OSD
//!   map; the undo forgets it ([`Forget::Gone`]).
//! - `rm-pg-upmap-items` done, crashed before the record was written: the same.
//! - a PG held over someone else's items: the same with theirs in place of none; the undo
//!   forgets it when theirs are back ([`Forget::Restored`]).
//! - someone changed the PG's items since (an operator, the balancer turned back on): they are
//!   no longer ours alone; the undo leaves them and says so ([`Forget::Changed`]).
//!
//! Entries of what no longer exists end without a command, as the monitors' own
//! `OSDMap::check_pg_upmaps` drops the upmap entries of PGs and OSDs that are gone: a PG whose
//! pool was deleted ([`Forget::PoolGone`]) or that a pg_num reduction merged away
//! ([`Forget::MergedAway`]) is forgotten, and saved items that name an OSD no longer in the map
//! (purged) are not put back ([`Trim`]): the monitors refuse both with ENOENT, and asked again
//! each cycle, the oldest entry would stop every other release.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::ceph::parse::upmap::{BalancerStatus, PgId, UpmapItem, UpmapView};

/// Seconds `pg dump` may still show a released PG as it was while held (`active+clean`): PG
/// states reach the mgr with the OSDs' stats reports, seconds late. Seen on the lab: a PG
/// released, still `active+clean` in the next cycle's dump, taken as done, and another released
/// two seconds later, then one of them held back again ten seconds after.
pub const PG_STATS_LAG: f64 = 10.0;
/// The record's format version.
pub const VERSION: u32 = 1;

/// Everything the lever must be able to take back.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Record {
    pub version: u32,
    /// The cluster the entries are in (set with the first entry).
    #[serde(default)]
    pub fsid: Option<String>,
    /// The balancer as it was before the lever paused it; `None`: not paused by the lever.
    #[serde(default)]
    pub balancer: Option<BalancerStatus>,
    /// The PGs held, with the exact items added.
    #[serde(default)]
    pub held: BTreeMap<PgId, HeldPg>,
    /// The sequence number of the next hold (release order: oldest first).
    #[serde(default)]
    pub next_seq: u64,
    /// PGs released, with when (Unix seconds), until `pg dump` shows them backfill (or clean):
    /// a released PG peers for a few seconds first, and counting it as not backfilling would
    /// release one more each step and hold them all back once they show (seen on the lab).
    /// Absent from records written before it, and left out while empty.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub releasing: BTreeMap<PgId, f64>,
    /// When (Unix seconds) the last PG was released: the enforcer spaces its releases
    /// ([`crate::backfill::Plan::spaced`]). Kept apart from `releasing`, which forgets a PG once
    /// it shows backfill. Absent from records written before it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_release: Option<f64>,
    /// Since when (Unix seconds) N has had room for a release: a slot that opens is mostly a
    /// PG that just finished its backfill and re-peers, and the enforcer's release waits a
    /// window so that the two peerings do not stack ([`crate::backfill::Plan::spaced`]).
    /// `None` while there is no room. Absent from records written before it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub room_since: Option<f64>,
}

impl Default for Record {
    fn default() -> Self {
        Record {
            version: VERSION,
            fsid: None,
            balancer: None,
            held: BTreeMap::new(),
            next_seq: 0,
            releasing: BTreeMap::new(),
            last_release: None,
            room_since: None,
        }
    }
}

/// One held PG.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HeldPg {
    pub items: Vec<UpmapItem>,
    /// Order of holding: the lowest is released first.
    pub seq: u64,
    /// The OSD map epoch the hold was planned from.
    pub epoch: u64,
    /// Up and acting as seen then (for the operator reading the file).
    pub up: Vec<Option<u32>>,
    pub acting: Vec<Option<u32>>,
    /// The PG's items before the hold (someone else's: the balancer's, an operator's), put
    /// back on release. Absent when it had none (then release is `rm-pg-upmap-items`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub before: Vec<UpmapItem>,
}

/// Why the record could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    #[error("reading the backfill record {path}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("the backfill record {path} is not valid")]
    Parse {
        path: PathBuf,
        #[source]
        source: serde_json::Error,
    },
    #[error(
        "the backfill record {path} has version {found}; this program reads version {VERSION}"
    )]
    Version { path: PathBuf, found: u32 },
    #[error("writing the backfill record {path}")]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

impl Record {
    /// Reads `path`; a missing file is an empty record (nothing held).
    pub fn load(path: &Path) -> Result<Record, RecordError> {
        let bytes = match std::fs::read(path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Record::default()),
            Err(source) => {
                return Err(RecordError::Read {
                    path: path.to_path_buf(),
                    source,
                })
            }
        };
        Record::from_json(&bytes).map_err(|e| match e {
            FromJson::Parse(source) => RecordError::Parse {
                path: path.to_path_buf(),
                source,
            },
            FromJson::Version(found) => RecordError::Version {
                path: path.to_path_buf(),
                found,
            },
        })
    }

    /// Writes it atomically (`atomic_file`): a crash leaves the old or the new record.
    pub fn save(&self, path: &Path) -> Result<(), RecordError> {
        crate::atomic_file::write(path, self.to_json().as_bytes()).map_err(|source| {
            RecordError::Write {
                path: path.to_path_buf(),
                source,
            }
        })
    }

    pub fn to_json(&self) -> String {
        // A struct of strings, numbers and maps keyed by strings: always encodes.
        serde_json::to_string_pretty(self).unwrap_or_default() + "\n"
    }

    fn from_json(bytes: &[u8]) -> Result<Record, FromJson> {
        #[derive(Deserialize)]
        struct Versioned {
            version: u32,
        }
        let v: Versioned = serde_json::from_slice(bytes).map_err(FromJson::Parse)?;
        if v.version != VERSION {
            return Err(FromJson::Version(v.version));
        }
        serde_json::from_slice(bytes).map_err(FromJson::Parse)
    }

    /// Nothing held and the balancer not paused: the file can go (the PGs on their way after a
    /// release matter only while there is something left to release).
    pub fn is_empty(&self) -> bool {
        self.held.is_empty() && self.balancer.is_none()
    }

    /// Once Ceph removed the items of `pgid` (`rm-pg-upmap-items`): no longer held, and on its
    /// way to backfill since `now` (Unix seconds).
    pub fn released(&mut self, pgid: PgId, now: f64) {
        if self.held.remove(&pgid).is_some() {
            self.releasing.insert(pgid, now);
            self.last_release = Some(now);
        }
    }

    /// Keeps in `releasing` only `on_the_way` (a plan's); whether anything was dropped.
    pub fn keep_releasing(&mut self, on_the_way: &[PgId]) -> bool {
        let before = self.releasing.len();
        self.releasing.retain(|id, _| on_the_way.contains(id));
        self.releasing.len() != before
    }

    /// Whether N has room for a release at `now` (Unix seconds): keeps when the room opened,
    /// forgets it once there is none.
    pub fn room(&mut self, room: bool, now: f64) {
        if room {
            self.room_since.get_or_insert(now);
        } else {
            self.room_since = None;
        }
    }

    /// Nothing held and the balancer not paused: the cluster and the releases on their way are
    /// forgotten too (nothing left whose release they would hold back).
    pub fn tidy(&mut self) {
        if self.is_empty() {
            self.fsid = None;
            self.releasing.clear();
            self.last_release = None;
            self.room_since = None;
        }
    }

    /// [`Record::tidy`] at `now` (Unix seconds), but the releases of less than
    /// [`PG_STATS_LAG`] ago are kept: until then [`Record::released_lately`] says so.
    pub fn tidy_at(&mut self, now: f64) {
        if self.is_empty() {
            self.releasing
                .retain(|_, at| (now - *at).abs() < PG_STATS_LAG);
            if self.releasing.is_empty() {
                self.fsid = None;
                self.last_release = None;
                self.room_since = None;
            }
        }
    }

    /// A PG was released less than [`PG_STATS_LAG`] ago: `pg dump` and `ceph status` may
    /// still show it as it was while held (clean, nothing misplaced), not the backfill it
    /// starts. On the lab the recovery was taken as finished 0.9 s after the last release, and
    /// that PG's backfill left out.
    pub fn released_lately(&self, now: f64) -> bool {
        self.releasing
            .values()
            .any(|at| (now - *at).abs() < PG_STATS_LAG)
    }

    /// Adds a hold (before its `pg-upmap-items` runs).
    pub fn hold(
        &mut self,
        fsid: &str,
        pgid: PgId,
        items: Vec<UpmapItem>,
        epoch: u64,
        up: Vec<Option<u32>>,
        acting: Vec<Option<u32>>,
    ) {
        self.fsid.get_or_insert_with(|| fsid.to_string());
        let seq = self.next_seq;
        self.next_seq += 1;
        self.releasing.remove(&pgid);
        self.held.insert(
            pgid,
            HeldPg {
                items,
                seq,
                epoch,
                up,
                acting,
                before: Vec::new(),
            },
        );
    }

    /// The items releasing `pgid` puts back (empty: none, the entry is removed).
    pub fn restore_items(&self, pgid: PgId) -> Vec<UpmapItem> {
        self.held
            .get(&pgid)
            .map(|h| h.before.clone())
            .unwrap_or_default()
    }

    /// Of `ids`, those whose release puts items back, with the items.
    pub fn restores(&self, ids: &[PgId]) -> BTreeMap<PgId, Vec<UpmapItem>> {
        ids.iter()
            .map(|id| (*id, self.restore_items(*id)))
            .filter(|(_, items)| !items.is_empty())
            .collect()
    }

    /// The command that releases `pgid`: `rm-pg-upmap-items`, or its items before put back.
    pub fn release_command(&self, pgid: PgId) -> String {
        set_items_command(pgid, &self.restore_items(pgid))
    }

    /// A release of `pgid` failed: it goes after every other held PG, so that one the monitors
    /// keep refusing never stops the others (releases go oldest first, one at a time).
    pub fn requeue(&mut self, pgid: PgId) {
        let seq = self.next_seq;
        if let Some(held) = self.held.get_mut(&pgid) {
            held.seq = seq;
            self.next_seq += 1;
        }
    }

    /// Drops from the items `pgid` had before its hold those that name one of `osds` (no
    /// longer in the OSD map): the monitors refuse to put them back (`osd.N does not exist`).
    /// Returns the items dropped.
    pub fn trim(&mut self, pgid: PgId, osds: &[u32]) -> Vec<UpmapItem> {
        let Some(held) = self.held.get_mut(&pgid) else {
            return Vec::new();
        };
        let (dropped, kept) = held
            .before
            .iter()
            .partition(|i| osds.contains(&i.from) || osds.contains(&i.to));
        held.before = kept;
        dropped
    }

    /// Each [`Trim`] of a plan or an undo, before its releases.
    pub fn apply_trims(&mut self, trims: &[(PgId, Trim)]) {
        for (id, t) in trims {
            self.trim(*id, &t.osds);
        }
    }

    /// The held PGs, oldest first.
    pub fn oldest_first(&self) -> Vec<PgId> {
        let mut v: Vec<(u64, PgId)> = self.held.iter().map(|(id, h)| (h.seq, *id)).collect();
        v.sort();
        v.into_iter().map(|(_, id)| id).collect()
    }
}

/// `ceph osd pg-upmap-items PGID FROM TO ...`, or `rm-pg-upmap-items` for no items.
pub fn set_items_command(pgid: PgId, items: &[UpmapItem]) -> String {
    if items.is_empty() {
        return format!("ceph osd rm-pg-upmap-items {pgid}");
    }
    let pairs: Vec<String> = items
        .iter()
        .map(|i| format!("{} {}", i.from, i.to))
        .collect();
    format!("ceph osd pg-upmap-items {pgid} {}", pairs.join(" "))
}

enum FromJson {
    Parse(serde_json::Error),
    Version(u32),
}

/// Why a record entry is dropped without touching the cluster.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "why", rename_all = "snake_case")]
pub enum Forget {
    /// The PG has no upmap items any more (never added, or removed already).
    Gone,
    /// Its items are not the ones we added: someone else's now; left as they are.
    Changed { now: Vec<UpmapItem> },
    /// Its items are back as they were before the hold (put back, or the hold never applied).
    Restored { items: Vec<UpmapItem> },
    /// Its pool is not in the OSD map: deleted, and the PG with it.
    PoolGone,
    /// Its seed is not below its pool's pg_num: a pg_num reduction merged it away.
    MergedAway { pg_num: u64 },
    /// The monitors refused its release with ENOENT (`pg 9.0 does not exist`, `pool of 9.0 is
    /// pending removal`): gone since the OSD map the release was planned from.
    NoSuchPg,
}

impl std::fmt::Display for Forget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Forget::Gone => f.write_str("no upmap items in the OSD map any more"),
            Forget::Changed { now } => write!(
                f,
                "its upmap items are now {} (changed by someone else): left as they are",
                crate::ceph::parse::upmap::items_text(now)
            ),
            Forget::Restored { items } => write!(
                f,
                "its upmap items are {}, as before the hold",
                crate::ceph::parse::upmap::items_text(items)
            ),
            Forget::PoolGone => f.write_str(
                "its pool is no longer in the OSD map (deleted): the PG and its upmap entries went with it",
            ),
            Forget::MergedAway { pg_num } => write!(
                f,
                "its pool has {pg_num} PGs now: merged away by a pg_num reduction, its upmap entries with it"
            ),
            Forget::NoSuchPg => f.write_str(
                "Ceph says it does not exist (its pool deleted, or merged away by a pg_num reduction): nothing to release",
            ),
        }
    }
}

/// Saved items of a held PG (its items before the hold, put back on release) that name OSDs no
/// longer in the OSD map (purged): dropped from the record without a command. The monitors
/// refuse to put them back (`Error ENOENT: osd.42 does not exist`), and would have dropped
/// them anyway (`OSDMap::check_pg_upmaps` cancels an item whose source CRUSH no longer has or
/// whose target is out); the release puts back the rest, or removes the entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Trim {
    pub osds: Vec<u32>,
    pub dropped: Vec<UpmapItem>,
}

impl std::fmt::Display for Trim {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let osds: Vec<String> = self.osds.iter().map(|o| format!("osd.{o}")).collect();
        write!(
            f,
            "{} no longer in the OSD map (purged): its upmap items before the hold {} are not put back",
            osds.join(", "),
            crate::ceph::parse::upmap::items_text(&self.dropped)
        )
    }
}

/// The record's entries against the OSD map: ours still in place (oldest first), those to
/// forget, and the saved items of ours to trim.
pub(crate) struct Classified {
    pub ours: Vec<PgId>,
    pub forget: Vec<(PgId, Forget)>,
    pub trim: Vec<(PgId, Trim)>,
}

/// Whether the PG `id` exists in `map` (`OSDMap::pg_exists`): why not, if it does not.
fn pg_gone(map: &UpmapView, id: PgId) -> Option<Forget> {
    match map.pools.get(&id.pool) {
        None => Some(Forget::PoolGone),
        Some(pool) if u64::from(id.seed) >= pool.pg_num => Some(Forget::MergedAway {
            pg_num: pool.pg_num,
        }),
        Some(_) => None,
    }
}

pub(crate) fn classify(map: &UpmapView, record: &Record) -> Classified {
    let mut ours = Vec::new();
    let mut forget = Vec::new();
    let mut trim = Vec::new();
    for id in record.oldest_first() {
        let Some(held) = record.held.get(&id) else {
            continue;
        };
        // Before the items: the monitors refuse any command on a PG that is gone.
        if let Some(gone) = pg_gone(map, id) {
            forget.push((id, gone));
            continue;
        }
        // Empty items: theirs taken off, so no entry is what ours looks like.
        let now = map.pg_upmap_items.get(&id).cloned().unwrap_or_default();
        if now == held.items {
            let mut osds: Vec<u32> = held
                .before
                .iter()
                .flat_map(|i| [i.from, i.to])
                .filter(|o| !map.osds.contains_key(o))
                .collect();
            osds.sort_unstable();
            osds.dedup();
            if !osds.is_empty() {
                let dropped = held
                    .before
                    .iter()
                    .filter(|i| osds.contains(&i.from) || osds.contains(&i.to))
                    .copied()
                    .collect();
                trim.push((id, Trim { osds, dropped }));
            }
            ours.push(id);
        } else if !held.before.is_empty() && now == held.before {
            forget.push((id, Forget::Restored { items: now }));
        } else if now.is_empty() {
            forget.push((id, Forget::Gone));
        } else {
            forget.push((id, Forget::Changed { now }));
        }
    }
    Classified { ours, forget, trim }
}

/// The removal of exactly ours.
#[derive(Debug, Clone, PartialEq, Serialize, Default)]
pub struct Undo {
    /// Released, oldest first ([`Record::release_command`] for each).
    pub remove: Vec<PgId>,
    /// Dropped from the record without a command.
    pub forget: Vec<(PgId, Forget)>,
    /// Saved items to drop from the record (without a command) before the releases.
    pub trim: Vec<(PgId, Trim)>,
    /// Held and not removed in this step (`at_most`).
    pub left: usize,
    /// Set when the record is of another cluster: nothing is touched.
    pub other_cluster: Option<String>,
}

/// Plans the removal of the lever's entries: all of them, or the `at_most` oldest. The record's
/// entries whose items are gone or changed, or whose PG is, are forgotten, never removed; saved
/// items naming OSDs that are gone are trimmed first ([`Record::apply_trims`]).
pub fn undo(map: &UpmapView, record: &Record, at_most: Option<usize>) -> Undo {
    if let Some(fsid) = &record.fsid {
        if *fsid != map.fsid {
            return Undo {
                left: record.held.len(),
                other_cluster: Some(fsid.clone()),
                ..Undo::default()
            };
        }
    }
    let Classified { ours, forget, trim } = classify(map, record);
    let n = at_most.unwrap_or(usize::MAX).min(ours.len());
    Undo {
        left: ours.len() - n,
        remove: ours.into_iter().take(n).collect(),
        forget,
        trim,
        other_cluster: None,
    }
}
