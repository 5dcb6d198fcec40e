//! amber-tt6 integration tests: one test binary.

// Test helpers outside `#[test]` functions may panic on broken fixtures.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    clippy::arithmetic_side_effects
)]

mod fixtures;
mod full;
mod properties;
mod threads;

use std::path::PathBuf;

/// A file under `testdata/amber/`.
pub fn testdata(rel: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../testdata/amber")
        .join(rel)
}

/// The bytes of a file under `testdata/amber/`.
pub fn read(rel: &str) -> Vec<u8> {
    std::fs::read(testdata(rel)).unwrap()
}
