//! The enforcer's hands: `ceph config set/rm osd KEY`, reading the config database, pushing a
//! value to the running OSDs, and the OSD map's pause flags.

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;

pub use crate::ceph::ops::OsdVersions;
use crate::ceph::ops::{self, OpsError};
use crate::ceph::parse::pgs::PgBrief;
use crate::ceph::parse::upmap::{BalancerStatus, PgId, UpmapItem, UpmapView};
use crate::ceph::{CephError, Client, Fence, Fenced};

/// Changes the cluster's configuration for all OSDs, through [`crate::ceph::ops`].
pub trait Actor: Send + Sync + 'static {
    /// `ceph config set osd KEY VALUE`
    fn set(&self, key: &str, value: &str) -> impl Future<Output = Result<(), OpsError>> + Send;
    /// `ceph config rm osd KEY` (back to "not set")
    fn rm(&self, key: &str) -> impl Future<Output = Result<(), OpsError>> + Send;
    /// The `osd`-section values of `keys` in the config database (None = not set).
    fn configured(
        &self,
        keys: &[String],
    ) -> impl Future<Output = Result<BTreeMap<String, Option<String>>, OpsError>> + Send;
    /// `ceph tell osd.* config set KEY VALUE` (the running OSDs; not persisted)
    fn push(&self, key: &str, value: &str) -> impl Future<Output = Result<(), OpsError>> + Send;
    /// `ceph tell osd.* config unset KEY`: drops a pushed value from the running OSDs. Under a
    /// built-in profile that also drops the profile's value until it is applied again, so it
    /// only comes before a profile change (checked on the lab, 16.2.15).
    fn unpush(&self, key: &str) -> impl Future<Output = Result<(), OpsError>> + Send;
    /// The OSD map's flags (`ceph osd dump` "flags").
    fn flags(&self) -> impl Future<Output = Result<BTreeSet<String>, OpsError>> + Send;
    /// How many OSDs run each Ceph version (`ceph versions`).
    fn osd_versions(&self) -> impl Future<Output = Result<OsdVersions, OpsError>> + Send;
    /// `ceph osd set FLAG`
    fn set_flag(&self, flag: &str) -> impl Future<Output = Result<(), OpsError>> + Send;
    /// `ceph osd unset FLAG`
    fn unset_flag(&self, flag: &str) -> impl Future<Output = Result<(), OpsError>> + Send;
    /// `ceph pg dump pgs_brief` (the backfill lever).
    fn pgs_brief(&self) -> impl Future<Output = Result<Vec<PgBrief>, OpsError>> + Send;
    /// `ceph osd dump`, what the backfill lever needs of it.
    fn upmap_view(&self) -> impl Future<Output = Result<UpmapView, OpsError>> + Send;
    /// `ceph balancer status`; `None`: the mgr offers no balancer module.
    fn balancer_status(
        &self,
    ) -> impl Future<Output = Result<Option<BalancerStatus>, OpsError>> + Send;
    /// `ceph osd pg-upmap-items PGID FROM TO ...`, or `ceph osd rm-pg-upmap-items PGID` when
    /// `items` is empty.
    fn set_pg_upmap_items(
        &self,
        pgid: PgId,
        items: &[UpmapItem],
    ) -> impl Future<Output = Result<(), OpsError>> + Send;
    /// `ceph balancer on|off`
    fn balancer_active(&self, on: bool) -> impl Future<Output = Result<(), OpsError>> + Send;
    /// `ceph balancer mode MODE`
    fn balancer_mode(&self, mode: &str) -> impl Future<Output = Result<(), OpsError>> + Send;
    /// From now on, no command that changes the cluster reaches it once `fence` has passed
    /// (the lease's renew deadline), except `osd unset` of a pause flag, which fails open.
    fn fence(&mut self, fence: Fence);
}

pub struct CephActor<C> {
    client: C,
    fence: Option<Fence>,
}

impl<C: Client + Clone> CephActor<C> {
    pub fn new(client: C) -> Self {
        Self {
            client,
            fence: None,
        }
    }

    /// The client for a command that changes the cluster: behind the fence, when there is one
    /// (under a lease).
    fn changing(&self) -> Fenced<C> {
        Fenced {
            inner: self.client.clone(),
            fence: self.fence.clone(),
        }
    }
}

impl<C: Client + Clone> Actor for CephActor<C> {
    async fn set(&self, key: &str, value: &str) -> Result<(), OpsError> {
        ops::config_set_osd(&self.changing(), key, value).await
    }

    async fn rm(&self, key: &str) -> Result<(), OpsError> {
        ops::config_rm_osd(&self.changing(), key).await
    }

    async fn configured(
        &self,
        keys: &[String],
    ) -> Result<BTreeMap<String, Option<String>>, OpsError> {
        let entries = ops::config_dump(&self.client).await?;
        Ok(ops::osd_section_values(&entries, keys))
    }

    async fn push(&self, key: &str, value: &str) -> Result<(), OpsError> {
        ops::tell_osds_set(&self.changing(), key, value).await
    }

    async fn unpush(&self, key: &str) -> Result<(), OpsError> {
        ops::tell_osds_unset(&self.changing(), key).await
    }

    async fn flags(&self) -> Result<BTreeSet<String>, OpsError> {
        ops::osd_flags(&self.client).await
    }

    async fn osd_versions(&self) -> Result<OsdVersions, OpsError> {
        ops::osd_versions(&self.client).await
    }

    async fn set_flag(&self, flag: &str) -> Result<(), OpsError> {
        ops::osd_set_flag(&self.changing(), flag).await
    }

    async fn unset_flag(&self, flag: &str) -> Result<(), OpsError> {
        ops::osd_unset_flag(&self.client, flag).await
    }

    async fn pgs_brief(&self) -> Result<Vec<PgBrief>, OpsError> {
        ops::pgs_brief(&self.client).await
    }

    async fn upmap_view(&self) -> Result<UpmapView, OpsError> {
        ops::upmap_view(&self.client).await
    }

    async fn balancer_status(&self) -> Result<Option<BalancerStatus>, OpsError> {
        ops::balancer_status(&self.client).await
    }

    async fn set_pg_upmap_items(&self, pgid: PgId, items: &[UpmapItem]) -> Result<(), OpsError> {
        ops::pg_upmap_items_replace(&self.changing(), pgid, items).await
    }

    async fn balancer_active(&self, on: bool) -> Result<(), OpsError> {
        ops::balancer_set_active(&self.changing(), on).await
    }

    async fn balancer_mode(&self, mode: &str) -> Result<(), OpsError> {
        ops::balancer_mode(&self.changing(), mode).await
    }

    fn fence(&mut self, fence: Fence) {
        self.fence = Some(fence);
    }
}

/// A cluster for the backfill lever in [`FakeActor`]: the PGs, the OSD map and the balancer,
/// changed by the lever's commands as Ceph changes them (a held PG is active+clean with up =
/// acting; released, it waits for backfill again).
#[derive(Debug, Clone, Default)]
pub struct FakeUpmap {
    pub pgs: Vec<PgBrief>,
    pub map: UpmapView,
    pub balancer: Option<BalancerStatus>,
    /// The mgr offers no balancer module (Debian trixie's Reef): `balancer status` is
    /// `None`, `balancer on/off/mode` are refused as unknown commands.
    pub no_balancer_module: bool,
    /// Each held PG as it was before (to put back when released).
    pub before: std::collections::BTreeMap<PgId, PgBrief>,
}

impl FakeUpmap {
    /// The PG's items become `items` (none: no entry). On a PG the lever holds it is the
    /// release (its entry removed, or the items it had before put back): it waits for backfill
    /// as before the hold; on another, the hold (a PG held over someone's items may have them
    /// taken off): active+clean with up = acting.
    pub fn set_items(&mut self, pgid: PgId, items: &[UpmapItem]) {
        if items.is_empty() {
            self.map.pg_upmap_items.remove(&pgid);
        } else {
            self.map.pg_upmap_items.insert(pgid, items.to_vec());
        }
        let id = pgid.to_string();
        if let Some(before) = self.before.remove(&pgid) {
            if let Some(pg) = self.pgs.iter_mut().find(|p| p.pgid == id) {
                *pg = PgBrief {
                    state: "active+remapped+backfill_wait".to_string(),
                    ..before
                };
            }
        } else if let Some(pg) = self.pgs.iter_mut().find(|p| p.pgid == id) {
            self.before.insert(pgid, pg.clone());
            pg.state = "active+clean".to_string();
            pg.up = pg.acting.clone();
        }
        self.map.epoch += 1;
    }

    /// What the monitors answer `pg-upmap-items` / `rm-pg-upmap-items` naming a PG or an OSD
    /// that does not exist (the lab's words, exit code 2: tests/fixtures/upmap/50-refuse.*):
    /// the PG first, then each item's OSDs in order.
    pub fn refusal(&self, pgid: PgId, items: &[UpmapItem]) -> Option<String> {
        let exists = self
            .map
            .pools
            .get(&pgid.pool)
            .is_some_and(|p| u64::from(pgid.seed) < p.pg_num);
        if !exists {
            return Some(format!("Error ENOENT: pg {pgid} does not exist"));
        }
        items
            .iter()
            .flat_map(|i| [i.from, i.to])
            .find(|o| !self.map.osds.contains_key(o))
            .map(|o| format!("Error ENOENT: osd.{o} does not exist"))
    }

    /// Backfill of `pgid` finished: active+clean where CRUSH wants it.
    pub fn finish(&mut self, pgid: &str) {
        if let Some(pg) = self.pgs.iter_mut().find(|p| p.pgid == pgid) {
            pg.state = "active+clean".to_string();
            pg.acting = pg.up.clone();
        }
    }
}

/// Records every command and answers from an in-memory config database; for tests.
#[derive(Debug, Clone, Default)]
pub struct FakeActor {
    pub db: std::sync::Arc<std::sync::Mutex<BTreeMap<String, String>>>,
    pub commands: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
    /// Fail the next N set/rm calls.
    pub fail_next: std::sync::Arc<std::sync::atomic::AtomicU32>,
    /// The next N set/rm calls never answer (a mon that hangs; tokio's clock, so a paused
    /// test clock skips the wait).
    pub stall_next: std::sync::Arc<std::sync::atomic::AtomicU32>,
    /// Make the next N set calls take effect and still report a failure (a timed-out CLI).
    pub apply_then_fail: std::sync::Arc<std::sync::atomic::AtomicU32>,
    /// The OSD map's flags.
    pub osd_flags: std::sync::Arc<std::sync::Mutex<BTreeSet<String>>>,
    /// Fail the next N flag commands (set/unset).
    pub fail_flags: std::sync::Arc<std::sync::atomic::AtomicU32>,
    /// When set: at each `osd set FLAG`, whether this state file already listed FLAG as set
    /// by the enforcer (it must, before the flag is set).
    pub state_file: std::sync::Arc<std::sync::Mutex<Option<std::path::PathBuf>>>,
    pub flag_in_state_file_when_set: std::sync::Arc<std::sync::Mutex<Vec<bool>>>,
    /// While set, every change (config set/rm, osd set/unset) is refused with EACCES, as the
    /// mon refuses a cephx user without the grant.
    pub refuse: std::sync::Arc<std::sync::atomic::AtomicBool>,
    /// What `ceph versions` answers; None: the lab's (16.2.15 pacific on 4 OSDs).
    pub versions: std::sync::Arc<std::sync::Mutex<Option<Result<OsdVersions, String>>>>,
    /// The PGs, OSD map and balancer the backfill lever sees; None: its reads fail.
    pub upmap: std::sync::Arc<std::sync::Mutex<Option<FakeUpmap>>>,
    /// How long each `pg-upmap-items` / `rm-pg-upmap-items` takes (a monitor committing each
    /// in its own OSD map epoch; tokio's clock).
    pub upmap_takes: std::sync::Arc<std::sync::Mutex<std::time::Duration>>,
    /// The fence the enforcer gave ([`Actor::fence`]): honoured as the CLI does, a change that
    /// would start once it passed is not sent. Each clone's own (instances that share the fake
    /// cluster each have their lease).
    pub fence: Option<Fence>,
    /// When set: the process is stopped for this long right after `balancer off` answered
    /// (the lab's fault row 12): every change started meanwhile goes out when it resumes.
    pub stop_after_balancer_off: std::sync::Arc<std::sync::Mutex<Option<std::time::Duration>>>,
    /// Until when the process is stopped.
    pub stopped_until: std::sync::Arc<std::sync::Mutex<Option<tokio::time::Instant>>>,
}

impl FakeActor {
    /// A balancer command refused as the Reef lab's CLI refuses it without the module.
    fn no_module(&self, what: &str) -> Result<(), OpsError> {
        if self.with_upmap(what, |u| u.no_balancer_module)? {
            return Err(OpsError::Ceph(CephError::Failed {
                command: format!("ceph {what}"),
                code: Some(22),
                stderr: "no valid command found; 10 closest matches: | pg stat | Error EINVAL: invalid command".to_string(),
            }));
        }
        Ok(())
    }

    pub fn commands(&self) -> Vec<String> {
        self.commands.lock().map(|c| c.clone()).unwrap_or_default()
    }
    /// The backfill lever's cluster now.
    pub fn upmap_now(&self) -> Option<FakeUpmap> {
        self.upmap.lock().ok().and_then(|u| u.clone())
    }
    fn with_upmap<T>(
        &self,
        what: &str,
        f: impl FnOnce(&mut FakeUpmap) -> T,
    ) -> Result<T, OpsError> {
        let mut guard = self
            .upmap
            .lock()
            .map_err(|_| injected_with(what, "poisoned"))?;
        match guard.as_mut() {
            Some(u) => Ok(f(u)),
            None => Err(injected_with(
                what,
                "Error ENOTSUP: no upmap cluster in this fake",
            )),
        }
    }
    pub fn flags_now(&self) -> BTreeSet<String> {
        self.osd_flags.lock().map(|f| f.clone()).unwrap_or_default()
    }
    /// An operator's `ceph osd set/unset FLAG`.
    pub fn flag_by_hand(&self, flag: &str, set: bool) {
        if let Ok(mut f) = self.osd_flags.lock() {
            if set {
                f.insert(flag.into());
            } else {
                f.remove(flag);
            }
        }
    }
    /// What every change goes through before it is sent: the stop, if any, then the fence.
    async fn gate(&self, what: &str) -> Result<(), OpsError> {
        let stopped = self.stopped_until.lock().ok().and_then(|s| *s);
        if let Some(until) = stopped {
            tokio::time::sleep_until(until).await;
        }
        let mut command = crate::ceph::CephCommand::new(what.split(' '));
        command.not_after = self.fence.as_ref().map(Fence::until);
        if command.fence_passed() {
            return Err(OpsError::Ceph(command.fenced()));
        }
        Ok(())
    }
    fn log(&self, c: String) {
        if let Ok(mut cs) = self.commands.lock() {
            cs.push(c);
        }
    }
    fn flag_fails(&self) -> bool {
        use std::sync::atomic::Ordering;
        self.fail_flags
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok()
    }
    pub fn set_by_hand(&self, key: &str, value: &str) {
        if let Ok(mut db) = self.db.lock() {
            db.insert(key.into(), value.into());
        }
    }
    async fn maybe_stall(&self) {
        use std::sync::atomic::Ordering;
        if self
            .stall_next
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok()
        {
            tokio::time::sleep(std::time::Duration::from_secs(24 * 3600)).await;
        }
    }
    async fn upmap_commit(&self) {
        let takes = self.upmap_takes.lock().map(|d| *d).unwrap_or_default();
        if !takes.is_zero() {
            tokio::time::sleep(takes).await;
        }
    }
    fn should_fail(&self) -> bool {
        use std::sync::atomic::Ordering;
        self.fail_next
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok()
    }
    /// The refusal of `what` (`config set osd k v`) when [`FakeActor::refuse`] is set.
    fn refusal(&self, what: &str) -> Option<OpsError> {
        if !self.refuse.load(std::sync::atomic::Ordering::SeqCst) {
            return None;
        }
        let command = crate::ceph::CephCommand::new(what.split(' '));
        let out = crate::ceph::Output {
            stdout: Vec::new(),
            stderr: "Error EACCES: access denied".into(),
            code: Some(13),
            elapsed: std::time::Duration::ZERO,
        };
        out.success(&command).err().map(OpsError::Ceph)
    }
}

impl Actor for FakeActor {
    async fn set(&self, key: &str, value: &str) -> Result<(), OpsError> {
        let what = format!("config set osd {key} {value}");
        self.gate(&what).await?;
        self.log(what.clone());
        self.maybe_stall().await;
        if let Some(e) = self.refusal(&what) {
            return Err(e);
        }
        if self.should_fail() {
            return Err(injected(&what));
        }
        self.set_by_hand(key, value);
        use std::sync::atomic::Ordering;
        if self
            .apply_then_fail
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok()
        {
            return Err(OpsError::Ceph(CephError::Timeout {
                command: format!("ceph {what}"),
                timeout: std::time::Duration::from_secs(10),
            }));
        }
        Ok(())
    }

    async fn rm(&self, key: &str) -> Result<(), OpsError> {
        let what = format!("config rm osd {key}");
        self.gate(&what).await?;
        self.log(what.clone());
        self.maybe_stall().await;
        if let Some(e) = self.refusal(&what) {
            return Err(e);
        }
        if self.should_fail() {
            return Err(injected(&what));
        }
        if let Ok(mut db) = self.db.lock() {
            db.remove(key);
        }
        Ok(())
    }

    async fn configured(
        &self,
        keys: &[String],
    ) -> Result<BTreeMap<String, Option<String>>, OpsError> {
        let db = self.db.lock().map(|db| db.clone()).unwrap_or_default();
        Ok(keys
            .iter()
            .map(|k| (k.clone(), db.get(k).cloned()))
            .collect())
    }

    async fn push(&self, key: &str, value: &str) -> Result<(), OpsError> {
        let what = format!("tell osd.* config set {key} {value}");
        self.gate(&what).await?;
        self.log(what);
        Ok(())
    }

    async fn unpush(&self, key: &str) -> Result<(), OpsError> {
        let what = format!("tell osd.* config unset {key}");
        self.gate(&what).await?;
        self.log(what);
        Ok(())
    }

    async fn flags(&self) -> Result<BTreeSet<String>, OpsError> {
        Ok(self.flags_now())
    }

    async fn osd_versions(&self) -> Result<OsdVersions, OpsError> {
        let given = self.versions.lock().ok().and_then(|v| v.clone());
        given.map(|v| v.map_err(|e| injected_with("versions", &e))).unwrap_or_else(|| {
            Ok(BTreeMap::from([(
                crate::ceph::parse::versions::version_line(
                    "ceph version 16.2.15 (618f440892089921c3e944a991122ddc44e60516) pacific (stable)",
                ),
                4,
            )]))
        })
    }

    async fn set_flag(&self, flag: &str) -> Result<(), OpsError> {
        let what = format!("osd set {flag}");
        self.gate(&what).await?;
        self.log(what.clone());
        let path = self.state_file.lock().ok().and_then(|p| p.clone());
        if let Some(path) = path {
            let listed = super::state::EnforcerState::load(&path)
                .map(|s| s.flags_set.contains(flag))
                .unwrap_or(false);
            if let Ok(mut v) = self.flag_in_state_file_when_set.lock() {
                v.push(listed);
            }
        }
        if let Some(e) = self.refusal(&what) {
            return Err(e);
        }
        if self.flag_fails() {
            return Err(injected(&what));
        }
        self.flag_by_hand(flag, true);
        Ok(())
    }

    async fn unset_flag(&self, flag: &str) -> Result<(), OpsError> {
        let what = format!("osd unset {flag}");
        self.log(what.clone());
        if let Some(e) = self.refusal(&what) {
            return Err(e);
        }
        if self.flag_fails() {
            return Err(injected(&what));
        }
        self.flag_by_hand(flag, false);
        Ok(())
    }

    async fn pgs_brief(&self) -> Result<Vec<PgBrief>, OpsError> {
        self.with_upmap("pg dump pgs_brief", |u| u.pgs.clone())
    }

    async fn upmap_view(&self) -> Result<UpmapView, OpsError> {
        self.with_upmap("osd dump", |u| u.map.clone())
    }

    async fn balancer_status(&self) -> Result<Option<BalancerStatus>, OpsError> {
        if self.with_upmap("balancer status", |u| u.no_balancer_module)? {
            return Ok(None);
        }
        self.with_upmap("balancer status", |u| u.balancer.clone())?
            .map(Some)
            .ok_or_else(|| injected("balancer status"))
    }

    async fn set_pg_upmap_items(&self, pgid: PgId, items: &[UpmapItem]) -> Result<(), OpsError> {
        // Logged as the command Ceph gets (ops::pg_upmap_items_replace), without `ceph `.
        let command = crate::backfill::record::set_items_command(pgid, items);
        let what = command.trim_start_matches("ceph ").to_string();
        self.gate(&what).await?;
        self.log(what.clone());
        self.upmap_commit().await;
        if let Some(e) = self.refusal(&what) {
            return Err(e);
        }
        if self.should_fail() {
            return Err(injected(&what));
        }
        if let Some(stderr) = self.with_upmap(&what, |u| u.refusal(pgid, items))? {
            return Err(OpsError::Ceph(CephError::Failed {
                command: format!("ceph {what}"),
                code: Some(2),
                stderr,
            }));
        }
        self.with_upmap(&what, |u| u.set_items(pgid, items))
    }

    async fn balancer_active(&self, on: bool) -> Result<(), OpsError> {
        let what = format!("balancer {}", if on { "on" } else { "off" });
        self.gate(&what).await?;
        self.log(what.clone());
        self.no_module(&what)?;
        self.with_upmap(&what, |u| {
            if let Some(b) = u.balancer.as_mut() {
                b.active = on;
            }
        })?;
        let stop = self.stop_after_balancer_off.lock().ok().and_then(|s| *s);
        if let (false, Some(d)) = (on, stop) {
            if let Ok(mut until) = self.stopped_until.lock() {
                *until = Some(tokio::time::Instant::now() + d);
            }
        }
        Ok(())
    }

    async fn balancer_mode(&self, mode: &str) -> Result<(), OpsError> {
        let what = format!("balancer mode {mode}");
        self.gate(&what).await?;
        self.log(what.clone());
        self.no_module(&what)?;
        self.with_upmap(&what, |u| {
            if let Some(b) = u.balancer.as_mut() {
                b.mode = mode.to_string();
            }
        })
    }

    fn fence(&mut self, fence: Fence) {
        self.fence = Some(fence);
    }
}

/// The failure a fake command reports: what the CLI prints for a mon that timed out.
fn injected(what: &str) -> OpsError {
    injected_with(what, "Error ETIMEDOUT: injected failure")
}

fn injected_with(what: &str, stderr: &str) -> OpsError {
    OpsError::Ceph(CephError::Failed {
        command: format!("ceph {what}"),
        code: Some(110),
        stderr: stderr.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ceph::fake::FakeClient;

    /// Under a lease every command that changes the cluster carries the fence, read when it is
    /// sent; reads and `osd unset` (which fails open: recovery runs) never do.
    #[tokio::test]
    async fn changes_carry_the_fence_and_reads_and_unpausing_do_not() {
        let client = FakeClient::new();
        let mut actor = CephActor::new(client.clone());
        let until = tokio::time::Instant::now() + std::time::Duration::from_secs(7);
        actor.fence(Fence::new(move || Some(until)));
        let pg = PgId { pool: 2, seed: 1 };
        let item = [UpmapItem { from: 3, to: 1 }];
        let fenced = |calls: Vec<crate::ceph::CephCommand>| {
            assert!(!calls.is_empty());
            calls.iter().all(|c| c.not_after == Some(until))
        };
        let open = |calls: Vec<crate::ceph::CephCommand>| {
            assert!(!calls.is_empty());
            calls.iter().all(|c| c.not_after.is_none())
        };
        macro_rules! calls_of {
            ($e:expr) => {{
                let before = client.calls().len();
                let _ = $e.await;
                client.calls().split_off(before)
            }};
        }
        assert!(fenced(calls_of!(actor.set("osd_max_backfills", "1"))));
        assert!(fenced(calls_of!(actor.rm("osd_max_backfills"))));
        assert!(fenced(calls_of!(actor.push("osd_max_backfills", "1"))));
        assert!(fenced(calls_of!(actor.unpush("osd_max_backfills"))));
        assert!(fenced(calls_of!(actor.set_flag("norecover"))));
        assert!(fenced(calls_of!(actor.set_pg_upmap_items(pg, &item))));
        assert!(fenced(calls_of!(actor.set_pg_upmap_items(pg, &[]))));
        assert!(fenced(calls_of!(actor.balancer_active(false))));
        assert!(fenced(calls_of!(actor.balancer_mode("upmap"))));
        assert!(open(calls_of!(actor.unset_flag("norecover"))));
        assert!(open(calls_of!(
            actor.configured(&["osd_max_backfills".into()])
        )));
        assert!(open(calls_of!(actor.flags())));
        assert!(open(calls_of!(actor.upmap_view())));
        assert!(open(calls_of!(actor.balancer_status())));
        assert!(open(calls_of!(actor.pgs_brief())));
        // Without a lease (observe mode, the CLI's `backfill` commands): no fence at all.
        let plain = CephActor::new(FakeClient::new());
        let _ = plain.set("osd_max_backfills", "1").await;
        assert!(plain.client.calls().iter().all(|c| c.not_after.is_none()));
    }
}
