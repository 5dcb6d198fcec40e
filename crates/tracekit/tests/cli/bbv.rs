//! CLI tests for `tracekit bbv`: hand-built traces whose vectors are worked out by hand (a
//! loop of known trip count in x64dbg and Tenet form, two interleaved threads with a block
//! entered in its middle), the DCFG-Trace fixtures with DCFGs built for them (every slice
//! checked against the chunks' instruction counts and a plain re-slicing), the real passlab
//! DCFG with a trace using every edge as often as its count (with LoopPoint's boundaries),
//! properties on random traces (totals, ids, markers recounted from the trace, the output
//! read back), and the errors.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use dcfg_trace::synth::{Cfg, dcfg_json};
use quickcheck::{QuickCheck, TestResult};
use simpoint::bb::{Reader, Record};
use trac_x64dbg::{Arch, Header, Recorder, RecorderOptions, RegDump, Step, Writer};

use crate::common::*;

/// A fresh temporary directory.
fn temp_dir(name: &str) -> PathBuf {
    static N: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("tk-bbv-{name}-{}-{n}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// An x64dbg trace of `(thread, pc, opcode length)` steps.
fn x64dbg_trace(steps: &[(u32, u64, usize)]) -> Vec<u8> {
    let header = Header::new(Arch::X64, "bbv.exe");
    let mut rec = Recorder::new(
        Writer::new(Vec::new(), &header).unwrap(),
        RecorderOptions::default(),
    );
    let mut regs = RegDump::new(Arch::X64);
    for &(thread, pc, len) in steps {
        regs.set_ip(pc);
        rec.step(Step {
            thread,
            opcode: vec![0x90; len],
            regs: regs.clone(),
            mem: Vec::new(),
        })
        .unwrap();
    }
    rec.finish().unwrap()
}

/// The loop program: a prologue at 0x1000 (3 instructions of 1, 3 and 2 bytes), a body at
/// 0x2000 (4 instructions of 2 bytes) run 10 times, an epilogue at 0x3000 (2 of 2 bytes):
/// 45 instructions.
fn loop_pcs() -> Vec<(u64, usize)> {
    let mut v = vec![(0x1000, 1), (0x1001, 3), (0x1004, 2)];
    for _ in 0..10 {
        v.extend([(0x2000, 2), (0x2002, 2), (0x2004, 2), (0x2006, 2)]);
    }
    v.extend([(0x3000, 2), (0x3002, 2)]);
    v
}

/// Worked out by hand with slices of 10: [prologue 3, body 4, body 4] = 11, then three
/// bodies (12), three bodies (12), the last body and the epilogue (4 + 4 + 2); the markers
/// are the executions of 0x2000 that start slices 2, 3 and 4.
const LOOP_BB: &str =
    "T:1:3 :2:8\nM: 0x2000 3\nT:2:12\nM: 0x2000 6\nT:2:12\nM: 0x2000 9\nT:2:8 :3:2\n";

fn bbv(args: &[&str]) -> std::process::Output {
    let mut all = vec!["bbv"];
    all.extend_from_slice(args);
    tracekit(all)
}

/// `tracekit -q --dcfg DCFG bbv ARGS…`.
fn bbv_dcfg(dcfg: &str, args: &[&str]) -> std::process::Output {
    let mut all = vec!["-q", "--dcfg", dcfg, "bbv"];
    all.extend_from_slice(args);
    tracekit(all)
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn loop_of_known_trip_count() {
    let dir = temp_dir("loop");
    let trace = dir.join("loop.trace64");
    let steps: Vec<_> = loop_pcs().into_iter().map(|(pc, l)| (7, pc, l)).collect();
    std::fs::write(&trace, x64dbg_trace(&steps)).unwrap();
    let out = dir.join("loop.bb");
    let map = dir.join("loop.csv");
    let o = bbv(&[s(&trace), "--slice", "10", "-o", s(&out), "--map", s(&map)]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(read(&dir.join("loop.T7.bb")), LOOP_BB);
    assert_eq!(
        read(&map),
        "id,process,block,pc,instructions,symbol\n1,0,0x1000,0x1000,3,\n2,0,0x2000,0x2000,4,\n3,0,0x3000,0x3000,2,\n"
    );
    assert!(
        stderr(&o).contains("loop.T7.bb: 4 slices, 45 instructions"),
        "{}",
        stdout(&o)
    );
    assert!(!out.exists(), "the per-thread name is used");

    // The same program as a Tenet trace (no opcode bytes: the 1..15-byte rule).
    let tenet: String = loop_pcs()
        .iter()
        .map(|(pc, _)| format!("rip={pc:#x}\n"))
        .collect();
    let trace = dir.join("loop.log");
    std::fs::write(&trace, tenet).unwrap();
    let o = bbv(&[s(&trace), "--slice", "10", "-o", s(&dir.join("tenet.bb"))]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(read(&dir.join("tenet.T0.bb")), LOOP_BB);

    // One slice as large as the run: one line with every block.
    let o = bbv(&[
        s(&trace),
        "--slice",
        "1000",
        "-o",
        s(&dir.join("one.bb")),
        "--global",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(read(&dir.join("one.bb")), "T:1:3 :2:40 :3:2\n");
}

/// Two threads interleaved step by step; thread 0x111 enters its body at 0x2004 once.
/// Blocks in order of first start: 0x2000 (1), 0x5000 (2), 0x6000 (3), 0x2004 (4).
#[test]
fn two_threads_and_a_block_entered_in_its_middle() {
    let body = [0x2000, 0x2002, 0x2004, 0x2006];
    let mut a: Vec<u64> = Vec::new();
    a.extend(body);
    a.extend(body);
    a.extend([0x2004, 0x2006]);
    a.extend(body);
    let b: Vec<u64> = vec![0x5000, 0x5001, 0x5000, 0x5001, 0x6000];
    let mut steps = Vec::new();
    for k in 0..a.len().max(b.len()) {
        if let Some(&pc) = a.get(k) {
            steps.push((0x111, pc, if pc >= 0x5000 { 1 } else { 2 }));
        }
        if let Some(&pc) = b.get(k) {
            steps.push((0x222, pc, 1));
        }
    }
    let dir = temp_dir("threads");
    let trace = dir.join("t.trace64");
    std::fs::write(&trace, x64dbg_trace(&steps)).unwrap();
    let o = bbv(&[s(&trace), "--slice", "3", "-o", s(&dir.join("t.bb"))]);
    assert!(o.status.success(), "{}", stderr(&o));
    // Thread 0x111: body | body | mid + body; 0x2004 ran twice inside the bodies before
    // the run that starts at it.
    assert_eq!(
        read(&dir.join("t.T273.bb")),
        "T:1:4\nM: 0x2000 2\nT:1:4\nM: 0x2004 3\nT:1:4 :4:2\n"
    );
    assert_eq!(read(&dir.join("t.T546.bb")), "T:2:4\nM: 0x6000 1\nT:3:1\n");
    // One stream: the runs in the order they end (0x222's first block ends first), the
    // markers counting every thread.
    let o = bbv(&[
        s(&trace),
        "--slice",
        "3",
        "-o",
        s(&dir.join("g.bb")),
        "--global",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(
        read(&dir.join("g.bb")),
        "T:1:4 :2:2\nM: 0x5000 2\nT:1:4 :2:2\nM: 0x2004 3\nT:3:1 :4:2\nM: 0x2000 3\nT:1:4\n"
    );
}

/// The DCFG-Trace fixtures and how their chunk counts were made (xtask's fixtures).
fn fixture_dcfg(name: &str) -> String {
    let c40 = Cfg::new(40, 1);
    let c25 = Cfg::new(25, 3);
    let i40 = move |e| c40.instrs_of(e);
    let i25 = move |e| c25.instrs_of(e);
    match name {
        "basic" => dcfg_json(&[(1000, 40, &i40)], None),
        "multi" => dcfg_json(&[(100, 40, &i40), (200, 25, &i25)], None),
        "compressed" => dcfg_json(&[(7, 9, &|e| e % 4 + 1)], None),
        _ => unreachable!(),
    }
}

/// Per (pid, thread), the chunks' (edge count, instruction count), from `tracekit dump`.
fn chunks(trace: &Path) -> HashMap<(u64, u64), Vec<(u64, u64)>> {
    let o = tracekit(["-q", "dump", s(trace)]);
    assert!(o.status.success(), "{}", stderr(&o));
    let mut out: HashMap<(u64, u64), Vec<(u64, u64)>> = HashMap::new();
    for line in stdout(&o).lines() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        let key = (v["pid"].as_u64().unwrap(), v["thread"].as_u64().unwrap());
        out.entry(key).or_default().push((
            v["edge_count"].as_u64().unwrap(),
            v["instr_count"].as_u64().unwrap(),
        ));
    }
    out
}

/// A slice's (id, count) pairs.
type Slice = Vec<(u32, u64)>;

/// The slices of a `.bb` file, and the markers (pc, count) between them.
fn parse(text: &str) -> (Vec<Slice>, Vec<(u64, u64)>) {
    let mut slices = Vec::new();
    let mut markers = Vec::new();
    for r in Reader::new(text.as_bytes()) {
        match r.unwrap() {
            Record::Slice(e) => {
                slices.push(e.iter().map(|e| (e.id, e.count as u64)).collect());
            }
            Record::Marker(m) => markers.push((m.pc, m.count)),
        }
    }
    (slices, markers)
}

/// The `.bb` text slicing `runs` (block id, pc, instructions) by `n`, written the plain
/// way: the reference the command is compared with.
fn reslice(runs: &[(u32, u64, u64)], n: u64) -> String {
    let mut out = String::new();
    let mut cur: std::collections::BTreeMap<u32, u64> = Default::default();
    let mut total = 0;
    let mut seen: HashMap<u64, u64> = HashMap::new();
    for &(id, pc, k) in runs {
        *seen.entry(pc).or_default() += 1;
        if total >= n {
            let pairs: Vec<String> = cur.iter().map(|(i, c)| format!(":{i}:{c}")).collect();
            out += &format!("T{}\nM: {pc:#x} {}\n", pairs.join(" "), seen[&pc]);
            cur.clear();
            total = 0;
        }
        *cur.entry(id).or_default() += k;
        total += k;
    }
    if total > 0 {
        let pairs: Vec<String> = cur.iter().map(|(i, c)| format!(":{i}:{c}")).collect();
        out += &format!("T{}\n", pairs.join(" "));
    }
    out
}

/// Each fixture with its DCFG: with slices of 1, every block execution is a slice, and
/// the slices of each chunk sum to its INSTR_COUNT; larger slices equal a plain
/// re-slicing of those executions (markers included), and sum to the thread's count.
#[test]
fn dcfg_trace_fixtures_with_their_dcfgs() {
    let dir = temp_dir("fixtures");
    for name in ["basic", "multi", "compressed"] {
        let trace = testdata(&format!("dcfg-trace/{name}.trace.json"));
        let dcfg = dir.join(format!("{name}.dcfg.json"));
        std::fs::write(&dcfg, fixture_dcfg(name)).unwrap();
        let chunks = chunks(&trace);
        let several = chunks
            .keys()
            .any(|k| k.0 != chunks.keys().next().unwrap().0);
        let file = |prefix: &str, (pid, thread): (u64, u64)| {
            if several {
                dir.join(format!("{prefix}.P{pid}.T{thread}.bb"))
            } else {
                dir.join(format!("{prefix}.T{thread}.bb"))
            }
        };
        let map = dir.join(format!("{name}.csv"));
        let prefix = format!("{name}-1");
        let o = bbv_dcfg(
            s(&dcfg),
            &[
                s(&trace),
                "--slice",
                "1",
                "-o",
                s(&dir.join(format!("{prefix}.bb"))),
                "--map",
                s(&map),
            ],
        );
        assert!(o.status.success(), "{name}: {}", stderr(&o));
        // id → pc from the map.
        let pcs: HashMap<u32, u64> = read(&map)
            .lines()
            .skip(1)
            .map(|l| {
                let f: Vec<&str> = l.split(',').collect();
                (
                    f[0].parse().unwrap(),
                    u64::from_str_radix(&f[3][2..], 16).unwrap(),
                )
            })
            .collect();
        for (&key, list) in &chunks {
            let (slices, _) = parse(&read(&file(&prefix, key)));
            assert!(slices.iter().all(|s| s.len() == 1 && s[0].0 >= 1));
            let mut at = 0;
            for &(edges, instrs) in list {
                let sum: u64 = slices[at..at + edges as usize].iter().map(|s| s[0].1).sum();
                assert_eq!(sum, instrs, "{name} {key:?}");
                at += edges as usize;
            }
            assert_eq!(at, slices.len());
            let runs: Vec<(u32, u64, u64)> = slices
                .iter()
                .map(|s| (s[0].0, pcs[&s[0].0], s[0].1))
                .collect();
            for n in [7, 50, 333] {
                let prefix = format!("{name}-{n}");
                let o = bbv_dcfg(
                    s(&dcfg),
                    &[
                        s(&trace),
                        "--slice",
                        &n.to_string(),
                        "-o",
                        s(&dir.join(format!("{prefix}.bb"))),
                        "--force",
                    ],
                );
                assert!(o.status.success(), "{name}: {}", stderr(&o));
                let text = read(&file(&prefix, key));
                assert_eq!(text, reslice(&runs, n), "{name} {key:?} slice {n}");
                let total: u64 = parse(&text).0.iter().flatten().map(|p| p.1).sum();
                assert_eq!(total, list.iter().map(|c| c.1).sum::<u64>());
            }
        }
    }
}

/// The real passlab DCFG with a trace that takes every edge as often as its count: the
/// slices sum to Σ COUNT × NUM_INSTRS over the blocks; with `--loop-bounded` every marker
/// is the entry of a loop head, at its address.
#[test]
fn real_dcfg_with_a_trace_using_every_edge() {
    let Some(dcfg_path) = realdata("dcfg/passlab_simple_loop_whole.dcfg.json.bz2") else {
        return;
    };
    let d = dcfg::Dcfg::from_path(&dcfg_path).unwrap();
    let trail = crate::dcfg_trace::euler_trail(&d);
    let p = &d.processes[0];
    let dir = temp_dir("real");
    let edges = dir.join("edges.jsonl");
    std::fs::write(
        &edges,
        format!("{{\"pid\":{},\"thread\":0,\"edges\":{trail:?}}}\n", p.id),
    )
    .unwrap();
    let trace = dir.join("real.trace.json");
    let o = tracekit([
        "-q",
        "--dcfg",
        s(&dcfg_path),
        "encode",
        s(&edges),
        "-o",
        s(&trace),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let g = dcfg::Graph::new(&d, p);
    let expected: u64 = p
        .blocks()
        .map(|(_, b)| g.block_count(b.id) * u64::from(b.num_instrs))
        .sum();
    let out = dir.join("real.bb");
    let o = bbv_dcfg(
        s(&dcfg_path),
        &[s(&trace), "--slice", "10000", "-o", s(&out), "--global"],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let (slices, markers) = parse(&read(&out));
    let total: u64 = slices.iter().flatten().map(|p| p.1).sum();
    assert_eq!(total, expected);
    assert_eq!(markers.len() + 1, slices.len());
    assert!(
        slices[..slices.len() - 1]
            .iter()
            .all(|s| s.iter().map(|p| p.1).sum::<u64>() >= 10000)
    );

    // LoopPoint's boundaries: markers only at loop heads' addresses, counting at most the
    // head's executions; the loop at simple_loop.c:5 (head 31) is entered once.
    let heads: HashMap<u64, u64> = g
        .loops()
        .map(|(_, _, l)| (g.block_addr(l.head).unwrap(), g.block_count(l.head)))
        .collect();
    let out = dir.join("loops.bb");
    let o = bbv_dcfg(
        s(&dcfg_path),
        &[
            s(&trace),
            "--slice",
            "100",
            "-o",
            s(&out),
            "--global",
            "--loop-bounded",
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let (slices, markers) = parse(&read(&out));
    assert!(!markers.is_empty());
    for (pc, count) in &markers {
        assert!(heads.get(pc).is_some_and(|c| count <= c), "{pc:#x} {count}");
    }
    let total: u64 = slices.iter().flatten().map(|p| p.1).sum();
    assert_eq!(total, expected);
}

/// The real x64dbg and Tenet traces (single-threaded): the slices sum to `info`'s
/// instruction count, and every marker's count is the pc's executions up to the slice it
/// starts, counted from `tracekit dump`'s pcs.
#[test]
fn real_pc_traces() {
    let dir = temp_dir("realpc");
    for rel in [
        "x64dbg/d-ornen_DBGLogParser_test1.trace64",
        "tenet/gaasedelen_tenet_boombox.trace.0.log",
    ] {
        let Some(path) = realdata(rel) else {
            continue;
        };
        let o = tracekit(["-q", "dump", s(&path)]);
        assert!(o.status.success(), "{}", stderr(&o));
        let lines: Vec<serde_json::Value> = stdout(&o)
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        let pcs: Vec<u64> = lines
            .iter()
            .map(|v| u64::from_str_radix(&v["pc"].as_str().unwrap()[2..], 16).unwrap())
            .collect();
        let thread = lines[0]["thread"].as_u64().unwrap_or(0);
        let o = bbv(&[s(&path), "--slice", "50", "-o", s(&dir.join("r.bb"))]);
        assert!(o.status.success(), "{}", stderr(&o));
        let (slices, markers) = parse(&read(&dir.join(format!("r.T{thread}.bb"))));
        let totals: Vec<u64> = slices.iter().map(|s| s.iter().map(|p| p.1).sum()).collect();
        assert_eq!(totals.iter().sum::<u64>(), pcs.len() as u64, "{rel}");
        assert!(slices.len() > 2, "{rel}");
        let mut start = 0usize;
        for (k, (pc, count)) in markers.iter().enumerate() {
            start += totals[k] as usize;
            assert_eq!(pcs[start], *pc, "{rel}");
            let seen = pcs[..=start].iter().filter(|&&p| p == *pc).count() as u64;
            assert_eq!(*count, seen, "{rel} marker {k}");
        }
    }
}

/// Random pc walks as Tenet traces (a pc every 1 to 15 bytes falls through): the slices
/// sum to the lines, every id is at least 1, the output reads back, slices before the last
/// reach N, and every marker's count is the pc's executions up to the slice it starts,
/// counted from the trace's lines.
#[test]
fn properties_on_random_traces() {
    fn prop(picks: Vec<u8>, n: u8) -> TestResult {
        if picks.is_empty() {
            return TestResult::discard();
        }
        let n = u64::from(n % 40) + 1;
        // Four code regions; each pick moves on by 2 bytes or jumps to a region start.
        let mut pcs = Vec::new();
        let mut pc = 0x1000u64;
        for p in &picks {
            pcs.push(pc);
            pc = if p % 4 == 0 {
                0x1000 * u64::from(1 + p % 16 / 4)
            } else {
                pc + 2
            };
        }
        let dir = temp_dir("prop");
        let trace = dir.join("p.log");
        let text: String = pcs.iter().map(|pc| format!("rip={pc:#x}\n")).collect();
        std::fs::write(&trace, text).unwrap();
        let o = bbv(&[
            s(&trace),
            "--slice",
            &n.to_string(),
            "-o",
            s(&dir.join("p.bb")),
        ]);
        assert!(o.status.success(), "{}", stderr(&o));
        let (slices, markers) = parse(&read(&dir.join("p.T0.bb")));
        let totals: Vec<u64> = slices.iter().map(|s| s.iter().map(|p| p.1).sum()).collect();
        assert_eq!(totals.iter().sum::<u64>(), pcs.len() as u64);
        assert!(slices.iter().flatten().all(|p| p.0 >= 1));
        assert!(totals[..totals.len() - 1].iter().all(|&t| t >= n));
        assert_eq!(markers.len() + 1, slices.len());
        let mut start = 0usize;
        for (k, (pc, count)) in markers.iter().enumerate() {
            start += totals[k] as usize;
            assert_eq!(pcs[start], *pc);
            let seen = pcs[..=start].iter().filter(|&&p| p == *pc).count() as u64;
            assert_eq!(*count, seen, "marker {k}");
        }
        std::fs::remove_dir_all(&dir).unwrap();
        TestResult::passed()
    }
    QuickCheck::new()
        .tests(40)
        .quickcheck(prop as fn(Vec<u8>, u8) -> TestResult);
}

#[test]
fn errors() {
    let dir = temp_dir("errors");
    let x64 = testdata("x64dbg/basic.trace64");
    let out = dir.join("e.bb");
    // A slice of 0: usage.
    let o = bbv(&[s(&x64), "--slice", "0", "-o", s(&out)]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("--slice"), "{}", stderr(&o));
    // LoopPoint boundaries need a DCFG.
    let o = bbv(&[s(&x64), "--slice", "10", "-o", s(&out), "--loop-bounded"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("DCFG"), "{}", stderr(&o));
    // A DCFG has no execution; a DCFG-Trace needs its DCFG.
    let o = bbv(&[
        s(&testdata("dcfg/sample.dcfg.json")),
        "--slice",
        "10",
        "-o",
        s(&out),
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let trace = testdata("dcfg-trace/basic.trace.json");
    let o = bbv(&[s(&trace), "--slice", "10", "-o", s(&out)]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("--dcfg"), "{}", stderr(&o));
    // A DCFG without loops.
    let dcfg = dir.join("basic.dcfg.json");
    std::fs::write(&dcfg, fixture_dcfg("basic")).unwrap();
    let o = bbv_dcfg(
        s(&dcfg),
        &[s(&trace), "--slice", "10", "-o", s(&out), "--loop-bounded"],
    );
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("loop"), "{}", stderr(&o));
    // The DCFG of another run: the first edge of the walk is missing; no output is left.
    let c40 = Cfg::new(40, 1);
    std::fs::write(
        &dcfg,
        dcfg_json(&[(1000, 40, &|e| c40.instrs_of(e))], Some(1)),
    )
    .unwrap();
    let o = bbv_dcfg(s(&dcfg), &[s(&trace), "--slice", "10", "-o", s(&out)]);
    assert_eq!(o.status.code(), Some(1));
    let e = stderr(&o);
    assert!(
        e.contains("edge 1 of process 1000") && e.contains("chunk 0"),
        "{e}"
    );
    assert!(e.contains("offset"), "{e}");
    assert_eq!(
        std::fs::read_dir(&dir).unwrap().count(),
        1,
        "only the DCFG is left"
    );
    // Another run's process.
    std::fs::write(&dcfg, fixture_dcfg("compressed")).unwrap();
    let o = bbv_dcfg(s(&dcfg), &[s(&trace), "--slice", "10", "-o", s(&out)]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("process 1000"), "{}", stderr(&o));
    // A damaged trace: exit 1, no output.
    let mut cut = std::fs::read(&x64).unwrap();
    cut.truncate(cut.len() - 3);
    let damaged = dir.join("cut.trace64");
    std::fs::write(&damaged, cut).unwrap();
    let o = bbv(&[s(&damaged), "--slice", "10", "-o", s(&out)]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        !std::fs::read_dir(&dir).unwrap().any(|f| f
            .unwrap()
            .file_name()
            .to_string_lossy()
            .ends_with(".bb"))
    );
}
