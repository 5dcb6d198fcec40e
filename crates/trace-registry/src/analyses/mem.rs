//! `mem`: the memory bytes as known before instruction N, from the accesses the trace
//! recorded, in one pass over the instruction stream.
//!
//! Each byte comes from the latest access before N that covered it, with its value after
//! that instruction (`new` if recorded, else `old`: x64dbg records `new` only when the
//! value changed); failing that, from the `old` value of the earliest access at or after N
//! (marked inferred: what memory held, since nothing before N wrote it); else it is
//! unknown. An access covers the word x64dbg recorded (8 or 4 bytes) or, with
//! [`Options::disasm`](crate::Options::disasm), the operand size. A tfile frame is a
//! snapshot taken before its instruction ran, so the bytes come from frame N's own `M`
//! blocks and the frames before it, the latest winning (within a frame the first block, as
//! GDB reads them), and are never inferred from later frames. TT6/TT6E record addresses
//! without values and FULL records no memory: every byte is unknown.
//!
//! The pass reads the steps up to N (a later write before N changes the answer), then on
//! only while some byte is still unknown; memory is bounded by the length asked for, at
//! most [`MAX_LEN`].
//!
//! ```
//! use trace_registry::analyses::mem::{MemQuery, mem};
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

use crate::steps::{Access, Step, Steps};
use crate::{Ctx, Error, Handler, Input};

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
        }
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
            "memory before instruction {}: {} byte{} at {:#x}\n",
            self.i,
            self.len,
            if self.len == 1 { "" } else { "s" },
            self.addr
        );
        let end = self.addr.saturating_add(self.len);
        let digits = if end > u64::from(u32::MAX) { 16 } else { 8 };
        let at = |a: u64| -> Option<(Option<u8>, bool)> {
            let k = usize::try_from(a.checked_sub(self.addr)?).ok()?;
            let b = self.bytes.get(k)?;
            Some((*b, self.inferred.get(k).copied().flatten() == Some(true)))
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
                    Some((Some(b), inferred)) => {
                        let _ = write!(out, "{}{b:02x}", if inferred { '*' } else { ' ' });
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
        if inferred || unknown {
            out.push('\n');
        }
        if inferred {
            let _ = writeln!(
                out,
                "*xx  inferred: no access before instruction {} covers it; the value a later access found",
                self.i
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
                    writeln!(out, "  {from:#x}..{to:#x}  instruction {i} (inferred)")
                }
                Some(i) => writeln!(out, "  {from:#x}..{to:#x}  instruction {i}"),
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

/// The memory of `input` before instruction `query.at`, in one pass: the answer, and the
/// read error that cut the search for inferred bytes short, if one did (the bytes a later
/// access might have told are then unknown; the caller reports the damage).
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
    let mut steps = handler.steps(input, ctx)?;
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
    let mut memory = Memory::unknown(query.at, query.addr, n);
    let damage = read(steps.as_mut(), ctx, query.at, &mut memory)?;
    Ok((memory, damage))
}

/// The pass: steps before `at` set bytes, steps from `at` on infer them (not for a
/// snapshot). Returns the damage met after `at`, if any.
fn read(
    steps: &mut dyn Steps,
    ctx: &mut Ctx<'_>,
    at: u64,
    memory: &mut Memory,
) -> Result<Option<Error>, Error> {
    let snapshot = steps.memory_is_snapshot();
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
        return Err(crate::steps::past_end(at, seen));
    }
    Ok(None)
}
