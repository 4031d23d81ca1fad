//! The signals that stop a command, listened for in one place: Ctrl-C, SIGTERM, and SIGHUP (a
//! command started in an SSH session must still put the cluster back when the session drops).

use tokio::signal::unix::{signal, Signal, SignalKind};
use tokio::sync::watch;

use super::LOG;

/// Ctrl-C, SIGTERM and SIGHUP.
pub struct Signals {
    term: Option<Signal>,
    hup: Option<Signal>,
}

impl Signals {
    /// Starts listening; the error says SIGTERM or SIGHUP cannot be listened for (then only
    /// Ctrl-C is, and the caller says so or not).
    pub fn listen() -> (Self, Option<std::io::Error>) {
        let (term, term_err) = split(signal(SignalKind::terminate()));
        let (hup, hup_err) = split(signal(SignalKind::hangup()));
        (Self { term, hup }, term_err.or(hup_err))
    }

    /// The next of the three.
    pub async fn next(&mut self) {
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = recv(&mut self.term) => {}
            _ = recv(&mut self.hup) => {}
        }
    }
}

fn split<T>(r: std::io::Result<T>) -> (Option<T>, Option<std::io::Error>) {
    match r {
        Ok(v) => (Some(v), None),
        Err(e) => (None, Some(e)),
    }
}

async fn recv(s: &mut Option<Signal>) {
    match s.as_mut() {
        Some(s) => {
            s.recv().await;
        }
        None => std::future::pending::<()>().await,
    }
}

/// `serve`: resolves at the first signal.
pub async fn shutdown() {
    let (mut signals, err) = Signals::listen();
    if let Some(e) = err {
        tracing::warn!(target: LOG, error = %e, "cannot listen for SIGTERM or SIGHUP; only Ctrl-C stops the exporter");
    }
    signals.next().await;
}

/// The tuning commands: the first signal asks the running command to stop cleanly (record
/// written, setting put back); further ones are said to be ignored until it has.
pub fn cancel_on_signals() -> watch::Receiver<bool> {
    let (tx, rx) = watch::channel(false);
    tokio::spawn(async move {
        let (mut signals, _) = Signals::listen();
        loop {
            signals.next().await;
            if *tx.borrow() {
                eprintln!(
                    "\nstill finishing (writing the record, putting settings back); please wait"
                );
            }
            let _ = tx.send(true);
        }
    });
    rx
}
