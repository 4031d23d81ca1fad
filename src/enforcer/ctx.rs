//! Building decision records from the cycle's policy, observation and time.

use super::event::{DecisionEvent, DecisionRecord};
use super::observation::Observation;
use super::policy::{Mode, Policy};
use super::state::{EnforcerState, Watch};
use super::types::Time;

/// Context for building records: the policy, the cycle's observation and time.
pub(super) struct Ctx<'a> {
    pub(super) policy: &'a Policy,
    pub(super) obs: &'a Observation,
    pub(super) now: Time,
    pub(super) bound: Option<f64>,
}

impl<'a> Ctx<'a> {
    pub(super) fn new(policy: &'a Policy, obs: &'a Observation, now: Time) -> Self {
        Ctx {
            policy,
            obs,
            now,
            bound: obs.baseline.map(|b| b * policy.multiplier),
        }
    }

    /// A note logged once per recovery under `key`; the message is built only then.
    pub(super) fn note_once(
        &self,
        next: &mut EnforcerState,
        notes: &mut Vec<DecisionRecord>,
        key: impl Into<String>,
        event: DecisionEvent,
        message: impl FnOnce() -> String,
    ) {
        if next.note(key) {
            notes.push(self.record(event, message()));
        }
    }

    /// A line with the cycle's numbers; not performed, no changes.
    pub(super) fn record(&self, event: DecisionEvent, message: String) -> DecisionRecord {
        DecisionRecord {
            time: self.now,
            mode: self.policy.mode.as_str(),
            event: event.as_str().to_string(),
            performed: false,
            message,
            changes: Vec::new(),
            p99_seconds: self.obs.p99,
            bound_seconds: self.bound,
            baseline_seconds: self.obs.baseline,
            pgs_recovering: self.obs.pgs_recovering,
            pgs_undersized: self.obs.undersized_pgs,
            degraded_objects: self.obs.degraded_objects,
            misplaced_objects: self.obs.misplaced_objects,
            pools_at_min_size: self.obs.pools_at_min_size.clone(),
            level: None,
            deadline: None,
        }
    }

    /// "client p99 write 38.2 ms over the last 5m": every p99 a person reads names its window.
    pub(super) fn p99(&self, p99: f64) -> String {
        format!(
            "client p99 write {} over the last {}",
            crate::units::fmt_ms(p99),
            crate::units::fmt_window(
                self.obs
                    .p99_span
                    .unwrap_or(self.policy.latency_window.as_secs_f64())
            )
        )
    }

    /// "12 PGs recovering, 0 undersized"
    pub(super) fn pg_summary(&self) -> String {
        format!(
            "{} PGs recovering, {} undersized",
            self.obs.pgs_recovering, self.obs.undersized_pgs
        )
    }
}

/// Starts judging a move of the ladder one latency window from now.
pub(super) fn watch(next: &mut EnforcerState, what: String, now: Time, p99: Option<f64>) {
    // One judgement per move: a move replaced within the window is judged no more.
    next.ladder.watch.retain(|w| w.what != what);
    next.ladder.watch.push(Watch {
        what,
        at: now,
        p99_before: p99,
    });
}

/// "(observe mode) would: " before a line of something observe mode only simulates.
pub(super) fn observe_prefix(policy: &Policy) -> &'static str {
    if policy.mode == Mode::Enforce {
        ""
    } else {
        "(observe mode) would: "
    }
}
