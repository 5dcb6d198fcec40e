//! CLI tests for `tracekit state` and `tracekit mem`: the `--json` shapes of issue 14
//! item 7 checked against `tracekit dump` of the same file (the pc, thread and written
//! values), the text renderings, file, stdin and compressed input alike, and the edges:
//! N past the end, bad addresses and lengths, formats without registers or instruction
//! streams exit 2; a damaged file exits 1 (`mem` after printing what it found).

use serde_json::Value;

use crate::common::*;

const BASIC: &str = "x64dbg/basic.trace64";

fn path(rel: &str) -> String {
    testdata(rel).to_str().unwrap().to_owned()
}

/// A `"0x…"` value (at most 16 bytes: the widest x64dbg field, an XMM register).
fn hex(v: &Value) -> u128 {
    u128::from_str_radix(v.as_str().unwrap().trim_start_matches("0x"), 16).unwrap()
}

/// `tracekit ARGS…` that must succeed: its stdout.
fn ok(args: &[&str]) -> String {
    let o = tracekit(args);
    assert_eq!(o.status.code(), Some(0), "{args:?}: {}", stderr(&o));
    stdout(&o)
}

/// The records `tracekit dump` prints.
fn dumped(file: &str) -> Vec<Value> {
    ok(&["dump", "-q", file])
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// Asserts that `json` (one object) has exactly `keys` at its top level, in this order.
fn assert_keys(json: &str, keys: &[&str]) {
    let v: Value = serde_json::from_str(json).unwrap();
    assert_eq!(v.as_object().unwrap().len(), keys.len(), "{json}");
    let at: Vec<usize> = keys
        .iter()
        .map(|k| json.find(&format!("\"{k}\":")).unwrap())
        .collect();
    assert!(at.windows(2).all(|w| w[0] < w[1]), "{keys:?} in {json}");
}

#[test]
fn state_json_has_the_shape_and_the_dumps_pc_and_thread() {
    let file = path(BASIC);
    let records = dumped(&file);
    for at in [0usize, 1, 511, 512, 700, records.len() - 1] {
        let out = ok(&["state", &file, "--at", &at.to_string(), "--json"]);
        assert_eq!(out.lines().count(), 1);
        let v: Value = serde_json::from_str(&out).unwrap();
        assert_keys(&out, &["i", "thread", "regs"]);
        assert_eq!(v["i"], at);
        assert_eq!(v["thread"], records[at]["thread"]);
        let regs = v["regs"].as_object().unwrap();
        assert_eq!(hex(&regs["rip"]), hex(&records[at]["pc"]), "{at}");
        for name in [
            "rax",
            "rsp",
            "rflags",
            "gs",
            "dr7",
            "xmm0",
            "ymm15.High",
            "flags.z",
        ] {
            assert!(regs[name].as_str().unwrap().starts_with("0x"), "{name}");
        }
        assert!(regs.contains_key("lastError"));
        // Registers the instruction's block records (a change or a full dump) have the
        // recorded value, under the same names (wide ones included: `xmm0`, `st0`).
        // Every key of the dump is a register `state` shows too, but for the nonzero
        // padding (`pad_0x…`) the dump keeps so that the words round-trip.
        for (name, value) in records[at]["regs"].as_object().unwrap() {
            if name.starts_with("pad_0x") {
                continue;
            }
            let ours = regs
                .get(name)
                .unwrap_or_else(|| panic!("{at}: dump key {name} is not in state"));
            assert_eq!(hex(ours), hex(value), "{at} {name}");
        }
    }
    // Numbers in hex too.
    let a = ok(&["state", &file, "--at", "0x2bc", "--json"]);
    assert_eq!(a, ok(&["state", &file, "--at", "700", "--json"]));
}

#[test]
fn state_text_is_a_register_table() {
    let out = ok(&["state", &path(BASIC), "--at", "700"]);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(
        lines[0],
        "registers before instruction 700 (thread 4728, pc 0x7ff6a1b21011)"
    );
    assert!(lines[2].starts_with("rax 0x") && lines[2].contains("  rcx 0x"));
    assert!(out.contains("\nrip    0x00007ff6a1b21011  rflags 0x0000000000000202\n"));
    assert!(out.contains("\nxmm15 0x"));
}

#[test]
fn stdin_and_compressed_input_give_the_same_answers() {
    let file = path(BASIC);
    let bytes = std::fs::read(&file).unwrap();
    let gz = {
        use std::io::Write;
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        e.write_all(&bytes).unwrap();
        e.finish().unwrap()
    };
    for args in [
        vec!["state", "--at", "900", "--json"],
        vec!["mem", "--at", "701", "0x24fdf0", "40", "--json"],
    ] {
        let direct = ok(&[&args[..1], &[file.as_str()], &args[1..]].concat());
        for input in [&bytes, &gz] {
            let o = tracekit_stdin([&args[..1], &["-"], &args[1..]].concat(), input);
            assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
            assert_eq!(stdout(&o), direct, "{args:?}");
        }
    }
}

#[test]
fn mem_json_has_the_shape_and_the_dumps_written_values() {
    let file = path(BASIC);
    let records = dumped(&file);
    let mut checked = 0;
    for r in records.iter().step_by(37) {
        let i = r["i"].as_u64().unwrap();
        for m in r["mem"].as_array().unwrap() {
            let Some(new) = m.get("new") else { continue };
            if i + 1 >= records.len() as u64 {
                continue;
            }
            let addr = m["addr"].as_str().unwrap();
            let at = (i + 1).to_string();
            let out = ok(&["mem", &file, "--at", &at, addr, "8", "--json"]);
            let v: Value = serde_json::from_str(&out).unwrap();
            assert_keys(&out, &["i", "addr", "len", "bytes", "source", "inferred"]);
            assert_eq!(
                (v["i"].as_u64(), v["addr"].as_str()),
                (Some(i + 1), Some(addr))
            );
            assert_eq!(v["len"], 8);
            let bytes: Vec<u8> = v["bytes"]
                .as_array()
                .unwrap()
                .iter()
                .map(|b| b.as_u64().unwrap() as u8)
                .collect();
            assert_eq!(bytes, (hex(new) as u64).to_le_bytes(), "write at {i}");
            assert!(v["source"].as_array().unwrap().iter().all(|s| s == i));
            assert!(v["inferred"].as_array().unwrap().iter().all(|s| s == false));
            // `ADDR:LEN` is the same query.
            let joined = format!("{addr}:8");
            assert_eq!(ok(&["mem", &file, "--at", &at, &joined, "--json"]), out);
            checked += 1;
        }
    }
    assert!(checked > 3);
}

#[test]
fn mem_text_is_a_hex_dump_with_unknown_and_inferred_bytes() {
    let file = path(BASIC);
    let out = ok(&["mem", &file, "--at", "0", "0x24fdf4", "30"]);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(
        lines[0],
        "memory before instruction 0: 30 bytes at 0x24fdf4"
    );
    assert!(lines[1].starts_with("0024fdf0             *"), "{out}");
    assert!(lines[3].starts_with("0024fe10  ?? ??   "), "{out}");
    assert!(out.contains("\n*xx  inferred: "));
    assert!(out.contains("\n ??  unknown: "));
    assert!(out.contains("\nsources:\n"));
    assert!(out.contains(" (inferred)\n"));
    // A bare address is one word: 8 bytes on x64, 4 on x86.
    let v: Value =
        serde_json::from_str(&ok(&["mem", &file, "--at", "5", "0x24fdf0", "--json"])).unwrap();
    assert_eq!(v["len"], 8);
    let v: Value = serde_json::from_str(&ok(&[
        "mem",
        &path("x64dbg/basic.trace32"),
        "--at",
        "5",
        "0x19ff00",
        "--json",
    ]))
    .unwrap();
    assert_eq!(v["len"], 4);
}

#[test]
fn tfile_frames_have_state_and_memory() {
    let file = path("gdb-tfile/amd64.tf");
    let records = dumped(&file);
    let at = records.len() / 2;
    let v: Value =
        serde_json::from_str(&ok(&["state", &file, "--at", &at.to_string(), "--json"])).unwrap();
    assert_eq!(hex(&v["regs"]["rip"]), hex(&records[at]["pc"]));
    // A block the frame collected: its bytes, from this frame.
    let m = &records[at]["mem"][0];
    let (addr, len) = (
        m["addr"].as_str().unwrap(),
        m["len"].as_u64().unwrap().min(16),
    );
    let v: Value = serde_json::from_str(&ok(&[
        "mem",
        &file,
        "--at",
        &at.to_string(),
        addr,
        &len.to_string(),
        "--json",
    ]))
    .unwrap();
    assert!(v["source"].as_array().unwrap().iter().all(|s| s == at));
    assert!(v["inferred"].as_array().unwrap().iter().all(|s| s == false));
    // The text calls a tfile's steps frames, as GDB does (`tfind N`).
    let n = at.to_string();
    let text = ok(&["state", &file, "--at", &n]);
    assert!(
        text.starts_with(&format!("registers before frame {at} (thread 0, pc ")),
        "{text}"
    );
    let text = ok(&["mem", &file, "--at", &n, addr, &len.to_string()]);
    assert!(
        text.starts_with(&format!(
            "memory before frame {at}: {len} bytes at {addr}\n"
        )),
        "{text}"
    );
    assert!(text.contains(&format!("  frame {at}\n")), "{text}");
    assert!(!text.contains("instruction"), "{text}");
    let count = records.len();
    let o = tracekit(["state", &file, "--at", &count.to_string()]);
    assert_eq!(o.status.code(), Some(2));
    let past = format!("frame {count} is past the end: the trace has {count} frames");
    assert!(stderr(&o).contains(&past), "{}", stderr(&o));
}

#[test]
fn the_real_x64dbg_sample() {
    let Some(p) = realdata("x64dbg/d-ornen_DBGLogParser_test1.trace64") else {
        return;
    };
    let file = p.to_str().unwrap();
    let records = dumped(file);
    let last = records.len() - 1;
    let v: Value =
        serde_json::from_str(&ok(&["state", file, "--at", &last.to_string(), "--json"])).unwrap();
    assert_eq!(hex(&v["regs"]["rip"]), hex(&records[last]["pc"]));
    let o = tracekit(["state", file, "--at", &records.len().to_string()]);
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn edges_exit_2_for_usage_and_1_for_damage() {
    let file = path(BASIC);
    let usage = |args: &[&str], says: &str| {
        let o = tracekit(args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        assert!(stderr(&o).contains(says), "{args:?}: {}", stderr(&o));
        assert!(stdout(&o).is_empty());
    };
    let past = "instruction 1100 is past the end: the trace has 1100 instructions";
    usage(&["state", &file, "--at", "1100"], past);
    usage(
        &["state", &file, "--at", "99999999999", "--json"],
        "past the end",
    );
    usage(&["mem", &file, "--at", "1100", "0x1000", "8"], past);
    usage(&["mem", &file, "--at", "1", "0x12z"], "is not an address");
    usage(&["mem", &file, "--at", "1", "0x10:0"], "must not be 0");
    usage(
        &["mem", &file, "--at", "1", "0x10:4", "4"],
        "give the length once",
    );
    usage(&["mem", &file, "--at", "1", "0x10", "2000000"], "1 MiB");
    usage(
        &["mem", &file, "--at", "1", "0xffffffffffffffff", "2"],
        "end of the address space",
    );
    usage(&["state", &file, "--at", "-1"], "'-1'");
    usage(&["state", &file], "--at");
    usage(
        &["state", &path("amber/all-opcodes.tt6"), "--at", "0"],
        "this tt6 trace has no named registers",
    );
    usage(
        &[
            "mem",
            &path("dcfg/dialect-numbers.dcfg.json"),
            "--at",
            "0",
            "0x10",
        ],
        "no instruction stream",
    );
    usage(
        &["state", &path("gdb-tfile/no-tdesc.tf"), "--at", "0"],
        "this gdb-tfile trace has no named registers",
    );
    // A truncated file: before the damage an answer; past it the damage, exit 1.
    let cut = path("x64dbg/err-truncated-block.bin");
    assert!(ok(&["state", &cut, "--at", "4", "--json"]).starts_with(r#"{"i":4,"#));
    let o = tracekit(["state", &cut, "--at", "5"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains("truncated block 5"), "{}", stderr(&o));
    // mem looks past N for an address nothing touched, meets the damage: the answer so
    // far, then the error.
    let o = tracekit(["mem", &cut, "--at", "1", "0x10", "--json"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let v: Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert!(v["bytes"].as_array().unwrap().iter().all(Value::is_null));
    assert!(stderr(&o).contains("truncated block 5"), "{}", stderr(&o));
}

/// Tenet names its registers on its lines: the state before instruction N carries each
/// register's value from the latest line up to N that named it (checked against `dump`).
#[test]
fn state_of_a_tenet_trace_carries_the_lines_registers_forward() {
    let file = path("tenet/basic.log");
    let records = dumped(&file);
    for at in 0..records.len() {
        let out = ok(&["state", &file, "--at", &at.to_string(), "--json"]);
        let v: Value = serde_json::from_str(&out).unwrap();
        let regs = v["regs"].as_object().unwrap();
        let mut expected = std::collections::BTreeMap::new();
        for r in &records[..=at] {
            for (name, value) in r["regs"].as_object().unwrap() {
                expected.insert(name.clone(), hex(value));
            }
        }
        for (name, value) in &expected {
            assert_eq!(hex(&regs[name.as_str()]), *value, "{name} at {at}");
        }
    }
}

/// `mem` with a sidecar index beside the trace (copied to a temporary folder, where
/// `tracekit index` writes it) prints what it prints without, text and `--json`, with and
/// without `--disasm`, at instructions and addresses the dump shows accessed (and around
/// them), on the fixture and the real sample.
#[test]
fn mem_with_a_sidecar_prints_what_it_prints_without() {
    let dir = std::env::temp_dir().join(format!("tk-cli-mem-sidecar-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut files = vec![testdata(BASIC)];
    files.extend(realdata("x64dbg/d-ornen_DBGLogParser_test1.trace64"));
    for (n, src) in files.iter().enumerate() {
        let file = dir.join(format!("{n}.trace64"));
        std::fs::copy(src, &file).unwrap();
        let file = file.to_str().unwrap();
        let records = dumped(file);
        let count = records.len();
        let mut asks: Vec<Vec<String>> = Vec::new();
        let accesses = records
            .iter()
            .flat_map(|v| v["mem"].as_array().unwrap().iter().map(|m| hex(&m["addr"])));
        for (k, addr) in accesses.step_by(37).take(12).enumerate() {
            for at in [0, count / 3, count / 2 + k, count - 1] {
                for (start, len) in [(addr, 8), (addr - 5, 24)] {
                    for extra in [&[][..], &["--json"], &["--disasm", "--json"]] {
                        let mut args = vec![
                            "mem".to_owned(),
                            file.to_owned(),
                            "--at".to_owned(),
                            at.to_string(),
                            format!("{start:#x}"),
                            len.to_string(),
                        ];
                        args.extend(extra.iter().map(|s| (*s).to_owned()));
                        asks.push(args);
                    }
                }
            }
        }
        assert!(asks.len() >= 24);
        let run = |args: &Vec<String>| {
            let o = tracekit(args);
            assert_eq!(o.status.code(), Some(0), "{args:?}: {}", stderr(&o));
            (stdout(&o), stderr(&o))
        };
        let scanned: Vec<_> = asks.iter().map(run).collect();
        let o = tracekit(["-q", "index", file]);
        assert!(o.status.success(), "{}", stderr(&o));
        assert!(std::path::Path::new(&format!("{file}.tkidx")).exists());
        for (args, want) in asks.iter().zip(&scanned) {
            assert_eq!(&run(args), want, "{args:?}");
        }
        // Known bytes on both sides, so the comparison is not of empty answers.
        assert!(scanned.iter().any(|(out, _)| out.contains("instruction")));
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
