//! The conversions of an x64dbg trace (`convert --to din`, `--to tenet`, `--to tfile` of
//! the first thread) on a synthetic trace of four threads, next to the memory scan of the same input (read every byte) and
//! the instruction stream alone (what the Tenet conversion reads); trace bytes per second.

#![allow(clippy::unwrap_used, clippy::arithmetic_side_effects, missing_docs)]

mod common;

use std::hint::black_box;
use std::io::{Seek, SeekFrom, Write};

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use trace_registry::{Ctx, Input, Options};

const INSTRUCTIONS: u64 = 200_000;

/// A writer that counts what it is given and drops it (seeks only move the count's end).
#[derive(Default)]
struct Count {
    len: u64,
    pos: u64,
}

impl Write for Count {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.pos += buf.len() as u64;
        self.len = self.len.max(self.pos);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Seek for Count {
    fn seek(&mut self, to: SeekFrom) -> std::io::Result<u64> {
        self.pos = match to {
            SeekFrom::Start(p) => p,
            SeekFrom::End(d) => self.len.saturating_add_signed(d),
            SeekFrom::Current(d) => self.pos.saturating_add_signed(d),
        };
        Ok(self.pos)
    }
}

fn bench(c: &mut Criterion) {
    let bytes = common::x64dbg_input(INSTRUCTIONS, 4, 200);
    let options = Options::default();
    let handler = trace_registry::by_name("x64dbg").unwrap();
    let mut input = Input::from_bytes("bench.trace64", bytes.clone()).unwrap();

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
    g.bench_function("steps (replay)", |b| {
        b.iter(|| {
            let mut steps = handler.steps(&mut input, &mut Ctx::new(&options)).unwrap();
            let mut acc = 0u64;
            while let Some(step) = steps.next_step() {
                acc ^= step.unwrap().pc;
                acc ^= steps.regs().iter().fold(0, |a, &r| a ^ r);
            }
            black_box(acc)
        });
    });
    g.bench_function("to din", |b| {
        b.iter(|| {
            let mut steps = handler.steps(&mut input, &mut Ctx::new(&options)).unwrap();
            let mut out = Count::default();
            trace_registry::sink::din::convert(&mut *steps, &mut out).unwrap();
            black_box(out.len)
        });
    });
    g.bench_function("to tenet", |b| {
        b.iter(|| {
            let mut steps = handler.steps(&mut input, &mut Ctx::new(&options)).unwrap();
            let written =
                trace_registry::sink::tenet::convert(&mut *steps, |_| Ok(Count::default()))
                    .unwrap();
            black_box(written.len())
        });
    });
    g.bench_function("to tfile (first thread)", |b| {
        b.iter(|| {
            let mut steps = handler.steps(&mut input, &mut Ctx::new(&options)).unwrap();
            let (done, out) =
                trace_registry::sink::tfile::convert(&mut *steps, None, Count::default()).unwrap();
            assert!(done.frames > 0);
            black_box(out.len)
        });
    });
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(10);
    targets = bench
}
criterion_main!(benches);
