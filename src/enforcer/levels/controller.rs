//! The position on the list of levels, and the one rule that moves it.
//!
//! The model, in one paragraph: each recovery starts at the operator's level. Once per latency
//! window measured entirely under the level in force, the window's client p99 (as a fraction of
//! the bound) is judged. A window over the bound moves down at once, more levels the further
//! over it is. Otherwise the level's estimate decides: the mean of its last windows, the first
//! window after each move left out (the move's own switch-over: PGs that start or stop peer).
//! Confidently over the aim (the mean less its standard error above it): one level down.
//! Confidently under it (so at least two windows), and this window under it too: one level up,
//! unless the level above is known to be too much (its estimate confidently over the aim, or
//! a window over the bound while it was in force after a move up to it: a step up that made
//! it worse); such a
//! level is not tried again until what was seen of it is forgotten, a time that doubles each
//! time it proves too much in the same recovery. Otherwise hold. No client write in a window is room: nothing to protect.
//! The throttle, the spending of the budget, "a step made it worse" and the way back are this
//! one rule. The memory of where the bound held on this cluster is the level with the most
//! recovery below the operator's whose windows held at the aim in the last recovery that needed
//! one: a window over the bound in the next recovery moves at least down to it.
//!
//! The time limit (`--enforcer.max-slowdown`, 3x by default: issue 35's "at most 3x"): the
//! operator's level's rate (Ceph's `recovering_objects_per_sec`, its best reading) says how
//! long the recovery's objects would take there; the recovery is to end within that many times
//! as long. Each level's rate is measured on its windows like its p99. A level whose rate is
//! confidently under what the objects left need to end in time is too slow: the position
//! leaves it upwards whatever p99 says, and does not move down onto it. Past the deadline, the
//! operator's level until the recovery ends.

use std::collections::{BTreeMap, VecDeque};

use serde::{Deserialize, Serialize};

use super::list::{Facts, Level, Levels};
use crate::enforcer::types::Time;

/// The enforcer's p99 (the OSDs' write-latency histogram over its latency window) against the
/// client's own p99 of the same 10-s window: 0.92 at the median over the 166 windows of the
/// matrix's first 8 cells on the Pacific and Reef labs (2026-12-07; deciles 0.75 to 1.17): the
/// histogram leaves out the network and the client's queue, and its window trails fio's. The
/// plants read the client's p99 through it.
pub const HISTOGRAM_READS: f64 = 0.92;

/// The spread of that ratio from window to window, as the sigma of a log-normal factor (the
/// same windows' deciles, 0.75 and 1.17, are 0.82 and 1.27 times the median: about 1.28 sigma
/// each side). The plants draw one factor a window.
pub const HISTOGRAM_READS_SPREAD: f64 = 0.17;

/// The fraction of the bound the level controller steers the enforcer's p99 to
/// (`--enforcer.aim` under `--enforcer.controller levels` unless given). Over the same windows,
/// the client's were within the bound in 94% of those the enforcer read at 0.65-0.80 of it, and
/// in 65% of those it read at 0.75-0.90: a level held at the ladder's 0.9 keeps about two client
/// windows in three within, at 0.8 nine in ten (docs/enforcer.md, the constants).
pub const AIM: f64 = 0.8;

/// The most a recovery may be slowed, as a multiple of its time at the operator's settings
/// (`--enforcer.max-slowdown`'s default): issue 35's goal where the operator's settings miss
/// the bound ("recovery time at most 3x"). Past it, the bound yields to the time.
pub const MAX_SLOWDOWN: f64 = 3.0;

/// `--enforcer.max-slowdown`: the multiple, or None (`off`): the bound whatever the time.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MaxSlowdown(pub Option<f64>);

impl Default for MaxSlowdown {
    fn default() -> Self {
        MaxSlowdown(Some(MAX_SLOWDOWN))
    }
}

impl std::str::FromStr for MaxSlowdown {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let t = s.trim();
        if t == "off" {
            return Ok(MaxSlowdown(None));
        }
        match t.strip_suffix('x').unwrap_or(t).trim().parse::<f64>() {
            Ok(x) if x > 1.0 && x <= 100.0 => Ok(MaxSlowdown(Some(x))),
            _ => Err(format!(
                "invalid max slowdown {s:?}: expected a multiple of the recovery's time at the operator's settings above 1 and at most 100 (3 or 3x: the recovery may take at most three times as long), or off (the bound whatever the time)"
            )),
        }
    }
}

impl std::fmt::Display for MaxSlowdown {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0 {
            None => f.write_str("off"),
            Some(x) => write!(f, "{x}x"),
        }
    }
}

impl<'de> Deserialize<'de> for MaxSlowdown {
    /// A number (3) or a string (`3x`, `off`).
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Number(f64),
            Text(String),
        }
        let text = match Raw::deserialize(d)? {
            Raw::Number(x) => x.to_string(),
            Raw::Text(t) => t,
        };
        text.parse().map_err(serde::de::Error::custom)
    }
}

/// The controller's constants; each is a default to be set by the matrix of recoveries
/// (issue 35 point 4), not one run.
#[derive(Debug, Clone, PartialEq)]
pub struct Tuning {
    /// Steer each level's mean p99 to this fraction of the bound (the OSDs' histogram reads
    /// 5-15% below the client's own p99 on the lab: docs/enforcer.md).
    pub aim: f64,
    /// Seconds of one latency window: a level is judged on windows measured entirely under it.
    pub window: f64,
    /// Windows remembered per level (the mean of these is the level's estimate).
    pub kept: usize,
    /// Windows before a level's estimate is judged (one window's noise is not an estimate).
    pub estimate_after: usize,
    /// Seconds after which what was seen of a level is forgotten; doubles each time the level
    /// proves too much again in the same recovery, at most `forget_max_doublings` times. Each
    /// try of a level that is too much may cost one window over the bound: first after 20
    /// windows, then 40, 80, 160 keeps the tries to about log2(W / 20) in a recovery of W
    /// windows (2 in 80), under the tenth of the windows the goal allows.
    pub forget_after: f64,
    pub forget_max_doublings: u32,
    /// The recovery may take at most this many times as long as at the operator's level
    /// (None: no limit).
    pub max_slowdown: Option<f64>,
}

impl Tuning {
    /// The defaults for a latency window of `window` seconds.
    pub fn for_window(window: f64) -> Self {
        Tuning {
            aim: AIM,
            window,
            kept: 6,
            estimate_after: 2,
            forget_after: 20.0 * window,
            forget_max_doublings: 3,
            max_slowdown: Some(MAX_SLOWDOWN),
        }
    }
}

/// What was seen of one level in this recovery.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Seen {
    /// The last windows' p99, as fractions of the bound, oldest first.
    pub windows: VecDeque<f64>,
    /// When the newest was recorded.
    pub last: Time,
    /// How often this level has proved too much in this recovery.
    pub blocked: u32,
    /// A window was over the bound while this level was in force after a move up to it.
    pub broke_the_bound: bool,
    /// The same windows' recovery rates (Ceph's, objects/s), oldest first.
    #[serde(default)]
    pub rates: VecDeque<f64>,
}

impl Seen {
    pub fn mean(&self) -> Option<f64> {
        (!self.windows.is_empty())
            .then(|| self.windows.iter().sum::<f64>() / self.windows.len() as f64)
    }

    /// The mean and its standard error, once there are `estimate_after` windows.
    pub fn estimate(&self, tuning: &Tuning) -> Option<(f64, f64)> {
        mean_and_error(&self.windows, tuning)
    }

    /// Confidently over the aim.
    fn over_aim(&self, tuning: &Tuning) -> bool {
        self.estimate(tuning)
            .is_some_and(|(m, se)| m - se > tuning.aim)
    }

    /// Too much: not to be moved up to until forgotten.
    fn too_much(&self, tuning: &Tuning) -> bool {
        self.broke_the_bound || self.over_aim(tuning)
    }

    /// Its rate confidently under `need` (the mean of its windows' rates plus their standard
    /// error, once there are `estimate_after` windows): too slow to end in time.
    fn too_slow(&self, tuning: &Tuning, need: f64) -> Option<f64> {
        mean_and_error(&self.rates, tuning)
            .filter(|(mean, se)| mean + se < need)
            .map(|(mean, _)| mean)
    }
}

/// The mean of `values` and its standard error, once there are `estimate_after` of them (two
/// at least: one value has no spread).
fn mean_and_error(values: &VecDeque<f64>, tuning: &Tuning) -> Option<(f64, f64)> {
    let n = values.len();
    if n < tuning.estimate_after.max(2) {
        return None;
    }
    let mean = values.iter().sum::<f64>() / n as f64;
    let var = values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
    Some((mean, (var / n as f64).sqrt()))
}

/// How far the recovery has come, for the time limit: Ceph's rate summed over the cycles.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Pace {
    /// When the recovery started.
    pub start: Time,
    /// Objects recovered since, by Ceph's `recovering_objects_per_sec` (each reading standing
    /// for the time since the one before).
    pub recovered: f64,
    /// The recovery's objects: the most of (objects Ceph counts left + recovered) seen, so
    /// that work added later (a second failure, PGs peering late) counts.
    pub work: f64,
    /// When the rate was last read.
    pub read_at: Option<Time>,
    /// `recovered` when the window being judged began.
    pub at_window: f64,
    /// The best reading of Ceph's rate while the operator's level or a slower one was in
    /// force: the reference the time limit counts from. The best, not a mean: the recovery's
    /// own peering and its tail only ever lower the rate (on the Pacific lab the first
    /// window's mean was 87 obj/s where `balanced` ran at 136-147), and a slower level's rate
    /// cannot be above the operator's.
    pub reference: f64,
}

/// One cycle's reading of the recovery's progress.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Progress {
    /// Objects Ceph counts as still to recover (degraded + misplaced); None when it does not
    /// count them all (the PGs the backfill lever holds are not misplaced while held).
    pub remaining: Option<u64>,
    /// Ceph's `recovering_objects_per_sec` now; None: not read.
    pub rate: Option<f64>,
    /// The position's level is what the OSDs run: not while redundancy comes first
    /// (`high_recovery_ops`, whatever the level), nor while the level's holds and pause
    /// cannot be in force. Only then does the rate tell what the level recovers.
    pub level_in_force: bool,
}

/// The time limit as it stands: what the operator's level recovers, and by when the
/// recovery is to end. As served: the deadline's LEVEL line on `/decisions` (`deadline`) and
/// the enforcer's state for `status` (`time_limit`).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Deadline {
    /// `--enforcer.max-slowdown`.
    pub max_slowdown: f64,
    /// Objects/s at the operator's level (at least what any slower level recovered).
    #[serde(rename = "reference_objects_per_second")]
    pub reference: f64,
    /// The recovery's objects.
    #[serde(rename = "objects")]
    pub work: f64,
    #[serde(rename = "recovery_started_at")]
    pub start: Time,
    /// When the recovery would end at the operator's level, and when it is to end.
    #[serde(rename = "at_operators_by")]
    pub at_operators: Time,
    pub by: Time,
}

impl Pace {
    /// Reads one cycle's progress.
    pub fn read(&mut self, progress: Progress, now: Time) {
        if let Some(rate) = progress.rate {
            // The first reading stands for the time since the recovery's start.
            let since = self.read_at.unwrap_or(self.start);
            self.recovered += rate.max(0.0) * (now - since).max(0.0);
            self.read_at = Some(now);
        }
        if let Some(left) = progress.remaining {
            self.work = self.work.max(left as f64 + self.recovered);
        }
    }
}

/// Why the position moved or held: the fields of the decision line.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub enum Why {
    /// The level in force has not yet had a whole window.
    Settling,
    /// This window's p99 over the bound: down at once; `remembered`: as far as the level that
    /// held the bound in the last recovery on this cluster, further than the p99 alone moves.
    OverBound {
        p99: f64,
        #[serde(skip_serializing_if = "std::ops::Not::not")]
        remembered: bool,
    },
    /// The level's windows average over the aim (by more than their standard error).
    OverAim { mean: f64 },
    /// This window and the level's windows under the aim: one up.
    Room { mean: f64 },
    /// The first window after a move, within the bound: the move's own switch-over, not
    /// counted in the level's estimate.
    AfterMove { p99: f64 },
    /// No client write in the window: nothing to protect.
    NoWrites,
    /// Under the aim, but the level above proved too much in this recovery: its mean, or
    /// None when it broke the bound right after a move up to it.
    AboveIsOver { mean: f64, above_mean: Option<f64> },
    /// Under the aim with nothing faster allowed (the operator's ceiling).
    AtCeiling,
    /// Over the aim with nothing slower left.
    AtBottom,
    /// Within the bound, neither confidently over nor under the aim: held.
    Within { mean: f64 },
    /// The time limit's deadline has passed: up to the operator's level, or held there, until
    /// the recovery ends, whatever p99 says.
    TimeUp,
    /// The level in force recovers too slowly (`rate`, its windows' mean) for the objects left
    /// to end within the time limit (`need`, objects/s): up, whatever p99 says.
    TooSlow { rate: f64, need: f64 },
    /// Over the bound or the aim, but the level below recovers too slowly to end in time: held.
    BelowTooSlow { rate: f64, need: f64 },
}

/// One decision: from where, to where, and why (`from == to`: held).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Decision {
    pub from: usize,
    pub to: usize,
    pub why: Why,
}

/// One recovery's list of levels and the position on it, as the enforcer keeps them (in the
/// state file and the lease object, so that a restart or a new leader goes on from here).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Run {
    pub levels: Levels,
    pub position: Position,
    /// What the list was made from (the operator's settings as found at the recovery's
    /// start): made again from these when more PGs backfill or the operator's limits change.
    pub facts: Facts,
}

/// The position in one recovery.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Position {
    pub at: usize,
    /// When the last window was judged or the level last changed: the next window is judged
    /// once a whole one has passed since.
    pub since: Time,
    pub seen: BTreeMap<usize, Seen>,
    /// The level in force was just reached (by a move up: `Some(true)`), its first window
    /// not yet judged; a recovery's start counts as a move (its own peering).
    pub fresh: Option<bool>,
    /// The level in force was reached by a move up: a window over the bound while it is in
    /// force means the step up made it worse.
    #[serde(default)]
    pub arrived_up: bool,
    /// The memory on this list: the level that held the bound in the last recovery on this
    /// cluster ([`Levels::restraining_as_much`]); a window over the bound moves at least down
    /// to it. Derived from the stored memory each cycle (`drive`), so never stored itself.
    #[serde(skip)]
    pub remembered: Option<usize>,
    /// The level with the most recovery below the operator's whose windows held at the aim in
    /// this recovery (and did not prove too much since): what the memory keeps when the
    /// recovery ends.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub held: Option<usize>,
    /// A window over the bound came in this recovery: the memory was for the first; later ones
    /// are judged on what this recovery saw.
    #[serde(default)]
    pub memory_spent: bool,
    /// The recovery's progress, for the time limit.
    #[serde(default)]
    pub pace: Pace,
}

impl Position {
    /// A recovery starts at the operator's own level.
    pub fn start(levels: &Levels, now: Time) -> Self {
        Position {
            at: levels.home,
            since: now,
            seen: BTreeMap::new(),
            fresh: Some(false),
            arrived_up: false,
            remembered: None,
            held: None,
            memory_spent: false,
            pace: Pace {
                start: now,
                ..Pace::default()
            },
        }
    }

    /// Reads one cycle's progress, with the level in force (the reference counts only the
    /// operator's level and slower ones, and only while that level is what the OSDs run: a
    /// suspension's `high_recovery_ops` read as the operator's rate would bring the deadline
    /// forward).
    pub fn read(&mut self, levels: &Levels, progress: Progress, now: Time) {
        self.pace.read(progress, now);
        let at_operators_or_slower = self.at >= levels.home && progress.level_in_force;
        if let Some(rate) = progress.rate.filter(|_| at_operators_or_slower) {
            self.pace.reference = self.pace.reference.max(rate);
        }
    }

    /// The next window is judged from `now`, afresh: what came before was not the level's
    /// (redundancy came first, or its holds could not be in force).
    pub fn afresh(&mut self, now: Time) {
        self.since = now;
        self.fresh = Some(false);
        self.pace.at_window = self.pace.recovered;
    }

    /// The time limit, once the operator's level's rate is known.
    pub fn deadline(&self, tuning: &Tuning) -> Option<Deadline> {
        let limit = tuning.max_slowdown?;
        let p = &self.pace;
        let reference = p.reference;
        (reference > 0.0 && p.work > 0.0).then(|| {
            let at_operators = p.start + p.work / reference;
            Deadline {
                max_slowdown: limit,
                reference,
                work: p.work,
                start: p.start,
                at_operators,
                by: p.start + limit * (at_operators - p.start),
            }
        })
    }

    /// The rate the objects left need to end by the deadline; infinite once it has passed.
    fn need(&self, tuning: &Tuning, now: Time) -> Option<f64> {
        self.deadline(tuning).map(|d| {
            let left = (d.work - self.pace.recovered).max(0.0);
            if now >= d.by {
                f64::INFINITY
            } else {
                left / (d.by - now)
            }
        })
    }

    /// Level `i` below the operator's is too slow for the objects left to end in time (`need`
    /// infinite: the deadline has passed, and every such level is): its windows' mean rate, 0
    /// when it has none.
    fn too_slow_at(&self, levels: &Levels, tuning: &Tuning, i: usize, need: f64) -> Option<f64> {
        if i <= levels.home {
            return None;
        }
        let rate = self.seen.get(&i).and_then(|s| s.too_slow(tuning, need));
        if need.is_infinite() {
            Some(rate.unwrap_or(0.0))
        } else {
            rate
        }
    }

    /// The same start with the memory of the level that held the bound in the last recovery.
    pub fn remembering(levels: &Levels, held: Option<&Level>, now: Time) -> Self {
        Position {
            remembered: held.and_then(|l| levels.restraining_as_much(l)),
            ..Position::start(levels, now)
        }
    }

    /// Whether a whole window of `window` seconds has passed since the last judgement: the
    /// next [`Position::step`] judges one (and the loop reads the PG view for it).
    pub fn due(&self, window: f64, now: Time) -> bool {
        now - self.since >= window - 1e-9
    }

    /// One collection: `p99` is the last window's client p99 write, in seconds, `None` when no
    /// client wrote in it; `bound` the policy's bound.
    pub fn step(
        &mut self,
        levels: &Levels,
        tuning: &Tuning,
        p99: Option<f64>,
        bound: f64,
        now: Time,
    ) -> Decision {
        let from = self.at;
        let hold = |why| Decision {
            from,
            to: from,
            why,
        };
        if !self.due(tuning.window, now) {
            return hold(Why::Settling);
        }
        self.forget(tuning, now);
        // The window's recovery rate: what Ceph recovered since the window began.
        let rate = (self.pace.recovered - self.pace.at_window) / (now - self.since).max(1e-9);
        self.pace.at_window = self.pace.recovered;
        self.since = now;
        let Some(p99) = p99 else {
            return self.up_or(levels, None, Why::NoWrites, from);
        };
        let ratio = p99 / bound;
        let fresh = self.fresh.take();
        let arrived_up = self.arrived_up;
        let rated = self.pace.read_at.is_some();
        let seen = self.seen.entry(from).or_default();
        seen.last = now;
        if arrived_up && ratio > 1.0 {
            seen.broke_the_bound = true;
        }
        // Every window but the move's own counts in the level's estimate, over the bound too.
        if fresh.is_none() {
            seen.windows.push_back(ratio);
            while seen.windows.len() > tuning.kept {
                seen.windows.pop_front();
            }
            if rated {
                seen.rates.push_back(rate);
                while seen.rates.len() > tuning.kept {
                    seen.rates.pop_front();
                }
            }
        }
        // The time limit before the bound: past the deadline the operator's level; a level too
        // slow to end in time is left upwards, past those above seen too slow too.
        let need = self.need(tuning, now);
        if let Some(need) = need {
            if let Some(rate) = self.too_slow_at(levels, tuning, from, need) {
                let mut to = from - 1;
                while self.too_slow_at(levels, tuning, to, need).is_some() {
                    to -= 1;
                }
                let why = if need.is_infinite() {
                    Why::TimeUp
                } else {
                    Why::TooSlow { rate, need }
                };
                self.at = to;
                self.fresh = Some(true);
                self.arrived_up = true;
                return Decision { from, to, why };
            }
        }
        let seen = &self.seen[&from];
        if ratio > 1.0 {
            // Further over, further down: one level per half-doubling over the aim.
            let over = (ratio / tuning.aim).log2();
            let by = ((2.0 * over).ceil() as usize).max(1);
            let remembered = self.remembered.is_some_and(|m| m > from + by);
            let by = match self.remembered {
                Some(m) if remembered => m - from,
                _ => by,
            };
            self.remembered = None;
            self.memory_spent = true;
            return self.down(
                levels,
                tuning,
                (by, need),
                Why::OverBound {
                    p99: ratio,
                    remembered,
                },
            );
        }
        if fresh.is_some() {
            return hold(Why::AfterMove { p99: ratio });
        }
        let mean = seen.mean().unwrap_or(ratio);
        // Below the operator's level, a level whose windows hold at the aim is what the next
        // recovery's breach moves to (the one with the most recovery of those seen).
        let holds =
            !seen.too_much(tuning) && seen.estimate(tuning).is_some_and(|(m, _)| m <= tuning.aim);
        if from > levels.home && holds && self.held.is_none_or(|h| from < h) {
            self.held = Some(from);
        }
        if seen.over_aim(tuning) {
            return self.down(levels, tuning, (1, need), Why::OverAim { mean });
        }
        let room = ratio <= tuning.aim
            && seen
                .estimate(tuning)
                .is_some_and(|(m, se)| m + se < tuning.aim);
        if !room {
            return hold(Why::Within { mean });
        }
        self.up_or(levels, Some(tuning), Why::Room { mean }, from)
    }

    /// One level up, unless the level above blocks it (`tuning` None: nothing blocks, as when
    /// no client writes).
    fn up_or(
        &mut self,
        levels: &Levels,
        tuning: Option<&Tuning>,
        why: Why,
        from: usize,
    ) -> Decision {
        if from == levels.top() {
            return Decision {
                from,
                to: from,
                why: Why::AtCeiling,
            };
        }
        let above = from - 1;
        if let (Some(t), Why::Room { mean }) = (tuning, &why) {
            let mean = *mean;
            if let Some(s) = self.seen.get(&above) {
                let above_mean = (!s.broke_the_bound).then(|| s.mean()).flatten();
                if s.too_much(t) {
                    return Decision {
                        from,
                        to: from,
                        why: Why::AboveIsOver { mean, above_mean },
                    };
                }
            }
        }
        self.at = above;
        self.fresh = Some(true);
        self.arrived_up = true;
        Decision {
            from,
            to: above,
            why,
        }
    }

    /// `by` levels down; a level whose windows already average over the aim is passed over;
    /// never onto one too slow for the objects left (`need`) to end in time.
    fn down(
        &mut self,
        levels: &Levels,
        tuning: &Tuning,
        (by, need): (usize, Option<f64>),
        why: Why,
    ) -> Decision {
        let from = self.at;
        if from == levels.bottom() {
            return Decision {
                from,
                to: from,
                why: Why::AtBottom,
            };
        }
        let mut to = (from + by).min(levels.bottom());
        while to < levels.bottom() && self.seen.get(&to).is_some_and(|s| s.too_much(tuning)) {
            to += 1;
        }
        if let Some(need) = need {
            let slow = |i: usize| {
                self.too_slow_at(levels, tuning, i, need).map(|rate| {
                    let why = if need.is_infinite() {
                        Why::TimeUp
                    } else {
                        Why::BelowTooSlow { rate, need }
                    };
                    (i, why)
                })
            };
            if let Some((first, why)) = (from + 1..=to).find_map(slow) {
                if first == from + 1 {
                    return Decision {
                        from,
                        to: from,
                        why,
                    };
                }
                to = first - 1;
            }
        }
        // The level left behind blocks from now on if it has been seen enough; if it was the
        // one that held, it holds no more (the next level that does is remembered).
        if let Some(s) = self.seen.get_mut(&from) {
            if s.too_much(tuning) {
                s.blocked += 1;
                if self.held == Some(from) {
                    self.held = None;
                }
            }
        }
        self.at = to;
        self.fresh = Some(false);
        self.arrived_up = false;
        Decision { from, to, why }
    }

    /// Forgets the windows of a level seen long enough ago (the recovery changes as PGs
    /// finish); how often it proved too much is kept, so that the next time it is forgotten
    /// later.
    fn forget(&mut self, tuning: &Tuning, now: Time) {
        for (level, s) in self.seen.iter_mut() {
            // The level in force is never forgotten: its windows are its estimate.
            if *level == self.at {
                continue;
            }
            let doublings = s.blocked.saturating_sub(1).min(tuning.forget_max_doublings);
            let keep_for = tuning.forget_after * f64::from(1u32 << doublings);
            if now - s.last >= keep_for {
                s.windows.clear();
                s.broke_the_bound = false;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::list::{levels, Allowed, Ceiling, Facts, Queue};
    use super::*;

    fn pacific() -> Levels {
        levels(
            &Facts {
                queue: Queue::Mclock {
                    backfills_honoured: false,
                },
                operator_profile: "high_client_ops".into(),
                operator_backfills: 1000,
                moving_pgs: 19,
            },
            &Allowed {
                ceiling: Ceiling::HighRecoveryOps,
                lever: true,
                pause_max_share: 0.8,
                recovery_sleeps: vec![],
            },
        )
    }

    const BOUND: f64 = 0.032;

    /// One recovery on Pacific's levels, fed one window at a time.
    struct Run {
        l: Levels,
        t: Tuning,
        pos: Position,
        now: f64,
    }

    impl Run {
        fn new() -> Self {
            let l = pacific();
            let pos = Position::start(&l, 0.0);
            Run {
                l,
                // The rule's cases below are written for an aim of 0.9 (the default is AIM).
                t: Tuning {
                    aim: 0.9,
                    ..Tuning::for_window(10.0)
                },
                pos,
                now: 0.0,
            }
        }

        /// Feeds one window's p99 (a fraction of the bound; None: no client wrote).
        fn feed(&mut self, ratio: Option<f64>) -> Decision {
            self.now += self.t.window;
            let p99 = ratio.map(|r| r * BOUND);
            self.pos.step(&self.l, &self.t, p99, BOUND, self.now)
        }
    }

    /// One window of a recovery of 3000 objects, with Ceph's recovery rate over it
    /// (objects/s).
    fn feed_rate(r: &mut Run, ratio: f64, rate: f64) -> Decision {
        let recovered = r.pos.pace.recovered + rate * r.t.window;
        r.pos.read(
            &r.l,
            Progress {
                remaining: Some((3000.0 - recovered).max(0.0) as u64),
                rate: Some(rate),
                level_in_force: true,
            },
            r.now + r.t.window,
        );
        r.feed(Some(ratio))
    }

    /// The time limit: 3000 objects at 30 obj/s take 100 s at the operator's level, so the
    /// recovery is to end by 300 s. A level recovering 5 obj/s, confidently under what the
    /// objects left need, is left upwards though its windows hold the bound; over the bound
    /// one level up, the position does not move back onto it; past the deadline the operator's
    /// level, whatever p99. Without the limit, none of this.
    #[test]
    fn a_level_too_slow_for_the_time_limit_is_left_upwards_and_never_moved_down_onto() {
        for limit in [Some(3.0), None] {
            let mut r = Run::new();
            r.t.max_slowdown = limit;
            let home = r.l.home;
            let d = feed_rate(&mut r, 1.5, 30.0);
            assert_eq!(d.to, home + 2, "{d:?}");
            let dl = r.pos.deadline(&r.t);
            assert_eq!(
                dl.map(|d| (d.reference, d.work, d.by)),
                limit.map(|_| (30.0, 3000.0, 300.0))
            );
            // Its own window, then two that hold the bound at 5 obj/s: too slow.
            let whys: Vec<Decision> = (0..3).map(|_| feed_rate(&mut r, 0.5, 5.0)).collect();
            if limit.is_none() {
                // Room under the aim, as ever.
                assert!(matches!(whys[2].why, Why::Room { .. }), "{whys:?}");
                continue;
            }
            let d = &whys[2];
            assert!(
                matches!(d.why, Why::TooSlow { rate, need } if rate == 5.0 && need > 5.0),
                "{whys:?}"
            );
            assert_eq!(d.to, home + 1);
            // Over the bound one up: the level below is too slow, held.
            feed_rate(&mut r, 0.5, 20.0);
            let d = feed_rate(&mut r, 1.2, 20.0);
            assert!(matches!(d.why, Why::BelowTooSlow { .. }), "{d:?}");
            assert_eq!(r.pos.at, home + 1);
            // Past the deadline: the operator's level, and no move below it.
            while r.now < 300.0 {
                feed_rate(&mut r, 0.9, 5.0);
            }
            assert_eq!(r.pos.at, home);
            let d = feed_rate(&mut r, 2.0, 30.0);
            assert_eq!((d.to, d.why), (home, Why::TimeUp));
        }
    }

    /// The rate read while redundancy came first (`high_recovery_ops`, whatever the level) or
    /// while the level's holds could not be in force is not the operator's: the deadline stays
    /// where the operator's level puts it. The objects recovered meanwhile count as progress.
    #[test]
    fn a_rate_read_while_the_level_is_not_in_force_is_not_the_operators() {
        let mut r = Run::new();
        r.t.max_slowdown = Some(3.0);
        let at = |remaining, rate, level_in_force| Progress {
            remaining: Some(remaining),
            rate: Some(rate),
            level_in_force,
        };
        r.pos.read(&r.l, at(2700, 30.0, true), 10.0);
        r.pos.read(&r.l, at(1800, 90.0, false), 20.0);
        let d = r.pos.deadline(&r.t).map(|d| (d.reference, d.work, d.by));
        assert_eq!(d, Some((30.0, 3000.0, 300.0)));
        assert_eq!(r.pos.pace.recovered, 1200.0);
    }

    #[test]
    fn the_time_limit_reads_as_operators_write_it() {
        let ok = |s: &str| s.parse::<MaxSlowdown>();
        assert_eq!(ok("3"), Ok(MaxSlowdown(Some(3.0))));
        assert_eq!(ok("2.5x"), Ok(MaxSlowdown(Some(2.5))));
        assert_eq!(ok("off"), Ok(MaxSlowdown(None)));
        assert_eq!(MaxSlowdown::default().to_string(), "3x");
        for bad in ["1", "0.5", "fast", "101", "-3", "NaN", "inf"] {
            let e = ok(bad).unwrap_err();
            assert!(e.contains("above 1 and at most 100"), "{bad}: {e}");
        }
    }

    #[test]
    fn nothing_moves_before_a_whole_window_under_the_level_in_force() {
        let mut r = Run::new();
        let d = r.pos.step(&r.l, &r.t, Some(3.0 * BOUND), BOUND, 4.0);
        assert_eq!(d.why, Why::Settling);
        assert_eq!(r.pos.at, r.l.home);
    }

    #[test]
    fn the_further_over_the_bound_the_further_down_in_one_move() {
        for (ratio, by) in [(1.1, 1), (1.7, 2), (3.4, 4)] {
            let mut r = Run::new();
            let d = r.feed(Some(ratio));
            assert_eq!(d.to - d.from, by, "{ratio}: {d:?}");
        }
    }

    /// A step up whose level breaks the bound later while in force (not only in its first
    /// window: a released PG's backfill may weigh after a window) made it worse: back down, and
    /// not tried again until forgotten.
    #[test]
    fn a_level_moved_up_to_that_breaks_the_bound_while_in_force_is_not_tried_again() {
        let mut r = Run::new();
        r.pos.at = r.l.home + 3;
        let below = r.pos.at;
        for w in [0.5, 0.5, 0.5] {
            r.feed(Some(w));
        }
        assert_eq!(r.pos.at, below - 1, "room: one up");
        // The move's own window, one within, then one over the bound.
        r.feed(Some(0.6));
        r.feed(Some(0.6));
        let d = r.feed(Some(1.2));
        assert_eq!((d.from, d.to), (below - 1, below));
        // Room again below: held under the level that broke the bound.
        for _ in 0..5 {
            let d = r.feed(Some(0.4));
            assert_eq!(r.pos.at, below, "{d:?}");
        }
        assert!(matches!(r.feed(Some(0.4)).why, Why::AboveIsOver { .. }));
    }

    /// The memory: a level that held in the last recovery is where a breach of the next one
    /// goes at once, however little over the bound its first window is; the rule alone moves
    /// one level for a window 10% over.
    #[test]
    fn a_window_over_the_bound_moves_at_least_to_the_level_that_held_in_the_last_recovery() {
        let held = Level {
            backfilling_pgs: Some(2),
            ..Level::operator()
        };
        let mut r = Run::new();
        r.pos = Position::remembering(&r.l, Some(&held), 0.0);
        let m = r.pos.remembered.expect("the list has a level with 2 PGs");
        assert_eq!(r.l.get(m).backfilling_pgs, Some(2));
        let d = r.feed(Some(1.1));
        assert_eq!(d.to, m, "{d:?}");
        assert_eq!(
            d.why,
            Why::OverBound {
                p99: 1.1,
                remembered: true
            }
        );
        // It was for the recovery's first breach: the next is judged by the rule alone.
        assert_eq!(r.pos.remembered, None);
        r.pos.at = r.l.home;
        assert_eq!(r.feed(Some(1.1)).to, r.l.home + 1);
        // Further over than the memory: the rule's own move, further down.
        let mut r = Run::new();
        r.pos = Position::remembering(&r.l, Some(&held), 0.0);
        r.pos.at = m - 1;
        let d = r.feed(Some(3.4));
        assert_eq!(d.to, m - 1 + 4, "{d:?}");
        // Without a memory: one level.
        let mut r = Run::new();
        assert_eq!(r.feed(Some(1.1)).to, r.l.home + 1);
    }

    /// What the memory keeps: the level with the most recovery below the operator's whose
    /// windows held at the aim; not a level that held only until it proved too much, nor the
    /// operator's own level.
    #[test]
    fn the_level_held_is_the_fastest_below_the_operators_whose_windows_held_at_the_aim() {
        let mut r = Run::new();
        r.pos.at = r.l.home + 4;
        // The move's own window, two under the aim: an estimate that holds; one up.
        for w in [0.5, 0.5, 0.5] {
            r.feed(Some(w));
        }
        assert_eq!(r.pos.held, Some(r.l.home + 4));
        assert_eq!(r.pos.at, r.l.home + 3);
        // The level above holds too (its first window, then two): remembered instead.
        for w in [0.6, 0.7, 0.7] {
            r.feed(Some(w));
        }
        assert_eq!(r.pos.held, Some(r.l.home + 3));
        // A level only ever over the aim is not remembered.
        let mut r = Run::new();
        r.pos.at = r.l.home + 2;
        for w in [0.5, 0.95, 0.95, 0.95] {
            r.feed(Some(w));
        }
        assert_eq!(r.pos.held, None, "never at the aim: {:?}", r.pos.seen);
        // A level that held, then proved too much as the recovery went on: no longer the one
        // remembered; the level below that holds then is.
        let mut r = Run::new();
        let lvl = r.l.home + 3;
        r.pos.at = lvl;
        for w in [0.5, 0.7, 0.7] {
            r.feed(Some(w));
        }
        assert_eq!((r.pos.held, r.pos.at), (Some(lvl), lvl - 1));
        // The step up broke the bound: back down to it, where the windows then run at the bound.
        r.feed(Some(0.6));
        assert_eq!(r.feed(Some(1.2)).to, lvl);
        for _ in 0..20 {
            if r.pos.at != lvl {
                break;
            }
            r.feed(Some(0.99));
        }
        assert_eq!(r.pos.at, lvl + 1);
        assert_eq!(r.pos.held, None);
        for w in [0.5, 0.5, 0.5] {
            r.feed(Some(w));
        }
        assert_eq!((r.pos.held, r.pos.at), (Some(lvl + 1), lvl + 1));
        // At the operator's level: nothing to remember.
        let mut r = Run::new();
        for _ in 0..4 {
            r.feed(Some(0.5));
        }
        assert_eq!(r.pos.held, None);
    }

    #[test]
    fn room_under_the_aim_moves_up_until_the_ceiling() {
        let mut r = Run::new();
        r.pos.at = r.l.home + 3;
        // Each level: the move's own window, then two under the aim (an estimate).
        for _ in 0..12 {
            r.feed(Some(0.5));
        }
        assert_eq!(r.pos.at, r.l.top());
        let whys: Vec<Why> = (0..3).map(|_| r.feed(Some(0.5)).why).collect();
        assert_eq!(whys[2], Why::AtCeiling, "{whys:?}");
    }

    #[test]
    fn a_level_whose_windows_average_over_the_aim_is_left_and_not_tried_again_until_forgotten() {
        let mut r = Run::new();
        let low = r.l.home + 2;
        r.pos.at = low + 1;
        for _ in 0..3 {
            r.feed(Some(0.6));
        }
        assert_eq!(r.pos.at, low, "room: one up");
        let d = r.feed(Some(0.97));
        assert!(
            matches!(d.why, Why::AfterMove { .. }),
            "the move's own window: {d:?}"
        );
        r.feed(Some(0.95));
        assert_eq!(r.pos.at, low, "one window is no estimate");
        let d = r.feed(Some(0.97));
        assert!(matches!(d.why, Why::OverAim { .. }), "{d:?}");
        assert_eq!(r.pos.at, low + 1);
        r.feed(Some(0.6));
        let d = r.feed(Some(0.6));
        assert!(matches!(d.why, Why::AboveIsOver { .. }), "{d:?}");
        // Forgotten after forget_after (the first time: no doubling): tried again.
        let left_at = r.now - 2.0 * r.t.window;
        while r.pos.at != low {
            r.feed(Some(0.6));
            assert!(
                r.now - left_at < 2.0 * r.t.forget_after,
                "never tried again"
            );
        }
        assert!(r.now - left_at >= r.t.forget_after);
    }

    #[test]
    fn a_level_that_proves_too_much_again_is_forgotten_twice_as_late() {
        let mut r = Run::new();
        let low = r.l.home + 3;
        r.pos.at = low + 1;
        // Room below, the level above breaks the bound each time it is tried: the waits
        // between tries double.
        let mut tries = Vec::new();
        while tries.len() < 3 && r.now < 5000.0 {
            let ratio = if r.pos.at == low { 1.05 } else { 0.6 };
            let before = r.pos.at;
            r.feed(Some(ratio));
            if before == low + 1 && r.pos.at == low {
                tries.push(r.now);
            }
        }
        assert_eq!(tries.len(), 3, "{tries:?}");
        let (first, second) = (tries[1] - tries[0], tries[2] - tries[1]);
        assert!(first >= r.t.forget_after, "{tries:?}");
        assert!(second >= 2.0 * r.t.forget_after, "{tries:?}");
    }

    #[test]
    fn a_step_up_whose_first_window_breaks_the_bound_is_not_tried_again_soon() {
        let mut r = Run::new();
        let low = r.l.home + 3;
        r.pos.at = low + 1;
        for _ in 0..3 {
            r.feed(Some(0.6));
        }
        assert_eq!(r.pos.at, low);
        r.feed(Some(1.05));
        assert_eq!(r.pos.at, low + 1);
        r.feed(Some(0.6));
        let d = r.feed(Some(0.6));
        assert!(matches!(d.why, Why::AboveIsOver { .. }), "{d:?}");
        // A level over the bound at the recovery's start (not after a move up) is no such
        // verdict: its own peering.
        let mut r = Run::new();
        r.feed(Some(1.05));
        assert_eq!(r.pos.at, r.l.home + 1);
        for _ in 0..3 {
            r.feed(Some(0.6));
        }
        assert_eq!(
            r.pos.at, r.l.home,
            "back up once the level below shows room"
        );
    }

    #[test]
    fn no_client_writes_is_room_whatever_was_seen() {
        let mut r = Run::new();
        r.feed(Some(3.0));
        let low = r.pos.at;
        let d = r.feed(None);
        assert_eq!((d.to, d.why), (low - 1, Why::NoWrites));
    }

    #[test]
    fn a_level_holds_until_its_windows_are_confidently_over_or_under_the_aim() {
        let mut r = Run::new();
        r.pos.at = r.l.top();
        let whys: Vec<Why> = [0.5, 0.85, 0.95, 0.97, 0.97]
            .into_iter()
            .map(|ratio| r.feed(Some(ratio)).why)
            .collect();
        assert!(matches!(whys[0], Why::AfterMove { .. }), "{whys:?}");
        // One window is no estimate: held, though under the aim.
        assert!(matches!(whys[1], Why::Within { .. }), "{whys:?}");
        // Mean 0.90 and 0.92, each within a standard error of the aim: held.
        assert!(matches!(whys[2], Why::Within { .. }), "{whys:?}");
        assert!(matches!(whys[3], Why::Within { .. }), "{whys:?}");
        // Mean 0.935, more than its standard error (0.029) over the aim.
        assert!(matches!(whys[4], Why::OverAim { .. }), "{whys:?}");
        assert_eq!(r.pos.at, r.l.top() + 1);
    }
}
