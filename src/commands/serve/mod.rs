//! `serve`: the collector, the enforcer and the HTTP server over one Ceph client, until a
//! signal. What to do at start with the enforcer's state file is decided in [`startup`].

pub mod startup;

use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context;
use tokio::sync::watch;

use ceph_recovery_budget::ceph::any;
use ceph_recovery_budget::ceph::{admin_socket, Client};
use ceph_recovery_budget::cli::ServeArgs;
use ceph_recovery_budget::collect::{CollectSettings, Collector, Snapshot};
use ceph_recovery_budget::config::Settings;
use ceph_recovery_budget::enforcer::{
    self, BaselineSpec, CephActor, Enforcer, EnforcerState, LogStyle, Policy, TokioClock,
};
use ceph_recovery_budget::http;
use ceph_recovery_budget::http::server::ServerOptions;
use ceph_recovery_budget::http::web_config::WebConfig;
use ceph_recovery_budget::lease::task::Link;
use ceph_recovery_budget::settings::{FileConfig, LogFormat, ServeMode};

use super::{finish, fio_baseline, signals, LOG};
use startup::{Notice, Start};

pub fn run(args: ServeArgs) -> ExitCode {
    finish(serve(args))
}

fn load_settings(args: &ServeArgs) -> anyhow::Result<Settings> {
    let (file, path) = match &args.config_file {
        Some(p) => (FileConfig::load(p)?, p.as_path()),
        None => (FileConfig::default(), Path::new("(no config file)")),
    };
    Ok(Settings::resolve(&file, path, &args.settings)?)
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
    // A bad web config stops the start: serving without the TLS or auth it asks for is worse.
    let web = settings
        .web_config_file
        .as_deref()
        .map(WebConfig::load)
        .transpose()?;
    if let Some(w) = &web {
        tracing::info!(target: LOG, file = %w.path.display(), config = %w.describe(), "web config");
    }
    let listener = tokio::net::TcpListener::bind(settings.listen_address)
        .await
        .with_context(|| {
            format!(
                "cannot listen on {} (in use? see --web.listen-address)",
                settings.listen_address
            )
        })?;
    tracing::info!(
        target: LOG,
        address = %settings.listen_address,
        path = %settings.telemetry_path,
        ceph = %settings.ceph.command.join(" "),
        interval = ?settings.collect_interval,
        scheme = if web.as_ref().is_some_and(|w| w.tls.is_some()) { "https" } else { "http" },
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
        tracing::info!(target: LOG, dir = %dir.display(), osds = ?sockets.iter().map(|(o, _)| o).collect::<Vec<_>>(), "host mode: reading the latency histograms of this host's OSDs from their admin sockets");
        if sockets.is_empty() {
            tracing::warn!(target: LOG, dir = %dir.display(), "no OSD admin socket here yet; collector latency stays down until one appears");
        }
        ceph_recovery_budget::metrics::set_backend("admin_socket");
        let client = admin_socket::AdminSocketClient::new(dir, settings.ceph.timeout);
        return serve_with(settings, listener, web, client).await;
    }

    // One client (one librados connection) for the collector and the enforcer.
    let selected = any::select(settings.ceph_backend, &settings.ceph).await?;
    let backend = selected.client.backend().as_str();
    tracing::info!(
        target: LOG,
        backend,
        choice = settings.ceph_backend.as_str(),
        why = %selected.why,
        "ceph backend: {backend}"
    );
    ceph_recovery_budget::metrics::set_backend(backend);
    serve_with(settings, listener, web, selected.client).await
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
    web: Option<WebConfig>,
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
        tracing::info!(target: LOG, url = %p.url, query = %p.query, "the enforcer's p99 comes from Prometheus");
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
    if let Some((mut enforcer, lease)) = start_enforcer(&settings, client)? {
        if let Some(rx) = external_p99 {
            enforcer = enforcer.with_external_p99(rx);
        }
        enforcer_shared = Some(enforcer.shared());
        enforcer_task = Some(run_enforcer_apart(
            enforcer,
            lease,
            snap_rx.clone(),
            shutdown_rx.clone(),
        )?);
    }

    let app = http::router(http::AppState {
        snapshots: snap_rx,
        telemetry_path: settings.telemetry_path.clone(),
        enforcer: enforcer_shared,
    });
    let server_task = tokio::spawn(http::server::serve(
        listener,
        app,
        web,
        ServerOptions {
            limits: settings.web_limits,
            ..ServerOptions::default()
        },
        shutdown_rx.clone(),
    ));

    let mut collector_task = collector_task;
    let enforcer_ended = async {
        match enforcer_task.as_mut() {
            Some(t) => (&mut t.done).await,
            None => std::future::pending().await,
        }
    };
    // A task that ends on its own is a bug: stop (non-zero) rather than serve frozen data.
    let died = tokio::select! {
        _ = signals::shutdown() => None,
        r = &mut collector_task => Some(format!("the collector stopped unexpectedly ({r:?})")),
        r = enforcer_ended => Some(format!("the enforcer stopped unexpectedly ({r:?})")),
    };
    tracing::info!(target: LOG, "shutting down");
    let _ = shutdown_tx.send(true);
    if !collector_task.is_finished() {
        let _ = collector_task.await;
    }
    if let Some(t) = enforcer_task {
        let _ = t.done.await;
        let _ = t.thread.join();
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

/// The enforcer, unless its mode is off: the state file loaded and judged by
/// [`startup::plan`], the baseline read, the start said in the decision log.
fn start_enforcer<C: Client + Clone>(
    settings: &Settings,
    client: C,
) -> anyhow::Result<Option<Started<C>>> {
    let policy: &Policy = &settings.policy;
    let fixed = match &policy.baseline {
        _ if policy.mode == enforcer::Mode::Off => None,
        BaselineSpec::Fixed(d) => Some(d.as_secs_f64()),
        BaselineSpec::Fio(path) => Some(fio_baseline(path)?),
        BaselineSpec::Learned => None,
    };
    let plan = startup::plan(
        policy.mode,
        &policy.state_file,
        EnforcerState::load(&policy.state_file),
    )?;
    let Start::Run {
        state,
        persist,
        save_first,
    } = plan.start
    else {
        plan.notices.iter().for_each(log_notice);
        return Ok(None);
    };
    // Enforce mode acts only under the lease, and keeps its state with it: the file is a cache.
    let lease = match policy.mode {
        enforcer::Mode::Enforce => Some(lease_starter(settings, client.clone())?),
        _ => None,
    };
    if save_first {
        if let Err(e) = state.save(&policy.state_file) {
            tracing::warn!(target: LOG, error = %e, "the local cache of the enforcer state cannot be written; the state is kept in the cluster with the lease");
        }
    }
    plan.notices.iter().for_each(log_notice);
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
        *state,
        fixed,
        settings.collect_interval,
        style,
    )
    .with_command_timeout(settings.ceph.timeout);
    let enforcer = if persist {
        enforcer
    } else {
        enforcer.without_persistence()
    };
    Ok(Some((enforcer, lease)))
}

/// Starts the lease task on the runtime that calls it (the enforcer's).
type LeaseStarter = Box<dyn FnOnce() -> Link + Send>;

/// The enforcer built at start, and its lease (enforce mode) to start on its own runtime.
type Started<C> = (Enforcer<CephActor<C>, TokioClock>, Option<LeaseStarter>);

/// The enforcer's thread: it ends `done` when the enforcer has stopped.
struct EnforcerTask {
    done: tokio::sync::oneshot::Receiver<()>,
    thread: std::thread::JoinHandle<()>,
}

/// Runs the enforcer (and its lease) on a runtime and thread of its own, so that no HTTP load
/// (hundreds of scrapers, idle connections) and no slow collection delays the end of a pause
/// slice or a renewal: they share nothing with the server's runtime but the data they read.
fn run_enforcer_apart<A, K>(
    enforcer: Enforcer<A, K>,
    lease: Option<LeaseStarter>,
    snapshots: watch::Receiver<Arc<Snapshot>>,
    shutdown: watch::Receiver<bool>,
) -> anyhow::Result<EnforcerTask>
where
    A: enforcer::Actor + Send + 'static,
    K: enforcer::Clock,
{
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the enforcer's runtime")?;
    let (done_tx, done) = tokio::sync::oneshot::channel();
    let thread = std::thread::Builder::new()
        .name("enforcer".into())
        .spawn(move || {
            runtime.block_on(async move {
                let enforcer = match lease {
                    Some(start) => enforcer.with_lease(start()),
                    None => enforcer,
                };
                enforcer.run(snapshots, shutdown).await;
            });
            let _ = done_tx.send(());
        })
        .context("starting the enforcer's thread")?;
    Ok(EnforcerTask { done, thread })
}

/// The lease of enforce mode, over a librados connection of its own (the collector's may be
/// dropped and reopened after a timeout, and a new connection cannot renew the old one's lock).
///
/// The lease object is checked against the cluster's registered one at every take, over
/// `registry_client` (the enforcer's): two instances given different pools never both lead.
#[cfg(feature = "librados")]
fn lease_starter<C: Client>(
    settings: &Settings,
    registry_client: C,
) -> anyhow::Result<LeaseStarter> {
    use ceph_recovery_budget::ceph::rados::{RadosClient, RadosSettings};
    use ceph_recovery_budget::lease::rados::{LeasePool, RadosLockStore, DEFAULT_POOLS, OBJECT};
    let client = RadosClient::new(RadosSettings {
        conf: settings.ceph.conf.clone(),
        name: settings.ceph.name.clone(),
        keyring: settings.ceph.keyring.clone(),
        timeout: settings.ceph.timeout,
    });
    let pool = match &settings.lease.pool {
        Some(p) => LeasePool::Named(p.clone()),
        None => LeasePool::Default,
    };
    let store = RadosLockStore::new(client, pool).with_registry(Box::new(
        ceph_recovery_budget::lease::registry::CephRegistry(registry_client),
    ));
    let c = settings.lease.config;
    tracing::info!(
        target: "decision",
        "enforce mode: only the instance holding the lease {OBJECT} in pool {} acts (lease {}, renew deadline {}, retry {}); this instance is {}; it watches as standby until it holds it",
        settings.lease.pool.clone().unwrap_or_else(|| DEFAULT_POOLS.join(" or ")),
        humantime::format_duration(c.lease_duration),
        humantime::format_duration(c.renew_deadline),
        humantime::format_duration(c.retry_period),
        ceph_recovery_budget::lease::LockStore::instance(&store),
    );
    Ok(Box::new(move || {
        ceph_recovery_budget::lease::task::spawn(store, c)
    }))
}

#[cfg(not(feature = "librados"))]
fn lease_starter<C: Client>(_settings: &Settings, _client: C) -> anyhow::Result<LeaseStarter> {
    anyhow::bail!(
        "enforce mode needs the lease in the cluster (one active enforcer per cluster, its state kept next to it), which is taken over librados, and this binary was built without it: use the container image or `cargo build --release --features librados` (needs librados-dev), or run --enforcer.mode observe"
    )
}

/// Each start-up notice, as a log line with its fields.
fn log_notice(notice: &Notice) {
    match notice {
        Notice::UnreadableInObserve { error } => {
            tracing::warn!(target: LOG, error = %error, "observe mode: starting from a fresh enforcer state and leaving the file as it is")
        }
        Notice::ObserveEpisodeDropped => {
            tracing::info!(target: "decision", "the state file holds an observe-mode episode; enforce mode starts fresh")
        }
        Notice::Resuming { original, applied } => {
            tracing::info!(target: "decision", original = ?original, applied = ?applied.as_ref(), "resuming: the state file says the enforcer changed settings before it stopped; it will restore them when recovery ends")
        }
        Notice::OffWithFlagsSet { flags } => tracing::error!(
            target: LOG,
            flags = ?flags,
            "the enforcer is off, but its state file says it set these OSD map flags and did not unset them: recovery may be paused; unset them (ceph osd unset FLAG) or run the enforcer in enforce mode, which unsets them at start"
        ),
        Notice::OffWithUnrestored { values, original } => tracing::warn!(
            target: LOG,
            values = ?values,
            original = ?original,
            "the enforcer is off, but its state file says it changed settings it has not restored; restore them by hand or run it in enforce mode"
        ),
    }
}
