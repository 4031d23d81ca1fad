//! Multi-daemon output of `ceph tell 'osd.*' <cmd> --format json`.
//!
//! For each target the CLI prints a blank line, then `osd.N: ` and the daemon's reply (with
//! `-f json`, one compact JSON document on one line); a single-target `tell osd.N` prints the
//! reply alone, without the prefix.
//!
//! A down OSD (seen on 16.2.15) leaves **no trace on stdout** but its blank line: the CLI prints
//! `Error ENXIO: problem getting command descriptions from osd.N` on stderr, goes on with the
//! other OSDs and exits 6 (ENXIO). An unknown OSD gives `Error ENOENT: ...` (exit 2). So the
//! stdout alone cannot say which OSD is missing: use [`stderr_errors`] on the stderr as well.

use std::fmt;

use super::config_value::is_ceph_error;

/// One daemon's reply: `body` borrows from the whole output (no copy of ~140 KB documents).
#[derive(Debug, Clone, PartialEq)]
pub struct DaemonOutput<'a> {
    /// `osd.3`, as the CLI printed it.
    pub daemon: String,
    /// The reply, trimmed; may span several lines (pretty-printed JSON).
    pub body: &'a str,
}

/// A line of the output that is not a daemon's reply: an error the CLI or a daemon printed, or
/// text that cannot be attributed. `daemon` is set when the line names one.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub struct TellError {
    pub daemon: Option<String>,
    pub message: String,
}

impl fmt::Display for TellError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.daemon {
            Some(d) => write!(f, "{d}: {}", self.message),
            None => f.write_str(&self.message),
        }
    }
}

/// Daemon types whose names may prefix a reply or appear in an error.
const DAEMON_TYPES: &[&str] = &["osd", "mon", "mds", "mgr", "client"];

/// Longest message kept from an unattributable line (it may be a whole JSON document).
const MESSAGE_CHARS: usize = 300;

/// Splits multi-daemon output into per-daemon bodies, in order. Lines it cannot attribute are
/// returned as errors (with the daemon name if the line contains one), never silently dropped.
///
/// Rules: a line `TYPE.ID: rest` starts a daemon's reply (`rest` starting with `Error X:` makes
/// it an error instead); following non-blank lines continue that reply (pretty-printed JSON)
/// until a blank line or the next `TYPE.ID:` line; an `Error X: ...` line is always an error; any
/// other non-blank line outside a reply is an error.
pub fn split(out: &str) -> Vec<Result<DaemonOutput<'_>, TellError>> {
    let mut results = Vec::new();
    // The reply being collected: daemon name and byte range of its body in `out`.
    let mut current: Option<(String, usize, usize)> = None;
    let mut offset = 0;
    for raw in out.split_inclusive('\n') {
        let start = offset;
        offset += raw.len();
        let line = raw.trim_end_matches(['\n', '\r']);
        let trimmed = line.trim();

        if trimmed.is_empty() {
            flush(out, &mut current, &mut results);
            continue;
        }
        if let Some((daemon, rest_at)) = header(line) {
            flush(out, &mut current, &mut results);
            let rest = line[rest_at..].trim();
            if is_ceph_error(rest) {
                results.push(Err(TellError {
                    daemon: Some(daemon.to_string()),
                    message: cut(rest),
                }));
            } else {
                let body_start =
                    start + rest_at + (line[rest_at..].len() - line[rest_at..].trim_start().len());
                current = Some((
                    daemon.to_string(),
                    body_start,
                    start + line.trim_end().len(),
                ));
            }
            continue;
        }
        if is_ceph_error(trimmed) {
            flush(out, &mut current, &mut results);
            results.push(Err(TellError {
                daemon: daemon_in(trimmed),
                message: cut(trimmed),
            }));
            continue;
        }
        match &mut current {
            // Continuation of a multi-line reply.
            Some((_, _, end)) => *end = start + line.trim_end().len(),
            None => results.push(Err(TellError {
                daemon: daemon_in(trimmed),
                message: format!("output not attributed to a daemon: {}", cut(trimmed)),
            })),
        }
    }
    flush(out, &mut current, &mut results);
    results
}

fn flush<'a>(
    out: &'a str,
    current: &mut Option<(String, usize, usize)>,
    results: &mut Vec<Result<DaemonOutput<'a>, TellError>>,
) {
    if let Some((daemon, start, end)) = current.take() {
        results.push(Ok(DaemonOutput {
            daemon,
            body: out[start..end.max(start)].trim(),
        }));
    }
}

/// If `line` starts with `TYPE.ID:` followed by a space or the end of the line: the daemon name
/// and the byte offset after the colon.
fn header(line: &str) -> Option<(&str, usize)> {
    let colon = line.find(':')?;
    let name = &line[..colon];
    let after = &line[colon + 1..];
    if !(after.is_empty() || after.starts_with(' ')) {
        return None;
    }
    is_daemon_name(name).then_some((name, colon + 1))
}

/// `osd.3`, `mon.a`, `mds.fs.host.xyz` (cephadm names contain dots).
fn is_daemon_name(s: &str) -> bool {
    let Some((ty, id)) = s.split_once('.') else {
        return false;
    };
    DAEMON_TYPES.contains(&ty)
        && !id.is_empty()
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'))
        && !id.ends_with('.')
}

/// The first daemon name mentioned in a message ("... from osd.3").
fn daemon_in(message: &str) -> Option<String> {
    message
        .split(|c: char| {
            c.is_whitespace()
                || matches!(
                    c,
                    ',' | ';' | '(' | ')' | '\'' | '"' | '[' | ']' | '{' | '}'
                )
        })
        .map(|w| w.trim_end_matches([':', '.']))
        .find(|w| is_daemon_name(w))
        .map(str::to_string)
}

fn cut(s: &str) -> String {
    let excerpt: String = s.chars().take(MESSAGE_CHARS).collect();
    if excerpt.len() < s.len() {
        format!("{excerpt}...")
    } else {
        excerpt
    }
}

/// The errors the CLI printed on stderr for a multi-target `tell` (`Error ENXIO: problem getting
/// command descriptions from osd.3`), with the daemon they name. Other stderr lines (warnings,
/// `osd.N: <status message>`) are not errors and are skipped.
pub fn stderr_errors(err: &str) -> Vec<TellError> {
    err.lines()
        .map(str::trim)
        .filter(|l| is_ceph_error(l))
        .map(|l| TellError {
            daemon: daemon_in(l),
            message: cut(l),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ceph::parse::test_support::{fixture, fixture_str};
    use crate::ceph::parse::{config_value, histogram, ParseError};

    fn ok<'a>(daemon: &str, body: &'a str) -> Result<DaemonOutput<'a>, TellError> {
        Ok(DaemonOutput {
            daemon: daemon.into(),
            body,
        })
    }

    fn err(daemon: Option<&str>, message: &str) -> Result<DaemonOutput<'static>, TellError> {
        Err(TellError {
            daemon: daemon.map(str::to_string),
            message: message.into(),
        })
    }

    #[test]
    fn star_histogram_dump() {
        let out = fixture_str("healthy-idle/ceph_tell_osd.STAR_perf_histogram_dump_f_json.txt");
        let parts = split(&out);
        assert_eq!(parts.len(), 4);
        for (i, p) in parts.iter().enumerate() {
            let d = p.as_ref().unwrap();
            assert_eq!(d.daemon, format!("osd.{i}"));
            assert!(d.body.starts_with('{') && d.body.ends_with('}'));
            let h = histogram::parse_write_latency(d.body.as_bytes()).unwrap();
            assert_eq!(h.bounds.len(), 31);
            // Captured on freshly started OSDs: no client write yet.
            assert_eq!(h.counts.iter().sum::<u64>(), 0, "osd.{i}");
        }
        // osd.0's reply has the same axes as the single-target `tell osd.0` document (captured
        // at another moment, so the counts differ).
        let single = histogram::parse_write_latency(&fixture(
            "healthy-idle/ceph_tell_osd.0_perf_histogram_dump.json",
        ))
        .unwrap();
        let star0 =
            histogram::parse_write_latency(parts[0].as_ref().unwrap().body.as_bytes()).unwrap();
        assert_eq!(star0.bounds, single.bounds);
    }

    #[test]
    fn bodies_borrow_from_the_output() {
        let out = "\nosd.0: {\"a\":1}\n\nosd.1: {\"a\":2}\n";
        let parts = split(out);
        assert_eq!(
            parts,
            vec![ok("osd.0", "{\"a\":1}"), ok("osd.1", "{\"a\":2}")]
        );
        let body = parts[1].as_ref().unwrap().body;
        let range = out.as_bytes().as_ptr_range();
        assert!(
            range.contains(&body.as_ptr()),
            "body is a slice of the output, not a copy"
        );
    }

    #[test]
    fn nothing_in_nothing_out() {
        assert!(split("").is_empty());
        assert!(split("\n").is_empty());
        assert!(split("\n\n \n\t\r\n").is_empty());
    }

    /// A single-target `tell osd.N` prints the reply without a prefix: it cannot be attributed.
    #[test]
    fn single_target_output_is_unattributed() {
        let out = fixture_str("healthy-idle/ceph_tell_osd.0_perf_histogram_dump.json");
        let parts = split(&out);
        assert!(!parts.is_empty());
        for p in &parts {
            let e = p.as_ref().unwrap_err();
            assert_eq!(e.daemon, None);
            assert!(
                e.message.starts_with("output not attributed to a daemon: "),
                "{e}"
            );
            assert!(e.message.len() < 400, "messages are cut");
        }
    }

    /// `tell 'osd.*' config get` (16.2.15 `-f json`): one `{"KEY":"VALUE"}` per OSD.
    #[test]
    fn star_config_get() {
        let out = "\nosd.0: {\"osd_mclock_profile\":\"high_client_ops\"}\n\nosd.1: {\"osd_mclock_profile\":\"balanced\"}\n";
        let got: Vec<(String, String)> = split(out)
            .into_iter()
            .map(|p| {
                let d = p.unwrap();
                let v =
                    config_value::parse_tell_config_get(d.body.as_bytes(), "osd_mclock_profile")
                        .unwrap();
                (d.daemon, v)
            })
            .collect();
        assert_eq!(
            got,
            vec![
                ("osd.0".into(), "high_client_ops".into()),
                ("osd.1".into(), "balanced".into())
            ]
        );
    }

    /// With `-f json-pretty` a reply spans several lines (none blank).
    #[test]
    fn multi_line_bodies() {
        let out = "\nosd.0: {\n    \"a\": 1\n}\n\nosd.1: {\n    \"a\": [\n        2\n    ]\n}\n";
        let parts = split(out);
        assert_eq!(
            parts,
            vec![
                ok("osd.0", "{\n    \"a\": 1\n}"),
                ok("osd.1", "{\n    \"a\": [\n        2\n    ]\n}")
            ]
        );
        // A header right after a reply (no blank line) still starts a new reply.
        let parts = split("osd.0: {\"a\":1}\nosd.1: {\"a\":2}");
        assert_eq!(
            parts,
            vec![ok("osd.0", "{\"a\":1}"), ok("osd.1", "{\"a\":2}")]
        );
    }

    #[test]
    fn crlf_line_endings() {
        let parts = split("\r\nosd.0: {\"a\":1}\r\n\r\nosd.1: {\"a\":2}\r\n");
        assert_eq!(
            parts,
            vec![ok("osd.0", "{\"a\":1}"), ok("osd.1", "{\"a\":2}")]
        );
    }

    /// Errors on the same stream (e.g. stderr merged into stdout) are attributed when they
    /// name a daemon, and never swallowed into a neighbour's reply.
    #[test]
    fn errors_are_kept_and_attributed() {
        let out = "\nosd.0: {\"a\":1}\nError ENXIO: problem getting command descriptions from osd.1\n\nosd.2: Error ENOENT: no such thing\n\nosd.3: {\"a\":3}\n";
        assert_eq!(
            split(out),
            vec![
                ok("osd.0", "{\"a\":1}"),
                err(
                    Some("osd.1"),
                    "Error ENXIO: problem getting command descriptions from osd.1"
                ),
                err(Some("osd.2"), "Error ENOENT: no such thing"),
                ok("osd.3", "{\"a\":3}"),
            ]
        );
        let out = "some warning\n\nosd.0: {}\n";
        assert_eq!(
            split(out),
            vec![
                err(None, "output not attributed to a daemon: some warning"),
                ok("osd.0", "{}")
            ]
        );
        let out = "\n[errno 2] RADOS object not found (error calling conf_read_file)\n";
        assert_eq!(
            split(out)[0].as_ref().unwrap_err().to_string(),
            "output not attributed to a daemon: [errno 2] RADOS object not found (error calling conf_read_file)"
        );
        let e = split("Error EINVAL: osd.7 is not up")
            .remove(0)
            .unwrap_err();
        assert_eq!(e.daemon.as_deref(), Some("osd.7"));
        assert_eq!(e.to_string(), "osd.7: Error EINVAL: osd.7 is not up");
    }

    /// A reply that is not JSON (e.g. the CLI's `osd.N: <status message>` from stderr) is
    /// returned as a body: the caller's JSON parser rejects it and quotes it.
    #[test]
    fn non_json_bodies_are_left_to_the_caller() {
        let parts = split("\nosd.3: problem getting command descriptions from osd.3\n");
        assert_eq!(
            parts,
            vec![ok(
                "osd.3",
                "problem getting command descriptions from osd.3"
            )]
        );
        match histogram::parse_write_latency(parts[0].as_ref().unwrap().body.as_bytes()) {
            Err(ParseError::Json { message, .. }) => {
                assert!(message.contains("problem getting"), "{message}")
            }
            other => panic!("{other:?}"),
        }
        // An empty reply: an empty body, which parses as ParseError::Empty.
        let parts = split("\nosd.4:\n\nosd.5: \n");
        assert_eq!(parts, vec![ok("osd.4", ""), ok("osd.5", "")]);
        assert_eq!(histogram::parse_write_latency(b""), Err(ParseError::Empty));
    }

    #[test]
    fn header_recognition() {
        assert_eq!(header("osd.0: {}"), Some(("osd.0", 6)));
        assert_eq!(header("osd.12:"), Some(("osd.12", 7)));
        assert_eq!(header("mon.a: x"), Some(("mon.a", 6)));
        assert_eq!(
            header("mds.cephfs.host1.abcdef: {}"),
            Some(("mds.cephfs.host1.abcdef", 24))
        );
        for no in [
            "{\"osd.0\": 1}",
            "osd.0:{}",
            "osd.: x",
            "osd: x",
            "osdx.1: x",
            "OSD.1: x",
            "osd.1 : x",
            "osd.1.: x",
            " osd.1: x",
            "Error ENXIO: x",
            "osd.a b: x",
        ] {
            assert_eq!(header(no), None, "{no:?}");
        }
    }

    #[test]
    fn daemon_names_in_messages() {
        assert_eq!(
            daemon_in("problem getting command descriptions from osd.3").as_deref(),
            Some("osd.3")
        );
        assert_eq!(daemon_in("osd.3.").as_deref(), Some("osd.3"));
        assert_eq!(daemon_in("failed (osd.12): x").as_deref(), Some("osd.12"));
        assert_eq!(daemon_in("'mon.a' is down").as_deref(), Some("mon.a"));
        assert_eq!(daemon_in("no daemon here, e.g. none"), None);
        assert_eq!(daemon_in("osd.* is a glob"), None);
    }

    #[test]
    fn stderr_error_lines() {
        let err = "Error ENXIO: problem getting command descriptions from osd.1\nosd.1: problem getting command descriptions from osd.1\nWarning: something\n  Error EINTR: interrupted\n";
        assert_eq!(
            stderr_errors(err),
            vec![
                TellError {
                    daemon: Some("osd.1".into()),
                    message: "Error ENXIO: problem getting command descriptions from osd.1".into()
                },
                TellError {
                    daemon: None,
                    message: "Error EINTR: interrupted".into()
                },
            ]
        );
        assert!(stderr_errors("").is_empty());
    }

    /// Lab (16.2.15) `tell 'osd.*' ... -f json`: stdout and stderr of each capture, with the
    /// daemons expected to answer and the one that was down.
    fn lab(name: &str) -> (String, String) {
        (
            fixture_str(&format!("lab/{name}.out")),
            fixture_str(&format!("lab/{name}.err")),
        )
    }

    fn answered<'a>(parts: &[Result<DaemonOutput<'a>, TellError>]) -> Vec<&'a str> {
        parts
            .iter()
            .map(|p| p.as_ref().expect("stdout carries no error").body)
            .collect()
    }

    fn daemons(parts: &[Result<DaemonOutput<'_>, TellError>]) -> Vec<String> {
        parts
            .iter()
            .map(|p| p.as_ref().unwrap().daemon.clone())
            .collect()
    }

    #[test]
    fn lab_histogram_dump_all_up() {
        let (out, err) = lab("healthy.tell-osd-all-perf-histogram-dump");
        let parts = split(&out);
        assert_eq!(daemons(&parts), ["osd.0", "osd.1", "osd.2", "osd.3"]);
        for body in answered(&parts) {
            let h = histogram::parse_write_latency(body.as_bytes()).unwrap();
            assert_eq!(h.bounds.len(), 31);
        }
        assert!(err.is_empty() && stderr_errors(&err).is_empty());
    }

    /// A down OSD (16.2.15): on stdout only its blank line, nothing to attribute; on stderr
    /// `Error ENXIO: problem getting command descriptions from osd.N`; exit code 6. The others
    /// answer normally, in order.
    #[test]
    fn lab_histogram_dump_one_osd_down() {
        for (name, up, down) in [
            (
                "osd3-down.tell-osd-all-perf-histogram-dump",
                ["osd.0", "osd.1", "osd.2"],
                "osd.3",
            ),
            (
                "osd1-down.tell-osd-all-perf-histogram-dump",
                ["osd.0", "osd.2", "osd.3"],
                "osd.1",
            ),
        ] {
            let (out, err) = lab(name);
            let parts = split(&out);
            assert_eq!(daemons(&parts), up, "{name}");
            for body in answered(&parts) {
                histogram::parse_write_latency(body.as_bytes())
                    .unwrap_or_else(|e| panic!("{name}: {e}"));
            }
            assert_eq!(
                stderr_errors(&err),
                vec![TellError {
                    daemon: Some(down.into()),
                    message: format!(
                        "Error ENXIO: problem getting command descriptions from {down}"
                    ),
                }],
                "{name}"
            );
            // stdout and stderr merged (`2>&1`): the error is attributed too.
            let merged = format!("{err}{out}");
            let parts = split(&merged);
            assert_eq!(parts.len(), 4, "{name}");
            assert_eq!(
                parts[0].as_ref().unwrap_err().daemon.as_deref(),
                Some(down),
                "{name}"
            );
        }
    }

    /// A restart resets an OSD's counters: osd.3 was restarted just before `osd1-down.*`.
    #[test]
    fn lab_restart_resets_counters() {
        let total = |name: &str, daemon: &str| -> u64 {
            let (out, _) = lab(name);
            let parts = split(&out);
            let d = parts.iter().flatten().find(|d| d.daemon == daemon).unwrap();
            histogram::parse_write_latency(d.body.as_bytes())
                .unwrap()
                .counts
                .iter()
                .sum()
        };
        assert!(total("healthy.tell-osd-all-perf-histogram-dump", "osd.3") > 0);
        assert_eq!(
            total("osd1-down.tell-osd-all-perf-histogram-dump", "osd.3"),
            0
        );
        assert!(total("osd1-down.tell-osd-all-perf-histogram-dump", "osd.0") > 0);
    }

    #[test]
    fn lab_config_get_all() {
        let cases = [
            (
                "healthy.tell-osd-all-config-get-osd_mclock_profile",
                "osd_mclock_profile",
                "high_client_ops",
                4,
            ),
            (
                "healthy.tell-osd-all-config-get-osd_op_queue",
                "osd_op_queue",
                "mclock_scheduler",
                4,
            ),
            (
                "osd3-down.tell-osd-all-config-get-osd_mclock_profile",
                "osd_mclock_profile",
                "high_client_ops",
                3,
            ),
            (
                "osd3-down.tell-osd-all-config-get-osd_op_queue",
                "osd_op_queue",
                "mclock_scheduler",
                3,
            ),
            (
                "osd1-down.tell-osd-all-config-get-osd_mclock_profile",
                "osd_mclock_profile",
                "high_client_ops",
                3,
            ),
            // Profile switched at runtime with `ceph config set osd osd_mclock_profile ...`,
            // then `ceph config rm`: the OSDs report the new value each time.
            (
                "mclock-switch.2-tell-osd-all-config-get-osd_mclock_profile",
                "osd_mclock_profile",
                "high_client_ops",
                4,
            ),
            (
                "mclock-switch.6-tell-osd-all-config-get-osd_mclock_profile",
                "osd_mclock_profile",
                "high_recovery_ops",
                4,
            ),
            (
                "mclock-switch.9-tell-osd-all-config-get-osd_mclock_profile",
                "osd_mclock_profile",
                "high_client_ops",
                4,
            ),
        ];
        for (name, key, value, n) in cases {
            let (out, err) = lab(name);
            let parts = split(&out);
            assert_eq!(parts.len(), n, "{name}");
            for body in answered(&parts) {
                assert_eq!(
                    config_value::parse_tell_config_get(body.as_bytes(), key).as_deref(),
                    Ok(value),
                    "{name}"
                );
            }
            assert_eq!(stderr_errors(&err).len(), 4 - n, "{name}");
        }
    }

    /// Single target: the reply without prefix; a down or unknown OSD prints only the blank
    /// line on stdout (exit 6 ENXIO / 2 ENOENT) and the error on stderr.
    #[test]
    fn lab_single_target() {
        let (out, err) = lab("osd3-down.tell-osd0-perf-histogram-dump");
        histogram::parse_write_latency(out.as_bytes()).unwrap();
        assert!(err.is_empty());
        for (name, down, code) in [
            ("osd3-down.tell-osd3-perf-histogram-dump", "osd.3", "ENXIO"),
            ("error.tell-osd99-perf-histogram-dump", "osd.99", "ENOENT"),
        ] {
            let (out, err) = lab(name);
            assert_eq!(out, "\n", "{name}");
            assert_eq!(
                histogram::parse_write_latency(out.as_bytes()),
                Err(ParseError::Empty),
                "{name}"
            );
            assert!(split(&out).is_empty(), "{name}");
            let errors = stderr_errors(&err);
            assert_eq!(errors.len(), 1, "{name}");
            assert_eq!(errors[0].daemon.as_deref(), Some(down), "{name}");
            assert!(
                errors[0].message.starts_with(&format!("Error {code}: ")),
                "{name}"
            );
        }
    }

    #[test]
    fn long_messages_are_cut() {
        let long = format!("Error EIO: {}", "é".repeat(1000));
        let e = split(&long).remove(0).unwrap_err();
        assert!(e.message.ends_with("...") && e.message.chars().count() == MESSAGE_CHARS + 3);
    }
}
