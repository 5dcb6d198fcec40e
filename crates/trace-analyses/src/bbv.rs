//! `bbv`: basic-block vectors for SimPoint, from any trace with blocks
//! ([`Handler::blocks`](trace_model::Handler::blocks): every format with an instruction stream,
//! and DCFG-Trace with its DCFG).
//!
//! The execution is cut into slices; a slice's vector counts the instructions executed in
//! each block during it, and is written as a `T:` line of SimPoint's `.bb` format
//! ([`simpoint::bb`]):
//!
//! - block ids are numbered from 1 in order of first execution over the whole input (one
//!   numbering for every output stream, so the vectors of different threads can be
//!   concatenated);
//! - a slice ends at the end of the block during which its instruction count reaches `N`,
//!   so slices are block-aligned and at least `N` long; the last, partial slice is written
//!   too, so the slice totals sum to the input's instructions;
//! - with `loop_bounded` (a DCFG with loops), a slice that has reached `N` ends only before
//!   the next entry into a loop header from outside the loop (LoopPoint's boundaries);
//! - between two slices, an `M: 0x<pc> <count>` marker: the pc that starts the next slice
//!   and its execution count so far in the stream's thread, counting that execution (with
//!   `global`, in all threads together). Every execution of the pc counts, also in the
//!   middle of a block: for pc streams the count is exact (each block number keeps the
//!   pcs of its longest run, and each thread how many runs of each length it made, so a
//!   marker costs a look-up rather than a count per instruction); DCFG-Trace records no
//!   pcs inside a block, so its count is the executions of the DCFG blocks starting at
//!   that pc (DCFG blocks are split at every entry point, so this is every execution of
//!   the pc as a block start).
//!
//! One output stream per thread (per process and thread), or one over the merged timeline
//! (`global`: blocks in file order).

use std::io::Write;

use simpoint::bb;
use smallvec::SmallVec;

use trace_model::Error;
use trace_model::blocks::{
    BlockDesc, BlockKeys, BlockRun, BlockSink, Blocks, PcMap, Pcs, StaticBatch, StaticCounts,
    StaticRun,
};

/// How to cut the slices.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BbvOptions {
    /// The slice size `N` in instructions (at least 1).
    pub slice: u64,
    /// One stream over the merged timeline instead of one per thread.
    pub global: bool,
    /// End slices only at loop entries (needs a stream with loops).
    pub loop_bounded: bool,
}

/// An output stream: a process and thread.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct StreamKey {
    /// The process (0 where the format has none).
    pub process: u64,
    /// The thread.
    pub thread: u64,
}

/// One output stream written.
#[derive(Debug)]
pub struct StreamResult<W> {
    /// Its thread, `None` for the merged timeline.
    pub key: Option<StreamKey>,
    /// The slices written.
    pub slices: u64,
    /// The instructions in them.
    pub instructions: u64,
    /// The output, flushed.
    pub out: W,
}

/// One line of the block map: a block id and what it stands for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MapRow {
    /// The id in the `.bb` files.
    pub id: u32,
    /// The block.
    pub desc: BlockDesc,
    /// Its static instruction count: the DCFG's `NUM_INSTRS`, or for a dynamic block the
    /// length of its longest run.
    pub instrs: u64,
}

/// What [`bbv`] produced.
#[derive(Debug)]
pub struct BbvResult<W> {
    /// The output streams, in order of first appearance.
    pub streams: Vec<StreamResult<W>>,
    /// Every block id, in id order.
    pub map: Vec<MapRow>,
    /// What the blocks' keys are.
    pub keys: BlockKeys,
}

/// Block runs of one length, per thread: (length, runs).
type Lengths = SmallVec<[(u32, u64); 1]>;

/// The pcs of a block's longest run so far (empty: no run with pcs yet).
#[derive(Clone, Debug)]
enum Chain {
    /// Listed pcs.
    Listed(Vec<u64>),
    /// `len` pcs from `start`, `stride` bytes apart.
    Stride { start: u64, stride: u64, len: u64 },
}

impl Default for Chain {
    fn default() -> Chain {
        Chain::Listed(Vec::new())
    }
}

impl Chain {
    fn len(&self) -> u64 {
        match self {
            Chain::Listed(c) => c.len() as u64,
            Chain::Stride { len, .. } => *len,
        }
    }

    fn pc_at(&self, k: u64) -> Option<u64> {
        match self {
            Chain::Listed(c) => c.get(usize::try_from(k).ok()?).copied(),
            Chain::Stride { start, stride, len } => {
                (k < *len).then(|| start.wrapping_add(k.wrapping_mul(*stride)))
            }
        }
    }
}

/// One output stream being written, and the counts its markers need.
struct Scope<W: Write> {
    key: Option<StreamKey>,
    writer: bb::Writer<W>,
    /// The current slice: instructions per block id and the ids touched.
    counts: Vec<u64>,
    touched: Vec<u32>,
    /// The current slice's runs of static blocks per block number (merged into `counts`
    /// when the slice closes), and the slice's instructions (it has reached `N` when they
    /// are at least `N`). Lent to the block stream while it counts.
    fast: StaticCounts,
    instructions: u64,
    /// Block runs without pcs before the current slice, per block number.
    starts: Vec<u64>,
    /// Regular runs of pc blocks per block number, by length.
    lengths: Vec<Lengths>,
    /// Executions per pc of the runs that did not follow their block's chain.
    irregular: PcMap<u64, u64>,
}

impl<W: Write> Scope<W> {
    /// Writes the current slice and starts the next; `ids` and `instrs` map block numbers
    /// to ids and static instruction counts.
    fn close(&mut self, ids: &[u32], instrs: &[u32]) -> Result<(), Error> {
        for &b in &self.fast.touched {
            let b = b as usize;
            let (Some(e), Some(&id)) = (self.fast.execs.get_mut(b), ids.get(b)) else {
                continue;
            };
            let runs = std::mem::take(e);
            if let Some(start) = self.starts.get_mut(b) {
                *start = start.saturating_add(runs);
            }
            let n = runs.saturating_mul(u64::from(instrs.get(b).copied().unwrap_or(0)));
            add_count(&mut self.counts, &mut self.touched, id, n);
        }
        self.fast.touched.clear();
        self.touched.sort_unstable();
        let counts = &self.counts;
        let entries = self
            .touched
            .iter()
            .map(|&id| (id, counts.get(id as usize).copied().unwrap_or(0)));
        self.writer.slice(entries).map_err(write_err)?;
        for &id in &self.touched {
            if let Some(c) = self.counts.get_mut(id as usize) {
                *c = 0;
            }
        }
        self.touched.clear();
        self.instructions = self.instructions.saturating_add(self.fast.total);
        self.fast.total = 0;
        Ok(())
    }

    /// Adds one run of static block `b` to the current slice (the block's first in the
    /// stream, or a run that [`StaticCounts::add`] refused).
    fn add_static(&mut self, b: usize, instrs: u32) {
        let f = &mut self.fast;
        if f.execs.len() <= b {
            f.execs.resize(b.saturating_add(1), StaticCounts::UNSEEN);
        }
        if self.starts.len() < f.execs.len() {
            self.starts.resize(f.execs.len(), 0);
        }
        if let Some(e) = f.execs.get_mut(b) {
            if *e == 0 || *e == StaticCounts::UNSEEN {
                *e = 0;
                f.touched.push(u32::try_from(b).unwrap_or(u32::MAX));
            }
            *e = e.saturating_add(1);
        }
        f.total = f.total.saturating_add(u64::from(instrs));
    }
}

/// Adds `n` instructions of block `id` to a slice's counts (nothing for 0).
fn add_count(counts: &mut Vec<u64>, touched: &mut Vec<u32>, id: u32, n: u64) {
    if n == 0 {
        return;
    }
    let i = id as usize;
    if counts.len() <= i {
        counts.resize(i.saturating_add(1), 0);
    }
    if let Some(c) = counts.get_mut(i) {
        if *c == 0 {
            touched.push(id);
        }
        *c = c.saturating_add(n);
    }
}

fn write_err(e: bb::WriteError) -> Error {
    match e {
        bb::WriteError::Io(e) => Error::io("cannot write a .bb file", e),
        e => Error::Invalid {
            message: format!("bbv: {e}"),
            offset: None,
            path: None,
        },
    }
}

/// The analysis state shared by the streams.
struct State<W: Write, F> {
    options: BbvOptions,
    /// Whether the stream numbers blocks in order of first start ([`Blocks::numbered_by_start`]).
    by_start: bool,
    open: F,
    scopes: Vec<Scope<W>>,
    /// Stream → its index in `scopes`.
    slots: PcMap<Option<StreamKey>, usize>,
    /// The scope of the last run (threads switch rarely).
    last: usize,
    /// Block number → id (0: not seen yet).
    ids: Vec<u32>,
    /// Id − 1 → block number.
    order: Vec<u32>,
    /// Block number → the pc of its first instruction (for markers).
    pcs: Vec<u64>,
    /// Block number → its instruction count, for static blocks.
    static_instrs: Vec<u32>,
    /// Block number → the pcs of its longest run (pc blocks).
    chains: Vec<Chain>,
    /// pc → the (block number, position) of every chain holding it, and the blocks
    /// without pcs starting at it (position 0).
    holders: PcMap<u64, SmallVec<[(u32, u32); 2]>>,
}

impl<W: Write, F: FnMut(Option<StreamKey>) -> std::io::Result<W>> State<W, F> {
    fn scope(&mut self, process: u64, thread: u64) -> Result<usize, Error> {
        let key = (!self.options.global).then_some(StreamKey { process, thread });
        if let Some(s) = self.scopes.get(self.last)
            && s.key == key
        {
            return Ok(self.last);
        }
        let at = match self.slots.get(&key) {
            Some(&k) => k,
            None => {
                let out = (self.open)(key).map_err(|e| Error::io("cannot create a .bb file", e))?;
                self.scopes.push(Scope {
                    key,
                    writer: bb::Writer::new(out),
                    counts: Vec::new(),
                    touched: Vec::new(),
                    fast: StaticCounts {
                        slice: self.options.slice,
                        bounded: self.options.loop_bounded,
                        ..StaticCounts::default()
                    },
                    instructions: 0,
                    starts: Vec::new(),
                    lengths: Vec::new(),
                    irregular: PcMap::default(),
                });
                let at = self.scopes.len().saturating_sub(1);
                self.slots.insert(key, at);
                at
            }
        };
        self.last = at;
        Ok(at)
    }

    /// The id of block number `b` (starting at `pc`), given on its first run.
    fn id_of(&mut self, b: usize, pc: u64, with_pcs: bool) -> Result<u32, Error> {
        if let Some(&id) = self.ids.get(b)
            && id != 0
        {
            return Ok(id);
        }
        if self.ids.len() <= b {
            self.ids.resize(b.saturating_add(1), 0);
            self.pcs.resize(b.saturating_add(1), 0);
        }
        // Numbered by the stream in order of first start: the id follows.
        let next = if self.by_start {
            b.saturating_add(1)
        } else {
            self.order.len().saturating_add(1)
        };
        let id = u32::try_from(next)
            .ok()
            .filter(|&id| id <= bb::limits::MAX_ID)
            .ok_or_else(|| {
                Error::Unsupported(format!(
                    "more than {} distinct blocks: SimPoint cannot number them",
                    bb::limits::MAX_ID
                ))
            })?;
        let block = u32::try_from(b).unwrap_or(u32::MAX);
        if self.order.len() < id as usize {
            self.order.resize(id as usize, u32::MAX);
        }
        if let Some(slot) = self.order.get_mut((id as usize).saturating_sub(1)) {
            *slot = block;
        }
        if let Some(slot) = self.ids.get_mut(b) {
            *slot = id;
        }
        if let Some(slot) = self.pcs.get_mut(b) {
            *slot = pc;
        }
        if !with_pcs {
            self.holders.entry(pc).or_default().push((block, 0));
        }
        Ok(id)
    }

    /// Follows block `b`'s chain with a run's pcs: extends it when the run is longer;
    /// `false` when the run differs from it (self-modifying code, another image at the
    /// same address): its pcs are then counted one by one.
    fn follow_chain(&mut self, b: usize, run: &BlockRun<'_>) -> bool {
        if self.chains.len() <= b {
            self.chains.resize_with(b.saturating_add(1), Chain::default);
        }
        let (Some(chain), holders) = (self.chains.get_mut(b), &mut self.holders) else {
            return false;
        };
        let old = chain.len();
        let n = run.pc_count();
        if let (0, Pcs::Stride(stride), Some(start)) = (old, run.pcs, run.pc) {
            *chain = Chain::Stride {
                start,
                stride,
                len: 0,
            };
        }
        // Runs of one stride from one start agree wherever both have pcs.
        let strided = matches!((&*chain, run.pcs),
            (Chain::Stride { start, stride, .. }, Pcs::Stride(s)) if *stride == s && Some(*start) == run.pc);
        if !strided {
            let agree = match (&*chain, run.pcs) {
                (Chain::Listed(c), Pcs::Listed(p)) => {
                    let m = c.len().min(p.len());
                    c.get(..m) == p.get(..m)
                }
                _ => (0..old.min(n)).all(|k| chain.pc_at(k) == run.pc_at(k)),
            };
            if !agree {
                return false;
            }
        }
        if n <= old {
            return true;
        }
        let block = u32::try_from(b).unwrap_or(u32::MAX);
        for k in old..n {
            let (Some(pc), Ok(k)) = (run.pc_at(k), u32::try_from(k)) else {
                break;
            };
            holders.entry(pc).or_default().push((block, k));
        }
        match chain {
            Chain::Stride { len, .. } if strided => *len = n,
            Chain::Listed(c) => c.extend((old..n).filter_map(|k| run.pc_at(k))),
            Chain::Stride { .. } => {
                // A listed run longer than a strided chain (not met in practice).
                let pcs = (0..n)
                    .filter_map(|k| chain.pc_at(k).or_else(|| run.pc_at(k)))
                    .collect();
                *chain = Chain::Listed(pcs);
            }
        }
        true
    }

    /// The executions of `pc` so far in scope `s`.
    fn executions(&self, s: &Scope<W>, pc: u64) -> u64 {
        let mut n = s.irregular.get(&pc).copied().unwrap_or(0);
        for &(b, k) in self.holders.get(&pc).map_or(&[][..], |h| h.as_slice()) {
            let b = b as usize;
            if self.chains.get(b).is_some_and(|c| c.len() != 0) {
                for &(len, runs) in s.lengths.get(b).map_or(&[][..], |l| l.as_slice()) {
                    if len > k {
                        n = n.saturating_add(runs);
                    }
                }
            } else {
                let past = s.starts.get(b).copied().unwrap_or(0);
                let now = s
                    .fast
                    .execs
                    .get(b)
                    .copied()
                    .filter(|&n| n != StaticCounts::UNSEEN)
                    .unwrap_or(0);
                n = n.saturating_add(past).saturating_add(now);
            }
        }
        n
    }

    /// Ends the slice of scope `at` before a run of block number `b` when it has reached
    /// `N` (and the run enters a loop, for `loop_bounded`), writing the marker for `b`'s
    /// pc; `count` adds the run to the new slice (so the marker counts it).
    fn boundary(
        &mut self,
        at: usize,
        b: usize,
        loop_entry: bool,
        count: impl FnOnce(&mut Scope<W>),
    ) -> Result<(), Error> {
        let Some(s) = self.scopes.get_mut(at) else {
            return Ok(());
        };
        let ends = s.fast.total >= self.options.slice && (!self.options.loop_bounded || loop_entry);
        if ends {
            s.close(&self.ids, &self.static_instrs)?;
        }
        count(s);
        if ends {
            let pc = self.pcs.get(b).copied().unwrap_or(0);
            let Some(s) = self.scopes.get(at) else {
                return Ok(());
            };
            let n = self.executions(s, pc);
            if let Some(s) = self.scopes.get_mut(at) {
                s.writer.marker(pc, n).map_err(write_err)?;
            }
        }
        Ok(())
    }

    /// A run of a static block that [`StaticCounts::add`] refused: the block's first run
    /// in the stream (or ever), or one that may end the slice.
    fn static_run(
        &mut self,
        at: usize,
        batch: &StaticBatch<'_>,
        r: &StaticRun,
    ) -> Result<(), Error> {
        let b = r.block as usize;
        let pc = batch.pcs.get(b).copied().unwrap_or(0);
        self.id_of(b, pc, false)?;
        if self.static_instrs.len() <= b {
            self.static_instrs.resize(b.saturating_add(1), 0);
        }
        if let Some(n) = self.static_instrs.get_mut(b) {
            *n = r.instrs;
        }
        self.boundary(at, b, r.loop_entry, |s| s.add_static(b, r.instrs))
    }

    fn on_run(&mut self, run: &BlockRun<'_>) -> Result<(), Error> {
        let b = run.block as usize;
        let id = self.id_of(b, run.pc.unwrap_or(0), run.has_pcs())?;
        let regular = !run.has_pcs() || self.follow_chain(b, run);
        let at = self.scope(run.process, run.thread)?;
        let Some(s) = self.scopes.get_mut(at) else {
            return Ok(());
        };
        if !run.has_pcs() {
            if s.starts.len() <= b {
                s.starts.resize(b.saturating_add(1), 0);
            }
            if let Some(c) = s.starts.get_mut(b) {
                *c = c.saturating_add(1);
            }
        } else if regular {
            if s.lengths.len() <= b {
                s.lengths.resize_with(b.saturating_add(1), Lengths::new);
            }
            let len = u32::try_from(run.pc_count()).unwrap_or(u32::MAX);
            if let Some(l) = s.lengths.get_mut(b) {
                match l.iter_mut().find(|(n, _)| *n == len) {
                    Some((_, runs)) => *runs = runs.saturating_add(1),
                    None => l.push((len, 1)),
                }
            }
        } else {
            for pc in (0..run.pc_count()).filter_map(|k| run.pc_at(k)) {
                let c = s.irregular.entry(pc).or_insert(0);
                *c = c.saturating_add(1);
            }
        }
        self.boundary(at, b, run.loop_entry, |s| {
            add_count(&mut s.counts, &mut s.touched, id, run.instrs);
            s.fast.total = s.fast.total.saturating_add(run.instrs);
        })
    }
}

impl<W: Write, F: FnMut(Option<StreamKey>) -> std::io::Result<W>> BlockSink for State<W, F> {
    fn block(&mut self, run: &BlockRun<'_>) -> Result<(), Error> {
        self.on_run(run)
    }

    /// Counts the runs [`StaticCounts::add`] takes (runs of blocks already in the
    /// stream, inside a slice: most of a DCFG-Trace's edges) without the general path's
    /// checks; the others one by one.
    fn static_runs(&mut self, batch: &StaticBatch<'_>) -> Result<(), Error> {
        let at = self.scope(batch.process, batch.thread)?;
        for r in batch.runs {
            if !self.scopes.get_mut(at).is_some_and(|s| s.fast.add(r)) {
                self.static_run(at, batch, r)?;
            }
        }
        Ok(())
    }

    fn lend_counts(&mut self, process: u64, thread: u64) -> Result<Option<StaticCounts>, Error> {
        let at = self.scope(process, thread)?;
        Ok(self.scopes.get_mut(at).map(|s| std::mem::take(&mut s.fast)))
    }

    /// The counters go back to the last stream lent (no call comes in between).
    fn return_counts(&mut self, counts: StaticCounts) {
        if let Some(s) = self.scopes.get_mut(self.last) {
            s.fast = counts;
        }
    }
}

/// Cuts the block executions of `blocks` into slices and writes their vectors, opening
/// each output stream with `open` when its first block comes (`None`: the merged
/// timeline).
///
/// # Errors
///
/// [`Error::Unsupported`] (a usage error) for a slice of 0, or `loop_bounded` on a stream
/// without loops; the stream's read errors (after the slices before them were written:
/// the caller decides whether to keep them); the outputs' write errors.
pub fn bbv<W, F>(
    blocks: &mut dyn Blocks,
    options: &BbvOptions,
    open: F,
) -> Result<BbvResult<W>, Error>
where
    W: Write,
    F: FnMut(Option<StreamKey>) -> std::io::Result<W>,
{
    if options.slice == 0 {
        return Err(Error::Unsupported(
            "the slice size must be at least 1".into(),
        ));
    }
    if options.loop_bounded && !blocks.has_loops() {
        return Err(Error::Unsupported(
            "--loop-bounded needs loops: a DCFG-Trace with a DCFG that has a loop table (written with -dcfg:analysis 1)".into(),
        ));
    }
    let mut state = State {
        options: *options,
        by_start: blocks.numbered_by_start(),
        open,
        scopes: Vec::new(),
        slots: PcMap::default(),
        last: 0,
        ids: Vec::new(),
        order: Vec::new(),
        pcs: Vec::new(),
        static_instrs: Vec::new(),
        chains: Vec::new(),
        holders: PcMap::default(),
    };
    blocks.run(&mut state)?;
    let mut streams = Vec::with_capacity(state.scopes.len());
    for mut s in state.scopes {
        if s.fast.total != 0 {
            s.close(&state.ids, &state.static_instrs)?;
        }
        streams.push(StreamResult {
            key: s.key,
            slices: s.writer.slices(),
            instructions: s.instructions,
            out: s.writer.finish().map_err(write_err)?,
        });
    }
    // Ids given by start but never run (the input ended in an error before) are left out.
    let map = state
        .order
        .iter()
        .zip(1u32..)
        .filter(|(b, _)| **b != u32::MAX)
        .map(|(&b, id)| {
            let desc = blocks.describe(b);
            let longest = state.chains.get(b as usize).map_or(0, Chain::len);
            MapRow {
                id,
                instrs: desc.instrs.unwrap_or(longest),
                desc,
            }
        })
        .collect();
    Ok(BbvResult {
        streams,
        map,
        keys: blocks.keys(),
    })
}

/// Writes the block map as CSV: `id,process,block,pc,instructions,symbol`, one row per
/// block id in id order. `block` is the start pc (`0x…`) of a dynamic block or the DCFG
/// node id; `pc` the block's first address; `instructions` its static instruction count;
/// `symbol` where known (quoted when it holds a comma or quote).
///
/// # Errors
///
/// The output fails.
pub fn write_map_csv(map: &[MapRow], keys: BlockKeys, out: &mut dyn Write) -> std::io::Result<()> {
    writeln!(out, "id,process,block,pc,instructions,symbol")?;
    for row in map {
        let d = &row.desc;
        match keys {
            BlockKeys::Pc => write!(out, "{},{},{:#x},", row.id, d.process, d.key)?,
            BlockKeys::DcfgNode => write!(out, "{},{},{},", row.id, d.process, d.key)?,
        }
        if let Some(pc) = d.pc {
            write!(out, "{pc:#x}")?;
        }
        write!(out, ",{},", row.instrs)?;
        if let Some(s) = &d.symbol {
            if s.contains([',', '"', '\n', '\r']) {
                write!(out, "\"{}\"", s.replace('"', "\"\""))?;
            } else {
                out.write_all(s.as_bytes())?;
            }
        }
        writeln!(out)?;
    }
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::arithmetic_side_effects)]
mod tests {
    use simpoint::bb::{Entry, Marker, Reader, Record};

    use super::*;

    /// Block executions given directly: (thread, pcs) pc runs, or (thread, block, instrs)
    /// DCFG-like runs with loop entries.
    struct Given {
        runs: Vec<(u64, Vec<u64>)>,
        starts: Vec<u64>,
    }

    impl Given {
        fn new(runs: &[(u64, &[u64])]) -> Given {
            let mut starts = Vec::new();
            let runs = runs
                .iter()
                .map(|(t, pcs)| {
                    if !starts.contains(&pcs[0]) {
                        starts.push(pcs[0]);
                    }
                    (*t, pcs.to_vec())
                })
                .collect();
            Given { runs, starts }
        }
    }

    impl Blocks for Given {
        fn keys(&self) -> BlockKeys {
            BlockKeys::Pc
        }

        fn run(&mut self, sink: &mut dyn BlockSink) -> Result<(), Error> {
            for (thread, pcs) in &self.runs {
                let block = self.starts.iter().position(|&s| s == pcs[0]).unwrap() as u32;
                sink.block(&BlockRun {
                    block,
                    process: 0,
                    thread: *thread,
                    pc: Some(pcs[0]),
                    instrs: pcs.len() as u64,
                    pcs: Pcs::Listed(pcs),
                    loop_entry: false,
                })?;
            }
            Ok(())
        }

        fn describe(&self, block: u32) -> BlockDesc {
            BlockDesc::starting_at(self.starts[block as usize])
        }
    }

    fn run(
        given: &mut dyn Blocks,
        slice: u64,
        global: bool,
    ) -> Vec<(Option<StreamKey>, Vec<Record>)> {
        let options = BbvOptions {
            slice,
            global,
            loop_bounded: false,
        };
        let r = bbv(given, &options, |_| Ok(Vec::new())).unwrap();
        r.streams
            .into_iter()
            .map(|s| {
                let records = Reader::new(&s.out[..]).collect::<Result<_, _>>().unwrap();
                (s.key, records)
            })
            .collect()
    }

    fn t(pairs: &[(u32, u64)]) -> Record {
        Record::Slice(
            pairs
                .iter()
                .map(|&(id, c)| Entry {
                    id,
                    count: c as f64,
                })
                .collect(),
        )
    }

    fn m(pc: u64, count: u64) -> Record {
        Record::Marker(Marker { pc, count })
    }

    /// A loop body entered in its middle: the markers count the executions of 0x14 inside
    /// the runs from 0x10, and the runs starting at 0x14.
    #[test]
    fn markers_count_executions_in_the_middle_of_blocks() {
        let body: &[u64] = &[0x10, 0x14, 0x18];
        let mid: &[u64] = &[0x14, 0x18];
        let mut given = Given::new(&[(0, body), (0, body), (0, mid), (0, body), (0, mid)]);
        // Slices of 4: [body body] (6) | [mid body] (5) | [mid] (2).
        let out = run(&mut given, 4, false);
        assert_eq!(
            out[0].1,
            vec![
                t(&[(1, 6)]),
                // 0x14 ran in both runs of body, and now starts this one.
                m(0x14, 3),
                t(&[(1, 3), (2, 2)]),
                m(0x14, 5),
                t(&[(2, 2)]),
            ]
        );
    }

    #[test]
    fn threads_share_the_numbering_and_keep_their_own_counts() {
        let a: &[u64] = &[0x100, 0x104];
        let b: &[u64] = &[0x200];
        let mut given = Given::new(&[(7, a), (3, b), (7, a), (3, a), (3, b), (7, b)]);
        let out = run(&mut given, 2, false);
        let key = |thread| Some(StreamKey { process: 0, thread });
        assert_eq!(
            out[0],
            (
                key(7),
                vec![
                    t(&[(1, 2)]),
                    m(0x100, 2),
                    t(&[(1, 2)]),
                    m(0x200, 1),
                    t(&[(2, 1)])
                ]
            )
        );
        assert_eq!(
            out[1],
            (
                key(3),
                vec![
                    t(&[(2, 1), (1, 2)].map(|x| x)).sorted(),
                    m(0x200, 2),
                    t(&[(2, 1)])
                ]
            )
        );
        // One stream: counts over all threads.
        let out = run(&mut given, 3, true);
        assert_eq!(out.len(), 1);
        assert_eq!(
            out[0].1,
            vec![
                t(&[(1, 2), (2, 1)]),
                m(0x100, 2),
                t(&[(1, 4)]),
                m(0x200, 2),
                t(&[(2, 2)])
            ]
        );
    }

    /// A run that differs from its block's chain (self-modifying code) is counted pc by pc.
    #[test]
    fn irregular_runs_are_counted_one_by_one() {
        let first: &[u64] = &[0x10, 0x12, 0x14];
        let other: &[u64] = &[0x10, 0x13, 0x14];
        let at14: &[u64] = &[0x14];
        let mut given = Given::new(&[(0, first), (0, other), (0, at14)]);
        let out = run(&mut given, 6, false);
        assert_eq!(out[0].1, vec![t(&[(1, 6)]), m(0x14, 3), t(&[(2, 1)])]);
    }

    /// How [`Statics`] hands out its runs.
    #[derive(Clone, Copy)]
    enum Hand {
        /// One at a time, as general runs.
        Single,
        /// In batches.
        Batched,
        /// Counted with the counters the sink lends, as DCFG-Trace does.
        Lent,
    }

    /// Runs of static blocks (thread, block, loop entry), handed out as `hand` says;
    /// block `b` runs `b % 5` instructions (0 included) and starts at `0x1000 + 16b`.
    struct Statics {
        runs: Vec<(u64, u32, bool)>,
        hand: Hand,
    }

    impl Blocks for Statics {
        fn keys(&self) -> BlockKeys {
            BlockKeys::DcfgNode
        }

        fn has_loops(&self) -> bool {
            true
        }

        fn run(&mut self, sink: &mut dyn BlockSink) -> Result<(), Error> {
            let pcs: Vec<u64> = (0..16).map(|b| 0x1000 + 16 * b).collect();
            // Batches of up to 7 runs of one thread.
            let mut k = 0;
            while k < self.runs.len() {
                let thread = self.runs[k].0;
                let mut batch = Vec::new();
                while let Some(&(t, block, loop_entry)) = self.runs.get(k)
                    && t == thread
                    && batch.len() < 7
                {
                    batch.push(StaticRun {
                        block,
                        instrs: block % 5,
                        loop_entry,
                    });
                    k += 1;
                }
                let batch = StaticBatch {
                    process: 0,
                    thread,
                    runs: &batch,
                    pcs: &pcs,
                };
                match self.hand {
                    Hand::Single => {
                        for r in batch.runs {
                            sink.block(&batch.block_run(r))?;
                        }
                    }
                    Hand::Batched => sink.static_runs(&batch)?,
                    Hand::Lent => {
                        let mut counts = sink.lend_counts(0, thread)?.unwrap();
                        for r in batch.runs {
                            if !counts.add(r) {
                                sink.return_counts(counts);
                                sink.static_runs(&StaticBatch {
                                    runs: std::slice::from_ref(r),
                                    ..batch
                                })?;
                                counts = sink.lend_counts(0, thread)?.unwrap();
                            }
                        }
                        sink.return_counts(counts);
                    }
                }
            }
            Ok(())
        }

        fn describe(&self, block: u32) -> BlockDesc {
            BlockDesc {
                key: u64::from(block),
                ..BlockDesc::default()
            }
        }
    }

    /// An output stream: its key, instructions and bytes.
    type Written = (Option<StreamKey>, u64, Vec<u8>);

    fn outputs(blocks: &mut dyn Blocks, options: &BbvOptions) -> (Vec<Written>, Vec<MapRow>) {
        let r = bbv(blocks, options, |_| Ok(Vec::new())).unwrap();
        let streams = r
            .streams
            .into_iter()
            .map(|s| (s.key, s.instructions, s.out))
            .collect();
        (streams, r.map)
    }

    /// The batched and lent paths for static blocks write what the runs one by one write
    /// (the general path), per thread and global, with and without loop boundaries.
    #[test]
    fn static_batches_match_single_runs() {
        fn prop(runs: Vec<(u8, u8, bool)>, slice: u8, global: bool, bounded: bool) -> bool {
            let runs: Vec<(u64, u32, bool)> = runs
                .iter()
                .map(|&(t, b, l)| (u64::from(t % 3), u32::from(b % 16), l))
                .collect();
            let options = BbvOptions {
                slice: u64::from(slice % 20) + 1,
                global,
                loop_bounded: bounded,
            };
            let one = |hand| {
                outputs(
                    &mut Statics {
                        runs: runs.clone(),
                        hand,
                    },
                    &options,
                )
            };
            let single = one(Hand::Single);
            single == one(Hand::Batched) && single == one(Hand::Lent)
        }
        quickcheck::QuickCheck::new()
            .tests(300)
            .quickcheck(prop as fn(Vec<(u8, u8, bool)>, u8, bool, bool) -> bool);
    }

    /// Runs of a pc stream whose pcs are given as a stride, or listed.
    struct Strided {
        /// (thread, start pc, instructions).
        runs: Vec<(u64, u64, u64)>,
        listed: bool,
    }

    impl Blocks for Strided {
        fn keys(&self) -> BlockKeys {
            BlockKeys::Pc
        }

        fn numbered_by_start(&self) -> bool {
            true
        }

        fn run(&mut self, sink: &mut dyn BlockSink) -> Result<(), Error> {
            let mut starts: Vec<u64> = Vec::new();
            for &(thread, pc, instrs) in &self.runs {
                if !starts.contains(&pc) {
                    starts.push(pc);
                }
                let block = starts.iter().position(|&s| s == pc).unwrap() as u32;
                let listed: Vec<u64> = (0..instrs).map(|k| pc + 4 * k).collect();
                sink.block(&BlockRun {
                    block,
                    process: 0,
                    thread,
                    pc: Some(pc),
                    instrs,
                    pcs: if self.listed {
                        Pcs::Listed(&listed)
                    } else {
                        Pcs::Stride(4)
                    },
                    loop_entry: false,
                })?;
            }
            Ok(())
        }

        fn describe(&self, block: u32) -> BlockDesc {
            BlockDesc {
                key: u64::from(block),
                ..BlockDesc::default()
            }
        }
    }

    /// Strided pcs count as the same pcs listed: the markers count executions in the
    /// middle of blocks alike.
    #[test]
    fn strided_pcs_match_listed_ones() {
        fn prop(runs: Vec<(u8, u8, u8)>, slice: u8, global: bool) -> bool {
            // Starts on a few words, so that runs enter other blocks' ranges.
            let runs: Vec<(u64, u64, u64)> = runs
                .iter()
                .map(|&(t, s, n)| {
                    (
                        u64::from(t % 2),
                        0x100 + 4 * u64::from(s % 8),
                        u64::from(n % 6) + 1,
                    )
                })
                .collect();
            let options = BbvOptions {
                slice: u64::from(slice % 16) + 1,
                global,
                loop_bounded: false,
            };
            let a = outputs(
                &mut Strided {
                    runs: runs.clone(),
                    listed: false,
                },
                &options,
            );
            let b = outputs(&mut Strided { runs, listed: true }, &options);
            a == b
        }
        quickcheck::QuickCheck::new()
            .tests(300)
            .quickcheck(prop as fn(Vec<(u8, u8, u8)>, u8, bool) -> bool);
    }

    trait Sorted {
        fn sorted(self) -> Self;
    }

    impl Sorted for Record {
        fn sorted(self) -> Record {
            match self {
                Record::Slice(mut e) => {
                    e.sort_by_key(|e| e.id);
                    Record::Slice(e)
                }
                r => r,
            }
        }
    }

    #[test]
    fn map_csv() {
        let map = vec![
            MapRow {
                id: 1,
                desc: BlockDesc {
                    process: 0,
                    key: 0x401000,
                    pc: Some(0x401000),
                    instrs: None,
                    symbol: Some("f<a,b>".into()),
                },
                instrs: 3,
            },
            MapRow {
                id: 2,
                desc: BlockDesc::default(),
                instrs: 0,
            },
        ];
        let mut out = Vec::new();
        write_map_csv(&map, BlockKeys::Pc, &mut out).unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "id,process,block,pc,instructions,symbol\n1,0,0x401000,0x401000,3,\"f<a,b>\"\n2,0,0x0,,0,\n"
        );
    }

    #[test]
    fn usage_errors() {
        let mut given = Given::new(&[(0, &[1])]);
        let o = BbvOptions {
            slice: 0,
            global: false,
            loop_bounded: false,
        };
        assert!(matches!(
            bbv(&mut given, &o, |_| Ok(Vec::new())),
            Err(Error::Unsupported(_))
        ));
        let o = BbvOptions {
            slice: 1,
            global: false,
            loop_bounded: true,
        };
        let e = bbv(&mut given, &o, |_| Ok(Vec::new())).unwrap_err();
        assert!(e.to_string().contains("loop"), "{e}");
    }
}
