//! `profile-sweep`: what recovery costs clients under each mClock profile, measured before a
//! policy is written. No recovery first, then one controlled recovery measured under each
//! profile in turn; the profile found is put back whatever happens.

use std::time::Duration;

use serde::Serialize;
use tokio::sync::watch;

use super::cluster;
use super::cycle::daemons_took_it;
use super::measure::{self, FioPlan, FioRunner, Progress, WindowSpec};
use super::record::Measurement;
use super::report::{fmt_latency, fmt_magnitude as fmt_rate};
use super::TuningError;
use crate::ceph::Client;

/// In the order the table shows them.
pub const PROFILES: [&str; 3] = ["balanced", "high_recovery_ops", "high_client_ops"];

#[derive(Debug, Clone)]
pub struct SweepPlan {
    pub window: Duration,
    pub settle: Duration,
    pub fio: Vec<String>,
    pub start_recovery: Option<Vec<String>>,
    pub stop_recovery: Option<Vec<String>>,
    pub wait_recovery: Duration,
    pub multiplier: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SweepRow {
    /// `None` for the no-recovery row.
    pub profile: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub p50_seconds: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub p95_seconds: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub p99_seconds: Option<f64>,
    /// `None`: no recovery during the row.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub recovery_objects_per_second: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub interrupted: Option<String>,
}

impl SweepRow {
    fn from_measurement(profile: Option<&str>, m: &Measurement) -> Self {
        let w = m.client.as_ref().and_then(|c| c.fio.write.as_ref());
        let pct =
            |f: fn(&crate::fio::Percentiles) -> Option<f64>| w.and_then(|w| f(&w.latency_seconds));
        SweepRow {
            profile: profile.map(str::to_string),
            p50_seconds: pct(|p| p.p50),
            p95_seconds: pct(|p| p.p95),
            p99_seconds: pct(|p| p.p99),
            recovery_objects_per_second: m
                .recovery
                .objects_per_second
                .filter(|_| m.recovery.running),
            interrupted: m.interrupted.clone(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SweepResult {
    pub rows: Vec<SweepRow>,
    pub multiplier: f64,
    /// `multiplier x` the no-recovery p99.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub suggested_bound_seconds: Option<f64>,
    /// What was found and put back.
    pub profile_restored: String,
    /// Things that make a row less than it looks (recovery ended mid-row, OSDs not switching).
    pub notes: Vec<String>,
    pub complete: bool,
}

fn refuse(msg: impl Into<String>) -> TuningError {
    TuningError::Refused(msg.into())
}

/// Runs the sweep. Changes only `osd_mclock_profile` (section `osd`), and puts it back.
pub async fn sweep<C: Client, F: FioRunner>(
    client: &C,
    runner: &F,
    plan: &SweepPlan,
    progress: &mut dyn Progress,
    cancel: &mut watch::Receiver<bool>,
) -> Result<SweepResult, TuningError> {
    let (facts, warnings) = cluster::scheduler_facts(client).await?;
    if facts.is_mclock() != Some(true) {
        return Err(refuse(format!(
            "the OSDs run osd_op_queue {}: mClock profiles only exist under mclock_scheduler (set in ceph.conf, read at OSD start)",
            facts.op_queue.as_deref().unwrap_or("(they do not agree)")
        )));
    }
    let now = cluster::status(client).await?;
    if now.recovery_running() {
        return Err(refuse(format!(
            "a recovery is already running ({}): the no-recovery row would be wrong; run the sweep on a clean cluster",
            now.recovery_counts().describe()
        )));
    }
    let found =
        cluster::osd_section_value(&cluster::config_dump(client).await?, "osd_mclock_profile");
    let found_text = match &found {
        Some(p) => format!("{p} (set in the config database)"),
        None => format!(
            "not set in the config database (OSDs ran {})",
            facts.mclock_profile.as_deref().unwrap_or("?")
        ),
    };
    let mut result = SweepResult {
        rows: Vec::new(),
        multiplier: plan.multiplier,
        suggested_bound_seconds: None,
        profile_restored: found_text,
        notes: warnings,
        complete: false,
    };
    let fio = FioPlan::Command(plan.fio.clone());

    let spec = WindowSpec::new("no recovery", plan.window);
    let m = measure::measure(client, runner, &fio, &spec, progress, cancel).await;
    let row = SweepRow::from_measurement(None, &m.measurement);
    result.suggested_bound_seconds = row
        .p99_seconds
        .filter(|_| row.interrupted.is_none())
        .map(|p| p * plan.multiplier);
    let stop = row.interrupted.is_some();
    result.rows.push(row);
    if m.measurement.recovery.running {
        result
            .notes
            .push("objects became degraded or misplaced during the no-recovery row".into());
    }
    if stop {
        return Ok(result);
    }

    // From here on the cluster is changed: whatever happens, stop the recovery we started and
    // put the profile back.
    let outcome = recovery_rows(client, runner, plan, &fio, &mut result, progress, cancel).await;
    if let Some(stop) = &plan.stop_recovery {
        progress.say(&format!(
            "stopping the recovery: {}",
            shell_words::join(stop)
        ));
        if let Err(e) = runner.run(stop).await {
            result.notes.push(format!("--stop-recovery failed: {e}"));
        }
    }
    let restored = cluster::restore(client, "osd_mclock_profile", found.as_deref()).await;
    match &restored {
        Ok(()) => progress.say(&format!("profile restored: {}", result.profile_restored)),
        Err(e) => progress.say(&format!(
            "PROFILE NOT RESTORED ({e}): set osd_mclock_profile back by hand to {}",
            result.profile_restored
        )),
    }
    // Both errors matter; the restore's is the one that leaves the cluster changed.
    if let (Err(measuring), Err(restoring)) = (&outcome, &restored) {
        return Err(TuningError::Cluster(format!(
            "{restoring}; and the sweep itself failed: {measuring}"
        )));
    }
    outcome?;
    restored?;
    Ok(result)
}

async fn recovery_rows<C: Client, F: FioRunner>(
    client: &C,
    runner: &F,
    plan: &SweepPlan,
    fio: &FioPlan,
    result: &mut SweepResult,
    progress: &mut dyn Progress,
    cancel: &mut watch::Receiver<bool>,
) -> Result<(), TuningError> {
    match &plan.start_recovery {
        Some(start) => {
            progress.say(&format!("starting the recovery: {}", shell_words::join(start)));
            runner
                .run(start)
                .await
                .map_err(|e| refuse(format!("--start-recovery failed: {e}")))?;
        }
        None => progress.say(
            "start the controlled recovery now (e.g. `ceph osd reweight N 0.8` or mark an OSD out); waiting for degraded or misplaced objects",
        ),
    }
    if !wait_for_recovery(client, plan.wait_recovery, progress, cancel).await? {
        return Ok(());
    }
    for profile in PROFILES {
        cluster::set(client, "osd_mclock_profile", profile).await?;
        if let Some(w) =
            daemons_took_it(client, "osd_mclock_profile", profile, progress, cancel).await
        {
            result.notes.push(w);
        }
        let label = format!("recovery, {profile}");
        if !measure::wait_with_progress(
            &format!("{label}: settling"),
            plan.settle,
            Duration::from_secs(1),
            progress,
            cancel,
        )
        .await
        {
            return Ok(());
        }
        let spec = WindowSpec::new(label, plan.window);
        let m = measure::measure(client, runner, fio, &spec, progress, cancel).await;
        let row = SweepRow::from_measurement(Some(profile), &m.measurement);
        let stop = row.interrupted.is_some();
        result.rows.push(row);
        if stop {
            return Ok(());
        }
        let r = &m.measurement.recovery;
        if !r.running {
            result.notes.push(format!(
                "the recovery was over before the {profile} row: start a larger one or shorten --window"
            ));
            return Ok(());
        }
        if let Some(t) = r.finished_after_seconds {
            result.notes.push(format!(
                "the recovery ended {t:.0} s into the {profile} row: its latency is partly without recovery"
            ));
            if profile != PROFILES[PROFILES.len() - 1] {
                return Ok(());
            }
        }
    }
    result.complete = true;
    Ok(())
}

/// Polls `ceph status` until objects are degraded or misplaced; false on timeout or Ctrl-C.
async fn wait_for_recovery<C: Client>(
    client: &C,
    limit: Duration,
    progress: &mut dyn Progress,
    cancel: &mut watch::Receiver<bool>,
) -> Result<bool, TuningError> {
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        let s = cluster::status(client).await?;
        if s.degraded_objects + s.misplaced_objects > 0 {
            progress.done();
            return Ok(true);
        }
        let now = tokio::time::Instant::now();
        if now >= deadline {
            progress.done();
            return Err(refuse(format!(
                "no recovery showed up within {}: nothing degraded or misplaced",
                humantime::format_duration(limit)
            )));
        }
        progress.update(&format!(
            "waiting for the recovery to start ({} left)",
            crate::units::fmt_secs((deadline - now).as_secs_f64())
        ));
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_secs(2)) => {}
            _ = measure::cancelled(cancel) => { progress.done(); return Ok(false); }
        }
    }
}

/// The table of the issue, with each row's recovery rate, and the suggested bound.
pub fn render(result: &SweepResult) -> String {
    let label = |r: &SweepRow| match &r.profile {
        None => "no recovery:".to_string(),
        Some(p) => format!("recovery, {}:", p.strip_suffix("_ops").unwrap_or(p)),
    };
    let width = result
        .rows
        .iter()
        .map(|r| label(r).len())
        .max()
        .unwrap_or(0)
        + 2;
    let lat = |name: &str, v: Option<f64>| match v {
        Some(s) => format!("{name} {}", fmt_latency(s)),
        None => format!("{name} n/a"),
    };
    let mut out = String::new();
    for r in &result.rows {
        let mut line = format!("{:<width$}", label(r));
        if let Some(why) = &r.interrupted {
            line.push_str(&format!("not measured: {why}"));
        } else {
            line.push_str(&format!(
                "{:<12}{:<12}{:<12}",
                lat("p50", r.p50_seconds),
                lat("p95", r.p95_seconds),
                lat("p99", r.p99_seconds)
            ));
            line.push_str(
                &match (r.profile.is_some(), r.recovery_objects_per_second) {
                    (false, None) => String::new(),
                    (_, Some(rate)) => format!("{} obj/s", fmt_rate(rate)),
                    (true, None) => "no recovery".into(),
                },
            );
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out.push('\n');
    match (
        result.suggested_bound_seconds,
        result.rows.first().and_then(|r| r.p99_seconds),
    ) {
        (Some(b), Some(p99)) => out.push_str(&format!(
            "suggested bound: p99 {} ({}x the no-recovery p99 of {})\n",
            fmt_latency(b),
            result.multiplier,
            fmt_latency(p99)
        )),
        _ => out.push_str("suggested bound: none (the no-recovery row has no p99)\n"),
    }
    out.push_str(&format!("profile restored: {}\n", result.profile_restored));
    if !result.complete {
        out.push_str("incomplete: not every profile was measured\n");
    }
    for n in &result.notes {
        out.push_str(&format!("note: {n}\n"));
    }
    out
}

#[cfg(test)]
mod tests;
