//! Helpers for the tests that run against the real lab cluster (`scripts/ceph-lab`).
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The Prometheus side's files, programs (found on PATH, or the test skipped) and servers.
pub mod prom;

pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Lab tests run only when asked (scripts/test sets CRB_LAB=1 after starting the lab).
pub fn lab_enabled() -> bool {
    std::env::var("CRB_LAB").is_ok_and(|v| v == "1")
}

/// Runs `scripts/ceph-lab ARGS`, panicking with its output on failure.
pub fn lab(args: &[&str]) -> String {
    let out = Command::new(repo().join("scripts/ceph-lab"))
        .args(args)
        .output()
        .expect("run scripts/ceph-lab");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "scripts/ceph-lab {args:?} failed: {}\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// CEPH_CONF (and anything else) the lab's `env` command exports.
pub fn lab_env() -> Vec<(String, String)> {
    lab(&["env"])
        .lines()
        .filter_map(|l| l.strip_prefix("export "))
        .filter_map(|kv| kv.split_once('='))
        .map(|(k, v)| {
            (
                k.to_string(),
                v.trim_matches(|c| c == '"' || c == '\'').to_string(),
            )
        })
        .collect()
}

/// One variable of `scripts/ceph-lab env` (CEPH_CONF, CEPH_LAB_DIR...).
pub fn lab_env_var(name: &str) -> String {
    lab_env()
        .into_iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v)
        .unwrap_or_else(|| panic!("scripts/ceph-lab env has no {name}"))
}

/// A pool's id, by its name, from the OSD map.
pub fn pool_id(name: &str) -> u64 {
    ceph_json(&["osd", "dump"])["pools"]
        .as_array()
        .expect("pools")
        .iter()
        .find(|p| p["pool_name"].as_str() == Some(name))
        .and_then(|p| p["pool"].as_u64())
        .unwrap_or_else(|| panic!("no pool {name} in the OSD map"))
}

/// `ceph ARGS --format json` against the lab, parsed.
pub fn ceph_json(args: &[&str]) -> serde_json::Value {
    let out = Command::new("ceph")
        .args(args)
        .args(["--format", "json"])
        .envs(lab_env())
        .output()
        .expect("run ceph");
    assert!(
        out.status.success(),
        "ceph {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("ceph printed JSON")
}

pub fn ceph(args: &[&str]) {
    let out = Command::new("ceph")
        .args(args)
        .envs(lab_env())
        .output()
        .expect("run ceph");
    assert!(
        out.status.success(),
        "ceph {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `scripts/ceph-lab ARGS` for a restore: a failure is printed, never a panic (it runs from
/// `Drop`, also while a test fails).
pub fn lab_quiet(args: &[&str]) {
    match Command::new(repo().join("scripts/ceph-lab"))
        .args(args)
        .output()
    {
        Ok(o) if o.status.success() => {}
        other => eprintln!("restore: scripts/ceph-lab {args:?}: {other:?}"),
    }
}

/// `ceph ARGS` against the lab for a restore, as [`lab_quiet`].
pub fn ceph_quiet(args: &[&str]) {
    match Command::new("ceph").args(args).envs(lab_env()).output() {
        Ok(o) if o.status.success() => {}
        other => eprintln!("restore: ceph {args:?}: {other:?}"),
    }
}

/// Removes the enforcer's lease object (and with it its lock and stored state) from the lab, so
/// that an enforce-mode test starts as a first instance would: a test that ended with SIGKILL
/// leaves the lock held for its lease duration and its state for the next leader.
pub fn forget_lease() {
    for pool in [".mgr", "device_health_metrics"] {
        let _ = Command::new("rados")
            .args(["-p", pool, "rm", "ceph-recovery-budget.lease"])
            .envs(lab_env())
            .output();
    }
}

/// Lease durations for lab tests: a killed instance's lock is gone within seconds. The 12 s
/// between the renew deadline and the lease duration hold a command of the default
/// `--ceph-timeout` (10s) and the 2 s margin, which `serve` checks at start.
pub const SHORT_LEASE: [&str; 6] = [
    "--enforcer.lease-duration",
    "16s",
    "--enforcer.lease-renew-deadline",
    "4s",
    "--enforcer.lease-retry-period",
    "1s",
];

pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// A running `serve`, killed on drop.
pub struct Exporter {
    pub child: Child,
    pub port: u16,
}

impl Exporter {
    pub fn start(extra: &[&str]) -> Self {
        Self::start_with_env(extra, lab_env())
    }

    /// `serve` without the lab (its ceph answered by `--ceph-cmd`).
    pub fn start_without_lab(extra: &[&str]) -> Self {
        Self::start_with_env(extra, Vec::new())
    }

    fn start_with_env(extra: &[&str], env: Vec<(String, String)>) -> Self {
        let port = free_port();
        let listen = format!("127.0.0.1:{port}");
        let child = Command::new(env!("CARGO_BIN_EXE_ceph-recovery-budget"))
            .args(["serve", "--web.listen-address", &listen])
            .args(extra)
            .envs(env)
            .stdout(Stdio::inherit())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start serve");
        let e = Exporter { child, port };
        e.wait_for(
            Duration::from_secs(60),
            "ready",
            |_| {},
            || http_get(port, "/-/ready").0 == 200,
        );
        e
    }

    pub fn get(&self, path: &str) -> (u16, String) {
        http_get(self.port, path)
    }

    /// SIGTERM, as a service manager stops it; waits up to a minute for it to exit.
    pub fn terminate(&mut self) -> std::process::ExitStatus {
        let pid = nix::unistd::Pid::from_raw(self.child.id() as i32);
        let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
        let start = Instant::now();
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                return status;
            }
            assert!(
                start.elapsed() < Duration::from_secs(60),
                "serve did not exit within 60 s of SIGTERM"
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    pub fn metrics(&self) -> Metrics {
        let (code, body) = self.get("/metrics");
        assert_eq!(code, 200, "{body}");
        Metrics::parse(&body)
    }

    /// Polls until `pred` holds, with a message naming what was awaited and the last metrics.
    pub fn wait_for(
        &self,
        timeout: Duration,
        what: &str,
        log: impl Fn(&str),
        pred: impl Fn() -> bool,
    ) {
        let start = Instant::now();
        while start.elapsed() < timeout {
            if pred() {
                eprintln!("lab: {what} after {:.0} s", start.elapsed().as_secs_f64());
                return;
            }
            std::thread::sleep(Duration::from_millis(500));
        }
        log(what);
        panic!("timed out after {timeout:?} waiting for {what}");
    }

    /// Polls the metrics until `pred` holds on them; returns them.
    pub fn wait_metrics(
        &self,
        timeout: Duration,
        what: &str,
        pred: impl Fn(&Metrics) -> bool,
    ) -> Metrics {
        let start = Instant::now();
        let mut last = None;
        while start.elapsed() < timeout {
            let m = self.metrics();
            if pred(&m) {
                eprintln!("lab: {what} after {:.0} s", start.elapsed().as_secs_f64());
                return m;
            }
            last = Some(m);
            std::thread::sleep(Duration::from_millis(500));
        }
        panic!(
            "timed out after {timeout:?} waiting for {what}; last metrics:\n{}",
            last.map(|m| m.text).unwrap_or_default()
        );
    }
}

impl Drop for Exporter {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn http_get(port: u16, path: &str) -> (u16, String) {
    http_request(port, path, None)
}

pub fn http_post_json(port: u16, path: &str, body: &str) -> (u16, String) {
    http_request(port, path, Some(body))
}

/// GETs `path` (or POSTs the JSON `post`) at 127.0.0.1:port with the program's HTTP client;
/// (0, "") when nothing answers.
fn http_request(port: u16, path: &str, post: Option<&str>) -> (u16, String) {
    use ceph_recovery_budget::http_client::{get, post_json, HttpTarget, Options};
    let run = || {
        let Ok(target) = HttpTarget::parse(&format!("http://127.0.0.1:{port}")) else {
            return (0, String::new());
        };
        let Ok(rt) = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
        else {
            return (0, String::new());
        };
        let answer = rt.block_on(async {
            match post {
                None => get(&target, path, Options::default()).await,
                Some(json) => post_json(&target, path, json, Options::default()).await,
            }
        });
        match answer {
            Ok(a) => (a.status, a.body),
            Err(_) => (0, String::new()),
        }
    };
    // A runtime cannot be entered from inside another: from an async test, use a thread.
    if tokio::runtime::Handle::try_current().is_ok() {
        std::thread::scope(|s| s.spawn(run).join().unwrap_or_default())
    } else {
        run()
    }
}

/// Parsed exposition: series (name + sorted labels) -> value.
pub struct Metrics {
    pub text: String,
    pub series: BTreeMap<String, f64>,
}

impl Metrics {
    pub fn parse(text: &str) -> Self {
        let mut series = BTreeMap::new();
        for line in text
            .lines()
            .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        {
            if let Some((key, value)) = line.rsplit_once(' ') {
                let v = match value {
                    "+Inf" => f64::INFINITY,
                    "-Inf" => f64::NEG_INFINITY,
                    v => v.parse().unwrap_or(f64::NAN),
                };
                series.insert(key.to_string(), v);
            }
        }
        Metrics {
            text: text.to_string(),
            series,
        }
    }

    /// The value of an exact series, e.g. `ceph_pool_size{pool="rbd-vms"}`.
    pub fn get(&self, key: &str) -> Option<f64> {
        self.series.get(key).copied()
    }

    /// Series whose key starts with `prefix`.
    pub fn with_prefix(&self, prefix: &str) -> Vec<(&str, f64)> {
        self.series
            .iter()
            .filter(|(k, _)| k.starts_with(prefix))
            .map(|(k, v)| (k.as_str(), *v))
            .collect()
    }
}

/// Runs chromium headless on `url` with `what` (`--dump-dom`, `--screenshot=...`), in a fresh
/// profile and with everything that would reach the network off; at most 2 minutes.
pub fn chromium(
    chromium: &std::path::Path,
    dir: &prom::TempDir,
    tag: &str,
    what: &str,
    url: &str,
) -> std::process::Output {
    let profile = dir.path().join(format!("profile-{tag}"));
    let mut child = Command::new(chromium)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--hide-scrollbars",
            "--window-size=1200,900",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .arg(what)
        .arg(url)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("start {}: {e}", chromium.display()));
    let deadline = Instant::now() + Duration::from_secs(120);
    while child.try_wait().ok().flatten().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("chromium {what} {url}: no result after 2 minutes");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let out = child.wait_with_output().expect("chromium's output");
    assert!(
        out.status.success(),
        "chromium {what} {url}: {}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    out
}
