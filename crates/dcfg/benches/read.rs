//! Criterion benchmarks: reading a synthetic DCFG (about 4 MiB of JSON) from a slice and as
//! a stream, writing it, and building the query indexes.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    missing_docs
)]

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use dcfg::testgen::{SynthConfig, synthetic};
use dcfg::{Dcfg, Graph};

fn bench(c: &mut Criterion) {
    let model = synthetic(SynthConfig {
        images: 4,
        routines_per_image: 1500,
        threads: 4,
        seed: 7,
    });
    let json = model.to_vec();
    let mut g = c.benchmark_group("dcfg");
    g.throughput(Throughput::Bytes(json.len() as u64));
    g.bench_function("read slice", |b| {
        b.iter(|| Dcfg::parse(std::hint::black_box(&json)).unwrap());
    });
    g.bench_function("read stream", |b| {
        b.iter(|| Dcfg::from_reader(std::hint::black_box(&json[..])).unwrap());
    });
    g.bench_function("write", |b| b.iter(|| model.to_vec()));
    g.bench_function("graph index", |b| {
        b.iter(|| Graph::new(&model, &model.processes[0]).block(4).is_some());
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
