//! Which PGs to hold and which to release so that at most N PGs backfill at once, and the safety
//! rules that say why a PG, or the whole lever, is refused. Pure: the inputs are the parsed
//! outputs of `ceph pg dump pgs_brief`, `ceph osd dump` and `ceph balancer status`, and the
//! record.
//!
//! Safety rules (each tested in `tests.rs`):
//! 1. Only PGs that wait for backfill of misplaced data are held: state `active+remapped` with
//!    `backfill_wait` (or `backfilling`, `backfill_toofull`) and no other word than a few
//!    harmless ones ([`pg_refusal_by_state`]); never a degraded or undersized PG.
//! 2. Nothing is held while any PG is undersized: the lever is refused and everything held is
//!    released ([`lever_refusal`]).
//! 3. `require_min_compat_client` below luminous (or a name this program does not know): the
//!    lever is refused, with the reason.
//! 4. A PG with upmap items that are not ours (the balancer's, an operator's) is held by
//!    replacing them with items that map CRUSH's own set to the acting set; theirs are recorded
//!    before and put back on release ([`hold_items`], [`super::record::HeldPg::before`]).
//!    CRUSH's set is their items undone on the up set (as CERN's upmap-remapped does), and must
//!    give the up set back with their items applied, or the PG is not touched. A whole-set
//!    `pg_upmap` is never touched.
//! 5. Replicated pools: the OSDs CRUSH wants that are not acting map to the acting OSDs that are
//!    not wanted (the set is what matters). Erasure-coded pools: position by position (the OSD at
//!    position i holds shard i); a permutation Ceph cannot express is refused.
//! 6. Each mapping is checked by applying it as Ceph does (`OSDMap::_apply_upmap`): the result
//!    must be the acting set, and every target OSD up, in and of non-zero reweight (Ceph ignores
//!    an item whose target has reweight 0).
//! 7. A record of another cluster (fsid) is never acted on.
//! 8. At most [`MAX_HELD`] PGs are held: the record must fit the enforcer's stored state.
//!
//! Counting: a PG "backfills" when its state has `backfilling`, `backfill_wait` or
//! `backfill_toofull` (one waiting starts as soon as a reservation frees). Held PGs are
//! active+clean and do not count. Over N: hold the excess, those waiting first (no progress
//! lost), then those backfilling. Under N: release the oldest held ones.
//!
//! A released PG keeps its place: it peers for a few seconds before `pg dump` shows it
//! backfill, and counted as not backfilling then, the next step would release one more in its
//! place, and hold them all back once they show (p99 spikes on the lab). So the PGs released
//! lately ([`Record::releasing`]) that show neither backfill nor clean yet count among the N
//! for releases ([`on_the_way`]), for at most [`RELEASE_SETTLES`].

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use serde::Serialize;

use super::record::{classify, set_items_command, Forget, Record, Trim, PG_STATS_LAG};
use crate::ceph::parse::pgs::PgBrief;
use crate::ceph::parse::upmap::{
    items_text, release_rank, BalancerStatus, PgId, PoolKind, UpmapItem, UpmapView,
};

/// The words a held PG may carry besides the required ones (all harmless to hold).
const HARMLESS: &[&str] = &["scrubbing", "deep", "snaptrim", "snaptrim_wait", "laggy"];
/// A PG that needs backfill says one of these.
const BACKFILL_WORDS: &[&str] = &["backfill_wait", "backfilling", "backfill_toofull"];
/// How long (seconds) a released PG may take to show backfill before it no longer keeps its
/// place among the N (one stuck peering must not stop the releases for good).
pub const RELEASE_SETTLES: f64 = 60.0;
/// The enforcer releases at most one PG per this many seconds ([`Plan::spaced`]): each release
/// re-peers its PG, and on the lab every 10-s window with two releases in it went far over the
/// bound (751, 776, 1082 ms) while one release alone mostly stayed within. One latency window.
pub const RELEASE_GAP: f64 = 10.0;

/// The most PGs the lever holds at once. Its record is in the enforcer's stored state, which a
/// takeover reads back up to 1 MiB (`lease::rados::MAX_STATE_BYTES`); a held PG takes about 300
/// bytes there (pretty-printed, with its up and acting sets: docs/benchmarks.md), so 1,000 take
/// about 300 KiB. Released one per window, 1,000 take nearly three hours anyway. PGs past it
/// backfill beside the N ([`PgRefusal::HeldEnough`], named in the log with the others that
/// cannot be held).
pub const MAX_HELD: usize = 1_000;

/// Why the lever does nothing at all (and releases what it holds, except for another cluster).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "reason", rename_all = "snake_case")]
pub enum LeverRefusal {
    /// `require_min_compat_client` is below luminous (clients that predate upmap may connect).
    CompatClient { require_min_compat_client: String },
    /// Redundancy first: some PGs are undersized.
    Undersized { pgs: usize },
    /// The record is of another cluster.
    OtherCluster { record: String, cluster: String },
}

impl fmt::Display for LeverRefusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LeverRefusal::CompatClient {
                require_min_compat_client: r,
            } if r.is_empty() => write!(
                f,
                "the OSD map has no require_min_compat_client (a pre-luminous map): upmap needs luminous"
            ),
            LeverRefusal::CompatClient {
                require_min_compat_client: r,
            } if release_rank(r).is_none() => write!(
                f,
                "require_min_compat_client is {r:?}, a release this program does not know: upmap needs luminous"
            ),
            LeverRefusal::CompatClient {
                require_min_compat_client: r,
            } => write!(
                f,
                "require_min_compat_client is {r}, below luminous: clients that cannot read upmap entries may connect \
                 (`ceph osd set-require-min-compat-client luminous` allows it, once no such client is left)"
            ),
            LeverRefusal::Undersized { pgs } => write!(
                f,
                "{pgs} PGs undersized: redundancy first, nothing is held"
            ),
            LeverRefusal::OtherCluster { record, cluster } => write!(
                f,
                "the record is of cluster {record}, this is {cluster}: nothing is touched"
            ),
        }
    }
}

/// Why one PG that backfills is not held.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "reason", rename_all = "snake_case")]
pub enum PgRefusal {
    /// Degraded or undersized: its recovery restores redundancy; never held.
    Redundancy { state: String },
    /// A state word the lever does not hold through (peering, recovering, forced_backfill, ...).
    State { state: String, word: String },
    /// Upmap items someone else set (the balancer, an operator) that do not explain the up
    /// set: applied to what undoing them gives, they do not give the up set back.
    NotOurUpmapItems { items: Vec<UpmapItem> },
    /// A whole-set `pg_upmap` entry.
    PgUpmap,
    /// Its pool is not in the OSD map, or of a kind the lever does not know.
    Pool { detail: String },
    /// Up and acting have different lengths, or a missing member.
    Sets { detail: String },
    /// Up is the acting set already: nothing to map back.
    NothingToMap,
    /// A target OSD Ceph would not map to.
    Target { osd: u32, why: String },
    /// The mapping would not give the acting set (an EC permutation, ...).
    Mapping { detail: String },
    /// The lever holds [`MAX_HELD`] PGs already.
    HeldEnough { most: usize },
}

impl fmt::Display for PgRefusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PgRefusal::Redundancy { state } => {
                write!(f, "{state}: redundancy first, never held")
            }
            PgRefusal::State { state, word } => {
                write!(f, "{state}: {word:?} is not a state the lever holds")
            }
            PgRefusal::NotOurUpmapItems { items } => write!(
                f,
                "has upmap items that are not ours ({}) and CRUSH's own set cannot be told from them: not touched",
                items_text(items)
            ),
            PgRefusal::PgUpmap => write!(f, "has a pg_upmap entry (not ours): not touched"),
            PgRefusal::Pool { detail } | PgRefusal::Sets { detail } => f.write_str(detail),
            PgRefusal::NothingToMap => write!(f, "up is the acting set already"),
            PgRefusal::Target { osd, why } => write!(f, "osd.{osd} {why}"),
            PgRefusal::Mapping { detail } => f.write_str(detail),
            PgRefusal::HeldEnough { most } => write!(
                f,
                "the lever holds {most} PGs already, the most its stored state keeps"
            ),
        }
    }
}

/// Whether the whole lever is refused (rules 2, 3 and 7).
pub fn lever_refusal(pgs: &[PgBrief], map: &UpmapView, record: &Record) -> Option<LeverRefusal> {
    if let Some(fsid) = &record.fsid {
        if *fsid != map.fsid {
            return Some(LeverRefusal::OtherCluster {
                record: fsid.clone(),
                cluster: map.fsid.clone(),
            });
        }
    }
    let luminous = release_rank("luminous");
    let rank = release_rank(&map.require_min_compat_client);
    if rank.is_none() || rank < luminous {
        return Some(LeverRefusal::CompatClient {
            require_min_compat_client: map.require_min_compat_client.clone(),
        });
    }
    let undersized = pgs.iter().filter(|p| p.has_state("undersized")).count();
    if undersized > 0 {
        return Some(LeverRefusal::Undersized { pgs: undersized });
    }
    None
}

/// Whether `pg` needs backfill (waiting, running or too full).
pub fn backfills(pg: &PgBrief) -> bool {
    BACKFILL_WORDS.iter().any(|w| pg.has_state(w))
}

/// Rule 1: `None` when the state allows holding the PG. Only called for PGs that backfill.
pub fn pg_refusal_by_state(pg: &PgBrief) -> Option<PgRefusal> {
    if pg.has_state("degraded") || pg.has_state("undersized") {
        return Some(PgRefusal::Redundancy {
            state: pg.state.clone(),
        });
    }
    for required in ["active", "remapped"] {
        if !pg.has_state(required) {
            return Some(PgRefusal::State {
                state: pg.state.clone(),
                word: format!("not {required}"),
            });
        }
    }
    let unknown = pg.state.split('+').find(|w| {
        !matches!(*w, "active" | "remapped") && !BACKFILL_WORDS.contains(w) && !HARMLESS.contains(w)
    });
    unknown.map(|w| PgRefusal::State {
        state: pg.state.clone(),
        word: w.to_string(),
    })
}

/// How one PG is held: the items to set (none: theirs are what moves it, and are taken off)
/// and the items it had before (someone else's, put back on release).
#[derive(Debug, Clone, PartialEq)]
pub struct HoldItems {
    pub items: Vec<UpmapItem>,
    pub before: Vec<UpmapItem>,
}

/// Rules 4-6: the upmap items that map `pg` back to its acting set, or why not. `record` says
/// which upmap entries are ours (a PG with ours is held already, and not planned again).
pub fn hold_items(pg: &PgBrief, map: &UpmapView, record: &Record) -> Result<HoldItems, PgRefusal> {
    let id = pg_id(pg)?;
    if map.pg_upmap.contains(&id) {
        return Err(PgRefusal::PgUpmap);
    }
    // Ours (the same items as recorded) are never planned again; anything else there is theirs.
    let before = match (map.pg_upmap_items.get(&id), record.held.get(&id)) {
        (Some(now), Some(held)) if *now == held.items => Vec::new(),
        (Some(now), _) => now.clone(),
        (None, _) => Vec::new(),
    };
    let pool = map.pools.get(&id.pool).ok_or_else(|| PgRefusal::Pool {
        detail: format!("pool {} is not in the OSD map", id.pool),
    })?;
    let (up, acting) = members(pg)?;
    // The PG's sets come from its stats, which lag the OSD map: an OSD purged since is still
    // named in its up set for a few seconds, and Ceph refuses an item from it (ENOENT `osd.4
    // does not exist`: fault row 14 tried three cycles in a row). The targets (acting) are
    // checked below.
    if let Some(gone) = up.iter().find(|o| !map.osds.contains_key(o)) {
        return Err(PgRefusal::Sets {
            detail: format!(
                "up {up:?} names osd.{gone}, which is not in the OSD map (the PG's stats are older than the map)"
            ),
        });
    }
    // What CRUSH gives without their items: `pg-upmap-items` replaces a PG's items and is read
    // against that set, not against the up set.
    let raw = unapply_upmap(&up, &before);
    if apply_upmap(&raw, &before, map) != up {
        return Err(PgRefusal::NotOurUpmapItems { items: before });
    }
    let computed = match pool.kind {
        PoolKind::Replicated => replicated_items(&raw, &acting),
        PoolKind::Erasure => erasure_items(&raw, &acting),
        PoolKind::Other(n) => {
            return Err(PgRefusal::Pool {
                detail: format!(
                    "pool {} has type {n}, neither replicated nor erasure",
                    id.pool
                ),
            })
        }
    };
    let items = match computed {
        // CRUSH maps it where its data is: their items are what moves it; held by taking
        // them off (and put back on release).
        Err(PgRefusal::NothingToMap) if !before.is_empty() => Vec::new(),
        other => other?,
    };
    for item in &items {
        check_target(map, item.to)?;
    }
    let result = apply_upmap(&raw, &items, map);
    let expected = match pool.kind {
        PoolKind::Erasure => result == acting,
        _ => result.iter().collect::<BTreeSet<_>>() == acting.iter().collect::<BTreeSet<_>>(),
    };
    if !expected {
        return Err(PgRefusal::Mapping {
            detail: format!(
                "{} on CRUSH's {raw:?} gives {result:?}, not the acting set {acting:?} (Ceph cannot express it)",
                items_text(&items)
            ),
        });
    }
    Ok(HoldItems { items, before })
}

fn pg_id(pg: &PgBrief) -> Result<PgId, PgRefusal> {
    pg.pgid.parse().map_err(|e| PgRefusal::Sets {
        detail: format!("{e}"),
    })
}

/// Up and acting, both complete and of one length.
fn members(pg: &PgBrief) -> Result<(Vec<u32>, Vec<u32>), PgRefusal> {
    let complete = |set: &[Option<u32>], what: &str| {
        set.iter()
            .map(|o| {
                o.ok_or_else(|| PgRefusal::Sets {
                    detail: format!("{what} set {set:?} has a missing member"),
                })
            })
            .collect::<Result<Vec<u32>, _>>()
    };
    let up = complete(&pg.up, "up")?;
    let acting = complete(&pg.acting, "acting")?;
    if up.len() != acting.len() || up.is_empty() {
        return Err(PgRefusal::Sets {
            detail: format!("up {up:?} and acting {acting:?} differ in length"),
        });
    }
    Ok((up, acting))
}

/// Replicated: up-not-acting -> acting-not-up, in the order of each set.
fn replicated_items(up: &[u32], acting: &[u32]) -> Result<Vec<UpmapItem>, PgRefusal> {
    let from: Vec<u32> = up.iter().copied().filter(|o| !acting.contains(o)).collect();
    let to: Vec<u32> = acting.iter().copied().filter(|o| !up.contains(o)).collect();
    if from.is_empty() {
        return Err(PgRefusal::NothingToMap);
    }
    if from.len() != to.len() {
        return Err(PgRefusal::Sets {
            detail: format!("up {up:?} and acting {acting:?}: duplicate members"),
        });
    }
    Ok(from
        .into_iter()
        .zip(to)
        .map(|(from, to)| UpmapItem { from, to })
        .collect())
}

/// Erasure coded: position by position.
fn erasure_items(up: &[u32], acting: &[u32]) -> Result<Vec<UpmapItem>, PgRefusal> {
    let items: Vec<UpmapItem> = up
        .iter()
        .zip(acting)
        .filter(|(u, a)| u != a)
        .map(|(&from, &to)| UpmapItem { from, to })
        .collect();
    if items.is_empty() {
        return Err(PgRefusal::NothingToMap);
    }
    Ok(items)
}

fn check_target(map: &UpmapView, osd: u32) -> Result<(), PgRefusal> {
    let why = match map.osds.get(&osd) {
        None => "is not in the OSD map",
        Some(o) if !o.up => "is down",
        Some(o) if !o.is_in => "is out",
        Some(o) if o.weight <= 0.0 => "has reweight 0 (Ceph ignores an upmap to it)",
        Some(_) => return Ok(()),
    };
    Err(PgRefusal::Target {
        osd,
        why: why.to_string(),
    })
}

/// CRUSH's set from the up set and the items Ceph applied to it: each item undone, last first
/// (`to` back to `from`). An item whose source is in the set did not apply (its target was
/// there already) and is left; one whose source CRUSH no longer has the monitors remove
/// (`OSDMap::check_pg_upmaps`). [`hold_items`] checks the result anyway.
pub fn unapply_upmap(up: &[u32], items: &[UpmapItem]) -> Vec<u32> {
    let mut set = up.to_vec();
    for item in items.iter().rev() {
        if set.contains(&item.from) {
            continue;
        }
        if let Some(slot) = set.iter_mut().find(|o| **o == item.to) {
            *slot = item.from;
        }
    }
    set
}

/// What Ceph makes of `raw` with `items` (`OSDMap::_apply_upmap`, pg_upmap_items part): each
/// item in turn replaces the first `from` with `to`, unless `to` is in the set already or is
/// out (reweight 0).
pub fn apply_upmap(raw: &[u32], items: &[UpmapItem], map: &UpmapView) -> Vec<u32> {
    let mut set = raw.to_vec();
    for item in items {
        if set.contains(&item.to) {
            continue;
        }
        let target_out = map.osds.get(&item.to).is_some_and(|o| o.weight <= 0.0);
        if target_out {
            continue;
        }
        if let Some(slot) = set.iter_mut().find(|o| **o == item.from) {
            *slot = item.to;
        }
    }
    set
}

/// One PG to hold: the items to add and what it looked like.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PlannedHold {
    pub pgid: PgId,
    pub state: String,
    pub up: Vec<Option<u32>>,
    pub acting: Vec<Option<u32>>,
    /// The items to set; empty: the PG's items are taken off (`rm-pg-upmap-items`), theirs
    /// being what moves it.
    pub items: Vec<UpmapItem>,
    /// Its items before (someone else's), recorded and put back on release.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub before: Vec<UpmapItem>,
}

impl PlannedHold {
    /// The command that holds it.
    pub fn command(&self) -> String {
        set_items_command(self.pgid, &self.items)
    }

    /// Puts it in `record` (before its command runs), with the items it replaces.
    pub fn record_in(&self, record: &mut Record, fsid: &str, epoch: u64) {
        record.hold(
            fsid,
            self.pgid,
            self.items.clone(),
            epoch,
            self.up.clone(),
            self.acting.clone(),
        );
        if let Some(held) = record.held.get_mut(&self.pgid) {
            held.before = self.before.clone();
        }
    }

    /// What the hold does to its upmap items, for a log line: "upmap [1->3]", or with the
    /// items it had before, what becomes of them.
    pub fn items_words(&self) -> String {
        match (self.items.is_empty(), self.before.is_empty()) {
            (_, true) => format!("upmap {}", items_text(&self.items)),
            (true, false) => format!(
                "its upmap items {} (not ours, what moves it) taken off, put back on release",
                items_text(&self.before)
            ),
            (false, false) => format!(
                "upmap {} in place of {} (not ours, put back on release)",
                items_text(&self.items),
                items_text(&self.before)
            ),
        }
    }
}

/// What one step of the lever does.
#[derive(Debug, Clone, PartialEq, Serialize, Default)]
pub struct Plan {
    /// The lever refused as a whole (then `hold` is empty, and `release` is everything held,
    /// except for another cluster's record).
    pub refusal: Option<LeverRefusal>,
    /// The target: at most this many PGs backfill.
    pub max_backfills: usize,
    /// PGs backfilling or waiting to, not held, now.
    pub backfilling: usize,
    /// ... and after the plan is carried out (if Ceph does as planned).
    pub backfilling_after: usize,
    /// Held PGs (ours, still in place) now.
    pub held: usize,
    pub hold: Vec<PlannedHold>,
    /// Ours to take back ([`Record::release_command`]: `rm-pg-upmap-items`, or the items the PG
    /// had before put back): those that lost redundancy first (the first `urgent`), then the
    /// oldest held.
    pub release: Vec<PgId>,
    /// How many of `release` go because they lost redundancy (never delayed).
    pub urgent: usize,
    /// How many releases N's room asks for, before the enforcer's pace ([`Plan::spaced`]).
    #[serde(skip)]
    pub room: usize,
    /// Released before and not showing backfill (nor clean) yet, e.g. peering: they count
    /// among the N, so fewer are released ([`on_the_way`]). What the record keeps of
    /// `releasing` after this step.
    pub on_the_way: Vec<PgId>,
    /// Record entries to drop without touching the cluster (gone, or changed by someone).
    pub forget: Vec<(PgId, Forget)>,
    /// Saved items naming OSDs that are gone, to drop from the record before the releases
    /// ([`Record::apply_trims`]).
    pub trim: Vec<(PgId, Trim)>,
    /// PGs that backfill and are not held, with why.
    pub refused: Vec<(PgId, PgRefusal)>,
}

/// The PGs of `record.releasing` that still take their place among the N at `now` (Unix
/// seconds): released less than [`RELEASE_SETTLES`] ago, not held again, and in `pg dump`
/// neither backfilling (or waiting to) nor clean, e.g. still peering or activating (clean
/// within [`PG_STATS_LAG`] of the release is the dump from before it: still on its way).
pub fn on_the_way(pgs: &[PgBrief], record: &Record, now: f64) -> Vec<PgId> {
    on_the_way_in(&by_id(pgs), record, now)
}

fn by_id(pgs: &[PgBrief]) -> BTreeMap<PgId, &PgBrief> {
    pgs.iter()
        .filter_map(|p| p.pgid.parse().ok().map(|id| (id, p)))
        .collect()
}

fn on_the_way_in(by_id: &BTreeMap<PgId, &PgBrief>, record: &Record, now: f64) -> Vec<PgId> {
    record
        .releasing
        .iter()
        // Either way: a clock set back must not keep a PG counted for longer.
        .filter(|(_, at)| (now - **at).abs() < RELEASE_SETTLES)
        .filter(|(id, _)| !record.held.contains_key(id))
        .filter(|(id, at)| {
            by_id.get(id).is_some_and(|p| {
                // Clean so soon after the release is the dump from before it.
                let clean = p.has_state("active")
                    && p.has_state("clean")
                    && (now - **at).abs() >= PG_STATS_LAG;
                !(backfills(p) || clean)
            })
        })
        .map(|(id, _)| *id)
        .collect()
}

/// The step towards at most `max_backfills` PGs backfilling at `now` (Unix seconds, for the
/// PGs released lately). See the module's rules.
pub fn plan(
    pgs: &[PgBrief],
    map: &UpmapView,
    record: &Record,
    max_backfills: usize,
    now: f64,
) -> Plan {
    let mut out = Plan {
        max_backfills,
        ..Plan::default()
    };
    let classified = classify(map, record);
    out.forget = classified.forget;
    out.trim = classified.trim;
    let ours = classified.ours;
    // Looked up for every PG of the dump: a set, not the list.
    let ours_set: BTreeSet<PgId> = ours.iter().copied().collect();
    out.held = ours.len();
    let by_id = by_id(pgs);
    out.on_the_way = on_the_way_in(&by_id, record, now);
    out.backfilling = pgs
        .iter()
        .filter(|p| backfills(p))
        .filter(|p| p.pgid.parse().is_ok_and(|id: PgId| !ours_set.contains(&id)))
        .count();
    out.refusal = lever_refusal(pgs, map, record);
    if let Some(refusal) = &out.refusal {
        if !matches!(refusal, LeverRefusal::OtherCluster { .. }) {
            out.release = ours;
        } else {
            // Another cluster's record is left as it is, its releases on their way included.
            out.forget.clear();
            out.trim.clear();
            out.on_the_way = record.releasing.keys().copied().collect();
        }
        out.backfilling_after = out.backfilling;
        return out;
    }
    // A held PG that lost redundancy goes back at once (its recovery comes first).
    let mut release: Vec<PgId> = ours
        .iter()
        .copied()
        .filter(|id| {
            by_id
                .get(id)
                .is_some_and(|p| p.has_state("degraded") || p.has_state("undersized"))
        })
        .collect();
    out.urgent = release.len();
    let mut candidates: Vec<(u8, PlannedHold)> = Vec::new();
    for pg in pgs.iter().filter(|p| backfills(p)) {
        let Ok(id) = pg.pgid.parse::<PgId>() else {
            continue;
        };
        if ours_set.contains(&id) {
            continue;
        }
        let checked = match pg_refusal_by_state(pg) {
            Some(r) => Err(r),
            None => hold_items(pg, map, record),
        };
        match checked {
            Ok(HoldItems { items, before }) => {
                // Waiting first: holding one loses no progress.
                let rank = if pg.has_state("backfilling") { 1 } else { 0 };
                candidates.push((
                    rank,
                    PlannedHold {
                        pgid: id,
                        state: pg.state.clone(),
                        up: pg.up.clone(),
                        acting: pg.acting.clone(),
                        items,
                        before,
                    },
                ));
            }
            Err(r) => out.refused.push((id, r)),
        }
    }
    let excess = out.backfilling.saturating_sub(max_backfills);
    if excess > 0 {
        candidates.sort_by(|a, b| a.0.cmp(&b.0).then(a.1.pgid.cmp(&b.1.pgid)));
        let room = MAX_HELD.saturating_sub(out.held);
        let mut wanted = candidates.into_iter().take(excess).map(|(_, h)| h);
        out.hold = wanted.by_ref().take(room).collect();
        out.refused
            .extend(wanted.map(|h| (h.pgid, PgRefusal::HeldEnough { most: MAX_HELD })));
    } else {
        // Those released lately and still on their way take their place: fewer go now.
        let room = max_backfills.saturating_sub(out.backfilling + out.on_the_way.len());
        let more = room.saturating_sub(release.len());
        let more: Vec<PgId> = record
            .oldest_first()
            .into_iter()
            .filter(|id| ours_set.contains(id) && !release.contains(id))
            .take(more)
            .collect();
        out.room = more.len();
        release.extend(more);
    }
    out.release = release;
    out.backfilling_after = out.backfilling - out.hold.len() + out.release.len();
    out
}

impl Plan {
    /// The enforcer's pace: of the releases that follow N (not those of PGs that lost
    /// redundancy, nor a refusal's), one at most, and none within `gap` seconds of the last
    /// release nor of when N's room opened ([`Record::room_since`]: mostly a PG that finished
    /// its backfill and re-peers; on the lab, with N steady at 4, four of the eight releases
    /// made right after one put their window over the bound, one release alone rarely did).
    /// Either way, so that a clock set back does not stop them for longer. The one-shot
    /// `backfill hold` does not space them: its user runs it again.
    pub fn spaced(self, record: &Record, now: f64, gap: f64) -> Plan {
        let recent = |at: Option<f64>| at.is_some_and(|at| (now - at).abs() < gap);
        let wait = recent(record.last_release) || recent(record.room_since);
        self.releases_at_most(usize::from(!wait))
    }

    /// No release that follows N while `over_aim` (client p99 above the aim): it would add a
    /// backfill, and a peering, where the bound is already short (on the lab three releases
    /// made while p99 was over kept five windows over it and N unjudged). N is judged first.
    pub fn held_back(self, over_aim: bool) -> Plan {
        if over_aim {
            self.releases_at_most(0)
        } else {
            self
        }
    }

    /// Keeps the urgent releases and at most `more` of those that follow N.
    fn releases_at_most(mut self, more: usize) -> Plan {
        if self.refusal.is_some() {
            return self;
        }
        let keep = self.urgent + more;
        if self.release.len() > keep {
            self.backfilling_after -= self.release.len() - keep;
            self.release.truncate(keep);
        }
        self
    }

    /// N has room for a release of a held PG (whatever the pace lets go now).
    pub fn has_room(&self) -> bool {
        self.refusal.is_none() && self.room > 0
    }
}

/// What to do with the mgr balancer (it removes upmap entries too): paused while anything is
/// held, put back as it was when nothing is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "action", rename_all = "snake_case")]
pub enum BalancerStep {
    Nothing,
    /// `ceph balancer off`; `remember` is the state to put back (recorded before).
    Pause {
        remember: Option<BalancerStatus>,
    },
    /// `ceph balancer mode M` (when it differs) and `ceph balancer on` (when it was on).
    Restore {
        to: BalancerStatus,
        set_mode: bool,
        turn_on: bool,
    },
}

/// The balancer step, given whether anything is held after this step (`holding`).
pub fn balancer_step(now: &BalancerStatus, record: &Record, holding: bool) -> BalancerStep {
    if holding {
        if now.active {
            let remember = record.balancer.is_none().then(|| now.clone());
            return BalancerStep::Pause { remember };
        }
        return BalancerStep::Nothing;
    }
    match &record.balancer {
        Some(before) => {
            let set_mode = before.mode != now.mode;
            let turn_on = before.active && !now.active;
            BalancerStep::Restore {
                to: before.clone(),
                set_mode,
                turn_on,
            }
        }
        None => BalancerStep::Nothing,
    }
}
