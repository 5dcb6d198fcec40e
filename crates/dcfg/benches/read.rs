//! Criterion benchmark: reading a synthetic DCFG (filled in below).
#![allow(missing_docs)]
fn main() {}
