//! `tracekit export` read back by SQL engines: DuckDB checks every fixture's dataset against
//! `tracekit dump` (tests/sql/check_duckdb.py), Spark in local mode reads an x64dbg and a
//! DCFG-Trace dataset and agrees with DuckDB on a GROUP BY (tests/sql/check_spark.py); plus
//! `--partial` on a damaged input and `--force` on an existing folder.
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
    for format in ["x64dbg", "gdb-tfile", "dcfg", "dcfg-trace", "amber"] {
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
        let out = tracekit(&[
            "export".as_ref(),
            "-q".as_ref(),
            input.as_os_str(),
            "-o".as_ref(),
            dir.as_os_str(),
        ]);
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
    let mut args = Vec::new();
    for (input, table, group) in [
        ("x64dbg/basic.trace64", "instructions", "thread"),
        ("dcfg-trace/multi.trace.json", "chunks", "pid,thread"),
    ] {
        let dir = tmp.0.join(input.replace(['/', '.'], "_"));
        let out = tracekit(&[
            "export".as_ref(),
            "-q".as_ref(),
            root().join("testdata").join(input).as_os_str(),
            "-o".as_ref(),
            dir.as_os_str(),
        ]);
        assert!(out.status.success(), "export {input}: {}", show(&out));
        args.extend([dir, table.into(), group.into()]);
    }
    run_python("check_spark.py", &args);
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
        let out = tracekit(&[
            "export".as_ref(),
            "-q".as_ref(),
            input.as_os_str(),
            "-o".as_ref(),
            dir.as_os_str(),
        ]);
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

        let out = tracekit(&[
            "export".as_ref(),
            "-q".as_ref(),
            "--partial".as_ref(),
            input.as_os_str(),
            "-o".as_ref(),
            dir.as_os_str(),
        ]);
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
    let export = |force: bool| {
        let mut args = vec![
            "export".as_ref(),
            "-q".as_ref(),
            input.as_os_str(),
            "-o".as_ref(),
            dir.as_os_str(),
        ];
        if force {
            args.push("--force".as_ref());
        }
        tracekit(&args)
    };
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
