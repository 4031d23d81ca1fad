//! Fewer series for big clusters: the per-OSD write-latency histograms summed per host or for
//! the whole cluster (`--latency.aggregate`). 1000 OSDs x 33 buckets is 33k series; per host it
//! is hosts x 33, for the cluster 33.
//!
//! A sum of raw counters would drop whenever one OSD restarts, which Prometheus reads as a reset
//! of the whole group and turns into a wrong `rate()`. So each group is a counter kept by the
//! exporter: the sum of its OSDs' counters when first seen, then each OSD's reset-aware increase
//! (an OSD that restarted adds its new counts). It only grows, and restarts with the exporter,
//! like any counter.

use std::collections::BTreeMap;

use super::{increase, Histogram, LatencyError, LatencySum};

/// How the write-latency histogram is published.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Grouping {
    /// One histogram per OSD (`ceph_daemon="osd.N"`): 33 series per OSD.
    #[default]
    Osd,
    /// One per host (`host="..."`): 33 series per host.
    Host,
    /// One for the whole cluster: 33 series.
    Cluster,
}

impl Grouping {
    pub fn as_str(self) -> &'static str {
        match self {
            Grouping::Osd => "osd",
            Grouping::Host => "host",
            Grouping::Cluster => "cluster",
        }
    }
}

impl std::str::FromStr for Grouping {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "osd" => Ok(Grouping::Osd),
            "host" => Ok(Grouping::Host),
            "cluster" => Ok(Grouping::Cluster),
            other => Err(format!(
                "invalid latency aggregation {other:?}: expected osd, host or cluster"
            )),
        }
    }
}

/// The running group counters.
#[derive(Debug, Clone, Default)]
pub struct Aggregator {
    last: BTreeMap<String, Histogram>,
    totals: BTreeMap<String, Histogram>,
    started: bool,
}

impl Aggregator {
    /// Adds one cycle's histograms. `group_of` names an OSD's group (its host, or one name for
    /// the cluster). An OSD missing this cycle keeps its last sample, so its next answer adds
    /// only what it counted meanwhile. Returns the OSDs whose histogram could not be added
    /// (bounds differing from their group's), with the reason.
    pub fn update(
        &mut self,
        per_osd: &BTreeMap<String, Histogram>,
        group_of: impl Fn(&str) -> String,
    ) -> BTreeMap<String, String> {
        let mut rejected = BTreeMap::new();
        for (osd, cur) in per_osd {
            let step = match self.last.get(osd) {
                Some(prev) => increase(&[prev, cur]),
                // At the exporter's start: everything each OSD counted since it started.
                None if !self.started => Ok(Some(cur.clone())),
                // An OSD seen for the first time later (it missed the first cycles, or is new):
                // its lifetime counts in one scrape would read as a burst; it counts from here.
                None => Ok(None),
            };
            let added = step.and_then(|inc| match inc {
                Some(inc) => add_to(&mut self.totals, group_of(osd), &inc),
                None => Ok(()),
            });
            match added {
                Ok(()) => {
                    self.last.insert(osd.clone(), cur.clone());
                }
                Err(e) => {
                    rejected.insert(osd.clone(), e.to_string());
                }
            }
        }
        self.started = true;
        rejected
    }

    pub fn totals(&self) -> &BTreeMap<String, Histogram> {
        &self.totals
    }
}

/// The running group totals of `op_w_latency`'s summed seconds, kept like [`Aggregator`]'s
/// buckets (the histogram's `_sum` of a group): each OSD's reset-aware increase, an OSD seen
/// first after the start counts from then, a missing one adds what it counted meanwhile.
#[derive(Debug, Clone, Default)]
pub struct SumAggregator {
    last: BTreeMap<String, LatencySum>,
    totals: BTreeMap<String, f64>,
    started: bool,
}

impl SumAggregator {
    pub fn update(
        &mut self,
        per_osd: &BTreeMap<String, LatencySum>,
        group_of: impl Fn(&str) -> String,
    ) {
        for (osd, cur) in per_osd {
            let inc = match self.last.get(osd) {
                Some(prev) if cur.count >= prev.count && cur.seconds >= prev.seconds => {
                    Some(cur.seconds - prev.seconds)
                }
                // Fewer writes than before: the OSD restarted, everything it has is new.
                Some(_) => Some(cur.seconds),
                None if !self.started => Some(cur.seconds),
                None => None,
            };
            if let Some(inc) = inc {
                *self.totals.entry(group_of(osd)).or_insert(0.0) += inc;
            }
            self.last.insert(osd.clone(), *cur);
        }
        // Started once something was seen: a first cycle without sums (the command failed)
        // still counts each OSD's lifetime later, as the buckets did at the start.
        self.started |= !per_osd.is_empty();
    }

    pub fn totals(&self) -> &BTreeMap<String, f64> {
        &self.totals
    }
}

fn add_to(
    totals: &mut BTreeMap<String, Histogram>,
    group: String,
    inc: &Histogram,
) -> Result<(), LatencyError> {
    match totals.get_mut(&group) {
        Some(t) => t.add(inc),
        None => {
            inc.validate()?;
            totals.insert(group, inc.clone());
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::latency::test_support::{ceph_bounds, hist};

    fn map(entries: &[(&str, Histogram)]) -> BTreeMap<String, Histogram> {
        entries
            .iter()
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect()
    }

    #[test]
    fn groups_only_grow_even_when_an_osd_restarts() {
        let b = ceph_bounds(3);
        let host = |osd: &str| if osd == "osd.2" { "b" } else { "a" }.to_string();
        let mut agg = Aggregator::default();
        agg.update(
            &map(&[
                ("osd.0", hist(&b, &[10, 5, 0])),
                ("osd.1", hist(&b, &[1, 1, 1])),
                ("osd.2", hist(&b, &[7, 0, 0])),
            ]),
            host,
        );
        assert_eq!(agg.totals()["a"].counts, vec![11, 6, 1]);
        assert_eq!(agg.totals()["b"].counts, vec![7, 0, 0]);
        // osd.0 restarted (its counters went down to 2,0,0): a raw sum would fall to 3,1,1.
        agg.update(
            &map(&[
                ("osd.0", hist(&b, &[2, 0, 0])),
                ("osd.1", hist(&b, &[3, 1, 1])),
                ("osd.2", hist(&b, &[9, 1, 0])),
            ]),
            host,
        );
        assert_eq!(agg.totals()["a"].counts, vec![15, 6, 1]);
        assert_eq!(agg.totals()["b"].counts, vec![9, 1, 0]);
    }

    #[test]
    fn a_missing_osd_adds_what_it_counted_meanwhile_when_back() {
        let b = ceph_bounds(2);
        let one = |_: &str| "cluster".to_string();
        let mut agg = Aggregator::default();
        agg.update(
            &map(&[("osd.0", hist(&b, &[5, 0])), ("osd.1", hist(&b, &[1, 0]))]),
            one,
        );
        agg.update(&map(&[("osd.0", hist(&b, &[6, 0]))]), one);
        // osd.2 answers for the first time late: its lifetime counts are not a burst of writes.
        agg.update(&map(&[("osd.2", hist(&b, &[900, 900]))]), one);
        assert_eq!(agg.totals()["cluster"].counts, vec![7, 0]);
        agg.update(
            &map(&[("osd.0", hist(&b, &[6, 0])), ("osd.1", hist(&b, &[4, 2]))]),
            one,
        );
        assert_eq!(agg.totals()["cluster"].counts, vec![10, 2]);
    }

    #[test]
    fn a_histogram_with_other_bounds_is_rejected_not_mixed_in() {
        let mut agg = Aggregator::default();
        let one = |_: &str| "cluster".to_string();
        let rejected = agg.update(
            &map(&[
                ("osd.0", hist(&ceph_bounds(3), &[1, 1, 1])),
                ("osd.1", hist(&ceph_bounds(4), &[1, 1, 1, 1])),
            ]),
            one,
        );
        assert_eq!(rejected.keys().collect::<Vec<_>>(), vec!["osd.1"]);
        assert_eq!(agg.totals()["cluster"].counts, vec![1, 1, 1]);
    }

    #[test]
    fn grouping_parses_and_says_what_is_valid() {
        assert_eq!("host".parse(), Ok(Grouping::Host));
        let e = "rack".parse::<Grouping>().unwrap_err();
        assert!(e.contains("osd, host or cluster"), "{e}");
    }

    #[test]
    fn group_sums_only_grow_across_an_osd_restart_and_a_late_osd() {
        let sum = |count, seconds| LatencySum { count, seconds };
        let m = |e: &[(&str, LatencySum)]| -> BTreeMap<String, LatencySum> {
            e.iter().map(|(k, v)| (k.to_string(), *v)).collect()
        };
        let mut agg = SumAggregator::default();
        agg.update(
            &m(&[("osd.0", sum(10, 1.0)), ("osd.1", sum(5, 0.5))]),
            |_| "c".into(),
        );
        assert_eq!(agg.totals()["c"], 1.5);
        // osd.0 restarted (fewer writes), osd.2 is new (counts from here), osd.1 went on.
        agg.update(
            &m(&[
                ("osd.0", sum(2, 0.25)),
                ("osd.1", sum(7, 0.75)),
                ("osd.2", sum(100, 9.0)),
            ]),
            |_| "c".into(),
        );
        assert_eq!(agg.totals()["c"], 1.5 + 0.25 + 0.25);
        agg.update(&m(&[("osd.2", sum(101, 9.5))]), |_| "c".into());
        assert_eq!(agg.totals()["c"], 2.5);
    }
}
