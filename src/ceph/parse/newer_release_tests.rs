//! The parsers on real outputs of the newer releases: Reef 18.2.7 and Tentacle 20.2.4, recorded
//! from `CEPH_LAB_RELEASE=reef|tentacle scripts/ceph-lab` in the states the Pacific fixtures
//! cover (`tests/fixtures/reef/README.md`).

use super::test_support::fixture;
use super::{
    config_dump, config_value, histogram, osd_dump, osd_tree, perf_dump, pgs, pools, status, tell,
    versions,
};

const RELEASES: &[(&str, &str, u32)] = &[("reef", "reef", 18), ("tentacle", "tentacle", 20)];
const STATES: &[&str] = &[
    "healthy",
    "rebalance",
    "undersized",
    "recovery",
    "two-osds-down",
];

fn each(mut f: impl FnMut(&str, &str, u32, &str, &dyn Fn(&str) -> Vec<u8>)) {
    for &(dir, release, major) in RELEASES {
        for &state in STATES {
            let read = |name: &str| fixture(&format!("{dir}/{state}/{name}"));
            f(dir, release, major, state, &read);
        }
    }
}

#[test]
fn status_in_every_state() {
    each(|dir, _, _, state, read| {
        let s = status::parse(&read("ceph_status.json"))
            .unwrap_or_else(|e| panic!("{dir}/{state}: {e}"));
        let c = s.recovery_counts();
        assert_eq!(s.num_pgs, 33, "{dir}/{state}");
        assert_eq!(s.num_osds, Some(4), "{dir}/{state}");
        match state {
            "healthy" => assert!(!c.running(), "{dir}/{state}: {}", c.describe()),
            "rebalance" => assert!(
                c.misplaced_objects > 0 && c.undersized_pgs == 0,
                "{dir}/{state}: {}",
                c.describe()
            ),
            "undersized" => {
                assert!(
                    c.undersized_pgs > 0 && c.degraded_objects > 0,
                    "{dir}/{state}: {}",
                    c.describe()
                );
                assert_eq!(s.osds_down_in(), 1, "{dir}/{state}");
                assert!(
                    s.osdmap_flags().contains(&"noout".to_string()),
                    "{dir}/{state}"
                );
            }
            // Below min_size: 12 PGs `undersized+degraded+peered`, no I/O.
            "two-osds-down" => {
                assert_eq!(c.undersized_pgs, 33, "{dir}/{state}: {}", c.describe());
                assert_eq!(s.osds_down_in(), 2, "{dir}/{state}");
                assert!(s
                    .pgs_by_state
                    .iter()
                    .any(|(name, n)| name == "undersized+degraded+peered" && *n == 12));
            }
            _ => assert!(c.degraded_objects > 0, "{dir}/{state}: {}", c.describe()),
        }
    });
}

#[test]
fn pgs_pools_osd_map_and_tree() {
    each(|dir, _, _, state, read| {
        let ctx = format!("{dir}/{state}");
        let brief = pgs::parse(&read("ceph_pg_dump_pgs_brief.json"))
            .unwrap_or_else(|e| panic!("{ctx}: {e}"));
        assert_eq!(brief.len(), 33, "{ctx}");
        let under = pgs::undersized(&read("ceph_pg_ls_undersized.json"))
            .unwrap_or_else(|e| panic!("{ctx}: {e}"));
        match state {
            "healthy" | "rebalance" => assert_eq!(under.total(), 0, "{ctx}"),
            "undersized" => assert_eq!(under.total(), 20, "{ctx}"),
            _ => {}
        }
        let pools = pools::parse(&read("ceph_osd_pool_ls_detail.json"))
            .unwrap_or_else(|e| panic!("{ctx}: {e}"));
        let rbd = pools.iter().find(|p| p.name == "rbd-vms").expect("rbd-vms");
        assert_eq!((rbd.size, rbd.min_size, rbd.pg_num), (3, 2, 32), "{ctx}");
        assert!(
            pools.iter().any(|p| p.name == ".mgr"),
            "{ctx}: no .mgr pool"
        );
        let flags =
            osd_dump::flags(&read("ceph_osd_dump.json")).unwrap_or_else(|e| panic!("{ctx}: {e}"));
        assert_eq!(
            flags.contains("noout"),
            matches!(state, "undersized" | "recovery" | "two-osds-down"),
            "{ctx}"
        );
        osd_dump::down_in(&read("ceph_osd_dump.json")).unwrap_or_else(|e| panic!("{ctx}: {e}"));
        let hosts = osd_tree::hosts_of_osds(&read("ceph_osd_tree.json"))
            .unwrap_or_else(|e| panic!("{ctx}: {e}"));
        assert_eq!(hosts.len(), 4, "{ctx}");
    });
}

#[test]
fn versions_config_and_counters() {
    each(|dir, release, major, state, read| {
        let ctx = format!("{dir}/{state}");
        let v = versions::osd_versions(&read("ceph_versions.json"))
            .unwrap_or_else(|e| panic!("{ctx}: {e}"));
        assert!(
            v.keys()
                .all(|k| k.release == release && k.major == Some(major)),
            "{ctx}: {v:?}"
        );
        // Both read mClock limits as shares of capacity: rung 2 writes `5%`, not IOPS, to them.
        assert!(
            v.keys()
                .all(|k| k.mclock_limit_unit() == Some(versions::LimitUnit::Share)),
            "{ctx}: {v:?}"
        );
        config_dump::parse(&read("ceph_config_dump.json")).unwrap_or_else(|e| panic!("{ctx}: {e}"));
        let profile =
            config_value::parse_plain(&read("ceph_config_get_osd_osd_mclock_profile.json"))
                .unwrap();
        assert_eq!(profile, "balanced", "{ctx}");
        let shown =
            config_value::parse_plain(&read("ceph_config_show_osd.0_osd_mclock_profile.txt"))
                .unwrap();
        assert_eq!(shown, "balanced", "{ctx}");
        histogram::parse_write_latency(&read("ceph_tell_osd.0_perf_histogram_dump.json"))
            .unwrap_or_else(|e| panic!("{ctx}: {e}"));
        perf_dump::parse_write_latency_sum(&read("ceph_tell_osd.0_perf_dump.json"))
            .unwrap_or_else(|e| panic!("{ctx}: {e}"));
        let all =
            String::from_utf8(read("ceph_tell_osd.STAR_perf_histogram_dump_f_json.txt")).unwrap();
        let replies: Vec<_> = tell::split(&all)
            .into_iter()
            .filter_map(Result::ok)
            .collect();
        let up = match state {
            "undersized" | "recovery" => 3,
            "two-osds-down" => 2,
            _ => 4,
        };
        assert_eq!(replies.len(), up, "{ctx}");
        for r in replies {
            histogram::parse_write_latency(r.body.as_bytes())
                .unwrap_or_else(|e| panic!("{ctx} {}: {e}", r.daemon));
        }
        let all = String::from_utf8(read(
            "ceph_tell_osd.STAR_config_get_osd_mclock_profile_f_json.txt",
        ))
        .unwrap();
        for r in tell::split(&all).into_iter().filter_map(Result::ok) {
            let p = config_value::parse_tell_config_get(r.body.as_bytes(), "osd_mclock_profile")
                .unwrap();
            assert_eq!(p, "balanced", "{ctx} {}", r.daemon);
        }
    });
}
