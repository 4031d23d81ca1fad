//! HTTP routes. Handlers only read the last published snapshot and the enforcer's view; none
//! waits on Ceph.

pub mod report;
pub mod scrape;

use std::sync::Arc;

use axum::extract::{Query, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use tokio::sync::watch;
use tokio::time::Instant;

use crate::collect::Snapshot;
use crate::enforcer::Shared;
use crate::metrics::encode::Format;
use report::StatusReport;
use scrape::MetricsCache;

#[derive(Clone)]
pub struct AppState {
    pub snapshots: watch::Receiver<Arc<Snapshot>>,
    pub telemetry_path: String,
    pub enforcer: Option<Shared>,
}

pub fn router(state: AppState) -> Router {
    router_with_cache(state, Arc::new(MetricsCache::new()))
}

/// [`router`] with a given cache of `/metrics` bodies (tests read its counters).
pub fn router_with_cache(state: AppState, cache: Arc<MetricsCache>) -> Router {
    let path = state.telemetry_path.clone();
    Router::new()
        .route("/", get(landing))
        .route("/-/healthy", get(healthy))
        .route("/-/ready", get(ready))
        .route("/decisions", get(decisions))
        .route("/api/status", get(status))
        .with_state(state.clone())
        .route(
            &path,
            get(metrics_handler).with_state(MetricsState { app: state, cache }),
        )
}

#[derive(Clone)]
struct MetricsState {
    app: AppState,
    cache: Arc<MetricsCache>,
}

async fn metrics_handler(State(state): State<MetricsState>, headers: HeaderMap) -> Response {
    let header_str = |name| {
        headers
            .get(name)
            .and_then(|v: &header::HeaderValue| v.to_str().ok())
    };
    let format = Format::negotiate(header_str(header::ACCEPT));
    let gzip = scrape::accepts_gzip(header_str(header::ACCEPT_ENCODING));
    let snapshot = state.app.snapshots.borrow().clone();
    let view = state
        .app
        .enforcer
        .as_ref()
        .and_then(|e| e.lock().ok().map(|v| v.clone()));
    match state
        .cache
        .body(snapshot, view, Instant::now(), format, gzip)
        .await
    {
        Ok(body) => {
            let mut response = (
                [
                    (header::CONTENT_TYPE, format.content_type()),
                    // The body differs by both: a cache in between must not mix them up.
                    (header::VARY, "Accept, Accept-Encoding"),
                ],
                body.bytes,
            )
                .into_response();
            if body.gzip {
                response.headers_mut().insert(
                    header::CONTENT_ENCODING,
                    header::HeaderValue::from_static("gzip"),
                );
            }
            response
        }
        Err(e) => {
            tracing::error!(error = %e, "cannot build the /metrics body");
            (
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("cannot build the metrics: {e}\n"),
            )
                .into_response()
        }
    }
}

async fn healthy() -> &'static str {
    "Healthy\n"
}

/// 503 with the reason while the exporter cannot see the cluster (status collector down or its
/// data stale), so that a readiness probe or a load balancer stops sending traffic; `/metrics`
/// keeps answering meanwhile, with `collector_up` 0.
async fn ready(State(state): State<AppState>) -> Response {
    let snapshot = state.snapshots.borrow().clone();
    match snapshot.not_ready(Instant::now()) {
        None => (StatusCode::OK, "Ready\n").into_response(),
        Some(why) => (
            StatusCode::SERVICE_UNAVAILABLE,
            format!("Not ready: {why}\n"),
        )
            .into_response(),
    }
}

#[derive(serde::Deserialize)]
struct DecisionsQuery {
    limit: Option<usize>,
}

/// The last decisions, newest first.
async fn decisions(State(state): State<AppState>, Query(q): Query<DecisionsQuery>) -> Response {
    let Some(shared) = &state.enforcer else {
        return (
            StatusCode::NOT_FOUND,
            "the enforcer is off (--enforcer.mode off)\n",
        )
            .into_response();
    };
    let limit = q.limit.unwrap_or(50);
    let list: Vec<_> = shared
        .lock()
        .map(|v| v.decisions.iter().rev().take(limit).cloned().collect())
        .unwrap_or_default();
    Json(list).into_response()
}

fn report(state: &AppState) -> StatusReport {
    let snapshot = state.snapshots.borrow().clone();
    let view = state
        .enforcer
        .as_ref()
        .and_then(|e| e.lock().ok().map(|v| v.clone()));
    StatusReport::build(&snapshot, view, Instant::now())
}

async fn status(State(state): State<AppState>) -> Json<StatusReport> {
    Json(report(&state))
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

async fn landing(State(state): State<AppState>) -> Html<String> {
    let snapshot = state.snapshots.borrow().clone();
    let now = Instant::now();
    let rep = report(&state);
    let mut rows = String::new();
    for h in &snapshot.collectors {
        let up = snapshot.collector_up(h, now);
        let age = snapshot
            .data_at(h.name)
            .map(|at| {
                format!(
                    "{:.0} s ago",
                    now.saturating_duration_since(at).as_secs_f64()
                )
            })
            .unwrap_or_else(|| "never".to_string());
        rows.push_str(&format!(
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>\n",
            h.name.as_str(),
            if up { "up" } else { "<b>down</b>" },
            age,
            escape(h.last_error.as_deref().unwrap_or(""))
        ));
    }
    let summary: String = rep
        .lines()
        .iter()
        .map(|l| format!("{}\n", escape(l)))
        .collect();
    let path = escape(&state.telemetry_path);
    Html(format!(
        "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>ceph-recovery-budget</title></head><body>\n\
         <h1>ceph-recovery-budget {version}</h1>\n\
         <p><a href=\"{path}\">Metrics</a> · <a href=\"/decisions\">Decisions (JSON)</a> · <a href=\"/api/status\">Status (JSON)</a> · \
         <a href=\"/-/healthy\">/-/healthy</a> · <a href=\"/-/ready\">/-/ready</a></p>\n\
         <h2>Now</h2>\n<pre>{summary}</pre>\n\
         <h2>Collectors</h2>\n<table border=\"1\" cellpadding=\"4\"><tr><th>collector</th><th>state</th><th>data from</th><th>last error</th></tr>\n{rows}</table>\n\
         <p>Collection cycle {cycle}, every {interval:?}.</p>\n</body></html>\n",
        version = env!("CARGO_PKG_VERSION"),
        cycle = snapshot.cycle,
        interval = snapshot.interval,
    ))
}
