//! The librados backend: the same [`Client`] as the CLI adapter, but one connection held in the
//! process instead of one `ceph` process (300-700 ms of Python start-up) per command.
//!
//! Every parser of this crate reads what the CLI prints, so this backend prints exactly that: a
//! [`CephCommand`] is translated into the JSON command the CLI would send ([`translate`]), sent
//! with librados, and the reply is laid out byte for byte as `ceph --format json ...` lays it out
//! ([`print_mon`], [`print_tell`]; checked against recorded CLI output in the tests below and
//! against the live CLI by `tests/lab_librados.rs`).
//!
//! Layers, so that everything but the C calls is tested without librados:
//! - pure functions: translation, CLI layout, errno names, the reconnect [`Backoff`];
//! - [`Session`]: one shared connection, calls off the async runtime under a per-call timeout,
//!   reconnect with backoff after the cluster went away; generic over a [`Connector`];
//! - `sys` (feature `librados`): our own small binding of the eight librados C functions used,
//!   and [`RadosClient`], the [`Session`] over it.
//!
//! Why our own binding and not the `ceph` crate: that crate's last release is from 2021 and
//! cargo warns of its future incompatibility; we need eight functions, each audited below.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::{CephCommand, CephError, Client, Output};

// Linux errno values (Ceph returns Linux errnos; this program runs on Linux only).
const ENOENT: i32 = 2;
const ENXIO: i32 = 6;
const EINVAL: i32 = 22;
const ENOTCONN: i32 = 107;
const ESHUTDOWN: i32 = 108;
const ETIMEDOUT: i32 = 110;

/// OSDs asked at the same time by a `tell osd.*`: the CLI asks them one after the other, which
/// at 3-17 ms each would not fit a 10 s timeout on a cluster of a thousand OSDs.
const TELL_THREADS: usize = 8;

// ------------------------------------------------------------------------------------------
// Translation: CLI words -> the JSON command the CLI sends
// ------------------------------------------------------------------------------------------

/// Where a translated command goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request {
    /// To the monitors. Commands the mgr serves (`pg ls`) are forwarded by the mon: see
    /// [`translate`] for why not `rados_mgr_command`.
    Mon { json: String },
    /// To OSDs, like `ceph tell`.
    Tell { target: TellTarget, json: String },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TellTarget {
    /// `osd.*`: every OSD `osd ls` lists, up or down (as the CLI does).
    All,
    One(u32),
}

/// The command JSON the CLI builds: `prefix`, the arguments in signature order, then
/// `"format":"json"` (the CLI adds `--format json` to every call of this program).
fn command_json(prefix: &str, args: &[(&str, Arg<'_>)]) -> String {
    let quote = |s: &str| serde_json::Value::String(s.to_string()).to_string();
    let mut json = format!("{{\"prefix\":{}", quote(prefix));
    for (key, value) in args {
        json.push(',');
        json.push_str(&quote(key));
        json.push(':');
        match value {
            Arg::Str(s) => json.push_str(&quote(s)),
            Arg::List(items) => {
                let items: Vec<String> = items.iter().map(|s| quote(s)).collect();
                json.push('[');
                json.push_str(&items.join(","));
                json.push(']');
            }
            Arg::Ints(items) => {
                let items: Vec<String> = items.iter().map(u32::to_string).collect();
                json.push('[');
                json.push_str(&items.join(","));
                json.push(']');
            }
        }
    }
    json.push_str(",\"format\":\"json\"}");
    json
}

enum Arg<'a> {
    Str(&'a str),
    List(&'a [&'a str]),
    /// Numbers, as the CLI sends `CephOsdName` (`2` or `osd.2` both become 2).
    Ints(Vec<u32>),
}

/// The values `pg dump` accepts for what to dump.
const PG_DUMP_CONTENTS: [&str; 8] = [
    "all",
    "summary",
    "sum",
    "delta",
    "pools",
    "osds",
    "pgs",
    "pgs_brief",
];

const OSD_LS_JSON: &str = "{\"prefix\":\"osd ls\",\"format\":\"json\"}";

/// Translates the words this program sends into the JSON command the CLI would send (checked
/// with `ceph --verbose` on 16.2.15: the argument names are those of the mon's and OSD's command
/// descriptions). Anything else is [`CephError::Unsupported`]: a new command must be added here
/// (and to the lab test) before the librados backend can run it.
///
/// `pg ls` is a mgr command; the CLI sends it with `rados_mgr_command`. Here it goes to the mon,
/// which forwards it to the active mgr and returns the same bytes: librados 16.2's
/// `mgr_command` gives up after `rados_mon_op_timeout` while the mgr may still answer into the
/// caller's freed buffers (a use-after-free), whereas a timed-out mon command is cancelled.
pub fn translate(command: &CephCommand) -> Result<Request, CephError> {
    let words: Vec<&str> = command.args.iter().map(String::as_str).collect();
    let unsupported = || CephError::Unsupported {
        command: command.to_string(),
    };
    // Option-like words (`--force`, `-f`) are not translated: only the exact shapes below.
    if words.iter().any(|w| w.starts_with('-')) {
        return Err(unsupported());
    }
    let mon = |prefix: &str, args: &[(&str, Arg<'_>)]| {
        Ok(Request::Mon {
            json: command_json(prefix, args),
        })
    };
    match words.as_slice() {
        ["status"] => mon("status", &[]),
        ["versions"] => mon("versions", &[]),
        ["osd", "ls"] => mon("osd ls", &[]),
        ["osd", "tree"] => mon("osd tree", &[]),
        ["osd", "dump"] => mon("osd dump", &[]),
        ["osd", "set", flag] => mon("osd set", &[("key", Arg::Str(flag))]),
        ["osd", "unset", flag] => mon("osd unset", &[("key", Arg::Str(flag))]),
        ["osd", "pool", "ls"] => mon("osd pool ls", &[]),
        ["osd", "pool", "ls", "detail"] => mon("osd pool ls", &[("detail", Arg::Str("detail"))]),
        ["pg", "ls"] => mon("pg ls", &[]),
        // `dumpcontents` is a list of choices (MgrCommands.h: all|summary|sum|delta|pools|osds|
        // pgs|pgs_brief, n=N), sent as a list like `pg ls`'s states.
        ["pg", "dump"] => mon("pg dump", &[]),
        ["pg", "dump", contents @ ..] if contents.iter().all(|c| PG_DUMP_CONTENTS.contains(c)) => {
            mon("pg dump", &[("dumpcontents", Arg::List(contents))])
        }
        // A number first would be the optional pool id: not something this program sends.
        ["pg", "ls", states @ ..] if states.iter().all(|s| s.parse::<i64>().is_err()) => {
            mon("pg ls", &[("states", Arg::List(states))])
        }
        // The backfill lever (`MonCommands.h`: `osd pg-upmap-items name=pgid,type=CephPgid
        // name=id,type=CephOsdName,n=N`; the CLI sends each id as a number).
        ["osd", "pg-upmap-items", pgid, ids @ ..] if !ids.is_empty() && ids.len() % 2 == 0 => {
            let ids = ids
                .iter()
                .map(|i| i.strip_prefix("osd.").unwrap_or(i).parse::<u32>())
                .collect::<Result<Vec<u32>, _>>()
                .map_err(|_| unsupported())?;
            mon(
                "osd pg-upmap-items",
                &[("pgid", Arg::Str(pgid)), ("id", Arg::Ints(ids))],
            )
        }
        ["osd", "rm-pg-upmap-items", pgid] => {
            mon("osd rm-pg-upmap-items", &[("pgid", Arg::Str(pgid))])
        }
        ["osd", "get-require-min-compat-client"] => mon("osd get-require-min-compat-client", &[]),
        // The mgr balancer module's commands, forwarded by the mon like `pg ls`.
        ["balancer", verb @ ("status" | "on" | "off")] => mon(&format!("balancer {verb}"), &[]),
        ["balancer", "mode", mode] => mon("balancer mode", &[("mode", Arg::Str(mode))]),
        ["config", "dump"] => mon("config dump", &[]),
        // The lease's registration (`MonCommands.h`: `config-key get name=key`, `config-key
        // set name=key name=val`).
        ["config-key", "get", key] => mon("config-key get", &[("key", Arg::Str(key))]),
        ["config-key", "set", key, val] => mon(
            "config-key set",
            &[("key", Arg::Str(key)), ("val", Arg::Str(val))],
        ),
        ["config", "get", who, key] => mon(
            "config get",
            &[("who", Arg::Str(who)), ("key", Arg::Str(key))],
        ),
        ["config", "set", who, name, value] => mon(
            "config set",
            &[
                ("who", Arg::Str(who)),
                ("name", Arg::Str(name)),
                ("value", Arg::Str(value)),
            ],
        ),
        ["config", "rm", who, name] => mon(
            "config rm",
            &[("who", Arg::Str(who)), ("name", Arg::Str(name))],
        ),
        ["tell", target, rest @ ..] => {
            let target = match target.strip_prefix("osd.") {
                Some("*") => TellTarget::All,
                Some(id) => TellTarget::One(id.parse().map_err(|_| unsupported())?),
                None => return Err(unsupported()),
            };
            // `perf ... dump [logger [counter]]`: one logger's, or one counter's, values only.
            let perf = |prefix: &str, filter: &[&str]| {
                let names = ["logger", "counter"];
                let args: Vec<(&str, Arg<'_>)> = names
                    .iter()
                    .zip(filter)
                    .map(|(n, v)| (*n, Arg::Str(v)))
                    .collect();
                command_json(prefix, &args)
            };
            let json = match rest {
                ["perf", "histogram", "dump", filter @ ..] if filter.len() <= 2 => {
                    perf("perf histogram dump", filter)
                }
                ["perf", "dump", filter @ ..] if filter.len() <= 2 => perf("perf dump", filter),
                ["config", "get", var] => command_json("config get", &[("var", Arg::Str(var))]),
                ["config", "unset", var] => command_json("config unset", &[("var", Arg::Str(var))]),
                ["config", "set", var, val] => command_json(
                    "config set",
                    &[
                        ("var", Arg::Str(var)),
                        ("val", Arg::List(std::slice::from_ref(val))),
                    ],
                ),
                _ => return Err(unsupported()),
            };
            Ok(Request::Tell { target, json })
        }
        _ => Err(unsupported()),
    }
}

// ------------------------------------------------------------------------------------------
// The CLI's layout of replies
// ------------------------------------------------------------------------------------------

/// What one librados command call returned.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Reply {
    /// 0 or a negative errno.
    pub ret: i32,
    pub outbuf: Vec<u8>,
    /// The status string.
    pub outs: String,
}

impl Reply {
    pub fn ok(outbuf: impl Into<Vec<u8>>) -> Self {
        Reply {
            ret: 0,
            outbuf: outbuf.into(),
            outs: String::new(),
        }
    }

    pub fn err(errno: i32, outs: impl Into<String>) -> Self {
        Reply {
            ret: -errno,
            outbuf: Vec::new(),
            outs: outs.into(),
        }
    }
}

/// What the CLI would have printed, and its exit code.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Printed {
    pub stdout: Vec<u8>,
    pub stderr: String,
    pub code: i32,
}

/// `ceph --format json CMD` for a command sent to the mon (16.2's `/usr/bin/ceph`, `main`): a
/// blank line (printed for JSON formats "to satisfy consumers that skip the first line"), then
/// the reply as it came; on failure `Error ENAME: <status>` on stderr and the errno as exit
/// code, otherwise a non-empty status string on stderr.
pub fn print_mon(reply: &Reply) -> Printed {
    let mut stdout = Vec::with_capacity(reply.outbuf.len() + 1);
    stdout.push(b'\n');
    stdout.extend_from_slice(&reply.outbuf);
    let (stderr, code) = if reply.ret < 0 {
        (
            format!("Error {}: {}\n", errno_name(-reply.ret), reply.outs),
            -reply.ret,
        )
    } else if !reply.outs.is_empty() {
        (format!("{}\n", reply.outs), 0)
    } else {
        (String::new(), 0)
    };
    Printed {
        stdout,
        stderr,
        code,
    }
}

/// `ceph --format json tell TARGET CMD` over the replies of each OSD, in order. With more than
/// one target the CLI prints, per OSD, a blank line and then (if the reply is not empty once
/// trailing whitespace is stripped) `osd.N: <reply>\n`; with one target, the blank line and the
/// reply as it came. The exit code is the errno of the last OSD that failed. An OSD the CLI
/// cannot reach fails before the command is sent, when the CLI asks for its command
/// descriptions, hence that wording for a down (ENXIO) or unknown (ENOENT) OSD.
pub fn print_tell(replies: &[(u32, Reply)]) -> Printed {
    let prefixed = replies.len() > 1;
    let mut out = Printed::default();
    for (osd, r) in replies {
        out.stdout.push(b'\n');
        let body: &[u8] = if prefixed {
            python_rstrip(&r.outbuf)
        } else {
            &r.outbuf
        };
        if !body.is_empty() {
            if prefixed {
                out.stdout
                    .extend_from_slice(format!("osd.{osd}: ").as_bytes());
            }
            out.stdout.extend_from_slice(body);
            if prefixed {
                out.stdout.push(b'\n');
            }
        }
        if r.ret < 0 {
            let errno = -r.ret;
            let message = match (errno, r.outs.as_str()) {
                (ENXIO, _) | (ENOENT, "osd dne") => {
                    format!("problem getting command descriptions from osd.{osd}")
                }
                // The CLI has no timeout of its own here; name the OSD so the error is
                // attributed to it.
                (ETIMEDOUT, outs) => format!(
                    "no answer from osd.{osd} in time ({})",
                    if outs.is_empty() { "timed out" } else { outs }
                ),
                (_, outs) => outs.to_string(),
            };
            out.stderr
                .push_str(&format!("Error {}: {message}\n", errno_name(errno)));
            out.code = errno;
        } else if !r.outs.is_empty() {
            let prefix = if prefixed {
                format!("osd.{osd}: ")
            } else {
                String::new()
            };
            out.stderr.push_str(&format!("{prefix}{}\n", r.outs));
        }
    }
    out
}

/// Python's `bytes.rstrip()`: ASCII whitespace including vertical tab (which
/// `<[u8]>::trim_ascii_end` keeps).
fn python_rstrip(b: &[u8]) -> &[u8] {
    let end = b
        .iter()
        .rposition(|c| !matches!(c, b' ' | b'\t' | b'\n' | b'\r' | b'\x0b' | b'\x0c'))
        .map_or(0, |i| i + 1);
    &b[..end]
}

/// The OSD ids of `osd ls --format json` (`[0,1,2,3]`).
pub fn parse_osd_ls(outbuf: &[u8]) -> Result<Vec<u32>, String> {
    serde_json::from_slice(outbuf).map_err(|e| {
        format!(
            "`osd ls` did not return a list of OSD ids ({e}): {}",
            String::from_utf8_lossy(&outbuf[..outbuf.len().min(80)])
        )
    })
}

/// Python's `errno.errorcode` on Linux, which the CLI uses to name an error (`Error ENOENT:`);
/// `Unknown` for a number it does not know, as the CLI prints.
pub fn errno_name(errno: i32) -> &'static str {
    const NAMES: [&str; 133] = [
        "Unknown",
        "EPERM",
        "ENOENT",
        "ESRCH",
        "EINTR",
        "EIO",
        "ENXIO",
        "E2BIG",
        "ENOEXEC",
        "EBADF",
        "ECHILD",
        "EAGAIN",
        "ENOMEM",
        "EACCES",
        "EFAULT",
        "ENOTBLK",
        "EBUSY",
        "EEXIST",
        "EXDEV",
        "ENODEV",
        "ENOTDIR",
        "EISDIR",
        "EINVAL",
        "ENFILE",
        "EMFILE",
        "ENOTTY",
        "ETXTBSY",
        "EFBIG",
        "ENOSPC",
        "ESPIPE",
        "EROFS",
        "EMLINK",
        "EPIPE",
        "EDOM",
        "ERANGE",
        "EDEADLOCK",
        "ENAMETOOLONG",
        "ENOLCK",
        "ENOSYS",
        "ENOTEMPTY",
        "ELOOP",
        "Unknown",
        "ENOMSG",
        "EIDRM",
        "ECHRNG",
        "EL2NSYNC",
        "EL3HLT",
        "EL3RST",
        "ELNRNG",
        "EUNATCH",
        "ENOCSI",
        "EL2HLT",
        "EBADE",
        "EBADR",
        "EXFULL",
        "ENOANO",
        "EBADRQC",
        "EBADSLT",
        "Unknown",
        "EBFONT",
        "ENOSTR",
        "ENODATA",
        "ETIME",
        "ENOSR",
        "ENONET",
        "ENOPKG",
        "EREMOTE",
        "ENOLINK",
        "EADV",
        "ESRMNT",
        "ECOMM",
        "EPROTO",
        "EMULTIHOP",
        "EDOTDOT",
        "EBADMSG",
        "EOVERFLOW",
        "ENOTUNIQ",
        "EBADFD",
        "EREMCHG",
        "ELIBACC",
        "ELIBBAD",
        "ELIBSCN",
        "ELIBMAX",
        "ELIBEXEC",
        "EILSEQ",
        "ERESTART",
        "ESTRPIPE",
        "EUSERS",
        "ENOTSOCK",
        "EDESTADDRREQ",
        "EMSGSIZE",
        "EPROTOTYPE",
        "ENOPROTOOPT",
        "EPROTONOSUPPORT",
        "ESOCKTNOSUPPORT",
        "ENOTSUP",
        "EPFNOSUPPORT",
        "EAFNOSUPPORT",
        "EADDRINUSE",
        "EADDRNOTAVAIL",
        "ENETDOWN",
        "ENETUNREACH",
        "ENETRESET",
        "ECONNABORTED",
        "ECONNRESET",
        "ENOBUFS",
        "EISCONN",
        "ENOTCONN",
        "ESHUTDOWN",
        "ETOOMANYREFS",
        "ETIMEDOUT",
        "ECONNREFUSED",
        "EHOSTDOWN",
        "EHOSTUNREACH",
        "EALREADY",
        "EINPROGRESS",
        "ESTALE",
        "EUCLEAN",
        "ENOTNAM",
        "ENAVAIL",
        "EISNAM",
        "EREMOTEIO",
        "EDQUOT",
        "ENOMEDIUM",
        "EMEDIUMTYPE",
        "ECANCELED",
        "ENOKEY",
        "EKEYEXPIRED",
        "EKEYREVOKED",
        "EKEYREJECTED",
        "EOWNERDEAD",
        "ENOTRECOVERABLE",
        "ERFKILL",
    ];
    usize::try_from(errno)
        .ok()
        .and_then(|i| NAMES.get(i))
        .copied()
        .unwrap_or("Unknown")
}

/// An errno as `ENOENT (No such file or directory)`.
pub fn errno_text(errno: i32) -> String {
    let text = std::io::Error::from_raw_os_error(errno).to_string();
    // io::Error appends " (os error N)": the name already says which.
    let text = text
        .strip_suffix(&format!(" (os error {errno})"))
        .unwrap_or(&text);
    format!("{} ({text})", errno_name(errno))
}

/// Errors of a mon command that mean the connection is no use any more: drop it and connect
/// again on a later call. Not a mon error such as ENOENT, not an OSD's timeout (that OSD is
/// slow or gone, the cluster is not).
fn cluster_gone(errno: i32) -> bool {
    matches!(errno, ETIMEDOUT | ENOTCONN | ESHUTDOWN)
}

// ------------------------------------------------------------------------------------------
// Reconnect backoff
// ------------------------------------------------------------------------------------------

/// Delays between connection attempts: doubling from `first`, at most `max`, forever.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Backoff {
    next: Duration,
    max: Duration,
}

impl Backoff {
    pub const FIRST: Duration = Duration::from_secs(1);
    pub const MAX: Duration = Duration::from_secs(60);

    pub fn new(first: Duration, max: Duration) -> Self {
        Self {
            next: first.min(max),
            max,
        }
    }
}

impl Default for Backoff {
    fn default() -> Self {
        Self::new(Self::FIRST, Self::MAX)
    }
}

impl Iterator for Backoff {
    type Item = Duration;
    fn next(&mut self) -> Option<Duration> {
        let delay = self.next;
        self.next = delay.saturating_mul(2).min(self.max);
        Some(delay)
    }
}

/// librados' own timeouts, so that a blocked call returns (and frees its thread) even after the
/// caller gave up: mon commands and the connection get the whole call's timeout; an OSD gets
/// half of it, so that one hung OSD does not cost the answers of the others. Whole seconds (the
/// options are `std::chrono::seconds`), at least 1 (0 would mean "wait forever").
pub fn librados_timeouts(timeout: Duration) -> [(&'static str, String); 3] {
    let secs = |d: Duration| {
        let s = d.as_secs() + u64::from(d.subsec_nanos() > 0);
        s.max(1).to_string()
    };
    [
        ("rados_mon_op_timeout", secs(timeout)),
        ("rados_osd_op_timeout", secs(timeout / 2)),
        ("client_mount_timeout", secs(timeout)),
    ]
}

// ------------------------------------------------------------------------------------------
// Session: one shared connection, blocking calls off the runtime, reconnects
// ------------------------------------------------------------------------------------------

/// A connected handle (or a stand-in in tests). Calls block; they are made from blocking
/// threads, several at once.
pub trait Conn: Send + Sync + 'static {
    fn mon_command(&self, json: &str) -> Reply;
    fn osd_command(&self, osd: u32, json: &str) -> Reply;
}

/// Makes connections (blocking).
pub trait Connector: Send + Sync + 'static {
    type Conn: Conn;
    fn connect(&self) -> Result<Self::Conn, ConnectError>;
}

/// Why a connection could not be made. `Configure` failures (no ceph.conf, an option librados
/// rejects) will not go away by retrying; `Connect` ones (cluster unreachable, auth) may.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct ConnectError {
    pub stage: ConnectStage,
    pub message: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConnectStage {
    Configure,
    Connect,
}

/// One connection shared by every call, made on first use (or by [`Session::ensure_connected`])
/// and made again, with [`Backoff`] between failed attempts, after the cluster went away.
pub struct Session<K: Connector> {
    inner: Arc<Inner<K>>,
    /// Replies over this are refused ([`CephError::TooLarge`]) before they are parsed; librados
    /// has them in its own buffer already, but nothing keeps or parses them.
    max_reply_bytes: u64,
}

impl<K: Connector> Clone for Session<K> {
    fn clone(&self) -> Self {
        Self {
            inner: Arc::clone(&self.inner),
            max_reply_bytes: self.max_reply_bytes,
        }
    }
}

struct Inner<K: Connector> {
    connector: K,
    timeout: Duration,
    backoff: Backoff,
    slot: Mutex<Slot<K::Conn>>,
    /// One connection attempt at a time; the others wait for its outcome.
    connecting: tokio::sync::Mutex<()>,
}

struct Slot<C> {
    conn: Option<Arc<C>>,
    backoff: Backoff,
    /// After a failed attempt: no new attempt before this.
    retry_at: Option<tokio::time::Instant>,
    last_error: Option<String>,
    failed_attempts: u32,
}

impl<K: Connector> Session<K> {
    /// Not connected yet: the first call (or [`Self::ensure_connected`]) connects.
    pub fn new(connector: K, timeout: Duration) -> Self {
        Self::with_backoff(connector, timeout, Backoff::default())
    }

    /// See [`crate::ceph::cli::CliClient::with_max_reply_bytes`].
    pub fn with_max_reply_bytes(mut self, bytes: u64) -> Self {
        self.max_reply_bytes = bytes;
        self
    }

    pub fn with_backoff(connector: K, timeout: Duration, backoff: Backoff) -> Self {
        Self {
            max_reply_bytes: super::DEFAULT_MAX_REPLY_BYTES,
            inner: Arc::new(Inner {
                connector,
                timeout,
                backoff: backoff.clone(),
                slot: Mutex::new(Slot {
                    conn: None,
                    backoff,
                    retry_at: None,
                    last_error: None,
                    failed_attempts: 0,
                }),
                connecting: tokio::sync::Mutex::new(()),
            }),
        }
    }

    fn slot(&self) -> std::sync::MutexGuard<'_, Slot<K::Conn>> {
        // A panic while holding the lock leaves plain data behind: still usable.
        self.inner.slot.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn current(&self) -> Option<Arc<K::Conn>> {
        self.slot().conn.clone()
    }

    /// Connects now (ignoring the backoff), within the session's timeout.
    pub async fn ensure_connected(&self) -> Result<(), ConnectError> {
        if self.current().is_some() {
            return Ok(());
        }
        let deadline = tokio::time::Instant::now() + self.inner.timeout;
        self.connect(deadline, true).await.map(|_| ())
    }

    /// The current connection (connecting first, as a command would), for callers that make
    /// other librados calls than commands: the lease in `crate::lease::rados`.
    #[cfg(feature = "librados")]
    pub(crate) async fn connection(&self) -> Result<Arc<K::Conn>, ConnectError> {
        self.conn(tokio::time::Instant::now() + self.inner.timeout)
            .await
    }

    /// The connection, connecting first if there is none and the backoff allows it.
    async fn conn(&self, deadline: tokio::time::Instant) -> Result<Arc<K::Conn>, ConnectError> {
        if let Some(c) = self.current() {
            return Ok(c);
        }
        self.connect(deadline, false).await
    }

    async fn connect(
        &self,
        deadline: tokio::time::Instant,
        ignore_backoff: bool,
    ) -> Result<Arc<K::Conn>, ConnectError> {
        let _one_at_a_time = self.inner.connecting.lock().await;
        let now = tokio::time::Instant::now();
        {
            let slot = self.slot();
            // Another call connected while this one waited.
            if let Some(c) = &slot.conn {
                return Ok(Arc::clone(c));
            }
            if let (Some(at), false) = (slot.retry_at, ignore_backoff) {
                if now < at {
                    return Err(ConnectError {
                        stage: ConnectStage::Connect,
                        message: format!(
                            "not connected ({}); next attempt in {}",
                            slot.last_error.as_deref().unwrap_or("no attempt yet"),
                            fmt_duration(at - now)
                        ),
                    });
                }
            }
        }
        let connector_inner = Arc::clone(&self.inner);
        let task = tokio::task::spawn_blocking(move || connector_inner.connector.connect());
        let budget = deadline.saturating_duration_since(now);
        let result = match tokio::time::timeout(budget, task).await {
            Ok(Ok(r)) => r,
            Ok(Err(join)) => Err(ConnectError {
                stage: ConnectStage::Connect,
                message: format!("the connecting thread failed: {join}"),
            }),
            // The thread goes on until client_mount_timeout; a connection it makes after all
            // is shut down when the task's result is dropped.
            Err(_) => Err(ConnectError {
                stage: ConnectStage::Connect,
                message: format!("no connection within {}", fmt_duration(budget)),
            }),
        };
        let mut slot = self.slot();
        match result {
            Ok(conn) => {
                let conn = Arc::new(conn);
                if slot.failed_attempts > 0 {
                    tracing::info!(
                        failed_attempts = slot.failed_attempts,
                        "librados: connected to the cluster again"
                    );
                } else {
                    tracing::debug!("librados: connected to the cluster");
                }
                slot.conn = Some(Arc::clone(&conn));
                slot.backoff = self.inner.backoff.clone();
                slot.retry_at = None;
                slot.last_error = None;
                slot.failed_attempts = 0;
                Ok(conn)
            }
            Err(e) => {
                let delay = slot.backoff.next().unwrap_or(Backoff::MAX);
                slot.retry_at = Some(tokio::time::Instant::now() + delay);
                slot.last_error = Some(e.message.clone());
                slot.failed_attempts = slot.failed_attempts.saturating_add(1);
                tracing::warn!(error = %e.message, retry_in = %fmt_duration(delay), "librados: cannot connect to the cluster");
                Err(e)
            }
        }
    }

    /// Drops the connection if it is still the one identified by `id` (a call that failed on
    /// an older one must not drop a newer one). The shutdown runs on a blocking thread.
    fn forget(&self, id: usize, why: &str) {
        let old = {
            let mut slot = self.slot();
            match &slot.conn {
                Some(c) if Arc::as_ptr(c) as usize == id => slot.conn.take(),
                _ => None,
            }
        };
        if let Some(old) = old {
            tracing::warn!(
                reason = why,
                "librados: dropping the connection; the next call connects again"
            );
            drop(tokio::task::spawn_blocking(move || drop(old)));
        }
    }

    pub async fn run(&self, command: &CephCommand) -> Result<Output, CephError> {
        let started = std::time::Instant::now();
        let deadline = tokio::time::Instant::now() + self.inner.timeout;
        let request = translate(command)?;
        let conn = self
            .conn(deadline)
            .await
            .map_err(|e| CephError::Connect { message: e.message })?;
        let id = Arc::as_ptr(&conn) as usize;
        let to_mon = matches!(request, Request::Mon { .. });
        let budget = deadline.saturating_duration_since(tokio::time::Instant::now());
        let blocking_deadline = std::time::Instant::now() + budget;
        let fence = command.not_after.map(tokio::time::Instant::into_std);
        // The Arc moves into the thread: if this call is abandoned, the connection lives (and
        // is shut down, if forgotten meanwhile) there, never on the runtime.
        let task = tokio::task::spawn_blocking(move || {
            execute(&*conn, &request, blocking_deadline, fence)
        });
        let timeout_error = || CephError::Timeout {
            command: command.to_string(),
            timeout: self.inner.timeout,
        };
        let executed = match tokio::time::timeout(budget, task).await {
            Ok(Ok(Some(executed))) => executed,
            Ok(Ok(None)) => return Err(command.fenced()),
            Ok(Err(join)) => {
                return Err(CephError::Io {
                    command: command.to_string(),
                    source: std::io::Error::other(join.to_string()),
                })
            }
            Err(_elapsed) => {
                if to_mon {
                    self.forget(id, "a mon command did not finish in time");
                }
                return Err(timeout_error());
            }
        };
        if let Some(errno) = executed.mon_errno.filter(|e| cluster_gone(*e)) {
            self.forget(id, errno_name(errno));
            if errno == ETIMEDOUT {
                return Err(timeout_error());
            }
        }
        let p = executed.printed;
        if p.stdout.len() as u64 > self.max_reply_bytes {
            return Err(CephError::TooLarge {
                command: command.to_string(),
                cap: self.max_reply_bytes,
            });
        }
        Ok(Output {
            stdout: p.stdout,
            stderr: p.stderr,
            code: Some(p.code),
            elapsed: started.elapsed(),
        })
    }
}

impl<K: Connector> Client for Session<K> {
    async fn run(&self, command: &CephCommand) -> Result<Output, CephError> {
        Session::run(self, command).await
    }
}

/// What a request gave, as the CLI would print it, and the errno of a mon command that failed.
struct Executed {
    printed: Printed,
    mon_errno: Option<i32>,
}

/// Runs one request on a blocking thread; `None`: not sent, its fence had passed (checked
/// right before the call, the latest this side can; OSDs a `tell` has not asked when it passes
/// are not asked).
fn execute<C: Conn>(
    conn: &C,
    request: &Request,
    deadline: std::time::Instant,
    fence: Option<std::time::Instant>,
) -> Option<Executed> {
    if fence.is_some_and(|f| std::time::Instant::now() >= f) {
        return None;
    }
    let deadline = fence.map_or(deadline, |f| f.min(deadline));
    Some(match request {
        Request::Mon { json } => {
            let reply = conn.mon_command(json);
            Executed {
                mon_errno: (reply.ret < 0).then_some(-reply.ret),
                printed: print_mon(&reply),
            }
        }
        Request::Tell { target, json } => {
            let osds = match target {
                TellTarget::One(n) => vec![*n],
                TellTarget::All => {
                    let reply = conn.mon_command(OSD_LS_JSON);
                    if reply.ret < 0 {
                        return Some(Executed {
                            mon_errno: Some(-reply.ret),
                            printed: print_mon(&reply),
                        });
                    }
                    match parse_osd_ls(&reply.outbuf) {
                        Ok(osds) => osds,
                        Err(message) => {
                            return Some(Executed {
                                mon_errno: None,
                                printed: Printed {
                                    stdout: Vec::new(),
                                    stderr: format!("Error EINVAL: {message}\n"),
                                    code: EINVAL,
                                },
                            })
                        }
                    }
                }
            };
            let replies = tell_each(conn, &osds, json, deadline);
            Executed {
                mon_errno: None,
                printed: print_tell(&replies),
            }
        }
    })
}

/// Sends `json` to each OSD, up to [`TELL_THREADS`] at a time, replies in the order of `osds`.
/// An OSD not yet asked when `deadline` passes is not asked (an ETIMEDOUT reply).
fn tell_each<C: Conn>(
    conn: &C,
    osds: &[u32],
    json: &str,
    deadline: std::time::Instant,
) -> Vec<(u32, Reply)> {
    let next = AtomicUsize::new(0);
    let replies: Vec<Mutex<Option<Reply>>> = osds.iter().map(|_| Mutex::new(None)).collect();
    let work = || loop {
        let i = next.fetch_add(1, Ordering::Relaxed);
        let Some(&osd) = osds.get(i) else { break };
        let reply = if std::time::Instant::now() >= deadline {
            Reply::err(ETIMEDOUT, "not asked: the command's time was up")
        } else {
            conn.osd_command(osd, json)
        };
        if let Some(slot) = replies.get(i) {
            *slot.lock().unwrap_or_else(|e| e.into_inner()) = Some(reply);
        }
    };
    std::thread::scope(|s| {
        let helpers = TELL_THREADS.min(osds.len()).saturating_sub(1);
        for _ in 0..helpers {
            // If a thread cannot be started, the others (and this one) do its share.
            let _ = std::thread::Builder::new()
                .name("crb-rados-tell".into())
                .spawn_scoped(s, work);
        }
        work();
    });
    osds.iter()
        .zip(replies)
        .map(|(&osd, r)| {
            let reply = r
                .into_inner()
                .unwrap_or_else(|e| e.into_inner())
                .unwrap_or_else(|| Reply::err(ETIMEDOUT, "no reply"));
            (osd, reply)
        })
        .collect()
}

fn fmt_duration(d: Duration) -> String {
    // Milliseconds are noise in a retry delay or a timeout: tenths of a second below one
    // second, whole seconds above (998 ms is "1s").
    let tenths = (d.as_millis() + 50) / 100;
    let d = if tenths >= 10 {
        Duration::from_secs(u64::try_from((tenths + 5) / 10).unwrap_or(u64::MAX))
    } else {
        Duration::from_millis(u64::try_from(tenths * 100).unwrap_or(u64::MAX))
    };
    humantime::format_duration(d).to_string()
}

// ------------------------------------------------------------------------------------------
// Settings of a librados connection
// ------------------------------------------------------------------------------------------

/// How to connect: the same `--ceph-conf`, `--ceph-name`, `--ceph-keyring` and timeout as the
/// CLI adapter gets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RadosSettings {
    /// ceph.conf; `None` searches where librados (and the CLI) look: `$CEPH_CONF`,
    /// `/etc/ceph/ceph.conf`, `~/.ceph/config`, `./ceph.conf`.
    pub conf: Option<String>,
    /// e.g. `client.admin` (the default, as for the CLI).
    pub name: Option<String>,
    /// `None`: the `keyring` of ceph.conf, or librados' default locations.
    pub keyring: Option<String>,
    pub timeout: Duration,
}

impl RadosSettings {
    pub const DEFAULT_NAME: &'static str = "client.admin";

    /// The options set on the handle before connecting, in order.
    pub fn options(&self) -> Vec<(&'static str, String)> {
        let mut options = Vec::new();
        if let Some(k) = &self.keyring {
            options.push(("keyring", k.clone()));
        }
        options.extend(librados_timeouts(self.timeout));
        // librados' own error lines would interleave with this program's (possibly JSON) log;
        // its errors come back as errnos, explained in our messages.
        options.push(("log_to_stderr", "false".to_string()));
        options.push(("err_to_stderr", "false".to_string()));
        options
    }
}

#[cfg(feature = "librados")]
pub(crate) use sys::Handle;
#[cfg(feature = "librados")]
pub use sys::RadosClient;

#[cfg(feature = "librados")]
mod sys {
    //! Our binding of librados (`librados.h` of 16.2; the signatures have been stable since
    //! Luminous): only the functions this backend calls.

    use std::ffi::{c_char, c_int, c_void, CStr, CString};
    use std::ptr;
    use std::time::Duration;

    use super::{
        errno_text, Conn, ConnectError, ConnectStage, Connector, RadosSettings, Reply, Session,
        EINVAL, ENOENT, ETIMEDOUT,
    };
    use crate::ceph::{CephCommand, CephError, Client, Output};

    const EPERM: i32 = 1;
    const EACCES: i32 = 13;

    #[allow(non_camel_case_types)]
    type rados_t = *mut c_void;

    #[link(name = "rados")]
    extern "C" {
        fn rados_create2(
            pcluster: *mut rados_t,
            clustername: *const c_char,
            name: *const c_char,
            flags: u64,
        ) -> c_int;
        fn rados_conf_read_file(cluster: rados_t, path: *const c_char) -> c_int;
        fn rados_conf_set(cluster: rados_t, option: *const c_char, value: *const c_char) -> c_int;
        fn rados_connect(cluster: rados_t) -> c_int;
        fn rados_shutdown(cluster: rados_t);
        fn rados_mon_command(
            cluster: rados_t,
            cmd: *mut *const c_char,
            cmdlen: usize,
            inbuf: *const c_char,
            inbuflen: usize,
            outbuf: *mut *mut c_char,
            outbuflen: *mut usize,
            outs: *mut *mut c_char,
            outslen: *mut usize,
        ) -> c_int;
        fn rados_osd_command(
            cluster: rados_t,
            osdid: c_int,
            cmd: *mut *const c_char,
            cmdlen: usize,
            inbuf: *const c_char,
            inbuflen: usize,
            outbuf: *mut *mut c_char,
            outbuflen: *mut usize,
            outs: *mut *mut c_char,
            outslen: *mut usize,
        ) -> c_int;
        fn rados_buffer_free(buf: *mut c_char);
    }

    /// A cluster handle, created by [`Handle::connect`] and shut down on drop.
    pub struct Handle {
        raw: rados_t,
    }

    // SAFETY: a rados_t is a pointer to librados' RadosClient, which is not tied to the thread
    // that created it. Once connected, the calls made here (mon and OSD commands) take the
    // locks of RadosClient/MonClient/Objecter and may run from several threads at once (Ceph's
    // python binding and its CLI do so); librados documents as not thread-safe only changing
    // an io context's settings (no io context is used) and rados_conf_parse_env (not called).
    // Configuration happens in `connect`, before the handle is shared.
    unsafe impl Send for Handle {}
    // SAFETY: see `Send`: every method takes `&self` and librados synchronises internally.
    unsafe impl Sync for Handle {}

    impl Drop for Handle {
        fn drop(&mut self) {
            // SAFETY: `raw` came from a successful rados_create2 and is shut down exactly once,
            // here (Handle is neither Clone nor Copy); no call can be running on it because
            // calls borrow the Handle. rados_shutdown also frees a handle that never connected.
            unsafe { rados_shutdown(self.raw) }
        }
    }

    fn cstring(what: &str, value: &str) -> Result<CString, ConnectError> {
        CString::new(value).map_err(|_| ConnectError {
            stage: ConnectStage::Configure,
            message: format!("{what} {value:?} contains a NUL byte"),
        })
    }

    impl Handle {
        /// Creates a handle, reads ceph.conf, sets the options and connects. Blocks (up to
        /// `client_mount_timeout`).
        pub fn connect(settings: &RadosSettings) -> Result<Handle, ConnectError> {
            let configure = |message: String| ConnectError {
                stage: ConnectStage::Configure,
                message,
            };
            let name_str = settings
                .name
                .as_deref()
                .unwrap_or(RadosSettings::DEFAULT_NAME);
            let name = cstring("the Ceph user name", name_str)?;
            let mut raw: rados_t = ptr::null_mut();
            // SAFETY: `raw` is a valid out-pointer; the cluster and user names are
            // NUL-terminated strings that outlive the call (librados copies them).
            let ret = unsafe { rados_create2(&mut raw, c"ceph".as_ptr(), name.as_ptr(), 0) };
            if ret < 0 || raw.is_null() {
                return Err(configure(format!(
                    "rados_create2 as {name_str}: {}",
                    errno_text(-ret)
                )));
            }
            // From here every return path shuts the handle down (Drop).
            let handle = Handle { raw };

            let conf = settings
                .conf
                .as_deref()
                .map(|p| cstring("the ceph.conf path", p))
                .transpose()?;
            let conf_ptr = conf.as_ref().map_or(ptr::null(), |c| c.as_ptr());
            // SAFETY: `handle.raw` is a created, not yet connected handle, as
            // rados_conf_read_file requires; the path is NUL-terminated and outlives the call,
            // or null, which makes librados search its default locations.
            let ret = unsafe { rados_conf_read_file(handle.raw, conf_ptr) };
            if ret < 0 {
                return Err(configure(match (&settings.conf, -ret) {
                    (None, ENOENT) => "no ceph.conf found ($CEPH_CONF, /etc/ceph/ceph.conf, ~/.ceph/config, ./ceph.conf); see --ceph-conf".to_string(),
                    (Some(p), errno) => format!("reading ceph.conf {p}: {}", errno_text(errno)),
                    (None, errno) => format!("reading ceph.conf: {}", errno_text(errno)),
                }));
            }
            for (option, value) in settings.options() {
                let o = cstring("a librados option", option)?;
                let v = cstring("a librados option value", &value)?;
                // SAFETY: as above (created, not connected); both strings are NUL-terminated
                // and outlive the call (librados copies the value).
                let ret = unsafe { rados_conf_set(handle.raw, o.as_ptr(), v.as_ptr()) };
                if ret < 0 {
                    return Err(configure(format!(
                        "librados rejects {option}={value}: {}",
                        errno_text(-ret)
                    )));
                }
            }
            // SAFETY: the handle is created and configured; rados_connect is called once.
            let ret = unsafe { rados_connect(handle.raw) };
            if ret < 0 {
                let errno = -ret;
                let hint = match errno {
                    ENOENT => "; no keyring found for this user? see --ceph-keyring",
                    EPERM | EACCES => "; wrong key or missing caps for this user? see --ceph-name and --ceph-keyring",
                    ETIMEDOUT => "; are the monitors of ceph.conf reachable?",
                    _ => "",
                };
                return Err(ConnectError {
                    stage: ConnectStage::Connect,
                    message: format!("connecting as {name_str}: {}{hint}", errno_text(errno)),
                });
            }
            Ok(handle)
        }

        /// The connected `rados_t`, for the lease's object calls (`crate::lease::rados`). It
        /// stays valid as long as this Handle is borrowed.
        pub(crate) fn as_raw(&self) -> *mut c_void {
            self.raw
        }

        fn command(&self, osd: Option<u32>, json: &str) -> Reply {
            let Ok(cmd) = CString::new(json) else {
                return Reply::err(EINVAL, "the command contains a NUL byte");
            };
            let osd = match osd.map(c_int::try_from).transpose() {
                Ok(osd) => osd,
                Err(_) => return Reply::err(EINVAL, "OSD id out of range"),
            };
            let mut cmds: [*const c_char; 1] = [cmd.as_ptr()];
            // An empty, valid input buffer (librados copies `inbuflen` = 0 bytes of it).
            let inbuf: &CStr = c"";
            let mut outbuf: *mut c_char = ptr::null_mut();
            let mut outbuf_len: usize = 0;
            let mut outs: *mut c_char = ptr::null_mut();
            let mut outs_len: usize = 0;
            // SAFETY: `self.raw` is a connected handle (a Handle only exists after a
            // successful rados_connect) that stays alive for the call (`&self`). `cmds` is one
            // pointer to a NUL-terminated string that outlives the call, and cmdlen is 1. The
            // input buffer is valid for its length 0. The four out-pointers point to locals,
            // which librados sets (a malloc'd buffer or null, and its length) on every return.
            let ret = unsafe {
                match osd {
                    None => rados_mon_command(
                        self.raw,
                        cmds.as_mut_ptr(),
                        1,
                        inbuf.as_ptr(),
                        0,
                        &mut outbuf,
                        &mut outbuf_len,
                        &mut outs,
                        &mut outs_len,
                    ),
                    Some(id) => rados_osd_command(
                        self.raw,
                        id,
                        cmds.as_mut_ptr(),
                        1,
                        inbuf.as_ptr(),
                        0,
                        &mut outbuf,
                        &mut outbuf_len,
                        &mut outs,
                        &mut outs_len,
                    ),
                }
            };
            // Owned right away, so both are freed on every path.
            let outbuf = RadosBuf {
                ptr: outbuf,
                len: outbuf_len,
            };
            let outs = RadosBuf {
                ptr: outs,
                len: outs_len,
            };
            Reply {
                ret,
                outbuf: outbuf.to_vec(),
                outs: String::from_utf8_lossy(&outs.to_vec()).into_owned(),
            }
        }
    }

    /// A buffer librados allocated for a command's output.
    struct RadosBuf {
        ptr: *mut c_char,
        len: usize,
    }

    impl RadosBuf {
        fn to_vec(&self) -> Vec<u8> {
            if self.ptr.is_null() || self.len == 0 {
                return Vec::new();
            }
            // SAFETY: librados set `ptr` to a buffer of `len` bytes it allocated (and copied
            // the output into); it stays valid until rados_buffer_free in Drop.
            unsafe { std::slice::from_raw_parts(self.ptr.cast::<u8>(), self.len) }.to_vec()
        }
    }

    impl Drop for RadosBuf {
        fn drop(&mut self) {
            if !self.ptr.is_null() {
                // SAFETY: `ptr` was allocated by librados for a command's output, as
                // rados_buffer_free expects, and is freed once (RadosBuf is not Clone).
                unsafe { rados_buffer_free(self.ptr) }
            }
        }
    }

    impl Conn for Handle {
        fn mon_command(&self, json: &str) -> Reply {
            self.command(None, json)
        }
        fn osd_command(&self, osd: u32, json: &str) -> Reply {
            self.command(Some(osd), json)
        }
    }

    /// Connects with librados.
    pub struct Librados(RadosSettings);

    impl Connector for Librados {
        type Conn = Handle;
        fn connect(&self) -> Result<Handle, ConnectError> {
            Handle::connect(&self.0)
        }
    }

    /// The librados backend: one connection, held, shared by every call (cheap to clone).
    #[derive(Clone)]
    pub struct RadosClient {
        session: Session<Librados>,
        settings: RadosSettings,
    }

    impl RadosClient {
        /// A client that connects on its first call.
        pub fn new(settings: RadosSettings) -> Self {
            Self {
                session: Session::new(Librados(settings.clone()), settings.timeout),
                settings,
            }
        }

        /// Connects now: `conf` (None: librados' default locations), `name` (e.g.
        /// `client.admin`, the default), `keyring` (None: from ceph.conf), each call's timeout.
        pub async fn connect(
            conf: Option<&str>,
            name: Option<&str>,
            keyring: Option<&str>,
            timeout: Duration,
        ) -> Result<Self, ConnectError> {
            let client = Self::new(RadosSettings {
                conf: conf.map(str::to_string),
                name: name.map(str::to_string),
                keyring: keyring.map(str::to_string),
                timeout,
            });
            client.ensure_connected().await?;
            Ok(client)
        }

        pub async fn ensure_connected(&self) -> Result<(), ConnectError> {
            self.session.ensure_connected().await
        }

        pub fn settings(&self) -> &RadosSettings {
            &self.settings
        }

        /// The connected handle (connecting first): see [`Session::connection`].
        pub(crate) async fn connection(&self) -> Result<std::sync::Arc<Handle>, ConnectError> {
            self.session.connection().await
        }

        /// See [`Session::with_max_reply_bytes`].
        pub fn with_max_reply_bytes(mut self, bytes: u64) -> Self {
            self.session = self.session.with_max_reply_bytes(bytes);
            self
        }
    }

    impl Client for RadosClient {
        async fn run(&self, command: &CephCommand) -> Result<Output, CephError> {
            self.session.run(command).await
        }
    }
}

#[cfg(test)]
mod tests;
