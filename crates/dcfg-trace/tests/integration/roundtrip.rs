//! decode(encode(s)) == s, and read(write(model)) == model.

use dcfg_trace::decode_all;
use dcfg_trace::encode::{EncodeOptions, ProcessEdges, ThreadEdges, encode};
use dcfg_trace::read::{ReadOptions, Trace};
use dcfg_trace::write::TraceFile;
use quickcheck::{QuickCheck, TestResult};

fn all_options() -> Vec<EncodeOptions> {
    let mut v = Vec::new();
    for bits in 0..8u8 {
        for chunk_instrs in [0, 1, 7, 50] {
            v.push(EncodeOptions {
                chunk_instrs,
                fold_chains: bits & 1 == 1,
                repeats: bits & 2 == 2,
                dictionary: bits & 4 == 4,
            });
        }
    }
    v
}

fn roundtrip(threads: Vec<Vec<u64>>, opts: &EncodeOptions) -> Result<(), String> {
    let input = [ProcessEdges {
        pid: 3,
        threads: threads
            .iter()
            .enumerate()
            .map(|(i, e)| ThreadEdges {
                thread: i as u64,
                edges: e.clone(),
            })
            .collect(),
    }];
    let file = encode(&input, |_, e| e % 5, opts).to_vec();
    let got = decode_all(&file).map_err(|e| format!("{opts:?}: {e}"))?;
    if got != threads {
        return Err(format!("{opts:?}: {threads:?} decoded as {got:?}"));
    }
    // Chunks chain exactly.
    let t = Trace::parse(&file, ReadOptions::default()).unwrap();
    for th in &t.processes[0].threads {
        if !th.chain_gaps().is_empty() {
            return Err(format!("{opts:?}: gaps {:?}", th.chain_gaps()));
        }
    }
    Ok(())
}

#[test]
fn arbitrary_sequences_round_trip_with_every_option() {
    fn prop(threads: Vec<Vec<u8>>, small: bool) -> TestResult {
        let threads: Vec<Vec<u64>> = threads
            .into_iter()
            .take(3)
            .map(|t| {
                t.into_iter()
                    .map(|b| u64::from(if small { b % 4 } else { b }) + 1)
                    .collect()
            })
            .collect();
        for opts in all_options() {
            if let Err(e) = roundtrip(threads.clone(), &opts) {
                return TestResult::error(e);
            }
        }
        TestResult::passed()
    }
    QuickCheck::new()
        .tests(60)
        .quickcheck(prop as fn(Vec<Vec<u8>>, bool) -> TestResult);
}

#[test]
fn structured_sequences_round_trip() {
    // Deterministic chains (zero-bit codes, folded groups), loops (repeats), a thread that
    // ends inside what would be a chain, long random walks (long Huffman codes), and a
    // 40-way indirect branch with Fibonacci frequencies.
    let cfg = dcfg_trace::synth::Cfg::new(300, 9);
    let mut fib_branch = Vec::new();
    let (mut a, mut b) = (1usize, 1usize);
    for target in 0..25u64 {
        for _ in 0..a.min(3000) {
            fib_branch.extend([1000, 2000 + target]);
        }
        (a, b) = (b, a + b);
    }
    let cases: Vec<Vec<Vec<u64>>> = vec![
        vec![vec![1, 2, 3, 4, 5, 6, 7, 8]],
        vec![[1u64, 2, 3].repeat(50), vec![2, 3]],
        vec![[1u64, 2, 3, 4, 2, 3, 4, 5].repeat(30)],
        vec![cfg.walk(5000, 1), cfg.walk(3000, 2)],
        vec![fib_branch],
        vec![vec![], vec![5], vec![5, 5, 5, 5]],
    ];
    for threads in cases {
        for opts in all_options() {
            roundtrip(threads.clone(), &opts).unwrap();
        }
    }
}

#[test]
fn folding_makes_multi_edge_groups_and_compression_shrinks() {
    let threads = [[1u64, 2, 3, 4, 5, 6, 2, 3, 4, 5, 7].repeat(100)];
    let input = [ProcessEdges {
        pid: 1,
        threads: vec![ThreadEdges {
            thread: 0,
            edges: threads[0].clone(),
        }],
    }];
    let plain = encode(
        &input,
        |_, _| 1,
        &EncodeOptions {
            chunk_instrs: 0,
            ..EncodeOptions::default()
        },
    );
    let folded = encode(
        &input,
        |_, _| 1,
        &EncodeOptions {
            chunk_instrs: 0,
            fold_chains: true,
            ..EncodeOptions::default()
        },
    );
    assert!(
        folded.processes[0]
            .transitions
            .iter()
            .any(|r| r.next.len() > 1)
    );
    assert!(
        plain.processes[0]
            .transitions
            .iter()
            .all(|r| r.next.len() == 1)
    );
    let all = encode(
        &input,
        |_, _| 1,
        &EncodeOptions {
            chunk_instrs: 0,
            fold_chains: true,
            repeats: true,
            dictionary: false,
        },
    );
    let seq = |f: &TraceFile| f.processes[0].threads[0].chunks[0].sequence.clone();
    assert!(seq(&all).contains('('), "{}", seq(&all));
    assert!(seq(&all).len() < seq(&folded).len());
    // Deterministic output.
    assert_eq!(
        all.to_vec(),
        encode(
            &input,
            |_, _| 1,
            &EncodeOptions {
                chunk_instrs: 0,
                fold_chains: true,
                repeats: true,
                dictionary: false
            }
        )
        .to_vec()
    );
}

#[test]
fn chunks_are_cut_by_instruction_count() {
    let edges: Vec<u64> = (0..100).map(|i| i % 10 + 1).collect();
    let input = [ProcessEdges {
        pid: 1,
        threads: vec![ThreadEdges { thread: 0, edges }],
    }];
    let f = encode(
        &input,
        |_, _| 3,
        &EncodeOptions {
            chunk_instrs: 30,
            ..EncodeOptions::default()
        },
    );
    let chunks = &f.processes[0].threads[0].chunks;
    // 3 instructions per edge, cut at 30: ten edges per chunk.
    assert_eq!(chunks.len(), 10);
    for (i, c) in chunks.iter().enumerate() {
        assert_eq!(
            (c.preceding_instr_count, c.instr_count, c.edge_count),
            (30 * i as u64, 30, 10)
        );
        assert_eq!(c.first_edge_id, Some(1));
    }
}

/// read(write(model)) == model for arbitrary models (sequences valid or not: the reader
/// does not decode them), and write(read(bytes)) == bytes for every canonical fixture.
#[test]
fn model_round_trips() {
    fn prop(
        pids: Vec<(u64, Vec<(u64, Vec<(u64, u64, u64, Option<u64>, String)>)>)>,
        dict: Vec<u8>,
    ) -> bool {
        use dcfg_trace::write::{ChunkData, ProcessData, ThreadData};
        let alphabet = |s: &str| -> String {
            s.bytes()
                .map(|b| char::from(dcfg_trace::base64::char_of(b)))
                .collect()
        };
        let model = TraceFile {
            major: 1,
            minor: 0,
            processes: pids
                .into_iter()
                .take(4)
                .map(|(pid, threads)| ProcessData {
                    pid,
                    dictionary: dict
                        .iter()
                        .take(3)
                        .enumerate()
                        .map(|(i, b)| (format!("k{i}"), alphabet(&b.to_string())))
                        .collect(),
                    transitions: vec![],
                    threads: threads
                        .into_iter()
                        .map(|(thread, chunks)| ThreadData {
                            thread,
                            chunks: chunks
                                .into_iter()
                                .map(|(a, b, c, f, s)| ChunkData {
                                    preceding_instr_count: a,
                                    instr_count: b,
                                    edge_count: c,
                                    first_edge_id: f,
                                    sequence: s,
                                })
                                .collect(),
                        })
                        .collect(),
                })
                .collect(),
        };
        let bytes = model.to_vec();
        let back = TraceFile::from_trace(&Trace::parse(&bytes, ReadOptions::default()).unwrap());
        back == model
    }
    // Small sizes: the nested vectors grow with the product of their lengths.
    QuickCheck::new()
        .tests(200)
        .rng(quickcheck::Gen::new(8))
        .quickcheck(prop as fn(_, _) -> bool);
    for name in ["basic", "multi", "compressed", "spec", "gap", "bomb"] {
        let bytes = crate::testdata(&format!("{name}.trace.json"));
        let t = Trace::parse(&bytes, ReadOptions::default()).unwrap();
        assert_eq!(TraceFile::from_trace(&t).to_vec(), bytes, "{name}");
    }
}

#[test]
fn fuzz_entry_points_never_panic() {
    fn prop(data: Vec<u8>) -> bool {
        dcfg_trace::fuzz_expand(&data);
        dcfg_trace::fuzz_bits(&data);
        dcfg_trace::fuzz_read(&data);
        dcfg_trace::fuzz_roundtrip(&data);
        true
    }
    QuickCheck::new()
        .tests(500)
        .quickcheck(prop as fn(Vec<u8>) -> bool);
    // Mutated fixtures: every byte position changed, for a small file.
    let base = crate::testdata("spec.trace.json");
    for i in 0..base.len() {
        for b in [b'(', b'<', b'"', b'0', b']', b'{', b'x'] {
            let mut m = base.clone();
            m[i] = b;
            dcfg_trace::fuzz_read(&m);
        }
        dcfg_trace::fuzz_read(&base[..i]);
    }
}
