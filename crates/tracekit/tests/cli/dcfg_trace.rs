//! CLI tests for the dcfg_trace format (owned by its crate's work).
