//! The frame of the tool, independent of any one format: detection, exit codes, stdin,
//! compressed input, closed pipes, and never panicking on any bytes.

use std::io::Write;

use quickcheck::{QuickCheck, TestResult};
use tracekit::{Command, HANDLERS, fuzz_cli, run_on_bytes};

use crate::common::*;

#[test]
fn unknown_format_gives_the_detection_error() {
    let dir = std::env::temp_dir().join(format!("tracekit-frame-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("mystery.bin");
    std::fs::write(&path, b"certainly not a trace").unwrap();
    for cmd in ["info", "dump", "validate"] {
        let o = tracekit([cmd, path.to_str().unwrap()]);
        assert_eq!(o.status.code(), Some(1), "{cmd}");
        let err = stderr(&o);
        assert!(err.starts_with("error: cannot tell the format of"), "{err}");
        for f in HANDLERS.iter().map(|h| h.name()) {
            assert!(err.contains(f), "{err} lacks {f}");
        }
    }
    // The same through stdin.
    let o = tracekit_stdin(["info", "-"], b"still not a trace");
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("cannot tell the format of -"));
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn usage_errors_exit_2() {
    for args in [
        &["info"][..],
        &["frobnicate", "x"],
        &["info", "x", "--format", "nosuch"],
        &[],
    ] {
        let o = tracekit(args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
    }
    let o = tracekit(["--help"]);
    assert_eq!(o.status.code(), Some(0));
    assert!(stdout(&o).contains("validate"));
}

#[test]
fn missing_file_is_an_error_naming_it() {
    let o = tracekit(["info", "/nonexistent/trace.bin"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).starts_with("error: cannot open /nonexistent/trace.bin"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn compressed_unknown_input_is_detected_after_decompression() {
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(b"{\"not\": \"a dcfg\"}").unwrap();
    let o = tracekit_stdin(["info", "-"], &gz.finish().unwrap());
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("cannot tell the format"));
}

#[test]
fn forced_format_overrides_detection() {
    // With --format, detection is skipped: garbage is read as that format and fails in it,
    // not with the detection error.
    for f in HANDLERS.iter().map(|h| h.name()) {
        let mut out = Vec::new();
        let r = run_on_bytes(Some(f), Command::Validate, b"garbage".to_vec(), &mut out);
        if let Err(e) = r {
            assert!(
                !e.to_string().contains("cannot tell the format"),
                "{f}: {e}"
            );
        }
    }
}

/// Random bytes, and random bytes behind each format's magic, through every command with
/// detection and with every forced format: no panic.
#[test]
fn never_panics_on_arbitrary_bytes() {
    fn prop(data: Vec<u8>, magic: u8) -> TestResult {
        let prefixes: [&[u8]; 6] = [
            b"",
            b"TRAC",
            b"\x7fTRACE0\n",
            &[0xA1, 0x11, 0x8E, 0x17],
            b"{\"MAJOR_VERSION\":",
            b"TRAC\x08\0\0\0{\"ver\":1}",
        ];
        let mut bytes = prefixes[usize::from(magic) % prefixes.len()].to_vec();
        bytes.extend_from_slice(&data);
        fuzz_cli(&bytes);
        TestResult::passed()
    }
    QuickCheck::new()
        .tests(300)
        .quickcheck(prop as fn(Vec<u8>, u8) -> TestResult);
}

/// Inputs the fuzzer once crashed on (`cargo xtask fuzz` keeps them) stay fixed.
#[test]
fn fuzz_crashes_stay_fixed() {
    let dir = testdata("fuzz-crashes");
    let Ok(targets) = std::fs::read_dir(&dir) else {
        return;
    };
    for target in targets.flatten() {
        for file in std::fs::read_dir(target.path()).unwrap().flatten() {
            fuzz_cli(&std::fs::read(file.path()).unwrap());
        }
    }
}

/// `tracekit dump big | head`: the reader closes the pipe early; tracekit ends quietly with
/// exit 0 instead of an error about the broken pipe.
#[test]
fn closed_pipe_ends_quietly() {
    use std::io::{BufRead, BufReader};
    use std::process::{Command as Process, Stdio};
    let mut child = Process::new(env!("CARGO_BIN_EXE_tracekit"))
        .args(["dump", testdata("x64dbg/basic.trace64").to_str().unwrap()])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    assert!(first.starts_with("{\"i\":0,"), "{first}");
    // The reader is dropped here: the rest of the dump (far more than a pipe buffer) hits
    // a closed pipe.
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(out.stderr.is_empty(), "{}", stderr(&out));
}
