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
/// instruction (the comment line is not one) with its line in the file, the registers
/// named on the line, the memory items the instruction made (carried by the next line)
/// with their kind.
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
    assert_eq!(lines[0]["line"], 2);
    // push rbp: the write of the old rbp.
    assert_eq!(
        lines[0]["mem"],
        serde_json::json!([{"access": "write", "addr": "0x7ffe8", "data": "3412000000000000"}])
    );
    assert!(lines[0].get("mem_before").is_none());
    // call: the write of the return address.
    assert_eq!(
        lines[3],
        serde_json::json!({"i": 3, "line": 5, "pc": "0x401009",
            "regs": {"rax": "0x55", "rip": "0x401009"},
            "mem": [{"access": "write", "addr": "0x7ffe0", "data": "0e10400000000000"}]})
    );
    // The last instruction's accesses are never written.
    assert_eq!(lines[6]["mem"], serde_json::json!([]));
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
/// file has them, its memory items made before the trace as `mem_before`), export (the
/// row counts of each table: the first line's two items in `memory_before`).
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
    assert_eq!(first["line"], 1);
    assert_eq!(
        first["mem_before"][1],
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
    assert_eq!(rows("memory"), 969 + 570 - 2);
    assert_eq!(rows("memory_before"), 2);
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

/// Column `column` of the exported table `table` in `dir`, as integers (NULL: `None`), in
/// file order.
fn exported_u64(dir: &std::path::Path, table: &str, column: &str) -> Vec<Option<u64>> {
    crate::common::parquet_rows(dir, table)
        .iter()
        .map(|row| {
            let v = row
                .get(column)
                .unwrap_or_else(|| panic!("{table}.{column}"));
            v.as_u64()
        })
        .collect()
}

/// One step numbering in every command: an access is numbered by the instruction that
/// made it, though Tenet writes it on the next line. The `call` of the hand-built trace
/// (i=3, line 5) writes its return address to 0x7ffe0 (carried by line 6); the first
/// `call` of the real trace (i=1, line 2) writes it to 0x13ff28 (carried by line 3, the
/// write of the issue). dump, export, xref, mem and diff all say i; dump and export keep
/// the line.
#[test]
fn every_command_numbers_an_access_by_its_instruction() {
    let dir = temp_dir("numbering");
    let mut cases = vec![(path("basic.log"), 0x7ffe0u64, 3u64, 5u64, 0x40100eu64)];
    if let Some(real) = realdata(REAL) {
        cases.push((
            real.to_str().unwrap().to_owned(),
            0x13ff28,
            1,
            2,
            0x1400041a5,
        ));
    }
    for (k, (file, addr, i, line, value)) in cases.into_iter().enumerate() {
        let hex = format!("{addr:#x}");
        // dump: the first row with an access to addr.
        let dump: Vec<serde_json::Value> = stdout(&tracekit(["dump", "-q", &file]))
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        let row = dump
            .iter()
            .find(|r| {
                r["mem"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|m| m["addr"] == hex)
            })
            .unwrap();
        assert_eq!(
            (&row["i"], &row["line"]),
            (&i.into(), &line.into()),
            "{file}"
        );
        assert_eq!(row["mem"][0]["access"], "write");
        let data = u64::from_str_radix(row["mem"][0]["data"].as_str().unwrap(), 16).unwrap();
        assert_eq!(data.swap_bytes(), value);
        // export: the same i in `memory`, the same line in `instructions`.
        let out = dir.join(format!("export{k}"));
        let o = tracekit(["export", "-q", &file, "-o", out.to_str().unwrap()]);
        assert!(o.status.success(), "{}", stderr(&o));
        let addrs = exported_u64(&out, "memory", "addr");
        let at = addrs.iter().position(|a| *a == Some(addr)).unwrap();
        assert_eq!(exported_u64(&out, "memory", "i")[at], Some(i), "{file}");
        let lines = exported_u64(&out, "instructions", "line");
        assert_eq!(lines[i as usize], Some(line));
        let from_dump: Vec<Option<u64>> = dump.iter().map(|r| r["line"].as_u64()).collect();
        assert_eq!(lines, from_dump);
        // xref: the instruction that wrote it.
        let o = tracekit(["xref", "-q", &file, &format!("{hex}:8")]);
        assert!(o.status.success(), "{}", stderr(&o));
        let first: serde_json::Value =
            serde_json::from_str(stdout(&o).lines().next().unwrap()).unwrap();
        assert_eq!(first["i"], i, "{file}");
        assert_eq!(first["new"], format!("{value:#x}"));
        // mem: known from the instruction after it on, with i as its source.
        let mem = |at: u64| -> serde_json::Value {
            let o = tracekit([
                "mem",
                "--json",
                "-q",
                &file,
                "--at",
                &at.to_string(),
                &hex,
                "8",
            ]);
            assert!(o.status.success(), "{}", stderr(&o));
            serde_json::from_str(&stdout(&o)).unwrap()
        };
        let after = mem(i + 1);
        assert_eq!(after["source"], serde_json::json!(vec![i; 8]), "{file}");
        assert_eq!(after["inferred"], serde_json::json!(vec![false; 8]));
        assert_ne!(mem(i)["source"], serde_json::json!(vec![i; 8]));
        // diff: B's write of another value is a mem region at i.
        let text = std::fs::read_to_string(&file).unwrap();
        let item = format!("mw={hex}:{}", row["mem"][0]["data"].as_str().unwrap());
        let changed = format!("mw={hex}:{:016x}", (value + 1).swap_bytes());
        assert!(text.contains(&item), "{item}");
        let b = dir.join(format!("b{k}.log"));
        std::fs::write(&b, text.replacen(&item, &changed, 1)).unwrap();
        let o = tracekit(["diff", "--json", "-q", &file, b.to_str().unwrap()]);
        assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
        let region: serde_json::Value =
            serde_json::from_str(stdout(&o).lines().next().unwrap()).unwrap();
        assert_eq!(region["kind"], "mem");
        assert_eq!(
            (&region["a_start"], &region["b_start"]),
            (&i.into(), &i.into())
        );
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `export` gives a Tenet trace the register state before each instruction as x64dbg's
/// does (Parquet only): `rax…r15`, `rip` (x86: `eax…eip`), NULL while the trace has not
/// named a register yet. Checked against the lines of the real trace (rax is first named
/// on line 8, rip is the pc) and against `state` of the hand-built one.
#[test]
fn export_has_the_register_state() {
    let dir = temp_dir("state");
    let export = |file: &str, tag: &str| {
        let out = dir.join(tag);
        let o = tracekit(["export", "-q", file, "-o", out.to_str().unwrap()]);
        assert!(o.status.success(), "{}", stderr(&o));
        let manifest: serde_json::Value =
            serde_json::from_slice(&std::fs::read(out.join("_tracekit.json")).unwrap()).unwrap();
        let columns: Vec<(String, bool, bool)> = manifest["tables"][0]["columns"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| {
                (
                    c["name"].as_str().unwrap().to_owned(),
                    c["nullable"].as_bool().unwrap(),
                    c["in_dump"].as_bool().unwrap_or(true),
                )
            })
            .collect();
        (out, columns)
    };
    let (out, columns) = export(&path("qemu-x86.log"), "x86");
    let names: Vec<&str> = columns.iter().map(|c| c.0.as_str()).collect();
    assert_eq!(
        names,
        [
            "i", "line", "pc", "eax", "ecx", "edx", "ebx", "esp", "ebp", "esi", "edi", "eip"
        ]
    );
    assert_eq!(
        exported_u64(&out, "instructions", "eax"),
        [Some(0x1a2b), Some(0x1a2b), Some(0x1a2c)]
    );
    let (out, columns) = export(&path("basic.log"), "basic");
    let state = [
        "rax", "rcx", "rdx", "rbx", "rsp", "rbp", "rsi", "rdi", "r8", "r9", "r10", "r11", "r12",
        "r13", "r14", "r15", "rip",
    ];
    for (name, nullable, in_dump) in &columns[3..] {
        assert!(!in_dump, "{name}: Parquet only");
        assert_eq!(*nullable, name != "rip", "{name}");
    }
    let names: Vec<&str> = columns[3..].iter().map(|c| c.0.as_str()).collect();
    assert_eq!(names, state);
    let pcs = exported_u64(&out, "instructions", "pc");
    assert_eq!(exported_u64(&out, "instructions", "rip"), pcs);
    for n in 0..pcs.len() {
        let o = tracekit([
            "state",
            "--json",
            "-q",
            &path("basic.log"),
            "--at",
            &n.to_string(),
        ]);
        assert!(o.status.success(), "{}", stderr(&o));
        let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
        for r in ["rax", "rsp", "rbp", "rbx", "rip"] {
            let want =
                u64::from_str_radix(v["regs"][r].as_str().unwrap().trim_start_matches("0x"), 16)
                    .unwrap();
            assert_eq!(
                exported_u64(&out, "instructions", r)[n],
                Some(want),
                "{r} at {n}"
            );
        }
    }
    if let Some(real) = realdata(REAL) {
        let (out, _) = export(real.to_str().unwrap(), "real");
        let rax = exported_u64(&out, "instructions", "rax");
        assert_eq!(rax.len(), 2163);
        assert!(
            rax[..7].iter().all(Option::is_none),
            "rax not named before line 8"
        );
        assert_eq!(rax[7], Some(0xd6bdee99ed73));
        let r9 = exported_u64(&out, "instructions", "r9");
        assert_eq!(r9[0], None);
        assert_eq!(exported_u64(&out, "instructions", "rsp")[0], Some(0x13ff58));
        assert_eq!(exported_u64(&out, "instructions", "rsp")[2], Some(0x13ff28));
        assert_eq!(
            exported_u64(&out, "instructions", "rip"),
            exported_u64(&out, "instructions", "pc")
        );
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
