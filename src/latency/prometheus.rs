//! The enforcer's p99 read from Prometheus (`--latency.source prometheus`), for large clusters
//! where per-host exporters (`serve --mode host`) publish the OSD histograms and the cluster-mode
//! exporter running the enforcer collects none itself.
//!
//! A poller task asks Prometheus every interval and publishes the answer on a `watch` channel;
//! the enforcer reads the latest answer and treats an old or failed one as stale (HOLD), exactly
//! like a collector that is down.

use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;

/// One answer of Prometheus: the p99 in seconds, `None` when no write happened in the window.
#[derive(Debug, Clone, PartialEq)]
pub struct ExternalP99 {
    pub at: Instant,
    pub value: Result<Option<f64>, String>,
}

/// The default query: the cluster-wide p99 over `window`, from every exporter's histograms
/// (per OSD, per host or cluster-aggregated: `sum by (le)` merges any of them).
pub fn default_query(window: Duration) -> String {
    format!(
        "histogram_quantile(0.99, sum by (le) (rate(ceph_osd_op_w_latency_bucket[{}s])))",
        window.as_secs().max(1)
    )
}

/// `/api/v1/query?query=...` with the query percent-encoded.
pub fn query_path(query: &str) -> String {
    let mut out = String::from("/api/v1/query?query=");
    for b in query.bytes() {
        if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The single value of an instant-vector (or scalar) answer: NaN (series exist, no writes in the
/// window) is `None`. No series at all is an error, not "no writes": the query matches nothing
/// (a wrong selector, host exporters not scraped), and the enforcer must hold, not relax.
/// Several series are an error too (the query must aggregate to one).
pub fn parse_answer(body: &str) -> Result<Option<f64>, String> {
    let v: serde_json::Value =
        serde_json::from_str(body).map_err(|e| format!("Prometheus did not answer JSON ({e})"))?;
    if v["status"] != "success" {
        return Err(format!(
            "Prometheus answered {}: {}",
            v["errorType"].as_str().unwrap_or("an error"),
            v["error"].as_str().unwrap_or("(no message)")
        ));
    }
    let data = &v["data"];
    let sample = match data["resultType"].as_str() {
        Some("vector") => {
            let result = data["result"].as_array().ok_or("no result array")?;
            match result.as_slice() {
                [] => return Err("the query matched no series: are the host-mode exporters scraped by this Prometheus, and does --prometheus.query select them?".to_string()),
                [one] => &one["value"],
                many => {
                    return Err(format!(
                        "the query returned {} series; it must aggregate to one (sum by (le))",
                        many.len()
                    ))
                }
            }
        }
        Some("scalar") => &data["result"],
        other => return Err(format!("unexpected result type {other:?}")),
    };
    let text = sample[1].as_str().ok_or("the sample has no value")?;
    match text {
        "NaN" | "+Inf" | "-Inf" => Ok(None),
        t => t
            .parse::<f64>()
            .map(Some)
            .map_err(|_| format!("the value {t:?} is not a number")),
    }
}

/// Polls Prometheus every `interval` until `shutdown`, publishing each answer.
pub async fn poll(
    url: String,
    query: String,
    interval: Duration,
    tx: watch::Sender<Option<ExternalP99>>,
    mut shutdown: watch::Receiver<bool>,
) {
    use crate::http_client::{get_ok, Access, HttpTarget, Options};
    let path = query_path(&query);
    // The URL was checked with the configuration; a bad one is reported on every tick. An
    // https one trusts the system's CAs (read once, here).
    let target = HttpTarget::parse(&url)
        .and_then(|t| t.with_access(&Access::default()))
        .map_err(|e| format!("--prometheus.url {e}"));
    let options = Options::json().with_timeout(interval.max(Duration::from_secs(5)));
    let mut ticker = tokio::time::interval(interval);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = ticker.tick() => {}
            _ = shutdown.wait_for(|s| *s) => return,
        }
        let value = match &target {
            Ok(target) => match get_ok(target, &path, options).await {
                Ok(body) => parse_answer(&body),
                Err(e) => Err(e.to_string()),
            },
            Err(e) => Err(e.clone()),
        };
        if let Err(e) = &value {
            tracing::warn!(url = %url, error = %e, "cannot read p99 from Prometheus");
        }
        let _ = tx.send(Some(ExternalP99 {
            at: Instant::now(),
            value,
        }));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_of_a_real_prometheus_read_as_p99() {
        // Shapes as Prometheus 2.42 answers /api/v1/query.
        let one = r#"{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1764528000.123,"0.0569"]}]}}"#;
        assert_eq!(parse_answer(one), Ok(Some(0.0569)));
        let none = r#"{"status":"success","data":{"resultType":"vector","result":[]}}"#;
        assert!(parse_answer(none)
            .unwrap_err()
            .contains("matched no series"));
        let nan = r#"{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1,"NaN"]}]}}"#;
        assert_eq!(parse_answer(nan), Ok(None));
        let scalar = r#"{"status":"success","data":{"resultType":"scalar","result":[1,"0.2"]}}"#;
        assert_eq!(parse_answer(scalar), Ok(Some(0.2)));
    }

    #[test]
    fn errors_say_what_prometheus_said() {
        let bad = r#"{"status":"error","errorType":"bad_data","error":"1:20: parse error: unexpected identifier"}"#;
        let e = parse_answer(bad).unwrap_err();
        assert!(e.contains("bad_data") && e.contains("parse error"), "{e}");
        let two = r#"{"status":"success","data":{"resultType":"vector","result":[{"metric":{"le":"1"},"value":[1,"1"]},{"metric":{"le":"2"},"value":[1,"2"]}]}}"#;
        assert!(parse_answer(two).unwrap_err().contains("2 series"));
        assert!(parse_answer("<html>").unwrap_err().contains("JSON"));
    }

    #[test]
    fn the_query_is_encoded_for_the_url() {
        let q = default_query(Duration::from_secs(300));
        assert_eq!(
            q,
            "histogram_quantile(0.99, sum by (le) (rate(ceph_osd_op_w_latency_bucket[300s])))"
        );
        let p = query_path(&q);
        assert!(
            p.starts_with("/api/v1/query?query=histogram_quantile%280.99%2C%20sum"),
            "{p}"
        );
        assert!(!p[20..].contains(['(', ' ', '[', ',']), "{p}");
    }
}
