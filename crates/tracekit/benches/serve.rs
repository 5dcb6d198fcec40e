//! `tracekit serve`'s API handlers called directly (no socket), on a synthetic x64dbg trace
//! in a file with its sidecar index (as the server has it once its background index is
//! built): a page of 1,000 rows with `asm` (near the start and near the end), `state` at a
//! late step, and 64 bytes of `mem` at a late step.

#![allow(
    clippy::unwrap_used,
    clippy::arithmetic_side_effects,
    clippy::indexing_slicing,
    missing_docs
)]

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use tracekit::commands::serve::api::Api;

const INSTRUCTIONS: u64 = 200_000;

fn q(pairs: &[(&str, String)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), v.clone()))
        .collect()
}

fn bench(c: &mut Criterion) {
    let dir = std::env::temp_dir().join(format!("tracekit-bench-serve-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("bench.trace64");
    std::fs::write(
        &path,
        trac_x64dbg::testgen::bench_trace(INSTRUCTIONS, 3, 300),
    )
    .unwrap();
    let options = trace_registry::Options::default();
    let api = Api::open(path.as_os_str(), None, &options).unwrap();
    api.build_index(&dir.join("tmp"));
    assert_eq!(api.index_status().state, "ready");
    let late = INSTRUCTIONS - 300;

    let mut g = c.benchmark_group("serve api (x64dbg, sidecar ready)");
    for (name, from) in [("rows 1000, start", 0), ("rows 1000, late", late - 1000)] {
        let query = q(&[("from", from.to_string()), ("count", "1000".into())]);
        g.bench_function(name, |b| {
            b.iter(|| {
                let r = api.handle("rows", &query);
                assert_eq!(r.status, 200);
                black_box(r.body.len())
            });
        });
    }
    let query = q(&[("i", late.to_string())]);
    g.bench_function("state, late", |b| {
        b.iter(|| {
            let r = api.handle("state", &query);
            assert_eq!(r.status, 200);
            black_box(r.body.len())
        });
    });
    // 64 bytes around the last word accessed before `late` (what the page asks for).
    let page = api.handle(
        "rows",
        &q(&[("from", (late - 100).to_string()), ("count", "100".into())]),
    );
    let page: serde_json::Value = serde_json::from_slice(&page.body).unwrap();
    let addr = page["rows"]
        .as_array()
        .unwrap()
        .iter()
        .rev()
        .find_map(|r| r["mem"][0]["addr"].as_str())
        .unwrap();
    let addr = u64::from_str_radix(addr.trim_start_matches("0x"), 16).unwrap();
    // The word itself (every byte accessed: the sidecar's nearest candidates answer),
    // and 64 bytes around it (bytes never accessed next to busy ones send `mem` back
    // through every candidate, then to its pass).
    for (name, at, len) in [
        ("mem 8 bytes (the word), late", addr, 8),
        ("mem 16 bytes, late", addr - 4, 16),
        ("mem 64 bytes, late", addr - 32, 64),
    ] {
        let query = q(&[
            ("i", late.to_string()),
            ("addr", format!("{at:#x}")),
            ("len", len.to_string()),
        ]);
        g.bench_function(name, |b| {
            b.iter(|| {
                let r = api.handle("mem", &query);
                assert_eq!(r.status, 200);
                black_box(r.body.len())
            });
        });
    }
    g.finish();
    let _ = std::fs::remove_dir_all(&dir);
}

criterion_group!(benches, bench);
criterion_main!(benches);
