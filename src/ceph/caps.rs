//! The cephx capability each command needs, as docs/deployment.md lists them: what the error of
//! a refused (EACCES) command names, so that the operator knows what to grant.

use super::CephCommand;

/// What the exporter needs (enforcer off or observe), in `ceph auth caps` form.
pub const EXPORTER: &str = r#"mon 'allow r' mgr 'allow command "pg dump"' osd 'allow *'"#;

/// What the enforcer needs in enforce mode: the exporter's, plus changing the `osd` section of
/// the config database and the two pause flags (and no other flag), and for the backfill lever
/// (rung 3) adding and removing pg_upmap_items entries and pausing the mgr balancer.
pub const ENFORCER: &str = concat!(
    r#"mon 'allow r, allow command "config set" with who=osd, allow command "config rm" with who=osd, "#,
    r#"allow command "osd set" with key=nobackfill, allow command "osd set" with key=norecover, "#,
    r#"allow command "osd unset" with key=nobackfill, allow command "osd unset" with key=norecover, "#,
    r#"allow command "osd pg-upmap-items", allow command "osd rm-pg-upmap-items", "#,
    r#"allow command "config-key get" with key=ceph-recovery-budget/lease, "#,
    r#"allow command "config-key set" with key=ceph-recovery-budget/lease' "#,
    r#"mgr 'allow command "pg dump", allow command "balancer status", allow command "balancer on", "#,
    r#"allow command "balancer off", allow command "balancer mode"' osd 'allow *'"#
);

/// The grant `ceph config set|rm WHO ...` needs (`verb`: "set" or "rm").
pub fn config_change(verb: &str, who: &str) -> String {
    format!(r#"mon 'allow command "config {verb}" with who={who}'"#)
}

/// The grant `ceph osd set|unset FLAG` needs (`verb`: "set" or "unset").
pub fn osd_flag(verb: &str, flag: &str) -> String {
    format!(r#"mon 'allow command "osd {verb}" with key={flag}'"#)
}

/// The grant that lets a user run `command`.
pub fn needed(command: &CephCommand) -> String {
    let words: Vec<&str> = command.args.iter().map(String::as_str).collect();
    match words.as_slice() {
        ["config", verb @ ("set" | "rm"), who, ..] => config_change(verb, who),
        ["osd", verb @ ("set" | "unset"), flag] => osd_flag(verb, flag),
        // The backfill lever: the OSD map's upmap entries (mon, "osd" rw), the mgr balancer.
        ["osd", verb @ ("pg-upmap-items" | "rm-pg-upmap-items"), ..] => {
            format!(r#"mon 'allow command "osd {verb}"'"#)
        }
        ["balancer", verb, ..] => format!(r#"mgr 'allow command "balancer {verb}"'"#),
        // The lease's registration: `allow r` (even `rwx`) does not reach config-key.
        ["config-key", verb, key, ..] => {
            format!(r#"mon 'allow command "config-key {verb}" with key={key}'"#)
        }
        // The OSDs refuse `tell` with anything less (measured: r, rx, rwx, pool-scoped *).
        ["tell", ..] => "osd 'allow *'".to_string(),
        // Mgr commands; `allow r` covers every read-only one.
        ["pg", verb, ..] => format!(r#"mgr 'allow command "pg {verb}"' (or mgr 'allow r')"#),
        _ => "mon 'allow r'".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn needs(words: &[&str]) -> String {
        needed(&CephCommand::new(words.iter().copied()))
    }

    #[test]
    fn each_command_names_the_grant_the_docs_list_for_it() {
        assert_eq!(
            needs(&[
                "config",
                "set",
                "osd",
                "osd_mclock_profile",
                "high_client_ops"
            ]),
            r#"mon 'allow command "config set" with who=osd'"#
        );
        assert_eq!(
            needs(&["config", "rm", "osd", "osd_mclock_profile"]),
            r#"mon 'allow command "config rm" with who=osd'"#
        );
        assert_eq!(
            needs(&["osd", "set", "nobackfill"]),
            r#"mon 'allow command "osd set" with key=nobackfill'"#
        );
        assert_eq!(
            needs(&["osd", "unset", "norecover"]),
            r#"mon 'allow command "osd unset" with key=norecover'"#
        );
        assert_eq!(
            needs(&["tell", "osd.*", "perf", "histogram", "dump"]),
            "osd 'allow *'"
        );
        assert!(needs(&["pg", "dump", "pgs_brief"]).starts_with(r#"mgr 'allow command "pg dump"'"#));
        assert_eq!(needs(&["status"]), "mon 'allow r'");
        assert_eq!(
            needs(&["osd", "pg-upmap-items", "2.a", "2", "3"]),
            r#"mon 'allow command "osd pg-upmap-items"'"#
        );
        assert_eq!(
            needs(&["osd", "rm-pg-upmap-items", "2.a"]),
            r#"mon 'allow command "osd rm-pg-upmap-items"'"#
        );
        assert_eq!(
            needs(&["balancer", "off"]),
            r#"mgr 'allow command "balancer off"'"#
        );
        assert_eq!(needs(&["osd", "pool", "ls", "detail"]), "mon 'allow r'");
        assert_eq!(
            needs(&["config-key", "get", "ceph-recovery-budget/lease"]),
            r#"mon 'allow command "config-key get" with key=ceph-recovery-budget/lease'"#
        );
    }

    /// The caps an error tells the operator to grant are the ones docs/deployment.md lists
    /// (`ceph auth caps` replaces every cap of a user: a partial list would take some away).
    #[test]
    fn the_full_lists_are_the_documented_ones() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/docs/deployment.md");
        let docs = std::fs::read_to_string(path).expect("docs/deployment.md");
        let squash = |s: &str| {
            s.replace("\\\n", " ")
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(" ")
        };
        let docs = squash(&docs);
        for (what, caps) in [("exporter", EXPORTER), ("enforcer", ENFORCER)] {
            assert!(
                docs.contains(&squash(caps)),
                "{what} caps not in the docs: {caps}"
            );
        }
        // Every grant `needed` names for the enforcer's changes is in the enforce-mode list.
        for verb in ["set", "rm"] {
            let grant = config_change(verb, "osd");
            let inner = grant.trim_start_matches("mon '").trim_end_matches('\'');
            assert!(ENFORCER.contains(inner), "{grant}");
        }
        for words in [
            &["osd", "pg-upmap-items", "2.a", "2", "3"][..],
            &["osd", "rm-pg-upmap-items", "2.a"],
            &["balancer", "status"],
            &["balancer", "on"],
            &["balancer", "off"],
            &["balancer", "mode", "upmap"],
        ] {
            let grant = needs(words);
            let inner = grant
                .trim_start_matches("mon '")
                .trim_start_matches("mgr '")
                .trim_end_matches('\'');
            assert!(ENFORCER.contains(inner), "{grant}");
        }
        for verb in ["set", "unset"] {
            for flag in ["nobackfill", "norecover"] {
                let grant = osd_flag(verb, flag);
                let inner = grant.trim_start_matches("mon '").trim_end_matches('\'');
                assert!(ENFORCER.contains(inner), "{grant}");
            }
        }
    }
}
