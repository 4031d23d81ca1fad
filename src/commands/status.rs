//! `status`: what a running `serve` says about itself, in a few plain lines or JSON.

use std::process::ExitCode;

use anyhow::Context;

use ceph_recovery_budget::cli::{StatusArgs, StatusFormat};
use ceph_recovery_budget::http;

use super::{finish, print_out, runtime};

pub fn run(args: StatusArgs) -> ExitCode {
    finish(status(args))
}

fn status(args: StatusArgs) -> anyhow::Result<ExitCode> {
    let body = fetch(&args)?;
    if args.format == StatusFormat::Json {
        print_out(&format!("{body}\n"));
        return Ok(ExitCode::SUCCESS);
    }
    let report: http::report::StatusReport = serde_json::from_str(&body).with_context(|| {
        format!(
            "{} did not answer /api/status with a status report",
            args.url
        )
    })?;
    print_out(&(report.lines().join("\n") + "\n"));
    Ok(ExitCode::SUCCESS)
}

/// `/api/status` of the exporter at `--url`, reached as the TLS and basic-auth flags say; an
/// error says what to check, by flag.
fn fetch(args: &StatusArgs) -> anyhow::Result<String> {
    use ceph_recovery_budget::cli::BASIC_AUTH_PASSWORD_ENV;
    use ceph_recovery_budget::http_client::{get_ok, HttpClientError, HttpTarget, Options};
    let access = args
        .access
        .access(std::env::var(BASIC_AUTH_PASSWORD_ENV).ok())
        .map_err(anyhow::Error::msg)?;
    let target = HttpTarget::parse(&args.url)
        .map_err(|e| anyhow::anyhow!("--url {e}"))?
        .with_access(&access)
        .map_err(anyhow::Error::msg)?;
    let result = runtime()?.block_on(get_ok(&target, "/api/status", Options::json()));
    result.map_err(|e| {
        let check = match &e {
            HttpClientError::Status { status: 401, .. } if access.basic_auth.is_some() => {
                format!("check --basic-auth.username and the password in --basic-auth.password-file or ${BASIC_AUTH_PASSWORD_ENV} against the exporter's basic_auth_users")
            }
            HttpClientError::Status { status: 401, .. } => format!(
                "the exporter wants basic auth: --basic-auth.username with --basic-auth.password-file or ${BASIC_AUTH_PASSWORD_ENV}"
            ),
            HttpClientError::Status {
                status: 400,
                excerpt,
                ..
            } if excerpt.contains("HTTP request to an HTTPS server") => {
                "the exporter serves TLS there (--web.config.file): use --url https://...".to_string()
            }
            HttpClientError::Tls { .. } => {
                "check --url (https), --tls.ca-file, --tls.cert-file/--tls.key-file against the exporter's web config file".to_string()
            }
            _ => "is `ceph-recovery-budget serve` running there?".to_string(),
        };
        anyhow::Error::new(e).context(format!("--url {}: {check}", args.url))
    })
}
