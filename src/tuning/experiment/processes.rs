//! The real [`Processes`]: the recovery commands and fio as child processes, and this binary's
//! `serve` as the enforcer child. Each child gets its own process group, so the Ctrl-C meant
//! for the experiment reaches only the experiment (which then stops them in order: fio with
//! SIGINT so it prints its report, the enforcer with SIGTERM so it clears its pause flags), and
//! `kill_on_drop` so nothing outlives a panic.

use std::collections::VecDeque;
use std::path::PathBuf;
use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, Command};
use tokio::task::JoinHandle;

use super::{serve_argv, EnforcerEnd, Processes, RunningEnforcer, RunningFio};
use crate::enforcer::EnforcerState;

/// `--start-recovery` / `--stop-recovery` get this long.
const COMMAND_TIMEOUT: Duration = Duration::from_secs(300);
/// fio gets this long to end its jobs and print its report after SIGINT.
const FIO_STOP_TIMEOUT: Duration = Duration::from_secs(60);
/// The enforcer gets this long to restore and exit after SIGTERM.
const ENFORCER_STOP_TIMEOUT: Duration = Duration::from_secs(90);
/// Each HTTP request to the enforcer.
const HTTP_TIMEOUT: Duration = Duration::from_secs(10);
/// Lines of a child's stderr kept for error messages.
const TAIL_LINES: usize = 12;

pub struct RealProcesses {
    exe: PathBuf,
    /// What `serve` gets after what the experiment sets (ceph connection, `--serve-args`).
    serve_rest: Vec<String>,
    /// The enforcer's state file and logs go here.
    dir: PathBuf,
    /// Enforcers started so far: each enforced row's log is its own (`serve-1.log`, ...).
    started: std::sync::atomic::AtomicUsize,
}

impl RealProcesses {
    /// `exe`: this program (`std::env::current_exe()`); `dir`: a directory of this run's own.
    pub fn new(exe: PathBuf, serve_rest: Vec<String>, dir: PathBuf) -> Self {
        Self {
            exe,
            serve_rest,
            dir,
            started: Default::default(),
        }
    }
}

fn signal_group(pid: Option<u32>, signal: nix::sys::signal::Signal) {
    if let Some(raw) = pid.and_then(|p| i32::try_from(p).ok()) {
        // ESRCH (already gone) is fine.
        let _ = nix::sys::signal::killpg(nix::unistd::Pid::from_raw(raw), signal);
    }
}

fn signal_process(pid: Option<u32>, signal: nix::sys::signal::Signal) {
    if let Some(raw) = pid.and_then(|p| i32::try_from(p).ok()) {
        let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(raw), signal);
    }
}

/// The last lines a child wrote on stderr (and, if given, all of them in a log file).
#[derive(Clone, Default)]
struct Tail(Arc<Mutex<VecDeque<String>>>);

impl Tail {
    fn follow(
        &self,
        stream: impl AsyncRead + Unpin + Send + 'static,
        log: Option<PathBuf>,
    ) -> JoinHandle<()> {
        let tail = self.clone();
        tokio::spawn(async move {
            let mut file = match log {
                Some(p) => tokio::fs::File::create(p).await.ok(),
                None => None,
            };
            let mut lines = BufReader::new(stream).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                if let Some(f) = file.as_mut() {
                    let _ = f.write_all(format!("{line}\n").as_bytes()).await;
                }
                if let Ok(mut t) = tail.0.lock() {
                    if t.len() == TAIL_LINES {
                        t.pop_front();
                    }
                    t.push_back(line);
                }
            }
            if let Some(f) = file.as_mut() {
                let _ = f.flush().await;
            }
        })
    }

    fn text(&self) -> String {
        let lines: Vec<String> = self
            .0
            .lock()
            .map(|t| t.iter().cloned().collect())
            .unwrap_or_default();
        if lines.is_empty() {
            "(nothing on stderr)".to_string()
        } else {
            lines.join(" | ")
        }
    }
}

/// A child in its own process group (a signal to the group reaches what a wrapper script
/// started, e.g. fio under `scripts/ceph-lab`), killed if dropped, reading nothing.
fn grouped<S: AsRef<std::ffi::OsStr>>(
    program: impl AsRef<std::ffi::OsStr>,
    args: &[S],
    stdout: Stdio,
) -> Command {
    let mut c = Command::new(program);
    c.args(args)
        .stdin(Stdio::null())
        .stdout(stdout)
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .process_group(0);
    // A shell that starts a job in the background (`nohup ceph-recovery-budget experiment ... &`)
    // starts it with SIGINT ignored, and children inherit that: fio would survive the SIGINT
    // that makes it print its report (fio itself sets its handlers, but a wrapper script cannot
    // trap a signal ignored on entry). The children get SIGINT's default back.
    // SAFETY: between fork and exec only `sigaction`, which is async-signal-safe, is called.
    unsafe {
        c.pre_exec(|| {
            use nix::sys::signal::{signal, SigHandler, Signal};
            signal(Signal::SIGINT, SigHandler::SigDfl)
                .map(|_| ())
                .map_err(std::io::Error::from)
        });
    }
    c
}

impl Processes for RealProcesses {
    type Fio = RealFio;
    type Enforcer = RealEnforcer;

    async fn run(&self, argv: &[String]) -> Result<String, String> {
        let Some((program, args)) = argv.split_first() else {
            return Err("the command is empty".to_string());
        };
        let child = grouped(program, args, Stdio::piped())
            .spawn()
            .map_err(|e| format!("could not start `{program}`: {e}"))?;
        let pid = child.id();
        match tokio::time::timeout(COMMAND_TIMEOUT, child.wait_with_output()).await {
            Ok(Ok(out)) if out.status.success() => Ok(String::from_utf8_lossy(&out.stdout).into()),
            Ok(Ok(out)) => Err(format!(
                "`{}` failed ({}): {}",
                shell_words::join(argv),
                out.status,
                crate::ceph::first_lines(&String::from_utf8_lossy(&out.stderr), 5)
            )),
            Ok(Err(e)) => Err(format!("`{}`: {e}", shell_words::join(argv))),
            Err(_) => {
                signal_group(pid, nix::sys::signal::Signal::SIGKILL);
                Err(format!(
                    "`{}` did not finish within {} and was killed",
                    shell_words::join(argv),
                    humantime::format_duration(COMMAND_TIMEOUT)
                ))
            }
        }
    }

    fn start_fio(&self, argv: &[String]) -> Result<RealFio, String> {
        let Some((program, args)) = argv.split_first() else {
            return Err("the fio command is empty".to_string());
        };
        let mut child = grouped(program, args, Stdio::piped())
            .spawn()
            .map_err(|e| format!("could not start `{program}`: {e} (is fio installed?)"))?;
        let stdout = child.stdout.take().map(|mut out| {
            tokio::spawn(async move {
                let mut buf = Vec::new();
                let _ = out.read_to_end(&mut buf).await;
                buf
            })
        });
        let tail = Tail::default();
        let stderr = child.stderr.take().map(|err| tail.follow(err, None));
        Ok(RealFio {
            pid: child.id(),
            child,
            argv: argv.to_vec(),
            stdout,
            stderr,
            tail,
            exited: None,
        })
    }

    fn start_enforcer(
        &self,
        baseline_p99_seconds: f64,
        multiplier: f64,
        extra: &[&str],
    ) -> Result<RealEnforcer, String> {
        std::fs::create_dir_all(&self.dir)
            .map_err(|e| format!("creating {}: {e}", self.dir.display()))?;
        let port = std::net::TcpListener::bind(("127.0.0.1", 0))
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .map_err(|e| format!("finding a free port on 127.0.0.1: {e}"))?;
        let state_file = self.dir.join("enforcer-state.json");
        let _ = std::fs::remove_file(&state_file);
        let k = self
            .started
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
            + 1;
        let log = self.dir.join(format!("serve-{k}.log"));
        let mut rest = self.serve_rest.clone();
        rest.extend(extra.iter().map(|w| w.to_string()));
        let argv = serve_argv(
            &format!("127.0.0.1:{port}"),
            baseline_p99_seconds,
            multiplier,
            &state_file,
            &rest,
        );
        let mut child = grouped(&self.exe, &argv, Stdio::null())
            .spawn()
            .map_err(|e| format!("could not start {} serve: {e}", self.exe.display()))?;
        let tail = Tail::default();
        let stderr = child
            .stderr
            .take()
            .map(|err| tail.follow(err, Some(log.clone())));
        Ok(RealEnforcer {
            pid: child.id(),
            child,
            port,
            state_file,
            log,
            tail,
            stderr,
            exited: None,
        })
    }
}

pub struct RealFio {
    child: Child,
    pid: Option<u32>,
    argv: Vec<String>,
    stdout: Option<JoinHandle<Vec<u8>>>,
    stderr: Option<JoinHandle<()>>,
    tail: Tail,
    exited: Option<ExitStatus>,
}

impl RunningFio for RealFio {
    fn ended(&mut self) -> Option<String> {
        if self.exited.is_none() {
            if let Ok(Some(status)) = self.child.try_wait() {
                self.exited = Some(status);
            }
        }
        self.exited.map(|s| s.to_string())
    }

    async fn stop(mut self) -> Result<String, String> {
        let cmd = shell_words::join(&self.argv);
        let by_itself = self.ended().is_some();
        if !by_itself {
            // fio ends its jobs on SIGINT and still prints its whole report.
            signal_group(self.pid, nix::sys::signal::Signal::SIGINT);
        }
        let status = match tokio::time::timeout(FIO_STOP_TIMEOUT, self.child.wait()).await {
            Ok(Ok(s)) => s,
            Ok(Err(e)) => return Err(format!("waiting for `{cmd}`: {e}")),
            Err(_) => {
                signal_group(self.pid, nix::sys::signal::Signal::SIGKILL);
                return Err(format!(
                    "`{cmd}` did not end within {} of SIGINT and was killed (no report)",
                    humantime::format_duration(FIO_STOP_TIMEOUT)
                ));
            }
        };
        let out = match self.stdout.take() {
            Some(h) => h.await.unwrap_or_default(),
            None => Vec::new(),
        };
        if let Some(h) = self.stderr.take() {
            let _ = tokio::time::timeout(Duration::from_secs(2), h).await;
        }
        let text = String::from_utf8(out)
            .map_err(|_| format!("`{cmd}` printed something that is not UTF-8"))?;
        // After SIGINT fio exits non-zero (128 for fio 3.33) but the report is whole.
        if by_itself && !status.success() {
            return Err(format!("`{cmd}` failed ({status}): {}", self.tail.text()));
        }
        if text.trim().is_empty() {
            return Err(format!(
                "`{cmd}` printed no report ({status}): {}",
                self.tail.text()
            ));
        }
        Ok(text)
    }
}

pub struct RealEnforcer {
    child: Child,
    pid: Option<u32>,
    port: u16,
    state_file: PathBuf,
    log: PathBuf,
    tail: Tail,
    stderr: Option<JoinHandle<()>>,
    exited: Option<ExitStatus>,
}

impl RunningEnforcer for RealEnforcer {
    async fn get(&self, path: &str) -> Result<String, String> {
        use crate::http_client::{get_ok, HttpTarget, Options};
        let target = HttpTarget::parse(&format!("http://127.0.0.1:{}", self.port))?;
        // Errors read "connecting to http://127.0.0.1:PORT/PATH: ...", "... answered 503: ..."
        // or "...: no answer within 10s ...".
        get_ok(&target, path, Options::default().with_timeout(HTTP_TIMEOUT))
            .await
            .map_err(|e| e.to_string())
    }

    fn exited(&mut self) -> Option<String> {
        if self.exited.is_none() {
            if let Ok(Some(status)) = self.child.try_wait() {
                self.exited = Some(status);
            }
        }
        self.exited.map(|s| {
            format!(
                "{s}; its last words: {} (whole log: {})",
                self.tail.text(),
                self.log.display()
            )
        })
    }

    async fn stop(mut self) -> EnforcerEnd {
        let mut end = EnforcerEnd::default();
        let already = self.exited().is_some();
        if !already {
            signal_process(self.pid, nix::sys::signal::Signal::SIGTERM);
        }
        match tokio::time::timeout(ENFORCER_STOP_TIMEOUT, self.child.wait()).await {
            Ok(Ok(status)) if status.success() || already => {
                if already {
                    end.problem = Some(format!("had exited before it was stopped ({status})"));
                }
            }
            Ok(Ok(status)) => {
                end.problem = Some(format!(
                    "exited with {status} on SIGTERM: {} (log: {})",
                    self.tail.text(),
                    self.log.display()
                ));
            }
            Ok(Err(e)) => end.problem = Some(format!("could not be waited for: {e}")),
            Err(_) => {
                signal_group(self.pid, nix::sys::signal::Signal::SIGKILL);
                end.problem = Some(format!(
                    "did not exit within {} of SIGTERM and was killed: its pause flags and settings may be left (the experiment clears and restores them)",
                    humantime::format_duration(ENFORCER_STOP_TIMEOUT)
                ));
            }
        }
        if let Some(h) = self.stderr.take() {
            let _ = tokio::time::timeout(Duration::from_secs(2), h).await;
        }
        match EnforcerState::load(&self.state_file) {
            Ok(state) => end.unrestored = state.original,
            Err(e) => {
                let p = end.problem.take().map_or(String::new(), |p| p + "; ");
                end.problem = Some(format!("{p}its state file could not be read: {e}"));
            }
        }
        end
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn procs(exe: &str) -> RealProcesses {
        RealProcesses::new(
            PathBuf::from(exe),
            vec!["--collect.interval".into(), "2s".into()],
            std::env::temp_dir().join(format!("crb-experiment-processes-{}", std::process::id())),
        )
    }

    fn sh(script: &str) -> Vec<String> {
        vec!["sh".into(), "-c".into(), script.into()]
    }

    async fn until_ended(fio: &mut RealFio) -> String {
        for _ in 0..200 {
            if let Some(how) = fio.ended() {
                return how;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        panic!("did not end");
    }

    #[tokio::test]
    async fn fio_is_stopped_with_sigint_and_its_report_kept() {
        // As fio 3.33 does: on SIGINT it ends its jobs, prints its whole report and exits 128.
        let mut fio = procs("/nonexistent")
            .start_fio(&sh(
                "trap 'echo fio: terminating on signal 2; echo \"{\\\"jobs\\\":[]}\"; exit 128' INT; \
                 while :; do sleep 0.05; done",
            ))
            .unwrap();
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert_eq!(fio.ended(), None);
        let out = fio.stop().await.unwrap();
        assert_eq!(out, "fio: terminating on signal 2\n{\"jobs\":[]}\n");
    }

    #[tokio::test]
    async fn fio_failing_on_its_own_says_why() {
        let mut fio = procs("/nonexistent")
            .start_fio(&sh("echo 'fio: pool rbd-vms does not exist' >&2; exit 1"))
            .unwrap();
        assert!(until_ended(&mut fio).await.contains("exit status: 1"));
        let e = fio.stop().await.unwrap_err();
        assert!(
            e.contains("failed (exit status: 1)") && e.contains("rbd-vms does not exist"),
            "{e}"
        );
        // Ending on its own with success: its report is used.
        let mut fio = procs("/nonexistent").start_fio(&sh("echo report")).unwrap();
        until_ended(&mut fio).await;
        assert_eq!(fio.stop().await.unwrap(), "report\n");
        let e = procs("/nonexistent")
            .start_fio(&["/nonexistent/fio".to_string()])
            .err()
            .unwrap();
        assert!(e.contains("could not start `/nonexistent/fio`"), "{e}");
    }

    #[tokio::test]
    async fn recovery_commands_run_to_their_end() {
        let p = procs("/nonexistent");
        assert_eq!(p.run(&sh("echo started")).await.unwrap(), "started\n");
        let e = p
            .run(&sh(
                "echo 'Error EINVAL: osd.9 does not exist' >&2; exit 22",
            ))
            .await
            .unwrap_err();
        assert!(
            e.contains("exit status: 22") && e.contains("osd.9 does not exist"),
            "{e}"
        );
        assert!(p.run(&[]).await.is_err());
    }

    /// Why the child exited, once it has (it is expected to exit at once).
    async fn exit_reason(child: &mut RealEnforcer) -> String {
        for _ in 0..200 {
            if let Some(why) = child.exited() {
                return why;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        panic!("the child did not exit");
    }

    #[tokio::test]
    async fn an_enforcer_that_cannot_start_is_reported_with_its_words() {
        // `sh serve --web.listen-address ...`: sh cannot open a script named serve.
        let p = procs("/bin/sh");
        let mut first = p.start_enforcer(0.0455, 2.0, &[]).unwrap();
        let why = exit_reason(&mut first).await;
        assert!(why.contains("serve"), "{why}");
        assert!(why.contains("serve-1.log"), "{why}");
        // The next enforced row keeps its own log.
        let _ = first.stop().await;
        let mut child = p.start_enforcer(0.0455, 2.0, &[]).unwrap();
        let why = exit_reason(&mut child).await;
        assert!(why.contains("serve-2.log"), "{why}");
        let e = child.get("/metrics").await.unwrap_err();
        assert!(e.contains("127.0.0.1"), "{e}");
        let end = child.stop().await;
        assert!(
            end.problem
                .as_deref()
                .unwrap()
                .contains("had exited before"),
            "{end:?}"
        );
        assert!(end.unrestored.is_empty());
        let _ = std::fs::remove_dir_all(&p.dir);
    }
}
