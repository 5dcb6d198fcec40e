//! Read and write GDB tracepoint trace files, as `tsave` writes them and `target tfile` reads
//! them: the text description section, the target description and the binary frames.
//!
//! Specification: `specs/formats/gdb-trace-file-format.md`. Not implemented yet: see the
//! `gdb-tfile` issue.
