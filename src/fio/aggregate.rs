//! The per-job model both readers produce, and the rules that combine job entries into a
//! [`FioSummary`] (see the module documentation of `fio` for why they are what they are).

use std::collections::BTreeMap;

use super::{DirectionSummary, FioSummary, Percentiles};

/// The percentiles reported, as percentages.
const WANTED: [f64; 3] = [50.0, 95.0, 99.0];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Dir {
    Read,
    Write,
    Trim,
}

impl Dir {
    pub(crate) const ALL: [Dir; 3] = [Dir::Read, Dir::Write, Dir::Trim];

    pub(crate) fn name(self) -> &'static str {
        match self {
            Dir::Read => "read",
            Dir::Write => "write",
            Dir::Trim => "trim",
        }
    }

    pub(crate) fn index(self) -> usize {
        match self {
            Dir::Read => 0,
            Dir::Write => 1,
            Dir::Trim => 2,
        }
    }
}

/// One direction of one job entry, as the report gives it.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct DirStats {
    pub iops: f64,
    pub bw_bytes: f64,
    /// The clat percentiles reported: (percent, seconds), in report order; empty if none.
    pub percentiles: Vec<(f64, f64)>,
    /// The `json+` clat histogram: (bucket value in ns, sample count).
    pub bins: Option<Vec<(u64, u64)>>,
}

impl DirStats {
    fn lookup(&self, percent: f64) -> Option<f64> {
        self.percentiles
            .iter()
            .find(|(p, _)| (p - percent).abs() < 1e-6)
            .map(|&(_, v)| v)
    }

    fn did_io(&self) -> bool {
        self.iops > 0.0 || self.bw_bytes > 0.0 || !self.percentiles.is_empty()
    }
}

/// One job entry: a job, or a whole group under `group_reporting`.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct JobStats {
    pub name: String,
    pub group: Option<u64>,
    pub dirs: [Option<DirStats>; 3],
}

/// Combines the job entries. Never fails: a summary with no direction is for the caller to judge.
pub(crate) fn aggregate(jobs: &[JobStats], mut warnings: Vec<String>) -> FioSummary {
    let mut summary = FioSummary::default();
    for dir in Dir::ALL {
        let contributors: Vec<(&JobStats, &DirStats)> = jobs
            .iter()
            .filter_map(|j| j.dirs[dir.index()].as_ref().map(|d| (j, d)))
            .filter(|(_, d)| d.did_io())
            .collect();
        if contributors.is_empty() {
            continue;
        }
        let mut groups: Vec<u64> = contributors.iter().filter_map(|(j, _)| j.group).collect();
        groups.sort_unstable();
        groups.dedup();
        if groups.len() > 1 {
            let list: Vec<String> = groups.iter().map(u64::to_string).collect();
            warnings.push(format!(
                "{}: jobs of {} reporting groups ({}) did {} I/O; their IOPS and bandwidth are \
                 summed, which is only meaningful if the groups ran at the same time (groups \
                 separated by `stonewall` run one after another)",
                dir.name(),
                groups.len(),
                list.join(", "),
                dir.name()
            ));
        }
        let iops = finite_sum(contributors.iter().map(|(_, d)| d.iops));
        let bw = finite_sum(contributors.iter().map(|(_, d)| d.bw_bytes));
        let latency = if let [(_, only)] = contributors.as_slice() {
            single(dir, only, &mut warnings)
        } else {
            combined(dir, &contributors, &mut warnings)
        };
        let out = DirectionSummary {
            iops,
            bandwidth_bytes_per_second: bw,
            latency_seconds: latency,
        };
        match dir {
            Dir::Read => summary.read = Some(out),
            Dir::Write => summary.write = Some(out),
            Dir::Trim => summary.trim = Some(out),
        }
    }
    summary.warnings = warnings;
    summary
}

/// A sum that stays finite (the readers only admit finite, non-negative values; absurdly large
/// ones could still add up to infinity, which JSON cannot carry).
fn finite_sum(values: impl Iterator<Item = f64>) -> f64 {
    let s: f64 = values.sum();
    if s.is_finite() {
        s
    } else {
        f64::MAX
    }
}

fn set(p: &mut Percentiles, percent: f64, v: f64) {
    if percent == 50.0 {
        p.p50 = Some(v);
    } else if percent == 95.0 {
        p.p95 = Some(v);
    } else if percent == 99.0 {
        p.p99 = Some(v);
    }
}

fn fmt_percent_list(list: &[f64]) -> String {
    list.iter()
        .map(|p| format!("{p}"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn single(dir: Dir, d: &DirStats, warnings: &mut Vec<String>) -> Percentiles {
    let mut out = Percentiles::default();
    if d.percentiles.is_empty() {
        warnings.push(format!(
            "{}: the report has no clat percentiles (fio ran with clat_percentiles=0, or the \
             report is cut short); p50/p95/p99 left out",
            dir.name()
        ));
        return out;
    }
    let mut missing = Vec::new();
    for percent in WANTED {
        match d.lookup(percent) {
            Some(v) => set(&mut out, percent, v),
            None => missing.push(percent),
        }
    }
    if !missing.is_empty() {
        let have: Vec<f64> = d.percentiles.iter().map(|&(p, _)| p).collect();
        warnings.push(missing_warning(dir, &missing, &have));
    }
    out
}

fn missing_warning(dir: Dir, missing: &[f64], have: &[f64]) -> String {
    let names: Vec<String> = missing.iter().map(|p| format!("p{p}")).collect();
    format!(
        "{}: clat {} not in the report (its percentiles are {}; see fio --percentile_list); \
         left out, not interpolated",
        dir.name(),
        names.join("/"),
        fmt_percent_list(have)
    )
}

fn combined(
    dir: Dir,
    contributors: &[(&JobStats, &DirStats)],
    warnings: &mut Vec<String>,
) -> Percentiles {
    let mut names: Vec<String> = contributors
        .iter()
        .take(5)
        .map(|(j, _)| format!("`{}`", j.name))
        .collect();
    if contributors.len() > 5 {
        names.push("...".to_string());
    }
    let all_bins: Option<Vec<&Vec<(u64, u64)>>> =
        contributors.iter().map(|(_, d)| d.bins.as_ref()).collect();
    let Some(all_bins) = all_bins else {
        warnings.push(format!(
            "{}: {} jobs ({}) did {} I/O and are reported separately (no group_reporting); \
             their clat percentiles cannot be combined exactly, so p50/p95/p99 are left out \
             (IOPS and bandwidth are summed). Rerun fio with --group_reporting, or with \
             --output-format=json+ whose histograms can be merged",
            dir.name(),
            contributors.len(),
            names.join(", "),
            dir.name()
        ));
        return Percentiles::default();
    };

    let mut merged: BTreeMap<u64, u64> = BTreeMap::new();
    for bins in all_bins {
        for &(value, count) in bins {
            let slot = merged.entry(value).or_insert(0);
            *slot = slot.saturating_add(count);
        }
    }
    let total: u128 = merged.values().map(|&c| u128::from(c)).sum();
    let mut out = Percentiles::default();
    if total == 0 {
        warnings.push(format!(
            "{}: the json+ histograms of the {} jobs are empty; p50/p95/p99 left out",
            dir.name(),
            contributors.len()
        ));
        return out;
    }
    let mut missing = Vec::new();
    for percent in WANTED {
        // Only what every job was asked for (and so reported) is computed.
        if contributors
            .iter()
            .all(|(_, d)| d.lookup(percent).is_some())
        {
            if let Some(ns) = histogram_percentile(&merged, total, percent as u128) {
                set(&mut out, percent, ns as f64 / 1e9);
            }
        } else {
            missing.push(percent);
        }
    }
    if !missing.is_empty() {
        let mut have: Vec<f64> = Vec::new();
        for (_, d) in contributors {
            for &(p, _) in &d.percentiles {
                if contributors.iter().all(|(_, o)| o.lookup(p).is_some())
                    && !have.iter().any(|h| (h - p).abs() < 1e-6)
                {
                    have.push(p);
                }
            }
        }
        warnings.push(missing_warning(dir, &missing, &have));
    }
    out
}

/// fio's `calc_clat_percentiles`: the first bucket (ascending) whose cumulative count reaches
/// `percent`% of all samples; `percent` is whole, so the comparison is exact in integers.
pub(crate) fn histogram_percentile(
    bins: &BTreeMap<u64, u64>,
    total: u128,
    percent: u128,
) -> Option<u64> {
    let mut cumulative: u128 = 0;
    for (&value, &count) in bins {
        cumulative += u128::from(count);
        if cumulative * 100 >= percent * total {
            return Some(value);
        }
    }
    None
}
