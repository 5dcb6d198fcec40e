//! Queries on the synthetic sample, whose structure is known by construction
//! (`dcfg::testgen::synthetic`): per routine, blocks b0..b5; b0 → b1 (fall-through), loop
//! b1 ⇄ b2, odd routines a REP self-loop on b2 (an inner loop), b1 → b3 → b4 → b5 and a
//! zero-count CALL_BYPASS b3 → b5; routines chained b5 → next b0; START → first b0 and
//! last b5 → END. Block ids start at 4, 6 per routine; 2 routines per image.

use dcfg::{Container, EdgeKind, SpecialKind};

use crate::sample;

#[test]
fn navigation_and_edges() {
    let d = sample();
    let p = &d.processes[0];
    let g = d.graph(p.id).unwrap();
    // Routine 1 of image 1 (odd: nested loop): blocks 10..=15.
    let (b0, b1, b2, b3, b4, b5) = (10, 11, 12, 13, 14, 15);
    assert_eq!(g.block_image(b2).unwrap().id, 1);
    assert_eq!(g.block_routine(b4).unwrap().entry, b0);
    assert_eq!(g.block_loop(b2).unwrap().head, b2, "innermost loop of b2");
    assert_eq!(g.block_loop(b1).unwrap().head, b1);
    assert_eq!(g.block_loop(b3), None);
    assert_eq!(g.loop_parent(b2), Some(b1));
    assert_eq!((g.loop_depth(b1), g.loop_depth(b2)), (1, 2));
    assert_eq!(g.loop_children(b1), vec![b2]);
    assert!(g.is_innermost_loop(b2) && !g.is_innermost_loop(b1));
    assert_eq!(g.idom(b5), Some(b3));
    assert_eq!(g.idom(b0), Some(b0));

    let mut succ: Vec<u64> = g.successors(b3).collect();
    succ.sort_unstable();
    assert_eq!(succ, vec![b4, b5]);
    let mut pred: Vec<u64> = g.predecessors(b1).collect();
    pred.sort_unstable();
    assert_eq!(pred, vec![b0, b2]);
    let bypass = g.edge_between(b3, b5).unwrap();
    assert_eq!(g.edge_kind(bypass), EdgeKind::CallBypass);
    assert!(g.edge_kind(bypass).is_any_bypass());
    assert_eq!(bypass.count(), 0);
    assert_eq!(g.edge(bypass.id), Some(bypass));
    let rep = g.edge_between(b2, b2).unwrap();
    assert!(g.edge_kind(rep).is_rep());

    // Containers: the routine is entered from routine 0's b5 (= 9) and left to routine 2's
    // b0 (= 16, in image 2).
    let ce = g.container_edges(Container::Routine(b0));
    assert_eq!(
        ce.inbound.iter().map(|e| e.source).collect::<Vec<_>>(),
        vec![9]
    );
    assert_eq!(
        ce.outbound.iter().map(|e| e.target).collect::<Vec<_>>(),
        vec![16]
    );
    assert_eq!(ce.internal.len(), 8);
    let img = g.container_edges(Container::Image(1));
    assert_eq!(img.inbound.len(), 1); // from START
    assert_eq!(img.outbound.len(), 1); // to image 2
    let pe = g.container_edges(Container::Process);
    assert_eq!(pe.inbound.len(), 1);
    assert_eq!(pe.outbound.len(), 1);
    assert_eq!(pe.internal.len() + 2, p.edge_count());
    assert_eq!(g.routine_exit_edges(b0).len(), 1);
    assert_eq!(g.routine_entry_count(b0), 2); // once per thread
    assert_eq!(g.routine_entry_count_per_thread(b0), vec![1, 1]);

    // START and END by name.
    let start = g.special_node(SpecialKind::Start).unwrap();
    let end = g.special_node(SpecialKind::End).unwrap();
    assert!(g.is_special_node(start) && !g.is_special_node(b0));
    assert_eq!(g.successors(start).collect::<Vec<_>>(), vec![4]);
    assert_eq!(g.predecessors(end).count(), 1);
}

#[test]
fn counts_and_loops() {
    let d = sample();
    let p = &d.processes[0];
    let g = d.graph(p.id).unwrap();
    let (b1, b2) = (11, 12);
    let back = g.edge_between(b2, b1).unwrap();
    let rep = g.edge_between(b2, b2).unwrap();
    // Per-thread block counts from inbound edges; COUNT is their total.
    let per = g.block_counts_per_thread(b2);
    assert_eq!(per.len(), 2);
    for (t, &c) in per.iter().enumerate() {
        assert_eq!(c, back.count_for_thread(t) + rep.count_for_thread(t));
    }
    assert_eq!(per.iter().sum::<u64>(), g.block_count(b2));
    let outer = g.loop_stats(b1);
    assert_eq!(outer.back_edge_count, back.count());
    assert_eq!(outer.entry_count, 2);
    assert_eq!(outer.iterations(), outer.head_count);
    assert_eq!(outer.head_count, back.count() + 2);
    let inner = g.loop_stats(b2);
    assert_eq!(inner.back_edge_count, rep.count());
    assert_eq!(inner.entry_count, back.count());
    assert_eq!(inner.depth, 2);
    let bb1 = g.block(b1).unwrap();
    let bb2 = g.block(b2).unwrap();
    assert_eq!(
        outer.static_instrs,
        u64::from(bb1.num_instrs + bb2.num_instrs)
    );
    assert_eq!(
        outer.dynamic_instrs,
        g.block_instr_count(b1) + g.block_instr_count(b2)
    );
    assert_eq!(g.loop_entry_edges(b1).len(), 1);
    assert_eq!(g.loop_exit_edges(b1).len(), 1);
    assert_eq!(g.loop_back_edges(b1).len(), 1);
    // The synthetic process is consistent: instruction counts add up exactly.
    assert_eq!(g.instr_count(Container::Process), p.instr_count.unwrap());
    // Per thread, the synthetic process's INSTR_COUNT_PER_THREAD exactly.
    assert_eq!(
        g.instr_counts_per_thread(Container::Process),
        p.instr_count_per_thread.clone().unwrap()
    );
    let by_image: u64 = p
        .images()
        .iter()
        .map(|i| g.instr_count(Container::Image(i.id)))
        .sum();
    assert_eq!(by_image, p.instr_count.unwrap());
    let by_routine: u64 = p
        .images()
        .iter()
        .flat_map(|i| i.routines())
        .map(|r| g.instr_count(Container::Routine(r.entry)))
        .sum();
    assert_eq!(by_routine, p.instr_count.unwrap());
}

#[test]
fn addresses_symbols_and_sources() {
    let d = sample();
    let g = d.graph(d.processes[0].id).unwrap();
    let b = g.block(11).unwrap();
    let addr = g.block_addr(11).unwrap();
    assert_eq!(addr, 0x40_0000 + b.addr_offset);
    assert_eq!(g.blocks_at(addr), vec![11]);
    let size = u64::from(b.size);
    assert_eq!(g.blocks_at(addr + size - 1), vec![11]);
    assert_eq!(g.blocks_at(addr + size), vec![12]);
    assert!(g.blocks_at(0x10).is_empty());
    assert_eq!(g.block_last_addr(11), Some(addr + size - 4));
    let (sym, off) = g.block_symbol(11).unwrap();
    assert_eq!(sym, "func_0_1");
    assert_eq!(off, b.addr_offset - g.block(10).unwrap().addr_offset);
    assert_eq!(g.blocks_by_symbol("func_0_1"), vec![10, 11, 12, 13, 14, 15]);
    assert_eq!(g.blocks_by_symbol("main"), vec![4, 5, 6, 7, 8, 9]);
    // Source lines: routine r, block k → line 10 r + k + 1 of /synth/src/file<image>.c.
    assert_eq!(g.block_source(11), Some(("/synth/src/file0.c", 12)));
    assert_eq!(g.blocks_by_source("file0.c", 12), vec![11]);
    assert_eq!(g.blocks_by_source("/synth/src/file0.c", 12), vec![11]);
    assert!(g.blocks_by_source("e0.c", 12).is_empty());
    assert_eq!(g.blocks_by_source("file1.c", 1), vec![16]);
}

#[test]
fn dot_and_loop_csv() {
    let d = sample();
    let mut out = Vec::new();
    d.write_dot(
        &mut out,
        &dcfg::DotOptions {
            loop_head: Some(12),
            hide_zero_edges: true,
            ..Default::default()
        },
    )
    .unwrap();
    let dot = String::from_utf8(out).unwrap();
    assert!(dot.starts_with("# DCFG version 1.00"));
    assert!(dot.contains("subgraph cluster_routine10 {"));
    assert!(!dot.contains("subgraph cluster_routine4 {"));
    assert!(dot.contains("node12 -> node11 [label=\"EDGE"));
    assert!(!dot.contains("CALL_BYPASS"), "zero-count edges hidden");
    assert_eq!(dot.matches('{').count(), dot.matches('}').count());
    crate::assert_golden("sample.loop12.dot.expected", &dot);

    let mut all = Vec::new();
    d.write_dot(&mut all, &dcfg::DotOptions::default()).unwrap();
    let all = String::from_utf8(all).unwrap();
    assert!(all.contains("CALL_BYPASS"));
    assert!(all.contains("subgraph cluster_image2 {"));
    let mut main_only = Vec::new();
    d.write_dot(
        &mut main_only,
        &dcfg::DotOptions {
            hide_libraries: true,
            ..Default::default()
        },
    )
    .unwrap();
    assert!(
        !String::from_utf8(main_only)
            .unwrap()
            .contains("cluster_image2")
    );

    let mut csv = Vec::new();
    d.write_loops_csv(&mut csv).unwrap();
    let csv = String::from_utf8(csv).unwrap();
    // 4 routines: 4 outer loops and 2 inner ones, plus the header.
    assert_eq!(csv.lines().count(), 7);
    crate::assert_golden("sample.loops.csv.expected", &csv);
}

/// Loop depths come from the parent chains in linear time: a chain of 50,000 nested loops
/// (and a cycle, which only a damaged file has) once took quadratic time. The time is
/// judged against the same number of unnested loops timed in the same run, not against
/// the clock: a loaded machine slows both alike (building the graph takes most of either),
/// while a quadratic walk adds N²/2 parent steps, many times the whole build.
#[test]
fn long_and_cyclic_loop_chains() {
    const N: u64 = 50_000;
    let base = 1 << 40;
    let with_loops = |parent: &dyn Fn(u64) -> Option<u64>| {
        let mut d = sample();
        let p = &mut d.processes[0];
        let r = &mut p.images.as_mut().unwrap()[0].routines.as_mut().unwrap()[0];
        let loops = (0..N).map(|i| dcfg::Loop {
            head: base + i,
            back_edge_sources: Vec::new(),
            nodes: vec![base + i],
            parent: parent(i),
        });
        r.loops = Some(loops.collect());
        d
    };
    let depths_timed = |d: &dcfg::Dcfg| {
        let start = std::time::Instant::now();
        let g = d.graph(d.processes[0].id).unwrap();
        let depths: Vec<u32> = (0..N).map(|i| g.loop_depth(base + i)).collect();
        (depths, start.elapsed())
    };
    let (flat, flat_time) = depths_timed(&with_loops(&|_| None));
    assert!(flat.iter().all(|&d| d == 1));
    let bound = (flat_time * 10).max(std::time::Duration::from_secs(2));
    for cycle in [false, true] {
        // Each loop inside the one before; with `cycle`, the first inside the last.
        let d = with_loops(&|i| match i {
            0 if cycle => Some(base + N - 1),
            0 => None,
            _ => Some(base + i - 1),
        });
        let (depths, time) = depths_timed(&d);
        assert!(time < bound, "{time:?} against {flat_time:?} unnested");
        if cycle {
            // Cut where the walk closed it: depths still run 1, 2, … along one chain.
            let mut sorted = depths.clone();
            sorted.sort_unstable();
            assert_eq!(sorted, (1..=N as u32).collect::<Vec<_>>());
        } else {
            assert_eq!(depths, (1..=N as u32).collect::<Vec<_>>());
        }
    }
}
