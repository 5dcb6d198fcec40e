//! The real Intel-written files in `../shared/realdata/dcfg/` (never copied into the repo).
//!
//! Expected values were computed independently of this crate with a short Python script
//! (`json.load` on the plain file, `bz2.open` + `json.load` on the compressed one): counting
//! the rows of each table, summing `COUNT_PER_THREAD`, and checking block COUNT against the
//! sums of inbound and outbound edge counts.

use dcfg::{Container, Dcfg, SpecialKind};

use crate::realdata::realdata;

struct Expect {
    pid: u64,
    threads: usize,
    instr: u64,
    images: usize,
    blocks: usize,
    edges: usize,
    routines: usize,
    loops: usize,
    block_instrs: u64,
    edge_count_sum: u64,
    min_block: u64,
    max_block: u64,
}

fn check(d: &Dcfg, x: &Expect) {
    assert_eq!(d.version(), "1.00");
    assert_eq!(d.processes.len(), 1);
    let p = &d.processes[0];
    assert_eq!(p.id, x.pid);
    assert_eq!(p.threads(), x.threads);
    assert_eq!(p.instr_count, Some(x.instr));
    assert_eq!(
        p.instr_count_per_thread
            .as_ref()
            .unwrap()
            .iter()
            .sum::<u64>(),
        x.instr
    );
    assert_eq!(p.images().len(), x.images);
    assert_eq!(p.blocks().count(), x.blocks);
    assert_eq!(p.edge_count(), x.edges);
    let routines: usize = p.images().iter().map(|i| i.routines().len()).sum();
    assert_eq!(routines, x.routines);
    let g = d.graph(x.pid).unwrap();
    assert_eq!(g.loops().count(), x.loops);
    assert_eq!(g.instr_count(Container::Process), x.block_instrs);
    assert_eq!(p.edges().map(|e| e.count()).sum::<u64>(), x.edge_count_sum);
    assert_eq!(p.blocks().map(|(_, b)| b.id).min(), Some(x.min_block));
    assert_eq!(p.blocks().map(|(_, b)| b.id).max(), Some(x.max_block));
    // The invariant of real files: COUNT = Σ inbound = Σ outbound.
    for (_, b) in p.blocks() {
        assert_eq!(b.count, Some(g.inbound_count(b.id)), "block {}", b.id);
        assert_eq!(b.count, Some(g.outbound_count(b.id)), "block {}", b.id);
    }
    assert_eq!(g.special_node(SpecialKind::Start), Some(1));
    assert_eq!(d.validate(), vec![]);
    assert_eq!(g.special_node(SpecialKind::End), Some(2));
}

#[test]
fn dijkstra_plain_json() {
    let Some(path) = realdata("pinball2elf_dijkstra_omp_8t.dcfg.json") else {
        return;
    };
    let d = Dcfg::from_path(&path).unwrap();
    check(
        &d,
        &Expect {
            pid: 20149,
            threads: 8,
            instr: 684,
            images: 7,
            blocks: 1601,
            edges: 2211,
            routines: 151,
            loops: 52,
            block_instrs: 683,
            edge_count_sum: 219,
            min_block: 4080,
            max_block: 5680,
        },
    );
    // Same model from a slice and from a stream.
    let bytes = std::fs::read(&path).unwrap();
    assert_eq!(Dcfg::parse(&bytes).unwrap(), d);
    assert_eq!(Dcfg::from_reader(&bytes[..]).unwrap(), d);
}

#[test]
fn simple_loop_bz2() {
    let Some(path) = realdata("passlab_simple_loop_whole.dcfg.json.bz2") else {
        return;
    };
    let d = Dcfg::from_path(&path).unwrap();
    check(
        &d,
        &Expect {
            pid: 29003,
            threads: 1,
            instr: 135_213,
            images: 3,
            blocks: 1734,
            edges: 2527,
            routines: 132,
            loops: 117,
            block_instrs: 135_188,
            edge_count_sum: 30_412,
            min_block: 4,
            max_block: 1737,
        },
    );
    let g = d.graph(29003).unwrap();
    // The loop at simple_loop.c:5: head block 31 in routine 29 (main); COUNT 11, entered
    // once by edge 1690 (29 → 31) and looping 10 times through edge 306 (30 → 31).
    let b31 = g.block(31).unwrap();
    assert_eq!(
        (b31.addr_offset, b31.size, b31.num_instrs, b31.count),
        (0x5d3, 11, 3, Some(11))
    );
    assert_eq!(g.block_addr(31), Some(0x40_05d3));
    assert_eq!(g.block_routine(31).unwrap().entry, 29);
    assert_eq!(g.block_loop(31).unwrap().head, 31);
    let s = g.loop_stats(31);
    assert_eq!(
        (s.head_count, s.back_edge_count, s.entry_count),
        (11, 10, 1)
    );
    assert_eq!(s.iterations(), 11);
    assert_eq!(s.visits(), 1);
    assert_eq!(g.edge_between(29, 31).unwrap().id, 1690);
    assert_eq!(g.edge(306).unwrap().source, 30);
    assert_eq!(g.blocks_at(0x40_05d3 + 4), vec![31]);
    let (file, line) = g.block_source(31).unwrap();
    assert!(file.ends_with("simple_loop.c"), "{file}");
    assert_eq!(line, 5);
    assert!(g.blocks_by_source("simple_loop.c", 5).contains(&31));
    assert_eq!(g.block_symbol(31).unwrap().0, "main");
    assert!(g.blocks_by_symbol("main").contains(&29));
}

/// The JSON in the bytes of a real file (plain or bzip2).
fn uncompressed(raw: &[u8]) -> Vec<u8> {
    use std::io::Read;
    if dcfg::Compression::detect(raw) != dcfg::Compression::Bzip2 {
        return raw.to_vec();
    }
    let mut json = Vec::new();
    bzip2::read::MultiBzDecoder::new(raw)
        .read_to_end(&mut json)
        .unwrap();
    json
}

/// Intel's writer and ours agree byte for byte: reading a real file and writing it back gives
/// the file's bytes (line breaks, indentation, hex spellings and `\/` escapes included).
#[test]
fn rewriting_real_files_gives_their_bytes_back() {
    for name in [
        "pinball2elf_dijkstra_omp_8t.dcfg.json",
        "passlab_simple_loop_whole.dcfg.json.bz2",
    ] {
        let Some(path) = realdata(name) else { continue };
        let raw = std::fs::read(&path).unwrap();
        let json = uncompressed(&raw);
        // The rule stated independently (tests/integration.rs) describes Intel's file.
        assert!(
            crate::intel_layout(&json) == json,
            "{name}: not Intel's layout rule"
        );
        let d = Dcfg::from_path(&path).unwrap();
        let bytes = d.to_vec();
        if bytes != json {
            let at = bytes.iter().zip(&json).take_while(|(a, b)| a == b).count();
            let line = json[..at].iter().filter(|&&b| b == b'\n').count() + 1;
            panic!(
                "{name}: rewritten bytes differ from byte {at} (line {line}): {} vs {} bytes",
                bytes.len(),
                json.len()
            );
        }
        // Through write_to as well (a buffered writer).
        let mut out = Vec::new();
        d.write_to(&mut out).unwrap();
        assert!(out == json, "{name}: write_to differs");
        // A compressed file comes back byte for byte too (bzip2 at level 9, as Intel's).
        if dcfg::Compression::detect(&raw) == dcfg::Compression::Bzip2 {
            let mut z = Vec::new();
            d.write_compressed(&mut z, dcfg::Compression::Bzip2)
                .unwrap();
            assert!(z == raw, "{name}: the bzip2 stream differs");
        }
        // Compressed round trips give the model back.
        for c in [dcfg::Compression::Bzip2, dcfg::Compression::Gzip] {
            let mut z = Vec::new();
            d.write_compressed(&mut z, c).unwrap();
            assert_eq!(dcfg::Compression::detect(&z), c);
            assert_eq!(Dcfg::parse(&z).unwrap(), d, "{name} {c:?}");
        }
    }
}
