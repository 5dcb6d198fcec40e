//! `calls`: the call tree of any x86/x64 instruction stream (x64dbg, Tenet, GDB tracepoint
//! frames), in one pass over its steps, with the general registers read only at entries
//! and returns ([`RegsWanted::General`], through [`Registers::walk_steps`](trace_model::steps::Registers::walk_steps)).
//!
//! # The rules
//!
//! - A `call` (near or far; not `syscall`) opens a frame in its thread; its `depth` is the
//!   number of frames open in that thread before it. The thread's next instruction is the
//!   frame's entry (`entry_i`, and `target` its pc); the return address is the call's pc
//!   plus its length.
//! - A `ret`/`retf` is matched when its thread's next instruction arrives: the innermost
//!   open frame whose return address equals that pc closes, with `ret_i` the ret's step;
//!   the frames inside it close with it, marked `unwound` (longjmp, exceptions). A ret that
//!   matches no open frame (one entered before the trace began) closes nothing and is
//!   counted ([`Summary::unmatched_returns`]); a ret that is its thread's last step is
//!   neither.
//! - Frames still open at the end have no `ret_i`.
//!
//! Calls and returns are told by the instruction's bytes (the registry's decoder:
//! [`Flow`]). A stream whose steps carry no bytes (Tenet) has them inferred from the stack
//! instead: a call is a step that writes a word at `sp - word` holding an address 1 to 15
//! bytes past its pc (the return address, so the length) when the thread's next pc is
//! elsewhere; a return, a step that reads the word at `sp` when the thread's next pc is the
//! value read.
//!
//! Arguments are read at the entry by the [`Abi`] (the default from the stream's
//! instruction set and [`Steps::os`]); the return value is `rax`/`eax` before the thread's
//! step after the ret. Each instruction also counts towards its thread's stack at that
//! moment ([`Stacks`]): the folded stacks of a flame graph, whose counts sum to the
//! instructions walked.
//!
//! The calls come out in the order of their steps: a call is handed out once it and every
//! call before it has closed, so the calls inside a frame still open are held in memory
//! (about 150 bytes each) until it closes or the trace ends.
//!
//! ```
//! use trace_analyses::calls::{CallsOptions, calls};
//! use trace_registry::{Ctx, Input, Options};
//!
//! let mut input = Input::open("../../testdata/tenet/basic.log".as_ref())?;
//! let handler = trace_registry::detect(&input).expect("a Tenet trace");
//! let options = Options::default();
//! let mut rows = Vec::new();
//! let done = calls(handler, &mut input, &mut Ctx::new(&options), &CallsOptions::default(), &mut |c| {
//!     rows.push(c.to_json());
//!     Ok(())
//! })?;
//! // `call 0x402000` at 0x401009 (step 3) returns from 0x402000 (step 4) to 0x40100e.
//! assert_eq!(done.summary.calls, 1);
//! assert!(rows[0].starts_with(r#"{"i":3,"thread":0,"depth":0,"target":"0x402000","return_address":"0x40100e","entry_i":4,"ret_i":4,"#));
//! # Ok::<(), trace_registry::Error>(())
//! ```

use std::collections::{HashMap, VecDeque};
use std::fmt::Write as _;
use std::sync::Arc;

use smallvec::SmallVec;
use trace_model::schema::{Field, Row, Schema, Type, Visitor};
use trace_model::steps::{Isa, Os, RegsWanted, Step, Steps};
use trace_model::{Ctx, Error, Handler, Input};
use trace_registry::disasm::{Disassembler, Flow};

use crate::symbols::Symbols;

/// The calling convention the arguments are read by.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Abi {
    /// Windows x64: `rcx`, `rdx`, `r8`, `r9` (the default for Windows x64 streams).
    Win64,
    /// System V AMD64: `rdi`, `rsi`, `rdx`, `rcx` (the default for other x64 streams).
    Sysv,
    /// 32-bit cdecl: the four dwords above the return address (the default for x86).
    Cdecl,
}

impl Abi {
    /// The names `--abi` takes, in the order of the variants.
    pub const NAMES: [&'static str; 3] = ["win64", "sysv", "cdecl"];

    /// The ABI named `name` (`win64`, `sysv`, `cdecl`).
    #[must_use]
    pub fn parse(name: &str) -> Option<Abi> {
        match name {
            "win64" => Some(Abi::Win64),
            "sysv" => Some(Abi::Sysv),
            "cdecl" => Some(Abi::Cdecl),
            _ => None,
        }
    }

    /// Its name.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Abi::Win64 => "win64",
            Abi::Sysv => "sysv",
            Abi::Cdecl => "cdecl",
        }
    }

    /// The default for a stream of `isa` from a program on `os`: cdecl for x86, win64 for
    /// Windows x64, sysv for other x64.
    #[must_use]
    pub fn default_for(isa: Isa, os: Os) -> Abi {
        match (isa, os) {
            (Isa::X86, _) => Abi::Cdecl,
            (_, Os::Windows) => Abi::Win64,
            _ => Abi::Sysv,
        }
    }

    /// The registers of the first four integer arguments (none for cdecl).
    fn arg_regs(self) -> &'static [&'static str] {
        match self {
            Abi::Win64 => &["rcx", "rdx", "r8", "r9"],
            Abi::Sysv => &["rdi", "rsi", "rdx", "rcx"],
            Abi::Cdecl => &[],
        }
    }
}

/// What [`calls`] is asked.
#[derive(Clone, Copy, Debug, Default)]
pub struct CallsOptions<'a> {
    /// The calling convention; `None`: [`Abi::default_for`] the stream.
    pub abi: Option<Abi>,
    /// Only this thread's calls (and stacks).
    pub thread: Option<u64>,
    /// The symbols frames are named by.
    pub symbols: Option<&'a Symbols>,
}

/// One call: `{"i":…,"thread":…,"depth":…,"target":"0x…","return_address":"0x…",
/// "entry_i":…,"ret_i":…,"unwound":false,"args":["0x…",…],"ret":"0x…","instructions":…,
/// "symbol":…}` in JSON ([`Call::to_json`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Call {
    /// The step of the call instruction.
    pub i: u64,
    /// Its thread.
    pub thread: u64,
    /// The frames open in the thread before it.
    pub depth: u32,
    /// The pc of the entry (for a call that is its thread's last step, a direct call's
    /// target; else `None`).
    pub target: Option<u64>,
    /// The call's pc plus its length.
    pub return_address: u64,
    /// The thread's next step: the entry.
    pub entry_i: Option<u64>,
    /// The step of the ret that closed the frame; `None` when open at the end.
    pub ret_i: Option<u64>,
    /// Closed by a ret that matched a frame outside it.
    pub unwound: bool,
    /// The first four integer arguments at the entry; `None` where unknown.
    pub args: [Option<u64>; 4],
    /// `rax`/`eax` before the thread's step after the matching ret.
    pub ret: Option<u64>,
    /// The thread's steps from the entry through the ret (or the end).
    pub instructions: u64,
    /// The target's symbol (`name`, `name+0xOFF`, or `0x<target>` where none covers it)
    /// when [`CallsOptions::symbols`] were given; without them `None`, and
    /// [`Call::name`] (and the JSON) says `0x<target>`.
    pub symbol: Option<String>,
}

/// The `calls` table (`tracekit export --calls`, Python's `to_arrow("calls")`): one row per
/// [`Call`], its fields as columns (`arg0`…`arg3` for `args`, `symbol` as
/// [`Call::name`]); `i` is the call's step, so it joins `instructions` on `i`.
#[must_use]
pub fn table() -> Arc<Schema> {
    let addr = |name: &'static str| Field::hex(name, 64).nullable();
    let step = |name: &'static str| Field::new(name, Type::UInt(64)).nullable();
    Arc::new(Schema::new(
        "calls",
        vec![
            Field::new("i", Type::UInt(64)).key(),
            Field::new("thread", Type::UInt(64)),
            Field::new("depth", Type::UInt(32)),
            addr("target"),
            Field::hex("return_address", 64),
            step("entry_i"),
            step("ret_i"),
            Field::new("unwound", Type::Bool),
            addr("arg0"),
            addr("arg1"),
            addr("arg2"),
            addr("arg3"),
            addr("ret"),
            Field::new("instructions", Type::UInt(64)),
            Field::new("symbol", Type::Str).nullable(),
        ],
    ))
}

impl Row for Call {
    fn visit(&self, v: &mut dyn Visitor) {
        let uint_or_null = |v: &mut dyn Visitor, x: Option<u64>| match x {
            Some(x) => v.uint(x),
            None => v.null(),
        };
        v.uint(self.i);
        v.uint(self.thread);
        v.uint(u64::from(self.depth));
        uint_or_null(v, self.target);
        v.uint(self.return_address);
        uint_or_null(v, self.entry_i);
        uint_or_null(v, self.ret_i);
        v.bool(self.unwound);
        for a in self.args {
            uint_or_null(v, a);
        }
        uint_or_null(v, self.ret);
        v.uint(self.instructions);
        match self.name() {
            Some(name) => v.str(&name),
            None => v.null(),
        }
    }
}

fn hex_or_null(out: &mut String, v: Option<u64>) {
    match v {
        Some(v) => {
            let _ = write!(out, "\"{v:#x}\"");
        }
        None => out.push_str("null"),
    }
}

fn num_or_null(out: &mut String, v: Option<u64>) {
    match v {
        Some(v) => {
            let _ = write!(out, "{v}");
        }
        None => out.push_str("null"),
    }
}

impl Call {
    /// What the call's `symbol` is in the JSON: its symbol, else `0x<target>`; `None`
    /// when the target is unknown.
    #[must_use]
    pub fn name(&self) -> Option<String> {
        self.symbol
            .clone()
            .or_else(|| self.target.map(|t| format!("{t:#x}")))
    }

    /// The JSON line `tracekit calls --json` prints.
    #[must_use]
    pub fn to_json(&self) -> String {
        let mut s = String::with_capacity(256);
        let _ = write!(
            s,
            "{{\"i\":{},\"thread\":{},\"depth\":{},\"target\":",
            self.i, self.thread, self.depth
        );
        hex_or_null(&mut s, self.target);
        let _ = write!(
            s,
            ",\"return_address\":\"{:#x}\",\"entry_i\":",
            self.return_address
        );
        num_or_null(&mut s, self.entry_i);
        s.push_str(",\"ret_i\":");
        num_or_null(&mut s, self.ret_i);
        let _ = write!(s, ",\"unwound\":{},\"args\":[", self.unwound);
        for (k, a) in self.args.iter().enumerate() {
            if k > 0 {
                s.push(',');
            }
            hex_or_null(&mut s, *a);
        }
        s.push_str("],\"ret\":");
        hex_or_null(&mut s, self.ret);
        let _ = write!(s, ",\"instructions\":{},\"symbol\":", self.instructions);
        match (&self.symbol, self.target) {
            (Some(name), _) => s.push_str(&serde_json::to_string(name).unwrap_or_default()),
            (None, Some(t)) => {
                let _ = write!(s, "\"{t:#x}\"");
            }
            (None, None) => s.push_str("null"),
        }
        s.push('}');
        s
    }

    /// The line of the text tree: step and thread, then the symbol indented by depth, its
    /// arguments, return value and extent.
    #[must_use]
    pub fn to_text(&self) -> String {
        let mut s = String::with_capacity(128);
        let _ = write!(s, "{:>9} {:>6}  ", self.i, self.thread);
        for _ in 0..self.depth.min(256) {
            s.push_str("  ");
        }
        s.push_str(self.name().as_deref().unwrap_or("?"));
        s.push('(');
        for (k, a) in self.args.iter().enumerate() {
            if k > 0 {
                s.push_str(", ");
            }
            match a {
                Some(v) => {
                    let _ = write!(s, "{v:#x}");
                }
                None => s.push('?'),
            }
        }
        s.push(')');
        match (self.ret_i, self.unwound, self.ret) {
            (None, _, _) => {
                let _ = write!(s, "  [{} instructions, open at the end]", self.instructions);
            }
            (Some(r), true, _) => {
                let _ = write!(s, "  [{} instructions, unwound at {r}]", self.instructions);
            }
            (Some(r), false, ret) => {
                s.push_str(" -> ");
                match ret {
                    Some(v) => {
                        let _ = write!(s, "{v:#x}");
                    }
                    None => s.push('?'),
                }
                let _ = write!(s, "  [{} instructions, ret at {r}]", self.instructions);
            }
        }
        s
    }
}

/// The totals: `{"summary":{"calls":…,"deepest":…,"unmatched_returns":…,"open_at_end":…}}`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Summary {
    /// The calls (of the thread asked for, or all).
    pub calls: u64,
    /// The largest `depth` of a call; `None` without calls.
    pub deepest: Option<u32>,
    /// Returns that matched no open frame.
    pub unmatched_returns: u64,
    /// Frames open at the end.
    pub open_at_end: u64,
    /// The instructions walked (of the thread asked for, or all): what the folded
    /// stacks' counts sum to.
    pub instructions: u64,
}

impl Summary {
    /// The summary JSON line.
    #[must_use]
    pub fn to_json(&self) -> String {
        let mut s = format!("{{\"summary\":{{\"calls\":{},\"deepest\":", self.calls);
        num_or_null(&mut s, self.deepest.map(u64::from));
        let _ = write!(
            s,
            ",\"unmatched_returns\":{},\"open_at_end\":{}}}}}",
            self.unmatched_returns, self.open_at_end
        );
        s
    }

    /// The summary line of the text output.
    #[must_use]
    pub fn to_text(&self) -> String {
        let deepest = self
            .deepest
            .map_or_else(|| "-".to_owned(), |d| d.to_string());
        format!(
            "{} calls, deepest depth {deepest}, {} unmatched returns, {} open at the end ({} instructions)",
            self.calls, self.unmatched_returns, self.open_at_end, self.instructions
        )
    }
}

/// A node of the stack trie: a frame (its target) under its parent, or a thread's root.
#[derive(Clone, Copy, Debug)]
struct Node {
    /// `ROOT` for a thread's root (whose `target` is then the thread).
    parent: u32,
    target: u64,
    /// The instructions executed with exactly this stack.
    count: u64,
    /// The child last entered (`ROOT`: none), tried before the map: loops enter the
    /// same callee again and again.
    last: u32,
}

const ROOT: u32 = u32::MAX;

/// The stacks each instruction ran with: per thread, a trie of frames (by target) with the
/// instructions executed with exactly that stack.
#[derive(Clone, Debug, Default)]
pub struct Stacks {
    nodes: Vec<Node>,
    children: HashMap<(u32, u64), u32>,
}

impl Stacks {
    fn node(&mut self, parent: u32, target: u64) -> u32 {
        let last = self.nodes.get(parent as usize).map_or(ROOT, |p| p.last);
        if self
            .nodes
            .get(last as usize)
            .is_some_and(|c| c.target == target)
        {
            return last;
        }
        if let Some(&n) = self.children.get(&(parent, target)) {
            if let Some(p) = self.nodes.get_mut(parent as usize) {
                p.last = n;
            }
            return n;
        }
        let n = u32::try_from(self.nodes.len()).unwrap_or(ROOT.saturating_sub(1));
        self.nodes.push(Node {
            parent,
            target,
            count: 0,
            last: ROOT,
        });
        self.children.insert((parent, target), n);
        if let Some(p) = self.nodes.get_mut(parent as usize) {
            p.last = n;
        }
        n
    }

    /// The folded stacks (`thread T;frame;frame count`), one per distinct stack with a
    /// count, sorted: the root of each is `thread T`, its frames named by `symbols` (or
    /// `0x<target>`), `;` in names replaced by `:`.
    #[must_use]
    pub fn folded(&self, symbols: Option<&Symbols>) -> Vec<(String, u64)> {
        let name = |target: u64| -> String {
            let s = match symbols {
                Some(sym) => sym.name(target),
                None => format!("{target:#x}"),
            };
            s.replace(';', ":")
        };
        let mut names: Vec<Option<String>> = vec![None; self.nodes.len()];
        let mut lines: Vec<(String, u64)> = Vec::new();
        for (k, n) in self.nodes.iter().enumerate() {
            if n.count == 0 {
                continue;
            }
            let mut path: Vec<usize> = Vec::new();
            let mut at = k;
            loop {
                path.push(at);
                match self.nodes.get(at) {
                    Some(node) if node.parent != ROOT => at = node.parent as usize,
                    _ => break,
                }
            }
            let mut line = String::new();
            for (d, &p) in path.iter().rev().enumerate() {
                let Some(node) = self.nodes.get(p) else {
                    continue;
                };
                if d > 0 {
                    line.push(';');
                }
                if node.parent == ROOT {
                    let _ = write!(line, "thread {}", node.target);
                } else if let Some(slot) = names.get_mut(p) {
                    line.push_str(slot.get_or_insert_with(|| name(node.target)));
                }
            }
            lines.push((line, n.count));
        }
        lines.sort();
        lines
    }
}

/// What [`calls`] found besides the calls.
#[derive(Clone, Debug, Default)]
pub struct Done {
    /// The totals.
    pub summary: Summary,
    /// The stacks, for folded output and flame graphs.
    pub stacks: Stacks,
}

/// An open frame of a thread.
#[derive(Clone, Copy, Debug)]
struct Open {
    /// The call's sequence number in the buffer.
    seq: u64,
    return_address: u64,
    /// The thread's step number of the entry.
    entry_n: u64,
    /// The stack node before the call.
    outer: u32,
}

/// What a thread's last step left for its next one to decide.
#[derive(Clone, Copy, Debug, Default)]
enum Pending {
    #[default]
    None,
    /// A call (`seq` in the buffer); `inferred`: confirmed only if the next pc is not the
    /// return address.
    Call {
        seq: u64,
        return_address: u64,
        inferred: bool,
    },
    /// A ret at step `i` (the thread's step `n`); `expect`: for an inferred one, the value
    /// it read, which the next pc must be.
    Ret { i: u64, n: u64, expect: Option<u64> },
}

#[derive(Clone, Debug)]
struct Thread {
    id: u64,
    frames: Vec<Open>,
    pending: Pending,
    /// Steps of the thread so far.
    steps: u64,
    node: u32,
}

/// A call held until it and the calls before it are closed.
#[derive(Clone, Debug)]
struct Held {
    call: Call,
    closed: bool,
    /// An inferred call that was not one.
    dropped: bool,
}

/// The state of the pass.
struct Pass<'o, 'f> {
    options: &'o CallsOptions<'o>,
    abi: Abi,
    isa: Isa,
    disasm: Disassembler,
    /// `rax`/`eax`, the stack pointer and the argument registers' indices in the regs.
    ret_reg: Option<usize>,
    sp_reg: Option<usize>,
    arg_regs: [Option<usize>; 4],
    threads: Vec<Thread>,
    by_id: HashMap<u64, usize>,
    last: usize,
    held: VecDeque<Held>,
    /// The sequence number of `held`'s front.
    base: u64,
    stacks: Stacks,
    summary: Summary,
    /// The stack words known (cdecl): byte by address.
    stack_mem: HashMap<u64, u8>,
    on_call: &'f mut dyn FnMut(&Call) -> Result<(), Error>,
}

/// The bytes of a memory access after the instruction (or before, where only that is
/// recorded), as a little-endian word of up to 8 bytes.
fn word_of(step: &Step, a: &trace_model::steps::Access) -> Option<u64> {
    let bytes = step.new(a).or_else(|| step.old(a))?;
    let mut w = [0u8; 8];
    let n = bytes.len().min(8);
    w.get_mut(..n)?.copy_from_slice(bytes.get(..n)?);
    Some(u64::from_le_bytes(w))
}

impl Pass<'_, '_> {
    fn reg(regs: &[u64], known: u64, at: Option<usize>) -> Option<u64> {
        let at = at?;
        let bit = if at < 64 { 1u64 << at } else { u64::MAX };
        if known & bit == 0 {
            return None;
        }
        regs.get(at).copied()
    }

    fn thread(&mut self, id: u64) -> usize {
        if let Some(t) = self.threads.get(self.last)
            && t.id == id
        {
            return self.last;
        }
        let at = match self.by_id.get(&id) {
            Some(&at) => at,
            None => {
                let node = self.stacks.node(ROOT, id);
                self.threads.push(Thread {
                    id,
                    frames: Vec::new(),
                    pending: Pending::None,
                    steps: 0,
                    node,
                });
                let at = self.threads.len().saturating_sub(1);
                self.by_id.insert(id, at);
                at
            }
        };
        self.last = at;
        at
    }

    fn held_mut(&mut self, seq: u64) -> Option<&mut Held> {
        let k = usize::try_from(seq.checked_sub(self.base)?).ok()?;
        self.held.get_mut(k)
    }

    /// Hands out the calls at the front that are closed.
    fn emit(&mut self) -> Result<(), Error> {
        while let Some(front) = self.held.front() {
            if !(front.closed || front.dropped) {
                break;
            }
            if let Some(h) = self.held.pop_front() {
                self.base = self.base.saturating_add(1);
                if !h.dropped {
                    (self.on_call)(&h.call)?;
                }
            }
        }
        Ok(())
    }

    /// The four cdecl arguments above the return address at `sp` (the entry's stack
    /// pointer), from the entry's own accesses' bytes before it, else the stack words seen.
    fn cdecl_args(&self, step: &Step, sp: u64) -> [Option<u64>; 4] {
        let mut args = [None; 4];
        let byte = |addr: u64| -> Option<u8> {
            for a in &step.mem {
                if addr >= a.addr && addr < a.addr.saturating_add(u64::from(a.len)) {
                    let old = step.old(a)?;
                    return old
                        .get(usize::try_from(addr.wrapping_sub(a.addr)).ok()?)
                        .copied();
                }
            }
            self.stack_mem.get(&addr).copied()
        };
        for (arg, k) in args.iter_mut().zip(1u64..) {
            let at = sp.wrapping_add(k.wrapping_mul(4)) & u64::from(u32::MAX);
            let mut v = 0u32;
            let mut all = true;
            for b in (0..4u64).rev() {
                match byte(at.wrapping_add(b) & u64::from(u32::MAX)) {
                    Some(x) => v = (v << 8) | u32::from(x),
                    None => all = false,
                }
            }
            *arg = all.then_some(u64::from(v));
        }
        args
    }

    /// Records the stack bytes a step's accesses hold near its stack pointer (cdecl).
    fn remember_stack(&mut self, step: &Step, sp: u64) {
        for a in &step.mem {
            if a.addr.wrapping_sub(sp.wrapping_sub(0x1000)) >= 0x1_1000 {
                continue;
            }
            let Some(bytes) = step.new(a).or_else(|| step.old(a)) else {
                continue;
            };
            for (k, &b) in bytes.iter().enumerate() {
                self.stack_mem
                    .insert(a.addr.wrapping_add(k as u64) & u64::from(u32::MAX), b);
            }
        }
    }

    fn on_step(&mut self, step: &Step, regs: &[u64], known: u64) -> Result<(), Error> {
        let cdecl = self.abi == Abi::Cdecl;
        let sp = Self::reg(regs, known, self.sp_reg);
        if self.options.thread.is_some_and(|t| t != step.thread) {
            if cdecl && let Some(sp) = sp {
                self.remember_stack(step, sp);
            }
            return Ok(());
        }
        let t = self.thread(step.thread);
        let pending = self
            .threads
            .get_mut(t)
            .map(|th| std::mem::take(&mut th.pending))
            .unwrap_or_default();
        match pending {
            Pending::None => {}
            Pending::Call {
                seq,
                return_address,
                inferred,
            } => {
                if inferred && step.pc == return_address {
                    if let Some(h) = self.held_mut(seq) {
                        h.dropped = true;
                    }
                    self.emit()?;
                } else {
                    self.enter(t, seq, return_address, step, regs, known, sp);
                }
            }
            Pending::Ret { i, n, expect } => {
                if expect.is_none_or(|v| v == step.pc) {
                    self.ret(t, i, n, step.pc, regs, known)?;
                }
            }
        }
        if cdecl && let Some(sp) = sp {
            self.remember_stack(step, sp);
        }
        // What the step is: by its bytes, or inferred from the stack without them.
        let (flow, inferred) = if step.opcode.is_empty() {
            (self.infer(step, sp), true)
        } else {
            (self.disasm.flow(step.pc, &step.opcode), false)
        };
        let expect = match (flow, inferred) {
            (Flow::Return, true) => self.read_at_sp(step, sp),
            _ => None,
        };
        let Some(th) = self.threads.get_mut(t) else {
            return Ok(());
        };
        let n = th.steps;
        th.steps = th.steps.saturating_add(1);
        if let Some(node) = self.stacks.nodes.get_mut(th.node as usize) {
            node.count = node.count.saturating_add(1);
        }
        self.summary.instructions = self.summary.instructions.saturating_add(1);
        match flow {
            Flow::Other => {}
            Flow::Call { len, target } => {
                let return_address = step.pc.wrapping_add(u64::from(len));
                let depth = u32::try_from(th.frames.len()).unwrap_or(u32::MAX);
                let seq = self.base.saturating_add(self.held.len() as u64);
                th.pending = Pending::Call {
                    seq,
                    return_address,
                    inferred,
                };
                self.held.push_back(Held {
                    call: Call {
                        i: step.i,
                        thread: step.thread,
                        depth,
                        target,
                        return_address,
                        ..Call::default()
                    },
                    closed: false,
                    dropped: false,
                });
            }
            Flow::Return => {
                th.pending = Pending::Ret {
                    i: step.i,
                    n,
                    expect,
                };
            }
        }
        Ok(())
    }

    /// The word a step read at `sp`, if it did.
    fn read_at_sp(&self, step: &Step, sp: Option<u64>) -> Option<u64> {
        let sp = sp?;
        let word = self.isa.word_size();
        step.mem
            .iter()
            .find(|a| a.addr == sp && a.len >= word && step.old(a).is_some())
            .and_then(|a| word_of(step, a))
            .map(|v| {
                if word == 4 {
                    v & u64::from(u32::MAX)
                } else {
                    v
                }
            })
    }

    /// A call or return told from a step without bytes by its stack accesses (a candidate:
    /// the thread's next step confirms it).
    fn infer(&self, step: &Step, sp: Option<u64>) -> Flow {
        let Some(sp) = sp else {
            return Flow::Other;
        };
        let word = self.isa.word_size();
        let mask = if word == 4 {
            u64::from(u32::MAX)
        } else {
            u64::MAX
        };
        let slot = sp.wrapping_sub(u64::from(word)) & mask;
        for a in &step.mem {
            if a.addr == slot
                && a.len >= word
                && step.new(a).is_some()
                && let Some(v) = word_of(step, a)
            {
                let v = v & mask;
                let len = v.wrapping_sub(step.pc);
                if (1..=15).contains(&len) {
                    return Flow::Call {
                        len: u8::try_from(len).unwrap_or(0),
                        target: None,
                    };
                }
            }
        }
        if self.read_at_sp(step, Some(sp)).is_some() {
            return Flow::Return;
        }
        Flow::Other
    }

    /// Opens the frame of call `seq` at its entry `step`.
    #[allow(clippy::too_many_arguments)]
    fn enter(
        &mut self,
        t: usize,
        seq: u64,
        return_address: u64,
        step: &Step,
        regs: &[u64],
        known: u64,
        sp: Option<u64>,
    ) {
        let args = if self.abi == Abi::Cdecl {
            sp.map_or([None; 4], |sp| self.cdecl_args(step, sp))
        } else {
            self.arg_regs.map(|at| Self::reg(regs, known, at))
        };
        let symbol = self.options.symbols.map(|s| s.name(step.pc));
        let Some(th) = self.threads.get_mut(t) else {
            return;
        };
        let outer = th.node;
        let node = self.stacks.node(outer, step.pc);
        th.node = node;
        th.frames.push(Open {
            seq,
            return_address,
            entry_n: th.steps,
            outer,
        });
        let depth = th.frames.len();
        let k = seq
            .checked_sub(self.base)
            .and_then(|k| usize::try_from(k).ok());
        if let Some(h) = k.and_then(|k| self.held.get_mut(k)) {
            h.call.entry_i = Some(step.i);
            h.call.target = Some(step.pc);
            h.call.args = args;
            h.call.symbol = symbol;
        }
        self.summary.calls = self.summary.calls.saturating_add(1);
        let d = u32::try_from(depth.saturating_sub(1)).unwrap_or(u32::MAX);
        self.summary.deepest = Some(self.summary.deepest.map_or(d, |x| x.max(d)));
    }

    /// Matches the ret at step `i` (the thread's step `n`) whose thread went on at `pc`.
    fn ret(
        &mut self,
        t: usize,
        i: u64,
        n: u64,
        pc: u64,
        regs: &[u64],
        known: u64,
    ) -> Result<(), Error> {
        let ret = Self::reg(regs, known, self.ret_reg);
        let Some(th) = self.threads.get_mut(t) else {
            return Ok(());
        };
        let Some(k) = th.frames.iter().rposition(|f| f.return_address == pc) else {
            self.summary.unmatched_returns = self.summary.unmatched_returns.saturating_add(1);
            return Ok(());
        };
        let closing: SmallVec<[Open; 4]> = th.frames.drain(k..).collect();
        if let Some(first) = closing.first() {
            th.node = first.outer;
        }
        for (d, f) in closing.iter().enumerate() {
            let instructions = n.saturating_sub(f.entry_n).saturating_add(1);
            if let Some(h) = self.held_mut(f.seq) {
                h.closed = true;
                h.call.ret_i = Some(i);
                h.call.instructions = instructions;
                if d == 0 {
                    h.call.ret = ret;
                } else {
                    h.call.unwound = true;
                }
            }
        }
        self.emit()
    }

    /// Closes what is left at the end: pending calls open with no entry, open frames.
    fn finish(&mut self) -> Result<(), Error> {
        let threads = std::mem::take(&mut self.threads);
        for th in &threads {
            if let Pending::Call {
                seq,
                inferred: true,
                ..
            } = th.pending
                && let Some(h) = self.held_mut(seq)
            {
                // An inferred call whose thread never went on: not known to be one.
                h.dropped = true;
            } else if let Pending::Call { .. } = th.pending {
                self.summary.calls = self.summary.calls.saturating_add(1);
                self.summary.open_at_end = self.summary.open_at_end.saturating_add(1);
                let d = u32::try_from(th.frames.len()).unwrap_or(u32::MAX);
                self.summary.deepest = Some(self.summary.deepest.map_or(d, |x| x.max(d)));
            }
            for f in &th.frames {
                let instructions = th.steps.saturating_sub(f.entry_n);
                if let Some(h) = self.held_mut(f.seq) {
                    h.call.instructions = instructions;
                }
                self.summary.open_at_end = self.summary.open_at_end.saturating_add(1);
            }
        }
        for h in &mut self.held {
            if !h.dropped {
                h.closed = true;
                if h.call.symbol.is_none()
                    && let (Some(target), Some(s)) = (h.call.target, self.options.symbols)
                {
                    h.call.symbol = Some(s.name(target));
                }
            }
        }
        self.emit()
    }
}

/// The calls of `input`'s instruction stream, handed to `on_call` in the order of their
/// steps (see the module documentation), and the summary and stacks.
///
/// # Errors
///
/// [`Error::Unsupported`] for a stream that is not x86 or x64; a read error (after the
/// calls closed before it); `on_call`'s error.
pub fn calls(
    handler: &dyn Handler,
    input: &mut Input,
    ctx: &mut Ctx<'_>,
    options: &CallsOptions<'_>,
    on_call: &mut dyn FnMut(&Call) -> Result<(), Error>,
) -> Result<Done, Error> {
    let mut steps = handler.steps(input, ctx)?;
    calls_of(steps.as_mut(), options, on_call)
}

/// [`calls`] over steps already open (at their start).
///
/// # Errors
///
/// As [`calls`].
pub fn calls_of(
    steps: &mut dyn Steps,
    options: &CallsOptions<'_>,
    on_call: &mut dyn FnMut(&Call) -> Result<(), Error>,
) -> Result<Done, Error> {
    let isa = steps.isa();
    if !matches!(isa, Isa::X64 | Isa::X86) {
        return Err(Error::Unsupported(
            "`calls` reads x86 and x64 instruction streams; this one is not".into(),
        ));
    }
    let abi = options
        .abi
        .unwrap_or_else(|| Abi::default_for(isa, steps.os()));
    let names = steps.reg_names();
    let find = |name: &str| names.iter().position(|n| *n == name);
    let (ret_name, sp_name) = match isa {
        Isa::X86 => ("eax", "esp"),
        _ => ("rax", "rsp"),
    };
    let mut arg_regs = [None; 4];
    for (slot, name) in arg_regs.iter_mut().zip(abi.arg_regs()) {
        *slot = find(name);
    }
    let mut pass = Pass {
        options,
        abi,
        isa,
        disasm: Disassembler::new(isa),
        ret_reg: find(ret_name),
        sp_reg: find(sp_name),
        arg_regs,
        threads: Vec::new(),
        by_id: HashMap::new(),
        last: 0,
        held: VecDeque::new(),
        base: 0,
        stacks: Stacks::default(),
        summary: Summary::default(),
        stack_mem: HashMap::new(),
        on_call,
    };
    steps.want_regs(RegsWanted::General);
    let mut failed: Option<Error> = None;
    let walked = steps.walk_steps(&mut |step, regs, _changed| {
        // `walk_steps` gives no `regs_known`: a stream that has it (Tenet) reads 0 for
        // registers not named yet.
        match pass.on_step(step, regs, u64::MAX) {
            Ok(()) => true,
            Err(e) => {
                failed = Some(e);
                false
            }
        }
    });
    if let Some(e) = failed {
        return Err(e);
    }
    walked?;
    pass.finish()?;
    Ok(Done {
        summary: pass.summary,
        stacks: pass.stacks,
    })
}
