//! Criterion benchmarks: the slice and stream readers over a synthetic AMD64 trace in the
//! reference Pin tracer's shape, and the canonical writer.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]
#![allow(clippy::arithmetic_side_effects, clippy::indexing_slicing)]

use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use tenet_trace::{Arch, Line, ReadOptions, Reader, StreamReader, Trace};

/// Reads every line, touching the pc, the registers' mask and the memory items.
fn decode(data: &[u8]) -> u64 {
    let mut r = Reader::parse(data, ReadOptions::default());
    let mut acc = 0u64;
    while let Some(l) = r.next_line() {
        if let Line::Instruction(i) = l.unwrap() {
            acc = acc.wrapping_add(i.pc() ^ u64::from(i.regs.mask()));
            for m in i.mem() {
                acc = acc.wrapping_add(m.addr ^ m.data.len() as u64);
            }
        }
    }
    acc
}

fn benches(c: &mut Criterion) {
    let data = tenet_trace::testgen::trace(Arch::Amd64, 1 << 19, 1);
    let mut g = c.benchmark_group("tenet");
    g.throughput(Throughput::Bytes(data.len() as u64));
    // The raw memory-scan baseline, in the same run: every byte touched once.
    g.bench_function("baseline: byte sum", |b| {
        b.iter(|| {
            black_box(&data)
                .iter()
                .fold(0u64, |a, &x| a.wrapping_add(u64::from(x)))
        })
    });
    g.bench_function("slice reader", |b| b.iter(|| decode(black_box(&data))));
    g.bench_function("stream reader", |b| {
        b.iter(|| {
            let mut s =
                StreamReader::from_reader(black_box(&data[..]), ReadOptions::default()).unwrap();
            let mut acc = 0u64;
            while let Some(l) = s.next_line() {
                if let Line::Instruction(i) = l.unwrap() {
                    acc = acc.wrapping_add(i.pc());
                }
            }
            acc
        })
    });
    let trace = Trace::read(&data, ReadOptions::default()).unwrap();
    g.bench_function("writer", |b| {
        b.iter(|| black_box(&trace).to_bytes().unwrap())
    });
    g.finish();
}

criterion_group!(tenet, benches);
criterion_main!(tenet);
