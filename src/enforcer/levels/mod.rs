//! One controller with one output (issue 35): an ordered list of levels, from the most recovery
//! to the least, and one position on it that the window's client p99 moves, both ways.
//!
//! - [`list`]: the levels for a release and op queue, each the settings it asks of the cluster
//!   (what a reconciler applies as the difference from what Ceph reports).
//! - [`controller`]: the position and the one rule that moves it.
//! - [`reconcile`]: a level's desired settings against what Ceph reports: the originals to
//!   record first, the changes, and the keys someone else took over.
//!
//! - [`drive`]: the controller in `decide`'s loop (`--enforcer.controller levels`): the level in
//!   force as a config change, the backfill lever's N and the pause share, inside the ladder's
//!   safety rules.
//!
//! Pure: no command, no clock. Tested on a plant model over many seeds (`plant_tests`, and the
//! whole loop in `enforcer::plant_tests`), judged by what a user sees. `serve` runs it with
//! `--enforcer.controller levels`; the ladder stays the default until the lab's matrix
//! (issue 35) shows this does better.

pub mod controller;
pub mod drive;
pub mod list;
pub mod reconcile;

#[cfg(test)]
mod plant_tests;
