//! `diff`: where two runs of a program part, and where they join again.
//!
//! Two instruction streams of the same format are compared thread by thread: threads are
//! paired in order of first appearance (or as [`DiffOptions::threads`] says), and the
//! instructions of each pair are compared in lockstep: the pc, then the instruction bytes,
//! then the compared registers ([`Steps::reg_names`], less [`DiffOptions::ignore`]), then the
//! memory accesses (address, width, bytes before and after). Where the pcs differ, the
//! streams resynchronise at the nearest point (the smallest number of instructions skipped
//! on both sides together) from which both run the same [`SYNC_RUN`] pcs, looking at most
//! [`DiffOptions::window`] instructions ahead, as a line diff would resynchronise on equal
//! lines. Consecutive divergent instructions of a pair are one [`Region`]; a pc region
//! covers the instructions only one side ran.
//!
//! Memory stays bounded by the window: steps are held only while one side is ahead of the
//! other (different thread interleavings) or while looking for a resynchronisation point.
//!
//! ```
//! use trace_analyses::diff::{DiffOptions, diff};
//! use trace_registry::{Ctx, Input, Options};
//!
//! let path = "../../testdata/x64dbg/basic.trace64";
//! let (mut a, mut b) = (Input::open(path.as_ref())?, Input::open(path.as_ref())?);
//! let handler = trace_registry::detect(&a).expect("an x64dbg trace");
//! let options = Options::default();
//! let mut steps_a = handler.steps(&mut a, &mut Ctx::new(&options))?;
//! let mut steps_b = handler.steps(&mut b, &mut Ctx::new(&options))?;
//! let mut regions = 0;
//! let summary = diff(&mut *steps_a, &mut *steps_b, &DiffOptions::default(), &mut |_| {
//!     regions += 1;
//!     Ok(())
//! })?;
//! assert_eq!((regions, summary.equal), (0, summary.compared));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::collections::{HashMap, VecDeque};
use std::fmt;

use serde::Serialize;

use trace_model::Error;
use trace_model::steps::{Isa, Step, Steps};

/// How many consecutive equal pcs make a resynchronisation point.
pub const SYNC_RUN: usize = 16;

/// The default of [`DiffOptions::window`].
pub const DEFAULT_WINDOW: u64 = 1_000_000;

/// The default size of a [`Rebase`] range.
pub const DEFAULT_REBASE_SIZE: u64 = 0x100_0000;

/// A shift of B's values for ASLR: every pc, address, register value and memory word of B
/// inside `b_base .. b_base + size` is moved by `a_base - b_base` before comparing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rebase {
    /// Where the image is in A.
    pub a_base: u64,
    /// Where the image is in B.
    pub b_base: u64,
    /// The size of the range.
    pub size: u64,
}

impl Rebase {
    /// B's value `v` as A would have it.
    #[must_use]
    #[inline]
    pub fn apply(&self, v: u64) -> u64 {
        let off = v.wrapping_sub(self.b_base);
        if off < self.size {
            self.a_base.wrapping_add(off)
        } else {
            v
        }
    }
}

/// What to compare and how.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DiffOptions {
    /// The thread pairs to compare, (A's thread, B's thread); empty: every thread, paired in
    /// order of first appearance.
    pub threads: Vec<(u64, u64)>,
    /// Registers not to compare (names as [`Steps::reg_names`] gives them, any case).
    pub ignore: Vec<String>,
    /// Compare memory accesses.
    pub mem: bool,
    /// How many instructions to look ahead for a resynchronisation point.
    pub window: u64,
    /// ASLR: shift B's values.
    pub rebase: Option<Rebase>,
    /// Instructions of context kept before (and shown after) the first divergence.
    pub context: usize,
}

impl Default for DiffOptions {
    fn default() -> Self {
        DiffOptions {
            threads: Vec::new(),
            ignore: Vec::new(),
            mem: true,
            window: DEFAULT_WINDOW,
            rebase: None,
            context: 3,
        }
    }
}

/// What differs first in a region.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    /// The pcs: one side ran instructions the other did not.
    Pc,
    /// Same pc, different instruction bytes.
    Opcode,
    /// A compared register before the instruction.
    Regs,
    /// A memory access: its count, address, width or bytes.
    Mem,
}

/// A run of consecutive divergent instructions of one thread pair:
/// `{"kind":…,"a_start":…,"a_end":…,"b_start":…,"b_end":…,"first":{…}}` (global
/// instruction numbers of each trace, end exclusive; an empty side has start = end, the
/// point where the other side's instructions would go).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Region {
    /// What differs at the first instruction.
    pub kind: Kind,
    /// A's first instruction.
    pub a_start: u64,
    /// After A's last instruction.
    pub a_end: u64,
    /// B's first instruction.
    pub b_start: u64,
    /// After B's last instruction.
    pub b_end: u64,
    /// What differs at the first instruction.
    pub first: First,
}

impl Region {
    /// The JSON line `tracekit diff --json` prints.
    #[must_use]
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }
}

/// A value printed as `"0x…"`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Hex(pub u64);

impl Serialize for Hex {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl fmt::Display for Hex {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:#x}", self.0)
    }
}

/// The first divergent instruction of a region, on each side (`None` where a side has no
/// instruction there), and what differs.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct First {
    /// A's instruction number.
    pub a_i: Option<u64>,
    /// B's instruction number.
    pub b_i: Option<u64>,
    /// A's thread.
    pub a_thread: Option<u64>,
    /// B's thread.
    pub b_thread: Option<u64>,
    /// A's pc.
    pub a_pc: Option<Hex>,
    /// B's pc (as recorded, before any rebase).
    pub b_pc: Option<Hex>,
    /// `opcode` regions: A's instruction bytes, hex.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub a_opcode: Option<String>,
    /// `opcode` regions: B's instruction bytes, hex.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub b_opcode: Option<String>,
    /// `regs` regions: every compared register that differs.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub regs: Vec<RegDiff>,
    /// `mem` regions: the first access that differs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mem: Option<MemDiff>,
}

/// A register that differs: `{"name":"rax","a":"0x1","b":"0x2"}` (B's value as recorded).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct RegDiff {
    /// The register's name.
    pub name: String,
    /// A's value.
    pub a: Hex,
    /// B's value.
    pub b: Hex,
}

/// The first memory access that differs, the `index`th of the instruction's accesses
/// (`a_count`, `b_count`: how many each side has). Values are `"0x…"` words (in the
/// target's byte order) up to 8 bytes, `0x` and every digit beyond (as
/// [`value_hex`](trace_model::steps::value_hex) writes them); `None` where a side has no such
/// access or did not record the value.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct MemDiff {
    /// Which access.
    pub index: usize,
    /// A's number of accesses.
    pub a_count: usize,
    /// B's number of accesses.
    pub b_count: usize,
    /// A's address.
    pub a_addr: Option<Hex>,
    /// B's address.
    pub b_addr: Option<Hex>,
    /// A's width in bytes.
    pub a_len: Option<u32>,
    /// B's width in bytes.
    pub b_len: Option<u32>,
    /// A's value before.
    pub a_old: Option<String>,
    /// B's value before.
    pub b_old: Option<String>,
    /// A's value after.
    pub a_new: Option<String>,
    /// B's value after.
    pub b_new: Option<String>,
}

/// One instruction shown as context.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Line {
    /// The instruction number.
    pub i: u64,
    /// The thread.
    pub thread: u64,
    /// The pc.
    pub pc: Hex,
    /// The instruction bytes, hex.
    pub opcode: String,
    /// The bytes themselves, for disassembly.
    #[serde(skip)]
    pub bytes: Vec<u8>,
}

impl Line {
    fn of(step: &Step) -> Line {
        Brief::of(step).line()
    }
}

/// A context line as kept before it is needed (no allocation).
#[derive(Clone, Debug)]
struct Brief {
    i: u64,
    thread: u64,
    pc: u64,
    opcode: smallvec::SmallVec<[u8; 16]>,
}

impl Brief {
    fn of(step: &Step) -> Brief {
        Brief {
            i: step.i,
            thread: step.thread,
            pc: step.pc,
            opcode: step.opcode.clone(),
        }
    }

    fn line(&self) -> Line {
        Line {
            i: self.i,
            thread: self.thread,
            pc: Hex(self.pc),
            opcode: hex_bytes(&self.opcode),
            bytes: self.opcode.to_vec(),
        }
    }
}

/// The instructions around the first divergence on each side: up to
/// [`DiffOptions::context`] before it (in both, as they were equal) and from it on.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Context {
    /// A's instructions.
    pub a: Vec<Line>,
    /// B's instructions.
    pub b: Vec<Line>,
    /// How many lines of each list come before the divergence.
    pub before: usize,
}

/// What the comparison found: the last line of `tracekit diff --json`, `{"summary":{…}}`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Summary {
    /// A's instructions read.
    pub a_instructions: u64,
    /// B's instructions read.
    pub b_instructions: u64,
    /// Instruction pairs compared in lockstep.
    pub compared: u64,
    /// Of those, the equal ones.
    pub equal: u64,
    /// Divergent regions.
    pub regions: u64,
    /// Regions by kind.
    pub kinds: KindCounts,
    /// A's instructions in pc regions (run by A only).
    pub a_only: u64,
    /// B's instructions in pc regions.
    pub b_only: u64,
    /// Instructions of threads not compared (A, B): threads outside
    /// [`DiffOptions::threads`].
    pub skipped: [u64; 2],
    /// The thread pairs compared, (A, B), in pairing order; a thread without a partner has
    /// `null` on the other side.
    pub threads: Vec<[Option<u64>; 2]>,
    /// The region that opened first.
    pub first: Option<Region>,
    /// The instructions around it.
    pub context: Option<Context>,
}

impl Summary {
    /// Whether the traces are equal (as compared): no divergent region.
    #[must_use]
    pub fn is_equal(&self) -> bool {
        self.regions == 0
    }

    /// The JSON line `{"summary":{…}}`.
    #[must_use]
    pub fn to_json(&self) -> String {
        serde_json::json!({ "summary": self }).to_string()
    }
}

/// Regions by kind.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct KindCounts {
    /// `pc` regions.
    pub pc: u64,
    /// `opcode` regions.
    pub opcode: u64,
    /// `regs` regions.
    pub regs: u64,
    /// `mem` regions.
    pub mem: u64,
}

/// Which input.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Side {
    /// The first.
    A,
    /// The second.
    B,
}

impl fmt::Display for Side {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Side::A => "A",
            Side::B => "B",
        })
    }
}

/// Why a diff stopped.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DiffError {
    /// Reading one input failed (after the regions found before were handed out).
    #[error("{side}: {source}")]
    Read {
        /// Which input.
        side: Side,
        /// The reader's error, with where.
        source: Error,
    },
    /// The inputs cannot be compared with these options, or a region could not be handed
    /// out.
    #[error("{0}")]
    Other(Error),
}

impl From<Error> for DiffError {
    fn from(e: Error) -> DiffError {
        DiffError::Other(e)
    }
}

/// Compares the instruction streams `a` and `b` (both at their start), calling `on_region`
/// for each divergent region as it closes; returns the summary.
///
/// # Errors
///
/// [`DiffError::Other`] when the streams have different instruction sets or registers, an
/// ignored register does not exist, or a chosen thread does not appear (or what
/// `on_region` returns); [`DiffError::Read`] when an input is damaged.
pub fn diff(
    a: &mut dyn Steps,
    b: &mut dyn Steps,
    options: &DiffOptions,
    on_region: &mut dyn FnMut(&Region) -> Result<(), Error>,
) -> Result<Summary, DiffError> {
    let mut d = Differ::new(a, b, options, on_region)?;
    d.run()?;
    d.finish()
}

/// A step kept while the other side catches up: the step and the compared registers
/// before it.
#[derive(Clone, Debug, Default)]
struct Held {
    step: Step,
    regs: Vec<u64>,
}

/// Copies `src` into `dst`, keeping `dst`'s buffers (derived `clone_from` reallocates).
fn copy_step(dst: &mut Step, src: &Step) {
    dst.i = src.i;
    dst.thread = src.thread;
    dst.pc = src.pc;
    dst.opcode.clear();
    dst.opcode.extend_from_slice(&src.opcode);
    dst.mem.clear();
    dst.mem.extend_from_slice(&src.mem);
    dst.data.clear();
    dst.data.extend_from_slice(&src.data);
}

/// One input: its stream, its threads' slots and the steps held per slot.
struct Input<'s> {
    side: Side,
    steps: &'s mut dyn Steps,
    /// The slot (thread pair) of each thread seen; `None`: not compared.
    slots: HashMap<u64, Option<usize>>,
    /// The last thread looked up and its slot (threads switch rarely).
    last: Option<(u64, Option<usize>)>,
    /// The thread of each slot, once seen.
    threads: Vec<Option<u64>>,
    /// `--thread`: this side's thread of each slot.
    fixed: Option<Vec<u64>>,
    queues: Vec<VecDeque<Held>>,
    /// Steps in `queues`.
    held: usize,
    pool: Vec<Held>,
    ended: bool,
    /// Steps read.
    count: u64,
    skipped: u64,
}

impl<'s> Input<'s> {
    fn new(side: Side, steps: &'s mut dyn Steps, fixed: Option<Vec<u64>>) -> Input<'s> {
        Input {
            side,
            steps,
            slots: HashMap::new(),
            last: None,
            threads: Vec::new(),
            fixed,
            queues: Vec::new(),
            held: 0,
            pool: Vec::new(),
            ended: false,
            count: 0,
            skipped: 0,
        }
    }

    /// The slot of `thread`, giving a new thread the next one (or its `--thread` one).
    fn slot(&mut self, thread: u64) -> Option<usize> {
        if let Some((t, s)) = self.last
            && t == thread
        {
            return s;
        }
        let next = self.threads.len();
        let fixed = self.fixed.as_ref();
        let slot = *self.slots.entry(thread).or_insert_with(|| match fixed {
            Some(list) => list.iter().position(|&t| t == thread),
            None => Some(next),
        });
        if let Some(s) = slot {
            if self.threads.len() <= s {
                self.threads.resize(s.saturating_add(1), None);
            }
            if let Some(t) = self.threads.get_mut(s) {
                *t = Some(thread);
            }
            if self.queues.len() <= s {
                self.queues.resize_with(s.saturating_add(1), VecDeque::new);
            }
        }
        self.last = Some((thread, slot));
        slot
    }

    /// Reads the next step of a compared thread with its slot; `None` at the end.
    fn read(&mut self) -> Result<Option<(usize, Held)>, DiffError> {
        loop {
            if self.ended {
                return Ok(None);
            }
            let mut held = self.pool.pop().unwrap_or_default();
            match self.steps.next_step() {
                None => {
                    self.ended = true;
                    self.pool.push(held);
                    return Ok(None);
                }
                Some(Err(source)) => {
                    self.ended = true;
                    return Err(DiffError::Read {
                        side: self.side,
                        source,
                    });
                }
                Some(Ok(step)) => copy_step(&mut held.step, step),
            }
            held.regs.clear();
            held.regs.extend_from_slice(self.steps.regs());
            self.count = self.count.saturating_add(1);
            match self.slot(held.step.thread) {
                Some(slot) => return Ok(Some((slot, held))),
                None => {
                    self.skipped = self.skipped.saturating_add(1);
                    self.pool.push(held);
                }
            }
        }
    }

    fn queue(&self, slot: usize) -> Option<&VecDeque<Held>> {
        self.queues.get(slot)
    }

    fn queued(&self, slot: usize) -> usize {
        self.queue(slot).map_or(0, VecDeque::len)
    }

    fn front(&self, slot: usize) -> Option<&Held> {
        self.queue(slot).and_then(VecDeque::front)
    }

    fn at(&self, slot: usize, k: usize) -> Option<&Held> {
        self.queue(slot).and_then(|q| q.get(k))
    }

    fn push(&mut self, slot: usize, held: Held) {
        if let Some(q) = self.queues.get_mut(slot) {
            q.push_back(held);
            self.held = self.held.saturating_add(1);
        }
    }

    /// Takes the front step of `slot` out of its queue.
    fn take_front(&mut self, slot: usize) -> Option<Held> {
        let h = self.queues.get_mut(slot).and_then(VecDeque::pop_front)?;
        self.held = self.held.saturating_sub(1);
        Some(h)
    }

    /// Drops the front step of `slot`.
    fn pop(&mut self, slot: usize) {
        if let Some(h) = self.take_front(slot) {
            self.pool.push(h);
        }
    }
}

/// A region still growing.
#[derive(Debug)]
struct Open {
    region: Region,
    /// Whether it is the first region opened (the summary's `first`).
    first: bool,
}

/// The state of a comparison.
struct Differ<'s, 'o> {
    a: Input<'s>,
    b: Input<'s>,
    options: &'o DiffOptions,
    on_region: &'o mut dyn FnMut(&Region) -> Result<(), Error>,
    /// The indices of the compared registers (`None`: all of them).
    compared_regs: Option<Vec<usize>>,
    names: Vec<String>,
    big_endian: bool,
    /// The lockstep region open per slot.
    open: Vec<Option<Open>>,
    /// Per slot: a pc region that takes every further instruction of the slot (no
    /// resynchronisation within the window, or the other side has ended).
    swallow: Vec<Option<Open>>,
    /// The last equal instruction pairs per slot, until the first divergence.
    ring: Vec<VecDeque<(Brief, Brief)>>,
    /// The most steps held per side while looking ahead.
    cap: usize,
    window: usize,
    summary: Summary,
    /// Whether a region was opened yet.
    diverged: bool,
    /// Both inputs hand out records and no option changes values or threads: equal
    /// stretches are compared by their records.
    records: bool,
    /// The last pair read in step compared equal: both compared register states are
    /// equal, so equal records next give equal steps.
    last_equal: bool,
    /// Pairs to read decoded before comparing records again (after a rewind for context).
    slow_for: u64,
    /// The threads [`Raw::pass_equal`](trace_model::steps::Raw::pass_equal) met (kept for its buffer).
    met: Vec<u64>,
}

impl<'s, 'o> Differ<'s, 'o> {
    fn new(
        a: &'s mut dyn Steps,
        b: &'s mut dyn Steps,
        options: &'o DiffOptions,
        on_region: &'o mut dyn FnMut(&Region) -> Result<(), Error>,
    ) -> Result<Differ<'s, 'o>, DiffError> {
        let unsupported = |m: String| DiffError::Other(Error::Unsupported(m));
        if a.isa() != b.isa() {
            return Err(unsupported(format!(
                "A is a {:?} trace and B a {:?} one: they cannot be compared",
                a.isa(),
                b.isa()
            )));
        }
        let names: Vec<String> = a.reg_names().iter().map(|n| n.to_string()).collect();
        let b_names: Vec<String> = b.reg_names().iter().map(|n| n.to_string()).collect();
        if names != b_names {
            return Err(unsupported(format!(
                "A records the registers {} and B {}: they cannot be compared",
                list(&names),
                list(&b_names)
            )));
        }
        let mut compared_regs = None;
        if !options.ignore.is_empty() {
            for n in &options.ignore {
                if !names.iter().any(|m| m.eq_ignore_ascii_case(n)) {
                    return Err(unsupported(format!(
                        "--ignore {n}: no such register; the compared registers are {}",
                        if names.is_empty() {
                            "none".to_owned()
                        } else {
                            list(&names)
                        }
                    )));
                }
            }
            compared_regs = Some(
                (0..names.len())
                    .filter(|&k| {
                        names.get(k).is_none_or(|m| {
                            !options.ignore.iter().any(|n| m.eq_ignore_ascii_case(n))
                        })
                    })
                    .collect(),
            );
        }
        let (fa, fb) = if options.threads.is_empty() {
            (None, None)
        } else {
            (
                Some(options.threads.iter().map(|p| p.0).collect()),
                Some(options.threads.iter().map(|p| p.1).collect()),
            )
        };
        let window = usize::try_from(options.window.max(1)).unwrap_or(usize::MAX);
        Ok(Differ {
            big_endian: a.isa() == Isa::Ppc32,
            a: Input::new(Side::A, a, fa),
            b: Input::new(Side::B, b, fb),
            options,
            on_region,
            compared_regs,
            names,
            open: Vec::new(),
            swallow: Vec::new(),
            ring: Vec::new(),
            cap: window.saturating_add(4 * SYNC_RUN + 4096),
            window,
            summary: Summary::default(),
            diverged: false,
            records: options.threads.is_empty() && options.rebase.is_none(),
            last_equal: true,
            slow_for: 0,
            met: Vec::new(),
        })
    }

    fn side(&mut self, side: Side) -> &mut Input<'s> {
        match side {
            Side::A => &mut self.a,
            Side::B => &mut self.b,
        }
    }

    /// Makes the per-slot tables cover `slot`.
    fn grow(&mut self, slot: usize) {
        let n = slot.saturating_add(1);
        if self.open.len() < n {
            self.open.resize_with(n, || None);
            self.swallow.resize_with(n, || None);
            self.ring.resize_with(n, VecDeque::new);
        }
    }

    /// The main loop: reads both sides, compares what both have, until both end.
    fn run(&mut self) -> Result<(), DiffError> {
        loop {
            if self.a.held == 0 && self.b.held == 0 && !self.a.ended && !self.b.ended {
                // The common case: both sides in step, nothing held.
                if self.fast_ok() {
                    self.fast()?;
                } else {
                    self.slow_for = self.slow_for.saturating_sub(1);
                    let a = self.a.read()?;
                    let b = self.b.read()?;
                    self.in_step(a, b)?;
                }
                self.settle()?;
                continue;
            }
            self.last_equal = false;
            self.settle()?;
            if self.a.ended && self.b.ended {
                return Ok(());
            }
            // Read from the side holding fewer steps: its partner waits for them.
            let want = if self.a.ended || (!self.b.ended && self.b.held < self.a.held) {
                Side::B
            } else {
                Side::A
            };
            if let Some((s, h)) = self.side(want).read()? {
                self.route(want, s, h)?;
            }
            if self.side(want).held > self.cap {
                // The threads interleave too differently: give up on the longest queue.
                let input = self.side(want);
                let longest = (0..input.queues.len()).max_by_key(|&s| input.queued(s));
                if let Some(slot) = longest {
                    self.swallow(slot)?;
                }
            }
        }
    }

    /// Whether the next pair may be compared by records: nothing held or open, the last
    /// pair equal, the threads paired as the same ids.
    fn fast_ok(&mut self) -> bool {
        self.records
            && self.last_equal
            && self.slow_for == 0
            && self.a.threads == self.b.threads
            && self.open.iter().all(Option::is_none)
            && self.swallow.iter().all(Option::is_none)
            && self.a.steps.records().is_some()
            && self.b.steps.records().is_some()
    }

    /// Passes the records both sides have equal, decoding neither side there:
    /// [`Raw::pass_equal`](trace_model::steps::Raw::pass_equal) on A against B's records, [`Raw::pass_records`](trace_model::steps::Raw::pass_records) on B. Then
    /// reads the pair where they part decoded and compares it as usual; before the first
    /// divergence, both sides first rewind a few instructions (an index seek) to read
    /// them decoded, as context.
    fn fast(&mut self) -> Result<(), DiffError> {
        let Some(records) = self.b.steps.records() else {
            return Ok(());
        };
        let mut met = std::mem::take(&mut self.met);
        met.clear();
        let passed = self.a.steps.pass_equal(records, &mut |t| met.push(t));
        if passed.bytes > 0 {
            self.b.steps.pass_records(passed);
        }
        self.counted(passed.steps);
        for &t in &met {
            self.pair_same(t)?;
        }
        self.met = met;
        if self.a.steps.records().is_some_and(|r| r.bytes.is_empty()) {
            // A has ended (found without reading it: reading catches up on what was
            // passed over); B may go on.
            self.a.ended = true;
            if self.b.steps.records().is_some_and(|r| r.bytes.is_empty()) {
                self.b.ended = true;
                return Ok(());
            }
            let b = self.b.read()?;
            return self.in_step(None, b);
        }
        let back = if self.diverged {
            0
        } else {
            passed.steps.min(self.options.context as u64)
        };
        if back > 0 {
            // Read the last equal instructions again, decoded, for the context.
            self.counted(back.wrapping_neg());
            for input in [&mut self.a, &mut self.b] {
                input
                    .steps
                    .seek(input.count)
                    .map_err(|source| DiffError::Read {
                        side: input.side,
                        source,
                    })?;
            }
            self.slow_for = back.saturating_add(1);
            return Ok(());
        }
        let a = self.a.read()?;
        let b = self.b.read()?;
        self.in_step(a, b)
    }

    /// Gives thread `t`, met in equal records on both sides, its slot on both. Both sides
    /// pair threads in order of appearance (the fast path is off with `--thread`) and have
    /// met the same threads, so the slots agree.
    fn pair_same(&mut self, t: u64) -> Result<(), DiffError> {
        let (sa, sb) = (self.a.slot(t), self.b.slot(t));
        match sa {
            Some(s) if sa == sb => {
                self.grow(s);
                Ok(())
            }
            _ => Err(DiffError::Other(Error::Unsupported(format!(
                "thread {t:#x} is paired differently in A and B after equal records"
            )))),
        }
    }

    /// Counts `n` equal pairs compared by their records (wrapping: a negative `n` takes
    /// them back).
    fn counted(&mut self, n: u64) {
        let s = &mut self.summary;
        s.compared = s.compared.wrapping_add(n);
        s.equal = s.equal.wrapping_add(n);
        self.a.count = self.a.count.wrapping_add(n);
        self.b.count = self.b.count.wrapping_add(n);
    }

    /// A pair read in step (either may be missing at an end): compared at once when both
    /// are of one slot, else held.
    fn in_step(
        &mut self,
        a: Option<(usize, Held)>,
        b: Option<(usize, Held)>,
    ) -> Result<(), DiffError> {
        self.last_equal = false;
        match (a, b) {
            (Some((sa, ha)), Some((sb, hb))) if sa == sb && self.swallow_is_none(sa) => {
                self.grow(sa);
                if self.compare_pair(sa, &ha, &hb)? {
                    self.a.pool.push(ha);
                    self.b.pool.push(hb);
                } else {
                    self.a.push(sa, ha);
                    self.b.push(sb, hb);
                }
            }
            (a, b) => {
                if let Some((s, h)) = a {
                    self.route(Side::A, s, h)?;
                }
                if let Some((s, h)) = b {
                    self.route(Side::B, s, h)?;
                }
            }
        }
        Ok(())
    }

    fn swallow_is_none(&self, slot: usize) -> bool {
        self.swallow.get(slot).is_none_or(Option::is_none)
    }

    /// Compares a pair read in step without holding it; returns `false` when the pair must
    /// be held (a pc divergence, which needs the steps after it).
    fn compare_pair(&mut self, slot: usize, a: &Held, b: &Held) -> Result<bool, DiffError> {
        match self.differs(a, b) {
            None => {
                self.equal(slot, a, b)?;
                self.last_equal = true;
                Ok(true)
            }
            Some(Kind::Pc) => Ok(false),
            Some(kind) => {
                if !self.diverged {
                    // The context after the divergence needs the steps after it.
                    return Ok(false);
                }
                self.divergent(slot, kind, a, b)?;
                Ok(true)
            }
        }
    }

    /// Counts an equal pair: closes the slot's open region, keeps context.
    fn equal(&mut self, slot: usize, a: &Held, b: &Held) -> Result<(), DiffError> {
        self.summary.compared = self.summary.compared.saturating_add(1);
        self.summary.equal = self.summary.equal.saturating_add(1);
        if let Some(open) = self.open.get_mut(slot).and_then(Option::take) {
            self.emit(open)?;
        }
        if !self.diverged
            && self.options.context > 0
            && let Some(ring) = self.ring.get_mut(slot)
        {
            if ring.len() >= self.options.context {
                ring.pop_front();
            }
            ring.push_back((Brief::of(&a.step), Brief::of(&b.step)));
        }
        Ok(())
    }

    /// Counts a divergent lockstep pair: extends the slot's open region or opens one.
    fn divergent(&mut self, slot: usize, kind: Kind, a: &Held, b: &Held) -> Result<(), DiffError> {
        self.summary.compared = self.summary.compared.saturating_add(1);
        if let Some(Some(open)) = self.open.get_mut(slot) {
            open.region.a_end = a.step.i.saturating_add(1);
            open.region.b_end = b.step.i.saturating_add(1);
            return Ok(());
        }
        let first = self.first(kind, a, b);
        let open = self.opened(Region {
            kind,
            a_start: a.step.i,
            a_end: a.step.i.saturating_add(1),
            b_start: b.step.i,
            b_end: b.step.i.saturating_add(1),
            first,
        });
        if let Some(o) = self.open.get_mut(slot) {
            *o = Some(open);
        }
        Ok(())
    }

    /// A new region; the first one also takes the context.
    fn opened(&mut self, region: Region) -> Open {
        let first = !self.diverged;
        self.diverged = true;
        Open { region, first }
    }

    /// Puts a step read out of step into its slot's queue (or its swallowing region).
    fn route(&mut self, side: Side, slot: usize, held: Held) -> Result<(), DiffError> {
        self.grow(slot);
        if let Some(Some(sw)) = self.swallow.get_mut(slot) {
            let r = &mut sw.region;
            match side {
                Side::A => {
                    r.a_end = held.step.i.saturating_add(1);
                    self.summary.a_only = self.summary.a_only.saturating_add(1);
                }
                Side::B => {
                    r.b_end = held.step.i.saturating_add(1);
                    self.summary.b_only = self.summary.b_only.saturating_add(1);
                }
            }
            self.side(side).pool.push(held);
            return Ok(());
        }
        self.side(side).push(slot, held);
        Ok(())
    }

    /// Compares every slot both sides hold steps of; hands the steps of a side whose
    /// partner has ended to a swallowing region.
    fn settle(&mut self) -> Result<(), DiffError> {
        let slots = self.a.queues.len().max(self.b.queues.len());
        for slot in 0..slots {
            self.grow(slot);
            while self.a.queued(slot) > 0 && self.b.queued(slot) > 0 {
                self.step_slot(slot)?;
            }
            let ended = (self.b.ended && self.a.queued(slot) > 0)
                || (self.a.ended && self.b.queued(slot) > 0);
            if ended {
                self.swallow(slot)?;
            }
        }
        Ok(())
    }

    /// Compares the front steps of `slot` (both sides have one).
    fn step_slot(&mut self, slot: usize) -> Result<(), DiffError> {
        let kind = match (self.a.front(slot), self.b.front(slot)) {
            (Some(a), Some(b)) => self.differs(a, b),
            _ => return Ok(()),
        };
        match kind {
            Some(Kind::Pc) => return self.resync(slot),
            Some(_) if !self.diverged => self.capture_context(slot)?,
            _ => {}
        }
        let (Some(a), Some(b)) = (self.a.take_front(slot), self.b.take_front(slot)) else {
            return Ok(());
        };
        match kind {
            None => self.equal(slot, &a, &b)?,
            Some(kind) => self.divergent(slot, kind, &a, &b)?,
        }
        self.a.pool.push(a);
        self.b.pool.push(b);
        Ok(())
    }

    /// Reads `side` until `slot` holds `n` steps, the side ends or holds too many; returns
    /// whether it holds them.
    fn fill(&mut self, side: Side, slot: usize, n: usize) -> Result<bool, DiffError> {
        loop {
            let cap = self.cap;
            let input = self.side(side);
            if input.queued(slot) >= n {
                return Ok(true);
            }
            if input.ended || input.held >= cap {
                return Ok(false);
            }
            if let Some((s, h)) = input.read()? {
                self.route(side, s, h)?;
            }
        }
    }

    /// Records the context of the first divergence, at the front of `slot`.
    fn capture_context(&mut self, slot: usize) -> Result<(), DiffError> {
        let after = self.options.context.saturating_add(1);
        self.fill(Side::A, slot, after)?;
        self.fill(Side::B, slot, after)?;
        let ring = self
            .ring
            .get_mut(slot)
            .map(std::mem::take)
            .unwrap_or_default();
        let mut context = Context {
            before: ring.len(),
            ..Context::default()
        };
        for (a, b) in ring {
            context.a.push(a.line());
            context.b.push(b.line());
        }
        for (input, lines) in [(&self.a, &mut context.a), (&self.b, &mut context.b)] {
            if let Some(q) = input.queue(slot) {
                lines.extend(q.iter().take(after).map(|h| Line::of(&h.step)));
            }
        }
        self.summary.context = Some(context);
        Ok(())
    }

    /// The pcs of `slot` part at the front: looks ahead for the nearest point where both
    /// sides run [`SYNC_RUN`] equal pcs, emits the pc region up to it and drops its steps;
    /// without one, the slot's rest is one region.
    fn resync(&mut self, slot: usize) -> Result<(), DiffError> {
        if let Some(open) = self.open.get_mut(slot).and_then(Option::take) {
            self.emit(open)?;
        }
        if !self.diverged {
            self.capture_context(slot)?;
        }
        let rebase = self.options.rebase;
        let pc_b = |h: &Held| rebase.map_or(h.step.pc, |r| r.apply(h.step.pc));
        // The first start of each run of SYNC_RUN pcs, by its hash, per side.
        let mut runs_a: HashMap<u64, usize> = HashMap::new();
        let mut runs_b: HashMap<u64, usize> = HashMap::new();
        let mut best: Option<(usize, usize)> = None;
        let mut k = 0usize;
        let limit = self.window.saturating_add(SYNC_RUN);
        while k < limit {
            let has_a = self.fill(Side::A, slot, k.saturating_add(1))?;
            let has_b = self.fill(Side::B, slot, k.saturating_add(1))?;
            if !has_a && !has_b {
                break;
            }
            if let Some(start) = k.checked_sub(SYNC_RUN - 1) {
                if has_a {
                    let h = self.run_hash(Side::A, slot, start, &|h| h.step.pc);
                    runs_a.entry(h).or_insert(start);
                    if let Some(&t) = runs_b.get(&h) {
                        self.candidate(slot, start, t, &mut best);
                    }
                }
                if has_b {
                    let h = self.run_hash(Side::B, slot, start, &pc_b);
                    runs_b.entry(h).or_insert(start);
                    if let Some(&s) = runs_a.get(&h) {
                        self.candidate(slot, s, start, &mut best);
                    }
                }
            }
            // A nearer point would have shown by now (see `candidate`).
            if let Some((x, y)) = best
                && k >= x.saturating_add(y).saturating_add(SYNC_RUN)
            {
                break;
            }
            k = k.saturating_add(1);
        }
        let Some((x, y)) = best else {
            return self.swallow(slot);
        };
        let mut region = self.pc_region(slot);
        if let Some(h) = x.checked_sub(1).and_then(|l| self.a.at(slot, l)) {
            region.a_end = h.step.i.saturating_add(1);
        }
        if let Some(h) = y.checked_sub(1).and_then(|l| self.b.at(slot, l)) {
            region.b_end = h.step.i.saturating_add(1);
        }
        for _ in 0..x {
            self.a.pop(slot);
        }
        for _ in 0..y {
            self.b.pop(slot);
        }
        self.summary.a_only = self.summary.a_only.saturating_add(x as u64);
        self.summary.b_only = self.summary.b_only.saturating_add(y as u64);
        let open = self.opened(region);
        self.emit(open)
    }

    /// An empty pc region at the front of `slot`: what each side holds first (a side
    /// without a held step starts where it is).
    fn pc_region(&self, slot: usize) -> Region {
        let (fa, fb) = (self.a.front(slot), self.b.front(slot));
        let first = First {
            a_i: fa.map(|h| h.step.i),
            b_i: fb.map(|h| h.step.i),
            a_thread: fa.map(|h| h.step.thread),
            b_thread: fb.map(|h| h.step.thread),
            a_pc: fa.map(|h| Hex(h.step.pc)),
            b_pc: fb.map(|h| Hex(h.step.pc)),
            ..First::default()
        };
        let a_start = fa.map_or(self.a.count, |h| h.step.i);
        let b_start = fb.map_or(self.b.count, |h| h.step.i);
        Region {
            kind: Kind::Pc,
            a_start,
            a_end: a_start,
            b_start,
            b_end: b_start,
            first,
        }
    }

    /// A hash of the [`SYNC_RUN`] pcs of `side`'s `slot` from `start` (all held).
    fn run_hash(&self, side: Side, slot: usize, start: usize, pc: &dyn Fn(&Held) -> u64) -> u64 {
        let input = match side {
            Side::A => &self.a,
            Side::B => &self.b,
        };
        let Some(q) = input.queue(slot) else { return 0 };
        q.range(start..start.saturating_add(SYNC_RUN).min(q.len()))
            .fold(0xcbf2_9ce4_8422_2325u64, |h, s| {
                (h ^ pc(s))
                    .wrapping_mul(0x0000_0100_0000_01b3)
                    .rotate_left(29)
            })
    }

    /// Keeps (x, y) in `best` if its runs really are equal and it is nearer. Every start
    /// pair (s, t) is seen when the later of its runs is complete, at look-ahead
    /// max(s, t) + SYNC_RUN - 1, so once the look-ahead passes x + y + SYNC_RUN no nearer
    /// pair (s + t < x + y) can appear.
    fn candidate(&self, slot: usize, x: usize, y: usize, best: &mut Option<(usize, usize)>) {
        if x >= self.window || y >= self.window {
            return;
        }
        if best.is_some_and(|(bx, by)| bx.saturating_add(by) <= x.saturating_add(y)) {
            return;
        }
        let rebase = self.options.rebase;
        let equal = (0..SYNC_RUN).all(|k| {
            match (
                self.a.at(slot, x.saturating_add(k)),
                self.b.at(slot, y.saturating_add(k)),
            ) {
                (Some(a), Some(b)) => a.step.pc == rebase.map_or(b.step.pc, |r| r.apply(b.step.pc)),
                _ => false,
            }
        });
        if equal {
            *best = Some((x, y));
        }
    }

    /// Gives up on `slot`: its held steps on both sides, and all read of it from now on,
    /// are one pc region (no resynchronisation within the window, a side has ended, or the
    /// threads interleave too differently to hold the steps between).
    fn swallow(&mut self, slot: usize) -> Result<(), DiffError> {
        self.grow(slot);
        if let Some(open) = self.open.get_mut(slot).and_then(Option::take) {
            self.emit(open)?;
        }
        if self.swallow_is_none(slot) {
            if !self.diverged {
                self.capture_context(slot)?;
            }
            let region = self.pc_region(slot);
            let open = self.opened(region);
            if let Some(s) = self.swallow.get_mut(slot) {
                *s = Some(open);
            }
        }
        for side in [Side::A, Side::B] {
            while let Some(h) = self.side(side).take_front(slot) {
                self.route(side, slot, h)?;
            }
        }
        Ok(())
    }

    /// What differs first between `a` and `b`, if anything.
    fn differs(&self, a: &Held, b: &Held) -> Option<Kind> {
        let (sa, sb) = (&a.step, &b.step);
        match self.options.rebase {
            None => {
                if sa.pc != sb.pc {
                    return Some(Kind::Pc);
                }
                if sa.opcode != sb.opcode {
                    return Some(Kind::Opcode);
                }
                let regs_equal = match &self.compared_regs {
                    None => a.regs == b.regs,
                    Some(idx) => idx.iter().all(|&k| a.regs.get(k) == b.regs.get(k)),
                };
                if !regs_equal {
                    return Some(Kind::Regs);
                }
                if self.options.mem && (sa.mem != sb.mem || sa.data != sb.data) {
                    // Equal accesses can still point at different places in `data`.
                    return self.mem_diff(sa, sb).map(|_| Kind::Mem);
                }
                None
            }
            Some(r) => {
                if sa.pc != r.apply(sb.pc) {
                    return Some(Kind::Pc);
                }
                if sa.opcode != sb.opcode {
                    return Some(Kind::Opcode);
                }
                if !self.reg_diffs(a, b).is_empty() {
                    return Some(Kind::Regs);
                }
                if self.options.mem && self.mem_diff(sa, sb).is_some() {
                    return Some(Kind::Mem);
                }
                None
            }
        }
    }

    /// The compared registers that differ.
    fn reg_diffs(&self, a: &Held, b: &Held) -> Vec<RegDiff> {
        let rebase = |v: u64| self.options.rebase.map_or(v, |r| r.apply(v));
        let n = a.regs.len().max(b.regs.len());
        let mut out = Vec::new();
        for k in 0..n {
            if self
                .compared_regs
                .as_ref()
                .is_some_and(|idx| !idx.contains(&k))
            {
                continue;
            }
            let (x, y) = (a.regs.get(k).copied(), b.regs.get(k).copied());
            if x != y.map(rebase) {
                out.push(RegDiff {
                    name: self
                        .names
                        .get(k)
                        .cloned()
                        .unwrap_or_else(|| format!("#{k}")),
                    a: Hex(x.unwrap_or(0)),
                    b: Hex(y.unwrap_or(0)),
                });
            }
        }
        out
    }

    /// The first memory access that differs.
    fn mem_diff(&self, a: &Step, b: &Step) -> Option<MemDiff> {
        let rebase = self.options.rebase;
        let n = a.mem.len().max(b.mem.len());
        for index in 0..n {
            let (x, y) = (a.mem.get(index), b.mem.get(index));
            let same = match (x, y) {
                (Some(x), Some(y)) => {
                    x.addr == rebase.map_or(y.addr, |r| r.apply(y.addr))
                        && x.len == y.len
                        && self.same_value(a.old(x), b.old(y))
                        && self.same_value(a.new(x), b.new(y))
                }
                _ => false,
            };
            if !same {
                let value = |bytes: Option<&[u8]>| {
                    bytes.map(|v| trace_model::steps::value_hex(v, self.big_endian))
                };
                return Some(MemDiff {
                    index,
                    a_count: a.mem.len(),
                    b_count: b.mem.len(),
                    a_addr: x.map(|m| Hex(m.addr)),
                    b_addr: y.map(|m| Hex(m.addr)),
                    a_len: x.map(|m| m.len),
                    b_len: y.map(|m| m.len),
                    a_old: x.and_then(|m| value(a.old(m))),
                    b_old: y.and_then(|m| value(b.old(m))),
                    a_new: x.and_then(|m| value(a.new(m))),
                    b_new: y.and_then(|m| value(b.new(m))),
                });
            }
        }
        None
    }

    /// Whether A's bytes `x` equal B's `y` (as a word rebased, with `--rebase`).
    fn same_value(&self, x: Option<&[u8]>, y: Option<&[u8]>) -> bool {
        match (x, y, self.options.rebase) {
            (Some(x), Some(y), Some(r)) if x.len() == y.len() && matches!(y.len(), 4 | 8) => {
                let (wx, wy) = (word(x, self.big_endian), word(y, self.big_endian));
                wx == r.apply(wy) || x == y
            }
            _ => x == y,
        }
    }

    /// What differs at the first instruction of a lockstep region.
    fn first(&self, kind: Kind, a: &Held, b: &Held) -> First {
        let (sa, sb) = (&a.step, &b.step);
        let mut first = First {
            a_i: Some(sa.i),
            b_i: Some(sb.i),
            a_thread: Some(sa.thread),
            b_thread: Some(sb.thread),
            a_pc: Some(Hex(sa.pc)),
            b_pc: Some(Hex(sb.pc)),
            ..First::default()
        };
        match kind {
            Kind::Pc => {}
            Kind::Opcode => {
                first.a_opcode = Some(hex_bytes(&sa.opcode));
                first.b_opcode = Some(hex_bytes(&sb.opcode));
            }
            Kind::Regs => first.regs = self.reg_diffs(a, b),
            Kind::Mem => first.mem = self.mem_diff(sa, sb),
        }
        first
    }

    /// Hands a closed region out.
    fn emit(&mut self, open: Open) -> Result<(), DiffError> {
        let s = &mut self.summary;
        s.regions = s.regions.saturating_add(1);
        let k = &mut s.kinds;
        let n = match open.region.kind {
            Kind::Pc => &mut k.pc,
            Kind::Opcode => &mut k.opcode,
            Kind::Regs => &mut k.regs,
            Kind::Mem => &mut k.mem,
        };
        *n = n.saturating_add(1);
        (self.on_region)(&open.region)?;
        if open.first {
            self.summary.first = Some(open.region);
        }
        Ok(())
    }

    /// Closes what is open and checks the chosen threads appeared.
    fn finish(mut self) -> Result<Summary, DiffError> {
        let opens: Vec<Open> = self
            .open
            .iter_mut()
            .chain(self.swallow.iter_mut())
            .filter_map(Option::take)
            .collect();
        let mut opens = opens;
        opens.sort_by_key(|o| (o.region.a_start, o.region.b_start));
        for open in opens {
            self.emit(open)?;
        }
        for (side, input) in [(Side::A, &self.a), (Side::B, &self.b)] {
            if let Some(fixed) = &input.fixed {
                for (slot, t) in fixed.iter().enumerate() {
                    if input.threads.get(slot).is_none_or(Option::is_none) {
                        return Err(DiffError::Other(Error::Unsupported(format!(
                            "--thread: thread {t} does not appear in {side}"
                        ))));
                    }
                }
            }
        }
        let slots = self.a.threads.len().max(self.b.threads.len());
        self.summary.threads = (0..slots)
            .map(|s| {
                [
                    self.a.threads.get(s).copied().flatten(),
                    self.b.threads.get(s).copied().flatten(),
                ]
            })
            .collect();
        self.summary.a_instructions = self.a.count;
        self.summary.b_instructions = self.b.count;
        self.summary.skipped = [self.a.skipped, self.b.skipped];
        Ok(self.summary)
    }
}

/// `a, b, c`.
fn list(names: &[String]) -> String {
    names.join(", ")
}

/// Bytes as lowercase hex.
fn hex_bytes(bytes: &[u8]) -> String {
    use std::fmt::Write;
    let mut s = String::with_capacity(bytes.len().saturating_mul(2));
    for b in bytes {
        let _ = write!(s, "{b:02x}");
    }
    s
}

/// Up to 8 bytes as a word in the target's byte order.
fn word(bytes: &[u8], big_endian: bool) -> u64 {
    let fold = |w: u64, b: &u8| (w << 8) | u64::from(*b);
    if big_endian {
        bytes.iter().take(8).fold(0, fold)
    } else {
        bytes.iter().take(8).rev().fold(0, fold)
    }
}

#[cfg(test)]
#[allow(clippy::arithmetic_side_effects)]
mod tests {
    use super::*;
    use quickcheck::{QuickCheck, TestResult};
    use trac_x64dbg::testgen::{self, Machine};
    use trac_x64dbg::{Arch, Header, MemAccess, Recorder, RecorderOptions, RegDump, Writer};
    use trace_model::{Ctx, Input as TraceInput, Options};

    /// x64dbg's word index of rbx, for the register-only divergence.
    const RBX: usize = 3;

    /// Records `steps` as an x64dbg trace.
    fn record(steps: &[trac_x64dbg::Step]) -> Vec<u8> {
        let header = Header::new(Arch::X64, "diff.exe");
        let writer = Writer::new(Vec::new(), &header).unwrap();
        let mut rec = Recorder::new(writer, RecorderOptions::default());
        for s in steps {
            rec.step(s.clone()).unwrap();
        }
        rec.finish().unwrap()
    }

    /// One instruction of a simple program: a 4-byte nop at `pc` in `thread`, registers a
    /// function of both (so any interleaving of threads gives the same per-thread states).
    fn ins(thread: u32, pc: u64) -> trac_x64dbg::Step {
        let mut regs = RegDump::new(Arch::X64);
        regs.set_word(0, pc ^ 0x5555);
        regs.set_word(RBX, u64::from(thread) << 32);
        regs.set_ip(pc);
        trac_x64dbg::Step {
            thread,
            opcode: vec![0x0f, 0x1f, 0x40, 0x00],
            regs,
            mem: Vec::new(),
        }
    }

    /// `n` instructions of `thread` from `pc`.
    fn run(thread: u32, pc: u64, n: u64) -> Vec<trac_x64dbg::Step> {
        (0..n).map(|k| ins(thread, pc + 4 * k)).collect()
    }

    fn gzip(bytes: &[u8]) -> Vec<u8> {
        use std::io::Write;
        let mut z = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        z.write_all(bytes).unwrap();
        z.finish().unwrap()
    }

    /// The regions and summary of `a` against `b`, in memory (where equal stretches are
    /// compared by their records).
    fn diff_bytes(
        a: &[u8],
        b: &[u8],
        options: &DiffOptions,
    ) -> Result<(Vec<Region>, Summary), DiffError> {
        diff_inputs(a.to_vec(), b.to_vec(), options)
    }

    fn diff_inputs(
        a: Vec<u8>,
        b: Vec<u8>,
        options: &DiffOptions,
    ) -> Result<(Vec<Region>, Summary), DiffError> {
        let handler = trace_registry::by_name("x64dbg").unwrap();
        let mut ia = TraceInput::from_bytes("a", a).unwrap();
        let mut ib = TraceInput::from_bytes("b", b).unwrap();
        let o = Options::default();
        let mut sa = handler.steps(&mut ia, &mut Ctx::new(&o)).unwrap();
        let mut sb = handler.steps(&mut ib, &mut Ctx::new(&o)).unwrap();
        let mut regions = Vec::new();
        let summary = diff(&mut *sa, &mut *sb, options, &mut |r| {
            regions.push(r.clone());
            Ok(())
        })?;
        Ok((regions, summary))
    }

    fn spans(regions: &[Region]) -> Vec<(Kind, u64, u64, u64, u64)> {
        regions
            .iter()
            .map(|r| (r.kind, r.a_start, r.a_end, r.b_start, r.b_end))
            .collect()
    }

    #[test]
    fn parting_and_rejoining_gives_the_exact_pc_region() {
        // A runs 100 instructions; B replaces A's 40..43 with 5 others, then rejoins.
        let a = run(1, 0x1000, 100);
        let mut b = run(1, 0x1000, 40);
        b.extend(run(1, 0x9000, 5));
        b.extend(run(1, 0x1000 + 4 * 43, 57));
        let (regions, s) = diff_bytes(&record(&a), &record(&b), &DiffOptions::default()).unwrap();
        assert_eq!(spans(&regions), [(Kind::Pc, 40, 43, 40, 45)]);
        let f = &regions[0].first;
        assert_eq!(
            (f.a_pc, f.b_pc),
            (Some(Hex(0x1000 + 4 * 40)), Some(Hex(0x9000)))
        );
        assert_eq!((s.compared, s.equal, s.a_only, s.b_only), (97, 97, 3, 5));
        assert_eq!(s.first.as_ref(), regions.first());
        let c = s.context.unwrap();
        assert_eq!(c.before, 3);
        assert_eq!(
            c.a.iter().map(|l| l.i).collect::<Vec<_>>(),
            [37, 38, 39, 40, 41, 42, 43]
        );
        assert_eq!(c.b[3].pc, Hex(0x9000));
    }

    #[test]
    fn a_register_and_a_memory_divergence_are_lockstep_regions() {
        let mut a = run(1, 0x1000, 60);
        for s in &mut a {
            s.mem = vec![MemAccess {
                flags: 0,
                address: 0x5000,
                old: 1,
                new: Some(2),
            }];
        }
        let mut b = a.clone();
        for s in &mut b[30..33] {
            s.regs.set_word(RBX, 0xbad);
        }
        b[50].mem[0].new = Some(3);
        let (regions, s) = diff_bytes(&record(&a), &record(&b), &DiffOptions::default()).unwrap();
        assert_eq!(
            spans(&regions),
            [(Kind::Regs, 30, 33, 30, 33), (Kind::Mem, 50, 51, 50, 51)]
        );
        assert_eq!(
            regions[0].first.regs,
            [RegDiff {
                name: "rbx".into(),
                a: Hex(1 << 32),
                b: Hex(0xbad)
            }]
        );
        let m = regions[1].first.mem.as_ref().unwrap();
        assert_eq!(
            (m.a_new.as_deref(), m.b_new.as_deref()),
            (Some("0x2"), Some("0x3"))
        );
        assert_eq!((s.compared, s.equal), (60, 56));
        // --ignore rbx and --no-mem leave nothing.
        let options = DiffOptions {
            ignore: vec!["RBX".into()],
            mem: false,
            ..DiffOptions::default()
        };
        let (regions, _) = diff_bytes(&record(&a), &record(&b), &options).unwrap();
        assert!(regions.is_empty());
        let bad = DiffOptions {
            ignore: vec!["xyz".into()],
            ..DiffOptions::default()
        };
        assert!(matches!(
            diff_bytes(&record(&a), &record(&b), &bad),
            Err(DiffError::Other(_))
        ));
    }

    #[test]
    fn threads_pair_in_order_of_appearance_whatever_the_interleaving() {
        // The same two threads' instructions, switched at different points.
        let (t1, t2) = (run(1, 0x1000, 30), run(2, 0x2000, 30));
        let mut a = Vec::new();
        for k in 0..3 {
            a.extend_from_slice(&t1[k * 10..k * 10 + 10]);
            a.extend_from_slice(&t2[k * 10..k * 10 + 10]);
        }
        let mut b = t1[..5].to_vec();
        b.extend_from_slice(&t2[..25]);
        b.extend_from_slice(&t1[5..]);
        b.extend_from_slice(&t2[25..]);
        let (regions, s) = diff_bytes(&record(&a), &record(&b), &DiffOptions::default()).unwrap();
        assert!(regions.is_empty(), "{regions:?}");
        assert_eq!(
            (s.compared, s.threads.clone()),
            (60, vec![[Some(1), Some(1)], [Some(2), Some(2)]])
        );
        // --thread: one pair only; B's second thread under another id.
        let mut c = b.clone();
        for s in &mut c {
            if s.thread == 2 {
                s.thread = 9;
                s.regs.set_word(RBX, 2 << 32);
            } else {
                s.regs.set_word(0, 0xdead);
            }
        }
        let options = DiffOptions {
            threads: vec![(2, 9)],
            ..DiffOptions::default()
        };
        let (regions, s) = diff_bytes(&record(&a), &record(&c), &options).unwrap();
        assert!(regions.is_empty(), "{regions:?}");
        assert_eq!((s.compared, s.skipped), (30, [30, 30]));
        let options = DiffOptions {
            threads: vec![(2, 7)],
            ..DiffOptions::default()
        };
        assert!(diff_bytes(&record(&a), &record(&c), &options).is_err());
    }

    #[test]
    fn rebase_fixes_an_aslr_pair() {
        let image = |base: u64| -> Vec<trac_x64dbg::Step> {
            (0..40u64)
                .map(|k| {
                    let mut s = ins(1, base + 0x1000 + 4 * k);
                    s.regs.set_word(0, base + 0x2000);
                    s.mem = vec![MemAccess {
                        flags: 1,
                        address: base + 0x3000,
                        old: base + 0x10,
                        new: None,
                    }];
                    s
                })
                .collect()
        };
        let (a, b) = (record(&image(0x40_0000)), record(&image(0x7ff6_1234_0000)));
        let (regions, _) = diff_bytes(&a, &b, &DiffOptions::default()).unwrap();
        assert_eq!(spans(&regions), [(Kind::Pc, 0, 40, 0, 40)]);
        let rebase = Rebase {
            a_base: 0x40_0000,
            b_base: 0x7ff6_1234_0000,
            size: DEFAULT_REBASE_SIZE,
        };
        let options = DiffOptions {
            rebase: Some(rebase),
            ..DiffOptions::default()
        };
        let (regions, s) = diff_bytes(&a, &b, &options).unwrap();
        assert!(regions.is_empty(), "{regions:?}");
        assert_eq!(s.equal, 40);
        assert_eq!(
            rebase.apply(0x7ff6_1234_0000 + DEFAULT_REBASE_SIZE),
            0x7ff6_1234_0000 + DEFAULT_REBASE_SIZE
        );
    }

    #[test]
    fn a_longer_side_and_a_lost_pair_are_pc_regions_to_the_end() {
        let a = run(1, 0x1000, 50);
        let b = run(1, 0x1000, 45);
        let (regions, _) = diff_bytes(&record(&a), &record(&b), &DiffOptions::default()).unwrap();
        assert_eq!(spans(&regions), [(Kind::Pc, 45, 50, 45, 45)]);
        // No resynchronisation within a window of 20: the rest is one region.
        let mut c = run(1, 0x1000, 10);
        c.extend(run(1, 0x9000, 30));
        c.extend(run(1, 0x1000 + 40, 40));
        let options = DiffOptions {
            window: 20,
            ..DiffOptions::default()
        };
        let (regions, _) = diff_bytes(&record(&a), &record(&c), &options).unwrap();
        assert_eq!(spans(&regions), [(Kind::Pc, 10, 50, 10, 80)]);
        let (regions, _) = diff_bytes(&record(&a), &record(&c), &DiffOptions::default()).unwrap();
        assert_eq!(spans(&regions), [(Kind::Pc, 10, 10, 10, 40)]);
    }

    /// Realistic steps from the synthetic machine (several threads).
    fn machine(seed: u64, threads: u32, n: usize) -> Vec<trac_x64dbg::Step> {
        let mut m = Machine::new(testgen::Options {
            arch: Arch::X64,
            threads,
            max_run: 40,
            seed,
        });
        (0..n).map(|_| m.step()).collect()
    }

    #[test]
    fn quickcheck_a_trace_equals_itself_and_an_insertion_is_one_pc_region() {
        fn itself(seed: u64, threads: u8, n: u16) -> TestResult {
            let steps = machine(seed, u32::from(threads % 4) + 1, usize::from(n % 2000));
            let bytes = record(&steps);
            let (regions, s) = diff_bytes(&bytes, &bytes, &DiffOptions::default()).unwrap();
            TestResult::from_bool(
                regions.is_empty() && s.equal == steps.len() as u64 && s.is_equal(),
            )
        }
        fn insertion(seed: u64, n: u16, at: u16, k: u8) -> TestResult {
            let n = usize::from(n % 1000) + 20;
            let at = usize::from(at) % (n - 16);
            let k = usize::from(k % 50) + 1;
            let a = machine(seed, 1, n);
            let mut b = a[..at].to_vec();
            for j in 0..k {
                let mut s = a[at].clone();
                s.regs.set_ip(0xdead_0000 + 4 * j as u64);
                s.mem.clear();
                b.push(s);
            }
            b.extend_from_slice(&a[at..]);
            let (regions, s) =
                diff_bytes(&record(&a), &record(&b), &DiffOptions::default()).unwrap();
            let at = at as u64;
            TestResult::from_bool(
                spans(&regions) == [(Kind::Pc, at, at, at, at + k as u64)] && s.b_only == k as u64,
            )
        }
        QuickCheck::new()
            .tests(40)
            .quickcheck(itself as fn(u64, u8, u16) -> TestResult);
        QuickCheck::new()
            .tests(40)
            .quickcheck(insertion as fn(u64, u16, u16, u8) -> TestResult);
    }

    #[test]
    fn quickcheck_records_and_decoded_steps_give_the_same_diff() {
        // Streamed (gzip) inputs have no records: every step is decoded and compared.
        fn prop(seed: u64, threads: u8, n: u16, at: u16, k: u8, how: u8) -> TestResult {
            let n = usize::from(n % 1500) + 30;
            let at = usize::from(at) % n;
            let k = (usize::from(k % 20) + 1).min(n - at);
            let a = machine(seed, u32::from(threads % 3) + 1, n);
            let mut b = a.clone();
            match how % 5 {
                0 => {
                    let extra: Vec<_> = (0..k)
                        .map(|j| {
                            let mut s = a[at].clone();
                            s.regs.set_ip(0xdead_0000 + 4 * j as u64);
                            s
                        })
                        .collect();
                    b.splice(at..at, extra);
                }
                1 => {
                    b.drain(at..at + k);
                }
                2 => b[at].regs.set_word(0, 0x1234_5678),
                3 => {
                    b[at].mem.push(MemAccess {
                        flags: 1,
                        address: 0x10,
                        old: 5,
                        new: None,
                    });
                }
                _ => b[at].opcode = vec![0xcc],
            }
            let (ra, rb) = (record(&a), record(&b));
            let options = DiffOptions::default();
            let (fast, sf) = diff_inputs(ra.clone(), rb.clone(), &options).unwrap();
            let (slow, ss) = diff_inputs(gzip(&ra), gzip(&rb), &options).unwrap();
            let counts = |s: &Summary| (s.compared, s.equal, s.a_only, s.b_only, s.regions);
            let same_context = !threads.is_multiple_of(3) || sf.context == ss.context;
            TestResult::from_bool(
                fast == slow && counts(&sf) == counts(&ss) && !fast.is_empty() && same_context,
            )
        }
        QuickCheck::new()
            .tests(60)
            .quickcheck(prop as fn(u64, u8, u16, u16, u8, u8) -> TestResult);
    }
}
