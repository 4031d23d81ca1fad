//! The exposition of `/metrics`, encoded by `prometheus-client` (the Prometheus project's Rust
//! client) in the format the scraper negotiated:
//!
//! | format | `Accept` that selects it | encoder |
//! |---|---|---|
//! | Prometheus protobuf (`io.prometheus.client.MetricFamily`, length-delimited) | `application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited` (Prometheus with `--enable-feature=native-histograms` or `scrape_protocols` including `PrometheusProto`) | `prometheus_client::encoding::prometheus_protobuf` |
//! | OpenMetrics text 1.0.0 | `application/openmetrics-text` (Prometheus' default) | `prometheus_client::encoding::text` |
//! | Prometheus text 0.0.4 | `text/plain`, anything else, no header | `prometheus_client::encoding::prometheus_text` |
//!
//! The metrics are computed from a snapshot at render time, not kept in long-lived metric objects:
//! `mod.rs` describes families and samples to an [`Encoder`], which only records them, and
//! [`Encoder::encode`] hands that record to prometheus-client as a [`Collector`] registered for
//! this one render. Families without samples are left out.
//!
//! What is still ours, and why (the crate's gaps, checked against 0.26):
//! - negotiation from `Accept` ([`Format::negotiate`]): prometheus-client has none;
//! - HELP escaping in OpenMetrics text: the crate writes HELP as given, and our help texts hold
//!   `"` (the OpenMetrics ABNF wants `\"`, `\\`, `\n`); the 0.0.4 encoder does escape;
//! - the untyped family's value in protobuf: the crate writes any sample of an `unknown` family
//!   as a gauge value, which Prometheus ignores in an UNTYPED family (it reads `untyped.value`),
//!   so the value is moved there before the bytes are written (`untyped_values`).

use std::borrow::Cow;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::prometheus_protobuf::{self, prometheus_data_model as pb};
use prometheus_client::encoding::{
    prometheus_text, text, DescriptorEncoder, MetricEncoder, NoLabelSet,
};
use prometheus_client::metrics::exemplar::Exemplar;
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;
use prost::Message as _;

/// The `proto` parameter of the Prometheus protobuf media type: the message type of each length-delimited record.
const PROTOBUF_PROTO: &str = "io.prometheus.client.MetricFamily";

/// Exposition format of one scrape.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Format {
    /// Prometheus text format 0.0.4.
    Text004,
    /// OpenMetrics text 1.0.0.
    OpenMetrics100,
    /// Prometheus protobuf: `io.prometheus.client.MetricFamily` messages, each preceded by its
    /// length as a varint.
    Protobuf,
}

impl Format {
    /// Content negotiation from the `Accept` header, like client_golang's
    /// `expfmt.NegotiateIncludingOpenMetrics`: the clauses are ranked by their `q` weight (ties
    /// keep header order), and the first one we can serve decides: `application/vnd.google.protobuf`
    /// with `proto=io.prometheus.client.MetricFamily` and `encoding=delimited` gives protobuf,
    /// `application/openmetrics-text` with version 1.0.0, 0.0.1 or none gives OpenMetrics,
    /// `text/plain` with version 0.0.4 or none gives text. Anything else (`*/*`, other versions
    /// or protobuf encodings, garbage, no header) falls through to text 0.0.4.
    ///
    /// Unlike client_golang (whose parser keeps them), clauses with `q=0` are treated as "not
    /// acceptable" (RFC 9110) and skipped; media types and parameter names are matched
    /// case-insensitively and quoted parameter values are unquoted.
    pub fn negotiate(accept: Option<&str>) -> Format {
        let Some(accept) = accept else {
            return Format::Text004;
        };
        let mut best: Option<(f32, Format)> = None;
        for clause in accept.split(',') {
            let mut parts = clause.split(';');
            let media = parts.next().unwrap_or_default();
            let Some((ty, sub)) = media.split_once('/') else {
                continue;
            };
            let (ty, sub) = (ty.trim(), sub.trim());
            let mut q = 1.0f32;
            let (mut version, mut proto, mut encoding) = ("", "", "");
            for param in parts {
                let Some((k, v)) = param.split_once('=') else {
                    continue;
                };
                let (k, v) = (k.trim(), v.trim().trim_matches('"'));
                if k.eq_ignore_ascii_case("q") {
                    // Go parses q as a 32-bit float; an unparsable q counts as 0.
                    q = v
                        .parse::<f32>()
                        .ok()
                        .filter(|q| q.is_finite())
                        .unwrap_or(0.0);
                } else if k.eq_ignore_ascii_case("version") {
                    version = v;
                } else if k.eq_ignore_ascii_case("proto") {
                    proto = v;
                } else if k.eq_ignore_ascii_case("encoding") {
                    encoding = v;
                }
            }
            let is = |t: &str, s: &str| ty.eq_ignore_ascii_case(t) && sub.eq_ignore_ascii_case(s);
            let format = if is("application", "vnd.google.protobuf")
                && proto == PROTOBUF_PROTO
                && encoding.eq_ignore_ascii_case("delimited")
            {
                Format::Protobuf
            } else if is("application", "openmetrics-text")
                && matches!(version, "" | "1.0.0" | "0.0.1")
            {
                Format::OpenMetrics100
            } else if is("text", "plain") && matches!(version, "" | "0.0.4") {
                Format::Text004
            } else {
                continue;
            };
            if q > 0.0 && best.is_none_or(|(best_q, _)| q > best_q) {
                best = Some((q, format));
            }
        }
        best.map_or(Format::Text004, |(_, f)| f)
    }

    /// The `Content-Type` of a response in this format.
    pub fn content_type(self) -> &'static str {
        match self {
            Format::Text004 => prometheus_text::CONTENT_TYPE,
            Format::OpenMetrics100 => "application/openmetrics-text; version=1.0.0; charset=utf-8",
            Format::Protobuf => {
                "application/vnd.google.protobuf; proto=io.prometheus.client.MetricFamily; encoding=delimited"
            }
        }
    }
}

/// Why an exposition could not be encoded (not expected: the model is built by our own code).
#[derive(Debug, thiserror::Error)]
pub enum EncodeError {
    #[error("encoding the exposition failed")]
    Fmt(#[from] std::fmt::Error),
    #[error("encoding the protobuf exposition failed: {0}")]
    Protobuf(#[from] prost::EncodeError),
}

/// Metric type of a family.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    Gauge,
    /// `Family::name` is without `_total`; samples are written as `name_total`.
    Counter,
    /// `Family::name` is without `_bucket`/`_count`/`_sum`; write samples with
    /// [`Encoder::histogram`].
    Histogram,
    /// `Family::name` is without `_info`; samples are written as `name_info` with value 1 (text
    /// 0.0.4 and protobuf have no info type: there it is a gauge named `name_info`).
    Info,
    /// No type (OpenMetrics `unknown`, text `untyped`, protobuf `UNTYPED`): for quantiles without
    /// `_sum`/`_count`, which prometheus-client cannot type as a summary (it has no summary
    /// type), and which `promtool check metrics` rejects on a gauge (a `quantile` label) but
    /// accepts untyped. A protobuf summary would not do either: Prometheus reads `_sum` and
    /// `_count` from every protobuf summary, and would store 0 for both.
    Untyped,
}

impl Kind {
    fn metric_type(self) -> MetricType {
        match self {
            Kind::Gauge => MetricType::Gauge,
            Kind::Counter => MetricType::Counter,
            Kind::Histogram => MetricType::Histogram,
            Kind::Info => MetricType::Info,
            Kind::Untyped => MetricType::Unknown,
        }
    }
}

/// One metric family.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Family<'a> {
    /// Family name without any type suffix (`_total`, `_info`, `_bucket`...).
    pub name: &'a str,
    /// Help text, any UTF-8 (escaped as each format needs).
    pub help: &'a str,
    pub kind: Kind,
}

type Labels = Vec<(String, String)>;

#[derive(Debug)]
enum Sample {
    Value {
        labels: Labels,
        value: f64,
    },
    Histogram {
        labels: Labels,
        /// Upper bound and count of each bucket (not cumulative: prometheus-client adds them
        /// up), ending with `+Inf`.
        buckets: Vec<(f64, u64)>,
        count: u64,
        sum: Option<f64>,
    },
}

#[derive(Debug)]
struct Fam {
    name: String,
    help: String,
    kind: Kind,
    samples: Vec<Sample>,
}

/// The families of one exposition, as prometheus-client's [`Collector`] of one render.
#[derive(Debug)]
struct Exposition {
    families: Vec<Fam>,
    /// OpenMetrics text: HELP escaped here, as the crate does not (see the module doc).
    escape_help: bool,
}

impl Collector for Exposition {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        for f in self.families.iter().filter(|f| !f.samples.is_empty()) {
            let help = if self.escape_help {
                escape_openmetrics_help(&f.help)
            } else {
                Cow::Borrowed(f.help.as_str())
            };
            let mut metric =
                encoder.encode_descriptor(&f.name, &help, None, f.kind.metric_type())?;
            for sample in &f.samples {
                match sample {
                    Sample::Value { labels, .. } if f.kind == Kind::Info => {
                        metric.encode_info(labels)?;
                    }
                    Sample::Value { labels, value } => {
                        let mut m = metric.encode_family(labels)?;
                        if f.kind == Kind::Counter {
                            encode_counter(&mut m, *value)?;
                        } else {
                            encode_gauge(&mut m, *value)?;
                        }
                    }
                    Sample::Histogram {
                        labels,
                        buckets,
                        count,
                        sum,
                    } => {
                        // Without Ceph's op_w_latency counter the sum is unknown: NaN says so,
                        // where 0 would be a false mean. (prometheus-client, like the protobuf
                        // format, always writes `_sum` with `_count`.)
                        metric
                            .encode_family(labels)?
                            .encode_histogram::<NoLabelSet>(
                                sum.unwrap_or(f64::NAN),
                                *count,
                                buckets,
                                None,
                            )?;
                    }
                }
            }
        }
        Ok(())
    }
}

/// Integral values as integers (`33`, not `33.0`), like client_golang writes them.
fn integral(v: f64) -> Option<i64> {
    (v.is_finite() && v == v.trunc() && v.abs() < 1e15).then_some(v as i64)
}

fn encode_gauge(m: &mut MetricEncoder<'_>, v: f64) -> Result<(), std::fmt::Error> {
    match integral(v) {
        Some(i) => m.encode_gauge(&i),
        None => m.encode_gauge(&v),
    }
}

fn encode_counter(m: &mut MetricEncoder<'_>, v: f64) -> Result<(), std::fmt::Error> {
    let none = None::<&Exemplar<NoLabelSet, f64>>;
    match integral(v).and_then(|i| u64::try_from(i).ok()) {
        Some(n) => m.encode_counter(&n, none),
        None => m.encode_counter(&v, none),
    }
}

/// OpenMetrics HELP escaping: backslash, line feed, double quote.
fn escape_openmetrics_help(s: &str) -> Cow<'_, str> {
    if !s.contains(['\\', '\n', '"']) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '"' => out.push_str("\\\""),
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// prometheus-client writes a sample of an `unknown` family as `gauge`; Prometheus reads an
/// UNTYPED family's value from `untyped` (and would see 0), so move it there.
fn untyped_values(families: &mut [pb::MetricFamily]) {
    for family in families
        .iter_mut()
        .filter(|f| f.r#type == pb::MetricType::Untyped as i32)
    {
        for metric in &mut family.metric {
            if let Some(g) = metric.gauge.take() {
                metric.untyped = Some(pb::Untyped { value: g.value });
            }
        }
    }
}

/// Records the families and samples of one exposition; [`Encoder::encode`] writes them.
#[derive(Debug, Default)]
pub struct Encoder {
    families: Vec<Fam>,
}

impl Encoder {
    pub fn new() -> Self {
        Self::default()
    }

    /// Starts a family. One left without samples is omitted. Families must not repeat (no
    /// format allows it).
    pub fn family(&mut self, f: &Family<'_>) {
        debug_assert!(is_metric_name(f.name), "invalid metric name {:?}", f.name);
        debug_assert!(
            !(f.kind == Kind::Counter && f.name.ends_with("_total")),
            "counter {:?}: give the name without _total",
            f.name
        );
        debug_assert!(
            self.families.iter().all(|g| g.name != f.name),
            "family {:?} repeated",
            f.name
        );
        self.families.push(Fam {
            name: f.name.to_string(),
            help: f.help.to_string(),
            kind: f.kind,
            samples: Vec::new(),
        });
    }

    fn current(&mut self) -> Option<&mut Fam> {
        let fam = self.families.last_mut();
        debug_assert!(fam.is_some(), "a sample before any family()");
        fam
    }

    /// One sample of a gauge, counter, info or untyped family. For an info family the value is
    /// always 1 (pass 1.0). For quantiles, pass the `quantile` label (its value rendered
    /// canonically, e.g. `0.99`).
    pub fn sample(&mut self, labels: &[(&str, &str)], value: f64) {
        let labels = owned(labels);
        if let Some(fam) = self.current() {
            debug_assert!(
                fam.kind != Kind::Histogram,
                "use histogram() for {}",
                fam.name
            );
            debug_assert!(
                fam.kind != Kind::Info || value == 1.0,
                "an info sample's value is 1"
            );
            fam.samples.push(Sample::Value { labels, value });
        }
    }

    /// One histogram of the current (histogram) family: `bounds` ascending, each with its
    /// cumulative count (a `+Inf` bucket is added if the last bound is not `+Inf`); `_count` is
    /// the `+Inf` count; `sum` `None` is written as NaN (unknown).
    pub fn histogram(
        &mut self,
        labels: &[(&str, &str)],
        bounds: &[f64],
        cumulative: &[u64],
        sum: Option<f64>,
    ) {
        debug_assert_eq!(bounds.len(), cumulative.len(), "one count per bound");
        debug_assert!(bounds.windows(2).all(|w| w[0] < w[1]), "bounds ascending");
        debug_assert!(
            cumulative.windows(2).all(|w| w[0] <= w[1]),
            "counts must be cumulative"
        );
        let mut buckets = Vec::with_capacity(bounds.len() + 1);
        let mut previous = 0u64;
        for (&le, &c) in bounds.iter().zip(cumulative) {
            buckets.push((le, c.saturating_sub(previous)));
            previous = c;
        }
        if bounds.last() != Some(&f64::INFINITY) {
            buckets.push((f64::INFINITY, 0));
        }
        let labels = owned(labels);
        if let Some(fam) = self.current() {
            debug_assert!(fam.kind == Kind::Histogram, "histogram() on {}", fam.name);
            fam.samples.push(Sample::Histogram {
                labels,
                buckets,
                count: previous,
                sum,
            });
        }
    }

    /// The exposition in `format`; OpenMetrics ends with `# EOF`.
    pub fn encode(self, format: Format) -> Result<Vec<u8>, EncodeError> {
        self.encode_inner(format, true)
    }

    /// The families alone, to be part of a larger exposition (OpenMetrics without `# EOF`).
    pub fn encode_part(self, format: Format) -> Result<Vec<u8>, EncodeError> {
        self.encode_inner(format, false)
    }

    fn encode_inner(self, format: Format, eof: bool) -> Result<Vec<u8>, EncodeError> {
        let bytes_hint: usize = self
            .families
            .iter()
            .map(|f| 64 + 96 * f.samples.len())
            .sum();
        let mut registry = Registry::default();
        registry.register_collector(Box::new(Exposition {
            families: self.families,
            escape_help: format == Format::OpenMetrics100,
        }));
        match format {
            Format::Text004 => {
                let mut out = String::with_capacity(bytes_hint);
                prometheus_text::encode(&mut out, &registry)?;
                Ok(out.into_bytes())
            }
            Format::OpenMetrics100 => {
                let mut out = String::with_capacity(bytes_hint);
                text::encode_registry(&mut out, &registry)?;
                if eof {
                    text::encode_eof(&mut out)?;
                }
                Ok(out.into_bytes())
            }
            Format::Protobuf => {
                let mut families = prometheus_protobuf::encode(&registry)?;
                untyped_values(&mut families);
                let mut out = Vec::with_capacity(bytes_hint / 2);
                for family in &families {
                    family.encode_length_delimited(&mut out)?;
                }
                Ok(out)
            }
        }
    }
}

fn owned(labels: &[(&str, &str)]) -> Labels {
    labels
        .iter()
        .map(|(k, v)| {
            debug_assert!(is_label_name(k), "invalid label name {k:?}");
            debug_assert!(*k != "le", "le is the histogram's own label");
            (k.to_string(), v.to_string())
        })
        .collect()
}

fn is_metric_name(s: &str) -> bool {
    let mut chars = s.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == ':')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
}

fn is_label_name(s: &str) -> bool {
    let mut chars = s.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

#[cfg(test)]
mod tests {
    use super::*;

    const INF: f64 = f64::INFINITY;

    fn fam<'a>(name: &'a str, help: &'a str, kind: Kind) -> Family<'a> {
        Family { name, help, kind }
    }

    /// A text exposition as a string.
    fn text_of(e: Encoder, format: Format) -> String {
        String::from_utf8(e.encode(format).unwrap()).unwrap()
    }

    // ---- Negotiation ---------------------------------------------------------------------

    #[test]
    fn negotiate() {
        use Format::*;
        for (accept, want) in [
            (None, Text004),
            (Some(""), Text004),
            (Some("*/*"), Text004),
            (Some("garbage"), Text004),
            (Some(",,;;=="), Text004),
            (Some("text/plain"), Text004),
            (Some("text/plain; version=0.0.4"), Text004),
            (Some("application/openmetrics-text"), OpenMetrics100),
            (Some("application/openmetrics-text; version=1.0.0"), OpenMetrics100),
            (Some("application/openmetrics-text;version=0.0.1"), OpenMetrics100),
            (Some("application/openmetrics-text;version=\"1.0.0\""), OpenMetrics100),
            (Some("Application/OpenMetrics-Text; Version=1.0.0"), OpenMetrics100),
            // A version we do not write.
            (Some("application/openmetrics-text;version=2.0.0"), Text004),
            (Some("text/plain;version=1.0.0,application/openmetrics-text;version=2.0.0"), Text004),
            // Prometheus 2.42's scrape Accept headers (scrape/scrape.go).
            (
                Some("application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1"),
                OpenMetrics100,
            ),
            (
                Some("application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited,application/openmetrics-text;version=1.0.0;q=0.8,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1"),
                Protobuf,
            ),
            // Protobuf: only the delimited MetricFamily stream.
            (Some("application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited"), Protobuf),
            (Some("Application/Vnd.Google.Protobuf; proto=\"io.prometheus.client.MetricFamily\"; Encoding=delimited"), Protobuf),
            (Some("application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=text"), Text004),
            (Some("application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily"), Text004),
            (Some("application/vnd.google.protobuf;encoding=delimited"), Text004),
            (Some("application/vnd.google.protobuf;proto=openmetrics.MetricSet;encoding=delimited,application/openmetrics-text;q=0.5"), OpenMetrics100),
            (Some("application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited;q=0.7,text/plain;version=0.0.4;q=0.3,*/*;q=0.2"), Protobuf),
            (Some("application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited;q=0,text/plain"), Text004),
            // Prometheus with OpenMetrics off, and curl.
            (Some("text/plain;version=0.0.4;q=1,*/*;q=0.1"), Text004),
            (Some("*/*;q=0.1"), Text004),
            // q weights decide, whatever the order...
            (Some("text/plain;q=0.5, application/openmetrics-text;q=0.9"), OpenMetrics100),
            (Some("application/openmetrics-text;q=0.3, text/plain;q=0.5"), Text004),
            (Some("text/plain;version=0.0.4;q=0.2,*/*;q=0.9,application/openmetrics-text;q=0.3"), OpenMetrics100),
            // ...and ties keep header order.
            (Some("text/plain, application/openmetrics-text"), Text004),
            (Some("application/openmetrics-text, text/plain"), OpenMetrics100),
            // q=0 means not acceptable; a broken q counts as 0.
            (Some("application/openmetrics-text;q=0"), Text004),
            (Some("application/openmetrics-text;q=abc, text/plain;q=0.1"), Text004),
            (Some("application/openmetrics-text;q=nan"), Text004),
        ] {
            assert_eq!(Format::negotiate(accept), want, "{accept:?}");
        }
    }

    #[test]
    fn content_types() {
        assert_eq!(
            Format::Text004.content_type(),
            "text/plain; version=0.0.4; charset=utf-8"
        );
        assert_eq!(
            Format::OpenMetrics100.content_type(),
            "application/openmetrics-text; version=1.0.0; charset=utf-8"
        );
        assert_eq!(
            Format::Protobuf.content_type(),
            "application/vnd.google.protobuf; proto=io.prometheus.client.MetricFamily; encoding=delimited"
        );
    }

    #[test]
    fn escaping_openmetrics_help() {
        assert_eq!(
            escape_openmetrics_help("say \"hi\"\\\nbye"),
            "say \\\"hi\\\"\\\\\\nbye"
        );
        assert!(matches!(
            escape_openmetrics_help("plain é"),
            Cow::Borrowed(_)
        ));
    }

    // ---- Golden expositions --------------------------------------------------------------

    /// One family of each kind, plus families that get no sample.
    fn golden(format: Format) -> String {
        let mut e = Encoder::new();
        e.family(&fam(
            "ceph_pool_size",
            "Replicas \"wanted\" per object.",
            Kind::Gauge,
        ));
        e.sample(&[("pool", "rbd")], 3.0);
        e.sample(&[("pool", "we\"ird\\na\nme")], 2.5);
        e.family(&fam("ceph_empty", "Never sampled.", Kind::Gauge));
        e.family(&fam("crb_errors", "Failed runs.", Kind::Counter));
        e.sample(&[("collector", "status"), ("reason", "timeout")], 7.0);
        e.sample(&[], 0.0);
        e.family(&fam("crb_build", "Version.", Kind::Info));
        e.sample(&[("version", "0.1.0")], 1.0);
        e.family(&fam("ceph_lat_seconds", "Write latency.", Kind::Histogram));
        e.histogram(
            &[("ceph_daemon", "osd.0")],
            &[0.0001, 0.0002, INF],
            &[1, 3, 4],
            None,
        );
        e.histogram(&[], &[1.0, INF], &[2, 2], Some(0.75));
        e.family(&fam(
            "ceph_client_write_latency_seconds",
            "Quantiles.",
            Kind::Untyped,
        ));
        e.sample(&[("quantile", "0.99")], 0.1536);
        e.family(&fam("ceph_up", "", Kind::Gauge));
        e.sample(&[], f64::NAN);
        e.family(&fam(
            "ceph_trailing_empty",
            "No sample either.",
            Kind::Counter,
        ));
        text_of(e, format)
    }

    #[test]
    fn golden_text() {
        let want = r#"# HELP ceph_pool_size Replicas "wanted" per object.
# TYPE ceph_pool_size gauge
ceph_pool_size{pool="rbd"} 3
ceph_pool_size{pool="we\"ird\\na\nme"} 2.5
# HELP crb_errors_total Failed runs.
# TYPE crb_errors_total counter
crb_errors_total{collector="status",reason="timeout"} 7
crb_errors_total 0
# HELP crb_build_info Version.
# TYPE crb_build_info gauge
crb_build_info{version="0.1.0"} 1
# HELP ceph_lat_seconds Write latency.
# TYPE ceph_lat_seconds histogram
ceph_lat_seconds_bucket{ceph_daemon="osd.0",le="0.0001"} 1
ceph_lat_seconds_bucket{ceph_daemon="osd.0",le="0.0002"} 3
ceph_lat_seconds_bucket{ceph_daemon="osd.0",le="+Inf"} 4
ceph_lat_seconds_sum{ceph_daemon="osd.0"} NaN
ceph_lat_seconds_count{ceph_daemon="osd.0"} 4
ceph_lat_seconds_bucket{le="1"} 2
ceph_lat_seconds_bucket{le="+Inf"} 2
ceph_lat_seconds_sum 0.75
ceph_lat_seconds_count 2
# HELP ceph_client_write_latency_seconds Quantiles.
# TYPE ceph_client_write_latency_seconds untyped
ceph_client_write_latency_seconds{quantile="0.99"} 0.1536
# HELP ceph_up 
# TYPE ceph_up gauge
ceph_up NaN
"#;
        assert_eq!(golden(Format::Text004), want);
    }

    #[test]
    fn golden_openmetrics() {
        let want = r#"# HELP ceph_pool_size Replicas \"wanted\" per object.
# TYPE ceph_pool_size gauge
ceph_pool_size{pool="rbd"} 3
ceph_pool_size{pool="we\"ird\\na\nme"} 2.5
# HELP crb_errors Failed runs.
# TYPE crb_errors counter
crb_errors_total{collector="status",reason="timeout"} 7
crb_errors_total 0
# HELP crb_build Version.
# TYPE crb_build info
crb_build_info{version="0.1.0"} 1
# HELP ceph_lat_seconds Write latency.
# TYPE ceph_lat_seconds histogram
ceph_lat_seconds_sum{ceph_daemon="osd.0"} NaN
ceph_lat_seconds_count{ceph_daemon="osd.0"} 4
ceph_lat_seconds_bucket{le="0.0001",ceph_daemon="osd.0"} 1
ceph_lat_seconds_bucket{le="0.0002",ceph_daemon="osd.0"} 3
ceph_lat_seconds_bucket{le="+Inf",ceph_daemon="osd.0"} 4
ceph_lat_seconds_sum 0.75
ceph_lat_seconds_count 2
ceph_lat_seconds_bucket{le="1.0"} 2
ceph_lat_seconds_bucket{le="+Inf"} 2
# HELP ceph_client_write_latency_seconds Quantiles.
# TYPE ceph_client_write_latency_seconds unknown
ceph_client_write_latency_seconds{quantile="0.99"} 0.1536
# HELP ceph_up 
# TYPE ceph_up gauge
ceph_up NaN
# EOF
"#;
        assert_eq!(golden(Format::OpenMetrics100), want);
    }

    #[test]
    fn empty_exposition() {
        assert_eq!(text_of(Encoder::new(), Format::Text004), "");
        assert_eq!(text_of(Encoder::new(), Format::OpenMetrics100), "# EOF\n");
        assert!(Encoder::new().encode(Format::Protobuf).unwrap().is_empty());
        let mut e = Encoder::new();
        e.family(&fam("a", "b", Kind::Gauge));
        e.family(&fam("c", "d", Kind::Histogram));
        assert_eq!(text_of(e, Format::OpenMetrics100), "# EOF\n");
    }

    #[test]
    fn histogram_without_inf_bound_gets_one() {
        for format in [Format::Text004, Format::OpenMetrics100] {
            let mut e = Encoder::new();
            e.family(&fam("h", "", Kind::Histogram));
            e.histogram(&[], &[0.5], &[3], Some(1.0));
            let out = text_of(e, format);
            assert!(out.contains("h_bucket{le=\"+Inf\"} 3\n"), "{out}");
            assert!(out.contains("h_count 3\n"), "{out}");
        }
    }

    /// The `le` values of Ceph's latency axis are the same strings in both text formats and as
    /// Prometheus formats a protobuf bucket's bound (Go's shortest `%g`, `.0` added to
    /// integers): series scraped in any format are the same series.
    #[test]
    fn le_of_the_ceph_axis_is_the_same_in_every_format() {
        let bounds: Vec<f64> = (0..30)
            .map(|k| 100_000.0 * f64::from(1u32 << k) / 1e9)
            .chain([INF])
            .collect();
        let cumulative: Vec<u64> = (0..bounds.len() as u64).collect();
        let les = |format: Format| -> Vec<String> {
            let mut e = Encoder::new();
            e.family(&fam("h", "", Kind::Histogram));
            e.histogram(&[], &bounds, &cumulative, Some(1.0));
            text_of(e, format)
                .lines()
                .filter_map(|l| l.split_once("le=\"").map(|(_, r)| r))
                .filter_map(|r| r.split_once('"').map(|(le, _)| le.to_string()))
                .collect()
        };
        let text = les(Format::Text004);
        assert_eq!(text.len(), 31);
        assert_eq!(text[0], "0.0001");
        assert_eq!(text[29], "53687.0912");
        assert_eq!(text, les(Format::OpenMetrics100));
    }
    // ---- Real tools ----------------------------------------------------------------------

    /// A realistic exposition: what the exporter publishes, with every kind.
    fn realistic_encoder() -> Encoder {
        let bounds: Vec<f64> = (0..31)
            .map(|k| 0.0001 * f64::from(1u32 << k))
            .chain([INF])
            .collect();
        let mut cum = vec![0u64; bounds.len()];
        let mut acc = 0;
        for (i, c) in cum.iter_mut().enumerate() {
            acc += if (5..12).contains(&i) {
                100 * i as u64
            } else {
                0
            };
            *c = acc;
        }
        let mut e = Encoder::new();
        e.family(&fam(
            "ceph_degraded_objects",
            "Degraded object copies.",
            Kind::Gauge,
        ));
        e.sample(&[], 1234.0);
        e.family(&fam(
            "ceph_recovery_objects_per_second",
            "Recovery rate. method=\"delta\": from samples; a \\ backslash.\nSecond line.",
            Kind::Gauge,
        ));
        e.sample(&[("method", "delta")], 168.25);
        e.sample(&[("method", "ceph")], 0.0);
        e.family(&fam("ceph_pool_size", "Replicas.", Kind::Gauge));
        e.sample(&[("pool", "rbd")], 3.0);
        e.sample(&[("pool", "with \"quotes\", \\ and\nnewline")], 2.0);
        e.family(&fam(
            "ceph_osd_op_w_latency_seconds",
            "Client write latency per primary OSD.",
            Kind::Histogram,
        ));
        e.histogram(&[("ceph_daemon", "osd.0")], &bounds, &cum, None);
        e.histogram(&[("ceph_daemon", "osd.1")], &bounds, &cum, Some(12.5));
        e.family(&fam(
            "ceph_client_write_latency_seconds",
            "Cluster-wide write latency quantiles over the window.",
            Kind::Untyped,
        ));
        e.sample(&[("quantile", "0.5")], 0.04032);
        e.sample(&[("quantile", "0.99")], 0.3208533333333333);
        e.family(&fam(
            "ceph_recovery_budget_collector_errors",
            "Failed runs.",
            Kind::Counter,
        ));
        e.sample(&[("collector", "status"), ("reason", "timeout")], 3.0);
        e.family(&fam(
            "ceph_osd_mclock_profile",
            "mClock profile.",
            Kind::Info,
        ));
        e.sample(
            &[("ceph_daemon", "osd.0"), ("profile", "high_client_ops")],
            1.0,
        );
        e.family(&fam(
            "ceph_recovery_budget_last_success_timestamp_seconds",
            "Unix time.",
            Kind::Gauge,
        ));
        e.sample(&[], 1_764_500_000.123);
        e
    }

    fn realistic(format: Format) -> String {
        text_of(realistic_encoder(), format)
    }

    fn promtool() -> Option<&'static std::path::Path> {
        let p = std::path::Path::new("/usr/bin/promtool");
        if p.exists() {
            Some(p)
        } else {
            // scripts/test sets CRB_REQUIRE_TOOLS=1: there a skip would hide a missing install.
            assert!(
                std::env::var_os("CRB_REQUIRE_TOOLS").is_none_or(|v| v != "1"),
                "/usr/bin/promtool not found and CRB_REQUIRE_TOOLS=1: apt-get install prometheus"
            );
            eprintln!("NOTICE: /usr/bin/promtool not found; skipping the promtool check (apt-get install prometheus)");
            None
        }
    }

    /// `promtool check metrics` on `input` (stdin): exit code and everything it printed.
    fn promtool_check(promtool: &std::path::Path, input: &str) -> (i32, String) {
        use std::io::Write as _;
        use std::process::{Command, Stdio};
        let mut child = Command::new(promtool)
            .args(["check", "metrics"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("run promtool");
        child
            .stdin
            .take()
            .unwrap()
            .write_all(input.as_bytes())
            .unwrap();
        let out = child.wait_with_output().unwrap();
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        (out.status.code().unwrap_or(-1), text)
    }

    #[test]
    fn promtool_check_metrics_accepts_the_text_format() {
        let Some(promtool) = promtool() else { return };
        let text = realistic(Format::Text004);
        let (code, said) = promtool_check(promtool, &text);
        assert_eq!((code, said.as_str()), (0, ""), "promtool on:\n{text}");
    }

    /// What promtool (Prometheus 2.42) says about two shapes we publish or considered.
    #[test]
    fn promtool_findings() {
        let format = Format::Text004;
        let Some(promtool) = promtool() else { return };
        // 1. A histogram whose _sum is unknown (NaN): no problem reported.
        let mut e = Encoder::new();
        e.family(&fam(
            "x_seconds",
            "A histogram with an unknown sum.",
            Kind::Histogram,
        ));
        e.histogram(&[("ceph_daemon", "osd.0")], &[0.0001, INF], &[1, 2], None);
        assert_eq!(
            promtool_check(promtool, &text_of(e, format)),
            (0, String::new())
        );
        // 2. A gauge with a `quantile` label: a lint problem (exit 3)...
        let mut e = Encoder::new();
        e.family(&fam(
            "ceph_client_write_latency_seconds",
            "Quantiles.",
            Kind::Gauge,
        ));
        e.sample(&[("quantile", "0.99")], 0.12);
        let (code, said) = promtool_check(promtool, &text_of(e, format));
        assert_eq!(code, 3);
        assert_eq!(
            said.trim(),
            "ceph_client_write_latency_seconds non-summary metrics should not have \"quantile\" label"
        );
        // ...that the same series untyped does not have.
        let mut e = Encoder::new();
        e.family(&fam(
            "ceph_client_write_latency_seconds",
            "Quantiles.",
            Kind::Untyped,
        ));
        e.sample(&[("quantile", "0.99")], 0.12);
        assert_eq!(
            promtool_check(promtool, &text_of(e, format)),
            (0, String::new())
        );
    }

    /// A structural check of an OpenMetrics 1.0 exposition against the spec's rules that apply
    /// to what we write (Prometheus 2.42 has no CLI checker for it). Returns the problems.
    fn openmetrics_problems(text: &str) -> Vec<String> {
        use std::collections::{BTreeMap, BTreeSet};
        let mut problems = Vec::new();
        let mut p = |s: String| problems.push(s);
        let Some(body) = text.strip_suffix("# EOF\n") else {
            return vec!["does not end with \"# EOF\\n\"".into()];
        };
        if body.contains("# EOF") {
            p("# EOF before the end".into());
        }
        if text.contains('\r') {
            p("carriage return".into());
        }
        let mut seen_families = BTreeSet::new();
        // Current family: name, type, whether HELP/UNIT were seen, whether samples began.
        let mut family: Option<(String, String)> = None;
        let mut meta_seen: BTreeSet<String> = BTreeSet::new();
        let mut sampling = false;
        // Per histogram metric (label set without le): buckets, count, sum.
        #[derive(Default)]
        struct Hist {
            buckets: Vec<(f64, f64)>,
            count: Option<f64>,
            sum: Option<f64>,
        }
        let mut hists: BTreeMap<String, Hist> = BTreeMap::new();
        for line in body.lines() {
            if let Some(meta) = line.strip_prefix("# ") {
                let mut it = meta.splitn(3, ' ');
                let (kw, name, rest) =
                    (it.next().unwrap_or(""), it.next().unwrap_or(""), it.next());
                if family.as_ref().is_none_or(|(n, _)| n != name) {
                    if !seen_families.insert(name.to_string()) {
                        p(format!("family {name} interleaved or repeated"));
                    }
                    family = Some((name.to_string(), "unknown".into()));
                    meta_seen.clear();
                    sampling = false;
                }
                if sampling {
                    p(format!("metadata after samples: {line}"));
                }
                if !meta_seen.insert(kw.to_string()) {
                    p(format!("duplicate {kw} for {name}"));
                }
                match (kw, rest) {
                    ("TYPE", Some(t)) => {
                        if ![
                            "counter",
                            "gauge",
                            "histogram",
                            "gaugehistogram",
                            "stateset",
                            "info",
                            "summary",
                            "unknown",
                        ]
                        .contains(&t)
                        {
                            p(format!("bad type {t}"));
                        }
                        family.as_mut().unwrap().1 = t.to_string();
                    }
                    ("UNIT", Some(u)) => {
                        if !name.ends_with(&format!("_{u}")) {
                            p(format!("{name} does not end with its unit {u}"));
                        }
                    }
                    ("HELP", Some(h)) => check_escapes(h, &mut p),
                    _ => p(format!("bad metadata line: {line}")),
                }
                continue;
            }
            sampling = true;
            let Some((name_labels, value)) = line.rsplit_once(' ') else {
                p(format!("bad sample line: {line}"));
                continue;
            };
            let num = parse_number(value);
            if num.is_none() {
                p(format!("bad number {value}"));
            }
            let (name, labels) = match name_labels.split_once('{') {
                Some((n, l)) => (
                    n,
                    l.strip_suffix('}').unwrap_or_else(|| {
                        p(format!("unclosed labels: {line}"));
                        ""
                    }),
                ),
                None => (name_labels, ""),
            };
            let labels = parse_labels(labels, &mut p);
            let Some((fname, ftype)) = family.clone() else {
                p(format!("sample without TYPE: {line}"));
                continue;
            };
            let suffix = name.strip_prefix(fname.as_str()).unwrap_or_else(|| {
                p(format!("sample {name} outside family {fname}"));
                ""
            });
            let allowed: &[&str] = match ftype.as_str() {
                "counter" => &["_total", "_created"],
                "gauge" | "unknown" | "stateset" => &[""],
                "info" => &["_info"],
                "summary" => &["", "_count", "_sum", "_created"],
                "histogram" => &["_bucket", "_count", "_sum", "_created"],
                _ => &[],
            };
            if !allowed.contains(&suffix) {
                p(format!("{ftype} sample {name} has suffix {suffix:?}"));
            }
            if ftype == "info" && num != Some(1.0) {
                p(format!("info value {value} is not 1"));
            }
            if ftype == "summary" && suffix.is_empty() {
                match labels.iter().find(|(k, _)| k == "quantile") {
                    Some((_, q)) if parse_number(q).is_some() => {}
                    _ => p(format!(
                        "summary quantile sample without a numeric quantile: {line}"
                    )),
                }
            }
            if ftype == "histogram" {
                let key: Vec<String> = labels
                    .iter()
                    .filter(|(k, _)| k != "le")
                    .map(|(k, v)| format!("{k}={v}"))
                    .collect();
                let h = hists
                    .entry(format!("{fname}{{{}}}", key.join(",")))
                    .or_default();
                let v = num.unwrap_or(f64::NAN);
                match suffix {
                    "_bucket" => match labels.iter().find(|(k, _)| k == "le") {
                        Some((_, le)) => {
                            let canonical = le == "+Inf" || le.contains('.') || le.contains('e');
                            if !canonical {
                                p(format!("le {le} is not a canonical number"));
                            }
                            match parse_number(le) {
                                Some(b) => h.buckets.push((b, v)),
                                None => p(format!("bad le {le}")),
                            }
                        }
                        None => p(format!("bucket without le: {line}")),
                    },
                    "_count" => h.count = Some(v),
                    "_sum" => h.sum = Some(v),
                    _ => {}
                }
            }
        }
        for (key, h) in &hists {
            if !h.buckets.windows(2).all(|w| w[0].0 < w[1].0) {
                p(format!("{key}: buckets not in increasing le"));
            }
            if !h.buckets.windows(2).all(|w| w[0].1 <= w[1].1) {
                p(format!("{key}: bucket values not cumulative"));
            }
            match h.buckets.last() {
                Some(&(le, inf_count)) if le == f64::INFINITY => {
                    if h.sum.is_some() != h.count.is_some() {
                        p(format!(
                            "{key}: _count must appear if and only if _sum does"
                        ));
                    }
                    if h.count.is_some_and(|c| c != inf_count) {
                        p(format!("{key}: _count differs from the +Inf bucket"));
                    }
                }
                _ => p(format!("{key}: no +Inf bucket last")),
            }
        }
        problems
    }

    fn parse_number(s: &str) -> Option<f64> {
        match s.to_ascii_lowercase().as_str() {
            "+inf" | "inf" | "+infinity" | "infinity" => Some(INF),
            "-inf" | "-infinity" => Some(-INF),
            "nan" => Some(f64::NAN),
            _ if s.chars().all(|c| c.is_ascii_digit() || "+-.e".contains(c)) => s.parse().ok(),
            _ => None,
        }
    }

    fn check_escapes(s: &str, p: &mut impl FnMut(String)) {
        let mut chars = s.chars();
        while let Some(c) = chars.next() {
            match c {
                '\\' => match chars.next() {
                    Some('\\' | '"' | 'n') => {}
                    other => p(format!("undefined escape \\{other:?} in {s:?}")),
                },
                '"' | '\n' => p(format!("unescaped {c:?} in {s:?}")),
                _ => {}
            }
        }
    }

    /// `a="x",b="y"` into pairs (values unescaped).
    fn parse_labels(s: &str, p: &mut impl FnMut(String)) -> Vec<(String, String)> {
        let mut out = Vec::new();
        let mut rest = s;
        while !rest.is_empty() {
            let Some((name, after)) = rest.split_once("=\"") else {
                p(format!("bad labels {s:?}"));
                break;
            };
            if !is_label_name(name) {
                p(format!("bad label name {name:?}"));
            }
            let mut value = String::new();
            let mut chars = after.char_indices();
            let mut end = None;
            while let Some((i, c)) = chars.next() {
                match c {
                    '\\' => match chars.next() {
                        Some((_, 'n')) => value.push('\n'),
                        Some((_, c @ ('\\' | '"'))) => value.push(c),
                        other => p(format!("undefined escape {other:?} in {s:?}")),
                    },
                    '"' => {
                        end = Some(i);
                        break;
                    }
                    c => value.push(c),
                }
            }
            let Some(end) = end else {
                p(format!("unterminated label value in {s:?}"));
                break;
            };
            out.push((name.to_string(), value));
            rest = &after[end + 1..];
            if let Some(r) = rest.strip_prefix(',') {
                rest = r;
            } else if !rest.is_empty() {
                p(format!("junk after label value in {s:?}"));
                break;
            }
        }
        out
    }

    #[test]
    fn openmetrics_output_follows_the_spec() {
        let om = realistic(Format::OpenMetrics100);
        assert_eq!(openmetrics_problems(&om), Vec::<String>::new(), "\n{om}");
        assert_eq!(
            openmetrics_problems(&golden(Format::OpenMetrics100)),
            Vec::<String>::new()
        );
        // The label value with quotes, backslash and newline survives a round trip.
        assert!(om.contains(r#"ceph_pool_size{pool="with \"quotes\", \\ and\nnewline"} 2"#));
        let line = om.lines().find(|l| l.contains("with ")).unwrap();
        let labels = parse_labels(
            line.split_once('{').unwrap().1.rsplit_once('}').unwrap().0,
            &mut |s| panic!("{s}"),
        );
        assert_eq!(labels[0].1, "with \"quotes\", \\ and\nnewline");
        // The checker does catch what it is there to catch.
        let broken = "# TYPE a counter\na 1\n# TYPE h histogram\nh_bucket{le=\"1\"} 1\nh_count 1\n";
        let problems = openmetrics_problems(broken);
        assert!(problems[0].contains("EOF"), "{problems:?}");
        let problems = openmetrics_problems(&format!("{broken}# EOF\n"));
        let joined = problems.join("\n");
        for needle in [
            "has suffix \"\"",
            "le 1 is not a canonical",
            "no +Inf bucket",
        ] {
            assert!(joined.contains(needle), "{needle}: {joined}");
        }
        let problems = openmetrics_problems(
            "# TYPE h histogram\nh_bucket{le=\"+Inf\"} 1\nh_count 1\n# TYPE i info\ni_info 2\n# EOF\n",
        );
        let joined = problems.join("\n");
        for needle in ["if and only if _sum", "info value 2"] {
            assert!(joined.contains(needle), "{needle}: {joined}");
        }
    }

    /// The samples of a text exposition as Prometheus stores them: series (labels sorted) and
    /// value (`{:?}` of the parsed number, so that NaN equals NaN).
    fn text_samples(text: &str) -> Vec<(String, String)> {
        let mut out: Vec<(String, String)> = text
            .lines()
            .filter(|l| !l.starts_with('#') && !l.is_empty())
            .map(|line| {
                let (series, value) = line.rsplit_once(' ').unwrap();
                let v = parse_number(value).unwrap_or_else(|| panic!("value in {line}"));
                (canonical_series(series), format!("{v:?}"))
            })
            .collect();
        out.sort();
        out
    }

    /// `name{b="2",a="1"}` as `name{a="1",b="2"}`.
    fn canonical_series(series: &str) -> String {
        let Some((name, labels)) = series.split_once('{') else {
            return series.to_string();
        };
        let mut labels = parse_labels(labels.strip_suffix('}').unwrap(), &mut |s| panic!("{s}"));
        labels.sort();
        series_key(name, &labels)
    }

    fn series_key(name: &str, labels: &[(String, String)]) -> String {
        if labels.is_empty() {
            return name.to_string();
        }
        let mut v = String::new();
        let pairs: Vec<String> = labels
            .iter()
            .map(|(k, val)| {
                v.clear();
                for c in val.chars() {
                    match c {
                        '\\' => v.push_str("\\\\"),
                        '"' => v.push_str("\\\""),
                        '\n' => v.push_str("\\n"),
                        c => v.push(c),
                    }
                }
                format!("{k}=\"{v}\"")
            })
            .collect();
        format!("{name}{{{}}}", pairs.join(","))
    }

    /// A protobuf body decoded and flattened into series the way Prometheus 2.42's protobuf
    /// parser does (counter, gauge and untyped values under the family's name; a classic
    /// histogram as `_bucket{le}`, `_sum`, `_count`). Checks the framing on the way.
    fn protobuf_samples(mut body: &[u8]) -> (Vec<(String, String)>, Vec<pb::MetricFamily>) {
        let mut families = Vec::new();
        while !body.is_empty() {
            families.push(pb::MetricFamily::decode_length_delimited(&mut body).unwrap());
        }
        let mut out = Vec::new();
        for f in &families {
            for m in &f.metric {
                let mut labels: Vec<(String, String)> = m
                    .label
                    .iter()
                    .map(|l| (l.name.clone(), l.value.clone()))
                    .collect();
                labels.sort();
                let mut push = |name: String, labels: &[(String, String)], v: f64| {
                    out.push((series_key(&name, labels), format!("{v:?}")));
                };
                match pb::MetricType::try_from(f.r#type).unwrap() {
                    pb::MetricType::Counter => {
                        push(f.name.clone(), &labels, m.counter.as_ref().unwrap().value)
                    }
                    pb::MetricType::Gauge => {
                        push(f.name.clone(), &labels, m.gauge.as_ref().unwrap().value)
                    }
                    pb::MetricType::Untyped => {
                        push(f.name.clone(), &labels, m.untyped.as_ref().unwrap().value)
                    }
                    pb::MetricType::Histogram => {
                        let h = m.histogram.as_ref().unwrap();
                        push(format!("{}_sum", f.name), &labels, h.sample_sum);
                        push(format!("{}_count", f.name), &labels, h.sample_count as f64);
                        for b in &h.bucket {
                            let le = if b.upper_bound == INF {
                                "+Inf".to_string()
                            } else {
                                // Shortest round-trip digits, as Go's %g for this axis.
                                format!("{}", b.upper_bound)
                            };
                            let mut with_le = labels.clone();
                            with_le.push(("le".into(), le));
                            with_le.sort();
                            push(
                                format!("{}_bucket", f.name),
                                &with_le,
                                b.cumulative_count as f64,
                            );
                        }
                    }
                    other => panic!("unexpected type {other:?} of {}", f.name),
                }
            }
        }
        out.sort();
        (out, families)
    }

    fn realistic_bytes(format: Format) -> Vec<u8> {
        realistic_encoder().encode(format).unwrap()
    }

    #[test]
    fn every_format_carries_the_same_samples() {
        let text = text_samples(&realistic(Format::Text004));
        assert!(text.len() > 70, "{text:?}");
        assert_eq!(text, text_samples(&realistic(Format::OpenMetrics100)));
        let (proto, families) = protobuf_samples(&realistic_bytes(Format::Protobuf));
        assert_eq!(text, proto);
        // Names and types as Prometheus sees them.
        let types: Vec<(String, pb::MetricType)> = families
            .iter()
            .map(|f| (f.name.clone(), pb::MetricType::try_from(f.r#type).unwrap()))
            .collect();
        for want in [
            ("ceph_degraded_objects", pb::MetricType::Gauge),
            ("ceph_osd_op_w_latency_seconds", pb::MetricType::Histogram),
            ("ceph_client_write_latency_seconds", pb::MetricType::Untyped),
            (
                "ceph_recovery_budget_collector_errors_total",
                pb::MetricType::Counter,
            ),
            ("ceph_osd_mclock_profile_info", pb::MetricType::Gauge),
        ] {
            assert!(
                types.contains(&(want.0.to_string(), want.1)),
                "{want:?} in {types:?}"
            );
        }
        // HELP as given (no escaping in protobuf).
        let rate = families
            .iter()
            .find(|f| f.name == "ceph_recovery_objects_per_second")
            .unwrap();
        assert!(rate.help.contains("method=\"delta\"") && rate.help.contains('\n'));
    }
}
