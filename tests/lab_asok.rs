//! Against the real lab cluster's admin sockets (scripts/ceph-lab): host mode's
//! `AdminSocketClient` reads the same histograms as `ceph tell`. Read-only: the lab is neither
//! started, stopped nor reconfigured here (others may be using it).
//! Run with `CRB_LAB=1 cargo test --test lab_asok -- --include-ignored --nocapture`.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use ceph_recovery_budget::ceph::admin_socket::{self, AdminSocketClient};
use ceph_recovery_budget::ceph::parse::{histogram, tell};
use ceph_recovery_budget::ceph::{CephCommand, Client};
use common::*;

const TIMEOUT: Duration = Duration::from_secs(10);

/// The lab's admin socket directory: `CRB_LAB_ASOK_DIR`, else the directory of osd.0's `admin
/// socket` as the lab's ceph.conf sets it (read with ceph-conf, which asks no daemon).
fn asok_dir() -> PathBuf {
    if let Ok(dir) = std::env::var("CRB_LAB_ASOK_DIR") {
        return PathBuf::from(dir);
    }
    let out = Command::new("ceph-conf")
        .args(["--name", "osd.0", "--show-config-value", "admin_socket"])
        .envs(lab_env())
        .output()
        .expect("run ceph-conf");
    assert!(out.status.success(), "ceph-conf: {out:?}");
    let socket = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    socket
        .parent()
        .expect("admin socket has a directory")
        .to_path_buf()
}

fn require_lab() {
    assert!(
        lab_enabled(),
        "set CRB_LAB=1 with the lab running (scripts/ceph-lab start)"
    );
}

/// `ceph tell osd.N perf histogram dump` (single target: the document alone).
fn tell_histogram(daemon: &str) -> ceph_recovery_budget::latency::Histogram {
    let v = ceph_json(&["tell", daemon, "perf", "histogram", "dump"]);
    histogram::write_latency_from_value(&v).unwrap_or_else(|e| panic!("tell {daemon}: {e}"))
}

#[tokio::test]
#[ignore = "needs the lab cluster: CRB_LAB=1"]
async fn asok_histograms_match_tell() {
    require_lab();
    let dir = asok_dir();
    let sockets = admin_socket::discover_osd_sockets(&dir).unwrap();
    eprintln!("lab: OSD sockets in {}: {sockets:?}", dir.display());
    assert!(!sockets.is_empty(), "no OSD socket in {}", dir.display());

    let client = AdminSocketClient::new(&dir, TIMEOUT);
    let command = CephCommand::new(["tell", "osd.*", "perf", "histogram", "dump"]);
    let out = client.run(&command).await.unwrap();
    eprintln!(
        "lab: admin sockets answered in {:?} (code {:?}, stderr {:?})",
        out.elapsed, out.code, out.stderr
    );
    let text = String::from_utf8(out.stdout.clone()).unwrap();
    let mut answered = 0;
    for part in tell::split(&text) {
        let d = part.unwrap();
        let ours = histogram::parse_write_latency(d.body.as_bytes()).unwrap();
        // Taken right after ours: counters only grow (barring an OSD restart in between).
        let theirs = tell_histogram(&d.daemon);
        assert_eq!(ours.bounds, theirs.bounds, "{}", d.daemon);
        let (sum_ours, sum_theirs): (u64, u64) =
            (ours.counts.iter().sum(), theirs.counts.iter().sum());
        eprintln!(
            "lab: {} writes: asok {sum_ours}, tell {sum_theirs}",
            d.daemon
        );
        assert!(sum_ours > 0, "{}: no write counted", d.daemon);
        for (i, (a, b)) in ours.counts.iter().zip(&theirs.counts).enumerate() {
            assert!(a <= b, "{} bucket {i}: asok {a} > tell {b}", d.daemon);
        }
        answered += 1;
    }
    // Every socket answered, or is named on stderr (an OSD stopped by someone else).
    let failed = tell::stderr_errors(&out.stderr);
    assert_eq!(answered + failed.len(), sockets.len(), "{failed:?}");
    assert!(answered > 0);
    assert_eq!(out.code, Some(if failed.is_empty() { 0 } else { 6 }));
}

/// Records tests/fixtures/asok/ (see its README) when CRB_ASOK_CAPTURE=1; otherwise does
/// nothing.
#[tokio::test]
#[ignore = "records fixtures from the lab: CRB_LAB=1 CRB_ASOK_CAPTURE=1"]
async fn capture_fixtures() {
    if std::env::var("CRB_ASOK_CAPTURE").as_deref() != Ok("1") {
        eprintln!("CRB_ASOK_CAPTURE=1 not set: nothing recorded");
        return;
    }
    require_lab();
    let dir = asok_dir();
    let fixtures = repo().join("tests/fixtures/asok");
    std::fs::create_dir_all(&fixtures).unwrap();
    let write = |name: &str, bytes: &[u8]| {
        std::fs::write(fixtures.join(name), bytes).unwrap();
        eprintln!("wrote {name} ({} bytes)", bytes.len());
    };

    // 1. Our client, on two OSDs.
    for osd in ["osd.0", "osd.1"] {
        let reply = admin_socket::admin_command(
            &dir.join(format!("{osd}.asok")),
            &admin_socket::histogram_dump_request(),
            TIMEOUT,
        )
        .await
        .unwrap();
        write(&format!("{osd}.perf-histogram-dump.json"), &reply);
    }
    // 2. `ceph daemon` on the same socket (pretty-printed), for comparison.
    let socket = dir.join("osd.0.asok");
    let out = Command::new("ceph")
        .args([
            "daemon",
            &socket.to_string_lossy(),
            "perf",
            "histogram",
            "dump",
        ])
        .envs(lab_env())
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    write("ceph-daemon.osd.0.perf-histogram-dump.json", &out.stdout);
    // 3. `ceph tell 'osd.*'` right after: counts >= the admin sockets'.
    let out = Command::new("ceph")
        .args([
            "--format",
            "json",
            "tell",
            "osd.*",
            "perf",
            "histogram",
            "dump",
        ])
        .envs(lab_env())
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    write("tell-osd-all.perf-histogram-dump.out", &out.stdout);
    write("tell-osd-all.perf-histogram-dump.err", &out.stderr);
    // 4. A daemon's error reply, raw from the wire (length prefix included).
    write(
        "osd.0.unknown-prefix.wire",
        &raw_exchange(&socket, br#"{"prefix":"no such command"}"#),
    );
}

/// One exchange written out by hand (blocking std), to record exactly what the daemon sent.
fn raw_exchange(path: &Path, command: &[u8]) -> Vec<u8> {
    use std::io::{Read, Write};
    let mut s = std::os::unix::net::UnixStream::connect(path).unwrap();
    s.set_read_timeout(Some(TIMEOUT)).unwrap();
    s.write_all(command).unwrap();
    s.write_all(b"\0").unwrap();
    let mut all = Vec::new();
    s.read_to_end(&mut all).unwrap();
    all
}

/// `serve --mode host` on the lab: the histograms of the local OSDs from their admin sockets,
/// aggregated per host, with as many writes counted as `ceph tell` reports for all OSDs; no
/// cluster families; valid for promtool.
#[test]
#[ignore = "needs the lab cluster: CRB_LAB=1"]
fn host_mode_serves_the_local_histograms() {
    require_lab();
    let dir = asok_dir();
    let tell_before: u64 = (0..4)
        .map(|i| tell_histogram(&format!("osd.{i}")).total())
        .sum();
    let exporter = Exporter::start(&[
        "--mode",
        "host",
        "--host.asok-dir",
        dir.to_str().expect("utf-8 dir"),
        "--host.name",
        "lab-host",
        "--latency.aggregate",
        "host",
        "--collect.interval",
        "2s",
        "--latency.window",
        "10s",
        "--recovery.window",
        "10s",
    ]);
    let m = exporter.wait_metrics(Duration::from_secs(30), "latency collected", |m| {
        m.get("ceph_recovery_budget_collector_up{collector=\"latency\"}") == Some(1.0)
    });
    let count = m
        .get("ceph_osd_op_w_latency_bucket{host=\"lab-host\",le=\"+Inf\"}")
        .unwrap_or_else(|| panic!("no host-aggregated histogram:\n{}", m.text));
    let tell_after: u64 = (0..4)
        .map(|i| tell_histogram(&format!("osd.{i}")).total())
        .sum();
    assert!(
        count >= tell_before as f64 && count <= tell_after as f64,
        "{tell_before} <= {count} <= {tell_after}"
    );
    let buckets = m.with_prefix("ceph_osd_op_w_latency_bucket");
    assert!(
        buckets.len() > 20 && buckets.iter().all(|(s, _)| s.contains("host=\"lab-host\"")),
        "one host's buckets only: {buckets:?}"
    );
    // The `_sum` from the sockets' `perf dump osd op_w_latency`: a mean that is a latency.
    let sum = m
        .get("ceph_osd_op_w_latency_sum{host=\"lab-host\"}")
        .unwrap_or_else(|| panic!("no _sum from the admin sockets:\n{}", m.text));
    assert!(
        count > 0.0 && sum > 0.0 && sum / count > 1e-5 && sum / count < 1.0,
        "mean write latency {} s from _sum {sum} / _count {count}",
        sum / count
    );
    assert_eq!(
        m.get("ceph_pgs"),
        None,
        "host mode knows nothing of the cluster"
    );
    assert_eq!(
        m.get("ceph_recovery_budget_backend_info{backend=\"admin_socket\"}"),
        Some(1.0)
    );
    let out = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .and_then(|mut c| {
            use std::io::Write;
            if let Some(mut stdin) = c.stdin.take() {
                stdin.write_all(m.text.as_bytes())?;
            }
            c.wait_with_output()
        })
        .expect("promtool");
    assert!(out.status.success(), "promtool: {out:?}");
    drop(exporter);
}
