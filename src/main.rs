use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context;
use clap::Parser;
use tokio::sync::watch;

use ceph_recovery_budget::ceph::any;
use ceph_recovery_budget::ceph::cli::CliClient;
use ceph_recovery_budget::ceph::{admin_socket, Client};
use ceph_recovery_budget::cli::{
    BaselineArgs, CephArgs, CheckConfigArgs, Cli, Command, FioArgs, FioSummaryArgs, LintArgs,
    ProfileSweepArgs, ServeArgs, StatusArgs, StatusFormat, TuneCommand, TuneDecideArgs,
    TuneReportArgs, TuneStepArgs,
};
use ceph_recovery_budget::collect::{CollectSettings, Collector, Snapshot};
use ceph_recovery_budget::config::Settings;
use ceph_recovery_budget::enforcer::{
    self, BaselineSpec, CephActor, Enforcer, EnforcerState, LogStyle, Mode, Policy, TokioClock,
};
use ceph_recovery_budget::http;
use ceph_recovery_budget::settings::{FileConfig, LogFormat, ServeMode};
use ceph_recovery_budget::tuning;

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Serve(args) => serve(*args),
        Command::CheckConfig(args) => check_config(args),
        Command::Status(args) => status(args),
        Command::FioSummary(args) => fio_summary(args),
        Command::Baseline(args) => baseline(args),
        Command::Tune(TuneCommand::Step(args)) => tune_step(args),
        Command::Tune(TuneCommand::Decide(args)) => tune_decide(args),
        Command::Tune(TuneCommand::Report(args)) => tune_report(args),
        Command::ProfileSweep(args) => profile_sweep(args),
        Command::Experiment(args) => experiment(args),
        Command::Lint(args) => lint(args),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn load_settings(args: &ServeArgs) -> anyhow::Result<Settings> {
    let (file, path) = match &args.config_file {
        Some(p) => (FileConfig::load(p)?, p.as_path()),
        None => (FileConfig::default(), Path::new("(no config file)")),
    };
    Ok(Settings::resolve(&file, path, &args.settings)?)
}

fn check_config(args: CheckConfigArgs) -> anyhow::Result<ExitCode> {
    let file = FileConfig::load(&args.file)?;
    let settings = Settings::resolve(&file, &args.file, &Default::default())?;
    if let BaselineSpec::Fio(path) = &settings.policy.baseline {
        fio_baseline(path)?;
    }
    let p = &settings.policy;
    let mut out = format!("{}: OK\n", args.file.display());
    out += &format!(
        "  listen {} path {}\n",
        settings.listen_address, settings.telemetry_path
    );
    out += &format!(
        "  ceph command: {} (timeout {})\n",
        settings.ceph.command.join(" "),
        humantime::format_duration(settings.ceph.timeout)
    );
    out += &format!(
        "  ceph backend: {}\n",
        any::describe(settings.ceph_backend, &settings.ceph)
    );
    out += &match settings.mode {
        ServeMode::Host => format!(
            "  mode host: the latency histograms of this host's OSDs from their admin sockets in {}\n",
            settings.asok_dir.display()
        ),
        ServeMode::Cluster if settings.prometheus.is_some() => {
            "  mode cluster: cluster state only (the histograms come from host-mode exporters, through Prometheus)\n".to_string()
        }
        ServeMode::Cluster => "  mode cluster: cluster state and every OSD's histogram\n".to_string(),
    };
    out += &format!(
        "  latency histograms published per {}, enforcer p99 from {}\n",
        settings.latency_aggregate.as_str(),
        match &settings.prometheus {
            Some(p) => format!("Prometheus {} ({})", p.url, p.query),
            None => "the histograms collected here".to_string(),
        }
    );
    out += &format!(
        "  collect every {}, recovery window {}, latency window {}\n",
        humantime::format_duration(settings.collect_interval),
        humantime::format_duration(settings.recovery_window),
        humantime::format_duration(settings.latency_window)
    );
    out += &format!(
        "  enforcer {}: baseline {}, bound {} x baseline, act after {} above it, suspend when {}, throttle {}, suspend {}, settle {}, at most {} changes/h {} apart, state file {}\n",
        p.mode.as_str(),
        p.baseline,
        p.multiplier,
        humantime::format_duration(p.breach_for),
        p.suspend_when.as_str(),
        p.throttle_profile,
        p.suspend_profile,
        humantime::format_duration(p.settle),
        p.max_changes_per_hour,
        humantime::format_duration(p.min_interval),
        p.state_file.display()
    );
    out += &format!("  {}\n", enforcer::ladder::describe(p));
    print_out(&out);
    Ok(ExitCode::SUCCESS)
}

/// The write p99 of a fio report, in seconds.
fn fio_baseline(path: &Path) -> anyhow::Result<f64> {
    let text = std::fs::read_to_string(path).with_context(|| {
        format!(
            "reading the fio report {} (--enforcer.baseline fio:FILE)",
            path.display()
        )
    })?;
    let summary = ceph_recovery_budget::fio::parse(&text)
        .with_context(|| format!("parsing the fio report {}", path.display()))?;
    summary
        .write
        .as_ref()
        .and_then(|w| w.latency_seconds.p99)
        .with_context(|| {
            format!(
                "the fio report {} has no write clat p99 (a write job with percentiles is needed)",
                path.display()
            )
        })
}

fn status(args: StatusArgs) -> anyhow::Result<ExitCode> {
    ceph_recovery_budget::http_client::HttpTarget::parse(&args.url)
        .map_err(|e| anyhow::anyhow!("--url {e}"))?;
    let body = ceph_recovery_budget::http_client::http_get(&args.url, "/api/status").with_context(
        || {
            format!(
                "--url {}: is `ceph-recovery-budget serve` running there?",
                args.url
            )
        },
    )?;
    if args.format == StatusFormat::Json {
        print_out(&format!("{body}\n"));
        return Ok(ExitCode::SUCCESS);
    }
    let report: http::report::StatusReport = serde_json::from_str(&body).with_context(|| {
        format!(
            "{} did not answer /api/status with a status report",
            args.url
        )
    })?;
    print_out(&(report.lines().join("\n") + "\n"));
    Ok(ExitCode::SUCCESS)
}

fn fio_summary(args: FioSummaryArgs) -> anyhow::Result<ExitCode> {
    use std::io::Read;
    let text = if args.file.as_os_str() == "-" {
        let mut t = String::new();
        std::io::stdin()
            .read_to_string(&mut t)
            .context("reading the fio report from standard input")?;
        t
    } else {
        std::fs::read_to_string(&args.file)
            .with_context(|| format!("reading the fio report {}", args.file.display()))?
    };
    let summary = ceph_recovery_budget::fio::parse(&text)
        .with_context(|| format!("{} is not a usable fio report", args.file.display()))?;
    for w in &summary.warnings {
        eprintln!("warning: {w}");
    }
    match args.format {
        StatusFormat::Json => {
            print_out(&(serde_json::to_string(&summary).context("encoding the summary")? + "\n"))
        }
        StatusFormat::Text => {
            print_out(&(ceph_recovery_budget::fio::render_human(&summary) + "\n"))
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// A small runtime for the commands that talk to the cluster directly.
fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")
}

fn ceph_client(args: &CephArgs) -> anyhow::Result<CliClient> {
    let settings = args.settings().map_err(anyhow::Error::msg)?;
    Ok(CliClient::new(&settings))
}

/// Ctrl-C, SIGTERM or SIGHUP (the SSH session dropped) asks the running command to stop
/// cleanly (record written, setting put back); further signals are said to be ignored until it
/// has.
fn cancel_on_signals() -> watch::Receiver<bool> {
    use tokio::signal::unix::{signal, Signal, SignalKind};
    async fn next(s: &mut Option<Signal>) {
        match s.as_mut() {
            Some(s) => {
                s.recv().await;
            }
            None => std::future::pending::<()>().await,
        }
    }
    let (tx, rx) = watch::channel(false);
    tokio::spawn(async move {
        let mut term = signal(SignalKind::terminate()).ok();
        let mut hup = signal(SignalKind::hangup()).ok();
        loop {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = next(&mut term) => {}
                _ = next(&mut hup) => {}
            }
            if *tx.borrow() {
                eprintln!(
                    "\nstill finishing (writing the record, putting settings back); please wait"
                );
            }
            let _ = tx.send(true);
        }
    });
    rx
}

/// Runs a long tuning command with progress on stderr, stopping cleanly on Ctrl-C/SIGTERM.
fn interruptible<T>(
    f: impl AsyncFnOnce(
        &mut tuning::measure::TerminalProgress,
        &mut watch::Receiver<bool>,
    ) -> Result<T, tuning::TuningError>,
) -> anyhow::Result<T> {
    Ok(runtime()?.block_on(async {
        let mut cancel = cancel_on_signals();
        let mut progress = tuning::measure::TerminalProgress::new();
        f(&mut progress, &mut cancel).await
    })?)
}

fn fio_plan(args: &FioArgs) -> anyhow::Result<Option<tuning::measure::FioPlan>> {
    match (&args.fio_output, &args.fio_cmd) {
        (Some(path), _) => Ok(Some(
            tuning::measure::FioPlan::report(path).map_err(anyhow::Error::msg)?,
        )),
        (None, Some(cmd)) => Ok(Some(tuning::measure::FioPlan::Command(split_command(
            "--fio-cmd",
            cmd,
        )?))),
        (None, None) => Ok(None),
    }
}

fn split_command(flag: &str, cmd: &str) -> anyhow::Result<Vec<String>> {
    let argv = shell_words::split(cmd).with_context(|| format!("{flag} {cmd:?}"))?;
    if argv.is_empty() {
        anyhow::bail!("{flag} is empty");
    }
    Ok(argv)
}

/// 130 after Ctrl-C, as shells expect.
const INTERRUPTED: u8 = 130;

fn baseline(args: BaselineArgs) -> anyhow::Result<ExitCode> {
    let client = ceph_client(&args.ceph)?;
    let fio = fio_plan(&args.fio)?.context(
        "the baseline needs client latency: give --fio-output FILE (a fio report) or --fio-cmd 'fio ...'",
    )?;
    // The same bound as the enforcer's policy, when its config file is given.
    let multiplier = match (args.multiplier, &args.config_file) {
        (Some(m), _) => m,
        (None, Some(path)) => {
            let file = FileConfig::load(path)?;
            Settings::resolve(&file, path, &Default::default())?
                .policy
                .multiplier
        }
        (None, None) => 2.0,
    };
    let plan = tuning::cycle::BaselinePlan {
        record: args.record.clone(),
        window: args.window.0,
        fio,
        hardware: args.hardware,
        cluster_name: args.cluster_name,
        multiplier,
    };
    let record = interruptible(async |progress, cancel| {
        tuning::cycle::baseline(
            &client,
            &tuning::measure::ProcessFio,
            &plan,
            progress,
            cancel,
        )
        .await
    })?;
    print_out(&tuning::report::render(&record));
    let m = &record.baseline.measurement;
    if let Some(why) = &m.interrupted {
        eprintln!(
            "the baseline was not completed ({why}); {} says so. Run baseline again into a new record.",
            args.record.display()
        );
        return Ok(ExitCode::from(if why.contains("Ctrl-C") {
            INTERRUPTED
        } else {
            1
        }));
    }
    eprintln!("baseline written to {}", args.record.display());
    Ok(ExitCode::SUCCESS)
}

fn tune_step(args: TuneStepArgs) -> anyhow::Result<ExitCode> {
    use tuning::cycle::{DecideMode, GoalSpec, StepEnd};
    let [setting] = args.set.as_slice() else {
        anyhow::bail!(
            "--set was given {} times: a step changes exactly one setting, so that its effect can be told apart. Run one step per setting.",
            args.set.len()
        );
    };
    let (name, value) = tuning::cycle::parse_setting(setting).map_err(anyhow::Error::msg)?;
    let goal = match (&args.goal_rate, &args.goal_recovery_time) {
        (Some(r), _) => Some(GoalSpec::Rate(
            tuning::judge::parse_goal_rate(r).map_err(anyhow::Error::msg)?,
        )),
        (None, Some(t)) => Some(GoalSpec::RecoveryTime(t.0)),
        (None, None) => None,
    };
    if !(args.min_gain >= 0.0 && args.min_gain.is_finite()) {
        anyhow::bail!("--min-gain {} must be a percentage >= 0", args.min_gain);
    }
    let plan = tuning::cycle::StepPlan {
        record: args.record.clone(),
        setting: name,
        value,
        settle: args.settle.0,
        window: args.window.0,
        fio: fio_plan(&args.fio)?,
        decide: if args.keep {
            DecideMode::Keep
        } else if args.revert {
            DecideMode::Revert
        } else if args.auto {
            DecideMode::Auto
        } else {
            DecideMode::Ask
        },
        force: args.force,
        goal,
        min_gain: args.min_gain / 100.0,
    };
    let client = ceph_client(&args.ceph)?;
    let outcome = interruptible(async |progress, cancel| {
        let asker = &mut tuning::cycle::TerminalAsker;
        tuning::cycle::step(
            &client,
            &tuning::measure::ProcessFio,
            &plan,
            asker,
            progress,
            cancel,
        )
        .await
    })?;
    print_out(&tuning::report::render(&outcome.record));
    Ok(match outcome.end {
        StepEnd::Kept | StepEnd::Reverted => ExitCode::SUCCESS,
        // Applied and waiting for `tune decide`: not a failure, but not finished either.
        StepEnd::Undecided => ExitCode::from(3),
        StepEnd::Interrupted => ExitCode::from(INTERRUPTED),
    })
}

fn tune_decide(args: TuneDecideArgs) -> anyhow::Result<ExitCode> {
    let client = ceph_client(&args.ceph)?;
    let (record, line) =
        runtime()?.block_on(tuning::cycle::decide(&client, &args.record, args.keep))?;
    eprintln!("{line}");
    print_out(&tuning::report::render(&record));
    Ok(ExitCode::SUCCESS)
}

fn tune_report(args: TuneReportArgs) -> anyhow::Result<ExitCode> {
    let record = tuning::record::TuningRecord::load(&args.record)?;
    if let Some(chart) = &args.chart {
        ceph_recovery_budget::atomic_file::write(chart, tuning::chart::svg(&record).as_bytes())
            .with_context(|| format!("writing the chart {}", chart.display()))?;
        eprintln!("chart written to {}", chart.display());
    }
    print_out(&tuning::report::render(&record));
    Ok(ExitCode::SUCCESS)
}

fn profile_sweep(args: ProfileSweepArgs) -> anyhow::Result<ExitCode> {
    let client = ceph_client(&args.ceph)?;
    let optional = |flag: &str, c: &Option<String>| -> anyhow::Result<Option<Vec<String>>> {
        c.as_deref().map(|c| split_command(flag, c)).transpose()
    };
    if !(args.multiplier > 1.0 && args.multiplier.is_finite()) {
        anyhow::bail!("--multiplier {} must be a number above 1", args.multiplier);
    }
    let plan = tuning::sweep::SweepPlan {
        window: args.window.0,
        settle: args.settle.0,
        fio: split_command("--fio-cmd", &args.fio_cmd)?,
        start_recovery: optional("--start-recovery", &args.start_recovery)?,
        stop_recovery: optional("--stop-recovery", &args.stop_recovery)?,
        wait_recovery: args.wait_recovery.0,
        multiplier: args.multiplier,
    };
    let result = interruptible(async |progress, cancel| {
        tuning::sweep::sweep(
            &client,
            &tuning::measure::ProcessFio,
            &plan,
            progress,
            cancel,
        )
        .await
    })?;
    match args.format {
        StatusFormat::Json => print_out(
            &(serde_json::to_string_pretty(&result).context("encoding the result")? + "\n"),
        ),
        StatusFormat::Text => print_out(&tuning::sweep::render(&result)),
    }
    Ok(if result.complete {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// Exit 0: every row measured and the cluster put back; 1: incomplete; 2: bad arguments or
/// refused (a recovery running, pause flags set, no mClock); 130: interrupted.
fn experiment(args: ceph_recovery_budget::cli::ExperimentArgs) -> anyhow::Result<ExitCode> {
    use tuning::experiment as ex;
    let refused = |e: &dyn std::fmt::Display| {
        eprintln!("error: {e:#}");
        Ok(ExitCode::from(2))
    };
    let serve_words = match split_command("--serve-args", &args.serve_args) {
        Ok(w) => w,
        Err(_) if args.serve_args.trim().is_empty() => Vec::new(),
        Err(e) => return refused(&e),
    };
    if let Err(e) = ex::check_serve_args(&serve_words) {
        return refused(&e);
    }
    let optional = |flag: &str, c: &Option<String>| -> anyhow::Result<Option<Vec<String>>> {
        c.as_deref().map(|c| split_command(flag, c)).transpose()
    };
    let plan = (|| -> anyhow::Result<ex::ExperimentPlan> {
        let plan = ex::ExperimentPlan {
            fio: split_command("--fio-cmd", &args.fio_cmd)?,
            start_recovery: optional("--start-recovery", &args.start_recovery)?,
            stop_recovery: optional("--stop-recovery", &args.stop_recovery)?,
            rows: ex::parse_rows(&args.rows).map_err(anyhow::Error::msg)?,
            baseline_window: args.baseline_window.0,
            multiplier: args.multiplier,
            max_recovery: args.max_recovery.0,
            poll_every: std::time::Duration::from_secs(3),
            enforcer_ready_within: std::time::Duration::from_secs(60),
            enforcer_idle_within: std::time::Duration::from_secs(120),
            metrics_path: ex::telemetry_path(&serve_words),
        };
        plan.check().map_err(anyhow::Error::msg)?;
        Ok(plan)
    })();
    let plan = match plan {
        Ok(p) => p,
        Err(e) => return refused(&e),
    };
    let client = match ceph_client(&args.ceph) {
        Ok(c) => c,
        Err(e) => return refused(&e),
    };
    let mut serve_rest = ex::serve_ceph_args(
        &args.ceph.ceph_cmd,
        args.ceph.ceph_conf.as_deref(),
        args.ceph.ceph_name.as_deref(),
        args.ceph.ceph_keyring.as_deref(),
        args.ceph.ceph_timeout.0,
    );
    serve_rest.extend(serve_words);
    let exe = std::env::current_exe()
        .context("finding this program's path (the enforced row runs it as `serve`)")?;
    let dir = std::env::temp_dir().join(format!(
        "ceph-recovery-budget-experiment-{}",
        std::process::id()
    ));
    let procs = ex::processes::RealProcesses::new(exe, serve_rest, dir);
    let result = match interruptible(async |progress, cancel| {
        ex::experiment(&client, &procs, &plan, progress, cancel).await
    }) {
        Ok(r) => r,
        Err(e) if matches!(e.downcast_ref(), Some(tuning::TuningError::Refused(_))) => {
            return refused(&e)
        }
        Err(e) => return Err(e),
    };
    if let Some(path) = &args.decisions_out {
        if result.enforcer.is_some() {
            let json = serde_json::to_string_pretty(&result.decisions)
                .context("encoding the decisions")?;
            ceph_recovery_budget::atomic_file::write(path, (json + "\n").as_bytes())
                .with_context(|| format!("writing the decisions to {}", path.display()))?;
            eprintln!(
                "decisions of the enforced row written to {}",
                path.display()
            );
        } else {
            eprintln!("no enforced row ran: {} not written", path.display());
        }
    }
    match args.format {
        StatusFormat::Json => print_out(
            &(serde_json::to_string_pretty(&result).context("encoding the result")? + "\n"),
        ),
        StatusFormat::Text => print_out(&ex::render(&result)),
    }
    Ok(ExitCode::from(result.exit_code()))
}

/// Exit 0: nothing flagged; 1: something flagged; 2: the dump could not be read.
fn lint(args: LintArgs) -> anyhow::Result<ExitCode> {
    match lint_findings(&args) {
        Ok((findings, facts)) => {
            match args.format {
                StatusFormat::Json => print_out(
                    &(serde_json::to_string_pretty(&serde_json::json!({
                        "scheduler": facts,
                        "findings": findings,
                    }))
                    .context("encoding the findings")?
                        + "\n"),
                ),
                StatusFormat::Text => print_out(&tuning::lint::render_text(&findings, &facts)),
            }
            Ok(ExitCode::from(u8::from(!findings.is_empty())))
        }
        Err(e) => {
            eprintln!("error: {e:#}");
            Ok(ExitCode::from(2))
        }
    }
}

fn lint_findings(
    args: &LintArgs,
) -> anyhow::Result<(
    Vec<tuning::lint::Finding>,
    tuning::knowledge::SchedulerFacts,
)> {
    use ceph_recovery_budget::ceph::parse::config_dump;
    let (entries, mut facts) = match &args.file {
        Some(path) => {
            let bytes = std::fs::read(path)
                .with_context(|| format!("reading the config dump {}", path.display()))?;
            let entries = config_dump::parse(&bytes).with_context(|| {
                format!(
                    "{} is not the output of `ceph config dump -f json`",
                    path.display()
                )
            })?;
            let facts = tuning::knowledge::facts_from_dump(&entries);
            (entries, facts)
        }
        None => {
            let client = ceph_client(&args.ceph)?;
            runtime()?.block_on(async {
                let entries = tuning::cluster::config_dump(&client).await?;
                // The daemons know what they run (ceph.conf beats the database).
                let (facts, _) = tuning::cluster::scheduler_facts(&client).await?;
                Ok::<_, tuning::TuningError>((entries, facts))
            })?
        }
    };
    if let Some(q) = &args.op_queue {
        facts.op_queue = Some(q.clone());
    }
    Ok((tuning::lint::lint(&entries, &facts), facts))
}

/// Writes to stdout; a closed pipe (`| head`) is not an error worth a panic.
fn print_out(text: &str) {
    use std::io::Write;
    let _ = std::io::stdout().write_all(text.as_bytes());
}

fn init_logging(settings: &Settings) {
    let filter = tracing_subscriber::EnvFilter::new(&settings.log_level);
    use std::io::IsTerminal;
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal());
    match settings.log_format {
        LogFormat::Json => builder.json().flatten_event(true).init(),
        LogFormat::Text => builder.init(),
    }
}

fn serve(args: ServeArgs) -> anyhow::Result<ExitCode> {
    let settings = load_settings(&args)?;
    init_logging(&settings);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    runtime.block_on(run_serve(settings))?;
    Ok(ExitCode::SUCCESS)
}

async fn run_serve(settings: Settings) -> anyhow::Result<()> {
    let listener = tokio::net::TcpListener::bind(settings.listen_address)
        .await
        .with_context(|| {
            format!(
                "cannot listen on {} (in use? see --web.listen-address)",
                settings.listen_address
            )
        })?;
    tracing::info!(
        address = %settings.listen_address,
        path = %settings.telemetry_path,
        ceph = %settings.ceph.command.join(" "),
        interval = ?settings.collect_interval,
        "serving metrics"
    );

    if settings.mode == ServeMode::Host {
        let dir = settings.asok_dir.clone();
        let sockets = admin_socket::discover_osd_sockets(&dir).with_context(|| {
            format!(
                "host mode reads the local OSDs' admin sockets in {} (see --host.asok-dir)",
                dir.display()
            )
        })?;
        tracing::info!(dir = %dir.display(), osds = ?sockets.iter().map(|(o, _)| o).collect::<Vec<_>>(), "host mode: reading the latency histograms of this host's OSDs from their admin sockets");
        if sockets.is_empty() {
            tracing::warn!(dir = %dir.display(), "no OSD admin socket here yet; collector latency stays down until one appears");
        }
        ceph_recovery_budget::metrics::set_backend("admin_socket");
        let client = admin_socket::AdminSocketClient::new(dir, settings.ceph.timeout);
        return serve_with(settings, listener, client).await;
    }

    // One client (one librados connection) for the collector and the enforcer.
    let selected = any::select(settings.ceph_backend, &settings.ceph).await?;
    let backend = selected.client.backend().as_str();
    tracing::info!(
        backend,
        choice = settings.ceph_backend.as_str(),
        why = %selected.why,
        "ceph backend: {backend}"
    );
    ceph_recovery_budget::metrics::set_backend(backend);
    serve_with(settings, listener, selected.client).await
}

/// This machine's name, for `host="..."` in host mode.
fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .or_else(|_| std::fs::read_to_string("/etc/hostname"))
        .map(|h| h.trim().to_string())
        .ok()
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "localhost".to_string())
}

/// The collector, the enforcer and the HTTP server over one client, until a signal.
async fn serve_with<C: Client + Clone>(
    settings: Settings,
    listener: tokio::net::TcpListener,
    client: C,
) -> anyhow::Result<()> {
    let host_mode = settings.mode == ServeMode::Host;
    let (shutdown_tx, shutdown_rx) = watch::channel(false);
    let (snap_tx, snap_rx) = watch::channel(Arc::new(Snapshot::empty(settings.collect_interval)));
    let collector = Collector::new(
        client.clone(),
        CollectSettings {
            interval: settings.collect_interval,
            recovery_window: settings.recovery_window,
            latency_window: settings.latency_window,
            cluster_state: !host_mode,
            // With Prometheus as the latency source the host-mode exporters publish them.
            latency: host_mode || settings.prometheus.is_none(),
            grouping: settings.latency_aggregate,
            host_name: host_mode.then(|| settings.host_name.clone().unwrap_or_else(hostname)),
        },
    );
    let collector_task = tokio::spawn(collector.run(snap_tx, shutdown_rx.clone()));
    let external_p99 = settings.prometheus.clone().map(|p| {
        tracing::info!(url = %p.url, query = %p.query, "the enforcer's p99 comes from Prometheus");
        let (tx, rx) = watch::channel(None);
        tokio::spawn(ceph_recovery_budget::latency::prometheus::poll(
            p.url,
            p.query,
            settings.collect_interval,
            tx,
            shutdown_rx.clone(),
        ));
        rx
    });

    let mut enforcer_shared = None;
    let mut enforcer_task = None;
    if settings.policy.mode != Mode::Off {
        let mut enforcer = build_enforcer(&settings, client)?;
        if let Some(rx) = external_p99 {
            enforcer = enforcer.with_external_p99(rx);
        }
        enforcer_shared = Some(enforcer.shared());
        enforcer_task = Some(tokio::spawn(
            enforcer.run(snap_rx.clone(), shutdown_rx.clone()),
        ));
    } else if let Ok(EnforcerState {
        applied,
        original,
        flags_set,
        ..
    }) = EnforcerState::load(&settings.policy.state_file)
    {
        if !flags_set.is_empty() {
            tracing::error!(
                flags = ?flags_set,
                "the enforcer is off, but its state file says it set these OSD map flags and did not unset them: recovery may be paused; unset them (ceph osd unset FLAG) or run the enforcer in enforce mode, which unsets them at start"
            );
        }
        if let Some(a) = applied.filter(|a| !a.simulated) {
            tracing::warn!(
                values = ?a.values,
                original = ?original,
                "the enforcer is off, but its state file says it changed settings it has not restored; restore them by hand or run it in enforce mode"
            );
        }
    }

    let app = http::router(http::AppState {
        snapshots: snap_rx,
        telemetry_path: settings.telemetry_path.clone(),
        enforcer: enforcer_shared,
    });
    let mut http_shutdown = shutdown_rx.clone();
    let server = axum::serve(listener, app).with_graceful_shutdown(async move {
        let _ = http_shutdown.changed().await;
    });
    let server_task = tokio::spawn(async move { server.await });

    let mut collector_task = collector_task;
    let enforcer_ended = async {
        match enforcer_task.as_mut() {
            Some(t) => t.await,
            None => std::future::pending().await,
        }
    };
    // A task that ends on its own is a bug: stop (non-zero) rather than serve frozen data.
    let died = tokio::select! {
        _ = shutdown_signal() => None,
        r = &mut collector_task => Some(format!("the collector stopped unexpectedly ({r:?})")),
        r = enforcer_ended => Some(format!("the enforcer stopped unexpectedly ({r:?})")),
    };
    tracing::info!("shutting down");
    let _ = shutdown_tx.send(true);
    if !collector_task.is_finished() {
        let _ = collector_task.await;
    }
    if let Some(t) = enforcer_task {
        if !t.is_finished() {
            let _ = t.await;
        }
    }
    if let Some(why) = died {
        anyhow::bail!(why);
    }
    server_task
        .await
        .context("HTTP server task")?
        .context("HTTP server")?;
    Ok(())
}

fn build_enforcer<C: Client>(
    settings: &Settings,
    client: C,
) -> anyhow::Result<Enforcer<CephActor<C>, TokioClock>> {
    let policy: &Policy = &settings.policy;
    let fixed = match &policy.baseline {
        BaselineSpec::Fixed(d) => Some(d.as_secs_f64()),
        BaselineSpec::Fio(path) => Some(fio_baseline(path)?),
        BaselineSpec::Learned => None,
    };
    let mut persist = true;
    let mut state = match EnforcerState::load(&policy.state_file) {
        Ok(s) => s,
        Err(e) if policy.mode == Mode::Enforce => return Err(e.into()),
        Err(e) => {
            tracing::warn!(error = %e, "observe mode: starting from a fresh enforcer state and leaving the file as it is");
            persist = false;
            EnforcerState::default()
        }
    };
    match (&state.applied, policy.mode) {
        // What observe mode only pretended to set must not be "restored" for real.
        (Some(a), Mode::Enforce) if a.simulated => {
            tracing::info!(target: "decision", "the state file holds an observe-mode episode; enforce mode starts fresh");
            state = EnforcerState { learned: state.learned, flags_set: state.flags_set, ..EnforcerState::default() };
        }
        (_, Mode::Observe) if !state.flags_set.is_empty() => anyhow::bail!(
            "the state file {} says the enforcer (enforce mode) set {:?} and has not unset them; \
             recovery may be paused: run in enforce mode (it unsets them at start) or `ceph osd unset` them by hand and remove the file",
            policy.state_file.display(),
            state.flags_set
        ),
        (Some(a), Mode::Observe) if !a.simulated => anyhow::bail!(
            "the state file {} says the enforcer (enforce mode) changed {:?} and has not restored {:?} yet; \
             run in enforce mode until it restores them, or restore them by hand and remove the file",
            policy.state_file.display(),
            a.values,
            state.original
        ),
        _ => {}
    }
    if policy.mode == Mode::Enforce {
        // Fail now, not in the middle of a recovery, if the state file cannot be written.
        state
            .save(&policy.state_file)
            .context("the enforcer in enforce mode must be able to write its state file")?;
    }
    if !state.original.is_empty() {
        tracing::info!(target: "decision", original = ?state.original, applied = ?state.applied.as_ref().map(|a| &a.values), "resuming: the state file says the enforcer changed settings before it stopped; it will restore them when recovery ends");
    }
    tracing::info!(
        target: "decision",
        "enforcer {} mode: baseline {}{}, bound {} x baseline, act after {} above it during recovery, suspend when {}; {}",
        policy.mode.as_str(),
        policy.baseline,
        match (&policy.baseline, fixed) {
            (BaselineSpec::Fio(_), Some(f)) => format!(" = write p99 {}", ceph_recovery_budget::units::fmt_ms(f)),
            _ => String::new(),
        },
        policy.multiplier,
        ceph_recovery_budget::units::fmt_secs(policy.breach_for.as_secs_f64()),
        policy.suspend_when.as_str(),
        enforcer::ladder::describe(policy)
    );
    let style = match settings.log_format {
        LogFormat::Json => LogStyle::Json,
        LogFormat::Text => LogStyle::Text,
    };
    let enforcer = Enforcer::new(
        policy.clone(),
        CephActor::new(client),
        TokioClock::new(),
        state,
        fixed,
        settings.collect_interval,
        style,
    );
    Ok(if persist {
        enforcer
    } else {
        enforcer.without_persistence()
    })
}

async fn shutdown_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    // SIGHUP too: a `serve` started in an SSH session must still clear its pause flags when
    // the session drops.
    match (
        signal(SignalKind::terminate()),
        signal(SignalKind::hangup()),
    ) {
        (Ok(mut term), Ok(mut hup)) => {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = term.recv() => {}
                _ = hup.recv() => {}
            }
        }
        (Err(e), _) | (_, Err(e)) => {
            tracing::warn!(error = %e, "cannot listen for SIGTERM or SIGHUP; only Ctrl-C stops the exporter");
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}
