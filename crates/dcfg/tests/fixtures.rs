//! The generated fixtures in `testdata/dcfg/`: positive ones read to the expected models,
//! negative ones fail with a JSON path and an offset, inconsistent ones give findings.

use dcfg::testgen::qemu_dialect;
use dcfg::{Dcfg, SpecialKind, Symbols};
use trace_core::Offset;

use crate::{assert_golden, sample, testdata};

fn read(name: &str) -> Result<Dcfg, dcfg::Error> {
    Dcfg::from_path(testdata(name))
}

#[test]
fn sample_in_every_container_reads_the_same() {
    let want = sample();
    for name in [
        "sample.dcfg.json",
        "sample.dcfg.json.bz2",
        "sample.dcfg.json.gz",
    ] {
        let d = read(name).unwrap();
        assert_eq!(d, want, "{name}");
        let bytes = std::fs::read(testdata(name)).unwrap();
        assert_eq!(Dcfg::parse(&bytes).unwrap(), want, "{name} (slice)");
        assert_eq!(
            Dcfg::from_reader(&bytes[..]).unwrap(),
            want,
            "{name} (reader)"
        );
        // A reader handing out one byte at a time (magic bytes included).
        assert_eq!(
            Dcfg::from_reader(crate::trickle(&bytes, &[1])).unwrap(),
            want,
            "{name} (trickle)"
        );
        assert!(d.validate().is_empty(), "{name}: {:?}", d.validate());
    }
    // Canonical: read then write gives the bytes back.
    let bytes = std::fs::read(testdata("sample.dcfg.json")).unwrap();
    assert_eq!(Dcfg::parse(&bytes).unwrap().to_vec(), bytes);
}

#[test]
fn dialects_read_to_the_same_model() {
    let want = sample();
    for name in ["dialect-hex.dcfg.json", "dialect-numbers.dcfg.json"] {
        assert_eq!(read(name).unwrap(), want, "{name}");
    }
    let q = read("dialect-qemu.dcfg.json").unwrap();
    assert_eq!(q, qemu_dialect(&want));
    assert_eq!(q.version(), "0.01");
    // 64-bit ids above 2^53 survive exactly.
    let big = q.processes[0].blocks().map(|(_, b)| b.id).max().unwrap();
    assert!(big > 1 << 53);
    assert_eq!(
        q.special_node_id(SpecialKind::Start),
        Some(0xffff_8000_0000_0001)
    );
    let g = q.graph(q.processes[0].id).unwrap();
    let start = g.special_node(SpecialKind::Start).unwrap();
    let first = g.outbound_edges(start).next().unwrap();
    assert!(g.block(first.target).is_some());
    assert_eq!(g.edge_type_name(first), Some("UNKNOWN"));
    // Header-only tables are present and empty.
    assert_eq!(q.processes[0].images()[0].symbols, Some(Symbols::new()));
    assert!(q.validate().is_empty(), "{:?}", q.validate());
}

#[test]
fn missing_optional_sections() {
    let d = read("minimal.dcfg.json").unwrap();
    assert!(d.file_names.is_none());
    let p = &d.processes[0];
    assert!(p.instr_count.is_none());
    assert!(
        p.images()
            .iter()
            .all(|i| i.routines.is_none() && i.symbols.is_none())
    );
    let g = d.graph(p.id).unwrap();
    // Without COUNT, a block's executions come from its inbound edges.
    let s = sample();
    let gs = s.graph(s.processes[0].id).unwrap();
    for (_, b) in p.blocks() {
        assert_eq!(b.count, None);
        assert_eq!(g.block_count(b.id), gs.block(b.id).unwrap().count.unwrap());
        assert_eq!(g.block_routine(b.id), None);
        assert_eq!(g.block_symbol(b.id), None);
    }
    assert!(d.validate().is_empty(), "{:?}", d.validate());
    assert_eq!(Dcfg::parse(&d.to_vec()).unwrap(), d);

    let d = read("no-cfg.dcfg.json").unwrap();
    assert!(d.processes[0].edges.is_none());
    assert_eq!(d.processes[0].blocks().count(), 0);
    assert!(d.validate().is_empty());
}

#[test]
fn inconsistent_file_gives_findings() {
    let d = read("invalid-inconsistent.dcfg.json").unwrap();
    let text: String = d.validate().iter().map(|f| format!("{f}\n")).collect();
    assert!(
        text.contains("PROCESSES[0].EDGES[1]: target node 999999"),
        "{text}"
    );
    assert!(
        text.contains("COUNT_PER_THREAD has 3 entries for 2 threads"),
        "{text}"
    );
    assert!(text.contains("appears twice"), "{text}");
    assert!(text.contains("INSTR_COUNT_PER_THREAD sums to"), "{text}");
    assert_golden("invalid-inconsistent.findings.expected", &text);
}

#[test]
fn negative_fixtures_fail_with_path_and_offset() {
    // The offset of the first occurrence of `what` in a fixture (found independently of the
    // reader), plus `delta`.
    let at = |name: &str, what: &str, delta: usize| {
        let bytes = std::fs::read(testdata(name)).unwrap();
        let i = bytes
            .windows(what.len())
            .position(|w| w == what.as_bytes())
            .unwrap();
        (i + delta) as u64
    };
    let len = |name: &str| std::fs::read(testdata(name)).unwrap().len() as u64;
    let cases = [
        (
            "err-truncated.dcfg.json",
            "PROCESSES[0].IMAGES[1].IMAGE_DATA",
            len("err-truncated.dcfg.json"),
        ),
        (
            "err-float-id.dcfg.json",
            "PROCESSES[0].IMAGES[0].BASIC_BLOCKS[0].NODE_ID",
            at("err-float-id.dcfg.json", "4.0", 0),
        ),
        (
            "err-bad-hex.dcfg.json",
            "PROCESSES[0].IMAGES[0].SYMBOLS[0].ADDR_OFFSET",
            at("err-bad-hex.dcfg.json", "\"0x10zz\"", 0),
        ),
        (
            "err-not-a-table.dcfg.json",
            "PROCESSES[0].EDGES",
            at("err-not-a-table.dcfg.json", "{ \"X\"", 0),
        ),
        (
            "err-missing-version.dcfg.json",
            "",
            len("err-missing-version.dcfg.json") - 2,
        ),
        (
            "err-short-row.dcfg.json",
            "PROCESSES[0].IMAGES[0].BASIC_BLOCKS[0].SIZE",
            at("err-short-row.dcfg.json", "[ 4, \"0x1000\" ]", 14),
        ),
    ];
    let mut all = String::new();
    for (name, path, offset) in cases {
        let e = read(name).unwrap_err();
        let msg = e.to_string();
        assert_eq!(e.path(), Some(path), "{name}: {msg}");
        assert_eq!(
            e.offset(),
            Some(Offset(offset)),
            "{name}: {msg:?} at {offset:#x}"
        );
        assert!(msg.ends_with(&format!(" at offset {offset:#x}")), "{msg}");
        all.push_str(&format!("{name}: {msg}\n"));
    }
    let e = read("err-bz2-corrupt.dcfg.json.bz2").unwrap_err();
    assert!(matches!(e, dcfg::Error::Io { .. }), "{e}");
    all.push_str(&format!("err-bz2-corrupt.dcfg.json.bz2: {e}\n"));
    assert_golden("errors.expected", &all);
}

/// A block row of Intel's layout: `[ id, "0x…", n, n, n, n ]` on its own line.
fn is_block_row(line: &str) -> bool {
    let t = line.trim().trim_end_matches(',');
    let Some(inner) = t.strip_prefix("[ ").and_then(|t| t.strip_suffix(" ]")) else {
        return false;
    };
    let cells: Vec<&str> = inner.split(", ").collect();
    cells.len() == 6
        && cells[1].starts_with("\"0x")
        && [0, 2, 3, 4, 5]
            .iter()
            .all(|&i| cells[i].bytes().all(|b| b.is_ascii_digit()))
}

#[test]
fn truncated_files_recover_every_complete_block() {
    let bytes = std::fs::read(testdata("sample.dcfg.json")).unwrap();
    let full = sample();
    let g = full.graph(full.processes[0].id).unwrap();
    for cut in (200..bytes.len()).step_by(97) {
        let prefix = &bytes[..cut];
        let err = Dcfg::parse(prefix).unwrap_err();
        // Independent count: complete block lines (ending in a newline) before the cut.
        let text = std::str::from_utf8(prefix).unwrap();
        let complete = text.rsplit_once('\n').map_or("", |(head, _)| head);
        let want = complete.lines().filter(|l| is_block_row(l)).count();
        let got = Dcfg::recover_prefix(prefix, err.offset().unwrap().0);
        let blocks: Vec<_> = got
            .iter()
            .flat_map(|d| d.processes.iter())
            .flat_map(|p| p.blocks().map(|(_, b)| *b))
            .collect();
        assert!(blocks.len() >= want, "cut {cut}: {} < {want}", blocks.len());
        for b in &blocks {
            assert_eq!(Some(b), g.block(b.id), "cut {cut}");
        }
    }
}

/// Errors deep in a large stream (many read buffers in) are the same from the streaming
/// reader as from the slice reader, at the broken value.
#[test]
fn stream_and_slice_error_offsets_agree() {
    let big = dcfg::testgen::synthetic(dcfg::testgen::SynthConfig {
        images: 2,
        routines_per_image: 200,
        threads: 3,
        seed: 9,
    })
    .to_vec();
    assert!(big.len() > 100_000);
    for frac in [3, 5, 7, 9] {
        let mut bad = big.clone();
        // Break a number somewhere deep: the first digit after the cut point.
        let start = big.len() * frac / 10;
        let pos = start
            + big[start..]
                .iter()
                .position(|b| b.is_ascii_digit())
                .unwrap();
        bad[pos] = b'x';
        let a = Dcfg::parse(&bad).unwrap_err();
        let b = Dcfg::from_reader(&bad[..]).unwrap_err();
        // At the broken value or at the string holding it.
        let at = a.offset().unwrap().0;
        assert!(
            (pos as u64 - 16..=pos as u64).contains(&at),
            "{a} vs {pos:#x}"
        );
        assert_eq!(a.to_string(), b.to_string());
    }
}

#[test]
fn validation_reports_referential_problems_with_paths() {
    let mut d = sample();
    {
        let p = &mut d.processes[0];
        let images = p.images.as_mut().unwrap();
        // A block id used twice (in another image) and a block with a special node's id.
        let dup = images[0].basic_blocks()[0].id;
        images[1].basic_blocks.as_mut().unwrap()[0].id = dup;
        images[1].basic_blocks.as_mut().unwrap()[1].id = 3;
        let r = &mut images[0].routines.as_mut().unwrap()[0];
        r.nodes.push(dcfg::RoutineNode { id: 777, idom: 778 });
        let l = &mut r.loops.as_mut().unwrap()[0];
        l.parent = Some(4242);
        l.back_edge_sources.push(999);
        images[0].file_name_id = Some(31337);
        let mut edges: Vec<dcfg::Edge> = p.edges().cloned().collect();
        edges[0].type_id = 99;
        edges[5].target = 3; // the UNKNOWN special node
        p.edges = Some(edges.into_iter().collect());
    }
    let findings: Vec<String> = d.validate().iter().map(ToString::to_string).collect();
    let has = |s: &str| findings.iter().any(|f| f.contains(s));
    assert!(
        has("PROCESSES[0].IMAGES[1].BASIC_BLOCKS[0]: block id 4 is already used in IMAGES[0]"),
        "{findings:#?}"
    );
    assert!(
        has("PROCESSES[0].IMAGES[1].BASIC_BLOCKS[1]: block id 3 is a special node id"),
        "{findings:#?}"
    );
    assert!(
        has("PROCESSES[0].IMAGES[0].ROUTINES[0].NODES[6]: node 777 is not a block of this image"),
        "{findings:#?}"
    );
    assert!(
        has("immediate dominator 778 is not in the routine"),
        "{findings:#?}"
    );
    assert!(
        has("PROCESSES[0].IMAGES[0].ROUTINES[0].LOOPS[0]: parent loop 4242"),
        "{findings:#?}"
    );
    assert!(
        has("back-edge source 999 is not in LOOP_NODE_IDS"),
        "{findings:#?}"
    );
    assert!(
        has("PROCESSES[0].IMAGES[0]: FILE_NAME_ID 31337 is not in FILE_NAMES"),
        "{findings:#?}"
    );
    assert!(
        has("PROCESSES[0].EDGES[0]: EDGE_TYPE_ID 99 is not in EDGE_TYPES"),
        "{findings:#?}"
    );
    assert!(
        has("PROCESSES[0].EDGES[5]: target node 3 is the UNKNOWN node"),
        "{findings:#?}"
    );
    // Validation never panics, also on the reading of its own output.
    assert_eq!(
        Dcfg::parse(&d.to_vec()).unwrap().validate().len(),
        findings.len()
    );
}

/// Repeated (source, target) pairs and nodes in two routines, with dense ids (as Intel
/// numbers them) and with ids far apart (the checks index them differently).
#[test]
fn validation_reports_repeats_with_dense_and_sparse_ids() {
    for offset in [0u64, 1 << 60] {
        let mut d = sample();
        {
            let p = &mut d.processes[0];
            let images = p.images.as_mut().unwrap();
            let shift = |id: &mut u64| {
                if *id > 3 {
                    *id += offset;
                }
            };
            for img in images.iter_mut() {
                for b in img.basic_blocks.iter_mut().flatten() {
                    shift(&mut b.id);
                }
                for r in img.routines.iter_mut().flatten() {
                    shift(&mut r.entry);
                    r.exits.iter_mut().for_each(shift);
                    for n in &mut r.nodes {
                        shift(&mut n.id);
                        shift(&mut n.idom);
                    }
                    for l in r.loops.iter_mut().flatten() {
                        shift(&mut l.head);
                        l.nodes.iter_mut().for_each(shift);
                        l.back_edge_sources.iter_mut().for_each(shift);
                        if let Some(parent) = &mut l.parent {
                            shift(parent);
                        }
                    }
                }
            }
            let first_node = images[0].routines()[0].nodes[0];
            images[0].routines.as_mut().unwrap()[1]
                .nodes
                .push(first_node);
            let mut edges: Vec<dcfg::Edge> = p.edges().cloned().collect();
            for e in &mut edges {
                shift(&mut e.source);
                shift(&mut e.target);
            }
            let mut again = edges[4].clone();
            again.id = 1 << 62;
            edges.push(again);
            p.edges = Some(edges.into_iter().collect());
        }
        let findings: Vec<String> = d.validate().iter().map(ToString::to_string).collect();
        let last = d.processes[0].edges().count() - 1;
        let node = d.processes[0].images()[0].routines()[0].nodes[0].id;
        let wanted = [
            format!("PROCESSES[0].EDGES[{last}]: a second edge from"),
            format!(
                "PROCESSES[0].IMAGES[0].ROUTINES[1].NODES[{}]: node {node} is also in \
                 PROCESSES[0].IMAGES[0].ROUTINES[0]",
                d.processes[0].images()[0].routines()[1].nodes.len() - 1
            ),
        ];
        for w in &wanted {
            assert!(
                findings.iter().any(|f| f.starts_with(w.as_str())),
                "{w}: {findings:#?}"
            );
        }
        // The repeated edge also adds its count to two blocks' sums: the same four
        // findings either way.
        assert_eq!(findings.len(), 4, "{findings:#?}");
    }
}
