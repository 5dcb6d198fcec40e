//! Decode and encode Intel DCFG-Trace files: the exact sequence of control-flow edges each
//! thread of a process took, compressed three ways (a modified Base64 text, `(M*…)`
//! repeats and `<key>` dictionary references, and per-edge transition-table bit codes).
//!
//! Specification: `specs/formats/intel-dcfg-format-1.00.md`, section 3 (and section 1 for
//! the JSON conventions: integers as numbers or hex strings, header-row tables). The open
//! points of the specification are settled as `specs/notes/dcfg-notes.md` §7 recommends;
//! each module documents its choices.
//!
//! # What is here
//!
//! - [`read`]: a one-pass pull reader ([`read::Reader`]) of processes, threads and chunks,
//!   over a byte slice (zero-copy) or any `io::Read` (memory bounded by the largest chunk
//!   plus one process's tables); a [`Trace`](read::Trace) index of a whole file to
//!   [seek](read::ThreadTrace::seek) to the chunk holding an instruction count without
//!   decoding the others, decode a thread's chunks [in parallel](read::ThreadTrace::map_parallel)
//!   with results in order, and check that chunk instruction counts
//!   [chain](read::ThreadTrace::chain_gaps).
//! - The three decoders, each its own module: [`base64`] (6 bits per character, most
//!   significant first), [`expand`] (the lazy expander: memory O(nesting + dictionary),
//!   cycles and syntax errors reported with positions), [`table`] (the transition table,
//!   checked unique and prefix-free, decoded by table lookups).
//! - [`encode`]: edge sequences → a DCFG-Trace with canonical Huffman codes, optional chain
//!   folding, chunks cut by instruction count, optional repeat and dictionary compression;
//!   deterministic. [`write`](mod@write): the file model and its writer (the mirror of `read`).
//! - [`join`]: edges → blocks, and `INSTR_COUNT` and per-edge counts checked against a
//!   DCFG given as plain data (this crate does not depend on the `dcfg` crate).
//!
//! No cargo features; no `unsafe`; no panics on any input.
//!
//! # The specification's open points (`dcfg-notes.md` §7) and how they are settled
//!
//! | # | Point | Handling |
//! |---|---|---|
//! | 1 | `""` next to other codes | strict: [`Error::Codes`]; lenient: the `""` row is ignored ([`table`]) |
//! | 2 | multi-edge `NEXT_EDGE_IDS` | all emitted in order, the last becomes current; the encoder folds only single-successor chains ([`encode`]) |
//! | 3 | `EDGE_COUNT` includes `FIRST_EDGE_ID`; overshooting group | strict: [`DecodeErrorKind::Overshoot`]; lenient: cut |
//! | 4 | `EDGE_COUNT` 0 | accepted, `FIRST_EDGE_ID` may be absent or null, the sequence ignored ([`read`]) |
//! | 5 | chunks independent; counts chain? boundary edge shared? | chunks decode alone (seek, parallel); a chain gap is a warning ([`read::ThreadTrace::chain_gaps`]); raw chunks exposed, the boundary convention shows in [`join::check`]'s per-edge counts; the encoder partitions edges |
//! | 6 | bit order, padding | 6 bits per character, most significant first, no `=`; decoding stops after `EDGE_COUNT` edges ([`base64`]) |
//! | 7 | repeats and references | decimal counts (0 allowed), any nesting up to [`limits::MAX_NESTING`], references in repeats and values, cycles named, lazy expansion ([`expand`]) |
//! | 8 | whitespace in sequences | ASCII whitespace skipped; other bytes outside the syntax are errors with their position |
//! | 9 | hex strings | every integer: number or `"0x…"`/decimal string, exactly ([`trace_core::json`]) |
//! | 10 | threads not traced | [`read::Trace::thread`] returns `None` |
//! | 11 | unknown edges, missing transitions | [`DecodeErrorKind::NoSuccessor`] / [`DecodeErrorKind::NoTransition`] with chunk and bit position; [`join::Mismatch::UnknownEdge`] |
//! | 12 | several processes | dictionary and transition table per process |
//! | 13 | off-by-one section references | the transition table is section 3.5, thread data 3.6 |
//! | 14 | ordering | the streaming reader needs only `THREAD_DATA` after the tables and `THREAD_ID` before `TRACE_DATA`; columns are found by header name |
//!
//! # Example
//!
//! ```
//! use dcfg_trace::read::{ReadOptions, Trace};
//!
//! // A fixture made by this crate's encoder (`cargo xtask fixtures`).
//! let bytes = include_bytes!("../../../testdata/dcfg-trace/basic.trace.json");
//! let trace = Trace::parse(bytes, ReadOptions::default())?;
//! let thread = &trace.processes[0].threads[0];
//! let first = thread.chunks[0].decode()?;
//! assert_eq!(first.len() as u64, thread.chunks[0].edge_count);
//!
//! // Seek: the chunk holding instruction 25, found without decoding the others.
//! let i = thread.seek(25).unwrap();
//! let c = &thread.chunks[i];
//! assert!(c.preceding_instr_count <= 25 && 25 < c.preceding_instr_count + c.instr_count);
//!
//! // All chunks on two threads, in order; the same edges as one by one.
//! let parallel = thread.decode_parallel(2);
//! for (c, p) in thread.chunks.iter().zip(parallel) {
//!     assert_eq!(c.decode()?, p?);
//! }
//! assert!(thread.chain_gaps().is_empty());
//!
//! // Write it back: the same bytes (the fixture is in the writer's canonical form).
//! assert_eq!(dcfg_trace::write::TraceFile::from_trace(&trace).to_vec(), bytes);
//! # Ok::<(), dcfg_trace::Error>(())
//! ```
//!
//! # Features
//!
//! - `testgen`: the test-data generators (`synth`) behind the tests, benchmarks and
//!   `cargo xtask`; not part of the default API.
//! - `fuzzing`: the `fuzz_*` entry points of the fuzz targets (`fuzz/`), also run by the
//!   crate's never-panics tests.
#![deny(missing_docs)]
#![warn(missing_debug_implementations)]

pub mod base64;
pub mod encode;
mod error;
pub mod expand;
pub mod join;
pub mod limits;
pub mod raw;
pub mod read;
// Test-data generator driven by trusted parameters (sizes, seeds), not by input files.
#[cfg(any(test, feature = "testgen"))]
#[allow(clippy::arithmetic_side_effects)]
pub mod synth;
pub mod table;
pub mod write;

pub use error::{Context, DecodeErrorKind, Error, Result, SequenceErrorKind};

#[cfg(feature = "fuzzing")]
use read::{Event, ReadOptions, Reader};

/// Fuzzing entry point for the expander: the bytes up to the first `0xff` are a sequence,
/// the following `0xff`-separated parts are dictionary values with keys `A`, `B`, …
/// Expands at most 64 Ki characters. Must never panic.
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub fn fuzz_expand(data: &[u8]) {
    let mut parts = data.split(|&b| b == 0xff);
    let seq = parts.next().unwrap_or_default();
    let entries: Vec<(String, Vec<u8>, u64)> = parts
        .take(64)
        .enumerate()
        .map(|(i, v)| {
            (
                char::from(base64::char_of(i as u8)).to_string(),
                v.to_vec(),
                0,
            )
        })
        .collect();
    let Ok(dict) = expand::Dictionary::new(0, entries) else {
        return;
    };
    if let Ok(prog) = dict.compile(seq, &Context::Standalone, 0) {
        let _ = expand::count_chars(&prog, &dict, 1 << 16);
    }
}

/// Fuzzing entry point for the bit decoder: the first bytes give a transition table
/// (possibly invalid: its checks are exercised too), the rest are the bits. Must never
/// panic.
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub fn fuzz_bits(data: &[u8]) {
    let (head, bits) = data.split_at(data.len().min(48));
    // Rows: (current, code of up to 12 bits with its length, 1–3 next edges), 4 bytes each.
    // Codes longer than the lookup's first level (8 bits) reach its sub-tables.
    let mut rows = Vec::new();
    for r in head.chunks_exact(4) {
        let [a, b, v, c] =
            [r.first(), r.get(1), r.get(2), r.get(3)].map(|x| x.copied().unwrap_or(0));
        let len = (b & 0x0f).min(12);
        let mask = 1u32.wrapping_shl(u32::from(len)).wrapping_sub(1);
        let value = (u32::from(b >> 4).wrapping_shl(8) | u32::from(v)) & mask;
        let code = table::Code::from_right(value, len);
        let next: Vec<u64> = (0..=(c >> 6))
            .map(|k| u64::from((c.wrapping_add(k)) & 7))
            .collect();
        rows.push(table::TransitionRow {
            current: u64::from(a & 7),
            code,
            next,
        });
    }
    let lenient = data.first().is_some_and(|b| b & 1 == 1);
    let Ok(t) = table::TransitionTable::new(0, rows, &[], lenient) else {
        return;
    };
    let text: Vec<u8> = bits.iter().map(|&b| base64::char_of(b)).collect();
    let count = u64::from(data.get(1).copied().unwrap_or(0)).saturating_mul(4);
    let mut d = t.decoder(
        Some(u64::from(data.get(2).copied().unwrap_or(0) & 7)),
        count,
        base64::BitReader::new(base64::Plain(Some(&text))),
        Context::Standalone,
        0,
        lenient,
    );
    let mut out = Vec::new();
    while let Ok(n) = d.decode_into(&mut out, 100) {
        if n == 0 {
            break;
        }
    }
}

/// Fuzzing entry point for the whole reader: reads the bytes as a DCFG-Trace with the
/// slice and the streaming reader (which must agree), decodes up to 64 Ki edges per chunk,
/// and writes the model back. Must never panic.
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub fn fuzz_read(data: &[u8]) {
    for lenient in [false, true] {
        let options = ReadOptions { lenient };
        let slice: Vec<String> = summarize(Reader::from_slice(data, options));
        let stream: Vec<String> = summarize(Reader::from_reader(data, options));
        assert_eq!(slice, stream, "slice and stream readers disagree");
    }
    if let Ok(t) = read::Trace::parse(data, ReadOptions::default()) {
        let model = write::TraceFile::from_trace(&t);
        let bytes = model.to_vec();
        let again = read::Trace::parse(&bytes, ReadOptions::default())
            .map(|t| write::TraceFile::from_trace(&t));
        if let Ok(again) = again {
            assert_eq!(again, model, "write → read changed the model");
        }
    }
}

#[cfg(feature = "fuzzing")]
fn summarize<'a, S: trace_core::json::Source<'a>>(r: Reader<'a, S>) -> Vec<String> {
    let mut out = Vec::new();
    for ev in r {
        match ev {
            Ok(Event::Process(p)) => out.push(format!("P{}", p.pid)),
            Ok(Event::Thread { thread, .. }) => out.push(format!("T{thread}")),
            Ok(Event::Chunk(c)) => {
                let mut n = 0u64;
                let mut buf = Vec::new();
                let r = if c.edge_count <= 1 << 16 {
                    c.for_each_batch(4096, |b| n = n.saturating_add(b.len() as u64), &mut buf)
                } else {
                    Ok(())
                };
                out.push(format!(
                    "C{} {n} {:?}",
                    c.index,
                    r.map_err(|e| e.to_string())
                ));
            }
            Err(e) => out.push(e.to_string()),
        }
    }
    out
}

/// Fuzzing entry point for the encoder: the bytes are an edge sequence (ids 0–15, split
/// into two threads), encoded with the options in the first byte, then decoded; the
/// result must be the input. Must never panic.
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub fn fuzz_roundtrip(data: &[u8]) {
    let (opt, rest) = data.split_first().unwrap_or((&0, &[]));
    let opts = encode::EncodeOptions {
        chunk_instrs: u64::from(opt >> 4),
        fold_chains: opt & 1 == 1,
        repeats: opt & 2 == 2,
        dictionary: opt & 4 == 4,
    };
    let mid = rest.len() / 2;
    let threads: Vec<encode::ThreadEdges> = [rest.get(..mid), rest.get(mid..)]
        .into_iter()
        .enumerate()
        .map(|(i, part)| encode::ThreadEdges {
            thread: i as u64,
            edges: part
                .unwrap_or_default()
                .iter()
                .map(|&b| u64::from(b & 15))
                .collect(),
        })
        .collect();
    let input = [encode::ProcessEdges { pid: 1, threads }];
    let file = encode::encode(&input, |_, e| e % 3, &opts).to_vec();
    let decoded = decode_all(&file);
    let want: Vec<Vec<u64>> = input[0].threads.iter().map(|t| t.edges.clone()).collect();
    assert_eq!(decoded.ok(), Some(want), "decode(encode(s)) != s");
}

/// Every thread's edges, decoded (for tests and the round-trip fuzz target).
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub fn decode_all(bytes: &[u8]) -> Result<Vec<Vec<u64>>, Error> {
    let t = read::Trace::parse(bytes, ReadOptions::default())?;
    let mut out = Vec::new();
    for p in &t.processes {
        for th in &p.threads {
            let mut edges = Vec::new();
            for c in &th.chunks {
                c.decode_into(&mut edges)?;
            }
            out.push(edges);
        }
    }
    Ok(out)
}
