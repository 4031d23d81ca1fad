//! `ceph versions --format json`: which Ceph version each running OSD has. One object per daemon
//! type, each mapping the whole version line to a count (`tests/fixtures/lab/healthy.versions.out`):
//!
//! `{"osd": {"ceph version 16.2.15 (618f4408...) pacific (stable)": 4}, "mon": {...}, ...}`
//!
//! Only `osd` is read. The enforcer needs it because the mClock recovery limit of its rung 2 is a
//! number of IOPS on Pacific (16.2) and a fraction of the OSD's capacity from Quincy 17.2.6 on.

use std::collections::BTreeMap;

use super::json::{self, Keep, Path};
use super::ParseError;

static KEEP_OSD: Keep = Keep {
    fields: Some(&[("osd", &Keep::ALL)]),
    each: None,
};

/// One version some OSDs run.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
pub struct OsdVersion {
    /// `16.2.15` (what follows "ceph version"; a dev build may carry a suffix: `17.2.6-123-gabc`).
    pub version: String,
    /// The release name Ceph prints (`pacific`), empty when the line has none.
    pub release: String,
    /// The major number (16 for Pacific), None when `version` does not start with one.
    pub major: Option<u32>,
}

/// How many OSDs run each version. Empty when no OSD is up (`"osd": {}`).
pub fn osd_versions(out: &[u8]) -> Result<BTreeMap<OsdVersion, u64>, ParseError> {
    let v = json::parse_kept(out, &KEEP_OSD)?;
    let root = Path::Root;
    let top = json::as_object(&v, &root)?;
    let at = root.key("osd");
    let Some(osd) = top.get("osd") else {
        return Err(at.missing("an object of version lines and counts"));
    };
    json::as_object(osd, &at)?
        .iter()
        .map(|(line, count)| Ok((version_line(line), json::as_u64(count, &at.key(line))?)))
        .collect()
}

/// `ceph version 16.2.15 (618f...) pacific (stable)` -> 16.2.15, pacific, 16. Lenient: an
/// unexpected line keeps its text as the version, with no major (the enforcer then treats the
/// release as unknown).
pub fn version_line(line: &str) -> OsdVersion {
    let rest = line
        .trim()
        .strip_prefix("ceph version ")
        .unwrap_or(line.trim());
    let mut words = rest.split_whitespace();
    let version = words.next().unwrap_or_default().to_string();
    // The word after the "(sha1)": the release name, when the line has one.
    let release = rest
        .split_once(") ")
        .and_then(|(_, tail)| tail.split_whitespace().next())
        .filter(|w| !w.starts_with('('))
        .unwrap_or_default()
        .to_string();
    let major = version
        .split(['.', '-'])
        .next()
        .and_then(|m| m.parse::<u32>().ok());
    OsdVersion {
        version,
        release,
        major,
    }
}

/// What an mClock reservation or limit (`osd_mclock_scheduler_*_res` / `_lim`) means to an OSD.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum LimitUnit {
    /// IOPS per OSD: Pacific (16.2) and Quincy before 17.2.6.
    Iops,
    /// A fraction of the OSD's measured capacity (0.0 to 1.0): Quincy 17.2.6 on.
    Share,
}

impl LimitUnit {
    pub fn describe(self) -> &'static str {
        match self {
            LimitUnit::Iops => "IOPS per OSD",
            LimitUnit::Share => "a fraction of each OSD's capacity",
        }
    }
}

impl OsdVersion {
    /// The unit this OSD reads mClock limits in; None when its version cannot be read, or is a
    /// development build between Quincy's releases (`17.2.5-123-gabc` may already read
    /// shares: written IOPS, `res 1` would reserve its whole capacity for recovery).
    pub fn mclock_limit_unit(&self) -> Option<LimitUnit> {
        let (release, suffix) = match self.version.split_once('-') {
            Some((r, s)) => (r, !s.is_empty()),
            None => (self.version.as_str(), false),
        };
        let mut nums = release.split('.').map(|n| n.parse::<u32>().ok());
        let v = (nums.next()??, nums.next()??, nums.next()??);
        match v {
            v if v >= (17, 2, 6) => Some(LimitUnit::Share),
            (17, _, _) if suffix => None,
            _ => Some(LimitUnit::Iops),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ceph::parse::test_support::{fixture, hostile_inputs};

    #[test]
    fn quincy_17_2_6_and_later_read_mclock_limits_as_shares() {
        let unit = |v: &str| {
            version_line(&format!("ceph version {v} (abc) x (stable)")).mclock_limit_unit()
        };
        assert_eq!(unit("16.2.15"), Some(LimitUnit::Iops));
        assert_eq!(unit("17.2.5"), Some(LimitUnit::Iops));
        assert_eq!(unit("17.2.6"), Some(LimitUnit::Share));
        assert_eq!(unit("17.2.6-123-gabc"), Some(LimitUnit::Share));
        // A Quincy development build before 17.2.6 may read either: not guessed.
        assert_eq!(unit("17.2.5-123-gabc"), None);
        assert_eq!(unit("16.2.15-1-gdef"), Some(LimitUnit::Iops));
        assert_eq!(unit("18.2.7"), Some(LimitUnit::Share));
        assert_eq!(unit("20.2.0"), Some(LimitUnit::Share));
        assert_eq!(unit("garbage"), None);
        assert_eq!(unit("18"), None);
    }

    #[test]
    fn the_lab_runs_pacific_on_every_osd() {
        let v = osd_versions(&fixture("lab/healthy.versions.out")).unwrap();
        let pacific = OsdVersion {
            version: "16.2.15".into(),
            release: "pacific".into(),
            major: Some(16),
        };
        assert_eq!(v, BTreeMap::from([(pacific.clone(), 4)]));
        // A down OSD is not counted: only running daemons report a version.
        let v = osd_versions(&fixture("lab/osd3-down.versions.out")).unwrap();
        assert_eq!(v, BTreeMap::from([(pacific, 3)]));
    }

    #[test]
    fn a_cluster_in_the_middle_of_an_upgrade_lists_both_versions() {
        let out = br#"
{"mon":{"ceph version 17.2.6 (d7ff0d10654d2280e08f1ab989c7cdf3064446a5) quincy (stable)":3},"osd":{"ceph version 16.2.15 (618f440892089921c3e944a991122ddc44e60516) pacific (stable)":10,"ceph version 17.2.6 (d7ff0d10654d2280e08f1ab989c7cdf3064446a5) quincy (stable)":2},"mds":{},"overall":{}}"#;
        let v = osd_versions(out).unwrap();
        let got: Vec<(&str, &str, Option<u32>, u64)> = v
            .iter()
            .map(|(k, n)| (k.version.as_str(), k.release.as_str(), k.major, *n))
            .collect();
        assert_eq!(
            got,
            [
                ("16.2.15", "pacific", Some(16), 10),
                ("17.2.6", "quincy", Some(17), 2)
            ]
        );
    }

    #[test]
    fn no_osd_up_is_an_empty_map_and_a_missing_osd_key_an_error() {
        assert!(osd_versions(b"{\"mon\":{},\"osd\":{}}").unwrap().is_empty());
        let e = osd_versions(b"{\"mon\":{}}").unwrap_err().to_string();
        assert!(e.contains("osd"), "{e}");
        let e = osd_versions(b"{\"osd\":{\"ceph version 16.2.15 (x) pacific (stable)\":\"4\"}}")
            .unwrap_err()
            .to_string();
        assert!(e.contains("osd"), "{e}");
    }

    #[test]
    fn odd_version_lines_keep_their_text_and_have_no_major() {
        let dev = version_line("ceph version 18.0.0-1234-gabcdef (abcdef) reef (dev)");
        assert_eq!(
            (dev.version.as_str(), dev.release.as_str(), dev.major),
            ("18.0.0-1234-gabcdef", "reef", Some(18))
        );
        let odd = version_line("something else");
        assert_eq!(odd.major, None);
        assert_eq!(version_line("ceph version 16.2.15").release, "");
    }

    #[test]
    fn hostile_inputs_are_errors_not_panics() {
        for (what, input) in hostile_inputs() {
            assert!(osd_versions(&input).is_err(), "{what}");
        }
    }
}
