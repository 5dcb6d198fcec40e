//! Criterion benchmarks of the sinks over the registry's rows: JSON Lines (`tracekit dump`),
//! Parquet (`tracekit export`, one and two threads) and the Arrow batches of `instructions`
//! (the Python package's `to_arrow()`, through the typed column fast path and visited value
//! by value) on a synthetic x64dbg trace, and Parquet on a synthetic DCFG-Trace file (edges
//! per second). Small inputs (a few MiB); the
//! 256 MiB figures beside a raw memory scan come from `cargo xtask bench`.
#![allow(
    clippy::indexing_slicing,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::arithmetic_side_effects,
    missing_docs
)]

use std::hint::black_box;
use std::path::Path;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use trace_registry::{Ctx, Handler, Input, Options};
use trace_sinks::JsonLines;
use trace_sinks::parquet::{Dataset, Origin, ParquetOptions, Pulled};

fn x64dbg_input() -> Vec<u8> {
    use trac_x64dbg::testgen::{self, Options};
    let opts = Options {
        arch: trac_x64dbg::Arch::X64,
        threads: 3,
        max_run: 300,
        seed: 1,
    };
    testgen::trace(
        opts,
        100_000,
        trac_x64dbg::RecorderOptions::default(),
        "bench.exe",
    )
}

fn dcfg_trace_input() -> Vec<u8> {
    let cfg = dcfg_trace::synth::Cfg::new(4096, 1);
    cfg.trace(u64::MAX, 2 << 20, 1_000_000, 7).to_vec()
}

/// Exports `bytes` with `handler` to `dir` and returns the rows of the first table.
fn export(handler: &dyn Handler, bytes: &[u8], dir: &Path, threads: usize) -> u64 {
    let options = Options::default();
    let mut ctx = Ctx::new(&options);
    let mut input = Input::from_bytes("bench", bytes.to_vec()).unwrap();
    let mut records = handler.records(&mut input, &mut ctx).unwrap();
    let parquet = ParquetOptions {
        threads,
        ..ParquetOptions::default()
    };
    let mut dataset = Dataset::create(dir, records.tables(), &parquet, true).unwrap();
    while let Pulled::Records(_) = dataset.pull(records.as_mut()).unwrap() {}
    let summary = dataset.finish(&Origin::default(), None, &[]).unwrap();
    summary[0].rows
}

fn dump(handler: &dyn Handler, bytes: &[u8]) -> u64 {
    let options = Options::default();
    let mut ctx = Ctx::new(&options);
    let mut input = Input::from_bytes("bench", bytes.to_vec()).unwrap();
    let mut records = handler.records(&mut input, &mut ctx).unwrap();
    let mut sink = JsonLines::new(std::io::sink(), records.tables());
    let mut n = 0;
    while let Some(r) = records.next_record() {
        let r = r.unwrap();
        sink.write(r.table, r.row()).unwrap();
        n += 1;
    }
    n
}

fn sinks(c: &mut Criterion) {
    let dir = std::env::temp_dir().join(format!("tracekit-bench-export-{}", std::process::id()));
    let x64 = x64dbg_input();
    let handler = trace_registry::by_name("x64dbg").unwrap();
    let mut g = c.benchmark_group("x64dbg sinks");
    g.throughput(Throughput::Bytes(x64.len() as u64));
    g.sample_size(10);
    g.bench_function("dump (JSON Lines)", |b| {
        b.iter(|| dump(handler, black_box(&x64)))
    });
    for threads in [1, 2] {
        g.bench_function(format!("export (Parquet, {threads} thr)"), |b| {
            b.iter(|| export(handler, black_box(&x64), &dir, threads));
        });
    }
    let shared: std::sync::Arc<[u8]> = std::sync::Arc::from(x64.as_slice());
    for (how, typed) in [("typed", true), ("visited", false)] {
        g.bench_function(format!("Arrow batches of instructions ({how})"), |b| {
            b.iter(|| {
                trace_sinks::testgen::arrow_rows(handler, black_box(&shared), "instructions", typed)
            });
        });
    }
    g.finish();

    let trace = dcfg_trace_input();
    let handler = trace_registry::by_name("dcfg-trace").unwrap();
    let edges = {
        let t = dcfg_trace::read::Trace::parse(&trace, dcfg_trace::read::ReadOptions::default())
            .unwrap();
        t.processes
            .iter()
            .flat_map(|p| &p.threads)
            .flat_map(|t| &t.chunks)
            .map(|c| c.edge_count)
            .sum()
    };
    let mut g = c.benchmark_group("dcfg-trace sinks");
    g.throughput(Throughput::Elements(edges));
    g.sample_size(10);
    g.bench_function("export (Parquet, 1 thr)", |b| {
        b.iter(|| export(handler, black_box(&trace), &dir, 1));
    });
    g.finish();
    let _ = std::fs::remove_dir_all(&dir);
}

criterion_group!(benches, sinks);
criterion_main!(benches);
