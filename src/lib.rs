//! ceph-recovery-budget: a Prometheus exporter for Ceph recovery and client write latency, and
//! (later) an enforcer of a recovery-vs-latency policy. Data flows one way:
//! `ceph` (runner + parsers) -> `collect` (Snapshot) -> `metrics` / `http`.

pub mod atomic_file;
pub mod backfill;
pub mod ceph;
pub mod cli;
pub mod collect;
pub mod config;
pub mod enforcer;
pub mod fio;
pub mod http;
pub mod http_client;
pub mod latency;
pub mod lease;
pub mod metrics;
pub mod settings;
pub mod tuning;
pub mod units;
