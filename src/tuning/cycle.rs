//! `baseline`, `tune step` and `tune decide`: the discipline of the tuning cycle, in order.
//!
//! The record is saved before every change to the cluster and after every result, so whatever
//! stops the program (Ctrl-C, a crash, a lost SSH session) the record says what is applied and
//! what is undecided, and `tune decide --revert` can put it back.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use tokio::sync::watch;

use super::cluster;
use super::judge::{self, Goal};
use super::knowledge;
use super::measure::{self, FioPlan, FioRunner, Measured, Progress, WindowSpec};
use super::record::{
    rfc3339, Action, Baseline, ClusterInfo, ConfigSetting, Decision, FioSource, Scheduler, Step,
    TuningRecord, FORMAT,
};
use super::report::fmt_magnitude as fmt_rate;
use super::TuningError;
use crate::ceph::Client;

#[derive(Debug, Clone)]
pub struct BaselinePlan {
    pub record: PathBuf,
    pub window: Duration,
    pub fio: FioPlan,
    pub hardware: Option<String>,
    pub cluster_name: String,
    pub multiplier: f64,
}

/// Where fio's raw outputs go: `tuning.yaml` -> `tuning.yaml.fio/`.
pub fn raw_dir(record: &Path) -> PathBuf {
    let mut s = record.as_os_str().to_owned();
    s.push(".fio");
    PathBuf::from(s)
}

fn save_raw(record: &Path, name: &str, text: &str) -> Result<String, TuningError> {
    let dir = raw_dir(record);
    std::fs::create_dir_all(&dir)
        .map_err(|e| TuningError::Io(format!("creating {}: {e}", dir.display())))?;
    let path = dir.join(name);
    crate::atomic_file::write(&path, text.as_bytes())
        .map_err(|e| TuningError::Io(format!("writing {}: {e}", path.display())))?;
    Ok(path.display().to_string())
}

/// Keeps fio's raw output beside the record and notes where in the measurement.
fn keep_raw(record: &Path, name: &str, measured: &mut Measured) -> Result<(), TuningError> {
    if let Some(text) = &measured.raw_fio {
        let path = save_raw(record, name, text)?;
        if let Some(c) = measured.measurement.client.as_mut() {
            c.raw_output = Some(path);
        }
    }
    Ok(())
}

/// Measures the baseline and writes it as the first entry of a new record. An interrupted
/// measurement is still written, saying so.
pub async fn baseline<C: Client, F: FioRunner>(
    client: &C,
    fio: &F,
    plan: &BaselinePlan,
    progress: &mut dyn Progress,
    cancel: &mut watch::Receiver<bool>,
) -> Result<TuningRecord, TuningError> {
    let _held = super::record::RecordLock::take(&plan.record, "baseline")?;
    if plan.record.exists() {
        return Err(TuningError::Refused(format!(
            "{} already exists: a baseline starts a new record and would replace this one. Move it away or choose another --record",
            plan.record.display()
        )));
    }
    if !(plan.multiplier > 1.0 && plan.multiplier.is_finite()) {
        return Err(TuningError::Refused(format!(
            "--multiplier {} must be a number above 1 (the bound is multiplier x the baseline p99)",
            plan.multiplier
        )));
    }
    let status = cluster::status(client).await?;
    let dump = cluster::config_dump(client).await?;
    let (facts, warnings) = cluster::scheduler_facts(client).await?;
    for w in &warnings {
        progress.say(&format!("warning: {w}"));
    }
    let osd_config = dump
        .iter()
        .filter(|e| e.section == "global" || e.section == "osd" || e.section.starts_with("osd."))
        .map(|e| ConfigSetting {
            section: e.section.clone(),
            name: e.name.clone(),
            value: e.value.clone(),
            mask: e.mask.clone(),
        })
        .collect();
    let op_queue = facts.op_queue.clone().unwrap_or_else(|| "mixed".into());
    let mclock_profile = if facts.is_mclock() == Some(true) {
        facts.mclock_profile.clone()
    } else {
        None
    };

    let spec = WindowSpec::new("baseline", plan.window);
    let mut measured = measure::measure(client, fio, &plan.fio, &spec, progress, cancel).await;
    keep_raw(&plan.record, "baseline.out", &mut measured)?;
    let record = TuningRecord {
        format: FORMAT,
        cluster: ClusterInfo {
            name: plan.cluster_name.clone(),
            fsid: status.fsid.unwrap_or_else(|| "unknown".into()),
        },
        hardware: plan.hardware.clone(),
        multiplier: plan.multiplier,
        baseline: Baseline {
            date: rfc3339(SystemTime::now()),
            scheduler: Scheduler {
                op_queue,
                mclock_profile,
            },
            osd_config,
            measurement: measured.measurement,
        },
        steps: Vec::new(),
    };
    record.save(&plan.record)?;
    Ok(record)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DecideMode {
    Keep,
    Revert,
    /// By the verdict: keep a favourable step, revert anything else.
    Auto,
    /// Ask on the terminal; leave undecided when nobody can answer.
    Ask,
}

#[derive(Debug, Clone, PartialEq)]
pub enum GoalSpec {
    Rate(f64),
    RecoveryTime(Duration),
}

#[derive(Debug, Clone)]
pub struct StepPlan {
    pub record: PathBuf,
    pub setting: String,
    pub value: String,
    pub settle: Duration,
    pub window: Duration,
    /// `None`: the baseline's fio command again.
    pub fio: Option<FioPlan>,
    pub decide: DecideMode,
    /// Go ahead despite a warning that the step would be wasted.
    pub force: bool,
    pub goal: Option<GoalSpec>,
    pub min_gain: f64,
}

/// Answers keep-or-revert; `None` when nobody can answer (not a terminal).
pub trait Asker: Send {
    fn ask(&mut self, question: &str) -> Option<bool>;
}

/// Asks on stdin when it is a terminal.
pub struct TerminalAsker;

impl Asker for TerminalAsker {
    fn ask(&mut self, question: &str) -> Option<bool> {
        use std::io::{BufRead, IsTerminal, Write};
        if !std::io::stdin().is_terminal() {
            return None;
        }
        loop {
            eprint!("{question} [k]eep / [r]evert: ");
            let _ = std::io::stderr().flush();
            let mut line = String::new();
            match std::io::stdin().lock().read_line(&mut line) {
                Ok(0) | Err(_) => return None,
                Ok(_) => {}
            }
            match line.trim().to_ascii_lowercase().as_str() {
                "k" | "keep" => return Some(true),
                "r" | "revert" => return Some(false),
                _ => eprintln!("please answer keep or revert"),
            }
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StepEnd {
    Kept,
    Reverted,
    Undecided,
    /// Ctrl-C: the setting was put back.
    Interrupted,
}

pub struct StepOutcome {
    pub record: TuningRecord,
    pub number: u32,
    pub end: StepEnd,
}

fn refuse(msg: impl Into<String>) -> TuningError {
    TuningError::Refused(msg.into())
}

/// Checks that a setting given on the command line is one option name and a value.
pub fn parse_setting(s: &str) -> Result<(String, String), String> {
    let (name, value) = s
        .split_once('=')
        .ok_or_else(|| format!("--set {s:?} is not NAME=VALUE (e.g. --set osd_max_backfills=4)"))?;
    let (name, value) = (name.trim(), value.trim());
    if name.is_empty()
        || !name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-')
    {
        return Err(format!(
            "--set {s:?}: {name:?} is not a Ceph option name (lower-case letters, digits, _)"
        ));
    }
    if value.is_empty() {
        return Err(format!("--set {s:?} has no value"));
    }
    if value.contains(',') && value.contains('=') {
        return Err(format!(
            "--set {s:?} looks like several settings: a step changes exactly one, so its effect can be told apart"
        ));
    }
    Ok((name.to_string(), value.to_string()))
}

/// One step: checks, apply, settle, measure, judge, decide.
pub async fn step<C: Client, F: FioRunner>(
    client: &C,
    fio: &F,
    plan: &StepPlan,
    asker: &mut dyn Asker,
    progress: &mut dyn Progress,
    cancel: &mut watch::Receiver<bool>,
) -> Result<StepOutcome, TuningError> {
    let _held = super::record::RecordLock::take(
        &plan.record,
        &format!("tune step {}={}", plan.setting, plan.value),
    )?;
    let mut record = TuningRecord::load(&plan.record)?;
    let path = plan.record.display().to_string();
    if let Some(why) = &record.baseline.measurement.interrupted {
        return Err(refuse(format!(
            "the baseline in {path} was not completed ({why}): run `baseline` again into a new record"
        )));
    }
    let Some(bound) = record.bound_seconds() else {
        return Err(refuse(format!(
            "the baseline in {path} has no client write p99, so no step can be judged: run `baseline` again"
        )));
    };
    if let Some(s) = record.undecided() {
        return Err(refuse(format!(
            "step {} ({}={}) in {path} is still undecided: run `ceph-recovery-budget tune decide --record {path} --keep` (or `--revert`) first",
            s.number, s.setting, s.value
        )));
    }
    let fio_plan = match (&plan.fio, &record.baseline.measurement.client) {
        (Some(p), _) => p.clone(),
        (None, Some(c)) => match &c.source {
            FioSource::Command(argv) => FioPlan::Command(argv.clone()),
            FioSource::Report(p) => {
                return Err(refuse(format!(
                    "the baseline took its latency from the report {p}: give this step its own with --fio-output FILE (or --fio-cmd)"
                )))
            }
        },
        (None, None) => return Err(refuse("the baseline has no client measurement")),
    };
    let name = plan.setting.as_str();
    let value = plan.value.as_str();

    // What is there now, in the database and in effect.
    let dump = cluster::config_dump(client).await?;
    let before = cluster::osd_section_value(&dump, name);
    let effective = cluster::config_get_osd(client, name).await.map_err(|e| {
        refuse(format!(
            "Ceph does not give a value for {name} ({e}): is the option name right?"
        ))
    })?;
    if cluster::same_value(before.as_deref().unwrap_or(&effective), value) {
        return Err(refuse(format!(
            "{name} is already {value} for the OSDs ({}): a step must change something",
            if before.is_some() {
                "set in the config database"
            } else {
                "its default"
            }
        )));
    }

    let mut warnings: Vec<String> = Vec::new();
    let (facts, fact_warnings) = cluster::scheduler_facts(client).await?;
    warnings.extend(fact_warnings);
    let mut wasted: Vec<String> = Vec::new();
    if let Some(i) = knowledge::ineffective(name, &facts) {
        wasted.push(format!("{} ({})", i.reason, i.fix));
    }
    let narrower = cluster::narrower_values(&dump, name);
    if !narrower.is_empty() {
        warnings.push(format!(
            "{name} has narrower values that win over `config set osd` for some OSDs: {}",
            narrower.join(", ")
        ));
    }

    let (reference_label, reference) = record.reference();
    let (reference_label, reference) = (reference_label.to_string(), reference.clone());
    let reference_rate = reference
        .recovery
        .objects_per_second
        .filter(|_| reference.recovery.running);
    let goal = match &plan.goal {
        None => None,
        Some(GoalSpec::Rate(r)) => Some(Goal::Rate(*r)),
        Some(GoalSpec::RecoveryTime(t)) => {
            let per_osd = cluster::object_copies_per_osd(client).await?;
            let (osd, objects) = per_osd.first().cloned().ok_or_else(|| {
                refuse("`ceph pg ls` shows no OSD holding objects: no recovery time to estimate")
            })?;
            Some(Goal::RecoveryTime {
                target: *t,
                objects,
                osd,
            })
        }
    };
    if let Some(g) = &goal {
        if g.reached_by(reference_rate) {
            wasted.push(format!(
                "the goal is already reached: {reference_label} recovers at {} obj/s, the goal is {}; a further step would only chase a recovery number nobody asked for",
                reference_rate.map_or("?".into(), fmt_rate),
                g.describe()
            ));
        }
    }
    let now = cluster::status(client).await?;
    same_cluster(&record, now.fsid.as_deref(), &plan.record)?;
    if !now.recovery_running() {
        wasted.push(
            "no recovery is running (nothing degraded, misplaced, moving or undersized), so the step's effect on recovery cannot be measured; start a controlled recovery first".to_string(),
        );
    }
    if !wasted.is_empty() {
        if !plan.force {
            return Err(refuse(format!(
                "not starting a {} step that would be wasted:\n  - {}\n(pass --force to measure it anyway)",
                crate::units::fmt_secs((plan.settle + plan.window).as_secs_f64()),
                wasted.join("\n  - ")
            )));
        }
        warnings.extend(
            wasted
                .into_iter()
                .map(|w| format!("measured anyway (--force): {w}")),
        );
    }
    for w in &warnings {
        progress.say(&format!("warning: {w}"));
    }

    // Record the step before touching the cluster: if we die after `config set`, the record
    // still says what to put back.
    let number = record.next_step_number();
    record.steps.push(Step {
        number,
        setting: name.to_string(),
        value: value.to_string(),
        before: before.clone(),
        applied: rfc3339(SystemTime::now()),
        settle_seconds: plan.settle.as_secs_f64(),
        warnings,
        measurement: None,
        verdict: None,
        decision: None,
    });
    record.save(&plan.record)?;
    // Asked to stop during the checks: nothing has changed yet, and nothing will.
    if *cancel.borrow() {
        record.steps.pop();
        record.save(&plan.record)?;
        return Err(refuse("interrupted before any change: nothing was set"));
    }
    if let Err(e) = cluster::set(client, name, value).await {
        // A `config set` killed at the timeout may still have been applied by the mon: only a
        // step whose value is not in the database is dropped from the record.
        let applied = cluster::config_dump(client)
            .await
            .map(|d| {
                cluster::osd_section_value(&d, name).is_some_and(|v| cluster::same_value(&v, value))
            })
            .unwrap_or(true);
        if applied {
            return Err(TuningError::Cluster(format!(
                "{e}; but {name} = {value} is (or may be) in the config database now: step {number} stays in the record, undecided; check `ceph config dump | grep {name}`, then `ceph-recovery-budget tune decide --record {} --revert` (or --keep)",
                plan.record.display()
            )));
        }
        record.steps.pop();
        record.save(&plan.record)?;
        return Err(e);
    }
    progress.say(&format!(
        "step {number}: set {name} = {value} for the OSDs (was {})",
        before.as_deref().unwrap_or("not set")
    ));
    let i = record.steps.len() - 1;
    if let Some(w) = daemons_took_it(client, name, value, progress, cancel).await {
        progress.say(&format!("warning: {w}"));
        record.steps[i].warnings.push(w);
        record.save(&plan.record)?;
    }

    let label = format!("step {number} ({name}={value})");
    let settled = measure::wait_with_progress(
        &format!("{label}: settling"),
        plan.settle,
        Duration::from_secs(1),
        progress,
        cancel,
    )
    .await;
    if !settled {
        return interrupted(client, record, i, &plan.record, progress).await;
    }
    let spec = WindowSpec::new(label, plan.window);
    let mut measured = measure::measure(client, fio, &fio_plan, &spec, progress, cancel).await;
    keep_raw(&plan.record, &format!("step-{number}.out"), &mut measured)?;
    let was_cancelled = *cancel.borrow();
    let mut verdict = judge::judge(
        bound,
        record.multiplier,
        &reference_label,
        &reference,
        &measured.measurement,
        plan.min_gain,
    );
    if let Some(g) = &goal {
        let rate = measured
            .measurement
            .recovery
            .objects_per_second
            .filter(|_| measured.measurement.interrupted.is_none());
        verdict.goal = Some(g.outcome(rate));
    }
    record.steps[i].measurement = Some(measured.measurement);
    record.steps[i].verdict = Some(verdict.clone());
    record.save(&plan.record)?;
    if was_cancelled {
        return interrupted(client, record, i, &plan.record, progress).await;
    }
    progress.say(&format!(
        "step {number}: {} ({})",
        if verdict.favourable {
            "favourable"
        } else {
            "not favourable"
        },
        verdict.reason
    ));
    if let Some(g) = &verdict.goal {
        progress.say(&format!(
            "goal {}: {}{}",
            g.goal,
            g.detail,
            if g.reached {
                " (reached: stop here unless someone asks for more)"
            } else {
                ""
            }
        ));
    }

    let keep = match plan.decide {
        DecideMode::Keep => Some(true),
        DecideMode::Revert => Some(false),
        DecideMode::Auto => Some(verdict.favourable),
        DecideMode::Ask => asker.ask(&format!(
            "step {number}: {name} = {value} was {} ({}).",
            if verdict.favourable {
                "favourable"
            } else {
                "not favourable"
            },
            verdict.reason
        )),
    };
    let by = if plan.decide == DecideMode::Auto {
        "auto"
    } else {
        "operator"
    };
    let end = match keep {
        None => {
            progress.say(&format!(
                "step {number} is left applied and undecided: run `ceph-recovery-budget tune decide --record {} --keep` or `--revert`",
                plan.record.display()
            ));
            StepEnd::Undecided
        }
        Some(keep) => {
            apply_decision(client, &mut record, i, keep, by, &plan.record).await?;
            progress.say(&decision_line(&record.steps[i]));
            if keep {
                StepEnd::Kept
            } else {
                StepEnd::Reverted
            }
        }
    };
    Ok(StepOutcome {
        record,
        number,
        end,
    })
}

fn decision_line(step: &Step) -> String {
    match (&step.decision, &step.before) {
        (Some(d), _) if d.action == Action::Kept => {
            format!(
                "step {}: kept {} = {}",
                step.number, step.setting, step.value
            )
        }
        (_, Some(b)) => format!(
            "step {}: reverted {} to {b} (`ceph config set osd {} {b}`)",
            step.number, step.setting, step.setting
        ),
        (_, None) => format!(
            "step {}: reverted {} to not set (`ceph config rm osd {}`)",
            step.number, step.setting, step.setting
        ),
    }
}

/// Ctrl-C during a step: the experiment is abandoned, so the setting goes back to what it was.
async fn interrupted<C: Client>(
    client: &C,
    mut record: TuningRecord,
    i: usize,
    path: &Path,
    progress: &mut dyn Progress,
) -> Result<StepOutcome, TuningError> {
    progress.say(&format!(
        "interrupted: putting {} back to {}",
        record.steps[i].setting,
        record.steps[i].before.as_deref().unwrap_or("not set")
    ));
    apply_decision(client, &mut record, i, false, "interrupted", path).await?;
    progress.say(&decision_line(&record.steps[i]));
    let number = record.steps[i].number;
    Ok(StepOutcome {
        record,
        number,
        end: StepEnd::Interrupted,
    })
}

async fn apply_decision<C: Client>(
    client: &C,
    record: &mut TuningRecord,
    i: usize,
    keep: bool,
    by: &str,
    path: &Path,
) -> Result<(), TuningError> {
    let step = &record.steps[i];
    if !keep {
        cluster::restore(client, &step.setting, step.before.as_deref()).await?;
    }
    record.steps[i].decision = Some(Decision {
        action: if keep { Action::Kept } else { Action::Reverted },
        by: by.to_string(),
        at: rfc3339(SystemTime::now()),
    });
    record.save(path)?;
    Ok(())
}

/// Waits up to 10 s for every OSD to run the new value; says which do not (a value pinned in
/// ceph.conf or a per-daemon setting wins, and mClock overrides some options).
pub(crate) async fn daemons_took_it<C: Client>(
    client: &C,
    name: &str,
    value: &str,
    progress: &mut dyn Progress,
    cancel: &mut watch::Receiver<bool>,
) -> Option<String> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let lagging: Vec<String> = match cluster::osd_values(client, name).await {
            Ok((running, _)) => running
                .iter()
                .filter(|(_, v)| !cluster::same_value(v, value))
                .map(|(osd, v)| format!("{osd} runs {v}"))
                .collect(),
            Err(e) => return Some(format!("could not read {name} from the OSDs: {e}")),
        };
        if lagging.is_empty() {
            return None;
        }
        if tokio::time::Instant::now() >= deadline || *cancel.borrow() {
            return Some(format!(
                "the OSDs do not all run {name} = {value} 10 s after `config set`: {} (a value in ceph.conf or an mClock override wins over the config database)",
                lagging.join(", ")
            ));
        }
        progress.update(&format!("waiting for the OSDs to run {name} = {value}"));
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
}

/// `tune decide`: keep or revert the undecided step.
pub async fn decide<C: Client>(
    client: &C,
    record_path: &Path,
    keep: bool,
) -> Result<(TuningRecord, String), TuningError> {
    let _held = super::record::RecordLock::take(record_path, "tune decide")?;
    let mut record = TuningRecord::load(record_path)?;
    let Some(i) = record.steps.iter().position(|s| s.decision.is_none()) else {
        return Err(refuse(format!(
            "no step in {} is waiting for a decision",
            record_path.display()
        )));
    };
    let status = cluster::status(client).await?;
    same_cluster(&record, status.fsid.as_deref(), record_path)?;
    if !keep {
        // Reverting over someone else's later change would undo theirs, not ours.
        let step = &record.steps[i];
        let now = cluster::osd_section_value(&cluster::config_dump(client).await?, &step.setting);
        if !now
            .as_deref()
            .is_some_and(|v| cluster::same_value(v, &step.value))
        {
            return Err(refuse(format!(
                "{} is {} in the config database, not the step's {}: someone changed it since. Put it right by hand, then record the step with `tune decide --keep`",
                step.setting,
                now.as_deref().unwrap_or("not set"),
                step.value
            )));
        }
    }
    apply_decision(client, &mut record, i, keep, "operator", record_path).await?;
    let line = decision_line(&record.steps[i]);
    Ok((record, line))
}

/// A record belongs to one cluster: a `--ceph-conf` pointing elsewhere must not change another
/// cluster's settings and judge them against this one's baseline.
fn same_cluster(record: &TuningRecord, fsid: Option<&str>, path: &Path) -> Result<(), TuningError> {
    match fsid {
        Some(f) if f != record.cluster.fsid => Err(refuse(format!(
            "{} is the record of cluster {} (fsid {}), but the ceph command reaches fsid {f}: check --ceph-conf / CEPH_CONF",
            path.display(),
            record.cluster.name,
            record.cluster.fsid
        ))),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests;
