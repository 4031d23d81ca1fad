//! Configuration values.
//!
//! `ceph config get WHO KEY` and `ceph config show osd.N KEY` ignore `--format json` (16.2.15)
//! and print the bare value, after a blank line when `-f json` was given; newer releases may
//! honour `-f json` and print a JSON string. `ceph tell osd.N config get KEY -f json` prints
//! `{"KEY":"VALUE"}`.

use serde_json::Value;

use super::json::{self, Path};
use super::ParseError;

/// The value printed by `ceph config get` / `ceph config show osd.N KEY`: the trimmed text, or
/// the unquoted string if it is a JSON string. Empty output is [`ParseError::Empty`]; more than
/// one line is an error (a value is one line; several lines are something else, e.g. a message).
pub fn parse_plain(out: &[u8]) -> Result<String, ParseError> {
    let text = std::str::from_utf8(out).map_err(|e| ParseError::Shape {
        path: "(output)".into(),
        expected: format!(
            "expected UTF-8 text, found an invalid byte at offset {}",
            e.valid_up_to()
        ),
    })?;
    let value = text.trim();
    if value.is_empty() {
        return Err(ParseError::Empty);
    }
    if value.contains('\n') {
        return Err(ParseError::Shape {
            path: "(output)".into(),
            expected: format!(
                "expected a single-line value, found {} lines starting with {}",
                value.lines().count(),
                json::excerpt(value.as_bytes())
            ),
        });
    }
    if is_ceph_error(value) {
        return Err(ParseError::Shape {
            path: "(output)".into(),
            expected: format!(
                "expected a value, found a Ceph error: {}",
                json::excerpt(value.as_bytes())
            ),
        });
    }
    if value.starts_with('"') {
        return match json::parse_value(out)? {
            Value::String(s) => Ok(s),
            other => Err(Path::Root.mismatch("a string", &other)),
        };
    }
    Ok(value.to_string())
}

/// `Error EINVAL: ...`, `Error ENOENT: ...` (`Error Unknown: ...` for an errno Python cannot
/// name): how the CLI reports a failed command.
pub(crate) fn is_ceph_error(line: &str) -> bool {
    let Some(rest) = line.strip_prefix("Error ") else {
        return false;
    };
    let code_len = rest
        .bytes()
        .take_while(|b| b.is_ascii_alphanumeric())
        .count();
    code_len > 0 && rest[code_len..].starts_with(':')
}

/// The value of `key` in the `{"KEY":"VALUE"}` printed by `ceph tell osd.N config get KEY -f
/// json`. A number or boolean is rendered as text (Ceph prints strings, but be lenient); a
/// missing key is a Shape error. The key is also looked up with `-` and `_` swapped, as Ceph
/// accepts both spellings on input.
pub fn parse_tell_config_get(body: &[u8], key: &str) -> Result<String, ParseError> {
    let v = json::parse_value(body)?;
    let root = Path::Root;
    let obj = json::as_object(&v, &root)?;
    let (found_key, value) = match obj.get_key_value(key) {
        Some(kv) => kv,
        None => {
            let alt = if key.contains('-') {
                key.replace('-', "_")
            } else {
                key.replace('_', "-")
            };
            match obj.get_key_value(alt.as_str()) {
                Some(kv) => kv,
                None => {
                    let keys: Vec<&str> = obj.keys().take(5).map(String::as_str).collect();
                    return Err(root.key(key).error(format!(
                        "expected the option's value, found nothing (keys present: {keys:?})"
                    )));
                }
            }
        }
    };
    let at = root.key(found_key);
    match value {
        Value::String(s) => Ok(s.clone()),
        Value::Number(n) => Ok(n.to_string()),
        Value::Bool(b) => Ok(b.to_string()),
        other => Err(at.mismatch("a string", other)),
    }
}

/// Two spellings of one value: equal as text, or as numbers (`0.10` and `0.1`), or as booleans.
/// Ceph stores `ceph config set osd osd_recovery_sleep_hdd 0.10` as `0.100000` (seen on 16.2.15).
pub fn same_value(a: &str, b: &str) -> bool {
    let (a, b) = (a.trim(), b.trim());
    if a == b {
        return true;
    }
    match (a.parse::<f64>(), b.parse::<f64>()) {
        (Ok(x), Ok(y)) => x == y,
        _ => matches!(
            (bool_of(a), bool_of(b)),
            (Some(x), Some(y)) if x == y
        ),
    }
}

fn bool_of(s: &str) -> Option<bool> {
    match s.to_ascii_lowercase().as_str() {
        "true" | "yes" | "on" | "1" => Some(true),
        "false" | "no" | "off" | "0" => Some(false),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ceph::parse::test_support::{fixture, hostile_inputs, STATES};

    #[test]
    fn config_get_and_show_every_state() {
        for state in STATES {
            let expected = if *state == "rebalance" {
                "balanced"
            } else {
                "high_client_ops"
            };
            for f in [
                // `-f json`: a blank line, then the plain value.
                "ceph_config_get_osd_osd_mclock_profile.json",
                "ceph_config_get_osd_osd_mclock_profile.txt",
                "ceph_config_show_osd.0_osd_mclock_profile.txt",
            ] {
                let rel = format!("{state}/{f}");
                assert_eq!(
                    parse_plain(&fixture(&rel)).as_deref(),
                    Ok(expected),
                    "{rel}"
                );
            }
        }
        assert!(
            fixture("healthy-idle/ceph_config_get_osd_osd_mclock_profile.json").starts_with(b"\n")
        );
    }

    #[test]
    fn json_string_is_unquoted() {
        // Releases that honour `-f json` print a JSON string.
        assert_eq!(
            parse_plain(b"\n\"high_recovery_ops\"\n").as_deref(),
            Ok("high_recovery_ops")
        );
        assert_eq!(
            parse_plain(b"\"a \\\"b\\\" \\u00e9\"").as_deref(),
            Ok("a \"b\" \u{e9}")
        );
        assert_eq!(parse_plain(b"\"\"").as_deref(), Ok(""));
        assert!(matches!(
            parse_plain(b"\"unterminated"),
            Err(ParseError::Json { .. })
        ));
    }

    #[test]
    fn plain_values_of_other_types() {
        assert_eq!(parse_plain(b"1000\n").as_deref(), Ok("1000"));
        assert_eq!(parse_plain(b"\n0.000000\n").as_deref(), Ok("0.000000"));
        assert_eq!(parse_plain(b"true").as_deref(), Ok("true"));
        assert_eq!(
            parse_plain(b"  /var/run/ceph/$cluster-$name.asok \r\n").as_deref(),
            Ok("/var/run/ceph/$cluster-$name.asok")
        );
    }

    #[test]
    fn plain_errors() {
        assert_eq!(parse_plain(b""), Err(ParseError::Empty));
        assert_eq!(parse_plain(b"\n \n\t"), Err(ParseError::Empty));
        let e = parse_plain(b"line one\nline two\n")
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "(output): expected a single-line value, found 2 lines starting with \"line one\""
        );
        assert!(matches!(
            parse_plain(b"\xff\xfe"),
            Err(ParseError::Shape { .. })
        ));
        assert!(parse_plain(b"<html>\n<body>502</body>\n</html>").is_err());
        assert_eq!(
            parse_plain(b"Error ENOENT: unrecognized key 'osd_foo'\n").unwrap_err().to_string(),
            "(output): expected a value, found a Ceph error: \"Error ENOENT: unrecognized key 'osd_foo'\""
        );
        for yes in [
            "Error EINVAL: x",
            "Error E2BIG: x",
            "Error Unknown: x",
            "Error ENXIO:",
        ] {
            assert!(is_ceph_error(yes), "{yes}");
        }
        for no in [
            "Errors are fine",
            "Error EINVAL x",
            "Error : x",
            "error EINVAL: x",
            "Error",
        ] {
            assert!(!is_ceph_error(no), "{no}");
        }
    }

    #[test]
    fn tell_config_get() {
        // What `ceph tell osd.0 config get osd_mclock_profile -f json` prints (16.2.15).
        let body = b"\n{\"osd_mclock_profile\":\"high_client_ops\"}\n";
        assert_eq!(
            parse_tell_config_get(body, "osd_mclock_profile").as_deref(),
            Ok("high_client_ops")
        );
        assert_eq!(
            parse_tell_config_get(body, "osd-mclock-profile").as_deref(),
            Ok("high_client_ops")
        );
        let body = b"{\"osd-max-backfills\":\"1000\"}";
        assert_eq!(
            parse_tell_config_get(body, "osd_max_backfills").as_deref(),
            Ok("1000")
        );
        assert_eq!(
            parse_tell_config_get(b"{\"osd_max_backfills\":1000}", "osd_max_backfills").as_deref(),
            Ok("1000")
        );
        assert_eq!(
            parse_tell_config_get(b"{\"a\":true}", "a").as_deref(),
            Ok("true")
        );
    }

    #[test]
    fn tell_config_get_errors() {
        assert_eq!(
            parse_tell_config_get(b"{\"osd_max_backfills\":\"1\"}", "osd_mclock_profile").unwrap_err().to_string(),
            "osd_mclock_profile: expected the option's value, found nothing (keys present: [\"osd_max_backfills\"])"
        );
        assert_eq!(
            parse_tell_config_get(b"{\"k\":null}", "k")
                .unwrap_err()
                .to_string(),
            "k: expected a string, found null"
        );
        assert_eq!(
            parse_tell_config_get(b"{\"k\":{}}", "k")
                .unwrap_err()
                .to_string(),
            "k: expected a string, found an object"
        );
        assert_eq!(
            parse_tell_config_get(b"[\"k\"]", "k")
                .unwrap_err()
                .to_string(),
            "(top level): expected an object, found an array"
        );
        for (what, input) in hostile_inputs() {
            assert!(
                parse_tell_config_get(&input, "osd_mclock_profile").is_err(),
                "{what} parsed"
            );
        }
        assert_eq!(parse_tell_config_get(b"\n", "k"), Err(ParseError::Empty));
        assert!(matches!(
            parse_tell_config_get(b"{\"osd_mclock_profile\":\"high_cl", "osd_mclock_profile"),
            Err(ParseError::Json { .. })
        ));
    }

    /// Live lab (16.2.15): `ceph --format json config get/show` print a blank line then the plain
    /// value; `ceph config show` without `--format` prints it without the blank line.
    #[test]
    fn lab_plain_values() {
        let cases = [
            (
                "healthy.config-get-osd-osd_mclock_profile",
                "high_client_ops",
            ),
            (
                "osd3-down.config-get-osd-osd_mclock_profile",
                "high_client_ops",
            ),
            // The mon's config database (default `wpq`), NOT what the OSDs run: they read
            // `osd op queue = mclock_scheduler` from ceph.conf (see `tell 'osd.*' config get`).
            ("healthy.config-get-osd-osd_op_queue", "wpq"),
            ("osd3-down.config-get-osd-osd_op_queue", "wpq"),
            (
                "mclock-switch.3-config-show-osd.0-osd_mclock_profile",
                "high_client_ops",
            ),
            (
                "mclock-switch.4-config-get-osd-osd_mclock_profile",
                "high_client_ops",
            ),
            (
                "mclock-switch.7-config-show-osd.0-osd_mclock_profile",
                "high_recovery_ops",
            ),
            (
                "mclock-switch.10-config-show-osd.0-osd_mclock_profile-json",
                "high_client_ops",
            ),
        ];
        for (name, want) in cases {
            let rel = format!("lab/{name}.out");
            assert_eq!(parse_plain(&fixture(&rel)).as_deref(), Ok(want), "{rel}");
        }
        // `config set` / `config rm` print nothing but (with --format json) the blank line.
        for name in [
            "mclock-switch.1-config-set-osd_mclock_profile-high_client_ops",
            "mclock-switch.8-config-rm-osd_mclock_profile",
        ] {
            assert_eq!(
                parse_plain(&fixture(&format!("lab/{name}.out"))),
                Err(ParseError::Empty),
                "{name}"
            );
        }
    }
}
