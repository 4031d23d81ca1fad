//! Every setting of `serve`, declared once: flag (name, help, default), config-file key,
//! default, field check and documentation come from the one list below (see
//! [`declare_settings!`](macros)). Flags and file are parsed into plain data ([`Flags`],
//! [`FileConfig`]), merged flag > file > default with the origin of each value ([`Merged`]),
//! then `config::Settings::resolve` checks what involves several settings and builds the
//! running parts.
//!
//! Adding a setting: one entry here, and its use (`config::Settings::resolve` takes each value
//! from `Merged`, checked, and builds the running settings and the enforcer's `Policy`).

#[macro_use]
mod macros;
pub mod docs;
pub mod values;

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_saphyr::Spanned;

use crate::ceph::any::{BackendChoice, LIBRADOS_BUILT};
use crate::enforcer::levels::controller::MaxSlowdown;
use crate::enforcer::levels::list::Ceiling;
use crate::enforcer::pause::PausePolicy;
use crate::enforcer::policy::{
    BaselineSpec, Controller, LadderPolicy, Mode, OnExit, OnOff, Policy, SuspendWhen,
    MCLOCK_PROFILES,
};
use crate::latency::aggregate::Grouping;
use crate::lease::LeaseConfig;

pub use values::{
    parse_levers, ByteSize, HumanDuration, LatencySource, ListenAddress, LogFormat, LogLevel,
    RecoveryLimits, ServeMode,
};

/// Flags that are not settings of the file: `--config.file` names the file itself.
pub const FLAG_ONLY: &[&str] = &["config.file"];
/// Keys of the file that have no flag: none today.
pub const FILE_ONLY: &[&str] = &[];

declare_settings! {
    (web: WebFile) heading "" {
        listen_address: ListenAddress {
            flag: "web.listen-address",
            key: "listen_address",
            value_name: "HOST:PORT",
            help: "Address to listen on for HTTP",
            default(ListenAddress(std::net::SocketAddr::from(([0, 0, 0, 0], 9939))) => "0.0.0.0:9939"),
            note: "`host:port` or `:port`; not 9283, 9926 or 9128, so it runs beside the other Ceph exporters",
        }
        telemetry_path: String {
            flag: "web.telemetry-path",
            key: "telemetry_path",
            value_name: "PATH",
            help: "Path under which to expose metrics",
            default(String::from("/metrics") => "/metrics"),
            check: check_telemetry_path,
            note: "not `/`, `/decisions` or under `/-/`",
        }
        web_config_file: PathBuf {
            flag: "web.config.file",
            key: "config_file",
            value_name: "FILE",
            help: "Web config file (Prometheus exporter-toolkit format): TLS and basic auth; re-read when it or a file it names changes",
            default(unset),
            note: "TLS and basic auth: see [security.md](security.md)",
        }
        web_max_requests: u32 {
            flag: "web.max-requests",
            key: "max_requests",
            value_name: "N",
            help: "Requests in flight at once (health probes aside); more are answered 503 at once. 0: no limit",
            default(40 => "40"),
            note: "0: no limit",
        }
        web_max_connections: u32 {
            flag: "web.max-connections",
            key: "max_connections",
            value_name: "N",
            help: "Open HTTP connections at once; more wait in the listen backlog until one closes",
            default(128 => "128"),
            check: check_max_connections,
            note: "at least 1",
        }
        web_read_header_timeout: HumanDuration {
            flag: "web.read-header-timeout",
            key: "read_header_timeout",
            value_name: "DURATION",
            help: "How long a request's headers (and a new connection's TLS handshake) may take to arrive",
            default(HumanDuration(Duration::from_secs(10)) => "10s"),
            check: check_web_timeout,
            note: "above 0",
        }
        web_idle_timeout: HumanDuration {
            flag: "web.idle-timeout",
            key: "idle_timeout",
            value_name: "DURATION",
            help: "How long a keep-alive connection may wait for its next request; keep it above the scrape interval",
            default(HumanDuration(Duration::from_secs(120)) => "2m"),
            check: check_web_timeout,
            note: "above 0; above the scrape interval",
        }
    }
    (ceph: CephFile) heading "" {
        ceph_cmd: String {
            flag: "ceph-cmd",
            key: "cmd",
            value_name: "COMMAND",
            help: "The ceph CLI, split like shell words and run without a shell, e.g. \"cephadm shell -- ceph\" or \"kubectl -n rook-ceph exec deploy/rook-ceph-tools -- ceph\"",
            default(String::from("ceph") => "ceph"),
            check: check_ceph_cmd,
            note: "shell-like words, run without a shell",
        }
        ceph_conf: String {
            flag: "ceph-conf",
            key: "conf",
            value_name: "FILE",
            help: "ceph.conf to pass to every ceph call (--conf)",
            default(unset),
            note: "passed to every call",
        }
        ceph_name: String {
            flag: "ceph-name",
            key: "name",
            value_name: "NAME",
            help: "Ceph user to connect as (--name), e.g. client.recovery-budget",
            default(unset),
            note: "passed to every call",
        }
        ceph_keyring: String {
            flag: "ceph-keyring",
            key: "keyring",
            value_name: "FILE",
            help: "Keyring of that user (--keyring)",
            default(unset),
            note: "passed to every call",
        }
        ceph_timeout: HumanDuration {
            flag: "ceph-timeout",
            key: "timeout",
            value_name: "DURATION",
            help: "Timeout of each ceph call; the process (and its children) is killed after it",
            default(HumanDuration(Duration::from_secs(10)) => "10s"),
            check: check_ceph_timeout,
            note: "per call; the process group is killed after it",
        }
        ceph_max_reply_bytes: ByteSize {
            flag: "ceph.max-reply-bytes",
            key: "max_reply_bytes",
            value_name: "BYTES",
            help: "The largest reply read from one ceph command; a command answering more is stopped and counted as reason=\"too_large\" (keeps memory bounded when the cluster is at its worst and answers the most)",
            default(ByteSize(crate::ceph::DEFAULT_MAX_REPLY_BYTES) => "64MiB"),
            check: check_max_reply_bytes,
            note: "at least 1MiB; KiB, MiB, GiB or bytes",
        }
        ceph_backend: BackendChoice {
            flag: "ceph.backend",
            key: "backend",
            value_name: "BACKEND",
            help: "How to talk to Ceph: cli (the ceph CLI, one process per command), librados (one connection held; needs a build with the librados feature), or auto (librados when built with it, --ceph-cmd is plain `ceph` and it connects at start; cli otherwise)",
            default(BackendChoice::Auto => "auto"),
            check: check_ceph_backend,
            note: "`cli`, `librados` or `auto`: see [Ceph backends](#ceph-backends)",
        }
    }
    (collect: CollectFile) heading "" {
        collect_interval: HumanDuration {
            flag: "collect.interval",
            key: "interval",
            value_name: "DURATION",
            help: "How often to collect from the cluster",
            default(HumanDuration(Duration::from_secs(15)) => "15s"),
            check: check_collect_interval,
            note: "at least 1s",
        }
    }
    (recovery: RecoveryFile) heading "" {
        recovery_window: HumanDuration {
            flag: "recovery.window",
            key: "window",
            value_name: "DURATION",
            help: "Window of the exporter's own recovery rate (method=\"delta\")",
            default(HumanDuration(Duration::from_secs(300)) => "5m"),
            note: "at least two intervals",
        }
    }
    (latency: LatencyFile) heading "" {
        latency_window: HumanDuration {
            flag: "latency.window",
            key: "window",
            value_name: "DURATION",
            help: "Window of the client write latency quantiles",
            default(HumanDuration(Duration::from_secs(300)) => "5m"),
            note: "at least two intervals",
        }
        latency_aggregate: Grouping {
            flag: "latency.aggregate",
            key: "aggregate",
            value_name: "osd|host|cluster",
            help: "Publish the write-latency histogram per osd (33 series each), per host (33 per host) or for the whole cluster (33)",
            default(Grouping::Osd => "osd"),
            note: "`osd`, `host` or `cluster`",
        }
        latency_source: LatencySource {
            flag: "latency.source",
            key: "source",
            value_name: "SOURCE",
            help: "Where the enforcer's p99 comes from: collect (the histograms this exporter reads) or prometheus (a query over what host-mode exporters publish; this exporter then reads none)",
            default(LatencySource::Collect => "collect"),
            note: "`collect` or `prometheus`",
        }
    }
    (log: LogFile) heading "" {
        log_level: LogLevel {
            flag: "log.level",
            key: "level",
            value_name: "LEVEL",
            help: "Log filter: error, warn, info, debug, trace (or a tracing directive)",
            default(LogLevel(String::from("info")) => "info"),
            note: "or a tracing directive",
        }
        log_format: LogFormat {
            flag: "log.format",
            key: "format",
            value_name: "FORMAT",
            help: "Log format",
            default(LogFormat::Text => "text"),
            note: "`text` or `json`",
        }
    }
    (enforcer: EnforcerFile) heading "Enforcer" {
        enforcer_mode: Mode {
            flag: "enforcer.mode",
            key: "mode",
            value_name: "MODE",
            help: "off: no enforcer; observe: decide and log \"would ...\" without changing anything; enforce: act",
            default(Policy::default().mode => "observe"),
            note: "`off`, `observe`, `enforce`",
        }
        baseline: BaselineSpec {
            flag: "enforcer.baseline",
            key: "baseline",
            value_name: "BASELINE",
            help: "Client p99 write latency without recovery: a duration (16ms), `learned`, or `fio:FILE` (a fio report)",
            default(Policy::default().baseline => "learned"),
            note: "`16ms`, `learned`, or `fio:FILE`",
        }
        learn_window: HumanDuration {
            flag: "enforcer.learn-window",
            key: "learn_window",
            value_name: "DURATION",
            help: "With `learned`: how long of writes without recovery make a baseline",
            default(HumanDuration(Policy::default().learn_window) => "1h"),
            note: "at least the enforcer's latency window",
        }
        multiplier: f64 {
            flag: "enforcer.multiplier",
            key: "multiplier",
            value_name: "X",
            help: "Bound = multiplier x baseline",
            default(Policy::default().multiplier => "2.0"),
            check: check_multiplier,
            note: "1.0 to 100",
        }
        breach_for: HumanDuration {
            flag: "enforcer.for",
            key: "for",
            value_name: "DURATION",
            help: "How long p99 must stay above the bound during recovery before acting",
            default(HumanDuration(Policy::default().breach_for) => "30s"),
            note: "",
        }
        enforcer_latency_window: HumanDuration {
            flag: "enforcer.latency-window",
            key: "latency_window",
            value_name: "DURATION",
            help: "Window of the p99 the enforcer judges",
            default(HumanDuration(Policy::default().latency_window) => "1m"),
            note: "at least two intervals",
        }
        suspend_when: SuspendWhen {
            flag: "enforcer.suspend-when",
            key: "suspend_when",
            value_name: "WHEN",
            help: "When the bound is lifted: redundancy_at_risk (some object at min_size copies or fewer, or a PG that cannot serve I/O), or the narrower any_undersized or pool_at_min_size",
            default(Policy::default().suspend_when => "redundancy_at_risk"),
            note: "or the narrower `any_undersized`, `pool_at_min_size` ([enforcer.md](enforcer.md#redundancy-at-risk))",
        }
        throttle_profile: String {
            flag: "enforcer.throttle-profile",
            key: "throttle_profile",
            value_name: "PROFILE",
            help: "mClock profile that slows recovery",
            default(Policy::default().throttle_profile => "high_client_ops"),
            check: check_mclock_profile,
            note: "",
        }
        suspend_profile: String {
            flag: "enforcer.suspend-profile",
            key: "suspend_profile",
            value_name: "PROFILE",
            help: "mClock profile while redundancy is at risk",
            default(Policy::default().suspend_profile => "high_recovery_ops"),
            check: check_mclock_profile,
            note: "",
        }
        wpq_levers: BTreeMap<String, String> {
            flag: "enforcer.wpq-levers",
            key: "wpq_levers",
            value_name: "KEY=VALUE,...",
            help: "Settings used instead of a profile when the OSDs do not run mClock, as KEY=VALUE,...",
            default(Policy::default().wpq_levers => "osd_max_backfills=1,osd_recovery_sleep_hdd=0.1"),
            check: check_wpq_levers,
            clap(value_parser = parse_levers),
            note: "used instead of a profile when OSDs do not run mClock; in the file a map, `osd_max_backfills: \"1\"`",
        }
        settle: HumanDuration {
            flag: "enforcer.settle",
            key: "settle",
            value_name: "DURATION",
            help: "How long recovery must stay finished before restoring the original settings",
            default(HumanDuration(Policy::default().settle) => "5m"),
            note: "",
        }
        min_interval: HumanDuration {
            flag: "enforcer.min-interval",
            key: "min_interval",
            value_name: "DURATION",
            help: "Minimum time between two changes",
            default(HumanDuration(Policy::default().min_interval) => "1m"),
            check: check_min_interval,
            note: "at most 1h",
        }
        max_changes_per_hour: u32 {
            flag: "enforcer.max-changes-per-hour",
            key: "max_changes_per_hour",
            value_name: "N",
            help: "Maximum changes per hour",
            default(Policy::default().max_changes_per_hour => "6"),
            check: check_max_changes_per_hour,
            note: "at least 1",
        }
        verify_after: HumanDuration {
            flag: "enforcer.verify-after",
            key: "verify_after",
            value_name: "DURATION",
            help: "How long OSDs get to take a profile before one that did not is reported",
            default(HumanDuration(Policy::default().verify_after) => "30s"),
            note: "at least one interval",
        }
        state_file: PathBuf {
            flag: "enforcer.state-file",
            key: "state_file",
            value_name: "FILE",
            help: "Where the enforcer keeps the operator's original settings (written atomically)",
            default(Policy::default().state_file => "/var/lib/ceph-recovery-budget/enforcer-state.json"),
            note: "",
        }
        lease_pool: String {
            flag: "enforcer.lease-pool",
            key: "lease_pool",
            value_name: "POOL",
            help: "Enforce mode: the pool of the lease object `ceph-recovery-budget.lease` (one active enforcer per cluster; it holds the enforcer's state too). Unset: `.mgr`, else `device_health_metrics`, the mgr's own small replicated pool that every cluster with a mgr has",
            default(unset),
            note: "the cephx user needs `osd 'allow rwx pool=POOL object_prefix ceph-recovery-budget'`",
        }
        lease_duration: HumanDuration {
            flag: "enforcer.lease-duration",
            key: "lease_duration",
            value_name: "DURATION",
            help: "How long the lease lives in the cluster after its holder last renewed it: a standby takes over at most this long (plus a retry period) after the leader died",
            default(HumanDuration(LeaseConfig::DEFAULT.lease_duration) => "40s"),
            note: "longer than the renew deadline",
        }
        lease_renew_deadline: HumanDuration {
            flag: "enforcer.lease-renew-deadline",
            key: "lease_renew_deadline",
            value_name: "DURATION",
            help: "A leader that has not renewed the lease for this long stops changing the cluster, before the lease can expire and another instance take over",
            default(HumanDuration(LeaseConfig::DEFAULT.renew_deadline) => "25s"),
            note: "shorter than the lease duration, longer than the retry period; enforce mode: the lease duration minus it at least the ceph timeout + 2s",
        }
        lease_retry_period: HumanDuration {
            flag: "enforcer.lease-retry-period",
            key: "lease_retry_period",
            value_name: "DURATION",
            help: "How often the leader renews the lease and a standby tries to take it",
            default(HumanDuration(LeaseConfig::DEFAULT.retry_period) => "5s"),
            note: "shorter than the renew deadline",
        }
        controller: Controller {
            flag: "enforcer.controller",
            key: "controller",
            value_name: "ladder|levels",
            help: "What moves recovery while it runs: ladder (throttle profile on a breach, then recovery limit, backfill lever, pause) or levels (one position on an ordered list of levels from --enforcer.max-level down to the pause, moved both ways by each latency window's p99: slower over the aim, faster under it)",
            default(LadderPolicy::default().controller => "ladder"),
            note: "`levels` also spends the budget on recovery speed, up to `--enforcer.max-level`",
        }
        max_level: Ceiling {
            flag: "enforcer.max-level",
            key: "max_level",
            value_name: "LEVEL",
            help: "With --enforcer.controller levels, the fastest recovery it may set while p99 has room: operator (never faster than the operator's own settings), high_recovery_ops (that profile, the release's backfills), or backfills:N (high_recovery_ops with osd_max_backfills raised up to N with osd_mclock_override_recovery_settings, on Quincy 17.2.6 and later)",
            default(LadderPolicy::default().max_level => "high_recovery_ops"),
            note: "`operator`, `high_recovery_ops` or `backfills:N` (N 2 to 16); all go back when recovery ends",
        }
        max_slowdown: MaxSlowdown {
            flag: "enforcer.max-slowdown",
            key: "max_slowdown",
            value_name: "MULTIPLE|off",
            help: "With --enforcer.controller levels, the most a recovery may be slowed, as a multiple of how long it would take at the operator's settings (from the best recovery rate Ceph reports while they or slower levels are in force): a level too slow for the objects left to end in time is left upwards whatever p99 says, and once the time is spent the operator's settings stay until the recovery ends; off: the bound whatever the time",
            default(LadderPolicy::default().max_slowdown => "3x"),
            note: "above 1, at most 100 (3 or 3x), or off",
        }
        max_rung: u8 {
            flag: "enforcer.max-rung",
            key: "max_rung",
            value_name: "N",
            help: "Highest rung of the escalation ladder: 1 throttle profile only, 2 + recovery limit, 3 + backfill lever (at most N PGs backfill at once, the others held with pg-upmap-items), 4 + duty-cycled nobackfill/norecover pause",
            default(LadderPolicy::default().max_rung => "4"),
            check: check_max_rung,
            note: "1, 2, 3 or 4",
        }
        backfill_lever: OnOff {
            flag: "enforcer.backfill-lever",
            key: "backfill_lever",
            value_name: "on|off",
            help: "Rung 3, the backfill lever: limit how many PGs backfill at once by holding the others where their data is (pg-upmap-items), N driven by client p99; off: rung 3 is skipped (said in a LADDER_SKIP line) and the pause follows rung 2",
            default(OnOff::from_bool(LadderPolicy::default().backfill_lever) => "on"),
            note: "needs require_min_compat_client luminous or later",
        }
        backfill_ops_per_pg: u32 {
            flag: "enforcer.backfill-ops-per-pg",
            key: "backfill_ops_per_pg",
            value_name: "N",
            help: "Rung 3's first raise: once the N PGs backfilling at once hold the bound, each may start this many recovery ops at once (ceph config set osd osd_recovery_max_single_start N) before N is raised; put back to the operator's value before N = 1 is left for the pause and when the lever ends; 1, or not above the operator's value: no such step",
            default(LadderPolicy::default().ops_per_pg => "4"),
            check: check_ops_per_pg,
            note: "1 to 16; counts against the change limits, its way back does not",
        }
        ladder_settle: HumanDuration {
            flag: "enforcer.ladder-settle",
            key: "ladder_settle",
            value_name: "DURATION",
            help: "How long a rung is held before its effect on p99 is judged (at least the latency window)",
            default(HumanDuration(LadderPolicy::default().settle) => "1m"),
            note: "at least the enforcer's latency window",
        }
        recovery_limits: RecoveryLimits {
            flag: "enforcer.recovery-limits",
            key: "recovery_limits",
            value_name: "LIMIT,...",
            help: "Rung 2 under mClock: custom profile with the background limits at each of these in turn, in the unit the OSDs read: IOPS per OSD on Pacific (1000,300,100: the recovery limit), percent of each OSD's capacity on Quincy 17.2.6+ (5%,3%: the recovery and backfill limits); none (default): no limit rung",
            default(RecoveryLimits(LadderPolicy::default().recovery_limits) => "none"),
            check: check_recovery_limits,
            note: "each lower than the one before, all IOPS (Pacific) or all percentages (5%,3%: Quincy 17.2.6+), or none; in the file a list",
        }
        recovery_sleeps: Vec<f64> {
            flag: "enforcer.recovery-sleeps",
            key: "recovery_sleeps",
            value_name: "SECONDS,...",
            help: "Rung 2 on wpq: osd_recovery_sleep (seconds) at each of these in turn, with osd_recovery_max_active 1",
            default(LadderPolicy::default().recovery_sleeps => "0.2,0.5,1"),
            check: check_recovery_sleeps,
            clap(value_delimiter = ','),
            note: "each longer than the one before, at most 10; in the file a list",
        }
        descend_below: f64 {
            flag: "enforcer.descend-below",
            key: "descend_below",
            value_name: "FRACTION",
            help: "A rung comes off when p99 stays below this fraction of the bound for the ladder's settle time",
            default(LadderPolicy::default().descend_below => "0.7"),
            check: check_descend_below,
            note: "between 0 and 1",
        }
        aim: f64 {
            flag: "enforcer.aim",
            key: "aim",
            value_name: "FRACTION",
            help: "Once the ladder acts, it steers client p99 to this fraction of the bound: a rung, backfill N or pause share that leaves p99 above it is not enough (the OSDs' op_w_latency misses the client's network and queue time: 5-15% below fio's p99 on the lab). Under --enforcer.controller levels the default is 0.8, where the matrix's client windows held the bound nine in ten",
            default(LadderPolicy::default().aim => "0.9"),
            check: check_aim,
            note: "above descend_below, at most 1; 0.8 when not given under --enforcer.controller levels",
        }
        memory: OnOff {
            flag: "enforcer.memory",
            key: "memory",
            value_name: "on|off",
            help: "What the enforcer learned about this cluster (a lever that made p99 worse, the rung, N or share that held the bound in the last recovery), kept in the lease object: on = used and updated; off = each recovery starts from the breach alone and the memory is left as it was (`experiment` runs each enforced row so, to compare rows)",
            default(OnOff::On => "on"),
            note: "",
        }
        pause_period: HumanDuration {
            flag: "enforcer.pause-period",
            key: "pause_period",
            value_name: "DURATION",
            help: "Rung 4: one pause on/off cycle",
            default(HumanDuration(Duration::from_secs_f64(PausePolicy::default().period)) => "1m"),
            note: "at least four intervals",
        }
        pause_max_share: f64 {
            flag: "enforcer.pause-max-share",
            key: "pause_max_share",
            value_name: "FRACTION",
            help: "Rung 4: never pause more than this share of each period, so recovery progresses",
            default(PausePolicy::default().max_share => "0.8"),
            check: check_pause_max_share,
            note: "above 0, at most 0.9",
        }
        pause_max_total: HumanDuration {
            flag: "enforcer.pause-max-total",
            key: "pause_max_total",
            value_name: "DURATION",
            help: "Rung 4: at most this much pause in one recovery",
            default(HumanDuration(Duration::from_secs_f64(PausePolicy::default().max_total)) => "30m"),
            note: "",
        }
        on_exit: OnExit {
            flag: "enforcer.on-exit",
            key: "on_exit",
            value_name: "WHAT",
            help: "On SIGTERM/SIGINT in enforce mode: restore (pause flags, rung-2 limits, then the profile back to the operator's; a stopped enforcer watches neither p99 nor redundancy) or keep-throttle (the rung-1 throttle and the backfill lever's held PGs stay, for a rolling restart where another instance takes them on at once)",
            default(Policy::default().on_exit => "restore"),
            note: "or `keep-throttle`",
        }
        exit_timeout: HumanDuration {
            flag: "enforcer.exit-timeout",
            key: "exit_timeout",
            value_name: "DURATION",
            help: "How long a clean exit may take to hand everything back; what is not back by then is logged with the commands to run by hand. Keep it below the pod's terminationGracePeriodSeconds",
            default(HumanDuration(Policy::default().exit_timeout) => "20s"),
            check: check_exit_timeout,
            note: "1s to 5m; below terminationGracePeriodSeconds",
        }
        blind_restore_after: HumanDuration {
            flag: "enforcer.blind-restore-after",
            key: "blind_restore_after",
            value_name: "DURATION",
            help: "When the enforcer has had no fresh data this long (a collector down, Ceph or Prometheus not answering), it restores the operator's settings it holds (profile, recovery limits, wpq levers), as the mgr prometheus module fails open on a stale cache; it judges afresh once it can see again",
            default(HumanDuration(Policy::default().blind_restore_after) => "3m"),
            note: "at least two intervals",
        }
    }
    (root) heading "" {
        mode: ServeMode {
            flag: "mode",
            key: "mode",
            value_name: "MODE",
            help: "cluster: cluster state and (through the monitors) every OSD's histogram, enforcer here; host: only this host's OSD histograms, from their admin sockets (one exporter per OSD host)",
            default(ServeMode::Cluster => "cluster"),
            note: "`cluster` or `host`",
        }
    }
    (host: HostFile) heading "" {
        host_asok_dir: PathBuf {
            flag: "host.asok-dir",
            key: "asok_dir",
            value_name: "DIR",
            help: "Host mode: the directory of the local OSDs' admin sockets",
            default(PathBuf::from(crate::ceph::admin_socket::DEFAULT_DIR) => "/var/run/ceph"),
            note: "host mode",
        }
        host_name: String {
            flag: "host.name",
            key: "name",
            value_name: "NAME",
            help: "Host mode: the host label with --latency.aggregate host",
            default(computed "this machine's hostname"),
            note: "host mode",
        }
    }
    (prometheus: PrometheusFile) heading "" {
        prometheus_url: String {
            flag: "prometheus.url",
            key: "url",
            value_name: "URL",
            help: "Prometheus to ask with --latency.source prometheus, e.g. http://prometheus:9090 (a path prefix is kept: http://mon1/prometheus behind a proxy or --web.route-prefix; https:// trusts the system's CAs)",
            default(unset),
            check: check_prometheus_url,
            note: "needed with `--latency.source prometheus`",
        }
        prometheus_query: String {
            flag: "prometheus.query",
            key: "query",
            value_name: "PROMQL",
            help: "The p99 query",
            default(computed "histogram_quantile(0.99, sum by (le) (rate(ceph_osd_op_w_latency_bucket[<enforcer latency window>])))"),
            note: "",
        }
    }
}

// Checks of one value (those involving several are in `config::Settings::resolve`). Each says
// what is expected; the origin is put in front of it.

#[allow(clippy::ptr_arg)] // a check takes the setting's own type
fn check_telemetry_path(path: &String) -> Result<(), String> {
    if !path.starts_with('/') || path == "/" || path.starts_with("/-/") || path == "/decisions" {
        return Err(format!(
            "telemetry path {path:?} must start with '/' and not be '/', '/decisions' or under '/-/' (those serve the landing page, decisions and health)"
        ));
    }
    Ok(())
}

fn check_max_connections(n: &u32) -> Result<(), String> {
    if *n == 0 {
        return Err("max_connections must be at least 1 (128 is the default)".into());
    }
    Ok(())
}

fn check_web_timeout(timeout: &HumanDuration) -> Result<(), String> {
    if timeout.0.is_zero() {
        return Err("an HTTP timeout must be above 0 (a slow client would otherwise hold a connection forever)".into());
    }
    Ok(())
}

/// The words of `--ceph-cmd`, run without a shell.
pub fn ceph_words(cmd: &str) -> Result<Vec<String>, String> {
    let words =
        shell_words::split(cmd).map_err(|e| format!("cannot split {cmd:?} into words: {e}"))?;
    if words.is_empty() {
        return Err(
            "ceph command is empty; expected e.g. \"ceph\" or \"cephadm shell -- ceph\"".into(),
        );
    }
    Ok(words)
}

#[allow(clippy::ptr_arg)] // a check takes the setting's own type
fn check_ceph_cmd(cmd: &String) -> Result<(), String> {
    ceph_words(cmd).map(drop)
}

fn check_ceph_timeout(timeout: &HumanDuration) -> Result<(), String> {
    if timeout.0.is_zero() {
        return Err("ceph command timeout must be greater than 0 (default 10s)".into());
    }
    Ok(())
}

fn check_max_reply_bytes(size: &ByteSize) -> Result<(), String> {
    if size.0 < 1 << 20 {
        return Err(format!(
            "{} is too small for a reply of `ceph status` on a large cluster; give at least 1MiB (default 64MiB)",
            crate::units::fmt_bytes(size.0)
        ));
    }
    Ok(())
}

fn check_ceph_backend(backend: &BackendChoice) -> Result<(), String> {
    if *backend == BackendChoice::Librados && !LIBRADOS_BUILT {
        return Err("this binary was built without librados (cargo build --features librados); use cli or auto".into());
    }
    Ok(())
}

fn check_collect_interval(interval: &HumanDuration) -> Result<(), String> {
    if interval.0 < Duration::from_secs(1) {
        return Err(format!(
            "collection interval {} is too short: each cycle runs several ceph commands; use 1s or more (15s is the default)",
            humantime::format_duration(interval.0)
        ));
    }
    Ok(())
}

fn check_multiplier(multiplier: &f64) -> Result<(), String> {
    if !(multiplier.is_finite() && (1.0..=100.0).contains(multiplier)) {
        return Err(format!("multiplier {multiplier} must be a number from 1.0 to 100.0 (bound = multiplier x baseline; 2.0 is the default)"));
    }
    Ok(())
}

fn check_min_interval(min_interval: &HumanDuration) -> Result<(), String> {
    if min_interval.0 > Duration::from_secs(3600) {
        return Err(format!(
            "min_interval {} is longer than an hour; the hourly limit (max_changes_per_hour) covers that, use at most 1h",
            humantime::format_duration(min_interval.0)
        ));
    }
    Ok(())
}

fn check_max_changes_per_hour(n: &u32) -> Result<(), String> {
    if *n == 0 {
        return Err("max_changes_per_hour must be at least 1 (the enforcer must be able to restore what it set)".into());
    }
    Ok(())
}

#[allow(clippy::ptr_arg)] // a check takes the setting's own type
fn check_mclock_profile(profile: &String) -> Result<(), String> {
    if !MCLOCK_PROFILES.contains(&profile.as_str()) {
        return Err(format!(
            "unknown mClock profile {profile:?}; expected one of {}",
            MCLOCK_PROFILES.join(", ")
        ));
    }
    Ok(())
}

fn check_wpq_levers(levers: &BTreeMap<String, String>) -> Result<(), String> {
    if levers.is_empty() {
        return Err("needs at least one setting (default: osd_max_backfills: \"1\", osd_recovery_sleep_hdd: \"0.1\")".into());
    }
    Ok(())
}

fn check_exit_timeout(timeout: &HumanDuration) -> Result<(), String> {
    if timeout.0 < Duration::from_secs(1) || timeout.0 > Duration::from_secs(300) {
        return Err(format!(
            "exit_timeout {} must be 1s to 5m: long enough for a few ceph commands, short enough for the pod's grace period (default 20s)",
            humantime::format_duration(timeout.0)
        ));
    }
    Ok(())
}

fn check_ops_per_pg(n: &u32) -> Result<(), String> {
    if !(1..=16).contains(n) {
        return Err(format!("backfill_ops_per_pg {n} must be 1 (no such step) to 16; the lab measured 4 (twice the recovery of 1 at N = 1, as many windows within the bound)"));
    }
    Ok(())
}

fn check_max_rung(max_rung: &u8) -> Result<(), String> {
    if !(1..=4).contains(max_rung) {
        return Err(format!("max_rung {max_rung} must be 1 (throttle profile only), 2 (+ recovery limit), 3 (+ backfill lever) or 4 (+ duty-cycled pause, the default)"));
    }
    Ok(())
}

fn check_recovery_limits(limits: &RecoveryLimits) -> Result<(), String> {
    use crate::enforcer::policy::RecoveryLimit;
    let limits = &limits.0;
    let shown: Vec<String> = limits.iter().map(ToString::to_string).collect();
    let shown = shown.join(",");
    if limits.windows(2).any(|w| w[0].unit() != w[1].unit()) {
        return Err(format!("recovery_limits {shown} mixes IOPS and percentages: write IOPS for Pacific OSDs (e.g. 1000,300,100) or percentages of capacity for Quincy 17.2.6+ (e.g. 5%,3%), not both"));
    }
    let out_of_range = limits.iter().any(|l| match l {
        RecoveryLimit::Iops(n) => *n == 0,
        RecoveryLimit::Percent(p) => !(1..=100).contains(p),
    });
    // One unit from here on (above), so the derived order compares values.
    let rising = limits.windows(2).any(|w| w[1] >= w[0]);
    if out_of_range || rising {
        return Err(format!("recovery_limits {shown} must be IOPS above 0 (e.g. 1000,300,100) or percentages from 1% to 100% (e.g. 5%,3%), each lower than the one before; none skips the limit rung under mClock"));
    }
    Ok(())
}

#[allow(clippy::ptr_arg)] // a check takes the setting's own type
fn check_recovery_sleeps(sleeps: &Vec<f64>) -> Result<(), String> {
    if sleeps
        .iter()
        .any(|s| !(s.is_finite() && *s > 0.0 && *s <= 10.0))
        || sleeps.windows(2).any(|w| w[1] <= w[0])
    {
        return Err(format!("recovery_sleeps {sleeps:?} must be seconds above 0 and at most 10, each longer than the one before (e.g. 0.2,0.5,1); empty skips the limit rung on wpq"));
    }
    Ok(())
}

fn check_descend_below(fraction: &f64) -> Result<(), String> {
    if !(*fraction > 0.0 && *fraction < 1.0) {
        return Err(format!("descend_below {fraction} must be a fraction of the bound between 0 and 1 (0.7: a rung comes off once p99 stays below 70% of the bound)"));
    }
    Ok(())
}

fn check_aim(fraction: &f64) -> Result<(), String> {
    if !(*fraction > 0.0 && *fraction <= 1.0) {
        return Err(format!("aim {fraction} must be a fraction of the bound above 0 and at most 1 (0.9: the ladder steers client p99 to 90% of the bound)"));
    }
    Ok(())
}

fn check_pause_max_share(share: &f64) -> Result<(), String> {
    if !(*share > 0.0 && *share <= 0.9) {
        return Err(format!("pause_max_share {share} must be above 0 and at most 0.9: recovery must keep progressing (default 0.8)"));
    }
    Ok(())
}

/// An empty URL is "not given" (the latency source's check says what is missing).
#[allow(clippy::ptr_arg)] // a check takes the setting's own type
fn check_prometheus_url(url: &String) -> Result<(), String> {
    if url.is_empty() {
        return Ok(());
    }
    crate::http_client::HttpTarget::parse(url).map(drop)
}

// The machinery the list expands to.

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read config file {path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("config file {path}: {message}")]
    Yaml { path: PathBuf, message: String },
    #[error("{origin}: {message}")]
    Invalid { origin: String, message: String },
}

impl ConfigError {
    /// A value that is wrong, said with where it came from.
    pub fn invalid(origin: &Origin, message: impl Into<String>) -> Self {
        ConfigError::Invalid {
            origin: origin.to_string(),
            message: message.into(),
        }
    }
}

impl FileConfig {
    pub fn parse(path: &Path, text: &str) -> Result<Self, ConfigError> {
        // An empty file (or only comments) is a valid, empty config.
        if text.lines().all(|l| {
            let t = l.trim();
            t.is_empty() || t.starts_with('#')
        }) {
            return Ok(Self::default());
        }
        serde_saphyr::from_str(text).map_err(|e| ConfigError::Yaml {
            path: path.to_path_buf(),
            message: e.to_string(),
        })
    }

    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        Self::parse(path, &text)
    }
}

/// One row of the documentation: the flag (without `--`), the file key (dotted), the default
/// as shown (`None`: unset), a note, and the flag's help.
#[derive(Debug, Clone, PartialEq)]
pub struct SettingDoc {
    pub flag: &'static str,
    pub key: &'static str,
    pub default: Option<&'static str>,
    pub note: &'static str,
    pub help: &'static str,
}

/// The help heading of a section's flags; "" = the default one (Options).
const fn heading(name: &'static str) -> Option<&'static str> {
    if name.is_empty() {
        None
    } else {
        Some(name)
    }
}

/// Where a value came from, for error messages: the flag, the file position, or the default.
#[derive(Debug, Clone, PartialEq)]
pub enum Origin {
    /// The flag's name, without `--`.
    Flag(&'static str),
    File {
        path: PathBuf,
        key: &'static str,
        line: u64,
        column: u64,
    },
    /// The file key the default stands for.
    Default(&'static str),
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Origin::Flag(flag) => write!(f, "flag --{flag}"),
            Origin::File {
                path,
                key,
                line,
                column,
            } => {
                write!(f, "{} line {line} column {column}: {key}", path.display())
            }
            Origin::Default(key) => write!(f, "default {key}"),
        }
    }
}

/// The names of one setting and the file it is read from, to say where a value came from.
#[derive(Clone, Copy)]
struct Names<'a> {
    flag: &'static str,
    key: &'static str,
    path: &'a Path,
}

impl Names<'_> {
    /// The flag's value, else the file's, with where it came from; `None` when neither.
    fn pick<T: Clone>(self, flag: Option<T>, file: Option<&Spanned<T>>) -> Option<(T, Origin)> {
        if let Some(v) = flag {
            return Some((v, Origin::Flag(self.flag)));
        }
        file.map(|s| {
            (
                s.value.clone(),
                Origin::File {
                    path: self.path.to_path_buf(),
                    key: self.key,
                    line: s.referenced.line(),
                    column: s.referenced.column(),
                },
            )
        })
    }
}

/// The check of one value: what is expected when it is wrong.
pub type Check<T> = fn(&T) -> Result<(), String>;

/// A setting with a default, merged.
#[derive(Debug, Clone)]
pub struct Value<T> {
    value: T,
    origin: Origin,
    check: Check<T>,
}

impl<T: Clone> Value<T> {
    fn pick(
        flag: Option<T>,
        file: Option<&Spanned<T>>,
        names: Names<'_>,
        default: T,
        check: Check<T>,
    ) -> Self {
        let (value, origin) = names
            .pick(flag, file)
            .unwrap_or((default, Origin::Default(names.key)));
        Self {
            value,
            origin,
            check,
        }
    }
}

impl<T: Clone> Value<T> {
    /// The value, checked, and where it came from.
    pub fn get(&self) -> Result<(T, Origin), ConfigError> {
        (self.check)(&self.value).map_err(|message| ConfigError::invalid(&self.origin, message))?;
        Ok((self.value.clone(), self.origin.clone()))
    }

    /// Given as a flag or in the file (not the default).
    pub fn given(&self) -> bool {
        !matches!(self.origin, Origin::Default(_))
    }
}

/// A setting without a default (or one worked out from others), merged.
#[derive(Debug, Clone)]
pub struct Optional<T> {
    value: Option<T>,
    origin: Origin,
    check: Check<T>,
}

impl<T: Clone> Optional<T> {
    fn pick(flag: Option<T>, file: Option<&Spanned<T>>, names: Names<'_>, check: Check<T>) -> Self {
        let (value, origin) = match names.pick(flag, file) {
            Some((v, o)) => (Some(v), o),
            None => (None, Origin::Default(names.key)),
        };
        Self {
            value,
            origin,
            check,
        }
    }
}

impl<T: Clone> Optional<T> {
    /// The value if any, checked, and where it came from.
    pub fn get(&self) -> Result<(Option<T>, Origin), ConfigError> {
        if let Some(v) = &self.value {
            (self.check)(v).map_err(|message| ConfigError::invalid(&self.origin, message))?;
        }
        Ok((self.value.clone(), self.origin.clone()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;
    use std::collections::BTreeSet;

    /// `Flags` alone, as `serve` flattens them.
    #[derive(Debug, Parser)]
    struct OnlyFlags {
        #[command(flatten)]
        flags: Flags,
    }

    #[test]
    fn every_documented_default_is_the_default_and_parses_as_the_flag() {
        for (flag, shown, holds_default) in documented_defaults() {
            let parsed = OnlyFlags::try_parse_from(["x", &format!("--{flag}"), shown])
                .unwrap_or_else(|e| panic!("--{flag} {shown}: {e}"));
            assert!(
                holds_default(&parsed.flags),
                "--{flag}: the documented default {shown:?} is not the default value"
            );
        }
    }

    #[test]
    fn every_flag_has_a_file_key_and_the_other_way_round() {
        use clap::CommandFactory;
        let table = table();
        let flags: BTreeSet<String> = OnlyFlags::command()
            .get_arguments()
            .filter_map(|a| a.get_long().map(str::to_string))
            .filter(|l| l != "help")
            .collect();
        let documented: BTreeSet<String> = table.iter().map(|s| s.flag.to_string()).collect();
        assert_eq!(flags, documented, "the flags are the documented ones");
        for s in &table {
            assert!(!s.flag.is_empty() && !s.key.is_empty(), "{s:?}");
            // The key is one the file accepts (an unknown one is rejected).
            let yaml = match s.key.split_once('.') {
                Some((section, key)) => format!("{section}:\n  {key}: null\n"),
                None => format!("{}: null\n", s.key),
            };
            FileConfig::parse(Path::new("t.yml"), &yaml)
                .unwrap_or_else(|e| panic!("--{} has no file key {}: {e}", s.flag, s.key));
        }
        // And every key the file accepts has a flag: serde lists them when it rejects one.
        let keys: BTreeSet<&str> = table.iter().map(|s| s.key).collect();
        let mut sections: BTreeSet<&str> = BTreeSet::new();
        for key in &keys {
            sections.insert(key.split_once('.').map_or("", |(s, _)| s));
        }
        for section in sections {
            let yaml = if section.is_empty() {
                "no_such_key: 1\n".to_string()
            } else {
                format!("{section}:\n  no_such_key: 1\n")
            };
            let err = FileConfig::parse(Path::new("t.yml"), &yaml)
                .expect_err("an unknown key is rejected")
                .to_string();
            let first = err.lines().next().unwrap_or("");
            // "expected one of a, b" or, for one key, "expected a".
            let listed = first
                .split_once("expected one of ")
                .or_else(|| first.split_once("expected "))
                .map(|(_, l)| l)
                .unwrap_or_else(|| panic!("no list of keys in {err}"));
            for accepted in listed.split(", ").map(|k| k.trim_matches('`')) {
                let full = if section.is_empty() {
                    accepted.to_string()
                } else {
                    format!("{section}.{accepted}")
                };
                let is_section = section.is_empty()
                    && keys.iter().any(|k| k.starts_with(&format!("{accepted}.")));
                assert!(
                    is_section || keys.contains(full.as_str()) || FILE_ONLY.contains(&full.as_str()),
                    "the file accepts {full} but no flag sets it (add it to the settings, or to FILE_ONLY)"
                );
            }
        }
    }

    #[test]
    fn values_say_where_they_came_from() {
        let flags = Flags {
            collect_interval: Some(HumanDuration(Duration::from_secs(2))),
            ..Flags::default()
        };
        let file = FileConfig::parse(
            Path::new("crb.yml"),
            "collect:\n  interval: 0s\nenforcer:\n  multiplier: 0.5\n",
        )
        .unwrap();
        let m = Merged::new(&flags, &file, Path::new("crb.yml"));
        let (interval, origin) = m.collect_interval.get().unwrap();
        assert_eq!(interval.0, Duration::from_secs(2));
        assert_eq!(origin.to_string(), "flag --collect.interval");
        let err = m.multiplier.get().unwrap_err().to_string();
        assert!(
            err.starts_with("crb.yml line 4 column 15: enforcer.multiplier: multiplier 0.5"),
            "{err}"
        );
        assert!(!m.recovery_window.given());
        assert_eq!(
            m.recovery_window.get().unwrap().1.to_string(),
            "default recovery.window"
        );
    }
}
