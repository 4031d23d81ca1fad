//! `ceph osd dump --format json`: the cluster-wide OSD map flags (`nobackfill`, `norecover`,
//! `noout`, ...). Only the flags are read; the rest of the map (every OSD, pool and blocklist
//! entry: large on a big cluster) is checked for syntax and skipped.
//!
//! `flags` is one comma-separated string (`"nobackfill,norecover,sortbitwise,..."`, all
//! releases since Luminous); Nautilus+ also print `flags_set`, the same as an array. The string
//! is read when present, the array otherwise (see `tests/fixtures/lab/*.osd-dump.out`).

use std::collections::BTreeSet;

use super::json::{self, Keep, Path};
use super::ParseError;

static KEEP_FLAGS: Keep = Keep {
    fields: Some(&[("flags", &Keep::ALL), ("flags_set", &Keep::ALL)]),
    each: None,
};

/// The OSD map flags set now, e.g. {"nobackfill", "sortbitwise"}.
pub fn flags(out: &[u8]) -> Result<BTreeSet<String>, ParseError> {
    let v = json::parse_kept(out, &KEEP_FLAGS)?;
    let root = Path::Root;
    let top = json::as_object(&v, &root)?;
    if let Some(s) = json::maybe_str(top, "flags", &root)? {
        return Ok(s
            .split(',')
            .map(str::trim)
            .filter(|f| !f.is_empty())
            .map(str::to_string)
            .collect());
    }
    let set_at = root.key("flags_set");
    match top.get("flags_set") {
        Some(list) => json::as_array(list, &set_at)?
            .iter()
            .enumerate()
            .map(|(i, f)| json::as_str(f, &set_at.index(i)).map(str::to_string))
            .collect(),
        None => Err(root
            .key("flags")
            .missing("a comma-separated string (or flags_set, an array)")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ceph::parse::test_support::{fixture, hostile_inputs};

    fn set(words: &[&str]) -> BTreeSet<String> {
        words.iter().map(|w| w.to_string()).collect()
    }

    #[test]
    fn the_lab_flags_with_and_without_the_pause() {
        let healthy = flags(&fixture("lab/healthy.osd-dump.out")).unwrap();
        assert_eq!(
            healthy,
            set(&[
                "sortbitwise",
                "recovery_deletes",
                "purged_snapdirs",
                "pglog_hardlimit"
            ])
        );
        let paused = flags(&fixture("lab/paused.osd-dump.out")).unwrap();
        assert!(paused.contains("nobackfill") && paused.contains("norecover"));
        assert_eq!(paused.len(), healthy.len() + 2);
    }

    #[test]
    fn the_array_is_read_when_the_string_is_absent() {
        assert_eq!(
            flags(br#"{"epoch":3,"flags_set":["noout","sortbitwise"]}"#).unwrap(),
            set(&["noout", "sortbitwise"])
        );
        // No flag at all is an empty string, not an error.
        assert!(flags(br#"{"flags":""}"#).unwrap().is_empty());
    }

    #[test]
    fn hostile_inputs_are_errors() {
        for (what, input) in hostile_inputs() {
            assert!(flags(&input).is_err(), "{what}");
        }
        let e = flags(br#"{"epoch":3}"#).unwrap_err().to_string();
        assert!(e.contains("flags"), "{e}");
        let e = flags(br#"{"flags":3}"#).unwrap_err().to_string();
        assert!(e.contains("flags"), "{e}");
        let e = flags(br#"{"flags_set":[1]}"#).unwrap_err().to_string();
        assert!(e.contains("flags_set[0]"), "{e}");
    }
}
