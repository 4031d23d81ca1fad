//! Which program wrote a stored enforcer state, so that an older binary never drops what a
//! newer one recorded (issue 33). serde ignores the fields a type does not know: an older
//! binary would read a newer state, act on the part it knows and store it back without the
//! rest (a hold, an original). So every state is stored with `written_by` (the state format
//! and the program's version), and one is refused, with what to do, when:
//! - its format is newer than this binary's [`STATE_FORMAT`] (raise it with any change an older
//!   binary would get wrong: a new field that must not be dropped, a new meaning);
//! - it has the same format but fields this binary does not know, and was not written by an
//!   older version (a format bump forgotten): like `#[serde(deny_unknown_fields)]`, all the way
//!   down, but a state of an older version may still carry fields retired since.
//!
//! A state without `written_by` was written before it existed: read as before. Pure; on
//! `serde_json::Value`s.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The stored state's format. 1: the first recorded (issue 33).
pub const STATE_FORMAT: u32 = 1;

/// This program's version, as `written_by` records it.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// The key the stored state carries [`WrittenBy`] under.
pub const KEY: &str = "written_by";

/// Who wrote a stored state.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WrittenBy {
    pub format: u32,
    /// `ceph-recovery-budget` version.
    pub version: String,
}

impl WrittenBy {
    /// This binary.
    pub fn this() -> Self {
        WrittenBy {
            format: STATE_FORMAT,
            version: VERSION.to_string(),
        }
    }
}

/// Why a stored state is not for this binary.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NotOurs {
    #[error("was written by ceph-recovery-budget {} (state format {}), newer than this binary (ceph-recovery-budget {VERSION}, state format {STATE_FORMAT}): {ADVICE}", .by.version, .by.format)]
    Newer { by: WrittenBy },
    #[error("has fields this binary does not know ({}), written by ceph-recovery-budget {} (state format {}; this binary is {VERSION}): {ADVICE}", .fields.join(", "), .by.version, .by.format)]
    Unknown { by: WrittenBy, fields: Vec<String> },
    #[error("has a `written_by` that is not {{\"format\": N, \"version\": \"X.Y.Z\"}} ({detail}); it was not written by ceph-recovery-budget")]
    Bad { detail: String },
}

const ADVICE: &str = "it may record changes (held PGs, the operator's originals) this binary would drop when it stores the state again, so this binary changes nothing and never overwrites it. Run the newer version on every instance (finish the rollout); to go back to this version, stop the newer one with SIGTERM first (it hands everything back), then remove the stored state (the state file, or `rados -p POOL rm ceph-recovery-budget.lease`)";

/// `stored`'s writer; `None` when it has none (written before it was recorded).
fn written_by(stored: &Value) -> Result<Option<WrittenBy>, NotOurs> {
    match stored.get(KEY) {
        None => Ok(None),
        Some(v) => serde_json::from_value(v.clone())
            .map(Some)
            .map_err(|e| NotOurs::Bad {
                detail: e.to_string(),
            }),
    }
}

/// Before the state is parsed: refused when its format is newer (its fields may not even
/// parse here, and must not be read as something else).
pub fn check_format(stored: &Value) -> Result<(), NotOurs> {
    match written_by(stored)? {
        Some(by) if by.format > STATE_FORMAT => Err(NotOurs::Newer { by }),
        _ => Ok(()),
    }
}

/// Once parsed: `known` is the state as this binary stores it again; a field of `stored` not
/// in it would be dropped. Refused unless the writer is older than this binary (its extra
/// fields are ones retired since) or recorded no writer.
pub fn check_fields(stored: &Value, known: &Value) -> Result<(), NotOurs> {
    let Some(by) = written_by(stored)? else {
        return Ok(());
    };
    if older(&by.version, VERSION) {
        return Ok(());
    }
    let mut fields = Vec::new();
    unknown("", stored, known, &mut fields);
    fields.retain(|f| f != KEY);
    if fields.is_empty() {
        Ok(())
    } else {
        Err(NotOurs::Unknown { by, fields })
    }
}

/// The paths (`ladder.lever.x`) of the keys of `stored` that `known` lacks; within arrays,
/// element by element.
fn unknown(at: &str, stored: &Value, known: &Value, out: &mut Vec<String>) {
    match (stored, known) {
        (Value::Object(s), Value::Object(k)) => {
            for (key, v) in s {
                let path = if at.is_empty() {
                    key.clone()
                } else {
                    format!("{at}.{key}")
                };
                match k.get(key) {
                    Some(kv) => unknown(&path, v, kv, out),
                    // A null stored where this binary leaves the key out is the same value.
                    None if v.is_null() => {}
                    None => out.push(path),
                }
            }
        }
        (Value::Array(s), Value::Array(k)) => {
            for (i, (sv, kv)) in s.iter().zip(k).enumerate() {
                unknown(&format!("{at}[{i}]"), sv, kv, out);
            }
        }
        _ => {}
    }
}

/// `a` is an older version than `b` (`X.Y.Z`, a pre-release suffix ignored); a version that
/// does not parse is not older.
fn older(a: &str, b: &str) -> bool {
    fn parse(v: &str) -> Option<(u64, u64, u64)> {
        let core = v.split(['-', '+']).next()?;
        let mut it = core.split('.').map(|p| p.parse::<u64>().ok());
        Some((it.next()??, it.next()??, it.next()??))
    }
    matches!((parse(a), parse(b)), (Some(a), Some(b)) if a < b)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn by(format: u32, version: &str) -> Value {
        json!({"format": format, "version": version})
    }

    #[test]
    fn a_newer_format_is_refused_before_parsing_with_what_to_do() {
        let stored = json!({"written_by": by(STATE_FORMAT + 1, "9.0.0"), "ladder": "a shape we do not know"});
        let e = check_format(&stored).unwrap_err().to_string();
        assert!(
            e.starts_with(&format!("was written by ceph-recovery-budget 9.0.0 (state format {}), newer than this binary (ceph-recovery-budget {VERSION}, state format {STATE_FORMAT})", STATE_FORMAT + 1)),
            "{e}"
        );
        assert!(
            e.contains("never overwrites it") && e.contains("SIGTERM"),
            "{e}"
        );
        assert!(check_format(&json!({"written_by": by(STATE_FORMAT, "9.0.0")})).is_ok());
        assert!(
            check_format(&json!({"original": {}})).is_ok(),
            "no writer: before formats"
        );
        assert!(matches!(
            check_format(&json!({"written_by": "me"})),
            Err(NotOurs::Bad { .. })
        ));
    }

    #[test]
    fn unknown_fields_are_refused_unless_an_older_version_wrote_them() {
        let known = json!({"original": {}, "ladder": {"rung": 3, "lever": {"n": 2}}, "watch": [{"at": 1.0}]});
        let stored = |version: &str| {
            json!({"written_by": by(STATE_FORMAT, version), "original": {}, "ladder": {"rung": 3,
            "lever": {"n": 2, "ops": 8}}, "watch": [{"at": 1.0, "why": "x"}], "routes": [], "gone": null})
        };
        let e = check_fields(&stored("9.9.9"), &known).unwrap_err();
        assert_eq!(
            e,
            NotOurs::Unknown {
                by: WrittenBy {
                    format: STATE_FORMAT,
                    version: "9.9.9".into()
                },
                fields: vec![
                    "ladder.lever.ops".into(),
                    "routes".into(),
                    "watch[0].why".into()
                ]
            }
        );
        assert!(e
            .to_string()
            .starts_with("has fields this binary does not know (ladder.lever.ops, routes, watch[0].why), written by ceph-recovery-budget 9.9.9"));
        // The same version (a build of another commit) is no older: refused too.
        assert!(check_fields(&stored(VERSION), &known).is_err());
        // An older version's extra fields were retired since: read, and dropped.
        assert!(check_fields(&stored("0.0.1"), &known).is_ok());
        // Without a writer: as before.
        let mut legacy = stored("9.9.9");
        legacy.as_object_mut().map(|m| m.remove(KEY));
        assert!(check_fields(&legacy, &known).is_ok());
    }

    #[test]
    fn versions_compare_by_their_numbers() {
        assert!(older("0.1.0", "0.2.0"));
        assert!(older("0.9.9", "0.10.0"));
        assert!(older("1.2.3-rc1", "1.2.4"));
        assert!(!older("0.2.0", "0.2.0"));
        assert!(!older("1.0.0", "0.9.0"));
        assert!(!older("dev", "0.1.0"));
    }
}
