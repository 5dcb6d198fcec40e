//! Integration tests of gdb-tfile (one test binary).

// Test code: helpers outside #[test] functions may panic on broken expectations.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    clippy::arithmetic_side_effects
)]

mod integration {
    pub mod fixtures;
    pub mod gdb;
    pub mod real_gdb;
    pub mod stream;
}
