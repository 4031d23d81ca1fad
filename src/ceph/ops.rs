//! The Ceph operations every part of the program uses, over any [`Client`] backend: the
//! collector's reads, the enforcer's changes and the tuning commands' reads and changes all go
//! through these functions, so a command is spelled, checked and parsed in one place and fails
//! with one typed error ([`OpsError`]) whose [`OpsError::reason`] labels metrics.

use std::collections::{BTreeMap, BTreeSet};

use super::parse::upmap::{BalancerStatus, PgId, UpmapItem, UpmapView};
use super::parse::{self, config_dump::ConfigEntry, versions::OsdVersion, ParseError};
use super::{CephCommand, CephError, Client};

/// How many OSDs run each version.
pub type OsdVersions = BTreeMap<OsdVersion, u64>;

/// Why a Ceph operation failed.
#[derive(Debug, thiserror::Error)]
pub enum OpsError {
    #[error(transparent)]
    Ceph(#[from] CephError),
    #[error("cannot parse the output of `{command}`: {source}")]
    Parse {
        command: String,
        #[source]
        source: ParseError,
    },
    #[error("`{command}`: no OSD answered ({detail})")]
    NoDaemonAnswered { command: String, detail: String },
}

impl OpsError {
    /// Short, bounded label value for the `reason` of error counters.
    pub fn reason(&self) -> &'static str {
        match self {
            OpsError::Ceph(e) => e.reason(),
            OpsError::Parse { .. } => "parse",
            OpsError::NoDaemonAnswered { .. } => "no_daemon_answered",
        }
    }

    /// Not sent: the lease's fence had passed ([`crate::ceph::Fence`]).
    pub fn is_fenced(&self) -> bool {
        matches!(self, OpsError::Ceph(CephError::Fenced { .. }))
    }

    /// The cephx user lacks a capability: retrying cannot help until the caps change.
    pub fn is_permission_denied(&self) -> bool {
        matches!(self, OpsError::Ceph(CephError::PermissionDenied { .. }))
    }

    /// The monitors do not know the command (EINVAL): the CLI's own check against the commands
    /// the cluster offers ("no valid command found"), or the monitors' answer to one sent as
    /// it is ("command not known", librados). A mgr module's command is unknown while the module
    /// is not loaded.
    pub fn is_unknown_command(&self) -> bool {
        match self {
            OpsError::Ceph(CephError::Failed {
                code: Some(EINVAL),
                stderr,
                ..
            }) => UNKNOWN_COMMAND.iter().any(|s| stderr.contains(s)),
            _ => false,
        }
    }

    /// What an upmap command was refused for naming ([`Missing`]), when the monitors said it
    /// does not exist: asking again cannot work until the cluster changes back.
    pub fn missing(&self) -> Option<Missing> {
        match self {
            OpsError::Ceph(CephError::Failed {
                code: Some(ENOENT),
                stderr,
                ..
            }) => Missing::in_refusal(stderr),
            _ => None,
        }
    }
}

/// The CLI's exit code (and the librados backend's) for the monitors' ENOENT.
const ENOENT: i32 = 2;
/// ... and for EINVAL.
const EINVAL: i32 = 22;
/// How the CLI and the monitors say a command does not exist (see [`OpsError::is_unknown_command`]).
const UNKNOWN_COMMAND: [&str; 2] = ["no valid command found", "command not known"];

/// A PG or an OSD that `pg-upmap-items` / `rm-pg-upmap-items` named and the monitors say does
/// not exist (`OSDMonitor::prepare_command`, exit 2; tests/fixtures/upmap/50-refuse.*).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Missing {
    /// `pg 9.0 does not exist` (its pool deleted, or the PG merged away by a pg_num
    /// reduction), or `pool of 9.0 is pending removal`.
    Pg,
    /// `osd.42 does not exist` (purged): named by an item.
    Osd(u32),
}

impl Missing {
    /// From the refusal's stderr (`Error ENOENT: ...`, as the CLI and the librados backend
    /// print it); `None` for any other ENOENT.
    fn in_refusal(stderr: &str) -> Option<Missing> {
        let (_, said) = stderr.split_once("Error ENOENT: ")?;
        // `first_lines` joins the lines of stderr with " | ".
        let said = said.split(" | ").next().unwrap_or(said).trim();
        if let Some(osd) = said
            .strip_prefix("osd.")
            .and_then(|s| s.strip_suffix(" does not exist"))
        {
            return osd.parse().ok().map(Missing::Osd);
        }
        let no_pg = said.starts_with("pg ") && said.ends_with(" does not exist");
        let pool_going = said.starts_with("pool of ") && said.ends_with(" is pending removal");
        (no_pg || pool_going).then_some(Missing::Pg)
    }
}

/// Runs `command` and returns its stdout when it succeeded.
pub async fn run<C: Client>(client: &C, command: &CephCommand) -> Result<Vec<u8>, OpsError> {
    let out = client.run(command).await?;
    Ok(out.success(command)?.to_vec())
}

async fn run_args<C: Client>(client: &C, args: &[&str]) -> Result<Vec<u8>, OpsError> {
    run(client, &CephCommand::new(args.iter().copied())).await
}

/// Runs `command` and parses its stdout with `f`.
pub async fn run_parsed<C: Client, T>(
    client: &C,
    command: CephCommand,
    f: impl FnOnce(&[u8]) -> Result<T, ParseError>,
) -> Result<T, OpsError> {
    let out = client.run(&command).await?;
    let stdout = out.success(&command)?;
    f(stdout).map_err(|source| OpsError::Parse {
        command: command.to_string(),
        source,
    })
}

/// Runs `tell osd.* ...` and parses each OSD's answer; OSDs that fail are reported, not fatal,
/// as long as one answered. `tell` exits non-zero when any OSD is down, so the exit code alone
/// does not decide.
pub async fn run_tell<C: Client, T>(
    client: &C,
    command: CephCommand,
    f: impl Fn(&[u8]) -> Result<T, ParseError>,
) -> Result<(BTreeMap<String, T>, BTreeMap<String, String>), OpsError> {
    let out = client.run(&command).await?;
    let text = String::from_utf8_lossy(&out.stdout);
    let mut ok = BTreeMap::new();
    let mut failed = BTreeMap::new();
    for part in parse::tell::split(&text) {
        match part {
            Ok(d) => match f(d.body.as_bytes()) {
                Ok(v) => {
                    ok.insert(d.daemon, v);
                }
                Err(e) => {
                    failed.insert(d.daemon, e.to_string());
                }
            },
            Err(e) => {
                let who = e.daemon.clone().unwrap_or_else(|| "?".to_string());
                failed.insert(who, e.message.clone());
            }
        }
    }
    // A down OSD leaves only a blank line on stdout; stderr says which one (exit code 6).
    for e in parse::tell::stderr_errors(&out.stderr) {
        let who = e.daemon.clone().unwrap_or_else(|| "?".to_string());
        if !ok.contains_key(&who) {
            failed.entry(who).or_insert(e.message);
        }
    }
    if ok.is_empty() {
        // A refused command is a refused command, whichever OSD it went to.
        if let Err(e @ CephError::PermissionDenied { .. }) = out.success(&command) {
            return Err(e.into());
        }
        let detail = if let Err(e) = out.success(&command) {
            e.to_string()
        } else if failed.is_empty() {
            "empty output".to_string()
        } else {
            failed
                .iter()
                .map(|(d, m)| format!("{d}: {m}"))
                .collect::<Vec<_>>()
                .join("; ")
        };
        return Err(OpsError::NoDaemonAnswered {
            command: command.to_string(),
            detail,
        });
    }
    Ok((ok, failed))
}

/// `ceph status`
pub async fn status<C: Client>(client: &C) -> Result<parse::status::ClusterStatus, OpsError> {
    run_parsed(client, CephCommand::new(["status"]), parse::status::parse).await
}

/// `ceph config dump`: every entry of the config database.
pub async fn config_dump<C: Client>(client: &C) -> Result<Vec<ConfigEntry>, OpsError> {
    run_parsed(
        client,
        CephCommand::new(["config", "dump"]),
        parse::config_dump::parse,
    )
    .await
}

/// `ceph config get osd NAME`: the value the database gives OSDs (its default when not set).
/// Fails for an option Ceph does not know.
pub async fn config_get_osd<C: Client>(client: &C, name: &str) -> Result<String, OpsError> {
    run_parsed(
        client,
        CephCommand::new(["config", "get", "osd", name]),
        parse::config_value::parse_plain,
    )
    .await
}

/// `ceph config set osd KEY VALUE`
pub async fn config_set_osd<C: Client>(client: &C, key: &str, value: &str) -> Result<(), OpsError> {
    run_args(client, &["config", "set", "osd", key, value])
        .await
        .map(|_| ())
}

/// `ceph config rm osd KEY` (back to "not set")
pub async fn config_rm_osd<C: Client>(client: &C, key: &str) -> Result<(), OpsError> {
    run_args(client, &["config", "rm", "osd", key])
        .await
        .map(|_| ())
}

/// `ceph tell osd.* config set KEY VALUE`: the running OSDs; not persisted.
pub async fn tell_osds_set<C: Client>(client: &C, key: &str, value: &str) -> Result<(), OpsError> {
    run_args(client, &["tell", "osd.*", "config", "set", key, value])
        .await
        .map(|_| ())
}

/// `ceph tell osd.* config unset KEY`: drops a value pushed with [`tell_osds_set`].
pub async fn tell_osds_unset<C: Client>(client: &C, key: &str) -> Result<(), OpsError> {
    run_args(client, &["tell", "osd.*", "config", "unset", key])
        .await
        .map(|_| ())
}

/// What each OSD runs for `key` (`ceph tell osd.* config get KEY`), and the OSDs that did not say.
pub async fn osd_values<C: Client>(
    client: &C,
    key: &str,
) -> Result<(BTreeMap<String, String>, BTreeMap<String, String>), OpsError> {
    run_tell(
        client,
        CephCommand::new(["tell", "osd.*", "config", "get", key]),
        |b| parse::config_value::parse_tell_config_get(b, key),
    )
    .await
}

/// The OSD map's flags (`ceph osd dump` "flags"), e.g. nobackfill, norecover, noout.
pub async fn osd_flags<C: Client>(client: &C) -> Result<BTreeSet<String>, OpsError> {
    run_parsed(
        client,
        CephCommand::new(["osd", "dump"]),
        parse::osd_dump::flags,
    )
    .await
}

/// `ceph osd set FLAG`
pub async fn osd_set_flag<C: Client>(client: &C, flag: &str) -> Result<(), OpsError> {
    run_args(client, &["osd", "set", flag]).await.map(|_| ())
}

/// `ceph osd unset FLAG`
pub async fn osd_unset_flag<C: Client>(client: &C, flag: &str) -> Result<(), OpsError> {
    run_args(client, &["osd", "unset", flag]).await.map(|_| ())
}

/// How many OSDs run each Ceph version (`ceph versions`).
pub async fn osd_versions<C: Client>(client: &C) -> Result<OsdVersions, OpsError> {
    run_parsed(
        client,
        CephCommand::new(["versions"]),
        parse::versions::osd_versions,
    )
    .await
    .map(|v| v.into_iter().collect())
}

/// Every PG with its state, up and acting sets (`ceph pg dump pgs_brief`).
pub async fn pgs_brief<C: Client>(client: &C) -> Result<Vec<parse::pgs::PgBrief>, OpsError> {
    run_parsed(
        client,
        CephCommand::new(["pg", "dump", "pgs_brief"]),
        parse::pgs::parse,
    )
    .await
}

/// The PGs in any of `states` (`ceph pg ls STATE...`, e.g. `backfill_wait`, `remapped`).
/// Ceph refuses an unknown state with EINVAL (and prints an empty list): that is an error here.
pub async fn pgs_in_states<C: Client>(
    client: &C,
    states: &[&str],
) -> Result<Vec<parse::pgs::PgBrief>, OpsError> {
    let mut args = vec!["pg", "ls"];
    args.extend_from_slice(states);
    run_parsed(client, CephCommand::new(args), parse::pgs::parse).await
}

/// What the backfill lever reads of the OSD map (`ceph osd dump`): upmap entries, pools, OSDs,
/// require_min_compat_client, fsid, epoch.
pub async fn upmap_view<C: Client>(client: &C) -> Result<UpmapView, OpsError> {
    run_parsed(
        client,
        CephCommand::new(["osd", "dump"]),
        parse::upmap::view,
    )
    .await
}

/// The PG's upmap items become `items`; none removes its entry. One call for the backfill
/// lever's holds and releases, which set either (ours, or the items a PG had before the hold)
/// or none (a hold that takes someone's items off, a release of ours alone).
pub async fn pg_upmap_items_replace<C: Client>(
    client: &C,
    pgid: PgId,
    items: &[UpmapItem],
) -> Result<(), OpsError> {
    if items.is_empty() {
        pg_upmap_items_rm(client, pgid).await
    } else {
        pg_upmap_items_set(client, pgid, items).await
    }
}

/// `ceph osd pg-upmap-items PGID FROM TO [FROM TO ...]`: replaces the PG's items (all of them)
/// with `items`. Refused by Ceph (EPERM) while require_min_compat_client is below luminous.
async fn pg_upmap_items_set<C: Client>(
    client: &C,
    pgid: PgId,
    items: &[UpmapItem],
) -> Result<(), OpsError> {
    let mut args = vec!["osd".to_string(), "pg-upmap-items".into(), pgid.to_string()];
    for item in items {
        args.push(item.from.to_string());
        args.push(item.to.to_string());
    }
    run(client, &CephCommand::new(args)).await.map(|_| ())
}

/// `ceph osd rm-pg-upmap-items PGID`: removes all of the PG's items (exit 0 when it had none).
async fn pg_upmap_items_rm<C: Client>(client: &C, pgid: PgId) -> Result<(), OpsError> {
    let id = pgid.to_string();
    run_args(client, &["osd", "rm-pg-upmap-items", &id])
        .await
        .map(|_| ())
}

/// `ceph balancer status`
/// `ceph balancer status`; `None` when the monitors do not know the command: the mgr offers no
/// balancer module (it failed to load, as every Python module of Debian trixie's Reef 18.2.7:
/// tests/fixtures/reef/healthy/ceph_balancer_status.json.err). No balancer then removes upmap
/// entries, and none can be paused or turned on.
pub async fn balancer_status<C: Client>(client: &C) -> Result<Option<BalancerStatus>, OpsError> {
    match run_parsed(
        client,
        CephCommand::new(["balancer", "status"]),
        parse::upmap::balancer_status,
    )
    .await
    {
        Ok(b) => Ok(Some(b)),
        Err(e) if e.is_unknown_command() => Ok(None),
        Err(e) => Err(e),
    }
}

/// `ceph balancer on` / `ceph balancer off`
pub async fn balancer_set_active<C: Client>(client: &C, on: bool) -> Result<(), OpsError> {
    run_args(client, &["balancer", if on { "on" } else { "off" }])
        .await
        .map(|_| ())
}

/// `ceph balancer mode MODE` (`upmap`, `crush-compat`, `none`; EPERM for upmap below luminous).
pub async fn balancer_mode<C: Client>(client: &C, mode: &str) -> Result<(), OpsError> {
    run_args(client, &["balancer", "mode", mode])
        .await
        .map(|_| ())
}

/// `ceph osd get-require-min-compat-client` (also in `osd dump`, see [`upmap_view`]).
pub async fn require_min_compat_client<C: Client>(client: &C) -> Result<String, OpsError> {
    run_parsed(
        client,
        CephCommand::new(["osd", "get-require-min-compat-client"]),
        parse::config_value::parse_plain,
    )
    .await
}

/// The value `ceph config set osd NAME` writes: section `osd`, no mask. `None` = not set there.
/// Per-daemon (`osd.3`) or masked entries that win over it show up as OSDs not taking a value.
pub fn osd_section_value(entries: &[ConfigEntry], name: &str) -> Option<String> {
    entries
        .iter()
        .find(|e| e.section == "osd" && e.mask.is_empty() && same_option(&e.name, name))
        .map(|e| e.value.clone())
}

/// [`osd_section_value`] of each of `keys`.
pub fn osd_section_values(
    entries: &[ConfigEntry],
    keys: &[String],
) -> BTreeMap<String, Option<String>> {
    keys.iter()
        .map(|k| (k.clone(), osd_section_value(entries, k)))
        .collect()
}

/// Ceph accepts `osd-max-backfills` for `osd_max_backfills`.
pub fn same_option(a: &str, b: &str) -> bool {
    a.len() == b.len()
        && a.bytes()
            .zip(b.bytes())
            .all(|(x, y)| x == y || (matches!(x, b'-' | b'_') && matches!(y, b'-' | b'_')))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ceph::fake::{FakeClient, Reply};

    fn entry(section: &str, name: &str, value: &str, mask: &str) -> ConfigEntry {
        ConfigEntry::new(section, name, value, mask)
    }

    #[test]
    fn the_osd_section_value_is_the_one_config_set_osd_writes() {
        let dump = vec![
            entry("global", "osd_max_backfills", "3", ""),
            entry("osd", "osd_max_backfills", "2", "class:hdd"),
            entry("osd.3", "osd_max_backfills", "5", ""),
        ];
        assert_eq!(osd_section_value(&dump, "osd_max_backfills"), None);
        let mut with = dump.clone();
        with.push(entry("osd", "osd-max-backfills", "1", ""));
        assert_eq!(
            osd_section_value(&with, "osd_max_backfills").as_deref(),
            Some("1")
        );
        assert_eq!(
            osd_section_values(&with, &["osd_max_backfills".into(), "x".into()]),
            BTreeMap::from([
                ("osd_max_backfills".to_string(), Some("1".to_string())),
                ("x".to_string(), None)
            ])
        );
        assert!(same_option("osd-max-backfills", "osd_max_backfills"));
        assert!(!same_option("osd_max_backfill", "osd_max_backfills"));
    }

    fn answering(code: i32, stderr: &str) -> FakeClient {
        let client = FakeClient::new();
        client.set(
            &CephCommand::new(["config", "set", "osd", "k", "v"]),
            Reply::fail(code, stderr),
        );
        client
    }

    #[tokio::test]
    async fn eacces_is_permission_denied_and_says_what_to_do() {
        let client = answering(13, "Error EACCES: access denied");
        let e = config_set_osd(&client, "k", "v").await.unwrap_err();
        assert_eq!(e.reason(), "permission_denied");
        assert!(e.is_permission_denied());
        let msg = e.to_string();
        assert!(msg.contains("ceph config set osd k v"), "{msg}");
        assert!(msg.contains("access denied"), "{msg}");
        // The grant that would allow it, and how to give it without taking others away.
        assert!(
            msg.contains(r#"lacks mon 'allow command "config set" with who=osd'"#),
            "{msg}"
        );
        assert!(msg.contains("ceph auth caps"), "{msg}");
    }

    #[tokio::test]
    async fn other_failures_keep_their_exit_status() {
        let client = answering(22, "Error EINVAL: bad");
        let e = config_set_osd(&client, "k", "v").await.unwrap_err();
        assert_eq!(e.reason(), "exit_status");
        assert!(!e.is_permission_denied());
    }

    fn cmd(words: &[&str]) -> CephCommand {
        CephCommand::new(words.iter().copied())
    }

    /// The lever's commands as the lab took them (tests/fixtures/upmap/).
    #[tokio::test]
    async fn upmap_and_balancer_commands_are_spelled_as_ceph_takes_them() {
        use crate::ceph::parse::test_support::fixture;
        let client = FakeClient::new();
        let set = cmd(&["osd", "pg-upmap-items", "3.1e", "1", "3", "0", "2"]);
        client.set(&set, Reply::ok(""));
        let pgid: PgId = "3.1e".parse().unwrap();
        let items = [UpmapItem { from: 1, to: 3 }, UpmapItem { from: 0, to: 2 }];
        pg_upmap_items_replace(&client, pgid, &items).await.unwrap();
        // No items: the entry removed (a FakeClient answers only the commands set).
        client.set(&cmd(&["osd", "rm-pg-upmap-items", "3.1e"]), Reply::ok(""));
        pg_upmap_items_replace(&client, pgid, &[]).await.unwrap();
        for words in [
            &["balancer", "off"][..],
            &["balancer", "on"],
            &["balancer", "mode", "upmap"],
        ] {
            client.set(&cmd(words), Reply::ok(""));
        }
        balancer_set_active(&client, false).await.unwrap();
        balancer_set_active(&client, true).await.unwrap();
        balancer_mode(&client, "upmap").await.unwrap();
        client.set(
            &cmd(&["balancer", "status"]),
            Reply::ok(fixture("upmap/63-balancer-off.ceph_balancer_status.json")),
        );
        assert_eq!(
            balancer_status(&client).await.unwrap().map(|b| b.active),
            Some(false)
        );
        // Reef on Debian trixie: no balancer module in the mgr. The CLI's own refusal, and the
        // monitors' answer through librados (both code 22, recorded on the Reef lab).
        for refusal in [
            "reef/healthy/ceph_balancer_status.json.err",
            "reef/healthy/librados_balancer_status.err",
        ] {
            client.set(
                &cmd(&["balancer", "status"]),
                Reply::fail(22, &String::from_utf8_lossy(&fixture(refusal))),
            );
            assert_eq!(balancer_status(&client).await.unwrap(), None, "{refusal}");
        }
        // Any other failure stays one: the balancer may be running.
        client.set(
            &cmd(&["balancer", "status"]),
            Reply::fail(110, "Error ETIMEDOUT: mgr did not answer"),
        );
        assert!(balancer_status(&client).await.is_err());
        client.set(
            &cmd(&["osd", "dump"]),
            Reply::ok(fixture("upmap/91-wpq-hold.ceph_osd_dump.json")),
        );
        assert_eq!(upmap_view(&client).await.unwrap().pg_upmap_items.len(), 4);
        client.set(
            &cmd(&["pg", "ls", "backfill_wait"]),
            Reply::ok(fixture(
                "upmap/90-wpq-rebalance.ceph_pg_ls_backfill_wait.json",
            )),
        );
        // Listed a second before pgs_brief (16 waiting then), while the PGs still peered.
        assert_eq!(
            pgs_in_states(&client, &["backfill_wait"])
                .await
                .unwrap()
                .len(),
            9
        );
        client.set(
            &cmd(&["pg", "dump", "pgs_brief"]),
            Reply::ok(fixture(
                "upmap/90-wpq-rebalance.ceph_pg_dump_pgs_brief.json",
            )),
        );
        assert_eq!(pgs_brief(&client).await.unwrap().len(), 41);
        client.set(
            &cmd(&["osd", "get-require-min-compat-client"]),
            Reply::ok(fixture(
                "upmap/64-jewel.ceph_osd_get-require-min-compat-client.txt",
            )),
        );
        assert_eq!(require_min_compat_client(&client).await.unwrap(), "jewel");
    }

    /// Ceph's refusals (the lab's exit codes and messages) are errors with the command.
    #[tokio::test]
    async fn upmap_refusals_are_errors_that_name_the_command() {
        use crate::ceph::parse::test_support::fixture_str;
        let client = FakeClient::new();
        let pgid: PgId = "2.b".parse().unwrap();
        let items = [UpmapItem { from: 1, to: 3 }];
        client.set(
            &cmd(&["osd", "pg-upmap-items", "2.b", "1", "3"]),
            Reply::fail(
                1,
                &fixture_str("upmap/64-jewel.ceph_osd_pg-upmap-items_2.b_1_3.txt.err"),
            ),
        );
        let e = pg_upmap_items_replace(&client, pgid, &items)
            .await
            .unwrap_err()
            .to_string();
        assert!(e.contains("ceph osd pg-upmap-items 2.b 1 3"), "{e}");
        assert!(e.contains("min_compat_client jewel < luminous"), "{e}");
        let missing: PgId = "9.0".parse().unwrap();
        client.set(
            &cmd(&["osd", "rm-pg-upmap-items", "9.0"]),
            Reply::fail(
                2,
                &fixture_str("upmap/50-refuse.ceph_osd_rm-pg-upmap-items_9.0_no_pool.txt.err"),
            ),
        );
        let e = pg_upmap_items_replace(&client, missing, &[])
            .await
            .unwrap_err();
        assert_eq!(e.reason(), "exit_status");
        assert!(e.to_string().contains("pg 9.0 does not exist"), "{e}");
    }

    /// The lab's refusals (tests/fixtures/upmap/50-refuse.*, exit codes from its _index.tsv)
    /// tell what does not exist; the other refusals (EINVAL, EPERM, a timeout) tell nothing of
    /// the kind.
    #[tokio::test]
    async fn refusals_that_name_what_does_not_exist() {
        use crate::ceph::parse::test_support::fixture_str;
        let cases: [(&[&str], &str, i32, Option<Missing>); 8] = [
            (
                &["pg-upmap-items", "9.0", "1", "3"],
                "50-refuse.ceph_osd_pg-upmap-items_9.0_no_pool",
                2,
                Some(Missing::Pg),
            ),
            (
                &["pg-upmap-items", "2.ff", "1", "3"],
                "50-refuse.ceph_osd_pg-upmap-items_2.ff_no_pg",
                2,
                Some(Missing::Pg),
            ),
            (
                &["rm-pg-upmap-items", "9.0"],
                "50-refuse.ceph_osd_rm-pg-upmap-items_9.0_no_pool",
                2,
                Some(Missing::Pg),
            ),
            (
                &["pg-upmap-items", "2.b", "1", "42"],
                "50-refuse.ceph_osd_pg-upmap-items_2.b_osd_42",
                2,
                Some(Missing::Osd(42)),
            ),
            (
                &["pg-upmap-items", "2.b", "1", "1"],
                "50-refuse.ceph_osd_pg-upmap-items_2.b_same",
                22,
                None,
            ),
            (
                &["pg-upmap-items", "2.b", "1"],
                "50-refuse.ceph_osd_pg-upmap-items_2.b_odd",
                22,
                None,
            ),
            (
                &["pg-upmap-items", "2.b", "1", "3"],
                "64-jewel.ceph_osd_pg-upmap-items_2.b_1_3",
                1,
                None,
            ),
            (&["pg-upmap-items", "2.b", "1", "3"], "injected", 110, None),
        ];
        for (words, recorded, code, want) in cases {
            let stderr = if recorded == "injected" {
                "Error ETIMEDOUT: pg 2.b does not exist".to_string()
            } else {
                fixture_str(&format!("upmap/{recorded}.txt.err"))
            };
            let client = FakeClient::new();
            let mut args = vec!["osd"];
            args.extend_from_slice(words);
            client.set(&cmd(&args), Reply::fail(code, &stderr));
            let pgid: PgId = words[1].parse().unwrap();
            let items: Vec<UpmapItem> = words[2..]
                .chunks(2)
                .filter(|p| p.len() == 2)
                .map(|p| UpmapItem {
                    from: p[0].parse().unwrap(),
                    to: p[1].parse().unwrap(),
                })
                .collect();
            let e = if words[0] == "rm-pg-upmap-items" {
                pg_upmap_items_rm(&client, pgid).await
            } else if words.len() == 3 {
                run(&client, &cmd(&args)).await.map(|_| ())
            } else {
                pg_upmap_items_replace(&client, pgid, &items).await
            }
            .unwrap_err();
            assert_eq!(e.missing(), want, "{recorded}: {e}");
        }
        // `rm-pg-upmap-items` of a PG without items is no refusal at all (exit 0).
        let none = fixture_str("upmap/50-refuse.ceph_osd_rm-pg-upmap-items_2.b_no_entry.txt.err");
        assert!(none.starts_with("clear 2.b"), "{none}");
    }
}
