//! `--web.config.file`: the web configuration file of Prometheus' exporter-toolkit, so that the
//! file a security team wrote for node_exporter works here too:
//!
//! ```yaml
//! tls_server_config:
//!   cert_file: server.crt          # relative paths: to this file's directory
//!   key_file: server.key
//!   client_auth_type: RequireAndVerifyClientCert   # optional, default NoClientCert
//!   client_ca_file: ca.crt         # with a Verify* client_auth_type
//!   min_version: TLS12             # TLS12 (default) or TLS13
//!   max_version: TLS13
//! basic_auth_users:
//!   prometheus: $2y$10$...         # bcrypt hash
//! ```
//!
//! Unknown keys are refused (a misspelt `basic_auth_user` must not leave the port open), and
//! every error says the file, the line and what is expected. TLS is rustls with the `ring`
//! provider: no OpenSSL, and no cmake to build it. Keys of the toolkit's format that are not
//! here (`cipher_suites`, `curve_preferences`, `client_allowed_sans`, `http_server_config`) are
//! refused like any unknown key rather than silently ignored.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::client::danger::HandshakeSignatureValid;
use rustls::crypto::WebPkiSupportedAlgorithms;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, UnixTime};
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::server::WebPkiClientVerifier;
use rustls::{DigitallySignedStruct, DistinguishedName, RootCertStore, SignatureScheme};
use serde_saphyr::Spanned;

/// Why a web config file was refused.
#[derive(Debug, thiserror::Error)]
pub enum WebConfigError {
    #[error("cannot read web config file {path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// Not YAML, or not the expected keys: serde-saphyr's message carries line and column.
    #[error("web config file {path}: {message}")]
    Yaml { path: PathBuf, message: String },
    #[error("web config file {path} line {line} column {column}: {key}: {message}")]
    Invalid {
        path: PathBuf,
        line: u64,
        column: u64,
        key: String,
        message: String,
    },
}

/// The file as written; every key optional, unknown keys refused.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    tls_server_config: Option<Spanned<TlsFile>>,
    basic_auth_users: Option<BTreeMap<String, Spanned<String>>>,
}

#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct TlsFile {
    cert_file: Option<Spanned<PathBuf>>,
    key_file: Option<Spanned<PathBuf>>,
    client_auth_type: Option<Spanned<String>>,
    client_ca_file: Option<Spanned<PathBuf>>,
    min_version: Option<Spanned<String>>,
    max_version: Option<Spanned<String>>,
}

/// `client_auth_type`, with the toolkit's (Go's) names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientAuth {
    NoClientCert,
    RequestClientCert,
    RequireAnyClientCert,
    VerifyClientCertIfGiven,
    RequireAndVerifyClientCert,
}

impl ClientAuth {
    const ALL: [ClientAuth; 5] = [
        ClientAuth::NoClientCert,
        ClientAuth::RequestClientCert,
        ClientAuth::RequireAnyClientCert,
        ClientAuth::VerifyClientCertIfGiven,
        ClientAuth::RequireAndVerifyClientCert,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            ClientAuth::NoClientCert => "NoClientCert",
            ClientAuth::RequestClientCert => "RequestClientCert",
            ClientAuth::RequireAnyClientCert => "RequireAnyClientCert",
            ClientAuth::VerifyClientCertIfGiven => "VerifyClientCertIfGiven",
            ClientAuth::RequireAndVerifyClientCert => "RequireAndVerifyClientCert",
        }
    }

    fn verifies(self) -> bool {
        matches!(
            self,
            ClientAuth::VerifyClientCertIfGiven | ClientAuth::RequireAndVerifyClientCert
        )
    }
}

/// A TLS protocol version rustls speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum TlsVersion {
    Tls12,
    Tls13,
}

impl TlsVersion {
    pub fn as_str(self) -> &'static str {
        match self {
            TlsVersion::Tls12 => "TLS12",
            TlsVersion::Tls13 => "TLS13",
        }
    }
}

/// `tls_server_config`, checked, with paths resolved against the file's directory.
#[derive(Debug, Clone, PartialEq)]
pub struct TlsSettings {
    pub cert_file: PathBuf,
    pub key_file: PathBuf,
    pub client_auth: ClientAuth,
    pub client_ca_file: Option<PathBuf>,
    pub min_version: TlsVersion,
    pub max_version: TlsVersion,
    /// Line and column of cert_file, key_file, client_ca_file (for errors about their content).
    lines: [(u64, u64); 3],
}

/// A web config file, checked and ready: the TLS server config built from the certificate and
/// key files as they were when it was loaded, the users and their bcrypt hashes.
#[derive(Clone)]
pub struct WebConfig {
    pub path: PathBuf,
    pub tls: Option<TlsSettings>,
    /// User name -> bcrypt hash; empty: no basic auth.
    pub users: BTreeMap<String, String>,
    server_config: Option<Arc<rustls::ServerConfig>>,
}

impl fmt::Debug for WebConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Not the hashes: they end up in logs.
        f.debug_struct("WebConfig")
            .field("path", &self.path)
            .field("tls", &self.tls)
            .field("users", &self.users.keys().collect::<Vec<_>>())
            .finish()
    }
}

/// Where a key sits in the file, for error messages.
struct At<'a> {
    path: &'a Path,
}

impl At<'_> {
    fn err<T>(
        &self,
        spanned: &Spanned<T>,
        key: &str,
        message: impl Into<String>,
    ) -> WebConfigError {
        WebConfigError::Invalid {
            path: self.path.to_path_buf(),
            line: spanned.referenced.line(),
            column: spanned.referenced.column(),
            key: key.to_string(),
            message: message.into(),
        }
    }
}

impl WebConfig {
    /// Reads, checks and builds the file at `path`, and the certificate, key and CA files it
    /// names. Nothing is half-applied: an error leaves whatever was in force before.
    pub fn load(path: &Path) -> Result<Self, WebConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| WebConfigError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        let mut config = Self::parse(path, &text)?;
        if let Some(tls) = &config.tls {
            config.server_config = Some(build_server_config(path, tls)?);
        }
        Ok(config)
    }

    /// The file's text checked without reading the files it names (for the deploy tests and
    /// for [`Self::load`]).
    pub fn parse(path: &Path, text: &str) -> Result<Self, WebConfigError> {
        // An empty file (or only comments) is valid: no TLS, no authentication, as in the toolkit.
        let empty = text.lines().all(|l| {
            let t = l.trim();
            t.is_empty() || t.starts_with('#')
        });
        let file: File = if empty {
            File::default()
        } else {
            serde_saphyr::from_str(text).map_err(|e| WebConfigError::Yaml {
                path: path.to_path_buf(),
                message: e.to_string(),
            })?
        };
        let at = At { path };
        let dir = path.parent().unwrap_or(Path::new("."));
        let tls = file
            .tls_server_config
            .as_ref()
            .map(|t| tls_settings(&at, dir, t))
            .transpose()?;
        let mut users = BTreeMap::new();
        for (user, hash) in file.basic_auth_users.unwrap_or_default() {
            let key = format!("basic_auth_users.{user}");
            if user.is_empty() || user.contains(':') {
                return Err(at.err(
                    &hash,
                    &key,
                    "a user name must be non-empty and without ':' (basic auth sends user:password)",
                ));
            }
            if let Err(e) = hash.value.parse::<bcrypt::HashParts>() {
                return Err(at.err(&hash, &key, format!(
                    "expected a bcrypt hash such as $2y$10$... ({e}); make one with: htpasswd -nBC 10 \"\" | tr -d ':\\n'"
                )));
            }
            users.insert(user, hash.value);
        }
        Ok(WebConfig {
            path: path.to_path_buf(),
            tls,
            users,
            server_config: None,
        })
    }

    /// The TLS server config, when the file asks for TLS (only after [`Self::load`]).
    pub fn server_config(&self) -> Option<Arc<rustls::ServerConfig>> {
        self.server_config.clone()
    }

    /// Every file this config was built from: the file itself, then the certificate, key and
    /// CA files; a change to any of them means a reload (a renewed certificate included).
    pub fn files(&self) -> Vec<PathBuf> {
        let mut out = vec![self.path.clone()];
        if let Some(t) = &self.tls {
            out.push(t.cert_file.clone());
            out.push(t.key_file.clone());
            out.extend(t.client_ca_file.clone());
        }
        out
    }

    /// One line for `check-config` and the start-up log.
    pub fn describe(&self) -> String {
        let tls = match &self.tls {
            None => "plain HTTP (no tls_server_config)".to_string(),
            Some(t) => format!(
                "TLS {}..{} with {} ({}), client certificates: {}{}",
                t.min_version.as_str(),
                t.max_version.as_str(),
                t.cert_file.display(),
                t.key_file.display(),
                t.client_auth.as_str(),
                t.client_ca_file
                    .as_ref()
                    .map(|c| format!(" (CA {})", c.display()))
                    .unwrap_or_default()
            ),
        };
        let auth = if self.users.is_empty() {
            "no basic auth".to_string()
        } else {
            format!(
                "basic auth for {} user{} ({})",
                self.users.len(),
                if self.users.len() == 1 { "" } else { "s" },
                self.users.keys().cloned().collect::<Vec<_>>().join(", ")
            )
        };
        format!("{tls}; {auth}")
    }
}

fn tls_settings(
    at: &At<'_>,
    dir: &Path,
    spanned: &Spanned<TlsFile>,
) -> Result<TlsSettings, WebConfigError> {
    let t = &spanned.value;
    let resolve = |p: &Path| {
        if p.is_absolute() {
            p.to_path_buf()
        } else {
            dir.join(p)
        }
    };
    let (Some(cert), Some(key)) = (&t.cert_file, &t.key_file) else {
        return Err(at.err(
            spanned,
            "tls_server_config",
            "needs both cert_file and key_file (PEM files; relative paths are read from the web config file's directory)",
        ));
    };
    let client_auth = match &t.client_auth_type {
        None => ClientAuth::NoClientCert,
        Some(s) => ClientAuth::ALL
            .into_iter()
            .find(|a| a.as_str() == s.value)
            .ok_or_else(|| {
                at.err(
                    s,
                    "tls_server_config.client_auth_type",
                    format!(
                        "unknown {:?}; expected one of {}",
                        s.value,
                        ClientAuth::ALL.map(ClientAuth::as_str).join(", ")
                    ),
                )
            })?,
    };
    let client_ca_file = t.client_ca_file.as_ref().map(|c| resolve(&c.value));
    match (&t.client_ca_file, client_auth.verifies()) {
        (Some(ca), false) => {
            return Err(at.err(ca, "tls_server_config.client_ca_file", format!(
                "a client CA without a client_auth_type that verifies against it ({} was given): set client_auth_type to RequireAndVerifyClientCert or VerifyClientCertIfGiven",
                client_auth.as_str()
            )))
        }
        (None, true) => {
            let message = format!(
                "{} needs client_ca_file, the CA that signs the clients' certificates",
                client_auth.as_str()
            );
            // A verifying type is never the default: client_auth_type was written.
            return Err(match &t.client_auth_type {
                Some(s) => at.err(s, "tls_server_config.client_auth_type", message),
                None => at.err(spanned, "tls_server_config", message),
            });
        }
        _ => {}
    }
    let version = |v: &Option<Spanned<String>>, key: &str, default: TlsVersion| {
        match v {
        None => Ok(default),
        Some(s) => match s.value.as_str() {
            "TLS12" => Ok(TlsVersion::Tls12),
            "TLS13" => Ok(TlsVersion::Tls13),
            "TLS10" | "TLS11" => Err(at.err(
                s,
                key,
                format!("{} is not offered (rustls speaks TLS 1.2 and 1.3 only, and older versions are broken); expected TLS12 or TLS13", s.value),
            )),
            other => Err(at.err(s, key, format!("unknown {other:?}; expected TLS12 or TLS13"))),
        },
    }
    };
    let min_version = version(
        &t.min_version,
        "tls_server_config.min_version",
        TlsVersion::Tls12,
    )?;
    let max_version = version(
        &t.max_version,
        "tls_server_config.max_version",
        TlsVersion::Tls13,
    )?;
    if min_version > max_version {
        return Err(at.err(
            spanned,
            "tls_server_config",
            format!(
                "min_version {} is above max_version {}",
                min_version.as_str(),
                max_version.as_str()
            ),
        ));
    }
    let line = |s: Option<&Spanned<PathBuf>>| {
        let r = s.map_or(spanned.referenced, |s| s.referenced);
        (r.line(), r.column())
    };
    Ok(TlsSettings {
        lines: [
            line(Some(cert)),
            line(Some(key)),
            line(t.client_ca_file.as_ref()),
        ],
        cert_file: resolve(&cert.value),
        key_file: resolve(&key.value),
        client_auth,
        client_ca_file,
        min_version,
        max_version,
    })
}

/// An error about a file the web config names, said at the line of the key that names it.
fn file_err(
    config: &Path,
    (line, column): (u64, u64),
    key: &str,
    file: &Path,
    message: impl fmt::Display,
) -> WebConfigError {
    WebConfigError::Invalid {
        path: config.to_path_buf(),
        line,
        column,
        key: format!("tls_server_config.{key} {}", file.display()),
        message: message.to_string(),
    }
}

fn build_server_config(
    config: &Path,
    t: &TlsSettings,
) -> Result<Arc<rustls::ServerConfig>, WebConfigError> {
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(&t.cert_file)
        .and_then(|it| it.collect::<Result<Vec<_>, _>>())
        .map_err(|e| file_err(config, t.lines[0], "cert_file", &t.cert_file, e))?;
    if certs.is_empty() {
        return Err(file_err(
            config,
            t.lines[0],
            "cert_file",
            &t.cert_file,
            "no PEM certificate in it (expected -----BEGIN CERTIFICATE-----)",
        ));
    }
    let key = PrivateKeyDer::from_pem_file(&t.key_file).map_err(|e| {
        file_err(
            config,
            t.lines[1],
            "key_file",
            &t.key_file,
            format!("expected a PEM private key (PKCS#8, PKCS#1 or SEC1): {e}"),
        )
    })?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let verifier: Arc<dyn ClientCertVerifier> = match t.client_auth {
        ClientAuth::NoClientCert => WebPkiClientVerifier::no_client_auth(),
        ClientAuth::RequestClientCert | ClientAuth::RequireAnyClientCert => {
            Arc::new(AnyClientCert {
                mandatory: t.client_auth == ClientAuth::RequireAnyClientCert,
                algorithms: provider.signature_verification_algorithms,
            })
        }
        ClientAuth::VerifyClientCertIfGiven | ClientAuth::RequireAndVerifyClientCert => {
            let ca_file = t.client_ca_file.as_deref().unwrap_or(Path::new(""));
            let mut roots = RootCertStore::empty();
            let cas = CertificateDer::pem_file_iter(ca_file)
                .and_then(|it| it.collect::<Result<Vec<_>, _>>())
                .map_err(|e| file_err(config, t.lines[2], "client_ca_file", ca_file, e))?;
            let (added, _) = roots.add_parsable_certificates(cas);
            if added == 0 {
                return Err(file_err(
                    config,
                    t.lines[2],
                    "client_ca_file",
                    ca_file,
                    "no usable PEM CA certificate in it",
                ));
            }
            let builder =
                WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider.clone());
            let builder = if t.client_auth == ClientAuth::VerifyClientCertIfGiven {
                builder.allow_unauthenticated()
            } else {
                builder
            };
            builder
                .build()
                .map_err(|e| file_err(config, t.lines[2], "client_ca_file", ca_file, e))?
        }
    };
    let versions: Vec<&'static rustls::SupportedProtocolVersion> = [
        (TlsVersion::Tls12, &rustls::version::TLS12),
        (TlsVersion::Tls13, &rustls::version::TLS13),
    ]
    .into_iter()
    .filter(|(v, _)| (t.min_version..=t.max_version).contains(v))
    .map(|(_, p)| p)
    .collect();
    let mut server = rustls::ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(&versions)
        .map_err(|e| file_err(config, t.lines[0], "min_version", Path::new(""), e))?
        .with_client_cert_verifier(verifier)
        .with_single_cert(certs, key)
        .map_err(|e| {
            file_err(
                config,
                t.lines[1],
                "key_file",
                &t.key_file,
                format!("does not go with cert_file {}: {e}", t.cert_file.display()),
            )
        })?;
    // HTTP/1.1 only: the server speaks nothing else, and saying so stops a client from trying h2.
    server.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(server))
}

/// `RequestClientCert` / `RequireAnyClientCert`: a certificate is asked for (or required) and
/// its handshake signature checked, but not its issuer, as Go's `tls` does for these.
#[derive(Debug)]
struct AnyClientCert {
    mandatory: bool,
    algorithms: WebPkiSupportedAlgorithms,
}

impl ClientCertVerifier for AnyClientCert {
    fn client_auth_mandatory(&self) -> bool {
        self.mandatory
    }

    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        &[]
    }

    fn verify_client_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        Ok(ClientCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.algorithms.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<WebConfig, String> {
        WebConfig::parse(Path::new("/etc/crb/web.yml"), text).map_err(|e| e.to_string())
    }

    #[test]
    fn the_toolkit_example_parses_with_paths_beside_the_file() {
        let c = parse(
            "tls_server_config:\n  cert_file: server.crt\n  key_file: /abs/server.key\n  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: ca.crt\n  min_version: TLS13\nbasic_auth_users:\n  prometheus: $2y$10$QOauhQNbBCuQDKes6eFzPeMqBSjb7Mr5DUmpZ/VcEd00UAV/LDeSi\n",
        )
        .unwrap();
        let t = c.tls.as_ref().unwrap();
        assert_eq!(t.cert_file, Path::new("/etc/crb/server.crt"));
        assert_eq!(t.key_file, Path::new("/abs/server.key"));
        assert_eq!(
            t.client_ca_file.as_deref(),
            Some(Path::new("/etc/crb/ca.crt"))
        );
        assert_eq!(t.client_auth, ClientAuth::RequireAndVerifyClientCert);
        assert_eq!(
            (t.min_version, t.max_version),
            (TlsVersion::Tls13, TlsVersion::Tls13)
        );
        assert_eq!(c.users.keys().collect::<Vec<_>>(), ["prometheus"]);
        assert_eq!(
            c.files(),
            [
                "/etc/crb/web.yml",
                "/etc/crb/server.crt",
                "/abs/server.key",
                "/etc/crb/ca.crt"
            ]
            .map(PathBuf::from)
        );
        // The hash never shows in a log line.
        assert!(!format!("{c:?}").contains("$2y$"));
    }

    #[test]
    fn an_empty_file_is_plain_http_without_auth() {
        let c = parse("# nothing yet\n").unwrap();
        assert!(c.tls.is_none() && c.users.is_empty());
        assert_eq!(
            c.describe(),
            "plain HTTP (no tls_server_config); no basic auth"
        );
    }

    #[test]
    fn mistakes_are_refused_with_line_and_what_is_expected() {
        for (text, expected) in [
            // A misspelt key must not leave the port open.
            ("basic_auth_user:\n  a: b\n", "line 1"),
            ("basic_auth_user:\n  a: b\n", "basic_auth_users"),
            ("tls_server_config:\n  cert_file: a\n  key_file: b\n  cipher_suites: [x]\n", "line 4"),
            ("tls_server_config:\n  cert_file: a\n", "line 2 column 3: tls_server_config: needs both cert_file and key_file"),
            ("tls_server_config:\n  cert_file: a\n  key_file: b\n  min_version: TLS10\n", "line 4 column 16: tls_server_config.min_version: TLS10 is not offered"),
            ("tls_server_config:\n  cert_file: a\n  key_file: b\n  min_version: tls12\n", "expected TLS12 or TLS13"),
            ("tls_server_config:\n  cert_file: a\n  key_file: b\n  min_version: TLS13\n  max_version: TLS12\n", "min_version TLS13 is above max_version TLS12"),
            ("tls_server_config:\n  cert_file: a\n  key_file: b\n  client_auth_type: Verify\n", "line 4 column 21: tls_server_config.client_auth_type: unknown \"Verify\"; expected one of NoClientCert, RequestClientCert"),
            ("tls_server_config:\n  cert_file: a\n  key_file: b\n  client_auth_type: RequireAndVerifyClientCert\n", "needs client_ca_file"),
            ("tls_server_config:\n  cert_file: a\n  key_file: b\n  client_ca_file: ca\n", "line 4 column 19: tls_server_config.client_ca_file: a client CA without a client_auth_type"),
            ("basic_auth_users:\n  prometheus: secret\n", "line 2 column 15: basic_auth_users.prometheus: expected a bcrypt hash"),
            ("basic_auth_users:\n  \"a:b\": $2y$10$QOauhQNbBCuQDKes6eFzPeMqBSjb7Mr5DUmpZ/VcEd00UAV/LDeSi\n", "without ':'"),
        ] {
            let err = parse(text).expect_err(text);
            assert!(err.contains(expected), "{text:?}: {err}");
            assert!(err.starts_with("web config file /etc/crb/web.yml"), "{err}");
        }
    }

    #[test]
    fn missing_files_are_named() {
        let dir = std::env::temp_dir().join(format!("crb-webcfg-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("web.yml");
        std::fs::write(
            &path,
            "tls_server_config:\n  cert_file: nope.crt\n  key_file: nope.key\n",
        )
        .unwrap();
        let err = WebConfig::load(&path).unwrap_err().to_string();
        assert!(
            err.contains("tls_server_config.cert_file") && err.contains("nope.crt"),
            "{err}"
        );
        let err = WebConfig::load(&dir.join("absent.yml"))
            .unwrap_err()
            .to_string();
        assert!(err.starts_with("cannot read web config file"), "{err}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
