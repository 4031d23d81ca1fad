//! The `ceph` CLI adapter: one process per command, run without a shell, under a timeout; the
//! whole process group is killed on timeout so wrappers (`cephadm shell`, `kubectl exec`) do not
//! leave orphans behind.

use std::process::Stdio;
use std::time::{Duration, Instant};

use tokio::process::Command;

use super::{CephCommand, CephError, Client, Output};

/// How to invoke the `ceph` CLI, as plain data (built from flags and the config file).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CliSettings {
    /// Program and leading words, e.g. `["cephadm", "shell", "--", "ceph"]`.
    pub command: Vec<String>,
    pub conf: Option<String>,
    pub name: Option<String>,
    pub keyring: Option<String>,
    pub timeout: Duration,
    /// A reply larger than this is refused ([`CephError::TooLarge`]); both backends.
    pub max_reply_bytes: u64,
}

/// What is kept of a command's stderr: enough for every error Ceph prints; the rest is read
/// and dropped so that the command never blocks on a full pipe.
const MAX_STDERR_BYTES: u64 = 64 << 10;

#[derive(Debug, Clone)]
pub struct CliClient {
    program: String,
    leading_args: Vec<String>,
    timeout: Duration,
    max_reply_bytes: u64,
}

impl CliClient {
    /// `settings.command` must be non-empty (validated with the config).
    pub fn new(settings: &CliSettings) -> Self {
        let mut words = settings.command.iter().cloned();
        let program = words.next().unwrap_or_else(|| "ceph".to_string());
        let mut leading_args: Vec<String> = words.collect();
        for (flag, value) in [
            ("--conf", &settings.conf),
            ("--name", &settings.name),
            ("--keyring", &settings.keyring),
        ] {
            if let Some(v) = value {
                leading_args.push(flag.to_string());
                leading_args.push(v.clone());
            }
        }
        Self {
            program,
            leading_args,
            timeout: settings.timeout,
            max_reply_bytes: settings.max_reply_bytes,
        }
    }

    /// A command whose stdout passes `bytes` is killed and fails with
    /// [`CephError::TooLarge`] instead of being read whole into memory.
    pub fn with_max_reply_bytes(mut self, bytes: u64) -> Self {
        self.max_reply_bytes = bytes;
        self
    }

    /// The full argument vector for a command (without the program), as it will be executed.
    pub fn argv(&self, command: &CephCommand) -> Vec<String> {
        let mut argv = self.leading_args.clone();
        argv.extend(command.args.iter().cloned());
        argv.push("--format".to_string());
        argv.push("json".to_string());
        argv
    }
}

impl Client for CliClient {
    async fn run(&self, command: &CephCommand) -> Result<Output, CephError> {
        let started = Instant::now();
        let mut cmd = Command::new(&self.program);
        cmd.args(self.argv(command))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            // Own process group: a timeout kills wrappers and what they started, and a Ctrl-C
            // meant for the exporter is not delivered to a half-finished `ceph config set`.
            .process_group(0);
        let mut child = cmd.spawn().map_err(|source| CephError::Spawn {
            program: self.program.clone(),
            source,
        })?;
        let pid = child.id();
        let kill = || {
            if let Some(pid) = pid {
                kill_group(pid);
            }
        };
        // The fence is checked once the process exists, not before spawning it: a process
        // stopped in between (SIGSTOP, a paused VM) finds the fence passed when it resumes, and
        // the CLI, which takes more than 100 ms to reach the monitors, is killed before it does.
        if command.fence_passed() {
            kill();
            return Err(command.fenced());
        }
        let (Some(stdout), Some(stderr)) = (child.stdout.take(), child.stderr.take()) else {
            kill();
            return Err(CephError::Io {
                command: command.to_string(),
                source: std::io::Error::other("no pipe to the child's stdout or stderr"),
            });
        };
        let cap = self.max_reply_bytes;
        let finished = async {
            // stderr on its own task: when stdout passes the cap the command is killed at once,
            // without waiting for stderr to end.
            let err = tokio::spawn(read_capped(stderr, MAX_STDERR_BYTES, Overflow::Drain));
            let (stdout, over) = read_capped(stdout, cap, Overflow::Stop).await?;
            if over {
                err.abort();
                return Ok(None);
            }
            let (stderr, _) = err.await.map_err(std::io::Error::other)??;
            let status = child.wait().await?;
            Ok::<_, std::io::Error>(Some((stdout, stderr, status)))
        };
        tokio::pin!(finished);
        let mut done = tokio::time::timeout(self.timeout, &mut finished).await;
        // A deadline noticed late (this process stopped while the command ran: SIGSTOP, a
        // paused VM) can find the command finished: its reply is there and is the truth (a
        // `balancer off` that was done is not a failure). Only the reading is left to do.
        if done.is_err() && pid.is_some_and(has_exited) {
            done = tokio::time::timeout(REPLY_GRACE, &mut finished).await;
        }
        match done {
            Ok(Ok(Some((stdout, stderr, status)))) => Ok(Output {
                stdout,
                stderr: String::from_utf8_lossy(&stderr).into_owned(),
                code: status.code(),
                elapsed: started.elapsed(),
            }),
            Ok(Ok(None)) => {
                kill();
                Err(CephError::TooLarge {
                    command: command.to_string(),
                    cap,
                })
            }
            Ok(Err(source)) => {
                kill();
                Err(CephError::Io {
                    command: command.to_string(),
                    source,
                })
            }
            Err(_elapsed) => {
                kill();
                Err(CephError::Timeout {
                    command: command.to_string(),
                    timeout: self.timeout,
                })
            }
        }
    }
}

/// What to do with a pipe's bytes past its cap.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Overflow {
    /// stdout: the reply is over the cap; stop reading (the caller kills the command).
    Stop,
    /// stderr: read on and drop the rest, so the child never blocks writing it.
    Drain,
}

/// Reads `pipe` to its end keeping at most `cap` bytes; `true` when it stopped at the cap.
async fn read_capped<R: tokio::io::AsyncRead + Unpin>(
    mut pipe: R,
    cap: u64,
    overflow: Overflow,
) -> std::io::Result<(Vec<u8>, bool)> {
    use tokio::io::AsyncReadExt;
    let mut kept = Vec::new();
    let mut buf = vec![0u8; 64 << 10];
    loop {
        let n = pipe.read(&mut buf).await?;
        if n == 0 {
            return Ok((kept, false));
        }
        let room = usize::try_from(cap.saturating_sub(kept.len() as u64)).unwrap_or(usize::MAX);
        kept.extend_from_slice(&buf[..n.min(room)]);
        if n > room && overflow == Overflow::Stop {
            return Ok((kept, true));
        }
    }
}

/// How long the reply of a command that has exited is still read once its deadline passed.
const REPLY_GRACE: Duration = Duration::from_secs(1);

/// Whether the child `pid` has exited (not reaped: the runtime still collects its status).
fn has_exited(pid: u32) -> bool {
    use nix::sys::wait::{waitid, Id, WaitPidFlag, WaitStatus};
    use nix::unistd::Pid;
    let Ok(raw) = i32::try_from(pid) else {
        return false;
    };
    let flags = WaitPidFlag::WEXITED | WaitPidFlag::WNOHANG | WaitPidFlag::WNOWAIT;
    match waitid(Id::Pid(Pid::from_raw(raw)), flags) {
        Ok(WaitStatus::StillAlive) => false,
        Ok(_) => true,
        // Already reaped by the runtime: it exited.
        Err(nix::errno::Errno::ECHILD) => true,
        Err(_) => false,
    }
}

fn kill_group(pid: u32) {
    use nix::sys::signal::{killpg, Signal};
    use nix::unistd::Pid;
    if let Ok(raw) = i32::try_from(pid) {
        // ESRCH (already gone) is fine: the point is that nothing is left running.
        let _ = killpg(Pid::from_raw(raw), Signal::SIGKILL);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ceph::DEFAULT_MAX_REPLY_BYTES;

    fn client(command: &[&str], timeout: Duration) -> CliClient {
        CliClient::new(&CliSettings {
            command: command.iter().map(|s| s.to_string()).collect(),
            conf: Some("/etc/ceph/x.conf".into()),
            name: None,
            keyring: Some("/k".into()),
            timeout,
            max_reply_bytes: DEFAULT_MAX_REPLY_BYTES,
        })
    }

    #[test]
    fn argv_keeps_wrapper_words_then_passes_conf_and_adds_json() {
        let c = client(&["cephadm", "shell", "--", "ceph"], Duration::from_secs(1));
        assert_eq!(c.program, "cephadm");
        assert_eq!(
            c.argv(&CephCommand::new(["status"])),
            [
                "shell",
                "--",
                "ceph",
                "--conf",
                "/etc/ceph/x.conf",
                "--keyring",
                "/k",
                "status",
                "--format",
                "json"
            ]
        );
    }

    #[tokio::test]
    async fn captures_stdout_stderr_and_exit_code() {
        // `sh -c` stands in for a ceph that fails like the real one does on a bad argument.
        let c = CliClient::new(&CliSettings {
            command: vec![
                "sh".into(),
                "-c".into(),
                "echo out; echo 'Error EINVAL: bad' >&2; exit 22".into(),
                "sh".into(),
            ],
            conf: None,
            name: None,
            keyring: None,
            timeout: Duration::from_secs(5),
            max_reply_bytes: DEFAULT_MAX_REPLY_BYTES,
        });
        let cmd = CephCommand::new(["pg", "ls"]);
        let out = c.run(&cmd).await.expect("runs");
        assert_eq!(out.code, Some(22));
        assert_eq!(out.stdout, b"out\n");
        let err = out.success(&cmd).unwrap_err();
        assert_eq!(err.reason(), "exit_status");
        let text = err.to_string();
        assert!(
            text.contains("exit code 22") && text.contains("Error EINVAL: bad"),
            "{text}"
        );
    }

    #[tokio::test]
    async fn a_hung_command_is_killed_with_its_children() {
        let marker = format!("/tmp/crb-hung-{}", std::process::id());
        // The shell starts a grandchild; both must be gone after the timeout.
        let script = format!("sleep 30 & echo $! > {marker}; wait");
        let c = CliClient::new(&CliSettings {
            command: vec!["sh".into(), "-c".into(), script, "sh".into()],
            conf: None,
            name: None,
            keyring: None,
            timeout: Duration::from_millis(300),
            max_reply_bytes: DEFAULT_MAX_REPLY_BYTES,
        });
        let started = Instant::now();
        let err = c.run(&CephCommand::new(["status"])).await.unwrap_err();
        assert!(matches!(err, CephError::Timeout { .. }), "{err}");
        assert!(started.elapsed() < Duration::from_secs(5));
        let grandchild: i32 = std::fs::read_to_string(&marker)
            .expect("marker written")
            .trim()
            .parse()
            .expect("pid");
        let _ = std::fs::remove_file(&marker);
        // Give the kernel a moment to reap.
        std::thread::sleep(Duration::from_millis(200));
        let alive = std::fs::read_to_string(format!("/proc/{grandchild}/stat"))
            .map(|s| !s.contains(") Z "))
            .unwrap_or(false);
        assert!(!alive, "grandchild {grandchild} survived the timeout");
    }

    /// A `ceph` that is a shell script (the script gets the ceph arguments as $1...).
    fn sh(script: &str) -> CliClient {
        client(&["sh", "-c", script, "sh"], Duration::from_secs(30))
    }

    #[tokio::test]
    async fn a_reply_over_the_cap_is_refused_and_the_command_killed() {
        // 1 MiB of output against a 64 KiB cap; the command would then sleep for a minute.
        let c = sh("head -c 1048576 /dev/zero; sleep 60").with_max_reply_bytes(64 << 10);
        let started = Instant::now();
        let err = c
            .run(&CephCommand::new(["pg", "ls", "undersized"]))
            .await
            .unwrap_err();
        assert_eq!(err.reason(), "too_large");
        let text = err.to_string();
        assert!(text.contains("ceph pg ls undersized"), "{text}");
        assert!(text.contains("64 KiB"), "{text}");
        assert!(text.contains("--ceph.max-reply-bytes"), "{text}");
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "not killed at once"
        );
        // Under the cap, and a stderr far over its own cap, still read whole.
        let c = sh("head -c 60000 /dev/zero; head -c 1048576 /dev/zero >&2")
            .with_max_reply_bytes(64 << 10);
        let out = c.run(&CephCommand::new(["status"])).await.expect("runs");
        assert_eq!(out.stdout.len(), 60000);
        assert_eq!(out.stderr.len(), 64 << 10);
    }

    /// A command whose fence passed while this process was stopped (here: before it ran) is
    /// killed as soon as it is started: it never does what it was started for, and says why.
    #[tokio::test]
    async fn a_command_past_its_fence_is_killed_before_it_acts() {
        let marker = std::env::temp_dir().join(format!("crb-fenced-{}", std::process::id()));
        let _ = std::fs::remove_file(&marker);
        // A `ceph` that takes 200 ms to reach the monitors (the real CLI takes longer).
        let c = sh(&format!("sleep 0.2; touch {}", marker.display()));
        let mut cmd = CephCommand::new(["osd", "pg-upmap-items", "2.1", "3", "1"]);
        cmd.not_after = Some(tokio::time::Instant::now());
        let err = c.run(&cmd).await.unwrap_err();
        assert_eq!(err.reason(), "fenced", "{err}");
        assert!(err.to_string().contains("osd pg-upmap-items 2.1"), "{err}");
        tokio::time::sleep(Duration::from_millis(600)).await;
        assert!(!marker.exists(), "the fenced command ran");
        // The same command within its fence runs.
        cmd.not_after = Some(tokio::time::Instant::now() + Duration::from_secs(30));
        let out = c.run(&cmd).await.expect("runs");
        assert_eq!(out.code, Some(0));
        assert!(marker.exists());
        let _ = std::fs::remove_file(&marker);
    }

    /// A reply already there when this process notices its deadline passed is taken: a process
    /// stopped (SIGSTOP, a paused VM) while its command ran finds the command's timeout passed
    /// when it resumes, but the command finished, and what it answered is the truth (a
    /// `balancer off` that was done is not a failure; row 12 of the fault matrix).
    #[tokio::test]
    async fn a_reply_that_came_while_this_process_was_stopped_is_taken() {
        let c = client(&["sh", "-c", "echo done", "sh"], Duration::from_millis(500));
        let cmd = CephCommand::new(["balancer", "off"]);
        let run = c.run(&cmd);
        tokio::pin!(run);
        // Started (spawned, its fence checked), then the runtime stops past the timeout.
        std::future::poll_fn(|cx| {
            let _ = std::future::Future::poll(run.as_mut(), cx);
            std::task::Poll::Ready(())
        })
        .await;
        std::thread::sleep(Duration::from_millis(1500));
        let out = run.await.expect("the finished command's reply");
        assert_eq!(out.code, Some(0));
        assert_eq!(out.stdout, b"done\n");
    }

    #[tokio::test]
    async fn a_missing_program_is_a_spawn_error_naming_it() {
        let c = client(&["/nonexistent/ceph"], Duration::from_secs(1));
        let err = c.run(&CephCommand::new(["status"])).await.unwrap_err();
        assert_eq!(err.reason(), "spawn");
        assert!(err.to_string().contains("/nonexistent/ceph"));
    }
}
