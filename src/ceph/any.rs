//! Either Ceph backend behind one [`Client`], so that `serve` (collector and enforcer) holds one
//! type whatever `--ceph.backend` chose; and the choice itself.

use serde::Deserialize;

use super::cli::{CliClient, CliSettings};
#[cfg(feature = "librados")]
use super::rados::{ConnectStage, RadosClient, RadosSettings};
use super::{CephCommand, CephError, Client, Output};

/// `--ceph.backend` / `ceph.backend`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum BackendChoice {
    /// The `ceph` CLI: one process per command (--ceph-cmd).
    Cli,
    /// librados: one connection held in the process (builds with the `librados` feature).
    Librados,
    /// librados when built with it, --ceph-cmd is plain `ceph` and a connection succeeds at
    /// start; the CLI otherwise.
    #[default]
    Auto,
}

impl BackendChoice {
    pub fn as_str(self) -> &'static str {
        match self {
            BackendChoice::Cli => "cli",
            BackendChoice::Librados => "librados",
            BackendChoice::Auto => "auto",
        }
    }
}

/// Whether this binary was built with the librados backend.
pub const LIBRADOS_BUILT: bool = cfg!(feature = "librados");

/// The backend that runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Cli,
    Librados,
}

impl Backend {
    pub fn as_str(self) -> &'static str {
        match self {
            Backend::Cli => "cli",
            Backend::Librados => "librados",
        }
    }
}

/// The CLI adapter or the librados backend.
#[derive(Clone)]
pub enum AnyClient {
    Cli(CliClient),
    #[cfg(feature = "librados")]
    Rados(RadosClient),
}

impl AnyClient {
    pub fn backend(&self) -> Backend {
        match self {
            AnyClient::Cli(_) => Backend::Cli,
            #[cfg(feature = "librados")]
            AnyClient::Rados(_) => Backend::Librados,
        }
    }
}

impl Client for AnyClient {
    async fn run(&self, command: &CephCommand) -> Result<Output, CephError> {
        match self {
            AnyClient::Cli(c) => c.run(command).await,
            #[cfg(feature = "librados")]
            AnyClient::Rados(r) => r.run(command).await,
        }
    }
}

/// The client `serve` uses and why, for the start-up log line.
pub struct Selected {
    pub client: AnyClient,
    pub why: String,
}

#[derive(Debug, thiserror::Error)]
#[error("ceph.backend librados: {0}")]
pub struct SelectError(String);

/// Why `auto` cannot use librados, before trying to connect; `None` when it can try.
pub fn auto_excludes_librados(cli: &CliSettings) -> Option<String> {
    if !LIBRADOS_BUILT {
        return Some("this binary was built without the librados feature".to_string());
    }
    if cli.command != ["ceph"] {
        return Some(format!(
            "--ceph-cmd is {:?}, a wrapper: librados would talk to the cluster of this host's ceph.conf instead",
            cli.command.join(" ")
        ));
    }
    None
}

/// One line for `check-config` and the logs: what the choice means for this build and settings
/// (without connecting).
pub fn describe(choice: BackendChoice, cli: &CliSettings) -> String {
    match choice {
        BackendChoice::Cli => format!("cli (`{}`)", cli.command.join(" ")),
        BackendChoice::Librados => {
            "librados (one connection, --ceph-conf/--ceph-name/--ceph-keyring)".to_string()
        }
        BackendChoice::Auto => match auto_excludes_librados(cli) {
            Some(why) => format!("auto -> cli (`{}`): {why}", cli.command.join(" ")),
            None => "auto -> librados if it connects at start, else cli".to_string(),
        },
    }
}

/// Builds the client for `choice`. `librados` connects at start: a configuration it cannot use
/// (no ceph.conf, a bad option) is an error; a cluster it cannot reach yet is logged and retried
/// on each call with backoff. `auto` falls back to the CLI on any failure to connect.
pub async fn select(choice: BackendChoice, cli: &CliSettings) -> Result<Selected, SelectError> {
    let cli_client = || AnyClient::Cli(CliClient::new(cli));
    match choice {
        BackendChoice::Cli => Ok(Selected {
            client: cli_client(),
            why: "chosen with ceph.backend cli".to_string(),
        }),
        BackendChoice::Librados => {
            let (client, connected, why) = librados(cli).await?;
            let why = if connected {
                why
            } else {
                format!("{why}; calls connect again, with backoff")
            };
            Ok(Selected { client, why })
        }
        BackendChoice::Auto => {
            if let Some(why) = auto_excludes_librados(cli) {
                return Ok(Selected {
                    client: cli_client(),
                    why: format!("auto: {why}"),
                });
            }
            Ok(match librados(cli).await {
                // `auto` picks librados only when it works now.
                Ok((client, true, why)) => Selected {
                    client,
                    why: format!("auto: {why}"),
                },
                Ok((_, false, why)) => Selected {
                    client: cli_client(),
                    why: format!("auto: {why}; using the CLI"),
                },
                Err(e) => Selected {
                    client: cli_client(),
                    why: format!("auto: librados cannot be used ({}); using the CLI", e.0),
                },
            })
        }
    }
}

#[cfg(not(feature = "librados"))]
async fn librados(_cli: &CliSettings) -> Result<(AnyClient, bool, String), SelectError> {
    Err(SelectError(
        "this binary was built without the librados feature (cargo build --features librados)"
            .to_string(),
    ))
}

/// The librados client, whether it is connected, and why.
#[cfg(feature = "librados")]
async fn librados(cli: &CliSettings) -> Result<(AnyClient, bool, String), SelectError> {
    let client = RadosClient::new(RadosSettings {
        conf: cli.conf.clone(),
        name: cli.name.clone(),
        keyring: cli.keyring.clone(),
        timeout: cli.timeout,
    })
    .with_max_reply_bytes(cli.max_reply_bytes);
    let started = std::time::Instant::now();
    let who = format!(
        "as {} with {}",
        cli.name.as_deref().unwrap_or(RadosSettings::DEFAULT_NAME),
        cli.conf
            .as_deref()
            .unwrap_or("ceph.conf from $CEPH_CONF or /etc/ceph")
    );
    match client.ensure_connected().await {
        Ok(()) => {
            let why = format!(
                "librados connected {who} in {} ms",
                started.elapsed().as_millis()
            );
            Ok((AnyClient::Rados(client), true, why))
        }
        Err(e) if e.stage == ConnectStage::Configure => Err(SelectError(e.message)),
        Err(e) => {
            let why = format!("librados not connected {who} ({})", e.message);
            Ok((AnyClient::Rados(client), false, why))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn cli(command: &[&str]) -> CliSettings {
        CliSettings {
            command: command.iter().map(|s| s.to_string()).collect(),
            conf: None,
            name: None,
            keyring: None,
            timeout: Duration::from_secs(1),
            max_reply_bytes: crate::ceph::DEFAULT_MAX_REPLY_BYTES,
        }
    }

    #[tokio::test]
    async fn cli_is_cli() {
        let s = select(BackendChoice::Cli, &cli(&["ceph"])).await.unwrap();
        assert_eq!(s.client.backend(), Backend::Cli);
        assert!(s.why.contains("ceph.backend cli"), "{}", s.why);
    }

    /// A wrapper such as `cephadm shell -- ceph` reaches another host's cluster: auto keeps
    /// the CLI, without trying librados.
    #[tokio::test]
    async fn auto_keeps_the_cli_for_a_wrapper() {
        let s = select(
            BackendChoice::Auto,
            &cli(&["kubectl", "exec", "x", "--", "ceph"]),
        )
        .await
        .unwrap();
        assert_eq!(s.client.backend(), Backend::Cli);
        assert!(s.why.starts_with("auto: "), "{}", s.why);
        if LIBRADOS_BUILT {
            assert!(s.why.contains("wrapper"), "{}", s.why);
        }
        assert!(
            describe(BackendChoice::Auto, &cli(&["cephadm", "shell"])).starts_with("auto -> cli")
        );
    }

    /// auto with a ceph.conf that does not exist: the CLI, saying why.
    #[tokio::test]
    async fn auto_falls_back_to_the_cli() {
        let mut settings = cli(&["ceph"]);
        settings.conf = Some("/nonexistent/ceph.conf".into());
        let s = select(BackendChoice::Auto, &settings).await.unwrap();
        assert_eq!(s.client.backend(), Backend::Cli);
        if LIBRADOS_BUILT {
            assert!(s.why.contains("/nonexistent/ceph.conf"), "{}", s.why);
        } else {
            assert!(s.why.contains("without the librados feature"), "{}", s.why);
        }
    }

    /// librados asked for explicitly with a configuration it cannot use: an error at start,
    /// not a silent fallback.
    #[tokio::test]
    async fn librados_with_an_unusable_configuration_is_an_error() {
        let mut settings = cli(&["ceph"]);
        settings.conf = Some("/nonexistent/ceph.conf".into());
        let err = select(BackendChoice::Librados, &settings)
            .await
            .err()
            .expect("an error");
        let text = err.to_string();
        if LIBRADOS_BUILT {
            assert!(text.contains("/nonexistent/ceph.conf"), "{text}");
        } else {
            assert!(text.contains("without the librados feature"), "{text}");
        }
    }

    #[test]
    fn choice_names() {
        for c in [
            BackendChoice::Cli,
            BackendChoice::Librados,
            BackendChoice::Auto,
        ] {
            let parsed: BackendChoice =
                serde_json::from_value(serde_json::json!(c.as_str())).unwrap();
            assert_eq!(parsed, c);
        }
        assert_eq!(BackendChoice::default(), BackendChoice::Auto);
    }
}
