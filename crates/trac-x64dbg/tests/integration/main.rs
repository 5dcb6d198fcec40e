//! Integration tests of trac-x64dbg: one binary, one module per area.

// Test code: a panic is a test failure, which is what these lints guard against elsewhere.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    clippy::arithmetic_side_effects
)]

mod common;
mod fixtures;
mod properties;
mod realdata;
