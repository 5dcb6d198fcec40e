//! The encoder: edge sequences → DCFG-Trace, deterministically.
//!
//! - Transition codes are canonical Huffman codes over the observed successor frequencies
//!   of each edge (limited to 32 bits by flattening the frequencies), `""` for an edge with
//!   a single successor.
//! - With `fold_chains`, deterministic chains are folded into multi-edge `NEXT_EDGE_IDS`:
//!   an edge is *deterministic* when it always has the same successor and never ends a
//!   thread; a group then continues through deterministic edges (at most
//!   [`limits::MAX_FOLD`](crate::limits::MAX_FOLD)). Only single-successor chains are folded, so
//!   the "last edge becomes current" reading and any other give the same result, and
//!   chunks are cut only between groups, so no group overshoots `EDGE_COUNT`.
//! - Chunks are cut by instruction count: a chunk ends at the first group boundary where
//!   the instructions of its edges' source blocks (given by the caller per edge) reach
//!   `chunk_instrs`. Chunks partition the thread's edges: the next chunk's
//!   `FIRST_EDGE_ID` is the edge after the last edge of the previous one, and
//!   `PRECEDING_INSTR_COUNT` chains exactly.
//! - Optional dictionary substitution (frequent 16-character substrings of the process's
//!   sequences become `<key>` references) and repeat compression (`(M*…)` for runs of a
//!   repeated unit of up to 32 symbols), applied in that order.
//!
//! ```
//! use dcfg_trace::encode::{EncodeOptions, ProcessEdges, ThreadEdges, encode};
//! use dcfg_trace::read::{ReadOptions, Trace};
//!
//! let edges = vec![1, 2, 3, 2, 3, 2, 4];
//! let input = [ProcessEdges { pid: 7, threads: vec![ThreadEdges { thread: 0, edges: edges.clone() }] }];
//! let file = encode(&input, |_, _| 1, &EncodeOptions::default()).to_vec();
//! let trace = Trace::parse(&file, ReadOptions::default())?;
//! let decoded: Vec<u64> = trace.thread(7, 0).unwrap().chunks.iter()
//!     .map(|c| c.decode()).collect::<Result<Vec<_>, _>>()?.concat();
//! assert_eq!(decoded, edges);
//! # Ok::<(), dcfg_trace::Error>(())
//! ```

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, HashMap, HashSet};

use crate::base64::{BitWriter, char_of};
use crate::limits::MAX_FOLD;
use crate::table::{Code, TransitionRow};
use crate::write::{ChunkData, ProcessData, ThreadData, TraceFile};

/// Encoder options.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EncodeOptions {
    /// Instructions per chunk (0: one chunk per thread).
    pub chunk_instrs: u64,
    /// Fold deterministic chains into multi-edge groups.
    pub fold_chains: bool,
    /// `(M*…)` repeat compression.
    pub repeats: bool,
    /// `<key>` dictionary substitution.
    pub dictionary: bool,
}

impl Default for EncodeOptions {
    fn default() -> Self {
        EncodeOptions {
            chunk_instrs: 1_000_000,
            fold_chains: false,
            repeats: false,
            dictionary: false,
        }
    }
}

/// One thread's edges.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ThreadEdges {
    /// `THREAD_ID`.
    pub thread: u64,
    /// The edge ids in execution order.
    pub edges: Vec<u64>,
}

/// One process's threads.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ProcessEdges {
    /// `PROCESS_ID`.
    pub pid: u64,
    /// The threads.
    pub threads: Vec<ThreadEdges>,
}

/// Code lengths of a Huffman code over `freqs` (all > 0), at most `limit` bits; one symbol
/// gets length 0. Ties are broken by symbol index, so the result is deterministic.
#[must_use]
pub fn huffman_lengths(freqs: &[u64], limit: u8) -> Vec<u8> {
    let n = freqs.len();
    if n <= 1 {
        return vec![0; n];
    }
    let mut w: Vec<u64> = freqs.iter().map(|&f| f.max(1)).collect();
    loop {
        let mut parent = vec![usize::MAX; n.saturating_mul(2)];
        let mut heap: BinaryHeap<Reverse<(u64, usize)>> = w
            .iter()
            .enumerate()
            .map(|(i, &f)| Reverse((f, i)))
            .collect();
        let mut next = n;
        while heap.len() > 1 {
            let (Some(Reverse((fa, a))), Some(Reverse((fb, b)))) = (heap.pop(), heap.pop()) else {
                break;
            };
            if let Some(p) = parent.get_mut(a) {
                *p = next;
            }
            if let Some(p) = parent.get_mut(b) {
                *p = next;
            }
            heap.push(Reverse((fa.saturating_add(fb), next)));
            next = next.saturating_add(1);
        }
        let lens: Vec<u8> = (0..n)
            .map(|i| {
                let mut d = 0u8;
                let mut x = i;
                while let Some(&p) = parent.get(x).filter(|&&p| p != usize::MAX) {
                    d = d.saturating_add(1);
                    x = p;
                }
                d
            })
            .collect();
        if lens.iter().all(|&l| l <= limit) {
            return lens;
        }
        for f in &mut w {
            *f = (*f >> 1) | 1;
        }
    }
}

/// Canonical codes for `lens` (symbols ordered by length, then index).
#[must_use]
pub fn canonical_codes(lens: &[u8]) -> Vec<Code> {
    let mut order: Vec<usize> = (0..lens.len()).collect();
    order.sort_by_key(|&i| (lens.get(i).copied().unwrap_or(0), i));
    let mut codes = vec![Code::EMPTY; lens.len()];
    let mut code: u64 = 0;
    let mut prev = 0u8;
    for (k, &i) in order.iter().enumerate() {
        let len = lens.get(i).copied().unwrap_or(0);
        if k > 0 {
            code = code.wrapping_add(1);
        }
        code = code.wrapping_shl(u32::from(len.saturating_sub(prev)));
        prev = len;
        if let Some(c) = codes.get_mut(i) {
            *c = Code::from_right(code as u32, len);
        }
    }
    codes
}

/// The transition table the encoder builds for a process, with its lookup.
#[derive(Clone, Debug, Default)]
pub struct EncoderTable {
    /// The rows, sorted by current edge then code.
    pub rows: Vec<TransitionRow>,
    lookup: HashMap<(u64, u64), (Code, usize)>,
}

impl EncoderTable {
    /// Builds the table from the threads' edges.
    #[must_use]
    pub fn build(threads: &[ThreadEdges], fold_chains: bool) -> EncoderTable {
        let mut pairs: HashMap<(u64, u64), u64> = HashMap::new();
        let mut last: HashSet<u64> = HashSet::new();
        for t in threads {
            for w in t.edges.windows(2) {
                if let [a, b] = w {
                    let c = pairs.entry((*a, *b)).or_insert(0);
                    *c = c.saturating_add(1);
                }
            }
            if let Some(&l) = t.edges.last() {
                last.insert(l);
            }
        }
        let mut succ: BTreeMap<u64, Vec<(u64, u64)>> = BTreeMap::new();
        for (&(a, b), &n) in &pairs {
            succ.entry(a).or_default().push((b, n));
        }
        for v in succ.values_mut() {
            v.sort_unstable();
        }
        let det = |x: u64| -> Option<u64> {
            match succ.get(&x).map(Vec::as_slice) {
                Some([(only, _)]) if !last.contains(&x) => Some(*only),
                _ => None,
            }
        };
        let mut table = EncoderTable::default();
        for (&a, v) in &succ {
            let freqs: Vec<u64> = v.iter().map(|&(_, n)| n).collect();
            let codes = canonical_codes(&huffman_lengths(&freqs, 32));
            let mut rows: Vec<TransitionRow> = v
                .iter()
                .zip(codes)
                .map(|(&(b, _), code)| {
                    let mut next = vec![b];
                    if fold_chains {
                        let mut x = b;
                        while next.len() < MAX_FOLD {
                            let Some(y) = det(x) else { break };
                            next.push(y);
                            x = y;
                        }
                    }
                    TransitionRow {
                        current: a,
                        code,
                        next,
                    }
                })
                .collect();
            rows.sort_by_key(|r| (r.code.len, r.code.value));
            for r in rows {
                if let Some(&b) = r.next.first() {
                    table.lookup.insert((a, b), (r.code, table.rows.len()));
                }
                table.rows.push(r);
            }
        }
        table
    }

    /// The code and group of the transition `current → next`.
    #[must_use]
    pub fn get(&self, current: u64, next: u64) -> Option<(Code, &[u64])> {
        let &(code, row) = self.lookup.get(&(current, next))?;
        Some((code, self.rows.get(row)?.next.as_slice()))
    }
}

/// Encodes one thread into chunks with `table` (built from data that includes it).
/// `instrs(edge)` is the instruction count of the edge's source block.
#[must_use]
pub fn encode_thread(
    table: &EncoderTable,
    edges: &[u64],
    instrs: impl Fn(u64) -> u64,
    chunk_instrs: u64,
) -> Vec<ChunkData> {
    let mut chunks = Vec::new();
    let mut preceding = 0u64;
    let mut i = 0usize;
    while let Some(&first) = edges.get(i) {
        let mut w = BitWriter::default();
        let mut icount = instrs(first);
        let mut cur = first;
        let mut j = i.saturating_add(1);
        while let Some(&b) = edges.get(j) {
            if chunk_instrs > 0 && icount >= chunk_instrs {
                break;
            }
            let Some((code, group)) = table.get(cur, b) else {
                break;
            };
            // The table was built from these edges, so the group matches them.
            let n = group.len().max(1);
            w.push(code.right(), u32::from(code.len));
            for &g in edges.get(j..j.saturating_add(n)).unwrap_or_default() {
                icount = icount.saturating_add(instrs(g));
            }
            cur = group.last().copied().unwrap_or(b);
            j = j.saturating_add(n).min(edges.len());
        }
        chunks.push(ChunkData {
            preceding_instr_count: preceding,
            instr_count: icount,
            edge_count: j.saturating_sub(i) as u64,
            first_edge_id: Some(first),
            sequence: w.finish(),
        });
        preceding = preceding.saturating_add(icount);
        i = j;
    }
    chunks
}

/// A symbol of a sequence being compressed: a character (< 256) or dictionary key index.
type Sym = u32;

fn key_name(i: usize) -> String {
    let mut s = String::new();
    let mut i = i;
    loop {
        s.push(char::from(char_of((i % 64) as u8)));
        i /= 64;
        if i == 0 {
            return s;
        }
        i = i.saturating_sub(1);
    }
}

fn sym_len(s: Sym, keys: &[String]) -> usize {
    if s < 256 {
        1
    } else {
        keys.get(s.wrapping_sub(256) as usize)
            .map_or(0, String::len)
            .saturating_add(2)
    }
}

fn render(syms: &[Sym], keys: &[String], out: &mut String) {
    for &s in syms {
        if s < 256 {
            out.push(char::from(s as u8));
        } else {
            out.push('<');
            out.push_str(
                keys.get(s.wrapping_sub(256) as usize)
                    .map_or("", String::as_str),
            );
            out.push('>');
        }
    }
}

/// Greedy repeat compression: `(M*unit)` wherever it is shorter.
fn repeats(syms: &[Sym], keys: &[String]) -> String {
    const MAX_PERIOD: usize = 32;
    let mut out = String::new();
    let mut p = 0usize;
    while p < syms.len() {
        let mut best: Option<(usize, usize, usize)> = None; // (saving, period, reps)
        for period in 1..=MAX_PERIOD {
            let Some(unit) = syms.get(p..p.saturating_add(period)) else {
                break;
            };
            let mut reps = 1usize;
            while syms.get(
                p.saturating_add(reps.saturating_mul(period))
                    ..p.saturating_add(reps.saturating_add(1).saturating_mul(period)),
            ) == Some(unit)
            {
                reps = reps.saturating_add(1);
            }
            if reps < 2 {
                continue;
            }
            let unit_len: usize = unit.iter().map(|&s| sym_len(s, keys)).sum();
            let plain = unit_len.saturating_mul(reps);
            let packed = unit_len
                .saturating_add(reps.to_string().len())
                .saturating_add(3);
            if plain > packed {
                let saving = plain.saturating_sub(packed);
                if best.is_none_or(|(s, _, _)| saving > s) {
                    best = Some((saving, period, reps));
                }
            }
        }
        match best {
            Some((_, period, reps)) => {
                out.push('(');
                out.push_str(&reps.to_string());
                out.push('*');
                render(
                    syms.get(p..p.saturating_add(period)).unwrap_or_default(),
                    keys,
                    &mut out,
                );
                out.push(')');
                p = p.saturating_add(period.saturating_mul(reps));
            }
            None => {
                render(
                    syms.get(p..p.saturating_add(1)).unwrap_or_default(),
                    keys,
                    &mut out,
                );
                p = p.saturating_add(1);
            }
        }
    }
    out
}

/// Applies dictionary substitution and/or repeat compression to a process's chunks.
fn compress(p: &mut ProcessData, dictionary: bool, repeat: bool) {
    const W: usize = 16;
    const MAX_KEYS: usize = 64;
    let mut keys: Vec<String> = Vec::new();
    let mut chosen: HashMap<&[u8], usize> = HashMap::new();
    let seqs: Vec<String> = p
        .threads
        .iter()
        .flat_map(|t| t.chunks.iter().map(|c| c.sequence.clone()))
        .collect();
    if dictionary {
        let mut counts: HashMap<&[u8], u64> = HashMap::new();
        for s in &seqs {
            for w in s.as_bytes().windows(W).step_by(2) {
                let c = counts.entry(w).or_insert(0);
                *c = c.saturating_add(1);
            }
        }
        let mut cands: Vec<(&[u8], u64)> = counts.into_iter().filter(|&(_, n)| n >= 3).collect();
        cands.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
        for (w, _) in cands.into_iter().take(MAX_KEYS) {
            let k = key_name(keys.len());
            chosen.insert(w, keys.len());
            p.dictionary
                .push((k.clone(), String::from_utf8_lossy(w).into_owned()));
            keys.push(k);
        }
    }
    let mut i = 0usize;
    for t in &mut p.threads {
        for c in &mut t.chunks {
            let s = seqs.get(i).map_or(&[][..], |s| s.as_bytes());
            i = i.saturating_add(1);
            let mut syms: Vec<Sym> = Vec::with_capacity(s.len());
            let mut q = 0usize;
            while q < s.len() {
                if let Some(&k) = s.get(q..q.saturating_add(W)).and_then(|w| chosen.get(w)) {
                    syms.push(256u32.saturating_add(k as u32));
                    q = q.saturating_add(W);
                } else {
                    syms.push(u32::from(s.get(q).copied().unwrap_or(b'A')));
                    q = q.saturating_add(1);
                }
            }
            c.sequence = if repeat {
                repeats(&syms, &keys)
            } else {
                let mut out = String::new();
                render(&syms, &keys, &mut out);
                out
            };
        }
    }
}

/// Encodes one process. `instrs(edge)` is the instruction count of the edge's source block.
#[must_use]
pub fn encode_process(
    p: &ProcessEdges,
    instrs: impl Fn(u64) -> u64,
    opts: &EncodeOptions,
) -> ProcessData {
    let table = EncoderTable::build(&p.threads, opts.fold_chains);
    let threads = p
        .threads
        .iter()
        .map(|t| ThreadData {
            thread: t.thread,
            chunks: encode_thread(&table, &t.edges, &instrs, opts.chunk_instrs),
        })
        .collect();
    let mut data = ProcessData {
        pid: p.pid,
        dictionary: Vec::new(),
        transitions: table.rows,
        threads,
    };
    if opts.dictionary || opts.repeats {
        compress(&mut data, opts.dictionary, opts.repeats);
    }
    data
}

/// Encodes processes into a DCFG-Trace (version 1.0). `instrs(pid, edge)` is the
/// instruction count of the edge's source block.
#[must_use]
pub fn encode(
    processes: &[ProcessEdges],
    instrs: impl Fn(u64, u64) -> u64,
    opts: &EncodeOptions,
) -> TraceFile {
    TraceFile {
        major: 1,
        minor: 0,
        processes: processes
            .iter()
            .map(|p| encode_process(p, |e| instrs(p.pid, e), opts))
            .collect(),
    }
}

#[cfg(test)]
// Test code: panics are failures; helpers outside #[test] functions are not exempted.
#[allow(
    clippy::arithmetic_side_effects,
    clippy::indexing_slicing,
    clippy::unwrap_used,
    clippy::panic
)]
mod tests {
    use super::*;

    #[test]
    fn huffman_is_canonical_and_limited() {
        let lens = huffman_lengths(&[10, 1, 1, 5], 32);
        assert_eq!(lens, [1, 3, 3, 2]);
        let codes = canonical_codes(&lens);
        let s: Vec<String> = codes.iter().map(ToString::to_string).collect();
        assert_eq!(s, ["0", "110", "111", "10"]);
        assert_eq!(huffman_lengths(&[7], 32), [0]);
        // Fibonacci frequencies would need 40+ bits: limited to 32.
        let mut fib = vec![1u64, 1];
        while fib.len() < 45 {
            let n = fib[fib.len() - 1] + fib[fib.len() - 2];
            fib.push(n);
        }
        let lens = huffman_lengths(&fib, 32);
        assert!(lens.iter().all(|&l| l <= 32) && *lens.iter().max().unwrap() > 16);
        // Kraft equality: a complete prefix code.
        let kraft: f64 = lens.iter().map(|&l| 0.5f64.powi(i32::from(l))).sum();
        assert!((kraft - 1.0).abs() < 1e-9);
    }

    #[test]
    fn key_names_are_unique() {
        let names: HashSet<String> = (0..5000).map(key_name).collect();
        assert_eq!(names.len(), 5000);
        assert_eq!(key_name(0), "A");
    }
}
