//! The duty-cycled pause (issue #7, the ladder's last rung): `ceph osd set nobackfill` and
//! `norecover` for a share of each period, the share adjusted from measured p99. Measured on the
//! lab (NOTES.md): pausing a rebalance brought p99 from 4.0x to 1.4x the baseline within seconds,
//! where no mClock profile held it. Pure: the loop passes the time and the observation in.
//!
//! Safety is structural here: the share never exceeds `max_share` (recovery always progresses),
//! the total pause per recovery is bounded, and redundancy at risk or a flag someone else set
//! ([`foreign_flags`]) ends the pause at once (`decide` ends it). Whether flags are set or unset
//! follows from `paused` before and after ([`flag_change`]), decided in one place.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use super::types::Time;

/// Periods a floor (the pause's least share) or a ceiling (the backfill lever's most N) lasts
/// the first time it is set in a recovery; each further time doubles it, up to
/// [`FORGET_MAX_DOUBLINGS`]. Set "for the rest of the recovery" as they were until 2026-12-03,
/// one window over the bound that had nothing to do with the change (on the lab: a PG's own
/// peering as its backfill ended, 273 ms) kept the pause at 50% and N at 1 for 13 minutes
/// while fio's windows stayed at 59-80 ms, under the no-recovery baseline.
pub const FORGET_PERIODS: f64 = 6.0;
/// At most 2^this times [`FORGET_PERIODS`] (8 minutes at 10-s periods).
pub const FORGET_MAX_DOUBLINGS: u32 = 3;

/// Seconds a floor or ceiling set for the `times`-th time in this recovery lasts (backoff:
/// each failed release waits twice as long before the next try).
pub fn forget_after(period: f64, times: u32) -> f64 {
    let doublings = times.saturating_sub(1).min(FORGET_MAX_DOUBLINGS);
    period * FORGET_PERIODS * f64::from(1u32 << doublings)
}

/// The fraction of the bound the ladder steers p99 to once it acts (`--enforcer.aim`).
pub const DEFAULT_AIM: f64 = 0.9;

/// What p99 was judged against when it was too high, for the decision log: the bound itself
/// when p99 is over it, else the aim below it.
pub fn over_what(p99: f64, bound: f64, aim: f64) -> String {
    if p99 > bound || aim >= 1.0 {
        format!("bound {}", crate::units::fmt_ms(bound))
    } else {
        format!(
            "aim {} ({:.0}% of the bound {})",
            crate::units::fmt_ms(bound * aim),
            aim * 100.0,
            crate::units::fmt_ms(bound)
        )
    }
}

/// The flags a pause sets (and the only ones the enforcer ever unsets: its own).
pub const PAUSE_FLAGS: [&str; 2] = ["nobackfill", "norecover"];

#[derive(Debug, Clone, PartialEq)]
pub struct PausePolicy {
    /// One on/off cycle, seconds.
    pub period: f64,
    /// Share of the period paused when the rung is entered.
    pub start_share: f64,
    /// Added while p99 is above the bound, removed while below `lower * bound`.
    pub step: f64,
    /// Never more: recovery must progress (default 0.8).
    pub max_share: f64,
    /// Fraction of the bound under which the pause is reduced (hysteresis).
    pub lower: f64,
    /// Fraction of the bound above which the share is raised ([`DEFAULT_AIM`]).
    pub aim: f64,
    /// Total pause per recovery, seconds; then the rung gives up and says so.
    pub max_total: f64,
    /// Seconds between two decisions (the collection interval): the flags stay as they are
    /// until the next one, so a pause only starts if it can end within the share.
    pub tick: f64,
}

impl Default for PausePolicy {
    fn default() -> Self {
        Self {
            period: 60.0,
            start_share: 0.3,
            step: 0.1,
            max_share: 0.8,
            lower: 0.7,
            aim: DEFAULT_AIM,
            max_total: 1800.0,
            tick: 15.0,
        }
    }
}

/// What the pause rung remembers (persisted with the enforcer's state).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PauseState {
    pub share: f64,
    pub period_start: Time,
    /// Whether the flags are set by us right now.
    pub paused: bool,
    /// Seconds paused in this recovery so far.
    pub paused_total: f64,
    /// When the flags were last set (to add to `paused_total` when unset).
    pub paused_at: Option<Time>,
    /// When they were last unset: recovery gets its share before the next pause even when a
    /// decision comes late.
    #[serde(default)]
    pub unpaused_at: Option<Time>,
    /// No pause starts before this: `ceph osd set` was refused for lack of a cephx capability,
    /// which trying again every period does not fix.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub held_until: Option<Time>,
    /// The share is never lowered below this: lowering it to the share below brought p99 back
    /// over the bound in this recovery (release stops before p99 comes back over).
    #[serde(default)]
    pub floor: f64,
    /// The floor is dropped from this time on ([`forget_after`]); `None`: no floor set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub floor_until: Option<Time>,
    /// Floors set in this recovery (each doubles how long the next one lasts).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub floor_times: u32,
    /// The share before the last reduction, until a period judges it: p99 back over the bound
    /// returns to it and makes it the floor.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lowered_from: Option<f64>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct PauseInput {
    pub now: Time,
    /// p99 over the enforcer's latency window, seconds; `None` when no recent write happened.
    pub p99: Option<f64>,
    pub bound: f64,
    /// That window, seconds (named wherever the p99 is).
    pub window: f64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FlagAction {
    Set,
    Unset,
}

#[derive(Debug, Clone, PartialEq)]
pub struct PauseStep {
    /// `None` when the rung is over (share down to 0, bound lifted, total used up).
    pub next: Option<PauseState>,
    /// A line for the decision log, in numbers, when something changed.
    pub note: Option<String>,
    /// A period ended with p99 within the bound at this share (what the memory keeps).
    pub held: Option<f64>,
}

/// How many steps of share a p99 at `ratio` times the bound is worth: one for a small excess,
/// two per doubling (a p99 20x over the bound does not creep up 10% per period).
pub fn steps_for(ratio: f64) -> f64 {
    if ratio.is_nan() || ratio <= 1.0 {
        return 0.0;
    }
    (2.0 * ratio.log2()).ceil().max(1.0)
}

fn round_share(s: f64) -> f64 {
    (s * 1000.0).round() / 1000.0
}

impl PausePolicy {
    /// The share the pause starts at for a p99 at `ratio` times the bound: the start share plus
    /// [`steps_for`] steps, and at least `remembered` (what held the bound in the last recovery
    /// of this cluster), never above the maximum.
    pub fn entry_share(&self, ratio: f64, remembered: Option<f64>) -> f64 {
        let from_breach = self.start_share + self.step * (steps_for(ratio) - 1.0).max(0.0);
        round_share(
            from_breach
                .max(remembered.unwrap_or(0.0))
                .min(self.max_share),
        )
    }
}

impl PausePolicy {
    /// Seconds actually paused of each period at `share`, the flags changing once per tick.
    pub fn planned(&self, share: f64) -> f64 {
        let mut t = 0.0;
        while t + self.tick <= share * self.period + self.tick / 2.0 + 1e-9
            && t + self.tick <= self.max_share * self.period + 1e-9
        {
            t += self.tick;
        }
        t
    }
}

impl PauseState {
    pub fn start(policy: &PausePolicy, now: Time) -> Self {
        Self::start_at(policy, now, policy.start_share)
    }

    /// A pause starting at `share` of each period (see [`PausePolicy::entry_share`]).
    pub fn start_at(policy: &PausePolicy, now: Time, share: f64) -> Self {
        PauseState {
            share: share.min(policy.max_share),
            period_start: now,
            paused: false,
            paused_total: 0.0,
            paused_at: None,
            unpaused_at: None,
            held_until: None,
            floor: 0.0,
            floor_until: None,
            floor_times: 0,
            lowered_from: None,
        }
    }

    /// Setting the flags failed: not paused, and no pause time counted.
    pub fn cancel(&mut self) {
        self.paused = false;
        self.paused_at = None;
    }

    /// Flags are (or must be taken as) unset now.
    pub fn stop(&mut self, now: Time) {
        self.paused_total = self.paused_so_far(now);
        self.paused = false;
        self.paused_at = None;
        self.unpaused_at = Some(now);
    }

    /// The latest time the flags may stay set, while they are: the maximum share of a period.
    pub fn deadline(&self, policy: &PausePolicy) -> Option<Time> {
        self.paused_at
            .filter(|_| self.paused)
            .map(|t| t + policy.max_share * policy.period)
    }

    /// Seconds paused in this recovery, counting the pause under way.
    pub fn paused_so_far(&self, now: Time) -> f64 {
        self.paused_total + self.paused_at.map_or(0.0, |t| (now - t).max(0.0))
    }
}

/// What the flags must do to go from `paused` to `want_paused`.
pub fn flag_change(paused: bool, want_paused: bool) -> Option<FlagAction> {
    match (paused, want_paused) {
        (false, true) => Some(FlagAction::Set),
        (true, false) => Some(FlagAction::Unset),
        _ => None,
    }
}

/// The pause flags among the OSD map's `flags` that the enforcer did not set (`ours`): someone
/// paused recovery by hand, and the enforcer keeps its hands off.
pub fn foreign_flags(flags: Option<&BTreeSet<String>>, ours: &BTreeSet<String>) -> Vec<String> {
    flags
        .into_iter()
        .flatten()
        .filter(|f| PAUSE_FLAGS.contains(&f.as_str()) && !ours.contains(*f))
        .cloned()
        .collect()
}

/// One decision of the pause rung.
pub fn pause_step(policy: &PausePolicy, state: &PauseState, input: &PauseInput) -> PauseStep {
    let now = input.now;
    let mut next = state.clone();
    let used = next.paused_so_far(now);
    if used >= policy.max_total {
        return PauseStep {
            next: None,
            held: None,
            note: Some(format!(
                "pause budget used up: paused {:.0} s in this recovery (maximum {:.0} s)",
                used, policy.max_total
            )),
        };
    }
    let mut note = None;
    let mut held = None;
    // A new period: adjust the share from the p99 the last one gave.
    if now - next.period_start >= policy.period {
        next.period_start = now;
        let before = next.share;
        let mut why = String::new();
        match input.p99 {
            Some(p) if p > input.bound * policy.aim => {
                if let Some(prev) = next.lowered_from.take() {
                    // The last reduction let p99 back over: return to the share that held and
                    // stay there a while, longer each time it happens.
                    next.floor = prev;
                    next.floor_times += 1;
                    let hold = forget_after(policy.period, next.floor_times);
                    next.floor_until = Some(now + hold);
                    next.share = next.share.max(prev);
                    why = format!(
                        "; lowering it let p99 back over the bound, so {:.0}% is the least for {} ({})",
                        prev * 100.0,
                        crate::units::fmt_window(hold),
                        backoff_note(next.floor_times)
                    );
                } else {
                    let k = steps_for(p / (input.bound * policy.aim));
                    next.share = (next.share + policy.step * k).min(policy.max_share);
                    if k > 1.0 {
                        why = format!(
                            "; {:.1}x over the aim: {k:.0} steps of {:.0}%",
                            p / (input.bound * policy.aim),
                            policy.step * 100.0
                        );
                    }
                }
            }
            Some(p) if p < input.bound * policy.lower => {
                held = Some(before);
                // A floor from a state written before floors lapsed has no end: it lapses now.
                if next.floor > 0.0 && next.floor_until.is_none_or(|t| now >= t) {
                    why = format!(
                        "; the least of {:.0}% has lapsed, lower is tried again",
                        next.floor * 100.0
                    );
                    next.floor = 0.0;
                    next.floor_until = None;
                }
                if next.share - policy.step >= next.floor - 1e-9 {
                    next.lowered_from = Some(before);
                    next.share -= policy.step;
                }
            }
            // No client writes: nothing to protect, recovery gets the time back.
            None => {
                next.lowered_from = None;
                next.share = (next.share - policy.step).max(0.0);
            }
            Some(_) => {
                // Within the bound, above the lower threshold: the share holds, and a reduction
                // that led here is confirmed.
                held = Some(before);
                next.lowered_from = None;
            }
        }
        // Shares are multiples of the step: avoid 0.30000000000000004 in the log.
        next.share = round_share(next.share);
        if next.share <= 0.0 {
            return PauseStep {
                next: None,
                held,
                note: Some(format!(
                    "pause no longer needed: p99 {} below {:.0}% of the bound {} with the pause down to 0%",
                    fmt_over(input.p99, input.window),
                    policy.lower * 100.0,
                    fmt(Some(input.bound))
                )),
            };
        }
        if next.share != before {
            note = Some(format!(
                "pause share {:.0}% -> {:.0}% of each {:.0} s: p99 {} vs bound {}{}{why}{}",
                before * 100.0,
                next.share * 100.0,
                policy.period,
                fmt_over(input.p99, input.window),
                fmt(Some(input.bound)),
                if policy.aim < 1.0 {
                    format!(" (aim {:.0}% of it)", policy.aim * 100.0)
                } else {
                    String::new()
                },
                if next.share >= policy.max_share {
                    " (at the maximum: recovery keeps progressing)"
                } else {
                    ""
                }
            ));
        }
    }
    cycle(policy, &mut next, now);
    PauseStep {
        next: Some(next),
        note,
        held,
    }
}

/// The duty cycle at the share in force: whether the flags are on from now until the next
/// decision (a new period starts when the last one is over). The level controller chooses the
/// share itself and runs only this.
pub fn cycle(policy: &PausePolicy, next: &mut PauseState, now: Time) {
    if now - next.period_start >= policy.period {
        next.period_start = now;
    }
    // The flags stay until the next decision, a tick later: the share is rounded to ticks, but
    // never past the maximum share, so recovery always gets its part of each period.
    let until = now - next.period_start + policy.tick;
    let max = policy.max_share * policy.period;
    let mut want_paused =
        until <= next.share * policy.period + policy.tick / 2.0 + 1e-9 && until <= max + 1e-9;
    // A late decision (a slow collection) must not stretch a pause across periods, nor start
    // one before recovery had its part: bounds on the pause and on the gap themselves.
    if next.paused {
        if let Some(t) = next.paused_at {
            want_paused &= now - t + policy.tick <= max + policy.tick / 2.0 + 1e-9;
        }
    } else {
        if let Some(u) = next.unpaused_at {
            want_paused &= now - u >= policy.period - max - policy.tick / 2.0 - 1e-9;
        }
        want_paused &= next.held_until.is_none_or(|h| now >= h);
    }
    match flag_change(next.paused, want_paused) {
        Some(FlagAction::Set) => {
            next.paused = true;
            next.paused_at = Some(now);
        }
        Some(FlagAction::Unset) => next.stop(now),
        None => {}
    }
}

/// "the 2nd time in this recovery: the next lasts twice as long".
pub fn backoff_note(times: u32) -> String {
    let nth = match times {
        1 => "1st".to_string(),
        2 => "2nd".to_string(),
        3 => "3rd".to_string(),
        n => format!("{n}th"),
    };
    if times > FORGET_MAX_DOUBLINGS {
        format!("the {nth} time in this recovery; the longest it gets")
    } else {
        format!("the {nth} time in this recovery; the next lasts twice as long")
    }
}

/// Leaves a zero count out of the stored state (shared with the lever's ceiling count).
pub(super) fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// "200 ms over the last 5m": a p99 always with its window.
fn fmt_over(s: Option<f64>, window: f64) -> String {
    match s {
        Some(v) => format!(
            "{} over the last {}",
            crate::units::fmt_ms(v),
            crate::units::fmt_window(window)
        ),
        None => fmt(None),
    }
}

fn fmt(s: Option<f64>) -> String {
    match s {
        Some(v) => crate::units::fmt_ms(v),
        None => "n/a (no writes)".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BOUND: f64 = 0.090;

    /// A 30 s period decided every 5 s.
    fn pp() -> PausePolicy {
        PausePolicy {
            period: 30.0,
            tick: 5.0,
            aim: 1.0,
            ..PausePolicy::default()
        }
    }

    fn input(now: Time, p99_ms: f64) -> PauseInput {
        PauseInput {
            now,
            p99: (!p99_ms.is_nan()).then_some(p99_ms / 1000.0),
            bound: BOUND,
            window: 300.0,
        }
    }

    /// Runs the rung every 5 s with p99 from `p99_at(now)`; returns (time, flag action) pairs
    /// and the last state.
    fn run(
        policy: &PausePolicy,
        secs: u32,
        p99_at: impl Fn(Time) -> f64,
    ) -> (Vec<(Time, FlagAction)>, Option<PauseState>, Vec<String>) {
        let mut state = Some(PauseState::start(policy, 0.0));
        let mut flags = Vec::new();
        let mut notes = Vec::new();
        let mut t = 0.0;
        while t <= f64::from(secs) {
            let Some(s) = &state else { break };
            let step = pause_step(policy, s, &input(t, p99_at(t)));
            let now_paused = step.next.as_ref().is_some_and(|n| n.paused);
            if let Some(f) = flag_change(s.paused, now_paused) {
                flags.push((t, f));
            }
            notes.extend(step.note);
            state = step.next;
            t += 5.0;
        }
        (flags, state, notes)
    }

    #[test]
    fn pauses_for_the_share_of_each_period() {
        // p99 at the bound: neither up nor down, 30% of 30 s = 9 s -> set at 0, unset at 10.
        let (flags, state, _) = run(&pp(), 59, |_| 90.0);
        assert_eq!(
            flags,
            vec![
                (0.0, FlagAction::Set),
                (10.0, FlagAction::Unset),
                (30.0, FlagAction::Set),
                (40.0, FlagAction::Unset)
            ]
        );
        assert_eq!(state.unwrap().share, 0.3);
    }

    #[test]
    fn share_grows_above_the_bound_but_never_past_the_maximum() {
        let (_, state, notes) = run(&pp(), 600, |_| 200.0);
        assert_eq!(state.unwrap().share, 0.8);
        assert!(
            notes[0].starts_with(
                "pause share 30% -> 60% of each 30 s: p99 200 ms over the last 5m vs bound 90.0 ms; 2.2x over the aim: 3 steps of 10%"
            ),
            "{notes:?}"
        );
        assert!(
            notes.iter().any(|n| n.contains("at the maximum")),
            "{notes:?}"
        );
    }

    /// The lab (2026-12-03, run I): one window over the bound after a reduction (a PG's own
    /// peering as its backfill ended) made 50% the least for the rest of a recovery that then
    /// ran 13 minutes with p99 under the no-recovery baseline. A floor lapses after 6 periods,
    /// and each further one lasts twice as long (at most 8x).
    #[test]
    fn a_floor_lapses_and_each_new_one_lasts_twice_as_long() {
        let p = pp();
        let step = |s: &PauseState, t: Time, ms: f64| {
            let st = pause_step(&p, s, &input(t, ms));
            (st.next.unwrap(), st.note)
        };
        let s = PauseState::start_at(&p, 0.0, 0.5);
        let (s, _) = step(&s, 30.0, 40.0);
        assert_eq!((s.share, s.lowered_from), (0.4, Some(0.5)));
        let (s, note) = step(&s, 60.0, 120.0);
        assert_eq!((s.share, s.floor, s.floor_until), (0.5, 0.5, Some(240.0)));
        assert!(note
            .unwrap()
            .contains("so 50% is the least for 3m (the 1st time"));
        let mut s = s;
        for t in [90.0, 120.0, 150.0, 180.0, 210.0] {
            s = step(&s, t, 40.0).0;
            assert_eq!(s.share, 0.5, "the floor holds at {t}");
        }
        let (s, note) = step(&s, 240.0, 40.0);
        assert_eq!((s.share, s.floor, s.floor_until), (0.4, 0.0, None));
        assert!(note
            .unwrap()
            .contains("the least of 50% has lapsed, lower is tried again"));
        let (s, note) = step(&s, 270.0, 120.0);
        assert_eq!(
            (s.share, s.floor_until, s.floor_times),
            (0.5, Some(630.0), 2)
        );
        assert!(note.unwrap().contains("the least for 6m (the 2nd time"));
        assert_eq!(forget_after(30.0, 4), 1440.0);
        assert_eq!(forget_after(30.0, 9), 1440.0, "at most 8x");
        assert!(backoff_note(4).contains("the longest it gets"));
    }

    /// States written before floors lapsed: a floor without an end lapses at the next low
    /// period, and the new fields are left out of a state that has none.
    #[test]
    fn a_floor_without_an_end_from_an_older_state_lapses() {
        let p = pp();
        let mut s = PauseState::start_at(&p, 0.0, 0.5);
        s.floor = 0.5;
        let json = serde_json::to_string(&s).unwrap();
        assert!(
            !json.contains("floor_until") && !json.contains("floor_times"),
            "{json}"
        );
        let back: PauseState = serde_json::from_str(&json).unwrap();
        let st = pause_step(&p, &back, &input(30.0, 40.0));
        assert_eq!(st.next.unwrap().share, 0.4);
    }

    #[test]
    fn just_under_the_bound_but_over_the_aim_the_share_still_grows() {
        // 85 ms against a 90 ms bound: within the bound, but the OSDs' p99 misses the client's
        // own share of its latency, and clients would sit just over the bound.
        let aimed = PausePolicy { aim: 0.9, ..pp() };
        let (_, state, notes) = run(&aimed, 59, |_| 85.0);
        assert_eq!(state.unwrap().share, 0.4, "{notes:?}");
        assert!(
            notes[0].contains("vs bound 90.0 ms (aim 90% of it)"),
            "{notes:?}"
        );
        // Between the lower threshold and the aim, the share holds.
        let (_, state, _) = run(&aimed, 59, |_| 70.0);
        assert_eq!(state.unwrap().share, 0.3);
    }

    #[test]
    fn well_below_the_bound_the_pause_winds_down_and_ends_unpaused() {
        let (flags, state, notes) = run(&pp(), 600, |_| 30.0);
        assert!(state.is_none(), "rung over");
        assert_eq!(flags.last().map(|f| f.1), Some(FlagAction::Unset));
        assert!(
            notes.last().unwrap().starts_with("pause no longer needed"),
            "{notes:?}"
        );
        // Between the lower threshold and the bound: the share holds (hysteresis).
        let (_, state, _) = run(&pp(), 300, |_| 80.0);
        assert_eq!(state.unwrap().share, 0.3);
    }

    #[test]
    fn only_flags_the_enforcer_did_not_set_are_foreign() {
        let flags: BTreeSet<String> = ["sortbitwise", "nobackfill", "norecover"]
            .map(String::from)
            .into();
        let ours = BTreeSet::from(["norecover".to_string()]);
        assert_eq!(foreign_flags(Some(&flags), &ours), ["nobackfill"]);
        assert!(foreign_flags(None, &ours).is_empty());
        assert_eq!(flag_change(false, true), Some(FlagAction::Set));
        assert_eq!(flag_change(true, false), Some(FlagAction::Unset));
        assert_eq!(flag_change(true, true), None);
    }

    #[test]
    fn the_pause_budget_per_recovery_is_bounded() {
        let p = PausePolicy {
            max_total: 60.0,
            ..pp()
        };
        let (flags, state, notes) = run(&p, 3600, |_| 500.0);
        assert!(state.is_none());
        assert!(
            notes.last().unwrap().starts_with("pause budget used up"),
            "{notes:?}"
        );
        // Paused time: from each Set to its Unset; at most the budget plus one 5 s step.
        let mut total = 0.0;
        let mut since = None;
        for (t, f) in flags {
            match f {
                FlagAction::Set => since = Some(t),
                FlagAction::Unset => total += t - since.take().unwrap(),
            }
        }
        assert!(total <= 65.0, "{total}");
    }

    #[test]
    fn the_state_survives_a_restart() {
        let p = pp();
        let s = pause_step(&p, &PauseState::start(&p, 0.0), &input(0.0, 200.0))
            .next
            .unwrap();
        let json = serde_json::to_string(&s).unwrap();
        assert_eq!(serde_json::from_str::<PauseState>(&json).unwrap(), s);
    }

    #[test]
    fn late_decisions_never_stretch_a_pause_past_the_maximum_share() {
        // 80% of 60 s decided every 15 s, but some decisions come 17 s late (slow collections).
        let p = PausePolicy {
            period: 60.0,
            tick: 15.0,
            start_share: 0.8,
            ..PausePolicy::default()
        };
        let mut s = PauseState::start(&p, 0.0);
        let mut t = 0.0;
        let mut paused_for: f64 = 0.0;
        let mut gap: f64 = f64::MAX;
        let mut last_change = 0.0;
        let mut was = false;
        for i in 0..200 {
            let step = pause_step(&p, &s, &input(t, 200.0));
            let Some(n) = step.next else { break };
            if n.paused != was {
                if was {
                    paused_for = paused_for.max(t - last_change);
                } else if i > 0 {
                    gap = gap.min(t - last_change);
                }
                last_change = t;
                was = n.paused;
            }
            s = n;
            t += if i % 3 == 2 { 32.0 } else { 15.0 };
        }
        // Paused at most one late tick past 48 s, and recovery always got a slice in between.
        assert!(paused_for <= 48.0 + 17.0, "{paused_for}");
        assert!(gap >= 15.0, "{gap}");
    }

    #[test]
    fn no_writes_give_recovery_its_time_back() {
        let (_, state, notes) = run(&pp(), 300, |_| f64::NAN);
        assert!(state.is_none(), "{notes:?}");
        assert!(
            notes.iter().any(|n| n.contains("pause no longer needed")),
            "{notes:?}"
        );
    }

    #[test]
    fn the_planned_pause_is_rounded_to_ticks() {
        let p = PausePolicy {
            period: 60.0,
            tick: 15.0,
            ..PausePolicy::default()
        };
        assert_eq!(p.planned(0.3), 15.0);
        assert_eq!(p.planned(0.8), 45.0);
        assert_eq!(p.planned(0.1), 0.0);
    }
}
