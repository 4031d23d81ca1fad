//! The landing page: the status lines, what the current state is called in the runbook, and a
//! link to every alert's section. Plain HTML with a little inline CSS and no external assets, so
//! that it works air-gapped; a meta refresh keeps it current without JavaScript.
//!
//! The runbook is served by the exporter itself at the same relative path the alerts'
//! `runbook_url` use (`docs/runbook.md#<alert in lower case>`), so the page's links work wherever
//! the exporter is reachable, also behind a path prefix.

use std::time::Duration;

use super::headline::{Case, Headline};
use crate::enforcer::state::Phase;
use crate::enforcer::EnforcerView;

/// The runbook, as the alerts' `runbook_url` name it (alerts/ceph-recovery-budget.alerts.yml).
pub const RUNBOOK: &str = "docs/runbook.md";

/// The runbook's text, embedded so that the exporter serves it without network access.
const RUNBOOK_TEXT: &str = include_str!("../../docs/runbook.md");

/// Every alert of alerts/ceph-recovery-budget.alerts.yml, in the file's order; each has a
/// `## <name>` section in the runbook (a test checks both).
pub const ALERTS: [&str; 12] = [
    "RecoveryLatencyBudgetExceeded",
    "RecoveryLatencyBudgetSuspended",
    "RecoveryBudgetCollectorDown",
    "RecoveryBudgetEnforcerHolding",
    "RecoveryBudgetNoEnforcerActs",
    "RecoveryBudgetBaselineSuspect",
    "RecoveryPausedByEnforcerTooLong",
    "RecoveryPauseFlagStuck",
    "CephRecoveryStalled",
    "RecoveryPausedByEnforcer",
    "RecoveryBudgetExporterDownWhilePaused",
    "RecoveryBudgetExporterDownWhileHoldingPGs",
];

/// RecoveryPausedByEnforcerTooLong fires past this much pause in one recovery.
const PAUSED_TOO_LONG_SECONDS: f64 = 900.0;

/// The page never refreshes faster than this, even with a shorter collect interval.
const MIN_REFRESH_SECONDS: u64 = 5;

/// An alert's runbook section, as its `runbook_url` says.
pub fn runbook_url(alert: &str) -> String {
    format!("{RUNBOOK}#{}", alert.to_lowercase())
}

/// One state the page links to the runbook for: the alert that covers it and why it applies.
#[derive(Debug, Clone, PartialEq)]
pub struct Situation {
    pub alert: &'static str,
    pub why: String,
}

/// One collector's row.
#[derive(Debug, Clone)]
pub struct CollectorRow {
    pub name: String,
    pub up: bool,
    /// How old its data is; None when it never had any.
    pub age: Option<Duration>,
    pub last_error: Option<String>,
}

/// What the page shows; built by the handler from the snapshot and the enforcer's view.
#[derive(Debug, Clone)]
pub struct Page {
    pub version: String,
    pub telemetry_path: String,
    /// What is happening and what to do, shown first.
    pub headline: Option<Headline>,
    pub lines: Vec<String>,
    pub situations: Vec<Situation>,
    pub collectors: Vec<CollectorRow>,
    pub cycle: u64,
    pub interval: Duration,
}

/// The runbook sections for what is happening now, most pressing first. From what the enforcer
/// knows (its view) and which collectors are down; empty when nothing needs on-call.
pub fn situations(
    view: Option<&EnforcerView>,
    collectors_down: &[String],
    headline: Option<&Headline>,
) -> Vec<Situation> {
    let mut out = Vec::new();
    if !collectors_down.is_empty() {
        out.push(Situation {
            alert: "RecoveryBudgetCollectorDown",
            why: format!("collectors down: {}", collectors_down.join("; ")),
        });
    }
    // Stalled as the headline judges it (PGs recovering, backfilling or waiting to, and no
    // object recovered over four collections, not by our pause), so that the page never names
    // this section for a down OSD that nothing can recover yet, nor after one slow collection.
    let stalled = headline
        .is_some_and(|h| h.case == Case::RecoveryStalled)
        .then(|| Situation {
            alert: "CephRecoveryStalled",
            why: "recovery is not making progress (the first lines say why)".to_string(),
        });
    let Some(v) = view else {
        out.extend(stalled);
        return out;
    };
    if v.paused {
        if v.paused_seconds > PAUSED_TOO_LONG_SECONDS && v.pause_share > 0.0 {
            out.push(Situation {
                alert: "RecoveryPausedByEnforcerTooLong",
                why: format!(
                    "recovery paused for {} in this recovery",
                    crate::units::fmt_secs(v.paused_seconds)
                ),
            });
        }
        out.push(Situation {
            alert: "RecoveryPausedByEnforcer",
            why: "the enforcer has paused recovery (nobackfill, norecover)".to_string(),
        });
    } else if !v.flags_set.is_empty() {
        // Flags the enforcer set but no longer wants: unsetting them has not worked yet.
        out.push(Situation {
            alert: "RecoveryPauseFlagStuck",
            why: format!(
                "flags set by the enforcer while it does not pause: {}",
                v.flags_set.join(", ")
            ),
        });
    }
    if v.suspended {
        out.push(Situation {
            alert: "RecoveryLatencyBudgetSuspended",
            why: format!(
                "redundancy at risk ({}): the latency bound is suspended, recovery first",
                if v.pools_at_min_size.is_empty() {
                    format!("{} PGs undersized", v.pgs_undersized)
                } else {
                    format!("pools at min_size: {}", v.pools_at_min_size.join(", "))
                }
            ),
        });
    }
    if v.phase == Phase::Holding || v.holding_reason.is_some() {
        out.push(Situation {
            alert: "RecoveryBudgetEnforcerHolding",
            why: format!(
                "the enforcer holds: {}",
                v.holding_reason
                    .as_deref()
                    .unwrap_or("its observations are not usable")
            ),
        });
    }
    // Enforce mode, not leading, and no other holder seen: maybe nobody acts for the cluster.
    if v.leader == Some(false) && v.lease_holder.is_none() {
        out.push(Situation {
            alert: "RecoveryBudgetNoEnforcerActs",
            why: format!(
                "this enforcer does not hold the lease and sees no other holder{}",
                v.lease_error
                    .as_deref()
                    .map(|e| format!(": {e}"))
                    .unwrap_or_default()
            ),
        });
    }
    if v.breached && v.recovery_active && !v.suspended {
        out.push(Situation {
            alert: "RecoveryLatencyBudgetExceeded",
            why: format!(
                "client p99 above the bound during recovery for {}",
                crate::units::fmt_secs(v.breach_seconds)
            ),
        });
    }
    if v.baseline_suspect {
        out.push(Situation {
            alert: "RecoveryBudgetBaselineSuspect",
            why: format!(
                "without recovery, client p99 has stayed above the bound for {} or more: the baseline looks too low",
                crate::units::fmt_secs(v.breach_for_seconds)
            ),
        });
    }
    out.extend(stalled);
    out
}

/// How often the page reloads: the collect interval, at least 5 s, so it never reloads faster
/// than its data changes.
pub fn refresh_seconds(interval: Duration) -> u64 {
    interval
        .as_secs_f64()
        .ceil()
        .max(MIN_REFRESH_SECONDS as f64) as u64
}

pub fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
        .replace('\'', "&#39;")
}

const STYLE: &str = "body{font-family:system-ui,-apple-system,'Segoe UI',sans-serif;margin:1.5em auto;max-width:72em;padding:0 1em;color:#1d1d1f;line-height:1.4}\
h1{font-size:1.4em;margin:0 0 .3em}h1 small{font-weight:normal;color:#666;font-size:.7em}\
h2{font-size:1.1em;margin:1.4em 0 .4em;border-bottom:1px solid #ddd;padding-bottom:.2em}\
nav a{margin-right:1em}a{color:#0b57d0}\
pre{background:#f6f8fa;border:1px solid #e1e4e8;border-radius:4px;padding:.8em;white-space:pre-wrap;word-break:break-word;font-size:14px;line-height:1.45;margin:0}\
.state{padding:.6em .9em;border-radius:4px;margin:.4em 0}.ok{background:#e8f5e9;border-left:4px solid #2e7d32}\
.act{background:#fff4e5;border-left:4px solid #e65100}\
table{border-collapse:collapse;font-size:.9em}td,th{border:1px solid #ddd;padding:.3em .6em;text-align:left;vertical-align:top}\
th{background:#f6f8fa}.down{color:#b71c1c;font-weight:bold}ul.alerts{columns:2;margin:.2em 0}\
footer{color:#666;font-size:.85em;margin-top:1.5em}\
.headline{background:#eef3fd;border-left:4px solid #0b57d0;border-radius:4px;padding:.5em .9em;margin:.8em 0}\
.headline p{margin:.3em 0}.headline .what{font-size:1.1em}";

/// The whole page. Everything that comes from the cluster or the enforcer is escaped.
pub fn render(page: &Page) -> String {
    let mut s = String::with_capacity(8192);
    let refresh = refresh_seconds(page.interval);
    let metrics = escape(&page.telemetry_path);
    s.push_str(&format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n\
         <meta http-equiv=\"refresh\" content=\"{refresh}\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <title>ceph-recovery-budget</title>\n<style>{STYLE}</style></head><body>\n\
         <h1>ceph-recovery-budget <small>{version}</small></h1>\n\
         <nav><a href=\"{metrics}\">Metrics</a><a href=\"decisions\">Decisions (JSON)</a>\
         <a href=\"api/status\">Status (JSON)</a><a href=\"{RUNBOOK}\">Runbook</a>\
         <a href=\"-/healthy\">/-/healthy</a><a href=\"-/ready\">/-/ready</a></nav>\n",
        version = escape(&page.version),
    ));

    if let Some(h) = &page.headline {
        let section = h
            .runbook
            .as_deref()
            .map(|a| format!(" <a href=\"{}\">Runbook: {}</a>", runbook_url(a), escape(a)))
            .unwrap_or_default();
        s.push_str(&format!(
            "<div class=\"headline\"><p class=\"what\">{}</p><p class=\"todo\"><b>Do:</b> {}{section}</p></div>\n",
            escape(&h.what),
            escape(&h.todo),
        ));
    }

    s.push_str("<h2>What to read in the runbook now</h2>\n");
    if page.situations.is_empty() {
        s.push_str(&format!(
            "<div class=\"state ok\">Nothing for on-call: no alert's condition holds. \
             The <a href=\"{RUNBOOK}\">runbook</a> says what each alert means.</div>\n"
        ));
    } else {
        for sit in &page.situations {
            s.push_str(&format!(
                "<div class=\"state act\"><a href=\"{url}\"><b>{alert}</b></a>: {why}</div>\n",
                url = runbook_url(sit.alert),
                alert = sit.alert,
                why = escape(&sit.why),
            ));
        }
    }

    s.push_str("<h2>Now</h2>\n<pre>");
    for line in &page.lines {
        s.push_str(&escape(line));
        s.push('\n');
    }
    s.push_str("</pre>\n");

    s.push_str(
        "<h2>Collectors</h2>\n<table><tr><th>collector</th><th>state</th><th>data from</th><th>last error</th></tr>\n",
    );
    for c in &page.collectors {
        let age = c
            .age
            .map(|a| format!("{:.0} s ago", a.as_secs_f64()))
            .unwrap_or_else(|| "never".to_string());
        s.push_str(&format!(
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>\n",
            escape(&c.name),
            if c.up {
                "up"
            } else {
                "<span class=\"down\">down</span>"
            },
            age,
            escape(c.last_error.as_deref().unwrap_or("")),
        ));
    }
    s.push_str("</table>\n");

    s.push_str("<h2>Every alert's runbook section</h2>\n<ul class=\"alerts\">\n");
    for alert in ALERTS {
        s.push_str(&format!(
            "<li><a href=\"{}\">{alert}</a></li>\n",
            runbook_url(alert)
        ));
    }
    s.push_str("</ul>\n");

    s.push_str(&format!(
        "<footer>Collection cycle {cycle}, every {interval}; this page reloads every {refresh} s.</footer>\n</body></html>\n",
        cycle = page.cycle,
        interval = crate::units::fmt_secs(page.interval.as_secs_f64()),
    ));
    s
}

/// The runbook as HTML: headings become anchors named as GitHub names them (what the alerts'
/// `runbook_url` point at), the rest stays readable Markdown text.
pub fn runbook_html() -> String {
    let mut s = format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <title>Runbook: ceph-recovery-budget</title>\n<style>{STYLE}</style></head><body>\n\
         <nav><a href=\"../\">Back to the exporter</a></nav>\n"
    );
    let mut text = String::new();
    let flush = |s: &mut String, text: &mut String| {
        if !text.trim().is_empty() {
            s.push_str(&format!("<pre>{}</pre>\n", escape(text.trim_matches('\n'))));
        }
        text.clear();
    };
    let mut in_code = false;
    for line in RUNBOOK_TEXT.lines() {
        if line.starts_with("```") {
            in_code = !in_code;
        }
        let level = line.chars().take_while(|c| *c == '#').count();
        let heading = !in_code && (1..=4).contains(&level) && line[level..].starts_with(' ');
        if heading {
            flush(&mut s, &mut text);
            let title = line[level..].trim();
            s.push_str(&format!(
                "<h{level} id=\"{}\">{}</h{level}>\n",
                slug(title),
                escape(title)
            ));
        } else {
            text.push_str(line);
            text.push('\n');
        }
    }
    flush(&mut s, &mut text);
    s.push_str("</body></html>\n");
    s
}

/// GitHub's heading anchor: lower case, spaces to '-', punctuation other than '-' and '_' dropped.
fn slug(title: &str) -> String {
    title
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c.to_ascii_lowercase()),
            _ => None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::enforcer::policy::Policy;

    fn page(situations: Vec<Situation>) -> Page {
        Page {
            version: "0.1.0".into(),
            telemetry_path: "/metrics".into(),
            headline: None,
            lines: vec![
                "enforcer: enforce mode, state THROTTLED".into(),
                "recovery: 0 degraded + 4210 misplaced objects".into(),
            ],
            situations,
            collectors: vec![CollectorRow {
                name: "status".into(),
                up: true,
                age: Some(Duration::from_secs(3)),
                last_error: None,
            }],
            cycle: 7,
            interval: Duration::from_secs(15),
        }
    }

    fn view() -> EnforcerView {
        EnforcerView::new(&Policy::default())
    }

    fn alerts(s: &[Situation]) -> Vec<&'static str> {
        s.iter().map(|s| s.alert).collect()
    }

    #[test]
    fn the_page_refreshes_at_the_collect_interval_and_never_faster_than_5s() {
        let html = render(&page(vec![]));
        assert!(
            html.contains("<meta http-equiv=\"refresh\" content=\"15\">"),
            "{html}"
        );
        assert_eq!(refresh_seconds(Duration::from_secs(1)), 5);
        assert_eq!(refresh_seconds(Duration::from_millis(0)), 5);
        assert_eq!(refresh_seconds(Duration::from_millis(30_500)), 31);
    }

    #[test]
    fn every_alert_is_linked_to_its_runbook_section() {
        let html = render(&page(vec![]));
        for alert in ALERTS {
            let link = format!(
                "<a href=\"docs/runbook.md#{}\">{alert}</a>",
                alert.to_lowercase()
            );
            assert!(html.contains(&link), "{alert} not linked: {html}");
        }
        assert!(html.contains("Nothing for on-call"), "{html}");
        assert!(
            html.contains("<pre>enforcer: enforce mode, state THROTTLED\nrecovery: 0 degraded"),
            "{html}"
        );
        // Air-gapped: nothing is loaded from elsewhere.
        assert!(
            !html.contains("http://") && !html.contains("https://"),
            "{html}"
        );
    }

    #[test]
    fn the_current_state_links_its_section() {
        let html = render(&page(vec![Situation {
            alert: "RecoveryLatencyBudgetSuspended",
            why: "redundancy at risk".into(),
        }]));
        assert!(
            html.contains(
                "<a href=\"docs/runbook.md#recoverylatencybudgetsuspended\"><b>RecoveryLatencyBudgetSuspended</b></a>: redundancy at risk"
            ),
            "{html}"
        );
        assert!(!html.contains("Nothing for on-call"), "{html}");
    }

    #[test]
    fn the_state_is_chosen_from_what_the_enforcer_knows() {
        assert!(situations(None, &[], None).is_empty());
        let idle = view();
        assert!(situations(Some(&idle), &[], None).is_empty());

        let mut breach = view();
        breach.breached = true;
        breach.recovery_active = true;
        breach.breach_seconds = 960.0;
        assert_eq!(
            alerts(&situations(Some(&breach), &[], None)),
            ["RecoveryLatencyBudgetExceeded"]
        );

        let mut suspended = view();
        suspended.phase = Phase::Suspended;
        suspended.suspended = true;
        suspended.suspend_reason = Some("pool_at_min_size".into());
        suspended.pools_at_min_size = vec!["rbd-vms".into()];
        suspended.breached = true;
        suspended.recovery_active = true;
        let s = situations(Some(&suspended), &[], None);
        assert_eq!(alerts(&s), ["RecoveryLatencyBudgetSuspended"]);
        assert!(s[0].why.contains("pools at min_size: rbd-vms"), "{s:?}");

        let mut holding = view();
        holding.phase = Phase::Holding;
        holding.holding_reason = Some("latency_stale".into());
        let down = vec!["latency (no data for 2m0s)".to_string()];
        assert_eq!(
            alerts(&situations(Some(&holding), &down, None)),
            [
                "RecoveryBudgetCollectorDown",
                "RecoveryBudgetEnforcerHolding"
            ]
        );
        // The enforcer off: collectors are still watched.
        assert_eq!(
            alerts(&situations(None, &down, None)),
            ["RecoveryBudgetCollectorDown"]
        );

        let mut paused = view();
        paused.paused = true;
        paused.pause_share = 0.4;
        paused.paused_seconds = 60.0;
        paused.recovery_active = true;
        paused.recovery_objects_per_second = Some(0.0);
        paused.flags_set = vec!["nobackfill".into(), "norecover".into()];
        // Paused by us: not "stalled".
        assert_eq!(
            alerts(&situations(Some(&paused), &[], None)),
            ["RecoveryPausedByEnforcer"]
        );
        paused.paused_seconds = 1000.0;
        assert_eq!(
            alerts(&situations(Some(&paused), &[], None)),
            [
                "RecoveryPausedByEnforcerTooLong",
                "RecoveryPausedByEnforcer"
            ]
        );

        let mut stuck = view();
        stuck.flags_set = vec!["norecover".into()];
        assert_eq!(
            alerts(&situations(Some(&stuck), &[], None)),
            ["RecoveryPauseFlagStuck"]
        );

        // Stalled: when the headline says so (PGs recovering or waiting, nothing recovered over
        // four collections), with the enforcer off too.
        let mut stalled = view();
        stalled.recovery_active = true;
        stalled.recovery_objects_per_second = Some(0.0);
        let said = |case| Headline {
            case,
            what: "x.".into(),
            todo: "y.".into(),
            runbook: None,
        };
        let stall = said(Case::RecoveryStalled);
        assert_eq!(
            alerts(&situations(Some(&stalled), &[], Some(&stall))),
            ["CephRecoveryStalled"]
        );
        assert_eq!(
            alerts(&situations(None, &[], Some(&stall))),
            ["CephRecoveryStalled"]
        );
        // An OSD down but in (lab, 2026-12-01): nothing recovers until it is out, and that is
        // not a stall, although the last collection recovered nothing.
        let mut down_in = view();
        down_in.recovery_active = true;
        down_in.recovery_objects_per_second = Some(0.0);
        down_in.suspended = true;
        down_in.pgs_undersized = 20;
        assert_eq!(
            alerts(&situations(
                Some(&down_in),
                &[],
                Some(&said(Case::OsdsDownNotOut))
            )),
            ["RecoveryLatencyBudgetSuspended"]
        );
        for s in [&breach, &suspended, &holding, &paused, &stuck, &stalled] {
            for sit in situations(Some(s), &down, None) {
                assert!(ALERTS.contains(&sit.alert), "{}", sit.alert);
            }
        }
    }

    #[test]
    fn the_page_opens_with_what_is_happening_and_what_to_do() {
        let mut p = page(vec![]);
        p.headline = Some(Headline {
            case: crate::http::headline::Case::OsdsDownNotOut,
            what: "osd.2 is down but still in since 13:26:35Z (16s ago): <b>x</b>.".into(),
            todo: "Bring osd.2 back.".into(),
            runbook: Some("RecoveryLatencyBudgetSuspended".into()),
        });
        let html = render(&p);
        let head = html.find("<div class=\"headline\">").expect("the headline");
        assert!(
            head < html.find("What to read in the runbook now").unwrap_or(0),
            "first: {html}"
        );
        assert!(html.contains("<p class=\"what\">osd.2 is down but still in since 13:26:35Z (16s ago): &lt;b&gt;x&lt;/b&gt;.</p>"), "{html}");
        assert!(html.contains("<p class=\"todo\"><b>Do:</b> Bring osd.2 back. <a href=\"docs/runbook.md#recoverylatencybudgetsuspended\">Runbook: RecoveryLatencyBudgetSuspended</a></p>"), "{html}");
    }

    #[test]
    fn a_suspect_baseline_links_its_section() {
        let mut v = view();
        v.baseline_suspect = true;
        let s = situations(Some(&v), &[], None);
        assert_eq!(alerts(&s), ["RecoveryBudgetBaselineSuspect"]);
        assert!(s[0].why.contains("the baseline looks too low"), "{s:?}");
    }

    #[test]
    fn what_comes_from_the_cluster_is_escaped() {
        let mut p = page(vec![Situation {
            alert: "RecoveryBudgetEnforcerHolding",
            why: "the enforcer holds: <script>x</script>".into(),
        }]);
        p.lines
            .push("pools at min_size: <img src=x onerror=alert(1)> & \"q\"".into());
        p.collectors[0].last_error = Some("Error EINVAL: <b>bad</b>".into());
        p.collectors[0].name = "st<atus".into();
        p.telemetry_path = "/m\"><script>".into();
        let html = render(&p);
        assert!(!html.contains("<script>"), "{html}");
        assert!(!html.contains("<img"), "{html}");
        assert!(!html.contains("<b>bad</b>"), "{html}");
        assert!(
            html.contains("&lt;img src=x onerror=alert(1)&gt; &amp; &quot;q&quot;"),
            "{html}"
        );
        assert!(
            html.contains("Error EINVAL: &lt;b&gt;bad&lt;/b&gt;"),
            "{html}"
        );
        assert!(html.contains("st&lt;atus"), "{html}");
    }

    #[test]
    fn the_served_runbook_has_every_alerts_anchor() {
        let html = runbook_html();
        for alert in ALERTS {
            let anchor = format!("<h2 id=\"{}\">{alert}</h2>", alert.to_lowercase());
            assert!(html.contains(&anchor), "no {anchor}");
        }
        assert!(
            html.contains("id=\"whose-flags-are-these-our-pause-or-a-humans\""),
            "GitHub-style anchors for sub-sections too"
        );
        assert!(!html.contains("<script"), "escaped");
    }
}
