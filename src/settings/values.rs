//! The types of setting values: each parses from a flag (`FromStr`) and from the config file
//! (`Deserialize`) with the same rules and the same message.

use std::collections::BTreeMap;
use std::net::{SocketAddr, ToSocketAddrs};
use std::time::Duration;

use serde::de::{self, Deserializer};
use serde::Deserialize;

use crate::enforcer::policy::RecoveryLimit;

/// A duration written like `15s`, `5m`, `1h30m`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HumanDuration(pub Duration);

impl std::str::FromStr for HumanDuration {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        humantime::parse_duration(s.trim())
            .map(HumanDuration)
            .map_err(|e| format!("invalid duration {s:?} ({e}); expected a number with a unit, like 15s, 5m or 1h30m"))
    }
}

impl<'de> Deserialize<'de> for HumanDuration {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(de::Error::custom)
    }
}

/// A size in bytes written like `64MiB`, `512KiB`, `1GiB` or a plain number of bytes. Binary
/// units only: `MB` would leave the reader guessing whether 10^6 or 2^20 is meant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ByteSize(pub u64);

impl std::str::FromStr for ByteSize {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let t = s.trim();
        let digits = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
        let (number, unit) = t.split_at(digits);
        let shift = match unit.trim() {
            "" | "B" => 0,
            "KiB" => 10,
            "MiB" => 20,
            "GiB" => 30,
            _ => return Err(format!("invalid size {s:?}; expected a number of bytes or a number with KiB, MiB or GiB, like 64MiB")),
        };
        number
            .parse::<u64>()
            .ok()
            .and_then(|n| n.checked_mul(1u64 << shift))
            .map(ByteSize)
            .ok_or_else(|| format!("invalid size {s:?}; expected a number of bytes or a number with KiB, MiB or GiB, like 64MiB"))
    }
}

impl<'de> Deserialize<'de> for ByteSize {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Number(u64),
            Text(String),
        }
        match Raw::deserialize(d)? {
            Raw::Number(n) => Ok(ByteSize(n)),
            Raw::Text(s) => s.parse().map_err(de::Error::custom),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    #[default]
    Text,
    Json,
}

/// A `tracing` filter such as `info` or `ceph_recovery_budget=debug,warn`, checked when read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogLevel(pub String);

impl std::str::FromStr for LogLevel {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        tracing_subscriber::EnvFilter::try_new(s)
            .map(|_| LogLevel(s.to_string()))
            .map_err(|e| {
                format!("invalid log level {s:?} ({e}); expected error, warn, info, debug or trace")
            })
    }
}

impl<'de> Deserialize<'de> for LogLevel {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(de::Error::custom)
    }
}

/// `host:port`, `:port` (all interfaces, as Prometheus exporters accept) or `[::1]:port`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListenAddress(pub SocketAddr);

impl std::str::FromStr for ListenAddress {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let full = if s.starts_with(':') {
            format!("0.0.0.0{s}")
        } else {
            s.to_string()
        };
        full.to_socket_addrs()
            .ok()
            .and_then(|mut a| a.next())
            .map(ListenAddress)
            .ok_or_else(|| {
                format!(
                    "invalid listen address {s:?}; expected host:port, like 0.0.0.0:9939 or :9939"
                )
            })
    }
}

impl<'de> Deserialize<'de> for ListenAddress {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(de::Error::custom)
    }
}

/// What one `serve` publishes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ServeMode {
    /// Cluster state (status, pools, PGs, schedulers) and, unless Prometheus provides the p99,
    /// every OSD's latency histogram through the monitors; the enforcer runs here.
    #[default]
    Cluster,
    /// Only the latency histograms of this host's OSDs, from their admin sockets: no ceph CLI,
    /// no monitor load. One per OSD host.
    Host,
}

impl ServeMode {
    pub fn as_str(self) -> &'static str {
        match self {
            ServeMode::Cluster => "cluster",
            ServeMode::Host => "host",
        }
    }
}

impl std::str::FromStr for ServeMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "cluster" => Ok(ServeMode::Cluster),
            "host" => Ok(ServeMode::Host),
            _ => Err(format!("invalid mode {s:?}: expected cluster or host")),
        }
    }
}

/// Where the enforcer's p99 comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LatencySource {
    /// The histograms this exporter collects.
    #[default]
    Collect,
    /// A query to Prometheus over the histograms the host-mode exporters publish.
    Prometheus,
}

impl LatencySource {
    pub fn as_str(self) -> &'static str {
        match self {
            LatencySource::Collect => "collect",
            LatencySource::Prometheus => "prometheus",
        }
    }
}

impl std::str::FromStr for LatencySource {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "collect" => Ok(LatencySource::Collect),
            "prometheus" => Ok(LatencySource::Prometheus),
            _ => Err(format!(
                "invalid latency source {s:?}: expected collect or prometheus"
            )),
        }
    }
}

/// Rung 2's limits under mClock, each lower than the one before, in one unit: IOPS per OSD
/// (`1000,300,100`, Pacific) or percentages of each OSD's capacity (`5%,3%`, Quincy 17.2.6+);
/// `none` (the default: no limit rung; in the file an empty list).
#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
#[serde(transparent)]
pub struct RecoveryLimits(pub Vec<RecoveryLimit>);

impl<'de> Deserialize<'de> for RecoveryLimit {
    /// A number is IOPS (`[500, 50]`), a string is either (`["5%", "3%"]`).
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Iops(u32),
            Text(String),
            Other(f64),
        }
        match Raw::deserialize(d)? {
            Raw::Iops(n) => Ok(RecoveryLimit::Iops(n)),
            Raw::Text(t) => parse_recovery_limit(&t).map_err(de::Error::custom),
            // 0.05 is how Ceph itself stores a share: say how to write it here.
            Raw::Other(x) => Err(de::Error::custom(format!(
                "{x} is neither a whole number of IOPS nor a percentage: write a share of capacity as a percentage in quotes (\"{:.0}%\" for {x}, Quincy 17.2.6+) or IOPS as a whole number (1000, Pacific)",
                x * 100.0
            ))),
        }
    }
}

fn parse_recovery_limit(p: &str) -> Result<RecoveryLimit, String> {
    let p = p.trim();
    if let Some(pct) = p.strip_suffix('%') {
        return pct.trim().parse::<u8>().map(RecoveryLimit::Percent).map_err(|_| {
            format!("{p:?} is not a whole percentage of each OSD's capacity; expected e.g. 5%,3% (Quincy 17.2.6+), 1000,300,100 (IOPS, Pacific), or none")
        });
    }
    p.parse::<u32>().map(RecoveryLimit::Iops).map_err(|_| {
        format!("{p:?} is neither a number of IOPS nor a percentage; expected e.g. 1000,300,100 (IOPS, Pacific), 5%,3% (of each OSD's capacity, Quincy 17.2.6+), or none")
    })
}

impl std::str::FromStr for RecoveryLimits {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let t = s.trim();
        if t.is_empty() || t == "none" {
            return Ok(RecoveryLimits(Vec::new()));
        }
        t.split(',')
            .map(parse_recovery_limit)
            .collect::<Result<_, _>>()
            .map(RecoveryLimits)
    }
}

/// `--enforcer.wpq-levers osd_max_backfills=1,osd_recovery_sleep_hdd=0.1`: the file gives a map.
pub fn parse_levers(s: &str) -> Result<BTreeMap<String, String>, String> {
    s.split(',')
        .filter(|p| !p.trim().is_empty())
        .map(|pair| {
            let (k, v) = pair
                .split_once('=')
                .ok_or_else(|| format!("{pair:?} is not KEY=VALUE (e.g. osd_max_backfills=1,osd_recovery_sleep_hdd=0.1)"))?;
            let (k, v) = (k.trim(), v.trim());
            if !k.starts_with("osd_") || v.is_empty() {
                return Err(format!("{pair:?}: expected an osd_* option and a value"));
            }
            Ok((k.to_string(), v.to_string()))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_in_binary_units_and_say_what_is_expected() {
        let ok = |s: &str| s.parse::<ByteSize>().map(|b| b.0);
        assert_eq!(ok("64MiB"), Ok(64 << 20));
        assert_eq!(ok("512 KiB"), Ok(512 << 10));
        assert_eq!(ok("1GiB"), Ok(1 << 30));
        assert_eq!(ok("1048576"), Ok(1 << 20));
        for bad in ["64MB", "lots", "-1", "99999999999GiB", ""] {
            let e = ok(bad).unwrap_err();
            assert!(e.contains("expected a number of bytes"), "{bad}: {e}");
        }
    }

    #[test]
    fn listen_address_accepts_port_only() {
        let a: ListenAddress = ":9100".parse().unwrap();
        assert_eq!(a.0, "0.0.0.0:9100".parse().unwrap());
    }
}
