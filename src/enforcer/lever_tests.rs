//! Rung 3, the backfill lever, through `decide` and `apply_outcome` on the lab's recorded
//! rebalance (tests/fixtures/upmap/20-rebalance: 19 PGs backfilling at once under mClock, two
//! with the balancer's own upmap items), the cluster following each command as Ceph does
//! ([`FakeUpmap`]), under a paused clock.

use std::time::Duration;

use super::actor::FakeUpmap;
use super::backfill_limit::{LEVER_RUNG, PAUSE_RUNG};
use super::decide::decide;
use super::effect::{CommandError, Effect, Outcome};
use super::event::DecisionRecord;
use super::observation::{BackfillView, Observation};
use super::outcome::{apply_outcome, remember_first};
use super::policy::*;
use super::state::*;
use super::tests::{osds, T0};
use super::types::{MAX_BACKFILLS, MCLOCK_OVERRIDE, MCLOCK_PROFILE_KEY};
use crate::backfill::BalancerStep;
use crate::ceph::ops::OpsError;
use crate::ceph::parse::test_support::fixture;
use crate::ceph::parse::{pgs, upmap};
use crate::ceph::CephError;

pub(super) fn rebalance() -> FakeUpmap {
    FakeUpmap {
        pgs: pgs::parse(&fixture("upmap/20-rebalance.ceph_pg_dump_pgs_brief.json")).unwrap(),
        map: upmap::view(&fixture("upmap/20-rebalance.ceph_osd_dump.json")).unwrap(),
        balancer: Some(
            upmap::balancer_status(&fixture("upmap/20-rebalance.ceph_balancer_status.json"))
                .unwrap(),
        ),
        no_balancer_module: false,
        before: Default::default(),
    }
}

/// The shipped timings (`for` 30s, 1m window and settle), enforce mode, bound 32 ms; the OSDs
/// run high_client_ops already (Pacific's default), so rung 1 is no change.
pub(super) fn lever_policy() -> Policy {
    Policy {
        mode: Mode::Enforce,
        baseline: BaselineSpec::Fixed(Duration::from_millis(16)),
        ..Policy::default()
    }
}

/// A change of the cluster between the OSD map read and a command.
type ClusterChange = fn(&mut FakeUpmap);

pub(super) struct LeverSim {
    pub(super) policy: Policy,
    pub(super) state: EnforcerState,
    pub(super) now: Time,
    pub(super) cluster: FakeUpmap,
    pub(super) notes: Vec<DecisionRecord>,
    commands: Vec<String>,
    /// A state write that fails (what `persist_first` then reports).
    store_fails: bool,
    undersized: u64,
    /// Ceph refuses pg-upmap-items for lack of a cephx grant (EACCES).
    refuse: bool,
    /// A released PG peers (no backfill word in `pg dump`) until the test says otherwise, as
    /// on the lab for a few seconds.
    peer_first: bool,
    /// The config database's `osd` section, as `config set` / `config rm` leave it.
    pub(super) config: std::collections::BTreeMap<String, Option<String>>,
    /// Changes the cluster when a release of a PG it names is about to run, after the OSD map
    /// it was planned from was read (a pool deleted, an OSD purged meanwhile).
    at_release: Option<(upmap::PgId, ClusterChange)>,
    /// Releases of this PG are refused with EINVAL, whatever they put back.
    refuse_release: Option<upmap::PgId>,
    /// The OSD map flags set on the cluster (`osd set` / `osd unset`).
    pub(super) flags: std::collections::BTreeSet<String>,
}

impl LeverSim {
    pub(super) fn new(policy: Policy, cluster: FakeUpmap) -> Self {
        LeverSim {
            policy,
            state: EnforcerState::default(),
            now: T0,
            cluster,
            notes: Vec::new(),
            commands: Vec::new(),
            store_fails: false,
            undersized: 0,
            refuse: false,
            peer_first: false,
            config: Default::default(),
            at_release: None,
            refuse_release: None,
            flags: Default::default(),
        }
    }

    fn view(&self) -> BackfillView {
        BackfillView {
            pgs: self.cluster.pgs.clone(),
            map: self.cluster.map.clone(),
            balancer: if self.cluster.no_balancer_module {
                Ok(None)
            } else {
                self.cluster
                    .balancer
                    .clone()
                    .map(Some)
                    .ok_or_else(|| "no".into())
            },
        }
    }

    fn backfilling(&self) -> usize {
        self.view().backfilling()
    }

    pub(super) fn obs(&self, p99_ms: Option<f64>) -> Observation {
        let moving = self.backfilling() as u64;
        Observation {
            p99: p99_ms.map(|p| p / 1000.0),
            baseline: Some(0.016),
            misplaced_objects: moving * 300,
            pgs_recovering: moving,
            undersized_pgs: self.undersized,
            osd_profiles: osds("high_client_ops"),
            backfill: Some(Ok(self.view())),
            configured: self.config.clone(),
            ..Observation::quiet()
        }
    }

    /// One cycle: decide, then each effect as the loop runs it; the lever's view only in the
    /// cycles the loop reads it.
    pub(super) fn step(&mut self, mut obs: Observation) {
        if !super::lever::view_needed(&self.policy, &self.state, &obs, self.now) {
            obs.backfill = None;
        }
        let d = decide(&self.policy, &obs, &self.state, self.now);
        self.notes.extend(d.notes.clone());
        self.state = d.next;
        for p in d.effects {
            let outcome = if self.policy.mode != Mode::Enforce {
                Outcome::Simulated
            } else if p.persist_first.is_some() && self.store_fails {
                self.state = remember_first(std::mem::take(&mut self.state), &p.effect);
                Outcome::NotSaved {
                    read_back: None,
                    why: "the state could not be stored first".into(),
                }
            } else {
                if p.persist_first.is_some() {
                    self.state = remember_first(std::mem::take(&mut self.state), &p.effect);
                }
                self.run(&p.effect)
            };
            let after = apply_outcome(
                &self.policy,
                &obs,
                std::mem::take(&mut self.state),
                &p.effect,
                &outcome,
                self.now,
            );
            self.notes.extend(after.records);
            self.state = after.next;
        }
    }

    /// Runs `effect` on the cluster and applies its outcome to a copy of the state (what the
    /// loop does with a lifecycle step's effect).
    fn carry_out(&mut self, effect: &Effect) -> super::outcome::AfterEffect {
        let outcome = self.run(effect);
        apply_outcome(
            &self.policy,
            &self.obs(None),
            self.state.clone(),
            effect,
            &outcome,
            self.now,
        )
    }

    fn run(&mut self, effect: &Effect) -> Outcome {
        match effect {
            Effect::Backfill(b) => {
                let mut released = Vec::new();
                for id in &b.release {
                    self.commands
                        .push(b.release_command(*id).replace("ceph ", ""));
                    if let Some((_, change)) = self.at_release.filter(|(at, _)| at == id) {
                        change(&mut self.cluster);
                        self.at_release = None;
                    }
                    if let Some(e) = self.refusal(*id, b.restore_items(*id)) {
                        released.push((*id, Err(e)));
                        continue;
                    }
                    self.cluster
                        .set_items(*id, b.restore.get(id).map_or(&[][..], |v| &v[..]));
                    if self.peer_first {
                        let pgid = id.to_string();
                        if let Some(pg) = self.cluster.pgs.iter_mut().find(|p| p.pgid == pgid) {
                            pg.state = "remapped+peering".to_string();
                        }
                    }
                    released.push((*id, Ok(())));
                }
                let mut balancer = Vec::new();
                if let BalancerStep::Pause { .. } = b.balancer {
                    self.commands.push("balancer off".into());
                    self.cluster.balancer.as_mut().unwrap().active = false;
                    balancer.push(("balancer off".to_string(), Ok(())));
                }
                let mut held = Vec::new();
                for h in &b.hold {
                    // Recorded before it is added.
                    assert!(
                        self.state.backfill.held.contains_key(&h.pgid),
                        "{} not recorded first",
                        h.pgid
                    );
                    self.commands.push(if h.items.is_empty() {
                        format!("osd rm-pg-upmap-items {}", h.pgid)
                    } else {
                        format!("osd pg-upmap-items {}", h.pgid)
                    });
                    if self.refuse {
                        held.push((
                            h.pgid,
                            Err(super::effect::CommandError {
                                missing: None,
                                message: "Error EACCES: access denied".into(),
                                refused: Some(super::types::Refused {
                                    command: format!("ceph osd pg-upmap-items {}", h.pgid),
                                    cap: crate::ceph::caps::needed(&crate::ceph::CephCommand::new(
                                        ["osd", "pg-upmap-items", "2.1", "1", "3"],
                                    )),
                                }),
                            }),
                        ));
                        continue;
                    }
                    self.cluster.set_items(h.pgid, &h.items);
                    held.push((h.pgid, Ok(())));
                }
                if let BalancerStep::Restore { to, .. } = &b.balancer {
                    self.commands
                        .push(format!("balancer restore {}", to.active));
                    *self.cluster.balancer.as_mut().unwrap() = to.clone();
                    balancer.push(("balancer on".to_string(), Ok(())));
                }
                Outcome::Backfill {
                    released,
                    held,
                    balancer,
                }
            }
            Effect::SetFlags { flags, .. } => {
                self.commands
                    .extend(flags.iter().map(|f| format!("osd set {f}")));
                self.flags.extend(flags.iter().cloned());
                Outcome::Flags {
                    set: flags.iter().map(|f| (f.clone(), Ok(()))).collect(),
                    unset: vec![],
                }
            }
            Effect::UnsetFlags { flags, .. } => {
                self.commands
                    .extend(flags.iter().map(|f| format!("osd unset {f}")));
                for f in flags {
                    self.flags.remove(f);
                }
                Outcome::Flags {
                    set: vec![],
                    unset: flags.iter().map(|f| (f.clone(), Ok(()))).collect(),
                }
            }
            Effect::Config(a) => {
                for c in &a.changes {
                    self.commands.push(match &c.to {
                        Some(v) => format!("config set osd {} {v}", c.key),
                        None => format!("config rm osd {}", c.key),
                    });
                    self.config.insert(c.key.clone(), c.to.clone());
                }
                Outcome::done()
            }
        }
    }

    /// What the monitors answer a release of `id` putting back `items`: ENOENT for a PG or an
    /// OSD that does not exist (the lab's words and exit code), EINVAL when the test says so;
    /// as it reaches the enforcer, through the loop's conversions.
    fn refusal(&self, id: upmap::PgId, items: &[upmap::UpmapItem]) -> Option<CommandError> {
        let (code, stderr) = match self.cluster.refusal(id, items) {
            Some(enoent) => (2, enoent),
            None if self.refuse_release == Some(id) => (
                22,
                "Error EINVAL: num of osd pairs (4) > pool size (3)".to_string(),
            ),
            None => return None,
        };
        let command = crate::backfill::record::set_items_command(id, items);
        Some(
            OpsError::Ceph(CephError::Failed {
                command,
                code: Some(code),
                stderr,
            })
            .into(),
        )
    }

    /// Every 15 s for `secs`, p99 from `p99_ms`.
    fn run_for(&mut self, secs: u32, p99_ms: Option<f64>) {
        self.run_with(secs, |s| s.obs(p99_ms));
    }

    /// Every 15 s for `secs`, what `obs` says the cluster reports.
    fn run_with(&mut self, secs: u32, obs: impl Fn(&LeverSim) -> Observation) {
        for _ in 0..secs / 15 {
            self.now += 15.0;
            let o = obs(self);
            self.step(o);
        }
    }

    /// The PGs that backfill (or wait to) now.
    fn running(&self) -> Vec<String> {
        self.cluster
            .pgs
            .iter()
            .filter(|p| crate::backfill::plan::backfills(p))
            .map(|p| p.pgid.clone())
            .collect()
    }

    /// Every backfill running now finishes.
    fn finish_running(&mut self) {
        for id in self.running() {
            self.cluster.finish(&id);
        }
    }

    fn held(&self) -> usize {
        self.state.backfill.held.len()
    }

    fn n(&self) -> Option<usize> {
        self.state.ladder.lever.as_ref().map(|l| l.n)
    }

    fn events(&self) -> Vec<&str> {
        self.notes.iter().map(|n| n.event.as_str()).collect()
    }

    fn sim(notes: &[DecisionRecord], event: &str) -> Vec<String> {
        notes
            .iter()
            .filter(|n| n.event == event)
            .map(|n| n.message.clone())
            .collect()
    }
}

/// A breach of `p99_ms` once the recovery's first window is past (there, the entry halves N
/// twice at most: [`on_the_recoverys_first_window_the_entry_halves_n_twice_at_most`]).
fn to_the_lever(sim: &mut LeverSim, p99_ms: f64) {
    if !sim.state.recovery_active {
        for wait in [15.0, 70.0] {
            sim.now += wait;
            let obs = sim.obs(Some(20.0));
            sim.step(obs);
        }
    }
    breach_to_the_lever(sim, p99_ms);
}

/// p99 above the bound until rung 3 is entered.
fn breach_to_the_lever(sim: &mut LeverSim, p99_ms: f64) {
    for _ in 0..40 {
        sim.now += 15.0;
        let obs = sim.obs(Some(p99_ms));
        sim.step(obs);
        if sim.state.ladder.rung == LEVER_RUNG {
            return;
        }
    }
    panic!("not on rung 3: {:?}\n{:#?}", sim.state.ladder, sim.notes);
}

/// The lab (runs M, O, 2026-12-04): the breach that called the lever in came 8-12 s into the
/// rebalance, its window 2.0x and 3.7x the bound, mostly the reweight's own peering; N entered
/// at 1 and the recovery took 3.6x the balanced row's time or more. Entered on that window, N
/// is halved twice at most, and the ESCALATE line says why; later windows judge it as ever.
#[test]
fn on_the_recoverys_first_window_the_entry_halves_n_twice_at_most() {
    let mut sim = LeverSim::new(lever_policy(), rebalance());
    breach_to_the_lever(&mut sim, 150.0);
    assert!(sim.now - T0 < 65.0, "entered within the first window");
    assert_eq!(sim.n(), Some(4), "19 >> 2, not 19 >> 5");
    let esc = messages_of(&sim, "ESCALATE");
    assert!(
        esc.last().unwrap().contains("(19 PGs backfill now; p99 4.7x the bound over the recovery's first window, mostly its own peering: halved 2 times at most)"),
        "{esc:?}"
    );
    // The same breach a window later: five halvings.
    let mut sim = LeverSim::new(lever_policy(), rebalance());
    to_the_lever(&mut sim, 150.0);
    assert_eq!(sim.n(), Some(1));
    let esc = messages_of(&sim, "ESCALATE");
    assert!(
        esc.last()
            .unwrap()
            .contains("(19 PGs backfill now; p99 4.7x the bound)"),
        "{esc:?}"
    );
}

#[test]
fn a_breach_enters_rung_3_at_an_n_from_how_far_p99_is_over_and_holds_the_rest() {
    let mut sim = LeverSim::new(lever_policy(), rebalance());
    assert_eq!(sim.backfilling(), 19);
    // 36 ms against a bound of 32 ms: 1.1x, one step: 19 >> 1 = 9 (48 ms, 1.5x, would be two:
    // 19 >> 2 = 4).
    to_the_lever(&mut sim, 36.0);
    assert_eq!(sim.n(), Some(9));
    let esc = messages_of(&sim, "ESCALATE");
    assert!(
        esc.last().unwrap().contains("escalating to rung 3 (backfill lever: at most 9 PGs backfilling at once) (19 PGs backfill now; p99 1.1x the bound)"),
        "{esc:?}"
    );
    // The two PGs with the balancer's own items are never touched; the rest are held down to 9.
    assert_eq!(sim.backfilling(), 9);
    assert_eq!(sim.held(), 10);
    assert!(!sim
        .state
        .backfill
        .held
        .contains_key(&"2.b".parse().unwrap()));
    assert!(!sim
        .state
        .backfill
        .held
        .contains_key(&"2.1e".parse().unwrap()));
    // The balancer was paused before the first hold, and its state kept to put back.
    assert_eq!(
        sim.commands.first().map(String::as_str),
        Some("balancer off")
    );
    assert_eq!(
        sim.state
            .backfill
            .balancer
            .as_ref()
            .map(|b| (b.active, b.mode.as_str())),
        Some((true, "upmap"))
    );
    let line = messages_of(&sim, "BACKFILL");
    assert!(
        line[0].starts_with("BACKFILL: held 10 PGs (")
            && line[0].contains("where their data is, mapped back to their acting OSDs")
            && line[0].contains("mgr balancer paused")
            && line[0].ends_with("9 PGs backfill now, 10 held by the enforcer"),
        "{line:?}"
    );
    // The log says it was carried out (the experiment's chart and a reader of /decisions tell
    // the cluster's changes from notes by it).
    assert!(sim
        .notes
        .iter()
        .filter(|n| n.event == "BACKFILL")
        .all(|n| n.performed));
    // No config change and no change counted for any of it.
    assert!(sim.state.changes.is_empty());
}

fn messages_of(sim: &LeverSim, event: &str) -> Vec<String> {
    LeverSim::sim(&sim.notes, event)
}

#[test]
fn n_halves_each_period_over_the_bound_and_rises_by_one_below_it_until_nothing_is_held() {
    let mut sim = LeverSim::new(lever_policy(), rebalance());
    to_the_lever(&mut sim, 36.0);
    assert_eq!(sim.n(), Some(9));
    // A period (the 1m window, from after the held PGs peered) still above the bound: 9 -> 4,
    // at the first cycle after it ended.
    sim.run_for(60, Some(48.0));
    assert_eq!(sim.n(), Some(9), "the holds' own peering is not judged");
    sim.run_for(15, Some(48.0));
    assert_eq!(sim.n(), Some(4));
    assert_eq!(sim.backfilling(), 4);
    let lim = messages_of(&sim, "BACKFILL_LIMIT");
    assert!(
        lim[0].starts_with("BACKFILL_LIMIT at most 9 -> 4 PGs backfilling at once: client p99 write 48.0 ms still above the bound 32.0 ms (1.5x the bound)"),
        "{lim:?}"
    );
    // One window later the move is judged.
    let low_from = sim.now;
    sim.run_for(60, Some(20.0));
    assert!(
        messages_of(&sim, "EFFECT")
            .iter()
            .any(|e| e.starts_with("EFFECT of BACKFILL_LIMIT at most 9 -> 4 PGs backfilling")),
        "{:?}",
        sim.notes
    );
    // Well below the bound: one more after three such periods in a row (three minutes here),
    // released oldest first.
    let n = sim.n().unwrap();
    while sim.n() == Some(n) && sim.now < low_from + 600.0 {
        sim.run_for(15, Some(20.0));
    }
    assert_eq!(sim.n(), Some(n + 1));
    assert!(
        sim.now - low_from >= 180.0,
        "raised {}s after",
        sim.now - low_from
    );
    assert_eq!(
        sim.state.memory.held.as_ref().and_then(|h| h.n),
        Some(n),
        "the N that held is remembered"
    );
    // Backfills finish meanwhile; what is held is released as N allows, never all at once.
    let mut most = 0;
    for _ in 0..40 {
        if let Some(first) = sim.running().first() {
            sim.cluster.finish(first);
        }
        sim.run_for(60, Some(20.0));
        most = most.max(sim.backfilling());
        assert!(
            sim.backfilling() <= sim.n().unwrap_or(usize::MAX).max(2),
            "{}",
            sim.backfilling()
        );
        if sim.state.ladder.lever.is_none() {
            break;
        }
    }
    assert_eq!(sim.held(), 0);
    assert!(sim.state.ladder.lever.is_none(), "{:?}", sim.state.ladder);
    assert!(most < 19);
    // The balancer is back as it was.
    assert!(sim.cluster.balancer.as_ref().unwrap().active);
    assert!(sim.state.backfill.is_empty());
}

#[test]
fn the_recovery_is_not_over_while_pgs_are_held() {
    let mut sim = LeverSim::new(lever_policy(), rebalance());
    to_the_lever(&mut sim, 36.0);
    // Every backfill that runs finishes: nothing moves, only held PGs are left.
    sim.finish_running();
    assert_eq!(sim.backfilling(), 0);
    let obs = sim.obs(Some(48.0));
    assert!(!obs.recovery_active(), "Ceph's counts say nothing recovers");
    sim.now += 15.0;
    sim.step(obs);
    assert!(sim.state.recovery_active, "held PGs keep the recovery on");
    assert!(!sim.events().contains(&"RECOVERY_FINISHED"));
    // Released at the enforcer's pace, not all at once at "recovery end": a window after the
    // slots opened (the finished backfills re-peer first), one per window. p99 is over the aim
    // but nothing backfills, so it is not the recovery's doing: one PG still goes.
    assert_eq!(sim.backfilling(), 0);
    sim.run_for(15, Some(48.0));
    assert_eq!(sim.backfilling(), 1);
    assert_eq!(sim.held(), 9);
}

/// The lab (2026-12-02, fourth run): 0.9 s after the last release `pg dump` still showed that
/// PG clean as while held, nothing misplaced: RECOVERY_FINISHED, and its backfill (a minute and
/// a half there) came after the recovery had "ended".
#[test]
fn the_recovery_is_not_over_the_moment_the_last_pg_is_released() {
    let mut sim = LeverSim::new(lever_policy(), rebalance());
    to_the_lever(&mut sim, 36.0);
    sim.finish_running();
    // One released per window; each backfills and finishes before the next goes, but for the
    // last.
    for _ in 0..30 {
        sim.now += 15.0;
        let obs = sim.obs(Some(20.0));
        sim.step(obs);
        if sim.held() == 0 {
            break;
        }
        sim.finish_running();
    }
    assert_eq!(sim.held(), 0);
    assert!(sim.state.backfill.is_empty(), "the balancer is back");
    // The next dump is the one from before the release: the PG clean, nothing misplaced.
    sim.finish_running();
    sim.now += 2.0;
    let stale = sim.obs(Some(20.0));
    assert!(!stale.recovery_active());
    sim.step(stale);
    assert!(
        sim.state.recovery_active,
        "a PG released 2 s ago still counts"
    );
    assert!(!sim.events().contains(&"RECOVERY_FINISHED"));
    // Past the stats' lag with nothing to move: the recovery is over.
    sim.now += crate::backfill::record::PG_STATS_LAG;
    let obs = sim.obs(Some(20.0));
    sim.step(obs);
    assert!(!sim.state.recovery_active);
    assert!(sim.events().contains(&"RECOVERY_FINISHED"));
    assert!(
        sim.state.backfill.releasing.is_empty(),
        "{:?}",
        sim.state.backfill
    );
}

#[test]
fn at_n_1_still_over_the_bound_after_the_settle_time_the_pause_follows_with_the_holds_kept() {
    let mut sim = LeverSim::new(lever_policy(), rebalance());
    // 200 ms: 6.25x the bound, N starts at 1.
    to_the_lever(&mut sim, 200.0);
    assert_eq!(sim.n(), Some(1));
    sim.run_for(150, Some(200.0));
    assert_eq!(sim.state.ladder.rung, PAUSE_RUNG);
    assert_eq!(sim.n(), Some(1), "the N = 1 holds stay under the pause");
    assert_eq!(sim.backfilling(), 1);
    let esc = messages_of(&sim, "ESCALATE");
    assert!(
        esc.last().unwrap().starts_with("ESCALATE: rung 3 (backfill lever: at most 1 PGs backfilling at once) left client p99 write 200 ms over the last 1m > bound 32.0 ms for ")
            && esc.last().unwrap().contains(" at N = 1 with 1 recovery op per PG, the least backfill the lever runs: on this cluster even one backfilling PG costs clients more than the bound allows, so the pause shares out the time; escalating to rung 4 (pause nobackfill+norecover")
            && esc.last().unwrap().ends_with("; the backfill lever's holds stay (at most 1 PGs backfilling at once)"),
        "{esc:?}"
    );
    assert!(sim.commands.iter().any(|c| c == "osd set nobackfill"));
    // The pause winds down to 0%: back to rung 3 at N = 1.
    sim.run_for(20 * 60, Some(10.0));
    assert!(sim.state.ladder.pause.is_none());
    assert!(sim.state.ladder.rung <= LEVER_RUNG);
}

#[test]
fn an_undersized_pg_releases_everything_at_once_and_suspends_the_bound() {
    let mut sim = LeverSim::new(lever_policy(), rebalance());
    to_the_lever(&mut sim, 36.0);
    assert_eq!(sim.held(), 10);
    sim.undersized = 1;
    sim.now += 15.0;
    let obs = sim.obs(Some(48.0));
    sim.step(obs);
    assert_eq!(sim.held(), 0, "{:#?}", sim.notes);
    assert!(sim.state.ladder.lever.is_none());
    assert_eq!(sim.state.phase, Phase::Suspended);
    assert!(
        sim.cluster.balancer.as_ref().unwrap().active,
        "balancer back"
    );
    let lines = messages_of(&sim, "BACKFILL");
    assert!(
        lines.last().unwrap().contains("released 10 PGs (")
            && lines
                .last()
                .unwrap()
                .contains("redundancy at risk (1 PGs undersized): recovery first"),
        "{lines:?}"
    );
}

#[test]
fn require_min_compat_client_below_luminous_skips_rung_3_to_the_pause() {
    let mut cluster = rebalance();
    cluster.map.require_min_compat_client = "jewel".into();
    let mut sim = LeverSim::new(lever_policy(), cluster);
    sim.run_for(5 * 60, Some(48.0));
    assert_eq!(sim.state.ladder.rung, PAUSE_RUNG);
    assert_eq!(sim.held(), 0);
    let skip = messages_of(&sim, "LADDER_SKIP");
    assert!(
        skip.iter().any(|s| s.starts_with(
            "rung 3 (backfill lever) skipped: require_min_compat_client is jewel, below luminous"
        ) && s.ends_with("the ladder goes on to the pause (rung 4)")),
        "{skip:?}"
    );
    assert!(!sim.commands.iter().any(|c| c.contains("upmap")));
}

/// The lab's recorded recovery from the PG log (19 PGs recovering, nothing backfilling), p99
/// 48 ms (1.5x the bound) for 5 minutes: the ladder is at the pause.
fn log_recovery_to_the_pause() -> LeverSim {
    let cluster = FakeUpmap {
        pgs: pgs::parse(&fixture("upmap/10-logrecovery.ceph_pg_dump_pgs_brief.json")).unwrap(),
        map: upmap::view(&fixture("upmap/10-logrecovery.ceph_osd_dump.json")).unwrap(),
        ..rebalance()
    };
    let mut sim = LeverSim::new(lever_policy(), cluster);
    // One PG undersized there: the bound would be suspended; without it, nothing backfills.
    sim.cluster.pgs.retain(|p| !p.has_state("undersized"));
    for _ in 0..20 {
        sim.now += 15.0;
        let mut obs = sim.obs(Some(48.0));
        obs.pgs_recovering = 19;
        obs.degraded_objects = 100;
        sim.step(obs);
    }
    assert_eq!(sim.state.ladder.rung, PAUSE_RUNG);
    sim
}

/// The PGs the log could not cover now backfill (the lab's recorded rebalance).
fn backfill_begins(sim: &mut LeverSim) {
    let rebalancing = rebalance();
    sim.cluster.pgs = rebalancing.pgs;
    sim.cluster.map = rebalancing.map;
}

#[test]
fn recovery_from_the_log_has_nothing_to_hold_and_goes_to_the_pause() {
    let mut sim = log_recovery_to_the_pause();
    let skip = messages_of(&sim, "LADDER_SKIP");
    assert!(
        skip.iter().any(|s| s.contains(
            "no PG waits for or does backfill (recovery from the PG log, or degraded objects only)"
        )),
        "{skip:?}"
    );
    assert_eq!(sim.n(), None);
    assert_eq!(sim.held(), 0);

    // Then backfill begins (as on the lab, a minute into a rebalance), p99 still over the bound
    // under the pause: the lever joins the pause, the rung stays 4.
    backfill_begins(&mut sim);
    sim.run_for(15, Some(48.0));
    assert_eq!(sim.state.ladder.rung, PAUSE_RUNG);
    assert!(sim.state.ladder.pause.is_some());
    assert_eq!(sim.n(), Some(4), "48 ms is 1.5x the bound: 19 >> 2");
    assert_eq!(sim.backfilling(), 4);
    assert_eq!(sim.held(), 15);
    let joined = messages_of(&sim, "BACKFILL_LIMIT");
    assert!(
        joined[0].starts_with("BACKFILL_LIMIT: PGs now wait for backfill and client p99 write 48.0 ms over the last 1m is still above the bound 32.0 ms: ")
            && joined[0].contains("rung 3 (backfill lever: at most 4 PGs backfilling at once) joins the pause (19 PGs backfill now; p99 1.5x the bound)"),
        "{joined:?}"
    );
    // Once in, it is not entered again.
    sim.run_for(60, Some(48.0));
    assert_eq!(messages_of(&sim, "BACKFILL_LIMIT").len(), 1);
}

#[test]
fn the_lever_does_not_join_a_pause_that_holds_the_aim() {
    let mut sim = log_recovery_to_the_pause();
    backfill_begins(&mut sim);
    // 25 ms: within the aim (28.8 ms) and above the lower threshold: nothing to add.
    sim.run_for(60, Some(25.0));
    assert_eq!(sim.n(), None);
    assert_eq!(sim.held(), 0);
}

#[test]
fn backfill_lever_off_skips_rung_3_and_says_so() {
    let mut p = lever_policy();
    p.ladder.backfill_lever = false;
    let mut sim = LeverSim::new(p, rebalance());
    sim.run_for(5 * 60, Some(48.0));
    assert_eq!(sim.state.ladder.rung, PAUSE_RUNG);
    let skip = messages_of(&sim, "LADDER_SKIP");
    assert_eq!(
        skip,
        ["rung 3 (backfill lever) skipped: --enforcer.backfill-lever is off; the ladder goes on to the pause (rung 4)"]
    );
    assert!(sim
        .commands
        .iter()
        .all(|c| !c.contains("upmap") && !c.contains("balancer")));
}

#[test]
fn observe_mode_changes_nothing_and_says_what_it_would_have_held() {
    let mut p = lever_policy();
    p.mode = Mode::Observe;
    let mut sim = LeverSim::new(p, rebalance());
    to_the_lever(&mut sim, 36.0);
    sim.run_for(120, Some(48.0));
    assert!(sim.commands.is_empty());
    assert_eq!(sim.backfilling(), 19);
    assert!(sim.state.backfill.is_empty(), "nothing recorded as held");
    let lines = messages_of(&sim, "BACKFILL");
    assert!(
        lines[0].starts_with("(observe mode) BACKFILL: would have held 10 PGs (")
            && lines[0].ends_with(": rung 3 (backfill lever: at most 9 PGs backfilling at once); 19 PGs backfill now, 9 would; nothing was changed on the cluster"),
        "{lines:?}"
    );
    assert!(messages_of(&sim, "ESCALATE")
        .iter()
        .all(|e| e.starts_with("(observe mode) would: ESCALATE")));
    assert!(
        sim.notes.iter().all(|n| !n.performed),
        "nothing carried out"
    );
    // Said again only when what it would do changes (N halved each period), not every cycle.
    assert_eq!(lines.len(), 3, "{lines:?}");
}

#[test]
fn a_hold_whose_record_cannot_be_stored_first_is_not_made() {
    let mut sim = LeverSim::new(lever_policy(), rebalance());
    sim.store_fails = true;
    to_the_lever(&mut sim, 36.0);
    assert_eq!(sim.backfilling(), 19);
    assert_eq!(sim.held(), 0, "nothing recorded for what was never added");
    assert!(sim.state.backfill.balancer.is_none());
    assert!(!sim.commands.iter().any(|c| c.contains("pg-upmap-items")));
    let failed = messages_of(&sim, "ACTION_FAILED");
    assert!(
        failed[0].starts_with("FAILED BACKFILL: not changing the cluster: the state could not be stored first; no PG held"),
        "{failed:?}"
    );
}

#[test]
fn shutdown_and_a_start_after_a_crash_release_exactly_ours_and_put_the_balancer_back() {
    let mut sim = LeverSim::new(lever_policy(), rebalance());
    to_the_lever(&mut sim, 36.0);
    assert_eq!(sim.held(), 10);
    // Someone changed one of ours since: it is theirs now, left alone.
    let theirs = *sim.state.backfill.held.keys().next().unwrap();
    sim.cluster
        .map
        .pg_upmap_items
        .insert(theirs, vec![upmap::UpmapItem { from: 9, to: 8 }]);
    // The state as a restart reads it.
    let stored = EnforcerState::from_bytes(&sim.state.to_bytes().unwrap(), "test").unwrap();
    assert_eq!(stored.backfill, sim.state.backfill);
    let view = sim.view();
    let (next, planned, lines) = super::lever::give_back(&sim.policy, &stored, &view, "START");
    let changed = crate::backfill::Forget::Changed {
        now: vec![upmap::UpmapItem { from: 9, to: 8 }],
    };
    assert_eq!(
        lines,
        [format!(
            "START: {theirs} is no longer held by the enforcer: {changed}"
        )]
    );
    let planned = planned.expect("something to give back");
    let Effect::Backfill(b) = &planned.effect else {
        panic!("{planned:?}")
    };
    assert_eq!(b.release.len(), 9);
    assert!(!b.release.contains(&theirs));
    assert!(b.hold.is_empty());
    assert!(matches!(
        b.balancer,
        BalancerStep::Restore { turn_on: true, .. }
    ));
    assert!(
        planned.persist_first.is_none(),
        "giving back needs nothing stored first"
    );
    // Carried out: nothing of ours left, the balancer back on, the record empty.
    sim.state = next;
    let after = sim.carry_out(&planned.effect);
    assert!(after.next.backfill.is_empty(), "{:?}", after.next.backfill);
    assert!(sim.cluster.balancer.as_ref().unwrap().active);
    assert_eq!(
        sim.cluster.map.pg_upmap_items.get(&theirs).map(Vec::len),
        Some(1)
    );
    assert!(
        after.records[0]
            .message
            .starts_with("BACKFILL: START: released 9 PGs ("),
        "{:?}",
        after.records
    );
    // Observe mode says so and touches nothing.
    let mut observe = sim.policy.clone();
    observe.mode = Mode::Observe;
    let (_, planned, lines) = super::lever::give_back(&observe, &stored, &view, "SHUTDOWN");
    assert!(planned.is_none());
    assert!(
        lines[0].contains("observe mode does not touch the cluster"),
        "{lines:?}"
    );
}

/// Reef on Debian trixie: the mgr offers no balancer module (`ceph balancer status` is an
/// unknown command). Nothing can remove the lever's entries, so the lever holds without pausing
/// one (it used to hold nothing: `balancer off` failed), says so once, and gives back all.
#[test]
fn without_a_balancer_module_the_lever_holds_without_pausing_one_and_gives_back_all() {
    let mut cluster = rebalance();
    cluster.no_balancer_module = true;
    let mut sim = LeverSim::new(lever_policy(), cluster);
    to_the_lever(&mut sim, 36.0);
    assert_eq!(sim.n(), Some(9));
    assert_eq!(sim.held(), 10);
    assert_eq!(sim.backfilling(), 9);
    assert!(
        !sim.commands.iter().any(|c| c.starts_with("balancer")),
        "{:?}",
        sim.commands
    );
    assert!(sim.state.backfill.balancer.is_none());
    let said = messages_of(&sim, "BACKFILL");
    assert_eq!(
        said.iter()
            .filter(|m| m.contains("the mgr offers no balancer module"))
            .count(),
        1,
        "{said:?}"
    );
    let (next, planned, lines) =
        super::lever::give_back(&sim.policy, &sim.state, &sim.view(), "SHUTDOWN");
    assert!(lines.is_empty(), "{lines:?}");
    let planned = planned.expect("something to give back");
    sim.state = next;
    let after = sim.carry_out(&planned.effect);
    assert!(after.next.backfill.is_empty(), "{:?}", after.next.backfill);
    assert_eq!(sim.backfilling(), 19);
}

/// A balancer the lever paused whose module is gone since (the mgr failed over to one that
/// cannot load it): it cannot be put back; the record forgets it with a line saying what to run
/// once the module is back, and the holds are given back as usual.
#[test]
fn a_paused_balancer_whose_module_is_gone_is_forgotten_with_what_to_run_later() {
    let mut sim = LeverSim::new(lever_policy(), rebalance());
    to_the_lever(&mut sim, 36.0);
    assert!(sim.state.backfill.balancer.is_some());
    sim.cluster.no_balancer_module = true;
    let (next, planned, lines) =
        super::lever::give_back(&sim.policy, &sim.state, &sim.view(), "SHUTDOWN");
    assert_eq!(
        lines,
        ["SHUTDOWN: the mgr balancer the lever paused (it was on, mode upmap) is no longer offered by the mgr (ceph balancer status: command not known); once its module is back: ceph balancer mode upmap; ceph balancer on"]
    );
    assert!(next.backfill.balancer.is_none());
    let planned = planned.expect("the holds");
    let Effect::Backfill(b) = &planned.effect else {
        panic!("{planned:?}")
    };
    assert_eq!(b.release.len(), 10);
    assert_eq!(b.balancer, BalancerStep::Nothing);
}

/// A PG the balancer moves (its items are what moves it: the lab's CI run had three such) is
/// held by taking its items off, recorded first, and released by putting them back.
#[test]
fn a_pg_moved_by_someone_elses_items_is_held_and_theirs_put_back_on_release() {
    let mut cluster = rebalance();
    let theirs = vec![upmap::UpmapItem { from: 3, to: 2 }];
    let id: upmap::PgId = "2.2".parse().unwrap();
    // 2.2: up [1,0,2], acting [1,0,3]; CRUSH alone gives [1,0,3].
    cluster.map.pg_upmap_items.insert(id, theirs.clone());
    let mut sim = LeverSim::new(lever_policy(), cluster);
    to_the_lever(&mut sim, 36.0);
    assert_eq!(sim.held(), 10);
    let held = &sim.state.backfill.held[&id];
    assert_eq!(
        (held.items.clone(), held.before.clone()),
        (vec![], theirs.clone())
    );
    assert!(!sim.cluster.map.pg_upmap_items.contains_key(&id));
    assert!(sim
        .commands
        .contains(&"osd rm-pg-upmap-items 2.2".to_string()));
    let line = messages_of(&sim, "BACKFILL");
    assert!(
        line[0].contains("2.2 (active+remapped+backfilling) its upmap items [3->2] (not ours, what moves it) taken off, put back on release"),
        "{line:?}"
    );
    // Held, it is ours: counted as held, not as backfilling, and not planned again.
    sim.run_for(30, Some(36.0));
    assert!(sim.state.backfill.held.contains_key(&id));
    // Shutdown: theirs go back, ours are removed, the record is empty.
    let view = sim.view();
    let (next, planned, _) = super::lever::give_back(&sim.policy, &sim.state, &view, "SHUTDOWN");
    let planned = planned.expect("something to give back");
    let Effect::Backfill(b) = &planned.effect else {
        panic!("{planned:?}")
    };
    assert_eq!(b.restore.get(&id), Some(&theirs));
    assert_eq!(
        super::outcome::by_hand(&planned.effect)
            .iter()
            .filter(|c| c.contains(" 2.2"))
            .collect::<Vec<_>>(),
        vec!["ceph osd pg-upmap-items 2.2 3 2"]
    );
    sim.state = next;
    let after = sim.carry_out(&planned.effect);
    assert!(after.next.backfill.is_empty(), "{:?}", after.next.backfill);
    assert_eq!(sim.cluster.map.pg_upmap_items.get(&id), Some(&theirs));
    assert!(sim
        .commands
        .contains(&"osd pg-upmap-items 2.2 3 2".to_string()));
    assert!(
        after.records[0]
            .message
            .contains("1 with the upmap items they had before put back"),
        "{:?}",
        after.records
    );
}

/// PGs the lever cannot hold (here whole-set pg_upmap entries) keep more than N backfilling:
/// the log says which and why, once.
#[test]
fn pgs_that_cannot_be_held_beside_the_n_are_named_once() {
    let mut cluster = rebalance();
    for id in ["2.1", "2.2", "2.7"] {
        cluster.map.pg_upmap.insert(id.parse().unwrap());
    }
    let mut sim = LeverSim::new(lever_policy(), cluster);
    to_the_lever(&mut sim, 400.0);
    let n = sim.n().unwrap();
    assert!(n < 3, "N = {n}");
    assert_eq!(sim.backfilling(), 3);
    sim.run_for(60, Some(400.0));
    let lines: Vec<String> = messages_of(&sim, "BACKFILL_LIMIT")
        .into_iter()
        .filter(|m| m.contains("cannot be held"))
        .collect();
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(
        lines[0].contains(&format!("N = {n}, but 3 PGs backfill: 3 of them cannot be held (2.1 has a pg_upmap entry (not ours): not touched; 2.2 has a pg_upmap entry")),
        "{lines:?}"
    );
}

#[test]
fn blind_for_the_restore_time_releases_everything() {
    let mut sim = LeverSim::new(lever_policy(), rebalance());
    to_the_lever(&mut sim, 36.0);
    assert_eq!(sim.held(), 10);
    // Stale, but not for long: nothing held or released on old data.
    let stale = |sim: &LeverSim| Observation {
        stale: Some("collector status is down".into()),
        ..sim.obs(Some(48.0))
    };
    for _ in 0..4 {
        sim.now += 15.0;
        let o = stale(&sim);
        sim.step(o);
    }
    assert_eq!(sim.held(), 10);
    // Blind for --enforcer.blind-restore-after (3m): everything back.
    for _ in 0..10 {
        sim.now += 15.0;
        let o = stale(&sim);
        sim.step(o);
    }
    assert_eq!(sim.held(), 0);
    assert!(sim.cluster.balancer.as_ref().unwrap().active);
    assert!(
        messages_of(&sim, "BACKFILL")
            .last()
            .unwrap()
            .contains("BLIND: no fresh data for 3m"),
        "{:?}",
        messages_of(&sim, "BACKFILL")
    );
}

#[test]
fn the_memory_of_n_is_the_most_the_next_recovery_starts_at() {
    let mut sim = LeverSim::new(lever_policy(), rebalance());
    sim.state.memory.held = Some(Held {
        at: T0 - 86_400.0,
        rung: LEVER_RUNG,
        share: None,
        n: Some(3),
    });
    to_the_lever(&mut sim, 40.0);
    assert_eq!(sim.n(), Some(3));
    let esc = messages_of(&sim, "ESCALATE");
    assert!(
        esc.last().unwrap().ends_with("(19 PGs backfill now; 3 held the bound in the last recovery of this cluster): PGs above 3 are held where their data is (pg-upmap-items), released as p99 allows"),
        "{esc:?}"
    );
}

#[test]
fn a_lever_command_refused_for_a_cephx_grant_says_what_to_grant_and_the_pause_follows() {
    let mut sim = LeverSim::new(lever_policy(), rebalance());
    sim.refuse = true;
    sim.run_for(2 * 60, Some(36.0));
    let failed = messages_of(&sim, "ACTION_FAILED");
    assert!(
        failed[0].contains(r#"PERMISSION DENIED: Ceph refused `ceph osd pg-upmap-items 2.1` (EACCES): the cephx user this exporter runs as"#)
            && failed[0].contains(r#"lacks mon 'allow command "osd pg-upmap-items"'"#),
        "{failed:?}"
    );
    assert!(sim.state.refused.is_some(), "status says it");
    assert!(sim.state.ladder.lever.is_none());
    assert_eq!(failed.len(), 1, "not tried again: {failed:?}");
    // Nothing was added: the balancer goes back, the record empties; then the pause.
    sim.run_for(3 * 60, Some(36.0));
    assert!(sim.state.backfill.is_empty(), "{:?}", sim.state.backfill);
    assert!(sim.cluster.balancer.as_ref().unwrap().active);
    assert_eq!(sim.state.ladder.rung, PAUSE_RUNG);
    assert!(messages_of(&sim, "LADDER_SKIP")
        .iter()
        .any(|s| s.contains("for lack of a cephx grant")));
}

#[test]
fn a_memory_of_the_pause_gives_n_1_no_settle_time() {
    let mut sim = LeverSim::new(lever_policy(), rebalance());
    sim.state.memory.held = Some(Held {
        at: T0 - 86_400.0,
        rung: PAUSE_RUNG,
        share: Some(0.5),
        n: Some(1),
    });
    to_the_lever(&mut sim, 36.0);
    assert_eq!(sim.n(), Some(1), "the N that held under the pause");
    sim.run_for(15, Some(36.0));
    assert_eq!(sim.state.ladder.rung, PAUSE_RUNG, "{:?}", sim.state.ladder);
    assert!(messages_of(&sim, "ESCALATE")
        .last()
        .unwrap()
        .contains("the last recovery of this cluster needed the pause to hold the bound"));
}

#[test]
fn an_entry_missing_from_a_map_that_cannot_show_it_yet_stays_recorded() {
    let mut sim = LeverSim::new(lever_policy(), rebalance());
    to_the_lever(&mut sim, 36.0);
    let (id, planned_at) = sim
        .state
        .backfill
        .held
        .iter()
        .map(|(id, h)| (*id, h.epoch))
        .next()
        .unwrap();
    // A monitor that lags: the map it serves is the one the hold was planned from.
    let mut lagging = sim.cluster.clone();
    lagging.map.epoch = planned_at;
    lagging.map.pg_upmap_items.remove(&id);
    let fresh = std::mem::replace(&mut sim.cluster, lagging);
    sim.now += 15.0;
    let obs = sim.obs(Some(30.0));
    sim.step(obs);
    assert!(
        sim.state.backfill.held.contains_key(&id),
        "kept: the map cannot show it yet"
    );
    // A newer map without it: gone (never added, or removed): dropped.
    sim.cluster = fresh;
    sim.cluster.map.pg_upmap_items.remove(&id);
    sim.cluster.map.epoch += 10;
    sim.now += 15.0;
    let obs = sim.obs(Some(30.0));
    sim.step(obs);
    assert!(!sim.state.backfill.held.contains_key(&id));
}

#[test]
fn a_released_pg_still_peering_keeps_its_place_and_the_next_waits() {
    let mut sim = LeverSim::new(lever_policy(), rebalance());
    sim.peer_first = true;
    to_the_lever(&mut sim, 130.0);
    assert_eq!(sim.n(), Some(1));
    // Within the bound but not low enough to raise N: N stays 1.
    sim.run_for(15, Some(25.0));
    let held = sim.held();
    assert!(held >= 10, "{held}");
    // Nothing backfills any more: one held PG is released a window later, and peers.
    sim.finish_running();
    sim.run_for(15, Some(25.0));
    assert_eq!(sim.held(), held);
    sim.run_for(15, Some(25.0));
    assert_eq!(sim.held(), held - 1);
    let released: Vec<String> = sim
        .cluster
        .pgs
        .iter()
        .filter(|p| p.state == "remapped+peering")
        .map(|p| p.pgid.clone())
        .collect();
    assert_eq!(released.len(), 1, "{released:?}");
    // While it peers, `pg dump` shows nothing backfilling; it still takes the one place.
    sim.run_for(45, Some(25.0));
    assert_eq!(sim.held(), held - 1, "{:#?}", messages_of(&sim, "BACKFILL"));
    // It backfills: still one at a time, and it is not held back.
    if let Some(pg) = sim.cluster.pgs.iter_mut().find(|p| p.pgid == released[0]) {
        pg.state = "active+remapped+backfilling".to_string();
    }
    sim.run_for(30, Some(25.0));
    assert_eq!(sim.held(), held - 1);
    assert_eq!(sim.backfilling(), 1);
    // Done: the next one goes, a window later.
    sim.finish_running();
    sim.run_for(30, Some(25.0));
    assert_eq!(sim.held(), held - 2);
    // Never a release followed by a hold of the same PGs.
    let moves = messages_of(&sim, "BACKFILL");
    assert_eq!(
        moves
            .iter()
            .filter(|m| m.starts_with("BACKFILL: held"))
            .count(),
        1,
        "{moves:#?}"
    );
}

/// The lab (2026-12-03, run K): N raised to 6, then three releases made while client p99 was
/// over the aim kept five windows over the bound, and each pushed back the period that would
/// have judged N. A slot that opens while p99 is over the aim stays empty until p99 is back
/// under it; with nothing backfilling at all the p99 is not the recovery's, and one PG goes.
#[test]
fn a_slot_that_opens_while_p99_is_over_the_aim_waits_until_it_is_back_under() {
    let mut sim = LeverSim::new(lever_policy(), rebalance());
    to_the_lever(&mut sim, 36.0);
    assert_eq!(sim.n(), Some(9));
    // Within the aim (25.6 ms at N = 9: 80% of the bound), not low enough to raise N: N
    // stays, nothing moves.
    sim.run_for(75, Some(25.0));
    assert_eq!((sim.n(), sim.backfilling()), (Some(9), 9));
    let held = sim.held();
    // One backfill finishes while p99 is over the aim (and within the bound).
    let first = sim.running()[0].clone();
    sim.cluster.finish(&first);
    sim.run_for(30, Some(30.0));
    assert_eq!(sim.held(), held, "{:#?}", messages_of(&sim, "BACKFILL"));
    let waits: Vec<String> = messages_of(&sim, "BACKFILL_LIMIT")
        .into_iter()
        .filter(|m| m.contains("releases wait"))
        .collect();
    assert_eq!(
        waits,
        vec!["BACKFILL_LIMIT: N = 9 has room, but releases wait while client p99 write 30.0 ms is above the aim 25.6 ms (80% of the bound 32.0 ms with 9 PGs backfilling): N is judged first".to_string()]
    );
    // Back under the aim: the slot is filled (the room opened more than a window ago).
    sim.run_for(15, Some(25.0));
    assert_eq!(sim.n(), Some(9));
    assert_eq!((sim.held(), sim.backfilling()), (held - 1, 9));
}

const SINGLE_START: &str = super::types::RECOVERY_MAX_SINGLE_START;

impl LeverSim {
    fn fast(&self) -> bool {
        self.state.ladder.lever.as_ref().is_some_and(|l| l.fast)
    }

    fn single_start(&self) -> Option<String> {
        self.config.get(SINGLE_START).cloned().flatten()
    }

    /// From rung 3 at N = 1, p99 low (15 ms against the bound's 32) until the ops per PG are
    /// raised.
    fn raise_ops_at_n_1(&mut self) {
        to_the_lever(self, 150.0);
        assert_eq!(self.n(), Some(1));
        let from = self.now;
        while !self.fast() && self.now < from + 600.0 {
            self.run_for(15, Some(15.0));
        }
        assert!(self.fast(), "{:?}", self.state.ladder.lever);
    }
}

/// The lab (2026-12-03, night): at N = 1, four recovery ops per PG recovered twice as fast as
/// one, with as many windows within the bound. Once N = 1 holds, the raise from it is the ops
/// per PG's (`osd_recovery_max_single_start`, the operator's value recorded first), not a
/// second PG; a raise that lets p99 back over puts the operator's value back, and that is no
/// change counted against the limits.
#[test]
fn at_n_1_the_first_raise_is_the_ops_per_pg_and_one_that_hurt_puts_the_operators_back() {
    let mut sim = LeverSim::new(lever_policy(), rebalance());
    to_the_lever(&mut sim, 150.0);
    let held = sim.held();
    sim.raise_ops_at_n_1();
    assert_eq!(sim.n(), Some(1));
    assert_eq!(sim.held(), held, "the ops' raise releases no PG");
    assert_eq!(sim.single_start().as_deref(), Some("4"));
    assert_eq!(
        sim.state.original.get(SINGLE_START),
        Some(&None),
        "the operator's value (unset) is recorded"
    );
    let lim = messages_of(&sim, "BACKFILL_LIMIT");
    assert!(
        lim.last().unwrap().starts_with("BACKFILL_LIMIT recovery ops per backfilling PG 1 -> 4 (osd_recovery_max_single_start; at most 1 PG backfilling at once): client p99 write 15.0 ms below 90% of the bound 32.0 ms for 3 windows in a row; "),
        "{lim:?}"
    );
    let descend = messages_of(&sim, "DESCEND");
    assert!(
        descend.iter().any(|d| d.starts_with("DESCEND osd_recovery_max_single_start (unset) -> 4: rung 3 (backfill lever: at most 1 PGs backfilling at once): each backfilling PG may start 4 recovery ops at once")),
        "{descend:?}"
    );
    // Over the bound within the raise's trial: the operator's value back, no change counted.
    let changes = sim.state.changes.len();
    sim.run_for(75, Some(60.0));
    let lever = sim.state.ladder.lever.clone().unwrap();
    assert_eq!(
        (lever.n, lever.fast, lever.ceiling, lever.ceiling_fast),
        (1, false, Some(1), false)
    );
    assert_eq!(sim.single_start(), None);
    assert_eq!(
        sim.commands.last().map(String::as_str),
        Some("config rm osd osd_recovery_max_single_start")
    );
    assert_eq!(
        sim.state.changes.len(),
        changes,
        "a give-back is not counted"
    );
    assert!(
        messages_of(&sim, "BACKFILL_LIMIT").last().unwrap().contains("recovery ops per backfilling PG 4 -> 1 (osd_recovery_max_single_start; at most 1 PG backfilling at once): raising the ops per PG to 4 let client p99 write back over the bound 32.0 ms (60.0 ms), so the operator's 1 op per PG is the most for 6m"),
        "{:?}",
        messages_of(&sim, "BACKFILL_LIMIT")
    );
    // The ceiling holds the operator's ops for its time: low again, not raised meanwhile.
    sim.run_for(300, Some(15.0));
    assert!(!sim.fast());
    assert_eq!(sim.single_start(), None);
}

#[test]
fn the_ops_per_pg_stay_raised_as_n_rises_and_go_back_when_redundancy_is_at_risk() {
    let mut sim = LeverSim::new(lever_policy(), rebalance());
    sim.raise_ops_at_n_1();
    // Within the aim through the trial (confirmed), then low: N = 2 with the raised ops.
    sim.run_for(240, Some(25.0));
    let from = sim.now;
    while sim.n() == Some(1) && sim.now < from + 600.0 {
        sim.run_for(15, Some(15.0));
    }
    assert_eq!((sim.n(), sim.fast()), (Some(2), true));
    assert!(
        messages_of(&sim, "BACKFILL_LIMIT")
            .last()
            .unwrap()
            .starts_with(
                "BACKFILL_LIMIT at most 1 -> 2 PGs backfilling at once (4 recovery ops each): "
            ),
        "{:?}",
        messages_of(&sim, "BACKFILL_LIMIT")
    );
    assert_eq!(sim.single_start().as_deref(), Some("4"));
    // An undersized PG: SUSPEND puts the ops back with everything else.
    sim.undersized = 1;
    sim.run_for(15, Some(60.0));
    let suspend = messages_of(&sim, "SUSPEND");
    assert!(
        suspend
            .iter()
            .any(|s| s.contains("osd_recovery_max_single_start 4 -> (unset)")),
        "{suspend:?}"
    );
    assert_eq!(sim.single_start(), None);
    assert!(sim.state.ladder.lever.is_none());
}

#[test]
fn the_ops_per_pg_go_back_when_the_recovery_ends() {
    let mut sim = LeverSim::new(lever_policy(), rebalance());
    sim.raise_ops_at_n_1();
    for _ in 0..60 {
        if let Some(first) = sim.running().first() {
            sim.cluster.finish(first);
        }
        sim.run_for(60, Some(15.0));
        if sim.state.original.is_empty() {
            break;
        }
    }
    assert_eq!(sim.single_start(), None);
    let restore = messages_of(&sim, "RESTORE");
    assert!(
        restore.iter().any(|r| r
            .starts_with("RESTORE osd_recovery_max_single_start 4 -> (unset): recovery finished")),
        "{restore:?}"
    );
}

/// The lever ends while the recovery goes on (here refused: `require_min_compat_client` set
/// below luminous by someone): the ops per PG go back with it, at once, and uncounted.
#[test]
fn the_ops_per_pg_go_back_when_the_lever_ends_during_the_recovery() {
    let mut sim = LeverSim::new(lever_policy(), rebalance());
    sim.raise_ops_at_n_1();
    let changes = sim.state.changes.len();
    sim.cluster.map.require_min_compat_client = "jewel".into();
    sim.run_for(15, Some(15.0));
    assert!(sim.state.ladder.lever.is_none());
    assert_eq!(sim.single_start(), None);
    let descend = messages_of(&sim, "DESCEND");
    assert!(
        descend.iter().any(|e| e.starts_with(
            "DESCEND osd_recovery_max_single_start 4 -> (unset): the backfill lever no longer in force: the recovery ops per PG back to the operator's"
        )),
        "{descend:?}"
    );
    assert_eq!(sim.state.changes.len(), changes);
    assert_eq!(sim.held(), 0, "and every PG it held is released");
}

/// An operator who runs more ops per PG than the lever's already: no such step, N is raised.
#[test]
fn an_operators_ops_per_pg_at_or_above_the_levers_are_left_alone() {
    let mut sim = LeverSim::new(lever_policy(), rebalance());
    sim.config
        .insert(SINGLE_START.to_string(), Some("8".to_string()));
    to_the_lever(&mut sim, 150.0);
    let from = sim.now;
    while sim.n() == Some(1) && sim.now < from + 600.0 {
        sim.run_for(15, Some(15.0));
    }
    assert_eq!((sim.n(), sim.fast()), (Some(2), false));
    assert_eq!(sim.single_start().as_deref(), Some("8"));
    assert!(!sim.commands.iter().any(|c| c.contains(SINGLE_START)));
}

// ---- What no longer exists (issue 33): the record drops or trims it, no entry stops the others.

/// Pool `pool` deleted: its PGs leave `pg dump`, and the monitors drop their upmap entries
/// with it (`OSDMonitor::_prepare_remove_pool`).
fn delete_pool(c: &mut FakeUpmap, pool: u64) {
    c.map.pools.remove(&pool);
    c.map.pg_upmap_items.retain(|id, _| id.pool != pool);
    c.pgs.retain(|p| p.pool_id != pool);
    c.before.retain(|id, _| id.pool != pool);
    c.map.epoch += 1;
}

/// The rebalance with an OSD that is to be purged: osd.4, to which the balancer moved 2.2
/// (`[3->4]`, up `[1,0,4]`; CRUSH's own set is the acting `[1,0,3]`). Held, 2.2 keeps the
/// balancer's item to put back on release.
fn rebalance_with_osd_4() -> FakeUpmap {
    let mut c = rebalance();
    let osd = c.map.osds[&3].clone();
    c.map.osds.insert(4, osd);
    let pgid = "2.2".parse().unwrap();
    c.map
        .pg_upmap_items
        .insert(pgid, vec![upmap::UpmapItem { from: 3, to: 4 }]);
    if let Some(pg) = c.pgs.iter_mut().find(|p| p.pgid == "2.2") {
        pg.up = vec![Some(1), Some(0), Some(4)];
        pg.acting = vec![Some(1), Some(0), Some(3)];
    }
    c
}

impl LeverSim {
    /// `id` goes first among the held PGs (releases go oldest first).
    fn make_oldest(&mut self, id: upmap::PgId) {
        for other in self.state.backfill.oldest_first() {
            if other != id {
                self.state.backfill.requeue(other);
            }
        }
        assert_eq!(self.state.backfill.oldest_first()[0], id);
    }

    /// Backfills finish one a minute, p99 low, until the recovery has ended (the ops per PG
    /// back to the operator's) or `minutes` have passed.
    fn run_to_the_end(&mut self, minutes: usize) {
        for _ in 0..minutes {
            if let Some(first) = self.running().first() {
                self.cluster.finish(first);
            }
            self.run_for(60, Some(15.0));
            if !self.state.recovery_active && self.state.original.is_empty() {
                break;
            }
        }
    }

    /// The commands that named `id`.
    fn commands_on(&self, id: upmap::PgId) -> Vec<String> {
        let word = format!(" {id}");
        self.commands
            .iter()
            .filter(|c| c.ends_with(&word) || c.contains(&format!("{word} ")))
            .cloned()
            .collect()
    }

    /// Every held PG was released (or dropped), the recovery ended with a RESTORE of what the
    /// lever raised, and the balancer is back on.
    fn ended_with_everything_back(&self) {
        assert!(self.state.backfill.is_empty(), "{:?}", self.state.backfill);
        assert!(!self.state.recovery_active, "{:?}", self.events());
        assert!(self.events().contains(&"RECOVERY_FINISHED"));
        assert!(self.events().contains(&"RESTORE"), "{:?}", self.events());
        assert_eq!(self.single_start(), None, "the operator's ops per PG back");
        assert!(self.cluster.balancer.as_ref().unwrap().active);
        // Of the PGs that exist, only the balancer's own entries are left.
        let map = &self.cluster.map;
        let left: Vec<_> = map
            .pg_upmap_items
            .keys()
            .filter(|id| {
                map.pools
                    .get(&id.pool)
                    .is_some_and(|p| u64::from(id.seed) < p.pg_num)
            })
            .collect();
        assert!(left.len() <= 2, "{left:?}");
    }
}

/// The oldest held PG's pool is deleted after the OSD map was read and before its release
/// runs: Ceph refuses it (`Error ENOENT: pg 3.x does not exist`, exit 2, as the lab's
/// 50-refuse): its entry leaves the record at once, with a line, and is never asked again;
/// the pool's other held PGs are dropped with the next map (their pool is gone); every other
/// held PG is released in turn and the recovery ends as ever.
#[test]
fn a_held_pg_whose_pool_is_deleted_leaves_the_record_and_the_others_are_released() {
    let mut sim = LeverSim::new(lever_policy(), rebalance());
    sim.raise_ops_at_n_1();
    let held: Vec<upmap::PgId> = sim.state.backfill.oldest_first();
    let target = *held.iter().find(|id| id.pool == 3).expect("an EC PG held");
    sim.make_oldest(target);
    sim.at_release = Some((target, |c| delete_pool(c, 3)));
    sim.run_to_the_end(60);
    // Its hold, then one release.
    assert_eq!(
        sim.commands_on(target)[1..],
        [format!("osd rm-pg-upmap-items {target}")],
        "asked once"
    );
    for id in held.iter().filter(|id| id.pool == 2) {
        assert_eq!(
            sim.commands_on(*id).last(),
            Some(&format!("osd rm-pg-upmap-items {id}")),
            "{id} released"
        );
    }
    for id in held.iter().filter(|id| id.pool == 3 && **id != target) {
        assert!(
            !sim.commands_on(*id).iter().any(|c| c.contains("rm-pg")),
            "{id}: no command for a PG that is gone"
        );
    }
    sim.ended_with_everything_back();
}

/// pg_num reduced under the holds: the oldest held PG is merged away, its entry still listed
/// in the map the enforcer reads (the monitors drop it at their next map). It is dropped
/// without a command (the monitors would refuse any: `pg 3.x does not exist`), and the
/// others are released.
#[test]
fn a_held_pg_merged_away_leaves_the_record_without_a_command() {
    let mut sim = LeverSim::new(lever_policy(), rebalance());
    sim.raise_ops_at_n_1();
    let held: Vec<upmap::PgId> = sim.state.backfill.oldest_first();
    let target = held
        .iter()
        .filter(|id| id.pool == 3)
        .max_by_key(|id| id.seed)
        .copied()
        .expect("an EC PG held");
    sim.make_oldest(target);
    let pg_num = u64::from(target.seed);
    sim.cluster.map.pools.get_mut(&3).unwrap().pg_num = pg_num;
    sim.cluster.pgs.retain(|p| {
        !(p.pool_id == 3
            && p.pgid
                .parse::<upmap::PgId>()
                .is_ok_and(|id| u64::from(id.seed) >= pg_num))
    });
    sim.cluster.map.epoch += 1;
    sim.run_to_the_end(60);
    assert!(
        sim.commands_on(target).len() == 1,
        "only its hold: {:?}",
        sim.commands_on(target)
    );
    for id in held.iter().filter(|id| **id != target) {
        assert!(
            sim.commands_on(*id).len() >= 2,
            "{id} released: {:?}",
            sim.commands_on(*id)
        );
    }
    sim.ended_with_everything_back();
}

/// A PG held over the balancer's item to osd.4 keeps it to put back on release; osd.4 is
/// purged after the map was read and before that release: Ceph refuses it (`Error ENOENT:
/// osd.4 does not exist`, as the lab's `osd.42`). The item leaves the record and the next
/// release removes the entry; every other held PG is released, and the recovery ends.
#[test]
fn a_held_pg_whose_saved_items_name_a_purged_osd_is_released_without_them() {
    let mut sim = LeverSim::new(lever_policy(), rebalance_with_osd_4());
    sim.raise_ops_at_n_1();
    let target: upmap::PgId = "2.2".parse().unwrap();
    let saved = sim.state.backfill.held[&target].before.clone();
    assert_eq!(saved, vec![upmap::UpmapItem { from: 3, to: 4 }]);
    let held = sim.state.backfill.oldest_first();
    sim.make_oldest(target);
    sim.at_release = Some((target, |c| {
        c.map.osds.remove(&4);
        c.map.epoch += 1;
    }));
    sim.run_to_the_end(60);
    assert_eq!(
        sim.commands_on(target)[1..],
        [
            "osd pg-upmap-items 2.2 3 4".to_string(),
            "osd rm-pg-upmap-items 2.2".to_string()
        ],
        "refused once, then released without the item"
    );
    for id in held.iter().filter(|id| **id != target) {
        assert!(sim.commands_on(*id).len() >= 2, "{id} released");
    }
    sim.ended_with_everything_back();
}

/// The same OSD purged before the map is read: the saved item is dropped from the record
/// without a command, and the release removes the entry at once.
#[test]
fn saved_items_naming_an_osd_gone_from_the_map_are_dropped_before_the_release() {
    let mut sim = LeverSim::new(lever_policy(), rebalance_with_osd_4());
    sim.raise_ops_at_n_1();
    let target: upmap::PgId = "2.2".parse().unwrap();
    sim.make_oldest(target);
    sim.cluster.map.osds.remove(&4);
    sim.cluster.map.epoch += 1;
    sim.run_for(15, Some(15.0));
    assert!(sim.state.backfill.held[&target].before.is_empty());
    sim.run_to_the_end(60);
    assert_eq!(
        sim.commands_on(target)[1..],
        ["osd rm-pg-upmap-items 2.2".to_string()]
    );
    sim.ended_with_everything_back();
}

/// A release refused for any other reason stays held and is tried again after every other
/// held PG: it never stops their releases (before, the oldest was asked again each cycle and
/// nothing else was ever released).
#[test]
fn a_release_refused_for_another_reason_does_not_stop_the_others() {
    let mut sim = LeverSim::new(lever_policy(), rebalance());
    sim.raise_ops_at_n_1();
    let held = sim.state.backfill.oldest_first();
    let target = held[0];
    sim.refuse_release = Some(target);
    sim.run_to_the_end(30);
    for id in held.iter().filter(|id| **id != target) {
        assert!(sim.commands_on(*id).len() >= 2, "{id} released");
    }
    assert_eq!(
        sim.state.backfill.held.keys().copied().collect::<Vec<_>>(),
        vec![target],
        "the refused one stays recorded"
    );
    // Its hold, its first release, then the others' releases before its second.
    let second = sim
        .commands
        .iter()
        .enumerate()
        .filter(|(_, c)| sim.commands_on(target).contains(c))
        .map(|(i, _)| i)
        .nth(2)
        .expect("tried again");
    let last_other = held
        .iter()
        .filter(|id| **id != target)
        .filter_map(|id| {
            let release = sim.commands_on(*id).last().cloned()?;
            sim.commands.iter().rposition(|c| *c == release)
        })
        .max()
        .unwrap();
    assert!(last_other < second, "tried again after the others");
}

// ---- The stored state stays bounded (issue 33.5).

/// What the lease reads back of the stored state at a takeover (`lease::rados::MAX_STATE_BYTES`,
/// in librados builds only).
const LEASE_READ_CAP: usize = 1 << 20;
/// What the stored state may weigh with 10,000 PGs refused by the lever: well under that.
const STATE_BUDGET: usize = 64 << 10;

#[cfg(feature = "librados")]
#[test]
fn the_lease_read_cap_is_the_one_measured_against() {
    assert_eq!(LEASE_READ_CAP, crate::lease::rados::MAX_STATE_BYTES);
}

/// The lab's rebalance, and beside it `refused` PGs of a pool 4 that the lever cannot hold
/// (`forced_backfill`, a state it does not hold through), `spare` more of them clean: each
/// cycle [`rotate_refused`] makes a different set backfill.
fn rebalance_with_refused(refused: u32, spare: u32) -> FakeUpmap {
    let mut c = rebalance();
    let pool = c.map.pools[&2].clone();
    c.map.pools.insert(
        4,
        upmap::PoolInfo {
            name: "many".into(),
            pg_num: 16384,
            ..pool
        },
    );
    for seed in 0..refused + spare {
        c.pgs.push(pgs::PgBrief {
            pgid: format!("4.{seed:x}"),
            pool_id: 4,
            state: "active+clean".into(),
            up: vec![Some(0), Some(1), Some(2)],
            acting: vec![Some(0), Some(1), Some(3)],
        });
    }
    rotate_refused(&mut c, refused, 0);
    c
}

/// The `refused` PGs of pool 4 from the `shift`-th on (wrapping) backfill, the rest are clean.
fn rotate_refused(c: &mut FakeUpmap, refused: u32, shift: u32) {
    let all: Vec<&mut pgs::PgBrief> = c.pgs.iter_mut().filter(|p| p.pool_id == 4).collect();
    let n = all.len() as u32;
    for (i, pg) in all.into_iter().enumerate() {
        let at = (i as u32 + n - shift % n) % n;
        pg.state = if at < refused {
            "active+remapped+backfilling+forced_backfill".into()
        } else {
            "active+clean".into()
        };
    }
}

/// 10,000 PGs the lever could hold wait for backfill: it holds MAX_HELD of them, the rest
/// backfill beside the N (named with why), and the stored state stays under half the lease's
/// read cap. The figure is in docs/benchmarks.md.
#[test]
fn the_stored_state_stays_under_the_read_cap_with_10000_pgs_to_hold() {
    let mut c = rebalance_with_refused(0, 10_000);
    for pg in c.pgs.iter_mut().filter(|p| p.pool_id == 4) {
        pg.state = "active+remapped+backfill_wait".into();
    }
    let mut sim = LeverSim::new(lever_policy(), c);
    to_the_lever(&mut sim, 36.0);
    let mut largest = 0;
    for _ in 0..10 {
        sim.run_for(15, Some(30.0));
        largest = largest.max(sim.state.to_bytes().unwrap().len());
    }
    eprintln!(
        "stored state with 10000 PGs to hold: largest {largest} bytes; {} PGs held",
        sim.held()
    );
    assert_eq!(sim.held(), crate::backfill::MAX_HELD);
    assert!(largest < LEASE_READ_CAP / 2, "{largest} bytes");
    // The rest are named, with why (again only when the set changes, here with N).
    let unheld = messages_of(&sim, "BACKFILL_LIMIT")
        .into_iter()
        .filter(|m| m.contains("the most its stored state keeps"))
        .count();
    assert!((1..=10).contains(&unheld), "{unheld}");
    assert!(sim.state.noted.len() < 16, "{:?}", sim.state.noted);
}

/// 10,000 PGs the lever cannot hold backfill beside its N, a different set each cycle (an OSD
/// drained with `osd out` gives that): 200 cycles later the stored state is still well under
/// the budget, and its one-shot notes a handful. Before issue 33 each set added its PG ids to
/// `noted` (`lever_unheld:<ids>`, some 60 KB a cycle here), and the state passed the lease's
/// 1 MiB read cap within 20 cycles. The figure is in docs/benchmarks.md.
#[test]
fn the_stored_state_stays_small_with_10000_pgs_refused() {
    const REFUSED: u32 = 10_000;
    let mut sim = LeverSim::new(lever_policy(), rebalance_with_refused(REFUSED, 500));
    to_the_lever(&mut sim, 36.0);
    let held = sim.held();
    assert!(held > 0 && sim.state.ladder.rung >= LEVER_RUNG);
    let mut largest = 0;
    for cycle in 1..=200 {
        rotate_refused(&mut sim.cluster, REFUSED, cycle);
        // Within the bound, over the aim: N stays, nothing is released.
        sim.run_for(15, Some(30.0));
        largest = largest.max(sim.state.to_bytes().unwrap().len());
    }
    let unheld = messages_of(&sim, "BACKFILL_LIMIT")
        .into_iter()
        .filter(|m| m.contains("cannot be held"))
        .count();
    let per_held = serde_json::to_vec_pretty(&sim.state.backfill.held)
        .unwrap()
        .len()
        / sim.held().max(1);
    eprintln!(
        "stored state with {REFUSED} PGs refused, 200 cycles: largest {largest} bytes; {} notes; {} PGs held, {per_held} bytes each",
        sim.state.noted.len(),
        sim.held()
    );
    assert!(largest < STATE_BUDGET, "{largest} bytes");
    assert!(sim.state.noted.len() < 16, "{:?}", sim.state.noted);
    // Still said, once per situation: each cycle's set is a new one.
    assert!(unheld >= 200, "{unheld}");
}

/// The one-shot notes keep at most NOTED_PER_KIND keys of a kind and no long key: a kind whose
/// detail varies without end (a count, a set) cannot grow the stored state.
#[test]
fn one_shot_notes_are_bounded_per_kind_and_in_length() {
    let mut state = EnforcerState::default();
    for i in 0..100 {
        assert!(state.note(format!("kind:{i}")), "new: said");
        assert!(!state.note(format!("kind:{i}")), "known: not said again");
    }
    assert_eq!(state.noted.len(), NOTED_PER_KIND);
    assert!(state.note("other"), "another kind keeps its own");
    let long = format!("lever_skip:{}", "no PG can be held; ".repeat(40));
    assert!(state.note(long.clone()));
    assert!(!state.note(long));
    assert!(
        state.noted.iter().all(|k| k.len() <= NOTED_KEY_MAX),
        "{:?}",
        state.noted
    );
    // FNV-1a's published values: the digest does not change with the build.
    assert_eq!(digest(""), 0xcbf2_9ce4_8422_2325);
    assert_eq!(digest("a"), 0xaf63_dc4c_8601_ec8c);
}

/// No client writes, the ops per PG raised and PGs still held: the lever releases them and
/// ends once none is held (the ops per PG back to the operator's), so that the ladder comes
/// down under it (here to rung 1, which this plant entered from; rung 2's limit goes after the
/// settle time: `with_no_client_writes_the_ladder_comes_down_to_rung_1`). (Fault row 14, 2026-12-06: the lever stayed for its raised ops with nothing held,
/// and rung 2's limit under it kept the recovery at 8-13 objects/s with nobody writing.)
#[test]
fn with_no_client_writes_the_lever_ends_and_the_ladder_comes_down_under_it() {
    let mut sim = LeverSim::new(lever_policy(), rebalance());
    sim.raise_ops_at_n_1();
    assert_eq!(sim.state.ladder.rung, 3);
    assert!(sim.held() > 0);
    let from = sim.now;
    while sim.state.ladder.rung >= 2 && sim.now < from + 3600.0 {
        sim.run_for(15, None);
    }
    assert_eq!(sim.held(), 0);
    assert!(sim.state.ladder.lever.is_none());
    assert_eq!(sim.single_start(), None, "the operator's ops per PG back");
    assert_eq!(sim.state.ladder.rung, 1, "{:?}", sim.state.ladder);
    assert!(
        sim.state.recovery_active,
        "the ladder came down before the recovery ended"
    );
}

/// The level controller (`--enforcer.controller levels`) with 60-s windows.
fn levels_policy(max_level: crate::enforcer::levels::list::Ceiling) -> Policy {
    let mut p = lever_policy();
    p.ladder.controller = Controller::Levels;
    p.ladder.max_level = max_level;
    p.latency_window = Duration::from_secs(60);
    p
}

/// What Reef's OSDs report (`balanced` by default, Ceph 18.2.7) over the recorded rebalance.
fn reef(s: &LeverSim, p99: f64) -> Observation {
    let mut o = s.obs(Some(p99));
    o.osd_profiles = osds("balanced");
    o.osd_versions = Ok(vec![(
        crate::ceph::parse::versions::version_line(
            "ceph version 18.2.7 (6b0e988052ec84cf2d4a54ff9bbbc5e720b621ad) reef (stable)",
        ),
        4,
    )]);
    o
}

/// Client p99 far over the bound (60 ms) until the level controller's lever holds at least
/// `held` PGs (at most ten minutes).
fn levels_to_the_lever(sim: &mut LeverSim, held: usize) {
    for _ in 0..40 {
        sim.run_for(15, Some(60.0));
        if sim.held() >= held {
            return;
        }
    }
    panic!("fewer than {held} PGs held: {:#?}", sim.notes);
}

/// Until every PG has moved and the enforcer has given everything back (at most an hour).
fn recover_to_the_end(sim: &mut LeverSim, obs: impl Fn(&LeverSim) -> Observation) {
    for _ in 0..240 {
        sim.finish_running();
        sim.now += 15.0;
        let o = obs(sim);
        sim.step(o);
        if !sim.state.recovery_active && sim.state.original.is_empty() && sim.held() == 0 {
            return;
        }
    }
    panic!("not over after an hour: {:#?}", sim.notes);
}

/// The level controller reads the PG view (`pg dump pgs_brief`, a mgr call listing every PG)
/// at the recovery's start and then once a latency window, not every cycle, until its lever is
/// in force; the lever still comes in when the bound is broken.
#[test]
fn the_level_controller_reads_the_pg_view_once_a_window_until_its_lever_holds() {
    let mut sim = LeverSim::new(
        levels_policy(crate::enforcer::levels::list::Ceiling::HighRecoveryOps),
        rebalance(),
    );
    let cycles = 40;
    let mut reads = 0;
    for _ in 0..cycles {
        sim.now += 15.0;
        let o = sim.obs(Some(20.0));
        reads += usize::from(super::lever::view_needed(
            &sim.policy,
            &sim.state,
            &o,
            sim.now,
        ));
        sim.step(o);
    }
    assert!(sim.state.levels.is_some(), "the controller ran");
    assert_eq!(sim.held(), 0);
    // 40 cycles of 15 s are ten 60-s windows: the start's read and one a window.
    assert!(
        (10..=11).contains(&reads),
        "{reads} reads in {cycles} cycles"
    );
    levels_to_the_lever(&mut sim, 1);
}

/// With the bound kept while PGs are undersized (`--enforcer.suspend-when pool-at-min-size`),
/// the lever's holds go back while copies are missing; once they are back the lever holds
/// again within a cycle or two, not a latency window later (its view is read for it).
#[test]
fn once_copies_are_back_the_level_controllers_lever_holds_again_within_a_cycle_or_two() {
    let mut p = levels_policy(crate::enforcer::levels::list::Ceiling::HighRecoveryOps);
    p.suspend_when = SuspendWhen::PoolAtMinSize;
    let mut sim = LeverSim::new(p, rebalance());
    levels_to_the_lever(&mut sim, 1);
    sim.undersized = 1;
    sim.run_for(60, Some(60.0));
    assert_eq!(sim.held(), 0, "no hold while copies are missing");
    assert_ne!(sim.state.phase, Phase::Suspended, "the bound is kept");
    sim.undersized = 0;
    // Two cycles of 15 s, half of the 60-s window.
    sim.run_for(30, Some(60.0));
    assert!(sim.held() >= 1, "{:#?}", sim.notes);
}

#[test]
fn with_the_level_controller_redundancy_at_risk_sets_high_recovery_ops_at_once_and_releases_every_hold(
) {
    let mut sim = LeverSim::new(
        levels_policy(crate::enforcer::levels::list::Ceiling::HighRecoveryOps),
        rebalance(),
    );
    levels_to_the_lever(&mut sim, 1);
    sim.undersized = 1;
    sim.run_for(15, Some(60.0));
    assert_eq!(sim.held(), 0);
    assert_eq!(sim.state.phase, Phase::Suspended);
    assert_eq!(
        sim.config.get(MCLOCK_PROFILE_KEY),
        Some(&Some("high_recovery_ops".to_string()))
    );
    assert!(sim.flags.is_empty());
    // Redundancy back, the recovery on: the bound applies again, and at the end everything
    // is the operator's.
    sim.undersized = 0;
    recover_to_the_end(&mut sim, |s| s.obs(Some(20.0)));
    assert!(sim.config.values().all(Option::is_none), "{:?}", sim.config);
    assert!(sim.flags.is_empty());
}

/// Reef's OSDs (`balanced` by default, one backfill per OSD honoured with the override): with
/// room under the bound the level controller raises recovery to `high_recovery_ops` and then
/// the backfills, never past `--enforcer.max-level`; over the bound it comes back down; the
/// recovery's end puts back exactly what the operator had.
#[test]
fn on_reef_the_level_controller_spends_the_budget_up_to_the_max_level_and_gives_it_back() {
    use crate::enforcer::levels::list::Ceiling;
    let mut sim = LeverSim::new(levels_policy(Ceiling::Backfills(3)), rebalance());
    sim.config
        .insert(MAX_BACKFILLS.to_string(), Some("1".to_string()));
    let mut most = 0;
    for _ in 0..60 {
        sim.now += 15.0;
        let o = reef(&sim, 12.0);
        sim.step(o);
        let b = sim
            .config
            .get(MAX_BACKFILLS)
            .cloned()
            .flatten()
            .and_then(|v| v.parse::<u32>().ok())
            .unwrap_or(1);
        most = most.max(b);
    }
    assert_eq!(most, 3, "never past the max level: {:?}", sim.config);
    assert_eq!(
        sim.config.get(MCLOCK_PROFILE_KEY),
        Some(&Some("high_recovery_ops".to_string()))
    );
    assert_eq!(
        sim.config.get(MCLOCK_OVERRIDE),
        Some(&Some("true".to_string()))
    );
    assert_eq!(sim.held(), 0, "nothing held with room under the bound");
    // Over the bound: back down below the operator's level within a few windows.
    sim.run_with(240, |s| reef(s, 70.0));
    assert_eq!(
        sim.config.get(MCLOCK_PROFILE_KEY),
        Some(&Some("high_client_ops".to_string())),
        "{:#?}",
        sim.notes
    );
    assert_eq!(sim.config.get(MAX_BACKFILLS), Some(&Some("1".to_string())));
    recover_to_the_end(&mut sim, |s| reef(s, 12.0));
    assert_eq!(
        sim.config
            .iter()
            .filter(|(_, v)| v.is_some())
            .collect::<Vec<_>>(),
        vec![(&MAX_BACKFILLS.to_string(), &Some("1".to_string()))],
        "only the operator's own setting left"
    );
}

/// With the change limits used up, a move from a push (high_recovery_ops, raised backfills)
/// to below the operator's level still gives the push back at once: only the restraint waits.
#[test]
fn over_the_bound_a_push_goes_back_at_once_even_when_the_change_limits_hold_the_restraint() {
    use crate::enforcer::levels::list::Ceiling;
    let mut p = levels_policy(Ceiling::Backfills(3));
    p.min_interval = Duration::from_secs(3600);
    let mut sim = LeverSim::new(p, rebalance());
    sim.run_with(900, |s| reef(s, 12.0));
    assert_eq!(sim.config.get(MAX_BACKFILLS), Some(&Some("3".to_string())));
    // A change counted a minute ago: the next slowing change waits an hour.
    sim.state.changes.push(sim.now - 60.0);
    // Far over the bound: from the top past the operator's level in one move.
    sim.run_with(120, |s| reef(s, 120.0));
    assert_eq!(
        sim.config.get(MAX_BACKFILLS),
        Some(&None),
        "{:#?}",
        sim.notes
    );
    assert_eq!(sim.config.get(MCLOCK_OVERRIDE), Some(&None));
    assert_eq!(sim.config.get(MCLOCK_PROFILE_KEY), Some(&None));
}

/// Moving up past the lever's levels releases what the lever holds at its pace (one PG per
/// `RELEASE_GAP`), not every held PG in the same cycle (each release re-peers its PG).
#[test]
fn the_level_controller_leaves_the_lever_at_its_pace() {
    let mut sim = LeverSim::new(
        levels_policy(crate::enforcer::levels::list::Ceiling::HighRecoveryOps),
        rebalance(),
    );
    levels_to_the_lever(&mut sim, 3);
    let mut most = 0;
    for _ in 0..160 {
        let before = sim.held();
        sim.run_for(15, Some(12.0));
        most = most.max(before.saturating_sub(sim.held()));
        if sim.held() == 0 {
            break;
        }
    }
    assert_eq!(sim.held(), 0, "all released in the end");
    assert!(most <= 2, "{most} PGs released in one 15-s cycle");
    sim.run_for(15, Some(12.0));
    assert!(sim.state.ladder.lever.is_none(), "the lever ended");
}
