//! The on-disk vocabulary of a DCFG-Trace (specification section 3): the JSON keys and
//! table headers, in the order the specification prescribes, and the modified Base64
//! alphabet. DCFG-Trace is JSON text, so there are no binary layouts; the structure is:
//!
//! ```text
//! { "MAJOR_VERSION": int, "MINOR_VERSION": int,
//!   "PROCESSES": [ ["PROCESS_ID","STRING_DICTIONARY","TRANSITION_TABLE","THREAD_DATA"],
//!     [ pid, { key: sequence, … },
//!       [ ["CURRENT_EDGE_ID","TRANSITION_CODE","NEXT_EDGE_IDS"], [edge, "0101", [edge, …]], … ],
//!       [ ["THREAD_ID","TRACE_DATA"],
//!         [ tid, [ ["PRECEDING_INSTR_COUNT","INSTR_COUNT","EDGE_COUNT","FIRST_EDGE_ID","EDGE_ID_SEQUENCE"],
//!                  [ int, int, int, edge, "modified Base64 with (M*…) and <key>" ], … ] ], … ] ], … ] }
//! ```
//!
//! "int" and "edge" may be JSON numbers or C-style hex strings (section 1.2.1).

/// Top-level key: major format version.
pub const MAJOR_VERSION: &str = "MAJOR_VERSION";
/// Top-level key: minor format version.
pub const MINOR_VERSION: &str = "MINOR_VERSION";
/// Top-level key: the process table.
pub const PROCESSES: &str = "PROCESSES";

/// Process table column: the OS process id.
pub const PROCESS_ID: &str = "PROCESS_ID";
/// Process table column: the sequence dictionary object.
pub const STRING_DICTIONARY: &str = "STRING_DICTIONARY";
/// Process table column: the transition table.
pub const TRANSITION_TABLE: &str = "TRANSITION_TABLE";
/// Process table column: the thread table.
pub const THREAD_DATA: &str = "THREAD_DATA";
/// The process table header, in the prescribed order.
pub const PROCESS_HEADER: [&str; 4] =
    [PROCESS_ID, STRING_DICTIONARY, TRANSITION_TABLE, THREAD_DATA];

/// Transition table column: the edge the codes start from.
pub const CURRENT_EDGE_ID: &str = "CURRENT_EDGE_ID";
/// Transition table column: `"0"`/`"1"` characters, at most 32, possibly empty.
pub const TRANSITION_CODE: &str = "TRANSITION_CODE";
/// Transition table column: the edges the code stands for (one or more).
pub const NEXT_EDGE_IDS: &str = "NEXT_EDGE_IDS";
/// The transition table header, in the prescribed order.
pub const TRANSITION_HEADER: [&str; 3] = [CURRENT_EDGE_ID, TRANSITION_CODE, NEXT_EDGE_IDS];

/// Thread table column: index of the thread in the DCFG's per-thread arrays.
pub const THREAD_ID: &str = "THREAD_ID";
/// Thread table column: the chunk table.
pub const TRACE_DATA: &str = "TRACE_DATA";
/// The thread table header, in the prescribed order.
pub const THREAD_HEADER: [&str; 2] = [THREAD_ID, TRACE_DATA];

/// Chunk column: instructions executed on the thread before the chunk.
pub const PRECEDING_INSTR_COUNT: &str = "PRECEDING_INSTR_COUNT";
/// Chunk column: instructions in the source nodes of the chunk's edges.
pub const INSTR_COUNT: &str = "INSTR_COUNT";
/// Chunk column: edges in the chunk, `FIRST_EDGE_ID` included.
pub const EDGE_COUNT: &str = "EDGE_COUNT";
/// Chunk column: the chunk's first edge.
pub const FIRST_EDGE_ID: &str = "FIRST_EDGE_ID";
/// Chunk column: the encoded `EDGE_COUNT - 1` following edges.
pub const EDGE_ID_SEQUENCE: &str = "EDGE_ID_SEQUENCE";
/// The trace-data (chunk) header, in the prescribed order.
pub const CHUNK_HEADER: [&str; 5] = [
    PRECEDING_INSTR_COUNT,
    INSTR_COUNT,
    EDGE_COUNT,
    FIRST_EDGE_ID,
    EDGE_ID_SEQUENCE,
];

/// The modified Base64 alphabet (section 3.7.1.1): character `i` encodes the 6-bit value `i`.
/// Standard Base64 with `-` instead of `/`. Dictionary keys use the same characters.
pub const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+-";

// Evaluated at compile time: an index out of bounds would fail the build, not panic.
#[allow(clippy::indexing_slicing)]
/// `DECODE[c]` is the 6-bit value of character `c`, or [`INVALID`].
pub const DECODE: [u8; 256] = {
    let mut t = [INVALID; 256];
    let mut i = 0;
    while i < 64 {
        t[ALPHABET[i] as usize] = i as u8;
        i += 1;
    }
    t
};

/// Marks a byte outside the alphabet in [`DECODE`].
pub const INVALID: u8 = 0xff;

/// The longest `TRANSITION_CODE`, in bits (section 3.5).
pub const MAX_CODE_BITS: u32 = 32;
