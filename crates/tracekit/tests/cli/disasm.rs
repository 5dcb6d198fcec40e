//! `--disasm`: `dump` and `export` add `asm` to instructions and `size`/`access` to x64dbg
//! memory accesses; without the flag the output is the golden one, byte for byte.

use std::path::Path;
use std::process::Command;

use crate::common::{realdata, stderr, stdout, testdata, tracekit};

/// The JSON lines of `tracekit dump [--disasm] FILE`, parsed.
fn dump(path: &Path, disasm: bool) -> Vec<serde_json::Value> {
    dump_text(path, disasm)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// Whether the keys `before`, `"asm"`, `after` come in this order in a JSON `line`.
fn asm_between(line: &str, before: &str, after: &str) -> bool {
    let at = |k: &str| line.find(&format!("\"{k}\":"));
    matches!((at(before), at("asm"), at(after)), (Some(a), Some(b), Some(c)) if a < b && b < c)
}

/// The output of `tracekit dump [--disasm] FILE`.
fn dump_text(path: &Path, disasm: bool) -> String {
    let mut args = vec!["dump".as_ref(), path.as_os_str()];
    if disasm {
        args.push("--disasm".as_ref());
    }
    let out = tracekit(args);
    assert!(out.status.success(), "{}", stderr(&out));
    stdout(&out)
}

/// With `--disasm`, every x64dbg line has `asm` right after `opcode` and every memory row
/// `size` and `access`; taking them away gives the plain dump; without the flag the dump
/// is the golden file.
#[test]
fn x64dbg_dump_disasm_adds_asm_size_and_access() {
    for name in ["basic.trace64", "basic.trace32", "sessions.trace64"] {
        let path = testdata(&format!("x64dbg/{name}"));
        let plain = tracekit(["dump".as_ref(), path.as_os_str()]);
        let golden = std::fs::read_to_string(testdata(&format!("x64dbg/{name}.expected")));
        assert_eq!(
            stdout(&plain),
            golden.unwrap(),
            "{name}: plain dump unchanged"
        );
        let out = tracekit(["--disasm".as_ref(), "dump".as_ref(), path.as_os_str()]);
        assert!(out.status.success(), "{}", stderr(&out));
        let text = stdout(&out);
        let mut accesses = std::collections::BTreeMap::new();
        let plain: Vec<serde_json::Value> = stdout(&plain)
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(text.lines().count(), plain.len());
        for (line, plain) in text.lines().zip(&plain) {
            let mut v: serde_json::Value = serde_json::from_str(line).unwrap();
            let asm = v["asm"].as_str().unwrap().to_owned();
            assert!(
                line.contains(&format!(r#""asm":"{asm}","regs":"#)),
                "{line}"
            );
            assert!(!asm.is_empty() && asm == asm.to_lowercase());
            for m in v["mem"].as_array_mut().unwrap() {
                let m = m.as_object_mut().unwrap();
                let access = m.remove("access").unwrap();
                let size = m.remove("size").unwrap();
                let key = (access.as_str().unwrap().to_owned(), size.as_u64());
                *accesses.entry(key).or_insert(0u32) += 1;
            }
            v.as_object_mut().unwrap().remove("asm");
            assert_eq!(&v, plain);
        }
        // The generator's stores, loads, pushes, pops and 16-byte stores all match.
        assert!(
            accesses.keys().all(|(a, s)| a != "unknown" && s.is_some()),
            "{name}: {accesses:?}"
        );
        assert!(accesses.keys().any(|(a, _)| a == "read"), "{name}");
        assert!(accesses.keys().any(|(a, _)| a == "write"), "{name}");
    }
}

/// The real sample: every instruction disassembles, every access is matched (measured:
/// 84 of 84; 29 reads, 2 read-writes, 53 writes).
#[test]
fn x64dbg_real_sample_disasm() {
    let Some(path) = realdata("x64dbg/d-ornen_DBGLogParser_test1.trace64") else {
        return;
    };
    let lines = dump(&path, true);
    assert_eq!(lines.len(), 152);
    assert_eq!(lines[0]["asm"], "mov qword ptr [rax+0x18], rsi");
    assert_eq!(lines[2]["asm"], "push r14");
    let mut kinds = std::collections::BTreeMap::new();
    for v in &lines {
        assert!(v["asm"].is_string(), "{v}");
        for m in v["mem"].as_array().unwrap() {
            *kinds
                .entry(m["access"].as_str().unwrap().to_owned())
                .or_insert(0) += 1;
            assert!((1..=8).contains(&m["size"].as_u64().unwrap()), "{m}");
        }
    }
    let want = [("read", 29), ("readwrite", 2), ("write", 53)];
    assert_eq!(kinds, want.map(|(k, n)| (k.to_owned(), n)).into());
}

/// amber: `asm` after `mnemonic`, starting with it (null exactly where the mnemonic is
/// missing), for TT6, TT6E, FULL and a merged directory; the plain dump is unchanged.
#[test]
fn amber_dump_disasm_adds_asm() {
    for name in [
        "all-opcodes.tt6",
        "all-opcodes.tt6e",
        "example.tt6",
        "full-1008.full",
        "threads",
    ] {
        let path = testdata(&format!("amber/{name}"));
        let text = dump_text(&path, true);
        let plain = dump(&path, false);
        assert_eq!(text.lines().count(), plain.len());
        let mut n = 0;
        for (line, p) in text.lines().zip(plain) {
            let mut v: serde_json::Value = serde_json::from_str(line).unwrap();
            if v.get("class").is_none() {
                assert_eq!(v, p, "{name}: not an instruction");
                continue;
            }
            match v["mnemonic"].as_str() {
                Some(m) => {
                    assert!(asm_between(line, "mnemonic", "class"), "{line}");
                    assert!(v["asm"].as_str().unwrap().starts_with(m), "{v}");
                }
                None => assert!(
                    v["asm"].is_null() && asm_between(line, "op", "class"),
                    "{v}"
                ),
            }
            v.as_object_mut().unwrap().remove("asm");
            assert_eq!(v, p);
            n += 1;
        }
        assert!(n > 0, "{name}");
    }
    let lines = dump(&testdata("amber/example.tt6"), true);
    assert_eq!(lines[1]["asm"], "stw r31, -4(r1)");
    assert_eq!(lines[2]["asm"], "bl 0x1018");
}

/// gdb-tfile: `asm` after `pc`, null where the frame did not collect the bytes at pc (none
/// of the fixtures does; the library tests cover frames that do).
#[test]
fn tfile_dump_disasm_has_null_asm_without_code_bytes() {
    for name in ["amd64.tf", "s390-big-endian.tf", "no-tdesc.tf"] {
        let text = dump_text(&testdata(&format!("gdb-tfile/{name}")), true);
        for line in text.lines() {
            assert!(asm_between(line, "pc", "mem"), "{line}");
            let v: serde_json::Value = serde_json::from_str(line).unwrap();
            assert!(v["asm"].is_null());
        }
        assert!(text.lines().count() > 0);
    }
}

/// `export --disasm` writes `asm` in `instructions` and `size`/`access` in `memory`; DuckDB
/// reads them when its Python package is installed.
#[test]
fn x64dbg_export_disasm_columns() {
    let path = testdata("x64dbg/basic.trace64");
    let dir = std::env::temp_dir().join(format!("tracekit-disasm-export-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let out = tracekit([
        "-q".as_ref(),
        "export".as_ref(),
        "--disasm".as_ref(),
        path.as_os_str(),
        "-o".as_ref(),
        dir.as_os_str(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("_tracekit.json")).unwrap()).unwrap();
    let columns = |table: &str| -> Vec<String> {
        let t = manifest["tables"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["name"] == table)
            .unwrap();
        t["columns"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["name"].as_str().unwrap().to_owned())
            .collect()
    };
    let instructions = columns("instructions");
    let at = instructions.iter().position(|c| c == "asm").unwrap();
    assert_eq!(instructions[at - 1], "opcode");
    let memory = columns("memory");
    assert!(
        memory.ends_with(&["size".to_owned(), "access".to_owned()]),
        "{memory:?}"
    );
    let duckdb = Command::new("python3")
        .args(["-c", "import duckdb"])
        .status()
        .is_ok_and(|s| s.success());
    if duckdb {
        let script = format!(
            "import duckdb\n\
             d = '{}'\n\
             print(duckdb.sql(f\"select asm from read_parquet('{{d}}/instructions/*.parquet') order by i limit 1\").fetchall()[0][0])\n\
             print(duckdb.sql(f\"select count(*) from read_parquet('{{d}}/memory/*.parquet') where access = 'write' and size = 8\").fetchall()[0][0])\n\
             print(duckdb.sql(f\"select count(*) from read_parquet('{{d}}/memory/*.parquet') where access = 'unknown'\").fetchall()[0][0])",
            dir.display()
        );
        let out = Command::new("python3")
            .args(["-c", &script])
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", stderr(&out));
        let text = stdout(&out);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "push rbx");
        assert!(lines[1].parse::<u64>().unwrap() > 0);
        assert_eq!(lines[2], "0");
    } else {
        eprintln!("skipped the DuckDB part: python3 -c 'import duckdb' fails");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
