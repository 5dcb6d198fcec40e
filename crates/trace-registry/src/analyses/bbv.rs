//! `bbv`: basic-block vectors for SimPoint, from any trace with blocks
//! ([`Handler::blocks`](crate::Handler::blocks): every format with an instruction stream,
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

use crate::Error;
use crate::blocks::{BlockDesc, BlockKeys, BlockRun, Blocks, PcMap};

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

/// One output stream being written, and the counts its markers need.
struct Scope<W: Write> {
    key: Option<StreamKey>,
    writer: bb::Writer<W>,
    /// The current slice: instructions per block id, the ids touched, their sum.
    counts: Vec<u64>,
    touched: Vec<u32>,
    total: u64,
    /// Whether the current slice has reached `N`.
    full: bool,
    instructions: u64,
    /// Block runs without pcs, per block number.
    starts: Vec<u64>,
    /// Regular runs of pc blocks per block number, by length.
    lengths: Vec<Lengths>,
    /// Executions per pc of the runs that did not follow their block's chain.
    irregular: PcMap<u64, u64>,
}

impl<W: Write> Scope<W> {
    /// Writes the current slice and starts the next.
    fn close(&mut self) -> Result<(), Error> {
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
        self.total = 0;
        self.full = false;
        Ok(())
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
    /// The scope of the last run (threads switch rarely).
    last: usize,
    /// Block number → id (0: not seen yet).
    ids: Vec<u32>,
    /// Id − 1 → block number.
    order: Vec<u32>,
    /// Block number → the pc of its first instruction (for markers).
    pcs: Vec<u64>,
    /// Block number → the pcs of its longest run (pc blocks).
    chains: Vec<Vec<u64>>,
    /// pc → the (block number, position) of every chain holding it, and the blocks
    /// without pcs starting at it (position 0).
    holders: PcMap<u64, SmallVec<[(u32, u32); 2]>>,
}

impl<W: Write, F: FnMut(Option<StreamKey>) -> std::io::Result<W>> State<W, F> {
    fn scope(&mut self, run: &BlockRun<'_>) -> Result<usize, Error> {
        let key = (!self.options.global).then_some(StreamKey {
            process: run.process,
            thread: run.thread,
        });
        if let Some(s) = self.scopes.get(self.last)
            && s.key == key
        {
            return Ok(self.last);
        }
        let at = match self.scopes.iter().position(|s| s.key == key) {
            Some(k) => k,
            None => {
                let out = (self.open)(key).map_err(|e| Error::io("cannot create a .bb file", e))?;
                self.scopes.push(Scope {
                    key,
                    writer: bb::Writer::new(out),
                    counts: Vec::new(),
                    touched: Vec::new(),
                    total: 0,
                    full: false,
                    instructions: 0,
                    starts: Vec::new(),
                    lengths: Vec::new(),
                    irregular: PcMap::default(),
                });
                self.scopes.len().saturating_sub(1)
            }
        };
        self.last = at;
        Ok(at)
    }

    /// Follows block `b`'s chain with a run's pcs: extends it when the run is longer;
    /// `false` when the run differs from it (self-modifying code, another image at the
    /// same address): its pcs are then counted one by one.
    fn follow_chain(&mut self, b: usize, pcs: &[u64]) -> bool {
        if self.chains.len() <= b {
            self.chains.resize_with(b.saturating_add(1), Vec::new);
        }
        let Some(chain) = self.chains.get_mut(b) else {
            return false;
        };
        let n = chain.len().min(pcs.len());
        if chain.get(..n) != pcs.get(..n) {
            return false;
        }
        for (k, &pc) in pcs.iter().enumerate().skip(chain.len()) {
            let k = u32::try_from(k).unwrap_or(u32::MAX);
            self.holders
                .entry(pc)
                .or_default()
                .push((u32::try_from(b).unwrap_or(u32::MAX), k));
        }
        if let Some(rest) = pcs.get(chain.len()..) {
            chain.extend_from_slice(rest);
        }
        true
    }

    /// The executions of `pc` so far in scope `s`.
    fn executions(&self, s: &Scope<W>, pc: u64) -> u64 {
        let mut n = s.irregular.get(&pc).copied().unwrap_or(0);
        for &(b, k) in self.holders.get(&pc).map_or(&[][..], |h| h.as_slice()) {
            let b = b as usize;
            if self.chains.get(b).is_some_and(|c| !c.is_empty()) {
                for &(len, runs) in s.lengths.get(b).map_or(&[][..], |l| l.as_slice()) {
                    if len > k {
                        n = n.saturating_add(runs);
                    }
                }
            } else {
                n = n.saturating_add(s.starts.get(b).copied().unwrap_or(0));
            }
        }
        n
    }

    fn on_run(&mut self, run: &BlockRun<'_>) -> Result<(), Error> {
        let b = run.block as usize;
        if self.ids.len() <= b {
            self.ids.resize(b.saturating_add(1), 0);
            self.pcs.resize(b.saturating_add(1), 0);
        }
        let id = match self.ids.get(b).copied() {
            Some(id) if id != 0 => id,
            _ => {
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
                if self.order.len() < id as usize {
                    self.order.resize(id as usize, u32::MAX);
                }
                if let Some(slot) = self.order.get_mut((id as usize).saturating_sub(1)) {
                    *slot = run.block;
                }
                let pc = run.pc.unwrap_or(0);
                if let Some(slot) = self.ids.get_mut(b) {
                    *slot = id;
                }
                if let Some(slot) = self.pcs.get_mut(b) {
                    *slot = pc;
                }
                if run.pcs.is_empty() {
                    self.holders.entry(pc).or_default().push((run.block, 0));
                }
                id
            }
        };
        let regular = run.pcs.is_empty() || self.follow_chain(b, run.pcs);
        let at = self.scope(run)?;
        let Some(s) = self.scopes.get_mut(at) else {
            return Ok(());
        };
        if run.pcs.is_empty() {
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
            let len = u32::try_from(run.pcs.len()).unwrap_or(u32::MAX);
            if let Some(l) = s.lengths.get_mut(b) {
                match l.iter_mut().find(|(n, _)| *n == len) {
                    Some((_, runs)) => *runs = runs.saturating_add(1),
                    None => l.push((len, 1)),
                }
            }
        } else {
            for &pc in run.pcs {
                let c = s.irregular.entry(pc).or_insert(0);
                *c = c.saturating_add(1);
            }
        }
        if s.full && (!self.options.loop_bounded || run.loop_entry) {
            s.close()?;
            let pc = self.pcs.get(b).copied().unwrap_or(0);
            let Some(s) = self.scopes.get(at) else {
                return Ok(());
            };
            let n = self.executions(s, pc);
            if let Some(s) = self.scopes.get_mut(at) {
                s.writer.marker(pc, n).map_err(write_err)?;
            }
        }
        let Some(s) = self.scopes.get_mut(at) else {
            return Ok(());
        };
        if run.instrs != 0 {
            let i = id as usize;
            if s.counts.len() <= i {
                s.counts.resize(i.saturating_add(1), 0);
            }
            if let Some(c) = s.counts.get_mut(i) {
                if *c == 0 {
                    s.touched.push(id);
                }
                *c = c.saturating_add(run.instrs);
            }
            s.total = s.total.saturating_add(run.instrs);
            s.instructions = s.instructions.saturating_add(run.instrs);
            if s.total >= self.options.slice {
                s.full = true;
            }
        }
        Ok(())
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
        last: 0,
        ids: Vec::new(),
        order: Vec::new(),
        pcs: Vec::new(),
        chains: Vec::new(),
        holders: PcMap::default(),
    };
    blocks.run(&mut |run| state.on_run(run))?;
    let mut streams = Vec::with_capacity(state.scopes.len());
    for mut s in state.scopes {
        if s.total != 0 {
            s.close()?;
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
            let longest = state.chains.get(b as usize).map_or(0, |c| c.len() as u64);
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
    use crate::blocks::OnBlock;

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

        fn run(&mut self, on_block: &mut OnBlock<'_>) -> Result<(), Error> {
            for (thread, pcs) in &self.runs {
                let block = self.starts.iter().position(|&s| s == pcs[0]).unwrap() as u32;
                on_block(&BlockRun {
                    block,
                    process: 0,
                    thread: *thread,
                    pc: Some(pcs[0]),
                    instrs: pcs.len() as u64,
                    pcs,
                    loop_entry: false,
                })?;
            }
            Ok(())
        }

        fn describe(&self, block: u32) -> BlockDesc {
            let pc = self.starts[block as usize];
            BlockDesc {
                key: pc,
                pc: Some(pc),
                ..BlockDesc::default()
            }
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
