//! Exposition of metric families in the Prometheus text format 0.0.4 and OpenMetrics 1.0.0.
//!
//! An [`Encoder`] writes straight into one `String`: [`Encoder::family`] announces a family,
//! [`Encoder::sample`] / [`Encoder::histogram`] write its samples, [`Encoder::finish`] closes
//! the exposition. A family's HELP/TYPE/UNIT lines are dropped again if no sample follows, so
//! families without samples are omitted entirely. Nothing is allocated per sample beyond the
//! growth of the output buffer.
//!
//! Differences between the two formats that callers do not have to care about:
//!
//! | | text 0.0.4 | OpenMetrics 1.0.0 |
//! |---|---|---|
//! | metadata | `# HELP`, `# TYPE` | `# TYPE`, `# UNIT`, `# HELP` (the spec's order) |
//! | counter `foo` | `# TYPE foo_total counter`, `foo_total 1` | `# TYPE foo counter`, `foo_total 1` |
//! | info `foo` | `# TYPE foo_info gauge`, `foo_info{..} 1` | `# TYPE foo info`, `foo_info{..} 1` |
//! | histogram `_count` | always | only with `_sum` (the spec: `_count` if and only if `_sum`) |
//! | `le` value | Go's `%g` (`1`, `0.0001`, `1e-05`) | the same with `.0` added to integers (`1.0`) |
//! | end | nothing | `# EOF` |

use std::fmt::Write as _;

/// Exposition format of one scrape.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Format {
    /// Prometheus text format 0.0.4.
    Text004,
    /// OpenMetrics text 1.0.0.
    OpenMetrics100,
}

impl Format {
    /// Content negotiation from the `Accept` header, like client_golang's
    /// `expfmt.NegotiateIncludingOpenMetrics` restricted to the two text formats: the clauses
    /// are ranked by their `q` weight (ties keep header order), and the first one that is
    /// `application/openmetrics-text` with version 1.0.0, 0.0.1 or none gives OpenMetrics, or
    /// `text/plain` with version 0.0.4 or none gives text. Anything else (protobuf, `*/*`,
    /// other versions, garbage, no header) falls through to text 0.0.4.
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
            let mut version = "";
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
                }
            }
            let format = if ty.eq_ignore_ascii_case("application")
                && sub.eq_ignore_ascii_case("openmetrics-text")
                && matches!(version, "" | "1.0.0" | "0.0.1")
            {
                Format::OpenMetrics100
            } else if ty.eq_ignore_ascii_case("text")
                && sub.eq_ignore_ascii_case("plain")
                && matches!(version, "" | "0.0.4")
            {
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
            Format::Text004 => "text/plain; version=0.0.4; charset=utf-8",
            Format::OpenMetrics100 => "application/openmetrics-text; version=1.0.0; charset=utf-8",
        }
    }
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
    /// 0.0.4 has no info type: there it is a gauge named `name_info`).
    Info,
    /// Quantiles over a sliding window as samples with a `quantile` label (no `_sum`/`_count`
    /// unless the caller writes them as separate families). Use this rather than a gauge for
    /// `{quantile="0.99"}` series: `promtool check metrics` flags a `quantile` label on a
    /// non-summary metric.
    Summary,
}

/// One metric family.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Family<'a> {
    /// Family name without any type suffix (`_total`, `_info`, `_bucket`...). If `unit` is set,
    /// the name must end with `_` and the unit (an OpenMetrics rule).
    pub name: &'a str,
    /// Help text, any UTF-8 (escaped as needed); empty means no HELP line.
    pub help: &'a str,
    pub kind: Kind,
    /// Unit (`seconds`, `bytes`, ...), written as `# UNIT` in OpenMetrics only.
    pub unit: Option<&'a str>,
}

/// Incremental writer of one exposition.
#[derive(Debug)]
pub struct Encoder {
    out: String,
    format: Format,
    /// Name samples of the current family start with (for a text counter it includes
    /// `_total`, for an info `_info`).
    name: String,
    kind: Kind,
    /// Where the current family's metadata starts in `out`, while no sample followed it.
    pending_since: Option<usize>,
    in_family: bool,
}

impl Encoder {
    pub fn new(format: Format) -> Self {
        Self::with_capacity(format, 16 * 1024)
    }

    /// `capacity`: bytes to reserve for the output up front.
    pub fn with_capacity(format: Format, capacity: usize) -> Self {
        Encoder {
            out: String::with_capacity(capacity),
            format,
            name: String::with_capacity(64),
            kind: Kind::Gauge,
            pending_since: None,
            in_family: false,
        }
    }

    pub fn format(&self) -> Format {
        self.format
    }

    /// Starts a family: its metadata is written now and taken back if no sample follows before
    /// the next `family` or `finish`. Families must not repeat (neither format allows it).
    pub fn family(&mut self, f: &Family<'_>) {
        debug_assert!(is_metric_name(f.name), "invalid metric name {:?}", f.name);
        debug_assert!(
            f.unit.is_none_or(|u| f.name.len() > u.len()
                && f.name.ends_with(u)
                && f.name[..f.name.len() - u.len()].ends_with('_')),
            "metric {:?} must end with _{:?} to carry that unit",
            f.name,
            f.unit
        );
        debug_assert!(
            !(f.kind == Kind::Counter && f.name.ends_with("_total")),
            "counter {:?}: give the name without _total",
            f.name
        );
        self.drop_pending();
        self.pending_since = Some(self.out.len());
        self.in_family = true;
        self.kind = f.kind;

        // The name in metadata lines, and the one samples start with.
        let (meta_suffix, sample_suffix, type_word) = match (self.format, f.kind) {
            (Format::Text004, Kind::Gauge) => ("", "", "gauge"),
            (Format::Text004, Kind::Counter) => ("_total", "_total", "counter"),
            (Format::Text004, Kind::Histogram) => ("", "", "histogram"),
            (Format::Text004, Kind::Info) => ("_info", "_info", "gauge"),
            (Format::Text004, Kind::Summary) => ("", "", "summary"),
            (Format::OpenMetrics100, Kind::Gauge) => ("", "", "gauge"),
            (Format::OpenMetrics100, Kind::Counter) => ("", "_total", "counter"),
            (Format::OpenMetrics100, Kind::Histogram) => ("", "", "histogram"),
            (Format::OpenMetrics100, Kind::Info) => ("", "_info", "info"),
            (Format::OpenMetrics100, Kind::Summary) => ("", "", "summary"),
        };
        self.name.clear();
        self.name.push_str(f.name);
        self.name.push_str(sample_suffix);

        let out = &mut self.out;
        let help_line = |out: &mut String| {
            if !f.help.is_empty() {
                out.push_str("# HELP ");
                out.push_str(f.name);
                out.push_str(meta_suffix);
                out.push(' ');
                escape_help(out, f.help, self.format);
                out.push('\n');
            }
        };
        let type_line = |out: &mut String| {
            out.push_str("# TYPE ");
            out.push_str(f.name);
            out.push_str(meta_suffix);
            out.push(' ');
            out.push_str(type_word);
            out.push('\n');
        };
        match self.format {
            Format::Text004 => {
                help_line(out);
                type_line(out);
            }
            Format::OpenMetrics100 => {
                type_line(out);
                if let Some(unit) = f.unit.filter(|u| !u.is_empty()) {
                    out.push_str("# UNIT ");
                    out.push_str(f.name);
                    out.push(' ');
                    out.push_str(unit);
                    out.push('\n');
                }
                help_line(out);
            }
        }
    }

    /// One sample of a gauge, counter, info or summary family. For an info family the value is
    /// always written as 1 (pass 1.0). For a summary, pass the `quantile` label (its value
    /// rendered canonically, e.g. `0.99`).
    pub fn sample(&mut self, labels: &[(&str, &str)], value: f64) {
        debug_assert!(self.in_family, "sample() before family()");
        debug_assert!(
            self.kind != Kind::Histogram,
            "use histogram() for a histogram family"
        );
        debug_assert!(
            self.kind != Kind::Info || value == 1.0,
            "an info sample's value is 1"
        );
        self.pending_since = None;
        self.out.push_str(&self.name);
        write_labels(&mut self.out, labels, None, self.format);
        self.out.push(' ');
        if self.kind == Kind::Info {
            self.out.push('1');
        } else {
            write_value(&mut self.out, value);
        }
        self.out.push('\n');
    }

    /// One histogram of the current (histogram) family: `_bucket` for each bound with its
    /// cumulative count (`bounds` ascending; a `+Inf` bucket is added if the last bound is not
    /// `+Inf`), then `_sum` if given and `_count` (the `+Inf` count) — in OpenMetrics `_count`
    /// only together with `_sum`, as the spec demands. `bounds` and `cumulative` have the same
    /// length.
    pub fn histogram(
        &mut self,
        labels: &[(&str, &str)],
        bounds: &[f64],
        cumulative: &[u64],
        sum: Option<f64>,
    ) {
        debug_assert!(self.in_family, "histogram() before family()");
        debug_assert!(
            self.kind == Kind::Histogram,
            "histogram() on a non-histogram family"
        );
        debug_assert_eq!(
            bounds.len(),
            cumulative.len(),
            "one cumulative count per bound"
        );
        debug_assert!(
            bounds.windows(2).all(|w| w[0] < w[1]),
            "bounds must be ascending"
        );
        debug_assert!(
            cumulative.windows(2).all(|w| w[0] <= w[1]),
            "counts must be cumulative"
        );
        self.pending_since = None;
        let mut count = 0u64;
        let mut has_inf = false;
        for (&le, &c) in bounds.iter().zip(cumulative) {
            self.bucket_line(labels, le, c);
            count = c;
            has_inf = le == f64::INFINITY;
        }
        if !has_inf {
            self.bucket_line(labels, f64::INFINITY, count);
        }
        let count_line = |enc: &mut Encoder| {
            enc.out.push_str(&enc.name);
            enc.out.push_str("_count");
            write_labels(&mut enc.out, labels, None, enc.format);
            let _ = writeln!(enc.out, " {count}");
        };
        let sum_line = |enc: &mut Encoder, sum: f64| {
            enc.out.push_str(&enc.name);
            enc.out.push_str("_sum");
            write_labels(&mut enc.out, labels, None, enc.format);
            enc.out.push(' ');
            write_value(&mut enc.out, sum);
            enc.out.push('\n');
        };
        match (self.format, sum) {
            // client_golang's order: buckets, _sum, _count.
            (Format::Text004, Some(s)) => {
                sum_line(self, s);
                count_line(self);
            }
            (Format::Text004, None) => count_line(self),
            (Format::OpenMetrics100, Some(s)) => {
                count_line(self);
                sum_line(self, s);
            }
            (Format::OpenMetrics100, None) => {}
        }
    }

    fn bucket_line(&mut self, labels: &[(&str, &str)], le: f64, cumulative: u64) {
        self.out.push_str(&self.name);
        self.out.push_str("_bucket");
        write_labels(&mut self.out, labels, Some(le), self.format);
        let _ = writeln!(self.out, " {cumulative}");
    }

    /// Takes back the metadata of a family that got no sample.
    fn drop_pending(&mut self) {
        if let Some(pos) = self.pending_since.take() {
            self.out.truncate(pos);
        }
    }

    /// The finished exposition (OpenMetrics: ending with `# EOF`).
    pub fn finish(mut self) -> String {
        self.drop_pending();
        if self.format == Format::OpenMetrics100 {
            self.out.push_str("# EOF\n");
        }
        self.out
    }
}

/// `{a="x",b="y"[,le="..."]}`, or nothing when there are no labels at all.
fn write_labels(out: &mut String, labels: &[(&str, &str)], le: Option<f64>, format: Format) {
    if labels.is_empty() && le.is_none() {
        return;
    }
    out.push('{');
    for (i, (name, value)) in labels.iter().enumerate() {
        debug_assert!(is_label_name(name), "invalid label name {name:?}");
        debug_assert!(
            le.is_none() || *name != "le",
            "a histogram's own labels cannot include le"
        );
        if i > 0 {
            out.push(',');
        }
        out.push_str(name);
        out.push_str("=\"");
        escape_label_value(out, value);
        out.push('"');
    }
    if let Some(le) = le {
        if !labels.is_empty() {
            out.push(',');
        }
        out.push_str("le=\"");
        write_le(out, le, format);
        out.push('"');
    }
    out.push('}');
}

/// Label value escaping (both formats): backslash, double quote, line feed.
fn escape_label_value(out: &mut String, s: &str) {
    escape(out, s, true);
}

/// HELP escaping: text 0.0.4 escapes backslash and line feed; OpenMetrics also double quotes.
fn escape_help(out: &mut String, s: &str, format: Format) {
    escape(out, s, format == Format::OpenMetrics100);
}

fn escape(out: &mut String, s: &str, quote: bool) {
    let special = |c: char| c == '\\' || c == '\n' || (quote && c == '"');
    if !s.contains(special) {
        out.push_str(s);
        return;
    }
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '"' if quote => out.push_str("\\\""),
            c => out.push(c),
        }
    }
}

/// A sample value: `NaN`, `+Inf`, `-Inf`; integral values below 1e15 as plain integers (no
/// exponent, no `.0`); anything else like Go's `strconv.FormatFloat(v, 'g', -1, 64)`, which is
/// what client_golang writes (shortest round-trip digits).
fn write_value(out: &mut String, v: f64) {
    if v.is_finite() && v == v.trunc() && v.abs() < 1e15 {
        let _ = write!(out, "{}", v as i64);
    } else {
        write_go_float(out, v);
    }
}

/// An `le` label value. Text: Go's `%g` as client_golang writes it (`0.0001`, `1`, `1e-05`,
/// `+Inf`). OpenMetrics: the spec's canonical numbers, the same with `.0` appended when there is
/// neither a decimal point nor an exponent (`1.0`, `100000.0`, `1e+06`).
fn write_le(out: &mut String, v: f64, format: Format) {
    let start = out.len();
    write_go_float(out, v);
    if format == Format::OpenMetrics100 && v.is_finite() && !out[start..].contains(['.', 'e']) {
        out.push_str(".0");
    }
}

/// Go's `strconv.FormatFloat(v, 'g', -1, 64)` with Prometheus' spellings of the specials:
/// shortest round-trip digits; exponent form (`d.ddde±XX`, at least two exponent digits) when
/// the decimal exponent is < -4 or >= 6 (Go decides with precision 6 in shortest mode), plain
/// decimal otherwise.
fn write_go_float(out: &mut String, v: f64) {
    if v.is_nan() {
        out.push_str("NaN");
        return;
    }
    if v.is_infinite() {
        out.push_str(if v > 0.0 { "+Inf" } else { "-Inf" });
        return;
    }
    if v == 0.0 {
        out.push_str(if v.is_sign_negative() { "-0" } else { "0" });
        return;
    }
    // Rust's `{:e}` gives the shortest round-trip digits as `d.ddde-5` / `de7`.
    let mut buf = StackStr::new();
    let _ = write!(buf, "{:e}", v.abs());
    let s = buf.as_str();
    let (mantissa, exp) = s.split_once('e').unwrap_or((s, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let (int_digit, frac_digits) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    if v < 0.0 {
        out.push('-');
    }
    if !(-4..6).contains(&exp) {
        out.push_str(int_digit);
        if !frac_digits.is_empty() {
            out.push('.');
            out.push_str(frac_digits);
        }
        out.push('e');
        out.push(if exp < 0 { '-' } else { '+' });
        let _ = write!(out, "{:02}", exp.unsigned_abs());
        return;
    }
    // Plain decimal: the digits d0 d1 d2 ... with the decimal point after exp + 1 of them.
    let digits = || int_digit.chars().chain(frac_digits.chars());
    let nd = 1 + frac_digits.len() as i32;
    let dp = exp + 1; // digits before the decimal point (may be <= 0)
    if dp <= 0 {
        out.push_str("0.");
        for _ in 0..-dp {
            out.push('0');
        }
        out.extend(digits());
    } else {
        out.extend(digits().take(dp as usize));
        for _ in nd..dp {
            out.push('0');
        }
        if nd > dp {
            out.push('.');
            out.extend(digits().skip(dp as usize));
        }
    }
}

/// A small stack buffer for formatting one float without allocating.
struct StackStr {
    buf: [u8; 32],
    len: usize,
}

impl StackStr {
    fn new() -> Self {
        StackStr {
            buf: [0; 32],
            len: 0,
        }
    }

    fn as_str(&self) -> &str {
        std::str::from_utf8(&self.buf[..self.len]).unwrap_or_default()
    }
}

impl std::fmt::Write for StackStr {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        let end = self.len + s.len();
        if end > self.buf.len() {
            return Err(std::fmt::Error);
        }
        self.buf[self.len..end].copy_from_slice(s.as_bytes());
        self.len = end;
        Ok(())
    }
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

    fn fam<'a>(name: &'a str, help: &'a str, kind: Kind, unit: Option<&'a str>) -> Family<'a> {
        Family {
            name,
            help,
            kind,
            unit,
        }
    }

    fn go(v: f64) -> String {
        let mut s = String::new();
        write_go_float(&mut s, v);
        s
    }

    fn value(v: f64) -> String {
        let mut s = String::new();
        write_value(&mut s, v);
        s
    }

    fn le(v: f64, format: Format) -> String {
        let mut s = String::new();
        write_le(&mut s, v, format);
        s
    }

    // ---- Numbers -------------------------------------------------------------------------

    #[test]
    fn go_float_formatting() {
        // Expected strings are Go's strconv.FormatFloat(v, 'g', -1, 64).
        for (v, want) in [
            (0.0001, "0.0001"),
            (0.0002, "0.0002"),
            (0.1024, "0.1024"),
            (53687.0912, "53687.0912"),
            (1e-05, "1e-05"),
            (1.5e-7, "1.5e-07"),
            (-2.5e-7, "-2.5e-07"),
            (0.5, "0.5"),
            (1.0, "1"),
            (10.0, "10"),
            (100000.0, "100000"),
            (123456.7, "123456.7"),
            (1e6, "1e+06"),
            (1234567.5, "1.2345675e+06"),
            (1e23, "1e+23"),
            (1.1e23, "1.1e+23"),
            (1e100, "1e+100"),
            (f64::MAX, "1.7976931348623157e+308"),
            (5e-324, "5e-324"),
            (0.1 + 0.2, "0.30000000000000004"),
            (0.0, "0"),
            (INF, "+Inf"),
            (-INF, "-Inf"),
            (f64::NAN, "NaN"),
        ] {
            assert_eq!(go(v), want, "{v:e}");
        }
    }

    #[test]
    fn sample_values() {
        for (v, want) in [
            (0.0, "0"),
            (-0.0, "0"),
            (1.0, "1"),
            (-3.0, "-3"),
            (1234567.0, "1234567"),
            (999_999_999_999_999.0, "999999999999999"),
            (1e15, "1e+15"),
            (0.25, "0.25"),
            (1.7324e9 + 0.5, "1.7324000005e+09"),
            (INF, "+Inf"),
            (-INF, "-Inf"),
            (f64::NAN, "NaN"),
        ] {
            assert_eq!(value(v), want, "{v:e}");
        }
    }

    #[test]
    fn le_values() {
        use Format::*;
        for v in [0.0001, 0.1024, 1e-05, 0.5] {
            assert_eq!(le(v, Text004), le(v, OpenMetrics100));
        }
        assert_eq!(le(1.0, Text004), "1");
        assert_eq!(le(INF, Text004), "+Inf");
        assert_eq!(le(INF, OpenMetrics100), "+Inf");
        // The OpenMetrics spec's canonical examples ("Canonical Numbers").
        let cases = "0.0 0.001 0.002 0.01 0.1 0.9 0.95 0.99 0.999 1.0 1.7 10.0 \
                     1e-10 1e-09 1e-05 0.0001 0.1 1.0 100000.0 1e+06 1e+10 1e+23 1.1e+23";
        for want in cases.split_whitespace() {
            let v: f64 = want.parse().unwrap();
            assert_eq!(le(v, OpenMetrics100), want);
        }
        // Ceph's latency axis as the parser builds it (100 µs doubling) prints cleanly.
        let axis: Vec<String> = (0..12)
            .map(|k| le(0.0001 * f64::from(1u32 << k), Text004))
            .collect();
        assert_eq!(
            axis.join(" "),
            "0.0001 0.0002 0.0004 0.0008 0.0016 0.0032 0.0064 0.0128 0.0256 0.0512 0.1024 0.2048"
        );
    }

    #[test]
    fn escaping() {
        let mut s = String::new();
        escape_label_value(&mut s, "a\\b\"c\nd é");
        assert_eq!(s, r#"a\\b\"c\nd é"#);
        let mut s = String::new();
        escape_help(&mut s, "say \"hi\"\\\nbye", Format::Text004);
        assert_eq!(s, "say \"hi\"\\\\\\nbye");
        let mut s = String::new();
        escape_help(&mut s, "say \"hi\"\\\nbye", Format::OpenMetrics100);
        assert_eq!(s, "say \\\"hi\\\"\\\\\\nbye");
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
                OpenMetrics100,
            ),
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
    }

    // ---- Golden expositions --------------------------------------------------------------

    /// One family of each kind, plus a family that gets no sample.
    fn render(format: Format) -> String {
        let mut e = Encoder::new(format);
        assert_eq!(e.format(), format);
        e.family(&fam(
            "ceph_pool_size",
            "Replicas \"wanted\" per object.",
            Kind::Gauge,
            None,
        ));
        e.sample(&[("pool", "rbd")], 3.0);
        e.sample(&[("pool", "we\"ird\\na\nme")], 2.5);
        e.family(&fam("ceph_empty", "Never sampled.", Kind::Gauge, None));
        e.family(&fam("crb_errors", "Failed runs.", Kind::Counter, None));
        e.sample(&[("collector", "status"), ("reason", "timeout")], 7.0);
        e.sample(&[], 0.0);
        e.family(&fam("crb_build", "Version.", Kind::Info, None));
        e.sample(&[("version", "0.1.0")], 1.0);
        e.family(&fam(
            "ceph_lat_seconds",
            "Write latency.",
            Kind::Histogram,
            Some("seconds"),
        ));
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
            Kind::Summary,
            Some("seconds"),
        ));
        e.sample(&[("quantile", "0.99")], 0.1536);
        e.family(&fam("ceph_up", "", Kind::Gauge, None));
        e.sample(&[], f64::NAN);
        e.family(&fam(
            "ceph_trailing_empty",
            "No sample either.",
            Kind::Counter,
            None,
        ));
        e.finish()
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
ceph_lat_seconds_count{ceph_daemon="osd.0"} 4
ceph_lat_seconds_bucket{le="1"} 2
ceph_lat_seconds_bucket{le="+Inf"} 2
ceph_lat_seconds_sum 0.75
ceph_lat_seconds_count 2
# HELP ceph_client_write_latency_seconds Quantiles.
# TYPE ceph_client_write_latency_seconds summary
ceph_client_write_latency_seconds{quantile="0.99"} 0.1536
# TYPE ceph_up gauge
ceph_up NaN
"#;
        assert_eq!(render(Format::Text004), want);
    }

    #[test]
    fn golden_openmetrics() {
        let want = r#"# TYPE ceph_pool_size gauge
# HELP ceph_pool_size Replicas \"wanted\" per object.
ceph_pool_size{pool="rbd"} 3
ceph_pool_size{pool="we\"ird\\na\nme"} 2.5
# TYPE crb_errors counter
# HELP crb_errors Failed runs.
crb_errors_total{collector="status",reason="timeout"} 7
crb_errors_total 0
# TYPE crb_build info
# HELP crb_build Version.
crb_build_info{version="0.1.0"} 1
# TYPE ceph_lat_seconds histogram
# UNIT ceph_lat_seconds seconds
# HELP ceph_lat_seconds Write latency.
ceph_lat_seconds_bucket{ceph_daemon="osd.0",le="0.0001"} 1
ceph_lat_seconds_bucket{ceph_daemon="osd.0",le="0.0002"} 3
ceph_lat_seconds_bucket{ceph_daemon="osd.0",le="+Inf"} 4
ceph_lat_seconds_bucket{le="1.0"} 2
ceph_lat_seconds_bucket{le="+Inf"} 2
ceph_lat_seconds_count 2
ceph_lat_seconds_sum 0.75
# TYPE ceph_client_write_latency_seconds summary
# UNIT ceph_client_write_latency_seconds seconds
# HELP ceph_client_write_latency_seconds Quantiles.
ceph_client_write_latency_seconds{quantile="0.99"} 0.1536
# TYPE ceph_up gauge
ceph_up NaN
# EOF
"#;
        assert_eq!(render(Format::OpenMetrics100), want);
    }

    #[test]
    fn empty_exposition() {
        assert_eq!(Encoder::new(Format::Text004).finish(), "");
        assert_eq!(Encoder::new(Format::OpenMetrics100).finish(), "# EOF\n");
        let mut e = Encoder::with_capacity(Format::OpenMetrics100, 0);
        e.family(&fam("a", "b", Kind::Gauge, None));
        e.family(&fam("c", "d", Kind::Histogram, None));
        assert_eq!(e.finish(), "# EOF\n");
    }

    #[test]
    fn histogram_without_inf_bound_gets_one() {
        for format in [Format::Text004, Format::OpenMetrics100] {
            let mut e = Encoder::new(format);
            e.family(&fam("h", "", Kind::Histogram, None));
            e.histogram(&[], &[0.5], &[3], Some(1.0));
            let out = e.finish();
            assert!(
                out.contains("h_bucket{le=\"0.5\"} 3\nh_bucket{le=\"+Inf\"} 3\n"),
                "{out}"
            );
            assert!(out.contains("h_count 3\n"), "{out}");
        }
        let mut e = Encoder::new(Format::Text004);
        e.family(&fam("h", "", Kind::Histogram, None));
        e.histogram(&[], &[], &[], None);
        assert_eq!(
            e.finish(),
            "# TYPE h histogram\nh_bucket{le=\"+Inf\"} 0\nh_count 0\n"
        );
    }

    // ---- Real tools ----------------------------------------------------------------------

    /// A realistic exposition: what the exporter publishes, with every kind.
    fn realistic(format: Format) -> String {
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
        let mut e = Encoder::new(format);
        e.family(&fam(
            "ceph_degraded_objects",
            "Degraded object copies.",
            Kind::Gauge,
            None,
        ));
        e.sample(&[], 1234.0);
        e.family(&fam(
            "ceph_recovery_objects_per_second",
            "Recovery rate. method=\"delta\": from samples; a \\ backslash.\nSecond line.",
            Kind::Gauge,
            None,
        ));
        e.sample(&[("method", "delta")], 168.25);
        e.sample(&[("method", "ceph")], 0.0);
        e.family(&fam("ceph_pool_size", "Replicas.", Kind::Gauge, None));
        e.sample(&[("pool", "rbd")], 3.0);
        e.sample(&[("pool", "with \"quotes\", \\ and\nnewline")], 2.0);
        e.family(&fam(
            "ceph_osd_op_w_latency_seconds",
            "Client write latency per primary OSD.",
            Kind::Histogram,
            Some("seconds"),
        ));
        e.histogram(&[("ceph_daemon", "osd.0")], &bounds, &cum, None);
        e.histogram(&[("ceph_daemon", "osd.1")], &bounds, &cum, Some(12.5));
        e.family(&fam(
            "ceph_client_write_latency_seconds",
            "Cluster-wide write latency quantiles over the window.",
            Kind::Summary,
            Some("seconds"),
        ));
        e.sample(&[("quantile", "0.5")], 0.04032);
        e.sample(&[("quantile", "0.99")], 0.3208533333333333);
        e.family(&fam(
            "ceph_recovery_budget_collector_errors",
            "Failed runs.",
            Kind::Counter,
            None,
        ));
        e.sample(&[("collector", "status"), ("reason", "timeout")], 3.0);
        e.family(&fam(
            "ceph_osd_mclock_profile",
            "mClock profile.",
            Kind::Info,
            None,
        ));
        e.sample(
            &[("ceph_daemon", "osd.0"), ("profile", "high_client_ops")],
            1.0,
        );
        e.family(&fam(
            "ceph_recovery_budget_last_success_timestamp_seconds",
            "Unix time.",
            Kind::Gauge,
            None,
        ));
        e.sample(&[], 1_764_500_000.123);
        e.finish()
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
        let Some(promtool) = promtool() else { return };
        // 1. A histogram with _count but no _sum: no problem reported.
        let mut e = Encoder::new(Format::Text004);
        e.family(&fam(
            "x_seconds",
            "A histogram without _sum.",
            Kind::Histogram,
            None,
        ));
        e.histogram(&[("ceph_daemon", "osd.0")], &[0.0001, INF], &[1, 2], None);
        assert_eq!(promtool_check(promtool, &e.finish()), (0, String::new()));
        // 2. A gauge with a `quantile` label: a lint problem (exit 3)...
        let mut e = Encoder::new(Format::Text004);
        e.family(&fam(
            "ceph_client_write_latency_seconds",
            "Quantiles.",
            Kind::Gauge,
            None,
        ));
        e.sample(&[("quantile", "0.99")], 0.12);
        let (code, said) = promtool_check(promtool, &e.finish());
        assert_eq!(code, 3);
        assert_eq!(
            said.trim(),
            "ceph_client_write_latency_seconds non-summary metrics should not have \"quantile\" label"
        );
        // ...that the same series typed as a summary does not have.
        let mut e = Encoder::new(Format::Text004);
        e.family(&fam(
            "ceph_client_write_latency_seconds",
            "Quantiles.",
            Kind::Summary,
            None,
        ));
        e.sample(&[("quantile", "0.99")], 0.12);
        assert_eq!(promtool_check(promtool, &e.finish()), (0, String::new()));
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
            openmetrics_problems(&render(Format::OpenMetrics100)),
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

    #[test]
    fn text_and_openmetrics_carry_the_same_samples() {
        // Apart from metadata, the order of _sum/_count and text's _count without _sum, the two
        // formats carry the same sample lines (no integral le in this exposition).
        let lines = |s: &str| -> Vec<String> {
            let mut v: Vec<String> = s
                .lines()
                .filter(|l| !l.starts_with('#'))
                .map(str::to_string)
                .collect();
            v.sort();
            v
        };
        let text: Vec<String> = lines(&realistic(Format::Text004))
            .into_iter()
            .filter(|l| {
                !l.starts_with("ceph_osd_op_w_latency_seconds_count{ceph_daemon=\"osd.0\"}")
            })
            .collect();
        assert_eq!(text, lines(&realistic(Format::OpenMetrics100)));
    }
}
