//! CLI tests for `tracekit xref` and `tracekit index`: a hand-built x64dbg trace whose
//! answers are known (a write, then reads of the same word across a full dump, and a loop
//! whose executions are counted), the same answers from the sidecar index, a stale index,
//! the real x64dbg sample and tfile/amber inputs against oracles built from `tracekit
//! dump`, and the errors.

use std::path::{Path, PathBuf};

use serde_json::Value;
use trac_x64dbg::{Arch, Header, MemAccess, Recorder, RecorderOptions, RegDump, Step, Writer};

use crate::common::*;

const THREAD: u32 = 0x1234;

/// A fresh temporary directory (tests never write beside the repository's files).
fn temp_dir(name: &str) -> PathBuf {
    static N: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("tk-xref-{name}-{}-{n}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// 1200 instructions of a 10-instruction loop at 0x401000 (4 bytes each), one thread.
/// Instruction 100 writes 0x1122334455667788 to 0x14fe00; 900 reads it back (a full dump,
/// at 512, lies between); 901 reads the word at 0x14fe04; 950 writes 0x14ff00.
fn known_trace() -> Vec<u8> {
    let header = Header::new(Arch::X64, "known.exe");
    let mut rec = Recorder::new(
        Writer::new(Vec::new(), &header).unwrap(),
        RecorderOptions::default(),
    );
    let mut regs = RegDump::new(Arch::X64);
    regs.set_word(4, 0x14fe80);
    for k in 0..1200u64 {
        regs.set_ip(0x401000 + (k % 10) * 4);
        regs.set_word(0, k);
        let mem = match k {
            100 => vec![MemAccess {
                flags: 0,
                address: 0x14fe00,
                old: 0,
                new: Some(0x1122334455667788),
            }],
            900 => vec![MemAccess {
                flags: 1,
                address: 0x14fe00,
                old: 0x1122334455667788,
                new: None,
            }],
            901 => vec![MemAccess {
                flags: 1,
                address: 0x14fe04,
                old: 0x5566778800000000,
                new: None,
            }],
            950 => vec![MemAccess {
                flags: 0,
                address: 0x14ff00,
                old: 7,
                new: Some(8),
            }],
            _ => Vec::new(),
        };
        rec.step(Step {
            thread: THREAD,
            opcode: vec![0x48, 0x89, 0x04, 0x24],
            regs: regs.clone(),
            mem,
        })
        .unwrap();
    }
    rec.finish().unwrap()
}

fn write_known(dir: &Path) -> String {
    let path = dir.join("known.trace64");
    std::fs::write(&path, known_trace()).unwrap();
    path.to_str().unwrap().to_owned()
}

/// `tracekit xref ARGS…`: stdout (exit 0 required) and stderr.
fn xref(args: &[&str]) -> (String, String) {
    let o = tracekit([&["-q", "xref"], args].concat());
    assert_eq!(o.status.code(), Some(0), "{args:?}: {}", stderr(&o));
    (stdout(&o), stderr(&o))
}

fn hex(v: &Value) -> u64 {
    u64::from_str_radix(v.as_str().unwrap().trim_start_matches("0x"), 16).unwrap()
}

#[test]
fn known_answers_across_a_full_dump() {
    let dir = temp_dir("known");
    let file = write_known(&dir);
    let w = |i: u64| {
        format!(
            "{{\"i\":{i},\"thread\":{THREAD},\"pc\":\"{:#x}\"",
            0x401000 + (i % 10) * 4
        )
    };
    let (out, _) = xref(&[&file, "0x14fe00"]);
    assert_eq!(
        out,
        format!(
            "{},\"addr\":\"0x14fe00\",\"old\":\"0x0\",\"new\":\"0x1122334455667788\"}}\n\
             {},\"addr\":\"0x14fe00\",\"old\":\"0x1122334455667788\",\"new\":null}}\n\
             {},\"addr\":\"0x14fe04\",\"old\":\"0x5566778800000000\",\"new\":null}}\n",
            w(100),
            w(900),
            w(901)
        )
    );
    // One byte: the word at 0x14fe04 does not cover it; past the words: nothing, exit 0.
    let lines = |args: &[&str]| -> Vec<u64> {
        xref(args)
            .0
            .lines()
            .map(|l| {
                serde_json::from_str::<Value>(l).unwrap()["i"]
                    .as_u64()
                    .unwrap()
            })
            .collect()
    };
    assert_eq!(lines(&[&file, "0x14fe00:1"]), [100, 900]);
    assert_eq!(lines(&[&file, "0x14fe08:8"]), [901]);
    assert_eq!(lines(&[&file, "0x14fe00:0x200"]), [100, 900, 901, 950]);
    assert_eq!(xref(&[&file, "0x14fe0c:0xf4"]).0, "");
    // Executions: the third instruction of the loop runs every tenth step.
    let pcs = lines(&[&file, "--pc", "0x401008"]);
    assert_eq!(pcs, (0..120).map(|k| 2 + 10 * k).collect::<Vec<_>>());
    let (out, _) = xref(&[&file, "--pc", "0x401008"]);
    assert_eq!(out.lines().next().unwrap(), format!("{}}}", w(2)));
    assert_eq!(xref(&[&file, "--pc", "0x401001"]).0, "");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// With the sidecar (beside the trace, or at -o PATH with --index) the lines are the same;
/// a stale sidecar is noted and ignored; `state`-style seeks use it (no note, same steps).
#[test]
fn sidecar_gives_the_same_lines_and_stale_ones_are_noted() {
    let dir = temp_dir("sidecar");
    let file = write_known(&dir);
    let queries: [&[&str]; 5] = [
        &["0x14fe00"],
        &["0x14fe08:8"],
        &["0x14fe00:0x200"],
        &["--pc", "0x401008"],
        &["--pc", "0x401024"],
    ];
    let answers: Vec<String> = queries
        .iter()
        .map(|q| xref(&[&[file.as_str()], *q].concat()).0)
        .collect();
    let o = tracekit(["index", &file]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).is_empty());
    let sidecar = format!("{file}.tkidx");
    // Four accesses; 901's (8 bytes at 0x14fe04) is listed under both words it covers.
    assert!(stderr(&o).starts_with(&format!(
        "{sidecar}: 1200 steps, 1200 executions, 5 accesses"
    )));
    let (trace_len, index_len) = (
        std::fs::metadata(&file).unwrap().len(),
        std::fs::metadata(&sidecar).unwrap().len(),
    );
    assert!(index_len < trace_len / 5, "{index_len} of {trace_len}");
    let elsewhere = dir.join("other.idx");
    let o = tracekit(["-q", "index", &file, "-o", elsewhere.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    for (q, want) in queries.iter().zip(&answers) {
        let (out, err) = xref(&[&[file.as_str()], *q].concat());
        assert_eq!(&out, want, "{q:?} from the sidecar");
        assert_eq!(err, "");
        let (out, _) =
            xref(&[&["--index", elsewhere.to_str().unwrap(), file.as_str()], *q].concat());
        assert_eq!(&out, want, "{q:?} from --index");
    }
    // An --index that is not there: said, and answered from the trace.
    let missing = dir.join("missing.idx");
    let (out, err) = xref(&["--index", missing.to_str().unwrap(), &file, "0x14fe00"]);
    assert_eq!(out, answers[0]);
    assert!(err.starts_with("note: there is no index at"), "{err}");
    // The trace changes (one more instruction's worth of bytes): noted, answered anyway.
    let mut bytes = std::fs::read(&file).unwrap();
    bytes.extend_from_slice(&[0x00, 0x00, 0x00, 0x01, 0x90]);
    std::fs::write(&file, &bytes).unwrap();
    let (out, err) = xref(&[&file, "0x14fe00"]);
    assert_eq!(out, answers[0]);
    assert!(
        err.contains("note: ignoring the index") && err.contains("has changed"),
        "{err}"
    );
    // Rebuilding it makes it current again.
    assert!(tracekit(["-q", "index", &file, "--force"]).status.success());
    assert_eq!(
        xref(&[&file, "0x14fe00"]),
        (answers[0].clone(), String::new())
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Every access `dump` shows, found by `xref` at its address (with and without a sidecar),
/// and nothing else: on the real x64dbg sample (read-only: its index goes to a temporary
/// folder), the fixtures and, with --disasm, their sizes and kinds.
#[test]
fn x64dbg_files_match_the_dump() {
    let dir = temp_dir("real");
    let mut files = vec![
        testdata("x64dbg/basic.trace64")
            .to_str()
            .unwrap()
            .to_owned(),
        testdata("x64dbg/basic.trace32")
            .to_str()
            .unwrap()
            .to_owned(),
    ];
    if let Some(p) = realdata("x64dbg/d-ornen_DBGLogParser_test1.trace64") {
        files.push(p.to_str().unwrap().to_owned());
    }
    for (n, file) in files.iter().enumerate() {
        let index = dir.join(format!("{n}.tkidx"));
        let o = tracekit(["-q", "index", file, "-o", index.to_str().unwrap()]);
        assert!(o.status.success(), "{}", stderr(&o));
        let o = tracekit(["-q", "dump", file]);
        let word = if file.ends_with("32") { 4 } else { 8 };
        let dumped: Vec<Value> = stdout(&o)
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        let mut addrs: Vec<u64> = dumped
            .iter()
            .flat_map(|v| v["mem"].as_array().unwrap().iter().map(|m| hex(&m["addr"])))
            .collect();
        addrs.sort_unstable();
        addrs.dedup();
        assert!(!addrs.is_empty());
        for &a in addrs.iter().step_by((addrs.len() / 12).max(1)) {
            let mut want = String::new();
            for v in &dumped {
                for m in v["mem"].as_array().unwrap() {
                    let at = hex(&m["addr"]);
                    if at < a + 1 && a < at + word {
                        want.push_str(&format!(
                            "{{\"i\":{},\"thread\":{},\"pc\":{},\"addr\":{},\"old\":{},\"new\":{}}}\n",
                            v["i"], v["thread"], v["pc"], m["addr"], m["old"],
                            m.get("new").unwrap_or(&Value::Null)
                        ));
                    }
                }
            }
            let arg = format!("{a:#x}:1");
            assert_eq!(xref(&[file, &arg]).0, want, "{file} {arg}");
            let idx = index.to_str().unwrap();
            assert_eq!(
                xref(&["--index", idx, file, &arg]).0,
                want,
                "{file} {arg} (index)"
            );
        }
        // Executions of the first pc.
        let pc = dumped[0]["pc"].as_str().unwrap();
        let want: Vec<u64> = dumped
            .iter()
            .filter(|v| v["pc"] == pc)
            .map(|v| v["i"].as_u64().unwrap())
            .collect();
        let got: Vec<u64> = xref(&[file, "--pc", pc])
            .0
            .lines()
            .map(|l| {
                serde_json::from_str::<Value>(l).unwrap()["i"]
                    .as_u64()
                    .unwrap()
            })
            .collect();
        assert_eq!(got, want, "{file} --pc {pc}");
        // --disasm: the dump's size and access, from the scan and from the sidecar.
        let o = tracekit(["-q", "--disasm", "dump", file]);
        let disasm: Vec<Value> = stdout(&o)
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        let a = addrs[addrs.len() / 2];
        let want: Vec<(u64, Value, Value)> = disasm
            .iter()
            .flat_map(|v| {
                v["mem"].as_array().unwrap().iter().filter_map(move |m| {
                    let at = hex(&m["addr"]);
                    let len = m["size"].as_u64().unwrap_or(word);
                    (at <= a && a < at + len).then(|| {
                        (
                            v["i"].as_u64().unwrap(),
                            m["size"].clone(),
                            m["access"].clone(),
                        )
                    })
                })
            })
            .collect();
        for extra in [&[][..], &["--index", index.to_str().unwrap()][..]] {
            let arg = format!("{a:#x}:1");
            let got: Vec<(u64, Value, Value)> =
                xref(&[&["--disasm"], extra, &[file.as_str(), &arg]].concat())
                    .0
                    .lines()
                    .map(|l| {
                        let v: Value = serde_json::from_str(l).unwrap();
                        (
                            v["i"].as_u64().unwrap(),
                            v["size"].clone(),
                            v["access"].clone(),
                        )
                    })
                    .collect();
            assert_eq!(got, want, "{file} --disasm {arg} {extra:?}");
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// tfile frames: each frame whose collected memory covers the address, with the bytes of
/// the block inside the range; amber: the effective addresses, without values.
#[test]
fn tfile_frames_and_amber_addresses() {
    let file = testdata("gdb-tfile/amd64.tf").to_str().unwrap().to_owned();
    let o = tracekit(["-q", "dump", &file]);
    let frames: Vec<Value> = stdout(&o)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let (a, len) = frames
        .iter()
        .flat_map(|f| f["mem"].as_array().unwrap().iter())
        .map(|m| (hex(&m["addr"]), m["len"].as_u64().unwrap()))
        .next()
        .expect("a frame with memory");
    let want: Vec<u64> = frames
        .iter()
        .filter(|f| {
            f["mem"].as_array().unwrap().iter().any(|m| {
                let at = hex(&m["addr"]);
                at <= a && a < at + m["len"].as_u64().unwrap()
            })
        })
        .map(|f| f["i"].as_u64().unwrap())
        .collect();
    let (out, _) = xref(&[&file, &format!("{a:#x}:1")]);
    let got: Vec<Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(!want.is_empty() && len > 0);
    assert_eq!(
        got.iter()
            .map(|v| v["i"].as_u64().unwrap())
            .collect::<Vec<_>>(),
        want
    );
    for v in &got {
        // One byte of the block, before the frame's instruction ran.
        assert_eq!(hex(&v["addr"]), a);
        assert!(hex(&v["old"]) <= 0xff && v["new"].is_null(), "{v}");
    }
    // The tfile's index gives the same lines.
    let dir = temp_dir("tfile");
    let index = dir.join("t.tkidx");
    assert!(
        tracekit(["-q", "index", &file, "-o", index.to_str().unwrap()])
            .status
            .success()
    );
    assert_eq!(
        xref(&[
            "--index",
            index.to_str().unwrap(),
            &file,
            &format!("{a:#x}:1")
        ])
        .0,
        out
    );
    std::fs::remove_dir_all(&dir).unwrap();

    let file = testdata("amber/example.tt6").to_str().unwrap().to_owned();
    let o = tracekit(["-q", "dump", &file]);
    let records: Vec<Value> = stdout(&o)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let ea = records
        .iter()
        .find_map(|r| r.get("ea"))
        .expect("a memory record");
    let want: Vec<u64> = records
        .iter()
        .filter(|r| r.get("ea") == Some(ea))
        .map(|r| r["i"].as_u64().unwrap())
        .collect();
    let (out, _) = xref(&[&file, &format!("{}:1", ea.as_str().unwrap())]);
    let got: Vec<Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(
        got.iter()
            .map(|v| v["i"].as_u64().unwrap())
            .collect::<Vec<_>>(),
        want
    );
    assert!(
        got.iter()
            .all(|v| v["old"].is_null() && v["new"].is_null() && v["addr"] == *ea)
    );
}

#[test]
fn errors() {
    let file = testdata("x64dbg/basic.trace64")
        .to_str()
        .unwrap()
        .to_owned();
    for bad in [
        &["xref", &file, "0x14fe00:0"][..],
        &["xref", &file, "zz"],
        &["xref", &file],
        &["xref", &file, "0x10", "--pc", "0x10"],
    ] {
        let o = tracekit(bad);
        assert_eq!(o.status.code(), Some(2), "{bad:?}: {}", stderr(&o));
    }
    // No instruction stream: a usage error.
    let o = tracekit([
        "xref",
        testdata("dcfg/dialect-hex.dcfg.json").to_str().unwrap(),
        "0x10",
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    // A damaged file: the hits before the damage, then the error.
    let damaged = testdata("x64dbg/err-truncated-block.bin")
        .to_str()
        .unwrap()
        .to_owned();
    let o = tracekit(["-q", "dump", &damaged]);
    let pcs: Vec<String> = stdout(&o)
        .lines()
        .map(|l| {
            serde_json::from_str::<Value>(l).unwrap()["pc"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    let o = tracekit(["-q", "xref", &damaged, "--pc", &pcs[0]]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(
        stdout(&o).lines().count(),
        pcs.iter().filter(|p| **p == pcs[0]).count()
    );
    assert!(
        stderr(&o).contains("truncated block") && stderr(&o).contains("offset 0x"),
        "{}",
        stderr(&o)
    );
    // stdin has no identity to keep: a usage error. xref reads it (no sidecar).
    let bytes = std::fs::read(&file).unwrap();
    let o = tracekit_stdin(["-q", "index", "-"], &bytes);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let o = tracekit_stdin(["-q", "xref", "-", "--pc", "0x7ff6a1b21001"], &bytes);
    assert_eq!(stdout(&o), xref(&[&file, "--pc", "0x7ff6a1b21001"]).0);
    // An index where it cannot be written, and of a damaged trace: exit 1, nothing left.
    let dir = temp_dir("errors");
    let o = tracekit([
        "-q",
        "index",
        &file,
        "-o",
        dir.join("missing/x.tkidx").to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("cannot write the index"),
        "{}",
        stderr(&o)
    );
    let o = tracekit([
        "-q",
        "index",
        &damaged,
        "-o",
        dir.join("d.tkidx").to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(
        std::fs::read_dir(&dir).unwrap().count(),
        0,
        "temporary files left"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
