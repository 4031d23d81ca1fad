//! The two sentences `status`, `/api/status` and the landing page open with: what is happening,
//! and what the on-call engineer should do (or not do) now. One pure function chooses them from
//! what the exporter read of the cluster and what the enforcer shows, the most pressing first:
//! the cluster unseen, I/O stopped, OSDs down but in, redundancy at risk, the enforcer blind or
//! held off, a stalled recovery, the latency bound during recovery, then the quiet cases.

use serde::{Deserialize, Serialize};

use crate::ceph::parse::osd_dump::DownIn;
use crate::ceph::parse::status::ClusterStatus;
use crate::collect::recovery::WindowRates;
use crate::collect::safety::PoolSafety;
use crate::enforcer::state::Phase;
use crate::enforcer::{EnforcerView, Mode, Time};
use crate::units::{fmt_ms, fmt_secs, fmt_when, fmt_window};

/// Ceph's default `mon_osd_down_out_interval`: a down OSD is marked out this long after it
/// went down (unless `noout`). Not read from the cluster: the mon's config database does not
/// know a value set in ceph.conf, so a read could mislead more than the default does.
pub const DOWN_OUT_INTERVAL_DEFAULT: f64 = 600.0;

/// How to check the interval in force, said with the default.
const DOWN_OUT_CHECK: &str = "`ceph config get mon mon_osd_down_out_interval` shows yours";

/// Which situation the sentences describe (`/api/status` `headline.case`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Case {
    ClusterUnknown,
    IoStopped,
    OsdsDownNotOut,
    RedundancyAtRisk,
    Blind,
    PausedByHand,
    Standby,
    Overridden,
    RecoveryStalled,
    BoundNotHeld,
    Deferred,
    EnforcerActing,
    BreachWaiting,
    RecoveryWithinBound,
    RecoveryUnjudged,
    Settling,
    BaselineSuspect,
    Healthy,
}

/// What is happening and what to do, one sentence each.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Headline {
    pub case: Case,
    pub what: String,
    pub todo: String,
    /// The alert whose runbook section covers this, if one does.
    pub runbook: Option<String>,
}

/// What the exporter read of the cluster (fresh data only).
#[derive(Debug, Clone, Default)]
pub struct Cluster {
    /// (OSDs, up, in), when the status has an osdmap section.
    pub osds: Option<(u64, u64, u64)>,
    /// When the set of up OSDs last changed (Unix seconds).
    pub osd_up_since: Option<u64>,
    /// OSDs down but in, as the `OSD_DOWN` health check counts them.
    pub down_in_count: u64,
    /// Which they are (`ceph osd dump`), when read; `Err`: why not.
    pub down_in: Option<Result<DownIn, String>>,
    /// The flags the `OSDMAP_FLAGS` health check names.
    pub flags: Vec<String>,
    pub pgs: u64,
    /// PG counts per state word (`active`, `clean`, `undersized`, ...).
    pub pg_words: std::collections::BTreeMap<String, u64>,
    pub degraded: u64,
    pub misplaced: u64,
    pub unfound: u64,
    /// PGs recovering, backfilling or waiting to.
    pub pgs_moving: u64,
    pub rates: Option<WindowRates>,
    /// Ceph's `recovering_objects_per_sec` now.
    pub ceph_rate_now: f64,
    /// Per pool, when pools and undersized PGs were read.
    pub pools: Option<Vec<PoolSafety>>,
    /// OSDs at or above backfillfull_ratio, and at or above full_ratio, as the health checks
    /// `OSD_BACKFILLFULL` and `OSD_FULL` count them.
    pub backfillfull_osds: u64,
    pub full_osds: u64,
}

impl Cluster {
    /// From `ceph status` and what was read with it: the rates over the recovery window, the
    /// OSD map's down-but-in OSDs, and the pools' safety (`None` when not fresh).
    pub fn from_parts(
        status: &ClusterStatus,
        rates: Option<WindowRates>,
        down_in: Option<Result<DownIn, String>>,
        pools: Option<Vec<PoolSafety>>,
    ) -> Self {
        let counts = status.recovery_counts();
        let check_count = |name: &str| {
            status
                .health_checks
                .get(name)
                .and_then(|c| c.count)
                .unwrap_or(0)
        };
        Cluster {
            osds: match (status.num_osds, status.num_up_osds, status.num_in_osds) {
                (Some(n), Some(up), Some(inn)) => Some((n, up, inn)),
                _ => None,
            },
            osd_up_since: status.osd_up_since,
            down_in_count: status.osds_down_in(),
            down_in,
            flags: status.osdmap_flags(),
            pgs: status.num_pgs,
            pg_words: status.pg_state_word_counts(),
            degraded: status.degraded_objects,
            misplaced: status.misplaced_objects,
            unfound: status.unfound_objects,
            pgs_moving: counts.pgs_moving,
            rates,
            ceph_rate_now: status.recovering_objects_per_sec,
            pools,
            backfillfull_osds: check_count("OSD_BACKFILLFULL"),
            full_osds: check_count("OSD_FULL"),
        }
    }

    fn word(&self, w: &str) -> u64 {
        self.pg_words.get(w).copied().unwrap_or(0)
    }

    fn remaining(&self) -> u64 {
        self.degraded.saturating_add(self.misplaced)
    }

    fn recovering(&self) -> bool {
        self.remaining() > 0 || self.pgs_moving > 0 || self.word("undersized") > 0
    }
}

/// Everything the sentences are chosen from.
#[derive(Debug, Clone)]
pub struct Facts<'a> {
    /// Wall-clock time (Unix seconds).
    pub now: Time,
    /// The collection interval, seconds.
    pub interval: f64,
    /// `Err`: why the cluster status cannot be used.
    pub cluster: Result<Cluster, String>,
    /// The exporter's own p99 and its window (seconds), for when the enforcer is off.
    pub exporter_p99: Option<(f64, f64)>,
    pub enforcer: Option<&'a EnforcerView>,
}

/// The sentences for `f`.
pub fn headline(f: &Facts<'_>) -> Headline {
    let c = match &f.cluster {
        Ok(c) => c,
        Err(why) => {
            return said(
                Case::ClusterUnknown,
                format!("The exporter cannot read the cluster's status ({why}), so nothing it shows about the cluster is current."),
                "Run `ceph -s` by hand and fix what stops the exporter's collector (its log says why); the enforcer decides nothing meanwhile.",
                Some("RecoveryBudgetCollectorDown"),
            );
        }
    };
    let e = f.enforcer;
    if let Some(h) = io_stopped(c) {
        return h;
    }
    if c.down_in_count > 0 {
        return down_not_out(f, c);
    }
    if c.word("undersized") > 0 {
        return redundancy_at_risk(f, c, e);
    }
    if let Some(h) = e.and_then(|v| enforcer_held_off(f, c, v)) {
        return h;
    }
    if c.recovering() {
        return recovering(f, c, e);
    }
    quiet(f, c, e)
}

fn said(case: Case, what: String, todo: &str, runbook: Option<&str>) -> Headline {
    Headline {
        case,
        what,
        todo: todo.to_string(),
        runbook: runbook.map(str::to_string),
    }
}

fn plural(n: u64, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// "osd.1 and osd.2"
fn osd_list(ids: &[u32]) -> String {
    let names: Vec<String> = ids.iter().map(|i| format!("osd.{i}")).collect();
    match names.split_last() {
        Some((last, rest)) if !rest.is_empty() => format!("{} and {last}", rest.join(", ")),
        _ => names.join(""),
    }
}

/// I/O stopped for some PGs (fewer live members than min_size, or PGs not active), or objects
/// with no copy Ceph can reach: data availability before anything else.
fn io_stopped(c: &Cluster) -> Option<Headline> {
    let below: Vec<String> = c
        .pools
        .iter()
        .flatten()
        .filter(|p| p.pgs_below_min_size > 0)
        .map(|p| {
            format!(
                "{} of pool {} (min_size {})",
                plural(p.pgs_below_min_size, "PG", "PGs"),
                p.pool.name,
                p.pool.min_size
            )
        })
        .collect();
    let inactive: u64 = ["peered", "incomplete", "down"]
        .iter()
        .map(|w| c.word(w))
        .max()
        .unwrap_or(0);
    if below.is_empty() && inactive == 0 && c.unfound == 0 {
        return None;
    }
    let mut what = Vec::new();
    if !below.is_empty() {
        what.push(format!(
            "{} have fewer copies than min_size, so their I/O has stopped",
            below.join(" and ")
        ));
    } else if inactive > 0 {
        what.push(format!(
            "{} are not active (peered, incomplete or down), so their I/O has stopped",
            plural(inactive, "PG", "PGs")
        ));
    }
    if c.unfound > 0 {
        what.push(format!(
            "{} have no copy Ceph can reach (unfound)",
            plural(c.unfound, "object", "objects")
        ));
    }
    Some(said(
        Case::IoStopped,
        format!("{}.", capitalize(&what.join("; "))),
        "Bring every down OSD back now (`ceph osd tree down`, `ceph health detail`), and mark no OSD lost and no unfound object reverted or deleted before you know its copies are gone.",
        Some("RecoveryLatencyBudgetSuspended"),
    ))
}

fn capitalize(s: &str) -> String {
    let mut chars = s.chars();
    match chars.next() {
        Some(first) => first.to_uppercase().chain(chars).collect(),
        None => String::new(),
    }
}

/// The pools with undersized PGs and how far their worst PGs are from stopping I/O and from
/// losing data, pools in the same plight said once, the most PGs first: "19 PGs of pool
/// rbd-vms and 1 PG of pool device_health_metrics have 2 of 3 copies (min_size 2): 1 more OSD
/// failure stops their I/O, 2 more can lose data".
fn redundancy(c: &Cluster) -> Option<String> {
    /// (erasure, fewest members, size, min_size): pools alike in how close they are to losing
    /// I/O and data.
    type Plight = (bool, u64, u64, u64);
    // Each plight with its pools and their undersized PGs.
    let mut groups: Vec<(Plight, Vec<(&str, u64)>)> = Vec::new();
    for p in c.pools.iter().flatten().filter(|p| p.pgs_undersized > 0) {
        let key = (
            p.pool.erasure,
            p.fewest_members.unwrap_or(0) as u64,
            u64::from(p.pool.size),
            u64::from(p.pool.min_size),
        );
        let entry = (p.pool.name.as_str(), p.pgs_undersized);
        match groups.iter_mut().find(|(k, _)| *k == key) {
            Some((_, pools)) => pools.push(entry),
            None => groups.push((key, vec![entry])),
        }
    }
    let total = |pools: &[(&str, u64)]| pools.iter().map(|(_, n)| n).sum::<u64>();
    for (_, pools) in &mut groups {
        pools.sort_by_key(|p| std::cmp::Reverse(p.1));
    }
    // The closest to stopping I/O first, then the most PGs.
    groups.sort_by(|(a, pa), (b, pb)| {
        (a.1 + 1)
            .saturating_sub(a.3)
            .cmp(&(b.1 + 1).saturating_sub(b.3))
            .then(total(pb).cmp(&total(pa)))
    });
    let said: Vec<String> = groups
        .iter()
        .map(|((erasure, members, size, min), pools)| {
            let (members, size, min) = (*members, *size, *min);
            let which: Vec<String> = pools
                .iter()
                .map(|(name, n)| format!("{} of pool {name}", plural(*n, "PG", "PGs")))
                .collect();
            let which = match which.split_last() {
                Some((last, rest)) if !rest.is_empty() => format!("{} and {last}", rest.join(", ")),
                _ => which.join(""),
            };
            let have = if total(pools) == 1 { "has" } else { "have" };
            let to_stop = (members + 1).saturating_sub(min);
            let stop = format!(
                "{} stop{} their I/O",
                plural(to_stop, "more OSD failure", "more OSD failures"),
                if to_stop == 1 { "s" } else { "" }
            );
            if *erasure {
                // How many shards an object needs (k) is in the erasure-code profile, not here.
                format!("{which} {have} {members} of {size} shards (min_size {min}): {stop}")
            } else {
                format!(
                    "{which} {have} {members} of {size} copies (min_size {min}): {stop}, {members} more can lose data"
                )
            }
        })
        .collect();
    (!said.is_empty()).then(|| said.join("; "))
}

/// How the recovery goes: objects left, the rate over the window next to Ceph's over the same
/// time, and the time to finish, with the enforcer's pause counted in.
fn progress(c: &Cluster, pause_share: f64) -> String {
    let left = format!("{} to recover", plural(c.remaining(), "object", "objects"));
    let Some(r) = c.rates else {
        return format!(
            "{left} (rate not measured yet; Ceph says {:.0} obj/s now)",
            c.ceph_rate_now
        );
    };
    let over = format!(
        "{:.0} obj/s over the last {} (Ceph: {:.0} obj/s over the same time)",
        r.ours,
        fmt_window(r.span.as_secs_f64()),
        r.ceph
    );
    if r.ours <= 0.0 {
        return format!(
            "{left}, none recovered over the last {}",
            fmt_window(r.span.as_secs_f64())
        );
    }
    let eta = c.remaining() as f64 / r.ours;
    let pause = if pause_share > 0.0 && pause_share < 1.0 {
        // The rate was measured with the pause in it; without it recovery runs all the time.
        format!(
            "; the enforcer pauses recovery {:.0}% of the time (counted in this rate: about {} if it stopped pausing)",
            pause_share * 100.0,
            fmt_secs(eta * (1.0 - pause_share))
        )
    } else {
        String::new()
    };
    format!("{left} at {over}, about {} to go{pause}", fmt_secs(eta))
}

fn down_not_out(f: &Facts<'_>, c: &Cluster) -> Headline {
    let n = c.down_in_count;
    let (who, known) = match &c.down_in {
        Some(Ok(d)) if !d.osds.is_empty() => (osd_list(&d.osds), Some(d)),
        Some(Err(e)) => (
            format!(
                "{} (which: `ceph osd tree down`; reading the OSD map failed: {e})",
                plural(n, "OSD", "OSDs")
            ),
            None,
        ),
        _ => (
            format!("{} (which: `ceph osd tree down`)", plural(n, "OSD", "OSDs")),
            None,
        ),
    };
    let verb = if n == 1 { "is" } else { "are" };
    // When it went down is known when its going down is the OSD map's latest up/down change.
    let since = known
        .and_then(|d| d.latest_change)
        .and(c.osd_up_since)
        .map(|t| t as f64);
    let since_text = since
        .map(|t| format!(" since {}", fmt_when(t, f.now)))
        .unwrap_or_default();
    let risk = redundancy(c).map(|r| format!("; {r}")).unwrap_or_default();
    let noout = known.is_some_and(|d| d.noout) || c.flags.iter().any(|fl| fl == "noout");
    let out = if noout {
        "`noout` is set, so Ceph will not mark it out and nothing recovers until it is back or marked out by hand".to_string()
    } else {
        match since {
            Some(t) if t + DOWN_OUT_INTERVAL_DEFAULT > f.now => format!(
                "Ceph marks it out, and recovery starts, at about {}: mon_osd_down_out_interval is 600 s by default ({DOWN_OUT_CHECK})",
                fmt_when(t + DOWN_OUT_INTERVAL_DEFAULT, f.now)
            ),
            Some(t) => format!(
                "it is still in {} after it went down, past the default mon_osd_down_out_interval of 600 s ({DOWN_OUT_CHECK}; mon_osd_down_out_subtree_limit and mon_osd_min_in_ratio can keep it in too)",
                fmt_secs(f.now - t)
            ),
            None => format!(
                "Ceph marks it out and starts recovery mon_osd_down_out_interval after it went down (600 s by default; {DOWN_OUT_CHECK})"
            ),
        }
    };
    let what = format!(
        "{who} {verb} down but still in{since_text}: {} of {} PGs are undersized and nothing recovers their copies meanwhile{risk}; {out}.",
        c.word("undersized"),
        c.pgs
    );
    let ids: Vec<u32> = known.map(|d| d.osds.clone()).unwrap_or_default();
    let them = if ids.is_empty() {
        format!(
            "the down {} (`ceph osd tree down`)",
            if n == 1 { "OSD" } else { "OSDs" }
        )
    } else {
        osd_list(&ids)
    };
    let out_cmd = if ids.is_empty() {
        "`ceph osd out ID`".to_string()
    } else {
        format!(
            "`ceph osd out {}`",
            ids.iter().map(u32::to_string).collect::<Vec<_>>().join(" ")
        )
    };
    let todo = if noout {
        format!("Bring {them} back (its daemon, disk and host); if it cannot be back soon, {out_cmd} starts recovery now; stop or restart no other OSD meanwhile.")
    } else {
        format!("Bring {them} back before then if you can (its daemon, disk and host), or {out_cmd} to start recovery now; stop or restart no other OSD meanwhile.")
    };
    Headline {
        case: Case::OsdsDownNotOut,
        what,
        todo,
        runbook: Some("RecoveryLatencyBudgetSuspended".into()),
    }
}

fn pause_share(e: Option<&EnforcerView>) -> f64 {
    e.filter(|v| v.ladder_rung >= 3)
        .map_or(0.0, |v| v.pause_share)
}

/// No object recovered over at least four collections although there is work, and not because
/// the enforcer pauses: why, from the PG states and the OSD map flags, and what to do about it.
fn stalled(f: &Facts<'_>, c: &Cluster, e: Option<&EnforcerView>) -> Option<(String, String)> {
    let r = c.rates?;
    let paused_by_us = e.is_some_and(|v| v.paused || v.pause_share > 0.0);
    let toofull = c.word("backfill_toofull") + c.word("recovery_toofull");
    let waiting = c.word("recovery_wait") + c.word("backfill_wait");
    let running = c.word("recovering") + c.word("backfilling");
    // PGs stuck on full OSDs and none moving: stalled now, even if some objects moved earlier
    // in the window (lab, 2026-12-01: 67 objects backfilled before 12 PGs went
    // backfill_toofull, and the headline said "1 obj/s ..., about 3h3m37s to go; Nothing to do:
    // let recovery finish").
    let blocked_by_full = toofull > 0 && running == 0;
    if (r.ours > 0.0 && !blocked_by_full) || r.span.as_secs_f64() < 4.0 * f.interval || paused_by_us
    {
        return None;
    }
    let ours = e.map(|v| v.flags_set.clone()).unwrap_or_default();
    let foreign: Vec<&str> = c
        .flags
        .iter()
        .map(String::as_str)
        .filter(|fl| ["nobackfill", "norecover", "norebalance"].contains(fl))
        .filter(|fl| !ours.iter().any(|o| o == fl))
        .collect();
    let (why, todo) = if !foreign.is_empty() {
        (
            format!("{} set, not by the enforcer", foreign.join(" and ")),
            format!("Find out who set {} and why (`ceph log last 1000 info audit | grep 'osd set'`); unset them once that reason is gone.", foreign.join(" and ")),
        )
    } else if toofull > 0 {
        toofull_why(c)
    } else if c.pgs_moving == 0 {
        (
            "no PG is recovering, backfilling or waiting to: there is nowhere to recover the copies to".to_string(),
            "Check `ceph osd tree` and `ceph health detail`: too few OSDs up and in for the pools' size, or a CRUSH rule that finds no place.".to_string(),
        )
    } else if running == 0 && waiting > 0 {
        (
            format!("{} wait for recovery or backfill reservations and none is being served", plural(waiting, "PG", "PGs")),
            "`ceph pg ls recovery_wait backfill_wait` shows on which OSDs they wait; look for a slow or stuck OSD (`ceph osd perf`).".to_string(),
        )
    } else {
        (
            format!("{} report recovering or backfilling but no object count went down", plural(running.max(c.pgs_moving), "PG", "PGs")),
            "Look for slow OSDs (`ceph osd perf`) and `ceph health detail`; a recovery throttle left from an earlier incident (`ceph config dump | grep -E 'recovery|backfill|mclock'`) can make it crawl.".to_string(),
        )
    };
    let moving = if r.ours > 0.0 {
        format!(
            "no PG is recovering or backfilling although {} objects are left",
            c.remaining()
        )
    } else {
        format!(
            "no object recovered over the last {} although {} are left",
            fmt_window(r.span.as_secs_f64()),
            c.remaining()
        )
    };
    Some((format!("{moving}: {why}"), todo))
}

/// Why PGs are `backfill_toofull` / `recovery_toofull`, and how to make room (lab,
/// 2026-12-01, `backfill-toofull/`: the headline said only "an OSD they need is too full
/// (backfill_toofull/recovery_toofull)" and "Free space on the full OSDs").
fn toofull_why(c: &Cluster) -> (String, String) {
    let (backfill, recovery) = (c.word("backfill_toofull"), c.word("recovery_toofull"));
    let osds = |n: u64, check: &str| {
        if n > 0 {
            format!(" ({check}: {})", plural(n, "OSD", "OSDs"))
        } else {
            String::new()
        }
    };
    let mut why = Vec::new();
    if backfill > 0 {
        why.push(format!(
            "{} backfill_toofull: the OSDs they would move data to are at or above backfillfull_ratio, so Ceph backfills nothing into them{}",
            plural(backfill, "PG is", "PGs are"),
            osds(c.backfillfull_osds, "OSD_BACKFILLFULL")
        ));
    }
    if recovery > 0 {
        why.push(format!(
            "{} recovery_toofull: an OSD they need is at or above full_ratio{}",
            plural(recovery, "PG is", "PGs are"),
            osds(c.full_osds, "OSD_FULL")
        ));
    }
    let ratio = if backfill > 0 {
        "backfillfull_ratio"
    } else {
        "full_ratio"
    };
    (
        why.join("; "),
        format!("Make room on the too-full OSDs (`ceph health detail` names them, `ceph osd df` shows how full they are): add OSDs or delete data; if {ratio} was lowered (`ceph osd dump | grep ratio`), put it back with `ceph osd set-{}-ratio`, keeping nearfull < backfillfull < full.", ratio.trim_end_matches("_ratio")),
    )
}

fn redundancy_at_risk(f: &Facts<'_>, c: &Cluster, e: Option<&EnforcerView>) -> Headline {
    let risk = redundancy(c).unwrap_or_else(|| {
        format!(
            "{} undersized",
            plural(c.word("undersized"), "PG is", "PGs are")
        )
    });
    if let Some((why, todo)) = stalled(f, c, e) {
        return Headline {
            case: Case::RecoveryStalled,
            what: format!("Redundancy is at risk ({risk}), and {why}."),
            todo,
            runbook: Some("CephRecoveryStalled".into()),
        };
    }
    let bound = match e {
        Some(v) if v.suspended => "; the latency bound is suspended: recovery first",
        _ => "",
    };
    said(
        Case::RedundancyAtRisk,
        format!(
            "Recovery is restoring redundancy: {risk}; {}{bound}.",
            progress(c, pause_share(e))
        ),
        "Let it run: do not throttle recovery, and stop, restart or take out no other OSD until no PG is undersized.",
        Some("RecoveryLatencyBudgetSuspended"),
    )
}

/// The enforcer cannot act on what it sees: blind, someone's pause flags, another instance
/// leads, or a hand change.
fn enforcer_held_off(f: &Facts<'_>, c: &Cluster, v: &EnforcerView) -> Option<Headline> {
    let now = f.now;
    if v.phase == Phase::Holding {
        let reason = v.holding_reason.clone().unwrap_or_default();
        if let Some(flags) = reason.strip_prefix("flags ") {
            let flags = flags.replace(',', " and ");
            return Some(Headline {
                case: Case::PausedByHand,
                what: format!("Someone else set {flags}: recovery is paused by hand with {}, and the enforcer changes nothing until they are unset.", progress(c, 0.0)),
                todo: format!("Ask who set {flags} and why (`ceph log last 1000 info audit | grep 'osd set'`); `ceph osd unset` them once that pause is over."),
                runbook: Some("RecoveryBudgetEnforcerHolding".into()),
            });
        }
        let since = v
            .blind_since
            .map(|t| format!(" since {}", fmt_when(t, now)))
            .unwrap_or_default();
        let settings = match v.blind_restore_at {
            Some(t) if t > now => format!(
                "; if it stays blind, the operator's settings go back at {}, after --enforcer.blind-restore-after",
                fmt_when(t, now)
            ),
            Some(_) => "; the operator's settings go back now (--enforcer.blind-restore-after)".to_string(),
            None if v.applied.is_empty() => "; it holds none of the operator's settings".to_string(),
            None => String::new(),
        };
        return Some(said(
            Case::Blind,
            format!("The enforcer cannot see ({reason}){since}: it decides nothing on old data{settings}."),
            "Fix what it cannot read (the collector named, or Ceph itself: `ceph -s`); if clients suffer from a recovery meanwhile, slow it by hand as the runbook says.",
            Some("RecoveryBudgetEnforcerHolding"),
        ));
    }
    if v.leader == Some(false) {
        let doing = if c.recovering() {
            format!("Recovery is running: {}", progress(c, 0.0))
        } else {
            "No recovery is running".to_string()
        };
        return Some(match &v.lease_holder {
            Some(holder) => said(
                Case::Standby,
                format!("{doing}; another instance, {holder}, holds the enforcer's lease and acts for this cluster, and this one only watches."),
                &format!("Read the `ceph-recovery-budget status` of the leader, {holder}; this instance takes over by itself if the leader goes away."),
                None,
            ),
            None => said(
                Case::Standby,
                format!("{doing}; this instance does not hold the enforcer's lease and sees no other holder{}, so maybe no enforcer acts for this cluster.", v.lease_error.as_deref().map(|e| format!(" (last lease call: {e})")).unwrap_or_default()),
                "Check why no instance holds the lease (the `lease:` line below names the last failure).",
                Some("RecoveryBudgetNoEnforcerActs"),
            ),
        });
    }
    if v.phase == Phase::Overridden {
        return Some(said(
            Case::Overridden,
            format!("Someone changed a setting the enforcer had made (OVERRIDE): it changes nothing until this recovery ends and restores nothing after it; {}.", progress(c, 0.0)),
            "Nothing, if the hand change was meant; it stays after the recovery, so note it where your team will find it.",
            None,
        ));
    }
    None
}

/// "client p99 write 41.2 ms over the last 5m", or why there is none.
fn p99_now(v: &EnforcerView) -> String {
    match v.p99_seconds {
        Some(p) => format!(
            "client p99 write {} over the last {}",
            fmt_ms(p),
            fmt_window(v.p99_window_seconds)
        ),
        None => v
            .p99_note
            .clone()
            .unwrap_or_else(|| "no client writes in the window".to_string()),
    }
}

/// The rung in force, when, and p99 then and now: "rung 1 (high_client_ops) since 02:35:10Z
/// (12m0s ago), entered at client p99 write 38.2 ms over the last 5m; 33.0 ms now: better".
pub fn in_force(v: &EnforcerView, now: Time) -> Option<String> {
    Some(in_force_text(&InForce {
        name: &v.ladder_rung_name,
        since: v.action_since?,
        then: v.action_p99_seconds,
        now_p99: v.p99_seconds,
        window: v.p99_window_seconds,
        now,
    }))
}

/// What [`in_force_text`] says.
pub struct InForce<'a> {
    pub name: &'a str,
    pub since: Time,
    pub then: Option<f64>,
    pub now_p99: Option<f64>,
    pub window: f64,
    pub now: Time,
}

/// See [`in_force`]; "better or worse" is said, so that nobody has to compare numbers.
pub fn in_force_text(a: &InForce<'_>) -> String {
    let trend = match (a.then, a.now_p99) {
        (Some(x), Some(y)) if y < x => ": better",
        (Some(x), Some(y)) if y > x => ": worse",
        (Some(_), Some(_)) => ": the same",
        _ => "",
    };
    format!(
        "{} since {}, entered at client p99 write {} over the last {}; {} now{trend}",
        a.name,
        fmt_when(a.since, a.now),
        a.then.map_or_else(|| "(no writes)".to_string(), fmt_ms),
        fmt_window(a.window),
        a.now_p99
            .map_or_else(|| "no recent writes".to_string(), fmt_ms),
    )
}

fn recovering(f: &Facts<'_>, c: &Cluster, e: Option<&EnforcerView>) -> Headline {
    let now = f.now;
    let share = pause_share(e);
    if let Some((why, todo)) = stalled(f, c, e) {
        return Headline {
            case: Case::RecoveryStalled,
            what: format!("Recovery is stalled: {why}."),
            todo,
            runbook: Some("CephRecoveryStalled".into()),
        };
    }
    let run = format!("Recovery is running: {}", progress(c, share));
    let Some(v) = e else {
        let p99 = f
            .exporter_p99
            .map(|(p, w)| {
                format!(
                    "; client p99 write {} over the last {}",
                    fmt_ms(p),
                    fmt_window(w)
                )
            })
            .unwrap_or_default();
        return said(
            Case::RecoveryUnjudged,
            format!(
                "{run}{p99}; the enforcer is off, so nothing keeps client latency within a bound."
            ),
            "Nothing, unless clients suffer: then slow recovery by hand as the runbook says.",
            Some("RecoveryLatencyBudgetExceeded"),
        );
    };
    let (Some(bound), Some(p99)) = (v.bound_seconds, v.p99_seconds) else {
        if v.bound_seconds.is_none() {
            return said(
                Case::RecoveryUnjudged,
                format!(
                    "{run}; the enforcer has no bound to judge latency by ({}).",
                    v.baseline_note.as_deref().unwrap_or("no baseline")
                ),
                "Nothing urgent; give it a baseline measured without recovery (--enforcer.baseline: learned, a number or fio:FILE) so that the bound applies.",
                None,
            );
        }
        return said(
            Case::RecoveryWithinBound,
            format!(
                "{run}; {}, so there is no client latency to protect now.",
                p99_now(v)
            ),
            "Nothing to do: let recovery finish.",
            None,
        );
    };
    let vs = format!(
        "{} {} the bound {}",
        p99_now(v),
        if p99 > bound { "is above" } else { "is within" },
        fmt_ms(bound)
    );
    // The breach's length is as of the enforcer's last cycle, not as of now.
    let judged_at = v.updated_at.unwrap_or(now);
    let breach = if v.breach_seconds < 1.0 {
        format!(
            "{} has just gone above the bound {}",
            p99_now(v),
            fmt_ms(bound)
        )
    } else {
        format!(
            "{} has been above the bound {} for {}",
            p99_now(v),
            fmt_ms(bound),
            fmt_secs(v.breach_seconds)
        )
    };
    let acting = in_force(v, now);
    let observe = v.mode == Mode::Observe;
    if v.breached {
        let lasted = breach;
        if let Some((kind, until)) = &v.deferred {
            return said(
                Case::Deferred,
                format!("{run}; {lasted}, and the enforcer's {kind} is deferred by its change limits until {}.", fmt_when(*until, now)),
                "Nothing, unless clients cannot wait that long: then slow recovery by hand as the runbook says.",
                Some("RecoveryLatencyBudgetExceeded"),
            );
        }
        let cannot = if observe {
            Some("it only observes (--enforcer.mode observe) and changes nothing".to_string())
        } else if let Some((kind, at)) = &v.retry {
            Some(format!(
                "its {kind} failed and is tried again at {}",
                fmt_when(*at, now)
            ))
        } else if v.ladder_at_top {
            Some(format!(
                "its strongest rung allowed, {}, does not bring p99 within the bound",
                v.ladder_rung_name
            ))
        } else if v.phase == Phase::Breached {
            Some(format!(
                "it has no lever to pull (op queue {})",
                if v.op_queue.is_empty() {
                    "unknown"
                } else {
                    &v.op_queue
                }
            ))
        } else if !v.osds_not_taken.is_empty() {
            Some(format!(
                "OSDs did not take its setting: {}",
                v.osds_not_taken.join(", ")
            ))
        } else {
            None
        };
        if let Some(why) = cannot {
            return said(
                Case::BoundNotHeld,
                format!("{run}; {lasted}, and the enforcer cannot bring it down: {why}."),
                "Decide now: slow recovery by hand, or accept the latency and document why (runbook).",
                Some("RecoveryLatencyBudgetExceeded"),
            );
        }
        const CLIMBS: &str = "Nothing yet: the enforcer judges each rung after --enforcer.ladder-settle and climbs if p99 stays above the bound; decide by hand only if it says it has no stronger rung.";
        if let Some(acting) = acting {
            // Rung 1 entered by a NOTHING_TO_DO (the OSDs ran the throttle profile already):
            // say so, and that the next rung does not wait for an effect that cannot come.
            let noop = v.ladder_rung == 1
                && v.decisions
                    .iter()
                    .rev()
                    .find(|d| d.event == "NOTHING_TO_DO")
                    .is_some_and(|d| v.action_since.is_some_and(|s| (d.time - s).abs() < 1.0));
            let noop = if noop {
                " (which the OSDs already ran, so nothing changed; the next rung is judged at the next cycle)"
            } else {
                ""
            };
            return said(
                Case::EnforcerActing,
                format!("{run}; {lasted}; the enforcer holds {acting}{noop}."),
                CLIMBS,
                Some("RecoveryLatencyBudgetExceeded"),
            );
        }
        if v.ladder_rung >= 1 && v.phase == Phase::Throttled {
            // Its first rung was the OSDs' setting already (lab, 2026-12-01: Pacific runs
            // high_client_ops by default): nothing changed, so no action to date it by; the
            // decision that said so does.
            let since = v
                .decisions
                .iter()
                .rev()
                .find(|d| d.event == "NOTHING_TO_DO")
                .map(|d| format!(" since {}", fmt_when(d.time, now)))
                .unwrap_or_default();
            return said(
                Case::EnforcerActing,
                format!(
                    "{run}; {lasted}; the enforcer holds {}{since}, which the OSDs already ran, so nothing changed, and judges the next rung after --enforcer.ladder-settle.",
                    v.ladder_rung_name
                ),
                CLIMBS,
                Some("RecoveryLatencyBudgetExceeded"),
            );
        }
        let acts_at = judged_at - v.breach_seconds + v.breach_for_seconds;
        return said(
            Case::BreachWaiting,
            format!(
                "{run}; {lasted}, and the enforcer acts at {} if it lasts (after --enforcer.for {}).",
                fmt_when(acts_at.max(now), now),
                fmt_secs(v.breach_for_seconds)
            ),
            "Nothing yet: the enforcer throttles recovery if the breach lasts; watch p99.",
            Some("RecoveryLatencyBudgetExceeded"),
        );
    }
    match acting {
        Some(acting) => said(
            Case::EnforcerActing,
            format!("{run}; {vs}, held by the enforcer's {acting}."),
            "Nothing to do: let recovery finish; the enforcer gives back the operator's settings after it.",
            None,
        ),
        None => said(
            Case::RecoveryWithinBound,
            format!("{run}; {vs}."),
            "Nothing to do: let recovery finish.",
            None,
        ),
    }
}

/// OSDs down or out with nothing left to recover: the cluster runs with less room for the next
/// failure until they are back or replaced.
const OSDS_MISSING_TODO: &str = "Nothing urgent: bring the down OSDs back or replace them (`ceph osd tree down`); when one is in again, data moves back to it (a recovery).";

fn quiet(f: &Facts<'_>, c: &Cluster, e: Option<&EnforcerView>) -> Headline {
    let now = f.now;
    // "3 of 4 OSDs up, 3 in", when some are down or out.
    let missing = match c.osds {
        Some((n, up, inn)) if up < n || inn < n => Some(format!("{up} of {n} OSDs up, {inn} in")),
        _ => None,
    };
    let todo = if missing.is_some() {
        OSDS_MISSING_TODO
    } else {
        "Nothing to do."
    };
    if let Some(v) = e {
        if v.phase == Phase::Settling {
            let back = v
                .recovery_ended_at
                .map(|t| {
                    format!(
                        " at {}; the enforcer gives back the operator's settings at {}, after --enforcer.settle {}",
                        fmt_when(t, now),
                        fmt_when((t + v.settle_seconds).max(now), now),
                        fmt_secs(v.settle_seconds)
                    )
                })
                .unwrap_or_else(|| "; the enforcer gives back the operator's settings after --enforcer.settle".to_string());
            let osds = missing
                .as_deref()
                .map(|m| format!("; {m}"))
                .unwrap_or_default();
            return said(
                Case::Settling,
                format!("Recovery finished{back}{osds}."),
                todo,
                None,
            );
        }
        if v.baseline_suspect {
            return said(
                Case::BaselineSuspect,
                format!(
                    "No recovery is running, yet {} has stayed above the bound {} ({} x baseline {}) for {} or more: the baseline looks too low, and every recovery would start in breach.",
                    p99_now(v),
                    v.bound_seconds.map(fmt_ms).unwrap_or_default(),
                    v.multiplier,
                    v.baseline_seconds.map(fmt_ms).unwrap_or_default(),
                    fmt_secs(v.baseline_suspect_after_seconds)
                ),
                "Measure the baseline again without recovery and set it with --enforcer.baseline: `learned`, a number, or `fio:FILE` (a fio report).",
                Some("RecoveryBudgetBaselineSuspect"),
            );
        }
    }
    let osds = match c.osds {
        Some((n, up, inn)) if up == n && inn == n => format!("all {n} OSDs up and in"),
        Some((n, up, inn)) => format!("{up} of {n} OSDs up, {inn} in"),
        None => "OSDs not reported".to_string(),
    };
    let clean = c.word("clean");
    let pgs = if clean == c.pgs {
        format!("all {} PGs clean", c.pgs)
    } else {
        format!("{clean} of {} PGs clean", c.pgs)
    };
    let p99 = match e {
        Some(v) => match (v.p99_seconds, v.bound_seconds) {
            (Some(p), Some(b)) => format!(
                "; {} ({} the bound {} that applies during recovery)",
                p99_now(v),
                if p > b { "above" } else { "within" },
                fmt_ms(b)
            ),
            _ => format!("; {}", p99_now(v)),
        },
        None => f
            .exporter_p99
            .map(|(p, w)| {
                format!(
                    "; client p99 write {} over the last {}",
                    fmt_ms(p),
                    fmt_window(w)
                )
            })
            .unwrap_or_default(),
    };
    said(
        Case::Healthy,
        format!("No recovery: {osds}, {pgs}{p99}."),
        todo,
        None,
    )
}

#[cfg(test)]
mod tests;
