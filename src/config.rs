//! The settings of `serve`, resolved: flags over the file over defaults (merged in
//! [`crate::settings`], where each setting is declared), each value checked, then the rules
//! that involve several settings, naming where each value came from, and the running parts
//! built (the enforcer's [`Policy`]).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::ceph::any::BackendChoice;
use crate::ceph::cli::CliSettings;
use crate::enforcer::pause::PausePolicy;
use crate::enforcer::policy::{BaselineSpec, Controller, LadderPolicy, Mode, Policy};
use crate::http::limits::Limits;
use crate::latency::aggregate::Grouping;
use crate::lease::LeaseConfig;
use crate::settings::{
    ceph_words, ConfigError, FileConfig, Flags, HumanDuration, LatencySource, LogFormat, Merged,
    Origin, ServeMode,
};

/// Validated settings of `serve`.
#[derive(Debug, Clone, PartialEq)]
pub struct Settings {
    pub listen_address: SocketAddr,
    pub telemetry_path: String,
    /// `--web.config.file` (TLS, basic auth): loaded and checked by `serve` and `check-config`.
    pub web_config_file: Option<PathBuf>,
    pub web_limits: Limits,
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
    /// Enforce mode: where the lease lives and its durations.
    pub lease: LeaseSettings,
}

/// The enforcer's lease (one active instance per cluster).
#[derive(Debug, Clone, PartialEq)]
pub struct LeaseSettings {
    /// `None`: the first of `.mgr`, `device_health_metrics` that exists.
    pub pool: Option<String>,
    pub config: LeaseConfig,
}

#[derive(Debug, Clone, PartialEq)]
pub struct PrometheusSettings {
    pub url: String,
    pub query: String,
}

fn invalid(origin: &Origin, message: impl Into<String>) -> ConfigError {
    ConfigError::invalid(origin, message)
}

impl Settings {
    /// Merges flags over the file over defaults and checks the result. The values are taken in
    /// the order their checks run, so that of several errors the same one is said first.
    pub fn resolve(
        file: &FileConfig,
        file_path: &Path,
        flags: &Flags,
    ) -> Result<Self, ConfigError> {
        let m = Merged::new(flags, file, file_path);
        let (interval, interval_origin) = m.collect_interval.get()?;
        let (timeout, timeout_origin) = m.ceph_timeout.get()?;
        let (recovery_window, recovery_origin) = m.recovery_window.get()?;
        let (latency_window, latency_origin) = m.latency_window.get()?;
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
        let (telemetry_path, _) = m.telemetry_path.get()?;
        let (cmd, cmd_origin) = m.ceph_cmd.get()?;
        let words = ceph_words(&cmd).map_err(|e| invalid(&cmd_origin, e))?;
        let (ceph_backend, backend_origin) = m.ceph_backend.get()?;
        if ceph_backend == BackendChoice::Librados && words != ["ceph"] {
            return Err(invalid(&backend_origin, format!(
                "librados talks to the cluster of --ceph-conf itself, so the ceph command {cmd:?} (from {cmd_origin}) would be ignored; use backend cli (or auto) with a wrapper"
            )));
        }
        let (listen_address, _) = m.listen_address.get()?;
        let web_limits = Limits {
            max_requests: m.web_max_requests.get()?.0 as usize,
            max_connections: m.web_max_connections.get()?.0 as usize,
            read_header_timeout: m.web_read_header_timeout.get()?.0 .0,
            idle_timeout: m.web_idle_timeout.get()?.0 .0,
        };
        let mut policy = resolve_policy(&m, interval.0)?;
        let (mode, mode_origin) = m.mode.get()?;
        let (latency_aggregate, _) = m.latency_aggregate.get()?;
        let (latency_source, source_origin) = m.latency_source.get()?;
        if mode == ServeMode::Host {
            // Host mode sees no cluster state: nothing for an enforcer to judge by.
            if m.enforcer_mode.given() && policy.mode != Mode::Off {
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
                let (url, _) = m.prometheus_url.get()?;
                let Some(url) = url.filter(|u| !u.is_empty()) else {
                    return Err(invalid(&source_origin, "latency source prometheus needs the Prometheus to ask: --prometheus.url http://prometheus:9090 (or prometheus.url in the file)"));
                };
                if policy.baseline == BaselineSpec::Learned && policy.mode != Mode::Off {
                    return Err(invalid(&source_origin, "with latency source prometheus this exporter collects no histograms to learn a baseline from: set --enforcer.baseline to a duration (e.g. 16ms) or fio:FILE"));
                }
                let query = m.prometheus_query.get()?.0.unwrap_or_else(|| {
                    crate::latency::prometheus::default_query(policy.latency_window)
                });
                Some(PrometheusSettings {
                    url: url.trim_end_matches('/').to_string(),
                    query,
                })
            }
        };
        let lease = resolve_lease(&m, policy.mode, (timeout.0, &timeout_origin))?;
        Ok(Settings {
            lease,
            policy,
            listen_address: listen_address.0,
            telemetry_path,
            web_config_file: m.web_config_file.get()?.0,
            web_limits,
            ceph: CliSettings {
                command: words,
                conf: m.ceph_conf.get()?.0,
                name: m.ceph_name.get()?.0,
                keyring: m.ceph_keyring.get()?.0,
                timeout: timeout.0,
                max_reply_bytes: m.ceph_max_reply_bytes.get()?.0 .0,
            },
            ceph_backend,
            collect_interval: interval.0,
            recovery_window: recovery_window.0,
            latency_window: latency_window.0,
            log_level: m.log_level.get()?.0 .0,
            log_format: m.log_format.get()?.0,
            mode,
            latency_aggregate,
            latency_source,
            prometheus,
            asok_dir: m.host_asok_dir.get()?.0,
            host_name: m.host_name.get()?.0,
        })
    }
}

/// The lease's durations, checked against each other and, in enforce mode (the only one that
/// takes the lease), against the Ceph command timeout: the error names the setting given last
/// of those involved.
fn resolve_lease(
    m: &Merged,
    mode: Mode,
    (timeout, timeout_origin): (Duration, &Origin),
) -> Result<LeaseSettings, ConfigError> {
    let (pool, pool_origin) = m.lease_pool.get()?;
    if let Some(p) = pool.as_deref() {
        if p.trim().is_empty() || p.chars().any(char::is_whitespace) {
            return Err(invalid(&pool_origin, format!("lease pool {p:?} is not a pool name: give an existing pool (e.g. .mgr), or leave it unset for the default")));
        }
    }
    let (duration, origin) = m.lease_duration.get()?;
    let (renew, renew_origin) = m.lease_renew_deadline.get()?;
    let (retry, _) = m.lease_retry_period.get()?;
    let config = LeaseConfig::new(duration.0, renew.0, retry.0)
        .map_err(|e| invalid(&origin, e.to_string()))?;
    if mode == Mode::Enforce {
        if let Err(e) = config.check_command_timeout(timeout) {
            // Said against a value the operator gave (the defaults agree with each other).
            let given = [timeout_origin, &renew_origin, &origin]
                .into_iter()
                .find(|o| !matches!(o, Origin::Default(_)))
                .unwrap_or(&origin);
            return Err(invalid(given, e.to_string()));
        }
    }
    Ok(LeaseSettings {
        pool: pool.filter(|p| !p.is_empty()),
        config,
    })
}

fn resolve_ladder(
    m: &Merged,
    interval: Duration,
    latency_window: Duration,
) -> Result<LadderPolicy, ConfigError> {
    let d = LadderPolicy::default();
    let (max_rung, _) = m.max_rung.get()?;
    let (controller, _) = m.controller.get()?;
    let (max_level, _) = m.max_level.get()?;
    let (max_slowdown, _) = m.max_slowdown.get()?;
    let (backfill_lever, _) = m.backfill_lever.get()?;
    let (ops_per_pg, _) = m.backfill_ops_per_pg.get()?;
    let (settle, s_origin) = m.ladder_settle.get()?;
    // The default follows a longer latency window given alone: a rung is judged by a p99
    // measured entirely while it was held.
    let settle = match s_origin {
        Origin::Default(_) => HumanDuration(settle.0.max(latency_window)),
        _ => settle,
    };
    if settle.0 < latency_window {
        return Err(invalid(&s_origin, format!(
            "ladder_settle {} is shorter than the enforcer's latency window {}: a rung must be judged by a p99 measured entirely while it was held",
            humantime::format_duration(settle.0),
            humantime::format_duration(latency_window)
        )));
    }
    let (recovery_limits, _) = m.recovery_limits.get()?;
    let (recovery_sleeps, _) = m.recovery_sleeps.get()?;
    let (descend_below, _) = m.descend_below.get()?;
    let (aim, aim_origin) = m.aim.get()?;
    // The level controller's own default: the matrix's windows set it (levels::controller::AIM).
    let aim = match (&aim_origin, &controller) {
        (Origin::Default(_), Controller::Levels) => crate::enforcer::levels::controller::AIM,
        _ => aim,
    };
    if aim <= descend_below {
        return Err(invalid(&aim_origin, format!(
            "aim {aim} must be above descend_below {descend_below}: the ladder releases below descend_below x the bound and steps up above aim x the bound"
        )));
    }
    let (period, pp_origin) = m.pause_period.get()?;
    if period.0 < interval * 4 {
        return Err(invalid(&pp_origin, format!(
            "pause_period {} must be at least four collection intervals ({} each): the flags are set and unset once per cycle",
            humantime::format_duration(period.0),
            humantime::format_duration(interval)
        )));
    }
    let (max_share, _) = m.pause_max_share.get()?;
    let (max_total, _) = m.pause_max_total.get()?;
    Ok(LadderPolicy {
        controller,
        max_level,
        max_slowdown,
        max_rung,
        backfill_lever: backfill_lever == crate::enforcer::policy::OnOff::On,
        ops_per_pg,
        settle: settle.0,
        recovery_limits: recovery_limits.0,
        recovery_sleeps,
        descend_below,
        aim,
        pause: PausePolicy {
            period: period.0.as_secs_f64(),
            start_share: d.pause.start_share.min(max_share),
            step: d.pause.step,
            max_share,
            lower: descend_below,
            aim,
            max_total: max_total.0.as_secs_f64(),
            tick: interval.as_secs_f64(),
        },
    })
}

fn resolve_policy(m: &Merged, interval: Duration) -> Result<Policy, ConfigError> {
    let (latency_window, lw_origin) = m.enforcer_latency_window.get()?;
    let (learn_window, learn_origin) = m.learn_window.get()?;
    let (multiplier, _) = m.multiplier.get()?;
    let (min_interval, _) = m.min_interval.get()?;
    let (verify_after, va_origin) = m.verify_after.get()?;
    if verify_after.0 < interval {
        return Err(invalid(&va_origin, format!(
            "verify_after {} must be at least one collection interval ({}): the OSDs' profile is read once per cycle",
            humantime::format_duration(verify_after.0),
            humantime::format_duration(interval)
        )));
    }
    let (max_changes_per_hour, _) = m.max_changes_per_hour.get()?;
    let (throttle_profile, _) = m.throttle_profile.get()?;
    let (suspend_profile, _) = m.suspend_profile.get()?;
    let latency_window = latency_window.0;
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
    if learn_window.0 < latency_window {
        return Err(invalid(
            &learn_origin,
            format!(
                "learn window {} must be at least the latency window {}",
                humantime::format_duration(learn_window.0),
                humantime::format_duration(latency_window)
            ),
        ));
    }
    let ladder = resolve_ladder(m, interval, latency_window)?;
    let (wpq_levers, _) = m.wpq_levers.get()?;
    let (blind_restore_after, blind_origin) = m.blind_restore_after.get()?;
    if blind_restore_after.0 < interval * 2 {
        // One stale cycle is no evidence of blindness (data is stale after three intervals).
        return Err(invalid(
            &blind_origin,
            format!(
                "blind_restore_after {} must be at least two collection intervals ({} each)",
                humantime::format_duration(blind_restore_after.0),
                humantime::format_duration(interval)
            ),
        ));
    }
    Ok(Policy {
        mode: m.enforcer_mode.get()?.0,
        baseline: m.baseline.get()?.0,
        learn_window: learn_window.0,
        multiplier,
        breach_for: m.breach_for.get()?.0 .0,
        latency_window,
        suspend_when: m.suspend_when.get()?.0,
        throttle_profile,
        suspend_profile,
        wpq_levers,
        settle: m.settle.get()?.0 .0,
        min_interval: min_interval.0,
        max_changes_per_hour,
        verify_after: verify_after.0,
        ladder,
        state_file: m.state_file.get()?.0,
        ceph_user: m.ceph_name.get()?.0,
        on_exit: m.on_exit.get()?.0,
        exit_timeout: m.exit_timeout.get()?.0 .0,
        blind_restore_after: blind_restore_after.0,
        memory: m.memory.get()?.0 == crate::enforcer::policy::OnOff::On,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ceph::any::LIBRADOS_BUILT;
    use crate::enforcer::policy::{RecoveryLimit, SuspendWhen};
    use crate::settings::HumanDuration;

    fn parse(yaml: &str) -> Result<FileConfig, ConfigError> {
        FileConfig::parse(Path::new("crb.yml"), yaml)
    }

    fn resolve(yaml: &str, flags: &Flags) -> Result<Settings, ConfigError> {
        Settings::resolve(&parse(yaml)?, Path::new("crb.yml"), flags)
    }

    #[test]
    fn defaults_without_file_or_flags() {
        let s = resolve("", &Flags::default()).unwrap();
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
        let flags = |url: Option<&str>| Flags {
            latency_source: Some(LatencySource::Prometheus),
            prometheus_url: url.map(str::to_string),
            baseline: Some(BaselineSpec::Fixed(Duration::from_millis(16))),
            ..Flags::default()
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
        // https is asked with the system's CAs.
        let s = resolve("", &flags(Some("https://prometheus.example:9090"))).unwrap();
        assert_eq!(s.prometheus.unwrap().url, "https://prometheus.example:9090");
        for bad in ["ftp://mon1:9090", "mon1:9090", "http://mon1:9090/?x=1"] {
            let e = resolve("", &flags(Some(bad))).unwrap_err().to_string();
            assert!(
                e.starts_with("flag --prometheus.url") && e.contains("expected http://HOST:PORT"),
                "{bad}: {e}"
            );
        }
        // The same check, naming the file's key.
        let e = resolve(
            "latency:\n  source: prometheus\nprometheus:\n  url: ftp://mon1:9090\nenforcer:\n  baseline: 16ms\n",
            &Flags::default(),
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("prometheus.url"), "{e}");
        // No histogram to learn a baseline from.
        let learned = Flags {
            enforcer_mode: Some(Mode::Observe),
            baseline: Some(BaselineSpec::Learned),
            ..flags(Some("http://mon1:9090"))
        };
        let e = resolve("", &learned).unwrap_err().to_string();
        assert!(e.contains("set --enforcer.baseline"), "{e}");
    }

    #[test]
    fn every_key_in_the_file_is_read() {
        let s = resolve(
            "web:\n  listen_address: \"127.0.0.1:9100\"\n  telemetry_path: /m\nceph:\n  cmd: \"kubectl -n rook-ceph exec deploy/rook-ceph-tools -- ceph\"\n  conf: /etc/ceph/c.conf\n  name: client.crb\n  keyring: /k\n  timeout: 3s\ncollect:\n  interval: 5s\nrecovery:\n  window: 15m\nlatency:\n  window: 1m\nlog:\n  level: debug\n  format: json\n",
            &Flags::default(),
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
        let flags = Flags {
            collect_interval: Some(HumanDuration(Duration::from_secs(2))),
            ceph_cmd: Some("cephadm shell -- ceph".into()),
            ..Flags::default()
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
            &Flags::default(),
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("crb.yml line 4"), "{err}");
        assert!(err.contains("latency.window"), "{err}");
        assert!(err.contains("two collection intervals"), "{err}");
    }

    #[test]
    fn cross_field_errors_name_the_flag() {
        let flags = Flags {
            collect_interval: Some(HumanDuration(Duration::from_millis(100))),
            ..Flags::default()
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
            assert!(resolve(yaml, &Flags::default()).is_err(), "{yaml}");
        }
    }

    #[test]
    fn the_enforcer_policy_is_read_and_checked() {
        let s = resolve(
            "enforcer:\n  mode: enforce\n  baseline: 16ms\n  multiplier: 2.5\n  for: 10m\n  latency_window: 2m\n  suspend_when: pool_at_min_size\n  settle: 1m\n  min_interval: 1m\n  max_changes_per_hour: 4\n  state_file: /tmp/s.json\n  wpq_levers:\n    osd_max_backfills: \"1\"\n",
            &Flags::default(),
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
            let err = resolve(yaml, &Flags::default()).unwrap_err().to_string();
            assert!(err.contains(expect), "{yaml:?}: {err}");
        }
    }

    /// Issue 33.4: a command sent just before the leader stops must land before another
    /// instance can take over; enforce mode alone takes the lease, so it alone is refused.
    #[test]
    fn enforce_mode_refuses_a_lease_gap_shorter_than_the_ceph_timeout_and_its_margin() {
        let s = resolve(
            "enforcer:\n  mode: enforce\n  baseline: 16ms\n",
            &Flags::default(),
        )
        .expect("the defaults agree with each other");
        assert!(s.lease.config.check_command_timeout(s.ceph.timeout).is_ok());
        let err = resolve(
            "ceph:\n  timeout: 14s\nenforcer:\n  mode: enforce\n  baseline: 16ms\n",
            &Flags::default(),
        )
        .unwrap_err()
        .to_string();
        assert!(
            err.starts_with("crb.yml line 2 column 12: ceph.timeout: the lease duration (40s) minus the renew deadline (25s) leaves 15s between a leader's stop and a possible takeover, less than the Ceph command timeout (14s) plus a 2s margin"),
            "{err}"
        );
        assert!(
            err.contains("Give --enforcer.lease-duration 41s (a standby then takes over that much later after a crash), or --enforcer.lease-renew-deadline 24s (a leader that cannot renew stops sooner), or --ceph-timeout 13s (each Ceph command gets less time)"),
            "{err}"
        );
        // The flag given is the one named; observe mode takes no lease and is not refused.
        let flags = Flags {
            lease_renew_deadline: Some(HumanDuration(Duration::from_secs(39))),
            ..Flags::default()
        };
        let err = resolve("enforcer:\n  mode: enforce\n", &flags)
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with("flag --enforcer.lease-renew-deadline: the lease duration (40s) minus the renew deadline (39s) leaves 1s"),
            "{err}"
        );
        assert!(
            !err.contains("--ceph-timeout"),
            "no timeout would do with a 1s gap: {err}"
        );
        assert!(resolve("enforcer:\n  mode: observe\n", &flags).is_ok());
    }

    #[test]
    fn enforcer_flags_override_the_file() {
        let flags = Flags {
            baseline: Some("learned".parse().unwrap()),
            enforcer_mode: Some(Mode::Off),
            ..Flags::default()
        };
        let s = resolve("enforcer:\n  mode: enforce\n  baseline: 16ms\n", &flags).unwrap();
        assert_eq!(s.policy.mode, Mode::Off);
        assert_eq!(s.policy.baseline, BaselineSpec::Learned);
    }

    #[test]
    fn the_level_controller_aims_lower_unless_the_aim_is_given() {
        let aim = |yaml: &str| resolve(yaml, &Flags::default()).unwrap().policy.ladder.aim;
        assert_eq!(aim(""), 0.9, "the ladder's");
        assert_eq!(
            aim("enforcer:\n  controller: levels\n"),
            crate::enforcer::levels::controller::AIM
        );
        assert_eq!(aim("enforcer:\n  controller: levels\n  aim: 0.85\n"), 0.85);
    }

    #[test]
    fn the_ladder_is_read_from_the_file_and_checked() {
        let s = resolve(
            "collect:\n  interval: 5s\nenforcer:\n  latency_window: 1m\n  ladder_settle: 2m\n  max_rung: 2\n  recovery_limits: [500, 50]\n  pause_period: 20s\n  pause_max_share: 0.5\n",
            &Flags::default(),
        )
        .unwrap();
        let l = &s.policy.ladder;
        assert_eq!(l.max_rung, 2);
        assert_eq!(l.settle, Duration::from_secs(120));
        assert_eq!(
            l.recovery_limits,
            vec![RecoveryLimit::Iops(500), RecoveryLimit::Iops(50)]
        );
        let shares = resolve(
            "enforcer:\n  recovery_limits: [\"5%\", \"3%\"]\n",
            &Flags::default(),
        )
        .unwrap();
        assert_eq!(
            shares.policy.ladder.recovery_limits,
            vec![RecoveryLimit::Percent(5), RecoveryLimit::Percent(3)]
        );
        assert_eq!(l.pause.period, 20.0);
        assert_eq!(l.pause.max_share, 0.5);
        assert_eq!(l.pause.tick, 5.0, "the flags change once per collection");
        for (yaml, words) in [
            ("enforcer:\n  max_rung: 5\n", vec!["max_rung 5", "line 2"]),
            (
                "enforcer:\n  latency_window: 5m\n  ladder_settle: 1m\n",
                vec!["ladder_settle 1m", "latency window 5m"],
            ),
            (
                "enforcer:\n  recovery_limits: [100, 300]\n",
                vec!["each lower than the one before"],
            ),
            (
                "enforcer:\n  recovery_limits: [300, \"3%\"]\n",
                vec!["300,3%", "mixes IOPS and percentages"],
            ),
            (
                "enforcer:\n  recovery_limits: [\"0%\"]\n",
                vec!["from 1% to 100%"],
            ),
            (
                "enforcer:\n  recovery_limits: [\"3 percent\"]\n",
                vec!["3 percent", "neither a number of IOPS nor a percentage"],
            ),
            (
                "enforcer:\n  recovery_limits: [0.05]\n",
                vec!["0.05", "\"5%\""],
            ),
            ("enforcer:\n  pause_max_share: 1.0\n", vec!["at most 0.9"]),
            (
                "enforcer:\n  pause_period: 30s\n",
                vec!["four collection intervals"],
            ),
            ("enforcer:\n  descend_below: 1.2\n", vec!["between 0 and 1"]),
            ("enforcer:\n  aim: 1.1\n", vec!["aim 1.1", "at most 1"]),
            (
                "enforcer:\n  aim: 0.6\n",
                vec!["aim 0.6 must be above descend_below 0.7", "line 2"],
            ),
        ] {
            let err = resolve(yaml, &Flags::default()).unwrap_err().to_string();
            for w in words {
                assert!(err.contains(w), "{yaml}: {err}");
            }
        }
        let flags = Flags {
            max_rung: Some(0),
            ..Flags::default()
        };
        let err = resolve("", &flags).unwrap_err().to_string();
        assert!(err.contains("--enforcer.max-rung"), "{err}");
    }

    #[test]
    fn blind_restore_after_defaults_to_3m_and_needs_two_intervals() {
        let s = resolve("", &Flags::default()).unwrap();
        assert_eq!(s.policy.blind_restore_after, Duration::from_secs(180));
        let s = resolve("enforcer:\n  blind_restore_after: 10m\n", &Flags::default()).unwrap();
        assert_eq!(s.policy.blind_restore_after, Duration::from_secs(600));
        let flags = Flags {
            blind_restore_after: Some(HumanDuration(Duration::from_secs(20))),
            ..Flags::default()
        };
        let err = resolve("", &flags).unwrap_err().to_string();
        assert!(
            err.contains("--enforcer.blind-restore-after")
                && err.contains("two collection intervals"),
            "{err}"
        );
    }

    #[test]
    fn the_ceph_backend_is_read_checked_and_overridden() {
        assert_eq!(
            resolve("", &Flags::default()).unwrap().ceph_backend,
            BackendChoice::Auto
        );
        let s = resolve("ceph:\n  backend: cli\n", &Flags::default()).unwrap();
        assert_eq!(s.ceph_backend, BackendChoice::Cli);
        let flags = Flags {
            ceph_backend: Some(BackendChoice::Auto),
            ..Flags::default()
        };
        let s = resolve("ceph:\n  backend: cli\n", &flags).unwrap();
        assert_eq!(s.ceph_backend, BackendChoice::Auto);

        let err = parse("ceph:\n  backend: rados\n").unwrap_err().to_string();
        assert!(err.contains("line 2") && err.contains("rados"), "{err}");

        let librados = resolve("ceph:\n  backend: librados\n", &Flags::default());
        if LIBRADOS_BUILT {
            assert_eq!(librados.unwrap().ceph_backend, BackendChoice::Librados);
            // librados does not run --ceph-cmd: a wrapper would be silently ignored.
            let err = resolve(
                "ceph:\n  cmd: cephadm shell -- ceph\n  backend: librados\n",
                &Flags::default(),
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
}
