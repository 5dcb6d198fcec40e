//! The block executions of a DCFG-Trace, through its DCFG (see [`crate::blocks`]): each
//! decoded edge executes its target block's `NUM_INSTRS`; edges into special nodes execute
//! nothing and are not handed out. An edge id the DCFG does not have is an error (the DCFG
//! of another run).
//!
//! The edge → block table is a vector indexed by edge id when the ids are dense enough
//! (Intel numbers them from 1), else a hash map: a lookup per edge is most of the work.

use std::path::Path;

use dcfg_trace::read::Event;

use super::{Events, err};
use crate::Error;
use crate::blocks::{BlockDesc, BlockKeys, BlockRun, Blocks, OnBlock, PcMap};

/// No block: the edge's target is a special node (or not a block of the DCFG).
const NO_BLOCK: u32 = u32::MAX;

/// What an edge executes.
#[derive(Clone, Copy, Debug, Default)]
struct Target {
    /// The block number, or [`NO_BLOCK`].
    block: u32,
    /// Whether the edge id is in the DCFG.
    known: bool,
    /// Whether the edge enters a loop at its head from outside.
    loop_entry: bool,
    /// The target block's `NUM_INSTRS`.
    instrs: u64,
    /// The target block's first address.
    pc: Option<u64>,
}

/// Edge id → [`Target`].
enum EdgeTable {
    /// Indexed by edge id.
    Dense(Vec<Target>),
    /// Sparse ids (another producer's numbering).
    Sparse(PcMap<u64, Target>),
}

impl EdgeTable {
    #[inline]
    fn get(&self, edge: u64) -> Option<Target> {
        let t = match self {
            EdgeTable::Dense(v) => *v.get(usize::try_from(edge).ok()?)?,
            EdgeTable::Sparse(m) => *m.get(&edge)?,
        };
        t.known.then_some(t)
    }
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
    has_loops: bool,
}

impl<'a> DcfgBlocks<'a> {
    /// The blocks of the DCFG at `dcfg`, for the trace read by `events`.
    pub(super) fn open(events: Events<'a>, dcfg: &Path) -> Result<DcfgBlocks<'a>, Error> {
        let d = dcfg::Dcfg::from_path(dcfg).map_err(|e| Error::format("dcfg", e))?;
        let mut descs = Vec::new();
        let mut processes = Vec::new();
        let mut has_loops = false;
        for p in &d.processes {
            let graph = dcfg::Graph::new(&d, p);
            let mut numbers: PcMap<u64, (u32, u64, u64)> = PcMap::default();
            for (img, b) in p.blocks() {
                if numbers.contains_key(&b.id) || graph.is_special_node(b.id) {
                    continue;
                }
                let n = u32::try_from(descs.len())
                    .map_err(|_| Error::Unsupported("the DCFG has more than 2^32 blocks".into()))?;
                let pc = img.load_addr.wrapping_add(b.addr_offset);
                numbers.insert(b.id, (n, u64::from(b.num_instrs), pc));
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
                let (block, instrs, pc) = match numbers.get(&e.target) {
                    Some(&(n, instrs, pc)) => (n, instrs, Some(pc)),
                    None => (NO_BLOCK, 0, None),
                };
                Target {
                    block,
                    known: true,
                    loop_entry: entries.contains_key(&e.id),
                    instrs,
                    pc,
                }
            };
            let count = p.edge_count() as u64;
            let max = p.edges().map(|e| e.id).max().unwrap_or(0);
            // Dense while the table stays within a few times the edge list.
            let edges = if max <= count.saturating_mul(4).saturating_add(1 << 16) {
                let mut v =
                    vec![Target::default(); usize::try_from(max).unwrap_or(0).saturating_add(1)];
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

    fn run(&mut self, on_block: &mut OnBlock<'_>) -> Result<(), Error> {
        let mut buf = Vec::new();
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
            let mut failed: Option<Error> = None;
            let mut seq = 0u64;
            let thread = c.thread;
            let decoded = c.for_each_batch(
                1 << 14,
                |batch| {
                    if failed.is_some() {
                        return;
                    }
                    for &edge in batch {
                        let Some(t) = table.get(edge) else {
                            failed = Some(Error::Invalid {
                                message: format!(
                                    "edge {edge} of process {pid} (thread {thread}, chunk {}, edge {seq} of the chunk) is not in the DCFG (is it the DCFG of another run?) at offset {}",
                                    c.index, c.offset
                                ),
                                offset: Some(c.offset),
                                path: None,
                            });
                            return;
                        };
                        seq = seq.wrapping_add(1);
                        if t.block == NO_BLOCK {
                            continue;
                        }
                        let run = BlockRun {
                            block: t.block,
                            process: pid,
                            thread,
                            pc: t.pc,
                            instrs: t.instrs,
                            pcs: &[],
                            loop_entry: t.loop_entry,
                        };
                        if let Err(e) = on_block(&run) {
                            failed = Some(e);
                            return;
                        }
                    }
                },
                &mut buf,
            );
            if let Some(e) = failed {
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
