//! Writing: [`Dcfg`] → JSON in Intel's layout and key order.
//!
//! The layout follows the files Intel's `dcfg-driver` writes: the header row of each table on
//! the line of its key, one data row per line, `LOAD_ADDR` and `ADDR_OFFSET` as `"0x…"`
//! strings, every other integer as a number, `/` escaped as `\/`. Absent optional sections
//! are left out; a short optional column is left out at the end of its row (and written as
//! `null` only if a later column of the same row has a value, which the model allows but the
//! specification's short-row rule does not).

use std::io::{self, Write};

use crate::model::{Dcfg, Image, Process, Routine};
use crate::raw;
use crate::read::Compression;

impl Dcfg {
    /// Writes the DCFG as plain JSON.
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

fn hex<W: Write>(w: &mut W, v: u64) -> io::Result<()> {
    write!(w, "\"{v:#x}\"")
}

fn header<W: Write>(w: &mut W, cols: &[&str]) -> io::Result<()> {
    w.write_all(b"[ ")?;
    for (i, c) in cols.iter().enumerate() {
        if i > 0 {
            w.write_all(b", ")?;
        }
        string(w, c)?;
    }
    w.write_all(b" ]")
}

fn ints<W: Write>(w: &mut W, v: &[u64]) -> io::Result<()> {
    if v.is_empty() {
        return w.write_all(b"[ ]");
    }
    w.write_all(b"[ ")?;
    for (i, x) in v.iter().enumerate() {
        if i > 0 {
            w.write_all(b", ")?;
        }
        write!(w, "{x}")?;
    }
    w.write_all(b" ]")
}

/// Writes the trailing optional values of a row: each present value, `null` for a missing
/// one followed by a present one, nothing after the last present one.
fn trailing<W: Write>(w: &mut W, vals: &[Option<u64>]) -> io::Result<()> {
    let last = vals.iter().rposition(Option::is_some);
    let Some(last) = last else { return Ok(()) };
    for v in vals.iter().take(last.saturating_add(1)) {
        match v {
            Some(x) => write!(w, ", {x}")?,
            None => w.write_all(b", null")?,
        }
    }
    Ok(())
}

/// A table whose rows are written one per line by `row`.
fn table<W: Write, T>(
    w: &mut W,
    key: &str,
    cols: &[&str],
    rows: &[T],
    indent: &str,
    mut row: impl FnMut(&mut W, &T) -> io::Result<()>,
) -> io::Result<()> {
    string(w, key)?;
    w.write_all(b" : [ ")?;
    header(w, cols)?;
    for r in rows {
        write!(w, ",\n{indent}  ")?;
        row(w, r)?;
    }
    if rows.is_empty() {
        w.write_all(b" ]")
    } else {
        write!(w, "\n{indent}]")
    }
}

fn write_dcfg<W: Write>(w: &mut W, d: &Dcfg) -> io::Result<()> {
    writeln!(w, "{{ \"{}\" : {},", raw::MAJOR_VERSION, d.major_version)?;
    write!(w, "  \"{}\" : {}", raw::MINOR_VERSION, d.minor_version)?;
    if let Some(f) = &d.file_names {
        w.write_all(b",\n  ")?;
        table(
            w,
            raw::FILE_NAMES,
            &raw::FILE_NAME_COLUMNS,
            f,
            "  ",
            |w, f| {
                write!(w, "[ {}, ", f.id)?;
                string(w, &f.name)?;
                w.write_all(b" ]")
            },
        )?;
    }
    if let Some(t) = &d.edge_types {
        w.write_all(b",\n  ")?;
        table(
            w,
            raw::EDGE_TYPES,
            &raw::EDGE_TYPE_COLUMNS,
            t,
            "  ",
            |w, t| {
                write!(w, "[ {}, ", t.id)?;
                string(w, &t.name)?;
                w.write_all(b" ]")
            },
        )?;
    }
    if let Some(s) = &d.special_nodes {
        // One line, as Intel writes it.
        write!(w, ",\n  \"{}\" : [ ", raw::SPECIAL_NODES)?;
        header(w, &raw::SPECIAL_NODE_COLUMNS)?;
        for n in s {
            write!(w, ", [ {}, ", n.id)?;
            string(w, &n.name)?;
            w.write_all(b" ]")?;
        }
        w.write_all(b" ]")?;
    }
    w.write_all(b",\n  ")?;
    table(
        w,
        raw::PROCESSES,
        &raw::PROCESS_COLUMNS,
        &d.processes,
        "  ",
        process,
    )?;
    w.write_all(b"\n}\n")
}

fn process<W: Write>(w: &mut W, p: &Process) -> io::Result<()> {
    write!(w, "[ {}", p.id)?;
    if !p.has_data {
        return w.write_all(b" ]");
    }
    w.write_all(b",\n      {")?;
    let mut sep = " ";
    if let Some(v) = &p.instr_count_per_thread {
        write!(w, "{sep}\"{}\" : ", raw::INSTR_COUNT_PER_THREAD)?;
        ints(w, v)?;
        sep = ",\n        ";
    }
    if let Some(c) = p.instr_count {
        write!(w, "{sep}\"{}\" : {c}", raw::INSTR_COUNT)?;
        sep = ",\n        ";
    }
    if let Some(images) = &p.images {
        w.write_all(sep.as_bytes())?;
        table(
            w,
            raw::IMAGES,
            &raw::IMAGE_COLUMNS,
            images,
            "        ",
            image,
        )?;
        sep = ",\n        ";
    }
    if let Some(edges) = &p.edges {
        w.write_all(sep.as_bytes())?;
        table(
            w,
            raw::EDGES,
            &raw::EDGE_COLUMNS,
            edges.as_slice(),
            "        ",
            |w, e| {
                write!(w, "[ {}, {}, {}, {}, ", e.id, e.source, e.target, e.type_id)?;
                ints(w, &e.counts)?;
                w.write_all(b" ]")
            },
        )?;
        sep = ",\n        ";
    }
    if sep == " " {
        w.write_all(b" }\n    ]")
    } else {
        w.write_all(b"\n      }\n    ]")
    }
}

fn image<W: Write>(w: &mut W, i: &Image) -> io::Result<()> {
    write!(w, "[ {},\n            ", i.id)?;
    hex(w, i.load_addr)?;
    write!(w, ",\n            {}", i.size)?;
    if !i.has_data {
        return w.write_all(b"\n          ]");
    }
    w.write_all(b",\n            {")?;
    let ind = "              ";
    let mut sep = " ".to_owned();
    let next = format!(",\n{ind}");
    if let Some(f) = i.file_name_id {
        write!(w, "{sep}\"{}\" : {f}", raw::FILE_NAME_ID)?;
        sep.clone_from(&next);
    }
    if let Some(s) = &i.symbols {
        w.write_all(sep.as_bytes())?;
        table(w, raw::SYMBOLS, &raw::SYMBOL_COLUMNS, s, ind, |w, s| {
            w.write_all(b"[ ")?;
            string(w, &s.name)?;
            w.write_all(b", ")?;
            hex(w, s.addr_offset)?;
            trailing(w, &[s.size])?;
            w.write_all(b" ]")
        })?;
        sep.clone_from(&next);
    }
    if let Some(s) = &i.source_data {
        w.write_all(sep.as_bytes())?;
        table(w, raw::SOURCE_DATA, &raw::SOURCE_COLUMNS, s, ind, |w, s| {
            write!(w, "[ {}, {}, ", s.file_name_id, s.line)?;
            hex(w, s.addr_offset)?;
            trailing(w, &[s.size, s.num_instrs])?;
            w.write_all(b" ]")
        })?;
        sep.clone_from(&next);
    }
    if let Some(b) = &i.basic_blocks {
        w.write_all(sep.as_bytes())?;
        table(w, raw::BASIC_BLOCKS, &raw::BLOCK_COLUMNS, b, ind, |w, b| {
            write!(w, "[ {}, ", b.id)?;
            hex(w, b.addr_offset)?;
            write!(w, ", {}, {}", b.size, b.num_instrs)?;
            trailing(w, &[b.last_instr_offset, b.count])?;
            w.write_all(b" ]")
        })?;
        sep.clone_from(&next);
    }
    if let Some(r) = &i.routines {
        w.write_all(sep.as_bytes())?;
        table(w, raw::ROUTINES, &raw::ROUTINE_COLUMNS, r, ind, routine)?;
        sep.clone_from(&next);
    }
    if sep == " " {
        w.write_all(b" }\n          ]")
    } else {
        write!(w, "\n            }}\n          ]")
    }
}

fn routine<W: Write>(w: &mut W, r: &Routine) -> io::Result<()> {
    let short = r.loops.is_none() && r.nodes.len() <= 8 && r.exits.len() <= 8;
    if short {
        write!(w, "[ {}, ", r.entry)?;
        ints(w, &r.exits)?;
        w.write_all(b", [ ")?;
        header(w, &raw::ROUTINE_NODE_COLUMNS)?;
        for n in &r.nodes {
            write!(w, ", [ {}, {} ]", n.id, n.idom)?;
        }
        return w.write_all(b" ] ]");
    }
    let ind = "                  ";
    write!(w, "[ {},\n{ind}", r.entry)?;
    ints(w, &r.exits)?;
    write!(w, ",\n{ind}[ ")?;
    header(w, &raw::ROUTINE_NODE_COLUMNS)?;
    for n in &r.nodes {
        write!(w, ",\n{ind}  [ {}, {} ]", n.id, n.idom)?;
    }
    write!(w, "\n{ind}]")?;
    if let Some(loops) = &r.loops {
        write!(w, ",\n{ind}[ ")?;
        header(w, &raw::LOOP_COLUMNS)?;
        for l in loops {
            write!(w, ",\n{ind}  [ {}, ", l.head)?;
            ints(w, &l.back_edge_sources)?;
            w.write_all(b", ")?;
            ints(w, &l.nodes)?;
            trailing(w, &[l.parent])?;
            w.write_all(b" ]")?;
        }
        if loops.is_empty() {
            w.write_all(b" ]")?;
        } else {
            write!(w, "\n{ind}]")?;
        }
    }
    w.write_all(b"\n                ]")
}
