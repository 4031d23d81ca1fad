//! What to ask Ceph and how often: the collector task builds one immutable [`Snapshot`] per cycle
//! and publishes it on a `watch` channel. A scrape never runs a ceph command.
//!
//! Collectors are independent: one failing keeps its last good data (until it is older than
//! three intervals, see [`Snapshot::fresh`]) and does not blank the others.

pub mod recovery;
pub mod safety;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use tokio::sync::watch;
use tokio::time::{Instant, MissedTickBehavior};

use crate::ceph::ops::{self, OpsError};
use crate::ceph::parse::{self, ParseError};
use crate::ceph::{CephCommand, CephError, Client};
use crate::latency::aggregate::{Aggregator, Grouping, SumAggregator};
use crate::latency::{Histogram, LatencySum, LatencyWindow};
use recovery::{RecoveryWindow, WindowRates};

/// The quantiles published as `ceph_client_write_latency_seconds{quantile}`.
pub const QUANTILES: [f64; 3] = [0.5, 0.95, 0.99];

/// Data older than this many intervals is not served as if fresh.
pub const STALE_AFTER_INTERVALS: u32 = 3;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum CollectorName {
    Status,
    Pools,
    Pgs,
    Latency,
    Scheduler,
}

impl CollectorName {
    pub const ALL: [CollectorName; 5] = [
        CollectorName::Status,
        CollectorName::Pools,
        CollectorName::Pgs,
        CollectorName::Latency,
        CollectorName::Scheduler,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            CollectorName::Status => "status",
            CollectorName::Pools => "pools",
            CollectorName::Pgs => "pgs",
            CollectorName::Latency => "latency",
            CollectorName::Scheduler => "scheduler",
        }
    }
}

/// Why one collection failed.
#[derive(Debug, thiserror::Error)]
pub enum CollectError {
    #[error(transparent)]
    Ops(#[from] OpsError),
    /// Not collected in this mode (never recorded: the collector is not in the snapshot).
    #[error("not collected in this mode")]
    Skipped,
}

impl From<CephError> for CollectError {
    fn from(e: CephError) -> Self {
        CollectError::Ops(e.into())
    }
}

impl CollectError {
    pub fn reason(&self) -> &'static str {
        match self {
            CollectError::Ops(e) => e.reason(),
            CollectError::Skipped => "skipped",
        }
    }

    /// Ceph refused the command for lack of a cephx capability.
    pub fn is_permission_denied(&self) -> bool {
        matches!(self, CollectError::Ops(e) if e.is_permission_denied())
    }
}

/// A value with the (monotonic) time it was collected.
#[derive(Debug, Clone, PartialEq)]
pub struct Stamped<T> {
    pub at: Instant,
    pub value: T,
}

/// Cluster status plus the rate the exporter derives from its own samples.
#[derive(Debug, Clone, PartialEq)]
pub struct StatusData {
    pub status: parse::status::ClusterStatus,
    /// Decrease of degraded + misplaced objects per second over `--recovery.window`.
    pub recovery_rate_delta: Option<f64>,
    /// The same with Ceph's own rate over the same time, while there is something to recover.
    pub recovery_rates: Option<WindowRates>,
    /// Which OSDs are down but still in (`ceph osd dump`), read only when the status says some
    /// are (its `OSD_DOWN` check); `Err`: why that read failed.
    pub down_in: Option<Result<parse::osd_dump::DownIn, String>>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct LatencyData {
    /// Each answering OSD's write-latency histogram (counters since the OSD started).
    pub per_osd: BTreeMap<String, Histogram>,
    /// Cluster-wide quantiles over `--latency.window`; empty when no write happened in it.
    pub quantiles: Vec<(f64, f64)>,
    /// Time covered by the window so far (shorter than the window right after start).
    pub window_span: Duration,
    /// The window's length (`--latency.window`): the quantiles are over the last this much.
    pub window: Duration,
    /// OSDs that did not answer this cycle, with the reason.
    pub missing: BTreeMap<String, String>,
    /// `--latency.aggregate host|cluster`: the exporter's group counters (host name, or one
    /// entry for the cluster); `None` when histograms are published per OSD.
    pub groups: Option<BTreeMap<String, Histogram>>,
    /// Each answering OSD's `op_w_latency` counter (the histograms' `_sum`); empty when it could
    /// not be read this cycle (the histograms are served with `_sum` NaN, unknown, then).
    pub sums: BTreeMap<String, LatencySum>,
    /// The groups' summed seconds, kept like `groups`; `None` when published per OSD.
    pub group_sums: Option<BTreeMap<String, f64>>,
}

/// The scheduler an OSD really runs (asked of the daemon, so a value pinned in its ceph.conf shows).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct OsdScheduler {
    pub op_queue: Option<String>,
    pub mclock_profile: Option<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct CollectorHealth {
    pub name: CollectorName,
    /// Whether the last attempt succeeded.
    pub last_ok: bool,
    pub last_error: Option<String>,
    pub last_duration: Duration,
    /// Errors since start, by reason.
    pub errors_total: BTreeMap<&'static str, u64>,
    /// Wall-clock time of the last success.
    pub last_success: Option<SystemTime>,
}

impl CollectorHealth {
    fn new(name: CollectorName) -> Self {
        Self {
            name,
            last_ok: false,
            last_error: None,
            last_duration: Duration::ZERO,
            errors_total: BTreeMap::new(),
            last_success: None,
        }
    }
}

/// Everything one collection cycle knows. Immutable once published.
#[derive(Debug, Clone, PartialEq)]
pub struct Snapshot {
    pub cycle: u64,
    pub taken_at: Instant,
    pub interval: Duration,
    /// How long the last complete cycle took; on a slow cluster it can exceed the interval.
    pub cycle_duration: Duration,
    pub status: Option<Stamped<StatusData>>,
    pub pools: Option<Stamped<Vec<parse::pools::Pool>>>,
    /// PGs currently undersized, counted per pool (listed only when the status says there are
    /// any).
    pub undersized_pgs: Option<Stamped<parse::pgs::UndersizedPgs>>,
    pub latency: Option<Stamped<LatencyData>>,
    pub schedulers: Option<Stamped<BTreeMap<String, OsdScheduler>>>,
    pub collectors: Vec<CollectorHealth>,
}

impl Snapshot {
    pub fn empty(interval: Duration) -> Self {
        Self::empty_for(interval, |_| true)
    }

    /// With only the collectors that run (host mode has no status, pools, PGs or schedulers).
    pub fn empty_for(interval: Duration, enabled: impl Fn(CollectorName) -> bool) -> Self {
        Self {
            cycle: 0,
            taken_at: Instant::now(),
            interval,
            cycle_duration: Duration::ZERO,
            status: None,
            pools: None,
            undersized_pgs: None,
            latency: None,
            schedulers: None,
            collectors: CollectorName::ALL
                .iter()
                .filter(|n| enabled(**n))
                .map(|n| CollectorHealth::new(*n))
                .collect(),
        }
    }

    /// The maximum age at which data is still served: three intervals, or three cycles when a
    /// slow cluster makes a cycle take longer than the interval.
    pub fn max_age(&self) -> Duration {
        self.interval.max(self.cycle_duration) * STALE_AFTER_INTERVALS
    }

    /// Why a collector's data cannot be used at `now`, in words; None when it is up.
    pub fn why_down(&self, health: &CollectorHealth, now: Instant) -> Option<String> {
        if self.collector_up(health, now) {
            return None;
        }
        let age = self
            .data_at(health.name)
            .map(|at| now.saturating_duration_since(at));
        Some(match (&health.last_error, age) {
            (Some(e), _) => e.clone(),
            (None, Some(age)) => format!(
                "last data {:.0} s old, older than {:.0} s",
                age.as_secs_f64(),
                self.max_age().as_secs_f64()
            ),
            (None, None) => "no data yet".to_string(),
        })
    }

    /// The value if it was collected no longer than three intervals before `now`.
    pub fn fresh<'a, T>(&self, data: &'a Option<Stamped<T>>, now: Instant) -> Option<&'a T> {
        data.as_ref()
            .filter(|s| now.saturating_duration_since(s.at) <= self.max_age())
            .map(|s| &s.value)
    }

    pub fn data_at(&self, name: CollectorName) -> Option<Instant> {
        match name {
            CollectorName::Status => self.status.as_ref().map(|s| s.at),
            CollectorName::Pools => self.pools.as_ref().map(|s| s.at),
            CollectorName::Pgs => self.undersized_pgs.as_ref().map(|s| s.at),
            CollectorName::Latency => self.latency.as_ref().map(|s| s.at),
            CollectorName::Scheduler => self.schedulers.as_ref().map(|s| s.at),
        }
    }

    /// A collector is up when its last attempt succeeded and its data is fresh at `now`.
    pub fn collector_up(&self, health: &CollectorHealth, now: Instant) -> bool {
        health.last_ok
            && self
                .data_at(health.name)
                .is_some_and(|at| now.saturating_duration_since(at) <= self.max_age())
    }

    /// The collector readiness follows: the status collector, or in host mode (which reads no
    /// status) the latency collector.
    pub fn readiness_collector(&self) -> CollectorName {
        if self
            .collectors
            .iter()
            .any(|h| h.name == CollectorName::Status)
        {
            CollectorName::Status
        } else {
            CollectorName::Latency
        }
    }

    /// Why the exporter cannot see the cluster at `now`, in words; None when it can. Ready means
    /// the same as `ceph_recovery_budget_collector_up{collector="status"} == 1` (in host mode the
    /// latency collector): the last attempt succeeded and its data is fresh. So readiness is lost
    /// again when Ceph stops answering, not only before the first answer.
    pub fn not_ready(&self, now: Instant) -> Option<String> {
        let name = self.readiness_collector();
        let Some(h) = self.collectors.iter().find(|h| h.name == name) else {
            return Some(format!("the {} collector does not run", name.as_str()));
        };
        if self.data_at(name).is_none() && h.last_error.is_none() {
            return Some(format!(
                "{} has not been read yet (see the log)",
                what_it_reads(name)
            ));
        }
        self.why_down(h, now).map(|why| {
            format!(
                "the {} collector is down ({} cannot be read or is stale): {why}",
                name.as_str(),
                what_it_reads(name)
            )
        })
    }

    /// [`Snapshot::not_ready`] as a yes/no.
    pub fn ready(&self, now: Instant) -> bool {
        self.not_ready(now).is_none()
    }
}

fn what_it_reads(name: CollectorName) -> &'static str {
    match name {
        CollectorName::Latency => "the OSDs' latency histograms",
        _ => "the cluster status",
    }
}

/// The commands the collectors run.
pub mod commands {
    use crate::ceph::CephCommand;

    pub fn status() -> CephCommand {
        CephCommand::new(["status"])
    }
    pub fn pools() -> CephCommand {
        CephCommand::new(["osd", "pool", "ls", "detail"])
    }
    /// Every PG with its state and acting set, ~110 bytes each (16.2.15): what the PG
    /// collector reads, the undersized ones counted while the reply is read. 64 MiB, the
    /// default reply cap, holds about 500k PGs.
    pub fn pgs_brief() -> CephCommand {
        CephCommand::new(["pg", "dump", "pgs_brief"])
    }
    /// Only the undersized PGs, but with all their stats: ~2.3 KB each (16.2.15), so 100k
    /// undersized PGs answer 223 MiB. Used only when `pg dump` is refused (a cephx user with
    /// `mgr 'allow command "pg ls"'`, the caps documented before `pg dump` was used).
    pub fn undersized_pgs() -> CephCommand {
        CephCommand::new(["pg", "ls", "undersized"])
    }
    /// Only the write-latency histogram: 4.4 KB per OSD instead of 18.7 KB for all of them
    /// (16.2.15), which matters at 1000 OSDs.
    pub fn histograms() -> CephCommand {
        CephCommand::new([
            "tell",
            "osd.*",
            "perf",
            "histogram",
            "dump",
            "osd",
            "op_w_latency_in_bytes_histogram",
        ])
    }
    /// Only the `op_w_latency` counter (writes and their summed latency, the histogram's
    /// `_sum`): 90 bytes per OSD; Ceph 16.2 filters `perf dump` by logger and counter, as it
    /// does `perf histogram dump`.
    pub fn write_latency_sums() -> CephCommand {
        CephCommand::new(["tell", "osd.*", "perf", "dump", "osd", "op_w_latency"])
    }
    pub fn osd_config_get(key: &str) -> CephCommand {
        CephCommand::new(["tell", "osd.*", "config", "get", key])
    }
    pub fn osd_tree() -> CephCommand {
        CephCommand::new(["osd", "tree"])
    }
    /// Read only while OSDs are down but in (see `StatusData::down_in`).
    pub fn osd_dump() -> CephCommand {
        CephCommand::new(["osd", "dump"])
    }
}

/// [`ops::run_parsed`] with the collector's error.
pub(crate) async fn run_parsed<C: Client, T>(
    client: &C,
    command: CephCommand,
    f: impl FnOnce(&[u8]) -> Result<T, ParseError>,
) -> Result<T, CollectError> {
    Ok(ops::run_parsed(client, command, f).await?)
}

/// [`ops::run_tell`] with the collector's error.
pub(crate) async fn run_tell<C: Client, T>(
    client: &C,
    command: CephCommand,
    f: impl Fn(&[u8]) -> Result<T, ParseError>,
) -> Result<(BTreeMap<String, T>, BTreeMap<String, String>), CollectError> {
    Ok(ops::run_tell(client, command, f).await?)
}

/// Settings of the collector task.
#[derive(Debug, Clone, PartialEq)]
pub struct CollectSettings {
    pub interval: Duration,
    pub recovery_window: Duration,
    pub latency_window: Duration,
    /// Status, pools, PGs and schedulers (off in `serve --mode host`).
    pub cluster_state: bool,
    /// The OSDs' write-latency histograms (off with `--latency.source prometheus` in cluster
    /// mode: the per-host exporters publish them).
    pub latency: bool,
    pub grouping: Grouping,
    /// Host mode: the host every local OSD is counted under with `--latency.aggregate host`.
    pub host_name: Option<String>,
}

impl Default for CollectSettings {
    fn default() -> Self {
        Self {
            interval: Duration::from_secs(15),
            recovery_window: Duration::from_secs(300),
            latency_window: Duration::from_secs(300),
            cluster_state: true,
            latency: true,
            grouping: Grouping::Osd,
            host_name: None,
        }
    }
}

impl CollectSettings {
    fn enabled(&self, name: CollectorName) -> bool {
        match name {
            CollectorName::Latency => self.latency,
            _ => self.cluster_state,
        }
    }
}

/// How often the OSD -> host map is read again (new OSDs, moved hosts) with
/// `--latency.aggregate host` in cluster mode.
const HOST_MAP_EVERY_CYCLES: u64 = 20;

/// The collector's state across cycles: windows, counters, last good data.
pub struct Collector<C> {
    client: C,
    settings: CollectSettings,
    recovery: RecoveryWindow,
    latency: LatencyWindow,
    current: Snapshot,
    /// OSDs that did not answer `tell` in the last cycle (to log changes only).
    silent_osds: Vec<String>,
    aggregator: Aggregator,
    sum_aggregator: SumAggregator,
    /// Whether the last cycle read the `op_w_latency` sums (to log changes only).
    sums_ok: Option<bool>,
    /// Whether the last listing of PGs had to fall back to `pg ls undersized` (to log changes
    /// only).
    pgs_fallback: Option<bool>,
    /// `osd.N` -> host, from `ceph osd tree`, and the cycle it was read.
    hosts: BTreeMap<String, String>,
    hosts_read_at: Option<u64>,
}

impl<C: Client> Collector<C> {
    pub fn new(client: C, settings: CollectSettings) -> Self {
        Self {
            recovery: RecoveryWindow::new(settings.recovery_window),
            latency: LatencyWindow::new(settings.latency_window),
            current: Snapshot::empty_for(settings.interval, |n| settings.enabled(n)),
            silent_osds: Vec::new(),
            aggregator: Aggregator::default(),
            sum_aggregator: SumAggregator::default(),
            sums_ok: None,
            pgs_fallback: None,
            hosts: BTreeMap::new(),
            hosts_read_at: None,
            client,
            settings,
        }
    }

    /// Group counters for `--latency.aggregate host|cluster`.
    async fn groups(
        &mut self,
        per_osd: &BTreeMap<String, Histogram>,
        sums: &BTreeMap<String, LatencySum>,
    ) -> Option<(BTreeMap<String, Histogram>, BTreeMap<String, f64>)> {
        let host_of: Box<dyn Fn(&str) -> String> = match self.settings.grouping {
            Grouping::Osd => return None,
            Grouping::Cluster => Box::new(|_| String::new()),
            Grouping::Host => match &self.settings.host_name {
                Some(h) => {
                    let h = h.clone();
                    Box::new(move |_| h.clone())
                }
                None => {
                    let unknown = per_osd.keys().any(|o| !self.hosts.contains_key(o));
                    let due = self.hosts_read_at.is_none_or(|c| {
                        let age = self.current.cycle.saturating_sub(c);
                        age >= HOST_MAP_EVERY_CYCLES || (unknown && age >= 5)
                    });
                    if due {
                        self.hosts_read_at = Some(self.current.cycle);
                        match run_parsed(
                            &self.client,
                            commands::osd_tree(),
                            parse::osd_tree::hosts_of_osds,
                        )
                        .await
                        {
                            Ok(h) => self.hosts = h,
                            Err(e) => {
                                tracing::warn!(error = %e, "cannot read which host each OSD is on; OSDs not yet placed count under host=\"unknown\"")
                            }
                        }
                    }
                    let hosts = self.hosts.clone();
                    Box::new(move |osd| {
                        hosts
                            .get(osd)
                            .cloned()
                            .unwrap_or_else(|| "unknown".to_string())
                    })
                }
            },
        };
        let rejected = self.aggregator.update(per_osd, &host_of);
        if !rejected.is_empty() {
            tracing::warn!(osds = ?rejected, "latency histograms left out of their group (other buckets)");
        }
        self.sum_aggregator.update(sums, &host_of);
        Some((
            self.aggregator.totals().clone(),
            self.sum_aggregator.totals().clone(),
        ))
    }

    /// Says when the PG listing starts or stops falling back to `pg ls undersized`.
    fn note_pgs_fallback(&mut self, refused: Option<CollectError>) {
        match (self.pgs_fallback.replace(refused.is_some()), refused) {
            (Some(true), Some(_)) | (Some(false) | None, None) => {}
            (_, Some(e)) => {
                tracing::warn!(error = %e, "listing undersized PGs with `ceph pg ls undersized` instead of `ceph pg dump pgs_brief`: it answers ~2.3 KB per undersized PG (pgs_brief ~0.1 KB per PG), so with many undersized PGs it passes --ceph.max-reply-bytes and the PG collector fails (too_large) when redundancy is most at risk; grant mgr 'allow command \"pg dump\"' (docs/deployment.md)")
            }
            (Some(true), None) => tracing::info!(
                "`ceph pg dump pgs_brief` is allowed again: undersized PGs are counted from it"
            ),
        }
    }

    fn record(&mut self, name: CollectorName, started: Instant, result: Result<(), CollectError>) {
        let elapsed = started.elapsed();
        let Some(h) = self.current.collectors.iter_mut().find(|h| h.name == name) else {
            return;
        };
        h.last_duration = elapsed;
        match result {
            Ok(()) => {
                h.last_ok = true;
                h.last_error = None;
                h.last_success = Some(SystemTime::now());
            }
            Err(e) => {
                let text = e.to_string();
                // A refusal stays until someone grants the cap: said once (it names the grant),
                // then counted, not repeated every cycle.
                if e.is_permission_denied() && h.last_error.as_ref() == Some(&text) {
                    tracing::debug!(collector = name.as_str(), reason = e.reason(), error = %e, "collection refused again");
                } else {
                    tracing::warn!(collector = name.as_str(), reason = e.reason(), error = %e, "collection failed; keeping the last good data until it is stale");
                }
                h.last_ok = false;
                *h.errors_total.entry(e.reason()).or_insert(0) += 1;
                h.last_error = Some(text);
            }
        }
    }

    /// One collection cycle: returns the new snapshot.
    pub async fn collect_once(&mut self) -> Snapshot {
        let cycle_start = Instant::now();
        self.current.cycle += 1;
        self.current.taken_at = cycle_start;

        let (cluster, latency) = (self.settings.cluster_state, self.settings.latency);
        // Status first: it tells whether listing undersized PGs is needed at all.
        let started = Instant::now();
        let status = if cluster {
            run_parsed(&self.client, commands::status(), parse::status::parse).await
        } else {
            Err(CollectError::Skipped)
        };
        // The listing says which pools the undersized and degraded PGs are in: needed only
        // when the status counts some (a degraded PG of a pool one copy from min_size puts
        // redundancy at risk as much as an undersized one).
        let undersized_hint = match &status {
            Ok(s) => {
                let words = s.pg_state_word_counts();
                ["undersized", "degraded"]
                    .iter()
                    .any(|w| words.get(*w).copied().unwrap_or(0) > 0)
            }
            Err(_) => true,
        };
        let down_in_hint = status.as_ref().is_ok_and(|s| s.osds_down_in() > 0);
        let result = status.map(|s| {
            let now = Instant::now();
            self.recovery.push(
                now.into_std(),
                s.degraded_objects.saturating_add(s.misplaced_objects),
                s.recovering_objects_per_sec,
            );
            self.current.status = Some(Stamped {
                at: now,
                value: StatusData {
                    recovery_rate_delta: self.recovery.rate(),
                    recovery_rates: self.recovery.rates(),
                    down_in: None,
                    status: s,
                },
            });
        });
        self.record(CollectorName::Status, started, result);
        // Which OSDs are down and in, only when some are: `osd dump` is large on a big cluster.
        // An extra, like the latency sums: its failure is said in the report, not a collector's.
        if down_in_hint {
            let down_in = run_parsed(&self.client, commands::osd_dump(), parse::osd_dump::down_in)
                .await
                .map_err(|e| e.to_string());
            if let Some(s) = self.current.status.as_mut() {
                s.value.down_in = Some(down_in);
            }
        }

        let client = &self.client;
        let pgs_fut = async {
            let t = Instant::now();
            if !cluster {
                (t, Err(CollectError::Skipped))
            } else if undersized_hint {
                (t, undersized_pgs(client).await)
            } else {
                // The status counts no PG undersized or degraded: nothing in any pool.
                (t, Ok((parse::pgs::UndersizedPgs::of_every_pg(), None)))
            }
        };
        let ((t_pools, pools), (t_pgs, pgs), (t_lat, hist), (t_sched, sched)) = tokio::join!(
            timed(async {
                if cluster {
                    run_parsed(client, commands::pools(), parse::pools::parse).await
                } else {
                    Err(CollectError::Skipped)
                }
            }),
            pgs_fut,
            timed(async {
                if latency {
                    // Both at once, so that the two reads are milliseconds apart (the counter's
                    // count then equals the histogram's total but for the writes in between).
                    let (hist, sums) = tokio::join!(
                        run_tell(
                            client,
                            commands::histograms(),
                            parse::histogram::parse_write_latency,
                        ),
                        run_tell(
                            client,
                            commands::write_latency_sums(),
                            parse::perf_dump::parse_write_latency_sum,
                        )
                    );
                    hist.map(|h| (h, sums))
                } else {
                    Err(CollectError::Skipped)
                }
            }),
            timed(async {
                if cluster {
                    collect_schedulers(client).await
                } else {
                    Err(CollectError::Skipped)
                }
            }),
        );

        let result = pools.map(|p| {
            self.current.pools = Some(Stamped {
                at: Instant::now(),
                value: p,
            });
        });
        self.record(CollectorName::Pools, t_pools, result);

        let result = pgs.map(|(p, refused)| {
            self.note_pgs_fallback(refused);
            self.current.undersized_pgs = Some(Stamped {
                at: Instant::now(),
                value: p,
            });
        });
        self.record(CollectorName::Pgs, t_pgs, result);

        // The sums are an extra: without them the histograms are still served, only without
        // `_sum` (said in the log when that changes, not every cycle).
        let hist = hist.map(|(h, sums)| {
            let sums = match sums {
                Ok((sums, _)) => {
                    if self.sums_ok == Some(false) {
                        tracing::info!("the OSDs' op_w_latency counters are read again: the latency histograms have _sum again");
                    }
                    self.sums_ok = Some(true);
                    sums
                }
                Err(e) => {
                    if self.sums_ok != Some(false) {
                        tracing::warn!(error = %e, "cannot read the OSDs' op_w_latency counters (perf dump osd op_w_latency): the latency histograms are published with _sum NaN (unknown)");
                    }
                    self.sums_ok = Some(false);
                    BTreeMap::new()
                }
            };
            (h, sums)
        });
        let (groups, group_sums) = match &hist {
            Ok(((per_osd, _), sums)) => match self.groups(per_osd, sums).await {
                Some((g, s)) => (Some(g), Some(s)),
                None => (None, None),
            },
            Err(_) => (None, None),
        };
        let result = hist.map(|((per_osd, missing), sums)| {
            let now = Instant::now();
            // Said when the set of silent OSDs changes, not every cycle.
            let now_missing: Vec<String> = missing.keys().cloned().collect();
            if now_missing != self.silent_osds {
                if now_missing.is_empty() {
                    tracing::info!("every OSD reports its latency histogram again");
                } else {
                    tracing::warn!(osds = ?now_missing, reasons = ?missing, "some OSDs did not report their latency histogram (down?)");
                }
                self.silent_osds = now_missing;
            }
            self.latency.push(now.into_std(), per_osd.clone());
            let quantiles = match self.latency.increase() {
                Ok(Some(inc)) => QUANTILES
                    .iter()
                    .filter_map(|q| crate::latency::quantile(*q, &inc).map(|v| (*q, v)))
                    .collect(),
                Ok(None) => Vec::new(),
                Err(e) => {
                    tracing::warn!(error = %e, "latency histograms of OSDs disagree on their buckets; no quantiles this cycle");
                    Vec::new()
                }
            };
            self.current.latency = Some(Stamped {
                at: now,
                value: LatencyData {
                    per_osd,
                    quantiles,
                    window_span: self.latency.span(),
                    window: self.latency.window(),
                    missing,
                    groups,
                    sums,
                    group_sums,
                },
            });
        });
        self.record(CollectorName::Latency, t_lat, result);

        let result = sched.map(|s| {
            self.current.schedulers = Some(Stamped {
                at: Instant::now(),
                value: s,
            });
        });
        self.record(CollectorName::Scheduler, t_sched, result);

        self.current.cycle_duration = cycle_start.elapsed();
        self.current.clone()
    }

    /// Collects every interval until `shutdown` fires, publishing each snapshot.
    pub async fn run(
        mut self,
        tx: watch::Sender<Arc<Snapshot>>,
        mut shutdown: watch::Receiver<bool>,
    ) {
        let mut ticker = tokio::time::interval(self.settings.interval);
        // A slow cluster delays the next cycle instead of firing a burst of catch-up cycles.
        ticker.set_missed_tick_behavior(MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = ticker.tick() => {}
                _ = shutdown.changed() => break,
            }
            let snapshot = tokio::select! {
                s = self.collect_once() => s,
                _ = shutdown.changed() => break,
            };
            tracing::debug!(cycle = snapshot.cycle, took = ?snapshot.taken_at.elapsed(), "collection cycle done");
            if tx.send(Arc::new(snapshot)).is_err() {
                break;
            }
        }
    }
}

/// The undersized PGs, from `pg dump pgs_brief`; when that is refused (EACCES), from `pg ls
/// undersized`, with the refusal (said in the log).
pub(crate) async fn undersized_pgs<C: Client>(
    client: &C,
) -> Result<(parse::pgs::UndersizedPgs, Option<CollectError>), CollectError> {
    match run_parsed(client, commands::pgs_brief(), parse::pgs::undersized).await {
        Err(refused) if refused.is_permission_denied() => {
            match run_parsed(client, commands::undersized_pgs(), parse_undersized).await {
                Ok(pgs) => Ok((pgs, Some(refused))),
                // Refused too: the cap to grant is the one `pg dump` needs.
                Err(e) if e.is_permission_denied() => Err(refused),
                Err(e) => Err(e),
            }
        }
        other => other.map(|pgs| (pgs, None)),
    }
}

/// `pg ls undersized`: releases before Nautilus print nothing at all when no PG matches.
/// It lists undersized PGs only: the tally says it does not know the degraded ones.
fn parse_undersized(out: &[u8]) -> Result<parse::pgs::UndersizedPgs, ParseError> {
    let mut tally = if out.iter().all(u8::is_ascii_whitespace) {
        parse::pgs::UndersizedPgs::default()
    } else {
        parse::pgs::undersized(out)?
    };
    tally.degraded_by_pool = None;
    Ok(tally)
}

/// Runs a future, returning when it started with its output (for collector durations).
async fn timed<F: std::future::Future>(fut: F) -> (Instant, F::Output) {
    let t = Instant::now();
    (t, fut.await)
}

pub(crate) async fn collect_schedulers<C: Client>(
    client: &C,
) -> Result<BTreeMap<String, OsdScheduler>, CollectError> {
    let (queues, profiles) = tokio::join!(
        run_tell(client, commands::osd_config_get("osd_op_queue"), |b| {
            parse::config_value::parse_tell_config_get(b, "osd_op_queue")
        }),
        run_tell(
            client,
            commands::osd_config_get("osd_mclock_profile"),
            |b| { parse::config_value::parse_tell_config_get(b, "osd_mclock_profile") }
        ),
    );
    let (queues, _) = queues?;
    let mut out: BTreeMap<String, OsdScheduler> = queues
        .into_iter()
        .map(|(osd, q)| {
            (
                osd,
                OsdScheduler {
                    op_queue: Some(q),
                    mclock_profile: None,
                },
            )
        })
        .collect();
    // The profile only means something under mClock; a failure to read it is not fatal.
    if let Ok((profiles, _)) = profiles {
        for (osd, p) in profiles {
            out.entry(osd).or_default().mclock_profile = Some(p);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests;
