//! A [`Client`] that replays recorded outputs of a real cluster, for tests and benchmarks.
//! It answers only what it was given: an unknown command is an error, so a test notices when
//! the collector starts asking something new.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::{CephCommand, CephError, Client, Output};

/// A scripted answer.
#[derive(Debug, Clone)]
pub enum Reply {
    Output {
        stdout: Vec<u8>,
        stderr: String,
        code: i32,
    },
    Timeout,
}

impl Reply {
    pub fn ok(stdout: impl Into<Vec<u8>>) -> Self {
        Reply::Output {
            stdout: stdout.into(),
            stderr: String::new(),
            code: 0,
        }
    }
    pub fn fail(code: i32, stderr: &str) -> Self {
        Reply::Output {
            stdout: Vec::new(),
            stderr: stderr.to_string(),
            code,
        }
    }
}

#[derive(Debug, Clone, Default)]
pub struct FakeClient {
    replies: Arc<Mutex<HashMap<Vec<String>, Reply>>>,
    calls: Arc<Mutex<Vec<CephCommand>>>,
}

impl FakeClient {
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets (or replaces) the answer to a command.
    pub fn set(&self, command: &CephCommand, reply: Reply) {
        if let Ok(mut r) = self.replies.lock() {
            r.insert(command.args.clone(), reply);
        }
    }

    /// Every command asked so far, in order.
    pub fn calls(&self) -> Vec<CephCommand> {
        self.calls.lock().map(|c| c.clone()).unwrap_or_default()
    }
}

impl Client for FakeClient {
    async fn run(&self, command: &CephCommand) -> Result<Output, CephError> {
        if let Ok(mut c) = self.calls.lock() {
            c.push(command.clone());
        }
        let reply = self
            .replies
            .lock()
            .ok()
            .and_then(|r| r.get(&command.args).cloned());
        match reply {
            Some(Reply::Output {
                stdout,
                stderr,
                code,
            }) => Ok(Output {
                stdout,
                stderr,
                code: Some(code),
                elapsed: Duration::from_millis(1),
            }),
            Some(Reply::Timeout) => Err(CephError::Timeout {
                command: command.to_string(),
                timeout: Duration::from_secs(10),
            }),
            None => Ok(Output {
                stdout: Vec::new(),
                stderr: format!("FakeClient: no reply recorded for `{command}`"),
                code: Some(22),
                elapsed: Duration::from_millis(1),
            }),
        }
    }
}
