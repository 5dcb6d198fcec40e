//! CLI tests for the x64dbg format: goldens next to the fixtures in `testdata/x64dbg/`
//! (`TRACE_BLESS=1` rewrites them), error messages, stdin, and the real file.

use crate::common::{assert_golden, realdata, stderr, stdout, testdata, tracekit, tracekit_stdin};

const POSITIVE: [&str; 5] = [
    "basic.trace64",
    "basic.trace32",
    "legacy-tid.trace64",
    "legacy-tid.trace32",
    "sessions.trace64",
];

const NEGATIVE: [&str; 9] = [
    "err-truncated-header.bin",
    "err-huge-header.bin",
    "err-bad-version.bin",
    "err-bad-block-type.bin",
    "err-too-many-registers.bin",
    "err-register-out-of-range.bin",
    "err-too-many-memory-accesses.bin",
    "err-empty-opcode.bin",
    "err-truncated-block.bin",
];

#[test]
fn dump_matches_expected() {
    for name in POSITIVE {
        let path = testdata(&format!("x64dbg/{name}"));
        let out = tracekit(["dump".as_ref(), path.as_os_str()]);
        assert!(out.status.success(), "{name}: {}", stderr(&out));
        assert_golden(&testdata(&format!("x64dbg/{name}.expected")), &stdout(&out));
    }
}

#[test]
fn info_matches_expected() {
    for name in POSITIVE {
        let path = testdata(&format!("x64dbg/{name}"));
        let out = tracekit(["info".as_ref(), path.as_os_str()]);
        assert!(out.status.success(), "{name}: {}", stderr(&out));
        assert_golden(
            &testdata(&format!("x64dbg/{name}.info.expected")),
            &stdout(&out),
        );
    }
}

#[test]
fn quick_start_info() {
    let path = testdata("x64dbg/basic.trace64");
    let out = tracekit(["info".as_ref(), path.as_os_str(), "--json".as_ref()]);
    assert!(out.status.success());
    let v: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(v["format"], "x64dbg");
    assert_eq!(v["arch"], "x64");
    assert_eq!(v["instructions"], 1100);
    assert_eq!(v["threads"].as_array().unwrap().len(), 3);
    assert_eq!(v["full_dumps"], 3);
    assert_eq!(v["sessions"], 1);
    assert_eq!(v["first_pc"], "0x7ff6a1b21000");
    assert_eq!(v["header"]["hashAlgorithm"], "murmurhash");
    let sum: u64 = v["threads"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["instructions"].as_u64().unwrap())
        .sum();
    assert_eq!(sum, 1100);
}

#[test]
fn dump_lines_have_the_documented_shape() {
    let path = testdata("x64dbg/basic.trace64");
    let out = tracekit(["dump".as_ref(), path.as_os_str()]);
    let text = stdout(&out);
    let mut lines = 0;
    for (i, line) in text.lines().enumerate() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        assert_eq!(v["i"], i as u64);
        let keys: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
        let mut want = vec!["i", "mem", "offset", "opcode", "pc", "regs", "thread"];
        want.sort_unstable();
        assert_eq!(keys, want);
        assert!(line.starts_with(&format!("{{\"i\":{i},\"offset\":")));
        for m in v["mem"].as_array().unwrap() {
            assert!(m["addr"].as_str().unwrap().starts_with("0x"));
            assert!(m["old"].as_str().unwrap().starts_with("0x"));
        }
        lines += 1;
    }
    assert_eq!(lines, 1100);
}

#[test]
fn negative_fixtures_fail_with_offsets() {
    for name in NEGATIVE {
        let path = testdata(&format!("x64dbg/{name}"));
        let out = tracekit(["validate".as_ref(), path.as_os_str()]);
        assert_eq!(out.status.code(), Some(1), "{name}");
        let err = stderr(&out);
        assert!(err.trim_end().contains(" at offset 0x"), "{name}: {err}");
        let expected = testdata(&format!(
            "x64dbg/{}.expected",
            name.trim_end_matches(".bin")
        ));
        assert_golden(&expected, &err);
    }
}

#[test]
fn truncated_dump_writes_complete_records_first() {
    let path = testdata("x64dbg/err-truncated-block.bin");
    let out = tracekit(["dump".as_ref(), path.as_os_str()]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(stdout(&out).lines().count(), 5);
    assert!(
        stderr(&out).contains("truncated block 5"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn stdin_and_validate_notes() {
    let path = testdata("x64dbg/legacy-tid.trace64");
    let bytes = std::fs::read(&path).unwrap();
    let from_file = tracekit(["dump".as_ref(), path.as_os_str()]);
    let from_stdin = tracekit_stdin(["dump", "-"], &bytes);
    assert!(from_stdin.status.success(), "{}", stderr(&from_stdin));
    assert_eq!(from_file.stdout, from_stdin.stdout);
    let out = tracekit(["validate".as_ref(), path.as_os_str()]);
    assert!(out.status.success());
    assert_eq!(stdout(&out), "ok\n");
    assert!(
        stderr(&out).contains("without the 0x80 flag"),
        "{}",
        stderr(&out)
    );
}

/// Values derived by hand with a short Python walk of the blocks (see
/// `crates/trac-x64dbg/tests/integration/realdata.rs`).
#[test]
fn real_file_info() {
    let Some(path) = realdata("x64dbg/d-ornen_DBGLogParser_test1.trace64") else {
        return;
    };
    let out = tracekit(["info".as_ref(), path.as_os_str(), "--json".as_ref()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let v: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(v["instructions"], 152);
    assert_eq!(v["first_pc"], "0x1413546b7");
    assert_eq!(v["last_pc"], "0x141353aa8");
    assert_eq!(
        v["threads"],
        serde_json::json!([{"id": 324, "instructions": 152}])
    );
    assert_eq!(v["full_dumps"], 1);
    assert_eq!(v["header"]["hash"], "0x3A6C6FA546C8A44E");
    let out = tracekit(["dump".as_ref(), path.as_os_str()]);
    let first = stdout(&out).lines().next().unwrap().to_owned();
    assert!(first.starts_with(r#"{"i":0,"offset":150,"thread":324,"pc":"0x1413546b7","opcode":"#));
}
