//! What of an effect reached Ceph when not all of it did (issue 33, point 4). The loop checks
//! the lease before every command that changes the cluster and stops an effect at the first
//! one it may no longer send; the backfill lever's holds are also bounded to what fits in a
//! cycle's share of the renew deadline, the rest left for the next cycle (the lever plans
//! afresh every cycle). Either way the effect is taken in as the part of it that ran, and the
//! entries the record got before the run for holds never sent come out again: the state says
//! what is held. Pure.

use super::ctx::Ctx;
use super::effect::{BackfillEffect, Outcome};
use super::event::{DecisionEvent, DecisionRecord};
use super::state::EnforcerState;
use crate::backfill::BalancerStep;
use crate::ceph::parse::upmap::PgId;

/// The error a command not sent carries in an outcome (the config change's, a pause flag's).
pub const LEASE_GONE: &str = "not sent: this instance no longer holds the lease (it could not renew within its renew deadline, or another instance took it); what it sent before is recorded, the rest is the next leader's to decide";

/// The commands of an effect that were not sent.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Cut {
    /// Not sent because the lease was lost on the way (the commands, for the log).
    pub lease_lost: Vec<String>,
    /// Holds left for the next cycle: more than fit in the cycle's share of the renew deadline.
    pub left: Vec<PgId>,
    /// That share, in rounds of commands sent together (for the log).
    pub rounds: usize,
}

impl Cut {
    pub fn is_empty(&self) -> bool {
        self.lease_lost.is_empty() && self.left.is_empty()
    }
}

/// How many rounds the lever's commands take: each chunk of `at_once` releases, `balancer
/// off`, each chunk of holds (the balancer put back comes only when nothing is held).
fn rounds_of(n: usize, at_once: usize) -> usize {
    n.div_ceil(at_once.max(1))
}

/// `b` bounded to `rounds` rounds of `at_once` commands: the releases first (they give
/// recovery back), then the balancer paused, then as many holds as fit. When no hold fits
/// the balancer is still paused if its round fits (the holds then go next cycle, with the
/// balancer already off): with one round (a renew deadline shorter than two command timeouts
/// plus the margin) holds would otherwise never go while the balancer is on. When its round
/// does not fit either, it is not paused. The holds left out, in order.
pub fn within(b: &BackfillEffect, rounds: usize, at_once: usize) -> (BackfillEffect, Vec<PgId>) {
    let pause = usize::from(matches!(b.balancer, BalancerStep::Pause { .. }));
    let releases = rounds_of(b.release.len(), at_once);
    let room = rounds.saturating_sub(releases + pause);
    let fit = room.saturating_mul(at_once.max(1));
    if b.hold.len() <= fit {
        return (b.clone(), Vec::new());
    }
    let mut run = b.clone();
    let left = run.hold.split_off(fit).iter().map(|h| h.pgid).collect();
    if run.hold.is_empty() && pause == 1 && releases + pause > rounds {
        run.balancer = BalancerStep::Nothing;
    }
    (run, left)
}

/// The part of `planned` that ran, by the commands `outcome` lists: the releases and holds
/// sent, and the balancer step only if all of its commands were sent (a balancer put back
/// half is put back again next time). Its numbers count what was not sent as still
/// backfilling.
pub fn as_ran(planned: &BackfillEffect, outcome: &Outcome) -> BackfillEffect {
    let Outcome::Backfill {
        released,
        held,
        balancer,
    } = outcome
    else {
        return planned.clone();
    };
    let sent = |list: &[(PgId, _)], id: PgId| list.iter().any(|(p, _)| *p == id);
    let mut ran = planned.clone();
    ran.hold.retain(|h| sent(held, h.pgid));
    ran.release.retain(|id| sent(released, *id));
    ran.restore.retain(|id, _| ran.release.contains(id));
    let commands = match &planned.balancer {
        BalancerStep::Nothing => 0,
        BalancerStep::Pause { .. } => 1,
        BalancerStep::Restore {
            set_mode, turn_on, ..
        } => usize::from(*set_mode) + usize::from(*turn_on),
    };
    // A failed command ends the step too; that one was sent, and is the outcome's to judge.
    let stopped_by_failure = balancer.iter().any(|(_, r)| r.is_err());
    if balancer.len() < commands && !stopped_by_failure {
        ran.balancer = BalancerStep::Nothing;
    }
    let holds_unsent = planned.hold.len() - ran.hold.len();
    let releases_unsent = planned.release.len() - ran.release.len();
    ran.backfilling.1 = (planned.backfilling.1 + holds_unsent).saturating_sub(releases_unsent);
    ran
}

/// The state without what `planned` recorded before it ran and `ran` did not send: each hold
/// never sent (an entry of this step's, same items), and the balancer's state remembered for a
/// pause that was not sent, once nothing is held. Releases not sent stay held in the record.
pub fn forget_unsent(
    mut state: EnforcerState,
    planned: &BackfillEffect,
    ran: &BackfillEffect,
) -> EnforcerState {
    for h in &planned.hold {
        let sent = ran.hold.iter().any(|r| r.pgid == h.pgid);
        let ours_of_this_step = state
            .backfill
            .held
            .get(&h.pgid)
            .is_some_and(|e| e.items == h.items && e.epoch == planned.epoch);
        if !sent && ours_of_this_step {
            state.backfill.held.remove(&h.pgid);
        }
    }
    let paused = matches!(ran.balancer, BalancerStep::Pause { .. });
    if matches!(planned.balancer, BalancerStep::Pause { remember: Some(_) })
        && !paused
        && state.backfill.held.is_empty()
    {
        state.backfill.balancer = None;
    }
    state
}

/// The decision-log lines for a cut: what the lost lease kept from Ceph (a failure: the step
/// was not done), and the holds left for the next cycle (said plainly: the lever goes on).
pub(super) fn records(ctx: &Ctx<'_>, cut: &Cut, what: &str) -> Vec<DecisionRecord> {
    let mut out = Vec::new();
    if !cut.lease_lost.is_empty() {
        let n = cut.lease_lost.len();
        let shown: Vec<&str> = cut.lease_lost.iter().take(4).map(String::as_str).collect();
        let more = if n > shown.len() {
            format!(" and {} more", n - shown.len())
        } else {
            String::new()
        };
        out.push(ctx.record(
            DecisionEvent::ActionFailed,
            format!(
                "NOT SENT: {what}: the lease was lost on the way, {n} command(s) not sent ({}{more}); the state records only what was sent, the next leader decides the rest",
                shown.join("; ")
            ),
        ));
    }
    if !cut.left.is_empty() {
        let ids: Vec<String> = cut.left.iter().take(8).map(ToString::to_string).collect();
        let more = if cut.left.len() > ids.len() {
            ", ..."
        } else {
            ""
        };
        out.push(ctx.record(
            DecisionEvent::Backfill,
            format!(
                "BACKFILL: {} holds left for the next cycle ({}{more}): at most {} round(s) of commands fit in the renew deadline (--enforcer.lease-renew-deadline less the 2s margin, each round up to --ceph-timeout)",
                cut.left.len(),
                ids.join(", "),
                cut.rounds
            ),
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backfill::PlannedHold;
    use crate::ceph::parse::upmap::{BalancerStatus, UpmapItem};
    use crate::enforcer::effect::CommandError;

    fn pg(seed: u32) -> PgId {
        PgId { pool: 2, seed }
    }

    fn hold(seed: u32) -> PlannedHold {
        PlannedHold {
            pgid: pg(seed),
            state: "active+remapped+backfill_wait".into(),
            up: vec![Some(3), Some(2)],
            acting: vec![Some(1), Some(2)],
            items: vec![UpmapItem { from: 3, to: 1 }],
            before: Vec::new(),
        }
    }

    fn effect(holds: u32, releases: u32, pause: bool) -> BackfillEffect {
        BackfillEffect {
            hold: (0..holds).map(hold).collect(),
            release: (100..100 + releases).map(pg).collect(),
            restore: Default::default(),
            balancer: if pause {
                BalancerStep::Pause {
                    remember: Some(BalancerStatus {
                        active: true,
                        mode: "upmap".into(),
                    }),
                }
            } else {
                BalancerStep::Nothing
            },
            fsid: "f".into(),
            epoch: 7,
            why: "at most 2 PGs backfill at once".into(),
            backfilling: (40, 2),
            lifecycle: None,
        }
    }

    #[test]
    fn the_holds_that_fit_go_and_the_rest_wait_for_the_next_cycle() {
        // 2 rounds of 8: the balancer off takes one, 8 holds the other.
        let (run, left) = within(&effect(20, 0, true), 2, 8);
        assert_eq!(run.hold.len(), 8);
        assert_eq!(left, (8..20).map(pg).collect::<Vec<_>>());
        assert!(matches!(run.balancer, BalancerStep::Pause { .. }));
        // 9 releases take both rounds: no hold, and no balancer off for none.
        let (run, left) = within(&effect(3, 9, true), 2, 8);
        assert!(run.hold.is_empty() && left.len() == 3);
        assert_eq!(run.release.len(), 9, "releases are never left");
        assert_eq!(run.balancer, BalancerStep::Nothing);
        // What fits is left whole.
        let (run, left) = within(&effect(16, 0, false), 2, 8);
        assert_eq!((run.hold.len(), left.len()), (16, 0));
    }

    /// One round (the lab's 4 s renew deadline with the 10 s timeout): the balancer is paused
    /// alone and the holds go the next cycle. Left out with it, as before, the lever never held
    /// while the balancer was on (every cycle planned the pause and the holds, and sent neither).
    #[test]
    fn with_one_round_the_balancer_is_paused_alone_and_the_holds_go_next_cycle() {
        let (run, left) = within(&effect(5, 0, true), 1, 8);
        assert!(run.hold.is_empty());
        assert_eq!(left, (0..5).map(pg).collect::<Vec<_>>());
        assert!(matches!(run.balancer, BalancerStep::Pause { .. }));
        // The next cycle: the balancer off already, the holds fit.
        let (run, left) = within(&effect(5, 0, false), 1, 8);
        assert_eq!((run.hold.len(), left.len()), (5, 0));
        // A release takes the round: neither the pause nor a hold.
        let (run, left) = within(&effect(5, 1, true), 1, 8);
        assert!(run.hold.is_empty() && left.len() == 5);
        assert_eq!(run.balancer, BalancerStep::Nothing);
    }

    #[test]
    fn only_what_was_sent_stays_in_the_record() {
        let planned = effect(12, 0, true);
        let mut state = EnforcerState::default();
        for h in &planned.hold {
            h.record_in(&mut state.backfill, &planned.fsid, planned.epoch);
        }
        state.backfill.balancer = Some(BalancerStatus {
            active: true,
            mode: "upmap".into(),
        });
        // Balancer off and the first 8 holds sent (one failed: sent all the same), the rest not.
        let ok = |id| (id, Ok::<(), CommandError>(()));
        let mut held: Vec<_> = (0..7).map(|s| ok(pg(s))).collect();
        held.push((pg(7), Err(CommandError::from("timed out"))));
        let outcome = Outcome::Backfill {
            released: vec![],
            held,
            balancer: vec![("balancer off".into(), Ok(()))],
        };
        let ran = as_ran(&planned, &outcome);
        assert_eq!(ran.hold.len(), 8);
        assert_eq!(ran.backfilling.1, 2 + 4, "the 4 not held still backfill");
        let state = forget_unsent(state, &planned, &ran);
        assert_eq!(
            state.backfill.held.keys().copied().collect::<Vec<_>>(),
            (0..8).map(pg).collect::<Vec<_>>()
        );
        assert!(state.backfill.balancer.is_some(), "it was paused");

        // Lost before anything was sent: nothing recorded stays, the balancer is not ours.
        let mut state = EnforcerState::default();
        for h in &planned.hold {
            h.record_in(&mut state.backfill, &planned.fsid, planned.epoch);
        }
        state.backfill.balancer = Some(BalancerStatus {
            active: true,
            mode: "upmap".into(),
        });
        let none = Outcome::Backfill {
            released: vec![],
            held: vec![],
            balancer: vec![],
        };
        let ran = as_ran(&planned, &none);
        assert_eq!(ran.balancer, BalancerStep::Nothing);
        let state = forget_unsent(state, &planned, &ran);
        assert!(state.backfill.is_empty(), "{:?}", state.backfill);
    }

    #[test]
    fn an_entry_of_an_earlier_step_is_never_forgotten_here() {
        let planned = effect(1, 0, false);
        let mut state = EnforcerState::default();
        // The same PG held at an earlier epoch with other items: not this step's entry.
        let mut earlier = hold(0);
        earlier.items = vec![UpmapItem { from: 2, to: 0 }];
        earlier.record_in(&mut state.backfill, "f", 3);
        let ran = as_ran(
            &planned,
            &Outcome::Backfill {
                released: vec![],
                held: vec![],
                balancer: vec![],
            },
        );
        let state = forget_unsent(state, &planned, &ran);
        assert!(state.backfill.held.contains_key(&pg(0)));
    }
}
