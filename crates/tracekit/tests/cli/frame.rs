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
        let prefixes: [&[u8]; 7] = [
            b"",
            b"TRAC",
            b"\x7fTRACE0\n",
            &[0xA1, 0x11, 0x8E, 0x17],
            b"{\"MAJOR_VERSION\":",
            b"TRAC\x08\0\0\0{\"ver\":1}",
            b"rax=0x1,rip=0x401000,mr=0x10:00",
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

/// Inputs the fuzzer once failed on (`cargo xtask fuzz` keeps them in
/// `testdata/fuzz-crashes/TARGET/`) stay fixed: each is run through its own target.
#[test]
fn fuzz_crashes_stay_fixed() {
    let dir = testdata("fuzz-crashes");
    let Ok(targets) = std::fs::read_dir(&dir) else {
        return;
    };
    for target in targets.flatten() {
        let name = target.file_name().to_string_lossy().into_owned();
        for file in std::fs::read_dir(target.path()).unwrap().flatten() {
            let data = std::fs::read(file.path()).unwrap();
            assert!(tracekit::fuzz_target(&name, &data), "no fuzz target {name}");
            fuzz_cli(&data);
        }
    }
}

/// Every target declared in `fuzz/Cargo.toml` is one of `tracekit::FUZZ_TARGETS`, and the
/// other way round.
#[test]
fn fuzz_targets_are_declared() {
    let manifest = std::fs::read_to_string(root().join("fuzz/Cargo.toml")).unwrap();
    let mut declared: Vec<&str> = manifest
        .lines()
        .filter_map(|l| l.strip_prefix("name = \""))
        .filter_map(|l| l.strip_suffix('"'))
        .filter(|n| *n != "trace-fuzz")
        .collect();
    let mut known: Vec<&str> = tracekit::FUZZ_TARGETS.iter().map(|(n, _)| *n).collect();
    declared.sort_unstable();
    known.sort_unstable();
    assert_eq!(declared, known);
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

/// `validate --json`: `{"ok":true,…}` or `{"ok":false,"error","offset","path"}` on stdout,
/// with the exit code saying the same.
#[test]
fn validate_json_reports_where() {
    let o = tracekit([
        "validate",
        "--json",
        testdata("x64dbg/basic.trace64").to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(v["ok"], true);
    assert_eq!(v["format"], "x64dbg");
    assert!(v["instructions"].as_u64().unwrap() > 0);
    let mut cut = std::fs::read(testdata("x64dbg/basic.trace64")).unwrap();
    cut.truncate(cut.len() - 3);
    let o = tracekit_stdin(["validate", "--json", "-"], &cut);
    assert_eq!(o.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(v["ok"], false);
    let offset = v["offset"].as_u64().unwrap();
    assert!(offset < cut.len() as u64, "{v}");
    assert!(
        v["error"]
            .as_str()
            .unwrap()
            .contains(&format!("{offset:#x}")),
        "{v}"
    );
    // A JSON format gives the path.
    let o = tracekit_stdin(
        ["validate", "--json", "--format", "dcfg", "-"],
        b"{\"MAJOR_VERSION\": 1, \"PROCESSES\": [[\"PROCESS_ID\"], [1.5]]}",
    );
    assert_eq!(o.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert!(v["path"].as_str().unwrap().starts_with("PROCESSES"), "{v}");
}

/// Compressed input on stdin is detected by its magic, as for a path.
#[test]
fn compressed_stdin_is_decompressed() {
    let plain = std::fs::read(testdata("x64dbg/basic.trace64")).unwrap();
    let want = stdout(&tracekit([
        "info",
        testdata("x64dbg/basic.trace64").to_str().unwrap(),
    ]));
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(&plain).unwrap();
    let mut bz = bzip2::write::BzEncoder::new(Vec::new(), bzip2::Compression::fast());
    bz.write_all(&plain).unwrap();
    for bytes in [gz.finish().unwrap(), bz.finish().unwrap()] {
        let o = tracekit_stdin(["info", "-"], &bytes);
        assert!(o.status.success(), "{}", stderr(&o));
        assert_eq!(stdout(&o), want);
    }
}

/// Commands of one format refuse others with exit 2 and the list of what they take.
#[test]
fn format_specific_commands_name_what_they_take() {
    let x64 = testdata("x64dbg/basic.trace64");
    for (cmd, takes) in [
        (&["loops"][..], "dcfg"),
        (&["dot"][..], "dcfg"),
        (&["merge"][..], "amber threads directory"),
    ] {
        let mut args: Vec<&std::ffi::OsStr> = vec![cmd[0].as_ref(), x64.as_os_str()];
        args.extend(cmd[1..].iter().map(|a| std::ffi::OsStr::new(*a)));
        let o = tracekit(args);
        assert_eq!(o.status.code(), Some(2), "{cmd:?}: {}", stderr(&o));
        assert!(stderr(&o).contains(takes), "{cmd:?}: {}", stderr(&o));
    }
}

/// No dump line of any golden repeats a key: every JSON parser would keep only one.
#[test]
fn no_dump_line_repeats_a_key() {
    fn keys_unique(v: &str) -> Result<(), String> {
        // serde_json keeps the last of repeated keys, so count them with a raw scan of the
        // line's objects instead.
        let mut stack: Vec<Vec<String>> = Vec::new();
        let bytes = v.as_bytes();
        let mut i = 0;
        let mut expect_key = false;
        while i < bytes.len() {
            match bytes[i] {
                b'{' => {
                    stack.push(Vec::new());
                    expect_key = true;
                }
                b'}' => {
                    stack.pop();
                }
                b',' => expect_key = stack.last().is_some(),
                b'[' => expect_key = false,
                b'"' => {
                    let start = i + 1;
                    i += 1;
                    while bytes[i] != b'"' {
                        if bytes[i] == b'\\' {
                            i += 1;
                        }
                        i += 1;
                    }
                    let s = &v[start..i];
                    if expect_key && bytes.get(i + 1) == Some(&b':') {
                        let keys = stack.last_mut().unwrap();
                        if keys.iter().any(|k| k == s) {
                            return Err(format!("key {s:?} twice"));
                        }
                        keys.push(s.to_owned());
                    }
                    expect_key = false;
                }
                _ => {}
            }
            i += 1;
        }
        Ok(())
    }
    let mut checked = 0;
    for dir in [
        "x64dbg",
        "gdb-tfile",
        "dcfg",
        "dcfg-trace",
        "amber",
        "amber/threads",
        "tenet",
    ] {
        for e in std::fs::read_dir(testdata(dir)).unwrap() {
            let p = e.unwrap().path();
            let name = p.file_name().unwrap().to_str().unwrap().to_owned();
            if !name.ends_with(".expected") || name.contains("info") || name.starts_with("err-") {
                continue;
            }
            for (n, line) in std::fs::read_to_string(&p).unwrap().lines().enumerate() {
                if line.starts_with('{') {
                    keys_unique(line).unwrap_or_else(|e| panic!("{name}:{}: {e}", n + 1));
                    checked += 1;
                }
            }
        }
    }
    assert!(checked > 100, "only {checked} lines");
}
