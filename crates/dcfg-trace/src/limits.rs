//! Limits that keep hostile input from making the reader allocate or recurse without bound.

/// Deepest nesting of `(M*…)` repeats and `<key>` references (counting dictionary values).
pub const MAX_NESTING: usize = 4096;
/// Longest JSON string (an `EDGE_ID_SEQUENCE` or a dictionary value), in bytes: the JSON
/// lexer's [`trace_core::json::MAX_STRING`], shared with the DCFG reader
/// (`dcfg::limits::MAX_STRING`) so both formats accept the same JSON.
pub const MAX_STRING: u64 = trace_core::json::MAX_STRING;
/// Most edges in one `NEXT_EDGE_IDS` group.
pub const MAX_GROUP: u64 = 1 << 16;
/// Most rows in one transition table.
pub const MAX_TRANSITIONS: u64 = 1 << 26;
/// Most entries in one string dictionary.
pub const MAX_DICTIONARY: u64 = 1 << 20;
/// Deepest nesting of JSON values the reader skips over (unknown columns and keys): the JSON
/// lexer's [`trace_core::json::MAX_DEPTH`], shared with the DCFG reader
/// (`dcfg::limits::MAX_DEPTH`).
pub const MAX_JSON_DEPTH: usize = trace_core::json::MAX_DEPTH;
/// Most edges decoded into memory for one chunk by the `Vec` APIs (the streaming edge
/// decoder has no limit). A chunk may legitimately claim more with a repeat bomb.
pub const MAX_CHUNK_EDGES: u64 = 1 << 31;
/// Longest folded chain (edges per `NEXT_EDGE_IDS` group) the encoder writes.
pub const MAX_FOLD: usize = 64;
