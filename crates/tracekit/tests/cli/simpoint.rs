//! `tracekit simpoint` and `tracekit regions`: synthetic `.bb` files whose phases are known
//! (the simulation points must fall one in each phase, the weights be the phases' shares),
//! determinism for a seed, several per-thread files, the errors (empty `.bb`, `--max-k 0`,
//! more clusters than slices, damaged inputs), and region rows of a hand-made `.bb` with
//! markers checked against values worked out by hand.

use std::path::{Path, PathBuf};

use simpoint::simpoints::{parse_simpoints, parse_weights};

use crate::common::*;

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("tk-simpoint-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// A small deterministic generator (the test's own, independent of the crate's).
struct Lcg(u64);

impl Lcg {
    fn unit(&mut self) -> f64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (self.0 >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// A `.bb` text whose slice `i` belongs to phase `phases[i]`: phase p executes blocks
/// 10p+1 … 10p+6 with counts 100·b ± 5 %, and the slice is `len(p)` times as long.
fn phased_bb(phases: &[usize], len: impl Fn(usize) -> f64, seed: u64) -> String {
    let mut rng = Lcg(seed);
    let mut text = String::new();
    for (i, &p) in phases.iter().enumerate() {
        if i > 0 {
            text += &format!("M: 0x{:x} {}\n", 0x401000 + 0x40 * p, i);
        }
        text.push('T');
        for b in 1..=6u64 {
            let count = (100.0 * b as f64 * len(p) * (0.95 + 0.1 * rng.unit())).round();
            if b > 1 {
                text.push(' ');
            }
            text += &format!(":{}:{}", 10 * p as u64 + b, count as u64);
        }
        text.push('\n');
    }
    text
}

/// `(slice, cluster)` lines and `(weight, cluster)` lines.
type Outputs = (Vec<(u64, u64)>, Vec<(f64, u64)>);

fn read_outputs(prefix: &Path) -> Outputs {
    let sp = std::fs::read(format!("{}.simpoints", prefix.display())).unwrap();
    let w = std::fs::read(format!("{}.weights", prefix.display())).unwrap();
    (
        parse_simpoints(&sp)
            .unwrap()
            .iter()
            .map(|p| (p.slice, p.cluster))
            .collect(),
        parse_weights(&w)
            .unwrap()
            .iter()
            .map(|w| (w.weight, w.cluster))
            .collect(),
    )
}

/// The simulation points fall one in each phase, and each cluster's weight is its phase's
/// share (of slices, or of instructions).
fn check_phases(
    phases: &[usize],
    points: &[(u64, u64)],
    weights: &[(f64, u64)],
    share: impl Fn(usize) -> f64,
) {
    let distinct: std::collections::BTreeSet<usize> = phases.iter().copied().collect();
    assert_eq!(points.len(), distinct.len(), "{points:?}");
    let hit: std::collections::BTreeSet<usize> = points
        .iter()
        .map(|&(slice, _)| phases[slice as usize])
        .collect();
    assert_eq!(hit, distinct, "one simulation point per phase");
    let sum: f64 = weights.iter().map(|w| w.0).sum();
    assert!((sum - 1.0).abs() < 1e-5, "weights sum to {sum}");
    for &(slice, cluster) in points {
        let w = weights.iter().find(|w| w.1 == cluster).unwrap().0;
        let expected = share(phases[slice as usize]);
        assert!(
            (w - expected).abs() < 1e-6,
            "cluster {cluster}: {w} vs {expected}"
        );
    }
}

#[test]
fn recovers_phases_and_writes_simpoint_files() {
    let dir = scratch("phases");
    // Four phases in runs, 160 slices.
    let phases: Vec<usize> = (0..160).map(|i| (i / 7 + i / 23) % 4).collect();
    let bb = dir.join("run.bb");
    std::fs::write(&bb, phased_bb(&phases, |_| 1.0, 1)).unwrap();
    let o = tracekit([
        "simpoint",
        s(&bb),
        "--max-k",
        "10",
        "--init-seeds",
        "30",
        "-v",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    // One summary line on stderr; the scores of `-v` on stdout.
    let run = dir.join("run");
    let said = format!(
        "{0}.simpoints, {0}.weights: 4 simulation points of 160 slices (k of 1..=10, BIC threshold 0.9)\n",
        run.display()
    );
    assert_eq!(stderr(&o), said);
    let quiet = tracekit(["simpoint", s(&bb), "--max-k", "10", "-q", "--force"]);
    assert!(quiet.status.success(), "{}", stderr(&quiet));
    assert_eq!(stderr(&quiet), "");
    let text = stdout(&o);
    assert!(text.starts_with("    k "), "{text}");
    assert!(
        text.lines()
            .any(|l| l.trim_start().starts_with("4 ") && l.ends_with(" <")),
        "{text}"
    );
    let (points, weights) = read_outputs(&dir.join("run"));
    let count = |p: usize| phases.iter().filter(|&&q| q == p).count() as f64 / 160.0;
    check_phases(&phases, &points, &weights, count);
    // Weights keep at least 6 decimals.
    let w = std::fs::read_to_string(dir.join("run.weights")).unwrap();
    assert!(
        w.lines().all(|l| l.split(' ').next().unwrap().len() >= 8),
        "{w}"
    );

    // The same seed gives the same files; furthest-first finds the same phases.
    let again = dir.join("again");
    let o = tracekit([
        "simpoint",
        s(&bb),
        "--max-k",
        "10",
        "--init-seeds",
        "30",
        "--out",
        s(&again),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    for ext in ["simpoints", "weights"] {
        assert_eq!(
            std::fs::read(dir.join(format!("run.{ext}"))).unwrap(),
            std::fs::read(dir.join(format!("again.{ext}"))).unwrap()
        );
    }
    let ff = dir.join("ff");
    let o = tracekit([
        "simpoint",
        s(&bb),
        "--max-k",
        "10",
        "--init",
        "furthest",
        "--seed",
        "9",
        "--out",
        s(&ff),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let (points, weights) = read_outputs(&ff);
    check_phases(&phases, &points, &weights, count);
}

#[test]
fn weights_by_instructions() {
    let dir = scratch("instr");
    // Phase 1's slices are three times as long: by instructions it weighs 3× per slice.
    let phases: Vec<usize> = (0..60).map(|i| usize::from(i % 3 == 0)).collect();
    let bb = dir.join("run.bb");
    std::fs::write(
        &bb,
        phased_bb(&phases, |p| if p == 1 { 3.0 } else { 1.0 }, 2),
    )
    .unwrap();
    let o = tracekit([
        "simpoint",
        s(&bb),
        "--max-k",
        "5",
        "--weight-by-instructions",
        "--json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_str(stdout(&o).trim()).unwrap();
    assert_eq!(v["k"], 2);
    assert_eq!(v["slices"], 60);
    assert_eq!(v["scores"].as_array().unwrap().len(), 5);
    let (points, weights) = read_outputs(&dir.join("run"));
    // 20 slices of length 3 and 40 of length 1 (±5 % noise): shares 0.6 and 0.4, roughly.
    let total: f64 = phases.iter().map(|&p| if p == 1 { 3.0 } else { 1.0 }).sum();
    for &(slice, cluster) in &points {
        let w = weights.iter().find(|w| w.1 == cluster).unwrap().0;
        let p = phases[slice as usize];
        let expected = phases.iter().filter(|&&q| q == p).count() as f64
            * if p == 1 { 3.0 } else { 1.0 }
            / total;
        assert!((w - expected).abs() < 0.02, "{w} vs {expected}");
    }
}

#[test]
fn per_thread_files_are_concatenated() {
    let dir = scratch("threads");
    // Thread 0 alternates two phases; thread 1 runs one phase throughout but with a
    // phase change of its own every 10 slices: the global phase is the pair.
    let t0: Vec<usize> = (0..80).map(|i| i % 2).collect();
    let t1: Vec<usize> = (0..80).map(|i| 2 + (i / 10) % 2).collect();
    let a = dir.join("run.T0.bb");
    let b = dir.join("run.T1.bb");
    std::fs::write(&a, phased_bb(&t0, |_| 1.0, 3)).unwrap();
    std::fs::write(&b, phased_bb(&t1, |_| 1.0, 4)).unwrap();
    let out = dir.join("run.global");
    let o = tracekit([
        "simpoint",
        s(&a),
        s(&b),
        "--max-k",
        "8",
        "--init-seeds",
        "30",
        "--out",
        s(&out),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let global: Vec<usize> = t0.iter().zip(&t1).map(|(x, y)| x * 4 + y).collect();
    let (points, weights) = read_outputs(&out);
    check_phases(&global, &points, &weights, |_| 0.25);

    // Several files need --out; different slice counts are an error.
    let o = tracekit(["simpoint", s(&a), s(&b), "--max-k", "8"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let short = dir.join("short.bb");
    std::fs::write(&short, phased_bb(&t1[..50], |_| 1.0, 4)).unwrap();
    let o = tracekit([
        "simpoint",
        s(&a),
        s(&short),
        "--max-k",
        "8",
        "--out",
        s(&out),
        "--force",
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("ends after 50 slices"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn errors_and_limits() {
    let dir = scratch("errors");
    let empty = dir.join("empty.bb");
    std::fs::write(&empty, "# nothing\nM: 0x10 1\n").unwrap();
    let o = tracekit(["simpoint", s(&empty), "--max-k", "3"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("no slices"), "{}", stderr(&o));
    assert!(!dir.join("empty.simpoints").exists());

    let bb = dir.join("three.bb");
    std::fs::write(&bb, "T:1:10\nT:1:10\nT:2:10\n").unwrap();
    for (args, code) in [
        (&["--max-k", "0"][..], 2),
        (&["--max-k", "3", "--bic-threshold", "1.5"], 2),
        (&["--max-k", "3", "--dim", "0"], 2),
        (&["--max-k", "3", "--init-seeds", "0"], 2),
        (&["--max-k", "3", "--init", "nope"], 2),
    ] {
        let o = tracekit([&["simpoint", s(&bb)], args].concat());
        assert_eq!(o.status.code(), Some(code), "{args:?}: {}", stderr(&o));
    }
    // More clusters than slices: k stops at slices − 1, with a note.
    let o = tracekit(["simpoint", s(&bb), "--max-k", "30"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stderr(&o).contains("k goes up to 2"), "{}", stderr(&o));
    let (points, _) = read_outputs(&dir.join("three"));
    assert_eq!(points, vec![(0, 0), (2, 1)]);

    // A damaged .bb: exit 1, naming the line; nothing written.
    let bad = dir.join("bad.bb");
    std::fs::write(&bad, "T:1:10\nT:0:5\n").unwrap();
    let o = tracekit(["simpoint", s(&bad), "--max-k", "3"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("line 2"), "{}", stderr(&o));
    assert!(!dir.join("bad.simpoints").exists());
    let o = tracekit(["simpoint", s(&dir.join("missing.bb")), "--max-k", "3"]);
    assert_eq!(o.status.code(), Some(1));
}

/// A `.bb` with markers: a loop header at 0x401000 bounds slices 0–2, then 0x402000.
const MARKED: &str = "\
T:1:100 :2:50
M: 0x401000 4
T:1:200 :3:40
M: 0x401000 9
T:2:300
M: 0x402000 2
T:1:60 :3:20
";

#[test]
fn regions_by_hand() {
    let dir = scratch("regions");
    let bb = dir.join("run.T3.bb");
    std::fs::write(&bb, MARKED).unwrap();
    std::fs::write(dir.join("run.T3.simpoints"), "1 0\n0 1\n3 2\n").unwrap();
    std::fs::write(dir.join("run.T3.weights"), "0.5 0\n0.25 1\n0.25 2\n").unwrap();
    let o = tracekit(["regions", s(&bb)]);
    assert!(o.status.success(), "{}", stderr(&o));
    // Lengths 150, 240, 300, 80 (total 770); multiplier = weight × 770 / length.
    // Slice 1 runs from 0x401000's 4th execution to its 9th: 5 more executions.
    let expected = "\
comment,thread-id,region-id,start-pc,start-pc-count,end-pc,end-pc-count,end-pc-relative-count,region-length,region-weight,region-multiplier,region-type
cluster 0 from slice 1,3,1,0x401000,4,0x401000,9,5,240,0.50000,1.604,simulation
cluster 1 from slice 0,3,2,0x0,0,0x401000,4,,150,0.25000,1.283,simulation
cluster 2 from slice 3,3,3,0x402000,2,0x0,0,,80,0.25000,2.406,simulation
";
    assert_eq!(stdout(&o), expected);

    // -o, --thread-id and explicit files.
    let csv = dir.join("out.csv");
    std::fs::copy(dir.join("run.T3.simpoints"), dir.join("s.txt")).unwrap();
    let o = tracekit([
        "regions",
        s(&bb),
        "--simpoints",
        s(&dir.join("s.txt")),
        "--weights",
        s(&dir.join("run.T3.weights")),
        "--thread-id",
        "global",
        "-o",
        s(&csv),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(
        std::fs::read_to_string(&csv).unwrap(),
        expected.replace(",3,", ",global,")
    );

    // A simulation point past the last slice, a syntax error, a cluster without weight.
    std::fs::write(dir.join("s.txt"), "9 0\n0 1\n3 2\n").unwrap();
    let o = tracekit(["regions", s(&bb), "--simpoints", s(&dir.join("s.txt"))]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("slice 9"), "{}", stderr(&o));
    std::fs::write(dir.join("s.txt"), "1 0\n0 x\n").unwrap();
    let o = tracekit(["regions", s(&bb), "--simpoints", s(&dir.join("s.txt"))]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("line 2, column 3"), "{}", stderr(&o));
    std::fs::write(dir.join("s.txt"), "1 0\n0 1\n3 2\n2 3\n").unwrap();
    let o = tracekit([
        "regions",
        s(&bb),
        "--simpoints",
        s(&dir.join("s.txt")),
        "-o",
        s(&dir.join("no.csv")),
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("cluster 3 has a simulation point but no weight"),
        "{}",
        stderr(&o)
    );
    assert!(!dir.join("no.csv").exists());
}

#[test]
fn simpoint_then_regions() {
    // The two commands chained: every region's length is its slice's total.
    let dir = scratch("chain");
    let phases: Vec<usize> = (0..90).map(|i| (i / 5) % 3).collect();
    let text = phased_bb(&phases, |_| 1.0, 5);
    let bb = dir.join("run.bb");
    std::fs::write(&bb, &text).unwrap();
    let o = tracekit(["simpoint", s(&bb), "--max-k", "6", "--init-seeds", "20"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let o = tracekit(["regions", s(&bb)]);
    assert!(o.status.success(), "{}", stderr(&o));
    let totals: Vec<u64> = text
        .lines()
        .filter(|l| l.starts_with('T'))
        .map(|l| {
            l[1..]
                .split(' ')
                .map(|p| p.rsplit(':').next().unwrap().parse::<u64>().unwrap())
                .sum()
        })
        .collect();
    let rows: Vec<Vec<String>> = stdout(&o)
        .lines()
        .skip(1)
        .map(|l| l.split(',').map(str::to_owned).collect())
        .collect();
    assert_eq!(rows.len(), 3);
    for r in rows {
        let slice: usize = r[0].rsplit(' ').next().unwrap().parse().unwrap();
        assert_eq!(r[1], "global");
        assert_eq!(r[8].parse::<u64>().unwrap(), totals[slice]);
        // The markers around slice i are the M lines before and after it (count = i, i+1).
        if slice > 0 {
            assert_eq!(r[4], slice.to_string());
        }
        assert_eq!(
            r[6],
            if slice + 1 < 90 {
                (slice + 1).to_string()
            } else {
                "0".into()
            }
        );
    }
}

#[test]
fn bbv_then_simpoint_then_regions() {
    // A real trace through the whole pipeline: x64dbg's basic.trace64 spends all its slices
    // of ~20 instructions in one loop block, so every vector is the same fraction vector:
    // one phase, one simulation point (slice 0) of weight 1, and its region's markers are
    // the `M:` lines around slice 0.
    let dir = scratch("pipeline");
    let bb = dir.join("basic.bb");
    let trace = testdata("x64dbg/basic.trace64");
    let o = tracekit(["bbv", s(&trace), "--slice", "20", "--global", "-o", s(&bb)]);
    assert!(o.status.success(), "{}", stderr(&o));
    let o = tracekit(["simpoint", s(&bb), "--max-k", "10"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let (points, weights) = read_outputs(&dir.join("basic"));
    assert_eq!(points, vec![(0, 0)]);
    assert_eq!(weights, vec![(1.0, 0)]);
    let o = tracekit(["regions", s(&bb)]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = std::fs::read_to_string(&bb).unwrap();
    let first_total: u64 = text.lines().next().unwrap()[1..]
        .split(' ')
        .map(|p| p.rsplit(':').next().unwrap().parse::<u64>().unwrap())
        .sum();
    let marker: Vec<&str> = text.lines().nth(1).unwrap().split(' ').collect();
    let slices = text.lines().filter(|l| l.starts_with('T')).count();
    let row = stdout(&o).lines().nth(1).unwrap().to_owned();
    assert_eq!(
        row,
        format!(
            "cluster 0 from slice 0,global,1,0x0,0,{},{},,{first_total},1.00000,{:.3},simulation",
            marker[1],
            marker[2],
            1100.0 / first_total as f64
        )
    );
    assert!(slices > 1);
}
