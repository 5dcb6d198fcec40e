//! The transition table (specification section 3.5) and the table-driven decoder of a
//! chunk's bits into edge ids (section 3.7.2).
//!
//! At load time, the codes of every `CURRENT_EDGE_ID` are checked unique and prefix-free
//! as section 3.5 defines them (each code read as a 32-bit integer, left-aligned and padded
//! on the right with zeros; two codes with the same such value collide, e.g. `"0"` and
//! `"00"`), and compiled into lookup tables: per current edge, the next `k ≤ 8` bits index
//! an entry that gives the code length and the successor directly, or a sub-table for the
//! next bits of longer codes. Decoding an edge is one or two table lookups, never a search
//! bit by bit.
//!
//! Open points of the specification, settled as `specs/notes/dcfg-notes.md` §7 recommends:
//! - `""` is the zero-bit code of a unique successor. Next to other codes of the same edge
//!   it is an error in strict mode and ignored in lenient mode.
//! - A multi-edge `NEXT_EDGE_IDS` group is emitted in order and its **last** edge becomes
//!   the current edge.
//! - Decoding stops after exactly `EDGE_COUNT` edges (`FIRST_EDGE_ID` included), whatever
//!   bits remain; a group that would go past `EDGE_COUNT` is an error in strict mode and is
//!   cut in lenient mode.
//! - An edge with no row, or bits that match no code, is an error naming the edge, the
//!   chunk and the bit position.

use std::collections::HashMap;
use std::fmt;

use trace_core::Offset;

use crate::base64::{BitReader, Runs};
use crate::error::{Context, DecodeErrorKind, Error};
use crate::raw::MAX_CODE_BITS;

/// A `TRANSITION_CODE`: up to 32 bits.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Code {
    /// The bits, left-aligned: the first bit is bit 31.
    pub value: u32,
    /// How many bits (0..=32).
    pub len: u8,
}

impl Code {
    /// The empty (zero-bit) code `""`.
    pub const EMPTY: Code = Code { value: 0, len: 0 };

    /// Parses `"0101"`; `None` for other characters or more than 32 bits.
    #[must_use]
    pub fn parse(s: &[u8]) -> Option<Code> {
        if s.len() > MAX_CODE_BITS as usize {
            return None;
        }
        let mut value = 0u32;
        for (i, &c) in s.iter().enumerate() {
            let bit = match c {
                b'0' => 0,
                b'1' => 1,
                _ => return None,
            };
            value |= bit << (31usize.saturating_sub(i) & 31);
        }
        Some(Code {
            value,
            len: s.len() as u8,
        })
    }

    /// A code from its low `len` bits, right-aligned in `bits`.
    #[must_use]
    pub fn from_right(bits: u32, len: u8) -> Code {
        let len = len.min(32);
        let value = if len == 0 {
            0
        } else {
            bits.wrapping_shl(32u32.wrapping_sub(u32::from(len)))
        };
        Code { value, len }
    }

    /// The bits right-aligned (for [`crate::base64::BitWriter::push`]).
    #[must_use]
    pub fn right(&self) -> u32 {
        if self.len == 0 {
            0
        } else {
            self.value
                .wrapping_shr(32u32.wrapping_sub(u32::from(self.len)))
        }
    }

    /// Whether `self` is a proper or equal prefix of `other`.
    fn is_prefix_of(&self, other: &Code) -> bool {
        self.len <= other.len && prefix(self.value, self.len) == prefix(other.value, self.len)
    }
}

fn prefix(v: u32, len: u8) -> u64 {
    u64::from(v).wrapping_shr(32u32.saturating_sub(u32::from(len)))
}

impl fmt::Display for Code {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for i in 0..u32::from(self.len) {
            let bit = self.value.wrapping_shr(31u32.wrapping_sub(i)) & 1;
            f.write_str(if bit == 1 { "1" } else { "0" })?;
        }
        Ok(())
    }
}

/// One row of a transition table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TransitionRow {
    /// `CURRENT_EDGE_ID`.
    pub current: u64,
    /// `TRANSITION_CODE`.
    pub code: Code,
    /// `NEXT_EDGE_IDS`, at least one.
    pub next: Vec<u64>,
}

// Lookup entries. `meta`: kind in bits 0..8, bits consumed at this level in 8..16, index width
// in 16..24 and offset in 32..64 of the next table: the next edge's root table for SINGLE,
// the sub-table for SUB; for MULTI the offset is the group index. `id`: the next edge
// (SINGLE). Following the entry's offset needs no other lookup, so decoding an edge is one
// dependent load.
const INVALID: u64 = 0;
const SINGLE: u64 = 1;
const MULTI: u64 = 2;
const SUB: u64 = 3;
const LEVEL_BITS: u32 = 8;

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Entry {
    meta: u64,
    id: u64,
}

const INVALID_ENTRY: Entry = Entry {
    meta: INVALID,
    id: 0,
};

#[inline]
fn kind(e: u64) -> u64 {
    e & 0xff
}
#[inline]
fn elen(e: u64) -> u32 {
    ((e >> 8) & 0xff) as u32
}
#[inline]
fn ebits(e: u64) -> u32 {
    ((e >> 16) & 0xff) as u32
}
#[inline]
fn eoff(e: u64) -> u32 {
    (e >> 32) as u32
}
#[inline]
fn pack(kind: u64, len: u32, bits: u32, offset: u32) -> u64 {
    kind | (u64::from(len & 0xff) << 8) | (u64::from(bits & 0xff) << 16) | (u64::from(offset) << 32)
}

/// A root table: where the lookup for a current edge starts.
#[derive(Clone, Copy, Debug, Default)]
struct Root {
    offset: u32,
    bits: u32,
}

/// A multi-edge `NEXT_EDGE_IDS` group and the root of its last edge.
#[derive(Clone, Copy, Debug, Default)]
struct Group {
    start: u32,
    len: u32,
    next: Root,
}

/// A process's transition table, checked and compiled for decoding.
#[derive(Clone, Debug, Default)]
pub struct TransitionTable {
    rows: Vec<TransitionRow>,
    ids: Vec<u64>,
    index: HashMap<u64, u32>,
    roots: Vec<Root>,
    entries: Vec<Entry>,
    groups: Vec<Group>,
    group_ids: Vec<u64>,
    max_code: u8,
}

impl TransitionTable {
    /// Checks and compiles the rows of process `pid`; `offsets[i]` is the file offset of
    /// row `i` (for errors; may be shorter). `lenient` ignores `""` next to other codes.
    ///
    /// # Errors
    ///
    /// [`Error::Codes`] naming the edge and the two codes that are not unique or not
    /// prefix-free.
    pub fn new(
        pid: u64,
        rows: Vec<TransitionRow>,
        offsets: &[u64],
        lenient: bool,
    ) -> Result<TransitionTable, Error> {
        let mut t = TransitionTable {
            entries: vec![INVALID_ENTRY],
            ..TransitionTable::default()
        };
        let dense = |t: &mut TransitionTable, id: u64| -> u32 {
            let next = t.ids.len() as u32;
            *t.index.entry(id).or_insert_with(|| {
                t.ids.push(id);
                next
            })
        };
        // Codes per current state: (code, row index).
        let mut by_state: Vec<Vec<(Code, u32)>> = Vec::new();
        for (i, row) in rows.iter().enumerate() {
            let s = dense(&mut t, row.current);
            for &n in &row.next {
                dense(&mut t, n);
            }
            if by_state.len() <= s as usize {
                by_state.resize_with((s as usize).saturating_add(1), Vec::new);
            }
            if let Some(v) = by_state.get_mut(s as usize) {
                v.push((row.code, i as u32));
            }
        }
        let row_offset = |i: u32| Offset(offsets.get(i as usize).copied().unwrap_or(0));
        t.roots = vec![Root::default(); t.ids.len()];
        // Group index → dense index of its last edge, patched once every root is known.
        let mut group_last: Vec<u32> = Vec::new();
        for (s, codes) in by_state.iter_mut().enumerate() {
            if codes.is_empty() {
                continue;
            }
            let edge = t.ids.get(s).copied().unwrap_or(0);
            codes.sort_by_key(|&(c, i)| (c.value, c.len, i));
            if codes.len() > 1
                && let Some(&(c, i)) = codes.iter().find(|(c, _)| c.len == 0)
            {
                if lenient {
                    codes.retain(|(c, _)| c.len > 0);
                } else {
                    let other = codes.iter().find(|(c, _)| c.len > 0).map_or(c, |x| x.0);
                    return Err(Error::Codes {
                        pid,
                        edge,
                        codes: format!("\"\" and \"{other}\""),
                        reason: "are not prefix-free (\"\" must be the only code of its edge)",
                        offset: row_offset(i),
                    });
                }
            }
            for pair in codes.windows(2) {
                let [(a, _), (b, ib)] = pair else { continue };
                let reason = if a.value == b.value {
                    "are equal as 32-bit values padded with zeros"
                } else if a.is_prefix_of(b) {
                    "are not prefix-free"
                } else {
                    continue;
                };
                return Err(Error::Codes {
                    pid,
                    edge,
                    codes: format!("\"{a}\" and \"{b}\""),
                    reason,
                    offset: row_offset(*ib),
                });
            }
            let mut leaves = Vec::with_capacity(codes.len());
            for &(code, ri) in codes.iter() {
                let Some(row) = rows.get(ri as usize) else {
                    continue;
                };
                t.max_code = t.max_code.max(code.len);
                // Leaves name the next state by dense index for now (in `id`).
                let leaf = match row.next.as_slice() {
                    [one] => Entry {
                        meta: SINGLE,
                        id: u64::from(t.index.get(one).copied().unwrap_or(0)),
                    },
                    many => {
                        let start = t.group_ids.len() as u32;
                        t.group_ids.extend_from_slice(many);
                        let g = t.groups.len() as u32;
                        t.groups.push(Group {
                            start,
                            len: many.len() as u32,
                            next: Root::default(),
                        });
                        group_last.push(
                            many.last()
                                .and_then(|l| t.index.get(l))
                                .copied()
                                .unwrap_or(0),
                        );
                        Entry {
                            meta: pack(MULTI, 0, 0, g),
                            id: 0,
                        }
                    }
                };
                leaves.push((code.value, u32::from(code.len), leaf));
            }
            let (offset, bits) = build_level(&mut t.entries, &leaves);
            if let Some(r) = t.roots.get_mut(s) {
                *r = Root { offset, bits };
            }
        }
        // Patch: a SINGLE leaf points at its next edge's root table and carries its id.
        for e in &mut t.entries {
            if kind(e.meta) == SINGLE {
                let next = e.id as usize;
                let root = t.roots.get(next).copied().unwrap_or_default();
                e.meta = pack(SINGLE, elen(e.meta), root.bits, root.offset);
                e.id = t.ids.get(next).copied().unwrap_or(0);
            }
        }
        for (g, last) in t.groups.iter_mut().zip(group_last) {
            g.next = t.roots.get(last as usize).copied().unwrap_or_default();
        }
        t.rows = rows;
        Ok(t)
    }

    /// The rows as read.
    #[must_use]
    pub fn rows(&self) -> &[TransitionRow] {
        &self.rows
    }

    /// Distinct edge ids in the table.
    #[must_use]
    pub fn edge_count(&self) -> usize {
        self.ids.len()
    }

    /// The longest code, in bits.
    #[must_use]
    pub fn max_code_len(&self) -> u8 {
        self.max_code
    }

    /// Lookup-table entries (a measure of the compiled table's size).
    #[must_use]
    pub fn lookup_entries(&self) -> usize {
        self.entries.len()
    }

    /// Starts decoding a chunk: `edge_count` edges from `first`, the rest from `bits`.
    pub fn decoder<'p, R: Runs<'p>>(
        &'p self,
        first: Option<u64>,
        edge_count: u64,
        bits: BitReader<'p, R>,
        context: Context,
        offset: u64,
        lenient: bool,
    ) -> ChunkDecoder<'p, R> {
        ChunkDecoder {
            table: self,
            bits,
            cur: Root::default(),
            cur_id: 0,
            first,
            remaining: edge_count,
            started: false,
            context,
            offset,
            lenient,
            failed: false,
        }
    }
}

/// Fills a lookup level for `leaves` = (left-aligned code, length, leaf entry); returns its
/// offset and index width.
fn build_level(entries: &mut Vec<Entry>, leaves: &[(u32, u32, Entry)]) -> (u32, u32) {
    let maxlen = leaves.iter().map(|l| l.1).max().unwrap_or(0);
    let k = maxlen.min(LEVEL_BITS);
    let base = entries.len();
    entries.resize(base.saturating_add(1usize << k), INVALID_ENTRY);
    let index = |v: u32| -> usize { (u64::from(v) >> 32u32.wrapping_sub(k)) as usize };
    let mut i = 0usize;
    while let Some(&(v, len, leaf)) = leaves.get(i) {
        if len <= k {
            let first = base.saturating_add(index(v));
            let span = 1usize << (k.wrapping_sub(len));
            for e in entries
                .get_mut(first..first.saturating_add(span))
                .unwrap_or_default()
            {
                *e = Entry {
                    meta: leaf.meta | (u64::from(len) << 8),
                    id: leaf.id,
                };
            }
            i = i.wrapping_add(1);
        } else {
            // Every longer code with the same first k bits goes to one sub-table.
            let p = index(v);
            let mut j = i;
            let mut sub = Vec::new();
            while let Some(&(w, l, lf)) = leaves.get(j) {
                if l <= k || index(w) != p {
                    break;
                }
                sub.push((w.wrapping_shl(k), l.wrapping_sub(k), lf));
                j = j.wrapping_add(1);
            }
            let (soff, sbits) = build_level(entries, &sub);
            if let Some(e) = entries.get_mut(base.saturating_add(p)) {
                *e = Entry {
                    meta: pack(SUB, k, sbits, soff),
                    id: 0,
                };
            }
            i = j;
        }
    }
    (base as u32, k)
}

/// Edges decoded per block into a stack buffer before they are appended to the output.
const BLOCK: usize = 256;

/// Decodes one chunk's edges, resumably, so a huge chunk can be read in batches.
#[derive(Debug)]
pub struct ChunkDecoder<'p, R> {
    table: &'p TransitionTable,
    bits: BitReader<'p, R>,
    cur: Root,
    cur_id: u64,
    first: Option<u64>,
    remaining: u64,
    started: bool,
    context: Context,
    offset: u64,
    lenient: bool,
    failed: bool,
}

impl<'p, R: Runs<'p>> ChunkDecoder<'p, R> {
    /// Edges still to decode.
    #[must_use]
    pub fn remaining(&self) -> u64 {
        if self.failed { 0 } else { self.remaining }
    }

    /// Bits consumed so far.
    #[must_use]
    pub fn bit_position(&self) -> u64 {
        self.bits.position()
    }

    #[cold]
    fn fail(&mut self, kind: DecodeErrorKind) -> Error {
        self.failed = true;
        Error::Decode {
            kind,
            context: self.context.clone(),
            bit: self.bits.position(),
            offset: Offset(self.offset),
        }
    }

    /// The error for an entry that is not a code, or a code longer than the bits left.
    #[cold]
    fn no_code(&mut self, e: u64, used: u32, k: u32) -> Error {
        let edge = self.cur_id;
        let kind = if self.cur.offset == 0 && self.cur.bits == 0 {
            DecodeErrorKind::NoSuccessor { edge }
        } else if kind(e) != INVALID || used.wrapping_add(k) > self.bits.available() {
            DecodeErrorKind::OutOfBits { edge }
        } else {
            let n = self.bits.available().min(MAX_CODE_BITS);
            let top = Code {
                value: (self.bits.window() >> 32) as u32,
                len: n as u8,
            };
            DecodeErrorKind::NoTransition {
                edge,
                bits: top.to_string(),
            }
        };
        self.fail(kind)
    }

    /// Appends up to about `max` more edges to `out` (a multi-edge group may add a few
    /// more); returns how many were added, 0 when the chunk is done.
    ///
    /// # Errors
    ///
    /// [`Error::Decode`]: a missing transition, bits that run out, or (strict) an
    /// overshooting group. Later calls return `Ok(0)`.
    pub fn decode_into(&mut self, out: &mut Vec<u64>, max: u64) -> Result<u64, Error> {
        let room = self.remaining.min(max).min(1 << 16);
        out.reserve(usize::try_from(room).unwrap_or(0));
        self.decode_each(max, |id| {
            out.push(id);
            true
        })
    }

    /// Hands up to about `max` more edges to `emit`, in order (a multi-edge group may add
    /// a few more); stops early after an edge for which `emit` returns `false` (and the
    /// rest of its group). Returns how many were handed out, 0 when the chunk is done.
    /// With `emit` inlined into the decoding loop (a closure marked `#[inline(always)]`),
    /// a caller's work per edge overlaps the decoding's, which waits on table look-ups.
    ///
    /// # Errors
    ///
    /// As [`ChunkDecoder::decode_into`].
    #[inline]
    pub fn decode_each(
        &mut self,
        max: u64,
        mut emit: impl FnMut(u64) -> bool,
    ) -> Result<u64, Error> {
        if self.failed || self.remaining == 0 {
            return Ok(0);
        }
        let mut done = 0u64;
        if !self.started {
            self.started = true;
            let Some(first) = self.first else {
                return Err(self.fail(DecodeErrorKind::MissingFirstEdge));
            };
            self.remaining = self.remaining.wrapping_sub(1);
            self.cur_id = first;
            let root = self.table.index.get(&first);
            if let Some(&s) = root {
                self.cur = self
                    .table
                    .roots
                    .get(s as usize)
                    .copied()
                    .unwrap_or_default();
            }
            done = 1;
            // The first edge is handed out also when it has no successor.
            let go_on = emit(first);
            if root.is_none() && self.remaining > 0 {
                return Err(self.fail(DecodeErrorKind::NoSuccessor { edge: first }));
            }
            if !go_on {
                return Ok(done);
            }
        }
        let mut left = self.remaining.min(max.saturating_sub(done));
        while left > 0 {
            let n = usize::try_from(left).unwrap_or(BLOCK).min(BLOCK);
            let got = self.block(n, &mut emit);
            let got_n = got.0 as u64;
            done = done.saturating_add(got_n);
            self.remaining = self.remaining.saturating_sub(got_n);
            left = left.saturating_sub(got_n);
            match got.1 {
                Step::Ok if got.0 < n => return Ok(done),
                Step::Ok => {}
                Step::Group(g) => {
                    // A multi-edge group: rare, handled outside the hot loop.
                    let t = self.table;
                    let group = t.groups.get(g as usize).copied().unwrap_or_default();
                    let ids = t
                        .group_ids
                        .get(
                            group.start as usize
                                ..(group.start as usize).saturating_add(group.len as usize),
                        )
                        .unwrap_or_default();
                    let n = ids.len() as u64;
                    if n > self.remaining && !self.lenient {
                        let kind = DecodeErrorKind::Overshoot {
                            edge: self.cur_id,
                            group: n,
                            remaining: self.remaining,
                        };
                        return Err(self.fail(kind));
                    }
                    self.bits.consume(got.2);
                    let take = usize::try_from(n.min(self.remaining)).unwrap_or(0);
                    let mut go_on = true;
                    for &id in ids.get(..take).unwrap_or_default() {
                        go_on &= emit(id);
                    }
                    done = done.saturating_add(take as u64);
                    self.remaining = self.remaining.saturating_sub(n);
                    left = left.saturating_sub(n);
                    self.cur = group.next;
                    self.cur_id = ids.last().copied().unwrap_or(self.cur_id);
                    if !go_on {
                        return Ok(done);
                    }
                }
                Step::Fail(e, used, k) => return Err(self.no_code(e, used, k)),
            }
        }
        Ok(done)
    }

    /// The hot loop: decodes up to `n` ≤ [`BLOCK`] single-edge transitions, handing
    /// each to `emit`; stops early at a multi-edge group (not consumed), an error, or
    /// after an edge `emit` refused (the count then is below `n`, with [`Step::Ok`]).
    #[inline]
    fn block(&mut self, n: usize, emit: &mut impl FnMut(u64) -> bool) -> (usize, Step, u32) {
        let entries = self.table.entries.as_slice();
        let mut cur = self.cur;
        let mut cur_id = self.cur_id;
        let mut i = 0usize;
        let mut step = Step::Ok;
        let mut pending = 0u32;
        while i < n {
            if self.bits.available() < MAX_CODE_BITS {
                self.bits.refill();
            }
            let mut off = cur.offset;
            let mut k = cur.bits;
            let mut w = self.bits.window();
            let mut used = 0u32;
            let e = loop {
                let idx = (w >> 32).wrapping_shr(32u32.wrapping_sub(k)) as u32;
                let e = entries
                    .get(off.wrapping_add(idx) as usize)
                    .copied()
                    .unwrap_or(INVALID_ENTRY);
                if kind(e.meta) != SUB {
                    break e;
                }
                w = w.wrapping_shl(k);
                used = used.wrapping_add(k);
                off = eoff(e.meta);
                k = ebits(e.meta);
            };
            let total = used.wrapping_add(elen(e.meta));
            let kd = kind(e.meta);
            if kd == SINGLE && total <= self.bits.available() {
                self.bits.advance(total);
                i = i.wrapping_add(1);
                cur = Root {
                    offset: eoff(e.meta),
                    bits: ebits(e.meta),
                };
                cur_id = e.id;
                if !emit(e.id) {
                    break;
                }
            } else if kd == MULTI && total <= self.bits.available() {
                step = Step::Group(eoff(e.meta));
                pending = total;
                break;
            } else {
                step = Step::Fail(e.meta, used, k);
                break;
            }
        }
        self.cur = cur;
        self.cur_id = cur_id;
        (i, step, pending)
    }
}

/// How a block of the hot loop ended.
#[derive(Clone, Copy, Debug)]
enum Step {
    Ok,
    /// At a multi-edge group (index), whose code is not consumed yet.
    Group(u32),
    /// At an entry that is no code (or too long for the bits left).
    Fail(u64, u32, u32),
}

#[cfg(test)]
// Test code: panics are failures; helpers outside #[test] functions are not exempted.
#[allow(
    clippy::arithmetic_side_effects,
    clippy::indexing_slicing,
    clippy::unwrap_used,
    clippy::panic
)]
mod tests {
    use super::*;
    use crate::base64::{BitWriter, Plain};

    pub(crate) fn rows(spec: &[(u64, &str, &[u64])]) -> Vec<TransitionRow> {
        spec.iter()
            .map(|(c, code, next)| TransitionRow {
                current: *c,
                code: Code::parse(code.as_bytes()).unwrap(),
                next: next.to_vec(),
            })
            .collect()
    }

    /// The example table of section 3.5.
    fn spec_table() -> TransitionTable {
        TransitionTable::new(
            1,
            rows(&[
                (123, "0", &[124]),
                (123, "1", &[125]),
                (124, "", &[456]),
                (125, "0", &[543]),
                (125, "10", &[542, 549]),
                (125, "11", &[540, 541]),
            ]),
            &[],
            false,
        )
        .unwrap()
    }

    fn decode_bits(
        t: &TransitionTable,
        first: u64,
        count: u64,
        bits: &str,
        lenient: bool,
    ) -> Result<Vec<u64>, Error> {
        let mut w = BitWriter::default();
        for c in bits.bytes() {
            w.push(u32::from(c == b'1'), 1);
        }
        let text = w.finish();
        let mut d = t.decoder(
            Some(first),
            count,
            BitReader::new(Plain(Some(text.as_bytes()))),
            Context::Standalone,
            0,
            lenient,
        );
        let mut out = Vec::new();
        while d.decode_into(&mut out, 3)? > 0 {}
        Ok(out)
    }

    #[test]
    fn spec_example_1() {
        // Starting at 123 with bits "110": 123, 125, 542, 549.
        let t = spec_table();
        assert_eq!(
            decode_bits(&t, 123, 4, "110", false).unwrap(),
            [123, 125, 542, 549]
        );
    }

    #[test]
    fn spec_example_2() {
        // Starting at 123 with bits "0": 123, 124, 456 (the last with zero bits).
        let t = spec_table();
        assert_eq!(
            decode_bits(&t, 123, 3, "0", false).unwrap(),
            [123, 124, 456]
        );
    }

    #[test]
    fn overshoot_strict_and_lenient() {
        let t = spec_table();
        let e = decode_bits(&t, 123, 3, "110", false).unwrap_err();
        assert!(
            matches!(
                e,
                Error::Decode {
                    kind: DecodeErrorKind::Overshoot {
                        group: 2,
                        remaining: 1,
                        ..
                    },
                    ..
                }
            ),
            "{e}"
        );
        assert_eq!(
            decode_bits(&t, 123, 3, "110", true).unwrap(),
            [123, 125, 542]
        );
        // Stops exactly at EDGE_COUNT: trailing bits ignored.
        assert_eq!(
            decode_bits(&t, 123, 2, "1111111", false).unwrap(),
            [123, 125]
        );
        assert_eq!(decode_bits(&t, 123, 1, "", false).unwrap(), [123]);
        assert_eq!(
            decode_bits(&t, 123, 0, "", false).unwrap(),
            Vec::<u64>::new()
        );
    }

    #[test]
    fn missing_transitions_and_bits() {
        let t = spec_table();
        // 456 has no row.
        let e = decode_bits(&t, 123, 4, "0", false).unwrap_err();
        assert!(
            matches!(
                e,
                Error::Decode {
                    kind: DecodeErrorKind::NoSuccessor { edge: 456 },
                    ..
                }
            ),
            "{e}"
        );
        // Bits run out: after 125 we need 1 or 2 more bits, but the string ends (6 bits of
        // padding "000000" are there: "1" + padding decodes 125 then 543 (code "0")...
        // so use a table whose codes need more bits than the padding.
        let t2 = TransitionTable::new(1, rows(&[(1, "1111111", &[2]), (1, "0", &[3])]), &[], false)
            .unwrap();
        let e = decode_bits(&t2, 1, 2, "1", false).unwrap_err();
        assert!(
            matches!(
                e,
                Error::Decode {
                    kind: DecodeErrorKind::OutOfBits { edge: 1 },
                    ..
                }
            ),
            "{e}"
        );
        // Incomplete code set: "10" matches nothing.
        let t3 = TransitionTable::new(
            1,
            rows(&[
                (1, "0", &[2]),
                (1, "11", &[3]),
                (2, "", &[1]),
                (3, "", &[1]),
            ]),
            &[],
            false,
        )
        .unwrap();
        let e = decode_bits(&t3, 1, 4, "0101000000", false).unwrap_err();
        assert!(
            matches!(
                &e,
                Error::Decode {
                    kind: DecodeErrorKind::NoTransition { edge: 1, .. },
                    bit: 1,
                    ..
                }
            ),
            "{e}"
        );
        assert!(
            e.to_string()
                .starts_with("no transition from edge 1 matches the bits \"10100000000\" at bit 1"),
            "{e}"
        );
        // Unknown first edge with more edges to decode.
        let e = decode_bits(&t3, 99, 2, "0", false).unwrap_err();
        assert!(
            matches!(
                e,
                Error::Decode {
                    kind: DecodeErrorKind::NoSuccessor { edge: 99 },
                    ..
                }
            ),
            "{e}"
        );
        assert_eq!(decode_bits(&t3, 99, 1, "", false).unwrap(), [99]);
    }

    #[test]
    fn bad_tables_name_edge_and_codes() {
        let e = TransitionTable::new(
            3,
            rows(&[(5, "0", &[1]), (5, "01", &[2])]),
            &[0, 0x40],
            false,
        )
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            "TRANSITION_TABLE of process 3: codes \"0\" and \"01\" of edge 5 are not prefix-free at offset 0x40"
        );
        let e = TransitionTable::new(3, rows(&[(5, "0", &[1]), (5, "00", &[2])]), &[], false)
            .unwrap_err();
        assert!(
            e.to_string()
                .contains("\"0\" and \"00\" of edge 5 are equal as 32-bit values"),
            "{e}"
        );
        let e = TransitionTable::new(3, rows(&[(5, "1", &[1]), (5, "1", &[2])]), &[], false)
            .unwrap_err();
        assert!(e.to_string().contains("are equal"), "{e}");
        let r = rows(&[(5, "", &[1]), (5, "1", &[2]), (5, "0", &[3])]);
        let e = TransitionTable::new(3, r.clone(), &[], false).unwrap_err();
        assert!(e.to_string().contains("\"\" and \"0\" of edge 5"), "{e}");
        // Lenient: "" ignored next to other codes.
        let t = TransitionTable::new(3, r, &[], true).unwrap();
        assert_eq!(decode_bits(&t, 5, 2, "1", false).unwrap(), [5, 2]);
        assert_eq!(decode_bits(&t, 5, 2, "0", false).unwrap(), [5, 3]);
        // Other edges' codes do not interact.
        assert!(
            TransitionTable::new(
                3,
                rows(&[(5, "0", &[1]), (6, "0", &[2]), (6, "1", &[2])]),
                &[],
                false
            )
            .is_ok()
        );
    }

    #[test]
    fn long_codes_use_sub_tables() {
        // A complete code with lengths 1..=32 from edge 1: "1", "01", "001", …, 31 zeros + "1",
        // and 32 zeros.
        let mut spec: Vec<(u64, String, Vec<u64>)> = (1..=32u64)
            .map(|l| (1, format!("{}1", "0".repeat(l as usize - 1)), vec![100 + l]))
            .collect();
        spec.push((1, "0".repeat(32), vec![200]));
        for l in 1..=32u64 {
            spec.push((100 + l, String::new(), vec![1]));
        }
        spec.push((200, String::new(), vec![1]));
        let r: Vec<TransitionRow> = spec
            .iter()
            .map(|(c, code, next)| TransitionRow {
                current: *c,
                code: Code::parse(code.as_bytes()).unwrap(),
                next: next.clone(),
            })
            .collect();
        let t = TransitionTable::new(1, r, &[], false).unwrap();
        let mut bits = String::new();
        let mut want = vec![1u64];
        for l in [1usize, 9, 32, 17, 8, 16, 24, 25] {
            bits.push_str(&format!("{}1", "0".repeat(l - 1)));
            want.extend([100 + l as u64, 1]);
        }
        bits.push_str(&"0".repeat(32));
        want.extend([200, 1]);
        assert_eq!(
            decode_bits(&t, 1, want.len() as u64, &bits, false).unwrap(),
            want
        );
    }

    #[test]
    fn code_parse_and_display() {
        assert_eq!(Code::parse(b""), Some(Code::EMPTY));
        let c = Code::parse(b"1011").unwrap();
        assert_eq!(
            (c.right(), c.len, c.to_string()),
            (0b1011, 4, "1011".to_owned())
        );
        assert_eq!(Code::from_right(0b1011, 4), c);
        assert!(Code::parse(b"012").is_none());
        assert!(Code::parse("1".repeat(33).as_bytes()).is_none());
        let c = Code::parse("1".repeat(32).as_bytes()).unwrap();
        assert_eq!((c.value, c.right()), (u32::MAX, u32::MAX));
    }
}
