//! `convert --to tfile` on a synthetic one-thread x64dbg trace (every instruction becomes a
//! frame), into a writer that counts the bytes: the conversion itself, next to the
//! instruction stream it reads (the steps with their registers, its baseline) and a plain
//! read of every byte of the input.

#![allow(clippy::unwrap_used, clippy::arithmetic_side_effects, missing_docs)]

use std::hint::black_box;
use std::io::{Seek, SeekFrom, Write};

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use trace_registry::{Ctx, Input, Options};

const INSTRUCTIONS: u64 = 300_000;

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

fn x64dbg_input() -> Vec<u8> {
    use trac_x64dbg::testgen::{self, Options};
    let opts = Options {
        arch: trac_x64dbg::Arch::X64,
        threads: 1,
        max_run: 300,
        seed: 1,
    };
    testgen::trace(
        opts,
        INSTRUCTIONS,
        trac_x64dbg::RecorderOptions::default(),
        "bench.exe",
    )
}

fn bench(c: &mut Criterion) {
    let bytes = x64dbg_input();
    let options = Options::default();
    let handler = trace_registry::by_name("x64dbg").unwrap();
    let mut input = Input::from_bytes("bench", bytes.clone()).unwrap();

    let mut g = c.benchmark_group("x64dbg -> tfile");
    g.throughput(Throughput::Bytes(bytes.len() as u64));
    g.bench_function("scan (every byte)", |b| {
        b.iter(|| {
            black_box(
                bytes
                    .iter()
                    .fold(0u64, |a, &x| a.wrapping_add(u64::from(x))),
            )
        });
    });
    g.bench_function("steps (the input read)", |b| {
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
    g.bench_function("convert", |b| {
        b.iter(|| {
            let mut steps = handler.steps(&mut input, &mut Ctx::new(&options)).unwrap();
            let (done, out) =
                trace_registry::sink::tfile::convert(&mut *steps, None, Count::default()).unwrap();
            assert_eq!(done.frames, INSTRUCTIONS);
            black_box(out.len)
        });
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
