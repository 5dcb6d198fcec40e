//! `tracekit gdbserver` driven by real GDB (batch sessions over `--stdio` and TCP): the
//! registers at the steps reached by `stepi`, `reverse-stepi` and `monitor goto` equal
//! `tracekit state`, `x/16xb` equals `tracekit mem`, breakpoints stop at the steps `xref
//! --pc` lists and watchpoints at those `xref` lists, both ways, and the history ends both
//! ways. Without GDB the tests print "skipped: …" and pass, unless `TRACEKIT_REQUIRE_GDB=1`
//! (set by CI), which makes that a failure.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::common::{stdout, testdata, tracekit};

/// Whether GDB runs here (else the test is skipped, or fails under `TRACEKIT_REQUIRE_GDB=1`).
fn have_gdb() -> bool {
    let ok = Command::new("gdb")
        .arg("--version")
        .stdin(Stdio::null())
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        if std::env::var_os("TRACEKIT_REQUIRE_GDB").is_some_and(|v| v == "1") {
            panic!("gdb is not available, and TRACEKIT_REQUIRE_GDB=1");
        }
        eprintln!("skipped: gdb is not available (set TRACEKIT_REQUIRE_GDB=1 to fail instead)");
    }
    ok
}

/// A copy of the fixture `rel` in a directory of its own (its index is built there).
fn fixture(rel: &str) -> PathBuf {
    static N: AtomicUsize = AtomicUsize::new(0);
    let n = N.fetch_add(1, Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("tk-gdbserver-{}-{n}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let src = testdata(rel);
    let dst = dir.join(src.file_name().unwrap());
    std::fs::copy(&src, &dst).unwrap();
    dst
}

/// The output of `gdb -batch` running `target` and then `commands`.
fn gdb(target: &str, commands: &[&str]) -> String {
    let mut cmd = Command::new("gdb");
    cmd.args([
        "-batch",
        "-nx",
        "-ex",
        "set remotetimeout 60",
        "-ex",
        target,
    ]);
    for c in commands {
        cmd.args(["-ex", c]);
    }
    // One file for stdout and stderr, so that the monitor's lines (stderr) stay in order
    // with the registers (stdout).
    static N: AtomicUsize = AtomicUsize::new(0);
    let path = std::env::temp_dir().join(format!(
        "tk-gdbserver-{}-{}.out",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    let log = std::fs::File::create(&path).unwrap();
    // (Its exit status is that of the last command, which may fail on purpose.)
    cmd.stdin(Stdio::null())
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .status()
        .unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    let _ = std::fs::remove_file(&path);
    assert!(!text.contains("Remote connection closed"), "{text}");
    text
}

/// `target remote | tracekit gdbserver --stdio FILE`.
fn stdio_target(file: &Path) -> String {
    format!(
        "target remote | {} gdbserver --stdio {}",
        env!("CARGO_BIN_EXE_tracekit"),
        file.display()
    )
}

/// Every `step N thread T` line `monitor when` printed, in order.
fn whens(text: &str) -> Vec<(u64, u64)> {
    text.lines()
        .filter_map(|l| {
            let mut w = l.split_whitespace();
            match (w.next(), w.next(), w.next(), w.next(), w.next()) {
                (Some("step"), Some(n), Some("thread"), Some(t), None) => {
                    Some((n.parse().ok()?, t.parse().ok()?))
                }
                _ => None,
            }
        })
        .collect()
}

/// The registers `info registers` printed in one block: name → value.
fn gdb_regs(block: &str) -> Vec<(String, u64)> {
    block
        .lines()
        .filter_map(|l| {
            let mut w = l.split_whitespace();
            let name = w.next()?;
            let v = w.next()?.strip_prefix("0x")?;
            Some((name.to_owned(), u64::from_str_radix(v, 16).ok()?))
        })
        .collect()
}

/// `tracekit state --at N --json`'s registers.
fn state(file: &Path, n: u64) -> serde_json::Value {
    let o = tracekit([
        "state".as_ref(),
        "--json".as_ref(),
        "--at".as_ref(),
        n.to_string().as_ref(),
        file.as_os_str(),
    ]);
    assert!(o.status.success(), "{o:?}");
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    v["regs"].clone()
}

fn hex(v: &serde_json::Value) -> Option<u64> {
    u64::from_str_radix(v.as_str()?.strip_prefix("0x")?, 16).ok()
}

/// Checks each probe of `text` (a block ending in `==`: `monitor when` then `info
/// registers`) against `tracekit state`; returns the steps probed.
fn check_probes(file: &Path, text: &str, general: &[&str]) -> Vec<u64> {
    let mut steps = Vec::new();
    for block in text.split("==\n") {
        let Some(&(n, thread)) = whens(block).last() else {
            continue;
        };
        let regs = gdb_regs(block);
        let want = state(file, n);
        for name in general {
            let got = regs
                .iter()
                .find(|(r, _)| r == name)
                .map(|&(_, v)| v)
                .unwrap_or_else(|| panic!("no {name} in {block}"));
            let key = match *name {
                "eflags" if want.get("rflags").is_some() => "rflags",
                n => n,
            };
            assert_eq!(
                Some(got),
                hex(&want[key]),
                "{name} at step {n} (thread {thread}):\n{block}"
            );
        }
        steps.push(n);
    }
    steps
}

const AMD64_GENERAL: &[&str] = &[
    "rax", "rbx", "rcx", "rdx", "rsi", "rdi", "rbp", "rsp", "r8", "r9", "r10", "r11", "r12", "r13",
    "r14", "r15", "rip", "eflags", "cs", "ss", "ds", "es", "fs", "gs",
];

const PROBE: [&str; 3] = ["monitor when", "info registers", "echo ==\\n"];

#[test]
fn registers_after_stepi_reverse_stepi_and_goto_equal_state() {
    if !have_gdb() {
        return;
    }
    let file = fixture("x64dbg/basic.trace64");
    let mut cmds: Vec<&str> = Vec::new();
    cmds.extend(PROBE);
    for _ in 0..3 {
        cmds.push("stepi");
        cmds.extend(PROBE);
    }
    cmds.push("reverse-stepi");
    cmds.extend(PROBE);
    // Step 100 is thread 4660's, GDB's current thread: goto keeps GDB's thread.
    cmds.extend(["monitor goto 100", "maintenance flush register-cache"]);
    cmds.extend(PROBE);
    cmds.push("stepi");
    cmds.extend(PROBE);
    let text = gdb(&stdio_target(&file), &cmds);
    let steps = check_probes(&file, &text, AMD64_GENERAL);
    assert_eq!(steps, [0, 1, 2, 3, 2, 100, 101], "{text}");
}

#[test]
fn memory_equals_mem() {
    if !have_gdb() {
        return;
    }
    let file = fixture("x64dbg/basic.trace64");
    let text = gdb(
        &stdio_target(&file),
        &[
            "monitor goto 700",
            "maintenance flush dcache",
            "x/16xb 0x24fe00",
            "x/8xb 0x10",
        ],
    );
    let o = tracekit([
        "mem".as_ref(),
        "--json".as_ref(),
        "--at".as_ref(),
        "700".as_ref(),
        file.as_os_str(),
        "0x24fe00".as_ref(),
        "16".as_ref(),
    ]);
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    let want: Vec<u64> = v["bytes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b.as_u64().unwrap())
        .collect();
    let got: Vec<u64> = text
        .lines()
        .filter(|l| l.starts_with("0x24fe0"))
        .flat_map(|l| l.split_whitespace().skip(1))
        .map(|b| u64::from_str_radix(b.trim_start_matches("0x"), 16).unwrap())
        .collect();
    assert_eq!(got, want, "{text}");
    // Nothing recorded there: GDB's own message.
    assert!(
        text.contains("Cannot access memory at address 0x10"),
        "{text}"
    );
}

/// The steps `tracekit xref` prints (`i` of each line), with `args` after the file.
fn xref(file: &Path, args: &[&str]) -> Vec<(u64, Option<String>)> {
    let mut all: Vec<&std::ffi::OsStr> = vec!["xref".as_ref(), file.as_os_str()];
    all.extend(args.iter().map(std::ffi::OsStr::new));
    let o = tracekit(all);
    assert!(o.status.success(), "{o:?}");
    stdout(&o)
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            (
                v["i"].as_u64().unwrap(),
                v["new"].as_str().map(str::to_owned),
            )
        })
        .collect()
}

#[test]
fn breakpoints_stop_at_xref_pc_steps_both_ways_and_history_ends() {
    if !have_gdb() {
        return;
    }
    let file = fixture("x64dbg/basic.trace64");
    let pc = "0x7ff6a1b21011";
    let hits: Vec<u64> = xref(&file, &["--pc", pc])
        .into_iter()
        .map(|h| h.0)
        .collect();
    assert!(hits.len() >= 4);
    let brk = format!("break *{pc}");
    let mut cmds = vec![brk.as_str()];
    for _ in 0..4 {
        cmds.extend(["continue", "monitor when"]);
    }
    for _ in 0..2 {
        cmds.extend(["reverse-continue", "monitor when"]);
    }
    cmds.extend([
        "delete",
        "continue",
        "monitor when",
        "stepi",
        "monitor when",
    ]);
    cmds.extend([
        "reverse-continue",
        "monitor when",
        "reverse-stepi",
        "monitor when",
    ]);
    let text = gdb(&stdio_target(&file), &cmds);
    let steps: Vec<u64> = whens(&text).into_iter().map(|w| w.0).collect();
    let last = 1099;
    assert_eq!(
        steps,
        [
            hits[0], hits[1], hits[2], hits[3], hits[2], hits[1], last, last, 0, 0
        ],
        "{text}"
    );
    assert_eq!(text.matches("hit Breakpoint 1").count(), 6, "{text}");
    assert_eq!(
        text.matches("No more reverse-execution history.").count(),
        4,
        "{text}"
    );
    // Each stop names the thread of its step.
    for (n, t) in whens(&text) {
        let o = tracekit([
            "state".as_ref(),
            "--json".as_ref(),
            "--at".as_ref(),
            n.to_string().as_ref(),
            file.as_os_str(),
        ]);
        let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
        assert_eq!(v["thread"].as_u64(), Some(t), "step {n}");
    }
}

#[test]
fn watchpoints_stop_after_writes_forwards_and_before_them_backwards() {
    if !have_gdb() {
        return;
    }
    let file = fixture("x64dbg/basic.trace64");
    // The writes that changed the word (x64dbg records `new` only then).
    let writes: Vec<u64> = xref(&file, &["0x24fe00:8"])
        .into_iter()
        .filter(|h| h.1.is_some())
        .map(|h| h.0)
        .collect();
    assert!(writes.len() >= 3);
    let mut cmds = vec!["watch *(long *)0x24fe00"];
    for _ in 0..3 {
        cmds.extend(["continue", "monitor when"]);
    }
    cmds.extend(["reverse-continue", "monitor when"]);
    let text = gdb(&stdio_target(&file), &cmds);
    let steps: Vec<u64> = whens(&text).into_iter().map(|w| w.0).collect();
    assert_eq!(
        steps,
        [writes[0] + 1, writes[1] + 1, writes[2] + 1, writes[2]],
        "{text}"
    );
    assert_eq!(
        text.matches("Hardware watchpoint 1: *(long *)0x24fe00")
            .count(),
        5,
        "{text}"
    );
}

#[test]
fn tcp_session_and_threads() {
    if !have_gdb() {
        return;
    }
    let file = fixture("x64dbg/basic.trace64");
    let mut server = Command::new(env!("CARGO_BIN_EXE_tracekit"))
        .args(["gdbserver".as_ref(), file.as_os_str()])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(server.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let addr = line
        .trim()
        .strip_prefix("listening on ")
        .unwrap_or_else(|| panic!("{line:?}"))
        .to_owned();
    assert!(addr.starts_with("127.0.0.1:"), "{addr}");
    let text = gdb(
        &format!("target remote {addr}"),
        &[
            "info threads",
            "stepi",
            "monitor when",
            "info registers rip",
        ],
    );
    for t in ["1.4660", "1.4728", "1.4796"] {
        assert!(text.contains(&format!("Thread {t}")), "{text}");
    }
    assert_eq!(whens(&text), [(1, 4660)], "{text}");
    assert!(text.contains("0x7ff6a1b21001"), "{text}");
    // The session ended with GDB's detach: the server exits by itself.
    let status = server.wait().unwrap();
    assert!(status.success(), "{status:?}");
}

#[test]
fn i386_registers_equal_state() {
    if !have_gdb() {
        return;
    }
    let file = fixture("x64dbg/basic.trace32");
    let mut cmds: Vec<&str> = Vec::new();
    cmds.extend(PROBE);
    cmds.push("stepi");
    cmds.extend(PROBE);
    let text = gdb(&stdio_target(&file), &cmds);
    let steps = check_probes(
        &file,
        &text,
        &[
            "eax", "ecx", "edx", "ebx", "esp", "ebp", "esi", "edi", "eip", "eflags", "cs", "ss",
            "ds", "es", "fs", "gs",
        ],
    );
    assert_eq!(steps, [0, 1], "{text}");
}

#[test]
fn tenet_trace_steps_to_its_end() {
    if !have_gdb() {
        return;
    }
    let file = fixture("tenet/basic.log");
    let mut cmds: Vec<&str> = Vec::new();
    cmds.extend(PROBE);
    for _ in 0..7 {
        cmds.push("stepi");
        cmds.extend(PROBE);
    }
    let text = gdb(&stdio_target(&file), &cmds);
    let general = &AMD64_GENERAL[..17];
    let steps = check_probes(&file, &text, general);
    // Seven instructions: the seventh stepi finds no more history and stays at step 6.
    assert_eq!(steps, [0, 1, 2, 3, 4, 5, 6, 6], "{text}");
    assert_eq!(
        text.matches("No more reverse-execution history.").count(),
        1,
        "{text}"
    );
    // Thread 0 of the trace is GDB's thread 1 (GDB's ids are not 0); no flags recorded.
    assert!(text.contains("eflags         <unavailable>"), "{text}");
}

/// `$data#checksum`.
fn packet(data: &str) -> Vec<u8> {
    let sum = data.bytes().fold(0u8, |a, b| a.wrapping_add(b));
    format!("${data}#{sum:02x}").into_bytes()
}

#[test]
fn bad_packets_are_errors_not_panics() {
    let file = fixture("x64dbg/basic.trace64");
    let mut input = b"+".to_vec();
    for p in [
        "qSupported:multiprocess+;swbreak+;hwbreak+;xmlRegisters=i386",
        "QStartNoAckMode",
        "?",
        "g",
        "m0,0",
        "mffffffffffffffff,10",
        "G00",
        "M10,1:00",
        "Z2,24fe00,0",
        "qXfer:features:read:target.xml:ffffffff,10",
        "qXfer:features:read:other.xml:0,10",
        "qRcmd,676f746f20393939393939",
        "qRcmd,ff",
        "vCont;s:p1.ffffffff",
        "Hgp1.ffffffffff",
        "g",
        // What gdbstub cannot parse: `E01`, and the session goes on. A read longer than
        // a packet holds is cut to one (here unrecorded: `E0e`); an unknown breakpoint
        // kind is unsupported (an empty reply).
        "mzz,10",
        "m10,100000",
        "Z9,10,1",
    ] {
        input.extend(packet(p));
    }
    // Longer than a packet: `E01`.
    input.extend(packet(&format!("m{}", "1".repeat(0x5000))));
    // A wrong checksum is not checked (`garbage` is answered `E01` as gdbstub cannot
    // parse it), noise between packets and a NACK are dropped.
    input.extend(b"$garbage#zz\x03-junk$g#00");
    input.extend(packet("vKill;1"));
    input.extend(packet("g"));
    let o = crate::common::tracekit_stdin(
        ["gdbserver".as_ref(), "--stdio".as_ref(), file.as_os_str()],
        &input,
    );
    let err = crate::common::stderr(&o);
    assert_ne!(o.status.code(), Some(101), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    let out = stdout(&o);
    assert!(out.contains("PacketSize=4800;"), "{out}");
    assert!(!out.contains("fork-events"), "{out}");
    // The memory nobody recorded is an error (EFAULT); writes are refused (EROFS).
    assert!(out.contains("$E0e#"), "{out}");
    assert!(out.contains("$E1e#"), "{out}");
    // The monitor answers an unknown command with its help, and a step past the end.
    assert!(out.contains("$OK#"), "{out}");
    assert_eq!(out.matches("$E01#").count(), 3, "{out}");
    assert_eq!(out.matches("$E0e#").count(), 2, "{out}");
    // `m0,0` (no bytes) and `Z9`.
    assert_eq!(out.matches("$#00").count(), 2, "{out}");
    // After the noise, `g` is answered; `vKill` with `OK`, and the session ends there
    // (the last `g` unanswered).
    let regs = out
        .split('$')
        .filter(|p| p.split('#').next().is_some_and(|b| b.contains("xx")))
        .count();
    assert!(out.trim_end().ends_with("$OK#9a"), "{out}");
    assert_eq!(regs, 3, "{out}");
    assert_eq!(o.status.code(), Some(0), "{err}");
}

#[test]
fn a_stale_index_is_rebuilt() {
    if !have_gdb() {
        return;
    }
    let file = fixture("x64dbg/basic.trace64");
    let mut idx = file.clone().into_os_string();
    idx.push(".tkidx");
    std::fs::write(&idx, b"not an index").unwrap();
    let text = gdb(
        &stdio_target(&file),
        &["break *0x7ff6a1b21011", "continue", "monitor when"],
    );
    assert!(text.contains("note: ignoring the sidecar"), "{text}");
    assert!(text.contains("indexed 1100 steps"), "{text}");
    assert_eq!(whens(&text), [(6, 4660)], "{text}");
    // Now usable: no note, no build.
    let text = gdb(&stdio_target(&file), &["monitor when"]);
    assert!(!text.contains("indexing"), "{text}");
}

#[test]
fn gdb_commands_define_tk_goto() {
    let o = tracekit(["gdbserver", "--gdb-commands"]);
    assert!(o.status.success(), "{o:?}");
    let cmds = stdout(&o);
    assert!(cmds.contains("\"monitor goto \" + arg"), "{cmds}");
    if !have_gdb() {
        return;
    }
    let file = fixture("x64dbg/basic.trace64");
    let script = file.with_extension("gdb");
    std::fs::write(&script, &cmds).unwrap();
    let source = format!("source {}", script.display());
    let text = gdb(
        &stdio_target(&file),
        &[
            &source,
            "tk-goto 700",
            "info registers rip",
            "thread",
            "tk-when",
            "tk-goto 832",
            "thread",
        ],
    );
    // Step 700 is thread 4728's (GDB's thread 2): tk-goto selects it, and back.
    assert!(text.contains("rip            0x7ff6a1b21011"), "{text}");
    assert!(
        text.contains("[Current thread is 2 (Thread 1.4728)]"),
        "{text}"
    );
    assert!(text.contains("step 700 thread 4728"), "{text}");
    assert!(
        text.contains("step 832 thread 4660\ngdb thread 1.4660"),
        "{text}"
    );
    assert!(
        text.contains("[Current thread is 1 (Thread 1.4660)]"),
        "{text}"
    );
}

#[test]
fn code_is_the_executed_instructions_bytes() {
    if !have_gdb() {
        return;
    }
    let file = fixture("x64dbg/basic.trace64");
    let text = gdb(&stdio_target(&file), &["x/3i $pc", "stepi", "x/2i $pc"]);
    // `tracekit dump --disasm`: push rbx (53), push rsi (56), sub rsp, 0x28 (48 83 ec 28).
    assert!(
        text.contains("=> 0x7ff6a1b21000:\tpush   %rbx\n   0x7ff6a1b21001:\tpush   %rsi\n   0x7ff6a1b21002:\tsub    $0x28,%rsp"),
        "{text}"
    );
    assert!(text.contains("=> 0x7ff6a1b21001:\tpush   %rsi"), "{text}");
}

#[test]
fn vector_registers_equal_state() {
    if !have_gdb() {
        return;
    }
    let file = fixture("x64dbg/basic.trace64");
    // Step 700 is thread 4728's, GDB's thread 2.
    let text = gdb(
        &stdio_target(&file),
        &[
            "monitor goto 700",
            "maintenance flush register-cache",
            "thread 2",
            "p/x $xmm0.uint128",
            "p/x $ymm0.v2_int128",
            "p/x $mxcsr",
        ],
    );
    let want = state(&file, 700);
    let xmm0 = want["xmm0"]
        .as_str()
        .unwrap()
        .trim_start_matches("0x")
        .trim_start_matches('0');
    let high = want["ymm0.High"]
        .as_str()
        .unwrap()
        .trim_start_matches("0x")
        .trim_start_matches('0');
    let high = if high.is_empty() { "0" } else { high };
    assert!(text.contains(&format!("$1 = 0x{xmm0}\n")), "{text}");
    assert!(
        text.contains(&format!("$2 = {{0x{xmm0}, 0x{high}}}\n")),
        "{text}"
    );
    assert!(
        text.contains(&format!("$3 = {}\n", want["mxcsr"].as_str().unwrap())),
        "{text}"
    );
}

/// The fuzz target on packets GDB sends, with random arguments, and random bytes: never a
/// panic.
#[test]
fn fuzz_target_survives_random_packets() {
    use quickcheck::{QuickCheck, TestResult};
    const HEADS: &[&str] = &[
        "?",
        "g",
        "m",
        "M",
        "X",
        "G",
        "P",
        "p",
        "Z0,",
        "z0,",
        "Z2,",
        "Z3,",
        "Z4,",
        "z2,",
        "vCont;s:p1.",
        "vCont;c",
        "vCont?",
        "bs",
        "bc",
        "Hg",
        "Hc",
        "qRcmd,",
        "T",
        "qfThreadInfo",
        "qsThreadInfo",
        "qXfer:features:read:target.xml:",
        "qThreadExtraInfo,",
        "D",
        "vKill;1",
        "k",
    ];
    fn prop(picks: Vec<(u8, u64, u16)>, tail: Vec<u8>) -> TestResult {
        let mut data = packet("qSupported:multiprocess+;swbreak+;hwbreak+");
        data.extend(packet("QStartNoAckMode"));
        for (head, a, b) in picks.iter().take(40) {
            let head = HEADS[usize::from(*head) % HEADS.len()];
            data.extend(packet(&format!("{head}{a:x},{b:x}")));
        }
        data.extend(tail);
        tracekit::fuzz_target("gdb_packet", &data);
        TestResult::passed()
    }
    QuickCheck::new()
        .tests(40)
        .quickcheck(prop as fn(Vec<(u8, u64, u16)>, Vec<u8>) -> TestResult);
}

#[test]
fn tfile_frames_are_steps() {
    if !have_gdb() {
        return;
    }
    let file = fixture("gdb-tfile/amd64.tf");
    let mut cmds: Vec<&str> = Vec::new();
    cmds.extend(PROBE);
    cmds.push("stepi");
    cmds.extend(PROBE);
    cmds.push("reverse-stepi");
    cmds.extend(PROBE);
    let text = gdb(&stdio_target(&file), &cmds);
    let steps = check_probes(&file, &text, AMD64_GENERAL);
    assert_eq!(steps, [0, 1, 0], "{text}");
}

#[test]
fn traces_gdb_cannot_run_are_refused_before_indexing() {
    for (rel, says) in [
        ("dcfg/run.dcfg.json", "no instruction stream"),
        ("amber/all-opcodes.tt6", "x86 and x86-64"),
    ] {
        let file = fixture(rel);
        let o = tracekit(["gdbserver".as_ref(), "--stdio".as_ref(), file.as_os_str()]);
        let err = crate::common::stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{rel}: {err}");
        assert!(err.contains(says), "{rel}: {err}");
        assert!(!err.contains("indexing"), "{rel}: {err}");
    }
}

#[test]
fn stepi_stops_at_another_threads_breakpoint_on_the_way() {
    if !have_gdb() {
        return;
    }
    let file = fixture("x64dbg/basic.trace64");
    // Thread 4660 runs steps 0–102, then 517 on; thread 4728 executes 0x7ff6a1b21011 at
    // step 109 in between (`tracekit xref --pc`).
    let text = gdb(
        &stdio_target(&file),
        &[
            "monitor goto 102",
            "maintenance flush register-cache",
            "break *0x7ff6a1b21011",
            "stepi",
            "monitor when",
            "delete",
            "thread 1",
            "stepi",
            "monitor when",
        ],
    );
    assert!(text.contains("Thread 2 hit Breakpoint 1"), "{text}");
    let steps: Vec<(u64, u64)> = whens(&text).into_iter().skip(1).collect();
    assert_eq!(steps, [(109, 4728), (518, 4660)], "{text}");
}

#[test]
fn stepping_off_a_breakpoint_sees_the_watchpoint_it_writes() {
    if !have_gdb() {
        return;
    }
    let file = fixture("x64dbg/basic.trace64");
    // Step 109 (thread 4728, pc 0x7ff6a1b21011) writes 0x24fe00 first; then 112.
    let text = gdb(
        &stdio_target(&file),
        &[
            "monitor goto 101",
            "maintenance flush register-cache",
            "break *0x7ff6a1b21011",
            "watch *(long *)0x24fe00",
            "continue",
            "monitor when",
            "continue",
            "monitor when",
            "continue",
            "monitor when",
            // Back over 112's write (before it), then a plain step back.
            "reverse-stepi",
            "monitor when",
            "reverse-stepi",
            "monitor when",
        ],
    );
    let steps: Vec<u64> = whens(&text).into_iter().map(|w| w.0).skip(1).collect();
    assert_eq!(steps, [109, 110, 113, 112, 111], "{text}");
    assert_eq!(
        text.matches("hit Hardware watchpoint 2").count(),
        3,
        "{text}"
    );
}

/// A small C program with functions and lines to step through (no libc: a short,
/// deterministic recording). The line numbers the test checks are marked.
const SOURCE: &str = "static void sys_exit(long code) {
    __asm__ volatile (\"syscall\" :: \"a\"(60L), \"D\"(code) : \"rcx\", \"r11\", \"memory\");
}
int square(int x) {
    int y = x * x; /* line 5 */
    return y;
}
int twice(int x) {
    int s = square(x); /* line 9 */
    s = s + square(x + 1); /* line 10 */
    return s;
}
void _start(void) {
    volatile int r = twice(3);
    sys_exit(r);
    for (;;) {}
}
";

/// `prog` built with `gcc -g -static -O0` and recorded by `tracekit record`, in a folder
/// of their own; `None` (skipped, or a failure under `TRACEKIT_REQUIRE_PTRACE=1`) where
/// gcc or ptrace is missing.
fn recorded_program() -> Option<(PathBuf, PathBuf)> {
    let dir = std::env::temp_dir().join(format!("tk-gdbserver-rec-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (src, exe, trace) = (
        dir.join("prog.c"),
        dir.join("prog"),
        dir.join("prog.trace64"),
    );
    std::fs::write(&src, SOURCE).unwrap();
    let built = Command::new("gcc")
        .args([
            "-g",
            "-static",
            "-O0",
            "-nostdlib",
            "-fno-stack-protector",
            "-o",
        ])
        .arg(&exe)
        .arg(&src)
        .status()
        .is_ok_and(|s| s.success());
    let recorded = built
        && Command::new(env!("CARGO_BIN_EXE_tracekit"))
            .env_clear()
            .args(["-q", "record", "-o"])
            .arg(&trace)
            .arg("--")
            .arg(&exe)
            .stdin(Stdio::null())
            .status()
            .is_ok_and(|s| s.code() == Some(25));
    if !recorded {
        let why = "gdbserver on a recording: gcc or ptrace is not available here";
        if std::env::var_os("TRACEKIT_REQUIRE_PTRACE").is_some_and(|v| v == "1") {
            panic!("{why}, and TRACEKIT_REQUIRE_PTRACE=1");
        }
        eprintln!("skipped: {why} (set TRACEKIT_REQUIRE_PTRACE=1 to fail instead)");
        return None;
    }
    Some((exe, trace))
}

/// The GDB server on a recording (issue #32's check): with the program's symbols, GDB's
/// `break`, `continue`, `next`, `step`, `finish` and `reverse-finish` stop at the source
/// lines they stop at on the live program, at the steps `tracekit xref --pc` lists for
/// their pcs, with the registers `tracekit state` gives there.
#[test]
fn gdbserver_on_a_recording_steps_by_source_line_both_ways() {
    if !have_gdb() {
        return;
    }
    let Some((exe, trace)) = recorded_program() else {
        return;
    };
    let file = format!("file {}", exe.display());
    let probe = ["monitor when", "p/x $pc", "echo ==\\n"];
    let mut cmds = vec!["break twice", "continue"];
    for c in [
        "next",
        "step",
        "reverse-finish",
        "step",
        "finish",
        "reverse-step",
    ] {
        cmds.extend(probe);
        cmds.push(c);
    }
    cmds.extend(probe);
    let target = stdio_target(&trace);
    let mut all = vec![target.as_str()];
    all.extend(cmds);
    // `file` first: GDB runs `-ex` commands in order, the target then has symbols.
    let text = gdb(&file, &all);
    let blocks: Vec<&str> = text.split("==\n").collect();
    // What each command printed (a part of it), and the source line it stopped at.
    let stops = [
        ("Breakpoint 1, twice (x=3) at", "9"),
        ("", "10"),
        ("square (x=4) at", "5"),
        ("in twice (x=3) at", "10"),
        ("square (x=4) at", "5"),
        ("Value returned is", "10"),
        ("square (x=4) at", "7"),
    ];
    let mut steps = Vec::new();
    for (k, (shown, line)) in stops.iter().enumerate() {
        let block = blocks.get(k).unwrap_or_else(|| panic!("stop {k}:\n{text}"));
        let (n, _) = *whens(block)
            .last()
            .unwrap_or_else(|| panic!("stop {k}:\n{text}"));
        let pc = block
            .lines()
            .find_map(|l| l.split_once("= 0x").map(|(_, h)| h.trim()))
            .and_then(|h| u64::from_str_radix(h, 16).ok())
            .unwrap_or_else(|| panic!("no pc at stop {k}:\n{text}"));
        // The pc GDB shows is `state`'s rip at the step the server is at.
        assert_eq!(hex(&state(&trace, n)["rip"]), Some(pc), "step {n}:\n{text}");
        assert!(block.contains(shown), "{shown:?} at stop {k}:\n{text}");
        assert!(
            block.lines().any(|l| l.starts_with(&format!("{line}\t"))),
            "line {line} at stop {k}:\n{text}"
        );
        steps.push(n);
    }
    assert!(blocks[5].contains("= 16"), "{text}");
    // Forwards, back to the call, into it again, out of it, and back into its last line.
    assert!(steps[0] < steps[1] && steps[1] < steps[2], "{steps:?}");
    assert!(steps[1] < steps[3] && steps[3] < steps[2], "{steps:?}");
    assert_eq!(steps[4], steps[2], "{steps:?}");
    assert!(steps[4] < steps[6] && steps[6] < steps[5], "{steps:?}");
    // The breakpoint: the first execution `xref --pc` lists at its address.
    let bp = text
        .lines()
        .find_map(|l| l.strip_prefix("Breakpoint 1 at 0x"))
        .and_then(|r| r.split(':').next())
        .unwrap_or_else(|| panic!("{text}"));
    let hits = xref(&trace, &["--pc", &format!("0x{bp}")]);
    assert_eq!(hits.first().map(|h| h.0), Some(steps[0]), "{text}");
}
