//! Fake admin sockets speaking Ceph's protocol (read the command up to NUL or newline, answer a
//! 4-byte big-endian length then the payload, close), and replays of real lab replies
//! (tests/fixtures/asok).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::UnixListener;

use super::*;
use crate::ceph::ops::{run_tell, OpsError};
use crate::ceph::parse::test_support::{fixture, fixture_str};
use crate::ceph::parse::{histogram, tell};
use crate::collect::commands;
use crate::latency::Histogram;

const SHORT: Duration = Duration::from_millis(300);

/// A directory under the system temp dir, removed on drop (short paths: a unix socket path has
/// at most 107 bytes).
struct TempDir(PathBuf);

impl TempDir {
    fn new() -> Self {
        static N: AtomicUsize = AtomicUsize::new(0);
        let dir = std::env::temp_dir().join(format!(
            "crb-asok-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }

    fn join(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[derive(Clone)]
enum Behavior {
    /// Length-prefixed payload, as a daemon answers.
    Reply(Vec<u8>),
    /// Exactly these bytes, then close.
    Raw(Vec<u8>),
    /// Read the command, then never answer (a hung daemon).
    Hang,
}

/// A fake daemon's admin socket, serving one connection at a time like Ceph's admin socket
/// thread; stopped on drop.
struct FakeDaemon {
    task: tokio::task::JoinHandle<()>,
    /// Every request received, terminator included.
    received: Arc<Mutex<Vec<Vec<u8>>>>,
}

impl Drop for FakeDaemon {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl FakeDaemon {
    fn requests(&self) -> Vec<Vec<u8>> {
        self.received.lock().unwrap().clone()
    }
}

fn fake_daemon(path: &Path, behavior: Behavior) -> FakeDaemon {
    let listener = UnixListener::bind(path).unwrap();
    let received = Arc::new(Mutex::new(Vec::new()));
    let log = received.clone();
    let task = tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                return;
            };
            let mut stream = BufReader::new(stream);
            let mut request = Vec::new();
            // Ceph ends a command at NUL or newline.
            loop {
                let mut byte = Vec::new();
                if stream.read_until(0, &mut byte).await.unwrap_or(0) == 0 {
                    break;
                }
                let done = matches!(byte.last(), Some(0 | b'\n'));
                request.extend(byte);
                if done {
                    break;
                }
            }
            log.lock().unwrap().push(request);
            let mut stream = stream.into_inner();
            match &behavior {
                Behavior::Reply(payload) => {
                    let len = u32::try_from(payload.len()).unwrap().to_be_bytes();
                    let _ = stream.write_all(&len).await;
                    let _ = stream.write_all(payload).await;
                }
                Behavior::Raw(bytes) => {
                    let _ = stream.write_all(bytes).await;
                }
                Behavior::Hang => std::future::pending::<()>().await,
            }
            let _ = stream.shutdown().await;
        }
    });
    FakeDaemon { task, received }
}

/// A socket file nothing listens on: what a killed daemon leaves behind.
fn stale_socket(path: &Path) {
    drop(std::os::unix::net::UnixListener::bind(path).unwrap());
}

fn histograms_cmd() -> CephCommand {
    commands::histograms()
}

fn doc(n: u32) -> Vec<u8> {
    format!("{{\"n\":{n}}}").into_bytes()
}

// ---- admin_command ----

#[tokio::test]
async fn reply_is_read_and_the_command_ends_with_nul() {
    let dir = TempDir::new();
    let path = dir.join("osd.0.asok");
    let payload = fixture("asok/osd.0.perf-histogram-dump.json");
    let daemon = fake_daemon(&path, Behavior::Reply(payload.clone()));

    let got = admin_command(&path, &histogram_dump_request(), SHORT)
        .await
        .unwrap();
    assert_eq!(got, payload);
    assert_eq!(
        daemon.requests(),
        [b"{\"format\":\"json\",\"prefix\":\"perf histogram dump\"}\0".to_vec()]
    );
    // An empty reply is a reply (some commands print nothing).
    let empty = dir.join("osd.1.asok");
    let _d = fake_daemon(&empty, Behavior::Reply(Vec::new()));
    assert_eq!(
        admin_command(&empty, &json!({"prefix": "x"}), SHORT)
            .await
            .unwrap(),
        b""
    );
}

#[tokio::test]
async fn a_hung_daemon_times_out() {
    let dir = TempDir::new();
    let path = dir.join("ceph-osd.0.asok");
    let daemon = fake_daemon(&path, Behavior::Hang);
    let started = std::time::Instant::now();
    let e = admin_command(&path, &histogram_dump_request(), SHORT)
        .await
        .unwrap_err();
    assert!(started.elapsed() < SHORT * 5, "{:?}", started.elapsed());
    assert!(
        matches!(&e, AdminSocketError::Timeout { path: p, timeout } if *p == path && *timeout == SHORT),
        "{e:?}"
    );
    assert_eq!(e.reason(), "timeout");
    let msg = e.to_string();
    assert!(
        msg.contains(&path.display().to_string()) && msg.contains("300ms"),
        "{msg}"
    );
    assert_eq!(daemon.requests().len(), 1, "the command was sent");
}

#[tokio::test]
async fn short_reads_are_errors() {
    let dir = TempDir::new();
    // The length announces 100 bytes, 10 arrive.
    let path = dir.join("osd.0.asok");
    let mut raw = 100u32.to_be_bytes().to_vec();
    raw.extend_from_slice(b"{\"osd\":{}}");
    let _d = fake_daemon(&path, Behavior::Raw(raw));
    let e = admin_command(&path, &histogram_dump_request(), SHORT)
        .await
        .unwrap_err();
    assert!(
        matches!(
            e,
            AdminSocketError::ShortRead {
                what: "reply",
                expected: 100,
                got: 10,
                ..
            }
        ),
        "{e:?}"
    );
    assert!(
        e.to_string()
            .contains("after 10 of the 100 bytes of the reply"),
        "{e}"
    );

    // Closed before the length is complete (what a daemon does with a command it cannot read).
    for (name, raw, got) in [("osd.1.asok", vec![], 0), ("osd.2.asok", vec![0, 0], 2)] {
        let path = dir.join(name);
        let _d = fake_daemon(&path, Behavior::Raw(raw));
        let e = admin_command(&path, &histogram_dump_request(), SHORT)
            .await
            .unwrap_err();
        assert!(
            matches!(e, AdminSocketError::ShortRead { what: "reply length", expected: 4, got: g, .. } if g == got),
            "{e:?}"
        );
    }
}

#[tokio::test]
async fn an_absurd_length_is_refused_before_reading() {
    let dir = TempDir::new();
    let path = dir.join("osd.0.asok");
    // HTTP, say: "HTTP" read as a length is 1.2 GB.
    let _d = fake_daemon(
        &path,
        Behavior::Raw(b"HTTP/1.1 400 Bad Request\r\n".to_vec()),
    );
    let e = admin_command(&path, &histogram_dump_request(), SHORT)
        .await
        .unwrap_err();
    assert!(
        matches!(
            e,
            AdminSocketError::TooLarge {
                len: 0x4854_5450,
                max: MAX_REPLY_BYTES,
                ..
            }
        ),
        "{e:?}"
    );
    assert!(e.to_string().contains("is it a Ceph admin socket?"), "{e}");

    // The cap itself is accepted: only lengths above it are refused.
    let path = dir.join("osd.1.asok");
    let _d = fake_daemon(
        &path,
        Behavior::Raw((MAX_REPLY_BYTES + 1).to_be_bytes().to_vec()),
    );
    let e = admin_command(&path, &histogram_dump_request(), SHORT)
        .await
        .unwrap_err();
    assert_eq!(e.reason(), "too_large");
}

#[tokio::test]
async fn missing_and_stale_sockets() {
    let dir = TempDir::new();
    let missing = dir.join("osd.7.asok");
    let e = admin_command(&missing, &histogram_dump_request(), SHORT)
        .await
        .unwrap_err();
    assert!(
        matches!(&e, AdminSocketError::Missing { path } if *path == missing),
        "{e:?}"
    );
    assert!(
        e.to_string().contains(&missing.display().to_string()),
        "{e}"
    );

    let stale = dir.join("osd.8.asok");
    stale_socket(&stale);
    let e = admin_command(&stale, &histogram_dump_request(), SHORT)
        .await
        .unwrap_err();
    assert!(
        matches!(&e, AdminSocketError::Refused { path } if *path == stale),
        "{e:?}"
    );
    assert!(e.to_string().contains("stale socket file"), "{e}");

    // A plain file where a socket should be: connect says "connection refused" on Linux.
    let plain = dir.join("osd.9.asok");
    std::fs::write(&plain, b"").unwrap();
    let e = admin_command(&plain, &histogram_dump_request(), SHORT)
        .await
        .unwrap_err();
    assert!(
        matches!(
            e,
            AdminSocketError::Refused { .. } | AdminSocketError::Io { .. }
        ),
        "{e:?}"
    );
}

/// The tests run as root here, which no socket mode denies: the mapping is checked directly.
#[test]
fn connect_errors_are_typed() {
    let p = Path::new("/var/run/ceph/ceph-osd.3.asok");
    let e = connect_error(p, io::Error::from(io::ErrorKind::PermissionDenied));
    assert!(
        matches!(e, AdminSocketError::PermissionDenied { .. }),
        "{e:?}"
    );
    assert!(
        e.to_string()
            .starts_with("permission denied on admin socket /var/run/ceph/ceph-osd.3.asok:"),
        "{e}"
    );
    assert!(matches!(
        connect_error(p, io::Error::from(io::ErrorKind::NotFound)),
        AdminSocketError::Missing { .. }
    ));
    assert!(matches!(
        connect_error(p, io::Error::from(io::ErrorKind::ConnectionRefused)),
        AdminSocketError::Refused { .. }
    ));
    let e = connect_error(p, io::Error::from(io::ErrorKind::WouldBlock));
    assert!(matches!(e, AdminSocketError::Busy { .. }), "{e:?}");
    assert!(e.to_string().contains("hung"), "{e}");
    let e = connect_error(p, io::Error::from(io::ErrorKind::InvalidInput));
    assert!(
        matches!(
            e,
            AdminSocketError::Io {
                op: "connecting to",
                ..
            }
        ),
        "{e:?}"
    );
}

/// A failed command is answered `ERROR: ...` (recorded from a real OSD): a typed error.
#[tokio::test]
async fn a_daemon_error_reply_is_an_error() {
    let dir = TempDir::new();
    let path = dir.join("osd.0.asok");
    let wire = fixture("asok/osd.0.unknown-prefix.wire");
    let _d = fake_daemon(&path, Behavior::Raw(wire));
    let e = admin_command(&path, &json!({"prefix": "no such command"}), SHORT)
        .await
        .unwrap_err();
    match &e {
        AdminSocketError::Daemon {
            command, message, ..
        } => {
            assert_eq!(command, r#"{"prefix":"no such command"}"#);
            assert_eq!(
                message,
                "(22) Invalid argument | unknown command prefix no such command"
            );
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(e.reason(), "daemon_error");
}

#[tokio::test]
async fn a_command_longer_than_the_daemon_reads_is_refused() {
    let path = Path::new("/nonexistent/osd.0.asok");
    let long = json!({"prefix": "x".repeat(MAX_COMMAND_BYTES)});
    let e = admin_command(path, &long, SHORT).await.unwrap_err();
    assert!(
        matches!(e, AdminSocketError::CommandTooLong { .. }),
        "{e:?}"
    );
    // 1023 bytes is still fine (it reaches connect, which fails here).
    let fits = json!({"prefix": "x".repeat(MAX_COMMAND_BYTES - 13)});
    assert_eq!(fits.to_string().len(), MAX_COMMAND_BYTES);
    let e = admin_command(path, &fits, SHORT).await.unwrap_err();
    assert!(matches!(e, AdminSocketError::Missing { .. }), "{e:?}");
}

// ---- discovery ----

#[test]
fn socket_names() {
    for (name, id) in [
        ("ceph-osd.3.asok", Some(3)),
        ("osd.3.asok", Some(3)),
        ("osd.0.asok", Some(0)),
        ("ceph-osd.12.asok", Some(12)),
        ("backup-osd.4.asok", Some(4)),
        ("my-cluster-osd.5.asok", Some(5)),
        ("ceph-mon.a.asok", None),
        ("mon.a.asok", None),
        ("ceph-mgr.x.asok", None),
        ("mgr.x.asok", None),
        ("ceph-mds.fs.host.abc.asok", None),
        ("ceph-client.admin.12345.94823.asok", None),
        ("ceph-client.x-osd.3.asok", None),
        ("-osd.3.asok", None),
        ("osd.3.pid", None),
        ("osd.3", None),
        ("osd.3.asok.tmp", None),
        ("osd..asok", None),
        ("osd.a.asok", None),
        ("osd.03.asok", None),
        ("osd.-1.asok", None),
        ("osd.3.1.asok", None),
        ("osd.99999999999.asok", None),
    ] {
        assert_eq!(osd_id_from_socket_name(name), id, "{name}");
    }
}

#[test]
fn discovery_finds_both_naming_schemes_sorted_by_id() {
    let dir = TempDir::new();
    for name in [
        "osd.10.asok",
        "ceph-osd.2.asok",
        "osd.0.asok",
        "ceph-osd.3.asok",
        "osd.3.asok", // same OSD as ceph-osd.3: the first by name wins
        "mon.a.asok",
        "ceph-mon.a.asok",
        "mgr.x.asok",
        "ceph-mgr.x.asok",
        "ceph-client.admin.4242.139.asok",
    ] {
        stale_socket(&dir.join(name));
    }
    // Not sockets, or not OSDs: ignored.
    std::fs::write(dir.join("osd.0.pid"), "123").unwrap();
    std::fs::write(dir.join("osd.5.asok"), "").unwrap();
    std::fs::create_dir(dir.join("osd.6.asok")).unwrap();
    std::os::unix::fs::symlink(dir.join("osd.10.asok"), dir.join("osd.11.asok")).unwrap();
    std::os::unix::fs::symlink(dir.join("gone"), dir.join("osd.12.asok")).unwrap();

    let found = discover_osd_sockets(&dir.0).unwrap();
    let names: Vec<(&str, String)> = found
        .iter()
        .map(|(d, p)| {
            (
                d.as_str(),
                p.file_name().unwrap().to_string_lossy().into_owned(),
            )
        })
        .collect();
    assert_eq!(
        names,
        [
            ("osd.0", "osd.0.asok".to_string()),
            ("osd.2", "ceph-osd.2.asok".to_string()),
            ("osd.3", "ceph-osd.3.asok".to_string()),
            ("osd.10", "osd.10.asok".to_string()),
            ("osd.11", "osd.11.asok".to_string()),
        ]
    );
    assert!(found.iter().all(|(_, p)| p.starts_with(&dir.0)));

    let empty = TempDir::new();
    assert!(discover_osd_sockets(&empty.0).unwrap().is_empty());
    let e = discover_osd_sockets(&dir.join("nope")).unwrap_err();
    assert!(matches!(e, AdminSocketError::DirUnreadable { .. }), "{e:?}");
    assert!(e.to_string().contains("nope"), "{e}");
}

// ---- the Client ----

#[tokio::test]
async fn several_osds_one_failing_looks_like_the_cli() {
    let dir = TempDir::new();
    let _d0 = fake_daemon(&dir.join("ceph-osd.0.asok"), Behavior::Reply(doc(0)));
    stale_socket(&dir.join("ceph-osd.1.asok"));
    let _d2 = fake_daemon(&dir.join("ceph-osd.2.asok"), Behavior::Hang);
    let _d10 = fake_daemon(&dir.join("ceph-osd.10.asok"), Behavior::Reply(doc(10)));
    let _mon = fake_daemon(&dir.join("ceph-mon.a.asok"), Behavior::Reply(doc(99)));

    let client = AdminSocketClient::new(&dir.0, SHORT);
    let out = client.run(&histograms_cmd()).await.unwrap();
    // The same as `tell 'osd.*'` with osd.1 and osd.2 down: a blank line each, nothing else.
    assert_eq!(
        String::from_utf8(out.stdout.clone()).unwrap(),
        "\nosd.0: {\"n\":0}\n\n\n\nosd.10: {\"n\":10}\n"
    );
    assert_eq!(out.code, Some(6));
    let lines: Vec<&str> = out.stderr.lines().collect();
    assert_eq!(lines.len(), 2, "{}", out.stderr);
    assert!(lines[0].starts_with(
        "Error ENXIO: problem getting command descriptions from osd.1: nothing listens on admin socket "
    ), "{}", lines[0]);
    assert!(
        lines[1].starts_with(
            "Error ENXIO: problem getting command descriptions from osd.2: admin socket "
        ) && lines[1].contains("did not answer within 300ms"),
        "{}",
        lines[1]
    );
    let errors = tell::stderr_errors(&out.stderr);
    let named: Vec<Option<&str>> = errors.iter().map(|e| e.daemon.as_deref()).collect();
    assert_eq!(named, [Some("osd.1"), Some("osd.2")]);

    // The collector's own path: the two that answered, the two that did not, with the cause.
    let (ok, failed) = run_tell(&client, histograms_cmd(), |b| {
        serde_json::from_slice::<Value>(b).map_err(|e| crate::ceph::parse::ParseError::Shape {
            path: "(top level)".into(),
            expected: e.to_string(),
        })
    })
    .await
    .unwrap();
    assert_eq!(
        ok,
        BTreeMap::from([
            ("osd.0".to_string(), json!({"n": 0})),
            ("osd.10".to_string(), json!({"n": 10}))
        ])
    );
    assert_eq!(failed.keys().collect::<Vec<_>>(), ["osd.1", "osd.2"]);
    assert!(failed["osd.2"].contains("did not answer"), "{failed:?}");
}

/// One hung OSD costs one timeout, not one per hung OSD.
#[tokio::test]
async fn hung_osds_are_queried_concurrently() {
    let dir = TempDir::new();
    let timeout = Duration::from_millis(500);
    let _hung: Vec<FakeDaemon> = (0..4)
        .map(|i| fake_daemon(&dir.join(&format!("osd.{i}.asok")), Behavior::Hang))
        .collect();
    let _ok = fake_daemon(&dir.join("osd.4.asok"), Behavior::Reply(doc(4)));
    let out = AdminSocketClient::new(&dir.0, timeout)
        .run(&histograms_cmd())
        .await
        .unwrap();
    // In turn it would take 2 s.
    assert!(
        out.elapsed >= timeout && out.elapsed < timeout * 3,
        "{:?}",
        out.elapsed
    );
    assert_eq!(tell::stderr_errors(&out.stderr).len(), 4);
    assert!(String::from_utf8(out.stdout)
        .unwrap()
        .ends_with("\nosd.4: {\"n\":4}\n"));
}

#[tokio::test]
async fn all_osds_answering_exit_zero() {
    let dir = TempDir::new();
    let d: Vec<FakeDaemon> = (0..4)
        .map(|i| fake_daemon(&dir.join(&format!("osd.{i}.asok")), Behavior::Reply(doc(i))))
        .collect();
    let out = AdminSocketClient::new(&dir.0, SHORT)
        .run(&histograms_cmd())
        .await
        .unwrap();
    assert_eq!(out.code, Some(0));
    assert_eq!(out.stderr, "");
    assert!(out.success(&histograms_cmd()).is_ok());
    let parts = tell::split(std::str::from_utf8(&out.stdout).unwrap());
    assert_eq!(parts.len(), 4);
    for fake in &d {
        assert_eq!(fake.requests().len(), 1);
    }
}

#[tokio::test]
async fn no_osd_socket_is_a_clear_failure() {
    let dir = TempDir::new();
    stale_socket(&dir.join("mon.a.asok"));
    let client = AdminSocketClient::new(&dir.0, SHORT);
    let out = client.run(&histograms_cmd()).await.unwrap();
    assert_eq!(out.code, Some(2));
    assert!(out.stdout.is_empty());
    assert!(
        out.stderr.starts_with("Error ENOENT: no OSD admin socket"),
        "{}",
        out.stderr
    );
    match run_tell(&client, histograms_cmd(), histogram::parse_write_latency).await {
        Err(e @ OpsError::NoDaemonAnswered { .. }) => {
            let msg = e.to_string();
            assert!(msg.contains(&dir.0.display().to_string()), "{msg}");
        }
        other => panic!("{other:?}"),
    }

    let missing = AdminSocketClient::new(dir.join("nope"), SHORT);
    let out = missing.run(&histograms_cmd()).await.unwrap();
    assert_eq!(out.code, Some(2));
    assert!(
        out.stderr
            .starts_with("Error ENOENT: cannot list the admin socket directory"),
        "{}",
        out.stderr
    );
}

#[tokio::test]
async fn other_commands_are_refused() {
    let client = AdminSocketClient::new("/var/run/ceph", SHORT);
    for args in [
        vec!["status"],
        vec!["tell", "osd.*", "config", "get", "osd_mclock_profile"],
        vec!["tell", "osd.0", "perf", "histogram", "dump"],
        vec![
            "tell",
            "osd.*",
            "perf",
            "dump",
            "osd",
            "op_w_latency",
            "extra",
        ],
        vec![
            "config",
            "set",
            "osd",
            "osd_mclock_profile",
            "high_client_ops",
        ],
    ] {
        let cmd = CephCommand::new(args);
        let e = client.run(&cmd).await.unwrap_err();
        let msg = e.to_string();
        assert!(
            msg.contains("not available in host mode")
                && msg.contains("/var/run/ceph")
                && msg.contains(&cmd.to_string()),
            "{msg}"
        );
    }
}

// ---- real replies, replayed ----

fn tell_fixture() -> BTreeMap<String, Histogram> {
    let out = fixture_str("asok/tell-osd-all.perf-histogram-dump.out");
    tell::split(&out)
        .into_iter()
        .map(|p| {
            let d = p.unwrap();
            let h = histogram::parse_write_latency(d.body.as_bytes()).unwrap();
            (d.daemon, h)
        })
        .collect()
}

#[test]
fn recorded_replies_parse_like_tell() {
    let tell = tell_fixture();
    assert_eq!(tell.len(), 4);
    for osd in ["osd.0", "osd.1"] {
        let h = histogram::parse_write_latency(&fixture(&format!(
            "asok/{osd}.perf-histogram-dump.json"
        )))
        .unwrap();
        assert_eq!(h.bounds.len(), 31);
        assert!(h.counts.iter().sum::<u64>() > 0, "{osd}");
        // Captured on an idle lab just before `tell`: the same counts.
        assert_eq!(&h, &tell[osd], "{osd}");
    }
    // `ceph daemon` (pretty-printed) is the same document.
    let pretty =
        histogram::parse_write_latency(&fixture("asok/ceph-daemon.osd.0.perf-histogram-dump.json"))
            .unwrap();
    assert_eq!(&pretty, &tell["osd.0"]);
}

/// A fake server replaying the real replies: the client's output is byte for byte what `tell`
/// printed for those OSDs, so the collector parses the same histograms.
#[tokio::test]
async fn replayed_replies_match_tell_byte_for_byte() {
    let dir = TempDir::new();
    let _d: Vec<FakeDaemon> = ["osd.0", "osd.1"]
        .iter()
        .map(|osd| {
            fake_daemon(
                &dir.join(&format!("ceph-{osd}.asok")),
                Behavior::Reply(fixture(&format!("asok/{osd}.perf-histogram-dump.json"))),
            )
        })
        .collect();
    let client = AdminSocketClient::new(&dir.0, SHORT);
    let out = client.run(&histograms_cmd()).await.unwrap();
    assert_eq!(out.code, Some(0));

    let tell_out = fixture_str("asok/tell-osd-all.perf-histogram-dump.out");
    // osd.0 and osd.1 are the first two of the four records.
    let two: String = tell_out.split_inclusive('\n').take(4).collect();
    assert!(two.starts_with("\nosd.0: {") && two.contains("\nosd.1: {"));
    assert_eq!(String::from_utf8(out.stdout).unwrap(), two);

    let (ok, failed) = run_tell(&client, histograms_cmd(), histogram::parse_write_latency)
        .await
        .unwrap();
    assert!(failed.is_empty());
    let tell = tell_fixture();
    assert_eq!(ok.len(), 2);
    for (osd, h) in &ok {
        assert_eq!(h, &tell[osd], "{osd}");
    }
}

/// A daemon that ignores `"format":"json"` (pretty output): still one line per OSD.
#[tokio::test]
async fn pretty_replies_are_put_on_one_line() {
    let dir = TempDir::new();
    let pretty = fixture("asok/ceph-daemon.osd.0.perf-histogram-dump.json");
    assert!(pretty.windows(2).any(|w| w == b"\n "));
    let _d = fake_daemon(&dir.join("osd.0.asok"), Behavior::Reply(pretty));
    let client = AdminSocketClient::new(&dir.0, SHORT);
    let out = client.run(&histograms_cmd()).await.unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    assert_eq!(text.lines().count(), 2, "blank line + one reply line");
    let (ok, _) = run_tell(&client, histograms_cmd(), histogram::parse_write_latency)
        .await
        .unwrap();
    assert_eq!(ok["osd.0"], tell_fixture()["osd.0"]);
}

#[test]
fn one_line_keeps_strings_intact() {
    assert_eq!(one_line(b"  {\"a\":1}\n"), b"{\"a\":1}");
    assert_eq!(
        one_line(b"{\n    \"a b\": [\n        1,\n        \"x\\\" \\n y\"\n    ]\n}\n"),
        b"{\"a b\":[1,\"x\\\" \\n y\"]}"
    );
    // Invalid JSON keeps its content, on one line.
    assert_eq!(one_line(b"{\"a\n b\":\r\n 1}"), b"{\"a  b\":1}");
    assert_eq!(one_line(b""), b"");
}

/// The latency collector's second command, `perf dump osd op_w_latency`, goes to each socket
/// with the admin-socket prefix `perf dump` and the filter; the real reply (lab, 16.2.15)
/// comes back as the CLI would print it and parses to the counter.
#[tokio::test]
async fn the_write_latency_counter_is_asked_with_its_filter() {
    let dir = TempDir::new();
    let d = fake_daemon(
        &dir.join("ceph-osd.0.asok"),
        Behavior::Reply(fixture("asok/osd.0.perf-dump-osd-op_w_latency.json")),
    );
    let client = AdminSocketClient::new(&dir.0, SHORT);
    let (ok, failed) = run_tell(
        &client,
        commands::write_latency_sums(),
        crate::ceph::parse::perf_dump::parse_write_latency_sum,
    )
    .await
    .unwrap();
    assert!(failed.is_empty());
    assert_eq!(
        ok["osd.0"],
        crate::latency::LatencySum {
            count: 11662,
            seconds: 180.544724453
        }
    );
    let sent: serde_json::Value = {
        let raw = d.requests().remove(0);
        serde_json::from_slice(raw.strip_suffix(b"\0").unwrap()).unwrap()
    };
    assert_eq!(
        sent,
        json!({"prefix": "perf dump", "format": "json", "logger": "osd", "counter": "op_w_latency"})
    );
}
