//! Queries over one process: the navigation and counting Intel's DCFG API offers.
//!
//! A [`Graph`] borrows a [`Dcfg`] and one of its [`Process`]es and builds the indexes once
//! (block id → image/routine/innermost loop, edge id, (source, target) pair, inbound and
//! outbound adjacency, sorted block addresses). All lookups by id return `None` (or an empty
//! list) for unknown ids; nothing panics on inconsistent files.
//!
//! Counting conventions (documented where Intel's tools disagree):
//! - a block's execution count is its `COUNT` column when present, otherwise the sum of its
//!   inbound edges' counts; per-thread block counts always come from inbound edges;
//! - a block's instruction count is `NUM_INSTRS × executions`, and a loop's, routine's,
//!   image's or process's is the sum over its blocks (this differs slightly from the
//!   process's `INSTR_COUNT` in real files, which is normal);
//! - loop "visits" are the executions of the loop's entry edges, and
//!   [`LoopStats::iterations`] is the head block's execution count (Intel's `dcfg-reader`
//!   convention); the back-edge count and the entry count are reported separately.

use std::collections::HashMap;

use smallvec::SmallVec;

use crate::model::{BasicBlock, Dcfg, Edge, EdgeKind, Image, Loop, Process, Routine, SpecialKind};

const NONE: u32 = u32::MAX;

#[derive(Clone, Copy, Debug)]
struct BlockInfo {
    image: u32,
    block: u32,
    routine: u32,
    inner_loop: u32,
}

#[derive(Clone, Copy, Debug)]
struct LoopInfo {
    image: u32,
    routine: u32,
    index: u32,
    depth: u32,
}

/// A part of a process whose inbound, outbound and internal edges can be asked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Container {
    /// Every basic block of the process (special nodes are outside: edges from START are
    /// inbound, edges to END outbound).
    Process,
    /// The blocks of the image with this id.
    Image(u64),
    /// The blocks of the routine with this entry block id.
    Routine(u64),
    /// The blocks of the loop with this head block id.
    Loop(u64),
    /// One block.
    Block(u64),
}

/// The edges of a [`Container`], split by whether their ends are inside.
#[derive(Clone, Debug, Default)]
pub struct ContainerEdges<'a> {
    /// Source outside, target inside.
    pub inbound: Vec<&'a Edge>,
    /// Source inside, target outside.
    pub outbound: Vec<&'a Edge>,
    /// Both ends inside.
    pub internal: Vec<&'a Edge>,
}

/// Statistics of one loop, as loop-tracker and dcfg-reader print them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LoopStats {
    /// The loop id (its head block id).
    pub head: u64,
    /// Nesting depth: 1 for an outer loop.
    pub depth: u32,
    /// Executions of the head block.
    pub head_count: u64,
    /// Executions of the back edges (loop node → head).
    pub back_edge_count: u64,
    /// Executions of the entry edges (outside → loop, returns excluded): the visits.
    pub entry_count: u64,
    /// Sum of `NUM_INSTRS` over the loop's blocks.
    pub static_instrs: u64,
    /// Sum of `NUM_INSTRS × executions` over the loop's blocks.
    pub dynamic_instrs: u64,
}

impl LoopStats {
    /// Visits: how many times the loop was entered (the entry edges' executions), as
    /// LoopPoint counts them.
    #[must_use]
    pub fn visits(&self) -> u64 {
        self.entry_count
    }

    /// Iterations as Intel's `dcfg-reader` prints them: the head block's executions. (For a
    /// loop entered only through its head this is `back_edge_count + entry_count`; some tools
    /// print `back_edge_count` instead.)
    #[must_use]
    pub fn iterations(&self) -> u64 {
        self.head_count
    }
}

/// Indexes over one process of a DCFG, built once by [`Graph::new`] (or [`Dcfg::graph`]):
/// block id → image, routine and innermost loop; edge id; (source, target) pair; inbound
/// and outbound adjacency; sorted block addresses. Unknown ids give `None` or empty lists.
///
/// Counting conventions: a block's executions are its `COUNT` column when present, else
/// the sum of its inbound edges' counts (per-thread block counts always come from inbound
/// edges); instruction counts are `NUM_INSTRS × executions` summed over a container's
/// blocks (slightly different from `INSTR_COUNT` in real files, which is normal). Loop
/// visits are the executions of its entry edges; [`LoopStats::iterations`] is the head
/// block's executions (Intel's `dcfg-reader`), with the back-edge and entry counts
/// reported separately.
#[derive(Debug)]
pub struct Graph<'a> {
    dcfg: &'a Dcfg,
    process: &'a Process,
    blocks: HashMap<u64, BlockInfo>,
    routines: HashMap<u64, (u32, u32)>,
    loops: HashMap<u64, LoopInfo>,
    edge_ids: HashMap<u64, u32>,
    edge_pairs: HashMap<(u64, u64), u32>,
    outbound: HashMap<u64, SmallVec<[u32; 2]>>,
    inbound: HashMap<u64, SmallVec<[u32; 2]>>,
    kinds: HashMap<u64, EdgeKind>,
    /// (absolute start, size, block id), sorted by start.
    by_addr: Vec<(u64, u64, u64)>,
    max_block_size: u64,
    /// Per image, its symbols' and source lines' indices sorted by offset (stable).
    symbol_order: Vec<Vec<u32>>,
    source_order: Vec<Vec<u32>>,
}

/// The positions of `keys` sorted (stably) by key.
fn order_by(keys: impl Iterator<Item = u64>) -> Vec<u32> {
    let keys: Vec<u64> = keys.collect();
    let mut order: Vec<u32> = (0..keys.len()).map(idx).collect();
    order.sort_by_key(|&i| keys.get(i as usize).copied().unwrap_or(u64::MAX));
    order
}

/// The item (by index, in `order`, sorted by offset) with the greatest offset at most `off`
/// that `covers` `off`: a binary search, then a step back past items that end before `off`
/// (nested or overlapping ones; usually none).
fn covering<T>(
    item: impl Fn(usize) -> Option<T>,
    order: &[u32],
    off: u64,
    offset: impl Fn(&T) -> u64,
    covers: impl Fn(&T) -> bool,
) -> Option<T> {
    let end = order.partition_point(|&i| item(i as usize).is_some_and(|t| offset(&t) <= off));
    order
        .get(..end)?
        .iter()
        .rev()
        .filter_map(|&i| item(i as usize))
        .find(|t| covers(t))
}

fn idx(i: usize) -> u32 {
    u32::try_from(i).unwrap_or(NONE)
}

impl Dcfg {
    /// The query indexes of the process with OS pid `pid`.
    #[must_use]
    pub fn graph(&self, pid: u64) -> Option<Graph<'_>> {
        self.process(pid).map(|p| Graph::new(self, p))
    }
}

impl<'a> Graph<'a> {
    /// Builds the indexes of `process`, a process of `dcfg`. The first occurrence of a
    /// duplicate id wins (validation reports duplicates).
    #[must_use]
    pub fn new(dcfg: &'a Dcfg, process: &'a Process) -> Graph<'a> {
        // Sized up front: a map that grows by doubling can hold twice the room it needs.
        let images = process.images();
        let blocks: usize = images.iter().map(|i| i.basic_blocks().len()).sum();
        let routines: usize = images.iter().map(|i| i.routines().len()).sum();
        let loops: usize = images
            .iter()
            .flat_map(|i| i.routines().iter().map(|r| r.loops().len()))
            .sum();
        let edges = process.edge_count();
        let mut g = Graph {
            dcfg,
            process,
            blocks: HashMap::with_capacity(blocks),
            routines: HashMap::with_capacity(routines),
            loops: HashMap::with_capacity(loops),
            edge_ids: HashMap::with_capacity(edges),
            edge_pairs: HashMap::with_capacity(edges),
            outbound: HashMap::with_capacity(blocks),
            inbound: HashMap::with_capacity(blocks),
            kinds: HashMap::new(),
            by_addr: Vec::with_capacity(blocks),
            max_block_size: 0,
            symbol_order: process
                .images()
                .iter()
                .map(|i| order_by(i.symbols().iter().map(|s| s.addr_offset)))
                .collect(),
            source_order: process
                .images()
                .iter()
                .map(|i| order_by(i.source_data().iter().map(|s| s.addr_offset)))
                .collect(),
        };
        for t in dcfg.edge_types.as_deref().unwrap_or_default() {
            g.kinds.entry(t.id).or_insert_with(|| t.kind());
        }
        for (ii, image) in process.images().iter().enumerate() {
            for (bi, b) in image.basic_blocks().iter().enumerate() {
                g.blocks.entry(b.id).or_insert(BlockInfo {
                    image: idx(ii),
                    block: idx(bi),
                    routine: NONE,
                    inner_loop: NONE,
                });
                g.by_addr.push((
                    image.load_addr.wrapping_add(b.addr_offset),
                    b.size.into(),
                    b.id,
                ));
                g.max_block_size = g.max_block_size.max(b.size.into());
            }
        }
        g.by_addr.sort_unstable();
        for (ii, image) in process.images().iter().enumerate() {
            for (ri, r) in image.routines().iter().enumerate() {
                g.routines.entry(r.entry).or_insert((idx(ii), idx(ri)));
                for n in &r.nodes {
                    if let Some(info) = g.blocks.get_mut(&n.id)
                        && info.routine == NONE
                        && info.image == idx(ii)
                    {
                        info.routine = idx(ri);
                    }
                }
                for (li, l) in r.loops().iter().enumerate() {
                    g.loops.entry(l.head).or_insert(LoopInfo {
                        image: idx(ii),
                        routine: idx(ri),
                        index: idx(li),
                        depth: 0,
                    });
                }
            }
        }
        // Depths from the parent chains, each loop's once (linear time even for long
        // chains); a cycle, which only a damaged file has, is cut where it closes.
        let heads: Vec<u64> = g.loops.keys().copied().collect();
        g.compute_depths(&heads);
        // Innermost loop of every block: the deepest loop listing it.
        for head in &heads {
            let Some(info) = g.loops.get(head).copied() else {
                continue;
            };
            let Some(l) = g.loop_at(info) else { continue };
            for n in &l.nodes {
                let current = g.blocks.get(n).map(|b| b.inner_loop);
                let deeper = match current {
                    Some(NONE) => true,
                    Some(cur) => {
                        let cur_head = g
                            .routine_at(info.image, info.routine)
                            .and_then(|r| r.loops().get(cur as usize))
                            .map(|l| l.head);
                        let cur_depth = cur_head
                            .and_then(|h| g.loops.get(&h))
                            .map_or(0, |l| l.depth);
                        info.depth > cur_depth
                    }
                    None => false,
                };
                if deeper
                    && let Some(b) = g.blocks.get_mut(n)
                    && b.image == info.image
                    && b.routine == info.routine
                {
                    b.inner_loop = info.index;
                }
            }
        }
        for (ei, e) in process.edges().enumerate() {
            let i = idx(ei);
            g.edge_ids.entry(e.id).or_insert(i);
            g.edge_pairs.entry((e.source, e.target)).or_insert(i);
            g.outbound.entry(e.source).or_default().push(i);
            g.inbound.entry(e.target).or_default().push(i);
        }
        g
    }

    /// Sets the depth of every loop of `heads`: 1 plus the number of its ancestors.
    fn compute_depths(&mut self, heads: &[u64]) {
        // `depth` 0: not known yet; `ON_PATH`: on the chain being walked.
        const ON_PATH: u32 = u32::MAX;
        let mut path = Vec::new();
        for &head in heads {
            path.clear();
            let mut cur = head;
            let mut base = 0u32;
            while let Some(info) = self.loops.get(&cur).copied() {
                match info.depth {
                    0 => {}
                    ON_PATH => break,
                    known => {
                        base = known;
                        break;
                    }
                }
                path.push(cur);
                if let Some(l) = self.loops.get_mut(&cur) {
                    l.depth = ON_PATH;
                }
                match self.loop_at(info).and_then(Loop::parent_head) {
                    Some(parent) => cur = parent,
                    None => break,
                }
            }
            for n in path.iter().rev() {
                base = base.saturating_add(1).min(ON_PATH - 1);
                if let Some(l) = self.loops.get_mut(n) {
                    l.depth = base;
                }
            }
        }
    }

    fn routine_at(&self, image: u32, routine: u32) -> Option<&'a Routine> {
        self.process
            .images()
            .get(image as usize)?
            .routines()
            .get(routine as usize)
    }

    fn loop_at(&self, i: LoopInfo) -> Option<&'a Loop> {
        self.routine_at(i.image, i.routine)?
            .loops()
            .get(i.index as usize)
    }

    /// The DCFG.
    #[must_use]
    pub fn dcfg(&self) -> &'a Dcfg {
        self.dcfg
    }

    /// The process.
    #[must_use]
    pub fn process(&self) -> &'a Process {
        self.process
    }

    // ---- special nodes and edge types ----

    /// The id of a special node, found by name.
    #[must_use]
    pub fn special_node(&self, kind: SpecialKind) -> Option<u64> {
        self.dcfg.special_node_id(kind)
    }

    /// Whether `id` is a special node (START, END, UNKNOWN, …).
    #[must_use]
    pub fn is_special_node(&self, id: u64) -> bool {
        self.dcfg.is_special_node(id)
    }

    /// The kind of an edge, from its type id's name.
    #[must_use]
    pub fn edge_kind(&self, edge: &Edge) -> EdgeKind {
        self.kinds
            .get(&edge.type_id)
            .copied()
            .unwrap_or(EdgeKind::Other)
    }

    /// The type name of an edge (e.g. `"FALL_THROUGH"`).
    #[must_use]
    pub fn edge_type_name(&self, edge: &Edge) -> Option<&'a str> {
        self.dcfg.edge_type_name(edge.type_id)
    }

    // ---- navigation ----

    /// The image with this id.
    #[must_use]
    pub fn image(&self, id: u64) -> Option<&'a Image> {
        self.process.images().iter().find(|i| i.id == id)
    }

    /// The basic block with this id.
    #[must_use]
    pub fn block(&self, id: u64) -> Option<&'a BasicBlock> {
        let b = self.blocks.get(&id)?;
        self.process
            .images()
            .get(b.image as usize)?
            .basic_blocks()
            .get(b.block as usize)
    }

    /// The image a block belongs to.
    #[must_use]
    pub fn block_image(&self, id: u64) -> Option<&'a Image> {
        self.process
            .images()
            .get(self.blocks.get(&id)?.image as usize)
    }

    /// The routine a block belongs to.
    #[must_use]
    pub fn block_routine(&self, id: u64) -> Option<&'a Routine> {
        let b = self.blocks.get(&id)?;
        self.routine_at(b.image, b.routine)
    }

    /// The innermost loop containing a block.
    #[must_use]
    pub fn block_loop(&self, id: u64) -> Option<&'a Loop> {
        let b = self.blocks.get(&id)?;
        self.routine_at(b.image, b.routine)?
            .loops()
            .get(b.inner_loop as usize)
    }

    /// The absolute address of a block's first instruction.
    #[must_use]
    pub fn block_addr(&self, id: u64) -> Option<u64> {
        let img = self.block_image(id)?;
        Some(img.load_addr.wrapping_add(self.block(id)?.addr_offset))
    }

    /// The absolute address of a block's last instruction (`None` without
    /// `LAST_INSTR_OFFSET`).
    #[must_use]
    pub fn block_last_addr(&self, id: u64) -> Option<u64> {
        let b = self.block(id)?;
        Some(
            self.block_addr(id)?
                .wrapping_add(b.last_instr_offset?.into()),
        )
    }

    /// The routine with this entry block id.
    #[must_use]
    pub fn routine(&self, entry: u64) -> Option<&'a Routine> {
        let &(i, r) = self.routines.get(&entry)?;
        self.routine_at(i, r)
    }

    /// The image of the routine with this entry block id.
    #[must_use]
    pub fn routine_image(&self, entry: u64) -> Option<&'a Image> {
        self.process
            .images()
            .get(self.routines.get(&entry)?.0 as usize)
    }

    /// The loop with this head block id.
    #[must_use]
    pub fn loop_by_head(&self, head: u64) -> Option<&'a Loop> {
        self.loop_at(*self.loops.get(&head)?)
    }

    /// The routine of the loop with this head block id.
    #[must_use]
    pub fn loop_routine(&self, head: u64) -> Option<&'a Routine> {
        let i = self.loops.get(&head)?;
        self.routine_at(i.image, i.routine)
    }

    /// Every loop of the process with its image and routine, in file order.
    pub fn loops(&self) -> impl Iterator<Item = (&'a Image, &'a Routine, &'a Loop)> + 'a {
        self.process.images().iter().flat_map(|i| {
            i.routines()
                .iter()
                .flat_map(move |r| r.loops().iter().map(move |l| (i, r, l)))
        })
    }

    /// The edge with this id.
    #[must_use]
    pub fn edge(&self, id: u64) -> Option<&'a Edge> {
        self.process
            .edges
            .as_ref()?
            .get(*self.edge_ids.get(&id)? as usize)
    }

    /// The edge from `source` to `target`.
    #[must_use]
    pub fn edge_between(&self, source: u64, target: u64) -> Option<&'a Edge> {
        self.process
            .edges
            .as_ref()?
            .get(*self.edge_pairs.get(&(source, target))? as usize)
    }

    fn edges_of(&self, list: Option<&SmallVec<[u32; 2]>>) -> impl Iterator<Item = &'a Edge> + 'a {
        let edges = self.process.edges.as_ref();
        let list: SmallVec<[u32; 2]> = list.cloned().unwrap_or_default();
        list.into_iter()
            .filter_map(move |i| edges.and_then(|e| e.get(i as usize)))
    }

    /// Edges leaving a node (block or special node), in file order.
    pub fn outbound_edges(&self, node: u64) -> impl Iterator<Item = &'a Edge> + 'a {
        self.edges_of(self.outbound.get(&node))
    }

    /// Edges entering a node, in file order.
    pub fn inbound_edges(&self, node: u64) -> impl Iterator<Item = &'a Edge> + 'a {
        self.edges_of(self.inbound.get(&node))
    }

    /// Targets of a node's outbound edges.
    pub fn successors(&self, node: u64) -> impl Iterator<Item = u64> + 'a {
        self.outbound_edges(node).map(|e| e.target)
    }

    /// Sources of a node's inbound edges.
    pub fn predecessors(&self, node: u64) -> impl Iterator<Item = u64> + 'a {
        self.inbound_edges(node).map(|e| e.source)
    }

    // ---- containers ----

    /// The block ids of a container (for a loop, its `LOOP_NODE_IDS`).
    #[must_use]
    pub fn container_blocks(&self, c: Container) -> Vec<u64> {
        match c {
            Container::Process => self.process.blocks().map(|(_, b)| b.id).collect(),
            Container::Image(id) => self
                .image(id)
                .map(|i| i.basic_blocks().iter().map(|b| b.id).collect())
                .unwrap_or_default(),
            Container::Routine(e) => self
                .routine(e)
                .map(|r| r.nodes.iter().map(|n| n.id).collect())
                .unwrap_or_default(),
            Container::Loop(h) => self
                .loop_by_head(h)
                .map(|l| l.nodes.clone())
                .unwrap_or_default(),
            Container::Block(b) => self.block(b).map(|b| vec![b.id]).unwrap_or_default(),
        }
    }

    /// Whether block (or special node) `node` is inside container `c`.
    #[must_use]
    pub fn contains(&self, c: Container, node: u64) -> bool {
        match c {
            Container::Process => self.blocks.contains_key(&node),
            Container::Image(id) => self.block_image(node).is_some_and(|i| i.id == id),
            Container::Routine(e) => self.block_routine(node).is_some_and(|r| r.entry == e),
            Container::Loop(h) => self
                .loop_by_head(h)
                .is_some_and(|l| l.nodes.contains(&node)),
            Container::Block(b) => node == b && self.blocks.contains_key(&node),
        }
    }

    /// The inbound, outbound and internal edges of a container.
    #[must_use]
    pub fn container_edges(&self, c: Container) -> ContainerEdges<'a> {
        let blocks = self.container_blocks(c);
        let inside: std::collections::HashSet<u64> = blocks.iter().copied().collect();
        let mut out = ContainerEdges::default();
        for &b in &blocks {
            for e in self.outbound_edges(b) {
                if inside.contains(&e.target) {
                    out.internal.push(e);
                } else {
                    out.outbound.push(e);
                }
            }
            for e in self.inbound_edges(b) {
                if !inside.contains(&e.source) {
                    out.inbound.push(e);
                }
            }
        }
        out
    }

    // ---- addresses, symbols, source ----

    /// The blocks containing absolute address `addr` (usually 0 or 1; more after an image
    /// was unloaded and another loaded at the same place).
    #[must_use]
    pub fn blocks_at(&self, addr: u64) -> Vec<u64> {
        let end = self.by_addr.partition_point(|&(s, _, _)| s <= addr);
        let mut out = Vec::new();
        for &(start, size, id) in self.by_addr.get(..end).unwrap_or_default().iter().rev() {
            if addr.wrapping_sub(start) > self.max_block_size {
                break;
            }
            if addr.wrapping_sub(start) < size.max(1) {
                out.push(id);
            }
        }
        out.reverse();
        out
    }

    /// The blocks whose first instruction lies in a symbol named `name`, in any image.
    #[must_use]
    pub fn blocks_by_symbol(&self, name: &str) -> Vec<u64> {
        let mut out = Vec::new();
        for image in self.process.images() {
            for s in image.symbols().iter().filter(|s| s.name == name) {
                let end = s.addr_offset.saturating_add(s.size.unwrap_or(1).max(1));
                out.extend(
                    image
                        .basic_blocks()
                        .iter()
                        .filter(|b| b.addr_offset >= s.addr_offset && b.addr_offset < end)
                        .map(|b| b.id),
                );
            }
        }
        out
    }

    /// The blocks overlapping the code of source line `file:line`. `file` matches a full path
    /// or its last components (`"loop.c"` matches `"/src/loop.c"`).
    #[must_use]
    pub fn blocks_by_source(&self, file: &str, line: u64) -> Vec<u64> {
        let ids: Vec<u64> = self
            .dcfg
            .file_names
            .as_deref()
            .unwrap_or_default()
            .iter()
            .filter(|f| path_matches(&f.name, file))
            .map(|f| f.id)
            .collect();
        let mut out = Vec::new();
        for image in self.process.images() {
            for s in image
                .source_data()
                .iter()
                .filter(|s| u64::from(s.line) == line && ids.contains(&s.file_name_id))
            {
                let end = s
                    .addr_offset
                    .saturating_add(s.size.unwrap_or(1).max(1).into());
                for b in image.basic_blocks() {
                    let b_end = b.addr_offset.saturating_add(b.size.max(1).into());
                    if b.addr_offset < end && s.addr_offset < b_end && !out.contains(&b.id) {
                        out.push(b.id);
                    }
                }
            }
        }
        out
    }

    /// The symbol containing a block's first instruction and the offset into it
    /// (`main+0x10`): the symbol with the highest start not above the block whose range
    /// covers it.
    #[must_use]
    pub fn block_symbol(&self, id: u64) -> Option<(&'a str, u64)> {
        let ii = self.blocks.get(&id)?.image as usize;
        let image = self.process.images().get(ii)?;
        let off = self.block(id)?.addr_offset;
        covering(
            |i| image.symbols().get(i),
            self.symbol_order.get(ii)?,
            off,
            |s| s.addr_offset,
            |s| {
                s.size
                    .is_none_or(|z| off.wrapping_sub(s.addr_offset) < z.max(1))
            },
        )
        .map(|s| (s.name, off.wrapping_sub(s.addr_offset)))
    }

    /// The source file and line of a block's first instruction.
    #[must_use]
    pub fn block_source(&self, id: u64) -> Option<(&'a str, u64)> {
        let ii = self.blocks.get(&id)?.image as usize;
        let image = self.process.images().get(ii)?;
        let off = self.block(id)?.addr_offset;
        let s = covering(
            |i| image.source_data().get(i),
            self.source_order.get(ii)?,
            off,
            |s| s.addr_offset,
            |s| off.wrapping_sub(s.addr_offset) < s.size.unwrap_or(1).max(1).into(),
        )?;
        Some((self.dcfg.file_name(s.file_name_id)?, s.line.into()))
    }

    // ---- counts ----

    /// A block's executions: `COUNT` if present, else the sum of its inbound edges.
    #[must_use]
    pub fn block_count(&self, id: u64) -> u64 {
        match self.block(id).and_then(|b| b.count) {
            Some(c) => c,
            None => self.inbound_count(id),
        }
    }

    /// The sum of the counts of a node's inbound edges (all threads).
    #[must_use]
    pub fn inbound_count(&self, id: u64) -> u64 {
        self.inbound_edges(id)
            .fold(0u64, |a, e| a.saturating_add(e.count()))
    }

    /// The sum of the counts of a node's outbound edges (all threads).
    #[must_use]
    pub fn outbound_count(&self, id: u64) -> u64 {
        self.outbound_edges(id)
            .fold(0u64, |a, e| a.saturating_add(e.count()))
    }

    /// A block's executions per thread (thread 0 first), from its inbound edges.
    #[must_use]
    pub fn block_counts_per_thread(&self, id: u64) -> Vec<u64> {
        let mut out = vec![0u64; self.process.threads()];
        for e in self.inbound_edges(id) {
            for (t, c) in e.counts.iter().enumerate() {
                if let Some(slot) = out.get_mut(t) {
                    *slot = slot.saturating_add(c);
                } else {
                    out.push(c);
                }
            }
        }
        out
    }

    /// Instructions executed in a block: `NUM_INSTRS × executions`.
    #[must_use]
    pub fn block_instr_count(&self, id: u64) -> u64 {
        self.block(id).map_or(0, |b| {
            u64::from(b.num_instrs).saturating_mul(self.block_count(id))
        })
    }

    /// Instructions executed in a container (sum over its blocks).
    #[must_use]
    pub fn instr_count(&self, c: Container) -> u64 {
        self.container_blocks(c)
            .iter()
            .fold(0u64, |a, &b| a.saturating_add(self.block_instr_count(b)))
    }

    /// Instructions executed in a container per thread (thread 0 first): `NUM_INSTRS ×` the
    /// block's per-thread executions (from inbound edges), summed over its blocks.
    #[must_use]
    pub fn instr_counts_per_thread(&self, c: Container) -> Vec<u64> {
        let mut out = vec![0u64; self.process.threads()];
        for b in self.container_blocks(c) {
            let n = self.block(b).map_or(0, |b| u64::from(b.num_instrs));
            for (t, k) in self.block_counts_per_thread(b).into_iter().enumerate() {
                let v = n.saturating_mul(k);
                match out.get_mut(t) {
                    Some(slot) => *slot = slot.saturating_add(v),
                    None => out.push(v),
                }
            }
        }
        out
    }

    /// Static instructions of a container (sum of `NUM_INSTRS`).
    #[must_use]
    pub fn static_instr_count(&self, c: Container) -> u64 {
        self.container_blocks(c).iter().fold(0u64, |a, &b| {
            a.saturating_add(self.block(b).map_or(0, |b| b.num_instrs.into()))
        })
    }

    // ---- loops ----

    /// The parent loop's head.
    #[must_use]
    pub fn loop_parent(&self, head: u64) -> Option<u64> {
        self.loop_by_head(head)?
            .parent_head()
            .filter(|p| self.loops.contains_key(p))
    }

    /// Nesting depth: 1 for an outer loop, 0 for an unknown head.
    #[must_use]
    pub fn loop_depth(&self, head: u64) -> u32 {
        self.loops.get(&head).map_or(0, |l| l.depth)
    }

    /// The heads of the loops directly inside this one.
    #[must_use]
    pub fn loop_children(&self, head: u64) -> Vec<u64> {
        let Some(r) = self.loop_routine(head) else {
            return Vec::new();
        };
        r.loops()
            .iter()
            .filter(|l| l.parent_head() == Some(head) && l.head != head)
            .map(|l| l.head)
            .collect()
    }

    /// Whether the loop has no inner loops.
    #[must_use]
    pub fn is_innermost_loop(&self, head: u64) -> bool {
        self.loop_children(head).is_empty()
    }

    /// Entry edges of a loop: edges from outside its nodes into them, returns excluded
    /// (a return into the loop comes back from a call made inside it).
    #[must_use]
    pub fn loop_entry_edges(&self, head: u64) -> Vec<&'a Edge> {
        self.container_edges(Container::Loop(head))
            .inbound
            .into_iter()
            .filter(|e| !self.edge_kind(e).is_any_return())
            .collect()
    }

    /// Exit edges of a loop: edges from its nodes to outside, calls excluded (control
    /// comes back to the loop).
    #[must_use]
    pub fn loop_exit_edges(&self, head: u64) -> Vec<&'a Edge> {
        self.container_edges(Container::Loop(head))
            .outbound
            .into_iter()
            .filter(|e| !self.edge_kind(e).is_any_call())
            .collect()
    }

    /// Back edges of a loop: edges from one of its nodes to its head.
    #[must_use]
    pub fn loop_back_edges(&self, head: u64) -> Vec<&'a Edge> {
        let Some(l) = self.loop_by_head(head) else {
            return Vec::new();
        };
        self.inbound_edges(head)
            .filter(|e| l.nodes.contains(&e.source) || l.back_edge_sources.contains(&e.source))
            .collect()
    }

    /// The statistics of a loop.
    #[must_use]
    pub fn loop_stats(&self, head: u64) -> LoopStats {
        let sum = |v: Vec<&Edge>| v.iter().fold(0u64, |a, e| a.saturating_add(e.count()));
        LoopStats {
            head,
            depth: self.loop_depth(head),
            head_count: self.block_count(head),
            back_edge_count: sum(self.loop_back_edges(head)),
            entry_count: sum(self.loop_entry_edges(head)),
            static_instrs: self.static_instr_count(Container::Loop(head)),
            dynamic_instrs: self.instr_count(Container::Loop(head)),
        }
    }

    // ---- routines ----

    /// The immediate dominator of a block, from its routine's `NODES` table.
    #[must_use]
    pub fn idom(&self, block: u64) -> Option<u64> {
        self.block_routine(block)?.idom(block)
    }

    /// Edges entering a routine at its entry block from outside the routine.
    #[must_use]
    pub fn routine_entry_edges(&self, entry: u64) -> Vec<&'a Edge> {
        self.inbound_edges(entry)
            .filter(|e| !self.contains(Container::Routine(entry), e.source))
            .collect()
    }

    /// Edges leaving a routine (from any of its blocks to a node outside it).
    #[must_use]
    pub fn routine_exit_edges(&self, entry: u64) -> Vec<&'a Edge> {
        self.container_edges(Container::Routine(entry)).outbound
    }

    /// How many times a routine was entered (its entry edges' executions).
    #[must_use]
    pub fn routine_entry_count(&self, entry: u64) -> u64 {
        self.routine_entry_edges(entry)
            .iter()
            .fold(0u64, |a, e| a.saturating_add(e.count()))
    }

    /// How many times a routine was entered, per thread.
    #[must_use]
    pub fn routine_entry_count_per_thread(&self, entry: u64) -> Vec<u64> {
        let mut out = vec![0u64; self.process.threads()];
        for e in self.routine_entry_edges(entry) {
            for (t, c) in e.counts.iter().enumerate() {
                if let Some(slot) = out.get_mut(t) {
                    *slot = slot.saturating_add(c);
                }
            }
        }
        out
    }
}

fn path_matches(full: &str, query: &str) -> bool {
    full == query
        || full
            .strip_suffix(query)
            .is_some_and(|rest| rest.ends_with('/') || rest.ends_with('\\'))
}
