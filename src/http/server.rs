//! The HTTP(S) server of `serve`: our own accept loop over hyper instead of `axum::serve`, for
//! TLS (rustls), basic auth and the [limits](super::limits), with the web config file re-read
//! when it (or a certificate it names) changes.
//!
//! - Connections: at most `max_connections` at once. When all are taken, the next one is
//!   accepted and takes the place of the connection that is only waiting (for its headers, or
//!   idle) and nearest its timeout: a scrape is served at once instead of waiting behind slow
//!   or idle connections, which hold no slot against newcomers. While every connection is
//!   serving a request, the next one waits, and the others after it stay in the kernel's listen
//!   backlog (as Prometheus' own `--web.max-connections` does): they are not reset, are served
//!   as soon as a request finishes, and cost the process no file descriptor. So the process
//!   holds at most `max_connections + 1` sockets for HTTP.
//! - Requests: basic auth first, then at most `max_requests` in flight; one more gets 503 at
//!   once (counted). Only authenticated requests count against `max_requests`, so wrong
//!   passwords cannot take the slots of scrapes; those waiting for a bcrypt check are bounded
//!   apart ([`auth::BCRYPT_QUEUE`]; one more gets 503 at once, counted). `/-/healthy` and
//!   `/-/ready` are exempt from both and from basic auth, so that probes keep saying what they
//!   say (they are small and show nothing of the cluster's settings).
//! - HTTP/1.1 only: Prometheus scrapes over HTTP/1.1, and so does everything else that asks.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Request, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::Router;
use hyper::service::Service as _;
use hyper_util::rt::TokioIo;
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{watch, Semaphore};
use tokio::time::Instant;

use super::auth::{self, Outcome, Verifier};
use super::limits::{Clocked, ConnClock, Connections, Expired, Limits, Registration};
use super::web_config::WebConfig;
use crate::metrics::HTTP;

const LOG: &str = "ceph_recovery_budget::http";

/// How the server runs.
#[derive(Debug, Clone)]
pub struct ServerOptions {
    pub limits: Limits,
    /// How often the web config file and the files it names are checked for a change.
    pub reload_every: Duration,
    /// How long open connections get to finish at shutdown.
    pub shutdown_grace: Duration,
}

impl Default for ServerOptions {
    fn default() -> Self {
        Self {
            limits: Limits::default(),
            reload_every: Duration::from_secs(5),
            shutdown_grace: Duration::from_secs(5),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    #[error("cannot read the listening socket's address: {0}")]
    Address(#[source] std::io::Error),
}

/// The web config in force: `None` without `--web.config.file`.
type Current = watch::Receiver<Option<Arc<WebConfig>>>;

/// Serves `app` on `listener` until `shutdown` turns true: TLS and basic auth as `web` says
/// (already loaded, so that a bad file stops the start), re-read from its file when it changes.
pub async fn serve(
    listener: TcpListener,
    app: Router,
    web: Option<WebConfig>,
    options: ServerOptions,
    mut shutdown: watch::Receiver<bool>,
) -> Result<(), ServerError> {
    let limits = options.limits;
    let (config_tx, current) = watch::channel(web.map(Arc::new));
    let reloader = tokio::spawn(reload(config_tx, options.reload_every, shutdown.clone()));
    let guard = Guard {
        current: current.clone(),
        verifier: Arc::new(Verifier::new()),
        requests: (limits.max_requests > 0).then(|| Arc::new(Semaphore::new(limits.max_requests))),
        max_requests: limits.max_requests,
    };
    let app = app.layer(axum::middleware::from_fn_with_state(guard, guard_request));
    let slots = Arc::new(Semaphore::new(limits.max_connections.max(1)));
    let connections = Connections::new();
    let local = listener.local_addr().map_err(ServerError::Address)?;
    loop {
        let accepted = tokio::select! {
            a = listener.accept() => a,
            _ = shutdown.wait_for(|s| *s) => break,
        };
        let (stream, peer) = match accepted {
            Ok(a) => a,
            Err(e) => {
                // Out of file descriptors, most likely: wait rather than spin.
                tracing::warn!(target: LOG, address = %local, error = %e, "cannot accept a connection");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        // A free slot, else the place of a connection that only waits; while every one is
        // serving a request, this one waits (and the next ones in the backlog).
        let permit = match Arc::clone(&slots).try_acquire_owned() {
            Ok(p) => p,
            Err(_) => {
                if connections.close_one_waiting(&limits) {
                    HTTP.closed_max_connections
                        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                }
                tokio::select! {
                    p = Arc::clone(&slots).acquire_owned() => match p {
                        Ok(p) => p,
                        Err(_) => break,
                    },
                    _ = shutdown.wait_for(|s| *s) => break,
                }
            }
        };
        let _ = stream.set_nodelay(true);
        let config = current.borrow().clone();
        let app = app.clone();
        let shutdown = shutdown.clone();
        let clock = Arc::new(ConnClock::new(Instant::now()));
        let registration = connections.register(Arc::clone(&clock));
        tokio::spawn(async move {
            connection(stream, clock, &registration, config, app, limits, shutdown).await;
            drop(registration);
            drop(permit);
            tracing::trace!(target: LOG, %peer, "connection closed");
        });
    }
    drop(listener);
    // Open connections finish their request (idle ones close at once), for a bounded time.
    let all = u32::try_from(limits.max_connections.max(1)).unwrap_or(u32::MAX);
    let _ = tokio::time::timeout(options.shutdown_grace, slots.acquire_many(all)).await;
    reloader.abort();
    Ok(())
}

/// One connection: the TLS handshake if the config asks for one, then HTTP/1.1 until the
/// client leaves, a timeout expires or the server shuts down.
async fn connection(
    stream: TcpStream,
    clock: Arc<ConnClock>,
    registration: &Registration,
    config: Option<Arc<WebConfig>>,
    app: Router,
    limits: Limits,
    mut shutdown: watch::Receiver<bool>,
) {
    let stream = Clocked::new(stream, Arc::clone(&clock));
    let io: Box<dyn Io> = match config.as_ref().and_then(|c| c.server_config()) {
        None => Box::new(stream),
        Some(tls) => {
            let deadline = clock.next_deadline(&limits).0;
            tokio::select! {
                r = tokio::time::timeout_at(deadline, handshake(stream, tls)) => match r {
                    Ok(Some(s)) => s,
                    Ok(None) => return,
                    Err(_) => {
                        HTTP.closed_header_timeout
                            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        return;
                    }
                },
                _ = registration.close.notified() => return,
            }
        }
    };
    let service = {
        let app = TowerToHyperService::new(app);
        let clock = Arc::clone(&clock);
        hyper::service::service_fn(move |req| {
            let guard = clock.request();
            let response = app.call(req);
            async move {
                let r = response.await;
                drop(guard);
                r
            }
        })
    };
    let conn = hyper::server::conn::http1::Builder::new()
        .keep_alive(true)
        .serve_connection(TokioIo::new(io), service);
    tokio::pin!(conn);
    let mut closing = false;
    loop {
        let (deadline, _) = clock.next_deadline(&limits);
        tokio::select! {
            r = conn.as_mut() => {
                if let Err(e) = r {
                    tracing::debug!(target: LOG, error = %e, "connection ended with an error");
                }
                return;
            }
            _ = tokio::time::sleep_until(deadline) => {
                match clock.expired(&limits, Instant::now()) {
                    Some(Expired::Header) => {
                        HTTP.closed_header_timeout.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        tracing::debug!(target: LOG, "closing a connection whose request headers did not arrive in time");
                        return;
                    }
                    Some(Expired::Idle) => {
                        HTTP.closed_idle_timeout.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        return;
                    }
                    None => {}
                }
            }
            // Its place is taken by a new connection (it is waiting, not serving).
            _ = registration.close.notified() => return,
            _ = shutdown.wait_for(|s| *s), if !closing => {
                // Finishes the request in flight, if any, then closes.
                conn.as_mut().graceful_shutdown();
                closing = true;
            }
        }
    }
}

trait Io: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Io for T {}

/// The reply to plain HTTP on the TLS port, as Go's servers (node_exporter's) give it.
const PLAIN_HTTP_ON_TLS: &[u8] = b"HTTP/1.0 400 Bad Request\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\nClient sent an HTTP request to an HTTPS server.\n";

/// The TLS handshake; `None` when it failed (said at debug: scanners cause plenty).
async fn handshake(
    stream: Clocked<TcpStream>,
    tls: Arc<rustls::ServerConfig>,
) -> Option<Box<dyn Io>> {
    // A TLS connection starts with a handshake record (0x16); anything else is most likely
    // plain HTTP sent to the TLS port: say so instead of an unreadable TLS alert.
    let mut first = [0u8; 1];
    match stream.get_ref().peek(&mut first).await {
        Ok(1) if first[0] != 0x16 => {
            HTTP.closed_tls_handshake
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let mut stream = stream;
            let _ = stream.write_all(PLAIN_HTTP_ON_TLS).await;
            let _ = stream.shutdown().await;
            return None;
        }
        Ok(1) => {}
        _ => return None,
    }
    match tokio_rustls::TlsAcceptor::from(tls).accept(stream).await {
        Ok(s) => Some(Box::new(s)),
        Err(e) => {
            HTTP.closed_tls_handshake
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            tracing::debug!(target: LOG, error = %e, "TLS handshake failed");
            None
        }
    }
}

/// What every request passes before the routes.
#[derive(Clone)]
struct Guard {
    current: Current,
    verifier: Arc<Verifier>,
    requests: Option<Arc<Semaphore>>,
    max_requests: usize,
}

/// Probes are answered whatever the load and without credentials.
fn is_probe(path: &str) -> bool {
    path == "/-/healthy" || path == "/-/ready"
}

/// Basic auth first, then a `--web.max-requests` slot: a request that has not proved its
/// credentials never holds a slot an authenticated scrape needs. Those waiting for bcrypt are
/// bounded apart ([`auth::BCRYPT_QUEUE`]).
async fn guard_request(State(g): State<Guard>, req: Request, next: Next) -> Response {
    if is_probe(req.uri().path()) {
        return next.run(req).await;
    }
    let config = g.current.borrow().clone();
    if let Some(c) = config.filter(|c| !c.users.is_empty()) {
        let header = req
            .headers()
            .get(header::AUTHORIZATION)
            .map(HeaderValue::as_bytes);
        match g.verifier.check(&c.users, header).await {
            Outcome::Good => {}
            Outcome::Bad => {
                HTTP.rejected_unauthorized
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                return (
                    StatusCode::UNAUTHORIZED,
                    [(header::WWW_AUTHENTICATE, auth::CHALLENGE)],
                    "Unauthorized\n",
                )
                    .into_response();
            }
            Outcome::Busy => {
                HTTP.rejected_auth_queue
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                return (
                    StatusCode::SERVICE_UNAVAILABLE,
                    [(header::RETRY_AFTER, "1")],
                    format!(
                        "{} requests are waiting for their password check already; try again\n",
                        auth::BCRYPT_QUEUE
                    ),
                )
                    .into_response();
            }
        }
    }
    let _permit = match &g.requests {
        None => None,
        Some(s) => match Arc::clone(s).try_acquire_owned() {
            Ok(p) => Some(p),
            Err(_) => {
                HTTP.rejected_max_requests
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                return (
                    StatusCode::SERVICE_UNAVAILABLE,
                    [(header::RETRY_AFTER, "1")],
                    format!(
                        "{} requests are in flight already (--web.max-requests); try again\n",
                        g.max_requests
                    ),
                )
                    .into_response();
            }
        },
    };
    next.run(req).await
}

/// The SHA-256 of the files a config was built from (a missing one hashes as missing).
fn fingerprint(files: &[PathBuf]) -> Vec<u8> {
    let mut ctx = ring::digest::Context::new(&ring::digest::SHA256);
    for f in files {
        match std::fs::read(f) {
            Ok(bytes) => {
                ctx.update(&(bytes.len() as u64).to_be_bytes());
                ctx.update(&bytes);
            }
            Err(e) => ctx.update(format!("unreadable: {}", e.kind()).as_bytes()),
        }
    }
    ctx.finish().as_ref().to_vec()
}

/// Every `every`, whether the web config file or a file it names changed (by content: an
/// mtime can stay the same across a quick rewrite, and a Kubernetes Secret update swaps a
/// symlink); a changed one is loaded and put in force, a bad one logged once and the one in
/// force kept. New connections and requests use the new one; open connections keep their TLS
/// session.
async fn reload(
    tx: watch::Sender<Option<Arc<WebConfig>>>,
    every: Duration,
    mut shutdown: watch::Receiver<bool>,
) {
    let Some(start) = tx.borrow().clone() else {
        return;
    };
    let path = start.path.clone();
    let mut files = start.files();
    let mut seen = fingerprint(&files);
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = shutdown.wait_for(|s| *s) => return,
        }
        // The files of the config in force, and the config file's own (it may name new ones).
        let now = fingerprint(&files);
        if now == seen {
            continue;
        }
        seen = now;
        let load_path = path.clone();
        let loaded = tokio::task::spawn_blocking(move || WebConfig::load(&load_path)).await;
        match loaded {
            Ok(Ok(config)) => {
                tracing::info!(target: LOG, file = %path.display(), config = %config.describe(), "web config reloaded");
                if config.tls.is_none() && tx.borrow().as_ref().is_some_and(|c| c.tls.is_some()) {
                    tracing::warn!(target: LOG, file = %path.display(), "the new web config has no tls_server_config: new connections are plain HTTP");
                }
                files = config.files();
                // What was hashed may predate the load by a moment: hash what was loaded.
                seen = fingerprint(&files);
                tx.send_replace(Some(Arc::new(config)));
            }
            Ok(Err(e)) => {
                tracing::error!(target: LOG, error = %e, "the changed web config is refused; the previous one stays in force");
                // Watch the files the new text names too: creating a missing certificate is
                // the fix, and must be noticed.
                if let Ok(parsed) = std::fs::read_to_string(&path)
                    .map_err(drop)
                    .and_then(|text| WebConfig::parse(&path, &text).map_err(drop))
                {
                    for f in parsed.files() {
                        if !files.contains(&f) {
                            files.push(f);
                        }
                    }
                    seen = fingerprint(&files);
                }
            }
            Err(e) => {
                tracing::error!(target: LOG, error = %e, "reloading the web config failed; the previous one stays in force");
            }
        }
    }
}
