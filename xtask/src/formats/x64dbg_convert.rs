//! The benchmark rows of the x64dbg conversions (`convert --to tenet|din|tfile`), shared by
//! the Tenet and gdb-tfile hooks: one synthetic x64dbg input, the instruction stream alone
//! (the conversions' input, their own baseline) and each conversion into a counting writer.

use std::hint::black_box;
use std::io::{Seek, SeekFrom, Write};
use std::sync::Arc;

use trace_registry::steps::Steps;

use crate::bench::BenchCase;

/// An x64dbg trace of about `bytes` bytes: `threads` threads of the x64dbg generator.
pub fn input(bytes: u64, threads: u32) -> Vec<u8> {
    let make = |n: u64| {
        let opts = trac_x64dbg::testgen::Options {
            arch: trac_x64dbg::Arch::X64,
            threads,
            max_run: 200,
            seed: 1,
        };
        trac_x64dbg::testgen::trace(opts, n, trac_x64dbg::RecorderOptions::default(), "a.exe")
    };
    let per = (make(20_000).len() as u64 / 20_000).max(1);
    make(bytes / per + 1)
}

/// A writer that counts the bytes it is given and drops them; seeks move within the count
/// (`convert --to tfile` seeks back to fill in the frame count).
#[derive(Default)]
pub struct Count {
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

/// Runs `f` over the x64dbg steps of `bytes`; the copy into an owned input is part of the
/// cost (a memcpy), as for a file read whole.
fn with_steps(bytes: &[u8], f: impl FnOnce(&mut dyn Steps) -> u64) -> u64 {
    let handler = trace_registry::by_name("x64dbg").unwrap();
    let options = trace_registry::Options::default();
    let mut ctx = trace_registry::Ctx::new(&options);
    let mut input = trace_registry::Input::from_bytes("bench.trace64", bytes.to_vec()).unwrap();
    let mut steps = handler.steps(&mut input, &mut ctx).unwrap();
    f(&mut *steps)
}

/// The instruction stream alone, touching the pc, the registers and the accesses
/// (units: instructions).
pub fn steps(bytes: &[u8]) -> u64 {
    with_steps(bytes, |steps| {
        let (mut n, mut acc) = (0u64, 0u64);
        while let Some(step) = steps.next_step() {
            let step = step.unwrap();
            acc = acc.wrapping_add(step.pc ^ step.mem.len() as u64);
            acc = acc.wrapping_add(steps.regs().iter().fold(0, |a, &r| a ^ r));
            n += 1;
        }
        black_box(acc);
        n
    })
}

/// `convert --to tenet` without the files (units: output bytes).
pub fn to_tenet(bytes: &[u8]) -> u64 {
    with_steps(bytes, |steps| {
        let written = trace_registry::sink::tenet::convert(steps, |_| Ok(Count::default()));
        written.unwrap().iter().map(|t| t.output.len).sum()
    })
}

/// `convert --to din` without the file (units: output bytes).
pub fn to_din(bytes: &[u8]) -> u64 {
    with_steps(bytes, |steps| {
        let mut out = Count::default();
        trace_registry::sink::din::convert(steps, &mut out).unwrap();
        out.len
    })
}

/// `convert --to tfile` of the first thread without the file (units: frames).
pub fn to_tfile(bytes: &[u8]) -> u64 {
    with_steps(bytes, |steps| {
        let (done, out) =
            trace_registry::sink::tfile::convert(steps, None, Count::default()).unwrap();
        black_box(out.len);
        done.frames
    })
}

/// A conversion row: its name, its unit and what it runs.
pub type Conversion<'a> = (&'a str, &'static str, fn(&[u8]) -> u64);

/// The rows: first the instruction stream alone (named `steps_name`), then each
/// conversion `(name, unit, run)`, all over one input.
pub fn rows(input: Vec<u8>, steps_name: &str, conversions: &[Conversion]) -> Vec<BenchCase> {
    let input = Arc::new(input);
    let mut rows = vec![BenchCase {
        name: steps_name.into(),
        input: input.clone(),
        unit: "instrs",
        run: Box::new(steps),
    }];
    for &(name, unit, run) in conversions {
        rows.push(BenchCase {
            name: name.into(),
            input: input.clone(),
            unit,
            run: Box::new(run),
        });
    }
    rows
}
