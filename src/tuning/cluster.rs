//! What the tuning commands ask of and do to the cluster, over [`Client`]: read the config
//! database, the daemons' running values and the object counts; set and remove one option.

use std::collections::{BTreeMap, BTreeSet};

use crate::ceph::ops;
use crate::ceph::parse::{self, config_dump::ConfigEntry, ParseError};
use crate::ceph::{CephCommand, Client};

use super::knowledge::SchedulerFacts;
use super::TuningError;

pub use crate::ceph::ops::{
    config_dump, config_get_osd, osd_flags, osd_section_value, osd_values, same_option, status,
};

/// Entries for `name` that beat the section-wide `osd` value for some OSDs (a per-daemon
/// section or a mask), as "osd.3 = 1" lines for warnings.
pub fn narrower_values(entries: &[ConfigEntry], name: &str) -> Vec<String> {
    entries
        .iter()
        .filter(|e| same_option(&e.name, name))
        .filter(|e| e.section.starts_with("osd.") || (e.section == "osd" && !e.mask.is_empty()))
        .map(|e| {
            if e.mask.is_empty() {
                format!("{} = {}", e.section, e.value)
            } else {
                format!("{}/{} = {}", e.section, e.mask, e.value)
            }
        })
        .collect()
}

pub use crate::ceph::parse::config_value::same_value;

/// The scheduler the OSDs run, from the daemons themselves (a value in ceph.conf beats the
/// config database, so the database alone can be wrong). `warnings` says when OSDs disagree.
pub async fn scheduler_facts<C: Client>(
    client: &C,
) -> Result<(SchedulerFacts, Vec<String>), TuningError> {
    let mut warnings = Vec::new();
    let (queues, _) = osd_values(client, "osd_op_queue").await?;
    let op_queue = agreed("osd_op_queue", &queues, &mut warnings);
    let mclock_profile = match osd_values(client, "osd_mclock_profile").await {
        Ok((profiles, _)) => agreed("osd_mclock_profile", &profiles, &mut warnings),
        Err(_) => None,
    };
    // Absent before Reef: the option is unknown to the daemon, which reads as false.
    let override_recovery_settings =
        match osd_values(client, "osd_mclock_override_recovery_settings").await {
            Ok((v, _)) => v.values().all(|v| same_value(v, "true")) && !v.is_empty(),
            Err(_) => false,
        };
    // The release the advice is for: one major version on every OSD, else none (mid-upgrade,
    // or `versions` refused: the advice then covers every release).
    let osd_release = match ops::osd_versions(client).await {
        Ok(v) => {
            let majors: BTreeSet<Option<u32>> = v.keys().map(|o| o.major).collect();
            match majors.into_iter().collect::<Vec<_>>().as_slice() {
                [Some(m)] => Some(*m),
                _ => None,
            }
        }
        Err(_) => None,
    };
    Ok((
        SchedulerFacts {
            op_queue,
            mclock_profile,
            override_recovery_settings,
            osd_release,
        },
        warnings,
    ))
}

fn agreed(
    key: &str,
    values: &BTreeMap<String, String>,
    warnings: &mut Vec<String>,
) -> Option<String> {
    let mut distinct: Vec<&String> = values.values().collect();
    distinct.sort();
    distinct.dedup();
    match distinct.as_slice() {
        [one] => Some((*one).clone()),
        [] => None,
        _ => {
            warnings.push(format!(
                "the OSDs do not agree on {key}: {}",
                values
                    .iter()
                    .map(|(osd, v)| format!("{osd}={v}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
            None
        }
    }
}

pub async fn set<C: Client>(client: &C, name: &str, value: &str) -> Result<(), TuningError> {
    Ok(ops::config_set_osd(client, name, value).await?)
}

pub async fn rm<C: Client>(client: &C, name: &str) -> Result<(), TuningError> {
    Ok(ops::config_rm_osd(client, name).await?)
}

/// Puts `name` back to `before` in the `osd` section (`None`: removes it) and checks the config
/// database says so afterwards.
pub async fn restore<C: Client>(
    client: &C,
    name: &str,
    before: Option<&str>,
) -> Result<(), TuningError> {
    match before {
        Some(v) => set(client, name, v).await?,
        None => rm(client, name).await?,
    }
    let now = osd_section_value(&config_dump(client).await?, name);
    let restored = match (before, now.as_deref()) {
        (None, None) => true,
        (Some(b), Some(n)) => same_value(b, n),
        _ => false,
    };
    if restored {
        Ok(())
    } else {
        Err(TuningError::Cluster(format!(
            "after restoring {name} the config database shows {} instead of {}: check `ceph config dump | grep {name}`",
            now.as_deref().unwrap_or("not set"),
            before.unwrap_or("not set")
        )))
    }
}

/// `ceph osd unset FLAG`.
pub async fn unset_flag<C: Client>(client: &C, flag: &str) -> Result<(), TuningError> {
    Ok(ops::osd_unset_flag(client, flag).await?)
}

/// Object copies per OSD (`ceph pg ls`: each PG's objects count once on every OSD of its up
/// set), sorted fullest first: what one failed OSD would leave to recover.
pub async fn object_copies_per_osd<C: Client>(
    client: &C,
) -> Result<Vec<(String, u64)>, TuningError> {
    Ok(ops::run_parsed(client, CephCommand::new(["pg", "ls"]), objects_per_osd).await?)
}

pub fn objects_per_osd(out: &[u8]) -> Result<Vec<(String, u64)>, ParseError> {
    use parse::json::{self as j, Path};
    let v = j::parse_value(out)?;
    let root = Path::Root;
    // `pg ls` prints {"pg_ready":..,"pg_stats":[..]}; older releases a bare array.
    let stats = match &v {
        serde_json::Value::Array(a) => a,
        other => {
            let obj = j::as_object(other, &root)?;
            match obj.get("pg_stats") {
                Some(serde_json::Value::Array(a)) => a,
                Some(o) => return Err(root.key("pg_stats").mismatch("an array", o)),
                None => return Err(root.key("pg_stats").missing("an array")),
            }
        }
    };
    let mut per_osd: BTreeMap<i64, u64> = BTreeMap::new();
    let stats_at = root.key("pg_stats");
    for (i, pg) in stats.iter().enumerate() {
        let at = stats_at.index(i);
        let pg = j::as_object(pg, &at)?;
        let sum_at = at.key("stat_sum");
        let objects = match pg.get("stat_sum") {
            Some(s) => j::opt_u64(j::as_object(s, &sum_at)?, "num_objects", &sum_at)?,
            None => 0,
        };
        let up_at = at.key("up");
        let up = match pg.get("up") {
            Some(serde_json::Value::Array(a)) => a,
            Some(o) => return Err(up_at.mismatch("an array", o)),
            None => return Err(up_at.missing("an array")),
        };
        for osd in up.iter().filter_map(serde_json::Value::as_i64) {
            // 2147483647 (or -1) marks a missing shard: no OSD holds it.
            if (0..i64::from(i32::MAX)).contains(&osd) {
                *per_osd.entry(osd).or_insert(0) += objects;
            }
        }
    }
    let mut out: Vec<(String, u64)> = per_osd
        .into_iter()
        .map(|(id, n)| (format!("osd.{id}"), n))
        .collect();
    out.sort_by_key(|(_, n)| std::cmp::Reverse(*n));
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(section: &str, name: &str, value: &str, mask: &str) -> ConfigEntry {
        ConfigEntry::new(section, name, value, mask)
    }

    #[test]
    fn narrower_values_name_the_entries_that_beat_the_osd_section() {
        let dump = vec![
            entry("global", "osd_max_backfills", "3", ""),
            entry("osd", "osd_max_backfills", "2", "class:hdd"),
            entry("osd.3", "osd_max_backfills", "5", ""),
        ];
        assert_eq!(
            narrower_values(&dump, "osd_max_backfills"),
            vec!["osd/class:hdd = 2", "osd.3 = 5"]
        );
    }

    /// The release the advice is for: Reef's real `ceph versions` gives 18; OSDs mid-upgrade or
    /// a refused `versions` give none (the advice then covers every release).
    #[tokio::test]
    async fn the_release_is_the_one_every_osd_runs() {
        use crate::tuning::fake_cluster::FakeCluster;
        let reef = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/reef/healthy/ceph_versions.json"
        ))
        .unwrap();
        let mixed = r#"{"osd": {"ceph version 16.2.15 (618f440892089921c3e944a991122ddc44e60516) pacific (stable)": 2,
            "ceph version 18.2.7 (6b0e988052ec84cf2d4a54ff9bbbc5e720b621ad) reef (stable)": 2}}"#;
        for (versions, release) in [
            (Some(reef), Some(18)),
            (Some(mixed.to_string()), None),
            (None, None),
        ] {
            let c = FakeCluster::new(0.0);
            c.with(|s| s.versions = versions);
            let (facts, _) = scheduler_facts(&c).await.unwrap();
            assert_eq!(facts.osd_release, release);
        }
    }

    #[test]
    fn values_compare_by_meaning() {
        assert!(same_value("0.10", "0.1"));
        assert!(same_value("true", "1"));
        assert!(same_value(" 4", "4"));
        assert!(!same_value("4", "8"));
        assert!(!same_value("balanced", "high_client_ops"));
    }

    #[test]
    fn object_copies_count_on_every_osd_of_the_up_set() {
        let out = br#"{"pg_ready":true,"pg_stats":[
            {"pgid":"1.0","stat_sum":{"num_objects":10},"up":[0,1,2],"acting":[0,1,2]},
            {"pgid":"1.1","stat_sum":{"num_objects":5},"up":[1,2,2147483647],"acting":[1,2]},
            {"pgid":"1.2","stat_sum":{},"up":[3],"acting":[3]}]}"#;
        assert_eq!(
            objects_per_osd(out).unwrap(),
            vec![
                ("osd.1".to_string(), 15),
                ("osd.2".to_string(), 15),
                ("osd.0".to_string(), 10),
                ("osd.3".to_string(), 0)
            ]
        );
        let real = std::fs::read(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/undersized/ceph_pg_ls_undersized.json"
        ))
        .unwrap();
        assert!(!objects_per_osd(&real).unwrap().is_empty());
        assert!(objects_per_osd(b"{\"pg_stats\":3}")
            .unwrap_err()
            .to_string()
            .contains("pg_stats"));
        assert!(objects_per_osd(b"[{\"stat_sum\":{}}]")
            .unwrap_err()
            .to_string()
            .contains("up"));
    }
}
