//! `tracekit bbv FILE --slice N -o OUT.bb [--map OUT.csv] [--global] [--loop-bounded]`:
//! basic-block vectors in SimPoint's `.bb` format, one file per thread (`OUT.T<thread>.bb`,
//! `OUT.P<pid>.T<thread>.bb` when a DCFG-Trace's DCFG has several processes) or one over
//! the merged timeline (`--global`: `OUT.bb`). The analysis is
//! `trace_analyses::bbv`; every file is written under a temporary name and renamed
//! once the whole input has been read, so a failure leaves no partial output.

use std::ffi::OsString;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use clap::Args;
use trace_analyses::bbv::{BbvOptions, StreamKey, bbv, write_map_csv};
use trace_registry::output::AtomicFile;
use trace_registry::{Ctx, Handler, Input, Options};

use super::args;
use crate::CliError;

/// Arguments of `tracekit bbv`.
#[derive(Debug, Clone, Args)]
pub struct BbvArgs {
    /// The trace (any format with an instruction stream, or a DCFG-Trace with --dcfg), or
    /// - for stdin.
    pub file: OsString,
    /// The slice size in instructions: a slice ends at the end of the block during which
    /// its count reaches N (`K`, `M`, `G`: thousands, millions, billions; `--slice 1M`).
    #[arg(long, value_name = "N", value_parser = args::positive_count, allow_negative_numbers = true)]
    pub slice: u64,
    /// The output: `OUT.T<thread>.bb` per thread (`OUT.P<pid>.T<thread>.bb` for several
    /// processes), or `OUT.bb` with --global.
    #[arg(long, short, alias = "out", value_name = "OUT.bb")]
    pub output: PathBuf,
    /// Also write the block ids as CSV: id,process,block,pc,instructions,symbol.
    #[arg(long, value_name = "OUT.csv")]
    pub map: Option<PathBuf>,
    /// One vector stream over the merged timeline (threads in file order) instead of one
    /// per thread.
    #[arg(long)]
    pub global: bool,
    /// LoopPoint's boundaries: a slice that has reached N ends at the next entry into a
    /// loop header (DCFG-Trace with --dcfg).
    #[arg(long)]
    pub loop_bounded: bool,
}

/// The file of one stream: `OUT.bb` for the merged timeline, else `OUT` without its `.bb`
/// extension, then `.P<pid>` (several processes) and `.T<thread>.bb`.
#[must_use]
pub fn stream_path(output: &Path, key: Option<StreamKey>, processes: bool) -> PathBuf {
    let Some(k) = key else {
        return output.to_owned();
    };
    let text = output.as_os_str().to_string_lossy();
    let base = match text.strip_suffix(".bb") {
        Some(b) if output.extension().is_some_and(|e| e == "bb") => b.to_owned(),
        _ => text.into_owned(),
    };
    let mut p = OsString::from(base);
    if processes {
        p.push(format!(".P{}", k.process));
    }
    p.push(format!(".T{}.bb", k.thread));
    PathBuf::from(p)
}

/// Writes the vectors (and the map); prints each file with its slices and instructions
/// on `summary`.
///
/// # Errors
///
/// `--loop-bounded` without loops, or an input without blocks (exit 2); an output that
/// exists without `force`, a damaged input or a DCFG of another run (exit 1, no output
/// kept); a write error.
pub fn run(
    handler: &dyn Handler,
    mut input: Input,
    options: &Options,
    args: &BbvArgs,
    force: bool,
    summary: &mut dyn Write,
) -> Result<(), CliError> {
    if let Some(map) = &args.map {
        super::refuse_existing(map, force)?;
    }
    if args.loop_bounded && (!handler.offers().loop_bounded_blocks || options.dcfg.is_none()) {
        return Err(CliError::Usage(
            "--loop-bounded needs a DCFG-Trace and its DCFG (--dcfg F.dcfg.json[.bz2]): the loops are in the DCFG"
                .into(),
        ));
    }
    let mut blocks = handler
        .blocks(&mut input, &mut Ctx::new(options))
        .map_err(CliError::usage_if_unsupported)?;
    let processes = blocks.processes().is_some_and(|n| n > 1);
    let opts = BbvOptions {
        slice: args.slice,
        global: args.global,
        loop_bounded: args.loop_bounded,
    };
    let mut existing = None;
    let result = bbv(&mut *blocks, &opts, |key| {
        let path = stream_path(&args.output, key, processes);
        super::create_output(&path, force, &mut existing)
    });
    let result = match (result, existing) {
        (Err(_), Some(e)) => return Err(e),
        (r, _) => r.map_err(CliError::usage_if_unsupported)?,
    };
    let map = match &args.map {
        Some(path) => {
            let cannot = |e| CliError::io(format!("cannot write {}", path.display()), e);
            let mut file = BufWriter::new(AtomicFile::create(path).map_err(cannot)?);
            write_map_csv(&result.map, result.keys, &mut file).map_err(cannot)?;
            Some(file.into_inner().map_err(|e| cannot(e.into_error()))?)
        }
        None => None,
    };
    // Every file is renamed only once the whole input has been read.
    let mut lines = Vec::new();
    for s in result.streams {
        let file = s
            .out
            .into_inner()
            .map_err(|e| CliError::io("cannot write a .bb file", e.into_error()))?;
        let to = file.dest().to_owned();
        file.commit()
            .map_err(|e| CliError::io(format!("cannot write {}", to.display()), e))?;
        lines.push(format!(
            "{}: {} slices, {} instructions",
            to.display(),
            s.slices,
            s.instructions
        ));
    }
    if let Some(file) = map {
        let to = file.dest().to_owned();
        file.commit()
            .map_err(|e| CliError::io(format!("cannot write {}", to.display()), e))?;
        lines.push(format!("{}: {} blocks", to.display(), result.map.len()));
    }
    for l in lines {
        writeln!(summary, "{l}")?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stream_paths() {
        let key = Some(StreamKey {
            process: 7,
            thread: 12,
        });
        let p = |o: &str, key, procs| stream_path(Path::new(o), key, procs);
        assert_eq!(p("out.bb", key, false), PathBuf::from("out.T12.bb"));
        assert_eq!(p("d/out.bb", key, true), PathBuf::from("d/out.P7.T12.bb"));
        assert_eq!(p("out", key, false), PathBuf::from("out.T12.bb"));
        assert_eq!(p("out.bb", None, true), PathBuf::from("out.bb"));
    }
}
