//! From a level to the commands that make the cluster say it: the level's desired settings,
//! compared with what Ceph reports, give the changes; the keys about to be changed for the first
//! time are recorded (with the operator's value) before any change, so that what goes back is
//! exactly what the operator had; a key someone else changed since we set it is theirs.
//!
//! Pure. The backfill lever's holds and the pause's flags keep their own records (`lever`,
//! `pause`); here the level only says their N and share.

use std::collections::{BTreeMap, BTreeSet};

use super::list::{Level, Queue};
use crate::enforcer::types::{
    same_setting, Change, MCLOCK_PROFILE_KEY, RECOVERY_MAX_ACTIVE, RECOVERY_SLEEP,
};

pub use crate::enforcer::types::{MAX_BACKFILLS, MCLOCK_OVERRIDE};

/// Every `osd` key a level may set: what the reconciler owns once it changed it.
pub const LEVEL_KEYS: [&str; 5] = [
    MCLOCK_PROFILE_KEY,
    MAX_BACKFILLS,
    MCLOCK_OVERRIDE,
    RECOVERY_SLEEP,
    RECOVERY_MAX_ACTIVE,
];

/// What a level asks of the cluster's configuration: the `osd` keys it sets (a key it does not
/// list is the operator's), the backfill lever's N and the pause share.
#[derive(Debug, Clone, PartialEq)]
pub struct Desired {
    pub config: BTreeMap<&'static str, String>,
    pub backfilling_pgs: Option<usize>,
    pub pause_share: f64,
}

pub fn desired(level: &Level, queue: Queue) -> Desired {
    let mut config = BTreeMap::new();
    if let (Queue::Mclock { .. }, Some(p)) = (queue, level.profile.name()) {
        config.insert(MCLOCK_PROFILE_KEY, p.to_string());
    }
    if let Some(b) = level.backfills {
        config.insert(MAX_BACKFILLS, b.to_string());
        if matches!(queue, Queue::Mclock { .. }) {
            config.insert(MCLOCK_OVERRIDE, "true".to_string());
        }
    }
    if let (Queue::Wpq, Some(s)) = (queue, level.recovery_sleep) {
        config.insert(RECOVERY_SLEEP, s.to_string());
        config.insert(RECOVERY_MAX_ACTIVE, "1".to_string());
    }
    Desired {
        config,
        backfilling_pgs: level.backfilling_pgs,
        pause_share: level.pause_share,
    }
}

/// What the reconciler has done so far in this recovery.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Owned {
    /// The operator's value of each key we changed, before our first change (None: unset).
    pub originals: BTreeMap<String, Option<String>>,
    /// The value we last set for each key we own.
    pub applied: BTreeMap<String, Option<String>>,
    /// Keys someone else changed after us: theirs now, never touched again in this recovery.
    pub given_up: BTreeSet<String>,
}

/// One reconciliation: record these originals first (stored before any command), then apply
/// the changes; keys found changed by someone else are handed over.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Plan {
    pub record_first: BTreeMap<String, Option<String>>,
    pub changes: Vec<Change>,
    pub overridden: Vec<Change>,
}

/// The changes that take `configured` (the `osd` section as Ceph reports it, None: unset) to
/// `want`: a key the level sets gets its value; a key we own and the level no longer sets goes
/// back to the operator's original.
pub fn plan(want: &Desired, configured: &BTreeMap<String, Option<String>>, owned: &Owned) -> Plan {
    let mut p = Plan::default();
    for key in LEVEL_KEYS {
        if owned.given_up.contains(key) {
            continue;
        }
        let now = configured.get(key).cloned().flatten();
        if let Some(last) = owned.applied.get(key) {
            if !same_setting(last, &now) {
                p.overridden.push(Change {
                    key: key.to_string(),
                    from: last.clone(),
                    to: now,
                });
                continue;
            }
        }
        let target = match want.config.get(key) {
            Some(v) => Some(v.clone()),
            None => match owned.originals.get(key) {
                Some(original) => original.clone(),
                // Never ours: the operator's, whatever it is.
                None => continue,
            },
        };
        if same_setting(&target, &now) {
            continue;
        }
        if !owned.originals.contains_key(key) {
            p.record_first.insert(key.to_string(), now.clone());
        }
        p.changes.push(Change {
            key: key.to_string(),
            from: now,
            to: target,
        });
    }
    // The changes run in order. Reef's OSDs delete an `osd_max_backfills` written while the
    // override is off (docs/tuning.md), which would read as someone else's change: the
    // override goes on before the backfills, and off after them.
    let on = p
        .changes
        .iter()
        .any(|c| c.key == MCLOCK_OVERRIDE && c.to.as_deref() == Some("true"));
    p.changes.sort_by_key(|c| match (c.key.as_str(), on) {
        (MCLOCK_OVERRIDE, true) => 0,
        (MCLOCK_OVERRIDE, false) => 2,
        _ => 1,
    });
    p
}

impl Owned {
    /// After the plan's record was stored and its changes made.
    pub fn applied(&mut self, plan: &Plan) {
        for (k, v) in &plan.record_first {
            self.originals.entry(k.clone()).or_insert_with(|| v.clone());
        }
        for c in &plan.changes {
            self.applied.insert(c.key.clone(), c.to.clone());
        }
        for c in &plan.overridden {
            self.given_up.insert(c.key.clone());
            self.applied.remove(&c.key);
        }
    }

    /// Every key we own is back at the operator's original.
    pub fn restored(&self, configured: &BTreeMap<String, Option<String>>) -> bool {
        self.originals.iter().all(|(k, v)| {
            self.given_up.contains(k) || same_setting(v, &configured.get(k).cloned().flatten())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::list::{levels, Allowed, Ceiling, Facts, Levels};
    use super::*;

    fn reef() -> (Levels, Queue) {
        let queue = Queue::Mclock {
            backfills_honoured: true,
        };
        let l = levels(
            &Facts {
                queue,
                operator_profile: "balanced".into(),
                operator_backfills: 1,
                moving_pgs: 8,
            },
            &Allowed {
                ceiling: Ceiling::Backfills(2),
                lever: true,
                pause_max_share: 0.8,
                recovery_sleeps: vec![],
            },
        );
        (l, queue)
    }

    /// The cluster after applying `p` to `c` (what Ceph would then report).
    fn apply(c: &mut BTreeMap<String, Option<String>>, p: &Plan) {
        for ch in &p.changes {
            c.insert(ch.key.clone(), ch.to.clone());
        }
    }

    #[test]
    fn every_level_and_back_leaves_the_operators_settings_exactly() {
        let (l, queue) = reef();
        // The operator set a profile; nothing else.
        let operators: BTreeMap<String, Option<String>> =
            [(MCLOCK_PROFILE_KEY.to_string(), Some("balanced".to_string()))].into();
        // Every walk: home -> each level -> home, in both orders.
        for at in 0..l.list.len() {
            let mut cluster = operators.clone();
            let mut owned = Owned::default();
            for step in [at, l.home] {
                let p = plan(&desired(l.get(step), queue), &cluster, &owned);
                assert!(p.overridden.is_empty());
                // The record names the operator's value of every key changed for the first time.
                for ch in &p.changes {
                    if !owned.originals.contains_key(&ch.key) {
                        assert_eq!(p.record_first.get(&ch.key), Some(&ch.from), "{ch:?}");
                    }
                }
                apply(&mut cluster, &p);
                owned.applied(&p);
                // What Ceph reports is what the level asks.
                for (k, v) in &desired(l.get(step), queue).config {
                    assert_eq!(
                        cluster.get(*k).cloned().flatten().as_deref(),
                        Some(v.as_str())
                    );
                }
            }
            let cluster: BTreeMap<_, _> =
                cluster.into_iter().filter(|(_, v)| v.is_some()).collect();
            assert_eq!(cluster, operators, "level {at}: {:?}", l.get(at));
            assert!(owned.restored(&cluster));
        }
    }

    #[test]
    fn the_override_is_on_before_the_backfills_are_raised_and_off_after_they_are_back() {
        let (l, queue) = reef();
        let mut c = BTreeMap::new();
        let mut owned = Owned::default();
        let p = plan(&desired(l.get(0), queue), &c, &owned);
        let keys: Vec<&str> = p.changes.iter().map(|c| c.key.as_str()).collect();
        assert_eq!(keys.first(), Some(&MCLOCK_OVERRIDE), "{keys:?}");
        assert!(keys.contains(&MAX_BACKFILLS));
        apply(&mut c, &p);
        owned.applied(&p);
        let back = plan(&desired(l.get(l.home), queue), &c, &owned);
        let keys: Vec<&str> = back.changes.iter().map(|c| c.key.as_str()).collect();
        assert_eq!(keys.last(), Some(&MCLOCK_OVERRIDE), "{keys:?}");
        assert!(keys.contains(&MAX_BACKFILLS));
    }

    #[test]
    fn raised_backfills_come_with_the_override_under_mclock_only() {
        let (l, queue) = reef();
        let d = desired(l.get(0), queue);
        assert_eq!(d.config.get(MAX_BACKFILLS).map(String::as_str), Some("2"));
        assert_eq!(
            d.config.get(MCLOCK_OVERRIDE).map(String::as_str),
            Some("true")
        );
        let d = desired(l.get(0), Queue::Wpq);
        assert!(!d.config.contains_key(MCLOCK_OVERRIDE));
        assert!(
            !d.config.contains_key(MCLOCK_PROFILE_KEY),
            "no profile on wpq"
        );
    }

    #[test]
    fn a_key_changed_by_someone_else_is_theirs_and_never_touched_again() {
        let (l, queue) = reef();
        let mut cluster = BTreeMap::new();
        let mut owned = Owned::default();
        let down = plan(&desired(l.get(l.home + 1), queue), &cluster, &owned);
        apply(&mut cluster, &down);
        owned.applied(&down);
        // The operator puts their own choice in while we hold high_client_ops.
        cluster.insert(
            MCLOCK_PROFILE_KEY.to_string(),
            Some("high_recovery_ops".to_string()),
        );
        let back = plan(&desired(l.get(l.home), queue), &cluster, &owned);
        assert_eq!(back.overridden.len(), 1);
        assert!(back.changes.is_empty(), "{back:?}");
        owned.applied(&back);
        let again = plan(&desired(l.get(l.home + 1), queue), &cluster, &owned);
        assert!(again.changes.is_empty() && again.overridden.is_empty());
        assert!(
            owned.restored(&cluster),
            "theirs: nothing of ours left to put back"
        );
    }

    #[test]
    fn a_level_the_cluster_already_says_costs_no_command_and_owns_nothing() {
        let (l, queue) = reef();
        let cluster: BTreeMap<String, Option<String>> = [(
            MCLOCK_PROFILE_KEY.to_string(),
            Some("high_client_ops".to_string()),
        )]
        .into();
        let p = plan(
            &desired(l.get(l.home + 1), queue),
            &cluster,
            &Owned::default(),
        );
        assert_eq!(p, Plan::default());
    }
}
