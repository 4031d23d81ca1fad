//! Lenient JSON reading and path-aware field access shared by the parsers.
//!
//! Leniency, all of it needed by real Ceph outputs:
//! - leading blank lines / whitespace (the CLI prints a blank line before most JSON outputs);
//! - bare `inf`, `-inf`, `nan`, `-nan` (C++ `<<` of a double: Reef's `read_balance` scores) and
//!   `Infinity`/`NaN` (Python's `json.dumps`, used by mgr modules) outside strings become `null`.
//!
//! Errors carry the line/column in the *original* output, and text that is not JSON at all (an
//! HTML page, `Error EINVAL: ...`) is quoted in the message so that the operator sees what Ceph said.

use std::borrow::Cow;
use std::fmt;

use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;
use serde_json::{Map, Value};

use super::ParseError;

/// Longest excerpt of non-JSON text quoted in an error message.
const EXCERPT_CHARS: usize = 120;

/// Parses one JSON document from a command's stdout.
pub(crate) fn parse_value(out: &[u8]) -> Result<Value, ParseError> {
    parse_kept(out, &Keep::ALL)
}

/// Like [`parse_value`], but builds only the parts of the document that `keep` selects: the
/// rest is checked for syntax and skipped without allocating. For big outputs (a `pg ls` with
/// full PG stats is ~2 KB per PG, of which 4 fields are read) this is several times faster
/// than building the whole tree, and the result can be navigated with the same paths.
pub(crate) fn parse_kept(out: &[u8], keep: &Keep) -> Result<Value, ParseError> {
    parse_with(out, keep)
}

/// Reads one JSON document from a command's stdout through `seed`, with the leniency and error
/// positions of [`parse_value`]: for a parser that takes what it needs while reading, without
/// building a tree of the document.
pub(crate) fn parse_with<S, T>(out: &[u8], seed: S) -> Result<T, ParseError>
where
    S: for<'de> DeserializeSeed<'de, Value = T>,
{
    let Some(first) = out.iter().position(|b| !is_ws(*b)) else {
        return Err(ParseError::Empty);
    };
    if !starts_json_value(&out[first..]) {
        let (line, column) = line_col(out, first);
        return Err(ParseError::Json {
            line,
            column,
            message: format!("expected JSON, found text: {}", excerpt(&out[first..])),
        });
    }
    let (text, shifts) = sanitize(out);
    let mut de = serde_json::Deserializer::from_slice(&text);
    seed.deserialize(&mut de)
        .and_then(|v| de.end().map(|()| v))
        .map_err(|e| json_error(&e, &text, &shifts))
}

/// Which parts of a JSON document [`parse_kept`] builds.
pub(crate) struct Keep {
    /// For an object: the keys kept, with what to keep of each value; other keys are skipped.
    /// `None`: all keys, fully.
    pub fields: Option<&'static [(&'static str, &'static Keep)]>,
    /// For an array: what to keep of each element. `None`: elements are kept fully.
    pub each: Option<&'static Keep>,
}

impl Keep {
    /// The whole value.
    pub const ALL: Keep = Keep {
        fields: None,
        each: None,
    };
}

impl<'de> DeserializeSeed<'de> for &Keep {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        if self.fields.is_none() && self.each.is_none() {
            Value::deserialize(d)
        } else {
            d.deserialize_any(KeepVisitor(self))
        }
    }
}

struct KeepVisitor<'k>(&'k Keep);

impl<'de> Visitor<'de> for KeepVisitor<'_> {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }

    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let each = self.0.each.unwrap_or(&Keep::ALL);
        let mut out = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(4096));
        while let Some(v) = seq.next_element_seed(each)? {
            out.push(v);
        }
        Ok(Value::Array(out))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut out = Map::new();
        while let Some(key) = map.next_key_seed(KeySeed)? {
            let wanted = match self.0.fields {
                None => Some(&Keep::ALL),
                Some(fields) => fields
                    .iter()
                    .find(|(k, _)| *k == key)
                    .map(|(_, keep)| *keep),
            };
            match wanted {
                Some(keep) => {
                    let v = map.next_value_seed(keep)?;
                    out.insert(key.into_owned(), v);
                }
                None => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(Value::Object(out))
    }
}

/// An object key, borrowed from the input when it has no escapes (no allocation per key).
struct KeySeed;

impl<'de> DeserializeSeed<'de> for KeySeed {
    type Value = Cow<'de, str>;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_str(KeySeed)
    }
}

impl<'de> Visitor<'de> for KeySeed {
    type Value = Cow<'de, str>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an object key")
    }

    fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Self::Value, E> {
        Ok(Cow::Borrowed(v))
    }

    fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
        Ok(Cow::Owned(v.to_owned()))
    }

    fn visit_string<E>(self, v: String) -> Result<Self::Value, E> {
        Ok(Cow::Owned(v))
    }
}

/// JSON insignificant whitespace.
fn is_ws(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r')
}

/// Whether `s` (non-empty, no leading whitespace) can start a JSON value or a bare inf/nan token.
fn starts_json_value(s: &[u8]) -> bool {
    match s[0] {
        b'{' | b'[' | b'"' | b'-' | b'0'..=b'9' | b't' | b'f' | b'n' => true,
        _ => special_token_len(s).is_some(),
    }
}

/// First line of `s`, lossily decoded and cut to [`EXCERPT_CHARS`], in quotes.
pub(crate) fn excerpt(s: &[u8]) -> String {
    let line = s.split(|b| *b == b'\n').next().unwrap_or_default();
    let text = String::from_utf8_lossy(line);
    let text = text.trim_end();
    let mut cut: String = text.chars().take(EXCERPT_CHARS).collect();
    if cut.len() < text.len() {
        cut.push_str("...");
    }
    format!("{cut:?}")
}

/// 1-based line and column (in bytes) of byte offset `pos`.
fn line_col(s: &[u8], pos: usize) -> (usize, usize) {
    let before = &s[..pos.min(s.len())];
    let line = 1 + before.iter().filter(|b| **b == b'\n').count();
    let line_start = before
        .iter()
        .rposition(|b| *b == b'\n')
        .map_or(0, |i| i + 1);
    (line, pos - line_start + 1)
}

/// If `s` starts with a bare non-finite number token (`inf`, `-inf`, `+inf`, `infinity`, `nan`,
/// `-nan`, any case) ending at a token boundary, its length.
fn special_token_len(s: &[u8]) -> Option<usize> {
    let sign = usize::from(matches!(s.first(), Some(b'-' | b'+')));
    let rest = &s[sign..];
    let word = ["infinity", "inf", "nan"]
        .into_iter()
        .find(|w| rest.len() >= w.len() && rest[..w.len()].eq_ignore_ascii_case(w.as_bytes()))?;
    let end = sign + word.len();
    match s.get(end) {
        Some(b) if b.is_ascii_alphanumeric() || *b == b'_' => None,
        _ => Some(end),
    }
}

/// Replaces bare non-finite tokens outside strings by `null`. Borrows when there are none (the
/// usual case). A 3-byte token grows by one byte; the offsets (in the output) of those growths
/// are returned so that error positions can be mapped back to the original text.
fn sanitize(input: &[u8]) -> (Cow<'_, [u8]>, Vec<usize>) {
    let mut out: Option<Vec<u8>> = None;
    let mut shifts = Vec::new();
    let mut copied = 0; // input[..copied] is already in `out`
    let n = input.len();
    let mut i = 0;
    while i < n {
        match input[i] {
            b'"' => {
                // Skip the string, up to its closing (unescaped) quote.
                i += 1;
                while i < n {
                    match input[i] {
                        b'"' => break,
                        b'\\' => i += 2,
                        _ => i += 1,
                    }
                }
                i += 1;
            }
            b'i' | b'I' | b'n' | b'N' => {
                // The token starts at its sign, if any, and must not continue a word (`1e-5`
                // has no such letter; `null` is not a token).
                let start = if i > copied && matches!(input[i - 1], b'-' | b'+') {
                    i - 1
                } else {
                    i
                };
                let boundary = start == 0 || !input[start - 1].is_ascii_alphanumeric();
                match special_token_len(&input[start..]).filter(|_| boundary) {
                    Some(len) => {
                        let buf = out.get_or_insert_with(|| Vec::with_capacity(n + 16));
                        buf.extend_from_slice(&input[copied..start]);
                        buf.extend_from_slice(b"null");
                        if len < 4 {
                            shifts.push(buf.len() - 1);
                        } else {
                            buf.resize(buf.len() + (len - 4), b' ');
                        }
                        i = start + len;
                        copied = i;
                    }
                    None => i += 1,
                }
            }
            _ => i += 1,
        }
    }
    match out {
        None => (Cow::Borrowed(input), shifts),
        Some(mut buf) => {
            buf.extend_from_slice(&input[copied..]);
            (Cow::Owned(buf), shifts)
        }
    }
}

/// Maps a serde_json error on the sanitized text to a [`ParseError::Json`] in original coordinates.
fn json_error(e: &serde_json::Error, text: &[u8], shifts: &[usize]) -> ParseError {
    let (line, mut column) = (e.line(), e.column());
    if !shifts.is_empty() && line > 0 {
        // Offset (in `text`) of the start of the error's line, then of the error itself.
        let line_start = if line == 1 {
            0
        } else {
            text.iter()
                .enumerate()
                .filter(|(_, b)| **b == b'\n')
                .nth(line - 2)
                .map_or(text.len(), |(i, _)| i + 1)
        };
        let at = line_start + column.saturating_sub(1);
        let grown = shifts
            .iter()
            .filter(|s| **s >= line_start && **s < at)
            .count();
        column = column.saturating_sub(grown).max(1);
    }
    let full = e.to_string();
    let suffix = format!(" at line {} column {}", e.line(), e.column());
    let message = full.strip_suffix(&suffix).unwrap_or(&full).to_string();
    ParseError::Json {
        line,
        column,
        message,
    }
}

/// A position in a JSON document, for error messages: `pgmap.pgs_by_state[2].count`. Built on
/// the stack while descending, rendered only when an error is reported.
#[derive(Clone, Copy)]
pub(crate) enum Path<'a> {
    Root,
    Key(&'a Path<'a>, &'a str),
    Index(&'a Path<'a>, usize),
}

impl<'a> Path<'a> {
    pub(crate) fn key(&'a self, k: &'a str) -> Path<'a> {
        Path::Key(self, k)
    }

    pub(crate) fn index(&'a self, i: usize) -> Path<'a> {
        Path::Index(self, i)
    }

    fn write(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Path::Root => Ok(()),
            Path::Key(parent, k) => {
                parent.write(f)?;
                if matches!(parent, Path::Root) {
                    write!(f, "{k}")
                } else {
                    write!(f, ".{k}")
                }
            }
            Path::Index(parent, i) => {
                parent.write(f)?;
                write!(f, "[{i}]")
            }
        }
    }

    /// A [`ParseError::Shape`] at this path.
    pub(crate) fn error(&self, expected: impl Into<String>) -> ParseError {
        ParseError::Shape {
            path: self.to_string(),
            expected: expected.into(),
        }
    }

    /// "expected {what}, found {kind of v}".
    pub(crate) fn mismatch(&self, what: &str, v: &Value) -> ParseError {
        self.error(format!("expected {what}, found {}", kind(v)))
    }

    /// "expected {what}, found nothing (the key is absent)".
    pub(crate) fn missing(&self, what: &str) -> ParseError {
        self.error(format!(
            "expected {what}, found nothing (the key is absent)"
        ))
    }
}

impl fmt::Display for Path<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if matches!(self, Path::Root) {
            f.write_str("(top level)")
        } else {
            self.write(f)
        }
    }
}

/// What a JSON value is, for "found ..." in messages.
pub(crate) fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(n) if n.is_u64() => "a non-negative integer",
        Value::Number(n) if n.is_i64() => "a negative integer",
        Value::Number(_) => "a floating-point number",
        Value::String(_) => "string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

pub(crate) const NON_NEG_INT: &str = "a non-negative integer";

pub(crate) fn as_object<'v>(
    v: &'v Value,
    at: &Path<'_>,
) -> Result<&'v Map<String, Value>, ParseError> {
    v.as_object().ok_or_else(|| at.mismatch("an object", v))
}

pub(crate) fn as_array<'v>(v: &'v Value, at: &Path<'_>) -> Result<&'v [Value], ParseError> {
    match v {
        Value::Array(a) => Ok(a),
        _ => Err(at.mismatch("an array", v)),
    }
}

pub(crate) fn as_u64(v: &Value, at: &Path<'_>) -> Result<u64, ParseError> {
    v.as_u64().ok_or_else(|| at.mismatch(NON_NEG_INT, v))
}

pub(crate) fn as_u32(v: &Value, at: &Path<'_>) -> Result<u32, ParseError> {
    let n = as_u64(v, at)?;
    u32::try_from(n)
        .map_err(|_| at.error(format!("expected an integer up to {}, found {n}", u32::MAX)))
}

pub(crate) fn as_f64(v: &Value, at: &Path<'_>) -> Result<f64, ParseError> {
    v.as_f64().ok_or_else(|| at.mismatch("a number", v))
}

pub(crate) fn as_str<'v>(v: &'v Value, at: &Path<'_>) -> Result<&'v str, ParseError> {
    v.as_str().ok_or_else(|| at.mismatch("a string", v))
}

/// A present, non-null field (`null` counts as absent: a non-finite number became `null`).
pub(crate) fn field<'v>(obj: &'v Map<String, Value>, key: &str) -> Option<&'v Value> {
    obj.get(key).filter(|v| !v.is_null())
}

/// A required non-negative integer field.
/// The object under `key` of `obj`; `at` is that field's path, `what` names it when absent.
pub(crate) fn req_object<'v>(
    obj: &'v Map<String, Value>,
    key: &str,
    at: &Path<'_>,
    what: &str,
) -> Result<&'v Map<String, Value>, ParseError> {
    match obj.get(key) {
        Some(v) => as_object(v, at),
        None => Err(at.missing(what)),
    }
}

pub(crate) fn req_u64(
    obj: &Map<String, Value>,
    key: &str,
    at: &Path<'_>,
) -> Result<u64, ParseError> {
    let at = at.key(key);
    match obj.get(key) {
        Some(v) => as_u64(v, &at),
        None => Err(at.missing(NON_NEG_INT)),
    }
}

/// A required field that fits in `u32`.
pub(crate) fn req_u32(
    obj: &Map<String, Value>,
    key: &str,
    at: &Path<'_>,
) -> Result<u32, ParseError> {
    let at = at.key(key);
    match obj.get(key) {
        Some(v) => as_u32(v, &at),
        None => Err(at.missing(NON_NEG_INT)),
    }
}

/// A required string field.
pub(crate) fn req_str<'v>(
    obj: &'v Map<String, Value>,
    key: &str,
    at: &Path<'_>,
) -> Result<&'v str, ParseError> {
    let at = at.key(key);
    match obj.get(key) {
        Some(v) => as_str(v, &at),
        None => Err(at.missing("a string")),
    }
}

/// A counter Ceph omits when it is zero: absent or `null` is 0, anything but a non-negative
/// integer is an error.
pub(crate) fn opt_u64(
    obj: &Map<String, Value>,
    key: &str,
    at: &Path<'_>,
) -> Result<u64, ParseError> {
    match field(obj, key) {
        Some(v) => as_u64(v, &at.key(key)),
        None => Ok(0),
    }
}

/// A rate Ceph omits when it is zero: absent or `null` is 0.0, anything but a number is an error.
pub(crate) fn opt_f64(
    obj: &Map<String, Value>,
    key: &str,
    at: &Path<'_>,
) -> Result<f64, ParseError> {
    match field(obj, key) {
        Some(v) => as_f64(v, &at.key(key)),
        None => Ok(0.0),
    }
}

/// An optional field that, when present, must be a non-negative integer.
pub(crate) fn maybe_u64(
    obj: &Map<String, Value>,
    key: &str,
    at: &Path<'_>,
) -> Result<Option<u64>, ParseError> {
    field(obj, key).map(|v| as_u64(v, &at.key(key))).transpose()
}

/// An optional field that, when present, must be a string.
pub(crate) fn maybe_str<'v>(
    obj: &'v Map<String, Value>,
    key: &str,
    at: &Path<'_>,
) -> Result<Option<&'v str>, ParseError> {
    field(obj, key).map(|v| as_str(v, &at.key(key))).transpose()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn json_err(out: &[u8]) -> (usize, usize, String) {
        match parse_value(out) {
            Err(ParseError::Json {
                line,
                column,
                message,
            }) => (line, column, message),
            other => panic!(
                "expected a Json error for {:?}, got {other:?}",
                String::from_utf8_lossy(out)
            ),
        }
    }

    #[test]
    fn leading_blank_lines_are_skipped() {
        assert_eq!(
            parse_value(b"\n\n  {\"a\":1}\n").unwrap(),
            serde_json::json!({"a": 1})
        );
        assert_eq!(parse_value(b"\r\n[1]").unwrap(), serde_json::json!([1]));
    }

    #[test]
    fn empty_and_whitespace_are_empty() {
        assert_eq!(parse_value(b""), Err(ParseError::Empty));
        assert_eq!(parse_value(b"\n"), Err(ParseError::Empty));
        assert_eq!(parse_value(b" \t\r\n \n"), Err(ParseError::Empty));
    }

    #[test]
    fn bare_non_finite_tokens_become_null() {
        // Reef `osd pool ls detail`: "read_balance":{"score_acting":inf,...}
        let v = parse_value(b"{\"a\":inf,\"b\":-inf,\"c\":nan,\"d\":-nan,\"e\":[inf, NaN ,Infinity,-Infinity],\"f\":1}")
            .unwrap();
        assert_eq!(
            v,
            serde_json::json!({"a": null, "b": null, "c": null, "d": null, "e": [null, null, null, null], "f": 1})
        );
    }

    #[test]
    fn tokens_inside_strings_and_literals_are_untouched() {
        let v = parse_value(
            b"{\"inf\":\"nan -inf \\\" inf\",\"n\":null,\"x\":1e-5,\"y\":-1,\"t\":[true,false]}",
        )
        .unwrap();
        assert_eq!(
            v,
            serde_json::json!({"inf": "nan -inf \" inf", "n": null, "x": 1e-5, "y": -1, "t": [true, false]})
        );
    }

    #[test]
    fn words_that_merely_start_like_tokens_are_not_rewritten() {
        // `infx`, `nanny` are not tokens: left for serde_json to reject.
        let (_, _, msg) = json_err(b"{\"a\":infx}");
        assert!(msg.contains("expected value"), "{msg}");
        let (_, _, msg) = json_err(b"[nanny]");
        assert!(msg.contains("expected"), "{msg}");
    }

    #[test]
    fn error_positions_refer_to_the_original_text() {
        // Error after two 3-byte tokens on the same line: columns must not be shifted.
        let input = b"\n{\"a\":inf,\"b\":nan,\"c\":tru}";
        let (line, column, _) = json_err(input);
        assert_eq!(line, 2);
        let col_of_bad = 1 + "{\"a\":inf,\"b\":nan,\"c\":tru".len();
        assert!(
            column == col_of_bad || column == col_of_bad + 1,
            "column {column}, bad token ends at {col_of_bad}"
        );
        // Without tokens: serde_json's own position.
        let (line, column, _) = json_err(b"\n\n{\"a\":,}");
        assert_eq!((line, column), (3, 6));
    }

    #[test]
    fn non_json_text_is_quoted() {
        let (line, column, msg) = json_err(b"\nError EINVAL: invalid command\nmore\n");
        assert_eq!((line, column), (2, 1));
        assert_eq!(
            msg,
            "expected JSON, found text: \"Error EINVAL: invalid command\""
        );
        let long = "x".repeat(500);
        let (_, _, msg) = json_err(long.as_bytes());
        assert!(msg.len() < 200 && msg.ends_with("...\""), "{msg}");
    }

    #[test]
    fn message_has_no_duplicated_position() {
        let (_, _, msg) = json_err(b"{\"a\":1");
        assert!(!msg.contains("at line"), "{msg}");
        assert!(msg.contains("EOF"), "{msg}");
    }

    #[test]
    fn paths_render() {
        let root = Path::Root;
        assert_eq!(root.to_string(), "(top level)");
        let a = root.key("pgmap");
        let b = a.key("pgs_by_state");
        let c = b.index(2);
        let d = c.key("count");
        assert_eq!(d.to_string(), "pgmap.pgs_by_state[2].count");
        let e = root.index(3);
        assert_eq!(e.key("pgid").to_string(), "[3].pgid");
        let err = d.mismatch(NON_NEG_INT, &serde_json::json!("7"));
        assert_eq!(
            err.to_string(),
            "pgmap.pgs_by_state[2].count: expected a non-negative integer, found string"
        );
    }

    static INNER: Keep = Keep {
        fields: Some(&[("keep", &Keep::ALL)]),
        each: None,
    };
    static LIST: Keep = Keep {
        fields: None,
        each: Some(&INNER),
    };
    static TOP: Keep = Keep {
        fields: Some(&[("list", &LIST), ("flag", &Keep::ALL)]),
        each: Some(&INNER),
    };

    #[test]
    fn kept_parts_only() {
        let out = br#"
{"skip":{"deep":[1,2,{"x":"y"}]},"flag":true,"list":[{"keep":[1,{"a":null}],"drop":"x"},{"drop":1},3,"s",null,[1,2],{"keep":inf}],"flag":false}"#;
        let v = parse_kept(out, &TOP).unwrap();
        // Duplicate keys: the last wins, as with serde_json::Value.
        assert_eq!(
            v,
            serde_json::json!({"flag": false, "list": [{"keep": [1, {"a": null}]}, {}, 3, "s", null, [1, 2], {"keep": null}]})
        );
        let v = parse_kept(br#"[{"keep":1,"k\u0065ep":2,"x":3}]"#, &TOP).unwrap();
        assert_eq!(
            v,
            serde_json::json!([{"keep": 2}]),
            "escaped keys are compared decoded"
        );
        assert_eq!(parse_kept(b"7", &TOP).unwrap(), serde_json::json!(7));
    }

    #[test]
    fn kept_parse_reports_errors_like_parse_value() {
        for bad in [
            &b""[..],
            b"\n\n",
            b"\n{\"list\":[{\"keep\":1},{\"drop\":[1,2,}]}",
            b"{\"skip\":tru}",
            b"{} {}",
            b"Error EINVAL: x",
            b"{\"list\":[{\"keep\":1,\"drop\":\"x",
        ] {
            assert_eq!(
                parse_kept(bad, &TOP),
                parse_value(bad),
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
    }

    #[test]
    fn sanitize_borrows_when_clean() {
        let (t, s) = sanitize(b"{\"a\":[1,2,null]}");
        assert!(matches!(t, Cow::Borrowed(_)));
        assert!(s.is_empty());
    }
}
