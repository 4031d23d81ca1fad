//! PG safety per pool: how many PGs are undersized and how many have an acting set no larger
//! than the pool's `min_size` (one more failure and they stop serving I/O).

use std::collections::BTreeMap;

use serde::Serialize;

use crate::ceph::parse::pgs::UndersizedPgs;
use crate::ceph::parse::pools::Pool;

#[derive(Debug, Clone, PartialEq)]
pub struct PoolSafety {
    pub pool: Pool,
    pub pgs_undersized: u64,
    /// Acting set no larger than min_size (those below it included).
    pub pgs_at_min_size: u64,
    /// Acting set smaller than min_size: their I/O has stopped.
    pub pgs_below_min_size: u64,
    /// The fewest live members in the acting set of any of its undersized PGs (copies, or
    /// shards for an erasure-coded pool); `None` when none is undersized.
    pub fewest_members: Option<usize>,
    /// Degraded PGs (some object has fewer copies, or shards, than `size`); `None` when the
    /// PG listing did not say (`pg ls undersized`, the fallback, lists undersized ones only).
    pub pgs_degraded: Option<u64>,
}

impl PoolSafety {
    pub fn at_min_size(&self) -> bool {
        self.pgs_at_min_size > 0
    }

    /// Whether one missing copy leaves at most `min_size`: size 3 / min_size 2, EC k+m with
    /// min_size k+1 and m <= 2. A degraded object of such a pool has at most `size - 1`
    /// copies, so it is at min_size (or below) even when its PG's acting set is full (an OSD
    /// back from a restart, recovering from its PG log).
    pub fn one_copy_from_min_size(&self) -> bool {
        self.pool.size.saturating_sub(1) <= self.pool.min_size
    }

    /// Degraded PGs whose objects are at min_size copies or fewer (see
    /// [`Self::one_copy_from_min_size`]); `None` when the degraded PGs are not known.
    pub fn pgs_degraded_at_min_size(&self) -> Option<u64> {
        if self.one_copy_from_min_size() {
            self.pgs_degraded
        } else {
            Some(0)
        }
    }
}

/// Joins the pools with the undersized PGs, counted per pool and acting-set size while they
/// were read: linear in pools, whatever the number of PGs (a scrape of a cluster with 1000
/// pools and 100k undersized PGs must not walk a PG list once per pool). PGs of a pool that is
/// not listed (deleted between the two commands) are ignored.
pub fn pool_safety(pools: &[Pool], undersized: &UndersizedPgs) -> Vec<PoolSafety> {
    pools
        .iter()
        .map(|pool| {
            let min = pool.min_size as usize;
            PoolSafety {
                pool: pool.clone(),
                pgs_undersized: undersized.in_pool(pool.id),
                pgs_at_min_size: undersized.with_at_most(pool.id, min),
                pgs_below_min_size: match min.checked_sub(1) {
                    Some(below) => undersized.with_at_most(pool.id, below),
                    None => 0,
                },
                fewest_members: undersized.fewest(pool.id),
                pgs_degraded: undersized.degraded_in(pool.id),
            }
        })
        .collect()
}

/// PG state words of a PG that serves no I/O now, or whose state nobody knows.
pub const CANNOT_SERVE: [&str; 4] = ["down", "incomplete", "stale", "unknown"];

/// What the PG states say about redundancy beyond the undersized PGs and the pools at min_size
/// (the observation's `undersized_pgs`, `pools_at_min_size`), from `ceph status` (states
/// cluster-wide) and the PG listing with the pools (degraded PGs per pool).
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct PgSafety {
    /// Pools one copy from min_size with degraded PGs, and how many.
    pub degraded_at_min_size: Vec<(String, u64)>,
    /// Degraded PGs that the PG listing did not place in pools (it was `pg ls undersized`,
    /// the fallback without `pg dump` caps), while some pool is one copy from min_size: counted
    /// as at risk, since they may be in that pool.
    pub degraded_unplaced: u64,
    /// PGs per state word of [`CANNOT_SERVE`].
    pub cannot_serve: BTreeMap<String, u64>,
    /// PGs not active that none of the above covers (peering, activating).
    pub inactive: u64,
}

/// Counts from `ceph status`'s PG states: those of [`CANNOT_SERVE`] per word, and the PGs not
/// active that are neither of those nor undersized (peering, activating).
pub fn from_states(pgs_by_state: &[(String, u64)]) -> (BTreeMap<String, u64>, u64) {
    let mut cannot = BTreeMap::new();
    let mut inactive = 0u64;
    for (state, n) in pgs_by_state {
        let words: Vec<&str> = state.split('+').collect();
        let mut counted = false;
        for w in CANNOT_SERVE {
            if words.contains(&w) {
                *cannot.entry(w.to_string()).or_insert(0u64) += n;
                counted = true;
            }
        }
        if !counted && !words.contains(&"active") && !words.contains(&"undersized") {
            inactive += n;
        }
    }
    (cannot, inactive)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn pool(id: u64, name: &str, size: u32, min_size: u32) -> Pool {
        Pool {
            id,
            name: name.into(),
            size,
            min_size,
            pg_num: 32,
            erasure: size > 3,
        }
    }

    /// "At min_size" is per pool: 2 live copies is at min_size for a size-3/min-2 pool, not
    /// for an EC 4+2 pool (min_size 5), where 5 shards is.
    #[test]
    fn at_min_size_follows_each_pools_min_size() {
        let pools = [
            pool(1, "rbd", 3, 2),
            pool(2, "ec", 6, 5),
            pool(3, "idle", 3, 2),
        ];
        let undersized = UndersizedPgs {
            by_pool: BTreeMap::from([
                (1, BTreeMap::from([(2, 7)])),
                (2, BTreeMap::from([(4, 1), (5, 3)])),
                // A pool deleted since: ignored.
                (9, BTreeMap::from([(1, 4)])),
            ]),
            ..Default::default()
        };
        let s = pool_safety(&pools, &undersized);
        let got: Vec<(&str, u64, u64, bool)> = s
            .iter()
            .map(|p| {
                (
                    p.pool.name.as_str(),
                    p.pgs_undersized,
                    p.pgs_at_min_size,
                    p.at_min_size(),
                )
            })
            .collect();
        assert_eq!(
            got,
            [
                ("rbd", 7, 7, true),
                ("ec", 4, 4, true),
                ("idle", 0, 0, false)
            ]
        );
        let fine = UndersizedPgs {
            by_pool: BTreeMap::from([(2, BTreeMap::from([(6, 2)]))]),
            ..Default::default()
        };
        assert_eq!(pool_safety(&pools, &fine)[1].pgs_at_min_size, 0);
    }
}
