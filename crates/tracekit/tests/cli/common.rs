//! Helpers shared by the CLI tests.
#![allow(dead_code)]

use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

/// The repository root.
pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// A path under `testdata/`.
pub fn testdata(rel: &str) -> PathBuf {
    root().join("testdata").join(rel)
}

/// A real file under `../shared/realdata/` (beside the repository; never copied into it).
/// `None`, with a note on stderr, when it is not there, unless `TRACEKIT_REQUIRE_REALDATA=1`
/// (set by CI), which makes a missing file a failure.
pub fn realdata(rel: &str) -> Option<PathBuf> {
    let p = root().join("../shared/realdata").join(rel);
    if p.exists() {
        Some(p)
    } else if std::env::var_os("TRACEKIT_REQUIRE_REALDATA").is_some_and(|v| v == "1") {
        panic!(
            "real data file {} is missing and TRACEKIT_REQUIRE_REALDATA=1",
            p.display()
        );
    } else {
        eprintln!("skipped: real data file {} is not there", p.display());
        None
    }
}

/// Runs the tracekit binary with `args`.
pub fn tracekit<I, S>(args: I) -> Output
where
    I: IntoIterator<Item = S>,
    S: AsRef<std::ffi::OsStr>,
{
    Command::new(env!("CARGO_BIN_EXE_tracekit"))
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

/// Runs the tracekit binary with `args` and `stdin` as standard input.
pub fn tracekit_stdin<I, S>(args: I, stdin: &[u8]) -> Output
where
    I: IntoIterator<Item = S>,
    S: AsRef<std::ffi::OsStr>,
{
    use std::io::Write;
    let mut child = Command::new(env!("CARGO_BIN_EXE_tracekit"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut input = child.stdin.take().unwrap();
    let data = stdin.to_vec();
    let writer = std::thread::spawn(move || {
        let _ = input.write_all(&data);
    });
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap();
    out
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Compares `actual` with the golden file `path`; with `TRACE_BLESS=1`, rewrites the file.
pub fn assert_golden(path: &std::path::Path, actual: &str) {
    if std::env::var_os("TRACE_BLESS").is_some_and(|v| v == "1") {
        std::fs::write(path, actual).unwrap();
        return;
    }
    let expected = std::fs::read_to_string(path).unwrap_or_else(|e| {
        panic!(
            "{}: {e} (run with TRACE_BLESS=1 to create it)",
            path.display()
        )
    });
    if expected != actual {
        let line = expected
            .lines()
            .zip(actual.lines())
            .position(|(a, b)| a != b)
            .unwrap_or(0);
        panic!(
            "{} differs from the output at line {}:\n  expected: {}\n  actual:   {}\n(TRACE_BLESS=1 rewrites it)",
            path.display(),
            line + 1,
            expected.lines().nth(line).unwrap_or(""),
            actual.lines().nth(line).unwrap_or("")
        );
    }
}

/// `tracekit dump FILE` succeeds with one JSON object per line, equal to the golden file,
/// and `tracekit validate FILE` prints `ok`.
pub fn assert_dump_golden_and_valid(file: &str, golden: &std::path::Path) {
    let o = tracekit(["dump", "-q", file]);
    assert!(o.status.success(), "{file}: {}", stderr(&o));
    let out = stdout(&o);
    for line in out.lines() {
        serde_json::from_str::<serde_json::Value>(line)
            .unwrap_or_else(|e| panic!("{file}: {e}: {line}"));
    }
    assert_golden(golden, &out);
    let o = tracekit(["validate", "-q", file]);
    assert_eq!(stdout(&o), "ok\n", "{file}: {}", stderr(&o));
}

/// A Tenet trace of `lines` instructions (about 60 bytes each): a loop of 16 at 0x401000,
/// `rax` counting, a write of the count to 0x1000 at every step.
pub fn tenet_trace(lines: u64) -> Vec<u8> {
    let mut out = Vec::new();
    for k in 0..lines {
        out.extend_from_slice(
            format!(
                "rax=0x{k:x},rip=0x{:x},mw=0x1000:{}\n",
                0x401000 + (k % 16) * 4,
                hex_bytes(&k.to_le_bytes())
            )
            .as_bytes(),
        );
    }
    out
}

fn hex_bytes(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// The rows of a dataset's table, each as a JSON object of its plain columns (integers as
/// numbers, booleans, strings; null where missing).
pub fn parquet_rows(
    dir: &std::path::Path,
    table: &str,
) -> Vec<serde_json::Map<String, serde_json::Value>> {
    use arrow_array::{Array, BooleanArray, StringArray, UInt32Array, UInt64Array};
    let mut files: Vec<std::path::PathBuf> = std::fs::read_dir(dir.join(table))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    let mut rows = Vec::new();
    for f in files {
        let reader = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(
            std::fs::File::open(f).unwrap(),
        )
        .unwrap()
        .build()
        .unwrap();
        for batch in reader {
            let batch = batch.unwrap();
            for k in 0..batch.num_rows() {
                let mut row = serde_json::Map::new();
                for (field, col) in batch.schema().fields().iter().zip(batch.columns()) {
                    let any = col.as_any();
                    let v = if col.is_null(k) {
                        serde_json::Value::Null
                    } else if let Some(a) = any.downcast_ref::<UInt64Array>() {
                        a.value(k).into()
                    } else if let Some(a) = any.downcast_ref::<UInt32Array>() {
                        a.value(k).into()
                    } else if let Some(a) = any.downcast_ref::<BooleanArray>() {
                        a.value(k).into()
                    } else if let Some(a) = any.downcast_ref::<StringArray>() {
                        a.value(k).into()
                    } else {
                        // Bytes, lists, dictionaries: not compared here.
                        continue;
                    };
                    row.insert(field.name().clone(), v);
                }
                rows.push(row);
            }
        }
    }
    rows
}

/// The JSON lines the binary prints for `args` (which must succeed).
pub fn json_lines(args: &[&str]) -> Vec<serde_json::Value> {
    let o = tracekit(args);
    assert!(o.status.success(), "{args:?}: {}", stderr(&o));
    stdout(&o)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}
