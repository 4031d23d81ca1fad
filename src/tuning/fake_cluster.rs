//! A small in-memory cluster for the tuning tests. Its answers have the shapes recorded from the
//! lab (`tests/fixtures/lab/`: `tell osd.*` blocks, `config get` plain values after a blank line,
//! `config dump` arrays, the CLI's error lines and exit codes); the lab test (`tests/lab.rs`)
//! runs the same commands against real Ceph.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::Instant;

use crate::ceph::{CephCommand, CephError, Output};
use crate::tuning::measure::FioRunner;

#[derive(Debug)]
pub struct State {
    /// Section `osd`, no mask.
    pub db: BTreeMap<String, String>,
    /// Values pinned in the OSDs' ceph.conf: the daemons run these whatever the database says.
    pub pinned: BTreeMap<String, String>,
    pub defaults: BTreeMap<String, String>,
    /// Objects left to recover when the clock started; recovery speed follows osd_max_backfills.
    pub remaining_at_start: f64,
    pub started: Instant,
    pub calls: Vec<String>,
    pub fail_set: bool,
    pub pg_ls: bool,
    /// What `ceph versions` answers; None: refused (an older cephx profile, say).
    pub versions: Option<String>,
}

#[derive(Clone)]
pub struct FakeCluster(pub Arc<Mutex<State>>);

impl FakeCluster {
    pub fn new(remaining: f64) -> Self {
        let defaults = [
            ("osd_max_backfills", "1"),
            ("osd_recovery_max_active", "0"),
            ("osd_recovery_sleep_hdd", "0.100000"),
            ("osd_op_queue", "wpq"),
            ("osd_mclock_profile", "high_client_ops"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        FakeCluster(Arc::new(Mutex::new(State {
            db: BTreeMap::new(),
            pinned: BTreeMap::new(),
            defaults,
            remaining_at_start: remaining,
            started: Instant::now(),
            calls: Vec::new(),
            fail_set: false,
            pg_ls: false,
            versions: None,
        })))
    }

    pub fn db_value(&self, key: &str) -> Option<String> {
        self.db().get(key).cloned()
    }

    pub fn db(&self) -> BTreeMap<String, String> {
        self.0.lock().unwrap().db.clone()
    }

    pub fn with<T>(&self, f: impl FnOnce(&mut State) -> T) -> T {
        f(&mut self.0.lock().unwrap())
    }

    pub fn writes(&self) -> Vec<String> {
        self.0
            .lock()
            .unwrap()
            .calls
            .iter()
            .filter(|c| c.starts_with("config set") || c.starts_with("config rm"))
            .cloned()
            .collect()
    }
}

impl State {
    pub fn running(&self, key: &str) -> String {
        self.pinned
            .get(key)
            .or_else(|| self.db.get(key))
            .or_else(|| self.defaults.get(key))
            .cloned()
            .unwrap_or_default()
    }

    fn answer(&mut self, args: &[&str]) -> Result<Vec<u8>, (i32, String)> {
        match args {
            ["status"] => {
                let backfills: f64 = self.running("osd_max_backfills").parse().unwrap_or(1.0);
                let rate = 100.0 * backfills;
                let left = (self.remaining_at_start - rate * self.started.elapsed().as_secs_f64())
                    .max(0.0) as u64;
                Ok(format!(
                    r#"{{"fsid":"0b1c5b8e-6a2f-4a7e-9d1e-5f8d2c3b4a10","health":{{"status":"HEALTH_WARN"}},"pgmap":{{"pgs_by_state":[],"num_pgs":33,"misplaced_objects":{left},"recovering_objects_per_sec":{rate}}}}}"#
                )
                .into_bytes())
            }
            ["config", "dump"] => {
                let entries: Vec<serde_json::Value> = self
                    .db
                    .iter()
                    .map(|(k, v)| {
                        serde_json::json!({"section":"osd","name":k,"value":v,"level":"advanced","can_update_at_runtime":true,"mask":""})
                    })
                    .collect();
                Ok(serde_json::to_vec(&entries).unwrap())
            }
            ["config", "get", "osd", key] => match self.db.get(*key).or(self.defaults.get(*key)) {
                Some(v) => Ok(format!("\n{v}\n").into_bytes()),
                None => Err((2, format!("Error ENOENT: unrecognized key '{key}'"))),
            },
            ["config", "set", "osd", key, value] => {
                if self.fail_set {
                    return Err((110, "Error ETIMEDOUT: injected".into()));
                }
                if !self.defaults.contains_key(*key) {
                    return Err((
                        22,
                        format!("Error EINVAL: unrecognized config option '{key}'"),
                    ));
                }
                self.db.insert(key.to_string(), value.to_string());
                Ok(Vec::new())
            }
            ["config", "rm", "osd", key] => {
                self.db.remove(*key);
                Ok(Vec::new())
            }
            ["tell", "osd.*", "config", "get", key] => {
                if !self.defaults.contains_key(*key) {
                    return Err((22, "Error EINVAL: unrecognized config option".into()));
                }
                let v = self.running(key);
                Ok((0..4)
                    .map(|i| format!("\nosd.{i}: {{\"{key}\":\"{v}\"}}\n"))
                    .collect::<String>()
                    .into_bytes())
            }
            ["pg", "ls"] if self.pg_ls => Ok(br#"{"pg_ready":true,"pg_stats":[
{"pgid":"2.0","stat_sum":{"num_objects":400000},"up":[0,1,2],"acting":[0,1,2]},
{"pgid":"2.1","stat_sum":{"num_objects":320000},"up":[1,2,3],"acting":[1,2,3]}]}"#
                .to_vec()),
            ["versions"] => match &self.versions {
                Some(v) => Ok(v.clone().into_bytes()),
                None => Err((13, "Error EACCES: access denied".to_string())),
            },
            _ => Err((22, format!("unexpected command {args:?}"))),
        }
    }
}

impl crate::ceph::Client for FakeCluster {
    async fn run(&self, command: &CephCommand) -> Result<Output, CephError> {
        let mut state = self.0.lock().unwrap();
        state.calls.push(command.args.join(" "));
        let args: Vec<&str> = command.args.iter().map(String::as_str).collect();
        let (stdout, stderr, code) = match state.answer(&args) {
            Ok(out) => (out, String::new(), 0),
            Err((code, err)) => (Vec::new(), err, code),
        };
        Ok(Output {
            stdout,
            stderr,
            code: Some(code),
            elapsed: Duration::from_millis(300),
        })
    }
}

/// fio's JSON (3.x) with the given write p99; the latency follows the running backfills so a
/// step has a visible effect on both numbers.
pub struct Fio {
    pub cluster: FakeCluster,
    pub runtime: Duration,
    /// Write p99 in ms from what the OSDs run.
    pub p99_ms: fn(&State) -> f64,
}

/// 12 ms at 1 backfill, 14 at 2, 18 at 4, 34 at 8: the operator's numbers, roughly.
pub fn p99_by_backfills(s: &State) -> f64 {
    let backfills: f64 = s.running("osd_max_backfills").parse().unwrap_or(1.0);
    10.0 + 2.0 * backfills + if backfills >= 8.0 { 8.0 } else { 0.0 }
}

pub fn fio_json(p99_ms: f64) -> String {
    let ns = |ms: f64| (ms * 1e6) as u64;
    format!(
        r#"{{"fio version":"fio-3.33","jobs":[{{"jobname":"runbook","groupid":0,"error":0,
"read":{{"io_bytes":0,"bw_bytes":0,"iops":0.0,"total_ios":0,"clat_ns":{{"min":0,"max":0,"mean":0.0}}}},
"write":{{"io_bytes":1048576,"bw_bytes":2867200,"iops":700.0,"total_ios":256,
"clat_ns":{{"min":1,"max":{},"mean":1.0,"percentile":{{"50.000000":{},"95.000000":{},"99.000000":{}}}}}}},
"trim":{{"io_bytes":0,"bw_bytes":0,"iops":0.0,"total_ios":0,"clat_ns":{{"min":0,"max":0,"mean":0.0}}}}}}]}}"#,
        ns(p99_ms * 2.0),
        ns(p99_ms / 3.0),
        ns(p99_ms / 1.5),
        ns(p99_ms)
    )
}

impl FioRunner for Fio {
    async fn run(&self, argv: &[String]) -> Result<String, String> {
        self.cluster
            .with(|s| s.calls.push(format!("run {}", argv.join(" "))));
        match argv.first().map(String::as_str) {
            Some("fio") => {}
            // A controlled recovery (--start-recovery / --stop-recovery).
            Some("start-recovery") => {
                self.cluster.with(|s| {
                    s.remaining_at_start = 100_000.0;
                    s.started = Instant::now();
                });
                return Ok(String::new());
            }
            Some("stop-recovery") => {
                self.cluster.with(|s| s.remaining_at_start = 0.0);
                return Ok(String::new());
            }
            _ => return Err(format!("`{}` failed (exit status: 127)", argv.join(" "))),
        }
        tokio::time::sleep(self.runtime).await;
        let p99 = self.cluster.with(|s| (self.p99_ms)(s));
        Ok(fio_json(p99))
    }
}
