//! The enforcer's hands: `ceph config set/rm osd KEY`, reading the config database, pushing a
//! value to the running OSDs, and the OSD map's pause flags.

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;

use crate::ceph::parse::config_dump;
use crate::ceph::parse::versions::OsdVersion;

/// How many OSDs run each version.
pub type OsdVersions = BTreeMap<OsdVersion, u64>;
use crate::ceph::{CephCommand, Client};

/// Changes the cluster's configuration for all OSDs. Errors are messages for the decision log.
pub trait Actor: Send + Sync + 'static {
    /// `ceph config set osd KEY VALUE`
    fn set(&self, key: &str, value: &str) -> impl Future<Output = Result<(), String>> + Send;
    /// `ceph config rm osd KEY` (back to "not set")
    fn rm(&self, key: &str) -> impl Future<Output = Result<(), String>> + Send;
    /// The `osd`-section values of `keys` in the config database (None = not set).
    fn configured(
        &self,
        keys: &[String],
    ) -> impl Future<Output = Result<BTreeMap<String, Option<String>>, String>> + Send;
    /// `ceph tell osd.* config set KEY VALUE` (the running OSDs; not persisted)
    fn push(&self, key: &str, value: &str) -> impl Future<Output = Result<(), String>> + Send;
    /// `ceph tell osd.* config unset KEY`: drops a pushed value from the running OSDs. Under a
    /// built-in profile that also drops the profile's value until it is applied again, so it
    /// only comes before a profile change (checked on the lab, 16.2.15).
    fn unpush(&self, key: &str) -> impl Future<Output = Result<(), String>> + Send;
    /// The OSD map's flags (`ceph osd dump` "flags").
    fn flags(&self) -> impl Future<Output = Result<BTreeSet<String>, String>> + Send;
    /// How many OSDs run each Ceph version (`ceph versions`).
    fn osd_versions(&self) -> impl Future<Output = Result<OsdVersions, String>> + Send;
    /// `ceph osd set FLAG`
    fn set_flag(&self, flag: &str) -> impl Future<Output = Result<(), String>> + Send;
    /// `ceph osd unset FLAG`
    fn unset_flag(&self, flag: &str) -> impl Future<Output = Result<(), String>> + Send;
}

pub struct CephActor<C> {
    client: C,
}

impl<C: Client> CephActor<C> {
    pub fn new(client: C) -> Self {
        Self { client }
    }

    async fn run(&self, args: &[&str]) -> Result<Vec<u8>, String> {
        let cmd = CephCommand::new(args.iter().copied());
        let out = self.client.run(&cmd).await.map_err(|e| e.to_string())?;
        out.success(&cmd)
            .map(<[u8]>::to_vec)
            .map_err(|e| e.to_string())
    }
}

impl<C: Client> Actor for CephActor<C> {
    async fn set(&self, key: &str, value: &str) -> Result<(), String> {
        self.run(&["config", "set", "osd", key, value])
            .await
            .map(|_| ())
    }

    async fn rm(&self, key: &str) -> Result<(), String> {
        self.run(&["config", "rm", "osd", key]).await.map(|_| ())
    }

    async fn configured(
        &self,
        keys: &[String],
    ) -> Result<BTreeMap<String, Option<String>>, String> {
        let out = self.run(&["config", "dump"]).await?;
        let entries = config_dump::parse(&out)
            .map_err(|e| format!("cannot parse `ceph config dump`: {e}"))?;
        // Only whole-section `osd` entries: that is what `config set osd` writes. Per-daemon
        // (`osd.3`) or masked entries that win over it show up as OSDs not taking a profile.
        let osd: Vec<(String, String)> = entries
            .into_iter()
            .filter(|e| e.section == "osd" && e.mask.is_empty())
            .map(|e| (e.name, e.value))
            .collect();
        Ok(super::configured_map(&osd, keys))
    }

    async fn push(&self, key: &str, value: &str) -> Result<(), String> {
        self.run(&["tell", "osd.*", "config", "set", key, value])
            .await
            .map(|_| ())
    }

    async fn unpush(&self, key: &str) -> Result<(), String> {
        self.run(&["tell", "osd.*", "config", "unset", key])
            .await
            .map(|_| ())
    }

    async fn flags(&self) -> Result<BTreeSet<String>, String> {
        let out = self.run(&["osd", "dump"]).await?;
        crate::ceph::parse::osd_dump::flags(&out)
            .map_err(|e| format!("cannot read the flags of `ceph osd dump`: {e}"))
    }

    async fn osd_versions(&self) -> Result<OsdVersions, String> {
        let out = self.run(&["versions"]).await?;
        crate::ceph::parse::versions::osd_versions(&out)
            .map_err(|e| format!("cannot read `ceph versions`: {e}"))
    }

    async fn set_flag(&self, flag: &str) -> Result<(), String> {
        self.run(&["osd", "set", flag]).await.map(|_| ())
    }

    async fn unset_flag(&self, flag: &str) -> Result<(), String> {
        self.run(&["osd", "unset", flag]).await.map(|_| ())
    }
}

/// Records every command and answers from an in-memory config database; for tests.
#[derive(Debug, Clone, Default)]
pub struct FakeActor {
    pub db: std::sync::Arc<std::sync::Mutex<BTreeMap<String, String>>>,
    pub commands: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
    /// Fail the next N set/rm calls.
    pub fail_next: std::sync::Arc<std::sync::atomic::AtomicU32>,
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
    /// What `ceph versions` answers; None: the lab's (16.2.15 pacific on 4 OSDs).
    pub versions: std::sync::Arc<std::sync::Mutex<Option<Result<OsdVersions, String>>>>,
}

impl FakeActor {
    pub fn commands(&self) -> Vec<String> {
        self.commands.lock().map(|c| c.clone()).unwrap_or_default()
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
    fn should_fail(&self) -> bool {
        use std::sync::atomic::Ordering;
        self.fail_next
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok()
    }
}

impl Actor for FakeActor {
    async fn set(&self, key: &str, value: &str) -> Result<(), String> {
        self.log(format!("config set osd {key} {value}"));
        if self.should_fail() {
            return Err("Error ETIMEDOUT: injected failure".into());
        }
        self.set_by_hand(key, value);
        use std::sync::atomic::Ordering;
        if self
            .apply_then_fail
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok()
        {
            return Err("`ceph config set` did not finish within 10s and was killed".into());
        }
        Ok(())
    }

    async fn rm(&self, key: &str) -> Result<(), String> {
        self.log(format!("config rm osd {key}"));
        if self.should_fail() {
            return Err("Error ETIMEDOUT: injected failure".into());
        }
        if let Ok(mut db) = self.db.lock() {
            db.remove(key);
        }
        Ok(())
    }

    async fn configured(
        &self,
        keys: &[String],
    ) -> Result<BTreeMap<String, Option<String>>, String> {
        let db = self.db.lock().map_err(|_| "poisoned".to_string())?;
        Ok(keys
            .iter()
            .map(|k| (k.clone(), db.get(k).cloned()))
            .collect())
    }

    async fn push(&self, key: &str, value: &str) -> Result<(), String> {
        self.log(format!("tell osd.* config set {key} {value}"));
        Ok(())
    }

    async fn unpush(&self, key: &str) -> Result<(), String> {
        self.log(format!("tell osd.* config unset {key}"));
        Ok(())
    }

    async fn flags(&self) -> Result<BTreeSet<String>, String> {
        Ok(self.flags_now())
    }

    async fn osd_versions(&self) -> Result<OsdVersions, String> {
        let given = self.versions.lock().ok().and_then(|v| v.clone());
        given.unwrap_or_else(|| {
            Ok(BTreeMap::from([(
                crate::ceph::parse::versions::version_line(
                    "ceph version 16.2.15 (618f440892089921c3e944a991122ddc44e60516) pacific (stable)",
                ),
                4,
            )]))
        })
    }

    async fn set_flag(&self, flag: &str) -> Result<(), String> {
        self.log(format!("osd set {flag}"));
        let path = self.state_file.lock().ok().and_then(|p| p.clone());
        if let Some(path) = path {
            let listed = super::EnforcerState::load(&path)
                .map(|s| s.flags_set.contains(flag))
                .unwrap_or(false);
            if let Ok(mut v) = self.flag_in_state_file_when_set.lock() {
                v.push(listed);
            }
        }
        if self.flag_fails() {
            return Err("Error ETIMEDOUT: injected failure".into());
        }
        self.flag_by_hand(flag, true);
        Ok(())
    }

    async fn unset_flag(&self, flag: &str) -> Result<(), String> {
        self.log(format!("osd unset {flag}"));
        if self.flag_fails() {
            return Err("Error ETIMEDOUT: injected failure".into());
        }
        self.flag_by_hand(flag, false);
        Ok(())
    }
}
