//! Criterion benchmarks of the x64dbg reader on a synthetic 3-thread x64 trace: block
//! iteration, block iteration reading every field, full decode with register-state
//! replay, the cross-reference scan, the index build, and the equal-blocks pass of `diff`
//! next to a plain comparison of the same bytes.
#![allow(
    missing_docs,
    clippy::unwrap_used,
    clippy::arithmetic_side_effects,
    clippy::indexing_slicing
)]

use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use trac_x64dbg::testgen::{self, Options};
use trac_x64dbg::{Arch, Block, RecorderOptions, Trace};

fn input() -> Vec<u8> {
    let opts = Options {
        arch: Arch::X64,
        threads: 3,
        max_run: 300,
        seed: 1,
    };
    testgen::trace(opts, 100_000, RecorderOptions::default(), "bench.exe")
}

/// Iterates the blocks, reading each one's thread and opcode, and with `FIELDS` every
/// register change and memory access too.
fn walk<const FIELDS: bool>(data: &[u8]) -> u64 {
    let trace = Trace::parse(data).unwrap();
    let mut acc = 0u64;
    for block in trace.blocks() {
        if let Block::Instruction(i) = block.unwrap() {
            acc ^= u64::from(i.thread()) ^ i.opcode().len() as u64;
            if FIELDS {
                for r in i.regs() {
                    acc = acc.wrapping_add(r.value ^ u64::from(r.index));
                }
                for m in i.mem() {
                    acc = acc.wrapping_add(m.address ^ m.old ^ m.new.unwrap_or(0));
                }
            }
        }
    }
    acc
}

fn benches(c: &mut Criterion) {
    let data = input();
    let mut g = c.benchmark_group("x64dbg");
    g.throughput(Throughput::Bytes(data.len() as u64));
    g.bench_function("iterate", |b| b.iter(|| walk::<false>(black_box(&data))));
    g.bench_function("blocks", |b| b.iter(|| walk::<true>(black_box(&data))));
    g.bench_function("replay", |b| {
        b.iter(|| {
            let trace = Trace::parse(black_box(&data)).unwrap();
            let mut replay = trace.replay();
            let mut acc = 0u64;
            while let Some(i) = replay.next_instruction() {
                let i = i.unwrap();
                acc = acc.wrapping_add(replay.regs().ip() ^ u64::from(i.thread()));
            }
            acc
        });
    });
    // xref: the instructions that touched one stack word, with their pcs (no REGDUMP).
    g.bench_function("scan", |b| {
        b.iter(|| {
            let trace = Trace::parse(black_box(&data)).unwrap();
            let mut scan = trace.cursor::<trac_x64dbg::Pc>();
            let mut acc = 0u64;
            while let Some(i) = scan.next_instruction_where(|i, _| i.touches(0x14_fe00, 0x14_fe08))
            {
                i.unwrap();
                acc = acc.wrapping_add(scan.regs().ip());
            }
            acc
        });
    });
    g.bench_function("index", |b| {
        b.iter(|| {
            let trace = Trace::parse(black_box(&data)).unwrap();
            trace.build_index().unwrap().instructions()
        });
    });
    // diff's equal stretches: the blocks passed against a copy, next to comparing the
    // copies' bytes (the floor).
    let copy = data.clone();
    g.bench_function("pass_equal (copy)", |b| {
        b.iter(|| {
            let trace = Trace::parse(black_box(&data)).unwrap();
            let mut blocks = trace.blocks();
            let at = blocks.offset().0 as usize;
            blocks.pass_equal(black_box(&copy[at..]), |t| {
                black_box(t);
            })
        });
    });
    g.bench_function("memcmp (copy)", |b| {
        b.iter(|| black_box(&data[..]) == black_box(&copy[..]));
    });
    g.finish();
    let trace = Trace::parse(&data).unwrap();
    let index = trace.build_index().unwrap();
    let n = index.instructions();
    c.bench_function("x64dbg/seek", |b| {
        let mut k = 0u64;
        b.iter(|| {
            k = (k + 7919) % n;
            trace.seek(&index, k).unwrap().1.regs().ip()
        });
    });
}

criterion_group!(group, benches);
criterion_main!(group);
