//! What `serve` does at start with what the enforcer's state file holds, decided from the mode
//! alone: pure, so that each rule is tested. `serve` loads the file, asks [`plan`], logs the
//! notices and saves or refuses as told.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use ceph_recovery_budget::enforcer::state::StateFileError;
use ceph_recovery_budget::enforcer::{EnforcerState, Mode};

/// How the enforcer starts.
#[derive(Debug, Clone, PartialEq)]
pub enum Start {
    /// Mode off: no enforcer.
    Off,
    /// Run the enforcer from `state`.
    Run {
        state: Box<EnforcerState>,
        /// Keep the state file up to date (not when observe mode could not read it: the file
        /// stays as it is for an enforcer in enforce mode to restore from).
        persist: bool,
        /// Write the state file before starting (enforce mode): a file that cannot be written
        /// must stop it now, not in the middle of a recovery.
        save_first: bool,
    },
}

/// What to tell the operator at start (each logged as today's lines are).
#[derive(Debug, Clone, PartialEq)]
pub enum Notice {
    /// Observe mode could not read the state file: it starts fresh and leaves the file alone.
    UnreadableInObserve { error: String },
    /// The file holds what observe mode only pretended to set; enforce mode must not "restore"
    /// that for real, so it starts fresh (keeping the learned baseline and the flags it set).
    ObserveEpisodeDropped,
    /// The enforcer changed settings before it stopped; it restores them when recovery ends.
    Resuming {
        original: BTreeMap<String, Option<String>>,
        applied: Option<BTreeMap<String, String>>,
    },
    /// Mode off, but the file says the enforcer set OSD map flags and did not unset them.
    OffWithFlagsSet { flags: BTreeSet<String> },
    /// Mode off, but the file says the enforcer changed settings it has not restored.
    OffWithUnrestored {
        values: BTreeMap<String, String>,
        original: BTreeMap<String, Option<String>>,
    },
}

/// Why `serve` must not start.
#[derive(Debug, thiserror::Error)]
pub enum Refusal {
    /// Enforce mode cannot know what it has to restore.
    #[error(transparent)]
    Unreadable(#[from] StateFileError),
    #[error(
        "the state file {path} says the enforcer (enforce mode) set {flags:?} and has not unset them; \
         recovery may be paused: run in enforce mode (it unsets them at start) or `ceph osd unset` them by hand and remove the file"
    )]
    FlagsLeftSet {
        path: String,
        flags: BTreeSet<String>,
    },
    #[error(
        "the state file {path} says the enforcer (enforce mode) changed {values:?} and has not restored {original:?} yet; \
         run in enforce mode until it restores them, or restore them by hand and remove the file"
    )]
    Unrestored {
        path: String,
        values: BTreeMap<String, String>,
        original: BTreeMap<String, Option<String>>,
    },
}

/// How the enforcer starts.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    pub start: Start,
    pub notices: Vec<Notice>,
}

/// The start-up rules, over the mode and the state file as loaded (a missing file loads as a
/// fresh state).
pub fn plan(
    mode: Mode,
    state_file: &Path,
    loaded: Result<EnforcerState, StateFileError>,
) -> Result<Plan, Refusal> {
    let mut notices = Vec::new();
    if mode == Mode::Off {
        // Nothing runs that would put the cluster back: say what the file says is left.
        if let Ok(state) = loaded {
            if !state.flags_set.is_empty() {
                notices.push(Notice::OffWithFlagsSet {
                    flags: state.flags_set,
                });
            }
            if let Some(a) = state.applied.filter(|a| !a.simulated) {
                notices.push(Notice::OffWithUnrestored {
                    values: a.values,
                    original: state.original,
                });
            }
        }
        return Ok(Plan {
            start: Start::Off,
            notices,
        });
    }
    let mut persist = true;
    let mut state = match loaded {
        Ok(s) => s,
        Err(e) if mode == Mode::Enforce => return Err(e.into()),
        Err(e) => {
            notices.push(Notice::UnreadableInObserve {
                error: e.to_string(),
            });
            persist = false;
            EnforcerState::default()
        }
    };
    let path = || state_file.display().to_string();
    match (&state.applied, mode) {
        (Some(a), Mode::Enforce) if a.simulated => {
            notices.push(Notice::ObserveEpisodeDropped);
            state = EnforcerState {
                learned: state.learned,
                flags_set: state.flags_set,
                ..EnforcerState::default()
            };
        }
        // Observe mode changes nothing, so it could not put back what enforce mode left.
        (_, Mode::Observe) if !state.flags_set.is_empty() => {
            return Err(Refusal::FlagsLeftSet {
                path: path(),
                flags: state.flags_set,
            })
        }
        (Some(a), Mode::Observe) if !a.simulated => {
            return Err(Refusal::Unrestored {
                path: path(),
                values: a.values.clone(),
                original: state.original,
            })
        }
        _ => {}
    }
    if !state.original.is_empty() {
        notices.push(Notice::Resuming {
            original: state.original.clone(),
            applied: state.applied.as_ref().map(|a| a.values.clone()),
        });
    }
    Ok(Plan {
        start: Start::Run {
            state: Box::new(state),
            persist,
            save_first: mode == Mode::Enforce,
        },
        notices,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use ceph_recovery_budget::enforcer::state::{ActionKind, Applied, Learned};

    const FILE: &str = "/var/lib/crb/state.json";

    fn applied(simulated: bool) -> Applied {
        Applied {
            kind: ActionKind::Throttle,
            values: BTreeMap::from([(
                "osd_mclock_profile".to_string(),
                "high_client_ops".to_string(),
            )]),
            at: 100.0,
            simulated,
            verified: false,
            not_taken: Vec::new(),
            effective: None,
        }
    }

    /// A state left by an enforcer that changed the profile (and maybe set the pause flags).
    fn left(simulated: bool, flags: &[&str]) -> EnforcerState {
        EnforcerState {
            original: BTreeMap::from([("osd_mclock_profile".to_string(), None)]),
            applied: Some(applied(simulated)),
            learned: Some(Learned {
                p99_seconds: 0.016,
                at: 50.0,
            }),
            flags_set: flags.iter().map(|f| f.to_string()).collect(),
            ..EnforcerState::default()
        }
    }

    fn unreadable() -> StateFileError {
        StateFileError::Read {
            path: FILE.into(),
            source: std::io::Error::from(std::io::ErrorKind::PermissionDenied),
        }
    }

    fn run(mode: Mode, loaded: Result<EnforcerState, StateFileError>) -> Result<Plan, Refusal> {
        plan(mode, Path::new(FILE), loaded)
    }

    #[test]
    fn a_fresh_state_starts_quietly_and_enforce_mode_saves_first() {
        for (mode, save_first) in [(Mode::Observe, false), (Mode::Enforce, true)] {
            let p = run(mode, Ok(EnforcerState::default())).unwrap();
            assert_eq!(
                p.start,
                Start::Run {
                    state: Box::default(),
                    persist: true,
                    save_first
                }
            );
            assert!(p.notices.is_empty());
        }
    }

    #[test]
    fn an_unreadable_file_stops_enforce_mode_and_leaves_observe_mode_fresh_without_writing() {
        let err = run(Mode::Enforce, Err(unreadable())).unwrap_err();
        assert!(matches!(err, Refusal::Unreadable(_)));
        assert!(
            err.to_string()
                .starts_with("cannot read enforcer state file"),
            "{err}"
        );

        let p = run(Mode::Observe, Err(unreadable())).unwrap();
        assert_eq!(
            p.start,
            Start::Run {
                state: Box::default(),
                persist: false,
                save_first: false
            }
        );
        assert!(
            matches!(&p.notices[..], [Notice::UnreadableInObserve { error }] if error.contains(FILE))
        );
    }

    #[test]
    fn enforce_mode_resumes_what_it_left_and_drops_what_observe_mode_pretended() {
        let p = run(Mode::Enforce, Ok(left(false, &["nobackfill"]))).unwrap();
        let Start::Run { state, .. } = &p.start else {
            panic!("runs")
        };
        assert_eq!(**state, left(false, &["nobackfill"]), "kept as it is");
        assert_eq!(
            p.notices,
            vec![Notice::Resuming {
                original: left(false, &[]).original,
                applied: Some(applied(false).values),
            }]
        );

        let p = run(Mode::Enforce, Ok(left(true, &["norecover"]))).unwrap();
        let Start::Run { state, .. } = &p.start else {
            panic!("runs")
        };
        assert_eq!(state.applied, None);
        assert!(state.original.is_empty());
        assert_eq!(
            state.learned,
            left(true, &[]).learned,
            "the baseline is kept"
        );
        assert_eq!(
            state.flags_set,
            BTreeSet::from(["norecover".to_string()]),
            "flags set for real are still unset at start"
        );
        assert_eq!(p.notices, vec![Notice::ObserveEpisodeDropped]);
    }

    #[test]
    fn observe_mode_refuses_what_enforce_mode_left_undone() {
        let err = run(Mode::Observe, Ok(left(true, &["nobackfill"]))).unwrap_err();
        assert!(matches!(err, Refusal::FlagsLeftSet { .. }));
        let text = err.to_string();
        assert!(
            text.starts_with(&format!("the state file {FILE} says the enforcer (enforce mode) set {{\"nobackfill\"}} and has not unset them; recovery may be paused")),
            "{text}"
        );

        let err = run(Mode::Observe, Ok(left(false, &[]))).unwrap_err();
        let text = err.to_string();
        assert!(
            text.contains("changed {\"osd_mclock_profile\": \"high_client_ops\"} and has not restored {\"osd_mclock_profile\": None} yet; run in enforce mode"),
            "{text}"
        );

        // Its own pretended episode is fine: it resumes it.
        let p = run(Mode::Observe, Ok(left(true, &[]))).unwrap();
        assert!(matches!(
            p.start,
            Start::Run {
                persist: true,
                save_first: false,
                ..
            }
        ));
        assert!(matches!(&p.notices[..], [Notice::Resuming { .. }]));
    }

    #[test]
    fn mode_off_only_says_what_is_left_on_the_cluster() {
        let p = run(Mode::Off, Ok(left(false, &["nobackfill", "norecover"]))).unwrap();
        assert_eq!(p.start, Start::Off);
        assert_eq!(
            p.notices,
            vec![
                Notice::OffWithFlagsSet {
                    flags: BTreeSet::from(["nobackfill".to_string(), "norecover".to_string()])
                },
                Notice::OffWithUnrestored {
                    values: applied(false).values,
                    original: left(false, &[]).original,
                },
            ]
        );
        // Pretended changes, a fresh file, or one that cannot be read: nothing to say.
        for loaded in [
            Ok(left(true, &[])),
            Ok(EnforcerState::default()),
            Err(unreadable()),
        ] {
            let p = run(Mode::Off, loaded).unwrap();
            assert_eq!(
                p,
                Plan {
                    start: Start::Off,
                    notices: vec![]
                }
            );
        }
    }
}
