//! `tracekit regions F.bb`: the simulation points of `tracekit simpoint` as a LoopPoint-style
//! region CSV ([`simpoint::regions`]): for each cluster the (pc, count) markers where its
//! slice starts and ends, its length, weight and multiplier. Reads `F.simpoints` and
//! `F.weights` beside the `.bb` file unless `--simpoints` / `--weights` say otherwise.

use std::io::Write;
use std::path::{Path, PathBuf};

use clap::Args;
use simpoint::bb::Item;
use simpoint::regions::{self, Slices, ThreadId};
use simpoint::simpoints;

use super::simpoint::{bb_error, open_bb, stem, with_ext};
use crate::CliError;

/// Arguments of `tracekit regions`.
#[derive(Debug, Clone, Args)]
pub struct RegionsArgs {
    /// The `.bb` file the simulation points were chosen from (its `T:` and `M:` lines).
    #[arg(value_name = "F.bb")]
    pub file: PathBuf,
    /// The `.simpoints` file (default: F.simpoints beside F.bb).
    #[arg(long, value_name = "FILE")]
    pub simpoints: Option<PathBuf>,
    /// The `.weights` file (default: F.weights beside F.bb).
    #[arg(long, value_name = "FILE")]
    pub weights: Option<PathBuf>,
    /// The `thread-id` column: a thread number or `global` (default: the `T<n>` of a
    /// `….T<n>.bb` name, else `global`).
    #[arg(long, alias = "thread-id", value_name = "T", value_parser = thread_id)]
    pub thread: Option<ThreadId>,
    /// Write the CSV here instead of stdout.
    #[arg(long, short, alias = "out", value_name = "OUT.csv")]
    pub output: Option<PathBuf>,
}

fn thread_id(s: &str) -> Result<ThreadId, String> {
    if s == "global" {
        return Ok(ThreadId::Global);
    }
    s.parse()
        .map(ThreadId::Thread)
        .map_err(|_| format!("{s:?} is neither a thread number nor `global`"))
}

/// The thread of `OUT.T<n>.bb` or `OUT.P<pid>.T<n>.bb` (as `tracekit bbv` names them).
fn thread_of(bb: &Path) -> ThreadId {
    stem(bb)
        .extension()
        .and_then(|e| e.to_str())
        .and_then(|e| e.strip_prefix('T'))
        .and_then(|t| t.parse().ok())
        .map_or(ThreadId::Global, ThreadId::Thread)
}

fn read_text(path: &Path) -> Result<Vec<u8>, CliError> {
    std::fs::read(path).map_err(|e| CliError::io(format!("cannot read {}", path.display()), e))
}

/// Writes the CSV to `out`; returns how many regions (rows) it has.
///
/// # Errors
///
/// A file cannot be read or is damaged, or the simpoints and weights do not fit the `.bb`
/// file (exit 1).
pub fn run(args: &RegionsArgs, out: &mut dyn Write) -> Result<usize, CliError> {
    let prefix = stem(&args.file);
    let sp_path = args
        .simpoints
        .clone()
        .unwrap_or_else(|| with_ext(&prefix, "simpoints"));
    let w_path = args
        .weights
        .clone()
        .unwrap_or_else(|| with_ext(&prefix, "weights"));
    let parse_err =
        |p: &Path, e: simpoints::ParseError| CliError::Failed(format!("{}: {e}", p.display()));
    let points =
        simpoints::parse_simpoints(&read_text(&sp_path)?).map_err(|e| parse_err(&sp_path, e))?;
    let weights =
        simpoints::parse_weights(&read_text(&w_path)?).map_err(|e| parse_err(&w_path, e))?;
    let mut reader = open_bb(&args.file)?;
    let mut slices = Slices::new();
    while let Some(item) = reader.next_item() {
        match item.map_err(|e| bb_error(&args.file, &e))? {
            Item::Slice(entries) => slices.slice(entries.iter().map(|e| e.count).sum()),
            Item::Marker(m) => slices.marker(m.pc, m.count),
        }
    }
    let slices = slices.finish();
    let rows = regions::regions(&slices, &points, &weights).map_err(|e| {
        CliError::Failed(format!(
            "{} and {}: {e}",
            sp_path.display(),
            w_path.display()
        ))
    })?;
    let thread = args.thread.unwrap_or_else(|| thread_of(&args.file));
    regions::write_csv(out, thread, &rows)?;
    Ok(rows.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thread_from_the_name() {
        assert_eq!(thread_of(Path::new("run.T12.bb")), ThreadId::Thread(12));
        assert_eq!(thread_of(Path::new("d/run.P3.T0.bb")), ThreadId::Thread(0));
        assert_eq!(thread_of(Path::new("run.bb")), ThreadId::Global);
        assert_eq!(thread_of(Path::new("run.Tx.bb")), ThreadId::Global);
        assert_eq!(thread_id("global"), Ok(ThreadId::Global));
        assert!(thread_id("-1").is_err());
    }
}
