//! Command-line flags, parsed into plain data (`config::Overrides`) before anything runs.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use crate::config::{
    EnforcerOverrides, HumanDuration, ListenAddress, LogFormat, LogLevel, Overrides,
};
use crate::enforcer::policy::{BaselineSpec, Mode, SuspendWhen};

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
force, and the last decisions.\n\nExamples:\n  ceph-recovery-budget status\n  watch ceph-recovery-budget status --url http://mon1:9939\n  \
ceph-recovery-budget status --format json | jq .enforcer.phase"
    )]
    Status(StatusArgs),
    /// Summarize a fio report (text of any version, or JSON): IOPS, bandwidth and clat p50/p95/p99
    /// per direction.
    #[command(
        long_about = "Reads a fio report (the classic text of fio 2.x or 3.x, or --output-format=json/json+) \
and prints IOPS, bandwidth and completion-latency p50/p95/p99 per direction. A direction that did no I/O \
is left out; a percentile the report does not contain is left out (never guessed) and said on stderr.\n\n\
Examples:\n  ceph-recovery-budget fio-summary fio-baseline.json\n  fio ... | ceph-recovery-budget fio-summary - --format json"
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
Rows (--rows, in the order given; no-recovery first): no-recovery (fio for --baseline-window: its p99 is the baseline), balanced, high_client_ops, high_recovery_ops (`ceph config set osd osd_mclock_profile P`), enforced (the profile you had, and this program's `serve --enforcer.mode enforce` with the baseline just measured, as a child on 127.0.0.1, with --serve-args). Each recovery row starts fio, runs --start-recovery, waits until `ceph status` shows it and then until nothing is degraded or misplaced and no PG recovers or backfills (at most --max-recovery), stops fio with SIGINT (fio then prints its whole report: give it a long runtime), runs --stop-recovery and waits, not measured, until the cluster is clean again. Recovery time: from --start-recovery to finished; rate: the most objects seen degraded + misplaced at once / recovery time.\n\n\
Refuses to start (exit 2) while a recovery runs, while nobackfill or norecover is set, or when the OSDs do not run mclock_scheduler. Puts the cluster back whatever happens (also on Ctrl-C, SIGTERM, SIGHUP): the recovery stopped, osd_mclock_profile in the config database as found (`config rm` when it was not set), what the enforcer's state file says it did not restore, no nobackfill/norecover left set. Progress on stderr. Exit 0: every row measured; 1: a row incomplete (the rows measured so far are printed); 2: refused; 130: interrupted.\n\n\
Examples (the lab, scripts/ceph-lab; 15-25 minutes for all rows):\n  eval \"$(scripts/ceph-lab env)\"\n  ceph-recovery-budget experiment --fio-cmd 'scripts/ceph-lab fio-json 100000' \\\n      --start-recovery 'scripts/ceph-lab rebalance-start 3 0.2' \\\n      --stop-recovery 'scripts/ceph-lab rebalance-stop' --decisions-out decisions.json\n  ceph-recovery-budget experiment --rows no-recovery --baseline-window 10s \\\n      --fio-cmd 'scripts/ceph-lab fio-json 100000'"
    )]
    Experiment(ExperimentArgs),
    /// Flag costly or ineffective settings in `ceph config dump`; exit 1 when something is flagged.
    #[command(
        long_about = "Reads `ceph config dump` (from the cluster, or a saved `ceph config dump -f json` with --file) and flags known costly or ineffective settings with the reason and the fix: debug_ms not 0/0 on OSDs or clients, recovery sleeps or backfill limits that mClock ignores, and the like. Exit code 0: nothing flagged; 1: something flagged; 2: the dump could not be read.\n\nExamples:\n  ceph-recovery-budget lint\n  ceph config dump -f json > dump.json && ceph-recovery-budget lint --file dump.json --format json"
    )]
    Lint(LintArgs),
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
    /// Your fio command (run without a shell) for each row, printing a report (JSON or text) on
    /// stdout. Give it a long runtime: it is stopped with SIGINT when the row ends, e.g.
    /// 'scripts/ceph-lab fio-json 100000'
    #[arg(long = "fio-cmd", value_name = "COMMAND")]
    pub fio_cmd: String,
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
    /// More flags for the enforced row's `serve` (split like shell words); the experiment sets
    /// --web.listen-address, --enforcer.mode/baseline/multiplier/state-file and the ceph flags
    #[arg(
        long = "serve-args",
        value_name = "FLAGS",
        allow_hyphen_values = true,
        default_value = crate::tuning::experiment::DEFAULT_SERVE_ARGS
    )]
    pub serve_args: String,
    /// The table as text, or JSON
    #[arg(long, default_value = "text")]
    pub format: StatusFormat,
    /// Also write the enforced row's decision records (JSON, oldest first) to this file
    #[arg(long = "decisions-out", value_name = "FILE")]
    pub decisions_out: Option<PathBuf>,
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
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum StatusFormat {
    Text,
    Json,
}

#[derive(Debug, Args)]
pub struct StatusArgs {
    /// Where `serve` listens
    #[arg(long, default_value = "http://127.0.0.1:9939")]
    pub url: String,
    /// Plain lines or the JSON report
    #[arg(long, default_value = "text")]
    pub format: StatusFormat,
}

fn parse_levers(s: &str) -> Result<std::collections::BTreeMap<String, String>, String> {
    s.split(',')
        .filter(|p| !p.trim().is_empty())
        .map(|pair| {
            let (k, v) = pair
                .split_once('=')
                .ok_or_else(|| format!("{pair:?} is not KEY=VALUE (e.g. osd_max_backfills=1,osd_recovery_sleep_hdd=0.1)"))?;
            let (k, v) = (k.trim(), v.trim());
            if !k.starts_with("osd_") || v.is_empty() {
                return Err(format!("{pair:?}: expected an osd_* option and a value"));
            }
            Ok((k.to_string(), v.to_string()))
        })
        .collect()
}

#[derive(Debug, Args)]
pub struct CheckConfigArgs {
    /// The YAML config file to check.
    #[arg(value_name = "FILE")]
    pub file: PathBuf,
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

    /// Address to listen on for HTTP [default: 0.0.0.0:9939]
    #[arg(long = "web.listen-address", value_name = "HOST:PORT")]
    pub listen_address: Option<ListenAddress>,

    /// Path under which to expose metrics [default: /metrics]
    #[arg(long = "web.telemetry-path", value_name = "PATH")]
    pub telemetry_path: Option<String>,

    /// The ceph CLI, split like shell words and run without a shell, e.g. "cephadm shell -- ceph" or
    /// "kubectl -n rook-ceph exec deploy/rook-ceph-tools -- ceph" [default: ceph]
    #[arg(long = "ceph-cmd", value_name = "COMMAND")]
    pub ceph_cmd: Option<String>,

    /// ceph.conf to pass to every ceph call (--conf)
    #[arg(long = "ceph-conf", value_name = "FILE")]
    pub ceph_conf: Option<String>,

    /// Ceph user to connect as (--name), e.g. client.recovery-budget
    #[arg(long = "ceph-name", value_name = "NAME")]
    pub ceph_name: Option<String>,

    /// Keyring of that user (--keyring)
    #[arg(long = "ceph-keyring", value_name = "FILE")]
    pub ceph_keyring: Option<String>,

    /// Timeout of each ceph call; the process (and its children) is killed after it [default: 10s]
    #[arg(long = "ceph-timeout", value_name = "DURATION")]
    pub ceph_timeout: Option<HumanDuration>,

    /// How to talk to Ceph: cli (the ceph CLI, one process per command), librados (one
    /// connection held; needs a build with the librados feature), or auto (librados when built
    /// with it, --ceph-cmd is plain `ceph` and it connects at start; cli otherwise) [default: auto]
    #[arg(long = "ceph.backend", value_name = "BACKEND")]
    pub ceph_backend: Option<crate::ceph::any::BackendChoice>,

    /// How often to collect from the cluster [default: 15s]
    #[arg(long = "collect.interval", value_name = "DURATION")]
    pub collect_interval: Option<HumanDuration>,

    /// Window of the exporter's own recovery rate (method="delta") [default: 5m]
    #[arg(long = "recovery.window", value_name = "DURATION")]
    pub recovery_window: Option<HumanDuration>,

    /// Window of the client write latency quantiles [default: 5m]
    #[arg(long = "latency.window", value_name = "DURATION")]
    pub latency_window: Option<HumanDuration>,

    /// cluster: cluster state and (through the monitors) every OSD's histogram, enforcer here;
    /// host: only this host's OSD histograms, from their admin sockets (one exporter per OSD host)
    /// [default: cluster]
    #[arg(long = "mode", value_name = "MODE")]
    pub mode: Option<crate::config::ServeMode>,

    /// Publish the write-latency histogram per osd (33 series each), per host (33 per host) or
    /// for the whole cluster (33) [default: osd]
    #[arg(long = "latency.aggregate", value_name = "osd|host|cluster")]
    pub latency_aggregate: Option<crate::latency::aggregate::Grouping>,

    /// Where the enforcer's p99 comes from: collect (the histograms this exporter reads) or
    /// prometheus (a query over what host-mode exporters publish; this exporter then reads none)
    /// [default: collect]
    #[arg(long = "latency.source", value_name = "SOURCE")]
    pub latency_source: Option<crate::config::LatencySource>,

    /// Prometheus to ask with --latency.source prometheus, e.g. http://prometheus:9090 (a path
    /// prefix is kept: http://mon1/prometheus behind a proxy or --web.route-prefix)
    #[arg(long = "prometheus.url", value_name = "URL")]
    pub prometheus_url: Option<String>,

    /// The p99 query [default: histogram_quantile(0.99, sum by (le) (rate(ceph_osd_op_w_latency_bucket[<enforcer latency window>])))]
    #[arg(long = "prometheus.query", value_name = "PROMQL")]
    pub prometheus_query: Option<String>,

    /// Host mode: the directory of the local OSDs' admin sockets [default: /var/run/ceph]
    #[arg(long = "host.asok-dir", value_name = "DIR")]
    pub host_asok_dir: Option<PathBuf>,

    /// Host mode: the host label with --latency.aggregate host [default: this machine's hostname]
    #[arg(long = "host.name", value_name = "NAME")]
    pub host_name: Option<String>,

    /// Log filter: error, warn, info, debug, trace (or a tracing directive) [default: info]
    #[arg(long = "log.level", value_name = "LEVEL")]
    pub log_level: Option<LogLevel>,

    /// Log format [default: text]
    #[arg(long = "log.format", value_name = "FORMAT")]
    pub log_format: Option<LogFormat>,

    #[command(flatten)]
    pub enforcer: EnforcerArgs,
}

/// The enforcer's policy; each flag is named after its key in the config file's `enforcer:` section.
#[derive(Debug, Args, Default)]
#[command(next_help_heading = "Enforcer")]
pub struct EnforcerArgs {
    /// off: no enforcer; observe: decide and log "would ..." without changing anything; enforce: act [default: observe]
    #[arg(id = "enforcer.mode", long = "enforcer.mode", value_name = "MODE")]
    pub mode: Option<Mode>,
    /// Client p99 write latency without recovery: a duration (16ms), `learned`, or `fio:FILE` (a fio report) [default: learned]
    #[arg(
        id = "enforcer.baseline",
        long = "enforcer.baseline",
        value_name = "BASELINE"
    )]
    pub baseline: Option<BaselineSpec>,
    /// With `learned`: how long of writes without recovery make a baseline [default: 1h]
    #[arg(
        id = "enforcer.learn-window",
        long = "enforcer.learn-window",
        value_name = "DURATION"
    )]
    pub learn_window: Option<HumanDuration>,
    /// Bound = multiplier x baseline [default: 2.0]
    #[arg(
        id = "enforcer.multiplier",
        long = "enforcer.multiplier",
        value_name = "X"
    )]
    pub multiplier: Option<f64>,
    /// How long p99 must stay above the bound during recovery before acting [default: 15m]
    #[arg(id = "enforcer.for", long = "enforcer.for", value_name = "DURATION")]
    pub breach_for: Option<HumanDuration>,
    /// Window of the p99 the enforcer judges [default: 5m]
    #[arg(
        id = "enforcer.latency-window",
        long = "enforcer.latency-window",
        value_name = "DURATION"
    )]
    pub latency_window: Option<HumanDuration>,
    /// When the bound is lifted: any_undersized or pool_at_min_size [default: any_undersized]
    #[arg(
        id = "enforcer.suspend-when",
        long = "enforcer.suspend-when",
        value_name = "WHEN"
    )]
    pub suspend_when: Option<SuspendWhen>,
    /// mClock profile that slows recovery [default: high_client_ops]
    #[arg(
        id = "enforcer.throttle-profile",
        long = "enforcer.throttle-profile",
        value_name = "PROFILE"
    )]
    pub throttle_profile: Option<String>,
    /// mClock profile while redundancy is at risk [default: high_recovery_ops]
    #[arg(
        id = "enforcer.suspend-profile",
        long = "enforcer.suspend-profile",
        value_name = "PROFILE"
    )]
    pub suspend_profile: Option<String>,
    /// How long recovery must stay finished before restoring the original settings [default: 5m]
    #[arg(
        id = "enforcer.settle",
        long = "enforcer.settle",
        value_name = "DURATION"
    )]
    pub settle: Option<HumanDuration>,
    /// Minimum time between two changes [default: 5m]
    #[arg(
        id = "enforcer.min-interval",
        long = "enforcer.min-interval",
        value_name = "DURATION"
    )]
    pub min_interval: Option<HumanDuration>,
    /// Maximum changes per hour [default: 6]
    #[arg(
        id = "enforcer.max-changes-per-hour",
        long = "enforcer.max-changes-per-hour",
        value_name = "N"
    )]
    pub max_changes_per_hour: Option<u32>,
    /// Settings used instead of a profile when the OSDs do not run mClock, as KEY=VALUE,...
    /// [default: osd_max_backfills=1,osd_recovery_sleep_hdd=0.1]
    #[arg(id = "enforcer.wpq-levers", long = "enforcer.wpq-levers", value_name = "KEY=VALUE,...", value_parser = parse_levers)]
    pub wpq_levers: Option<std::collections::BTreeMap<String, String>>,
    /// How long OSDs get to take a profile before one that did not is reported [default: 30s]
    #[arg(
        id = "enforcer.verify-after",
        long = "enforcer.verify-after",
        value_name = "DURATION"
    )]
    pub verify_after: Option<HumanDuration>,
    /// Highest rung of the escalation ladder: 1 throttle profile only, 2 + recovery limit,
    /// 3 + duty-cycled nobackfill/norecover pause [default: 3]
    #[arg(id = "enforcer.max-rung", long = "enforcer.max-rung", value_name = "N")]
    pub max_rung: Option<u8>,
    /// How long a rung is held before its effect on p99 is judged (at least the latency window)
    /// [default: 5m]
    #[arg(
        id = "enforcer.ladder-settle",
        long = "enforcer.ladder-settle",
        value_name = "DURATION"
    )]
    pub ladder_settle: Option<HumanDuration>,
    /// Rung 2 under mClock: custom profile with the background-recovery limit (IOPS per OSD)
    /// at each of these in turn [default: 1000,300,100]
    #[arg(
        id = "enforcer.recovery-limits",
        long = "enforcer.recovery-limits",
        value_name = "IOPS,...",
        value_delimiter = ','
    )]
    pub recovery_limits: Option<Vec<u32>>,
    /// Rung 2 on wpq: osd_recovery_sleep (seconds) at each of these in turn, with
    /// osd_recovery_max_active 1 [default: 0.2,0.5,1]
    #[arg(
        id = "enforcer.recovery-sleeps",
        long = "enforcer.recovery-sleeps",
        value_name = "SECONDS,...",
        value_delimiter = ','
    )]
    pub recovery_sleeps: Option<Vec<f64>>,
    /// A rung comes off when p99 stays below this fraction of the bound for the ladder's
    /// settle time [default: 0.7]
    #[arg(
        id = "enforcer.descend-below",
        long = "enforcer.descend-below",
        value_name = "FRACTION"
    )]
    pub descend_below: Option<f64>,
    /// Rung 3: one pause on/off cycle [default: 30s]
    #[arg(
        id = "enforcer.pause-period",
        long = "enforcer.pause-period",
        value_name = "DURATION"
    )]
    pub pause_period: Option<HumanDuration>,
    /// Rung 3: never pause more than this share of each period, so recovery progresses
    /// [default: 0.8]
    #[arg(
        id = "enforcer.pause-max-share",
        long = "enforcer.pause-max-share",
        value_name = "FRACTION"
    )]
    pub pause_max_share: Option<f64>,
    /// Rung 3: at most this much pause in one recovery [default: 30m]
    #[arg(
        id = "enforcer.pause-max-total",
        long = "enforcer.pause-max-total",
        value_name = "DURATION"
    )]
    pub pause_max_total: Option<HumanDuration>,
    /// Where the enforcer keeps the operator's original settings (written atomically)
    /// [default: /var/lib/ceph-recovery-budget/enforcer-state.json]
    #[arg(
        id = "enforcer.state-file",
        long = "enforcer.state-file",
        value_name = "FILE"
    )]
    pub state_file: Option<PathBuf>,
}

impl ServeArgs {
    pub fn overrides(&self) -> Overrides {
        Overrides {
            listen_address: self.listen_address.clone(),
            telemetry_path: self.telemetry_path.clone(),
            ceph_cmd: self.ceph_cmd.clone(),
            ceph_conf: self.ceph_conf.clone(),
            ceph_name: self.ceph_name.clone(),
            ceph_keyring: self.ceph_keyring.clone(),
            ceph_timeout: self.ceph_timeout,
            ceph_backend: self.ceph_backend,
            collect_interval: self.collect_interval,
            recovery_window: self.recovery_window,
            latency_window: self.latency_window,
            log_level: self.log_level.clone(),
            log_format: self.log_format,
            mode: self.mode,
            latency_aggregate: self.latency_aggregate,
            latency_source: self.latency_source,
            prometheus_url: self.prometheus_url.clone(),
            prometheus_query: self.prometheus_query.clone(),
            host_asok_dir: self.host_asok_dir.clone(),
            host_name: self.host_name.clone(),
            enforcer: EnforcerOverrides {
                mode: self.enforcer.mode,
                baseline: self.enforcer.baseline.clone(),
                learn_window: self.enforcer.learn_window,
                multiplier: self.enforcer.multiplier,
                breach_for: self.enforcer.breach_for,
                latency_window: self.enforcer.latency_window,
                suspend_when: self.enforcer.suspend_when,
                throttle_profile: self.enforcer.throttle_profile.clone(),
                suspend_profile: self.enforcer.suspend_profile.clone(),
                settle: self.enforcer.settle,
                min_interval: self.enforcer.min_interval,
                max_changes_per_hour: self.enforcer.max_changes_per_hour,
                state_file: self.enforcer.state_file.clone(),
                wpq_levers: self.enforcer.wpq_levers.clone(),
                verify_after: self.enforcer.verify_after,
                max_rung: self.enforcer.max_rung,
                ladder_settle: self.enforcer.ladder_settle,
                recovery_limits: self.enforcer.recovery_limits.clone(),
                recovery_sleeps: self.enforcer.recovery_sleeps.clone(),
                descend_below: self.enforcer.descend_below,
                pause_period: self.enforcer.pause_period,
                pause_max_share: self.enforcer.pause_max_share,
                pause_max_total: self.enforcer.pause_max_total,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn clap_definition_is_consistent() {
        Cli::command().debug_assert();
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
        let o = args.overrides();
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
        let o = args.overrides().enforcer;
        assert_eq!(o.recovery_limits, Some(vec![300, 100]));
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
        assert_eq!(args.overrides().ceph_backend, Some(BackendChoice::Librados));
        let err = Cli::try_parse_from(["ceph-recovery-budget", "serve", "--ceph.backend", "rados"])
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("cli") && err.contains("librados") && err.contains("auto"),
            "{err}"
        );
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
