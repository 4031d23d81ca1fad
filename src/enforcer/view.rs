//! What the enforcer shows: the current state for metrics, the landing page and `status`, and
//! the last decisions for `/decisions`.

use std::collections::{BTreeMap, VecDeque};

use serde::Serialize;

use super::decide::limit_wait;
use super::event::{DecisionEvent, DecisionRecord};
use super::observation::Observation;
use super::policy::{Mode, Policy};
use super::state::{ActionKind, EnforcerState, Phase};
use super::types::Time;
use super::unowned::{self, Unowned};

pub const KEEP_DECISIONS: usize = 200;

#[derive(Debug, Clone, Serialize)]
pub struct EnforcerView {
    pub mode: Mode,
    pub phase: Phase,
    pub baseline_seconds: Option<f64>,
    pub baseline_source: String,
    /// Why there is no baseline yet, when there is none.
    pub baseline_note: Option<String>,
    /// Observe mode: `applied` was never really set.
    pub applied_simulated: bool,
    pub multiplier: f64,
    pub bound_seconds: Option<f64>,
    /// Client write p99 over the last `p99_window_seconds`, as the enforcer judges it; `None`
    /// with `p99_note` saying why (no recent writes).
    pub p99_seconds: Option<f64>,
    pub p99_window_seconds: f64,
    pub p99_note: Option<String>,
    pub breached: bool,
    /// How long a breach must last before the enforcer acts (`for`).
    pub breach_for_seconds: f64,
    /// No recovery, yet p99 above the bound for this long: the baseline looks too low.
    pub baseline_suspect_after_seconds: f64,
    /// No recovery, yet p99 above the bound for `baseline_suspect_after_seconds`: the baseline
    /// looks too low.
    pub baseline_suspect: bool,
    /// What the enforcer learned about this cluster and acts on: levers it no longer uses
    /// (they made p99 worse here) and what held the bound in the last recovery, in sentences.
    pub memory: Vec<String>,
    pub breach_seconds: f64,
    pub suspended: bool,
    pub suspend_reason: Option<String>,
    pub holding_reason: Option<String>,
    pub recovery_active: bool,
    pub degraded_objects: u64,
    pub misplaced_objects: u64,
    pub recovery_objects_per_second: Option<f64>,
    pub pgs_recovering: u64,
    pub pgs_undersized: u64,
    pub pools_at_min_size: Vec<String>,
    pub op_queue: String,
    pub osd_profiles: BTreeMap<String, String>,
    /// What the enforcer set and holds, key -> value.
    pub applied: BTreeMap<String, String>,
    pub original: BTreeMap<String, Option<String>>,
    pub osds_not_taken: Vec<String>,
    /// After the throttle settled: 1 helped, 0 no effect.
    pub throttle_effective: Option<bool>,
    pub next_change_allowed_in_seconds: f64,
    /// The escalation ladder: rung held (0..4), highest in this recovery.
    pub ladder_rung: u8,
    pub ladder_top: u8,
    /// "rung 2 (custom profile, recovery limit 300 IOPS per OSD)"
    pub ladder_rung_name: String,
    /// The level controller's time limit for this recovery, once the operator's rate is known.
    pub time_limit: Option<super::levels::controller::Deadline>,
    /// The rung held now: when it was entered and the p99 that led to it.
    pub action_since: Option<Time>,
    pub action_p99_seconds: Option<f64>,
    /// The rung held is the strongest the enforcer may use now (it said why: LADDER_TOP).
    pub ladder_at_top: bool,
    /// The backfill lever (rung 3, kept under the pause): at most this many PGs backfill at once.
    pub backfill_limit: Option<usize>,
    /// PGs the enforcer holds with pg-upmap-items (never simulated holds: observe mode holds
    /// none), and the first few of them.
    pub backfill_held: usize,
    pub backfill_held_pgs: Vec<String>,
    /// PGs waiting for or doing backfill, not held, when last read.
    pub backfill_backfilling: Option<usize>,
    /// The mgr balancer paused by the enforcer, as it was before ("on, mode upmap").
    pub backfill_balancer_paused: Option<String>,
    /// Share of each pause period the pause rung pauses recovery (0 when not on rung 4).
    pub pause_share: f64,
    /// The enforcer's nobackfill/norecover are set now (in observe mode: would be).
    pub paused: bool,
    /// Seconds recovery was paused by the enforcer in this (or the last) recovery.
    pub paused_seconds: f64,
    /// Flags the enforcer set and has not unset yet.
    pub flags_set: Vec<String>,
    /// Enforce mode: this instance holds the lease and acts (`Some(false)`: standby); `None`
    /// without a lease (observe mode).
    pub leader: Option<bool>,
    /// This instance, as the lease names it.
    pub lease_instance: Option<String>,
    /// `pool/object` of the lease and the stored state.
    pub lease_location: Option<String>,
    /// The other holder seen, while standby.
    pub lease_holder: Option<String>,
    /// The lease's last failure (cleared by a success), and its reason.
    pub lease_error: Option<String>,
    pub lease_error_reason: Option<&'static str>,
    /// Pause flags and lever keys on the cluster the enforcer has no record of setting: found
    /// at start, refreshed by each cycle that reads them; never touched.
    pub unowned: Vec<Unowned>,
    /// The last change Ceph refused for lack of a cephx capability, in words that say what to
    /// grant; until a command needing the same grant works.
    pub permission_denied: Option<String>,
    /// Blind (observations stale or failing) since then; and when the operator's settings go
    /// back if it stays so (`--enforcer.blind-restore-after`), while the enforcer holds any.
    pub blind_since: Option<Time>,
    pub blind_restore_at: Option<Time>,
    /// The action the change limits defer this cycle (THROTTLE, SUSPEND, ...), and until when.
    pub deferred: Option<(String, Time)>,
    /// A failed action, and when it is tried again.
    pub retry: Option<(String, Time)>,
    /// When the recovery ended (while settling), and how long the enforcer waits to restore.
    pub recovery_ended_at: Option<Time>,
    pub settle_seconds: f64,
    pub decisions_total: BTreeMap<String, u64>,
    pub action_failures_total: u64,
    pub updated_at: Option<Time>,
    pub decisions: VecDeque<DecisionRecord>,
}

impl EnforcerView {
    pub fn new(policy: &Policy) -> Self {
        Self {
            mode: policy.mode,
            phase: Phase::Idle,
            baseline_seconds: None,
            baseline_source: policy.baseline.to_string(),
            baseline_note: None,
            applied_simulated: false,
            multiplier: policy.multiplier,
            bound_seconds: None,
            p99_seconds: None,
            p99_window_seconds: policy.latency_window.as_secs_f64(),
            p99_note: None,
            breached: false,
            breach_for_seconds: policy.breach_for.as_secs_f64(),
            baseline_suspect_after_seconds: super::decide::baseline_suspect_after(policy),
            baseline_suspect: false,
            memory: Vec::new(),
            breach_seconds: 0.0,
            suspended: false,
            suspend_reason: None,
            holding_reason: None,
            recovery_active: false,
            degraded_objects: 0,
            misplaced_objects: 0,
            recovery_objects_per_second: None,
            pgs_recovering: 0,
            pgs_undersized: 0,
            pools_at_min_size: Vec::new(),
            op_queue: String::new(),
            osd_profiles: BTreeMap::new(),
            applied: BTreeMap::new(),
            original: BTreeMap::new(),
            osds_not_taken: Vec::new(),
            throttle_effective: None,
            next_change_allowed_in_seconds: 0.0,
            ladder_rung: 0,
            ladder_top: 0,
            ladder_rung_name: String::new(),
            time_limit: None,
            action_since: None,
            action_p99_seconds: None,
            ladder_at_top: false,
            backfill_limit: None,
            backfill_held: 0,
            backfill_held_pgs: Vec::new(),
            backfill_backfilling: None,
            backfill_balancer_paused: None,
            pause_share: 0.0,
            paused: false,
            paused_seconds: 0.0,
            flags_set: Vec::new(),
            leader: None,
            lease_instance: None,
            lease_location: None,
            lease_holder: None,
            lease_error: None,
            lease_error_reason: None,
            unowned: Vec::new(),
            permission_denied: None,
            blind_since: None,
            blind_restore_at: None,
            deferred: None,
            retry: None,
            recovery_ended_at: None,
            settle_seconds: policy.settle.as_secs_f64(),
            // Every event at 0 from the start, so that `increase()` sees the first.
            decisions_total: DecisionEvent::ALL
                .iter()
                .map(|e| (e.as_str().to_string(), 0))
                .collect(),
            action_failures_total: 0,
            updated_at: None,
            decisions: VecDeque::new(),
        }
    }

    pub fn push_decision(&mut self, r: DecisionRecord) {
        *self.decisions_total.entry(r.event.clone()).or_insert(0) += 1;
        if self.decisions.len() >= KEEP_DECISIONS {
            self.decisions.pop_front();
        }
        self.decisions.push_back(r);
    }

    /// The lease's standing, as `link`'s task last published it.
    pub fn set_lease(&mut self, link: &crate::lease::task::Link) {
        let status = link.status();
        self.leader = Some(status.acting(tokio::time::Instant::now()));
        self.lease_instance = Some(link.instance().to_string());
        self.lease_location = Some(link.location().to_string());
        self.lease_holder = status.holder.as_ref().map(ToString::to_string);
        self.lease_error = status.error;
        self.lease_error_reason = status.error_reason;
    }

    pub fn update_mode_only(&mut self, policy: &Policy, state: &EnforcerState) {
        self.mode = policy.mode;
        self.phase = state.phase;
        self.applied = state
            .applied
            .as_ref()
            .map(|a| a.values.clone())
            .unwrap_or_default();
        // Observe mode only simulates: status must never say "set by the enforcer" for it.
        self.applied_simulated = state.applied.as_ref().is_some_and(|a| a.simulated);
        self.original = state.original.clone();
        self.ladder_rung = state.ladder.rung;
        self.ladder_top = state.ladder.top;
        self.pause_share = state.ladder.pause.as_ref().map_or(0.0, |p| p.share);
        self.backfill_limit = state.ladder.lever.as_ref().map(|l| l.n);
        self.backfill_held = state.backfill.held.len();
        self.backfill_held_pgs = state
            .backfill
            .oldest_first()
            .iter()
            .take(8)
            .map(ToString::to_string)
            .collect();
        self.backfill_balancer_paused = state.backfill.balancer.as_ref().map(ToString::to_string);
        self.paused = state.ladder.pause.as_ref().is_some_and(|p| p.paused);
        self.flags_set = state.flags_set.iter().cloned().collect();
        self.permission_denied = state.refused.as_ref().map(|(r, at)| {
            format!(
                "{} (at {})",
                super::outcome::refused_line(policy, r),
                humantime::format_rfc3339_seconds(
                    std::time::UNIX_EPOCH + std::time::Duration::from_secs_f64(at.max(0.0))
                )
            )
        });
        let in_force = state.ladder.in_force();
        self.action_since = in_force.map(|(_, a)| a.at);
        self.action_p99_seconds = in_force.and_then(|(_, a)| a.p99_seconds);
        self.baseline_suspect = state.baseline_suspect;
        self.recovery_ended_at = state.recovery_ended_at;
    }

    /// The settings found without a record, from what a cycle read (`obs`) and the state the
    /// cycle started from.
    pub fn refresh_unowned(&mut self, obs: &Observation, state_before: &EnforcerState) {
        self.unowned = unowned::refresh(&self.unowned, obs, state_before);
    }

    pub fn update(&mut self, policy: &Policy, obs: &Observation, state: &EnforcerState, now: Time) {
        self.update_mode_only(policy, state);
        self.baseline_seconds = obs.baseline;
        self.baseline_note = obs
            .baseline
            .is_none()
            .then(|| obs.baseline_note.clone())
            .flatten();
        self.bound_seconds = obs.baseline.map(|b| b * policy.multiplier);
        self.p99_seconds = obs.p99;
        // The window it really covers while it fills (after a start), not the one configured.
        self.p99_window_seconds = obs.p99_span.unwrap_or(policy.latency_window.as_secs_f64());
        self.p99_note = obs.p99_note.clone();
        self.breach_for_seconds = policy.breach_for.as_secs_f64();
        self.baseline_suspect_after_seconds = super::decide::baseline_suspect_after(policy);
        self.memory = memory_lines(policy, &obs.op_queue, &state.memory, now);
        self.settle_seconds = policy.settle.as_secs_f64();
        self.blind_since = state.blind_since;
        self.blind_restore_at = state
            .blind_since
            .filter(|_| !state.original.is_empty() && !state.overridden)
            .map(|t| t + policy.blind_restore_after.as_secs_f64());
        self.deferred = state
            .deferred
            .map(|(kind, until)| (kind.as_str().to_string(), until));
        self.retry = state
            .retry
            .as_ref()
            .map(|r| (r.kind.as_str().to_string(), r.next_at));
        self.ladder_at_top = state.noted.iter().any(|n| {
            n == "pause_budget" || *n == format!("top:{}:{}", state.ladder.rung, state.ladder.step)
        });
        self.breached = state.breach_since.is_some();
        self.breach_seconds = state.breach_since.map_or(0.0, |t| (now - t).max(0.0));
        self.suspended = state.phase == Phase::Suspended;
        self.suspend_reason = self.suspended.then(|| {
            let inactive_for = state.inactive_since.map(|t| now - t);
            match super::redundancy::risks(policy.suspend_when, obs, inactive_for).first() {
                Some(risk) => risk.reason().to_string(),
                // Redundancy is back; the RESUME has not gone through yet.
                None if !obs.pools_at_min_size.is_empty() => "pool_at_min_size".to_string(),
                None => "undersized".to_string(),
            }
        });
        self.holding_reason = state.holding.clone();
        // Held PGs are active+clean: the recovery is not over while the lever holds any.
        self.recovery_active = obs.recovery_active() || state.lever_keeps_recovery_on(now);
        self.degraded_objects = obs.degraded_objects;
        self.misplaced_objects = obs.misplaced_objects;
        self.recovery_objects_per_second = obs.recovery_rate;
        self.pgs_recovering = obs.pgs_recovering;
        self.pgs_undersized = obs.undersized_pgs;
        self.pools_at_min_size = obs.pools_at_min_size.clone();
        self.op_queue = obs.op_queue.describe();
        self.osd_profiles = obs.osd_profiles.clone();
        self.osds_not_taken = state
            .applied
            .as_ref()
            .map(|a| a.not_taken.clone())
            .unwrap_or_default();
        self.throttle_effective = state
            .applied
            .as_ref()
            .filter(|a| a.kind == ActionKind::Throttle)
            .and_then(|a| a.effective);
        self.next_change_allowed_in_seconds = limit_wait(policy, state, now);
        self.paused_seconds = state.ladder.paused_so_far(now);
        if let Some(Ok(v)) = &obs.backfill {
            self.backfill_backfilling = Some(v.backfilling());
        } else if obs.backfill.is_none()
            && state.ladder.lever.is_none()
            && state.backfill.is_empty()
            // The level controller reads the view once a window: the last count stands.
            && state.levels.is_none()
        {
            self.backfill_backfilling = None;
        }
        self.time_limit = state
            .levels
            .as_ref()
            .and_then(|run| run.position.deadline(&super::levels::drive::tuning(policy)));
        self.ladder_rung_name = if let Some(run) = &state.levels {
            // The level controller: where on this recovery's list, and what that level asks.
            format!(
                "level {} of {} ({}; the operator's settings are level {}, 0 the most recovery)",
                run.position.at,
                run.levels.list.len(),
                run.levels.get(run.position.at).describe(),
                run.levels.home
            )
        } else if state.ladder.rung == super::backfill_limit::LEVER_RUNG {
            super::lever::lever_name(self.backfill_limit)
        } else {
            super::ladder::rung_name(
                policy,
                &obs.op_queue,
                state.ladder.rung,
                state.ladder.step,
                state.ladder.pause.as_ref().map(|p| p.share),
            )
        };
        self.updated_at = Some(now);
    }
}

/// The memory as `status` says it: what is skipped and why, where the next pause starts.
pub fn memory_lines(
    policy: &Policy,
    q: &super::observation::OpQueue,
    m: &super::state::ClusterMemory,
    now: Time,
) -> Vec<String> {
    use crate::units::{fmt_ms, fmt_when};
    let mut out = Vec::new();
    for (key, h) in &m.hurt {
        if m.hurts(key, now).is_none() {
            continue;
        }
        out.push(format!(
            "not used on this cluster: {} made client p99 write worse {} ({} when it was set, {} after); tried again after {}",
            h.what,
            fmt_when(h.at, now),
            fmt_ms(h.p99_before),
            fmt_ms(h.p99_after),
            fmt_when(h.at + super::state::HURT_FORGET_AFTER, now)
        ));
    }
    if let Some(h) = &m.held {
        let rung = if h.rung == super::backfill_limit::LEVER_RUNG {
            super::lever::lever_name(h.n)
        } else {
            let name = super::ladder::rung_name(policy, q, h.rung, 0, h.share);
            match h.n {
                Some(n) => format!("{name} with at most {n} PGs backfilling at once"),
                None => name,
            }
        };
        out.push(format!(
            "last held the bound with {rung} {}: a breach in the next recovery starts there",
            fmt_when(h.at, now)
        ));
    }
    if let Some(h) = &m.level_held {
        out.push(format!(
            "last held the bound with {} (the level controller) {}: a window over the bound in the next recovery moves at least there",
            h.level.describe(),
            fmt_when(h.at, now)
        ));
    }
    if !policy.memory && !out.is_empty() {
        for line in &mut out {
            *line = format!("{line} (ignored: --enforcer.memory off)");
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_event_is_published_from_the_start() {
        let view = EnforcerView::new(&Policy::default());
        for e in DecisionEvent::ALL {
            assert_eq!(view.decisions_total.get(e.as_str()), Some(&0), "{e}");
        }
    }
}
