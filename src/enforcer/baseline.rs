//! Learning the baseline (`--enforcer.baseline learned`): the client write p99 over
//! `learn_window` of writes without recovery. A pure step over the learner's window; the loop
//! passes in the new sample and keeps what comes back.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use super::policy::{BaselineSpec, Policy};
use super::state::{EnforcerState, Learned};
use super::types::Time;
use crate::latency::{quantile, Histogram, LatencyWindow};
use crate::units::{fmt_ms, fmt_secs};

/// One collection's per-OSD write-latency histograms.
pub struct Sample {
    pub at: Instant,
    pub per_osd: BTreeMap<String, Histogram>,
}

pub struct Learning {
    pub window: LatencyWindow,
    pub next: EnforcerState,
    /// "BASELINE learned: ..." the first time a baseline is learned (and it is the one used).
    pub line: Option<String>,
}

/// Adds `sample` to the learner `window` when the cluster is `quiet` (no recovery, fresh data),
/// or starts the window again: latency during recovery is not a baseline. Once the window is
/// full its p99 is the learned baseline. `interval` is the collection interval (a full window
/// spans `learn_window` to within one interval).
pub fn learn(
    policy: &Policy,
    interval: Duration,
    mut window: LatencyWindow,
    sample: Sample,
    quiet: bool,
    state: &EnforcerState,
    now: Time,
) -> Learning {
    let mut next = state.clone();
    let mut line = None;
    if !quiet {
        window = LatencyWindow::new(policy.learn_window);
    } else {
        window.push(sample.at, sample.per_osd);
        let full = window.span() + interval >= policy.learn_window;
        if full {
            if let Ok(Some(inc)) = window.increase() {
                if let Some(p99) = quantile(0.99, &inc) {
                    let first = next.learned.is_none();
                    next.learned = Some(Learned {
                        p99_seconds: p99,
                        at: now,
                    });
                    if first && policy.baseline == BaselineSpec::Learned {
                        line = Some(format!(
                            "BASELINE learned: client p99 write {} over {} without recovery",
                            fmt_ms(p99),
                            fmt_secs(policy.learn_window.as_secs_f64())
                        ));
                    }
                }
            }
        }
    }
    Learning { window, next, line }
}
