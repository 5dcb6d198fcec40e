//! Joining a trace with its DCFG (specification section 3: "given the sequence of edge-ids
//! and the corresponding DCFG, the sequence of basic-blocks … can be reconstructed").
//!
//! This crate does not depend on the `dcfg` crate: the join is defined over plain data,
//! [`JoinProcess`] (edge id → [`EdgeInfo`]), which a caller fills from any DCFG reader (the
//! `tracekit` CLI fills it from the `dcfg` crate's model).
//!
//! - [`JoinProcess::blocks`]: edges → target basic blocks (the executed block sequence),
//!   with their addresses and symbols in [`EdgeInfo`].
//! - [`check`]: per chunk, `INSTR_COUNT` recomputed as the sum of the instructions of the
//!   source blocks of the chunk's edges (section 3.7) and compared; per edge and thread,
//!   the executions in the whole decoded trace compared with the DCFG's
//!   `COUNT_PER_THREAD` (an exact match is expected when the whole run was traced and
//!   chunks partition the edges; a trace whose chunks repeat the boundary edge shows one
//!   extra execution per boundary, which this comparison reveals).

use std::collections::{BTreeMap, HashMap};
use std::fmt;

use crate::error::Error;
use crate::read::Trace;

/// What the join needs to know about one edge of a process's DCFG.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EdgeInfo {
    /// `SOURCE_NODE_ID`.
    pub source: u64,
    /// `TARGET_NODE_ID`.
    pub target: u64,
    /// `NUM_INSTRS` of the source block (0 for the special nodes).
    pub source_instrs: u64,
    /// Address of the target block's first instruction, if it is a block.
    pub target_addr: Option<u64>,
    /// Symbol (and offset into it) of the target block, if known.
    pub target_symbol: Option<(String, u64)>,
    /// `COUNT_PER_THREAD`, thread 0 first.
    pub counts_per_thread: Vec<u64>,
}

/// A DCFG process, reduced to what the join needs.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct JoinProcess {
    /// `PROCESS_ID`.
    pub pid: u64,
    /// The edges by id.
    pub edges: HashMap<u64, EdgeInfo>,
}

/// An edge id of the trace that the DCFG does not have.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("edge {edge} of the trace is not in the DCFG's process {pid}")]
pub struct UnknownEdge {
    /// `PROCESS_ID`.
    pub pid: u64,
    /// The edge.
    pub edge: u64,
}

impl JoinProcess {
    /// The target block of every edge, in order.
    ///
    /// # Errors
    ///
    /// The first edge the DCFG does not have.
    pub fn blocks(&self, edges: &[u64]) -> Result<Vec<u64>, UnknownEdge> {
        edges
            .iter()
            .map(|e| {
                self.edges.get(e).map(|i| i.target).ok_or(UnknownEdge {
                    pid: self.pid,
                    edge: *e,
                })
            })
            .collect()
    }

    /// `INSTR_COUNT` of a chunk recomputed from its edges (unknown edges count 0).
    #[must_use]
    pub fn instr_count(&self, edges: &[u64]) -> u64 {
        edges
            .iter()
            .map(|e| self.edges.get(e).map_or(0, |i| i.source_instrs))
            .fold(0, u64::saturating_add)
    }
}

/// A disagreement between a trace and its DCFG.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Mismatch {
    /// The trace has a process the DCFG does not.
    MissingProcess {
        /// `PROCESS_ID`.
        pid: u64,
    },
    /// Edges of a chunk the DCFG does not have.
    UnknownEdge {
        /// `PROCESS_ID`.
        pid: u64,
        /// `THREAD_ID`.
        thread: u64,
        /// Chunk index.
        chunk: u64,
        /// The first unknown edge of the chunk.
        edge: u64,
    },
    /// `INSTR_COUNT` differs from the sum over the chunk's edges' source blocks.
    InstrCount {
        /// `PROCESS_ID`.
        pid: u64,
        /// `THREAD_ID`.
        thread: u64,
        /// Chunk index.
        chunk: u64,
        /// `INSTR_COUNT` in the trace.
        trace: u64,
        /// Recomputed from the DCFG.
        computed: u64,
    },
    /// An edge's executions in the decoded thread differ from `COUNT_PER_THREAD`.
    EdgeCount {
        /// `PROCESS_ID`.
        pid: u64,
        /// `THREAD_ID`.
        thread: u64,
        /// The edge.
        edge: u64,
        /// The DCFG's count.
        dcfg: u64,
        /// Occurrences in the trace.
        trace: u64,
    },
}

impl fmt::Display for Mismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Mismatch::MissingProcess { pid } => write!(f, "process {pid} is not in the DCFG"),
            Mismatch::UnknownEdge {
                pid,
                thread,
                chunk,
                edge,
            } => write!(
                f,
                "process {pid} thread {thread} chunk {chunk}: edge {edge} is not in the DCFG"
            ),
            Mismatch::InstrCount {
                pid,
                thread,
                chunk,
                trace,
                computed,
            } => write!(
                f,
                "process {pid} thread {thread} chunk {chunk}: INSTR_COUNT {trace}, but its edges' source blocks have {computed} instructions"
            ),
            Mismatch::EdgeCount {
                pid,
                thread,
                edge,
                dcfg,
                trace,
            } => write!(
                f,
                "process {pid} thread {thread}: edge {edge} executed {trace} times in the trace, COUNT_PER_THREAD says {dcfg}"
            ),
        }
    }
}

/// The result of [`check`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct JoinReport {
    /// Chunks checked.
    pub chunks: u64,
    /// Edges decoded.
    pub edges: u64,
    /// Every disagreement, in file order (per-edge counts last, by edge id).
    pub mismatches: Vec<Mismatch>,
}

/// Decodes every chunk of `trace` (on `workers` threads) and compares it with `dcfg`
/// (processes by pid).
///
/// # Errors
///
/// The first chunk that does not decode.
pub fn check(trace: &Trace<'_>, dcfg: &[JoinProcess], workers: usize) -> Result<JoinReport, Error> {
    let mut report = JoinReport::default();
    for p in &trace.processes {
        let pid = p.process.pid;
        let Some(model) = dcfg.iter().find(|m| m.pid == pid) else {
            report.mismatches.push(Mismatch::MissingProcess { pid });
            continue;
        };
        for t in &p.threads {
            let per_chunk = t.map_parallel(workers, |c, r| {
                r.map(|edges| {
                    let mut counts: HashMap<u64, u64> = HashMap::new();
                    for &e in edges {
                        let n = counts.entry(e).or_insert(0);
                        *n = n.saturating_add(1);
                    }
                    let unknown = edges.iter().find(|e| !model.edges.contains_key(e)).copied();
                    (
                        c.index,
                        c.instr_count,
                        model.instr_count(edges),
                        edges.len() as u64,
                        counts,
                        unknown,
                    )
                })
            });
            let mut totals: BTreeMap<u64, u64> = BTreeMap::new();
            for r in per_chunk {
                let (chunk, trace_instrs, computed, n, counts, unknown) = r?;
                report.chunks = report.chunks.saturating_add(1);
                report.edges = report.edges.saturating_add(n);
                if let Some(edge) = unknown {
                    report.mismatches.push(Mismatch::UnknownEdge {
                        pid,
                        thread: t.thread,
                        chunk,
                        edge,
                    });
                }
                if computed != trace_instrs {
                    report.mismatches.push(Mismatch::InstrCount {
                        pid,
                        thread: t.thread,
                        chunk,
                        trace: trace_instrs,
                        computed,
                    });
                }
                for (e, n) in counts {
                    let c = totals.entry(e).or_insert(0);
                    *c = c.saturating_add(n);
                }
            }
            let mut ids: Vec<u64> = model.edges.keys().copied().collect();
            ids.sort_unstable();
            let th = usize::try_from(t.thread).unwrap_or(usize::MAX);
            for e in ids {
                let dcfg_count = model
                    .edges
                    .get(&e)
                    .and_then(|i| i.counts_per_thread.get(th))
                    .copied()
                    .unwrap_or(0);
                let trace_count = totals.get(&e).copied().unwrap_or(0);
                if dcfg_count != trace_count {
                    report.mismatches.push(Mismatch::EdgeCount {
                        pid,
                        thread: t.thread,
                        edge: e,
                        dcfg: dcfg_count,
                        trace: trace_count,
                    });
                }
            }
        }
    }
    Ok(report)
}
