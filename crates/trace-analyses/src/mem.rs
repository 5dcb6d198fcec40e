//! `mem`: the memory bytes as known before instruction N, from the accesses the trace
//! recorded, in one pass over the instruction stream.
//!
//! Each byte comes from the latest access before N that covered it, with its value after
//! that instruction (`new` if recorded, else `old`: x64dbg records `new` only when the
//! value changed); failing that, from the `old` value of the earliest access at or after N
//! (marked inferred: what memory held, since nothing before N wrote it); else it is
//! unknown. An access covers the word x64dbg recorded (8 or 4 bytes) or, with
//! [`Options::disasm`](trace_model::Options::disasm), the operand size. A tfile frame is a
//! snapshot taken before its instruction ran, so the bytes come from frame N's own `M`
//! blocks and the frames before it, the latest winning (within a frame the first block, as
//! GDB reads them), and are never inferred from later frames. TT6/TT6E record addresses
//! without values and FULL records no memory: every byte is unknown.
//!
//! The pass reads the steps up to N (a later write before N changes the answer), then on
//! only while some byte is still unknown; memory is bounded by the length asked for, at
//! most [`MAX_LEN`]. With a usable sidecar index (`tracekit index`, `trace_index`) of a
//! format that keeps its seek index there (x64dbg), `mem` reads instead only the
//! instructions the sidecar lists as accessing the range, nearest N first (a seek of at
//! most 512 instructions each), and gives the same answer.
//!
//! ```
//! use trace_analyses::mem::{MemQuery, mem};
//! use trace_registry::{Ctx, Input, Options};
//!
//! let options = Options::default();
//! let ask = |at| -> Result<_, trace_registry::Error> {
//!     let mut input = Input::open("../../testdata/x64dbg/basic.trace64".as_ref())?;
//!     let handler = trace_registry::detect(&input).expect("an x64dbg trace");
//!     let query = MemQuery { at, addr: 0x24_fe00, len: Some(8) };
//!     let (m, damage) = mem(handler, &mut input, &mut Ctx::new(&options), &query)?;
//!     assert!(damage.is_none());
//!     Ok(m)
//! };
//! // `tracekit dump` shows the 8 bytes at 0x24fe00 written by instruction 672
//! // (0x1c3cf3f25dcb53ef), read by 677 and 689, then written by 700 (0xb63e1ba01ec921ed).
//! let after = ask(701)?;
//! assert_eq!(after.value(), Some(0xb63e_1ba0_1ec9_21ed_u64.to_le_bytes().to_vec()));
//! assert_eq!((after.source[0], after.inferred[0]), (Some(700), Some(false)));
//! // Before 690 the latest access is 689's read: the value it found.
//! let before = ask(690)?;
//! assert_eq!(before.value(), Some(0x1c3c_f3f2_5dcb_53ef_u64.to_le_bytes().to_vec()));
//! assert_eq!(before.source, [Some(689); 8]);
//! assert!(before.to_json().starts_with(r#"{"i":690,"addr":"0x24fe00","len":8,"bytes":[239,83,"#));
//! # Ok::<(), trace_registry::Error>(())
//! ```

use serde::Serialize;

use std::collections::BTreeSet;

use trace_index::{self as index, Sidecar, Visit};
use trace_model::steps::{Access, ScanQuery, Step, Steps};
use trace_model::{Ctx, Error, Handler, Input};

/// The most bytes one query reads (1 MiB): the answer is held in memory, about 19 bytes
/// per byte asked for.
pub const MAX_LEN: u64 = 1 << 20;

/// What to read: `len` bytes at `addr` (one word of the trace's ISA when `None`) as known
/// before instruction `at`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MemQuery {
    /// The instruction before which to read (0-based; the frame number for a tfile).
    pub at: u64,
    /// The first address.
    pub addr: u64,
    /// The length in bytes, at most [`MAX_LEN`]; `None` for one word (8 bytes on x86-64
    /// and unknown targets, 4 on x86 and 32-bit PowerPC).
    pub len: Option<u64>,
}

/// The bytes as known before one instruction:
/// `{"i":N,"addr":"0x…","len":L,"bytes":[171,null,…],"source":[12,null,…],"inferred":[false,null,…]}`,
/// one entry per byte in each list (`null` where the byte is unknown).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Memory {
    /// The instruction before which the bytes are read.
    pub i: u64,
    /// The first address.
    #[serde(serialize_with = "hex")]
    pub addr: u64,
    /// The number of bytes.
    pub len: u64,
    /// Each byte's value, if known.
    pub bytes: Vec<Option<u8>>,
    /// The instruction each byte's value came from.
    pub source: Vec<Option<u64>>,
    /// Whether each byte was inferred from an access at or after `i` (its `old` value).
    pub inferred: Vec<Option<bool>>,
    /// Snapshots (a tfile's frames) only: whether each known byte comes from a frame
    /// before `i` (`source` says which), collected then and maybe changed since, rather
    /// than from frame `i` itself. In the JSON only for snapshots.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub earlier: Option<Vec<Option<bool>>>,
    /// What the text calls a step ([`StepKind::noun`](trace_model::steps::StepKind::noun): "instruction", or "frame" for a
    /// tfile); not in the JSON.
    #[serde(skip)]
    pub noun: &'static str,
}

fn hex<S: serde::Serializer>(v: &u64, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&format!("{v:#x}"))
}

/// The first byte (in the access) and the first byte (in the query) of the overlap of an
/// access and the query range `[lo, hi)`, and its length.
fn overlap(a: &Access, lo: u64, hi: u64) -> Option<(usize, usize, usize)> {
    let a_end = a.addr.saturating_add(u64::from(a.len));
    let start = a.addr.max(lo);
    let end = a_end.min(hi);
    let count = end.checked_sub(start).filter(|&c| c > 0)?;
    Some((
        usize::try_from(start.checked_sub(a.addr)?).ok()?,
        usize::try_from(start.checked_sub(lo)?).ok()?,
        usize::try_from(count).ok()?,
    ))
}

impl Memory {
    fn unknown(i: u64, addr: u64, len: usize) -> Memory {
        Memory {
            i,
            addr,
            len: len as u64,
            bytes: vec![None; len],
            source: vec![None; len],
            inferred: vec![None; len],
            earlier: None,
            noun: "instruction",
        }
    }

    /// Fills [`Memory::earlier`] from the sources: the memory is a snapshot's.
    fn mark_earlier(&mut self) {
        let i = self.i;
        self.earlier = Some(self.source.iter().map(|s| s.map(|s| s < i)).collect());
    }

    /// Whether byte `k` comes from an earlier snapshot.
    fn is_earlier(&self, k: usize) -> bool {
        self.earlier
            .as_ref()
            .and_then(|e| e.get(k).copied().flatten())
            == Some(true)
    }

    /// Sets the bytes of the query that access `a` covers to its `bytes`, from instruction
    /// `i`: every one, or only the unknown ones when `inferring`; returns how many were
    /// unknown.
    fn set(&mut self, a: &Access, bytes: &[u8], i: u64, inferring: bool) -> usize {
        let hi = self.addr.saturating_add(self.len);
        let Some((skip, start, count)) = overlap(a, self.addr, hi) else {
            return 0;
        };
        let Some(values) = bytes.get(skip..skip.saturating_add(count)) else {
            return 0;
        };
        let slots = self
            .bytes
            .iter_mut()
            .zip(self.source.iter_mut().zip(self.inferred.iter_mut()))
            .skip(start);
        let mut newly = 0usize;
        for (&v, (byte, (source, inferred))) in values.iter().zip(slots) {
            if byte.is_none() {
                newly = newly.saturating_add(1);
            } else if inferring {
                continue;
            }
            *byte = Some(v);
            *source = Some(i);
            *inferred = Some(inferring);
        }
        newly
    }

    /// Takes in step `step` before `i` (its values after it ran; a snapshot's as taken).
    fn before(&mut self, step: &Step, snapshot: bool) {
        if snapshot {
            // The first block covering a byte wins, as GDB reads a frame: apply in reverse.
            for a in step.mem.iter().rev() {
                if let Some(old) = step.old(a) {
                    self.set(a, old, step.i, false);
                }
            }
            return;
        }
        // Entries without `new` left the value as it was: apply those first, so that a
        // written value wins over a read of the same word by the same instruction.
        for a in step.mem.iter().filter(|a| a.new.is_none()) {
            if let Some(old) = step.old(a) {
                self.set(a, old, step.i, false);
            }
        }
        for a in &step.mem {
            if let Some(new) = step.new(a) {
                self.set(a, new, step.i, false);
            }
        }
    }

    /// Takes in the bytes of `part` (the same range) that are unknown here; returns how
    /// many.
    fn fill(&mut self, part: &Memory) -> usize {
        let mut newly = 0usize;
        let theirs = part
            .bytes
            .iter()
            .zip(part.source.iter().zip(&part.inferred));
        let ours = self
            .bytes
            .iter_mut()
            .zip(self.source.iter_mut().zip(self.inferred.iter_mut()));
        for ((byte, (source, inferred)), (b, (s, inf))) in ours.zip(theirs) {
            if byte.is_none() && b.is_some() {
                (*byte, *source, *inferred) = (*b, *s, *inf);
                newly = newly.saturating_add(1);
            }
        }
        newly
    }

    /// Takes in step `step` at or after `i`: the unknown bytes its accesses read, as it
    /// found them; returns how many became known.
    fn infer(&mut self, step: &Step) -> usize {
        let mut newly = 0usize;
        for a in &step.mem {
            if let Some(old) = step.old(a) {
                newly = newly.saturating_add(self.set(a, old, step.i, true));
            }
        }
        newly
    }

    /// The bytes, if every one is known.
    #[must_use]
    pub fn value(&self) -> Option<Vec<u8>> {
        self.bytes.iter().copied().collect()
    }

    /// The JSON line `tracekit mem --json` prints.
    #[must_use]
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }

    /// The text `tracekit mem` prints: a title, a hex dump in rows of 16 aligned addresses
    /// (`??` for an unknown byte, `*` after an inferred one, `|…|` the printable
    /// characters), a legend when some bytes are inferred or unknown, and the runs of
    /// bytes with one source (up to [`TEXT_RUNS`]; `--json` gives every byte's).
    #[must_use]
    pub fn to_text(&self) -> String {
        use std::fmt::Write;
        let mut out = format!(
            "memory before {} {}: {} byte{} at {:#x}\n",
            self.noun,
            self.i,
            self.len,
            if self.len == 1 { "" } else { "s" },
            self.addr
        );
        let end = self.addr.saturating_add(self.len);
        let digits = if end > u64::from(u32::MAX) { 16 } else { 8 };
        // Each byte and the mark before it: `*` inferred, `~` from an earlier frame.
        let at = |a: u64| -> Option<(Option<u8>, char)> {
            let k = usize::try_from(a.checked_sub(self.addr)?).ok()?;
            let b = self.bytes.get(k)?;
            let mark = if self.inferred.get(k).copied().flatten() == Some(true) {
                '*'
            } else if self.is_earlier(k) {
                '~'
            } else {
                ' '
            };
            Some((*b, mark))
        };
        let mut row = self.addr & !0xf;
        while row < end {
            let _ = write!(out, "{row:0digits$x} ");
            let mut text = String::with_capacity(16);
            for col in 0..16u64 {
                let a = row.saturating_add(col);
                if col == 8 {
                    out.push(' ');
                }
                match at(a) {
                    None => {
                        out.push_str("   ");
                        text.push(' ');
                    }
                    Some((None, _)) => {
                        out.push_str(" ??");
                        text.push('?');
                    }
                    Some((Some(b), mark)) => {
                        let _ = write!(out, "{mark}{b:02x}");
                        text.push(if b.is_ascii_graphic() || b == b' ' {
                            char::from(b)
                        } else {
                            '.'
                        });
                    }
                }
            }
            let _ = writeln!(out, "  |{text}|");
            match row.checked_add(16) {
                Some(next) => row = next,
                None => break,
            }
        }
        let inferred = self.inferred.contains(&Some(true));
        let unknown = self.bytes.contains(&None);
        let earlier = (0..self.bytes.len()).any(|k| self.is_earlier(k));
        if inferred || unknown || earlier {
            out.push('\n');
        }
        if earlier {
            let _ = writeln!(
                out,
                "~xx  earlier: {} {} did not collect it; the value an earlier {} collected \
                 (it may have changed since)",
                self.noun, self.i, self.noun
            );
        }
        if inferred {
            let _ = writeln!(
                out,
                "*xx  inferred: no access before {} {} covers it; the value a later access found",
                self.noun, self.i
            );
        }
        if unknown {
            out.push_str(" ??  unknown: no recorded access covers it\n");
        }
        self.write_runs(&mut out);
        out
    }

    /// The runs of bytes with one source, as `from..to  instruction N [(inferred)]`.
    fn write_runs(&self, out: &mut String) {
        use std::fmt::Write;
        let mut runs: Vec<(usize, usize, Option<u64>, bool)> = Vec::new();
        for (k, (source, inferred)) in self.source.iter().zip(&self.inferred).enumerate() {
            // A run is one source: whether it is earlier follows from it.
            let inferred = *inferred == Some(true);
            match runs.last_mut() {
                Some((_, end, s, i)) if *s == *source && *i == inferred => {
                    *end = k.saturating_add(1);
                }
                _ => runs.push((k, k.saturating_add(1), *source, inferred)),
            }
        }
        out.push_str("\nsources:\n");
        for (start, end, source, inferred) in runs.iter().take(TEXT_RUNS) {
            let from = self.addr.saturating_add(*start as u64);
            let to = self.addr.saturating_add(*end as u64);
            let _ = match source {
                Some(i) if *inferred => {
                    writeln!(out, "  {from:#x}..{to:#x}  {} {i} (inferred)", self.noun)
                }
                Some(i) if self.earlier.is_some() && *i < self.i => {
                    writeln!(out, "  {from:#x}..{to:#x}  {} {i} (earlier)", self.noun)
                }
                Some(i) => writeln!(out, "  {from:#x}..{to:#x}  {} {i}", self.noun),
                None => writeln!(out, "  {from:#x}..{to:#x}  unknown"),
            };
        }
        if let Some(more) = runs.len().checked_sub(TEXT_RUNS).filter(|&m| m > 0) {
            let _ = writeln!(out, "  … {more} more (--json gives every byte's source)");
        }
    }
}

/// How many runs of one source the text lists.
pub const TEXT_RUNS: usize = 64;

/// The memory of `input` before instruction `query.at`, in one pass (or from the sidecar
/// index, when there is a usable one): the answer, and the read error that cut the search
/// for inferred bytes short, if one did (the bytes a later access might have told are then
/// unknown; the caller reports the damage).
///
/// # Errors
///
/// [`Error::Unsupported`] for a format without an instruction stream, a length of 0 or
/// over [`MAX_LEN`], a range past the end of the address space, or `at` at or past the
/// end of the trace; the read error of a file damaged before instruction `at` (or at it).
pub fn mem(
    handler: &dyn Handler,
    input: &mut Input,
    ctx: &mut Ctx<'_>,
    query: &MemQuery,
) -> Result<(Memory, Option<Error>), Error> {
    let mut sidecar = sidecar(handler, input, ctx);
    // Said once, above: the steps would say the same of the sidecar.
    let mut steps = index::steps_without_notes(handler, input, ctx)?;
    mem_of(steps.as_mut(), sidecar.as_mut(), ctx, query)
}

/// [`mem`] over steps already open (at their start) and the sidecar index, if the caller
/// has a usable one whose format seeks: for a caller that keeps both open (`tracekit
/// serve`).
///
/// # Errors
///
/// As [`mem`].
pub fn mem_of(
    steps: &mut dyn Steps,
    sidecar: Option<&mut Sidecar>,
    ctx: &mut Ctx<'_>,
    query: &MemQuery,
) -> Result<(Memory, Option<Error>), Error> {
    let (mut memory, damage) = find(steps, sidecar, ctx, query)?;
    if steps.kind().memory_is_snapshot() {
        memory.mark_earlier();
    }
    Ok((memory, damage))
}

/// [`mem_of`] without marking the bytes of earlier snapshots.
fn find(
    steps: &mut dyn Steps,
    sidecar: Option<&mut Sidecar>,
    ctx: &mut Ctx<'_>,
    query: &MemQuery,
) -> Result<(Memory, Option<Error>), Error> {
    let len = query
        .len
        .unwrap_or_else(|| u64::from(steps.isa().word_size()));
    if len == 0 || len > MAX_LEN {
        return Err(Error::Unsupported(format!(
            "mem reads 1 to {MAX_LEN} bytes (1 MiB) at a time, not {len}"
        )));
    }
    if query.addr.checked_add(len).is_none() {
        return Err(Error::Unsupported(format!(
            "{:#x} + {len} bytes passes the end of the address space",
            query.addr
        )));
    }
    let n = usize::try_from(len).unwrap_or(0);
    let noun = steps.kind().noun();
    let mut memory = Memory {
        noun,
        ..Memory::unknown(query.at, query.addr, n)
    };
    if let Some(sidecar) = sidecar {
        // The sidecar's masks say which steps cover each byte, as the recorded accesses
        // do (with `--disasm` the accesses are the operand sizes: the windows below).
        if !ctx.options.disasm {
            let damage = from_masks(steps, sidecar, query.at, &mut memory)?;
            return Ok((memory, damage));
        }
        if let Some(damage) = from_sidecar(steps, sidecar, query.at, &mut memory)? {
            return Ok((memory, damage));
        }
        // Too many candidates: the pass, from the start; the lean one first (`at` is
        // known to be in the trace: the sidecar counted its steps).
        let fresh = || Memory {
            noun,
            ..Memory::unknown(query.at, query.addr, n)
        };
        memory = fresh();
        steps.seek(0)?;
        if read_lean(steps, query.at, &mut memory) {
            return Ok((memory, None));
        }
        memory = fresh();
        steps.seek(0)?;
    }
    let damage = read(steps, ctx, query.at, &mut memory)?;
    Ok((memory, damage))
}

/// What [`read_lean`]'s scan stops with once the answer is complete.
const LEAN_DONE: &str = "mem: every byte known";

/// [`read`] through [`Raw::scan`](trace_model::steps::Raw::scan): only the steps with an access in the range, and for
/// x64dbg its lean walk (no register replay), so a few times faster. `at` must be in the
/// trace. Returns `false` when the scan met damage, which the caller then locates with
/// [`read`] (from the start again).
fn read_lean(steps: &mut dyn Steps, at: u64, memory: &mut Memory) -> bool {
    let snapshot = steps.kind().memory_is_snapshot();
    let query = ScanQuery {
        all: false,
        pc: None,
        mem: Some(memory.addr..memory.addr.saturating_add(memory.len)),
    };
    let mut open: Option<usize> = None;
    let scanned = steps.scan(&query, &mut |step| {
        if step.i < at || (snapshot && step.i == at) {
            memory.before(step, snapshot);
            return Ok(());
        }
        if snapshot {
            return Err(Error::Unsupported(LEAN_DONE.into()));
        }
        let unknown = match open {
            Some(u) => u,
            None => memory.bytes.iter().filter(|b| b.is_none()).count(),
        };
        let left = unknown.saturating_sub(memory.infer(step));
        open = Some(left);
        if left == 0 {
            return Err(Error::Unsupported(LEAN_DONE.into()));
        }
        Ok(())
    });
    match scanned {
        Ok(()) => true,
        Err(Error::Unsupported(m)) => m == LEAN_DONE,
        Err(_) => false,
    }
}

/// The sidecar index of `input`, if it has a usable one whose format seeks (else a note
/// says why not, where there is something to say).
fn sidecar(handler: &dyn Handler, input: &Input, ctx: &mut Ctx<'_>) -> Option<Sidecar> {
    let explicit = ctx.options.index.clone();
    match index::open_for(input, explicit.as_deref(), handler.name()) {
        // Without the format's seek index each seek would read from the start.
        Ok(sidecar) => sidecar.has_seek_index().then_some(sidecar),
        Err(why) => {
            index::note_unusable(input, ctx, &why);
            None
        }
    }
}

/// [`read`] from the sidecar's byte masks: for each byte, the last step before `at` whose
/// access covers it (at `at` too for a snapshot) and, where there is none, the first from
/// `at` on; only those steps are read (a seek each, at most two per byte asked for), in
/// order, so that each byte ends with its latest value. The lookup decodes the lists of
/// the words asked for, whatever the steps are. Returns the damage met after `at`.
fn from_masks(
    steps: &mut dyn Steps,
    sidecar: &mut Sidecar,
    at: u64,
    memory: &mut Memory,
) -> Result<Option<Error>, Error> {
    let count = sidecar.header().steps;
    if at >= count {
        return Err(trace_model::steps::past_end_of(
            steps.kind().noun(),
            at,
            count,
        ));
    }
    let snapshot = steps.kind().memory_is_snapshot();
    let limit = if snapshot { at.saturating_add(1) } else { at };
    let (lo, hi) = (memory.addr, memory.addr.saturating_add(memory.len));
    let n = memory.bytes.len();
    let mut latest: Vec<Option<u64>> = vec![None; n];
    let mut earliest: Vec<Option<u64>> = vec![None; n];
    sidecar.covering_near(lo, hi, limit, &mut |word, i, mask| {
        for b in 0..8u8 {
            if mask & (1 << b) == 0 {
                continue;
            }
            let k = word.saturating_add(u64::from(b)).saturating_sub(lo);
            let Some(k) = usize::try_from(k).ok().filter(|&k| k < n) else {
                continue;
            };
            if i < limit {
                if let Some(l) = latest.get_mut(k) {
                    *l = (*l).max(Some(i));
                }
            } else if let Some(e) = earliest.get_mut(k) {
                *e = Some(e.map_or(i, |e| e.min(i)));
            }
        }
    })?;
    let befores: BTreeSet<u64> = latest.iter().flatten().copied().collect();
    let afters: BTreeSet<u64> = if snapshot {
        BTreeSet::new()
    } else {
        latest
            .iter()
            .zip(&earliest)
            .filter(|(l, _)| l.is_none())
            .filter_map(|(_, e)| *e)
            .collect()
    };
    #[cfg(test)]
    tests::MASK_READS.with(|r| {
        r.set(
            r.get()
                .saturating_add(befores.len())
                .saturating_add(afters.len()),
        );
    });
    let mut visit = Visit::new();
    for &i in &befores {
        visit.step(steps, i, &mut |step| {
            memory.before(step, snapshot);
            Ok(())
        })?;
    }
    for &i in &afters {
        let read = visit.step(steps, i, &mut |step| {
            memory.infer(step);
            Ok(())
        });
        if let Err(e) = read {
            return Ok(Some(e));
        }
    }
    Ok(None)
}

/// How many candidates the first window of [`from_sidecar`] takes; each next one takes
/// twice as many, up to [`MAX_WINDOW`].
const FIRST_WINDOW: usize = 16;

/// The most candidates one window holds: past about twice as many (on either side of
/// N), the lean pass is quicker than reading them.
const MAX_WINDOW: usize = 1 << 8;

/// [`read`] from the sidecar: the candidates (instructions with an access that may cover
/// a byte asked for) nearest `at`, in windows: the last ones before `at`, read in order
/// as the pass would (so that one window gives what the pass gives for every byte it
/// covers), then earlier windows for the bytes still unknown; then the first ones from
/// `at` on, for the bytes to infer. A byte that an access covers is found in the first
/// window that holds it, so the work is that of the few candidates nearest `at` unless
/// some byte is covered by none of them: past [`MAX_WINDOW`] candidates before or after
/// `at` it gives up (`None`), and the caller makes the pass.
fn from_sidecar(
    steps: &mut dyn Steps,
    sidecar: &mut Sidecar,
    at: u64,
    memory: &mut Memory,
) -> Result<Option<Option<Error>>, Error> {
    let count = sidecar.header().steps;
    if at >= count {
        return Err(trace_model::steps::past_end_of(
            steps.kind().noun(),
            at,
            count,
        ));
    }
    let snapshot = steps.kind().memory_is_snapshot();
    let (lo, hi) = (memory.addr, memory.addr.saturating_add(memory.len));
    let mut visit = Visit::new();
    let mut window = FIRST_WINDOW;
    // Candidates below `below` are still to read (a snapshot's frame `at` counts).
    let mut below = if snapshot { at.saturating_add(1) } else { at };
    let mut open = memory.bytes.len();
    while open > 0 && below > 0 {
        // The last `window` candidates below `below`.
        let mut nearest = BTreeSet::new();
        sidecar.accesses_each(lo, hi, &mut |i| {
            if i < below && nearest.insert(i) && nearest.len() > window {
                nearest.pop_first();
            }
        })?;
        let Some(&first) = nearest.first() else {
            break;
        };
        let mut part = Memory::unknown(memory.i, memory.addr, memory.bytes.len());
        for &i in &nearest {
            visit.step(steps, i, &mut |step| {
                part.before(step, snapshot);
                Ok(())
            })?;
        }
        open = open.saturating_sub(memory.fill(&part));
        if nearest.len() < window {
            break;
        }
        if window >= MAX_WINDOW {
            return Ok(None);
        }
        below = first;
        window = window.saturating_mul(2).min(MAX_WINDOW);
    }
    if snapshot {
        return Ok(Some(None));
    }
    // From `at` on: the first accesses that found each unknown byte.
    let mut from = at;
    let mut window = FIRST_WINDOW;
    while open > 0 {
        let mut nearest = BTreeSet::new();
        sidecar.accesses_each(lo, hi, &mut |i| {
            if i >= from && nearest.insert(i) && nearest.len() > window {
                nearest.pop_last();
            }
        })?;
        let Some(&last) = nearest.last() else {
            break;
        };
        for &i in &nearest {
            let read = visit.step(steps, i, &mut |step| {
                open = open.saturating_sub(memory.infer(step));
                Ok(())
            });
            // Damage past `at`: the answer so far, and the damage.
            if let Err(e) = read {
                return Ok(Some(Some(e)));
            }
            if open == 0 {
                break;
            }
        }
        if nearest.len() < window {
            break;
        }
        if window >= MAX_WINDOW {
            return Ok(None);
        }
        from = last.saturating_add(1);
        window = window.saturating_mul(2).min(MAX_WINDOW);
    }
    Ok(Some(None))
}

/// The pass: steps before `at` set bytes, steps from `at` on infer them (not for a
/// snapshot). Returns the damage met after `at`, if any.
fn read(
    steps: &mut dyn Steps,
    ctx: &mut Ctx<'_>,
    at: u64,
    memory: &mut Memory,
) -> Result<Option<Error>, Error> {
    let snapshot = steps.kind().memory_is_snapshot();
    let mut seen = 0u64;
    let mut open = memory.bytes.len();
    loop {
        let step = match steps.next_step() {
            None => break,
            Some(Ok(step)) => step,
            // Damage before `at`: no answer. After it: the answer so far, and the damage.
            Some(Err(e)) if seen <= at => return Err(e),
            Some(Err(e)) => return Ok(Some(e)),
        };
        if seen < at || (snapshot && seen == at) {
            memory.before(step, snapshot);
        } else {
            if seen == at {
                open = memory.bytes.iter().filter(|b| b.is_none()).count();
            }
            open = open.saturating_sub(memory.infer(step));
        }
        seen = seen.saturating_add(1);
        if seen.is_multiple_of(4096) {
            ctx.progress(steps.position());
        }
        // Past `at`, nothing more can change a known byte: stop once all are known (a
        // snapshot infers nothing, so it stops at once).
        if seen > at && (snapshot || open == 0) {
            return Ok(None);
        }
    }
    if seen <= at {
        return Err(trace_model::steps::past_end_of(
            steps.kind().noun(),
            at,
            seen,
        ));
    }
    Ok(None)
}

#[cfg(test)]
#[allow(
    clippy::unwrap_used,
    clippy::indexing_slicing,
    clippy::arithmetic_side_effects,
    clippy::cast_possible_truncation
)]
pub(crate) mod tests {
    use super::*;
    use quickcheck::{Arbitrary, Gen, QuickCheck};
    use trac_x64dbg::{Arch, Header, MemAccess, Recorder, RecorderOptions, RegDump, Writer};
    use trace_model::schema::testing::{input, testdata};
    use trace_model::steps::Isa;
    use trace_model::{Handler, Options};

    /// One instruction of a hand-built x64dbg trace: bytes, registers set before it
    /// (word index, value), and the recorded memory words (address, old, new).
    pub(crate) type Hand = (Vec<u8>, Vec<(usize, u64)>, Vec<(u64, u64, Option<u64>)>);

    /// An x64 trace of thread 7 recorded from `steps` by `trac_x64dbg`'s `Recorder` (a
    /// full dump every 512 instructions, as x64dbg writes them).
    pub(crate) fn hand_built(steps: &[Hand]) -> Vec<u8> {
        let header = Header::new(Arch::X64, "hand.exe");
        let writer = Writer::new(Vec::new(), &header).unwrap();
        let mut rec = Recorder::new(writer, RecorderOptions::default());
        let mut regs = RegDump::new(Arch::X64);
        let mut pc = 0x7ff6_0000_1000u64;
        for (opcode, set, mem) in steps {
            for &(i, v) in set {
                regs.set_word(i, v);
            }
            regs.set_ip(pc);
            let mem = mem
                .iter()
                .map(|&(address, old, new)| MemAccess {
                    flags: u8::from(new.is_none()),
                    address,
                    old,
                    new,
                })
                .collect();
            rec.step(trac_x64dbg::Step {
                thread: 7,
                opcode: opcode.clone(),
                regs: regs.clone(),
                mem,
            })
            .unwrap();
            pc += opcode.len() as u64;
        }
        rec.finish().unwrap()
    }

    /// `mem` over bytes, with or without `--disasm`.
    pub(crate) fn ask(
        name: &str,
        bytes: &[u8],
        disasm: bool,
        gzip: bool,
        query: MemQuery,
    ) -> Result<(Memory, Option<Error>), Error> {
        let options = Options {
            disasm,
            ..Options::default()
        };
        let mut input = input(name, bytes, gzip);
        let handler = trace_registry::detect(&input).unwrap();
        mem(handler, &mut input, &mut Ctx::new(&options), &query)
    }

    fn query(at: u64, addr: u64, len: u64) -> MemQuery {
        MemQuery {
            at,
            addr,
            len: Some(len),
        }
    }

    /// Every step of `bytes`, owned, and whether they are snapshots.
    fn all_steps(name: &str, bytes: &[u8], disasm: bool) -> (Vec<Step>, bool) {
        let options = Options {
            disasm,
            ..Options::default()
        };
        let mut input = input(name, bytes, false);
        let handler = trace_registry::detect(&input).unwrap();
        let mut steps = handler.steps(&mut input, &mut Ctx::new(&options)).unwrap();
        let mut out = Vec::new();
        while let Some(s) = steps.next_step() {
            out.push(s.unwrap().clone());
        }
        (out, steps.kind().memory_is_snapshot())
    }

    /// The answer worked out byte by byte from every step (the model the pass must
    /// match): the last step before `at` (up to `at` for snapshots) with a value for the
    /// byte (its last written value, else its last read; a snapshot's first block), else
    /// the first step from `at` on that read it (first entry), else unknown.
    fn reference(steps: &[Step], snapshot: bool, at: u64, addr: u64, len: u64) -> Memory {
        let mut m = Memory::unknown(at, addr, len as usize);
        for k in 0..len as usize {
            let b = addr + k as u64;
            let byte = |a: &Access, bytes: Option<&[u8]>| -> Option<u8> {
                let off = b.checked_sub(a.addr)?;
                (off < u64::from(a.len)).then_some(())?;
                bytes?.get(off as usize).copied()
            };
            let before = steps
                .iter()
                .filter(|s| s.i < at || (snapshot && s.i == at))
                .rev()
                .find_map(|s| {
                    let v = if snapshot {
                        s.mem.iter().find_map(|a| byte(a, s.old(a)))
                    } else {
                        let new = s.mem.iter().rev().find_map(|a| byte(a, s.new(a)));
                        new.or_else(|| s.mem.iter().rev().find_map(|a| byte(a, s.old(a))))
                    };
                    v.map(|v| (s.i, v, false))
                });
            let after = || {
                steps
                    .iter()
                    .filter(|s| s.i >= at && !snapshot)
                    .find_map(|s| {
                        s.mem
                            .iter()
                            .find_map(|a| byte(a, s.old(a)))
                            .map(|v| (s.i, v, true))
                    })
            };
            if let Some((i, v, inferred)) = before.or_else(after) {
                m.bytes[k] = Some(v);
                m.source[k] = Some(i);
                m.inferred[k] = Some(inferred);
            }
        }
        if snapshot {
            m.mark_earlier();
        }
        m
    }

    const RSP: u64 = 0x14_fe00;
    const A: u64 = RSP + 8;
    const NOP: &[u8] = &[0x90];

    /// A write, 600 instructions (and a full dump) without memory, a read of the same
    /// word; rcx counts the instructions.
    fn write_then_read() -> Vec<u8> {
        let mut steps: Vec<Hand> = vec![(
            // mov qword ptr [rsp+8], rax
            vec![0x48, 0x89, 0x44, 0x24, 0x08],
            vec![(0, 0x1111), (1, 0), (4, RSP)],
            vec![(A, 5, Some(0x1111))],
        )];
        for i in 1..=600 {
            steps.push((NOP.to_vec(), vec![(1, i)], vec![]));
        }
        steps.push((
            // mov rcx, qword ptr [rsp+8]
            vec![0x48, 0x8b, 0x4c, 0x24, 0x08],
            vec![(1, 601)],
            vec![(A, 0x1111, None)],
        ));
        steps.push((NOP.to_vec(), vec![(1, 0x1111)], vec![]));
        hand_built(&steps)
    }

    #[test]
    fn a_write_is_found_across_a_full_dump() {
        let bytes = write_then_read();
        for gzip in [false, true] {
            // Before the read, 600 instructions after the write: the written value.
            let (m, damage) = ask("w.trace64", &bytes, false, gzip, query(601, A, 8)).unwrap();
            assert!(damage.is_none());
            assert_eq!(m.value(), Some(0x1111u64.to_le_bytes().to_vec()));
            assert_eq!(
                (m.source, m.inferred),
                (vec![Some(0); 8], vec![Some(false); 8])
            );
            // After the read: the read's value, from the read.
            let (m, _) = ask("w.trace64", &bytes, false, gzip, query(602, A, 8)).unwrap();
            assert_eq!(m.value(), Some(0x1111u64.to_le_bytes().to_vec()));
            assert_eq!(m.source, [Some(601); 8]);
            // Before the write: what the write found there, inferred.
            let (m, _) = ask("w.trace64", &bytes, false, gzip, query(0, A, 8)).unwrap();
            assert_eq!(m.value(), Some(5u64.to_le_bytes().to_vec()));
            assert_eq!(
                (m.source, m.inferred),
                (vec![Some(0); 8], vec![Some(true); 8])
            );
            // Around it: 4 unknown bytes on each side.
            let (m, _) = ask("w.trace64", &bytes, false, gzip, query(300, A - 4, 16)).unwrap();
            let mut want = vec![None; 4];
            want.extend(0x1111u64.to_le_bytes().map(Some));
            want.extend([None; 4]);
            assert_eq!(m.bytes, want);
            assert_eq!(m.source[3..5], [None, Some(0)]);
            assert_eq!(m.inferred[11..13], [Some(false), None]);
            // A bare address is one word.
            let one = MemQuery {
                len: None,
                ..query(300, A, 0)
            };
            let (m, _) = ask("w.trace64", &bytes, false, gzip, one).unwrap();
            assert_eq!(m.len, 8);
        }
    }

    /// The recorded word covers 8 bytes; with `--disasm`, a dword operand 4. An unaligned
    /// read after it supplies the rest, inferred.
    #[test]
    fn operand_sizes_and_unaligned_words() {
        let steps: Vec<Hand> = vec![
            // add dword ptr [rax], ecx
            (
                vec![0x01, 0x08],
                vec![(0, 0x5000), (1, 2)],
                vec![(0x5000, 0xaaaa_0000_0001, Some(0xaaaa_0000_0003))],
            ),
            // mov rdx, qword ptr [rax+4]
            (
                vec![0x48, 0x8b, 0x50, 0x04],
                vec![],
                vec![(0x5004, 0x1234_0000_aaaa, None)],
            ),
            (NOP.to_vec(), vec![(2, 0x1234_0000_aaaa)], vec![]),
        ];
        let bytes = hand_built(&steps);
        let (m, _) = ask("s.trace64", &bytes, false, false, query(1, 0x5000, 12)).unwrap();
        let v = |b: &[u8]| b.iter().map(|&b| Some(b)).collect::<Vec<_>>();
        let mut want = v(&0xaaaa_0000_0003u64.to_le_bytes());
        want.extend(v(&0x1234_0000_aaaau64.to_le_bytes()[4..8]));
        assert_eq!(m.bytes, want);
        assert_eq!(m.source[7..9], [Some(0), Some(1)]);
        assert_eq!(m.inferred[7..9], [Some(false), Some(true)]);
        let (m, _) = ask("s.trace64", &bytes, true, false, query(1, 0x5000, 12)).unwrap();
        let mut want = v(&3u32.to_le_bytes());
        want.extend(v(&0x1234_0000_aaaau64.to_le_bytes()));
        assert_eq!(m.bytes, want);
        assert_eq!(m.inferred[3..5], [Some(false), Some(true)]);
    }

    /// A read and a write of one word by one instruction: the written value wins, in
    /// either recorded order.
    #[test]
    fn a_write_wins_over_a_read_in_one_instruction() {
        for write_first in [false, true] {
            let mut mem = vec![(A, 1, None), (A, 1, Some(2))];
            if write_first {
                mem.reverse();
            }
            let steps: Vec<Hand> =
                vec![(NOP.to_vec(), vec![], mem), (NOP.to_vec(), vec![], vec![])];
            let bytes = hand_built(&steps);
            let (m, _) = ask("r.trace64", &bytes, false, false, query(1, A, 8)).unwrap();
            assert_eq!(m.value(), Some(2u64.to_le_bytes().to_vec()));
        }
    }

    /// tfile frames are snapshots: frame N's own blocks count, later frames never do; the
    /// answer is the model's for every frame and every block's range (and around it).
    #[test]
    fn tfile_bytes_come_from_frames_up_to_n() {
        let bytes = testdata("gdb-tfile/amd64.tf");
        let (steps, snapshot) = all_steps("amd64.tf", &bytes, false);
        assert!(snapshot);
        let mut ranges: Vec<(u64, u64)> = steps
            .iter()
            .flat_map(|s| s.mem.iter().map(|a| (a.addr, u64::from(a.len))))
            .collect();
        ranges.sort_unstable();
        ranges.dedup();
        assert!(!ranges.is_empty());
        let (mut known, mut unknown) = (0, 0);
        for at in 0..steps.len() as u64 {
            for &(addr, len) in &ranges {
                let (lo, len) = (addr.saturating_sub(2), (len + 4).min(64));
                let (m, damage) =
                    ask("amd64.tf", &bytes, false, false, query(at, lo, len)).unwrap();
                assert!(damage.is_none());
                assert_eq!(
                    m,
                    Memory {
                        noun: "frame",
                        ..reference(&steps, true, at, lo, len)
                    },
                    "frame {at} {lo:#x}"
                );
                assert!(!m.inferred.contains(&Some(true)));
                known += m.bytes.iter().filter(|b| b.is_some()).count();
                unknown += m.bytes.iter().filter(|b| b.is_none()).count();
            }
        }
        assert!(known > 0 && unknown > 0);
        // Frame 0 knows only its own blocks.
        let first = &steps[0];
        if let Some(a) = first.mem.first() {
            let (m, _) = ask(
                "amd64.tf",
                &bytes,
                false,
                false,
                query(0, a.addr, u64::from(a.len).min(64)),
            )
            .unwrap();
            assert!(m.source.iter().all(|s| *s == Some(0)));
        }
    }

    /// A random x64dbg trace (the generator's: pushes, pops, stack loads and stores, 16-byte
    /// stores as two words), with random queries near the first thread's stack.
    #[derive(Clone, Debug)]
    struct Case {
        seed: u64,
        threads: u32,
        instructions: u64,
        /// (at as a fraction of the length, offset from the stack, len)
        queries: Vec<(u16, u16, u8)>,
        disasm: bool,
    }

    impl Arbitrary for Case {
        fn arbitrary(g: &mut Gen) -> Case {
            Case {
                seed: u64::arbitrary(g),
                threads: u32::arbitrary(g) % 3 + 1,
                instructions: u64::arbitrary(g) % 1200 + 1,
                // The first query asks before the first instruction, so that every run
                // sees inferred bytes (the coverage check below), not only most runs.
                queries: (0..4)
                    .map(|k| {
                        (
                            if k == 0 { 0 } else { u16::arbitrary(g) },
                            u16::arbitrary(g) % 0x100,
                            u8::arbitrary(g) % 40 + 1,
                        )
                    })
                    .collect(),
                disasm: bool::arbitrary(g),
            }
        }
    }

    fn generated(case: &Case) -> Vec<u8> {
        let opts = trac_x64dbg::testgen::Options {
            arch: Arch::X64,
            threads: case.threads,
            max_run: 50,
            seed: case.seed,
        };
        trac_x64dbg::testgen::trace(opts, case.instructions, RecorderOptions::default(), "g.exe")
    }

    /// `mem` is the model's answer for random traces and queries (which find bytes
    /// written before, inferred and unknown).
    #[test]
    fn mem_matches_the_model() {
        use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
        static SEEN: [AtomicUsize; 3] = [const { AtomicUsize::new(0) }; 3];
        fn prop(case: Case) -> bool {
            let bytes = generated(&case);
            let (steps, snapshot) = all_steps("g.trace64", &bytes, case.disasm);
            let n = steps.len() as u64;
            for &(at, off, len) in &case.queries {
                let at = u64::from(at) * n / 0x1_0000;
                // Just below the first thread's stack pointer, where it pushes and stores.
                let addr = 0x14_fe28 - 0xc0 + u64::from(off);
                let got = ask(
                    "g.trace64",
                    &bytes,
                    case.disasm,
                    false,
                    query(at, addr, u64::from(len)),
                );
                let (m, damage) = got.unwrap();
                assert!(damage.is_none());
                assert_eq!(
                    m,
                    reference(&steps, snapshot, at, addr, u64::from(len)),
                    "{case:?} at {at} {addr:#x}"
                );
                for (k, seen) in [Some(false), Some(true), None].iter().zip(&SEEN) {
                    seen.fetch_add(m.inferred.iter().filter(|i| *i == k).count(), Relaxed);
                }
            }
            true
        }
        QuickCheck::new()
            .tests(25)
            .quickcheck(prop as fn(Case) -> bool);
        assert!(SEEN.iter().all(|s| s.load(Relaxed) > 0), "{SEEN:?}");
    }

    /// `mem` of the trace file at `path`, with the sidecar at `index` (a path that does
    /// not exist: none).
    fn ask_file(
        path: &std::path::Path,
        index: &std::path::Path,
        disasm: bool,
        q: MemQuery,
    ) -> Memory {
        let options = Options {
            disasm,
            index: Some(index.to_owned()),
            ..Options::default()
        };
        let mut input = Input::open(path.as_os_str()).unwrap();
        let handler = trace_registry::detect(&input).unwrap();
        let (m, damage) = mem(handler, &mut input, &mut Ctx::new(&options), &q).unwrap();
        assert!(damage.is_none());
        m
    }

    /// Writes `bytes` as `dir/name` and builds its sidecar index `dir/name.tkidx`.
    fn with_sidecar(
        dir: &std::path::Path,
        name: &str,
        bytes: &[u8],
    ) -> (std::path::PathBuf, std::path::PathBuf, trace_index::Built) {
        let path = dir.join(name);
        std::fs::write(&path, bytes).unwrap();
        let index = dir.join(format!("{name}.tkidx"));
        let options = Options::default();
        let mut input = Input::open(path.as_os_str()).unwrap();
        let built = trace_index::build(
            trace_registry::detect(&input).unwrap(),
            &mut input,
            &mut Ctx::new(&options),
            Some(&index),
            trace_index::BuildOptions::default(),
        )
        .unwrap();
        (path, index, built)
    }

    /// A tfile with a sidecar index (whose seek index it now has): `mem` reads the
    /// candidate frames through it and gives what the pass gives, at frames near the
    /// start, middle and end, at addresses the frames collected and around them.
    #[test]
    fn tfile_mem_with_a_sidecar_is_mem_without() {
        let dir = std::env::temp_dir().join(format!("tk-mem-tfile-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = gdb_tfile::testgen::amd64_file(600, 9);
        let bytes = gdb_tfile::write::to_bytes(&file, gdb_tfile::Endian::Little).unwrap();
        let (path, index, built) = with_sidecar(&dir, "a.tf", &bytes);
        assert!(built.seek_bytes > 0);
        let none = dir.join("none.tkidx");
        let parsed =
            gdb_tfile::TraceFile::parse(&bytes, gdb_tfile::ReadOptions::default()).unwrap();
        let mut known = 0;
        for (k, f) in parsed.frames().enumerate().step_by(37) {
            let f = f.unwrap();
            let Some((addr, len)) = f.blocks().find_map(|b| match b.unwrap() {
                gdb_tfile::Block::Memory { address, data, .. } => Some((address, data.len())),
                _ => None,
            }) else {
                continue;
            };
            for (at, a) in [(k as u64, addr), (k as u64 + 40, addr.saturating_sub(3))] {
                let q = query(at.min(599), a, len.min(64) as u64 + 6);
                let scanned = ask_file(&path, &none, false, q);
                let indexed = ask_file(&path, &index, false, q);
                assert_eq!(scanned, indexed, "at {at} {a:#x}");
                assert_eq!(indexed.noun, "frame");
                known += indexed.bytes.iter().flatten().count();
            }
        }
        assert!(known > 100, "the queries find bytes ({known})");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// With a sidecar index, `mem` gives what the pass gives (the model's answer), for
    /// random traces and queries near the stacks, with and without `--disasm`.
    #[test]
    fn mem_with_a_sidecar_is_mem_without() {
        use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
        static SEEN: [AtomicUsize; 3] = [const { AtomicUsize::new(0) }; 3];
        fn prop(case: Case) -> bool {
            static N: AtomicUsize = AtomicUsize::new(0);
            let dir = std::env::temp_dir().join(format!(
                "tk-mem-{}-{}",
                std::process::id(),
                N.fetch_add(1, Relaxed)
            ));
            std::fs::create_dir_all(&dir).unwrap();
            let (path, index, built) = with_sidecar(&dir, "g.trace64", &generated(&case));
            let n = built.steps;
            let none = dir.join("none.tkidx");
            // Near the first thread's stack pointer, and the others'.
            for (k, &(at, off, len)) in case.queries.iter().enumerate() {
                let at = u64::from(at) * n / 0x1_0000;
                let stack = 0x14_fe28 + 0x1_0000 * (k as u64 % 3);
                let addr = stack - 0xc0 + u64::from(off);
                let q = query(at, addr, u64::from(len));
                let scanned = ask_file(&path, &none, case.disasm, q);
                let indexed = ask_file(&path, &index, case.disasm, q);
                assert_eq!(scanned, indexed, "{case:?} at {at} {addr:#x}");
                for (k, seen) in [Some(false), Some(true), None].iter().zip(&SEEN) {
                    seen.fetch_add(indexed.inferred.iter().filter(|i| *i == k).count(), Relaxed);
                }
            }
            std::fs::remove_dir_all(&dir).unwrap();
            true
        }
        QuickCheck::new()
            .tests(25)
            .quickcheck(prop as fn(Case) -> bool);
        // Known and unknown bytes occur in every run; inferred ones only in some random
        // runs (the hand-built tests above check them with a known answer).
        assert!(
            SEEN[0].load(Relaxed) > 0 && SEEN[2].load(Relaxed) > 0,
            "{SEEN:?}"
        );
    }

    thread_local! {
        /// How many steps [`from_masks`] read on this thread.
        pub(super) static MASK_READS: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
    }

    /// A word written by 150,000 steps fills several list entries of the sidecar; `mem`
    /// late in the trace decodes the last entry below N (and the one holding N), not the
    /// word's whole list, and answers as the pass does.
    #[test]
    fn a_busy_word_reads_the_entries_near_n_only() {
        let steps: Vec<Hand> = (0..150_000u64)
            .map(|k| (vec![0x90], Vec::new(), vec![(0x2000, k, Some(k + 1))]))
            .collect();
        let dir = std::env::temp_dir().join(format!("tk-mem-busy-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (path, index, _) = with_sidecar(&dir, "b.trace64", &hand_built(&steps));
        for at in [1, 75_000, 149_999] {
            let q = query(at, 0x1ffc, 16);
            let before = trace_index::entries_read();
            let indexed = ask_file(&path, &index, false, q);
            let reads = trace_index::entries_read() - before;
            assert!((1..=2).contains(&reads), "{reads} entries decoded at {at}");
            assert_eq!(indexed, ask_file(&path, &dir.join("none.tkidx"), false, q));
            assert_eq!(indexed.bytes[4..12], at.to_le_bytes().map(Some));
            assert_eq!(indexed.source[4], Some(at - 1));
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// A word written by every step and, beside it, a word no step touches: the sidecar's
    /// masks tell that no access covers the second, so `mem` reads one step per known
    /// byte run (not the 10,000 that write the busy word), and the answer is the known one
    /// and the pass's.
    #[test]
    fn never_covered_bytes_beside_busy_ones_read_few_steps() {
        let steps: Vec<Hand> = (0..10_000u64)
            .map(|k| {
                let mut mem = vec![(0x1000, k, Some(k + 1))];
                if k == 5 {
                    mem.push((0x1010, 0xaaaa, None));
                }
                (vec![0x90], Vec::new(), mem)
            })
            .collect();
        let dir = std::env::temp_dir().join(format!("tk-mem-lean-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (path, index, _) = with_sidecar(&dir, "h.trace64", &hand_built(&steps));
        let q = query(9_990, 0x1000, 24);
        MASK_READS.with(|r| r.set(0));
        let indexed = ask_file(&path, &index, false, q);
        // Step 9,989 (the word's last writer) and step 5 (the read beside it).
        assert_eq!(MASK_READS.with(std::cell::Cell::get), 2);
        let scanned = ask_file(&path, &dir.join("none.tkidx"), false, q);
        assert_eq!(indexed, scanned);
        let mut bytes = vec![None; 24];
        for (b, v) in bytes.iter_mut().zip(9_990u64.to_le_bytes()) {
            *b = Some(v);
        }
        for (b, v) in bytes[16..].iter_mut().zip(0xaaaau64.to_le_bytes()) {
            *b = Some(v);
        }
        assert_eq!(indexed.bytes, bytes);
        assert_eq!(indexed.source[0], Some(9_989));
        assert_eq!(indexed.source[8], None);
        assert_eq!(indexed.source[16], Some(5));
        // Early: the byte no access covers sends the search for later accesses (to infer
        // from) past every candidate after N too.
        let early = query(3, 0x1000, 24);
        MASK_READS.with(|r| r.set(0));
        let indexed = ask_file(&path, &index, false, early);
        // Step 2 (the last write before 3) and step 5 (inferred from).
        assert_eq!(MASK_READS.with(std::cell::Cell::get), 2);
        assert_eq!(
            indexed,
            ask_file(&path, &dir.join("none.tkidx"), false, early)
        );
        assert_eq!(indexed.bytes[..8], 3u64.to_le_bytes().map(Some));
        assert_eq!(
            (indexed.source[0], indexed.inferred[0]),
            (Some(2), Some(false))
        );
        assert_eq!(indexed.bytes[8], None);
        assert_eq!(
            (indexed.source[16], indexed.inferred[16]),
            (Some(5), Some(true))
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// After a recorded write, `mem` returns the written bytes, from that instruction.
    #[test]
    fn mem_after_a_write_is_the_written_bytes() {
        fn prop(case: Case) -> bool {
            let bytes = generated(&case);
            let (steps, _) = all_steps("g.trace64", &bytes, case.disasm);
            let writes: Vec<(u64, u64, Vec<u8>)> = steps
                .iter()
                .flat_map(|s| {
                    s.mem
                        .iter()
                        .filter_map(|a| Some((s.i, a.addr, s.new(a)?.to_vec())))
                        .collect::<Vec<_>>()
                })
                .collect();
            let last = steps.len() as u64 - 1;
            let writes = writes.iter().filter(|w| w.0 < last);
            for (i, addr, new) in writes.step_by(7) {
                let (m, _) = ask(
                    "g.trace64",
                    &bytes,
                    case.disasm,
                    false,
                    query(i + 1, *addr, new.len() as u64),
                )
                .unwrap();
                assert_eq!(m.value().as_ref(), Some(new), "{case:?} write at {i}");
                assert!(m.source.iter().all(|s| *s == Some(*i)));
            }
            true
        }
        QuickCheck::new()
            .tests(20)
            .quickcheck(prop as fn(Case) -> bool);
    }

    /// The real x64dbg sample: the model's answer around every address it accessed, at
    /// a few instructions.
    #[test]
    fn real_x64dbg_sample_matches_the_model() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../../shared/realdata/x64dbg/d-ornen_DBGLogParser_test1.trace64");
        let Ok(bytes) = std::fs::read(&path) else {
            assert!(
                std::env::var_os("TRACEKIT_REQUIRE_REALDATA").is_none_or(|v| v != "1"),
                "{} missing",
                path.display()
            );
            println!("note: {} absent; skipped", path.display());
            return;
        };
        for disasm in [false, true] {
            let (steps, snapshot) = all_steps("test1.trace64", &bytes, disasm);
            let n = steps.len() as u64;
            let mut addrs: Vec<u64> = steps
                .iter()
                .flat_map(|s| s.mem.iter().map(|a| a.addr))
                .collect();
            addrs.sort_unstable();
            addrs.dedup();
            assert!(addrs.len() > 10);
            let mut inferred = 0;
            for at in [0, n / 3, n / 2, n - 1] {
                for &addr in addrs.iter().step_by(3) {
                    let (m, _) = ask(
                        "test1.trace64",
                        &bytes,
                        disasm,
                        false,
                        query(at, addr - 3, 16),
                    )
                    .unwrap();
                    assert_eq!(m, reference(&steps, snapshot, at, addr - 3, 16));
                    inferred += m.inferred.iter().filter(|i| **i == Some(true)).count();
                }
            }
            assert!(inferred > 0);
        }
    }

    #[test]
    fn errors_say_what_is_wrong() {
        let bytes = write_then_read();
        let n = 603;
        let e = ask("w.trace64", &bytes, false, false, query(n, A, 8)).unwrap_err();
        assert!(
            matches!(&e, Error::Unsupported(m) if m.contains("603 is past the end") && m.contains("603 instructions")),
            "{e}"
        );
        for len in [0, MAX_LEN + 1] {
            let e = ask("w.trace64", &bytes, false, false, query(1, A, len)).unwrap_err();
            assert!(matches!(e, Error::Unsupported(_)));
        }
        let e = ask("w.trace64", &bytes, false, false, query(1, u64::MAX - 2, 8)).unwrap_err();
        assert!(matches!(e, Error::Unsupported(_)));
        // Damage after the answer's steps: the answer so far and the damage; before: the
        // damage alone.
        let cut = &bytes[..bytes.len() - 3];
        let (m, damage) = ask("w.trace64", cut, false, false, query(1, A - 8, 8)).unwrap();
        assert!(matches!(damage, Some(Error::Format { .. })));
        assert_eq!(m.value(), None);
        let e = ask("w.trace64", cut, false, false, query(602, A, 8)).unwrap_err();
        assert!(matches!(e, Error::Format { .. }), "{e}");
        // Formats without values: every byte unknown; without steps: unsupported.
        let tt6 = testdata("amber/all-opcodes.tt6");
        let (m, _) = ask("all-opcodes.tt6", &tt6, false, false, query(3, 0, 64)).unwrap();
        assert!(m.bytes.iter().all(Option::is_none));
        let mut input = input("x.json", b"{}", false);
        let options = Options::default();
        let e = trace_registry::formats::dcfg::Dcfg
            .steps(&mut input, &mut Ctx::new(&options))
            .err()
            .unwrap();
        assert!(matches!(e, Error::Unsupported(_)));
        assert_eq!(Isa::X86.word_size(), 4);
    }

    #[test]
    fn text_is_a_hex_dump_with_marks_and_sources() {
        let m = Memory {
            i: 9,
            addr: 0x100e,
            len: 4,
            bytes: vec![Some(0x41), None, Some(0x01), Some(0x20)],
            source: vec![Some(3), None, Some(12), Some(12)],
            inferred: vec![Some(false), None, Some(true), Some(true)],
            earlier: None,
            noun: "instruction",
        };
        let text = m.to_text();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "memory before instruction 9: 4 bytes at 0x100e");
        assert_eq!(
            lines[1],
            "00001000                                             41 ??  |              A?|"
        );
        assert_eq!(
            lines[2],
            "00001010 *01*20                                             |.               |"
        );
        assert!(text.contains("  0x100e..0x100f  instruction 3\n"));
        assert!(text.contains("  0x100f..0x1010  unknown\n"));
        assert!(text.contains("  0x1010..0x1012  instruction 12 (inferred)\n"));
        assert!(text.contains("*xx  inferred") && text.contains(" ??  unknown"));
        assert_eq!(
            m.to_json(),
            r#"{"i":9,"addr":"0x100e","len":4,"bytes":[65,null,1,32],"source":[3,null,12,12],"inferred":[false,null,true,true]}"#
        );
    }

    #[test]
    fn a_snapshot_marks_the_bytes_of_earlier_frames() {
        let mut m = Memory {
            i: 6,
            addr: 0x40,
            len: 3,
            bytes: vec![Some(1), Some(2), None],
            source: vec![Some(6), Some(2), None],
            inferred: vec![Some(false), Some(false), None],
            earlier: None,
            noun: "frame",
        };
        m.mark_earlier();
        assert_eq!(m.earlier, Some(vec![Some(false), Some(true), None]));
        let text = m.to_text();
        assert!(text.contains("00000040  01~02 ??"), "{text}");
        assert!(
            text.contains("~xx  earlier: frame 6 did not collect it"),
            "{text}"
        );
        assert!(text.contains("  0x40..0x41  frame 6\n"), "{text}");
        assert!(text.contains("  0x41..0x42  frame 2 (earlier)\n"), "{text}");
        assert!(m.to_json().ends_with(r#""earlier":[false,true,null]}"#));
    }
}
