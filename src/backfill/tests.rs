//! The lever's planning and record on the lab's recordings (`tests/fixtures/upmap/`, see its
//! `events.txt`) and on edge cases.

use std::collections::BTreeMap;

use super::plan::{apply_upmap, backfills};
use super::*;
use crate::ceph::parse::pgs::{self, PgBrief};
use crate::ceph::parse::test_support::{fixture, fixture_str};
use crate::ceph::parse::upmap::{
    self, items_text, BalancerStatus, OsdInfo, PgId, UpmapItem, UpmapView,
};

fn pgs_of(step: &str) -> Vec<PgBrief> {
    pgs::parse(&fixture(&format!(
        "upmap/{step}.ceph_pg_dump_pgs_brief.json"
    )))
    .unwrap()
}

fn map_of(step: &str) -> UpmapView {
    upmap::view(&fixture(&format!("upmap/{step}.ceph_osd_dump.json"))).unwrap()
}

fn pg(s: &str) -> PgId {
    s.parse().unwrap()
}

fn items(pairs: &[(u32, u32)]) -> Vec<UpmapItem> {
    pairs
        .iter()
        .map(|&(from, to)| UpmapItem { from, to })
        .collect()
}

fn brief(pgid: &str, state: &str, up: &[u32], acting: &[u32]) -> PgBrief {
    PgBrief {
        pgid: pgid.into(),
        pool_id: pgid.split('.').next().unwrap().parse().unwrap(),
        state: state.into(),
        up: up.iter().map(|o| Some(*o)).collect(),
        acting: acting.iter().map(|o| Some(*o)).collect(),
    }
}

/// The record after holding each planned PG (what the command writes before adding them).
fn recorded(map: &UpmapView, plan: &Plan) -> Record {
    let mut r = Record::default();
    for h in &plan.hold {
        h.record_in(&mut r, &map.fsid, map.epoch);
    }
    r
}

/// The OSD map after Ceph applied the holds.
fn with_items(map: &UpmapView, plan: &Plan) -> UpmapView {
    let mut m = map.clone();
    for h in &plan.hold {
        if h.items.is_empty() {
            m.pg_upmap_items.remove(&h.pgid);
        } else {
            m.pg_upmap_items.insert(h.pgid, h.items.clone());
        }
    }
    m
}

const BACKFILLING: &str = "active+remapped+backfilling";
const WAITING: &str = "active+remapped+backfill_wait";

// ---------------------------------------------------------------------------------------------
// On the recordings

/// mClock (Pacific forces osd_max_backfills 1000): all 19 remapped PGs backfill at once, none
/// waits. N=1 holds 18 of them; the mapping of each is the lab's: 2.a [2->3] (replicated: the
/// OSD CRUSH wants that is not acting, to the acting one that is not wanted), 3.2 [1->3] and
/// 3.4 [0->3] (EC: position by position).
#[test]
fn mclock_rebalance_n1_holds_all_but_one() {
    let pgs = pgs_of("20-rebalance");
    let map = map_of("20-rebalance");
    let p = plan(&pgs, &map, &Record::default(), 1, 0.0);
    assert_eq!(p.refusal, None);
    assert_eq!((p.backfilling, p.held), (19, 0));
    assert_eq!(p.hold.len(), 18);
    assert_eq!(p.backfilling_after, 1);
    assert!(p.release.is_empty() && p.refused.is_empty());
    let by: BTreeMap<PgId, &PlannedHold> = p.hold.iter().map(|h| (h.pgid, h)).collect();
    assert_eq!(by[&pg("2.a")].items, items(&[(2, 3)]));
    assert_eq!(by[&pg("3.2")].items, items(&[(1, 3)]));
    assert_eq!(by[&pg("3.4")].items, items(&[(0, 3)]));
    // The one left to backfill is the last by id (all equal otherwise).
    let left: Vec<&str> = pgs
        .iter()
        .filter(|p| backfills(p))
        .map(|p| p.pgid.as_str())
        .filter(|id| !by.contains_key(&pg(id)))
        .collect();
    assert_eq!(left, ["3.5"]);
    // What the lab showed (30-hold): with 2.a [2->3] and 3.2 [1->3], both active+clean with up
    // = acting = the old acting set.
    let after = pgs_of("30-hold");
    for id in ["2.a", "3.2"] {
        let before = pgs.iter().find(|p| p.pgid == id).unwrap();
        let now = after.iter().find(|p| p.pgid == id).unwrap();
        assert_eq!(now.state, "active+clean", "{id}");
        assert_eq!(now.up, before.acting, "{id}");
        assert_eq!(now.acting, before.acting, "{id}");
    }
}

/// wpq, osd_max_backfills 1: 16 wait, 3 backfill. N=3 holds exactly the 16 waiting; N=1 the 16
/// waiting and 2 of those backfilling; N=19 or more holds nothing.
#[test]
fn wpq_rebalance_holds_the_waiting_first() {
    let pgs = pgs_of("90-wpq-rebalance");
    let map = map_of("90-wpq-rebalance");
    let none = Record::default();
    let p3 = plan(&pgs, &map, &none, 3, 0.0);
    assert_eq!(
        (p3.backfilling, p3.hold.len(), p3.backfilling_after),
        (19, 16, 3)
    );
    assert!(p3.hold.iter().all(|h| h.state == WAITING));
    let p1 = plan(&pgs, &map, &none, 1, 0.0);
    assert_eq!(p1.hold.len(), 18);
    assert_eq!(p1.hold.iter().filter(|h| h.state == BACKFILLING).count(), 2);
    // The waiting ones come first in the plan (held first if the command stops half way).
    let first_running = p1.hold.iter().position(|h| h.state == BACKFILLING).unwrap();
    assert_eq!(first_running, 16);
    for n in [19, 20, 100] {
        let p = plan(&pgs, &map, &none, n, 0.0);
        assert!(p.hold.is_empty() && p.release.is_empty(), "{n}");
        assert_eq!(p.backfilling_after, 19);
    }
    // The lab: 2.a and 3.4 held from this listing went active+clean (91-wpq-hold) with the
    // planned items, and 2.a went back to backfill_wait once released (92-wpq-release).
    let by: BTreeMap<PgId, &PlannedHold> = p1.hold.iter().map(|h| (h.pgid, h)).collect();
    let held = map_of("91-wpq-hold");
    assert_eq!(by[&pg("2.a")].items, held.pg_upmap_items[&pg("2.a")]);
    assert_eq!(by[&pg("3.4")].items, held.pg_upmap_items[&pg("3.4")]);
    let find = |step: &str, id: &str| {
        pgs_of(step)
            .into_iter()
            .find(|p| p.pgid == id)
            .unwrap()
            .state
    };
    assert_eq!(find("91-wpq-hold", "2.a"), "active+clean");
    assert_eq!(find("91-wpq-hold", "3.4"), "active+clean");
    assert_eq!(find("92-wpq-release", "2.a"), WAITING);
}

/// Held PGs count as held, not as backfilling; with room again the oldest are released.
#[test]
fn release_the_oldest_when_there_is_room() {
    let pgs = pgs_of("90-wpq-rebalance");
    let map = map_of("90-wpq-rebalance");
    let first = plan(&pgs, &map, &Record::default(), 3, 0.0);
    let record = recorded(&map, &first);
    let map2 = with_items(&map, &first);
    // As Ceph shows it: the held PGs active+clean, up = acting.
    let pgs2: Vec<PgBrief> = pgs
        .iter()
        .map(|p| {
            if record.held.contains_key(&pg(&p.pgid)) {
                PgBrief {
                    state: "active+clean".into(),
                    up: p.acting.clone(),
                    ..p.clone()
                }
            } else {
                p.clone()
            }
        })
        .collect();
    let steady = plan(&pgs2, &map2, &record, 3, 0.0);
    assert_eq!((steady.backfilling, steady.held), (3, 16));
    assert!(steady.hold.is_empty() && steady.release.is_empty());
    // Two of the three finish: two released, the oldest first.
    let mut done = 0;
    let pgs3: Vec<PgBrief> = pgs2
        .iter()
        .map(|p| {
            if p.state == BACKFILLING && done < 2 {
                done += 1;
                PgBrief {
                    state: "active+clean".into(),
                    up: p.up.clone(),
                    acting: p.up.clone(),
                    ..p.clone()
                }
            } else {
                p.clone()
            }
        })
        .collect();
    let next = plan(&pgs3, &map2, &record, 3, 0.0);
    assert_eq!(next.release, record.oldest_first()[..2].to_vec());
    assert_eq!(next.backfilling_after, 3);
    // N raised to 10: nine more released at once.
    assert_eq!(plan(&pgs3, &map2, &record, 10, 0.0).release.len(), 9);
    // N lowered below what runs: nothing released, the running one held is not ours to undo.
    let lower = plan(&pgs2, &map2, &record, 1, 0.0);
    assert_eq!((lower.hold.len(), lower.release.len()), (2, 0));
    assert!(lower.hold.iter().all(|h| h.state == BACKFILLING));
}

/// Rule 2 on the lab: the balancer's item 2.1e [3->2] left 2.1e
/// `active+recovering+undersized+remapped` (10-logrecovery): the lever is refused and releases
/// everything it holds.
#[test]
fn nothing_is_held_while_a_pg_is_undersized() {
    let pgs = pgs_of("10-logrecovery");
    let map = map_of("10-logrecovery");
    let p = plan(&pgs, &map, &Record::default(), 1, 0.0);
    assert_eq!(p.refusal, Some(LeverRefusal::Undersized { pgs: 1 }));
    assert!(p.hold.is_empty());
    assert_eq!(
        p.refusal.unwrap().to_string(),
        "1 PGs undersized: redundancy first, nothing is held"
    );
    // The undersized fixture (osd.2 down, noout): 19 undersized; what we hold goes back.
    let und = pgs::parse(&fixture("undersized/ceph_pg_dump_pgs_brief.json")).unwrap();
    let mut m = map_of("90-wpq-rebalance");
    let mut record = Record::default();
    record.hold(&m.fsid, pg("2.a"), items(&[(2, 3)]), 1, vec![], vec![]);
    m.pg_upmap_items.insert(pg("2.a"), items(&[(2, 3)]));
    let p = plan(&und, &m, &record, 5, 0.0);
    assert_eq!(p.refusal, Some(LeverRefusal::Undersized { pgs: 19 }));
    assert_eq!(p.release, vec![pg("2.a")]);
    assert!(p.hold.is_empty());
}

/// Rule 3 on the lab: `require_min_compat_client jewel` (64-jewel; Ceph then refuses
/// pg-upmap-items with EPERM, see 64-jewel.ceph_osd_pg-upmap-items_2.b_1_3.txt.err).
#[test]
fn below_luminous_the_lever_is_skipped_with_the_reason() {
    let pgs = pgs_of("90-wpq-rebalance");
    let map = map_of("64-jewel");
    let p = plan(&pgs, &map, &Record::default(), 1, 0.0);
    let r = p.refusal.clone().unwrap();
    assert_eq!(
        r,
        LeverRefusal::CompatClient {
            require_min_compat_client: "jewel".into()
        }
    );
    assert!(r.to_string().contains("below luminous"), "{r}");
    assert!(p.hold.is_empty());
    let err = String::from_utf8(fixture(
        "upmap/64-jewel.ceph_osd_pg-upmap-items_2.b_1_3.txt.err",
    ))
    .unwrap();
    assert!(err.contains("min_compat_client jewel < luminous"), "{err}");
    for (name, refused) in [
        ("luminous", false),
        ("mimic", false),
        ("reef", false),
        ("kraken", true),
        ("", true),
        ("zebra", true),
    ] {
        let mut m = map.clone();
        m.require_min_compat_client = name.into();
        assert_eq!(
            lever_refusal(&pgs, &m, &Record::default()).is_some(),
            refused,
            "{name}"
        );
    }
    let mut m = map.clone();
    m.require_min_compat_client = "zebra".into();
    let why = lever_refusal(&pgs, &m, &Record::default())
        .unwrap()
        .to_string();
    assert!(why.contains("does not know"), "{why}");
    m.require_min_compat_client = String::new();
    let why = lever_refusal(&pgs, &m, &Record::default())
        .unwrap()
        .to_string();
    assert!(why.contains("pre-luminous"), "{why}");
}

/// Rule 4: the balancer's items on PGs that do not backfill (2.1c, 2.1d [3->2] in
/// 90-wpq-rebalance) are never touched; a PG that backfills with someone's items is held over
/// them (recorded, put back on release) when they explain its up set, refused when they do not;
/// a whole-set `pg_upmap` is refused; a PG whose items we did not add is never released.
#[test]
fn upmap_items_that_are_not_ours_are_held_over_and_put_back() {
    let pgs = pgs_of("90-wpq-rebalance");
    let mut map = map_of("90-wpq-rebalance");
    let p = plan(&pgs, &map, &Record::default(), 0, 0.0);
    assert_eq!(p.hold.len(), 19);
    assert!(p
        .hold
        .iter()
        .all(|h| h.pgid != pg("2.1c") && h.pgid != pg("2.1d")));
    // 2.a (up [1,0,2], acting [1,0,3]) with someone's [3->2]: CRUSH's own set is [1,0,3], the
    // acting set: their item is what moves it, so the hold takes it off. 2.2 (up [1,0,2]) with
    // [2->5]: an item that cannot have given that up set (its source is in it), refused. 2.9 with a pg_upmap: refused.
    map.pg_upmap_items.insert(pg("2.a"), items(&[(3, 2)]));
    map.pg_upmap_items.insert(pg("2.2"), items(&[(2, 5)]));
    map.pg_upmap.insert(pg("2.9"));
    let p = plan(&pgs, &map, &Record::default(), 0, 0.0);
    let refused: BTreeMap<PgId, &PgRefusal> = p.refused.iter().map(|(id, r)| (*id, r)).collect();
    assert_eq!(
        refused[&pg("2.2")].to_string(),
        "has upmap items that are not ours ([2->5]) and CRUSH's own set cannot be told from them: not touched"
    );
    assert_eq!(*refused[&pg("2.9")], PgRefusal::PgUpmap);
    assert_eq!(p.hold.len(), 17);
    let a = p.hold.iter().find(|h| h.pgid == pg("2.a")).unwrap();
    assert_eq!(
        (a.items.clone(), a.before.clone()),
        (vec![], items(&[(3, 2)]))
    );
    assert_eq!(a.command(), "ceph osd rm-pg-upmap-items 2.a");
    assert!(a
        .items_words()
        .contains("[3->2] (not ours, what moves it) taken off, put back on release"));
    // Recorded first, then applied: ours (no entry is what ours looks like); released by
    // putting theirs back; once back, forgotten.
    let record = recorded(&map, &p);
    let held = with_items(&map, &p);
    assert!(!held.pg_upmap_items.contains_key(&pg("2.a")));
    let u = undo(&held, &record, None);
    assert!(u.remove.contains(&pg("2.a")) && u.forget.is_empty());
    assert_eq!(
        record.release_command(pg("2.a")),
        "ceph osd pg-upmap-items 2.a 3 2"
    );
    assert_eq!(
        record.restores(&u.remove),
        BTreeMap::from([(pg("2.a"), items(&[(3, 2)]))])
    );
    // A crash before the hold's command, or after the put-back: theirs in place, forgotten.
    let u = undo(&map, &record, None);
    assert!(!u.remove.contains(&pg("2.a")));
    assert!(u.forget.contains(&(
        pg("2.a"),
        Forget::Restored {
            items: items(&[(3, 2)])
        }
    )));
    // Nothing of theirs in an undo, even with everything released.
    let u = undo(&map, &Record::default(), None);
    assert!(u.remove.is_empty() && u.forget.is_empty());
}

/// Someone's items that leave part of the move: replaced by items that map CRUSH's own set to
/// the acting set.
#[test]
fn items_over_someone_elses_map_from_crushs_own_set() {
    let rep = one(1, upmap::PoolKind::Replicated);
    let ec = one(1, upmap::PoolKind::Erasure);
    let over = |map: &UpmapView, up: &[u32], acting: &[u32], theirs: &[(u32, u32)]| {
        let mut m = map.clone();
        m.pg_upmap_items.insert(pg("1.0"), items(theirs));
        hold_items(&brief("1.0", WAITING, up, acting), &m, &Record::default())
            .map(|h| (h.items, h.before))
    };
    // CRUSH gives [1,0,4]; theirs put 2 for 4; the data is on 3.
    assert_eq!(
        over(&rep, &[1, 0, 2], &[1, 0, 3], &[(4, 2)]),
        Ok((items(&[(4, 3)]), items(&[(4, 2)])))
    );
    // Two of theirs, one still right: CRUSH [5,0,4] -> theirs [1,0,2]; data on [1,0,3].
    assert_eq!(
        over(&rep, &[1, 0, 2], &[1, 0, 3], &[(5, 1), (4, 2)]),
        Ok((items(&[(5, 1), (4, 3)]), items(&[(5, 1), (4, 2)])))
    );
    // EC, position by position: CRUSH [4,2,0], theirs 4->1, data on [3,2,0].
    assert_eq!(
        over(&ec, &[1, 2, 0], &[3, 2, 0], &[(4, 1)]),
        Ok((items(&[(4, 3)]), items(&[(4, 1)])))
    );
    // The lab's 3.4 (71-held-n1): up [1,2,0], acting [1,2,3], items [3->0]: CRUSH [1,2,3].
    assert_eq!(
        over(&ec, &[1, 2, 0], &[1, 2, 3], &[(3, 0)]),
        Ok((vec![], items(&[(3, 0)])))
    );
}

/// 71-held-n1: 10 PGs held by hand (ours) beside the balancer's 2.1c and 2.1d; the undo removes
/// exactly the 10.
#[test]
fn the_undo_removes_exactly_ours() {
    let map = map_of("71-held-n1");
    let mut record = Record::default();
    for (id, its) in &map.pg_upmap_items {
        if *id != pg("2.1c") && *id != pg("2.1d") {
            record.hold(&map.fsid, *id, its.clone(), map.epoch, vec![], vec![]);
        }
    }
    assert_eq!(record.held.len(), 10);
    // 2.18 was in our list but had finished before its command ran: not in the map. Record it
    // as the command would have (before adding).
    record.hold(
        &map.fsid,
        pg("2.18"),
        items(&[(3, 0)]),
        map.epoch,
        vec![],
        vec![],
    );
    let u = undo(&map, &record, None);
    assert_eq!(u.remove.len(), 10);
    assert!(!u.remove.contains(&pg("2.1c")) && !u.remove.contains(&pg("2.1d")));
    assert_eq!(u.forget, vec![(pg("2.18"), Forget::Gone)]);
    assert_eq!(u.left, 0);
    // After the lab's release (72-released-n1): only the balancer's left, ours all gone.
    let after = map_of("72-released-n1");
    assert_eq!(
        after.pg_upmap_items.keys().copied().collect::<Vec<_>>(),
        vec![pg("2.1c"), pg("2.1d")]
    );
    let again = undo(&after, &record, None);
    assert!(again.remove.is_empty());
    assert_eq!(again.forget.len(), 11);
    // Release a few at a time, oldest first.
    let three = undo(&map, &record, Some(3));
    assert_eq!(three.remove, record.oldest_first()[..3].to_vec());
    assert_eq!(three.left, 7);
}

#[test]
fn changed_items_are_forgotten_and_left_alone() {
    let mut map = map_of("91-wpq-hold");
    let mut record = Record::default();
    record.hold(&map.fsid, pg("2.a"), items(&[(2, 3)]), 1, vec![], vec![]);
    record.hold(&map.fsid, pg("3.4"), items(&[(0, 3)]), 1, vec![], vec![]);
    map.pg_upmap_items
        .insert(pg("3.4"), items(&[(0, 3), (1, 2)]));
    let u = undo(&map, &record, None);
    assert_eq!(u.remove, vec![pg("2.a")]);
    assert_eq!(
        u.forget,
        vec![(
            pg("3.4"),
            Forget::Changed {
                now: items(&[(0, 3), (1, 2)])
            }
        )]
    );
    assert!(u.forget[0].1.to_string().contains("left as they are"));
    // The same in a plan: a changed one is not ours, neither counted as held nor released.
    let p = plan(&pgs_of("91-wpq-hold"), &map, &record, 100, 0.0);
    assert_eq!(p.held, 1);
    assert_eq!(p.release, vec![pg("2.a")]);
    assert_eq!(p.forget.len(), 1);
}

#[test]
fn a_record_of_another_cluster_is_never_acted_on() {
    let map = map_of("91-wpq-hold");
    let mut record = Record::default();
    record.hold("other-fsid", pg("2.a"), items(&[(2, 3)]), 1, vec![], vec![]);
    let u = undo(&map, &record, None);
    assert!(u.remove.is_empty() && u.forget.is_empty());
    assert_eq!(u.other_cluster.as_deref(), Some("other-fsid"));
    let p = plan(&pgs_of("91-wpq-hold"), &map, &record, 0, 0.0);
    assert!(matches!(p.refusal, Some(LeverRefusal::OtherCluster { .. })));
    assert!(p.hold.is_empty() && p.release.is_empty() && p.forget.is_empty());
}

// ---------------------------------------------------------------------------------------------
// What no longer exists (issue 33): the monitors refuse any command on it (the lab's
// 50-refuse: ENOENT, exit 2) and drop its upmap entries themselves (`OSDMap::check_pg_upmaps`);
// the record drops or trims it without a command, and no entry stops the others' releases.

/// The lab's ten holds at N = 1 (71-held-n1; the balancer's 2.1c and 2.1d are not ours),
/// recorded from the map before.
fn ten_held() -> (UpmapView, Record) {
    let map = map_of("71-held-n1");
    let mut record = Record::default();
    for (id, its) in &map.pg_upmap_items {
        if *id != pg("2.1c") && *id != pg("2.1d") {
            record.hold(&map.fsid, *id, its.clone(), map.epoch - 1, vec![], vec![]);
        }
    }
    (map, record)
}

fn forgotten(ids: &[&str], why: Forget) -> Vec<(PgId, Forget)> {
    ids.iter().map(|id| (pg(id), why.clone())).collect()
}

#[test]
fn held_pgs_that_no_longer_exist_are_forgotten_without_a_command() {
    let (map, record) = ten_held();
    let ours = ["2.7", "2.9", "2.11", "2.1b"].map(pg).to_vec();
    let pool3 = ["3.0", "3.1", "3.2", "3.3", "3.4", "3.5"];
    // Pool 3 (ec-test) deleted: the monitors drop its PGs' upmap entries with it.
    let mut deleted = map.clone();
    deleted.pools.remove(&3);
    deleted.pg_upmap_items.retain(|id, _| id.pool != 3);
    let u = undo(&deleted, &record, None);
    assert_eq!(u.forget, forgotten(&pool3, Forget::PoolGone));
    assert_eq!(u.remove, ours);
    // The pool comes first: a map that still listed the entries would not make them ours.
    let mut listed = map.clone();
    listed.pools.remove(&3);
    assert_eq!(
        undo(&listed, &record, None).forget,
        forgotten(&pool3, Forget::PoolGone)
    );
    // pg_num 8 -> 2: 3.2 to 3.5 merged away (their entries still listed, as until the
    // monitors' next map); 3.0 and 3.1 are ours as before.
    let mut merged = map.clone();
    merged.pools.get_mut(&3).unwrap().pg_num = 2;
    let u = undo(&merged, &record, None);
    assert_eq!(
        u.forget,
        forgotten(&pool3[2..], Forget::MergedAway { pg_num: 2 })
    );
    let mut six = ours.clone();
    six.extend([pg("3.0"), pg("3.1")]);
    assert_eq!(u.remove, six);
    // The same in a plan: neither counted as held nor released; the others go, oldest first.
    let p = plan(&pgs_of("71-held-n1"), &merged, &record, 100, 0.0);
    assert_eq!((p.held, &p.forget), (6, &u.forget));
    assert_eq!(p.release, six);
}

/// A PG held over someone else's items keeps theirs to put back on release (rule 4). Theirs
/// that name an OSD purged since cannot go back: the monitors refuse
/// `ceph osd pg-upmap-items 2.b 1 42` (the lab's 50-refuse, `Error ENOENT: osd.42 does not
/// exist`) every time, and would drop such an item from their map anyway. They leave the
/// record, the rest goes back, and with none left the release removes the entry (which the
/// lab's `rm-pg-upmap-items 2.b` did, exit 0, even with no entry there).
#[test]
fn saved_items_naming_an_osd_that_is_gone_are_not_put_back() {
    let mut map = map_of("30-hold");
    map.pg_upmap_items.remove(&pg("2.b"));
    let mut record = Record::default();
    for (id, before) in [
        ("2.b", items(&[(1, 42)])),
        ("2.d", items(&[(3, 0), (1, 42)])),
    ] {
        record.hold(&map.fsid, pg(id), vec![], 1, vec![], vec![]);
        record.held.get_mut(&pg(id)).unwrap().before = before;
    }
    let refused = fixture_str("upmap/_index.tsv")
        .lines()
        .find(|l| l.starts_with("50-refuse.ceph_osd_pg-upmap-items_2.b_osd_42.txt\t"))
        .and_then(|l| l.rsplit('\t').next())
        .map(str::to_string);
    assert_eq!(Some(record.release_command(pg("2.b"))), refused);
    let u = undo(&map, &record, None);
    let osd42 = Trim {
        osds: vec![42],
        dropped: items(&[(1, 42)]),
    };
    assert_eq!(u.trim, vec![(pg("2.b"), osd42.clone()), (pg("2.d"), osd42)]);
    assert_eq!(u.remove, vec![pg("2.b"), pg("2.d")]);
    assert!(u.forget.is_empty());
    record.apply_trims(&u.trim);
    assert_eq!(
        record.release_command(pg("2.b")),
        "ceph osd rm-pg-upmap-items 2.b"
    );
    assert_eq!(record.restore_items(pg("2.d")), items(&[(3, 0)]));
    assert!(undo(&map, &record, None).trim.is_empty(), "trimmed once");
}

/// Releases go oldest first, one at a time: one whose release failed goes after the others,
/// so that a PG the monitors keep refusing never stops the rest.
#[test]
fn a_release_that_failed_goes_after_the_others() {
    let (map, mut record, pgs) = three_held();
    assert_eq!(record.oldest_first(), ["2.9", "2.a", "2.b"].map(pg));
    record.requeue(pg("2.9"));
    assert_eq!(record.oldest_first(), ["2.a", "2.b", "2.9"].map(pg));
    assert_eq!(plan(&pgs, &map, &record, 1, 0.0).release, vec![pg("2.a")]);
    let seq = record.next_seq;
    record.requeue(pg("7.7"));
    assert_eq!(record.next_seq, seq, "not held: nothing to requeue");
}

/// Rule 8: the record is in the enforcer's stored state, read back at a takeover up to 1 MiB:
/// at most MAX_HELD PGs are held, the rest backfill beside the N and are named with why.
#[test]
fn at_most_max_held_pgs_are_held() {
    let mut map = one(2, upmap::PoolKind::Replicated);
    map.pools.get_mut(&2).unwrap().pg_num = 4096;
    let many = MAX_HELD + 50;
    let pgs: Vec<PgBrief> = (0..many)
        .map(|seed| brief(&format!("2.{seed:x}"), WAITING, &[0, 1, 2], &[0, 1, 3]))
        .collect();
    let first = plan(&pgs, &map, &Record::default(), 1, 0.0);
    assert_eq!(first.hold.len(), MAX_HELD);
    assert_eq!(first.refused.len(), 49);
    assert!(first
        .refused
        .iter()
        .all(|(_, r)| *r == PgRefusal::HeldEnough { most: MAX_HELD }));
    // Held, they count: the next step holds none more, and says why for the rest.
    let record = recorded(&map, &first);
    let held = with_items(&map, &first);
    let mut now = pgs.clone();
    for h in &first.hold {
        set_state(&mut now, &h.pgid.to_string(), "active+clean");
    }
    let next = plan(&now, &held, &record, 1, 0.0);
    assert_eq!(
        (next.held, next.hold.len(), next.refused.len()),
        (MAX_HELD, 0, 49)
    );
}

// ---------------------------------------------------------------------------------------------
// Rule 1: states

#[test]
fn only_pgs_waiting_for_backfill_of_misplaced_data_are_held() {
    let map = map_of("90-wpq-rebalance");
    let none = Record::default();
    let up = [1, 0, 2];
    let acting = [1, 0, 3];
    for (state, ok) in [
        (WAITING, true),
        (BACKFILLING, true),
        ("active+remapped+backfill_toofull", true),
        ("active+remapped+backfill_wait+scrubbing+deep", true),
        ("active+remapped+backfill_wait+degraded", false),
        ("active+undersized+degraded+remapped+backfill_wait", false),
        ("active+undersized+remapped+backfilling", false),
        ("active+recovery_wait+remapped+backfill_wait", false),
        ("active+remapped+backfill_wait+forced_backfill", false),
        ("remapped+backfill_wait+peered", false),
        ("active+backfill_wait", false),
        ("active+remapped+backfill_wait+inconsistent", false),
    ] {
        let b = brief("2.a", state, &up, &acting);
        assert!(backfills(&b), "{state}");
        let refusal = pg_refusal_by_state(&b);
        assert_eq!(refusal.is_none(), ok, "{state}: {refusal:?}");
        let p = plan(&[b], &map, &none, 0, 0.0);
        assert_eq!(p.hold.len(), usize::from(ok), "{state}");
        if state.contains("undersized") {
            // The whole lever stands down (rule 2), before any PG is looked at.
            assert_eq!(
                p.refusal,
                Some(LeverRefusal::Undersized { pgs: 1 }),
                "{state}"
            );
        } else {
            assert_eq!(p.refused.len(), usize::from(!ok), "{state}");
        }
    }
    let r = pg_refusal_by_state(&brief(
        "2.a",
        "active+remapped+backfill_wait+degraded",
        &up,
        &acting,
    ));
    assert!(r.unwrap().to_string().contains("redundancy first"));
    // Not backfilling at all: neither held nor listed as refused.
    for state in [
        "active+clean",
        "active+recovering",
        "active+clean+remapped",
        "peering",
    ] {
        let b = brief("2.a", state, &up, &acting);
        assert!(!backfills(&b));
        let p = plan(&[b], &map, &none, 0, 0.0);
        assert!(p.hold.is_empty() && p.refused.is_empty(), "{state}");
        assert_eq!(p.backfilling, 0);
    }
}

/// A held PG that loses redundancy (an OSD of its acting set failed) goes back at once.
#[test]
fn a_held_pg_that_becomes_degraded_is_released_first() {
    let mut map = map_of("90-wpq-rebalance");
    let mut record = Record::default();
    for id in ["2.9", "2.a"] {
        record.hold(&map.fsid, pg(id), items(&[(2, 3)]), 1, vec![], vec![]);
        map.pg_upmap_items.insert(pg(id), items(&[(2, 3)]));
    }
    let pgs = vec![
        brief("2.9", "active+clean", &[1, 0, 3], &[1, 0, 3]),
        brief(
            "2.a",
            "active+recovery_wait+degraded",
            &[1, 0, 3],
            &[1, 0, 3],
        ),
        brief("2.b", BACKFILLING, &[1, 0, 2], &[1, 0, 3]),
    ];
    let p = plan(&pgs, &map, &record, 1, 0.0);
    assert_eq!(p.release, vec![pg("2.a")]);
    assert!(p.hold.is_empty());
}

/// `three_held`, the first of them released at `t` (N = 1) and showing `state` afterwards.
fn three_held_first_released(t: f64, state: &str) -> (UpmapView, Record, Vec<PgBrief>) {
    let (mut map, mut record, mut pgs) = three_held();
    let first = plan(&pgs, &map, &record, 1, t);
    assert_eq!(first.release, vec![pg("2.9")]);
    release_as_applied(&first, t, &mut map, &mut record, &mut pgs, state);
    (map, record, pgs)
}

/// Three PGs held at N = 1 on the lab's map, nothing else backfilling: the record and the map
/// after the holds, and the PGs as `pg dump` shows them (held ones active+clean).
fn three_held() -> (UpmapView, Record, Vec<PgBrief>) {
    let mut map = map_of("90-wpq-rebalance");
    let mut record = Record::default();
    let mut pgs = Vec::new();
    for id in ["2.9", "2.a", "2.b"] {
        record.hold(&map.fsid, pg(id), items(&[(2, 3)]), 1, vec![], vec![]);
        map.pg_upmap_items.insert(pg(id), items(&[(2, 3)]));
        pgs.push(brief(id, "active+clean", &[1, 0, 3], &[1, 0, 3]));
    }
    (map, record, pgs)
}

/// What `backfill hold --apply` does with a plan's releases at `now`: Ceph removes the items,
/// the record notes the release, and the PG shows `state` (up back to what CRUSH wants).
fn release_as_applied(
    plan: &Plan,
    now: f64,
    map: &mut UpmapView,
    record: &mut Record,
    pgs: &mut [PgBrief],
    state: &str,
) {
    record.keep_releasing(&plan.on_the_way);
    for id in &plan.release {
        map.pg_upmap_items.remove(id);
        record.released(*id, now);
        set_state(pgs, &id.to_string(), state);
    }
}

fn set_state(pgs: &mut [PgBrief], id: &str, state: &str) {
    if let Some(p) = pgs.iter_mut().find(|p| p.pgid == id) {
        p.state = state.into();
        p.up = vec![Some(1), Some(0), Some(2)];
    }
}

/// The lab's bug, by hand: a released PG peers for a few seconds before `pg dump` shows it
/// backfill. Counted as not backfilling, the next `backfill hold` would release one more in
/// its place (and hold them both back once they show). It keeps its place until it shows
/// backfill; the next goes once it is done.
#[test]
fn a_released_pg_still_peering_keeps_its_place_and_the_next_waits() {
    let t = 1_000_000.0;
    let (mut map, mut record, mut pgs) = three_held_first_released(t, "remapped+peering");
    assert_eq!(
        record.releasing.keys().collect::<Vec<_>>(),
        vec![&pg("2.9")]
    );
    // Peering: nothing shows backfilling, yet nothing more is released.
    for later in [5.0, 15.0, 45.0] {
        let p = plan(&pgs, &map, &record, 1, t + later);
        assert_eq!(p.backfilling, 0);
        assert_eq!(p.on_the_way, vec![pg("2.9")], "{later}");
        assert!(p.release.is_empty(), "{later}: {:?}", p.release);
    }
    // It backfills: counted as such, still one at a time, and it is not held back.
    set_state(&mut pgs, "2.9", BACKFILLING);
    let p = plan(&pgs, &map, &record, 1, t + 50.0);
    assert_eq!((p.backfilling, p.on_the_way.len()), (1, 0));
    assert!(p.release.is_empty() && p.hold.is_empty());
    assert!(record.keep_releasing(&p.on_the_way));
    assert!(record.releasing.is_empty());
    // Done: the next one goes.
    set_state(&mut pgs, "2.9", "active+clean");
    let p = plan(&pgs, &map, &record, 1, t + 80.0);
    assert_eq!(p.release, vec![pg("2.a")]);
    // A PG that urgently needs its recovery goes back even while another is on its way.
    release_as_applied(&p, t + 80.0, &mut map, &mut record, &mut pgs, "peering");
    set_state(&mut pgs, "2.b", "active+recovery_wait+degraded");
    let p = plan(&pgs, &map, &record, 1, t + 85.0);
    assert_eq!(
        (p.on_the_way.clone(), p.release),
        (vec![pg("2.a")], vec![pg("2.b")])
    );
}

/// The enforcer's pace ([`Plan::spaced`]): with room for three, the one-shot plan releases all
/// three, the enforcer one now and the next a window later, even once the first shows backfill
/// (on the lab every window with two releases in it went far over the bound). A held PG that
/// lost redundancy goes at once, gap or not.
#[test]
fn the_enforcer_releases_one_pg_per_window() {
    let t = 1_000_000.0;
    let (mut map, mut record, mut pgs) = three_held();
    assert_eq!(plan(&pgs, &map, &record, 3, t).release.len(), 3);
    let spaced = |pgs: &[PgBrief], map: &UpmapView, record: &Record, at: f64| {
        plan(pgs, map, record, 3, at).spaced(record, at, RELEASE_GAP)
    };
    let p = spaced(&pgs, &map, &record, t);
    assert_eq!(
        (p.release.clone(), p.backfilling_after),
        (vec![pg("2.9")], 1)
    );
    release_as_applied(&p, t, &mut map, &mut record, &mut pgs, BACKFILLING);
    for later in [1.0, 9.9] {
        let p = spaced(&pgs, &map, &record, t + later);
        assert!(p.release.is_empty(), "{later}: {:?}", p.release);
        assert_eq!(p.backfilling_after, 1, "{later}");
    }
    let p = spaced(&pgs, &map, &record, t + 10.0);
    assert_eq!(p.release, vec![pg("2.a")]);
    release_as_applied(&p, t + 10.0, &mut map, &mut record, &mut pgs, BACKFILLING);
    set_state(&mut pgs, "2.b", "active+recovery_wait+degraded");
    let p = spaced(&pgs, &map, &record, t + 11.0);
    assert_eq!((p.release, p.urgent), (vec![pg("2.b")], 1));
    // A clock set back does not stop the releases for longer than the gap either.
    let (map, record, pgs) = three_held_first_released(t, BACKFILLING);
    assert!(spaced(&pgs, &map, &record, t - 5.0).release.is_empty());
    assert_eq!(
        spaced(&pgs, &map, &record, t - 10.0).release,
        vec![pg("2.a")]
    );
}

/// A slot that opens is mostly a backfill that just finished and re-peers: the enforcer's
/// release waits a window after the room opened, so the two peerings fall in different windows;
/// the room's start is kept across cycles and forgotten once there is none. A PG that lost
/// redundancy goes at once; while p99 is over the aim only such a PG goes.
#[test]
fn a_release_waits_a_window_after_its_room_opened() {
    let t = 1_000_000.0;
    let (map, mut record, mut pgs) = three_held();
    let paced = |pgs: &[PgBrief], record: &mut Record, at: f64| {
        let p = plan(pgs, &map, record, 1, at);
        record.room(p.has_room(), at);
        p.spaced(record, at, RELEASE_GAP)
    };
    let p = paced(&pgs, &mut record, t);
    assert!(p.has_room());
    assert!(p.release.is_empty(), "{:?}", p.release);
    assert_eq!(p.backfilling_after, 0);
    assert!(paced(&pgs, &mut record, t + 9.0).release.is_empty());
    assert_eq!(record.room_since, Some(t));
    assert_eq!(paced(&pgs, &mut record, t + 10.0).release, vec![pg("2.9")]);
    // No room (N = 0 here stands for "all taken"): forgotten, and the next room waits again.
    let p = plan(&pgs, &map, &record, 0, t + 20.0);
    record.room(p.has_room(), t + 20.0);
    assert_eq!(record.room_since, None);
    assert!(paced(&pgs, &mut record, t + 30.0).release.is_empty());
    assert_eq!(paced(&pgs, &mut record, t + 40.0).release, vec![pg("2.9")]);
    // p99 over the aim: that release waits too.
    let p = paced(&pgs, &mut record, t + 40.0).held_back(true);
    assert_eq!((p.release.len(), p.backfilling_after), (0, 0));
    // Urgent: at once, whatever the room or p99.
    set_state(&mut pgs, "2.a", "active+recovery_wait+degraded");
    let p = paced(&pgs, &mut record, t + 41.0).held_back(true);
    assert_eq!((p.release, p.urgent), (vec![pg("2.a")], 1));
}

/// A released PG stuck peering (or gone from `pg dump`) does not stop the releases for good:
/// it keeps its place for 60 s at most.
#[test]
fn a_released_pg_keeps_its_place_for_60_s_at_most() {
    let t = 1_000_000.0;
    let (map, record, mut pgs) = three_held_first_released(t, "remapped+peering");
    assert!(plan(&pgs, &map, &record, 1, t + 59.0).release.is_empty());
    let p = plan(&pgs, &map, &record, 1, t + 60.0);
    assert!(p.on_the_way.is_empty());
    assert_eq!(p.release, vec![pg("2.a")]);
    // A clock set back by more than that does not keep it either.
    assert!(!plan(&pgs, &map, &record, 1, t - 60.0).release.is_empty());
    // No longer in `pg dump` (its pool deleted): not waited for.
    pgs.retain(|p| p.pgid != "2.9");
    assert_eq!(
        plan(&pgs, &map, &record, 1, t + 1.0).release,
        vec![pg("2.a")]
    );
}

#[test]
fn a_released_pg_still_clean_in_a_late_dump_keeps_its_place() {
    let t = 1_000_000.0;
    // `pg dump` lags the OSD map: the released PG still shows as it was while held.
    let (map, record, pgs) = three_held_first_released(t, "active+clean");
    let p = plan(&pgs, &map, &record, 1, t + 2.0);
    assert_eq!(p.on_the_way, vec![pg("2.9")]);
    assert!(p.release.is_empty(), "{:?}", p.release);
    // Still clean 10 s later: it was done (a PG with little to move), the next one goes.
    let p = plan(&pgs, &map, &record, 1, t + 10.0);
    assert!(p.on_the_way.is_empty());
    assert_eq!(p.release, vec![pg("2.a")]);
}

// ---------------------------------------------------------------------------------------------
// Rules 5 and 6: mappings

fn one(pool: u64, kind: upmap::PoolKind) -> UpmapView {
    let mut m = UpmapView {
        epoch: 1,
        fsid: "f".into(),
        require_min_compat_client: "luminous".into(),
        ..UpmapView::default()
    };
    m.pools.insert(
        pool,
        upmap::PoolInfo {
            name: "p".into(),
            kind,
            size: 3,
            min_size: 2,
            pg_num: 32,
        },
    );
    for osd in 0..8 {
        m.osds.insert(
            osd,
            OsdInfo {
                up: true,
                is_in: true,
                weight: 1.0,
            },
        );
    }
    m
}

fn try_hold(map: &UpmapView, up: &[u32], acting: &[u32]) -> Result<Vec<UpmapItem>, PgRefusal> {
    hold_items(&brief("1.0", WAITING, up, acting), map, &Record::default()).map(|h| h.items)
}

#[test]
fn replicated_maps_the_set_and_erasure_the_positions() {
    let rep = one(1, upmap::PoolKind::Replicated);
    let ec = one(1, upmap::PoolKind::Erasure);
    // One OSD replaced.
    assert_eq!(try_hold(&rep, &[1, 0, 2], &[1, 0, 3]), Ok(items(&[(2, 3)])));
    assert_eq!(try_hold(&ec, &[1, 2, 0], &[3, 2, 0]), Ok(items(&[(1, 3)])));
    // Replicated, order differs: the set is what matters (the lab's 2.7: up [3,0,2], acting
    // [0,2,1] -> [3->1], up becomes [1,0,2]: the same OSDs, another primary, no data moved).
    assert_eq!(try_hold(&rep, &[3, 0, 2], &[0, 2, 1]), Ok(items(&[(3, 1)])));
    // Two replaced.
    assert_eq!(
        try_hold(&rep, &[4, 5, 2], &[1, 3, 2]),
        Ok(items(&[(4, 1), (5, 3)]))
    );
    assert_eq!(
        try_hold(&ec, &[4, 5, 2], &[1, 3, 2]),
        Ok(items(&[(4, 1), (5, 3)]))
    );
    // EC: an OSD that moved between positions is a different shard: position by position, and
    // a swap of shards cannot be expressed (Ceph skips a target already in the set).
    assert_eq!(
        try_hold(&ec, &[1, 4, 0], &[4, 2, 0]),
        Err(PgRefusal::Mapping {
            detail: "[1->4, 4->2] on CRUSH's [1, 4, 0] gives [1, 2, 0], not the acting set [4, 2, 0] (Ceph cannot express it)".into()
        })
    );
    let swap = try_hold(&ec, &[1, 2, 0], &[2, 1, 0]);
    assert!(matches!(swap, Err(PgRefusal::Mapping { .. })), "{swap:?}");
    // ... while for a replicated pool the same sets need nothing at all.
    assert_eq!(
        try_hold(&rep, &[1, 2, 0], &[2, 1, 0]),
        Err(PgRefusal::NothingToMap)
    );
    assert_eq!(
        try_hold(&ec, &[1, 2, 0], &[1, 2, 0]),
        Err(PgRefusal::NothingToMap)
    );
    // A chain Ceph applies in order: 1->4 frees 1, then 5->1 may take it.
    assert_eq!(
        try_hold(&ec, &[1, 5, 0], &[4, 1, 0]),
        Ok(items(&[(1, 4), (5, 1)]))
    );
}

#[test]
fn targets_must_be_usable_and_sets_complete() {
    let mut map = one(1, upmap::PoolKind::Replicated);
    map.osds.get_mut(&3).unwrap().weight = 0.0;
    assert_eq!(
        try_hold(&map, &[1, 0, 2], &[1, 0, 3])
            .unwrap_err()
            .to_string(),
        "osd.3 has reweight 0 (Ceph ignores an upmap to it)"
    );
    map.osds.get_mut(&3).unwrap().is_in = false;
    assert_eq!(
        try_hold(&map, &[1, 0, 2], &[1, 0, 3])
            .unwrap_err()
            .to_string(),
        "osd.3 is out"
    );
    map.osds.get_mut(&3).unwrap().up = false;
    assert_eq!(
        try_hold(&map, &[1, 0, 2], &[1, 0, 3])
            .unwrap_err()
            .to_string(),
        "osd.3 is down"
    );
    assert_eq!(
        try_hold(&map, &[1, 0, 2], &[1, 0, 9])
            .unwrap_err()
            .to_string(),
        "osd.9 is not in the OSD map"
    );
    assert!(matches!(
        try_hold(&map, &[1, 0], &[1, 0, 3]),
        Err(PgRefusal::Sets { .. })
    ));
    let mut missing = brief("1.0", WAITING, &[1, 0, 2], &[1, 0, 4]);
    missing.acting[1] = None;
    assert!(matches!(
        hold_items(&missing, &map, &Record::default()),
        Err(PgRefusal::Sets { .. })
    ));
    let other = brief("7.0", WAITING, &[1, 0, 2], &[1, 0, 4]);
    assert_eq!(
        hold_items(&other, &map, &Record::default())
            .unwrap_err()
            .to_string(),
        "pool 7 is not in the OSD map"
    );
    let mut odd = one(1, upmap::PoolKind::Other(2));
    odd.osds = map.osds.clone();
    assert!(matches!(
        try_hold(&odd, &[1, 0, 2], &[1, 0, 4]),
        Err(PgRefusal::Pool { .. })
    ));
}

#[test]
fn apply_upmap_follows_ceph() {
    let mut map = one(1, upmap::PoolKind::Erasure);
    // Ceph's own comment: [[1,2],[2,1]] applied to [0,1,2] gives [0,2,1]? No: 1->2 is skipped
    // (2 exists), then 2->1 is skipped (1 exists): unchanged.
    assert_eq!(
        apply_upmap(&[0, 1, 2], &items(&[(1, 2), (2, 1)]), &map),
        vec![0, 1, 2]
    );
    assert_eq!(
        apply_upmap(&[0, 1, 2], &items(&[(1, 5)]), &map),
        vec![0, 5, 2]
    );
    map.osds.get_mut(&5).unwrap().weight = 0.0;
    assert_eq!(
        apply_upmap(&[0, 1, 2], &items(&[(1, 5)]), &map),
        vec![0, 1, 2]
    );
    assert_eq!(
        apply_upmap(&[0, 1, 2], &items(&[(7, 6)]), &map),
        vec![0, 1, 2]
    );
    assert_eq!(items_text(&items(&[(1, 5), (2, 6)])), "[1->5, 2->6]");
}

// ---------------------------------------------------------------------------------------------
// The balancer

#[test]
fn the_balancer_is_paused_while_holding_and_put_back_as_it_was() {
    let on = BalancerStatus {
        active: true,
        mode: "upmap".into(),
    };
    let off = BalancerStatus {
        active: false,
        mode: "upmap".into(),
    };
    let mut record = Record::default();
    assert_eq!(
        balancer_step(&on, &record, true),
        BalancerStep::Pause {
            remember: Some(on.clone())
        }
    );
    record.balancer = Some(on.clone());
    assert_eq!(balancer_step(&off, &record, true), BalancerStep::Nothing);
    // Turned back on by someone while we hold: paused again, the original kept.
    assert_eq!(
        balancer_step(&on, &record, true),
        BalancerStep::Pause { remember: None }
    );
    assert_eq!(
        balancer_step(&off, &record, false),
        BalancerStep::Restore {
            to: on.clone(),
            set_mode: false,
            turn_on: true
        }
    );
    let crush = BalancerStatus {
        active: false,
        mode: "crush-compat".into(),
    };
    assert_eq!(
        balancer_step(&crush, &record, false),
        BalancerStep::Restore {
            to: on.clone(),
            set_mode: true,
            turn_on: true
        }
    );
    // Off before we came: nothing to pause, nothing to put back.
    let none = Record::default();
    assert_eq!(balancer_step(&off, &none, true), BalancerStep::Nothing);
    assert_eq!(balancer_step(&off, &none, false), BalancerStep::Nothing);
    // Recorded as off (we never paused it): restore leaves it off.
    record.balancer = Some(off.clone());
    assert_eq!(
        balancer_step(&off, &record, false),
        BalancerStep::Restore {
            to: off.clone(),
            set_mode: false,
            turn_on: false
        }
    );
    // The recordings parse into the statuses these steps read.
    let lab_on =
        upmap::balancer_status(&fixture("upmap/20-rebalance.ceph_balancer_status.json")).unwrap();
    assert_eq!(lab_on, on);
}

// ---------------------------------------------------------------------------------------------
// The record file

#[test]
fn the_record_round_trips_and_is_written_atomically() {
    let dir = std::env::temp_dir().join(format!("crb-backfill-record-{}", std::process::id()));
    let path = dir.join("sub").join("held.json");
    assert_eq!(Record::load(&path).unwrap(), Record::default());
    let mut r = Record {
        balancer: Some(BalancerStatus {
            active: true,
            mode: "upmap".into(),
        }),
        ..Record::default()
    };
    r.hold(
        "fsid-1",
        pg("3.1e"),
        items(&[(1, 3)]),
        42,
        vec![Some(1), None],
        vec![Some(3), Some(2)],
    );
    r.hold("fsid-2", pg("2.a"), items(&[(2, 3)]), 43, vec![], vec![]);
    assert_eq!(r.fsid.as_deref(), Some("fsid-1"));
    assert_eq!(r.oldest_first(), vec![pg("3.1e"), pg("2.a")]);
    r.save(&path).unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.contains("\"3.1e\""), "{text}");
    assert!(text.contains("\"from\": 1"), "{text}");
    assert_eq!(Record::load(&path).unwrap(), r);
    assert!(!r.is_empty());
    assert!(Record::default().is_empty());
    // No temporary file left beside it.
    let names: Vec<String> = std::fs::read_dir(path.parent().unwrap())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, vec!["held.json".to_string()]);
    std::fs::write(&path, "{\"version\": 2}").unwrap();
    let e = Record::load(&path).unwrap_err();
    assert!(e.to_string().contains("version 2"), "{e}");
    std::fs::write(&path, "{not json").unwrap();
    let e = Record::load(&path).unwrap_err();
    assert!(matches!(e, RecordError::Parse { .. }), "{e}");
    std::fs::write(&path, r#"{"version":1,"held":{"x":{}}}"#).unwrap();
    assert!(Record::load(&path).is_err());
    // The releases on their way: kept with the record, and left out while there are none, so
    // records written before them and after them read alike.
    assert!(!r.to_json().contains("releasing"));
    assert!(!r.to_json().contains("last_release"));
    r.released(pg("2.a"), 1234.5);
    assert!(!r.held.contains_key(&pg("2.a")));
    r.save(&path).unwrap();
    let loaded = Record::load(&path).unwrap();
    assert_eq!(loaded.releasing.get(&pg("2.a")), Some(&1234.5));
    assert_eq!(loaded.last_release, Some(1234.5));
    std::fs::write(&path, r#"{"version":1,"fsid":"f","held":{},"next_seq":3}"#).unwrap();
    let old = Record::load(&path).unwrap();
    assert!(old.releasing.is_empty() && old.last_release.is_none());
    assert!(old.room_since.is_none() && !r.to_json().contains("room_since"));
    let _ = std::fs::remove_dir_all(&dir);
}

/// The whole cycle on the lab's numbers: hold to N, Ceph applies, release all; the undo leaves
/// the map as before the hold (the balancer's entries untouched).
#[test]
fn hold_then_undo_leaves_the_map_as_it_was() {
    let pgs = pgs_of("90-wpq-rebalance");
    let map = map_of("90-wpq-rebalance");
    let p = plan(&pgs, &map, &Record::default(), 1, 0.0);
    let record = recorded(&map, &p);
    let held = with_items(&map, &p);
    let u = undo(&held, &record, None);
    assert_eq!(u.remove.len(), p.hold.len());
    let mut back = held.clone();
    for id in &u.remove {
        back.pg_upmap_items.remove(id);
    }
    assert_eq!(back.pg_upmap_items, map.pg_upmap_items);
}

/// Fault row 14 (2026-12-06): an OSD purged while PGs were moving onto it. The PG stats lag
/// the OSD map, so for a few seconds PGs still name the purged OSD in their up set; a hold
/// planned from them names it too, and Ceph refuses it (ENOENT `osd.4 does not exist`). Such
/// a PG is refused until its stats catch up; nothing planned names an OSD the map lacks.
#[test]
fn pgs_whose_stats_name_an_osd_gone_from_the_map_are_not_held() {
    let pgs = pgs_of("20-rebalance");
    let mut map = map_of("20-rebalance");
    let before = plan(&pgs, &map, &Record::default(), 1, 0.0);
    let named = |osd: u32| {
        before
            .hold
            .iter()
            .filter(|h| h.items.iter().any(|i| i.from == osd))
            .count()
    };
    let gone = (0..8).max_by_key(|o| named(*o)).unwrap();
    assert!(
        named(gone) > 0,
        "the fixture holds PGs that name osd.{gone}"
    );
    map.osds.remove(&gone);
    let p = plan(&pgs, &map, &Record::default(), 1, 0.0);
    for h in &p.hold {
        for i in &h.items {
            assert!(
                map.osds.contains_key(&i.from) && map.osds.contains_key(&i.to),
                "{h:?}"
            );
        }
    }
    let refused: Vec<&PgId> = p
        .refused
        .iter()
        .filter(|(_, r)| matches!(r, PgRefusal::Sets { detail } if detail.contains(&format!("names osd.{gone}, which is not in the OSD map"))))
        .map(|(id, _)| id)
        .collect();
    assert!(!refused.is_empty(), "{:?}", p.refused);
}
