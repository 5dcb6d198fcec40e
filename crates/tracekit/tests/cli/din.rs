//! CLI tests for `tracekit convert FILE --to din` on formats other than amber (whose din
//! tests are in `amber.rs`): hand-built x64dbg and Tenet traces whose din lines are worked
//! out by hand below, `--disasm`, `-o`, stdin and compressed input, damaged input, and the
//! formats without an instruction stream.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};

use trac_x64dbg::{Arch, Header, MemAccess, Recorder, RecorderOptions, RegDump, Step, Writer};

use crate::common::*;

/// A fresh temporary directory (tests never write beside the repository's files).
fn temp_dir(name: &str) -> PathBuf {
    static N: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("tk-din-{name}-{}-{n}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

// REGDUMP word indices (x64dbg keeps Windows' CONTEXT order).
const RAX: usize = 0;
const RSP: usize = 4;
const RSI: usize = 6;
const RDI: usize = 7;

/// Four instructions of two interleaved threads, x64:
/// 0. thread 1 at 0x401000, `add [rax], rbx` (rax = 0x14fe00): the word changed (old 1,
///    new 3): a read and a write by disassembly, a write by the recorded rule;
/// 1. thread 2 at 0x402000, `push rbx` (rsp = 0x7000): the slot 0x6ff8 written;
/// 2. thread 1 at 0x401003, `nop`: no access;
/// 3. thread 2 at 0x402001, `movsq` (rsi = 0x2000, rdi = 0x3000): a string instruction,
///    which disassembly leaves unknown: [rsi] read (no new value), [rdi] written.
fn known_trace() -> Vec<u8> {
    let header = Header::new(Arch::X64, "din.exe");
    let mut rec = Recorder::new(
        Writer::new(Vec::new(), &header).unwrap(),
        RecorderOptions::default(),
    );
    let mut t1 = RegDump::new(Arch::X64);
    t1.set_word(RAX, 0x14fe00);
    let mut t2 = RegDump::new(Arch::X64);
    t2.set_word(RSP, 0x7000);
    t2.set_word(RSI, 0x2000);
    t2.set_word(RDI, 0x3000);
    let access = |address, old, new| MemAccess {
        flags: 0,
        address,
        old,
        new,
    };
    let steps = [
        (
            1,
            0x401000,
            vec![0x48, 0x01, 0x18],
            vec![access(0x14fe00, 1, Some(3))],
        ),
        (2, 0x402000, vec![0x53], vec![access(0x6ff8, 0, Some(9))]),
        (1, 0x401003, vec![0x90], vec![]),
        (
            2,
            0x402001,
            vec![0x48, 0xa5],
            vec![access(0x2000, 5, None), access(0x3000, 0, Some(5))],
        ),
    ];
    for (thread, pc, opcode, mem) in steps {
        let regs = if thread == 1 { &mut t1 } else { &mut t2 };
        regs.set_ip(pc);
        rec.step(Step {
            thread,
            opcode,
            regs: regs.clone(),
            mem,
        })
        .unwrap();
        if thread == 2 && pc == 0x402000 {
            // After the push.
            t2.set_word(RSP, 0x6ff8);
        }
    }
    rec.finish().unwrap()
}

/// The din lines of [`known_trace`] by the recorded rule, as (label, address).
const KNOWN: [(u8, u64); 8] = [
    (2, 0x401000),
    (1, 0x14fe00),
    (2, 0x402000),
    (1, 0x6ff8),
    (2, 0x401003),
    (2, 0x402001),
    (0, 0x2000),
    (1, 0x3000),
];

/// din text: one `LABEL HEXADDRESS` line per pair.
fn din_text(lines: &[(u8, u64)]) -> String {
    lines.iter().map(|(l, a)| format!("{l} {a:x}\n")).collect()
}

/// The din of [`known_trace`], by the recorded rule or with `--disasm` (then `add [rax],
/// rbx` reads and writes).
fn known_din(disasm: bool) -> String {
    let mut lines = KNOWN.to_vec();
    if disasm {
        lines.insert(1, (0, 0x14fe00));
    }
    din_text(&lines)
}

/// A Tenet trace: line 0's `mr` belongs to an instruction before the trace (written first,
/// before any fetch: no access of the file is lost); line 1's `mw` is what instruction 0
/// did, line 2's `mr` and `mrw` instruction 1's.
const TENET: &str = "rax=0x1,rsp=0x7000,rip=0x401000,mr=0x9999:00\n\
rsp=0x6ff8,rip=0x401003,mw=0x6ff8:0100000000000000\n\
rip=0x401005,mr=0x2000:aabb,mrw=0x3000:01\n\
rip=0x401007\n";

/// Its din, worked out from the line rules.
const TENET_DIN: &str =
    "0 9999\n2 401000\n1 6ff8\n2 401003\n0 2000\n0 3000\n1 3000\n2 401005\n2 401007\n";

fn write(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, bytes).unwrap();
    path
}

/// `tracekit [FIRST...] convert PATH --to din [MORE...]`.
fn convert_din(first: &[&str], path: &Path, more: &[&OsStr]) -> std::process::Output {
    let mut args: Vec<&OsStr> = first.iter().map(OsStr::new).collect();
    args.extend([
        "convert".as_ref(),
        path.as_os_str(),
        "--to".as_ref(),
        "din".as_ref(),
    ]);
    args.extend(more);
    tracekit(args)
}

/// The stdout of a command that succeeds.
fn success(out: &std::process::Output) -> String {
    assert!(out.status.success(), "{}", stderr(out));
    stdout(out)
}

#[test]
fn x64dbg_to_din_by_the_recorded_rule() {
    let dir = temp_dir("x64dbg");
    let path = write(&dir, "known.trace64", &known_trace());
    let text = success(&convert_din(&[], &path, &[]));
    assert_eq!(text, known_din(false));
}

#[test]
fn x64dbg_to_din_with_disasm_uses_the_access_kinds() {
    let dir = temp_dir("disasm");
    let path = write(&dir, "known.trace64", &known_trace());
    let text = success(&convert_din(&["--disasm"], &path, &[]));
    assert_eq!(text, known_din(true));
}

#[test]
fn tenet_to_din() {
    let dir = temp_dir("tenet");
    let path = write(&dir, "t.log", TENET.as_bytes());
    assert_eq!(success(&convert_din(&[], &path, &[])), TENET_DIN);
    // The kinds are the file's: --disasm changes nothing.
    assert_eq!(success(&convert_din(&["--disasm"], &path, &[])), TENET_DIN);
}

/// `-o` writes the same lines to the file and nothing to stdout; stdin and gzip input
/// (the streaming readers) give the same lines.
#[test]
fn output_file_stdin_and_gzip_give_the_same_lines() {
    let dir = temp_dir("out");
    let trace = known_trace();
    let path = write(&dir, "known.trace64", &trace);
    let out_path = dir.join("known.din");
    let out = convert_din(&[], &path, &["-o".as_ref(), out_path.as_os_str()]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(out.stdout.is_empty());
    assert_eq!(
        std::fs::read_to_string(&out_path).unwrap(),
        known_din(false)
    );

    let out = tracekit_stdin(["convert", "-", "--to", "din"], &trace);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out), known_din(false));

    let gz = std::process::Command::new("gzip")
        .args(["-c"])
        .arg(&path)
        .output()
        .unwrap();
    assert!(gz.status.success());
    let out = tracekit_stdin(["convert", "-", "--to", "din"], &gz.stdout);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out), known_din(false));
}

/// A trace cut inside its last block: exit 1, no output file with `-o`; on stdout, the
/// lines of the instructions before the damage.
#[test]
fn damaged_input_exits_1_without_an_output_file() {
    let dir = temp_dir("damaged");
    let trace = known_trace();
    let cut = &trace[..trace.len() - 3];
    let path = write(&dir, "cut.trace64", cut);
    let out_path = dir.join("cut.din");
    let out = convert_din(&[], &path, &["-o".as_ref(), out_path.as_os_str()]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(stderr(&out).contains("error"), "{}", stderr(&out));
    assert!(!out_path.exists());
    assert_eq!(
        std::fs::read_dir(&dir).unwrap().count(),
        1,
        "no temporary left"
    );

    let out = convert_din(&[], &path, &[]);
    assert_eq!(out.status.code(), Some(1));
    // The first three instructions are whole.
    assert_eq!(stdout(&out), din_text(&KNOWN[..5]));

    let bad = write(&dir, "bad.log", b"rip=0x1\nrip=0x2,zz=0x3\n");
    let out = convert_din(&[], &bad, &[]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
}

/// A GDB tracepoint file: its memory blocks are snapshots, not accesses: one fetch line
/// per frame, at the frame's pc (as `dump` gives it).
#[test]
fn tfile_gives_fetches_only() {
    let path = testdata("gdb-tfile/amd64.tf");
    let text = success(&convert_din(&[], &path, &[]));
    let dump = success(&tracekit(["dump".as_ref(), path.as_os_str()]));
    let pcs: Vec<String> = dump
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter_map(|v| {
            let pc = v.get("pc")?.as_str()?.to_owned();
            Some(format!("2 {}", pc.trim_start_matches("0x")))
        })
        .collect();
    assert!(!pcs.is_empty());
    assert_eq!(text.lines().collect::<Vec<_>>(), pcs);
}

/// Formats without an instruction stream, and unknown targets, are usage errors.
#[test]
fn no_instruction_stream_is_a_usage_error() {
    let path = testdata("dcfg/sample.dcfg.json");
    let out = convert_din(&[], &path, &[]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("din"), "{}", stderr(&out));
    let dir = temp_dir("usage");
    let path = write(&dir, "t.log", TENET.as_bytes());
    let out = tracekit([
        "convert".as_ref(),
        path.as_os_str(),
        "--to".as_ref(),
        "xyz".as_ref(),
    ]);
    assert_eq!(out.status.code(), Some(2));
}
