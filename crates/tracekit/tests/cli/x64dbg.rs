//! CLI tests for the x64dbg format (owned by its crate's work).
