//! Limits that keep hostile input from making the reader allocate or recurse without bound.
//!
//! The string and nesting limits are the JSON lexer's, shared with the DCFG-Trace reader
//! (`dcfg_trace::limits`), so both formats accept the same JSON.

/// The longest JSON string accepted (a symbol name, a file name, a key), in bytes: the
/// lexer's [`trace_core::json::MAX_STRING`].
pub const MAX_STRING: u64 = trace_core::json::MAX_STRING;
/// The deepest nesting of arrays and objects inside values the reader skips (unknown keys
/// and columns): the lexer's [`trace_core::json::MAX_DEPTH`].
pub const MAX_DEPTH: usize = trace_core::json::MAX_DEPTH;
/// The most columns a table's header row may have. Every table of the specification has
/// at most 6; the header is mapped to column slots kept in a byte each.
pub const MAX_COLUMNS: usize = 64;
