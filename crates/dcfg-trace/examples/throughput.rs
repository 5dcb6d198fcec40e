//! Decoding and expansion throughput by wall-clock time and by CPU time (Linux: read from
//! `/proc/self/stat`), for figures on a shared machine where wall-clock rates drop with the
//! load: `cargo run --release -p dcfg-trace --example throughput [MiB]`.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::arithmetic_side_effects,
    clippy::indexing_slicing,
    missing_docs
)]

use std::hint::black_box;
use std::time::Instant;

use dcfg_trace::read::{ReadOptions, Trace};
use dcfg_trace::synth::{Cfg, repeat_trace};

/// User + system CPU seconds of this process.
fn cpu_secs() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let after = stat.rsplit_once(')').map_or("", |x| x.1);
    let f: Vec<&str> = after.split_whitespace().collect();
    let ticks = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    // Fields 14 and 15 (utime, stime) are the 12th and 13th after the command name.
    (ticks(11) + ticks(12)) / 100.0
}

fn measure(name: &str, unit: &str, runs: u32, mut f: impl FnMut() -> u64) {
    let (w0, c0) = (Instant::now(), cpu_secs());
    let mut n = 0;
    for _ in 0..runs {
        n += f();
    }
    let (wall, cpu) = (w0.elapsed().as_secs_f64(), cpu_secs() - c0);
    println!(
        "{name:<28} {:>10.3e} {unit}/s wall   {:>10.3e} {unit}/s per CPU-second   (cpu/wall {:.2})",
        n as f64 / wall,
        n as f64 / cpu.max(1e-9),
        cpu / wall
    );
}

fn main() {
    let mib: u64 = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(32);
    let file = Cfg::new(4096, 1)
        .trace(u64::MAX, mib << 20, 1_000_000, 7)
        .to_vec();
    let trace = Trace::parse(&file, ReadOptions::default()).unwrap();
    let thread = &trace.processes[0].threads[0];
    let edges: u64 = thread.chunks.iter().map(|c| c.edge_count).sum();
    println!(
        "{} MiB, {} chunks, {edges} edges, {:.2} bits/edge",
        file.len() >> 20,
        thread.chunks.len(),
        (file.len() * 6) as f64 / edges as f64
    );
    measure("decode, 1 thread", "edges", 3, || {
        let mut buf = Vec::new();
        let mut n = 0;
        for c in &thread.chunks {
            buf.clear();
            c.decode_into(&mut buf).unwrap();
            n += buf.len() as u64;
            black_box(buf.last());
        }
        n
    });
    measure("decode, 2 threads", "edges", 3, || {
        thread
            .map_parallel(2, |_, r| r.map(|e| e.len() as u64).unwrap_or(0))
            .iter()
            .sum()
    });
    let rep = repeat_trace(mib << 20, 3).to_vec();
    let rt = Trace::parse(&rep, ReadOptions::default()).unwrap();
    let p = &rt.processes[0];
    let progs: Vec<_> = p.threads[0]
        .chunks
        .iter()
        .map(|c| c.compile().unwrap())
        .collect();
    measure("expand nested repeats", "chars", 3, || {
        progs
            .iter()
            .map(|pr| {
                let (n, s) = dcfg_trace::expand::count_chars(pr, &p.process.dictionary, u64::MAX);
                black_box(s);
                n
            })
            .sum()
    });
}
