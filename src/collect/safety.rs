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

/// Joins the pools with the undersized PGs. A PG of a pool that is not listed (deleted between
/// the two commands) is ignored.
pub fn pool_safety(pools: &[Pool], undersized: &[PgBrief]) -> Vec<PoolSafety> {
    pools
        .iter()
        .map(|pool| {
            let mut s = PoolSafety {
                pool: pool.clone(),
                pgs_undersized: 0,
                pgs_at_min_size: 0,
            };
            for pg in undersized.iter().filter(|pg| pg.pool_id == pool.id) {
                s.pgs_undersized += 1;
                if pg.acting_members() <= pool.min_size as usize {
                    s.pgs_at_min_size += 1;
                }
            }
            s
        })
        .collect()
}
