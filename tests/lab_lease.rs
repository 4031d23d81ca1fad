//! The lease over librados against the lab cluster (scripts/ceph-lab): two client instances,
//! each with its own connection, contend for the lock and the fenced state; and the cephx caps
//! the lease needs, measured with fresh users.
//!
//! Writes only the lease object `ceph-recovery-budget.lease` in the default lease pool (removed
//! before and after) and creates users `client.crb-lease-*` (removed after). Run by
//! scripts/test:
//!   CRB_LAB=1 cargo test --features librados --test lab_lease -- --include-ignored --test-threads=1 --nocapture
#![cfg(feature = "librados")]

mod common;

use std::process::Command;
use std::time::{Duration, Instant};

use ceph_recovery_budget::ceph::rados::RadosClient;
use ceph_recovery_budget::lease::rados::{caps, LeasePool, RadosLockStore, OBJECT};
use ceph_recovery_budget::lease::{
    Acquire, Lease, LeaseConfig, LeaseError, LeaseEvent, LockStore, Renew,
};

use common::*;

/// 6 s lease, 4 s renew deadline, 1 s retry: short, so the test waits little.
fn config() -> LeaseConfig {
    LeaseConfig::new(
        Duration::from_secs(6),
        Duration::from_secs(4),
        Duration::from_secs(1),
    )
    .expect("valid")
}

struct Lab {
    conf: String,
    dir: String,
    rt: tokio::runtime::Runtime,
}

impl Lab {
    fn new() -> Self {
        assert!(
            lab_enabled(),
            "set CRB_LAB=1 with the lab running (scripts/test does both)"
        );
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("runtime");
        Lab {
            conf: lab_env_var("CEPH_CONF"),
            dir: lab_env_var("CEPH_LAB_DIR"),
            rt,
        }
    }

    fn client(&self, name: &str, keyring: &str) -> Result<RadosClient, String> {
        self.rt
            .block_on(RadosClient::connect(
                Some(&self.conf),
                Some(name),
                Some(keyring),
                Duration::from_secs(10),
            ))
            .map_err(|e| e.to_string())
    }

    /// A new client instance as client.admin (its own connection).
    fn admin_store(&self) -> RadosLockStore {
        let keyring = format!("{}/client.admin.keyring", self.dir);
        let client = self
            .client("client.admin", &keyring)
            .expect("librados connects to the lab");
        RadosLockStore::new(client, LeasePool::Default)
    }

    fn rados(&self, args: &[&str]) -> std::process::Output {
        Command::new("rados")
            .args(args)
            .envs(lab_env())
            .output()
            .expect("run rados")
    }

    fn remove_object(&self, pool: &str) {
        // Absent is fine.
        let _ = self.rados(&["-p", pool, "rm", OBJECT]);
    }
}

/// The pool the enforcer's default lease goes to on the lab's release: Pacific's mgr made
/// `device_health_metrics`, from Quincy on it makes `.mgr` (and the Reef lab makes it, its mgr
/// modules being unable to: docs/testing.md).
fn lab_pool() -> &'static str {
    match std::env::var("CEPH_LAB_RELEASE").as_deref() {
        Ok("reef" | "tentacle") => ".mgr",
        _ => "device_health_metrics",
    }
}

/// Removes the lease object whatever happens to the test.
struct RemoveObject<'a>(&'a Lab);

impl Drop for RemoveObject<'_> {
    fn drop(&mut self) {
        self.0.remove_object(lab_pool());
    }
}

fn secs(d: Duration) -> String {
    format!("{:.2} s", d.as_secs_f64())
}

#[test]
#[ignore = "needs the lab cluster: CRB_LAB=1 and --include-ignored"]
fn two_instances_one_lease_fenced_state_expiry_and_release() {
    let lab = Lab::new();
    lab.remove_object(lab_pool());
    let _cleanup = RemoveObject(&lab);
    let a = lab.admin_store();
    let b = lab.admin_store();
    let d = config().lease_duration;
    let rt = &lab.rt;

    // A acquires; B is refused and sees A named as holder.
    let t = Instant::now();
    assert_eq!(
        rt.block_on(a.try_lock(d)).expect("A locks"),
        Acquire::Acquired
    );
    println!("A took the lock in {}", secs(t.elapsed()));
    assert_eq!(
        a.pool().as_deref(),
        Some(lab_pool()),
        "the default pool on the lab's release"
    );
    let Acquire::Held { by: Some(by) } = rt.block_on(b.try_lock(d)).expect("B tries") else {
        panic!("B was not refused")
    };
    assert_eq!(by.instance, a.instance(), "B sees A named");
    assert!(by.client.starts_with("client."), "{by}");
    println!("B refused; holder named: {by}");
    assert_eq!(rt.block_on(b.holder()).expect("holder"), Some(by.clone()));
    // `rados lock info` (the CLI) names the same holder and our description.
    let info = lab.rados(&["-p", lab_pool(), "lock", "info", OBJECT, "enforcer"]);
    let info = String::from_utf8_lossy(&info.stdout);
    assert!(
        info.contains(a.instance()) && info.contains("ceph-recovery-budget enforcer on"),
        "{info}"
    );

    // A renews; B can neither renew nor write; A writes, B reads A's state.
    assert_eq!(rt.block_on(a.renew(d)).expect("A renews"), Renew::Renewed);
    assert_eq!(
        rt.block_on(b.renew(d)).expect("B tries to renew"),
        Renew::Lost {
            by: Some(by.clone())
        }
    );
    let fenced = rt.block_on(b.write_state(b"{\"by\":\"B\"}")).unwrap_err();
    assert!(matches!(fenced, LeaseError::NotHolder { .. }), "{fenced}");
    println!("B's write refused: {fenced}");
    rt.block_on(a.write_state(b"{\"by\":\"A\"}"))
        .expect("A writes");
    assert_eq!(
        rt.block_on(b.read_state()).expect("B reads").as_deref(),
        Some(&b"{\"by\":\"A\"}"[..])
    );

    // Both as elections: A leads, B stands by naming A; then A stops renewing.
    let mut la = Lease::new(a, config());
    let mut lb = Lease::new(b, config());
    let step = rt.block_on(la.step());
    assert!(
        matches!(step.events.as_slice(), [LeaseEvent::Acquired { .. }]),
        "{step:?}"
    );
    let step = rt.block_on(lb.step());
    assert!(
        matches!(step.events.as_slice(), [LeaseEvent::Standby { holder: Some(h), .. }] if h.instance == la.store().instance()),
        "{step:?}"
    );
    let renew_sent = Instant::now();
    assert!(rt.block_on(la.step()).events.is_empty(), "A renews");
    println!("A's last renewal sent; A stops renewing");
    let mut a_stopped = None;
    let b_acquired = loop {
        std::thread::sleep(Duration::from_millis(250));
        if a_stopped.is_none() && !la.is_leader_now() {
            a_stopped = Some(renew_sent.elapsed());
        }
        let step = rt.block_on(lb.step());
        if let Some(e) = step
            .events
            .iter()
            .find(|e| matches!(e, LeaseEvent::Acquired { .. }))
        {
            println!("{e}");
            assert!(
                matches!(e, LeaseEvent::Acquired { previous: Some(p), .. } if p.instance == la.store().instance()),
                "B names A as the previous holder: {e}"
            );
            break renew_sent.elapsed();
        }
        assert!(
            renew_sent.elapsed() < Duration::from_secs(20),
            "B never took over"
        );
    };
    let a_stopped = a_stopped.expect("A stopped acting before B took over");
    println!(
        "A stopped acting {} after its last renewal; B took over {} after it (lease {})",
        secs(a_stopped),
        secs(b_acquired),
        secs(d)
    );
    assert!(a_stopped >= Duration::from_secs(4) && a_stopped < Duration::from_millis(4500));
    assert!(b_acquired >= d, "B took over before the lease expired");
    assert!(b_acquired < d + Duration::from_secs(2), "B took over late");

    // A's late write is refused by the cluster itself (A's own check aside).
    let late = rt
        .block_on(la.store().write_state(b"{\"by\":\"late A\"}"))
        .unwrap_err();
    assert!(matches!(late, LeaseError::NotHolder { .. }), "{late}");
    println!("A's late write refused: {late}");
    let refused = rt.block_on(la.write_state(b"x")).unwrap_err();
    assert!(matches!(refused, LeaseError::NotLeader { .. }), "{refused}");
    rt.block_on(lb.write_state(b"{\"by\":\"B\"}"))
        .expect("B writes");
    assert_eq!(
        rt.block_on(la.read_state()).expect("A reads").as_deref(),
        Some(&b"{\"by\":\"B\"}"[..])
    );
    // A's own former lock is gone, so its renewal is refused and A steps to standby naming B.
    let step = rt.block_on(la.step());
    assert!(
        matches!(step.events.as_slice(), [LeaseEvent::Standby { holder: Some(h), .. }] if h.instance == lb.store().instance())
            || step
                .events
                .iter()
                .any(|e| matches!(e, LeaseEvent::Lost { .. })),
        "{step:?}"
    );

    // B's release frees the lease at once: A takes it on its next try.
    let t = Instant::now();
    let released = rt.block_on(lb.release());
    assert!(released.error.is_none(), "{released:?}");
    println!("{}", released.events[0]);
    assert_eq!(
        rt.block_on(la.store().try_lock(d)).expect("A tries"),
        Acquire::Acquired
    );
    println!(
        "A took the released lease {} after B's release",
        secs(t.elapsed())
    );
    rt.block_on(la.release());
    assert_eq!(rt.block_on(lb.store().holder()).expect("holder"), None);

    // A renewal after expiry is refused even though nobody took the lock meanwhile
    // (LIBRADOS_LOCK_FLAG_MUST_RENEW on 16.2): another leader may have come and gone.
    let short = Duration::from_secs(1);
    assert_eq!(
        rt.block_on(la.store().try_lock(short)).expect("A locks"),
        Acquire::Acquired
    );
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(
        rt.block_on(la.store().renew(d)).expect("A tries to renew"),
        Renew::Lost { by: None }
    );
    assert_eq!(rt.block_on(lb.store().holder()).expect("holder"), None);
}

/// A cephx user created for the test, removed on drop.
struct User<'a> {
    lab: &'a Lab,
    name: String,
    keyring: String,
}

impl<'a> User<'a> {
    fn create(lab: &'a Lab, id: &str, osd_caps: &str) -> Self {
        let name = format!("client.{id}");
        let keyring = std::env::temp_dir()
            .join(format!("crb-lab-lease-{id}.keyring"))
            .to_string_lossy()
            .into_owned();
        let _ = Command::new("ceph")
            .args(["auth", "rm", &name])
            .envs(lab_env())
            .output();
        ceph(&[
            "auth",
            "get-or-create",
            &name,
            "mon",
            "allow r",
            "osd",
            osd_caps,
            "-o",
            &keyring,
        ]);
        User { lab, name, keyring }
    }

    fn store(&self) -> RadosLockStore {
        let client = self
            .lab
            .client(&self.name, &self.keyring)
            .unwrap_or_else(|e| panic!("{} connects: {e}", self.name));
        RadosLockStore::new(client, LeasePool::Default)
    }
}

impl Drop for User<'_> {
    fn drop(&mut self) {
        let _ = Command::new("ceph")
            .args(["auth", "rm", &self.name])
            .envs(lab_env())
            .output();
        let _ = std::fs::remove_file(&self.keyring);
    }
}

/// Each lease call as one user: `ok` or the error's reason.
fn lease_calls(lab: &Lab, store: &RadosLockStore) -> Vec<(&'static str, Result<(), LeaseError>)> {
    let d = config().lease_duration;
    let rt = &lab.rt;
    let take = rt.block_on(store.try_lock(d)).map(|a| match a {
        Acquire::Acquired => (),
        Acquire::Held { by } => panic!("the lock is held by {by:?}"),
    });
    vec![
        ("take", take),
        ("renew", rt.block_on(store.renew(d)).map(|_| ())),
        ("holder", rt.block_on(store.holder()).map(|_| ())),
        ("fenced write", rt.block_on(store.write_state(b"{}"))),
        ("read", rt.block_on(store.read_state()).map(|_| ())),
        ("release", rt.block_on(store.unlock())),
    ]
}

#[test]
#[ignore = "needs the lab cluster: CRB_LAB=1 and --include-ignored"]
fn the_documented_caps_are_enough_and_fewer_are_refused_clearly() {
    let lab = Lab::new();
    lab.remove_object(lab_pool());
    let _cleanup = RemoveObject(&lab);
    let documented = caps(lab_pool());
    let osd_caps = documented
        .strip_prefix("osd '")
        .and_then(|c| c.strip_suffix('\''))
        .expect("caps() is osd '...'");
    let full = User::create(&lab, "crb-lease-full", osd_caps);
    let calls = lease_calls(&lab, &full.store());
    for (call, result) in &calls {
        println!(
            "{documented:<70} {call:<13} {}",
            result.as_ref().map_or_else(|e| e.reason(), |_| "ok")
        );
        assert!(result.is_ok(), "{call} with {documented}: {result:?}");
    }

    // Without class-write (no `x`) or without write at all: the lock is refused with
    // EPERM, named as a permission problem with the caps to grant; reading still works.
    for (id, osd_caps) in [
        (
            "crb-lease-rw",
            format!(
                "allow rw pool={} object_prefix ceph-recovery-budget",
                lab_pool()
            ),
        ),
        (
            "crb-lease-r",
            format!(
                "allow r pool={} object_prefix ceph-recovery-budget",
                lab_pool()
            ),
        ),
        ("crb-lease-other", "allow rwx pool=rbd-vms".to_string()),
    ] {
        let user = User::create(&lab, id, &osd_caps);
        let store = user.store();
        let d = config().lease_duration;
        let take = lab.rt.block_on(store.try_lock(d)).unwrap_err();
        println!("osd '{osd_caps}': take -> {take}");
        assert!(
            matches!(take, LeaseError::PermissionDenied { .. }),
            "{take}"
        );
        let message = take.to_string();
        assert!(
            message.contains("EPERM") && message.contains(&documented),
            "{message}"
        );
        let write = lab.rt.block_on(store.write_state(b"{}")).unwrap_err();
        println!("osd '{osd_caps}': fenced write -> {}", write.reason());
        assert!(
            matches!(write, LeaseError::PermissionDenied { .. }),
            "{write}"
        );
        let read = lab.rt.block_on(store.read_state());
        println!(
            "osd '{osd_caps}': read -> {}",
            read.as_ref().map_or_else(|e| e.reason(), |_| "ok")
        );
        if id == "crb-lease-other" {
            assert!(
                matches!(read, Err(LeaseError::PermissionDenied { .. })),
                "{read:?}"
            );
        } else {
            assert!(read.is_ok(), "{read:?}");
        }
    }
}
