//! What is on the cluster that the enforcer could have set but has no record of setting: the
//! ladder's pause flags in the OSD map, its lever keys in the config database's `osd` section,
//! and the backfill lever's kind of change: `pg_upmap_items` entries and a mgr balancer that is
//! off. Without a record it cannot tell an operator's deliberate setting (or the balancer's own
//! entries) from one an earlier enforcer left behind (a lost state file or lease object), so it
//! names them (one decision-log line at start and at every takeover,
//! `ceph_recovery_budget_unowned_settings`, `status`) and never touches them. Pure.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use super::ctx::Ctx;
use super::event::{DecisionEvent, DecisionRecord};
use super::observation::Observation;
use super::pause::foreign_flags;
use super::policy::Policy;
use super::state::EnforcerState;
use super::types::Time;
use crate::backfill::Record;
use crate::ceph::parse::upmap::{items_text, BalancerStatus, UpmapView};

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum UnownedKind {
    /// An OSD map flag (`nobackfill`, `norecover`).
    Flag,
    /// A key set in the config database's `osd` section.
    Config,
    /// `pg_upmap_items` entries of the OSD map (one item for all: a balancer keeps hundreds).
    UpmapItems,
    /// The mgr balancer, off.
    BalancerOff,
}

impl UnownedKind {
    /// The `kind` label of `ceph_recovery_budget_unowned_settings`.
    pub fn as_str(self) -> &'static str {
        match self {
            UnownedKind::Flag => "flag",
            UnownedKind::Config => "config",
            UnownedKind::UpmapItems => "upmap_items",
            UnownedKind::BalancerOff => "balancer_off",
        }
    }
}

/// One setting found without a record.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct Unowned {
    pub kind: UnownedKind,
    pub name: String,
    /// The configured value; `None` for a flag. The upmap entries: how many, and the first
    /// few; the balancer: its mode.
    pub value: Option<String>,
    /// The upmap entries: how many PGs have one (the metric's value; 1 for the others).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub count: Option<usize>,
}

impl Unowned {
    /// "nobackfill flag", "osd_mclock_profile=high_client_ops", "pg_upmap_items=2 PGs: 2.b
    /// [3->0], 2.1e [3->2]", "balancer=off (mode upmap)"
    pub fn describe(&self) -> String {
        match (&self.kind, &self.value) {
            (UnownedKind::Flag, _) | (_, None) => format!("{} flag", self.name),
            (_, Some(v)) => format!("{}={v}", self.name),
        }
    }
}

/// The PGs named in a line, the first in the map's order; the count says how many there are in
/// all.
pub const PGS_NAMED: usize = 8;

/// The backfill lever's kind of change without a record: every `pg_upmap_items` entry of the
/// OSD map that the record does not hold with those exact items (the balancer's, an
/// operator's, or ours from a lost record), as one item; and the mgr balancer when it is off
/// and the record does not say the lever paused it. `balancer` `None`: not read.
pub fn backfill(
    map: &UpmapView,
    balancer: Option<&BalancerStatus>,
    record: &Record,
) -> Vec<Unowned> {
    let mut out = Vec::new();
    let foreign: Vec<String> = map
        .pg_upmap_items
        .iter()
        .filter(|(id, items)| record.held.get(id).is_none_or(|h| h.items != **items))
        .map(|(id, items)| format!("{id} {}", items_text(items)))
        .collect();
    if !foreign.is_empty() {
        let more = if foreign.len() > PGS_NAMED {
            ", ..."
        } else {
            ""
        };
        out.push(Unowned {
            kind: UnownedKind::UpmapItems,
            name: "pg_upmap_items".into(),
            value: Some(format!(
                "{} PGs: {}{more}",
                foreign.len(),
                foreign[..foreign.len().min(PGS_NAMED)].join(", ")
            )),
            count: Some(foreign.len()),
        });
    }
    if let Some(b) = balancer.filter(|b| !b.active && record.balancer.is_none()) {
        out.push(Unowned {
            kind: UnownedKind::BalancerOff,
            name: "balancer".into(),
            value: Some(format!("off (mode {})", b.mode)),
            count: None,
        });
    }
    out
}

/// The pause flags among the OSD map's `flags` that the state does not list as set by the
/// enforcer.
pub fn flags(osd_flags: &BTreeSet<String>, state: &EnforcerState) -> Vec<Unowned> {
    foreign_flags(Some(osd_flags), &state.flags_set)
        .into_iter()
        .map(|name| Unowned {
            kind: UnownedKind::Flag,
            name,
            value: None,
            count: None,
        })
        .collect()
}

/// The lever keys set in the config database that the state does not record as the
/// enforcer's: neither an original it keeps (it changed the key in this episode) nor a value it
/// holds. Observe mode only simulated its episode: nothing of it is on the cluster.
pub fn config(
    configured: &BTreeMap<String, Option<String>>,
    state: &EnforcerState,
) -> Vec<Unowned> {
    let simulated = state.applied.as_ref().is_some_and(|a| a.simulated);
    let ours = |key: &str| {
        !simulated
            && (state.original.contains_key(key)
                || state
                    .applied
                    .as_ref()
                    .is_some_and(|a| a.values.contains_key(key)))
    };
    configured
        .iter()
        .filter_map(|(k, v)| Some((k, v.as_ref()?)))
        .filter(|(k, _)| !ours(k))
        .map(|(k, v)| Unowned {
            kind: UnownedKind::Config,
            name: k.clone(),
            value: Some(v.clone()),
            count: None,
        })
        .collect()
}

/// The list again from what a cycle read (`obs`), judged against the state the cycle started
/// from (what it read was on the cluster before the cycle acted). A part not read this cycle
/// (the flags or the config database are read only while recovery runs or the enforcer holds
/// something; the OSD map's upmap entries and the balancer only while the backfill lever may
/// act, and otherwise at start and takeover) stays as it was.
pub fn refresh(prev: &[Unowned], obs: &Observation, state: &EnforcerState) -> Vec<Unowned> {
    let kept = |kind: UnownedKind| prev.iter().filter(move |u| u.kind == kind).cloned();
    let mut out: Vec<Unowned> = match &obs.osd_flags {
        Some(f) => flags(f, state),
        None => kept(UnownedKind::Flag).collect(),
    };
    if obs.configured_known {
        out.extend(config(&obs.configured, state));
    } else {
        out.extend(kept(UnownedKind::Config));
    }
    match &obs.backfill {
        Some(Ok(view)) => {
            let balancer = view.balancer.as_ref().ok().and_then(Option::as_ref);
            let found = backfill(&view.map, balancer, &state.backfill);
            out.extend(
                found
                    .iter()
                    .filter(|u| u.kind == UnownedKind::UpmapItems)
                    .cloned(),
            );
            match &view.balancer {
                Ok(_) => out.extend(
                    found
                        .into_iter()
                        .filter(|u| u.kind == UnownedKind::BalancerOff),
                ),
                Err(_) => out.extend(kept(UnownedKind::BalancerOff)),
            }
        }
        _ => {
            out.extend(kept(UnownedKind::UpmapItems));
            out.extend(kept(UnownedKind::BalancerOff));
        }
    }
    out
}

/// What START and TAKEOVER read to name what has no record: each read, or why it failed;
/// `None` for a read not made (the balancer in observe mode: its status needs the enforcer's
/// mgr grant).
pub struct Reads {
    pub osd_flags: Result<BTreeSet<String>, String>,
    pub configured: Result<BTreeMap<String, Option<String>>, String>,
    pub upmap: Option<Result<UpmapView, String>>,
    pub balancer: Option<Result<Option<BalancerStatus>, String>>,
}

/// What START (or TAKEOVER) found: the list, the one decision-log line naming it (none when
/// nothing was found), and a warning for each read that failed (the list then fills in from the
/// cycles).
pub fn at_start(
    policy: &Policy,
    reads: &Reads,
    state: &EnforcerState,
    now: Time,
) -> (Vec<Unowned>, Option<DecisionRecord>, Vec<String>) {
    let mut found = Vec::new();
    let mut warnings = Vec::new();
    let later = "the list of settings found without a record (ceph_recovery_budget_unowned_settings) fills in when a cycle reads them";
    match &reads.osd_flags {
        Ok(f) => found.extend(flags(f, state)),
        Err(e) => warnings.push(format!(
            "START: cannot read the OSD map flags (ceph osd dump): {e}; {later}"
        )),
    }
    match &reads.configured {
        Ok(c) => found.extend(config(c, state)),
        Err(e) => warnings.push(format!(
            "START: cannot read the configured values (ceph config dump): {e}; {later}"
        )),
    }
    let balancer = match &reads.balancer {
        Some(Ok(b)) => b.as_ref(),
        Some(Err(e)) => {
            warnings.push(format!(
                "START: cannot read the mgr balancer's status (ceph balancer status): {e}; {later}"
            ));
            None
        }
        None => None,
    };
    match &reads.upmap {
        Some(Ok(map)) => found.extend(backfill(map, balancer, &state.backfill)),
        Some(Err(e)) => warnings.push(format!(
            "START: cannot read the OSD map's upmap entries (ceph osd dump): {e}; {later}"
        )),
        None => {}
    }
    let record = (!found.is_empty()).then(|| {
        let names: Vec<String> = found.iter().map(Unowned::describe).collect();
        let mut by_hand = vec!["ceph osd unset FLAG; ceph config rm osd KEY, or set the operator's value"];
        if found.iter().any(|u| u.kind == UnownedKind::UpmapItems) {
            by_hand.push("for upmap entries, `ceph osd dump -f json | jq .pg_upmap_items` lists them all: ours are those a record of the enforcer lists with these items, the others the balancer's or an operator's; remove one only once you know it is none of theirs (ceph osd rm-pg-upmap-items PGID)");
        }
        if found.iter().any(|u| u.kind == UnownedKind::BalancerOff) {
            by_hand.push("the balancer: ceph balancer on, unless someone turned it off on purpose");
        }
        let obs = Observation::quiet();
        Ctx::new(policy, &obs, now).record(
            DecisionEvent::Unowned,
            format!(
                "UNOWNED: found at start, not set by this enforcer (no record), left as they are: {}. If an earlier enforcer whose state is lost left them, put them back by hand ({})",
                names.join("; "),
                by_hand.join("; ")
            ),
        )
    });
    (found, record, warnings)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::enforcer::state::{ActionKind, Applied};

    fn set(names: &[&str]) -> BTreeSet<String> {
        names.iter().map(|s| s.to_string()).collect()
    }

    fn db(pairs: &[(&str, Option<&str>)]) -> BTreeMap<String, Option<String>> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.map(String::from)))
            .collect()
    }

    fn holding(simulated: bool) -> EnforcerState {
        EnforcerState {
            original: BTreeMap::from([("osd_mclock_profile".into(), Some("balanced".into()))]),
            applied: Some(Applied {
                kind: ActionKind::Throttle,
                values: BTreeMap::from([("osd_mclock_profile".into(), "high_client_ops".into())]),
                at: 0.0,
                simulated,
                verified: false,
                not_taken: Vec::new(),
                effective: None,
            }),
            flags_set: set(&["norecover"]),
            ..EnforcerState::default()
        }
    }

    #[test]
    fn only_pause_flags_and_set_keys_without_a_record_are_named() {
        let state = holding(false);
        let f = flags(
            &set(&["sortbitwise", "noout", "nobackfill", "norecover"]),
            &state,
        );
        assert_eq!(
            f.iter().map(Unowned::describe).collect::<Vec<_>>(),
            ["nobackfill flag"],
            "noout is no pause flag of the ladder; norecover is the enforcer's own"
        );
        let c = config(
            &db(&[
                ("osd_mclock_profile", Some("high_client_ops")),
                ("osd_mclock_scheduler_background_recovery_lim", Some("100")),
                ("osd_max_backfills", None),
            ]),
            &state,
        );
        assert_eq!(
            c.iter().map(Unowned::describe).collect::<Vec<_>>(),
            ["osd_mclock_scheduler_background_recovery_lim=100"],
            "the profile is the enforcer's; an unset key is nothing"
        );
    }

    #[test]
    fn a_lost_state_file_names_everything_and_observe_mode_owns_nothing() {
        let configured = db(&[("osd_mclock_profile", Some("custom"))]);
        for state in [EnforcerState::default(), holding(true)] {
            let c = config(&configured, &state);
            assert_eq!(c.len(), 1, "{state:?}");
            assert_eq!(c[0].kind.as_str(), "config");
        }
    }

    #[test]
    fn the_start_line_names_each_in_one_line_or_says_nothing() {
        let p = Policy::default();
        let (found, record, warnings) = at_start(
            &p,
            &Reads {
                osd_flags: Ok(set(&["nobackfill"])),
                configured: Ok(db(&[("osd_mclock_profile", Some("high_client_ops"))])),
                upmap: None,
                balancer: None,
            },
            &EnforcerState::default(),
            1.0,
        );
        assert_eq!(found.len(), 2);
        assert!(warnings.is_empty());
        let r = record.expect("a line");
        assert_eq!(r.event, "UNOWNED");
        assert!(
            r.message.starts_with("UNOWNED: found at start, not set by this enforcer (no record), left as they are: nobackfill flag; osd_mclock_profile=high_client_ops."),
            "{}",
            r.message
        );
        let (found, record, warnings) = at_start(
            &p,
            &Reads {
                osd_flags: Err("timed out".into()),
                configured: Ok(db(&[("osd_mclock_profile", None)])),
                upmap: None,
                balancer: None,
            },
            &EnforcerState::default(),
            1.0,
        );
        assert!(found.is_empty() && record.is_none());
        assert!(warnings[0].contains("cannot read the OSD map flags (ceph osd dump): timed out"));
    }

    #[test]
    fn a_cycle_refreshes_only_what_it_read() {
        let prev = vec![
            Unowned {
                kind: UnownedKind::Flag,
                name: "nobackfill".into(),
                value: None,
                count: None,
            },
            Unowned {
                kind: UnownedKind::Config,
                name: "osd_max_backfills".into(),
                value: Some("4".into()),
                count: None,
            },
        ];
        let mut obs = Observation::quiet();
        obs.osd_flags = Some(BTreeSet::new());
        obs.configured_known = false;
        let now = refresh(&prev, &obs, &EnforcerState::default());
        assert_eq!(
            now,
            prev[1..],
            "the flag was unset; the config not read: kept"
        );
        obs.osd_flags = None;
        obs.configured_known = true;
        obs.configured = db(&[("osd_max_backfills", None)]);
        assert_eq!(refresh(&prev, &obs, &EnforcerState::default()), prev[..1]);
    }

    fn upmap_fixture(name: &str) -> Vec<u8> {
        let path = format!("{}/tests/fixtures/upmap/{name}", env!("CARGO_MANIFEST_DIR"));
        std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
    }

    fn map(step: &str) -> UpmapView {
        crate::ceph::parse::upmap::view(&upmap_fixture(&format!("{step}.ceph_osd_dump.json")))
            .expect("osd dump")
    }

    fn balancer(step: &str) -> BalancerStatus {
        crate::ceph::parse::upmap::balancer_status(&upmap_fixture(&format!(
            "{step}.ceph_balancer_status.json"
        )))
        .expect("balancer status")
    }

    /// Issue 33.6, on the lab's recorded `osd dump`s: 30-hold has the balancer's 2.b and 2.1e
    /// and the two PGs held by hand, 2.a [2->3] and 3.2 [1->3].
    #[test]
    fn upmap_entries_no_record_covers_are_named_as_one_with_their_count() {
        let held = map("30-hold");
        let names = |r: &Record| {
            backfill(&held, None, r)
                .iter()
                .map(|u| (u.kind.as_str(), u.describe(), u.count))
                .collect::<Vec<_>>()
        };
        // No record (a lost state): all four, ours among them.
        assert_eq!(
            names(&Record::default()),
            [(
                "upmap_items",
                "pg_upmap_items=4 PGs: 2.a [2->3], 2.b [3->0], 2.1e [3->2], 3.2 [1->3]".to_string(),
                Some(4)
            )]
        );
        // A record of the two holds, with their items: only the balancer's two.
        let mut record = Record::default();
        for (id, from, to) in [("2.a", 2, 3), ("3.2", 1, 3)] {
            let id = id.parse().expect("pg id");
            let items = vec![crate::ceph::parse::upmap::UpmapItem { from, to }];
            record.hold(&held.fsid, id, items, held.epoch, vec![], vec![]);
        }
        assert_eq!(
            names(&record),
            [(
                "upmap_items",
                "pg_upmap_items=2 PGs: 2.b [3->0], 2.1e [3->2]".to_string(),
                Some(2)
            )]
        );
        // Recorded with other items: the entry on the cluster is not ours.
        record.held.values_mut().for_each(|h| h.items[0].to = 0);
        assert_eq!(names(&record)[0].2, Some(4));
        // Nothing at all in the healthy lab.
        assert!(backfill(&map("00-healthy"), None, &Record::default()).is_empty());
    }

    #[test]
    fn a_balancer_off_is_named_unless_the_record_says_the_lever_paused_it() {
        let off = balancer("63-balancer-off");
        assert!(!off.active);
        let healthy = map("00-healthy");
        let found = backfill(&healthy, Some(&off), &Record::default());
        assert_eq!(
            found
                .iter()
                .map(|u| (u.kind.as_str(), u.describe()))
                .collect::<Vec<_>>(),
            [("balancer_off", format!("balancer=off (mode {})", off.mode))]
        );
        let paused = Record {
            balancer: Some(balancer("20-rebalance")),
            ..Record::default()
        };
        assert!(backfill(&healthy, Some(&off), &paused).is_empty());
        assert!(backfill(
            &healthy,
            Some(&balancer("20-rebalance")),
            &Record::default()
        )
        .is_empty());
    }

    #[test]
    fn the_start_line_says_how_to_tell_upmap_entries_apart_and_a_cycle_keeps_them_unless_it_read_them(
    ) {
        let reads = Reads {
            osd_flags: Ok(BTreeSet::new()),
            configured: Ok(BTreeMap::new()),
            upmap: Some(Ok(map("30-hold"))),
            balancer: Some(Ok(Some(balancer("63-balancer-off")))),
        };
        let (found, record, warnings) =
            at_start(&Policy::default(), &reads, &EnforcerState::default(), 1.0);
        assert!(warnings.is_empty(), "{warnings:?}");
        assert_eq!(found.len(), 2);
        let line = record.expect("a line").message;
        assert!(line.starts_with("UNOWNED: found at start, not set by this enforcer (no record), left as they are: pg_upmap_items=4 PGs: 2.a [2->3], 2.b [3->0], 2.1e [3->2], 3.2 [1->3]; balancer=off (mode "), "{line}");
        assert!(
            line.contains("`ceph osd dump -f json | jq .pg_upmap_items`"),
            "{line}"
        );
        assert!(line.contains("ceph balancer on"), "{line}");
        // A cycle that did not read the lever's view keeps them; one that did judges again.
        let obs = Observation::quiet();
        assert_eq!(refresh(&found, &obs, &EnforcerState::default()), found);
        let mut obs = Observation::quiet();
        obs.backfill = Some(Ok(crate::enforcer::observation::BackfillView {
            pgs: Vec::new(),
            map: map("00-healthy"),
            balancer: Err("mgr down".into()),
        }));
        let now = refresh(&found, &obs, &EnforcerState::default());
        assert_eq!(
            now.iter().map(|u| u.kind).collect::<Vec<_>>(),
            [UnownedKind::BalancerOff],
            "no entries any more; the balancer not read: kept"
        );
        // A failed read at start is a warning, not a finding.
        let reads = Reads {
            upmap: Some(Err("timed out".into())),
            balancer: None,
            ..reads
        };
        let (found, _, warnings) =
            at_start(&Policy::default(), &reads, &EnforcerState::default(), 1.0);
        assert!(found.is_empty());
        assert!(
            warnings[0]
                .contains("cannot read the OSD map's upmap entries (ceph osd dump): timed out"),
            "{warnings:?}"
        );
    }
}
