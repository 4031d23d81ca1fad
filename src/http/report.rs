//! The status report: what on-call reads first, as JSON (`/api/status`) and as plain lines
//! (`ceph-recovery-budget status`, the landing page).

use serde::{Deserialize, Serialize};
use tokio::time::Instant;

use super::headline::{self, Facts, Headline};
use crate::collect::safety::pool_safety;
use crate::collect::Snapshot;
use crate::enforcer::{EnforcerView, Time};
use crate::units::{fmt_ms, fmt_secs, fmt_window};

/// Missing fields read as empty: `status` may ask an exporter of another version.
#[derive(Debug, Clone, Serialize, Deserialize, Default)]
#[serde(default)]
pub struct StatusReport {
    pub version: String,
    /// When the exporter built this report (Unix seconds): "ago" in the lines counts from it,
    /// as in the headline.
    pub generated_at: Option<f64>,
    /// What is happening and what to do, one sentence each: what on-call reads first.
    pub headline: Option<Headline>,
    pub health: Option<String>,
    pub degraded_objects: Option<u64>,
    pub misplaced_objects: Option<u64>,
    /// Over the recovery window, from the recovery's start (see `recovery_rate_span_seconds`).
    pub recovery_objects_per_second: Option<f64>,
    /// Ceph's own rate now.
    pub recovery_objects_per_second_ceph: Option<f64>,
    /// Ceph's own rate averaged over the same time as `recovery_objects_per_second`.
    pub recovery_objects_per_second_ceph_window: Option<f64>,
    pub recovery_rate_span_seconds: Option<f64>,
    /// (OSDs, up, in).
    pub osds: Option<(u64, u64, u64)>,
    /// OSDs down but still in, by id, when the OSD map was read; the count is `osds_down_in`.
    pub osds_down_in_ids: Vec<u32>,
    pub osds_down_in: u64,
    pub noout: bool,
    pub pgs_total: Option<u64>,
    pub pgs_undersized: Option<u64>,
    /// PGs recovering, backfilling or waiting to (or stuck on a full OSD).
    pub pgs_moving: Option<u64>,
    pub pools_at_min_size: Vec<String>,
    pub write_latency_seconds: Vec<(f64, f64)>,
    /// The window those quantiles cover, seconds.
    pub write_latency_window_seconds: Option<f64>,
    pub mclock_profiles: Vec<(String, String)>,
    pub collectors_down: Vec<String>,
    pub enforcer: Option<serde_json::Value>,
}

impl StatusReport {
    pub fn build(snapshot: &Snapshot, view: Option<EnforcerView>, now: Instant) -> Self {
        let wall = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0.0, |d| d.as_secs_f64());
        Self::build_at(snapshot, view, now, wall)
    }

    /// [`Self::build`] at wall-clock time `wall` (Unix seconds).
    pub fn build_at(
        snapshot: &Snapshot,
        view: Option<EnforcerView>,
        now: Instant,
        wall: Time,
    ) -> Self {
        let mut r = StatusReport {
            version: env!("CARGO_PKG_VERSION").to_string(),
            generated_at: Some(wall),
            ..Default::default()
        };
        let safety = match (
            snapshot.fresh(&snapshot.pools, now),
            snapshot.fresh(&snapshot.undersized_pgs, now),
        ) {
            (Some(pools), Some(pgs)) => Some(pool_safety(pools, pgs)),
            _ => None,
        };
        let status = snapshot.fresh(&snapshot.status, now);
        let cluster = match status {
            Some(s) => Ok(headline::Cluster::from_parts(
                &s.status,
                s.recovery_rates,
                s.down_in.clone(),
                safety.clone(),
            )),
            None => Err(snapshot
                .collectors
                .iter()
                .find(|h| h.name == crate::collect::CollectorName::Status)
                .and_then(|h| snapshot.why_down(h, now))
                .unwrap_or_else(|| "the status collector does not run".to_string())),
        };
        if let Some(s) = status {
            r.health = s.status.health.clone();
            r.degraded_objects = Some(s.status.degraded_objects);
            r.misplaced_objects = Some(s.status.misplaced_objects);
            r.recovery_objects_per_second = s.recovery_rates.map(|w| w.ours);
            r.recovery_objects_per_second_ceph = Some(s.status.recovering_objects_per_sec);
            r.recovery_objects_per_second_ceph_window = s.recovery_rates.map(|w| w.ceph);
            r.recovery_rate_span_seconds = s.recovery_rates.map(|w| w.span.as_secs_f64());
            if let (Some(n), Some(up), Some(inn)) = (
                s.status.num_osds,
                s.status.num_up_osds,
                s.status.num_in_osds,
            ) {
                r.osds = Some((n, up, inn));
            }
            r.osds_down_in = s.status.osds_down_in();
            if let Some(Ok(d)) = &s.down_in {
                r.osds_down_in_ids = d.osds.clone();
                r.noout = d.noout;
            }
            r.noout |= s.status.osdmap_flags().iter().any(|f| f == "noout");
            r.pgs_total = Some(s.status.num_pgs);
            r.pgs_moving = Some(s.status.recovery_counts().pgs_moving);
            r.pgs_undersized = Some(
                s.status
                    .pg_state_word_counts()
                    .get("undersized")
                    .copied()
                    .unwrap_or(0),
            );
        }
        if let Some(safety) = safety {
            r.pools_at_min_size = safety
                .into_iter()
                .filter(|p| p.at_min_size())
                .map(|p| p.pool.name)
                .collect();
        }
        if let Some(l) = snapshot.fresh(&snapshot.latency, now) {
            r.write_latency_seconds = l.quantiles.clone();
            r.write_latency_window_seconds =
                Some(l.window_span.min(l.window).as_secs_f64()).filter(|w| *w > 0.0);
        }
        let exporter_p99 = r
            .write_latency_seconds
            .iter()
            .find(|(q, _)| (*q - 0.99).abs() < 1e-9)
            .map(|(_, v)| *v)
            .zip(r.write_latency_window_seconds);
        r.headline = Some(headline::headline(&Facts {
            now: wall,
            interval: snapshot.interval.as_secs_f64(),
            cluster,
            exporter_p99,
            enforcer: view.as_ref(),
        }));
        if let Some(s) = snapshot.fresh(&snapshot.schedulers, now) {
            r.mclock_profiles = s
                .iter()
                .filter_map(|(o, s)| s.mclock_profile.clone().map(|p| (o.clone(), p)))
                .collect();
        }
        r.collectors_down = snapshot
            .collectors
            .iter()
            .filter_map(|h| {
                snapshot
                    .why_down(h, now)
                    .map(|why| format!("{} ({why})", h.name.as_str()))
            })
            .collect();
        r.enforcer = view.and_then(|mut v| {
            // The report carries the last 10 decisions; /decisions has more.
            let n = v.decisions.len();
            v.decisions = v.decisions.split_off(n.saturating_sub(10));
            serde_json::to_value(v).ok()
        });
        r
    }

    /// A few plain lines, for a terminal at 3 a.m.: what is happening and what to do, then
    /// the details.
    /// "osd.1 is", "osd.1 and osd.2 are", "1 OSD is": the OSDs down but in.
    fn down_in_who(&self) -> String {
        let n = self.osds_down_in;
        let verb = if n == 1 { "is" } else { "are" };
        if self.osds_down_in_ids.is_empty() {
            return format!("{n} OSD{} {verb}", if n == 1 { "" } else { "s" });
        }
        let names: Vec<String> = self
            .osds_down_in_ids
            .iter()
            .map(|i| format!("osd.{i}"))
            .collect();
        let names = match names.split_last() {
            Some((last, rest)) if !rest.is_empty() => format!("{} and {last}", rest.join(", ")),
            _ => names.join(""),
        };
        format!("{names} {verb}")
    }

    pub fn lines(&self) -> Vec<String> {
        let mut out = self.headline_lines();
        out.extend(self.detail_lines());
        out
    }

    /// The two sentences, as `status` prints them.
    pub fn headline_lines(&self) -> Vec<String> {
        match &self.headline {
            Some(h) => vec![format!("NOW: {}", h.what), format!("DO: {}", h.todo)],
            None => Vec::new(),
        }
    }

    /// Everything after the two sentences (the landing page shows those apart).
    pub fn detail_lines(&self) -> Vec<String> {
        let mut out = Vec::new();
        let e = self.enforcer.as_ref();
        let get_f = |k: &str| e.and_then(|v| v.get(k)).and_then(|x| x.as_f64());
        let get_s = |k: &str| {
            e.and_then(|v| v.get(k))
                .and_then(|x| x.as_str())
                .map(str::to_string)
        };
        match e {
            Some(_) => out.push(format!(
                "enforcer: {} mode, state {}{}",
                get_s("mode").unwrap_or_default(),
                get_s("phase").unwrap_or_default().to_uppercase(),
                get_s("holding_reason")
                    .map(|r| format!(" ({r})"))
                    .unwrap_or_default()
            )),
            None => out.push("enforcer: off".to_string()),
        }
        let leader = e.and_then(|v| v.get("leader")).and_then(|x| x.as_bool());
        if let Some(leader) = leader {
            let location = get_s("lease_location").unwrap_or_default();
            let problem = get_s("lease_error")
                .map(|err| format!("; last lease call failed: {err}"))
                .unwrap_or_default();
            out.push(if leader {
                format!("lease: this instance ({}) holds it and acts ({location}){problem}", get_s("lease_instance").unwrap_or_default())
            } else {
                format!(
                    "lease: STANDBY, held by {}; this instance changes nothing ({location}){problem}",
                    get_s("lease_holder").unwrap_or_else(|| "nobody seen yet".into())
                )
            });
        }
        if e.is_some() {
            // Every p99 names its window.
            let window = get_f("p99_window_seconds").map(fmt_window);
            let p99 = match (get_f("p99_seconds"), &window) {
                (Some(p), Some(w)) => format!("{} over the last {w}", fmt_ms(p)),
                (Some(p), None) => fmt_ms(p),
                (None, _) => {
                    get_s("p99_note").map_or_else(|| "no writes".into(), |n| format!("none ({n})"))
                }
            };
            let mult = get_f("multiplier").unwrap_or(2.0);
            let breach = get_f("breach_seconds")
                .filter(|s| *s > 0.0)
                .map(|s| format!(", ABOVE the bound for {}", fmt_secs(s)))
                .unwrap_or_default();
            let bound = match (get_f("bound_seconds"), get_f("baseline_seconds")) {
                (Some(b), Some(base)) => {
                    format!("bound {} ({mult} x baseline {})", fmt_ms(b), fmt_ms(base))
                }
                _ => format!(
                    "no bound yet: {}",
                    get_s("baseline_note").unwrap_or_else(|| "baseline unknown".into())
                ),
            };
            out.push(format!("latency: client p99 write {p99}, {bound}{breach}"));
            if let Some(when) = in_force_line(e, self.generated_at) {
                out.push(format!("acting: {when}"));
            }
            if e.and_then(|v| v.get("baseline_suspect"))
                .and_then(|b| b.as_bool())
                == Some(true)
            {
                out.push(format!(
                    "baseline: LOOKS TOO LOW: without recovery p99 has stayed above the bound for {} or more; set --enforcer.baseline (learned, a number, or fio:FILE)",
                    fmt_secs(get_f("baseline_suspect_after_seconds").unwrap_or(900.0))
                ));
            }
            // What the enforcer learned about this cluster and acts on.
            for line in e
                .and_then(|v| v.get("memory"))
                .and_then(|m| m.as_array())
                .into_iter()
                .flatten()
                .filter_map(|l| l.as_str())
            {
                out.push(format!("memory: {line}"));
            }
        } else if let Some((_, p99)) = self
            .write_latency_seconds
            .iter()
            .find(|(q, _)| (*q - 0.99).abs() < 1e-9)
        {
            let window = self
                .write_latency_window_seconds
                .map(|w| format!(" over the last {}", fmt_window(w)))
                .unwrap_or_default();
            out.push(format!(
                "latency: client p99 write {}{window}",
                fmt_ms(*p99)
            ));
        }
        match (self.degraded_objects, self.misplaced_objects) {
            (Some(d), Some(m)) if d + m > 0 => {
                let ceph = self.recovery_objects_per_second_ceph.unwrap_or(0.0);
                // Ours and Ceph's over the same time, so that they can be compared.
                let over = self
                    .recovery_rate_span_seconds
                    .map(|s| format!(" over the last {}", fmt_window(s)))
                    .unwrap_or_default();
                let ceph_same = self
                    .recovery_objects_per_second_ceph_window
                    .map(|c| format!("Ceph: {c:.0} obj/s over the same time, {ceph:.0} now"))
                    .unwrap_or_else(|| format!("Ceph says {ceph:.0} obj/s"));
                let share = get_f("pause_share").filter(|s| *s > 0.0 && *s < 1.0);
                let rate = match self.recovery_objects_per_second {
                    // An OSD down but in and no PG recovering: nothing can recover these
                    // objects until it is back or out, whatever the counts did (lab,
                    // 2026-12-01, osd.1 down with noout: "41 obj/s ..., about 6m6s to finish"
                    // from degraded counts moving under client writes).
                    _ if self.osds_down_in > 0 && self.pgs_moving == Some(0) => format!(
                        "nothing recovers them while {} down but in",
                        self.down_in_who()
                    ),
                    Some(r) if r > 0.0 => {
                        let eta = (d + m) as f64 / r;
                        let pause = share
                            .map(|s| format!(
                                "; the rate includes the enforcer's pause ({:.0}% of the time): about {} if it stopped pausing",
                                s * 100.0,
                                fmt_secs(eta * (1.0 - s))
                            ))
                            .unwrap_or_default();
                        format!(
                            "{r:.0} obj/s{over} ({ceph_same}), about {} to finish at this rate{pause}",
                            fmt_secs(eta)
                        )
                    }
                    Some(_) => format!("no progress{over} ({ceph_same})"),
                    None => format!("rate not measured yet ({ceph_same})"),
                };
                out.push(format!(
                    "recovery: {d} degraded + {m} misplaced objects, {rate}"
                ));
            }
            (Some(_), Some(_)) => {
                out.push("recovery: none (no degraded or misplaced objects)".to_string())
            }
            _ => out.push("recovery: unknown (cluster status not read)".to_string()),
        }
        if let Some(u) = self.pgs_undersized {
            let pools = if self.pools_at_min_size.is_empty() {
                "none".to_string()
            } else {
                self.pools_at_min_size.join(", ")
            };
            let osds = match self.osds {
                Some((n, up, inn)) if self.osds_down_in > 0 => {
                    let which = if self.osds_down_in_ids.is_empty() {
                        format!("{} down but in", self.osds_down_in)
                    } else {
                        let ids: Vec<String> = self
                            .osds_down_in_ids
                            .iter()
                            .map(|i| format!("osd.{i}"))
                            .collect();
                        format!("{} down but in", ids.join(", "))
                    };
                    format!(
                        "; OSDs: {up} of {n} up, {inn} in ({which}{})",
                        if self.noout { ", noout set" } else { "" }
                    )
                }
                Some((n, up, inn)) if up < n || inn < n => {
                    format!("; OSDs: {up} of {n} up, {inn} in")
                }
                _ => String::new(),
            };
            out.push(format!(
                "redundancy: {u} PGs undersized; pools at min_size: {pools}{osds}"
            ));
        }
        let mut profiles: Vec<&str> = self
            .mclock_profiles
            .iter()
            .map(|(_, p)| p.as_str())
            .collect();
        profiles.sort_unstable();
        profiles.dedup();
        if !profiles.is_empty() {
            out.push(format!("mclock profile in force: {}", profiles.join(", ")));
        }
        if let Some(applied) = e
            .and_then(|v| v.get("applied"))
            .and_then(|a| a.as_object())
            .filter(|a| !a.is_empty())
        {
            let set: Vec<String> = applied
                .iter()
                .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or("")))
                .collect();
            let simulated = e
                .and_then(|v| v.get("applied_simulated"))
                .and_then(|b| b.as_bool())
                .unwrap_or(false);
            if simulated {
                out.push(format!(
                    "observe mode, would have set: {} (nothing changed on the cluster)",
                    set.join(", ")
                ));
            } else {
                out.push(format!("set by the enforcer: {}", set.join(", ")));
            }
        }
        let num = |k: &str| e.and_then(|v| v.get(k)).and_then(|x| x.as_f64());
        if let Some(rung) = num("ladder_rung").filter(|r| *r >= 1.0) {
            let name = e
                .and_then(|v| v.get("ladder_rung_name"))
                .and_then(|n| n.as_str())
                .unwrap_or("");
            let during = if e
                .and_then(|v| v.get("recovery_active"))
                .and_then(|b| b.as_bool())
                .unwrap_or(true)
            {
                "this recovery"
            } else {
                "the last recovery"
            };
            out.push(format!(
                "ladder: {}{}, paused {} in {during}",
                if name.is_empty() {
                    format!("rung {rung}")
                } else {
                    name.to_string()
                },
                if e.and_then(|v| v.get("paused"))
                    .and_then(|b| b.as_bool())
                    .unwrap_or(false)
                {
                    " (paused now)"
                } else {
                    ""
                },
                crate::units::fmt_secs(num("paused_seconds").unwrap_or(0.0))
            ));
        }
        if let Some(line) = time_limit_line(e, self.generated_at) {
            out.push(line);
        }
        if let Some(line) = backfill_line(e) {
            out.push(line);
        }
        if let Some(flags) = e
            .and_then(|v| v.get("flags_set"))
            .and_then(|f| f.as_array())
            .filter(|f| !f.is_empty())
        {
            let names: Vec<&str> = flags.iter().filter_map(|f| f.as_str()).collect();
            out.push(format!(
                "OSD map flags set by the enforcer: {} (unset at shutdown and at start)",
                names.join(", ")
            ));
        }
        if let Some(found) = e
            .and_then(|v| v.get("unowned"))
            .and_then(|f| f.as_array())
            .filter(|f| !f.is_empty())
        {
            let names: Vec<String> = found
                .iter()
                .map(|u| {
                    let name = u.get("name").and_then(|n| n.as_str()).unwrap_or("");
                    match u.get("value").and_then(|v| v.as_str()) {
                        Some(v) => format!("{name}={v}"),
                        None => format!("{name} flag"),
                    }
                })
                .collect();
            out.push(format!(
                "on the cluster with no record of the enforcer setting them (left as they are): {}",
                names.join("; ")
            ));
        }
        if let Some(denied) = get_s("permission_denied") {
            out.push(denied);
        }
        if !self.collectors_down.is_empty() {
            out.push(format!(
                "collectors down: {}",
                self.collectors_down.join("; ")
            ));
        }
        if let Some(ds) = e
            .and_then(|v| v.get("decisions"))
            .and_then(|d| d.as_array())
        {
            if !ds.is_empty() {
                out.push("last decisions:".to_string());
                for d in ds.iter().rev().take(5) {
                    let t = d.get("time").and_then(|t| t.as_f64()).unwrap_or(0.0);
                    let when = humantime::format_rfc3339_seconds(
                        std::time::UNIX_EPOCH + std::time::Duration::from_secs_f64(t.max(0.0)),
                    );
                    out.push(format!(
                        "  {when} {}",
                        d.get("message").and_then(|m| m.as_str()).unwrap_or("")
                    ));
                }
            }
        }
        out
    }
}

/// "acting: rung 1 (high_client_ops) since 02:35:10Z (12m0s ago), entered at client p99 write
/// 38.2 ms over the last 5m; 33.0 ms now: better", from the view as served.
/// The backfill lever (rung 3): N, how many PGs backfill and how many the enforcer holds, the
/// balancer it paused. Observe mode holds nothing and says so.
fn backfill_line(e: Option<&serde_json::Value>) -> Option<String> {
    let e = e?;
    let n = e.get("backfill_limit").and_then(|x| x.as_u64());
    let held = e.get("backfill_held").and_then(|x| x.as_u64()).unwrap_or(0);
    if n.is_none() && held == 0 {
        return None;
    }
    let backfilling = e
        .get("backfill_backfilling")
        .and_then(|x| x.as_u64())
        .map(|b| format!("{b} PGs backfill now"))
        .unwrap_or_else(|| "PGs backfilling not read".to_string());
    let observe = e.get("mode").and_then(|m| m.as_str()) != Some("enforce");
    let limit = n.map_or_else(
        || "no limit in force, the PGs still held are being released".to_string(),
        |n| format!("at most {n} PGs backfilling at once"),
    );
    if observe {
        return Some(format!(
            "backfill lever (rung 3): observe mode, would allow {limit}; {backfilling}; nothing is held on the cluster"
        ));
    }
    let pgs: Vec<&str> = e
        .get("backfill_held_pgs")
        .and_then(|x| x.as_array())
        .into_iter()
        .flatten()
        .filter_map(|x| x.as_str())
        .collect();
    let more = if held as usize > pgs.len() {
        ", ..."
    } else {
        ""
    };
    let balancer = e
        .get("backfill_balancer_paused")
        .and_then(|x| x.as_str())
        .map(|b| {
            format!(
                "; mgr balancer paused by the enforcer (it was {b}), put back once nothing is held"
            )
        })
        .unwrap_or_default();
    Some(format!(
        "backfill lever (rung 3): {limit}; {backfilling}, {held} held by the enforcer with pg-upmap-items ({}{more}), released as p99 allows{balancer}",
        pgs.join(", ")
    ))
}

/// The level controller's time limit: by when this recovery is to end, and from what.
fn time_limit_line(e: Option<&serde_json::Value>, now: Option<f64>) -> Option<String> {
    let e = e?;
    let t = e.get("time_limit")?;
    let f = |k: &str| t.get(k).and_then(serde_json::Value::as_f64);
    let now = now.or_else(|| e.get("updated_at").and_then(serde_json::Value::as_f64))?;
    let (start, by) = (f("recovery_started_at")?, f("by")?);
    let past = if now >= by {
        ": spent, the operator's settings until the recovery ends"
    } else {
        ""
    };
    Some(format!(
        "time limit (--enforcer.max-slowdown {}): this recovery is to end by {}{past}; its {:.0} objects would take {} at the operator's settings ({} obj/s)",
        crate::enforcer::levels::controller::MaxSlowdown(Some(f("max_slowdown")?)),
        crate::units::fmt_when(by, now),
        f("objects")?,
        crate::units::fmt_secs(f("at_operators_by")? - start),
        crate::tuning::report::fmt_magnitude(f("reference_objects_per_second")?)
    ))
}

fn in_force_line(e: Option<&serde_json::Value>, now: Option<f64>) -> Option<String> {
    let e = e?;
    let f = |k: &str| e.get(k).and_then(serde_json::Value::as_f64);
    Some(headline::in_force_text(&headline::InForce {
        name: e.get("ladder_rung_name")?.as_str()?,
        since: f("action_since")?,
        then: f("action_p99_seconds"),
        now_p99: f("p99_seconds"),
        window: f("p99_window_seconds").unwrap_or(0.0),
        // The report's time, as the headline's "ago" (lab, 2026-12-01: the headline said
        // "(42s ago)" and this line "(30s ago)", counted from the enforcer's last cycle).
        now: now.or_else(|| f("updated_at"))?,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `status` during a recovery under the level controller's time limit: by when, and from
    /// what (the wording is the feature here).
    #[test]
    fn the_time_limit_says_by_when_the_recovery_is_to_end_and_from_what() {
        let report = |by: f64| StatusReport {
            generated_at: Some(1000.0),
            enforcer: Some(serde_json::json!({
                "mode": "enforce", "phase": "throttled", "multiplier": 2.0,
                // As the enforcer's state serves it.
                "time_limit": crate::enforcer::levels::controller::Deadline {
                    max_slowdown: 3.0,
                    reference: 145.2,
                    work: 43500.0,
                    start: 900.0,
                    at_operators: 1200.0,
                    by,
                },
                "decisions": []
            })),
            ..Default::default()
        };
        let line = |r: StatusReport| r.lines().into_iter().find(|l| l.starts_with("time limit"));
        let ahead = line(report(1800.0)).expect("a time limit line");
        for part in [
            "--enforcer.max-slowdown 3x",
            "(in 13m20s)",
            "43500 objects would take 5m0s",
            "(145 obj/s)",
        ] {
            assert!(ahead.contains(part), "{part}: {ahead}");
        }
        assert!(!ahead.contains("spent"), "{ahead}");
        let spent = line(report(990.0)).expect("a time limit line");
        assert!(
            spent.contains("spent, the operator's settings until the recovery ends"),
            "{spent}"
        );
        // No limit (or no recovery): no line.
        let none = StatusReport {
            generated_at: Some(1000.0),
            enforcer: Some(serde_json::json!({"mode": "enforce", "decisions": []})),
            ..Default::default()
        };
        assert_eq!(line(none), None);
    }

    #[test]
    fn observe_mode_and_a_missing_baseline_are_said_plainly() {
        let r = StatusReport {
            degraded_objects: Some(0),
            misplaced_objects: Some(0),
            enforcer: Some(serde_json::json!({
                "mode": "observe", "phase": "suspended", "multiplier": 2.0,
                "baseline_note": "baseline is learned from 1h0m0s of client writes without recovery and none has been measured yet",
                "applied": {"osd_mclock_profile": "high_recovery_ops"}, "applied_simulated": true,
                "decisions": []
            })),
            ..Default::default()
        };
        let text = r.lines().join("\n");
        assert!(text.contains("latency: client p99 write no writes, no bound yet: baseline is learned from 1h0m0s"), "{text}");
        assert!(text.contains("observe mode, would have set: osd_mclock_profile=high_recovery_ops (nothing changed on the cluster)"), "{text}");
        assert!(!text.contains("set by the enforcer"), "{text}");
        assert!(text.contains("recovery: none"), "{text}");
        assert!(!text.contains("ladder:"), "{text}");
    }

    #[test]
    fn the_ladder_and_the_enforcers_flags_are_shown() {
        let r = StatusReport {
            enforcer: Some(serde_json::json!({
                "mode": "enforce", "phase": "throttled", "multiplier": 2.0,
                "ladder_rung": 4, "ladder_rung_name": "rung 4 (pause nobackfill+norecover 40% of each 60 s)",
                "paused": true, "paused_seconds": 95.0, "flags_set": ["nobackfill", "norecover"],
                "decisions": []
            })),
            ..Default::default()
        };
        let text = r.lines().join("\n");
        assert!(
            text.contains("ladder: rung 4 (pause nobackfill+norecover 40% of each 60 s) (paused now), paused 1m35s in this recovery"),
            "{text}"
        );
        assert!(
            text.contains("OSD map flags set by the enforcer: nobackfill, norecover"),
            "{text}"
        );
        assert!(!text.contains("no record"), "{text}");
    }

    #[test]
    fn the_backfill_lever_says_n_what_it_holds_and_the_balancer() {
        let r = StatusReport {
            enforcer: Some(serde_json::json!({
                "mode": "enforce", "phase": "throttled", "multiplier": 2.0,
                "ladder_rung": 3, "ladder_rung_name": "rung 3 (backfill lever: at most 4 PGs backfilling at once)",
                "backfill_limit": 4, "backfill_held": 2, "backfill_held_pgs": ["2.1", "2.7"],
                "backfill_backfilling": 4, "backfill_balancer_paused": "on, mode upmap",
                "decisions": []
            })),
            ..Default::default()
        };
        let text = r.lines().join("\n");
        assert!(
            text.contains("backfill lever (rung 3): at most 4 PGs backfilling at once; 4 PGs backfill now, 2 held by the enforcer with pg-upmap-items (2.1, 2.7), released as p99 allows; mgr balancer paused by the enforcer (it was on, mode upmap), put back once nothing is held"),
            "{text}"
        );
        // Observe mode never says "held by the enforcer".
        let r = StatusReport {
            enforcer: Some(serde_json::json!({
                "mode": "observe", "phase": "throttled", "multiplier": 2.0,
                "ladder_rung": 3, "backfill_limit": 4, "backfill_held": 0,
                "backfill_backfilling": 19, "decisions": []
            })),
            ..Default::default()
        };
        let text = r.lines().join("\n");
        assert!(
            text.contains("backfill lever (rung 3): observe mode, would allow at most 4 PGs backfilling at once; 19 PGs backfill now; nothing is held on the cluster"),
            "{text}"
        );
        assert!(!text.contains("held by the enforcer"), "{text}");
    }

    #[test]
    fn status_opens_with_now_and_do_and_every_p99_names_its_window() {
        let r = StatusReport {
            headline: Some(Headline {
                case: headline::Case::EnforcerActing,
                what: "Recovery is running.".into(),
                todo: "Nothing to do.".into(),
                runbook: None,
            }),
            degraded_objects: Some(0),
            misplaced_objects: Some(6001),
            recovery_objects_per_second: Some(100.0),
            recovery_objects_per_second_ceph: Some(0.0),
            recovery_objects_per_second_ceph_window: Some(96.0),
            recovery_rate_span_seconds: Some(300.0),
            enforcer: Some(serde_json::json!({
                "mode": "enforce", "phase": "throttled", "multiplier": 2.0,
                "p99_seconds": 0.0205, "p99_window_seconds": 60.0,
                "bound_seconds": 0.032, "baseline_seconds": 0.016,
                "ladder_rung": 4, "ladder_rung_name": "rung 4 (pause nobackfill+norecover 40% of each 60 s)",
                "pause_share": 0.4, "paused": false, "paused_seconds": 95.0, "recovery_active": true,
                "action_since": 1.8e9, "action_p99_seconds": 0.0412, "updated_at": 1.8e9 + 720.0,
                "decisions": []
            })),
            ..Default::default()
        };
        let lines = r.lines();
        assert_eq!(lines[0], "NOW: Recovery is running.");
        assert_eq!(lines[1], "DO: Nothing to do.");
        let text = lines.join("\n");
        assert!(
            text.contains("latency: client p99 write 20.5 ms over the last 1m, bound 32.0 ms"),
            "{text}"
        );
        // The rung in force with the p99 that led to it and the p99 now, better or worse said.
        assert!(text.contains("acting: rung 4 (pause nobackfill+norecover 40% of each 60 s) since 08:00:00Z (12m0s ago), entered at client p99 write 41.2 ms over the last 1m; 20.5 ms now: better"), "{text}");
        // Built 12 s after the enforcer's last cycle: "ago" as of then, as in the headline.
        let later = StatusReport {
            generated_at: Some(1.8e9 + 732.0),
            ..r.clone()
        };
        assert!(
            later
                .lines()
                .join("\n")
                .contains("since 08:00:00Z (12m12s ago)"),
            "{:?}",
            later.lines()
        );
        // Our rate next to Ceph's over the same time (Ceph's 0 now is a pause slice), and the
        // time to finish with the pause counted.
        assert!(text.contains("recovery: 0 degraded + 6001 misplaced objects, 100 obj/s over the last 5m (Ceph: 96 obj/s over the same time, 0 now), about 1m0s to finish at this rate; the rate includes the enforcer's pause (40% of the time): about 36s if it stopped pausing"), "{text}");
        assert!(text.contains("paused 1m35s in this recovery"), "{text}");
        // The landing page shows the two sentences apart.
        assert_eq!(r.detail_lines().len() + 2, lines.len());
    }

    #[test]
    fn after_the_recovery_no_line_says_it_goes_on() {
        let r = StatusReport {
            degraded_objects: Some(0),
            misplaced_objects: Some(0),
            enforcer: Some(serde_json::json!({
                "mode": "enforce", "phase": "settling", "multiplier": 2.0,
                "ladder_rung": 1, "ladder_rung_name": "rung 1 (high_client_ops)",
                "paused_seconds": 95.0, "recovery_active": false,
                "baseline_suspect": true, "breach_for_seconds": 900.0,
                "p99_note": "no client writes in the last 15s, only older ones in the last 5m",
                "decisions": []
            })),
            ..Default::default()
        };
        let text = r.lines().join("\n");
        assert!(text.contains("paused 1m35s in the last recovery"), "{text}");
        assert!(!text.contains("in this recovery"), "{text}");
        assert!(text.contains("latency: client p99 write none (no client writes in the last 15s, only older ones in the last 5m), no bound yet"), "{text}");
        assert!(text.contains("baseline: LOOKS TOO LOW: without recovery p99 has stayed above the bound for 15m0s or more"), "{text}");
    }

    #[test]
    fn an_osd_down_but_in_gets_no_time_to_finish() {
        // Lab, 2026-12-01: osd.1 stopped with noout; degraded counts moved under client writes
        // and the line said "41 obj/s over the last 45s ..., about 6m6s to finish at this rate".
        let r = StatusReport {
            degraded_objects: Some(15024),
            misplaced_objects: Some(0),
            recovery_objects_per_second: Some(41.0),
            recovery_objects_per_second_ceph: Some(0.0),
            recovery_objects_per_second_ceph_window: Some(3.0),
            recovery_rate_span_seconds: Some(45.0),
            osds: Some((4, 3, 4)),
            osds_down_in: 1,
            osds_down_in_ids: vec![1],
            noout: true,
            pgs_undersized: Some(27),
            pgs_moving: Some(0),
            ..Default::default()
        };
        let text = r.lines().join("\n");
        assert!(
            text.contains("recovery: 15024 degraded + 0 misplaced objects, nothing recovers them while osd.1 is down but in\n"),
            "{text}"
        );
        assert!(!text.contains("to finish"), "{text}");
        // PGs recovering meanwhile (another OSD's recovery): the rate and time are said.
        let r = StatusReport {
            pgs_moving: Some(3),
            ..r
        };
        let text = r.lines().join("\n");
        assert!(text.contains("41 obj/s over the last 45s"), "{text}");
    }

    #[test]
    fn settings_found_without_a_record_are_named() {
        let r = StatusReport {
            enforcer: Some(serde_json::json!({
                "mode": "enforce", "phase": "holding", "multiplier": 2.0,
                "unowned": [
                    {"kind": "flag", "name": "nobackfill", "value": null},
                    {"kind": "config", "name": "osd_mclock_profile", "value": "custom"}
                ],
                "decisions": []
            })),
            ..Default::default()
        };
        let text = r.lines().join("\n");
        assert!(
            text.contains("on the cluster with no record of the enforcer setting them (left as they are): nobackfill flag; osd_mclock_profile=custom"),
            "{text}"
        );
    }

    /// A change Ceph refused for lack of a cephx capability is in /api/status and in the lines
    /// of `status`, naming what to grant.
    #[test]
    fn a_refused_change_is_said() {
        use crate::enforcer::effect::Refused;
        use crate::enforcer::{EnforcerState, Policy};
        let policy = Policy {
            ceph_user: Some("client.recovery-budget".into()),
            ..Policy::default()
        };
        let state = EnforcerState {
            refused: Some((
                Refused {
                    command: "ceph config set osd osd_mclock_profile high_client_ops".into(),
                    cap: crate::ceph::caps::config_change("set", "osd"),
                },
                1_800_000_000.0,
            )),
            ..Default::default()
        };
        let mut view = EnforcerView::new(&policy);
        view.update_mode_only(&policy, &state);
        let r = StatusReport::build(
            &Snapshot::empty(std::time::Duration::from_secs(15)),
            Some(view),
            Instant::now(),
        );
        let want = r#"PERMISSION DENIED: Ceph refused `ceph config set osd osd_mclock_profile high_client_ops` (EACCES): the cephx user client.recovery-budget lacks mon 'allow command "config set" with who=osd'"#;
        let api = serde_json::to_value(&r).expect("JSON");
        let said = api["enforcer"]["permission_denied"]
            .as_str()
            .unwrap_or_default();
        assert!(said.starts_with(want), "{said}");
        assert!(said.ends_with("(at 2027-01-15T08:00:00Z)"), "{said}");
        let text = r.lines().join("\n");
        assert!(text.contains(want), "{text}");
    }
}
