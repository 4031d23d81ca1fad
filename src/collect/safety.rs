//! PG safety per pool: how many PGs are undersized and how many have an acting set no larger
//! than the pool's `min_size` (one more failure and they stop serving I/O).

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
}

impl PoolSafety {
    pub fn at_min_size(&self) -> bool {
        self.pgs_at_min_size > 0
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
            }
        })
        .collect()
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
        };
        assert_eq!(pool_safety(&pools, &fine)[1].pgs_at_min_size, 0);
    }
}
