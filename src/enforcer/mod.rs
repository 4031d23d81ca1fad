//! The enforcer: a control loop inside `serve`, fed by the exporter's snapshots.
//! observe (Snapshot and every other read -> Observation) -> decide (pure: effects, log lines,
//! next state) -> act (each effect through the Actor, its result through the pure
//! `apply_outcome`). The enforcer's state changes only in pure functions: `decide` and its
//! siblings of the same shape (`flags::end_slice` for a pause slice ending between cycles,
//! `flags::release` at START, `decide::on_exit` at SHUTDOWN, `baseline::learn`,
//! `decide::at_start`), and
//! `apply_outcome` (with `outcome::remember_first` for what must be on disk before an effect).
//! The loop itself only reads, runs effects, logs and writes the state file.
//!
//! Modules import only those listed before them, so none imports one that imports it back:
//! types, pause, backfill_limit, policy, observation, event; stored, state; effect; ctx; lever; ladder,
//! flags, baseline, unowned; decide, outcome, sent; view, actor; the loop here.

pub mod actor;
pub mod backfill_limit;
pub mod baseline;
mod ctx;
pub mod decide;
pub mod effect;
pub mod event;
pub mod flags;
pub mod ladder;
pub mod levels;
pub mod lever;
pub mod observation;
pub mod outcome;
pub mod pause;
pub mod policy;
pub mod redundancy;
pub mod sent;
pub mod state;
pub mod stored;
pub mod types;
pub mod unowned;
pub mod view;

#[cfg(test)]
mod controller_tests;
#[cfg(test)]
mod ladder_tests;
#[cfg(test)]
mod lease_tests;
#[cfg(test)]
mod lever_tests;
#[cfg(test)]
mod plant_tests;
#[cfg(test)]
pub(crate) mod tests;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::watch;

use crate::ceph::ops::OpsError;
use crate::collect::Snapshot;
use crate::latency::prometheus::ExternalP99;
use crate::latency::{quantile, LatencyWindow};
use crate::lease::task::Link;
use crate::lease::LeaseEvent;
use crate::units::fmt_secs;
pub use actor::{Actor, CephActor};
pub use decide::decide;
pub use effect::{Action, Decision, Effect, FlagsFor, Outcome, Planned};
use effect::{CommandError, LogLine, ReadBack};
pub use event::{DecisionEvent, DecisionRecord};
pub use observation::Observation;
use observation::OpQueue;
pub use outcome::{apply_outcome, AfterEffect};
pub use policy::{BaselineSpec, Controller, Mode, OnExit, Policy};
pub use state::{EnforcerState, Phase, Time};
pub use view::EnforcerView;

/// The backfill lever's `pg-upmap-items` / `rm-pg-upmap-items` commands in flight at once (see
/// `run_backfill`): enough for the monitors to commit an entry's holds together, few enough
/// for the ceph CLI's processes on a small admin host.
const UPMAP_AT_ONCE: usize = 8;

/// The Ceph command timeout assumed until [`Enforcer::with_command_timeout`] gives `serve`'s
/// (`--ceph-timeout`'s default).
const DEFAULT_COMMAND_TIMEOUT: Duration = Duration::from_secs(10);

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
    /// Enforce mode: the lease; this instance acts only while it holds it, and keeps its state
    /// in the cluster next to it (the state file is then a cache).
    lease: Option<Link>,
    /// The lease term (see `lease::task::Status::term`) whose stored state this instance read
    /// and continues from; another term means the state must be read again first.
    memory_loaded: Option<u64>,
    /// The operator's originals as last stored: a change whose originals are not all there is
    /// stored first, even when `decide` planned none (its earlier store failed).
    stored_original: BTreeMap<String, Option<String>>,
    /// The last failure to store the state with the lease: a refusal that lasts (the caps) is
    /// retried every cycle but said once, not once per cycle.
    store_error: Option<String>,
    /// The longest a Ceph command takes (`--ceph-timeout`): with a lease, a cycle's commands are
    /// bounded so that they fit in its renew deadline.
    command_timeout: Duration,
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
        let stored_original = state.original.clone();
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
            lease: None,
            memory_loaded: None,
            stored_original,
            store_error: None,
            command_timeout: DEFAULT_COMMAND_TIMEOUT,
        }
    }

    /// The Ceph command timeout (`--ceph-timeout`), which bounds a cycle's commands under a lease.
    pub fn with_command_timeout(mut self, timeout: Duration) -> Self {
        self.command_timeout = timeout;
        self
    }

    /// Act only while holding `link`'s lease, with the state stored next to it.
    pub fn with_lease(mut self, link: Link) -> Self {
        if let Ok(mut v) = self.shared.lock() {
            v.set_lease(&link);
        }
        // `may_send` asks before each command; the fence makes the client ask again once the
        // command is under way, for a process stopped in between.
        self.actor.fence(link.fence());
        self.lease = Some(link);
        self
    }

    /// Whether this instance may change the cluster now: no lease (observe mode, tests), or
    /// the lease held and renewed within its renew deadline.
    fn may_act(&self) -> bool {
        self.lease.as_ref().is_none_or(Link::acting)
    }

    /// Asked before every command that changes the cluster, not once per effect: one effect can
    /// be many commands, each up to the Ceph timeout. A command sent in time lands before the
    /// lock can expire (the gap after the renew deadline holds one, checked at start).
    fn may_send(&self) -> Result<(), CommandError> {
        if self.may_act() {
            Ok(())
        } else {
            Err(sent::LEASE_GONE.into())
        }
    }

    /// With a lease: the rounds of commands (each up to the Ceph timeout, those of a round sent
    /// together) that fit in the renew deadline, less the margin.
    fn command_rounds(&self) -> Option<usize> {
        self.lease
            .as_ref()
            .map(|l| l.config().command_rounds(self.command_timeout))
    }

    /// Whether `self.state` is the state that counts: with a lease, only once the state stored
    /// with it was read in this term. Before that the local state is a cache (of an older
    /// episode, or of the last leader's last slice): acting on it, or storing it over the
    /// previous leader's, would lose the operator's originals.
    fn state_is_current(&self) -> bool {
        match &self.lease {
            None => true,
            Some(link) => link.acting() && self.memory_loaded == Some(link.term()),
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
        // A warning (the operator must change something) at warn level, the rest at info.
        macro_rules! emit {
            ($level:ident) => {
                match self.log_style {
                    LogStyle::Text => tracing::$level!(target: "decision", "{}", r.message),
                    LogStyle::Json => tracing::$level!(
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
            };
        }
        if DecisionEvent::warns(&r.event) {
            emit!(warn);
        } else {
            emit!(info);
        }
        if let Ok(mut v) = self.shared.lock() {
            v.push_decision(r.clone());
        }
    }

    /// Writes the state where it lives: with a lease, the lease object first (refused by the
    /// cluster unless this instance holds the lock), then the local file as a cache; without,
    /// the state file. False when the authoritative copy could not be written.
    async fn persist(&mut self, what: &str) -> bool {
        if !self.persist {
            return true;
        }
        let stored = self.persist_where(what).await;
        if stored {
            self.stored_original = self.state.original.clone();
        }
        stored
    }

    async fn persist_where(&mut self, what: &str) -> bool {
        if let Some(link) = &self.lease {
            let location = link.location().to_string();
            if let Err(e) = self.persist_to_lease(link).await {
                if self.store_error.as_deref() == Some(e.as_str()) {
                    tracing::debug!(target: "decision", error = %e, "still cannot store the enforcer state in {location} ({what})");
                } else {
                    tracing::error!(target: "decision", error = %e, "cannot store the enforcer state in {location} ({what}); changes that need it first are not made");
                    self.store_error = Some(e);
                }
                return false;
            }
            if self.store_error.take().is_some() {
                tracing::info!(target: "decision", "the enforcer state is stored in {location} again ({what})");
            }
            if let Err(e) = self.state.save(&self.policy.state_file) {
                tracing::debug!(error = %e, "the local cache of the enforcer state was not written ({what}); the copy in the cluster is the one that counts");
            }
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

    async fn persist_to_lease(&self, link: &Link) -> Result<(), String> {
        if self.memory_loaded != Some(link.term()) {
            return Err(
                "the state stored with the lease has not been read in this term yet".to_string(),
            );
        }
        let until = link
            .acting_until()
            .filter(|_| link.acting())
            .ok_or_else(|| "this instance does not hold the lease now".to_string())?;
        let bytes = self.state.to_bytes().map_err(|e| e.to_string())?;
        // Never past the right to act: a write answered later would not be ours to count on.
        match tokio::time::timeout_at(until, link.memory().write(&bytes)).await {
            Ok(r) => r.map_err(|e| e.to_string()),
            Err(_) => Err("no answer before this instance's renew deadline".to_string()),
        }
    }

    /// Never write the state file (observe mode with a file that could not be read: it may
    /// hold what an enforce-mode run needs to restore).
    pub fn without_persistence(mut self) -> Self {
        self.persist = false;
        self
    }

    /// Feeds the latency windows with a new snapshot's histograms, learns the baseline (a pure
    /// step), and returns the observation with p99 and the baseline.
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
                let learner = std::mem::replace(
                    &mut self.learner,
                    LatencyWindow::new(self.policy.learn_window),
                );
                let learning = baseline::learn(
                    &self.policy,
                    self.interval,
                    learner,
                    baseline::Sample {
                        at,
                        per_osd: lat.per_osd.clone(),
                    },
                    !obs.recovery_active() && obs.stale.is_none(),
                    &self.state,
                    now,
                );
                self.learner = learning.window;
                self.state = learning.next;
                if let Some(line) = learning.line {
                    tracing::info!(target: "decision", "{line}");
                }
            }
        }
        let window_p99 = match self.window.increase() {
            Ok(Some(inc)) => quantile(0.99, &inc),
            _ => None,
        };
        (obs.p99, obs.p99_note) = observation::judged_p99(
            window_p99,
            self.window.newest_writes(),
            self.interval,
            self.policy.latency_window,
        );
        obs.p99_span = observation::filling_span(self.window.span(), self.policy.latency_window);
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
                    obs.p99_span = None;
                    obs.p99_note = v
                        .is_none()
                        .then(|| "no client writes in Prometheus' window".to_string());
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

    /// The cluster reads `decide` needs besides the snapshot: the OSD map's flags, the OSDs'
    /// versions (only when they decide something) and the configured values of the levers.
    async fn read_cluster(&self, obs: &mut Observation) {
        let involved = involved(&self.state, obs, self.clock.now());
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
        // The level controller's list depends on them too, once per recovery.
        let levels_list = self.policy.ladder.controller == Controller::Levels
            && obs.op_queue == OpQueue::Mclock
            && self.state.levels.is_none()
            && obs.recovery_active();
        if obs.stale.is_none()
            && involved
            && (levels_list
                || ladder::versions_matter(&self.policy, &obs.op_queue, self.state.ladder.rung))
        {
            obs.osd_versions = self
                .actor
                .osd_versions()
                .await
                .map(|v| v.into_iter().collect())
                .map_err(|e| e.to_string());
        }
        // Also while blind when the blind restore is due: a hand change made meanwhile is
        // never overwritten.
        let now = self.clock.now();
        if (obs.stale.is_none() || decide::blind_restore_due(&self.policy, &self.state, now))
            && involved
        {
            match self.actor.configured(&self.lever_keys()).await {
                Ok(values) => {
                    obs.configured = values;
                    obs.configured_known = true;
                }
                Err(e) => {
                    let e = format!("cannot read the configured values (ceph config dump): {e}");
                    obs.stale = Some(match obs.stale.take() {
                        Some(s) => format!("{s}; {e}"),
                        None => e,
                    });
                }
            }
        }
        if self.lever_reads(obs) {
            obs.backfill = Some(self.read_backfill().await);
        }
    }

    /// Whether the backfill lever needs its view this cycle ([`lever::view_needed`]).
    fn lever_reads(&self, obs: &Observation) -> bool {
        lever::view_needed(&self.policy, &self.state, obs, self.clock.now())
    }

    /// `pg dump pgs_brief`, `osd dump` and `balancer status`, for the backfill lever.
    async fn read_backfill(&self) -> Result<observation::BackfillView, String> {
        let pgs = self
            .actor
            .pgs_brief()
            .await
            .map_err(|e| format!("cannot read the PG states (ceph pg dump pgs_brief): {e}"))?;
        let map = self
            .actor
            .upmap_view()
            .await
            .map_err(|e| format!("cannot read the OSD map (ceph osd dump): {e}"))?;
        let balancer = self
            .actor
            .balancer_status()
            .await
            .map_err(|e| format!("ceph balancer status: {e}"));
        Ok(observation::BackfillView { pgs, map, balancer })
    }

    /// START and TAKEOVER: the PGs the record holds are taken on while the lever is in force
    /// in the record and this instance has it: the next cycles check the record against the
    /// OSD map (entries never sent or changed since drop out) and release the rest at the
    /// lever's pace. Given back all at once, every held PG re-peered and started its backfill
    /// in the same minute, the p99 spike the lever exists to prevent, at each restart or
    /// change of leader. Otherwise (the lever not in force, observe mode) they are given back.
    async fn take_on_holds(&mut self, when: &'static str) {
        if self.state.backfill.is_empty() {
            return;
        }
        let ladder = &self.policy.ladder;
        let lever = self.policy.mode == Mode::Enforce
            && ladder.max_rung >= 3
            && ladder.backfill_lever
            && self.state.ladder.lever.is_some();
        if !lever {
            self.give_back_holds(when).await;
            return;
        }
        let (held, balancer) = held_words(&self.state.backfill);
        tracing::info!(
            target: "decision",
            "{when}: the backfill lever's record holds {held}{}: taken on; from the next cycle they are checked against the OSD map and released at the lever's pace (all at once if redundancy comes at risk or the lever leaves force)",
            balancer.map(|b| format!(", {b}")).unwrap_or_default()
        );
    }

    /// SHUTDOWN, and START/TAKEOVER without the lever in force: every PG the state says the
    /// backfill lever holds is released (ours only) and the balancer put back, from a fresh
    /// read of the cluster.
    async fn give_back_holds(&mut self, when: &'static str) {
        let now = self.clock.now();
        let held = !self.state.backfill.is_empty();
        if held {
            let view = match self.read_backfill().await {
                Ok(v) => v,
                Err(e) => {
                    tracing::error!(target: "decision", "{when}: the backfill lever holds {} PGs and {e}; they stay held (the state keeps them for the next start). By hand: ceph-recovery-budget backfill release, or ceph osd rm-pg-upmap-items PGID for each of {}", self.state.backfill.held.len(), self.state.backfill.held.keys().map(ToString::to_string).collect::<Vec<_>>().join(", "));
                    return;
                }
            };
            let (next, planned, lines) = lever::give_back(&self.policy, &self.state, &view, when);
            for m in &lines {
                tracing::warn!(target: "decision", "{m}");
            }
            self.state = next;
            let obs = self.last_obs.clone().unwrap_or_else(Observation::quiet);
            if let Some(p) = planned {
                self.execute(p, &obs, now).await;
            }
        }
        // Nothing held any more: the lever leaves force in the record too. Left in force, the
        // next start (or this instance at a TAKEOVER without the lever) would follow its N from
        // its first cycle, holding PGs with nothing throttled.
        let ended = self.policy.mode == Mode::Enforce
            && self.state.backfill.is_empty()
            && self.state.ladder.lever.is_some();
        if ended {
            lever::end(&mut self.state, now);
        }
        if held || ended {
            let _ = self.persist(when).await;
        }
    }

    fn lever_keys(&self) -> Vec<String> {
        let mut keys: Vec<String> = self.policy.wpq_levers.keys().cloned().collect();
        keys.push(ladder::MCLOCK_PROFILE_KEY.to_string());
        for k in ladder::above_rung1_keys() {
            if !keys.iter().any(|x| x == k) {
                keys.push(k.to_string());
            }
        }
        keys
    }

    /// Takes a decision's next state and logs its notes; its effects are the caller's to run.
    fn adopt(&mut self, decision: Decision) -> Vec<Planned> {
        let Decision {
            effects,
            notes,
            next,
        } = decision;
        self.state = next;
        for n in &notes {
            self.log(n);
        }
        effects
    }

    /// Takes a decision's next state, logs its notes and carries out its effects in order.
    async fn carry_out(&mut self, decision: Decision, obs: &Observation, now: Time) {
        for planned in self.adopt(decision) {
            self.execute(planned, obs, now).await;
        }
    }

    /// Why an effect may not run: this instance does not hold the lease, or what must be stored
    /// first could not be. `None`: go ahead.
    async fn not_allowed(
        &mut self,
        persist_first: Option<&'static str>,
        effect: &Effect,
    ) -> Option<String> {
        // Unsetting the pause flags this instance set fails open (recovery runs): allowed even
        // without the lease, so that a leader cut off from the lease object never leaves the
        // cluster paused until another one can take over.
        let fails_open = matches!(effect, Effect::UnsetFlags { .. });
        if !self.may_act() && !fails_open {
            return Some(
                "this instance does not hold the lease now (another instance acts, or it could not renew in time)"
                    .to_string(),
            );
        }
        // A config change whose originals an earlier (failed) store did not take: store first.
        let uncovered = matches!(effect, Effect::Config(_))
            && self
                .state
                .original
                .iter()
                .any(|(k, v)| self.stored_original.get(k) != Some(v));
        let why =
            persist_first
                .or(uncovered
                    .then_some("before acting (the operator's originals are not stored yet)"))?;
        // What the effect changes is remembered before it is made.
        self.state = outcome::remember_first(std::mem::take(&mut self.state), effect);
        if self.persist(why).await {
            return None;
        }
        let place = match &self.lease {
            Some(link) => link.location().to_string(),
            None => self.policy.state_file.display().to_string(),
        };
        Some(format!(
            "what it changes could not be stored first in {place}, and a change the enforcer cannot remember making would never be undone"
        ))
    }

    /// Runs one effect (nothing in observe mode, nothing when what it needs on disk could not
    /// be written) and takes in its result through `apply_outcome`. True when it failed.
    async fn execute(&mut self, planned: Planned, obs: &Observation, now: Time) -> bool {
        let Planned {
            effect,
            persist_first,
        } = planned;
        let mut cut = sent::Cut::default();
        let outcome = if self.policy.mode != Mode::Enforce {
            Outcome::Simulated
        } else if let Some(why) = self.not_allowed(persist_first, &effect).await {
            Outcome::NotSaved {
                read_back: match &effect {
                    Effect::Config(a) if self.may_act() => self.read_back(a).await,
                    _ => None,
                },
                why,
            }
        } else {
            let (outcome, c) = self.run_effect(&effect).await;
            cut = c;
            outcome
        };
        // The lever's step is taken in as the part that reached Ceph (the lease lost on the
        // way, holds left for the next cycle, `balancer off` failed): the record drops the holds
        // it got before the run that were never sent.
        let effect = match &effect {
            Effect::Backfill(b) if matches!(outcome, Outcome::Backfill { .. }) => {
                let ran = sent::as_ran(b, &outcome);
                self.state = sent::forget_unsent(std::mem::take(&mut self.state), b, &ran);
                Effect::Backfill(ran)
            }
            _ => effect,
        };
        // The outcome is taken in as of when the commands finished: a dozen upmap entries take
        // about as many seconds through the monitors (seen on the lab), and what follows from
        // them (the peering of held PGs) starts then, not when they were decided.
        let done_at = self.clock.now().max(now);
        let after = apply_outcome(
            &self.policy,
            obs,
            std::mem::take(&mut self.state),
            &effect,
            &outcome,
            done_at,
        );
        self.state = after.next;
        let persist = after.persist.map(|p| (p.why, p.before_logging));
        if let Some((why, true)) = persist {
            let _ = self.persist(why).await;
        }
        if let Some(e) = &after.took_anyway {
            tracing::warn!(target: "decision", error = %e, "the command failed but the cluster shows the new values: counted as done");
        }
        // A step the lost lease cut short was not done, whatever its commands answered.
        let failed = after.failed || !cut.lease_lost.is_empty();
        if failed {
            if let Ok(mut v) = self.shared.lock() {
                v.action_failures_total += 1;
            }
        }
        for r in &after.records {
            self.log(r);
        }
        if !cut.is_empty() {
            let what = match &effect {
                Effect::Backfill(_) => "the backfill lever's step",
                _ => "the step",
            };
            for r in sent::records(&ctx::Ctx::new(&self.policy, obs, done_at), &cut, what) {
                self.log(&r);
            }
        }
        for r in &after.quiet {
            tracing::debug!(target: "decision", "{}", r.message);
            if let Ok(mut v) = self.shared.lock() {
                *v.decisions_total.entry(r.event.clone()).or_insert(0) += 1;
            }
        }
        for line in &after.lines {
            match line {
                LogLine::Info(m) => tracing::info!(target: "decision", "{m}"),
                LogLine::Warn(m) => tracing::warn!(target: "decision", "{m}"),
                LogLine::Error(m) => tracing::error!(target: "decision", "{m}"),
            }
        }
        if let Some((why, false)) = persist {
            let _ = self.persist(why).await;
        }
        failed
    }

    /// The commands of one effect, and what each answered; what was not sent, and why.
    async fn run_effect(&self, effect: &Effect) -> (Outcome, sent::Cut) {
        let outcome = match effect {
            Effect::Config(action) => {
                let result = self.perform(action).await;
                // Also after a command not sent: the read says what the ones before it did.
                let read_back = match result {
                    Ok(()) => None,
                    Err(_) => self.read_back(action).await,
                };
                Outcome::Config { result, read_back }
            }
            Effect::SetFlags { flags, .. } => {
                let mut set = Vec::new();
                let mut unset = Vec::new();
                for f in flags {
                    let r = match self.may_send() {
                        Ok(()) => self.actor.set_flag(f).await.map_err(CommandError::from),
                        Err(e) => Err(e),
                    };
                    let failed = r.is_err();
                    set.push((f.clone(), r));
                    if failed {
                        // No half pause: each flag is taken back (unsetting fails open: also
                        // without the lease).
                        for f in flags {
                            let r = self.actor.unset_flag(f).await.map_err(CommandError::from);
                            unset.push((f.clone(), r));
                        }
                        break;
                    }
                }
                Outcome::Flags { set, unset }
            }
            // Unsetting the pause flags fails open (recovery runs): sent also without the lease,
            // as `not_allowed` lets the effect run.
            Effect::UnsetFlags { flags, .. } => {
                let mut unset = Vec::new();
                for f in flags {
                    let r = self.actor.unset_flag(f).await.map_err(CommandError::from);
                    unset.push((f.clone(), r));
                }
                Outcome::Flags {
                    set: Vec::new(),
                    unset,
                }
            }
            Effect::Backfill(b) => return self.run_backfill(b).await,
        };
        (outcome, sent::Cut::default())
    }

    /// The lever's commands: releases first (they never need the balancer paused), then the
    /// balancer paused before any hold (it removes upmap entries), then the holds; the
    /// balancer is put back last, once nothing is held. Releases and holds go to the monitors
    /// [`UPMAP_AT_ONCE`] at a time: the monitors commit the changes that arrive together in
    /// one OSD map, where one after the other each waited for its own (12 holds took 12 s on
    /// the lab, each PG re-peering in its own epoch: the entry's over-bound windows).
    async fn run_backfill(&self, planned: &effect::BackfillEffect) -> (Outcome, sent::Cut) {
        use crate::backfill::BalancerStep;
        use futures_util::future::join_all;
        // Holds beyond what fits in the renew deadline wait for the next cycle, which plans
        // them again if they are still wanted.
        let mut cut = sent::Cut::default();
        let b = match self.command_rounds() {
            Some(rounds) if planned.lifecycle.is_none() => {
                let (b, left) = sent::within(planned, rounds, UPMAP_AT_ONCE);
                cut.left = left;
                cut.rounds = rounds;
                b
            }
            _ => planned.clone(),
        };
        // What ran, with what was not sent, whichever command the run stopped at.
        let finish = |released, held, balancer, cut| {
            (
                Outcome::Backfill {
                    released,
                    held,
                    balancer,
                },
                cut,
            )
        };
        let mut released = Vec::new();
        for ids in b.release.chunks(UPMAP_AT_ONCE) {
            let answers = join_all(ids.iter().map(|id| self.release_one(&b, *id))).await;
            let (sent, not): (Vec<_>, Vec<_>) = answers.into_iter().partition(Option::is_some);
            released.extend(sent.into_iter().flatten());
            if !not.is_empty() {
                break;
            }
        }
        let mut balancer = Vec::new();
        let mut held = Vec::new();
        let unsent = |released: &[(crate::ceph::parse::upmap::PgId, _)],
                      held: &[(crate::ceph::parse::upmap::PgId, _)],
                      balancer: &[(String, _)]| {
            let mut out: Vec<String> = b
                .release
                .iter()
                .filter(|id| !released.iter().any(|(p, _)| p == *id))
                .map(|id| b.release_command(*id))
                .collect();
            if matches!(b.balancer, BalancerStep::Pause { .. }) && balancer.is_empty() {
                out.push("ceph balancer off".to_string());
            }
            out.extend(
                b.hold
                    .iter()
                    .filter(|h| !held.iter().any(|(p, _)| *p == h.pgid))
                    .map(|h| h.command()),
            );
            out
        };
        if released.len() < b.release.len() {
            cut.lease_lost = unsent(&released, &held, &balancer);
            return finish(released, held, balancer, cut);
        }
        if let BalancerStep::Pause { .. } = &b.balancer {
            let Some(r) = self.send(self.actor.balancer_active(false)).await else {
                cut.lease_lost = unsent(&released, &held, &balancer);
                return finish(released, held, balancer, cut);
            };
            let ok = r.is_ok();
            balancer.push(("balancer off".to_string(), r));
            if !ok {
                // No hold while the balancer may remove it (the record drops them: not sent).
                return finish(released, held, balancer, cut);
            }
        }
        for holds in b.hold.chunks(UPMAP_AT_ONCE) {
            let answers = join_all(holds.iter().map(|h| self.hold_one(h))).await;
            let (sent, not): (Vec<_>, Vec<_>) = answers.into_iter().partition(Option::is_some);
            held.extend(sent.into_iter().flatten());
            if !not.is_empty() {
                cut.lease_lost = unsent(&released, &held, &balancer);
                return finish(released, held, balancer, cut);
            }
        }
        if let BalancerStep::Restore {
            to,
            set_mode,
            turn_on,
        } = &b.balancer
        {
            let mut lost = Vec::new();
            if *set_mode {
                match self.send(self.actor.balancer_mode(&to.mode)).await {
                    Some(r) => balancer.push((format!("balancer mode {}", to.mode), r)),
                    None => lost.push(format!("ceph balancer mode {}", to.mode)),
                }
            }
            if *turn_on && lost.is_empty() && balancer.iter().all(|(_, r)| r.is_ok()) {
                match self.send(self.actor.balancer_active(true)).await {
                    Some(r) => balancer.push(("balancer on".to_string(), r)),
                    None => lost.push("ceph balancer on".to_string()),
                }
            } else if *turn_on && !lost.is_empty() {
                lost.push("ceph balancer on".to_string());
            }
            cut.lease_lost = lost;
        }
        finish(released, held, balancer, cut)
    }

    /// One command that changes the cluster, unless the lease is gone (asked before it is
    /// sent, and by the fence once it is under way); `None`: not sent.
    async fn send(
        &self,
        command: impl std::future::Future<Output = Result<(), OpsError>>,
    ) -> Option<Result<(), CommandError>> {
        self.may_send().ok()?;
        match command.await {
            Err(e) if e.is_fenced() => None,
            r => Some(r.map_err(CommandError::from)),
        }
    }

    /// Removes our items, or puts back the ones the PG had before the hold; `None`: not sent
    /// (the lease is gone).
    async fn release_one(
        &self,
        b: &effect::BackfillEffect,
        id: crate::ceph::parse::upmap::PgId,
    ) -> Option<(crate::ceph::parse::upmap::PgId, Result<(), CommandError>)> {
        let r = self
            .send(self.actor.set_pg_upmap_items(id, b.restore_items(id)))
            .await?;
        Some((id, r))
    }

    /// Sets our items; none: the PG's own (someone else's, recorded) are taken off. `None`: not
    /// sent (the lease is gone).
    async fn hold_one(
        &self,
        h: &crate::backfill::PlannedHold,
    ) -> Option<(crate::ceph::parse::upmap::PgId, Result<(), CommandError>)> {
        let r = self
            .send(self.actor.set_pg_upmap_items(h.pgid, &h.items))
            .await?;
        Some((h.pgid, r))
    }

    /// The configured values of the keys `action` changes, after it failed.
    async fn read_back(&self, action: &Action) -> Option<ReadBack> {
        let keys: Vec<String> = action.changes.iter().map(|c| c.key.clone()).collect();
        let values = self.actor.configured(&keys).await.ok()?;
        Some(ReadBack {
            values,
            at: self.clock.now(),
        })
    }

    /// Unsets the pause flags the state file says the enforcer set (at start and shutdown).
    pub async fn clear_own_flags(&mut self, when: &'static str) {
        let now = self.clock.now();
        let (decision, lines) = flags::release(&self.policy, &self.state, when, now);
        for line in &lines {
            if let LogLine::Warn(m) = line {
                tracing::warn!(target: "decision", "{m}");
            }
        }
        if decision.effects.is_empty() {
            return;
        }
        let obs = self.last_obs.clone().unwrap_or_else(Observation::quiet);
        self.carry_out(decision, &obs, now).await;
        if let Ok(mut v) = self.shared.lock() {
            v.update_mode_only(&self.policy, &self.state);
        }
    }

    /// One cycle: observe, decide, act, log, persist. With a lease, only while holding it (a
    /// standby only watches), and only once the state stored with the lease was read.
    pub async fn step(&mut self, snapshot: &Snapshot) {
        let mono = tokio::time::Instant::now();
        let now = self.clock.now();
        if self.lease.is_some() && !self.may_act() {
            self.standby_cycle(snapshot, mono, now);
            return;
        }
        let term = self.lease.as_ref().map(Link::term);
        if self.lease.is_some() && self.memory_loaded != term {
            if let Err(why) = self.take_over().await {
                let mut obs = self.observe(snapshot, mono, now);
                obs.stale = Some(why.clone());
                if self.state.holding.as_deref() != Some(why.as_str()) {
                    tracing::error!(target: "decision", "HOLD: {why}");
                    self.state.holding = Some(why);
                }
                if let Ok(mut v) = self.shared.lock() {
                    v.update(&self.policy, &obs, &self.state, now);
                    v.phase = Phase::Holding;
                }
                self.last_obs = Some(obs);
                return;
            }
        }
        // What is on disk now; observing may already change it (a learned baseline).
        let initial = self.state.clone();
        let mut obs = self.observe(snapshot, mono, now);
        self.read_cluster(&mut obs).await;
        let decision = decide(&self.policy, &obs, &self.state, now);
        self.carry_out(decision, &obs, now).await;
        if !self.state.persistent_eq(&initial) {
            let _ = self.persist("after the cycle").await;
        }
        self.publish(&obs, now, Some(&initial));
        self.last_obs = Some(obs);
    }

    /// The view after a cycle, with the lease's standing.
    fn publish(&self, obs: &Observation, now: Time, initial: Option<&EnforcerState>) {
        if let Ok(mut v) = self.shared.lock() {
            v.update(&self.policy, obs, &self.state, now);
            if let Some(initial) = initial {
                v.refresh_unowned(obs, initial);
            }
            if let Some(link) = &self.lease {
                v.set_lease(link);
            }
        }
    }

    /// Standby: keep the latency windows fed (a takeover then judges at once) and show the
    /// cluster, but no decision and no state of our own: the leader's is the one that counts.
    fn standby_cycle(&mut self, snapshot: &Snapshot, mono: tokio::time::Instant, now: Time) {
        let obs = self.observe(snapshot, mono, now);
        if let Ok(mut v) = self.shared.lock() {
            v.update(&self.policy, &obs, &EnforcerState::default(), now);
            v.phase = Phase::Standby;
            if let Some(link) = &self.lease {
                v.set_lease(link);
            }
        }
        self.last_obs = Some(obs);
    }

    /// Just took the lease: the state stored with it is the one to continue from (the previous
    /// leader wrote it before each change); none stored yet, this instance's file (a first
    /// start with the lease, or an upgrade) is written there. Then, as at any start, the pause
    /// flags recorded as ours are cleared. `Err`: nothing may be changed yet, and why.
    async fn take_over(&mut self) -> Result<(), String> {
        let Some(link) = &self.lease else {
            return Ok(());
        };
        let location = link.location().to_string();
        let link_term = link.term();
        let read = match link.acting_until() {
            Some(until) => tokio::time::timeout_at(until, link.memory().read())
                .await
                .unwrap_or_else(|_| {
                    Err(crate::lease::LeaseError::Failed {
                        op: "reading the enforcer state",
                        object: location.clone(),
                        detail: "no answer before the renew deadline".into(),
                    })
                }),
            None => return Err("this instance does not hold the lease now".into()),
        };
        match read {
            Ok(Some(bytes)) => match EnforcerState::from_bytes(&bytes, &location) {
                Ok(stored) => {
                    let summary = summarize(&stored);
                    self.stored_original = stored.original.clone();
                    self.state = stored;
                    tracing::info!(target: "decision", "state read from {location}: {summary}");
                }
                // A newer binary's: its own words say what to do (not "remove it").
                Err(e @ state::StateFileError::NotOurs { .. }) => {
                    return Err(e.to_string())
                }
                Err(e) => {
                    return Err(format!(
                        "the enforcer state stored in {location} cannot be read ({e}); nothing is changed until it can: inspect it with `rados -p {} get {} -`, restore by hand what it lists, then remove it",
                        location.split('/').next().unwrap_or(""),
                        location.rsplit('/').next().unwrap_or("")
                    ))
                }
            },
            Ok(None) => {
                // Said once, not again on each retry while the store keeps refusing.
                if self.store_error.is_none() {
                    tracing::info!(target: "decision", "no enforcer state stored in {location} yet: starting from this instance's ({})", summarize(&self.state));
                }
                // Nothing stored: this instance's state is the one for this term once stored.
                self.memory_loaded = Some(link_term);
                if !self.persist("first state stored with the lease").await {
                    self.memory_loaded = None;
                    return Err(format!("cannot store the enforcer state in {location} yet"));
                }
            }
            Err(e) => {
                return Err(format!(
                    "cannot read the enforcer state stored in {location} ({e}); nothing is changed until it can be read"
                ))
            }
        }
        self.memory_loaded = Some(link_term);
        self.state.holding = None;
        self.clear_own_flags("TAKEOVER").await;
        self.take_on_holds("TAKEOVER").await;
        self.state = decide::at_start(std::mem::take(&mut self.state));
        self.name_unowned().await;
        Ok(())
    }

    /// A lease event: one decision-log line naming both holders. Losing the lease while the
    /// pause flags are set unsets them (fails open); everything else waits for the next leader.
    async fn on_lease_event(&mut self, event: LeaseEvent) {
        let lost = matches!(event, LeaseEvent::Lost { .. });
        // Only flags of the state read in the term just lost: before that read, `flags_set` is
        // the local cache's, and the flags may be another leader's now.
        let loaded = self.memory_loaded.is_some()
            && self.memory_loaded == self.lease.as_ref().map(Link::term);
        self.log_lease_event(event);
        if lost && loaded && !self.state.flags_set.is_empty() {
            self.clear_own_flags("LEASE_LOST").await;
        }
    }

    fn log_lease_event(&mut self, event: LeaseEvent) {
        let kind = match &event {
            // The next acting cycle reads the stored state again (a new term).
            LeaseEvent::Acquired { .. } => DecisionEvent::LeaseAcquired,
            LeaseEvent::Lost { .. } => DecisionEvent::LeaseLost,
            LeaseEvent::Standby { .. } => DecisionEvent::Standby,
        };
        let obs = self.last_obs.clone().unwrap_or_else(Observation::quiet);
        let message = match &event {
            LeaseEvent::Acquired { .. } => format!(
                "{}: {event}; it acts from now on, from the state stored in the lease object",
                kind.as_str()
            ),
            LeaseEvent::Lost { .. } => format!(
                "{}: {event}; this instance changes nothing from now on",
                kind.as_str()
            ),
            LeaseEvent::Standby { .. } => format!(
                "{}: {event}; this instance only watches and exports",
                kind.as_str()
            ),
        };
        let record = ctx::Ctx::new(&self.policy, &obs, self.clock.now()).record(kind, message);
        self.log(&record);
        if let Some(link) = &self.lease {
            if let Ok(mut v) = self.shared.lock() {
                v.set_lease(link);
                if !link.acting() {
                    v.phase = Phase::Standby;
                }
            }
        }
    }

    /// START and TAKEOVER: what is on the cluster that the state has no record of setting is
    /// named (one decision-log line, `ceph_recovery_budget_unowned_settings`), never touched:
    /// pause flags, lever keys, and the backfill lever's kind of change, upmap entries and a
    /// balancer that is off (a lost state leaves held PGs pinned and the held-PG gauge at 0).
    /// The OSD map's upmap entries are read here, not in every cycle; the balancer only in
    /// enforce mode (its status needs the enforcer's mgr grant).
    async fn name_unowned(&mut self) {
        let flags = self.actor.flags().await.map_err(|e| e.to_string());
        let keys = self.lever_keys();
        let configured = self
            .actor
            .configured(&keys)
            .await
            .map_err(|e| e.to_string());
        let upmap = Some(self.actor.upmap_view().await.map_err(|e| e.to_string()));
        let balancer = match self.policy.mode {
            Mode::Enforce => Some(
                self.actor
                    .balancer_status()
                    .await
                    .map_err(|e| e.to_string()),
            ),
            _ => None,
        };
        let reads = unowned::Reads {
            osd_flags: flags,
            configured,
            upmap,
            balancer,
        };
        let now = self.clock.now();
        let (found, record, warnings) = unowned::at_start(&self.policy, &reads, &self.state, now);
        for w in &warnings {
            tracing::warn!(target: "decision", "{w}");
        }
        if let Some(r) = &record {
            self.log(r);
        }
        if let Ok(mut v) = self.shared.lock() {
            v.unowned = found;
        }
    }

    /// The pause slice reached the maximum share of its period before the next cycle came.
    async fn end_pause_slice(&mut self) {
        if !self.state_is_current() {
            return;
        }
        let now = self.clock.now();
        let obs = self.last_obs.clone().unwrap_or_else(Observation::quiet);
        let decision = flags::end_slice(&self.policy, &self.state, now);
        self.carry_out(decision, &obs, now).await;
        let _ = self.persist("after ending a pause slice").await;
        self.publish(&obs, now, None);
    }

    async fn perform(&self, action: &Action) -> Result<(), CommandError> {
        // A recovery limit the OSDs were told at runtime goes before the profile changes back:
        // the profile (or the config database) then sets their values again.
        for c in &action.changes {
            if types::MCLOCK_PUSHED.contains(&c.key.as_str())
                && !action.push.iter().any(|(k, _)| *k == c.key)
            {
                self.may_send()?;
                if let Err(e) = self.actor.unpush(&c.key).await {
                    tracing::warn!(target: "decision", error = %e, "ceph tell osd.* config unset {} failed for some OSDs; they drop it when they restart", c.key);
                }
            }
        }
        for c in &action.changes {
            self.may_send()?;
            match &c.to {
                Some(v) => self.actor.set(&c.key, v).await?,
                None => self.actor.rm(&c.key).await?,
            }
        }
        // The running OSDs too: a down OSD gets the config database's value when it starts,
        // so a failure here is a warning, not a failed action.
        for (k, v) in &action.push {
            if self.may_send().is_err() {
                tracing::warn!(target: "decision", "ceph tell osd.* config set {k} {v} not sent: this instance no longer holds the lease; the OSDs take the config database's value when they restart");
                continue;
            }
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
            if self.lease.is_some() {
                v.phase = Phase::Standby;
            }
        }
        let mut lease_events = self.lease.as_mut().and_then(Link::take_events);
        if self.lease.is_none() {
            // A pause the last run left behind never outlives it; "below the bound since" from
            // before a restart is not evidence for going down now. (With a lease: at takeover.)
            self.clear_own_flags("START").await;
            self.take_on_holds("START").await;
            self.state = decide::at_start(std::mem::take(&mut self.state));
            self.name_unowned().await;
        }
        loop {
            // The pause ends on time even when a cycle is late (a slow collection).
            let deadline = self
                .state
                .ladder
                .pause
                .as_ref()
                .filter(|_| self.state_is_current())
                .and_then(|p| p.deadline(&self.policy.ladder.pause))
                .map(|d| Duration::from_secs_f64((d - self.clock.now()).max(0.0)));
            let next_event = async {
                match lease_events.as_mut() {
                    Some(rx) => rx.recv().await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                changed = snapshots.changed() => if changed.is_err() { break },
                _ = tokio::time::sleep(self.interval) => {}
                _ = tokio::time::sleep(deadline.unwrap_or(Duration::MAX)), if deadline.is_some() => {
                    self.end_pause_slice().await;
                    continue;
                }
                event = next_event => {
                    match event {
                        Some(e) => self.on_lease_event(e).await,
                        None => lease_events = None,
                    }
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
        self.shut_down().await;
        // Released only now, after everything was handed back (or, with keep-throttle, left in
        // the stored state): the next leader starts from what is stored.
        if let Some(link) = self.lease.as_mut() {
            link.release(Duration::from_secs(5)).await;
        }
        if let Some(rx) = lease_events.as_mut() {
            while let Ok(e) = rx.try_recv() {
                self.log_lease_event(e);
            }
        }
    }

    /// SHUTDOWN (SIGTERM, SIGINT): hands back what `decide::on_exit` says (pause flags, rung-2
    /// limits, then the profile unless `--enforcer.on-exit keep-throttle`), all within
    /// `--enforcer.exit-timeout`, which the manifest's grace period covers. What is not back by
    /// then is logged with the commands to run by hand; the state file keeps its originals.
    pub async fn shut_down(&mut self) {
        const WHEN: &str = "SHUTDOWN";
        if self.lease.is_some()
            && (!self.may_act() || self.memory_loaded != self.lease.as_ref().map(Link::term))
        {
            tracing::info!(target: "decision", "enforcer stopped; this instance did not hold the lease, so it had nothing to hand back");
            return;
        }
        let limit = self.policy.exit_timeout;
        let deadline = tokio::time::Instant::now() + limit;
        let mut obs = self.last_obs.clone().unwrap_or_else(Observation::quiet);
        let initial = self.state.clone();
        if self.policy.mode == Mode::Enforce && !self.state.original.is_empty() {
            // A fresh read, so that a hand change since the last cycle is never overwritten;
            // a quarter of the time at most, the rest is for the commands.
            let keys = self.lever_keys();
            let read = tokio::time::timeout(limit / 4, self.actor.configured(&keys));
            match read.await {
                Ok(Ok(values)) => {
                    obs.configured = values;
                    obs.configured_known = true;
                }
                Ok(Err(e)) => {
                    tracing::warn!(target: "decision", error = %e, "{WHEN}: cannot read the configured values (ceph config dump); judging hand changes by the last cycle's")
                }
                Err(_) => {
                    tracing::warn!(target: "decision", "{WHEN}: reading the configured values took over {}; judging hand changes by the last cycle's", fmt_secs((limit / 4).as_secs_f64()))
                }
            }
        }
        // The backfill lever's holds first: given back (held PGs nobody releases would never
        // backfill), unless keep-throttle leaves them to the next leader.
        if lever::kept_at_exit(&self.policy, &self.state) {
            let (held, balancer) = held_words(&self.state.backfill);
            tracing::warn!(
                target: "decision",
                "{WHEN}: --enforcer.on-exit keep-throttle: the backfill lever's {held} stay held{}: the next instance takes them on and releases them at the lever's pace. If none starts they never backfill (RecoveryBudgetExporterDownWhileHoldingPGs fires); release them by hand as docs/runbook.md says (ceph-recovery-budget backfill release --record FILE --apply)",
                balancer.map(|b| format!(" and {b}")).unwrap_or_default()
            );
        } else if tokio::time::timeout_at(deadline, self.give_back_holds(WHEN))
            .await
            .is_err()
        {
            tracing::error!(target: "decision", "{WHEN}: the PGs the backfill lever holds were not all released in time (--enforcer.exit-timeout {}): {}; the state keeps them for the next start. Run by hand: ceph-recovery-budget backfill release, or ceph osd rm-pg-upmap-items PGID for each", fmt_secs(limit.as_secs_f64()), self.state.backfill.held.keys().map(ToString::to_string).collect::<Vec<_>>().join(", "));
        }
        let now = self.clock.now();
        let (decision, lines) = decide::on_exit(&self.policy, &obs, &self.state, now);
        for line in &lines {
            match line {
                LogLine::Info(m) => tracing::info!(target: "decision", "{m}"),
                LogLine::Warn(m) => tracing::warn!(target: "decision", "{m}"),
                LogLine::Error(m) => tracing::error!(target: "decision", "{m}"),
            }
        }
        let mut effects = self.adopt(decision).into_iter();
        let mut left: Vec<Planned> = Vec::new();
        let mut why_left = String::new();
        while let Some(planned) = effects.next() {
            let config = matches!(planned.effect, Effect::Config(_));
            let run = tokio::time::timeout_at(deadline, self.execute(planned.clone(), &obs, now));
            match run.await {
                // A later step would forget the originals of what failed here: stop, say it.
                Ok(true) if config => {
                    left.extend(effects.by_ref());
                    why_left = "not attempted after the failure above".to_string();
                }
                Ok(_) => {}
                Err(_) => {
                    left.push(planned);
                    left.extend(effects.by_ref());
                    why_left = format!(
                        "not handed back in time (--enforcer.exit-timeout {})",
                        fmt_secs(limit.as_secs_f64())
                    );
                }
            }
        }
        if !left.is_empty() {
            let what: Vec<String> = left.iter().map(|p| describe_left(&p.effect)).collect();
            let cmds: Vec<String> = left
                .iter()
                .flat_map(|p| outcome::by_hand(&p.effect))
                .collect();
            tracing::error!(target: "decision", "{WHEN}: {why_left}: {}; the state file keeps the operator's originals for the next start. Run by hand: {}", what.join("; "), cmds.join("; "));
        }
        if !self.state.persistent_eq(&initial) {
            let _ = self.persist("at shutdown").await;
        }
        if let Ok(mut v) = self.shared.lock() {
            v.update_mode_only(&self.policy, &self.state);
        }
        let holds = self.state.applied.as_ref().filter(|a| !a.simulated);
        match holds {
            Some(a) if self.policy.mode == Mode::Enforce => {
                let held: Vec<String> = a.values.iter().map(|(k, v)| format!("{k} {v}")).collect();
                tracing::info!(target: "decision", "enforcer stopped; it still holds {}; its state file remembers the operator's originals for the next start", held.join(", "))
            }
            _ if !self.state.flags_set.is_empty() => {
                tracing::info!(target: "decision", "enforcer stopped; its state file lists the pause flags it could not unset, for the next start")
            }
            _ => {
                tracing::info!(target: "decision", "enforcer stopped; nothing it set is left on the cluster")
            }
        }
    }
}

/// The lever's record for a log line: "10 PGs (2.0, 2.1, ...)", and "the balancer paused (it
/// was on, mode upmap)" when it paused one.
fn held_words(b: &crate::backfill::Record) -> (String, Option<String>) {
    let ids: Vec<String> = b.held.keys().take(10).map(ToString::to_string).collect();
    let more = if b.held.len() > ids.len() {
        ", ..."
    } else {
        ""
    };
    (
        format!("{} PGs ({}{more})", b.held.len(), ids.join(", ")),
        b.balancer
            .as_ref()
            .map(|before| format!("the balancer paused (it was {before})")),
    )
}

/// What a stored state holds, for the takeover line: what to hand back later.
fn summarize(state: &EnforcerState) -> String {
    let mut parts = Vec::new();
    if let Some(a) = state.applied.as_ref().filter(|a| !a.simulated) {
        let held: Vec<String> = a.values.iter().map(|(k, v)| format!("{k}={v}")).collect();
        parts.push(format!(
            "holds {} (rung {})",
            held.join(", "),
            state.ladder.rung
        ));
    }
    if !state.original.is_empty() {
        let orig: Vec<String> = state
            .original
            .iter()
            .map(|(k, v)| format!("{k}={}", v.as_deref().unwrap_or("(unset)")))
            .collect();
        parts.push(format!("operator's originals {}", orig.join(", ")));
    }
    if !state.flags_set.is_empty() {
        let flags: Vec<&str> = state.flags_set.iter().map(String::as_str).collect();
        parts.push(format!(
            "pause flags set by the enforcer: {}",
            flags.join(", ")
        ));
    }
    if !state.backfill.held.is_empty() {
        parts.push(format!(
            "{} PGs held by the backfill lever (pg-upmap-items)",
            state.backfill.held.len()
        ));
    }
    if state.ladder.paused_seconds > 0.0 {
        parts.push(format!(
            "paused {} in {}",
            fmt_secs(state.ladder.paused_seconds),
            if state.recovery_active {
                "this recovery so far"
            } else {
                "the last recovery"
            }
        ));
    }
    if parts.is_empty() {
        "nothing set by the enforcer".to_string()
    } else {
        parts.join("; ")
    }
}

/// What an effect not carried out at exit was to hand back.
fn describe_left(effect: &Effect) -> String {
    match effect {
        Effect::Config(a) => a
            .handed_back()
            .replace("restored ", "restore ")
            .replace("removed ", "remove "),
        Effect::UnsetFlags { flags, .. } => format!("unset {}", flags.join(", ")),
        Effect::SetFlags { flags, .. } => format!("set {}", flags.join(", ")),
        Effect::Backfill(b) => format!(
            "release the PGs the backfill lever holds ({}) and put the balancer back",
            b.release
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        ),
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

/// Whether the enforcer has a stake in this cycle, so that the cluster reads `decide` needs
/// (flags, versions, configured values) are made: a recovery in Ceph's counts, anything it set,
/// or PGs its backfill lever holds. Held PGs are clean, so Ceph's counts can show no recovery
/// for a moment between two backfills: on the lab (2026-12-04, run G) the configured values
/// went unread in such a cycle, and the lever raised N where the recovery ops per PG were due.
/// The recovery is `decide`'s own test: PGs released lately count, as they do there (row 11 on
/// the lab, 2026-12-06: a THROTTLE 9 s after a release, Ceph's counts showing none, took the
/// unread profile for unset, and the RESTORE removed the operator's `balanced`).
fn involved(state: &EnforcerState, obs: &Observation, now: Time) -> bool {
    decide::recovering(state, obs, now)
        || state.applied.is_some()
        || !state.original.is_empty()
        || !state.flags_set.is_empty()
        || state.ladder.pause.is_some()
        || state.ladder.lever.is_some()
        || state.lever_holds()
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
