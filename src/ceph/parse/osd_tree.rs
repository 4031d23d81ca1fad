//! `ceph osd tree --format json`: which host each OSD sits under (for `--latency.aggregate
//! host`). `nodes[]` holds buckets (`type` "root", "host", "rack", ...) with `children` ids and
//! devices (`id` >= 0); an OSD's host is the `host` bucket listing it.

use std::collections::BTreeMap;

use super::json::{self, Path};
use super::ParseError;

/// `osd.N` -> host name.
pub fn hosts_of_osds(out: &[u8]) -> Result<BTreeMap<String, String>, ParseError> {
    let v = json::parse_value(out)?;
    let root = Path::Root;
    let top = json::as_object(&v, &root)?;
    let nodes_at = root.key("nodes");
    let nodes = match top.get("nodes") {
        Some(n) => json::as_array(n, &nodes_at)?,
        None => return Err(nodes_at.missing("an array")),
    };
    let mut out = BTreeMap::new();
    for (i, node) in nodes.iter().enumerate() {
        let at = nodes_at.index(i);
        let node = json::as_object(node, &at)?;
        if json::maybe_str(node, "type", &at)? != Some("host") {
            continue;
        }
        let name = json::req_str(node, "name", &at)?;
        let children_at = at.key("children");
        let children = match node.get("children") {
            Some(c) => json::as_array(c, &children_at)?,
            None => continue,
        };
        for (j, child) in children.iter().enumerate() {
            let id = json::as_f64(child, &children_at.index(j))?;
            if id >= 0.0 {
                out.insert(format!("osd.{}", id as u64), name.to_string());
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ceph::parse::test_support::{fixture, hostile_inputs};

    #[test]
    fn the_lab_osds_sit_on_one_host() {
        let hosts = hosts_of_osds(&fixture("lab/healthy.osd-tree.out")).unwrap();
        assert_eq!(hosts.len(), 4);
        assert!(hosts.values().all(|h| h == "vm"), "{hosts:?}");
    }

    #[test]
    fn several_hosts_and_racks() {
        let out = br#"{"nodes":[{"id":-1,"name":"default","type":"root","children":[-2]},
            {"id":-2,"name":"rack1","type":"rack","children":[-3,-4]},
            {"id":-3,"name":"node1","type":"host","children":[0,2]},
            {"id":-4,"name":"node2","type":"host","children":[1]},
            {"id":0,"name":"osd.0","type":"osd"}],"stray":[{"id":7,"name":"osd.7"}]}"#;
        let hosts = hosts_of_osds(out).unwrap();
        assert_eq!(hosts["osd.0"], "node1");
        assert_eq!(hosts["osd.1"], "node2");
        assert_eq!(hosts["osd.2"], "node1");
        // A stray OSD (in no host) has no host: the caller names it.
        assert!(!hosts.contains_key("osd.7"));
    }

    #[test]
    fn hostile_inputs_are_errors() {
        for (what, input) in hostile_inputs() {
            assert!(hosts_of_osds(&input).is_err(), "{what}");
        }
        let e = hosts_of_osds(br#"{"nodes":[{"type":"host","children":[0]}]}"#).unwrap_err();
        assert!(e.to_string().contains("name"), "{e}");
    }
}
