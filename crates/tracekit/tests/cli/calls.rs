//! `tracekit calls` and `tracekit flame`: call counts against an independent decoder (a
//! byte-pattern check of `dump`'s opcodes), the same tree from an x64dbg trace and from its
//! Tenet conversion (bytes decoded vs calls inferred from the stack), folded counts summing
//! to the instructions, arguments against `state --json`, symbols, the SVG.

use std::path::PathBuf;

use serde_json::Value;

use crate::common::{json_lines, realdata, stderr, stdout, testdata, tracekit};

fn temp_dir(name: &str) -> PathBuf {
    static N: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("tk-calls-{name}-{}-{n}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// What an independent decoder says an x86 instruction is, from its bytes alone: legacy
/// prefixes and (x64) a REX byte skipped, then `e8` (call rel), `ff /2` `ff /3` (call
/// indirect, near and far), `9a` (call far, x86), `c3` `c2` `cb` `ca` (ret, retf).
fn kind_of(opcode: &[u8], x64: bool) -> Option<&'static str> {
    let mut k = 0;
    while let Some(&b) = opcode.get(k) {
        let prefix = matches!(
            b,
            0x66 | 0x67 | 0xf2 | 0xf3 | 0x2e | 0x36 | 0x3e | 0x26 | 0x64 | 0x65 | 0xf0
        );
        if prefix || (x64 && (0x40..=0x4f).contains(&b)) {
            k += 1;
        } else {
            break;
        }
    }
    match (opcode.get(k)?, opcode.get(k + 1)) {
        (0xe8, _) => Some("call"),
        (0x9a, _) if !x64 => Some("call"),
        (0xff, Some(m)) if matches!((m >> 3) & 7, 2 | 3) => Some("call"),
        (0xc3 | 0xc2 | 0xcb | 0xca, _) => Some("ret"),
        _ => None,
    }
}

fn hex_bytes(s: &str) -> Vec<u8> {
    (0..s.len() / 2)
        .map(|k| u8::from_str_radix(&s[2 * k..2 * k + 2], 16).unwrap())
        .collect()
}

fn num(v: &Value) -> u64 {
    match v {
        Value::Number(n) => n.as_u64().unwrap(),
        Value::String(s) => u64::from_str_radix(s.trim_start_matches("0x"), 16).unwrap(),
        other => panic!("not a number: {other}"),
    }
}

/// The calls and returns of an x64dbg file counted from `dump`'s opcodes match `calls`:
/// every call is a row, and every ret is a matched one (the first frame each closes), an
/// unmatched one, or its thread's last step.
fn check_counts(file: &str) {
    let dump = json_lines(&["dump", "-q", file]);
    let x64 = file.ends_with("64");
    let (mut n_calls, mut n_rets) = (0u64, 0u64);
    let mut last_of_thread: std::collections::HashMap<u64, Option<&str>> = Default::default();
    for r in &dump {
        let Some(op) = r.get("opcode").and_then(Value::as_str) else {
            continue;
        };
        let kind = kind_of(&hex_bytes(op), x64);
        match kind {
            Some("call") => n_calls += 1,
            Some("ret") => n_rets += 1,
            _ => {}
        }
        last_of_thread.insert(num(&r["thread"]), kind);
    }
    let rows = json_lines(&["calls", "-q", "--json", file]);
    let (summary, calls) = rows.split_last().unwrap();
    let s = &summary["summary"];
    assert_eq!(calls.len() as u64, n_calls, "{file}");
    assert_eq!(num(&s["calls"]), n_calls, "{file}");
    let matched = calls
        .iter()
        .filter(|c| !c["ret_i"].is_null() && c["unwound"] == false)
        .count() as u64;
    let trailing = last_of_thread
        .values()
        .filter(|k| **k == Some("ret"))
        .count() as u64;
    assert_eq!(
        matched + num(&s["unmatched_returns"]) + trailing,
        n_rets,
        "{file}"
    );
    let open = calls.iter().filter(|c| c["ret_i"].is_null()).count() as u64;
    assert_eq!(num(&s["open_at_end"]), open, "{file}");
    // Rows come in the order of their steps.
    assert!(calls.windows(2).all(|w| num(&w[0]["i"]) < num(&w[1]["i"])));
}

#[test]
fn call_counts_match_an_independent_decoder() {
    for f in [
        "x64dbg/basic.trace64",
        "x64dbg/basic.trace32",
        "x64dbg/sessions.trace64",
        "x64dbg/legacy-tid.trace64",
    ] {
        check_counts(testdata(f).to_str().unwrap());
    }
    if let Some(real) = realdata("x64dbg/d-ornen_DBGLogParser_test1.trace64") {
        check_counts(real.to_str().unwrap());
        // The real file has calls, returns to frames entered before the trace, and frames
        // open at the end.
        let rows = json_lines(&["calls", "-q", "--json", real.to_str().unwrap()]);
        let s = &rows.last().unwrap()["summary"];
        assert_eq!(
            (
                num(&s["calls"]),
                num(&s["unmatched_returns"]),
                num(&s["open_at_end"])
            ),
            (7, 3, 1)
        );
    }
}

/// The folded stacks' counts sum to the instructions `info` counts, on every x86/x64
/// instruction stream of testdata and the real files.
#[test]
fn folded_counts_sum_to_the_instructions() {
    let mut files: Vec<PathBuf> = [
        "x64dbg/basic.trace64",
        "x64dbg/basic.trace32",
        "tenet/basic.log",
        "tenet/qemu-x86.log",
        "gdb-tfile/amd64.tf",
    ]
    .iter()
    .map(|f| testdata(f))
    .collect();
    files.extend(realdata("x64dbg/d-ornen_DBGLogParser_test1.trace64"));
    files.extend(realdata("tenet/gaasedelen_tenet_boombox.trace.0.log"));
    for f in files {
        let f = f.to_str().unwrap();
        let info = json_lines(&["info", "--json", f]);
        let want = info[0]["instructions"]
            .as_u64()
            .or_else(|| info[0]["frames"].as_u64())
            .unwrap_or_else(|| panic!("{f}: {}", info[0]));
        let o = tracekit(["calls", "-q", "--folded", f]);
        assert!(o.status.success(), "{f}: {}", stderr(&o));
        let sum: u64 = stdout(&o)
            .lines()
            .map(|l| l.rsplit_once(' ').unwrap().1.parse::<u64>().unwrap())
            .sum();
        assert_eq!(sum, want, "{f}");
        for l in stdout(&o).lines() {
            assert!(l.starts_with("thread "), "{f}: {l}");
        }
    }
}

/// An x64dbg trace and its Tenet conversion give the same calls: decoded from the bytes in
/// one, inferred from the stack in the other (Tenet records no bytes).
#[test]
fn tenet_conversion_gives_the_same_calls() {
    let Some(real) = realdata("x64dbg/d-ornen_DBGLogParser_test1.trace64") else {
        return;
    };
    let dir = temp_dir("tenet");
    let prefix = dir.join("t");
    let o = tracekit([
        "convert".as_ref(),
        real.as_os_str(),
        "--to".as_ref(),
        "tenet".as_ref(),
        "-o".as_ref(),
        prefix.as_os_str(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let tenet = dir.join("t.324.log");
    let x = json_lines(&[
        "calls",
        "-q",
        "--json",
        "--abi",
        "win64",
        real.to_str().unwrap(),
    ]);
    let t = json_lines(&[
        "calls",
        "-q",
        "--json",
        "--abi",
        "win64",
        tenet.to_str().unwrap(),
    ]);
    assert_eq!(x.len(), t.len());
    for (a, b) in x.iter().zip(&t) {
        for key in [
            "i",
            "depth",
            "target",
            "return_address",
            "entry_i",
            "ret_i",
            "unwound",
            "args",
            "ret",
            "instructions",
            "summary",
        ] {
            assert_eq!(a.get(key), b.get(key), "{key}: {a} vs {b}");
        }
    }
    std::fs::remove_dir_all(dir).unwrap();
}

/// Each call's arguments are `state --json`'s registers at its entry step (win64 for an
/// x64dbg trace of a Windows program), its return value rax at the step after its ret.
#[test]
fn args_and_returns_match_state() {
    let Some(real) = realdata("x64dbg/d-ornen_DBGLogParser_test1.trace64") else {
        return;
    };
    let f = real.to_str().unwrap();
    let rows = json_lines(&["calls", "-q", "--json", f]);
    let mut checked = 0;
    for c in &rows[..rows.len() - 1] {
        let Some(entry) = c["entry_i"].as_u64() else {
            continue;
        };
        let s = json_lines(&["state", "-q", "--json", f, "--at", &entry.to_string()]);
        let regs = &s[0]["regs"];
        for (k, reg) in ["rcx", "rdx", "r8", "r9"].iter().enumerate() {
            assert_eq!(c["args"][k], regs[reg], "{c}");
        }
        if let (Some(ret_i), false) = (c["ret_i"].as_u64(), c["unwound"] == true) {
            // One thread: the step after the ret is the next one.
            let s = json_lines(&["state", "-q", "--json", f, "--at", &(ret_i + 1).to_string()]);
            assert_eq!(c["ret"], s[0]["regs"]["rax"], "{c}");
        }
        checked += 1;
    }
    assert!(checked >= 6);
}

/// The text tree, `--thread`, `--symbols` from a CSV, `-o`, and errors.
#[test]
fn tree_symbols_and_errors() {
    let basic = testdata("tenet/basic.log");
    let basic = basic.to_str().unwrap();
    let o = tracekit(["calls", "-q", basic]);
    assert_eq!(
        stdout(&o),
        "        3      0  0x402000(0x0, 0x10, 0x0, 0x0) -> 0x55  [1 instructions, ret at 4]\n\
         1 calls, deepest depth 0, 0 unmatched returns, 0 open at the end (7 instructions)\n"
    );
    let dir = temp_dir("symbols");
    let csv = dir.join("syms.csv");
    std::fs::write(&csv, "address,name\n0x401000,main\n0x401ffc,helper\n").unwrap();
    let rows = json_lines(&[
        "calls",
        "-q",
        "--json",
        basic,
        "--symbols",
        csv.to_str().unwrap(),
    ]);
    assert_eq!(rows[0]["symbol"], "helper+0x4");
    let o = tracekit([
        "calls",
        "-q",
        "--folded",
        basic,
        "--symbols",
        csv.to_str().unwrap(),
    ]);
    assert_eq!(stdout(&o), "thread 0 6\nthread 0;helper+0x4 1\n");
    // Rebased: BASE is added to a CSV's addresses.
    let spec = format!("{}@0x4", csv.display());
    let rows = json_lines(&["calls", "-q", "--json", basic, "--symbols", &spec]);
    assert_eq!(rows[0]["symbol"], "helper");
    let out = dir.join("calls.jsonl");
    let o = tracekit(["calls", "-q", "--json", basic, "-o", out.to_str().unwrap()]);
    assert!(o.status.success());
    assert_eq!(std::fs::read_to_string(&out).unwrap().lines().count(), 2);
    let o = tracekit(["calls", "-q", "--json", basic, "-o", out.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1), "an existing output needs --force");
    let rows = json_lines(&["calls", "-q", "--json", basic, "--thread", "5"]);
    assert_eq!(rows.len(), 1);
    // Not an x86/x64 stream: a usage error.
    let o = tracekit([
        "calls",
        "-q",
        testdata("amber/example.tt6").to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let o = tracekit(["calls", "-q", basic, "--symbols", "/nonexistent.so"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("/nonexistent.so"), "{}", stderr(&o));
    std::fs::remove_dir_all(dir).unwrap();
}

/// `flame` writes an SVG with a rectangle per frame and refuses an existing one.
#[test]
fn flame_writes_an_svg() {
    let Some(real) = realdata("tenet/gaasedelen_tenet_boombox.trace.0.log") else {
        return;
    };
    let dir = temp_dir("flame");
    let svg = dir.join("f.svg");
    let real = real.to_str().unwrap();
    // The figures the SVG must show, from `info` and `calls`.
    let n = json_lines(&["info", "--json", real])[0]["instructions"]
        .as_u64()
        .unwrap();
    let rows = json_lines(&["calls", "--json", real]);
    let calls = num(&rows.last().unwrap()["summary"]["calls"]);
    let args = ["flame", real, "-o", svg.to_str().unwrap()];
    let o = tracekit(args);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stderr(&o).contains(&format!("stacks, {calls} calls, {n} instructions")),
        "{}",
        stderr(&o)
    );
    let text = std::fs::read_to_string(&svg).unwrap();
    assert!(text.starts_with("<?xml") && text.ends_with("</svg>\n"));
    assert!(text.contains(&format!("<title>all ({n} instructions, 100.00%)</title>")));
    assert!(text.contains(&format!("<title>thread 0 ({n} instructions")));
    assert_eq!(tracekit(args).status.code(), Some(1));
    std::fs::remove_dir_all(dir).unwrap();
}

/// `export --calls` writes the `calls` table: the rows of `calls --json`, field by field
/// (`args` as `arg0`…`arg3`), each call's `entry_i` joining the instruction at its target.
/// Input without an x86/x64 stream, and a stream (read once), are usage errors.
#[test]
fn export_calls_table_holds_the_rows_of_calls_json() {
    let mut files = vec![testdata("tenet/basic.log")];
    files.extend(realdata("x64dbg/d-ornen_DBGLogParser_test1.trace64"));
    files.extend(realdata("tenet/gaasedelen_tenet_boombox.trace.0.log"));
    let dir = temp_dir("export");
    for (n, file) in files.iter().enumerate() {
        let file = file.to_str().unwrap();
        let mut expected = json_lines(&["calls", file, "--json"]);
        expected.pop();
        assert!(!expected.is_empty(), "{file}");
        let out = dir.join(format!("ds{n}"));
        let o = tracekit(["export", file, "-o", out.to_str().unwrap(), "--calls"]);
        assert!(o.status.success(), "{file}: {}", stderr(&o));
        let rows = crate::common::parquet_rows(&out, "calls");
        assert_eq!(rows.len(), expected.len(), "{file}");
        for (row, want) in rows.iter().zip(&expected) {
            for (key, v) in want.as_object().unwrap() {
                let got = |k: &str| row.get(k).unwrap_or_else(|| panic!("{file}: no {k}"));
                match (key.as_str(), v) {
                    ("args", Value::Array(args)) => {
                        for (a, k) in args.iter().zip(["arg0", "arg1", "arg2", "arg3"]) {
                            assert_eq!(got(k).as_u64(), a.as_str().map(|_| num(a)), "{file} {k}");
                        }
                    }
                    ("symbol", _) => assert_eq!(got(key), v, "{file} symbol"),
                    (_, Value::String(_)) => {
                        assert_eq!(got(key).as_u64(), Some(num(v)), "{file} {key}")
                    }
                    _ => assert_eq!(got(key), v, "{file} {key}"),
                }
            }
        }
        let instructions = crate::common::parquet_rows(&out, "instructions");
        for row in &rows {
            let (Some(entry), Some(target)) = (row["entry_i"].as_u64(), row["target"].as_u64())
            else {
                continue;
            };
            let at = instructions
                .iter()
                .find(|r| r["i"].as_u64() == Some(entry))
                .unwrap();
            let pc = at
                .get("pc")
                .or_else(|| at.get("rip"))
                .and_then(Value::as_u64);
            assert_eq!(pc, Some(target), "{file}: call at {}", row["i"]);
        }
    }
    let o = tracekit([
        "export",
        testdata("dcfg/sample.dcfg.json").to_str().unwrap(),
        "-o",
        "x",
        "--calls",
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("--calls needs an x86/x64 instruction stream"),
        "{}",
        stderr(&o)
    );
    let trace = std::fs::read(testdata("tenet/basic.log")).unwrap();
    let o = crate::common::tracekit_stdin(["export", "-", "-o", "x", "--calls"], &trace);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("give a file, not a stream"),
        "{}",
        stderr(&o)
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
