//! CLI tests for the amber format (owned by its crate's work).
