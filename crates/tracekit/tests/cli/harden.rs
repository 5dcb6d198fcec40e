//! The edges around the readers: a trace cut short while a batch command reads it, inputs
//! that are pipes or endless devices, and the leftovers of killed runs.

use std::io::Read;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use crate::common::*;

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("tk-harden-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// `dump` of a trace truncated while it runs (its output held up by a slow reader): exit 1
/// with "FILE changed while it was read (at offset 0x…)", and no SIGBUS.
#[test]
fn a_trace_cut_under_dump_is_an_error_with_the_offset() {
    let dir = temp_dir("dump-cut");
    let path = dir.join("long.log");
    std::fs::write(&path, tenet_trace(300_000)).unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_tracekit"))
        .args(["-q", "dump"])
        .arg(&path)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = child.stdout.take().unwrap();
    let mut first = vec![0u8; 64 * 1024];
    out.read_exact(&mut first).unwrap();
    // dump now waits on the full pipe, far before the cut.
    std::fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .unwrap()
        .set_len(2_000_000)
        .unwrap();
    let mut rest = Vec::new();
    out.read_to_end(&mut rest).unwrap();
    let mut err = String::new();
    child.stderr.take().unwrap().read_to_string(&mut err).unwrap();
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(1), "{err}");
    assert!(
        err.starts_with(&format!(
            "error: {} changed while it was read (at offset 0x",
            path.display()
        )),
        "{err}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
