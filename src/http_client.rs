//! The one HTTP client of the program: `status` reading an exporter's `/api/status`, the
//! enforcer asking Prometheus for p99, the experiment reading its enforcer's status, and the
//! integration tests talking to the servers they start.
//!
//! One connection per exchange, on hyper's HTTP/1 client connection (`hyper::client::conn`),
//! over TCP or, for `https://` URLs, over TLS from rustls with the `ring` provider (no OpenSSL),
//! as `serve --web.config.file` serves it. What a curl or promtool user expects is there
//! ([`Access`]): a CA file to trust instead of the system's CAs, a client certificate, a name to
//! check the certificate against, skipping the check only when asked, and basic auth. Every
//! exchange has a deadline and a cap on the body it reads, so a wrong URL cannot hang the
//! caller or make it read without bound; every failure names the URL and what to check (an
//! untrusted certificate names the CA file it was checked against, a 401 says whether
//! credentials were sent, plain http to a TLS port says to use https).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper::header::{HeaderValue, ACCEPT, AUTHORIZATION, CONTENT_LENGTH, CONTENT_TYPE, HOST};
use hyper::{Method, Request, Uri};
use hyper_util::rt::TokioIo;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};

/// `http` or `https`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scheme {
    Http,
    Https,
}

impl Scheme {
    pub fn as_str(self) -> &'static str {
        match self {
            Scheme::Http => "http",
            Scheme::Https => "https",
        }
    }

    fn default_port(self) -> u16 {
        match self {
            Scheme::Http => 80,
            Scheme::Https => 443,
        }
    }
}

/// Where an `http(s)://HOST[:PORT][/PREFIX]` URL points: the address to connect to, the Host
/// header and the path prefix every request goes under (a Prometheus behind
/// `--web.route-prefix` or a reverse proxy at `/prometheus`); with [`HttpTarget::with_access`],
/// how to get in (TLS trust, client certificate, basic auth).
#[derive(Debug, Clone)]
pub struct HttpTarget {
    pub scheme: Scheme,
    /// `host:port`, port 80 (http) or 443 (https) when the URL gives none.
    pub connect: String,
    /// The URL's authority as written (`host` or `host:port`).
    pub host: String,
    /// `""` for the root, else `/prefix` without a trailing slash.
    pub prefix: String,
    /// The host without port or brackets: the name a server certificate is checked against.
    name: String,
    /// Built by [`HttpTarget::with_access`]; an https target without it trusts the system's CAs.
    tls: Option<Arc<TlsClient>>,
    /// `Basic ...`, marked sensitive (its Debug shows no secret).
    authorization: Option<HeaderValue>,
}

impl HttpTarget {
    pub fn parse(url: &str) -> Result<Self, String> {
        const EXPECTED: &str = "expected http://HOST:PORT[/PREFIX] (or https://)";
        let (scheme, rest) = if let Some(rest) = url.strip_prefix("http://") {
            (Scheme::Http, rest)
        } else if let Some(rest) = url.strip_prefix("https://") {
            (Scheme::Https, rest)
        } else {
            return Err(format!("{url:?}: {EXPECTED}"));
        };
        let (host, path) = match rest.find('/') {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, ""),
        };
        let bad = |why: &str| format!("{url:?}: {why}; {EXPECTED}");
        if host.contains(['@', '?', '#']) || (host.to_string() + path).contains(char::is_whitespace)
        {
            return Err(bad("no user, password, query, fragment or space"));
        }
        if path.contains(['?', '#']) {
            return Err(bad("no query or fragment"));
        }
        let (name, port) = match host.strip_prefix('[') {
            Some(v6) => {
                let (addr, tail) = v6
                    .split_once(']')
                    .ok_or_else(|| bad("an IPv6 address needs its closing ]"))?;
                if !addr.contains(':') {
                    return Err(bad("[...] holds an IPv6 address"));
                }
                let port = match tail {
                    "" => None,
                    t => Some(
                        t.strip_prefix(':')
                            .ok_or_else(|| bad("expected :PORT after ]"))?,
                    ),
                };
                (&host[..addr.len() + 2], port)
            }
            None => match host.split_once(':') {
                Some((_, p)) if p.contains(':') => {
                    return Err(bad("an IPv6 address goes in brackets (http://[::1]:9090)"))
                }
                Some((h, p)) => (h, Some(p)),
                None => (host, None),
            },
        };
        if name.is_empty() {
            return Err(bad("no host"));
        }
        let port = match port {
            None => scheme.default_port(),
            Some(p) => p
                .parse::<u16>()
                .ok()
                .filter(|p| *p > 0)
                .ok_or_else(|| bad(&format!("port {p:?} is not a number from 1 to 65535")))?,
        };
        let connect = format!("{name}:{port}");
        Ok(HttpTarget {
            scheme,
            connect,
            host: host.to_string(),
            prefix: path.trim_end_matches('/').to_string(),
            name: name
                .trim_start_matches('[')
                .trim_end_matches(']')
                .to_string(),
            tls: None,
            authorization: None,
        })
    }

    /// The full URL of `path` (which starts with `/`, and may carry an encoded query) under this
    /// target, as requested and as named in error messages.
    pub fn url(&self, path: &str) -> String {
        format!(
            "{}://{}{}{path}",
            self.scheme.as_str(),
            self.host,
            self.prefix
        )
    }

    /// This target reached with `access`: the TLS client built (its CA, certificate and key
    /// files read now, once) and the basic-auth header made. TLS settings on an http URL are
    /// refused rather than ignored: whoever gave them expects TLS.
    pub fn with_access(mut self, access: &Access) -> Result<Self, String> {
        match self.scheme {
            Scheme::Http => {
                if let Some(flag) = access.tls_flag_given() {
                    return Err(format!(
                        "{flag} is for https URLs; {} is plain http (use https:// if the exporter serves TLS)",
                        self.url("")
                    ));
                }
            }
            Scheme::Https => self.tls = Some(Arc::new(TlsClient::new(access, &self.name)?)),
        }
        self.authorization = access.basic_auth.as_ref().map(BasicAuth::header);
        Ok(self)
    }

    /// The user name sent with basic auth, if any.
    fn basic_auth_sent(&self) -> bool {
        self.authorization.is_some()
    }
}

/// How to get into a server: what curl's `--cacert`/`--cert`/`--key`/`-k`/`-u` and
/// Prometheus' `tls_config`/`basic_auth` say. The default: the system's CAs, no client
/// certificate, no credentials.
#[derive(Debug, Clone, Default)]
pub struct Access {
    /// PEM CA certificate(s) to trust instead of the system's.
    pub ca_file: Option<PathBuf>,
    /// PEM client certificate (chain) and its key, for servers that require one.
    pub cert_file: Option<PathBuf>,
    pub key_file: Option<PathBuf>,
    /// The name to check the server's certificate against, when not the URL's host.
    pub server_name: Option<String>,
    /// Accept any server certificate (still encrypted, not authenticated).
    pub insecure_skip_verify: bool,
    pub basic_auth: Option<BasicAuth>,
}

impl Access {
    /// The first TLS flag given, by its command-line name.
    fn tls_flag_given(&self) -> Option<&'static str> {
        [
            (self.ca_file.is_some(), "--tls.ca-file"),
            (self.cert_file.is_some(), "--tls.cert-file"),
            (self.key_file.is_some(), "--tls.key-file"),
            (self.server_name.is_some(), "--tls.server-name"),
            (self.insecure_skip_verify, "--tls.insecure-skip-verify"),
        ]
        .into_iter()
        .find_map(|(given, flag)| given.then_some(flag))
    }
}

/// A user name and password for basic auth; Debug shows no password.
#[derive(Clone)]
pub struct BasicAuth {
    pub username: String,
    pub password: String,
}

impl std::fmt::Debug for BasicAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BasicAuth")
            .field("username", &self.username)
            .field("password", &"(hidden)")
            .finish()
    }
}

impl BasicAuth {
    fn header(&self) -> HeaderValue {
        use base64::Engine as _;
        let token = base64::engine::general_purpose::STANDARD
            .encode(format!("{}:{}", self.username, self.password));
        let mut value = HeaderValue::from_str(&format!("Basic {token}"))
            .expect("base64 is a valid header value");
        value.set_sensitive(true);
        value
    }
}

/// What the server's certificate is checked against, for the error messages.
#[derive(Debug, Clone)]
enum Trust {
    CaFile(PathBuf),
    /// The system's CA bundle, from this file.
    System(PathBuf),
    Nothing,
}

/// A TLS client config with what it was built from.
#[derive(Debug)]
struct TlsClient {
    config: Arc<rustls::ClientConfig>,
    server_name: ServerName<'static>,
    trust: Trust,
    client_cert: Option<PathBuf>,
}

/// Where the system's CA bundle usually is (Debian/Ubuntu/Alpine, Fedora/RHEL, SUSE, others),
/// after `$SSL_CERT_FILE` (as OpenSSL and Go read it).
const SYSTEM_CA_BUNDLES: [&str; 4] = [
    "/etc/ssl/certs/ca-certificates.crt",
    "/etc/pki/tls/certs/ca-bundle.crt",
    "/etc/ssl/ca-bundle.pem",
    "/etc/ssl/cert.pem",
];

fn read_certs(path: &Path, flag: &str) -> Result<Vec<CertificateDer<'static>>, String> {
    let shown = path.display();
    let certs = CertificateDer::pem_file_iter(path)
        .map_err(|e| format!("{flag} {shown}: cannot read it: {}", pem_error(&e)))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("{flag} {shown}: not PEM certificates: {}", pem_error(&e)))?;
    if certs.is_empty() {
        return Err(format!(
            "{flag} {shown}: holds no certificate (expected PEM: -----BEGIN CERTIFICATE-----)"
        ));
    }
    Ok(certs)
}

fn pem_error(e: &rustls::pki_types::pem::Error) -> String {
    match e {
        rustls::pki_types::pem::Error::Io(io) => io.to_string(),
        other => format!("{other:?}"),
    }
}

impl TlsClient {
    fn new(access: &Access, host: &str) -> Result<Self, String> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(|e| format!("TLS: {e}"))?;
        let (builder, trust) = match (&access.ca_file, access.insecure_skip_verify) {
            (Some(_), true) => {
                return Err(
                    "--tls.ca-file and --tls.insecure-skip-verify: give one (a CA to check the server against, or no check at all)"
                        .to_string(),
                )
            }
            (_, true) => (
                builder
                    .dangerous()
                    .with_custom_certificate_verifier(Arc::new(AnyServerCert {
                        algorithms: provider.signature_verification_algorithms,
                    })),
                Trust::Nothing,
            ),
            (Some(ca), false) => {
                let mut roots = rustls::RootCertStore::empty();
                for cert in read_certs(ca, "--tls.ca-file")? {
                    roots.add(cert).map_err(|e| {
                        format!("--tls.ca-file {}: not a usable CA certificate: {e}", ca.display())
                    })?;
                }
                (
                    builder.with_root_certificates(roots),
                    Trust::CaFile(ca.clone()),
                )
            }
            (None, false) => {
                let from_env = std::env::var_os("SSL_CERT_FILE").map(PathBuf::from);
                let bundle = from_env
                    .into_iter()
                    .chain(SYSTEM_CA_BUNDLES.iter().map(PathBuf::from))
                    .find(|p| p.is_file())
                    .ok_or_else(|| {
                        format!(
                            "no system CA bundle found ($SSL_CERT_FILE, {}): give the CA that signed the server's certificate with --tls.ca-file",
                            SYSTEM_CA_BUNDLES.join(", ")
                        )
                    })?;
                let mut roots = rustls::RootCertStore::empty();
                // A bundle may hold certificates webpki cannot use: skip those, as curl does.
                roots.add_parsable_certificates(read_certs(&bundle, "system CA bundle")?);
                (builder.with_root_certificates(roots), Trust::System(bundle))
            }
        };
        let config = match (&access.cert_file, &access.key_file) {
            (None, None) => builder.with_no_client_auth(),
            (Some(cert), Some(key)) => {
                let certs = read_certs(cert, "--tls.cert-file")?;
                let key_der = PrivateKeyDer::from_pem_file(key).map_err(|e| {
                    format!(
                        "--tls.key-file {}: no private key read (expected PEM: -----BEGIN PRIVATE KEY-----): {}",
                        key.display(),
                        pem_error(&e)
                    )
                })?;
                builder.with_client_auth_cert(certs, key_der).map_err(|e| {
                    format!(
                        "--tls.cert-file {} with --tls.key-file {}: {e} (is the key the certificate's?)",
                        cert.display(),
                        key.display()
                    )
                })?
            }
            (Some(_), None) => return Err("--tls.cert-file needs --tls.key-file".to_string()),
            (None, Some(_)) => return Err("--tls.key-file needs --tls.cert-file".to_string()),
        };
        let name = access.server_name.as_deref().unwrap_or(host);
        let server_name = ServerName::try_from(name.to_string())
            .map_err(|e| format!("{name:?} cannot be checked against a certificate: {e}"))?;
        Ok(TlsClient {
            config: Arc::new(config),
            server_name,
            trust,
            client_cert: access.cert_file.clone(),
        })
    }

    /// What a rustls error in the handshake (or in an alert after it) means here.
    fn explain(&self, e: &rustls::Error) -> String {
        use rustls::{AlertDescription as A, CertificateError as C, Error as E};
        let name = match &self.server_name {
            ServerName::DnsName(d) => d.as_ref().to_string(),
            ServerName::IpAddress(ip) => std::net::IpAddr::from(*ip).to_string(),
            other => format!("{other:?}"),
        };
        match e {
            E::InvalidCertificate(C::UnknownIssuer) => match &self.trust {
                Trust::CaFile(ca) => format!(
                    "the server's certificate is not trusted: no CA in --tls.ca-file {} signed it ({e})",
                    ca.display()
                ),
                Trust::System(bundle) => format!(
                    "the server's certificate is not trusted: none of the system's CAs ({}) signed it; give the CA that did with --tls.ca-file ({e})",
                    bundle.display()
                ),
                Trust::Nothing => e.to_string(),
            },
            E::InvalidCertificate(C::NotValidForName | C::NotValidForNameContext { .. }) => {
                format!(
                    "the server's certificate is not for {name}: {e} (use a name it holds in the URL, or --tls.server-name)"
                )
            }
            E::InvalidCertificate(C::Expired | C::ExpiredContext { .. }) => {
                format!("the server's certificate has expired: {e}")
            }
            E::InvalidCertificate(C::NotValidYet | C::NotValidYetContext { .. }) => {
                format!("the server's certificate is not valid yet (is this machine's clock right?): {e}")
            }
            E::InvalidCertificate(_) => format!("the server's certificate was refused: {e}"),
            E::AlertReceived(alert) => match (&self.client_cert, alert) {
                (None, A::CertificateRequired | A::HandshakeFailure) => format!(
                    "{e}: the server requires a client certificate; give --tls.cert-file and --tls.key-file"
                ),
                (
                    Some(cert),
                    A::BadCertificate
                    | A::UnknownCA
                    | A::CertificateUnknown
                    | A::UnsupportedCertificate
                    | A::CertificateExpired
                    | A::DecryptError
                    | A::AccessDenied,
                ) => format!(
                    "{e}: the server refused the client certificate --tls.cert-file {} (is it signed by the server's client CA, and still valid?)",
                    cert.display()
                ),
                (_, A::ProtocolVersion) => format!(
                    "{e}: no TLS version in common with the server (this client speaks TLS 1.2 and 1.3)"
                ),
                _ => e.to_string(),
            },
            E::InvalidMessage(_) => format!(
                "{e}: the server does not speak TLS on this port (is it an http:// URL?)"
            ),
            other => other.to_string(),
        }
    }
}

/// `--tls.insecure-skip-verify`: any certificate is accepted; the handshake's signatures are
/// still checked (the connection is encrypted, to whoever answers).
#[derive(Debug)]
struct AnyServerCert {
    algorithms: rustls::crypto::WebPkiSupportedAlgorithms,
}

impl rustls::client::danger::ServerCertVerifier for AnyServerCert {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: rustls::pki_types::UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        Ok(rustls::client::danger::ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.algorithms.supported_schemes()
    }
}

/// The media type asked for by [`Options::json`].
pub const JSON: &str = "application/json";

/// How long an exchange may take, how much of a body is read, and what is asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Options {
    /// For the whole exchange: connecting, the TLS handshake, sending, the headers and the body.
    pub timeout: Duration,
    /// A longer body is refused ([`HttpClientError::TooLarge`]).
    pub max_body_bytes: usize,
    /// The `Accept` header, if any.
    pub accept: Option<&'static str>,
}

impl Options {
    /// 10 seconds, 16 MiB.
    pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);
    pub const DEFAULT_MAX_BODY_BYTES: usize = 16 << 20;

    /// The defaults, asking for JSON (Prometheus' API, `/api/status`).
    pub fn json() -> Self {
        Options {
            accept: Some(JSON),
            ..Options::default()
        }
    }

    pub fn with_timeout(self, timeout: Duration) -> Self {
        Options { timeout, ..self }
    }

    pub fn with_max_body_bytes(self, max_body_bytes: usize) -> Self {
        Options {
            max_body_bytes,
            ..self
        }
    }
}

impl Default for Options {
    fn default() -> Self {
        Options {
            timeout: Self::DEFAULT_TIMEOUT,
            max_body_bytes: Self::DEFAULT_MAX_BODY_BYTES,
            accept: None,
        }
    }
}

/// An answer, whatever its status.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    pub status: u16,
    /// The `Content-Type` header, if any.
    pub content_type: Option<String>,
    /// The body as text (bytes that are not UTF-8 become U+FFFD).
    pub body: String,
}

/// Why an exchange failed. Each message names the URL and says what to check.
#[derive(Debug, thiserror::Error)]
pub enum HttpClientError {
    /// The URL (or the path under it, or the TLS files for it) is not one this client can use.
    #[error("{0}")]
    InvalidUrl(String),
    #[error(
        "connecting to {url}: {reason} (is the server running there, and are host and port right?)"
    )]
    Connect { url: String, reason: String },
    /// The TLS handshake failed, or the server ended the connection with a TLS alert.
    #[error("{url}: TLS: {reason}")]
    Tls { url: String, reason: String },
    #[error("{url}: no answer within {timeout:?} (is it the right server, and is it overloaded?)")]
    Timeout { url: String, timeout: Duration },
    #[error("{url}: the answer is larger than {limit} bytes, not read (does the URL point at the right server?)")]
    TooLarge { url: String, limit: usize },
    #[error("{url} answered {status}: {excerpt}{hint}")]
    Status {
        url: String,
        status: u16,
        /// The first lines of the body.
        excerpt: String,
        /// What the status most likely means here, in parentheses (or empty).
        hint: String,
    },
    /// Connected, but the exchange broke (the server closed early or does not speak HTTP).
    #[error("{url}: {reason} (does an HTTP server listen there?)")]
    Exchange { url: String, reason: String },
}

impl HttpClientError {
    /// The status of a [`HttpClientError::Status`] answer.
    pub fn status(&self) -> Option<u16> {
        match self {
            HttpClientError::Status { status, .. } => Some(*status),
            _ => None,
        }
    }
}

/// What `status` most likely means, given the body and whether credentials were sent.
fn status_hint(status: u16, body: &str, sent_credentials: bool) -> &'static str {
    match status {
        // What Go's net/http (and `serve --web.config.file`) answer to plain HTTP on a TLS port.
        400 if body.contains("HTTP request to an HTTPS server") => {
            " (the server speaks TLS on this port: use an https:// URL)"
        }
        401 if sent_credentials => " (wrong user name or password)",
        401 => " (the server asks for credentials: basic auth)",
        404 => " (is the URL's path prefix right?)",
        500..=599 => " (the server reports a failure of its own)",
        _ => "",
    }
}

/// GET `path` under `target`: the answer whatever its status.
pub async fn get(
    target: &HttpTarget,
    path: &str,
    options: Options,
) -> Result<Response, HttpClientError> {
    exchange(target, Method::GET, path, None, options).await
}

/// GET `path` under `target`: the body of a 200 answer; any other status is an error carrying
/// the first lines of the body.
pub async fn get_ok(
    target: &HttpTarget,
    path: &str,
    options: Options,
) -> Result<String, HttpClientError> {
    ok(target, path, get(target, path, options).await?)
}

/// POST `json` (sent as `application/json`) to `path` under `target`: the answer whatever its
/// status.
pub async fn post_json(
    target: &HttpTarget,
    path: &str,
    json: &str,
    options: Options,
) -> Result<Response, HttpClientError> {
    let body = Bytes::copy_from_slice(json.as_bytes());
    exchange(target, Method::POST, path, Some((JSON, body)), options).await
}

fn ok(target: &HttpTarget, path: &str, answer: Response) -> Result<String, HttpClientError> {
    if answer.status == 200 {
        return Ok(answer.body);
    }
    Err(HttpClientError::Status {
        url: target.url(path),
        status: answer.status,
        hint: status_hint(answer.status, &answer.body, target.basic_auth_sent()).to_string(),
        excerpt: excerpt(&answer.body),
    })
}

/// The first non-empty lines of a body, shortened, for an error message.
fn excerpt(body: &str) -> String {
    const MAX_CHARS: usize = 300;
    let lines: Vec<&str> = body
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .take(3)
        .collect();
    if lines.is_empty() {
        return "(empty body)".to_string();
    }
    let text = lines.join(" | ");
    match text.char_indices().nth(MAX_CHARS) {
        Some((cut, _)) => format!("{}...", &text[..cut]),
        None => text,
    }
}

/// An error and its causes, each once.
fn reasons(e: &(dyn std::error::Error + 'static)) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut cause = Some(e);
    while let Some(c) = cause {
        let text = c.to_string();
        if !parts.iter().any(|p| p.contains(&text)) {
            parts.push(text);
        }
        cause = c.source();
    }
    parts.join(": ")
}

/// The rustls error in `e`'s chain, if any (tokio-rustls carries it inside an io::Error).
fn rustls_error<'a>(e: &'a (dyn std::error::Error + 'static)) -> Option<&'a rustls::Error> {
    let mut cause = Some(e);
    while let Some(c) = cause {
        if let Some(r) = c.downcast_ref::<rustls::Error>() {
            return Some(r);
        }
        if let Some(inner) = c
            .downcast_ref::<std::io::Error>()
            .and_then(|io| io.get_ref())
        {
            if let Some(r) = inner.downcast_ref::<rustls::Error>() {
                return Some(r);
            }
        }
        cause = c.source();
    }
    None
}

/// Aborts the task driving a connection when the exchange is over (or dropped by a timeout).
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

async fn exchange(
    target: &HttpTarget,
    method: Method,
    path: &str,
    body: Option<(&'static str, Bytes)>,
    options: Options,
) -> Result<Response, HttpClientError> {
    let url = target.url(path);
    if !path.starts_with('/') {
        return Err(HttpClientError::InvalidUrl(format!(
            "{url:?}: the request path {path:?} must start with /"
        )));
    }
    url.parse::<Uri>()
        .map_err(|e| HttpClientError::InvalidUrl(format!("{url:?} is not a valid URL: {e}")))?;
    // On the connection: the path (origin form) and the Host header.
    let uri: Uri = format!("{}{path}", target.prefix)
        .parse()
        .map_err(|e| HttpClientError::InvalidUrl(format!("{url:?} is not a valid URL: {e}")))?;
    let host = HeaderValue::from_str(&target.host)
        .map_err(|e| HttpClientError::InvalidUrl(format!("{url:?}: bad host: {e}")))?;
    let mut request = Request::builder()
        .method(method)
        .uri(uri)
        .header(HOST, host);
    if let Some(accept) = options.accept {
        request = request.header(ACCEPT, HeaderValue::from_static(accept));
    }
    if let Some(auth) = &target.authorization {
        request = request.header(AUTHORIZATION, auth.clone());
    }
    let payload = match body {
        Some((content_type, bytes)) => {
            request = request.header(CONTENT_TYPE, HeaderValue::from_static(content_type));
            bytes
        }
        None => Bytes::new(),
    };
    let request = request
        .body(Full::new(payload))
        .map_err(|e| HttpClientError::InvalidUrl(format!("{url:?}: cannot make a request: {e}")))?;

    let run = async {
        let tcp = tokio::net::TcpStream::connect(&target.connect)
            .await
            .map_err(|e| HttpClientError::Connect {
                url: url.clone(),
                reason: e.to_string(),
            })?;
        let _ = tcp.set_nodelay(true);
        match target.scheme {
            Scheme::Http => send(TokioIo::new(tcp), request, &url, None, options).await,
            Scheme::Https => {
                // Built once by with_access; else (a URL only) the system's CAs, now.
                let tls = match &target.tls {
                    Some(tls) => tls.clone(),
                    None => Arc::new(TlsClient::new(&Access::default(), &target.name).map_err(
                        |reason| HttpClientError::Tls {
                            url: url.clone(),
                            reason,
                        },
                    )?),
                };
                let connector = tokio_rustls::TlsConnector::from(tls.config.clone());
                let stream = connector
                    .connect(tls.server_name.clone(), tcp)
                    .await
                    .map_err(|e| HttpClientError::Tls {
                        url: url.clone(),
                        reason: match rustls_error(&e) {
                            Some(r) => tls.explain(r),
                            None if e.kind() == std::io::ErrorKind::UnexpectedEof => format!(
                                "the server closed the connection during the handshake ({e}): does it speak TLS on this port, and does it want a client certificate?"
                            ),
                            None => e.to_string(),
                        },
                    })?;
                send(TokioIo::new(stream), request, &url, Some(&tls), options).await
            }
        }
    };
    tokio::time::timeout(options.timeout, run)
        .await
        .unwrap_or_else(|_| {
            Err(HttpClientError::Timeout {
                url: url.clone(),
                timeout: options.timeout,
            })
        })
}

/// One request on a new connection (plain or TLS), its answer read up to the body cap.
async fn send<IO>(
    io: IO,
    request: Request<Full<Bytes>>,
    url: &str,
    tls: Option<&TlsClient>,
    options: Options,
) -> Result<Response, HttpClientError>
where
    IO: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
{
    // A TLS alert after the handshake (TLS 1.3 refuses a missing client certificate so) is
    // a TLS error, not a broken exchange.
    let broken = |e: &(dyn std::error::Error + 'static), what: &str| match (tls, rustls_error(e)) {
        (Some(tls), Some(r)) => HttpClientError::Tls {
            url: url.to_string(),
            reason: tls.explain(r),
        },
        _ => HttpClientError::Exchange {
            url: url.to_string(),
            reason: format!("{what}{}", reasons(e)),
        },
    };
    let (mut sender, connection) = hyper::client::conn::http1::handshake(io)
        .await
        .map_err(|e| broken(&e, ""))?;
    let _driver = AbortOnDrop(tokio::spawn(async move {
        let _ = connection.await;
    }));
    let answer = sender
        .send_request(request)
        .await
        .map_err(|e| broken(&e, ""))?;
    let status = answer.status().as_u16();
    let content_type = answer
        .headers()
        .get(CONTENT_TYPE)
        .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned());
    let limit = options.max_body_bytes;
    let too_large = || HttpClientError::TooLarge {
        url: url.to_string(),
        limit,
    };
    let announced = answer
        .headers()
        .get(CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if announced.is_some_and(|n| n > limit as u64) {
        return Err(too_large());
    }
    let mut incoming = answer.into_body();
    let mut bytes: Vec<u8> = Vec::new();
    while let Some(frame) = incoming.frame().await {
        let frame = frame.map_err(|e| broken(&e, "reading the body: "))?;
        if let Ok(data) = frame.into_data() {
            if bytes.len() + data.len() > limit {
                return Err(too_large());
            }
            bytes.extend_from_slice(&data);
        }
    }
    let body = match String::from_utf8(bytes) {
        Ok(text) => text,
        Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
    };
    Ok(Response {
        status,
        content_type,
        body,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn http_urls_split_into_address_host_and_prefix() {
        let t = |u: &str| HttpTarget::parse(u).map(|t| (t.connect, t.host, t.prefix));
        let ok = |c: &str, h: &str, p: &str| Ok((c.to_string(), h.to_string(), p.to_string()));
        assert_eq!(
            t("http://prometheus:9090"),
            ok("prometheus:9090", "prometheus:9090", "")
        );
        assert_eq!(
            t("http://prometheus:9090/"),
            ok("prometheus:9090", "prometheus:9090", "")
        );
        assert_eq!(
            t("http://mon1/prometheus/"),
            ok("mon1:80", "mon1", "/prometheus")
        );
        assert_eq!(
            t("http://10.0.0.1:80/a/b"),
            ok("10.0.0.1:80", "10.0.0.1:80", "/a/b")
        );
        assert_eq!(t("http://[::1]:9090"), ok("[::1]:9090", "[::1]:9090", ""));
        assert_eq!(t("http://[::1]/p"), ok("[::1]:80", "[::1]", "/p"));
        assert_eq!(
            t("https://exporter:9939/"),
            ok("exporter:9939", "exporter:9939", "")
        );
        assert_eq!(t("https://[::1]/p"), ok("[::1]:443", "[::1]", "/p"));
        let https = HttpTarget::parse("https://[::1]:9939/x").unwrap();
        assert_eq!(https.scheme, Scheme::Https);
        assert_eq!(https.name, "::1");
        assert_eq!(https.url("/metrics"), "https://[::1]:9939/x/metrics");
        for bad in [
            "ftp://prometheus:9090",
            "HTTPS//prometheus:9090",
            "https://user:pw@exporter:9939",
            "prometheus:9090",
            "http://",
            "http:///prometheus",
            "http://p:9090/x?y=1",
            "http://p:9090?x=1",
            "http://p:9090#f",
            "http://user:pw@prom:9090",
            "http://user:pw@prom/prometheus",
            "http://h:",
            "http://h:abc",
            "http://h:0",
            "http://h:65536",
            "http://[::1",
            "http://[::1]x",
            "http://[]:9090",
            "http://fe80::1",
            "http://::1:9090",
            "http://p:9090/a b",
        ] {
            let e = HttpTarget::parse(bad).unwrap_err();
            assert!(e.contains("expected http://HOST:PORT"), "{bad}: {e}");
        }
    }

    /// A server on 127.0.0.1 for one connection: reads the request (head and Content-Length
    /// body), sends `answer` (or nothing, holding the connection, when `None`) and closes. The
    /// task yields the request as received.
    async fn serve_once(answer: Option<Vec<u8>>) -> (HttpTarget, tokio::task::JoinHandle<String>) {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let task = tokio::spawn(async move {
            let (mut stream, _) = listener.accept().await.unwrap();
            let mut buf = Vec::new();
            let mut chunk = [0u8; 4096];
            loop {
                let n = stream.read(&mut chunk).await.unwrap();
                buf.extend_from_slice(&chunk[..n]);
                let text = String::from_utf8_lossy(&buf).to_string();
                if let Some((head, body)) = text.split_once("\r\n\r\n") {
                    let len: usize = head
                        .lines()
                        .find_map(|l| {
                            let (k, v) = l.split_once(':')?;
                            k.eq_ignore_ascii_case("content-length")
                                .then(|| v.trim().parse().ok())?
                        })
                        .unwrap_or(0);
                    if body.len() >= len {
                        break;
                    }
                }
                if n == 0 {
                    break;
                }
            }
            match answer {
                Some(a) => {
                    let _ = stream.write_all(&a).await;
                    let _ = stream.shutdown().await;
                }
                None => tokio::time::sleep(Duration::from_secs(30)).await,
            }
            String::from_utf8_lossy(&buf).into_owned()
        });
        let target = HttpTarget::parse(&format!("http://127.0.0.1:{port}")).unwrap();
        (target, task)
    }

    fn answer(status: &str, headers: &str, body: &str) -> Option<Vec<u8>> {
        Some(
            format!(
                "HTTP/1.1 {status}\r\nContent-Length: {}\r\nConnection: close\r\n{headers}\r\n{body}",
                body.len()
            )
            .into_bytes(),
        )
    }

    fn under(target: &HttpTarget, prefix: &str) -> HttpTarget {
        HttpTarget::parse(&format!("http://{}{prefix}", target.host)).unwrap()
    }

    #[tokio::test]
    async fn a_200_answer_is_the_body_and_the_request_goes_under_the_prefix() {
        let json = r#"{"status":"success"}"#;
        let (root, server) =
            serve_once(answer("200 OK", "Content-Type: application/json\r\n", json)).await;
        let target = under(&root, "/prometheus/");
        let body = get_ok(
            &target,
            "/api/v1/query?query=vector%281%29",
            Options::json(),
        )
        .await
        .unwrap();
        assert_eq!(body, json);
        let request = server.await.unwrap();
        assert!(
            request.starts_with("GET /prometheus/api/v1/query?query=vector%281%29 HTTP/1.1\r\n"),
            "{request}"
        );
        let lower = request.to_lowercase();
        assert!(
            lower.contains("\r\naccept: application/json\r\n"),
            "{request}"
        );
        assert!(
            lower.contains(&format!("\r\nhost: {}\r\n", root.host)),
            "{request}"
        );
    }

    #[tokio::test]
    async fn get_returns_any_status_with_its_content_type() {
        let (target, server) = serve_once(answer(
            "503 Service Unavailable",
            "Content-Type: text/plain\r\n",
            "not ready",
        ))
        .await;
        let r = get(&target, "/-/ready", Options::default()).await.unwrap();
        assert_eq!(
            r,
            Response {
                status: 503,
                content_type: Some("text/plain".into()),
                body: "not ready".into()
            }
        );
        assert!(!server.await.unwrap().to_lowercase().contains("accept:"));
    }

    #[tokio::test]
    async fn a_404_is_an_error_naming_the_url_and_quoting_the_body() {
        let (target, _server) = serve_once(answer(
            "404 Not Found",
            "",
            "\n404 page not found\nsecond line\nthird\nfourth\n",
        ))
        .await;
        let e = get_ok(&target, "/api/status", Options::json())
            .await
            .unwrap_err();
        assert_eq!(e.status(), Some(404));
        let m = e.to_string();
        assert_eq!(
            m,
            format!(
                "{} answered 404: 404 page not found | second line | third (is the URL's path prefix right?)",
                target.url("/api/status")
            )
        );
    }

    #[tokio::test]
    async fn a_server_that_never_answers_times_out() {
        let (target, _server) = serve_once(None).await;
        let timeout = Duration::from_millis(200);
        let started = std::time::Instant::now();
        let e = get_ok(
            &target,
            "/metrics",
            Options::default().with_timeout(timeout),
        )
        .await
        .unwrap_err();
        assert!(started.elapsed() < Duration::from_secs(5));
        assert!(matches!(e, HttpClientError::Timeout { .. }), "{e:?}");
        assert_eq!(
            e.to_string(),
            format!(
                "{}: no answer within 200ms (is it the right server, and is it overloaded?)",
                target.url("/metrics")
            )
        );
    }

    #[tokio::test]
    async fn a_body_over_the_cap_is_refused() {
        // Announced by Content-Length: refused before reading.
        let big = "x".repeat(2000);
        let (target, _server) = serve_once(answer("200 OK", "", &big)).await;
        let options = Options::default().with_max_body_bytes(1000);
        let e = get_ok(&target, "/metrics", options).await.unwrap_err();
        assert!(
            matches!(e, HttpClientError::TooLarge { limit: 1000, .. }),
            "{e:?}"
        );
        let m = e.to_string();
        assert!(m.contains(&target.url("/metrics")), "{m}");
        assert!(m.contains("larger than 1000 bytes"), "{m}");
        // Not announced (the body ends when the connection closes): refused while reading.
        let unannounced = format!("HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n{big}");
        let (target, _server) = serve_once(Some(unannounced.into_bytes())).await;
        let e = get(&target, "/metrics", options).await.unwrap_err();
        assert!(
            matches!(e, HttpClientError::TooLarge { limit: 1000, .. }),
            "{e:?}"
        );
        // At the cap: read.
        let (target, _server) = serve_once(answer("200 OK", "", &big[..1000])).await;
        assert_eq!(get_ok(&target, "/", options).await.unwrap().len(), 1000);
    }

    #[tokio::test]
    async fn nothing_listening_is_a_connect_error_naming_the_url() {
        let port = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap().port()
        };
        let target = HttpTarget::parse(&format!("http://127.0.0.1:{port}/p")).unwrap();
        let e = get_ok(&target, "/api/status", Options::json())
            .await
            .unwrap_err();
        assert!(matches!(e, HttpClientError::Connect { .. }), "{e:?}");
        let m = e.to_string();
        assert!(
            m.starts_with(&format!(
                "connecting to http://127.0.0.1:{port}/p/api/status: "
            )),
            "{m}"
        );
        assert!(m.to_lowercase().contains("refused"), "{m}");
        assert!(m.contains("is the server running there"), "{m}");
    }

    #[tokio::test]
    async fn something_that_is_not_http_is_reported_as_such() {
        let (target, _server) = serve_once(Some(b"SSH-2.0-OpenSSH_9.6\r\n".to_vec())).await;
        let e = get(&target, "/", Options::default()).await.unwrap_err();
        assert!(matches!(e, HttpClientError::Exchange { .. }), "{e:?}");
        assert!(
            e.to_string().contains("does an HTTP server listen there?"),
            "{e}"
        );
    }

    #[tokio::test]
    async fn post_json_sends_the_body_as_json() {
        let (target, server) = serve_once(answer("200 OK", "", "ok")).await;
        let sent = r#"[{"labels":{"alertname":"x"}}]"#;
        let r = post_json(&target, "/api/v2/alerts", sent, Options::default())
            .await
            .unwrap();
        assert_eq!((r.status, r.body.as_str()), (200, "ok"));
        let request = server.await.unwrap();
        assert!(
            request.starts_with("POST /api/v2/alerts HTTP/1.1\r\n"),
            "{request}"
        );
        let lower = request.to_lowercase();
        assert!(
            lower.contains("\r\ncontent-type: application/json\r\n"),
            "{request}"
        );
        assert!(request.ends_with(&format!("\r\n\r\n{sent}")), "{request}");
    }

    #[tokio::test]
    async fn a_path_that_cannot_be_requested_is_refused_before_connecting() {
        let target = HttpTarget::parse("http://127.0.0.1:9").unwrap();
        for path in ["api/status", "/a b", "/\u{7f}"] {
            let e = get(&target, path, Options::default()).await.unwrap_err();
            assert!(
                matches!(e, HttpClientError::InvalidUrl(_)),
                "{path:?}: {e:?}"
            );
            assert!(e.to_string().contains("http://127.0.0.1:9"), "{e}");
        }
    }

    #[test]
    fn excerpts_are_the_first_lines_shortened() {
        assert_eq!(excerpt(""), "(empty body)");
        assert_eq!(excerpt(" \n\n"), "(empty body)");
        assert_eq!(excerpt("a\n\n b \nc\nd"), "a | b | c");
        let long = excerpt(&"é".repeat(400));
        assert_eq!(long.chars().count(), 303);
        assert!(long.ends_with("..."));
    }

    #[test]
    fn invalid_urls_are_refused_with_the_parse_message() {
        let e = HttpTarget::parse("ftp://prom:9090").unwrap_err();
        assert!(e.contains("(or https://)"), "{e}");
    }

    #[test]
    fn tls_settings_on_an_http_url_are_refused_and_passwords_never_shown() {
        let plain = HttpTarget::parse("http://127.0.0.1:9939").unwrap();
        let access = Access {
            ca_file: Some("/nonexistent/ca.crt".into()),
            ..Access::default()
        };
        let e = plain.clone().with_access(&access).unwrap_err();
        assert_eq!(e, "--tls.ca-file is for https URLs; http://127.0.0.1:9939 is plain http (use https:// if the exporter serves TLS)");
        let skip = Access {
            insecure_skip_verify: true,
            ..Access::default()
        };
        assert!(plain
            .clone()
            .with_access(&skip)
            .unwrap_err()
            .starts_with("--tls.insecure-skip-verify is for https"));
        let auth = Access {
            basic_auth: Some(BasicAuth {
                username: "prometheus".into(),
                password: "s3cret-pw".into(),
            }),
            ..Access::default()
        };
        let with = plain.with_access(&auth).unwrap();
        for shown in [format!("{with:?}"), format!("{auth:?}")] {
            assert!(!shown.contains("s3cret-pw"), "{shown}");
            assert!(!shown.contains("czNjcmV0LXB3"), "{shown}");
        }
    }

    #[test]
    fn tls_files_that_cannot_be_used_are_named() {
        let target = HttpTarget::parse("https://127.0.0.1:9939").unwrap();
        let dir = std::env::temp_dir().join(format!("crb-http-client-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let not_pem = dir.join("not-pem.crt");
        std::fs::write(&not_pem, "hello\n").unwrap();
        let e = |access: Access| target.clone().with_access(&access).unwrap_err();
        let m = e(Access {
            ca_file: Some(dir.join("missing.crt")),
            ..Access::default()
        });
        assert!(
            m.starts_with(&format!(
                "--tls.ca-file {}: cannot read it: ",
                dir.join("missing.crt").display()
            )),
            "{m}"
        );
        let m = e(Access {
            ca_file: Some(not_pem.clone()),
            ..Access::default()
        });
        assert!(m.contains("holds no certificate"), "{m}");
        let m = e(Access {
            ca_file: Some(not_pem.clone()),
            insecure_skip_verify: true,
            ..Access::default()
        });
        assert!(m.contains("give one"), "{m}");
        let m = e(Access {
            cert_file: Some(not_pem.clone()),
            insecure_skip_verify: true,
            ..Access::default()
        });
        assert_eq!(m, "--tls.cert-file needs --tls.key-file");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
