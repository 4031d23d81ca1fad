//! `/metrics` bodies built once and served many times: a big cluster's body (2.4 MB at 1,000
//! OSDs) costs ~12 ms to render and ~12 ms to gzip, so rendering per request capped the scrape
//! rate at ~300 requests/s on two cores. Here a body is rendered once per snapshot, format and
//! freshness state, and compressed once when a scraper asks for gzip; every other request gets
//! the same bytes (a reference-counted [`Bytes`], no copy).
//!
//! A cached body is only served if it is exactly what a fresh render would give now. Its key
//! holds every input of [`metrics::render_with`]:
//! - the snapshot (the very `Arc` published by the collector, compared by pointer);
//! - which collectors' data is still fresh now ([`metrics::freshness`]: data ages between
//!   snapshots, and stale families are dropped);
//! - the enforcer's families rendered from the view of this moment: they are small (~3 KB), so
//!   each request renders them and compares, and a change the enforcer made a millisecond ago
//!   is never hidden behind an older body;
//! - the format (one slot per format: text 0.0.4, OpenMetrics, protobuf).
//!
//! gzip: `flate2` with its pure-Rust `miniz_oxide` backend (no C compiler or zlib needed to
//! build), at level 1: 2.4 MB to ~110 KB in ~12 ms, once per body.

use std::io::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use axum::body::Bytes;
use flate2::write::GzEncoder;
use flate2::Compression;
use tokio::sync::Mutex;
use tokio::time::Instant;

use crate::collect::Snapshot;
use crate::enforcer::EnforcerView;
use crate::metrics::{
    self,
    encode::{EncodeError, Format},
};

/// Whether the scraper accepts a gzip body (`Accept-Encoding`, RFC 9110): `gzip` or `x-gzip`
/// with a non-zero q, or `*` with a non-zero q unless gzip itself is refused with `q=0`.
pub fn accepts_gzip(accept_encoding: Option<&str>) -> bool {
    let Some(header) = accept_encoding else {
        return false;
    };
    let mut star = false;
    for clause in header.split(',') {
        let mut parts = clause.split(';');
        let coding = parts.next().unwrap_or_default().trim();
        let q = parts
            .filter_map(|p| p.split_once('='))
            .find(|(k, _)| k.trim().eq_ignore_ascii_case("q"))
            .map_or(1.0, |(_, v)| v.trim().parse::<f32>().unwrap_or(0.0));
        if coding.eq_ignore_ascii_case("gzip") || coding.eq_ignore_ascii_case("x-gzip") {
            // An explicit gzip clause decides, whatever `*` says.
            return q > 0.0;
        }
        if coding == "*" {
            star = q > 0.0;
        }
    }
    star
}

/// Why a body could not be built.
#[derive(Debug, thiserror::Error)]
pub enum ScrapeError {
    #[error("rendering task failed: {0}")]
    Task(#[from] tokio::task::JoinError),
    #[error("gzip: {0}")]
    Gzip(#[from] std::io::Error),
    #[error(transparent)]
    Encode(#[from] EncodeError),
}

/// Everything a body depends on.
struct Key {
    snapshot: Arc<Snapshot>,
    freshness: u8,
    enforcer: Option<Vec<u8>>,
}

impl Key {
    fn same(&self, other: &Key) -> bool {
        Arc::ptr_eq(&self.snapshot, &other.snapshot)
            && self.freshness == other.freshness
            && self.enforcer == other.enforcer
    }
}

struct Entry {
    key: Key,
    plain: Bytes,
    gzip: Option<Bytes>,
}

/// The bodies of the three formats, and how often each was built (for tests and benchmarks).
#[derive(Default)]
pub struct MetricsCache {
    text: Mutex<Option<Entry>>,
    openmetrics: Mutex<Option<Entry>>,
    protobuf: Mutex<Option<Entry>>,
    renders: AtomicU64,
    /// Renders by format, in the order text 0.0.4, OpenMetrics, protobuf.
    renders_by_format: [AtomicU64; 3],
    compressions: AtomicU64,
}

/// One response body.
pub struct Body {
    pub bytes: Bytes,
    pub gzip: bool,
}

impl MetricsCache {
    pub fn new() -> Self {
        Self::default()
    }

    /// Bodies rendered since start.
    pub fn renders(&self) -> u64 {
        self.renders.load(Ordering::Relaxed)
    }

    /// Bodies rendered in `format` since start (which formats scrapers negotiate).
    pub fn renders_in(&self, format: Format) -> u64 {
        self.renders_by_format[format_slot(format)].load(Ordering::Relaxed)
    }

    /// Bodies gzipped since start.
    pub fn compressions(&self) -> u64 {
        self.compressions.load(Ordering::Relaxed)
    }

    /// The body for this snapshot and enforcer view at `now`, from the cache when it is what a
    /// render would give, else rendered (and compressed) now, off the async threads. Requests
    /// that arrive meanwhile wait for that one render instead of starting their own.
    pub async fn body(
        &self,
        snapshot: Arc<Snapshot>,
        view: Option<EnforcerView>,
        now: Instant,
        format: Format,
        gzip: bool,
    ) -> Result<Body, ScrapeError> {
        let key = Key {
            freshness: metrics::freshness(&snapshot, now),
            enforcer: view
                .as_ref()
                .map(|v| metrics::render_enforcer_section(v, format))
                .transpose()?,
            snapshot,
        };
        let slot = match format {
            Format::Text004 => &self.text,
            Format::OpenMetrics100 => &self.openmetrics,
            Format::Protobuf => &self.protobuf,
        };
        let mut entry = slot.lock().await;
        let e = match entry.take() {
            Some(e) if e.key.same(&key) => entry.insert(e),
            // Nothing yet, or built from other inputs: render (a failure leaves the slot empty,
            // and the next request tries again).
            _ => {
                let snapshot = Arc::clone(&key.snapshot);
                let plain = tokio::task::spawn_blocking(move || {
                    metrics::render_with(&snapshot, view.as_ref(), now, format)
                })
                .await??;
                self.renders.fetch_add(1, Ordering::Relaxed);
                self.renders_by_format[format_slot(format)].fetch_add(1, Ordering::Relaxed);
                entry.insert(Entry {
                    key,
                    plain: Bytes::from(plain),
                    gzip: None,
                })
            }
        };
        if !gzip {
            return Ok(Body {
                bytes: e.plain.clone(),
                gzip: false,
            });
        }
        let bytes = match &e.gzip {
            Some(g) => g.clone(),
            None => {
                let plain = e.plain.clone();
                let g = tokio::task::spawn_blocking(move || gzip_bytes(&plain)).await??;
                self.compressions.fetch_add(1, Ordering::Relaxed);
                e.gzip = Some(g.clone());
                g
            }
        };
        Ok(Body { bytes, gzip: true })
    }
}

fn format_slot(format: Format) -> usize {
    match format {
        Format::Text004 => 0,
        Format::OpenMetrics100 => 1,
        Format::Protobuf => 2,
    }
}

fn gzip_bytes(plain: &[u8]) -> Result<Bytes, std::io::Error> {
    // Level 1: a 22x smaller body at ~200 MB/s; higher levels gain a few percent for 3-5x the time.
    let mut enc = GzEncoder::new(
        Vec::with_capacity(plain.len() / 16 + 64),
        Compression::fast(),
    );
    enc.write_all(plain)?;
    Ok(Bytes::from(enc.finish()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gzip_is_accepted_as_http_says() {
        for (header, expected) in [
            (None, false),
            (Some(""), false),
            // What Prometheus sends.
            (Some("gzip"), true),
            (Some("gzip, deflate, br"), true),
            (Some("GZIP;q=0.5"), true),
            (Some("x-gzip"), true),
            (Some("identity"), false),
            (Some("deflate, br"), false),
            (Some("gzip;q=0"), false),
            (Some("gzip;q=0.0, identity"), false),
            (Some("*"), true),
            (Some("*;q=0"), false),
            (Some("gzip;q=0, *"), false),
            (Some("br, gzip;q=garbage"), false),
        ] {
            assert_eq!(accepts_gzip(header), expected, "{header:?}");
        }
    }

    #[test]
    fn gzip_round_trips() {
        use std::io::Read as _;
        let text = "ceph_pgs 33\n".repeat(1000);
        let gz = gzip_bytes(text.as_bytes()).unwrap();
        assert!(gz.len() < text.len() / 20, "{} bytes", gz.len());
        let mut out = String::new();
        flate2::read::GzDecoder::new(&gz[..])
            .read_to_string(&mut out)
            .unwrap();
        assert_eq!(out, text);
    }
}
