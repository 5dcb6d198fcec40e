//! CLI tests for the amber formats: dump/info goldens next to the fixtures
//! (`testdata/amber/*.expected`, `TRACE_BLESS=1` rewrites them), validate, negative
//! fixtures, FULL record-size option, din conversion, stdin.

use crate::common::*;

const POSITIVE: &[&str] = &[
    "example.tt6",
    "all-opcodes.tt6",
    "all-opcodes.tt6e",
    "escapes.tt6",
    "escapes.tt6e",
    "trap.tt6e",
    "threads/thread_001.tt6",
    "threads/thread_002.tt6",
    "threads/thread_003.tt6",
    "full-1004.full",
    "full-1008.full",
];

fn path(rel: &str) -> String {
    testdata(&format!("amber/{rel}"))
        .to_str()
        .unwrap()
        .to_owned()
}

#[test]
fn dump_goldens_and_validate() {
    for name in POSITIVE {
        assert_dump_golden_and_valid(&path(name), &testdata(&format!("amber/{name}.expected")));
    }
}

#[test]
fn info_goldens() {
    for name in [
        "example.tt6",
        "escapes.tt6e",
        "all-opcodes.tt6e",
        "full-1008.full",
    ] {
        let o = tracekit(["info", "-q", &path(name)]);
        assert!(o.status.success(), "{name}: {}", stderr(&o));
        assert_golden(
            &testdata(&format!("amber/{name}.info.expected")),
            &stdout(&o),
        );
    }
}

#[test]
fn info_json_counts() {
    let o = tracekit(["info", "--json", &path("example.tt6")]);
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    // By hand from the notes' example: mflr, stw, bl, lswx, lvx, rfi.
    assert_eq!(v["format"], "tt6");
    assert_eq!(v["initial_pc"], "0x1000");
    assert_eq!(v["instructions"], 6);
    assert_eq!(v["classes"]["compute"], 1);
    assert_eq!(v["classes"]["flow"], 2);
    assert_eq!(v["classes"]["memory"], 2);
    assert_eq!(v["classes"]["memory_extended"], 1);
    assert_eq!(v["sync_events"], 1); // the SYNC_SIGNAL escape before rfi
    assert_eq!(v["escapes"].as_array().unwrap().len(), 2);
    let o = tracekit(["info", "--json", &path("escapes.tt6")]);
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    // 4 sync escapes before instruction 6, one dangling at the end.
    assert_eq!(v["sync_events"], 5);
    assert_eq!(v["dangling_escapes"], 1);
}

#[test]
fn negative_fixtures_fail_after_the_complete_records() {
    for (name, records, offset) in [
        ("err-empty.tt6", 0, "0x0"),
        ("err-truncated-record.tt6", 3, "0x20"),
        ("err-truncated-escape.tt6", 5, "0x34"),
        ("err-stray-bytes.tt6", 6, "0x44"),
        ("err-truncated.full", 1, "0x3f0"),
    ] {
        for cmd in ["validate", "dump", "info"] {
            let o = tracekit([cmd, "-q", &path(name)]);
            assert_eq!(o.status.code(), Some(1), "{name} {cmd}");
            let err = stderr(&o);
            assert!(
                err.trim_end().ends_with(&format!("at offset {offset}")),
                "{name}: {err}"
            );
            if cmd == "dump" {
                assert_eq!(stdout(&o).lines().count(), records, "{name}");
            }
        }
    }
    let o = tracekit([
        "--format",
        "amber-full",
        "validate",
        &path("err-bad-magic.full"),
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("bad FULL magic: found 0xa1118e18"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn record_size_option() {
    let o = tracekit(["--record-size", "1008", "validate", &path("full-1004.full")]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("truncated record 2"), "{}", stderr(&o));
    let o = tracekit(["--record-size", "1004", "validate", &path("full-1004.full")]);
    assert_eq!(stdout(&o), "ok\n");
    let o = tracekit(["--record-size", "1000", "info", &path("full-1004.full")]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("expected 1004 or 1008"));
}

#[test]
fn convert_to_din() {
    let o = tracekit(["convert", &path("example.tt6"), "--to", "din"]);
    assert!(o.status.success(), "{}", stderr(&o));
    // By hand: fetches at each PC, stw writes 0xbffff9fc, lswx and lvx read.
    assert_eq!(
        stdout(&o),
        "2 1000\n2 1004\n1 bffff9fc\n2 1008\n2 1018\n0 2000\n2 101c\n0 3008\n2 1020\n"
    );
    let o = tracekit(["convert", &path("all-opcodes.tt6e"), "--to", "din"]);
    assert!(o.status.success());
    assert_golden(
        &testdata("amber/all-opcodes.tt6e.din.expected"),
        &stdout(&o),
    );
    let o = tracekit(["convert", &path("full-1004.full"), "--to", "din"]);
    assert_eq!(stdout(&o), "2 1000\n2 1004\n2 1008\n");
    let o = tracekit(["convert", &path("example.tt6"), "--to", "pixie"]);
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn stdin_needs_the_format() {
    let bytes = std::fs::read(path("example.tt6")).unwrap();
    let o = tracekit_stdin(["--format", "tt6", "dump", "-"], &bytes);
    assert!(o.status.success());
    assert_eq!(
        stdout(&o),
        std::fs::read_to_string(path("example.tt6.expected")).unwrap()
    );
    let o = tracekit_stdin(["--format", "tt6", "validate", "-"], &bytes[..0x28]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("truncated record 3"));
}

/// `tracekit merge DIR`: each line is that thread's own `dump` line plus `thread` and `seq`,
/// every record of every thread comes exactly once, in a timeline numbered 0, 1, 2, …;
/// `dump`, `info` and `convert --to din` take the directory the same way.
#[test]
fn merge_threads_directory() {
    let dir = path("threads");
    let o = tracekit(["merge", &dir]);
    assert!(o.status.success(), "{}", stderr(&o));
    let merged = stdout(&o);
    assert_golden(&testdata("amber/threads-merged.expected"), &merged);
    assert_eq!(stdout(&tracekit(["dump", &dir])), merged);
    let own: Vec<Vec<String>> = (1..=3)
        .map(|t| {
            let o = tracekit([
                "dump".to_owned(),
                path(&format!("threads/thread_{t:03}.tt6")),
            ]);
            stdout(&o).lines().map(str::to_owned).collect()
        })
        .collect();
    let mut seen = [0usize; 3];
    for (seq, line) in merged.lines().enumerate() {
        let mut v: serde_json::Value = serde_json::from_str(line).unwrap();
        let thread = v["thread"].as_u64().unwrap() as usize;
        let i = v["i"].as_u64().unwrap() as usize;
        assert_eq!(v["seq"].as_u64().unwrap() as usize, seq);
        // The merged line is the thread's own line plus its thread and seq.
        let obj = v.as_object_mut().unwrap();
        obj.remove("thread");
        obj.remove("seq");
        let base: serde_json::Value = serde_json::from_str(&own[thread - 1][i]).unwrap();
        assert_eq!(v, base, "line {seq}");
        assert_eq!(i, seen[thread - 1], "thread {thread} in order");
        seen[thread - 1] += 1;
    }
    for t in 0..3 {
        assert_eq!(seen[t], own[t].len(), "every record of thread {}", t + 1);
    }
    let o = tracekit(["info", "--json", &dir]);
    assert!(o.status.success(), "{}", stderr(&o));
    let info: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(
        info["instructions"].as_u64().unwrap() as usize,
        merged.lines().count()
    );
    assert_eq!(info["threads"].as_array().unwrap().len(), 3);
    let o = tracekit(["convert", &dir, "--to", "din"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let fetches = stdout(&o).lines().filter(|l| l.starts_with("2 ")).count();
    assert_eq!(fetches, merged.lines().count());
    // A file is not a directory.
    let o = tracekit(["merge", &path("example.tt6")]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
}
