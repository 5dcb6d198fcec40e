//! The conversions of an x64dbg trace (`convert --to din`, `--to tenet`, `--to tfile` of
//! the first thread) on a synthetic trace of four threads, next to the memory scan of the
//! same input (read every byte) and the instruction stream alone (what the conversions
//! read); trace bytes per second. The input and the loops are `trace_sinks::testgen`'s,
//! which the rows of `cargo xtask bench tenet gdb-tfile` run too.

#![allow(clippy::unwrap_used, clippy::arithmetic_side_effects, missing_docs)]

use std::hint::black_box;
use std::sync::Arc;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use trace_sinks::testgen;

/// A conversion (or the stream alone) over the input, shared; returns its units.
type Run = fn(&Arc<[u8]>) -> u64;

/// The size of the input: about 200,000 instructions.
const BYTES: u64 = 10 << 20;

fn bench(c: &mut Criterion) {
    let bytes = testgen::x64dbg_input(BYTES, 4);
    let shared: Arc<[u8]> = Arc::from(bytes.as_slice());
    let mut g = c.benchmark_group("x64dbg convert");
    g.throughput(Throughput::Bytes(bytes.len() as u64));
    g.bench_function("memory scan (baseline)", |b| {
        b.iter(|| {
            let sum = black_box(&bytes[..]).chunks_exact(8).fold(0u64, |s, c| {
                s.wrapping_add(u64::from_le_bytes(c.try_into().unwrap()))
            });
            black_box(sum)
        });
    });
    let rows: [(&str, Run); 4] = [
        ("steps (replay)", testgen::steps),
        ("to din", testgen::to_din),
        ("to tenet", testgen::to_tenet),
        ("to tfile (first thread)", testgen::to_tfile),
    ];
    for (name, run) in rows {
        g.bench_function(name, |b| b.iter(|| black_box(run(black_box(&shared)))));
    }
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(10);
    targets = bench
}
criterion_main!(benches);
