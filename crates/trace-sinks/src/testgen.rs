//! What the x64dbg conversion benchmarks run (feature `testgen`): one synthetic input and
//! one loop per conversion (`convert --to tenet|din|tfile`) into a writer that counts and
//! drops what it is given, shared by the criterion bench `convert` and the rows of
//! `cargo xtask bench tenet gdb-tfile`, so that both measure the same thing.

use std::hint::black_box;
use std::io::{Seek, SeekFrom, Write};

use trace_model::steps::Steps;
use trace_model::{Ctx, Error, Input, Options};

/// A 64-bit x64dbg trace of about `bytes` bytes (at least one instruction): `threads`
/// threads of the x64dbg generator's machine, switching every 1 to 200 instructions
/// (seed 1, the default recorder).
#[must_use]
pub fn x64dbg_input(bytes: u64, threads: u32) -> Vec<u8> {
    let make = |n: u64| {
        let opts = trac_x64dbg::testgen::Options {
            arch: trac_x64dbg::Arch::X64,
            threads,
            max_run: 200,
            seed: 1,
        };
        trac_x64dbg::testgen::trace(opts, n, trac_x64dbg::RecorderOptions::default(), "a.exe")
    };
    // The size of an instruction, measured on a sample.
    const SAMPLE: u64 = 20_000;
    let per = (make(SAMPLE).len() as u64 / SAMPLE).max(1);
    make(bytes.checked_div(per).unwrap_or(0).saturating_add(1))
}

/// A writer that counts the bytes it is given and drops them; seeks move within the
/// count (`convert --to tfile` seeks back to fill in the frame count).
#[derive(Clone, Copy, Debug, Default)]
pub struct Count {
    len: u64,
    pos: u64,
}

impl Count {
    /// The bytes written (the end of the furthest write).
    #[must_use]
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether nothing was written.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl Write for Count {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.pos = self.pos.saturating_add(buf.len() as u64);
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

/// Runs `f` over the x64dbg steps of `bytes`, shared rather than copied, as `convert` reads
/// a mapped file in place.
///
/// # Panics
///
/// When `bytes` do not convert: a benchmark of a failing input would measure nothing.
#[allow(clippy::panic)]
fn with_steps(
    bytes: &std::sync::Arc<[u8]>,
    f: impl FnOnce(&mut dyn Steps) -> Result<u64, Error>,
) -> u64 {
    let options = Options::default();
    let mut ctx = Ctx::new(&options);
    let run = || {
        let mut input = Input::from_shared("bench.trace64", std::sync::Arc::clone(bytes))?;
        let handler = trace_registry::by_name("x64dbg")
            .ok_or_else(|| Error::Unsupported("no x64dbg handler".into()))?;
        let mut steps = handler.steps(&mut input, &mut ctx)?;
        f(&mut *steps)
    };
    run().unwrap_or_else(|e| panic!("the benchmark input does not convert: {e}"))
}

/// The instruction stream alone, touching the pc, the registers and the accesses (the
/// conversions' own baseline); returns the instructions.
///
/// # Panics
///
/// When `bytes` are not an x64dbg trace that reads to its end.
#[must_use]
pub fn steps(bytes: &std::sync::Arc<[u8]>) -> u64 {
    with_steps(bytes, |steps| {
        let (mut n, mut acc) = (0u64, 0u64);
        while let Some(step) = steps.next_step() {
            let step = step?;
            acc = acc.wrapping_add(step.pc ^ step.mem.len() as u64);
            acc = acc.wrapping_add(steps.regs().iter().fold(0, |a, &r| a ^ r));
            n = n.saturating_add(1);
        }
        black_box(acc);
        Ok(n)
    })
}

/// `convert --to tenet` without the files; returns the bytes written.
///
/// # Panics
///
/// When `bytes` do not convert.
#[must_use]
pub fn to_tenet(bytes: &std::sync::Arc<[u8]>) -> u64 {
    with_steps(bytes, |steps| {
        let written = crate::tenet::convert(steps, |_| Ok(Count::default()))?;
        Ok(written.iter().map(|t| t.output.len()).sum())
    })
}

/// `convert --to din` without the file; returns the bytes written.
///
/// # Panics
///
/// When `bytes` do not convert.
#[must_use]
pub fn to_din(bytes: &std::sync::Arc<[u8]>) -> u64 {
    with_steps(bytes, |steps| {
        let mut out = Count::default();
        crate::din::convert(steps, &mut out)?;
        Ok(out.len())
    })
}

/// `convert --to tfile` of the first thread without the file; returns the frames.
///
/// # Panics
///
/// When `bytes` do not convert.
#[must_use]
pub fn to_tfile(bytes: &std::sync::Arc<[u8]>) -> u64 {
    with_steps(bytes, |steps| {
        let (done, out) = crate::tfile::convert(steps, None, Count::default())
            .map_err(|e| Error::Unsupported(e.to_string()))?;
        black_box(out.len());
        Ok(done.frames)
    })
}

/// The Arrow batches of `table` of `bytes` read by `handler`, through the typed column
/// path (`Batches::pull`) or value by value through the visitor (`Batches::write` of each
/// record): their rows. What the criterion bench `export` and the Arrow rows of
/// `cargo xtask bench` both run. The input is shared, not copied, as `to_arrow` reads a
/// mapped file in place.
///
/// # Panics
///
/// On a read error or an unknown table: the inputs are synthetic.
#[cfg(feature = "parquet")]
#[allow(clippy::unwrap_used, clippy::panic)] // A benchmark of synthetic, valid input.
#[must_use]
pub fn arrow_rows(
    handler: &dyn trace_model::Handler,
    bytes: &std::sync::Arc<[u8]>,
    table: &str,
    typed: bool,
) -> u64 {
    use crate::parquet::{Batches, Pulled};
    let options = Options::default();
    let mut ctx = Ctx::new(&options);
    let mut input = Input::from_shared("bench", std::sync::Arc::clone(bytes)).unwrap();
    let mut records = handler.records(&mut input, &mut ctx).unwrap();
    let mut batches = Batches::new(records.tables(), table, 1 << 16).unwrap();
    let mut rows = 0u64;
    loop {
        if typed {
            match batches.pull(records.as_mut()) {
                Pulled::Records(_) => {}
                Pulled::End => break,
                Pulled::Failed(e) => panic!("{e}"),
            }
        } else {
            let Some(r) = records.next_record() else {
                break;
            };
            let r = r.unwrap();
            batches.write(r.table, r.row());
        }
        while let Some(b) = batches.take() {
            rows = rows.saturating_add(black_box(b).num_rows() as u64);
        }
    }
    batches.finish();
    while let Some(b) = batches.take() {
        rows = rows.saturating_add(b.num_rows() as u64);
    }
    rows
}
