//! One controller with one output (issue 35): an ordered list of levels, from the most recovery
//! to the least, and one position on it that the window's client p99 moves, both ways.
//!
//! - [`list`]: the levels for a release and op queue, each the settings it asks of the cluster
//!   (what a reconciler applies as the difference from what Ceph reports).
//! - [`controller`]: the position and the one rule that moves it.
//! - [`reconcile`]: a level's desired settings against what Ceph reports: the originals to
//!   record first, the changes, and the keys someone else took over.
//!
//! Pure: no command, no clock. Tested on a plant model over many seeds (`plant_tests`), judged
//! by what a user sees. Not yet what `serve` runs: the ladder in `decide` still is (wiring the
//! reconciler's plan into the loop, with the ladder's safety rules, is the next step; see
//! docs/enforcer.md, "One position on a list of levels").

pub mod controller;
pub mod list;
pub mod reconcile;

#[cfg(test)]
mod plant_tests;
