//! Bounded memory on streams: `info`, `dump` and `validate` read stdin through the formats'
//! streaming readers, so a stream far larger than the bound is read in constant memory.
//! The input is made on the fly (a fixture's records repeated) and fed to the real binary;
//! its peak resident memory (`VmHWM`) is read from `/proc` just before its stdin closes.

use std::io::Write;
use std::process::{Command, Stdio};

use crate::common::*;

/// The bound the issue sets for any input size.
const BOUND_MIB: u64 = 100;
/// How much to feed: well past the bound.
const FEED_MIB: usize = 160;

/// Peak resident memory of the process, in KiB.
fn vm_hwm(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// Runs `tracekit args` with `prefix`, `body` repeated to [`FEED_MIB`], then `suffix` on
/// stdin (output discarded); returns its peak resident memory in MiB and whether it exited 0.
fn peak_mib(args: &[&str], prefix: &[u8], body: &[u8], suffix: &[u8]) -> (u64, bool) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_tracekit"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(prefix).unwrap();
    let mut chunk = Vec::with_capacity(1 << 20);
    while chunk.len() < 1 << 20 {
        chunk.extend_from_slice(body);
    }
    let mut fed = 0;
    let mut peak = 0;
    while fed < FEED_MIB << 20 {
        stdin.write_all(&chunk).unwrap();
        fed += chunk.len();
        peak = peak.max(vm_hwm(pid).unwrap_or(0));
    }
    // The body is written; the reader is at most a pipe buffer behind. (The suffix may end
    // the process: a tfile's terminator does.)
    std::thread::sleep(std::time::Duration::from_millis(200));
    peak = peak.max(vm_hwm(pid).unwrap_or(0));
    stdin.write_all(suffix).unwrap();
    drop(stdin);
    let out = child.wait_with_output().unwrap();
    let ok = out.status.success();
    if !ok || peak == 0 {
        eprintln!("{args:?}: {}", String::from_utf8_lossy(&out.stderr));
    }
    (peak / 1024, ok)
}

fn check(format: &str, prefix: &[u8], body: &[u8], suffix: &[u8]) {
    for cmd in ["info", "dump", "validate"] {
        let (peak, ok) = peak_mib(&[cmd, "-q", "--format", format, "-"], prefix, body, suffix);
        assert!(ok, "{format} {cmd} failed");
        eprintln!("{format} {cmd}: {FEED_MIB} MiB on stdin, peak {peak} MiB");
        assert!(peak < BOUND_MIB, "{format} {cmd}: peak {peak} MiB");
    }
}

#[test]
fn streams_need_bounded_memory() {
    if vm_hwm(std::process::id()).is_none() {
        eprintln!("skipped: no /proc/PID/status on this system");
        return;
    }
    // x64dbg: the header, then blocks (the fixture's, replayed again and again).
    let x64 = std::fs::read(testdata("x64dbg/basic.trace64")).unwrap();
    let first = trac_x64dbg::Trace::parse(&x64)
        .unwrap()
        .first_block_offset()
        .0 as usize;
    check("x64dbg", &x64[..first], &x64[first..], &[]);
    // TT6: the initial PC, then records (the fixture has no trailing escapes).
    let tt6 = std::fs::read(testdata("amber/example.tt6")).unwrap();
    check("tt6", &tt6[..4], &tt6[4..], &[]);
    // gdb-tfile: description, frames, then the 2-byte zero terminator.
    let tf = std::fs::read(testdata("gdb-tfile/amd64.tf")).unwrap();
    let file = gdb_tfile::TraceFile::parse(&tf, gdb_tfile::ReadOptions::default()).unwrap();
    let start = usize::try_from(file.frames_offset().0).unwrap();
    let mut frames = file.frames();
    assert!(frames.by_ref().all(|f| f.is_ok()));
    let trailer = frames.trailer().unwrap();
    let end = tf.len() - trailer.len();
    check("gdb-tfile", &tf[..start], &tf[start..end], trailer);
}
