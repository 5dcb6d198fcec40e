//! CLI tests for `tracekit diff`: exit codes (0 equal, 1 different, 2 any error), the
//! `--json` shapes, a hand-built pair that parts and rejoins at a known step, `--ignore`,
//! `--no-mem`, `--thread`, `--rebase`, stdin and compressed input, amber traces by pc and
//! effective address, the real x64dbg sample against itself, and the errors (two formats,
//! bad arguments, a damaged file).

use serde_json::Value;
use trac_x64dbg::{Arch, Header, MemAccess, Recorder, RecorderOptions, RegDump, Writer};

use crate::common::*;

/// A temporary file holding `bytes`, removed on drop.
struct Temp(std::path::PathBuf);

impl Temp {
    fn new(name: &str, bytes: &[u8]) -> Temp {
        let p = std::env::temp_dir().join(format!("tracekit-diff-{}-{name}", std::process::id()));
        std::fs::write(&p, bytes).unwrap();
        Temp(p)
    }

    fn path(&self) -> &str {
        self.0.to_str().unwrap()
    }
}

impl Drop for Temp {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// One instruction: thread, pc, rbx, a memory word (address, old, new).
type Ins = (u32, u64, u64, Option<(u64, u64, Option<u64>)>);

/// An x64dbg trace of `steps` (4-byte nops), recorded as x64dbg does.
fn trace(steps: &[Ins]) -> Vec<u8> {
    let writer = Writer::new(Vec::new(), &Header::new(Arch::X64, "diff.exe")).unwrap();
    let mut rec = Recorder::new(writer, RecorderOptions::default());
    for &(thread, pc, rbx, mem) in steps {
        let mut regs = RegDump::new(Arch::X64);
        regs.set_word(3, rbx);
        regs.set_ip(pc);
        rec.step(trac_x64dbg::Step {
            thread,
            opcode: vec![0x0f, 0x1f, 0x40, 0x00],
            regs,
            mem: mem
                .map(|(address, old, new)| MemAccess {
                    flags: u8::from(new.is_none()),
                    address,
                    old,
                    new,
                })
                .into_iter()
                .collect(),
        })
        .unwrap();
    }
    rec.finish().unwrap()
}

fn straight(thread: u32, pc: u64, n: u64) -> Vec<Ins> {
    (0..n).map(|k| (thread, pc + 4 * k, 7, None)).collect()
}

fn json_lines(out: &str) -> Vec<Value> {
    out.lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn code(o: &std::process::Output) -> i32 {
    o.status.code().unwrap()
}

#[test]
fn a_trace_equals_itself_exit_0_and_the_json_summary() {
    let file = testdata("x64dbg/basic.trace64");
    let o = tracekit(["diff", "-q", file.to_str().unwrap(), file.to_str().unwrap()]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert!(
        stdout(&o).contains("the traces are equal"),
        "{}",
        stdout(&o)
    );
    let o = tracekit([
        "diff",
        "--json",
        file.to_str().unwrap(),
        file.to_str().unwrap(),
    ]);
    assert_eq!(code(&o), 0);
    let lines = json_lines(&stdout(&o));
    assert_eq!(lines.len(), 1);
    let s = &lines[0]["summary"];
    // 1100 instructions, as `info` counts them.
    let info = tracekit(["info", "--json", file.to_str().unwrap()]);
    let n = serde_json::from_str::<Value>(&stdout(&info)).unwrap()["instructions"].clone();
    assert_eq!(s["compared"], n);
    assert_eq!(s["equal"], n);
    assert_eq!(s["regions"], 0);
}

#[test]
fn parting_and_rejoining_is_one_pc_region_exit_1() {
    let a = straight(1, 0x1000, 60);
    let mut b = straight(1, 0x1000, 20);
    b.extend(straight(1, 0x8000, 2));
    b.extend(straight(1, 0x1000 + 4 * 25, 35));
    let (fa, fb) = (
        Temp::new("part-a", &trace(&a)),
        Temp::new("part-b", &trace(&b)),
    );
    let o = tracekit(["diff", "--json", fa.path(), fb.path()]);
    assert_eq!(code(&o), 1, "{}", stderr(&o));
    assert_eq!(stderr(&o), "", "different is not an error");
    let lines = json_lines(&stdout(&o));
    assert_eq!(lines.len(), 2);
    let r = &lines[0];
    assert_eq!(r["kind"], "pc");
    assert_eq!(
        [&r["a_start"], &r["a_end"], &r["b_start"], &r["b_end"]],
        [20, 25, 20, 22].map(Value::from).each_ref()
    );
    assert_eq!(r["first"]["a_pc"], "0x1050");
    assert_eq!(r["first"]["b_pc"], "0x8000");
    let s = &lines[1]["summary"];
    assert_eq!(
        (
            s["compared"].as_u64(),
            s["a_only"].as_u64(),
            s["b_only"].as_u64()
        ),
        (Some(55), Some(5), Some(2))
    );
    // The text: the summary, the first divergence and its context from both sides.
    let o = tracekit(["diff", "-q", fa.path(), fb.path()]);
    assert_eq!(code(&o), 1);
    let text = stdout(&o);
    assert!(
        text.contains("compared 55 instructions in lockstep: 55 equal"),
        "{text}"
    );
    assert!(
        text.contains("first divergence: pc at A 20..25, B 20..22"),
        "{text}"
    );
    assert!(text.contains("> ") && text.contains("0x8000"), "{text}");
    // --disasm: the context lines are disassembled.
    let o = tracekit(["diff", "-q", "--disasm", fa.path(), fb.path()]);
    assert!(stdout(&o).contains("nop dword ptr [rax]"), "{}", stdout(&o));
}

#[test]
fn register_and_memory_divergences_ignore_and_no_mem() {
    let mut a: Vec<Ins> = straight(1, 0x1000, 40);
    for s in &mut a {
        s.3 = Some((0x5000, 1, Some(2)));
    }
    let mut b = a.clone();
    for s in &mut b[10..12] {
        s.2 = 0xbad;
    }
    b[30].3 = Some((0x5000, 1, Some(3)));
    let (fa, fb) = (Temp::new("rm-a", &trace(&a)), Temp::new("rm-b", &trace(&b)));
    let o = tracekit(["diff", "--json", fa.path(), fb.path()]);
    assert_eq!(code(&o), 1);
    let lines = json_lines(&stdout(&o));
    let kinds: Vec<(&str, u64, u64)> = lines[..lines.len() - 1]
        .iter()
        .map(|r| {
            (
                r["kind"].as_str().unwrap(),
                r["a_start"].as_u64().unwrap(),
                r["a_end"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(kinds, [("regs", 10, 12), ("mem", 30, 31)]);
    assert_eq!(
        lines[0]["first"]["regs"][0],
        serde_json::json!({"name":"rbx","a":"0x7","b":"0xbad"})
    );
    assert_eq!(lines[1]["first"]["mem"]["b_new"], "0x3");
    let o = tracekit([
        "diff",
        "-q",
        "--ignore",
        "rbx",
        "--no-mem",
        fa.path(),
        fb.path(),
    ]);
    assert_eq!(code(&o), 0, "{}", stdout(&o));
    let o = tracekit(["diff", "-q", "--ignore", "rbx", fa.path(), fb.path()]);
    assert_eq!(code(&o), 1);
    // An unknown register is an error (exit 2).
    let o = tracekit(["diff", "-q", "--ignore", "xyz", fa.path(), fb.path()]);
    assert_eq!(code(&o), 2);
    assert!(stderr(&o).contains("--ignore xyz"), "{}", stderr(&o));
}

#[test]
fn threads_are_paired_in_order_or_by_thread() {
    // A: threads 1 and 2; B: the same instructions as threads 5 and 6, 6's rbx differs.
    let mut a = straight(1, 0x1000, 10);
    a.extend(straight(2, 0x2000, 10));
    a.extend(straight(1, 0x1000 + 40, 10));
    let b: Vec<Ins> = a
        .iter()
        .map(|&(t, pc, rbx, m)| {
            if t == 1 {
                (5, pc, rbx, m)
            } else {
                (6, pc, 0x66, m)
            }
        })
        .collect();
    let (fa, fb) = (
        Temp::new("thr-a", &trace(&a)),
        Temp::new("thr-b", &trace(&b)),
    );
    let o = tracekit(["diff", "--json", fa.path(), fb.path()]);
    assert_eq!(code(&o), 1);
    let lines = json_lines(&stdout(&o));
    assert_eq!(lines[0]["kind"], "regs");
    assert_eq!(
        (lines[0]["a_start"].as_u64(), lines[0]["a_end"].as_u64()),
        (Some(10), Some(20))
    );
    assert_eq!(
        lines[1]["summary"]["threads"],
        serde_json::json!([[1, 5], [2, 6]])
    );
    let o = tracekit(["diff", "-q", "--thread", "1:5", fa.path(), fb.path()]);
    assert_eq!(code(&o), 0, "{}", stdout(&o));
    assert!(
        stdout(&o).contains("not compared (other threads): A 10, B 10"),
        "{}",
        stdout(&o)
    );
    let o = tracekit(["diff", "-q", "--thread", "2:6", fa.path(), fb.path()]);
    assert_eq!(code(&o), 1);
    let o = tracekit(["diff", "-q", "--thread", "3:5", fa.path(), fb.path()]);
    assert_eq!(code(&o), 2);
    assert!(
        stderr(&o).contains("thread 3 does not appear in A"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn rebase_fixes_an_aslr_pair_from_stdin_and_gzip() {
    let image = |base: u64| -> Vec<Ins> {
        (0..30u64)
            .map(|k| {
                (
                    1,
                    base + 0x1000 + 4 * k,
                    base + 0x2000,
                    Some((base + 0x3000, base + 8, None)),
                )
            })
            .collect()
    };
    let fa = Temp::new("aslr-a", &trace(&image(0x1_4000_0000)));
    let b = trace(&image(0x7ff6_0000_0000));
    let fb = Temp::new("aslr-b.gz", &gzip(&b));
    let o = tracekit(["diff", "-q", fa.path(), fb.path()]);
    assert_eq!(code(&o), 1);
    let o = tracekit([
        "diff",
        "-q",
        "--rebase",
        "0x140000000:0x7ff600000000",
        fa.path(),
        fb.path(),
    ]);
    assert_eq!(code(&o), 0, "{}{}", stdout(&o), stderr(&o));
    let o = tracekit_stdin(
        [
            "diff",
            "-q",
            "--rebase",
            "0x140000000:0x7ff600000000:0x10000",
            fa.path(),
            "-",
        ],
        &b,
    );
    assert_eq!(code(&o), 0, "{}{}", stdout(&o), stderr(&o));
    // A range too small to hold the image: the addresses outside still differ.
    let o = tracekit([
        "diff",
        "-q",
        "--rebase",
        "0x140000000:0x7ff600000000:0x2000",
        fa.path(),
        fb.path(),
    ]);
    assert_eq!(code(&o), 1);
    for bad in ["0x1000", "1:2:3:4", "1:2:0", "x:1"] {
        let o = tracekit(["diff", "-q", "--rebase", bad, fa.path(), fb.path()]);
        assert_eq!(code(&o), 2, "--rebase {bad}");
    }
}

fn gzip(bytes: &[u8]) -> Vec<u8> {
    use std::io::Write;
    let mut z = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    z.write_all(bytes).unwrap();
    z.finish().unwrap()
}

#[test]
fn errors_exit_2() {
    let x64 = testdata("x64dbg/basic.trace64");
    let tf = testdata("gdb-tfile/amd64.tf");
    let o = tracekit(["diff", "-q", x64.to_str().unwrap(), tf.to_str().unwrap()]);
    assert_eq!(code(&o), 2);
    assert!(stderr(&o).contains("same format"), "{}", stderr(&o));
    // A damaged B: the regions before the damage, then the error, exit 2.
    let bytes = std::fs::read(&x64).unwrap();
    let cut = Temp::new("cut.trace64", &bytes[..bytes.len() - 3]);
    let o = tracekit(["diff", "-q", x64.to_str().unwrap(), cut.path()]);
    assert_eq!(code(&o), 2);
    assert!(stderr(&o).contains("B ("), "{}", stderr(&o));
    let o = tracekit([
        "diff",
        "-q",
        "--window",
        "8",
        x64.to_str().unwrap(),
        x64.to_str().unwrap(),
    ]);
    assert_eq!(code(&o), 2);
    let o = tracekit([
        "diff",
        "-q",
        "--thread",
        "5",
        x64.to_str().unwrap(),
        x64.to_str().unwrap(),
    ]);
    assert_eq!(code(&o), 2);
    let o = tracekit(["diff", "-q", x64.to_str().unwrap(), "/nonexistent/trace"]);
    assert_eq!(code(&o), 2);
    // DCFG has no instruction stream.
    let dcfg = testdata("dcfg/dialect-hex.dcfg.json");
    let o = tracekit(["diff", "-q", dcfg.to_str().unwrap(), dcfg.to_str().unwrap()]);
    assert_eq!(code(&o), 2);
    assert!(
        stderr(&o).contains("no instruction stream"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn amber_traces_diff_by_pc_and_effective_address() {
    use amber_tt6::{Dialect, Instruction, Tt6Writer};
    let write = |ea: u32, branch: u32| {
        let mut w = Tt6Writer::new(Vec::new(), Dialect::Tt6, 0x1000).unwrap();
        for k in 0..20u32 {
            let i = match k {
                5 => Instruction::memory(0x8064_0000, ea), // lwz r3, 0(r4)
                10 => Instruction::flow(0x4800_0010, branch),
                _ => Instruction::compute(0x3863_0001), // addi r3, r3, 1
            };
            w.write(&i).unwrap();
        }
        w.finish()
    };
    let a = Temp::new("a.tt6", &write(0x2000, 0x1000 + 44));
    let same = Temp::new("same.tt6", &write(0x2000, 0x1000 + 44));
    let ea = Temp::new("ea.tt6", &write(0x2004, 0x1000 + 44));
    let o = tracekit(["diff", "-q", a.path(), same.path()]);
    assert_eq!(code(&o), 0, "{}{}", stdout(&o), stderr(&o));
    let o = tracekit(["diff", "--json", a.path(), ea.path()]);
    assert_eq!(code(&o), 1);
    let lines = json_lines(&stdout(&o));
    assert_eq!(lines[0]["kind"], "mem");
    assert_eq!(
        (lines[0]["a_start"].as_u64(), lines[0]["a_end"].as_u64()),
        (Some(5), Some(6))
    );
    assert_eq!(lines[0]["first"]["mem"]["b_addr"], "0x2004");
    // The branch goes elsewhere: after it every pc differs and nothing rejoins.
    let pc = Temp::new("pc.tt6", &write(0x2000, 0x9000));
    let o = tracekit(["diff", "--json", a.path(), pc.path()]);
    assert_eq!(code(&o), 1);
    let lines = json_lines(&stdout(&o));
    assert_eq!(lines[0]["kind"], "pc");
    assert_eq!(lines[0]["a_start"], 11);
    assert_eq!(lines[0]["first"]["b_pc"], "0x9000");
    // TT6 against TT6E: two formats.
    let e = testdata("amber/all-opcodes.tt6e");
    let o = tracekit(["diff", "-q", a.path(), e.to_str().unwrap()]);
    assert_eq!(code(&o), 2);
}

#[test]
fn gdb_tfile_equals_itself() {
    let tf = testdata("gdb-tfile/amd64.tf");
    let o = tracekit(["diff", "--json", tf.to_str().unwrap(), tf.to_str().unwrap()]);
    assert_eq!(code(&o), 0, "{}{}", stdout(&o), stderr(&o));
    let lines = json_lines(&stdout(&o));
    assert!(lines[0]["summary"]["compared"].as_u64().unwrap() > 0);
}

#[test]
fn the_real_x64dbg_sample_equals_itself() {
    let Some(real) = realdata("x64dbg/d-ornen_DBGLogParser_test1.trace64") else {
        return;
    };
    let r = real.to_str().unwrap();
    let o = tracekit(["diff", "--json", r, r]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let s = &json_lines(&stdout(&o))[0]["summary"];
    let info = tracekit(["info", "--json", r]);
    let n = serde_json::from_str::<Value>(&stdout(&info)).unwrap()["instructions"].clone();
    assert_eq!((&s["compared"], &s["equal"]), (&n, &n));
    // Streamed (gzip, decoded step by step) the same.
    let gz = Temp::new("real.trace64.gz", &gzip(&std::fs::read(&real).unwrap()));
    let o = tracekit(["diff", "--json", r, gz.path()]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
}
