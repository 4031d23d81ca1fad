//! One lease per cluster, whatever each instance is told (issue 33, smaller item a). The lock
//! is one object in one pool: two instances given different `--enforcer.lease-pool` hold two
//! locks and would both lead. So the lease object each leader uses is registered in the
//! monitors' `config-key` store under [`KEY`], cluster-wide, where every instance looks
//! whatever its pool: the first leader registers its object, and an instance that takes a lock
//! elsewhere finds another registered, releases it and stays standby, saying what to change.
//! This is where Ceph's own tools keep a cluster-wide pointer (the mgr modules' `mgr/...`
//! keys); the lease object's pool cannot carry it, as the instances disagree on the pool.
//!
//! A registry that cannot be read (the cephx grant missing, the monitors unreachable) does not
//! stop a leader: it leads without the check, said loudly (an existing deployment keeps
//! working until the grant is added). Two instances racing to register an empty key both read
//! it back after writing, and one that reads the other's steps down; config-key has no
//! compare-and-set, so a narrow window remains (each reads its own back before the other
//! writes).

use std::fmt;

use serde::{Deserialize, Serialize};

use super::{BoxFuture, LeaseError};
use crate::ceph::{CephCommand, CephError, Client};

/// The `config-key` key.
pub const KEY: &str = "ceph-recovery-budget/lease";

/// What the cephx user needs for the registry, as `ceph auth caps` takes it.
pub const CAPS: &str = r#"mon 'allow command "config-key get" with key=ceph-recovery-budget/lease, allow command "config-key set" with key=ceph-recovery-budget/lease'"#;

/// A lease object, as registered.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Registration {
    /// The pool's id: it names the pool through a rename (`device_health_metrics` became
    /// `.mgr` in Quincy, same id). `None` where the store has none (the fake).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pool_id: Option<i64>,
    pub pool: String,
    pub object: String,
}

impl Registration {
    /// The same object: by pool id where both have one, by pool name otherwise.
    pub fn same(&self, other: &Registration) -> bool {
        let pool = match (self.pool_id, other.pool_id) {
            (Some(a), Some(b)) => a == b,
            _ => self.pool == other.pool,
        };
        pool && self.object == other.object
    }
}

impl fmt::Display for Registration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.pool, self.object)?;
        if let Some(id) = self.pool_id {
            write!(f, " (pool id {id})")?;
        }
        Ok(())
    }
}

/// The answer to [`super::LockStore::claim`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Claim {
    /// The registered lease object is this instance's (it was, or is now).
    Ours,
    /// Another is registered: this instance must not lead.
    Elsewhere { registered: String },
}

/// The `config-key` store, object-safe so that a lock store does not carry a client type.
pub trait Registry: Send + Sync {
    /// The value under [`KEY`]; `None` when there is none.
    fn get(&self) -> BoxFuture<'_, Result<Option<String>, LeaseError>>;
    fn set<'a>(&'a self, value: &'a str) -> BoxFuture<'a, Result<(), LeaseError>>;
}

/// Registers `ours` when nothing is, and says whether the registered object is ours. A value
/// that is not a registration of ours is reported as it is (someone else's use of the key).
pub async fn claim(registry: &dyn Registry, ours: &Registration) -> Result<Claim, LeaseError> {
    let judge = |value: Option<String>| -> Option<Claim> {
        let value = value?;
        Some(match serde_json::from_str::<Registration>(value.trim()) {
            Ok(r) if r.same(ours) => Claim::Ours,
            Ok(r) => Claim::Elsewhere {
                registered: r.to_string(),
            },
            Err(_) => Claim::Elsewhere {
                registered: format!(
                    "{:?} (not a registration of ceph-recovery-budget)",
                    value.trim()
                ),
            },
        })
    };
    if let Some(c) = judge(registry.get().await?) {
        return Ok(c);
    }
    let value = serde_json::to_string(ours).map_err(|e| LeaseError::Failed {
        op: "registering the lease",
        object: format!("config-key {KEY}"),
        detail: e.to_string(),
    })?;
    registry.set(&value).await?;
    // Read back: of two instances that found it empty together, the last write stands.
    Ok(judge(registry.get().await?).unwrap_or(Claim::Ours))
}

/// The registry over the program's Ceph client (`ceph config-key get|set`).
pub struct CephRegistry<C>(pub C);

impl<C: Client> CephRegistry<C> {
    async fn run(&self, op: &'static str, words: &[&str]) -> Result<Option<Vec<u8>>, LeaseError> {
        let command = CephCommand::new(words.iter().copied());
        let object = format!("config-key {KEY}");
        let out = self.0.run(&command).await.map_err(|e| LeaseError::Failed {
            op,
            object: object.clone(),
            detail: e.to_string(),
        })?;
        match out.success(&command) {
            Ok(stdout) => Ok(Some(stdout.to_vec())),
            // ENOENT: no such key.
            Err(CephError::Failed { code: Some(2), .. }) => Ok(None),
            Err(CephError::PermissionDenied { .. }) => Err(LeaseError::PermissionDenied {
                op,
                object,
                errno: "EACCES".into(),
                caps: CAPS.into(),
            }),
            Err(e) => Err(LeaseError::Failed {
                op,
                object,
                detail: e.to_string(),
            }),
        }
    }
}

impl<C: Client> Registry for CephRegistry<C> {
    fn get(&self) -> BoxFuture<'_, Result<Option<String>, LeaseError>> {
        Box::pin(async move {
            let out = self
                .run(
                    "reading the lease registration",
                    &["config-key", "get", KEY],
                )
                .await?;
            Ok(out
                .map(|b| String::from_utf8_lossy(&b).trim().to_string())
                .filter(|v| !v.is_empty()))
        })
    }

    fn set<'a>(&'a self, value: &'a str) -> BoxFuture<'a, Result<(), LeaseError>> {
        Box::pin(async move {
            self.run("registering the lease", &["config-key", "set", KEY, value])
                .await
                .map(drop)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ceph::fake::{FakeClient, Reply};

    fn reg(pool: &str, id: Option<i64>) -> Registration {
        Registration {
            pool_id: id,
            pool: pool.into(),
            object: "ceph-recovery-budget.lease".into(),
        }
    }

    #[test]
    fn the_same_object_is_named_by_pool_id_through_a_rename() {
        assert!(reg(".mgr", Some(1)).same(&reg("device_health_metrics", Some(1))));
        assert!(!reg(".mgr", Some(1)).same(&reg("rbd", Some(2))));
        assert!(reg("a", None).same(&reg("a", Some(3))));
        assert_eq!(
            reg(".mgr", Some(1)).to_string(),
            ".mgr/ceph-recovery-budget.lease (pool id 1)"
        );
    }

    #[tokio::test]
    async fn a_claim_registers_when_empty_and_is_refused_for_another_pool() {
        let client = FakeClient::new();
        let get = CephCommand::new(["config-key", "get", KEY]);
        client.set(&get, Reply::fail(2, "Error ENOENT: error obtaining 'ceph-recovery-budget/lease': (2) No such file or directory"));
        let registry = CephRegistry(client.clone());
        assert_eq!(registry.get().await.expect("get"), None);
        let ours = reg(".mgr", Some(1));
        let set = serde_json::to_string(&ours).expect("json");
        client.set(
            &CephCommand::new(["config-key", "set", KEY, set.as_str()]),
            Reply::ok(""),
        );
        // Empty: registered (the fake answers the read back with what it had: still none).
        assert_eq!(claim(&registry, &ours).await.expect("claim"), Claim::Ours);
        assert!(
            client
                .calls()
                .iter()
                .any(|c| c.args == ["config-key", "set", KEY, set.as_str()]),
            "{:?}",
            client.calls()
        );
        // Registered: the same pool (renamed) is ours, another is not.
        client.set(&get, Reply::ok(format!("\n{set}\n")));
        assert_eq!(
            claim(&registry, &reg("device_health_metrics", Some(1)))
                .await
                .expect("claim"),
            Claim::Ours
        );
        assert_eq!(
            claim(&registry, &reg("rbd-meta", Some(7)))
                .await
                .expect("claim"),
            Claim::Elsewhere {
                registered: ".mgr/ceph-recovery-budget.lease (pool id 1)".into()
            }
        );
        // Without the grant: an error naming it.
        client.set(&get, Reply::fail(13, "Error EACCES: access denied"));
        let e = claim(&registry, &ours)
            .await
            .expect_err("refused")
            .to_string();
        assert!(e.contains(CAPS), "{e}");
    }
}
