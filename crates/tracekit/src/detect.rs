//! Format detection by content (and, for the amber TT6/TT6E formats, which have no magic,
//! by file extension).

use std::fmt;

/// A trace format the tool understands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, clap::ValueEnum)]
#[non_exhaustive]
pub enum Format {
    /// x64dbg trace (`.trace64`, `.trace32`), magic `TRAC`.
    X64dbg,
    /// GDB tracepoint file, magic `\x7fTRACE0\n`.
    GdbTfile,
    /// Intel DCFG JSON.
    Dcfg,
    /// Intel DCFG-Trace JSON.
    DcfgTrace,
    /// Apple amber TT6 (`.tt6`, no magic).
    Tt6,
    /// Apple amber TT6E (`.tt6e`, no magic).
    Tt6e,
    /// Apple amber FULL, magic 0xA1118E17 (big-endian).
    AmberFull,
}

impl Format {
    /// Every format, in the order they are listed to users.
    pub const ALL: [Format; 7] = [
        Format::X64dbg,
        Format::GdbTfile,
        Format::Dcfg,
        Format::DcfgTrace,
        Format::Tt6,
        Format::Tt6e,
        Format::AmberFull,
    ];

    /// The name used by `--format` and in `info --json`.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Format::X64dbg => "x64dbg",
            Format::GdbTfile => "gdb-tfile",
            Format::Dcfg => "dcfg",
            Format::DcfgTrace => "dcfg-trace",
            Format::Tt6 => "tt6",
            Format::Tt6e => "tt6e",
            Format::AmberFull => "amber-full",
        }
    }

    /// How the format is recognised, for the detection error.
    fn how(self) -> &'static str {
        match self {
            Format::X64dbg => "magic \"TRAC\"",
            Format::GdbTfile => "magic \"\\x7fTRACE0\\n\"",
            Format::Dcfg => "JSON with DCFG keys (MAJOR_VERSION, PROCESSES, ...)",
            Format::DcfgTrace => "JSON whose PROCESSES table has TRANSITION_TABLE/THREAD_DATA",
            Format::Tt6 => "extension .tt6",
            Format::Tt6e => "extension .tt6e",
            Format::AmberFull => "magic 0xA1118E17",
        }
    }
}

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The format of an input from its first bytes (`head`, decompressed) and its file name
/// without compression extension. `None` if nothing matches.
#[must_use]
pub fn detect(head: &[u8], name: &str) -> Option<Format> {
    if head.starts_with(b"TRAC") {
        return Some(Format::X64dbg);
    }
    if head.starts_with(b"\x7fTRACE0\n") {
        return Some(Format::GdbTfile);
    }
    if head.starts_with(&[0xA1, 0x11, 0x8E, 0x17]) {
        return Some(Format::AmberFull);
    }
    let lower = name.to_ascii_lowercase();
    if head.trim_ascii_start().first() == Some(&b'{') {
        // DCFG-Trace's PROCESSES header row names these columns; a DCFG's does not.
        if contains(head, b"\"TRANSITION_TABLE\"") || contains(head, b"\"THREAD_DATA\"") {
            return Some(Format::DcfgTrace);
        }
        // Any DCFG top-level key: writers differ in key order, and a large file with
        // PROCESSES first has no MAJOR_VERSION in its first 64 KiB.
        let dcfg_keys: [&[u8]; 5] = [
            b"\"MAJOR_VERSION\"",
            b"\"FILE_NAMES\"",
            b"\"EDGE_TYPES\"",
            b"\"SPECIAL_NODES\"",
            b"\"PROCESSES\"",
        ];
        if dcfg_keys.iter().any(|k| contains(head, k)) {
            // Intel's names decide between the two when the content does not.
            return Some(if lower.contains(".trace.json") {
                Format::DcfgTrace
            } else {
                Format::Dcfg
            });
        }
    }
    if lower.ends_with(".tt6") {
        return Some(Format::Tt6);
    }
    if lower.ends_with(".tt6e") {
        return Some(Format::Tt6e);
    }
    None
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

/// The message for an input of no known format.
#[must_use]
pub fn detection_error(name: &str) -> String {
    let mut msg = format!("cannot tell the format of {name}; known formats (use --format NAME):");
    for f in Format::ALL {
        msg.push_str(&format!("\n  {:<11} {}", f.name(), f.how()));
    }
    msg
}

#[cfg(test)]
#[allow(clippy::arithmetic_side_effects)]
mod tests {
    use super::*;

    #[test]
    fn detects_by_content_then_extension() {
        assert_eq!(detect(b"TRAC\x10\0\0\0{}", "x.bin"), Some(Format::X64dbg));
        assert_eq!(detect(b"\x7fTRACE0\nR 2a0\n", "x"), Some(Format::GdbTfile));
        assert_eq!(
            detect(&[0xA1, 0x11, 0x8E, 0x17, 0, 0], "x.tt6"),
            Some(Format::AmberFull)
        );
        assert_eq!(
            detect(
                b" {\"MAJOR_VERSION\" : 1, \"PROCESSES\" : [[\"PROCESS_ID\",\"INSTR_COUNT\"]]}",
                "a"
            ),
            Some(Format::Dcfg)
        );
        let trace = b"{\n\"MAJOR_VERSION\" : 1,\n\"PROCESSES\" : [ [\"PROCESS_ID\", \"STRING_DICTIONARY\", \"TRANSITION_TABLE\", \"THREAD_DATA\"]";
        assert_eq!(detect(trace, "a.trace.json"), Some(Format::DcfgTrace));
        assert_eq!(detect(b"\0\0\0\x10", "thread_001.tt6"), Some(Format::Tt6));
        assert_eq!(detect(b"\0\0\0\x10", "THREAD_001.TT6E"), Some(Format::Tt6e));
        assert_eq!(detect(b"TRAC", "thread_001.tt6"), Some(Format::X64dbg));
        assert_eq!(detect(b"hello", "x.txt"), None);
        assert_eq!(detect(b"{\"a\":1}", "x.json"), None);
        // Other key orders: PROCESSES (or another DCFG key) first.
        assert_eq!(
            detect(
                b"{\"PROCESSES\" : [[\"PROCESS_ID\",\"INSTR_COUNT\"",
                "big.json"
            ),
            Some(Format::Dcfg)
        );
        assert_eq!(
            detect(b"{\"EDGE_TYPES\" : [", "x.dcfg.json"),
            Some(Format::Dcfg)
        );
        assert_eq!(
            detect(b"{\"PROCESSES\" : [[\"PROCESS_ID\"", "run.trace.json"),
            Some(Format::DcfgTrace)
        );
        assert_eq!(detect(b"", ""), None);
    }

    #[test]
    fn detection_error_lists_every_format() {
        let msg = detection_error("x.bin");
        for f in Format::ALL {
            assert!(msg.contains(f.name()));
        }
    }
}
