//! Writing: [`Dcfg`] → JSON in Intel's layout and key order (described on
//! [`Dcfg::write_to`]).
//!
//! Absent optional sections are left out; a missing optional column is left out at the end
//! of its row (and written as `null` only if a later column of the same row has a value,
//! which the model allows but the specification's short-row rule does not).

use std::io::{self, Write};

use crate::model::{Dcfg, Image, Process, Routine};
use crate::raw;
use crate::read::Compression;

/// The most values (at any depth) a container may hold and still be written on one line.
const FLAT_MAX: usize = 23;

impl Dcfg {
    /// Writes the DCFG as plain JSON, in Intel's layout: rewriting a file Intel wrote gives
    /// back its bytes.
    ///
    /// Intel's writer lays out every array and object by one rule: a container holding at
    /// most 23 values at any depth (nested arrays, objects, numbers, strings and `null`s
    /// count; object keys do not) is written on one line, `[ 4, "0x3e8", 9, 2, 4, 1 ]`; a
    /// larger one keeps its first element on the line of its opening bracket, puts every
    /// further element on a line of its own indented two spaces per nesting level, and
    /// closes on a line of its own at its own level. Keys and table columns come in Intel's
    /// order, `LOAD_ADDR` and `ADDR_OFFSET` as `"0x…"` strings, other integers as numbers,
    /// `/` escaped as `\/`.
    ///
    /// # Errors
    ///
    /// Errors of `w`.
    pub fn write_to<W: Write>(&self, w: W) -> io::Result<()> {
        let mut w = io::BufWriter::with_capacity(64 * 1024, w);
        write_dcfg(&mut w, self)?;
        w.flush()
    }

    /// Writes the DCFG, compressed as asked (bzip2 like Intel's `.dcfg.json.bz2`, or gzip).
    ///
    /// # Errors
    ///
    /// Errors of `w`.
    pub fn write_compressed<W: Write>(&self, w: W, compression: Compression) -> io::Result<()> {
        match compression {
            Compression::None => self.write_to(w),
            Compression::Bzip2 => {
                let mut enc = bzip2::write::BzEncoder::new(w, bzip2::Compression::best());
                self.write_to(&mut enc)?;
                enc.finish().map(drop)
            }
            Compression::Gzip => {
                let mut enc = flate2::write::GzEncoder::new(w, flate2::Compression::default());
                self.write_to(&mut enc)?;
                enc.finish().map(drop)
            }
        }
    }

    /// The DCFG as plain JSON bytes.
    #[must_use]
    pub fn to_vec(&self) -> Vec<u8> {
        let mut out = Vec::new();
        // Writing to a Vec cannot fail.
        let _ = write_dcfg(&mut out, self);
        out
    }
}

/// A JSON emitter with Intel's layout.
///
/// Each container's content is emitted by a closure that runs twice: first *measuring*
/// (counting values, nothing written, stopping once the count exceeds [`FLAT_MAX`]), then
/// writing, on one line or not as the count decides. So the layout always agrees with what
/// is written.
struct Out<W> {
    w: W,
    /// `Some(n)` while measuring: the values counted so far.
    measuring: Option<usize>,
    /// For each open container, whether it is written on one line.
    open: Vec<bool>,
    /// Nothing written yet in the innermost open container.
    first: bool,
    /// A key was just written: its value follows without a separator.
    after_key: bool,
}

type Body<'b, W> = &'b dyn Fn(&mut Out<W>) -> io::Result<()>;

impl<W: Write> Out<W> {
    fn new(w: W) -> Self {
        Out {
            w,
            measuring: None,
            open: Vec::new(),
            first: true,
            after_key: false,
        }
    }

    /// Whether measuring has counted enough to know the container does not fit on a line.
    fn full(&self) -> bool {
        self.measuring.is_some_and(|n| n > FLAT_MAX)
    }

    /// Starts a value: counts it when measuring (`Ok(false)`: write nothing), else writes
    /// the separator before it (`Ok(true)`).
    fn value(&mut self) -> io::Result<bool> {
        if let Some(n) = &mut self.measuring {
            *n = n.saturating_add(1);
            return Ok(false);
        }
        if self.after_key {
            self.after_key = false;
        } else if self.first {
            self.first = false;
        } else if self.open.last() == Some(&false) {
            self.w.write_all(b",\n")?;
            self.indent(self.open.len())?;
        } else {
            self.w.write_all(b", ")?;
        }
        Ok(true)
    }

    fn indent(&mut self, level: usize) -> io::Result<()> {
        const SPACES: &[u8; 64] = &[b' '; 64];
        let mut n = level.saturating_mul(2);
        while n > 0 {
            let k = n.min(SPACES.len());
            self.w.write_all(SPACES.get(..k).unwrap_or_default())?;
            n = n.saturating_sub(k);
        }
        Ok(())
    }

    fn container(&mut self, brackets: [u8; 2], body: Body<'_, W>) -> io::Result<()> {
        if !self.value()? {
            return if self.full() { Ok(()) } else { body(self) };
        }
        self.measuring = Some(0);
        let measured = body(self);
        let flat = self.measuring.take().is_some_and(|n| n <= FLAT_MAX);
        measured?;
        let [open, close] = brackets;
        self.w.write_all(&[open, b' '])?;
        self.open.push(flat);
        self.first = true;
        body(self)?;
        self.open.pop();
        if self.first {
            self.first = false;
            self.w.write_all(&[close])
        } else if flat {
            self.w.write_all(&[b' ', close])
        } else {
            self.w.write_all(b"\n")?;
            self.indent(self.open.len())?;
            self.w.write_all(&[close])
        }
    }

    fn array(&mut self, body: Body<'_, W>) -> io::Result<()> {
        self.container([b'[', b']'], body)
    }

    fn object(&mut self, body: Body<'_, W>) -> io::Result<()> {
        self.container([b'{', b'}'], body)
    }

    /// An object key; the next value emitted is its value.
    fn key(&mut self, k: &str) -> io::Result<()> {
        if self.measuring.is_some() {
            return Ok(());
        }
        self.value()?;
        string(&mut self.w, k)?;
        self.w.write_all(b" : ")?;
        self.after_key = true;
        Ok(())
    }

    /// Emits `f` for each item, stopping early when measuring has seen enough.
    fn each<I: IntoIterator>(
        &mut self,
        items: I,
        f: impl Fn(&mut Self, I::Item) -> io::Result<()>,
    ) -> io::Result<()> {
        for it in items {
            if self.full() {
                break;
            }
            f(self, it)?;
        }
        Ok(())
    }

    fn int(&mut self, v: u64) -> io::Result<()> {
        if self.value()? {
            let mut buf = [0u8; 20];
            let mut i = buf.len();
            let mut v = v;
            loop {
                i = i.saturating_sub(1);
                if let Some(d) = buf.get_mut(i) {
                    // v % 10 < 10, so the cast cannot truncate.
                    *d = b'0'.saturating_add((v % 10) as u8);
                }
                v /= 10;
                if v == 0 {
                    break;
                }
            }
            self.w.write_all(buf.get(i..).unwrap_or_default())?;
        }
        Ok(())
    }

    fn hex(&mut self, v: u64) -> io::Result<()> {
        if self.value()? {
            write!(self.w, "\"{v:#x}\"")?;
        }
        Ok(())
    }

    fn str(&mut self, s: &str) -> io::Result<()> {
        if self.value()? {
            string(&mut self.w, s)?;
        }
        Ok(())
    }

    fn ints(&mut self, v: &[u64]) -> io::Result<()> {
        self.array(&|o| o.each(v, |o, &x| o.int(x)))
    }

    /// The trailing optional values of a row: each present value, `null` for a missing one
    /// followed by a present one, nothing after the last present one.
    fn trailing(&mut self, vals: &[Option<u64>]) -> io::Result<()> {
        let n = vals
            .iter()
            .rposition(Option::is_some)
            .map_or(0, |i| i.saturating_add(1));
        for v in vals.iter().take(n) {
            match *v {
                Some(x) => self.int(x)?,
                None => {
                    if self.value()? {
                        self.w.write_all(b"null")?;
                    }
                }
            }
        }
        Ok(())
    }

    /// A header-row table: the column names, then one array per row emitted by `row`.
    fn table<I: IntoIterator<Item: Copy> + Copy>(
        &mut self,
        cols: &[&str],
        rows: I,
        row: impl Fn(&mut Self, I::Item) -> io::Result<()>,
    ) -> io::Result<()> {
        self.array(&|o| {
            o.array(&|o| o.each(cols, |o, c| o.str(c)))?;
            o.each(rows, |o, r| o.array(&|o| row(o, r)))
        })
    }

    /// An object key with a table as its value.
    fn keyed_table<I: IntoIterator<Item: Copy> + Copy>(
        &mut self,
        key: &str,
        cols: &[&str],
        rows: I,
        row: impl Fn(&mut Self, I::Item) -> io::Result<()>,
    ) -> io::Result<()> {
        self.key(key)?;
        self.table(cols, rows, row)
    }
}

/// Writes a JSON string with Intel's escaping (`/` as `\/`).
fn string<W: Write>(w: &mut W, s: &str) -> io::Result<()> {
    w.write_all(b"\"")?;
    let bytes = s.as_bytes();
    let mut start = 0;
    for (i, &b) in bytes.iter().enumerate() {
        let esc: Option<&[u8]> = match b {
            b'"' => Some(b"\\\""),
            b'\\' => Some(b"\\\\"),
            b'/' => Some(b"\\/"),
            b'\n' => Some(b"\\n"),
            b'\r' => Some(b"\\r"),
            b'\t' => Some(b"\\t"),
            0x08 => Some(b"\\b"),
            0x0c => Some(b"\\f"),
            0..=0x1f => None,
            _ => continue,
        };
        w.write_all(bytes.get(start..i).unwrap_or_default())?;
        match esc {
            Some(e) => w.write_all(e)?,
            None => write!(w, "\\u{b:04x}")?,
        }
        start = i.saturating_add(1);
    }
    w.write_all(bytes.get(start..).unwrap_or_default())?;
    w.write_all(b"\"")
}

fn write_dcfg<W: Write>(w: &mut W, d: &Dcfg) -> io::Result<()> {
    let mut o = Out::new(&mut *w);
    o.object(&|o| {
        o.key(raw::MAJOR_VERSION)?;
        o.int(d.major_version)?;
        o.key(raw::MINOR_VERSION)?;
        o.int(d.minor_version)?;
        if let Some(f) = &d.file_names {
            o.keyed_table(raw::FILE_NAMES, &raw::FILE_NAME_COLUMNS, f, |o, f| {
                o.int(f.id)?;
                o.str(&f.name)
            })?;
        }
        if let Some(t) = &d.edge_types {
            o.keyed_table(raw::EDGE_TYPES, &raw::EDGE_TYPE_COLUMNS, t, |o, t| {
                o.int(t.id)?;
                o.str(&t.name)
            })?;
        }
        if let Some(s) = &d.special_nodes {
            o.keyed_table(raw::SPECIAL_NODES, &raw::SPECIAL_NODE_COLUMNS, s, |o, n| {
                o.int(n.id)?;
                o.str(&n.name)
            })?;
        }
        o.keyed_table(raw::PROCESSES, &raw::PROCESS_COLUMNS, &d.processes, process)
    })?;
    w.write_all(b"\n")
}

fn process<W: Write>(o: &mut Out<W>, p: &Process) -> io::Result<()> {
    o.int(p.id)?;
    if !p.has_data {
        return Ok(());
    }
    o.object(&|o| {
        if let Some(v) = &p.instr_count_per_thread {
            o.key(raw::INSTR_COUNT_PER_THREAD)?;
            o.ints(v)?;
        }
        if let Some(c) = p.instr_count {
            o.key(raw::INSTR_COUNT)?;
            o.int(c)?;
        }
        if let Some(images) = &p.images {
            o.keyed_table(raw::IMAGES, &raw::IMAGE_COLUMNS, images, image)?;
        }
        if let Some(edges) = &p.edges {
            o.keyed_table(raw::EDGES, &raw::EDGE_COLUMNS, edges.as_slice(), |o, e| {
                o.int(e.id)?;
                o.int(e.source)?;
                o.int(e.target)?;
                o.int(e.type_id)?;
                o.array(&|o| o.each(&e.counts, Out::int))
            })?;
        }
        Ok(())
    })
}

fn image<W: Write>(o: &mut Out<W>, i: &Image) -> io::Result<()> {
    o.int(i.id)?;
    o.hex(i.load_addr)?;
    o.int(i.size)?;
    if !i.has_data {
        return Ok(());
    }
    o.object(&|o| {
        if let Some(f) = i.file_name_id {
            o.key(raw::FILE_NAME_ID)?;
            o.int(f)?;
        }
        if let Some(s) = &i.symbols {
            o.keyed_table(raw::SYMBOLS, &raw::SYMBOL_COLUMNS, s, |o, s| {
                o.str(s.name)?;
                o.hex(s.addr_offset)?;
                o.trailing(&[s.size])
            })?;
        }
        if let Some(s) = &i.source_data {
            o.keyed_table(raw::SOURCE_DATA, &raw::SOURCE_COLUMNS, s, |o, s| {
                o.int(s.file_name_id)?;
                o.int(s.line.into())?;
                o.hex(s.addr_offset)?;
                o.trailing(&[s.size.map(u64::from), s.num_instrs.map(u64::from)])
            })?;
        }
        if let Some(b) = &i.basic_blocks {
            o.keyed_table(raw::BASIC_BLOCKS, &raw::BLOCK_COLUMNS, b, |o, b| {
                o.int(b.id)?;
                o.hex(b.addr_offset)?;
                o.int(b.size.into())?;
                o.int(b.num_instrs.into())?;
                o.trailing(&[b.last_instr_offset.map(u64::from), b.count])
            })?;
        }
        if let Some(r) = &i.routines {
            o.keyed_table(raw::ROUTINES, &raw::ROUTINE_COLUMNS, r, routine)?;
        }
        Ok(())
    })
}

/// A routine row: its NODES and LOOPS tables are values of the row, without keys.
fn routine<W: Write>(o: &mut Out<W>, r: &Routine) -> io::Result<()> {
    o.int(r.entry)?;
    o.ints(&r.exits)?;
    o.table(&raw::ROUTINE_NODE_COLUMNS, &r.nodes, |o, n| {
        o.int(n.id)?;
        o.int(n.idom)
    })?;
    if let Some(loops) = &r.loops {
        o.table(&raw::LOOP_COLUMNS, loops, |o, l| {
            o.int(l.head)?;
            o.ints(&l.back_edge_sources)?;
            o.ints(&l.nodes)?;
            o.trailing(&[l.parent])
        })?;
    }
    Ok(())
}
