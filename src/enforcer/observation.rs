//! What the enforcer sees in one cycle, built from the exporter's snapshot.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::ceph::parse::pgs::UndersizedPgs;
use crate::ceph::parse::pools::Pool;
use crate::ceph::parse::status::{ClusterStatus, RecoveryCounts};
use crate::ceph::parse::versions::{LimitUnit, OsdVersion};
use crate::collect::safety::{self, pool_safety, PgSafety};
use crate::collect::Snapshot;

/// The op queue the OSDs run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub enum OpQueue {
    Mclock,
    /// wpq or another non-mClock queue.
    Other(String),
    /// OSDs disagree (some restarted with another setting).
    Mixed,
    Unknown,
}

impl OpQueue {
    pub fn describe(&self) -> String {
        match self {
            OpQueue::Mclock => "mclock_scheduler".into(),
            OpQueue::Other(q) => q.clone(),
            OpQueue::Mixed => "mixed (OSDs disagree)".into(),
            OpQueue::Unknown => "unknown (not read)".into(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Observation {
    /// Why the observation must not be acted on (collector down, data too old).
    pub stale: Option<String>,
    /// Cluster-wide client write p99 over the policy's latency window; None when no writes, or
    /// none in the newest collection (see [`judged_p99`]).
    pub p99: Option<f64>,
    /// Why there is no p99: "no client writes in the last 15s".
    pub p99_note: Option<String>,
    /// Seconds the p99 really covers, while the window is still filling (the first minutes
    /// after a start): what every line that names the p99's window says. `None`: the whole
    /// latency window.
    pub p99_span: Option<f64>,
    pub baseline: Option<f64>,
    /// Why there is no baseline, or where it came from.
    pub baseline_note: Option<String>,
    pub degraded_objects: u64,
    pub misplaced_objects: u64,
    /// PGs recovering, backfilling or waiting for either.
    pub pgs_recovering: u64,
    pub recovery_rate: Option<f64>,
    /// Ceph's own `recovering_objects_per_sec` now (0 when Ceph leaves it out); None when
    /// `ceph status` was not read. Unlike `recovery_rate` (the fall of degraded + misplaced),
    /// PGs the backfill lever holds do not count as recovered.
    pub ceph_recovery_rate: Option<f64>,
    pub undersized_pgs: u64,
    pub pools_at_min_size: Vec<String>,
    /// What the PG states say about redundancy (see `redundancy.rs`).
    pub pg_safety: PgSafety,
    pub op_queue: OpQueue,
    /// The profile each OSD really runs (those that answered).
    pub osd_profiles: BTreeMap<String, String>,
    /// (OSDs in the cluster, OSDs up), from `ceph status`, to say which OSDs did not answer.
    pub osds: Option<(u64, u64)>,
    /// Values in the config database's `osd` section for the keys the enforcer may set (None = unset).
    pub configured: BTreeMap<String, Option<String>>,
    pub configured_known: bool,
    /// The OSD map's flags (`ceph osd dump` "flags"), when read.
    pub osd_flags: Option<std::collections::BTreeSet<String>>,
    /// How many OSDs run each version (`ceph versions`), or why it is not known. Read only
    /// when rung 2 under mClock may come next.
    pub osd_versions: Result<Vec<(OsdVersion, u64)>, String>,
    /// What the backfill lever sees (`pg dump pgs_brief`, `osd dump`, `balancer status`): read
    /// only while it may act or holds something; `None`: not read this cycle, `Err`: why not.
    #[serde(skip)]
    pub backfill: Option<Result<BackfillView, String>>,
}

/// The backfill lever's view of the cluster.
#[derive(Debug, Clone, PartialEq)]
pub struct BackfillView {
    pub pgs: Vec<crate::ceph::parse::pgs::PgBrief>,
    pub map: crate::ceph::parse::upmap::UpmapView,
    /// `ceph balancer status` (an mgr command: the mgr may not answer while the mon does);
    /// `Ok(None)`: the mgr offers no balancer module.
    pub balancer: Result<Option<crate::ceph::parse::upmap::BalancerStatus>, String>,
}

impl BackfillView {
    /// PGs that wait for or do backfill (held PGs are active+clean: not counted).
    pub fn backfilling(&self) -> usize {
        self.pgs
            .iter()
            .filter(|p| crate::backfill::plan::backfills(p))
            .count()
    }
}

/// Whether rung 2's mClock limits may be written in the unit they are configured in: IOPS mean
/// IOPS only to Pacific (and Quincy before 17.2.6); from Quincy 17.2.6 on a limit is a fraction
/// of each OSD's capacity (300 would be 300 times it, 0.03 on Pacific a thirtieth of an IOPS).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LimitGate {
    /// Every OSD reads them so.
    Reads,
    /// Some OSD reads another unit (or runs a version this program cannot read): which.
    Refused(String),
    /// Not known now (`ceph versions` failed, or no OSD reports one): why. Asked again next cycle.
    Unknown(String),
}

impl Observation {
    /// Some copy is missing (PGs undersized, a pool at min_size): never a pause nor a held PG
    /// then, whatever the suspension policy.
    pub fn copies_missing(&self) -> bool {
        self.undersized_pgs > 0 || !self.pools_at_min_size.is_empty()
    }

    /// Recovery is active while objects are degraded or misplaced, PGs recover or backfill, or
    /// PGs are undersized (redundancy is not back yet, even before any object is degraded).
    pub fn recovery_active(&self) -> bool {
        RecoveryCounts {
            degraded_objects: self.degraded_objects,
            misplaced_objects: self.misplaced_objects,
            pgs_moving: self.pgs_recovering,
            undersized_pgs: self.undersized_pgs,
        }
        .running()
    }

    /// See [`LimitGate`].
    pub fn mclock_limit_gate(&self, unit: LimitUnit) -> LimitGate {
        let versions = match &self.osd_versions {
            Err(e) => {
                return LimitGate::Unknown(format!("the OSDs' Ceph versions are not known ({e})"))
            }
            Ok(v) if v.is_empty() => {
                return LimitGate::Unknown("no OSD reports its Ceph version".to_string())
            }
            Ok(v) => v,
        };
        let others: Vec<String> = versions
            .iter()
            .filter_map(|(v, n)| {
                let reads = match v.mclock_limit_unit() {
                    Some(u) if u == unit => return None,
                    Some(u) => format!("reading {}", u.describe()),
                    None => "a version this program cannot read".to_string(),
                };
                let who = format!("{n} OSDs run {} {}", v.version, v.release);
                Some(format!("{} ({reads})", who.trim_end()))
            })
            .collect();
        if others.is_empty() {
            LimitGate::Reads
        } else {
            LimitGate::Refused(others.join(", "))
        }
    }

    /// An empty, usable observation (for tests and tables).
    pub fn quiet() -> Self {
        Self {
            stale: None,
            p99: None,
            p99_note: None,
            p99_span: None,
            baseline: None,
            baseline_note: None,
            degraded_objects: 0,
            misplaced_objects: 0,
            pgs_recovering: 0,
            recovery_rate: None,
            ceph_recovery_rate: None,
            undersized_pgs: 0,
            pools_at_min_size: Vec::new(),
            pg_safety: PgSafety::default(),
            op_queue: OpQueue::Mclock,
            osd_profiles: BTreeMap::new(),
            osds: None,
            configured: BTreeMap::new(),
            configured_known: true,
            osd_flags: None,
            osd_versions: Ok(vec![(
                crate::ceph::parse::versions::version_line(
                    "ceph version 16.2.15 (618f440892089921c3e944a991122ddc44e60516) pacific (stable)",
                ),
                4,
            )]),
            backfill: None,
        }
    }
}

/// The p99 the enforcer judges by. The window's p99 (`window_p99`) covers its whole length, so
/// it still holds writes for minutes after clients stopped: a decision taken on it would act
/// for writes that are over. Only when the newest collection had writes (`newest_writes`, over
/// one `interval`) is it used; otherwise none, and why.
pub fn judged_p99(
    window_p99: Option<f64>,
    newest_writes: Option<u64>,
    interval: std::time::Duration,
    window: std::time::Duration,
) -> (Option<f64>, Option<String>) {
    use crate::units::fmt_window;
    match (window_p99, newest_writes) {
        (None, _) => (
            None,
            Some(format!(
                "no client writes in the last {}",
                fmt_window(window.as_secs_f64())
            )),
        ),
        (Some(_), Some(0)) => (
            None,
            Some(format!(
                "no client writes in the last {}, only older ones in the last {}",
                fmt_window(interval.as_secs_f64()),
                fmt_window(window.as_secs_f64())
            )),
        ),
        (Some(p), _) => (Some(p), None),
    }
}

/// Builds the cluster part of an observation from a snapshot, as of `now`. The caller adds p99,
/// baseline and configured values.
pub fn from_snapshot(snapshot: &Snapshot, now: tokio::time::Instant) -> Observation {
    let mut obs = Observation::quiet();
    obs.op_queue = OpQueue::Unknown;
    obs.osd_versions = Err("not read".to_string());
    obs.configured_known = false;
    let mut stale = Vec::new();
    for h in &snapshot.collectors {
        if let Some(why) = snapshot.why_down(h, now) {
            stale.push(format!("collector {} is down ({why})", h.name.as_str()));
        }
    }
    if let Some(s) = snapshot.fresh(&snapshot.status, now) {
        let counts = s.status.recovery_counts();
        obs.degraded_objects = counts.degraded_objects;
        obs.misplaced_objects = counts.misplaced_objects;
        obs.recovery_rate = s.recovery_rate_delta;
        obs.ceph_recovery_rate = Some(s.status.recovering_objects_per_sec);
        obs.pgs_recovering = counts.pgs_moving;
        obs.osds = s.status.num_osds.zip(s.status.num_up_osds);
        stale.extend(read_pg_states(&mut obs, &s.status));
    }
    if let (Some(pools), Some(pgs)) = (
        snapshot.fresh(&snapshot.pools, now),
        snapshot.fresh(&snapshot.undersized_pgs, now),
    ) {
        let status = snapshot.fresh(&snapshot.status, now).map(|s| &s.status);
        read_pools(&mut obs, pools, pgs, status);
    }
    if let Some(scheds) = snapshot.fresh(&snapshot.schedulers, now) {
        let queues: std::collections::BTreeSet<&str> = scheds
            .values()
            .filter_map(|s| s.op_queue.as_deref())
            .collect();
        obs.op_queue = match queues.len() {
            0 => OpQueue::Unknown,
            1 if queues.contains("mclock_scheduler") => OpQueue::Mclock,
            1 => OpQueue::Other(
                queues
                    .iter()
                    .next()
                    .map(|q| q.to_string())
                    .unwrap_or_default(),
            ),
            _ => OpQueue::Mixed,
        };
        obs.osd_profiles = scheds
            .iter()
            .filter_map(|(osd, s)| s.mclock_profile.clone().map(|p| (osd.clone(), p)))
            .collect();
    }
    if !stale.is_empty() {
        obs.stale = Some(stale.join("; "));
    }
    obs
}

/// What `ceph status`'s PG states say of redundancy (undersized, cannot serve I/O, inactive),
/// into `obs`; and why they cannot be judged, when so: blind, never healthy.
pub(crate) fn read_pg_states(obs: &mut Observation, status: &ClusterStatus) -> Vec<String> {
    obs.undersized_pgs = status.recovery_counts().undersized_pgs;
    let (cannot_serve, inactive) = safety::from_states(&status.pgs_by_state);
    obs.pg_safety.cannot_serve = cannot_serve;
    obs.pg_safety.inactive = inactive;
    let mut blind = Vec::new();
    if status.pgs_by_state.is_empty() && status.num_pgs > 0 {
        blind.push(format!(
            "`ceph status` lists no PG states while the cluster has {} PGs: redundancy cannot be judged",
            status.num_pgs
        ));
    }
    if status.mgr_available == Some(false) {
        blind.push(
            "no mgr is active: the PG states in `ceph status` are the last an mgr reported, not the cluster's now".to_string(),
        );
    }
    blind
}

/// What the pools and the PG listing say, into `obs`: pools at min_size and the degraded PGs of
/// pools one copy from it. `status` (fresh, if any) counts the degraded PGs a listing of
/// undersized PGs only could not place.
pub(crate) fn read_pools(
    obs: &mut Observation,
    pools: &[Pool],
    pgs: &UndersizedPgs,
    status: Option<&ClusterStatus>,
) {
    let safety = pool_safety(pools, pgs);
    obs.pools_at_min_size = safety
        .iter()
        .filter(|p| p.at_min_size())
        .map(|p| p.pool.name.clone())
        .collect();
    obs.pg_safety.degraded_at_min_size = safety
        .iter()
        .filter_map(|p| {
            p.pgs_degraded_at_min_size()
                .filter(|n| *n > 0)
                .map(|n| (p.pool.name.clone(), n))
        })
        .collect();
    // The listing did not place the degraded PGs (`pg ls undersized`): any of them may be in a
    // pool one copy from min_size.
    if pgs.degraded_by_pool.is_none() && safety.iter().any(|p| p.one_copy_from_min_size()) {
        obs.pg_safety.degraded_unplaced = status.map_or(0, |s| {
            s.pg_state_word_counts()
                .get("degraded")
                .copied()
                .unwrap_or(0)
        });
    }
}

/// The span a window's p99 covers, when shorter than the window (it is still filling): `None`
/// once it covers the window (the span then exceeds it by up to one collection interval).
pub fn filling_span(span: std::time::Duration, window: std::time::Duration) -> Option<f64> {
    (span < window && !span.is_zero()).then_some(span.as_secs_f64())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_window_still_filling_names_the_span_it_covers() {
        let w = Duration::from_secs(60);
        // 20 s after a start: "over the last 20s", not the 1m configured.
        assert_eq!(filling_span(Duration::from_secs(20), w), Some(20.0));
        assert_eq!(filling_span(Duration::ZERO, w), None);
        // Full (the span exceeds the window by up to one interval): the window's name.
        assert_eq!(filling_span(Duration::from_secs(60), w), None);
        assert_eq!(filling_span(Duration::from_secs(72), w), None);
        let obs = Observation {
            p99: Some(0.0412),
            p99_span: Some(20.0),
            ..Observation::quiet()
        };
        let policy = super::super::Policy::default();
        let ctx = super::super::ctx::Ctx::new(&policy, &obs, 0.0);
        assert_eq!(
            ctx.p99(0.0412),
            "client p99 write 41.2 ms over the last 20s"
        );
    }

    #[test]
    fn no_p99_to_judge_by_once_the_writes_stop() {
        let (i, w) = (Duration::from_secs(15), Duration::from_secs(300));
        assert_eq!(
            judged_p99(Some(0.0412), Some(2000), i, w),
            (Some(0.0412), None)
        );
        // The window still holds writes from minutes ago; the newest collection none.
        let (p99, note) = judged_p99(Some(0.0412), Some(0), i, w);
        assert_eq!(p99, None);
        assert_eq!(
            note.as_deref(),
            Some("no client writes in the last 15s, only older ones in the last 5m")
        );
        let (p99, note) = judged_p99(None, None, i, w);
        assert_eq!(p99, None);
        assert_eq!(note.as_deref(), Some("no client writes in the last 5m"));
        // The first collection: nothing to compare yet, the window's p99 stands.
        assert_eq!(judged_p99(Some(0.02), None, i, w), (Some(0.02), None));
    }
}
