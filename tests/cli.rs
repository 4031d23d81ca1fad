//! The binary as a user runs it: exit codes, stdout/stderr, help.

use std::process::{Command, Stdio};

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_ceph-recovery-budget"))
}

fn fixture(rel: &str) -> String {
    format!("{}/tests/fixtures/{rel}", env!("CARGO_MANIFEST_DIR"))
}

/// Runs the binary with `args`, which must succeed (its stderr shown if not): its stdout.
fn stdout_ok(args: &[&str]) -> String {
    let out = bin().args(args).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn fio_summary_prints_the_issue_json_and_plain_lines() {
    let out = stdout_ok(&[
        "fio-summary",
        &fixture("fio/fio_base.json"),
        "--format",
        "json",
    ]);
    assert_eq!(
        out,
        "{\"write\":{\"iops\":673.979311,\"bandwidth_bytes_per_second\":2760619.0,\"latency_seconds\":{\"p50\":0.022675456,\"p95\":0.042729472,\"p99\":0.056885248}}}\n"
    );
    assert_eq!(
        stdout_ok(&["fio-summary", &fixture("fio/fio_base.json")]),
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

/// The first 5 periodic json+ reports of the lab's `lab-fixed-n 2` run (README.md there).
const LAB_PERIODIC: &str = "fio/lab_fixed_n2_first5.jsonplus.json";

#[test]
fn fio_summary_windows_prints_the_write_p99_per_status_interval() {
    let out = stdout_ok(&[
        "fio-summary",
        &fixture(LAB_PERIODIC),
        "--windows",
        "--bound-ms",
        "85.5",
    ]);
    // Five reports, five windows: the first from fio's start (the first report's time minus its
    // job_runtime, 9877 ms). Its p99 is the first report's own (clat_ns.percentile 99.000000 =
    // 35913728 ns over clat_ns.N = 11232 writes); the last is the first window of the
    // rebalance, the 213 ms docs/records/experiment-history.md quotes first for this run.
    assert_eq!(
        out,
        "fio started at 1796198710.901 (Unix seconds); write p99 per window, in seconds from then:\n\
         0.0-9.9 s: 11232 writes, p99 35.9 ms\n\
         9.9-19.9 s: 11450 writes, p99 31.3 ms\n\
         19.9-29.9 s: 13332 writes, p99 27.1 ms\n\
         29.9-39.9 s: 14485 writes, p99 25.0 ms\n\
         39.9-49.9 s: 2958 writes, p99 213 ms\n\
         within 85.5 ms: 80% (4/5)\n"
    );

    // JSON from standard input, as scripts/lab-fixed-n reads a gunzipped record.
    let mut child = bin()
        .args([
            "fio-summary",
            "-",
            "--windows",
            "--format",
            "json",
            "--bound-ms",
            "85.5",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    {
        use std::io::Write;
        let report = std::fs::read(fixture(LAB_PERIODIC)).unwrap();
        child.stdin.take().unwrap().write_all(&report).unwrap();
    }
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let w = v.as_array().unwrap();
    assert_eq!(w.len(), 5);
    assert_eq!(
        w[0],
        serde_json::json!({
            "start_seconds": 0.0, "end_seconds": 9.877, "writes": 11232,
            "p99_seconds": 0.035913728, "start_unix": 1796198710.901,
            "end_unix": 1796198720.778, "within_bound": true
        })
    );
    // The report times, to the millisecond, for a script to compare with its own clock.
    assert_eq!(w[4]["start_unix"], 1796198750.779);
    assert_eq!(w[4]["end_unix"], 1796198760.798);
    assert_eq!(w[4]["p99_seconds"], 0.212860928);
    assert_eq!(w[4]["within_bound"], false);
}

#[test]
fn fio_summary_windows_says_which_file_and_what_to_run() {
    // One plain JSON report: no histograms, and no periodic reports.
    let out = bin()
        .args(["fio-summary", &fixture("fio/fio_base.json"), "--windows"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("fio/fio_base.json gives no write latency per window")
            && err.contains("run fio with --output-format=json+"),
        "{err}"
    );
    // A single json+ report of a 2 s run read with a 1 s interval: fio ran without
    // --status-interval.
    let out = bin()
        .args([
            "fio-summary",
            &fixture("fio/local_numjobs2.jsonplus.json"),
            "--windows",
            "--interval",
            "1s",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("run fio with --status-interval"));
    // The window options mean nothing without --windows; a bound must be a positive number.
    for args in [
        vec!["--bound-ms", "85.5"],
        vec!["--windows", "--bound-ms", "-3"],
        vec!["--windows", "--bound-ms", "85ms"],
    ] {
        let out = bin()
            .args(["fio-summary", &fixture(LAB_PERIODIC)])
            .args(&args)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
    }
    let out = bin()
        .args([
            "fio-summary",
            &fixture(LAB_PERIODIC),
            "--windows",
            "--bound-ms",
            "0",
        ])
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&out.stderr).contains("give a positive number, e.g. 85.5"));
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

/// Issue 33.4: in enforce mode the lease's gap after the renew deadline must hold a Ceph
/// command and the 2 s margin; `serve` refuses at start (before it connects to anything) and
/// `check-config` says the same, naming the flags and values that would do.
#[test]
fn serve_and_check_config_refuse_a_lease_gap_shorter_than_the_ceph_timeout() {
    let dir = std::env::temp_dir().join(format!("crb-cli-lease-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("lease.yml");
    std::fs::write(
        &file,
        "ceph:\n  timeout: 20s\nenforcer:\n  mode: enforce\n  baseline: 16ms\n",
    )
    .unwrap();
    let out = bin()
        .args(["check-config", file.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let checked = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        checked.contains("lease.yml line 2 column 12: ceph.timeout: the lease duration (40s) minus the renew deadline (25s) leaves 15s between a leader's stop and a possible takeover, less than the Ceph command timeout (20s) plus a 2s margin"),
        "{checked}"
    );
    assert!(
        checked.contains("Give --enforcer.lease-duration 47s")
            && checked.contains("--enforcer.lease-renew-deadline 18s")
            && checked.contains("--ceph-timeout 13s"),
        "{checked}"
    );
    // `serve` with the same file: refused at start, not run (a run would not exit by itself).
    let mut child = bin()
        .args(["serve", "--config.file", file.to_str().unwrap()])
        .args(["--web.listen-address", "127.0.0.1:0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let start = std::time::Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > std::time::Duration::from_secs(20) {
            let _ = child.kill();
            panic!("serve started in enforce mode with a 15s lease gap and a 20s ceph timeout");
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let served = String::from_utf8_lossy(&out.stderr);
    assert!(
        served.contains("leaves 15s between a leader's stop and a possible takeover, less than the Ceph command timeout (20s) plus a 2s margin"),
        "{served}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn every_subcommand_has_useful_help() {
    for (sub, expect) in [
        ("serve", "--enforcer.baseline"),
        ("status", "--url"),
        ("check-config", "FILE"),
        ("fio-summary", "percentile"),
        ("baseline", "--fio-cmd"),
        ("profile-sweep", "--start-recovery"),
        ("experiment", "--serve-args"),
        ("lint", "--file"),
    ] {
        let text = stdout_ok(&[sub, "--help"]);
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

#[test]
fn tune_help_lists_the_cycle() {
    for (sub, expect) in [("step", "--goal-recovery-time"), ("report", "--chart")] {
        let text = stdout_ok(&["tune", sub, "--help"]);
        assert!(
            text.contains(expect) && text.contains("Examples"),
            "{sub}: {text}"
        );
    }
}

#[test]
fn a_step_changes_exactly_one_setting() {
    let out = bin()
        .args([
            "tune",
            "step",
            "--record",
            &fixture("tuning/lab-record.yaml"),
            "--set",
            "osd_max_backfills=2",
            "--set",
            "osd_recovery_max_active=4",
            "--ceph-cmd",
            "/nonexistent/ceph",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--set was given 2 times") && err.contains("exactly one setting"),
        "{err}"
    );
    let out = bin()
        .args([
            "tune",
            "step",
            "--record",
            "x.yaml",
            "--set",
            "osd_max_backfills=2,osd_recovery_max_active=4",
        ])
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&out.stderr).contains("several settings"));
    // Deciding needs a decision.
    let out = bin()
        .args(["tune", "decide", "--record", "x.yaml"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn tune_report_renders_a_real_record_and_its_chart() {
    let dir = std::env::temp_dir().join(format!("crb-cli-report-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let chart = dir.join("chart.svg");
    let out = stdout_ok(&[
        "tune",
        "report",
        "--record",
        &fixture("tuning/lab-record.yaml"),
        "--chart",
        chart.to_str().unwrap(),
    ]);
    assert_eq!(
        out,
        "Cluster: ceph-lab (fsid 4820c478-3324-4977-bed8-4e9e1d7df53b)
Date: 2026-11-30
Hardware: 4x 10 GiB sparse-file bluestore OSDs, 2 cores
Scheduler: mclock, high_client_ops profile
Bound: client p99 write within 2x the baseline's 591 ms = 1183 ms

baseline:                           166 obj/s recovery, p99 write 591 ms
mclock_profile high_recovery_ops:   165 obj/s, p99 518 ms   <- reverted, no gain: 165 obj/s vs 166 obj/s with baseline (needs > 5% faster)

final: no change from the baseline
"
    );
    let svg = std::fs::read_to_string(&chart).unwrap();
    assert!(svg.contains("</svg>") && svg.contains("mclock_profile high_recovery_ops"));
    std::fs::remove_dir_all(&dir).unwrap();

    let out = bin()
        .args(["tune", "report", "--record", "/nonexistent.yaml"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("baseline --record"));
}

#[test]
fn lint_exit_codes_tell_clean_flagged_and_unreadable_apart() {
    let lint = |args: &[&str]| {
        let out = bin().arg("lint").args(args).output().unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (code, out, _) = lint(&["--file", &fixture("healthy-idle/ceph_config_dump.json")]);
    assert_eq!(code, Some(0), "{out}");
    // The rebalance dump sets an mClock profile: nothing under wpq reads it.
    let (code, out, _) = lint(&[
        "--file",
        &fixture("rebalance/ceph_config_dump.json"),
        "--op-queue",
        "wpq",
    ]);
    assert_eq!(code, Some(1), "{out}");
    assert!(out.contains("osd_mclock_profile"), "{out}");
    let (code, _, err) = lint(&["--file", &fixture("fio/fio_base.json")]);
    assert_eq!(code, Some(2));
    assert!(
        err.contains("is not the output of `ceph config dump -f json`"),
        "{err}"
    );
    let (code, _, err) = lint(&["--file", "/nonexistent.json"]);
    assert_eq!(code, Some(2));
    assert!(err.contains("/nonexistent.json"), "{err}");
}

#[test]
fn baseline_needs_a_latency_source_and_a_usable_report() {
    let out = bin()
        .args(["baseline", "--record", "/tmp/never.yaml"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--fio-output FILE"));
    // A read-only fio report cannot give a write p99: refused before any waiting.
    let out = bin()
        .args([
            "baseline",
            "--record",
            "/tmp/never.yaml",
            "--fio-output",
            &fixture("fio/fio-2.x-rbd-randread-debug_ms-0.txt"),
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no write completion-latency p99"));
    assert!(!std::path::Path::new("/tmp/never.yaml").exists());
}

#[test]
fn experiment_refuses_what_cannot_work_with_exit_2() {
    // Bad arguments, before any cluster is asked (the ceph command does not even exist).
    let cases: [(&[&str], &str); 5] = [
        (
            &["--rows", "balanced,enforced"],
            "must start with no-recovery",
        ),
        (
            &["--rows", "no-recovery,balanced"],
            "--start-recovery and --stop-recovery",
        ),
        (&["--multiplier", "1"], "must be a number above 1"),
        (
            &["--serve-args", "--enforcer.mode observe"],
            "must not contain --enforcer.mode",
        ),
        (
            &["--rows", "no-recovery,fastest"],
            "unknown row \"fastest\"",
        ),
    ];
    for (extra, expect) in cases {
        let out = bin()
            .args([
                "experiment",
                "--fio-cmd",
                "fio x.fio",
                "--ceph-cmd",
                "/nonexistent/ceph",
            ])
            .args(extra)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{extra:?}: {err}");
        assert!(err.contains(expect), "{extra:?}: {err}");
        assert!(out.stdout.is_empty());
    }

    // OSDs that do not run mClock: refused before anything is changed or run.
    let dir = std::env::temp_dir().join(format!("crb-cli-exp-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let ceph = dir.join("ceph");
    let log = dir.join("calls");
    std::fs::write(
        &ceph,
        format!(
            "#!/bin/sh\necho \"$*\" >> {}\ncase \"$*\" in\n  *'config get osd_op_queue'*) printf '\\nosd.0: {{\"osd_op_queue\":\"wpq\"}}\\n' ;;\n  *) echo 'Error EINVAL: not in this fake' >&2; exit 22 ;;\nesac\n",
            log.display()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&ceph, std::fs::Permissions::from_mode(0o755)).unwrap();
    let out = bin()
        .args([
            "experiment",
            "--fio-cmd",
            "/nonexistent/fio",
            "--start-recovery",
            "/nonexistent/start",
            "--stop-recovery",
            "/nonexistent/stop",
            "--ceph-cmd",
        ])
        .arg(&ceph)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("osd_op_queue wpq"), "{err}");
    let calls = std::fs::read_to_string(&log).unwrap();
    assert!(
        !calls.contains("config set") && !calls.contains("config rm"),
        "{calls}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A recorded run (docs/records, run F on the lab) redrawn: its table, its decisions and a chart
/// with the backfill lever's marks, without asking any cluster or running anything.
#[test]
fn experiment_from_result_redraws_a_recorded_run_without_running_anything() {
    let recorded = format!(
        "{}/docs/records/experiment-2026-12-04-pause-over-bound/result.json",
        env!("CARGO_MANIFEST_DIR")
    );
    let dir = std::env::temp_dir().join(format!("crb-cli-redraw-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (chart, decisions) = (dir.join("chart.svg"), dir.join("decisions.json"));
    let out = bin()
        .args(["experiment", "--from-result", &recorded, "--chart"])
        .arg(&chart)
        .arg("--decisions-out")
        .arg(&decisions)
        .args(["--ceph-cmd", "/nonexistent/ceph"])
        .output()
        .unwrap();
    let (stdout, err) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert_eq!(out.status.code(), Some(0), "{err}");
    let enforced = stdout
        .lines()
        .find(|l| l.starts_with("enforced (2x)"))
        .unwrap_or_else(|| panic!("{stdout}"));
    assert!(
        enforced.contains("90.7 ms") && enforced.contains("95% (58/61)"),
        "{enforced}"
    );
    let svg = std::fs::read_to_string(&chart).unwrap();
    for mark in ["ESCALATE rung 3", "ops 1-&gt;4", "N 1-&gt;2", "RESTORE"] {
        assert!(svg.contains(mark), "{mark}");
    }
    let written: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&decisions).unwrap()).unwrap();
    assert_eq!(written.as_array().map(Vec::len), Some(31));

    // Not a result: refused with the file named; nothing running beside it.
    let not = dir.join("not.json");
    std::fs::write(&not, "{\"rows\": 3}\n").unwrap();
    let out = bin()
        .args(["experiment", "--from-result"])
        .arg(&not)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("is not a result of `experiment --format json`") && err.contains("not.json"),
        "{err}"
    );
    let out = bin()
        .args([
            "experiment",
            "--from-result",
            &recorded,
            "--fio-cmd",
            "fio x",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot be used with"));
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Two commands on one tuning record at once: the second is refused, says who holds it, and
/// touches neither the record nor the cluster (it stops before any ceph call).
#[test]
fn a_second_command_on_a_record_in_use_is_refused_with_who_holds_it() {
    let dir = std::env::temp_dir().join(format!("crb-cli-lock-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let record = dir.join("tuning.yaml");
    std::fs::write(&record, "not read while the record is in use\n").unwrap();
    let held = ceph_recovery_budget::tuning::record::RecordLock::take(
        &record,
        "tune step osd_max_backfills=4",
    )
    .unwrap();
    let decide = || {
        bin()
            .args([
                "tune",
                "decide",
                "--record",
                record.to_str().unwrap(),
                "--keep",
                "--ceph-cmd",
                "/bin/false",
            ])
            .output()
            .unwrap()
    };
    let out = decide();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_ne!(out.status.code(), Some(0), "{err}");
    assert!(
        err.contains("is in use by another ceph-recovery-budget")
            && err.contains("tune step osd_max_backfills=4"),
        "{err}"
    );
    drop(held);
    // Free again: the same command now gets as far as reading the record.
    let out = decide();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("is not valid"), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}
