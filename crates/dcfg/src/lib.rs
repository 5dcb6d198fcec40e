//! Read, query, validate and write Intel Dynamic Control-Flow Graph files (DCFG format
//! 1.00), as Intel Pin, PinPlay and SDE write them (`*.dcfg.json.bz2`), and as other tools
//! imitate them.
//!
//! A DCFG is a JSON document (specification: `specs/formats/intel-dcfg-format-1.00.md`,
//! sections 1 and 2) holding, per process, the images that were loaded, their symbols,
//! source lines, basic blocks and routines (with immediate dominators and loops), and the
//! control-flow edges with per-thread execution counts.
//!
//! # Features of this crate
//!
//! - **Model** ([`Dcfg`] → [`Process`] → [`Image`] → [`BasicBlock`] / [`Routine`] →
//!   [`Loop`]; [`Edges`]): all of format 1.00. Integers are `u64`, read exactly from JSON
//!   numbers or hex strings (never through `f64`: the QEMU plugin writes node ids above
//!   2^53); tables are read by header name; optional sections may be absent; unknown keys
//!   and columns are skipped; special nodes and edge types are found by name
//!   ([`SpecialKind`], [`EdgeKind`]), never by number.
//! - **Reading** ([`Dcfg::from_path`], [`Dcfg::from_reader`], [`Dcfg::parse`]): plain
//!   `.json`, `.json.bz2` and `.json.gz`, recognised by their magic bytes; one hand-written
//!   pull parser serves slices and streams (a 64 KiB window: the JSON is never held whole).
//!   Errors name the JSON path, what was expected and found, and the byte offset: [`Error`],
//!   e.g. `PROCESSES[0].IMAGES[0].BASIC_BLOCKS[5].NUM_INSTRS: expected an unsigned integer
//!   or a hex string such as "0x400000", found the number 4.5 at offset 0x9a3`.
//! - **Queries** ([`Graph`], from [`Dcfg::graph`]): Intel's DCFG API — navigation by id
//!   and back (a block's image, routine, innermost loop), inbound / outbound / internal
//!   edges of any [`Container`], successors and predecessors, edge by id or by (source,
//!   target), blocks by address, symbol or `file:line`, symbol+offset and source line of a
//!   block, per-thread counts, instruction counts, loop nesting and [`LoopStats`], routine
//!   entry counts and dominators.
//! - **Validation** ([`Dcfg::validate`]): a list of [`Finding`]s with JSON paths.
//! - **Writing** ([`Dcfg::write_to`], [`Dcfg::write_compressed`], [`Dcfg::to_vec`]): Intel's
//!   layout (line breaks included) and key order, so that rewriting a file Intel wrote gives
//!   back its bytes; read → write → read gives the same model.
//! - **Drawings and statistics** ([`Dcfg::write_dot`] with [`DotOptions`],
//!   [`Dcfg::write_loops_csv`]).
//!
//! No cargo features; no `unsafe`.
//!
//! # Example
//!
//! ```
//! use dcfg::{Container, Dcfg, EdgeKind, SpecialKind};
//!
//! let bytes = include_bytes!("../../../testdata/dcfg/sample.dcfg.json");
//! let dcfg = Dcfg::parse(bytes)?;
//! assert_eq!(dcfg.version(), "1.00");
//! let pid = dcfg.processes[0].id;
//! let g = dcfg.graph(pid).unwrap();
//!
//! // The first block executed: the target of the edge leaving START.
//! let start = g.special_node(SpecialKind::Start).unwrap();
//! let entry = g.outbound_edges(start).next().unwrap();
//! assert_eq!(g.edge_kind(entry), EdgeKind::Entry);
//! let main = entry.target;
//! assert_eq!(g.block_symbol(main), Some(("main", 0)));
//! assert_eq!(g.block_routine(main).unwrap().entry, main);
//!
//! // Loops of `main`'s routine, with their iteration counts.
//! for l in g.block_routine(main).unwrap().loops() {
//!     let stats = g.loop_stats(l.head);
//!     assert_eq!(stats.iterations(), stats.back_edge_count + stats.entry_count);
//! }
//! assert!(g.instr_count(Container::Process) > 0);
//! assert!(dcfg.validate().is_empty());
//!
//! // Write it back: the same bytes (the fixture was written by this crate).
//! assert_eq!(dcfg.to_vec(), bytes);
//! # Ok::<(), dcfg::Error>(())
//! ```
//!
//! # Features
//!
//! - `testgen`: the test-data generators (`testgen`) behind the tests, benchmarks and
//!   `cargo xtask`; not part of the default API.
//! - `fuzzing`: the `fuzz_*` entry points of the fuzz targets (`fuzz/`), also run by the
//!   crate's never-panics tests.
#![deny(missing_docs)]

mod error;
mod export;
pub mod limits;
mod model;
mod query;
pub mod raw;
mod read;
mod table;
#[cfg(any(test, feature = "testgen"))]
pub mod testgen;
mod validate;
mod write;

pub use error::Error;
pub use export::DotOptions;
pub use model::{
    BasicBlock, Counts, CountsIter, Dcfg, Edge, EdgeIter, EdgeKind, EdgeType, Edges, FileName,
    Image, Loop, Process, Routine, RoutineNode, SourceLine, SpecialKind, SpecialNode, Symbol,
    SymbolIter, Symbols,
};
pub use query::{Container, ContainerEdges, Graph, LoopStats};
pub use read::Compression;
pub use validate::Finding;

/// Fuzzing entry point: reads arbitrary bytes as a DCFG and, when that works, runs the
/// writer, the validator, every query on a few ids, DOT and CSV. Must never panic.
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub fn fuzz_read(data: &[u8]) {
    let Ok(d) = Dcfg::parse(data) else {
        return;
    };
    let _ = d.validate();
    let bytes = d.to_vec();
    let _ = Dcfg::parse(&bytes);
    let mut sink = Vec::new();
    let _ = d.write_dot(&mut sink, &DotOptions::default());
    let _ = d.write_loops_csv(&mut sink);
    for p in &d.processes {
        let g = Graph::new(&d, p);
        let ids: Vec<u64> = p
            .blocks()
            .map(|(_, b)| b.id)
            .take(16)
            .chain(p.edges().map(|e| e.source).take(16))
            .collect();
        for &id in &ids {
            let _ = (
                g.block_symbol(id),
                g.block_source(id),
                g.block_counts_per_thread(id),
                g.block_instr_count(id),
                g.idom(id),
                g.successors(id).count(),
                g.predecessors(id).count(),
                g.blocks_at(id),
                g.container_edges(Container::Block(id)),
            );
            let _ = g.loop_stats(id);
            let _ = (g.loop_children(id), g.loop_exit_edges(id));
            let _ = g.routine_entry_count_per_thread(id);
            let _ = g.container_edges(Container::Routine(id));
        }
        let _ = g.instr_count(Container::Process);
    }
}

/// Fuzzing entry point: whatever reads must write and read back to the same model, and
/// write the same bytes again. Returns `false` on a mismatch (the fuzz target asserts).
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
#[must_use]
pub fn fuzz_roundtrip(data: &[u8]) -> bool {
    let Ok(d) = Dcfg::parse(data) else {
        return true;
    };
    let bytes = d.to_vec();
    match Dcfg::parse(&bytes) {
        Ok(again) => again == d && again.to_vec() == bytes,
        Err(_) => false,
    }
}
