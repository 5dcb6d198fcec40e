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
    // Drain stderr as it comes (warnings may be many), keeping the first few KiB for the
    // message: a full pipe would stop the process, and with it this writer.
    let mut err = child.stderr.take().unwrap();
    let drain = std::thread::spawn(move || {
        let mut kept = Vec::new();
        let mut buf = [0u8; 1 << 16];
        while let Ok(n) = std::io::Read::read(&mut err, &mut buf) {
            if n == 0 {
                break;
            }
            if kept.len() < 4096 {
                kept.extend_from_slice(&buf[..n]);
            }
        }
        kept
    });
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
    let ok = child.wait().unwrap().success();
    let stderr = drain.join().unwrap();
    if !ok || peak == 0 {
        eprintln!("{args:?}: {}", String::from_utf8_lossy(&stderr));
    }
    (peak.div_ceil(1024), ok)
}

fn check(format: &str, prefix: &[u8], body: &[u8], suffix: &[u8]) {
    for cmd in ["info", "dump", "validate"] {
        let (peak, ok) = peak_mib(&[cmd, "-q", "--format", format, "-"], prefix, body, suffix);
        assert!(ok, "{format} {cmd} failed");
        eprintln!("{format} {cmd}: {FEED_MIB} MiB on stdin, peak {peak} MiB");
        // 0 would mean /proc was never read while the process ran: nothing was measured.
        assert!(peak > 0, "{format} {cmd}: no measurement");
        assert!(peak < BOUND_MIB, "{format} {cmd}: peak {peak} MiB");
    }
}

/// Whether `/proc` can tell a process's peak memory here.
fn measurable() -> bool {
    let yes = vm_hwm(std::process::id()).is_some();
    if !yes {
        eprintln!("skipped: no /proc/PID/status on this system");
    }
    yes
}

// One test per format, so that the harness runs them side by side.

#[test]
fn x64dbg_stream_in_bounded_memory() {
    if !measurable() {
        return;
    }
    // The header, then blocks (the fixture's, replayed again and again).
    let x64 = std::fs::read(testdata("x64dbg/basic.trace64")).unwrap();
    let first = trac_x64dbg::Trace::parse(&x64)
        .unwrap()
        .first_block_offset()
        .0 as usize;
    check("x64dbg", &x64[..first], &x64[first..], &[]);
}

#[test]
fn tt6_stream_in_bounded_memory() {
    if !measurable() {
        return;
    }
    // The initial PC, then records (the fixture has no trailing escapes).
    let tt6 = std::fs::read(testdata("amber/example.tt6")).unwrap();
    check("tt6", &tt6[..4], &tt6[4..], &[]);
}

#[test]
fn gdb_tfile_stream_in_bounded_memory() {
    if !measurable() {
        return;
    }
    // The description, frames, then the 2-byte zero terminator.
    let tf = std::fs::read(testdata("gdb-tfile/amd64.tf")).unwrap();
    let file = gdb_tfile::TraceFile::parse(&tf, gdb_tfile::ReadOptions::default()).unwrap();
    let start = usize::try_from(file.frames_offset().0).unwrap();
    let mut frames = file.frames();
    assert!(frames.by_ref().all(|f| f.is_ok()));
    let trailer = frames.trailer().unwrap();
    let end = tf.len() - trailer.len();
    check("gdb-tfile", &tf[..start], &tf[start..end], trailer);
}

#[test]
fn dcfg_trace_stream_in_bounded_memory() {
    if !measurable() {
        return;
    }
    // The tables, then the thread's chunk rows (each one line; the repeats only break the
    // instruction-count chain, a warning), then the last row and the closing.
    let dt = std::fs::read(testdata("dcfg-trace/basic.trace.json")).unwrap();
    let header = b"\"EDGE_ID_SEQUENCE\"],\n";
    let rows = dt.windows(header.len()).position(|w| w == header).unwrap() + header.len();
    let last = dt[..dt.len() - 1]
        .iter()
        .rposition(|&b| b == b'\n')
        .unwrap()
        + 1;
    check("dcfg-trace", &dt[..rows], &dt[rows..last], &dt[last..]);
}
