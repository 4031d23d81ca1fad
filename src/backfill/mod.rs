//! The backfill lever: at most N PGs backfill at once, the others *held* where their data is now
//! by `ceph osd pg-upmap-items` (mapping the OSDs CRUSH now wants back to the acting set, so the
//! PG is active+clean without moving data), and released a few at a time. The idea of
//! DigitalOcean's pgremapper (`cancel-backfill`, `undo-upmaps` under
//! `--max-backfill-reservations`) and CERN's `upmap-remapped.py`; this module is the pure part:
//!
//! - [`plan`]: from the PG states (`pg dump pgs_brief`), the OSD map ([`UpmapView`]) and the
//!   record of what is ours, which PGs to hold and which to release so that at most N backfill;
//!   the safety rules, each a function that returns the reason a PG or the whole lever is refused;
//!   a PG released lately and still peering keeps its place among the N.
//! - [`record`]: what the lever added (written before it is added), the balancer as it was, the
//!   releases still on their way to backfill, and the undo plan that removes exactly ours
//!   (release, restore, SIGTERM, start after a crash).
//!
//! The Ceph calls are in [`crate::ceph::ops`]; the manual `backfill` subcommand drives both.
//!
//! [`UpmapView`]: crate::ceph::parse::upmap::UpmapView

pub mod plan;
pub mod record;

#[cfg(test)]
mod tests;

pub use plan::{
    balancer_step, hold_items, lever_refusal, pg_refusal_by_state, plan, BalancerStep,
    LeverRefusal, PgRefusal, Plan, PlannedHold, MAX_HELD, RELEASE_GAP,
};
pub use record::{undo, Forget, HeldPg, Record, RecordError, Trim, Undo};
