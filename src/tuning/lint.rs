//! `lint`: settings in `ceph config dump` that cost client I/O, do nothing under the OSDs' op
//! scheduler, or put data at risk. Pure: the caller fetches the dump and the scheduler facts.
//! Take the facts from the OSDs (`ceph tell 'osd.*' config get osd_op_queue`), not from the
//! dump alone: a scheduler pinned in ceph.conf is invisible to the config database (see the test
//! `scheduler_facts_must_come_from_the_osds`).
//!
//! Every rule is backed by Ceph's documentation, Ceph's own code, or a measurement in this
//! repository; the source sits next to the rule. No finding is raised on a guess: values that do
//! not parse are left alone.

use std::collections::{BTreeSet, HashMap};
use std::fmt::Write as _;

use super::knowledge::{self, normalize, SchedulerFacts};
use crate::ceph::parse::config_dump::ConfigEntry;

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// Takes effect and slows client I/O.
    Costly,
    /// Does nothing under the scheduler in force.
    Ineffective,
    /// Takes effect and weakens redundancy or recovery.
    Risky,
}

impl Kind {
    fn label(self) -> &'static str {
        match self {
            Kind::Costly => "costly",
            Kind::Ineffective => "ineffective",
            Kind::Risky => "risky",
        }
    }
}

#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Finding {
    pub kind: Kind,
    pub section: String,
    pub mask: String,
    pub name: String,
    pub value: String,
    /// One or two sentences: the option, its value and section, and what it does to the cluster.
    pub reason: String,
    /// One exact command that resolves it.
    pub fix: String,
}

/// Measured with `debug_ms` 0/0 instead of 1: fio 2.x, 4k random reads through librbd (2016),
/// `tests/fixtures/fio/fio-2.x-rbd-randread-debug_ms-{0,1}.txt`: 44156 vs 31867 IOPS, clat p50
/// 1048 vs 1544 µs. The test `measured_debug_ms_figures_match_the_fio_reports` recomputes both.
const DEBUG_MS_IOPS_GAIN_PCT: u32 = 39;
const DEBUG_MS_P50_CUT_PCT: u32 = 32;

/// Log level from which another `debug_*` subsystem counts as heavy on the I/O path (the defaults
/// are 0-5; 10 and 20 are the usual "debugging now" levels).
const HEAVY_DEBUG_LEVEL: u32 = 10;

/// Findings for a `ceph config dump`, in the dump's order.
pub fn lint(entries: &[ConfigEntry], facts: &SchedulerFacts) -> Vec<Finding> {
    let priority = priority_findings(entries, facts);
    entries
        .iter()
        .enumerate()
        .filter_map(|(i, e)| {
            debug_logging(e)
                .or_else(|| ineffective(e, facts))
                .or_else(|| down_out_interval(e))
                .or_else(|| pool_defaults(e, entries))
                .or_else(|| priority.get(&i).cloned())
        })
        .collect()
}

/// Human lines: the scheduler facts the verdicts rest on, then one block per finding.
pub fn render_text(findings: &[Finding], facts: &SchedulerFacts) -> String {
    let mut out = String::new();
    out.push_str(&scheduler_line(facts));
    out.push('\n');
    if findings.is_empty() {
        out.push_str("No costly, ineffective or risky settings in the config database.\n");
        return out;
    }
    let n = findings.len();
    let _ = writeln!(out, "{n} finding{}:", if n == 1 { "" } else { "s" });
    for f in findings {
        let who = who(&f.section, &f.mask);
        let _ = writeln!(
            out,
            "\n{:<11} {who} {} = {}",
            f.kind.label().to_uppercase(),
            f.name,
            f.value
        );
        let _ = writeln!(out, "  why: {}", f.reason);
        let _ = writeln!(out, "  fix: {}", f.fix);
    }
    out
}

fn scheduler_line(facts: &SchedulerFacts) -> String {
    let queue = queue_line(facts);
    match facts.osd_release {
        Some(r) => format!(
            "{queue}\nCeph release on every OSD: {} (the advice below is for it)",
            knowledge::release_name(Some(r))
        ),
        None => queue,
    }
}

fn queue_line(facts: &SchedulerFacts) -> String {
    match (facts.is_mclock(), facts.op_queue.as_deref()) {
        (Some(true), _) => format!(
            "OSD op queue: mclock_scheduler, profile {}, osd_mclock_override_recovery_settings {}",
            facts
                .mclock_profile
                .as_deref()
                .filter(|p| !p.trim().is_empty())
                .unwrap_or("unknown"),
            facts.override_recovery_settings
        ),
        (Some(false), _) => "OSD op queue: wpq (the OSDs do not read osd_mclock_* options)".into(),
        (None, Some(q)) if !q.trim().is_empty() => format!(
            "OSD op queue: {} (neither wpq nor mclock_scheduler: scheduler rules are conditional)",
            q.trim()
        ),
        (None, _) => "OSD op queue: unknown (mclock_scheduler is the default since Quincy, wpq in \
                      Pacific): scheduler rules are conditional"
            .into(),
    }
}

/// `ceph config` target of an entry: `osd`, `osd.3`, `osd/class:hdd`.
fn who(section: &str, mask: &str) -> String {
    if mask.trim().is_empty() {
        section.to_string()
    } else {
        format!("{section}/{}", mask.trim())
    }
}

fn finding(kind: Kind, e: &ConfigEntry, reason: String, fix: String) -> Finding {
    Finding {
        kind,
        section: e.section.clone(),
        mask: e.mask.clone(),
        name: e.name.clone(),
        value: e.value.clone(),
        reason,
        fix,
    }
}

fn is_osd_daemon(section: &str) -> bool {
    section
        .strip_prefix("osd.")
        .is_some_and(|id| !id.is_empty() && id.bytes().all(|b| b.is_ascii_digit()))
}

/// Sections whose values the OSDs read.
fn reaches_osds(section: &str) -> bool {
    section == "global" || section == "osd" || is_osd_daemon(section)
}

/// Sections whose values clients (librbd, librados, RGW, CephFS clients) read.
fn reaches_clients(section: &str) -> bool {
    section == "global" || section == "client" || section.starts_with("client.")
}

/// Sections whose values the monitors read (pool creation defaults, down/out handling).
fn reaches_mons(section: &str) -> bool {
    section == "global" || section == "mon" || section.starts_with("mon.")
}

/// The log level of a Ceph debug value: `1/5` (log/memory) or `5` -> the first number.
fn log_level(value: &str) -> Option<u32> {
    value.trim().split('/').next()?.trim().parse().ok()
}

fn debug_logging(e: &ConfigEntry) -> Option<Finding> {
    let name = normalize(&e.name);
    let level = log_level(&e.value)?;
    let who = who(&e.section, &e.mask);
    if name == "debug_ms" {
        // Messenger logging runs for every message sent and received, on OSDs and clients alike.
        // Measured (see DEBUG_MS_IOPS_GAIN_PCT); Ceph's docs: "Logging debug output messages is
        // relatively slow" — https://docs.ceph.com/en/latest/rados/troubleshooting/log-and-debug/
        if level == 0 || !(reaches_osds(&e.section) || reaches_clients(&e.section)) {
            return None;
        }
        return Some(finding(
            Kind::Costly,
            e,
            format!(
                "debug_ms = {} (section {who}) makes every daemon and client it reaches log each \
                 network message, on the I/O path. In a measured pair of 4k random-read runs \
                 through librbd, debug_ms 0/0 instead of 1 gave {DEBUG_MS_IOPS_GAIN_PCT}% more \
                 IOPS and a {DEBUG_MS_P50_CUT_PCT}% lower median latency.",
                e.value.trim()
            ),
            format!("ceph config set {who} debug_ms 0/0"),
        ));
    }
    // Verbose subsystem logging on the OSDs: "Verbose logging can generate over 1GB of data per
    // hour" and slows the daemon — https://docs.ceph.com/en/latest/rados/troubleshooting/log-and-debug/
    if name.starts_with("debug_") && level >= HEAVY_DEBUG_LEVEL && reaches_osds(&e.section) {
        return Some(finding(
            Kind::Costly,
            e,
            format!(
                "{name} = {} (section {who}) logs at level {level} on every OSD it reaches: \
                 verbose logging slows the OSD on the I/O path and can write more than 1 GB an \
                 hour to the OS disk.",
                e.value.trim()
            ),
            format!("ceph config rm {who} {name}"),
        ));
    }
    None
}

fn ineffective(e: &ConfigEntry, facts: &SchedulerFacts) -> Option<Finding> {
    if !reaches_osds(&e.section) {
        return None;
    }
    let who = who(&e.section, &e.mask);
    let why = knowledge::explain(&e.name, facts, &who, Some(e.value.trim()))?;
    Some(finding(Kind::Ineffective, e, why.reason, why.fix))
}

fn down_out_interval(e: &ConfigEntry) -> Option<Finding> {
    // OSD_NO_DOWN_OUT_INTERVAL: "the system will not automatically perform any repair or healing
    // operations after an OSD fails" —
    // https://docs.ceph.com/en/latest/rados/operations/health-checks/#osd-no-down-out-interval
    if normalize(&e.name) != "mon_osd_down_out_interval" || !reaches_mons(&e.section) {
        return None;
    }
    let seconds: f64 = e.value.trim().parse().ok()?;
    if seconds != 0.0 {
        return None;
    }
    let who = who(&e.section, &e.mask);
    Some(finding(
        Kind::Risky,
        e,
        format!(
            "mon_osd_down_out_interval = {} (section {who}): the monitors never mark a down OSD \
             out, so recovery never starts by itself and its PGs stay with one copy fewer until \
             someone runs `ceph osd out`. Ceph reports this as OSD_NO_DOWN_OUT_INTERVAL.",
            e.value.trim()
        ),
        // The default is 600 s.
        format!("ceph config rm {who} mon_osd_down_out_interval"),
    ))
}

fn pool_defaults(e: &ConfigEntry, entries: &[ConfigEntry]) -> Option<Finding> {
    let name = normalize(&e.name);
    if !reaches_mons(&e.section) {
        return None;
    }
    let who = who(&e.section, &e.mask);
    let value: i64 = e.value.trim().parse().ok()?;
    match (name.as_str(), value) {
        // min_size 1 "can lead to data loss" (ceph-medic WOSD2,
        // https://docs.ceph.com/projects/ceph-medic/en/latest/codes/osds.html; ceph/ceph PR #17912
        // removed it from the docs' examples for that reason).
        ("osd_pool_default_min_size", 1) => Some(finding(
            Kind::Risky,
            e,
            format!(
                "osd_pool_default_min_size = 1 (section {who}): new replicated pools accept writes \
                 while only one copy is up, so losing that disk before recovery finishes loses \
                 acknowledged writes."
            ),
            format!("ceph config rm {who} osd_pool_default_min_size"),
        )),
        // size 1: POOL_NO_REDUNDANCY —
        // https://docs.ceph.com/en/latest/rados/operations/health-checks/#pool-no-redundancy
        ("osd_pool_default_size", 1) => Some(finding(
            Kind::Risky,
            e,
            format!(
                "osd_pool_default_size = 1 (section {who}): new pools keep a single copy of each \
                 object, so any failed disk loses data and there is nothing to recover from."
            ),
            format!("ceph config rm {who} osd_pool_default_size"),
        )),
        // size 2 with no min_size set: the monitor gives new pools min_size = size - size/2 = 1
        // (ceph/ceph PR #20555), which is the min_size 1 case above.
        ("osd_pool_default_size", 2) if effective_default_min_size(entries) < 2 => Some(finding(
            Kind::Risky,
            e,
            format!(
                "osd_pool_default_size = 2 (section {who}): new pools keep two copies and, with \
                 osd_pool_default_min_size unset, min_size 1, so after one failure writes are \
                 acknowledged on a single copy."
            ),
            format!("ceph config rm {who} osd_pool_default_size"),
        )),
        _ => None,
    }
}

/// `osd_pool_default_min_size` as the monitors see it (`mon` beats `global`); 0 (the default)
/// means "derive from size".
fn effective_default_min_size(entries: &[ConfigEntry]) -> i64 {
    lookup(entries, "osd_pool_default_min_size", &["mon", "global"]).map_or(0, |(_, v)| v)
}

/// The value an unmasked lookup along `chain` (most specific section first) finds: index of the
/// entry and its value. Within a section the last entry wins.
fn lookup(entries: &[ConfigEntry], name: &str, chain: &[&str]) -> Option<(usize, i64)> {
    chain.iter().find_map(|section| {
        entries
            .iter()
            .enumerate()
            .rev()
            .filter(|(_, e)| {
                e.section == *section && e.mask.trim().is_empty() && normalize(&e.name) == name
            })
            .find_map(|(i, e)| e.value.trim().parse().ok().map(|v| (i, v)))
    })
}

/// Recovery queued at or above client ops under wpq. Scope "all OSDs" (`osd`, `global`) and each
/// `osd.N` that sets one of the two options; the finding sits on the entry that decides it.
///
/// "osd_client_op_priority ... This value is relative to that of osd_recovery_op_priority below.
/// The default strongly favors client ops over recovery." —
/// https://docs.ceph.com/en/latest/rados/configuration/osd-config-ref/#operations
/// mClock schedules by op class instead, so nothing is raised when the OSDs are known to run it.
/// Masked entries are not evaluated (which OSDs they reach is not in the dump).
fn priority_findings(entries: &[ConfigEntry], facts: &SchedulerFacts) -> HashMap<usize, Finding> {
    const CLIENT: &str = "osd_client_op_priority";
    const RECOVERY: &str = "osd_recovery_op_priority";
    // Ceph's defaults.
    const CLIENT_DEFAULT: i64 = 63;
    const RECOVERY_DEFAULT: i64 = 3;

    let mut found = HashMap::new();
    let hedge = match facts.is_mclock() {
        Some(true) => return found,
        Some(false) => "Under wpq",
        None => "If the OSDs run wpq (Pacific's default)",
    };
    let daemons: BTreeSet<&str> = entries
        .iter()
        .filter(|e| {
            is_osd_daemon(&e.section)
                && e.mask.trim().is_empty()
                && matches!(normalize(&e.name).as_str(), CLIENT | RECOVERY)
        })
        .map(|e| e.section.as_str())
        .collect();
    let scopes = std::iter::once(None).chain(daemons.into_iter().map(Some));
    for daemon in scopes {
        let chain: Vec<&str> = daemon.into_iter().chain(["osd", "global"]).collect();
        let recovery = lookup(entries, RECOVERY, &chain);
        let client = lookup(entries, CLIENT, &chain);
        let r = recovery.map_or(RECOVERY_DEFAULT, |(_, v)| v);
        let c = client.map_or(CLIENT_DEFAULT, |(_, v)| v);
        if r < c {
            continue;
        }
        // The entry to fix: the recovery priority if it was set, else the client priority; for
        // one daemon, only its own entries (the cluster-wide ones are judged in scope `osd`).
        let own = |hit: Option<(usize, i64)>| {
            hit.filter(|(i, _)| daemon.is_none_or(|d| entries[*i].section == d))
        };
        let Some((anchor, _)) = own(recovery).or(own(client)) else {
            continue;
        };
        let side = |name: &str, hit: Option<(usize, i64)>, default: i64| match hit {
            Some((i, v)) => format!("{name} = {v} (section {})", who(&entries[i].section, "")),
            None => format!("{name} = {default} (default)"),
        };
        let e = &entries[anchor];
        let scope = daemon.map_or_else(|| "all OSDs".to_string(), str::to_string);
        found.insert(
            anchor,
            finding(
                Kind::Risky,
                e,
                format!(
                    "{} is not below {} for {scope}. {hedge}, recovery ops then queue at or above \
                     client ops, so clients wait behind recovery.",
                    side(RECOVERY, recovery, RECOVERY_DEFAULT),
                    side(CLIENT, client, CLIENT_DEFAULT),
                ),
                format!("ceph config rm {} {}", e.section, normalize(&e.name)),
            ),
        );
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ceph::parse::config_dump::parse;

    fn entry(section: &str, name: &str, value: &str) -> ConfigEntry {
        masked(section, name, value, "")
    }

    fn masked(section: &str, name: &str, value: &str, mask: &str) -> ConfigEntry {
        ConfigEntry::new(section, name, value, mask)
    }

    fn mclock() -> SchedulerFacts {
        SchedulerFacts {
            op_queue: Some("mclock_scheduler".into()),
            mclock_profile: Some("balanced".into()),
            override_recovery_settings: false,
            osd_release: None,
        }
    }

    fn wpq() -> SchedulerFacts {
        SchedulerFacts {
            op_queue: Some("wpq".into()),
            ..SchedulerFacts::default()
        }
    }

    fn unknown() -> SchedulerFacts {
        SchedulerFacts::default()
    }

    /// (kind, fix) of the findings for one entry.
    fn one(e: ConfigEntry, facts: &SchedulerFacts) -> Option<(Kind, String)> {
        let found = lint(std::slice::from_ref(&e), facts);
        assert!(found.len() <= 1, "{found:?}");
        found.into_iter().next().map(|f| (f.kind, f.fix))
    }

    fn fixture(rel: &str) -> Vec<u8> {
        std::fs::read(format!(
            "{}/tests/fixtures/{rel}",
            env!("CARGO_MANIFEST_DIR")
        ))
        .unwrap_or_default()
    }

    #[test]
    fn debug_ms_table() {
        let costly =
            |who: &str| Some((Kind::Costly, format!("ceph config set {who} debug_ms 0/0")));
        let cases = [
            (entry("global", "debug_ms", "1/5"), costly("global")),
            (entry("osd", "debug_ms", "1"), costly("osd")),
            (entry("osd.3", "debug_ms", " 1/1 "), costly("osd.3")),
            (entry("client", "debug_ms", "5"), costly("client")),
            (
                entry("client.rgw.x", "debug_ms", "20/20"),
                costly("client.rgw.x"),
            ),
            (
                masked("osd", "debug_ms", "1", "host:node1"),
                costly("osd/host:node1"),
            ),
            (entry("osd", "debug-ms", "1"), costly("osd")),
            // Off, or only the in-memory level raised: not flagged.
            (entry("osd", "debug_ms", "0/0"), None),
            (entry("global", "debug_ms", "0"), None),
            (entry("client", "debug_ms", "0/5"), None),
            // Daemons that do not carry client I/O.
            (entry("mon", "debug_ms", "1/5"), None),
            (entry("mgr", "debug_ms", "20"), None),
            (entry("mds.a", "debug_ms", "1"), None),
            // Not a level: nothing said.
            (entry("osd", "debug_ms", "lots"), None),
            (entry("osd", "debug_ms", ""), None),
            // `osd.foo` is not an OSD daemon.
            (entry("osd.foo", "debug_ms", "1"), None),
        ];
        for (e, expected) in cases {
            assert_eq!(one(e.clone(), &unknown()), expected, "{e:?}");
        }
    }

    #[test]
    fn other_debug_subsystems_table() {
        let cases = [
            (entry("osd", "debug_osd", "20"), true),
            (entry("osd", "debug_osd", "20/20"), true),
            (entry("global", "debug_bluestore", "10/10"), true),
            (entry("osd.0", "debug_rocksdb", "10"), true),
            (entry("osd", "debug_osd", "1/5"), false),
            (entry("osd", "debug_bluestore", "5/20"), false),
            (entry("mon", "debug_osd", "20"), false),
            (entry("mon", "debug_mon", "20"), false),
            (entry("client", "debug_rbd", "20"), false),
        ];
        for (e, expected) in cases {
            let got = one(e.clone(), &unknown());
            match expected {
                true => assert_eq!(
                    got,
                    Some((
                        Kind::Costly,
                        format!("ceph config rm {} {}", e.section, e.name)
                    )),
                    "{e:?}"
                ),
                false => assert_eq!(got, None, "{e:?}"),
            }
        }
    }

    #[test]
    fn debug_reasons_name_option_value_section_and_cost() {
        let f = lint(&[entry("osd", "debug_ms", "1/5")], &unknown());
        let reason = &f[0].reason;
        for needle in [
            "debug_ms = 1/5",
            "section osd",
            "39% more IOPS",
            "32% lower median",
        ] {
            assert!(reason.contains(needle), "{needle}: {reason}");
        }
        let f = lint(&[entry("osd.2", "debug_osd", "20/20")], &unknown());
        assert!(f[0]
            .reason
            .contains("debug_osd = 20/20 (section osd.2) logs at level 20"));
    }

    /// The figures cited for debug_ms are recomputed from the two fio reports they come from.
    #[test]
    fn measured_debug_ms_figures_match_the_fio_reports() {
        let read = |name: &str| {
            let text = String::from_utf8(fixture(&format!("fio/{name}"))).unwrap();
            crate::fio::parse(&text).unwrap().read.unwrap()
        };
        let off = read("fio-2.x-rbd-randread-debug_ms-0.txt");
        let on = read("fio-2.x-rbd-randread-debug_ms-1.txt");
        let gain = (off.iops / on.iops - 1.0) * 100.0;
        assert_eq!(gain.round() as u32, DEBUG_MS_IOPS_GAIN_PCT, "{gain}");
        let (p50_off, p50_on) = (
            off.latency_seconds.p50.unwrap(),
            on.latency_seconds.p50.unwrap(),
        );
        let cut = (1.0 - p50_off / p50_on) * 100.0;
        assert_eq!(cut.round() as u32, DEBUG_MS_P50_CUT_PCT, "{cut}");
    }

    #[test]
    fn ineffective_table() {
        let rm = |who: &str, name: &str| {
            Some((Kind::Ineffective, format!("ceph config rm {who} {name}")))
        };
        let override_fix = Some((
            Kind::Ineffective,
            "ceph config set osd osd_mclock_override_recovery_settings true".to_string(),
        ));
        let with_override = SchedulerFacts {
            override_recovery_settings: true,
            ..mclock()
        };
        let cases = [
            (
                entry("osd", "osd_recovery_sleep_hdd", "0.1"),
                mclock(),
                rm("osd", "osd_recovery_sleep_hdd"),
            ),
            (
                entry("global", "osd_recovery_sleep", "0.5"),
                mclock(),
                rm("global", "osd_recovery_sleep"),
            ),
            (
                entry("osd.7", "osd_snap_trim_sleep", "2"),
                mclock(),
                rm("osd.7", "osd_snap_trim_sleep"),
            ),
            (
                masked("osd", "osd_recovery_sleep_hdd", "0.1", "class:hdd"),
                mclock(),
                rm("osd/class:hdd", "osd_recovery_sleep_hdd"),
            ),
            (
                entry("osd", "osd_recovery_sleep_hdd", "0.1"),
                unknown(),
                rm("osd", "osd_recovery_sleep_hdd"),
            ),
            // Sleeps work under wpq.
            (entry("osd", "osd_recovery_sleep_hdd", "0.1"), wpq(), None),
            (
                entry("osd", "osd_max_backfills", "4"),
                mclock(),
                override_fix.clone(),
            ),
            (
                entry("osd", "osd_recovery_max_active_hdd", "8"),
                unknown(),
                override_fix.clone(),
            ),
            // The release known: Pacific has no switch (the entry goes), Reef and later do.
            (
                entry("osd", "osd_max_backfills", "4"),
                on_release(16),
                rm("osd", "osd_max_backfills"),
            ),
            (
                entry("osd", "osd_max_backfills", "4"),
                on_release(18),
                override_fix.clone(),
            ),
            (
                entry("osd", "osd_recovery_max_active", "8"),
                on_release(20),
                override_fix,
            ),
            // With the override switch on, the limits count.
            (entry("osd", "osd_max_backfills", "4"), with_override, None),
            (entry("osd", "osd_max_backfills", "4"), wpq(), None),
            (
                entry("osd", "osd_mclock_profile", "high_client_ops"),
                wpq(),
                rm("osd", "osd_mclock_profile"),
            ),
            (
                entry("osd", "osd_mclock_profile", "high_client_ops"),
                mclock(),
                None,
            ),
            (
                entry("osd", "osd_mclock_profile", "high_client_ops"),
                unknown(),
                None,
            ),
            // Sections the OSDs do not read are not theirs to judge.
            (entry("client", "osd_recovery_sleep", "1"), mclock(), None),
            (entry("mon", "osd_max_backfills", "4"), mclock(), None),
        ];
        for (e, facts, expected) in cases {
            assert_eq!(one(e.clone(), &facts), expected, "{e:?} under {facts:?}");
        }
    }

    fn on_release(major: u32) -> SchedulerFacts {
        SchedulerFacts {
            osd_release: Some(major),
            ..mclock()
        }
    }

    /// With the release known, the advice names that release alone: a Pacific user is not told
    /// to set a switch Pacific lacks, a Reef user not what Pacific does.
    #[test]
    fn recovery_limit_advice_is_for_the_release_the_osds_run() {
        let e = entry("osd", "osd_max_backfills", "8");
        let pacific = &lint(std::slice::from_ref(&e), &on_release(16))[0];
        assert_eq!(pacific.fix, "ceph config rm osd osd_max_backfills");
        assert!(!pacific.reason.contains("override"), "{}", pacific.reason);
        // Pacific with the scheduler unknown (its default is wpq, which honours the limit):
        // never the removal of a limit that may work.
        let unsure = SchedulerFacts {
            op_queue: None,
            ..on_release(16)
        };
        let f = lint(std::slice::from_ref(&e), &unsure);
        assert!(
            f.iter().all(|f| !f.fix.starts_with("ceph config rm")),
            "{f:?}"
        );
        for major in [18, 19, 20] {
            let f = &lint(std::slice::from_ref(&e), &on_release(major))[0];
            assert_eq!(
                f.fix,
                "ceph config set osd osd_mclock_override_recovery_settings true"
            );
            assert!(!f.reason.contains("Pacific"), "{}", f.reason);
            assert!(
                f.reason.contains(&knowledge::release_name(Some(major))),
                "{}",
                f.reason
            );
        }
        let text = render_text(&[], &on_release(18));
        assert!(text.contains("Reef (18.x)"), "{text}");
        // The built-in profile's default is the release's.
        let qos = entry("osd", "osd_mclock_scheduler_client_wgt", "4");
        let facts = SchedulerFacts {
            mclock_profile: None,
            ..on_release(16)
        };
        assert!(lint(std::slice::from_ref(&qos), &facts)[0]
            .reason
            .contains("Pacific's default: high_client_ops"));
        let facts = SchedulerFacts {
            mclock_profile: None,
            ..on_release(18)
        };
        assert!(lint(&[qos], &facts)[0]
            .reason
            .contains("Reef (18.x)'s default: balanced"));
    }

    #[test]
    fn recovery_limit_entry_tells_pacific_and_quincy_apart() {
        let f = lint(&[entry("osd.4", "osd_max_backfills", "8")], &mclock());
        let reason = &f[0].reason;
        assert!(
            reason.starts_with("osd_max_backfills = 8 (section osd.4) may not limit recovery"),
            "{reason}"
        );
        assert!(reason.contains("On Pacific remove it (`ceph config rm osd.4 osd_max_backfills`)"));
        assert!(reason.contains("on Quincy/Reef set the switch"), "{reason}");
    }

    #[test]
    fn ineffective_reason_names_value_and_section() {
        let f = lint(
            &[masked("osd", "osd_recovery_sleep_hdd", "0.1", "class:hdd")],
            &mclock(),
        );
        assert!(
            f[0].reason
                .starts_with("osd_recovery_sleep_hdd = 0.1 (section osd/class:hdd) has no effect"),
            "{}",
            f[0].reason
        );
    }

    #[test]
    fn down_out_interval_table() {
        let risky = |who: &str| {
            Some((
                Kind::Risky,
                format!("ceph config rm {who} mon_osd_down_out_interval"),
            ))
        };
        let cases = [
            (entry("mon", "mon_osd_down_out_interval", "0"), risky("mon")),
            (
                entry("global", "mon_osd_down_out_interval", "0"),
                risky("global"),
            ),
            (
                entry("mon.a", "mon_osd_down_out_interval", "0.0"),
                risky("mon.a"),
            ),
            (entry("mon", "mon_osd_down_out_interval", "600"), None),
            (entry("mon", "mon_osd_down_out_interval", "1"), None),
            // The OSDs never act on it.
            (entry("osd", "mon_osd_down_out_interval", "0"), None),
            (entry("mon", "mon_osd_down_out_interval", "never"), None),
        ];
        for (e, expected) in cases {
            assert_eq!(one(e.clone(), &unknown()), expected, "{e:?}");
        }
        let f = lint(
            &[entry("mon", "mon_osd_down_out_interval", "0")],
            &unknown(),
        );
        assert!(
            f[0].reason.contains("never mark a down OSD out"),
            "{}",
            f[0].reason
        );
    }

    #[test]
    fn pool_default_table() {
        let risky =
            |who: &str, name: &str| Some((Kind::Risky, format!("ceph config rm {who} {name}")));
        let cases = [
            (
                vec![entry("global", "osd_pool_default_min_size", "1")],
                risky("global", "osd_pool_default_min_size"),
            ),
            (
                vec![entry("mon", "osd_pool_default_size", "1")],
                risky("mon", "osd_pool_default_size"),
            ),
            (
                vec![entry("global", "osd_pool_default_size", "2")],
                risky("global", "osd_pool_default_size"),
            ),
            (
                vec![entry("global", "osd_pool_default_min_size", "2")],
                None,
            ),
            (
                vec![entry("global", "osd_pool_default_min_size", "0")],
                None,
            ),
            (vec![entry("global", "osd_pool_default_size", "3")], None),
            (vec![entry("osd", "osd_pool_default_size", "1")], None),
        ];
        for (dump, expected) in cases {
            let found: Vec<_> = lint(&dump, &unknown())
                .into_iter()
                .map(|f| (f.kind, f.fix))
                .collect();
            assert_eq!(found.into_iter().next(), expected, "{dump:?}");
        }
        // size 2 is only risky while min_size would be derived as 1.
        let dump = [
            entry("global", "osd_pool_default_size", "2"),
            entry("mon", "osd_pool_default_min_size", "2"),
        ];
        assert_eq!(lint(&dump, &unknown()), vec![]);
    }

    #[test]
    fn op_priority_inversion() {
        let rm = |who: &str, name: &str| (Kind::Risky, format!("ceph config rm {who} {name}"));
        let run = |dump: &[ConfigEntry], facts: &SchedulerFacts| -> Vec<(String, Kind, String)> {
            lint(dump, facts)
                .into_iter()
                .map(|f| (f.section.clone(), f.kind, f.fix))
                .collect()
        };
        // Recovery raised to the client's default.
        let dump = [entry("osd", "osd_recovery_op_priority", "63")];
        let (k, fix) = rm("osd", "osd_recovery_op_priority");
        assert_eq!(run(&dump, &wpq()), vec![("osd".into(), k, fix)]);
        // Client lowered below the recovery default.
        let dump = [entry("global", "osd_client_op_priority", "2")];
        let (k, fix) = rm("global", "osd_client_op_priority");
        assert_eq!(run(&dump, &unknown()), vec![("global".into(), k, fix)]);
        // Fine, or shadowed by a more specific section: nothing.
        assert_eq!(
            run(&[entry("osd", "osd_recovery_op_priority", "10")], &wpq()),
            vec![]
        );
        let shadowed = [
            entry("global", "osd_recovery_op_priority", "63"),
            entry("osd", "osd_recovery_op_priority", "3"),
        ];
        assert_eq!(run(&shadowed, &wpq()), vec![]);
        // One OSD inverted on its own.
        let dump = [
            entry("osd", "osd_recovery_op_priority", "5"),
            entry("osd.2", "osd_client_op_priority", "4"),
        ];
        let (k, fix) = rm("osd.2", "osd_client_op_priority");
        assert_eq!(run(&dump, &wpq()), vec![("osd.2".into(), k, fix)]);
        // mClock does not schedule by these priorities.
        assert_eq!(
            run(&[entry("osd", "osd_recovery_op_priority", "63")], &mclock()),
            vec![]
        );

        let f = lint(
            &[entry("osd", "osd_recovery_op_priority", "63")],
            &unknown(),
        );
        assert_eq!(
            f[0].reason,
            "osd_recovery_op_priority = 63 (section osd) is not below osd_client_op_priority = 63 \
             (default) for all OSDs. If the OSDs run wpq (Pacific's default), recovery ops then \
             queue at or above client ops, so clients wait behind recovery."
        );
    }

    #[test]
    fn findings_keep_the_dump_order() {
        let dump = [
            entry("mon", "mon_osd_down_out_interval", "0"),
            entry("osd", "osd_recovery_op_priority", "63"),
            entry("osd", "debug_ms", "1/5"),
            entry("osd", "osd_recovery_sleep_hdd", "0.1"),
            entry("mgr", "mgr/prometheus/server_port", "9283"),
            entry("global", "osd_pool_default_min_size", "1"),
        ];
        let kinds: Vec<(String, Kind)> = lint(&dump, &unknown())
            .into_iter()
            .map(|f| (f.name, f.kind))
            .collect();
        assert_eq!(
            kinds,
            vec![
                ("mon_osd_down_out_interval".into(), Kind::Risky),
                ("osd_recovery_op_priority".into(), Kind::Risky),
                ("debug_ms".into(), Kind::Costly),
                ("osd_recovery_sleep_hdd".into(), Kind::Ineffective),
                ("osd_pool_default_min_size".into(), Kind::Risky),
            ]
        );
    }

    #[test]
    fn kind_serializes_in_snake_case() {
        let f = &lint(&[entry("osd", "debug_ms", "1")], &unknown())[0];
        let v = serde_json::to_value(f).unwrap();
        assert_eq!(v["kind"], "costly");
        assert_eq!(v["section"], "osd");
        assert_eq!(v["fix"], "ceph config set osd debug_ms 0/0");
    }

    #[test]
    fn real_dumps_from_the_lab() {
        let dump =
            |state: &str| parse(&fixture(&format!("{state}/ceph_config_dump.json"))).unwrap();
        // Only mon/mgr housekeeping in these: nothing to say, whatever the scheduler.
        for state in ["healthy-idle", "client-load", "recovery", "undersized"] {
            let entries = dump(state);
            assert!(!entries.is_empty(), "{state}");
            for facts in [
                unknown(),
                mclock(),
                wpq(),
                knowledge::facts_from_dump(&entries),
            ] {
                assert_eq!(lint(&entries, &facts), vec![], "{state} under {facts:?}");
            }
        }
        // The rebalance capture turned async recovery off (measured to take effect) and set the
        // profile in the database. Under the scheduler the OSDs reported, nothing is wrong.
        let rebalance = dump("rebalance");
        let from_dump = knowledge::facts_from_dump(&rebalance);
        assert_eq!(lint(&rebalance, &from_dump), vec![]);
        assert_eq!(lint(&rebalance, &mclock()), vec![]);
        // Under wpq the profile would be dead weight.
        let f = lint(&rebalance, &wpq());
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!(
            (f[0].kind, f[0].name.as_str()),
            (Kind::Ineffective, "osd_mclock_profile")
        );
        assert_eq!(f[0].fix, "ceph config rm osd osd_mclock_profile");
    }

    /// `ceph config get osd osd_op_queue` answers from the database (wpq, the default) while the
    /// lab's OSDs run mclock_scheduler from ceph.conf: facts taken from the monitors would call the
    /// rebalance capture's profile ineffective when it was in force.
    #[test]
    fn scheduler_facts_must_come_from_the_osds() {
        use crate::ceph::parse::{config_value, tell};
        let text = |rel: &str| String::from_utf8(fixture(&format!("lab/{rel}"))).unwrap();
        let from_mon =
            config_value::parse_plain(text("healthy.config-get-osd-osd_op_queue.out").as_bytes())
                .unwrap();
        assert_eq!(from_mon, "wpq");
        let tell_out = text("healthy.tell-osd-all-config-get-osd_op_queue.out");
        let from_osds: BTreeSet<String> = tell::split(&tell_out)
            .into_iter()
            .map(|r| {
                let d = r.unwrap();
                config_value::parse_tell_config_get(d.body.as_bytes(), "osd_op_queue").unwrap()
            })
            .collect();
        assert_eq!(from_osds, BTreeSet::from(["mclock_scheduler".to_string()]));

        let rebalance = parse(&fixture("rebalance/ceph_config_dump.json")).unwrap();
        let facts = |queue: &str| SchedulerFacts {
            op_queue: Some(queue.to_string()),
            ..knowledge::facts_from_dump(&rebalance)
        };
        assert_eq!(lint(&rebalance, &facts(&from_mon)).len(), 1);
        assert_eq!(lint(&rebalance, &facts("mclock_scheduler")), vec![]);
    }

    #[test]
    fn render_text_small_case() {
        let findings = lint(
            &[
                entry("osd", "debug_ms", "1/5"),
                entry("osd", "osd_recovery_sleep_hdd", "0.1"),
            ],
            &mclock(),
        );
        let text = render_text(&findings, &mclock());
        let expected = format!(
            "OSD op queue: mclock_scheduler, profile balanced, osd_mclock_override_recovery_settings false\n\
             2 findings:\n\
             \n\
             COSTLY      osd debug_ms = 1/5\n\
             \x20 why: {}\n\
             \x20 fix: ceph config set osd debug_ms 0/0\n\
             \n\
             INEFFECTIVE osd osd_recovery_sleep_hdd = 0.1\n\
             \x20 why: {}\n\
             \x20 fix: ceph config rm osd osd_recovery_sleep_hdd\n",
            findings[0].reason, findings[1].reason
        );
        assert_eq!(text, expected);
    }

    #[test]
    fn render_text_without_findings_says_so() {
        assert_eq!(
            render_text(&[], &unknown()),
            "OSD op queue: unknown (mclock_scheduler is the default since Quincy, wpq in Pacific): \
             scheduler rules are conditional\n\
             No costly, ineffective or risky settings in the config database.\n"
        );
        assert!(render_text(&[], &wpq()).starts_with("OSD op queue: wpq "));
        let one = lint(&[entry("mon", "mon_osd_down_out_interval", "0")], &wpq());
        assert!(render_text(&one, &wpq()).contains("\n1 finding:\n"));
    }
}
