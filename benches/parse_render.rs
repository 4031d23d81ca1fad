//! Cost of parsing real Ceph outputs and of rendering `/metrics`, at realistic and large sizes.
//!
//! Inputs are generated from the recorded outputs in `tests/fixtures/` by replicating their
//! entries with new ids, byte for byte otherwise (no re-serialisation, so key order, number
//! formats and the CLI's leading blank line stay those of the real output):
//!
//! - `ceph status`: `recovery/ceph_status.json` as is (it is small and does not grow much).
//! - `ceph pg ls undersized`: the 24 PGs of `recovery/ceph_pg_ls_undersized.json` (about 2.3 KB
//!   of stats each), repeated with new pgids.
//! - `ceph pg dump pgs_brief`: the 19 undersized PGs of `undersized/ceph_pg_dump_pgs_brief.json`
//!   (about 110 bytes each), repeated with new pgids.
//! - `ceph osd pool ls detail`: the 2 pools of `healthy-idle/ceph_osd_pool_ls_detail.json`,
//!   repeated with new ids and names.
//! - `ceph tell 'osd.*' perf histogram dump`: the 4 OSD replies (about 18 KB each) of
//!   `lab/healthy.tell-osd-all-perf-histogram-dump.out`, repeated as `osd.0` .. `osd.N-1`.
//!
//! Rendering benches a [`Snapshot`] made by `Collector::collect_once` over a [`FakeClient`]
//! primed with those outputs, exactly as the exporter builds it from a real cluster.
//!
//! Run with `cargo bench --bench parse_render` (about 3 minutes on 2 cores); `-- parse_pgs` etc.
//! runs one group only, but the inputs and snapshots of every group are still generated first.

use std::collections::BTreeMap;
use std::hint::black_box;
use std::time::Duration;

use ceph_recovery_budget::ceph::fake::{FakeClient, Reply};
use ceph_recovery_budget::ceph::parse::{histogram, pgs, pools, status, tell};
use ceph_recovery_budget::collect::safety::pool_safety;
use ceph_recovery_budget::collect::{commands, CollectSettings, Collector, Snapshot};
use ceph_recovery_budget::metrics::{encode::Format, render};
use criterion::{
    criterion_group, criterion_main, BenchmarkId, Criterion, SamplingMode, Throughput,
};

fn fixture(rel: &str) -> Vec<u8> {
    let path = format!("{}/tests/fixtures/{rel}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read(&path).unwrap_or_else(|e| panic!("fixture {path}: {e}"))
}

fn fixture_str(rel: &str) -> String {
    String::from_utf8(fixture(rel)).unwrap_or_else(|e| panic!("fixture {rel}: {e}"))
}

// ---------------------------------------------------------------------------------------------
// Synthetic outputs, made from the real ones.

/// The real undersized PG objects of a `pg ls` output (compact JSON, one object per PG, `pgid`
/// first), each without its `{"pgid":"X.Y"` prefix so that a new id can be put in front.
fn pg_templates() -> Vec<String> {
    templates_of("recovery/ceph_pg_ls_undersized.json")
}

/// The same, of `pg dump pgs_brief` (every PG is listed: only the undersized ones are kept).
fn brief_templates() -> Vec<String> {
    templates_of("undersized/ceph_pg_dump_pgs_brief.json")
}

fn templates_of(rel: &str) -> Vec<String> {
    let text = fixture_str(rel);
    let body = text
        .trim()
        .strip_prefix(r#"{"pg_ready":true,"pg_stats":["#)
        .and_then(|s| s.strip_suffix("]}"))
        .expect("PG listing: {\"pg_ready\":true,\"pg_stats\":[..]}");
    body.split(r#",{"pgid":"#)
        .map(|pg| {
            let pg = pg.strip_prefix(r#"{"pgid":"#).unwrap_or(pg);
            // `"2.1",...}`: drop the quoted id, keep `,...}`.
            let after_id = pg[1..].find('"').expect("quoted pgid") + 2;
            pg[after_id..].to_string()
        })
        .filter(|pg| pg.contains("undersized"))
        .collect()
}

/// A PG listing (`pg ls undersized` or `pg dump pgs_brief` by the templates) of `n` PGs spread
/// over pools `1..=pools`.
fn pg_ls(templates: &[String], n: usize, pools: usize) -> Vec<u8> {
    let mut out = String::with_capacity(n * (templates[0].len() + 16) + 64);
    out.push_str("\n{\"pg_ready\":true,\"pg_stats\":[");
    for i in 0..n {
        if i > 0 {
            out.push(',');
        }
        let (pool, seed) = (1 + i % pools, i / pools);
        out.push_str(&format!("{{\"pgid\":\"{pool}.{seed:x}\""));
        out.push_str(&templates[i % templates.len()]);
    }
    out.push_str("]}");
    out.into_bytes()
}

/// The real pool objects of `osd pool ls detail` without their `{"pool_id":N,"pool_name":"x"`.
fn pool_templates() -> Vec<String> {
    let text = fixture_str("healthy-idle/ceph_osd_pool_ls_detail.json");
    let body = text
        .trim()
        .strip_prefix('[')
        .and_then(|s| s.strip_suffix(']'))
        .expect("pool fixture: a JSON array");
    let parts: Vec<&str> = body.split(r#"},{"pool_id":"#).collect();
    let last = parts.len() - 1;
    parts
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let p = p.strip_prefix(r#"{"pool_id":"#).unwrap_or(p);
            // The split ate the closing brace of every pool but the last.
            let p = if i < last {
                format!("{p}}}")
            } else {
                p.to_string()
            };
            // `1,"pool_name":"device_health_metrics",...}`: keep from the field after the name.
            let name_at = p.find(r#""pool_name":""#).expect("pool_name") + 13;
            let after_name = name_at + p[name_at..].find('"').expect("quoted pool_name") + 1;
            p[after_name..].to_string()
        })
        .collect()
}

/// `ceph osd pool ls detail` with pools `1..=n` named `pool-N`.
fn pool_ls(templates: &[String], n: usize) -> Vec<u8> {
    let mut out = String::from("\n[");
    for i in 0..n {
        if i > 0 {
            out.push(',');
        }
        let id = i + 1;
        out.push_str(&format!("{{\"pool_id\":{id},\"pool_name\":\"pool-{id}\""));
        out.push_str(&templates[i % templates.len()]);
    }
    out.push(']');
    out.into_bytes()
}

/// The replies of the OSDs in a real `tell 'osd.*' ...` output (`\nosd.N: {json}\n` each).
fn tell_bodies(rel: &str) -> Vec<String> {
    let text = fixture_str(rel);
    let bodies: Vec<String> = tell::split(&text)
        .into_iter()
        .map(|r| r.expect("fixture is a clean tell output").body.to_string())
        .collect();
    assert!(!bodies.is_empty(), "{rel}: no daemon reply");
    bodies
}

/// A `tell 'osd.*' ...` output of `n` OSDs, `osd.0` .. `osd.{n-1}`, as the CLI prints it.
fn tell_output(bodies: &[String], n: usize) -> Vec<u8> {
    let mut out = String::with_capacity(n * (bodies[0].len() + 16));
    for i in 0..n {
        out.push_str(&format!("\nosd.{i}: "));
        out.push_str(&bodies[i % bodies.len()]);
        out.push('\n');
    }
    out.into_bytes()
}

/// `ceph status` of the recovery fixture with the OSD counts of an `n`-OSD cluster.
fn status_with_osds(n: usize) -> Vec<u8> {
    let mut v: serde_json::Value =
        serde_json::from_slice(&fixture("recovery/ceph_status.json")).expect("status fixture");
    v["osdmap"]["num_osds"] = n.into();
    v["osdmap"]["num_up_osds"] = (n - 1).into();
    v["osdmap"]["num_in_osds"] = (n - 1).into();
    format!("\n{v}\n").into_bytes()
}

// ---------------------------------------------------------------------------------------------
// Parsing.

/// The sizes a group runs: all of them under `cargo bench` (which passes `--bench`), the
/// smallest only when `cargo test --all-targets` runs the benches once each as a check (at the
/// test profile's speed the large inputs took over a minute to make; their parsing is tested in
/// the unit tests, e.g. a hundred thousand undersized PGs).
fn sizes<T: Copy>(all: &[T]) -> Vec<T> {
    if std::env::args().any(|a| a == "--bench") {
        all.to_vec()
    } else {
        all.iter().take(1).copied().collect()
    }
}

fn mib(b: usize) -> f64 {
    b as f64 / (1024.0 * 1024.0)
}

fn parse_status(c: &mut Criterion) {
    let input = fixture("recovery/ceph_status.json");
    status::parse(&input).expect("status parses");
    println!("input: ceph status, {} bytes", input.len());
    let mut g = c.benchmark_group("parse_status");
    g.throughput(Throughput::Elements(1));
    g.bench_function("recovery", |b| b.iter(|| status::parse(black_box(&input))));
    g.finish();
}

fn parse_pgs(c: &mut Criterion) {
    let templates = pg_templates();
    let mut g = c.benchmark_group("parse_pgs");
    for n in sizes(&[100usize, 1_000, 10_000, 100_000]) {
        let input = pg_ls(&templates, n, 10);
        let parsed = pgs::parse(&input).expect("synthetic pg ls parses");
        assert_eq!(parsed.len(), n);
        println!(
            "input: pg ls undersized, {n} PGs, {:.1} MiB",
            mib(input.len())
        );
        if n >= 10_000 {
            g.sampling_mode(SamplingMode::Flat).sample_size(10);
        } else {
            g.sampling_mode(SamplingMode::Auto).sample_size(20);
        }
        g.throughput(Throughput::Elements(n as u64));
        g.bench_with_input(BenchmarkId::from_parameter(n), &input, |b, input| {
            b.iter(|| pgs::parse(black_box(input)))
        });
    }
    g.finish();
}

/// What the PG collector does with `pg dump pgs_brief`: count the undersized PGs per pool while
/// reading the listing, never holding them as a list.
fn count_pgs_brief(c: &mut Criterion) {
    let templates = brief_templates();
    let mut g = c.benchmark_group("count_pgs_brief");
    for n in sizes(&[1_000usize, 100_000]) {
        let input = pg_ls(&templates, n, 10);
        let counted = pgs::undersized(&input).expect("synthetic pgs_brief parses");
        assert_eq!(counted.total(), n as u64);
        println!(
            "input: pg dump pgs_brief, {n} PGs, {:.1} MiB",
            mib(input.len())
        );
        if n >= 10_000 {
            g.sampling_mode(SamplingMode::Flat).sample_size(10);
        } else {
            g.sampling_mode(SamplingMode::Auto).sample_size(20);
        }
        g.throughput(Throughput::Elements(n as u64));
        g.bench_with_input(BenchmarkId::from_parameter(n), &input, |b, input| {
            b.iter(|| pgs::undersized(black_box(input)))
        });
    }
    g.finish();
}

fn parse_pools(c: &mut Criterion) {
    let templates = pool_templates();
    let mut g = c.benchmark_group("parse_pools");
    g.sample_size(20);
    for n in sizes(&[10usize, 100, 1_000]) {
        let input = pool_ls(&templates, n);
        let parsed = pools::parse(&input).expect("synthetic pool ls parses");
        assert_eq!(parsed.len(), n);
        println!(
            "input: osd pool ls detail, {n} pools, {:.1} KiB",
            input.len() as f64 / 1024.0
        );
        g.throughput(Throughput::Elements(n as u64));
        g.bench_with_input(BenchmarkId::from_parameter(n), &input, |b, input| {
            b.iter(|| pools::parse(black_box(input)))
        });
    }
    g.finish();
}

/// What the collector does with a `tell 'osd.*' perf histogram dump` output.
fn parse_tell_histograms(out: &[u8]) -> BTreeMap<String, ceph_recovery_budget::latency::Histogram> {
    let text = String::from_utf8_lossy(out);
    let mut per_osd = BTreeMap::new();
    for part in tell::split(&text).into_iter().flatten() {
        if let Ok(h) = histogram::parse_write_latency(part.body.as_bytes()) {
            per_osd.insert(part.daemon, h);
        }
    }
    per_osd
}

fn parse_histograms(c: &mut Criterion) {
    let bodies = tell_bodies("lab/healthy.tell-osd-all-perf-histogram-dump.out");
    let mut g = c.benchmark_group("parse_histograms");
    for n in sizes(&[10usize, 100, 1_000]) {
        let input = tell_output(&bodies, n);
        assert_eq!(parse_tell_histograms(&input).len(), n);
        println!(
            "input: tell osd.* perf histogram dump, {n} OSDs, {:.1} MiB",
            mib(input.len())
        );
        if n >= 1_000 {
            g.sampling_mode(SamplingMode::Flat).sample_size(10);
        } else {
            g.sampling_mode(SamplingMode::Auto).sample_size(20);
        }
        g.throughput(Throughput::Elements(n as u64));
        g.bench_with_input(BenchmarkId::from_parameter(n), &input, |b, input| {
            b.iter(|| parse_tell_histograms(black_box(input)))
        });
    }
    g.finish();
}

/// What the collector asks since it names the histogram (`perf histogram dump osd
/// op_w_latency_in_bytes_histogram`): the same replies cut down to that one histogram, as the
/// OSD prints it (4.4 KB each on the lab instead of 18 KB).
fn parse_histograms_filtered(c: &mut Criterion) {
    let bodies: Vec<String> = tell_bodies("lab/healthy.tell-osd-all-perf-histogram-dump.out")
        .iter()
        .map(|b| {
            let v: serde_json::Value = serde_json::from_str(b).expect("fixture JSON");
            serde_json::json!({"osd": {"op_w_latency_in_bytes_histogram":
                v["osd"]["op_w_latency_in_bytes_histogram"].clone()}})
            .to_string()
        })
        .collect();
    let mut g = c.benchmark_group("parse_histograms_filtered");
    for n in sizes(&[10usize, 1_000, 10_000]) {
        let input = tell_output(&bodies, n);
        assert_eq!(parse_tell_histograms(&input).len(), n);
        println!(
            "input: tell osd.* perf histogram dump osd op_w_latency_in_bytes_histogram, {n} OSDs, {:.1} MiB",
            mib(input.len())
        );
        if n >= 1_000 {
            g.sampling_mode(SamplingMode::Flat).sample_size(10);
        } else {
            g.sampling_mode(SamplingMode::Auto).sample_size(20);
        }
        g.throughput(Throughput::Elements(n as u64));
        g.bench_with_input(BenchmarkId::from_parameter(n), &input, |b, input| {
            b.iter(|| parse_tell_histograms(black_box(input)))
        });
    }
    g.finish();
}

// ---------------------------------------------------------------------------------------------
// Rendering.

/// A snapshot of a cluster of `osds` OSDs, `pools` pools and `pgs` undersized PGs, made by the
/// real collector from the synthetic outputs.
fn snapshot(osds: usize, pools: usize, pgs: usize) -> Snapshot {
    let client = FakeClient::new();
    client.set(&commands::status(), Reply::ok(status_with_osds(osds)));
    client.set(
        &commands::pools(),
        Reply::ok(pool_ls(&pool_templates(), pools)),
    );
    client.set(
        &commands::pgs_brief(),
        Reply::ok(pg_ls(&brief_templates(), pgs, pools)),
    );
    let hist = tell_bodies("lab/healthy.tell-osd-all-perf-histogram-dump.out");
    client.set(&commands::histograms(), Reply::ok(tell_output(&hist, osds)));
    for key in ["osd_op_queue", "osd_mclock_profile"] {
        let bodies = tell_bodies(&format!("lab/healthy.tell-osd-all-config-get-{key}.out"));
        client.set(
            &commands::osd_config_get(key),
            Reply::ok(tell_output(&bodies, osds)),
        );
    }
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    let mut collector = Collector::new(
        client,
        CollectSettings {
            interval: Duration::from_secs(15),
            recovery_window: Duration::from_secs(300),
            latency_window: Duration::from_secs(300),
            ..Default::default()
        },
    );
    let snap = rt.block_on(collector.collect_once());
    for h in &snap.collectors {
        assert!(h.last_ok, "collector {:?}: {:?}", h.name, h.last_error);
    }
    snap
}

/// Samples (non-comment lines) of an exposition.
fn series(text: &str) -> usize {
    text.lines()
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .count()
}

fn render_group(
    c: &mut Criterion,
    group: &str,
    cases: &[(usize, usize, usize)],
    with_safety: bool,
    per: impl Fn(usize, usize, usize) -> (String, u64),
) {
    let mut g = c.benchmark_group(group);
    for (osds, pools, pgs_n) in sizes(cases) {
        let snap = snapshot(osds, pools, pgs_n);
        // Every family must be fresh for the whole run, however long it takes: render "as of"
        // the end of the collection instead of the wall clock (data older than three intervals
        // is dropped from the output, which would make a slow run look fast).
        let now = snap.taken_at;
        let (id, elements) = per(osds, pools, pgs_n);
        for (name, format) in [
            ("text", Format::Text004),
            ("openmetrics", Format::OpenMetrics100),
        ] {
            let text = String::from_utf8(render(&snap, now, format).unwrap()).unwrap();
            assert!(text.contains(&format!("ceph_daemon=\"osd.{}\"", osds - 1)));
            println!(
                "output: {group} {id} {name}: {} bytes ({:.1} KiB), {} series",
                text.len(),
                text.len() as f64 / 1024.0,
                series(&text)
            );
        }
        let big = osds >= 10_000 || pgs_n >= 100_000;
        if big {
            g.sampling_mode(SamplingMode::Flat).sample_size(20);
        } else {
            g.sampling_mode(SamplingMode::Auto).sample_size(50);
        }
        g.throughput(Throughput::Elements(elements));
        for (name, format) in [
            ("text", Format::Text004),
            ("openmetrics", Format::OpenMetrics100),
        ] {
            g.bench_with_input(BenchmarkId::new(name, &id), &snap, |b, snap| {
                b.iter(|| render(black_box(snap), now, format))
            });
        }
        if with_safety {
            // The part of the render that joins pools and undersized PGs, alone.
            let pools = &snap.pools.as_ref().expect("pools collected").value;
            let pgs = &snap.undersized_pgs.as_ref().expect("PGs listed").value;
            assert_eq!(pgs.total(), pgs_n as u64);
            g.bench_function(BenchmarkId::new("pool_safety", &id), |b| {
                b.iter(|| pool_safety(black_box(pools), black_box(pgs)))
            });
        }
    }
    g.finish();
}

/// `/metrics` by OSD count (10 pools, 100 undersized PGs): elements are OSDs.
fn render_osds(c: &mut Criterion) {
    render_group(
        c,
        "render_osds",
        &[(10, 10, 100), (1_000, 10, 100), (10_000, 10, 100)],
        false,
        |osds, _, _| (osds.to_string(), osds as u64),
    );
}

/// `/metrics` by undersized PG count and pool count (10 OSDs): elements are PGs. The per-pool
/// PG tally (`collect::safety::pool_safety`, run on every scrape) once walked every undersized
/// PG once per pool (pools x PGs); the PGs are now counted per pool while they are read, and
/// `pool_safety`, benched alone, looks each pool up.
fn render_pgs(c: &mut Criterion) {
    render_group(
        c,
        "render_pgs",
        &[
            (10, 10, 10_000),
            (10, 10, 100_000),
            (10, 1_000, 10_000),
            (10, 1_000, 100_000),
        ],
        true,
        |_, pools, pgs| (format!("{pools}pools/{pgs}pgs"), pgs as u64),
    );
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3));
    targets = parse_status, parse_pgs, count_pgs_brief, parse_pools, parse_histograms, parse_histograms_filtered, render_osds, render_pgs
}
criterion_main!(benches);
