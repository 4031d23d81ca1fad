//! The enforcer: a control loop inside `serve`, fed by the exporter's snapshots.
//! observe (Snapshot -> Observation) -> decide (pure) -> act (Actor) -> log (DecisionRecord).

pub mod actor;
pub mod decide;
pub mod ladder;
pub mod observation;
pub mod pause;
pub mod policy;
pub mod state;
pub mod view;

#[cfg(test)]
mod ladder_tests;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::watch;

use crate::collect::Snapshot;
use crate::latency::prometheus::ExternalP99;
use crate::latency::{quantile, LatencyWindow};
use crate::units::{fmt_ms, fmt_secs};
pub use actor::{Actor, CephActor};
pub use decide::{apply_outcome, decide, Action, Decision, DecisionRecord};
pub use observation::Observation;
pub use policy::{BaselineSpec, Mode, Policy};
pub use state::{EnforcerState, Time};
pub use view::EnforcerView;

/// Wall-clock time for the pure code and the log. The tokio-based clock advances with tokio's
/// (pausable) clock, so the loop can be tested under `tokio::time::pause`.
pub trait Clock: Send + Sync + 'static {
    fn now(&self) -> Time;
}

pub struct TokioClock {
    wall_at_start: f64,
    mono_at_start: tokio::time::Instant,
}

impl TokioClock {
    pub fn new() -> Self {
        let wall = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs_f64())
            .unwrap_or(0.0);
        Self::starting_at(wall)
    }

    pub fn starting_at(wall: f64) -> Self {
        Self {
            wall_at_start: wall,
            mono_at_start: tokio::time::Instant::now(),
        }
    }
}

impl Default for TokioClock {
    fn default() -> Self {
        Self::new()
    }
}

impl Clock for TokioClock {
    fn now(&self) -> Time {
        self.wall_at_start + self.mono_at_start.elapsed().as_secs_f64()
    }
}

/// How log lines are written: plain sentences, or with every field for JSON logs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogStyle {
    Text,
    Json,
}

/// Shared with HTTP: the current view and the last decisions.
pub type Shared = Arc<Mutex<EnforcerView>>;

pub struct Enforcer<A, K> {
    policy: Policy,
    actor: A,
    clock: K,
    state: EnforcerState,
    window: LatencyWindow,
    learner: LatencyWindow,
    fixed_baseline: Option<f64>,
    shared: Shared,
    log_style: LogStyle,
    last_cycle: u64,
    interval: Duration,
    persist: bool,
    /// `--latency.source prometheus`: p99 from a poller instead of the collected histograms.
    external_p99: Option<watch::Receiver<Option<ExternalP99>>>,
    /// The last cycle's observation, for the log lines of a pause ended between cycles.
    last_obs: Option<Observation>,
    /// The pause share of the last PAUSE line in the decision log: each slice at the same
    /// share is counted and logged at debug level only, so the log stays readable.
    logged_share: Option<f64>,
}

impl<A: Actor, K: Clock> Enforcer<A, K> {
    /// `fixed_baseline` is the baseline in seconds when the policy gives one (a duration, or the
    /// p99 read from a fio report at start).
    pub fn new(
        policy: Policy,
        actor: A,
        clock: K,
        state: EnforcerState,
        fixed_baseline: Option<f64>,
        interval: Duration,
        log_style: LogStyle,
    ) -> Self {
        let shared = Arc::new(Mutex::new(EnforcerView::new(&policy)));
        Self {
            window: LatencyWindow::new(policy.latency_window),
            learner: LatencyWindow::new(policy.learn_window),
            policy,
            actor,
            clock,
            state,
            fixed_baseline,
            shared,
            log_style,
            last_cycle: 0,
            interval,
            persist: true,
            external_p99: None,
            last_obs: None,
            logged_share: None,
        }
    }

    /// Judge by the p99 a Prometheus poller publishes (`--latency.source prometheus`). An answer
    /// older than three intervals, or a failed query, makes the observation stale (HOLD).
    pub fn with_external_p99(mut self, rx: watch::Receiver<Option<ExternalP99>>) -> Self {
        self.external_p99 = Some(rx);
        self
    }

    pub fn shared(&self) -> Shared {
        self.shared.clone()
    }

    pub fn state(&self) -> &EnforcerState {
        &self.state
    }

    fn log(&self, r: &DecisionRecord) {
        match self.log_style {
            LogStyle::Text => tracing::info!(target: "decision", "{}", r.message),
            LogStyle::Json => tracing::info!(
                target: "decision",
                mode = r.mode,
                event = %r.event,
                performed = r.performed,
                changes = %serde_json::to_string(&r.changes).unwrap_or_default(),
                p99_seconds = r.p99_seconds,
                bound_seconds = r.bound_seconds,
                baseline_seconds = r.baseline_seconds,
                pgs_recovering = r.pgs_recovering,
                pgs_undersized = r.pgs_undersized,
                degraded_objects = r.degraded_objects,
                misplaced_objects = r.misplaced_objects,
                pools_at_min_size = %r.pools_at_min_size.join(","),
                "{}",
                r.message
            ),
        }
        if let Ok(mut v) = self.shared.lock() {
            v.push_decision(r.clone());
        }
    }

    /// Writes the state file; false when it could not be written.
    fn persist(&self, what: &str) -> bool {
        if !self.persist {
            return true;
        }
        match self.state.save(&self.policy.state_file) {
            Ok(()) => true,
            Err(e) => {
                if self.policy.mode == Mode::Enforce {
                    tracing::error!(error = %e, "cannot persist the enforcer state ({what}); a restart may not restore the operator's original settings");
                } else {
                    tracing::warn!(error = %e, "cannot persist the enforcer state ({what})");
                }
                false
            }
        }
    }

    /// Never write the state file (observe mode with a file that could not be read: it may
    /// hold what an enforce-mode run needs to restore).
    pub fn without_persistence(mut self) -> Self {
        self.persist = false;
        self
    }

    /// Feeds the latency windows with a new snapshot's histograms and returns p99.
    fn observe(
        &mut self,
        snapshot: &Snapshot,
        mono: tokio::time::Instant,
        now: Time,
    ) -> Observation {
        let mut obs = observation::from_snapshot(snapshot, mono);
        if snapshot.cycle != self.last_cycle {
            self.last_cycle = snapshot.cycle;
            if let Some(lat) = snapshot.fresh(&snapshot.latency, mono) {
                let at = lat_instant(snapshot, mono);
                self.window.push(at, lat.per_osd.clone());
                if obs.recovery_active() || obs.stale.is_some() {
                    // Latency during recovery is not a baseline.
                    self.learner = LatencyWindow::new(self.policy.learn_window);
                } else {
                    self.learner.push(at, lat.per_osd.clone());
                    let full = self.learner.span() + self.interval >= self.policy.learn_window;
                    if full {
                        if let Ok(Some(inc)) = self.learner.increase() {
                            if let Some(p99) = quantile(0.99, &inc) {
                                let first = self.state.learned.is_none();
                                self.state.learned = Some(state::Learned {
                                    p99_seconds: p99,
                                    at: now,
                                });
                                if first && self.policy.baseline == BaselineSpec::Learned {
                                    tracing::info!(target: "decision", "BASELINE learned: client p99 write {} over {} without recovery", fmt_ms(p99), fmt_secs(self.policy.learn_window.as_secs_f64()));
                                }
                            }
                        }
                    }
                }
            }
        }
        obs.p99 = match self.window.increase() {
            Ok(Some(inc)) => quantile(0.99, &inc),
            _ => None,
        };
        if let Some(rx) = &self.external_p99 {
            let max_age = self.interval * 3;
            let problem = match &*rx.borrow() {
                None => Some("no answer from Prometheus yet".to_string()),
                Some(a) if mono.saturating_duration_since(a.at) > max_age => Some(format!(
                    "the last answer from Prometheus is {} old",
                    fmt_secs(mono.saturating_duration_since(a.at).as_secs_f64())
                )),
                Some(ExternalP99 { value: Err(e), .. }) => {
                    Some(format!("the p99 query to Prometheus failed: {e}"))
                }
                Some(ExternalP99 { value: Ok(v), .. }) => {
                    obs.p99 = *v;
                    None
                }
            };
            if let Some(p) = problem {
                obs.p99 = None;
                obs.stale = Some(match obs.stale.take() {
                    Some(s) => format!("{s}; {p}"),
                    None => p,
                });
            }
        }
        match (&self.policy.baseline, self.fixed_baseline) {
            (BaselineSpec::Learned, _) => match self.state.learned {
                Some(l) => {
                    obs.baseline = Some(l.p99_seconds);
                    obs.baseline_note = Some("learned".into());
                }
                None => {
                    obs.baseline_note = Some(format!(
                        "baseline is learned from {} of client writes without recovery and none has been measured yet",
                        fmt_secs(self.policy.learn_window.as_secs_f64())
                    ))
                }
            },
            (_, Some(b)) => obs.baseline = Some(b),
            (_, None) => obs.baseline_note = Some("baseline not set".into()),
        }
        obs
    }

    fn lever_keys(&self) -> Vec<String> {
        let mut keys: Vec<String> = self.policy.wpq_levers.keys().cloned().collect();
        keys.push(decide::MCLOCK_PROFILE_KEY.to_string());
        for k in ladder::rung2_keys() {
            if !keys.iter().any(|x| x == k) {
                keys.push(k.to_string());
            }
        }
        keys
    }

    /// A line of the decision log about the pause flags, with the cycle's numbers.
    fn flag_record(
        &self,
        obs: &Observation,
        event: &str,
        message: String,
        now: Time,
    ) -> DecisionRecord {
        DecisionRecord {
            performed: self.policy.mode == Mode::Enforce,
            ..obs_record(&self.policy, obs, now, event, message)
        }
    }

    /// Makes the OSD map's pause flags what the pause rung wants. Only the enforcer's own flags
    /// are ever unset; they are in the state file before they are set.
    async fn reconcile_flags(&mut self, obs: &Observation, was_paused: bool, now: Time) {
        let pause = self.state.ladder.pause.as_ref();
        let want = pause.is_some_and(|p| p.paused);
        let share = pause.map_or(0.0, |p| p.share);
        let period = self.policy.ladder.pause.period;
        let flags = pause::PAUSE_FLAGS.join(", ");
        if self.policy.mode != Mode::Enforce {
            if want != was_paused {
                let (event, msg) = if want {
                    ("PAUSE", format!("(observe mode) would PAUSE: ceph osd set {flags} for {:.0} s of each {period:.0} s", self.policy.ladder.pause.planned(share)))
                } else {
                    (
                        "UNPAUSE",
                        format!("(observe mode) would UNPAUSE: ceph osd unset {flags}"),
                    )
                };
                let rec = self.flag_record(obs, event, msg, now);
                self.log_slice(&rec, want, share);
            }
            return;
        }
        let have = !self.state.flags_set.is_empty();
        if want && !have {
            // Recorded before set: whatever happens next, a restart clears them.
            self.state
                .flags_set
                .extend(pause::PAUSE_FLAGS.map(String::from));
            let mut failed = None;
            if !self.persist("before setting the pause flags") {
                self.state.flags_set.clear();
                failed = Some(format!(
                    "not pausing: the state file {} cannot be written, and a flag the enforcer cannot remember setting could stay set",
                    self.policy.state_file.display()
                ));
            } else {
                for f in pause::PAUSE_FLAGS {
                    if let Err(e) = self.actor.set_flag(f).await {
                        failed = Some(format!("ceph osd set {f}: {e}"));
                        break;
                    }
                }
            }
            let rec = match failed {
                None => self.flag_record(
                    obs,
                    "PAUSE",
                    format!(
                        "PAUSE: ceph osd set {flags} for {:.0} s of this {period:.0} s period (share {:.0}%); paused {} in this recovery so far",
                        self.policy.ladder.pause.planned(share),
                        share * 100.0,
                        fmt_secs(self.state.ladder.paused_so_far(now))
                    ),
                    now,
                ),
                Some(e) => {
                    // Not paused: take back what this attempt may have set, so that the next
                    // attempt starts clean (and no half pause stays).
                    if let Some(p) = self.state.ladder.pause.as_mut() {
                        p.cancel();
                    }
                    let mut left = Vec::new();
                    for f in self.state.flags_set.clone() {
                        match self.actor.unset_flag(&f).await {
                            Ok(()) => {
                                self.state.flags_set.remove(&f);
                            }
                            Err(_) => left.push(f),
                        }
                    }
                    let _ = self.persist("after a failed pause");
                    let then = if left.is_empty() {
                        "nothing of it stays set; the pause is tried again in its next slot".to_string()
                    } else {
                        format!("{} may still be set: unsetting it is retried every cycle", left.join(" and "))
                    };
                    let mut r = self.flag_record(obs, "ACTION_FAILED", format!("FAILED PAUSE: {e}; {then}"), now);
                    r.performed = false;
                    if let Ok(mut v) = self.shared.lock() {
                        v.action_failures_total += 1;
                    }
                    r
                }
            };
            self.log_slice(&rec, true, share);
        } else if !want && have {
            let mut errors = Vec::new();
            for f in self.state.flags_set.clone() {
                match self.actor.unset_flag(&f).await {
                    Ok(()) => {
                        self.state.flags_set.remove(&f);
                    }
                    Err(e) => errors.push(format!("ceph osd unset {f}: {e}")),
                }
            }
            let rec = if errors.is_empty() {
                let why = if self.state.ladder.pause.is_some() {
                    format!(
                        "recovery runs for the rest of this {period:.0} s period ({:.0}% paused)",
                        share * 100.0
                    )
                } else {
                    "the pause has ended".to_string()
                };
                self.flag_record(
                    obs,
                    "UNPAUSE",
                    format!(
                        "UNPAUSE: ceph osd unset {flags}: {why}; paused {} in this recovery so far",
                        fmt_secs(self.state.ladder.paused_so_far(now))
                    ),
                    now,
                )
            } else {
                if let Ok(mut v) = self.shared.lock() {
                    v.action_failures_total += 1;
                }
                let mut r = self.flag_record(
                    obs,
                    "ACTION_FAILED",
                    format!(
                        "FAILED UNPAUSE: {}; trying again every cycle (recovery stays paused until it works: check the cluster)",
                        errors.join("; ")
                    ),
                    now,
                );
                r.performed = false;
                r
            };
            self.log_slice(&rec, false, share);
            let _ = self.persist("after unsetting the pause flags");
        }
    }

    /// The pause slice reached the maximum share of its period before the next cycle came.
    async fn end_pause_slice(&mut self) {
        let now = self.clock.now();
        let was_paused = self.state.ladder.pause.as_ref().is_some_and(|p| p.paused);
        if let Some(p) = self.state.ladder.pause.as_mut() {
            p.stop(now);
        }
        let obs = self.last_obs.clone().unwrap_or_else(Observation::quiet);
        self.reconcile_flags(&obs, was_paused, now).await;
        let _ = self.persist("after ending a pause slice");
        if let Ok(mut v) = self.shared.lock() {
            v.update(&self.policy, &obs, &self.state, now);
        }
    }

    /// A PAUSE/UNPAUSE line: in the decision log when something changed (a new share, the
    /// pause over, a failure); otherwise counted and logged at debug level, one slice being
    /// like the last.
    fn log_slice(&mut self, rec: &DecisionRecord, paused: bool, share: f64) {
        let notable = match rec.event.as_str() {
            "PAUSE" => self.logged_share != Some(share),
            "UNPAUSE" => self.state.ladder.pause.is_none(),
            _ => true,
        };
        if notable {
            self.log(rec);
            if rec.event == "PAUSE" {
                self.logged_share = Some(share);
            }
        } else {
            tracing::debug!(target: "decision", "{}", rec.message);
            if let Ok(mut v) = self.shared.lock() {
                *v.decisions_total.entry(rec.event.clone()).or_insert(0) += 1;
            }
        }
        if !paused && self.state.ladder.pause.is_none() {
            self.logged_share = None;
        }
    }

    /// Unsets the pause flags the state file says the enforcer set (at start and shutdown).
    pub async fn clear_own_flags(&mut self, when: &str) {
        if self.state.flags_set.is_empty() {
            return;
        }
        let flags: Vec<String> = self.state.flags_set.iter().cloned().collect();
        if self.policy.mode != Mode::Enforce {
            tracing::warn!(target: "decision", "{when}: the state file says the enforcer (enforce mode) set {} and has not unset them; observe mode does not touch the cluster: unset them by hand (ceph osd unset FLAG) if nobody else wants them", flags.join(", "));
            return;
        }
        let now = self.clock.now();
        if let Some(p) = self.state.ladder.pause.as_mut() {
            p.stop(now);
        }
        let mut failed = Vec::new();
        for f in &flags {
            match self.actor.unset_flag(f).await {
                Ok(()) => {
                    self.state.flags_set.remove(f);
                }
                Err(e) => failed.push(format!("ceph osd unset {f}: {e}")),
            }
        }
        if failed.is_empty() {
            tracing::info!(target: "decision", "{when}: unset {} (set by the enforcer's pause rung); recovery is not paused by the enforcer", flags.join(", "));
        } else {
            tracing::error!(target: "decision", "{when}: could not unset the enforcer's pause flags: {}; RECOVERY MAY STAY PAUSED: run `ceph osd unset nobackfill; ceph osd unset norecover`", failed.join("; "));
        }
        let _ = self.persist(when);
        if let Ok(mut v) = self.shared.lock() {
            v.update_mode_only(&self.policy, &self.state);
        }
    }

    /// One cycle: observe, decide, act, log, persist.
    pub async fn step(&mut self, snapshot: &Snapshot) {
        let mono = tokio::time::Instant::now();
        let now = self.clock.now();
        // What is on disk now; observing may already change it (a learned baseline).
        let initial = self.state.clone();
        let mut obs = self.observe(snapshot, mono, now);
        let involved = obs.recovery_active()
            || self.state.applied.is_some()
            || !self.state.original.is_empty()
            || !self.state.flags_set.is_empty()
            || self.state.ladder.pause.is_some();
        if (obs.stale.is_none() && involved) || !self.state.flags_set.is_empty() {
            match self.actor.flags().await {
                Ok(f) => obs.osd_flags = Some(f),
                Err(e) => {
                    obs.stale = Some(match obs.stale.take() {
                        Some(s) => {
                            format!("{s}; cannot read the OSD map flags (ceph osd dump): {e}")
                        }
                        None => format!("cannot read the OSD map flags (ceph osd dump): {e}"),
                    })
                }
            }
        }
        // One mon command, only when the versions decide something (see `versions_matter`).
        if obs.stale.is_none()
            && involved
            && ladder::versions_matter(&self.policy, &obs.op_queue, self.state.ladder.rung)
        {
            obs.osd_versions = self
                .actor
                .osd_versions()
                .await
                .map(|v| v.into_iter().collect())
                .map_err(|e| e.to_string());
        }
        if obs.stale.is_none() && involved {
            match self.actor.configured(&self.lever_keys()).await {
                Ok(values) => {
                    obs.configured = values;
                    obs.configured_known = true;
                }
                Err(e) => {
                    obs.stale = Some(format!(
                        "cannot read the configured values (ceph config dump): {e}"
                    ));
                }
            }
        }

        let Decision {
            action,
            notes,
            next,
        } = decide(&self.policy, &obs, &self.state, now);
        let before = std::mem::replace(&mut self.state, next);
        for n in &notes {
            self.log(n);
        }
        let was_paused = before.ladder.pause.as_ref().is_some_and(|p| p.paused);
        // Unpausing first: it never waits for a config change.
        if !self.state.ladder.pause.as_ref().is_some_and(|p| p.paused) {
            self.reconcile_flags(&obs, was_paused, now).await;
        }
        if let Some(action) = action {
            // The original values are on disk before anything changes.
            let saved = before.original == self.state.original || self.persist("before acting");
            let result = match self.policy.mode {
                Mode::Enforce if !saved => Err(format!(
                    "not changing the cluster: the operator's original values could not be saved to {}",
                    self.policy.state_file.display()
                )),
                Mode::Enforce => match self.perform(&action).await {
                    Err(e) if self.took_effect(&action).await => {
                        // A timed-out `config set` may still have been applied by the mon.
                        tracing::warn!(target: "decision", error = %e, "the command failed but the cluster shows the new values: counted as done");
                        Ok(())
                    }
                    other => other,
                },
                Mode::Observe | Mode::Off => Ok(()),
            };
            let mut rec = decide_record(&self.policy, &obs, &action, now);
            match &result {
                Ok(()) if self.policy.mode == Mode::Enforce => {
                    rec.performed = true;
                }
                Ok(()) => {
                    rec.message = format!("(observe mode) would {}", rec.message);
                }
                Err(e) => {
                    let attempts = self
                        .state
                        .retry
                        .as_ref()
                        .filter(|r| r.kind == action.kind)
                        .map_or(0, |r| r.attempts)
                        + 1;
                    rec.event = "ACTION_FAILED".into();
                    rec.message = format!(
                        "FAILED {}: {e}; attempt {attempts}, retrying in {}",
                        action.describe(),
                        fmt_secs(decide::retry_delay(attempts))
                    );
                    if let Ok(mut v) = self.shared.lock() {
                        v.action_failures_total += 1;
                    }
                }
            }
            self.log(&rec);
            let failed = result.is_err();
            self.state = apply_outcome(
                &self.policy,
                std::mem::take(&mut self.state),
                &action,
                result,
                now,
            );
            if failed && self.policy.mode == Mode::Enforce {
                self.hold_what_took(&action).await;
            }
        }
        if self.state.ladder.pause.as_ref().is_some_and(|p| p.paused) {
            self.reconcile_flags(&obs, was_paused, now).await;
        }
        if !self.state.persistent_eq(&initial) {
            let _ = self.persist("after the cycle");
        }
        if let Ok(mut v) = self.shared.lock() {
            v.update(&self.policy, &obs, &self.state, now);
        }
        self.last_obs = Some(obs);
    }

    /// A multi-key action failed half-way (the profile set, the limit not): what did take is
    /// the enforcer's now, so that it is not mistaken for a person's change and is restored.
    async fn hold_what_took(&mut self, action: &Action) {
        use state::ActionKind::{Descend, Escalate, Suspend, Throttle};
        if !matches!(action.kind, Throttle | Suspend | Escalate | Descend) {
            return;
        }
        let keys: Vec<String> = action.changes.iter().map(|c| c.key.clone()).collect();
        let Ok(now) = self.actor.configured(&keys).await else {
            return;
        };
        let took: Vec<&decide::Change> = action
            .changes
            .iter()
            .filter(|c| {
                decide::same_setting(&now.get(&c.key).cloned().flatten(), &c.to)
                    && !decide::same_setting(&c.from, &c.to)
            })
            .collect();
        if took.is_empty() {
            return;
        }
        let clock_now = self.clock.now();
        let applied = self.state.applied.get_or_insert_with(|| state::Applied {
            kind: if action.kind == Suspend {
                Suspend
            } else {
                Throttle
            },
            values: BTreeMap::new(),
            at: clock_now,
            simulated: false,
            verified: false,
            not_taken: Vec::new(),
            effective: None,
        });
        for c in took {
            match &c.to {
                Some(v) => applied.values.insert(c.key.clone(), v.clone()),
                None => applied.values.remove(&c.key),
            };
        }
        let _ = self.persist("after a partly applied change");
    }

    /// Whether the config database already holds every value `action` sets.
    async fn took_effect(&self, action: &Action) -> bool {
        let keys: Vec<String> = action.changes.iter().map(|c| c.key.clone()).collect();
        match self.actor.configured(&keys).await {
            Ok(now) => action
                .changes
                .iter()
                .all(|c| now.get(&c.key).cloned().flatten() == c.to),
            Err(_) => false,
        }
    }

    async fn perform(&self, action: &Action) -> Result<(), String> {
        // A recovery limit the OSDs were told at runtime goes before the profile changes back:
        // the profile (or the config database) then sets their values again.
        for c in &action.changes {
            let pushed = [ladder::MCLOCK_RECOVERY_LIM, ladder::MCLOCK_RECOVERY_RES];
            if pushed.contains(&c.key.as_str()) && !action.push.iter().any(|(k, _)| *k == c.key) {
                if let Err(e) = self.actor.unpush(&c.key).await {
                    tracing::warn!(target: "decision", error = %e, "ceph tell osd.* config unset {} failed for some OSDs; they drop it when they restart", c.key);
                }
            }
        }
        for c in &action.changes {
            match &c.to {
                Some(v) => self.actor.set(&c.key, v).await.map_err(|e| e.to_string())?,
                None => self.actor.rm(&c.key).await.map_err(|e| e.to_string())?,
            }
        }
        // The running OSDs too: a down OSD gets the config database's value when it starts,
        // so a failure here is a warning, not a failed action.
        for (k, v) in &action.push {
            if let Err(e) = self.actor.push(k, v).await {
                tracing::warn!(target: "decision", error = %e, "ceph tell osd.* config set {k} {v} failed for some OSDs; they take the config database's value when they restart");
            }
        }
        Ok(())
    }

    /// Runs a cycle on every new snapshot, and at least every interval (so a stuck collector is
    /// noticed as stale data), until `shutdown` fires.
    pub async fn run(
        mut self,
        mut snapshots: watch::Receiver<Arc<Snapshot>>,
        mut shutdown: watch::Receiver<bool>,
    ) {
        if let Ok(mut v) = self.shared.lock() {
            v.update_mode_only(&self.policy, &self.state);
        }
        // A pause the last run left behind never outlives it; "below the bound since" from
        // before a restart is not evidence for going down now.
        self.clear_own_flags("START").await;
        self.state.ladder.below_since = None;
        loop {
            // The pause ends on time even when a cycle is late (a slow collection).
            let deadline = self
                .state
                .ladder
                .pause
                .as_ref()
                .and_then(|p| p.deadline(&self.policy.ladder.pause))
                .map(|d| Duration::from_secs_f64((d - self.clock.now()).max(0.0)));
            tokio::select! {
                changed = snapshots.changed() => if changed.is_err() { break },
                _ = tokio::time::sleep(self.interval) => {}
                _ = tokio::time::sleep(deadline.unwrap_or(Duration::MAX)), if deadline.is_some() => {
                    self.end_pause_slice().await;
                    continue;
                }
                _ = shutdown.changed() => break,
            }
            let snapshot = snapshots.borrow().clone();
            if snapshot.cycle == 0 {
                continue;
            }
            self.step(&snapshot).await;
        }
        self.clear_own_flags("SHUTDOWN").await;
        tracing::info!(target: "decision", "enforcer stopped; what it set stays, and its state file remembers the operator's originals for the next start");
    }
}

fn lat_instant(snapshot: &Snapshot, mono: tokio::time::Instant) -> std::time::Instant {
    snapshot
        .latency
        .as_ref()
        .map(|l| l.at)
        .unwrap_or(mono)
        .into_std()
}

fn decide_record(policy: &Policy, obs: &Observation, action: &Action, now: Time) -> DecisionRecord {
    DecisionRecord {
        changes: action.changes.clone(),
        ..obs_record(policy, obs, now, action.kind.as_str(), action.describe())
    }
}

/// A line of the decision log with the cycle's numbers; not performed, no changes.
fn obs_record(
    policy: &Policy,
    obs: &Observation,
    now: Time,
    event: &str,
    message: String,
) -> DecisionRecord {
    DecisionRecord {
        time: now,
        mode: policy.mode.as_str(),
        event: event.to_string(),
        performed: false,
        message,
        changes: Vec::new(),
        p99_seconds: obs.p99,
        bound_seconds: obs.baseline.map(|b| b * policy.multiplier),
        baseline_seconds: obs.baseline,
        pgs_recovering: obs.pgs_recovering,
        pgs_undersized: obs.undersized_pgs,
        degraded_objects: obs.degraded_objects,
        misplaced_objects: obs.misplaced_objects,
        pools_at_min_size: obs.pools_at_min_size.clone(),
    }
}

/// Keys the enforcer may change, for `configured()`.
pub fn configured_map(
    entries: &[(String, String)],
    keys: &[String],
) -> BTreeMap<String, Option<String>> {
    keys.iter()
        .map(|k| {
            (
                k.clone(),
                entries
                    .iter()
                    .find(|(name, _)| name == k)
                    .map(|(_, v)| v.clone()),
            )
        })
        .collect()
}
