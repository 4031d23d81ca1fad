//! The lease over librados: one RADOS object, [`OBJECT`], holds the lock (`cls_lock`'s
//! exclusive lock [`LOCK_NAME`], with an expiry) and, as its data, the enforcer's state.
//!
//! **Identity.** `cls_lock` names a holder by (Ceph client, cookie). The client is the
//! connection's `client.<global id>`, new on every connect; the cookie is ours, unique per
//! [`RadosLockStore`] and naming host and pid (`host/pid 1234/18c0ffee-1`), so that
//! `rados lock info` and our decision log say which process holds it. Only the same
//! (connection, cookie) can renew: after the [`RadosClient`] reconnects, the renewal is refused
//! and the instance waits, as standby, for its own former lock to expire. Give the lease a
//! `RadosClient` of its own: the collector's client drops its connection after a mon command
//! timeout, which would cost the lease.
//!
//! **Calls.** Take: `rados_lock_exclusive` with `LIBRADOS_LOCK_FLAG_MAY_RENEW` (takes a free or
//! expired lock, extends our own). Renew: the same with `LIBRADOS_LOCK_FLAG_MUST_RENEW`, which
//! never takes a lock that stopped being ours (ENOENT), so a renewal after expiry is seen as a
//! loss even when nobody took the lock meanwhile: another instance may have led and written in
//! between. Holder: `rados_list_lockers`. Release: `rados_unlock`. State: one write operation
//! that runs `lock.assert_locked` (our client and cookie, exclusive) and then `write_full`; the
//! OSD applies both or neither, so an instance whose lock expired (judged by the OSD, which
//! trims expired lockers on every read of the lock) can never overwrite its successor's state.
//! Read: `rados_read` of at most [`MAX_STATE_BYTES`]. Every call runs on a blocking thread under
//! the client's timeout, as the commands of `crate::ceph::rados` do; librados' own
//! `rados_osd_op_timeout` (half that timeout) ends a call whose caller gave up.
//!
//! **Clock.** The lock's expiry is set and judged by the clock of the object's primary OSD,
//! when it receives each call. The elector stops acting a renew deadline after it *sent* its
//! last successful renewal; the lock lives at least a lease duration after that. The gap also
//! covers the skew between OSD clocks if the primary changes (Ceph warns about mon clock skew
//! over 0.05 s; OSDs are expected to run NTP too).
//!
//! **Pool.** By default the first that exists of [`DEFAULT_POOLS`]: `.mgr` (Quincy and later) or
//! `device_health_metrics` (Pacific; Quincy renames it `.mgr`, same pool id, so the object stays
//! through an upgrade). Every cluster with a mgr and an OSD has one of them: the mgr creates it
//! (cephadm, Rook and package installs alike; Rook names it `.mgr` too), it is replicated
//! and tiny, and it holds no client data. Our object's name starts with `ceph-recovery-budget`,
//! which the caps below confine us to; the mgr's own objects there are named by device ids (and,
//! from Reef, by the mgr's database in the `devicehealth` namespace), so nothing collides.
//! Another pool can be named (the planned `--enforcer.lease-pool`).
//!
//! **Caps**, measured on the 16.2.15 lab with fresh users (`rados lock get/info`, `stat`,
//! `put`, `get`, and `tests/lab_lease.rs` with this code):
//! - `osd 'allow rwx pool=<pool> object_prefix ceph-recovery-budget'` (plus `mon 'allow r'`,
//!   which the exporter already needs): enough for take, renew, holder, release, fenced write
//!   and read;
//! - `allow rw` without `x`: the lock and `lock info` are refused (EPERM: `cls_lock` is an object
//!   class, `lock` needs `class-write`, `get_info` `class-read`); plain `put`/`get` work, but the
//!   fenced write needs the class call, so nothing can be written;
//! - `allow r class-read`: `lock info` works, taking the lock does not;
//! - `allow rwx` on another pool: everything EPERM.
//!
//! OSDs refuse with EPERM (the mon uses EACCES): both are [`LeaseError::PermissionDenied`],
//! naming the caps to grant.

use std::ffi::{c_char, c_int, c_long, c_void, CString};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::registry::{self, Claim, Registration, Registry};
use super::{Acquire, Holder, LeaseError, LockStore, Renew};
use crate::ceph::rados::{errno_text, Handle, RadosClient};

/// The object: name prefix of the caps, too.
pub const OBJECT: &str = "ceph-recovery-budget.lease";
/// The `cls_lock` lock on it.
pub const LOCK_NAME: &str = "enforcer";
/// Tried in order when no pool is named.
pub const DEFAULT_POOLS: [&str; 2] = [".mgr", "device_health_metrics"];
/// The most state read back: the enforcer's state is a few KiB of JSON; anything past this is
/// not ours, and reading it whole would unbound the memory (issue 12.4).
pub const MAX_STATE_BYTES: usize = 1 << 20;

/// The caps the lease needs on `pool`, as `ceph auth caps` takes them.
pub fn caps(pool: &str) -> String {
    format!("osd 'allow rwx pool={pool} object_prefix ceph-recovery-budget'")
}

const EPERM: i32 = 1;
const ENOENT: i32 = 2;
const EACCES: i32 = 13;
const EBUSY: i32 = 16;
const ERANGE: i32 = 34;
const ETIMEDOUT: i32 = 110;

const LOCK_FLAG_MAY_RENEW: u8 = 1;
const LOCK_FLAG_MUST_RENEW: u8 = 2;
/// `ClsLockType::EXCLUSIVE` of `cls_lock_types.h`.
const LOCK_EXCLUSIVE: u8 = 1;

/// Where the lease lives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LeasePool {
    /// The first of [`DEFAULT_POOLS`] that exists.
    Default,
    Named(String),
}

/// The [`LockStore`] of one instance, over a [`RadosClient`] (see the module doc).
pub struct RadosLockStore {
    client: RadosClient,
    pool: LeasePool,
    /// The pool found, once found (tried first on later calls: looking up a missing pool costs
    /// librados a round trip to the mon).
    resolved: Arc<Mutex<Option<String>>>,
    cookie: String,
    description: String,
    /// Where the cluster's one lease object is registered; `None`: not checked.
    registry: Option<Box<dyn Registry>>,
}

impl RadosLockStore {
    pub fn new(client: RadosClient, pool: LeasePool) -> Self {
        static SEQ: AtomicU32 = AtomicU32::new(0);
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
            .map(|h| h.trim().to_string())
            .ok()
            .filter(|h| !h.is_empty())
            .unwrap_or_else(|| "unknown-host".to_string());
        let pid = std::process::id();
        // Unique per process start and per store within it: a restarted process with the same
        // pid (containers: pid 1) must not pass for the previous one.
        let started = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let seq = SEQ.fetch_add(1, Ordering::Relaxed);
        Self {
            client,
            pool,
            resolved: Arc::new(Mutex::new(None)),
            cookie: format!("{host}/pid {pid}/{:x}-{seq}", started & 0xffff_ffff_ffff),
            description: format!("ceph-recovery-budget enforcer on {host}, pid {pid}"),
            registry: None,
        }
    }

    /// Checks at every take that this lease object is the cluster's registered one
    /// ([`registry`]). Give it a client other than the lease's own: a timed-out monitor
    /// command drops a librados connection, and with it the lock it holds.
    pub fn with_registry(mut self, registry: Box<dyn Registry>) -> Self {
        self.registry = Some(registry);
        self
    }

    fn resolved(&self) -> Option<String> {
        self.resolved
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// The pool in use (once a call found it), for messages and the caps.
    pub fn pool(&self) -> Option<String> {
        self.resolved().or_else(|| match &self.pool {
            LeasePool::Named(p) => Some(p.clone()),
            LeasePool::Default => None,
        })
    }

    fn candidates(&self) -> Vec<String> {
        let mut pools: Vec<String> = self.resolved().into_iter().collect();
        let configured: Vec<String> = match &self.pool {
            LeasePool::Named(p) => vec![p.clone()],
            LeasePool::Default => DEFAULT_POOLS.iter().map(|p| p.to_string()).collect(),
        };
        for p in configured {
            if !pools.contains(&p) {
                pools.push(p);
            }
        }
        pools
    }

    /// Runs `f` with an io context on the lease pool, on a blocking thread, under the client's
    /// timeout.
    async fn call<T: Send + 'static>(
        &self,
        op: &'static str,
        f: impl FnOnce(&Io) -> Result<T, LeaseError> + Send + 'static,
    ) -> Result<T, LeaseError> {
        let conn = self
            .client
            .connection()
            .await
            .map_err(|e| LeaseError::Connect { message: e.message })?;
        let timeout = self.client.settings().timeout;
        let candidates = self.candidates();
        let named = matches!(self.pool, LeasePool::Named(_));
        let resolved = Arc::clone(&self.resolved);
        // The Arc moves into the thread: an abandoned call keeps its connection alive there.
        let task = tokio::task::spawn_blocking(move || {
            let io = Io::open(conn, &candidates, named)?;
            *resolved.lock().unwrap_or_else(|e| e.into_inner()) = Some(io.pool.clone());
            f(&io)
        });
        match tokio::time::timeout(timeout, task).await {
            Ok(Ok(result)) => result,
            Ok(Err(join)) => Err(LeaseError::Failed {
                op,
                object: self.location(),
                detail: format!("the librados thread failed: {join}"),
            }),
            Err(_) => Err(LeaseError::Timeout {
                op,
                object: self.location(),
                timeout,
            }),
        }
    }
}

impl LockStore for RadosLockStore {
    fn instance(&self) -> &str {
        &self.cookie
    }

    fn location(&self) -> String {
        match self.pool() {
            Some(p) => format!("{p}/{OBJECT}"),
            None => format!("({})/{OBJECT}", DEFAULT_POOLS.join(" or ")),
        }
    }

    async fn try_lock(&self, duration: Duration) -> Result<Acquire, LeaseError> {
        const OP: &str = "taking the lease";
        let (cookie, desc) = (self.cookie.clone(), self.description.clone());
        self.call(OP, move |io| {
            match io.lock(&cookie, &desc, duration, LOCK_FLAG_MAY_RENEW) {
                0 => Ok(Acquire::Acquired),
                ret if ret == -EBUSY => Ok(Acquire::Held { by: io.holder(OP)? }),
                ret => Err(io.error(OP, ret)),
            }
        })
        .await
    }

    async fn renew(&self, duration: Duration) -> Result<Renew, LeaseError> {
        const OP: &str = "renewing the lease";
        let (cookie, desc) = (self.cookie.clone(), self.description.clone());
        self.call(OP, move |io| {
            match io.lock(&cookie, &desc, duration, LOCK_FLAG_MUST_RENEW) {
                0 => Ok(Renew::Renewed),
                // ENOENT: not ours any more (expired, or we reconnected); EBUSY: taken.
                ret if ret == -ENOENT || ret == -EBUSY => Ok(Renew::Lost { by: io.holder(OP)? }),
                ret => Err(io.error(OP, ret)),
            }
        })
        .await
    }

    async fn unlock(&self) -> Result<(), LeaseError> {
        const OP: &str = "releasing the lease";
        let cookie = self.cookie.clone();
        self.call(OP, move |io| match io.unlock(&cookie) {
            // ENOENT: not held by us (expired already): nothing to release.
            ret if ret == 0 || ret == -ENOENT => Ok(()),
            ret => Err(io.error(OP, ret)),
        })
        .await
    }

    async fn holder(&self) -> Result<Option<Holder>, LeaseError> {
        self.call("looking up the lease holder", |io| {
            io.holder("looking up the lease holder")
        })
        .await
    }

    async fn write_state(&self, bytes: &[u8]) -> Result<(), LeaseError> {
        const OP: &str = "writing the enforcer state";
        let cookie = self.cookie.clone();
        let bytes = bytes.to_vec();
        self.call(OP, move |io| match io.write_fenced(&cookie, &bytes) {
            0 => Ok(()),
            // EBUSY: not locked by us; ENOENT: no object, hence no lock.
            ret if ret == -EBUSY || ret == -ENOENT => Err(LeaseError::NotHolder {
                op: OP,
                instance: cookie.clone(),
                object: io.object(),
            }),
            ret => Err(io.error(OP, ret)),
        })
        .await
    }

    async fn read_state(&self) -> Result<Option<Vec<u8>>, LeaseError> {
        const OP: &str = "reading the enforcer state";
        self.call(OP, move |io| io.read_state(OP)).await
    }

    async fn claim(&self) -> Result<Claim, LeaseError> {
        let Some(registry) = &self.registry else {
            return Ok(Claim::Ours);
        };
        let (pool_id, pool) = self
            .call("registering the lease", |io| Ok((io.id(), io.pool.clone())))
            .await?;
        let ours = Registration {
            pool_id: Some(pool_id),
            pool,
            object: OBJECT.to_string(),
        };
        registry::claim(registry.as_ref(), &ours).await
    }
}

/// `cls_lock_assert_op`, encoded as Ceph's `ENCODE_START(1, 1)`: version 1, compat 1, the
/// length of the rest (le32), then name, type (u8), cookie and tag (strings: le32 length and
/// bytes). Our locks have no tag.
fn assert_locked_input(name: &str, cookie: &str) -> Vec<u8> {
    fn put_str(out: &mut Vec<u8>, s: &str) {
        // Names and cookies are short strings of ours; u32 cannot overflow.
        out.extend_from_slice(&u32::try_from(s.len()).unwrap_or(u32::MAX).to_le_bytes());
        out.extend_from_slice(s.as_bytes());
    }
    let mut body = Vec::new();
    put_str(&mut body, name);
    body.push(LOCK_EXCLUSIVE);
    put_str(&mut body, cookie);
    put_str(&mut body, "");
    let mut out = vec![1, 1];
    out.extend_from_slice(&u32::try_from(body.len()).unwrap_or(u32::MAX).to_le_bytes());
    out.extend_from_slice(&body);
    out
}

/// The clients and cookies of `rados_list_lockers`' NUL-separated buffers, paired; the first
/// is the holder of an exclusive lock.
fn first_locker(clients: &[u8], cookies: &[u8]) -> Option<Holder> {
    let first = |b: &[u8]| {
        b.split(|c| *c == 0)
            .next()
            .map(|s| String::from_utf8_lossy(s).into_owned())
    };
    Some(Holder {
        client: first(clients).filter(|c| !c.is_empty())?,
        instance: first(cookies).unwrap_or_default(),
    })
}

// ------------------------------------------------------------------------------------------
// The C calls
// ------------------------------------------------------------------------------------------

#[repr(C)]
struct Timeval {
    tv_sec: c_long,
    tv_usec: c_long,
}

#[link(name = "rados")]
extern "C" {
    fn rados_ioctx_create(
        cluster: *mut c_void,
        pool_name: *const c_char,
        ioctx: *mut *mut c_void,
    ) -> c_int;
    fn rados_ioctx_destroy(io: *mut c_void);
    fn rados_ioctx_get_id(io: *mut c_void) -> i64;
    fn rados_lock_exclusive(
        io: *mut c_void,
        oid: *const c_char,
        name: *const c_char,
        cookie: *const c_char,
        desc: *const c_char,
        duration: *mut Timeval,
        flags: u8,
    ) -> c_int;
    fn rados_unlock(
        io: *mut c_void,
        oid: *const c_char,
        name: *const c_char,
        cookie: *const c_char,
    ) -> c_int;
    fn rados_list_lockers(
        io: *mut c_void,
        oid: *const c_char,
        name: *const c_char,
        exclusive: *mut c_int,
        tag: *mut c_char,
        tag_len: *mut usize,
        clients: *mut c_char,
        clients_len: *mut usize,
        cookies: *mut c_char,
        cookies_len: *mut usize,
        addrs: *mut c_char,
        addrs_len: *mut usize,
    ) -> isize;
    fn rados_create_write_op() -> *mut c_void;
    fn rados_release_write_op(op: *mut c_void);
    fn rados_write_op_exec(
        op: *mut c_void,
        cls: *const c_char,
        method: *const c_char,
        in_buf: *const c_char,
        in_len: usize,
        prval: *mut c_int,
    );
    fn rados_write_op_write_full(op: *mut c_void, buffer: *const c_char, len: usize);
    fn rados_write_op_operate(
        op: *mut c_void,
        io: *mut c_void,
        oid: *const c_char,
        mtime: *mut c_long,
        flags: c_int,
    ) -> c_int;
    fn rados_read(
        io: *mut c_void,
        oid: *const c_char,
        buf: *mut c_char,
        len: usize,
        off: u64,
    ) -> c_int;
}

/// An io context on the lease pool, used on the blocking thread that opened it (librados'
/// io contexts are not to be shared while their settings change; ours never change) and
/// destroyed on drop. It holds the connection it was made from.
struct Io {
    raw: *mut c_void,
    pool: String,
    /// Declared after `raw`: dropped after the io context is destroyed.
    _conn: Arc<Handle>,
}

impl Drop for Io {
    fn drop(&mut self) {
        // SAFETY: `raw` came from a successful rados_ioctx_create on `_conn`, which is still
        // alive (fields drop after this), and is destroyed once, here. No asynchronous call
        // was made on it, so nothing is pending.
        unsafe { rados_ioctx_destroy(self.raw) }
    }
}

/// A C string of one of our own names (no NUL inside: constants and a cookie we built).
fn c(s: &str) -> CString {
    CString::new(s.replace('\0', "")).unwrap_or_default()
}

impl Io {
    /// An io context on the first pool of `candidates` that exists.
    fn open(conn: Arc<Handle>, candidates: &[String], named: bool) -> Result<Io, LeaseError> {
        for pool in candidates {
            let name = c(pool);
            let mut raw: *mut c_void = std::ptr::null_mut();
            // SAFETY: the handle is connected and borrowed through `conn` for the call; the
            // pool name is NUL-terminated and outlives the call; `raw` is a valid out-pointer.
            let ret = unsafe { rados_ioctx_create(conn.as_raw(), name.as_ptr(), &mut raw) };
            if ret == 0 && !raw.is_null() {
                return Ok(Io {
                    raw,
                    pool: pool.clone(),
                    _conn: conn,
                });
            }
            if ret != -ENOENT {
                return Err(LeaseError::Failed {
                    op: "opening the lease pool",
                    object: format!("{pool}/{OBJECT}"),
                    detail: errno_text(-ret),
                });
            }
        }
        let hint = if named {
            "create it, or name an existing replicated pool with --enforcer.lease-pool (enforcer.lease_pool in the config file)".to_string()
        } else {
            format!(
                "none of {} exists (the mgr creates one of them: is a mgr running? On Debian's Reef 18.2.7 the devicehealth module cannot load and `.mgr` is never made); name an existing replicated pool with --enforcer.lease-pool (enforcer.lease_pool in the config file)",
                DEFAULT_POOLS.join(", ")
            )
        };
        Err(LeaseError::NoPool {
            pool: candidates.join(" or "),
            hint,
        })
    }

    fn object(&self) -> String {
        format!("{}/{OBJECT}", self.pool)
    }

    /// The pool's id, which a rename keeps.
    fn id(&self) -> i64 {
        // SAFETY: `raw` is a live io context (self), only read.
        unsafe { rados_ioctx_get_id(self.raw) }
    }

    fn error(&self, op: &'static str, ret: c_int) -> LeaseError {
        let errno = -ret;
        match errno {
            EPERM | EACCES => LeaseError::PermissionDenied {
                op,
                object: self.object(),
                errno: errno_text(errno),
                caps: caps(&self.pool),
            },
            ETIMEDOUT => LeaseError::Failed {
                op,
                object: self.object(),
                detail: format!(
                    "{} (librados' rados_osd_op_timeout: is the pool's primary OSD up?)",
                    errno_text(errno)
                ),
            },
            _ => LeaseError::Failed {
                op,
                object: self.object(),
                detail: errno_text(errno),
            },
        }
    }

    fn lock(&self, cookie: &str, desc: &str, duration: Duration, flags: u8) -> c_int {
        let (oid, name, cookie, desc) = (c(OBJECT), c(LOCK_NAME), c(cookie), c(desc));
        // A zero duration would be a lock that never expires: never send one.
        let duration = duration.max(Duration::from_micros(1));
        let mut tv = Timeval {
            tv_sec: c_long::try_from(duration.as_secs()).unwrap_or(c_long::MAX),
            // Below 1e6: fits any c_long.
            tv_usec: duration.subsec_micros() as c_long,
        };
        // SAFETY: `raw` is a live io context (self); the strings are NUL-terminated and
        // outlive the call; `tv` is a valid timeval that outlives the call (librados copies
        // it).
        unsafe {
            rados_lock_exclusive(
                self.raw,
                oid.as_ptr(),
                name.as_ptr(),
                cookie.as_ptr(),
                desc.as_ptr(),
                &mut tv,
                flags,
            )
        }
    }

    fn unlock(&self, cookie: &str) -> c_int {
        let (oid, name, cookie) = (c(OBJECT), c(LOCK_NAME), c(cookie));
        // SAFETY: a live io context and NUL-terminated strings that outlive the call.
        unsafe { rados_unlock(self.raw, oid.as_ptr(), name.as_ptr(), cookie.as_ptr()) }
    }

    fn holder(&self, op: &'static str) -> Result<Option<Holder>, LeaseError> {
        let (oid, name) = (c(OBJECT), c(LOCK_NAME));
        // Enough for one locker; librados says how much it needs otherwise (ERANGE).
        let mut sizes = [64usize, 256, 256, 256];
        for _ in 0..3 {
            let mut bufs: Vec<Vec<u8>> = sizes.iter().map(|n| vec![0u8; *n]).collect();
            let mut lens = sizes;
            let mut exclusive: c_int = 0;
            let [tag, clients, cookies, addrs] = bufs.as_mut_slice() else {
                return Ok(None);
            };
            let [tag_len, clients_len, cookies_len, addrs_len] = &mut lens;
            // SAFETY: a live io context; NUL-terminated strings that outlive the call; each
            // buffer is valid for writes of the length passed beside it, and librados writes
            // the lengths it needs (or used) back through those pointers.
            let ret = unsafe {
                rados_list_lockers(
                    self.raw,
                    oid.as_ptr(),
                    name.as_ptr(),
                    &mut exclusive,
                    tag.as_mut_ptr().cast(),
                    tag_len,
                    clients.as_mut_ptr().cast(),
                    clients_len,
                    cookies.as_mut_ptr().cast(),
                    cookies_len,
                    addrs.as_mut_ptr().cast(),
                    addrs_len,
                )
            };
            match ret {
                0 => return Ok(None),
                n if n > 0 => {
                    let used = |b: &Vec<u8>, len: usize| b[..len.min(b.len())].to_vec();
                    return Ok(first_locker(
                        &used(clients, *clients_len),
                        &used(cookies, *cookies_len),
                    ));
                }
                n if n == -(ENOENT as isize) => return Ok(None),
                n if n == -(ERANGE as isize) => {
                    // Room for what librados asked, bounded (a lock has few lockers).
                    for (size, len) in sizes.iter_mut().zip(lens) {
                        *size = len.clamp(*size, 64 * 1024);
                    }
                }
                n => return Err(self.error(op, c_int::try_from(n).unwrap_or(c_int::MIN))),
            }
        }
        Err(LeaseError::Failed {
            op,
            object: self.object(),
            detail: "rados_list_lockers kept asking for larger buffers".to_string(),
        })
    }

    /// `lock.assert_locked` then `write_full`, in one operation: 0, or the first failure.
    fn write_fenced(&self, cookie: &str, bytes: &[u8]) -> c_int {
        let oid = c(OBJECT);
        let input = assert_locked_input(LOCK_NAME, cookie);
        let mut prval: c_int = 0;
        // SAFETY: rados_create_write_op allocates an empty operation (null on allocation
        // failure, checked); it is released below on every path.
        let op = unsafe { rados_create_write_op() };
        if op.is_null() {
            return -12; // ENOMEM
        }
        // SAFETY: `op` is a live write operation; the class and method names are
        // NUL-terminated; `input` and `bytes` are valid for their lengths and outlive
        // `operate` (librados copies them into the operation anyway); `prval` is a local that
        // outlives `operate`, which writes the method's return into it; `raw` is a live io
        // context and `oid` NUL-terminated; a null mtime means "now"; the operation is released
        // once, after its last use.
        unsafe {
            rados_write_op_exec(
                op,
                c"lock".as_ptr(),
                c"assert_locked".as_ptr(),
                input.as_ptr().cast(),
                input.len(),
                &mut prval,
            );
            rados_write_op_write_full(op, bytes.as_ptr().cast(), bytes.len());
            let ret = rados_write_op_operate(op, self.raw, oid.as_ptr(), std::ptr::null_mut(), 0);
            rados_release_write_op(op);
            if ret < 0 {
                ret
            } else {
                prval.min(0)
            }
        }
    }

    fn read_state(&self, op: &'static str) -> Result<Option<Vec<u8>>, LeaseError> {
        let oid = c(OBJECT);
        // One byte more than allowed tells a state over the cap from one at it.
        let mut buf = vec![0u8; MAX_STATE_BYTES + 1];
        // SAFETY: a live io context; `oid` NUL-terminated; `buf` valid for writes of its
        // length, which librados does not exceed.
        let ret = unsafe {
            rados_read(
                self.raw,
                oid.as_ptr(),
                buf.as_mut_ptr().cast(),
                buf.len(),
                0,
            )
        };
        match ret {
            // The lock alone creates the object, empty: no state written yet.
            0 => Ok(None),
            n if n == -ENOENT => Ok(None),
            n if n < 0 => Err(self.error(op, n)),
            n => {
                let n = usize::try_from(n).unwrap_or(usize::MAX);
                if n > MAX_STATE_BYTES {
                    return Err(LeaseError::TooLarge {
                        op,
                        object: self.object(),
                        size: n as u64,
                        cap: MAX_STATE_BYTES as u64,
                    });
                }
                buf.truncate(n);
                Ok(Some(buf))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn assert_locked_input_is_cls_lock_assert_op_encoding() {
        let got = assert_locked_input("enforcer", "ck");
        let mut want = vec![1u8, 1];
        let body_len: u32 = 4 + 8 + 1 + 4 + 2 + 4;
        want.extend_from_slice(&body_len.to_le_bytes());
        want.extend_from_slice(&8u32.to_le_bytes());
        want.extend_from_slice(b"enforcer");
        want.push(1);
        want.extend_from_slice(&2u32.to_le_bytes());
        want.extend_from_slice(b"ck");
        want.extend_from_slice(&0u32.to_le_bytes());
        assert_eq!(got, want);
    }

    #[test]
    fn the_first_locker_is_the_holder() {
        assert_eq!(
            first_locker(b"client.4123\0", b"h/pid 7/ab-0\0"),
            Some(Holder {
                instance: "h/pid 7/ab-0".into(),
                client: "client.4123".into()
            })
        );
        assert_eq!(first_locker(b"", b""), None);
    }

    #[test]
    fn caps_name_the_pool_and_the_prefix() {
        assert_eq!(
            caps(".mgr"),
            "osd 'allow rwx pool=.mgr object_prefix ceph-recovery-budget'"
        );
        assert!(OBJECT.starts_with("ceph-recovery-budget"));
    }
}
