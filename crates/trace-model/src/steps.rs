//! The instruction-stream view of a trace: one [`Step`] per executed instruction, with its
//! thread, pc, bytes and memory accesses, and the register state before it.
//!
//! The analyses (`state`, `mem`, `xref`, `diff`, `find`) are written once over this view;
//! a format that has an instruction stream implements [`Steps`] and returns it from
//! [`Handler::steps`](crate::Handler::steps). Formats without one (DCFG, DCFG-Trace) keep the
//! default, an [`Error::Unsupported`].

use std::any::Any;
use std::borrow::Cow;
use std::fmt;
use std::sync::{Arc, OnceLock};

use smallvec::SmallVec;

use crate::Error;

/// The instruction set of a stream: how to disassemble it and how wide its words are.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Isa {
    /// x86-64.
    X64,
    /// 32-bit x86.
    X86,
    /// 32-bit PowerPC (big-endian).
    Ppc32,
    /// Unknown or not decodable here (a tfile whose target description is unknown).
    Other,
}

impl Isa {
    /// The size of a general register in bytes.
    #[must_use]
    pub fn word_size(self) -> u32 {
        match self {
            Isa::X64 | Isa::Other => 8,
            Isa::X86 | Isa::Ppc32 => 4,
        }
    }
}

/// The operating system a stream's program ran on, as far as the format says
/// ([`Steps::os`]): what decides the calling convention `calls` reads arguments by.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Os {
    /// Not said by the format.
    #[default]
    Unknown,
    /// Windows (x64dbg traces of Windows programs).
    Windows,
    /// A Unix-like system (Linux, the BSDs, macOS).
    Unix,
}

/// What an instruction did with a memory range.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum AccessKind {
    /// Not known: the format does not say, or the operands could not be matched.
    #[default]
    Unknown,
    /// Read only.
    Read,
    /// Written only.
    Write,
    /// Read and written.
    ReadWrite,
}

impl AccessKind {
    /// The name used in JSON output: `unknown`, `read`, `write`, `readwrite`.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            AccessKind::Unknown => "unknown",
            AccessKind::Read => "read",
            AccessKind::Write => "write",
            AccessKind::ReadWrite => "readwrite",
        }
    }
}

/// One memory access of a [`Step`]: a range of `len` bytes at `addr`, with the bytes before
/// and after the instruction where the format records them (in [`Step::data`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Access {
    /// The first address.
    pub addr: u64,
    /// The bytes covered: the recorded word for x64dbg (8 or 4), a tfile memory block's
    /// length, the operand size once disassembly has matched it.
    pub len: u32,
    /// Whether the instruction read or wrote it, when known.
    pub kind: AccessKind,
    /// Whether `len` is the operand size found by disassembly (else the recorded width).
    pub sized: bool,
    /// Where the `len` bytes before the instruction start in [`Step::data`], if recorded.
    pub old: Option<u32>,
    /// Where the `len` bytes after the instruction start in [`Step::data`], if recorded
    /// (x64dbg: only when the value changed).
    pub new: Option<u32>,
}

/// One executed instruction. Readers reuse one `Step` (its vectors keep their capacity).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Step {
    /// The global instruction index (0-based, over all threads, in file order).
    pub i: u64,
    /// The thread (0 where the format has none).
    pub thread: u64,
    /// The address of the instruction.
    pub pc: u64,
    /// The instruction's bytes, where recorded.
    pub opcode: SmallVec<[u8; 16]>,
    /// The memory accesses, in the recorded order.
    pub mem: Vec<Access>,
    /// The bytes the accesses point into (little-endian words for x64dbg).
    pub data: Vec<u8>,
}

impl Step {
    /// Empties the step for the next instruction, keeping capacity.
    pub fn clear(&mut self) {
        self.opcode.clear();
        self.mem.clear();
        self.data.clear();
    }

    /// Appends an access with the given bytes before (and after) the instruction.
    pub fn push_access(&mut self, addr: u64, old: Option<&[u8]>, new: Option<&[u8]>, len: u32) {
        let mut at = |bytes: &[u8]| {
            let start = u32::try_from(self.data.len()).unwrap_or(u32::MAX);
            self.data.extend_from_slice(bytes);
            start
        };
        let old = old.map(&mut at);
        let new = new.map(&mut at);
        self.mem.push(Access {
            addr,
            len,
            kind: AccessKind::Unknown,
            sized: false,
            old,
            new,
        });
    }

    /// Appends an access of one little-endian word of `size` bytes (x64dbg's records).
    #[inline]
    pub fn push_word(&mut self, addr: u64, size: u32, old: u64, new: Option<u64>) {
        // The usual sizes as copies of constant size (no call to memcpy per access).
        match size {
            8 => return self.push_word_of::<8>(addr, old, new),
            4 => return self.push_word_of::<4>(addr, old, new),
            _ => {}
        }
        let n = usize::try_from(size).unwrap_or(8).min(8);
        let old = old.to_le_bytes();
        let new = new.map(u64::to_le_bytes);
        self.push_access(
            addr,
            old.get(..n),
            new.as_ref().and_then(|b| b.get(..n)),
            size,
        );
    }

    /// [`Step::push_word`] of a word of `N` bytes (at most 8).
    #[inline]
    fn push_word_of<const N: usize>(&mut self, addr: u64, old: u64, new: Option<u64>) {
        let start = |data: &Vec<u8>| u32::try_from(data.len()).unwrap_or(u32::MAX);
        let word = |v: u64| {
            let mut w = [0u8; N];
            for (d, s) in w.iter_mut().zip(v.to_le_bytes()) {
                *d = s;
            }
            w
        };
        let old_at = start(&self.data);
        self.data.extend_from_slice(&word(old));
        let new_at = new.map(|v| {
            let at = start(&self.data);
            self.data.extend_from_slice(&word(v));
            at
        });
        self.mem.push(Access {
            addr,
            len: N as u32,
            kind: AccessKind::Unknown,
            sized: false,
            old: Some(old_at),
            new: new_at,
        });
    }

    /// The bytes before the instruction of access `a`, if recorded.
    #[must_use]
    pub fn old(&self, a: &Access) -> Option<&[u8]> {
        self.bytes_at(a.old, a.len)
    }

    /// The bytes after the instruction of access `a`, if recorded.
    // `old` and `new` are x64dbg's (and the JSON's) names for the two values, not a
    // constructor.
    #[allow(clippy::new_ret_no_self)]
    #[must_use]
    pub fn new(&self, a: &Access) -> Option<&[u8]> {
        self.bytes_at(a.new, a.len)
    }

    fn bytes_at(&self, start: Option<u32>, len: u32) -> Option<&[u8]> {
        let start = usize::try_from(start?).ok()?;
        let end = start.checked_add(usize::try_from(len).ok()?)?;
        self.data.get(start..end)
    }
}

/// A register value: a word, or a wider register as little-endian bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RegValue {
    /// Up to 64 bits.
    Word(u64),
    /// Wider than 64 bits (XMM, YMM halves, x87 data), little-endian.
    Wide(SmallVec<[u8; 16]>),
}

impl std::fmt::Display for RegValue {
    /// `0x…`: a word without leading zeros, a wide value with all its digits.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RegValue::Word(w) => write!(f, "{w:#x}"),
            RegValue::Wide(bytes) => {
                f.write_str("0x")?;
                for b in bytes.iter().rev() {
                    write!(f, "{b:02x}")?;
                }
                Ok(())
            }
        }
    }
}

/// A named register and its value, as `state` prints it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NamedReg {
    /// The name, lowercase where the format's own names are (`rax`, `xmm0`, `flags.z`).
    pub name: Cow<'static, str>,
    /// The value.
    pub value: RegValue,
}

/// Where a stream finds a named register, for [`Registers::update_regs`]: found once by
/// [`Registers::reg_source`], then read at every step without a lookup by name. The stream's
/// registers are seen as one little-endian byte string (x64dbg: the `REGDUMP`; by default:
/// the values of [`Steps::named_regs`] one after the other, a word as 8 bytes), `at` is the
/// register's offset in it and `len` its size, so registers next to each other there can
/// be copied at once.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RegSource {
    /// Where the register is, in the stream's own terms.
    pub at: usize,
    /// Its size in bytes.
    pub len: usize,
}

/// One register copy of a [`RegPlan`]: the bytes at `src` (a register, part of one, or
/// registers next to each other) to `dst..dst + len` of the buffer, zero-filled past
/// `src.len`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RegCopy {
    /// The bytes in the stream's register byte string.
    pub src: RegSource,
    /// Where they go in the buffer.
    pub dst: usize,
    /// How many bytes the destination has.
    pub len: usize,
}

/// The copies [`Registers::update_regs`] makes into a register buffer, with the index a stream
/// may build on first use to find the copies a changed register feeds (x64dbg: per
/// `REGDUMP` word). Made once per buffer layout; its copies cannot change afterwards.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RegPlan {
    copies: Vec<RegCopy>,
    /// For each change unit `u` of the stream, the copies reading it are
    /// `readers[starts[u]..starts[u + 1]]`; empty until indexed.
    starts: Vec<u32>,
    readers: Vec<u32>,
    /// For each change unit read by one copy only, which takes its low bytes whole (as
    /// `index`'s `low` says): that copy's destination and length, `dst << 4 | len`;
    /// 0 for the other units. The common case, a word into a slot of its own.
    low: Vec<u32>,
}

impl RegPlan {
    /// A plan of these copies.
    #[must_use]
    pub fn new(copies: Vec<RegCopy>) -> Self {
        Self {
            copies,
            starts: Vec::new(),
            readers: Vec::new(),
            low: Vec::new(),
        }
    }

    /// The copies.
    #[must_use]
    pub fn copies(&self) -> &[RegCopy] {
        &self.copies
    }

    /// Whether [`RegPlan::index`] has been built.
    pub fn is_indexed(&self) -> bool {
        !self.starts.is_empty()
    }

    /// Indexes the copies by the `units` change units of a stream: `span` gives the first
    /// and last unit a copy reads (units past `units` are left out), `low` the number of
    /// bytes (1 to 8) a copy takes from the start of one unit into a destination of that
    /// size, if it is such a copy ([`RegPlan::low`]).
    pub fn index(
        &mut self,
        units: usize,
        span: impl Fn(&RegCopy) -> (usize, usize),
        low: impl Fn(&RegCopy) -> Option<usize>,
    ) {
        let mut per: Vec<Vec<u32>> = vec![Vec::new(); units];
        for (k, c) in self.copies.iter().enumerate() {
            let (first, last) = span(c);
            for u in per.iter_mut().take(last.saturating_add(1)).skip(first) {
                u.push(u32::try_from(k).unwrap_or(u32::MAX));
            }
        }
        self.starts = Vec::with_capacity(units.saturating_add(1));
        self.readers.clear();
        for u in per {
            self.starts
                .push(u32::try_from(self.readers.len()).unwrap_or(u32::MAX));
            self.readers.extend(u);
        }
        self.starts
            .push(u32::try_from(self.readers.len()).unwrap_or(u32::MAX));
        self.low = (0..units)
            .map(|unit| {
                let mut readers = self.readers(unit);
                let (Some(c), None) = (readers.next(), readers.next()) else {
                    return 0;
                };
                let n = low(c).filter(|n| (1..=8).contains(n));
                let dst = u32::try_from(c.dst).ok().and_then(|d| d.checked_mul(16));
                match (n, dst) {
                    (Some(n), Some(dst)) if c.len == n => dst | n as u32,
                    _ => 0,
                }
            })
            .collect();
    }

    /// For change unit `unit`, when one copy alone reads it and takes its first bytes
    /// whole (see [`RegPlan::index`]): where they go and how many there are.
    #[inline]
    pub fn low(&self, unit: usize) -> Option<(usize, usize)> {
        let v = *self.low.get(unit)?;
        (v != 0).then_some(((v >> 4) as usize, (v & 15) as usize))
    }

    /// The copies that read change unit `unit` (once indexed).
    pub fn readers(&self, unit: usize) -> impl Iterator<Item = &RegCopy> {
        let at = |u: usize| self.starts.get(u).map_or(0, |&s| s as usize);
        let range = self
            .readers
            .get(at(unit)..at(unit.saturating_add(1)))
            .unwrap_or_default();
        range.iter().filter_map(|&k| self.copies.get(k as usize))
    }
}

/// The bytes of a register value in the default byte string of [`RegSource`].
fn value_len(value: &RegValue) -> usize {
    match value {
        RegValue::Word(_) => 8,
        RegValue::Wide(b) => b.len(),
    }
}

/// Which registers the reader of a stream reads: see [`Registers::want_regs`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum RegsWanted {
    /// Every register, through [`Steps::regs`], [`Steps::named_regs`] and
    /// [`Registers::update_regs`] (the default).
    #[default]
    All,
    /// Only [`Steps::regs`]: the general registers, the pc and the flags (what the Tenet
    /// conversion writes).
    General,
}

/// What the steps of a stream are ([`Steps::kind`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum StepKind {
    /// An executed instruction, with the memory it read and wrote.
    #[default]
    Instruction,
    /// A tracepoint frame (GDB tfiles): what was collected when a tracepoint was hit, the
    /// memory a snapshot taken before the instruction ran.
    Frame,
}

impl StepKind {
    /// What a step is called in messages and text output: "instruction" or "frame".
    #[must_use]
    pub fn noun(self) -> &'static str {
        match self {
            StepKind::Instruction => "instruction",
            StepKind::Frame => "frame",
        }
    }

    /// Whether a step's memory accesses are snapshots taken before the instruction ran
    /// (frames), rather than what the instruction itself read and wrote.
    #[must_use]
    pub fn memory_is_snapshot(self) -> bool {
        self == StepKind::Frame
    }
}

/// An instruction stream: a lending iterator of [`Step`]s with the register state before
/// the last step returned.
///
/// Every format implements the core: the six required methods and, where its steps are
/// special, the provided ones that describe them. What a format can do faster than by
/// reading steps it offers as a capability, in the manner of `object`'s format-neutral
/// `Object` trait, which leaves the extras to the concrete types:
///
/// - [`Steps::registers`] ([`Registers`]): keeping a register image up to date from the
///   changes only, and replaying only the general registers;
/// - [`Steps::raw`] ([`Raw`]): the encoded records, for `diff` to pass over equal stretches
///   without decoding them and for lean scans;
/// - [`Steps::indexing`] ([`Indexing`]): a random-access index to keep in a sidecar file.
///
/// Callers do not ask for the capabilities themselves: the operations are methods of
/// `dyn Steps` (such as [`scan`](#method.scan), [`update_regs`](#method.update_regs),
/// [`seek_index`](#method.seek_index)), each of which goes through the capability when the
/// stream offers it and otherwise reads steps, so a caller writes each once.
pub trait Steps {
    /// The instruction set.
    fn isa(&self) -> Isa;

    /// The names of the registers [`Steps::regs`] gives, in order: the general registers, the
    /// pc and the flags (what `diff` compares, and what its `--ignore` names). Empty where
    /// the format records no registers. Known before the first step (a stream that learns
    /// them from its input, such as Tenet's from its first line, reads that far ahead), as
    /// is [`Steps::isa`].
    fn reg_names(&self) -> &[Cow<'static, str>];

    /// The next step, or `None` at the end. After an error the stream is fused.
    fn next_step(&mut self) -> Option<Result<&Step, Error>>;

    /// The values of [`Steps::reg_names`] before the last step returned.
    fn regs(&self) -> &[u64];

    /// Every named register before the last step returned, for `state`.
    fn named_regs(&self, out: &mut Vec<NamedReg>);

    /// Positions the stream so that the next step is step `n`. Formats without an index
    /// read and drop steps up to `n` ([`seek_by_scan`]); formats with one seek in it.
    ///
    /// # Errors
    ///
    /// [`Error::Unsupported`] when `n` is past the last step; a read error on the way.
    fn seek(&mut self, n: u64) -> Result<(), Error>;

    /// Which words of [`Steps::regs`] the stream has a recorded value for before the last
    /// step returned (bit `k` for word `k`; words from 64 on always count as known). The
    /// others read 0 without the input having said so: a converter leaves them out. The
    /// default, every word; Tenet, the registers its lines named so far.
    fn regs_known(&self) -> u64 {
        u64::MAX
    }

    /// The memory accesses the input records before its first step, made by an
    /// instruction before the trace began (Tenet: the items of the first line), as a step
    /// holding only them; `None` when there are none (the default). Known once the first
    /// step has been read. Converters that write every access (din, Tenet) write these
    /// first.
    fn before_first(&self) -> Option<&Step> {
        None
    }

    /// What a step is: an instruction (the default), or a tracepoint frame (tfile), which
    /// decides what its memory accesses mean and what messages call it.
    fn kind(&self) -> StepKind {
        StepKind::Instruction
    }

    /// The byte offset reached, for progress.
    fn position(&self) -> u64 {
        0
    }

    /// The operating system the program ran on, where the format says (x64dbg: Windows,
    /// unless the header's module path is a Unix path, as `tracekit record` writes it);
    /// [`Os::Unknown`] by default.
    fn os(&self) -> Os {
        Os::Unknown
    }

    /// The register accelerators, where the stream has them (x64dbg); `None` by default.
    fn registers(&mut self) -> Option<&mut dyn Registers> {
        None
    }

    /// The encoded records, where the stream holds them in memory (x64dbg); `None` by
    /// default.
    fn raw(&mut self) -> Option<&mut dyn Raw> {
        None
    }

    /// The random-access index, where the format has one worth keeping (x64dbg, tfile);
    /// `None` by default.
    fn indexing(&mut self) -> Option<&mut dyn Indexing> {
        None
    }
}

/// The register accelerators of a stream ([`Steps::registers`]): a register image kept up
/// to date from the changes alone (the tfile writer), and a replay of only the general
/// registers (the Tenet writer). Without them, the methods of the same names on
/// `dyn Steps` read [`Steps::named_regs`] and [`Steps::next_step`].
pub trait Registers {
    /// Tells the stream which registers its reader reads from the next step on, so that it
    /// can replay less: after [`RegsWanted::General`] only [`Steps::regs`] is kept up, and
    /// [`Steps::named_regs`] and [`Registers::update_regs`] give unspecified values
    /// (x64dbg then applies only the changes to the words of [`Steps::regs`], passing over
    /// the x87, vector, debug and segment registers). A stream may stay lean until its
    /// next [`Steps::seek`] after [`RegsWanted::All`]. Without the capability, nothing
    /// (every register is kept up).
    fn want_regs(&mut self, wanted: RegsWanted);

    /// Which words of [`Steps::regs`] may differ from what they were before the step
    /// returned before the last one: bit `k` for word `k` (words from 64 on always count
    /// as changed). A superset: a reader that keeps the previous step's registers need
    /// compare only these (the Tenet conversion). Without the capability, every word;
    /// x64dbg under [`RegsWanted::General`] gives the words its block set.
    fn regs_changed(&self) -> u64;

    /// Locates the register `name` (a name [`Steps::named_regs`] gives) for
    /// [`Registers::update_regs`], or `None` where the stream has no such register. Call it
    /// after a step has been read. Without the capability, the name is found in
    /// [`Steps::named_regs`] (whose registers and their sizes must then not change from
    /// step to step).
    fn reg_source(&self, name: &str) -> Option<RegSource>;

    /// Brings `out` up to date with the registers before the last step returned, as `plan`
    /// says (sources from [`Registers::reg_source`]; copies outside `out` are skipped; the
    /// stream may index the plan on first use): what a sink that writes the whole register
    /// state at every step uses (the tfile writer). The first call copies every register
    /// of the plan; later ones may copy only those changed since the previous call, so
    /// `out` must hold what the previous call (with the same plan) left there. Without the
    /// capability every register is copied, from [`Steps::named_regs`]; x64dbg copies
    /// only the `REGDUMP` words the blocks changed.
    fn update_regs(&mut self, plan: &mut RegPlan, out: &mut [u8]);

    /// The walk of a writer of the whole register state at every step of one thread (the
    /// tfile conversion): for each step from here on of thread `thread`, brings `out` up to
    /// date as [`Registers::update_regs`] with `plan` does and calls `on_step` with the
    /// step and `out`, until the end, a read error (returned, the stream fused) or
    /// `on_step` returning `false` (the stream may then have read steps past that one).
    /// Steps of other threads are passed over. Without the capability,
    /// [`walk_regs_by_steps`]; x64dbg in memory writes each `REGDUMP` word a block sets
    /// straight into `out` as the replay applies it.
    ///
    /// # Errors
    ///
    /// A read error of the stream.
    fn walk_regs(
        &mut self,
        thread: u64,
        plan: &mut RegPlan,
        out: &mut [u8],
        on_step: &mut dyn FnMut(&Step, &[u8]) -> bool,
    ) -> Result<(), Error>;

    /// The walk of a writer of every step with its general registers (the Tenet
    /// conversion): calls `on_step` with each step from here on, the values of
    /// [`Steps::regs`] before it and [`Registers::regs_changed`], until the end, a read
    /// error (returned, the stream fused) or `on_step` returning `false` (the stream may
    /// then have read steps past that one). Without the capability,
    /// [`walk_steps_by_steps`]; x64dbg in memory under [`RegsWanted::General`] takes its
    /// usual blocks in the lean walk.
    ///
    /// # Errors
    ///
    /// A read error of the stream.
    fn walk_steps(
        &mut self,
        on_step: &mut dyn FnMut(&Step, &[u64], u64) -> bool,
    ) -> Result<(), Error>;
}

/// The encoded records of a stream held in memory ([`Steps::raw`]), where a step is
/// determined by its record, the state before it and [`Records::key`] (x64dbg traces in
/// memory: the blocks to come). With them `diff` goes over the equal stretches of two
/// traces at memory speed without decoding them (equal records read from equal register
/// states give equal steps and equal states), and a scan reads only what it looks for.
pub trait Raw {
    /// The records of the steps not read yet, or `None` where the stream cannot hand them
    /// out now (x64dbg: a seek's step pending).
    fn records(&self) -> Option<Records<'_>>;

    /// Passes over the steps whose records equal those at the start of `other` (another
    /// stream's [`Raw::records`], of the same format), without decoding them, and says
    /// what it passed: nothing when the keys differ. Calls `on_thread` with the thread of
    /// the first step passed and with each thread switched to after it. The steps passed
    /// are read lazily: until the next step is read, [`Steps::regs`] and
    /// [`Steps::named_regs`] still describe the last step read.
    fn pass_equal(&mut self, other: Records<'_>, on_thread: &mut dyn FnMut(u64)) -> Passed;

    /// Passes over the records another stream passed over with [`Raw::pass_equal`]
    /// against this one's: `passed.bytes` bytes of [`Raw::records`] holding
    /// `passed.steps` steps, lazily (the next read catches up, through the index when the
    /// stretch is long).
    fn pass_records(&mut self, passed: Passed);

    /// Calls `on_step` with every step from here to the end that `query` matches, in
    /// order (what `xref` and the sidecar index read), walking the records more leanly
    /// than [`scan_by_steps`] (what a stream without the capability does), as long as the
    /// steps it hands out have the same `i`, `thread`, `pc`, opcode and accesses (the
    /// register state is not kept up: [`Steps::regs`] is unspecified after a scan).
    ///
    /// # Errors
    ///
    /// The first read error, after every step found before it; `on_step`'s error.
    fn scan(&mut self, query: &ScanQuery, on_step: &mut OnStep<'_>) -> Result<(), Error>;
}

/// A format's own random-access index ([`Steps::indexing`]), kept in a sidecar index file
/// so that a later [`Steps::seek`] need not build it.
pub trait Indexing {
    /// The index as bytes (x64dbg: its full dumps and decoder states; tfile: its frame
    /// offsets), or `None` where this stream has none worth keeping (x64dbg streamed).
    /// Building it may read the whole trace.
    ///
    /// # Errors
    ///
    /// A read error while building it.
    fn seek_index(&mut self) -> Result<Option<Vec<u8>>, Error>;

    /// [`Indexing::seek_index`], calling `reached(n, index)` on the way each time its pass
    /// has gone past step `n` (`n` = `every`, 2·`every`, …) with an index through which
    /// [`Records::seek`](crate::Records::seek) reaches step `n` (x64dbg: a few dozen
    /// bytes): so that a caller can start there before the pass ends, such as threads that
    /// each build a stretch of rows. The default makes the whole index first and calls no
    /// `reached` (the whole index reaches every step).
    ///
    /// # Errors
    ///
    /// As [`Indexing::seek_index`].
    fn seek_index_reaching(
        &mut self,
        every: u64,
        reached: &mut dyn FnMut(u64, SeekIndex),
    ) -> Result<Option<Vec<u8>>, Error> {
        let _ = (every, reached);
        self.seek_index()
    }

    /// Takes a seek index that [`Indexing::seek_index`] gave for the same trace (kept by a
    /// caller that seeks again, such as the Python package's `Trace.state`), so that the
    /// next [`Steps::seek`] need not build one. Returns whether it was taken. A format
    /// reads the bytes through [`SeekIndex::parsed`], so a caller that keeps one
    /// `SeekIndex` has it parsed once.
    fn use_seek_index(&mut self, index: &SeekIndex) -> bool;

    /// The number of steps in the trace when it is known without reading them (x64dbg
    /// in memory: from its seek index, once built or taken), for progress reports.
    fn count_known(&self) -> Option<u64>;
}

/// The operations the capabilities speed up, on any stream: each goes through the
/// capability when the stream offers it and otherwise does what a stream without it
/// does (reads steps, or nothing), as the capability's method of the same name says.
impl<'s> dyn Steps + 's {
    /// [`Registers::want_regs`]; nothing without the capability.
    pub fn want_regs(&mut self, wanted: RegsWanted) {
        if let Some(r) = self.registers() {
            r.want_regs(wanted);
        }
    }

    /// [`Registers::regs_changed`]; every word without the capability.
    pub fn regs_changed(&mut self) -> u64 {
        self.registers().map_or(u64::MAX, |r| r.regs_changed())
    }

    /// [`Registers::reg_source`]; from [`Steps::named_regs`] without the capability.
    pub fn reg_source(&mut self, name: &str) -> Option<RegSource> {
        match self.registers() {
            Some(r) => r.reg_source(name),
            None => reg_source_by_names(self, name),
        }
    }

    /// [`Registers::update_regs`]; from [`Steps::named_regs`] without the capability.
    pub fn update_regs(&mut self, plan: &mut RegPlan, out: &mut [u8]) {
        match self.registers() {
            Some(r) => r.update_regs(plan, out),
            None => update_regs_by_names(self, plan, out),
        }
    }

    /// [`Registers::walk_regs`]; [`walk_regs_by_steps`] without the capability.
    ///
    /// # Errors
    ///
    /// A read error of the stream.
    pub fn walk_regs(
        &mut self,
        thread: u64,
        plan: &mut RegPlan,
        out: &mut [u8],
        on_step: &mut dyn FnMut(&Step, &[u8]) -> bool,
    ) -> Result<(), Error> {
        match self.registers() {
            Some(r) => r.walk_regs(thread, plan, out, on_step),
            None => walk_regs_by_steps(self, thread, plan, out, on_step),
        }
    }

    /// [`Registers::walk_steps`]; [`walk_steps_by_steps`] without the capability.
    ///
    /// # Errors
    ///
    /// A read error of the stream.
    pub fn walk_steps(
        &mut self,
        on_step: &mut dyn FnMut(&Step, &[u64], u64) -> bool,
    ) -> Result<(), Error> {
        match self.registers() {
            Some(r) => r.walk_steps(on_step),
            None => walk_steps_by_steps(self, on_step),
        }
    }

    /// [`Raw::records`]; `None` without the capability.
    pub fn records(&mut self) -> Option<Records<'_>> {
        self.raw()?.records()
    }

    /// [`Raw::pass_equal`]; nothing passed without the capability.
    pub fn pass_equal(&mut self, other: Records<'_>, on_thread: &mut dyn FnMut(u64)) -> Passed {
        self.raw()
            .map_or_else(Passed::default, |r| r.pass_equal(other, on_thread))
    }

    /// [`Raw::pass_records`]; nothing without the capability.
    pub fn pass_records(&mut self, passed: Passed) {
        if let Some(r) = self.raw() {
            r.pass_records(passed);
        }
    }

    /// [`Raw::scan`]; [`scan_by_steps`] without the capability.
    ///
    /// # Errors
    ///
    /// The first read error, after every step found before it; `on_step`'s error.
    pub fn scan(&mut self, query: &ScanQuery, on_step: &mut OnStep<'_>) -> Result<(), Error> {
        match self.raw() {
            Some(r) => r.scan(query, on_step),
            None => scan_by_steps(self, query, on_step),
        }
    }

    /// [`Indexing::seek_index`]; `None` without the capability.
    ///
    /// # Errors
    ///
    /// A read error while building it.
    pub fn seek_index(&mut self) -> Result<Option<Vec<u8>>, Error> {
        match self.indexing() {
            Some(i) => i.seek_index(),
            None => Ok(None),
        }
    }

    /// [`Indexing::seek_index_reaching`]; `None` without the capability.
    ///
    /// # Errors
    ///
    /// A read error while building it.
    pub fn seek_index_reaching(
        &mut self,
        every: u64,
        reached: &mut dyn FnMut(u64, SeekIndex),
    ) -> Result<Option<Vec<u8>>, Error> {
        match self.indexing() {
            Some(i) => i.seek_index_reaching(every, reached),
            None => Ok(None),
        }
    }

    /// [`Indexing::use_seek_index`]; not taken without the capability.
    pub fn use_seek_index(&mut self, index: &SeekIndex) -> bool {
        self.indexing().is_some_and(|i| i.use_seek_index(index))
    }

    /// [`Indexing::count_known`]; `None` without the capability.
    pub fn count_known(&mut self) -> Option<u64> {
        self.indexing()?.count_known()
    }
}

/// [`Registers::reg_source`] of a stream without the capability: the register's place
/// in the values of [`Steps::named_regs`] one after the other (see [`RegSource`]).
pub fn reg_source_by_names<S: Steps + ?Sized>(steps: &S, name: &str) -> Option<RegSource> {
    let mut regs = Vec::new();
    steps.named_regs(&mut regs);
    let mut at = 0usize;
    for r in &regs {
        let len = value_len(&r.value);
        if r.name == name {
            return Some(RegSource { at, len });
        }
        at = at.saturating_add(len);
    }
    None
}

/// [`Registers::update_regs`] of a stream without the capability: copies every register
/// of the plan from [`Steps::named_regs`].
pub fn update_regs_by_names<S: Steps + ?Sized>(steps: &S, plan: &RegPlan, out: &mut [u8]) {
    if plan.copies().is_empty() {
        return;
    }
    let mut regs = Vec::new();
    steps.named_regs(&mut regs);
    let mut bytes: Vec<u8> = Vec::new();
    for r in &regs {
        match &r.value {
            RegValue::Word(w) => bytes.extend_from_slice(&w.to_le_bytes()),
            RegValue::Wide(b) => bytes.extend_from_slice(b),
        }
    }
    for c in plan.copies() {
        let Some(dst) = out.get_mut(c.dst..c.dst.saturating_add(c.len)) else {
            continue;
        };
        let end = c.src.at.saturating_add(c.src.len).min(bytes.len());
        let src = bytes.get(c.src.at..end).unwrap_or_default();
        let n = src.len().min(dst.len());
        let (head, tail) = dst.split_at_mut(n);
        head.copy_from_slice(src.get(..n).unwrap_or_default());
        tail.fill(0);
    }
}

/// A format's seek index ([`Indexing::seek_index`]'s bytes, or a sidecar's) together with the
/// form the format reads it into, made on first use and kept: a caller that seeks again
/// and again (each request of `tracekit serve`, each `Trace.state` in Python) parses it
/// once, where parsing a 1 GiB x64dbg trace's index takes milliseconds and 2 MiB of fresh
/// memory. Clones share both. Keep one `SeekIndex` with the trace it was made for.
#[derive(Clone, Default)]
pub struct SeekIndex {
    bytes: Arc<[u8]>,
    parsed: Arc<OnceLock<Option<Arc<dyn Any + Send + Sync>>>>,
}

impl SeekIndex {
    /// A seek index from its bytes, not parsed yet.
    #[must_use]
    pub fn new(bytes: impl Into<Arc<[u8]>>) -> SeekIndex {
        SeekIndex {
            bytes: bytes.into(),
            parsed: Arc::default(),
        }
    }

    /// Its bytes (what a sidecar index keeps).
    #[must_use]
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// The parsed form: `parse` runs on the first call only (on any clone), and its result
    /// is kept; `None` when `parse` refused the bytes, or when an earlier call kept a form
    /// of another type.
    pub fn parsed<T: Any + Send + Sync>(
        &self,
        parse: impl FnOnce(&[u8]) -> Option<T>,
    ) -> Option<Arc<T>> {
        let kept = self
            .parsed
            .get_or_init(|| parse(&self.bytes).map(|t| Arc::new(t) as Arc<dyn Any + Send + Sync>));
        Arc::clone(kept.as_ref()?).downcast::<T>().ok()
    }
}

impl fmt::Debug for SeekIndex {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SeekIndex")
            .field("bytes", &self.bytes.len())
            .field("parsed", &self.parsed.get().is_some())
            .finish()
    }
}

/// The encoded records of a stream's steps not read yet: see [`Raw::records`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Records<'r> {
    /// The records, from the next step's on.
    pub bytes: &'r [u8],
    /// What reading them depends on besides their bytes (x64dbg: the thread-id state of
    /// its block decoder), as a key: streams with equal keys read equal records as equal
    /// steps.
    pub key: u64,
}

/// What [`Raw::pass_equal`] passed over.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Passed {
    /// The steps passed.
    pub steps: u64,
    /// The bytes of records passed.
    pub bytes: usize,
    /// The [`Records::key`] after them.
    pub key: u64,
}

/// [`Steps::seek`] by reading, for formats without an index: reads steps up to and
/// including step `n` (by the steps' own numbers, [`Step::i`], so from wherever `steps`
/// is). The implementation then returns that step, which it still holds, from its next
/// `next_step`. A stream cannot go back: a step before the next one is an error (a
/// format in memory reads again from its start first).
///
/// # Errors
///
/// As [`Steps::seek`]; `n` before the next step.
pub fn seek_by_scan<S: Steps + ?Sized>(steps: &mut S, n: u64) -> Result<(), Error> {
    let noun = steps.kind().noun();
    let mut count = None;
    loop {
        match steps.next_step() {
            Some(Ok(step)) if step.i == n => return Ok(()),
            Some(Ok(step)) if step.i > n => {
                return Err(Error::Unsupported(format!(
                    "cannot go back to {noun} {n} in a stream read once (a pipe or compressed \
                     input): it is at {noun} {}",
                    step.i
                )));
            }
            Some(Ok(step)) => count = Some(step.i.saturating_add(1)),
            Some(Err(e)) => return Err(e),
            None => {
                return Err(match count {
                    Some(count) => past_end_of(noun, n, count),
                    None => Error::Unsupported(format!(
                        "cannot go to {noun} {n}: no {noun}s are left to read (it is past the \
                         end, or behind, and a stream read once cannot go back)"
                    )),
                });
            }
        }
    }
}

/// The error of a step number at or past the end of a stream of `count` steps.
#[must_use]
pub fn past_end(n: u64, count: u64) -> Error {
    past_end_of("instruction", n, count)
}

/// [`past_end`] for steps called `noun` ([`StepKind::noun`]).
#[must_use]
pub fn past_end_of(noun: &str, n: u64, count: u64) -> Error {
    Error::Unsupported(format!(
        "{noun} {n} is past the end: the trace has {count} {noun}s"
    ))
}

/// What a scan ([`Raw::scan`]) looks for: steps that executed at `pc`, or whose memory accesses
/// cover a byte of `mem` (either, when both are given), or every step.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ScanQuery {
    /// Every step (what the sidecar index reads).
    pub all: bool,
    /// The pc of the instructions to find.
    pub pc: Option<u64>,
    /// The addresses (end-exclusive) whose accesses to find.
    pub mem: Option<std::ops::Range<u64>>,
}

impl ScanQuery {
    /// Whether an access of `len` bytes at `addr` covers a byte of [`ScanQuery::mem`].
    #[must_use]
    pub fn covers(&self, addr: u64, len: u32) -> bool {
        self.mem
            .as_ref()
            .is_some_and(|r| addr < r.end && r.start < addr.saturating_add(u64::from(len.max(1))))
    }

    /// Whether `step` is one to find.
    #[must_use]
    pub fn matches(&self, step: &Step) -> bool {
        self.all || self.pc == Some(step.pc) || step.mem.iter().any(|a| self.covers(a.addr, a.len))
    }
}

/// What a scan ([`Raw::scan`]) calls with each step found.
pub type OnStep<'f> = dyn FnMut(&Step) -> Result<(), Error> + 'f;

/// [`Raw::scan`] by reading every step: what a stream without the capability does, and
/// what formats fall back to.
///
/// # Errors
///
/// The first read error (after every step found before it), or `on_step`'s.
pub fn scan_by_steps<S: Steps + ?Sized>(
    steps: &mut S,
    query: &ScanQuery,
    on_step: &mut OnStep<'_>,
) -> Result<(), Error> {
    while let Some(step) = steps.next_step() {
        let step = step?;
        if query.matches(step) {
            on_step(step)?;
        }
    }
    Ok(())
}

/// [`Registers::walk_steps`] by reading every step: what a stream without the capability
/// does, and what formats fall back to.
///
/// # Errors
///
/// The first read error.
pub fn walk_steps_by_steps(
    steps: &mut dyn Steps,
    on_step: &mut dyn FnMut(&Step, &[u64], u64) -> bool,
) -> Result<(), Error> {
    // A copy of the step: the registers are the stream's again.
    let mut step = Step::default();
    while let Some(next) = steps.next_step() {
        step.clone_from(next?);
        let changed = steps.regs_changed();
        if !on_step(&step, steps.regs(), changed) {
            break;
        }
    }
    Ok(())
}

/// [`Registers::walk_regs`] by reading every step and bringing `out` up to date
/// ([`update_regs`](trait.Steps.html#method.update_regs)) for those of `thread`: what a
/// stream without the capability does, and what formats fall back to.
///
/// # Errors
///
/// The first read error.
pub fn walk_regs_by_steps(
    steps: &mut dyn Steps,
    thread: u64,
    plan: &mut RegPlan,
    out: &mut [u8],
    on_step: &mut dyn FnMut(&Step, &[u8]) -> bool,
) -> Result<(), Error> {
    // A copy of the step: `update_regs` needs the stream again.
    let mut step = Step::default();
    while let Some(next) = steps.next_step() {
        let next = next?;
        if next.thread != thread {
            continue;
        }
        step.clone_from(next);
        steps.update_regs(plan, out);
        if !on_step(&step, out) {
            break;
        }
    }
    Ok(())
}

/// A recorded memory value as `0x…`: up to 8 bytes, the word they hold in the target's
/// byte order, without leading zeros; wider values, every digit, most significant first.
/// (`xref` lines and `diff` regions show values this way.)
#[must_use]
pub fn value_hex(bytes: &[u8], big_endian: bool) -> String {
    use std::fmt::Write;
    if bytes.len() <= 8 {
        let fold = |w: u64, b: &u8| (w << 8) | u64::from(*b);
        let v = if big_endian {
            bytes.iter().fold(0, fold)
        } else {
            bytes.iter().rev().fold(0, fold)
        };
        return format!("{v:#x}");
    }
    let mut s = String::with_capacity(bytes.len().saturating_mul(2).saturating_add(2));
    s.push_str("0x");
    let mut digits = |b: &u8| {
        let _ = write!(s, "{b:02x}");
    };
    if big_endian {
        bytes.iter().for_each(&mut digits);
    } else {
        bytes.iter().rev().for_each(&mut digits);
    }
    s
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::SeekIndex;

    /// The parse runs once for a seek index and all its clones, on any thread; a refusal
    /// is kept too, and a form of another type is not handed out.
    #[test]
    fn a_seek_index_is_parsed_once() {
        let calls = AtomicUsize::new(0);
        let parse = |b: &[u8]| {
            calls.fetch_add(1, Ordering::Relaxed);
            b.first().map(|&x| u32::from(x))
        };
        let index = SeekIndex::new(vec![7u8, 1, 2]);
        let clone = index.clone();
        std::thread::scope(|s| {
            for _ in 0..4 {
                s.spawn(|| assert_eq!(clone.parsed(parse).as_deref(), Some(&7)));
            }
        });
        assert_eq!(index.parsed(parse).as_deref(), Some(&7));
        assert_eq!(calls.load(Ordering::Relaxed), 1);
        assert_eq!(index.bytes(), [7, 1, 2]);
        assert!(index.parsed(|_| Some(1u64)).is_none());

        let refused = SeekIndex::new(Vec::new());
        assert!(refused.parsed(parse).is_none());
        assert!(refused.parsed(parse).is_none());
        assert_eq!(calls.load(Ordering::Relaxed), 2);
        assert_eq!(
            format!("{refused:?}"),
            "SeekIndex { bytes: 0, parsed: true }"
        );
    }
}
