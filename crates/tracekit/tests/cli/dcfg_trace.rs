//! CLI tests for the dcfg-trace format: golden dumps and summaries of the fixtures, the
//! negative fixtures' errors, encode → dump round trips, and the join with a real DCFG.

use std::collections::HashMap;
use std::path::Path;

use crate::common::{assert_golden, realdata, stderr, stdout, testdata, tracekit, tracekit_stdin};

const POSITIVE: &[&str] = &[
    "basic",
    "multi",
    "compressed",
    "spec",
    "tolerant",
    "bomb",
    "gap",
];
const NEGATIVE: &[&str] = &[
    "cycle",
    "count-overflow",
    "bad-char",
    "unbalanced",
    "missing-star",
    "unknown-key",
    "unknown-transition",
    "not-prefix-free",
    "empty-code",
    "overshoot",
    "out-of-bits",
    "no-successor",
    "truncated",
    "float",
];

fn fixture(name: &str) -> std::path::PathBuf {
    testdata(&format!("dcfg-trace/{name}.trace.json"))
}

#[test]
fn dumps_and_summaries_match_golden_files() {
    for name in POSITIVE {
        let f = fixture(name);
        let out = tracekit(["dump".as_ref(), f.as_os_str()]);
        assert!(out.status.success(), "{name}: {}", stderr(&out));
        assert_golden(
            &testdata(&format!("dcfg-trace/{name}.dump.expected")),
            &stdout(&out),
        );
        let out = tracekit(["info".as_ref(), f.as_os_str()]);
        assert!(out.status.success(), "{name}: {}", stderr(&out));
        assert_golden(
            &testdata(&format!("dcfg-trace/{name}.info.expected")),
            &stdout(&out),
        );
        let out = tracekit(["validate".as_ref(), f.as_os_str()]);
        assert!(out.status.success(), "{name}: {}", stderr(&out));
        assert_eq!(stdout(&out), "ok\n");
    }
}

#[test]
fn spec_dump_is_the_specification_examples() {
    // Independent of the golden files: section 3.5's examples decoded by hand.
    let out = tracekit(["dump".as_ref(), fixture("spec").as_os_str()]);
    let text = stdout(&out);
    let first = text.lines().next().unwrap();
    assert_eq!(
        first,
        r#"{"pid":1000,"thread":0,"chunk":0,"preceding_instr_count":0,"instr_count":7,"edge_count":4,"edges":[123,125,542,549]}"#
    );
    assert!(
        text.lines()
            .skip(1)
            .all(|l| l.ends_with(r#""edges":[123,124,456]}"#)),
        "{text}"
    );
}

#[test]
fn negative_fixtures_fail_with_offsets() {
    for name in NEGATIVE {
        let f = fixture(&format!("err-{name}"));
        let out = tracekit(["validate".as_ref(), f.as_os_str()]);
        assert_eq!(out.status.code(), Some(1), "{name}: {}", stdout(&out));
        let err = stderr(&out);
        let line = err.lines().last().unwrap();
        assert!(line.starts_with("error: "), "{name}: {err}");
        assert!(line.contains(" at offset 0x"), "{name}: {err}");
        assert_golden(
            &testdata(&format!("dcfg-trace/err-{name}.expected")),
            &format!("{line}\n"),
        );
    }
}

#[test]
fn gaps_warn_and_lenient_mode_relaxes() {
    let out = tracekit(["validate".as_ref(), fixture("gap").as_os_str()]);
    assert!(out.status.success());
    assert!(
        stderr(&out).contains("warning: process 1000 thread 0 chunk 2: PRECEDING_INSTR_COUNT"),
        "{}",
        stderr(&out)
    );
    let f = fixture("err-overshoot");
    let out = tracekit(["--lenient".as_ref(), "dump".as_ref(), f.as_os_str()]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&out).contains(r#""edges":[123,125,542]"#));
}

#[test]
fn truncated_dump_writes_complete_chunks_first() {
    let out = tracekit(["dump".as_ref(), fixture("err-truncated").as_os_str()]);
    assert_eq!(out.status.code(), Some(1));
    let full = tracekit(["dump".as_ref(), fixture("basic").as_os_str()]);
    let (part, all) = (stdout(&out), stdout(&full));
    assert!(!part.is_empty() && all.starts_with(&part) && part.len() < all.len());
    assert!(stderr(&out).contains("end of input at offset 0x"));
}

#[test]
fn info_json_and_stdin() {
    let bytes = std::fs::read(fixture("multi")).unwrap();
    let out = tracekit_stdin(["info", "--json", "-"], &bytes);
    assert!(out.status.success(), "{}", stderr(&out));
    let v: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(v["format"], "dcfg-trace");
    assert_eq!(v["threads"], 3);
    assert_eq!(v["edges"], 360);
    assert_eq!(v["processes"][1]["pid"], 200);
}

#[test]
fn encode_then_dump_gives_the_edges_back() {
    let dir = std::env::temp_dir().join(format!("tracekit-dcfg-trace-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let lines = [
        r#"{"pid":9,"thread":0,"edges":[1,2,3,2,3,2,3,4,5]}"#,
        r#"{"pid":9,"thread":1,"edges":["0x1","0x2","0x3",4]}"#,
        r#"{"pid":2,"thread":0,"edges":[7,7,7,7,7,8]}"#,
        r#"{"pid":9,"thread":0,"edges":[6]}"#,
    ];
    let edges = dir.join("edges.jsonl");
    std::fs::write(&edges, lines.join("\n")).unwrap();
    for flags in [
        &[][..],
        &["--fold-chains", "--repeats", "--dictionary"][..],
        &["--chunk-instrs", "2"][..],
    ] {
        let trace = dir.join("t.trace.json");
        let mut args: Vec<&std::ffi::OsStr> = vec![
            "encode".as_ref(),
            edges.as_os_str(),
            "-o".as_ref(),
            trace.as_os_str(),
            "--force".as_ref(),
        ];
        args.extend(flags.iter().map(std::ffi::OsStr::new));
        let out = tracekit(&args);
        assert!(out.status.success(), "{flags:?}: {}", stderr(&out));
        let out = tracekit(["dump".as_ref(), trace.as_os_str()]);
        assert!(out.status.success(), "{flags:?}: {}", stderr(&out));
        let mut got: HashMap<(u64, u64), Vec<u64>> = HashMap::new();
        for l in stdout(&out).lines() {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            let key = (v["pid"].as_u64().unwrap(), v["thread"].as_u64().unwrap());
            got.entry(key).or_default().extend(
                v["edges"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|e| e.as_u64().unwrap()),
            );
        }
        assert_eq!(got[&(9, 0)], [1, 2, 3, 2, 3, 2, 3, 4, 5, 6], "{flags:?}");
        assert_eq!(got[&(9, 1)], [1, 2, 3, 4], "{flags:?}");
        assert_eq!(got[&(2, 0)], [7, 7, 7, 7, 7, 8], "{flags:?}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// An Eulerian trail through a real DCFG's edge counts: every edge as many times as its
/// COUNT_PER_THREAD says, each edge's source the previous edge's target, from the ENTRY
/// edge (source START) to the EXIT edge (target END). The passlab file satisfies the
/// balance condition (checked with a short Python script over the JSON: every node's
/// inbound count equals its outbound count, except START +1 and END -1; 30412 edge
/// executions in all), so the trail exists and uses every execution.
pub(crate) fn euler_trail(dcfg: &dcfg::Dcfg) -> Vec<u64> {
    let p = &dcfg.processes[0];
    let mut out_edges: HashMap<u64, Vec<(u64, u64)>> = HashMap::new();
    let mut total = 0;
    for e in p.edges() {
        for _ in 0..e.count_for_thread(0) {
            out_edges
                .entry(e.source)
                .or_default()
                .push((e.id, e.target));
            total += 1;
        }
    }
    for v in out_edges.values_mut() {
        v.sort_unstable();
    }
    // Hierholzer, iteratively, over edges: the stack holds (edge, target node).
    let mut stack: Vec<(u64, u64)> = vec![(0, 1)];
    let mut trail = Vec::new();
    while let Some(&(edge, node)) = stack.last() {
        match out_edges.get_mut(&node).and_then(Vec::pop) {
            Some((e, t)) => stack.push((e, t)),
            None => {
                trail.push(edge);
                stack.pop();
            }
        }
    }
    trail.pop(); // the sentinel
    trail.reverse();
    assert_eq!(trail.len(), total);
    trail
}

#[test]
fn join_with_a_real_dcfg() {
    let Some(dcfg_path) = realdata("dcfg/passlab_simple_loop_whole.dcfg.json.bz2") else {
        return;
    };
    let d = dcfg::Dcfg::from_path(&dcfg_path).unwrap();
    let trail = euler_trail(&d);
    let targets: HashMap<u64, u64> = d.processes[0].edges().map(|e| (e.id, e.target)).collect();
    let pid = d.processes[0].id;
    let dir = std::env::temp_dir().join(format!("tracekit-dcfg-trace-real-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let edges = dir.join("edges.jsonl");
    std::fs::write(
        &edges,
        format!("{{\"pid\":{pid},\"thread\":0,\"edges\":{trail:?}}}\n"),
    )
    .unwrap();
    let trace = dir.join("real.trace.json");
    let dcfg_arg = dcfg_path.as_os_str();
    let out = tracekit([
        "--dcfg".as_ref(),
        dcfg_arg,
        "encode".as_ref(),
        edges.as_os_str(),
        "-o".as_ref(),
        trace.as_os_str(),
        "--chunk-instrs".as_ref(),
        "10000".as_ref(),
        "--fold-chains".as_ref(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    // Counts recomputed from the decoded trace equal COUNT_PER_THREAD, and INSTR_COUNT of
    // every chunk equals the sum over its edges' source blocks.
    let out = tracekit([
        "--dcfg".as_ref(),
        dcfg_arg,
        "validate".as_ref(),
        trace.as_os_str(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    // Dump with blocks: each block is its edge's target in the DCFG.
    let out = tracekit([
        "--dcfg".as_ref(),
        dcfg_arg,
        "dump".as_ref(),
        trace.as_os_str(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let mut all = Vec::new();
    let mut chunks = 0;
    for l in stdout(&out).lines() {
        let v: serde_json::Value = serde_json::from_str(l).unwrap();
        let edges: Vec<u64> = v["edges"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e.as_u64().unwrap())
            .collect();
        let blocks: Vec<u64> = v["blocks"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e.as_u64().unwrap())
            .collect();
        assert_eq!(blocks, edges.iter().map(|e| targets[e]).collect::<Vec<_>>());
        all.extend(edges);
        chunks += 1;
    }
    assert_eq!(all, trail);
    assert!(chunks > 5, "{chunks}");
    // A trace with one execution too many disagrees with the DCFG.
    let mut extra = trail.clone();
    extra.push(*trail.last().unwrap());
    std::fs::write(
        &edges,
        format!("{{\"pid\":{pid},\"thread\":0,\"edges\":{extra:?}}}\n"),
    )
    .unwrap();
    let out = tracekit([
        "--dcfg".as_ref(),
        dcfg_arg,
        "encode".as_ref(),
        edges.as_os_str(),
        "-o".as_ref(),
        trace.as_os_str(),
        "--force".as_ref(),
    ]);
    assert!(out.status.success());
    let out = tracekit([
        "--dcfg".as_ref(),
        dcfg_arg,
        "validate".as_ref(),
        trace.as_os_str(),
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("COUNT_PER_THREAD says"),
        "{}",
        stderr(&out)
    );
    let _ = std::fs::remove_dir_all(Path::new(&dir));
}

#[test]
fn huge_chunks_are_dumped_in_batches() {
    // 5 million edges from a 30-byte repeat bomb over a zero-bit self-loop.
    let text = r#"{"MAJOR_VERSION":1,"MINOR_VERSION":0,"PROCESSES":[["PROCESS_ID","STRING_DICTIONARY","TRANSITION_TABLE","THREAD_DATA"],
[1,{},[["CURRENT_EDGE_ID","TRANSITION_CODE","NEXT_EDGE_IDS"],[7,"",[7]]],[["THREAD_ID","TRACE_DATA"],
[0,[["PRECEDING_INSTR_COUNT","INSTR_COUNT","EDGE_COUNT","FIRST_EDGE_ID","EDGE_ID_SEQUENCE"],[0,0,5000000,7,""],[0,0,3,7,"(1000000000*(1000000000*A))"]]]]]]}"#;
    let out = tracekit_stdin(["--format", "dcfg-trace", "dump", "-"], text.as_bytes());
    assert!(out.status.success(), "{}", stderr(&out));
    let s = stdout(&out);
    let lines: Vec<&str> = s.lines().collect();
    assert_eq!(lines.len(), 2);
    let v: serde_json::Value = serde_json::from_str(lines[0]).unwrap();
    let edges = v["edges"].as_array().unwrap();
    assert_eq!(edges.len(), 5_000_000);
    assert!(edges.iter().all(|e| e == 7));
    assert!(lines[1].ends_with(r#""edges":[7,7,7]}"#));
}
