use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;

use super::*;
use crate::ceph::{CephCommand, CephError, Output};
use crate::tuning::measure::RecordedProgress;

// ---------------------------------------------------------------------------------------------
// A small lab: a recovery that moves objects at a rate set by the profile running when it
// started, fio whose p99 follows what ran during it, and an enforcer child that answers the
// way `serve` does. Answers have the shapes recorded from the real lab (`tests/fixtures/lab/`).

/// Objects left = total - rate x (now - from), from `from` on.
#[derive(Debug, Clone, Copy)]
struct Moving {
    total: f64,
    rate: f64,
    from: Instant,
}

#[derive(Debug)]
struct LabState {
    /// The config database's `osd` section.
    db: BTreeMap<String, String>,
    op_queue: &'static str,
    flags: BTreeSet<String>,
    moving: Option<Moving>,
    /// The recovery never moves an object.
    stuck: bool,
    /// PGs show undersized while data moves.
    undersized: bool,
    recovery_starts: Vec<Instant>,
    /// Everything done to the lab, in order.
    calls: Vec<String>,
    fio_dies_after: Option<Duration>,
    enforcer_running: bool,
    enforcer_exits_after: Option<Duration>,
    /// The enforcer sets nobackfill at start and does not clear it on SIGTERM (as if killed).
    enforcer_leaves_flag: bool,
    /// What its state file says it has not restored; it sets these at start.
    enforcer_unrestored: BTreeMap<String, Option<String>>,
    enforcer_never_idle: bool,
    /// The enforcer's backfill lever holds 3 PGs until this long after it started.
    enforcer_holds_until: Option<Duration>,
    /// The enforcer says the recovery goes on (`recovery_active`) until this long after it
    /// started, whatever the cluster shows.
    enforcer_recovering_until: Option<Duration>,
    /// The paused clock's start, for fio's Unix timestamps.
    origin: Instant,
    /// The OSDs' release as `ceph versions` tells it (the real Reef lab's answer with this
    /// major); `None`: refused.
    release: Option<u32>,
    /// The config database when each recovery started.
    db_at_recovery: Vec<BTreeMap<String, String>>,
}

#[derive(Clone)]
struct Lab(Arc<Mutex<LabState>>);

impl Lab {
    fn new() -> Self {
        Lab(Arc::new(Mutex::new(LabState {
            db: BTreeMap::new(),
            op_queue: "mclock_scheduler",
            flags: [
                "sortbitwise",
                "recovery_deletes",
                "purged_snapdirs",
                "pglog_hardlimit",
            ]
            .iter()
            .map(|s| s.to_string())
            .collect(),
            moving: None,
            stuck: false,
            undersized: false,
            recovery_starts: Vec::new(),
            calls: Vec::new(),
            fio_dies_after: None,
            enforcer_running: false,
            enforcer_exits_after: None,
            enforcer_leaves_flag: false,
            enforcer_unrestored: BTreeMap::new(),
            enforcer_never_idle: false,
            enforcer_holds_until: None,
            enforcer_recovering_until: None,
            origin: Instant::now(),
            release: Some(18),
            db_at_recovery: Vec::new(),
        })))
    }

    fn with<T>(&self, f: impl FnOnce(&mut LabState) -> T) -> T {
        f(&mut self.0.lock().unwrap())
    }

    fn calls(&self) -> Vec<String> {
        self.with(|s| s.calls.clone())
    }

    /// What changed the cluster or ran a command, in order.
    fn actions(&self) -> Vec<String> {
        self.calls()
            .into_iter()
            .filter(|c| {
                c.starts_with("config set")
                    || c.starts_with("config rm")
                    || c.starts_with("osd unset")
                    || c.starts_with("run ")
                    || c.starts_with("enforcer ")
            })
            .collect()
    }
}

impl LabState {
    fn profile(&self) -> String {
        self.db
            .get("osd_mclock_profile")
            .cloned()
            .unwrap_or_else(|| "high_client_ops".into())
    }

    fn left(&self) -> u64 {
        match self.moving {
            Some(m) => (m.total - m.rate * m.from.elapsed().as_secs_f64()).max(0.0) as u64,
            None => 0,
        }
    }

    fn start_recovery(&mut self, total: f64) {
        self.db_at_recovery.push(self.db.clone());
        let overridden =
            self.db.get("osd_mclock_override_recovery_settings") == Some(&"true".to_string());
        let backfills = self
            .db
            .get("osd_max_backfills")
            .filter(|_| overridden)
            .and_then(|n| n.parse::<f64>().ok());
        let rate = if self.stuck {
            0.0
        } else if self.enforcer_running {
            40.0
        } else if let Some(n) = backfills {
            100.0 * n
        } else {
            match self.profile().as_str() {
                "balanced" => 100.0,
                "high_recovery_ops" => 200.0,
                _ => 50.0,
            }
        };
        self.moving = Some(Moving {
            total,
            rate,
            from: Instant::now(),
        });
    }

    fn status(&self) -> String {
        let left = self.left();
        let states = if left > 0 {
            let moving = if self.undersized {
                "active+recovering+undersized+remapped"
            } else {
                "active+remapped+backfilling"
            };
            format!(
                r#"[{{"state_name":"active+clean","count":29}},{{"state_name":"{moving}","count":4}}]"#
            )
        } else {
            r#"[{"state_name":"active+clean","count":33}]"#.to_string()
        };
        let misplaced = if left > 0 {
            format!(r#","misplaced_objects":{left},"misplaced_total":62301"#)
        } else {
            String::new()
        };
        format!(
            r#"{{"fsid":"cc499af0-c00b-49b3-8cd7-28247467b587","health":{{"status":"HEALTH_OK"}},"pgmap":{{"pgs_by_state":{states},"num_pgs":33,"num_objects":20770{misplaced}}}}}"#
        )
    }

    fn answer(&mut self, args: &[&str]) -> Result<String, (i32, String)> {
        match args {
            ["status"] => Ok(format!("\n{}\n", self.status())),
            ["osd", "dump"] => Ok(format!(
                "\n{{\"epoch\":298,\"flags\":\"{}\",\"pools\":[]}}",
                self.flags.iter().cloned().collect::<Vec<_>>().join(",")
            )),
            ["osd", "unset", flag] => {
                self.flags.remove(*flag);
                Ok(String::new())
            }
            ["config", "dump"] => Ok(serde_json::to_string(
                &self
                    .db
                    .iter()
                    .map(|(k, v)| serde_json::json!({"section":"osd","name":k,"value":v,"level":"advanced","can_update_at_runtime":true,"mask":""}))
                    .collect::<Vec<_>>(),
            )
            .unwrap()),
            ["config", "set", "osd", key, value] => {
                self.db.insert(key.to_string(), value.to_string());
                Ok("\n".into())
            }
            ["config", "rm", "osd", key] => {
                self.db.remove(*key);
                Ok(String::new())
            }
            ["tell", "osd.*", "config", "get", key] => {
                let v = match *key {
                    "osd_op_queue" => self.op_queue.to_string(),
                    "osd_mclock_profile" => self.profile(),
                    // What the config database says, as on Reef with the override on.
                    "osd_max_backfills" => {
                        self.db.get(*key).cloned().unwrap_or_else(|| "1".into())
                    }
                    "osd_mclock_override_recovery_settings" => {
                        self.db.get(*key).cloned().unwrap_or_else(|| "false".into())
                    }
                    _ => return Err((22, "Error EINVAL: unrecognized config option".into())),
                };
                Ok((0..4)
                    .map(|i| format!("\nosd.{i}: {{\"{key}\":\"{v}\"}}\n"))
                    .collect())
            }
            ["versions"] => match self.release {
                Some(major) => {
                    let (minor, name) = match major {
                        16 => ("16.2.11", "pacific"),
                        18 => ("18.2.7", "reef"),
                        _ => ("20.2.0", "tentacle"),
                    };
                    let v = format!("ceph version {minor} (6b0e988052ec84cf2d4a54ff9bbbc5e720b621ad) {name} (stable)");
                    Ok(format!(
                        r#"{{"mon":{{"{v}":1}},"mgr":{{"{v}":1}},"osd":{{"{v}":4}},"overall":{{"{v}":6}}}}"#
                    ))
                }
                None => Err((13, "Error EACCES: access denied".into())),
            },
            _ => Err((22, format!("unexpected command {args:?}"))),
        }
    }
}

impl crate::ceph::Client for Lab {
    async fn run(&self, command: &CephCommand) -> Result<Output, CephError> {
        let mut state = self.0.lock().unwrap();
        state.calls.push(command.args.join(" "));
        let args: Vec<&str> = command.args.iter().map(String::as_str).collect();
        let (stdout, stderr, code) = match state.answer(&args) {
            Ok(out) => (out.into_bytes(), String::new(), 0),
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

struct FakeFio {
    lab: Lab,
    started: Instant,
}

/// The fake clock's Unix time at the paused clock's `origin`.
const UNIX_ORIGIN_MS: u64 = 1_796_070_900_000;

/// What fio prints on SIGINT after `elapsed` with `--status-interval=10 --output-format=json+`:
/// a cumulative report every 10 s, `fio: terminating on signal 2`, the final report. Each window
/// has 100 writes, 10 of them at `window_p99_ms(k)` (its p99) and 90 at a third of it; the
/// final report's percentiles say `p99_ms` for the whole run.
fn periodic_fio(
    started_ms: u64,
    elapsed: Duration,
    window_p99_ms: impl Fn(u64) -> f64,
    p99_ms: f64,
) -> String {
    let ns = |ms: f64| (ms * 1e6) as u64;
    let elapsed_ms = elapsed.as_millis() as u64;
    let mut bins: BTreeMap<u64, u64> = BTreeMap::new();
    let mut docs = Vec::new();
    let mut k = 0;
    loop {
        let at = ((k + 1) * 10_000).min(elapsed_ms);
        let p = window_p99_ms(k);
        *bins.entry(ns(p / 3.0)).or_insert(0) += 90;
        *bins.entry(ns(p)).or_insert(0) += 10;
        let total: u64 = bins.values().sum();
        let doc = serde_json::json!({
            "fio version": "fio-3.33",
            "timestamp_ms": started_ms + at,
            "jobs": [{
                "jobname": "runbook", "groupid": 0, "error": 0, "job_runtime": at,
                "write": {
                    "io_bytes": total * 4096, "bw_bytes": 2_867_200, "iops": 700.0, "total_ios": total,
                    "clat_ns": {
                        "min": 1, "max": ns(p99_ms * 2.0), "mean": 1.0,
                        "percentile": {"50.000000": ns(p99_ms / 3.0), "95.000000": ns(p99_ms / 1.5), "99.000000": ns(p99_ms)},
                        "bins": bins.iter().map(|(k, v)| (k.to_string(), serde_json::json!(v))).collect::<serde_json::Map<_, _>>()
                    }
                }
            }]
        });
        docs.push(serde_json::to_string_pretty(&doc).unwrap());
        k += 1;
        if at >= elapsed_ms {
            break;
        }
    }
    let last = docs.pop().unwrap_or_default();
    docs.push(format!("fio: terminating on signal 2\n{last}"));
    docs.join("\n")
}

impl RunningFio for FakeFio {
    fn ended(&mut self) -> Option<String> {
        let dies = self.lab.with(|s| s.fio_dies_after);
        dies.filter(|d| self.started.elapsed() >= *d)
            .map(|_| "exit status: 1".to_string())
    }

    async fn stop(self) -> Result<String, String> {
        self.lab.with(|s| {
            s.calls.push("fio stopped".into());
            let recovered = s.recovery_starts.iter().any(|t| *t >= self.started);
            let enforced = s.enforcer_running;
            let p99_ms = if !recovered {
                16.0
            } else if enforced {
                30.0
            } else {
                match s.profile().as_str() {
                    "balanced" => 38.0,
                    "high_recovery_ops" => 71.0,
                    _ => 64.0,
                }
            };
            // The enforcer takes 30 s to bring the first windows' 90 ms under the 32 ms bound.
            let window = |k: u64| if enforced && k < 3 { 90.0 } else { p99_ms };
            let started_ms = UNIX_ORIGIN_MS + (self.started - s.origin).as_millis() as u64;
            Ok(periodic_fio(
                started_ms,
                self.started.elapsed(),
                window,
                p99_ms,
            ))
        })
    }
}

struct FakeEnforcer {
    lab: Lab,
    started: Instant,
}

impl RunningEnforcer for FakeEnforcer {
    async fn get(&self, path: &str) -> Result<String, String> {
        self.lab.with(|s| {
            let busy = s.left() > 0;
            match path {
                "/metrics" => Ok(format!(
                    "# HELP ceph_recovery_budget_ladder_rung Escalation ladder rung.\n# TYPE ceph_recovery_budget_ladder_rung gauge\nceph_recovery_budget_ladder_rung {}\nceph_recovery_budget_paused {}\nceph_recovery_budget_paused_seconds 95\n",
                    if busy { 4 } else { 0 },
                    u8::from(busy)
                )),
                "/api/status" => Ok(format!(
                    r#"{{"version":"0.1.0","enforcer":{{"mode":"enforce","phase":"{}","backfill_held":{},"recovery_active":{}}}}}"#,
                    if busy {
                        "throttled"
                    } else if s.enforcer_never_idle {
                        "settling"
                    } else {
                        "idle"
                    },
                    if s
                        .enforcer_holds_until
                        .is_some_and(|d| self.started.elapsed() < d)
                    {
                        3
                    } else {
                        0
                    },
                    busy || s
                        .enforcer_recovering_until
                        .is_some_and(|d| self.started.elapsed() < d)
                )),
                "/decisions?limit=1000" => Ok(r#"[
                    {"time":1796071000.0,"mode":"enforce","event":"RESTORE","performed":true,"message":"recovery finished: osd_mclock_profile back to high_client_ops"},
                    {"time":1796070934.0,"mode":"enforce","event":"THROTTLE","performed":true,"message":"p99 64 ms above the bound of 32 ms for 4s"}]"#
                    .to_string()),
                other => Err(format!("{other} answered 404")),
            }
        })
    }

    fn exited(&mut self) -> Option<String> {
        let after = self.lab.with(|s| s.enforcer_exits_after);
        after.filter(|d| self.started.elapsed() >= *d).map(|_| {
            "exit status: 2; its last words: error: unexpected argument '--enforcer.ladder-settle' found".to_string()
        })
    }

    async fn stop(self) -> EnforcerEnd {
        self.lab.with(|s| {
            s.calls.push("enforcer SIGTERM".into());
            s.enforcer_running = false;
            if !s.enforcer_leaves_flag {
                s.flags.remove("nobackfill");
            }
            EnforcerEnd {
                problem: None,
                unrestored: s.enforcer_unrestored.clone(),
            }
        })
    }
}

struct FakeProcesses(Lab);

impl Processes for FakeProcesses {
    type Fio = FakeFio;
    type Enforcer = FakeEnforcer;

    async fn run(&self, argv: &[String]) -> Result<String, String> {
        self.0.with(|s| {
            s.calls.push(format!("run {}", argv.join(" ")));
            match argv.first().map(String::as_str) {
                Some("start-recovery") => {
                    s.recovery_starts.push(Instant::now());
                    s.start_recovery(6000.0);
                    Ok(String::new())
                }
                // Reweighting back is a second, faster rebalance.
                Some("stop-recovery") => {
                    s.moving = Some(Moving {
                        total: 3000.0,
                        rate: 300.0,
                        from: Instant::now(),
                    });
                    Ok(String::new())
                }
                _ => Err(format!("`{}` failed (exit status: 127)", argv.join(" "))),
            }
        })
    }

    fn start_fio(&self, argv: &[String]) -> Result<FakeFio, String> {
        self.0
            .with(|s| s.calls.push(format!("fio started: {}", argv.join(" "))));
        Ok(FakeFio {
            lab: self.0.clone(),
            started: Instant::now(),
        })
    }

    fn start_enforcer(
        &self,
        baseline: f64,
        multiplier: f64,
        extra: &[&str],
    ) -> Result<FakeEnforcer, String> {
        self.0.with(|s| {
            s.calls.push(format!(
                "enforcer start --enforcer.baseline {} --enforcer.multiplier {multiplier}{}",
                baseline_arg(baseline),
                extra.iter().map(|w| format!(" {w}")).collect::<String>()
            ));
            s.enforcer_running = true;
            if s.enforcer_leaves_flag {
                s.flags.insert("nobackfill".into());
            }
            for k in s.enforcer_unrestored.keys().cloned().collect::<Vec<_>>() {
                s.db.insert(k, "100".into());
            }
        });
        Ok(FakeEnforcer {
            lab: self.0.clone(),
            started: Instant::now(),
        })
    }
}

fn plan(rows: &str) -> ExperimentPlan {
    ExperimentPlan {
        fio: vec!["fio-json".into(), "100000".into()],
        start_recovery: Some(vec!["start-recovery".into()]),
        stop_recovery: Some(vec!["stop-recovery".into()]),
        rows: parse_rows(rows).unwrap(),
        baseline_window: Duration::from_secs(60),
        multiplier: 2.0,
        max_recovery: Duration::from_secs(20 * 60),
        poll_every: Duration::from_secs(3),
        enforcer_ready_within: Duration::from_secs(30),
        enforcer_idle_within: Duration::from_secs(120),
        metrics_path: "/metrics".into(),
        window: WINDOW,
    }
}

async fn run(
    lab: &Lab,
    plan: &ExperimentPlan,
    cancel_after: Option<u64>,
) -> (Result<ExperimentResult, TuningError>, Vec<String>) {
    let (tx, mut cancel) = watch::channel(false);
    if let Some(secs) = cancel_after {
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_secs(secs)).await;
            let _ = tx.send(true);
        });
    } else {
        std::mem::forget(tx);
    }
    let mut progress = RecordedProgress::default();
    let r = experiment(
        lab,
        &FakeProcesses(lab.clone()),
        plan,
        &mut progress,
        &mut cancel,
    )
    .await;
    (r, progress.lines)
}

fn p99s(r: &ExperimentResult) -> Vec<Option<f64>> {
    r.rows.iter().map(|r| r.p99_seconds).collect()
}

// ---------------------------------------------------------------------------------------------
// The orchestration.

#[tokio::test(start_paused = true)]
async fn every_row_runs_in_order_and_the_cluster_is_put_back() {
    let lab = Lab::new();
    lab.with(|s| {
        s.db.insert("osd_mclock_profile".into(), "high_client_ops".into());
    });
    let (r, lines) = run(&lab, &plan(DEFAULT_ROWS), None).await;
    let r = r.unwrap();
    assert!(r.complete, "{r:#?}");
    assert_eq!(r.exit_code(), 0);
    assert_eq!(
        r.rows.iter().map(|r| r.label.as_str()).collect::<Vec<_>>(),
        vec![
            "no recovery",
            "balanced",
            "high_client_ops",
            "high_recovery_ops",
            "enforced (2x)"
        ]
    );
    assert_eq!(
        p99s(&r),
        vec![
            Some(0.016),
            Some(0.038),
            Some(0.064),
            Some(0.071),
            Some(0.030)
        ]
    );
    assert_eq!(r.baseline_p99_seconds, Some(0.016));
    assert_eq!(r.bound_seconds, Some(0.032));
    assert_eq!(
        r.rows.iter().map(|r| r.within_bound).collect::<Vec<_>>(),
        vec![
            Some(true),
            Some(false),
            Some(false),
            Some(false),
            Some(true)
        ]
    );
    // 6000 objects at 100, 50, 200 and (throttled) 40 obj/s, polled every 3 s.
    assert_eq!(
        r.rows
            .iter()
            .map(|r| (r.recovery_seconds, r.objects_per_second))
            .collect::<Vec<_>>(),
        vec![
            (None, None),
            (Some(60.0), Some(100.0)),
            (Some(120.0), Some(50.0)),
            (Some(30.0), Some(200.0)),
            (Some(150.0), Some(40.0))
        ]
    );
    assert!(r.rows.iter().all(|r| r.incomplete.is_none()));
    assert_eq!(
        lab.actions(),
        vec![
            "config set osd osd_mclock_profile balanced",
            "run start-recovery",
            "run stop-recovery",
            "config set osd osd_mclock_profile high_client_ops",
            "run start-recovery",
            "run stop-recovery",
            "config set osd osd_mclock_profile high_recovery_ops",
            "run start-recovery",
            "run stop-recovery",
            // The enforcer starts from the profile found.
            "config set osd osd_mclock_profile high_client_ops",
            "enforcer start --enforcer.baseline 16ms --enforcer.multiplier 2",
            "run start-recovery",
            "enforcer SIGTERM",
            "run stop-recovery",
            "config set osd osd_mclock_profile high_client_ops",
        ]
    );
    // fio runs for each row and is stopped each time.
    let calls = lab.calls();
    assert_eq!(
        calls
            .iter()
            .filter(|c| c.starts_with("fio started"))
            .count(),
        5
    );
    assert_eq!(calls.iter().filter(|c| *c == "fio stopped").count(), 5);
    assert_eq!(
        lab.with(|s| s.db.get("osd_mclock_profile").cloned()),
        Some("high_client_ops".into())
    );
    let e = r.enforcer.as_ref().unwrap();
    assert_eq!(e.top_rung, 4);
    assert_eq!(e.paused_seconds, Some(95.0));
    assert!(e.idle_after_recovery);
    // Oldest first.
    assert_eq!(r.decisions.len(), 2);
    assert_eq!(r.decisions[0]["event"], "THROTTLE");
    assert!(r
        .notes
        .iter()
        .any(|n| n == "enforced (2x): ladder reached rung 4 (pause), paused 1m35s in total; decisions below"),
        "{:#?}", r.notes);
    assert!(r.not_restored.is_empty());
    assert_eq!(
        r.restored,
        vec!["osd_mclock_profile: high_client_ops (set in the config database)"]
    );

    // Per window: the no-recovery row is within its own bound; the enforced row starts over
    // it and is back after three windows of 90 ms.
    let windows = |i: usize| {
        let row = &r.rows[i];
        (
            row.windows.len(),
            row.windows_within_bound,
            row.worst_window_p99_seconds,
            row.reaction_seconds,
        )
    };
    assert_eq!(windows(0), (6, Some(1.0), Some(0.016), None));
    assert_eq!(windows(1), (6, Some(0.0), Some(0.038), None));
    assert_eq!(windows(4), (15, Some(0.8), Some(0.09), Some(30.0)));
    assert!(r.rows.iter().all(|r| r.windows_missing.is_none()));
    // fio was asked for its periodic json+ reports.
    assert!(calls
        .iter()
        .any(|c| c == "fio started: fio-json 100000 --status-interval=10 --output-format=json+"));

    let text = render(&r);
    // The columns line up under the longest label.
    let first = text.lines().next().unwrap();
    assert!(first.starts_with("row                p50"), "{text}");
    assert!(
        text.contains("high_recovery_ops  23.7 ms  47.3 ms  71.0 ms  4.4x          no         30s            200 obj/s"),
        "{text}"
    );
    assert!(
        text.contains("enforced (2x)      10.0 ms  20.0 ms  30.0 ms  1.9x          yes        2m30s          40 obj/s   80% (12/15)        90.0 ms       30s\n"),
        "{text}"
    );
    assert!(
        text.contains("no recovery        5.3 ms   10.7 ms  16.0 ms  1.0x          yes        -              -          100% (6/6)         16.0 ms       -\n"),
        "{text}"
    );
    assert!(text.contains(
        "client write p99 per 10-s window, in ms (! over the bound, - no write completed):\n"
    ));
    assert!(
        text.contains("\n  enforced (2x)      !90 !90 !90 30 30 30 30 30 30 30 30 30 30 30 30\n"),
        "{text}"
    );
    assert!(text.contains("enforced (2x): first window over the bound at 0:00 (p99 90.0 ms); back within it (3 windows in a row) from 0:30: reaction 30s"), "{text}");
    assert!(text.contains("baseline: p99 16.0 ms without recovery; bound: p99 32.0 ms (2x)"));
    assert!(text.contains("decisions of the enforced (2x) row (2, oldest first):"));
    let throttle = text.find("THROTTLE").unwrap();
    let restore = text.find("RESTORE ").unwrap();
    assert!(throttle < restore, "{text}");
    assert!(
        text.contains("  20:35:34 THROTTLE  p99 64 ms above the bound"),
        "{text}"
    );
    // Progress says what row runs and how far the recovery is.
    assert!(lines.iter().any(|l| l == "say: row 2/5: balanced"));
    assert!(
        lines.iter().any(|l| l
            .starts_with("balanced: recovering for 30s, 3000 objects degraded + misplaced left")),
        "{lines:#?}"
    );
    assert!(lines.iter().any(|l| l.contains("enforcer rung up to 4")));
}

#[tokio::test(start_paused = true)]
async fn a_row_that_times_out_is_incomplete_and_the_profile_goes_back_to_not_set() {
    let lab = Lab::new();
    lab.with(|s| s.stuck = true);
    let mut p = plan("no-recovery,balanced,high_client_ops");
    p.max_recovery = Duration::from_secs(300);
    let (r, _) = run(&lab, &p, None).await;
    let r = r.unwrap();
    assert!(!r.complete);
    assert_eq!(r.exit_code(), 1);
    // The rows measured so far, the timed-out one with its fio numbers.
    assert_eq!(r.rows.len(), 2);
    let why = r.rows[1].incomplete.as_deref().unwrap();
    assert!(
        why.contains("did not finish within 5m0s (--max-recovery): 6000 objects"),
        "{why}"
    );
    assert_eq!(r.rows[1].p99_seconds, Some(0.038));
    assert_eq!(r.rows[1].recovery_seconds, None);
    assert_eq!(
        lab.actions(),
        vec![
            "config set osd osd_mclock_profile balanced",
            "run start-recovery",
            "run stop-recovery",
            "config rm osd osd_mclock_profile",
        ]
    );
    assert!(!lab.with(|s| s.db.contains_key("osd_mclock_profile")));
    assert!(r.restored[0].starts_with("recovery stopped (stop-recovery)"));
    assert_eq!(
        r.restored[1],
        "osd_mclock_profile: not set in the config database (the OSDs ran high_client_ops)"
    );
    let text = render(&r);
    assert!(
        text.contains("balanced: incomplete: the recovery did not finish"),
        "{text}"
    );
    assert!(text.contains("incomplete: not every row was measured"));
    assert!(
        text.lines()
            .any(|l| l.starts_with("balanced ") && l.contains(" incomplete ") && l.ends_with('-')),
        "{text}"
    );
    assert!(
        !text.contains("note: incomplete"),
        "said once, in the row's line: {text}"
    );
}

#[tokio::test(start_paused = true)]
async fn ctrl_c_during_a_row_restores_first_and_exits_130() {
    let lab = Lab::new();
    // Baseline 0-60 s; balanced 60-120 s, back to clean at ~132 s; high_client_ops from then.
    let (r, lines) = run(&lab, &plan(DEFAULT_ROWS), Some(150)).await;
    let r = r.unwrap();
    assert!(r.interrupted && !r.complete);
    assert_eq!(r.exit_code(), 130);
    assert_eq!(r.rows.len(), 3, "{r:#?}");
    let why = r.rows[2].incomplete.as_deref().unwrap();
    assert!(
        why.starts_with("interrupted (Ctrl-C or a signal) after"),
        "{why}"
    );
    let actions = lab.actions();
    assert_eq!(
        &actions[actions.len() - 3..],
        [
            "run start-recovery",
            "run stop-recovery",
            "config rm osd osd_mclock_profile"
        ]
    );
    assert_eq!(lab.calls().last().map(String::as_str), Some("osd dump"));
    assert!(lines
        .iter()
        .any(|l| l.starts_with("say: restored: recovery stopped")));
    assert!(render(&r).contains("interrupted: the rows above"));
}

#[tokio::test(start_paused = true)]
async fn what_the_enforcer_leaves_behind_is_cleared_and_restored() {
    let lab = Lab::new();
    lab.with(|s| {
        s.enforcer_leaves_flag = true;
        s.enforcer_never_idle = true;
        s.enforcer_unrestored
            .insert("osd_mclock_scheduler_background_recovery_lim".into(), None);
    });
    let (r, _) = run(&lab, &plan("no-recovery,enforced"), None).await;
    let r = r.unwrap();
    assert!(r.complete, "{r:#?}");
    assert_eq!(r.exit_code(), 0);
    assert_eq!(
        lab.actions(),
        vec![
            "config rm osd osd_mclock_profile",
            "enforcer start --enforcer.baseline 16ms --enforcer.multiplier 2",
            "run start-recovery",
            "enforcer SIGTERM",
            // Before the clean-up rebalance, which the flag would hold back.
            "osd unset nobackfill",
            "run stop-recovery",
            "config rm osd osd_mclock_profile",
            "config rm osd osd_mclock_scheduler_background_recovery_lim",
        ]
    );
    assert!(!lab.with(|s| s.flags.contains("nobackfill")));
    assert!(lab.with(|s| s.db.is_empty()));
    assert!(r.restored.iter().any(|l| l.starts_with("nobackfill unset")));
    assert!(r.restored.iter().any(|l| l
        == "osd_mclock_scheduler_background_recovery_lim: not set (the enforcer had changed it)"));
    assert!(
        r.notes
            .iter()
            .any(|n| n.contains("was still settling 2m0s after the recovery finished")),
        "{:#?}",
        r.notes
    );
    assert!(!r.enforcer.as_ref().unwrap().idle_after_recovery);
}

#[tokio::test(start_paused = true)]
async fn an_enforcer_that_exits_fails_the_row_with_its_last_words() {
    let lab = Lab::new();
    lab.with(|s| s.enforcer_exits_after = Some(Duration::from_secs(20)));
    let (r, _) = run(&lab, &plan("no-recovery,enforced"), None).await;
    let r = r.unwrap();
    assert_eq!(r.exit_code(), 1);
    let why = r.rows[1].incomplete.as_deref().unwrap();
    assert!(
        why.contains("the enforcer (serve) exited during the recovery")
            && why.contains("unexpected argument '--enforcer.ladder-settle'"),
        "{why}"
    );
    let actions = lab.actions();
    assert!(actions.contains(&"enforcer SIGTERM".to_string()));
    assert_eq!(
        &actions[actions.len() - 2..],
        ["run stop-recovery", "config rm osd osd_mclock_profile"]
    );
}

#[tokio::test(start_paused = true)]
async fn fio_that_ends_during_the_recovery_fails_the_row() {
    let lab = Lab::new();
    lab.with(|s| s.fio_dies_after = Some(Duration::from_secs(30)));
    let mut p = plan("no-recovery,balanced");
    p.baseline_window = Duration::from_secs(20);
    let (r, _) = run(&lab, &p, None).await;
    let r = r.unwrap();
    assert_eq!(r.exit_code(), 1);
    assert!(r.rows[0].incomplete.is_none());
    let why = r.rows[1].incomplete.as_deref().unwrap();
    assert!(
        why.contains("fio ended on its own 30s into the recovery"),
        "{why}"
    );
    assert!(!lab.with(|s| s.db.contains_key("osd_mclock_profile")));
}

#[tokio::test(start_paused = true)]
async fn undersized_pgs_during_a_row_are_said() {
    let lab = Lab::new();
    lab.with(|s| s.undersized = true);
    let (r, _) = run(&lab, &plan("no-recovery,balanced"), None).await;
    let r = r.unwrap();
    assert!(r.complete);
    assert!(
        r.notes
            .iter()
            .any(|n| n.starts_with("balanced: up to 4 PGs were undersized")),
        "{:#?}",
        r.notes
    );
}

#[tokio::test(start_paused = true)]
async fn experiments_that_cannot_mean_anything_are_refused_before_any_change() {
    // wpq: no profiles.
    let lab = Lab::new();
    lab.with(|s| s.op_queue = "wpq");
    let e = run(&lab, &plan(DEFAULT_ROWS), None).await.0.unwrap_err();
    assert!(matches!(e, TuningError::Refused(_)));
    assert!(e.to_string().contains("osd_op_queue wpq"), "{e}");
    assert!(lab.actions().is_empty());

    // A recovery already running.
    let lab = Lab::new();
    lab.with(|s| s.start_recovery(5000.0));
    let e = run(&lab, &plan(DEFAULT_ROWS), None).await.0.unwrap_err();
    assert!(e.to_string().contains("a recovery is already running (0 degraded, 5000 misplaced objects, 4 PGs recovering or backfilling, 0 PGs undersized)"), "{e}");
    assert!(lab.actions().is_empty());

    // The pause flags set.
    let lab = Lab::new();
    lab.with(|s| {
        s.flags.insert("nobackfill".into());
        s.flags.insert("norecover".into());
    });
    let e = run(&lab, &plan(DEFAULT_ROWS), None).await.0.unwrap_err();
    assert!(matches!(e, TuningError::Refused(_)));
    assert!(
        e.to_string()
            .starts_with("nobackfill and norecover set (`ceph osd dump | grep flags`)"),
        "{e}"
    );
    assert!(e
        .to_string()
        .contains("ceph osd unset nobackfill; ceph osd unset norecover"));
    assert!(lab.actions().is_empty());
    assert!(!lab.calls().iter().any(|c| c.starts_with("fio")));

    // Recovery rows without the commands.
    let lab = Lab::new();
    let mut p = plan(DEFAULT_ROWS);
    p.stop_recovery = None;
    let e = run(&lab, &p, None).await.0.unwrap_err();
    assert!(
        e.to_string()
            .contains("--start-recovery and --stop-recovery"),
        "{e}"
    );
    assert!(lab.calls().is_empty());
}

#[tokio::test(start_paused = true)]
async fn the_no_recovery_row_alone_needs_only_fio() {
    let lab = Lab::new();
    let mut p = plan("no-recovery");
    p.start_recovery = None;
    p.stop_recovery = None;
    let (r, _) = run(&lab, &p, None).await;
    let r = r.unwrap();
    assert!(r.complete);
    assert_eq!(r.exit_code(), 0);
    assert_eq!(p99s(&r), vec![Some(0.016)]);
    assert!(lab.actions().is_empty());
    assert!(r.restored.is_empty());
    assert!(!render(&r).contains("decisions"));
}

#[tokio::test(start_paused = true)]
async fn the_pause_only_row_runs_the_enforcer_with_the_backfill_lever_off() {
    let lab = Lab::new();
    let (r, _) = run(
        &lab,
        &plan("no-recovery,enforced-pause-only,enforced"),
        None,
    )
    .await;
    let r = r.unwrap();
    assert!(r.complete, "{r:#?}");
    let starts: Vec<String> = lab
        .actions()
        .into_iter()
        .filter(|a| a.starts_with("enforcer start"))
        .collect();
    assert_eq!(
        starts,
        vec![
            "enforcer start --enforcer.baseline 16ms --enforcer.multiplier 2 --enforcer.backfill-lever off",
            "enforcer start --enforcer.baseline 16ms --enforcer.multiplier 2",
        ]
    );
    let labels: Vec<&str> = r.rows.iter().map(|r| r.label.as_str()).collect();
    assert_eq!(
        labels,
        vec!["no recovery", "enforced, pause only (2x)", "enforced (2x)"]
    );
    // Both enforcer rows get a reaction time and their own decisions.
    let table = render(&r);
    for label in ["enforced, pause only (2x)", "enforced (2x)"] {
        assert!(
            table.contains(&format!("{label}: first window over the bound")),
            "{table}"
        );
        assert!(
            table.contains(&format!("decisions of the {label} row (2, oldest first)")),
            "{table}"
        );
    }
    assert_eq!(r.decisions.len(), 4);
    assert_eq!(r.decisions_of("enforced-pause-only").count(), 2);
}

/// Rows no-recovery and enforced on a lab set up by `setup`: the enforced row's recovery time
/// (the data the cluster shows moves in 2m30s) and the progress lines.
async fn enforced_recovery_seconds(setup: impl FnOnce(&mut LabState)) -> (f64, Vec<String>) {
    let lab = Lab::new();
    lab.with(setup);
    let (r, progress) = run(&lab, &plan("no-recovery,enforced"), None).await;
    let r = r.unwrap();
    assert!(r.complete, "{r:#?}");
    (r.rows[1].recovery_seconds.unwrap(), progress)
}

#[tokio::test(start_paused = true)]
async fn the_recovery_is_not_over_while_the_enforcer_holds_pgs_back() {
    // The lever releases its last PGs at 4m.
    let (t, progress) = enforced_recovery_seconds(|s| {
        s.enforcer_holds_until = Some(Duration::from_secs(240));
    })
    .await;
    assert!((230.0..=250.0).contains(&t), "{t}");
    assert!(
        progress
            .iter()
            .any(|l| l.contains("0 objects degraded + misplaced left")
                && l.contains("3 PGs held back by the enforcer")),
        "{progress:#?}"
    );
}

/// The lab (2026-12-02, fourth run): the lever released its last PG and `ceph status` showed
/// nothing to move for a few seconds more; the row ended there, that PG's backfill left out.
/// The enforcer's `recovery_active` (on for a while after a release) keeps the row going.
#[tokio::test(start_paused = true)]
async fn the_recovery_is_not_over_while_the_enforcer_says_it_goes_on() {
    let (t, _) = enforced_recovery_seconds(|s| {
        s.enforcer_recovering_until = Some(Duration::from_secs(200));
    })
    .await;
    assert!((190.0..=210.0).contains(&t), "{t}");
}

// ---------------------------------------------------------------------------------------------
// The pure parts.

#[test]
fn rows_parse_in_the_order_given_starting_with_no_recovery() {
    assert_eq!(
        parse_rows(DEFAULT_ROWS).unwrap(),
        vec![
            RowKind::NoRecovery,
            RowKind::Profile("balanced"),
            RowKind::Profile("high_client_ops"),
            RowKind::Profile("high_recovery_ops"),
            RowKind::Enforced
        ]
    );
    assert_eq!(
        parse_rows(" no-recovery, enforced ,").unwrap(),
        vec![RowKind::NoRecovery, RowKind::Enforced]
    );
    let e = parse_rows("balanced,no-recovery").unwrap_err();
    assert!(e.contains("must start with no-recovery"), "{e}");
    let e = parse_rows("no-recovery,high_client").unwrap_err();
    assert!(e.contains("unknown row \"high_client\""), "{e}");
    assert_eq!(
        parse_rows("no-recovery,enforced-pause-only,enforced").unwrap(),
        vec![
            RowKind::NoRecovery,
            RowKind::EnforcedPauseOnly,
            RowKind::Enforced
        ]
    );
    assert_eq!(
        parse_rows("no-recovery,enforced,enforced-levels").unwrap(),
        vec![
            RowKind::NoRecovery,
            RowKind::Enforced,
            RowKind::EnforcedLevels
        ]
    );
    assert_eq!(
        RowKind::EnforcedLevels.serve_extra(),
        &["--enforcer.controller", "levels"]
    );
    let e = parse_rows("no-recovery,enforced,enforced").unwrap_err();
    assert!(e.contains("enforced is given twice"), "{e}");
    assert!(parse_rows("").is_err());
}

#[test]
fn level_rows_name_one_lever_at_one_setting() {
    assert_eq!(
        parse_rows("no-recovery,balanced,backfills-2,backfills-16,limit-10").unwrap(),
        vec![
            RowKind::NoRecovery,
            RowKind::Profile("balanced"),
            RowKind::Level(Level::Backfills(2)),
            RowKind::Level(Level::Backfills(16)),
            RowKind::Level(Level::Limit(10))
        ]
    );
    for bad in [
        "backfills-0",
        "backfills-17",
        "backfills-x",
        "limit-0",
        "limit-101",
        "limit-",
    ] {
        let e = parse_rows(&format!("no-recovery,{bad}")).unwrap_err();
        assert!(e.contains("whole number from 1 to"), "{bad}: {e}");
    }
    let e = parse_rows("no-recovery,backfills-2,backfills-2").unwrap_err();
    assert!(e.contains("backfills-2 is given twice"), "{e}");
    assert_eq!(
        Level::Backfills(4).settings(),
        vec![
            ("osd_mclock_override_recovery_settings", "true".to_string()),
            ("osd_max_backfills", "4".to_string())
        ]
    );
    assert_eq!(
        Level::Limit(5).settings(),
        vec![
            ("osd_mclock_profile", "custom".to_string()),
            (
                "osd_mclock_scheduler_background_recovery_res",
                "0".to_string()
            ),
            (
                "osd_mclock_scheduler_background_recovery_lim",
                "0.05".to_string()
            ),
            (
                "osd_mclock_scheduler_background_best_effort_lim",
                "0.05".to_string()
            )
        ]
    );
    // Pacific reads the limit in IOPS and has no override: refused there, and when unknown.
    for level in [Level::Backfills(2), Level::Limit(10)] {
        assert!(level.refusal(Some(18)).is_none());
        assert!(level.refusal(Some(20)).is_none());
        assert!(level.refusal(Some(16)).is_some());
        assert!(level.refusal(None).is_some());
    }
}

#[test]
fn a_row_is_within_the_bound_up_to_multiplier_times_the_baseline() {
    assert!(within_bound(0.091, 0.0455, 2.0));
    assert!(!within_bound(0.0911, 0.0455, 2.0));
    assert!(within_bound(0.030, 0.016, 2.0));
}

#[test]
fn the_rate_is_the_peak_over_the_recovery_time() {
    assert_eq!(recovery_rate(13_216, Duration::from_secs(112)), Some(118.0));
    assert_eq!(recovery_rate(0, Duration::from_secs(112)), None);
    assert_eq!(recovery_rate(100, Duration::ZERO), None);
}

#[test]
fn recovery_and_cleanliness_from_real_status_outputs() {
    use crate::ceph::parse::status::parse;
    use crate::ceph::parse::test_support::fixture;
    let rebalance = parse(&fixture("rebalance/ceph_status.json")).unwrap();
    assert_eq!(rebalance.recovery_counts().pgs_moving, 13);
    assert!(rebalance.recovery_running() && !all_clean(&rebalance));
    assert_eq!(rebalance.recovery_counts().undersized_pgs, 0);
    let healthy = parse(&fixture("healthy-idle/ceph_status.json")).unwrap();
    assert!(!healthy.recovery_running() && all_clean(&healthy));
    let under = parse(&fixture("undersized/ceph_status.json")).unwrap();
    assert!(under.recovery_running());
    assert_eq!(under.recovery_counts().undersized_pgs, 19);
    // Nothing left to move but PGs still peering: not clean yet.
    let peering = parse(br#"{"pgmap":{"num_pgs":33,"pgs_by_state":[{"state_name":"active+clean","count":30},{"state_name":"peering","count":3}]}}"#).unwrap();
    assert!(!peering.recovery_running() && !all_clean(&peering));
    let scrubbing = parse(br#"{"pgmap":{"num_pgs":33,"pgs_by_state":[{"state_name":"active+clean","count":32},{"state_name":"active+clean+scrubbing","count":1}]}}"#).unwrap();
    assert!(all_clean(&scrubbing));
}

#[test]
fn the_enforcers_metrics_are_read_by_exact_name() {
    let text = "# HELP ceph_recovery_budget_paused 1 while paused.\n\
# TYPE ceph_recovery_budget_paused gauge\n\
ceph_recovery_budget_paused 1\n\
ceph_recovery_budget_paused_seconds 95.5\n\
ceph_recovery_budget_pause_flag_set{flag=\"nobackfill\"} 1\n\
ceph_recovery_budget_ladder_rung 3\n";
    assert_eq!(
        metric_value(text, "ceph_recovery_budget_paused_seconds"),
        Some(95.5)
    );
    assert_eq!(metric_value(text, "ceph_recovery_budget_paused"), Some(1.0));
    assert_eq!(
        metric_value(text, "ceph_recovery_budget_ladder_rung"),
        Some(3.0)
    );
    assert_eq!(
        metric_value(text, "ceph_recovery_budget_pause_flag_set"),
        Some(1.0)
    );
    assert_eq!(metric_value(text, "ceph_recovery_budget_ladder"), None);
    assert_eq!(metric_value("x NaN\n", "x").map(f64::is_nan), Some(true));
    assert_eq!(metric_value("x soon\n", "x"), None);
    assert_eq!(metric_value("", "x"), None);
}

#[test]
fn the_enforcers_phase_comes_from_api_status() {
    assert_eq!(
        enforcer_phase(r#"{"health":"HEALTH_OK","enforcer":{"mode":"enforce","phase":"idle"}}"#)
            .as_deref(),
        Some("idle")
    );
    assert_eq!(enforcer_phase(r#"{"enforcer":null}"#), None);
    assert_eq!(enforcer_phase("<html>"), None);
    assert_eq!(
        decisions_oldest_first(r#"[{"event":"B"},{"event":"A"}]"#).unwrap()[0]["event"],
        "A"
    );
    assert!(decisions_oldest_first("{}").is_err());
    assert!(decisions_oldest_first("the enforcer is off").is_err());
}

#[test]
fn the_enforcer_child_gets_the_measured_baseline_and_the_connection() {
    use crate::enforcer::policy::BaselineSpec;
    assert_eq!(baseline_arg(0.0455), "45.5ms");
    assert_eq!(baseline_arg(0.016), "16ms");
    assert_eq!(baseline_arg(0.000_123_4), "0.123ms");
    assert_eq!(baseline_arg(0.180_6), "180.6ms");
    // What serve reads back is the measured p99, to the microsecond.
    match baseline_arg(0.045_512_3).parse::<BaselineSpec>() {
        Ok(BaselineSpec::Fixed(d)) => assert_eq!(d, Duration::from_micros(45_512)),
        other => panic!("{other:?}"),
    }
    let rest: Vec<String> = serve_ceph_args(
        "ceph",
        Some("/tmp/ceph-lab/ceph.conf"),
        None,
        None,
        Duration::from_secs(30),
    );
    assert_eq!(
        rest,
        [
            "--ceph-cmd",
            "ceph",
            "--ceph-conf",
            "/tmp/ceph-lab/ceph.conf",
            "--ceph-timeout",
            "30s"
        ]
    );
    let argv = serve_argv(
        "127.0.0.1:40123",
        0.0455,
        2.0,
        Path::new("/tmp/x/enforcer-state.json"),
        &rest,
    );
    assert_eq!(
        argv.join(" "),
        "serve --web.listen-address 127.0.0.1:40123 --enforcer.mode enforce --enforcer.baseline 45.5ms \
--enforcer.multiplier 2 --enforcer.memory off --enforcer.state-file /tmp/x/enforcer-state.json --ceph-cmd ceph \
--ceph-conf /tmp/ceph-lab/ceph.conf --ceph-timeout 30s"
    );
}

/// The experiment's 30 s Ceph timeout does not fit serve's default lease: the enforced row's
/// serve gets a lease that holds one such command after its renew deadline (found on the lab:
/// serve refused to start), unless --serve-args sets the lease.
#[test]
fn the_enforced_rows_lease_fits_the_experiments_ceph_timeout() {
    let extra = serve_lease_args(Duration::from_secs(30), &[]);
    assert_eq!(extra, ["--enforcer.lease-duration", "57s"]);
    let mut lease = crate::lease::LeaseConfig::DEFAULT;
    lease.lease_duration = Duration::from_secs(57);
    assert!(lease.check_command_timeout(Duration::from_secs(30)).is_ok());
    // serve's own default timeout fits its default lease: nothing added.
    assert!(serve_lease_args(Duration::from_secs(10), &[]).is_empty());
    let own = ["--enforcer.lease-duration=2m".to_string()];
    assert!(serve_lease_args(Duration::from_secs(30), &own).is_empty());
}

#[test]
fn serve_args_add_to_the_experiments_timings_and_replace_the_same_flag() {
    let words = |s: &str| s.split_whitespace().map(String::from).collect::<Vec<_>>();
    let all = with_default_serve_args(&words("--enforcer.recovery-limits 3% --enforcer.for=2s"));
    // Every default timing but the one given, then the given flags.
    assert_eq!(
        all,
        words("--collect.interval 2s --enforcer.latency-window 10s --enforcer.settle 5s --enforcer.min-interval 1s --enforcer.max-changes-per-hour 1000 --enforcer.ladder-settle 10s --enforcer.pause-period 10s --enforcer.recovery-limits 3% --enforcer.for=2s")
    );
    assert_eq!(with_default_serve_args(&[]), words(DEFAULT_SERVE_ARGS));
    // A longer window takes the settle default with it (serve's default follows the window),
    // a slower collection the pause period; a config file keeps its own timings.
    let window = with_default_serve_args(&words("--enforcer.latency-window 30s"));
    assert!(
        !window.contains(&"--enforcer.ladder-settle".to_string()),
        "{window:?}"
    );
    assert!(
        window.contains(&"--enforcer.pause-period".to_string()),
        "{window:?}"
    );
    let interval = with_default_serve_args(&words("--collect.interval=5s"));
    assert!(
        !interval.contains(&"--enforcer.pause-period".to_string()),
        "{interval:?}"
    );
    assert_eq!(
        with_default_serve_args(&words("--config.file crb.yaml")),
        words("--config.file crb.yaml")
    );
    // Every default is a flag and its value.
    assert!(DEFAULT_SERVE_ARGS
        .split_whitespace()
        .collect::<Vec<_>>()
        .chunks(2)
        .all(|p| p.len() == 2 && p[0].starts_with("--") && !p[1].starts_with("--")));
}

#[test]
fn serve_args_may_not_set_what_the_experiment_sets() {
    let words = |s: &str| shell_words::split(s).unwrap();
    assert!(check_serve_args(&words(DEFAULT_SERVE_ARGS)).is_ok());
    for bad in [
        "--enforcer.mode observe",
        "--enforcer.baseline=16ms",
        "--web.listen-address :9939",
        "--web.config.file=/etc/web.yml",
        "--ceph-conf /etc/ceph/ceph.conf",
        "--ceph-timeout 5s",
    ] {
        assert!(check_serve_args(&words(bad)).is_err(), "{bad}");
    }
    let e = check_serve_args(&words("--enforcer.multiplier 3")).unwrap_err();
    assert!(e.contains("give --multiplier"), "{e}");
    assert_eq!(telemetry_path(&words(DEFAULT_SERVE_ARGS)), "/metrics");
    assert_eq!(telemetry_path(&words("--web.telemetry-path /m")), "/m");
    assert_eq!(telemetry_path(&words("--web.telemetry-path=/x")), "/x");
}

#[test]
fn a_row_from_fios_report_after_sigint() {
    use crate::ceph::parse::test_support::fixture_str;
    // A real fio 3.33 report of the lab, stopped with SIGINT ("fio: terminating on signal 2").
    let report = fixture_str("fio/fio_during_rebalance.json");
    let expected = crate::fio::parse(&report).unwrap().write.unwrap();
    let watched = Watched {
        peak: 6001,
        finished_after: Some(Duration::from_secs(50)),
        ..Watched::default()
    };
    let row = build_row(
        RowKind::Profile("balanced"),
        2.0,
        Some(0.0455),
        WINDOW,
        Ok(report),
        Some(&watched),
        None,
    );
    assert_eq!(row.p99_seconds, expected.latency_seconds.p99);
    assert_eq!(row.p50_seconds, expected.latency_seconds.p50);
    assert!(row.p99_over_baseline.is_some());
    assert_eq!(row.recovery_seconds, Some(50.0));
    assert_eq!(row.recovery_objects, Some(6001));
    assert_eq!(row.objects_per_second, Some(120.02));
    assert_eq!(row.incomplete, None);
    // That report is plain JSON, one report: the row's numbers stand, its windows are missing
    // and it says what fio must be run with.
    assert!(row.windows.is_empty());
    assert_eq!(row.windows_within_bound, None);
    assert!(
        row.windows_missing
            .as_deref()
            .is_some_and(|w| w.contains("--output-format=json+")),
        "{row:?}"
    );

    // A real periodic json+ report (fio 3.33, --status-interval=2, stopped with SIGINT) as the
    // enforced row's, baseline 5 ms: bound 10 ms. Its window p99s are -, -, 19.8, 6.1, 5.6,
    // 8.7, 11.9, 4.0 ms; the row's p99 is the final report's.
    let periodic = fixture_str("fio/local_status_interval_2s_sigint.jsonplus.out");
    let row = build_row(
        RowKind::Enforced,
        2.0,
        Some(0.005),
        Duration::from_secs(2),
        Ok(periodic),
        Some(&watched),
        None,
    );
    assert_eq!(row.p99_seconds, Some(0.0073728));
    assert_eq!(row.windows.len(), 8);
    assert_eq!(row.fio_started_at, Some(1796148845.055));
    assert_eq!(
        row.windows_within_bound,
        Some(0.5),
        "the two with no write are not within"
    );
    assert_eq!(row.worst_window_p99_seconds, Some(0.019791872));
    // Over at 4.1 s, within from 6.1 s for three windows.
    assert_eq!(row.reaction_seconds, Some(2.001));
    assert_eq!(row.windows_missing, None);
    // Only the enforced row has a reaction.
    let balanced = build_row(
        RowKind::Profile("balanced"),
        2.0,
        Some(0.005),
        Duration::from_secs(2),
        Ok(fixture_str(
            "fio/local_status_interval_2s_sigint.jsonplus.out",
        )),
        Some(&watched),
        None,
    );
    assert_eq!(balanced.reaction_seconds, None);
    assert_eq!(balanced.windows_within_bound, Some(0.5));

    // No report: the row says why, with no numbers.
    let row = build_row(
        RowKind::Enforced,
        2.0,
        Some(0.0455),
        WINDOW,
        Err("`fio x` failed (exit status: 1): fio: pool rbd-vms does not exist".into()),
        None,
        None,
    );
    assert!(row
        .incomplete
        .as_deref()
        .unwrap()
        .contains("does not exist"));
    assert_eq!(row.within_bound, None);
    // A report without writes.
    let read_only = fixture_str("fio/fio-2.x-rbd-randread-debug_ms-0.txt");
    let row = build_row(
        RowKind::NoRecovery,
        2.0,
        None,
        WINDOW,
        Ok(read_only),
        None,
        None,
    );
    assert!(
        row.incomplete.as_deref().unwrap().contains("no write"),
        "{row:?}"
    );
}

#[test]
fn decision_lines_read_well() {
    let d = serde_json::json!({"time": 1796070934.2, "event": "PAUSE", "message": "p99 180 ms above\nthe bound"});
    assert_eq!(
        decision_line(&d),
        "20:35:34 PAUSE     p99 180 ms above the bound"
    );
    assert_eq!(
        decision_line(&serde_json::json!({"event": "NOTE"})),
        "--:--:-- NOTE"
    );
}

#[test]
fn the_json_has_every_row_field() {
    let r = ExperimentResult {
        baseline_p99_seconds: Some(0.0455),
        multiplier: 2.0,
        window_seconds: 10.0,
        bound_seconds: Some(0.091),
        rows: vec![build_row(
            RowKind::Profile("balanced"),
            2.0,
            Some(0.0455),
            WINDOW,
            Err("fio did not start".into()),
            None,
            Some("fio did not start".into()),
        )],
        enforcer: None,
        decisions: vec![],
        notes: vec![],
        restored: vec![],
        not_restored: vec![],
        complete: false,
        interrupted: false,
    };
    let v = serde_json::to_value(&r).unwrap();
    let row = &v["rows"][0];
    for k in [
        "row",
        "label",
        "p50_seconds",
        "p95_seconds",
        "p99_seconds",
        "p99_over_baseline",
        "within_bound",
        "recovery_seconds",
        "recovery_objects",
        "objects_per_second",
        "incomplete",
        "fio_started_at",
        "windows",
        "windows_within_bound",
        "worst_window_p99_seconds",
        "reaction_seconds",
    ] {
        assert!(row.get(k).is_some(), "{k} missing in {row}");
    }
    assert_eq!(v["bound_seconds"], 0.091);
    assert!(v.get("enforcer").is_none());
}

#[test]
fn the_json_has_each_window_with_null_for_no_p99() {
    use crate::ceph::parse::test_support::fixture_str;
    let row = build_row(
        RowKind::Enforced,
        2.0,
        Some(0.005),
        Duration::from_secs(2),
        Ok(fixture_str(
            "fio/local_status_interval_2s_sigint.jsonplus.out",
        )),
        None,
        None,
    );
    let v = serde_json::to_value(&row).unwrap();
    assert_eq!(
        v["windows"][0],
        serde_json::json!({"start_seconds": 0.0, "end_seconds": 2.098, "writes": 0, "p99_seconds": null})
    );
    assert_eq!(
        v["windows"][2],
        serde_json::json!({"start_seconds": 4.098, "end_seconds": 6.099, "writes": 346, "p99_seconds": 0.019791872})
    );
    assert_eq!(v["windows_within_bound"], 0.5);
    assert_eq!(v["worst_window_p99_seconds"], 0.019791872);
    assert_eq!(v["reaction_seconds"], 2.001);
    assert_eq!(v["windows_missing"], serde_json::Value::Null);
}

/// The enforcer's own p99, read at each poll, goes beside fio's in the window it was read in,
/// in the JSON and under the table: run I on the lab had fio's windows over the bound while
/// the enforcer's were not, and only this line shows it.
#[test]
fn the_enforcers_own_p99_is_shown_beside_the_clients_per_window() {
    use crate::ceph::parse::test_support::fixture_str;
    let fio = fixture_str("fio/local_status_interval_2s_sigint.jsonplus.out");
    let plain = build_row(
        RowKind::Enforced,
        2.0,
        Some(0.005),
        Duration::from_secs(2),
        Ok(fio.clone()),
        None,
        None,
    );
    let start = plain.fio_started_at.unwrap();
    let seen = Watched {
        // Two reads in window 2 (4.098-6.099 s: the last counts), one in window 3, none
        // after; one before fio started belongs to no window.
        enforcer_p99: vec![
            (start - 1.0, 0.5),
            (start + 4.5, 0.004),
            (start + 6.0, 0.0125),
            (start + 7.0, 0.008),
        ],
        ..Watched::default()
    };
    let row = build_row(
        RowKind::Enforced,
        2.0,
        Some(0.005),
        Duration::from_secs(2),
        Ok(fio),
        Some(&seen),
        None,
    );
    let v = serde_json::to_value(&row).unwrap();
    assert_eq!(
        v["windows"][2],
        serde_json::json!({"start_seconds": 4.098, "end_seconds": 6.099, "writes": 346, "p99_seconds": 0.019791872, "enforcer_p99_seconds": 0.0125})
    );
    assert_eq!(v["windows"][3]["enforcer_p99_seconds"], 0.008);
    assert!(v["windows"][0].get("enforcer_p99_seconds").is_none());
    // A recorded result without the field reads back (older records, --from-result).
    let back: ExperimentRow =
        serde_json::from_value(serde_json::to_value(&plain).unwrap()).unwrap();
    assert!(back
        .windows
        .iter()
        .all(|w| w.enforcer_p99_seconds.is_none()));

    let result = |row: ExperimentRow| ExperimentResult {
        baseline_p99_seconds: Some(0.005),
        multiplier: 2.0,
        window_seconds: 2.0,
        bound_seconds: Some(0.01),
        rows: vec![row],
        enforcer: None,
        decisions: vec![],
        notes: vec![],
        restored: vec![],
        not_restored: vec![],
        complete: true,
        interrupted: false,
    };
    let windows = row.windows.len();
    let label = row.label.clone();
    let text = render(&result(row));
    let line = text
        .lines()
        .find(|l| l.starts_with("  enforcer saw "))
        .unwrap_or_else(|| panic!("{text}"));
    let cells: Vec<&str> = line["  enforcer saw ".len()..].split_whitespace().collect();
    assert_eq!(cells.len(), windows, "{text}");
    assert_eq!(&cells[..4], ["-", "-", "!12", "8.0"], "{text}");
    // Right under its row's own windows: with two enforced rows, each reads as its own.
    let lines: Vec<&str> = text.lines().collect();
    let at = lines
        .iter()
        .position(|l| l.starts_with("  enforcer saw "))
        .unwrap_or(0);
    assert!(
        at > 0 && lines[at - 1].trim_start().starts_with(&label),
        "{text}"
    );
    // Without reads there is no such line.
    assert!(!render(&result(plain)).contains("enforcer saw"));
}

#[tokio::test(start_paused = true)]
async fn a_level_row_recovers_under_its_setting_and_puts_the_operators_back() {
    let lab = Lab::new();
    // The operator's own: osd_max_backfills 3 in the config database, no override.
    lab.with(|s| {
        s.db.insert("osd_max_backfills".into(), "3".into());
    });
    let before = lab.with(|s| s.db.clone());
    let (r, _) = run(&lab, &plan("no-recovery,balanced,backfills-2"), None).await;
    let r = r.unwrap();
    assert!(r.complete && r.not_restored.is_empty(), "{r:#?}");
    assert_eq!(r.rows[2].row, "backfills-2");
    assert_eq!(r.rows[2].label, "osd_max_backfills 2 (override on)");
    // The recovery ran under the level, and the level was not there for balanced's.
    let at = lab.with(|s| s.db_at_recovery.clone());
    assert_eq!(at.len(), 2);
    assert_eq!(
        at[0].get("osd_max_backfills").map(String::as_str),
        Some("3")
    );
    assert_eq!(at[0].get("osd_mclock_override_recovery_settings"), None);
    assert_eq!(
        at[1].get("osd_max_backfills").map(String::as_str),
        Some("2")
    );
    assert_eq!(
        at[1]
            .get("osd_mclock_override_recovery_settings")
            .map(String::as_str),
        Some("true")
    );
    // Faster than balanced on the fake (100 obj/s per backfill with the override: 200).
    assert_eq!(r.rows[2].objects_per_second, Some(200.0));
    assert_eq!(lab.with(|s| s.db.clone()), before);
    // Put back before the data moves back: the next row starts from the operator's settings.
    let calls = lab.actions();
    let rm = calls
        .iter()
        .rposition(|c| c == "config rm osd osd_mclock_override_recovery_settings")
        .expect("override removed");
    let back = calls
        .iter()
        .rposition(|c| c == "run stop-recovery")
        .expect("recovery stopped");
    assert!(rm < back, "{calls:#?}");
}

#[tokio::test(start_paused = true)]
async fn a_level_the_release_reads_otherwise_is_refused_before_anything_changes() {
    for release in [Some(16), None] {
        let lab = Lab::new();
        lab.with(|s| s.release = release);
        let (r, _) = run(&lab, &plan("no-recovery,balanced,limit-10"), None).await;
        match r {
            Err(TuningError::Refused(why)) => assert!(why.contains("limit-10"), "{why}"),
            other => panic!("{release:?}: {other:?}"),
        }
        assert!(lab.actions().is_empty(), "{:#?}", lab.actions());
    }
}
