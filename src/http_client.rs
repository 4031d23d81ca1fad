//! The one HTTP client of the program: `status` reading an exporter's `/api/status`, the
//! enforcer asking Prometheus for p99, the experiment reading its enforcer's status.

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

/// A minimal HTTP/1.0 GET of `path` under `url` (plain http: serve has no TLS, and Prometheus is
/// usually reached on the cluster network). `url` may carry a path prefix.
pub fn http_get(url: &str, path: &str) -> anyhow::Result<String> {
    use anyhow::Context;
    use std::io::{Read, Write};
    let target = HttpTarget::parse(url).map_err(anyhow::Error::msg)?;
    let mut stream = std::net::TcpStream::connect(&target.connect)
        .with_context(|| format!("cannot connect to {url} ({})", target.connect))?;
    stream.set_read_timeout(Some(std::time::Duration::from_secs(10)))?;
    write!(
        stream,
        "GET {}{path} HTTP/1.0\r\nHost: {}\r\nAccept: application/json\r\n\r\n",
        target.prefix, target.host
    )?;
    let mut buf = String::new();
    stream
        .read_to_string(&mut buf)
        .with_context(|| format!("reading the answer of {url}{path}"))?;
    let (head, body) = buf.split_once("\r\n\r\n").unwrap_or((&buf, ""));
    let code = head.split_whitespace().nth(1).unwrap_or("?");
    if code != "200" {
        anyhow::bail!("{url}{path} answered {code}: {}", body.trim());
    }
    Ok(body.to_string())
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
}
