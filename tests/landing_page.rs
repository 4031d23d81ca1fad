//! The landing page as on-call sees it: in a real browser (Debian's `chromium`, headless), served
//! by `serve` on a recorded cluster state, with a screenshot; and the page's alert list against
//! the alerts file and the runbook. Where chromium is missing the browser test is skipped with a
//! line saying what to install; with CRB_REQUIRE_TOOLS=1 (scripts/test) it fails instead.

mod common;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use ceph_recovery_budget::http::landing::{runbook_url, ALERTS, RUNBOOK};

use common::prom::{read, tool_or_skip, TempDir, ALERTS as ALERTS_FILE};
use common::{chromium, http_get, Exporter};

/// The alert names of the alerts file, in its order.
fn alert_names_in_file() -> Vec<String> {
    read(ALERTS_FILE)
        .lines()
        .filter_map(|l| l.trim().strip_prefix("- alert:"))
        .map(|n| n.trim().to_string())
        .collect()
}

#[test]
fn the_pages_alert_list_is_the_alerts_file_and_each_has_a_runbook_section() {
    assert_eq!(
        ALERTS.to_vec(),
        alert_names_in_file(),
        "http::landing::ALERTS must list the alerts of {ALERTS_FILE}, in its order"
    );
    let alerts = read(ALERTS_FILE);
    let runbook = read(RUNBOOK);
    for alert in ALERTS {
        // The page links exactly what the alert's runbook_url says.
        let url = runbook_url(alert);
        assert!(
            alerts.contains(&format!("runbook_url: {url}")),
            "{alert}: the alerts file has no `runbook_url: {url}`"
        );
        assert!(
            runbook.lines().any(|l| l.trim() == format!("## {alert}")),
            "{RUNBOOK} has no section `## {alert}`"
        );
    }
}

/// A `ceph` that answers from recorded states: `ceph status`, pools, undersized PGs, the OSD map
/// and the config from the undersized fixture (osd.2 down with noout, PGs undersized), the OSDs'
/// answers from the lab's healthy recording. While the file `blind` exists in `dir` the OSDs do not answer, with an error that
/// has markup in it, which the page must show as text.
fn fake_ceph(dir: &TempDir) -> String {
    let root = env!("CARGO_MANIFEST_DIR");
    let u = format!("{root}/tests/fixtures/undersized");
    let lab = format!("{root}/tests/fixtures/lab/healthy");
    let blind = dir.path().join("blind");
    let script = format!(
        "#!/bin/sh\n\
         case \"$*\" in\n\
         *'pg dump pgs_brief'*) exec cat '{u}/ceph_pg_dump_pgs_brief.json' ;;\n\
         *'osd pool ls detail'*) exec cat '{u}/ceph_osd_pool_ls_detail.json' ;;\n\
         *'config dump'*) exec cat '{u}/ceph_config_dump.json' ;;\n\
         status*) exec cat '{u}/ceph_status.json' ;;\n\
         esac\n\
         if [ ! -e '{blind}' ]; then\n\
           case \"$*\" in\n\
           *'perf histogram dump'*) exec cat '{lab}.tell-osd-all-perf-histogram-dump.out' ;;\n\
           *'config get osd_op_queue'*) exec cat '{lab}.tell-osd-all-config-get-osd_op_queue.out' ;;\n\
           *'config get osd_mclock_profile'*) exec cat '{lab}.tell-osd-all-config-get-osd_mclock_profile.out' ;;\n\
           *'osd dump'*) exec cat '{u}/ceph_osd_dump.json' ;;\n\
           esac\n\
         fi\n\
         echo 'Error EINVAL: <b>not recorded</b>' >&2\n\
         exit 22\n",
        blind = blind.display()
    );
    let path = dir.write("ceph", &script);
    let made = Command::new("chmod").arg("+x").arg(&path).status();
    assert!(made.is_ok_and(|s| s.success()), "chmod {}", path.display());
    path.to_string_lossy().into_owned()
}

fn dump_dom(browser: &Path, dir: &TempDir, tag: &str, url: &str) -> String {
    String::from_utf8_lossy(&chromium(browser, dir, tag, "--dump-dom", url).stdout).into_owned()
}

#[test]
fn the_landing_page_reads_well_in_a_real_browser() {
    let Some(browser) = tool_or_skip("chromium", "chromium") else {
        return;
    };
    let dir = TempDir::new("landing");
    let ceph = fake_ceph(&dir);
    let blind = dir.write("blind", "");
    let state = dir.path().join("enforcer-state.json");
    let serve = Exporter::start_without_lab(&[
        "--ceph.backend",
        "cli",
        "--ceph-cmd",
        &ceph,
        "--collect.interval",
        "1s",
        "--enforcer.mode",
        "observe",
        "--enforcer.baseline",
        "16ms",
        "--enforcer.state-file",
        state.to_str().expect("utf-8 temp path"),
    ]);
    let url = format!("http://127.0.0.1:{}/", serve.port);
    let page_says = |what: &'static str| {
        serve.wait_for(
            Duration::from_secs(30),
            what,
            |_| {},
            || http_get(serve.port, "/").1.contains(what),
        )
    };

    // Blind: the OSDs do not answer. The enforcer holds, and the page says which runbook
    // sections cover that; the errors came from the cluster and are text, not markup.
    page_says("state HOLDING");
    let dom = dump_dom(&browser, &dir, "blind", &url);
    for section in [
        "RecoveryBudgetCollectorDown",
        "RecoveryBudgetEnforcerHolding",
    ] {
        let link = format!("<a href=\"{}\"><b>{section}</b></a>", runbook_url(section));
        assert!(
            dom.contains(&link),
            "no {link} in the rendered page:\n{dom}"
        );
    }
    assert!(
        dom.contains("&lt;b&gt;not recorded&lt;/b&gt;") && !dom.contains("<b>not recorded"),
        "errors from ceph are escaped:\n{dom}"
    );

    // The OSDs answer again: redundancy at risk (an OSD down, PGs undersized), so the bound is
    // suspended, recovery first.
    std::fs::remove_file(&blind).expect("remove the blind marker");
    page_says("state SUSPENDED");
    let dom = dump_dom(&browser, &dir, "suspended", &url);
    // First what is happening and what to do, from the recorded state.
    for said in [
        "<div class=\"headline\"><p class=\"what\">osd.2 is down but still in since ",
        "`noout` is set, so Ceph will not mark it out",
        "<b>Do:</b> Bring osd.2 back",
        "Runbook: RecoveryLatencyBudgetSuspended</a>",
    ] {
        assert!(
            dom.contains(said),
            "no {said:?} in the rendered page:\n{dom}"
        );
    }
    // The status lines, as `status` prints them.
    for line in [
        "enforcer: observe mode, state SUSPENDED",
        "recovery: 7880 degraded + 0 misplaced objects",
        "redundancy: 19 PGs undersized; pools at min_size: ",
    ] {
        assert!(
            dom.contains(line),
            "no {line:?} in the rendered page:\n{dom}"
        );
    }
    assert!(
        dom.contains("<meta http-equiv=\"refresh\" content=\"5\">"),
        "refresh at the 5 s floor (collect interval 1s):\n{dom}"
    );
    let current = format!(
        "<a href=\"{}\"><b>RecoveryLatencyBudgetSuspended</b></a>",
        runbook_url("RecoveryLatencyBudgetSuspended")
    );
    assert!(
        dom.contains(&current),
        "the current state's section:\n{dom}"
    );
    for alert in ALERTS {
        let link = format!("<a href=\"{}\">{alert}</a>", runbook_url(alert));
        assert!(
            dom.contains(&link),
            "no {link} in the rendered page:\n{dom}"
        );
    }

    // Where the links lead: the runbook, served by the exporter, with the section's anchor.
    let section = format!("{url}{}", runbook_url("RecoveryLatencyBudgetSuspended"));
    let book = dump_dom(&browser, &dir, "runbook", &section);
    assert!(
        book.contains(
            "<h2 id=\"recoverylatencybudgetsuspended\">RecoveryLatencyBudgetSuspended</h2>"
        ),
        "{book}"
    );

    let png = dir.path().join("landing.png");
    let shot = format!("--screenshot={}", png.display());
    chromium(&browser, &dir, "shot", &shot, &url);
    let image = std::fs::read(&png).unwrap_or_else(|e| panic!("{}: {e}", png.display()));
    assert!(
        image.starts_with(b"\x89PNG\r\n\x1a\n") && image.len() > 10_000,
        "a screenshot of the page ({} bytes)",
        image.len()
    );
    // To look at it, or to refresh docs/img/landing.png.
    if let Some(keep) = std::env::var_os("CRB_LANDING_SCREENSHOT") {
        std::fs::write(&keep, &image).unwrap_or_else(|e| panic!("{keep:?}: {e}"));
    }
}
