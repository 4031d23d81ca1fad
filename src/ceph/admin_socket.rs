//! The admin sockets of the OSDs on this host (`ceph daemon osd.N ...`), for per-host collection:
//! no cluster credentials, no `ceph` process, one round trip per OSD.
//!
//! Wire protocol (Ceph's `AdminSocket::do_accept` in src/common/admin_socket.cc, the same since
//! at least Luminous; `ceph daemon` in ceph_daemon.py and ceph-exporter speak it): connect, write
//! the JSON command followed by a NUL byte (the daemon reads at most 1023 bytes of it), read a
//! 4-byte big-endian length, then exactly that many bytes; the daemon then closes. A failed
//! command still gets a reply: `ERROR: (22) Invalid argument\n<message>\n`, since the protocol
//! has no status code. Without `"format":"json"` the reply is pretty-printed (138 KB instead of
//! 18.6 KB for `perf histogram dump` on 16.2.15).
//!
//! [`AdminSocketClient`] answers the two [`Client`] commands host mode needs, `tell osd.* perf
//! histogram dump` and `tell osd.* perf dump` (each optionally filtered by logger and counter),
//! from every local OSD socket, formatted like the CLI's multi-OSD output, so the collector and
//! the `tell` parsers work unchanged.

use std::io;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::net::UnixStream;

use super::{first_lines, CephCommand, CephError, Client, Output};

/// Ceph's default `run dir`, where `admin socket = $run_dir/$cluster-$name.asok` puts them.
pub const DEFAULT_DIR: &str = "/var/run/ceph";

/// Largest reply accepted. A `perf histogram dump` is ~19 KB compact (~140 KB pretty); a length
/// beyond this means the peer is not a Ceph admin socket or the stream is corrupt, and reading
/// it would only exhaust memory.
pub const MAX_REPLY_BYTES: u32 = 64 * 1024 * 1024;

/// The daemon reads the command into a 1024-byte buffer, terminator included, and drops the
/// connection without a word when it is longer.
pub const MAX_COMMAND_BYTES: usize = 1023;

/// What the CLI prints on stderr (and exits with) when an OSD cannot be reached.
const ENXIO: i32 = 6;

/// Why talking to one admin socket failed. Each message names the socket and what to check.
#[derive(Debug, thiserror::Error)]
pub enum AdminSocketError {
    #[error(
        "admin socket {} does not exist: is that OSD running on this host, and is this the \
         directory of Ceph's `admin socket` option (default {DEFAULT_DIR}/$cluster-$name.asok)?",
        path.display()
    )]
    Missing { path: PathBuf },
    #[error(
        "permission denied on admin socket {}: connecting needs write permission on the socket \
         (root or the user the daemons run as, usually ceph; see Ceph's `admin socket mode`)",
        path.display()
    )]
    PermissionDenied { path: PathBuf },
    #[error(
        "nothing listens on admin socket {} (connection refused): the daemon is not running and \
         left a stale socket file behind (crashed or killed?)",
        path.display()
    )]
    Refused { path: PathBuf },
    #[error(
        "admin socket {} accepts no more connections (its queue is full): the daemon is hung or \
         flooded with admin commands",
        path.display()
    )]
    Busy { path: PathBuf },
    #[error(
        "admin socket {} did not answer within {timeout:?}: daemon hung or overloaded? (it \
         serves one admin command at a time)",
        path.display()
    )]
    Timeout { path: PathBuf, timeout: Duration },
    #[error(
        "admin socket {} closed the connection after {got} of the {expected} bytes of the \
         {what}: the daemon stopped mid-reply, or dropped a request it could not read",
        path.display()
    )]
    ShortRead {
        path: PathBuf,
        what: &'static str,
        expected: u64,
        got: u64,
    },
    #[error(
        "admin socket {} announced a reply of {len} bytes, more than the {max} accepted: is it \
         a Ceph admin socket?",
        path.display()
    )]
    TooLarge { path: PathBuf, len: u32, max: u32 },
    #[error(
        "command for admin socket {} is {len} bytes, more than the {MAX_COMMAND_BYTES} a Ceph \
         daemon reads",
        path.display()
    )]
    CommandTooLong { path: PathBuf, len: usize },
    #[error("the daemon behind {} refused `{command}`: {message}", path.display())]
    Daemon {
        path: PathBuf,
        command: String,
        message: String,
    },
    #[error("{op} admin socket {}: {source}", path.display())]
    Io {
        path: PathBuf,
        op: &'static str,
        #[source]
        source: io::Error,
    },
    #[error(
        "cannot list the admin socket directory {}: {source} (the directory of Ceph's `admin \
         socket` option, default {DEFAULT_DIR})",
        dir.display()
    )]
    DirUnreadable {
        dir: PathBuf,
        #[source]
        source: io::Error,
    },
}

impl AdminSocketError {
    /// Short, bounded label value, like [`CephError::reason`].
    pub fn reason(&self) -> &'static str {
        match self {
            AdminSocketError::Missing { .. } => "missing",
            AdminSocketError::PermissionDenied { .. } => "permission_denied",
            AdminSocketError::Refused { .. } => "refused",
            AdminSocketError::Busy { .. } => "busy",
            AdminSocketError::Timeout { .. } => "timeout",
            AdminSocketError::ShortRead { .. } => "short_read",
            AdminSocketError::TooLarge { .. } => "too_large",
            AdminSocketError::CommandTooLong { .. } => "command_too_long",
            AdminSocketError::Daemon { .. } => "daemon_error",
            AdminSocketError::Io { .. } => "io",
            AdminSocketError::DirUnreadable { .. } => "dir_unreadable",
        }
    }
}

/// Sends one command to an admin socket and returns the reply, under `timeout` for the whole
/// exchange. A reply the daemon marks as an error (`ERROR: ...`) is [`AdminSocketError::Daemon`].
pub async fn admin_command(
    path: &Path,
    command: &Value,
    timeout: Duration,
) -> Result<Vec<u8>, AdminSocketError> {
    // Compact serialization escapes control characters inside strings, so the request holds no
    // raw NUL or newline, the two bytes that end a command.
    let text = command.to_string();
    if text.len() > MAX_COMMAND_BYTES {
        return Err(AdminSocketError::CommandTooLong {
            path: path.to_path_buf(),
            len: text.len(),
        });
    }
    match tokio::time::timeout(timeout, exchange(path, &text)).await {
        Ok(result) => result,
        Err(_elapsed) => Err(AdminSocketError::Timeout {
            path: path.to_path_buf(),
            timeout,
        }),
    }
}

async fn exchange(path: &Path, command: &str) -> Result<Vec<u8>, AdminSocketError> {
    let io_err = |op: &'static str| {
        move |source| AdminSocketError::Io {
            path: path.to_path_buf(),
            op,
            source,
        }
    };
    let mut stream = UnixStream::connect(path)
        .await
        .map_err(|e| connect_error(path, e))?;
    let mut request = Vec::with_capacity(command.len() + 1);
    request.extend_from_slice(command.as_bytes());
    request.push(0);
    stream
        .write_all(&request)
        .await
        .map_err(io_err("writing the command to"))?;

    let mut len = [0u8; 4];
    let got = read_full(&mut stream, &mut len)
        .await
        .map_err(io_err("reading the reply length from"))?;
    if got < len.len() {
        return Err(AdminSocketError::ShortRead {
            path: path.to_path_buf(),
            what: "reply length",
            expected: len.len() as u64,
            got: got as u64,
        });
    }
    let len = u32::from_be_bytes(len);
    if len > MAX_REPLY_BYTES {
        return Err(AdminSocketError::TooLarge {
            path: path.to_path_buf(),
            len,
            max: MAX_REPLY_BYTES,
        });
    }
    // Grow with what really arrives rather than trusting the announced length up front.
    let mut reply = Vec::with_capacity((len as usize).min(1 << 20));
    (&mut stream)
        .take(u64::from(len))
        .read_to_end(&mut reply)
        .await
        .map_err(io_err("reading the reply from"))?;
    if reply.len() < len as usize {
        return Err(AdminSocketError::ShortRead {
            path: path.to_path_buf(),
            what: "reply",
            expected: u64::from(len),
            got: reply.len() as u64,
        });
    }
    if let Some(message) = daemon_error(&reply) {
        return Err(AdminSocketError::Daemon {
            path: path.to_path_buf(),
            command: command.to_string(),
            message,
        });
    }
    Ok(reply)
}

fn connect_error(path: &Path, e: io::Error) -> AdminSocketError {
    let path = path.to_path_buf();
    match e.kind() {
        io::ErrorKind::NotFound => AdminSocketError::Missing { path },
        io::ErrorKind::PermissionDenied => AdminSocketError::PermissionDenied { path },
        io::ErrorKind::ConnectionRefused => AdminSocketError::Refused { path },
        // Linux fails a non-blocking connect with EAGAIN when the listen backlog is full (the
        // daemon accepts one admin connection at a time; a hung one stops accepting).
        io::ErrorKind::WouldBlock => AdminSocketError::Busy { path },
        _ => AdminSocketError::Io {
            path,
            op: "connecting to",
            source: e,
        },
    }
}

/// Reads until `buf` is full or the peer closes; returns how many bytes arrived.
async fn read_full<R: AsyncRead + Unpin>(r: &mut R, buf: &mut [u8]) -> io::Result<usize> {
    let mut filled = 0;
    while filled < buf.len() {
        match r.read(&mut buf[filled..]).await? {
            0 => break,
            n => filled += n,
        }
    }
    Ok(filled)
}

/// The message of a reply the daemon marked as failed (`ERROR: (22) Invalid argument\nunknown
/// command prefix x\n`, then possibly the command's partial output). JSON never starts so.
fn daemon_error(reply: &[u8]) -> Option<String> {
    let rest = reply.strip_prefix(b"ERROR: ")?;
    let text = String::from_utf8_lossy(&rest[..rest.len().min(2000)]);
    Some(first_lines(&text, 3))
}

/// The OSD id in an admin socket's file name: `$cluster-osd.N.asok` (Ceph's default,
/// `ceph-osd.3.asok`) or `osd.N.asok` (`admin socket = .../$name.asok`). Sockets of mons, mgrs,
/// mdss and clients (`ceph-client.admin.1234.5678.asok`) are not OSDs.
pub fn osd_id_from_socket_name(name: &str) -> Option<u32> {
    let stem = name.strip_suffix(".asok")?;
    let id = match stem.strip_prefix("osd.") {
        Some(id) => id,
        None => {
            let (cluster, id) = stem.rsplit_once("-osd.")?;
            // A cluster name has no dot; this keeps `ceph-client.x-osd.3` out.
            if cluster.is_empty() || cluster.contains('.') {
                return None;
            }
            id
        }
    };
    // Digits only, no leading zero: the id must read back as the same `osd.N`.
    if id.is_empty()
        || !id.bytes().all(|b| b.is_ascii_digit())
        || (id.len() > 1 && id.starts_with('0'))
    {
        return None;
    }
    id.parse().ok()
}

/// The OSD admin sockets in `dir` (not recursive), as `("osd.N", path)` sorted by OSD id. Only
/// sockets count (a symlink to one too). When two files name the same OSD (two clusters in one
/// directory), the first by file name is kept (`ceph-osd.3.asok` before `osd.3.asok`).
pub fn discover_osd_sockets(dir: &Path) -> Result<Vec<(String, PathBuf)>, AdminSocketError> {
    use std::os::unix::fs::FileTypeExt;

    let unreadable = |source| AdminSocketError::DirUnreadable {
        dir: dir.to_path_buf(),
        source,
    };
    let mut found: Vec<(u32, PathBuf)> = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(unreadable)? {
        let entry = entry.map_err(unreadable)?;
        let name = entry.file_name();
        let Some(id) = name.to_str().and_then(osd_id_from_socket_name) else {
            continue;
        };
        let path = entry.path();
        // A file that vanished since the listing (daemon stopping) is simply not there.
        if std::fs::metadata(&path).is_ok_and(|m| m.file_type().is_socket()) {
            found.push((id, path));
        }
    }
    found.sort();
    let mut out: Vec<(String, PathBuf)> = Vec::with_capacity(found.len());
    let mut last = None;
    for (id, path) in found {
        if last == Some(id) {
            tracing::warn!(osd = id, ignored = %path.display(), "two admin sockets name the same OSD; using the first by name");
            continue;
        }
        last = Some(id);
        out.push((format!("osd.{id}"), path));
    }
    Ok(out)
}

/// One OSD's answer to a command sent to every local OSD.
#[derive(Debug)]
pub struct OsdReply {
    /// `osd.3`
    pub daemon: String,
    pub path: PathBuf,
    pub reply: Result<Vec<u8>, AdminSocketError>,
}

/// The `perf histogram dump` request, compact (`ceph tell ... -f json` gets the same document).
pub fn histogram_dump_request() -> Value {
    json!({"prefix": "perf histogram dump", "format": "json"})
}

/// The [`CephCommand`]s host mode answers (each followed by at most a logger and a counter): the
/// latency collector's histograms and its `op_w_latency` counter, with the admin-socket prefix.
const HISTOGRAM_ARGS: [&str; 5] = ["tell", "osd.*", "perf", "histogram", "dump"];
const PERF_DUMP_ARGS: [&str; 4] = ["tell", "osd.*", "perf", "dump"];

/// A [`Client`] over the admin sockets of the OSDs on this host (`serve --mode host`).
#[derive(Debug, Clone)]
pub struct AdminSocketClient {
    dir: PathBuf,
    timeout: Duration,
}

impl AdminSocketClient {
    /// `dir` holds the sockets (e.g. [`DEFAULT_DIR`]); `timeout` bounds each socket's exchange
    /// (they run concurrently, so also the whole query when the directory is listed quickly).
    pub fn new(dir: impl Into<PathBuf>, timeout: Duration) -> Self {
        Self {
            dir: dir.into(),
            timeout,
        }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// Sends `command` to every OSD socket in the directory, concurrently (one hung OSD costs
    /// one timeout, not one per OSD); replies in OSD order. The directory is listed on every
    /// call, so OSDs added or removed on the host are followed.
    pub async fn query_osds(&self, command: &Value) -> Result<Vec<OsdReply>, AdminSocketError> {
        let sockets = discover_osd_sockets(&self.dir)?;
        let mut tasks = tokio::task::JoinSet::new();
        for (i, (_, path)) in sockets.iter().enumerate() {
            let (path, command, timeout) = (path.clone(), command.clone(), self.timeout);
            tasks.spawn(async move { (i, admin_command(&path, &command, timeout).await) });
        }
        let mut replies: Vec<Option<Result<Vec<u8>, AdminSocketError>>> =
            sockets.iter().map(|_| None).collect();
        while let Some(joined) = tasks.join_next().await {
            if let Ok((i, reply)) = joined {
                if let Some(slot) = replies.get_mut(i) {
                    *slot = Some(reply);
                }
            }
        }
        Ok(sockets
            .into_iter()
            .zip(replies)
            .map(|((daemon, path), reply)| OsdReply {
                reply: reply.unwrap_or_else(|| {
                    // Only a panic or a runtime shutting down ends a task without its result.
                    Err(AdminSocketError::Io {
                        path: path.clone(),
                        op: "querying",
                        source: io::Error::other("the query task did not finish"),
                    })
                }),
                daemon,
                path,
            })
            .collect())
    }
}

impl Client for AdminSocketClient {
    async fn run(&self, command: &CephCommand) -> Result<Output, CephError> {
        let started = Instant::now();
        // `perf [histogram] dump [LOGGER [COUNTER]]`: the collector asks for the one histogram
        // and the one counter.
        let filtered =
            |args: &[&str], prefix: &'static str| match command.args.split_at_checked(args.len()) {
                Some((head, rest)) if head == args && rest.len() <= 2 => Some((prefix, rest)),
                _ => None,
            };
        let found = filtered(&HISTOGRAM_ARGS, "perf histogram dump")
            .or_else(|| filtered(&PERF_DUMP_ARGS, "perf dump"));
        let Some((prefix, filter)) = found else {
            return Err(CephError::Failed {
                command: command.to_string(),
                // EOPNOTSUPP, as an exit code.
                code: Some(95),
                stderr: format!(
                    "not available in host mode, which only reads the latency histograms and \
                     counters of the OSDs whose admin sockets are in {} (`ceph {}`, `ceph {}`); \
                     cluster-wide commands need the ceph CLI",
                    self.dir.display(),
                    HISTOGRAM_ARGS.join(" "),
                    PERF_DUMP_ARGS.join(" ")
                ),
            });
        };
        let mut request = histogram_dump_request();
        request["prefix"] = json!(prefix);
        for (key, value) in ["logger", "counter"].iter().zip(filter) {
            request[*key] = json!(value);
        }
        let (stdout, stderr, code) = match self.query_osds(&request).await {
            Ok(replies) if replies.is_empty() => (
                Vec::new(),
                format!(
                    "Error ENOENT: no OSD admin socket (ceph-osd.N.asok or osd.N.asok) in {}: \
                     is this an OSD host, and is it the directory of Ceph's `admin socket` \
                     option?\n",
                    self.dir.display()
                ),
                2,
            ),
            Ok(replies) => tell_output(&replies),
            Err(e) => {
                let (name, code) = match &e {
                    AdminSocketError::DirUnreadable { source, .. }
                        if source.kind() == io::ErrorKind::PermissionDenied =>
                    {
                        ("EACCES", 13)
                    }
                    _ => ("ENOENT", 2),
                };
                (Vec::new(), format!("Error {name}: {e}\n"), code)
            }
        };
        Ok(Output {
            stdout,
            stderr,
            code: Some(code),
            elapsed: started.elapsed(),
        })
    }
}

/// What `ceph tell 'osd.*' ... -f json` prints for these replies (see `parse::tell`): per OSD a
/// blank line, then `osd.N: <reply>` on one line; an OSD that failed leaves only its blank line
/// on stdout and an `Error ENXIO: problem getting command descriptions from osd.N` line (here
/// with the cause) on stderr, and the exit code is then 6.
fn tell_output(replies: &[OsdReply]) -> (Vec<u8>, String, i32) {
    let mut stdout = Vec::new();
    let mut stderr = String::new();
    for r in replies {
        stdout.push(b'\n');
        match &r.reply {
            Ok(body) => {
                stdout.extend_from_slice(r.daemon.as_bytes());
                stdout.extend_from_slice(b": ");
                stdout.extend_from_slice(&one_line(body));
                stdout.push(b'\n');
            }
            Err(e) => {
                stderr.push_str(&format!(
                    "Error ENXIO: problem getting command descriptions from {}: {e}\n",
                    r.daemon
                ));
            }
        }
    }
    let code = if stderr.is_empty() { 0 } else { ENXIO };
    (stdout, stderr, code)
}

/// The reply on one line: a multi-line (pretty-printed) document would be cut at its first
/// blank line by the `tell` splitter. JSON whitespace outside strings is dropped; a raw line
/// break inside a string (invalid JSON anyway) becomes a space so the parser still sees it.
fn one_line(body: &[u8]) -> Vec<u8> {
    let body = body.trim_ascii();
    if !body.iter().any(|b| matches!(b, b'\n' | b'\r')) {
        return body.to_vec();
    }
    let mut out = Vec::with_capacity(body.len());
    let (mut in_string, mut escaped) = (false, false);
    for &b in body {
        if in_string {
            if escaped {
                escaped = false;
            } else if b == b'\\' {
                escaped = true;
            } else if b == b'"' {
                in_string = false;
            }
            out.push(if matches!(b, b'\n' | b'\r') { b' ' } else { b });
        } else {
            match b {
                b' ' | b'\t' | b'\n' | b'\r' => {}
                b'"' => {
                    in_string = true;
                    out.push(b);
                }
                _ => out.push(b),
            }
        }
    }
    out
}

#[cfg(test)]
mod tests;
