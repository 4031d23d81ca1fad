//! The enforcer on a plant model (issue 35 point 3): a simulated cluster whose client p99 and
//! recovery follow what the enforcer lets recover, run over many seeds, judged by what a user
//! sees: the share of 10-s windows within the bound, the recovery time, the settings left
//! behind. `decide` and `apply_outcome` run as the loop runs them ([`LeverSim`]), with the
//! experiment's timings (2-s collections, 10-s windows), on the lab's recorded rebalance (19 PGs
//! backfilling at once, as Pacific's mClock lets them).
//!
//! The plant, each 2-s tick:
//! - recovery throughput saturates with the PGs that backfill: `R * n / (n + HALF)`, with `n`
//!   the backfilling PGs times the ops each may start (4 ops count twice, as measured on the
//!   lab: "2026-12-03, night"); nothing moves in a paused tick;
//! - client p99 is the baseline times `1 + cost * throughput / R`, with log-normal noise, and
//!   twice that over the recovery's first 10 s (the reweight's own peering, as on the lab);
//! - each PG moves its objects at its share of the throughput and ends active+clean; PGs the
//!   lever releases starts at once, and a tick where k PGs start costs 1 + 0.5 k times (each
//!   re-peers; several at once cost that much more, as on the lab).
//!
//! The plant's constants are assumptions shaped on the lab's runs (Pacific's rebalance at
//! 2.5-3x the baseline with every PG at once; N = 1 costing about a third of that), not
//! measured per lever: issue 35's matrix is the measurement. What the tests hold is the
//! behaviour a user sees; where today's controller misses issue 35's goal on the plant, the
//! test says so and is ignored until the controller meets it.
//!
//! The enforcer reads the mean of the last window's ticks, as the OSDs' histogram gives it.
//! The level controller's plant (`levels/plant_tests.rs`) uses the same constants.

use std::collections::BTreeMap;
use std::time::Duration;

use super::levels::controller::{HISTOGRAM_READS, HISTOGRAM_READS_SPREAD};
use super::lever_tests::{lever_policy, rebalance, LeverSim};
use super::policy::{Mode, Policy};
use super::state::ClusterMemory;
use super::types::{Time, RECOVERY_MAX_SINGLE_START};

/// Objects each moving PG holds.
pub(super) const OBJECTS_PER_PG: f64 = 300.0;
/// The throughput the OSDs give recovery when nothing holds it back, objects/s.
pub(super) const FULL_RATE: f64 = 20.0;
/// The (ops-weighted) PGs at which throughput is half the full rate.
pub(super) const HALF: f64 = 4.0;
/// One tick's p99 when a released PG starts to backfill (it re-peers).
pub(super) const RELEASE_PEERING: f64 = 1.5;
pub(super) const TICK: f64 = 2.0;
pub(super) const WINDOW: f64 = 10.0;
pub(super) const BASE_MS: f64 = 16.0;
const BOUND_MS: f64 = 2.0 * BASE_MS;

/// How much one unit of recovery throughput costs clients.
#[derive(Debug, Clone, Copy)]
struct Plant {
    /// p99 at full throughput is `1 + cost` times the baseline.
    cost: f64,
    /// Log-normal sigma of each tick's p99.
    noise: f64,
}

/// What a user sees of one recovery.
#[derive(Debug)]
struct Seen {
    /// Client p99 per 10-s window, ms.
    windows: Vec<f64>,
    /// From the start to the last object moved; None: not done within the time given.
    recovery: Option<f64>,
    /// What is left on the cluster 10 minutes after.
    left: Left,
    /// How often the lever's N changed direction (up then down, or down then up).
    reversals: usize,
    /// The level controller's moves (from, to, carried out), from its LEVEL records' fields.
    moves: Vec<(usize, usize, bool)>,
    /// What the enforcer remembers of the cluster afterwards.
    memory: ClusterMemory,
    /// The level controller's memory on this recovery's list (the index a window over the
    /// bound moves at least down to), as first seen.
    remembered: Option<usize>,
    /// The first level below the operator's the level controller set.
    first_down: Option<super::levels::list::Level>,
    /// The time limit's deadlines the level controller said.
    deadlines: Vec<super::levels::controller::Deadline>,
}

/// The cluster 10 minutes after the recovery, as far as the enforcer touched it.
#[derive(Debug, PartialEq)]
struct Left {
    /// Keys set in the config database's `osd` section (the operator had none).
    keys: Vec<String>,
    /// PGs held with pg-upmap-items.
    held: usize,
    /// OSD map flags set.
    flags: Vec<String>,
    balancer_on: bool,
}

/// As the operator had it: nothing set, nothing held, the balancer on.
const AS_FOUND: Left = Left {
    keys: Vec::new(),
    held: 0,
    flags: Vec::new(),
    balancer_on: true,
};

impl Seen {
    fn within(&self) -> f64 {
        let ok = self.windows.iter().filter(|w| **w <= BOUND_MS).count();
        ok as f64 / self.windows.len().max(1) as f64
    }
}

/// xorshift64*: a reproducible stream per seed, without a dependency for tests (the level
/// controller's plant uses it too).
pub(super) struct Rng(pub(super) u64);

impl Rng {
    fn unit(&mut self) -> f64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 11) as f64 / (1u64 << 53) as f64
    }

    /// exp(N(0, sigma)), Box-Muller.
    pub(super) fn lognormal(&mut self, sigma: f64) -> f64 {
        let (u, v) = (self.unit().max(1e-12), self.unit());
        let z = (-2.0 * u.ln()).sqrt() * (2.0 * std::f64::consts::PI * v).cos();
        (sigma * z).exp()
    }
}

/// The experiment's `serve` timings (`DEFAULT_SERVE_ARGS`), enforce mode, bound 32 ms.
fn fast_policy() -> Policy {
    let mut p = lever_policy();
    p.breach_for = Duration::from_secs(4);
    p.latency_window = Duration::from_secs(10);
    p.settle = Duration::from_secs(5);
    p.min_interval = Duration::from_secs(1);
    p.max_changes_per_hour = 1000;
    p.ladder.settle = Duration::from_secs(10);
    p.ladder.pause.period = 10.0;
    p.ladder.pause.tick = TICK;
    p
}

/// One recovery of the recorded rebalance on `plant`, the enforcer in `policy`'s mode, for at
/// most `limit` seconds, then 10 quiet minutes for it to give everything back.
fn run(plant: Plant, policy: Policy, seed: u64, limit: f64) -> Seen {
    run_remembering(plant, policy, seed, limit, ClusterMemory::default())
}

/// [`run`] by an enforcer that remembers `memory` of this cluster (its last recovery's).
fn run_remembering(
    plant: Plant,
    policy: Policy,
    seed: u64,
    limit: f64,
    memory: ClusterMemory,
) -> Seen {
    let mut sim = LeverSim::new(policy, rebalance());
    sim.state.memory = memory;
    let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
    // Its own stream: the client's noise stays what it was for each seed.
    let mut reads = Rng(seed.wrapping_mul(0x2545_f491_4f6c_dd1d) | 1);
    let mut read_spread = reads.lognormal(HISTOGRAM_READS_SPREAD);
    let mut left: BTreeMap<String, f64> = sim
        .cluster
        .pgs
        .iter()
        .filter(|p| crate::backfill::plan::backfills(p))
        .map(|p| (p.pgid.clone(), OBJECTS_PER_PG))
        .collect();
    let start: Time = sim.now;
    let (mut ticks, mut windows) = (Vec::<f64>::new(), Vec::new());
    let mut recovery = None;
    let mut remembered = None;
    let mut first_down = None;
    let (mut last_n, mut last_dir, mut reversals) = (None::<usize>, 0i8, 0);
    while sim.now - start < limit {
        sim.now += TICK;
        // What the cluster's flags say, not the enforcer's state (in observe mode that says
        // what it would have paused).
        let paused = sim.flags.contains("nobackfill");
        // A released PG starts at once: Pacific's mClock lets every PG backfill
        // (osd_max_backfills 1000).
        let (mut running, mut started) = (0, 0);
        for pg in sim.cluster.pgs.iter_mut() {
            if pg.state.contains("backfill_wait") {
                pg.state = "active+remapped+backfilling".to_string();
                started += 1;
            }
            running += usize::from(pg.state.contains("backfilling"));
        }
        let ops = match sim.config.get(RECOVERY_MAX_SINGLE_START) {
            Some(Some(v)) if v.parse::<u32>().is_ok_and(|n| n >= 4) => 2.0,
            _ => 1.0,
        };
        let n = running as f64 * ops;
        let rate = if paused || n == 0.0 {
            0.0
        } else {
            FULL_RATE * n / (n + HALF)
        };
        let moving: Vec<String> = sim
            .cluster
            .pgs
            .iter()
            .filter(|p| p.state.contains("backfilling"))
            .map(|p| p.pgid.clone())
            .collect();
        for id in &moving {
            let l = left.entry(id.clone()).or_insert(OBJECTS_PER_PG);
            *l -= rate * TICK / moving.len() as f64;
            if *l <= 0.0 {
                sim.cluster.finish(id);
            }
        }
        // The reweight's own peering over the first window; a PG that starts to backfill
        // after a release re-peers, and its writes wait meanwhile: each PG that starts in a
        // tick adds as much (one alone 1.5x; on the lab eleven released in one cycle made a
        // window of 505 ms against a bound of 133, two in a window 751-1,082 ms).
        let peering = if sim.now - start <= WINDOW {
            2.0
        } else {
            1.0 + (RELEASE_PEERING - 1.0) * started as f64
        };
        let p99 =
            BASE_MS * (1.0 + plant.cost * rate / FULL_RATE) * peering * rng.lognormal(plant.noise);
        ticks.push(p99);
        // The last window's mean: what the enforcer reads, and at each window's end what the
        // user's 10-s window shows.
        let per_window = (WINDOW / TICK) as usize;
        let window_p99 = {
            let w = &ticks[ticks.len().saturating_sub(per_window)..];
            w.iter().sum::<f64>() / w.len() as f64
        };
        if ticks.len() % per_window == 0 {
            windows.push(window_p99);
            read_spread = reads.lognormal(HISTOGRAM_READS_SPREAD);
        }
        // The enforcer reads the OSDs' histogram: below the client's own p99, and apart from
        // it by a factor that changes from window to window.
        let mut obs = sim.obs(Some(window_p99 * HISTOGRAM_READS * read_spread));
        // Ceph's recovery rate, and the objects of the PGs that backfill (a held PG's are not
        // misplaced while held).
        obs.ceph_recovery_rate = Some(rate);
        obs.misplaced_objects = sim
            .cluster
            .pgs
            .iter()
            .filter(|p| p.state.contains("backfilling"))
            .map(|p| {
                left.get(&p.pgid)
                    .copied()
                    .unwrap_or(OBJECTS_PER_PG)
                    .max(0.0) as u64
            })
            .sum();
        sim.step(obs);
        if let Some(r) = sim.state.levels.as_ref() {
            remembered = remembered.or(r.position.remembered);
            if first_down.is_none() && r.position.at > r.levels.home {
                first_down = Some(r.levels.get(r.position.at).clone());
            }
        }
        if let Some(n) = sim.state.ladder.lever.as_ref().map(|l| l.n) {
            if let Some(prev) = last_n.filter(|p| *p != n) {
                let dir = if n > prev { 1 } else { -1 };
                reversals += usize::from(last_dir != 0 && dir != last_dir);
                last_dir = dir;
            }
            last_n = Some(n);
        }
        // Over when no PG moves or is held on the cluster (in observe mode the enforcer's
        // state lists the holds it would have made, which the cluster never saw).
        let all_moved = sim
            .cluster
            .pgs
            .iter()
            .all(|p| !crate::backfill::plan::backfills(p))
            && sim.cluster.before.is_empty();
        if all_moved {
            recovery = Some(sim.now - start);
            break;
        }
    }
    // Ten quiet minutes: the enforcer sees the recovery end and gives everything back.
    for _ in 0..(600.0 / TICK) as usize {
        sim.now += TICK;
        let obs = sim.obs(Some(BASE_MS));
        sim.step(obs);
    }
    let keys: Vec<String> = sim
        .config
        .iter()
        .filter(|(_, v)| v.is_some())
        .map(|(k, _)| k.clone())
        .collect();
    Seen {
        windows,
        recovery,
        left: Left {
            keys,
            held: sim.cluster.before.len(),
            flags: sim.flags.iter().cloned().collect(),
            balancer_on: sim.cluster.balancer.as_ref().is_some_and(|b| b.active),
        },
        reversals,
        moves: sim
            .notes
            .iter()
            .filter_map(|n| n.level.as_ref().map(|m| (m.from, m.to, n.performed)))
            .collect(),
        memory: sim.state.memory.clone(),
        remembered,
        first_down,
        deadlines: sim.notes.iter().filter_map(|n| n.deadline).collect(),
    }
}

fn observe(mut p: Policy) -> Policy {
    p.mode = Mode::Observe;
    p
}

pub(super) const SEEDS: u64 = 20;

/// Pacific's rebalance on the lab: every PG at once costs clients about 2.8x their baseline.
const PACIFIC_REBALANCE: Plant = Plant {
    cost: 2.2,
    noise: 0.15,
};

/// What `run` gives for each seed without the enforcer (observe mode) and with it.
fn both(plant: Plant, seed: u64, limit: f64) -> (Seen, Seen, f64, f64) {
    let free = run(plant, observe(fast_policy()), seed, limit);
    let held = run(plant, fast_policy(), seed, limit);
    let (Some(t_free), Some(t_held)) = (free.recovery, held.recovery) else {
        panic!("seed {seed}: a recovery did not finish: {free:?} {held:?}");
    };
    (free, held, t_free, t_held)
}

#[test]
fn a_rebalance_that_breaks_the_bound_is_held_within_it_and_everything_goes_back() {
    for seed in 0..SEEDS {
        let (free, held, _, _) = both(PACIFIC_REBALANCE, seed, 3600.0);
        // Without the enforcer most windows are over; with it, nine in ten within.
        assert!(free.within() < 0.5, "seed {seed}: {free:?}");
        assert!(
            held.within() >= 0.9,
            "seed {seed}: {:.0}% within, windows {:?}",
            held.within() * 100.0,
            held.windows
        );
        // Nothing of the enforcer's is left once the recovery is over.
        assert_eq!(held.left, AS_FOUND, "seed {seed}");
        // N settles: it does not swing up and down window after window.
        assert!(
            held.reversals <= 6,
            "seed {seed}: {} reversals",
            held.reversals
        );
    }
}

/// Issue 35's goal for a cell where `balanced` misses the bound: recovery at most 3x its time.
/// Today's lever sits at N = 1 while p99 is at 0.7-0.8x the bound (its raise gate for one more
/// PG is 0.7x), about 4x `balanced`'s time on this plant.
#[test]
#[ignore = "issue 35: the ladder leaves the budget unused (about 4x balanced's time here; the level controller: enforcer::plant_tests::the_level_controller_holds_the_rebalance_within_the_bound_sooner_than_the_ladder)"]
fn issue_35_a_rebalance_held_within_the_bound_takes_at_most_three_times_balanceds_time() {
    for seed in 0..SEEDS {
        let (_, _, t_free, t_held) = both(PACIFIC_REBALANCE, seed, 3600.0);
        assert!(
            t_held <= 3.0 * t_free,
            "seed {seed}: {t_held} s against {t_free} s"
        );
    }
}

/// Where `balanced` keeps the bound (1.4x the baseline here), clients see no worse with the
/// enforcer, and it gives everything back.
#[test]
fn where_the_defaults_leave_budget_the_windows_stay_within_and_everything_goes_back() {
    for seed in 0..SEEDS {
        let (free, held, _, _) = both(LIGHT, seed, 3600.0);
        assert!(free.within() >= 0.9, "seed {seed}: {:?}", free.windows);
        assert!(held.within() >= 0.9, "seed {seed}: {:?}", held.windows);
        assert_eq!(held.left, AS_FOUND, "seed {seed}");
    }
}

/// Issue 35's goal where `balanced` keeps the bound: recovery no slower than `balanced`. Today
/// the first window's peering (2x) is taken for a breach and the lever slows the rest.
#[test]
#[ignore = "issue 35: the recovery's own peering makes the ladder throttle (1.1-1.3x balanced's time here; the level controller: 1.02-1.06x)"]
fn issue_35_where_the_defaults_leave_budget_recovery_is_no_slower_than_balanced() {
    for seed in 0..SEEDS {
        let (_, _, t_free, t_held) = both(LIGHT, seed, 3600.0);
        assert!(
            t_held <= t_free,
            "seed {seed}: {t_held} s against {t_free} s"
        );
    }
}

const LIGHT: Plant = Plant {
    cost: 0.5,
    noise: 0.15,
};

/// One PG alone costs 1 + 6 x 0.2 = 2.2x the baseline: no N holds the bound, only the pause.
const HEAVY: Plant = Plant {
    cost: 6.0,
    noise: 0.15,
};

/// On [`HEAVY`], with `policy`: the recovery ends, at least `within` of its windows within the
/// bound in every seed, and nothing is left behind.
fn the_pause_holds_a_heavy_recovery(policy: fn() -> Policy, within: f64) {
    for seed in 0..SEEDS {
        let held = run(HEAVY, policy(), seed, 3.0 * 3600.0);
        assert!(held.recovery.is_some(), "seed {seed}: not done: {held:?}");
        assert!(
            held.within() >= within,
            "seed {seed}: {:.0}% within, windows {:?}",
            held.within() * 100.0,
            held.windows
        );
        assert_eq!(held.left, AS_FOUND, "seed {seed}");
    }
}

#[test]
fn where_one_pg_already_costs_the_bound_the_pause_holds_it_and_recovery_still_ends() {
    the_pause_holds_a_heavy_recovery(fast_policy, 0.8);
}

/// `serve --enforcer.controller levels`: the same loop, the level controller in `decide`.
fn levels_policy() -> Policy {
    let mut p = fast_policy();
    p.ladder.controller = super::policy::Controller::Levels;
    // As the settings give it when --enforcer.aim is not.
    p.ladder.aim = super::levels::controller::AIM;
    p
}

/// Both controllers in the loop, seed by seed: within, recovery time against no enforcer.
#[test]
#[ignore = "a table for the docs: cargo test --lib enforcer::plant_tests::loop_summary -- --ignored --nocapture"]
fn loop_summary() {
    for (name, plant) in [
        ("pacific", PACIFIC_REBALANCE),
        ("light", LIGHT),
        ("heavy", HEAVY),
    ] {
        for seed in 0..SEEDS {
            let free = run(plant, observe(fast_policy()), seed, 3.0 * 3600.0);
            let ladder = run(plant, fast_policy(), seed, 3.0 * 3600.0);
            let levels = run(plant, levels_policy(), seed, 3.0 * 3600.0);
            let unlimited = run(plant, levels_without_time_limit(), seed, 3.0 * 3600.0);
            let t = |s: &Seen| s.recovery.unwrap_or(f64::NAN) / free.recovery.unwrap_or(f64::NAN);
            println!(
                "{name} seed {seed:2}: free {:3.0}% | ladder {:3.0}% {:.2}x left {} | levels {:3.0}% {:.2}x left {} | levels, no time limit {:3.0}% {:.2}x",
                free.within() * 100.0,
                ladder.within() * 100.0,
                t(&ladder),
                ladder.left == AS_FOUND,
                levels.within() * 100.0,
                t(&levels),
                levels.left == AS_FOUND,
                unlimited.within() * 100.0,
                t(&unlimited),
            );
        }
    }
}

/// The level controller's memory, seed by seed: the same rebalance twice on one cluster, the
/// second by an enforcer that remembers the first, and by one that remembers nothing.
#[test]
#[ignore = "a table for the docs: cargo test --lib enforcer::plant_tests::memory_summary -- --ignored --nocapture"]
fn memory_summary() {
    let levels_policy = levels_without_time_limit;
    for (name, plant) in [("pacific", PACIFIC_REBALANCE), ("heavy", HEAVY)] {
        for seed in 0..SEEDS {
            let free = run(plant, observe(fast_policy()), seed, 3.0 * 3600.0);
            let first = run(plant, levels_policy(), seed, 3.0 * 3600.0);
            let second = run_remembering(
                plant,
                levels_policy(),
                seed + 1000,
                3.0 * 3600.0,
                first.memory.clone(),
            );
            let fresh = run(plant, levels_policy(), seed + 1000, 3.0 * 3600.0);
            let t = |s: &Seen| s.recovery.unwrap_or(f64::NAN) / free.recovery.unwrap_or(f64::NAN);
            let over = |s: &Seen| s.windows.iter().filter(|w| **w > BOUND_MS).count();
            println!(
                "{name} seed {seed:2}: first {:3.0}% ({} over) {:.2}x | second, remembering {:?}: {:3.0}% ({} over) {:.2}x | second, not remembering {:3.0}% ({} over) {:.2}x",
                first.within() * 100.0,
                over(&first),
                t(&first),
                first.memory.level_held.as_ref().map(|h| h.level.describe()),
                second.within() * 100.0,
                over(&second),
                t(&second),
                fresh.within() * 100.0,
                over(&fresh),
                t(&fresh),
            );
        }
    }
}

/// The level controller's memory in the loop: after a rebalance that needed the lever, the
/// enforcer remembers the level that held; in the next recovery on the cluster the first
/// window over the bound moves at once at least down to it, and that recovery keeps nine
/// windows in ten within as the first. On this plant the gain is small (the first window's
/// peering already sends the position that far: 69 windows over in the second recoveries of
/// 20 seeds remembering, 74 not, in about the same time; `memory_summary`): the memory is for
/// the cluster whose first window reads barely over the bound, as on the Pacific lab, where
/// one level down from the operator's was three PGs, over the bound in 7 of 9 windows.
#[test]
fn the_next_recovery_on_the_cluster_moves_at_once_to_the_level_that_held_in_the_last() {
    // The memory alone: without the time limit, which may move the position up from the
    // level that held.
    let levels_policy = levels_without_time_limit;
    for seed in 0..SEEDS {
        let first = run(PACIFIC_REBALANCE, levels_policy(), seed, 3600.0);
        let Some(held) = first.memory.level_held.clone() else {
            panic!("seed {seed}: nothing remembered");
        };
        // `status` names it.
        let lines = super::view::memory_lines(
            &levels_policy(),
            &super::observation::OpQueue::Mclock,
            &first.memory,
            3600.0,
        );
        assert!(
            lines.iter().any(|l| l.contains(&held.level.describe())),
            "{lines:?}"
        );
        let second = run_remembering(
            PACIFIC_REBALANCE,
            levels_policy(),
            seed + 1000,
            3600.0,
            first.memory.clone(),
        );
        assert!(
            second.remembered.is_some(),
            "seed {seed}: not on the new list"
        );
        // The first level below the operator's restrains at least as much as the remembered.
        let Some(first_down) = second.first_down.clone() else {
            panic!("seed {seed}: the rebalance did not break the bound");
        };
        let n = |l: &super::levels::list::Level| l.backfilling_pgs.unwrap_or(usize::MAX);
        assert!(
            n(&first_down) <= n(&held.level) && first_down.pause_share >= held.level.pause_share,
            "seed {seed}: first down to {first_down:?}, remembered {:?}",
            held.level
        );
        assert!(
            second.within() >= 0.9,
            "seed {seed}: {:.0}% within",
            second.within() * 100.0
        );
        assert_eq!(second.left, AS_FOUND, "seed {seed}");
        // Forgetful: neither used nor changed.
        let mut p = levels_policy();
        p.memory = false;
        let forgetful = run_remembering(
            PACIFIC_REBALANCE,
            p,
            seed + 1000,
            3600.0,
            first.memory.clone(),
        );
        assert_eq!(forgetful.remembered, None, "seed {seed}");
        assert_eq!(forgetful.memory, first.memory, "seed {seed}");
    }
}

/// The level controller in the loop, on Pacific's rebalance: with the enforcer reading the
/// OSDs' histogram as on the labs, the ladder keeps 95-99% of windows within in 3.5-4.2x the
/// time; the level controller, whose time limit (3x) counts, 86-96% in 2.8-3.1x. Every seed:
/// most windows within, the time limit kept, and nothing left behind; over all seeds nine
/// windows in ten within, sooner than the ladder.
#[test]
fn the_level_controller_holds_the_rebalance_within_the_bound_sooner_than_the_ladder() {
    let (mut ladder_time, mut levels_time, mut within) = (0.0, 0.0, 0.0);
    for seed in 0..SEEDS {
        let free = run(PACIFIC_REBALANCE, observe(fast_policy()), seed, 3600.0);
        let ladder = run(PACIFIC_REBALANCE, fast_policy(), seed, 3600.0);
        let levels = run(PACIFIC_REBALANCE, levels_policy(), seed, 3600.0);
        let (Some(t_free), Some(t_ladder), Some(t_levels)) =
            (free.recovery, ladder.recovery, levels.recovery)
        else {
            panic!("seed {seed}: a recovery did not finish");
        };
        assert!(
            levels.within() >= 0.85,
            "seed {seed}: {:.0}% within, windows {:?}",
            levels.within() * 100.0,
            levels.windows
        );
        assert!(
            t_levels <= 3.1 * t_free,
            "seed {seed}: {t_levels} s against {t_free} s"
        );
        assert_eq!(levels.left, AS_FOUND, "seed {seed}");
        ladder_time += t_ladder;
        levels_time += t_levels;
        within += levels.within();
    }
    assert!(within / SEEDS as f64 >= 0.9, "{within} over {SEEDS} seeds");
    assert!(
        levels_time < ladder_time,
        "levels {levels_time} s, ladder {ladder_time} s over all seeds"
    );
}

/// Where the defaults keep the bound, the level controller keeps the windows and about the
/// pace of no enforcer at all: the recovery's own peering reads as a breach in the first
/// window, and the way back up releases the PGs held meanwhile at the lever's pace
/// (1.00-1.29x on this plant, 1.11x on average; the ladder 1.00-1.62x).
#[test]
fn where_the_defaults_leave_budget_the_level_controller_keeps_the_windows_and_the_pace() {
    for seed in 0..SEEDS {
        let free = run(LIGHT, observe(fast_policy()), seed, 3600.0);
        let levels = run(LIGHT, levels_policy(), seed, 3600.0);
        let (Some(t_free), Some(t_levels)) = (free.recovery, levels.recovery) else {
            panic!("seed {seed}: a recovery did not finish");
        };
        assert!(levels.within() >= free.within(), "seed {seed}");
        assert!(
            t_levels <= 1.3 * t_free,
            "seed {seed}: {t_levels} s against {t_free} s"
        );
        assert_eq!(levels.left, AS_FOUND, "seed {seed}");
    }
}

/// Where one PG alone breaks the bound, the level controller's pause holds it and the
/// recovery still ends, when the operator put the bound before the time
/// (`--enforcer.max-slowdown off`).
#[test]
fn where_one_pg_already_costs_the_bound_the_level_controllers_pause_holds_it() {
    the_pause_holds_a_heavy_recovery(levels_without_time_limit, 0.8);
    // No deadline is said without the limit.
    let held = run(HEAVY, levels_without_time_limit(), 0, 3.0 * 3600.0);
    assert!(held.deadlines.is_empty(), "{:?}", held.deadlines);
}

/// With the time limit (the default, 3x): the same heavy recovery ends within three times
/// its time at the operator's settings (give or take a tenth), every seed, where
/// holding the bound took 9-9.6x. The bound yields: 6-13% of windows within (none without an
/// enforcer), at the slowest level fast enough, so the windows over it are half as far over
/// as without an enforcer; nothing is left behind.
#[test]
fn where_holding_the_bound_would_take_too_long_the_recovery_ends_within_the_time_limit() {
    for seed in 0..SEEDS {
        let free = run(HEAVY, observe(fast_policy()), seed, 3.0 * 3600.0);
        // Without the limit the same recovery takes 9-9.6x (`loop_summary`; the pause's test
        // above runs it).
        let limited = run(HEAVY, levels_policy(), seed, 3.0 * 3600.0);
        let (Some(t_free), Some(t)) = (free.recovery, limited.recovery) else {
            panic!("seed {seed}: a recovery did not finish");
        };
        // 3x, give or take a tenth: a level is left only once its windows are confidently
        // too slow.
        assert!(
            t <= 3.1 * t_free,
            "seed {seed}: {t} s against {t_free} s at the operator's settings"
        );
        // Slowed no more than the time needs: client p99 well below no enforcer's.
        let mean = |w: &[f64]| w.iter().sum::<f64>() / w.len() as f64;
        assert!(
            mean(&limited.windows) < 0.7 * mean(&free.windows),
            "seed {seed}: windows {:?}, with no enforcer {:?}",
            limited.windows,
            free.windows
        );
        assert_eq!(limited.left, AS_FOUND, "seed {seed}");
        // The on-call engineer is told the deadline, once: 3x the time at the operator's
        // settings, counted from their best rate, which the recovery's tail does not keep up
        // (so the time said is shorter than the recovery's at the operator's settings).
        assert_eq!(limited.deadlines.len(), 1, "seed {seed}");
        let said = limited.deadlines[0];
        let at_operators = said.at_operators - said.start;
        assert!(
            (said.by - said.start - 3.0 * at_operators).abs() < 1e-6 && at_operators <= t_free,
            "seed {seed}: {said:?}, {t_free} s at the operator's settings"
        );
    }
}

/// `--enforcer.max-slowdown off`: the bound whatever the time.
fn levels_without_time_limit() -> Policy {
    let mut p = levels_policy();
    p.ladder.max_slowdown = super::levels::controller::MaxSlowdown(None);
    p
}

/// Observe mode: the level controller says where it would move, both ways, and the cluster
/// is left exactly as it was (no setting, hold or flag), the recovery at its own pace.
#[test]
fn in_observe_mode_the_level_controller_says_both_ways_what_it_would_do_and_changes_nothing() {
    for seed in 0..5 {
        let free = run(LIGHT, observe(fast_policy()), seed, 3600.0);
        let watched = run(LIGHT, observe(levels_policy()), seed, 3600.0);
        assert_eq!(watched.recovery, free.recovery, "seed {seed}");
        assert_eq!(watched.left, AS_FOUND, "seed {seed}");
        assert!(
            watched.moves.iter().any(|(from, to, _)| to > from),
            "seed {seed}: {:?}",
            watched.moves
        );
        assert!(
            watched.moves.iter().any(|(from, to, _)| to < from),
            "seed {seed}: {:?}",
            watched.moves
        );
        assert!(watched.moves.iter().all(|(_, _, done)| !done));
    }
}

/// Observe mode says each config move once: as many ESCALATE/DESCEND lines as LEVEL moves
/// that change a setting, not one a cycle.
#[test]
fn in_observe_mode_each_move_is_said_once() {
    let mut sim = LeverSim::new(observe(levels_policy()), rebalance());
    for i in 0..300 {
        sim.now += TICK;
        // Over the bound for two minutes, then well under it.
        let p99 = if i < 60 { 48.0 } else { 12.0 };
        let obs = sim.obs(Some(p99));
        sim.step(obs);
    }
    let moves = sim.notes.iter().filter(|n| n.level.is_some()).count();
    let config = sim
        .notes
        .iter()
        .filter(|n| n.event == "ESCALATE" || n.event == "DESCEND")
        .count();
    assert!(moves >= 2, "{:#?}", sim.notes);
    assert!(config <= moves, "{config} config lines for {moves} moves");
}
