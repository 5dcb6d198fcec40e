//! The block executions of an x64dbg trace in memory (see [`crate::blocks`]), from the
//! [`Pc`] cursor: each instruction's pc from the `cip` changes, its
//! opcode length and thread, with no register replay and no [`Step`] per instruction.
//!
//! The blocks are those of the default ([`crate::blocks::StepBlocks`] over the x64dbg
//! steps): a thread's instruction continues its block when its pc is the previous pc plus
//! the previous opcode's length ([`falls_through`]); a block is handed out when its
//! thread's next instruction does not continue it, or at the end of the input (the blocks
//! still open, in the order they started). Blocks are numbered in order of first start.
//! A streamed input goes the default way.
//!
//! [`Step`]: crate::steps::Step

use trac_x64dbg::{Cursor, Pc};

use super::err;
use crate::Error;
use crate::blocks::{BlockDesc, BlockKeys, BlockSink, Blocks, Follow, Numbers};
use crate::steps::Isa;

/// The block stream of an x64dbg trace in memory.
pub(super) struct X64Blocks<'a> {
    scan: Option<Cursor<'a, Pc>>,
    isa: Isa,
    numbers: Numbers,
}

impl<'a> X64Blocks<'a> {
    /// The blocks of the instructions `scan` walks, of a trace of `isa`.
    pub(super) fn new(scan: Cursor<'a, Pc>, isa: Isa) -> X64Blocks<'a> {
        X64Blocks {
            scan: Some(scan),
            isa,
            numbers: Numbers::default(),
        }
    }
}

impl Blocks for X64Blocks<'_> {
    fn keys(&self) -> BlockKeys {
        BlockKeys::Pc
    }

    fn numbered_by_start(&self) -> bool {
        true
    }

    fn run(&mut self, sink: &mut dyn BlockSink) -> Result<(), Error> {
        let Some(mut scan) = self.scan.take() else {
            return Ok(());
        };
        let mut follow = Follow::new(self.isa);
        // A read error ends the instructions; the blocks before it are handed out first.
        let mut read_error = None;
        while let Some(ins) = scan.next_instruction() {
            match ins {
                Ok(ins) => follow.instruction(
                    &mut self.numbers,
                    sink,
                    u64::from(ins.thread()),
                    ins.index(),
                    scan.regs().ip(),
                    ins.opcode().len() as u64,
                )?,
                Err(e) => {
                    read_error = Some(err(e));
                    break;
                }
            }
        }
        follow.finish(sink)?;
        read_error.map_or(Ok(()), Err)
    }

    fn describe(&self, block: u32) -> BlockDesc {
        self.numbers.describe(block)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::arithmetic_side_effects)]
mod tests {
    use super::*;
    use crate::blocks::{BlockRun, Pcs, StepBlocks};
    use crate::formats::x64dbg::X64dbg;
    use crate::schema::testing::{input, testdata};
    use crate::{Ctx, Handler, Input};

    /// A block run: (block, thread, pcs).
    type Run = (u32, u64, Vec<u64>);

    /// The runs of `blocks`, the start of every block number, and the error.
    fn collect(blocks: &mut dyn Blocks) -> (Vec<Run>, Vec<u64>, Option<String>) {
        let mut runs = Vec::new();
        let mut sink = |r: &BlockRun<'_>| {
            let Pcs::Listed(pcs) = r.pcs else {
                panic!("pcs not listed")
            };
            assert_eq!(r.instrs, pcs.len() as u64);
            assert_eq!(r.pc, pcs.first().copied());
            runs.push((r.block, r.thread, pcs.to_vec()));
            Ok(())
        };
        let e = blocks.run(&mut sink).err().map(|e| e.to_string());
        let n = runs.iter().map(|r| r.0 + 1).max().unwrap_or(0);
        let starts = (0..n).map(|b| blocks.describe(b).key).collect();
        (runs, starts, e)
    }

    /// The blocks of the override and of the default over the steps, for `bytes`.
    fn both(bytes: &[u8]) -> [(Vec<Run>, Vec<u64>, Option<String>); 2] {
        let options = crate::Options::default();
        let mut inp = input("t.trace64", bytes, false);
        let mut fast = X64dbg.blocks(&mut inp, &mut Ctx::new(&options)).unwrap();
        let got = collect(fast.as_mut());
        let mut inp = input("t.trace64", bytes, false);
        let mut default = StepBlocks::new(X64dbg.steps(&mut inp, &mut Ctx::new(&options)).unwrap());
        [got, collect(&mut default)]
    }

    fn synthetic(threads: u32, max_run: u64, seed: u64, instructions: u64) -> Vec<u8> {
        use trac_x64dbg::testgen;
        let opts = testgen::Options {
            arch: if seed.is_multiple_of(3) {
                trac_x64dbg::Arch::X86
            } else {
                trac_x64dbg::Arch::X64
            },
            threads,
            max_run,
            seed,
        };
        testgen::trace(
            opts,
            instructions,
            trac_x64dbg::RecorderOptions {
                legacy_thread_ids: seed % 2 == 1,
                ..trac_x64dbg::RecorderOptions::default()
            },
            "C:\\t\\a.exe",
        )
    }

    /// The override's blocks are the default's (the same runs, numbers, threads and pcs,
    /// in the same order): on the test files (threads, legacy thread ids, sessions with
    /// user blocks), synthetic traces of several threads, the real sample, and cut files
    /// (the runs before the damage, then the same error).
    #[test]
    fn blocks_are_the_defaults() {
        let mut files: Vec<(String, Vec<u8>)> = [
            "basic.trace64",
            "basic.trace32",
            "legacy-tid.trace64",
            "legacy-tid.trace32",
            "sessions.trace64",
        ]
        .iter()
        .map(|n| (n.to_string(), testdata(&format!("x64dbg/{n}"))))
        .collect();
        files.push(("4 threads".into(), synthetic(4, 300, 1, 20_000)));
        files.push(("3 threads x86".into(), synthetic(3, 7, 3, 5_000)));
        let real = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../../shared/realdata/x64dbg/d-ornen_DBGLogParser_test1.trace64");
        match std::fs::read(&real) {
            Ok(bytes) => files.push(("real".into(), bytes)),
            Err(_) => {
                assert!(
                    std::env::var_os("TRACEKIT_REQUIRE_REALDATA").is_none_or(|v| v != "1"),
                    "{} missing",
                    real.display()
                );
                println!("note: {} absent; skipped", real.display());
            }
        }
        for (name, bytes) in &files {
            let [got, want] = both(bytes);
            assert!(want.0.len() > 1, "{name}");
            assert!(want.2.is_none(), "{name}: {:?}", want.2);
            assert_eq!(got, want, "{name}");
            let cut = &bytes[..bytes.len() * 2 / 3 + 1];
            let [got, want] = both(cut);
            assert!(want.2.is_some(), "{name} cut");
            assert_eq!(got, want, "{name} cut");
        }
        // Streamed: the default.
        let bytes = &files[0].1;
        let options = crate::Options::default();
        let mut inp = input("t.trace64", bytes, true);
        let mut streamed = X64dbg.blocks(&mut inp, &mut Ctx::new(&options)).unwrap();
        assert_eq!(collect(streamed.as_mut()), both(bytes)[0]);
    }

    /// The same on random synthetic traces: threads, switches, arch, thread-id style and
    /// a cut anywhere.
    #[test]
    fn blocks_are_the_defaults_on_random_traces() {
        fn prop(threads: u8, max_run: u8, seed: u64, n: u16, cut: u16) -> bool {
            let bytes = synthetic(
                u32::from(threads % 5) + 1,
                u64::from(max_run % 60) + 1,
                seed,
                u64::from(n % 400) + 1,
            );
            let [got, want] = both(&bytes);
            let at = bytes.len() - usize::from(cut) % bytes.len().min(600);
            let [got_cut, want_cut] = both(&bytes[..at]);
            got == want && got_cut == want_cut
        }
        quickcheck::QuickCheck::new()
            .tests(200)
            .quickcheck(prop as fn(u8, u8, u64, u16, u16) -> bool);
    }

    /// A trace in memory that does not parse fails when the blocks are asked for.
    #[test]
    fn bad_header_fails() {
        let options = crate::Options::default();
        let mut inp = Input::from_bytes("t.trace64", b"TRAC\0\0\0\0".to_vec()).unwrap();
        assert!(X64dbg.blocks(&mut inp, &mut Ctx::new(&options)).is_err());
    }
}
