//! Joining with a DCFG given as plain data.

use std::collections::HashMap;

use dcfg_trace::encode::{EncodeOptions, ProcessEdges, ThreadEdges, encode};
use dcfg_trace::join::{EdgeInfo, JoinProcess, Mismatch, check};
use dcfg_trace::read::{ReadOptions, Trace};

/// A small graph: edge e goes from block e to block e+1 (block b has b instructions).
fn model(counts: &HashMap<u64, u64>) -> JoinProcess {
    JoinProcess {
        pid: 5,
        edges: (1..=6)
            .map(|e| {
                (
                    e,
                    EdgeInfo {
                        source: e,
                        target: e + 1,
                        source_instrs: e,
                        target_addr: Some(0x1000 + 0x10 * (e + 1)),
                        target_symbol: Some(("f".into(), 0x10 * (e + 1))),
                        counts_per_thread: vec![counts.get(&e).copied().unwrap_or(0)],
                    },
                )
            })
            .collect(),
    }
}

#[test]
fn counts_and_instructions_agree_when_consistent() {
    let edges: Vec<u64> = [1u64, 2, 3, 4, 5, 3, 4, 5, 6].to_vec();
    let mut counts = HashMap::new();
    for &e in &edges {
        *counts.entry(e).or_insert(0) += 1;
    }
    let m = model(&counts);
    let file = encode(
        &[ProcessEdges {
            pid: 5,
            threads: vec![ThreadEdges {
                thread: 0,
                edges: edges.clone(),
            }],
        }],
        |_, e| m.edges[&e].source_instrs,
        &EncodeOptions {
            chunk_instrs: 8,
            ..EncodeOptions::default()
        },
    )
    .to_vec();
    let t = Trace::parse(&file, ReadOptions::default()).unwrap();
    assert!(t.processes[0].threads[0].chunks.len() > 2);
    let r = check(&t, std::slice::from_ref(&m), 2).unwrap();
    assert_eq!(r.mismatches, []);
    assert_eq!(r.edges, 9);
    assert_eq!(m.blocks(&edges).unwrap(), [2, 3, 4, 5, 6, 4, 5, 6, 7]);

    // A wrong count and a wrong INSTR_COUNT are reported.
    let mut counts2 = counts.clone();
    counts2.insert(3, 7);
    let m2 = model(&counts2);
    let mut model_file = dcfg_trace::write::TraceFile::from_trace(
        &Trace::parse(&file, ReadOptions::default()).unwrap(),
    );
    model_file.processes[0].threads[0].chunks[0].instr_count += 10;
    let text = model_file.to_vec();
    let t = Trace::parse(&text, ReadOptions::default()).unwrap();
    let r = check(&t, &[m2], 1).unwrap();
    assert!(
        r.mismatches.iter().any(|m| matches!(
            m,
            Mismatch::EdgeCount {
                edge: 3,
                dcfg: 7,
                trace: 2,
                ..
            }
        )),
        "{:?}",
        r.mismatches
    );
    assert!(
        r.mismatches
            .iter()
            .any(|m| matches!(m, Mismatch::InstrCount { chunk: 0, .. })),
        "{:?}",
        r.mismatches
    );
    assert!(m.blocks(&[99]).is_err());
}
