//! PG safety per pool: how many PGs are undersized and how many have an acting set no larger
//! than the pool's `min_size` (one more failure and they stop serving I/O).

use crate::ceph::parse::pgs::PgBrief;
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

#[derive(Debug, Clone, Copy, Default)]
struct Counts {
    undersized: u64,
    at_min: u64,
    below_min: u64,
    fewest: Option<usize>,
}

/// Joins the pools with the undersized PGs in one pass over each (a scrape of a cluster with
/// 1000 pools and 100k undersized PGs must not walk the PG list once per pool). A PG of a pool
/// that is not listed (deleted between the two commands) is ignored.
pub fn pool_safety(pools: &[Pool], undersized: &[PgBrief]) -> Vec<PoolSafety> {
    use std::collections::HashMap;
    let min_size: HashMap<u64, usize> = pools.iter().map(|p| (p.id, p.min_size as usize)).collect();
    let mut counts: HashMap<u64, Counts> = HashMap::with_capacity(pools.len());
    for pg in undersized {
        if let Some(min) = min_size.get(&pg.pool_id) {
            let c = counts.entry(pg.pool_id).or_default();
            let members = pg.acting_members();
            c.undersized += 1;
            if members <= *min {
                c.at_min += 1;
            }
            if members < *min {
                c.below_min += 1;
            }
            c.fewest = Some(c.fewest.map_or(members, |f: usize| f.min(members)));
        }
    }
    pools
        .iter()
        .map(|pool| {
            let c = counts.get(&pool.id).copied().unwrap_or_default();
            PoolSafety {
                pool: pool.clone(),
                pgs_undersized: c.undersized,
                pgs_at_min_size: c.at_min,
                pgs_below_min_size: c.below_min,
                fewest_members: c.fewest,
            }
        })
        .collect()
}
