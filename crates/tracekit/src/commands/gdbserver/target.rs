//! The trace as a `gdbstub` target: a position (step N, the state before instruction N),
//! registers from `state`, memory from `mem`, and execution both ways from the timeline
//! (threads) and the sidecar index (breakpoints, watchpoints).

use std::collections::{BTreeSet, HashMap};
use std::num::NonZeroUsize;

use gdbstub::arch::Arch;
use gdbstub::common::{Signal, Tid};
use gdbstub::outputln;
use gdbstub::stub::MultiThreadStopReason;
use gdbstub::target::ext::base::BaseOps;
use gdbstub::target::ext::base::multithread::{
    MultiThreadBase, MultiThreadResume, MultiThreadResumeOps, MultiThreadSchedulerLocking,
    MultiThreadSchedulerLockingOps, MultiThreadSingleStep, MultiThreadSingleStepOps,
};
use gdbstub::target::ext::base::reverse_exec::{
    ReplayLogPosition, ReverseCont, ReverseContOps, ReverseStep, ReverseStepOps,
};
use gdbstub::target::ext::breakpoints::{
    Breakpoints, BreakpointsOps, HwBreakpoint, HwBreakpointOps, HwWatchpoint, HwWatchpointOps,
    SwBreakpoint, SwBreakpointOps, WatchKind,
};
use gdbstub::target::ext::monitor_cmd::{ConsoleOutput, MonitorCmd, MonitorCmdOps};
use gdbstub::target::ext::target_description_xml_override::{
    TargetDescriptionXmlOverride, TargetDescriptionXmlOverrideOps,
};
use gdbstub::target::ext::thread_extra_info::{ThreadExtraInfo, ThreadExtraInfoOps};
use gdbstub::target::{Target, TargetError, TargetResult};
use trace_analyses::mem::{MemQuery, mem_of};
use trace_analyses::state::state_of;
use trace_index::Sidecar;
use trace_registry::steps::{AccessKind, Isa, Step, Steps};
use trace_registry::{Ctx, Error, Handler, Input, Options};

use trace_index::Timeline;

use super::regs::Layout;

/// The `Arch` of every trace served: addresses as `u64` (an i386 trace's too), registers
/// as the bytes of the layout the target description gives (`tracekit gdbserver` sends
/// its own description for amd64 or i386).
#[derive(Debug)]
pub enum TraceArch {}

impl Arch for TraceArch {
    type Usize = u64;
    type Registers = RegBlock;
    type BreakpointKind = usize;
    type RegId = NoRegId;
}

/// No single-register access (`p`): GDB reads every register with `g`.
#[derive(Debug)]
pub enum NoRegId {}

impl gdbstub::arch::RegId for NoRegId {
    fn from_raw_id(_id: usize) -> Option<(Self, Option<NonZeroUsize>)> {
        None
    }
}

/// The register block of a `g` reply: each byte, `None` where the trace does not have it
/// (`xx` on the wire).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RegBlock {
    /// The bytes in wire order.
    pub bytes: Vec<Option<u8>>,
    /// The pc.
    pub pc: u64,
}

impl gdbstub::arch::Registers for RegBlock {
    type ProgramCounter = u64;

    fn pc(&self) -> u64 {
        self.pc
    }

    fn gdb_serialize(&self, mut write_byte: impl FnMut(Option<u8>)) {
        for &b in &self.bytes {
            write_byte(b);
        }
    }

    fn gdb_deserialize(&mut self, _bytes: &[u8]) -> Result<(), ()> {
        // Parsed, so that `write_registers` refuses it with an error reply (an `Err` here
        // would end the session).
        Ok(())
    }
}

/// What stops a session: the trace could not be read where a command needed it.
#[derive(Debug)]
pub struct ReplayError(pub Error);

impl std::fmt::Display for ReplayError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl std::error::Error for ReplayError {}

/// The stop reasons this target reports.
pub type Stop = MultiThreadStopReason<u64>;

/// One watchpoint (`Z2`/`Z3`/`Z4`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Watch {
    addr: u64,
    len: u64,
    kind: WatchKind,
}

/// The most watchpoints at once (GDB falls back to software watchpoints past them).
pub const MAX_WATCHPOINTS: usize = 8;

/// How many register blocks are kept (per step visited); the cache is emptied past that.
const CACHED_BLOCKS: usize = 256;

/// How many steps the cached sidecar lists hold at most (8 bytes each).
const CACHED_STEPS: usize = 4 << 20;

/// How many instructions' bytes are kept (by pc); the cache is emptied past that.
const CACHED_OPCODES: usize = 4096;

/// The longest x86 instruction, in bytes.
const MAX_INSTRUCTION: u64 = 15;

/// `EFAULT`: GDB's "Cannot access memory at address …".
const EFAULT: u8 = 14;

/// `EROFS`: writes to a trace.
const EROFS: u8 = 30;

/// Where the steps are read from.
pub enum Source<'a> {
    /// Steps that seek to any step, backwards too (x64dbg and tfile files in memory): kept
    /// open for the session.
    Seekable(Box<dyn Steps + 'a>),
    /// A format whose steps only read on (Tenet, amber): opened again from the start for
    /// every lookup.
    Reopened {
        /// The trace.
        input: Input,
        /// Its format.
        handler: &'static dyn Handler,
    },
}

impl std::fmt::Debug for Source<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Source::Seekable(_) => "Seekable",
            Source::Reopened { .. } => "Reopened",
        })
    }
}

impl Source<'_> {
    /// Runs `f` over steps that can seek to any step (fresh ones, for a stream).
    fn with<R>(
        &mut self,
        options: &Options,
        f: impl FnOnce(&mut dyn Steps) -> Result<R, Error>,
    ) -> Result<R, Error> {
        match self {
            Source::Seekable(steps) => f(steps.as_mut()),
            Source::Reopened { input, handler } => {
                let mut steps =
                    trace_index::steps_without_notes(*handler, input, &mut Ctx::new(options))?;
                f(steps.as_mut())
            }
        }
    }
}

/// A recorded trace replayed for GDB.
pub struct Replay<'a> {
    source: Source<'a>,
    sidecar: Sidecar,
    options: Options,
    timeline: Timeline,
    layout: Layout,
    xml: String,
    /// The summary `monitor info` prints.
    summary: String,
    /// The current step: the state before it.
    pos: u64,
    /// The thread of the current step.
    thread_now: u64,
    /// Added to a recorded thread id to make GDB's (non-zero) one: 1 when some thread is 0.
    tid_offset: u64,
    blocks: HashMap<u64, RegBlock>,
    /// The bytes of the instruction at each pc looked up (`None`: none executed there).
    opcodes: HashMap<u64, Option<Vec<u8>>>,
    /// The sidecar's lists looked up: executions of a pc (`(pc, pc)`) and accesses to a
    /// range (`(start, end)`, `start < end`), kept while GDB removes and inserts its
    /// breakpoints at every stop.
    lists: HashMap<(u64, u64), std::rc::Rc<Vec<u64>>>,
    /// The steps held in `lists`.
    listed: usize,
    breakpoints: BTreeSet<u64>,
    watchpoints: Vec<Watch>,
    /// The thread the next resume steps, if it steps one.
    stepping: Option<u64>,
    /// Whether the next resume holds the other threads (no `c` for them: GDB stepping off
    /// a breakpoint, or `set scheduler-locking step`).
    locked: bool,
    /// What the last resume stopped with, for the event loop.
    stop: Option<Stop>,
    /// `monitor unknown-memory zero`: unknown bytes read as 0.
    unknown_zero: bool,
}

impl std::fmt::Debug for Replay<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Replay")
            .field("pos", &self.pos)
            .field("steps", &self.timeline.count())
            .finish_non_exhaustive()
    }
}

impl<'a> Replay<'a> {
    /// A replay of `steps` (at any position), whose timeline is `timeline` and whose sidecar
    /// index is `sidecar`, starting at step 0.
    ///
    /// # Errors
    ///
    /// The trace is empty, or not x86/x86-64.
    pub fn new(
        source: Source<'a>,
        isa: Isa,
        sidecar: Sidecar,
        options: Options,
        timeline: Timeline,
        summary: String,
    ) -> Result<Replay<'a>, Error> {
        let layout = Layout::of(isa).ok_or_else(|| {
            Error::Unsupported(
                "`tracekit gdbserver` serves x86 and x86-64 traces; this one is of another instruction set".into(),
            )
        })?;
        if timeline.count() == 0 {
            return Err(Error::Unsupported("the trace has no steps".into()));
        }
        let tid_offset = u64::from(timeline.threads().contains(&0));
        let thread_now = timeline.thread_at(0)?.unwrap_or(0);
        Ok(Replay {
            source,
            sidecar,
            options,
            xml: layout.xml(),
            layout,
            timeline,
            summary,
            pos: 0,
            thread_now,
            tid_offset,
            blocks: HashMap::new(),
            opcodes: HashMap::new(),
            lists: HashMap::new(),
            listed: 0,
            breakpoints: BTreeSet::new(),
            watchpoints: Vec::new(),
            stepping: None,
            locked: false,
            stop: None,
            unknown_zero: false,
        })
    }

    /// The current step.
    #[must_use]
    pub fn pos(&self) -> u64 {
        self.pos
    }

    /// GDB's id of a recorded thread.
    fn tid(&self, thread: u64) -> Tid {
        thread
            .checked_add(self.tid_offset)
            .and_then(|t| usize::try_from(t).ok())
            .and_then(NonZeroUsize::new)
            .unwrap_or(NonZeroUsize::MIN)
    }

    /// The recorded thread of GDB's id; the current step's for an id the trace does not
    /// have.
    fn thread(&self, tid: Tid) -> u64 {
        let t = (tid.get() as u64).saturating_sub(self.tid_offset);
        if self.timeline.threads().contains(&t) {
            t
        } else {
            self.current_thread()
        }
    }

    /// The thread of the current step.
    fn current_thread(&self) -> u64 {
        self.thread_now
    }

    /// GDB's id of the thread of the current step.
    pub fn current_tid(&self) -> Tid {
        self.tid(self.current_thread())
    }

    /// Moves to step `n` (the last step for one past the end).
    fn goto(&mut self, n: u64) -> Result<(), Error> {
        let n = n.min(self.timeline.count().saturating_sub(1));
        self.thread_now = self.timeline.thread_at(n)?.unwrap_or(0);
        self.pos = n;
        Ok(())
    }

    /// A stop of the current thread with SIGTRAP (a step done).
    fn trap(&self) -> Stop {
        Stop::SignalWithThread {
            tid: self.current_tid(),
            signal: Signal::SIGTRAP,
        }
    }

    /// The end of the history in one direction: the first or the last step.
    fn history_end(&mut self, pos: ReplayLogPosition) -> Result<Stop, Error> {
        match pos {
            ReplayLogPosition::Begin => self.goto(0)?,
            ReplayLogPosition::End => self.goto(self.timeline.count().saturating_sub(1))?,
        }
        Ok(Stop::ReplayLog {
            tid: Some(self.current_tid()),
            pos,
        })
    }

    /// The step whose state is `thread`'s at the current position: the current step if
    /// the thread runs it, else the thread's next step, else its last.
    fn step_of(&self, thread: u64) -> Result<Option<u64>, Error> {
        match self.timeline.first_from(thread, self.pos)? {
            Some(at) => Ok(Some(at)),
            None => self.timeline.last_before(thread, self.pos),
        }
    }

    /// The register block before step `at`.
    fn block(&mut self, at: u64) -> Result<RegBlock, Error> {
        if let Some(b) = self.blocks.get(&at) {
            return Ok(b.clone());
        }
        let s = self
            .source
            .with(&self.options, |steps| state_of(steps, "trace", at))?;
        let block = RegBlock {
            bytes: self.layout.block(&s.regs),
            pc: s.pc,
        };
        if self.blocks.len() >= CACHED_BLOCKS {
            self.blocks.clear();
        }
        self.blocks.insert(at, block.clone());
        Ok(block)
    }

    /// The step `at`, read (for its accesses).
    fn read_step(&mut self, at: u64) -> Result<Step, Error> {
        let count = self.timeline.count();
        self.source.with(&self.options, |steps| {
            steps.seek(at)?;
            match steps.next_step() {
                Some(Ok(step)) => Ok(step.clone()),
                Some(Err(e)) => Err(e),
                None => Err(trace_registry::steps::past_end(at, count)),
            }
        })
    }

    /// Whether step `at` makes an access of `w.kind` to `w`'s range (x64dbg records the
    /// new value of a write only when it changed the memory, and no read/write kind
    /// without `--disasm`: a recorded new value counts as a write, none as a read).
    fn hits(&mut self, at: u64, w: &Watch) -> Result<bool, Error> {
        let step = self.read_step(at)?;
        let end = w.addr.saturating_add(w.len);
        Ok(step.mem.iter().any(|a| {
            let a_end = a.addr.saturating_add(u64::from(a.len.max(1)));
            if a.addr >= end || a_end <= w.addr {
                return false;
            }
            let writes = matches!(a.kind, AccessKind::Write | AccessKind::ReadWrite)
                || (a.kind == AccessKind::Unknown && a.new.is_some());
            let reads = matches!(a.kind, AccessKind::Read | AccessKind::ReadWrite)
                || (a.kind == AccessKind::Unknown && a.new.is_none());
            match w.kind {
                WatchKind::Write => writes,
                WatchKind::Read => reads,
                WatchKind::ReadWrite => true,
            }
        }))
    }

    /// Fills the unknown bytes of `bytes` (at `start`) that an executed instruction's
    /// bytes cover: the code GDB disassembles, which the trace records as the
    /// instructions' opcodes rather than as memory.
    fn code_bytes(&mut self, start: u64, bytes: &mut [Option<u8>]) -> Result<(), Error> {
        let Some(first) = bytes.iter().position(Option::is_none) else {
            return Ok(());
        };
        let from = start
            .saturating_add(first as u64)
            .saturating_sub(MAX_INSTRUCTION - 1);
        let end = start.saturating_add(bytes.len() as u64);
        let mut pc = from;
        while pc < end {
            if let Some(op) = self.opcode_at(pc)? {
                for (k, &b) in op.iter().enumerate() {
                    let at = pc.saturating_add(k as u64);
                    let slot = at
                        .checked_sub(start)
                        .and_then(|i| usize::try_from(i).ok())
                        .and_then(|i| bytes.get_mut(i));
                    if let Some(slot @ None) = slot {
                        *slot = Some(b);
                    }
                }
            }
            pc = pc.saturating_add(1);
        }
        Ok(())
    }

    /// The bytes of the instruction executed at `pc` nearest the current step (the last
    /// before it, else the first after), if one was.
    fn opcode_at(&mut self, pc: u64) -> Result<Option<Vec<u8>>, Error> {
        if let Some(op) = self.opcodes.get(&pc) {
            return Ok(op.clone());
        }
        let runs = self.sidecar.executions(pc)?;
        let k = runs.partition_point(|&i| i <= self.pos);
        let step = k
            .checked_sub(1)
            .and_then(|k| runs.get(k))
            .or_else(|| runs.get(k))
            .copied();
        let op = match step {
            Some(j) => Some(self.read_step(j)?.opcode.to_vec()).filter(|op| !op.is_empty()),
            None => None,
        };
        if self.opcodes.len() >= CACHED_OPCODES {
            self.opcodes.clear();
        }
        self.opcodes.insert(pc, op.clone());
        Ok(op)
    }

    /// The steps that execute `pc` (`end` = `None`) or access `pc..end`, from the sidecar
    /// (or the cache of the lists read).
    fn list(&mut self, pc: u64, end: Option<u64>) -> Result<std::rc::Rc<Vec<u64>>, Error> {
        let key = (pc, end.unwrap_or(pc));
        if let Some(l) = self.lists.get(&key) {
            return Ok(std::rc::Rc::clone(l));
        }
        let l = std::rc::Rc::new(match end {
            None => self.sidecar.executions(pc)?,
            Some(end) => self.sidecar.accesses(pc, end)?,
        });
        if self.listed.saturating_add(l.len()) > CACHED_STEPS {
            self.lists.clear();
            self.listed = 0;
        }
        self.listed = self.listed.saturating_add(l.len());
        self.lists.insert(key, std::rc::Rc::clone(&l));
        Ok(l)
    }

    /// The next breakpoint hit after the current step: the step whose state to stop at.
    fn next_break(&mut self) -> Result<Option<u64>, Error> {
        let mut best: Option<u64> = None;
        for pc in self.breakpoints.clone() {
            let runs = self.list(pc, None)?;
            let k = runs.partition_point(|&i| i <= self.pos);
            if let Some(&i) = runs.get(k) {
                best = Some(best.map_or(i, |b| b.min(i)));
            }
        }
        Ok(best)
    }

    /// The previous breakpoint hit before the current step.
    fn prev_break(&mut self) -> Result<Option<u64>, Error> {
        let mut best: Option<u64> = None;
        for pc in self.breakpoints.clone() {
            let runs = self.list(pc, None)?;
            let k = runs.partition_point(|&i| i < self.pos);
            if let Some(&i) = k.checked_sub(1).and_then(|k| runs.get(k)) {
                best = Some(best.map_or(i, |b| b.max(i)));
            }
        }
        Ok(best)
    }

    /// The first access at or after the current step that a watchpoint sees: the step and
    /// the watchpoint.
    /// Only accesses before step `until`, and with `only`, only by that step.
    fn next_watch(&mut self, until: u64, only: Option<u64>) -> Result<Option<(u64, Watch)>, Error> {
        let mut best: Option<(u64, Watch)> = None;
        for w in self.watchpoints.clone() {
            let list = self.list(w.addr, Some(w.addr.saturating_add(w.len)))?;
            let from = list.partition_point(|&i| i < self.pos);
            for &i in list.get(from..).unwrap_or_default() {
                if i >= until || best.is_some_and(|(b, _)| b <= i) {
                    break;
                }
                if only.is_some_and(|o| o != i) {
                    continue;
                }
                if self.hits(i, &w)? {
                    best = Some((i, w));
                    break;
                }
            }
        }
        Ok(best)
    }

    /// The last access before the current step that a watchpoint sees.
    fn prev_watch(&mut self) -> Result<Option<(u64, Watch)>, Error> {
        let mut best: Option<(u64, Watch)> = None;
        for w in self.watchpoints.clone() {
            let list = self.list(w.addr, Some(w.addr.saturating_add(w.len)))?;
            let to = list.partition_point(|&i| i < self.pos);
            for &i in list.get(..to).unwrap_or_default().iter().rev() {
                if best.is_some_and(|(b, _)| b >= i) {
                    break;
                }
                if self.hits(i, &w)? {
                    best = Some((i, w));
                    break;
                }
            }
        }
        Ok(best)
    }

    /// `stepi` of `thread`: to its next step; unless the other threads are held
    /// (`locked`), a breakpoint another thread's step reaches on the way stops there first,
    /// as in a live all-stop session.
    fn step_forward(&mut self, thread: u64, locked: bool) -> Result<Stop, Error> {
        let at = self.timeline.first_from(thread, self.pos)?;
        let next = match at {
            Some(at) => self.timeline.first_from(thread, at.saturating_add(1))?,
            None => None,
        };
        let limit = next.unwrap_or(self.timeline.count());
        // A watchpoint the stepped instruction (or, with the others running, any step on
        // the way) triggers: the stop is after that instruction.
        let watch = match at {
            Some(at) => self.next_watch(limit, locked.then_some(at))?,
            None => None,
        };
        let brk = if locked { None } else { self.next_break()? };
        let brk = brk.filter(|&b| b < limit && watch.is_none_or(|(i, _)| b <= i));
        if let Some(b) = brk {
            self.goto(b)?;
            return Ok(Stop::SwBreak(self.current_tid()));
        }
        if let Some((i, w)) = watch {
            let by = self.timeline.thread_at(i)?.unwrap_or(thread);
            // The stepped thread is then before its next step; another thread's access
            // stops at the step after it.
            let to = if Some(i) == at {
                next
            } else {
                Some(i.saturating_add(1))
            };
            if let Some(to) = to.filter(|&t| t < self.timeline.count()) {
                self.goto(to)?;
                return Ok(Stop::Watch {
                    tid: self.tid(by),
                    kind: w.kind,
                    addr: w.addr,
                });
            }
        }
        Ok(match next {
            Some(j) => {
                self.goto(j)?;
                self.trap()
            }
            None => self.history_end(ReplayLogPosition::End)?,
        })
    }

    /// `continue`: to the next breakpoint or watchpoint, or the end.
    fn continue_forward(&mut self) -> Result<Stop, Error> {
        let brk = self.next_break()?;
        let watch = self.next_watch(u64::MAX, None)?;
        // A watchpoint stops after the accessing instruction: at the next step.
        let watch_at = watch.map(|(i, w)| (i.saturating_add(1), i, w));
        match (brk, watch_at) {
            (Some(b), w) if w.is_none_or(|(at, _, _)| b <= at) => {
                self.goto(b)?;
                Ok(Stop::SwBreak(self.current_tid()))
            }
            (_, Some((at, i, w))) if at < self.timeline.count() => {
                let thread = self.timeline.thread_at(i)?.unwrap_or(0);
                self.goto(at)?;
                Ok(Stop::Watch {
                    tid: self.tid(thread),
                    kind: w.kind,
                    addr: w.addr,
                })
            }
            _ => self.history_end(ReplayLogPosition::End),
        }
    }

    /// `reverse-continue`: to the previous breakpoint or watchpoint, or the start.
    fn continue_backward(&mut self) -> Result<Stop, Error> {
        let brk = self.prev_break()?;
        // Backwards a watchpoint stops at the accessing instruction, the state before it.
        let watch = self.prev_watch()?;
        match (brk, watch) {
            (Some(b), w) if w.is_none_or(|(i, _)| b > i) => {
                self.goto(b)?;
                Ok(Stop::SwBreak(self.current_tid()))
            }
            (_, Some((i, w))) => {
                self.goto(i)?;
                Ok(Stop::Watch {
                    tid: self.current_tid(),
                    kind: w.kind,
                    addr: w.addr,
                })
            }
            _ => self.history_end(ReplayLogPosition::Begin),
        }
    }

    /// The stop of the last resume, taken by the event loop.
    pub fn take_stop(&mut self) -> Stop {
        self.stop.take().unwrap_or_else(|| self.trap())
    }

    /// A monitor command's answer (lines), or the error to show.
    fn monitor(&mut self, cmd: &str) -> String {
        let mut words = cmd.split_whitespace();
        let when = |r: &Replay<'_>| format!("step {} thread {}", r.pos, r.current_thread());
        match (words.next(), words.next(), words.next()) {
            (Some("when"), None, _) => when(self),
            (Some("goto"), Some(n), None) => match super::super::args::number(n) {
                // A second line names GDB's thread (`Thread 1.LWP`), for `tk-goto` to
                // select it: GDB keeps its selected thread across a monitor command.
                Ok(n) if n < self.timeline.count() => match self.goto(n) {
                    Ok(()) => format!(
                        "{}\ngdb thread 1.{}",
                        when(self),
                        self.tid(self.current_thread())
                    ),
                    Err(e) => format!("cannot go to step {n}: {e}"),
                },
                Ok(n) => format!(
                    "step {n} is past the end: the trace has {} steps",
                    self.timeline.count()
                ),
                Err(e) => format!("goto takes a step number: {e}"),
            },
            (Some("unknown-memory"), Some(mode @ ("zero" | "error")), None) => {
                self.unknown_zero = mode == "zero";
                format!(
                    "unknown memory reads as {}",
                    if self.unknown_zero {
                        "zeros"
                    } else {
                        "an error"
                    }
                )
            }
            (Some("info"), None, _) => self.summary.clone(),
            (Some("help") | None, _, _) => MONITOR_HELP.to_owned(),
            _ => format!("unknown monitor command {cmd:?}\n{MONITOR_HELP}"),
        }
    }
}

/// What `monitor help` prints.
pub const MONITOR_HELP: &str =
    "monitor when                 the current step and its thread: step N thread T
monitor goto N               jump to step N (then: maintenance flush register-cache, thread, frame)
monitor unknown-memory zero|error   unknown bytes read as 0, or fail (the default)
monitor info                 the trace summary
monitor help                 this list";

impl Target for Replay<'_> {
    type Arch = TraceArch;
    type Error = ReplayError;

    fn base_ops(&mut self) -> BaseOps<'_, Self::Arch, Self::Error> {
        BaseOps::MultiThread(self)
    }

    fn support_breakpoints(&mut self) -> Option<BreakpointsOps<'_, Self>> {
        Some(self)
    }

    fn support_monitor_cmd(&mut self) -> Option<MonitorCmdOps<'_, Self>> {
        Some(self)
    }

    fn support_target_description_xml_override(
        &mut self,
    ) -> Option<TargetDescriptionXmlOverrideOps<'_, Self>> {
        Some(self)
    }

    fn guard_rail_implicit_sw_breakpoints(&self) -> bool {
        true
    }

    // A replay has no forks: not announced (GDB would otherwise expect their events).
    fn use_fork_stop_reason(&self) -> bool {
        false
    }

    fn use_vfork_stop_reason(&self) -> bool {
        false
    }

    fn use_vforkdone_stop_reason(&self) -> bool {
        false
    }
}

impl MultiThreadBase for Replay<'_> {
    fn read_registers(&mut self, regs: &mut RegBlock, tid: Tid) -> TargetResult<(), Self> {
        let at = self
            .step_of(self.thread(tid))
            .map_err(|e| TargetError::Fatal(ReplayError(e)))?
            .unwrap_or(self.pos);
        *regs = self
            .block(at)
            .map_err(|e| TargetError::Fatal(ReplayError(e)))?;
        Ok(())
    }

    fn write_registers(&mut self, _regs: &RegBlock, _tid: Tid) -> TargetResult<(), Self> {
        Err(TargetError::Errno(EROFS))
    }

    fn read_addrs(&mut self, start: u64, data: &mut [u8], _tid: Tid) -> TargetResult<usize, Self> {
        if data.is_empty() {
            return Ok(0);
        }
        let query = MemQuery {
            at: self.pos,
            addr: start,
            len: Some(data.len() as u64),
        };
        let sidecar = &mut self.sidecar;
        let options = &self.options;
        let found = self.source.with(options, |steps| {
            steps.seek(0)?;
            mem_of(steps, Some(sidecar), &mut Ctx::new(options), &query)
        });
        let Ok((memory, _)) = found else {
            return Err(TargetError::Errno(EFAULT));
        };
        let mut bytes = memory.bytes;
        if bytes.iter().any(Option::is_none) {
            self.code_bytes(start, &mut bytes)
                .map_err(|e| TargetError::Fatal(ReplayError(e)))?;
        }
        let mut n: usize = 0;
        for (out, b) in data.iter_mut().zip(&bytes) {
            match (b, self.unknown_zero) {
                (Some(b), _) => *out = *b,
                (None, true) => *out = 0,
                (None, false) => break,
            }
            n = n.saturating_add(1);
        }
        if n == 0 {
            return Err(TargetError::Errno(EFAULT));
        }
        Ok(n)
    }

    fn write_addrs(&mut self, _start: u64, _data: &[u8], _tid: Tid) -> TargetResult<(), Self> {
        Err(TargetError::Errno(EROFS))
    }

    fn list_active_threads(&mut self, visit: &mut dyn FnMut(Tid)) -> Result<(), Self::Error> {
        // The current thread first: `Hc0` (any thread) picks the first listed.
        let current = self.current_thread();
        visit(self.tid(current));
        for &t in self.timeline.threads() {
            if t != current {
                visit(self.tid(t));
            }
        }
        Ok(())
    }

    fn support_resume(&mut self) -> Option<MultiThreadResumeOps<'_, Self>> {
        Some(self)
    }

    fn support_thread_extra_info(&mut self) -> Option<ThreadExtraInfoOps<'_, Self>> {
        Some(self)
    }
}

impl ThreadExtraInfo for Replay<'_> {
    fn thread_extra_info(&self, tid: Tid, buf: &mut [u8]) -> Result<usize, Self::Error> {
        // The step whose state the thread shows.
        let thread = self.thread(tid);
        let text = match self.step_of(thread) {
            Ok(Some(at)) => format!("step {at}"),
            Ok(None) | Err(_) => String::new(),
        };
        let n = text.len().min(buf.len());
        if let (Some(out), Some(src)) = (buf.get_mut(..n), text.as_bytes().get(..n)) {
            out.copy_from_slice(src);
        }
        Ok(n)
    }
}

impl MultiThreadResume for Replay<'_> {
    fn resume(&mut self) -> Result<(), Self::Error> {
        let locked = std::mem::take(&mut self.locked);
        let stop = match self.stepping.take() {
            Some(thread) => self.step_forward(thread, locked),
            None => self.continue_forward(),
        }
        .map_err(ReplayError)?;
        self.stop = Some(stop);
        Ok(())
    }

    fn clear_resume_actions(&mut self) -> Result<(), Self::Error> {
        self.stepping = None;
        self.locked = false;
        Ok(())
    }

    fn set_resume_action_continue(
        &mut self,
        _tid: Tid,
        _signal: Option<Signal>,
    ) -> Result<(), Self::Error> {
        Ok(())
    }

    fn support_single_step(&mut self) -> Option<MultiThreadSingleStepOps<'_, Self>> {
        Some(self)
    }

    fn support_reverse_step(&mut self) -> Option<ReverseStepOps<'_, Tid, Self>> {
        Some(self)
    }

    fn support_reverse_cont(&mut self) -> Option<ReverseContOps<'_, Tid, Self>> {
        Some(self)
    }

    fn support_scheduler_locking(&mut self) -> Option<MultiThreadSchedulerLockingOps<'_, Self>> {
        Some(self)
    }
}

impl MultiThreadSingleStep for Replay<'_> {
    fn set_resume_action_step(
        &mut self,
        tid: Tid,
        _signal: Option<Signal>,
    ) -> Result<(), Self::Error> {
        self.stepping = Some(self.thread(tid));
        Ok(())
    }
}

impl MultiThreadSchedulerLocking for Replay<'_> {
    fn set_resume_action_scheduler_lock(&mut self) -> Result<(), Self::Error> {
        // Only the stepping thread runs: the other threads' steps on the way are passed
        // over without their breakpoints.
        self.locked = true;
        Ok(())
    }
}

impl ReverseStep<Tid> for Replay<'_> {
    fn reverse_step(&mut self, tid: Tid) -> Result<(), Self::Error> {
        let thread = self.thread(tid);
        let stop = match self
            .timeline
            .last_before(thread, self.pos)
            .map_err(ReplayError)?
        {
            Some(j) => {
                self.goto(j).map_err(ReplayError)?;
                // Stepping back over an access a watchpoint sees: before it, as
                // `reverse-continue` stops.
                let mut hit = None;
                for w in self.watchpoints.clone() {
                    if self.hits(j, &w).map_err(ReplayError)? {
                        hit = Some(w);
                        break;
                    }
                }
                match hit {
                    Some(w) => Stop::Watch {
                        tid: self.current_tid(),
                        kind: w.kind,
                        addr: w.addr,
                    },
                    None => self.trap(),
                }
            }
            None => self
                .history_end(ReplayLogPosition::Begin)
                .map_err(ReplayError)?,
        };
        self.stop = Some(stop);
        Ok(())
    }
}

impl ReverseCont<Tid> for Replay<'_> {
    fn reverse_cont(&mut self) -> Result<(), Self::Error> {
        let stop = self.continue_backward().map_err(ReplayError)?;
        self.stop = Some(stop);
        Ok(())
    }
}

impl Breakpoints for Replay<'_> {
    fn support_sw_breakpoint(&mut self) -> Option<SwBreakpointOps<'_, Self>> {
        Some(self)
    }

    fn support_hw_breakpoint(&mut self) -> Option<HwBreakpointOps<'_, Self>> {
        Some(self)
    }

    fn support_hw_watchpoint(&mut self) -> Option<HwWatchpointOps<'_, Self>> {
        Some(self)
    }
}

impl HwBreakpoint for Replay<'_> {
    // `hbreak`: the same executions as `break` (reported as `swbreak`, which GDB takes for
    // either).
    fn add_hw_breakpoint(&mut self, addr: u64, _kind: usize) -> TargetResult<bool, Self> {
        self.breakpoints.insert(addr);
        Ok(true)
    }

    fn remove_hw_breakpoint(&mut self, addr: u64, _kind: usize) -> TargetResult<bool, Self> {
        Ok(self.breakpoints.remove(&addr))
    }
}

impl SwBreakpoint for Replay<'_> {
    fn add_sw_breakpoint(&mut self, addr: u64, _kind: usize) -> TargetResult<bool, Self> {
        self.breakpoints.insert(addr);
        Ok(true)
    }

    fn remove_sw_breakpoint(&mut self, addr: u64, _kind: usize) -> TargetResult<bool, Self> {
        Ok(self.breakpoints.remove(&addr))
    }
}

impl HwWatchpoint for Replay<'_> {
    fn add_hw_watchpoint(
        &mut self,
        addr: u64,
        len: u64,
        kind: WatchKind,
    ) -> TargetResult<bool, Self> {
        if self.watchpoints.len() >= MAX_WATCHPOINTS || len == 0 {
            return Ok(false);
        }
        self.watchpoints.push(Watch { addr, len, kind });
        Ok(true)
    }

    fn remove_hw_watchpoint(
        &mut self,
        addr: u64,
        len: u64,
        kind: WatchKind,
    ) -> TargetResult<bool, Self> {
        let w = Watch { addr, len, kind };
        match self.watchpoints.iter().position(|x| *x == w) {
            Some(k) => {
                self.watchpoints.remove(k);
                Ok(true)
            }
            None => Ok(false),
        }
    }
}

impl MonitorCmd for Replay<'_> {
    fn handle_monitor_cmd(
        &mut self,
        cmd: &[u8],
        mut out: ConsoleOutput<'_>,
    ) -> Result<(), Self::Error> {
        // Never an error: that would end the session.
        let answer = self.monitor(&String::from_utf8_lossy(cmd));
        for line in answer.lines() {
            outputln!(out, "{line}");
        }
        Ok(())
    }
}

impl TargetDescriptionXmlOverride for Replay<'_> {
    fn target_description_xml(
        &self,
        annex: &[u8],
        offset: u64,
        length: usize,
        buf: &mut [u8],
    ) -> TargetResult<usize, Self> {
        if annex != b"target.xml" {
            return Err(TargetError::Errno(2));
        }
        let xml = self.xml.as_bytes();
        let start = usize::try_from(offset).unwrap_or(usize::MAX).min(xml.len());
        let rest = xml.get(start..).unwrap_or_default();
        let n = rest.len().min(length).min(buf.len());
        if let (Some(out), Some(src)) = (buf.get_mut(..n), rest.get(..n)) {
            out.copy_from_slice(src);
        }
        Ok(n)
    }
}
