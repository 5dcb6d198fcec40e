//! The block-execution view of a trace: one [`BlockRun`] per execution of a basic block,
//! in file order, what basic-block vectors (`tracekit bbv`,
//! `trace_analyses::bbv`) are made of.
//!
//! [`Handler::blocks`](crate::Handler::blocks) returns it. By default it is derived from
//! the instruction stream ([`StepBlocks`], for x64dbg, amber TT6/TT6E/FULL, Tenet and GDB
//! tracepoint frames): a dynamic block starts at a thread's first instruction and after
//! every control transfer, and its key is its start pc. A thread's next instruction
//! continues its block when its pc is the previous pc plus the instruction's length:
//!
//! - the length of the recorded opcode bytes (x64dbg, amber: PowerPC words are 4 bytes);
//! - PowerPC streams without opcode bytes: 4;
//! - x86 streams without opcode bytes (Tenet traces record none): the stream falls through
//!   when the next pc is 1 to 15 bytes (the longest x86 instruction) past the previous one.
//!   A jump that short is then taken for a fall-through, which merges two blocks (rare:
//!   a short jump over one short instruction).
//!
//! Blocks of different threads may interleave in the file; each thread's blocks are
//! followed separately and a block is handed out when it ends (when its thread's next
//! instruction does not continue it, or at the end of the input).
//!
//! Amber TT6/TT6E/FULL traces override it with the same blocks read straight from their
//! records (no [`Step`] per instruction; the pcs as [`Pcs::Stride`]; one TT6/TT6E file in
//! memory as its runs of falling-through records), x64dbg traces in memory with the same
//! blocks from the lean pc walk (pc, opcode length and thread, no register replay).
//! DCFG-Trace files
//! override it with the blocks of their DCFG (`--dcfg`): each decoded edge executes its
//! target block's `NUM_INSTRS`; edges into special nodes (START, END, UNKNOWN) execute none
//! and are not handed out. Their runs come in batches ([`StaticBatch`]), as one call per
//! block would cost more than decoding the edge.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

use crate::Error;
use crate::steps::{Isa, ScanQuery, Step, Steps};

/// The pcs of a block execution's instructions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pcs<'a> {
    /// Not known: the stream records no pcs inside a block (DCFG-Trace).
    Unknown,
    /// Every instruction's pc, in order (one per instruction executed).
    Listed(&'a [u64]),
    /// Evenly spaced from the block's first pc ([`BlockRun::pc`]): instruction `k` is at
    /// `pc + k × stride` (PowerPC's 4-byte words), so a stream need not list them.
    Stride(u64),
}

/// One execution of a basic block.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BlockRun<'a> {
    /// The block, as a small dense number of this stream (from 0, in the order the stream
    /// first meets it; the same block always gets the same number):
    /// [`Blocks::describe`] says which block it is.
    pub block: u32,
    /// The process (0 where the format has none).
    pub process: u64,
    /// The thread (0 where the format has none).
    pub thread: u64,
    /// The address of the block's first instruction, where known (always with
    /// [`Pcs::Stride`]).
    pub pc: Option<u64>,
    /// The instructions executed.
    pub instrs: u64,
    /// The pc of every instruction executed, where the stream knows them (pc streams).
    pub pcs: Pcs<'a>,
    /// Whether the block heads a loop and was entered from outside the loop, at its first
    /// address (not through a back edge): LoopPoint's region boundaries. Only streams with
    /// a loop table ([`Blocks::has_loops`]) set it.
    pub loop_entry: bool,
}

impl BlockRun<'_> {
    /// Whether the run's pcs are known.
    #[inline]
    #[must_use]
    pub fn has_pcs(&self) -> bool {
        !matches!(self.pcs, Pcs::Unknown)
    }

    /// The pcs known: the instructions executed with listed or evenly spaced pcs, else 0.
    #[inline]
    #[must_use]
    pub fn pc_count(&self) -> u64 {
        match self.pcs {
            Pcs::Unknown => 0,
            Pcs::Listed(p) => p.len() as u64,
            Pcs::Stride(_) => self.instrs,
        }
    }

    /// The pc of instruction `k` of the run, where known.
    #[inline]
    #[must_use]
    pub fn pc_at(&self, k: u64) -> Option<u64> {
        match self.pcs {
            Pcs::Unknown => None,
            Pcs::Listed(p) => p.get(usize::try_from(k).ok()?).copied(),
            Pcs::Stride(stride) => (k < self.instrs)
                .then(|| self.pc.map(|pc| pc.wrapping_add(k.wrapping_mul(stride))))
                .flatten(),
        }
    }
}

/// One execution of a block whose instruction count is fixed (a DCFG's `NUM_INSTRS`),
/// handed out in bulk ([`StaticBatch`]): what most of a DCFG-Trace's edges come to.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StaticRun {
    /// The block number (as [`BlockRun::block`]).
    pub block: u32,
    /// Its instruction count: the same in every run of the block.
    pub instrs: u32,
    /// As [`BlockRun::loop_entry`].
    pub loop_entry: bool,
}

/// Consecutive executions of static blocks in one thread, without pcs: one call of
/// [`BlockSink::static_runs`] for many blocks, rather than one call per block.
#[derive(Clone, Copy, Debug)]
pub struct StaticBatch<'a> {
    /// The process (0 where the format has none).
    pub process: u64,
    /// The thread.
    pub thread: u64,
    /// The executions, in order.
    pub runs: &'a [StaticRun],
    /// Block number → the address of its first instruction (at least every block of
    /// `runs`).
    pub pcs: &'a [u64],
}

impl StaticBatch<'_> {
    /// The run `r` of the batch as a [`BlockRun`].
    #[must_use]
    pub fn block_run(&self, r: &StaticRun) -> BlockRun<'static> {
        BlockRun {
            block: r.block,
            process: self.process,
            thread: self.thread,
            pc: self.pcs.get(r.block as usize).copied(),
            instrs: u64::from(r.instrs),
            pcs: Pcs::Unknown,
            loop_entry: r.loop_entry,
        }
    }
}

/// The counters of one output stream's current slice for static blocks, which a
/// [`BlockSink`] lends ([`BlockSink::lend_counts`]) to a block stream so that the stream
/// counts most runs in its own decoding loop, with [`StaticCounts::add`], rather than
/// hand each to the sink.
#[derive(Clone, Debug, Default)]
pub struct StaticCounts {
    /// Block number → its runs in the current slice, or [`StaticCounts::UNSEEN`] for a
    /// block the sink must see first.
    pub execs: Vec<u64>,
    /// The block numbers run in the current slice.
    pub touched: Vec<u32>,
    /// The instructions of the current slice.
    pub total: u64,
    /// The slice size: a slice that reached it may end before the next run.
    pub slice: u64,
    /// Whether slices end only before loop entries.
    pub bounded: bool,
}

impl StaticCounts {
    /// The count of a block without runs in this stream yet.
    pub const UNSEEN: u64 = u64::MAX;

    /// Counts `r` when that is all it takes: `false` when the sink must see it (through
    /// [`BlockSink::static_runs`], after [`BlockSink::return_counts`]): the first run of
    /// a block in the stream, or a run that may end the slice.
    #[inline(always)]
    pub fn add(&mut self, r: &StaticRun) -> bool {
        if self.total >= self.slice && (!self.bounded || r.loop_entry) {
            return false;
        }
        let Some(e) = self.execs.get_mut(r.block as usize) else {
            return false;
        };
        match *e {
            0 => self.touched.push(r.block),
            Self::UNSEEN => return false,
            _ => {}
        }
        *e = e.wrapping_add(1);
        self.total = self.total.saturating_add(u64::from(r.instrs));
        true
    }

    /// The instructions the current slice can still take with no run refused for the
    /// slice's sake: runs adding up to less than this (in any order, through
    /// [`StaticCounts::add_runs`] or [`StaticCounts::add`]) leave the slice open.
    #[inline]
    #[must_use]
    pub fn room(&self) -> u64 {
        self.slice.saturating_sub(self.total)
    }

    /// Counts `runs` runs of block `block` of `instrs` instructions each at once, when
    /// that is all it takes: `false` (nothing counted) when the sink must see one of them
    /// (the block's first run in the stream) or when they would fill the
    /// [`room`](StaticCounts::room) left. Runs of several blocks counted so, each call
    /// within the room, count as those runs one by one in any order would.
    #[inline]
    pub fn add_runs(&mut self, block: u32, instrs: u32, runs: u64) -> bool {
        let n = u64::from(instrs).saturating_mul(runs);
        if n >= self.room() {
            return false;
        }
        let Some(e) = self.execs.get_mut(block as usize) else {
            return false;
        };
        match *e {
            0 => self.touched.push(block),
            Self::UNSEEN => return false,
            _ => {}
        }
        *e = e.saturating_add(runs);
        self.total = self.total.saturating_add(n);
        true
    }
}

/// What [`Blocks::run`] hands the block executions to.
pub trait BlockSink {
    /// One block execution.
    ///
    /// # Errors
    ///
    /// The sink's own (an output that fails, a limit): the stream stops with it.
    fn block(&mut self, run: &BlockRun<'_>) -> Result<(), Error>;

    /// Many executions of static blocks; the default hands them to [`BlockSink::block`]
    /// one by one.
    ///
    /// # Errors
    ///
    /// As [`BlockSink::block`].
    fn static_runs(&mut self, batch: &StaticBatch<'_>) -> Result<(), Error> {
        for r in batch.runs {
            self.block(&batch.block_run(r))?;
        }
        Ok(())
    }

    /// Lends the slice counters of the output stream of `process` and `thread`, for the
    /// stream to count static runs with [`StaticCounts::add`]; the runs those refuse go
    /// to [`BlockSink::static_runs`], after [`BlockSink::return_counts`]. No other call
    /// may come between the lending and the return. The default lends none (every run
    /// goes to [`BlockSink::static_runs`]).
    ///
    /// # Errors
    ///
    /// As [`BlockSink::block`] (the stream's output cannot be opened).
    fn lend_counts(&mut self, process: u64, thread: u64) -> Result<Option<StaticCounts>, Error> {
        let _ = (process, thread);
        Ok(None)
    }

    /// Takes back the counters [`BlockSink::lend_counts`] lent.
    fn return_counts(&mut self, counts: StaticCounts) {
        let _ = counts;
    }
}

impl<F: FnMut(&BlockRun<'_>) -> Result<(), Error>> BlockSink for F {
    fn block(&mut self, run: &BlockRun<'_>) -> Result<(), Error> {
        self(run)
    }
}

/// What a block number of a [`Blocks`] stream stands for.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BlockDesc {
    /// The process.
    pub process: u64,
    /// The block's key: its start pc (pc streams) or its DCFG node id.
    pub key: u64,
    /// The address of its first instruction, where known.
    pub pc: Option<u64>,
    /// Its static instruction count where the stream knows it (a DCFG's `NUM_INSTRS`);
    /// `None` for dynamic blocks, whose length may vary from run to run.
    pub instrs: Option<u64>,
    /// The symbol (and offset) of its first instruction, where known (`main+0x10`).
    pub symbol: Option<String>,
}

impl BlockDesc {
    /// A dynamic block of a pc stream (process 0) starting at `start`: its key and pc.
    #[must_use]
    pub fn starting_at(start: u64) -> BlockDesc {
        BlockDesc {
            key: start,
            pc: Some(start),
            ..BlockDesc::default()
        }
    }
}

/// What the keys of a [`Blocks`] stream are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BlockKeys {
    /// Start pcs of dynamic blocks.
    Pc,
    /// DCFG basic-block (node) ids.
    DcfgNode,
}

/// A stream of block executions (see the module docs).
pub trait Blocks {
    /// What the blocks' keys are.
    fn keys(&self) -> BlockKeys;

    /// Whether the stream knows loops ([`BlockRun::loop_entry`] can be set): a DCFG-Trace
    /// whose DCFG has a loop table.
    fn has_loops(&self) -> bool {
        false
    }

    /// The processes of the input, where known before the run (a DCFG-Trace's DCFG).
    fn processes(&self) -> Option<usize> {
        None
    }

    /// Whether the block numbers are given in order of first execution (of a block's
    /// start), as opposed to the order of [`BlockRun`]s. Runs are handed out when they end,
    /// so where threads interleave, a block may end after blocks that started later;
    /// [`StepBlocks`] numbers blocks when they start, and says so here.
    fn numbered_by_start(&self) -> bool {
        false
    }

    /// Hands every block execution to `sink`, in file order. Call it once.
    ///
    /// # Errors
    ///
    /// A read error (after every block before it was handed out), or the sink's error.
    fn run(&mut self, sink: &mut dyn BlockSink) -> Result<(), Error>;

    /// What block number `block` (of a [`BlockRun`] handed out) stands for.
    fn describe(&self, block: u32) -> BlockDesc;
}

/// A multiplicative hasher for `u64` keys (pcs): the block map is looked up once per block
/// execution, where SipHash would cost more than the rest of the work.
#[derive(Clone, Copy, Debug, Default)]
pub struct PcHasher(u64);

impl Hasher for PcHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(*b)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        }
    }

    fn write_u64(&mut self, n: u64) {
        // Fibonacci hashing; the high bits, which hashbrown uses for its tags, mix all of n.
        self.0 = (self.0 ^ n)
            .wrapping_mul(0x9e37_79b9_7f4a_7c15)
            .rotate_left(26);
    }

    fn write_u32(&mut self, n: u32) {
        self.write_u64(u64::from(n));
    }
}

/// A `HashMap` with [`PcHasher`].
pub type PcMap<K, V> = HashMap<K, V, BuildHasherDefault<PcHasher>>;

/// Start pc → block number, and back: dynamic blocks numbered in order of first start.
#[derive(Debug, Default)]
pub struct Numbers {
    numbers: PcMap<u64, u32>,
    /// Block number → start pc.
    starts: Vec<u64>,
}

impl Numbers {
    /// The number of the block starting at `start`, given on first sight.
    #[inline]
    pub fn of(&mut self, start: u64) -> u32 {
        let next = u32::try_from(self.starts.len()).unwrap_or(u32::MAX);
        let starts = &mut self.starts;
        *self.numbers.entry(start).or_insert_with(|| {
            starts.push(start);
            next
        })
    }

    /// What block number `block` stands for.
    pub fn describe(&self, block: u32) -> BlockDesc {
        BlockDesc::starting_at(self.starts.get(block as usize).copied().unwrap_or(0))
    }

    /// How many blocks are numbered.
    fn len(&self) -> usize {
        self.starts.len()
    }
}

/// The block of one thread being followed.
#[derive(Debug, Default)]
struct Open {
    thread: u64,
    /// The index of its first instruction (to hand out the blocks still open at the end
    /// in the order they started).
    first: u64,
    /// Its pcs so far (empty: no block open).
    pcs: Vec<u64>,
    /// Its block number.
    block: u32,
    /// The length of its last instruction (0: not recorded).
    last_len: u64,
}

impl Open {
    /// Hands out the block, if one is open, and empties it.
    fn emit(&mut self, sink: &mut dyn BlockSink) -> Result<(), Error> {
        let Some(&start) = self.pcs.first() else {
            return Ok(());
        };
        let run = BlockRun {
            block: self.block,
            process: 0,
            thread: self.thread,
            pc: Some(start),
            instrs: self.pcs.len() as u64,
            pcs: Pcs::Listed(&self.pcs),
            loop_entry: false,
        };
        let r = sink.block(&run);
        self.pcs.clear();
        r
    }
}

/// Follows every thread's dynamic block over a pc stream, instruction by instruction (see
/// the module docs): what [`StepBlocks`] does with the steps, and a format's walk without a
/// [`Step`] per instruction (x64dbg) with the same results.
#[derive(Debug)]
pub struct Follow {
    isa: Isa,
    /// Per thread the block being followed.
    open: Vec<Open>,
    /// Thread → its slot in `open`.
    slots: PcMap<u64, usize>,
    /// The slot of the last instruction's thread (traces switch threads rarely).
    last: usize,
}

impl Follow {
    /// Nothing followed yet, in a stream of `isa`.
    pub fn new(isa: Isa) -> Follow {
        Follow {
            isa,
            open: Vec::new(),
            slots: PcMap::default(),
            last: 0,
        }
    }

    /// Instruction `i` of `thread` at `pc` with `len` opcode bytes (0: not recorded):
    /// continues its thread's block, or hands that out to `sink` and starts the next
    /// (numbered by `numbers`).
    ///
    /// # Errors
    ///
    /// The sink's.
    #[inline]
    pub fn instruction(
        &mut self,
        numbers: &mut Numbers,
        sink: &mut dyn BlockSink,
        thread: u64,
        i: u64,
        pc: u64,
        len: u64,
    ) -> Result<(), Error> {
        let at = match self.open.get(self.last) {
            Some(o) if o.thread == thread => self.last,
            _ => self.slot(thread),
        };
        let Some(o) = self.open.get_mut(at) else {
            return Ok(());
        };
        let continues = o
            .pcs
            .last()
            .is_some_and(|&last| falls_through(self.isa, last, o.last_len, pc));
        if !continues {
            o.emit(sink)?;
            o.first = i;
            o.block = numbers.of(pc);
        }
        o.pcs.push(pc);
        o.last_len = len;
        Ok(())
    }

    /// The slot of `thread` in `open` (a new one for a new thread), remembered as the last.
    #[cold]
    fn slot(&mut self, thread: u64) -> usize {
        let open = &mut self.open;
        let at = *self.slots.entry(thread).or_insert_with(|| {
            open.push(Open {
                thread,
                ..Open::default()
            });
            open.len().saturating_sub(1)
        });
        self.last = at;
        at
    }

    /// Hands out the blocks still open, in the order they started.
    ///
    /// # Errors
    ///
    /// The sink's.
    pub fn finish(mut self, sink: &mut dyn BlockSink) -> Result<(), Error> {
        self.open.sort_by_key(|o| o.first);
        for o in &mut self.open {
            o.emit(sink)?;
        }
        Ok(())
    }
}

/// The default block stream: dynamic blocks of an instruction stream (see the module
/// docs).
pub struct StepBlocks<'a> {
    steps: Box<dyn Steps + 'a>,
    numbers: Numbers,
}

impl std::fmt::Debug for StepBlocks<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StepBlocks")
            .field("blocks", &self.numbers.len())
            .finish_non_exhaustive()
    }
}

impl<'a> StepBlocks<'a> {
    /// The dynamic blocks of `steps`.
    #[must_use]
    pub fn new(steps: Box<dyn Steps + 'a>) -> Self {
        StepBlocks {
            steps,
            numbers: Numbers::default(),
        }
    }
}

/// Whether an instruction at `next` continues the block whose last instruction is at `pc`
/// with `len` bytes (0: not recorded) in a stream of `isa`.
#[inline]
#[must_use]
pub fn falls_through(isa: Isa, pc: u64, len: u64, next: u64) -> bool {
    if len != 0 {
        return next == pc.wrapping_add(len);
    }
    match isa {
        Isa::Ppc32 => next == pc.wrapping_add(4),
        // The longest x86 instruction is 15 bytes.
        _ => next.wrapping_sub(pc).wrapping_sub(1) < 15,
    }
}

impl Blocks for StepBlocks<'_> {
    fn keys(&self) -> BlockKeys {
        BlockKeys::Pc
    }

    fn numbered_by_start(&self) -> bool {
        true
    }

    fn run(&mut self, sink: &mut dyn BlockSink) -> Result<(), Error> {
        let mut follow = Follow::new(self.steps.isa());
        let numbers = &mut self.numbers;
        let query = ScanQuery {
            all: true,
            ..ScanQuery::default()
        };
        let scanned = self.steps.scan(&query, &mut |step: &Step| {
            let len = step.opcode.len() as u64;
            follow.instruction(numbers, sink, step.thread, step.i, step.pc, len)
        });
        // The blocks still open, in the order they started (also after a read error: the
        // blocks before the damage are handed out first).
        follow.finish(sink)?;
        scanned
    }

    fn describe(&self, block: u32) -> BlockDesc {
        self.numbers.describe(block)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fall_through_rules() {
        // Recorded lengths decide.
        assert!(falls_through(Isa::X64, 0x1000, 3, 0x1003));
        assert!(!falls_through(Isa::X64, 0x1000, 3, 0x1004));
        assert!(falls_through(Isa::X64, u64::MAX, 1, 0));
        // PowerPC words.
        assert!(falls_through(Isa::Ppc32, 0x1000, 0, 0x1004));
        assert!(!falls_through(Isa::Ppc32, 0x1000, 0, 0x1008));
        // x86 without bytes: 1 to 15 bytes on.
        assert!(falls_through(Isa::X64, 0x1000, 0, 0x1001));
        assert!(falls_through(Isa::X86, 0x1000, 0, 0x100f));
        assert!(!falls_through(Isa::X64, 0x1000, 0, 0x1010));
        assert!(!falls_through(Isa::X64, 0x1000, 0, 0x1000));
        assert!(!falls_through(Isa::X64, 0x1000, 0, 0xfff));
    }

    #[test]
    fn pc_hasher_spreads_neighbours() {
        let h = |n: u64| {
            let mut s = PcHasher::default();
            s.write_u64(n);
            s.finish()
        };
        assert_ne!(h(0x1000), h(0x1004));
        assert_ne!(h(0x1000) >> 57, h(0x1001) >> 57);
    }
}
