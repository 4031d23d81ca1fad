//! HTTP routes. Handlers only read the last published snapshot and the enforcer's view; none
//! waits on Ceph.

pub mod auth;
pub mod headline;
pub mod landing;
pub mod limits;
pub mod report;
pub mod scrape;
pub mod server;
pub mod web_config;

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
        .route(&format!("/{}", landing::RUNBOOK), get(runbook))
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

/// The landing page: the pure builder is in [`landing`]; this only gathers what it shows.
async fn landing(State(state): State<AppState>) -> Html<String> {
    let snapshot = state.snapshots.borrow().clone();
    let now = Instant::now();
    let view = state
        .enforcer
        .as_ref()
        .and_then(|e| e.lock().ok().map(|v| v.clone()));
    let rep = StatusReport::build(&snapshot, view.clone(), now);
    let collectors = snapshot
        .collectors
        .iter()
        .map(|h| landing::CollectorRow {
            name: h.name.as_str().to_string(),
            up: snapshot.collector_up(h, now),
            age: snapshot
                .data_at(h.name)
                .map(|at| now.saturating_duration_since(at)),
            last_error: h.last_error.clone(),
        })
        .collect();
    Html(landing::render(&landing::Page {
        version: rep.version.clone(),
        telemetry_path: state.telemetry_path.clone(),
        headline: rep.headline.clone(),
        lines: rep.detail_lines(),
        situations: landing::situations(view.as_ref(), &rep.collectors_down, rep.headline.as_ref()),
        collectors,
        cycle: snapshot.cycle,
        interval: snapshot.interval,
    }))
}

/// The runbook the landing page and the alerts link to, served here so the links work air-gapped.
async fn runbook() -> Html<String> {
    Html(landing::runbook_html())
}
