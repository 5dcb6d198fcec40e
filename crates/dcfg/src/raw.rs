//! The on-disk vocabulary of DCFG format 1.00: object keys and table column names, exactly as
//! the specification (`specs/formats/intel-dcfg-format-1.00.md`, section 2) spells them.
//!
//! DCFG is JSON, so there are no binary layouts here. Tables are arrays whose first row names
//! the columns (spec 1.2.2); readers find columns by these names, writers emit them in the
//! order listed in the `*_COLUMNS` constants, which is Intel's order.

/// Top-level key: major format version (integer).
pub const MAJOR_VERSION: &str = "MAJOR_VERSION";
/// Top-level key: minor format version (integer).
pub const MINOR_VERSION: &str = "MINOR_VERSION";
/// Top-level key: the file-name table.
pub const FILE_NAMES: &str = "FILE_NAMES";
/// Top-level key: the edge-type table.
pub const EDGE_TYPES: &str = "EDGE_TYPES";
/// Top-level key: the special-node table.
pub const SPECIAL_NODES: &str = "SPECIAL_NODES";
/// Top-level key: the process table.
pub const PROCESSES: &str = "PROCESSES";

/// Process-data key: total instruction count.
pub const INSTR_COUNT: &str = "INSTR_COUNT";
/// Process-data key: instruction count per thread (array).
pub const INSTR_COUNT_PER_THREAD: &str = "INSTR_COUNT_PER_THREAD";
/// Process-data key: the image table.
pub const IMAGES: &str = "IMAGES";
/// Process-data key: the edge table.
pub const EDGES: &str = "EDGES";

/// Image-data key: file-name id of the image.
pub const FILE_NAME_ID: &str = "FILE_NAME_ID";
/// Image-data key: the symbol table.
pub const SYMBOLS: &str = "SYMBOLS";
/// Image-data key: the source-line table.
pub const SOURCE_DATA: &str = "SOURCE_DATA";
/// Image-data key: the basic-block table.
pub const BASIC_BLOCKS: &str = "BASIC_BLOCKS";
/// Image-data key: the routine table.
pub const ROUTINES: &str = "ROUTINES";

/// Columns of `FILE_NAMES`: id, path.
pub const FILE_NAME_COLUMNS: [&str; 2] = ["FILE_NAME_ID", "FILE_NAME"];
/// Columns of `EDGE_TYPES`: id, name (e.g. `"FALL_THROUGH"`).
pub const EDGE_TYPE_COLUMNS: [&str; 2] = ["EDGE_TYPE_ID", "EDGE_TYPE"];
/// Columns of `SPECIAL_NODES`: id, name (`"START"`, `"END"`, `"UNKNOWN"`).
pub const SPECIAL_NODE_COLUMNS: [&str; 2] = ["NODE_ID", "NODE_NAME"];
/// Columns of `PROCESSES`: OS process id, process-data object.
pub const PROCESS_COLUMNS: [&str; 2] = ["PROCESS_ID", "PROCESS_DATA"];
/// Columns of `IMAGES`: id, load address, size, image-data object.
pub const IMAGE_COLUMNS: [&str; 4] = ["IMAGE_ID", "LOAD_ADDR", "SIZE", "IMAGE_DATA"];
/// Columns of `SYMBOLS`: name, offset from the load address, size in bytes.
pub const SYMBOL_COLUMNS: [&str; 3] = ["NAME", "ADDR_OFFSET", "SIZE"];
/// Columns of `SOURCE_DATA`: file-name id, line, offset, size in bytes, instructions.
pub const SOURCE_COLUMNS: [&str; 5] = [
    "FILE_NAME_ID",
    "LINE_NUM",
    "ADDR_OFFSET",
    "SIZE",
    "NUM_INSTRS",
];
/// Columns of `BASIC_BLOCKS`: node id, offset of the first instruction, size in bytes,
/// instructions, offset of the last instruction from the first, execution count.
pub const BLOCK_COLUMNS: [&str; 6] = [
    "NODE_ID",
    "ADDR_OFFSET",
    "SIZE",
    "NUM_INSTRS",
    "LAST_INSTR_OFFSET",
    "COUNT",
];
/// Columns of `ROUTINES`: entry node, exit nodes (array), node/idom table, loop table.
pub const ROUTINE_COLUMNS: [&str; 4] = ["ENTRY_NODE_ID", "EXIT_NODE_IDS", "NODES", "LOOPS"];
/// Columns of a routine's `NODES` table: node id, immediate dominator.
pub const ROUTINE_NODE_COLUMNS: [&str; 2] = ["NODE_ID", "IDOM_NODE_ID"];
/// Columns of a routine's `LOOPS` table: head node, back-edge sources (array), nodes
/// (array), parent loop head (optional; 0 or absent for an outer loop).
pub const LOOP_COLUMNS: [&str; 4] = [
    "LOOP_HEAD_NODE_ID",
    "LOOP_BACK_EDGE_SOURCE_NODE_IDS",
    "LOOP_NODE_IDS",
    "PARENT_LOOP_HEAD_NODE_ID",
];
/// Columns of `EDGES`: id, source node, target node, edge-type id, counts per thread (array).
pub const EDGE_COLUMNS: [&str; 5] = [
    "EDGE_ID",
    "SOURCE_NODE_ID",
    "TARGET_NODE_ID",
    "EDGE_TYPE_ID",
    "COUNT_PER_THREAD",
];

/// Names of the special nodes (spec 2.6).
pub const START: &str = "START";
/// The target of EXIT edges.
pub const END: &str = "END";
/// A node that indicates an error in DCFG construction.
pub const UNKNOWN: &str = "UNKNOWN";
