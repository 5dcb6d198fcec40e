//! `cargo xtask bench`: for each format, a synthetic input of at least 256 MiB; in one process
//! it times a baseline scan that reads every byte and the format's full decode, and prints
//! throughput and their ratio (medians of several runs). Each format also gets a `dump` row
//! (JSON Lines), `export` rows (Parquet on one and two threads, the release binary end to
//! end) and, for x64dbg and DCFG-Trace, the `dump | duckdb` pipeline users run without
//! `export`; x64dbg also a `dump --disasm` row next to its plain `dump`, rows for `xref`
//! (the lean scan and the generic steps), the index pass, the sidecar build, `state`
//! (without the sidecar, and with it on a trace of `--state-gib` GiB, default 1), `mem`
//! (the pass, and with the sidecar), `tracekit serve` over HTTP on the `--state-gib` trace
//! (first rows after start, then rows, `state`, `mem` with the index), `diff (equal)`,
//! and the Arrow batches of the Python
//! package's `to_arrow()` (typed fast path and visited). Named rows run only when named:
//! `simpoint`, `record` (the ptrace recorder) and `gdbserver` (GDB's round trips on a
//! `--state-gib` trace with its sidecar, or `--trace FILE`: `bench_gdbserver.rs`). Ratios
//! are what to compare: absolute speeds drift on shared machines.

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

impl BenchCase {
    /// A row whose `run` reads `input` shared with the reader (`Input::from_shared`), as
    /// the commands read a mapped file, rather than copied in the timed part.
    pub fn shared(
        name: impl Into<String>,
        input: &Arc<Vec<u8>>,
        unit: &'static str,
        run: impl Fn(&Arc<[u8]>) -> u64 + 'static,
    ) -> BenchCase {
        let shared: Arc<[u8]> = Arc::from(input.as_slice());
        BenchCase {
            name: name.into(),
            input: Arc::clone(input),
            unit,
            run: Box::new(move |_| run(&shared)),
        }
    }
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
    // Checked before the release build: a typo fails at once.
    let flags = Flags::parse(args, &["mib", "runs", "state-gib", "trace"], &[])?;
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
    let config = BenchConfig {
        mib: flags.number("mib", 256)?,
    };
    let runs = flags.number("runs", 5)?.max(1);
    // The size of the trace of the `state` row with the sidecar (0: no row).
    let state_gib = flags.number("state-gib", 1)?;
    // `simpoint` is not a format: its rows (`simpoint_rows`) run only when named.
    let simpoint = flags.positional.iter().any(|p| p == "simpoint");
    // `record` (the ptrace recorder against a bare step loop) runs only when named too.
    let record = flags.positional.iter().any(|p| p == "record");
    // `gdbserver` (GDB's round trips on a `--state-gib` trace, or `--trace FILE`) too.
    let gdbserver = flags.positional.iter().any(|p| p == "gdbserver");
    let named: Vec<&String> = flags
        .positional
        .iter()
        .filter(|p| *p != "simpoint" && *p != "record" && *p != "gdbserver")
        .collect();
    let chosen: Vec<_> = if named.is_empty() && !simpoint && !record && !gdbserver {
        formats::ALL.to_vec()
    } else {
        named
            .iter()
            .map(|n| formats::find(n))
            .collect::<Result<_, _>>()?
    };
    // The export and record rows run the release binary (the simpoint rows alone do not).
    if !chosen.is_empty() || record || gdbserver {
        crate::run(
            std::process::Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
                .args(["build", "--release", "--quiet", "--package", "tracekit"]),
        )?;
    }
    let tracekit = crate::root().join("target/release/tracekit");
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
        if let Some(row) = dump_case(f.name, &cases, false) {
            print_row(&row, runs);
        }
        if f.name == "x64dbg"
            && let Some(row) = dump_case(f.name, &cases, true)
        {
            print_row(&row, runs);
        }
        for row in export_cases(f.name, &cases, &tracekit)? {
            print_row(&row, runs);
        }
        for row in arrow_cases(f.name, &cases) {
            print_row(&row, runs);
        }
        if f.name == "x64dbg" {
            state_rows(&cases, runs);
            state_sidecar_row(&cases, runs, state_gib);
            mem_rows(&cases, runs);
            serve_row(&cases, runs, state_gib, &tracekit);
        }
        if f.name == "x64dbg"
            && let Some(row) = diff_case(&cases)
        {
            print_row(&row, runs);
        }
    }
    if simpoint {
        simpoint_rows(runs);
    }
    if record {
        crate::bench_record::rows(runs, &tracekit)?;
    }
    if gdbserver {
        crate::bench_gdbserver::rows(runs, &tracekit, flags.value("trace"), state_gib)?;
    }
    // The export rows' inputs and datasets.
    let _ = std::fs::remove_dir_all(
        std::env::temp_dir().join(format!("tracekit-bench-{}", std::process::id())),
    );
    Ok(())
}

/// The `export` rows of a format: `tracekit export` (Parquet) end to end on the input of
/// its `dump` row, on one thread and on two; for x64dbg and DCFG-Trace also what users do
/// without it, `tracekit dump FILE | duckdb` turning the JSON Lines into Parquet, when the
/// duckdb Python package is installed. Each runs the release binary on the input written to
/// a temporary file; units are the rows of the format's main table.
fn export_cases(
    format: &str,
    cases: &[BenchCase],
    tracekit: &std::path::Path,
) -> Result<Vec<BenchCase>, String> {
    let Some(dump) = dump_case(format, cases, false) else {
        return Ok(Vec::new());
    };
    let name = dump.name.trim_end_matches(" dump (JSON Lines)").to_owned();
    let dir = std::env::temp_dir().join(format!("tracekit-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    // amber TT6 has no magic: the extension says it.
    let file = dir.join(if format == "amber" {
        "input.tt6"
    } else {
        "input"
    });
    std::fs::write(&file, &*dump.input).map_err(|e| e.to_string())?;
    let out = dir.join("dataset");
    let mut rows = Vec::new();
    for threads in [1, 2] {
        let (tracekit, file, out) = (tracekit.to_path_buf(), file.clone(), out.clone());
        rows.push(BenchCase {
            name: format!("{name} export (Parquet, {threads} thr)"),
            input: dump.input.clone(),
            unit: "records",
            run: Box::new(move |_| {
                let status = std::process::Command::new(&tracekit)
                    .args([
                        "-q",
                        "export",
                        "--force",
                        "--threads",
                        &threads.to_string(),
                        "-o",
                    ])
                    .arg(&out)
                    .arg(&file)
                    .stdout(std::process::Stdio::null())
                    .status()
                    .expect("run tracekit export");
                assert!(status.success(), "tracekit export failed");
                main_rows(&out)
            }),
        });
    }
    let has_duckdb = std::process::Command::new("python3")
        .args(["-c", "import duckdb"])
        .status()
        .is_ok_and(|s| s.success());
    if has_duckdb && (format == "x64dbg" || format == "dcfg-trace") {
        let script = dir.join("jsonl_to_parquet.py");
        std::fs::write(&script, JSONL_TO_PARQUET).map_err(|e| e.to_string())?;
        let pipeline = format!(
            "'{}' -q dump '{}' | python3 '{}' '{}'",
            tracekit.display(),
            file.display(),
            script.display(),
            dir.join("duckdb.parquet").display()
        );
        let work = dir.clone();
        rows.push(BenchCase {
            name: format!("{name} dump | duckdb (Parquet)"),
            input: dump.input.clone(),
            unit: "records",
            run: Box::new(move |_| {
                // In the temporary folder: DuckDB spills to `.tmp` in its working directory.
                let out = std::process::Command::new("sh")
                    .args(["-c", &pipeline])
                    .current_dir(&work)
                    .output()
                    .expect("run dump | duckdb");
                // DuckDB runs out of memory on long JSON lines (a DCFG-Trace chunk of a
                // million edges): the row then shows 0 records/s, and why goes to stderr.
                if !out.status.success() {
                    eprintln!(
                        "dump | duckdb failed ({}): {}",
                        out.status,
                        String::from_utf8_lossy(&out.stderr).trim()
                    );
                    return 0;
                }
                String::from_utf8_lossy(&out.stdout)
                    .trim()
                    .parse()
                    .unwrap_or(0)
            }),
        });
    }
    Ok(rows)
}

/// What users do without `tracekit export`: DuckDB reads `tracekit dump`'s JSON Lines from
/// stdin and writes them as Parquet; prints the row count.
const JSONL_TO_PARQUET: &str = r#"import sys, duckdb
out = sys.argv[1]
duckdb.execute(f"COPY (SELECT * FROM read_json_auto('/dev/stdin', format='newline_delimited')) TO '{out}' (FORMAT parquet)")
print(duckdb.execute(f"SELECT count(*) FROM read_parquet('{out}')").fetchall()[0][0])
"#;

/// The rows of the first table in a dataset's `_tracekit.json`.
/// The Arrow rows (x64dbg): the record batches of `instructions` that the Python package's
/// `to_arrow()` hands to pyarrow (every column, the register state included), built in
/// process from the input of the `dump` row through the reader's typed column fast path
/// (`Batches::pull`), and value by value through the generic visitor (`Batches::write`
/// of each record) for the ratio between them.
fn arrow_cases(format: &str, cases: &[BenchCase]) -> Vec<BenchCase> {
    if format != "x64dbg" {
        return Vec::new();
    }
    let Some(dump) = dump_case(format, cases, false) else {
        return Vec::new();
    };
    let Some(handler) = trace_registry::by_name(format) else {
        return Vec::new();
    };
    [("typed", true), ("visited", false)]
        .into_iter()
        .map(|(how, typed)| {
            BenchCase::shared(
                format!("{format} Arrow batches ({how})"),
                &dump.input,
                "rows",
                move |bytes| {
                    trace_sinks::testgen::arrow_rows(handler, bytes, "instructions", typed)
                },
            )
        })
        .collect()
}

fn main_rows(dataset: &std::path::Path) -> u64 {
    let text = std::fs::read_to_string(dataset.join("_tracekit.json")).unwrap_or_default();
    // `"rows": N` of the first table: the manifest is ours, so a plain search will do.
    text.split("\"rows\": ")
        .nth(1)
        .and_then(|r| r.split(|c: char| !c.is_ascii_digit()).next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

/// Times `case` and the baseline scan on its input and prints the row.
/// Prints the row of `case`; returns its median decode time in seconds.
fn print_row(case: &BenchCase, runs: u64) -> f64 {
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
    decode
}

/// The `dump` row of a format: `tracekit dump` end to end (the registry's records through
/// the JSON Lines sink into a writer that discards), on the first of the format's inputs
/// that the registry detects as it; input bytes per second. `disasm`: `dump --disasm`.
fn dump_case(format: &str, cases: &[BenchCase], disasm: bool) -> Option<BenchCase> {
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
        name: if disasm {
            format!("{} dump --disasm (JSON Lines)", handler.name())
        } else {
            format!("{} dump (JSON Lines)", handler.name())
        },
        input: case.input.clone(),
        unit: "records",
        run: Box::new(move |bytes| {
            let options = trace_registry::Options {
                disasm,
                ..trace_registry::Options::default()
            };
            let mut ctx = trace_registry::Ctx::new(&options);
            // The copy into an owned input is part of the cost (a memcpy: about 1% of it).
            let mut input = trace_registry::Input::from_bytes(file_name, bytes.to_vec()).unwrap();
            let mut records = handler.records(&mut input, &mut ctx).unwrap();
            let mut sink = trace_sinks::JsonLines::new(std::io::sink(), records.tables());
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

/// The `state` rows (x64dbg): `state --at N` through the registry as the command runs it
/// (the index pass over every block, then a seek to N near the end), and the seek alone
/// once the index is built, near the start and near the end (a binary search and at most
/// 512 instructions: the same time at any N), with the registers read.
fn state_rows(cases: &[BenchCase], runs: u64) {
    use std::cell::RefCell;
    use trace_analyses::state::state;
    let Some(case) = cases.first() else { return };
    let handler = trace_registry::by_name("x64dbg").unwrap();
    let options = trace_registry::Options::default();
    // One input, made before the timing (no copy of the trace per run).
    let input =
        RefCell::new(trace_registry::Input::from_bytes("bench", case.input.to_vec()).unwrap());
    let count = trac_x64dbg::Trace::parse(&case.input)
        .and_then(|t| t.build_index())
        .unwrap()
        .instructions();
    let at = count.saturating_sub(300);
    let command_options = options.clone();
    print_row(
        &BenchCase {
            name: "x64dbg state --at N (index + seek)".into(),
            input: case.input.clone(),
            unit: "instrs",
            run: Box::new(move |_| {
                let mut input = input.borrow_mut();
                let mut ctx = trace_registry::Ctx::new(&command_options);
                let s = state(handler, &mut input, &mut ctx, at).unwrap();
                black_box(s.regs.len());
                count
            }),
        },
        runs,
    );
    let mut input = trace_registry::Input::from_bytes("bench", case.input.to_vec()).unwrap();
    let mut ctx = trace_registry::Ctx::new(&options);
    let mut steps = handler.steps(&mut input, &mut ctx).unwrap();
    steps.seek(0).unwrap();
    let mut regs = Vec::new();
    let mut seek = |n: u64| {
        median_secs(runs.max(5) * 20, || {
            steps.seek(n).unwrap();
            steps.next_step().unwrap().unwrap();
            regs.clear();
            steps.named_regs(&mut regs);
            black_box(regs.len());
        })
    };
    let (start, end) = (seek(700), seek(at));
    println!(
        "{:<34} {:>9} seek + registers after the index: {:.1} µs at instruction 700, {:.1} µs at {at} of {count}",
        "x64dbg state seek (index built)",
        "",
        start * 1e6,
        end * 1e6,
    );
}

/// The `state` row with the sidecar (x64dbg): `state --at N` as the command runs it
/// (open the file, find and check the sidecar, load its seek index, seek, read every
/// register) on a trace of `gib` GiB, at instructions near its start, middle and end;
/// the latency of each (the issue's goal: under 50 ms at any N of a 1 GiB trace). The
/// trace is the x64dbg input's blocks repeated after its header (each copy a recording
/// session appended, as x64dbg appends them) in a temporary file.
fn state_sidecar_row(cases: &[BenchCase], runs: u64, gib: u64) {
    use trace_analyses::state::state;
    use trace_index as index;
    let Some(case) = cases.first() else { return };
    if gib == 0 {
        return;
    }
    let handler = trace_registry::by_name("x64dbg").unwrap();
    let options = trace_registry::Options::default();
    let dir = std::env::temp_dir().join(format!("tracekit-bench-state-{}", std::process::id()));
    let (path, count) = big_x64dbg(case, gib, &dir);
    let size = std::fs::metadata(&path).unwrap().len();
    let open = || trace_registry::Input::open(path.as_os_str()).unwrap();
    let built = Instant::now();
    index::build(
        handler,
        &mut open(),
        &mut trace_registry::Ctx::new(&options),
        None,
        index::BuildOptions::default(),
    )
    .unwrap();
    let built = built.elapsed().as_secs_f64();
    let mut row = Vec::new();
    for at in [700, count / 2 + 300, count - 300] {
        let secs = median_secs(runs.max(5), || {
            let mut notes = 0;
            let mut ctx = trace_registry::Ctx::new(&options).on_diagnostic(|_| notes += 1);
            let s = state(handler, &mut open(), &mut ctx, at).unwrap();
            drop(ctx);
            assert_eq!(notes, 0, "the sidecar was not used");
            black_box(s.regs.len());
        });
        row.push(format!("{:.1} ms at {at}", secs * 1e3));
    }
    println!(
        "{:<34} {:>9.1} state --at N with the sidecar ({count} instructions; sidecar built in {built:.1} s): {}",
        "x64dbg state (sidecar)",
        size as f64 / (1u64 << 20) as f64,
        row.join(", "),
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Writes an x64dbg trace of at least `gib` GiB into `dir` (the input's blocks repeated
/// after its header): its path and instruction count.
fn big_x64dbg(case: &BenchCase, gib: u64, dir: &std::path::Path) -> (std::path::PathBuf, u64) {
    let trace = trac_x64dbg::Trace::parse(&case.input).unwrap();
    let first = trace.first_block_offset().0 as usize;
    let blocks = &case.input[first..];
    let target = (gib << 30) as usize;
    let copies = target.saturating_sub(first).div_ceil(blocks.len()).max(1);
    std::fs::create_dir_all(dir).unwrap();
    let path = dir.join("big.trace64");
    {
        use std::io::Write;
        let mut f = std::io::BufWriter::new(std::fs::File::create(&path).unwrap());
        f.write_all(&case.input[..first]).unwrap();
        for _ in 0..copies {
            f.write_all(blocks).unwrap();
        }
        f.flush().unwrap();
    }
    let count = trace.build_index().unwrap().instructions() * copies as u64;
    (path, count)
}

/// The `serve` row (x64dbg): `tracekit serve` (the release binary) on the trace of
/// `--state-gib` GiB without a sidecar, over HTTP: the time from start to the first page
/// of 1,000 rows (the index is then still being built in the background), the time until
/// the index is ready, and then a page of 1,000 rows, `state` and `mem` (16 bytes at a
/// word accessed there, and the page's 256 bytes around rsp) near the end: medians of the
/// round trips.
fn serve_row(cases: &[BenchCase], runs: u64, gib: u64, tracekit: &std::path::Path) {
    use std::io::{BufRead, Read, Write};
    let Some(case) = cases.first() else { return };
    if gib == 0 {
        return;
    }
    let dir = std::env::temp_dir().join(format!("tracekit-bench-serve-{}", std::process::id()));
    let (path, count) = big_x64dbg(case, gib, &dir);
    let size = std::fs::metadata(&path).unwrap().len();
    let start = Instant::now();
    let mut child = std::process::Command::new(tracekit)
        .args(["serve", "--port", "0"])
        .arg(&path)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut url = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut url)
        .unwrap();
    let (port, token) = url
        .trim()
        .trim_start_matches("http://127.0.0.1:")
        .split_once("/?token=")
        .map(|(p, t)| (p.parse::<u16>().unwrap(), t.to_owned()))
        .unwrap();
    let get = |call: &str| -> String {
        let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        write!(
            s,
            "GET /api/{call}&token={token} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n"
        )
        .unwrap();
        let mut all = String::new();
        s.read_to_string(&mut all).unwrap();
        assert!(all.starts_with("HTTP/1.1 200"), "{call}: {all}");
        all.split_once("\r\n\r\n").unwrap().1.to_owned()
    };
    black_box(get("rows?from=0&count=1000"));
    let first_rows = start.elapsed().as_secs_f64();
    while !get("status?").contains("\"state\":\"ready\"") {
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let ready = start.elapsed().as_secs_f64();
    let late = count - 300;
    let rows = format!("rows?from={}&count=1000", late - 1000);
    let page = get(&rows);
    // The last word accessed in the page.
    let addr = page
        .rsplit("\"addr\":\"0x")
        .next()
        .and_then(|t| t.split('"').next())
        .and_then(|h| u64::from_str_radix(h, 16).ok())
        .unwrap();
    // The page's stack view: 256 bytes around rsp (some never accessed: the slow case).
    let state = get(&format!("state?i={late}"));
    let rsp = state
        .split_once("\"rsp\":\"0x")
        .and_then(|(_, t)| t.split('"').next())
        .and_then(|h| u64::from_str_radix(h, 16).ok())
        .unwrap();
    let mut times = Vec::new();
    for call in [
        rows,
        format!("state?i={late}"),
        format!("mem?i={late}&addr={addr:#x}&len=8"),
        format!("mem?i={late}&addr={:#x}&len=16", addr.saturating_sub(4)),
        format!("mem?i={late}&addr={:#x}&len=256", rsp.saturating_sub(128)),
    ] {
        let secs = median_secs(runs.max(5), || {
            black_box(get(&call));
        });
        times.push(format!("{:.1} ms", secs * 1e3));
    }
    let _ = child.kill();
    let _ = child.wait();
    println!(
        "{:<34} {:>9.1} first 1,000 rows {:.2} s after start, index ready at {:.1} s; then rows {}, state {}, mem of the word {}, 16 B around it {}, 256 B around rsp {} (at {late} of {count})",
        "x64dbg serve (HTTP)",
        size as f64 / (1u64 << 20) as f64,
        first_rows,
        ready,
        times[0],
        times[1],
        times[2],
        times[3],
        times[4],
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// The `mem` rows (x64dbg): `mem --at N ADDR 16` near the end of the trace (a file in a
/// temporary folder), at a word the trace accesses near N, by the pass over every step
/// before N and then with the sidecar index beside the trace (its nearest candidates, each
/// a seek of at most 512 instructions); latency of each, as the command runs it.
fn mem_rows(cases: &[BenchCase], runs: u64) {
    use trace_analyses::mem::{MemQuery, mem};
    use trace_index as index;
    let Some(case) = cases.first() else { return };
    let handler = trace_registry::by_name("x64dbg").unwrap();
    let options = trace_registry::Options::default();
    let dir = std::env::temp_dir().join(format!("tracekit-bench-mem-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("bench.trace64");
    std::fs::write(&path, case.input.as_slice()).unwrap();
    let open = || trace_registry::Input::open(path.as_os_str()).unwrap();
    // A word accessed shortly before N, and how many steps there are.
    let mut input = open();
    let mut steps = handler
        .steps(&mut input, &mut trace_registry::Ctx::new(&options))
        .unwrap();
    let count = {
        let mut n = 0u64;
        let mut addr = None;
        while let Some(step) = steps.next_step() {
            let step = step.unwrap();
            n = step.i + 1;
            if let Some(a) = step.mem.first() {
                addr = Some((step.i, a.addr));
            }
        }
        drop(steps);
        let Some((last, addr)) = addr else { return };
        (n, last, addr)
    };
    let (n, last, addr) = count;
    let query = MemQuery {
        at: last.min(n - 1),
        addr: addr.saturating_sub(4),
        len: Some(16),
    };
    let ask = || {
        let mut input = open();
        let (m, _) = mem(
            handler,
            &mut input,
            &mut trace_registry::Ctx::new(&options),
            &query,
        )
        .unwrap();
        m
    };
    let scanned = median_secs(runs, || {
        black_box(ask());
    });
    let without = ask();
    index::build(
        handler,
        &mut open(),
        &mut trace_registry::Ctx::new(&options),
        None,
        index::BuildOptions::default(),
    )
    .unwrap();
    let indexed = median_secs(runs.max(5) * 4, || {
        black_box(ask());
    });
    assert_eq!(ask(), without, "mem with the sidecar differs from the pass");
    println!(
        "{:<34} {:>9} mem --at {} {:#x} 16: {:.1} ms by the pass, {:.2} ms with the sidecar ({:.0}x)",
        "x64dbg mem (pass | sidecar)",
        "",
        query.at,
        query.addr,
        scanned * 1e3,
        indexed * 1e3,
        scanned / indexed,
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// The `diff (equal)` row: `tracekit diff` of the x64dbg input against a copy of itself
/// (the registry's `analyses::diff`, both in memory as memory-mapped files are);
/// instructions compared per second. The two inputs are made once, before the timing (a
/// copy of 2 × the input per run, page faults included, would cost more than the diff).
fn diff_case(cases: &[BenchCase]) -> Option<BenchCase> {
    use std::cell::RefCell;
    let case = cases.iter().find(|c| {
        trace_registry::detect_bytes(&c.input, "bench").is_some_and(|h| h.name() == "x64dbg")
    })?;
    let inputs = RefCell::new([
        trace_registry::Input::from_bytes("a", case.input.to_vec()).unwrap(),
        trace_registry::Input::from_bytes("b", case.input.to_vec()).unwrap(),
    ]);
    Some(BenchCase {
        name: "x64dbg diff (equal)".into(),
        input: case.input.clone(),
        unit: "instrs",
        run: Box::new(move |_| {
            use trace_analyses::diff::{DiffOptions, diff};
            let handler = trace_registry::by_name("x64dbg").unwrap();
            let options = trace_registry::Options::default();
            let mut inputs = inputs.borrow_mut();
            let [a, b] = &mut *inputs;
            let mut sa = handler
                .steps(a, &mut trace_registry::Ctx::new(&options))
                .unwrap();
            let mut sb = handler
                .steps(b, &mut trace_registry::Ctx::new(&options))
                .unwrap();
            let summary =
                diff(&mut *sa, &mut *sb, &DiffOptions::default(), &mut |_| Ok(())).unwrap();
            assert!(summary.is_equal(), "a trace differs from its copy");
            summary.compared
        }),
    })
}

/// The `simpoint` rows (`cargo xtask bench simpoint`): `tracekit simpoint`'s work, in
/// process and on one core, on the issue's size: a synthetic `.bb` of 10,000 slices over
/// 5,000 distinct blocks (1,000 per slice, 10 phases in runs of 1 to 50 slices), read and
/// projected to 15 dimensions, then k-means for every k in 1..=30 with 5 starts each and
/// the BIC choice. The goal is under 20 s end to end; units are slices.
fn simpoint_rows(runs: u64) {
    use simpoint::bb::{Item, Reader};
    use simpoint::cluster::{Options, Projection, cluster};

    let shape = simpoint::testgen::Shape {
        slices: 10_000,
        blocks: 5_000,
        per_slice: 1_000,
        phases: 10,
        seed: 1,
    };
    let (text, _) = simpoint::testgen::phases(shape).unwrap();
    let project = |bytes: &[u8]| {
        let mut p = Projection::new(15, 0).unwrap();
        let mut r = Reader::new(bytes);
        while let Some(item) = r.next_item() {
            if let Item::Slice(entries) = item.unwrap() {
                p.push(entries.iter().map(|e| (0, u64::from(e.id), e.count)), 1.0)
                    .unwrap();
            }
        }
        p
    };
    let input = Arc::new(text);
    print_row(
        &BenchCase {
            name: "simpoint read+project (.bb)".into(),
            input: Arc::clone(&input),
            unit: "slices",
            run: Box::new(move |b| project(b).len() as u64),
        },
        runs,
    );
    let case = BenchCase {
        name: "simpoint end to end (max-k 30)".into(),
        input,
        unit: "slices",
        run: Box::new(move |b| {
            let points = project(b).finish();
            let options = Options {
                max_k: 30,
                ..Options::default()
            };
            let c = cluster(&points, &options).unwrap();
            black_box(c.k);
            points.len() as u64
        }),
    };
    let cpu_before = thread_cpu_secs();
    let secs = print_row(&case, runs);
    // Wall time on a shared machine counts other processes' time too: the thread's CPU time
    // (Linux) is what one core spends (it includes the row's baseline scans, ~0.05 s each).
    let cpu = match (cpu_before, thread_cpu_secs()) {
        (Some(a), Some(b)) => format!(", {:.2} s CPU", (b - a) / runs as f64),
        _ => String::new(),
    };
    println!(
        "  simpoint: 10,000 slices of 1,000 of 5,000 blocks, max-k 30: {secs:.2} s wall (median of {runs}){cpu}; goal < 20 s"
    );
}

/// The CPU time of the calling thread in seconds, from `/proc/thread-self/schedstat`
/// (Linux; `None` elsewhere).
fn thread_cpu_secs() -> Option<f64> {
    let text = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    let ns: u64 = text.split_whitespace().next()?.parse().ok()?;
    Some(ns as f64 / 1e9)
}

/// `bbv` (slices of 1 M instructions) of `bytes` read as `format`, with the DCFG `dcfg`
/// for DCFG-Trace, whose chunks are decoded on `workers` threads (`None`: every core, as
/// `tracekit bbv` does); returns the instructions. The bytes are shared with the reader, as
/// a mapped file is, not copied in the timed part.
pub fn run_bbv(
    format: &str,
    bytes: &Arc<[u8]>,
    dcfg: Option<&std::path::Path>,
    workers: Option<usize>,
) -> u64 {
    use trace_analyses::bbv::{BbvOptions, bbv};
    let options = trace_registry::Options {
        dcfg: dcfg.map(std::path::Path::to_path_buf),
        ..trace_registry::Options::default()
    };
    let handler = trace_registry::by_name(format).unwrap();
    let mut input = trace_registry::Input::from_shared("bench", Arc::clone(bytes)).unwrap();
    let mut ctx = trace_registry::Ctx::new(&options);
    let mut blocks = match workers {
        Some(n) => {
            trace_registry::formats::dcfg_trace::dcfg_blocks(&mut input, &mut ctx, n).unwrap()
        }
        None => handler.blocks(&mut input, &mut ctx).unwrap(),
    };
    let opts = BbvOptions {
        slice: 1_000_000,
        global: false,
        loop_bounded: false,
    };
    let result = bbv(&mut *blocks, &opts, |_| Ok(std::io::sink())).unwrap();
    result.streams.iter().map(|s| s.instructions).sum()
}
