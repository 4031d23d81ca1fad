//! The librados backend without librados: translation, the CLI's layout (checked against
//! recorded CLI output of the lab cluster), the backoff, and the session's connection handling
//! over a fake connector.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::*;
use crate::ceph::parse::test_support::{fixture, fixture_str};
use crate::ceph::parse::{config_value, tell};
use crate::collect::commands;

fn cmd(words: &[&str]) -> CephCommand {
    CephCommand::new(words.iter().copied())
}

fn mon_json(words: &[&str]) -> String {
    match translate(&cmd(words)) {
        Ok(Request::Mon { json }) => json,
        other => panic!("{words:?}: {other:?}"),
    }
}

// ---- Translation ---------------------------------------------------------------------------

/// The JSON the CLI sends for each command (from `ceph --verbose ... --format json` on the lab,
/// 16.2.15; the CLI's key order, compact).
#[test]
fn an_upmap_item_that_is_not_an_osd_id_is_not_translated() {
    for words in [
        &["osd", "pg-upmap-items", "2.a", "2"][..],
        &["osd", "pg-upmap-items", "2.a", "x", "3"],
        &["osd", "pg-upmap-items", "2.a"],
    ] {
        assert!(
            matches!(translate(&cmd(words)), Err(CephError::Unsupported { .. })),
            "{words:?}"
        );
    }
    assert_eq!(
        mon_json(&["osd", "pg-upmap-items", "2.a", "osd.2", "osd.3"]),
        r#"{"prefix":"osd pg-upmap-items","pgid":"2.a","id":[2,3],"format":"json"}"#
    );
}

#[test]
fn every_command_the_program_sends_is_translated_like_the_cli() {
    for (words, json) in [
        (&["status"][..], r#"{"prefix":"status","format":"json"}"#),
        (
            &["osd", "pool", "ls", "detail"],
            r#"{"prefix":"osd pool ls","detail":"detail","format":"json"}"#,
        ),
        (&["osd", "ls"], r#"{"prefix":"osd ls","format":"json"}"#),
        (&["osd", "tree"], r#"{"prefix":"osd tree","format":"json"}"#),
        (
            &["pg", "ls", "undersized"],
            r#"{"prefix":"pg ls","states":["undersized"],"format":"json"}"#,
        ),
        (
            &["pg", "ls", "undersized", "degraded"],
            r#"{"prefix":"pg ls","states":["undersized","degraded"],"format":"json"}"#,
        ),
        (&["pg", "ls"], r#"{"prefix":"pg ls","format":"json"}"#),
        (
            &["pg", "dump", "pgs_brief"],
            r#"{"prefix":"pg dump","dumpcontents":["pgs_brief"],"format":"json"}"#,
        ),
        (&["pg", "dump"], r#"{"prefix":"pg dump","format":"json"}"#),
        (
            &["config", "dump"],
            r#"{"prefix":"config dump","format":"json"}"#,
        ),
        (
            &["config", "get", "osd", "osd_mclock_profile"],
            r#"{"prefix":"config get","who":"osd","key":"osd_mclock_profile","format":"json"}"#,
        ),
        (
            &[
                "config",
                "set",
                "osd",
                "osd_mclock_profile",
                "high_client_ops",
            ],
            r#"{"prefix":"config set","who":"osd","name":"osd_mclock_profile","value":"high_client_ops","format":"json"}"#,
        ),
        (
            &["config", "rm", "osd", "osd_mclock_profile"],
            r#"{"prefix":"config rm","who":"osd","name":"osd_mclock_profile","format":"json"}"#,
        ),
        // The pause rung's commands (`ceph --verbose osd set nobackfill` on 16.2.15).
        (&["osd", "dump"], r#"{"prefix":"osd dump","format":"json"}"#),
        (&["versions"], r#"{"prefix":"versions","format":"json"}"#),
        (
            &["osd", "set", "nobackfill"],
            r#"{"prefix":"osd set","key":"nobackfill","format":"json"}"#,
        ),
        (
            &["osd", "unset", "norecover"],
            r#"{"prefix":"osd unset","key":"norecover","format":"json"}"#,
        ),
        // The backfill lever's (MonCommands.h and the balancer module's signatures; the CLI
        // sends a CephOsdName as a number).
        (
            &["osd", "pg-upmap-items", "2.a", "2", "3"],
            r#"{"prefix":"osd pg-upmap-items","pgid":"2.a","id":[2,3],"format":"json"}"#,
        ),
        (
            &["osd", "pg-upmap-items", "3.1e", "1", "3", "0", "2"],
            r#"{"prefix":"osd pg-upmap-items","pgid":"3.1e","id":[1,3,0,2],"format":"json"}"#,
        ),
        (
            &["osd", "rm-pg-upmap-items", "2.a"],
            r#"{"prefix":"osd rm-pg-upmap-items","pgid":"2.a","format":"json"}"#,
        ),
        (
            &["balancer", "status"],
            r#"{"prefix":"balancer status","format":"json"}"#,
        ),
        (
            &["balancer", "off"],
            r#"{"prefix":"balancer off","format":"json"}"#,
        ),
        (
            &["balancer", "on"],
            r#"{"prefix":"balancer on","format":"json"}"#,
        ),
        (
            &["balancer", "mode", "upmap"],
            r#"{"prefix":"balancer mode","mode":"upmap","format":"json"}"#,
        ),
        (
            &["osd", "get-require-min-compat-client"],
            r#"{"prefix":"osd get-require-min-compat-client","format":"json"}"#,
        ),
        // The lease's registration.
        (
            &["config-key", "get", "ceph-recovery-budget/lease"],
            r#"{"prefix":"config-key get","key":"ceph-recovery-budget/lease","format":"json"}"#,
        ),
        (
            &[
                "config-key",
                "set",
                "ceph-recovery-budget/lease",
                r#"{"pool":".mgr"}"#,
            ],
            r#"{"prefix":"config-key set","key":"ceph-recovery-budget/lease","val":"{\"pool\":\".mgr\"}","format":"json"}"#,
        ),
    ] {
        assert_eq!(mon_json(words), json, "{words:?}");
        // Valid JSON, whatever the values.
        serde_json::from_str::<serde_json::Value>(json).unwrap();
    }
    assert_eq!(
        translate(&commands::histograms()).unwrap(),
        Request::Tell {
            target: TellTarget::All,
            json: r#"{"prefix":"perf histogram dump","logger":"osd","counter":"op_w_latency_in_bytes_histogram","format":"json"}"#.into()
        }
    );
    for (words, json) in [
        (
            &["tell", "osd.*", "perf", "histogram", "dump"][..],
            r#"{"prefix":"perf histogram dump","format":"json"}"#,
        ),
        (
            &["tell", "osd.*", "perf", "histogram", "dump", "osd"],
            r#"{"prefix":"perf histogram dump","logger":"osd","format":"json"}"#,
        ),
        (
            // Rung 2's push to the running OSDs: `val` is a list (n=N in the OSD's command).
            &[
                "tell",
                "osd.*",
                "config",
                "set",
                "osd_mclock_scheduler_background_recovery_lim",
                "300",
            ],
            r#"{"prefix":"config set","var":"osd_mclock_scheduler_background_recovery_lim","val":["300"],"format":"json"}"#,
        ),
        (
            // `ceph --verbose tell osd.0 config unset ...` on 16.2.15.
            &[
                "tell",
                "osd.*",
                "config",
                "unset",
                "osd_mclock_scheduler_background_recovery_lim",
            ],
            r#"{"prefix":"config unset","var":"osd_mclock_scheduler_background_recovery_lim","format":"json"}"#,
        ),
        (
            &["tell", "osd.*", "perf", "dump", "osd", "op_w"],
            r#"{"prefix":"perf dump","logger":"osd","counter":"op_w","format":"json"}"#,
        ),
    ] {
        assert_eq!(
            translate(&cmd(words)).unwrap(),
            Request::Tell {
                target: TellTarget::All,
                json: json.into()
            },
            "{words:?}"
        );
    }
    assert_eq!(
        translate(&commands::osd_config_get("osd_op_queue")).unwrap(),
        Request::Tell {
            target: TellTarget::All,
            json: r#"{"prefix":"config get","var":"osd_op_queue","format":"json"}"#.into()
        }
    );
    assert_eq!(
        translate(&cmd(&["tell", "osd.12", "perf", "dump"])).unwrap(),
        Request::Tell {
            target: TellTarget::One(12),
            json: r#"{"prefix":"perf dump","format":"json"}"#.into()
        }
    );
    // The collector's own command list, all known.
    for c in [
        commands::status(),
        commands::pools(),
        commands::pgs_brief(),
        commands::undersized_pgs(),
        commands::histograms(),
        commands::osd_config_get("osd_mclock_profile"),
        commands::osd_tree(),
        commands::osd_dump(),
    ] {
        assert!(translate(&c).is_ok(), "{c}");
    }
}

#[test]
fn values_are_json_escaped() {
    let json = mon_json(&["config", "set", "osd", "k", "a \"b\"\\\n"]);
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v["value"], "a \"b\"\\\n");
}

#[test]
fn unknown_commands_are_refused_naming_the_backend() {
    for words in [
        &["osd", "df"][..],
        &["health"],
        &[],
        &["pg", "ls", "3", "undersized"],
        &["pg", "dump", "pgs_brief", "everything"],
        &["config", "set", "osd", "k", "v", "--force"],
        &["config", "get", "osd"],
        &["tell", "mon.a", "perf", "dump"],
        &["tell", "osd.x", "perf", "dump"],
        &["tell", "osd.*", "injectargs", "--debug-ms=1"],
        &["tell", "osd.*"],
        &["tell", "osd.*", "perf", "dump", "osd", "op_w", "extra"],
    ] {
        let err = translate(&cmd(words)).unwrap_err();
        assert_eq!(err.reason(), "unsupported", "{words:?}");
        let text = err.to_string();
        assert!(
            text.contains("librados backend does not know") && text.contains("--ceph.backend cli"),
            "{text}"
        );
    }
}

#[test]
fn new_error_reasons_are_published() {
    for e in [
        CephError::Connect {
            message: "x".into(),
        },
        CephError::Unsupported {
            command: "ceph x".into(),
        },
    ] {
        assert!(crate::metrics::ERROR_REASONS.contains(&e.reason()), "{e}");
    }
}

// ---- The CLI's layout, against recorded CLI output ------------------------------------------

fn lab(name: &str) -> (Vec<u8>, String) {
    (
        fixture(&format!("lab/{name}.out")),
        fixture_str(&format!("lab/{name}.err")),
    )
}

#[test]
fn mon_replies_print_like_the_cli() {
    // `ceph --format json config get osd osd_mclock_profile`: the mon's plain value.
    let (out, err) = lab("healthy.config-get-osd-osd_mclock_profile");
    let p = print_mon(&Reply::ok("high_client_ops\n"));
    assert_eq!((p.stdout, p.stderr, p.code), (out, err, 0));

    // `config set`: nothing but the blank line.
    let (out, err) = lab("mclock-switch.1-config-set-osd_mclock_profile-high_client_ops");
    let p = print_mon(&Reply::ok(""));
    assert_eq!((p.stdout, p.stderr, p.code), (out, err, 0));

    // A failure that still returned output (the mgr answers `pg ls` with the empty list and
    // EINVAL): both printed, exit code 22.
    let (out, err) = lab("error.pg-ls-undersizedX");
    let reply = Reply {
        ret: -22,
        outbuf: b"{\"pg_ready\":true}".to_vec(),
        outs: err
            .trim_end()
            .strip_prefix("Error EINVAL: ")
            .expect("recorded error")
            .to_string(),
    };
    let p = print_mon(&reply);
    assert_eq!((p.stdout, p.stderr, p.code), (out, err, 22));

    // A status string on success goes to stderr, exit code 0.
    let p = print_mon(&Reply {
        ret: 0,
        outbuf: Vec::new(),
        outs: "set 1".into(),
    });
    assert_eq!((p.stderr.as_str(), p.code), ("set 1\n", 0));
}

/// Splits a recorded multi-OSD output back into the OSDs' replies.
fn replies_of(recorded: &str) -> Vec<(u32, Reply)> {
    tell::split(recorded)
        .into_iter()
        .map(|p| {
            let d = p.expect("a reply");
            let osd = d.daemon.trim_start_matches("osd.").parse().expect("osd id");
            (osd, Reply::ok(d.body))
        })
        .collect()
}

#[test]
fn tell_replies_print_like_the_cli() {
    // Four OSDs' histograms (~140 KB): byte for byte.
    let (out, err) = lab("healthy.tell-osd-all-perf-histogram-dump");
    let replies = replies_of(&String::from_utf8(out.clone()).unwrap());
    assert_eq!(replies.len(), 4);
    let p = print_tell(&replies);
    assert!(p.stdout == out, "stdout differs from the CLI's");
    assert_eq!((p.stderr, p.code), (err, 0));

    // The same with a trailing newline in the OSDs' replies: stripped, as the CLI does.
    let with_newlines: Vec<(u32, Reply)> = replies
        .iter()
        .map(|(o, r)| {
            let mut r = r.clone();
            r.outbuf.extend_from_slice(b"\n \x0b");
            (*o, r)
        })
        .collect();
    assert!(print_tell(&with_newlines).stdout == out);

    // osd.1 down (Objecter: ENXIO "osd down"): only its blank line on stdout, the CLI's error
    // line on stderr, exit code 6.
    for name in [
        "osd1-down.tell-osd-all-config-get-osd_mclock_profile",
        "osd1-down.tell-osd-all-perf-histogram-dump",
    ] {
        let (out, err) = lab(name);
        let mut replies = replies_of(&String::from_utf8(out.clone()).unwrap());
        assert_eq!(replies.len(), 3, "{name}");
        replies.insert(1, (1, Reply::err(ENXIO, "osd down")));
        let p = print_tell(&replies);
        assert!(p.stdout == out, "{name}: stdout differs");
        assert_eq!((p.stderr.as_str(), p.code), (err.as_str(), 6), "{name}");
        // What the collector reads from it.
        let errors = tell::stderr_errors(&p.stderr);
        assert_eq!(errors[0].daemon.as_deref(), Some("osd.1"));
    }

    // One target that does not exist (Objecter: ENOENT "osd dne"): exit code 2.
    let (out, err) = lab("error.tell-osd99-perf-histogram-dump");
    let p = print_tell(&[(99, Reply::err(ENOENT, "osd dne"))]);
    assert_eq!((p.stdout, p.stderr, p.code), (out, err, 2));
}

#[test]
fn tell_edge_cases() {
    // One target: no prefix, the reply as it came (newline kept), as the CLI prints it.
    let p = print_tell(&[(0, Reply::ok("{\"a\":1}\n"))]);
    assert_eq!(p.stdout, b"\n{\"a\":1}\n");
    // Several: an empty reply leaves only its blank line.
    let p = print_tell(&[(0, Reply::ok("{}")), (1, Reply::ok(" \n"))]);
    assert_eq!(p.stdout, b"\nosd.0: {}\n\n");
    // Command errors keep the OSD's own message (unattributed, as with the CLI); a timeout
    // names the OSD; the exit code is the last failure's.
    let p = print_tell(&[
        (
            0,
            Reply::err(
                ENOENT,
                "error getting 'nonexist': (2) No such file or directory",
            ),
        ),
        (1, Reply::err(ETIMEDOUT, "")),
        (2, Reply::ok("{}")),
    ]);
    assert_eq!(
        p.stderr,
        "Error ENOENT: error getting 'nonexist': (2) No such file or directory\nError ETIMEDOUT: no answer from osd.1 in time (timed out)\n"
    );
    assert_eq!(p.code, ETIMEDOUT);
    assert_eq!(
        tell::stderr_errors(&p.stderr)[1].daemon.as_deref(),
        Some("osd.1")
    );
    // A status string on success, prefixed.
    let p = print_tell(&[
        (0, Reply::ok("{}")),
        (
            3,
            Reply {
                ret: 0,
                outbuf: b"{}".to_vec(),
                outs: "note".into(),
            },
        ),
    ]);
    assert_eq!(p.stderr, "osd.3: note\n");
    // No OSD at all: nothing.
    assert_eq!(print_tell(&[]), Printed::default());
}

#[test]
fn errno_names_are_pythons() {
    for (n, name) in [
        (1, "EPERM"),
        (2, "ENOENT"),
        (6, "ENXIO"),
        (11, "EAGAIN"),
        (22, "EINVAL"),
        (35, "EDEADLOCK"),
        (95, "ENOTSUP"),
        (107, "ENOTCONN"),
        (110, "ETIMEDOUT"),
        (132, "ERFKILL"),
        (41, "Unknown"),
        (58, "Unknown"),
        (0, "Unknown"),
        (133, "Unknown"),
        (-5, "Unknown"),
        (100_000, "Unknown"),
    ] {
        assert_eq!(errno_name(n), name, "{n}");
    }
    assert_eq!(errno_text(2), "ENOENT (No such file or directory)");
}

#[test]
fn python_rstrip_strips_what_python_strips() {
    assert_eq!(python_rstrip(b"{} \t\n\r\x0b\x0c"), b"{}");
    assert_eq!(python_rstrip(b" \n"), b"");
    assert_eq!(python_rstrip(b""), b"");
    assert_eq!(python_rstrip(b" a b "), b" a b");
}

#[test]
fn osd_ls() {
    assert_eq!(parse_osd_ls(b"[0,1,2,3]\n"), Ok(vec![0, 1, 2, 3]));
    assert_eq!(parse_osd_ls(b"[]"), Ok(vec![]));
    let e = parse_osd_ls(b"0\n1\n").unwrap_err();
    assert!(e.contains("osd ls"), "{e}");
    assert!(parse_osd_ls(b"[-1]").is_err());
}

// ---- Backoff and librados options ------------------------------------------------------------

#[test]
fn backoff_doubles_up_to_its_cap_forever() {
    let s = |n| Duration::from_secs(n);
    let delays: Vec<Duration> = Backoff::default().take(9).collect();
    assert_eq!(
        delays,
        [s(1), s(2), s(4), s(8), s(16), s(32), s(60), s(60), s(60)]
    );
    let ms = |n| Duration::from_millis(n);
    assert_eq!(
        Backoff::new(ms(300), ms(1000)).take(5).collect::<Vec<_>>(),
        [ms(300), ms(600), ms(1000), ms(1000), ms(1000)]
    );
    // A first delay above the cap is capped; a huge one does not overflow.
    assert_eq!(Backoff::new(s(90), s(60)).next(), Some(s(60)));
    let mut b = Backoff::new(Duration::MAX, Duration::MAX);
    assert_eq!(b.nth(3), Some(Duration::MAX));
}

#[test]
fn librados_gets_timeouts_in_whole_seconds() {
    let opts = |d: Duration| {
        librados_timeouts(d)
            .into_iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(" ")
    };
    assert_eq!(
        opts(Duration::from_secs(10)),
        "rados_mon_op_timeout=10 rados_osd_op_timeout=5 client_mount_timeout=10"
    );
    assert_eq!(
        opts(Duration::from_millis(1500)),
        "rados_mon_op_timeout=2 rados_osd_op_timeout=1 client_mount_timeout=2"
    );
    // Never 0, which would mean "wait forever".
    assert_eq!(
        opts(Duration::from_millis(10)),
        "rados_mon_op_timeout=1 rados_osd_op_timeout=1 client_mount_timeout=1"
    );
    let s = RadosSettings {
        conf: None,
        name: None,
        keyring: Some("/k".into()),
        timeout: Duration::from_secs(10),
    };
    let names: Vec<&str> = s.options().iter().map(|(k, _)| *k).collect();
    assert_eq!(
        names,
        [
            "keyring",
            "rados_mon_op_timeout",
            "rados_osd_op_timeout",
            "client_mount_timeout",
            "log_to_stderr",
            "err_to_stderr"
        ]
    );
}

// ---- Session over a fake connection ------------------------------------------------------------

type MonFn = dyn Fn(&str) -> Reply + Send + Sync;
type OsdFn = dyn Fn(u32, &str) -> Reply + Send + Sync;

struct FakeConn {
    mon: Arc<MonFn>,
    osd: Arc<OsdFn>,
    mon_calls: Arc<AtomicUsize>,
}

impl Conn for FakeConn {
    fn mon_command(&self, json: &str) -> Reply {
        self.mon_calls.fetch_add(1, Ordering::SeqCst);
        (self.mon)(json)
    }
    fn osd_command(&self, osd: u32, json: &str) -> Reply {
        (self.osd)(osd, json)
    }
}

#[derive(Clone)]
struct FakeConnector {
    connects: Arc<AtomicUsize>,
    fail: Arc<AtomicBool>,
    mon: Arc<MonFn>,
    osd: Arc<OsdFn>,
    mon_calls: Arc<AtomicUsize>,
}

impl FakeConnector {
    fn new(mon: impl Fn(&str) -> Reply + Send + Sync + 'static) -> Self {
        Self {
            connects: Arc::default(),
            fail: Arc::default(),
            mon: Arc::new(mon),
            osd: Arc::new(|osd, _| Reply::ok(format!("{{\"osd\":{osd}}}"))),
            mon_calls: Arc::default(),
        }
    }
    fn with_osd(mut self, osd: impl Fn(u32, &str) -> Reply + Send + Sync + 'static) -> Self {
        self.osd = Arc::new(osd);
        self
    }
    fn connects(&self) -> usize {
        self.connects.load(Ordering::SeqCst)
    }
}

impl Connector for FakeConnector {
    type Conn = FakeConn;
    fn connect(&self) -> Result<FakeConn, ConnectError> {
        self.connects.fetch_add(1, Ordering::SeqCst);
        if self.fail.load(Ordering::SeqCst) {
            return Err(ConnectError {
                stage: ConnectStage::Connect,
                message: "connecting as client.admin: ETIMEDOUT (Connection timed out)".into(),
            });
        }
        Ok(FakeConn {
            mon: Arc::clone(&self.mon),
            osd: Arc::clone(&self.osd),
            mon_calls: Arc::clone(&self.mon_calls),
        })
    }
}

/// A mon that knows `osd ls` (four OSDs) and `status`.
fn cluster_mon(json: &str) -> Reply {
    if json == OSD_LS_JSON {
        Reply::ok("[0,1,2,3]\n")
    } else if json.contains("\"status\"") {
        Reply::ok("{\"fsid\":\"x\"}\n")
    } else {
        Reply::err(EINVAL, "unknown command")
    }
}

fn session(k: &FakeConnector, timeout: Duration) -> Session<FakeConnector> {
    Session::with_backoff(
        k.clone(),
        timeout,
        Backoff::new(Duration::from_millis(200), Duration::from_secs(1)),
    )
}

#[tokio::test]
async fn one_connection_serves_every_call() {
    let k = FakeConnector::new(cluster_mon);
    let s = session(&k, Duration::from_secs(5));
    for _ in 0..3 {
        let out = s.run(&commands::status()).await.unwrap();
        assert_eq!(out.stdout, b"\n{\"fsid\":\"x\"}\n");
        assert_eq!(out.code, Some(0));
    }
    // Concurrent calls share it too.
    let (status, histograms) = (commands::status(), commands::histograms());
    let (a, b) = tokio::join!(s.run(&status), s.run(&histograms));
    assert!(a.is_ok() && b.is_ok());
    assert_eq!(k.connects(), 1);
}

#[tokio::test]
async fn a_reply_over_the_cap_is_refused_naming_the_command_and_the_flag() {
    let k = FakeConnector::new(cluster_mon);
    let s = session(&k, Duration::from_secs(5)).with_max_reply_bytes(8);
    let e = s.run(&commands::status()).await.unwrap_err();
    assert_eq!(e.reason(), "too_large");
    let text = e.to_string();
    assert!(
        text.contains("ceph status") && text.contains("8 B"),
        "{text}"
    );
    assert!(text.contains("--ceph.max-reply-bytes"), "{text}");
    // The same reply under a cap that fits it.
    let s = session(&k, Duration::from_secs(5)).with_max_reply_bytes(64);
    assert!(s.run(&commands::status()).await.is_ok());
}

#[tokio::test]
async fn tell_all_asks_every_osd_osd_ls_lists_and_prints_like_the_cli() {
    let k = FakeConnector::new(cluster_mon).with_osd(|osd, json| {
        assert_eq!(
            json,
            r#"{"prefix":"config get","var":"osd_mclock_profile","format":"json"}"#
        );
        if osd == 2 {
            Reply::err(ENXIO, "osd down")
        } else {
            Reply::ok(format!("{{\"osd_mclock_profile\":\"p{osd}\"}}"))
        }
    });
    let s = session(&k, Duration::from_secs(5));
    let out = s
        .run(&commands::osd_config_get("osd_mclock_profile"))
        .await
        .unwrap();
    assert_eq!(
        String::from_utf8(out.stdout.clone()).unwrap(),
        "\nosd.0: {\"osd_mclock_profile\":\"p0\"}\n\nosd.1: {\"osd_mclock_profile\":\"p1\"}\n\n\nosd.3: {\"osd_mclock_profile\":\"p3\"}\n"
    );
    assert_eq!(
        out.stderr,
        "Error ENXIO: problem getting command descriptions from osd.2\n"
    );
    assert_eq!(out.code, Some(6));
    // What the collector makes of it.
    let got: Vec<(String, String)> = tell::split(std::str::from_utf8(&out.stdout).unwrap())
        .into_iter()
        .map(|p| {
            let d = p.unwrap();
            let v = config_value::parse_tell_config_get(d.body.as_bytes(), "osd_mclock_profile")
                .unwrap();
            (d.daemon, v)
        })
        .collect();
    assert_eq!(got.len(), 3);
    assert_eq!(got[2], ("osd.3".to_string(), "p3".to_string()));
}

/// Many OSDs answering at different speeds, asked in parallel: replies in `osd ls` order, and
/// faster than one after the other.
#[tokio::test]
async fn tell_keeps_the_order_of_osd_ls() {
    let n = 64u32;
    let k = FakeConnector::new(move |json| {
        if json == OSD_LS_JSON {
            let ids: Vec<u32> = (0..n).rev().collect();
            Reply::ok(serde_json::to_vec(&ids).unwrap())
        } else {
            Reply::err(EINVAL, "?")
        }
    })
    .with_osd(|osd, _| {
        std::thread::sleep(Duration::from_millis(u64::from(osd % 5) * 2 + 1));
        Reply::ok(format!("{{\"id\":{osd}}}\n"))
    });
    let s = session(&k, Duration::from_secs(10));
    let started = Instant::now();
    let out = s.run(&commands::histograms()).await.unwrap();
    let one_by_one: u64 = (0..n).map(|o| u64::from(o % 5) * 2 + 1).sum();
    assert!(
        started.elapsed() < Duration::from_millis(one_by_one),
        "{:?} >= {one_by_one} ms",
        started.elapsed()
    );
    let daemons: Vec<String> = tell::split(std::str::from_utf8(&out.stdout).unwrap())
        .into_iter()
        .map(|p| p.unwrap().daemon)
        .collect();
    let want: Vec<String> = (0..n).rev().map(|o| format!("osd.{o}")).collect();
    assert_eq!(daemons, want);
}

#[test]
fn osds_not_asked_before_the_deadline_are_reported_timed_out() {
    let k = FakeConnector::new(cluster_mon);
    let conn = k.connect().unwrap();
    let past = Instant::now();
    let replies = tell_each(&conn, &[0, 1], "{}", past);
    assert!(replies
        .iter()
        .all(|(_, r)| r.ret == -ETIMEDOUT && r.outs.contains("not asked")));
    let p = print_tell(&replies);
    assert_eq!(p.code, ETIMEDOUT);
    assert!(p.stderr.contains("osd.0") && p.stderr.contains("osd.1"));
}

/// A mon command that times out inside librados means the cluster went away: a timeout error
/// (like a killed CLI), and the next call connects again.
#[tokio::test]
async fn a_timed_out_mon_command_drops_the_connection() {
    let gone = Arc::new(AtomicBool::new(true));
    let g = Arc::clone(&gone);
    let k = FakeConnector::new(move |json| {
        if g.load(Ordering::SeqCst) {
            Reply::err(ETIMEDOUT, "")
        } else {
            cluster_mon(json)
        }
    });
    let s = session(&k, Duration::from_secs(5));
    let err = s.run(&commands::status()).await.unwrap_err();
    assert_eq!(err.reason(), "timeout", "{err}");
    assert_eq!(k.connects(), 1);
    gone.store(false, Ordering::SeqCst);
    s.run(&commands::status()).await.unwrap();
    assert_eq!(k.connects(), 2, "reconnected");
    s.run(&commands::status()).await.unwrap();
    assert_eq!(k.connects(), 2, "and kept");
}

/// A mon error that says nothing about the connection (ENOENT) keeps it, and prints like the
/// CLI; an OSD's timeout keeps it too.
#[tokio::test]
async fn command_errors_keep_the_connection() {
    let k = FakeConnector::new(|json| {
        if json == OSD_LS_JSON {
            Reply::ok("[0]")
        } else {
            Reply::err(ENOENT, "unrecognized key 'nonexistent_key'")
        }
    })
    .with_osd(|_, _| Reply::err(ETIMEDOUT, ""));
    let s = session(&k, Duration::from_secs(5));
    let c = cmd(&["config", "get", "osd", "nonexistent_key"]);
    let out = s.run(&c).await.unwrap();
    assert_eq!(out.stdout, b"\n");
    assert_eq!(
        out.stderr,
        "Error ENOENT: unrecognized key 'nonexistent_key'\n"
    );
    assert_eq!(out.code, Some(2));
    assert!(out.success(&c).is_err());
    let out = s.run(&commands::histograms()).await.unwrap();
    assert_eq!(out.code, Some(ETIMEDOUT));
    s.run(&c).await.unwrap();
    assert_eq!(k.connects(), 1);
}

/// A call that outlives the timeout (librados blocked) ends at the timeout; a mon command that
/// did so drops the connection.
#[tokio::test]
async fn a_hung_call_ends_at_the_timeout() {
    let hang = Arc::new(AtomicBool::new(true));
    let h = Arc::clone(&hang);
    let k = FakeConnector::new(move |json| {
        if h.load(Ordering::SeqCst) {
            std::thread::sleep(Duration::from_millis(600));
        }
        cluster_mon(json)
    });
    let s = session(&k, Duration::from_millis(200));
    let started = Instant::now();
    let err = s.run(&commands::status()).await.unwrap_err();
    assert!(matches!(err, CephError::Timeout { .. }), "{err}");
    assert!(started.elapsed() < Duration::from_millis(500));
    hang.store(false, Ordering::SeqCst);
    s.run(&commands::status()).await.unwrap();
    assert_eq!(k.connects(), 2);
}

/// Failed connections are retried on later calls, no sooner than the backoff allows; a call in
/// between fails at once, saying when the next attempt is.
#[tokio::test]
async fn reconnects_with_backoff() {
    let k = FakeConnector::new(cluster_mon);
    k.fail.store(true, Ordering::SeqCst);
    let s = session(&k, Duration::from_secs(5));
    let err = s.run(&commands::status()).await.unwrap_err();
    assert_eq!(err.reason(), "connect");
    assert!(err.to_string().contains("ETIMEDOUT"), "{err}");
    assert_eq!(k.connects(), 1);

    let err = s.run(&commands::status()).await.unwrap_err();
    assert!(err.to_string().contains("next attempt in"), "{err}");
    assert_eq!(k.connects(), 1, "no attempt within the first delay (200ms)");

    tokio::time::sleep(Duration::from_millis(250)).await;
    assert!(s.run(&commands::status()).await.is_err());
    assert_eq!(k.connects(), 2, "second attempt after the first delay");
    tokio::time::sleep(Duration::from_millis(250)).await;
    assert!(s.run(&commands::status()).await.is_err());
    assert_eq!(k.connects(), 2, "the second delay is 400ms");

    k.fail.store(false, Ordering::SeqCst);
    tokio::time::sleep(Duration::from_millis(200)).await;
    s.run(&commands::status()).await.unwrap();
    assert_eq!(k.connects(), 3);

    // ensure_connected ignores the backoff (start-up check).
    let k2 = FakeConnector::new(cluster_mon);
    k2.fail.store(true, Ordering::SeqCst);
    let s2 = session(&k2, Duration::from_secs(5));
    assert!(s2.ensure_connected().await.is_err());
    k2.fail.store(false, Ordering::SeqCst);
    s2.ensure_connected().await.unwrap();
    assert_eq!(k2.connects(), 2);
}

/// A change whose fence has passed is not sent: no mon command, no OSD asked; the same
/// command within its fence is.
#[tokio::test]
async fn a_command_past_its_fence_is_not_sent() {
    let asked = Arc::new(AtomicUsize::new(0));
    let seen = Arc::clone(&asked);
    let k = FakeConnector::new(|json| {
        if json.contains("pg-upmap-items") {
            Reply::ok("")
        } else {
            cluster_mon(json)
        }
    })
    .with_osd(move |_, _| {
        seen.fetch_add(1, Ordering::SeqCst);
        Reply::ok("{}")
    });
    let s = session(&k, Duration::from_secs(5));
    for words in [
        &["osd", "pg-upmap-items", "2.1", "3", "1"][..],
        &["tell", "osd.*", "config", "set", "osd_max_backfills", "1"][..],
    ] {
        let mut c = cmd(words);
        c.not_after = Some(tokio::time::Instant::now());
        let err = s.run(&c).await.unwrap_err();
        assert_eq!(err.reason(), "fenced", "{err}");
    }
    assert_eq!(k.mon_calls.load(Ordering::SeqCst), 0);
    assert_eq!(asked.load(Ordering::SeqCst), 0);
    let mut c = cmd(&["osd", "pg-upmap-items", "2.1", "3", "1"]);
    c.not_after = Some(tokio::time::Instant::now() + Duration::from_secs(30));
    assert_eq!(s.run(&c).await.expect("sent").code, Some(0));
    assert_eq!(k.mon_calls.load(Ordering::SeqCst), 1);
}

/// An unknown command fails before anything is connected or sent.
#[tokio::test]
async fn unknown_commands_are_not_sent() {
    let k = FakeConnector::new(cluster_mon);
    let s = session(&k, Duration::from_secs(5));
    let err = s.run(&cmd(&["osd", "df"])).await.unwrap_err();
    assert_eq!(err.reason(), "unsupported");
    assert_eq!(k.connects(), 0);
    assert_eq!(k.mon_calls.load(Ordering::SeqCst), 0);
}

/// A connection attempt slower than the timeout ends the call at the timeout.
#[tokio::test]
async fn a_slow_connection_attempt_is_bounded() {
    struct Slow;
    impl Connector for Slow {
        type Conn = FakeConn;
        fn connect(&self) -> Result<FakeConn, ConnectError> {
            std::thread::sleep(Duration::from_millis(500));
            Err(ConnectError {
                stage: ConnectStage::Connect,
                message: "late".into(),
            })
        }
    }
    let s = Session::new(Slow, Duration::from_millis(100));
    let started = Instant::now();
    let err = s.run(&commands::status()).await.unwrap_err();
    assert!(started.elapsed() < Duration::from_millis(400));
    assert!(err.to_string().contains("no connection within"), "{err}");
}

/// Every command the collector really sends (the code, not a list kept here by hand) is one
/// the librados backend knows: a collection cycle over a fake client records them, with host
/// grouping so that `osd tree` is asked too and with no status so that the PGs are listed.
#[tokio::test]
async fn every_command_the_collector_sends_is_known() {
    use crate::ceph::fake::{FakeClient, Reply as FakeReply};
    use crate::collect::{CollectSettings, Collector};
    use crate::latency::aggregate::Grouping;

    let client = FakeClient::new();
    let hist = fixture("healthy-idle/ceph_tell_osd.0_perf_histogram_dump.json");
    let hist: serde_json::Value = serde_json::from_slice(&hist).unwrap();
    client.set(
        &commands::histograms(),
        FakeReply::ok(format!("\nosd.0: {hist}\n")),
    );
    let mut collector = Collector::new(
        client.clone(),
        CollectSettings {
            grouping: Grouping::Host,
            ..Default::default()
        },
    );
    collector.collect_once().await;
    let calls = client.calls();
    assert!(calls.len() >= 6, "{calls:?}");
    assert!(calls.contains(&commands::osd_tree()), "{calls:?}");
    for c in &calls {
        assert!(
            translate(c).is_ok(),
            "the collector sends `{c}`, unknown to librados"
        );
    }
    // And the enforcer's hands (src/enforcer/actor.rs).
    for c in [
        cmd(&[
            "config",
            "set",
            "osd",
            "osd_mclock_profile",
            "high_client_ops",
        ]),
        cmd(&["config", "rm", "osd", "osd_mclock_profile"]),
        cmd(&["config", "dump"]),
    ] {
        assert!(translate(&c).is_ok(), "{c}");
    }
}

#[test]
fn durations_in_messages_are_rounded() {
    let ms = Duration::from_millis;
    assert_eq!(fmt_duration(ms(998)), "1s");
    assert_eq!(fmt_duration(ms(1999)), "2s");
    assert_eq!(fmt_duration(ms(1400)), "1s");
    assert_eq!(fmt_duration(ms(249)), "200ms");
    assert_eq!(fmt_duration(ms(0)), "0s");
    assert_eq!(fmt_duration(Duration::from_secs(60)), "1m");
}
