//! What one client may hold of the exporter, like node_exporter's and Prometheus' own limits:
//! requests in flight (`--web.max-requests`), open connections (`--web.max-connections`), how
//! long a request's headers may take (`--web.read-header-timeout`) and how long a connection
//! may sit idle (`--web.idle-timeout`). Without them idle or slow connections use up file
//! descriptors, which the CLI backend needs to spawn `ceph` (an unpause included), and a
//! scrape flood shares the runtime's threads with the enforcer.
//!
//! The two timeouts are kept here, per connection ([`ConnClock`]), not by hyper: hyper's
//! `header_read_timeout` starts as soon as a keep-alive connection waits for its next request,
//! so it would also be the idle timeout, and a short one would make Prometheus reconnect (and
//! redo the TLS handshake) at every scrape. As in Go's `net/http`, the idle timeout runs while
//! a connection waits, and the header timeout from the first byte of a request (or from the
//! accept, for a new connection: its TLS handshake included).

use std::collections::HashMap;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::Notify;
use tokio::time::Instant;

/// The limits of the HTTP server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Requests in flight at once (health checks aside); 0: no limit.
    pub max_requests: usize,
    /// Open connections at once. One more is accepted and takes the place of the waiting
    /// connection nearest its timeout; while all are serving requests, the next ones wait in
    /// the listen backlog.
    pub max_connections: usize,
    /// From a request's first byte (a new connection: from its accept) to its last header.
    pub read_header_timeout: Duration,
    /// How long a connection may wait for its next request.
    pub idle_timeout: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_requests: 40,
            max_connections: 128,
            read_header_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(120),
        }
    }
}

/// Why a connection was closed by its clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expired {
    /// A request's headers (or the TLS handshake) took longer than the header timeout.
    Header,
    /// No request for the idle timeout.
    Idle,
}

const NONE: u64 = u64::MAX;

/// The times of one connection, in milliseconds since its accept: shared between its IO (bytes
/// seen), its service (requests started and finished) and the task that closes it.
#[derive(Debug)]
pub struct ConnClock {
    accepted: Instant,
    last_activity: AtomicU64,
    /// When the request being received started; `NONE` while waiting or serving.
    head_started: AtomicU64,
    in_flight: AtomicU32,
}

impl ConnClock {
    pub fn new(accepted: Instant) -> Self {
        Self {
            accepted,
            last_activity: AtomicU64::new(0),
            // A new connection owes its first request's headers (and its TLS handshake).
            head_started: AtomicU64::new(0),
            in_flight: AtomicU32::new(0),
        }
    }

    fn ms(&self, now: Instant) -> u64 {
        now.saturating_duration_since(self.accepted).as_millis() as u64
    }

    fn at(&self, ms: u64) -> Instant {
        self.accepted + Duration::from_millis(ms)
    }

    /// Bytes arrived: on a waiting connection, a request has begun.
    pub fn read(&self, now: Instant) {
        let t = self.ms(now);
        self.last_activity.store(t, Ordering::Relaxed);
        if self.in_flight.load(Ordering::Acquire) == 0 {
            let _ =
                self.head_started
                    .compare_exchange(NONE, t, Ordering::AcqRel, Ordering::Relaxed);
        }
    }

    /// Bytes went out (a slow reader of a big body is busy, not idle).
    pub fn wrote(&self, now: Instant) {
        self.last_activity.store(self.ms(now), Ordering::Relaxed);
    }

    /// A request's headers are in: it is being served until the guard is dropped.
    pub fn request(self: &Arc<Self>) -> RequestGuard {
        self.in_flight.fetch_add(1, Ordering::AcqRel);
        self.head_started.store(NONE, Ordering::Release);
        RequestGuard(Arc::clone(self))
    }

    /// When to look again, and what will have expired then if nothing happens meanwhile.
    pub fn next_deadline(&self, limits: &Limits) -> (Instant, Option<Expired>) {
        if self.in_flight.load(Ordering::Acquire) > 0 {
            // Serving: nothing to time here; look again later.
            let last = self.at(self.last_activity.load(Ordering::Relaxed));
            return (last.max(Instant::now()) + limits.idle_timeout, None);
        }
        match self.head_started.load(Ordering::Acquire) {
            NONE => (
                self.at(self.last_activity.load(Ordering::Relaxed)) + limits.idle_timeout,
                Some(Expired::Idle),
            ),
            started => (
                self.at(started) + limits.read_header_timeout,
                Some(Expired::Header),
            ),
        }
    }

    /// What has expired at `now`, if anything.
    pub fn expired(&self, limits: &Limits, now: Instant) -> Option<Expired> {
        let (deadline, what) = self.next_deadline(limits);
        (now >= deadline).then_some(what).flatten()
    }
}

/// The open connections, so that a new one can take the place of one that is only waiting
/// when all `max_connections` slots are taken. Without it, connections that never finish their
/// headers (or idle ones) would hold every slot until their timeout, and a scrape would wait
/// behind them in the backlog: 16 of them with 4 slots and a 1 s header timeout kept a scrape
/// waiting 3.9 s in the test; with it, the scrape is answered at once.
#[derive(Default)]
pub struct Connections {
    next: AtomicU64,
    live: Mutex<HashMap<u64, Live>>,
}

struct Live {
    clock: Arc<ConnClock>,
    close: Arc<Notify>,
    closing: AtomicBool,
}

/// A connection's place among the open ones; dropped when it ends.
pub struct Registration {
    id: u64,
    connections: Arc<Connections>,
    /// Notified when the connection must close to make room for a new one.
    pub close: Arc<Notify>,
}

impl Drop for Registration {
    fn drop(&mut self) {
        if let Ok(mut live) = self.connections.live.lock() {
            live.remove(&self.id);
        }
    }
}

impl Connections {
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    pub fn register(self: &Arc<Self>, clock: Arc<ConnClock>) -> Registration {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let close = Arc::new(Notify::new());
        if let Ok(mut live) = self.live.lock() {
            live.insert(
                id,
                Live {
                    clock,
                    close: Arc::clone(&close),
                    closing: AtomicBool::new(false),
                },
            );
        }
        Registration {
            id,
            connections: Arc::clone(self),
            close,
        }
    }

    /// Tells the waiting connection nearest to its own timeout (a slow request's headers
    /// before an idle keep-alive connection) to close; false when every one is serving a
    /// request (then the new connection waits for one to finish).
    pub fn close_one_waiting(&self, limits: &Limits) -> bool {
        let Ok(live) = self.live.lock() else {
            return false;
        };
        let victim = live
            .values()
            .filter(|l| !l.closing.load(Ordering::Relaxed))
            .filter(|l| l.clock.in_flight.load(Ordering::Acquire) == 0)
            .min_by_key(|l| l.clock.next_deadline(limits).0);
        match victim {
            Some(v) => {
                v.closing.store(true, Ordering::Relaxed);
                v.close.notify_one();
                true
            }
            None => false,
        }
    }
}

/// One request being served on a connection; the connection is idle again when dropped (also
/// when the request is abandoned half-way).
pub struct RequestGuard(Arc<ConnClock>);

impl Drop for RequestGuard {
    fn drop(&mut self) {
        self.0.wrote(Instant::now());
        self.0.in_flight.fetch_sub(1, Ordering::AcqRel);
    }
}

/// A connection's stream that tells its clock when bytes pass.
pub struct Clocked<T> {
    inner: T,
    clock: Arc<ConnClock>,
}

impl<T> Clocked<T> {
    pub fn new(inner: T, clock: Arc<ConnClock>) -> Self {
        Self { inner, clock }
    }

    pub fn get_ref(&self) -> &T {
        &self.inner
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for Clocked<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let r = Pin::new(&mut self.inner).poll_read(cx, buf);
        if matches!(r, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            self.clock.read(Instant::now());
        }
        r
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for Clocked<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        let r = Pin::new(&mut self.inner).poll_write(cx, data);
        if matches!(r, Poll::Ready(Ok(n)) if n > 0) {
            self.clock.wrote(Instant::now());
        }
        r
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let r = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        if matches!(r, Poll::Ready(Ok(n)) if n > 0) {
            self.clock.wrote(Instant::now());
        }
        r
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits() -> Limits {
        Limits {
            read_header_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(120),
            ..Limits::default()
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_new_connection_owes_its_headers_within_the_header_timeout() {
        let t0 = Instant::now();
        let c = ConnClock::new(t0);
        let l = limits();
        // A byte now and then does not keep a slow request alive (slowloris).
        c.read(t0 + Duration::from_secs(4));
        c.read(t0 + Duration::from_secs(8));
        assert_eq!(c.expired(&l, t0 + Duration::from_secs(9)), None);
        assert_eq!(
            c.expired(&l, t0 + Duration::from_secs(10)),
            Some(Expired::Header)
        );
    }

    #[tokio::test(start_paused = true)]
    async fn between_requests_the_idle_timeout_runs_then_the_header_timeout_from_the_first_byte() {
        let t0 = Instant::now();
        let c = Arc::new(ConnClock::new(t0));
        let l = limits();
        let guard = c.request();
        tokio::time::advance(Duration::from_secs(300)).await;
        assert_eq!(c.expired(&l, Instant::now()), None, "serving is never idle");
        drop(guard);
        let done = Instant::now();
        assert_eq!(c.expired(&l, done + Duration::from_secs(119)), None);
        assert_eq!(
            c.expired(&l, done + Duration::from_secs(120)),
            Some(Expired::Idle)
        );
        // The next request begins 60 s later: from then, its headers have 10 s.
        c.read(done + Duration::from_secs(60));
        assert_eq!(c.expired(&l, done + Duration::from_secs(69)), None);
        assert_eq!(
            c.expired(&l, done + Duration::from_secs(70)),
            Some(Expired::Header)
        );
    }
}

#[cfg(test)]
mod connections_tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn the_waiting_connection_nearest_its_timeout_makes_room_never_one_serving() {
        let limits = Limits::default();
        let conns = Connections::new();
        let t0 = Instant::now();
        // An idle keep-alive connection (a scraper between scrapes), one serving a request,
        // and one still sending its headers since t0 + 1 s.
        let idle = Arc::new(ConnClock::new(t0));
        let idle_guard = idle.request();
        drop(idle_guard);
        let serving = Arc::new(ConnClock::new(t0));
        let _busy = serving.request();
        let slow = Arc::new(ConnClock::new(t0 + Duration::from_secs(1)));
        let r_idle = conns.register(Arc::clone(&idle));
        let r_serving = conns.register(Arc::clone(&serving));
        let r_slow = conns.register(Arc::clone(&slow));
        assert!(conns.close_one_waiting(&limits));
        let told = |r: &Registration| {
            let n = r.close.notified();
            tokio::pin!(n);
            n.as_mut().enable()
        };
        assert!(told(&r_slow), "the slow one goes first");
        assert!(!told(&r_idle) && !told(&r_serving));
        assert!(conns.close_one_waiting(&limits));
        assert!(told(&r_idle), "then the idle one");
        assert!(!conns.close_one_waiting(&limits), "never the one serving");
        assert!(!told(&r_serving));
        drop((r_idle, r_slow, r_serving));
        assert!(conns.live.lock().unwrap().is_empty());
    }
}
