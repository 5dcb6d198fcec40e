//! CLI tests for Tenet text traces: dump/info goldens next to the fixtures
//! (`testdata/tenet/*.expected`, `TRACE_BLESS=1` rewrites them), the dump's values checked
//! against the hand-built fixture, negative fixtures with their line and column, stdin and
//! gzip, `--arch`, detection, and the real Pin-tracer trace (info, validate, dump, export).

use crate::common::*;

const POSITIVE: &[&str] = &["basic.log", "qemu-x86.log"];

fn path(rel: &str) -> String {
    testdata(&format!("tenet/{rel}"))
        .to_str()
        .unwrap()
        .to_owned()
}

#[test]
fn dump_and_info_goldens_and_validate() {
    for name in POSITIVE {
        assert_dump_golden_and_valid(
            &path(name),
            &testdata(&format!("tenet/{name}.dump.expected")),
        );
        let o = tracekit(["info", "-q", &path(name)]);
        assert!(o.status.success(), "{name}: {}", stderr(&o));
        assert_golden(
            &testdata(&format!("tenet/{name}.info.expected")),
            &stdout(&o),
        );
    }
}

/// The dump of `basic.log` against the values its generator (xtask) wrote: one line per
/// instruction (the comment line is not one), the registers named on the line, the memory
/// items with their kind.
#[test]
fn dump_shows_the_lines() {
    let o = tracekit(["dump", "-q", &path("basic.log")]);
    assert!(o.status.success(), "{}", stderr(&o));
    let lines: Vec<serde_json::Value> = stdout(&o)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 7);
    assert_eq!(lines[0]["regs"].as_object().unwrap().len(), 17);
    assert_eq!(lines[0]["regs"]["rbx"], "0xffffffffffffffff");
    assert_eq!(lines[0]["mem"], serde_json::json!([]));
    assert_eq!(
        lines[4],
        serde_json::json!({"i": 4, "pc": "0x402000",
            "regs": {"rsp": "0x7ffe0", "rip": "0x402000"},
            "mem": [{"access": "write", "addr": "0x7ffe0", "data": "0e10400000000000"}]})
    );
    // The x86 QEMU-style file: uppercase keys without 0x, read as lowercase names.
    let o = tracekit(["dump", "-q", &path("qemu-x86.log")]);
    let first: serde_json::Value =
        serde_json::from_str(stdout(&o).lines().next().unwrap()).unwrap();
    assert_eq!(first["regs"]["eax"], "0x1a2b");
    assert_eq!(first["pc"], "0x401000");
}

/// Each negative fixture: exit 1, `line L, column C` where the problem is (counted here
/// from the file's bytes), the golden message.
#[test]
fn negative_fixtures_fail_with_line_and_column() {
    let bytes = |name: &str| std::fs::read(path(name)).unwrap();
    // The column of the first occurrence of `needle` in line `line` (from 1).
    let column = |name: &str, line: usize, needle: &str| {
        let text = String::from_utf8(bytes(name)).unwrap();
        let l = text.lines().nth(line - 1).unwrap();
        l.find(needle).unwrap() + 1
    };
    let cases = [
        (
            "err-unknown-key.log",
            2,
            column("err-unknown-key.log", 2, "rflags"),
        ),
        (
            "err-odd-hex.log",
            8,
            column("err-odd-hex.log", 8, "mr=") + "mr=0x7ffe8:".len(),
        ),
        ("err-missing-pc.log", 2, 1),
        (
            "err-33-registers.log",
            2,
            column("err-33-registers.log", 2, "rip="),
        ),
        ("err-empty.log", 1, 1),
    ];
    for (name, line, col) in cases {
        let o = tracekit(["--format", "tenet", "validate", "-q", &path(name)]);
        assert_eq!(o.status.code(), Some(1), "{name}");
        let err = stderr(&o);
        let last = err.lines().last().unwrap();
        assert!(
            last.starts_with(&format!("error: line {line}, column {col}: ")),
            "{name}: {err}"
        );
        assert!(last.contains(" at offset 0x"), "{name}: {err}");
        assert_golden(
            &testdata(&format!("tenet/{name}.expected")),
            &format!("{last}\n"),
        );
    }
}

#[test]
fn dump_of_a_damaged_file_prints_complete_lines_first() {
    let o = tracekit(["dump", "-q", &path("err-odd-hex.log")]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(stdout(&o).lines().count(), 6);
    assert!(
        stderr(&o).contains("odd number of hex digits (5)"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn stdin_and_gzip_read_like_the_file() {
    let data = std::fs::read(path("basic.log")).unwrap();
    let plain = tracekit(["dump", "-q", &path("basic.log")]);
    let o = tracekit_stdin(["dump", "-q", "-"], &data);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(o.stdout, plain.stdout);
    let dir = std::env::temp_dir().join(format!("tracekit-tenet-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let gz = dir.join("basic.log.gz");
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    std::io::Write::write_all(&mut enc, &data).unwrap();
    std::fs::write(&gz, enc.finish().unwrap()).unwrap();
    let o = tracekit(["dump", "-q", gz.to_str().unwrap()]);
    assert_eq!(o.stdout, plain.stdout, "{}", stderr(&o));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn arch_flag_forces_the_architecture() {
    let o = tracekit(["--arch", "x86", "validate", "-q", &path("basic.log")]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("line 2, column 1: register rdi is not a x86 register"),
        "{}",
        stderr(&o)
    );
    let o = tracekit(["--arch", "x86", "validate", "-q", &path("qemu-x86.log")]);
    assert_eq!(stdout(&o), "ok\n", "{}", stderr(&o));
    let o = tracekit(["--arch", "arm", "validate", "-q", &path("qemu-x86.log")]);
    assert_eq!(o.status.code(), Some(2));
}

/// A `.log` file that is not a Tenet trace is not taken for one.
#[test]
fn a_log_name_alone_is_not_tenet() {
    let o = tracekit_stdin(["info", "-q", "-"], b"2024-01-01 12:00 started\n");
    assert_ne!(o.status.code(), Some(0));
    assert!(
        stderr(&o).contains("cannot tell the format"),
        "{}",
        stderr(&o)
    );
}

const REAL: &str = "tenet/gaasedelen_tenet_boombox.trace.0.log";

/// The real Pin-tracer trace: info (counts checked with grep: 2,163 lines, 969 `mr`, 570
/// `mw`), validate, dump (one line per line of the file, the first one's values as the
/// file has them), export (the row counts of each table).
#[test]
fn real_pin_trace() {
    let Some(real) = realdata(REAL) else { return };
    let real = real.to_str().unwrap();
    let o = tracekit(["info", "--json", "-q", real]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(v["format"], "tenet");
    assert_eq!(v["architecture"], "amd64");
    assert_eq!(v["instructions"], 2163);
    assert_eq!(v["memory_items"]["read"], 969);
    assert_eq!(v["memory_items"]["write"], 570);
    let o = tracekit(["validate", "-q", real]);
    assert_eq!(stdout(&o), "ok\n", "{}", stderr(&o));
    let o = tracekit(["dump", "-q", real]);
    assert!(o.status.success());
    let out = stdout(&o);
    assert_eq!(out.lines().count(), 2163);
    let first: serde_json::Value = serde_json::from_str(out.lines().next().unwrap()).unwrap();
    assert_eq!(first["pc"], "0x14000419c");
    assert_eq!(first["regs"]["rsp"], "0x13ff58");
    assert_eq!(
        first["mem"][1],
        serde_json::json!({"access": "write", "addr": "0x13ff58", "data": "f21327a6fb7f0000"})
    );
    let dir = std::env::temp_dir().join(format!("tracekit-tenet-export-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let o = tracekit(["export", "-q", real, "-o", dir.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("_tracekit.json")).unwrap()).unwrap();
    let rows = |t: &str| {
        manifest["tables"]
            .as_array()
            .unwrap()
            .iter()
            .find(|x| x["name"] == t)
            .unwrap()["rows"]
            .clone()
    };
    assert_eq!(rows("instructions"), 2163);
    assert_eq!(rows("memory"), 969 + 570);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A fresh temporary folder.
fn temp_dir(tag: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("tracekit-tenet-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// The files of `dir`, sorted.
fn files(dir: &std::path::Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

/// `convert --to tenet`: one file per thread named by the decimal thread id `dump` prints,
/// as many lines as the thread has instructions, each file a valid Tenet trace whose first
/// line is the thread's first instruction (pc and registers as `dump` shows them).
#[test]
fn convert_x64dbg_to_tenet() {
    let dir = temp_dir("convert");
    let x = testdata("x64dbg/basic.trace64");
    let x = x.to_str().unwrap();
    let prefix = dir.join("basic");
    let o = tracekit([
        "convert",
        x,
        "--to",
        "tenet",
        "-o",
        prefix.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    // The threads and their instruction counts, from dump.
    let dump: Vec<serde_json::Value> = stdout(&tracekit(["dump", "-q", x]))
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let mut per_thread = std::collections::BTreeMap::<u64, Vec<&serde_json::Value>>::new();
    for d in &dump {
        per_thread
            .entry(d["thread"].as_u64().unwrap())
            .or_default()
            .push(d);
    }
    let names: Vec<String> = per_thread
        .keys()
        .map(|t| format!("basic.{t}.log"))
        .collect();
    assert_eq!(files(&dir), names);
    for (t, steps) in &per_thread {
        let f = dir.join(format!("basic.{t}.log"));
        let f = f.to_str().unwrap();
        assert!(
            stderr(&o).contains(&format!("{f}: {} lines", steps.len())),
            "{}",
            stdout(&o)
        );
        let v = tracekit(["validate", "-q", f]);
        assert_eq!(stdout(&v), "ok\n", "{}", stderr(&v));
        let lines: Vec<serde_json::Value> = stdout(&tracekit(["dump", "-q", f]))
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines.len(), steps.len());
        assert_eq!(lines[0]["pc"], steps[0]["pc"]);
        // The registers the thread's first x64dbg record holds (a block records changes).
        let mut compared = 0;
        for (r, v) in steps[0]["regs"].as_object().unwrap() {
            if let Some(l) = lines[0]["regs"].get(r) {
                assert_eq!(l, v, "{r}");
                compared += 1;
            }
        }
        assert!(compared >= 2, "at least rsp and rip");
        assert_eq!(lines[0]["regs"].as_object().unwrap().len(), 17);
        // Never flags or other registers.
        assert!(lines[0]["regs"].get("rflags").is_none());
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Bad uses exit 2 (no `-o`; a stream that is not x86/x64); a damaged input exits 1 and
/// leaves no file behind.
#[test]
fn convert_to_tenet_errors() {
    let dir = temp_dir("errors");
    let prefix = dir.join("out");
    let prefix = prefix.to_str().unwrap();
    let x = testdata("x64dbg/basic.trace64");
    let o = tracekit(["convert", x.to_str().unwrap(), "--to", "tenet"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let amber = testdata("amber/example.tt6");
    let o = tracekit([
        "convert",
        amber.to_str().unwrap(),
        "--to",
        "tenet",
        "-o",
        prefix,
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let bad = testdata("x64dbg/err-truncated-block.bin");
    let o = tracekit([
        "--format",
        "x64dbg",
        "convert",
        bad.to_str().unwrap(),
        "--to",
        "tenet",
        "-o",
        prefix,
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(files(&dir).is_empty(), "{:?}", files(&dir));
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Nothing lost through the CLI: `convert --to tenet` of the real (canonical) trace gives
/// it back byte for byte (the first line's memory items kept, no register it never named
/// invented), and `--to din` has every one of its 1,539 data accesses (969 `mr`, 570 `mw`)
/// and a fetch per instruction.
#[test]
fn real_pin_trace_converts_without_loss() {
    let Some(real) = realdata(REAL) else { return };
    let dir = temp_dir("real-roundtrip");
    let prefix = dir.join("again");
    let o = tracekit([
        "convert".as_ref(),
        "-q".as_ref(),
        real.as_os_str(),
        "--to".as_ref(),
        "tenet".as_ref(),
        "-o".as_ref(),
        prefix.as_os_str(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let back = std::fs::read(dir.join("again.0.log")).unwrap();
    let want = std::fs::read(&real).unwrap();
    assert!(back == want, "the round trip differs from the input");
    let o = tracekit([
        "convert".as_ref(),
        "-q".as_ref(),
        real.as_os_str(),
        "--to".as_ref(),
        "din".as_ref(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    let count = |label: &str| {
        out.lines()
            .filter(|l| l.split(' ').next() == Some(label))
            .count()
    };
    assert_eq!((count("2"), count("0"), count("1")), (2163, 969, 570));
    // The first line's items come first, in the line's order.
    assert_eq!(
        out.lines().take(3).collect::<Vec<_>>(),
        ["0 13ff58", "1 13ff58", "2 14000419c"]
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `diff` of two Tenet traces names the registers (`rax`, …, `rip`) as it does for
/// x64dbg, and `--ignore` takes their names: on the hand-built trace with one register
/// value changed, and on the real trace with `rax` changed at its eighth line (rax is set
/// again six lines later).
#[test]
fn diff_names_tenet_registers() {
    let dir = temp_dir("diff");
    let cases = [
        (
            path("basic.log"),
            "rax=0x55,",
            "rax=0x56,",
            3,
            "0x55",
            "0x56",
        ),
        (
            realdata(REAL).map_or_else(String::new, |p| p.to_str().unwrap().to_owned()),
            "rax=0xd6bdee99ed73,",
            "rax=0xd6bdee99ed74,",
            7,
            "0xd6bdee99ed73",
            "0xd6bdee99ed74",
        ),
    ];
    for (k, (a, from, to, at, va, vb)) in cases.into_iter().enumerate() {
        if a.is_empty() {
            continue;
        }
        let text = std::fs::read_to_string(&a).unwrap();
        assert!(text.contains(from), "{a}");
        let b = dir.join(format!("b{k}.log"));
        std::fs::write(&b, text.replacen(from, to, 1)).unwrap();
        let b = b.to_str().unwrap();
        let o = tracekit(["diff", "--json", "-q", &a, b]);
        assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
        let first: serde_json::Value =
            serde_json::from_str(stdout(&o).lines().next().unwrap()).unwrap();
        assert_eq!(first["kind"], "regs", "{first}");
        assert_eq!(first["first"]["a_i"], at);
        assert_eq!(
            first["first"]["regs"],
            serde_json::json!([{"name": "rax", "a": va, "b": vb}])
        );
        let o = tracekit(["diff", "-q", &a, b]);
        assert!(
            stdout(&o).contains(&format!("  rax: A {va}, B {vb}\n")),
            "{}",
            stdout(&o)
        );
        let o = tracekit(["diff", "--ignore", "rax", "-q", &a, b]);
        assert_eq!(o.status.code(), Some(0), "{}{}", stdout(&o), stderr(&o));
        assert!(
            stdout(&o).contains("the traces are equal"),
            "{}",
            stdout(&o)
        );
        // Any case, as for x64dbg; an unknown name lists the compared registers.
        let o = tracekit(["diff", "--ignore", "RAX", "-q", &a, b]);
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
        let o = tracekit(["diff", "--ignore", "rflags", "-q", &a, b]);
        assert_eq!(o.status.code(), Some(2));
        assert!(
            stderr(&o).contains(
                "--ignore rflags: no such register; the compared registers are rax, rcx,"
            ),
            "{}",
            stderr(&o)
        );
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
