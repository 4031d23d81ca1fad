//! The levels: what each asks of the cluster, ordered from the most recovery to the least.
//!
//! Levels are cumulative: a level keeps what the one above it asks and adds its own restraint
//! (or, above the operator's level, its own push). The operator's level asks nothing: it is the
//! cluster as the operator configured it.

use serde::{Deserialize, Serialize};

/// The mClock profile a level runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Profile {
    /// Whatever the operator runs (nothing set by us).
    Operator,
    HighRecoveryOps,
    HighClientOps,
}

impl Profile {
    pub fn name(self) -> Option<&'static str> {
        match self {
            Profile::Operator => None,
            Profile::HighRecoveryOps => Some("high_recovery_ops"),
            Profile::HighClientOps => Some("high_client_ops"),
        }
    }
}

/// What one level asks of the cluster. `None` everywhere: the operator's own settings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Level {
    /// mClock only.
    pub profile: Profile,
    /// `osd_max_backfills` (under mClock with `osd_mclock_override_recovery_settings true`,
    /// which only Quincy 17.2.6 and later honour); None: the operator's.
    pub backfills: Option<u32>,
    /// wpq only: `osd_recovery_sleep` seconds (with `osd_recovery_max_active 1`).
    pub recovery_sleep: Option<f64>,
    /// At most this many PGs backfill at once, the others held where their data is (the
    /// backfill lever); None: as many as Ceph lets.
    pub backfilling_pgs: Option<usize>,
    /// Share of each pause period with `nobackfill`+`norecover` set; 0: no pause.
    pub pause_share: f64,
}

/// How the decision records name the level that changes nothing: where each recovery starts.
pub const OPERATORS_LEVEL: &str = "the operator's settings";

impl Level {
    /// The operator's own settings: nothing asked.
    pub fn operator() -> Self {
        Level {
            profile: Profile::Operator,
            backfills: None,
            recovery_sleep: None,
            backfilling_pgs: None,
            pause_share: 0.0,
        }
    }

    /// One phrase for the decision log: what this level asks beyond the operator's settings.
    pub fn describe(&self) -> String {
        let mut parts = Vec::new();
        if let Some(p) = self.profile.name() {
            parts.push(p.to_string());
        }
        if let Some(b) = self.backfills {
            parts.push(format!("osd_max_backfills {b}"));
        }
        if let Some(s) = self.recovery_sleep {
            parts.push(format!("osd_recovery_sleep {s}"));
        }
        if let Some(n) = self.backfilling_pgs {
            parts.push(format!("at most {n} PGs backfilling"));
        }
        if self.pause_share > 0.0 {
            parts.push(format!(
                "paused {:.0}% of each period",
                self.pause_share * 100.0
            ));
        }
        if parts.is_empty() {
            OPERATORS_LEVEL.to_string()
        } else {
            parts.join(", ")
        }
    }
}

/// The OSDs' op queue, as far as the levels depend on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Queue {
    /// mClock; `backfills_honoured`: Quincy 17.2.6 and later, where `osd_max_backfills` acts
    /// with the override (Pacific forces 1000 and has no override).
    Mclock {
        backfills_honoured: bool,
    },
    Wpq,
}

/// What the cluster is, for the list: read at the recovery's start.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Facts {
    pub queue: Queue,
    /// The profile the OSDs run as the operator configured them (`high_client_ops` is
    /// Pacific's default, `balanced` from Quincy on).
    pub operator_profile: String,
    /// The operator's `osd_max_backfills` as the OSDs run it (1 from Reef on).
    pub operator_backfills: u32,
    /// PGs that backfill at once where the backfill lever begins (with every restraint above
    /// it in force: on Reef one backfill per OSD), at most the PGs the recovery moves: the
    /// lever's N lies below it (a larger N would hold nothing).
    pub moving_pgs: usize,
}

/// The fastest level the operator allows (`--enforcer.max-level`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Ceiling {
    /// Never faster than the operator's settings: the controller only throttles.
    Operator,
    /// `high_recovery_ops` with the release's backfills (issue 35's default: the release's own
    /// fastest profile, nothing its authors did not ship).
    #[default]
    HighRecoveryOps,
    /// `high_recovery_ops` and `osd_max_backfills` raised up to this many, where honoured.
    Backfills(u32),
}

/// The most backfills per OSD `--enforcer.max-level backfills:N` may allow (Ceph's own
/// `osd_max_backfills` accepts more, but a controller that raises it past this on a cluster
/// it was not measured on is a surprise, not a policy).
pub const MOST_BACKFILLS: u32 = 16;

impl std::str::FromStr for Ceiling {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || {
            format!(
                "invalid max level {s:?}: expected operator (only throttle), high_recovery_ops (the default) or backfills:N (high_recovery_ops with osd_max_backfills raised up to N, 2 to {MOST_BACKFILLS}, on releases that honour it: Quincy 17.2.6 and later)"
            )
        };
        match s.trim() {
            "operator" => Ok(Ceiling::Operator),
            "high_recovery_ops" => Ok(Ceiling::HighRecoveryOps),
            other => {
                let n: u32 = other
                    .strip_prefix("backfills:")
                    .and_then(|n| n.trim().parse().ok())
                    .ok_or_else(bad)?;
                if !(2..=MOST_BACKFILLS).contains(&n) {
                    return Err(bad());
                }
                Ok(Ceiling::Backfills(n))
            }
        }
    }
}

impl std::fmt::Display for Ceiling {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Ceiling::Operator => f.write_str("operator"),
            Ceiling::HighRecoveryOps => f.write_str("high_recovery_ops"),
            Ceiling::Backfills(n) => write!(f, "backfills:{n}"),
        }
    }
}

impl<'de> Deserialize<'de> for Ceiling {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

/// What the operator allows below the operator's level.
#[derive(Debug, Clone, PartialEq)]
pub struct Allowed {
    pub ceiling: Ceiling,
    /// The backfill lever (N PGs at most) may be used.
    pub lever: bool,
    /// The pause may be used, up to this share of each period (0: no pause).
    pub pause_max_share: f64,
    /// wpq: the recovery sleeps, in turn.
    pub recovery_sleeps: Vec<f64>,
}

/// Each backfill-lever level lets this fraction of the level above's PGs backfill: a step
/// costs clients about as much at 19 PGs as at 2 (the throughput saturates with the PGs, so
/// equal ratios are closer to equal effects than equal differences).
const LEVER_RATIO: f64 = 0.65;
/// Each pause level adds this share of the period.
pub const PAUSE_STEP: f64 = 0.1;
/// The first pause level's share.
const PAUSE_FIRST: f64 = 0.2;

/// The ordered levels and where the operator's own is.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Levels {
    pub list: Vec<Level>,
    /// Index of the operator's level: where a recovery starts and where the controller
    /// returns when it ends.
    pub home: usize,
}

impl Levels {
    pub fn top(&self) -> usize {
        0
    }

    pub fn bottom(&self) -> usize {
        self.list.len().saturating_sub(1)
    }

    pub fn get(&self, at: usize) -> &Level {
        &self.list[at.min(self.bottom())]
    }

    /// The level with the most recovery below the operator's that restrains recovery at least
    /// as much as `l` (a level of another recovery's list: the memory of where the bound
    /// held): no more PGs backfilling, no shorter pause, no shorter recovery sleep, no more
    /// backfills where both lower them; each compared only where this list has levels of that
    /// kind (a list made while no PG backfills has no lever: the memory's N is then no
    /// restraint to match, not a reason to go to the bottom). None when `l` restrains nothing
    /// or nothing lies below the operator's level.
    pub fn restraining_as_much(&self, l: &Level) -> Option<usize> {
        if *l == Level::operator() || self.bottom() <= self.home {
            return None;
        }
        let below = &self.list[self.home + 1..];
        let lever = below.iter().any(|x| x.backfilling_pgs.is_some());
        let pause = below.iter().any(|x| x.pause_share > 0.0);
        let sleep = below.iter().any(|x| x.recovery_sleep.is_some());
        let as_much = |x: &Level| {
            (!lever
                || x.backfilling_pgs.unwrap_or(usize::MAX)
                    <= l.backfilling_pgs.unwrap_or(usize::MAX))
                && (!pause || x.pause_share >= l.pause_share - 1e-9)
                && (!sleep
                    || x.recovery_sleep.unwrap_or(0.0) >= l.recovery_sleep.unwrap_or(0.0) - 1e-9)
                && match (x.backfills, l.backfills) {
                    (Some(a), Some(b)) => a <= b,
                    _ => true,
                }
        };
        (self.home + 1..self.list.len())
            .find(|&j| as_much(&self.list[j]))
            .or(Some(self.bottom()))
    }
}

/// The levels for this cluster, from the most recovery (index 0) to the least.
pub fn levels(facts: &Facts, allowed: &Allowed) -> Levels {
    let mut list = Vec::new();
    let mclock = matches!(facts.queue, Queue::Mclock { .. });
    let honoured = match facts.queue {
        Queue::Mclock { backfills_honoured } => backfills_honoured,
        Queue::Wpq => true,
    };
    // Above the operator's level, most first.
    let push_profile = mclock
        && allowed.ceiling != Ceiling::Operator
        && facts.operator_profile != "high_recovery_ops";
    let up_profile = if push_profile {
        Profile::HighRecoveryOps
    } else {
        Profile::Operator
    };
    if let Ceiling::Backfills(most) = allowed.ceiling {
        if honoured {
            for b in (facts.operator_backfills + 1..=most).rev() {
                list.push(Level {
                    profile: up_profile,
                    backfills: Some(b),
                    ..Level::operator()
                });
            }
        }
    }
    if push_profile {
        list.push(Level {
            profile: Profile::HighRecoveryOps,
            ..Level::operator()
        });
    }
    let home = list.len();
    list.push(Level::operator());
    // Below it, each adds a restraint to the one above.
    let mut floor = Level::operator();
    if mclock {
        if facts.operator_profile != "high_client_ops" {
            floor.profile = Profile::HighClientOps;
            list.push(floor.clone());
        }
        // An operator who raised the backfills (with the override) gets them lowered, one at
        // a time, before any PG is held.
        if honoured {
            for b in (1..facts.operator_backfills).rev() {
                floor.backfills = Some(b);
                list.push(floor.clone());
            }
        }
    } else {
        // wpq: one backfill per OSD, then the sleeps.
        if facts.operator_backfills > 1 {
            floor.backfills = Some(1);
            list.push(floor.clone());
        }
        for s in &allowed.recovery_sleeps {
            floor.recovery_sleep = Some(*s);
            list.push(floor.clone());
        }
    }
    if allowed.lever && facts.moving_pgs > 1 {
        let mut n = facts.moving_pgs;
        loop {
            let next = ((n as f64 * LEVER_RATIO).round() as usize).clamp(1, n - 1);
            floor.backfilling_pgs = Some(next);
            list.push(floor.clone());
            n = next;
            if n == 1 {
                break;
            }
        }
    }
    let mut share = PAUSE_FIRST;
    while allowed.pause_max_share > 0.0 && share <= allowed.pause_max_share + 1e-9 {
        floor.pause_share = (share * 100.0).round() / 100.0;
        list.push(floor.clone());
        share += PAUSE_STEP;
    }
    Levels { list, home }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn allowed(ceiling: Ceiling) -> Allowed {
        Allowed {
            ceiling,
            lever: true,
            pause_max_share: 0.8,
            recovery_sleeps: vec![0.2, 0.5, 1.0],
        }
    }

    fn reef(moving: usize) -> Facts {
        Facts {
            queue: Queue::Mclock {
                backfills_honoured: true,
            },
            operator_profile: "balanced".into(),
            operator_backfills: 1,
            moving_pgs: moving,
        }
    }

    fn pacific(moving: usize) -> Facts {
        Facts {
            queue: Queue::Mclock {
                backfills_honoured: false,
            },
            operator_profile: "high_client_ops".into(),
            operator_backfills: 1000,
            moving_pgs: moving,
        }
    }

    #[test]
    fn on_reef_the_list_runs_from_more_backfills_through_the_operators_profile_to_the_pause() {
        let l = levels(&reef(8), &allowed(Ceiling::Backfills(3)));
        let names: Vec<String> = l.list.iter().map(Level::describe).collect();
        assert_eq!(
            &names[..5],
            [
                "high_recovery_ops, osd_max_backfills 3",
                "high_recovery_ops, osd_max_backfills 2",
                "high_recovery_ops",
                "the operator's settings",
                "high_client_ops",
            ]
        );
        assert_eq!(l.home, 3);
        assert_eq!(l.get(l.bottom()).pause_share, 0.8);
        assert_eq!(l.get(l.bottom()).backfilling_pgs, Some(1));
    }

    #[test]
    fn every_level_asks_at_least_as_much_restraint_as_the_one_above_it() {
        for facts in [reef(19), pacific(19), reef(2), pacific(1)] {
            for ceiling in [
                Ceiling::Operator,
                Ceiling::HighRecoveryOps,
                Ceiling::Backfills(4),
            ] {
                let l = levels(&facts, &allowed(ceiling));
                for w in l.list.windows(2) {
                    let (a, b) = (&w[0], &w[1]);
                    assert!(b.pause_share >= a.pause_share, "{a:?} {b:?}");
                    let n = |x: &Level| x.backfilling_pgs.unwrap_or(usize::MAX);
                    assert!(n(b) <= n(a), "{a:?} {b:?}");
                    let bf = |x: &Level| x.backfills.unwrap_or(facts.operator_backfills);
                    assert!(bf(b) <= bf(a), "{a:?} {b:?}");
                    assert_ne!(a, b, "no level twice");
                }
                assert_eq!(l.get(l.home), &Level::operator());
            }
        }
    }

    #[test]
    fn the_ceiling_bounds_what_lies_above_the_operators_level() {
        let l = levels(&reef(8), &allowed(Ceiling::Operator));
        assert_eq!(l.home, 0, "nothing faster than the operator's settings");
        let l = levels(&reef(8), &allowed(Ceiling::HighRecoveryOps));
        assert_eq!(l.home, 1);
        assert_eq!(l.get(0).profile, Profile::HighRecoveryOps);
        assert_eq!(l.get(0).backfills, None);
        // Pacific forces 1000 backfills: no backfills level, whatever the ceiling.
        let l = levels(&pacific(8), &allowed(Ceiling::Backfills(4)));
        assert!(l.list.iter().all(|x| x.backfills.is_none()), "{l:?}");
        assert_eq!(l.home, 1);
    }

    #[test]
    fn a_profile_the_operator_already_runs_is_no_level() {
        // Pacific's default is the throttle profile itself: below the operator's level comes
        // the backfill lever at once.
        let l = levels(&pacific(19), &allowed(Ceiling::HighRecoveryOps));
        assert_eq!(l.get(l.home + 1).profile, Profile::Operator);
        assert_eq!(l.get(l.home + 1).backfilling_pgs, Some(12));
        let ns: Vec<usize> = l.list.iter().filter_map(|x| x.backfilling_pgs).collect();
        // 19 -> 12 -> 8 -> 5 -> 3 -> 2 -> 1, then the pause at 1.
        assert_eq!(&ns[..6], [12, 8, 5, 3, 2, 1]);
    }

    #[test]
    fn backfills_the_operator_raised_come_down_before_any_pg_is_held() {
        let mut facts = reef(8);
        facts.operator_backfills = 3;
        let l = levels(&facts, &allowed(Ceiling::HighRecoveryOps));
        let below: Vec<String> = l.list[l.home + 1..l.home + 4]
            .iter()
            .map(Level::describe)
            .collect();
        assert_eq!(
            below,
            [
                "high_client_ops",
                "high_client_ops, osd_max_backfills 2",
                "high_client_ops, osd_max_backfills 1",
            ]
        );
        // Pacific forces 1000: nothing to lower there.
        let l = levels(&pacific(8), &allowed(Ceiling::HighRecoveryOps));
        assert!(l.list.iter().all(|x| x.backfills.is_none()));
    }

    #[test]
    fn on_wpq_the_sleeps_come_before_the_lever() {
        let facts = Facts {
            queue: Queue::Wpq,
            operator_profile: String::new(),
            operator_backfills: 2,
            moving_pgs: 3,
        };
        let l = levels(&facts, &allowed(Ceiling::Backfills(4)));
        let names: Vec<String> = l.list.iter().map(Level::describe).collect();
        assert_eq!(
            &names[..7],
            [
                "osd_max_backfills 4",
                "osd_max_backfills 3",
                "the operator's settings",
                "osd_max_backfills 1",
                "osd_max_backfills 1, osd_recovery_sleep 0.2",
                "osd_max_backfills 1, osd_recovery_sleep 0.5",
                "osd_max_backfills 1, osd_recovery_sleep 1",
            ]
        );
    }

    #[test]
    fn the_max_level_reads_as_the_operator_writes_it_and_says_what_is_wrong() {
        for (text, want) in [
            ("operator", Ceiling::Operator),
            ("high_recovery_ops", Ceiling::HighRecoveryOps),
            ("backfills:3", Ceiling::Backfills(3)),
        ] {
            let c: Ceiling = text.parse().unwrap();
            assert_eq!(c, want);
            assert_eq!(c.to_string(), text);
        }
        for bad in [
            "",
            "fast",
            "backfills:1",
            "backfills:17",
            "backfills:x",
            "backfills",
        ] {
            let e = bad.parse::<Ceiling>().unwrap_err();
            assert!(e.contains("backfills:N"), "{bad}: {e}");
        }
    }

    /// The memory of another recovery's level, on this recovery's list: the first level that
    /// restrains as much (its N made from other moving PGs); the bottom when the operator
    /// allows less now; nothing for the operator's own level.
    #[test]
    fn a_remembered_level_maps_to_the_first_level_restraining_as_much() {
        let a = Allowed {
            recovery_sleeps: vec![],
            ..allowed(Ceiling::HighRecoveryOps)
        };
        let then = levels(&pacific(19), &a);
        let now = levels(&pacific(7), &a);
        let n = |l: &Levels, k: usize| {
            l.list
                .iter()
                .position(|x| x.backfilling_pgs == Some(k) && x.pause_share == 0.0)
        };
        // 19 PGs: 12, 8, 5, 3, 2, 1; 7 PGs: 5, 3, 2, 1.
        let eight = then.get(n(&then, 8).expect("8 PGs"));
        assert_eq!(now.restraining_as_much(eight), n(&now, 5));
        let two = then.get(n(&then, 2).expect("2 PGs"));
        assert_eq!(now.restraining_as_much(two), n(&now, 2));
        let paused = then.get(then.bottom());
        assert_eq!(now.restraining_as_much(paused), Some(now.bottom()));
        // No pause allowed now: the bottom, N = 1, is the most restraint there is.
        let no_pause = levels(
            &pacific(7),
            &Allowed {
                pause_max_share: 0.0,
                ..a.clone()
            },
        );
        assert_eq!(
            no_pause.restraining_as_much(paused),
            Some(no_pause.bottom())
        );
        // A list made while one PG backfills has no lever: two PGs remembered is the first
        // level below the operator's (the pause's first share), not the pause's last.
        let no_lever = levels(&pacific(1), &a);
        assert_eq!(no_lever.restraining_as_much(two), Some(no_lever.home + 1));
        assert_eq!(now.restraining_as_much(&Level::operator()), None);
    }
}
