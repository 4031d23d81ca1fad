//! Parsers for the outputs of the `ceph` CLI (and the equivalent librados / admin-socket replies).
//!
//! Every parser is a pure, total function: any input yields a value or a [`ParseError`] that says
//! what was wrong and where; nothing panics on input. They are lenient where Ceph releases differ
//! (Luminous 12 .. Squid 19: unknown fields are ignored, counters Ceph omits when zero read as 0,
//! fields that moved are looked up in both places) and strict where the meaning matters (a count
//! of the wrong type is an error, never 0).
//!
//! Output quirks handled everywhere (see `json`): outputs may start with a blank line (the CLI
//! prints one before most JSON outputs), and Reef+ may print bare `inf`/`nan` tokens, which strict
//! JSON rejects; they are read as `null`.

pub mod config_dump;
pub mod config_value;
pub mod histogram;
pub mod osd_dump;
pub mod osd_tree;
pub mod perf_dump;
pub mod pgs;
pub mod pools;
pub mod status;
pub mod tell;
pub mod upmap;
pub mod versions;

pub(crate) mod json;

#[cfg(test)]
mod newer_release_tests;

/// Why a command output could not be parsed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ParseError {
    /// Nothing but whitespace (the CLI printed only its blank line, or nothing at all).
    #[error("empty output (expected JSON)")]
    Empty,
    /// Not JSON, or not valid JSON; `line`/`column` are 1-based and refer to the original output.
    #[error("not valid JSON at line {line}, column {column}: {message}")]
    Json {
        line: usize,
        column: usize,
        message: String,
    },
    /// Valid JSON of the wrong shape: `path` names the field (`pgmap.pgs_by_state[2].count`,
    /// `(top level)` for the document itself), `expected` says what was expected and found.
    #[error("{path}: {expected}")]
    Shape { path: String, expected: String },
}

#[cfg(test)]
pub(crate) mod test_support {
    //! Fixture access for the parser tests. Fixtures are read at run time (not `include_bytes!`)
    //! so that a missing fixture fails one test instead of the whole crate's test build.

    use std::path::PathBuf;

    /// The states captured on the lab cluster (Ceph 16.2.15), one directory each.
    pub const STATES: &[&str] = &[
        "healthy-idle",
        "client-load",
        "recovery",
        "undersized",
        "rebalance",
    ];

    pub fn fixture_path(rel: &str) -> PathBuf {
        PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures")
            .join(rel)
    }

    pub fn fixture(rel: &str) -> Vec<u8> {
        let p = fixture_path(rel);
        std::fs::read(&p).unwrap_or_else(|e| panic!("fixture {}: {e}", p.display()))
    }

    pub fn fixture_str(rel: &str) -> String {
        String::from_utf8(fixture(rel)).unwrap_or_else(|e| panic!("fixture {rel}: {e}"))
    }

    /// Sub-directories of `rel` (e.g. the `samples/NNN` of a state), sorted by name.
    pub fn subdirs(rel: &str) -> Vec<String> {
        let p = fixture_path(rel);
        let mut out: Vec<String> = std::fs::read_dir(&p)
            .unwrap_or_else(|e| panic!("fixture dir {}: {e}", p.display()))
            .filter_map(|e| e.ok())
            .filter(|e| e.path().is_dir())
            .map(|e| format!("{rel}/{}", e.file_name().to_string_lossy()))
            .collect();
        out.sort();
        out
    }

    /// Files in `rel` whose name satisfies `pred`, sorted by name.
    pub fn files(rel: &str, pred: impl Fn(&str) -> bool) -> Vec<String> {
        let p = fixture_path(rel);
        let mut out: Vec<String> = std::fs::read_dir(&p)
            .unwrap_or_else(|e| panic!("fixture dir {}: {e}", p.display()))
            .filter_map(|e| e.ok())
            .filter(|e| e.path().is_file())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| pred(n))
            .map(|n| format!("{rel}/{n}"))
            .collect();
        out.sort();
        out
    }

    /// The real output cut in half: truncated JSON.
    pub fn half(b: &[u8]) -> &[u8] {
        &b[..b.len() / 2]
    }

    /// Hostile outputs every JSON parser must reject with an error (never a panic, never a
    /// default value). Returned with a label for assertion messages.
    pub fn hostile_inputs() -> Vec<(&'static str, Vec<u8>)> {
        vec![
            ("empty", b"".to_vec()),
            ("whitespace only", b" \n\n\t \r\n".to_vec()),
            (
                "blank line only (what the CLI prints for nothing)",
                b"\n".to_vec(),
            ),
            ("JSON null", b"\nnull\n".to_vec()),
            ("JSON number", b"42".to_vec()),
            ("JSON string", b"\"HEALTH_OK\"".to_vec()),
            (
                "HTML error page",
                b"<html><head><title>502 Bad Gateway</title></head><body>nginx</body></html>\n"
                    .to_vec(),
            ),
            (
                "ceph error text",
                b"Error EINVAL: invalid command\n".to_vec(),
            ),
            (
                "ceph connection error",
                b"[errno 110] RADOS timed out (error connecting to the cluster)\n".to_vec(),
            ),
            ("invalid UTF-8", b"\n{\"a\":\"\xff\xfe\"}".to_vec()),
            ("NUL bytes", b"\0\0\0".to_vec()),
            ("two documents", b"{}\n{}\n".to_vec()),
            ("unterminated string", b"{\"fsid\":\"abc".to_vec()),
        ]
    }
}

/// Totality: no input makes a parser panic. Random bytes, and real outputs truncated or with
/// bytes overwritten at random.
#[cfg(test)]
mod totality {
    use super::test_support::fixture;
    use super::*;
    use proptest::prelude::*;

    fn run_all(input: &[u8]) {
        let _ = status::parse(input);
        let _ = pools::parse(input);
        let _ = pgs::parse(input);
        let _ = histogram::parse_write_latency(input);
        let _ = config_value::parse_plain(input);
        let _ = config_value::parse_tell_config_get(input, "osd_mclock_profile");
        let text = String::from_utf8_lossy(input);
        for part in tell::split(&text).into_iter().flatten() {
            assert!(text.contains(part.body));
        }
        let _ = tell::stderr_errors(&text);
    }

    const FIXTURES: &[&str] = &[
        "recovery/ceph_status.json",
        "undersized/ceph_pg_ls_undersized.json",
        "rebalance/ceph_pg_dump_pgs_brief.json",
        "healthy-idle/ceph_osd_pool_ls_detail.json",
        "rebalance/samples/004/ceph_tell_osd.1_perf_histogram_dump.json",
    ];

    proptest! {
        #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

        #[test]
        fn random_bytes(input in proptest::collection::vec(any::<u8>(), 0..512)) {
            run_all(&input);
        }

        #[test]
        fn random_json_ish_text(input in "[\\[\\]{}\":,0-9a-zA-Z+\\-. \n\\\\]{0,300}") {
            run_all(input.as_bytes());
        }

        #[test]
        fn truncated_fixtures(which in 0..FIXTURES.len(), cut in 0.0f64..1.0) {
            let full = fixture(FIXTURES[which]);
            let n = (full.len() as f64 * cut) as usize;
            run_all(&full[..n]);
        }

        #[test]
        fn mutated_fixtures(
            which in 0..FIXTURES.len(),
            edits in proptest::collection::vec((0.0f64..1.0, any::<u8>()), 1..8),
        ) {
            let mut bytes = fixture(FIXTURES[which]);
            for (at, b) in edits {
                let i = ((bytes.len() - 1) as f64 * at) as usize;
                bytes[i] = b;
            }
            run_all(&bytes);
        }
    }
}
