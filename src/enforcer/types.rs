//! Plain types every part of the enforcer shares (kept apart so no two modules import each other).

use serde::Serialize;

pub const MCLOCK_PROFILE_KEY: &str = "osd_mclock_profile";
pub const MCLOCK_RECOVERY_LIM: &str = "osd_mclock_scheduler_background_recovery_lim";
pub const MCLOCK_RECOVERY_RES: &str = "osd_mclock_scheduler_background_recovery_res";
/// Backfill's mClock class from Quincy 17.2.6 on: rung 2 in shares limits it with recovery's.
pub const MCLOCK_BEST_EFFORT_LIM: &str = "osd_mclock_scheduler_background_best_effort_lim";
/// The keys rung 2 under mClock also tells the running OSDs (Pacific keeps a built-in profile's
/// values over the config database's until restart; newer releases take them either way, so
/// one way for all); going back unsets them there.
pub const MCLOCK_PUSHED: [&str; 3] = [
    MCLOCK_RECOVERY_LIM,
    MCLOCK_RECOVERY_RES,
    MCLOCK_BEST_EFFORT_LIM,
];
pub const RECOVERY_SLEEP: &str = "osd_recovery_sleep";
pub const RECOVERY_MAX_ACTIVE: &str = "osd_recovery_max_active";
/// How many recovery ops a PG starts at once (Pacific's default 1): the backfill lever's second
/// dimension (`LadderPolicy::ops_per_pg`).
pub const RECOVERY_MAX_SINGLE_START: &str = "osd_recovery_max_single_start";
/// Pacific's default for [`RECOVERY_MAX_SINGLE_START`], what an unset key means.
pub const SINGLE_START_DEFAULT: u32 = 1;

/// Every key rung 2 may set, for reading the config database (here, not in `ladder`, so that
/// `lever`, which `ladder` imports, can tell whether rung 2 is in force).
pub fn rung2_keys() -> [&'static str; 5] {
    [
        MCLOCK_RECOVERY_LIM,
        MCLOCK_RECOVERY_RES,
        MCLOCK_BEST_EFFORT_LIM,
        RECOVERY_SLEEP,
        RECOVERY_MAX_ACTIVE,
    ]
}

/// Backfills per OSD at once: a level of the level controller (honoured under mClock from
/// Quincy 17.2.6 on, with [`MCLOCK_OVERRIDE`]).
pub const MAX_BACKFILLS: &str = "osd_max_backfills";
/// Without it, mClock (Quincy 17.2.6 on) resets `osd_max_backfills` to its default.
pub const MCLOCK_OVERRIDE: &str = "osd_mclock_override_recovery_settings";

/// `osd_max_backfills` as the OSDs read it from the config database's value (unset, or not a
/// number: the default, 1).
pub fn backfills(value: Option<&str>) -> u32 {
    value.and_then(|v| v.trim().parse().ok()).unwrap_or(1)
}

/// Every key above rung 1 the enforcer may hold: rung 2's, the backfill lever's ops per PG and
/// the level controller's backfills. Each goes back to the operator's value when the rung that
/// set it no longer holds (SUSPEND, down to rung 1, the lever ended), but backfills raised
/// above the operator's (see `ladder::above_rung1_back`).
pub fn above_rung1_keys() -> [&'static str; 8] {
    let [a, b, c, d, e] = rung2_keys();
    [
        a,
        b,
        c,
        d,
        e,
        RECOVERY_MAX_SINGLE_START,
        MAX_BACKFILLS,
        MCLOCK_OVERRIDE,
    ]
}

/// Two config database values that mean the same: Ceph stores `0.1` as `0.100000`, so a text
/// comparison would read our own wpq lever as someone else's change.
pub fn same_setting(a: &Option<String>, b: &Option<String>) -> bool {
    match (a, b) {
        (None, None) => true,
        (Some(x), Some(y)) => crate::ceph::parse::config_value::same_value(x, y),
        _ => false,
    }
}

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
