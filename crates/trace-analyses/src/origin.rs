//! `origin`: where the value of a register or a memory range before instruction N came
//! from, hop by hop, for any x86 or x64 trace with an instruction stream.
//!
//! Each hop resolves one location (its `loc`) before one step: it finds the last step
//! before it that wrote the location, decodes that step's instruction (`iced-x86`'s
//! instruction info gives its operands and what it reads and writes) and says what kind of
//! write it was:
//!
//! - `copy`: a pure copy (`mov`, `movzx`, `movsx`, `movsxd`, `push`, `pop`, `xchg`, `movs*`,
//!   `stos*`, `lods*`, the SSE and AVX moves such as `movaps`, `movdqu`, `movq`, `movd`,
//!   `movss`/`movsd` from memory, `vmov*`, the non-temporal stores) that wrote the
//!   location as its destination: its source (`from`, a register or `0x…:LEN`) is the
//!   next hop's location, before that step;
//! - `compute`: any other instruction that wrote it (`lea`, arithmetic, `cmov`, a `mov` of
//!   an immediate, the stack pointer a `push` moved): the chain stops;
//! - `syscall`: `syscall`, `sysenter` or an `int`: the kernel made the value;
//! - `partial`: the writer wrote only part of the location (some of a memory range's bytes;
//!   `al` of `rax`; a register-to-register `movss`/`movsd`, which merges): the rest came
//!   from elsewhere, so the chain stops;
//! - `start`: nothing before the step wrote it: the value was there when the trace began
//!   (`i`, `thread`, `pc` and `asm` are then null);
//! - `unknown`: the writer's bytes do not decode, or the source address cannot be computed
//!   (a `gs:`/`fs:` operand, whose segment base the trace does not hold).
//!
//! At most [`OriginQuery::max_hops`] hops are made; a chain cut there ends with a `copy`.
//!
//! Any x86 or x64 instruction stream will do: x64dbg traces; Tenet traces, which record no
//! instruction bytes, so that their hops name the writer (from the recorded changes) as
//! `unknown`; compressed traces and stdin. A stream that seeks only forwards, by reading
//! (Tenet, compressed, stdin), is read into memory up to N first, at most [`MAX_BUFFERED`]
//! steps. GDB tracepoint frames are snapshots at tracepoints, not every instruction, and
//! are refused.
//!
//! # Finding the writers, and what it costs
//!
//! A memory range's writer is found among the steps that accessed it, newest first, as
//! `xref` lists them ([`crate::xref::xref_of`]): with a usable sidecar index (`tracekit
//! index`) whose format keeps its seek index there, its last few candidates before N (16,
//! then twice as many each round), each read with a seek, so the cost does not grow with
//! N; without one, windows of steps read backwards from N (4096, then twice as many), so
//! the cost is the distance to the writer. A candidate writes the range when its decoded
//! instruction has a memory operand written at an address, computed from the registers
//! before it, that overlaps the range; where the address cannot be computed or the bytes do
//! not decode, when its recorded access covers the range with a new value.
//!
//! A register's writer is the last step of the same thread that decodes as writing any
//! part of it (`eax`, `al` and `rax` are one register; a `syscall` writes `rax` too), or
//! after which its recorded value changed (what catches the instructions whose effect the
//! decoder does not list). The sidecar lists no register writes, so the steps are read
//! backwards from N in windows (512, then twice as many), each from a seek: the cost is
//! the distance to the writer, and a register no step wrote (`start`) costs a read of
//! every step before N.
//!
//! Measured (release build, 2 cores) on a synthetic x64dbg trace of 2 M instructions
//! (107 MB, `cargo xtask synth x64dbg --records 2000000 --seed 1`) with its sidecar: a
//! command with one memory hop took 6.5 ms at N = 1000, 1 M and 2 M alike, what `state
//! --at N` takes (opening the trace and its sidecar); about 30 ms without the sidecar
//! (the seek index is built first); a 64-hop register chain 18 ms; a register never
//! written (`start`, every step read) 108 ms.
//!
//! ```
//! use trace_analyses::origin::{HopKind, OriginQuery, Target, origin};
//! use trace_registry::{Ctx, Input, Options};
//!
//! let mut input = Input::open("../../testdata/x64dbg/basic.trace64".as_ref())?;
//! let handler = trace_registry::detect(&input).expect("an x64dbg trace");
//! let options = Options::default();
//! // `tracekit dump` shows instruction 700 storing rdi to 0x24fe00: where did those 8 bytes
//! // come from, before instruction 701?
//! let query = OriginQuery::new(701, "0x24fe00".parse()?);
//! let found = origin(handler, &mut input, &mut Ctx::new(&options), &query)?;
//! let first = &found.hops[0];
//! assert_eq!((first.i, first.kind), (Some(700), HopKind::Copy));
//! assert_eq!(first.from.as_deref(), Some("rdi"));
//! assert_eq!(found.hops[1].loc, "rdi");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::collections::HashMap;
use std::fmt::Write as _;
use std::str::FromStr;

use iced_x86::{
    Decoder, DecoderOptions, Instruction, InstructionInfoFactory, Mnemonic, OpAccess, OpKind,
    Register, UsedMemory,
};
use serde::Serialize;
use smallvec::SmallVec;
use trace_index::{self as index, Sidecar};
use trace_model::steps::{Isa, RegsWanted, Step, Steps};
use trace_model::{Ctx, Error, Handler, Input};
use trace_registry::disasm::Disassembler;

use crate::xref::{Window, XrefQuery, xref_of};

/// How many hops [`origin`] makes unless told otherwise (`--max-hops`).
pub const DEFAULT_MAX_HOPS: usize = 64;

/// The widest memory location followed, in bytes (a ZMM register's worth).
pub const MAX_LEN: u32 = 64;

/// A memory location's length when none is given.
pub const DEFAULT_LEN: u32 = 8;

/// What to trace: a register (as `state` names it: `rax`, `eax`, `al`, `xmm0`) or `len`
/// bytes of memory at `addr`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Target {
    /// A register, by its lowercase name.
    Reg(String),
    /// A memory range.
    Mem {
        /// The first address.
        addr: u64,
        /// The length in bytes (1 to [`MAX_LEN`]).
        len: u32,
    },
}

impl Target {
    /// The label hops use for it: the register's name, or `0x…:LEN`.
    #[must_use]
    pub fn label(&self) -> String {
        match self {
            Target::Reg(name) => name.clone(),
            Target::Mem { addr, len } => format!("{addr:#x}:{len}"),
        }
    }

    /// Whether a trace of `isa` has it: memory always, a register when it is one of that
    /// instruction set's (`r8` and the other x64-only registers are not x86's). Checked by
    /// [`origin_of`] too; callers that name the parameter at fault (`tracekit serve`) ask
    /// first.
    #[must_use]
    pub fn fits(&self, isa: Isa) -> bool {
        match self {
            Target::Reg(name) => {
                Target::register(name).is_some_and(|r| isa == Isa::X64 || !needs_x64(r))
            }
            Target::Mem { .. } => true,
        }
    }

    /// The register a name stands for: a general, segment or vector register.
    fn register(name: &str) -> Option<Register> {
        Register::values().find(|&r| {
            r != Register::None
                && (r.is_gpr() || r.is_segment_register() || r.is_vector_register())
                && format!("{r:?}").eq_ignore_ascii_case(name)
        })
    }
}

/// A number as `0x…` (hex) or decimal.
fn number(s: &str) -> Option<u64> {
    match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(hex) => u64::from_str_radix(hex, 16).ok(),
        None => s.parse().ok(),
    }
}

impl FromStr for Target {
    type Err = String;

    /// `REG` (`rax`, `eax`, `al`, `xmm0`, …) or `ADDR[:LEN]` (hex `0x…` or decimal; LEN
    /// 1 to [`MAX_LEN`], default [`DEFAULT_LEN`]).
    fn from_str(s: &str) -> Result<Target, String> {
        let expected = "expected a register (rax, eax, al, xmm0, …) or ADDR[:LEN] \
                        (0x… or decimal; LEN 1 to 64, default 8)";
        if s.starts_with(|c: char| c.is_ascii_digit()) {
            let (addr, len) = match s.split_once(':') {
                Some((a, l)) => (a, Some(l)),
                None => (s, None),
            };
            let addr = number(addr).ok_or_else(|| format!("bad address {addr:?}: {expected}"))?;
            let len = match len {
                None => DEFAULT_LEN,
                Some(l) => number(l)
                    .and_then(|l| u32::try_from(l).ok())
                    .filter(|l| (1..=MAX_LEN).contains(l))
                    .ok_or_else(|| format!("bad length {l:?}: {expected}"))?,
            };
            if addr.checked_add(u64::from(len)).is_none() {
                return Err(format!(
                    "{addr:#x} + {len} bytes passes the end of the address space"
                ));
            }
            return Ok(Target::Mem { addr, len });
        }
        match Target::register(s) {
            Some(r) => Ok(Target::Reg(reg_name(r))),
            None => Err(format!("unknown target {s:?}: {expected}")),
        }
    }
}

/// The lowercase name of a register, as `state` prints it.
fn reg_name(r: Register) -> String {
    format!("{r:?}").to_ascii_lowercase()
}

/// What a hop found the location's writer to be (see the module documentation).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum HopKind {
    /// A pure copy: the chain goes on with its source.
    Copy,
    /// A computation (or a constant): the value was made here.
    Compute,
    /// A system call or software interrupt.
    Syscall,
    /// The writer wrote only part of the location.
    Partial,
    /// No writer before the step: the value was there when the trace began.
    Start,
    /// The writer's instruction or its source address is not known.
    Unknown,
}

impl HopKind {
    /// The name in the JSON: `copy`, `compute`, `syscall`, `partial`, `start`, `unknown`.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            HopKind::Copy => "copy",
            HopKind::Compute => "compute",
            HopKind::Syscall => "syscall",
            HopKind::Partial => "partial",
            HopKind::Start => "start",
            HopKind::Unknown => "unknown",
        }
    }
}

/// One hop: `{"i":…,"thread":…,"pc":"0x…","asm":"…","from":"rax"|"0x…:8"|null,"kind":…,"loc":…}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Hop {
    /// The step that last wrote the location (`None` at the start).
    pub i: Option<u64>,
    /// Its thread.
    pub thread: Option<u64>,
    /// Its pc.
    #[serde(serialize_with = "hex_or_null")]
    pub pc: Option<u64>,
    /// Its instruction's text, where its bytes decode.
    pub asm: Option<String>,
    /// The source it copied from, for a `copy` (the next hop's `loc`).
    pub from: Option<String>,
    /// What kind of write it was.
    pub kind: HopKind,
    /// The location this hop resolved: a register, or `0x…:LEN`.
    pub loc: String,
    /// The source as a target (not in the JSON, which has its label as `from`).
    #[serde(skip)]
    pub source: Option<Target>,
}

fn hex_or_null<S: serde::Serializer>(v: &Option<u64>, s: S) -> Result<S::Ok, S::Error> {
    match v {
        Some(v) => s.serialize_str(&format!("{v:#x}")),
        None => s.serialize_none(),
    }
}

impl Hop {
    /// The JSON line `tracekit origin --json` prints for it.
    #[must_use]
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }
}

/// Where a value came from: the hops, the first resolving the target before step `at`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Origin {
    /// The step before which the target was asked for.
    pub at: u64,
    /// The target's label.
    pub target: String,
    /// The hops, newest first; the last one says why the chain stopped (a `copy` when
    /// [`OriginQuery::max_hops`] cut it).
    pub hops: Vec<Hop>,
}

impl Origin {
    /// The JSON Lines `tracekit origin --json` prints: one line per hop.
    #[must_use]
    pub fn to_json_lines(&self) -> String {
        let mut out = String::new();
        for hop in &self.hops {
            out.push_str(&hop.to_json());
            out.push('\n');
        }
        out
    }

    /// One JSON object, `{"at":N,"target":"…","hops":[HOP,…]}`, each HOP a line of
    /// [`Origin::to_json_lines`] (`tracekit serve`'s `/api/origin`).
    #[must_use]
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }

    /// The text `tracekit origin` prints: a title, then one line per hop.
    #[must_use]
    pub fn to_text(&self) -> String {
        let mut out = format!("origin of {} before instruction {}\n", self.target, self.at);
        for (k, hop) in self.hops.iter().enumerate() {
            let _ = write!(out, "{k:>3}  {}", hop.loc);
            match (hop.i, hop.kind) {
                (None, _) => {
                    out.push_str("  start: not written since the trace began\n");
                    continue;
                }
                (Some(i), _) => {
                    let _ = write!(
                        out,
                        "  written by instruction {i} (thread {}, pc {:#x}) {}",
                        hop.thread.unwrap_or(0),
                        hop.pc.unwrap_or(0),
                        hop.asm.as_deref().unwrap_or("(bytes unknown)")
                    );
                }
            }
            match (&hop.from, hop.kind) {
                (Some(from), HopKind::Copy) => {
                    let _ = writeln!(out, "  copy of {from}");
                }
                (_, kind) => {
                    let _ = writeln!(out, "  {}", kind.name());
                }
            }
        }
        if self.hops.last().is_some_and(|h| h.kind == HopKind::Copy) {
            let _ = writeln!(out, "(cut at {} hops: --max-hops)", self.hops.len());
        }
        out
    }
}

/// What to ask: where `target`'s value before step `at` came from, in at most `max_hops`
/// hops.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OriginQuery {
    /// The step before which the value is asked for.
    pub at: u64,
    /// The register or memory range.
    pub target: Target,
    /// The most hops to make.
    pub max_hops: usize,
}

impl OriginQuery {
    /// A query of [`DEFAULT_MAX_HOPS`] hops.
    #[must_use]
    pub fn new(at: u64, target: Target) -> OriginQuery {
        OriginQuery {
            at,
            target,
            max_hops: DEFAULT_MAX_HOPS,
        }
    }
}

/// Where `query.target`'s value before step `query.at` of `input` came from.
///
/// # Errors
///
/// [`Error::Unsupported`] for a trace without an instruction stream or not of x86/x64, a
/// register the instruction set does not have, or `at` at or past the end; a read error of
/// a damaged trace.
pub fn origin(
    handler: &dyn Handler,
    input: &mut Input,
    ctx: &mut Ctx<'_>,
    query: &OriginQuery,
) -> Result<Origin, Error> {
    let explicit = ctx.options.index.clone();
    let mut sidecar = match index::open_for(input, explicit.as_deref(), handler.name()) {
        // Without the format's seek index each candidate's seek would read from the start.
        Ok(sidecar) => sidecar.has_seek_index().then_some(sidecar),
        Err(why) => {
            index::note_unusable(input, ctx, &why);
            None
        }
    };
    // Said once, above: the steps would say the same of the sidecar.
    let mut steps = index::steps_without_notes(handler, input, ctx)?;
    origin_of(steps.as_mut(), sidecar.as_mut(), query)
}

/// [`origin`] over steps already open and the sidecar index, if the caller has a usable
/// one whose format seeks (`tracekit serve`, Python).
///
/// # Errors
///
/// As [`origin`].
pub fn origin_of(
    steps: &mut dyn Steps,
    sidecar: Option<&mut Sidecar>,
    query: &OriginQuery,
) -> Result<Origin, Error> {
    let isa = steps.isa();
    if !matches!(isa, Isa::X64 | Isa::X86) {
        return Err(Error::Unsupported(format!(
            "origin decodes x86 and x64 instructions; this trace's instruction set is {isa:?}"
        )));
    }
    if let Target::Reg(name) = &query.target
        && !query.target.fits(isa)
    {
        return Err(Error::Unsupported(format!(
            "{name} is not a register of this {isa:?} trace"
        )));
    }
    if steps.kind().memory_is_snapshot() {
        return Err(Error::Unsupported(format!(
            "origin follows every executed instruction; this trace's steps are {}s, \
             snapshots taken at tracepoints",
            steps.kind().noun()
        )));
    }
    // Only the general registers are read (addresses, changes): the lean replay.
    steps.want_regs(RegsWanted::General);
    // Streams that seek only forwards, by reading (Tenet, compressed x64dbg, stdin): their
    // steps up to `at`, held in memory, seek instead.
    steps.seek(0)?;
    if steps.count_known().is_none() {
        let mut buffered = Buffered::read(steps, query.at)?;
        return hops_of(&mut buffered, None, query, isa);
    }
    hops_of(steps, sidecar, query, isa)
}

/// [`origin_of`] over steps that seek to any step.
fn hops_of(
    steps: &mut dyn Steps,
    mut sidecar: Option<&mut Sidecar>,
    query: &OriginQuery,
    isa: Isa,
) -> Result<Origin, Error> {
    let mut tracer = Tracer::new(steps, isa);
    let first = tracer.at_step(steps, query.at)?;
    let mut target = query.target.clone();
    let (mut n, mut thread) = (query.at, first.step.thread);
    let mut hops = Vec::new();
    while hops.len() < query.max_hops {
        let hop = tracer.hop(steps, sidecar.as_deref_mut(), &target, n, thread)?;
        let next = match (&hop.source, hop.kind, hop.i, hop.thread) {
            (Some(source), HopKind::Copy, Some(i), Some(t)) => Some((source.clone(), i, t)),
            _ => None,
        };
        hops.push(hop);
        let Some((source, i, t)) = next else {
            break;
        };
        (target, n, thread) = (source, i, t);
    }
    Ok(Origin {
        at: query.at,
        target: query.target.label(),
        hops,
    })
}

/// The most steps of a stream that seeks only forwards that `origin` holds in memory
/// (about 250 bytes each).
pub const MAX_BUFFERED: u64 = 4 << 20;

/// The steps of a stream up to one, with their general registers, held in memory so that
/// they seek: for the streams that seek only forwards.
struct Buffered {
    isa: Isa,
    names: Vec<std::borrow::Cow<'static, str>>,
    steps: Vec<(Step, Vec<u64>)>,
    /// The step `next_step` gives next.
    next: usize,
}

impl Buffered {
    /// Steps 0 to `last` of `steps` (which are at their start).
    fn read(steps: &mut dyn Steps, last: u64) -> Result<Buffered, Error> {
        if last >= MAX_BUFFERED {
            return Err(Error::Unsupported(format!(
                "origin reads this trace (it seeks only forwards: a Tenet trace, compressed, \
                 or stdin) into memory, up to {MAX_BUFFERED} instructions, not {}; \
                 decompress it or convert it to x64dbg",
                last.saturating_add(1)
            )));
        }
        let mut held = Vec::new();
        while let Some(step) = steps.next_step() {
            let step = step?.clone();
            let i = step.i;
            held.push((step, steps.regs().to_vec()));
            if i >= last {
                break;
            }
        }
        Ok(Buffered {
            isa: steps.isa(),
            names: steps.reg_names().to_vec(),
            steps: held,
            next: 0,
        })
    }
}

impl Steps for Buffered {
    fn isa(&self) -> Isa {
        self.isa
    }

    fn reg_names(&self) -> &[std::borrow::Cow<'static, str>] {
        &self.names
    }

    fn next_step(&mut self) -> Option<Result<&Step, Error>> {
        let at = self.next;
        self.next = at.saturating_add(1);
        self.steps.get(at).map(|(step, _)| Ok(step))
    }

    fn regs(&self) -> &[u64] {
        self.next
            .checked_sub(1)
            .and_then(|k| self.steps.get(k))
            .map_or(&[], |(_, regs)| regs.as_slice())
    }

    fn named_regs(&self, _out: &mut Vec<trace_model::steps::NamedReg>) {}

    fn seek(&mut self, n: u64) -> Result<(), Error> {
        let count = self.steps.len() as u64;
        match usize::try_from(n) {
            Ok(k) if n < count => {
                self.next = k;
                Ok(())
            }
            _ => Err(trace_model::steps::past_end(n, count)),
        }
    }
}

/// Whether a register exists only in 64-bit mode.
fn needs_x64(r: Register) -> bool {
    let full = r.full_register();
    (Register::R8..=Register::R15).contains(&full)
        || matches!(
            r,
            Register::SPL | Register::BPL | Register::SIL | Register::DIL
        )
        || (r.is_vector_register() && r.number() % 32 >= 8)
}

/// A step read again with the general registers before it.
struct AtStep {
    step: Step,
    regs: Vec<u64>,
}

/// What the register walk keeps of one decoded instruction.
#[derive(Clone, Debug, Default)]
struct Writes {
    /// The full registers it writes (any part of).
    regs: SmallVec<[Register; 4]>,
}

/// The hop maker: the decoder, its cache and where the registers are.
struct Tracer {
    isa: Isa,
    bitness: u32,
    factory: InstructionInfoFactory,
    disasm: Disassembler,
    /// Per pc: the bytes decoded and the registers they write.
    cache: HashMap<u64, (SmallVec<[u8; 16]>, Writes)>,
    /// The names of [`Steps::regs`], lowercase.
    names: Vec<String>,
}

/// The most pcs the register walk's cache keeps before it starts again.
const CACHE_PCS: usize = 1 << 16;

/// The first window of the register walk, in steps (a full dump's interval in x64dbg).
const REG_WINDOW: u64 = 512;

/// The first window of the memory walk without a sidecar, in steps.
const MEM_WINDOW: u64 = 4096;

/// The first number of sidecar candidates looked at.
const FIRST_CANDIDATES: usize = 16;

impl Tracer {
    fn new(steps: &dyn Steps, isa: Isa) -> Tracer {
        Tracer {
            isa,
            bitness: if isa == Isa::X64 { 64 } else { 32 },
            factory: InstructionInfoFactory::new(),
            disasm: Disassembler::new(isa),
            cache: HashMap::new(),
            names: steps
                .reg_names()
                .iter()
                .map(|n| n.to_ascii_lowercase())
                .collect(),
        }
    }

    /// Step `i` and the general registers before it.
    fn at_step(&mut self, steps: &mut dyn Steps, i: u64) -> Result<AtStep, Error> {
        steps.seek(i)?;
        let step = match steps.next_step() {
            Some(Ok(step)) => step.clone(),
            Some(Err(e)) => return Err(e),
            None => return Err(trace_model::steps::past_end_of(steps.kind().noun(), i, i)),
        };
        Ok(AtStep {
            step,
            regs: steps.regs().to_vec(),
        })
    }

    /// Where [`Steps::regs`] holds full register `full`.
    fn word_of(&self, full: Register) -> Option<usize> {
        let names = [
            reg_name(full),
            reg_name(full.full_register32()),
            // x86 streams name `eax`; iced's full register of `eax` is `rax`.
        ];
        self.names.iter().position(|n| names.contains(n))
    }

    /// The value of `r` (a general register or segment, as an address part) in `regs`.
    fn value(&self, r: Register, regs: &[u64], next_ip: u64) -> Option<u64> {
        match r {
            Register::RIP | Register::EIP => return Some(next_ip),
            Register::GS if self.isa == Isa::X64 => return None,
            Register::FS if self.isa == Isa::X86 => return None,
            Register::ES | Register::CS | Register::SS | Register::DS | Register::FS => {
                return Some(0);
            }
            Register::GS => return Some(0),
            _ => {}
        }
        if !r.is_gpr() || matches!(r, Register::AH | Register::BH | Register::CH | Register::DH) {
            return None;
        }
        let word = *regs.get(self.word_of(r.full_register())?)?;
        let mask = match r.size() {
            1 => 0xff,
            2 => 0xffff,
            4 => u64::from(u32::MAX),
            _ => u64::MAX,
        };
        Some(word & mask)
    }

    fn decode(&self, pc: u64, bytes: &[u8]) -> Option<Instruction> {
        let bytes = bytes.get(..bytes.len().min(15))?;
        let ins = Decoder::with_ip(self.bitness, bytes, pc, DecoderOptions::NONE).decode();
        (!ins.is_invalid()).then_some(ins)
    }

    /// The full registers the instruction at `pc` writes (`None`: the bytes do not decode).
    fn writes(&mut self, pc: u64, bytes: &[u8]) -> Option<&Writes> {
        let hit = self
            .cache
            .get(&pc)
            .is_some_and(|(b, _)| b.as_slice() == bytes);
        if !hit {
            let ins = self.decode(pc, bytes);
            let writes = ins.map(|ins| {
                let mut w = Writes::default();
                for used in self.factory.info(&ins).used_registers() {
                    if is_write(used.access()) && !w.regs.contains(&used.register().full_register())
                    {
                        w.regs.push(used.register().full_register());
                    }
                }
                if is_syscall(ins.mnemonic()) && !w.regs.contains(&Register::RAX) {
                    // The kernel's answer.
                    w.regs.push(Register::RAX);
                }
                w
            });
            let writes = writes?;
            if self.cache.len() >= CACHE_PCS {
                self.cache.clear();
            }
            self.cache
                .insert(pc, (bytes.iter().copied().collect(), writes));
        }
        self.cache.get(&pc).map(|(_, w)| w)
    }

    /// One hop: the writer of `target` before step `n` (of thread `thread`, whose registers
    /// a register target is), and what kind of write it was.
    fn hop(
        &mut self,
        steps: &mut dyn Steps,
        sidecar: Option<&mut Sidecar>,
        target: &Target,
        n: u64,
        thread: u64,
    ) -> Result<Hop, Error> {
        let start = Hop {
            i: None,
            thread: None,
            pc: None,
            asm: None,
            from: None,
            kind: HopKind::Start,
            loc: target.label(),
            source: None,
        };
        let (writer, covered) = match target {
            Target::Reg(name) => {
                let Some(r) = Target::register(name) else {
                    return Ok(Hop {
                        kind: HopKind::Unknown,
                        ..start
                    });
                };
                match self.reg_writer(steps, r.full_register(), n, thread)? {
                    Some(j) => (j, None),
                    None => return Ok(start),
                }
            }
            Target::Mem { addr, len } => match self.mem_writer(steps, sidecar, *addr, *len, n)? {
                Some((j, all)) => (j, Some(all)),
                None => return Ok(start),
            },
        };
        let at = self.at_step(steps, writer)?;
        let asm = self
            .disasm
            .asm(at.step.pc, &at.step.opcode)
            .map(str::to_owned);
        let (kind, source) = if covered == Some(false) {
            (HopKind::Partial, None)
        } else {
            self.classify(&at, target)
        };
        Ok(Hop {
            i: Some(at.step.i),
            thread: Some(at.step.thread),
            pc: Some(at.step.pc),
            asm,
            from: source.as_ref().map(Target::label),
            kind,
            loc: target.label(),
            source,
        })
    }

    /// The last step of `thread` before `n` that wrote (part of) full register `full`:
    /// decoded as writing it, or followed by a change of its recorded value. Reads windows
    /// of steps backwards from `n`, each from a seek.
    fn reg_writer(
        &mut self,
        steps: &mut dyn Steps,
        full: Register,
        n: u64,
        thread: u64,
    ) -> Result<Option<u64>, Error> {
        let word = self.word_of(full);
        let mut hi = n;
        let mut width = REG_WINDOW;
        loop {
            let lo = hi.saturating_sub(width);
            steps.seek(lo)?;
            let mut found: Option<u64> = None;
            // The last step of the thread read, and the value before it.
            let mut pending: Option<(u64, Option<u64>)> = None;
            while let Some(step) = steps.next_step() {
                let step = step?;
                if step.thread != thread {
                    continue;
                }
                let (i, pc, opcode) = (step.i, step.pc, step.opcode.clone());
                let value = word.and_then(|w| steps.regs().get(w).copied());
                if let Some((before, Some(old))) = pending
                    && value.is_some_and(|v| v != old)
                {
                    found = found.max(Some(before));
                }
                if i >= hi {
                    break;
                }
                if self
                    .writes(pc, &opcode)
                    .is_some_and(|w| w.regs.contains(&full))
                {
                    found = found.max(Some(i));
                }
                pending = Some((i, value));
            }
            if found.is_some() || lo == 0 {
                return Ok(found);
            }
            hi = lo;
            width = width.saturating_mul(2);
        }
    }

    /// The last step before `n` that wrote a byte of `addr..addr + len`, and whether it
    /// wrote all of them: among `xref`'s hits of the range, newest first.
    fn mem_writer(
        &mut self,
        steps: &mut dyn Steps,
        mut sidecar: Option<&mut Sidecar>,
        addr: u64,
        len: u32,
        n: u64,
    ) -> Result<Option<(u64, bool)>, Error> {
        let query = XrefQuery {
            mem: Some((addr, Some(u64::from(len)))),
            pc: None,
        };
        let mut candidates = FIRST_CANDIDATES;
        let mut width = MEM_WINDOW;
        let mut hi = n;
        loop {
            let window = match sidecar {
                Some(_) => Window {
                    from: 0,
                    to: hi,
                    last: Some(candidates),
                },
                None => Window {
                    from: hi.saturating_sub(width),
                    to: hi,
                    last: None,
                },
            };
            let mut found: Vec<u64> = Vec::new();
            // `xref_of` reads on from where the steps are when the window starts at 0.
            if window.from == 0 {
                steps.seek(0)?;
            }
            xref_of(
                steps,
                sidecar.as_deref_mut(),
                false,
                &query,
                window,
                &mut |hit| {
                    if found.last() != Some(&hit.i) {
                        found.push(hit.i);
                    }
                    Ok(())
                },
            )?;
            for &i in found.iter().rev() {
                let at = self.at_step(steps, i)?;
                if let Some(all) = self.writes_mem(&at, addr, len) {
                    return Ok(Some((i, all)));
                }
            }
            // With a sidecar, until a round finds no candidate (a candidate step whose
            // accesses do not match is not counted, so a short round is no proof of the end).
            let more = match sidecar {
                Some(_) => !found.is_empty(),
                None => window.from > 0,
            };
            if !more {
                return Ok(None);
            }
            hi = match sidecar {
                Some(_) => found.first().copied().unwrap_or(0),
                None => window.from,
            };
            candidates = candidates.saturating_mul(2);
            width = width.saturating_mul(2);
        }
    }

    /// Whether step `at` wrote a byte of `addr..addr + len` (`Some`), and all of them.
    fn writes_mem(&mut self, at: &AtStep, addr: u64, len: u32) -> Option<bool> {
        let end = addr.saturating_add(u64::from(len));
        let covered = |a: u64, size: u64| -> Option<bool> {
            let (lo, hi) = (a.max(addr), a.saturating_add(size).min(end));
            (lo < hi).then_some(a <= addr && a.saturating_add(size) >= end)
        };
        let step = &at.step;
        if let Some(ins) = self.decode(step.pc, &step.opcode) {
            let next_ip = ins.next_ip();
            let mut unknown = false;
            let mut any = None;
            let used: SmallVec<[UsedMemory; 4]> = self
                .factory
                .info(&ins)
                .used_memory()
                .iter()
                .copied()
                .collect();
            for used in used {
                if !is_write(used.access()) {
                    continue;
                }
                let size = used.memory_size().size() as u64;
                match used.virtual_address(0, |r, _, _| self.value(r, &at.regs, next_ip)) {
                    Some(a) => {
                        if let Some(all) = covered(a, size.max(1)) {
                            any = Some(any.unwrap_or(false) || all);
                        }
                    }
                    None => unknown = true,
                }
            }
            if !unknown {
                return any;
            }
        }
        // Not decoded, or an address not computed: the recorded accesses that changed it.
        let mut any = None;
        for a in step.mem.iter().filter(|a| a.new.is_some()) {
            if let Some(all) = covered(a.addr, u64::from(a.len)) {
                any = Some(any.unwrap_or(false) || all);
            }
        }
        any
    }

    /// The kind of write step `at` made to `target`, and for a copy its source.
    fn classify(&mut self, at: &AtStep, target: &Target) -> (HopKind, Option<Target>) {
        let step = &at.step;
        let Some(ins) = self.decode(step.pc, &step.opcode) else {
            return (HopKind::Unknown, None);
        };
        let mnemonic = ins.mnemonic();
        if is_syscall(mnemonic) {
            return (HopKind::Syscall, None);
        }
        let Some(mut copy) = copy_shape(&ins) else {
            return (HopKind::Compute, None);
        };
        if copy.either && !copy.dest.is(target) && copy.source.is(target) {
            std::mem::swap(&mut copy.dest, &mut copy.source);
        }
        // Is the target the copy's destination (rather than, say, the rsp a push moved)?
        match (copy.dest, target) {
            (Place::Reg(d), Target::Reg(name)) => {
                let Some(t) = Target::register(name) else {
                    return (HopKind::Unknown, None);
                };
                if d.full_register() != t.full_register() {
                    return (HopKind::Compute, None);
                }
                // A write of fewer bytes than the target leaves the rest as it was, except
                // a 32-bit general register, which clears the upper half.
                let widens = self.isa == Isa::X64 && d.is_gpr32();
                if d.size() < t.size() && !widens {
                    return (HopKind::Partial, None);
                }
                if copy.merges {
                    return (HopKind::Partial, None);
                }
            }
            (Place::Mem, Target::Mem { .. }) => {}
            _ => return (HopKind::Compute, None),
        }
        let next_ip = ins.next_ip();
        let source = match copy.source {
            Place::Reg(r) => Target::Reg(reg_name(r)),
            Place::Imm => return (HopKind::Compute, None),
            Place::Mem => {
                let info = self.factory.info(&ins);
                let read = info
                    .used_memory()
                    .iter()
                    .find(|m| is_read(m.access()))
                    .copied();
                let Some(read) = read else {
                    return (HopKind::Unknown, None);
                };
                let Some(a) = read.virtual_address(0, |r, _, _| self.value(r, &at.regs, next_ip))
                else {
                    return (HopKind::Unknown, None);
                };
                let size = u32::try_from(read.memory_size().size()).unwrap_or(0);
                let (mut a, mut size) = (a, size.clamp(1, MAX_LEN));
                // Memory to memory: the bytes of the source that went to the target.
                if let (Target::Mem { addr, len }, Some(w)) =
                    (target, copy.write_at(&ins, self, at))
                    && *addr >= w
                {
                    a = a.saturating_add(addr.saturating_sub(w));
                    size = (*len).min(size);
                }
                Target::Mem { addr: a, len: size }
            }
        };
        (HopKind::Copy, Some(source))
    }
}

/// A place an operand names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Place {
    Reg(Register),
    Mem,
    Imm,
}

impl Place {
    /// Whether the place is (part of) `target`: the same full register, or memory.
    fn is(self, target: &Target) -> bool {
        match (self, target) {
            (Place::Reg(r), Target::Reg(name)) => {
                Target::register(name).is_some_and(|t| t.full_register() == r.full_register())
            }
            (Place::Mem, Target::Mem { .. }) => true,
            _ => false,
        }
    }
}

/// A copy instruction's destination and source.
#[derive(Clone, Copy, Debug)]
struct CopyShape {
    dest: Place,
    source: Place,
    /// A register-to-register `movss`/`movsd`: it keeps the destination's upper bytes.
    merges: bool,
    /// `xchg`: each operand is the other's source.
    either: bool,
}

impl CopyShape {
    /// The address of the copy's memory destination.
    fn write_at(&self, ins: &Instruction, tracer: &mut Tracer, at: &AtStep) -> Option<u64> {
        let next_ip = ins.next_ip();
        let info = tracer.factory.info(ins);
        let write = info
            .used_memory()
            .iter()
            .find(|m| is_write(m.access()))
            .copied()?;
        write.virtual_address(0, |r, _, _| tracer.value(r, &at.regs, next_ip))
    }
}

/// The place operand `k` of `ins` names.
fn place(ins: &Instruction, k: u32) -> Place {
    match ins.op_kind(k) {
        OpKind::Register => Place::Reg(ins.op_register(k)),
        OpKind::Memory
        | OpKind::MemorySegSI
        | OpKind::MemorySegESI
        | OpKind::MemorySegRSI
        | OpKind::MemorySegDI
        | OpKind::MemorySegEDI
        | OpKind::MemorySegRDI
        | OpKind::MemoryESDI
        | OpKind::MemoryESEDI
        | OpKind::MemoryESRDI => Place::Mem,
        _ => Place::Imm,
    }
}

/// The shape of `ins` when it is a pure copy (see the module documentation).
fn copy_shape(ins: &Instruction) -> Option<CopyShape> {
    use Mnemonic as M;
    let m = ins.mnemonic();
    let shape = |dest, source| CopyShape {
        dest,
        source,
        merges: false,
        either: false,
    };
    let string = ins.is_string_instruction();
    match m {
        M::Push if ins.op_count() == 1 => Some(shape(Place::Mem, place(ins, 0))),
        M::Pop if ins.op_count() == 1 => Some(shape(place(ins, 0), Place::Mem)),
        // Either way round: the caller matches the target with the destination.
        M::Xchg if ins.op_count() == 2 => Some(CopyShape {
            either: true,
            ..shape(place(ins, 0), place(ins, 1))
        }),
        M::Movsb | M::Movsw | M::Movsq => Some(shape(Place::Mem, Place::Mem)),
        M::Movsd if string => Some(shape(Place::Mem, Place::Mem)),
        M::Stosb | M::Stosw | M::Stosd | M::Stosq => Some(shape(Place::Mem, place(ins, 1))),
        M::Lodsb | M::Lodsw | M::Lodsd | M::Lodsq => Some(shape(place(ins, 0), Place::Mem)),
        M::Mov
        | M::Movzx
        | M::Movsx
        | M::Movsxd
        | M::Movaps
        | M::Movups
        | M::Movapd
        | M::Movupd
        | M::Movdqa
        | M::Movdqu
        | M::Movq
        | M::Movd
        | M::Movss
        | M::Movsd
        | M::Movnti
        | M::Movntdq
        | M::Movntps
        | M::Movntpd
        | M::Vmovaps
        | M::Vmovups
        | M::Vmovapd
        | M::Vmovupd
        | M::Vmovdqa
        | M::Vmovdqa32
        | M::Vmovdqa64
        | M::Vmovdqu
        | M::Vmovdqu8
        | M::Vmovdqu16
        | M::Vmovdqu32
        | M::Vmovdqu64
        | M::Vmovq
        | M::Vmovd
        | M::Vmovss
        | M::Vmovsd
        | M::Vmovntdq
        | M::Vmovntps
        | M::Vmovntpd
            if ins.op_count() == 2 =>
        {
            let (dest, source) = (place(ins, 0), place(ins, 1));
            let merges = matches!(m, M::Movss | M::Movsd)
                && matches!((dest, source), (Place::Reg(_), Place::Reg(_)));
            // `mov` to or from a segment or control register is no value copy to follow.
            let plain = |p: Place| match p {
                Place::Reg(r) => r.is_gpr() || r.is_vector_register(),
                _ => true,
            };
            (plain(dest) && plain(source)).then_some(CopyShape {
                merges,
                ..shape(dest, source)
            })
        }
        _ => None,
    }
}

/// Whether the instruction hands over to the kernel.
fn is_syscall(m: Mnemonic) -> bool {
    matches!(
        m,
        Mnemonic::Syscall
            | Mnemonic::Sysenter
            | Mnemonic::Int
            | Mnemonic::Int1
            | Mnemonic::Int3
            | Mnemonic::Into
    )
}

fn is_write(a: OpAccess) -> bool {
    matches!(
        a,
        OpAccess::Write | OpAccess::CondWrite | OpAccess::ReadWrite | OpAccess::ReadCondWrite
    )
}

fn is_read(a: OpAccess) -> bool {
    matches!(
        a,
        OpAccess::Read | OpAccess::CondRead | OpAccess::ReadWrite | OpAccess::ReadCondWrite
    )
}

#[cfg(test)]
#[allow(
    clippy::unwrap_used,
    clippy::indexing_slicing,
    clippy::arithmetic_side_effects,
    clippy::cast_possible_truncation
)]
mod tests {
    use super::*;
    use trac_x64dbg::{Arch, Header, MemAccess, Recorder, RecorderOptions, RegDump, Writer};
    use trace_model::Options;
    use trace_model::schema::testing::input;

    const RAX: usize = 0;
    const RCX: usize = 1;
    const RBX: usize = 3;
    const RSP: usize = 4;
    const STACK: u64 = 0x14_fe00;

    /// One instruction of a hand-built trace: its thread, bytes, the registers set before
    /// it (word index, value) and its recorded memory words (address, old, new).
    struct Ins {
        thread: u32,
        opcode: Vec<u8>,
        set: Vec<(usize, u64)>,
        mem: Vec<(u64, u64, Option<u64>)>,
    }

    fn ins(opcode: &[u8], set: &[(usize, u64)], mem: &[(u64, u64, Option<u64>)]) -> Ins {
        Ins {
            thread: 7,
            opcode: opcode.to_vec(),
            set: set.to_vec(),
            mem: mem.to_vec(),
        }
    }

    /// An x64 trace recorded from `steps` by `trac_x64dbg`'s `Recorder` (a full dump every
    /// 512 instructions), each thread with its own registers.
    fn built(steps: &[Ins]) -> Vec<u8> {
        let header = Header::new(Arch::X64, "hand.exe");
        let writer = Writer::new(Vec::new(), &header).unwrap();
        let mut rec = Recorder::new(writer, RecorderOptions::default());
        let mut regs: HashMap<u32, RegDump> = HashMap::new();
        let mut pc = 0x7ff6_0000_1000u64;
        for s in steps {
            let r = regs.entry(s.thread).or_insert_with(|| {
                let mut r = RegDump::new(Arch::X64);
                r.set_word(RSP, STACK);
                r
            });
            for &(k, v) in &s.set {
                r.set_word(k, v);
            }
            r.set_ip(pc);
            let mem = s
                .mem
                .iter()
                .map(|&(address, old, new)| MemAccess {
                    flags: u8::from(new.is_none()),
                    address,
                    old,
                    new,
                })
                .collect();
            rec.step(trac_x64dbg::Step {
                thread: s.thread,
                opcode: s.opcode.clone(),
                regs: r.clone(),
                mem,
            })
            .unwrap();
            pc += s.opcode.len() as u64;
        }
        rec.finish().unwrap()
    }

    fn ask(bytes: &[u8], at: u64, target: &str, max_hops: usize) -> Result<Origin, Error> {
        ask_gz(bytes, false, at, target, max_hops)
    }

    /// [`ask`], of the trace gzipped (a stream that seeks only forwards) or not.
    fn ask_gz(
        bytes: &[u8],
        gzip: bool,
        at: u64,
        target: &str,
        max_hops: usize,
    ) -> Result<Origin, Error> {
        let mut input = input("o.trace64", bytes, gzip);
        let handler = trace_registry::detect(&input).unwrap();
        let options = Options::default();
        let query = OriginQuery {
            at,
            target: target.parse().map_err(Error::Unsupported)?,
            max_hops,
        };
        origin(handler, &mut input, &mut Ctx::new(&options), &query)
    }

    /// Each hop as (step, kind, loc, from).
    fn shape(o: &Origin) -> Vec<(Option<u64>, HopKind, String, Option<String>)> {
        o.hops
            .iter()
            .map(|h| (h.i, h.kind, h.loc.clone(), h.from.clone()))
            .collect()
    }

    fn hop(
        i: Option<u64>,
        kind: HopKind,
        loc: &str,
        from: Option<&str>,
    ) -> (Option<u64>, HopKind, String, Option<String>) {
        (i, kind, loc.to_owned(), from.map(str::to_owned))
    }

    // The encodings the traces use.
    const MOV_RCX_IMM: &[u8] = &[0x48, 0xc7, 0xc1, 0x34, 0x12, 0x00, 0x00]; // mov rcx, 0x1234
    const MOV_RAX_IMM: &[u8] = &[0x48, 0xc7, 0xc0, 0x34, 0x12, 0x00, 0x00]; // mov rax, 0x1234
    const STORE_RCX: &[u8] = &[0x48, 0x89, 0x4c, 0x24, 0x08]; // mov [rsp+8], rcx
    const LOAD_RBX: &[u8] = &[0x48, 0x8b, 0x5c, 0x24, 0x08]; // mov rbx, [rsp+8]
    const MOV_RAX_RBX: &[u8] = &[0x48, 0x89, 0xd8]; // mov rax, rbx
    const ADD_RAX_RCX: &[u8] = &[0x48, 0x01, 0xc8]; // add rax, rcx
    const PUSH_RAX: &[u8] = &[0x50];
    const POP_RDX: &[u8] = &[0x5a];
    const NOP: &[u8] = &[0x90];

    /// A constant, stored, loaded, moved: copy, copy, copy back to the `mov` of the
    /// immediate (a computation); the sub-register `eax` is `rax`'s.
    #[test]
    fn a_chain_of_copies_ends_at_the_constant() {
        let a = STACK + 8;
        let bytes = built(&[
            ins(MOV_RCX_IMM, &[], &[]),
            ins(STORE_RCX, &[(RCX, 0x1234)], &[(a, 5, Some(0x1234))]),
            ins(LOAD_RBX, &[], &[(a, 0x1234, None)]),
            ins(MOV_RAX_RBX, &[(RBX, 0x1234)], &[]),
            ins(NOP, &[(RAX, 0x1234)], &[]),
        ]);
        let want = vec![
            hop(Some(3), HopKind::Copy, "rax", Some("rbx")),
            hop(Some(2), HopKind::Copy, "rbx", Some("0x14fe08:8")),
            hop(Some(1), HopKind::Copy, "0x14fe08:8", Some("rcx")),
            hop(Some(0), HopKind::Compute, "rcx", None),
        ];
        let o = ask(&bytes, 4, "rax", 64).unwrap();
        assert_eq!(shape(&o), want);
        assert_eq!(o.hops[0].asm.as_deref(), Some("mov rax, rbx"));
        assert_eq!(o.hops[0].thread, Some(7));
        assert_eq!(o.hops[0].pc, Some(0x7ff6_0000_1000 + 7 + 5 + 5));
        // `eax` is found through `rax`'s writer.
        let o = ask(&bytes, 4, "eax", 64).unwrap();
        assert_eq!(o.hops[0].i, Some(3));
        assert_eq!(o.hops.len(), 4);
        // From the memory: the store, then the constant.
        let o = ask(&bytes, 3, "0x14fe08", 64).unwrap();
        assert_eq!(shape(&o), want[2..]);
        // One byte of the word: the same writer, which wrote all of it.
        let o = ask(&bytes, 3, "0x14fe0b:1", 64).unwrap();
        assert_eq!(o.hops[0].i, Some(1));
        assert_eq!(o.hops[0].kind, HopKind::Copy);
        // A range the store covers only half of: partial.
        let o = ask(&bytes, 3, "0x14fe0c:8", 64).unwrap();
        assert_eq!(
            shape(&o),
            [hop(Some(1), HopKind::Partial, "0x14fe0c:8", None)]
        );
        // The JSON lines.
        let o = ask(&bytes, 4, "rax", 2).unwrap();
        assert_eq!(
            o.to_json_lines(),
            "{\"i\":3,\"thread\":7,\"pc\":\"0x7ff600001011\",\"asm\":\"mov rax, rbx\",\"from\":\"rbx\",\"kind\":\"copy\",\"loc\":\"rax\"}\n\
             {\"i\":2,\"thread\":7,\"pc\":\"0x7ff60000100c\",\"asm\":\"mov rbx, qword ptr [rsp+8]\",\"from\":\"0x14fe08:8\",\"kind\":\"copy\",\"loc\":\"rbx\"}\n"
        );
        assert!(o.to_text().contains("cut at 2 hops"));
    }

    /// An `add` is a computation; a register nothing wrote, and memory nothing wrote, go
    /// back to the start.
    #[test]
    fn computations_and_the_start_stop_the_chain() {
        let bytes = built(&[
            ins(MOV_RCX_IMM, &[], &[]),
            ins(ADD_RAX_RCX, &[(RCX, 0x1234)], &[]),
            ins(NOP, &[(RAX, 0x1234)], &[]),
            ins(NOP, &[], &[]),
        ]);
        let o = ask(&bytes, 3, "rax", 64).unwrap();
        assert_eq!(shape(&o), [hop(Some(1), HopKind::Compute, "rax", None)]);
        let o = ask(&bytes, 3, "rdx", 64).unwrap();
        assert_eq!(shape(&o), [hop(None, HopKind::Start, "rdx", None)]);
        assert_eq!(
            o.hops[0].to_json(),
            r#"{"i":null,"thread":null,"pc":null,"asm":null,"from":null,"kind":"start","loc":"rdx"}"#
        );
        let o = ask(&bytes, 3, "0x5000:4", 64).unwrap();
        assert_eq!(shape(&o), [hop(None, HopKind::Start, "0x5000:4", None)]);
        // Before the writer, rax was there at the start.
        let o = ask(&bytes, 1, "rax", 64).unwrap();
        assert_eq!(shape(&o), [hop(None, HopKind::Start, "rax", None)]);
    }

    /// `push` copies its register to the stack (and computes rsp); `pop` copies the slot; a
    /// syscall stops; a register another thread wrote is not this thread's.
    #[test]
    fn push_pop_syscall_and_threads() {
        let slot = STACK - 8;
        let mut other = ins(&[0x48, 0x31, 0xd2], &[], &[]); // xor rdx, rdx (thread 9)
        other.thread = 9;
        let bytes = built(&[
            ins(&[0x0f, 0x05], &[], &[]), // syscall
            ins(PUSH_RAX, &[(RAX, 0x77)], &[(slot, 0, Some(0x77))]),
            other,
            ins(POP_RDX, &[(RSP, slot)], &[(slot, 0x77, None)]),
            ins(NOP, &[(RSP, STACK), (2, 0x77)], &[]),
        ]);
        let o = ask(&bytes, 4, "rdx", 64).unwrap();
        assert_eq!(
            shape(&o),
            [
                hop(Some(3), HopKind::Copy, "rdx", Some("0x14fdf8:8")),
                hop(Some(1), HopKind::Copy, "0x14fdf8:8", Some("rax")),
                hop(Some(0), HopKind::Syscall, "rax", None),
            ]
        );
        // rsp was moved by the pop, not copied.
        let o = ask(&bytes, 4, "rsp", 64).unwrap();
        assert_eq!(shape(&o), [hop(Some(3), HopKind::Compute, "rsp", None)]);
    }

    /// A chain of 100 hops through stores, loads and register moves, with `nop`s between
    /// (across full dumps): every hop found, in order, to the constant at the start; and
    /// `max_hops` cuts it.
    #[test]
    fn a_hundred_hop_copy_chain() {
        // Each instruction with what it does to the registers (set before the next one).
        let mut steps: Vec<Ins> = Vec::new();
        let mut effect: Vec<(usize, u64)> = Vec::new();
        let mut push = |steps: &mut Vec<Ins>, opcode: &[u8], mem: &[_], then: &[(usize, u64)]| {
            steps.push(ins(opcode, &effect, mem));
            effect = then.to_vec();
            steps.len() as u64 - 1
        };
        let v = 0x1234u64;
        let first = push(&mut steps, MOV_RAX_IMM, &[], &[(RAX, v)]);
        // The steps of the copies, and what each hop's location and source are.
        let mut want = vec![(first, HopKind::Compute, "rax".to_owned(), None)];
        // Unrelated instructions between the copies, a varying number.
        for k in 0..33usize {
            let disp = 8 + 8 * (k % 15) as u8;
            let addr = STACK + u64::from(disp);
            let loc = format!("{addr:#x}:8");
            for _ in 0..((k) % 5) * 5 {
                push(&mut steps, NOP, &[], &[]);
            }
            // mov [rsp+disp], rax
            let i = push(
                &mut steps,
                &[0x48, 0x89, 0x44, 0x24, disp],
                &[(addr, 0, Some(v))],
                &[],
            );
            want.push((i, HopKind::Copy, loc.clone(), Some("rax".to_owned())));
            for _ in 0..((k + 1) % 5) * 5 {
                push(&mut steps, NOP, &[], &[]);
            }
            // mov rbx, [rsp+disp]
            let i = push(
                &mut steps,
                &[0x48, 0x8b, 0x5c, 0x24, disp],
                &[(addr, v, None)],
                &[(RBX, v)],
            );
            want.push((i, HopKind::Copy, "rbx".to_owned(), Some(loc)));
            for _ in 0..((k + 2) % 5) * 5 {
                push(&mut steps, NOP, &[], &[]);
            }
            let i = push(&mut steps, MOV_RAX_RBX, &[], &[]);
            want.push((i, HopKind::Copy, "rax".to_owned(), Some("rbx".to_owned())));
            // Clobber rbx afterwards, so that only the right writer explains it.
            push(&mut steps, &[0x48, 0x31, 0xdb], &[], &[(RBX, 0)]); // xor rbx, rbx
        }
        push(&mut steps, NOP, &[], &[]);
        let at = steps.len() as u64 - 1;
        assert!(at > 1024, "the chain crosses full dumps ({at})");
        want.reverse();
        let want: Vec<_> = want
            .into_iter()
            .map(|(i, kind, loc, from)| (Some(i), kind, loc, from))
            .collect();
        assert_eq!(want.len(), 100);
        let bytes = built(&steps);
        let o = ask(&bytes, at, "rax", 200).unwrap();
        assert_eq!(shape(&o), want);
        let o = ask(&bytes, at, "rax", 10).unwrap();
        assert_eq!(shape(&o), want[..10]);
        // Gzipped, the steps are read into memory first: the same hops.
        let o = ask_gz(&bytes, true, at, "rax", 200).unwrap();
        assert_eq!(shape(&o), want);
        let e = ask_gz(&bytes, true, at + 1, "rax", 200).unwrap_err();
        assert!(
            matches!(&e, Error::Unsupported(m) if m.contains("past the end")),
            "{e}"
        );
        // The same with a sidecar index.
        let dir = std::env::temp_dir().join(format!("tk-origin-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("chain.trace64");
        std::fs::write(&path, &bytes).unwrap();
        let index = dir.join("chain.trace64.tkidx");
        let options = Options {
            index: Some(index.clone()),
            ..Options::default()
        };
        let mut input = Input::open(path.as_os_str()).unwrap();
        let handler = trace_registry::detect(&input).unwrap();
        trace_index::build(
            handler,
            &mut input,
            &mut Ctx::new(&options),
            Some(&index),
            trace_index::BuildOptions::default(),
        )
        .unwrap();
        let mut input = Input::open(path.as_os_str()).unwrap();
        let query = OriginQuery {
            at,
            target: "rax".parse().unwrap(),
            max_hops: 200,
        };
        let o = origin(handler, &mut input, &mut Ctx::new(&options), &query).unwrap();
        assert_eq!(shape(&o), want);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// Bad targets and steps past the end say what is expected.
    #[test]
    fn errors_say_what_is_expected() {
        let bytes = built(&[ins(NOP, &[], &[]), ins(NOP, &[], &[])]);
        let e = ask(&bytes, 2, "rax", 64).unwrap_err();
        assert!(
            matches!(&e, Error::Unsupported(m) if m.contains("2 is past the end")),
            "{e}"
        );
        for bad in ["foo", "0x10:0", "0x10:65", "0xzz", "rflags"] {
            let e = bad.parse::<Target>().unwrap_err();
            assert!(e.contains("expected a register"), "{bad}: {e}");
        }
        assert_eq!(
            "0x10:4".parse::<Target>(),
            Ok(Target::Mem { addr: 16, len: 4 })
        );
        assert_eq!("16".parse::<Target>(), Ok(Target::Mem { addr: 16, len: 8 }));
        assert_eq!("XMM3".parse::<Target>(), Ok(Target::Reg("xmm3".into())));
    }
}
