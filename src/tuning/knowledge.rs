//! What an OSD setting really does under the op scheduler the OSDs run.
//!
//! `ceph config set osd NAME VALUE` succeeds for options the OSDs then ignore or overwrite: the
//! mClock scheduler forces the recovery/scrub/trim sleeps to 0 and takes over the recovery limits,
//! and under `wpq` the `osd_mclock_*` options are never read. [`ineffective`] says so, with the
//! fix, before anyone tunes a knob that is not connected to anything.
//!
//! Sources, checked for Pacific (16.2.15, the lab's release) and for current releases:
//! * mClock Config Reference, <https://docs.ceph.com/en/latest/rados/configuration/mclock-config-ref/>
//!   (and its Pacific edition, <https://docs.ceph.com/en/pacific/rados/configuration/mclock-config-ref/>);
//! * ceph/ceph PR #41125 (Pacific backport of #41004, "Override recovery, backfill and sleep related
//!   config options"), and `OSD::maybe_override_options_for_qos` in the 16.2.15 `ceph-osd` binary:
//!   it tests `osd_op_queue` only, never `osd_mclock_profile`, so in Pacific the overrides hold
//!   under the `custom` profile too, whatever the Pacific docs' layout suggests;
//! * `OSD::maybe_override_options_for_qos` in current `src/osd/OSD.cc` (Quincy/Reef and later): a
//!   runtime change of a recovery limit without `osd_mclock_override_recovery_settings` is removed
//!   from the `osd` and `osd.N` config sections with a cluster-log warning;
//! * the lab (`/work/shared/ceph-lab/NOTES.md`): a built-in profile shows `osd_max_backfills` and
//!   `osd_recovery_max_active` at 1000 and `osd_recovery_sleep` at 0, source `override`.

use crate::ceph::parse::config_dump::ConfigEntry;

/// What is known about the OSDs' op scheduler; `None` = unknown.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct SchedulerFacts {
    /// `osd_op_queue`: "wpq", "mclock_scheduler", or None when unknown.
    pub op_queue: Option<String>,
    /// `osd_mclock_profile` (e.g. "balanced", "high_client_ops", "high_recovery_ops", "custom").
    pub mclock_profile: Option<String>,
    /// `osd_mclock_override_recovery_settings` (Reef/Quincy backports; absent in Pacific => false).
    pub override_recovery_settings: bool,
    /// The major Ceph version every OSD runs (16 Pacific, 17 Quincy, 18 Reef, 19 Squid, 20
    /// Tentacle), from `ceph versions`: the advice is then stated for that release alone. None
    /// when unknown (a saved dump) or when the OSDs run different ones (mid-upgrade).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub osd_release: Option<u32>,
}

impl SchedulerFacts {
    /// `Some(true)` for `mclock_scheduler`, `Some(false)` for `wpq`, `None` when unknown (or
    /// `debug_random`, which picks one of the two at OSD start).
    pub fn is_mclock(&self) -> Option<bool> {
        match self.op_queue.as_deref().map(str::trim) {
            Some("mclock_scheduler") => Some(true),
            Some("wpq") => Some(false),
            _ => None,
        }
    }
}

/// Why a setting does nothing, and the command that resolves it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Ineffective {
    pub reason: String,
    pub fix: String,
}

/// Why `ceph config set osd NAME VALUE` would do nothing under these facts, with the fix, or None
/// when the setting takes effect (or nothing is known against it). Accepts option names with `-`
/// or `_`.
pub fn ineffective(name: &str, facts: &SchedulerFacts) -> Option<Ineffective> {
    explain(name, facts, "osd", None)
}

/// [`ineffective`] for an entry already in the config database: `who` is the `ceph config`
/// target (`osd`, `osd.3`, `global`, `osd/class:hdd`) used in the reason and the fix, `value` the
/// value it sets.
pub(crate) fn explain(
    name: &str,
    facts: &SchedulerFacts,
    who: &str,
    value: Option<&str>,
) -> Option<Ineffective> {
    let name = normalize(name);
    let class = classify(&name)?;
    let mclock = facts.is_mclock();
    let subject = match value {
        Some(v) => format!("{name} = {v} (section {who})"),
        None => name.clone(),
    };
    // Unknown scheduler: the mClock rules are stated conditionally, the wpq ones not at all
    // (each is the default of a supported release, so neither can be assumed).
    let hedge = if mclock.is_none() {
        "If the OSDs run mclock_scheduler (the default since Quincy; Pacific's default is wpq), "
    } else {
        ""
    };
    let rm = format!("ceph config rm {who} {name}");
    match class {
        // "Sleep Options": disabled (set to 0) "if any mClock profile (including custom) is
        // active" — https://docs.ceph.com/en/latest/rados/configuration/mclock-config-ref/#sleep-options
        // Same list in Pacific (https://docs.ceph.com/en/pacific/rados/configuration/mclock-config-ref/),
        // plus osd_recovery_sleep_degraded* in Reef and later.
        Class::Sleep if mclock != Some(false) => Some(Ineffective {
            reason: sentence(
                hedge,
                &format!(
                    "{subject} has no effect: mclock_scheduler forces every recovery, scrub, \
                     snap-trim and delete sleep to 0 under every profile, custom included, so it \
                     neither slows recovery nor protects clients. Steer recovery with \
                     osd_mclock_profile instead (e.g. high_client_ops)."
                ),
            ),
            fix: rm,
        }),
        // "Recovery/Backfill Options" are "overridden to mClock defaults" unless
        // osd_mclock_override_recovery_settings is true —
        // https://docs.ceph.com/en/latest/rados/configuration/mclock-config-ref/#recovery-backfill-options
        // and #steps-to-modify-mclock-max-backfills-recovery-limits. Pacific has no such option;
        // its OSDs set these to 1000 whenever mclock_scheduler runs (PR #41125; lab: source
        // `override`).
        //
        // An entry already in the database is murkier on Quincy/Reef: the OSD deletes rejected
        // changes from the `osd` and `osd.N` sections, and at start-up keeps whatever the database
        // holds (`set_val_default`), so a surviving entry may be in force. Only Pacific is certain.
        // Pacific and mclock_scheduler, both known: the switch does not exist there (`config
        // set` of it is refused), so the fix is the entry's removal. Not with the scheduler
        // unknown: Pacific's default is wpq, which honours the limit, and removing it would
        // take away a limit that works.
        Class::RecoveryLimit if mclock == Some(true) && facts.osd_release == Some(16) => {
            let verb = if value.is_some() { "does" } else { "would" };
            Some(Ineffective {
                reason: sentence(
                    hedge,
                    &format!(
                        "{subject} {verb} not limit recovery: Pacific (16.x), which these OSDs \
                         run, forces it to 1000 under mclock_scheduler whatever the profile, \
                         custom included. Steer recovery with osd_mclock_profile instead."
                    ),
                ),
                fix: rm,
            })
        }
        // Reef and later, known: the OSDs honour the limit only with the switch on.
        Class::RecoveryLimit
            if mclock != Some(false)
                && !facts.override_recovery_settings
                && facts.osd_release.is_some_and(|r| r >= 18) =>
        {
            let release = release_name(facts.osd_release);
            let statement = if value.is_some() {
                format!(
                    "{subject} may not limit recovery: {release}, which these OSDs run, honours \
                     a change only while osd_mclock_override_recovery_settings is true (an entry \
                     from before the switch was off may still be in force, one set since is \
                     deleted by the OSDs). Set the switch so that it counts."
                )
            } else {
                format!(
                    "{subject} would not limit recovery: {release}, which these OSDs run, resets \
                     it to the mClock default and deletes it from the config database unless \
                     osd_mclock_override_recovery_settings is true."
                )
            };
            Some(Ineffective {
                reason: sentence(hedge, &statement),
                fix: "ceph config set osd osd_mclock_override_recovery_settings true".to_string(),
            })
        }
        // Release unknown (or Quincy, whose 17.2.0-17.2.5 had no switch): both ways.
        Class::RecoveryLimit if mclock != Some(false) && !facts.override_recovery_settings => {
            let statement = if value.is_some() {
                format!(
                    "{subject} may not limit recovery: Pacific (16.x) forces it to 1000 under \
                     mclock_scheduler whatever the profile, custom included, and Quincy/Reef and \
                     later honour a change only while osd_mclock_override_recovery_settings is \
                     true. On Pacific remove it (`{rm}`) and steer recovery with \
                     osd_mclock_profile; on Quincy/Reef set the switch so that it counts."
                )
            } else {
                format!(
                    "{subject} would not limit recovery: Quincy/Reef and later reset it to the \
                     mClock default and delete it from the config database unless \
                     osd_mclock_override_recovery_settings is true, and Pacific (16.x), which has \
                     no such switch, forces it to 1000 under every profile, custom included. On \
                     Pacific steer recovery with osd_mclock_profile instead."
                )
            };
            Some(Ineffective {
                reason: sentence(hedge, &statement),
                fix: "ceph config set osd osd_mclock_override_recovery_settings true".to_string(),
            })
        }
        // Under wpq the OSDs never read mClock options ("only considered for osd_op_queue =
        // mclock_scheduler") — https://docs.ceph.com/en/latest/rados/configuration/mclock-config-ref/
        Class::MclockQos | Class::MclockOther if mclock == Some(false) => Some(Ineffective {
            reason: format!(
                "{subject} has no effect: the OSDs run osd_op_queue wpq, and mClock options act \
                 only under mclock_scheduler (switching osd_op_queue takes an OSD restart)."
            ),
            fix: rm,
        }),
        // Built-in profiles compute reservation/weight/limit themselves: "the following mclock
        // config parameters cannot be modified when using any of the built-in profiles" —
        // https://docs.ceph.com/en/latest/rados/configuration/mclock-config-ref/#mclock-config-options
        // (same list in the Pacific edition).
        Class::MclockQos if !is_custom(facts) => {
            let profile = match facts.mclock_profile.as_deref().map(str::trim) {
                Some(p) if !p.is_empty() => format!("the built-in mClock profile {p}"),
                _ => match facts.osd_release {
                    Some(16) => {
                        "a built-in mClock profile (Pacific's default: high_client_ops)".to_string()
                    }
                    Some(r) if r >= 17 => format!(
                        "a built-in mClock profile ({}'s default: balanced)",
                        release_name(Some(r))
                    ),
                    _ => "a built-in mClock profile (the default: high_client_ops on Pacific, \
                          balanced on Quincy and later)"
                        .to_string(),
                },
            };
            Some(Ineffective {
                reason: sentence(
                    hedge,
                    &format!(
                        "{subject} has no effect: under {profile} the OSDs compute client and \
                         background reservations, weights and limits themselves and revert this \
                         option; it counts only under osd_mclock_profile custom."
                    ),
                ),
                fix: rm,
            })
        }
        _ => None,
    }
}

/// `Reef (18.x)` for 18, `Ceph 21` past the names known here, `an unknown release` for None.
pub fn release_name(major: Option<u32>) -> String {
    let name = match major {
        Some(15) => "Octopus",
        Some(16) => "Pacific",
        Some(17) => "Quincy",
        Some(18) => "Reef",
        Some(19) => "Squid",
        Some(20) => "Tentacle",
        Some(m) => return format!("Ceph {m}"),
        None => return "an unknown release".to_string(),
    };
    format!("{name} ({}.x)", major.unwrap_or_default())
}

/// Facts from a `ceph config dump`: osd_op_queue / osd_mclock_profile /
/// osd_mclock_override_recovery_settings from the `osd` or `global` section (section `osd` beats
/// `global`; entries with a mask or for one daemon `osd.N` are ignored for the cluster-wide fact).
/// op_queue None when not in the dump.
///
/// The dump only knows the config database: a value pinned in an OSD's ceph.conf wins over it and
/// is invisible here (the lab's OSDs run mclock_scheduler from ceph.conf while the database says
/// nothing), so facts asked of the OSDs themselves are better when available.
pub fn facts_from_dump(entries: &[ConfigEntry]) -> SchedulerFacts {
    let cluster_wide = |wanted: &str| -> Option<String> {
        let mut osd = None;
        let mut global = None;
        for e in entries {
            if !e.mask.trim().is_empty() || normalize(&e.name) != wanted {
                continue;
            }
            let value = e.value.trim();
            if value.is_empty() {
                continue;
            }
            // Later entries win within a section, as a later `config set` replaces an earlier one.
            match e.section.as_str() {
                "osd" => osd = Some(value.to_string()),
                "global" => global = Some(value.to_string()),
                _ => {}
            }
        }
        osd.or(global)
    };
    SchedulerFacts {
        op_queue: cluster_wide("osd_op_queue"),
        mclock_profile: cluster_wide("osd_mclock_profile"),
        override_recovery_settings: cluster_wide("osd_mclock_override_recovery_settings")
            .is_some_and(|v| parse_bool(&v)),
        // The dump does not say which release runs.
        osd_release: None,
    }
}

/// Ceph option names are lower case with `_`; the CLI also accepts `-`.
pub(crate) fn normalize(name: &str) -> String {
    name.trim().to_ascii_lowercase().replace('-', "_")
}

/// Ceph's boolean spellings.
fn parse_bool(v: &str) -> bool {
    matches!(
        v.trim().to_ascii_lowercase().as_str(),
        "true" | "1" | "yes" | "on"
    )
}

fn is_custom(facts: &SchedulerFacts) -> bool {
    facts.mclock_profile.as_deref().map(str::trim) == Some("custom")
}

/// Prefixes the statement (which starts with the option name) with the hedge, if any.
fn sentence(hedge: &str, statement: &str) -> String {
    if hedge.is_empty() {
        statement.to_string()
    } else {
        format!("{hedge}{statement}")
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Class {
    /// Forced to 0 under mClock.
    Sleep,
    /// Overridden under mClock unless osd_mclock_override_recovery_settings.
    RecoveryLimit,
    /// mClock reservation/weight/limit: only honoured under the custom profile.
    MclockQos,
    /// Any other `osd_mclock_*` option: read only under mclock_scheduler.
    MclockOther,
}

fn classify(name: &str) -> Option<Class> {
    const SLEEPS: &[&str] = &[
        "osd_recovery_sleep",
        "osd_recovery_sleep_degraded",
        "osd_snap_trim_sleep",
        "osd_delete_sleep",
    ];
    const LIMITS: &[&str] = &[
        "osd_max_backfills",
        "osd_recovery_max_active",
        "osd_recovery_max_active_hdd",
        "osd_recovery_max_active_ssd",
    ];
    let device_variant = |base: &str| {
        name == base
            || name
                .strip_prefix(base)
                .is_some_and(|rest| matches!(rest, "_hdd" | "_ssd" | "_hybrid"))
    };
    if name == "osd_scrub_sleep" || SLEEPS.iter().any(|b| device_variant(b)) {
        return Some(Class::Sleep);
    }
    if LIMITS.contains(&name) {
        return Some(Class::RecoveryLimit);
    }
    if let Some(rest) = name.strip_prefix("osd_mclock_scheduler_") {
        let qos = ["client", "background_recovery", "background_best_effort"]
            .iter()
            .any(|class| {
                rest.strip_prefix(class)
                    .is_some_and(|p| matches!(p, "_res" | "_wgt" | "_lim"))
            });
        if qos {
            return Some(Class::MclockQos);
        }
    }
    if name.starts_with("osd_mclock_") {
        return Some(Class::MclockOther);
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts(op_queue: Option<&str>, profile: Option<&str>, override_: bool) -> SchedulerFacts {
        SchedulerFacts {
            op_queue: op_queue.map(str::to_string),
            mclock_profile: profile.map(str::to_string),
            override_recovery_settings: override_,
            osd_release: None,
        }
    }

    fn mclock() -> SchedulerFacts {
        facts(Some("mclock_scheduler"), Some("balanced"), false)
    }

    fn wpq() -> SchedulerFacts {
        facts(Some("wpq"), None, false)
    }

    fn unknown() -> SchedulerFacts {
        SchedulerFacts::default()
    }

    #[test]
    fn is_mclock_reads_the_queue_name() {
        assert_eq!(
            facts(Some("mclock_scheduler"), None, false).is_mclock(),
            Some(true)
        );
        assert_eq!(facts(Some(" wpq\n"), None, false).is_mclock(), Some(false));
        assert_eq!(facts(Some("debug_random"), None, false).is_mclock(), None);
        assert_eq!(unknown().is_mclock(), None);
    }

    #[test]
    fn rule_table() {
        // (option, facts, ineffective?)
        let cases: Vec<(&str, SchedulerFacts, bool)> = vec![
            // Sleeps: forced to 0 under mClock, any profile; honoured under wpq.
            ("osd_recovery_sleep", mclock(), true),
            ("osd_recovery_sleep_hdd", mclock(), true),
            ("osd_recovery_sleep_ssd", mclock(), true),
            ("osd_recovery_sleep_hybrid", mclock(), true),
            ("osd_recovery_sleep_degraded_hdd", mclock(), true),
            ("osd_snap_trim_sleep", mclock(), true),
            ("osd_snap_trim_sleep_ssd", mclock(), true),
            ("osd_delete_sleep_hybrid", mclock(), true),
            ("osd_scrub_sleep", mclock(), true),
            (
                "osd_recovery_sleep_hdd",
                facts(Some("mclock_scheduler"), Some("custom"), false),
                true,
            ),
            (
                "osd_recovery_sleep_hdd",
                facts(Some("mclock_scheduler"), None, true),
                true,
            ),
            ("osd_recovery_sleep_hdd", wpq(), false),
            ("osd_scrub_sleep", wpq(), false),
            ("osd_recovery_sleep_hdd", unknown(), true),
            // Recovery limits: overridden under mClock unless the override switch is on.
            ("osd_max_backfills", mclock(), true),
            ("osd_recovery_max_active", mclock(), true),
            ("osd_recovery_max_active_hdd", mclock(), true),
            ("osd_recovery_max_active_ssd", mclock(), true),
            // Pacific's OSD overrides them under `custom` too (it never looks at the profile).
            (
                "osd_max_backfills",
                facts(Some("mclock_scheduler"), Some("custom"), false),
                true,
            ),
            (
                "osd_max_backfills",
                facts(Some("mclock_scheduler"), Some("balanced"), true),
                false,
            ),
            (
                "osd_recovery_max_active_ssd",
                facts(None, None, true),
                false,
            ),
            ("osd_max_backfills", wpq(), false),
            ("osd_max_backfills", unknown(), true),
            // mClock QoS knobs: only under the custom profile, never under wpq.
            ("osd_mclock_scheduler_client_res", mclock(), true),
            (
                "osd_mclock_scheduler_background_recovery_lim",
                mclock(),
                true,
            ),
            (
                "osd_mclock_scheduler_background_best_effort_wgt",
                facts(Some("mclock_scheduler"), None, false),
                true,
            ),
            (
                "osd_mclock_scheduler_client_res",
                facts(Some("mclock_scheduler"), Some("custom"), false),
                false,
            ),
            ("osd_mclock_scheduler_client_res", wpq(), true),
            ("osd_mclock_scheduler_client_res", unknown(), true),
            // Other mClock options: read only under mclock_scheduler.
            ("osd_mclock_profile", wpq(), true),
            ("osd_mclock_max_capacity_iops_hdd", wpq(), true),
            ("osd_mclock_override_recovery_settings", wpq(), true),
            ("osd_mclock_profile", mclock(), false),
            ("osd_mclock_max_capacity_iops_hdd", mclock(), false),
            ("osd_mclock_profile", unknown(), false),
            ("osd_mclock_scheduler_anticipation_timeout", mclock(), false),
            // Not a known case: nothing said against it. The lab measured
            // osd_async_recovery_min_cost taking effect under a built-in profile.
            ("osd_async_recovery_min_cost", mclock(), false),
            ("osd_recovery_op_priority", mclock(), false),
            ("osd_recovery_sleepy", mclock(), false),
            ("osd_recovery_sleep_nvme", mclock(), false),
            ("debug_ms", mclock(), false),
            ("", mclock(), false),
        ];
        for (name, f, expected) in cases {
            let got = ineffective(name, &f);
            assert_eq!(got.is_some(), expected, "{name} under {f:?}: {got:?}");
            if let Some(i) = got {
                assert!(
                    i.reason.contains(name),
                    "{name}: reason must name it: {}",
                    i.reason
                );
                assert!(i.fix.starts_with("ceph config "), "{name}: {}", i.fix);
            }
        }
    }

    #[test]
    fn dashes_and_case_are_accepted() {
        let f = mclock();
        assert_eq!(
            ineffective("osd-recovery-sleep-hdd", &f),
            ineffective("osd_recovery_sleep_hdd", &f)
        );
        assert!(ineffective("OSD_MAX_BACKFILLS", &f).is_some());
        assert!(ineffective("osd-mclock-profile", &wpq()).is_some());
    }

    #[test]
    fn fixes_are_exact_commands() {
        let sleep = ineffective("osd_recovery_sleep_hdd", &mclock()).unwrap();
        assert_eq!(sleep.fix, "ceph config rm osd osd_recovery_sleep_hdd");
        let limit = ineffective("osd-max-backfills", &mclock()).unwrap();
        assert_eq!(
            limit.fix,
            "ceph config set osd osd_mclock_override_recovery_settings true"
        );
        let profile = ineffective("osd_mclock_profile", &wpq()).unwrap();
        assert_eq!(profile.fix, "ceph config rm osd osd_mclock_profile");
        let qos = ineffective("osd_mclock_scheduler_client_wgt", &mclock()).unwrap();
        assert_eq!(
            qos.fix,
            "ceph config rm osd osd_mclock_scheduler_client_wgt"
        );
        // An entry of another section is fixed in that section.
        let masked = explain("osd_snap_trim_sleep", &mclock(), "osd/class:hdd", Some("2")).unwrap();
        assert_eq!(
            masked.fix,
            "ceph config rm osd/class:hdd osd_snap_trim_sleep"
        );
        assert!(masked
            .reason
            .starts_with("osd_snap_trim_sleep = 2 (section osd/class:hdd) "));
    }

    #[test]
    fn reasons_say_what_differs_between_releases() {
        let limit = ineffective("osd_max_backfills", &mclock()).unwrap().reason;
        assert!(
            limit.contains("Pacific (16.x)") && limit.contains("1000"),
            "{limit}"
        );
        assert!(limit.contains("Quincy/Reef"), "{limit}");
        assert!(limit.contains("custom included"), "{limit}");
        assert!(!limit.starts_with("If the OSDs run"), "{limit}");

        let hedged = ineffective("osd_max_backfills", &unknown()).unwrap().reason;
        assert!(
            hedged.starts_with(
                "If the OSDs run mclock_scheduler (the default since Quincy; Pacific's default is \
                 wpq), osd_max_backfills"
            ),
            "{hedged}"
        );

        let qos_default = ineffective(
            "osd_mclock_scheduler_client_lim",
            &facts(Some("mclock_scheduler"), None, false),
        )
        .unwrap()
        .reason;
        assert!(
            qos_default.contains("high_client_ops on Pacific, balanced on Quincy and later"),
            "{qos_default}"
        );
        let qos_named = ineffective("osd_mclock_scheduler_client_lim", &mclock())
            .unwrap()
            .reason;
        assert!(
            qos_named.contains("built-in mClock profile balanced"),
            "{qos_named}"
        );

        let wpq_reason = ineffective("osd_mclock_profile", &wpq()).unwrap().reason;
        assert!(wpq_reason.contains("osd_op_queue wpq"), "{wpq_reason}");
    }

    fn entry(section: &str, name: &str, value: &str, mask: &str) -> ConfigEntry {
        ConfigEntry::new(section, name, value, mask)
    }

    #[test]
    fn facts_from_dump_prefers_osd_over_global_and_skips_masks_and_daemons() {
        let dump = vec![
            entry("osd", "osd_op_queue", "wpq", ""),
            entry("global", "osd_op_queue", "mclock_scheduler", ""),
            entry("osd.3", "osd_mclock_profile", "custom", ""),
            entry(
                "osd",
                "osd_mclock_profile",
                "high_recovery_ops",
                "class:hdd",
            ),
            entry("global", "osd_mclock_profile", "high_client_ops", ""),
            entry("osd.1", "osd_mclock_override_recovery_settings", "true", ""),
        ];
        assert_eq!(
            facts_from_dump(&dump),
            facts(Some("wpq"), Some("high_client_ops"), false)
        );

        let dump = vec![
            entry("global", "osd_op_queue", "mclock_scheduler", ""),
            entry("osd", "osd_mclock_override_recovery_settings", "true", ""),
            entry("mon", "osd_mclock_profile", "custom", ""),
        ];
        assert_eq!(
            facts_from_dump(&dump),
            facts(Some("mclock_scheduler"), None, true)
        );
        // osd beats global even when global says true.
        let dump = vec![
            entry(
                "global",
                "osd_mclock_override_recovery_settings",
                "true",
                "",
            ),
            entry("osd", "osd_mclock_override_recovery_settings", "false", ""),
        ];
        assert!(!facts_from_dump(&dump).override_recovery_settings);
        assert_eq!(facts_from_dump(&[]), SchedulerFacts::default());
    }

    #[test]
    fn facts_from_the_lab_dumps() {
        use crate::ceph::parse::config_dump::parse;
        let read = |rel: &str| {
            std::fs::read(format!(
                "{}/tests/fixtures/{rel}",
                env!("CARGO_MANIFEST_DIR")
            ))
            .unwrap_or_default()
        };
        // The rebalance capture set the profile in the database; osd_op_queue came from ceph.conf,
        // so the dump cannot tell the scheduler.
        let rebalance = parse(&read("rebalance/ceph_config_dump.json")).unwrap();
        assert_eq!(
            facts_from_dump(&rebalance),
            facts(None, Some("balanced"), false)
        );
        let idle = parse(&read("healthy-idle/ceph_config_dump.json")).unwrap();
        assert_eq!(facts_from_dump(&idle), SchedulerFacts::default());
    }
}
