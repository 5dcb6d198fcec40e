//! Deterministic synthetic traces for fixtures, tests and benchmarks (not a stable API).
//!
//! A synthetic control-flow graph of `n` edges (ids 1..=n): each edge has 1 successor
//! (30%), 2 (50%, often skewed like a loop branch), 3–4 (15%) or 5–16 (5%, like an
//! indirect branch or a return), and a source block of 1–12 instructions. A random walk
//! over it is encoded with the Huffman codes of the successor weights, directly into
//! chunks, so traces of any size are made without holding their edges.

use crate::base64::BitWriter;
use crate::encode::{canonical_codes, huffman_lengths};
use crate::table::{Code, TransitionRow};
use crate::write::{ChunkData, ProcessData, ThreadData, TraceFile};
use trace_core::rng::SplitMix64;

/// SplitMix64 from trace-core, with this generator's own reduction to a range (modulo),
/// which the committed fixtures were made with.
#[derive(Clone, Debug)]
pub struct Rng(SplitMix64);

impl Rng {
    /// A generator whose state is `seed`.
    #[must_use]
    pub fn new(seed: u64) -> Rng {
        Rng(SplitMix64::from_state(seed))
    }
    /// The next value.
    pub fn next_u64(&mut self) -> u64 {
        self.0.next_u64()
    }
    /// A value below `n` (0 when `n` is 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64().checked_rem(n).unwrap_or(0)
    }
}

/// A synthetic control-flow graph over edge ids `1..=n`.
#[derive(Clone, Debug)]
pub struct Cfg {
    /// Successors of edge `i + 1`: (edge id, weight).
    pub succ: Vec<Vec<(u64, u64)>>,
    /// Instructions of the source block of edge `i + 1`.
    pub instrs: Vec<u64>,
    /// Codes of `succ`, in the same order.
    pub codes: Vec<Vec<Code>>,
}

impl Cfg {
    /// A graph of `n` ≥ 1 edges.
    #[must_use]
    pub fn new(n: u64, seed: u64) -> Cfg {
        let n = n.max(1);
        let mut rng = Rng::new(seed);
        let mut succ = Vec::new();
        let mut instrs = Vec::new();
        for e in 1..=n {
            // Mostly local control flow, like compiled code: fall-through to the next edge,
            // loop back-edges a few edges back (taken 9 times in 10), short forward jumps;
            // and a few far jumps (calls, returns, indirect branches).
            let near = |rng: &mut Rng, span: u64| -> u64 {
                let d = 1 + rng.below(span);
                if rng.below(2) == 0 {
                    (e + d - 1) % n + 1
                } else {
                    (e + n - d % n - 1) % n + 1
                }
            };
            let r = rng.below(100);
            let k = match r {
                0..30 => 1,
                30..80 => 2,
                80..95 => 3 + rng.below(2),
                _ => 5 + rng.below(12),
            };
            let mut s: Vec<(u64, u64)> = Vec::new();
            let mut tries = 0;
            while (s.len() as u64) < k.min(n) && tries < 1000 {
                tries += 1;
                let (cand, w) = match (k, s.len()) {
                    (1, _) => (e % n + 1, 1),
                    (2, 0) => (near(&mut rng, 16), if rng.below(3) == 0 { 1 } else { 9 }),
                    (2, _) => (e % n + 1, 1),
                    (3 | 4, _) => (near(&mut rng, 64), 1 + rng.below(4)),
                    _ => (1 + rng.below(n), 1 + rng.below(4)),
                };
                if !s.iter().any(|&(x, _)| x == cand) {
                    s.push((cand, w));
                }
            }
            s.sort_unstable();
            succ.push(s);
            instrs.push(1 + rng.below(12));
        }
        let codes = succ
            .iter()
            .map(|s| {
                canonical_codes(&huffman_lengths(
                    &s.iter().map(|x| x.1).collect::<Vec<_>>(),
                    32,
                ))
            })
            .collect();
        Cfg {
            succ,
            instrs,
            codes,
        }
    }

    /// The transition table rows.
    #[must_use]
    pub fn rows(&self) -> Vec<TransitionRow> {
        let mut rows = Vec::new();
        for (i, (s, c)) in self.succ.iter().zip(&self.codes).enumerate() {
            for (&(e, _), &code) in s.iter().zip(c) {
                rows.push(TransitionRow {
                    current: i as u64 + 1,
                    code,
                    next: vec![e],
                });
            }
        }
        rows
    }

    /// Instructions of edge `e`'s source block.
    #[must_use]
    pub fn instrs_of(&self, e: u64) -> u64 {
        self.instrs
            .get((e as usize).wrapping_sub(1))
            .copied()
            .unwrap_or(0)
    }

    /// One step of the walk from `cur`: the successor's index.
    fn step(&self, cur: u64, rng: &mut Rng) -> usize {
        let s = self
            .succ
            .get((cur as usize).wrapping_sub(1))
            .map_or(&[][..], Vec::as_slice);
        let total: u64 = s.iter().map(|x| x.1).sum();
        let mut r = rng.below(total);
        for (i, &(_, w)) in s.iter().enumerate() {
            if r < w {
                return i;
            }
            r -= w;
        }
        0
    }

    /// A random walk of `len` edges from edge 1.
    #[must_use]
    pub fn walk(&self, len: usize, seed: u64) -> Vec<u64> {
        let mut rng = Rng::new(seed);
        let mut cur = 1u64;
        let mut out = Vec::with_capacity(len);
        for _ in 0..len {
            out.push(cur);
            let i = self.step(cur, &mut rng);
            cur = self
                .succ
                .get((cur as usize).wrapping_sub(1))
                .and_then(|s| s.get(i))
                .map_or(1, |x| x.0);
        }
        out
    }

    /// A trace of one thread walking the graph, encoded with the graph's codes into
    /// chunks of about `chunk_instrs` instructions, until `max_edges` edges or about
    /// `target_bytes` of sequence text.
    #[must_use]
    pub fn trace(
        &self,
        max_edges: u64,
        target_bytes: u64,
        chunk_instrs: u64,
        seed: u64,
    ) -> TraceFile {
        let mut rng = Rng::new(seed);
        let mut chunks = Vec::new();
        let (mut edges, mut bytes, mut preceding) = (0u64, 0u64, 0u64);
        let mut cur = 1u64;
        while edges < max_edges && bytes < target_bytes {
            let first = cur;
            let mut w = BitWriter::default();
            let mut icount = self.instrs_of(first);
            let mut n = 1u64;
            let mut next;
            loop {
                let i = self.step(cur, &mut rng);
                let idx = (cur as usize).wrapping_sub(1);
                next = self.succ.get(idx).and_then(|s| s.get(i)).map_or(1, |x| x.0);
                if icount >= chunk_instrs || edges + n >= max_edges {
                    break;
                }
                let code = self
                    .codes
                    .get(idx)
                    .and_then(|c| c.get(i))
                    .copied()
                    .unwrap_or_default();
                w.push(code.right(), u32::from(code.len));
                icount += self.instrs_of(next);
                n += 1;
                cur = next;
            }
            let sequence = w.finish();
            bytes += sequence.len() as u64;
            chunks.push(ChunkData {
                preceding_instr_count: preceding,
                instr_count: icount,
                edge_count: n,
                first_edge_id: Some(first),
                sequence,
            });
            preceding += icount;
            edges += n;
            cur = next;
        }
        TraceFile {
            major: 1,
            minor: 0,
            processes: vec![ProcessData {
                pid: 4242,
                dictionary: Vec::new(),
                transitions: self.rows(),
                threads: vec![ThreadData { thread: 0, chunks }],
            }],
        }
    }
}

/// A trace whose sequences are nested repeats (for the expander benchmark): every chunk
/// is `(A*(B*xyz…)…)` over a one-edge self-loop with the zero-bit code, so it decodes
/// whatever the characters; about `target_bytes` of sequence text.
#[must_use]
pub fn repeat_trace(target_bytes: u64, seed: u64) -> TraceFile {
    let mut rng = Rng::new(seed);
    let mut chunks = Vec::new();
    let mut bytes = 0u64;
    while bytes < target_bytes {
        let mut s = String::new();
        for _ in 0..64 {
            let unit: String = (0..1 + rng.below(6))
                .map(|_| char::from(crate::base64::char_of(rng.next_u64() as u8)))
                .collect();
            let inner = 2 + rng.below(30);
            let outer = 2 + rng.below(8);
            s.push_str(&format!("({outer}*A({inner}*{unit})B)"));
        }
        bytes += s.len() as u64;
        chunks.push(ChunkData {
            preceding_instr_count: 0,
            instr_count: 0,
            edge_count: 2,
            first_edge_id: Some(1),
            sequence: s,
        });
    }
    TraceFile {
        major: 1,
        minor: 0,
        processes: vec![ProcessData {
            pid: 1,
            dictionary: Vec::new(),
            transitions: vec![TransitionRow {
                current: 1,
                code: Code::EMPTY,
                next: vec![1],
            }],
            threads: vec![ThreadData { thread: 0, chunks }],
        }],
    }
}

/// A process of [`dcfg_json`]: its pid, its edge count `n`, and the instructions of each
/// edge's block.
pub type DcfgProcess<'a> = (u64, u64, &'a dyn Fn(u64) -> u64);

/// A DCFG (JSON text) for synthetic traces such as [`Cfg::trace`]'s: per process, edge `e`
/// (1..=n, except `omit`) runs from and to block `100 + e`, which has `instrs(e)`
/// instructions (the counts the synthetic chunks are made with, so the target blocks of a
/// chunk's edges sum to its `INSTR_COUNT`), at `0x400000 + 0x40·e`. No loops.
#[must_use]
pub fn dcfg_json(procs: &[DcfgProcess<'_>], omit: Option<u64>) -> String {
    let mut p = Vec::new();
    for (pid, n, instrs) in procs {
        let blocks: Vec<String> = (1..=*n)
            .map(|e| format!("[{}, \"{:#x}\", 4, {}]", 100 + e, 0x40 * e, instrs(e)))
            .collect();
        let edges: Vec<String> = (1..=*n)
            .filter(|e| Some(*e) != omit)
            .map(|e| format!("[{e}, {}, {}, 18, [1]]", 100 + e, 100 + e))
            .collect();
        p.push(format!(
            "[{pid}, {{\"IMAGES\": [[\"IMAGE_ID\", \"LOAD_ADDR\", \"SIZE\", \"IMAGE_DATA\"], [1, \"0x400000\", 1048576, {{\"BASIC_BLOCKS\": [[\"NODE_ID\", \"ADDR_OFFSET\", \"SIZE\", \"NUM_INSTRS\"], {}]}}]], \"EDGES\": [[\"EDGE_ID\", \"SOURCE_NODE_ID\", \"TARGET_NODE_ID\", \"EDGE_TYPE_ID\", \"COUNT_PER_THREAD\"], {}]}}]",
            blocks.join(", "),
            edges.join(", ")
        ));
    }
    format!(
        "{{\"MAJOR_VERSION\": 1, \"MINOR_VERSION\": 0, \"EDGE_TYPES\": [[\"EDGE_TYPE_ID\", \"EDGE_TYPE\"], [18, \"FALL_THROUGH\"]], \"SPECIAL_NODES\": [[\"NODE_ID\", \"NODE_NAME\"], [1, \"START\"], [2, \"END\"], [3, \"UNKNOWN\"]], \"PROCESSES\": [[\"PROCESS_ID\", \"PROCESS_DATA\"], {}]}}",
        p.join(", ")
    )
}
