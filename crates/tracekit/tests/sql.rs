//! `tracekit export` read back by SQL engines: DuckDB checks every fixture's dataset against
//! `tracekit dump` (tests/sql/check_duckdb.py), Spark in local mode reads an x64dbg and a
//! DCFG-Trace dataset and agrees with DuckDB on a GROUP BY (tests/sql/check_spark.py); the
//! README's "Query with SQL" examples answer like `tracekit dump` in both engines
//! (tests/sql/check_readme.py); `export --help` documents every exported table and column;
//! plus `--partial` on a damaged input and `--force` on an existing folder.
//!
//! The Python checks need `python3` with `duckdb` (and `pyspark` plus `java` for Spark). When
//! one is missing the test prints "skipped: …" and passes, unless `TRACEKIT_REQUIRE_DUCKDB=1`
//! (resp. `TRACEKIT_REQUIRE_SPARK=1`, both set by CI), which makes that a failure.
// Test code: panicking on a failed expectation is the point.
#![allow(
    clippy::arithmetic_side_effects,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Instant;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn script(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/sql")
        .join(name)
}

/// A fresh temporary folder, removed when dropped.
struct TempDir(PathBuf);

impl TempDir {
    fn new(test: &str) -> TempDir {
        let p = std::env::temp_dir().join(format!("tracekit-sql-{}-{test}", std::process::id()));
        let _ = fs::remove_dir_all(&p);
        fs::create_dir_all(&p).unwrap();
        TempDir(p)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

fn tracekit<S: AsRef<std::ffi::OsStr>>(args: &[S]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tracekit"))
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

/// `tracekit export -q [EXTRA…] INPUT -o DIR`.
fn export(input: &Path, dir: &Path, extra: &[&str]) -> Output {
    let mut args: Vec<&std::ffi::OsStr> = vec!["export".as_ref(), "-q".as_ref()];
    args.extend(extra.iter().map(std::ffi::OsStr::new));
    args.extend([input.as_os_str(), "-o".as_ref(), dir.as_os_str()]);
    tracekit(&args)
}

fn show(o: &Output) -> String {
    format!(
        "exit {:?}\nstdout: {}\nstderr: {}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// Whether `python3` runs `code` (an import) and every other command of `tools` answers
/// `-version`; prints the skip message otherwise (or panics when `require` is set to 1).
fn available(test: &str, modules: &[&str], tools: &[&str], require: &str) -> bool {
    let mut missing = Vec::new();
    let python = Command::new("python3")
        .arg("-c")
        .arg(format!("import {}", modules.join(", ")))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
    match python {
        Err(_) => missing.push("python3".to_owned()),
        Ok(s) if !s.success() => missing.push(format!("python3 module(s) {}", modules.join(", "))),
        Ok(_) => {}
    }
    for t in tools {
        let ok = Command::new(t)
            .arg("-version")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            missing.push((*t).to_owned());
        }
    }
    if missing.is_empty() {
        return true;
    }
    if std::env::var_os(require).is_some_and(|v| v == "1") {
        panic!("{test}: {missing:?} not installed and {require}=1");
    }
    eprintln!("skipped {test}: {missing:?} not installed (set {require}=1 to fail instead)");
    false
}

fn run_python(script_name: &str, args: &[PathBuf]) {
    let start = Instant::now();
    let out = Command::new("python3")
        .arg(script(script_name))
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    eprintln!(
        "{script_name}: {:.1} s\n{}",
        start.elapsed().as_secs_f64(),
        String::from_utf8_lossy(&out.stdout)
    );
    assert!(
        out.status.success(),
        "{script_name} found problems:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Every fixture that `tracekit dump` reads without error: the files of each format's
/// testdata folder (not the `err-*` ones, not expectations) and the amber threads folder.
fn fixtures() -> Vec<PathBuf> {
    let mut v = Vec::new();
    for format in FORMATS {
        let dir = root().join("testdata").join(format);
        let mut entries: Vec<PathBuf> = fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        entries.sort();
        for p in entries {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            let skip = name.starts_with("err-")
                || [".expected", ".oracle", ".py", ".md"]
                    .iter()
                    .any(|s| name.ends_with(s));
            if !skip {
                v.push(p);
            }
        }
    }
    v
}

/// Dumps `input` into `path`; whether the dump succeeded.
fn dump_to(input: &Path, path: &Path) -> Output {
    let out = tracekit(&["dump".as_ref(), "-q".as_ref(), input.as_os_str()]);
    fs::write(path, &out.stdout).unwrap();
    out
}

fn manifest(dir: &Path) -> serde_json::Value {
    serde_json::from_slice(&fs::read(dir.join("_tracekit.json")).unwrap()).unwrap()
}

#[test]
fn duckdb_reads_every_fixture_like_dump() {
    let tmp = TempDir::new("duckdb");
    let mut args = Vec::new();
    let mut failures = Vec::new();
    let mut n = 0;
    for (k, input) in fixtures().iter().enumerate() {
        let name = format!(
            "{k:02}-{}",
            input
                .file_name()
                .unwrap()
                .to_string_lossy()
                .replace('.', "_")
        );
        let jsonl = tmp.0.join(format!("{name}.jsonl"));
        let dump = dump_to(input, &jsonl);
        if !dump.status.success() {
            // Not a readable fixture (a findings or damaged file): nothing to compare.
            continue;
        }
        n += 1;
        let dir = tmp.0.join(&name);
        let out = export(input, &dir, &[]);
        if !out.status.success() {
            failures.push(format!(
                "tracekit export {} failed though dump reads it:\n{}",
                input.display(),
                show(&out)
            ));
            continue;
        }
        args.push(dir);
        args.push(jsonl);
    }
    assert!(n >= 20, "only {n} fixtures found");
    if available(
        "duckdb_reads_every_fixture_like_dump",
        &["duckdb"],
        &[],
        "TRACEKIT_REQUIRE_DUCKDB",
    ) {
        let out = Command::new("python3")
            .arg(script("check_duckdb.py"))
            .args(&args)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        eprintln!("{}", String::from_utf8_lossy(&out.stdout));
        if !out.status.success() {
            failures.push(format!(
                "check_duckdb.py found problems:\n{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// `export --calls`: DuckDB joins the calls table to instructions on `i` (and each entry
/// to the instruction at the call's target), with the rows of `calls --json`.
#[test]
fn duckdb_joins_calls_to_instructions() {
    let tmp = TempDir::new("calls");
    let mut inputs = vec![root().join("testdata/tenet/basic.log")];
    let real = root().join("../shared/realdata/tenet/gaasedelen_tenet_boombox.trace.0.log");
    if real.exists() {
        inputs.push(real);
    }
    for (k, input) in inputs.iter().enumerate() {
        let dir = tmp.0.join(format!("ds{k}"));
        let out = export(input, &dir, &["--calls"]);
        assert!(out.status.success(), "{}", show(&out));
        let jsonl = tmp.0.join(format!("calls{k}.jsonl"));
        let listed = tracekit(&["calls".as_ref(), input.as_os_str(), "--json".as_ref()]);
        assert!(listed.status.success(), "{}", show(&listed));
        fs::write(&jsonl, &listed.stdout).unwrap();
        if available(
            "duckdb_joins_calls_to_instructions",
            &["duckdb"],
            &[],
            "TRACEKIT_REQUIRE_DUCKDB",
        ) {
            run_python("check_calls.py", &[dir, jsonl]);
        }
    }
}

#[test]
fn spark_agrees_with_duckdb() {
    if !available(
        "spark_agrees_with_duckdb",
        &["duckdb", "pyspark"],
        &["java"],
        "TRACEKIT_REQUIRE_SPARK",
    ) {
        return;
    }
    let tmp = TempDir::new("spark");
    // The README's Spark example runs in the same session (Spark starts in about 20 s).
    let (dir, jsonl) = readme_dataset(&tmp.0);
    let mut args = vec![PathBuf::from("--readme"), readme(), dir, jsonl];
    for (input, table, group) in [
        ("x64dbg/basic.trace64", "instructions", "thread"),
        ("dcfg-trace/multi.trace.json", "chunks", "pid,thread"),
    ] {
        let dir = tmp.0.join(input.replace(['/', '.'], "_"));
        let out = export(&root().join("testdata").join(input), &dir, &[]);
        assert!(out.status.success(), "export {input}: {}", show(&out));
        args.extend([dir, table.into(), group.into()]);
    }
    run_python("check_spark.py", &args);
}

fn readme() -> PathBuf {
    root().join("README.md")
}

/// The dataset of the README's examples (`basic`, from `testdata/x64dbg/basic.trace64`) in
/// `tmp`, and the same file's dump.
fn readme_dataset(tmp: &Path) -> (PathBuf, PathBuf) {
    let input = root().join("testdata/x64dbg/basic.trace64");
    let jsonl = tmp.join("basic.jsonl");
    let out = dump_to(&input, &jsonl);
    assert!(out.status.success(), "dump: {}", show(&out));
    let dir = tmp.join("basic");
    let out = export(&input, &dir, &[]);
    assert!(out.status.success(), "export: {}", show(&out));
    (dir, jsonl)
}

/// The README's "Query with SQL" DuckDB queries give the answers computed from `tracekit
/// dump` (tests/sql/check_readme.py); the Spark version runs in `spark_agrees_with_duckdb`.
#[test]
fn readme_queries_answer_like_dump() {
    if !available(
        "readme_queries_answer_like_dump",
        &["duckdb"],
        &[],
        "TRACEKIT_REQUIRE_DUCKDB",
    ) {
        return;
    }
    let tmp = TempDir::new("readme");
    let (dir, jsonl) = readme_dataset(&tmp.0);
    run_python("check_readme.py", &[readme(), dir, jsonl]);
}

/// A damaged input: without `--partial` nothing is left; with it the complete records are,
/// marked incomplete, as many as `dump` prints before the error.
#[test]
fn partial_export_keeps_the_complete_records() {
    let tmp = TempDir::new("partial");
    let whole = fs::read(root().join("testdata/x64dbg/basic.trace64")).unwrap();
    let cut = tmp.0.join("cut.trace64");
    fs::write(&cut, &whole[..whole.len() * 3 / 5]).unwrap();
    let duckdb = available(
        "partial_export_keeps_the_complete_records",
        &["duckdb"],
        &[],
        "TRACEKIT_REQUIRE_DUCKDB",
    );
    let mut checks = Vec::new();
    for (k, input) in [
        cut,
        root().join("testdata/x64dbg/err-truncated-block.bin"),
        root().join("testdata/amber/err-truncated-record.tt6"),
        root().join("testdata/dcfg-trace/err-truncated.trace.json"),
    ]
    .iter()
    .enumerate()
    {
        let what = input.display();
        let jsonl = tmp.0.join(format!("{k}.jsonl"));
        let dump = dump_to(input, &jsonl);
        assert_eq!(dump.status.code(), Some(1), "dump {what}: {}", show(&dump));
        let lines = String::from_utf8_lossy(&dump.stdout).lines().count();

        let dir = tmp.0.join(format!("{k}-out"));
        let before: Vec<_> = fs::read_dir(&tmp.0)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        let out = export(input, &dir, &[]);
        assert_eq!(out.status.code(), Some(1), "export {what}: {}", show(&out));
        assert!(
            !dir.exists(),
            "export {what} without --partial left {}",
            dir.display()
        );
        let after: Vec<_> = fs::read_dir(&tmp.0)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        assert_eq!(
            before, after,
            "export {what} without --partial left files behind"
        );

        let out = export(input, &dir, &["--partial"]);
        assert_eq!(
            out.status.code(),
            Some(1),
            "export --partial {what}: {}",
            show(&out)
        );
        assert!(
            dir.is_dir(),
            "export --partial {what}: no {}",
            dir.display()
        );
        let m = manifest(&dir);
        assert_eq!(m["complete"], false, "{what}: manifest {m}");
        assert!(m["error"].is_string(), "{what}: manifest has no error: {m}");
        assert!(m["offset"].is_u64(), "{what}: manifest has no offset: {m}");
        let rows: u64 = m["tables"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|t| {
                // Lines of tables but the first carry "table"; count the reader tables'.
                let name = t["name"].as_str().unwrap();
                name == m["tables"][0]["name"].as_str().unwrap()
                    || String::from_utf8_lossy(&dump.stdout)
                        .contains(&format!("\"table\":\"{name}\""))
            })
            .map(|t| t["rows"].as_u64().unwrap())
            .sum();
        assert_eq!(
            rows, lines as u64,
            "{what}: manifest rows of the reader tables != {lines} dump lines before the error: {m}"
        );
        checks.push((dir, jsonl));
    }
    if duckdb {
        let mut args = vec![PathBuf::from("--partial")];
        for (dir, jsonl) in checks {
            args.extend([dir, jsonl]);
        }
        run_python("check_duckdb.py", &args);
    }
}

/// An existing folder is refused (and left alone) without `--force`, replaced with it.
#[test]
fn export_refuses_an_existing_folder_without_force() {
    let tmp = TempDir::new("force");
    let input = root().join("testdata/x64dbg/basic.trace32");
    let dir = tmp.0.join("out");
    fs::create_dir(&dir).unwrap();
    fs::write(dir.join("keep.txt"), "mine").unwrap();
    let export = |force: bool| export(&input, &dir, if force { &["--force"] } else { &[] });
    let out = export(false);
    assert_ne!(out.status.code(), Some(0), "{}", show(&out));
    assert_eq!(fs::read_to_string(dir.join("keep.txt")).unwrap(), "mine");
    assert_eq!(fs::read_dir(&dir).unwrap().count(), 1, "folder touched");
    let entries = fs::read_dir(&tmp.0).unwrap().count();
    assert_eq!(entries, 1, "a refused export left files beside the folder");

    let out = export(true);
    assert!(out.status.success(), "{}", show(&out));
    assert!(
        !dir.join("keep.txt").exists(),
        "--force kept the old contents"
    );
    let m = manifest(&dir);
    assert_eq!(m["complete"], true, "{m}");
    assert_eq!(
        fs::read_dir(&tmp.0).unwrap().count(),
        1,
        "--force left files beside the folder"
    );
}

/// One column as `export --help` documents it or a manifest has it: the short type
/// (`u64`, `string`, `list<u32>`…), whether it may be NULL, whether it is Parquet-only.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Column {
    ty: String,
    nullable: bool,
    parquet_only: bool,
}

/// The formats as `export_tables.txt` heads their sections: the testdata folder names.
const FORMATS: [&str; 6] = [
    "x64dbg",
    "gdb-tfile",
    "dcfg",
    "dcfg-trace",
    "amber",
    "tenet",
];

/// The section of the table `export --calls` adds, the same for every format.
const CALLS: &str = "calls";

type Tables =
    std::collections::BTreeMap<(String, String), std::collections::BTreeMap<String, Column>>;

/// A manifest type in the help's words: `UInt64` → `u64`, strings (dictionary or not) →
/// `string`, `List(non-null UInt32)` → `list<u32>`; anything else as it is, so it mismatches.
fn short_type(arrow: &str) -> String {
    if let Some(inner) = arrow
        .strip_prefix("List(")
        .and_then(|s| s.strip_suffix(')'))
    {
        return format!(
            "list<{}>",
            short_type(inner.trim_start_matches("non-null "))
        );
    }
    match arrow {
        "UInt16" => "u16",
        "UInt32" => "u32",
        "UInt64" => "u64",
        "Int16" => "i16",
        "Int32" => "i32",
        "Int64" => "i64",
        "Boolean" => "bool",
        "Binary" => "binary",
        "Utf8" | "Dictionary(Int32, Utf8)" => "string",
        other => other,
    }
    .to_owned()
}

/// A word of the help that is a type, with its markers: `u64?*` → (`u64`, NULL, Parquet-only).
fn doc_type(word: &str) -> Option<Column> {
    let ty = word.trim_end_matches(['?', '*']);
    let known = [
        "u16",
        "u32",
        "u64",
        "i16",
        "i32",
        "i64",
        "bool",
        "binary",
        "string",
        "list<u32>",
        "list<u64>",
    ];
    known.contains(&ty).then(|| Column {
        ty: ty.to_owned(),
        nullable: word[ty.len()..].contains('?'),
        parquet_only: word[ty.len()..].contains('*'),
    })
}

/// The column names a word of the help stands for: itself, or a range `r0…r31` / `r8…r15`.
fn doc_names(word: &str) -> Option<Vec<String>> {
    let ident = |w: &str| {
        w.starts_with(|c: char| c.is_ascii_lowercase() || c == '_')
            && w.chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
    };
    if let Some((a, b)) = word.split_once('…') {
        let split = |w: &str| {
            let digits = w.trim_start_matches(|c: char| !c.is_ascii_digit());
            (
                w[..w.len() - digits.len()].to_owned(),
                digits.parse::<u32>().ok(),
            )
        };
        let ((prefix, Some(lo)), (prefix_b, Some(hi))) = (split(a), split(b)) else {
            return None;
        };
        if !ident(&prefix) || (prefix_b != prefix && !prefix_b.is_empty()) || lo > hi {
            return None;
        }
        return Some((lo..=hi).map(|n| format!("{prefix}{n}")).collect());
    }
    ident(word).then(|| vec![word.to_owned()])
}

/// The tables of `export_tables.txt`: a line starting with a format name opens its section,
/// a line indented by two spaces is a table (its first word) and its columns, deeper lines
/// continue it. Between `,;:()` a run of names followed by a type word are columns of
/// that type; other words are prose.
fn documented(text: &str) -> Tables {
    let mut tables = Tables::new();
    let mut entries: Vec<(String, String, String)> = Vec::new();
    let mut format: Option<String> = None;
    let mut open = false;
    for line in text.lines() {
        if line.trim().is_empty() {
            open = false;
        } else if !line.starts_with(' ') {
            let first = line.split([' ', '(', ':']).next().unwrap_or("");
            format = (FORMATS.contains(&first) || first == CALLS).then(|| first.to_owned());
            open = false;
        } else if let Some(f) = &format {
            let rest = line.strip_prefix("  ").unwrap_or(line);
            if rest.starts_with(' ') && open {
                let e = entries.last_mut().unwrap();
                e.2.push(' ');
                e.2.push_str(rest);
            } else if !rest.starts_with(' ') {
                let (name, columns) = rest.split_once(' ').unwrap_or((rest, ""));
                entries.push((f.clone(), name.to_owned(), columns.to_owned()));
                open = true;
            }
        }
    }
    for (format, table, columns) in entries {
        let cols = tables.entry((format, table)).or_default();
        for segment in columns.split([',', ';', ':', '(', ')']) {
            let mut names = Vec::new();
            for word in segment.split_whitespace() {
                if let Some(c) = doc_type(word) {
                    for n in names.drain(..) {
                        cols.insert(n, c.clone());
                    }
                } else if let Some(n) = doc_names(word) {
                    names.extend(n);
                } else {
                    names.clear();
                }
            }
        }
    }
    tables
}

/// `tracekit export --help` (src/export_tables.txt) documents every table and column that
/// the exports of every fixture (plain and `--disasm`, plus a DCFG-Trace joined with
/// `--dcfg`) have, with its
/// type, `?` exactly when it may be NULL and `*` exactly when `dump` does not show it;
/// and nothing that no export has.
#[test]
fn export_help_documents_every_table_and_column() {
    let tmp = TempDir::new("docs");
    // Every fixture plain and with `--disasm` (which adds columns).
    let mut exports: Vec<(String, PathBuf, Vec<std::ffi::OsString>)> = fixtures()
        .into_iter()
        .flat_map(|p| {
            let format = p.parent().unwrap().file_name().unwrap();
            let format = format.to_string_lossy().into_owned();
            [
                (format.clone(), p.clone(), Vec::new()),
                (format, p, vec!["--disasm".into()]),
            ]
        })
        .collect();
    // A DCFG-Trace of the sample DCFG's first edges, so that the export has the joined
    // columns.
    let dcfg = root().join("testdata/dcfg/sample.dcfg.json");
    let edges = tmp.0.join("edges.jsonl");
    fs::write(
        &edges,
        "{\"pid\":4243,\"thread\":0,\"edges\":[1,2,3,4,5,6,8,9,10]}\n",
    )
    .unwrap();
    let joined = tmp.0.join("joined.trace.json");
    let out = tracekit(&[
        "--dcfg".as_ref(),
        dcfg.as_os_str(),
        "encode".as_ref(),
        edges.as_os_str(),
        "-o".as_ref(),
        joined.as_os_str(),
    ]);
    assert!(out.status.success(), "encode: {}", show(&out));
    exports.push((
        "dcfg-trace".to_owned(),
        joined,
        vec!["--dcfg".into(), dcfg.into_os_string()],
    ));

    // The `calls` table of `--calls`, in a section of its own (the same for every format).
    exports.push((
        CALLS.to_owned(),
        root().join("testdata/tenet/basic.log"),
        Vec::new(),
    ));

    let mut actual = Tables::new();
    let mut problems = Vec::new();
    for (k, (format, input, global)) in exports.iter().enumerate() {
        let dir = tmp.0.join(k.to_string());
        let mut args = global.clone();
        args.extend(["export".into(), "-q".into(), input.clone().into_os_string()]);
        args.extend(["-o".into(), dir.clone().into_os_string()]);
        if format == CALLS {
            args.push("--calls".into());
        }
        if !tracekit(&args).status.success() {
            continue; // not a readable fixture; duckdb_reads_every_fixture_like_dump says
        }
        let m = manifest(&dir);
        let header = format!("Dataset layout (tracekit_schema {}):", m["tracekit_schema"]);
        if !tracekit::EXPORT_TABLES.starts_with(&header) {
            problems.push(format!(
                "the manifest's version is not the help's: {header}"
            ));
        }
        for t in m["tables"].as_array().unwrap() {
            let table = t["name"].as_str().unwrap().to_owned();
            if (format == CALLS) != (table == CALLS) {
                continue;
            }
            let cols = actual.entry((format.clone(), table.clone())).or_default();
            for c in t["columns"].as_array().unwrap() {
                let name = c["name"].as_str().unwrap().to_owned();
                let col = Column {
                    ty: short_type(c["type"].as_str().unwrap()),
                    nullable: c["nullable"].as_bool().unwrap(),
                    parquet_only: c["in_dump"] == false,
                };
                match cols.get(&name) {
                    Some(prev) if *prev != col => problems.push(format!(
                        "{format} {table}.{name}: {col:?} in {}, {prev:?} elsewhere",
                        input.display()
                    )),
                    _ => {
                        cols.insert(name, col);
                    }
                }
            }
        }
    }
    assert!(actual.len() >= 19, "only {} tables exported", actual.len());

    let docs = documented(tracekit::EXPORT_TABLES);
    for ((format, table), cols) in &actual {
        let Some(doc) = docs.get(&(format.clone(), table.clone())) else {
            problems.push(format!("{format} table {table} is not documented"));
            continue;
        };
        for (name, col) in cols {
            match doc.get(name) {
                None => problems.push(format!(
                    "{format} {table}.{name} ({col:?}) is not documented"
                )),
                Some(d) if d != col => problems.push(format!(
                    "{format} {table}.{name}: documented {d:?}, exported {col:?}"
                )),
                Some(_) => {}
            }
        }
    }
    for ((format, table), doc) in &docs {
        let cols = actual.get(&(format.clone(), table.clone()));
        if cols.is_none() {
            problems.push(format!(
                "{format} table {table} is documented but no export has it"
            ));
        }
        for name in doc.keys() {
            if cols.is_some_and(|c| !c.contains_key(name)) {
                problems.push(format!(
                    "{format} {table}.{name} is documented but no export has it"
                ));
            }
        }
    }
    for line in tracekit::EXPORT_TABLES.lines() {
        assert!(line.chars().count() <= 90, "line over 90 columns: {line}");
    }
    assert!(
        problems.is_empty(),
        "src/export_tables.txt and the exports disagree:\n{}",
        problems.join("\n")
    );
}
