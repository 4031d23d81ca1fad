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
}

#[derive(Debug, Clone)]
pub struct CliClient {
    program: String,
    leading_args: Vec<String>,
    timeout: Duration,
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
        }
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
        let child = cmd.spawn().map_err(|source| CephError::Spawn {
            program: self.program.clone(),
            source,
        })?;
        let pid = child.id();
        match tokio::time::timeout(self.timeout, child.wait_with_output()).await {
            Ok(Ok(out)) => Ok(Output {
                stdout: out.stdout,
                stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
                code: out.status.code(),
                elapsed: started.elapsed(),
            }),
            Ok(Err(source)) => Err(CephError::Io {
                command: command.to_string(),
                source,
            }),
            Err(_elapsed) => {
                if let Some(pid) = pid {
                    kill_group(pid);
                }
                Err(CephError::Timeout {
                    command: command.to_string(),
                    timeout: self.timeout,
                })
            }
        }
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

    fn client(command: &[&str], timeout: Duration) -> CliClient {
        CliClient::new(&CliSettings {
            command: command.iter().map(|s| s.to_string()).collect(),
            conf: Some("/etc/ceph/x.conf".into()),
            name: None,
            keyring: Some("/k".into()),
            timeout,
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

    #[tokio::test]
    async fn a_missing_program_is_a_spawn_error_naming_it() {
        let c = client(&["/nonexistent/ceph"], Duration::from_secs(1));
        let err = c.run(&CephCommand::new(["status"])).await.unwrap_err();
        assert_eq!(err.reason(), "spawn");
        assert!(err.to_string().contains("/nonexistent/ceph"));
    }
}
