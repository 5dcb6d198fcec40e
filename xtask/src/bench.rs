//! `cargo xtask bench`: for each format, a synthetic input of at least 256 MiB; in one process
//! it times a baseline scan that reads every byte and the format's full decode, and prints
//! throughput and their ratio (medians of several runs). Ratios are what to compare:
//! absolute speeds drift on shared machines.

use std::hint::black_box;
use std::sync::Arc;
use std::time::Instant;

use crate::{Flags, formats};

/// Sizes and repetitions for the benchmark inputs.
pub struct BenchConfig {
    /// Target input size in MiB.
    pub mib: u64,
}

/// Decodes a whole input, touching every field, and returns the number of units.
pub type Decoder = Box<dyn Fn(&[u8]) -> u64>;

/// One row of the table: an input and a decoder to time on it.
pub struct BenchCase {
    /// e.g. "x64dbg blocks".
    pub name: String,
    pub input: Arc<Vec<u8>>,
    /// What `run` counts: "records", "edges", "chars", …
    pub unit: &'static str,
    /// Decodes all of `input`, touching every field, and returns the number of units.
    pub run: Decoder,
}

/// The baseline: read every byte (a sum of little-endian u64 words).
pub fn scan(bytes: &[u8]) -> u64 {
    let mut chunks = bytes.chunks_exact(8);
    let mut sum = 0u64;
    for c in &mut chunks {
        sum = sum.wrapping_add(u64::from_le_bytes(c.try_into().unwrap()));
    }
    for &b in chunks.remainder() {
        sum = sum.wrapping_add(u64::from(b));
    }
    sum
}

fn median_secs(runs: u64, mut f: impl FnMut()) -> f64 {
    let mut times: Vec<f64> = (0..runs)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed().as_secs_f64()
        })
        .collect();
    times.sort_by(f64::total_cmp);
    times[times.len() / 2]
}

pub fn task(args: &[String]) -> Result<(), String> {
    if cfg!(debug_assertions) {
        // Benchmarks mean nothing in a debug build: run again in release.
        let mut cmd =
            std::process::Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
        cmd.args([
            "run",
            "--release",
            "--quiet",
            "--package",
            "xtask",
            "--",
            "bench",
        ])
        .args(args);
        return crate::run(&mut cmd);
    }
    let flags = Flags::parse(args, &["mib", "runs"])?;
    let config = BenchConfig {
        mib: flags.number("mib", 256)?,
    };
    let runs = flags.number("runs", 5)?.max(1);
    let chosen: Vec<_> = if flags.positional.is_empty() {
        formats::ALL.to_vec()
    } else {
        flags
            .positional
            .iter()
            .map(|n| formats::find(n))
            .collect::<Result<_, _>>()?
    };
    println!(
        "{:<34} {:>9} {:>13} {:>12} {:>8} {:>16}",
        "format", "input MiB", "baseline GiB/s", "decode GiB/s", "ratio", "units/s"
    );
    for f in chosen {
        let Some(cases) = f.bench else {
            println!("{:<34} (no benchmark yet)", f.name);
            continue;
        };
        let cases = cases(&config);
        for case in &cases {
            print_row(case, runs);
        }
        if let Some(row) = dump_case(f.name, &cases) {
            print_row(&row, runs);
        }
    }
    Ok(())
}

/// Times `case` and the baseline scan on its input and prints the row.
fn print_row(case: &BenchCase, runs: u64) {
    let bytes = &case.input[..];
    let len = bytes.len() as f64;
    let mut units = 0;
    let decode = median_secs(runs, || units = black_box((case.run)(black_box(bytes))));
    let baseline = median_secs(runs, || {
        black_box(scan(black_box(bytes)));
    });
    let gib = |secs: f64| len / secs / (1u64 << 30) as f64;
    println!(
        "{:<34} {:>9.1} {:>13.2} {:>12.2} {:>8.3} {:>12.3e} {}",
        case.name,
        len / (1u64 << 20) as f64,
        gib(baseline),
        gib(decode),
        baseline / decode,
        units as f64 / decode,
        case.unit
    );
}

/// The `dump` row of a format: `tracekit dump` end to end (the registry's records through
/// the JSON Lines sink into a writer that discards), on the first of the format's inputs
/// that the registry detects as it; input bytes per second.
fn dump_case(format: &str, cases: &[BenchCase]) -> Option<BenchCase> {
    // amber's first inputs are TT6, which has no magic: the name says it.
    let file_name = if format == "amber" {
        "bench.tt6"
    } else {
        "bench"
    };
    let (case, handler) = cases.iter().find_map(|c| {
        let handler = trace_registry::detect_bytes(&c.input, file_name)?;
        let same = handler.name() == format || (format == "amber" && handler.name() == "tt6");
        same.then_some((c, handler))
    })?;
    Some(BenchCase {
        name: format!("{} dump (JSON Lines)", handler.name()),
        input: case.input.clone(),
        unit: "records",
        run: Box::new(move |bytes| {
            let options = trace_registry::Options::default();
            let mut ctx = trace_registry::Ctx::new(&options);
            // The copy into an owned input is part of the cost (a memcpy: about 1% of it).
            let mut input = trace_registry::Input::from_bytes(file_name, bytes.to_vec()).unwrap();
            let mut records = handler.records(&mut input, &mut ctx).unwrap();
            let mut sink = trace_registry::sink::JsonLines::new(std::io::sink(), records.tables());
            let mut n = 0u64;
            while let Some(r) = records.next_record() {
                let r = r.unwrap();
                sink.write(r.table, r.row()).unwrap();
                n += 1;
            }
            sink.flush().unwrap();
            n
        }),
    })
}
