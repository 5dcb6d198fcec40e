//! The dcfg crate's one integration-test binary.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic,
    clippy::arithmetic_side_effects
)]

mod fixtures;
mod queries;
mod real;
mod roundtrip;

use std::path::PathBuf;

/// A file under `testdata/dcfg/`.
pub fn testdata(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../testdata/dcfg")
        .join(name)
}

/// Compares `actual` with a golden file; `TRACE_BLESS=1` rewrites it.
pub fn assert_golden(name: &str, actual: &str) {
    let path = testdata(name);
    if std::env::var_os("TRACE_BLESS").is_some_and(|v| v == "1") {
        std::fs::write(&path, actual).unwrap();
        return;
    }
    let expected = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (TRACE_BLESS=1 creates it)", path.display()));
    assert_eq!(
        expected,
        actual,
        "{} differs (TRACE_BLESS=1 rewrites it)",
        path.display()
    );
}

/// The model behind `sample.dcfg.json` (the same call as the xtask fixture generator).
pub fn sample() -> dcfg::Dcfg {
    dcfg::testgen::synthetic(dcfg::testgen::SynthConfig {
        images: 2,
        routines_per_image: 2,
        threads: 2,
        seed: 1,
    })
}
