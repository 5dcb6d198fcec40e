//! The block executions of a DCFG-Trace, through its DCFG (see [`crate::blocks`]): each
//! decoded edge executes its target block's `NUM_INSTRS`; edges into special nodes execute
//! nothing and are not handed out. An edge id the DCFG does not have is an error (the DCFG
//! of another run).
//!
//! The edge → block table is a vector indexed by edge id when the ids are dense enough
//! (Intel numbers them from 1), else a hash map. The edges are walked inside the decoding
//! loop ([`Chunk::for_each_edge`]) and counted there with the counters the sink lends
//! ([`StaticCounts`]): per edge a table look-up and a counter increment, which overlap the
//! decoding's own look-ups. The sink sees only the runs those refuse (a block's first run,
//! a slice's end).

use std::path::Path;

use dcfg_trace::read::{Chunk, Event};

use super::{Events, err};
use crate::Error;
use crate::blocks::{
    BlockDesc, BlockKeys, BlockSink, Blocks, PcMap, StaticBatch, StaticCounts, StaticRun,
};

/// An edge whose target is a special node (or not a block of the DCFG): no block.
const NO_BLOCK: u32 = u32::MAX;
/// An edge id the DCFG does not have.
const UNKNOWN: u32 = u32::MAX - 1;

/// What an edge executes: its target block's run ([`StaticRun`], 12 bytes, so that the
/// table of a large DCFG stays in cache), or [`NO_BLOCK`] or [`UNKNOWN`] as the block.
const UNKNOWN_EDGE: StaticRun = StaticRun {
    block: UNKNOWN,
    instrs: 0,
    loop_entry: false,
};

/// The runs of one chunk's edges on their way to the sink.
struct ChunkWalk<'w, 'c> {
    sink: &'w mut dyn BlockSink,
    /// The counters the sink lent (`None`: it lends none, or they are back with it).
    counts: Option<StaticCounts>,
    /// The error that stopped the walk.
    failed: Option<Error>,
    chunk: &'w Chunk<'c>,
    /// The edges of the chunk so far.
    seq: u64,
    pcs: &'w [u64],
}

impl ChunkWalk<'_, '_> {
    /// One decoded edge, whose target run is `r`; `false` stops the decoding.
    #[inline(always)]
    fn edge(&mut self, edge: u64, r: &StaticRun) -> bool {
        self.seq = self.seq.wrapping_add(1);
        if r.block >= UNKNOWN {
            return r.block == NO_BLOCK || self.unknown(edge);
        }
        if let Some(counts) = &mut self.counts
            && counts.add(r)
        {
            return true;
        }
        self.hand_to_sink(r)
    }

    /// A run the counters refused: to the sink, with the counters given back meanwhile.
    #[inline(never)]
    fn hand_to_sink(&mut self, r: &StaticRun) -> bool {
        let c = self.chunk;
        if let Some(counts) = self.counts.take() {
            self.sink.return_counts(counts);
        }
        let batch = StaticBatch {
            process: c.process.pid,
            thread: c.thread,
            runs: std::slice::from_ref(r),
            pcs: self.pcs,
        };
        let lent = self
            .sink
            .static_runs(&batch)
            .and_then(|()| self.sink.lend_counts(c.process.pid, c.thread));
        match lent {
            Ok(counts) => {
                self.counts = counts;
                true
            }
            Err(e) => {
                self.failed = Some(e);
                false
            }
        }
    }

    /// An edge the DCFG does not have: the error that stops the walk.
    #[cold]
    fn unknown(&mut self, edge: u64) -> bool {
        let c = self.chunk;
        self.failed = Some(Error::Invalid {
            message: format!(
                "edge {edge} of process {} (thread {}, chunk {}, edge {} of the chunk) is not in the DCFG (is it the DCFG of another run?) at offset {}",
                c.process.pid,
                c.thread,
                c.index,
                self.seq.wrapping_sub(1),
                c.offset
            ),
            offset: Some(c.offset),
            path: None,
        });
        false
    }
}

/// Edge id → its [`StaticRun`].
enum EdgeTable {
    /// Indexed by edge id.
    Dense(Vec<StaticRun>),
    /// Sparse ids (another producer's numbering).
    Sparse(PcMap<u64, StaticRun>),
}

/// One process of the DCFG.
struct ProcessTable {
    pid: u64,
    edges: EdgeTable,
}

/// The block stream of a DCFG-Trace with its DCFG.
pub(super) struct DcfgBlocks<'a> {
    events: Events<'a>,
    processes: Vec<ProcessTable>,
    /// Block number → what it is.
    descs: Vec<BlockDesc>,
    /// Block number → its first address.
    pcs: Vec<u64>,
    has_loops: bool,
}

impl<'a> DcfgBlocks<'a> {
    /// The blocks of the DCFG at `dcfg`, for the trace read by `events`.
    pub(super) fn open(events: Events<'a>, dcfg: &Path) -> Result<DcfgBlocks<'a>, Error> {
        let d = dcfg::Dcfg::from_path(dcfg).map_err(|e| Error::format("dcfg", e))?;
        let mut descs = Vec::new();
        let mut pcs = Vec::new();
        let mut processes = Vec::new();
        let mut has_loops = false;
        for p in &d.processes {
            let graph = dcfg::Graph::new(&d, p);
            let mut numbers: PcMap<u64, (u32, u32)> = PcMap::default();
            for (img, b) in p.blocks() {
                if numbers.contains_key(&b.id) || graph.is_special_node(b.id) {
                    continue;
                }
                let n = u32::try_from(descs.len())
                    .ok()
                    .filter(|&n| n < UNKNOWN)
                    .ok_or_else(|| {
                        Error::Unsupported("the DCFG has more than 2^32 - 2 blocks".into())
                    })?;
                let pc = img.load_addr.wrapping_add(b.addr_offset);
                numbers.insert(b.id, (n, b.num_instrs));
                pcs.push(pc);
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
            let target = |e: &dcfg::Edge| {
                let (block, instrs) = numbers.get(&e.target).map_or((NO_BLOCK, 0), |t| (t.0, t.1));
                StaticRun {
                    block,
                    instrs,
                    loop_entry: entries.contains_key(&e.id),
                }
            };
            let count = p.edge_count() as u64;
            let max = p.edges().map(|e| e.id).max().unwrap_or(0);
            // Dense while the table stays within a few times the edge list.
            let edges = if max <= count.saturating_mul(4).saturating_add(1 << 16) {
                let mut v = vec![UNKNOWN_EDGE; usize::try_from(max).unwrap_or(0).saturating_add(1)];
                for e in p.edges() {
                    if let Some(slot) = usize::try_from(e.id).ok().and_then(|i| v.get_mut(i)) {
                        *slot = target(e);
                    }
                }
                EdgeTable::Dense(v)
            } else {
                EdgeTable::Sparse(p.edges().map(|e| (e.id, target(e))).collect())
            };
            processes.push(ProcessTable { pid: p.id, edges });
        }
        Ok(DcfgBlocks {
            events,
            processes,
            descs,
            pcs,
            has_loops,
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
        let mut current: Option<usize> = None;
        for ev in self.events.by_ref() {
            let Event::Chunk(c) = ev.map_err(err)? else {
                continue;
            };
            let pid = c.process.pid;
            let at = match current {
                Some(k) if self.processes.get(k).is_some_and(|p| p.pid == pid) => k,
                _ => self
                    .processes
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
            current = Some(at);
            let Some(table) = self.processes.get(at).map(|p| &p.edges) else {
                continue;
            };
            let mut walk = ChunkWalk {
                sink: &mut *sink,
                counts: None,
                failed: None,
                chunk: &c,
                seq: 0,
                pcs: &self.pcs,
            };
            walk.counts = walk.sink.lend_counts(pid, c.thread)?;
            // One decoding loop per table kind, each with its look-up and count inlined
            // (the closures are too large for the inliner's own choice).
            let decoded = match table {
                EdgeTable::Dense(v) => c.for_each_edge(
                    #[inline(always)]
                    |edge| {
                        let r = usize::try_from(edge).ok().and_then(|i| v.get(i));
                        walk.edge(edge, r.unwrap_or(&UNKNOWN_EDGE))
                    },
                ),
                EdgeTable::Sparse(m) => c.for_each_edge(
                    #[inline(always)]
                    |edge| walk.edge(edge, m.get(&edge).unwrap_or(&UNKNOWN_EDGE)),
                ),
            };
            if let Some(counts) = walk.counts.take() {
                walk.sink.return_counts(counts);
            }
            if let Some(e) = walk.failed {
                return Err(e);
            }
            decoded.map_err(err)?;
        }
        Ok(())
    }

    fn describe(&self, block: u32) -> BlockDesc {
        self.descs.get(block as usize).cloned().unwrap_or_default()
    }
}
