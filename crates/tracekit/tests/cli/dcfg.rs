//! CLI tests for the dcfg format (owned by its crate's work).
