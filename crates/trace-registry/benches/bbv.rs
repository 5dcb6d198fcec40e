//! `bbv` (basic-block vectors) next to the plain iteration of the same input: an x64dbg
//! trace of four threads (the steps' lean scan, then `bbv` over the blocks it gives), and a
//! DCFG-Trace with its DCFG (the decode alone, then `bbv` over the edges' target blocks).

#![allow(clippy::unwrap_used, clippy::arithmetic_side_effects, missing_docs)]

use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use trace_registry::analyses::bbv::{BbvOptions, bbv};
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
    slice: 10_000,
    global: false,
    loop_bounded: false,
};

fn run_bbv(format: &str, input: &mut Input, options: &Options) -> u64 {
    let handler = trace_registry::by_name(format).unwrap();
    let mut blocks = handler.blocks(input, &mut Ctx::new(options)).unwrap();
    let r = bbv(&mut *blocks, &SLICES, |_| Ok(std::io::sink())).unwrap();
    r.streams.iter().map(|s| s.instructions).sum()
}

fn x64dbg(c: &mut Criterion) {
    let bytes = x64dbg_input();
    let options = Options::default();
    let handler = trace_registry::by_name("x64dbg").unwrap();
    let mut input = Input::from_bytes("bench.trace64", bytes).unwrap();
    let mut g = c.benchmark_group("x64dbg bbv");
    g.throughput(Throughput::Elements(INSTRUCTIONS));
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
        b.iter(|| black_box(run_bbv("x64dbg", &mut input, &options)));
    });
    g.finish();
}

/// A DCFG for `Cfg::new(n, 1)`: edge `e` runs to block `100 + e` of `instrs_of(e)`.
fn synth_dcfg(cfg: &dcfg_trace::synth::Cfg, n: u64) -> String {
    let blocks: Vec<String> = (1..=n)
        .map(|e| {
            format!(
                "[{}, \"{:#x}\", 4, {}]",
                100 + e,
                0x40 * e,
                cfg.instrs_of(e)
            )
        })
        .collect();
    let edges: Vec<String> = (1..=n)
        .map(|e| format!("[{e}, {}, {}, 18, [1]]", 100 + e, 100 + e))
        .collect();
    format!(
        "{{\"MAJOR_VERSION\": 1, \"MINOR_VERSION\": 0, \"PROCESSES\": [[\"PROCESS_ID\", \"PROCESS_DATA\"], [4242, {{\"IMAGES\": [[\"IMAGE_ID\", \"LOAD_ADDR\", \"SIZE\", \"IMAGE_DATA\"], [1, \"0x400000\", 1048576, {{\"BASIC_BLOCKS\": [[\"NODE_ID\", \"ADDR_OFFSET\", \"SIZE\", \"NUM_INSTRS\"], {}]}}]], \"EDGES\": [[\"EDGE_ID\", \"SOURCE_NODE_ID\", \"TARGET_NODE_ID\", \"EDGE_TYPE_ID\", \"COUNT_PER_THREAD\"], {}]}}]]}}",
        blocks.join(", "),
        edges.join(", ")
    )
}

fn dcfg_trace(c: &mut Criterion) {
    use dcfg_trace::read::{ReadOptions, Trace};
    let cfg = dcfg_trace::synth::Cfg::new(4096, 1);
    let bytes = cfg.trace(2_000_000, u64::MAX, 1_000_000, 7).to_vec();
    let dir = std::env::temp_dir().join(format!("tk-bench-bbv-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let dcfg = dir.join("bench.dcfg.json");
    std::fs::write(&dcfg, synth_dcfg(&cfg, 4096)).unwrap();
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
    g.finish();
    let _ = std::fs::remove_dir_all(&dir);
}

criterion_group!(benches, x64dbg, dcfg_trace);
criterion_main!(benches);
