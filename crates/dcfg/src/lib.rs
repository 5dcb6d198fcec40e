//! Read, query, validate and write Intel Dynamic Control-Flow Graph files (format 1.00), as
//! Intel Pin, PinPlay and SDE write them (`*.dcfg.json.bz2`).
//!
//! Specification: `specs/formats/intel-dcfg-format-1.00.md` (sections 1 and 2).
#![deny(missing_docs)]

mod error;
mod model;
mod query;
pub mod raw;
mod read;

pub use error::Error;
pub use model::{
    BasicBlock, Counts, Dcfg, Edge, EdgeIter, EdgeKind, EdgeType, Edges, FileName, Image, Loop,
    Process, Routine, RoutineNode, SourceLine, SpecialKind, SpecialNode, Symbol,
};
pub use query::{Container, ContainerEdges, Graph, LoopStats};
pub use read::Compression;
