//! Visits every frame of a tfile (blocks parsed, `rip` read through the target
//! description) and prints the time taken: the linear counterpart of a GDB `tfind` loop.
//!
//! `cargo run --release -p gdb-tfile --example visit_all -- FILE`
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::arithmetic_side_effects
)]

use std::time::Instant;

use gdb_tfile::{ReadOptions, TraceFile};

fn main() {
    let path = std::env::args().nth(1).expect("usage: visit_all FILE");
    let t = Instant::now();
    let bytes = std::fs::read(&path).unwrap();
    let file = TraceFile::parse(&bytes, ReadOptions::default()).unwrap();
    let pc = file
        .tdesc()
        .and_then(|t| t.pc_register())
        .map(|r| r.name.clone());
    let (mut frames, mut blocks, mut sum) = (0u64, 0u64, 0u64);
    for f in file.frames() {
        let f = f.unwrap();
        blocks += f.blocks().map(Result::unwrap).count() as u64;
        if let (Some(td), Some(pc)) = (file.tdesc(), &pc) {
            sum ^= f
                .register(td, pc)
                .unwrap()
                .and_then(|v| v.as_u64())
                .unwrap_or(0);
        }
        frames += 1;
    }
    println!(
        "{frames} frames, {blocks} blocks, {} bytes in {:?} (pc xor {sum:#x})",
        bytes.len(),
        t.elapsed()
    );
}
