//! JSON Lines: one JSON object per record, keys in schema order, values shown as each
//! field's [`Json`] says. This is `tracekit dump`.

use std::io::{self, Write};
use std::sync::Arc;

use trace_core::hex;

use trace_model::schema::{
    Cell, Field, Json, Row, Run, Schema, Visitor, row_one_by_one, rows_one_by_one, run_len,
    tree_layout,
};

/// Past this many buffered bytes the buffer is written out (mid-line too, so that a record
/// with a huge list, a DCFG-Trace chunk of a billion edges, needs no huge buffer). As large
/// as the command's `BufWriter` around stdout (256 KiB), which passes a write that size
/// straight through instead of copying it into its own buffer.
const FLUSH_AT: usize = 1 << 18;

/// How one field is written, prepared once per schema.
#[derive(Debug)]
struct FieldPlan {
    /// `"name":`, escaped.
    key: Key,
    json: Json,
    omit_null: bool,
    /// Where the fields of a nested record's or child table's schema start.
    child: Option<usize>,
    /// For a child table shown as [`Json::Values`]: which of its row's fields is shown
    /// (the first not [`Json::Skip`]; none if all are) and how.
    shown: Option<(usize, Json)>,
}

/// Where the sink is inside a record. Fields of one schema are contiguous in
/// `JsonLines::fields`, from `base`.
#[derive(Clone, Copy, Debug)]
enum Frame {
    /// Between records.
    Idle,
    /// Inside a record: field `base + next` comes next; `wrote` once a key is out.
    Row {
        base: usize,
        next: usize,
        wrote: bool,
    },
    /// Inside a list of plain values shown as `json`.
    List { json: Json, count: usize },
    /// Inside a child table shown as a JSON array of objects.
    Rows { base: usize, count: usize },
    /// Inside a child table shown as one JSON object.
    Object { base: usize, count: usize },
    /// Inside a child table shown as an array of each row's first shown value: the
    /// `shown`th field of each row (none: `usize::MAX`), as `json`.
    Values {
        count: usize,
        shown: usize,
        json: Json,
    },
    /// Inside one row of such a table (which replaces the table's frame until the row
    /// ends, rather than being pushed over it: a DCFG-Trace chunk has millions): field
    /// `next` comes next; `done` once the value is out.
    Value {
        count: usize,
        shown: usize,
        json: Json,
        next: usize,
        done: bool,
    },
    /// Inside one entry of such an object: field `base + next` comes next; `done` once its
    /// value is out.
    Entry {
        base: usize,
        next: usize,
        done: bool,
    },
    /// Inside a value JSON does not show: everything up to its end is dropped.
    Skip { depth: usize },
}

/// Writes records as JSON Lines to `W`.
#[derive(Debug)]
pub struct JsonLines<W: Write> {
    out: W,
    buf: Vec<u8>,
    /// Every schema's fields, each schema's contiguous.
    fields: Vec<FieldPlan>,
    /// Where each table's fields start, by table index.
    tables: Vec<usize>,
    /// `"table":"name",` for each table but the first (a line of the format's main table
    /// needs no label; the others say which table they belong to).
    labels: Vec<Vec<u8>>,
    /// The innermost frame (kept out of `stack`: it is touched by every value).
    top: Frame,
    /// The frames around it.
    stack: Vec<Frame>,
    error: Option<io::Error>,
}

impl<W: Write> JsonLines<W> {
    /// A sink for records of these tables (indexed as the record reader indexes them).
    pub fn new(out: W, tables: &[Arc<Schema>]) -> JsonLines<W> {
        let mut sink = JsonLines {
            out,
            buf: Vec::with_capacity(FLUSH_AT),
            fields: Vec::new(),
            tables: Vec::new(),
            labels: Vec::new(),
            top: Frame::Idle,
            stack: Vec::new(),
            error: None,
        };
        let (fields, starts) = tree_layout(tables);
        sink.fields = fields
            .into_iter()
            .map(|l| FieldPlan {
                key: key_bytes(&l.field),
                json: l.field.json,
                omit_null: l.field.omit_null,
                child: l.child,
                shown: l.shown,
            })
            .collect();
        sink.tables = starts;
        for (n, t) in tables.iter().enumerate() {
            let mut label = Vec::new();
            if n > 0 {
                label.extend_from_slice(b"\"table\":");
                push_str(&mut label, &t.name);
                label.push(b',');
            }
            sink.labels.push(label);
        }
        sink
    }

    /// Writes one record of table `table` as a line.
    ///
    /// # Errors
    ///
    /// Writing to the output fails.
    pub fn write(&mut self, table: usize, row: &dyn Row) -> io::Result<()> {
        let base = self.tables.get(table).copied().unwrap_or(0);
        self.buf.push(b'{');
        let label = self.labels.get(table).map_or(&[][..], Vec::as_slice);
        self.buf.extend_from_slice(label);
        self.stack.clear();
        self.top = Frame::Row {
            base,
            next: 0,
            wrote: false,
        };
        row.visit(self);
        self.top = Frame::Idle;
        self.buf.extend_from_slice(b"}\n");
        if let Some(e) = self.error.take() {
            return Err(e);
        }
        if self.buf.len() >= FLUSH_AT {
            self.flush_buf()?;
        }
        Ok(())
    }

    /// Writes out what is buffered and flushes the output.
    ///
    /// # Errors
    ///
    /// Writing to the output fails.
    pub fn flush(&mut self) -> io::Result<()> {
        self.flush_buf()?;
        self.out.flush()
    }

    /// The output, after [`JsonLines::flush`].
    pub fn into_inner(self) -> W {
        self.out
    }

    fn flush_buf(&mut self) -> io::Result<()> {
        let r = self.out.write_all(&self.buf);
        self.buf.clear();
        r
    }

    fn push(&mut self, frame: Frame) {
        let parent = std::mem::replace(&mut self.top, frame);
        self.stack.push(parent);
    }

    fn pop(&mut self) -> Frame {
        let parent = self.stack.pop().unwrap_or(Frame::Idle);
        std::mem::replace(&mut self.top, parent)
    }

    /// Starts the next value: writes its key (and separator) and returns how to show it,
    /// or `None` when the value is not shown (dropped, or the key of an object entry,
    /// which `as_key` has written already).
    #[inline]
    fn start_value(&mut self, is_null: bool, as_key: &mut dyn FnMut(&mut Vec<u8>)) -> Option<Json> {
        match &mut self.top {
            Frame::Row { base, next, wrote } => {
                let i = base.saturating_add(*next);
                *next = next.saturating_add(1);
                let f = self.fields.get(i)?;
                if f.json == Json::Skip || (is_null && f.omit_null) {
                    return None;
                }
                if *wrote {
                    self.buf.push(b',');
                }
                *wrote = true;
                f.key.write(&mut self.buf);
                Some(f.json)
            }
            Frame::List { json, count } => {
                if *count > 0 {
                    self.buf.push(b',');
                }
                *count = count.saturating_add(1);
                Some(*json)
            }
            Frame::Entry { base, next, done } => {
                let i = base.saturating_add(*next);
                let first = *next == 0;
                *next = next.saturating_add(1);
                if first {
                    self.buf.push(b'"');
                    as_key(&mut self.buf);
                    self.buf.extend_from_slice(b"\":");
                    return None;
                }
                if *done || is_null {
                    return None;
                }
                *done = true;
                self.fields.get(i).map(|f| f.json)
            }
            Frame::Value {
                shown,
                json,
                next,
                done,
                ..
            } => {
                let show = *next == *shown && !*done;
                *next = next.saturating_add(1);
                if !show {
                    return None;
                }
                *done = true;
                Some(*json)
            }
            Frame::Idle
            | Frame::Rows { .. }
            | Frame::Object { .. }
            | Frame::Values { .. }
            | Frame::Skip { .. } => None,
        }
    }

    fn maybe_flush(&mut self) {
        if self.buf.len() >= FLUSH_AT
            && self.error.is_none()
            && let Err(e) = self.flush_buf()
        {
            self.error = Some(e);
        }
    }
}

/// A field's `"name":`. Most are short: those are kept in a fixed array and written with a
/// fixed-size copy (which compiles to a few moves, where a copy of unknown length is a call).
#[derive(Debug)]
enum Key {
    Short { bytes: [u8; KEY_INLINE], len: usize },
    Long(Box<[u8]>),
}

const KEY_INLINE: usize = 32;

impl Key {
    #[inline(always)]
    fn write(&self, buf: &mut Vec<u8>) {
        match self {
            Key::Short { bytes, len } => {
                let end = buf.len().saturating_add(*len);
                buf.extend_from_slice(bytes);
                buf.truncate(end);
            }
            Key::Long(b) => buf.extend_from_slice(b),
        }
    }
}

fn key_bytes(f: &Field) -> Key {
    let mut k = Vec::with_capacity(f.name.len().saturating_add(3));
    push_str(&mut k, &f.name);
    k.push(b':');
    let mut bytes = [0u8; KEY_INLINE];
    match bytes.get_mut(..k.len()) {
        Some(prefix) => {
            prefix.copy_from_slice(&k);
            Key::Short {
                bytes,
                len: k.len(),
            }
        }
        None => Key::Long(k.into_boxed_slice()),
    }
}

impl<W: Write> Visitor for JsonLines<W> {
    fn rows(&mut self, runs: &[Run<'_>]) {
        // Shown as values: one field of each row (a DCFG-Trace chunk's edge ids), in one
        // loop.
        if let Frame::Values {
            mut count,
            shown,
            json,
        } = self.top
            && let Some(Run::UInts(values)) = runs.get(shown)
        {
            for &x in values.get(..run_len(runs)).unwrap_or_default() {
                if count > 0 {
                    self.buf.push(b',');
                }
                count = count.saturating_add(1);
                push_uint(&mut self.buf, x, json);
                if self.buf.len() >= FLUSH_AT {
                    self.maybe_flush();
                }
            }
            self.top = Frame::Values { count, shown, json };
            return;
        }
        rows_one_by_one(self, runs);
    }

    fn uint(&mut self, v: u64) {
        // The hot case first: a value of a row of a child table shown as its values (a
        // DCFG-Trace chunk's edges), without `start_value`'s general dispatch.
        let json = if let Frame::Value {
            shown,
            json,
            next,
            done,
            ..
        } = &mut self.top
        {
            let show = *next == *shown && !*done;
            *next = next.saturating_add(1);
            if !show {
                return;
            }
            *done = true;
            *json
        } else {
            let Some(json) = self.start_value(false, &mut |b| push_dec(b, v)) else {
                return;
            };
            json
        };
        push_uint(&mut self.buf, v, json);
    }

    fn int(&mut self, v: i64) {
        let mut key = |b: &mut Vec<u8>| push_int(b, v);
        if self.start_value(false, &mut key).is_some() {
            push_int(&mut self.buf, v);
        }
    }

    fn bool(&mut self, v: bool) {
        let text: &[u8] = if v { b"true" } else { b"false" };
        if self
            .start_value(false, &mut |b| b.extend_from_slice(text))
            .is_some()
        {
            self.buf.extend_from_slice(text);
        }
    }

    fn bytes(&mut self, v: &[u8]) {
        let Some(json) = self.start_value(false, &mut |b| hex::push_bytes(b, v)) else {
            return;
        };
        self.buf.push(b'"');
        if json == Json::HexBytes0x {
            self.buf.extend_from_slice(b"0x");
        }
        hex::push_bytes(&mut self.buf, v);
        self.buf.push(b'"');
        self.maybe_flush();
    }

    fn str(&mut self, v: &str) {
        let mut key = |b: &mut Vec<u8>| push_str_body(b, v);
        if self.start_value(false, &mut key).is_some() {
            push_str(&mut self.buf, v);
        }
    }

    fn null(&mut self) {
        // The common case first: an optional field of a record, left out.
        if let Frame::Row { base, next, .. } = &mut self.top
            && let Some(f) = self.fields.get(base.saturating_add(*next))
            && f.omit_null
        {
            *next = next.saturating_add(1);
            return;
        }
        if self
            .start_value(true, &mut |b| b.extend_from_slice(b"null"))
            .is_some()
        {
            self.buf.extend_from_slice(b"null");
        }
    }

    fn begin_list(&mut self) {
        if let Frame::Skip { depth } = &mut self.top {
            *depth = depth.saturating_add(1);
            return;
        }
        // The field this list fills, read before `start_value` moves past it.
        let field = match self.top {
            Frame::Row { base, next, .. } => self.fields.get(base.saturating_add(next)),
            _ => None,
        };
        let child = field.and_then(|f| f.child);
        let shown = field.and_then(|f| f.shown);
        let Some(json) = self.start_value(false, &mut |_| {}) else {
            self.push(Frame::Skip { depth: 1 });
            return;
        };
        match child {
            Some(base) if json == Json::Object => {
                self.buf.push(b'{');
                self.push(Frame::Object { base, count: 0 });
            }
            Some(_) if json == Json::Values => {
                self.buf.push(b'[');
                let (shown, json) = shown.unwrap_or((usize::MAX, Json::Plain));
                self.push(Frame::Values {
                    count: 0,
                    shown,
                    json,
                });
            }
            Some(base) => {
                self.buf.push(b'[');
                self.push(Frame::Rows { base, count: 0 });
            }
            None => {
                self.buf.push(b'[');
                self.push(Frame::List { json, count: 0 });
            }
        }
    }

    fn end_list(&mut self) {
        if let Frame::Skip { depth } = &mut self.top
            && *depth > 1
        {
            *depth = depth.saturating_sub(1);
            return;
        }
        match self.pop() {
            Frame::Object { .. } => self.buf.push(b'}'),
            Frame::Rows { .. } | Frame::Values { .. } | Frame::List { .. } => self.buf.push(b']'),
            _ => {}
        }
        self.maybe_flush();
    }

    fn begin_row(&mut self) {
        match &mut self.top {
            Frame::Skip { depth } => *depth = depth.saturating_add(1),
            Frame::Rows { base, count } => {
                let base = *base;
                if *count > 0 {
                    self.buf.push(b',');
                }
                *count = count.saturating_add(1);
                self.buf.push(b'{');
                self.push(Frame::Row {
                    base,
                    next: 0,
                    wrote: false,
                });
            }
            &mut Frame::Values { count, shown, json } => {
                if count > 0 {
                    self.buf.push(b',');
                }
                self.top = Frame::Value {
                    count: count.saturating_add(1),
                    shown,
                    json,
                    next: 0,
                    done: false,
                };
            }
            Frame::Object { base, count } => {
                let base = *base;
                if *count > 0 {
                    self.buf.push(b',');
                }
                *count = count.saturating_add(1);
                self.push(Frame::Entry {
                    base,
                    next: 0,
                    done: false,
                });
            }
            &mut Frame::Row { base, next, .. } => {
                // A nested record (`Type::Struct`) in the field about to be filled.
                let child = self
                    .fields
                    .get(base.saturating_add(next))
                    .and_then(|f| f.child);
                match (self.start_value(false, &mut |_| {}), child) {
                    (Some(_), Some(base)) => {
                        self.buf.push(b'{');
                        self.push(Frame::Row {
                            base,
                            next: 0,
                            wrote: false,
                        });
                    }
                    _ => self.push(Frame::Skip { depth: 1 }),
                }
            }
            _ => self.push(Frame::Skip { depth: 1 }),
        }
    }

    /// A whole record: a struct JSON does not show (the field is [`Json::Skip`], or the
    /// record is being skipped) dropped at once; an entry of a table shown as an object
    /// (an x64dbg instruction's registers) or a row of a table shown as an array of objects
    /// (its memory accesses) written as `begin_row`, the values and `end_row` would write
    /// it, without the row's frame; else value by value.
    fn row(&mut self, cells: &[Cell<'_>]) {
        match &mut self.top {
            Frame::Rows { base, count }
                if !cells.iter().any(|c| matches!(c, Cell::UInts(_)))
                    && self.fields.len() >= base.saturating_add(cells.len()) =>
            {
                let base = *base;
                if *count > 0 {
                    self.buf.push(b',');
                }
                *count = count.saturating_add(1);
                self.buf.push(b'{');
                let mut wrote = false;
                let plans = self.fields.get(base..).unwrap_or_default();
                for (cell, f) in cells.iter().zip(plans) {
                    let null = matches!(cell, Cell::Null);
                    if f.json == Json::Skip || (null && f.omit_null) {
                        continue;
                    }
                    if wrote {
                        self.buf.push(b',');
                    }
                    wrote = true;
                    f.key.write(&mut self.buf);
                    match *cell {
                        Cell::UInt(v) => push_uint(&mut self.buf, v, f.json),
                        Cell::Str(v) => push_str(&mut self.buf, v),
                        Cell::Null | Cell::UInts(_) => self.buf.extend_from_slice(b"null"),
                    }
                }
                self.buf.push(b'}');
                return;
            }
            Frame::Skip { .. } => return,
            Frame::Row { base, next, .. }
                if self
                    .fields
                    .get(base.saturating_add(*next))
                    .is_some_and(|f| f.json == Json::Skip) =>
            {
                *next = next.saturating_add(1);
                return;
            }
            Frame::Object { base, count } => {
                // The entry's value is its first field that is not missing: a value after
                // the integer (a null of a wider column) is not shown.
                if let [Cell::Str(name), Cell::UInt(value), ..] = cells
                    && let Some(f) = self.fields.get(base.saturating_add(1))
                {
                    if *count > 0 {
                        self.buf.push(b',');
                    }
                    *count = count.saturating_add(1);
                    self.buf.push(b'"');
                    push_str_body(&mut self.buf, name);
                    self.buf.extend_from_slice(b"\":");
                    push_uint(&mut self.buf, *value, f.json);
                    return;
                }
            }
            _ => {}
        }
        row_one_by_one(self, cells);
    }

    fn end_row(&mut self) {
        if let Frame::Value {
            count,
            shown,
            json,
            done,
            ..
        } = self.top
        {
            if !done {
                self.buf.extend_from_slice(b"null");
            }
            self.top = Frame::Values { count, shown, json };
            return;
        }
        if let Frame::Skip { depth } = &mut self.top
            && *depth > 1
        {
            *depth = depth.saturating_sub(1);
            return;
        }
        match self.pop() {
            Frame::Row { .. } => self.buf.push(b'}'),
            Frame::Entry { done: false, .. } => {
                self.buf.extend_from_slice(b"null");
            }
            _ => {}
        }
    }
}

/// An unsigned integer shown as `json`.
#[inline(always)]
fn push_uint(buf: &mut Vec<u8>, v: u64, json: Json) {
    match json {
        Json::Hex | Json::HexBytes0x => push_hex_quoted(buf, v, 0),
        Json::HexWidth(w) => push_hex_quoted(buf, v, w),
        _ => push_dec(buf, v),
    }
}

/// `"0x…"`, zero-padded to `width` characters with the `0x` when `width` > 0.
///
/// The whole literal is made in a fixed array, the digits eight at a time
/// ([`hex::leading_digits`]), and copied with one fixed-size copy cut back to its length (a
/// few moves, where a copy of unknown length is a call and a byte at a time checks the
/// capacity for each).
#[inline]
fn push_hex_quoted(buf: &mut Vec<u8>, v: u64, width: u8) {
    // Padding to 16 digits comes from the leading zero nibbles themselves.
    let padded = u32::from(width).saturating_sub(2);
    if padded > 16 {
        push_hex_wide(buf, v, padded);
        return;
    }
    let (body, digits) = hex::leading_digits(v, padded.max(1));
    // The closing quote goes after the last digit.
    let mut out = [b'"'; 20];
    if let Some((prefix, rest)) = out.split_first_chunk_mut::<3>()
        && let Some((b, _)) = rest.split_first_chunk_mut::<16>()
    {
        *prefix = *b"\"0x";
        *b = body;
    }
    if let Some(q) = out.get_mut(digits.saturating_add(3)) {
        *q = b'"';
    }
    let end = buf.len().saturating_add(digits).saturating_add(4);
    buf.extend_from_slice(&out);
    buf.truncate(end);
}

/// [`push_hex_quoted`] padded to more than sixteen digits (no format asks this): the zeros
/// past sixteen digits, then all sixteen.
#[cold]
fn push_hex_wide(buf: &mut Vec<u8>, v: u64, padded: u32) {
    buf.extend_from_slice(b"\"0x");
    buf.resize(
        buf.len().saturating_add(padded.saturating_sub(16) as usize),
        b'0',
    );
    buf.extend_from_slice(&hex::digits16(v));
    buf.push(b'"');
}

/// `v` in decimal, two digits at a time from a table (a division per pair), made in a
/// fixed array from its last digit and copied with one fixed-size copy cut back.
#[inline]
fn push_dec(buf: &mut Vec<u8>, v: u64) {
    // 1..=20 digits.
    let len = v.checked_ilog10().unwrap_or(0).saturating_add(1) as usize;
    let mut digits = [b'0'; 20];
    let mut at = len;
    let mut x = v;
    while x >= 100 {
        let pair = (x % 100) as usize;
        x /= 100;
        at = at.saturating_sub(2);
        if let (Some(d), Some(p)) = (digits.get_mut(at..at.saturating_add(2)), dec_pair(pair)) {
            d.copy_from_slice(p);
        }
    }
    // One or two digits left (`x` < 100), at the front.
    if x >= 10 {
        if let (Some(d), Some(p)) = (digits.get_mut(..2), dec_pair(x as usize)) {
            d.copy_from_slice(p);
        }
    } else if let Some(d) = digits.first_mut() {
        *d = b'0'.wrapping_add(x as u8);
    }
    let end = buf.len().saturating_add(len);
    buf.extend_from_slice(&digits);
    buf.truncate(end);
}

/// The two digits of `pair` (< 100).
#[inline(always)]
fn dec_pair(pair: usize) -> Option<&'static [u8]> {
    DEC_PAIRS.get(pair.saturating_mul(2)..pair.saturating_mul(2).saturating_add(2))
}

/// `"00" "01" … "99"`: the two digits of every number below 100.
const DEC_PAIRS: &[u8; 200] = b"\
0001020304050607080910111213141516171819\
2021222324252627282930313233343536373839\
4041424344454647484950515253545556575859\
6061626364656667686970717273747576777879\
8081828384858687888990919293949596979899";

fn push_int(buf: &mut Vec<u8>, v: i64) {
    if v < 0 {
        buf.push(b'-');
    }
    push_dec(buf, v.unsigned_abs());
}

/// Whether a byte of the eight in `x` is one JSON escapes (`"`, `\\` or a control
/// character).
#[inline(always)]
fn word_needs_escape(x: u64) -> bool {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    // Whether a byte of `x` is below `n` (for `n` ≤ 0x80): exact as a whole (a byte
    // can be marked wrongly only above a byte that is below `n`).
    let below = |x: u64, n: u64| x.wrapping_sub(ONES.wrapping_mul(n)) & !x & HIGH != 0;
    below(x, 0x20)
        || below(x ^ ONES.wrapping_mul(u64::from(b'"')), 1)
        || below(x ^ ONES.wrapping_mul(u64::from(b'\\')), 1)
}

/// A JSON string literal.
#[inline]
fn push_str(buf: &mut Vec<u8>, s: &str) {
    buf.reserve(s.len().saturating_add(2));
    buf.push(b'"');
    push_str_body(buf, s);
    buf.push(b'"');
}

/// The inside of a JSON string literal: `"`, `\` and control characters escaped.
///
/// Checked eight bytes at a time, the last eight overlapping the others when the length is
/// not a multiple of eight (shorter strings as one word of their first and last four bytes,
/// or of their up to three bytes padded). A clean string of up to 16 bytes (a register
/// name, an access kind) is copied as two overlapping fixed-size pieces, its first and last
/// bytes (the second copy rewrites the overlap with the same bytes), not by a call.
#[inline]
fn push_str_body(buf: &mut Vec<u8>, s: &str) {
    let b = s.as_bytes();
    let end = buf.len().saturating_add(b.len());
    let clean = if let Some(last) = b.last_chunk::<8>() {
        let (words, _) = b.as_chunks::<8>();
        let clean = !words
            .iter()
            .chain([last])
            .any(|w| word_needs_escape(u64::from_le_bytes(*w)));
        if clean {
            match b.first_chunk::<8>() {
                Some(first) if b.len() <= 16 => {
                    buf.extend_from_slice(first);
                    buf.truncate(end.saturating_sub(8));
                    buf.extend_from_slice(last);
                }
                _ => buf.extend_from_slice(b),
            }
        }
        clean
    } else if let (Some(first), Some(last)) = (b.first_chunk::<4>(), b.last_chunk::<4>()) {
        let word =
            u64::from(u32::from_le_bytes(*first)) | u64::from(u32::from_le_bytes(*last)) << 32;
        let clean = !word_needs_escape(word);
        if clean {
            buf.extend_from_slice(first);
            buf.truncate(end.saturating_sub(4));
            buf.extend_from_slice(last);
        }
        clean
    } else {
        // Up to three bytes: the first, middle and last (some the same byte) cover them.
        let (Some(&a), Some(&m), Some(&z)) = (b.first(), b.get(b.len() / 2), b.last()) else {
            return;
        };
        let clean = !word_needs_escape(u64::from_le_bytes([a, m, z, b'a', b'a', b'a', b'a', b'a']));
        if clean {
            buf.extend_from_slice(&[a, m, z]);
            buf.truncate(end);
        }
        clean
    };
    if clean {
        return;
    }
    for &c in b {
        match c {
            b'"' => buf.extend_from_slice(b"\\\""),
            b'\\' => buf.extend_from_slice(b"\\\\"),
            b'\n' => buf.extend_from_slice(b"\\n"),
            b'\r' => buf.extend_from_slice(b"\\r"),
            b'\t' => buf.extend_from_slice(b"\\t"),
            0..0x20 => {
                buf.extend_from_slice(b"\\u00");
                buf.extend_from_slice(&hex::pair(c));
            }
            _ => buf.push(c),
        }
    }
}

#[cfg(test)]
#[allow(
    clippy::unwrap_used,
    clippy::indexing_slicing,
    clippy::arithmetic_side_effects
)]
mod tests {
    use super::*;
    use trace_model::schema::Type;

    #[test]
    fn numbers_and_strings() {
        let mut b = Vec::new();
        push_hex_quoted(&mut b, 0, 0);
        push_hex_quoted(&mut b, 0x7ff6_a1b2, 0);
        push_hex_quoted(&mut b, u64::MAX, 0);
        push_hex_quoted(&mut b, 0x7c08, 10);
        push_dec(&mut b, 0);
        b.push(b' ');
        push_dec(&mut b, u64::MAX);
        b.push(b' ');
        push_int(&mut b, i64::MIN);
        push_str(&mut b, "a\"\\\u{1}é");
        assert_eq!(
            String::from_utf8(b).unwrap(),
            format!(
                "\"0x0\"\"0x7ff6a1b2\"\"0xffffffffffffffff\"\"0x00007c08\"0 {} {}\"a\\\"\\\\\\u0001é\"",
                u64::MAX,
                i64::MIN
            )
        );
        let s = serde_json::to_string("a\"\\\u{1}é\n\t").unwrap();
        let mut b = Vec::new();
        push_str(&mut b, "a\"\\\u{1}é\n\t");
        assert_eq!(String::from_utf8(b).unwrap(), s);
    }

    /// The number writers against the standard library's formatting at every digit-count
    /// boundary (each power of two and of ten, and their neighbours) and every width.
    #[test]
    fn numbers_at_every_length() {
        let mut values = vec![0u64, u64::MAX];
        for k in 0..64 {
            values.extend([1u64 << k, (1u64 << k) - 1, (1u64 << k) + 1]);
        }
        for k in 0..20 {
            let p = 10u64.pow(k);
            values.extend([p, p - 1, p + 1]);
        }
        for v in values {
            let mut b = Vec::new();
            push_dec(&mut b, v);
            assert_eq!(b, v.to_string().into_bytes());
            for width in 0..24u8 {
                let mut b = Vec::new();
                push_hex_quoted(&mut b, v, width);
                let want = if width > 0 {
                    format!("\"{v:#0w$x}\"", w = usize::from(width))
                } else {
                    format!("\"{v:#x}\"")
                };
                assert_eq!(String::from_utf8(b).unwrap(), want);
            }
        }
        let bytes: Vec<u8> = (0..=255).collect();
        let mut b = Vec::new();
        hex::push_bytes(&mut b, &bytes);
        let want: String = bytes.iter().map(|x| format!("{x:02x}")).collect();
        assert_eq!(String::from_utf8(b).unwrap(), want);
    }

    /// A JSON string literal a character at a time: `\n`, `\r`, `\t` and `\uXXXX` for the
    /// other control characters (where serde_json writes `\b` and `\f`).
    fn naive_literal(t: &str) -> String {
        let mut out = String::from("\"");
        for c in t.chars() {
            match c {
                '"' => out.push_str("\\\""),
                '\\' => out.push_str("\\\\"),
                '\n' => out.push_str("\\n"),
                '\r' => out.push_str("\\r"),
                '\t' => out.push_str("\\t"),
                c if u32::from(c) < 0x20 => out.push_str(&format!("\\u{:04x}", u32::from(c))),
                c => out.push(c),
            }
        }
        out.push('"');
        out
    }

    /// String literals of every length up to 40 bytes, with each escaped character at each
    /// position (the short strings' fast paths copy overlapping pieces), against a
    /// character-at-a-time writer.
    #[test]
    fn strings_of_every_length() {
        for len in 0..40 {
            let plain: String = "abcdefghij".chars().cycle().take(len).collect();
            let mut cases = vec![plain.clone()];
            for at in 0..len {
                for c in ['"', '\\', '\n', '\u{c}', '\u{1}', '\u{1f}', 'é'] {
                    let mut t: Vec<char> = plain.chars().collect();
                    t[at] = c;
                    cases.push(t.into_iter().collect());
                }
            }
            for t in cases {
                let mut b = b"[".to_vec();
                push_str(&mut b, &t);
                assert_eq!(
                    String::from_utf8(b).unwrap(),
                    format!("[{}", naive_literal(&t)),
                    "{t:?}"
                );
            }
        }
    }

    /// The number and string writers against the standard library's formatting and a
    /// byte-by-byte escape check, on random values.
    #[test]
    fn writers_match_the_reference() {
        fn prop(v: u64, width: u8, bytes: Vec<u8>, text: String) -> bool {
            let mut b = Vec::new();
            push_dec(&mut b, v);
            let dec = b == v.to_string().into_bytes();
            let mut b = Vec::new();
            let width = width % 24;
            push_hex_quoted(&mut b, v, width);
            let want = if width > 0 {
                format!("\"{v:#0w$x}\"", w = usize::from(width))
            } else {
                format!("\"{v:#x}\"")
            };
            let hex = b == want.into_bytes();
            let mut b = Vec::new();
            hex::push_bytes(&mut b, &bytes);
            let hex_bytes = b
                == bytes
                    .iter()
                    .map(|x| format!("{x:02x}"))
                    .collect::<String>()
                    .into_bytes();
            let mut b = Vec::new();
            push_str(&mut b, &text);
            let lossy = String::from_utf8_lossy(&bytes);
            push_str(&mut b, &lossy);
            let string = String::from_utf8(b).unwrap()
                == format!("{}{}", naive_literal(&text), naive_literal(&lossy));
            dec && hex && hex_bytes && string
        }
        // 2,000 cases unless `QUICKCHECK_TESTS` asks for more.
        let tests = trace_core::rng::property_cases(2000);
        quickcheck::QuickCheck::new()
            .tests(tests)
            .quickcheck(prop as fn(u64, u8, Vec<u8>, String) -> bool);
        for s in [
            "",
            "rax",
            "rsp",
            "0123456\"",
            "01234567\u{1f}",
            "012345678\\",
            "0123456789abcde\n",
            "abcdefgh\\ijk",
            "é\u{7f}\u{80}",
        ] {
            let mut b = Vec::new();
            push_str(&mut b, s);
            assert_eq!(String::from_utf8(b).unwrap(), naive_literal(s), "{s:?}");
        }
    }

    /// A row of two fields the JSON shows differently: a child table shown as its values.
    struct Chunk;

    impl Row for Chunk {
        fn visit(&self, v: &mut dyn Visitor) {
            v.uint(7);
            v.begin_list();
            for (seq, edge) in [(0, 11), (1, 12)] {
                v.begin_row();
                v.uint(seq);
                v.uint(edge);
                v.end_row();
            }
            v.end_list();
        }
    }

    /// A row with two integer structs, handed over whole or value by value.
    struct Structs {
        whole: bool,
    }

    impl Row for Structs {
        fn visit(&self, v: &mut dyn Visitor) {
            v.uint(1);
            for values in [[2, 3], [4, 5]] {
                if self.whole {
                    v.row(&[Cell::UInts(&values)]);
                } else {
                    v.begin_row();
                    for x in values {
                        v.uint(x);
                    }
                    v.end_row();
                }
            }
            v.uint(6);
        }
    }

    /// `row` writes a shown struct as `begin_row`, `uint`… `end_row` would, and drops
    /// a skipped one.
    #[test]
    fn integer_rows_shown_and_skipped() {
        let pair = |a: &'static str, b: &'static str| {
            Arc::new(Schema::new(
                "pair",
                vec![Field::new(a, Type::UInt(64)), Field::hex(b, 64)],
            ))
        };
        let schema = Arc::new(Schema::new(
            "t",
            vec![
                Field::new("i", Type::UInt(64)).key(),
                Field::new("shown", Type::Struct(pair("a", "b"))),
                Field::new("hidden", Type::Struct(pair("c", "d"))).json(Json::Skip),
                Field::new("j", Type::UInt(64)),
            ],
        ));
        let lines = [false, true].map(|whole| line(&schema, &Structs { whole }));
        assert_eq!(
            lines[0],
            "{\"i\":1,\"shown\":{\"a\":2,\"b\":\"0x3\"},\"j\":6}\n"
        );
        assert_eq!(lines[1], lines[0]);
    }

    /// The JSON line of `row` (of table `schema`).
    fn line(schema: &Arc<Schema>, row: &dyn Row) -> String {
        let mut sink = JsonLines::new(Vec::new(), std::slice::from_ref(schema));
        sink.write(0, row).unwrap();
        sink.flush().unwrap();
        String::from_utf8(sink.into_inner()).unwrap()
    }

    /// A row with three tables of (name, value) pairs, handed over pair by pair or part by
    /// part.
    struct Pairs {
        whole: bool,
    }

    impl Row for Pairs {
        fn visit(&self, v: &mut dyn Visitor) {
            for _ in 0..3 {
                v.begin_list();
                for (name, value) in [("rax", 0x10), ("a\"b", 7), ("xmm0[0..8]", 0)] {
                    if self.whole {
                        v.row(&[Cell::Str(name), Cell::UInt(value)]);
                    } else {
                        v.begin_row();
                        v.str(name);
                        v.uint(value);
                        v.end_row();
                    }
                }
                v.end_list();
            }
        }
    }

    /// `row` of a name and a value writes what `begin_row`, `str`, `uint`, `end_row` write, in a table
    /// shown as an object, as an array of rows, or not at all.
    #[test]
    fn name_value_rows_as_parts() {
        let pair = Arc::new(Schema::new(
            "pair",
            vec![Field::new("name", Type::Name), Field::hex("value", 64)],
        ));
        let schema = Arc::new(Schema::new(
            "t",
            vec![
                Field::new("object", Type::Rows(Arc::clone(&pair))).json(Json::Object),
                Field::new("rows", Type::Rows(Arc::clone(&pair))),
                Field::new("hidden", Type::Rows(pair)).json(Json::Skip),
            ],
        ));
        let lines = [false, true].map(|whole| line(&schema, &Pairs { whole }));
        assert_eq!(
            lines[0],
            "{\"object\":{\"rax\":\"0x10\",\"a\\\"b\":\"0x7\",\"xmm0[0..8]\":\"0x0\"},\
             \"rows\":[{\"name\":\"rax\",\"value\":\"0x10\"},{\"name\":\"a\\\"b\",\"value\":\"0x7\"},\
             {\"name\":\"xmm0[0..8]\",\"value\":\"0x0\"}]}\n"
        );
        assert_eq!(lines[1], lines[0]);
    }

    #[test]
    fn values_and_table_labels() {
        let edges = Schema::new(
            "edges",
            vec![
                Field::new("seq", Type::UInt(64)).json(Json::Skip),
                Field::new("edge_id", Type::UInt(64)),
            ],
        );
        let chunks = Arc::new(Schema::new(
            "chunks",
            vec![
                Field::new("chunk", Type::UInt(64)).key(),
                Field::new("edges", Type::Rows(Arc::new(edges))).json(Json::Values),
            ],
        ));
        let other = Arc::new(Schema::new("other", chunks.fields.clone()));
        let mut sink = JsonLines::new(Vec::new(), &[chunks, other]);
        sink.write(0, &Chunk).unwrap();
        sink.write(1, &Chunk).unwrap();
        sink.flush().unwrap();
        assert_eq!(
            String::from_utf8(sink.into_inner()).unwrap(),
            "{\"chunk\":7,\"edges\":[11,12]}\n{\"table\":\"other\",\"chunk\":7,\"edges\":[11,12]}\n"
        );
    }
}
