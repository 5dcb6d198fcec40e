//! Generators for fixtures, benchmarks and tests (not part of the stable API).
//!
//! - [`synthetic`]: a consistent DCFG of any size (every block's COUNT equals the sums of its
//!   inbound and outbound edge counts, per-thread instruction counts add up), with routines,
//!   nested loops, symbols and source lines;
//! - [`qemu_dialect`]: the same graph the way the QEMU plugin writes it (version 0.01, 64-bit
//!   node ids above 2^53, one `UNKNOWN` edge type, zero sizes, header-only tables);
//! - [`dialect_json`]: JSON text in non-Intel spellings (every integer as a hex string or
//!   every address as a number, keys in reverse order, rotated table columns, an unknown key
//!   and an unknown column), for tolerance tests.

use crate::model::{
    BasicBlock, Counts, Dcfg, Edge, EdgeType, Edges, FileName, Image, Loop, Process, Routine,
    RoutineNode, SourceLine, SpecialNode, Symbol, Symbols,
};
use trace_core::rng::SplitMix64;

/// Intel's edge-type table (ids 1..=26), as in real files.
pub const INTEL_EDGE_TYPES: [&str; 26] = [
    "ENTRY",
    "EXIT",
    "CALL",
    "DIRECT_CALL",
    "INDIRECT_CALL",
    "RETURN",
    "CALL_BYPASS",
    "BRANCH",
    "CONDITIONAL_BRANCH",
    "UNCONDITIONAL_BRANCH",
    "DIRECT_BRANCH",
    "INDIRECT_BRANCH",
    "DIRECT_CONDITIONAL_BRANCH",
    "INDIRECT_CONDITIONAL_BRANCH",
    "DIRECT_UNCONDITIONAL_BRANCH",
    "INDIRECT_UNCONDITIONAL_BRANCH",
    "REP",
    "FALL_THROUGH",
    "SYSTEM_CALL",
    "SYSTEM_RETURN",
    "SYSTEM_CALL_BYPASS",
    "CONTEXT_CHANGE",
    "CONTEXT_CHANGE_RETURN",
    "CONTEXT_CHANGE_BYPASS",
    "EXCLUDED_CODE_BYPASS",
    "UNKNOWN",
];

fn type_id(name: &str) -> u64 {
    INTEL_EDGE_TYPES
        .iter()
        .position(|t| *t == name)
        .map_or(26, |i| (i as u64).saturating_add(1))
}

/// SplitMix64 from trace-core, with this generator's own reduction to a range (modulo),
/// which the committed fixtures were made with.
#[derive(Debug)]
struct Rng(SplitMix64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0.next_u64()
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next().checked_rem(n).unwrap_or(0)
    }
}

/// The shape of a [`synthetic`] DCFG.
#[derive(Clone, Copy, Debug)]
pub struct SynthConfig {
    /// Images (the first is the main program).
    pub images: u64,
    /// Routines per image (6 blocks each).
    pub routines_per_image: u64,
    /// Threads.
    pub threads: usize,
    /// Seed of the pseudo-random counts and sizes.
    pub seed: u64,
}

/// Blocks per synthetic routine.
pub const BLOCKS_PER_ROUTINE: u64 = 6;

/// A consistent synthetic DCFG: see the [module documentation](self).
///
/// Every thread runs START → routine 0 → routine 1 → … → END; in each routine, block 1 heads
/// a loop over block 2 (iterated a pseudo-random number of times per thread), odd routines
/// nest a REP self-loop on block 2 inside it, and a zero-count CALL_BYPASS edge skips
/// block 4.
#[must_use]
pub fn synthetic(cfg: SynthConfig) -> Dcfg {
    let mut rng = Rng(SplitMix64::from_state(cfg.seed));
    let threads = cfg.threads.max(1);
    let mut file_names = Vec::new();
    let mut images = Vec::new();
    let mut edges: Vec<Edge> = Vec::new();
    let mut per_thread = vec![0u64; threads];
    let mut next_node = 4u64;
    let mut next_edge = 1u64;
    let mut prev: Option<(u64, &'static str)> = None; // (last block, edge type into next)
    let counts_of = |v: &dyn Fn(usize) -> u64| -> Counts { (0..threads).map(v).collect() };
    let ones: Counts = counts_of(&|_| 1);
    let mut push = |edges: &mut Vec<Edge>, s: u64, t: u64, ty: &str, c: Counts| {
        edges.push(Edge {
            id: next_edge,
            source: s,
            target: t,
            type_id: type_id(ty),
            counts: c,
        });
        next_edge = next_edge.saturating_add(1);
    };
    for i in 0..cfg.images {
        let image_file = i.saturating_add(1);
        let src_file = i.saturating_add(100);
        file_names.push(FileName {
            id: image_file,
            name: if i == 0 {
                "/synth/bin/app".to_owned()
            } else {
                format!("/synth/lib/lib{i}.so")
            },
        });
        file_names.push(FileName {
            id: src_file,
            name: format!("/synth/src/file{i}.c"),
        });
        let load_addr = if i == 0 {
            0x40_0000
        } else {
            0x7f00_0000_0000u64.wrapping_add(i.wrapping_mul(0x100_0000))
        };
        let mut offset = 0x1000u64;
        let mut blocks = Vec::new();
        let mut routines = Vec::new();
        let mut symbols = Symbols::new();
        let mut source = Vec::new();
        for r in 0..cfg.routines_per_image {
            let ids: Vec<u64> = (0..BLOCKS_PER_ROUTINE)
                .map(|k| next_node.saturating_add(k))
                .collect();
            next_node = next_node.saturating_add(BLOCKS_PER_ROUTINE);
            let nested = r % 2 == 1;
            let iters: Counts = (0..threads).map(|_| rng.below(20)).collect();
            let reps: Counts = (0..threads)
                .map(|_| if nested { rng.below(5) } else { 0 })
                .collect();
            let start = offset;
            for (k, &id) in ids.iter().enumerate() {
                // Below 13 and 52: the casts cannot fail.
                let instrs = u32::try_from(rng.below(12)).unwrap_or(0).saturating_add(1);
                let size = instrs.saturating_mul(4);
                let count_t = |t: usize| -> u64 {
                    let it = iters.get(t).unwrap_or(0);
                    let rp = reps.get(t).unwrap_or(0);
                    match k {
                        1 => it.saturating_add(1),
                        2 => it.saturating_add(rp),
                        _ => 1,
                    }
                };
                let mut count = 0u64;
                for (t, slot) in per_thread.iter_mut().enumerate() {
                    let c = count_t(t);
                    count = count.saturating_add(c);
                    *slot = slot.saturating_add(c.saturating_mul(instrs.into()));
                }
                blocks.push(BasicBlock {
                    id,
                    addr_offset: offset,
                    size,
                    num_instrs: instrs,
                    last_instr_offset: Some(size.saturating_sub(4)),
                    count: Some(count),
                });
                source.push(SourceLine {
                    file_name_id: src_file,
                    line: u32::try_from(r.saturating_mul(10).saturating_add(k as u64))
                        .unwrap_or(u32::MAX)
                        .saturating_add(1),
                    addr_offset: offset,
                    size: Some(size),
                    num_instrs: Some(instrs),
                });
                offset = offset.saturating_add(size.into());
            }
            let [b0, b1, b2, b3, b4, b5] =
                [0, 1, 2, 3, 4, 5].map(|k| ids.get(k).copied().unwrap_or(0));
            let name = if i == 0 && r == 0 {
                "main".to_owned()
            } else {
                format!("func_{i}_{r}")
            };
            symbols.push(Symbol {
                name: &name,
                addr_offset: start,
                size: Some(offset.saturating_sub(start)),
            });
            offset = offset.saturating_add(16); // padding between routines
            match prev {
                None => push(&mut edges, 1, b0, "ENTRY", ones.clone()),
                Some((p, ty)) => push(&mut edges, p, b0, ty, ones.clone()),
            }
            push(&mut edges, b0, b1, "FALL_THROUGH", ones.clone());
            push(
                &mut edges,
                b1,
                b2,
                "DIRECT_CONDITIONAL_BRANCH",
                iters.clone(),
            );
            push(
                &mut edges,
                b2,
                b1,
                "DIRECT_UNCONDITIONAL_BRANCH",
                iters.clone(),
            );
            if nested {
                push(&mut edges, b2, b2, "REP", reps.clone());
            }
            push(&mut edges, b1, b3, "FALL_THROUGH", ones.clone());
            push(&mut edges, b3, b4, "FALL_THROUGH", ones.clone());
            push(&mut edges, b3, b5, "CALL_BYPASS", counts_of(&|_| 0));
            push(&mut edges, b4, b5, "FALL_THROUGH", ones.clone());
            prev = Some((
                b5,
                if r % 3 == 0 {
                    "DIRECT_CALL"
                } else {
                    "DIRECT_UNCONDITIONAL_BRANCH"
                },
            ));
            let mut loops = vec![Loop {
                head: b1,
                back_edge_sources: vec![b2],
                nodes: vec![b1, b2],
                parent: None,
            }];
            if nested {
                loops.push(Loop {
                    head: b2,
                    back_edge_sources: vec![b2],
                    nodes: vec![b2],
                    parent: Some(b1),
                });
            }
            routines.push(Routine {
                entry: b0,
                exits: vec![b5],
                nodes: [(b0, b0), (b1, b0), (b2, b1), (b3, b1), (b4, b3), (b5, b3)]
                    .map(|(id, idom)| RoutineNode { id, idom })
                    .to_vec(),
                loops: Some(loops),
            });
        }
        images.push(Image {
            id: i.saturating_add(1),
            load_addr,
            size: offset.saturating_add(0x1000),
            has_data: true,
            file_name_id: Some(image_file),
            symbols: Some(symbols),
            source_data: Some(source),
            basic_blocks: Some(blocks),
            routines: Some(routines),
        });
    }
    if let Some((p, _)) = prev {
        push(&mut edges, p, 2, "EXIT", ones.clone());
    }
    let total = per_thread.iter().fold(0u64, |a, &c| a.saturating_add(c));
    Dcfg {
        major_version: 1,
        minor_version: 0,
        file_names: Some(file_names),
        edge_types: Some(
            INTEL_EDGE_TYPES
                .iter()
                .enumerate()
                .map(|(i, n)| EdgeType {
                    id: (i as u64).saturating_add(1),
                    name: (*n).to_owned(),
                })
                .collect(),
        ),
        special_nodes: Some(
            [(1, "START"), (2, "END"), (3, "UNKNOWN")]
                .map(|(id, name)| SpecialNode {
                    id,
                    name: name.to_owned(),
                })
                .to_vec(),
        ),
        processes: vec![Process {
            id: 4242u64.wrapping_add(cfg.seed % 1000),
            instr_count: Some(total),
            instr_count_per_thread: Some(per_thread),
            images: Some(images),
            edges: Some(Edges::from(edges)),
            has_data: true,
        }],
    }
}

/// The graph of `d` rewritten the way the QEMU plugin writes DCFGs: version 0.01; image and
/// file ids like inode numbers; node ids `pc XOR instructions` (above 2^53); START and END
/// with large ids; one edge type `[27, "UNKNOWN"]`; SIZE and LAST_INSTR_OFFSET 0; SYMBOLS,
/// SOURCE_DATA and ROUTINES present with their header rows only.
#[must_use]
pub fn qemu_dialect(d: &Dcfg) -> Dcfg {
    let mut out = d.clone();
    out.major_version = 0;
    out.minor_version = 1;
    let start = 0xffff_8000_0000_0001u64;
    let end = 0xffff_8000_0000_0002u64;
    let mut map = std::collections::HashMap::new();
    map.insert(1u64, start);
    map.insert(2u64, end);
    for p in &mut out.processes {
        for img in p.images.iter_mut().flatten() {
            img.load_addr = img.load_addr.wrapping_add(0xffff_0000_0000_0000);
            for b in img.basic_blocks.iter_mut().flatten() {
                let pc = img.load_addr.wrapping_add(b.addr_offset);
                let id = pc ^ u64::from(b.num_instrs);
                map.insert(b.id, id);
                b.id = id;
                b.size = 0;
                b.last_instr_offset = Some(0);
            }
            img.id = img.id.wrapping_add(9_007_199_254_740_000);
            img.file_name_id = img
                .file_name_id
                .map(|f| f.wrapping_add(9_007_199_254_740_000));
            img.symbols = Some(Symbols::new());
            img.source_data = Some(Vec::new());
            img.routines = Some(Vec::new());
        }
        if let Some(edges) = &p.edges {
            let rows: Vec<Edge> = edges
                .iter()
                .map(|e| Edge {
                    id: e.id.wrapping_add(1 << 60),
                    source: map.get(&e.source).copied().unwrap_or(e.source),
                    target: map.get(&e.target).copied().unwrap_or(e.target),
                    type_id: 27,
                    counts: e.counts.clone(),
                })
                .collect();
            p.edges = Some(Edges::from(rows));
        }
    }
    for f in out.file_names.iter_mut().flatten() {
        f.id = f.id.wrapping_add(9_007_199_254_740_000);
    }
    out.edge_types = Some(vec![EdgeType {
        id: 27,
        name: "UNKNOWN".to_owned(),
    }]);
    out.special_nodes = Some(vec![
        SpecialNode {
            id: start,
            name: "START".to_owned(),
        },
        SpecialNode {
            id: end,
            name: "END".to_owned(),
        },
    ]);
    out
}

/// How [`dialect_json`] spells integers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IntStyle {
    /// Every integer as a `"0x…"` string.
    HexEverywhere,
    /// Every integer, addresses too, as a JSON number.
    NumbersOnly,
}

enum J {
    Null,
    Int(u64, bool),
    Str(String),
    Arr(Vec<J>),
    Obj(Vec<(&'static str, J)>),
}

impl J {
    fn write(&self, out: &mut String, indent: usize) {
        match self {
            J::Null => out.push_str("null"),
            J::Int(v, true) => out.push_str(&format!("\"{v:#x}\"")),
            J::Int(v, false) => out.push_str(&v.to_string()),
            J::Str(s) => {
                out.push('"');
                for c in s.chars() {
                    match c {
                        '"' => out.push_str("\\\""),
                        '\\' => out.push_str("\\\\"),
                        c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
                        c => out.push(c),
                    }
                }
                out.push('"');
            }
            J::Arr(v) => {
                let flat = v.iter().all(|x| !matches!(x, J::Arr(_) | J::Obj(_)));
                out.push('[');
                for (i, x) in v.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    if !flat {
                        out.push('\n');
                        out.push_str(&" ".repeat(indent.saturating_add(1)));
                    }
                    x.write(out, indent.saturating_add(1));
                }
                if !flat && !v.is_empty() {
                    out.push('\n');
                    out.push_str(&" ".repeat(indent));
                }
                out.push(']');
            }
            J::Obj(kv) => {
                out.push('{');
                for (i, (k, v)) in kv.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    out.push('\n');
                    out.push_str(&" ".repeat(indent.saturating_add(1)));
                    out.push_str(&format!("\"{k}\": "));
                    v.write(out, indent.saturating_add(1));
                }
                out.push('\n');
                out.push_str(&" ".repeat(indent));
                out.push('}');
            }
        }
    }
}

/// JSON text for `d` in a non-Intel dialect: integers as `style` says, object keys in the
/// reverse of Intel's order plus an unknown key, table columns rotated left by `rotate`
/// (short rows are padded with `null`), and an unknown trailing column in `BASIC_BLOCKS`.
#[must_use]
pub fn dialect_json(d: &Dcfg, style: IntStyle, rotate: usize) -> Vec<u8> {
    let hex = style == IntStyle::HexEverywhere;
    let int = |v: u64| J::Int(v, hex);
    let opt = |v: Option<u64>| v.map_or(J::Null, |v| J::Int(v, hex));
    let ints = |v: &[u64]| J::Arr(v.iter().map(|&x| J::Int(x, hex)).collect());
    let table = |cols: &[&str], rows: Vec<Vec<J>>| -> J {
        let n = cols.len();
        let r = rotate.checked_rem(n).unwrap_or(0);
        let mut header: Vec<J> = cols.iter().map(|c| J::Str((*c).to_owned())).collect();
        header.rotate_left(r);
        let mut out = vec![J::Arr(header)];
        for mut row in rows {
            while row.len() < n {
                row.push(J::Null);
            }
            row.rotate_left(r);
            out.push(J::Arr(row));
        }
        J::Arr(out)
    };
    let mut top: Vec<(&'static str, J)> = Vec::new();
    top.push((
        "X_VENDOR_EXTENSION",
        J::Obj(vec![("NOTE", J::Str("ignored".into()))]),
    ));
    let procs: Vec<Vec<J>> = d
        .processes
        .iter()
        .map(|p| {
            let mut pd: Vec<(&'static str, J)> = Vec::new();
            if let Some(e) = &p.edges {
                pd.push((
                    "EDGES",
                    table(
                        &crate::raw::EDGE_COLUMNS,
                        e.iter()
                            .map(|e| {
                                vec![
                                    int(e.id),
                                    int(e.source),
                                    int(e.target),
                                    int(e.type_id),
                                    ints(&e.counts.to_vec()),
                                ]
                            })
                            .collect(),
                    ),
                ));
            }
            if let Some(images) = &p.images {
                let rows = images
                    .iter()
                    .map(|i| {
                        let mut id: Vec<(&'static str, J)> = Vec::new();
                        if let Some(r) = &i.routines {
                            id.push((
                                "ROUTINES",
                                table(
                                    &crate::raw::ROUTINE_COLUMNS,
                                    r.iter()
                                        .map(|r| {
                                            let mut row = vec![
                                                int(r.entry),
                                                ints(&r.exits),
                                                table(
                                                    &crate::raw::ROUTINE_NODE_COLUMNS,
                                                    r.nodes
                                                        .iter()
                                                        .map(|n| vec![int(n.id), int(n.idom)])
                                                        .collect(),
                                                ),
                                            ];
                                            if let Some(l) = &r.loops {
                                                row.push(table(
                                                    &crate::raw::LOOP_COLUMNS,
                                                    l.iter()
                                                        .map(|l| {
                                                            vec![
                                                                int(l.head),
                                                                ints(&l.back_edge_sources),
                                                                ints(&l.nodes),
                                                                opt(l.parent),
                                                            ]
                                                        })
                                                        .collect(),
                                                ));
                                            }
                                            row
                                        })
                                        .collect(),
                                ),
                            ));
                        }
                        if let Some(b) = &i.basic_blocks {
                            let mut cols = crate::raw::BLOCK_COLUMNS.to_vec();
                            cols.push("X_EXTRA_COLUMN");
                            id.push((
                                "BASIC_BLOCKS",
                                table(
                                    &cols,
                                    b.iter()
                                        .map(|b| {
                                            vec![
                                                int(b.id),
                                                int(b.addr_offset),
                                                int(b.size.into()),
                                                int(b.num_instrs.into()),
                                                opt(b.last_instr_offset.map(u64::from)),
                                                opt(b.count),
                                                J::Obj(vec![("ANY", J::Arr(vec![J::Null]))]),
                                            ]
                                        })
                                        .collect(),
                                ),
                            ));
                        }
                        if let Some(s) = &i.source_data {
                            id.push((
                                "SOURCE_DATA",
                                table(
                                    &crate::raw::SOURCE_COLUMNS,
                                    s.iter()
                                        .map(|s| {
                                            vec![
                                                int(s.file_name_id),
                                                int(s.line.into()),
                                                int(s.addr_offset),
                                                opt(s.size.map(u64::from)),
                                                opt(s.num_instrs.map(u64::from)),
                                            ]
                                        })
                                        .collect(),
                                ),
                            ));
                        }
                        if let Some(s) = &i.symbols {
                            id.push((
                                "SYMBOLS",
                                table(
                                    &crate::raw::SYMBOL_COLUMNS,
                                    s.iter()
                                        .map(|s| {
                                            vec![
                                                J::Str(s.name.to_owned()),
                                                int(s.addr_offset),
                                                opt(s.size),
                                            ]
                                        })
                                        .collect(),
                                ),
                            ));
                        }
                        if let Some(f) = i.file_name_id {
                            id.push(("FILE_NAME_ID", int(f)));
                        }
                        let mut row = vec![int(i.id), int(i.load_addr), int(i.size)];
                        if i.has_data {
                            row.push(J::Obj(id));
                        }
                        row
                    })
                    .collect();
                pd.push(("IMAGES", table(&crate::raw::IMAGE_COLUMNS, rows)));
            }
            if let Some(c) = p.instr_count {
                pd.push(("INSTR_COUNT", int(c)));
            }
            if let Some(v) = &p.instr_count_per_thread {
                pd.push(("INSTR_COUNT_PER_THREAD", ints(v)));
            }
            let mut row = vec![int(p.id)];
            if p.has_data {
                row.push(J::Obj(pd));
            }
            row
        })
        .collect();
    top.push(("PROCESSES", table(&crate::raw::PROCESS_COLUMNS, procs)));
    if let Some(s) = &d.special_nodes {
        top.push((
            "SPECIAL_NODES",
            table(
                &crate::raw::SPECIAL_NODE_COLUMNS,
                s.iter()
                    .map(|n| vec![int(n.id), J::Str(n.name.clone())])
                    .collect(),
            ),
        ));
    }
    if let Some(t) = &d.edge_types {
        top.push((
            "EDGE_TYPES",
            table(
                &crate::raw::EDGE_TYPE_COLUMNS,
                t.iter()
                    .map(|t| vec![int(t.id), J::Str(t.name.clone())])
                    .collect(),
            ),
        ));
    }
    if let Some(f) = &d.file_names {
        top.push((
            "FILE_NAMES",
            table(
                &crate::raw::FILE_NAME_COLUMNS,
                f.iter()
                    .map(|f| vec![int(f.id), J::Str(f.name.clone())])
                    .collect(),
            ),
        ));
    }
    top.push(("MINOR_VERSION", int(d.minor_version)));
    top.push(("MAJOR_VERSION", int(d.major_version)));
    let mut s = String::new();
    J::Obj(top).write(&mut s, 0);
    s.push('\n');
    s.into_bytes()
}
