//! Talking to Ceph: the [`Client`] trait, the CLI adapter, and the pure parsers of its output.

pub mod admin_socket;
pub mod any;
pub mod caps;
pub mod cli;
pub mod fake;
pub mod ops;
pub mod parse;
pub mod rados;

use std::future::Future;
use std::time::Duration;

/// The largest reply read from one command by default: `pg ls undersized` at 100k PGs is
/// 223 MiB, which would not fit a 256 MiB container at the moment the cluster is worst. The
/// commands the collector sends answer in well under 64 MiB up to 10k OSDs; `pg dump pgs_brief`
/// (~110 bytes per PG) up to about 580k PGs (docs/benchmarks.md, 100k PGs undersized).
pub const DEFAULT_MAX_REPLY_BYTES: u64 = 64 << 20;

/// A `ceph` command as words, without the program and without `--format json` (the client adds it).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct CephCommand {
    pub args: Vec<String>,
    /// A command that changes the cluster under a lease: it must not reach Ceph at or after
    /// this instant (see [`Fence`]). Checked by the client as late as it can: the CLI once the
    /// process is started (and kills it), librados right before the call.
    pub not_after: Option<tokio::time::Instant>,
}

impl CephCommand {
    pub fn new<I, S>(args: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        Self {
            args: args.into_iter().map(Into::into).collect(),
            not_after: None,
        }
    }

    /// Whether the command's fence has passed: it must not be sent (any more).
    pub fn fence_passed(&self) -> bool {
        self.not_after
            .is_some_and(|t| tokio::time::Instant::now() >= t)
    }

    /// The error for a command stopped by its fence.
    pub fn fenced(&self) -> CephError {
        CephError::Fenced {
            command: self.to_string(),
        }
    }
}

/// When this instance's right to change the cluster ends (a lease's renew deadline), read
/// anew for each command. Checking the lease before a command is not enough: a process
/// stopped between the check and the command (SIGSTOP, a VM paused, a long GC-like stall) would
/// send it after another instance took over (seen on the lab, docs/faults.md row 12).
#[derive(Clone)]
pub struct Fence(std::sync::Arc<dyn Fn() -> Option<tokio::time::Instant> + Send + Sync>);

impl Fence {
    /// `until` answers when the right to act ends; `None`: it has ended.
    pub fn new(until: impl Fn() -> Option<tokio::time::Instant> + Send + Sync + 'static) -> Self {
        Self(std::sync::Arc::new(until))
    }

    /// The instant a command must not reach Ceph at or after (now, when the right has ended).
    pub fn until(&self) -> tokio::time::Instant {
        (self.0)().unwrap_or_else(tokio::time::Instant::now)
    }
}

impl std::fmt::Debug for Fence {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Fence").field(&(self.0)()).finish()
    }
}

/// A client whose commands carry the fence, when there is one: every command run through it
/// is stopped by the inner client once the fence has passed. Only for commands that change
/// the cluster.
#[derive(Debug, Clone)]
pub struct Fenced<C> {
    pub inner: C,
    pub fence: Option<Fence>,
}

impl<C: Client> Client for Fenced<C> {
    async fn run(&self, command: &CephCommand) -> Result<Output, CephError> {
        match &self.fence {
            Some(fence) => {
                let mut fenced = command.clone();
                fenced.not_after = Some(fence.until());
                self.inner.run(&fenced).await
            }
            None => self.inner.run(command).await,
        }
    }
}

impl std::fmt::Display for CephCommand {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ceph {}", self.args.join(" "))
    }
}

/// What a finished command printed. A non-zero exit is not an error at this level: `tell osd.*`
/// exits non-zero when one OSD is down yet prints the others' answers, which we keep.
#[derive(Debug, Clone, PartialEq)]
pub struct Output {
    pub stdout: Vec<u8>,
    pub stderr: String,
    /// Exit code; `None` when the process was ended by a signal.
    pub code: Option<i32>,
    pub elapsed: Duration,
}

impl Output {
    /// The stdout of a successful command, or the failure as an error carrying stderr.
    pub fn success(&self, command: &CephCommand) -> Result<&[u8], CephError> {
        if self.code == Some(0) {
            Ok(&self.stdout)
        } else if self.code == Some(EACCES) {
            Err(CephError::PermissionDenied {
                command: command.to_string(),
                stderr: first_lines(&self.stderr, 5),
                cap: caps::needed(command),
            })
        } else {
            Err(CephError::Failed {
                command: command.to_string(),
                code: self.code,
                stderr: first_lines(&self.stderr, 5),
            })
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum CephError {
    #[error("could not start `{program}`: {source} (is it installed and on PATH? see --ceph-cmd)")]
    Spawn {
        program: String,
        #[source]
        source: std::io::Error,
    },
    #[error("`{command}` did not finish within {timeout:?} and was killed (cluster unreachable or overloaded? see --ceph-timeout)")]
    Timeout { command: String, timeout: Duration },
    #[error("`{command}` failed with {}: {stderr}", exit_text(*.code))]
    Failed {
        command: String,
        code: Option<i32>,
        stderr: String,
    },
    /// EACCES: the cephx user lacks a capability (`cap`, the grant that would allow the
    /// command). Retrying does not help until the caps change.
    #[error("`{command}` was refused with EACCES ({stderr}): the cephx user lacks {cap}; grant it with `ceph auth caps` (which replaces all of the user's caps: give the whole list of docs/deployment.md) or use --ceph-name with a user that has it")]
    PermissionDenied {
        command: String,
        stderr: String,
        cap: String,
    },
    /// The reply passed the cap on what is read from one command (memory stays bounded when
    /// the cluster is at its worst and answers the most).
    #[error("`{command}` answered more than {} and was stopped (the cap keeps the exporter's memory bounded); raise --ceph.max-reply-bytes if this cluster needs it", crate::units::fmt_bytes(*cap))]
    TooLarge { command: String, cap: u64 },
    #[error("reading the output of `{command}`: {source}")]
    Io {
        command: String,
        #[source]
        source: std::io::Error,
    },
    /// The librados backend has no connection to the cluster (it retries with backoff).
    #[error("librados: {message}")]
    Connect { message: String },
    /// Not sent: the command's fence (this instance's lease) passed before it reached Ceph.
    #[error("`{command}` not sent: this instance's lease ran out before the command reached Ceph (it was stopped or slowed between the lease check and the command); another instance may act now")]
    Fenced { command: String },
    /// The librados backend does not know how to send this command.
    #[error("`{command}`: the librados backend does not know this command (it translates only the commands this program sends); use --ceph.backend cli")]
    Unsupported { command: String },
}

impl CephError {
    /// Short, bounded label value for `collector_errors_total{reason}`.
    pub fn reason(&self) -> &'static str {
        match self {
            CephError::Spawn { .. } => "spawn",
            CephError::Timeout { .. } => "timeout",
            CephError::Failed { .. } => "exit_status",
            CephError::PermissionDenied { .. } => "permission_denied",
            CephError::TooLarge { .. } => "too_large",
            CephError::Io { .. } => "io",
            CephError::Connect { .. } => "connect",
            CephError::Unsupported { .. } => "unsupported",
            CephError::Fenced { .. } => "fenced",
        }
    }
}

/// The exit code of the `ceph` CLI (and the errno a librados call returns) for "permission
/// denied": the CLI exits with the errno of the mon's answer.
const EACCES: i32 = 13;

fn exit_text(code: Option<i32>) -> String {
    match code {
        Some(c) => format!("exit code {c}"),
        None => "a signal".to_string(),
    }
}

/// The first `n` non-empty lines of a command's stderr, for error messages that stay readable.
pub fn first_lines(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .take(n)
        .collect();
    if lines.is_empty() {
        "(no message on stderr)".to_string()
    } else {
        lines.join(" | ")
    }
}

/// Runs ceph commands. The CLI adapter spawns processes; tests use fakes that replay recorded
/// outputs of a real cluster.
pub trait Client: Send + Sync + 'static {
    fn run(&self, command: &CephCommand) -> impl Future<Output = Result<Output, CephError>> + Send;
}
