//! One active enforcer per cluster: a lease held in the cluster itself, and the enforcer's
//! memory stored next to it, written only while the lease is held (issue 12, points 1 and 2).
//!
//! The rules are client-go's leader election (`leaderelection.go`):
//! - a **lease duration**: how long the lock lives in the cluster after the holder last took or
//!   renewed it; a standby can take it only once it expired (or was released);
//! - a **renew deadline**, shorter: a leader that has not renewed for that long stops acting,
//!   *before* the lock can expire and another instance take over;
//! - a **retry period**: how often a leader renews and a standby tries to take the lock.
//!
//! One difference, for safety: the renew deadline is counted from the moment the last successful
//! request was *sent*, not from when its answer came. The cluster set the lock's expiry at the
//! earliest when it received that request, so it cannot expire before `sent + lease_duration`,
//! and the leader stops at `sent + renew_deadline`: the gap between the two
//! (`lease_duration - renew_deadline`) is what covers a change still in flight and the skew of
//! the OSD clock that judges expiry (see `rados`).
//!
//! Layers, so that the logic is tested without a cluster:
//! - [`LockStore`]: the lock and the state object, as the cluster offers them; [`fake`] is an
//!   in-memory one with expiry by (tokio's) time, `rados` (feature `librados`) the real one;
//! - [`Elector`]: pure; given each call's outcome and `now`, whether this instance may act
//!   ([`Elector::is_leader_now`]) and the events to log ([`LeaseEvent`]);
//! - [`Lease`]: one step of the loop (tick, renew or try, observe) over a store under the
//!   deadlines, and the state calls, refused unless leading.
//!
//! - [`task`]: the lease as a task of its own (a step every retry period), and the [`task::Link`]
//!   the enforcer holds: it checks [`task::Link::acting`] before each change, writes its state
//!   through [`task::Link::memory`] before each change, and reloads it after every
//!   [`LeaseEvent::Acquired`].

pub mod fake;
#[cfg(feature = "librados")]
pub mod rados;
pub mod registry;
pub mod task;

use std::fmt;
use std::future::Future;
use std::time::Duration;

/// A boxed future, for the object-safe traits of the lease (its state half, the registry).
pub type BoxFuture<'a, T> = std::pin::Pin<Box<dyn std::future::Future<Output = T> + Send + 'a>>;

use tokio::time::Instant;

// ------------------------------------------------------------------------------------------
// Settings
// ------------------------------------------------------------------------------------------

/// The three durations of the election. Build with [`LeaseConfig::new`], which validates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeaseConfig {
    pub lease_duration: Duration,
    pub renew_deadline: Duration,
    pub retry_period: Duration,
}

impl LeaseConfig {
    /// 40 s / 25 s / 5 s: a standby takes over within 45 s of a leader's death; a leader gets
    /// five attempts to renew before it stops; the 15 s between stopping and a possible
    /// takeover cover a change still in flight (bounded by the Ceph call timeout, 10 s by
    /// default) and [`LeaseConfig::COMMAND_MARGIN`] (checked by
    /// [`LeaseConfig::check_command_timeout`]). client-go uses 15/10/2 s for a kube-apiserver
    /// that answers in milliseconds; a Ceph call may take seconds when the cluster is busy.
    pub const DEFAULT: LeaseConfig = LeaseConfig {
        lease_duration: Duration::from_secs(40),
        renew_deadline: Duration::from_secs(25),
        retry_period: Duration::from_secs(5),
    };

    /// Kept free besides the Ceph command timeout, both between a leader's stop and a possible
    /// takeover and in a cycle's share of the renew deadline: the OSD clock's skew against
    /// ours, and a monitor committing a command whose client stopped waiting (a proposal goes
    /// out every `paxos_propose_interval`, 1 s).
    pub const COMMAND_MARGIN: Duration = Duration::from_secs(2);

    /// A command sent just before this instance stops acting is answered (or given up) at most
    /// `timeout` later: the lock must outlive it, or the next leader could act while it lands.
    /// The error names the flags and the values that would do.
    pub fn check_command_timeout(&self, timeout: Duration) -> Result<(), LeaseConfigError> {
        let fmt = |d: Duration| humantime::format_duration(d).to_string();
        let gap = self.lease_duration.saturating_sub(self.renew_deadline);
        let needed = timeout + Self::COMMAND_MARGIN;
        if gap >= needed {
            return Ok(());
        }
        let short = needed - gap;
        let mut fixes = vec![format!(
            "--enforcer.lease-duration {} (a standby then takes over that much later after a crash)",
            fmt(self.lease_duration + short)
        )];
        if let Some(renew) = self
            .renew_deadline
            .checked_sub(short)
            .filter(|r| *r > self.retry_period)
        {
            fixes.push(format!(
                "--enforcer.lease-renew-deadline {} (a leader that cannot renew stops sooner)",
                fmt(renew)
            ));
        }
        if let Some(t) = gap
            .checked_sub(Self::COMMAND_MARGIN)
            .filter(|t| !t.is_zero())
        {
            fixes.push(format!(
                "--ceph-timeout {} (each Ceph command gets less time)",
                fmt(t)
            ));
        }
        Err(LeaseConfigError(format!(
            "the lease duration ({}) minus the renew deadline ({}) leaves {} between a leader's stop and a possible takeover, less than the Ceph command timeout ({}) plus a {} margin: a command sent just before the leader stops could still change the cluster after another instance took over. Give {} (file keys enforcer.lease_duration, enforcer.lease_renew_deadline, ceph.timeout)",
            fmt(self.lease_duration),
            fmt(self.renew_deadline),
            fmt(gap),
            fmt(timeout),
            fmt(Self::COMMAND_MARGIN),
            fixes.join(", or ")
        )))
    }

    /// How many rounds of Ceph commands fit in a renew deadline (less the margin) when each
    /// round takes at most `timeout` (the commands of a round are sent together): at least
    /// one, or nothing could ever be done. A cycle's changes are bounded by it, so that a cycle
    /// ends within the time a leader may act without renewing.
    pub fn command_rounds(&self, timeout: Duration) -> usize {
        let room = self.renew_deadline.saturating_sub(Self::COMMAND_MARGIN);
        if timeout.is_zero() {
            return 1;
        }
        usize::try_from(room.as_nanos() / timeout.as_nanos())
            .unwrap_or(usize::MAX)
            .max(1)
    }

    pub fn new(
        lease_duration: Duration,
        renew_deadline: Duration,
        retry_period: Duration,
    ) -> Result<Self, LeaseConfigError> {
        let config = LeaseConfig {
            lease_duration,
            renew_deadline,
            retry_period,
        };
        config.validate()?;
        Ok(config)
    }

    /// The orderings that make the lease safe, with the change to make when one fails.
    pub fn validate(&self) -> Result<(), LeaseConfigError> {
        let fmt = |d: Duration| humantime::format_duration(d).to_string();
        if self.retry_period.is_zero() {
            return Err(LeaseConfigError(
                "the lease retry period is 0: give it a positive duration (e.g. 5s)".into(),
            ));
        }
        if self.renew_deadline >= self.lease_duration {
            return Err(LeaseConfigError(format!(
                "the lease renew deadline ({}) must be shorter than the lease duration ({}), so that a leader that cannot renew stops acting before another instance can take over: lower the renew deadline or raise the lease duration",
                fmt(self.renew_deadline),
                fmt(self.lease_duration)
            )));
        }
        if self.retry_period >= self.renew_deadline {
            return Err(LeaseConfigError(format!(
                "the lease retry period ({}) must be shorter than the renew deadline ({}), so that a leader gets more than one attempt to renew before it must stop: lower the retry period or raise the renew deadline",
                fmt(self.retry_period),
                fmt(self.renew_deadline)
            )));
        }
        Ok(())
    }
}

impl Default for LeaseConfig {
    fn default() -> Self {
        Self::DEFAULT
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct LeaseConfigError(pub String);

// ------------------------------------------------------------------------------------------
// The store
// ------------------------------------------------------------------------------------------

/// Who holds the lock, as the cluster names it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Holder {
    /// The instance: the lock's cookie, unique per process, naming its host and pid.
    pub instance: String,
    /// The Ceph client that took the lock (`client.4123`), as `rados lock info` shows it. A
    /// reconnected instance is a new client, which cannot renew its former lock.
    pub client: String,
}

impl fmt::Display for Holder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.instance, self.client)
    }
}

/// The answer to [`LockStore::try_lock`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Acquire {
    /// We hold it now (it was free, expired, or already ours: then renewed).
    Acquired,
    /// Someone else holds it; `None` when it expired between the refusal and the look-up.
    Held { by: Option<Holder> },
}

/// The answer to [`LockStore::renew`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Renew {
    Renewed,
    /// It is no longer ours (expired, taken, or we are a new client since); who holds it now.
    Lost {
        by: Option<Holder>,
    },
}

#[derive(Debug, thiserror::Error)]
pub enum LeaseError {
    /// The fenced write found that we do not hold the lock (expired, or taken over).
    #[error("{op} refused: this instance ({instance}) does not hold the lease on {object} (it expired or another instance took it)")]
    NotHolder {
        op: &'static str,
        instance: String,
        object: String,
    },
    /// Refused locally: [`Lease`] writes nothing unless it leads.
    #[error("{op} not attempted: this instance ({instance}) is not the leader (standby, or past its renew deadline)")]
    NotLeader { op: &'static str, instance: String },
    #[error("{op} on {object}: no answer within {} (cluster unreachable or overloaded?)", humantime::format_duration(*timeout))]
    Timeout {
        op: &'static str,
        object: String,
        timeout: Duration,
    },
    /// EACCES/EPERM: the cephx user lacks the caps for the lease; retrying will not help.
    #[error("{op} on {object} was refused with {errno}: the cephx user lacks the caps the lease needs; grant `{caps}` (ceph auth caps ...)")]
    PermissionDenied {
        op: &'static str,
        object: String,
        errno: String,
        caps: String,
    },
    #[error("the lease pool {pool} does not exist: {hint}")]
    NoPool { pool: String, hint: String },
    #[error("{op} on {object}: the state stored there is {size} bytes, over the {cap} bytes read at most; is something else writing to this object?")]
    TooLarge {
        op: &'static str,
        object: String,
        size: u64,
        cap: u64,
    },
    #[error("{op} on {object} failed: {detail}")]
    Failed {
        op: &'static str,
        object: String,
        detail: String,
    },
    #[error("lease: {message}")]
    Connect { message: String },
    /// Another lease object is registered for the cluster ([`registry`]): an instance with
    /// another `--enforcer.lease-pool` may lead there.
    #[error("this instance's lease object is {ours}, but the cluster's is registered as {registered} (ceph config-key get {key}): an instance given another --enforcer.lease-pool would lead too, so this one stays standby. Give every instance the same --enforcer.lease-pool; to move the lease on purpose, stop every instance (SIGTERM), then `ceph config-key rm {key}`", key = registry::KEY)]
    Elsewhere { ours: String, registered: String },
}

impl LeaseError {
    /// Short, bounded label value for a metric, as `CephError::reason`.
    pub fn reason(&self) -> &'static str {
        match self {
            LeaseError::NotHolder { .. } => "not_holder",
            LeaseError::NotLeader { .. } => "not_leader",
            LeaseError::Timeout { .. } => "timeout",
            LeaseError::PermissionDenied { .. } => "permission_denied",
            LeaseError::NoPool { .. } => "no_pool",
            LeaseError::TooLarge { .. } => "too_large",
            LeaseError::Failed { .. } => "failed",
            LeaseError::Connect { .. } => "connect",
            LeaseError::Elsewhere { .. } => "elsewhere",
        }
    }
}

/// An exclusive lock with an expiry, held by one instance, and one state blob next to it.
/// Expiry is judged by the store (the cluster), never by the caller's clock.
pub trait LockStore: Send + Sync + 'static {
    /// This instance as [`Holder::instance`] will name it.
    fn instance(&self) -> &str;
    /// Where the lock lives, for messages (`pool/object`).
    fn location(&self) -> String;
    /// Takes the lock for `duration` if it is free or expired; renews it if it is already ours.
    fn try_lock(
        &self,
        duration: Duration,
    ) -> impl Future<Output = Result<Acquire, LeaseError>> + Send;
    /// Extends our lock by `duration` from now; never takes a lock that is not ours any more.
    fn renew(&self, duration: Duration) -> impl Future<Output = Result<Renew, LeaseError>> + Send;
    /// Releases our lock at once; not holding it is not an error.
    fn unlock(&self) -> impl Future<Output = Result<(), LeaseError>> + Send;
    /// The current (unexpired) holder.
    fn holder(&self) -> impl Future<Output = Result<Option<Holder>, LeaseError>> + Send;
    /// Replaces the state, in one atomic operation with the check that we hold the lock:
    /// [`LeaseError::NotHolder`] otherwise, and nothing written.
    fn write_state(&self, bytes: &[u8]) -> impl Future<Output = Result<(), LeaseError>> + Send;
    /// The state last written; `None` if none was ever written.
    fn read_state(&self) -> impl Future<Output = Result<Option<Vec<u8>>, LeaseError>> + Send;
    /// Registers this lease object as the cluster's ([`registry`]) when none is, and says
    /// whether the registered one is this one. Asked when the lock was just taken.
    fn claim(&self) -> impl Future<Output = Result<registry::Claim, LeaseError>> + Send;
}

// ------------------------------------------------------------------------------------------
// The election, pure
// ------------------------------------------------------------------------------------------

/// Why a leader stopped leading.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LostReason {
    /// No successful renewal for the renew deadline; `error` is the last failure seen.
    RenewDeadline {
        since_renew: Duration,
        error: Option<String>,
    },
    /// The store refused the renewal: the lock was not ours any more.
    Refused,
    /// We released it; `error` if the release failed (the lock then expires by itself).
    Released { error: Option<String> },
}

impl fmt::Display for LostReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LostReason::RenewDeadline { since_renew, error } => {
                write!(
                    f,
                    "not renewed for {} (renew deadline passed), stopped acting before the lock can expire",
                    crate::units::fmt_secs(since_renew.as_secs_f64())
                )?;
                if let Some(e) = error {
                    write!(f, "; last error: {e}")?;
                }
                Ok(())
            }
            LostReason::Refused => write!(
                f,
                "the cluster refused the renewal (the lock expired or another instance holds it)"
            ),
            LostReason::Released { error: None } => write!(f, "released"),
            LostReason::Released { error: Some(e) } => {
                write!(f, "release failed ({e}), the lock expires by itself")
            }
        }
    }
}

/// Changes of role and holder, one decision-log line each, naming both holders.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LeaseEvent {
    /// We lead from now on; `previous` is the last other holder we saw (`None`: none seen).
    /// The state must be read again from the store: the previous leader may have changed it.
    Acquired {
        me: String,
        previous: Option<Holder>,
    },
    /// We stopped leading; `to` is the holder the store named, if it named one.
    Lost {
        me: String,
        to: Option<Holder>,
        reason: LostReason,
    },
    /// We are standby and the holder we see changed (or this is the first look).
    Standby { me: String, holder: Option<Holder> },
}

impl fmt::Display for LeaseEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let or = |h: &Option<Holder>, none: &'static str| {
            h.as_ref().map_or(none.to_string(), ToString::to_string)
        };
        match self {
            LeaseEvent::Acquired { me, previous } => write!(
                f,
                "lease acquired by {me}, previous holder {}",
                or(previous, "none seen")
            ),
            LeaseEvent::Lost { me, to, reason } => write!(
                f,
                "lease lost by {me}, now held by {}: {reason}",
                or(to, "nobody yet")
            ),
            LeaseEvent::Standby { me, holder } => write!(
                f,
                "standby: {me} does not hold the lease, held by {}",
                or(holder, "nobody (free, or not known)")
            ),
        }
    }
}

/// What the next call to the store is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    TryLock,
    Renew,
}

/// A call's outcome, as [`Elector::observe`] takes it.
#[derive(Debug)]
pub enum Outcome<'a> {
    TryLock(&'a Result<Acquire, LeaseError>),
    Renew(&'a Result<Renew, LeaseError>),
    Unlock(&'a Result<(), LeaseError>),
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Role {
    Standby {
        /// The holder last seen, and whether a Standby event reported it.
        seen: Option<Holder>,
        reported: bool,
        /// The last holder known by name: what a takeover names as the previous holder. A
        /// look that found the lock held by nobody known (it expired between the refused take
        /// and `lock info`: seen on the lab one retry before the takeover) does not forget it.
        last_known: Option<Holder>,
    },
    Leader {
        /// When the last successful take or renew was sent.
        renewed_at: Instant,
        last_error: Option<String>,
    },
}

/// The election for one instance: pure, time passed in.
#[derive(Debug, Clone)]
pub struct Elector {
    config: LeaseConfig,
    me: String,
    role: Role,
}

impl Elector {
    pub fn new(config: LeaseConfig, me: impl Into<String>) -> Self {
        Self {
            config,
            me: me.into(),
            role: Role::Standby {
                seen: None,
                reported: false,
                last_known: None,
            },
        }
    }

    pub fn config(&self) -> &LeaseConfig {
        &self.config
    }

    /// Whether this instance may change the cluster at `now`: it holds the lease and its last
    /// successful renewal was sent less than the renew deadline ago.
    pub fn is_leader_now(&self, now: Instant) -> bool {
        match &self.role {
            Role::Leader { renewed_at, .. } => {
                now.saturating_duration_since(*renewed_at) < self.config.renew_deadline
            }
            Role::Standby { .. } => false,
        }
    }

    /// The instant this instance must stop acting unless it renews first; `None` in standby.
    pub fn acting_until(&self) -> Option<Instant> {
        match &self.role {
            Role::Leader { renewed_at, .. } => Some(*renewed_at + self.config.renew_deadline),
            Role::Standby { .. } => None,
        }
    }

    /// The other holder last seen in standby.
    pub fn holder_seen(&self) -> Option<&Holder> {
        match &self.role {
            Role::Standby { seen, .. } => seen.as_ref(),
            Role::Leader { .. } => None,
        }
    }

    pub fn next_op(&self) -> Op {
        match self.role {
            Role::Leader { .. } => Op::Renew,
            Role::Standby { .. } => Op::TryLock,
        }
    }

    /// Time passing: a leader past its renew deadline steps down.
    pub fn tick(&mut self, now: Instant) -> Option<LeaseEvent> {
        if let Role::Leader {
            renewed_at,
            last_error,
        } = &self.role
        {
            if !self.is_leader_now(now) {
                let reason = LostReason::RenewDeadline {
                    since_renew: now.saturating_duration_since(*renewed_at),
                    error: last_error.clone(),
                };
                return Some(self.step_down(None, reason));
            }
        }
        None
    }

    fn step_down(&mut self, to: Option<Holder>, reason: LostReason) -> LeaseEvent {
        self.role = Role::Standby {
            seen: to.clone(),
            reported: true,
            last_known: to.clone(),
        };
        LeaseEvent::Lost {
            me: self.me.clone(),
            to,
            reason,
        }
    }

    /// The outcome of a call sent at `sent_at`, observed at `now`.
    pub fn observe(
        &mut self,
        sent_at: Instant,
        outcome: Outcome<'_>,
        now: Instant,
    ) -> Vec<LeaseEvent> {
        // A leader's failure is noted first, so that stepping down at the deadline names it.
        if let (
            Outcome::TryLock(Err(e)) | Outcome::Renew(Err(e)),
            Role::Leader { last_error, .. },
        ) = (&outcome, &mut self.role)
        {
            *last_error = Some(e.to_string());
        }
        let mut events: Vec<LeaseEvent> = self.tick(now).into_iter().collect();
        let me = self.me.clone();
        match outcome {
            // Ours from `sent_at` on (the cluster set the expiry after it received the call);
            // an answer that came after that call's renew deadline is of no use.
            Outcome::TryLock(Ok(Acquire::Acquired)) | Outcome::Renew(Ok(Renew::Renewed)) => {
                if now.saturating_duration_since(sent_at) >= self.config.renew_deadline {
                    return events;
                }
                match &mut self.role {
                    Role::Leader {
                        renewed_at,
                        last_error,
                    } => {
                        *renewed_at = (*renewed_at).max(sent_at);
                        *last_error = None;
                    }
                    Role::Standby { last_known, .. } => {
                        let previous = last_known.take();
                        self.role = Role::Leader {
                            renewed_at: sent_at,
                            last_error: None,
                        };
                        events.push(LeaseEvent::Acquired { me, previous });
                    }
                }
            }
            Outcome::TryLock(Ok(Acquire::Held { by })) | Outcome::Renew(Ok(Renew::Lost { by })) => {
                match &mut self.role {
                    Role::Leader { .. } => {
                        events.push(self.step_down(by.clone(), LostReason::Refused));
                    }
                    Role::Standby {
                        seen,
                        reported,
                        last_known,
                    } => {
                        if by.is_some() {
                            last_known.clone_from(by);
                        }
                        if !*reported || seen != by {
                            *seen = by.clone();
                            *reported = true;
                            events.push(LeaseEvent::Standby {
                                me,
                                holder: by.clone(),
                            });
                        }
                    }
                }
            }
            // A leader leads on until its renew deadline ([`Elector::tick`]); a standby stays one.
            Outcome::TryLock(Err(_)) | Outcome::Renew(Err(_)) => {}
            Outcome::Unlock(result) => {
                if matches!(self.role, Role::Leader { .. }) {
                    // Stop acting even if the release failed: the lock expires by itself.
                    let reason = LostReason::Released {
                        error: result.as_ref().err().map(ToString::to_string),
                    };
                    events.push(self.step_down(None, reason));
                }
            }
        }
        events
    }
}

// ------------------------------------------------------------------------------------------
// The loop's step, over a store
// ------------------------------------------------------------------------------------------

/// What one [`Lease::step`] did.
#[derive(Debug)]
pub struct Step {
    pub events: Vec<LeaseEvent>,
    /// The store's failure, if the call failed (the role changes only by the rules above).
    pub error: Option<LeaseError>,
    /// The lock was taken but the registry could not say whether its object is the cluster's:
    /// this instance leads without that check, and says so.
    pub unchecked: Option<LeaseError>,
}

/// The election over a store: call [`Lease::step`] every retry period.
pub struct Lease<S: LockStore> {
    store: S,
    elector: Elector,
}

impl<S: LockStore> Lease<S> {
    pub fn new(store: S, config: LeaseConfig) -> Self {
        let elector = Elector::new(config, store.instance());
        Self { store, elector }
    }

    pub fn store(&self) -> &S {
        &self.store
    }

    pub fn elector(&self) -> &Elector {
        &self.elector
    }

    pub fn is_leader_now(&self) -> bool {
        self.elector.is_leader_now(Instant::now())
    }

    /// One round: step down if past the renew deadline, then renew (leader) or try to take the
    /// lock (standby). A renewal gets at most the time left before the renew deadline: an
    /// answer after it would not count anyway.
    pub async fn step(&mut self) -> Step {
        let config = *self.elector.config();
        let mut events: Vec<LeaseEvent> = self.elector.tick(Instant::now()).into_iter().collect();
        let sent_at = Instant::now();
        let budget = self
            .elector
            .acting_until()
            .map_or(config.renew_deadline, |until| {
                until.saturating_duration_since(sent_at)
            });
        let timed_out = |op: &'static str| LeaseError::Timeout {
            op,
            object: self.store.location(),
            timeout: budget,
        };
        let mut unchecked = None;
        let error = match self.elector.next_op() {
            Op::Renew => {
                let result = tokio::time::timeout(budget, self.store.renew(config.lease_duration))
                    .await
                    .unwrap_or_else(|_| Err(timed_out("renewing the lease")));
                events.extend(self.elector.observe(
                    sent_at,
                    Outcome::Renew(&result),
                    Instant::now(),
                ));
                result.err()
            }
            Op::TryLock => {
                let result =
                    tokio::time::timeout(budget, self.store.try_lock(config.lease_duration))
                        .await
                        .unwrap_or_else(|_| Err(timed_out("taking the lease")));
                // Just taken: lead only if it is the cluster's registered lease object.
                let result = match result {
                    Ok(Acquire::Acquired) => {
                        let left = budget.saturating_sub(sent_at.elapsed());
                        match tokio::time::timeout(left, self.store.claim()).await {
                            Ok(Ok(registry::Claim::Ours)) => Ok(Acquire::Acquired),
                            Ok(Ok(registry::Claim::Elsewhere { registered })) => {
                                // Released at once: a lock of ours kept here would stop the
                                // instances of this pool taking it if the registration moves.
                                let _ = self.store.unlock().await;
                                Err(LeaseError::Elsewhere {
                                    ours: self.store.location(),
                                    registered,
                                })
                            }
                            Ok(Err(e)) => {
                                unchecked = Some(e);
                                Ok(Acquire::Acquired)
                            }
                            Err(_) => {
                                unchecked = Some(LeaseError::Timeout {
                                    op: "reading the lease registration",
                                    object: format!("config-key {}", registry::KEY),
                                    timeout: left,
                                });
                                Ok(Acquire::Acquired)
                            }
                        }
                    }
                    other => other,
                };
                events.extend(self.elector.observe(
                    sent_at,
                    Outcome::TryLock(&result),
                    Instant::now(),
                ));
                result.err()
            }
        };
        Step {
            events,
            error,
            unchecked,
        }
    }

    /// Releases the lease (clean exit): another instance can take it at once.
    pub async fn release(&mut self) -> Step {
        let sent_at = Instant::now();
        let result = self.store.unlock().await;
        let events = self
            .elector
            .observe(sent_at, Outcome::Unlock(&result), Instant::now());
        Step {
            events,
            error: result.err(),
            unchecked: None,
        }
    }

    /// Writes the state, only while leading; the store checks the lock again in the same
    /// operation, so a write that races the lock's expiry is refused too.
    pub async fn write_state(&self, bytes: &[u8]) -> Result<(), LeaseError> {
        if !self.is_leader_now() {
            return Err(LeaseError::NotLeader {
                op: "writing the enforcer state",
                instance: self.store.instance().to_string(),
            });
        }
        self.store.write_state(bytes).await
    }

    pub async fn read_state(&self) -> Result<Option<Vec<u8>>, LeaseError> {
        self.store.read_state().await
    }
}

#[cfg(test)]
mod tests;
