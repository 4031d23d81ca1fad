//! Command-line flags, parsed into plain data before anything runs. The settings of `serve`
//! (flags that are also config-file keys) are declared in [`crate::settings`].

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use crate::settings::{Flags, HumanDuration};

#[derive(Debug, Parser)]
#[command(
    name = "ceph-recovery-budget",
    version,
    about = "Prometheus exporter for Ceph recovery and client write latency",
    long_about = "Publishes, for Prometheus, how fast a Ceph cluster recovers, client write latency as a real \
histogram with p50/p95/p99, PG safety signals (undersized PGs, pools at min_size) and the mClock \
profile in force, all derived from Ceph's own command output."
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Collect from the cluster in the background and serve /metrics for Prometheus.
    #[command(
        long_about = "Collect from the cluster every --collect.interval (with the `ceph` CLI or librados, see \
--ceph.backend) and serve the last snapshot on --web.telemetry-path (a scrape never runs a ceph command). Also serves a landing \
page on /, /-/healthy, and /-/ready (ready once the cluster status has been read).\n\n\
Examples:\n  ceph-recovery-budget serve\n  ceph-recovery-budget serve --ceph-cmd 'cephadm shell -- ceph'\n  \
ceph-recovery-budget serve --config.file /etc/ceph-recovery-budget.yml --web.listen-address :9939"
    )]
    Serve(Box<ServeArgs>),
    /// Validate a config file and print the resulting settings; exit 1 on errors.
    #[command(
        long_about = "Reads a YAML config file as `serve --config.file` would, checks every value (unknown \
keys, bad durations, a baseline fio report that cannot be read, windows shorter than two intervals) and \
prints the resulting settings. Exits 1 with file, line, column and what was expected on the first error.\n\n\
Examples:\n  ceph-recovery-budget check-config /etc/ceph-recovery-budget.yml"
    )]
    CheckConfig(CheckConfigArgs),
    /// What on-call types first: the enforcer's state, latency vs bound, recovery progress,
    /// redundancy, the profile in force and the last decisions, from a running `serve`.
    #[command(
        long_about = "Asks a running `serve` (GET /api/status) and prints a few plain lines: mode and \
state, client p99 against the bound and baseline, recovery progress (degraded/misplaced objects, \
objects/s, time to finish at this rate), undersized PGs and pools at min_size, the mClock profile in \
force, and the last decisions.\n\n\
An exporter served with --web.config.file: an https:// URL, --tls.ca-file for the CA that signed its \
certificate (default: the system's CAs), --tls.cert-file and --tls.key-file when it asks for a client \
certificate, --basic-auth.username with the password in --basic-auth.password-file or \
$CEPH_RECOVERY_BUDGET_BASIC_AUTH_PASSWORD (never a flag: a flag shows in ps).\n\nExamples:\n  ceph-recovery-budget status\n  watch ceph-recovery-budget status --url http://mon1:9939\n  \
ceph-recovery-budget status --format json | jq .enforcer.phase\n  \
ceph-recovery-budget status --url https://mon1:9939 --tls.ca-file /etc/ceph-recovery-budget/ca.crt \\\n      --basic-auth.username prometheus --basic-auth.password-file ~/.crb-password"
    )]
    Status(StatusArgs),
    /// Summarize a fio report (text of any version, or JSON): IOPS, bandwidth and clat p50/p95/p99
    /// per direction; or, with --windows, the write p99 per status interval.
    #[command(
        long_about = "Reads a fio report (the classic text of fio 2.x or 3.x, or --output-format=json/json+) \
and prints IOPS, bandwidth and completion-latency p50/p95/p99 per direction. A direction that did no I/O \
is left out; a percentile the report does not contain is left out (never guessed) and said on stderr.\n\n\
With --windows: the client's write p99 per window, as `experiment` computes it, from the cumulative \
reports fio prints with --status-interval=10 --output-format=json+ (one file, the reports one after \
another): a window's writes are the difference of two consecutive reports' histograms; the first window \
starts at fio's start, and one shorter than half of --interval is added to a neighbour. Text: a line \
with fio's start (Unix seconds), then one line per window: start-end in seconds from fio's start, \
writes, p99 (`no p99` when no write completed). JSON: an array of {start_seconds, end_seconds (from \
fio's start), writes, p99_seconds (null when no write completed), start_unix, end_unix (Unix seconds)}, \
with within_bound (true/false) when --bound-ms is given.\n\n\
Examples:\n  ceph-recovery-budget fio-summary fio-baseline.json\n  fio ... | ceph-recovery-budget fio-summary - --format json\n  \
gzip -dc fio.json.gz | ceph-recovery-budget fio-summary - --windows --bound-ms 85.5"
    )]
    FioSummary(FioSummaryArgs),
    /// Start a tuning record: recovery rate and client latency before any change.
    #[command(
        long_about = "Measures, over --window, the recovery rate (from degraded + misplaced objects in `ceph status`, and Ceph's own rate) and client write latency (fio: a report you give, or your fio command run during the window), and records them with the OSD config (`ceph config dump`), op queue, mClock profile, cluster fsid, date and --hardware as the first entry of a new tuning record (YAML). Without recovery the rate is recorded as \"no recovery\". Ctrl-C writes a record that says the measurement was interrupted.\n\nExamples:\n  ceph-recovery-budget baseline --record tuning.yaml --fio-cmd 'fio /etc/fio/runbook.fio --output-format=json' \\\n      --hardware '12x 16TB HDD per host, NVMe DB' --cluster-name prod-ceph-01\n  ceph-recovery-budget baseline --record tuning.yaml --fio-output fio-before.json --window 15m"
    )]
    Baseline(BaselineArgs),
    /// The tuning cycle: one setting per step, settle, re-measure, keep or revert; and its report.
    #[command(subcommand)]
    Tune(TuneCommand),
    /// Client latency under each mClock profile during a controlled recovery, and a suggested bound.
    #[command(
        long_about = "Measures client p50/p95/p99 (fio) with no recovery, then during a controlled recovery under balanced, high_recovery_ops and high_client_ops, with the recovery rate of each, and prints the table and the suggested bound (--multiplier x the no-recovery p99). Restores the profile it found (also on Ctrl-C). The recovery is started and stopped by your commands (--start-recovery, --stop-recovery) or by you when asked.\n\nExamples:\n  ceph-recovery-budget profile-sweep --fio-cmd 'fio runbook.fio --output-format=json' \\\n      --start-recovery 'ceph osd reweight 7 0.8' --stop-recovery 'ceph osd reweight 7 1'\n  ceph-recovery-budget profile-sweep --fio-cmd 'fio runbook.fio --output-format=json' --window 2m --settle 30s"
    )]
    ProfileSweep(ProfileSweepArgs),
    /// Does the enforcer hold the bound? The same controlled recovery under fio, once per
    /// mClock profile and once with the enforcer, in one table.
    #[command(
        long_about = "Runs, under your fio load, the same controlled recovery (one where no PG is undersized, so the bound applies) once per row and prints one table: p50/p95/p99 write latency, p99 against the no-recovery baseline, within --multiplier x or not, recovery time and rate.\n\n\
Rows (--rows, in the order given; no-recovery first): no-recovery (fio for --baseline-window: its p99 is the baseline), balanced, high_client_ops, high_recovery_ops (`ceph config set osd osd_mclock_profile P`), enforced (the profile you had, and this program's `serve --enforcer.mode enforce` with the baseline just measured, as a child on 127.0.0.1, with --serve-args), enforced-pause-only (not in the default rows: the same enforcer with --enforcer.backfill-lever off, so that the duty-cycled pause is the only lever above the throttle; the row that measures the backfill lever against the pause), enforced-levels (not in the default rows: the same enforcer with --enforcer.controller levels, to compare it with the ladder on the same recovery); backfills-N (1-16: osd_mclock_override_recovery_settings true and osd_max_backfills N over the profile you had, Reef and later) and limit-P (1-100: the custom profile with the background recovery and best-effort limits at P% of each OSD's capacity, Reef and later): one lever held for the whole recovery without the enforcer, its settings put back as found when the row ends (scripts/lever-table). Each recovery row starts fio, runs --start-recovery, waits until `ceph status` shows it and then until nothing is degraded or misplaced and no PG recovers or backfills (at most --max-recovery), stops fio with SIGINT (fio then prints its whole report: give it a long runtime), runs --stop-recovery and waits, not measured, until the cluster is clean again. Recovery time: from --start-recovery to finished; rate: the most objects seen degraded + misplaced at once / recovery time.\n\n\
Refuses to start (exit 2) while a recovery runs, while nobackfill or norecover is set, or when the OSDs do not run mclock_scheduler. Puts the cluster back whatever happens (also on Ctrl-C, SIGTERM, SIGHUP): the recovery stopped, osd_mclock_profile in the config database as found (`config rm` when it was not set), what the enforcer's state file says it did not restore, no nobackfill/norecover left set. Progress on stderr. Exit 0: every row measured; 1: a row incomplete (the rows measured so far are printed); 2: refused; 130: interrupted.\n\n\
Examples (the lab, scripts/ceph-lab; 15-25 minutes for all rows):\n  eval \"$(scripts/ceph-lab env)\"\n  ceph-recovery-budget experiment --fio-cmd 'scripts/ceph-lab fio-json 100000' \\\n      --start-recovery 'scripts/ceph-lab rebalance-start 3 0.2' \\\n      --stop-recovery 'scripts/ceph-lab rebalance-stop' --decisions-out decisions.json\n  ceph-recovery-budget experiment --rows no-recovery --baseline-window 10s \\\n      --fio-cmd 'scripts/ceph-lab fio-json 100000'"
    )]
    Experiment(ExperimentArgs),
    /// Flag costly or ineffective settings in `ceph config dump`; exit 1 when something is flagged.
    #[command(
        long_about = "Reads `ceph config dump` (from the cluster, or a saved `ceph config dump -f json` with --file) and flags known costly or ineffective settings with the reason and the fix: debug_ms not 0/0 on OSDs or clients, recovery sleeps or backfill limits that mClock ignores, and the like. Exit code 0: nothing flagged; 1: something flagged; 2: the dump could not be read.\n\nExamples:\n  ceph-recovery-budget lint\n  ceph config dump -f json > dump.json && ceph-recovery-budget lint --file dump.json --format json"
    )]
    Lint(LintArgs),
    /// Hold PGs waiting for backfill where their data is (upmap), so that at most N backfill at
    /// once; release them. Dry run unless --apply.
    #[command(subcommand)]
    Backfill(BackfillCommand),
}

/// `backfill hold|release|status`: the backfill lever by hand (pgremapper-style).
#[derive(Debug, Subcommand)]
pub enum BackfillCommand {
    /// Hold (or release) PGs so that at most --max-backfills PGs backfill at once.
    #[command(
        long_about = "Reads `ceph pg dump pgs_brief` and `ceph osd dump`, and maps PGs that backfill (waiting first) back to their acting set with `ceph osd pg-upmap-items` until at most --max-backfills PGs backfill (or, when fewer do, releases the oldest held ones). Only active+remapped PGs that wait for backfill (or backfill) are held, never a degraded or undersized one; nothing is held while any PG is undersized (then everything held is released), nor when require_min_compat_client is below luminous. A PG that carries upmap items that are not ours (the mgr balancer's, an operator's) is held over them: they are written to --record and put back on release (a PG whose items are what moves it has them taken off); a whole-set pg_upmap is never touched. Every entry is written to --record before it is added. The mgr balancer is paused while entries are held (its state kept in the record) and put back by `backfill release` once none is. Prints the plan; changes nothing without --apply.\n\nExamples:\n  ceph-recovery-budget backfill hold --max-backfills 2 --record /var/lib/ceph-recovery-budget/backfill.json\n  ceph-recovery-budget backfill hold --max-backfills 2 --record backfill.json --apply"
    )]
    Hold(BackfillHoldArgs),
    /// Remove the upmap entries the record says are ours (all, or the --max oldest); put the
    /// balancer back as it was once none is left.
    #[command(
        long_about = "Removes with `ceph osd rm-pg-upmap-items` exactly the entries --record holds that are still as added, or puts back with `ceph osd pg-upmap-items` the items a PG had before it was held (an entry changed by someone else is left and said; one already gone, or back as it was, is dropped), oldest first, at most --max; the record is updated after each. Once nothing is held, the mgr balancer gets back the mode and on/off state it had, and the record file is removed. The same undo serves after a crash: run it with the record left behind. Changes nothing without --apply.\n\nExamples:\n  ceph-recovery-budget backfill release --record backfill.json --max 2 --apply\n  ceph-recovery-budget backfill release --record backfill.json --apply"
    )]
    Release(BackfillReleaseArgs),
    /// PGs backfilling and waiting, what the record holds, the balancer, and whether the lever
    /// may act.
    Status(BackfillStatusArgs),
}

#[derive(Debug, Args)]
pub struct BackfillHoldArgs {
    /// At most this many PGs backfill (or wait to) at once
    #[arg(long = "max-backfills", value_name = "N")]
    pub max_backfills: usize,
    #[command(flatten)]
    pub common: BackfillCommon,
}

#[derive(Debug, Args)]
pub struct BackfillReleaseArgs {
    /// Release at most this many held PGs (oldest first); all by default
    #[arg(long, value_name = "N")]
    pub max: Option<usize>,
    #[command(flatten)]
    pub common: BackfillCommon,
}

#[derive(Debug, Args)]
pub struct BackfillStatusArgs {
    /// The record of held PGs
    #[arg(long, value_name = "FILE")]
    pub record: PathBuf,
    /// Plain lines, or JSON
    #[arg(long, default_value = "text")]
    pub format: StatusFormat,
    #[command(flatten)]
    pub ceph: CephArgs,
}

#[derive(Debug, Args)]
pub struct BackfillCommon {
    /// The record of held PGs (written before each entry is added)
    #[arg(long, value_name = "FILE")]
    pub record: PathBuf,
    /// Make the changes (without it: print what would be done)
    #[arg(long)]
    pub apply: bool,
    /// Plain lines, or JSON
    #[arg(long, default_value = "text")]
    pub format: StatusFormat,
    #[command(flatten)]
    pub ceph: CephArgs,
}

/// How to reach the cluster, for the commands that talk to it directly.
#[derive(Debug, Args, Clone)]
#[command(next_help_heading = "Ceph")]
pub struct CephArgs {
    /// The ceph CLI, split like shell words and run without a shell, e.g. "cephadm shell -- ceph"
    #[arg(long = "ceph-cmd", value_name = "COMMAND", default_value = "ceph")]
    pub ceph_cmd: String,
    /// ceph.conf to pass to every ceph call (--conf)
    #[arg(long = "ceph-conf", value_name = "FILE")]
    pub ceph_conf: Option<String>,
    /// Ceph user to connect as (--name)
    #[arg(long = "ceph-name", value_name = "NAME")]
    pub ceph_name: Option<String>,
    /// Keyring of that user (--keyring)
    #[arg(long = "ceph-keyring", value_name = "FILE")]
    pub ceph_keyring: Option<String>,
    /// Timeout of each ceph call
    #[arg(long = "ceph-timeout", value_name = "DURATION", default_value = "30s")]
    pub ceph_timeout: HumanDuration,
}

impl CephArgs {
    pub fn settings(&self) -> Result<crate::ceph::cli::CliSettings, String> {
        let command = shell_words::split(&self.ceph_cmd)
            .map_err(|e| format!("--ceph-cmd {:?}: {e}", self.ceph_cmd))?;
        if command.is_empty() {
            return Err("--ceph-cmd is empty".into());
        }
        Ok(crate::ceph::cli::CliSettings {
            command,
            conf: self.ceph_conf.clone(),
            name: self.ceph_name.clone(),
            keyring: self.ceph_keyring.clone(),
            timeout: self.ceph_timeout.0,
            max_reply_bytes: crate::ceph::DEFAULT_MAX_REPLY_BYTES,
        })
    }
}

/// Where client latency comes from: one of the two.
#[derive(Debug, Args, Clone, Default)]
#[group(multiple = false)]
pub struct FioArgs {
    /// A fio report (text or JSON) already taken
    #[arg(long = "fio-output", value_name = "FILE")]
    pub fio_output: Option<PathBuf>,
    /// Your fio command, run (without a shell) during the window; it must print a report on stdout,
    /// e.g. 'fio runbook.fio --output-format=json'
    #[arg(long = "fio-cmd", value_name = "COMMAND")]
    pub fio_cmd: Option<String>,
}

#[derive(Debug, Args)]
pub struct BaselineArgs {
    /// The tuning record to create (YAML); fio's raw outputs go to FILE.fio/
    #[arg(long, value_name = "FILE")]
    pub record: PathBuf,
    /// How long to measure
    #[arg(long, value_name = "DURATION", default_value = "15m")]
    pub window: HumanDuration,
    #[command(flatten)]
    pub fio: FioArgs,
    /// The hardware, in your words, kept in the record
    #[arg(long, value_name = "TEXT")]
    pub hardware: Option<String>,
    /// Your name for the cluster, kept in the record
    #[arg(long = "cluster-name", value_name = "NAME", default_value = "ceph")]
    pub cluster_name: String,
    /// Client p99 may rise to this many times the baseline p99: every step is judged by it
    /// [default: the enforcer's multiplier from --config.file, else 2]
    #[arg(long, value_name = "X")]
    pub multiplier: Option<f64>,
    /// The `serve` config file whose enforcer policy (multiplier) the steps are judged by
    #[arg(long = "config.file", value_name = "FILE")]
    pub config_file: Option<PathBuf>,
    #[command(flatten)]
    pub ceph: CephArgs,
}

#[derive(Debug, Subcommand)]
pub enum TuneCommand {
    /// Change exactly one OSD setting, settle, re-measure, judge the trade, keep or revert.
    #[command(
        long_about = "Records the value before (or \"not set\"), applies --set with `ceph config set osd`, waits --settle, re-measures both numbers as the baseline did, appends the pair to the record and judges it: favourable when client p99 stays within multiplier x the baseline p99 and recovery is faster than the last kept state. Then keeps or reverts (--keep, --revert, --auto, or it asks); revert restores the previous value exactly (`ceph config rm` when it was not set). Refuses to start while a step is undecided, and warns (refuses without --force) before a step that cannot show anything: a setting the scheduler ignores, no recovery running, a goal already reached. Ctrl-C puts the setting back.\n\nExamples:\n  ceph-recovery-budget tune step --record tuning.yaml --set osd_max_backfills=4 --auto\n  ceph-recovery-budget tune step --record tuning.yaml --set osd_recovery_max_active=8 --goal-rate 600obj/s"
    )]
    Step(TuneStepArgs),
    /// Keep or revert the step left undecided.
    Decide(TuneDecideArgs),
    /// The record in the operator's format, and optionally a chart (SVG).
    #[command(
        long_about = "Prints the record as an operator would write it (baseline, each step with both numbers, kept or reverted and why, the final settings); --chart draws recovery rate and p99 per step with the bound as a line.\n\nExamples:\n  ceph-recovery-budget tune report --record tuning.yaml --chart tuning.svg"
    )]
    Report(TuneReportArgs),
}

#[derive(Debug, Args)]
pub struct TuneStepArgs {
    #[arg(long, value_name = "FILE")]
    pub record: PathBuf,
    /// The one setting to change, NAME=VALUE (given to `ceph config set osd`)
    #[arg(long, value_name = "NAME=VALUE", action = clap::ArgAction::Append, required = true)]
    pub set: Vec<String>,
    /// Wait this long after the change before measuring
    #[arg(long, value_name = "DURATION", default_value = "15m")]
    pub settle: HumanDuration,
    /// How long to measure
    #[arg(long, value_name = "DURATION", default_value = "15m")]
    pub window: HumanDuration,
    /// Client latency for this step; default: the baseline's fio command again
    #[command(flatten)]
    pub fio: FioArgs,
    /// Keep the change whatever the verdict
    #[arg(long, group = "decision")]
    pub keep: bool,
    /// Revert the change whatever the verdict
    #[arg(long, group = "decision")]
    pub revert: bool,
    /// Keep a favourable change, revert anything else
    #[arg(long, group = "decision")]
    pub auto: bool,
    /// Measure even a step that is expected to show nothing
    #[arg(long)]
    pub force: bool,
    /// Stop when recovery reaches this rate, e.g. 600obj/s
    #[arg(long = "goal-rate", value_name = "RATE", group = "goal")]
    pub goal_rate: Option<String>,
    /// Stop when the data of one failed OSD (the fullest) would recover within this time, e.g. 4h
    #[arg(long = "goal-recovery-time", value_name = "DURATION", group = "goal")]
    pub goal_recovery_time: Option<HumanDuration>,
    /// Recovery must be this much faster than before to count, in percent
    #[arg(long = "min-gain", value_name = "PERCENT", default_value_t = 5.0)]
    pub min_gain: f64,
    #[command(flatten)]
    pub ceph: CephArgs,
}

#[derive(Debug, Args)]
pub struct TuneDecideArgs {
    #[arg(long, value_name = "FILE")]
    pub record: PathBuf,
    /// Keep the undecided step's setting
    #[arg(long, group = "decision", required = true)]
    pub keep: bool,
    /// Put the previous value back
    #[arg(long, group = "decision", required = true)]
    pub revert: bool,
    #[command(flatten)]
    pub ceph: CephArgs,
}

#[derive(Debug, Args)]
pub struct TuneReportArgs {
    #[arg(long, value_name = "FILE")]
    pub record: PathBuf,
    /// Also draw recovery rate and p99 per step, with the bound, as SVG
    #[arg(long, value_name = "FILE.svg")]
    pub chart: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct ProfileSweepArgs {
    /// Your fio command, run (without a shell) in each measurement, printing a report on stdout
    #[arg(long = "fio-cmd", value_name = "COMMAND")]
    pub fio_cmd: String,
    /// How long to measure each row
    #[arg(long, value_name = "DURATION", default_value = "5m")]
    pub window: HumanDuration,
    /// Wait this long after each profile change before measuring
    #[arg(long, value_name = "DURATION", default_value = "1m")]
    pub settle: HumanDuration,
    /// Command that starts the controlled recovery (run without a shell)
    #[arg(long = "start-recovery", value_name = "COMMAND")]
    pub start_recovery: Option<String>,
    /// Command that ends it afterwards (also on Ctrl-C)
    #[arg(long = "stop-recovery", value_name = "COMMAND")]
    pub stop_recovery: Option<String>,
    /// How long to wait for the recovery to show up in `ceph status`
    #[arg(long = "wait-recovery", value_name = "DURATION", default_value = "10m")]
    pub wait_recovery: HumanDuration,
    /// The suggested bound is this many times the no-recovery p99
    #[arg(long, value_name = "X", default_value_t = 2.0)]
    pub multiplier: f64,
    /// The table as text, or JSON
    #[arg(long, default_value = "text")]
    pub format: StatusFormat,
    #[command(flatten)]
    pub ceph: CephArgs,
}

#[derive(Debug, Args)]
pub struct ExperimentArgs {
    /// Your fio command (run without a shell) for each row, printing its report on stdout. Give
    /// it a long runtime: it is stopped with SIGINT when the row ends. The experiment appends
    /// --status-interval=10 --output-format=json+ (the p99 per 10-s window), so a wrapper must
    /// pass its extra arguments on to fio, e.g. 'scripts/ceph-lab fio-json 100000'
    #[arg(
        long = "fio-cmd",
        value_name = "COMMAND",
        required_unless_present = "from_result"
    )]
    pub fio_cmd: Option<String>,
    /// Run nothing: read a result that `experiment --format json` wrote and print its table
    /// (or JSON), draw --chart and write --decisions-out from it (a recorded run's chart
    /// redrawn by this version)
    #[arg(
        long = "from-result",
        value_name = "RESULT.json",
        conflicts_with_all = ["fio_cmd", "start_recovery", "stop_recovery"]
    )]
    pub from_result: Option<PathBuf>,
    /// Command that starts the controlled recovery (run without a shell), once per recovery row
    #[arg(long = "start-recovery", value_name = "COMMAND")]
    pub start_recovery: Option<String>,
    /// Command that undoes it after each recovery row (and on Ctrl-C or a failure)
    #[arg(long = "stop-recovery", value_name = "COMMAND")]
    pub stop_recovery: Option<String>,
    /// How long fio runs for the no-recovery row (the baseline)
    #[arg(
        long = "baseline-window",
        value_name = "DURATION",
        default_value = "60s"
    )]
    pub baseline_window: HumanDuration,
    /// The bound is this many times the no-recovery p99 (the enforced row's bound, and the
    /// table's "within" column)
    #[arg(long, value_name = "X", default_value_t = 2.0)]
    pub multiplier: f64,
    /// A recovery row fails (the experiment stops, incomplete) when its recovery has not
    /// finished after this long; also the limit for the cluster to be clean again after it
    #[arg(long = "max-recovery", value_name = "DURATION", default_value = "20m")]
    pub max_recovery: HumanDuration,
    /// The rows, in order, starting with no-recovery
    #[arg(
        long,
        value_name = "ROW,...",
        default_value = crate::tuning::experiment::DEFAULT_ROWS
    )]
    pub rows: String,
    /// More flags for the enforced row's `serve` (split like shell words), after the
    /// experiment's timings for 10-s windows, which a flag given here replaces: "--collect.interval
    /// 2s --enforcer.for 4s --enforcer.latency-window 10s --enforcer.settle 5s
    /// --enforcer.min-interval 1s --enforcer.max-changes-per-hour 1000 --enforcer.ladder-settle
    /// 10s --enforcer.pause-period 10s" (a given latency window drops the ladder settle, a given
    /// collection interval the pause period, so that serve's own defaults follow them; with
    /// --config.file none is added). The experiment sets --web.listen-address,
    /// --enforcer.mode/baseline/multiplier/state-file and the ceph flags
    #[arg(
        long = "serve-args",
        value_name = "FLAGS",
        allow_hyphen_values = true,
        default_value = ""
    )]
    pub serve_args: String,
    /// The table as text, or JSON
    #[arg(long, default_value = "text")]
    pub format: StatusFormat,
    /// Also write the enforced row's decision records (JSON, oldest first) to this file
    #[arg(long = "decisions-out", value_name = "FILE")]
    pub decisions_out: Option<PathBuf>,
    /// Also draw the client's write p99 per window over time (SVG): one line per row, the
    /// bound, and the enforcer's actions marked
    #[arg(long, value_name = "FILE.svg")]
    pub chart: Option<PathBuf>,
    #[command(flatten)]
    pub ceph: CephArgs,
}

#[derive(Debug, Args)]
pub struct LintArgs {
    /// A saved `ceph config dump -f json` instead of asking the cluster
    #[arg(long, value_name = "FILE")]
    pub file: Option<PathBuf>,
    /// The OSDs' osd_op_queue when it is not in the dump (with --file); read from the OSDs otherwise
    #[arg(long = "op-queue", value_name = "QUEUE")]
    pub op_queue: Option<String>,
    /// Findings as text, or JSON
    #[arg(long, default_value = "text")]
    pub format: StatusFormat,
    #[command(flatten)]
    pub ceph: CephArgs,
}

#[derive(Debug, Args)]
pub struct FioSummaryArgs {
    /// The fio report; `-` reads standard input
    #[arg(value_name = "FILE")]
    pub file: PathBuf,
    /// Plain lines, or JSON: {"read"|"write"|"trim": {"iops", "bandwidth_bytes_per_second", "latency_seconds": {"p50","p95","p99"}}}
    #[arg(long, default_value = "text")]
    pub format: StatusFormat,
    /// The write p99 per window instead, from fio's periodic json+ reports (see above)
    #[arg(long)]
    pub windows: bool,
    /// fio's --status-interval (with --windows): a window shorter than half of it is added to
    /// a neighbour
    #[arg(
        long,
        value_name = "DURATION",
        default_value = "10s",
        requires = "windows"
    )]
    pub interval: HumanDuration,
    /// Also the share of windows whose p99 is at most this bound, in ms (with --windows); a
    /// window with no write is not within
    #[arg(
        long = "bound-ms",
        value_name = "MS",
        requires = "windows",
        allow_negative_numbers = true,
        value_parser = positive_ms
    )]
    pub bound_ms: Option<f64>,
}

fn positive_ms(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(ms) if ms.is_finite() && ms > 0.0 => Ok(ms),
        _ => Err(format!(
            "`{s}` is not a latency in milliseconds: give a positive number, e.g. 85.5"
        )),
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum StatusFormat {
    Text,
    Json,
}

#[derive(Debug, Args)]
pub struct StatusArgs {
    /// Where `serve` listens (https:// when it serves TLS, `--web.config.file`)
    #[arg(long, default_value = "http://127.0.0.1:9939")]
    pub url: String,
    /// Plain lines or the JSON report
    #[arg(long, default_value = "text")]
    pub format: StatusFormat,
    #[command(flatten)]
    pub access: AccessArgs,
}

/// The environment variable holding the basic-auth password (never a flag: a flag's value
/// shows in `ps`).
pub const BASIC_AUTH_PASSWORD_ENV: &str = "CEPH_RECOVERY_BUDGET_BASIC_AUTH_PASSWORD";

/// How to get into an exporter served with `--web.config.file`: what curl's `--cacert`,
/// `--cert`/`--key`, `-k` and `-u` and Prometheus' `tls_config`/`basic_auth` say.
#[derive(Debug, Args, Default, Clone)]
pub struct AccessArgs {
    /// PEM file of the CA(s) that signed the exporter's certificate (https URLs). Default: the
    /// system's CAs ($SSL_CERT_FILE, else /etc/ssl/certs/ca-certificates.crt or the like)
    #[arg(long = "tls.ca-file", value_name = "FILE")]
    pub tls_ca_file: Option<PathBuf>,
    /// PEM client certificate, for an exporter whose client_auth_type asks for one (with
    /// --tls.key-file)
    #[arg(long = "tls.cert-file", value_name = "FILE", requires = "tls_key_file")]
    pub tls_cert_file: Option<PathBuf>,
    /// PEM private key of --tls.cert-file
    #[arg(long = "tls.key-file", value_name = "FILE", requires = "tls_cert_file")]
    pub tls_key_file: Option<PathBuf>,
    /// The name to check the exporter's certificate against, when the URL's host is not one
    /// it holds
    #[arg(long = "tls.server-name", value_name = "NAME")]
    pub tls_server_name: Option<String>,
    /// Accept any certificate the exporter shows (still encrypted, but anyone could answer):
    /// for a test, never for a habit
    #[arg(long = "tls.insecure-skip-verify")]
    pub tls_insecure_skip_verify: bool,
    /// Basic-auth user name (one of the web config file's basic_auth_users); the password from
    /// --basic-auth.password-file or $CEPH_RECOVERY_BUDGET_BASIC_AUTH_PASSWORD
    #[arg(long = "basic-auth.username", value_name = "USER")]
    pub basic_auth_username: Option<String>,
    /// File holding the basic-auth password (one line; a final newline is not part of it)
    #[arg(
        long = "basic-auth.password-file",
        value_name = "FILE",
        requires = "basic_auth_username"
    )]
    pub basic_auth_password_file: Option<PathBuf>,
}

impl AccessArgs {
    /// What the flags say, the password read from its file, else from `env_password` (the
    /// value of [`BASIC_AUTH_PASSWORD_ENV`]): a flag wins over the environment.
    pub fn access(
        &self,
        env_password: Option<String>,
    ) -> Result<crate::http_client::Access, String> {
        let basic_auth = match &self.basic_auth_username {
            None => None,
            Some(user) if user.is_empty() || user.contains(':') => {
                return Err(format!(
                    "--basic-auth.username {user:?}: a user name is not empty and has no ':' (basic auth sends user:password)"
                ))
            }
            Some(user) => {
                let password = match (&self.basic_auth_password_file, env_password) {
                    (Some(file), _) => {
                        let text = std::fs::read_to_string(file).map_err(|e| {
                            format!("--basic-auth.password-file {}: {e}", file.display())
                        })?;
                        let line = text
                            .strip_suffix('\n')
                            .map(|t| t.strip_suffix('\r').unwrap_or(t))
                            .unwrap_or(&text);
                        if line.is_empty() {
                            return Err(format!(
                                "--basic-auth.password-file {} is empty",
                                file.display()
                            ));
                        }
                        line.to_string()
                    }
                    (None, Some(p)) if !p.is_empty() => p,
                    (None, _) => {
                        return Err(format!(
                            "--basic-auth.username {user} needs its password: --basic-auth.password-file FILE or ${BASIC_AUTH_PASSWORD_ENV} (never a flag: a flag shows in ps)"
                        ))
                    }
                };
                Some(crate::http_client::BasicAuth {
                    username: user.clone(),
                    password,
                })
            }
        };
        Ok(crate::http_client::Access {
            ca_file: self.tls_ca_file.clone(),
            cert_file: self.tls_cert_file.clone(),
            key_file: self.tls_key_file.clone(),
            server_name: self.tls_server_name.clone(),
            insecure_skip_verify: self.tls_insecure_skip_verify,
            basic_auth,
        })
    }
}

#[derive(Debug, Args)]
pub struct CheckConfigArgs {
    /// The YAML config file to check.
    #[arg(value_name = "FILE")]
    pub file: PathBuf,
    /// A web config file (TLS, basic auth) to check with it, instead of the one the config
    /// file names (web.config_file); its certificate, key and CA files are read too.
    #[arg(long = "web.config.file", value_name = "FILE")]
    pub web_config_file: Option<PathBuf>,
}

#[derive(Debug, Args, Default)]
pub struct ServeArgs {
    /// YAML file holding any of the options below; flags given on the command line win over it.
    #[arg(
        long = "config.file",
        value_name = "FILE",
        env = "CEPH_RECOVERY_BUDGET_CONFIG"
    )]
    pub config_file: Option<PathBuf>,

    /// Every setting, declared once in `crate::settings`.
    #[command(flatten)]
    pub settings: Flags,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::enforcer::policy::RecoveryLimit;
    use crate::settings::LogFormat;
    use clap::CommandFactory;

    #[test]
    fn clap_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    fn status_args(args: &[&str]) -> Result<StatusArgs, clap::Error> {
        let mut argv = vec!["ceph-recovery-budget", "status"];
        argv.extend_from_slice(args);
        match Cli::try_parse_from(argv)?.command {
            Command::Status(a) => Ok(a),
            _ => unreachable!(),
        }
    }

    #[test]
    fn status_takes_tls_and_basic_auth_and_never_a_password_flag() {
        let a = status_args(&[
            "--url",
            "https://mon1:9939",
            "--tls.ca-file",
            "ca.crt",
            "--tls.cert-file",
            "c.crt",
            "--tls.key-file",
            "c.key",
            "--basic-auth.username",
            "prometheus",
        ])
        .unwrap();
        let access = a.access.access(Some("from-env".into())).unwrap();
        assert_eq!(access.ca_file, Some(PathBuf::from("ca.crt")));
        assert_eq!(access.cert_file, Some(PathBuf::from("c.crt")));
        assert_eq!(access.key_file, Some(PathBuf::from("c.key")));
        assert!(!access.insecure_skip_verify);
        let auth = access.basic_auth.unwrap();
        assert_eq!(
            (auth.username.as_str(), auth.password.as_str()),
            ("prometheus", "from-env")
        );
        // No flag carries a password; a certificate needs its key; a password file its user.
        assert!(status_args(&["--basic-auth.password", "x"]).is_err());
        assert!(status_args(&["--tls.cert-file", "c.crt"]).is_err());
        assert!(status_args(&["--tls.key-file", "c.key"]).is_err());
        assert!(status_args(&["--basic-auth.password-file", "p"]).is_err());
        // A user without a password says where the password goes.
        let a = status_args(&["--basic-auth.username", "prometheus"]).unwrap();
        let e = a.access.access(None).unwrap_err();
        assert!(
            e.contains(
                "--basic-auth.password-file FILE or $CEPH_RECOVERY_BUDGET_BASIC_AUTH_PASSWORD"
            ),
            "{e}"
        );
        assert!(a.access.access(Some(String::new())).is_err());
        // No user: the environment's password is not used.
        let a = status_args(&["--tls.insecure-skip-verify"]).unwrap();
        let access = a.access.access(Some("pw".into())).unwrap();
        assert!(access.basic_auth.is_none() && access.insecure_skip_verify);
    }

    #[test]
    fn a_password_file_is_its_first_line_and_wins_over_the_environment() {
        let dir = std::env::temp_dir().join(format!("crb-cli-pw-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let read = |content: &str| {
            let f = dir.join("pw");
            std::fs::write(&f, content).unwrap();
            let a = status_args(&[
                "--basic-auth.username",
                "u",
                "--basic-auth.password-file",
                f.to_str().unwrap(),
            ])
            .unwrap();
            a.access
                .access(Some("env".into()))
                .map(|x| x.basic_auth.unwrap().password)
        };
        assert_eq!(read("s3cret\n"), Ok("s3cret".into()));
        assert_eq!(read("s3cret\r\n"), Ok("s3cret".into()));
        assert_eq!(read(" with space "), Ok(" with space ".into()));
        assert!(read("\n").unwrap_err().ends_with("is empty"));
        let missing = status_args(&[
            "--basic-auth.username",
            "u",
            "--basic-auth.password-file",
            "/nonexistent/pw",
        ])
        .unwrap();
        let e = missing.access.access(None).unwrap_err();
        assert!(
            e.starts_with("--basic-auth.password-file /nonexistent/pw: "),
            "{e}"
        );
        let colon = status_args(&["--basic-auth.username", "a:b"]).unwrap();
        assert!(colon.access.access(Some("x".into())).is_err());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn dotted_flags_parse() {
        let cli = Cli::try_parse_from([
            "ceph-recovery-budget",
            "serve",
            "--collect.interval",
            "5s",
            "--ceph-cmd",
            "cephadm shell -- ceph",
            "--web.listen-address",
            ":9100",
            "--log.format",
            "json",
        ])
        .unwrap();
        let Command::Serve(args) = cli.command else {
            panic!("serve")
        };
        let o = args.settings;
        assert_eq!(o.collect_interval.unwrap().0.as_secs(), 5);
        assert_eq!(o.ceph_cmd.as_deref(), Some("cephadm shell -- ceph"));
        assert_eq!(o.listen_address.unwrap().0.port(), 9100);
        assert_eq!(o.log_format, Some(LogFormat::Json));
    }

    #[test]
    fn the_ladder_flags_parse_into_lists() {
        let cli = Cli::try_parse_from([
            "ceph-recovery-budget",
            "serve",
            "--enforcer.recovery-limits",
            "300,100",
            "--enforcer.recovery-sleeps",
            "0.5",
            "--enforcer.max-rung",
            "2",
            "--enforcer.pause-period",
            "10s",
        ])
        .unwrap();
        let Command::Serve(args) = cli.command else {
            panic!("serve")
        };
        let o = args.settings;
        assert_eq!(
            o.recovery_limits,
            Some(crate::settings::RecoveryLimits(vec![
                RecoveryLimit::Iops(300),
                RecoveryLimit::Iops(100)
            ]))
        );
        assert_eq!(o.recovery_sleeps, Some(vec![0.5]));
        assert_eq!(o.max_rung, Some(2));
        assert_eq!(o.pause_period.map(|d| d.0.as_secs()), Some(10));
        let err = Cli::try_parse_from([
            "ceph-recovery-budget",
            "serve",
            "--enforcer.recovery-limits",
            "300,lots",
        ])
        .unwrap_err()
        .to_string();
        assert!(err.contains("lots"), "{err}");
        let shares = Cli::try_parse_from([
            "ceph-recovery-budget",
            "serve",
            "--enforcer.recovery-limits",
            "5%,3%",
        ])
        .unwrap();
        let Command::Serve(args) = shares.command else {
            panic!("serve")
        };
        assert_eq!(
            args.settings.recovery_limits,
            Some(crate::settings::RecoveryLimits(vec![
                RecoveryLimit::Percent(5),
                RecoveryLimit::Percent(3)
            ]))
        );
    }

    #[test]
    fn the_ceph_backend_flag_parses() {
        use crate::ceph::any::BackendChoice;
        let cli = Cli::try_parse_from([
            "ceph-recovery-budget",
            "serve",
            "--ceph.backend",
            "librados",
        ])
        .unwrap();
        let Command::Serve(args) = cli.command else {
            panic!("serve")
        };
        assert_eq!(args.settings.ceph_backend, Some(BackendChoice::Librados));
        let err = Cli::try_parse_from(["ceph-recovery-budget", "serve", "--ceph.backend", "rados"])
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("cli") && err.contains("librados") && err.contains("auto"),
            "{err}"
        );
    }

    /// `serve`'s flags are the settings (each also a file key) and the known flag-only ones.
    #[test]
    fn every_serve_flag_is_a_setting_or_a_known_exception() {
        use std::collections::BTreeSet;
        let command = Cli::command();
        let serve = command
            .find_subcommand("serve")
            .expect("a serve subcommand");
        let flags: BTreeSet<&str> = serve
            .get_arguments()
            .filter_map(|a| a.get_long())
            .filter(|l| *l != "help")
            .collect();
        let mut expected: BTreeSet<&str> =
            crate::settings::table().iter().map(|s| s.flag).collect();
        expected.extend(crate::settings::FLAG_ONLY);
        assert_eq!(flags, expected);
    }

    #[test]
    fn bad_flag_values_say_what_is_expected() {
        let err = Cli::try_parse_from([
            "ceph-recovery-budget",
            "serve",
            "--collect.interval",
            "soon",
        ])
        .unwrap_err();
        assert!(err.to_string().contains("like 15s"), "{err}");
    }
}
