//! Turns a [`Snapshot`] into Prometheus metric families. No Ceph calls here: a scrape renders the
//! last snapshot, dropping any family whose data is older than three collection intervals.

pub mod encode;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::UNIX_EPOCH;

use tokio::time::Instant;

use crate::collect::safety::pool_safety;
use crate::collect::{CollectorName, Snapshot};
use crate::enforcer::policy::Mode;
use crate::enforcer::state::Phase;
use crate::enforcer::EnforcerView;
use encode::{EncodeError, Encoder, Family, Format, Kind};

/// PG state words always published (0 when absent) so alerts and dashboards find the series.
pub const PG_STATES: [&str; 14] = [
    "active",
    "clean",
    "undersized",
    "degraded",
    "recovering",
    "recovery_wait",
    "backfilling",
    "backfill_wait",
    "peering",
    "peered",
    "remapped",
    "stale",
    "down",
    "inconsistent",
];

const VERSION: &str = env!("CARGO_PKG_VERSION");

/// Every `reason` of `ceph_recovery_budget_collector_errors_total` (see `CollectError::reason`).
pub const ERROR_REASONS: [&str; 10] = [
    "spawn",
    "timeout",
    "exit_status",
    "permission_denied",
    "too_large",
    "io",
    "connect",
    "unsupported",
    "parse",
    "no_daemon_answered",
];

/// The Ceph backend `serve` runs (`cli` or `librados`), set once at start; process-wide like
/// the version, so that every render shows it without passing it through the snapshot.
static BACKEND: std::sync::OnceLock<&'static str> = std::sync::OnceLock::new();

/// Records the backend for `ceph_recovery_budget_backend_info`; later calls are ignored.
pub fn set_backend(backend: &'static str) {
    let _ = BACKEND.set(backend);
}

/// What the HTTP server turned away, process-wide like the backend (the server counts, every
/// render reads). A `/metrics` body is cached per snapshot, so these show as of the last
/// collection, at most one interval late.
#[derive(Debug, Default)]
pub struct HttpCounters {
    /// Requests answered 503 at once: `--web.max-requests` were already in flight.
    pub rejected_max_requests: AtomicU64,
    /// Requests answered 401: missing or wrong basic-auth credentials.
    pub rejected_unauthorized: AtomicU64,
    /// Requests answered 503 at once: their credentials needed a bcrypt check and the places
    /// to wait for one were all taken.
    pub rejected_auth_queue: AtomicU64,
    /// Connections closed because a request's headers (or the TLS handshake) did not arrive
    /// within `--web.read-header-timeout`.
    pub closed_header_timeout: AtomicU64,
    /// Connections closed after `--web.idle-timeout` without a request.
    pub closed_idle_timeout: AtomicU64,
    /// Connections closed to make room for a new one: all `--web.max-connections` were taken
    /// and this one was waiting (for its headers, or idle).
    pub closed_max_connections: AtomicU64,
    /// Connections whose TLS handshake failed (plain HTTP on the TLS port included).
    pub closed_tls_handshake: AtomicU64,
}

pub static HTTP: HttpCounters = HttpCounters {
    rejected_max_requests: AtomicU64::new(0),
    rejected_unauthorized: AtomicU64::new(0),
    rejected_auth_queue: AtomicU64::new(0),
    closed_header_timeout: AtomicU64::new(0),
    closed_idle_timeout: AtomicU64::new(0),
    closed_max_connections: AtomicU64::new(0),
    closed_tls_handshake: AtomicU64::new(0),
};

fn render_http(enc: &mut Encoder, c: &HttpCounters) {
    let n = |a: &AtomicU64| a.load(Ordering::Relaxed) as f64;
    enc.family(&Family {
        name: "ceph_recovery_budget_http_requests_rejected",
        help: "HTTP requests turned away, by reason: max_requests (503, --web.max-requests in flight), unauthorized (401, basic auth), auth_queue (503, credentials not checked: too many waiting for bcrypt).",
        kind: Kind::Counter,
    });
    enc.sample(&[("reason", "max_requests")], n(&c.rejected_max_requests));
    enc.sample(&[("reason", "unauthorized")], n(&c.rejected_unauthorized));
    enc.sample(&[("reason", "auth_queue")], n(&c.rejected_auth_queue));
    enc.family(&Family {
        name: "ceph_recovery_budget_http_connections_closed",
        help: "HTTP connections the exporter closed, by reason: header_timeout (headers or TLS handshake not in within --web.read-header-timeout), idle_timeout (--web.idle-timeout without a request), max_connections (waiting, and its place taken by a new connection when all --web.max-connections were open), tls_handshake (failed, plain HTTP on the TLS port included).",
        kind: Kind::Counter,
    });
    enc.sample(&[("reason", "header_timeout")], n(&c.closed_header_timeout));
    enc.sample(&[("reason", "idle_timeout")], n(&c.closed_idle_timeout));
    enc.sample(
        &[("reason", "max_connections")],
        n(&c.closed_max_connections),
    );
    enc.sample(&[("reason", "tls_handshake")], n(&c.closed_tls_handshake));
}

fn render_backend(enc: &mut Encoder, backend: Option<&str>) {
    if let Some(b) = backend {
        enc.family(&Family {
            name: "ceph_recovery_budget_backend",
            help: "How the exporter talks to Ceph: the ceph CLI (one process per command) or librados (one connection).",
            kind: Kind::Info,
        });
        enc.sample(&[("backend", b)], 1.0);
    }
}

fn gauge<'a>(name: &'a str, help: &'a str) -> Family<'a> {
    Family {
        name,
        help,
        kind: Kind::Gauge,
    }
}

/// Renders everything the exporter publishes, as of `now`, in `format`.
pub fn render(snapshot: &Snapshot, now: Instant, format: Format) -> Result<Vec<u8>, EncodeError> {
    render_with(snapshot, None, now, format)
}

/// Renders the snapshot and, when the enforcer runs, its state.
pub fn render_with(
    snapshot: &Snapshot,
    enforcer: Option<&EnforcerView>,
    now: Instant,
    format: Format,
) -> Result<Vec<u8>, EncodeError> {
    let mut enc = Encoder::new();
    render_status(&mut enc, snapshot, now);
    render_pools(&mut enc, snapshot, now);
    render_latency(&mut enc, snapshot, now);
    render_scheduler(&mut enc, snapshot, now);
    render_self(&mut enc, snapshot, now);
    if let Some(view) = enforcer {
        render_enforcer(&mut enc, view);
    }
    enc.encode(format)
}

/// What a render depends on besides the snapshot and the enforcer view: which collectors' data is
/// still fresh at `now` (one bit per collector, in [`CollectorName::ALL`] order). Data only ages:
/// a rendered body stays right until this changes, so a cache of bodies keys on it. Every use
/// of `now` in rendering goes through [`Snapshot::fresh`] or [`Snapshot::collector_up`], both
/// decided by this.
pub fn freshness(snapshot: &Snapshot, now: Instant) -> u8 {
    CollectorName::ALL
        .iter()
        .enumerate()
        .fold(0u8, |mask, (i, name)| {
            let fresh = snapshot
                .data_at(*name)
                .is_some_and(|at| now.saturating_duration_since(at) <= snapshot.max_age());
            if fresh {
                mask | (1 << i)
            } else {
                mask
            }
        })
}

/// The enforcer's families alone, encoded as in [`render_with`]'s output (OpenMetrics without
/// `# EOF`): cheap (a few KB), so a cached body can be checked against the view of this very
/// moment.
pub fn render_enforcer_section(
    view: &EnforcerView,
    format: Format,
) -> Result<Vec<u8>, EncodeError> {
    let mut enc = Encoder::new();
    render_enforcer(&mut enc, view);
    enc.encode_part(format)
}

fn flag(b: bool) -> f64 {
    if b {
        1.0
    } else {
        0.0
    }
}

fn render_enforcer(enc: &mut Encoder, v: &EnforcerView) {
    enc.family(&gauge(
        "ceph_recovery_budget_mode",
        "Enforcer mode: 1 for the mode in force (off, observe, enforce).",
    ));
    for m in [Mode::Off, Mode::Observe, Mode::Enforce] {
        enc.sample(&[("mode", m.as_str())], flag(v.mode == m));
    }
    enc.family(&gauge(
        "ceph_recovery_budget_state",
        "Enforcer state: 1 for the current one.",
    ));
    for p in Phase::ALL {
        enc.sample(&[("state", p.as_str())], flag(v.phase == p));
    }
    enc.family(&gauge(
        "ceph_recovery_budget_leader",
        "1 on the instance that holds the enforcer's lease and acts, 0 on a standby (and in observe mode, which changes nothing).",
    ));
    enc.sample(&[], flag(v.leader == Some(true)));
    for (name, help, value) in [
        ("ceph_recovery_budget_baseline_seconds", "Client p99 write latency without recovery that the bound is based on.", v.baseline_seconds),
        ("ceph_recovery_budget_bound_seconds", "Client p99 write latency allowed during recovery (multiplier x baseline).", v.bound_seconds),
        ("ceph_recovery_budget_p99_seconds", "Cluster-wide client p99 write latency over the enforcer's latency window, as the enforcer judges it; absent when the newest collection saw no client write.", v.p99_seconds),
    ] {
        enc.family(&gauge(name, help));
        if let Some(x) = value {
            enc.sample(&[], x);
        }
    }
    enc.family(&gauge(
        "ceph_recovery_budget_baseline_suspect",
        "1 when, with no recovery running, client p99 write has stayed above the bound for the breach duration (`for`): the baseline looks too low (see the decision log's BASELINE_SUSPECT line).",
    ));
    enc.sample(&[], flag(v.baseline_suspect));
    enc.family(&gauge(
        "ceph_recovery_budget_breached",
        "1 while client p99 is above the bound during recovery (bound not suspended).",
    ));
    enc.sample(&[], flag(v.breached));
    enc.family(&gauge(
        "ceph_recovery_budget_breach_seconds",
        "How long the current breach has lasted (0 when none).",
    ));
    enc.sample(&[], v.breach_seconds);
    enc.family(&gauge(
        "ceph_recovery_budget_suspended",
        "1 while the latency bound is suspended because redundancy is at risk.",
    ));
    enc.sample(&[], flag(v.suspended));
    enc.family(&Family {
        name: "ceph_recovery_budget_suspend_reason",
        help: "Why the bound is suspended (undersized or pool_at_min_size); present only while suspended.",
        kind: Kind::Info,
    });
    if let Some(reason) = &v.suspend_reason {
        enc.sample(&[("reason", reason)], 1.0);
    }
    enc.family(&Family {
        name: "ceph_recovery_budget_decisions",
        help: "Decisions logged by the enforcer, by action or event (THROTTLE, SUSPEND, RESUME, RESTORE, BREACH, HOLD, ...); in observe mode the actions it would have taken.",
        kind: Kind::Counter,
    });
    for (action, n) in &v.decisions_total {
        enc.sample(&[("action", action)], *n as f64);
    }
    enc.family(&Family {
        name: "ceph_recovery_budget_action_failures",
        help: "ceph config set/rm commands of the enforcer that failed (each is retried with backoff).",
        kind: Kind::Counter,
    });
    enc.sample(&[], v.action_failures_total as f64);
    enc.family(&gauge(
        "ceph_recovery_budget_profile_not_taken",
        "1 for each OSD that did not take the profile the enforcer set (pinned in its ceph.conf?).",
    ));
    for osd in &v.osds_not_taken {
        let daemon = osd.split_whitespace().next().unwrap_or(osd);
        enc.sample(&[("ceph_daemon", daemon)], 1.0);
    }
    enc.family(&gauge("ceph_recovery_budget_throttle_effective", "After the throttle settled for a latency window: 1 if p99 came back within the bound, 0 if it had no effect."));
    if let Some(e) = v.throttle_effective {
        enc.sample(&[], flag(e));
    }
    enc.family(&gauge(
        "ceph_recovery_budget_next_change_allowed_seconds",
        "Seconds until the change limits allow the enforcer another change.",
    ));
    enc.sample(&[], v.next_change_allowed_in_seconds);
    enc.family(&gauge(
        "ceph_recovery_budget_ladder_rung",
        "Escalation ladder rung the enforcer holds: 0 none, 1 throttle profile, 2 recovery limit, 3 backfill lever, 4 duty-cycled pause (in observe mode: would hold).",
    ));
    enc.sample(&[], f64::from(v.ladder_rung));
    enc.family(&gauge(
        "ceph_recovery_budget_pause_share",
        "Share of each pause period the enforcer pauses recovery with nobackfill+norecover (0 when not on the pause rung).",
    ));
    enc.sample(&[], v.pause_share);
    enc.family(&gauge(
        "ceph_recovery_budget_backfill_limit",
        "The backfill lever's N: at most this many PGs backfill at once, the others held where their data is with pg-upmap-items (0 when the lever is not in force; in observe mode: would be).",
    ));
    enc.sample(&[], v.backfill_limit.unwrap_or(0) as f64);
    enc.family(&gauge(
        "ceph_recovery_budget_backfill_held_pgs",
        "PGs the enforcer holds with pg-upmap-items entries it added (its state lists them; released as N allows, on restore, and on shutdown unless --enforcer.on-exit keep-throttle leaves them to the next instance, which takes them on). Never simulated holds.",
    ));
    enc.sample(&[], v.backfill_held as f64);
    enc.family(&gauge(
        "ceph_recovery_budget_paused",
        "1 while nobackfill+norecover set by the enforcer are in force (in observe mode: would be).",
    ));
    enc.sample(&[], flag(v.paused));
    enc.family(&gauge(
        "ceph_recovery_budget_paused_seconds",
        "Seconds the enforcer has paused recovery in the current recovery (kept after it ends until the next one starts).",
    ));
    enc.sample(&[], v.paused_seconds);
    enc.family(&gauge(
        "ceph_recovery_budget_pause_flag_set",
        "1 for each OSD map flag the enforcer set and has not unset yet (its state file lists them; they are cleared at start and shutdown).",
    ));
    for f in &v.flags_set {
        enc.sample(&[("flag", f)], 1.0);
    }
    enc.family(&gauge(
        "ceph_recovery_budget_unowned_settings",
        "1 for each pause flag (kind=flag) or lever key in the config database (kind=config) found on the cluster that the enforcer has no record of setting, 1 for the mgr balancer off (kind=balancer_off), and the number of PGs with pg_upmap_items entries no record of the backfill lever covers (kind=upmap_items, one series); it never touches them.",
    ));
    for u in &v.unowned {
        // The upmap entries as one count: a balancer keeps hundreds, one series each would not do.
        let value = u.count.map_or(1.0, |n| n as f64);
        enc.sample(
            &[("kind", u.kind.as_str()), ("name", u.name.as_str())],
            value,
        );
    }
}

fn render_status(enc: &mut Encoder, snapshot: &Snapshot, now: Instant) {
    let Some(data) = snapshot.fresh(&snapshot.status, now) else {
        return;
    };
    let s = &data.status;
    for (name, help, value) in [
        (
            "ceph_degraded_objects",
            "Object copies that are degraded (fewer copies than the pool size), from ceph status.",
            s.degraded_objects,
        ),
        (
            "ceph_misplaced_objects",
            "Object copies stored on the wrong OSDs and waiting to be moved, from ceph status.",
            s.misplaced_objects,
        ),
        (
            "ceph_unfound_objects",
            "Objects Ceph cannot find any copy of, from ceph status.",
            s.unfound_objects,
        ),
        ("ceph_pgs", "Placement groups in the cluster.", s.num_pgs),
    ] {
        enc.family(&gauge(name, help));
        enc.sample(&[], value as f64);
    }

    enc.family(&gauge(
        "ceph_recovery_objects_per_second",
        "Recovery rate. method=\"delta\": decrease of degraded+misplaced objects over --recovery.window from the exporter's own samples (0 while counts rise); method=\"ceph\": Ceph's own recovering_objects_per_sec.",
    ));
    if let Some(rate) = data.recovery_rate_delta {
        enc.sample(&[("method", "delta")], rate);
    }
    enc.sample(&[("method", "ceph")], s.recovering_objects_per_sec);

    enc.family(&gauge(
        "ceph_recovery_bytes_per_second",
        "Bytes recovered per second, Ceph's own recovering_bytes_per_sec.",
    ));
    enc.sample(&[], s.recovering_bytes_per_sec);

    enc.family(&gauge(
        "ceph_client_ops_per_second",
        "Client operations per second as Ceph reports them in its status.",
    ));
    enc.sample(&[("direction", "read")], s.read_op_per_sec);
    enc.sample(&[("direction", "write")], s.write_op_per_sec);

    if let Some(health) = s.health.as_deref() {
        enc.family(&gauge(
            "ceph_health_status",
            "Cluster health: 0 = HEALTH_OK, 1 = HEALTH_WARN, 2 = HEALTH_ERR.",
        ));
        let v = match health {
            "HEALTH_OK" => 0.0,
            "HEALTH_WARN" => 1.0,
            _ => 2.0,
        };
        enc.sample(&[], v);
    }
    for (name, help, value) in [
        ("ceph_osds", "OSDs in the OSD map.", s.num_osds),
        ("ceph_osds_up", "OSDs that are up.", s.num_up_osds),
        ("ceph_osds_in", "OSDs that are in.", s.num_in_osds),
    ] {
        if let Some(v) = value {
            enc.family(&gauge(name, help));
            enc.sample(&[], v as f64);
        }
    }

    let mut words: BTreeMap<String, u64> = PG_STATES.iter().map(|w| (w.to_string(), 0)).collect();
    for (word, count) in s.pg_state_word_counts() {
        *words.entry(word).or_insert(0) += count;
    }
    for (word, count) in &words {
        let name = format!("ceph_pg_{}", sanitize(word));
        let help = format!("Placement groups whose state includes \"{word}\" (a PG in several states counts in each).");
        enc.family(&gauge(&name, &help));
        enc.sample(&[], *count as f64);
    }
}

/// Metric-name-safe form of a PG state word.
fn sanitize(word: &str) -> String {
    word.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' {
                c.to_ascii_lowercase()
            } else {
                '_'
            }
        })
        .collect()
}

fn render_pools(enc: &mut Encoder, snapshot: &Snapshot, now: Instant) {
    let Some(pools) = snapshot.fresh(&snapshot.pools, now) else {
        return;
    };
    enc.family(&gauge(
        "ceph_pool_size",
        "Replicas (or k+m shards) each object of the pool should have.",
    ));
    for p in pools {
        enc.sample(&[("pool", &p.name)], f64::from(p.size));
    }
    enc.family(&gauge(
        "ceph_pool_min_size",
        "Copies a PG of the pool needs to serve I/O.",
    ));
    for p in pools {
        enc.sample(&[("pool", &p.name)], f64::from(p.min_size));
    }
    let Some(undersized) = snapshot.fresh(&snapshot.undersized_pgs, now) else {
        return;
    };
    let safety = pool_safety(pools, undersized);
    enc.family(&gauge(
        "ceph_pool_pgs_undersized",
        "PGs of the pool with fewer acting OSDs than the pool size.",
    ));
    for s in &safety {
        enc.sample(&[("pool", &s.pool.name)], s.pgs_undersized as f64);
    }
    enc.family(&gauge(
        "ceph_pool_pgs_at_min_size",
        "PGs of the pool whose acting set has no more members than min_size: one more failure stops their I/O.",
    ));
    for s in &safety {
        enc.sample(&[("pool", &s.pool.name)], s.pgs_at_min_size as f64);
    }
    enc.family(&gauge(
        "ceph_pool_at_min_size",
        "1 when any PG of the pool is at or below min_size, else 0.",
    ));
    for s in &safety {
        enc.sample(
            &[("pool", &s.pool.name)],
            if s.at_min_size() { 1.0 } else { 0.0 },
        );
    }
}

fn render_latency(enc: &mut Encoder, snapshot: &Snapshot, now: Instant) {
    let Some(lat) = snapshot.fresh(&snapshot.latency, now) else {
        return;
    };
    match &lat.groups {
        None => {
            enc.family(&Family {
                name: "ceph_osd_op_w_latency",
                help: "Client write latency in seconds (including queueing) per primary OSD, from osd.op_w_latency_in_bytes_histogram of perf histogram dump (Ceph's log2 buckets; counters restart when the OSD restarts); _sum from the osd.op_w_latency counter of perf dump (same writes).",
                kind: Kind::Histogram,
            });
            for (osd, h) in &lat.per_osd {
                let sum = lat.sums.get(osd).map(|s| s.seconds);
                enc.histogram(&[("ceph_daemon", osd)], &h.bounds, &h.cumulative(), sum);
            }
        }
        Some(groups) => {
            enc.family(&Family {
                name: "ceph_osd_op_w_latency",
                help: "Client write latency in seconds (including queueing) of the primary OSDs of a host (label host) or of the whole cluster (no label), --latency.aggregate: counters kept by the exporter from each OSD's increase (an OSD restart is not a reset; the exporter's restart is); _sum from the OSDs' op_w_latency counters, kept the same way.",
                kind: Kind::Histogram,
            });
            for (group, h) in groups {
                // The cluster group has no name: no label at all.
                let labels: &[(&str, &str)] = if group.is_empty() {
                    &[]
                } else {
                    &[("host", group)]
                };
                let sum = lat.group_sums.as_ref().and_then(|g| g.get(group)).copied();
                enc.histogram(labels, &h.bounds, &h.cumulative(), sum);
            }
        }
    }
    // Untyped: quantiles without _sum/_count (see Kind::Untyped); promtool rejects a
    // `quantile` label on a gauge.
    enc.family(&Family {
        name: "ceph_client_write_latency_seconds",
        help: "Cluster-wide client write latency quantiles over --latency.window, interpolated like histogram_quantile over the increase of ceph_osd_op_w_latency_bucket. Absent when no write happened in the window.",
        kind: Kind::Untyped,
    });
    for (q, v) in &lat.quantiles {
        enc.sample(&[("quantile", &q.to_string())], *v);
    }
}

fn render_scheduler(enc: &mut Encoder, snapshot: &Snapshot, now: Instant) {
    let Some(scheds) = snapshot.fresh(&snapshot.schedulers, now) else {
        return;
    };
    enc.family(&Family {
        name: "ceph_osd_op_queue",
        help: "The op queue (scheduler) each OSD runs, as the daemon reports it (osd_op_queue; read at OSD start).",
        kind: Kind::Info,
    });
    for (osd, s) in scheds {
        if let Some(q) = &s.op_queue {
            enc.sample(&[("ceph_daemon", osd), ("queue", q)], 1.0);
        }
    }
    enc.family(&Family {
        name: "ceph_osd_mclock_profile",
        help: "The mClock profile each OSD really runs, as the daemon reports it (a value pinned in its ceph.conf wins over ceph config set).",
        kind: Kind::Info,
    });
    for (osd, s) in scheds {
        if let Some(p) = &s.mclock_profile {
            enc.sample(&[("ceph_daemon", osd), ("profile", p)], 1.0);
        }
    }
}

fn render_self(enc: &mut Encoder, snapshot: &Snapshot, now: Instant) {
    enc.family(&gauge("ceph_recovery_budget_collector_up", "1 when the collector's last run succeeded and its data is fresh (younger than 3 intervals)."));
    for h in &snapshot.collectors {
        let up = snapshot.collector_up(h, now);
        enc.sample(
            &[("collector", h.name.as_str())],
            if up { 1.0 } else { 0.0 },
        );
    }
    enc.family(&Family {
        name: "ceph_recovery_budget_collector_duration_seconds",
        help: "How long the collector's last run took.",
        kind: Kind::Gauge,
    });
    for h in &snapshot.collectors {
        if snapshot.cycle > 0 {
            enc.sample(
                &[("collector", h.name.as_str())],
                h.last_duration.as_secs_f64(),
            );
        }
    }
    // Cycles and their duration: what a collection costs, for capacity planning and bench-lab.
    enc.family(&Family {
        name: "ceph_recovery_budget_collection_cycles",
        help: "Collection cycles completed since the exporter started.",
        kind: Kind::Counter,
    });
    enc.sample(&[], snapshot.cycle as f64);
    enc.family(&gauge(
        "ceph_recovery_budget_cycle_duration_seconds",
        "How long the last complete collection cycle took (all collectors, run concurrently after the status).",
    ));
    if snapshot.cycle > 0 {
        enc.sample(&[], snapshot.cycle_duration.as_secs_f64());
    }
    enc.family(&Family {
        name: "ceph_recovery_budget_collector_errors",
        help: "Failed collector runs since the exporter started, by reason (spawn, timeout, exit_status, io, connect, unsupported, parse, no_daemon_answered).",
        kind: Kind::Counter,
    });
    for h in &snapshot.collectors {
        // Every reason from the start at 0, so that increase() sees the first failure.
        for reason in ERROR_REASONS {
            let n = h.errors_total.get(reason).copied().unwrap_or(0);
            enc.sample(
                &[("collector", h.name.as_str()), ("reason", reason)],
                n as f64,
            );
        }
    }
    enc.family(&gauge(
        "ceph_recovery_budget_last_success_timestamp_seconds",
        "Unix time of the collector's last successful run.",
    ));
    for h in &snapshot.collectors {
        if let Some(t) = h
            .last_success
            .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
        {
            enc.sample(&[("collector", h.name.as_str())], t.as_secs_f64());
        }
    }
    enc.family(&Family {
        name: "ceph_recovery_budget_build",
        help: "Version of ceph-recovery-budget.",
        kind: Kind::Info,
    });
    enc.sample(&[("version", VERSION)], 1.0);
    render_backend(enc, BACKEND.get().copied());
    render_http(enc, &HTTP);
}

#[cfg(test)]
mod backend_tests {
    use super::*;

    #[test]
    fn backend_info_is_one_sample_naming_the_backend() {
        for (format, type_line) in [
            (
                Format::Text004,
                "# TYPE ceph_recovery_budget_backend_info gauge\n",
            ),
            (
                Format::OpenMetrics100,
                "# TYPE ceph_recovery_budget_backend info\n",
            ),
        ] {
            let mut enc = Encoder::new();
            render_backend(&mut enc, Some("librados"));
            let text = String::from_utf8(enc.encode(format).unwrap()).unwrap();
            assert!(text.contains(type_line), "{text}");
            assert!(
                text.contains("\nceph_recovery_budget_backend_info{backend=\"librados\"} 1\n"),
                "{text}"
            );
        }
        // Not set (tests, other tools): nothing rendered.
        let mut enc = Encoder::new();
        render_backend(&mut enc, None);
        assert!(enc.encode(Format::Text004).unwrap().is_empty());
    }
}

#[cfg(test)]
mod backfill_lever_tests {
    use super::*;
    use crate::enforcer::Policy;

    #[test]
    fn the_backfill_levers_n_and_held_pgs_are_gauges() {
        let mut v = EnforcerView::new(&Policy::default());
        let text = |v: &EnforcerView| {
            String::from_utf8(render_enforcer_section(v, Format::Text004).unwrap()).unwrap()
        };
        let off = text(&v);
        assert!(
            off.contains("\nceph_recovery_budget_backfill_limit 0\n"),
            "{off}"
        );
        assert!(
            off.contains("\nceph_recovery_budget_backfill_held_pgs 0\n"),
            "{off}"
        );
        v.backfill_limit = Some(2);
        v.backfill_held = 17;
        let on = text(&v);
        assert!(
            on.contains("\nceph_recovery_budget_backfill_limit 2\n"),
            "{on}"
        );
        assert!(
            on.contains("\nceph_recovery_budget_backfill_held_pgs 17\n"),
            "{on}"
        );
    }
}
