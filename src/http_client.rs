//! The one HTTP client of the program: `status` reading an exporter's `/api/status`, the
//! enforcer asking Prometheus for p99, the experiment reading its enforcer's status, and the
//! integration tests talking to the servers they start.
//!
//! Built on hyper's client (`hyper_util::client::legacy`, already in the tree through axum).
//! Plain http only: `serve` has no TLS, and Prometheus is usually reached on the cluster network
//! (put a local proxy in front of an https one). Every exchange has a deadline and a cap on the
//! body it reads, so a wrong URL cannot hang the caller or make it read without bound.

use std::time::Duration;

use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper::header::{HeaderValue, ACCEPT, CONTENT_LENGTH, CONTENT_TYPE};
use hyper::{Method, Request, Uri};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;

/// Where an `http://HOST[:PORT][/PREFIX]` URL points: the address to connect to, the Host header
/// and the path prefix every request goes under (a Prometheus behind `--web.route-prefix` or a
/// reverse proxy at `/prometheus`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpTarget {
    /// `host:port`, port 80 when the URL gives none.
    pub connect: String,
    /// The URL's authority as written (`host` or `host:port`).
    pub host: String,
    /// `""` for the root, else `/prefix` without a trailing slash.
    pub prefix: String,
}

impl HttpTarget {
    pub fn parse(url: &str) -> Result<Self, String> {
        let rest = url.strip_prefix("http://").ok_or_else(|| {
            format!("{url:?}: expected http://HOST:PORT[/PREFIX] (https is not supported; put a local proxy in front)")
        })?;
        let (host, path) = match rest.find('/') {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, ""),
        };
        let bad = |why: &str| format!("{url:?}: {why}; expected http://HOST:PORT[/PREFIX]");
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
            None => 80,
            Some(p) => p
                .parse::<u16>()
                .ok()
                .filter(|p| *p > 0)
                .ok_or_else(|| bad(&format!("port {p:?} is not a number from 1 to 65535")))?,
        };
        let connect = format!("{name}:{port}");
        Ok(HttpTarget {
            connect,
            host: host.to_string(),
            prefix: path.trim_end_matches('/').to_string(),
        })
    }
}

impl HttpTarget {
    /// The full URL of `path` (which starts with `/`, and may carry an encoded query) under this
    /// target, as requested and as named in error messages.
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{}{path}", self.host, self.prefix)
    }
}

/// The media type asked for by [`Options::json`].
pub const JSON: &str = "application/json";

/// How long an exchange may take, how much of a body is read, and what is asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Options {
    /// For the whole exchange: connecting, sending, the headers and the body.
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
    /// The URL (or the path under it) is not one this client can request.
    #[error("{0}")]
    InvalidUrl(String),
    #[error(
        "connecting to {url}: {reason} (is the server running there, and are host and port right?)"
    )]
    Connect { url: String, reason: String },
    #[error("{url}: no answer within {timeout:?} (is it the right server, and is it overloaded?)")]
    Timeout { url: String, timeout: Duration },
    #[error("{url}: the answer is larger than {limit} bytes, not read (does the URL point at the right server?)")]
    TooLarge { url: String, limit: usize },
    #[error("{url} answered {status}: {excerpt}{}", status_hint(*.status))]
    Status {
        url: String,
        status: u16,
        /// The first lines of the body.
        excerpt: String,
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

fn status_hint(status: u16) -> &'static str {
    match status {
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

/// An error and its causes, without the client's own "client error (Connect)" wrapper.
fn reasons(e: &hyper_util::client::legacy::Error) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut cause = std::error::Error::source(e);
    while let Some(c) = cause {
        let text = c.to_string();
        if !parts.iter().any(|p| p.contains(&text)) {
            parts.push(text);
        }
        cause = c.source();
    }
    if parts.is_empty() {
        e.to_string()
    } else {
        parts.join(": ")
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
    let uri: Uri = url
        .parse()
        .map_err(|e| HttpClientError::InvalidUrl(format!("{url:?} is not a valid URL: {e}")))?;
    let mut request = Request::builder().method(method).uri(uri);
    if let Some(accept) = options.accept {
        request = request.header(ACCEPT, HeaderValue::from_static(accept));
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

    let mut connector = HttpConnector::new();
    connector.set_nodelay(true);
    // One connection per exchange: callers come from different runtimes (the CLI's, the tests'),
    // and a pooled connection would be tied to the runtime that opened it.
    let client: Client<HttpConnector, Full<Bytes>> = Client::builder(TokioExecutor::new())
        .pool_max_idle_per_host(0)
        .build(connector);

    let limit = options.max_body_bytes;
    let run = async {
        let answer = client.request(request).await.map_err(|e| {
            if e.is_connect() {
                HttpClientError::Connect {
                    url: url.clone(),
                    reason: reasons(&e),
                }
            } else {
                HttpClientError::Exchange {
                    url: url.clone(),
                    reason: reasons(&e),
                }
            }
        })?;
        let status = answer.status().as_u16();
        let content_type = answer
            .headers()
            .get(CONTENT_TYPE)
            .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned());
        let too_large = || HttpClientError::TooLarge {
            url: url.clone(),
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
            let frame = frame.map_err(|e| HttpClientError::Exchange {
                url: url.clone(),
                reason: format!("reading the body: {e}"),
            })?;
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
        for bad in [
            "https://prometheus:9090",
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
        let e = HttpTarget::parse("https://prom:9090").unwrap_err();
        assert!(e.contains("https is not supported"), "{e}");
    }
}
