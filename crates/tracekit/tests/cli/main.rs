//! The tracekit command line, end to end: one test binary (link once), one module per format.

mod amber;
mod common;
mod dcfg;
mod dcfg_trace;
mod frame;
mod gdb_tfile;
mod x64dbg;
