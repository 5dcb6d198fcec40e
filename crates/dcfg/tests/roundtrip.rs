//! Property tests: write → read gives the model back; the reader never panics.

use dcfg::{
    BasicBlock, Counts, Dcfg, Edge, EdgeType, Edges, FileName, Image, Loop, Process, Routine,
    RoutineNode, SourceLine, SpecialNode, Symbol, Symbols,
};
use quickcheck::{Arbitrary, Gen, QuickCheck};

#[derive(Clone, Debug)]
struct Model(Dcfg);

fn small<T: Arbitrary>(g: &mut Gen, max: usize) -> Vec<T> {
    let n = usize::arbitrary(g) % (max + 1);
    (0..n).map(|_| T::arbitrary(g)).collect()
}

fn maybe<T>(g: &mut Gen, f: impl FnOnce(&mut Gen) -> T) -> Option<T> {
    if bool::arbitrary(g) { Some(f(g)) } else { None }
}

fn image(g: &mut Gen) -> Image {
    let has_data = bool::arbitrary(g);
    let mut img = Image {
        id: u64::arbitrary(g),
        load_addr: u64::arbitrary(g),
        size: u64::arbitrary(g),
        has_data,
        ..Image::default()
    };
    if has_data {
        img.file_name_id = Option::arbitrary(g);
        img.symbols = maybe(g, |g| {
            let rows: Vec<(String, u64, Option<u64>)> = (0..usize::arbitrary(g) % 4)
                .map(|_| Arbitrary::arbitrary(g))
                .collect();
            rows.iter()
                .map(|(name, addr_offset, size)| Symbol {
                    name,
                    addr_offset: *addr_offset,
                    size: *size,
                })
                .collect()
        });
        img.source_data = maybe(g, |g| {
            (0..usize::arbitrary(g) % 4)
                .map(|_| SourceLine {
                    file_name_id: u64::arbitrary(g),
                    line: u32::arbitrary(g),
                    addr_offset: u64::arbitrary(g),
                    size: Option::arbitrary(g),
                    num_instrs: Option::arbitrary(g),
                })
                .collect()
        });
        img.basic_blocks = maybe(g, |g| {
            (0..usize::arbitrary(g) % 6)
                .map(|_| BasicBlock {
                    id: u64::arbitrary(g),
                    addr_offset: u64::arbitrary(g),
                    size: u32::arbitrary(g),
                    num_instrs: u32::arbitrary(g),
                    last_instr_offset: Option::arbitrary(g),
                    count: Option::arbitrary(g),
                })
                .collect()
        });
        img.routines = maybe(g, |g| {
            (0..usize::arbitrary(g) % 3)
                .map(|_| Routine {
                    entry: u64::arbitrary(g),
                    exits: small(g, 3),
                    nodes: (0..usize::arbitrary(g) % 10)
                        .map(|_| RoutineNode {
                            id: u64::arbitrary(g),
                            idom: u64::arbitrary(g),
                        })
                        .collect(),
                    loops: maybe(g, |g| {
                        (0..usize::arbitrary(g) % 3)
                            .map(|_| Loop {
                                head: u64::arbitrary(g),
                                back_edge_sources: small(g, 3),
                                nodes: small(g, 4),
                                parent: Option::arbitrary(g),
                            })
                            .collect()
                    }),
                })
                .collect()
        });
    }
    img
}

impl Arbitrary for Model {
    fn arbitrary(g: &mut Gen) -> Model {
        let processes = (0..usize::arbitrary(g) % 3)
            .map(|_| {
                let has_data = bool::arbitrary(g);
                let mut p = Process {
                    id: u64::arbitrary(g),
                    has_data,
                    ..Process::default()
                };
                if has_data {
                    p.instr_count = Option::arbitrary(g);
                    p.instr_count_per_thread = maybe(g, |g| small(g, 4));
                    p.images = maybe(g, |g| {
                        (0..usize::arbitrary(g) % 3).map(|_| image(g)).collect()
                    });
                    p.edges = maybe(g, |g| {
                        (0..usize::arbitrary(g) % 8)
                            .map(|_| Edge {
                                id: u64::arbitrary(g),
                                source: u64::arbitrary(g),
                                target: u64::arbitrary(g),
                                type_id: u64::arbitrary(g),
                                counts: small::<u64>(g, 5).into_iter().collect::<Counts>(),
                            })
                            .collect::<Edges>()
                    });
                }
                p
            })
            .collect();
        Model(Dcfg {
            major_version: u64::arbitrary(g),
            minor_version: u64::arbitrary(g),
            file_names: maybe(g, |g| {
                (0..usize::arbitrary(g) % 3)
                    .map(|_| FileName {
                        id: u64::arbitrary(g),
                        name: String::arbitrary(g),
                    })
                    .collect()
            }),
            edge_types: maybe(g, |g| {
                (0..usize::arbitrary(g) % 3)
                    .map(|_| EdgeType {
                        id: u64::arbitrary(g),
                        name: String::arbitrary(g),
                    })
                    .collect()
            }),
            special_nodes: maybe(g, |g| {
                (0..usize::arbitrary(g) % 3)
                    .map(|_| SpecialNode {
                        id: u64::arbitrary(g),
                        name: String::arbitrary(g),
                    })
                    .collect()
            }),
            processes,
        })
    }
}

/// write → read gives the model back, and write → read → write the same bytes.
#[test]
fn write_then_read_gives_the_model_back() {
    fn prop(m: Model) -> bool {
        let bytes = m.0.to_vec();
        let back = Dcfg::parse(&bytes).unwrap();
        back == m.0 && back.to_vec() == bytes
    }
    QuickCheck::new()
        .tests(300)
        .quickcheck(prop as fn(Model) -> bool);
}

/// The writer's output follows Intel's layout rule as stated independently in the tests.
#[test]
fn output_follows_the_layout_rule() {
    fn prop(m: Model) -> bool {
        let bytes = m.0.to_vec();
        crate::intel_layout(&bytes) == bytes
    }
    QuickCheck::new()
        .tests(300)
        .quickcheck(prop as fn(Model) -> bool);
}

/// The model in a dialect spelling: columns rotated by `rotate`, integers as hex strings
/// everywhere if `hex`.
fn dialect(m: &Model, rotate: u8, hex: bool) -> Vec<u8> {
    use dcfg::testgen::{IntStyle, dialect_json};
    let style = if hex {
        IntStyle::HexEverywhere
    } else {
        IntStyle::NumbersOnly
    };
    dialect_json(&m.0, style, usize::from(rotate))
}

/// Canonical output: whatever the spelling read, write → read → write gives the same bytes
/// again.
#[test]
fn written_output_is_a_fixed_point() {
    fn prop(m: Model, rotate: u8, hex: bool) -> bool {
        let once = Dcfg::parse(&dialect(&m, rotate, hex)).unwrap().to_vec();
        Dcfg::parse(&once).unwrap().to_vec() == once
    }
    QuickCheck::new()
        .tests(200)
        .quickcheck(prop as fn(Model, u8, bool) -> bool);
}

#[test]
fn every_dialect_reads_back_the_model() {
    fn prop(m: Model, rotate: u8, hex: bool) -> bool {
        Dcfg::parse(&dialect(&m, rotate, hex)).unwrap() == m.0
    }
    QuickCheck::new()
        .tests(200)
        .quickcheck(prop as fn(Model, u8, bool) -> bool);
}

#[test]
fn compressed_round_trip() {
    fn prop(m: Model, gz: bool) -> bool {
        let c = if gz {
            dcfg::Compression::Gzip
        } else {
            dcfg::Compression::Bzip2
        };
        let mut z = Vec::new();
        m.0.write_compressed(&mut z, c).unwrap();
        Dcfg::parse(&z).unwrap() == m.0 && Dcfg::from_reader(&z[..]).unwrap() == m.0
    }
    QuickCheck::new()
        .tests(30)
        .quickcheck(prop as fn(Model, bool) -> bool);
}

#[test]
fn never_panics_on_arbitrary_bytes() {
    fn prop(data: Vec<u8>) -> bool {
        dcfg::fuzz_read(&data);
        dcfg::fuzz_roundtrip(&data)
    }
    QuickCheck::new()
        .tests(500)
        .quickcheck(prop as fn(Vec<u8>) -> bool);
}

/// Mutations of a valid file (byte flips, truncations, splices) reach deeper than random
/// bytes.
#[test]
fn never_panics_on_mutated_fixtures() {
    let base = std::fs::read(crate::testdata("sample.dcfg.json")).unwrap();
    fn prop(base: &[u8], pos: usize, byte: u8, cut: bool) -> bool {
        let v = crate::mutate(base, pos, byte, cut);
        dcfg::fuzz_read(&v);
        dcfg::fuzz_roundtrip(&v)
    }
    let mut g = Gen::new(1000);
    for _ in 0..300 {
        let (pos, byte, cut) = (
            usize::arbitrary(&mut g),
            u8::arbitrary(&mut g),
            bool::arbitrary(&mut g),
        );
        assert!(prop(&base, pos, byte, cut));
    }
    // Every mutated file that still reads also validates without panicking.
    dcfg::fuzz_read(&dcfg::testgen::dialect_json(
        &crate::sample(),
        dcfg::testgen::IntStyle::HexEverywhere,
        3,
    ));
}

/// Per-thread counts keep any values, compactly: 16 bytes, no allocation for typical counts.
#[test]
fn counts_keep_their_values() {
    fn prop(big: Vec<u64>, small: Vec<u8>) -> bool {
        let small: Vec<u64> = small.iter().map(|&b| u64::from(b % 130)).collect();
        [big, small].iter().all(|v| {
            let c: Counts = v.iter().copied().collect();
            c.len() == v.len()
                && c.to_vec() == *v
                && c.iter().len() == v.len()
                && (0..v.len()).all(|t| c.get(t) == Some(v[t]))
                && c.get(v.len()).is_none()
                && c.total() == v.iter().fold(0u64, |a, &x| a.saturating_add(x))
                && c == Counts::from(&v[..])
                && format!("{c:?}") == format!("{v:?}")
        })
    }
    QuickCheck::new()
        .tests(500)
        .quickcheck(prop as fn(Vec<u64>, Vec<u8>) -> bool);
    assert_eq!(size_of::<Counts>(), 16);
    assert_eq!(size_of::<Edge>(), 48);
    // Eight threads with counts below 128 stay inline (13 bytes of varints).
    let c: Counts = [0, 1, 127, 0, 5, 0, 0, 9].into_iter().collect();
    assert_eq!(c.to_vec(), [0, 1, 127, 0, 5, 0, 0, 9]);
}

type SymbolRow = (String, u64, Option<u64>);

fn symbol_views(rows: &[SymbolRow]) -> Vec<Symbol<'_>> {
    rows.iter()
        .map(|(name, addr_offset, size)| Symbol {
            name,
            addr_offset: *addr_offset,
            size: *size,
        })
        .collect()
}

/// A symbol table gives back the rows it was built from, in order, by index and by
/// iteration, and compares as the list of rows does.
#[test]
fn symbols_keep_their_rows() {
    fn prop(rows: Vec<SymbolRow>, other: Vec<SymbolRow>) -> bool {
        let (want, want_other) = (symbol_views(&rows), symbol_views(&other));
        let t: Symbols = want.iter().copied().collect();
        let u: Symbols = want_other.iter().copied().collect();
        t.len() == want.len()
            && t.iter().collect::<Vec<_>>() == want
            && t.iter().len() == want.len()
            && (0..want.len()).all(|i| t.get(i) == Some(want[i]))
            && t.get(want.len()).is_none()
            && (t == u) == (want == want_other)
            && format!("{t:?}") == format!("{want:?}")
    }
    QuickCheck::new()
        .tests(500)
        .quickcheck(prop as fn(Vec<SymbolRow>, Vec<SymbolRow>) -> bool);
}

/// The rows that dominate big files stay small (the model must stay below the JSON's size).
#[test]
fn rows_stay_small() {
    assert_eq!(size_of::<BasicBlock>(), 48);
    assert_eq!(size_of::<SourceLine>(), 40);
    assert_eq!(size_of::<Edge>(), 48);
}

/// With two NAME columns, the last one gives a symbol its name, as with any repeated column.
#[test]
fn a_repeated_name_column_keeps_the_last() {
    let from = r#"[ [ "NAME", "ADDR_OFFSET", "SIZE" ], [ "main", "0x1000", 232 ], [ "func_0_1", "0x10f8", 188 ] ]"#;
    let to = r#"[ [ "NAME", "NAME", "ADDR_OFFSET", "SIZE" ], [ "x", "main", "0x1000", 232 ], [ "yy", "func_0_1", "0x10f8", 188 ] ]"#;
    let sample = std::fs::read_to_string(crate::testdata("sample.dcfg.json")).unwrap();
    assert!(sample.contains(from));
    let json = sample.replacen(from, to, 1);
    let d = Dcfg::parse(json.as_bytes()).unwrap();
    let names: Vec<&str> = d.processes[0].images()[0]
        .symbols()
        .iter()
        .map(|s| s.name)
        .collect();
    assert_eq!(names, ["main", "func_0_1"]);
}
