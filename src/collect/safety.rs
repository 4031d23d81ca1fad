//! PG safety per pool: how many PGs are undersized and how many have an acting set no larger
//! than the pool's `min_size` (one more failure and they stop serving I/O).

use crate::ceph::parse::pgs::PgBrief;
use crate::ceph::parse::pools::Pool;

#[derive(Debug, Clone, PartialEq)]
pub struct PoolSafety {
    pub pool: Pool,
    pub pgs_undersized: u64,
    pub pgs_at_min_size: u64,
}

impl PoolSafety {
    pub fn at_min_size(&self) -> bool {
        self.pgs_at_min_size > 0
    }
}

/// Joins the pools with the undersized PGs in one pass over each (a scrape of a cluster with
/// 1000 pools and 100k undersized PGs must not walk the PG list once per pool). A PG of a pool
/// that is not listed (deleted between the two commands) is ignored.
pub fn pool_safety(pools: &[Pool], undersized: &[PgBrief]) -> Vec<PoolSafety> {
    use std::collections::HashMap;
    let min_size: HashMap<u64, usize> = pools.iter().map(|p| (p.id, p.min_size as usize)).collect();
    let mut counts: HashMap<u64, (u64, u64)> = HashMap::with_capacity(pools.len());
    for pg in undersized {
        if let Some(min) = min_size.get(&pg.pool_id) {
            let c = counts.entry(pg.pool_id).or_default();
            c.0 += 1;
            if pg.acting_members() <= *min {
                c.1 += 1;
            }
        }
    }
    pools
        .iter()
        .map(|pool| {
            let (pgs_undersized, pgs_at_min_size) =
                counts.get(&pool.id).copied().unwrap_or_default();
            PoolSafety {
                pool: pool.clone(),
                pgs_undersized,
                pgs_at_min_size,
            }
        })
        .collect()
}
