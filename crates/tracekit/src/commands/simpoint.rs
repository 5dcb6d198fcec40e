//! `tracekit simpoint F.bb --max-k K`: SimPoint 3.2's method ([`simpoint::cluster`]) on a
//! `.bb` file, writing `F.simpoints` and `F.weights` beside it (or `PREFIX.simpoints` and
//! `PREFIX.weights` with `-o PREFIX`) in SimPoint's formats, both renamed into place
//! only once both are complete. It warns (on stderr) when the chosen k is `--max-k` (a
//! larger one might fit better) and when slice lengths differ more than 2× without
//! `--weight-by-instructions` (each slice then weighs the same, whatever its length).
//!
//! Input: one `.bb` stream (`tracekit bbv --global`, or any SimPoint input), or several, one
//! per thread, whose slice `i` covers the same stretch of the run in every file (LoopPoint's
//! per-thread vectors of one global slice): the vectors of a slice are then concatenated
//! (each file's blocks are their own dimensions) before normalising, as LoopPoint does.
//! The files must have as many slices each. The file is read once, keeping only `--dim`
//! numbers per slice.

use std::fs::File;
use std::io::{BufReader, BufWriter, Write};
use std::path::{Path, PathBuf};

use clap::{Args, ValueEnum};
use simpoint::bb::{Item, Reader};
use simpoint::cluster::{self, Clustering, Init, Options, Projection};
use simpoint::simpoints;
use trace_registry::output::AtomicFile;

use crate::CliError;

/// How k-means starts (`--init`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum InitArg {
    /// k distinct random slices.
    Random,
    /// A random slice, then repeatedly the slice farthest from those chosen.
    Furthest,
}

/// Arguments of `tracekit simpoint`.
#[derive(Debug, Clone, Args)]
pub struct SimpointArgs {
    /// The `.bb` file; or several, one per thread, with the same slices (concatenated slice
    /// by slice; then `-o` is required).
    #[arg(required = true, value_name = "F.bb")]
    pub files: Vec<PathBuf>,
    /// The largest number of clusters tried (every k from 1 up to it, at most the slices).
    #[arg(long, value_name = "K", value_parser = clap::value_parser!(u64).range(1..=100_000))]
    pub max_k: u64,
    /// The dimensions of the random projection.
    #[arg(long, value_name = "D", default_value_t = 15, value_parser = clap::value_parser!(u64).range(1..=4096))]
    pub dim: u64,
    /// The seed of the projection and the k-means starts (the same seed, the same output).
    #[arg(long, value_name = "S", default_value_t = 0)]
    pub seed: u64,
    /// k-means starts per k (the best is kept).
    #[arg(long, value_name = "N", default_value_t = 5, value_parser = clap::value_parser!(u64).range(1..=10_000))]
    pub init_seeds: u64,
    /// How k-means starts: `random` distinct slices, or `furthest`-first.
    #[arg(long, value_enum, default_value_t = InitArg::Random)]
    pub init: InitArg,
    /// The chosen k is the smallest whose BIC reaches this fraction of the range between
    /// the worst and best scores.
    #[arg(long, value_name = "F", default_value_t = 0.9)]
    pub bic_threshold: f64,
    /// Weights (and the clustering) by instructions instead of counting every slice once,
    /// for slices of unequal length (LoopPoint's).
    #[arg(long)]
    pub weight_by_instructions: bool,
    /// Write PREFIX.simpoints and PREFIX.weights (default: beside the `.bb` file, its name
    /// without `.bb`).
    #[arg(long, short, alias = "out", value_name = "PREFIX")]
    pub output: Option<PathBuf>,
    /// Also print the BIC and distortion of every k.
    #[arg(long, short)]
    pub verbose: bool,
    /// The summary as one JSON object (with every k's score).
    #[arg(long)]
    pub json: bool,
}

/// `PREFIX.ext` (the extension appended, not replacing anything after a dot in PREFIX).
pub fn with_ext(prefix: &Path, ext: &str) -> PathBuf {
    let mut p = prefix.as_os_str().to_owned();
    p.push(".");
    p.push(ext);
    PathBuf::from(p)
}

/// `F` of `F.bb` (`F.bb.gz` is not read), or the whole name when it does not end in `.bb`.
pub fn stem(bb: &Path) -> PathBuf {
    match bb.to_str().and_then(|s| s.strip_suffix(".bb")) {
        Some(s) if !s.is_empty() => PathBuf::from(s),
        _ => bb.to_owned(),
    }
}

/// Opens a `.bb` file for reading.
pub fn open_bb(path: &Path) -> Result<Reader<BufReader<File>>, CliError> {
    let f =
        File::open(path).map_err(|e| CliError::io(format!("cannot open {}", path.display()), e))?;
    Ok(Reader::new(BufReader::with_capacity(1 << 20, f)))
}

/// A `.bb` reading error, naming the file.
pub fn bb_error(path: &Path, e: &simpoint::bb::Error) -> CliError {
    CliError::Failed(format!("{}: {e}", path.display()))
}

/// Runs the command.
///
/// # Errors
///
/// Bad options (exit 2); an unreadable or damaged `.bb` file, one without slices, or files
/// of different slice counts (exit 1); an output that exists without `force`; the outputs
/// cannot be written.
pub fn run(
    args: &SimpointArgs,
    force: bool,
    quiet: bool,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> Result<(), CliError> {
    let usize_of = |v: u64| usize::try_from(v).unwrap_or(usize::MAX);
    let options = Options {
        max_k: usize_of(args.max_k),
        dim: usize_of(args.dim),
        seed: args.seed,
        init_seeds: usize_of(args.init_seeds),
        init: match args.init {
            InitArg::Random => Init::Random,
            InitArg::Furthest => Init::FurthestFirst,
        },
        bic_threshold: args.bic_threshold,
        ..Options::default()
    };
    cluster::check_options(&options).map_err(|e| CliError::Usage(e.to_string()))?;
    let prefix = match (&args.output, args.files.as_slice()) {
        (Some(p), _) => p.clone(),
        (None, [one]) => stem(one),
        (None, _) => {
            return Err(CliError::Usage(
                "several .bb files make one clustering: give -o PREFIX".into(),
            ));
        }
    };
    for ext in ["simpoints", "weights"] {
        super::refuse_existing(&with_ext(&prefix, ext), force)?;
    }
    let (projection, lengths) = project(&args.files, &options, args.weight_by_instructions)?;
    let slices = projection.len();
    if slices == 0 {
        return Err(CliError::Failed(format!(
            "{}: no slices (T: lines) to cluster",
            args.files
                .first()
                .map_or_else(String::new, |p| p.display().to_string())
        )));
    }
    let limit = cluster::k_limit(options.max_k, slices);
    if limit < options.max_k {
        writeln!(
            err,
            "note: {slices} slices: k goes up to {limit}, not --max-k {} (the BIC needs fewer clusters than slices)",
            options.max_k
        )?;
    }
    let points = projection.finish();
    let result =
        cluster::cluster(&points, &options).map_err(|e| CliError::Failed(e.to_string()))?;
    if result.k == options.max_k && slices > result.k {
        writeln!(
            err,
            "warning: the chosen k is --max-k {}: a larger --max-k may fit the phases better",
            options.max_k
        )?;
    }
    if !args.weight_by_instructions
        && let Some(w) = lengths.warning()
    {
        writeln!(err, "{w}")?;
    }
    let paths = write_outputs(&prefix, &result)?;
    report(args, &result, slices, &paths, out)?;
    if !quiet {
        let [sp_path, w_path] = &paths;
        writeln!(
            err,
            "{}, {}: {} simulation points of {slices} slices (k of 1..={}, BIC threshold {})",
            sp_path.display(),
            w_path.display(),
            result.k,
            result.scores.len(),
            args.bic_threshold
        )?;
    }
    Ok(())
}

/// The shortest and longest slice (in instructions, over every file), and where they are.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
struct Lengths {
    /// The shortest slice's length and index.
    shortest: Option<(f64, usize)>,
    /// The longest slice's length and index.
    longest: Option<(f64, usize)>,
}

impl Lengths {
    fn push(&mut self, length: f64, slice: usize) {
        if self.shortest.is_none_or(|(l, _)| length < l) {
            self.shortest = Some((length, slice));
        }
        if self.longest.is_none_or(|(l, _)| length > l) {
            self.longest = Some((length, slice));
        }
    }

    /// The warning when the longest slice is more than twice the shortest.
    fn warning(&self) -> Option<String> {
        let ((short, i), (long, j)) = (self.shortest?, self.longest?);
        (long > 2.0 * short).then(|| {
            format!(
                "warning: slice lengths differ more than 2x (slice {i}: {short} instructions, \
                 slice {j}: {long}): every slice weighs the same; --weight-by-instructions \
                 weighs them by their length"
            )
        })
    }
}

/// Reads every file in step, one global slice at a time, into the projection; and the
/// range of slice lengths.
fn project(
    files: &[PathBuf],
    options: &Options,
    by_instructions: bool,
) -> Result<(Projection, Lengths), CliError> {
    let mut projection =
        Projection::new(options.dim, options.seed).map_err(|e| CliError::Usage(e.to_string()))?;
    let mut readers = files
        .iter()
        .map(|p| open_bb(p))
        .collect::<Result<Vec<_>, _>>()?;
    let mut counts: Vec<(u64, u64, f64)> = Vec::new();
    let mut lengths = Lengths::default();
    loop {
        counts.clear();
        let mut ended = Vec::new();
        for ((reader, path), stream) in readers.iter_mut().zip(files).zip(0u64..) {
            let got = loop {
                match reader.next_item() {
                    None => break false,
                    Some(Err(e)) => return Err(bb_error(path, &e)),
                    Some(Ok(Item::Marker(_))) => {}
                    Some(Ok(Item::Slice(entries))) => {
                        counts.extend(entries.iter().map(|e| (stream, u64::from(e.id), e.count)));
                        break true;
                    }
                }
            };
            if !got {
                ended.push(path);
            }
        }
        if ended.len() == files.len() {
            return Ok((projection, lengths));
        }
        if let Some(path) = ended.first() {
            return Err(CliError::Failed(format!(
                "{} ends after {} slices, but {} has more: per-thread .bb files must have the same slices",
                path.display(),
                projection.len(),
                files
                    .iter()
                    .find(|f| !ended.contains(f))
                    .map_or_else(String::new, |f| f.display().to_string()),
            )));
        }
        let length: f64 = counts.iter().map(|c| c.2).sum();
        lengths.push(length, projection.len());
        let weight = if by_instructions { length } else { 1.0 };
        projection
            .push(counts.iter().copied(), weight)
            .map_err(|e| CliError::Failed(e.to_string()))?;
    }
}

/// Writes both files under temporary names, then renames both.
fn write_outputs(prefix: &Path, result: &Clustering) -> Result<[PathBuf; 2], CliError> {
    let (points, weights) = simpoints::from_clustering(result);
    let paths = [with_ext(prefix, "simpoints"), with_ext(prefix, "weights")];
    let [sp_path, w_path] = &paths;
    let create = |p: &Path| {
        AtomicFile::create(p).map_err(|e| CliError::io(format!("cannot create {}", p.display()), e))
    };
    let write_err = |p: &Path| {
        let what = format!("cannot write {}", p.display());
        move |e| CliError::io(what, e)
    };
    let mut sp_file = create(sp_path)?;
    let mut w_file = create(w_path)?;
    {
        let mut w = BufWriter::new(&mut sp_file);
        simpoints::write_simpoints(&mut w, &points).map_err(write_err(sp_path))?;
        w.flush().map_err(write_err(sp_path))?;
    }
    {
        let mut w = BufWriter::new(&mut w_file);
        simpoints::write_weights(&mut w, &weights).map_err(write_err(w_path))?;
        w.flush().map_err(write_err(w_path))?;
    }
    sp_file.commit().map_err(write_err(sp_path))?;
    w_file.commit().map_err(write_err(w_path))?;
    Ok(paths)
}

/// What `--json` or `--verbose` asks for, on stdout: the whole clustering as one JSON
/// object, or the score of every k (the summary line goes to stderr).
fn report(
    args: &SimpointArgs,
    result: &Clustering,
    slices: usize,
    [sp_path, w_path]: &[PathBuf; 2],
    out: &mut dyn Write,
) -> Result<(), CliError> {
    if args.json {
        let v = serde_json::json!({
            "slices": slices,
            "k": result.k,
            "simpoints": result.simpoints,
            "weights": result.weights,
            "scores": result.scores.iter().map(|s| serde_json::json!({
                "k": s.k,
                "bic": s.bic,
                "distortion": s.distortion,
                "iterations": s.iterations,
            })).collect::<Vec<_>>(),
            "simpoints_file": sp_path.display().to_string(),
            "weights_file": w_path.display().to_string(),
        });
        writeln!(out, "{v}")?;
    } else if args.verbose {
        writeln!(
            out,
            "{:>5} {:>16} {:>14} {:>6}",
            "k", "BIC", "distortion", "iters"
        )?;
        for s in &result.scores {
            let mark = if s.k == result.k { " <" } else { "" };
            writeln!(
                out,
                "{:>5} {:>16.3} {:>14.6} {:>6}{mark}",
                s.k, s.bic, s.distortion, s.iterations
            )?;
        }
    }
    Ok(())
}
