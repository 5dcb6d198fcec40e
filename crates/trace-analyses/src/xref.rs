//! `xref`: every memory access that touched an address range, or every execution of a pc,
//! in instruction order: what x64dbg's "what wrote to this" and its cross-reference
//! index answer, for any trace with an instruction stream.
//!
//! Without a sidecar index it is one pass over the steps ([`Raw::scan`](trace_model::steps::Raw::scan): for x64dbg a
//! lean walk that reads only block headers, the `cip` change and the addresses), in
//! constant memory. With a usable sidecar (`tracekit index`, `trace_index`) it looks the
//! candidates up there and reads only their steps; both give the same lines.
//!
//! ```
//! use trace_analyses::xref::{XrefHit, XrefQuery, xref};
//! use trace_registry::{Ctx, Input, Options};
//!
//! let mut input = Input::open("../../testdata/x64dbg/basic.trace64".as_ref())?;
//! let handler = trace_registry::detect(&input).expect("an x64dbg trace");
//! let options = Options::default();
//! // The executions of the push at 0x7ff6a1b21001 (`tracekit dump` shows it at i = 1).
//! let query = XrefQuery { pc: Some(0x7ff6_a1b2_1001), ..XrefQuery::default() };
//! let mut hits: Vec<XrefHit> = Vec::new();
//! xref(handler, &mut input, &mut Ctx::new(&options), &query, |h| {
//!     hits.push(h.clone());
//!     Ok(())
//! })?;
//! assert_eq!(hits.first().map(|h| h.i), Some(1));
//! assert!(hits.len() > 1 && hits.iter().all(|h| h.pc == 0x7ff6_a1b2_1001));
//! # Ok::<(), trace_registry::Error>(())
//! ```

use std::fmt::Write as _;

use trace_index::{self as index, Sidecar, Visit};
use trace_model::steps::{AccessKind, Isa, ScanQuery, Step, Steps, value_hex};
use trace_model::{Ctx, Error, Handler, Input};

/// What to look for: an address range (`mem`) or a pc.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct XrefQuery {
    /// The first address and the length in bytes (`None`: one word of the target).
    pub mem: Option<(u64, Option<u64>)>,
    /// The pc whose executions to list.
    pub pc: Option<u64>,
}

/// One line of `xref`: an access in the range (with `addr`), or an execution of the pc.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct XrefHit {
    /// The instruction (step) number.
    pub i: u64,
    /// Its thread.
    pub thread: u64,
    /// Its pc.
    pub pc: u64,
    /// For an access: its address, and the bytes before and after the instruction where
    /// recorded (`None` for an execution).
    pub access: Option<HitAccess>,
}

/// The access of an [`XrefHit`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HitAccess {
    /// The first address (of the recorded word; of the part inside the range for a
    /// snapshot of collected memory).
    pub addr: u64,
    /// The value before the instruction, `0x…` (`None` where not recorded).
    pub old: Option<String>,
    /// The value after it, where recorded (x64dbg: only when it changed).
    pub new: Option<String>,
    /// With `--disasm`: the operand size, where it could be matched.
    pub size: Option<u32>,
    /// With `--disasm`: read, write, readwrite or unknown.
    pub kind: Option<AccessKind>,
}

impl XrefHit {
    /// The JSON line: `{"i":…,"thread":…,"pc":"0x…"}`, plus `"addr"`, `"old"`, `"new"`
    /// for an access (and `"size"`, `"access"` when disassembled).
    #[must_use]
    pub fn to_json(&self) -> String {
        // One allocation per line (`xref` prints one per hit), no string per piece.
        let mut s = String::with_capacity(160);
        let _ = write!(
            s,
            "{{\"i\":{},\"thread\":{},\"pc\":\"{:#x}\"",
            self.i, self.thread, self.pc
        );
        if let Some(a) = &self.access {
            let _ = write!(s, ",\"addr\":\"{:#x}\"", a.addr);
            for (key, v) in [(",\"old\":", &a.old), (",\"new\":", &a.new)] {
                s.push_str(key);
                match v {
                    Some(v) => {
                        s.push('"');
                        s.push_str(v);
                        s.push('"');
                    }
                    None => s.push_str("null"),
                }
            }
            if let Some(kind) = a.kind {
                s.push_str(",\"size\":");
                match a.size {
                    Some(n) => {
                        let _ = write!(s, "{n}");
                    }
                    None => s.push_str("null"),
                }
                let _ = write!(s, ",\"access\":\"{}\"", kind.name());
            }
        }
        s.push('}');
        s
    }
}

/// The lines of one matching step: each access in the range, or the execution.
struct Emit<'q> {
    query: &'q ScanQuery,
    isa: Isa,
    snapshot: bool,
    disasm: bool,
}

impl Emit<'_> {
    fn step(
        &self,
        step: &Step,
        on_hit: &mut dyn FnMut(&XrefHit) -> Result<(), Error>,
    ) -> Result<(), Error> {
        let mut hit = XrefHit {
            i: step.i,
            thread: step.thread,
            pc: step.pc,
            access: None,
        };
        if self.query.pc.is_some() {
            if self.query.pc == Some(step.pc) {
                on_hit(&hit)?;
            }
            return Ok(());
        }
        let Some(range) = &self.query.mem else {
            return Ok(());
        };
        for a in &step.mem {
            if !self.query.covers(a.addr, a.len) {
                continue;
            }
            let (mut old, mut new) = (step.old(a), step.new(a));
            let mut addr = a.addr;
            if self.snapshot {
                // A frame's collected block can be long: keep the part in the range.
                let from = range.start.saturating_sub(a.addr);
                let to = range.end.saturating_sub(a.addr).min(u64::from(a.len));
                let part = usize::try_from(from).unwrap_or(usize::MAX)
                    ..usize::try_from(to).unwrap_or(usize::MAX);
                old = old.and_then(|b| b.get(part.clone()));
                new = new.and_then(|b| b.get(part));
                addr = a.addr.saturating_add(from);
            }
            hit.access = Some(HitAccess {
                addr,
                old: old.map(|b| value_hex(b, self.isa == Isa::Ppc32)),
                new: new.map(|b| value_hex(b, self.isa == Isa::Ppc32)),
                size: (self.disasm && a.sized).then_some(a.len),
                kind: self.disasm.then_some(a.kind),
            });
            on_hit(&hit)?;
        }
        Ok(())
    }
}

/// Calls `on_hit` with every access to the query's range (or execution of its pc), in
/// instruction order, answering from the sidecar index when the trace has a usable one.
///
/// # Errors
///
/// No instruction stream, or a query with neither range nor pc (`Unsupported`); a damaged
/// trace, after the hits before the damage; `on_hit`'s error.
pub fn xref(
    handler: &dyn Handler,
    input: &mut Input,
    ctx: &mut Ctx<'_>,
    query: &XrefQuery,
    mut on_hit: impl FnMut(&XrefHit) -> Result<(), Error>,
) -> Result<(), Error> {
    if query.mem.is_none() == query.pc.is_none() {
        return Err(Error::Unsupported(
            "xref takes an address range or --pc, one of the two".into(),
        ));
    }
    let explicit = ctx.options.index.clone();
    let mut sidecar = match index::open_for(input, explicit.as_deref(), handler.name()) {
        Ok(sidecar) => Some(sidecar),
        Err(why) => {
            index::note_unusable(input, ctx, &why);
            None
        }
    };
    let disasm = ctx.options.disasm;
    // Said once, above: the steps would say the same of the sidecar.
    let mut steps = index::steps_without_notes(handler, input, ctx)?;
    let window = Window {
        from: 0,
        to: u64::MAX,
        last: None,
    };
    xref_of(
        steps.as_mut(),
        sidecar.as_mut(),
        disasm,
        query,
        window,
        &mut on_hit,
    )
}

/// Which steps [`xref_of`] looks at: those with `from <= i < to`; with `last`, only the
/// last `last` candidates of the sidecar in that window (without a sidecar every step of
/// the window is read, and the caller keeps the last hits it wants).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Window {
    /// The first step.
    pub from: u64,
    /// The step after the last (`u64::MAX`: to the end).
    pub to: u64,
    /// Only the last this many candidate steps (from the sidecar).
    pub last: Option<usize>,
}

/// [`xref`] over steps already open (at their start) and the sidecar index, if the caller
/// has a usable one, for the steps of `window` only (a caller that pages through the hits:
/// `tracekit serve`). Stops at the window's end, or when `on_hit` fails.
///
/// # Errors
///
/// As [`xref`]; a `from` past the end of the trace gives no hits, not an error.
pub fn xref_of(
    steps: &mut dyn Steps,
    sidecar: Option<&mut Sidecar>,
    disasm: bool,
    query: &XrefQuery,
    window: Window,
    on_hit: &mut dyn FnMut(&XrefHit) -> Result<(), Error>,
) -> Result<(), Error> {
    if query.mem.is_none() == query.pc.is_none() {
        return Err(Error::Unsupported(
            "xref takes an address range or --pc, one of the two".into(),
        ));
    }
    let isa = steps.isa();
    let scan = ScanQuery {
        all: false,
        pc: query.pc,
        mem: query.mem.map(|(addr, len)| {
            let len = len.unwrap_or_else(|| u64::from(isa.word_size()));
            addr..addr.saturating_add(len)
        }),
    };
    let emit = Emit {
        query: &scan,
        isa,
        snapshot: steps.kind().memory_is_snapshot(),
        disasm,
    };
    if let Some(sidecar) = sidecar {
        return from_sidecar(steps, sidecar, &scan, &emit, window, on_hit);
    }
    if window.from > 0 {
        match steps.seek(window.from) {
            Ok(()) => {}
            // Past the end: nothing to find.
            Err(Error::Unsupported(_)) => return Ok(()),
            Err(e) => return Err(e),
        }
    }
    if window.to == u64::MAX {
        return steps.scan(&scan, &mut |step| emit.step(step, on_hit));
    }
    // A window that ends: read step by step, to stop at its end.
    while let Some(step) = steps.next_step() {
        let step = step?;
        if step.i >= window.to {
            break;
        }
        if scan.matches(step) {
            emit.step(step, on_hit)?;
        }
    }
    Ok(())
}

/// [`xref`] from the sidecar: its candidates, each read from the steps (by reading on
/// when it is near, by a seek when it is far).
fn from_sidecar(
    steps: &mut dyn Steps,
    sidecar: &mut Sidecar,
    query: &ScanQuery,
    emit: &Emit<'_>,
    window: Window,
    on_hit: &mut dyn FnMut(&XrefHit) -> Result<(), Error>,
) -> Result<(), Error> {
    let mut candidates = match (query.pc, &query.mem) {
        (Some(pc), _) => sidecar.executions(pc)?,
        (None, Some(r)) => sidecar.accesses(r.start, r.end)?,
        (None, None) => Vec::new(),
    };
    candidates.retain(|i| (window.from..window.to).contains(i));
    if let Some(last) = window.last {
        let cut = candidates.len().saturating_sub(last);
        candidates.drain(..cut);
    }
    let mut visit = Visit::new();
    for i in candidates {
        visit.step(steps, i, &mut |step| {
            if query.matches(step) {
                emit.step(step, on_hit)?;
            }
            Ok(())
        })?;
    }
    Ok(())
}
