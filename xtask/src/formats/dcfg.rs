//! xtask hooks for dcfg: fixtures under `testdata/dcfg/`, a synthetic DCFG, a bench row.

use std::hint::black_box;
use std::sync::Arc;

use dcfg::testgen::{self, IntStyle, SynthConfig};
use dcfg::{Compression, Dcfg};

use super::FormatTasks;
use crate::bench::{BenchCase, BenchConfig};
use crate::fixtures::Fixtures;

pub const TASKS: FormatTasks = FormatTasks {
    name: "dcfg",
    fixtures: Some(fixtures),
    synth: Some(synth),
    bench: Some(bench),
};

/// The small model behind most fixtures: 2 images × 2 routines, 2 threads.
fn sample() -> Dcfg {
    testgen::synthetic(SynthConfig {
        images: 2,
        routines_per_image: 2,
        threads: 2,
        seed: 1,
    })
}

fn compressed(d: &Dcfg, c: Compression) -> Vec<u8> {
    let mut out = Vec::new();
    d.write_compressed(&mut out, c).expect("writing to a Vec");
    out
}

/// Replaces the first occurrence of `from` (which must exist) in `bytes`.
fn replace_once(bytes: &[u8], from: &str, to: &str) -> Vec<u8> {
    let s = String::from_utf8(bytes.to_vec()).expect("fixtures are UTF-8");
    assert!(s.contains(from), "{from:?} not in the sample");
    s.replacen(from, to, 1).into_bytes()
}

fn fixtures(fx: &mut Fixtures) {
    let d = sample();
    let json = d.to_vec();
    fx.add("dcfg/sample.dcfg.json", json.clone());
    fx.add(
        "dcfg/sample.dcfg.json.bz2",
        compressed(&d, Compression::Bzip2),
    );
    fx.add(
        "dcfg/sample.dcfg.json.gz",
        compressed(&d, Compression::Gzip),
    );

    // Dialects: the same model spelled differently.
    fx.add(
        "dcfg/dialect-hex.dcfg.json",
        testgen::dialect_json(&d, IntStyle::HexEverywhere, 1),
    );
    fx.add(
        "dcfg/dialect-numbers.dcfg.json",
        testgen::dialect_json(&d, IntStyle::NumbersOnly, 2),
    );
    let qemu = testgen::qemu_dialect(&d);
    fx.add(
        "dcfg/dialect-qemu.dcfg.json",
        testgen::dialect_json(&qemu, IntStyle::NumbersOnly, 0),
    );

    // Optional sections missing (as with -dcfg:source 0 -dcfg:symbols 0 -dcfg:analysis 0),
    // and without the CFG at all (-dcfg:cfg 0).
    let mut minimal = d.clone();
    minimal.file_names = None;
    for p in &mut minimal.processes {
        p.instr_count = None;
        for img in p.images.iter_mut().flatten() {
            img.file_name_id = None;
            img.symbols = None;
            img.source_data = None;
            img.routines = None;
            for b in img.basic_blocks.iter_mut().flatten() {
                b.last_instr_offset = None;
                b.count = None;
            }
        }
    }
    fx.add("dcfg/minimal.dcfg.json", minimal.to_vec());
    let mut no_cfg = d.clone();
    for p in &mut no_cfg.processes {
        p.edges = None;
        for img in p.images.iter_mut().flatten() {
            img.basic_blocks = None;
            img.routines = None;
        }
    }
    fx.add("dcfg/no-cfg.dcfg.json", no_cfg.to_vec());

    // Readable but inconsistent: validation findings.
    let mut bad = d.clone();
    if let Some(p) = bad.processes.first_mut() {
        if let Some(edges) = &p.edges {
            let mut rows: Vec<dcfg::Edge> = edges.iter().cloned().collect();
            if let Some(e) = rows.get_mut(1) {
                e.target = 999_999; // dangling
            }
            if let Some(e) = rows.get_mut(2) {
                e.counts.push(7); // a third thread's count
            }
            let first_id = rows.first().map_or(0, |f| f.id);
            if let Some(e) = rows.get_mut(3) {
                e.id = first_id; // duplicate id
            }
            p.edges = Some(rows.into_iter().collect());
        }
        p.instr_count = p.instr_count.map(|c| c + 1);
    }
    fx.add("dcfg/invalid-inconsistent.dcfg.json", bad.to_vec());

    // Unreadable: negative fixtures named after the reason.
    fx.add(
        "dcfg/err-truncated.dcfg.json",
        json.get(..json.len() / 2).unwrap_or_default().to_vec(),
    );
    fx.add(
        "dcfg/err-float-id.dcfg.json",
        replace_once(&json, "[ 4, \"0x1000\"", "[ 4.0, \"0x1000\""),
    );
    fx.add(
        "dcfg/err-bad-hex.dcfg.json",
        replace_once(&json, "\"0x1000\"", "\"0x10zz\""),
    );
    fx.add(
        "dcfg/err-not-a-table.dcfg.json",
        replace_once(
            &json,
            "\"EDGES\" : [",
            "\"EDGES\" : { \"X\": 1 }, \"Y\" : [",
        ),
    );
    fx.add(
        "dcfg/err-missing-version.dcfg.json",
        replace_once(&json, "\"MAJOR_VERSION\"", "\"MAJOR_VERSIO\""),
    );
    fx.add(
        "dcfg/err-short-row.dcfg.json",
        replace_once(&json, "[ 4, \"0x1000\", ", "[ 4, \"0x1000\" ], [ 5, "),
    );
    fx.add("dcfg/err-bz2-corrupt.dcfg.json.bz2", {
        let mut z = compressed(&d, Compression::Bzip2);
        let n = z.len();
        z.truncate(n / 2);
        z
    });
}

fn config_for_blocks(blocks: u64, seed: u64) -> SynthConfig {
    let routines = (blocks / testgen::BLOCKS_PER_ROUTINE).max(4);
    SynthConfig {
        images: 4,
        routines_per_image: routines / 4,
        threads: 4,
        seed,
    }
}

/// `records` basic blocks in 4 images, 4 threads.
fn synth(records: u64, seed: u64) -> Vec<u8> {
    testgen::synthetic(config_for_blocks(records, seed)).to_vec()
}

/// Decodes everything and touches every field; returns blocks + edges.
fn decode(bytes: &[u8]) -> u64 {
    let d = Dcfg::parse(bytes).expect("the synthetic DCFG reads");
    touch(&d)
}

/// Touches every field of the model; returns blocks + edges.
fn touch(d: &Dcfg) -> u64 {
    let mut rows = 0u64;
    let mut sum = 0u64;
    for p in &d.processes {
        for img in p.images() {
            for b in img.basic_blocks() {
                sum = sum
                    .wrapping_add(b.id ^ b.addr_offset ^ u64::from(b.size ^ b.num_instrs))
                    .wrapping_add(
                        u64::from(b.last_instr_offset.unwrap_or(0)) ^ b.count.unwrap_or(0),
                    );
                rows += 1;
            }
            for r in img.routines() {
                sum = sum.wrapping_add(r.entry).wrapping_add(r.nodes.len() as u64);
                for l in r.loops() {
                    sum = sum.wrapping_add(l.head ^ l.nodes.len() as u64);
                }
            }
            for s in img.symbols() {
                sum = sum.wrapping_add(s.addr_offset ^ s.name.len() as u64);
            }
            for s in img.source_data() {
                sum = sum.wrapping_add(u64::from(s.line) ^ s.addr_offset);
            }
        }
        for e in p.edges() {
            sum = sum.wrapping_add(e.id ^ e.source ^ e.target ^ e.type_id ^ e.count());
            rows += 1;
        }
    }
    black_box(sum);
    rows
}

fn bench(cfg: &BenchConfig) -> Vec<BenchCase> {
    // Bytes per block, measured on a small instance, sizes the big one.
    let small = synth(6_000, 7);
    let per_block = (small.len() as u64 / 6_000).max(1);
    let target = cfg.mib * 1024 * 1024;
    let mut blocks = target / per_block + 1;
    let mut input = synth(blocks, 7);
    while (input.len() as u64) < target {
        blocks += blocks / 20 + 1;
        input = synth(blocks, 7);
    }
    let input = Arc::new(input);
    vec![
        BenchCase {
            name: "dcfg read (blocks+edges)".into(),
            input: Arc::clone(&input),
            unit: "rows",
            run: Box::new(decode),
        },
        BenchCase {
            name: "dcfg read stream (io::Read)".into(),
            input,
            unit: "rows",
            run: Box::new(|bytes: &[u8]| {
                let d = Dcfg::from_reader(bytes).expect("the synthetic DCFG reads");
                touch(&d)
            }),
        },
    ]
}
