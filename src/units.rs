//! How numbers are written for people: every figure with its unit. Shared by the enforcer's
//! decision log, `status`, the tuning commands and the HTTP pages.

/// "38.2 ms"
pub fn fmt_ms(seconds: f64) -> String {
    let ms = seconds * 1000.0;
    if ms >= 100.0 {
        format!("{ms:.0} ms")
    } else {
        format!("{ms:.1} ms")
    }
}

/// "15m0s", "42s"
pub fn fmt_secs(seconds: f64) -> String {
    let s = seconds.max(0.0).round() as u64;
    match (s / 3600, (s % 3600) / 60, s % 60) {
        (0, 0, sec) => format!("{sec}s"),
        (0, m, sec) => format!("{m}m{sec}s"),
        (h, m, sec) => format!("{h}h{m}m{sec}s"),
    }
}

/// A window's length as people say it: "5m", "1m30s", "15s", "1h".
pub fn fmt_window(seconds: f64) -> String {
    let s = seconds.max(0.0).round() as u64;
    let mut out = String::new();
    for (n, unit) in [(s / 3600, "h"), ((s % 3600) / 60, "m"), (s % 60, "s")] {
        if n > 0 {
            out.push_str(&format!("{n}{unit}"));
        }
    }
    if out.is_empty() {
        out.push_str("0s");
    }
    out
}

/// A wall-clock time for people at 3 a.m.: "13:26:35Z" within a day of `now`, the date too
/// otherwise, and how long ago or how far ahead: "13:26:35Z (3m0s ago)", "13:36:35Z (in 7m0s)".
pub fn fmt_when(t: f64, now: f64) -> String {
    let stamp = humantime::format_rfc3339_seconds(
        std::time::UNIX_EPOCH + std::time::Duration::from_secs_f64(t.max(0.0)),
    )
    .to_string();
    let stamp = if (now - t).abs() < 86_400.0 {
        stamp
            .split_once('T')
            .map_or(stamp.clone(), |(_, time)| time.to_string())
    } else {
        stamp
    };
    if t <= now {
        format!("{stamp} ({} ago)", fmt_secs(now - t))
    } else {
        format!("{stamp} (in {})", fmt_secs(t - now))
    }
}

/// "64 MiB", "512 KiB", "100 B": binary units, whole numbers where exact.
pub fn fmt_bytes(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit < UNITS.len() - 1 {
        value /= 1024.0;
        unit += 1;
    }
    if value.fract() == 0.0 {
        format!("{value:.0} {}", UNITS[unit])
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn milliseconds_keep_one_decimal_below_100() {
        assert_eq!(fmt_ms(0.0382), "38.2 ms");
        assert_eq!(fmt_ms(0.253), "253 ms");
    }

    #[test]
    fn bytes_read_in_binary_units() {
        assert_eq!(fmt_bytes(100), "100 B");
        assert_eq!(fmt_bytes(64 << 10), "64 KiB");
        assert_eq!(fmt_bytes(64 << 20), "64 MiB");
        assert_eq!(fmt_bytes(1536), "1.5 KiB");
    }

    #[test]
    fn windows_and_times_read_as_people_say_them() {
        assert_eq!(fmt_window(300.0), "5m");
        assert_eq!(fmt_window(90.0), "1m30s");
        assert_eq!(fmt_window(15.0), "15s");
        assert_eq!(fmt_window(3600.0), "1h");
        // undersized/ceph_status.json: osd_up_since 1796045195, captured 16 s later.
        assert_eq!(fmt_when(1796045195.0, 1796045211.0), "13:26:35Z (16s ago)");
        assert_eq!(fmt_when(1796045795.0, 1796045211.0), "13:36:35Z (in 9m44s)");
        assert_eq!(
            fmt_when(1796045195.0, 1796045195.0 + 2.0 * 86_400.0),
            "2026-11-30T13:26:35Z (48h0m0s ago)"
        );
    }

    #[test]
    fn durations_read_as_hours_minutes_seconds() {
        assert_eq!(fmt_secs(42.0), "42s");
        assert_eq!(fmt_secs(900.0), "15m0s");
        assert_eq!(fmt_secs(3725.0), "1h2m5s");
        assert_eq!(fmt_secs(-3.0), "0s");
    }
}
