//! `backfill hold|release|status`: the backfill lever (`ceph_recovery_budget::backfill`) by hand,
//! pgremapper-style. Dry run unless `--apply`. The record is written before every entry is
//! added and after every entry is removed, so a run stopped at any point (Ctrl-C, a crash) is
//! undone by `backfill release --record FILE --apply`. Each release is recorded with its time:
//! a `backfill hold` run seconds later counts a released PG still peering among the N.

use std::path::Path;
use std::process::ExitCode;

use anyhow::Context;
use serde::Serialize;

use ceph_recovery_budget::backfill::{
    self, balancer_step, BalancerStep, Forget, LeverRefusal, Plan, Record, Trim,
};
use ceph_recovery_budget::ceph::cli::CliClient;
use ceph_recovery_budget::ceph::ops;
use ceph_recovery_budget::ceph::parse::pgs::PgBrief;
use ceph_recovery_budget::ceph::parse::upmap::{items_text, BalancerStatus, PgId, UpmapView};
use ceph_recovery_budget::cli::{
    BackfillCommand, BackfillCommon, BackfillHoldArgs, BackfillReleaseArgs, BackfillStatusArgs,
    StatusFormat,
};

use super::{ceph_client, finish, print_out, runtime};

pub fn run(command: BackfillCommand) -> ExitCode {
    finish(match command {
        BackfillCommand::Hold(args) => hold(args),
        BackfillCommand::Release(args) => release(args),
        BackfillCommand::Status(args) => status(args),
    })
}

/// What the cluster looks like to the lever.
struct Seen {
    pgs: Vec<PgBrief>,
    listed_at: std::time::Instant,
    map: UpmapView,
    /// `None`: the mgr offers no balancer module (nothing to pause).
    balancer: Option<BalancerStatus>,
}

async fn look(client: &CliClient) -> anyhow::Result<Seen> {
    let pgs = ops::pgs_brief(client)
        .await
        .context("reading the PG states (ceph pg dump pgs_brief)")?;
    let listed_at = std::time::Instant::now();
    let map = ops::upmap_view(client)
        .await
        .context("reading the OSD map (ceph osd dump)")?;
    let balancer = ops::balancer_status(client)
        .await
        .context("reading the mgr balancer's state (ceph balancer status)")?;
    Ok(Seen {
        pgs,
        listed_at,
        map,
        balancer,
    })
}

/// One line per thing done or to do, and whether a command failed.
#[derive(Default, Serialize)]
struct Report {
    lines: Vec<String>,
    failed: usize,
}

impl Report {
    fn say(&mut self, line: impl Into<String>) {
        let line = line.into();
        eprintln!("{line}");
        self.lines.push(line);
    }

    fn fail(&mut self, line: impl Into<String>) {
        self.failed += 1;
        self.say(line);
    }
}

fn would(apply: bool) -> &'static str {
    if apply {
        ""
    } else {
        "(dry run) would "
    }
}

fn save(record: &Record, path: &Path) -> anyhow::Result<()> {
    if record.is_empty() {
        match std::fs::remove_file(path) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => {
                Err(e).with_context(|| format!("removing the empty record {}", path.display()))
            }
        }
    } else {
        record.save(path).map_err(Into::into)
    }
}

fn summary(seen: &Seen, plan: &Plan) -> String {
    let waiting = seen
        .pgs
        .iter()
        .filter(|p| p.has_state("backfill_wait"))
        .count();
    format!(
        "cluster {}, OSD map epoch {}: {} PGs backfill or wait to ({} waiting), {} held by the record; at most {} wanted; {}",
        seen.map.fsid,
        seen.map.epoch,
        plan.backfilling,
        waiting,
        plan.held,
        plan.max_backfills,
        match &seen.balancer {
            Some(b) => format!("balancer {}", on_off(b)),
            None => "no balancer module in the mgr (nothing to pause)".to_string(),
        }
    )
}

fn hold(args: BackfillHoldArgs) -> anyhow::Result<ExitCode> {
    let BackfillHoldArgs {
        max_backfills,
        common,
    } = args;
    let client = ceph_client(&common.ceph)?;
    runtime()?.block_on(async {
        let mut record = Record::load(&common.record)?;
        let seen = look(&client).await?;
        let plan = backfill::plan(&seen.pgs, &seen.map, &record, max_backfills, unix_now());
        let mut report = Report::default();
        report.say(summary(&seen, &plan));
        if let Some(r) = &plan.refusal {
            report.say(format!("REFUSED: {r}"));
        }
        for (id, why) in &plan.refused {
            report.say(format!("NOT HELD {id}: {why}"));
        }
        if matches!(plan.refusal, Some(LeverRefusal::OtherCluster { .. })) {
            return finish_report(&common, &report, Some(&plan), ExitCode::from(2));
        }
        for id in &plan.on_the_way {
            let state = seen
                .pgs
                .iter()
                .find(|p| p.pgid.parse::<PgId>().ok().as_ref() == Some(id))
                .map_or("", |p| p.state.as_str());
            report.say(format!(
                "ON ITS WAY {id} ({state}): released lately, not backfilling yet; it keeps its place among the {max_backfills}"
            ));
        }
        let apply = common.apply;
        // Those that show backfill now (or clean, or took too long) are counted as they are.
        if apply && record.keep_releasing(&plan.on_the_way) {
            save(&record, &common.record)?;
        }
        forget(
            &mut record,
            &plan.forget,
            &plan.trim,
            &common.record,
            apply,
            &mut report,
        )?;
        let holding_after =
            plan.held + plan.hold.len() > plan.release.len() && plan.refusal.is_none();
        // The balancer goes off before any entry is added (it removes upmap entries too).
        if let Some(BalancerStep::Pause { remember }) = seen
            .balancer
            .as_ref()
            .map(|b| balancer_step(b, &record, holding_after))
        {
            report.say(format!(
                "{}pause the mgr balancer (ceph balancer off){}",
                would(apply),
                if remember.is_some() {
                    "; its state is kept in the record and put back once nothing is held"
                } else {
                    " (turned back on while entries are held)"
                }
            ));
            if apply {
                if let Some(r) = remember {
                    record.balancer = Some(r);
                    record.fsid.get_or_insert_with(|| seen.map.fsid.clone());
                    save(&record, &common.record)?;
                }
                if let Err(e) = ops::balancer_set_active(&client, false).await {
                    report.fail(format!("FAILED ceph balancer off: {e}; nothing held"));
                    return finish_report(&common, &report, Some(&plan), ExitCode::FAILURE);
                }
            }
        }
        // Every entry is in the record before it is added.
        if apply && !plan.hold.is_empty() {
            for h in &plan.hold {
                h.record_in(&mut record, &seen.map.fsid, seen.map.epoch);
            }
            save(&record, &common.record)?;
        }
        let mut current = by_id(seen.pgs.clone());
        let mut listed_at = seen.listed_at;
        for (i, h) in plan.hold.iter().enumerate() {
            let replaces = if h.before.is_empty() {
                String::new()
            } else {
                format!(
                    " (its upmap items {} are not ours: recorded, put back on release)",
                    items_text(&h.before)
                )
            };
            let line = format!(
                "HOLD {} ({}, up {} acting {}): {}{replaces}",
                h.pgid,
                h.state,
                set_text(&h.up),
                set_text(&h.acting),
                h.command()
            );
            if !apply {
                report.say(format!("{}{line}", would(false)));
                continue;
            }
            // A PG that finished its backfill since the listing would be moved back: on a slow
            // cluster (seconds per command) re-read the states before going on.
            if listed_at.elapsed() > FRESH {
                match ops::pgs_brief(&client).await {
                    Ok(pgs) => {
                        current = by_id(pgs);
                        listed_at = std::time::Instant::now();
                    }
                    Err(e) => {
                        report.fail(format!(
                            "FAILED re-reading the PG states: {e}; the rest is not held"
                        ));
                        unhold(&mut record, &plan.hold[i..], &common.record)?;
                        break;
                    }
                }
            }
            let same = current.get(&h.pgid).is_some_and(|p| {
                backfill::plan::backfills(p) && p.up == h.up && p.acting == h.acting
            });
            if !same {
                report.say(format!(
                    "SKIP {}: changed since the listing (now {}): not held",
                    h.pgid,
                    current
                        .get(&h.pgid)
                        .map_or("not listed".to_string(), |p| format!(
                            "{}, up {} acting {}",
                            p.state,
                            set_text(&p.up),
                            set_text(&p.acting)
                        ))
                ));
                unhold(&mut record, std::slice::from_ref(h), &common.record)?;
                continue;
            }
            match ops::pg_upmap_items_replace(&client, h.pgid, &h.items).await {
                Ok(()) => report.say(line),
                // Left in the record: the next run finds it absent and forgets it.
                Err(e) => report.fail(format!("FAILED {line}: {e}")),
            }
        }
        release_each(&client, &mut record, &plan.release, &common, &mut report).await?;
        if record.held.is_empty() {
            restore_balancer(&client, &mut record, seen.balancer.as_ref(), &common, &mut report)
                .await?;
        }
        let code = if report.failed > 0 {
            ExitCode::FAILURE
        } else if plan.refusal.is_some() {
            ExitCode::from(2)
        } else {
            ExitCode::SUCCESS
        };
        finish_report(&common, &report, Some(&plan), code)
    })
}

fn release(args: BackfillReleaseArgs) -> anyhow::Result<ExitCode> {
    let BackfillReleaseArgs { max, common } = args;
    let client = ceph_client(&common.ceph)?;
    runtime()?.block_on(async {
        let mut record = Record::load(&common.record)?;
        let map = ops::upmap_view(&client)
            .await
            .context("reading the OSD map (ceph osd dump)")?;
        let balancer = ops::balancer_status(&client)
            .await
            .context("reading the mgr balancer's state (ceph balancer status)")?;
        let undo = backfill::undo(&map, &record, max);
        let mut report = Report::default();
        if let Some(other) = &undo.other_cluster {
            report.fail(format!(
                "REFUSED: the record {} is of cluster {other}, this is {}: nothing is touched",
                common.record.display(),
                map.fsid
            ));
            return finish_report(&common, &report, None, ExitCode::from(2));
        }
        report.say(format!(
            "cluster {}, OSD map epoch {}: {} held by the record, releasing {}{}",
            map.fsid,
            map.epoch,
            undo.remove.len() + undo.left,
            undo.remove.len(),
            if undo.left > 0 {
                format!(" ({} left held)", undo.left)
            } else {
                String::new()
            }
        ));
        let apply = common.apply;
        forget(
            &mut record,
            &undo.forget,
            &undo.trim,
            &common.record,
            apply,
            &mut report,
        )?;
        release_each(&client, &mut record, &undo.remove, &common, &mut report).await?;
        let nothing_held = if apply {
            record.held.is_empty()
        } else {
            undo.left == 0
        };
        if nothing_held {
            restore_balancer(
                &client,
                &mut record,
                balancer.as_ref(),
                &common,
                &mut report,
            )
            .await?;
        }
        let code = if report.failed > 0 {
            ExitCode::FAILURE
        } else {
            ExitCode::SUCCESS
        };
        finish_report(&common, &report, None, code)
    })
}

fn forget(
    record: &mut Record,
    forget: &[(PgId, Forget)],
    trim: &[(PgId, Trim)],
    path: &Path,
    apply: bool,
    report: &mut Report,
) -> anyhow::Result<()> {
    for (id, why) in forget {
        let line = format!("FORGET {id} (dropped from the record, cluster untouched): {why}");
        report.say(format!("{}{line}", would(apply)));
        if apply {
            record.held.remove(id);
        }
    }
    for (id, t) in trim {
        report.say(format!(
            "{}TRIM {id} (in the record, cluster untouched): {t}",
            would(apply)
        ));
    }
    // In memory even for a dry run: the RELEASE lines then show the commands that would run.
    record.apply_trims(trim);
    if apply && !(forget.is_empty() && trim.is_empty()) {
        save(record, path)?;
    }
    Ok(())
}

/// Removes each of ours, and drops it from the record once removed.
async fn release_each(
    client: &CliClient,
    record: &mut Record,
    ids: &[PgId],
    common: &BackfillCommon,
    report: &mut Report,
) -> anyhow::Result<()> {
    for id in ids {
        let items = record
            .held
            .get(id)
            .map(|h| items_text(&h.items))
            .unwrap_or_default();
        let restore = record.restore_items(*id);
        let put_back = if restore.is_empty() {
            ""
        } else {
            " (the items it had before the hold)"
        };
        let line = format!(
            "RELEASE {id} {items}: {}{put_back}",
            backfill::record::set_items_command(*id, &restore)
        );
        if !common.apply {
            report.say(format!("{}{line}", would(false)));
            continue;
        }
        match ops::pg_upmap_items_replace(client, *id, &restore).await {
            Ok(()) => {
                record.released(*id, unix_now());
                save(record, &common.record)?;
                report.say(line);
            }
            // Gone since the OSD map was read: nothing left to release.
            Err(e) if e.missing() == Some(ops::Missing::Pg) => {
                record.held.remove(id);
                save(record, &common.record)?;
                report.say(format!(
                    "FORGET {id} (dropped from the record): {}",
                    Forget::NoSuchPg
                ));
            }
            Err(e) => report.fail(format!("FAILED {line}: {e} (still in the record)")),
        }
    }
    Ok(())
}

/// `on (mode upmap)`: how this command's output names a balancer's state.
fn on_off(b: &BalancerStatus) -> String {
    format!("{} (mode {})", if b.active { "on" } else { "off" }, b.mode)
}

/// Nothing held: the balancer as it was before the lever paused it.
async fn restore_balancer(
    client: &CliClient,
    record: &mut Record,
    now: Option<&BalancerStatus>,
    common: &BackfillCommon,
    report: &mut Report,
) -> anyhow::Result<()> {
    let Some(now) = now else {
        if let Some(before) = &record.balancer {
            report.fail(format!(
                "the mgr balancer the record paused (it was {}) is no longer offered by the mgr (ceph balancer status: command not known); it stays in the record: run release again once its module is back",
                on_off(before)
            ));
        }
        return Ok(());
    };
    let BalancerStep::Restore {
        to,
        set_mode,
        turn_on,
    } = balancer_step(now, record, false)
    else {
        return Ok(());
    };
    let apply = common.apply;
    let mut ok = true;
    if set_mode {
        report.say(format!(
            "{}put the balancer's mode back: ceph balancer mode {}",
            would(apply),
            to.mode
        ));
        if apply {
            if let Err(e) = ops::balancer_mode(client, &to.mode).await {
                ok = false;
                report.fail(format!("FAILED ceph balancer mode {}: {e}", to.mode));
            }
        }
    }
    if turn_on {
        report.say(format!(
            "{}put the balancer back on: ceph balancer on",
            would(apply)
        ));
        if apply {
            if let Err(e) = ops::balancer_set_active(client, true).await {
                ok = false;
                report.fail(format!("FAILED ceph balancer on: {e}"));
            }
        }
    }
    if apply && ok {
        record.balancer = None;
        save(record, &common.record)?;
    }
    Ok(())
}

/// Unix seconds: when a release was done, and when a later run looks.
fn unix_now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// How old a PG listing may be when an entry is added from it.
const FRESH: std::time::Duration = std::time::Duration::from_secs(5);

fn by_id(pgs: Vec<PgBrief>) -> std::collections::BTreeMap<PgId, PgBrief> {
    pgs.into_iter()
        .filter_map(|p| p.pgid.parse().ok().map(|id| (id, p)))
        .collect()
}

/// Drops planned holds that were recorded but not added.
fn unhold(record: &mut Record, holds: &[backfill::PlannedHold], path: &Path) -> anyhow::Result<()> {
    for h in holds {
        record.held.remove(&h.pgid);
    }
    save(record, path)
}

fn set_text(set: &[Option<u32>]) -> String {
    let parts: Vec<String> = set
        .iter()
        .map(|o| o.map_or_else(|| "NONE".to_string(), |v| v.to_string()))
        .collect();
    format!("[{}]", parts.join(","))
}

fn finish_report(
    common: &BackfillCommon,
    report: &Report,
    plan: Option<&Plan>,
    code: ExitCode,
) -> anyhow::Result<ExitCode> {
    if common.format == StatusFormat::Json {
        let doc = serde_json::json!({
            "applied": common.apply,
            "plan": plan,
            "lines": report.lines,
            "failed": report.failed,
        });
        print_out(&(serde_json::to_string_pretty(&doc).context("encoding the report")? + "\n"));
    }
    Ok(code)
}

fn status(args: BackfillStatusArgs) -> anyhow::Result<ExitCode> {
    let client = ceph_client(&args.ceph)?;
    runtime()?.block_on(async {
        let record = Record::load(&args.record)?;
        let seen = look(&client).await?;
        // The plan for "no more than now": what holds nothing new and releases nothing.
        let plan = backfill::plan(&seen.pgs, &seen.map, &record, usize::MAX, unix_now());
        let undo = backfill::undo(&seen.map, &record, None);
        let foreign: Vec<String> = seen
            .map
            .pg_upmap_items
            .iter()
            .filter(|(id, _)| !undo.remove.contains(id))
            .map(|(id, items)| format!("{id} {}", items_text(items)))
            .collect();
        let backfilling = seen
            .pgs
            .iter()
            .filter(|p| p.has_state("backfilling"))
            .count();
        let waiting = seen
            .pgs
            .iter()
            .filter(|p| p.has_state("backfill_wait"))
            .count();
        let lever = match &plan.refusal {
            Some(r) => format!("refused: {r}"),
            None => "may act".to_string(),
        };
        if args.format == StatusFormat::Json {
            let doc = serde_json::json!({
                "fsid": seen.map.fsid,
                "epoch": seen.map.epoch,
                "backfilling": backfilling,
                "backfill_wait": waiting,
                "held": undo.remove,
                "forget": undo.forget,
                "other_upmap_items": foreign,
                "balancer": seen.balancer,
                "balancer_before": record.balancer,
                "refusal": plan.refusal,
                "require_min_compat_client": seen.map.require_min_compat_client,
            });
            print_out(&(serde_json::to_string_pretty(&doc).context("encoding the status")? + "\n"));
            return Ok(ExitCode::SUCCESS);
        }
        let mut out = format!(
            "cluster {}, OSD map epoch {}\nbackfilling: {backfilling} PGs, waiting: {waiting}\nheld by {}: {}\n",
            seen.map.fsid,
            seen.map.epoch,
            args.record.display(),
            if undo.remove.is_empty() {
                "none".to_string()
            } else {
                undo.remove
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join(" ")
            }
        );
        for (id, why) in &undo.forget {
            out.push_str(&format!("in the record but not ours any more: {id}: {why}\n"));
        }
        out.push_str(&format!(
            "other upmap entries (never touched): {}\n",
            if foreign.is_empty() {
                "none".to_string()
            } else {
                foreign.join(", ")
            }
        ));
        out.push_str(&format!(
            "balancer: {}{}\nrequire_min_compat_client: {}\nthe lever {lever}\n",
            match &seen.balancer {
                Some(b) => on_off(b),
                None => "no balancer module in the mgr".to_string(),
            },
            match &record.balancer {
                Some(b) => format!("; paused by the lever, was {}", on_off(b)),
                None => String::new(),
            },
            seen.map.require_min_compat_client,
        ));
        print_out(&out);
        Ok(ExitCode::SUCCESS)
    })
}
