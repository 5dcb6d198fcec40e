//! CLI tests for `tracekit find` (GDB's `tfind` from the shell): each condition against an
//! oracle built from `tracekit dump` of the same file, conditions combined, the `--json`
//! shape, stdin and compressed input, GDB's pc guess for frames without registers, and the
//! errors (bad arguments and non-tfile inputs exit 2, a damaged file exits 1).

use serde_json::Value;

use crate::common::*;

fn path(rel: &str) -> String {
    testdata(&format!("gdb-tfile/{rel}"))
        .to_str()
        .unwrap()
        .to_owned()
}

/// One frame as `dump` shows it: number, tracepoint, pc, memory blocks (addr, len).
struct Frame {
    i: u64,
    tracepoint: i64,
    pc: Option<u64>,
    mem: Vec<(u64, u64)>,
}

fn hex(v: &Value) -> u64 {
    u64::from_str_radix(v.as_str().unwrap().trim_start_matches("0x"), 16).unwrap()
}

fn dumped(file: &str) -> Vec<Frame> {
    let o = tracekit(["dump", "-q", file]);
    assert!(o.status.success(), "{}", stderr(&o));
    stdout(&o)
        .lines()
        .map(|l| {
            let v: Value = serde_json::from_str(l).unwrap();
            Frame {
                i: v["i"].as_u64().unwrap(),
                tracepoint: v["tracepoint"].as_i64().unwrap(),
                pc: (!v["pc"].is_null()).then(|| hex(&v["pc"])),
                mem: v["mem"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|m| (hex(&m["addr"]), m["len"].as_u64().unwrap()))
                    .collect(),
            }
        })
        .collect()
}

/// `tracekit find FILE ARGS…`: the frame numbers printed (exit 0 required).
fn find(file: &str, args: &[&str]) -> Vec<u64> {
    let o = tracekit([&["find", "-q", file], args].concat());
    assert_eq!(o.status.code(), Some(0), "{args:?}: {}", stderr(&o));
    stdout(&o).lines().map(|l| l.parse().unwrap()).collect()
}

fn oracle(frames: &[Frame], keep: impl Fn(&Frame) -> bool) -> Vec<u64> {
    frames.iter().filter(|f| keep(f)).map(|f| f.i).collect()
}

fn covers(f: &Frame, lo: u64, hi: u64) -> bool {
    f.mem.iter().any(|&(a, n)| a < hi && a + n > lo)
}

#[test]
fn each_condition_matches_the_dump() {
    let file = path("amd64.tf");
    let frames = dumped(&file);
    assert!(frames.iter().all(|f| f.pc.is_some()));
    // Every frame without a condition.
    assert_eq!(find(&file, &[]), oracle(&frames, |_| true));
    for tp in [2, 3] {
        let want = oracle(&frames, |f| f.tracepoint == tp);
        assert!(!want.is_empty());
        assert_eq!(find(&file, &["--tracepoint", &tp.to_string()]), want);
    }
    let pcs: std::collections::BTreeSet<u64> = frames.iter().filter_map(|f| f.pc).collect();
    assert!(pcs.len() > 1, "the file has frames at several pcs");
    for &pc in &pcs {
        let want = oracle(&frames, |f| f.pc == Some(pc));
        assert_eq!(find(&file, &["--pc", &format!("{pc:#x}")]), want);
        assert_eq!(find(&file, &["--pc", &pc.to_string()]), want, "decimal");
        // The end of a range is excluded.
        let range = format!("{:#x}:{:#x}", pc, pc + 1);
        assert_eq!(find(&file, &["--range", &range]), want);
        let past = format!("{:#x}:{:#x}", pc - 0x10, pc);
        let below = oracle(&frames, |f| f.pc.is_some_and(|p| p >= pc - 0x10 && p < pc));
        assert_eq!(find(&file, &["--range", &past]), below);
        let outside = oracle(&frames, |f| f.pc != Some(pc));
        assert_eq!(find(&file, &["--outside", &range]), outside);
    }
    let (addr, len) = frames[0].mem[0];
    for (arg, lo, hi) in [
        (format!("{addr:#x}:{len}"), addr, addr + len),
        (
            format!("{:#x}:1", addr + len - 1),
            addr + len - 1,
            addr + len,
        ),
        // A bare address is one word of the target: 8 bytes on x86-64.
        (format!("{:#x}", addr - 7), addr - 7, addr + 1),
        (format!("{:#x}", addr - 8), addr - 8, addr),
        (
            format!("{:#x}:4", addr + 0x100_0000),
            addr + 0x100_0000,
            addr + 0x100_0004,
        ),
    ] {
        let want = oracle(&frames, |f| covers(f, lo, hi));
        assert_eq!(find(&file, &["--mem", &arg]), want, "--mem {arg}");
    }
    assert!(find(&file, &["--mem", &format!("{:#x}", addr - 8)]).is_empty());
    assert!(!find(&file, &["--mem", &format!("{:#x}", addr - 7)]).is_empty());
    // Conditions combine: all must hold.
    let pc = frames
        .iter()
        .find(|f| f.tracepoint == 3)
        .unwrap()
        .pc
        .unwrap();
    let want = oracle(&frames, |f| {
        f.tracepoint == 3 && f.pc == Some(pc) && covers(f, addr, addr + 1)
    });
    let got = find(
        &file,
        &[
            "--tracepoint",
            "3",
            "--pc",
            &format!("{pc:#x}"),
            "--mem",
            &format!("{addr:#x}:1"),
        ],
    );
    assert_eq!(got, want);
    // Nothing matches: no output, exit 0.
    assert!(find(&file, &["--tracepoint", "2", "--pc", &format!("{pc:#x}")]).is_empty());
    assert!(find(&file, &["--pc", "0x1"]).is_empty());
}

#[test]
fn json_lines_have_the_documented_shape() {
    let file = path("amd64.tf");
    let frames = dumped(&file);
    let o = tracekit(["find", "-q", &file, "--tracepoint", "3", "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let lines: Vec<Value> = stdout(&o)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), oracle(&frames, |f| f.tracepoint == 3).len());
    for v in &lines {
        let obj = v.as_object().unwrap();
        let keys: Vec<&str> = obj.keys().map(String::as_str).collect();
        assert_eq!(keys.len(), 3);
        let f = &frames[v["frame"].as_u64().unwrap() as usize];
        assert_eq!(v["tracepoint"], 3);
        let pc = v["pc"].as_str().unwrap();
        assert_eq!(
            pc,
            format!("{:#x}", f.pc.unwrap()),
            "lowercase, no leading zeros"
        );
    }
}

/// A frame without registers gets its tracepoint's address as pc, as GDB guesses it.
#[test]
fn frames_without_registers_use_the_tracepoint_address() {
    let o = tracekit(["find", "-q", &path("tfile-basic.tf"), "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(
        stdout(&o),
        "{\"frame\":0,\"tracepoint\":1,\"pc\":\"0x401331\"}\n"
    );
    let file = path("quirks.tf");
    let frames = dumped(&file);
    let without: Vec<&Frame> = frames.iter().filter(|f| f.pc.is_none()).collect();
    assert!(!without.is_empty());
    let got = find(&file, &["--pc", "0x4011fe"]);
    for f in without.iter().filter(|f| f.tracepoint == 5) {
        assert!(got.contains(&f.i), "frame {} of tracepoint 5", f.i);
    }
}

#[test]
fn stdin_and_compressed_input_give_the_same_frames() {
    use std::io::Write;
    let file = path("amd64.tf");
    let bytes = std::fs::read(&file).unwrap();
    let o = tracekit_stdin(["find", "-q", "-", "--tracepoint", "3", "--json"], &bytes);
    assert!(o.status.success(), "{}", stderr(&o));
    let plain = tracekit(["find", "-q", &file, "--tracepoint", "3", "--json"]);
    assert_eq!(stdout(&o), stdout(&plain));
    assert!(!stdout(&plain).is_empty());
    let dir = std::env::temp_dir().join(format!("tracekit-find-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let gz = dir.join("amd64.tf.gz");
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    enc.write_all(&bytes).unwrap();
    std::fs::write(&gz, enc.finish().unwrap()).unwrap();
    let o = tracekit([
        "find",
        "-q",
        gz.to_str().unwrap(),
        "--tracepoint",
        "3",
        "--json",
    ]);
    std::fs::remove_dir_all(&dir).unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(stdout(&o), stdout(&plain));
}

#[test]
fn errors_exit_2_for_arguments_and_formats_and_1_for_damage() {
    let file = path("amd64.tf");
    for args in [
        ["--range", "5"],
        ["--range", "0x20:0x10"],
        ["--outside", "a:b"],
        ["--mem", "0x10:0"],
        ["--pc", "twelve"],
        ["--tracepoint", "1.5"],
    ] {
        let o = tracekit([&["find", "-q", file.as_str()], &args[..]].concat());
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        assert!(stderr(&o).contains(args[0]), "{args:?}: {}", stderr(&o));
        assert!(o.stdout.is_empty());
    }
    let x64 = testdata("x64dbg/basic.trace64");
    let o = tracekit(["find", "-q", x64.to_str().unwrap(), "--pc", "0x1000"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("gdb-tfile"), "{}", stderr(&o));
    // A damaged file: the frames before the damage, then the error.
    let o = tracekit(["find", "-q", &path("err-truncated-frame.tf")]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains("offset"), "{}", stderr(&o));
    assert!(
        !stdout(&o).is_empty(),
        "frames before the damage are printed"
    );
}
