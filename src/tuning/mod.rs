//! The tuning cycle: baseline, one change at a time, settle, re-measure, keep or revert, and the
//! record of every pair. Also `lint` (costly or ineffective settings) and `profile-sweep`.

pub mod chart;
pub mod cluster;
pub mod experiment;
pub mod judge;
pub mod knowledge;
pub mod lint;
pub mod measure;
pub mod record;
pub mod report;

/// Why a tuning command stopped. Each says what to do next.
#[derive(Debug, thiserror::Error)]
pub enum TuningError {
    #[error(transparent)]
    Ceph(#[from] crate::ceph::ops::OpsError),
    /// The cluster is not in the state a step needs or left it in (a value not restored...).
    #[error("{0}")]
    Cluster(String),
    #[error(transparent)]
    Record(#[from] record::RecordError),
    /// A precondition does not hold (an undecided step, a wasted step, two settings...).
    #[error("{0}")]
    Refused(String),
    #[error("{0}")]
    Io(String),
}
pub mod cycle;
#[cfg(test)]
pub(crate) mod fake_cluster;
#[cfg(test)]
pub(crate) mod svg_check;
pub mod sweep;
