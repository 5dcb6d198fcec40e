//! Per-format hooks: fixtures, synthetic traces and benchmark cases. Each format module
//! exports one `TASKS` value; the tasks above use whichever hooks are set.

mod amber;
mod dcfg;
mod dcfg_trace;
mod gdb_tfile;
mod tenet;
mod x64dbg;
mod x64dbg_convert;

use crate::bench::{BenchCase, BenchConfig};
use crate::fixtures::Fixtures;

/// What a format contributes to the xtask tasks.
pub struct FormatTasks {
    /// The name used on the command line (`cargo xtask synth x64dbg`).
    pub name: &'static str,
    /// Adds the format's fixtures (under `testdata/`), made by its writer.
    pub fixtures: Option<fn(&mut Fixtures)>,
    /// A large, realistic, deterministic synthetic trace of about `records` records.
    pub synth: Option<fn(records: u64, seed: u64) -> Vec<u8>>,
    /// The benchmark rows: inputs of about `config.mib` MiB and the decoders to time.
    pub bench: Option<fn(&BenchConfig) -> Vec<BenchCase>>,
}

pub const ALL: &[&FormatTasks] = &[
    &x64dbg::TASKS,
    &gdb_tfile::TASKS,
    &dcfg::TASKS,
    &dcfg_trace::TASKS,
    &amber::TASKS,
    &tenet::TASKS,
];

pub fn find(name: &str) -> Result<&'static FormatTasks, String> {
    ALL.iter().copied().find(|f| f.name == name).ok_or_else(|| {
        format!(
            "unknown format {name:?}; formats: {}",
            ALL.iter().map(|f| f.name).collect::<Vec<_>>().join(", ")
        )
    })
}
