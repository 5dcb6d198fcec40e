//! The block executions of a DCFG-Trace, through its DCFG (see [`crate::blocks`]): each
//! decoded edge executes its target block's `NUM_INSTRS`; edges into special nodes execute
//! nothing and are not handed out. An edge id the DCFG does not have is an error (the DCFG
//! of another run).
//!
//! The edge → block table is a vector of 4-byte codes indexed by edge id when the ids are
//! dense enough (Intel numbers them from 1), else a hash map. A chunk is decoded into the
//! codes of its edges' blocks (the decoding loop does only the table look-up and a push),
//! then counted in a second, tight loop with the counters the sink lends
//! ([`StaticCounts`]); the sink sees only the runs those refuse (a block's first run, a
//! slice's end). The chunks of a DCFG-Trace are independent, so with more than one core
//! they are decoded on worker threads, a few chunks ahead, and counted in file order on
//! the calling thread: the slicing and the output are those of one thread.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Mutex, mpsc};

use dcfg_trace::read::{Chunk, Event};

use super::{Events, err};
use crate::Error;
use crate::blocks::{BlockDesc, BlockKeys, BlockSink, Blocks, PcMap, StaticBatch, StaticRun};

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

/// The codes of one chunk's edges on their way to `out`.
struct Walk<'w, 'c, F> {
    chunk: &'w Chunk<'c>,
    out: &'w mut Vec<u32>,
    batch: usize,
    flush: F,
    /// The edges of the chunk so far.
    seq: u64,
    stop: Option<Stop>,
}

impl<F: FnMut(&mut Vec<u32>) -> Result<(), Error>> Walk<'_, '_, F> {
    /// One decoded edge, whose target's code is `code`; `false` stops the decoding.
    #[inline(always)]
    fn edge(&mut self, edge: u64, code: u32) -> bool {
        self.seq = self.seq.wrapping_add(1);
        if code >= UNKNOWN {
            return code == SPECIAL || self.unknown(edge);
        }
        self.out.push(code);
        self.out.len() < self.batch || self.flush()
    }

    #[inline(never)]
    fn flush(&mut self) -> bool {
        match (self.flush)(self.out) {
            Ok(()) => true,
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
    /// nodes) to `out` and handing `out` to `flush` whenever it holds `batch` codes.
    fn walk(
        &self,
        c: &Chunk<'_>,
        out: &mut Vec<u32>,
        batch: usize,
        flush: impl FnMut(&mut Vec<u32>) -> Result<(), Error>,
    ) -> Result<(), Stop> {
        let mut w = Walk {
            chunk: c,
            out,
            batch,
            flush,
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
        let run = |code: u32| {
            let block = code & BLOCK;
            StaticRun {
                block,
                instrs: self.instrs.get(block as usize).copied().unwrap_or(0),
                loop_entry: code & LOOP_ENTRY != 0,
            }
        };
        let mut counts = sink.lend_counts(process, thread)?;
        let mut rest = codes.iter();
        loop {
            let refused = match &mut counts {
                Some(c) => rest.by_ref().map(|&code| run(code)).find(|r| !c.add(r)),
                None => rest.next().map(|&code| run(code)),
            };
            let Some(r) = refused else { break };
            if let Some(c) = counts.take() {
                sink.return_counts(c);
            }
            let batch = StaticBatch {
                process,
                thread,
                runs: std::slice::from_ref(&r),
                pcs: self.pcs,
            };
            sink.static_runs(&batch)?;
            counts = sink.lend_counts(process, thread)?;
        }
        if let Some(c) = counts {
            sink.return_counts(c);
        }
        Ok(())
    }
}

/// A chunk decoded on a worker: its process and thread, its codes, and the input error
/// that cut it short.
struct Decoded {
    process: u64,
    thread: u64,
    codes: Vec<u32>,
    failed: Option<Error>,
}

/// A chunk for a worker: its number in file order, the chunk, its process's table and a
/// buffer for its codes.
type Job<'c> = (u64, Chunk<'c>, usize, Vec<u32>);

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
    let walked = table.walk(c, buf, BATCH, |codes| {
        statics.count(sink, pid, thread, codes)?;
        codes.clear();
        Ok(())
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

/// Decodes the chunks of `jobs` until it closes, sending them to `done`.
fn worker(
    processes: &[ProcessTable],
    jobs: &Mutex<mpsc::Receiver<Job<'_>>>,
    done: &mpsc::Sender<(u64, Decoded)>,
) {
    loop {
        let job = match jobs.lock() {
            Ok(rx) => rx.recv(),
            Err(_) => return,
        };
        let Ok((n, c, at, mut codes)) = job else {
            return;
        };
        let mut failed = None;
        if let Some(p) = processes.get(at) {
            codes.reserve(usize::try_from(c.edge_count).unwrap_or(0));
            let walked = p.edges.walk(&c, &mut codes, usize::MAX, |_| Ok(()));
            if let Err(Stop::Input(e) | Stop::Flush(e)) = walked {
                failed = Some(e);
            }
        }
        let d = Decoded {
            process: c.process.pid,
            thread: c.thread,
            codes,
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
        let mut current = None;
        let mut buf = Vec::new();
        while let Some((c, at)) = next_chunk(&mut self.events, &self.processes, &mut current)? {
            if let Some(p) = self.processes.get(at) {
                walk_here(&c, &p.edges, &statics, sink, &mut buf)?;
            }
        }
        Ok(())
    }

    /// The chunks decoded on worker threads, a few ahead, and counted here in file order;
    /// big chunks decoded here (after the chunks before them).
    fn run_parallel(&mut self, sink: &mut dyn BlockSink) -> Result<(), Error> {
        let DcfgBlocks {
            events,
            processes,
            instrs,
            pcs,
            workers,
            ..
        } = self;
        let (processes, workers) = (&*processes, *workers);
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
                s.spawn(move || worker(processes, jobs, &done));
            }
            drop(done_tx);
            let mut sent = 0u64;
            let mut counted = 0u64;
            let mut early: BTreeMap<u64, Decoded> = BTreeMap::new();
            let mut spare: Vec<Vec<u32>> = Vec::new();
            // Counts the oldest chunk in flight (waiting for it).
            let count_next = |sink: &mut dyn BlockSink,
                              early: &mut BTreeMap<u64, Decoded>,
                              spare: &mut Vec<Vec<u32>>,
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
                statics.count(sink, d.process, d.thread, &d.codes)?;
                let mut codes = d.codes;
                codes.clear();
                spare.push(codes);
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
                let codes = spare.pop().unwrap_or_default();
                if job_tx.send((sent, c, at, codes)).is_err() {
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

    use crate::analyses::bbv::{BbvOptions, bbv};
    use crate::formats::dcfg_trace::dcfg_blocks;
    use crate::{Ctx, Input, Options};

    /// The outputs (streams and map) of `bbv` on `trace` with the DCFG at `dcfg`, decoded
    /// on `workers` threads, and its error.
    fn outputs(trace: &[u8], dcfg: &std::path::Path, workers: usize, o: &BbvOptions) -> String {
        let options = Options {
            dcfg: Some(dcfg.to_path_buf()),
            ..Options::default()
        };
        let mut input = Input::from_bytes("t.trace.json", trace.to_vec()).unwrap();
        let mut ctx = Ctx::new(&options);
        let mut blocks = dcfg_blocks(&mut input, &mut ctx, workers).unwrap();
        // The streams written before an error stay with the sink: keep them.
        let mut written = Vec::new();
        let r = bbv(&mut *blocks, o, |key| {
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
