//! `tracekit simpoint`'s work on a small synthetic run (1,000 slices of 500 blocks out of
//! 2,000, 8 phases, max-k 10): reading the `.bb` text with the projection, and the k-means
//! over every k. `cargo xtask bench simpoint` times the full size (10,000 slices, 5,000
//! blocks, max-k 30) end to end.

#![allow(clippy::unwrap_used, clippy::arithmetic_side_effects, missing_docs)]

use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use simpoint::bb::{Item, Reader};
use simpoint::cluster::{Options, Points, Projection, cluster};
use simpoint::testgen::{Shape, phases};

const SHAPE: Shape = Shape {
    slices: 1000,
    blocks: 2000,
    per_slice: 500,
    phases: 8,
    seed: 1,
};

fn project(text: &[u8]) -> Points {
    let mut p = Projection::new(15, 0).unwrap();
    let mut r = Reader::new(text);
    while let Some(item) = r.next_item() {
        if let Item::Slice(entries) = item.unwrap() {
            p.push(entries.iter().map(|e| (0, u64::from(e.id), e.count)), 1.0)
                .unwrap();
        }
    }
    p.finish()
}

fn bench(c: &mut Criterion) {
    let (text, _) = phases(SHAPE).unwrap();
    let mut g = c.benchmark_group("simpoint");
    g.sample_size(10);
    g.throughput(Throughput::Bytes(text.len() as u64));
    g.bench_function("read 1000 slices", |b| {
        b.iter(|| {
            let mut r = Reader::new(&text[..]);
            let mut n = 0.0;
            while let Some(item) = r.next_item() {
                if let Item::Slice(entries) = item.unwrap() {
                    n += entries.iter().map(|e| e.count).sum::<f64>();
                }
            }
            black_box(n)
        });
    });
    g.bench_function("read+project 1000 slices", |b| {
        b.iter(|| black_box(project(&text)).len());
    });
    let points = project(&text);
    let opts = Options {
        max_k: 10,
        ..Options::default()
    };
    g.throughput(Throughput::Elements(SHAPE.slices as u64));
    g.bench_function("cluster 1000 slices k 1..=10", |b| {
        b.iter(|| black_box(cluster(&points, &opts).unwrap()).k);
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
