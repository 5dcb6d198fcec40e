//! The synthetic x64dbg input every bench of this crate reads (included with `mod common;`).

/// A 64-bit x64dbg trace of `instructions` steps of the test generator's machine, with
/// `threads` threads switching every `1..=max_run` instructions (seed 1, default recorder).
pub fn x64dbg_input(instructions: u64, threads: u32, max_run: u64) -> Vec<u8> {
    use trac_x64dbg::testgen::{self, Options};
    let opts = Options {
        arch: trac_x64dbg::Arch::X64,
        threads,
        max_run,
        seed: 1,
    };
    testgen::trace(
        opts,
        instructions,
        trac_x64dbg::RecorderOptions::default(),
        "bench.exe",
    )
}
