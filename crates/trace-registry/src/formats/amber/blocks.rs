//! The block executions of amber traces (see [`crate::blocks`]), read straight from the
//! records: the blocks of the default ([`crate::blocks::StepBlocks`]) without a [`Step`]
//! per instruction.
//!
//! PowerPC instructions are 4-byte words, so a thread's record continues its block when
//! its pc is the previous record's pc + 4 (within a TT6/TT6E file: exactly when the
//! previous record was not a taken branch). A block is handed out when its thread's next
//! record does not continue it, or at the end of the input (the blocks still open, in the
//! order they started), as the default does; its pcs are [`Pcs::Stride`] of 4 from its
//! start. Blocks are numbered in order of first start. One TT6/TT6E file in memory (one
//! thread) needs no per-record bookkeeping here: its blocks are the reader's runs of
//! falling-through records ([`amber_tt6::Records::try_for_each_run`]).
//!
//! [`Step`]: crate::steps::Step

use std::ops::ControlFlow;

use super::{Amber, Reader};
use crate::blocks::{BlockDesc, BlockKeys, BlockRun, BlockSink, Blocks, Numbers, Pcs};
use crate::{Ctx, Error, Input};

/// A PowerPC instruction's length.
const WORD: u64 = 4;

/// The block of one thread being followed.
#[derive(Clone, Copy, Debug, Default)]
struct Open {
    thread: u64,
    /// The index of its first record (to hand out the blocks still open at the end in the
    /// order they started).
    first: u64,
    /// Its first pc.
    start: u64,
    /// The pc that continues it.
    next: u64,
    /// Its records so far (0: no block open).
    len: u64,
    block: u32,
}

/// Follows every thread's block over the records.
struct Walk<'s> {
    numbers: &'s mut Numbers,
    sink: &'s mut dyn BlockSink,
    /// Per thread the block being followed.
    open: Vec<Open>,
    /// The slot in `open` of the last record's thread (threads switch rarely).
    last: usize,
}

impl Walk<'_> {
    /// Hands out `o`'s block, if one is open.
    fn emit(sink: &mut dyn BlockSink, o: &Open) -> Result<(), Error> {
        if o.len == 0 {
            return Ok(());
        }
        sink.block(&BlockRun {
            block: o.block,
            process: 0,
            thread: o.thread,
            pc: Some(o.start),
            instrs: o.len,
            pcs: Pcs::Stride(WORD),
            loop_entry: false,
        })
    }

    /// One record: record `i` of `thread` at `pc`.
    #[inline]
    fn record(&mut self, thread: u64, i: u64, pc: u32) -> Result<(), Error> {
        let pc = u64::from(pc);
        let at = match self.open.get(self.last) {
            Some(o) if o.thread == thread => self.last,
            _ => self.slot(thread),
        };
        let Some(o) = self.open.get_mut(at) else {
            return Ok(());
        };
        if o.len != 0 && pc == o.next {
            o.len = o.len.wrapping_add(1);
            o.next = pc.wrapping_add(WORD);
            return Ok(());
        }
        Self::emit(self.sink, o)?;
        *o = Open {
            thread,
            first: i,
            start: pc,
            next: pc.wrapping_add(WORD),
            len: 1,
            block: self.numbers.of(pc),
        };
        Ok(())
    }

    /// The slot of `thread` in `open` (a new one for a new thread), remembered as the last.
    #[cold]
    fn slot(&mut self, thread: u64) -> usize {
        let at = match self.open.iter().position(|o| o.thread == thread) {
            Some(at) => at,
            None => {
                self.open.push(Open {
                    thread,
                    ..Open::default()
                });
                self.open.len().saturating_sub(1)
            }
        };
        self.last = at;
        at
    }

    /// Hands out the blocks still open, in the order they started.
    fn finish(mut self) -> Result<(), Error> {
        self.open.sort_by_key(|o| o.first);
        for o in &self.open {
            Self::emit(self.sink, o)?;
        }
        Ok(())
    }
}

/// The blocks of one TT6/TT6E file in memory: its runs of falling-through records
/// ([`amber_tt6::Records::try_for_each_run`]), each a block. One thread, and a record's pc
/// is the previous record's next pc, so a run never continues the one before it and each
/// is handed out as it ends, in the order the blocks start.
fn slice_runs(
    records: &mut amber_tt6::Records<'_>,
    handler: Amber,
    thread: u64,
    numbers: &mut Numbers,
    sink: &mut dyn BlockSink,
) -> Result<(), Error> {
    let mut read_error = None;
    let flow = records.try_for_each_run(|r| match r {
        Ok(r) => {
            let pc = u64::from(r.pc);
            let run = BlockRun {
                block: numbers.of(pc),
                process: 0,
                thread,
                pc: Some(pc),
                instrs: r.len,
                pcs: Pcs::Stride(WORD),
                loop_entry: false,
            };
            match sink.block(&run) {
                Ok(()) => ControlFlow::Continue(()),
                Err(e) => ControlFlow::Break(e),
            }
        }
        Err(e) => {
            read_error = Some(e);
            ControlFlow::Continue(())
        }
    });
    if let ControlFlow::Break(e) = flow {
        return Err(e);
    }
    read_error.map_or(Ok(()), |e| Err(handler.err(e)))
}

/// The block stream of an amber input.
pub(super) struct AmberBlocks<'a> {
    handler: Amber,
    reader: Option<Reader<'a>>,
    /// The thread of a single file (from its `thread_NNN` name, else 0).
    thread: u64,
    numbers: Numbers,
}

impl<'a> AmberBlocks<'a> {
    pub(super) fn open(
        handler: Amber,
        input: &'a mut Input,
        ctx: &Ctx<'_>,
    ) -> Result<AmberBlocks<'a>, Error> {
        let (reader, thread) = Reader::open(handler, input, ctx)?;
        Ok(AmberBlocks {
            handler,
            reader: Some(reader),
            thread,
            numbers: Numbers::default(),
        })
    }
}

impl Blocks for AmberBlocks<'_> {
    fn keys(&self) -> BlockKeys {
        BlockKeys::Pc
    }

    fn numbered_by_start(&self) -> bool {
        true
    }

    fn run(&mut self, sink: &mut dyn BlockSink) -> Result<(), Error> {
        let Some(reader) = self.reader.take() else {
            return Ok(());
        };
        let (handler, thread) = (self.handler, self.thread);
        if let Reader::Slice(mut records) = reader {
            return slice_runs(&mut records, handler, thread, &mut self.numbers, sink);
        }
        let mut walk = Walk {
            numbers: &mut self.numbers,
            sink,
            open: Vec::new(),
            last: 0,
        };
        // A read error ends the records; the blocks before it are handed out first.
        let mut read_error = None;
        let mut on_read_error = |e| read_error = Some(handler.err(e));
        match reader {
            // Taken above.
            Reader::Slice(_) => {}
            Reader::Stream(mut reader) => {
                while let Some(r) = reader.next_record() {
                    match r {
                        Ok(r) => walk.record(thread, r.index, r.pc)?,
                        Err(e) => {
                            on_read_error(e);
                            break;
                        }
                    }
                }
            }
            Reader::Merged(merge) => {
                for m in merge {
                    match m {
                        Ok(m) => walk.record(m.thread.0, m.seq, m.record.pc)?,
                        Err(e) => {
                            on_read_error(e);
                            break;
                        }
                    }
                }
            }
            Reader::FullSlice(records) => {
                for r in records {
                    match r {
                        Ok(r) => walk.record(0, r.index, r.pc())?,
                        Err(e) => {
                            on_read_error(e);
                            break;
                        }
                    }
                }
            }
            Reader::FullStream(mut reader) => {
                while let Some(r) = reader.next_record() {
                    match r {
                        Ok(r) => walk.record(0, r.index, r.pc())?,
                        Err(e) => {
                            on_read_error(e);
                            break;
                        }
                    }
                }
            }
        }
        walk.finish()?;
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
    use crate::Handler;
    use crate::blocks::StepBlocks;
    use crate::formats::amber::{FULL, TT6, TT6E};
    use crate::schema::testing::{input, testdata};

    /// A block run with its pcs listed: (thread, block start, pcs).
    type Run = (u64, u64, Vec<u64>);

    fn collect(blocks: &mut dyn Blocks) -> (Vec<Run>, Option<String>) {
        let mut runs = Vec::new();
        let mut sink = |r: &BlockRun<'_>| {
            assert_eq!(r.instrs, r.pc_count());
            let pcs = (0..r.pc_count()).map(|k| r.pc_at(k).unwrap()).collect();
            runs.push((r.thread, r.pc.unwrap(), pcs));
            Ok(())
        };
        let e = blocks.run(&mut sink).err().map(|e| e.to_string());
        (runs, e)
    }

    /// The runs (and error) of `handler`'s blocks and of the default over its steps.
    fn both(
        handler: Amber,
        name: &str,
        open: &dyn Fn() -> Input,
    ) -> [(Vec<Run>, Option<String>); 2] {
        let options = crate::Options::default();
        let mut inp = open();
        let mut fast = handler.blocks(&mut inp, &mut Ctx::new(&options)).unwrap();
        let got = collect(fast.as_mut());
        let mut inp = open();
        let steps = handler.steps(&mut inp, &mut Ctx::new(&options)).unwrap();
        let mut default = StepBlocks::new(steps);
        let want = collect(&mut default);
        assert!(!want.0.is_empty(), "{name}");
        [got, want]
    }

    /// The records' blocks are the default's: the same runs, threads and pcs, in the same
    /// order, in memory and streamed, for TT6, TT6E, FULL and a merged directory; and on a
    /// cut file, the runs before the damage, then the same error.
    #[test]
    fn blocks_are_the_defaults() {
        for (name, handler) in [
            ("all-opcodes.tt6", TT6),
            ("all-opcodes.tt6e", TT6E),
            ("escapes.tt6e", TT6E),
            ("example.tt6", TT6),
            ("trap.tt6e", TT6E),
            ("threads/thread_002.tt6", TT6),
            ("full-1004.full", FULL),
            ("full-1008.full", FULL),
        ] {
            let bytes = testdata(&format!("amber/{name}"));
            let base = name.rsplit('/').next().unwrap();
            for gzip in [false, true] {
                let [got, want] = both(handler, name, &|| input(base, &bytes, gzip));
                assert_eq!(got, want, "{name} gzip {gzip}");
                assert!(got.1.is_none());
            }
            let cut = &bytes[..bytes.len() * 2 / 3 + 1];
            for gzip in [false, true] {
                let [got, want] = both(handler, name, &|| input(base, cut, gzip));
                assert_eq!(got, want, "{name} cut, gzip {gzip}");
            }
        }
        let dir =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/amber/threads");
        let [got, want] = both(TT6, "threads", &|| Input::open(dir.as_os_str()).unwrap());
        assert_eq!(got, want);
        let threads: std::collections::BTreeSet<u64> = got.0.iter().map(|r| r.0).collect();
        assert_eq!(threads.len(), 3);
    }

    /// A hand-made TT6 trace: a loop of three instructions run three times, then a
    /// branch into its middle; the blocks are known.
    #[test]
    fn known_blocks() {
        use amber_tt6::{Dialect, Instruction, Tt6Writer};
        const ADDI: u32 = 0x3863_0001;
        const B: u32 = 0x4800_0000;
        let mut w = Tt6Writer::new(Vec::new(), Dialect::Tt6, 0x100).unwrap();
        for _ in 0..3 {
            w.write(&Instruction::compute(ADDI)).unwrap();
            w.write(&Instruction::compute(ADDI)).unwrap();
            w.write(&Instruction::flow(B, 0x100)).unwrap();
        }
        // Into the middle: 0x104, 0x108, then off to 0x200.
        w.write(&Instruction::compute(ADDI)).unwrap();
        w.write(&Instruction::compute(ADDI)).unwrap();
        w.write(&Instruction::flow(B, 0x104)).unwrap();
        w.write(&Instruction::compute(ADDI)).unwrap();
        w.write(&Instruction::flow(B, 0x200)).unwrap();
        w.write(&Instruction::compute(ADDI)).unwrap();
        let bytes = w.finish();
        let options = crate::Options::default();
        let mut inp = input("t.tt6", &bytes, false);
        let mut blocks = TT6.blocks(&mut inp, &mut Ctx::new(&options)).unwrap();
        let (runs, e) = collect(blocks.as_mut());
        assert!(e.is_none());
        let body = vec![0x100, 0x104, 0x108];
        let want: Vec<Run> = vec![
            (0, 0x100, body.clone()),
            (0, 0x100, body.clone()),
            (0, 0x100, body.clone()),
            (0, 0x100, body),
            (0, 0x104, vec![0x104, 0x108]),
            (0, 0x200, vec![0x200]),
        ];
        assert_eq!(runs, want);
        assert_eq!(blocks.describe(1).key, 0x104);
        assert_eq!(blocks.describe(2).pc, Some(0x200));
    }
}
