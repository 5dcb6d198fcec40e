//! Criterion benchmarks: Huffman-coded decoding on one and two threads, the expansion of
//! nested repeats, and the encoder. Small inputs (a few MiB); the 256 MiB figures come from
//! `cargo xtask bench dcfg-trace`.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::arithmetic_side_effects,
    missing_docs
)]

use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use dcfg_trace::encode::{EncodeOptions, ProcessEdges, ThreadEdges, encode};
use dcfg_trace::read::{ReadOptions, Trace};
use dcfg_trace::synth::{Cfg, repeat_trace};

fn decode(c: &mut Criterion) {
    let cfg = Cfg::new(4096, 1);
    let file = cfg.trace(u64::MAX, 2 << 20, 1_000_000, 7).to_vec();
    let trace = Trace::parse(&file, ReadOptions::default()).unwrap();
    let thread = &trace.processes[0].threads[0];
    let edges: u64 = thread.chunks.iter().map(|c| c.edge_count).sum();
    let mut g = c.benchmark_group("dcfg-trace");
    g.throughput(Throughput::Elements(edges));
    g.sample_size(10);
    g.bench_function("decode 1 thread", |b| {
        let mut buf = Vec::new();
        b.iter(|| {
            let mut n = 0;
            for c in &thread.chunks {
                buf.clear();
                c.decode_into(&mut buf).unwrap();
                n += buf.len();
            }
            black_box(n)
        });
    });
    g.bench_function("decode 2 threads", |b| {
        b.iter(|| {
            black_box(
                thread
                    .map_parallel(2, |_, r| r.map(<[u64]>::len).unwrap_or(0))
                    .iter()
                    .sum::<usize>(),
            )
        });
    });
    let rep = repeat_trace(1 << 20, 3).to_vec();
    let rt = Trace::parse(&rep, ReadOptions::default()).unwrap();
    let p = &rt.processes[0];
    let progs: Vec<_> = p.threads[0]
        .chunks
        .iter()
        .map(|c| c.compile().unwrap())
        .collect();
    let chars: u64 = progs
        .iter()
        .map(|pr| dcfg_trace::expand::count_chars(pr, &p.process.dictionary, u64::MAX).0)
        .sum();
    g.throughput(Throughput::Elements(chars));
    g.bench_function("expand nested repeats", |b| {
        b.iter(|| {
            progs
                .iter()
                .map(|pr| dcfg_trace::expand::count_chars(pr, &p.process.dictionary, u64::MAX).1)
                .fold(0u64, u64::wrapping_add)
        });
    });
    let walk = cfg.walk(200_000, 3);
    let input = [ProcessEdges {
        pid: 1,
        threads: vec![ThreadEdges {
            thread: 0,
            edges: walk,
        }],
    }];
    g.throughput(Throughput::Elements(200_000));
    g.bench_function("encode", |b| {
        b.iter(|| {
            black_box(
                encode(&input, |_, e| cfg.instrs_of(e), &EncodeOptions::default())
                    .to_vec()
                    .len(),
            )
        });
    });
    g.finish();
}

criterion_group!(benches, decode);
criterion_main!(benches);
