//! An in-memory [`LockStore`] with the semantics of `cls_lock` as the lease uses it: one
//! exclusive lock whose expiry is set by the store's clock (tokio's, so tests pause it) when it
//! receives a call, renewable only by the instance holding it, and a state blob whose write
//! checks the lock in the same step. A partition makes an instance's calls hang, as a lost
//! network does.

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::Instant;

use super::registry::{self, Claim, Registration, Registry};
use super::task::BoxFuture;
use super::{Acquire, Holder, LeaseError, LockStore, Renew};

const POOL: &str = "fake";
const OBJECT: &str = "ceph-recovery-budget.lease";

#[derive(Debug, Default)]
struct Cluster {
    lock: Option<(Holder, Instant)>,
    state: Option<Vec<u8>>,
    writes: u32,
}

impl Cluster {
    /// The holder, if its lock has not expired at `now` (expired ones are dropped, as
    /// `cls_lock` trims them on every read).
    fn holder(&mut self, now: Instant) -> Option<Holder> {
        if matches!(&self.lock, Some((_, expiry)) if *expiry <= now) {
            self.lock = None;
        }
        self.lock.as_ref().map(|(h, _)| h.clone())
    }
}

/// The shared "cluster": one lease object (in pool `fake`, or [`FakeCluster::pool`]'s) and the
/// monitors' `config-key` store; [`FakeCluster::instance`] makes one client instance of it.
#[derive(Debug, Clone)]
pub struct FakeCluster {
    inner: Arc<Mutex<Cluster>>,
    clients: Arc<AtomicU32>,
    pool: String,
    config_key: Arc<Mutex<Option<String>>>,
    /// While set, the `config-key` store refuses (EACCES: a user without the grant).
    refuse_registry: Arc<AtomicBool>,
}

impl Default for FakeCluster {
    fn default() -> Self {
        FakeCluster {
            inner: Arc::default(),
            clients: Arc::default(),
            pool: POOL.to_string(),
            config_key: Arc::default(),
            refuse_registry: Arc::default(),
        }
    }
}

impl FakeCluster {
    pub fn new() -> Self {
        Self::default()
    }

    /// The lease object of the same name in pool `pool` of this cluster: another lock and
    /// state, the same monitors (what an instance given another `--enforcer.lease-pool` uses).
    pub fn pool(&self, pool: &str) -> FakeCluster {
        FakeCluster {
            inner: Arc::default(),
            pool: pool.to_string(),
            ..self.clone()
        }
    }

    /// What `ceph config-key get` of the lease registration answers.
    pub fn registered(&self) -> Option<String> {
        self.config_key
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// While set, reading and writing the registration are refused (EACCES).
    pub fn set_refuse_registry(&self, refuse: bool) {
        self.refuse_registry.store(refuse, Ordering::SeqCst);
    }

    fn location(&self) -> String {
        format!("{}/{OBJECT}", self.pool)
    }

    /// A new client instance named `name` (its cookie); each gets its own client id.
    pub fn instance(&self, name: &str) -> FakeLockStore {
        let id = self.clients.fetch_add(1, Ordering::Relaxed) + 4100;
        FakeLockStore {
            cluster: self.clone(),
            me: Holder {
                instance: name.to_string(),
                client: format!("client.{id}"),
            },
            partitioned: Arc::new(AtomicBool::new(false)),
            refuse_writes: Arc::new(AtomicBool::new(false)),
        }
    }

    fn with<T>(&self, f: impl FnOnce(&mut Cluster) -> T) -> T {
        // Plain data behind the lock: still usable after a panic elsewhere.
        f(&mut self.inner.lock().unwrap_or_else(|e| e.into_inner()))
    }

    /// The holder now, as seen from the cluster.
    pub fn holder(&self) -> Option<Holder> {
        self.with(|c| c.holder(Instant::now()))
    }

    /// The lock passes to another instance named `name` for an hour, whoever held it: what a
    /// holder sees when its lock expired on the OSD's clock and a standby took it. The former
    /// holder's next renewal is refused.
    pub fn hand_to(&self, name: &str) {
        let taker = Holder {
            instance: name.to_string(),
            client: "client.9999".to_string(),
        };
        let until = Instant::now() + Duration::from_secs(3600);
        self.with(|c| c.lock = Some((taker, until)));
    }

    /// How many state writes succeeded.
    pub fn writes(&self) -> u32 {
        self.with(|c| c.writes)
    }
}

/// One instance's view of a [`FakeCluster`]. Clones share the partition switch.
#[derive(Debug, Clone)]
pub struct FakeLockStore {
    cluster: FakeCluster,
    me: Holder,
    partitioned: Arc<AtomicBool>,
    refuse_writes: Arc<AtomicBool>,
}

impl FakeLockStore {
    /// While set, state writes fail (a full or read-only pool), the lock still works.
    pub fn set_refuse_writes(&self, refuse: bool) {
        self.refuse_writes.store(refuse, Ordering::SeqCst);
    }

    pub fn me(&self) -> &Holder {
        &self.me
    }

    /// While partitioned, every call hangs (the caller's timeout ends it).
    pub fn set_partitioned(&self, partitioned: bool) {
        self.partitioned.store(partitioned, Ordering::SeqCst);
    }

    async fn reach(&self) {
        if self.partitioned.load(Ordering::SeqCst) {
            std::future::pending::<()>().await;
        }
    }
}

impl LockStore for FakeLockStore {
    fn instance(&self) -> &str {
        &self.me.instance
    }

    fn location(&self) -> String {
        self.cluster.location()
    }

    async fn try_lock(&self, duration: Duration) -> Result<Acquire, LeaseError> {
        self.reach().await;
        let now = Instant::now();
        Ok(self.cluster.with(|c| match c.holder(now) {
            Some(h) if h != self.me => Acquire::Held { by: Some(h) },
            _ => {
                c.lock = Some((self.me.clone(), now + duration));
                Acquire::Acquired
            }
        }))
    }

    async fn renew(&self, duration: Duration) -> Result<Renew, LeaseError> {
        self.reach().await;
        let now = Instant::now();
        Ok(self.cluster.with(|c| match c.holder(now) {
            Some(h) if h == self.me => {
                c.lock = Some((h, now + duration));
                Renew::Renewed
            }
            other => Renew::Lost { by: other },
        }))
    }

    async fn unlock(&self) -> Result<(), LeaseError> {
        self.reach().await;
        let now = Instant::now();
        self.cluster.with(|c| {
            if c.holder(now).as_ref() == Some(&self.me) {
                c.lock = None;
            }
        });
        Ok(())
    }

    async fn holder(&self) -> Result<Option<Holder>, LeaseError> {
        self.reach().await;
        Ok(self.cluster.with(|c| c.holder(Instant::now())))
    }

    async fn write_state(&self, bytes: &[u8]) -> Result<(), LeaseError> {
        self.reach().await;
        if self.refuse_writes.load(Ordering::SeqCst) {
            return Err(LeaseError::Failed {
                op: "writing the enforcer state",
                object: self.cluster.location(),
                detail: "refused by the test (ENOSPC)".to_string(),
            });
        }
        let now = Instant::now();
        self.cluster.with(|c| {
            if c.holder(now).as_ref() != Some(&self.me) {
                return Err(LeaseError::NotHolder {
                    op: "writing the enforcer state",
                    instance: self.me.instance.clone(),
                    object: self.cluster.location(),
                });
            }
            c.state = Some(bytes.to_vec());
            c.writes += 1;
            Ok(())
        })
    }

    async fn read_state(&self) -> Result<Option<Vec<u8>>, LeaseError> {
        self.reach().await;
        Ok(self.cluster.with(|c| c.state.clone()))
    }

    async fn claim(&self) -> Result<Claim, LeaseError> {
        let ours = Registration {
            pool_id: None,
            pool: self.cluster.pool.clone(),
            object: OBJECT.to_string(),
        };
        registry::claim(&self.cluster, &ours).await
    }
}

/// The monitors' `config-key` store, as the registry uses it.
impl Registry for FakeCluster {
    fn get(&self) -> BoxFuture<'_, Result<Option<String>, LeaseError>> {
        let refused = self.registry_refusal("reading the lease registration");
        let value = self.registered();
        Box::pin(async move { refused.map_or(Ok(value), Err) })
    }

    fn set<'a>(&'a self, value: &'a str) -> BoxFuture<'a, Result<(), LeaseError>> {
        let refused = self.registry_refusal("registering the lease");
        if refused.is_none() {
            *self.config_key.lock().unwrap_or_else(|e| e.into_inner()) = Some(value.to_string());
        }
        Box::pin(async move { refused.map_or(Ok(()), Err) })
    }
}

impl FakeCluster {
    fn registry_refusal(&self, op: &'static str) -> Option<LeaseError> {
        self.refuse_registry
            .load(Ordering::SeqCst)
            .then(|| LeaseError::PermissionDenied {
                op,
                object: format!("config-key {}", registry::KEY),
                errno: "EACCES".into(),
                caps: registry::CAPS.into(),
            })
    }
}
