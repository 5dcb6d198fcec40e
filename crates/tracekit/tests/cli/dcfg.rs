//! CLI tests for the dcfg format: `info`, `dump`, `validate`, `dot`, `loops`.

use crate::common::{assert_golden, realdata, stderr, stdout, testdata, tracekit};

fn td(name: &str) -> String {
    testdata(&format!("dcfg/{name}")).display().to_string()
}

#[test]
fn info_text_and_json() {
    let o = tracekit(["-q", "info", &td("sample.dcfg.json")]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_golden(&testdata("dcfg/sample.info.expected"), &stdout(&o));
    let o = tracekit(["-q", "info", "--json", &td("sample.dcfg.json.bz2")]);
    assert!(o.status.success(), "{}", stderr(&o));
    // Counts by construction of the fixture (xtask: 2 images × 2 routines of 6 blocks,
    // 8 edges per routine plus 1 REP edge per odd routine, plus chain/ENTRY/EXIT edges).
    assert_json_subset(
        &stdout(&o),
        "{\"format\":\"dcfg\",\"version\":\"1.00\",\"processes\":[{\"pid\":4243,\"threads\":2,\"instr_count\":1488,\"images\":2,\"basic_blocks\":24,\"edges\":35,\"routines\":4,\"loops\":6}]}",
        "sample",
    );
}

/// Every value of `want` is in `got`, the same (objects compared key by key, arrays element
/// by element): `info --json` holds more than the values a test pins down.
fn assert_json_subset(got: &str, want: &str, what: &str) {
    fn check(got: &serde_json::Value, want: &serde_json::Value, path: &str) {
        match want {
            serde_json::Value::Object(m) => {
                for (k, v) in m {
                    check(&got[k], v, &format!("{path}.{k}"));
                }
            }
            serde_json::Value::Array(a) => {
                for (i, v) in a.iter().enumerate() {
                    check(&got[i], v, &format!("{path}[{i}]"));
                }
            }
            _ => assert_eq!(got, want, "{path}"),
        }
    }
    let got: serde_json::Value = serde_json::from_str(got).unwrap();
    check(&got, &serde_json::from_str(want).unwrap(), what);
}

#[test]
fn info_on_real_files() {
    // Values from an independent Python count (json/bz2 modules), see crates/dcfg/tests/real.rs.
    for (name, want) in [
        (
            "dcfg/pinball2elf_dijkstra_omp_8t.dcfg.json",
            "{\"format\":\"dcfg\",\"version\":\"1.00\",\"processes\":[{\"pid\":20149,\"threads\":8,\"instr_count\":684,\"images\":7,\"basic_blocks\":1601,\"edges\":2211,\"routines\":151,\"loops\":52}]}\n",
        ),
        (
            "dcfg/passlab_simple_loop_whole.dcfg.json.bz2",
            "{\"format\":\"dcfg\",\"version\":\"1.00\",\"processes\":[{\"pid\":29003,\"threads\":1,\"instr_count\":135213,\"images\":3,\"basic_blocks\":1734,\"edges\":2527,\"routines\":132,\"loops\":117}]}\n",
        ),
    ] {
        let Some(path) = realdata(name) else { continue };
        let o = tracekit([
            "-q".as_ref(),
            "info".as_ref(),
            "--json".as_ref(),
            path.as_os_str(),
        ]);
        assert!(o.status.success(), "{}", stderr(&o));
        assert_json_subset(&stdout(&o), want, name);
        let o = tracekit(["-q".as_ref(), "validate".as_ref(), path.as_os_str()]);
        assert_eq!(stdout(&o), "ok\n", "{name}: {}", stderr(&o));
    }
}

#[test]
fn real_loop_in_dot_and_csv() {
    let Some(path) = realdata("dcfg/passlab_simple_loop_whole.dcfg.json.bz2") else {
        return;
    };
    let p = path.display().to_string();
    let o = tracekit(["-q", "dot", &p, "--loop", "31"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let dot = stdout(&o);
    assert!(dot.contains("subgraph cluster_routine29 {"));
    assert!(dot.contains("name='main'"));
    assert!(dot.contains("node30 -> node31 [label=\"EDGE306\\nFALL_THROUGH\\nexecutions=10\"];"));
    let o = tracekit(["-q", "loops", &p]);
    let csv = stdout(&o);
    // Loop 31 (simple_loop.c:5): entered once, head executed 11 times, back edge 10 times;
    // blocks 30 (7 instructions) and 31 (3): static 10, dynamic 7×10 + 3×11 = 103.
    let row = csv.lines().find(|l| l.starts_with("29003,31,")).unwrap();
    assert!(
        row.ends_with("simple_loop.c:5,1,1,11,11,10,10,103"),
        "{row}"
    );
}

/// The basic-block lines of a dump (the lines of the other tables start with `"table"`).
fn blocks(dump: &str) -> impl Iterator<Item = &str> {
    dump.lines().filter(|l| !l.starts_with("{\"table\":"))
}

#[test]
fn dump_is_one_line_per_block_in_every_spelling() {
    let o = tracekit(["-q", "dump", &td("sample.dcfg.json")]);
    assert!(o.status.success(), "{}", stderr(&o));
    let plain = stdout(&o);
    // Blocks are the main table (no "table" key); the other tables are labelled.
    assert_eq!(blocks(&plain).count(), 24);
    for (table, n) in [
        ("processes", 1),
        ("images", 2),
        ("routines", 4),
        ("loops", 6),
        ("edges", 35),
    ] {
        let label = format!("{{\"table\":\"{table}\",");
        let got = plain.lines().filter(|l| l.starts_with(&label)).count();
        assert_eq!(got, n, "{table}");
    }
    assert_eq!(plain.lines().count(), 24 + 1 + 2 + 4 + 6 + 35);
    assert_golden(&testdata("dcfg/sample.dump.expected"), &plain);
    for name in ["sample.dcfg.json.gz", "sample.dcfg.json.bz2"] {
        let o = tracekit(["-q", "dump", &td(name)]);
        assert_eq!(stdout(&o), plain, "{name}");
    }
    for name in ["dialect-hex.dcfg.json", "dialect-numbers.dcfg.json"] {
        let o = tracekit(["-q", "--format", "dcfg", "dump", &td(name)]);
        assert_eq!(stdout(&o), plain, "{name}: {}", stderr(&o));
    }
    let o = tracekit([
        "-q",
        "--format",
        "dcfg",
        "dump",
        &td("dialect-qemu.dcfg.json"),
    ]);
    assert!(o.status.success());
    let first = blocks(&stdout(&o)).next().unwrap().to_owned();
    assert!(first.contains("\"id\":18446462598737039367,"), "{first}");
}

#[test]
fn dump_of_a_truncated_file_gives_complete_blocks_then_the_error() {
    let o = tracekit(["-q", "dump", &td("err-truncated.dcfg.json")]);
    assert_eq!(o.status.code(), Some(1));
    let out = stdout(&o);
    let full = std::fs::read_to_string(testdata("dcfg/sample.dump.expected")).unwrap();
    let got: Vec<&str> = blocks(&out).collect();
    let want: Vec<&str> = blocks(&full).collect();
    assert!(got.len() >= 12, "{out}");
    assert_eq!(
        got,
        want[..got.len()],
        "recovered blocks are the first blocks of the full dump"
    );
    // The input ends inside a key of the second image's IMAGE_DATA object.
    let len = std::fs::metadata(testdata("dcfg/err-truncated.dcfg.json"))
        .unwrap()
        .len();
    assert_eq!(
        stderr(&o),
        format!(
            "error: PROCESSES[0].IMAGES[1].IMAGE_DATA: expected the end of the string (`\"`), \
             found the end of the input at offset {len:#x}\n"
        )
    );
}

#[test]
fn validate_ok_findings_and_errors() {
    let o = tracekit(["-q", "validate", &td("sample.dcfg.json")]);
    assert_eq!(stdout(&o), "ok\n");
    let o = tracekit(["-q", "validate", &td("invalid-inconsistent.dcfg.json")]);
    assert_eq!(o.status.code(), Some(1));
    let err = stderr(&o);
    assert!(
        err.contains("PROCESSES[0].EDGES[1]: target node 999999"),
        "{err}"
    );
    assert!(err.contains("error: 7 consistency problem(s)"), "{err}");
    // Parse errors name the JSON path and the offset.
    for (name, path) in [
        (
            "err-float-id.dcfg.json",
            "PROCESSES[0].IMAGES[0].BASIC_BLOCKS[0].NODE_ID",
        ),
        (
            "err-bad-hex.dcfg.json",
            "PROCESSES[0].IMAGES[0].SYMBOLS[0].ADDR_OFFSET",
        ),
        (
            "err-truncated.dcfg.json",
            "PROCESSES[0].IMAGES[1].IMAGE_DATA",
        ),
        (
            "err-short-row.dcfg.json",
            "PROCESSES[0].IMAGES[0].BASIC_BLOCKS[0].SIZE",
        ),
    ] {
        let o = tracekit(["-q", "validate", &td(name)]);
        assert_eq!(o.status.code(), Some(1), "{name}");
        let err = stderr(&o);
        assert!(
            err.starts_with(&format!("error: {path}: ")),
            "{name}: {err}"
        );
        assert!(err.contains(" at offset 0x"), "{name}: {err}");
    }
}

#[test]
fn dot_and_loops_commands() {
    let o = tracekit([
        "-q",
        "dot",
        &td("sample.dcfg.json"),
        "--loop",
        "12",
        "--hide-zero",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let want = std::fs::read_to_string(testdata("dcfg/sample.loop12.dot.expected")).unwrap();
    assert_eq!(stdout(&o), want);
    let o = tracekit(["-q", "dot", &td("sample.dcfg.json"), "--routine", "4"]);
    assert!(stdout(&o).contains("subgraph cluster_routine4 {"));
    assert!(!stdout(&o).contains("subgraph cluster_routine10 {"));
    let o = tracekit(["-q", "dot", &td("sample.dcfg.json"), "--image", "2"]);
    assert!(!stdout(&o).contains("cluster_image1 "));
    assert!(stdout(&o).contains("cluster_image2 {"));
    let o = tracekit(["-q", "dot", &td("sample.dcfg.json"), "--loop", "99"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("no loop with head block 99"));
    let o = tracekit(["-q", "loops", &td("sample.dcfg.json.bz2")]);
    let want = std::fs::read_to_string(testdata("dcfg/sample.loops.csv.expected")).unwrap();
    assert_eq!(stdout(&o), want);
}
