//! CLI tests for the gdb_tfile format (owned by its crate's work).
