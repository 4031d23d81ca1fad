//! Plain types every part of the enforcer shares (kept apart so no two modules import each other).

use serde::Serialize;

/// Unix time in seconds. Pure code gets it passed in; only the clock adapter reads it.
pub type Time = f64;

/// One setting to change: `to: None` means `ceph config rm osd KEY`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Change {
    pub key: String,
    pub from: Option<String>,
    pub to: Option<String>,
}

impl Change {
    pub fn describe(&self) -> String {
        format!(
            "{} {} -> {}",
            self.key,
            self.from.as_deref().unwrap_or("(unset)"),
            self.to.as_deref().unwrap_or("(unset)")
        )
    }
}

/// A command Ceph refused with EACCES, and the grant it needs (`crate::ceph::caps`).
#[derive(Debug, Clone, PartialEq)]
pub struct Refused {
    pub command: String,
    pub cap: String,
}
