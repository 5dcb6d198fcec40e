//! `cargo xtask`: the project's automation, as a table of tasks (std only, apart from the
//! workspace's own crates).

// A developer tool: its inputs are our own files, so panicking on a broken invariant is fine.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    clippy::arithmetic_side_effects
)]
#![allow(missing_docs, missing_debug_implementations)]

mod bench;
mod bench_gdbserver;
mod bench_record;
mod ci;
mod fixtures;
mod formats;
mod fuzz;

use std::path::PathBuf;
use std::process::{Command, ExitCode};

type Task = fn(&[String]) -> Result<(), String>;

const TASKS: &[(&str, Task, &str)] = &[
    (
        "fixtures",
        fixtures::task,
        "[--check]  regenerate testdata/ from the writers (--check: fail on any difference)",
    ),
    (
        "synth",
        synth,
        "FORMAT --records N [--seed S] -o FILE  write a large deterministic synthetic trace",
    ),
    (
        "bench",
        bench::task,
        "[FORMAT…] [simpoint] [record] [gdbserver [--trace FILE]] [--mib N] [--runs N] [--state-gib N]  throughput of each format's decoder next to a raw scan",
    ),
    (
        "fuzz",
        fuzz::task,
        "[TARGET…] [--secs N] [--no-asan] [--dev]  run the cargo-fuzz targets (installs cargo-fuzz if missing)",
    ),
    (
        "ci",
        ci::task,
        "[--no-test] [--fuzz-secs N]  everything CI checks",
    ),
];

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some((name, rest)) = args.split_first() else {
        usage();
        return ExitCode::from(2);
    };
    if matches!(name.as_str(), "help" | "--help" | "-h") {
        usage();
        return ExitCode::SUCCESS;
    }
    match TASKS.iter().find(|(n, _, _)| n == name) {
        // Before anything runs: `bench --help` must not start a 30-minute benchmark.
        Some((_, _, help)) if rest.iter().any(|a| a == "--help" || a == "-h") => {
            println!("usage: cargo xtask {name} {help}");
            ExitCode::SUCCESS
        }
        Some((_, task, _)) => match task(rest) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("xtask {name}: {e}");
                ExitCode::FAILURE
            }
        },
        None => {
            eprintln!("xtask: no task {name:?}");
            usage();
            ExitCode::from(2)
        }
    }
}

fn usage() {
    eprintln!("usage: cargo xtask TASK [ARGS]\n");
    for (name, _, help) in TASKS {
        eprintln!("  {name:<9} {help}");
    }
    eprintln!(
        "\nformats: {}",
        formats::ALL
            .iter()
            .map(|f| f.name)
            .collect::<Vec<_>>()
            .join(", ")
    );
}

/// The repository root (xtask's parent directory).
pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// Runs a command from the repository root, failing unless it exits 0.
pub fn run(cmd: &mut Command) -> Result<(), String> {
    eprintln!("$ {cmd:?}");
    let status = cmd
        .current_dir(root())
        .status()
        .map_err(|e| format!("cannot run {cmd:?}: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("{cmd:?} failed: {status}"))
    }
}

/// A tiny flag parser: `--name value` pairs and positional arguments.
pub struct Flags {
    pub positional: Vec<String>,
    pairs: Vec<(String, Option<String>)>,
}

impl Flags {
    /// Parses `args`; `with_value` lists the flags that take a value, `switches` those that
    /// take none. Any other flag is an error (a typo must not run the task with defaults).
    pub fn parse(args: &[String], with_value: &[&str], switches: &[&str]) -> Result<Flags, String> {
        let mut flags = Flags {
            positional: Vec::new(),
            pairs: Vec::new(),
        };
        let mut it = args.iter();
        while let Some(a) = it.next() {
            if let Some(name) = a
                .strip_prefix("--")
                .or_else(|| a.strip_prefix('-').filter(|n| n.len() == 1))
            {
                if with_value.contains(&name) {
                    let v = it.next().ok_or_else(|| format!("{a} needs a value"))?;
                    flags.pairs.push((name.to_owned(), Some(v.clone())));
                } else if switches.contains(&name) {
                    flags.pairs.push((name.to_owned(), None));
                } else {
                    return Err(format!("unknown flag {a} (see --help)"));
                }
            } else {
                flags.positional.push(a.clone());
            }
        }
        Ok(flags)
    }

    pub fn has(&self, name: &str) -> bool {
        self.pairs.iter().any(|(n, _)| n == name)
    }

    pub fn value(&self, name: &str) -> Option<&str> {
        self.pairs
            .iter()
            .rev()
            .find(|(n, _)| n == name)
            .and_then(|(_, v)| v.as_deref())
    }

    pub fn number(&self, name: &str, default: u64) -> Result<u64, String> {
        match self.value(name) {
            None => Ok(default),
            Some(v) => v
                .parse()
                .map_err(|_| format!("--{name} takes a whole number, not {v:?}")),
        }
    }
}

fn synth(args: &[String]) -> Result<(), String> {
    let flags = Flags::parse(args, &["records", "seed", "o", "output"], &[])?;
    let [format] = flags.positional.as_slice() else {
        return Err("usage: cargo xtask synth FORMAT --records N [--seed S] -o FILE".into());
    };
    let f = formats::find(format)?;
    let synth = f
        .synth
        .ok_or_else(|| format!("{} has no synthetic generator yet", f.name))?;
    let records = flags.number("records", 1_000_000)?;
    let seed = flags.number("seed", 1)?;
    let out = flags
        .value("o")
        .or(flags.value("output"))
        .ok_or("-o FILE is required")?;
    let bytes = synth(records, seed);
    std::fs::write(out, &bytes).map_err(|e| format!("cannot write {out}: {e}"))?;
    eprintln!("wrote {out}: {} records, {} bytes", records, bytes.len());
    Ok(())
}
