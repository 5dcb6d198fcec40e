//! One handler per format: each module adapts one format crate to the registry (detection,
//! summary, validation, records as typed rows) and nothing else.

pub mod amber;
pub mod dcfg;
pub mod dcfg_trace;
pub mod gdb_tfile;
pub mod tenet;
pub mod x64dbg;
