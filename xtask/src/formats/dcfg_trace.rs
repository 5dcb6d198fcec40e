//! xtask hooks for dcfg-trace: fixtures made by the crate's encoder and writer (plus a few
//! hand-written ones for the specification's examples and tolerated dialect), a synthetic
//! Huffman-coded trace, and the benchmark rows (decoding on one and two threads, and the
//! expansion of nested repeats).

use std::hint::black_box;
use std::sync::Arc;

use dcfg_trace::encode::{EncodeOptions, ProcessEdges, ThreadEdges, encode};
use dcfg_trace::read::{ReadOptions, Trace};
use dcfg_trace::synth::{Cfg, repeat_trace};
use dcfg_trace::table::{Code, TransitionRow};
use dcfg_trace::write::{ChunkData, ProcessData, ThreadData, TraceFile};

use super::FormatTasks;
use crate::bench::{BenchCase, BenchConfig};
use crate::fixtures::Fixtures;

pub const TASKS: FormatTasks = FormatTasks {
    name: "dcfg-trace",
    fixtures: Some(fixtures),
    synth: Some(synth),
    bench: Some(bench),
};

fn row(current: u64, code: &str, next: &[u64]) -> TransitionRow {
    TransitionRow {
        current,
        code: Code::parse(code.as_bytes()).expect("fixture codes are valid"),
        next: next.to_vec(),
    }
}

fn chunk(pre: u64, instrs: u64, edges: u64, first: u64, seq: &str) -> ChunkData {
    ChunkData {
        preceding_instr_count: pre,
        instr_count: instrs,
        edge_count: edges,
        first_edge_id: Some(first),
        sequence: seq.to_owned(),
    }
}

/// A one-process, one-thread file.
fn single(
    dictionary: &[(&str, &str)],
    rows: Vec<TransitionRow>,
    chunks: Vec<ChunkData>,
) -> Vec<u8> {
    TraceFile {
        major: 1,
        minor: 0,
        processes: vec![ProcessData {
            pid: 1000,
            dictionary: dictionary
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
            transitions: rows,
            threads: vec![ThreadData { thread: 0, chunks }],
        }],
    }
    .to_vec()
}

/// The example table of the specification's section 3.5.
fn spec_rows() -> Vec<TransitionRow> {
    vec![
        row(123, "0", &[124]),
        row(123, "1", &[125]),
        row(124, "", &[456]),
        row(125, "0", &[543]),
        row(125, "10", &[542, 549]),
        row(125, "11", &[540, 541]),
    ]
}

/// Two-successor table for the negative sequence fixtures: 1 →"0" 1, 1 →"1" 2, 2 →"" 1.
fn small_rows() -> Vec<TransitionRow> {
    vec![row(1, "0", &[1]), row(1, "1", &[2]), row(2, "", &[1])]
}

const TOLERANT: &str = r#"{ "MAJOR_VERSION" : "0x1", "MINOR_VERSION" : 0, "COMMENT" : ["skipped", {"x": [1, 2]}],
  "PROCESSES" : [
    [ "PROCESS_ID", "FUTURE_COLUMN", "STRING_DICTIONARY", "TRANSITION_TABLE", "THREAD_DATA" ],
    [ "0x10", null, { "k" : "\u0041B" },
      [ [ "CURRENT_EDGE_ID", "TRANSITION_CODE", "NEXT_EDGE_IDS" ],
        [ "0x1", "0", [ 1 ] ],
        [ 1, "1", [ "0x2" ] ],
        [ 2, "", [ 1 ] ] ],
      [ [ "THREAD_ID", "TRACE_DATA" ],
        [ "0x0", [ [ "PRECEDING_INSTR_COUNT", "INSTR_COUNT", "EDGE_COUNT", "FIRST_EDGE_ID", "EDGE_ID_SEQUENCE" ],
                   [ 0, "0x6", 6, 1, "g A\n<k>" ],
                   [ "6", 0, 0 ],
                   [ 6, 1, 1, 2, "" ],
                   [ 7, 3, "0x3", "0x1", "(3*w)" ] ] ],
        [ 3, [ [ "PRECEDING_INSTR_COUNT", "INSTR_COUNT", "EDGE_COUNT", "FIRST_EDGE_ID", "EDGE_ID_SEQUENCE", "EXTRA" ] ] ] ] ]
  ] }
"#;

/// Every thread's edges of `dcfg` in an order that takes each edge as often as its count
/// for that thread: an Euler trail from START (Hierholzer's algorithm). None when a thread
/// has none (the synthetic DCFGs can count a self-loop on a block the thread never
/// reaches).
fn euler_trails(dcfg: &dcfg::Dcfg) -> Option<Vec<ProcessEdges>> {
    let mut out = Vec::new();
    for p in &dcfg.processes {
        let threads = p.edges().map(|e| e.counts.len()).max().unwrap_or(0);
        let mut trails = Vec::new();
        for thread in 0..threads {
            let mut out_edges: std::collections::BTreeMap<u64, Vec<(u64, u64)>> =
                std::collections::BTreeMap::new();
            let mut total = 0;
            for e in p.edges() {
                for _ in 0..e.count_for_thread(thread) {
                    out_edges
                        .entry(e.source)
                        .or_default()
                        .push((e.id, e.target));
                    total += 1;
                }
            }
            // Popped from the end: the lowest edge id is taken first.
            for v in out_edges.values_mut() {
                v.sort_unstable_by(|a, b| b.cmp(a));
            }
            let start = dcfg
                .special_node_id(dcfg::SpecialKind::Start)
                .expect("the synthetic DCFG names START");
            let mut stack: Vec<(u64, u64)> = vec![(0, start)];
            let mut trail = Vec::new();
            while let Some(&(edge, node)) = stack.last() {
                match out_edges.get_mut(&node).and_then(Vec::pop) {
                    Some(next) => stack.push(next),
                    None => {
                        trail.push(edge);
                        stack.pop();
                    }
                }
            }
            trail.pop(); // the sentinel
            trail.reverse();
            if trail.len() != total {
                return None;
            }
            trails.push(ThreadEdges {
                thread: thread as u64,
                edges: trail,
            });
        }
        out.push(ProcessEdges {
            pid: p.id,
            threads: trails,
        });
    }
    Some(out)
}

/// One run as Pin's DCFG tool writes it: `dcfg/run.dcfg.json` and
/// `dcfg-trace/run.trace.json`, the same run's edges, each thread's taken as often as the
/// DCFG counts them, so `--dcfg` joins, `validate --dcfg` and `bbv --loop-bounded` work on
/// the pair. Seed 2: the first whose every thread has an Euler trail.
fn run_pair() -> (Vec<u8>, Vec<u8>) {
    let dcfg = dcfg::testgen::synthetic(dcfg::testgen::SynthConfig {
        images: 2,
        routines_per_image: 2,
        threads: 2,
        seed: 2,
    });
    let source_instrs: std::collections::HashMap<(u64, u64), u64> = dcfg
        .processes
        .iter()
        .flat_map(|p| {
            let blocks: std::collections::HashMap<u64, u64> = p
                .blocks()
                .map(|(_, b)| (b.id, u64::from(b.num_instrs)))
                .collect();
            p.edges()
                .map(|e| ((p.id, e.id), blocks.get(&e.source).copied().unwrap_or(0)))
                .collect::<Vec<_>>()
        })
        .collect();
    let trace = encode(
        &euler_trails(&dcfg).expect("seed 2 has Euler trails"),
        |pid, e| source_instrs.get(&(pid, e)).copied().unwrap_or(0),
        &EncodeOptions {
            chunk_instrs: 200,
            ..EncodeOptions::default()
        },
    );
    (dcfg.to_vec(), trace.to_vec())
}

fn fixtures(fx: &mut Fixtures) {
    let d = "dcfg-trace";
    let (run_dcfg, run_trace) = run_pair();
    fx.add("dcfg/run.dcfg.json", run_dcfg);
    fx.add(format!("{d}/run.trace.json"), run_trace);
    // A realistic small trace: a walk over a 40-edge graph, Huffman codes from the
    // observed successors, chunks of about 100 instructions.
    let cfg = Cfg::new(40, 1);
    let walk = cfg.walk(400, 2);
    let basic = encode(
        &[ProcessEdges {
            pid: 1000,
            threads: vec![ThreadEdges {
                thread: 0,
                edges: walk.clone(),
            }],
        }],
        |_, e| cfg.instrs_of(e),
        &EncodeOptions {
            chunk_instrs: 100,
            ..EncodeOptions::default()
        },
    );
    fx.add(format!("{d}/basic.trace.json"), basic.to_vec());

    // Two processes, three threads, chain folding.
    let cfg2 = Cfg::new(25, 3);
    let multi = encode(
        &[
            ProcessEdges {
                pid: 100,
                threads: vec![
                    ThreadEdges {
                        thread: 0,
                        edges: cfg.walk(150, 4),
                    },
                    ThreadEdges {
                        thread: 2,
                        edges: cfg.walk(90, 5),
                    },
                ],
            },
            ProcessEdges {
                pid: 200,
                threads: vec![ThreadEdges {
                    thread: 1,
                    edges: cfg2.walk(120, 6),
                }],
            },
        ],
        |pid, e| {
            if pid == 100 {
                cfg.instrs_of(e)
            } else {
                cfg2.instrs_of(e)
            }
        },
        &EncodeOptions {
            chunk_instrs: 200,
            fold_chains: true,
            ..EncodeOptions::default()
        },
    );
    fx.add(format!("{d}/multi.trace.json"), multi.to_vec());

    // A loop-heavy trace with every compression on.
    let mut looped = Vec::new();
    for i in 0..300u64 {
        looped.extend([1, 2, 3, 4, 2, 3, 4, 2, 3, 4, 5]);
        looped.extend([6, 7 + (i / 7) % 3, 8]);
    }
    looped.push(9);
    let compressed = encode(
        &[ProcessEdges {
            pid: 7,
            threads: vec![ThreadEdges {
                thread: 0,
                edges: looped,
            }],
        }],
        |_, e| e % 4 + 1,
        &EncodeOptions {
            chunk_instrs: 1000,
            fold_chains: true,
            repeats: true,
            dictionary: true,
        },
    );
    fx.add(format!("{d}/compressed.trace.json"), compressed.to_vec());

    // The specification's examples: the section 3.5 table (example 1: bits "110" from 123;
    // example 2: bit "0"), and the section 3.4 dictionary used through references.
    fx.add(
        format!("{d}/spec.trace.json"),
        single(
            &[
                ("a", "bks2hD7kB+KDk87(6*AB)Aw3ABD9"),
                ("b", "KkDk123(42*(25*a))45690D<a>7Fjdkpm"),
            ],
            spec_rows(),
            vec![
                chunk(0, 7, 4, 123, "w"),
                chunk(7, 3, 3, 123, "A"),
                chunk(10, 3, 3, 123, "<a>"),
                chunk(13, 3, 3, 123, "(2*<b>)"),
            ],
        ),
    );

    // Chunks that do not chain (a warning, not an error).
    let mut gap = basic.clone();
    if let Some(c) = gap.processes[0].threads[0].chunks.get_mut(2) {
        c.preceding_instr_count += 1000;
    }
    fx.add(format!("{d}/gap.trace.json"), gap.to_vec());

    // A repeat bomb that decodes at once: only EDGE_COUNT edges are read.
    fx.add(
        format!("{d}/bomb.trace.json"),
        single(
            &[("x", "(1000000000*<y>)"), ("y", "(1000000000*A)")],
            small_rows(),
            vec![
                chunk(0, 5, 6, 1, "(1000000000*(1000000000*A))"),
                chunk(5, 5, 6, 1, "(1000000000*<x>)"),
            ],
        ),
    );
    fx.add(
        format!("{d}/tolerant.trace.json"),
        TOLERANT.as_bytes().to_vec(),
    );

    // Negative fixtures, named by the error they trigger.
    let bad_seq = |seq: &str| single(&[], small_rows(), vec![chunk(0, 3, 3, 1, seq)]);
    fx.add(
        format!("{d}/err-cycle.trace.json"),
        single(
            &[("a", "A<b>"), ("b", "(2*<c>)"), ("c", "<a>")],
            small_rows(),
            vec![chunk(0, 1, 1, 1, "")],
        ),
    );
    fx.add(
        format!("{d}/err-count-overflow.trace.json"),
        bad_seq("(99999999999999999999*A)"),
    );
    fx.add(format!("{d}/err-bad-char.trace.json"), bad_seq("AB/C"));
    fx.add(format!("{d}/err-unbalanced.trace.json"), bad_seq("A(3*B"));
    fx.add(format!("{d}/err-missing-star.trace.json"), bad_seq("A(3B)"));
    fx.add(format!("{d}/err-unknown-key.trace.json"), bad_seq("A<zz>"));
    fx.add(
        format!("{d}/err-unknown-transition.trace.json"),
        single(
            &[],
            vec![
                row(1, "0", &[2]),
                row(1, "11", &[3]),
                row(2, "", &[1]),
                row(3, "", &[1]),
            ],
            vec![chunk(0, 3, 4, 1, "g")],
        ),
    );
    fx.add(
        format!("{d}/err-not-prefix-free.trace.json"),
        single(
            &[],
            vec![row(1, "0", &[2]), row(1, "01", &[3])],
            vec![chunk(0, 1, 1, 1, "")],
        ),
    );
    fx.add(
        format!("{d}/err-empty-code.trace.json"),
        single(
            &[],
            vec![row(1, "", &[2]), row(1, "1", &[3])],
            vec![chunk(0, 1, 1, 1, "")],
        ),
    );
    fx.add(
        format!("{d}/err-overshoot.trace.json"),
        single(&[], spec_rows(), vec![chunk(0, 3, 3, 123, "w")]),
    );
    fx.add(
        format!("{d}/err-out-of-bits.trace.json"),
        single(
            &[],
            vec![row(1, "1111111", &[2]), row(1, "0", &[3])],
            vec![chunk(0, 2, 2, 1, "-")],
        ),
    );
    fx.add(
        format!("{d}/err-no-successor.trace.json"),
        single(&[], spec_rows(), vec![chunk(0, 3, 4, 123, "A")]),
    );
    // Cut inside the second-to-last chunk row.
    let text = basic.to_vec();
    let rows: Vec<usize> = text
        .windows(2)
        .enumerate()
        .filter(|(_, w)| w == b"\n[")
        .map(|(i, _)| i)
        .collect();
    let cut = rows[rows.len() - 2] + 6;
    fx.add(
        format!("{d}/err-truncated.trace.json"),
        text[..cut].to_vec(),
    );
    fx.add(
        format!("{d}/err-float.trace.json"),
        String::from_utf8(single(&[], small_rows(), vec![chunk(0, 3, 3, 1, "A")]))
            .expect("writer output is UTF-8")
            .replace("[0,3,3,1,", "[0,1.5,3,1,")
            .into_bytes(),
    );
}

fn synth(records: u64, seed: u64) -> Vec<u8> {
    Cfg::new(4096, seed)
        .trace(records, u64::MAX, 1_000_000, seed)
        .to_vec()
}

fn decode_all(bytes: &[u8]) -> u64 {
    let trace = Trace::parse(bytes, ReadOptions::default()).expect("benchmark input parses");
    let mut buf = Vec::new();
    let (mut n, mut sum) = (0u64, 0u64);
    for p in &trace.processes {
        for t in &p.threads {
            for c in &t.chunks {
                buf.clear();
                c.decode_into(&mut buf).expect("benchmark input decodes");
                n += buf.len() as u64;
                sum = buf.iter().fold(sum, |s, &e| s.wrapping_add(e));
                sum = sum.wrapping_add(c.preceding_instr_count ^ c.instr_count);
            }
        }
    }
    black_box(sum);
    n
}

fn decode_parallel(bytes: &[u8], workers: usize) -> u64 {
    let trace = Trace::parse(bytes, ReadOptions::default()).expect("benchmark input parses");
    let mut n = 0u64;
    for p in &trace.processes {
        for t in &p.threads {
            let parts = t.map_parallel(workers, |_, r| {
                let e = r.expect("benchmark input decodes");
                (
                    e.len() as u64,
                    e.iter().fold(0u64, |s, &x| s.wrapping_add(x)),
                )
            });
            for (k, s) in parts {
                n += k;
                black_box(s);
            }
        }
    }
    n
}

fn expand_all(bytes: &[u8]) -> u64 {
    let trace = Trace::parse(bytes, ReadOptions::default()).expect("benchmark input parses");
    let mut n = 0u64;
    for p in &trace.processes {
        for t in &p.threads {
            for c in &t.chunks {
                let prog = p
                    .process
                    .dictionary
                    .compile(&c.sequence, &c.context(), c.sequence_offset.0)
                    .expect("benchmark input compiles");
                let (chars, sum) =
                    dcfg_trace::expand::count_chars(&prog, &p.process.dictionary, u64::MAX);
                n += chars;
                black_box(sum);
            }
        }
    }
    n
}

/// `bbv` of the Huffman trace with its DCFG (written to a temporary file once), with the
/// chunks decoded on every core (`None`, as `tracekit bbv` does) or on `workers` threads;
/// units are the edges (counted once, outside the timing).
fn bbv_case(trace: &Arc<Vec<u8>>, workers: Option<usize>) -> BenchCase {
    let dir = std::env::temp_dir().join(format!("tracekit-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let dcfg = dir.join("bench.dcfg.json");
    let cfg = Cfg::new(4096, 1);
    let instrs = |e| cfg.instrs_of(e);
    std::fs::write(
        &dcfg,
        dcfg_trace::synth::dcfg_json(&[(4242, 4096, &instrs)], None),
    )
    .unwrap();
    let edges = decode_all(trace);
    let name = match workers {
        None => "dcfg-trace bbv (with DCFG)".into(),
        Some(1) => "dcfg-trace bbv (with DCFG), 1 thread".into(),
        Some(n) => format!("dcfg-trace bbv (with DCFG), {n} threads"),
    };
    BenchCase::shared(name, trace, "edges", move |bytes| {
        crate::bench::run_bbv("dcfg-trace", bytes, Some(&dcfg), workers);
        edges
    })
}

fn bench(config: &BenchConfig) -> Vec<BenchCase> {
    let huffman = Arc::new(
        Cfg::new(4096, 1)
            .trace(u64::MAX, config.mib << 20, 1_000_000, 7)
            .to_vec(),
    );
    let repeats = Arc::new(repeat_trace(config.mib << 20, 3).to_vec());
    vec![
        BenchCase {
            name: "dcfg-trace decode, 1 thread".into(),
            input: Arc::clone(&huffman),
            unit: "edges",
            run: Box::new(decode_all),
        },
        BenchCase {
            name: "dcfg-trace decode, 2 threads".into(),
            input: Arc::clone(&huffman),
            unit: "edges",
            run: Box::new(|b| decode_parallel(b, 2)),
        },
        bbv_case(&huffman, Some(1)),
        bbv_case(&huffman, None),
        BenchCase {
            name: "dcfg-trace expand nested repeats".into(),
            input: repeats,
            unit: "chars",
            run: Box::new(expand_all),
        },
    ]
}
