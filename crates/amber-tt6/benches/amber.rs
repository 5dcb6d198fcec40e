//! Criterion benchmarks: TT6 decoding with classification (slice and stream readers) and
//! FULL decoding, on synthetic traces made by the writer.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]
#![allow(clippy::arithmetic_side_effects, clippy::indexing_slicing)]

use std::hint::black_box;

use amber_tt6::{
    Dialect, FullReader, FullRecordOwned, FullWriter, Instruction, RecordSize, Tt6Reader,
    Tt6StreamReader, Tt6Writer,
};
use criterion::{Criterion, Throughput, criterion_group, criterion_main};

/// A TT6 trace of `n` records cycling through compute, memory, flow and memory-extended
/// records (the same mix every time).
fn trace(n: u32) -> Vec<u8> {
    let mut w = Tt6Writer::new(Vec::new(), Dialect::Tt6, 0x1_0000).unwrap();
    for i in 0..n {
        let ins = match i % 10 {
            0..=4 => Instruction::compute(0x3863_0001), // addi r3,r3,1
            5..=7 => Instruction::memory(0x8061_0010, 0x1000_0000 + i * 4), // lwz
            8 => Instruction::flow(0x4182_0008, 0x1_0000 + (i % 64) * 4), // beq
            _ => Instruction::memory_extended(0x7c64_2c2a, 0x2000, 7), // lswx
        };
        w.write(&ins).unwrap();
    }
    w.finish()
}

fn decode(data: &[u8]) -> u64 {
    let mut acc = 0u64;
    Tt6Reader::parse(data, Dialect::Tt6)
        .unwrap()
        .records()
        .for_each(|r| {
            let r = r.unwrap();
            acc = acc
                .wrapping_add(u64::from(r.pc ^ r.opcode ^ r.next_pc))
                .wrapping_add(u64::from(r.ea().unwrap_or(0) ^ r.extra().unwrap_or(0)))
                .wrapping_add(r.class as u64 + r.escapes.raw().len() as u64);
        });
    acc
}

fn benches(c: &mut Criterion) {
    let data = trace(1 << 20);
    let mut g = c.benchmark_group("amber");
    g.throughput(Throughput::Bytes(data.len() as u64));
    g.bench_function("tt6 slice reader", |b| b.iter(|| decode(black_box(&data))));
    g.bench_function("tt6 stream reader", |b| {
        b.iter(|| {
            let mut s = Tt6StreamReader::from_reader(black_box(&data[..]), Dialect::Tt6).unwrap();
            let mut acc = 0u32;
            while let Some(r) = s.next_record() {
                let r = r.unwrap();
                acc = acc.wrapping_add(r.pc ^ r.opcode ^ r.ea().unwrap_or(0));
            }
            acc
        })
    });
    let mut fw = FullWriter::new(Vec::new(), RecordSize::Packed1004).unwrap();
    for k in 0..4096u32 {
        let mut r = FullRecordOwned::zeroed(0x3863_0001);
        r.thread.srr0.set(0x1000 + 4 * k);
        fw.write(&r).unwrap();
    }
    let full = fw.finish();
    g.throughput(Throughput::Bytes(full.len() as u64));
    g.bench_function("full reader", |b| {
        b.iter(|| {
            let r = FullReader::parse(black_box(&full)).unwrap();
            r.records()
                .map(|r| {
                    let r = r.unwrap();
                    u64::from(r.thread.srr0.get()) ^ r.float.fpregs[0].get()
                })
                .fold(0u64, u64::wrapping_add)
        })
    });
    g.finish();
}

criterion_group!(group, benches);
criterion_main!(group);
