//! The block executions of a DCFG-Trace, through its DCFG (see [`crate::blocks`]): each
//! decoded edge executes its target block's `NUM_INSTRS`; edges into special nodes execute
//! nothing and are not handed out. An edge id the DCFG does not have is an error (the DCFG
//! of another run).
//!
//! The edge → block table is a vector of 4-byte codes indexed by edge id when the ids are
//! dense enough (Intel numbers them from 1), else a hash map. A chunk is decoded into the
//! codes of its edges' blocks, and the same loop counts the runs of each block per piece
//! of [`PIECE`] codes ([`Tallied`]; the counting is off the decoder's chain of dependent
//! loads, so it costs little there). The pieces are then counted in file order with the
//! counters the sink lends ([`StaticCounts`]): a piece that fits in the current slice
//! block by block ([`StaticCounts::add_runs`]: a cost per block run in the piece, not per
//! edge), a piece that may end the slice (and pieces after a slice has reached `N` with
//! `--loop-bounded`) edge by edge; the sink sees only the runs the counters refuse (a
//! block's first run, a slice's end). Inside a slice the order of runs does not change
//! the counts; a piece hands out its blocks' first runs in the order they came, so the
//! blocks are numbered as edge by edge. The chunks of a DCFG-Trace are independent, so with
//! more than one core they are decoded and tallied on worker threads, a few chunks ahead,
//! and counted in file order on the calling thread: the slicing and the output are those
//! of one thread.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Mutex, mpsc};

use dcfg_trace::read::{Chunk, Event};

use super::{Events, err};
use crate::Error;
use crate::blocks::{
    BlockDesc, BlockKeys, BlockSink, Blocks, PcMap, StaticBatch, StaticCounts, StaticRun,
};

/// The code of an edge whose target is a loop head entered from outside the loop.
const LOOP_ENTRY: u32 = 1 << 31;
/// The block number in a code.
const BLOCK: u32 = LOOP_ENTRY - 1;
/// The code of an edge whose target is a special node (or not a block of the DCFG).
const SPECIAL: u32 = u32::MAX;
/// The code of an edge id the DCFG does not have.
const UNKNOWN: u32 = u32::MAX - 1;
/// Block numbers stay below this, so that no code of a block is [`SPECIAL`] or [`UNKNOWN`].
const MAX_BLOCKS: u32 = UNKNOWN & BLOCK;

/// Codes decoded before they are counted, on the calling thread.
const BATCH: usize = 1 << 16;
/// Chunks of more edges than this are decoded and counted on the calling thread, in
/// batches, so that the chunks in flight hold at most this many codes each.
const PARALLEL_EDGES: u64 = 1 << 20;

/// Edge id → the code of its target block.
enum EdgeTable {
    /// Indexed by edge id.
    Dense(Vec<u32>),
    /// Sparse ids (another producer's numbering).
    Sparse(PcMap<u64, u32>),
}

/// Why the walk of a chunk stopped early.
enum Stop {
    /// The flush (the sink) failed.
    Flush(Error),
    /// The input: a decoding error, or an edge the DCFG does not have; the codes of the
    /// edges before it were pushed.
    Input(Error),
}

/// What a walk does with each code besides pushing it: nothing, or a [`Hist`].
trait Tally {
    fn code(&mut self, code: u32);
}

impl Tally for () {
    #[inline(always)]
    fn code(&mut self, _: u32) {}
}

/// The runs per block of the current piece of a chunk, counted in the decoding loop (off
/// its chain of dependent loads, so nearly free) and the blocks in order of first run.
struct Hist {
    /// Block number → its runs in the piece.
    runs: Vec<u32>,
    /// The blocks run in the piece, in order of first run (the first `touched` entries;
    /// room for a whole piece).
    order: Vec<u32>,
    touched: usize,
}

impl Hist {
    fn new(blocks: usize, piece: usize) -> Hist {
        Hist {
            runs: vec![0; blocks],
            order: vec![0; piece.saturating_add(1)],
            touched: 0,
        }
    }

    /// Ends the piece: its (block, runs) pairs to `out`, in order of first run; returns
    /// its instructions (`instrs`: block number → instructions).
    fn close(&mut self, instrs: &[u32], out: &mut Vec<(u32, u32)>) -> u64 {
        let mut total = 0u64;
        for &b in self.order.get(..self.touched).unwrap_or_default() {
            if let Some(r) = self.runs.get_mut(b as usize) {
                let n = std::mem::take(r);
                let i = u64::from(instrs.get(b as usize).copied().unwrap_or(0));
                total = total.saturating_add(i.saturating_mul(u64::from(n)));
                out.push((b, n));
            }
        }
        self.touched = 0;
        total
    }
}

impl Tally for Hist {
    #[inline(always)]
    fn code(&mut self, code: u32) {
        let b = code & BLOCK;
        if let Some(r) = self.runs.get_mut(b as usize) {
            // Branch-free: the store always, the count of blocks only on a first run.
            if let Some(t) = self.order.get_mut(self.touched) {
                *t = b;
            }
            self.touched = self.touched.wrapping_add(usize::from(*r == 0));
            *r = r.wrapping_add(1);
        }
    }
}

/// The codes of one chunk's edges on their way to `out`.
struct Walk<'w, 'c, F, T> {
    chunk: &'w Chunk<'c>,
    out: &'w mut Vec<u32>,
    /// `flush` is called when `out` holds this many codes.
    batch: usize,
    flush: F,
    tally: &'w mut T,
    /// The edges of the chunk so far.
    seq: u64,
    stop: Option<Stop>,
}

impl<F: FnMut(&mut Vec<u32>, &mut T) -> Result<usize, Error>, T: Tally> Walk<'_, '_, F, T> {
    /// One decoded edge, whose target's code is `code`; `false` stops the decoding.
    #[inline(always)]
    fn edge(&mut self, edge: u64, code: u32) -> bool {
        self.seq = self.seq.wrapping_add(1);
        if code >= UNKNOWN {
            return code == SPECIAL || self.unknown(edge);
        }
        self.out.push(code);
        self.tally.code(code);
        self.out.len() < self.batch || self.flush()
    }

    #[inline(never)]
    fn flush(&mut self) -> bool {
        match (self.flush)(self.out, self.tally) {
            Ok(next) => {
                self.batch = next;
                true
            }
            Err(e) => {
                self.stop = Some(Stop::Flush(e));
                false
            }
        }
    }

    /// An edge the DCFG does not have: the error that stops the walk.
    #[cold]
    fn unknown(&mut self, edge: u64) -> bool {
        let c = self.chunk;
        let seq = self.seq.wrapping_sub(1);
        self.stop = Some(Stop::Input(Error::Invalid {
            message: format!(
                "edge {edge} of process {} (thread {}, chunk {}, edge {seq} of the chunk) is not in the DCFG (is it the DCFG of another run?) at offset {}",
                c.process.pid, c.thread, c.index, c.offset
            ),
            offset: Some(c.offset),
            path: None,
        }));
        false
    }
}

impl EdgeTable {
    /// Decodes chunk `c`, pushing the codes of its edges' blocks (not those of special
    /// nodes) to `out`, each also to `tally`, and handing `out` to `flush` whenever it
    /// holds `batch` codes (`flush` returns the next such length).
    fn walk<T: Tally>(
        &self,
        c: &Chunk<'_>,
        out: &mut Vec<u32>,
        batch: usize,
        tally: &mut T,
        flush: impl FnMut(&mut Vec<u32>, &mut T) -> Result<usize, Error>,
    ) -> Result<(), Stop> {
        let mut w = Walk {
            chunk: c,
            out,
            batch,
            flush,
            tally,
            seq: 0,
            stop: None,
        };
        // One decoding loop per table kind, each with its look-up inlined (the closures
        // are too large for the inliner's own choice).
        let decoded = match self {
            EdgeTable::Dense(v) => c.for_each_edge(
                #[inline(always)]
                |e| {
                    let code = usize::try_from(e).ok().and_then(|i| v.get(i));
                    w.edge(e, code.copied().unwrap_or(UNKNOWN))
                },
            ),
            EdgeTable::Sparse(m) => c.for_each_edge(
                #[inline(always)]
                |e| w.edge(e, m.get(&e).copied().unwrap_or(UNKNOWN)),
            ),
        };
        match w.stop {
            Some(s) => Err(s),
            None => decoded.map_err(|e| Stop::Input(err(e))),
        }
    }
}

/// One process of the DCFG.
struct ProcessTable {
    pid: u64,
    edges: EdgeTable,
}

/// What the runs of a chunk are counted with: block number → instructions and first
/// address.
struct Statics<'s> {
    instrs: &'s [u32],
    pcs: &'s [u64],
}

/// A chunk's codes and, per piece of them, the runs of each block in the piece: counted on
/// the thread that decoded the chunk, so that the calling thread adds a piece inside a
/// slice block by block rather than edge by edge.
#[derive(Debug, Default)]
struct Tallied {
    codes: Vec<u32>,
    pieces: Vec<Piece>,
    /// (block, runs) of every piece, each piece's in order of first run.
    pairs: Vec<(u32, u32)>,
}

/// One piece of a [`Tallied`] chunk: where its codes and pairs end, and its instructions.
#[derive(Clone, Copy, Debug)]
struct Piece {
    codes: usize,
    pairs: usize,
    instrs: u64,
}

impl Tallied {
    /// Ends the current piece (nothing if it has no codes).
    fn close(&mut self, hist: &mut Hist, instrs: &[u32]) {
        if self.pieces.last().map_or(0, |p| p.codes) == self.codes.len() {
            return;
        }
        let n = hist.close(instrs, &mut self.pairs);
        self.pieces.push(Piece {
            codes: self.codes.len(),
            pairs: self.pairs.len(),
            instrs: n,
        });
    }
}

/// Decodes chunk `c` into `t`, in pieces of `piece` codes (0: no pieces, codes only);
/// returns the input error that cut it short (the codes before it are in `t`).
fn tally_chunk(
    c: &Chunk<'_>,
    table: &EdgeTable,
    instrs: &[u32],
    hist: &mut Hist,
    piece: usize,
    t: &mut Tallied,
) -> Option<Error> {
    t.codes.clear();
    t.pieces.clear();
    t.pairs.clear();
    t.codes.reserve(usize::try_from(c.edge_count).unwrap_or(0));
    let walked = if piece == 0 {
        table.walk(c, &mut t.codes, usize::MAX, &mut (), |_, _| Ok(usize::MAX))
    } else {
        let Tallied {
            codes,
            pieces,
            pairs,
        } = t;
        let walked = table.walk(c, codes, piece, hist, |codes, hist| {
            let n = hist.close(instrs, pairs);
            pieces.push(Piece {
                codes: codes.len(),
                pairs: pairs.len(),
                instrs: n,
            });
            Ok(codes.len().saturating_add(piece))
        });
        t.close(hist, instrs);
        walked
    };
    match walked {
        Err(Stop::Input(e) | Stop::Flush(e)) => Some(e),
        Ok(()) => None,
    }
}

impl Statics<'_> {
    /// Hands the runs of `codes` (of `process` and `thread`) to `sink`: counted with the
    /// counters it lends, the runs those refuse through [`BlockSink::static_runs`].
    fn count(
        &self,
        sink: &mut dyn BlockSink,
        process: u64,
        thread: u64,
        codes: &[u32],
    ) -> Result<(), Error> {
        let mut counts = sink.lend_counts(process, thread)?;
        self.count_codes(sink, process, thread, &mut counts, codes)?;
        if let Some(c) = counts {
            sink.return_counts(c);
        }
        Ok(())
    }

    /// As [`Statics::count`] with the counters lent (`None`: none lent), which it leaves
    /// lent.
    fn count_codes(
        &self,
        sink: &mut dyn BlockSink,
        process: u64,
        thread: u64,
        counts: &mut Option<StaticCounts>,
        codes: &[u32],
    ) -> Result<(), Error> {
        let run = |code: u32| {
            let block = code & BLOCK;
            StaticRun {
                block,
                instrs: self.instrs.get(block as usize).copied().unwrap_or(0),
                loop_entry: code & LOOP_ENTRY != 0,
            }
        };
        let mut rest = codes.iter();
        loop {
            let refused = match counts {
                Some(c) => rest.by_ref().map(|&code| run(code)).find(|r| !c.add(r)),
                None => rest.next().map(|&code| run(code)),
            };
            let Some(r) = refused else { break };
            self.refused(sink, process, thread, counts, &r)?;
        }
        Ok(())
    }

    /// Hands run `r`, which the counters refused (or none were lent), to the sink.
    fn refused(
        &self,
        sink: &mut dyn BlockSink,
        process: u64,
        thread: u64,
        counts: &mut Option<StaticCounts>,
        r: &StaticRun,
    ) -> Result<(), Error> {
        if let Some(c) = counts.take() {
            sink.return_counts(c);
        }
        let batch = StaticBatch {
            process,
            thread,
            runs: std::slice::from_ref(r),
            pcs: self.pcs,
        };
        sink.static_runs(&batch)?;
        *counts = sink.lend_counts(process, thread)?;
        Ok(())
    }

    /// Hands the runs of a [`Tallied`] chunk to `sink`: each piece that fits in the
    /// current slice block by block ([`StaticCounts::add_runs`]; a block's first run in
    /// the stream through the sink, in the piece's order of first runs, which numbers the
    /// blocks as the edges in order would), the others edge by edge.
    fn count_tallied(
        &self,
        sink: &mut dyn BlockSink,
        process: u64,
        thread: u64,
        t: &Tallied,
    ) -> Result<(), Error> {
        let mut counts = sink.lend_counts(process, thread)?;
        let (mut code0, mut pair0) = (0, 0);
        for p in &t.pieces {
            if counts.as_ref().is_some_and(|c| p.instrs < c.room()) {
                for &(block, runs) in t.pairs.get(pair0..p.pairs).unwrap_or_default() {
                    self.add_runs(sink, process, thread, &mut counts, block, runs)?;
                }
            } else {
                let codes = t.codes.get(code0..p.codes).unwrap_or_default();
                self.count_codes(sink, process, thread, &mut counts, codes)?;
            }
            (code0, pair0) = (p.codes, p.pairs);
        }
        let rest = t.codes.get(code0..).unwrap_or_default();
        self.count_codes(sink, process, thread, &mut counts, rest)?;
        if let Some(c) = counts {
            sink.return_counts(c);
        }
        Ok(())
    }

    /// Counts `runs` runs of `block` within the room of the current slice: the block's
    /// first run in the stream through the sink.
    fn add_runs(
        &self,
        sink: &mut dyn BlockSink,
        process: u64,
        thread: u64,
        counts: &mut Option<StaticCounts>,
        block: u32,
        runs: u32,
    ) -> Result<(), Error> {
        let instrs = self.instrs.get(block as usize).copied().unwrap_or(0);
        if counts
            .as_mut()
            .is_some_and(|c| c.add_runs(block, instrs, u64::from(runs)))
        {
            return Ok(());
        }
        // Within the room, a run ends no slice, so whether it enters a loop is moot.
        let r = StaticRun {
            block,
            instrs,
            loop_entry: false,
        };
        self.refused(sink, process, thread, counts, &r)?;
        let rest = runs.saturating_sub(1);
        if rest == 0
            || counts
                .as_mut()
                .is_some_and(|c| c.add_runs(block, instrs, u64::from(rest)))
        {
            return Ok(());
        }
        for _ in 0..rest {
            if !counts.as_mut().is_some_and(|c| c.add(&r)) {
                self.refused(sink, process, thread, counts, &r)?;
            }
        }
        Ok(())
    }
}

/// A chunk decoded on a worker: its process and thread, its codes, and the input error
/// that cut it short.
struct Decoded {
    process: u64,
    thread: u64,
    tallied: Tallied,
    failed: Option<Error>,
}

/// A chunk for a worker: its number in file order, the chunk, its process's table and a
/// buffer for its codes.
type Job<'c> = (u64, Chunk<'c>, usize, Tallied);

/// Codes per piece of a chunk counted block by block ([`Tallied`]): small against the
/// slices of 1 M–100 M instructions that SimPoint uses (a piece crossing a slice's end is
/// counted edge by edge), large against the blocks run in it.
const PIECE: usize = 4096;

/// The block stream of a DCFG-Trace with its DCFG.
pub(super) struct DcfgBlocks<'a> {
    events: Events<'a>,
    processes: Vec<ProcessTable>,
    /// Block number → what it is.
    descs: Vec<BlockDesc>,
    /// Block number → its first address.
    pcs: Vec<u64>,
    /// Block number → its instructions.
    instrs: Vec<u32>,
    has_loops: bool,
    /// Threads decoding chunks (1: all on the calling thread).
    workers: usize,
    /// Codes per piece of a chunk ([`PIECE`]; 0: every edge counted on its own).
    piece: usize,
}

impl<'a> DcfgBlocks<'a> {
    /// The blocks of the DCFG at `dcfg`, for the trace read by `events`, decoded on
    /// `workers` threads (1: on the calling thread).
    pub(super) fn open(
        events: Events<'a>,
        dcfg: &Path,
        workers: usize,
    ) -> Result<DcfgBlocks<'a>, Error> {
        let d = dcfg::Dcfg::from_path(dcfg).map_err(|e| Error::format("dcfg", e))?;
        let mut descs = Vec::new();
        let mut pcs = Vec::new();
        let mut instrs = Vec::new();
        let mut processes = Vec::new();
        let mut has_loops = false;
        for p in &d.processes {
            let graph = dcfg::Graph::new(&d, p);
            let mut numbers: PcMap<u64, u32> = PcMap::default();
            for (img, b) in p.blocks() {
                if numbers.contains_key(&b.id) || graph.is_special_node(b.id) {
                    continue;
                }
                let n = u32::try_from(descs.len())
                    .ok()
                    .filter(|&n| n < MAX_BLOCKS)
                    .ok_or_else(|| {
                        Error::Unsupported("the DCFG has more than 2^31 - 2 blocks".into())
                    })?;
                let pc = img.load_addr.wrapping_add(b.addr_offset);
                numbers.insert(b.id, n);
                pcs.push(pc);
                instrs.push(b.num_instrs);
                descs.push(BlockDesc {
                    process: p.id,
                    key: b.id,
                    pc: Some(pc),
                    instrs: Some(u64::from(b.num_instrs)),
                    symbol: graph.block_symbol(b.id).map(|(s, off)| {
                        if off == 0 {
                            s.to_owned()
                        } else {
                            format!("{s}+{off:#x}")
                        }
                    }),
                });
            }
            // Loop entries: edges into a loop's head from outside the loop (returns come
            // back from a call made inside it: not an entry).
            let mut entries: PcMap<u64, ()> = PcMap::default();
            for (_, _, l) in graph.loops() {
                has_loops = true;
                for e in graph.loop_entry_edges(l.head) {
                    if e.target == l.head {
                        entries.insert(e.id, ());
                    }
                }
            }
            let code = |e: &dcfg::Edge| match numbers.get(&e.target) {
                Some(&n) if entries.contains_key(&e.id) => n | LOOP_ENTRY,
                Some(&n) => n,
                None => SPECIAL,
            };
            let count = p.edge_count() as u64;
            let max = p.edges().map(|e| e.id).max().unwrap_or(0);
            // Dense while the table stays within a few times the edge list.
            let edges = if max <= count.saturating_mul(4).saturating_add(1 << 16) {
                let mut v = vec![UNKNOWN; usize::try_from(max).unwrap_or(0).saturating_add(1)];
                for e in p.edges() {
                    if let Some(slot) = usize::try_from(e.id).ok().and_then(|i| v.get_mut(i)) {
                        *slot = code(e);
                    }
                }
                EdgeTable::Dense(v)
            } else {
                EdgeTable::Sparse(p.edges().map(|e| (e.id, code(e))).collect())
            };
            processes.push(ProcessTable { pid: p.id, edges });
        }
        Ok(DcfgBlocks {
            events,
            processes,
            descs,
            pcs,
            instrs,
            has_loops,
            workers: workers.max(1),
            piece: PIECE,
        })
    }
}

/// The next chunk of `events` and the index of its process in `processes`; `None` at the
/// end.
fn next_chunk<'c>(
    events: &mut Events<'c>,
    processes: &[ProcessTable],
    current: &mut Option<usize>,
) -> Result<Option<(Chunk<'c>, usize)>, Error> {
    for ev in events.by_ref() {
        let Event::Chunk(c) = ev.map_err(err)? else {
            continue;
        };
        let pid = c.process.pid;
        let at = match *current {
            Some(k) if processes.get(k).is_some_and(|p| p.pid == pid) => k,
            _ => processes
                .iter()
                .position(|p| p.pid == pid)
                .ok_or_else(|| Error::Invalid {
                    message: format!(
                        "process {pid} of the trace is not in the DCFG (is it the DCFG of another run?) at offset {}",
                        c.offset
                    ),
                    offset: Some(c.offset),
                    path: None,
                })?,
        };
        *current = Some(at);
        return Ok(Some((c, at)));
    }
    Ok(None)
}

/// Decodes and counts chunk `c` (of the process with `table`) on the calling thread, in
/// batches of [`BATCH`] codes.
fn walk_here(
    c: &Chunk<'_>,
    table: &EdgeTable,
    statics: &Statics<'_>,
    sink: &mut dyn BlockSink,
    buf: &mut Vec<u32>,
) -> Result<(), Error> {
    let (pid, thread) = (c.process.pid, c.thread);
    buf.clear();
    let walked = table.walk(c, buf, BATCH, &mut (), |codes, _| {
        statics.count(sink, pid, thread, codes)?;
        codes.clear();
        Ok(BATCH)
    });
    match walked {
        Err(Stop::Flush(e)) => Err(e),
        Err(Stop::Input(e)) => {
            statics.count(sink, pid, thread, buf)?;
            Err(e)
        }
        Ok(()) => statics.count(sink, pid, thread, buf),
    }
}

/// What the workers share: the processes' tables, block number → instructions, and the
/// codes per piece.
#[derive(Clone, Copy)]
struct Shared<'s> {
    processes: &'s [ProcessTable],
    instrs: &'s [u32],
    piece: usize,
}

/// Decodes the chunks of `jobs` until it closes, sending them to `done`.
fn worker(
    s: Shared<'_>,
    jobs: &Mutex<mpsc::Receiver<Job<'_>>>,
    done: &mpsc::Sender<(u64, Decoded)>,
) {
    let mut hist = Hist::new(s.instrs.len(), s.piece);
    loop {
        let job = match jobs.lock() {
            Ok(rx) => rx.recv(),
            Err(_) => return,
        };
        let Ok((n, c, at, mut tallied)) = job else {
            return;
        };
        let failed = s
            .processes
            .get(at)
            .and_then(|p| tally_chunk(&c, &p.edges, s.instrs, &mut hist, s.piece, &mut tallied));
        let d = Decoded {
            process: c.process.pid,
            thread: c.thread,
            tallied,
            failed,
        };
        if done.send((n, d)).is_err() {
            return;
        }
    }
}

impl DcfgBlocks<'_> {
    /// Every chunk decoded and counted on the calling thread.
    fn run_here(&mut self, sink: &mut dyn BlockSink) -> Result<(), Error> {
        let statics = Statics {
            instrs: &self.instrs,
            pcs: &self.pcs,
        };
        let piece = self.piece;
        let mut hist = Hist::new(self.instrs.len(), piece);
        let mut tallied = Tallied::default();
        let mut current = None;
        let mut buf = Vec::new();
        while let Some((c, at)) = next_chunk(&mut self.events, &self.processes, &mut current)? {
            let Some(p) = self.processes.get(at) else {
                continue;
            };
            if piece == 0 || c.edge_count > PARALLEL_EDGES {
                walk_here(&c, &p.edges, &statics, sink, &mut buf)?;
                continue;
            }
            let failed = tally_chunk(&c, &p.edges, statics.instrs, &mut hist, piece, &mut tallied);
            statics.count_tallied(sink, c.process.pid, c.thread, &tallied)?;
            if let Some(e) = failed {
                return Err(e);
            }
        }
        Ok(())
    }

    /// The chunks decoded and tallied on worker threads, a few ahead, and counted here in
    /// file order; big chunks decoded here (after the chunks before them).
    fn run_parallel(&mut self, sink: &mut dyn BlockSink) -> Result<(), Error> {
        let DcfgBlocks {
            events,
            processes,
            instrs,
            pcs,
            workers,
            piece,
            ..
        } = self;
        let (processes, workers) = (&*processes, *workers);
        let shared = Shared {
            processes,
            instrs,
            piece: *piece,
        };
        let statics = Statics { instrs, pcs };
        let (job_tx, job_rx) = mpsc::channel::<Job<'_>>();
        let jobs = Mutex::new(job_rx);
        let (done_tx, done_rx) = mpsc::channel();
        // Chunks in flight: enough to keep every worker busy while this thread counts.
        let window = workers.saturating_mul(4) as u64;
        std::thread::scope(|s| {
            // Dropped when this closure returns, which ends the workers.
            let job_tx = job_tx;
            for _ in 0..workers {
                let done = done_tx.clone();
                let jobs = &jobs;
                s.spawn(move || worker(shared, jobs, &done));
            }
            drop(done_tx);
            let mut sent = 0u64;
            let mut counted = 0u64;
            let mut early: BTreeMap<u64, Decoded> = BTreeMap::new();
            let mut spare: Vec<Tallied> = Vec::new();
            // Counts the oldest chunk in flight (waiting for it).
            let count_next = |sink: &mut dyn BlockSink,
                              early: &mut BTreeMap<u64, Decoded>,
                              spare: &mut Vec<Tallied>,
                              counted: &mut u64|
             -> Result<(), Error> {
                let d = loop {
                    if let Some(d) = early.remove(counted) {
                        break d;
                    }
                    let (n, d) = done_rx.recv().map_err(|_| {
                        Error::Unsupported("a DCFG-Trace decoding worker stopped".into())
                    })?;
                    early.insert(n, d);
                };
                *counted = counted.saturating_add(1);
                statics.count_tallied(sink, d.process, d.thread, &d.tallied)?;
                spare.push(d.tallied);
                d.failed.map_or(Ok(()), Err)
            };
            let mut current = None;
            let mut buf = Vec::new();
            loop {
                // A read error comes after the chunks before it.
                let next = next_chunk(events, processes, &mut current);
                let Ok(Some((c, at))) = next else {
                    while counted < sent {
                        count_next(sink, &mut early, &mut spare, &mut counted)?;
                    }
                    return next.map(drop);
                };
                if c.edge_count > PARALLEL_EDGES {
                    while counted < sent {
                        count_next(sink, &mut early, &mut spare, &mut counted)?;
                    }
                    if let Some(p) = processes.get(at) {
                        walk_here(&c, &p.edges, &statics, sink, &mut buf)?;
                    }
                    continue;
                }
                let tallied = spare.pop().unwrap_or_default();
                if job_tx.send((sent, c, at, tallied)).is_err() {
                    return Err(Error::Unsupported(
                        "the DCFG-Trace decoding workers stopped".into(),
                    ));
                }
                sent = sent.saturating_add(1);
                while sent.saturating_sub(counted) >= window {
                    count_next(sink, &mut early, &mut spare, &mut counted)?;
                }
            }
        })
    }
}

impl Blocks for DcfgBlocks<'_> {
    fn keys(&self) -> BlockKeys {
        BlockKeys::DcfgNode
    }

    fn has_loops(&self) -> bool {
        self.has_loops
    }

    fn processes(&self) -> Option<usize> {
        Some(self.processes.len())
    }

    fn run(&mut self, sink: &mut dyn BlockSink) -> Result<(), Error> {
        if self.workers > 1 {
            self.run_parallel(sink)
        } else {
            self.run_here(sink)
        }
    }

    fn describe(&self, block: u32) -> BlockDesc {
        self.descs.get(block as usize).cloned().unwrap_or_default()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::arithmetic_side_effects)]
mod tests {
    use dcfg_trace::encode::{EncodeOptions, ProcessEdges, ThreadEdges, encode};
    use dcfg_trace::synth::{Cfg, dcfg_json};

    use std::path::PathBuf;
    use std::sync::OnceLock;

    use super::{DcfgBlocks, PIECE};
    use crate::formats::dcfg_trace::events;
    use crate::{Ctx, Input, Options};
    use trace_analyses::bbv::{BbvOptions, bbv};

    /// The outputs (streams and map) of `bbv` on `trace` with the DCFG at `dcfg`, decoded
    /// on `workers` threads, and its error.
    fn outputs(trace: &[u8], dcfg: &std::path::Path, workers: usize, o: &BbvOptions) -> String {
        outputs_in_pieces(trace, dcfg, workers, PIECE, o)
    }

    /// As [`outputs`], chunks counted in pieces of `piece` codes (0: edge by edge).
    fn outputs_in_pieces(
        trace: &[u8],
        dcfg: &std::path::Path,
        workers: usize,
        piece: usize,
        o: &BbvOptions,
    ) -> String {
        let options = Options {
            dcfg: Some(dcfg.to_path_buf()),
            ..Options::default()
        };
        let mut input = Input::from_bytes("t.trace.json", trace.to_vec()).unwrap();
        let ctx = Ctx::new(&options);
        let mut blocks = DcfgBlocks::open(events(&mut input, &ctx), dcfg, workers).unwrap();
        blocks.piece = piece;
        // The streams written before an error stay with the sink: keep them.
        let mut written = Vec::new();
        let r = bbv(&mut blocks, o, |key| {
            written.push(key);
            Ok(Vec::new())
        });
        match r {
            Ok(r) => format!(
                "{:?}\n{:?}",
                r.streams
                    .iter()
                    .map(|s| (s.key, String::from_utf8_lossy(&s.out).into_owned()))
                    .collect::<Vec<_>>(),
                r.map
            ),
            Err(e) => format!("{written:?} {e}"),
        }
    }

    /// Chunks counted in pieces (block by block where a piece fits in the slice) give
    /// what counting edge by edge gives: random walks of two threads, chunk sizes, slice
    /// sizes (small ones end slices inside pieces), pieces of 1 to 64 codes, per thread
    /// and global, on one and two workers, and with a DCFG without one of the edges.
    #[test]
    fn pieces_count_as_edges_one_by_one() {
        static DCFGS: OnceLock<(PathBuf, PathBuf)> = OnceLock::new();
        DCFGS.get_or_init(|| {
            let cfg = Cfg::new(64, 1);
            let instrs = |e| cfg.instrs_of(e);
            let dir = std::env::temp_dir().join(format!("tk-dcfgt-pieces-{}", std::process::id()));
            std::fs::create_dir_all(&dir).unwrap();
            let whole = dir.join("whole.dcfg.json");
            std::fs::write(&whole, dcfg_json(&[(7, 64, &instrs)], None)).unwrap();
            let short = dir.join("short.dcfg.json");
            std::fs::write(&short, dcfg_json(&[(7, 64, &instrs)], Some(9))).unwrap();
            (whole, short)
        });
        fn prop(
            len: (u16, u16),
            seed: u8,
            chunk: u16,
            slice: u16,
            piece: u8,
            (big, global, two, short): (bool, bool, bool, bool),
        ) -> bool {
            let (whole, short_dcfg) = DCFGS.get().unwrap();
            let cfg = Cfg::new(64, 1);
            let trace = encode(
                &[ProcessEdges {
                    pid: 7,
                    threads: vec![
                        ThreadEdges {
                            thread: 0,
                            edges: cfg.walk(usize::from(len.0 % 3000), u64::from(seed)),
                        },
                        ThreadEdges {
                            thread: 2,
                            edges: cfg.walk(usize::from(len.1 % 500), u64::from(seed) + 1),
                        },
                    ],
                }],
                |_, e| cfg.instrs_of(e),
                &EncodeOptions {
                    chunk_instrs: u64::from(chunk % 3000) + 1,
                    ..EncodeOptions::default()
                },
            )
            .to_vec();
            let o = BbvOptions {
                slice: if big {
                    u64::from(slice) + 1
                } else {
                    u64::from(slice % 300) + 1
                },
                global,
                loop_bounded: false,
            };
            let dcfg = if short { short_dcfg } else { whole };
            let edges = outputs_in_pieces(&trace, dcfg, 1, 0, &o);
            let piece = usize::from(piece % 64) + 1;
            let workers = if two { 2 } else { 1 };
            edges == outputs_in_pieces(&trace, dcfg, workers, piece, &o)
        }
        // 200 cases unless QUICKCHECK_TESTS asks for more.
        let tests = trace_core::rng::property_cases(200);
        quickcheck::QuickCheck::new()
            .tests(tests)
            .quickcheck(prop as fn((u16, u16), u8, u16, u16, u8, (bool, bool, bool, bool)) -> bool);
    }

    /// Chunks decoded on workers give what one thread gives: two processes' threads of
    /// many small chunks, slices from 1 instruction to more than the trace, per thread and
    /// global, and a DCFG without one of the edges (the same error, after the same streams).
    #[test]
    fn workers_write_what_one_thread_writes() {
        let cfg = Cfg::new(64, 1);
        let instrs = |e| cfg.instrs_of(e);
        let trace = encode(
            &[
                ProcessEdges {
                    pid: 7,
                    threads: vec![
                        ThreadEdges {
                            thread: 0,
                            edges: cfg.walk(20_000, 2),
                        },
                        ThreadEdges {
                            thread: 3,
                            edges: cfg.walk(5_000, 3),
                        },
                    ],
                },
                ProcessEdges {
                    pid: 9,
                    threads: vec![ThreadEdges {
                        thread: 1,
                        edges: cfg.walk(3_000, 4),
                    }],
                },
            ],
            |_, e| cfg.instrs_of(e),
            &EncodeOptions {
                chunk_instrs: 700,
                ..EncodeOptions::default()
            },
        )
        .to_vec();
        let dir = std::env::temp_dir().join(format!("tk-dcfgt-workers-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let whole = dir.join("whole.dcfg.json");
        std::fs::write(
            &whole,
            dcfg_json(&[(7, 64, &instrs), (9, 64, &instrs)], None),
        )
        .unwrap();
        let short = dir.join("short.dcfg.json");
        std::fs::write(
            &short,
            dcfg_json(&[(7, 64, &instrs), (9, 64, &instrs)], Some(5)),
        )
        .unwrap();
        for dcfg in [&whole, &short] {
            for slice in [1, 37, 1_000, 1 << 40] {
                for global in [false, true] {
                    let o = BbvOptions {
                        slice,
                        global,
                        loop_bounded: false,
                    };
                    let one = outputs(&trace, dcfg, 1, &o);
                    let expected = if dcfg == &whole {
                        "T:"
                    } else {
                        "not in the DCFG"
                    };
                    assert!(one.contains(expected), "{one}");
                    for workers in [2, 3] {
                        assert_eq!(one, outputs(&trace, dcfg, workers, &o), "{slice} {global}");
                    }
                }
            }
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}
