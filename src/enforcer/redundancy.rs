//! Whether redundancy is at risk: the policy's exception ("while redundancy is at risk, recovery
//! comes first and the limit is lifted until redundancy is back"), judged from one observation.
//!
//! The rule (`--enforcer.suspend-when redundancy_at_risk`, the default): redundancy is at risk
//! while some object has at most `min_size` copies, or some PG cannot serve I/O:
//! - a PG undersized (fewer live members in its acting set than the pool's size);
//! - a degraded PG in a pool where one missing copy leaves at most `min_size` (size 3 /
//!   min_size 2; EC k+m with min_size k+1 and m <= 2), even with a full acting set: an OSD back
//!   from a restart recovers its objects from the PG log with every PG `active+recovering+degraded`
//!   and none undersized, and each of those objects has `size - 1` copies;
//! - a PG down, incomplete, stale or unknown (it serves no I/O, or nobody knows whether it does);
//! - a PG not active for another reason (peering, activating, peered) for longer than
//!   [`INACTIVE_GRACE`]: every recovery starts with a few seconds of peering.
//!
//! Pure: the caller says how long PGs have been inactive.

use std::collections::BTreeMap;
use std::fmt;

use serde::Serialize;

use super::observation::Observation;
use super::policy::SuspendWhen;
pub use crate::collect::safety::{from_states, PgSafety, CANNOT_SERVE};

/// How long PGs may stay inactive (peering, activating) before that alone puts redundancy at
/// risk. Every recovery's own peering lasts 1-5 s on the lab (NOTES.md: "client I/O stalls 1-5
/// s while PGs peer") and no client I/O is served meanwhile; Ceph itself calls a PG stuck
/// inactive after `mon_pg_stuck_threshold` (60 s). Half that: two collection intervals at the
/// default 15 s, so one sample taken mid-peering does not suspend the bound.
pub const INACTIVE_GRACE: f64 = 30.0;

/// One reason redundancy is at risk.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Risk {
    Undersized {
        pgs: u64,
        pools_at_min_size: Vec<String>,
    },
    PoolsAtMinSize {
        pools: Vec<String>,
        undersized_pgs: u64,
    },
    DegradedAtMinSize {
        pools: Vec<(String, u64)>,
    },
    DegradedUnplaced {
        pgs: u64,
    },
    CannotServe {
        states: BTreeMap<String, u64>,
    },
    Inactive {
        pgs: u64,
        for_secs: f64,
    },
}

impl Risk {
    /// The `reason` label of `ceph_recovery_budget_suspend_reason_info`.
    pub fn reason(&self) -> &'static str {
        match self {
            Risk::Undersized {
                pools_at_min_size, ..
            } if !pools_at_min_size.is_empty() => "pool_at_min_size",
            Risk::Undersized { .. } => "undersized",
            Risk::PoolsAtMinSize { .. } => "pool_at_min_size",
            Risk::DegradedAtMinSize { .. } | Risk::DegradedUnplaced { .. } => {
                "degraded_at_min_size"
            }
            Risk::CannotServe { .. } => "pgs_cannot_serve_io",
            Risk::Inactive { .. } => "pgs_inactive",
        }
    }
}

impl fmt::Display for Risk {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Risk::Undersized {
                pgs,
                pools_at_min_size,
            } => {
                write!(f, "{pgs} PGs undersized")?;
                if !pools_at_min_size.is_empty() {
                    write!(f, ", pools at min_size: {}", pools_at_min_size.join(", "))?;
                }
                Ok(())
            }
            Risk::PoolsAtMinSize {
                pools,
                undersized_pgs,
            } => write!(
                f,
                "pools at min_size: {} ({undersized_pgs} PGs undersized)",
                pools.join(", ")
            ),
            Risk::DegradedAtMinSize { pools } => {
                let list: Vec<String> = pools
                    .iter()
                    .map(|(pool, n)| format!("{n} in {pool}"))
                    .collect();
                write!(
                    f,
                    "PGs degraded where one missing copy leaves min_size: {}",
                    list.join(", ")
                )
            }
            Risk::DegradedUnplaced { pgs } => write!(
                f,
                "{pgs} PGs degraded, pools not known (PGs listed with `pg ls undersized`), some pool one copy from min_size"
            ),
            Risk::CannotServe { states } => {
                let list: Vec<String> = states.iter().map(|(w, n)| format!("{n} {w}")).collect();
                write!(f, "PGs that cannot serve I/O: {}", list.join(", "))
            }
            Risk::Inactive { pgs, for_secs } => write!(
                f,
                "{pgs} PGs inactive for {}",
                crate::units::fmt_secs(*for_secs)
            ),
        }
    }
}

/// Every reason redundancy is at risk under `rule`, in the order above; empty when it is not.
/// `inactive_for`: how long some PG has been inactive (see [`PgSafety::inactive`]).
pub fn risks(rule: SuspendWhen, obs: &Observation, inactive_for: Option<f64>) -> Vec<Risk> {
    let pgs = &obs.pg_safety;
    let mut out = Vec::new();
    match rule {
        SuspendWhen::PoolAtMinSize => {
            if !obs.pools_at_min_size.is_empty() {
                out.push(Risk::PoolsAtMinSize {
                    pools: obs.pools_at_min_size.clone(),
                    undersized_pgs: obs.undersized_pgs,
                });
            }
        }
        SuspendWhen::AnyUndersized => {
            if obs.undersized_pgs > 0 {
                out.push(undersized(obs));
            }
        }
        SuspendWhen::RedundancyAtRisk => {
            if obs.undersized_pgs > 0 {
                out.push(undersized(obs));
            }
            if !pgs.degraded_at_min_size.is_empty() {
                out.push(Risk::DegradedAtMinSize {
                    pools: pgs.degraded_at_min_size.clone(),
                });
            }
            if pgs.degraded_unplaced > 0 {
                out.push(Risk::DegradedUnplaced {
                    pgs: pgs.degraded_unplaced,
                });
            }
            if !pgs.cannot_serve.is_empty() {
                out.push(Risk::CannotServe {
                    states: pgs.cannot_serve.clone(),
                });
            }
            if let Some(for_secs) = inactive_for.filter(|t| *t >= INACTIVE_GRACE) {
                if pgs.inactive > 0 {
                    out.push(Risk::Inactive {
                        pgs: pgs.inactive,
                        for_secs,
                    });
                }
            }
        }
    }
    out
}

fn undersized(obs: &Observation) -> Risk {
    Risk::Undersized {
        pgs: obs.undersized_pgs,
        pools_at_min_size: obs.pools_at_min_size.clone(),
    }
}

/// The risks in one phrase for the decision log: "25 PGs degraded ...; 6 PGs stale".
pub fn describe(risks: &[Risk]) -> Option<String> {
    (!risks.is_empty()).then(|| {
        risks
            .iter()
            .map(Risk::to_string)
            .collect::<Vec<_>>()
            .join("; ")
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ceph::parse::{pgs, pools, status};
    use crate::collect::safety::pool_safety;
    use crate::enforcer::observation::{read_pg_states, read_pools};

    fn fixture(rel: &str) -> Vec<u8> {
        let path = format!("{}/tests/fixtures/{rel}", env!("CARGO_MANIFEST_DIR"));
        std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
    }

    /// What the enforcer sees in a recorded state, as `observation::from_snapshot` builds it.
    fn recorded(state: &str) -> Observation {
        let dir = "redundancy";
        let st =
            status::parse(&fixture(&format!("{dir}/{state}.ceph_status.out"))).expect("status");
        let pools = pools::parse(&fixture(&format!(
            "{dir}/{state}.ceph_osd_pool_ls_detail.out"
        )))
        .expect("pools");
        let listed = pgs::undersized(&fixture(&format!(
            "{dir}/{state}.ceph_pg_dump_pgs_brief.out"
        )))
        .expect("pgs");
        let mut obs = Observation::quiet();
        assert!(read_pg_states(&mut obs, &st).is_empty(), "{state}: blind");
        read_pools(&mut obs, &pools, &listed, Some(&st));
        obs
    }

    /// The case, recorded on the lab: osd.3 stopped under writes (noout) and started
    /// again with synchronous recovery: 25 PGs `active+recovering+degraded(+remapped)`, none
    /// undersized. Each degraded object of rbd-vms (size 3 / min_size 2) has 2 copies: at
    /// min_size, so the bound is lifted; the narrower rules do not see it.
    #[test]
    fn an_osd_back_from_a_restart_recovering_degraded_objects_is_at_risk() {
        let pgs = recorded("osd-restarted-recovering");
        assert_eq!(pgs.undersized_pgs, 0);
        assert!(pgs.pg_safety.cannot_serve.is_empty());
        assert_eq!(pgs.pg_safety.inactive, 0);
        assert_eq!(
            risks(SuspendWhen::RedundancyAtRisk, &pgs, None),
            vec![Risk::DegradedAtMinSize {
                pools: vec![("rbd-vms".into(), 25)]
            }]
        );
        assert_eq!(risks(SuspendWhen::AnyUndersized, &pgs, None), vec![]);
        assert_eq!(risks(SuspendWhen::PoolAtMinSize, &pgs, None), vec![]);
        assert_eq!(
            risks(SuspendWhen::RedundancyAtRisk, &pgs, None)[0].reason(),
            "degraded_at_min_size"
        );
    }

    /// Two of four OSDs down: PGs `undersized+degraded+peered` (below min_size, no I/O).
    #[test]
    fn two_osds_down_is_at_risk_under_every_rule() {
        let pgs = recorded("two-osds-down");
        assert_eq!(pgs.undersized_pgs, 33);
        assert_eq!(pgs.pools_at_min_size.len(), 2, "{pgs:?}");
        for rule in [
            SuspendWhen::RedundancyAtRisk,
            SuspendWhen::AnyUndersized,
            SuspendWhen::PoolAtMinSize,
        ] {
            assert!(!risks(rule, &pgs, None).is_empty(), "{rule:?}");
        }
        let all = risks(SuspendWhen::RedundancyAtRisk, &pgs, None);
        assert!(
            matches!(all[0], Risk::Undersized { pgs: 33, .. }),
            "{all:?}"
        );
    }

    /// The same on Reef 18.2.7 and Tentacle 20.2.4 (`tests/fixtures/{reef,tentacle}/two-osds-down`,
    /// their own CLI's outputs): 12 PGs peered, no I/O, all 33 undersized; every rule sees the
    /// risk.
    #[test]
    fn two_osds_down_is_at_risk_on_reef_and_tentacle_too() {
        for rel in ["reef", "tentacle"] {
            let read = |name: &str| fixture(&format!("{rel}/two-osds-down/{name}"));
            let st = status::parse(&read("ceph_status.json")).expect("status");
            let pools = pools::parse(&read("ceph_osd_pool_ls_detail.json")).expect("pools");
            let listed = pgs::undersized(&read("ceph_pg_dump_pgs_brief.json")).expect("pgs");
            let mut obs = Observation::quiet();
            assert!(read_pg_states(&mut obs, &st).is_empty(), "{rel}: blind");
            read_pools(&mut obs, &pools, &listed, Some(&st));
            assert_eq!(obs.undersized_pgs, 33, "{rel}");
            // The peered ones are undersized too, and counted there (not again as inactive).
            assert!(
                obs.pools_at_min_size.iter().any(|p| p == "rbd-vms"),
                "{rel}: {:?}",
                obs.pools_at_min_size
            );
            for rule in [
                SuspendWhen::RedundancyAtRisk,
                SuspendWhen::AnyUndersized,
                SuspendWhen::PoolAtMinSize,
            ] {
                assert!(!risks(rule, &obs, None).is_empty(), "{rel} {rule:?}");
            }
        }
    }

    /// A status whose pgmap lists no PG states while the cluster has PGs (a reply cut short,
    /// an mgr that has not reported yet) is blind, never "nothing at risk": the same recorded
    /// status with its states is judged.
    #[test]
    fn a_status_without_pg_states_while_pgs_exist_is_blind() {
        let raw = fixture("redundancy/two-osds-down.ceph_status.out");
        let whole = status::parse(&raw).expect("status");
        let mut obs = Observation::quiet();
        assert!(read_pg_states(&mut obs, &whole).is_empty());
        assert!(obs.undersized_pgs > 0);

        let mut v: serde_json::Value = serde_json::from_slice(&raw).expect("json");
        v["pgmap"]
            .as_object_mut()
            .expect("pgmap")
            .remove("pgs_by_state");
        let cut = status::parse(&serde_json::to_vec(&v).expect("json")).expect("status");
        assert!(cut.num_pgs > 0);
        let mut obs = Observation::quiet();
        let blind = read_pg_states(&mut obs, &cut);
        assert_eq!(blind.len(), 1, "{blind:?}");
        assert_eq!(obs.undersized_pgs, 0);
        assert!(obs.pg_safety.cannot_serve.is_empty());
    }

    /// `down`, recorded on the lab: osd.1 and osd.2 stopped (noout), 10 s of writes, then
    /// osd.0 and osd.3 stopped and osd.1 and osd.2 started again. The PGs whose last
    /// read-write interval was on osd.0 and osd.3 wait for one of them: 20 `down` (no I/O),
    /// beside 13 undersized. Every rule sees a risk; the default names the down PGs.
    #[test]
    fn down_pgs_cannot_serve_io() {
        let pgs = recorded("last-writers-down");
        assert_eq!(
            pgs.pg_safety.cannot_serve,
            BTreeMap::from([("down".to_string(), 20)])
        );
        assert!(
            risks(SuspendWhen::RedundancyAtRisk, &pgs, None).contains(&Risk::CannotServe {
                states: BTreeMap::from([("down".to_string(), 20)])
            })
        );
        assert_eq!(pgs.undersized_pgs, 13);
    }

    /// `unknown`, recorded on the lab seconds after `ceph osd pool create crb-new 16`: its 16
    /// PGs are `unknown` until an OSD reports them. No object of theirs can be served then:
    /// the bound is lifted at once, under the default rule only (no PG is undersized).
    #[test]
    fn unknown_pgs_cannot_serve_io() {
        let pgs = recorded("pool-created-unknown");
        assert_eq!(
            pgs.pg_safety.cannot_serve,
            BTreeMap::from([("unknown".to_string(), 16)])
        );
        assert_eq!(
            risks(SuspendWhen::RedundancyAtRisk, &pgs, None),
            vec![Risk::CannotServe {
                states: BTreeMap::from([("unknown".to_string(), 16)])
            }]
        );
        assert_eq!(risks(SuspendWhen::AnyUndersized, &pgs, None), vec![]);
    }

    /// Three of four OSDs down: 6 PGs stale (no OSD of theirs reports).
    #[test]
    fn stale_pgs_cannot_serve_io() {
        let pgs = recorded("three-osds-down-stale");
        assert_eq!(
            pgs.pg_safety.cannot_serve,
            BTreeMap::from([("stale".to_string(), 6)])
        );
        assert!(
            risks(SuspendWhen::RedundancyAtRisk, &pgs, None).contains(&Risk::CannotServe {
                states: BTreeMap::from([("stale".to_string(), 6)])
            })
        );
    }

    /// A healthy cluster and a rebalance (misplaced objects only, recorded under fio) are not at
    /// risk: the bound applies to them.
    #[test]
    fn a_rebalance_is_not_at_risk() {
        for rel in [
            "rebalance/ceph_status.json",
            "healthy-idle/ceph_status.json",
            "upmap/10-logrecovery.ceph_status.json",
        ] {
            let st = status::parse(&fixture(rel)).expect("status");
            let (cannot, inactive) = from_states(&st.pgs_by_state);
            let pgs = Observation {
                pg_safety: PgSafety {
                    cannot_serve: cannot,
                    inactive,
                    ..PgSafety::default()
                },
                ..Observation::quiet()
            };
            assert_eq!(
                risks(SuspendWhen::RedundancyAtRisk, &pgs, Some(600.0)),
                vec![],
                "{rel}"
            );
        }
    }

    /// Peering is part of every recovery: it counts only once it lasts [`INACTIVE_GRACE`].
    #[test]
    fn peering_counts_once_it_lasts() {
        let (cannot, inactive) = from_states(&[
            ("active+clean".into(), 27),
            ("peering".into(), 1),
            ("activating+remapped".into(), 2),
        ]);
        assert!(cannot.is_empty());
        assert_eq!(inactive, 3);
        let pgs = Observation {
            pg_safety: PgSafety {
                inactive,
                ..PgSafety::default()
            },
            ..Observation::quiet()
        };
        let rule = SuspendWhen::RedundancyAtRisk;
        assert_eq!(risks(rule, &pgs, None), vec![]);
        assert_eq!(risks(rule, &pgs, Some(INACTIVE_GRACE - 1.0)), vec![]);
        assert_eq!(
            risks(rule, &pgs, Some(INACTIVE_GRACE)),
            vec![Risk::Inactive {
                pgs: 3,
                for_secs: INACTIVE_GRACE
            }]
        );
    }

    /// Down, incomplete and unknown PGs count at once, each under its own word; a state with
    /// two of them counts under both.
    #[test]
    fn down_incomplete_and_unknown_count_at_once() {
        let (cannot, inactive) = from_states(&[
            ("unknown".into(), 4),
            ("down".into(), 1),
            ("incomplete+remapped".into(), 2),
            ("stale+down".into(), 1),
        ]);
        assert_eq!(
            cannot,
            BTreeMap::from([
                ("down".to_string(), 2),
                ("incomplete".to_string(), 2),
                ("stale".to_string(), 1),
                ("unknown".to_string(), 4)
            ])
        );
        assert_eq!(inactive, 0);
    }

    /// The per-pool rule: one missing copy leaves at most min_size.
    #[test]
    fn one_copy_from_min_size_follows_size_and_min_size() {
        let pool = |size, min_size| pools::Pool {
            id: 1,
            name: "p".into(),
            size,
            min_size,
            pg_num: 8,
            erasure: false,
        };
        let safety = |size, min_size, degraded| {
            let mut tally = pgs::UndersizedPgs::of_every_pg();
            if let Some(m) = tally.degraded_by_pool.as_mut() {
                m.insert(1, degraded);
            }
            pool_safety(&[pool(size, min_size)], &tally).remove(0)
        };
        // size 3 / min_size 2: a degraded object has 2 copies = min_size.
        assert_eq!(safety(3, 2, 5).pgs_degraded_at_min_size(), Some(5));
        // EC 4+2 with min_size 5: one shard missing leaves 5.
        assert_eq!(safety(6, 5, 1).pgs_degraded_at_min_size(), Some(1));
        // size 4 / min_size 2: a degraded object still has 3 copies, one above min_size.
        assert_eq!(safety(4, 2, 5).pgs_degraded_at_min_size(), Some(0));
        // EC 8+3 with min_size 9: one shard missing leaves 10.
        assert_eq!(safety(11, 9, 5).pgs_degraded_at_min_size(), Some(0));
        // size 2 / min_size 1 (not recommended, but seen): one copy left.
        assert_eq!(safety(2, 1, 1).pgs_degraded_at_min_size(), Some(1));
        // The listing did not say (pg ls undersized): not known.
        let mut unknown = safety(3, 2, 5);
        unknown.pgs_degraded = None;
        assert_eq!(unknown.pgs_degraded_at_min_size(), None);
    }
}
