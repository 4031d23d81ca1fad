//! The OSD map's pause flags as effects: what the pause rung's state asks for (after `decide`,
//! or when a pause slice ends between cycles), and releasing the enforcer's own flags at START
//! and SHUTDOWN. Pure: the loop runs the effects and feeds the results to `apply_outcome`.

use super::effect::{Decision, Effect, FlagsFor, LogLine, Planned};
use super::pause::{flag_change, FlagAction, PAUSE_FLAGS};
use super::policy::{Mode, Policy};
use super::state::EnforcerState;
use super::types::Time;

fn pause_flags() -> Vec<String> {
    PAUSE_FLAGS.map(String::from).to_vec()
}

/// The flag effect that makes the OSD map what the pause rung in `next` wants, given whether
/// it was paused before (`was_paused`). In enforce mode the flags it sets are in the state file
/// before they are set (`persist_first`, see `outcome::remember_first`); only the flags the
/// enforcer set are ever unset. In observe mode the change is said, never made.
pub fn plan(policy: &Policy, was_paused: bool, next: &EnforcerState) -> Option<Planned> {
    let want = next.ladder.pause.as_ref().is_some_and(|p| p.paused);
    if policy.mode != Mode::Enforce {
        let flags = pause_flags();
        let effect = match flag_change(was_paused, want)? {
            FlagAction::Set => Effect::SetFlags {
                flags,
                for_: FlagsFor::Pause,
            },
            FlagAction::Unset => Effect::UnsetFlags {
                flags,
                for_: FlagsFor::Pause,
            },
        };
        return Some(Planned {
            effect,
            persist_first: None,
        });
    }
    let have = !next.flags_set.is_empty();
    match flag_change(have, want)? {
        // Recorded before set: whatever happens next, a restart clears them.
        FlagAction::Set => Some(Planned {
            effect: Effect::SetFlags {
                flags: pause_flags(),
                for_: FlagsFor::Pause,
            },
            persist_first: Some("before setting the pause flags"),
        }),
        FlagAction::Unset => Some(Planned {
            effect: Effect::UnsetFlags {
                flags: next.flags_set.iter().cloned().collect(),
                for_: FlagsFor::Pause,
            },
            persist_first: None,
        }),
    }
}

/// The pause slice reached the maximum share of its period before the next cycle came: the
/// flags come off now.
pub fn end_slice(policy: &Policy, state: &EnforcerState, now: Time) -> Decision {
    let mut next = state.clone();
    let was_paused = next.ladder.pause.as_ref().is_some_and(|p| p.paused);
    if let Some(p) = next.ladder.pause.as_mut() {
        p.stop(now);
    }
    let effects = plan(policy, was_paused, &next).into_iter().collect();
    Decision {
        effects,
        notes: Vec::new(),
        next,
    }
}

/// What to do at START and SHUTDOWN (`when`) with the pause flags the state file says the
/// enforcer set: unset them (enforce mode), or say so (observe mode does not touch the cluster).
pub fn release(
    policy: &Policy,
    state: &EnforcerState,
    when: &'static str,
    now: Time,
) -> (Decision, Vec<LogLine>) {
    let mut next = state.clone();
    let mut lines = Vec::new();
    let mut effects = Vec::new();
    if !state.flags_set.is_empty() {
        let flags: Vec<String> = state.flags_set.iter().cloned().collect();
        if policy.mode != Mode::Enforce {
            lines.push(LogLine::Warn(format!("{when}: the state file says the enforcer (enforce mode) set {} and has not unset them; observe mode does not touch the cluster: unset them by hand (ceph osd unset FLAG) if nobody else wants them", flags.join(", "))));
        } else {
            if let Some(p) = next.ladder.pause.as_mut() {
                p.stop(now);
            }
            effects.push(Planned {
                effect: Effect::UnsetFlags {
                    flags,
                    for_: FlagsFor::Lifecycle(when),
                },
                persist_first: None,
            });
        }
    }
    (
        Decision {
            effects,
            notes: Vec::new(),
            next,
        },
        lines,
    )
}
