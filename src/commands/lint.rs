//! `lint`: costly or ineffective settings in `ceph config dump`.

use std::process::ExitCode;

use anyhow::Context;

use ceph_recovery_budget::cli::{LintArgs, StatusFormat};
use ceph_recovery_budget::tuning;

use super::{ceph_client, finish, print_out, runtime};

pub fn run(args: LintArgs) -> ExitCode {
    finish(lint(args))
}

/// Exit 0: nothing flagged; 1: something flagged; 2: the dump could not be read.
fn lint(args: LintArgs) -> anyhow::Result<ExitCode> {
    match lint_findings(&args) {
        Ok((findings, facts)) => {
            match args.format {
                StatusFormat::Json => print_out(
                    &(serde_json::to_string_pretty(&serde_json::json!({
                        "scheduler": facts,
                        "findings": findings,
                    }))
                    .context("encoding the findings")?
                        + "\n"),
                ),
                StatusFormat::Text => print_out(&tuning::lint::render_text(&findings, &facts)),
            }
            Ok(ExitCode::from(u8::from(!findings.is_empty())))
        }
        Err(e) => {
            eprintln!("error: {e:#}");
            Ok(ExitCode::from(2))
        }
    }
}

fn lint_findings(
    args: &LintArgs,
) -> anyhow::Result<(
    Vec<tuning::lint::Finding>,
    tuning::knowledge::SchedulerFacts,
)> {
    use ceph_recovery_budget::ceph::parse::config_dump;
    let (entries, mut facts) = match &args.file {
        Some(path) => {
            let bytes = std::fs::read(path)
                .with_context(|| format!("reading the config dump {}", path.display()))?;
            let entries = config_dump::parse(&bytes).with_context(|| {
                format!(
                    "{} is not the output of `ceph config dump -f json`",
                    path.display()
                )
            })?;
            let facts = tuning::knowledge::facts_from_dump(&entries);
            (entries, facts)
        }
        None => {
            let client = ceph_client(&args.ceph)?;
            runtime()?.block_on(async {
                let entries = tuning::cluster::config_dump(&client).await?;
                // The daemons know what they run (ceph.conf beats the database).
                let (facts, _) = tuning::cluster::scheduler_facts(&client).await?;
                Ok::<_, tuning::TuningError>((entries, facts))
            })?
        }
    };
    if let Some(q) = &args.op_queue {
        facts.op_queue = Some(q.clone());
    }
    Ok((tuning::lint::lint(&entries, &facts), facts))
}
