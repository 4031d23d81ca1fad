//! The lease as a task of its own, and the [`Link`] the enforcer holds to it.
//!
//! The task renews (or tries to take) the lock every retry period, whatever the enforcer is
//! doing: a slow Ceph command in the enforcer's cycle must not cost the lease, and a slow
//! renewal must not delay the end of a pause slice. The enforcer asks [`Link::acting`] before
//! every change (a local check against the renew deadline), writes its state through
//! [`Link::memory`] (fenced in the cluster by the lock itself), and reads the
//! [`LeaseEvent`]s to log them and to reload its state after each `Acquired`.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, oneshot, watch};
use tokio::time::Instant;

use super::{Acquire, Holder, Lease, LeaseConfig, LeaseError, LeaseEvent, LockStore, Renew};

pub use super::BoxFuture;

/// The state half of a [`LockStore`], object-safe so that the enforcer does not carry the
/// store's type.
pub trait Memory: Send + Sync {
    /// `pool/object`, for messages.
    fn location(&self) -> String;
    /// Replaces the state, refused by the cluster unless we hold the lock.
    fn write<'a>(&'a self, bytes: &'a [u8]) -> BoxFuture<'a, Result<(), LeaseError>>;
    /// The state last written; `None` if none ever was.
    fn read(&self) -> BoxFuture<'_, Result<Option<Vec<u8>>, LeaseError>>;
}

impl<S: LockStore> Memory for S {
    fn location(&self) -> String {
        LockStore::location(self)
    }
    fn write<'a>(&'a self, bytes: &'a [u8]) -> BoxFuture<'a, Result<(), LeaseError>> {
        Box::pin(self.write_state(bytes))
    }
    fn read(&self) -> BoxFuture<'_, Result<Option<Vec<u8>>, LeaseError>> {
        Box::pin(self.read_state())
    }
}

/// A store shared by the task (the lock) and the enforcer (the state).
impl<S: LockStore> LockStore for Arc<S> {
    fn instance(&self) -> &str {
        (**self).instance()
    }
    fn location(&self) -> String {
        (**self).location()
    }
    fn try_lock(
        &self,
        duration: Duration,
    ) -> impl Future<Output = Result<Acquire, LeaseError>> + Send {
        (**self).try_lock(duration)
    }
    fn renew(&self, duration: Duration) -> impl Future<Output = Result<Renew, LeaseError>> + Send {
        (**self).renew(duration)
    }
    fn unlock(&self) -> impl Future<Output = Result<(), LeaseError>> + Send {
        (**self).unlock()
    }
    fn holder(&self) -> impl Future<Output = Result<Option<Holder>, LeaseError>> + Send {
        (**self).holder()
    }
    fn write_state(&self, bytes: &[u8]) -> impl Future<Output = Result<(), LeaseError>> + Send {
        (**self).write_state(bytes)
    }
    fn read_state(&self) -> impl Future<Output = Result<Option<Vec<u8>>, LeaseError>> + Send {
        (**self).read_state()
    }
    fn claim(&self) -> impl Future<Output = Result<super::registry::Claim, LeaseError>> + Send {
        (**self).claim()
    }
}

/// What the task publishes after every call.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Status {
    /// Until when this instance may change the cluster; `None` in standby.
    pub acting_until: Option<Instant>,
    /// The other holder last seen (standby).
    pub holder: Option<Holder>,
    /// The last call's failure, if it failed (cleared by the next success).
    pub error: Option<String>,
    /// `permission_denied`, `timeout`, ...: the last failure's reason.
    pub error_reason: Option<&'static str>,
    /// How many times this instance took the lease: a new term means another instance may
    /// have led (and changed the stored state) in between.
    pub term: u64,
}

impl Status {
    pub fn acting(&self, now: Instant) -> bool {
        self.acting_until.is_some_and(|until| now < until)
    }
}

/// The enforcer's end of the lease task.
pub struct Link {
    instance: String,
    location: String,
    config: LeaseConfig,
    status: watch::Receiver<Status>,
    events: Option<mpsc::UnboundedReceiver<LeaseEvent>>,
    memory: Arc<dyn Memory>,
    release: Option<oneshot::Sender<oneshot::Sender<()>>>,
}

impl Link {
    /// This instance, as the lock names it.
    pub fn instance(&self) -> &str {
        &self.instance
    }

    /// `pool/object` of the lease and the state.
    pub fn location(&self) -> &str {
        &self.location
    }

    pub fn config(&self) -> &LeaseConfig {
        &self.config
    }

    /// Whether this instance may change the cluster now.
    pub fn acting(&self) -> bool {
        self.status.borrow().acting(Instant::now())
    }

    /// When the right to act ends unless renewed first.
    pub fn acting_until(&self) -> Option<Instant> {
        self.status.borrow().acting_until
    }

    /// The fence for commands that change the cluster: each reads anew when this instance's
    /// right to act ends.
    pub fn fence(&self) -> crate::ceph::Fence {
        let status = self.status.clone();
        crate::ceph::Fence::new(move || status.borrow().acting_until)
    }

    /// See [`Status::term`].
    pub fn term(&self) -> u64 {
        self.status.borrow().term
    }

    pub fn status(&self) -> Status {
        self.status.borrow().clone()
    }

    pub fn memory(&self) -> &dyn Memory {
        self.memory.as_ref()
    }

    /// The events, once: the loop owns the receiver.
    pub fn take_events(&mut self) -> Option<mpsc::UnboundedReceiver<LeaseEvent>> {
        self.events.take()
    }

    /// Releases the lease (after the enforcer handed everything back), waiting at most
    /// `within`; the lock expires by itself otherwise.
    pub async fn release(&mut self, within: Duration) {
        if let Some(tx) = self.release.take() {
            let (ack_tx, ack_rx) = oneshot::channel();
            if tx.send(ack_tx).is_ok() {
                let _ = tokio::time::timeout(within, ack_rx).await;
            }
        }
    }
}

/// Starts the lease task over `store`; it runs until [`Link::release`], or until the link is
/// dropped (then without releasing: the lock expires, as when the process dies).
pub fn spawn<S: LockStore>(store: S, config: LeaseConfig) -> Link {
    let store = Arc::new(store);
    let instance = store.instance().to_string();
    let location = LockStore::location(&store);
    let (status_tx, status_rx) = watch::channel(Status::default());
    let (events_tx, events_rx) = mpsc::unbounded_channel();
    let (release_tx, release_rx) = oneshot::channel();
    let memory: Arc<dyn Memory> = store.clone();
    tokio::spawn(run(
        Lease::new(store, config),
        status_tx,
        events_tx,
        release_rx,
    ));
    Link {
        instance,
        location,
        config,
        status: status_rx,
        events: Some(events_rx),
        memory,
        release: Some(release_tx),
    }
}

async fn run<S: LockStore>(
    mut lease: Lease<S>,
    status: watch::Sender<Status>,
    events: mpsc::UnboundedSender<LeaseEvent>,
    mut release: oneshot::Receiver<oneshot::Sender<()>>,
) {
    let retry = lease.elector().config().retry_period;
    let mut last_reason: Option<&'static str> = None;
    let mut term = 0;
    loop {
        let step = lease.step().await;
        term += step
            .events
            .iter()
            .filter(|e| matches!(e, LeaseEvent::Acquired { .. }))
            .count() as u64;
        publish(&lease, &status, step.error.as_ref(), term);
        // One line per kind of failure, not one every retry period.
        match &step.error {
            // Two leaders, one of them this instance if it did not hold back: an error.
            Some(e @ LeaseError::Elsewhere { .. }) if last_reason != Some(e.reason()) => {
                tracing::error!(target: "decision", error = %e, reason = e.reason(), "lease: {e}");
                last_reason = Some(e.reason());
            }
            Some(e) if last_reason != Some(e.reason()) => {
                tracing::warn!(target: "decision", error = %e, reason = e.reason(), "lease: {e}");
                last_reason = Some(e.reason());
            }
            Some(_) => {}
            None => last_reason = None,
        }
        if let Some(e) = &step.unchecked {
            tracing::error!(target: "decision", error = %e, reason = e.reason(), "lease: taken without checking that it is the cluster's one lease object ({e}); an instance given another --enforcer.lease-pool would lead too. Grant {} to check it", super::registry::CAPS);
        }
        for e in step.events {
            let _ = events.send(e);
        }
        tokio::select! {
            _ = tokio::time::sleep(retry) => {}
            ack = &mut release => {
                // The link dropped without asking (the enforcer is gone): stop renewing, and
                // let the lock expire, as after a crash.
                let Ok(ack) = ack else { return };
                let step = lease.release().await;
                publish(&lease, &status, step.error.as_ref(), term);
                for e in step.events {
                    let _ = events.send(e);
                }
                let _ = ack.send(());
                return;
            }
        }
    }
}

fn publish<S: LockStore>(
    lease: &Lease<S>,
    status: &watch::Sender<Status>,
    error: Option<&LeaseError>,
    term: u64,
) {
    let elector = lease.elector();
    status.send_replace(Status {
        acting_until: elector
            .acting_until()
            .filter(|_| elector.is_leader_now(Instant::now())),
        holder: elector.holder_seen().cloned(),
        error: error.map(ToString::to_string),
        error_reason: error.map(LeaseError::reason),
        term,
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lease::fake::FakeCluster;

    fn config() -> LeaseConfig {
        LeaseConfig::new(
            Duration::from_secs(6),
            Duration::from_secs(4),
            Duration::from_secs(1),
        )
        .expect("valid")
    }

    #[tokio::test(start_paused = true)]
    async fn one_of_two_links_acts_and_the_other_takes_over_after_a_release() {
        let cluster = FakeCluster::new();
        let mut a = spawn(cluster.instance("a"), config());
        tokio::time::sleep(Duration::from_millis(10)).await;
        let b = spawn(cluster.instance("b"), config());
        tokio::time::sleep(Duration::from_millis(10)).await;
        assert!(a.acting());
        assert!(!b.acting());
        assert_eq!(b.status().holder.map(|h| h.instance), Some("a".to_string()));
        // Only the holder's state writes are taken.
        a.memory().write(b"from a").await.expect("a holds the lock");
        assert!(b.memory().write(b"from b").await.is_err());
        a.release(Duration::from_secs(1)).await;
        assert!(!a.acting());
        tokio::time::sleep(Duration::from_secs(2)).await;
        assert!(b.acting(), "b takes the released lease at its next try");
        assert_eq!(
            b.memory().read().await.expect("read").as_deref(),
            Some(&b"from a"[..])
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_leader_that_cannot_renew_stops_acting_at_the_renew_deadline() {
        let cluster = FakeCluster::new();
        let store = cluster.instance("a");
        let a = spawn(store.clone(), config());
        tokio::time::sleep(Duration::from_millis(10)).await;
        assert!(a.acting());
        store.set_partitioned(true);
        tokio::time::sleep(Duration::from_millis(3900)).await;
        assert!(a.acting(), "still within the renew deadline");
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert!(
            !a.acting(),
            "past the renew deadline, before the lock expires"
        );
    }
}
