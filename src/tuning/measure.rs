//! One measurement window: `ceph status` sampled for the recovery rate while the operator's fio
//! command runs for the client latency. Time comes from tokio's clock (paused in tests); commands
//! go through [`Client`] and [`FioRunner`], so the whole window runs against recorded outputs.

use std::future::Future;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use tokio::sync::watch;
use tokio::time::Instant;

use super::record::{rfc3339, ClientLatency, FioSource, FirstLast, Measurement, Recovery};
use super::report::fmt_magnitude as fmt_rate;
use crate::ceph::parse;
use crate::ceph::Client;
use crate::collect::commands;
use crate::units::fmt_secs;

/// One `ceph status` reading.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sample {
    /// Since the window started.
    pub at: Duration,
    pub degraded: u64,
    pub misplaced: u64,
    /// Ceph's own `recovering_objects_per_sec`.
    pub ceph_rate: f64,
}

impl Sample {
    pub fn remaining(&self) -> u64 {
        self.degraded.saturating_add(self.misplaced)
    }
}

/// The recovery numbers of a window. Pure.
///
/// The rate is the fall of degraded + misplaced objects from the first sample where any
/// remained to the first later sample where none did (the recovery finished) or to the last
/// sample. A window with nothing degraded or misplaced is "no recovery", not 0 obj/s: Ceph's
/// leftover `recovering_objects_per_sec` on a clean cluster does not count.
pub fn summarize(samples: &[Sample]) -> Recovery {
    let first_last = |f: fn(&Sample) -> u64| FirstLast {
        first: samples.first().map_or(0, f),
        last: samples.last().map_or(0, f),
    };
    let mut recovery = Recovery {
        running: false,
        objects_per_second: None,
        ceph_objects_per_second: None,
        degraded_objects: first_last(|s| s.degraded),
        misplaced_objects: first_last(|s| s.misplaced),
        finished_after_seconds: None,
        samples: samples.len().try_into().unwrap_or(u32::MAX),
    };
    let Some(start) = samples.iter().position(|s| s.remaining() > 0) else {
        return recovery;
    };
    recovery.running = true;
    let after = &samples[start..];
    let end = match after.iter().position(|s| s.remaining() == 0) {
        Some(i) => {
            recovery.finished_after_seconds = Some(after[i].at.as_secs_f64());
            &after[i]
        }
        None => &after[after.len() - 1],
    };
    let first = &after[0];
    let span = end.at.saturating_sub(first.at).as_secs_f64();
    if span > 0.0 {
        recovery.objects_per_second =
            Some((first.remaining() as f64 - end.remaining() as f64) / span);
    }
    let running: Vec<f64> = after
        .iter()
        .take_while(|s| s.remaining() > 0)
        .map(|s| s.ceph_rate)
        .collect();
    if !running.is_empty() {
        recovery.ceph_objects_per_second = Some(running.iter().sum::<f64>() / running.len() as f64);
    }
    recovery
}

/// How to get the client latency of a window.
#[derive(Debug, Clone, PartialEq)]
pub enum FioPlan {
    /// Run this command (argv) during the window; its stdout is the report.
    Command(Vec<String>),
    /// A report the operator already has; read and checked before the window starts.
    Report { path: PathBuf, text: String },
}

impl FioPlan {
    pub fn source(&self) -> FioSource {
        match self {
            FioPlan::Command(argv) => FioSource::Command(argv.clone()),
            FioPlan::Report { path, .. } => FioSource::Report(path.display().to_string()),
        }
    }

    /// Reads and parses a report up front, so a bad file fails before a 15-minute wait.
    pub fn report(path: &Path) -> Result<Self, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("reading the fio report {}: {e}", path.display()))?;
        check_report(&text, &path.display().to_string())?;
        Ok(FioPlan::Report {
            path: path.to_path_buf(),
            text,
        })
    }
}

/// The report must parse and have a write p99: that is the number every step is judged by.
fn check_report(text: &str, what: &str) -> Result<crate::fio::FioSummary, String> {
    let summary =
        crate::fio::parse(text).map_err(|e| format!("{what} is not a usable fio report: {e}"))?;
    if summary
        .write
        .as_ref()
        .and_then(|w| w.latency_seconds.p99)
        .is_none()
    {
        return Err(format!(
            "{what} has no write completion-latency p99: the fio job must write (rw=write/randwrite/randrw) and report percentiles"
        ));
    }
    Ok(summary)
}

/// Runs the operator's fio command. Dropping the future must stop fio (`kill_on_drop`).
pub trait FioRunner: Send + Sync {
    fn run(&self, argv: &[String]) -> impl Future<Output = Result<String, String>> + Send;
}

/// The real one: no shell, stdout captured, stderr kept for the error.
pub struct ProcessFio;

impl FioRunner for ProcessFio {
    async fn run(&self, argv: &[String]) -> Result<String, String> {
        let Some((program, args)) = argv.split_first() else {
            return Err("the fio command is empty".to_string());
        };
        let out = tokio::process::Command::new(program)
            .args(args)
            .stdin(std::process::Stdio::null())
            .kill_on_drop(true)
            .output()
            .await
            .map_err(|e| format!("could not start `{program}`: {e} (is fio installed?)"))?;
        if !out.status.success() {
            return Err(format!(
                "`{}` failed ({}): {}",
                shell_words::join(argv),
                out.status,
                crate::ceph::first_lines(&String::from_utf8_lossy(&out.stderr), 5)
            ));
        }
        String::from_utf8(out.stdout).map_err(|_| "fio printed something that is not UTF-8".into())
    }
}

/// Where the waiting is shown. Implementations decide how often to print.
pub trait Progress: Send {
    /// A line that stays (a warning, what was done).
    fn say(&mut self, line: &str);
    /// The transient status line.
    fn update(&mut self, line: &str);
    /// The wait is over; the next output starts on a fresh line.
    fn done(&mut self);
}

/// Progress on stderr: one line rewritten in place on a terminal, otherwise a line every 30 s so
/// logs of a `tune step` under `nohup` stay readable.
pub struct TerminalProgress {
    tty: bool,
    last_print: Option<std::time::Instant>,
    dirty: bool,
}

impl TerminalProgress {
    pub fn new() -> Self {
        use std::io::IsTerminal;
        Self {
            tty: std::io::stderr().is_terminal(),
            last_print: None,
            dirty: false,
        }
    }
}

impl Default for TerminalProgress {
    fn default() -> Self {
        Self::new()
    }
}

impl Progress for TerminalProgress {
    fn say(&mut self, line: &str) {
        if self.tty && self.dirty {
            eprint!("\r\x1b[K");
            self.dirty = false;
        }
        eprintln!("{line}");
    }

    fn update(&mut self, line: &str) {
        use std::io::Write;
        let mut err = std::io::stderr();
        if self.tty {
            let _ = write!(err, "\r\x1b[K{line}");
            let _ = err.flush();
            self.dirty = true;
        } else if self
            .last_print
            .is_none_or(|t| t.elapsed() >= Duration::from_secs(30))
        {
            let _ = writeln!(err, "{line}");
            self.last_print = Some(std::time::Instant::now());
        }
    }

    fn done(&mut self) {
        if self.tty && self.dirty {
            eprintln!();
        }
        self.dirty = false;
        self.last_print = None;
    }
}

/// Keeps every line; for tests.
#[derive(Debug, Default)]
pub struct RecordedProgress {
    pub lines: Vec<String>,
}

impl Progress for RecordedProgress {
    fn say(&mut self, line: &str) {
        self.lines.push(format!("say: {line}"));
    }
    fn update(&mut self, line: &str) {
        self.lines.push(line.to_string());
    }
    fn done(&mut self) {}
}

/// Waits `duration`, showing `what` and the time left every `tick`; false when cancelled.
pub async fn wait_with_progress(
    what: &str,
    duration: Duration,
    tick: Duration,
    progress: &mut dyn Progress,
    cancel: &mut watch::Receiver<bool>,
) -> bool {
    let end = Instant::now() + duration;
    loop {
        let now = Instant::now();
        if now >= end {
            progress.done();
            return true;
        }
        progress.update(&format!(
            "{what}: {} left",
            fmt_secs((end - now).as_secs_f64())
        ));
        let next = (now + tick).min(end);
        tokio::select! {
            _ = tokio::time::sleep_until(next) => {}
            _ = cancelled(cancel) => {
                progress.done();
                return false;
            }
        }
    }
}

/// Resolves once cancellation is requested (never, if the sender is gone without asking).
pub async fn cancelled(cancel: &mut watch::Receiver<bool>) {
    if cancel.wait_for(|c| *c).await.is_err() {
        std::future::pending::<()>().await;
    }
}

#[derive(Debug, Clone)]
pub struct WindowSpec {
    /// "baseline", "step 2 (osd_max_backfills=4)": shown in the progress line.
    pub label: String,
    pub window: Duration,
    pub sample_every: Duration,
}

impl WindowSpec {
    /// Samples often enough to see a short window, rarely enough not to load the mons.
    pub fn new(label: impl Into<String>, window: Duration) -> Self {
        let sample_every = (window / 30).clamp(Duration::from_secs(1), Duration::from_secs(10));
        Self {
            label: label.into(),
            window,
            sample_every,
        }
    }
}

/// What a window produced: the measurement, and fio's raw output to keep beside the record.
#[derive(Debug, Clone)]
pub struct Measured {
    pub measurement: Measurement,
    pub raw_fio: Option<String>,
}

/// Runs one window. Never fails: what went wrong (fio failed, Ctrl-C, every `ceph status`
/// failing) is recorded in `measurement.interrupted`, so the record always says what happened.
pub async fn measure<C: Client, F: FioRunner>(
    client: &C,
    fio: &F,
    plan: &FioPlan,
    spec: &WindowSpec,
    progress: &mut dyn Progress,
    cancel: &mut watch::Receiver<bool>,
) -> Measured {
    let started_wall = SystemTime::now();
    let start = Instant::now();
    let end = start + spec.window;
    let mut samples: Vec<Sample> = Vec::new();
    let mut failures: Vec<String> = Vec::new();
    let mut interrupted: Option<String> = None;

    let fio_run = async {
        match plan {
            FioPlan::Command(argv) => fio.run(argv).await,
            FioPlan::Report { text, .. } => Ok(text.clone()),
        }
    };
    tokio::pin!(fio_run);
    let mut fio_result: Option<Result<String, String>> = None;

    // Phase 1: the window, sampling `ceph status`; fio runs alongside.
    let mut next_sample = start;
    while Instant::now() < end && interrupted.is_none() {
        if Instant::now() >= next_sample {
            match sample(client, start).await {
                Ok(s) => samples.push(s),
                Err(e) => failures.push(e),
            }
            next_sample += spec.sample_every;
            // Take the last sample at the end of the window, not up to one interval before it.
            if next_sample > end {
                next_sample = end;
            }
        }
        progress.update(&window_line(spec, end, samples.last(), failures.len()));
        tokio::select! {
            _ = tokio::time::sleep_until(next_sample.min(end)) => {}
            r = &mut fio_run, if fio_result.is_none() => { fio_result = Some(r); }
            _ = cancelled(cancel) => { interrupted = Some(format!("interrupted (Ctrl-C or a signal) after {}", fmt_secs(start.elapsed().as_secs_f64()))); }
        }
    }
    if interrupted.is_none() {
        match sample(client, start).await {
            Ok(s) => samples.push(s),
            Err(e) => failures.push(e),
        }
    }

    // Phase 2: fio may outlast the window; its numbers are part of the measurement.
    if interrupted.is_none() && fio_result.is_none() {
        loop {
            progress.update(&format!(
                "{}: window done; waiting for fio to finish (running {})",
                spec.label,
                fmt_secs(start.elapsed().as_secs_f64())
            ));
            tokio::select! {
                r = &mut fio_run => { fio_result = Some(r); break; }
                _ = tokio::time::sleep(Duration::from_secs(5)) => {}
                _ = cancelled(cancel) => {
                    interrupted = Some(format!("interrupted (Ctrl-C or a signal) after {} while fio was still running", fmt_secs(start.elapsed().as_secs_f64())));
                    break;
                }
            }
        }
    }
    progress.done();

    let mut raw_fio = None;
    let mut client_latency = None;
    match fio_result {
        Some(Ok(text)) => match check_report(&text, "fio's output") {
            Ok(summary) => {
                let mut warnings = summary.warnings.clone();
                warnings.retain(|w| !w.is_empty());
                client_latency = Some(ClientLatency {
                    source: plan.source(),
                    raw_output: None,
                    fio: summary,
                    warnings,
                });
                raw_fio = Some(text);
            }
            Err(e) => {
                raw_fio = Some(text);
                interrupted.get_or_insert(e);
            }
        },
        Some(Err(e)) => {
            interrupted.get_or_insert(format!("fio failed: {e}"));
        }
        None => {}
    }
    if samples.is_empty() {
        let why = format!(
            "no `ceph status` answered during the window ({} failures; last: {})",
            failures.len(),
            failures.last().map_or("none", String::as_str)
        );
        interrupted.get_or_insert(why);
    }

    Measured {
        measurement: Measurement {
            started: rfc3339(started_wall),
            window_seconds: spec.window.as_secs_f64(),
            measured_seconds: start.elapsed().as_secs_f64(),
            recovery: summarize(&samples),
            client: client_latency,
            interrupted,
        },
        raw_fio,
    }
}

async fn sample<C: Client>(client: &C, start: Instant) -> Result<Sample, String> {
    let cmd = commands::status();
    let out = client.run(&cmd).await.map_err(|e| e.to_string())?;
    let stdout = out.success(&cmd).map_err(|e| e.to_string())?;
    let status = parse::status::parse(stdout).map_err(|e| format!("`{cmd}`: {e}"))?;
    Ok(Sample {
        at: start.elapsed(),
        degraded: status.degraded_objects,
        misplaced: status.misplaced_objects,
        ceph_rate: status.recovering_objects_per_sec,
    })
}

fn window_line(spec: &WindowSpec, end: Instant, last: Option<&Sample>, failures: usize) -> String {
    let left = fmt_secs(end.saturating_duration_since(Instant::now()).as_secs_f64());
    let mut line = format!("{}: {left} left", spec.label);
    match last {
        Some(s) if s.remaining() > 0 => line.push_str(&format!(
            ", {} degraded + {} misplaced objects, Ceph reports {} obj/s",
            s.degraded,
            s.misplaced,
            fmt_rate(s.ceph_rate)
        )),
        Some(_) => line.push_str(", no recovery (nothing degraded or misplaced)"),
        None => {}
    }
    if failures > 0 {
        line.push_str(&format!(", {failures} `ceph status` calls failed"));
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ceph::fake::{FakeClient, Reply};

    fn s(at: u64, degraded: u64, misplaced: u64, ceph_rate: f64) -> Sample {
        Sample {
            at: Duration::from_secs(at),
            degraded,
            misplaced,
            ceph_rate,
        }
    }

    #[test]
    fn rate_is_the_fall_of_remaining_objects() {
        let r = summarize(&[
            s(0, 10_000, 2_000, 190.0),
            s(10, 8_000, 1_500, 260.0),
            s(20, 6_000, 1_000, 250.0),
        ]);
        assert!(r.running);
        assert_eq!(r.objects_per_second, Some(250.0));
        assert_eq!(r.ceph_objects_per_second, Some(700.0 / 3.0));
        assert_eq!(
            r.degraded_objects,
            FirstLast {
                first: 10_000,
                last: 6_000
            }
        );
        assert_eq!(
            r.misplaced_objects,
            FirstLast {
                first: 2_000,
                last: 1_000
            }
        );
        assert_eq!(r.finished_after_seconds, None);
        assert_eq!(r.samples, 3);
    }

    #[test]
    fn a_recovery_that_finishes_is_timed_to_its_end() {
        // Finished at 20 s: the idle 20..60 s must not dilute the rate.
        let r = summarize(&[
            s(0, 0, 4_000, 200.0),
            s(10, 0, 2_000, 200.0),
            s(20, 0, 0, 3.0),
            s(40, 0, 0, 0.0),
            s(60, 0, 0, 0.0),
        ]);
        assert_eq!(r.objects_per_second, Some(200.0));
        assert_eq!(r.finished_after_seconds, Some(20.0));
        assert_eq!(r.ceph_objects_per_second, Some(200.0));
    }

    #[test]
    fn no_recovery_is_not_zero() {
        // A clean cluster with Ceph's leftover rate: no recovery, no rate.
        let r = summarize(&[s(0, 0, 0, 2.0), s(10, 0, 0, 0.0)]);
        assert!(!r.running);
        assert_eq!(r.objects_per_second, None);
        assert_eq!(r.ceph_objects_per_second, None);
        assert_eq!(summarize(&[]).samples, 0);
        // One sample only: running, but no span to measure a rate over.
        let r = summarize(&[s(0, 5, 0, 1.0)]);
        assert!(r.running && r.objects_per_second.is_none());
    }

    #[test]
    fn a_recovery_that_starts_mid_window_is_measured_from_its_start() {
        let r = summarize(&[s(0, 0, 0, 0.0), s(10, 1_000, 0, 0.0), s(20, 500, 0, 50.0)]);
        assert_eq!(r.objects_per_second, Some(50.0));
        // New failures during the window show as a negative rate, not hidden.
        let r = summarize(&[s(0, 1_000, 0, 0.0), s(10, 2_000, 0, 0.0)]);
        assert_eq!(r.objects_per_second, Some(-100.0));
    }

    fn status_json(degraded: u64, misplaced: u64, rate: f64) -> Vec<u8> {
        format!(
            r#"{{"fsid":"f","health":{{"status":"HEALTH_WARN"}},"pgmap":{{"pgs_by_state":[],"num_pgs":32,"degraded_objects":{degraded},"misplaced_objects":{misplaced},"recovering_objects_per_sec":{rate}}}}}"#
        )
        .into_bytes()
    }

    struct ScriptedFio {
        output: Result<String, String>,
        runtime: Duration,
    }

    impl FioRunner for ScriptedFio {
        async fn run(&self, _argv: &[String]) -> Result<String, String> {
            tokio::time::sleep(self.runtime).await;
            self.output.clone()
        }
    }

    fn fio_report() -> String {
        std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/fio/fio_during_rebalance.json"
        ))
        .unwrap()
    }

    fn plan() -> FioPlan {
        FioPlan::Command(vec!["fio".into(), "runbook.fio".into()])
    }

    #[tokio::test(start_paused = true)]
    async fn a_window_samples_status_and_takes_fio_latency() {
        let client = FakeClient::new();
        client.set(&commands::status(), Reply::ok(status_json(900, 0, 30.0)));
        let fio = ScriptedFio {
            output: Ok(fio_report()),
            runtime: Duration::from_secs(50),
        };
        let (_tx, mut cancel) = watch::channel(false);
        let mut progress = RecordedProgress::default();
        let spec = WindowSpec::new("baseline", Duration::from_secs(60));
        let m = measure(&client, &fio, &plan(), &spec, &mut progress, &mut cancel).await;
        let r = &m.measurement;
        assert_eq!(r.interrupted, None);
        assert_eq!(r.measured_seconds, 60.0);
        // Every 2 s from 0 to 60 s inclusive.
        assert_eq!(r.recovery.samples, 31);
        assert!(r.recovery.running);
        assert_eq!(r.recovery.objects_per_second, Some(0.0));
        let p99 = r.client.as_ref().and_then(|c| c.write_p99()).unwrap();
        let expected = crate::fio::parse(&fio_report()).unwrap().write.unwrap();
        assert_eq!(Some(p99), expected.latency_seconds.p99);
        assert_eq!(m.raw_fio.as_deref(), Some(fio_report().as_str()));
        assert!(
            progress.lines.iter().any(|l| {
                l
                == "baseline: 1m0s left, 900 degraded + 0 misplaced objects, Ceph reports 30 obj/s"
            }),
            "{:?}",
            &progress.lines[..3]
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_slow_fio_is_waited_for() {
        let client = FakeClient::new();
        client.set(&commands::status(), Reply::ok(status_json(0, 0, 0.0)));
        let fio = ScriptedFio {
            output: Ok(fio_report()),
            runtime: Duration::from_secs(100),
        };
        let (_tx, mut cancel) = watch::channel(false);
        let mut progress = RecordedProgress::default();
        let spec = WindowSpec::new("step 1", Duration::from_secs(30));
        let m = measure(&client, &fio, &plan(), &spec, &mut progress, &mut cancel).await;
        assert_eq!(m.measurement.interrupted, None);
        assert_eq!(m.measurement.measured_seconds, 100.0);
        assert!(!m.measurement.recovery.running);
        assert!(progress
            .lines
            .iter()
            .any(|l| l.starts_with("step 1: window done; waiting for fio")));
    }

    #[tokio::test(start_paused = true)]
    async fn ctrl_c_and_failures_are_recorded_not_lost() {
        let client = FakeClient::new();
        client.set(&commands::status(), Reply::ok(status_json(900, 0, 30.0)));
        let fio = ScriptedFio {
            output: Ok(fio_report()),
            runtime: Duration::from_secs(900),
        };
        let (tx, mut cancel) = watch::channel(false);
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_secs(65)).await;
            let _ = tx.send(true);
        });
        let mut progress = RecordedProgress::default();
        let spec = WindowSpec::new("baseline", Duration::from_secs(900));
        let m = measure(&client, &fio, &plan(), &spec, &mut progress, &mut cancel).await;
        assert_eq!(
            m.measurement.interrupted.as_deref(),
            Some("interrupted (Ctrl-C or a signal) after 1m5s")
        );
        assert_eq!(m.measurement.client, None);
        assert!(m.measurement.recovery.samples > 0);

        // fio failing is said, with fio's words.
        let fio = ScriptedFio {
            output: Err("`fio x` failed (exit status: 1): fio: pool rbd-vms does not exist".into()),
            runtime: Duration::from_secs(1),
        };
        let (_tx, mut cancel) = watch::channel(false);
        let spec = WindowSpec::new("baseline", Duration::from_secs(10));
        let m = measure(&client, &fio, &plan(), &spec, &mut progress, &mut cancel).await;
        let why = m.measurement.interrupted.unwrap();
        assert!(
            why.starts_with("fio failed") && why.contains("does not exist"),
            "{why}"
        );

        // fio printing something else.
        let fio = ScriptedFio {
            output: Ok("hello\n".into()),
            runtime: Duration::from_secs(1),
        };
        let m = measure(&client, &fio, &plan(), &spec, &mut progress, &mut cancel).await;
        let why = m.measurement.interrupted.unwrap();
        assert!(why.contains("not a usable fio report"), "{why}");
        assert_eq!(m.raw_fio.as_deref(), Some("hello\n"));

        // Ceph never answering.
        let dead = FakeClient::new();
        let fio = ScriptedFio {
            output: Ok(fio_report()),
            runtime: Duration::from_secs(1),
        };
        let m = measure(&dead, &fio, &plan(), &spec, &mut progress, &mut cancel).await;
        let why = m.measurement.interrupted.unwrap();
        assert!(why.starts_with("no `ceph status` answered"), "{why}");
    }

    #[test]
    fn a_report_without_write_p99_is_refused_up_front() {
        let dir = std::env::temp_dir().join(format!("crb-plan-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let read_only = dir.join("read.json");
        std::fs::copy(
            concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/tests/fixtures/fio/fio-2.x-rbd-randread-debug_ms-0.txt"
            ),
            &read_only,
        )
        .unwrap();
        let e = FioPlan::report(&read_only).unwrap_err();
        assert!(e.contains("no write completion-latency p99"), "{e}");
        let e = FioPlan::report(&dir.join("missing.json")).unwrap_err();
        assert!(e.contains("missing.json"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
