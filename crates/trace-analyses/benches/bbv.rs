//! `bbv` (basic-block vectors) next to the plain iteration of the same input: an x64dbg
//! trace of four threads and a TT6 PowerPC trace (the raw blocks or records, for TT6 also
//! the runs its blocks are read from, the steps' scan, then `bbv` over the blocks), and a
//! DCFG-Trace with its DCFG (the decode alone, then `bbv` over the edges' target blocks,
//! on every core and on one thread).

#![allow(clippy::unwrap_used, clippy::arithmetic_side_effects, missing_docs)]

use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use trace_analyses::bbv::{BbvOptions, bbv};
use trace_registry::steps::ScanQuery;
use trace_registry::{Ctx, Input, Options};

const INSTRUCTIONS: u64 = 200_000;

fn x64dbg_input() -> Vec<u8> {
    use trac_x64dbg::testgen::{self, Options};
    let opts = Options {
        arch: trac_x64dbg::Arch::X64,
        threads: 4,
        max_run: 200,
        seed: 1,
    };
    testgen::trace(
        opts,
        INSTRUCTIONS,
        trac_x64dbg::RecorderOptions::default(),
        "bench.exe",
    )
}

const SLICES: BbvOptions = BbvOptions {
    slice: 1_000_000,
    global: false,
    loop_bounded: false,
};

fn run_bbv(format: &str, input: &mut Input, options: &Options) -> u64 {
    let handler = trace_registry::by_name(format).unwrap();
    let mut blocks = handler.blocks(input, &mut Ctx::new(options)).unwrap();
    let r = bbv(&mut *blocks, &SLICES, |_| Ok(std::io::sink())).unwrap();
    r.streams.iter().map(|s| s.instructions).sum()
}

/// A raw iteration of a format's input: its name and loop.
type Raw<'n> = (&'n str, fn(&[u8]) -> u64);

/// The plain steps scan (and the format's raw iterations, `raw`) and bbv
/// of one pc-stream format, side by side.
fn pc_stream(c: &mut Criterion, format: &str, name: &str, bytes: Vec<u8>, raw: &[Raw<'_>]) {
    let options = Options::default();
    let handler = trace_registry::by_name(format).unwrap();
    let mut g = c.benchmark_group(format!("{format} bbv"));
    g.throughput(Throughput::Elements(INSTRUCTIONS));
    for (name, raw) in raw {
        g.bench_function(*name, |b| {
            b.iter(|| black_box(raw(&bytes)));
        });
    }
    let mut input = Input::from_bytes(name, bytes).unwrap();
    g.bench_function("steps scan (plain iteration)", |b| {
        b.iter(|| {
            let mut steps = handler.steps(&mut input, &mut Ctx::new(&options)).unwrap();
            let query = ScanQuery {
                all: true,
                ..ScanQuery::default()
            };
            let mut acc = 0u64;
            steps
                .scan(&query, &mut |s| {
                    acc = acc.wrapping_add(s.pc ^ s.opcode.len() as u64);
                    Ok(())
                })
                .unwrap();
            black_box(acc)
        });
    });
    g.bench_function("bbv", |b| {
        b.iter(|| black_box(run_bbv(format, &mut input, &options)));
    });
    g.finish();
}

/// The blocks of the trace with each instruction's thread and opcode length: the plain
/// iteration that `bbv`'s walk is measured against.
fn x64dbg_blocks(bytes: &[u8]) -> u64 {
    let trace = trac_x64dbg::Trace::parse(bytes).unwrap();
    trace.blocks().fold(0u64, |acc, b| match b.unwrap() {
        trac_x64dbg::Block::Instruction(ins) => {
            acc.wrapping_add(u64::from(ins.thread()) ^ ins.opcode().len() as u64)
        }
        trac_x64dbg::Block::User(_) => acc,
    })
}

fn x64dbg(c: &mut Criterion) {
    pc_stream(
        c,
        "x64dbg",
        "bench.trace64",
        x64dbg_input(),
        &[("blocks (raw iteration)", x64dbg_blocks)],
    );
}

/// A TT6 trace of PowerPC code: 64 blocks of 3 to 20 `addi`s, each ending in a `b` to
/// another block (a fixed pseudo-random walk).
fn tt6_input() -> Vec<u8> {
    use amber_tt6::{Instruction, Tt6Writer};
    const ADDI: u32 = 0x3863_0001;
    const B: u32 = 0x4800_0000;
    let mut w = Tt6Writer::new(Vec::new(), amber_tt6::Dialect::Tt6, 0x10000).unwrap();
    let mut block = 0u32;
    let mut n = 0u64;
    while n < INSTRUCTIONS {
        let len = 3 + block * 7 % 18;
        for _ in 0..len {
            w.write(&Instruction::compute(ADDI)).unwrap();
        }
        block = (block * 13 + 5) % 64;
        w.write(&Instruction::flow(B, 0x10000 + block * 0x100))
            .unwrap();
        n += u64::from(len) + 1;
    }
    w.finish()
}

/// The pcs of every record, with the reader's internal iteration.
fn tt6_records(bytes: &[u8]) -> u64 {
    let reader = amber_tt6::Tt6Reader::parse(bytes, amber_tt6::Dialect::Tt6).unwrap();
    reader
        .records()
        .fold(0u64, |acc, r| acc.wrapping_add(u64::from(r.unwrap().pc)))
}

/// The runs of falling-through records (what the amber blocks are made of).
fn tt6_runs(bytes: &[u8]) -> u64 {
    let reader = amber_tt6::Tt6Reader::parse(bytes, amber_tt6::Dialect::Tt6).unwrap();
    let mut acc = 0u64;
    let _ = reader.records().try_for_each_run(|r| {
        acc = acc.wrapping_add(u64::from(r.unwrap().pc));
        std::ops::ControlFlow::<()>::Continue(())
    });
    acc
}

fn tt6(c: &mut Criterion) {
    pc_stream(
        c,
        "tt6",
        "bench.tt6",
        tt6_input(),
        &[
            ("records (raw iteration)", tt6_records),
            ("runs (raw run walk)", tt6_runs),
        ],
    );
}

fn dcfg_trace(c: &mut Criterion) {
    use dcfg_trace::read::{ReadOptions, Trace};
    let cfg = dcfg_trace::synth::Cfg::new(4096, 1);
    let bytes = cfg.trace(2_000_000, u64::MAX, 1_000_000, 7).to_vec();
    let dir = std::env::temp_dir().join(format!("tk-bench-bbv-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let dcfg = dir.join("bench.dcfg.json");
    let instrs = |e| cfg.instrs_of(e);
    std::fs::write(
        &dcfg,
        dcfg_trace::synth::dcfg_json(&[(4242, 4096, &instrs)], None),
    )
    .unwrap();
    let options = Options {
        dcfg: Some(dcfg),
        ..Options::default()
    };
    let mut g = c.benchmark_group("dcfg-trace bbv");
    g.throughput(Throughput::Elements(2_000_000));
    g.sample_size(10);
    g.bench_function("decode (plain iteration)", |b| {
        b.iter(|| {
            let trace = Trace::parse(&bytes, ReadOptions::default()).unwrap();
            let mut buf = Vec::new();
            let mut acc = 0u64;
            for c in trace
                .processes
                .iter()
                .flat_map(|p| &p.threads)
                .flat_map(|t| &t.chunks)
            {
                c.for_each_batch(
                    1 << 14,
                    |b| acc = b.iter().fold(acc, |a, &e| a ^ e),
                    &mut buf,
                )
                .unwrap();
            }
            black_box(acc)
        });
    });
    let mut input = Input::from_bytes("bench.trace.json", bytes.clone()).unwrap();
    g.bench_function("bbv", |b| {
        b.iter(|| black_box(run_bbv("dcfg-trace", &mut input, &options)));
    });
    g.bench_function("bbv, 1 thread", |b| {
        b.iter(|| {
            let mut ctx = Ctx::new(&options);
            let mut blocks =
                trace_registry::formats::dcfg_trace::dcfg_blocks(&mut input, &mut ctx, 1).unwrap();
            let r = bbv(&mut *blocks, &SLICES, |_| Ok(std::io::sink())).unwrap();
            black_box(r.streams.iter().map(|s| s.instructions).sum::<u64>())
        });
    });
    g.finish();
    let _ = std::fs::remove_dir_all(&dir);
}

criterion_group!(benches, x64dbg, tt6, dcfg_trace);
criterion_main!(benches);
