//! The tracekit command line, end to end: one test binary (link once), one module per format.
// Test code: panicking on a failed expectation is the point.
#![allow(
    clippy::arithmetic_side_effects,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod amber;
mod bbv;
mod browser;
mod calls;
mod common;
mod dcfg;
mod dcfg_trace;
mod diff;
mod din;
mod disasm;
mod export;
mod find;
mod frame;
mod gdb_tfile;
mod gdbserver;
mod grammar;
mod harden;
mod memory;
mod origin;
mod record;
mod serve;
mod simpoint;
mod state;
mod tenet;
mod to_tfile;
mod x64dbg;
mod xref;
