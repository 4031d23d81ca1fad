//! Settings from the YAML config file and flags, as plain data. Flags override the file, the
//! file overrides defaults. Every value is checked where it is read (so YAML errors carry line and
//! column), and cross-field rules are checked in [`Settings::resolve`], naming where each value
//! came from.

use std::fmt;
use std::net::{SocketAddr, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::de::{self, Deserializer};
use serde::Deserialize;
use serde_saphyr::Spanned;

use std::collections::BTreeMap;

use crate::ceph::any::{BackendChoice, LIBRADOS_BUILT};
use crate::ceph::cli::CliSettings;
use crate::enforcer::pause::PausePolicy;
use crate::enforcer::policy::{
    BaselineSpec, LadderPolicy, Mode, Policy, SuspendWhen, MCLOCK_PROFILES,
};
use crate::latency::aggregate::Grouping;

/// Default port of `serve`: not 9283 (mgr prometheus module), 9926 (ceph-exporter) or 9128
/// (digitalocean/ceph_exporter), so it can run beside any of them.
pub const DEFAULT_LISTEN_ADDRESS: &str = "0.0.0.0:9939";
pub const DEFAULT_TELEMETRY_PATH: &str = "/metrics";
pub const DEFAULT_CEPH_TIMEOUT: Duration = Duration::from_secs(10);
pub const DEFAULT_COLLECT_INTERVAL: Duration = Duration::from_secs(15);
pub const DEFAULT_RECOVERY_WINDOW: Duration = Duration::from_secs(300);
pub const DEFAULT_LATENCY_WINDOW: Duration = Duration::from_secs(300);

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

/// A duration written like `15s`, `5m`, `1h30m`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HumanDuration(pub Duration);

impl std::str::FromStr for HumanDuration {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        humantime::parse_duration(s.trim())
            .map(HumanDuration)
            .map_err(|e| format!("invalid duration {s:?} ({e}); expected a number with a unit, like 15s, 5m or 1h30m"))
    }
}

impl<'de> Deserialize<'de> for HumanDuration {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(de::Error::custom)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    #[default]
    Text,
    Json,
}

/// A `tracing` filter such as `info` or `ceph_recovery_budget=debug,warn`, checked when read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogLevel(pub String);

impl std::str::FromStr for LogLevel {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        tracing_subscriber::EnvFilter::try_new(s)
            .map(|_| LogLevel(s.to_string()))
            .map_err(|e| {
                format!("invalid log level {s:?} ({e}); expected error, warn, info, debug or trace")
            })
    }
}

impl<'de> Deserialize<'de> for LogLevel {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(de::Error::custom)
    }
}

/// `host:port`, `:port` (all interfaces, as Prometheus exporters accept) or `[::1]:port`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListenAddress(pub SocketAddr);

impl std::str::FromStr for ListenAddress {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let full = if s.starts_with(':') {
            format!("0.0.0.0{s}")
        } else {
            s.to_string()
        };
        full.to_socket_addrs()
            .ok()
            .and_then(|mut a| a.next())
            .map(ListenAddress)
            .ok_or_else(|| {
                format!(
                    "invalid listen address {s:?}; expected host:port, like 0.0.0.0:9939 or :9939"
                )
            })
    }
}

impl<'de> Deserialize<'de> for ListenAddress {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(de::Error::custom)
    }
}

/// The config file, exactly as written: every key optional, unknown keys rejected.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileConfig {
    #[serde(default)]
    pub web: WebFile,
    #[serde(default)]
    pub ceph: CephFile,
    #[serde(default)]
    pub collect: CollectFile,
    #[serde(default)]
    pub recovery: WindowFile,
    #[serde(default)]
    pub latency: LatencyFile,
    #[serde(default)]
    pub log: LogFile,
    #[serde(default)]
    pub enforcer: EnforcerFile,
    /// `cluster` (default) or `host`.
    pub mode: Option<Spanned<ServeMode>>,
    #[serde(default)]
    pub host: HostFile,
    #[serde(default)]
    pub prometheus: PrometheusFile,
}

/// What one `serve` publishes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ServeMode {
    /// Cluster state (status, pools, PGs, schedulers) and, unless Prometheus provides the p99,
    /// every OSD's latency histogram through the monitors; the enforcer runs here.
    #[default]
    Cluster,
    /// Only the latency histograms of this host's OSDs, from their admin sockets: no ceph CLI,
    /// no monitor load. One per OSD host.
    Host,
}

impl ServeMode {
    pub fn as_str(self) -> &'static str {
        match self {
            ServeMode::Cluster => "cluster",
            ServeMode::Host => "host",
        }
    }
}

impl std::str::FromStr for ServeMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "cluster" => Ok(ServeMode::Cluster),
            "host" => Ok(ServeMode::Host),
            _ => Err(format!("invalid mode {s:?}: expected cluster or host")),
        }
    }
}

/// Where the enforcer's p99 comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LatencySource {
    /// The histograms this exporter collects.
    #[default]
    Collect,
    /// A query to Prometheus over the histograms the host-mode exporters publish.
    Prometheus,
}

impl LatencySource {
    pub fn as_str(self) -> &'static str {
        match self {
            LatencySource::Collect => "collect",
            LatencySource::Prometheus => "prometheus",
        }
    }
}

impl std::str::FromStr for LatencySource {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "collect" => Ok(LatencySource::Collect),
            "prometheus" => Ok(LatencySource::Prometheus),
            _ => Err(format!(
                "invalid latency source {s:?}: expected collect or prometheus"
            )),
        }
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LatencyFile {
    pub window: Option<Spanned<HumanDuration>>,
    pub aggregate: Option<Spanned<Grouping>>,
    pub source: Option<Spanned<LatencySource>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HostFile {
    pub asok_dir: Option<PathBuf>,
    pub name: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PrometheusFile {
    pub url: Option<Spanned<String>>,
    pub query: Option<String>,
}

/// The `enforcer:` section: the policy.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EnforcerFile {
    pub mode: Option<Mode>,
    pub baseline: Option<BaselineSpec>,
    pub learn_window: Option<Spanned<HumanDuration>>,
    pub multiplier: Option<Spanned<f64>>,
    #[serde(rename = "for")]
    pub breach_for: Option<Spanned<HumanDuration>>,
    pub latency_window: Option<Spanned<HumanDuration>>,
    pub suspend_when: Option<SuspendWhen>,
    pub throttle_profile: Option<Spanned<String>>,
    pub suspend_profile: Option<Spanned<String>>,
    pub wpq_levers: Option<BTreeMap<String, String>>,
    pub settle: Option<Spanned<HumanDuration>>,
    pub min_interval: Option<Spanned<HumanDuration>>,
    pub max_changes_per_hour: Option<Spanned<u32>>,
    pub verify_after: Option<Spanned<HumanDuration>>,
    pub state_file: Option<PathBuf>,
    /// The escalation ladder (issue #7).
    pub max_rung: Option<Spanned<u8>>,
    pub ladder_settle: Option<Spanned<HumanDuration>>,
    pub recovery_limits: Option<Spanned<Vec<u32>>>,
    pub recovery_sleeps: Option<Spanned<Vec<f64>>>,
    pub descend_below: Option<Spanned<f64>>,
    pub pause_period: Option<Spanned<HumanDuration>>,
    pub pause_max_share: Option<Spanned<f64>>,
    pub pause_max_total: Option<Spanned<HumanDuration>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WebFile {
    pub listen_address: Option<ListenAddress>,
    pub telemetry_path: Option<Spanned<String>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CephFile {
    /// Shell-like words, e.g. `cephadm shell -- ceph`.
    pub cmd: Option<Spanned<String>>,
    pub conf: Option<String>,
    pub name: Option<String>,
    pub keyring: Option<String>,
    pub timeout: Option<Spanned<HumanDuration>>,
    /// `cli`, `librados` or `auto`.
    pub backend: Option<Spanned<BackendChoice>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CollectFile {
    pub interval: Option<Spanned<HumanDuration>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WindowFile {
    pub window: Option<Spanned<HumanDuration>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LogFile {
    pub level: Option<LogLevel>,
    pub format: Option<LogFormat>,
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

/// Values given as flags; `None` = not given.
#[derive(Debug, Default, Clone)]
pub struct Overrides {
    pub listen_address: Option<ListenAddress>,
    pub telemetry_path: Option<String>,
    pub ceph_cmd: Option<String>,
    pub ceph_conf: Option<String>,
    pub ceph_name: Option<String>,
    pub ceph_keyring: Option<String>,
    pub ceph_timeout: Option<HumanDuration>,
    pub ceph_backend: Option<BackendChoice>,
    pub collect_interval: Option<HumanDuration>,
    pub recovery_window: Option<HumanDuration>,
    pub latency_window: Option<HumanDuration>,
    pub log_level: Option<LogLevel>,
    pub log_format: Option<LogFormat>,
    pub enforcer: EnforcerOverrides,
    pub mode: Option<ServeMode>,
    pub latency_aggregate: Option<Grouping>,
    pub latency_source: Option<LatencySource>,
    pub prometheus_url: Option<String>,
    pub prometheus_query: Option<String>,
    pub host_asok_dir: Option<PathBuf>,
    pub host_name: Option<String>,
}

#[derive(Debug, Default, Clone)]
pub struct EnforcerOverrides {
    pub mode: Option<Mode>,
    pub baseline: Option<BaselineSpec>,
    pub learn_window: Option<HumanDuration>,
    pub multiplier: Option<f64>,
    pub breach_for: Option<HumanDuration>,
    pub latency_window: Option<HumanDuration>,
    pub suspend_when: Option<SuspendWhen>,
    pub throttle_profile: Option<String>,
    pub suspend_profile: Option<String>,
    pub settle: Option<HumanDuration>,
    pub min_interval: Option<HumanDuration>,
    pub max_changes_per_hour: Option<u32>,
    pub state_file: Option<PathBuf>,
    pub wpq_levers: Option<BTreeMap<String, String>>,
    pub verify_after: Option<HumanDuration>,
    pub max_rung: Option<u8>,
    pub ladder_settle: Option<HumanDuration>,
    pub recovery_limits: Option<Vec<u32>>,
    pub recovery_sleeps: Option<Vec<f64>>,
    pub descend_below: Option<f64>,
    pub pause_period: Option<HumanDuration>,
    pub pause_max_share: Option<f64>,
    pub pause_max_total: Option<HumanDuration>,
}

/// Validated settings of `serve`.
#[derive(Debug, Clone, PartialEq)]
pub struct Settings {
    pub listen_address: SocketAddr,
    pub telemetry_path: String,
    pub ceph: CliSettings,
    /// Which backend `serve` uses; `ceph` above holds what both need (conf, name, keyring,
    /// timeout) and the CLI's command.
    pub ceph_backend: BackendChoice,
    pub collect_interval: Duration,
    pub recovery_window: Duration,
    pub latency_window: Duration,
    pub log_level: String,
    pub log_format: LogFormat,
    pub policy: Policy,
    pub mode: ServeMode,
    pub latency_aggregate: Grouping,
    pub latency_source: LatencySource,
    /// Set when `latency_source` is Prometheus: base URL and the p99 query.
    pub prometheus: Option<PrometheusSettings>,
    /// Host mode: where the local OSDs' admin sockets are, and the host label.
    pub asok_dir: PathBuf,
    pub host_name: Option<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct PrometheusSettings {
    pub url: String,
    pub query: String,
}

/// Where a value came from, for error messages: the flag, the file position, or the default.
#[derive(Debug, Clone)]
enum Origin {
    Flag(&'static str),
    File {
        path: PathBuf,
        key: &'static str,
        line: u64,
        column: u64,
    },
    Default(&'static str),
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Origin::Flag(flag) => write!(f, "flag {flag}"),
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

/// Picks flag, then file, then default, remembering the origin.
fn pick<T: Clone>(
    flag: Option<&T>,
    flag_name: &'static str,
    file: Option<&Spanned<T>>,
    file_path: &Path,
    key: &'static str,
    default: T,
) -> (T, Origin) {
    if let Some(v) = flag {
        (v.clone(), Origin::Flag(flag_name))
    } else if let Some(s) = file {
        (
            s.value.clone(),
            Origin::File {
                path: file_path.to_path_buf(),
                key,
                line: s.referenced.line(),
                column: s.referenced.column(),
            },
        )
    } else {
        (default, Origin::Default(key))
    }
}

fn invalid(origin: &Origin, message: impl Into<String>) -> ConfigError {
    ConfigError::Invalid {
        origin: origin.to_string(),
        message: message.into(),
    }
}

impl Settings {
    /// Merges flags over the file over defaults and checks the result.
    pub fn resolve(
        file: &FileConfig,
        file_path: &Path,
        flags: &Overrides,
    ) -> Result<Self, ConfigError> {
        let hd = |d: Duration| HumanDuration(d);
        let (interval, interval_origin) = pick(
            flags.collect_interval.as_ref(),
            "--collect.interval",
            file.collect.interval.as_ref(),
            file_path,
            "collect.interval",
            hd(DEFAULT_COLLECT_INTERVAL),
        );
        let (timeout, timeout_origin) = pick(
            flags.ceph_timeout.as_ref(),
            "--ceph-timeout",
            file.ceph.timeout.as_ref(),
            file_path,
            "ceph.timeout",
            hd(DEFAULT_CEPH_TIMEOUT),
        );
        let (recovery_window, recovery_origin) = pick(
            flags.recovery_window.as_ref(),
            "--recovery.window",
            file.recovery.window.as_ref(),
            file_path,
            "recovery.window",
            hd(DEFAULT_RECOVERY_WINDOW),
        );
        let (latency_window, latency_origin) = pick(
            flags.latency_window.as_ref(),
            "--latency.window",
            file.latency.window.as_ref(),
            file_path,
            "latency.window",
            hd(DEFAULT_LATENCY_WINDOW),
        );
        let (telemetry_path, path_origin) = pick(
            flags.telemetry_path.as_ref(),
            "--web.telemetry-path",
            file.web.telemetry_path.as_ref(),
            file_path,
            "web.telemetry_path",
            DEFAULT_TELEMETRY_PATH.to_string(),
        );
        let (cmd, cmd_origin) = pick(
            flags.ceph_cmd.as_ref(),
            "--ceph-cmd",
            file.ceph.cmd.as_ref(),
            file_path,
            "ceph.cmd",
            "ceph".to_string(),
        );

        if interval.0 < Duration::from_secs(1) {
            return Err(invalid(&interval_origin, format!(
                "collection interval {} is too short: each cycle runs several ceph commands; use 1s or more (15s is the default)",
                humantime::format_duration(interval.0)
            )));
        }
        if timeout.0.is_zero() {
            return Err(invalid(
                &timeout_origin,
                "ceph command timeout must be greater than 0 (default 10s)",
            ));
        }
        for (window, origin, what) in [
            (recovery_window.0, &recovery_origin, "recovery"),
            (latency_window.0, &latency_origin, "latency"),
        ] {
            if window < interval.0 * 2 {
                return Err(invalid(origin, format!(
                    "{what} window {} must span at least two collection intervals ({} each, from {interval_origin}): a rate needs two samples",
                    humantime::format_duration(window),
                    humantime::format_duration(interval.0)
                )));
            }
        }
        if !telemetry_path.starts_with('/')
            || telemetry_path == "/"
            || telemetry_path.starts_with("/-/")
            || telemetry_path == "/decisions"
        {
            return Err(invalid(&path_origin, format!(
                "telemetry path {telemetry_path:?} must start with '/' and not be '/', '/decisions' or under '/-/' (those serve the landing page, decisions and health)"
            )));
        }
        let words = shell_words::split(&cmd)
            .map_err(|e| invalid(&cmd_origin, format!("cannot split {cmd:?} into words: {e}")))?;
        if words.is_empty() {
            return Err(invalid(
                &cmd_origin,
                "ceph command is empty; expected e.g. \"ceph\" or \"cephadm shell -- ceph\"",
            ));
        }
        let (ceph_backend, backend_origin) = pick(
            flags.ceph_backend.as_ref(),
            "--ceph.backend",
            file.ceph.backend.as_ref(),
            file_path,
            "ceph.backend",
            BackendChoice::default(),
        );
        if ceph_backend == BackendChoice::Librados {
            if !LIBRADOS_BUILT {
                return Err(invalid(&backend_origin, "this binary was built without librados (cargo build --features librados); use cli or auto"));
            }
            if words != ["ceph"] {
                return Err(invalid(&backend_origin, format!(
                    "librados talks to the cluster of --ceph-conf itself, so the ceph command {cmd:?} (from {cmd_origin}) would be ignored; use backend cli (or auto) with a wrapper"
                )));
            }
        }

        let listen_address = flags
            .listen_address
            .clone()
            .or_else(|| file.web.listen_address.clone())
            .map(|a| a.0)
            .unwrap_or_else(|| {
                DEFAULT_LISTEN_ADDRESS
                    .parse::<SocketAddr>()
                    .unwrap_or(SocketAddr::from(([0, 0, 0, 0], 9939)))
            });
        let mut policy = resolve_policy(&file.enforcer, file_path, &flags.enforcer, interval.0)?;
        let (mode, mode_origin) = pick(
            flags.mode.as_ref(),
            "--mode",
            file.mode.as_ref(),
            file_path,
            "mode",
            ServeMode::Cluster,
        );
        let (latency_aggregate, _) = pick(
            flags.latency_aggregate.as_ref(),
            "--latency.aggregate",
            file.latency.aggregate.as_ref(),
            file_path,
            "latency.aggregate",
            Grouping::Osd,
        );
        let (latency_source, source_origin) = pick(
            flags.latency_source.as_ref(),
            "--latency.source",
            file.latency.source.as_ref(),
            file_path,
            "latency.source",
            LatencySource::Collect,
        );
        let enforcer_mode_given = flags.enforcer.mode.is_some() || file.enforcer.mode.is_some();
        if mode == ServeMode::Host {
            // Host mode sees no cluster state: nothing for an enforcer to judge by.
            if enforcer_mode_given && policy.mode != Mode::Off {
                return Err(invalid(&mode_origin, format!(
                    "host mode publishes only this host's OSD histograms, so the enforcer cannot run here (enforcer mode {}): run it in the cluster-mode exporter, or set --enforcer.mode off",
                    policy.mode.as_str()
                )));
            }
            policy.mode = Mode::Off;
            if latency_source == LatencySource::Prometheus {
                return Err(invalid(&source_origin, "latency source prometheus is for the cluster-mode exporter that runs the enforcer; a host-mode exporter publishes the histograms Prometheus reads"));
            }
        }
        let prometheus = match latency_source {
            LatencySource::Collect => None,
            LatencySource::Prometheus => {
                let (url, url_origin) = pick(
                    flags.prometheus_url.as_ref(),
                    "--prometheus.url",
                    file.prometheus.url.as_ref(),
                    file_path,
                    "prometheus.url",
                    String::new(),
                );
                if url.is_empty() {
                    return Err(invalid(&source_origin, "latency source prometheus needs the Prometheus to ask: --prometheus.url http://prometheus:9090 (or prometheus.url in the file)"));
                }
                if let Err(e) = crate::http_client::HttpTarget::parse(&url) {
                    return Err(invalid(&url_origin, e));
                }
                if policy.baseline == BaselineSpec::Learned && policy.mode != Mode::Off {
                    return Err(invalid(&source_origin, "with latency source prometheus this exporter collects no histograms to learn a baseline from: set --enforcer.baseline to a duration (e.g. 16ms) or fio:FILE"));
                }
                let query = flags
                    .prometheus_query
                    .clone()
                    .or_else(|| file.prometheus.query.clone())
                    .unwrap_or_else(|| {
                        crate::latency::prometheus::default_query(policy.latency_window)
                    });
                Some(PrometheusSettings {
                    url: url.trim_end_matches('/').to_string(),
                    query,
                })
            }
        };
        let asok_dir = flags
            .host_asok_dir
            .clone()
            .or_else(|| file.host.asok_dir.clone())
            .unwrap_or_else(|| PathBuf::from(crate::ceph::admin_socket::DEFAULT_DIR));
        let host_name = flags.host_name.clone().or_else(|| file.host.name.clone());
        let or =
            |flag: &Option<String>, file: &Option<String>| flag.clone().or_else(|| file.clone());
        Ok(Settings {
            policy,
            listen_address,
            telemetry_path,
            ceph: CliSettings {
                command: words,
                conf: or(&flags.ceph_conf, &file.ceph.conf),
                name: or(&flags.ceph_name, &file.ceph.name),
                keyring: or(&flags.ceph_keyring, &file.ceph.keyring),
                timeout: timeout.0,
            },
            ceph_backend,
            collect_interval: interval.0,
            recovery_window: recovery_window.0,
            latency_window: latency_window.0,
            log_level: flags
                .log_level
                .clone()
                .or_else(|| file.log.level.clone())
                .map(|l| l.0)
                .unwrap_or_else(|| "info".to_string()),
            log_format: flags.log_format.or(file.log.format).unwrap_or_default(),
            mode,
            latency_aggregate,
            latency_source,
            prometheus,
            asok_dir,
            host_name,
        })
    }
}

fn resolve_ladder(
    file: &EnforcerFile,
    path: &Path,
    flags: &EnforcerOverrides,
    interval: Duration,
    latency_window: Duration,
) -> Result<LadderPolicy, ConfigError> {
    let d = LadderPolicy::default();
    let (max_rung, mr_origin) = pick(
        flags.max_rung.as_ref(),
        "--enforcer.max-rung",
        file.max_rung.as_ref(),
        path,
        "enforcer.max_rung",
        d.max_rung,
    );
    if !(1..=3).contains(&max_rung) {
        return Err(invalid(&mr_origin, format!("max_rung {max_rung} must be 1 (throttle profile only), 2 (+ recovery limit) or 3 (+ duty-cycled pause, the default)")));
    }
    let (settle, s_origin) = pick(
        flags.ladder_settle.as_ref(),
        "--enforcer.ladder-settle",
        file.ladder_settle.as_ref(),
        path,
        "enforcer.ladder_settle",
        HumanDuration(d.settle),
    );
    if settle.0 < latency_window {
        return Err(invalid(&s_origin, format!(
            "ladder_settle {} is shorter than the enforcer's latency window {}: a rung must be judged by a p99 measured entirely while it was held",
            humantime::format_duration(settle.0),
            humantime::format_duration(latency_window)
        )));
    }
    let (recovery_limits, rl_origin) = pick(
        flags.recovery_limits.as_ref(),
        "--enforcer.recovery-limits",
        file.recovery_limits.as_ref(),
        path,
        "enforcer.recovery_limits",
        d.recovery_limits.clone(),
    );
    if recovery_limits.contains(&0) || recovery_limits.windows(2).any(|w| w[1] >= w[0]) {
        return Err(invalid(&rl_origin, format!("recovery_limits {recovery_limits:?} must be IOPS above 0, each lower than the one before (e.g. 1000,300,100); empty skips the limit rung under mClock")));
    }
    let (recovery_sleeps, rs_origin) = pick(
        flags.recovery_sleeps.as_ref(),
        "--enforcer.recovery-sleeps",
        file.recovery_sleeps.as_ref(),
        path,
        "enforcer.recovery_sleeps",
        d.recovery_sleeps.clone(),
    );
    if recovery_sleeps
        .iter()
        .any(|s| !(s.is_finite() && *s > 0.0 && *s <= 10.0))
        || recovery_sleeps.windows(2).any(|w| w[1] <= w[0])
    {
        return Err(invalid(&rs_origin, format!("recovery_sleeps {recovery_sleeps:?} must be seconds above 0 and at most 10, each longer than the one before (e.g. 0.2,0.5,1); empty skips the limit rung on wpq")));
    }
    let (descend_below, db_origin) = pick(
        flags.descend_below.as_ref(),
        "--enforcer.descend-below",
        file.descend_below.as_ref(),
        path,
        "enforcer.descend_below",
        d.descend_below,
    );
    if !(descend_below > 0.0 && descend_below < 1.0) {
        return Err(invalid(&db_origin, format!("descend_below {descend_below} must be a fraction of the bound between 0 and 1 (0.7: a rung comes off once p99 stays below 70% of the bound)")));
    }
    let (period, pp_origin) = pick(
        flags.pause_period.as_ref(),
        "--enforcer.pause-period",
        file.pause_period.as_ref(),
        path,
        "enforcer.pause_period",
        HumanDuration(Duration::from_secs_f64(d.pause.period)),
    );
    if period.0 < interval * 4 {
        return Err(invalid(&pp_origin, format!(
            "pause_period {} must be at least four collection intervals ({} each): the flags are set and unset once per cycle",
            humantime::format_duration(period.0),
            humantime::format_duration(interval)
        )));
    }
    let (max_share, ms_origin) = pick(
        flags.pause_max_share.as_ref(),
        "--enforcer.pause-max-share",
        file.pause_max_share.as_ref(),
        path,
        "enforcer.pause_max_share",
        d.pause.max_share,
    );
    if !(max_share > 0.0 && max_share <= 0.9) {
        return Err(invalid(&ms_origin, format!("pause_max_share {max_share} must be above 0 and at most 0.9: recovery must keep progressing (default 0.8)")));
    }
    let (max_total, _) = pick(
        flags.pause_max_total.as_ref(),
        "--enforcer.pause-max-total",
        file.pause_max_total.as_ref(),
        path,
        "enforcer.pause_max_total",
        HumanDuration(Duration::from_secs_f64(d.pause.max_total)),
    );
    Ok(LadderPolicy {
        max_rung,
        settle: settle.0,
        recovery_limits,
        recovery_sleeps,
        descend_below,
        pause: PausePolicy {
            period: period.0.as_secs_f64(),
            start_share: d.pause.start_share.min(max_share),
            step: d.pause.step,
            max_share,
            lower: descend_below,
            max_total: max_total.0.as_secs_f64(),
            tick: interval.as_secs_f64(),
        },
    })
}

fn resolve_policy(
    file: &EnforcerFile,
    path: &Path,
    flags: &EnforcerOverrides,
    interval: Duration,
) -> Result<Policy, ConfigError> {
    let d = Policy::default();
    let dur = |flag: Option<&HumanDuration>,
               name: &'static str,
               fv: Option<&Spanned<HumanDuration>>,
               key: &'static str,
               def: Duration| {
        let (v, o) = pick(flag, name, fv, path, key, HumanDuration(def));
        (v.0, o)
    };
    let (latency_window, lw_origin) = dur(
        flags.latency_window.as_ref(),
        "--enforcer.latency-window",
        file.latency_window.as_ref(),
        "enforcer.latency_window",
        d.latency_window,
    );
    let (learn_window, learn_origin) = dur(
        flags.learn_window.as_ref(),
        "--enforcer.learn-window",
        file.learn_window.as_ref(),
        "enforcer.learn_window",
        d.learn_window,
    );
    let (breach_for, _) = dur(
        flags.breach_for.as_ref(),
        "--enforcer.for",
        file.breach_for.as_ref(),
        "enforcer.for",
        d.breach_for,
    );
    let (settle, _) = dur(
        flags.settle.as_ref(),
        "--enforcer.settle",
        file.settle.as_ref(),
        "enforcer.settle",
        d.settle,
    );
    let (min_interval, mi_origin) = dur(
        flags.min_interval.as_ref(),
        "--enforcer.min-interval",
        file.min_interval.as_ref(),
        "enforcer.min_interval",
        d.min_interval,
    );
    let (verify_after, va_origin) = dur(
        flags.verify_after.as_ref(),
        "--enforcer.verify-after",
        file.verify_after.as_ref(),
        "enforcer.verify_after",
        d.verify_after,
    );
    let (multiplier, m_origin) = pick(
        flags.multiplier.as_ref(),
        "--enforcer.multiplier",
        file.multiplier.as_ref(),
        path,
        "enforcer.multiplier",
        d.multiplier,
    );
    let (max_changes, mc_origin) = pick(
        flags.max_changes_per_hour.as_ref(),
        "--enforcer.max-changes-per-hour",
        file.max_changes_per_hour.as_ref(),
        path,
        "enforcer.max_changes_per_hour",
        d.max_changes_per_hour,
    );
    let (throttle_profile, tp_origin) = pick(
        flags.throttle_profile.as_ref(),
        "--enforcer.throttle-profile",
        file.throttle_profile.as_ref(),
        path,
        "enforcer.throttle_profile",
        d.throttle_profile.clone(),
    );
    let (suspend_profile, sp_origin) = pick(
        flags.suspend_profile.as_ref(),
        "--enforcer.suspend-profile",
        file.suspend_profile.as_ref(),
        path,
        "enforcer.suspend_profile",
        d.suspend_profile.clone(),
    );

    if !(multiplier.is_finite() && (1.0..=100.0).contains(&multiplier)) {
        return Err(invalid(&m_origin, format!("multiplier {multiplier} must be a number from 1.0 to 100.0 (bound = multiplier x baseline; 2.0 is the default)")));
    }
    if min_interval > Duration::from_secs(3600) {
        return Err(invalid(&mi_origin, format!(
            "min_interval {} is longer than an hour; the hourly limit (max_changes_per_hour) covers that, use at most 1h",
            humantime::format_duration(min_interval)
        )));
    }
    if verify_after < interval {
        return Err(invalid(&va_origin, format!(
            "verify_after {} must be at least one collection interval ({}): the OSDs' profile is read once per cycle",
            humantime::format_duration(verify_after),
            humantime::format_duration(interval)
        )));
    }
    if max_changes == 0 {
        return Err(invalid(&mc_origin, "max_changes_per_hour must be at least 1 (the enforcer must be able to restore what it set)"));
    }
    for (p, o) in [
        (&throttle_profile, &tp_origin),
        (&suspend_profile, &sp_origin),
    ] {
        if !MCLOCK_PROFILES.contains(&p.as_str()) {
            return Err(invalid(
                o,
                format!(
                    "unknown mClock profile {p:?}; expected one of {}",
                    MCLOCK_PROFILES.join(", ")
                ),
            ));
        }
    }
    if latency_window < interval * 2 {
        return Err(invalid(
            &lw_origin,
            format!(
                "enforcer latency window {} must span at least two collection intervals ({} each)",
                humantime::format_duration(latency_window),
                humantime::format_duration(interval)
            ),
        ));
    }
    if learn_window < latency_window {
        return Err(invalid(
            &learn_origin,
            format!(
                "learn window {} must be at least the latency window {}",
                humantime::format_duration(learn_window),
                humantime::format_duration(latency_window)
            ),
        ));
    }
    let ladder = resolve_ladder(file, path, flags, interval, latency_window)?;
    let wpq_levers = flags
        .wpq_levers
        .clone()
        .or_else(|| file.wpq_levers.clone())
        .unwrap_or(d.wpq_levers.clone());
    if wpq_levers.is_empty() {
        return Err(ConfigError::Invalid {
            origin: format!("{}: enforcer.wpq_levers", path.display()),
            message: "needs at least one setting (default: osd_max_backfills: \"1\", osd_recovery_sleep_hdd: \"0.1\")".into(),
        });
    }
    Ok(Policy {
        mode: flags.mode.or(file.mode).unwrap_or(d.mode),
        baseline: flags
            .baseline
            .clone()
            .or_else(|| file.baseline.clone())
            .unwrap_or(d.baseline),
        learn_window,
        multiplier,
        breach_for,
        latency_window,
        suspend_when: flags
            .suspend_when
            .or(file.suspend_when)
            .unwrap_or(d.suspend_when),
        throttle_profile,
        suspend_profile,
        wpq_levers,
        settle,
        min_interval,
        max_changes_per_hour: max_changes,
        verify_after,
        ladder,
        state_file: flags
            .state_file
            .clone()
            .or_else(|| file.state_file.clone())
            .unwrap_or(d.state_file),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(yaml: &str) -> Result<FileConfig, ConfigError> {
        FileConfig::parse(Path::new("crb.yml"), yaml)
    }

    fn resolve(yaml: &str, flags: &Overrides) -> Result<Settings, ConfigError> {
        Settings::resolve(&parse(yaml)?, Path::new("crb.yml"), flags)
    }

    #[test]
    fn defaults_without_file_or_flags() {
        let s = resolve("", &Overrides::default()).unwrap();
        assert_eq!(s.listen_address.port(), 9939);
        assert_eq!(s.telemetry_path, "/metrics");
        assert_eq!(s.ceph.command, ["ceph"]);
        assert_eq!(s.ceph.timeout, Duration::from_secs(10));
        assert_eq!(s.collect_interval, Duration::from_secs(15));
        assert_eq!(s.recovery_window, Duration::from_secs(300));
        assert_eq!(s.latency_window, Duration::from_secs(300));
        assert_eq!(s.log_format, LogFormat::Text);
    }

    #[test]
    fn latency_source_prometheus_checks_its_url_and_keeps_a_path_prefix() {
        let flags = |url: Option<&str>| Overrides {
            latency_source: Some(LatencySource::Prometheus),
            prometheus_url: url.map(str::to_string),
            enforcer: EnforcerOverrides {
                baseline: Some(BaselineSpec::Fixed(Duration::from_millis(16))),
                ..EnforcerOverrides::default()
            },
            ..Overrides::default()
        };
        let s = resolve("", &flags(Some("http://mon1:9090/prometheus/"))).unwrap();
        let p = s.prometheus.unwrap();
        assert_eq!(p.url, "http://mon1:9090/prometheus");
        assert!(
            p.query.starts_with("histogram_quantile(0.99"),
            "{}",
            p.query
        );
        let e = resolve("", &flags(None)).unwrap_err().to_string();
        assert!(e.contains("needs the Prometheus to ask"), "{e}");
        for bad in ["https://mon1:9090", "mon1:9090", "http://mon1:9090/?x=1"] {
            let e = resolve("", &flags(Some(bad))).unwrap_err().to_string();
            assert!(
                e.starts_with("flag --prometheus.url") && e.contains("expected http://HOST:PORT"),
                "{bad}: {e}"
            );
        }
        // The same check, naming the file's key.
        let e = resolve(
            "latency:\n  source: prometheus\nprometheus:\n  url: https://mon1:9090\nenforcer:\n  baseline: 16ms\n",
            &Overrides::default(),
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("prometheus.url"), "{e}");
        // No histogram to learn a baseline from.
        let learned = Overrides {
            enforcer: EnforcerOverrides {
                mode: Some(Mode::Observe),
                baseline: Some(BaselineSpec::Learned),
                ..EnforcerOverrides::default()
            },
            ..flags(Some("http://mon1:9090"))
        };
        let e = resolve("", &learned).unwrap_err().to_string();
        assert!(e.contains("set --enforcer.baseline"), "{e}");
    }

    #[test]
    fn every_key_in_the_file_is_read() {
        let s = resolve(
            "web:\n  listen_address: \"127.0.0.1:9100\"\n  telemetry_path: /m\nceph:\n  cmd: \"kubectl -n rook-ceph exec deploy/rook-ceph-tools -- ceph\"\n  conf: /etc/ceph/c.conf\n  name: client.crb\n  keyring: /k\n  timeout: 3s\ncollect:\n  interval: 5s\nrecovery:\n  window: 15m\nlatency:\n  window: 1m\nlog:\n  level: debug\n  format: json\n",
            &Overrides::default(),
        )
        .unwrap();
        assert_eq!(s.listen_address, "127.0.0.1:9100".parse().unwrap());
        assert_eq!(s.telemetry_path, "/m");
        assert_eq!(
            s.ceph.command,
            [
                "kubectl",
                "-n",
                "rook-ceph",
                "exec",
                "deploy/rook-ceph-tools",
                "--",
                "ceph"
            ]
        );
        assert_eq!(s.ceph.conf.as_deref(), Some("/etc/ceph/c.conf"));
        assert_eq!(s.ceph.name.as_deref(), Some("client.crb"));
        assert_eq!(s.ceph.keyring.as_deref(), Some("/k"));
        assert_eq!(s.ceph.timeout, Duration::from_secs(3));
        assert_eq!(s.collect_interval, Duration::from_secs(5));
        assert_eq!(s.recovery_window, Duration::from_secs(900));
        assert_eq!(s.latency_window, Duration::from_secs(60));
        assert_eq!(s.log_level, "debug");
        assert_eq!(s.log_format, LogFormat::Json);
    }

    #[test]
    fn flags_override_the_file() {
        let flags = Overrides {
            collect_interval: Some(HumanDuration(Duration::from_secs(2))),
            ceph_cmd: Some("cephadm shell -- ceph".into()),
            ..Overrides::default()
        };
        let s = resolve("collect:\n  interval: 30s\nceph:\n  cmd: ceph\n", &flags).unwrap();
        assert_eq!(s.collect_interval, Duration::from_secs(2));
        assert_eq!(s.ceph.command, ["cephadm", "shell", "--", "ceph"]);
    }

    #[test]
    fn unknown_key_is_rejected_with_its_position() {
        let err = parse("collect:\n  intervall: 5s\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("crb.yml"), "{err}");
        assert!(err.contains("intervall"), "{err}");
        assert!(err.contains("line 2"), "{err}");
    }

    #[test]
    fn bad_duration_is_rejected_with_position_and_example() {
        let err = parse("latency:\n  window: 5 minutes please\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("line 2"), "{err}");
        assert!(err.contains("like 15s, 5m"), "{err}");
    }

    #[test]
    fn bad_values_are_rejected_with_what_was_expected() {
        for (yaml, expect) in [
            ("web:\n  listen_address: nowhere\n", "host:port"),
            ("log:\n  format: xml\n", "xml"),
            ("log:\n  level: \"[[[\"\n", "invalid log level"),
            ("ceph:\n  timeout: 10\n", "duration"),
        ] {
            let err = parse(yaml).unwrap_err().to_string();
            assert!(err.contains(expect), "{yaml:?}: {err}");
            assert!(err.contains("line"), "{yaml:?}: {err}");
        }
    }

    #[test]
    fn cross_field_errors_name_the_file_position() {
        let err = resolve(
            "collect:\n  interval: 1m\nlatency:\n  window: 90s\n",
            &Overrides::default(),
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("crb.yml line 4"), "{err}");
        assert!(err.contains("latency.window"), "{err}");
        assert!(err.contains("two collection intervals"), "{err}");
    }

    #[test]
    fn cross_field_errors_name_the_flag() {
        let flags = Overrides {
            collect_interval: Some(HumanDuration(Duration::from_millis(100))),
            ..Overrides::default()
        };
        let err = resolve("", &flags).unwrap_err().to_string();
        assert!(err.starts_with("flag --collect.interval"), "{err}");
    }

    #[test]
    fn reserved_telemetry_paths_and_empty_command_are_rejected() {
        for yaml in [
            "web:\n  telemetry_path: /\n",
            "web:\n  telemetry_path: /-/healthy\n",
            "web:\n  telemetry_path: metrics\n",
            "ceph:\n  cmd: \"\"\n",
            "ceph:\n  cmd: \"ceph 'unclosed\"\n",
        ] {
            assert!(resolve(yaml, &Overrides::default()).is_err(), "{yaml}");
        }
    }

    #[test]
    fn the_enforcer_policy_is_read_and_checked() {
        let s = resolve(
            "enforcer:\n  mode: enforce\n  baseline: 16ms\n  multiplier: 2.5\n  for: 10m\n  latency_window: 2m\n  suspend_when: pool_at_min_size\n  settle: 1m\n  min_interval: 1m\n  max_changes_per_hour: 4\n  state_file: /tmp/s.json\n  wpq_levers:\n    osd_max_backfills: \"1\"\n",
            &Overrides::default(),
        )
        .unwrap();
        let p = s.policy;
        assert_eq!(p.mode, Mode::Enforce);
        assert_eq!(p.baseline, BaselineSpec::Fixed(Duration::from_millis(16)));
        assert_eq!(p.multiplier, 2.5);
        assert_eq!(p.breach_for, Duration::from_secs(600));
        assert_eq!(p.latency_window, Duration::from_secs(120));
        assert_eq!(p.suspend_when, SuspendWhen::PoolAtMinSize);
        assert_eq!(p.max_changes_per_hour, 4);
        assert_eq!(p.wpq_levers.len(), 1);
        for (yaml, expect) in [
            ("enforcer:\n  multiplier: 0.5\n", "line 2"),
            (
                "enforcer:\n  baseline: soon\n",
                "expected a duration like 16ms",
            ),
            ("enforcer:\n  mode: on\n", "line 2"),
            (
                "enforcer:\n  throttle_profile: fast\n",
                "unknown mClock profile",
            ),
            ("enforcer:\n  suspend_when: always\n", "line 2"),
            ("enforcer:\n  max_changes_per_hour: 0\n", "at least 1"),
            ("enforcer:\n  for_: 1m\n", "unknown field"),
        ] {
            let err = resolve(yaml, &Overrides::default())
                .unwrap_err()
                .to_string();
            assert!(err.contains(expect), "{yaml:?}: {err}");
        }
    }

    #[test]
    fn enforcer_flags_override_the_file() {
        let flags = Overrides {
            enforcer: EnforcerOverrides {
                baseline: Some("learned".parse().unwrap()),
                mode: Some(Mode::Off),
                ..Default::default()
            },
            ..Overrides::default()
        };
        let s = resolve("enforcer:\n  mode: enforce\n  baseline: 16ms\n", &flags).unwrap();
        assert_eq!(s.policy.mode, Mode::Off);
        assert_eq!(s.policy.baseline, BaselineSpec::Learned);
    }

    #[test]
    fn the_ladder_is_read_from_the_file_and_checked() {
        let s = resolve(
            "collect:\n  interval: 5s\nenforcer:\n  latency_window: 1m\n  ladder_settle: 2m\n  max_rung: 2\n  recovery_limits: [500, 50]\n  pause_period: 20s\n  pause_max_share: 0.5\n",
            &Overrides::default(),
        )
        .unwrap();
        let l = &s.policy.ladder;
        assert_eq!(l.max_rung, 2);
        assert_eq!(l.settle, Duration::from_secs(120));
        assert_eq!(l.recovery_limits, vec![500, 50]);
        assert_eq!(l.pause.period, 20.0);
        assert_eq!(l.pause.max_share, 0.5);
        assert_eq!(l.pause.tick, 5.0, "the flags change once per collection");
        for (yaml, words) in [
            ("enforcer:\n  max_rung: 4\n", vec!["max_rung 4", "line 2"]),
            (
                "enforcer:\n  latency_window: 5m\n  ladder_settle: 1m\n",
                vec!["ladder_settle 1m", "latency window 5m"],
            ),
            (
                "enforcer:\n  recovery_limits: [100, 300]\n",
                vec!["each lower than the one before"],
            ),
            ("enforcer:\n  pause_max_share: 1.0\n", vec!["at most 0.9"]),
            (
                "enforcer:\n  pause_period: 30s\n",
                vec!["four collection intervals"],
            ),
            ("enforcer:\n  descend_below: 1.2\n", vec!["between 0 and 1"]),
        ] {
            let err = resolve(yaml, &Overrides::default())
                .unwrap_err()
                .to_string();
            for w in words {
                assert!(err.contains(w), "{yaml}: {err}");
            }
        }
        let flags = Overrides {
            enforcer: EnforcerOverrides {
                max_rung: Some(0),
                ..Default::default()
            },
            ..Overrides::default()
        };
        let err = resolve("", &flags).unwrap_err().to_string();
        assert!(err.contains("--enforcer.max-rung"), "{err}");
    }

    #[test]
    fn the_ceph_backend_is_read_checked_and_overridden() {
        assert_eq!(
            resolve("", &Overrides::default()).unwrap().ceph_backend,
            BackendChoice::Auto
        );
        let s = resolve("ceph:\n  backend: cli\n", &Overrides::default()).unwrap();
        assert_eq!(s.ceph_backend, BackendChoice::Cli);
        let flags = Overrides {
            ceph_backend: Some(BackendChoice::Auto),
            ..Overrides::default()
        };
        let s = resolve("ceph:\n  backend: cli\n", &flags).unwrap();
        assert_eq!(s.ceph_backend, BackendChoice::Auto);

        let err = parse("ceph:\n  backend: rados\n").unwrap_err().to_string();
        assert!(err.contains("line 2") && err.contains("rados"), "{err}");

        let librados = resolve("ceph:\n  backend: librados\n", &Overrides::default());
        if LIBRADOS_BUILT {
            assert_eq!(librados.unwrap().ceph_backend, BackendChoice::Librados);
            // librados does not run --ceph-cmd: a wrapper would be silently ignored.
            let err = resolve(
                "ceph:\n  cmd: cephadm shell -- ceph\n  backend: librados\n",
                &Overrides::default(),
            )
            .unwrap_err()
            .to_string();
            assert!(err.starts_with("crb.yml line 3 column"), "{err}");
            assert!(
                err.contains("ceph.backend") && err.contains("cephadm"),
                "{err}"
            );
        } else {
            let err = librados.unwrap_err().to_string();
            assert!(err.starts_with("crb.yml line 2 column"), "{err}");
            assert!(err.contains("built without librados"), "{err}");
        }
    }

    #[test]
    fn listen_address_accepts_port_only() {
        let a: ListenAddress = ":9100".parse().unwrap();
        assert_eq!(a.0, "0.0.0.0:9100".parse().unwrap());
    }
}
