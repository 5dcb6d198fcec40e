//! A DCFG's graph as lightweight Python objects: processes → images → routines → loops →
//! blocks → edges. Each object is a shared handle on the parsed DCFG (`dcfg::Dcfg`) and
//! the indices that locate it, so navigating copies nothing; blocks and edges are found
//! by id through one index per process, built once when the graph is loaded.

use std::collections::HashMap;
use std::sync::Arc;

use pyo3::prelude::*;

/// The DCFG and, per process, where each block is and which edges leave and enter it.
struct Shared {
    dcfg: dcfg::Dcfg,
    index: Vec<ProcIndex>,
}

#[derive(Default)]
struct ProcIndex {
    /// Block id → (image, block) positions.
    blocks: HashMap<u64, (usize, usize)>,
    /// Node id → positions of its outbound / inbound edges.
    out: HashMap<u64, Vec<usize>>,
    inn: HashMap<u64, Vec<usize>>,
}

impl Shared {
    fn new(dcfg: dcfg::Dcfg) -> Shared {
        let index = dcfg
            .processes
            .iter()
            .map(|p| {
                let mut x = ProcIndex::default();
                for (ii, image) in p.images().iter().enumerate() {
                    for (bi, b) in image.basic_blocks().iter().enumerate() {
                        x.blocks.entry(b.id).or_insert((ii, bi));
                    }
                }
                for (ei, e) in p.edges().enumerate() {
                    x.out.entry(e.source).or_default().push(ei);
                    x.inn.entry(e.target).or_default().push(ei);
                }
                x
            })
            .collect();
        Shared { dcfg, index }
    }

    fn process(&self, p: usize) -> Option<&dcfg::Process> {
        self.dcfg.processes.get(p)
    }

    fn image(&self, p: usize, i: usize) -> Option<&dcfg::Image> {
        self.process(p)?.images().get(i)
    }

    fn routine(&self, p: usize, i: usize, r: usize) -> Option<&dcfg::Routine> {
        self.image(p, i)?.routines().get(r)
    }

    fn edge(&self, p: usize, e: usize) -> Option<&dcfg::Edge> {
        self.process(p)?.edges.as_ref()?.get(e)
    }

    /// The block objects of these ids in process `p` (ids that are no block are left out).
    fn blocks(self: &Arc<Self>, p: usize, ids: impl Iterator<Item = u64>) -> Vec<Block> {
        let Some(x) = self.index.get(p) else {
            return Vec::new();
        };
        ids.filter_map(|id| {
            x.blocks.get(&id).map(|&(image, block)| Block {
                g: Arc::clone(self),
                p,
                image,
                block,
            })
        })
        .collect()
    }

    fn edges(self: &Arc<Self>, p: usize, which: Option<&Vec<usize>>) -> Vec<Edge> {
        which.map_or_else(Vec::new, |v| {
            v.iter()
                .map(|&e| Edge {
                    g: Arc::clone(self),
                    p,
                    e,
                })
                .collect()
        })
    }
}

/// A DCFG's graph: `processes`, and `process(pid)`.
#[pyclass(module = "tracekit", frozen)]
pub(crate) struct Graph {
    g: Arc<Shared>,
}

impl Graph {
    pub(crate) fn new(d: dcfg::Dcfg) -> Graph {
        Graph {
            g: Arc::new(Shared::new(d)),
        }
    }
}

#[pymethods]
impl Graph {
    /// Every process.
    #[getter]
    fn processes(&self) -> Vec<Process> {
        (0..self.g.dcfg.processes.len())
            .map(|p| Process {
                g: Arc::clone(&self.g),
                p,
            })
            .collect()
    }

    /// The process of this pid, or None.
    fn process(&self, pid: u64) -> Option<Process> {
        let p = self.g.dcfg.processes.iter().position(|x| x.id == pid)?;
        Some(Process {
            g: Arc::clone(&self.g),
            p,
        })
    }

    fn __repr__(&self) -> String {
        format!(
            "<tracekit.Graph {} process(es)>",
            self.g.dcfg.processes.len()
        )
    }
}

/// A process: `id`, `instr_count`, `images`, `edges`, `block(id)`, `edge(id)`.
#[pyclass(module = "tracekit", frozen)]
pub(crate) struct Process {
    g: Arc<Shared>,
    p: usize,
}

#[pymethods]
impl Process {
    /// The pid.
    #[getter]
    fn id(&self) -> u64 {
        self.g.process(self.p).map_or(0, |p| p.id)
    }

    /// Instructions executed over all threads, if recorded.
    #[getter]
    fn instr_count(&self) -> Option<u64> {
        self.g.process(self.p)?.instr_count
    }

    /// The images.
    #[getter]
    fn images(&self) -> Vec<Image> {
        let n = self.g.process(self.p).map_or(0, |p| p.images().len());
        (0..n)
            .map(|i| Image {
                g: Arc::clone(&self.g),
                p: self.p,
                i,
            })
            .collect()
    }

    /// Every edge.
    #[getter]
    fn edges(&self) -> Vec<Edge> {
        let n = self.g.process(self.p).map_or(0, dcfg::Process::edge_count);
        (0..n)
            .map(|e| Edge {
                g: Arc::clone(&self.g),
                p: self.p,
                e,
            })
            .collect()
    }

    /// The block of this node id, or None.
    fn block(&self, id: u64) -> Option<Block> {
        self.g.blocks(self.p, std::iter::once(id)).pop()
    }

    /// The edge of this id, or None.
    fn edge(&self, id: u64) -> Option<Edge> {
        let e = self.g.process(self.p)?.edges().position(|e| e.id == id)?;
        Some(Edge {
            g: Arc::clone(&self.g),
            p: self.p,
            e,
        })
    }

    fn __repr__(&self) -> String {
        format!("<tracekit.Process {}>", self.id())
    }
}

/// An image: `id`, `load_addr`, `size`, `file_name`, `routines`, `blocks`.
#[pyclass(module = "tracekit", frozen)]
pub(crate) struct Image {
    g: Arc<Shared>,
    p: usize,
    i: usize,
}

#[pymethods]
impl Image {
    /// The image id.
    #[getter]
    fn id(&self) -> u64 {
        self.g.image(self.p, self.i).map_or(0, |i| i.id)
    }

    /// Where the image was loaded.
    #[getter]
    fn load_addr(&self) -> u64 {
        self.g.image(self.p, self.i).map_or(0, |i| i.load_addr)
    }

    /// Its size in bytes.
    #[getter]
    fn size(&self) -> u64 {
        self.g.image(self.p, self.i).map_or(0, |i| i.size)
    }

    /// Its path, if the DCFG names it.
    #[getter]
    fn file_name(&self) -> Option<String> {
        let id = self.g.image(self.p, self.i)?.file_name_id?;
        self.g.dcfg.file_name(id).map(str::to_owned)
    }

    /// Its routines.
    #[getter]
    fn routines(&self) -> Vec<Routine> {
        let n = self
            .g
            .image(self.p, self.i)
            .map_or(0, |i| i.routines().len());
        (0..n)
            .map(|r| Routine {
                g: Arc::clone(&self.g),
                p: self.p,
                i: self.i,
                r,
            })
            .collect()
    }

    /// Its basic blocks.
    #[getter]
    fn blocks(&self) -> Vec<Block> {
        let n = self
            .g
            .image(self.p, self.i)
            .map_or(0, |i| i.basic_blocks().len());
        (0..n)
            .map(|block| Block {
                g: Arc::clone(&self.g),
                p: self.p,
                image: self.i,
                block,
            })
            .collect()
    }

    fn __repr__(&self) -> String {
        format!("<tracekit.Image {} at {:#x}>", self.id(), self.load_addr())
    }
}

/// A routine: `entry` (its id), `exits`, `loops`, `blocks`.
#[pyclass(module = "tracekit", frozen)]
pub(crate) struct Routine {
    g: Arc<Shared>,
    p: usize,
    i: usize,
    r: usize,
}

#[pymethods]
impl Routine {
    /// The entry block's id (the routine's id).
    #[getter]
    fn entry(&self) -> u64 {
        self.g
            .routine(self.p, self.i, self.r)
            .map_or(0, |r| r.entry)
    }

    /// The ids of the blocks with edges leaving the routine.
    #[getter]
    fn exits(&self) -> Vec<u64> {
        self.g
            .routine(self.p, self.i, self.r)
            .map_or_else(Vec::new, |r| r.exits.clone())
    }

    /// Its loops.
    #[getter]
    fn loops(&self) -> Vec<Loop> {
        let n = self
            .g
            .routine(self.p, self.i, self.r)
            .map_or(0, |r| r.loops().len());
        (0..n)
            .map(|l| Loop {
                g: Arc::clone(&self.g),
                p: self.p,
                i: self.i,
                r: self.r,
                l,
            })
            .collect()
    }

    /// Its blocks.
    #[getter]
    fn blocks(&self) -> Vec<Block> {
        let ids: Vec<u64> = self
            .g
            .routine(self.p, self.i, self.r)
            .map_or_else(Vec::new, |r| r.nodes.iter().map(|n| n.id).collect());
        self.g.blocks(self.p, ids.into_iter())
    }

    /// The immediate dominator of block `id` in this routine, or None.
    fn idom(&self, id: u64) -> Option<u64> {
        self.g.routine(self.p, self.i, self.r)?.idom(id)
    }

    fn __repr__(&self) -> String {
        format!("<tracekit.Routine entry={}>", self.entry())
    }
}

/// A loop: `head` (its id), `parent` (the parent loop's head or None),
/// `back_edge_sources`, `blocks`.
#[pyclass(module = "tracekit", frozen)]
pub(crate) struct Loop {
    g: Arc<Shared>,
    p: usize,
    i: usize,
    r: usize,
    l: usize,
}

impl Loop {
    fn get(&self) -> Option<&dcfg::Loop> {
        self.g.routine(self.p, self.i, self.r)?.loops().get(self.l)
    }
}

#[pymethods]
impl Loop {
    /// The head block's id (the loop's id).
    #[getter]
    fn head(&self) -> u64 {
        self.get().map_or(0, |l| l.head)
    }

    /// The parent loop's head, None for an outer loop.
    #[getter]
    fn parent(&self) -> Option<u64> {
        self.get()?.parent_head()
    }

    /// The ids of the blocks whose edges go back to the head.
    #[getter]
    fn back_edge_sources(&self) -> Vec<u64> {
        self.get()
            .map_or_else(Vec::new, |l| l.back_edge_sources.clone())
    }

    /// Its blocks (the head and inner loops' blocks included).
    #[getter]
    fn blocks(&self) -> Vec<Block> {
        let ids = self.get().map_or_else(Vec::new, |l| l.nodes.clone());
        self.g.blocks(self.p, ids.into_iter())
    }

    fn __repr__(&self) -> String {
        format!("<tracekit.Loop head={}>", self.head())
    }
}

/// A basic block: `id`, `addr`, `size`, `num_instrs`, `count`, `out_edges`, `in_edges`,
/// `successors`, `predecessors`.
#[pyclass(module = "tracekit", frozen)]
pub(crate) struct Block {
    g: Arc<Shared>,
    p: usize,
    image: usize,
    block: usize,
}

impl Block {
    fn get(&self) -> Option<(&dcfg::Image, &dcfg::BasicBlock)> {
        let image = self.g.image(self.p, self.image)?;
        Some((image, image.basic_blocks().get(self.block)?))
    }

    fn id_or_zero(&self) -> u64 {
        self.get().map_or(0, |(_, b)| b.id)
    }
}

#[pymethods]
impl Block {
    /// The node id.
    #[getter]
    fn id(&self) -> u64 {
        self.id_or_zero()
    }

    /// The address of its first instruction.
    #[getter]
    fn addr(&self) -> u64 {
        self.get()
            .map_or(0, |(i, b)| i.load_addr.wrapping_add(b.addr_offset))
    }

    /// Its size in bytes.
    #[getter]
    fn size(&self) -> u32 {
        self.get().map_or(0, |(_, b)| b.size)
    }

    /// Its instruction count.
    #[getter]
    fn num_instrs(&self) -> u32 {
        self.get().map_or(0, |(_, b)| b.num_instrs)
    }

    /// Its execution count, if recorded.
    #[getter]
    fn count(&self) -> Option<u64> {
        self.get()?.1.count
    }

    /// The edges leaving it.
    #[getter]
    fn out_edges(&self) -> Vec<Edge> {
        let id = self.id_or_zero();
        self.g.edges(
            self.p,
            self.g.index.get(self.p).and_then(|x| x.out.get(&id)),
        )
    }

    /// The edges entering it.
    #[getter]
    fn in_edges(&self) -> Vec<Edge> {
        let id = self.id_or_zero();
        self.g.edges(
            self.p,
            self.g.index.get(self.p).and_then(|x| x.inn.get(&id)),
        )
    }

    /// The blocks its edges lead to (special nodes left out).
    #[getter]
    fn successors(&self) -> Vec<Block> {
        let targets: Vec<u64> = self
            .out_edges()
            .iter()
            .filter_map(|e| self.g.edge(e.p, e.e).map(|e| e.target))
            .collect();
        self.g.blocks(self.p, targets.into_iter())
    }

    /// The blocks whose edges lead here (special nodes left out).
    #[getter]
    fn predecessors(&self) -> Vec<Block> {
        let sources: Vec<u64> = self
            .in_edges()
            .iter()
            .filter_map(|e| self.g.edge(e.p, e.e).map(|e| e.source))
            .collect();
        self.g.blocks(self.p, sources.into_iter())
    }

    fn __repr__(&self) -> String {
        format!("<tracekit.Block {} at {:#x}>", self.id(), self.addr())
    }
}

/// An edge: `id`, `source`, `target` (node ids), `type` (its name), `count`,
/// `counts` (per thread).
#[pyclass(module = "tracekit", frozen)]
pub(crate) struct Edge {
    g: Arc<Shared>,
    p: usize,
    e: usize,
}

#[pymethods]
impl Edge {
    /// The edge id.
    #[getter]
    fn id(&self) -> u64 {
        self.g.edge(self.p, self.e).map_or(0, |e| e.id)
    }

    /// The source node id.
    #[getter]
    fn source(&self) -> u64 {
        self.g.edge(self.p, self.e).map_or(0, |e| e.source)
    }

    /// The target node id.
    #[getter]
    fn target(&self) -> u64 {
        self.g.edge(self.p, self.e).map_or(0, |e| e.target)
    }

    /// The edge type's name (e.g. `"FALL_THROUGH"`), if the DCFG names it.
    #[getter]
    fn r#type(&self) -> Option<String> {
        let e = self.g.edge(self.p, self.e)?;
        let types = self.g.dcfg.edge_types.as_ref()?;
        types
            .iter()
            .find(|t| t.id == e.type_id)
            .map(|t| t.name.clone())
    }

    /// Executions over all threads.
    #[getter]
    fn count(&self) -> u64 {
        self.g.edge(self.p, self.e).map_or(0, dcfg::Edge::count)
    }

    /// Executions per thread, thread 0 first.
    #[getter]
    fn counts(&self) -> Vec<u64> {
        self.g
            .edge(self.p, self.e)
            .map_or_else(Vec::new, |e| e.counts.to_vec())
    }

    fn __repr__(&self) -> String {
        format!(
            "<tracekit.Edge {}: {} -> {}>",
            self.id(),
            self.source(),
            self.target()
        )
    }
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Graph>()?;
    m.add_class::<Process>()?;
    m.add_class::<Image>()?;
    m.add_class::<Routine>()?;
    m.add_class::<Loop>()?;
    m.add_class::<Block>()?;
    m.add_class::<Edge>()?;
    Ok(())
}
