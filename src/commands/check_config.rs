//! `check-config`: a config file checked as `serve --config.file` would read it, and the
//! settings that result.

use std::path::Path;
use std::process::ExitCode;

use ceph_recovery_budget::ceph::any;
use ceph_recovery_budget::cli::CheckConfigArgs;
use ceph_recovery_budget::config::Settings;
use ceph_recovery_budget::enforcer::{self, BaselineSpec};
use ceph_recovery_budget::http::web_config::WebConfig;
use ceph_recovery_budget::settings::ServeMode;

use super::{finish, fio_baseline, print_out, settings_of_file};

pub fn run(args: CheckConfigArgs) -> ExitCode {
    finish(check_config(&args.file, args.web_config_file.as_deref()))
}

fn check_config(path: &Path, web_config: Option<&Path>) -> anyhow::Result<ExitCode> {
    let settings = settings_of_file(path)?;
    // A baseline report that cannot be read would stop `serve` at start: say it now.
    if let BaselineSpec::Fio(report) = &settings.policy.baseline {
        fio_baseline(report)?;
    }
    // So would a web config that cannot be loaded, certificates and key included.
    let web = web_config
        .or(settings.web_config_file.as_deref())
        .map(WebConfig::load)
        .transpose()?;
    print_out(&render(path, &settings, web.as_ref()));
    Ok(ExitCode::SUCCESS)
}

/// What `check-config` prints for valid settings read from `path`.
pub fn render(path: &Path, settings: &Settings, web: Option<&WebConfig>) -> String {
    let p = &settings.policy;
    let l = &settings.web_limits;
    let mut out = format!("{}: OK\n", path.display());
    out += &format!(
        "  listen {} path {}\n",
        settings.listen_address, settings.telemetry_path
    );
    if let Some(w) = web {
        out += &format!("  web config {}: {}\n", w.path.display(), w.describe());
    }
    out += &format!(
        "  http limits: {} requests in flight, {} connections, headers within {}, idle {}\n",
        if l.max_requests == 0 {
            "no limit of".to_string()
        } else {
            l.max_requests.to_string()
        },
        l.max_connections,
        humantime::format_duration(l.read_header_timeout),
        humantime::format_duration(l.idle_timeout)
    );
    out += &format!(
        "  ceph command: {} (timeout {})\n",
        settings.ceph.command.join(" "),
        humantime::format_duration(settings.ceph.timeout)
    );
    out += &format!(
        "  ceph backend: {}\n",
        any::describe(settings.ceph_backend, &settings.ceph)
    );
    out += &match settings.mode {
        ServeMode::Host => format!(
            "  mode host: the latency histograms of this host's OSDs from their admin sockets in {}\n",
            settings.asok_dir.display()
        ),
        ServeMode::Cluster if settings.prometheus.is_some() => {
            "  mode cluster: cluster state only (the histograms come from host-mode exporters, through Prometheus)\n".to_string()
        }
        ServeMode::Cluster => "  mode cluster: cluster state and every OSD's histogram\n".to_string(),
    };
    out += &format!(
        "  latency histograms published per {}, enforcer p99 from {}\n",
        settings.latency_aggregate.as_str(),
        match &settings.prometheus {
            Some(p) => format!("Prometheus {} ({})", p.url, p.query),
            None => "the histograms collected here".to_string(),
        }
    );
    out += &format!(
        "  collect every {}, recovery window {}, latency window {}\n",
        humantime::format_duration(settings.collect_interval),
        humantime::format_duration(settings.recovery_window),
        humantime::format_duration(settings.latency_window)
    );
    out += &format!(
        "  enforcer {}: baseline {}, bound {} x baseline, act after {} above it, suspend when {}, throttle {}, suspend {}, settle {}, at most {} changes/h {} apart, state file {}\n",
        p.mode.as_str(),
        p.baseline,
        p.multiplier,
        humantime::format_duration(p.breach_for),
        p.suspend_when.as_str(),
        p.throttle_profile,
        p.suspend_profile,
        humantime::format_duration(p.settle),
        p.max_changes_per_hour,
        humantime::format_duration(p.min_interval),
        p.state_file.display()
    );
    out += &format!("  {}\n", enforcer::ladder::describe(p));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use ceph_recovery_budget::settings::FileConfig;

    fn render_yaml(yaml: &str) -> String {
        let path = Path::new("crb.yml");
        let file = FileConfig::parse(path, yaml).expect("valid YAML");
        let settings = Settings::resolve(&file, path, &Default::default()).expect("valid settings");
        render(path, &settings, None)
    }

    #[test]
    fn the_defaults_are_said_in_full() {
        assert_eq!(
            render_yaml(""),
            "crb.yml: OK\n  \
             listen 0.0.0.0:9939 path /metrics\n  \
             http limits: 40 requests in flight, 128 connections, headers within 10s, idle 2m\n  \
             ceph command: ceph (timeout 10s)\n  \
             ceph backend: EXPECTED_BACKEND\n  \
             mode cluster: cluster state and every OSD's histogram\n  \
             latency histograms published per osd, enforcer p99 from the histograms collected here\n  \
             collect every 15s, recovery window 5m, latency window 5m\n  \
             enforcer observe: baseline learned, bound 2 x baseline, act after 30s above it, suspend when redundancy_at_risk, throttle high_client_ops, suspend high_recovery_ops, settle 5m, at most 6 changes/h 1m apart, state file /var/lib/ceph-recovery-budget/enforcer-state.json\n  \
             ladder: 1 high_client_ops (wpq: osd_max_backfills=1,osd_recovery_sleep_hdd=0.1); 2 none under mClock (--enforcer.recovery-limits none); wpq: osd_recovery_sleep 0.2/0.5/1 s; 3 backfill lever (at most N PGs backfill at once, the others held with pg-upmap-items; 4 recovery ops per PG before N is raised; its aim 5% of the bound lower per PG backfilling above one, down to 80%); 4 pause nobackfill+norecover 30%..80% of each 60 s, at most 30m0s per recovery (from rung 3 once N = 1 stays over the bound itself); each rung judged after 1m0s, up above 90% of the bound (the aim), down below 70%\n"
                .replace(
                    "EXPECTED_BACKEND",
                    // Said differently in a build with librados.
                    &any::describe(
                        any::BackendChoice::Auto,
                        &ceph_recovery_budget::ceph::cli::CliSettings {
                            command: vec!["ceph".into()],
                            conf: None,
                            name: None,
                            keyring: None,
                            timeout: std::time::Duration::from_secs(10),
                            max_reply_bytes: ceph_recovery_budget::ceph::DEFAULT_MAX_REPLY_BYTES,
                        }
                    )
                )
        );
    }

    #[test]
    fn every_part_of_a_full_file_is_said() {
        let text = render_yaml(
            "web:\n  listen_address: \"127.0.0.1:9100\"\n  telemetry_path: /m\nceph:\n  cmd: \"kubectl -n rook exec x -- ceph\"\n  timeout: 3s\n  backend: cli\ncollect:\n  interval: 5s\nrecovery:\n  window: 15m\nlatency:\n  window: 1m\n  aggregate: host\n  source: prometheus\nprometheus:\n  url: http://p:9090/x/\n  query: up\nenforcer:\n  mode: enforce\n  baseline: 16ms\n  multiplier: 2.5\n  for: 10m\n  latency_window: 2m\n  suspend_when: pool_at_min_size\n  throttle_profile: balanced\n  settle: 1m\n  min_interval: 1m\n  max_changes_per_hour: 4\n  state_file: /tmp/s.json\n  wpq_levers:\n    osd_max_backfills: \"2\"\n  max_rung: 2\n  ladder_settle: 3m\n  recovery_limits: [500, 50]\n  recovery_sleeps: [0.1, 0.3]\n  descend_below: 0.5\n",
        );
        assert_eq!(
            text,
            "crb.yml: OK\n  \
             listen 127.0.0.1:9100 path /m\n  \
             http limits: 40 requests in flight, 128 connections, headers within 10s, idle 2m\n  \
             ceph command: kubectl -n rook exec x -- ceph (timeout 3s)\n  \
             ceph backend: cli (`kubectl -n rook exec x -- ceph`)\n  \
             mode cluster: cluster state only (the histograms come from host-mode exporters, through Prometheus)\n  \
             latency histograms published per host, enforcer p99 from Prometheus http://p:9090/x (up)\n  \
             collect every 5s, recovery window 15m, latency window 1m\n  \
             enforcer enforce: baseline 16.0 ms, bound 2.5 x baseline, act after 10m above it, suspend when pool_at_min_size, throttle balanced, suspend high_recovery_ops, settle 1m, at most 4 changes/h 1m apart, state file /tmp/s.json\n  \
             ladder: 1 balanced (wpq: osd_max_backfills=2); 2 recovery limit 500/50 IOPS (custom profile, Pacific OSDs only); wpq: osd_recovery_sleep 0.1/0.3 s; each rung judged after 3m0s, up above 90% of the bound (the aim), down below 50%\n"
        );
    }

    #[test]
    fn host_mode_says_where_the_sockets_are() {
        let text = render_yaml("mode: host\nhost:\n  asok_dir: /a\n");
        assert!(
            text.contains("  mode host: the latency histograms of this host's OSDs from their admin sockets in /a\n"),
            "{text}"
        );
        assert!(text.contains("  enforcer off: "), "{text}");
    }
}
