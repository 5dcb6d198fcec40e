//! The writer: an owned model of a DCFG-Trace file and its serialisation, in the order the
//! specification prescribes (top-level keys `MAJOR_VERSION`, `MINOR_VERSION`, `PROCESSES`;
//! fixed column order; header rows), one table row per line. It mirrors [`crate::read`]:
//! [`TraceFile::from_trace`] turns a parsed file back into the model, and writing it gives
//! the same bytes for files this writer made (the canonical form).

use std::io::{self, Write};

use crate::raw;
use crate::read::Trace;
use crate::table::{Code, TransitionRow};

/// A whole DCFG-Trace file.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TraceFile {
    /// `MAJOR_VERSION`.
    pub major: u64,
    /// `MINOR_VERSION`.
    pub minor: u64,
    /// The process rows.
    pub processes: Vec<ProcessData>,
}

/// One process row.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ProcessData {
    /// `PROCESS_ID`.
    pub pid: u64,
    /// `STRING_DICTIONARY` entries (key, value), in the order written.
    pub dictionary: Vec<(String, String)>,
    /// `TRANSITION_TABLE` rows.
    pub transitions: Vec<TransitionRow>,
    /// `THREAD_DATA` rows.
    pub threads: Vec<ThreadData>,
}

/// One thread row.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ThreadData {
    /// `THREAD_ID`.
    pub thread: u64,
    /// `TRACE_DATA` rows.
    pub chunks: Vec<ChunkData>,
}

/// One chunk row.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ChunkData {
    /// `PRECEDING_INSTR_COUNT`.
    pub preceding_instr_count: u64,
    /// `INSTR_COUNT`.
    pub instr_count: u64,
    /// `EDGE_COUNT`.
    pub edge_count: u64,
    /// `FIRST_EDGE_ID` (`null` when `None`).
    pub first_edge_id: Option<u64>,
    /// `EDGE_ID_SEQUENCE`.
    pub sequence: String,
}

fn string(w: &mut impl Write, s: &str) -> io::Result<()> {
    w.write_all(b"\"")?;
    let mut start = 0;
    for (i, b) in s.bytes().enumerate() {
        let esc: Option<&[u8]> = match b {
            b'"' => Some(b"\\\""),
            b'\\' => Some(b"\\\\"),
            b'\n' => Some(b"\\n"),
            b'\r' => Some(b"\\r"),
            b'\t' => Some(b"\\t"),
            0..=0x1f => None,
            _ => continue,
        };
        w.write_all(s.as_bytes().get(start..i).unwrap_or_default())?;
        match esc {
            Some(e) => w.write_all(e)?,
            None => write!(w, "\\u{b:04x}")?,
        }
        start = i.saturating_add(1);
    }
    w.write_all(s.as_bytes().get(start..).unwrap_or_default())?;
    w.write_all(b"\"")
}

fn header(w: &mut impl Write, names: &[&str]) -> io::Result<()> {
    w.write_all(b"[")?;
    for (i, n) in names.iter().enumerate() {
        if i > 0 {
            w.write_all(b",")?;
        }
        string(w, n)?;
    }
    w.write_all(b"]")
}

impl TraceFile {
    /// Writes the file.
    ///
    /// # Errors
    ///
    /// The writer's I/O errors.
    pub fn write_to(&self, w: impl Write) -> io::Result<()> {
        let mut w = io::BufWriter::new(w);
        write!(
            w,
            "{{\"{}\":{},\"{}\":{},\"{}\":[",
            raw::MAJOR_VERSION,
            self.major,
            raw::MINOR_VERSION,
            self.minor,
            raw::PROCESSES
        )?;
        header(&mut w, &raw::PROCESS_HEADER)?;
        for p in &self.processes {
            write!(w, ",\n[{},{{", p.pid)?;
            for (i, (k, v)) in p.dictionary.iter().enumerate() {
                w.write_all(if i > 0 { b",\n" } else { b"\n" })?;
                string(&mut w, k)?;
                w.write_all(b":")?;
                string(&mut w, v)?;
            }
            w.write_all(b"},\n[")?;
            header(&mut w, &raw::TRANSITION_HEADER)?;
            for r in &p.transitions {
                write!(w, ",\n[{},\"{}\",[", r.current, r.code)?;
                for (i, n) in r.next.iter().enumerate() {
                    if i > 0 {
                        w.write_all(b",")?;
                    }
                    write!(w, "{n}")?;
                }
                w.write_all(b"]]")?;
            }
            w.write_all(b"],\n[")?;
            header(&mut w, &raw::THREAD_HEADER)?;
            for t in &p.threads {
                write!(w, ",\n[{},[", t.thread)?;
                header(&mut w, &raw::CHUNK_HEADER)?;
                for c in &t.chunks {
                    write!(
                        w,
                        ",\n[{},{},{},",
                        c.preceding_instr_count, c.instr_count, c.edge_count
                    )?;
                    match c.first_edge_id {
                        Some(f) => write!(w, "{f},")?,
                        None => w.write_all(b"null,")?,
                    }
                    string(&mut w, &c.sequence)?;
                    w.write_all(b"]")?;
                }
                w.write_all(b"]]")?;
            }
            w.write_all(b"]]")?;
        }
        w.write_all(b"]}\n")?;
        w.flush()
    }

    /// The file as bytes.
    #[must_use]
    pub fn to_vec(&self) -> Vec<u8> {
        let mut v = Vec::new();
        // Writing to a Vec cannot fail.
        let _ = self.write_to(&mut v);
        v
    }

    /// The model of a parsed file (sequences as written, not decoded).
    #[must_use]
    pub fn from_trace(t: &Trace<'_>) -> TraceFile {
        TraceFile {
            major: t.major.unwrap_or(1),
            minor: t.minor.unwrap_or(0),
            processes: t
                .processes
                .iter()
                .map(|p| ProcessData {
                    pid: p.process.pid,
                    dictionary: p
                        .process
                        .dictionary
                        .entries()
                        .map(|(k, v)| (k.to_owned(), String::from_utf8_lossy(v).into_owned()))
                        .collect(),
                    transitions: p.process.table.rows().to_vec(),
                    threads: p
                        .threads
                        .iter()
                        .map(|t| ThreadData {
                            thread: t.thread,
                            chunks: t
                                .chunks
                                .iter()
                                .map(|c| ChunkData {
                                    preceding_instr_count: c.preceding_instr_count,
                                    instr_count: c.instr_count,
                                    edge_count: c.edge_count,
                                    first_edge_id: c.first_edge_id,
                                    sequence: String::from_utf8_lossy(&c.sequence).into_owned(),
                                })
                                .collect(),
                        })
                        .collect(),
                })
                .collect(),
        }
    }
}

/// A transition row, for building tables by hand.
#[must_use]
pub fn row(current: u64, code: &str, next: &[u64]) -> Option<TransitionRow> {
    Some(TransitionRow {
        current,
        code: Code::parse(code.as_bytes())?,
        next: next.to_vec(),
    })
}
