//! The librados backend against the real lab cluster (scripts/ceph-lab), beside the CLI: every
//! command the program sends gives the same output through both (bytes where the cluster does
//! not change between two calls, parsed values where it does), and a collection cycle through
//! librados is at least 10x faster.
//!
//! Read-only but for one option set to its default value and removed again (`config set/rm
//! osd`, checked absent before). Run by scripts/test (`CRB_LAB=1`, `--features librados`):
//!   CRB_LAB=1 cargo test --features librados --test lab_librados -- --include-ignored --nocapture
#![cfg(feature = "librados")]

mod common;

use std::time::{Duration, Instant};

use ceph_recovery_budget::ceph::any::{self, Backend, BackendChoice};
use ceph_recovery_budget::ceph::cli::{CliClient, CliSettings};
use ceph_recovery_budget::ceph::parse::{self, tell};
use ceph_recovery_budget::ceph::rados::RadosClient;
use ceph_recovery_budget::ceph::{CephCommand, Client, Output};
use ceph_recovery_budget::collect::commands;

use common::*;

/// Harmless to set: scrub read size, set to its default (512 KiB) for a moment, then removed.
const TEST_KEY: &str = "osd_deep_scrub_stride";
const TEST_VALUE: &str = "524288";

struct Lab {
    cli: CliClient,
    rados: RadosClient,
    settings: CliSettings,
    rt: tokio::runtime::Runtime,
}

impl Lab {
    fn new() -> Self {
        assert!(
            lab_enabled(),
            "set CRB_LAB=1 with the lab running (scripts/test does both)"
        );
        let dir = lab_env_var("CEPH_LAB_DIR");
        let settings = CliSettings {
            command: vec!["ceph".into()],
            conf: Some(lab_env_var("CEPH_CONF")),
            name: Some("client.admin".into()),
            keyring: Some(format!("{dir}/client.admin.keyring")),
            timeout: Duration::from_secs(30),
            max_reply_bytes: ceph_recovery_budget::ceph::DEFAULT_MAX_REPLY_BYTES,
        };
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("runtime");
        let rados = rt
            .block_on(RadosClient::connect(
                settings.conf.as_deref(),
                settings.name.as_deref(),
                settings.keyring.as_deref(),
                settings.timeout,
            ))
            .expect("librados connects to the lab");
        Lab {
            cli: CliClient::new(&settings),
            rados,
            settings,
            rt,
        }
    }

    fn cli(&self, c: &CephCommand) -> Output {
        self.rt
            .block_on(self.cli.run(c))
            .unwrap_or_else(|e| panic!("CLI {c}: {e}"))
    }

    fn rados(&self, c: &CephCommand) -> Output {
        self.rt
            .block_on(self.rados.run(c))
            .unwrap_or_else(|e| panic!("librados {c}: {e}"))
    }

    /// Both outputs, the CLI's first.
    fn both(&self, words: &[&str]) -> (Output, Output) {
        let c = CephCommand::new(words.iter().copied());
        (self.cli(&c), self.rados(&c))
    }

    /// Same stdout bytes, stderr and exit code.
    fn same_bytes(&self, words: &[&str]) -> Output {
        let (cli, rados) = self.both(words);
        assert_same_bytes(words, &cli, &rados);
        rados
    }
}

fn assert_same_bytes(words: &[&str], cli: &Output, rados: &Output) {
    assert!(
        cli.stdout == rados.stdout,
        "{words:?}: stdout differs\nCLI:      {:?}\nlibrados: {:?}",
        excerpt(&cli.stdout),
        excerpt(&rados.stdout)
    );
    assert_eq!(cli.stderr, rados.stderr, "{words:?}: stderr");
    assert_eq!(cli.code, rados.code, "{words:?}: exit code");
}

fn excerpt(b: &[u8]) -> String {
    String::from_utf8_lossy(&b[..b.len().min(200)]).into_owned()
}

/// The `osd`-section value of `key` in a `config dump` output, if set.
fn dumped(out: &Output, key: &str) -> Option<String> {
    parse::config_dump::parse(&out.stdout)
        .expect("config dump parses")
        .into_iter()
        .find(|e| e.section == "osd" && e.name == key && e.mask.is_empty())
        .map(|e| e.value)
}

/// Puts the test key back (removes it) whatever happens to the test.
struct RemoveTestKey<'a>(&'a Lab);

impl Drop for RemoveTestKey<'_> {
    fn drop(&mut self) {
        let _ = self.0.rt.block_on(
            self.0
                .cli
                .run(&CephCommand::new(["config", "rm", "osd", TEST_KEY])),
        );
    }
}

#[test]
#[ignore = "needs the lab cluster and --features librados: scripts/test runs it"]
fn librados_prints_what_the_cli_prints_on_the_lab() {
    let lab = Lab::new();

    // Stable answers: byte for byte, stderr and exit code included.
    for words in [
        &["osd", "pool", "ls", "detail"][..],
        &["osd", "ls"],
        &["osd", "tree"],
        &["config", "get", "osd", "osd_mclock_profile"],
        &["config", "get", "osd", "osd_op_queue"],
        &["config", "dump"],
        &["tell", "osd.*", "config", "get", "osd_mclock_profile"],
        &["tell", "osd.*", "config", "get", "osd_op_queue"],
        &["tell", "osd.0", "config", "get", "osd_op_queue"],
        // Errors: the same message and exit code.
        &["config", "get", "osd", "crb_no_such_option"],
        &["tell", "osd.*", "config", "get", "crb_no_such_option"],
        &["tell", "osd.99", "perf", "histogram", "dump"],
        &["pg", "ls", "undersizedX"],
    ] {
        lab.same_bytes(words);
    }
    let pools = parse::pools::parse(&lab.same_bytes(&["osd", "pool", "ls", "detail"]).stdout)
        .expect("pools parse");
    assert!(pools.iter().any(|p| p.name == "rbd-vms" && p.size == 3));

    // status: the PG counts may move between two calls on a busy lab; a few tries for a pair
    // that agrees.
    let mut agreed = false;
    for _ in 0..5 {
        let (cli, rados) = lab.both(&["status"]);
        assert_eq!((cli.code, rados.code), (Some(0), Some(0)));
        assert!(cli.stdout.starts_with(b"\n{") && rados.stdout.starts_with(b"\n{"));
        let (c, r) = (
            parse::status::parse(&cli.stdout).expect("CLI status parses"),
            parse::status::parse(&rados.stdout).expect("librados status parses"),
        );
        assert!(c.fsid.is_some());
        assert_eq!(c.fsid, r.fsid, "fsid");
        assert_eq!(c.num_pgs, r.num_pgs, "num_pgs");
        assert_eq!(c.num_osds, r.num_osds, "num_osds");
        if c.pgs_by_state == r.pgs_by_state && c.num_up_osds == r.num_up_osds {
            agreed = true;
            break;
        }
        std::thread::sleep(Duration::from_secs(2));
    }
    assert!(
        agreed,
        "status: PG states never agreed between CLI and librados"
    );

    // pg dump pgs_brief (the collector's), pg ls undersized (its fallback) and pg ls: the same
    // PGs.
    for words in [
        &["pg", "dump", "pgs_brief"][..],
        &["pg", "ls", "undersized"],
        &["pg", "ls"],
    ] {
        let (cli, rados) = lab.both(words);
        assert_eq!((cli.code, rados.code), (Some(0), Some(0)), "{words:?}");
        let ids = |o: &Output| -> Vec<String> {
            parse::pgs::parse(&o.stdout)
                .unwrap_or_else(|e| panic!("{words:?} parses: {e}"))
                .into_iter()
                .map(|p| p.pgid)
                .collect()
        };
        assert_eq!(ids(&cli), ids(&rados), "{words:?}");
    }

    // Histograms: the same OSDs in the same order, the same axes, counters no lower (taken
    // after the CLI's), and the same layout (blank line, `osd.N: `, one line per OSD).
    let collector_histograms = commands::histograms();
    let words: Vec<&str> = collector_histograms
        .args
        .iter()
        .map(String::as_str)
        .collect();
    for words in [&words[..], &["tell", "osd.*", "perf", "histogram", "dump"]] {
        let (cli, rados) = lab.both(words);
        assert_eq!(cli.code, rados.code);
        assert_eq!(cli.stderr, rados.stderr);
        let split = |o: &Output| -> Vec<(String, ceph_recovery_budget::latency::Histogram)> {
            tell::split(std::str::from_utf8(&o.stdout).expect("UTF-8"))
                .into_iter()
                .map(|p| {
                    let d = p.expect("attributed reply");
                    let h = parse::histogram::parse_write_latency(d.body.as_bytes())
                        .expect("histogram parses");
                    (d.daemon, h)
                })
                .collect()
        };
        let (c, r) = (split(&cli), split(&rados));
        assert_eq!(c.len(), 4, "{words:?}: 4 OSDs answered the CLI");
        assert_eq!(
            c.iter().map(|(d, _)| d).collect::<Vec<_>>(),
            r.iter().map(|(d, _)| d).collect::<Vec<_>>()
        );
        for ((d, ch), (_, rh)) in c.iter().zip(&r) {
            assert_eq!(ch.bounds, rh.bounds, "{words:?} {d}");
            let (cn, rn): (u64, u64) = (ch.counts.iter().sum(), rh.counts.iter().sum());
            assert!(rn >= cn, "{d}: librados count {rn} < CLI count {cn}");
        }
        let shape = |o: &Output| -> Vec<String> {
            String::from_utf8_lossy(&o.stdout)
                .split('\n')
                .map(|l| l.split(':').next().unwrap_or("").to_string())
                .collect()
        };
        assert_eq!(shape(&cli), shape(&rados), "layout of the tell output");
    }

    // The histograms' `_sum`: `perf dump osd op_w_latency`, filtered by logger and counter
    // through both. The same OSDs and layout, one counter each, no lower through librados
    // (asked after the CLI), and, with no write in between (the lab is idle here), the same.
    let sums = commands::write_latency_sums();
    let words: Vec<&str> = sums.args.iter().map(String::as_str).collect();
    let (cli, rados) = lab.both(&words);
    assert_eq!((cli.code, rados.code), (Some(0), Some(0)), "{}", cli.stderr);
    let split = |o: &Output| -> Vec<(String, ceph_recovery_budget::latency::LatencySum)> {
        tell::split(std::str::from_utf8(&o.stdout).expect("UTF-8"))
            .into_iter()
            .map(|p| {
                let d = p.expect("attributed reply");
                assert!(
                    d.body.starts_with(r#"{"osd":{"op_w_latency":{"avgcount":"#),
                    "only the one counter: {}",
                    d.body
                );
                let s = parse::perf_dump::parse_write_latency_sum(d.body.as_bytes())
                    .expect("op_w_latency parses");
                (d.daemon, s)
            })
            .collect()
    };
    let (c, r) = (split(&cli), split(&rados));
    assert_eq!(c.len(), 4, "4 OSDs answered the CLI");
    for ((cd, cs), (rd, rs)) in c.iter().zip(&r) {
        assert_eq!(cd, rd);
        assert!(
            rs.count >= cs.count && rs.seconds >= cs.seconds,
            "{cd}: {rs:?} < {cs:?}"
        );
    }

    // config set / get / rm of an option at its default value, through both.
    let dump = lab.same_bytes(&["config", "dump"]);
    if let Some(v) = dumped(&dump, TEST_KEY) {
        eprintln!("lab: {TEST_KEY} is set ({v}) by someone else: set/rm not tested");
    } else {
        let _put_back = RemoveTestKey(&lab);
        let set = CephCommand::new(["config", "set", "osd", TEST_KEY, TEST_VALUE]);
        let rm = CephCommand::new(["config", "rm", "osd", TEST_KEY]);
        let get = ["config", "get", "osd", TEST_KEY];
        let (cli_set, rados_set) = (lab.cli(&set), lab.rados(&set));
        assert_same_bytes(&["config", "set"], &cli_set, &rados_set);
        let got = lab.same_bytes(&get);
        assert_eq!(
            parse::config_value::parse_plain(&got.stdout).as_deref(),
            Ok(TEST_VALUE)
        );
        assert_eq!(
            dumped(&lab.rados(&CephCommand::new(["config", "dump"])), TEST_KEY).as_deref(),
            Some(TEST_VALUE)
        );
        let rados_rm = lab.rados(&rm);
        assert_eq!(
            dumped(&lab.cli(&CephCommand::new(["config", "dump"])), TEST_KEY),
            None,
            "removed through librados"
        );
        let cli_rm = lab.cli(&rm);
        assert_same_bytes(&["config", "rm"], &cli_rm, &rados_rm);
    }

    // `auto` picks librados here; the CLI for a wrapper.
    let selected = lab
        .rt
        .block_on(any::select(BackendChoice::Auto, &lab.settings))
        .expect("select");
    assert_eq!(
        selected.client.backend(),
        Backend::Librados,
        "{}",
        selected.why
    );
}

/// The median of `n` runs of `f`.
fn median(n: usize, mut f: impl FnMut()) -> Duration {
    let mut times: Vec<Duration> = (0..n)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed()
        })
        .collect();
    times.sort();
    times[n / 2]
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1000.0)
}

/// Per command and per collection cycle (the collector's commands, one after the other).
#[test]
#[ignore = "needs the lab cluster and --features librados: scripts/test runs it"]
fn a_cycle_through_librados_is_at_least_10x_faster_than_through_the_cli() {
    let lab = Lab::new();
    let cycle = [
        commands::status(),
        commands::pools(),
        commands::pgs_brief(),
        commands::histograms(),
        commands::osd_config_get("osd_op_queue"),
        commands::osd_config_get("osd_mclock_profile"),
    ];
    eprintln!("| command | CLI | librados |");
    eprintln!("|---|---|---|");
    for c in cycle.iter().chain([&CephCommand::new(["config", "dump"])]) {
        let cli = median(5, || {
            lab.cli(c);
        });
        let rados = median(5, || {
            lab.rados(c);
        });
        eprintln!("| `{c}` | {} | {} |", ms(cli), ms(rados));
    }
    let run_cycle = |through_rados: bool| {
        for c in &cycle {
            let out = if through_rados {
                lab.rados(c)
            } else {
                lab.cli(c)
            };
            assert_eq!(out.code, Some(0), "{c}: {}", out.stderr);
        }
    };
    let cli = median(3, || run_cycle(false));
    let rados = median(3, || run_cycle(true));
    let factor = cli.as_secs_f64() / rados.as_secs_f64();
    eprintln!(
        "| one cycle ({} commands) | {} | {} ({factor:.0}x faster) |",
        cycle.len(),
        ms(cli),
        ms(rados)
    );
    assert!(
        factor >= 10.0,
        "a cycle through librados ({}) is only {factor:.1}x faster than through the CLI ({})",
        ms(rados),
        ms(cli)
    );
}

/// `serve --ceph.backend librados` on the lab: every collector up, the backend on /metrics.
#[test]
#[ignore = "needs the lab cluster and --features librados: scripts/test runs it"]
fn serve_runs_on_librados_and_says_so() {
    assert!(lab_enabled(), "set CRB_LAB=1 with the lab running");
    let exporter = Exporter::start(&[
        "--ceph.backend",
        "librados",
        "--enforcer.mode",
        "off",
        "--collect.interval",
        "2s",
        "--recovery.window",
        "10s",
        "--latency.window",
        "10s",
    ]);
    let m = exporter.wait_metrics(
        Duration::from_secs(60),
        "every collector up through librados",
        |m| {
            ["status", "pools", "pgs", "latency", "scheduler"]
                .iter()
                .all(|c| {
                    m.get(&format!(
                        "ceph_recovery_budget_collector_up{{collector=\"{c}\"}}"
                    )) == Some(1.0)
                })
        },
    );
    assert_eq!(
        m.get("ceph_recovery_budget_backend_info{backend=\"librados\"}"),
        Some(1.0)
    );
    for osd in 0..4 {
        assert!(
            m.get(&format!(
                "ceph_osd_op_w_latency_count{{ceph_daemon=\"osd.{osd}\"}}"
            ))
            .is_some(),
            "osd.{osd}'s histogram"
        );
    }
}

/// A cephx user with only `mon 'allow r'` (what the exporter alone needs): each change the
/// enforcer can make is refused with EACCES, and both backends report it as `permission_denied`
/// with a message naming the caps, not as a failure worth retrying.
#[test]
#[ignore = "needs the lab cluster and --features librados: scripts/test runs it"]
fn a_user_without_write_caps_is_told_permission_denied_by_both_backends() {
    use ceph_recovery_budget::ceph::ops;
    let lab = Lab::new();
    let dir = lab_env_var("CEPH_LAB_DIR");
    let keyring = format!("{dir}/client.crb-readonly.keyring");
    let made = std::process::Command::new("ceph")
        .args(["--conf", lab.settings.conf.as_deref().expect("conf")])
        .args([
            "auth",
            "get-or-create",
            "client.crb-readonly",
            "mon",
            "allow r",
            "-o",
        ])
        .arg(&keyring)
        .status()
        .expect("run ceph auth get-or-create");
    assert!(
        made.success(),
        "ceph auth get-or-create client.crb-readonly"
    );
    let settings = CliSettings {
        name: Some("client.crb-readonly".into()),
        keyring: Some(keyring.clone()),
        ..lab.settings.clone()
    };
    let cli = CliClient::new(&settings);
    let rados = lab
        .rt
        .block_on(RadosClient::connect(
            settings.conf.as_deref(),
            settings.name.as_deref(),
            settings.keyring.as_deref(),
            settings.timeout,
        ))
        .expect("librados connects as the read-only user");
    for (backend, result) in [
        (
            "cli",
            lab.rt
                .block_on(ops::config_set_osd(&cli, TEST_KEY, TEST_VALUE)),
        ),
        (
            "librados",
            lab.rt
                .block_on(ops::config_set_osd(&rados, TEST_KEY, TEST_VALUE)),
        ),
        ("cli", lab.rt.block_on(ops::osd_set_flag(&cli, "noout"))),
        (
            "librados",
            lab.rt.block_on(ops::osd_set_flag(&rados, "noout")),
        ),
    ] {
        let e = result.expect_err("a read-only user cannot change the cluster");
        assert_eq!(e.reason(), "permission_denied", "{backend}: {e}");
        assert!(e.to_string().contains("caps"), "{backend}: {e}");
    }
    // Reads still work for that user.
    lab.rt
        .block_on(ops::status(&cli))
        .expect("the read-only user reads ceph status");
    // Nothing was changed: the key is not set, noout not set.
    let flags = lab.rt.block_on(ops::osd_flags(&lab.cli)).expect("osd dump");
    assert!(!flags.contains("noout"), "{flags:?}");
}
