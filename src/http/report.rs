//! The status report: what on-call reads first, as JSON (`/api/status`) and as plain lines
//! (`ceph-recovery-budget status`, the landing page).

use serde::{Deserialize, Serialize};
use tokio::time::Instant;

use crate::collect::safety::pool_safety;
use crate::collect::Snapshot;
use crate::enforcer::EnforcerView;
use crate::units::{fmt_ms, fmt_secs};

#[derive(Debug, Clone, Serialize, Deserialize, Default)]
pub struct StatusReport {
    pub version: String,
    pub health: Option<String>,
    pub degraded_objects: Option<u64>,
    pub misplaced_objects: Option<u64>,
    pub recovery_objects_per_second: Option<f64>,
    pub recovery_objects_per_second_ceph: Option<f64>,
    pub pgs_total: Option<u64>,
    pub pgs_undersized: Option<u64>,
    pub pools_at_min_size: Vec<String>,
    pub write_latency_seconds: Vec<(f64, f64)>,
    pub mclock_profiles: Vec<(String, String)>,
    pub collectors_down: Vec<String>,
    pub enforcer: Option<serde_json::Value>,
}

impl StatusReport {
    pub fn build(snapshot: &Snapshot, view: Option<EnforcerView>, now: Instant) -> Self {
        let mut r = StatusReport {
            version: env!("CARGO_PKG_VERSION").to_string(),
            ..Default::default()
        };
        if let Some(s) = snapshot.fresh(&snapshot.status, now) {
            r.health = s.status.health.clone();
            r.degraded_objects = Some(s.status.degraded_objects);
            r.misplaced_objects = Some(s.status.misplaced_objects);
            r.recovery_objects_per_second = s.recovery_rate_delta;
            r.recovery_objects_per_second_ceph = Some(s.status.recovering_objects_per_sec);
            r.pgs_total = Some(s.status.num_pgs);
            r.pgs_undersized = Some(
                s.status
                    .pg_state_word_counts()
                    .get("undersized")
                    .copied()
                    .unwrap_or(0),
            );
        }
        if let (Some(pools), Some(pgs)) = (
            snapshot.fresh(&snapshot.pools, now),
            snapshot.fresh(&snapshot.undersized_pgs, now),
        ) {
            r.pools_at_min_size = pool_safety(pools, pgs)
                .into_iter()
                .filter(|p| p.at_min_size())
                .map(|p| p.pool.name)
                .collect();
        }
        if let Some(l) = snapshot.fresh(&snapshot.latency, now) {
            r.write_latency_seconds = l.quantiles.clone();
        }
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

    /// A few plain lines, for a terminal at 3 a.m.
    pub fn lines(&self) -> Vec<String> {
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
            let p99 = get_f("p99_seconds")
                .map(fmt_ms)
                .unwrap_or_else(|| "no writes".into());
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
        } else if let Some((_, p99)) = self
            .write_latency_seconds
            .iter()
            .find(|(q, _)| (*q - 0.99).abs() < 1e-9)
        {
            out.push(format!("latency: client p99 write {}", fmt_ms(*p99)));
        }
        match (self.degraded_objects, self.misplaced_objects) {
            (Some(d), Some(m)) if d + m > 0 => {
                let ceph = self.recovery_objects_per_second_ceph.unwrap_or(0.0);
                let rate = match self.recovery_objects_per_second {
                    Some(r) if r > 0.0 => format!(
                        "{r:.0} obj/s, about {} to finish at this rate",
                        fmt_secs((d + m) as f64 / r)
                    ),
                    Some(_) => "no progress over the recovery window".to_string(),
                    None => "rate not measured yet".to_string(),
                };
                out.push(format!(
                    "recovery: {d} degraded + {m} misplaced objects, {rate} (Ceph says {ceph:.0} obj/s)"
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
            out.push(format!(
                "redundancy: {u} PGs undersized; pools at min_size: {pools}"
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
            out.push(format!(
                "ladder: {}{}, paused {} in this recovery",
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

#[cfg(test)]
mod tests {
    use super::*;

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
                "ladder_rung": 3, "ladder_rung_name": "rung 3 (pause nobackfill+norecover 40% of each 60 s)",
                "paused": true, "paused_seconds": 95.0, "flags_set": ["nobackfill", "norecover"],
                "decisions": []
            })),
            ..Default::default()
        };
        let text = r.lines().join("\n");
        assert!(
            text.contains("ladder: rung 3 (pause nobackfill+norecover 40% of each 60 s) (paused now), paused 1m35s in this recovery"),
            "{text}"
        );
        assert!(
            text.contains("OSD map flags set by the enforcer: nobackfill, norecover"),
            "{text}"
        );
        assert!(!text.contains("no record"), "{text}");
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
