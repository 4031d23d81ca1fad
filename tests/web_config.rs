//! `--web.config.file` (TLS, basic auth) and the HTTP limits, as a client, curl, a real
//! Prometheus and an attacker see them. The server is the one `serve` runs
//! ([`http::server::serve`]) over the routes of `serve` on synthetic snapshots, as in
//! tests/http.rs; certificates are made at test time (rcgen): a CA, a server certificate for
//! 127.0.0.1 and localhost, a client certificate. One test runs the real `serve` binary (its
//! `ceph` a command that fails: it needs no cluster to serve HTTP).

mod common;

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::{Duration, Instant};

use base64::Engine as _;
use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose,
};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};

use ceph_recovery_budget::collect::Snapshot;
use ceph_recovery_budget::http::limits::Limits;
use ceph_recovery_budget::http::server::{self, ServerOptions};
use ceph_recovery_budget::http::web_config::WebConfig;
use ceph_recovery_budget::http::{self, AppState};
use common::free_port;
use common::prom::{query, sample_value, start_prometheus, tool_or_skip, wait_until, TempDir};

// ------------------------------------------------------------------------------------------
// Certificates, files, the server, clients
// ------------------------------------------------------------------------------------------

/// A CA, a server certificate (127.0.0.1, localhost) and a client certificate, as PEM files
/// (the server's as `server.crt` and `server.key`, where the web configs name them).
struct Pki {
    ca: PathBuf,
    client_cert: PathBuf,
    client_key: PathBuf,
}

fn make_pki(dir: &TempDir, tag: &str) -> Pki {
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(DnType::CommonName, format!("crb test CA {tag}"));
    ca_params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let ca = CertifiedIssuer::self_signed(ca_params, KeyPair::generate().unwrap()).unwrap();
    let leaf = |names: Vec<String>, usage: ExtendedKeyUsagePurpose, cn: &str| {
        let mut p = CertificateParams::new(names).unwrap();
        p.distinguished_name.push(DnType::CommonName, cn);
        p.extended_key_usages = vec![usage];
        let key = KeyPair::generate().unwrap();
        let cert = p.signed_by(&key, &ca).unwrap();
        (cert.pem(), key.serialize_pem())
    };
    let (cert, key) = leaf(
        vec!["localhost".into(), "127.0.0.1".into()],
        ExtendedKeyUsagePurpose::ServerAuth,
        "ceph-recovery-budget",
    );
    let (client_cert, client_key) = leaf(
        Vec::new(),
        ExtendedKeyUsagePurpose::ClientAuth,
        "prometheus",
    );
    dir.write("server.crt", &cert);
    dir.write("server.key", &key);
    Pki {
        ca: dir.write(&format!("ca-{tag}.crt"), &ca.pem()),
        client_cert: dir.write(&format!("client-{tag}.crt"), &client_cert),
        client_key: dir.write(&format!("client-{tag}.key"), &client_key),
    }
}

/// A bcrypt hash, at the lowest cost (the cost does not change what is tested).
fn hash(password: &str) -> String {
    bcrypt::hash(password, 4).unwrap()
}

/// A web config with TLS (the server certificate and key beside it) and one user.
fn tls_config(dir: &TempDir, extra_tls: &str, password: &str) -> PathBuf {
    dir.write(
        "web.yml",
        &format!(
            "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n{extra_tls}basic_auth_users:\n  prometheus: {}\n",
            hash(password)
        ),
    )
}

/// The servers running, and whether one runs alone: the flood test keeps both cores busy for
/// seconds, so it waits for the others' servers to stop and none starts meanwhile, so that the
/// timings the other tests check are not its own. (Not an `RwLock`: a test that starts a
/// second server while the flood waits would deadlock on a writer-preferring one.)
static TURNS: Mutex<(usize, bool)> = Mutex::new((0, false));
static TURNS_CHANGED: Condvar = Condvar::new();

/// A server's turn, given back on drop.
struct Turn {
    alone: bool,
}

impl Turn {
    fn take(alone: bool) -> Self {
        let mut turns = TURNS.lock().unwrap_or_else(PoisonError::into_inner);
        while turns.1 || (alone && turns.0 > 0) {
            turns = TURNS_CHANGED
                .wait(turns)
                .unwrap_or_else(PoisonError::into_inner);
        }
        if alone {
            turns.1 = true;
        } else {
            turns.0 += 1;
        }
        Turn { alone }
    }
}

impl Drop for Turn {
    fn drop(&mut self) {
        let mut turns = TURNS.lock().unwrap_or_else(PoisonError::into_inner);
        if self.alone {
            turns.1 = false;
        } else {
            turns.0 -= 1;
        }
        TURNS_CHANGED.notify_all();
    }
}

/// The routes of `serve` on an empty snapshot, behind the server of `serve`, on its own
/// runtime (two threads, as `serve`); stopped on drop.
struct Served {
    port: u16,
    snapshots: tokio::sync::watch::Sender<Arc<Snapshot>>,
    stop: tokio::sync::watch::Sender<bool>,
    rt: Option<tokio::runtime::Runtime>,
    _turn: Turn,
}

impl Served {
    fn start(web: Option<&Path>, limits: Limits) -> Self {
        Self::start_with(web, limits, axum::Router::new())
    }

    /// Alone: no other test's server runs meanwhile.
    fn start_alone(web: Option<&Path>, limits: Limits) -> Self {
        let turn = Turn::take(true);
        Self::start_in_turn(web, limits, axum::Router::new(), turn)
    }

    /// With `extra` routes beside those of `serve` (a test's handler that holds requests).
    fn start_with(web: Option<&Path>, limits: Limits, extra: axum::Router) -> Self {
        let turn = Turn::take(false);
        Self::start_in_turn(web, limits, extra, turn)
    }

    fn start_in_turn(web: Option<&Path>, limits: Limits, extra: axum::Router, turn: Turn) -> Self {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let (snapshots, rx) =
            tokio::sync::watch::channel(Arc::new(Snapshot::empty(Duration::from_secs(15))));
        let (stop, stop_rx) = tokio::sync::watch::channel(false);
        let web = web.map(|p| WebConfig::load(p).unwrap_or_else(|e| panic!("{e}")));
        let listener = rt
            .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
            .unwrap();
        let port = listener.local_addr().unwrap().port();
        let app = http::router(AppState {
            snapshots: rx,
            telemetry_path: "/metrics".into(),
            enforcer: None,
        })
        .merge(extra);
        let options = ServerOptions {
            limits,
            reload_every: Duration::from_millis(100),
            shutdown_grace: Duration::from_secs(1),
        };
        rt.spawn(server::serve(listener, app, web, options, stop_rx));
        Served {
            port,
            snapshots,
            stop,
            rt: Some(rt),
            _turn: turn,
        }
    }

    /// A new snapshot: `/metrics` is rendered again (its body is cached per snapshot).
    fn new_snapshot(&self) {
        self.snapshots
            .send(Arc::new(Snapshot::empty(Duration::from_secs(15))))
            .unwrap();
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.stop.send(true);
        if let Some(rt) = self.rt.take() {
            rt.shutdown_timeout(Duration::from_secs(2));
        }
    }
}

fn basic(user: &str, password: &str) -> String {
    format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"))
    )
}

/// What a client got: the status, the head (lower case) and the body.
#[derive(Debug)]
struct Answer {
    status: u16,
    head: String,
    body: String,
}

fn parse_answer(raw: &[u8]) -> Answer {
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .unwrap_or(raw.len());
    let head = String::from_utf8_lossy(&raw[..split]).to_lowercase();
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let body = String::from_utf8_lossy(raw.get(split + 4..).unwrap_or_default()).into_owned();
    Answer { status, head, body }
}

/// How long the test client waits for the server, at each step.
const TIMEOUT: Duration = Duration::from_secs(10);

/// How the test client connects.
struct Client<'a> {
    /// The CA it trusts.
    ca: &'a Path,
    /// The name it checks the certificate against.
    name: &'a str,
    cert: Option<(&'a Path, &'a Path)>,
    versions: &'static [&'static rustls::SupportedProtocolVersion],
}

impl<'a> Client<'a> {
    fn trusting(ca: &'a Path) -> Self {
        Client {
            ca,
            name: "127.0.0.1",
            cert: None,
            versions: rustls::DEFAULT_VERSIONS,
        }
    }

    /// GET over HTTPS (HTTP/1.0: the server closes after the answer); Err: the TLS handshake or
    /// the connection failed.
    fn get(&self, port: u16, path: &str, auth: Option<&str>) -> Result<Answer, String> {
        self.get_with(&self.config(), port, path, auth)
    }

    /// The client's TLS config (its certificates read once).
    fn config(&self) -> Arc<rustls::ClientConfig> {
        let mut roots = rustls::RootCertStore::empty();
        for c in CertificateDer::pem_file_iter(self.ca).unwrap() {
            roots.add(c.unwrap()).unwrap();
        }
        let builder = rustls::ClientConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_protocol_versions(self.versions)
        .unwrap()
        .with_root_certificates(roots);
        let config = match self.cert {
            None => builder.with_no_client_auth(),
            Some((cert, key)) => builder
                .with_client_auth_cert(
                    CertificateDer::pem_file_iter(cert)
                        .unwrap()
                        .map(Result::unwrap)
                        .collect(),
                    PrivateKeyDer::from_pem_file(key).unwrap(),
                )
                .unwrap(),
        };
        Arc::new(config)
    }

    /// A TLS connection (the handshake happens with the first write).
    fn connect(
        &self,
        config: &Arc<rustls::ClientConfig>,
        port: u16,
    ) -> Result<rustls::StreamOwned<rustls::ClientConnection, TcpStream>, String> {
        let name = ServerName::try_from(self.name.to_string()).unwrap();
        let conn = rustls::ClientConnection::new(Arc::clone(config), name).unwrap();
        // Bounded, also when the listen backlog is full (a dropped SYN is retried for minutes).
        let tcp = TcpStream::connect_timeout(&([127, 0, 0, 1], port).into(), TIMEOUT)
            .map_err(|e| e.to_string())?;
        tcp.set_read_timeout(Some(TIMEOUT)).unwrap();
        tcp.set_write_timeout(Some(TIMEOUT)).unwrap();
        Ok(rustls::StreamOwned::new(conn, tcp))
    }

    /// [`Client::get`] with a given TLS config.
    fn get_with(
        &self,
        config: &Arc<rustls::ClientConfig>,
        port: u16,
        path: &str,
        auth: Option<&str>,
    ) -> Result<Answer, String> {
        let mut tls = self.connect(config, port)?;
        let auth = auth
            .map(|a| format!("Authorization: {a}\r\n"))
            .unwrap_or_default();
        tls.write_all(format!("GET {path} HTTP/1.0\r\nHost: x\r\n{auth}\r\n").as_bytes())
            .map_err(|e| e.to_string())?;
        let mut raw = Vec::new();
        match tls.read_to_end(&mut raw) {
            Ok(_) => {}
            // A close without close_notify after the whole answer is still the answer.
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof && !raw.is_empty() => {}
            Err(e) => return Err(e.to_string()),
        }
        Ok(parse_answer(&raw))
    }
}

/// One GET on a kept-alive HTTP/1.1 connection, as Prometheus scrapes: the answer read to its
/// Content-Length, the connection left open for the next one.
fn get_kept_alive(
    tls: &mut rustls::StreamOwned<rustls::ClientConnection, TcpStream>,
    path: &str,
    auth: &str,
) -> Result<Answer, String> {
    tls.write_all(
        format!("GET {path} HTTP/1.1\r\nHost: x\r\nAuthorization: {auth}\r\n\r\n").as_bytes(),
    )
    .map_err(|e| e.to_string())?;
    let mut raw = Vec::new();
    let mut buf = [0u8; 16 * 1024];
    let mut more = |raw: &mut Vec<u8>| match tls.read(&mut buf) {
        Ok(0) => Err(format!("closed after {} bytes", raw.len())),
        Ok(n) => {
            raw.extend_from_slice(&buf[..n]);
            Ok(())
        }
        Err(e) => Err(e.to_string()),
    };
    let head_end = loop {
        if let Some(p) = raw.windows(4).position(|w| w == b"\r\n\r\n") {
            break p + 4;
        }
        more(&mut raw)?;
    };
    let length: usize = parse_answer(&raw[..head_end])
        .head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|v| v.trim().parse().ok())
        .ok_or_else(|| format!("no content-length in {raw:?}"))?;
    while raw.len() < head_end + length {
        more(&mut raw)?;
    }
    Ok(parse_answer(&raw[..head_end + length]))
}

/// GET over plain HTTP/1.0.
fn plain_get(port: u16, path: &str) -> Result<Answer, String> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).map_err(|e| e.to_string())?;
    s.set_read_timeout(Some(Duration::from_secs(15))).unwrap();
    s.write_all(format!("GET {path} HTTP/1.0\r\nHost: x\r\n\r\n").as_bytes())
        .map_err(|e| e.to_string())?;
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).map_err(|e| e.to_string())?;
    Ok(parse_answer(&raw))
}

// ------------------------------------------------------------------------------------------
// TLS and basic auth
// ------------------------------------------------------------------------------------------

/// Over TLS with the right credentials: the metrics; without or with a wrong password: 401
/// with a challenge, and nothing of the cluster; probes answer without credentials; plain
/// HTTP on the TLS port is told so; a client that does not trust the CA gets no connection.
#[test]
fn tls_with_basic_auth_serves_only_the_right_credentials() {
    let dir = TempDir::new("web-tls");
    let pki = make_pki(&dir, "a");
    let srv = Served::start(Some(&tls_config(&dir, "", "right")), Limits::default());
    let client = Client::trusting(&pki.ca);

    let ok = client
        .get(srv.port, "/metrics", Some(&basic("prometheus", "right")))
        .unwrap();
    assert_eq!(ok.status, 200, "{ok:?}");
    assert!(
        ok.body.contains("ceph_recovery_budget_build_info"),
        "{ok:?}"
    );
    // The certificate names localhost too.
    let by_name = Client {
        name: "localhost",
        ..Client::trusting(&pki.ca)
    };
    assert_eq!(
        by_name
            .get(srv.port, "/api/status", Some(&basic("prometheus", "right")))
            .unwrap()
            .status,
        200
    );

    for auth in [
        None,
        Some(basic("prometheus", "wrong")),
        Some(basic("nobody", "right")),
        Some("Bearer right".to_string()),
    ] {
        for path in ["/metrics", "/decisions", "/api/status", "/"] {
            let a = client.get(srv.port, path, auth.as_deref()).unwrap();
            assert_eq!(a.status, 401, "{path} with {auth:?}: {a:?}");
            assert!(
                a.head
                    .contains("www-authenticate: basic realm=\"ceph-recovery-budget\""),
                "{a:?}"
            );
            assert!(!a.body.contains("ceph_"), "nothing of the cluster: {a:?}");
        }
    }
    // Probes: no credentials needed, as before.
    let healthy = client.get(srv.port, "/-/healthy", None).unwrap();
    assert_eq!((healthy.status, healthy.body.as_str()), (200, "Healthy\n"));
    let ready = client.get(srv.port, "/-/ready", None).unwrap();
    assert_eq!(ready.status, 503, "no status collected yet: {ready:?}");
    assert!(ready.body.starts_with("Not ready: "), "{ready:?}");

    let plain = plain_get(srv.port, "/metrics").unwrap();
    assert_eq!(plain.status, 400, "{plain:?}");
    assert_eq!(
        plain.body,
        "Client sent an HTTP request to an HTTPS server.\n"
    );

    let other = pki_other_ca(&dir);
    let err = Client::trusting(&other)
        .get(srv.port, "/-/healthy", None)
        .expect_err("a certificate from a CA the client does not trust");
    assert!(
        err.contains("certificate") || err.contains("UnknownIssuer"),
        "{err}"
    );
}

/// A CA certificate unrelated to the server's.
fn pki_other_ca(dir: &TempDir) -> PathBuf {
    let sub = TempDir::new("web-other-ca");
    let other = make_pki(&sub, "other");
    dir.write("other-ca.crt", &std::fs::read_to_string(other.ca).unwrap())
}

static TLS12_ONLY: &[&rustls::SupportedProtocolVersion] = &[&rustls::version::TLS12];

/// `min_version: TLS13` refuses a TLS 1.2 client; `RequireAndVerifyClientCert` refuses a
/// client without a certificate from `client_ca_file`, with or without the password.
#[test]
fn min_version_and_client_certificates_are_enforced() {
    let dir = TempDir::new("web-mtls");
    let pki = make_pki(&dir, "m");
    let web = tls_config(
        &dir,
        "  min_version: TLS13\n  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: ca-m.crt\n",
        "right",
    );
    let srv = Served::start(Some(&web), Limits::default());
    let auth = basic("prometheus", "right");
    let with_cert = Client {
        cert: Some((&pki.client_cert, &pki.client_key)),
        ..Client::trusting(&pki.ca)
    };
    assert_eq!(
        with_cert
            .get(srv.port, "/metrics", Some(&auth))
            .unwrap()
            .status,
        200
    );
    assert!(
        Client::trusting(&pki.ca)
            .get(srv.port, "/metrics", Some(&auth))
            .is_err(),
        "no client certificate: no answer"
    );
    let tls12 = Client {
        versions: TLS12_ONLY,
        ..Client {
            cert: Some((&pki.client_cert, &pki.client_key)),
            ..Client::trusting(&pki.ca)
        }
    };
    assert!(
        tls12.get(srv.port, "/metrics", Some(&auth)).is_err(),
        "TLS 1.2 refused under min_version TLS13"
    );
    // A certificate from another CA is refused too.
    let sub = TempDir::new("web-mtls-other");
    let other = make_pki(&sub, "o");
    let foreign = Client {
        cert: Some((&other.client_cert, &other.client_key)),
        ..Client::trusting(&pki.ca)
    };
    assert!(foreign.get(srv.port, "/metrics", Some(&auth)).is_err());
}

/// curl, as an operator would check the endpoint.
#[test]
fn curl_gets_the_metrics_over_tls_with_the_password_and_401_without() {
    let Some(curl) = tool_or_skip("curl", "curl") else {
        return;
    };
    let dir = TempDir::new("web-curl");
    let pki = make_pki(&dir, "c");
    let srv = Served::start(Some(&tls_config(&dir, "", "s3cret")), Limits::default());
    let run = |args: &[&str]| {
        let out = Command::new(&curl)
            .args(["-sS", "--max-time", "10", "-w", "\n%{http_code}"])
            .args(args)
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let https = format!("https://localhost:{}/metrics", srv.port);
    let ca = pki.ca.to_str().unwrap();

    let (code, out, err) = run(&["--cacert", ca, "-u", "prometheus:s3cret", &https]);
    assert_eq!(code, Some(0), "{err}");
    assert!(out.ends_with("\n200"), "{out}");
    assert!(out.contains("ceph_recovery_budget_build_info"), "{out}");

    let (_, out, _) = run(&["--cacert", ca, "-u", "prometheus:wrong", &https]);
    assert!(out.ends_with("\n401"), "{out}");
    let (_, out, _) = run(&["--cacert", ca, "-D", "-", &https]);
    assert!(out.ends_with("\n401"), "{out}");
    assert!(
        out.to_lowercase().contains("www-authenticate: basic"),
        "{out}"
    );

    // Plain HTTP to the TLS port: refused, and told why.
    let (_, out, _) = run(&[&format!("http://127.0.0.1:{}/metrics", srv.port)]);
    assert_eq!(
        out,
        "Client sent an HTTP request to an HTTPS server.\n\n400"
    );
    // curl's own CA bundle does not know ours: the handshake fails (exit 60).
    let (code, _, err) = run(&["-u", "prometheus:s3cret", &https]);
    assert_eq!(code, Some(60), "{err}");
}

/// A real Prometheus scrapes over TLS with basic auth (`scheme: https`, `tls_config`,
/// `basic_auth`): up 1 and our series stored; with a wrong password up 0 (401); with plain
/// HTTP to the TLS port up 0 (400).
#[test]
fn a_real_prometheus_scrapes_over_tls_with_basic_auth() {
    if tool_or_skip("prometheus", "prometheus").is_none() {
        return;
    }
    let dir = TempDir::new("web-prom");
    let pki = make_pki(&dir, "p");
    let srv = Served::start(Some(&tls_config(&dir, "", "right")), Limits::default());
    let target = format!("127.0.0.1:{}", srv.port);
    let job = |name: &str, scheme: &str, password: &str| {
        format!(
            "  - job_name: {name}\n    scheme: {scheme}\n    tls_config:\n      ca_file: {ca}\n    basic_auth:\n      username: prometheus\n      password: {password}\n    static_configs:\n      - targets: ['{target}']\n",
            ca = pki.ca.display()
        )
    };
    let config = format!(
        "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\nscrape_configs:\n{}{}{}",
        job("tls_auth", "https", "right"),
        job("wrong_password", "https", "wrong"),
        job("plain_http", "http", "right"),
    );
    let prom = start_prometheus(&dir, &config);
    let up = |job: &str| {
        query(&prom, &format!("up{{job=\"{job}\"}}"))
            .ok()
            .and_then(|r| r.first().map(sample_value))
    };
    wait_until(Duration::from_secs(30), "three targets scraped", || {
        Some(())
            .filter(|_| up("tls_auth").is_some() && up("wrong_password").is_some())
            .filter(|_| up("plain_http").is_some())
    });
    wait_until(
        Duration::from_secs(15),
        "up 1 over TLS with the password",
        || (up("tls_auth") == Some(1.0)).then_some(()),
    );
    assert_eq!(up("wrong_password"), Some(0.0));
    assert_eq!(up("plain_http"), Some(0.0));
    let stored = query(&prom, "ceph_recovery_budget_build_info{job=\"tls_auth\"}").unwrap();
    assert_eq!(stored.len(), 1, "our series, scraped over TLS: {stored:?}");

    // Why the two others are down, as Prometheus' targets page says it.
    let targets = prom.get_json("/api/v1/targets");
    let error_of = |job: &str| {
        targets["data"]["activeTargets"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["labels"]["job"] == job)
            .and_then(|t| t["lastError"].as_str())
            .unwrap_or_default()
            .to_string()
    };
    assert!(error_of("wrong_password").contains("401"), "{targets}");
    assert!(error_of("plain_http").contains("400"), "{targets}");
    assert_eq!(error_of("tls_auth"), "");
}

/// The file is re-read when it changes: a new password replaces the old one; a renewed
/// certificate is served to new connections; a broken file is refused and the one in force
/// stays.
#[test]
fn a_changed_web_config_is_put_in_force_and_a_broken_one_is_not() {
    let dir = TempDir::new("web-reload");
    let first = make_pki(&dir, "1");
    let web = tls_config(&dir, "", "one");
    let srv = Served::start(Some(&web), Limits::default());
    let client = Client::trusting(&first.ca);
    let status = |client: &Client, password: &str| {
        client
            .get(srv.port, "/metrics", Some(&basic("prometheus", password)))
            .map(|a| a.status)
    };
    assert_eq!(status(&client, "one"), Ok(200));

    tls_config(&dir, "", "two");
    wait_until(Duration::from_secs(10), "the new password in force", || {
        (status(&client, "two") == Ok(200)).then_some(())
    });
    assert_eq!(status(&client, "one"), Ok(401));

    // Broken: refused, the previous one stays (checked for longer than a reload period).
    dir.write(
        "web.yml",
        "tls_server_config:\n  cert_file: server.crt\n  keyfile: server.key\n",
    );
    for _ in 0..5 {
        std::thread::sleep(Duration::from_millis(150));
        assert_eq!(status(&client, "two"), Ok(200));
    }

    // Renewed certificate from a new CA (same file names, as cert-manager does): new
    // connections get it.
    tls_config(&dir, "", "two");
    let second = make_pki(&dir, "2");
    let renewed = Client::trusting(&second.ca);
    wait_until(
        Duration::from_secs(10),
        "the renewed certificate served",
        || (status(&renewed, "two") == Ok(200)).then_some(()),
    );
    assert!(
        status(&client, "two").is_err(),
        "the old CA no longer matches"
    );
}

/// `serve` refuses to start on a bad web config and says the file, the line and what is
/// expected; `check-config` says the same, and describes a good one.
#[test]
fn serve_and_check_config_refuse_a_bad_web_config_with_its_line() {
    let dir = TempDir::new("web-refused");
    make_pki(&dir, "r");
    let bad = dir.write(
        "bad-web.yml",
        "tls_server_config:\n  cert_file: server.crt\n  key_fil: server.key\n",
    );
    let exe = env!("CARGO_BIN_EXE_ceph-recovery-budget");
    let out = Command::new(exe)
        .args([
            "serve",
            "--web.listen-address",
            "127.0.0.1:0",
            "--web.config.file",
        ])
        .arg(&bad)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(
        stderr.contains("bad-web.yml") && stderr.contains("line 3") && stderr.contains("key_fil"),
        "file, line and the wrong key: {stderr}"
    );
    assert!(stderr.contains("key_file"), "what is expected: {stderr}");

    let config = dir.write("config.yml", "# defaults\n");
    let out = Command::new(exe)
        .args(["check-config"])
        .arg(&config)
        .arg("--web.config.file")
        .arg(&bad)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("line 3"), "{stderr}");

    // Valid YAML, but the key does not go with the certificate: said at key_file's line.
    let other = TempDir::new("web-refused-other");
    make_pki(&other, "x");
    std::fs::copy(
        other.path().join("server.key"),
        dir.path().join("server.key"),
    )
    .unwrap();
    let good_yaml = tls_config(&dir, "", "right");
    let out = Command::new(exe)
        .args(["check-config"])
        .arg(&config)
        .arg("--web.config.file")
        .arg(&good_yaml)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("line 3 column 13: tls_server_config.key_file")
            && stderr.contains("does not go with cert_file"),
        "{stderr}"
    );

    // Fixed: described in full, from the config file's web.config_file too.
    make_pki(&dir, "r");
    let config = dir.write(
        "config.yml",
        &format!("web:\n  config_file: {}\n", good_yaml.display()),
    );
    let out = Command::new(exe)
        .args(["check-config"])
        .arg(&config)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains(&format!(
            "  web config {}: TLS TLS12..TLS13 with {}",
            good_yaml.display(),
            dir.path().join("server.crt").display()
        )) && stdout
            .contains("client certificates: NoClientCert; basic auth for 1 user (prometheus)"),
        "{stdout}"
    );
}

/// The real `serve` binary with `--web.config.file`: HTTPS with basic auth, probes open. Its
/// `ceph` is `false` (every collection fails): serving HTTP needs no cluster.
#[test]
fn the_serve_binary_serves_https_with_basic_auth() {
    let dir = TempDir::new("web-serve");
    let pki = make_pki(&dir, "s");
    let web = tls_config(&dir, "", "right");
    let port = free_port();
    let mut child = Command::new(env!("CARGO_BIN_EXE_ceph-recovery-budget"))
        .args(["serve", "--ceph.backend", "cli", "--ceph-cmd", "false"])
        .args(["--enforcer.mode", "off", "--collect.interval", "1s"])
        .arg("--web.listen-address")
        .arg(format!("127.0.0.1:{port}"))
        .arg("--web.config.file")
        .arg(&web)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let client = Client::trusting(&pki.ca);
    let healthy = wait_until(Duration::from_secs(30), "serve answers over TLS", || {
        client.get(port, "/-/healthy", None).ok()
    });
    let result = std::panic::catch_unwind(|| {
        assert_eq!(healthy.status, 200);
        assert_eq!(client.get(port, "/metrics", None).unwrap().status, 401);
        let ok = client
            .get(port, "/metrics", Some(&basic("prometheus", "right")))
            .unwrap();
        assert_eq!(ok.status, 200);
        assert!(
            ok.body.contains("ceph_recovery_budget_collector_up"),
            "{ok:?}"
        );
    });
    let _ = child.kill();
    let _ = child.wait();
    if let Err(e) = result {
        std::panic::resume_unwind(e);
    }
}

// ------------------------------------------------------------------------------------------
// Limits
// ------------------------------------------------------------------------------------------

/// Slow-header connections (slowloris: headers sent a byte at a time, or nothing at all), four
/// times more than `max_connections` allows, held open for up to 20 s: scrapes that arrive
/// meanwhile are answered at once (a waiting connection gives its place to a new one, and
/// the header timeout closes the others), and every slow connection is closed by the server.
#[test]
fn slow_header_connections_are_closed_and_scrapes_still_answered() {
    let limits = Limits {
        max_connections: 4,
        read_header_timeout: Duration::from_secs(1),
        idle_timeout: Duration::from_secs(10),
        ..Limits::default()
    };
    let srv = Served::start(None, limits);
    let port = srv.port;
    let hostile = 16;
    let closed = Arc::new(AtomicUsize::new(0));
    let attackers: Vec<_> = (0..hostile)
        .map(|i| {
            let closed = Arc::clone(&closed);
            std::thread::spawn(move || {
                let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
                s.set_read_timeout(Some(Duration::from_millis(200)))
                    .unwrap();
                let started = Instant::now();
                if i % 2 == 0 {
                    let _ = s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n");
                }
                // A header byte every 200 ms (or silence), for up to 20 s: never a whole head.
                while started.elapsed() < Duration::from_secs(20) {
                    if i % 2 == 0 && s.write_all(b"X").is_err() {
                        break;
                    }
                    let mut b = [0u8; 64];
                    match s.read(&mut b) {
                        Ok(0) => break,
                        Ok(_) => {}
                        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                        Err(e) if e.kind() == std::io::ErrorKind::TimedOut => {}
                        Err(_) => break,
                    }
                }
                if started.elapsed() < Duration::from_secs(20) {
                    closed.fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(100));
    let mut slowest = Duration::ZERO;
    for _ in 0..3 {
        let t = Instant::now();
        let a = plain_get(port, "/metrics").expect("a scrape is answered");
        assert_eq!(a.status, 200, "{a:?}");
        slowest = slowest.max(t.elapsed());
    }
    eprintln!("{hostile} slow-header connections, max_connections 4, header timeout 1 s: slowest of 3 scrapes {slowest:?}");
    assert!(
        slowest < Duration::from_millis(800),
        "a scrape waited {slowest:?} behind {hostile} slow connections (header timeout 1 s)"
    );
    for a in attackers {
        a.join().unwrap();
    }
    assert_eq!(
        closed.load(Ordering::Relaxed),
        hostile,
        "every slow connection was closed by the server"
    );
    srv.new_snapshot();
    let metrics = plain_get(port, "/metrics").unwrap().body;
    let closed = |reason: &str| {
        let prefix =
            format!("ceph_recovery_budget_http_connections_closed_total{{reason=\"{reason}\"}} ");
        metrics
            .lines()
            .find_map(|l| l.strip_prefix(prefix.as_str()))
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or_else(|| panic!("no {reason} counter in:\n{metrics}"))
    };
    let (timeout, made_room) = (closed("header_timeout"), closed("max_connections"));
    assert!(
        timeout + made_room >= hostile as f64 && timeout >= 1.0 && made_room >= 1.0,
        "closed: {timeout} on the header timeout, {made_room} to make room"
    );
}

/// More than `max_requests` in flight: the next one gets 503 at once (with Retry-After), the
/// probes are still answered, and the refusal is counted.
#[test]
fn requests_beyond_max_requests_get_503_at_once_and_are_counted() {
    let held = Arc::new(AtomicUsize::new(0));
    let (release, released) = tokio::sync::watch::channel(false);
    // A handler that holds its request until released: two scrapes stuck on a slow render.
    let hold = {
        let held = Arc::clone(&held);
        axum::Router::new().route(
            "/hold",
            axum::routing::get(move || {
                let held = Arc::clone(&held);
                let mut released = released.clone();
                async move {
                    held.fetch_add(1, Ordering::SeqCst);
                    let _ = released.wait_for(|r| *r).await;
                    "released\n"
                }
            }),
        )
    };
    let limits = Limits {
        max_requests: 2,
        ..Limits::default()
    };
    let srv = Served::start_with(None, limits, hold);
    let port = srv.port;
    let holders: Vec<_> = (0..2)
        .map(|_| std::thread::spawn(move || plain_get(port, "/hold")))
        .collect();
    wait_until(Duration::from_secs(10), "two requests in flight", || {
        (held.load(Ordering::SeqCst) == 2).then_some(())
    });

    let t = Instant::now();
    let refused = plain_get(port, "/metrics").unwrap();
    let took = t.elapsed();
    assert_eq!(refused.status, 503, "{refused:?}");
    assert!(refused.head.contains("retry-after: 1"), "{refused:?}");
    assert!(refused.body.contains("--web.max-requests"), "{refused:?}");
    assert!(
        took < Duration::from_millis(500),
        "at once, not queued: {took:?}"
    );
    assert_eq!(plain_get(port, "/-/healthy").unwrap().status, 200);

    release.send(true).unwrap();
    for h in holders {
        assert_eq!(h.join().unwrap().unwrap().status, 200);
    }
    srv.new_snapshot();
    let metrics = plain_get(port, "/metrics").unwrap();
    assert_eq!(metrics.status, 200);
    let rejected = metrics
        .body
        .lines()
        .find_map(|l| {
            l.strip_prefix(
                "ceph_recovery_budget_http_requests_rejected_total{reason=\"max_requests\"} ",
            )
        })
        .and_then(|v| v.parse::<f64>().ok())
        .unwrap_or_else(|| panic!("no max_requests counter in:\n{}", metrics.body));
    assert!(rejected >= 1.0, "{rejected}");
}

/// 200 clients sending wrong passwords as fast as they can (a new TLS connection and a new
/// password at each attempt, so none is cached; a quarter with an unknown user) against the
/// default limits and a bcrypt hash of cost 10, while Prometheus, whose credential was
/// verified before the flood, scrapes every 100 ms over its kept-alive connection: every
/// scrape is answered 200. When the `--web.max-requests` slot was taken before basic auth,
/// the requests waiting for bcrypt held all 40 slots and the scrapes got 503.
#[test]
fn a_flood_of_wrong_passwords_never_turns_away_a_scrape_with_the_right_one() {
    const ATTACKERS: usize = 200;
    const SCRAPES: u32 = 50;
    const EVERY: Duration = Duration::from_millis(100);
    let dir = TempDir::new("web-flood");
    let pki = make_pki(&dir, "f");
    // The cost `htpasswd -nBC 10` gives: what makes each wrong password expensive.
    let web = dir.write(
        "web.yml",
        &format!(
            "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\nbasic_auth_users:\n  prometheus: {}\n",
            bcrypt::hash("right", 10).unwrap()
        ),
    );
    let srv = Served::start_alone(Some(&web), Limits::default());
    let port = srv.port;
    let client = Client::trusting(&pki.ca);
    let config = client.config();
    let right = basic("prometheus", "right");
    let mut scraper = client.connect(&config, port).unwrap();
    // Prometheus scraped before the flood began: its credential is verified.
    let first = get_kept_alive(&mut scraper, "/metrics", &right).unwrap();
    assert_eq!(first.status, 200, "{first:?}");

    let stop = Arc::new(AtomicBool::new(false));
    let attackers: Vec<_> = (0..ATTACKERS)
        .map(|i| {
            let (stop, config, ca) = (Arc::clone(&stop), Arc::clone(&config), pki.ca.clone());
            std::thread::spawn(move || {
                let client = Client::trusting(&ca);
                let user = if i % 4 == 3 { "nobody" } else { "prometheus" };
                // Answers by status; 0: no answer (the connection failed or was closed).
                let mut answers = BTreeMap::<u16, usize>::new();
                let mut n = 0;
                while !stop.load(Ordering::Relaxed) {
                    n += 1;
                    let wrong = basic(user, &format!("wrong-{i}-{n}"));
                    let status = client
                        .get_with(&config, port, "/metrics", Some(&wrong))
                        .map_or(0, |a| a.status);
                    *answers.entry(status).or_default() += 1;
                }
                answers
            })
        })
        .collect();

    // The flood builds up, then Prometheus scrapes on its schedule (at once when late).
    std::thread::sleep(Duration::from_millis(500));
    let start = Instant::now();
    let mut scrapes = Vec::new();
    for k in 0..SCRAPES {
        if let Some(wait) = (start + EVERY * k).checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
        let t = Instant::now();
        let status = get_kept_alive(&mut scraper, "/metrics", &right).map(|a| a.status);
        scrapes.push((status.clone(), t.elapsed()));
        if status.is_err() {
            // As Prometheus would: a new connection for the next scrape.
            scraper = client.connect(&config, port).unwrap();
        }
    }
    stop.store(true, Ordering::Relaxed);
    let mut answers = BTreeMap::<u16, usize>::new();
    for a in attackers {
        for (status, n) in a.join().unwrap() {
            *answers.entry(status).or_default() += n;
        }
    }

    let mut took: Vec<Duration> = scrapes.iter().map(|(_, t)| *t).collect();
    took.sort();
    let count = |status| answers.get(&status).copied().unwrap_or(0);
    eprintln!(
        "{ATTACKERS} clients with wrong passwords: {} scrapes, p50 {:?}, max {:?}; wrong passwords answered {} x 401, {} x 503, {} without an answer; other: {answers:?}",
        scrapes.len(),
        took[took.len() / 2],
        took[took.len() - 1],
        count(401),
        count(503),
        count(0),
    );
    let failed: Vec<_> = scrapes.iter().filter(|(s, _)| *s != Ok(200)).collect();
    assert!(failed.is_empty(), "scrapes not answered 200: {failed:?}");
    assert_eq!(count(200), 0, "a wrong password got in: {answers:?}");
    assert!(
        count(401) + count(503) >= ATTACKERS,
        "the flood was one: {answers:?}"
    );
    // The 503s are counted, under their own reason.
    srv.new_snapshot();
    let metrics = get_kept_alive(&mut scraper, "/metrics", &right).unwrap();
    let busy = metrics
        .body
        .lines()
        .find_map(|l| {
            l.strip_prefix(
                "ceph_recovery_budget_http_requests_rejected_total{reason=\"auth_queue\"} ",
            )
        })
        .and_then(|v| v.parse::<f64>().ok())
        .unwrap_or_else(|| panic!("no auth_queue counter in:\n{}", metrics.body));
    assert!(busy >= count(503) as f64, "{busy} counted, {answers:?}");
}

/// A keep-alive connection waits for its next request for the idle timeout, not the (much
/// shorter) header timeout, so Prometheus keeps its connection between scrapes; past the idle
/// timeout it is closed.
#[test]
fn keep_alive_connections_live_for_the_idle_timeout_not_the_header_timeout() {
    let limits = Limits {
        read_header_timeout: Duration::from_millis(300),
        idle_timeout: Duration::from_millis(1500),
        ..Limits::default()
    };
    let srv = Served::start(None, limits);
    let mut s = TcpStream::connect(("127.0.0.1", srv.port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let ask = |s: &mut TcpStream| -> Result<String, String> {
        s.write_all(b"GET /-/healthy HTTP/1.1\r\nHost: x\r\n\r\n")
            .map_err(|e| e.to_string())?;
        let mut raw = Vec::new();
        let mut b = [0u8; 1024];
        // The whole answer: head and its 8-byte body.
        while !raw.ends_with(b"Healthy\n") {
            match s.read(&mut b) {
                Ok(0) => return Err(format!("closed after {raw:?}")),
                Ok(n) => raw.extend_from_slice(&b[..n]),
                Err(e) => return Err(e.to_string()),
            }
        }
        Ok(String::from_utf8_lossy(&raw).into_owned())
    };
    assert!(ask(&mut s).unwrap().starts_with("HTTP/1.1 200"));
    std::thread::sleep(Duration::from_millis(800));
    assert!(
        ask(&mut s).unwrap().starts_with("HTTP/1.1 200"),
        "the same connection, 800 ms later (header timeout 300 ms)"
    );
    let t = Instant::now();
    let mut b = [0u8; 16];
    assert_eq!(s.read(&mut b).unwrap_or(0), 0, "closed once idle");
    let after = t.elapsed();
    assert!(
        after > Duration::from_millis(1000) && after < Duration::from_millis(3000),
        "closed after the idle timeout (1.5 s), not before: {after:?}"
    );
}

// ------------------------------------------------------------------------------------------
// Our own client: `status` against an exporter with a web config
// ------------------------------------------------------------------------------------------

/// `ceph-recovery-budget status ARGS`, with neither the password variable nor `SSL_CERT_FILE`
/// from the test's environment unless `env` sets them: exit code, stdout, stderr.
fn status_cmd(args: &[&str], env: &[(&str, &str)]) -> (Option<i32>, String, String) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_ceph-recovery-budget"));
    cmd.arg("status")
        .args(args)
        .env_remove("CEPH_RECOVERY_BUDGET_BASIC_AUTH_PASSWORD")
        .env_remove("SSL_CERT_FILE");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// `status` reaches an exporter served with TLS and basic auth as curl would: an https URL,
/// `--tls.ca-file`, the user and the password from a file or the environment; by IP or by a
/// name the certificate holds; `--tls.insecure-skip-verify` only when asked.
#[test]
fn status_reads_an_exporter_over_tls_with_a_ca_file_and_basic_auth() {
    let dir = TempDir::new("web-status");
    let pki = make_pki(&dir, "st");
    let srv = Served::start(Some(&tls_config(&dir, "", "right")), Limits::default());
    let password_file = dir.write("password", "right\n");
    let ca = pki.ca.to_str().unwrap();
    let pw = password_file.to_str().unwrap();
    let by_ip = format!("https://127.0.0.1:{}", srv.port);
    let by_name = format!("https://localhost:{}/", srv.port);
    let auth = ["--basic-auth.username", "prometheus"];

    for url in [&by_ip, &by_name] {
        let (code, out, err) = status_cmd(
            &[
                &[
                    "--url",
                    url,
                    "--tls.ca-file",
                    ca,
                    "--basic-auth.password-file",
                    pw,
                ],
                &auth[..],
            ]
            .concat(),
            &[],
        );
        assert_eq!(code, Some(0), "{url}: {err}");
        assert!(!out.trim().is_empty(), "{url}: the status lines: {out}");
    }
    // The password from the environment; JSON as served.
    let (code, out, err) = status_cmd(
        &[
            &["--url", &by_ip, "--tls.ca-file", ca, "--format", "json"],
            &auth[..],
        ]
        .concat(),
        &[("CEPH_RECOVERY_BUDGET_BASIC_AUTH_PASSWORD", "right")],
    );
    assert_eq!(code, Some(0), "{err}");
    serde_json::from_str::<serde_json::Value>(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
    // The system's CAs ($SSL_CERT_FILE here) are used without --tls.ca-file.
    let (code, _, err) = status_cmd(
        &[
            &["--url", &by_ip, "--basic-auth.password-file", pw],
            &auth[..],
        ]
        .concat(),
        &[("SSL_CERT_FILE", ca)],
    );
    assert_eq!(code, Some(0), "{err}");
    // No check of the certificate, when asked: still TLS, still the password.
    let (code, _, err) = status_cmd(
        &[
            &[
                "--url",
                &by_ip,
                "--tls.insecure-skip-verify",
                "--basic-auth.password-file",
                pw,
            ],
            &auth[..],
        ]
        .concat(),
        &[],
    );
    assert_eq!(code, Some(0), "{err}");
}

/// Each way of getting it wrong says what failed: an untrusted certificate names the CA file
/// it was checked against, a 401 says whether credentials were sent and which flags carry
/// them, plain http to the TLS port and https to a plain port say which to use, a name the
/// certificate does not hold says so, TLS flags on an http URL are refused.
#[test]
fn status_says_what_failed_against_a_tls_exporter() {
    let dir = TempDir::new("web-status-fail");
    let pki = make_pki(&dir, "sf");
    let srv = Served::start(Some(&tls_config(&dir, "", "right")), Limits::default());
    let ca = pki.ca.to_str().unwrap();
    let other = pki_other_ca(&dir);
    let other = other.to_str().unwrap();
    let url = format!("https://127.0.0.1:{}", srv.port);
    let failed = |args: &[&str], env: &[(&str, &str)]| {
        let (code, out, err) = status_cmd(args, env);
        assert_eq!(code, Some(1), "{args:?}: {out} {err}");
        assert!(!err.contains("panicked"), "{err}");
        err
    };
    let pw = [("CEPH_RECOVERY_BUDGET_BASIC_AUTH_PASSWORD", "right")];
    let user = ["--basic-auth.username", "prometheus"];

    // A wrong password, and none at all.
    let err = failed(
        &[&["--url", &url, "--tls.ca-file", ca], &user[..]].concat(),
        &[("CEPH_RECOVERY_BUDGET_BASIC_AUTH_PASSWORD", "wrong")],
    );
    assert!(err.contains("answered 401"), "{err}");
    assert!(err.contains("wrong user name or password"), "{err}");
    assert!(err.contains("check --basic-auth.username"), "{err}");
    let err = failed(&["--url", &url, "--tls.ca-file", ca], &pw);
    assert!(err.contains("answered 401"), "{err}");
    assert!(err.contains("the exporter wants basic auth"), "{err}");
    // A user without a password: refused before connecting.
    let err = failed(
        &[&["--url", &url, "--tls.ca-file", ca], &user[..]].concat(),
        &[],
    );
    assert!(err.contains("needs its password"), "{err}");

    // A CA that did not sign the server's certificate: named, from the flag or the system.
    let err = failed(
        &[&["--url", &url, "--tls.ca-file", other], &user[..]].concat(),
        &pw,
    );
    assert!(err.contains("not trusted"), "{err}");
    assert!(err.contains(&format!("--tls.ca-file {other}")), "{err}");
    let err = failed(
        &[&["--url", &url], &user[..]].concat(),
        &[pw[0], ("SSL_CERT_FILE", other)],
    );
    assert!(err.contains("none of the system's CAs"), "{err}");
    assert!(
        err.contains(other) && err.contains("--tls.ca-file"),
        "{err}"
    );
    // A name the certificate does not hold.
    let err = failed(
        &[
            &[
                "--url",
                &url,
                "--tls.ca-file",
                ca,
                "--tls.server-name",
                "wrong.example",
            ],
            &user[..],
        ]
        .concat(),
        &pw,
    );
    assert!(err.contains("not for wrong.example"), "{err}");

    // Plain http to the TLS port.
    let plain_url = format!("http://127.0.0.1:{}", srv.port);
    let err = failed(&[&["--url", &plain_url], &user[..]].concat(), &pw);
    assert!(err.contains("answered 400"), "{err}");
    assert!(err.contains("use --url https://"), "{err}");
    // TLS flags with an http URL: refused, not ignored.
    let err = failed(&["--url", &plain_url, "--tls.ca-file", ca], &[]);
    assert!(err.contains("--tls.ca-file is for https URLs"), "{err}");

    // https to a plain-HTTP exporter.
    let plain = Served::start(None, Limits::default());
    let err = failed(
        &[
            "--url",
            &format!("https://127.0.0.1:{}", plain.port),
            "--tls.ca-file",
            ca,
        ],
        &[],
    );
    assert!(err.contains("does not speak TLS on this port"), "{err}");
}

/// An exporter that requires a client certificate (`RequireAndVerifyClientCert`): `status`
/// with `--tls.cert-file`/`--tls.key-file` gets in; without one it is told to give one; with
/// a certificate from another CA it is told the server refused it.
#[test]
fn status_brings_a_client_certificate_when_the_exporter_requires_one() {
    let dir = TempDir::new("web-status-mtls");
    let pki = make_pki(&dir, "sm");
    let web = tls_config(
        &dir,
        "  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: ca-sm.crt\n",
        "right",
    );
    let srv = Served::start(Some(&web), Limits::default());
    let url = format!("https://127.0.0.1:{}", srv.port);
    let base = [
        "--url",
        &url,
        "--tls.ca-file",
        pki.ca.to_str().unwrap(),
        "--basic-auth.username",
        "prometheus",
    ];
    let pw = [("CEPH_RECOVERY_BUDGET_BASIC_AUTH_PASSWORD", "right")];
    let cert = |c: &Path, k: &Path| {
        [
            "--tls.cert-file".to_string(),
            c.display().to_string(),
            "--tls.key-file".to_string(),
            k.display().to_string(),
        ]
    };
    let args = |extra: &[String]| {
        let mut v: Vec<String> = base.iter().map(|s| s.to_string()).collect();
        v.extend_from_slice(extra);
        v
    };
    let run = |extra: &[String]| {
        let a = args(extra);
        let refs: Vec<&str> = a.iter().map(String::as_str).collect();
        status_cmd(&refs, &pw)
    };

    let (code, _, err) = run(&cert(&pki.client_cert, &pki.client_key));
    assert_eq!(code, Some(0), "{err}");

    let (code, _, err) = run(&[]);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("requires a client certificate"), "{err}");
    assert!(err.contains("--tls.cert-file and --tls.key-file"), "{err}");

    let sub = TempDir::new("web-status-mtls-other");
    let foreign = make_pki(&sub, "so");
    let (code, _, err) = run(&cert(&foreign.client_cert, &foreign.client_key));
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains(&format!(
            "refused the client certificate --tls.cert-file {}",
            foreign.client_cert.display()
        )),
        "{err}"
    );
    // A key that is not the certificate's: said before connecting.
    let (code, _, err) = run(&cert(&pki.client_cert, &foreign.client_key));
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("is the key the certificate's?"), "{err}");
}
