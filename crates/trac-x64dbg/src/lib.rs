//! Read and write x64dbg trace files (`.trace64`, `.trace32`): the `TRAC` magic, the JSON
//! header and the binary instruction blocks, with register state at any instruction.
//!
//! Specification: `specs/formats/x64dbg-trace-format.md`. Not implemented yet: see the
//! `trac-x64dbg` issue.
