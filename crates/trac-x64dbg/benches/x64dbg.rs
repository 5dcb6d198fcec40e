//! Criterion benchmarks of the x64dbg reader (filled in below).
#![allow(missing_docs)]
fn main() {}
