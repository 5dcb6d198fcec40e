//! The ptrace tracer (Linux x86-64): one thread that starts the program, single-steps
//! every thread of it and hands each executed instruction to trac-x64dbg's [`Recorder`].
//!
//! A thread's instruction is *pending* from the stop before it (registers, opcode, the
//! memory words it will access and their old values) until the thread's next stop, which
//! shows its effect (the words' new values, a system call's result and what the kernel
//! wrote). Threads run at the same time, so blocks come in the order instructions finish.

// Word counts are at most 32, page offsets below 4096, register numbers below 8: none of
// the arithmetic here can overflow.
#![allow(clippy::arithmetic_side_effects)]

mod xstate;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::ffi::{CString, OsStr, OsString};
use std::io::{IoSliceMut, Write};
use std::os::unix::ffi::OsStrExt;
use std::time::Instant;

use iced_x86::FlowControl;
use nix::errno::Errno;
use nix::sys::personality::{self, Persona};
use nix::sys::ptrace::{self, Event, Options as PtraceOptions};
use nix::sys::signal::Signal;
use nix::sys::uio::{RemoteIoVec, process_vm_readv};
use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
use nix::unistd::Pid;
use trac_x64dbg::{Arch, Header, MemAccess, RegDump, Writer};
use trac_x64dbg::{Recorder, RecorderOptions, Step};

use crate::operands::{self, MAX_WORDS, Operands};
use crate::regs::{DebugRegs, UserRegs, regdump};
use crate::scope::{self, contains};
use crate::syscalls::{kernel_writes, words_of};
use crate::{Error, Exit, Launch, Options, Summary};

/// The `syscall` instruction.
const SYSCALL: [u8; 2] = [0x0f, 0x05];
/// exit and exit_group: the thread's last instruction.
const SYS_EXIT: u64 = 60;
const SYS_EXIT_GROUP: u64 = 231;
const SYS_GETRANDOM: u64 = 318;
/// `offsetof(struct user, u_debugreg)` (record-notes.md section 2).
const DEBUG_REGS_OFFSET: usize = 848;
/// Big enough for every XSAVE layout the kernel reports (AVX-512 and AMX included).
const XSTATE_BUF: usize = 16 * 1024;
const PAGE: u64 = 4096;
/// `int3`, the breakpoint planted at the entry points of the ranges.
const INT3: u8 = 0xcc;

fn ptrace_err(what: &'static str) -> impl Fn(Errno) -> Error {
    move |errno| Error::Ptrace { what, errno }
}

fn user_regs(r: &nix::libc::user_regs_struct) -> UserRegs {
    UserRegs {
        r15: r.r15,
        r14: r.r14,
        r13: r.r13,
        r12: r.r12,
        rbp: r.rbp,
        rbx: r.rbx,
        r11: r.r11,
        r10: r.r10,
        r9: r.r9,
        r8: r.r8,
        rax: r.rax,
        rcx: r.rcx,
        rdx: r.rdx,
        rsi: r.rsi,
        rdi: r.rdi,
        orig_rax: r.orig_rax,
        rip: r.rip,
        cs: r.cs,
        eflags: r.eflags,
        rsp: r.rsp,
        ss: r.ss,
        fs_base: r.fs_base,
        gs_base: r.gs_base,
        ds: r.ds,
        es: r.es,
        fs: r.fs,
        gs: r.gs,
    }
}

/// Reads `buf.len()` bytes at `addr` of `pid`, split at page boundaries (a read crossing
/// into an unmapped page may stop short); returns how many leading bytes were read.
fn read_bytes(pid: Pid, addr: u64, buf: &mut [u8]) -> usize {
    let mut remote = [RemoteIoVec { base: 0, len: 0 }; 2];
    let first = (PAGE - addr % PAGE).min(buf.len() as u64) as usize;
    remote[0] = RemoteIoVec {
        base: addr as usize,
        len: first,
    };
    let mut n = 1;
    if first < buf.len() {
        remote[1] = RemoteIoVec {
            base: addr.wrapping_add(first as u64) as usize,
            len: buf.len().saturating_sub(first),
        };
        n = 2;
    }
    let mut local = [IoSliceMut::new(buf)];
    process_vm_readv(pid, &mut local, remote.get(..n).unwrap_or_default()).unwrap_or(0)
}

/// Reads the 8-byte word at each of `addrs` into `values` (0 where unreadable, as x64dbg
/// records unreadable memory): one system call for all of them when they are readable.
fn read_words(pid: Pid, addrs: &[u64], values: &mut Vec<u64>) {
    values.clear();
    if addrs.is_empty() {
        return;
    }
    let mut buf = [0u8; 8 * MAX_WORDS];
    let n = addrs.len().min(MAX_WORDS);
    let remote: Vec<RemoteIoVec> = addrs
        .iter()
        .take(n)
        .map(|&a| RemoteIoVec {
            base: a as usize,
            len: 8,
        })
        .collect();
    let (used, _) = buf.split_at_mut(8 * n);
    let got = {
        let mut local = [IoSliceMut::new(used)];
        process_vm_readv(pid, &mut local, &remote).unwrap_or(0)
    };
    if got == 8 * n {
        values.extend(
            used.chunks_exact(8)
                .map(|c| u64::from_le_bytes(c.try_into().unwrap_or_default())),
        );
        return;
    }
    // Some word is unreadable or crosses into an unreadable page: one by one.
    for &a in addrs.iter().take(n) {
        let mut w = [0u8; 8];
        let got = read_bytes(pid, a, &mut w);
        if got < 8 {
            w = [0; 8];
        }
        values.push(u64::from_le_bytes(w));
    }
}

/// The instruction a thread is about to execute, with what its step needs.
#[derive(Debug)]
struct Pending {
    opcode: [u8; 15],
    len: usize,
    dump: RegDump,
    /// The operand words, then the words a system call may write.
    words: Vec<u64>,
    old: Vec<u64>,
    operand_words: usize,
    /// A system call: its number and arguments.
    syscall: Option<(u64, [u64; 6])>,
    /// How it may leave the ranges.
    flow: Flow,
}

/// How an instruction may leave the ranges: what tells where the thread comes back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Flow {
    /// A call: it comes back at the next instruction (the return address it pushes).
    Call(u64),
    /// A return: to a caller outside; nothing to wait for.
    Return,
    /// A jump or anything else (a tail call, a PLT stub's `jmp`): maybe back at the return
    /// address on the stack.
    Other,
}

/// Why a thread is at a pc outside the ranges: what may bring it back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Left {
    /// Its last instruction in a range did this.
    Step(Flow),
    /// A signal handler runs; the interrupted pc (in a range) is where it returns.
    Signal(Option<u64>),
    /// It hit a breakpoint that is not in a range (the resolution point): not a gap.
    Breakpoint,
}

/// The ranges to record and what is still to be found.
#[derive(Debug)]
struct Scope {
    ranges: Vec<(u64, u64)>,
    /// Modules not mapped yet.
    missing: Vec<String>,
    /// Entry points whose breakpoint is not set yet (not mapped yet).
    unplanted: Vec<u64>,
    /// Where to look for them again: the program's entry point (`AT_ENTRY`), which a
    /// dynamically linked program reaches after the loader mapped its libraries.
    resolve_at: Option<u64>,
}

#[derive(Debug)]
struct Thread {
    debug: DebugRegs,
    pending: Option<Pending>,
    /// The signal given to the last restart: a handler may run instead of the pending
    /// instruction.
    injected: Option<Signal>,
    /// The thread's XSAVE area as last read, and whether it may have changed since
    /// (after anything but an integer instruction, or a signal): one system call a step
    /// saved on integer code.
    xstate: Vec<u8>,
    xstate_stale: bool,
    /// Running at full speed outside the ranges (`PTRACE_CONT`), until a breakpoint.
    free: bool,
    /// The breakpoint whose byte was put back for this thread's step.
    over: Option<u64>,
    /// The pc a signal interrupted (where its handler returns).
    interrupted: Option<u64>,
}

/// What the tracer knows and keeps. Every wait is `__WNOTHREAD`: only this thread's
/// children, so that recordings on several threads of one process stay apart.
struct Tracer<W: Write> {
    recorder: Recorder<W>,
    leader: Pid,
    threads: HashMap<Pid, Thread>,
    /// Tids announced by a clone event whose first stop has not come yet, and pids of
    /// forked children (to detach); stops of unknown pids seen before their event.
    new_threads: HashSet<Pid>,
    forks: HashSet<Pid>,
    early: HashSet<Pid>,
    operands: Operands,
    xstate: Vec<u8>,
    values: Vec<u64>,
    ranges: Vec<(u64, u64)>,
    summary: Summary,
    max: u64,
    /// Recording is over (`--max` reached, or execve): threads are detached at their next
    /// stop.
    stopping: bool,
    /// [`Options::fixed_random`].
    fixed_random: bool,
    notes: Box<dyn FnMut(&str)>,
    /// `--range`/`--module`: `None` records everything.
    scope: Option<Scope>,
    /// The breakpoints in the program's memory (shared by its threads), with the bytes
    /// they replace; every address ever planted (to recognise a hit after removal); how
    /// many threads are stepping over each (its byte put back meanwhile).
    breakpoints: BTreeMap<u64, u8>,
    ever_planted: HashSet<u64>,
    over_count: HashMap<u64, u32>,
    /// Pids of vforked children (they share the memory: their breakpoints stay).
    vforks: HashSet<Pid>,
    /// The ranges' starts as hardware breakpoints (DR0–DR3 of each thread, armed while it
    /// runs free), when there are at most four ranges and no module: no byte of the program
    /// changes for them, so no thread can slip past while another steps over one.
    hw_entries: Vec<u64>,
}

/// Runs the program under ptrace and records it; see [`crate::record`].
pub fn record<W: Write>(
    launch: &Launch,
    program: &OsStr,
    args: &[OsString],
    out: W,
    opts: &Options,
    notes: Box<dyn FnMut(&str)>,
) -> Result<(W, Summary), Error> {
    let header = Header::new(Arch::X64, &opts.path);
    let writer = Writer::new(out, &header).map_err(Error::Write)?;
    // Only the words that changed since the previous block: x64dbg's reader gets the same
    // state, and a step takes about a quarter fewer register entries than x64dbg's own
    // rule (which also lists a word in the block before it changes).
    let recorder = Recorder::new(
        writer,
        RecorderOptions {
            lookahead: false,
            ..RecorderOptions::default()
        },
    );
    let start = Instant::now();
    let leader = spawn(launch, program, args)?;
    if opts.fixed_random {
        fix_at_random(leader)?;
    }
    let mut tracer = Tracer {
        recorder,
        leader,
        threads: HashMap::new(),
        new_threads: HashSet::new(),
        forks: HashSet::new(),
        early: HashSet::new(),
        operands: Operands::new(),
        xstate: vec![0; XSTATE_BUF],
        values: Vec::new(),
        ranges: Vec::new(),
        summary: Summary::default(),
        max: opts.max.unwrap_or(u64::MAX),
        stopping: opts.max == Some(0),
        fixed_random: opts.fixed_random,
        notes,
        scope: (!opts.ranges.is_empty() || !opts.modules.is_empty()).then(|| Scope {
            ranges: opts.ranges.clone(),
            missing: opts.modules.clone(),
            unplanted: opts.ranges.iter().map(|&(start, _)| start).collect(),
            resolve_at: None,
        }),
        breakpoints: BTreeMap::new(),
        ever_planted: HashSet::new(),
        over_count: HashMap::new(),
        vforks: HashSet::new(),
        hw_entries: Vec::new(),
    };
    let result = tracer.run();
    if result.is_err() {
        // Whatever went wrong, the program must not stay stopped under us.
        let _ = nix::sys::signal::kill(leader, Signal::SIGKILL);
        let _ = waitpid(leader, Some(WaitPidFlag::__WNOTHREAD));
    }
    result?;
    tracer.summary.elapsed = start.elapsed();
    if let Some(scope) = &tracer.scope {
        tracer.summary.ranges.clone_from(&scope.ranges);
    }
    let summary = core::mem::take(&mut tracer.summary);
    let out = tracer.recorder.finish().map_err(Error::Write)?;
    Ok((out, summary))
}

/// Starts the helper, which makes itself a tracee and executes the program, and waits
/// for the stop at the program's first instruction.
fn spawn(launch: &Launch, program: &OsStr, args: &[OsString]) -> Result<Pid, Error> {
    let child = std::process::Command::new(&launch.helper)
        .args(&launch.helper_args)
        .arg(program)
        .args(args)
        .spawn()
        .map_err(|source| Error::Spawn {
            helper: launch.helper.display().to_string(),
            source,
        })?;
    let pid = Pid::from_raw(i32::try_from(child.id()).unwrap_or(i32::MAX));
    match waitpid(pid, Some(WaitPidFlag::__WNOTHREAD)).map_err(ptrace_err("waitpid"))? {
        WaitStatus::Stopped(_, Signal::SIGTRAP) => {}
        WaitStatus::Exited(_, code) => return Err(Error::NotStarted { code }),
        other => {
            let _ = nix::sys::signal::kill(pid, Signal::SIGKILL);
            let _ = waitpid(pid, Some(WaitPidFlag::__WNOTHREAD));
            return Err(Error::Unexpected(format!(
                "{other:?} before the program's first instruction"
            )));
        }
    }
    let options = PtraceOptions::PTRACE_O_TRACECLONE
        | PtraceOptions::PTRACE_O_TRACEFORK
        | PtraceOptions::PTRACE_O_TRACEVFORK
        | PtraceOptions::PTRACE_O_TRACEEXEC
        | PtraceOptions::PTRACE_O_EXITKILL;
    ptrace::setoptions(pid, options).map_err(ptrace_err("PTRACE_SETOPTIONS"))?;
    Ok(pid)
}

impl<W: Write> Tracer<W> {
    fn run(&mut self) -> Result<(), Error> {
        let leader = self.leader;
        if self.stopping {
            self.scope = None;
        }
        self.setup_scope(leader)?;
        self.start_thread(leader)?;
        loop {
            let status = match waitpid(None, Some(WaitPidFlag::__WALL | WaitPidFlag::__WNOTHREAD)) {
                Ok(s) => s,
                Err(Errno::EINTR) => continue,
                Err(Errno::ECHILD) => {
                    return Err(Error::Unexpected("the program vanished".into()));
                }
                Err(e) => return Err(ptrace_err("waitpid")(e)),
            };
            let exit = match status {
                WaitStatus::Stopped(pid, sig) => {
                    self.on_stop(pid, sig)?;
                    None
                }
                WaitStatus::PtraceEvent(pid, _, event) => {
                    self.on_event(pid, event)?;
                    None
                }
                WaitStatus::Exited(pid, code) => Some((pid, Exit::Code(code))),
                WaitStatus::Signaled(pid, sig, _) => Some((pid, Exit::Signal(sig as i32))),
                _ => None,
            };
            if let Some((pid, exit)) = exit
                && self.on_exit(pid)?
            {
                self.summary.exit = exit;
                return Ok(());
            }
        }
    }

    /// Resumes `pid` one instruction (or detaches it once recording is over).
    fn resume(&mut self, pid: Pid, sig: Option<Signal>) -> Result<(), Error> {
        let r = if self.stopping {
            if self.threads.remove(&pid).is_some_and(|t| t.free) {
                self.arm(pid, false);
            }
            ptrace::detach(pid, sig)
        } else if self.threads.get(&pid).is_some_and(|t| t.free) {
            ptrace::cont(pid, sig)
        } else {
            if !self.breakpoints.is_empty()
                && let Some(t) = self.threads.get(&pid)
                && t.over.is_none()
                && let Some(ip) = t.pending.as_ref().map(|p| p.dump.ip())
                && self.breakpoints.contains_key(&ip)
            {
                self.begin_over(pid, ip);
            }
            ptrace::step(pid, sig)
        };
        match r {
            // The thread died meanwhile (exit_group by another thread): its exit comes.
            Ok(()) | Err(Errno::ESRCH) => Ok(()),
            Err(e) => Err(ptrace_err("PTRACE_SINGLESTEP")(e)),
        }
    }

    fn start_thread(&mut self, pid: Pid) -> Result<(), Error> {
        let mut debug = [0u64; 6];
        for (slot, n) in debug.iter_mut().zip([0usize, 1, 2, 3, 6, 7]) {
            let offset = DEBUG_REGS_OFFSET.saturating_add(8 * n);
            *slot = ptrace::read_user(pid, offset as ptrace::AddressType).unwrap_or(0) as u64;
        }
        self.threads.insert(
            pid,
            Thread {
                debug,
                pending: None,
                injected: None,
                xstate: Vec::new(),
                xstate_stale: true,
                free: false,
                over: None,
                interrupted: None,
            },
        );
        self.summary.threads = self.summary.threads.saturating_add(1);
        if self.stopping {
            return self.resume(pid, None);
        }
        for (k, &at) in self.hw_entries.iter().enumerate() {
            let offset = DEBUG_REGS_OFFSET.saturating_add(8 * k);
            ptrace::write_user(pid, offset as ptrace::AddressType, at as nix::libc::c_long)
                .map_err(ptrace_err("PTRACE_POKEUSER (debug register)"))?;
        }
        let regs = self.regs(pid)?;
        if self.in_range(regs.rip) {
            self.capture(pid, &regs);
        } else if let Some(t) = self.threads.get_mut(&pid) {
            t.free = true;
            self.arm(pid, true);
        }
        self.resume(pid, None)
    }

    fn regs(&mut self, pid: Pid) -> Result<UserRegs, Error> {
        let r = ptrace::getregs(pid).map_err(ptrace_err("PTRACE_GETREGS"))?;
        Ok(user_regs(&r))
    }

    /// A stop with `sig`: a finished step (SIGTRAP), a new thread's or child's first stop,
    /// or a signal on its way to the program.
    fn on_stop(&mut self, pid: Pid, sig: Signal) -> Result<(), Error> {
        if !self.threads.contains_key(&pid) {
            return self.on_new(pid);
        }
        let mut raw = match ptrace::getregs(pid) {
            Ok(r) => r,
            Err(Errno::ESRCH) => return Ok(()),
            Err(e) => return Err(ptrace_err("PTRACE_GETREGS")(e)),
        };
        let mut regs = user_regs(&raw);
        let (free, over) = match self.threads.get_mut(&pid) {
            Some(t) => (t.free, t.over.take()),
            None => (false, None),
        };
        if let Some(at) = over {
            self.end_over(pid, at);
        }
        if free && sig == Signal::SIGTRAP && self.hw_entries.contains(&regs.rip) {
            // A hardware breakpoint at a range's start (it stops before the instruction).
            self.arm(pid, false);
            return self.come_back(pid, &regs);
        }
        if free {
            let at = regs.rip.wrapping_sub(1);
            if sig != Signal::SIGTRAP || !self.ever_planted.contains(&at) {
                // The program's own signal.
                return self.resume(pid, Some(sig));
            }
            // One of our breakpoints: back in a range (or at the resolution point). The
            // int3 ran: the pc goes back to the instruction it replaces.
            raw.rip = at;
            regs.rip = at;
            ptrace::setregs(pid, raw).map_err(ptrace_err("PTRACE_SETREGS"))?;
            return self.come_back(pid, &regs);
        }
        let (injected, interrupted) = match self.threads.get_mut(&pid) {
            Some(t) => (t.injected.take(), t.interrupted.take()),
            None => (None, None),
        };
        if sig == Signal::SIGTRAP && (injected.is_some() || !self.own_trap(pid)) {
            let left = if let Some(s) = injected
                && caught(pid, s)
            {
                // The handler's first instruction: the pending one did not run.
                if let Some(t) = self.threads.get_mut(&pid) {
                    t.pending = None;
                }
                Left::Signal(interrupted)
            } else {
                Left::Step(self.finish_pending(pid, &regs)?)
            };
            if self.stopping {
                return self.resume(pid, None);
            }
            self.prepare(pid, &regs, left)?;
            return self.resume(pid, None);
        }
        // A signal for the program. The pending instruction ran if the pc moved (a system
        // call that the signal interrupted, or a fault after it); it did not if the signal
        // came first, or the instruction faulted.
        let moved = self
            .threads
            .get(&pid)
            .and_then(|t| t.pending.as_ref())
            .is_some_and(|p| p.dump.ip() != regs.rip);
        if moved {
            let flow = self.finish_pending(pid, &regs)?;
            if !self.stopping {
                self.prepare(pid, &regs, Left::Step(flow))?;
            }
        }
        if let Some(t) = self.threads.get_mut(&pid)
            && !t.free
        {
            t.injected = Some(sig);
            t.interrupted = Some(regs.rip);
            t.xstate_stale = true;
        }
        self.resume(pid, Some(sig))
    }

    /// Whether a `SIGTRAP` stop of stepping `pid` is the program's own signal, to deliver,
    /// rather than the step's report: its instruction was `int3` (the trap it raises), or
    /// a system call during which a process sent the signal (`raise`, `kill`: a signal sent
    /// by a process has `si_code` ≤ 0; the step's own report, `TRAP_BRKPT`, merges into it).
    fn own_trap(&self, pid: Pid) -> bool {
        let Some(p) = self.threads.get(&pid).and_then(|t| t.pending.as_ref()) else {
            return false;
        };
        match p.opcode.get(..p.len) {
            Some([0xcc] | [0xcd, 0x03]) => true,
            Some(op) if op == SYSCALL => {
                ptrace::getsiginfo(pid).is_ok_and(|info| info.si_code <= 0)
            }
            _ => false,
        }
    }

    /// The first stop of a thread or forked child.
    fn on_new(&mut self, pid: Pid) -> Result<(), Error> {
        if self.new_threads.remove(&pid) {
            return self.start_thread(pid);
        }
        if self.forks.remove(&pid) {
            return self.detach_fork(pid);
        }
        // Before its parent's event: wait for it.
        self.early.insert(pid);
        Ok(())
    }

    fn detach_fork(&mut self, pid: Pid) -> Result<(), Error> {
        // A forked child has a copy of the memory with our breakpoints in it: put the bytes
        // back before it runs untraced. A vforked one shares the parent's: they stay.
        if !self.vforks.remove(&pid) {
            for (&at, &byte) in &self.breakpoints {
                let _ = poke_byte(pid, at, byte);
            }
        }
        let _ = ptrace::detach(pid, None);
        self.summary.forks.push(pid.as_raw() as u32);
        (self.notes)(&format!(
            "tracekit record: process {pid} (forked) runs untraced"
        ));
        Ok(())
    }

    fn on_event(&mut self, pid: Pid, event: i32) -> Result<(), Error> {
        let new = || ptrace::getevent(pid).map(|m| Pid::from_raw(m as i32));
        if event == Event::PTRACE_EVENT_CLONE as i32 {
            if let Ok(tid) = new() {
                if self.early.remove(&tid) {
                    self.start_thread(tid)?;
                } else {
                    self.new_threads.insert(tid);
                }
            }
        } else if event == Event::PTRACE_EVENT_FORK as i32
            || event == Event::PTRACE_EVENT_VFORK as i32
        {
            if let Ok(child) = new() {
                if event == Event::PTRACE_EVENT_VFORK as i32 {
                    self.vforks.insert(child);
                }
                if self.early.remove(&child) {
                    self.detach_fork(child)?;
                } else {
                    self.forks.insert(child);
                }
            }
        } else if event == Event::PTRACE_EVENT_EXEC as i32 {
            // The execve ran (its step shows no memory); the old image is gone, and with it
            // the trace. Other threads were ended by the kernel.
            let regs = self.regs(pid)?;
            self.finish_pending(pid, &regs)?;
            self.threads.retain(|&t, _| t == pid);
            self.stopping = true;
            // The breakpoints went with the old image.
            self.breakpoints.clear();
            self.over_count.clear();
            self.summary.execed = true;
            (self.notes)("tracekit record: the program called execve: the new image runs untraced");
            return self.resume(pid, None);
        }
        // The thread is inside a system call: its step (or free run) goes on.
        let r = if self.threads.get(&pid).is_some_and(|t| t.free) {
            ptrace::cont(pid, None)
        } else {
            ptrace::step(pid, None)
        };
        match r {
            Ok(()) | Err(Errno::ESRCH) => Ok(()),
            Err(e) => Err(ptrace_err("PTRACE_SINGLESTEP")(e)),
        }
    }

    /// A thread ended; `true` when it was the program (the leader, reported last).
    fn on_exit(&mut self, pid: Pid) -> Result<bool, Error> {
        if let Some(t) = self.threads.remove(&pid)
            && let Some(p) = t.pending
            && matches!(p.syscall, Some((SYS_EXIT | SYS_EXIT_GROUP, _)))
        {
            // The thread's last instruction; its memory is gone.
            let mut p = p;
            p.words.clear();
            p.old.clear();
            p.operand_words = 0;
            p.syscall = None;
            self.emit(pid, p, &[], None)?;
        }
        Ok(pid == self.leader)
    }

    /// Completes the pending instruction of `pid` with the state after it, `regs`.
    /// Returns how it may have left the ranges.
    fn finish_pending(&mut self, pid: Pid, regs: &UserRegs) -> Result<Flow, Error> {
        let Some(p) = self.threads.get_mut(&pid).and_then(|t| t.pending.take()) else {
            return Ok(Flow::Return);
        };
        let flow = p.flow;
        if self.fixed_random
            && let Some((SYS_GETRANDOM, [buf, ..])) = p.syscall
            && let Ok(n @ 1..) = i64::try_from(regs.rax)
        {
            zero(pid, buf, n.unsigned_abs())?;
        }
        let mut new = core::mem::take(&mut self.values);
        read_words(pid, &p.words, &mut new);
        let result = self.emit(pid, p, &new, Some(regs.rax as i64));
        self.values = new;
        result.map(|()| flow)
    }

    /// Hands a finished instruction to the recorder: `new` holds the words' values after it.
    /// `rax` is the register after it (a system call's result).
    fn emit(&mut self, pid: Pid, p: Pending, new: &[u64], rax: Option<i64>) -> Result<(), Error> {
        // Past `--max`, the instructions other threads finish are not recorded.
        if self.stopping {
            return Ok(());
        }
        let mut mem = Vec::with_capacity(p.words.len());
        let mut push = |address: u64, old: u64, after: Option<&u64>| {
            let new = after.copied().filter(|&v| v != old);
            mem.push(MemAccess {
                flags: u8::from(new.is_none()),
                address,
                old,
                new,
            });
        };
        for k in 0..p.operand_words {
            if let (Some(&a), Some(&o)) = (p.words.get(k), p.old.get(k)) {
                push(a, o, new.get(k));
            }
        }
        if let Some((nr, args)) = p.syscall {
            // What the call wrote, by its result: keep the words of those ranges.
            self.ranges.clear();
            let mut read = |addr: u64, buf: &mut [u8]| read_bytes(pid, addr, buf) == buf.len();
            if let Some(ret) = rax {
                kernel_writes(nr, args, Some(ret), &mut read, &mut self.ranges);
            }
            let mut wanted = Vec::new();
            let needed = words_of(&self.ranges, usize::MAX, &mut wanted);
            let mut kept = 0u64;
            for k in p.operand_words..p.words.len() {
                if let (Some(&a), Some(&o)) = (p.words.get(k), p.old.get(k))
                    && wanted.contains(&a)
                {
                    push(a, o, new.get(k));
                    kept = kept.saturating_add(1);
                }
            }
            self.summary.kernel_words = self.summary.kernel_words.saturating_add(kept);
            self.summary.cut_words = self
                .summary
                .cut_words
                .saturating_add(needed.saturating_sub(kept));
        }
        let step = Step {
            thread: pid.as_raw() as u32,
            opcode: p.opcode.get(..p.len).unwrap_or(&[0x90]).to_vec(),
            regs: p.dump,
            mem,
        };
        self.recorder.step(step).map_err(Error::Write)?;
        self.summary.instructions = self.summary.instructions.saturating_add(1);
        if self.summary.instructions >= self.max && !self.stopping {
            self.stopping = true;
            self.summary.stopped_at_max = true;
            // The threads are detached at their next stop: no breakpoint may stay.
            self.unplant_all(pid);
        }
        Ok(())
    }

    /// Records what the instruction at `regs.rip` of `pid` needs before it runs.
    fn capture(&mut self, pid: Pid, regs: &UserRegs) {
        let Some(thread) = self.threads.get_mut(&pid) else {
            return;
        };
        if thread.xstate_stale {
            let n = xstate::read(pid, &mut self.xstate).unwrap_or(0);
            thread.xstate.clear();
            thread
                .xstate
                .extend_from_slice(self.xstate.get(..n).unwrap_or_default());
        }
        let dump = regdump(regs, &thread.xstate, &thread.debug);
        let mut opcode = [0u8; 15];
        let got = read_bytes(pid, regs.rip, &mut opcode);
        // The bytes our breakpoints replace.
        if !self.breakpoints.is_empty() {
            let end = regs.rip.saturating_add(got as u64);
            for (&at, &byte) in self.breakpoints.range(regs.rip..end) {
                if let Some(b) = opcode.get_mut((at - regs.rip) as usize) {
                    *b = byte;
                }
            }
        }
        let instruction = operands::decode(regs.rip, opcode.get(..got).unwrap_or_default());
        // An undecodable or unreadable instruction is stored as one byte, as x64dbg does.
        let len = if instruction.is_invalid() {
            1
        } else {
            instruction.len()
        };
        thread.xstate_stale = operands::may_change_vector_state(&instruction);
        let flow = match instruction.flow_control() {
            FlowControl::Call | FlowControl::IndirectCall => Flow::Call(instruction.next_ip()),
            FlowControl::Return => Flow::Return,
            _ => Flow::Other,
        };
        let mut words = Vec::new();
        let cut = self.operands.words(&instruction, regs, &mut words);
        self.summary.cut_words = self.summary.cut_words.saturating_add(cut);
        let operand_words = words.len();
        let syscall = (opcode.get(..2) == Some(&SYSCALL[..])).then_some((
            regs.rax,
            [regs.rdi, regs.rsi, regs.rdx, regs.r10, regs.r8, regs.r9],
        ));
        if let Some((nr, args)) = syscall {
            self.ranges.clear();
            let mut read = |addr: u64, buf: &mut [u8]| read_bytes(pid, addr, buf) == buf.len();
            kernel_writes(nr, args, None, &mut read, &mut self.ranges);
            let room = MAX_WORDS.saturating_sub(words.len());
            let mut k = Vec::new();
            words_of(&self.ranges, room, &mut k);
            words.extend(k);
        }
        let mut old = Vec::new();
        read_words(pid, &words, &mut old);
        if let Some(t) = self.threads.get_mut(&pid) {
            t.pending = Some(Pending {
                opcode,
                len,
                dump,
                words,
                old,
                operand_words,
                syscall,
                flow,
            });
        }
    }
}

/// Ranges: what runs free, the breakpoints that bring it back.
impl<W: Write> Tracer<W> {
    /// Whether `addr` is to be recorded.
    fn in_range(&self, addr: u64) -> bool {
        self.scope
            .as_ref()
            .is_none_or(|s| contains(&s.ranges, addr))
    }

    /// At the program's first instruction: the modules mapped already (the executable, the
    /// loader), the breakpoints at the entry points, and for what is not mapped yet a
    /// breakpoint at the program's entry point, where the loader has mapped the libraries.
    fn setup_scope(&mut self, pid: Pid) -> Result<(), Error> {
        if self.scope.is_none() {
            return Ok(());
        }
        let rip = self.regs(pid)?.rip;
        if let Some(scope) = &mut self.scope
            && scope.missing.is_empty()
            && (1..=4).contains(&scope.unplanted.len())
        {
            // Probe: the debug registers may be refused (some virtual machines).
            let probe = ptrace::write_user(
                pid,
                DEBUG_REGS_OFFSET as ptrace::AddressType,
                scope.unplanted.first().copied().unwrap_or(0) as nix::libc::c_long,
            );
            if probe.is_ok() {
                self.hw_entries = core::mem::take(&mut scope.unplanted);
                // The trace shows the thread's own debug registers (start_thread reads them
                // before setting ours).
                let _ = ptrace::write_user(pid, DEBUG_REGS_OFFSET as ptrace::AddressType, 0);
            }
        }
        let entry = auxv_value(pid, AT_ENTRY)?;
        // A static program starts at its entry point: nothing will be mapped later.
        let last = entry.is_none_or(|e| e == rip);
        self.resolve(pid, last)?;
        if let Some(scope) = &mut self.scope
            && !last
            && (!scope.missing.is_empty() || !scope.unplanted.is_empty())
        {
            scope.resolve_at = entry;
            if let Some(e) = entry {
                self.plant(pid, e)
                    .map_err(ptrace_err("setting a breakpoint at the entry point"))?;
            }
        }
        Ok(())
    }

    /// Looks for the missing modules in `/proc/PID/maps` and sets the breakpoints not set
    /// yet. `last`: nothing more will be mapped, so a module still missing is an error and
    /// an entry point not mapped is given up (said in a note).
    fn resolve(&mut self, pid: Pid, last: bool) -> Result<(), Error> {
        let Some(scope) = &mut self.scope else {
            return Ok(());
        };
        if last {
            scope.resolve_at = None;
        }
        let missing = core::mem::take(&mut scope.missing);
        let mut entries = core::mem::take(&mut scope.unplanted);
        let mut still = Vec::new();
        if !missing.is_empty() {
            let text = std::fs::read_to_string(format!("/proc/{pid}/maps"))
                .map_err(|e| Error::Unexpected(format!("cannot read /proc/{pid}/maps: {e}")))?;
            let maps = scope::parse_maps(&text);
            for name in missing {
                match scope::find_module(&name, &maps, |p| std::fs::read(p).ok()) {
                    Some(m) => {
                        let spans: Vec<String> = m
                            .ranges
                            .iter()
                            .map(|(a, b)| format!("{a:#x}:{b:#x}"))
                            .collect();
                        (self.notes)(&format!(
                            "tracekit record: --module {name}: {} {} ({} entry points)",
                            m.path,
                            spans.join(" "),
                            m.entries.len()
                        ));
                        scope.ranges.extend(m.ranges);
                        entries.extend(m.entries);
                    }
                    None if last => {
                        let mut mapped: Vec<&str> = maps
                            .iter()
                            .filter(|m| !m.path.is_empty())
                            .map(|m| {
                                std::path::Path::new(&m.path)
                                    .file_name()
                                    .and_then(|n| n.to_str())
                                    .unwrap_or(&m.path)
                            })
                            .collect();
                        mapped.dedup();
                        return Err(Error::ModuleNotFound {
                            name,
                            mapped: mapped.join(", "),
                        });
                    }
                    None => still.push(name),
                }
            }
        }
        scope.missing = still;
        let mut unplanted = Vec::new();
        for at in entries {
            if self.plant(pid, at).is_err() {
                unplanted.push(at);
            }
        }
        if last && !unplanted.is_empty() {
            (self.notes)(&format!(
                "tracekit record: {} entry points not mapped at the program's entry point (first {:#x}): entries there are not caught",
                unplanted.len(),
                unplanted.first().copied().unwrap_or(0)
            ));
            unplanted.clear();
        }
        if let Some(scope) = &mut self.scope {
            scope.unplanted = unplanted;
        }
        Ok(())
    }

    /// A free thread stopped at one of our breakpoints, before the instruction at
    /// `regs.rip`: it steps again (its extended registers re-read) and goes on.
    fn come_back(&mut self, pid: Pid, regs: &UserRegs) -> Result<(), Error> {
        if !self.stopping {
            if let Some(t) = self.threads.get_mut(&pid) {
                t.free = false;
                t.xstate_stale = true;
            }
            self.prepare(pid, regs, Left::Breakpoint)?;
        }
        self.resume(pid, None)
    }

    /// The thread is stopped at `regs.rip` before an instruction: records it if in a range,
    /// else lets the thread run free, with a breakpoint where it may come back.
    fn prepare(&mut self, pid: Pid, regs: &UserRegs, left: Left) -> Result<(), Error> {
        if self
            .scope
            .as_ref()
            .is_some_and(|s| s.resolve_at == Some(regs.rip))
        {
            self.resolve(pid, true)?;
            // The resolution point's breakpoint has done its work: a thread running free
            // from here must not hit it again.
            if !self.in_range(regs.rip)
                && let Some(byte) = self.breakpoints.remove(&regs.rip)
            {
                poke_byte(pid, regs.rip, byte).map_err(ptrace_err("PTRACE_POKEDATA"))?;
            }
        }
        if self.in_range(regs.rip) {
            self.capture(pid, regs);
            return Ok(());
        }
        let back = match left {
            Left::Step(Flow::Call(next)) => Some(next),
            Left::Step(Flow::Other) => self.return_address(pid, regs.rsp),
            Left::Signal(at) => at,
            Left::Step(Flow::Return) | Left::Breakpoint => None,
        };
        if let Some(at) = back.filter(|&a| self.in_range(a)) {
            // Not fatal: the return is then missed.
            let _ = self.plant(pid, at);
        }
        if left != Left::Breakpoint {
            self.summary.gaps = self.summary.gaps.saturating_add(1);
        }
        if let Some(t) = self.threads.get_mut(&pid) {
            t.free = true;
            t.pending = None;
            t.xstate_stale = true;
        }
        self.arm(pid, true);
        Ok(())
    }

    /// Arms (a thread about to run free) or disarms (about to be stepped or detached) the
    /// hardware breakpoints of `pid`: DR7's local enable bits, execution, one byte.
    fn arm(&mut self, pid: Pid, on: bool) {
        if self.hw_entries.is_empty() {
            return;
        }
        let dr7: u64 = if on {
            (0..self.hw_entries.len()).map(|k| 1u64 << (2 * k)).sum()
        } else {
            0
        };
        let offset = DEBUG_REGS_OFFSET.saturating_add(8 * 7);
        // A thread that died meanwhile: its exit comes.
        let _ = ptrace::write_user(pid, offset as ptrace::AddressType, dr7 as nix::libc::c_long);
    }

    /// After a jump out of the ranges (a PLT stub, a tail call): the first of the three
    /// words at `rsp` that is a return address into a range (the lazy-binding PLT pushes
    /// two words over it before jumping to the loader).
    fn return_address(&self, pid: Pid, rsp: u64) -> Option<u64> {
        let mut words = [0u8; 24];
        let got = read_bytes(pid, rsp, &mut words);
        words
            .get(..got)
            .unwrap_or_default()
            .chunks_exact(8)
            .map(|w| u64::from_le_bytes(w.try_into().unwrap_or_default()))
            .find(|&at| self.is_return_address(pid, at))
    }

    /// Whether `at` is in a range and a call instruction ends just before it (a breakpoint
    /// must only ever replace the first byte of an instruction).
    fn is_return_address(&self, pid: Pid, at: u64) -> bool {
        if !self.in_range(at) || at < 7 {
            return false;
        }
        let mut before = [0u8; 7];
        if read_bytes(pid, at - 7, &mut before) != 7 {
            return false;
        }
        for (&at_, &byte) in self.breakpoints.range(at - 7..at) {
            if let Some(b) = before.get_mut((at_ - (at - 7)) as usize) {
                *b = byte;
            }
        }
        // call rel32 (5), call [rip+d32] (6), call reg (2, 3 with REX), call [reg+d8] (3).
        [5usize, 6, 2, 3, 7].into_iter().any(|len| {
            let i = operands::decode(at - len as u64, before.get(7 - len..).unwrap_or_default());
            let call = matches!(
                i.flow_control(),
                FlowControl::Call | FlowControl::IndirectCall
            );
            call && i.len() == len
        })
    }

    /// Sets a breakpoint at `at` (through stopped `pid`: the memory is the process's).
    fn plant(&mut self, pid: Pid, at: u64) -> Result<(), Errno> {
        if self.breakpoints.contains_key(&at) {
            return Ok(());
        }
        let byte = poke_byte(pid, at, INT3)?;
        self.breakpoints.insert(at, byte);
        self.ever_planted.insert(at);
        Ok(())
    }

    /// Puts the byte of the breakpoint at `at` back for one step of `pid`.
    fn begin_over(&mut self, pid: Pid, at: u64) {
        let n = self.over_count.entry(at).or_insert(0);
        if *n == 0
            && let Some(&byte) = self.breakpoints.get(&at)
        {
            let _ = poke_byte(pid, at, byte);
        }
        *n = n.saturating_add(1);
        if let Some(t) = self.threads.get_mut(&pid) {
            t.over = Some(at);
        }
    }

    /// The step over `at` is done: the breakpoint goes back once no thread steps over it.
    fn end_over(&mut self, pid: Pid, at: u64) {
        let Some(n) = self.over_count.get_mut(&at) else {
            return;
        };
        *n = n.saturating_sub(1);
        if *n == 0 {
            self.over_count.remove(&at);
            if !self.stopping && self.breakpoints.contains_key(&at) {
                let _ = poke_byte(pid, at, INT3);
            }
        }
    }

    /// Removes every breakpoint (recording is over).
    fn unplant_all(&mut self, pid: Pid) {
        for (at, byte) in core::mem::take(&mut self.breakpoints) {
            let _ = poke_byte(pid, at, byte);
        }
        self.over_count.clear();
    }
}

/// Writes `byte` at `at` in stopped `pid` (`PTRACE_POKEDATA` writes read-only code too);
/// returns the byte it replaced.
fn poke_byte(pid: Pid, at: u64, byte: u8) -> Result<u8, Errno> {
    let word_at = at & !7;
    let shift = (at - word_at) * 8;
    let word = ptrace::read(pid, word_at as ptrace::AddressType)? as u64;
    let old = (word >> shift) as u8;
    let new = word & !(0xff << shift) | u64::from(byte) << shift;
    ptrace::write(
        pid,
        word_at as ptrace::AddressType,
        new as nix::libc::c_long,
    )?;
    Ok(old)
}

/// `AT_ENTRY` of the auxiliary vector: the program's entry point.
const AT_ENTRY: u64 = 9;

/// The value of `key` in the auxiliary vector of `pid`.
fn auxv_value(pid: Pid, key: u64) -> Result<Option<u64>, Error> {
    let auxv = std::fs::read(format!("/proc/{pid}/auxv"))
        .map_err(|e| Error::Unexpected(format!("cannot read /proc/{pid}/auxv: {e}")))?;
    Ok(auxv.chunks_exact(16).find_map(|pair| {
        let (t, v) = pair.split_at(8);
        let t = u64::from_le_bytes(t.try_into().ok()?);
        let v = u64::from_le_bytes(v.try_into().ok()?);
        (t == key).then_some(v)
    }))
}

/// `AT_RANDOM` of the auxiliary vector: the address of 16 random bytes.
const AT_RANDOM: u64 = 25;

/// Overwrites the 16 `AT_RANDOM` bytes of stopped `pid` (before its first instruction)
/// with zeros, so that the stack-protector canary and pointer guard glibc derives from
/// them are the same in every run.
fn fix_at_random(pid: Pid) -> Result<(), Error> {
    let Some(at) = auxv_value(pid, AT_RANDOM)? else {
        return Ok(());
    };
    for k in 0..2u64 {
        let addr = at.wrapping_add(8 * k) as ptrace::AddressType;
        ptrace::write(pid, addr, 0).map_err(ptrace_err("PTRACE_POKEDATA"))?;
    }
    Ok(())
}

/// Overwrites `len` bytes at `addr` of stopped `pid` with zeros (a partial last word is
/// read and merged).
fn zero(pid: Pid, addr: u64, len: u64) -> Result<(), Error> {
    let mut at = addr;
    let end = addr.saturating_add(len.min(1 << 20));
    while at < end {
        let p = at as ptrace::AddressType;
        let left = end.saturating_sub(at);
        let word = if left >= 8 {
            0
        } else {
            let old = ptrace::read(pid, p).map_err(ptrace_err("PTRACE_PEEKDATA"))? as u64;
            old & (u64::MAX << (8 * left))
        };
        ptrace::write(pid, p, word as nix::libc::c_long).map_err(ptrace_err("PTRACE_POKEDATA"))?;
        at = at.saturating_add(8);
    }
    Ok(())
}

/// Whether `pid` has a handler for `sig` (`SigCgt` of /proc/PID/status): then the
/// kernel runs the handler instead of the interrupted instruction.
fn caught(pid: Pid, sig: Signal) -> bool {
    let Ok(status) = std::fs::read_to_string(format!("/proc/{pid}/status")) else {
        return false;
    };
    let Some(mask) = status
        .lines()
        .find_map(|l| l.strip_prefix("SigCgt:"))
        .and_then(|m| u64::from_str_radix(m.trim(), 16).ok())
    else {
        return false;
    };
    let bit = (sig as i32).saturating_sub(1);
    (0..64).contains(&bit) && mask >> bit & 1 == 1
}

/// The helper's half: makes this process a tracee, turns address-space randomisation off
/// (as GDB does) and executes `program` with `args`. Returns only on failure.
pub fn exec_traced(program: &OsStr, args: &[OsString]) -> Error {
    if let Err(errno) = ptrace::traceme() {
        return Error::Ptrace {
            what: "PTRACE_TRACEME",
            errno,
        };
    }
    if let Ok(p) = personality::get() {
        let _ = personality::set(p | Persona::ADDR_NO_RANDOMIZE);
    }
    let cstr = |s: &OsStr| CString::new(s.as_bytes()).map_err(|_| Error::BadArgument);
    let prog = match cstr(program) {
        Ok(p) => p,
        Err(e) => return e,
    };
    let mut argv = vec![prog.clone()];
    for a in args {
        match cstr(a) {
            Ok(a) => argv.push(a),
            Err(e) => return e,
        }
    }
    match nix::unistd::execvp(&prog, &argv) {
        Err(errno) => Error::Exec {
            program: program.to_string_lossy().into_owned(),
            errno,
        },
        Ok(never) => match never {},
    }
}

/// The bare loop: `PTRACE_SINGLESTEP`, `waitpid`, `PTRACE_GETREGS` until the program
/// exits; returns the steps and seconds. One thread only.
pub fn bare_step_loop(
    launch: &Launch,
    program: &OsStr,
    args: &[OsString],
) -> Result<(u64, f64), Error> {
    let start = Instant::now();
    let pid = spawn(launch, program, args)?;
    let mut steps = 0u64;
    loop {
        ptrace::step(pid, None).map_err(ptrace_err("PTRACE_SINGLESTEP"))?;
        match waitpid(pid, Some(WaitPidFlag::__WNOTHREAD)).map_err(ptrace_err("waitpid"))? {
            WaitStatus::Exited(..) | WaitStatus::Signaled(..) => break,
            _ => {
                let _ = ptrace::getregs(pid);
                steps = steps.saturating_add(1);
            }
        }
    }
    Ok((steps, start.elapsed().as_secs_f64()))
}
