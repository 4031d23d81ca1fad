//! The tuning record: one YAML file holding the baseline and every step (setting, value before,
//! value tried, both numbers, the verdict and what was decided). It is the answer to next year's
//! "why is osd_max_backfills 4?", so it is written whole or not at all (temp file + rename) and
//! read strictly (unknown keys are errors, not silently dropped).

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::fio::FioSummary;

/// Bumped when a field changes meaning; older files are refused with a clear message.
pub const FORMAT: u32 = 1;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TuningRecord {
    pub format: u32,
    pub cluster: ClusterInfo,
    /// The operator's description (`--hardware`), kept verbatim.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hardware: Option<String>,
    /// Client p99 may rise to `multiplier x` the baseline p99: the bound every step is judged by.
    pub multiplier: f64,
    pub baseline: Baseline,
    #[serde(default)]
    pub steps: Vec<Step>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClusterInfo {
    /// The operator's name for the cluster (`--cluster-name`).
    pub name: String,
    pub fsid: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Baseline {
    /// RFC 3339, UTC.
    pub date: String,
    pub scheduler: Scheduler,
    /// `ceph config dump` entries that reach OSDs (sections `global`, `osd`, `osd.N`), as found.
    #[serde(default)]
    pub osd_config: Vec<ConfigSetting>,
    pub measurement: Measurement,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scheduler {
    /// `osd_op_queue` as the OSDs see it (`wpq`, `mclock_scheduler`).
    pub op_queue: String,
    /// `osd_mclock_profile` in force on the OSDs; absent under wpq.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mclock_profile: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConfigSetting {
    pub section: String,
    pub name: String,
    pub value: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub mask: String,
}

/// Both numbers of one measurement window.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Measurement {
    /// RFC 3339, UTC.
    pub started: String,
    /// The window asked for.
    pub window_seconds: f64,
    /// How long it really ran (shorter when interrupted).
    pub measured_seconds: f64,
    pub recovery: Recovery,
    /// Absent when the measurement was interrupted before fio finished.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client: Option<ClientLatency>,
    /// Why the measurement did not complete (Ctrl-C, fio failed, ...). An interrupted measurement
    /// is kept for the record and never used to judge anything.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interrupted: Option<String>,
}

/// Recovery progress over the window, from `ceph status` samples.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Recovery {
    /// False when no object was degraded or misplaced and Ceph reported no recovery during the
    /// whole window: then there is no rate to report ("no recovery"), which is not 0 obj/s.
    pub running: bool,
    /// Degraded + misplaced objects repaired per second over the window (first to last sample, or
    /// to the sample where they reached 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub objects_per_second: Option<f64>,
    /// The mean of Ceph's own `recovering_objects_per_sec` over the samples.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ceph_objects_per_second: Option<f64>,
    pub degraded_objects: FirstLast,
    pub misplaced_objects: FirstLast,
    /// Set when degraded + misplaced reached 0 during the window.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_after_seconds: Option<f64>,
    pub samples: u32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FirstLast {
    pub first: u64,
    pub last: u64,
}

/// Client latency from fio, the same way for the baseline and every step.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClientLatency {
    pub source: FioSource,
    /// fio's raw output, saved next to the record so the numbers can be re-checked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub raw_output: Option<String>,
    pub fio: FioSummary,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

impl ClientLatency {
    pub fn write_p99(&self) -> Option<f64> {
        self.fio.write.as_ref().and_then(|w| w.latency_seconds.p99)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum FioSource {
    /// The operator's fio command line, run during the window (argv, no shell).
    Command(Vec<String>),
    /// A report the operator produced.
    Report(String),
}

impl std::fmt::Display for FioSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FioSource::Command(argv) => write!(f, "fio command `{}`", shell_words::join(argv)),
            FioSource::Report(path) => write!(f, "fio report {path}"),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Step {
    pub number: u32,
    /// The option, as given to `ceph config set osd`.
    pub setting: String,
    pub value: String,
    /// The value in the config database (section `osd`, no mask) before the step; `None` when it
    /// was not set there (revert is then `ceph config rm`).
    pub before: Option<String>,
    /// RFC 3339, UTC: when `ceph config set` returned.
    pub applied: String,
    pub settle_seconds: f64,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
    /// Absent when the step was interrupted before its measurement started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub measurement: Option<Measurement>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verdict: Option<Verdict>,
    /// Absent while undecided: no further step may start then.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decision: Option<Decision>,
}

impl Step {
    pub fn kept(&self) -> bool {
        matches!(
            self.decision,
            Some(Decision {
                action: Action::Kept,
                ..
            })
        )
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Verdict {
    pub favourable: bool,
    /// One sentence: the numbers and why the trade is (not) favourable.
    pub reason: String,
    /// The goal asked for at this step, and whether the step reached it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub goal: Option<GoalOutcome>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GoalOutcome {
    pub goal: String,
    pub reached: bool,
    pub detail: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Decision {
    pub action: Action,
    /// `operator` (asked or --keep/--revert), `auto` (--auto, by the verdict) or `interrupted`.
    pub by: String,
    /// RFC 3339, UTC.
    pub at: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Action {
    Kept,
    Reverted,
}

#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    #[error("reading the tuning record {path}: {source} (run `ceph-recovery-budget baseline --record {path}` first)")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("the tuning record {path} is not valid: {message}")]
    Invalid { path: PathBuf, message: String },
    #[error("the tuning record {path} has format {found}; this program reads format {FORMAT}")]
    Format { path: PathBuf, found: u32 },
    #[error("writing the tuning record {path}: {source}")]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("encoding the tuning record: {0}")]
    Encode(String),
    #[error("the tuning record {path} is in use by another ceph-recovery-budget ({holder}): wait for it to end, or stop it; two commands on one record would lose one's step")]
    Busy { path: PathBuf, holder: String },
    #[error("locking the tuning record {path} ({lock}): {source}")]
    Lock {
        path: PathBuf,
        lock: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// An exclusive hold on a tuning record while one command works on it, so that two `tune step`s
/// (or a step and a `decide`) on one record cannot both read it and the later write lose the
/// other's step. An advisory `flock` on `.NAME.lock` beside the record: the kernel drops it
/// when the process ends, even by SIGKILL, so it never goes stale.
#[derive(Debug)]
pub struct RecordLock {
    _held: nix::fcntl::Flock<std::fs::File>,
}

impl RecordLock {
    /// Takes the hold, or says who has it. `what` names this command for the other one's error.
    pub fn take(record: &Path, what: &str) -> Result<Self, RecordError> {
        use std::io::{Read, Seek, Write};
        let lock = sibling(record, "lock");
        let lock_err = |source: std::io::Error| RecordError::Lock {
            path: record.to_path_buf(),
            lock: lock.clone(),
            source,
        };
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&lock)
            .map_err(lock_err)?;
        let mut held =
            match nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockExclusiveNonblock) {
                Ok(held) => held,
                Err((mut file, nix::errno::Errno::EWOULDBLOCK)) => {
                    let mut holder = String::new();
                    let _ = file.read_to_string(&mut holder);
                    let holder = holder.trim();
                    return Err(RecordError::Busy {
                        path: record.to_path_buf(),
                        holder: if holder.is_empty() {
                            "it did not say which".to_string()
                        } else {
                            holder.to_string()
                        },
                    });
                }
                Err((_, errno)) => return Err(lock_err(std::io::Error::from(errno))),
            };
        // Who holds it, for the other command's message; the lock itself is the flock.
        let file: &mut std::fs::File = &mut held;
        let who = format!(
            "pid {}, {what}, since {}",
            std::process::id(),
            humantime::format_rfc3339_seconds(std::time::SystemTime::now())
        );
        file.rewind()
            .and_then(|()| file.write_all(who.as_bytes()))
            .and_then(|()| file.set_len(who.len() as u64))
            .map_err(lock_err)?;
        Ok(RecordLock { _held: held })
    }
}

/// `.NAME.SUFFIX` in the record's directory.
fn sibling(path: &Path, suffix: &str) -> PathBuf {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "record".into());
    dir.join(format!(".{name}.{suffix}"))
}

impl TuningRecord {
    pub fn from_yaml(text: &str, path: &Path) -> Result<Self, RecordError> {
        let record: TuningRecord =
            serde_saphyr::from_str(text).map_err(|e| RecordError::Invalid {
                path: path.to_path_buf(),
                message: e.to_string(),
            })?;
        if record.format != FORMAT {
            return Err(RecordError::Format {
                path: path.to_path_buf(),
                found: record.format,
            });
        }
        Ok(record)
    }

    pub fn to_yaml(&self) -> Result<String, RecordError> {
        serde_saphyr::to_string(self).map_err(|e| RecordError::Encode(e.to_string()))
    }

    pub fn load(path: &Path) -> Result<Self, RecordError> {
        let text = std::fs::read_to_string(path).map_err(|source| RecordError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        Self::from_yaml(&text, path)
    }

    /// Writes the whole record to a temporary file beside `path` and renames it over `path`, so a
    /// crash or Ctrl-C leaves either the old record or the new one, never half of one.
    pub fn save(&self, path: &Path) -> Result<(), RecordError> {
        let text = self.to_yaml()?;
        crate::atomic_file::write(path, text.as_bytes()).map_err(|source| RecordError::Write {
            path: path.to_path_buf(),
            source,
        })
    }

    /// The step still waiting for keep/revert, if any.
    pub fn undecided(&self) -> Option<&Step> {
        self.steps.iter().find(|s| s.decision.is_none())
    }

    /// What a new step is compared with: the last kept step's measurement, else the baseline's.
    pub fn reference(&self) -> (&str, &Measurement) {
        self.steps
            .iter()
            .rev()
            // A kept step without a complete measurement cannot be the reference.
            .filter(|s| s.kept())
            .find_map(|s| {
                s.measurement
                    .as_ref()
                    .filter(|m| m.interrupted.is_none())
                    .map(|m| (s.setting.as_str(), m))
            })
            .unwrap_or(("baseline", &self.baseline.measurement))
    }

    /// The client p99 bound, in seconds: `multiplier x` the baseline's write p99.
    pub fn bound_seconds(&self) -> Option<f64> {
        self.baseline
            .measurement
            .client
            .as_ref()
            .and_then(ClientLatency::write_p99)
            .map(|p99| p99 * self.multiplier)
    }

    /// The settings in force after the kept steps, in the order first kept (a setting kept twice
    /// shows its last value).
    pub fn final_settings(&self) -> Vec<(String, String)> {
        let mut out: Vec<(String, String)> = Vec::new();
        for step in self.steps.iter().filter(|s| s.kept()) {
            match out.iter_mut().find(|(name, _)| *name == step.setting) {
                Some(slot) => slot.1 = step.value.clone(),
                None => out.push((step.setting.clone(), step.value.clone())),
            }
        }
        out
    }

    pub fn next_step_number(&self) -> u32 {
        self.steps.iter().map(|s| s.number).max().unwrap_or(0) + 1
    }
}

/// `SystemTime` as RFC 3339 UTC to the second, the form every date in the record takes.
pub fn rfc3339(t: std::time::SystemTime) -> String {
    humantime::format_rfc3339_seconds(t).to_string()
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::fio::{DirectionSummary, Percentiles};

    pub fn measurement(rate: Option<f64>, p99_ms: Option<f64>) -> Measurement {
        Measurement {
            started: "2026-08-18T10:00:00Z".into(),
            window_seconds: 900.0,
            measured_seconds: 900.0,
            recovery: Recovery {
                running: rate.is_some(),
                objects_per_second: rate,
                ceph_objects_per_second: rate.map(|r| r * 1.05),
                degraded_objects: FirstLast {
                    first: 900_000,
                    last: 900_000u64.saturating_sub(rate.unwrap_or(0.0).max(0.0) as u64 * 900),
                },
                misplaced_objects: FirstLast { first: 0, last: 0 },
                finished_after_seconds: None,
                samples: 90,
            },
            client: p99_ms.map(|ms| ClientLatency {
                source: FioSource::Command(vec!["fio".into(), "runbook.fio".into()]),
                raw_output: None,
                fio: FioSummary {
                    write: Some(DirectionSummary {
                        iops: 700.0,
                        bandwidth_bytes_per_second: 2_867_200.0,
                        latency_seconds: Percentiles {
                            p50: Some(ms / 3000.0),
                            p95: Some(ms / 1500.0),
                            p99: Some(ms / 1000.0),
                        },
                    }),
                    ..Default::default()
                },
                warnings: vec![],
            }),
            interrupted: None,
        }
    }

    pub fn step(n: u32, setting: &str, value: &str, rate: f64, p99_ms: f64, kept: bool) -> Step {
        Step {
            number: n,
            setting: setting.into(),
            value: value.into(),
            before: None,
            applied: "2026-08-18T11:00:00Z".into(),
            settle_seconds: 900.0,
            warnings: vec![],
            measurement: Some(measurement(Some(rate), Some(p99_ms))),
            verdict: Some(Verdict {
                favourable: kept,
                reason: if kept {
                    "faster within the bound".into()
                } else {
                    "poor trade".into()
                },
                goal: None,
            }),
            decision: Some(Decision {
                action: if kept { Action::Kept } else { Action::Reverted },
                by: "operator".into(),
                at: "2026-08-18T11:30:00Z".into(),
            }),
        }
    }

    /// The operator's own record from issue #4.
    pub fn operators_record() -> TuningRecord {
        TuningRecord {
            format: FORMAT,
            cluster: ClusterInfo {
                name: "prod-ceph-01".into(),
                fsid: "5a3b5c1e-0000-4000-8000-000000000001".into(),
            },
            hardware: Some("12x 16TB HDD per host, NVMe DB, 25GbE cluster network".into()),
            multiplier: 2.0,
            baseline: Baseline {
                date: "2026-08-18T09:00:00Z".into(),
                scheduler: Scheduler {
                    op_queue: "mclock_scheduler".into(),
                    mclock_profile: Some("balanced".into()),
                },
                osd_config: vec![ConfigSetting {
                    section: "osd".into(),
                    name: "osd_mclock_override_recovery_settings".into(),
                    value: "true".into(),
                    mask: String::new(),
                }],
                measurement: measurement(Some(240.0), Some(12.0)),
            },
            steps: vec![
                step(1, "osd_max_backfills", "2", 460.0, 14.0, true),
                step(2, "osd_max_backfills", "4", 610.0, 19.0, true),
                step(3, "osd_max_backfills", "8", 640.0, 34.0, false),
                step(4, "osd_recovery_sleep_hdd", "0", 700.0, 21.0, true),
            ],
        }
    }

    #[test]
    fn record_round_trips_through_yaml() {
        let mut record = operators_record();
        record.steps[0].before = Some("1".into());
        record.steps[3].measurement.as_mut().unwrap().interrupted = Some("Ctrl-C".into());
        let yaml = record.to_yaml().unwrap();
        let back = TuningRecord::from_yaml(&yaml, Path::new("t.yaml")).unwrap();
        assert_eq!(back, record, "{yaml}");
        // "not set" survives as such, distinct from an empty value.
        assert_eq!(back.steps[1].before, None);
        assert_eq!(back.steps[0].before.as_deref(), Some("1"));
    }

    #[test]
    fn save_and_load_leave_no_temporary_files() {
        let dir = std::env::temp_dir().join(format!("crb-record-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("tuning.yaml");
        let record = operators_record();
        record.save(&path).unwrap();
        assert_eq!(TuningRecord::load(&path).unwrap(), record);
        let names: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, vec![std::ffi::OsString::from("tuning.yaml")]);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_record_is_held_by_one_command_at_a_time_and_freed_when_it_ends() {
        let dir = std::env::temp_dir().join(format!("crb-record-lock-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("tuning.yaml");
        let first = RecordLock::take(&path, "tune step osd_max_backfills=4").unwrap();
        let e = RecordLock::take(&path, "tune decide")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("is in use by another ceph-recovery-budget")
                && e.contains(&format!("pid {}", std::process::id()))
                && e.contains("tune step osd_max_backfills=4"),
            "{e}"
        );
        drop(first);
        let again = RecordLock::take(&path, "tune decide");
        assert!(again.is_ok(), "{again:?}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn bad_records_are_refused_with_the_reason() {
        let p = Path::new("tuning.yaml");
        let yaml = operators_record().to_yaml().unwrap();
        let unknown = yaml.replacen("multiplier:", "multipler: 2\nmultiplier:", 1);
        let e = TuningRecord::from_yaml(&unknown, p)
            .unwrap_err()
            .to_string();
        assert!(e.contains("tuning.yaml") && e.contains("multipler"), "{e}");
        let future = yaml.replacen("format: 1", "format: 7", 1);
        let e = TuningRecord::from_yaml(&future, p).unwrap_err().to_string();
        assert!(e.contains("format 7"), "{e}");
        let e = TuningRecord::load(Path::new("/nonexistent/t.yaml"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("baseline --record"), "{e}");
    }

    #[test]
    fn reference_bound_and_final_settings_follow_the_kept_steps() {
        let record = operators_record();
        let (name, m) = record.reference();
        assert_eq!(name, "osd_recovery_sleep_hdd");
        assert_eq!(m.recovery.objects_per_second, Some(700.0));
        assert!((record.bound_seconds().unwrap() - 0.024).abs() < 1e-12);
        assert_eq!(
            record.final_settings(),
            vec![
                ("osd_max_backfills".to_string(), "4".to_string()),
                ("osd_recovery_sleep_hdd".to_string(), "0".to_string())
            ]
        );
        assert_eq!(record.next_step_number(), 5);
        assert!(record.undecided().is_none());

        let mut fresh = operators_record();
        fresh.steps.clear();
        assert_eq!(fresh.reference().0, "baseline");
        fresh
            .steps
            .push(step(1, "osd_max_backfills", "2", 1.0, 1.0, false));
        fresh.steps[0].decision = None;
        assert_eq!(fresh.undecided().map(|s| s.number), Some(1));
        assert_eq!(fresh.reference().0, "baseline");
    }
}
