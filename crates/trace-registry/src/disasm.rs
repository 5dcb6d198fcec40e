//! Disassembly (`--disasm`): an instruction's text, and the size and read/write kind of the
//! memory words a trace recorded for it.
//!
//! x86 and x64 are decoded by `iced-x86` and shown in Intel syntax, lowercase, with memory
//! sizes always spelled out, hex numbers as `0x…` and branch and RIP-relative targets as
//! absolute addresses: `mov rax, qword ptr [rsp+8]`, `lea rax, [0x7ff6a1b23010]`,
//! `call 0x7ff6a1b21000`. PowerPC words (amber traces) are shown by the `amber-tt6`
//! crate's mnemonics, with operands for the common forms (`lwz r3, 8(r1)`, `b 0x1f00`).
//!
//! # Matching x64dbg's memory entries to operands
//!
//! x64dbg records no operand sizes and no read/write kinds (its notes, section 4.5): for each
//! memory operand it computes the address from the registers before the instruction and
//! stores whole pointer-sized words (8 bytes in `.trace64`, 4 in `.trace32`) read at that
//! address, **not aligned**: an operand of `S` bytes at `A` gives `max(1, ceil(S / w))`
//! entries at `A`, `A + w`, `A + 2w`, … (a 16-byte XMM store is two entries on x64; a 2-byte
//! `fnstcw` one whole word). `push`/`call` record the slot below the stack pointer, `pop`/`ret`
//! the slot at it, as iced's implicit stack operands describe them.
//!
//! [`Disassembler::annotate`] decodes the instruction, computes each memory operand's address
//! from the registers before it (the recorded state; RIP-relative from the pc and length),
//! and gives a recorded entry at `addr` to the operand at `A` of `S` bytes when `addr = A +
//! k·w` with `0 ≤ k·w < S`: its `len` becomes the operand's bytes in that word,
//! `min(w, S − k·w)` (so a 4-byte operand's entry covers 4 bytes, each half of a 16-byte one
//! 8), its `kind` the operand's access (conditional reads and writes count as reads and
//! writes, `cmpxchg`'s read-and-maybe-write as read-write), and `sized` is set.
//!
//! Segment bases: x64dbg adds the thread's TEB base for `gs` on x64 and `fs` on x86 and no
//! other base, so other segments count as base 0. The TEB base is not in the trace: an
//! operand with that override is matched by order instead, taking the entries no other
//! operand took when there is exactly one such operand and they are the `ceil(S / w)`
//! consecutive words it would give.
//!
//! Left `Unknown` (with the recorded word as `len`), rather than guessed: entries of string
//! instructions (`movs`, `stos`, `cmps`, …: `rep` repeats them and `rsi`/`rdi` may alias),
//! of gathers and scatters (the addresses depend on vector registers), entries that two
//! operands of different sizes or kinds both claim, entries no operand explains, and every
//! entry of an instruction that does not decode.
//!
//! Decoding is cached: traces run the same code again and again, so [`Disassembler`] keeps a
//! direct-mapped cache of decoded instructions keyed by pc and bytes, and formats the text
//! of each cached instruction once.

use iced_x86::{
    CodeSize, Decoder, DecoderOptions, Formatter, Instruction, InstructionInfoFactory,
    InstructionInfoOptions, IntelFormatter, MemorySizeOptions, Mnemonic, OpAccess, Register,
    RflagsBits,
};
use smallvec::SmallVec;

use crate::steps::{Access, AccessKind, Isa, Step};

/// The number of slots of the decode cache (a power of two): more than the distinct pcs of
/// most hot loops, small enough (about 200 KiB) to allocate per reader.
const CACHE_SLOTS: usize = 1024;

/// The longest x86 instruction.
const MAX_X86_LEN: usize = 15;

/// A memory operand of a decoded instruction, as [`Disassembler::annotate`] matches it:
/// its address's parts resolved once, when it is decoded, to where the state holds them.
#[derive(Clone, Copy, Debug)]
struct MemOperand {
    /// The displacement (for RIP-relative operands, the absolute address).
    displacement: u64,
    base: Part,
    index: Part,
    scale: u64,
    /// The address size's mask (16, 32 or 64 bits).
    address_mask: u64,
    /// The segment base is unknown (`gs` on x64, `fs` on x86); every other base is 0.
    unknown_base: bool,
    /// The operand size in bytes (0 when iced does not know it).
    size: u32,
    kind: AccessKind,
}

/// A base or index register of a memory operand, as the state holds it.
#[derive(Clone, Copy, Debug)]
enum Part {
    /// No register.
    None,
    /// `regs[at] & mask`.
    Reg { at: usize, mask: u64 },
    /// A register the state does not hold: the address is unknown.
    Unknown,
}

impl Part {
    /// The part for register `r` of an `isa` instruction.
    fn of(isa: Isa, r: Register) -> Part {
        if r == Register::None {
            return Part::None;
        }
        match reg_ref(isa, r) {
            Some(RegRef::Zero) => Part::None,
            Some(RegRef::Word { at, mask }) => Part::Reg { at, mask },
            None => Part::Unknown,
        }
    }

    /// Its value in `regs`; `None` when unknown.
    #[inline]
    fn value(self, regs: &[u64]) -> Option<u64> {
        match self {
            Part::None => Some(0),
            Part::Reg { at, mask } => regs.get(at).map(|v| v & mask),
            Part::Unknown => None,
        }
    }
}

impl MemOperand {
    /// The operand's address from the state before the instruction, as iced's
    /// `UsedMemory::virtual_address` computes it; `None` where the segment base or a
    /// register is unknown.
    #[inline]
    fn address(&self, regs: &[u64]) -> Option<u64> {
        if self.unknown_base {
            return None;
        }
        let base = self.base.value(regs)?;
        let index = self.index.value(regs)?;
        Some(
            self.displacement
                .wrapping_add(base)
                .wrapping_add(index.wrapping_mul(self.scale))
                & self.address_mask,
        )
    }
}

/// What an instruction does to the flow of control, as call trees need it
/// ([`Disassembler::flow`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Flow {
    /// Neither a call nor a return (or the bytes do not decode).
    #[default]
    Other,
    /// A `call` (near or far, direct or indirect; not `syscall`, `sysenter` or `vmcall`):
    /// its length in bytes (the return address is the pc plus it) and, for a direct near
    /// call, its target.
    Call {
        /// The instruction's length.
        len: u8,
        /// The target of a direct near call.
        target: Option<u64>,
    },
    /// A `ret` or `retf` (with or without an immediate; not `iret` or `sysret`).
    Return,
}

/// What the cache keeps of one instruction.
#[derive(Clone, Debug, Default)]
struct Decoded {
    /// The bytes decode to a valid instruction.
    valid: bool,
    /// A call, a return or neither.
    flow: Flow,
    /// A string instruction or a gather/scatter: its entries stay unknown.
    opaque: bool,
    mem: SmallVec<[MemOperand; 2]>,
    /// The text, once formatted ([`Decoded::formatted`]).
    asm: String,
    formatted: bool,
    /// The decoded instruction, for formatting on first use.
    instruction: Instruction,
}

/// One cache slot: the key (pc and bytes) and what was decoded from it.
#[derive(Clone, Debug, Default)]
struct Slot {
    pc: u64,
    /// How many of `bytes` are the key; 0 for an empty slot.
    len: u8,
    bytes: [u8; 16],
    decoded: Decoded,
}

/// A disassembler for one instruction set, with its decode cache. Create one per stream and
/// reuse it: the formatter and cache are set up once.
pub struct Disassembler {
    isa: Isa,
    slots: Vec<Slot>,
    formatter: IntelFormatter,
    factory: InstructionInfoFactory,
    /// The last PowerPC text (PowerPC is not cached: formatting a word is cheaper than a
    /// lookup).
    ppc_text: String,
    /// The slot whose text [`Disassembler::last_asm`] gives (x86): set by the methods that
    /// return a text, cleared by every other lookup (which may replace the slot).
    last: Option<usize>,
}

impl std::fmt::Debug for Disassembler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Disassembler")
            .field("isa", &self.isa)
            .finish_non_exhaustive()
    }
}

impl Disassembler {
    /// A disassembler for `isa` (one that decodes nothing for [`Isa::Other`]).
    #[must_use]
    pub fn new(isa: Isa) -> Disassembler {
        let mut formatter = IntelFormatter::new();
        let o = formatter.options_mut();
        o.set_space_after_operand_separator(true);
        o.set_hex_prefix("0x");
        o.set_hex_suffix("");
        o.set_uppercase_hex(false);
        o.set_branch_leading_zeros(false);
        o.set_show_branch_size(false);
        o.set_memory_size_options(MemorySizeOptions::Always);
        let slots = match isa {
            Isa::X64 | Isa::X86 => vec![Slot::default(); CACHE_SLOTS],
            _ => Vec::new(),
        };
        Disassembler {
            isa,
            slots,
            formatter,
            factory: InstructionInfoFactory::new(),
            ppc_text: String::new(),
            last: None,
        }
    }

    /// The instruction set.
    #[must_use]
    pub fn isa(&self) -> Isa {
        self.isa
    }

    /// The text of the instruction at `pc` whose bytes start `bytes` (extra bytes after it
    /// are ignored); `None` when they do not decode (invalid or cut short) or the
    /// instruction set is not one this module decodes. PowerPC takes one big-endian word.
    pub fn asm(&mut self, pc: u64, bytes: &[u8]) -> Option<&str> {
        if self.isa == Isa::Ppc32 {
            self.ppc_text.clear();
            let word = u32::from_be_bytes(bytes.get(..4)?.try_into().ok()?);
            return ppc::format(pc, word, &mut self.ppc_text).then_some(&*self.ppc_text);
        }
        self.last = lookup(&mut self.slots, &mut self.factory, self.isa, pc, bytes);
        self.format_last()
    }

    /// [`Disassembler::annotate`], then [`Disassembler::asm`] of the same instruction, with
    /// one cache lookup (what a `--disasm` row needs). The text stays readable through
    /// [`Disassembler::last_asm`].
    pub fn annotate_asm(
        &mut self,
        pc: u64,
        bytes: &[u8],
        regs: &[u64],
        accesses: &mut [Access],
    ) -> Option<&str> {
        if self.isa == Isa::Ppc32 {
            return self.asm(pc, bytes);
        }
        self.last = lookup(&mut self.slots, &mut self.factory, self.isa, pc, bytes);
        if let Some(slot) = self.last.and_then(|at| self.slots.get(at)) {
            annotate_decoded(self.isa, &slot.decoded, regs, accesses);
        }
        self.format_last()
    }

    /// The text the last [`Disassembler::asm`] or [`Disassembler::annotate_asm`] gave, until
    /// another method is called.
    #[must_use]
    pub fn last_asm(&self) -> Option<&str> {
        if self.isa == Isa::Ppc32 {
            return Some(&*self.ppc_text).filter(|t| !t.is_empty());
        }
        let d = &self.slots.get(self.last?)?.decoded;
        (d.valid && d.formatted).then_some(&*d.asm)
    }

    /// The text of the slot `last` names, formatted on its first use.
    fn format_last(&mut self) -> Option<&str> {
        let d = &mut self.slots.get_mut(self.last?)?.decoded;
        if !d.valid {
            return None;
        }
        if !d.formatted {
            d.asm.clear();
            self.formatter.format(&d.instruction, &mut d.asm);
            d.formatted = true;
        }
        Some(&d.asm)
    }

    /// Whether the x86 or x64 instruction at `pc` (`bytes`) reads `watch` (a register
    /// through any part of it, or a flag); `None` when the bytes do not decode or the
    /// instruction set is not x86.
    pub fn reads(&mut self, pc: u64, bytes: &[u8], watch: ReadWatch) -> Option<bool> {
        let Disassembler {
            slots,
            factory,
            isa,
            last,
            ..
        } = self;
        *last = None;
        let at = lookup(slots, factory, *isa, pc, bytes)?;
        let slot = slots.get(at)?;
        if !slot.decoded.valid {
            return None;
        }
        let instruction = &slot.decoded.instruction;
        let target = match watch.0 {
            Watch::Flags(bits) => return Some(instruction.rflags_read() & bits != 0),
            Watch::Reg(r) => r,
        };
        let info = factory.info(instruction);
        Some(info.used_registers().iter().any(|used| {
            let r = used.register();
            matches!(
                used.access(),
                OpAccess::Read | OpAccess::CondRead | OpAccess::ReadWrite | OpAccess::ReadCondWrite
            ) && (r == target || r.full_register() == target || r.full_register32() == target)
        }))
    }

    /// Sizes and classifies x64dbg's recorded memory entries of the instruction at `pc`
    /// (`bytes`) by its operands, as the module documentation says. `regs` is the register
    /// state before the instruction as [`Steps::regs`](crate::steps::Steps::regs) gives it
    /// for an x86 or x64 stream (the general registers in encoding order first). Each
    /// access's `len` must be the recorded word size on entry; matched ones get the operand's
    /// bytes in that word, their kind and `sized = true`; the others are left as they are.
    pub fn annotate(&mut self, pc: u64, bytes: &[u8], regs: &[u64], accesses: &mut [Access]) {
        if accesses.is_empty() {
            return;
        }
        self.last = None;
        let at = lookup(&mut self.slots, &mut self.factory, self.isa, pc, bytes);
        if let Some(slot) = at.and_then(|at| self.slots.get(at)) {
            annotate_decoded(self.isa, &slot.decoded, regs, accesses);
        }
    }

    /// Whether the x86 or x64 instruction at `pc` (`bytes`) is a call or a return
    /// ([`Flow`]), through the decode cache; [`Flow::Other`] when the bytes do not decode or
    /// the instruction set is not x86.
    #[inline]
    pub fn flow(&mut self, pc: u64, bytes: &[u8]) -> Flow {
        if !may_call_or_return(self.isa, bytes) {
            return Flow::Other;
        }
        self.last = None;
        lookup(&mut self.slots, &mut self.factory, self.isa, pc, bytes)
            .and_then(|at| self.slots.get(at))
            .map_or(Flow::Other, |s| s.decoded.flow)
    }

    /// [`Disassembler::annotate`] on a step's own accesses.
    pub fn annotate_step(&mut self, step: &mut Step, regs: &[u64]) {
        let Step {
            pc, opcode, mem, ..
        } = step;
        self.annotate(*pc, opcode, regs, mem);
    }
}

/// [`Disassembler::annotate`] with the instruction decoded.
fn annotate_decoded(isa: Isa, d: &Decoded, regs: &[u64], accesses: &mut [Access]) {
    if accesses.is_empty() {
        return;
    }
    let word = isa.word_size();
    if !d.valid || d.opaque || d.mem.is_empty() {
        return;
    }
    let mask = match isa {
        Isa::X86 => u64::from(u32::MAX),
        _ => u64::MAX,
    };
    // The common case, one operand at a known address: each entry is its or no one's (no
    // other operand can claim it, none is left for an unknown base), as below.
    if let [m] = d.mem.as_slice()
        && let Some(addr) = m.address(regs)
    {
        let addr = addr & mask;
        for access in accesses.iter_mut() {
            if let Some(part) = part_of(addr, m.size, word, access.addr, mask) {
                set(access, part, m.kind);
            }
        }
        return;
    }
    // Each operand's address, `None` where the segment base is unknown.
    let addrs: SmallVec<[Option<u64>; 4]> = d
        .mem
        .iter()
        .map(|m| m.address(regs).map(|a| a & mask))
        .collect();
    let mut matched: SmallVec<[bool; 8]> = SmallVec::from_elem(false, accesses.len());
    for (access, done) in accesses.iter_mut().zip(matched.iter_mut()) {
        let mut found: Option<(u32, AccessKind)> = None;
        let mut conflict = false;
        for (m, addr) in d.mem.iter().zip(&addrs) {
            let Some(part) = addr.and_then(|a| part_of(a, m.size, word, access.addr, mask)) else {
                continue;
            };
            match found {
                None => found = Some((part, m.kind)),
                Some(f) if f == (part, m.kind) => {}
                Some(_) => conflict = true,
            }
        }
        if let (Some((len, kind)), false) = (found, conflict) {
            set(access, len, kind);
            *done = true;
        }
    }
    // An operand whose segment base is unknown takes the entries left over, by order.
    let mut unknown_base = d.mem.iter().zip(&addrs).filter(|(_, a)| a.is_none());
    if let (Some((m, _)), None) = (unknown_base.next(), unknown_base.next()) {
        let left: SmallVec<[usize; 8]> = matched
            .iter()
            .enumerate()
            .filter(|(_, done)| !**done)
            .map(|(k, _)| k)
            .collect();
        let first = left.first().and_then(|&k| accesses.get(k)).map(|a| a.addr);
        let words = m.size.div_ceil(word).max(1);
        let consecutive = first.is_some_and(|first| {
            left.iter().zip(0u64..).all(|(&k, n)| {
                accesses.get(k).map(|a| a.addr)
                    == Some(first.wrapping_add(n.wrapping_mul(u64::from(word))) & mask)
            })
        });
        if m.size > 0 && consecutive && u32::try_from(left.len()).ok() == Some(words) {
            for (&k, n) in left.iter().zip(0u32..) {
                let len = m.size.saturating_sub(n.saturating_mul(word)).min(word);
                if let Some(a) = accesses.get_mut(k) {
                    set(a, len, m.kind);
                }
            }
        }
    }
}

/// Marks `access` as an operand's `len` bytes, read or written as `kind`.
fn set(access: &mut Access, len: u32, kind: AccessKind) {
    access.len = access.len.min(len);
    access.kind = kind;
    access.sized = true;
}

/// How many bytes of an operand of `size` bytes at `operand` the recorded word at `entry`
/// holds, if that word is one x64dbg records for it (`entry = operand + k·word`, within the
/// operand; addresses wrap at `mask`).
fn part_of(operand: u64, size: u32, word: u32, entry: u64, mask: u64) -> Option<u32> {
    let offset = entry.wrapping_sub(operand) & mask;
    if size == 0 || offset >= u64::from(size) || !offset.is_multiple_of(u64::from(word)) {
        return None;
    }
    let offset = u32::try_from(offset).ok()?;
    Some(size.saturating_sub(offset).min(word))
}

/// The text of one instruction, without a cache (see [`Disassembler::asm`]).
#[must_use]
pub fn disassemble(isa: Isa, pc: u64, bytes: &[u8]) -> Option<String> {
    Disassembler::new(isa).asm(pc, bytes).map(str::to_owned)
}

/// Sizes and classifies a step's memory accesses by its instruction's operands, without a
/// cache (see [`Disassembler::annotate`]).
pub fn annotate(isa: Isa, step: &mut Step, regs: &[u64]) {
    Disassembler::new(isa).annotate_step(step, regs);
}

/// Where the state holds an address register or segment base.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum RegRef {
    /// A segment base counted as 0.
    Zero,
    /// `regs[at] & mask` (general registers in encoding order).
    Word { at: usize, mask: u64 },
}

/// Where an address register or segment base is in the state (general registers in
/// encoding order); `None` for what the state does not hold (the TEB base of `gs` on x64,
/// `fs` on x86, registers that are not general ones).
fn reg_ref(isa: Isa, r: Register) -> Option<RegRef> {
    let n = r as usize;
    // iced lists each size's sixteen general registers in encoding order, as x64dbg does.
    let from = |first: Register, mask: u64| {
        let at = n.checked_sub(first as usize).filter(|k| *k < 16)?;
        Some(RegRef::Word { at, mask })
    };
    match r {
        Register::GS if isa == Isa::X64 => None,
        Register::FS if isa == Isa::X86 => None,
        Register::ES | Register::CS | Register::SS | Register::DS | Register::FS | Register::GS => {
            Some(RegRef::Zero)
        }
        _ => from(Register::RAX, u64::MAX)
            .or_else(|| from(Register::EAX, u64::from(u32::MAX)))
            .or_else(|| from(Register::AX, u64::from(u16::MAX))),
    }
}

/// A register or flags whose reads [`Disassembler::reads`] looks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReadWatch(Watch);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Watch {
    Reg(Register),
    /// `RflagsBits`.
    Flags(u32),
}

impl ReadWatch {
    /// The watch for a register as `state` names it: a general, segment, debug or vector
    /// register (`rax`, `eax`, `cs`, `xmm3`), `rflags`/`eflags` (any flag) or one flag
    /// (`flags.c`, `flags.p`, `flags.a`, `flags.z`, `flags.s`, `flags.i`, `flags.d`,
    /// `flags.o`); `None` for other names.
    #[must_use]
    pub fn parse(name: &str) -> Option<ReadWatch> {
        let flags = match name {
            "rflags" | "eflags" => Some(
                RflagsBits::CF
                    | RflagsBits::PF
                    | RflagsBits::AF
                    | RflagsBits::ZF
                    | RflagsBits::SF
                    | RflagsBits::IF
                    | RflagsBits::DF
                    | RflagsBits::OF,
            ),
            "flags.c" => Some(RflagsBits::CF),
            "flags.p" => Some(RflagsBits::PF),
            "flags.a" => Some(RflagsBits::AF),
            "flags.z" => Some(RflagsBits::ZF),
            "flags.s" => Some(RflagsBits::SF),
            "flags.i" => Some(RflagsBits::IF),
            "flags.d" => Some(RflagsBits::DF),
            "flags.o" => Some(RflagsBits::OF),
            _ => None,
        };
        if let Some(bits) = flags {
            return Some(ReadWatch(Watch::Flags(bits)));
        }
        Register::values()
            .find(|&r| r != Register::None && format!("{r:?}").eq_ignore_ascii_case(name))
            .map(|r| ReadWatch(Watch::Reg(r)))
    }
}

/// The slot of `(pc, bytes)`, decoding on a miss; `None` for an instruction set without x86
/// decoding.
fn lookup(
    slots: &mut [Slot],
    factory: &mut InstructionInfoFactory,
    isa: Isa,
    pc: u64,
    bytes: &[u8],
) -> Option<usize> {
    let bitness = match isa {
        Isa::X64 => 64,
        Isa::X86 => 32,
        _ => return None,
    };
    let bytes = bytes.get(..bytes.len().min(MAX_X86_LEN))?;
    let hash = pc.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 54;
    let at = usize::try_from(hash).ok()? & CACHE_SLOTS.wrapping_sub(1);
    let slot = slots.get_mut(at)?;
    let len = u8::try_from(bytes.len()).ok()?;
    if slot.len == len && slot.pc == pc && slot.bytes.get(..bytes.len()) == Some(bytes) {
        return Some(at);
    }
    slot.pc = pc;
    slot.len = len;
    slot.bytes.get_mut(..bytes.len())?.copy_from_slice(bytes);
    decode(&mut slot.decoded, factory, isa, bitness, pc, bytes);
    Some(at)
}

/// Decodes one instruction into `d`, with its memory operands.
fn decode(
    d: &mut Decoded,
    factory: &mut InstructionInfoFactory,
    isa: Isa,
    bitness: u32,
    pc: u64,
    bytes: &[u8],
) {
    let mut decoder = Decoder::with_ip(bitness, bytes, pc, DecoderOptions::NONE);
    let instruction = decoder.decode();
    d.instruction = instruction;
    d.valid = !instruction.is_invalid();
    d.flow = flow_of(&instruction);
    d.formatted = false;
    d.mem.clear();
    d.opaque = instruction.is_string_instruction();
    if !d.valid || d.opaque {
        return;
    }
    let info = factory.info_options(&instruction, InstructionInfoOptions::NO_REGISTER_USAGE);
    for used in info.used_memory() {
        let kind = match used.access() {
            OpAccess::Read | OpAccess::CondRead => AccessKind::Read,
            OpAccess::Write | OpAccess::CondWrite => AccessKind::Write,
            OpAccess::ReadWrite | OpAccess::ReadCondWrite => AccessKind::ReadWrite,
            // `lea`, `nop [mem]`, prefetches: no access, and x64dbg records none.
            _ => continue,
        };
        if used.vsib_size() != 0 || used.index().is_vector_register() {
            d.opaque = true;
        }
        let size = u32::try_from(used.memory_size().size()).unwrap_or(0);
        d.mem.push(MemOperand {
            displacement: used.displacement(),
            base: Part::of(isa, used.base()),
            index: Part::of(isa, used.index()),
            scale: u64::from(used.scale()),
            address_mask: match used.address_size() {
                CodeSize::Code16 => u64::from(u16::MAX),
                CodeSize::Code32 => u64::from(u32::MAX),
                _ => u64::MAX,
            },
            unknown_base: used.segment() != Register::None
                && reg_ref(isa, used.segment()).is_none(),
            size,
            kind,
        });
    }
}

/// Whether `bytes` can be a call or a return at all: after the legacy prefixes (and on x64
/// a REX byte), the opcode byte of every `call` and `ret` encoding is `e8`, `ff` (`/2`,
/// `/3`), `9a`, `c2`, `c3`, `ca` or `cb` (VEX and EVEX encode neither). Most instructions
/// are thus told apart without a cache lookup.
#[inline]
fn may_call_or_return(isa: Isa, bytes: &[u8]) -> bool {
    let x64 = isa == Isa::X64;
    for &b in bytes.iter().take(MAX_X86_LEN) {
        match b {
            0x66 | 0x67 | 0xf0 | 0xf2 | 0xf3 | 0x2e | 0x36 | 0x3e | 0x26 | 0x64 | 0x65 => {}
            0x40..=0x4f if x64 => {}
            0xe8 | 0xff | 0x9a | 0xc2 | 0xc3 | 0xca | 0xcb => return true,
            _ => return false,
        }
    }
    false
}

/// The [`Flow`] of a decoded instruction.
fn flow_of(ins: &Instruction) -> Flow {
    if ins.is_invalid() {
        return Flow::Other;
    }
    if ins.is_call_near()
        || ins.is_call_near_indirect()
        || ins.is_call_far()
        || ins.is_call_far_indirect()
    {
        return Flow::Call {
            len: u8::try_from(ins.len()).unwrap_or(u8::MAX),
            target: ins.is_call_near().then(|| ins.near_branch_target()),
        };
    }
    match ins.mnemonic() {
        Mnemonic::Ret | Mnemonic::Retf => Flow::Return,
        _ => Flow::Other,
    }
}

/// PowerPC text from the amber crate's mnemonics, with operands for the common forms.
mod ppc {
    use std::fmt::Write;

    use amber_tt6::opcode::{self, Access};

    /// Bits `from..=to` of `word`, IBM numbering (bit 0 the most significant).
    fn field(word: u32, from: u32, to: u32) -> u32 {
        let width = to.saturating_sub(from).saturating_add(1);
        let shift = 31u32.saturating_sub(to);
        (word >> shift) & (u32::MAX >> 32u32.saturating_sub(width))
    }

    /// A 16-bit signed immediate as text.
    fn simm(word: u32) -> i32 {
        i32::from((word & 0xFFFF) as u16 as i16)
    }

    /// The register-file prefix of a load or store mnemonic's data register.
    fn data_reg(mnemonic: &str) -> &'static str {
        if mnemonic.starts_with("lf") || mnemonic.starts_with("stf") {
            "f"
        } else if mnemonic.starts_with("lv") || mnemonic.starts_with("stv") {
            "v"
        } else {
            "r"
        }
    }

    /// Writes the text of `word` at `pc` to `out`; `false` when the crate has no mnemonic
    /// for it.
    pub(super) fn format(pc: u64, word: u32, out: &mut String) -> bool {
        let Some(m) = opcode::mnemonic(word) else {
            return false;
        };
        let (rt, ra, rb) = (field(word, 6, 10), field(word, 11, 15), field(word, 16, 20));
        let major = opcode::major(word);
        // Branch targets: pc-relative unless AA, in the 32-bit address space.
        let target = |disp: i64| {
            let base = if word & 2 == 0 { pc } else { 0 };
            base.wrapping_add_signed(disp) & u64::from(u32::MAX)
        };
        // Writing to a String cannot fail.
        let _ = match major {
            18 => {
                // LI: 24 bits, sign-extended, times 4.
                let li = i64::from(((word & 0x03FF_FFFC) << 6).cast_signed() >> 6);
                write!(out, "{m} {:#x}", target(li))
            }
            16 => {
                let bd = i64::from((word & 0xFFFC) as u16 as i16);
                write!(out, "{m} {rt}, {ra}, {:#x}", target(bd))
            }
            19 if matches!(m, "bclr" | "bclrl" | "bcctr" | "bcctrl") => {
                write!(out, "{m} {rt}, {ra}")
            }
            14 | 15 => write!(out, "{m} r{rt}, r{ra}, {}", simm(word)),
            // D-form loads and stores (and DS-form ld/std, whose low 2 bits are the form).
            32..=55 | 58 | 62 => {
                let disp = if matches!(major, 58 | 62) {
                    simm(word & !3)
                } else {
                    simm(word)
                };
                write!(out, "{m} {}{rt}, {disp}(r{ra})", data_reg(m))
            }
            31 if matches!(
                opcode::info(word).and_then(|i| i.access),
                Some(Access::Load | Access::Store)
            ) =>
            {
                write!(out, "{m} {}{rt}, r{ra}, r{rb}", data_reg(m))
            }
            _ => write!(out, "{m}"),
        };
        true
    }
}

#[cfg(test)]
#[allow(clippy::indexing_slicing, clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn register_reads_come_from_the_operands() {
        let mut d = Disassembler::new(Isa::X64);
        let w = |n: &str| ReadWatch::parse(n).unwrap();
        // mov rax, rbx: reads rbx, writes rax.
        let mov = [0x48, 0x89, 0xd8];
        assert_eq!(d.reads(0x1000, &mov, w("rbx")), Some(true));
        assert_eq!(d.reads(0x1000, &mov, w("rax")), Some(false));
        // add eax, 1: reads rax through eax, and no flag.
        let add = [0x83, 0xc0, 0x01];
        assert_eq!(d.reads(0x1000, &add, w("rax")), Some(true));
        assert_eq!(d.reads(0x1000, &add, w("rflags")), Some(false));
        // jz: reads the zero flag only.
        let jz = [0x74, 0x00];
        assert_eq!(d.reads(0x1000, &jz, w("flags.z")), Some(true));
        assert_eq!(d.reads(0x1000, &jz, w("flags.c")), Some(false));
        assert_eq!(d.reads(0x1000, &jz, w("rflags")), Some(true));
        // push rax: reads rax and rsp.
        assert_eq!(d.reads(0x1000, &[0x50], w("rsp")), Some(true));
        assert_eq!(d.reads(0x1000, &[0x0f, 0xff], w("rax")), None);
        assert_eq!(ReadWatch::parse("lastError"), None);
        assert_eq!(ReadWatch::parse("gs|fs|es|ds"), None);
        let mut d32 = Disassembler::new(Isa::X86);
        // mov eax, ebx in 32-bit code.
        assert_eq!(
            d32.reads(0x1000, &[0x89, 0xd8], ReadWatch::parse("ebx").unwrap()),
            Some(true)
        );
    }

    const PC: u64 = 0x7ff6_a1b2_1000;

    /// Calls (near, far, direct, indirect) and returns (`ret`, `ret imm16`, `retf`) are told
    /// apart from `syscall`, `iret`, jumps and the rest; a direct call gives its target.
    #[test]
    fn flow_tells_calls_and_returns() {
        let mut d = Disassembler::new(Isa::X64);
        let call = |len, target| Flow::Call { len, target };
        assert_eq!(
            d.flow(0x1000, &[0xe8, 0xfb, 0x0f, 0, 0]),
            call(5, Some(0x2000))
        );
        assert_eq!(d.flow(0x1000, &[0xff, 0xd0]), call(2, None)); // call rax
        assert_eq!(d.flow(0x1000, &[0xff, 0x15, 0, 0, 0, 0]), call(6, None));
        assert_eq!(d.flow(0x1000, &[0x41, 0xff, 0xd3]), call(3, None)); // call r11
        assert_eq!(d.flow(0x1000, &[0xff, 0x18]), call(2, None)); // call far [rax]
        assert_eq!(d.flow(0x1000, &[0xc3]), Flow::Return);
        assert_eq!(d.flow(0x1000, &[0xc2, 0x10, 0x00]), Flow::Return);
        assert_eq!(d.flow(0x1000, &[0x48, 0xcb]), Flow::Return); // retfq
        assert_eq!(d.flow(0x1000, &[0x0f, 0x05]), Flow::Other); // syscall
        assert_eq!(d.flow(0x1000, &[0x48, 0xcf]), Flow::Other); // iretq
        assert_eq!(d.flow(0x1000, &[0xeb, 0xfe]), Flow::Other);
        assert_eq!(d.flow(0x1000, &[0x06]), Flow::Other); // invalid in 64-bit mode
        assert_eq!(
            Disassembler::new(Isa::Ppc32).flow(0x1000, &[0xc3]),
            Flow::Other
        );
        let mut d32 = Disassembler::new(Isa::X86);
        assert_eq!(
            d32.flow(0x40_1000, &[0x9a, 0, 0x20, 0, 0, 0x23, 0]),
            call(7, None)
        );
    }

    fn x64(bytes: &[u8]) -> String {
        disassemble(Isa::X64, PC, bytes).unwrap()
    }

    /// Intel syntax, lowercase, sizes spelled out, hex as `0x…`, targets absolute.
    #[test]
    fn known_encodings() {
        assert_eq!(
            x64(&[0x48, 0x8b, 0x44, 0x24, 0x08]),
            "mov rax, qword ptr [rsp+8]"
        );
        assert_eq!(
            x64(&[0x48, 0x89, 0x44, 0x24, 0x10]),
            "mov qword ptr [rsp+0x10], rax"
        );
        assert_eq!(x64(&[0x48, 0x89, 0x03]), "mov qword ptr [rbx], rax");
        assert_eq!(x64(&[0x01, 0x08]), "add dword ptr [rax], ecx");
        // RIP-relative: next ip (PC + 7) + 0x1000.
        assert_eq!(
            x64(&[0x48, 0x8d, 0x05, 0x00, 0x10, 0x00, 0x00]),
            "lea rax, [0x7ff6a1b22007]"
        );
        assert_eq!(x64(&[0xe8, 0xfb, 0x0f, 0x00, 0x00]), "call 0x7ff6a1b22000");
        assert_eq!(x64(&[0xeb, 0xfe]), "jmp 0x7ff6a1b21000");
        assert_eq!(x64(&[0x74, 0x10]), "je 0x7ff6a1b21012");
        assert_eq!(
            x64(&[0xff, 0x15, 0x00, 0x00, 0x00, 0x00]),
            "call qword ptr [0x7ff6a1b21006]"
        );
        assert_eq!(x64(&[0x41, 0x56]), "push r14");
        assert_eq!(x64(&[0x5b]), "pop rbx");
        assert_eq!(
            x64(&[0xf3, 0xa4]),
            "rep movsb byte ptr [rdi], byte ptr [rsi]"
        );
        assert_eq!(
            x64(&[0x66, 0x0f, 0x7f, 0x44, 0x24, 0x10]),
            "movdqa xmmword ptr [rsp+0x10], xmm0"
        );
        assert_eq!(
            x64(&[0x65, 0x48, 0x8b, 0x04, 0x25, 0x30, 0x00, 0x00, 0x00]),
            "mov rax, qword ptr gs:[0x30]"
        );
        assert_eq!(x64(&[0xc3]), "ret");
        // 32-bit mode: the same bytes mean something else.
        let x86 = |b: &[u8]| disassemble(Isa::X86, 0x40_1000, b).unwrap();
        assert_eq!(x86(&[0x8b, 0x44, 0x24, 0x08]), "mov eax, dword ptr [esp+8]");
        assert_eq!(x86(&[0x48]), "dec eax");
        assert_eq!(x86(&[0xe8, 0xfb, 0x0f, 0x00, 0x00]), "call 0x402000");
        // Extra bytes after the instruction are ignored; invalid or cut bytes are `None`.
        assert_eq!(x64(&[0x90, 0xcc, 0xcc]), "nop");
        assert_eq!(disassemble(Isa::X64, PC, &[0x48, 0x8b]), None);
        assert_eq!(disassemble(Isa::X64, PC, &[0x06]), None);
        assert_eq!(disassemble(Isa::X64, PC, &[]), None);
        assert_eq!(disassemble(Isa::Other, PC, &[0x90]), None);
    }

    /// The cache gives the same text for the same key and new text for a new key in the
    /// same slot (same pc, other bytes).
    #[test]
    fn cache_is_keyed_by_pc_and_bytes() {
        let mut d = Disassembler::new(Isa::X64);
        assert_eq!(d.asm(PC, &[0x90]), Some("nop"));
        assert_eq!(d.asm(PC, &[0xc3]), Some("ret"));
        assert_eq!(d.asm(PC, &[0x90]), Some("nop"));
        // More pcs than slots: a colliding pc replaces a slot's entry, never mixes with it.
        for k in 0..4096u64 {
            let pc = PC.wrapping_add(k * 0x40);
            assert_eq!(
                d.asm(pc, &[0xeb, 0xfe]).map(str::to_owned),
                Some(format!("jmp {pc:#x}"))
            );
        }
    }

    fn access(addr: u64, word: u32) -> Access {
        Access {
            addr,
            len: word,
            ..Access::default()
        }
    }

    fn kinds(a: &[Access]) -> Vec<(u32, AccessKind, bool)> {
        a.iter().map(|a| (a.len, a.kind, a.sized)).collect()
    }

    /// Operands match the recorded words by address; wide operands span several words.
    #[test]
    fn matching_rules() {
        use AccessKind::*;
        let mut regs = vec![0u64; 18];
        regs[0] = 0x1000; // rax
        regs[4] = 0x14_fe00; // rsp
        regs[6] = 0x2000; // rsi
        regs[7] = 0x3000; // rdi
        let mut d = Disassembler::new(Isa::X64);
        let mut run = |bytes: &[u8], addrs: &[u64]| {
            let mut a: Vec<Access> = addrs.iter().map(|&x| access(x, 8)).collect();
            d.annotate(PC, bytes, &regs, &mut a);
            kinds(&a)
        };
        // movdqa [rsp+0x10], xmm0: two words of 8.
        assert_eq!(
            run(
                &[0x66, 0x0f, 0x7f, 0x44, 0x24, 0x10],
                &[0x14_fe10, 0x14_fe18]
            ),
            [(8, Write, true), (8, Write, true)]
        );
        // A word no operand explains stays unknown.
        assert_eq!(run(&[0x48, 0x89, 0x03], &[0x1000]), [(8, Unknown, false)]);
        // push: [rsp-8]; pop: [rsp].
        assert_eq!(run(&[0x53], &[0x14_fdf8]), [(8, Write, true)]);
        assert_eq!(run(&[0x5b], &[0x14_fe00]), [(8, Read, true)]);
        // call qword ptr [rip]: the pointer read and the return address pushed.
        assert_eq!(
            run(&[0xff, 0x15, 0, 0, 0, 0], &[PC + 6, 0x14_fdf8]),
            [(8, Read, true), (8, Write, true)]
        );
        // 2-byte fnstcw: one word, 2 bytes of it.
        assert_eq!(run(&[0xd9, 0x38], &[0x1000]), [(2, Write, true)]);
        // rep movsb and cmpsb: unknown.
        assert_eq!(
            run(&[0xf3, 0xa4], &[0x2000, 0x3000]),
            [(8, Unknown, false); 2]
        );
        assert_eq!(run(&[0xa6], &[0x2000, 0x3000]), [(8, Unknown, false); 2]);
        // lea: no access, so a stray word stays unknown.
        assert_eq!(
            run(&[0x48, 0x8d, 0x40, 0x08], &[0x1008]),
            [(8, Unknown, false)]
        );
        // gs: the TEB base is unknown: matched by order.
        let gs = [0x65, 0x48, 0x8b, 0x04, 0x25, 0x30, 0, 0, 0];
        assert_eq!(run(&gs, &[0x7ff_0030]), [(8, Read, true)]);
        assert_eq!(
            run(&gs, &[0x7ff_0030, 0x7ff_0040]),
            [(8, Unknown, false); 2]
        );
        // An undecodable instruction leaves every entry.
        assert_eq!(run(&[0x06], &[0x1000]), [(8, Unknown, false)]);
        // 32-bit: an 8-byte operand is two words of 4; addresses wrap at 32 bits.
        let mut regs32 = vec![0u64; 10];
        regs32[0] = 0xffff_fffc; // eax
        let mut a = vec![access(0xffff_fffc, 4), access(0, 4)];
        // movq xmm0, qword ptr [eax] (f3 0f 7e 00)
        Disassembler::new(Isa::X86).annotate(0x40_1000, &[0xf3, 0x0f, 0x7e, 0x00], &regs32, &mut a);
        assert_eq!(kinds(&a), [(4, Read, true), (4, Read, true)]);
    }

    #[test]
    fn powerpc_text() {
        let ppc = |pc: u64, w: u32| disassemble(Isa::Ppc32, pc, &w.to_be_bytes());
        assert_eq!(ppc(0x1000, 0x8061_0008).as_deref(), Some("lwz r3, 8(r1)"));
        assert_eq!(
            ppc(0x1000, 0x9421_FFF0).as_deref(),
            Some("stwu r1, -16(r1)")
        );
        assert_eq!(ppc(0x1000, 0x4800_0010).as_deref(), Some("b 0x1010"));
        assert_eq!(ppc(0x1000, 0x4BFF_FFF1).as_deref(), Some("bl 0xff0"));
        assert_eq!(ppc(0x1000, 0x4E80_0020).as_deref(), Some("bclr 20, 0"));
        assert_eq!(ppc(0x1000, 0x3861_0010).as_deref(), Some("addi r3, r1, 16"));
        assert_eq!(ppc(0x1000, 0x7C64_282E).as_deref(), Some("lwzx r3, r4, r5"));
        assert_eq!(ppc(0x1000, 0xC821_0008).as_deref(), Some("lfd f1, 8(r1)"));
        assert_eq!(ppc(0x1000, 0x6000_0000).as_deref(), Some("nop"));
        assert_eq!(ppc(0x1000, 0).as_deref(), None);
    }
}
