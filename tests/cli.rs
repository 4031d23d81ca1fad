//! The binary as a user runs it: exit codes, stdout/stderr, help.

use std::process::{Command, Stdio};

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_ceph-recovery-budget"))
}

fn fixture(rel: &str) -> String {
    format!("{}/tests/fixtures/{rel}", env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn fio_summary_prints_the_issue_json_and_plain_lines() {
    let out = bin()
        .args([
            "fio-summary",
            &fixture("fio/fio_base.json"),
            "--format",
            "json",
        ])
        .output()
        .unwrap();
    assert!(out.status.success());
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "{\"write\":{\"iops\":673.979311,\"bandwidth_bytes_per_second\":2760619.0,\"latency_seconds\":{\"p50\":0.022675456,\"p95\":0.042729472,\"p99\":0.056885248}}}\n"
    );
    let out = bin()
        .args(["fio-summary", &fixture("fio/fio_base.json")])
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "write: 674 IOPS, 2.63 MiB/s, clat p50 22.7 ms, p95 42.7 ms, p99 56.9 ms\n"
    );
}

#[test]
fn fio_summary_says_what_is_missing_on_stderr_and_refuses_non_fio() {
    let out = bin()
        .args([
            "fio-summary",
            &fixture("fio/fio-2.x-rbd-randread-debug_ms-1.txt"),
        ])
        .output()
        .unwrap();
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("cut short"));
    let out = bin()
        .args(["fio-summary", &fixture("fio/rados_bench_preload_4k.txt")])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("looks like `rados bench` output"));
}

#[test]
fn check_config_exits_non_zero_with_the_position_and_survives_a_closed_pipe() {
    let dir = std::env::temp_dir().join(format!("crb-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let bad = dir.join("bad.yml");
    std::fs::write(
        &bad,
        "collect:\n  interval: 15s\nenforcer:\n  multiplier: lots\n",
    )
    .unwrap();
    let out = bin()
        .args(["check-config", bad.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("bad.yml") && err.contains("line 4"), "{err}");

    let good = dir.join("good.yml");
    std::fs::write(&good, "enforcer:\n  mode: enforce\n  baseline: 16ms\n").unwrap();
    // `| head -1`: stdout closes early; no panic, exit 0.
    let mut child = bin()
        .args(["check-config", good.to_str().unwrap()])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!String::from_utf8_lossy(&out.stderr).contains("panicked"));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn every_subcommand_has_useful_help() {
    for (sub, expect) in [
        ("serve", "--enforcer.baseline"),
        ("status", "--url"),
        ("check-config", "FILE"),
        ("fio-summary", "percentile"),
    ] {
        let out = bin().args([sub, "--help"]).output().unwrap();
        assert!(out.status.success());
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            text.contains(expect) && text.contains("Examples"),
            "{sub}: {text}"
        );
    }
}

#[test]
fn status_without_a_server_says_what_to_check() {
    let out = bin()
        .args(["status", "--url", "http://127.0.0.1:9"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr)
        .contains("is `ceph-recovery-budget serve` running there?"));
}
