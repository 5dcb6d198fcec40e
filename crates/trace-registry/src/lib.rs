//! One registry of trace formats: open any trace, tell its format, summarise it, check it,
//! and walk its records as typed rows, the same way for every format.
//!
//! The format crates (`trac-x64dbg`, `gdb-tfile`, `dcfg`, `dcfg-trace`, `amber-tt6`) each
//! read one format. This crate puts one [`Handler`] per format in one table ([`HANDLERS`]),
//! in the manner of `object::File::parse` or pcap-parser's `create_reader`:
//!
//! - **detection** from the first bytes (each crate's own magic constants) and the file
//!   name ([`detect`]);
//! - **info**: a summary as one [`Info`] value, shown as text or JSON from the same tree;
//! - **validate**: the whole file checked, with diagnostics;
//! - **records**: the records as typed rows ([`Row`]) described by a [`Schema`] per record
//!   kind, handed to any sink (`trace-sinks`: JSON Lines is `tracekit dump`, Parquet is
//!   `tracekit export`);
//! - **steps** and **blocks**: the instruction stream and the basic-block executions of
//!   the formats that have them, what the analyses (`trace-analyses`) read.
//!
//! The model these are written in (the [`Handler`] trait, [`Input`], [`Schema`],
//! [`steps::Steps`], …) is `trace-model`'s, re-exported here: a program that reads traces
//! needs this crate only. An output or an analysis written once over the model works for
//! every format; a format added as one handler module and one line in [`HANDLERS`] gets
//! every output.
//!
//! # Example
//!
//! ```
//! use trace_registry::{Ctx, Input, Options};
//!
//! let mut input = Input::open("../../testdata/x64dbg/basic.trace64".as_ref())?;
//! let handler = trace_registry::detect(&input).expect("an x64dbg trace");
//! assert_eq!(handler.name(), "x64dbg");
//! let options = Options::default();
//! let mut ctx = Ctx::new(&options);
//! let info = handler.info(&mut input, &mut ctx)?;
//! println!("{}", info.to_text());
//!
//! let mut input = Input::open("../../testdata/x64dbg/basic.trace64".as_ref())?;
//! let mut records = handler.records(&mut input, &mut ctx)?;
//! assert_eq!(records.tables()[0].name, "instructions");
//! let mut per_table = vec![0; records.tables().len()];
//! while let Some(record) = records.next_record() {
//!     per_table[record?.table] += 1;
//! }
//! assert_eq!(per_table[0], 1100);
//! # Ok::<(), trace_registry::Error>(())
//! ```

pub mod disasm;
pub mod formats;

pub use trace_model::*;

/// The handlers whose [`Handler::offers`] has `wanted`, in [`HANDLERS`] order (for the
/// messages that say which formats a command takes).
pub fn offering(wanted: fn(Offers) -> bool) -> impl Iterator<Item = &'static dyn Handler> {
    HANDLERS.iter().copied().filter(move |h| wanted(h.offers()))
}

/// Every format, in the order they are listed to users and tried by detection.
pub static HANDLERS: &[&dyn Handler] = &[
    &formats::x64dbg::X64dbg,
    &formats::gdb_tfile::GdbTfile,
    &formats::dcfg::Dcfg,
    &formats::dcfg_trace::DcfgTrace,
    &formats::amber::TT6,
    &formats::amber::TT6E,
    &formats::amber::FULL,
    &formats::tenet::Tenet,
];

/// The handler named `name` (or one of its aliases).
#[must_use]
pub fn by_name(name: &str) -> Option<&'static dyn Handler> {
    HANDLERS
        .iter()
        .copied()
        .find(|h| h.name() == name || h.aliases().contains(&name))
}

/// The format of an input from its first bytes and file name: the handler most sure of it
/// (the first listed among equals), or `None`.
#[must_use]
pub fn detect(input: &Input) -> Option<&'static dyn Handler> {
    if let Some(names) = input.part_names() {
        let mut best: Option<(Confidence, &'static dyn Handler)> = None;
        for h in HANDLERS.iter().copied() {
            if let Some(c) = h.detect_dir(&names)
                && best.is_none_or(|(b, _)| c > b)
            {
                best = Some((c, h));
            }
        }
        return best.map(|(_, h)| h);
    }
    detect_bytes(input.head(), &input.logical_name())
}

/// [`detect`] over the first bytes and file name directly.
#[must_use]
pub fn detect_bytes(head: &[u8], file_name: &str) -> Option<&'static dyn Handler> {
    let mut best: Option<(Confidence, &'static dyn Handler)> = None;
    for h in HANDLERS.iter().copied() {
        if let Some(c) = h.detect(head, file_name)
            && best.is_none_or(|(b, _)| c > b)
        {
            best = Some((c, h));
        }
    }
    best.map(|(_, h)| h)
}

/// The message for an input of no known format: every format and how it is recognised.
#[must_use]
pub fn detection_error(name: &str) -> Error {
    let mut msg = format!("cannot tell the format of {name}; known formats (use --format NAME):");
    for h in HANDLERS {
        msg.push_str(&format!("\n  {:<11} {}", h.name(), h.recognised_by()));
    }
    Error::Detect(msg)
}

/// Opens a path (or `-` for stdin) and finds its format: `forced` by name, or detected.
///
/// # Errors
///
/// The input cannot be read, the forced name is unknown, or no format matches.
pub fn open(
    path: &std::ffi::OsStr,
    forced: Option<&str>,
) -> Result<(Input, &'static dyn Handler), Error> {
    let input = Input::open(path)?;
    let handler = match forced {
        Some(name) => {
            by_name(name).ok_or_else(|| Error::Unsupported(format!("unknown format {name:?}")))?
        }
        None => detect(&input).ok_or_else(|| detection_error(input.name()))?,
    };
    Ok((input, handler))
}

/// Whether `needle` occurs in `haystack`.
pub(crate) fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    !needle.is_empty() && haystack.windows(needle.len()).any(|w| w == needle)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn detected(head: &[u8], name: &str) -> Option<&'static str> {
        detect_bytes(head, name).map(|h| h.name())
    }

    /// Detection uses each crate's own magic constants, and magic beats a file name.
    #[test]
    fn detects_by_each_crates_magic() {
        let mut x64 = trac_x64dbg::raw::MAGIC.to_vec();
        x64.extend_from_slice(b"\x10\0\0\0{}");
        assert_eq!(detected(&x64, "x.bin"), Some("x64dbg"));
        assert_eq!(detected(&x64, "thread_001.tt6"), Some("x64dbg"));
        let mut tf = gdb_tfile::raw::MAGIC.to_vec();
        tf.extend_from_slice(b"R 2a0\n");
        assert_eq!(detected(&tf, "x"), Some("gdb-tfile"));
        let full = amber_tt6::raw::FULL_MAGIC.to_be_bytes();
        assert_eq!(detected(&full, "x.tt6"), Some("amber-full"));
        assert_eq!(detected(b"\0\0\0\x10", "thread_001.tt6"), Some("tt6"));
        assert_eq!(detected(b"\0\0\0\x10", "THREAD_001.TT6E"), Some("tt6e"));
        assert_eq!(
            detected(
                b" {\"MAJOR_VERSION\" : 1, \"PROCESSES\" : [[\"PROCESS_ID\"]]}",
                "a"
            ),
            Some("dcfg")
        );
        let trace = b"{\n\"MAJOR_VERSION\" : 1,\n\"PROCESSES\" : [ [\"PROCESS_ID\", \"STRING_DICTIONARY\", \"TRANSITION_TABLE\", \"THREAD_DATA\"]";
        assert_eq!(detected(trace, "a.json"), Some("dcfg-trace"));
        assert_eq!(
            detected(b"{\"PROCESSES\" : [[\"PROCESS_ID\"", "run.trace.json"),
            Some("dcfg-trace")
        );
        assert_eq!(
            detected(b"{\"EDGE_TYPES\" : [", "x.dcfg.json"),
            Some("dcfg")
        );
        assert_eq!(detected(b"hello", "x.txt"), None);
        assert_eq!(detected(b"{\"a\":1}", "x.json"), None);
        assert_eq!(detected(b"", ""), None);
    }

    #[test]
    fn names_and_aliases_find_their_handler() {
        for h in HANDLERS {
            assert_eq!(by_name(h.name()).unwrap().name(), h.name());
            for a in h.aliases() {
                assert_eq!(by_name(a).unwrap().name(), h.name());
            }
        }
        let msg = detection_error("x.bin").to_string();
        for h in HANDLERS {
            assert!(msg.contains(h.name()) && msg.contains(h.recognised_by()));
        }
    }
}
