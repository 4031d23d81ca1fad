//! What is on the cluster that the enforcer could have set but has no record of setting: the
//! ladder's pause flags in the OSD map, and its lever keys in the config database's `osd`
//! section. Without a record it cannot tell an operator's deliberate setting from one an earlier
//! enforcer left behind (a lost state file), so it names them (one decision-log line at start,
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

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum UnownedKind {
    /// An OSD map flag (`nobackfill`, `norecover`).
    Flag,
    /// A key set in the config database's `osd` section.
    Config,
}

impl UnownedKind {
    /// The `kind` label of `ceph_recovery_budget_unowned_settings`.
    pub fn as_str(self) -> &'static str {
        match self {
            UnownedKind::Flag => "flag",
            UnownedKind::Config => "config",
        }
    }
}

/// One setting found without a record.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct Unowned {
    pub kind: UnownedKind,
    pub name: String,
    /// The configured value; `None` for a flag.
    pub value: Option<String>,
}

impl Unowned {
    /// "nobackfill flag", "osd_mclock_profile=high_client_ops"
    pub fn describe(&self) -> String {
        match (&self.kind, &self.value) {
            (UnownedKind::Flag, _) | (_, None) => format!("{} flag", self.name),
            (UnownedKind::Config, Some(v)) => format!("{}={v}", self.name),
        }
    }
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
        })
        .collect()
}

/// The list again from what a cycle read (`obs`), judged against the state the cycle started
/// from (what it read was on the cluster before the cycle acted). A part not read this cycle
/// (the flags or the config database are read only while recovery runs or the enforcer holds
/// something) stays as it was.
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
    out
}

/// What START found: the list, the one decision-log line naming it (none when nothing was
/// found), and a warning for each read that failed (the list then fills in from the cycles).
pub fn at_start(
    policy: &Policy,
    osd_flags: &Result<BTreeSet<String>, String>,
    configured: &Result<BTreeMap<String, Option<String>>, String>,
    state: &EnforcerState,
    now: Time,
) -> (Vec<Unowned>, Option<DecisionRecord>, Vec<String>) {
    let mut found = Vec::new();
    let mut warnings = Vec::new();
    let later = "the list of settings found without a record (ceph_recovery_budget_unowned_settings) fills in when a cycle reads them";
    match osd_flags {
        Ok(f) => found.extend(flags(f, state)),
        Err(e) => warnings.push(format!(
            "START: cannot read the OSD map flags (ceph osd dump): {e}; {later}"
        )),
    }
    match configured {
        Ok(c) => found.extend(config(c, state)),
        Err(e) => warnings.push(format!(
            "START: cannot read the configured values (ceph config dump): {e}; {later}"
        )),
    }
    let record = (!found.is_empty()).then(|| {
        let names: Vec<String> = found.iter().map(Unowned::describe).collect();
        let obs = Observation::quiet();
        Ctx::new(policy, &obs, now).record(
            DecisionEvent::Unowned,
            format!(
                "UNOWNED: found at start, not set by this enforcer (no record), left as they are: {}. If an earlier enforcer whose state is lost left them, put them back by hand (ceph osd unset FLAG; ceph config rm osd KEY, or set the operator's value)",
                names.join("; ")
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
            &Ok(set(&["nobackfill"])),
            &Ok(db(&[("osd_mclock_profile", Some("high_client_ops"))])),
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
            &Err("timed out".into()),
            &Ok(db(&[("osd_mclock_profile", None)])),
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
            },
            Unowned {
                kind: UnownedKind::Config,
                name: "osd_max_backfills".into(),
                value: Some("4".into()),
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
}
