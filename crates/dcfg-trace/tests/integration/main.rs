//! Integration tests of dcfg-trace: one test binary.
// Test code: panics are failures, and helpers outside #[test] functions are not exempted
// by clippy.toml.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    clippy::arithmetic_side_effects,
    clippy::type_complexity
)]

mod fixtures;
mod join;
mod read;
mod roundtrip;

/// A file under `testdata/dcfg-trace/`.
pub fn testdata(name: &str) -> Vec<u8> {
    let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../testdata/dcfg-trace")
        .join(name);
    std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}
