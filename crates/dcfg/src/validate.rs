//! Validation: consistency findings with JSON paths, never panics.
//!
//! Paths index data rows from 0 (the header row is not counted), e.g.
//! `PROCESSES[0].IMAGES[2].BASIC_BLOCKS[5]`. Checked:
//! - unique ids (file names, edge types, special nodes, images, blocks across the process,
//!   routines, loops, edges) and unique (source, target) pairs;
//! - referential integrity: file-name and edge-type ids exist; edge ends are blocks or
//!   special nodes (and not UNKNOWN); a block is in one image and one routine; routine entry,
//!   exit, node and dominator ids are blocks of the routine's image and routine; loop heads,
//!   nodes, back-edge sources and parents belong to the loop's routine;
//! - `COUNT_PER_THREAD` has one entry per thread (`INSTR_COUNT_PER_THREAD`'s length);
//! - the invariants Intel's files satisfy: `Σ INSTR_COUNT_PER_THREAD = INSTR_COUNT`, and a
//!   block's `COUNT` equals the sum of its inbound edges' counts and of its outbound edges'
//!   counts (blocks touching no edge at all are exempt).
//!
//! `Σ(COUNT × NUM_INSTRS)` differing from `INSTR_COUNT` is normal and not reported.

use std::collections::{HashMap, HashSet};
use std::fmt;

use crate::model::{Dcfg, Process, SpecialKind};

/// One problem found by [`Dcfg::validate`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Finding {
    /// Where, e.g. `PROCESSES[0].EDGES[12]`.
    pub path: String,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path, self.message)
    }
}

/// Values by node or edge id, for the checks over whole processes (millions of ids): a
/// vector indexed by id when the ids are dense, as Intel numbers them (from 1 up), else a
/// hash map. The vector's length is bounded by the number of ids, so by the input's size.
#[derive(Clone)]
enum IdMap<V> {
    Dense(Vec<Option<V>>),
    Sparse(HashMap<u64, V>),
}

impl<V: Copy> IdMap<V> {
    /// A map for (at most) `count` ids, the largest `max`.
    fn new(count: usize, max: Option<u64>) -> IdMap<V> {
        let dense_limit = count.saturating_mul(2).saturating_add(1024);
        match max.and_then(|m| usize::try_from(m).ok()) {
            Some(m) if m < dense_limit => IdMap::Dense(vec![None; m.saturating_add(1)]),
            _ => IdMap::Sparse(HashMap::with_capacity(count)),
        }
    }

    /// A map for the ids `ids`.
    fn for_ids(ids: impl Iterator<Item = u64>) -> IdMap<V> {
        let (count, max) = ids.fold((0usize, None), |(n, m): (usize, Option<u64>), id| {
            (n.saturating_add(1), Some(m.map_or(id, |m| m.max(id))))
        });
        IdMap::new(count, max)
    }

    fn get(&self, id: u64) -> Option<V> {
        match self {
            IdMap::Dense(v) => usize::try_from(id)
                .ok()
                .and_then(|i| v.get(i))
                .copied()
                .flatten(),
            IdMap::Sparse(m) => m.get(&id).copied(),
        }
    }

    /// Inserts `value` unless `id` has one: the value already there, if any.
    fn insert_first(&mut self, id: u64, value: V) -> Option<V> {
        match self {
            IdMap::Dense(v) => match usize::try_from(id).ok().and_then(|i| v.get_mut(i)) {
                Some(slot) => {
                    let old = *slot;
                    if old.is_none() {
                        *slot = Some(value);
                    }
                    old
                }
                // Not among the ids the map was made for: cannot happen.
                None => None,
            },
            IdMap::Sparse(m) => match m.entry(id) {
                std::collections::hash_map::Entry::Occupied(e) => Some(*e.get()),
                std::collections::hash_map::Entry::Vacant(e) => {
                    e.insert(value);
                    None
                }
            },
        }
    }

    /// Changes the value of `id` (`None` if it has none yet).
    fn update(&mut self, id: u64, f: impl FnOnce(Option<V>) -> V) {
        match self {
            IdMap::Dense(v) => {
                if let Some(slot) = usize::try_from(id).ok().and_then(|i| v.get_mut(i)) {
                    *slot = Some(f(*slot));
                }
            }
            IdMap::Sparse(m) => {
                let old = m.get(&id).copied();
                m.insert(id, f(old));
            }
        }
    }
}

struct Findings(Vec<Finding>);

impl Findings {
    fn push(&mut self, path: impl Into<String>, message: impl Into<String>) {
        self.0.push(Finding {
            path: path.into(),
            message: message.into(),
        });
    }
}

impl Dcfg {
    /// Checks the DCFG's consistency; an empty list means no problem was found.
    #[must_use]
    pub fn validate(&self) -> Vec<Finding> {
        let mut f = Findings(Vec::new());
        let file_ids = unique_ids(
            &mut f,
            "FILE_NAMES",
            self.file_names.iter().flatten().map(|x| x.id),
            "file-name id",
        );
        let type_ids = unique_ids(
            &mut f,
            "EDGE_TYPES",
            self.edge_types.iter().flatten().map(|x| x.id),
            "edge-type id",
        );
        let special = unique_ids(
            &mut f,
            "SPECIAL_NODES",
            self.special_nodes.iter().flatten().map(|x| x.id),
            "special node id",
        );
        let mut names = HashSet::new();
        for (i, n) in self.special_nodes.iter().flatten().enumerate() {
            if !names.insert(n.name.as_str()) {
                f.push(
                    format!("SPECIAL_NODES[{i}]"),
                    format!("special node name {:?} appears twice", n.name),
                );
            }
        }
        let mut pids = HashSet::new();
        for (pi, p) in self.processes.iter().enumerate() {
            if !pids.insert(p.id) {
                f.push(
                    format!("PROCESSES[{pi}]"),
                    format!("process id {} appears twice", p.id),
                );
            }
            self.validate_process(
                &mut f,
                &format!("PROCESSES[{pi}]"),
                p,
                &file_ids,
                &type_ids,
                &special,
            );
        }
        f.0
    }

    fn validate_process(
        &self,
        f: &mut Findings,
        path: &str,
        p: &Process,
        file_ids: &HashSet<u64>,
        type_ids: &HashSet<u64>,
        special: &HashSet<u64>,
    ) {
        if let (Some(total), Some(per)) = (p.instr_count, &p.instr_count_per_thread) {
            let sum = per.iter().fold(0u64, |a, &c| a.saturating_add(c));
            if sum != total {
                f.push(
                    path,
                    format!("INSTR_COUNT_PER_THREAD sums to {sum}, INSTR_COUNT is {total}"),
                );
            }
        }
        let block_image = validate_blocks(f, path, p, file_ids, special);
        validate_routines(f, path, p, &block_image);
        self.validate_edges(f, path, p, &block_image, type_ids, special);
    }

    /// The process's edges: ids, pairs, nodes, types, per-thread counts, and the blocks'
    /// `COUNT` against the sums of their edges' counts.
    fn validate_edges(
        &self,
        f: &mut Findings,
        path: &str,
        p: &Process,
        block_image: &IdMap<usize>,
        type_ids: &HashSet<u64>,
        special: &HashSet<u64>,
    ) {
        let Some(edges) = &p.edges else { return };
        let threads = p.instr_count_per_thread.as_ref().map(Vec::len);
        let unknown = self.special_node_id(SpecialKind::Unknown);
        let mut ids: IdMap<()> = IdMap::for_ids(edges.iter().map(|e| e.id));
        // Edges whose (source, target) an earlier edge has: found by sorting, which is
        // faster than hashing millions of pairs.
        let mut by_pair: Vec<(u64, u64, usize)> = edges
            .iter()
            .enumerate()
            .map(|(ei, e)| (e.source, e.target, ei))
            .collect();
        by_pair.sort_unstable();
        let mut repeated_pair = vec![false; edges.len()];
        for w in by_pair.windows(2) {
            if let [(s0, t0, _), (s1, t1, ei)] = w
                && (s0, t0) == (s1, t1)
                && let Some(r) = repeated_pair.get_mut(*ei)
            {
                *r = true;
            }
        }
        drop(by_pair);
        let mut inbound: IdMap<u64> =
            IdMap::for_ids(edges.iter().flat_map(|e| [e.source, e.target]));
        let mut outbound = inbound.clone();
        for (ei, e) in edges.iter().enumerate() {
            let epath = || format!("{path}.EDGES[{ei}]");
            if ids.insert_first(e.id, ()).is_some() {
                f.push(epath(), format!("edge id {} appears twice", e.id));
            }
            if repeated_pair.get(ei) == Some(&true) {
                f.push(
                    epath(),
                    format!("a second edge from {} to {}", e.source, e.target),
                );
            }
            for (what, n) in [("source", e.source), ("target", e.target)] {
                if block_image.get(n).is_none() && !special.contains(&n) {
                    f.push(
                        epath(),
                        format!("{what} node {n} is neither a basic block nor a special node"),
                    );
                }
                if Some(n) == unknown {
                    f.push(epath(), format!("{what} node {n} is the UNKNOWN node"));
                }
            }
            if !type_ids.contains(&e.type_id) {
                f.push(
                    epath(),
                    format!("EDGE_TYPE_ID {} is not in EDGE_TYPES", e.type_id),
                );
            }
            if let Some(t) = threads
                && e.counts.len() != t
            {
                f.push(
                    epath(),
                    format!(
                        "COUNT_PER_THREAD has {} entries for {t} threads",
                        e.counts.len()
                    ),
                );
            }
            let c = e.count();
            inbound.update(e.target, |s| s.unwrap_or(0).saturating_add(c));
            outbound.update(e.source, |s| s.unwrap_or(0).saturating_add(c));
        }
        for (ii, img) in p.images().iter().enumerate() {
            for (bi, b) in img.basic_blocks().iter().enumerate() {
                let Some(count) = b.count else { continue };
                let (i, o) = (inbound.get(b.id), outbound.get(b.id));
                if i.is_none() && o.is_none() {
                    continue;
                }
                let bpath = format!("{path}.IMAGES[{ii}].BASIC_BLOCKS[{bi}]");
                let i = i.unwrap_or(0);
                let o = o.unwrap_or(0);
                if i != count {
                    f.push(
                        &bpath,
                        format!(
                            "COUNT {count} differs from the sum of its inbound edge counts {i}"
                        ),
                    );
                }
                if o != count {
                    f.push(
                        &bpath,
                        format!(
                            "COUNT {count} differs from the sum of its outbound edge counts {o}"
                        ),
                    );
                }
            }
        }
    }
}

/// The process's images and blocks: unique ids, known file names, block ids neither special
/// nor repeated. Returns the map from block id to image index.
fn validate_blocks(
    f: &mut Findings,
    path: &str,
    p: &Process,
    file_ids: &HashSet<u64>,
    special: &HashSet<u64>,
) -> IdMap<usize> {
    // Blocks: id → image index.
    let mut block_image: IdMap<usize> = IdMap::for_ids(
        p.images()
            .iter()
            .flat_map(|i| i.basic_blocks().iter().map(|b| b.id)),
    );
    let mut image_ids = HashSet::new();
    for (ii, img) in p.images().iter().enumerate() {
        let ipath = format!("{path}.IMAGES[{ii}]");
        if !image_ids.insert(img.id) {
            f.push(&ipath, format!("image id {} appears twice", img.id));
        }
        if let Some(fid) = img.file_name_id
            && !file_ids.contains(&fid)
        {
            f.push(&ipath, format!("FILE_NAME_ID {fid} is not in FILE_NAMES"));
        }
        for (si, s) in img.source_data().iter().enumerate() {
            if !file_ids.contains(&s.file_name_id) {
                f.push(
                    format!("{ipath}.SOURCE_DATA[{si}]"),
                    format!("FILE_NAME_ID {} is not in FILE_NAMES", s.file_name_id),
                );
            }
        }
        for (bi, b) in img.basic_blocks().iter().enumerate() {
            // Paths are made only for findings: most files have none.
            let bpath = || format!("{ipath}.BASIC_BLOCKS[{bi}]");
            if special.contains(&b.id) {
                f.push(bpath(), format!("block id {} is a special node id", b.id));
            }
            if let Some(other) = block_image.insert_first(b.id, ii) {
                f.push(
                    bpath(),
                    format!("block id {} is already used in IMAGES[{other}]", b.id),
                );
            }
        }
    }
    block_image
}

/// The process's routines and their loops, against the blocks of each image.
fn validate_routines(f: &mut Findings, path: &str, p: &Process, block_image: &IdMap<usize>) {
    // Node id → (image, routine) indices.
    let mut block_routine: IdMap<(usize, usize)> =
        IdMap::for_ids(p.images().iter().flat_map(|i| {
            i.routines()
                .iter()
                .flat_map(|r| r.nodes.iter().map(|n| n.id))
        }));
    let mut routine_entries = HashSet::new();
    for (ii, img) in p.images().iter().enumerate() {
        let in_image = |id: u64| block_image.get(id) == Some(ii);
        for (ri, r) in img.routines().iter().enumerate() {
            let rpath = format!("{path}.IMAGES[{ii}].ROUTINES[{ri}]");
            if !routine_entries.insert(r.entry) {
                f.push(&rpath, format!("routine entry {} appears twice", r.entry));
            }
            if !in_image(r.entry) {
                f.push(
                    &rpath,
                    format!("entry node {} is not a block of this image", r.entry),
                );
            }
            let nodes: HashSet<u64> = r.nodes.iter().map(|n| n.id).collect();
            if !nodes.contains(&r.entry) {
                f.push(&rpath, format!("entry node {} is not in NODES", r.entry));
            }
            for x in &r.exits {
                if !nodes.contains(x) {
                    f.push(&rpath, format!("exit node {x} is not in NODES"));
                }
            }
            for (ni, n) in r.nodes.iter().enumerate() {
                let npath = || format!("{rpath}.NODES[{ni}]");
                if !in_image(n.id) {
                    f.push(
                        npath(),
                        format!("node {} is not a block of this image", n.id),
                    );
                }
                if !nodes.contains(&n.idom) {
                    f.push(
                        npath(),
                        format!("immediate dominator {} is not in the routine", n.idom),
                    );
                }
                if let Some((pi, pr)) = block_routine.insert_first(n.id, (ii, ri)) {
                    f.push(
                        npath(),
                        format!(
                            "node {} is also in {path}.IMAGES[{pi}].ROUTINES[{pr}]",
                            n.id
                        ),
                    );
                }
            }
            let heads: HashSet<u64> = r.loops().iter().map(|l| l.head).collect();
            let mut seen_heads = HashSet::new();
            for (li, l) in r.loops().iter().enumerate() {
                let lpath = format!("{rpath}.LOOPS[{li}]");
                if !seen_heads.insert(l.head) {
                    f.push(&lpath, format!("loop head {} appears twice", l.head));
                }
                if !nodes.contains(&l.head) {
                    f.push(
                        &lpath,
                        format!("loop head {} is not in the routine", l.head),
                    );
                }
                if !l.nodes.contains(&l.head) {
                    f.push(
                        &lpath,
                        format!("loop head {} is not in LOOP_NODE_IDS", l.head),
                    );
                }
                for n in &l.nodes {
                    if !nodes.contains(n) {
                        f.push(&lpath, format!("loop node {n} is not in the routine"));
                    }
                }
                for s in &l.back_edge_sources {
                    if !l.nodes.contains(s) {
                        f.push(
                            &lpath,
                            format!("back-edge source {s} is not in LOOP_NODE_IDS"),
                        );
                    }
                }
                if let Some(parent) = l.parent_head()
                    && (!heads.contains(&parent) || parent == l.head)
                {
                    f.push(
                        &lpath,
                        format!("parent loop {parent} is not another loop of the routine"),
                    );
                }
            }
        }
    }
}

fn unique_ids(
    f: &mut Findings,
    table: &str,
    ids: impl Iterator<Item = u64>,
    what: &str,
) -> HashSet<u64> {
    let mut set = HashSet::new();
    for (i, id) in ids.enumerate() {
        if !set.insert(id) {
            f.push(
                format!("{table}[{i}]"),
                format!("{what} {id} appears twice"),
            );
        }
    }
    set
}
