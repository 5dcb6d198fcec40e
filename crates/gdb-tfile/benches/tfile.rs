//! Frame iteration with block parsing over a synthetic amd64 file (registers, memory and
//! TSV blocks, the shape gdbserver writes), and the description parser.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::arithmetic_side_effects,
    missing_docs
)]

use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use gdb_tfile::{Block, ReadOptions, StreamReader, TraceFile, testgen};

fn walk(bytes: &[u8]) -> u64 {
    let file = TraceFile::parse(bytes, ReadOptions::default()).unwrap();
    let mut n = 0u64;
    for f in file.frames() {
        let f = f.unwrap();
        for b in f.blocks() {
            match b.unwrap() {
                Block::Registers { offset, data } => {
                    black_box((offset, data.len()));
                }
                Block::Memory {
                    offset,
                    address,
                    data,
                } => {
                    black_box((offset, address, data.len()));
                }
                Block::Tsv {
                    offset,
                    number,
                    value,
                } => {
                    black_box((offset, number, value));
                }
            }
        }
        n += 1;
    }
    n
}

fn frames(c: &mut Criterion) {
    let bytes = testgen::amd64_bytes(16 << 20, 1);
    let mut g = c.benchmark_group("gdb-tfile");
    g.throughput(Throughput::Bytes(bytes.len() as u64));
    g.bench_function("frames+blocks (slice)", |b| {
        b.iter(|| walk(black_box(&bytes)))
    });
    g.bench_function("frames+blocks (stream)", |b| {
        b.iter(|| {
            let mut s =
                StreamReader::from_reader(black_box(&bytes[..]), ReadOptions::default()).unwrap();
            let mut n = 0u64;
            while let Some(f) = s.next_frame().unwrap() {
                n += f.blocks().count() as u64;
            }
            n
        })
    });
    let desc =
        gdb_tfile::write::to_bytes(&testgen::amd64_file(0, 1), gdb_tfile::Endian::Little).unwrap();
    g.throughput(Throughput::Bytes(desc.len() as u64));
    g.bench_function("description + tdesc", |b| {
        b.iter(|| {
            TraceFile::parse(black_box(&desc), ReadOptions::default())
                .unwrap()
                .tdesc()
                .map(|t| t.registers.len())
        })
    });
    g.finish();
}

criterion_group!(benches, frames);
criterion_main!(benches);
