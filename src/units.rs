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
    fn durations_read_as_hours_minutes_seconds() {
        assert_eq!(fmt_secs(42.0), "42s");
        assert_eq!(fmt_secs(900.0), "15m0s");
        assert_eq!(fmt_secs(3725.0), "1h2m5s");
        assert_eq!(fmt_secs(-3.0), "0s");
    }
}
