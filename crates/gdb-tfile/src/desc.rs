//! Parsing of the description section, line by line, the way GDB's `tfile_interp_line`,
//! `parse_trace_status`, `parse_tracepoint_definition` and `parse_tsv_definition` do it
//! (notes §1.2, §2.2, §3, §4.3): prefix dispatch, lenient hex numbers, unknown lines and
//! keys kept and reported.

use trace_core::{LimitExceeded, Offset};

use crate::error::{Error, Warning};
use crate::limits;
use crate::model::{
    Description, SourceKind, SourceString, Status, StopReason, TraceStateVariable, Tracepoint,
};

/// A position in one description line, with the line's absolute file offset.
struct Lp<'a> {
    s: &'a [u8],
    pos: usize,
    base: u64,
}

impl<'a> Lp<'a> {
    fn new(s: &'a [u8], base: u64) -> Self {
        Lp { s, pos: 0, base }
    }
    fn offset_at(&self, pos: usize) -> Offset {
        Offset(self.base.saturating_add(pos as u64))
    }
    fn offset(&self) -> Offset {
        self.offset_at(self.pos)
    }
    fn peek(&self) -> Option<u8> {
        self.s.get(self.pos).copied()
    }
    /// Skips one character (GDB's `p++`), nothing at the end of the line.
    fn skip1(&mut self) {
        if self.pos < self.s.len() {
            self.pos = self.pos.saturating_add(1);
        }
    }
    fn rest(&self) -> &'a [u8] {
        self.s.get(self.pos..).unwrap_or_default()
    }
    /// GDB's `unpack_varlen_hex`: hex digits up to the first other character (none = 0);
    /// overflow drops the high bits as GDB's shift does.
    fn hex(&mut self) -> u64 {
        let mut v = 0u64;
        while let Some(n) = self.peek().and_then(trace_core::hex::digit) {
            v = v.wrapping_shl(4) | u64::from(n);
            self.pos = self.pos.saturating_add(1);
        }
        v
    }
    /// Position of the next `c` at or after `from`.
    fn find(&self, from: usize, c: u8) -> Option<usize> {
        self.s
            .get(from..)?
            .iter()
            .position(|&b| b == c)
            .map(|p| p.saturating_add(from))
    }
}

/// GDB's `hex2bin` over `s[from..from + 2 * count]`: two hex digits per byte.
fn hex2bin(lp: &Lp<'_>, from: usize, count: usize, what: &'static str) -> Result<Vec<u8>, Error> {
    let digits =
        lp.s.get(from..from.saturating_add(count.saturating_mul(2)))
            .unwrap_or_default();
    // Whole pairs only: GDB ignores a dangling last digit.
    let pairs = digits.get(..digits.len() & !1).unwrap_or_default();
    trace_core::hex::decode(pairs).map_err(|e| match e {
        trace_core::hex::HexError::BadDigit { position, found } => Error::BadHex {
            offset: lp.offset_at(from.saturating_add(position)),
            what,
            found,
        },
        // Unreachable for an even slice; report it at the field's start all the same.
        trace_core::hex::HexError::OddLength { .. } => Error::BadHex {
            offset: lp.offset_at(from),
            what,
            found: '?',
        },
    })
}

fn line_text(line: &[u8]) -> String {
    let cut = line.get(..120).unwrap_or(line);
    String::from_utf8_lossy(cut).into_owned()
}

/// Builds a [`Description`] from lines fed one at a time.
#[derive(Debug, Default)]
pub(crate) struct DescriptionParser {
    desc: Description,
    warnings: Vec<Warning>,
    tdesc_offset: Option<u64>,
}

impl DescriptionParser {
    /// Interprets one line (without its `\n`) that starts at file offset `offset`.
    pub(crate) fn line(&mut self, line: &[u8], offset: u64) -> Result<(), Error> {
        if line.len() > crate::raw::MAX_LINE_LEN {
            return Err(Error::LineTooLong {
                offset: Offset(offset),
                len: line.len() as u64,
            });
        }
        if let Some(rest) = line.strip_prefix(b"R ") {
            let mut lp = Lp::new(rest, offset.saturating_add(2));
            let size = lp.hex();
            LimitExceeded::check(
                Offset(offset.saturating_add(2)),
                "register block size",
                size,
                limits::MAX_REGISTER_SIZE,
            )?;
            self.desc.register_size = u32::try_from(size).ok();
        } else if let Some(rest) = line.strip_prefix(b"status ") {
            self.desc.status = Some(parse_status(rest, offset.saturating_add(7), line)?);
        } else if let Some(rest) = line.strip_prefix(b"tp ") {
            self.tp(rest, offset.saturating_add(3), line)?;
        } else if let Some(rest) = line.strip_prefix(b"tsv ") {
            self.tsv(rest, offset.saturating_add(4))?;
        } else if let Some(rest) = line.strip_prefix(b"tdesc ") {
            self.tdesc_offset.get_or_insert(offset);
            self.desc
                .tdesc_lines
                .push(String::from_utf8_lossy(rest).into_owned());
        } else {
            self.warnings.push(Warning {
                offset: Offset(offset),
                message: format!("Ignoring trace file definition \"{}\"", line_text(line)),
            });
            self.desc
                .unknown_lines
                .push(String::from_utf8_lossy(line).into_owned());
        }
        Ok(())
    }

    fn tsv(&mut self, rest: &[u8], base: u64) -> Result<(), Error> {
        let mut lp = Lp::new(rest, base);
        let number = lp.hex();
        lp.skip1();
        let initial = lp.hex();
        lp.skip1();
        let builtin = lp.hex();
        lp.skip1();
        let name = hex2bin(&lp, lp.pos, lp.rest().len() / 2, "tsv name")?;
        let tsv = TraceStateVariable {
            number,
            initial: i64::from_ne_bytes(initial.to_ne_bytes()),
            builtin,
            name,
        };
        match self.desc.tsvs.iter_mut().find(|t| t.number == number) {
            Some(t) => *t = tsv,
            None => self.desc.tsvs.push(tsv),
        }
        Ok(())
    }

    fn tp(&mut self, rest: &[u8], base: u64, line: &[u8]) -> Result<(), Error> {
        let mut lp = Lp::new(rest, base);
        let piece = lp.peek();
        lp.skip1();
        let number = lp.hex();
        lp.skip1();
        let address = lp.hex();
        lp.skip1();
        let known = matches!(piece, Some(b'T' | b'A' | b'S' | b'Z' | b'V'));
        if !known {
            self.warnings.push(Warning {
                offset: Offset(base),
                message: format!(
                    "Unrecognized tracepoint piece '{}', ignoring",
                    char::from(piece.unwrap_or(b' '))
                ),
            });
            self.desc
                .unknown_lines
                .push(String::from_utf8_lossy(line).into_owned());
            return Ok(());
        }
        let idx = match self
            .desc
            .tracepoints
            .iter()
            .position(|t| t.number == number && t.address == address)
        {
            Some(i) => i,
            None => {
                self.desc.tracepoints.push(Tracepoint {
                    number,
                    address,
                    enabled: true,
                    ..Tracepoint::default()
                });
                self.desc.tracepoints.len().saturating_sub(1)
            }
        };
        let mut warning = None;
        let Some(tp) = self.desc.tracepoints.get_mut(idx) else {
            return Ok(());
        };
        match piece {
            Some(b'T') => {
                tp.defined = true;
                tp.enabled = lp.peek() == Some(b'E');
                lp.skip1();
                lp.skip1();
                tp.step_count = lp.hex();
                lp.skip1();
                tp.pass_count = lp.hex();
                tp.fast = None;
                tp.is_static = false;
                tp.condition = None;
                while lp.peek().is_some() {
                    lp.skip1();
                    match lp.peek() {
                        Some(b'F') => {
                            lp.skip1();
                            tp.fast = Some(lp.hex());
                        }
                        Some(b'S') => {
                            lp.skip1();
                            tp.is_static = true;
                        }
                        Some(b'X') => {
                            lp.skip1();
                            let xlen = lp.hex();
                            lp.skip1();
                            // GDB copies exactly 2 * len characters; a line has at most 999.
                            let avail = lp.rest().len() / 2;
                            let n = usize::try_from(xlen).unwrap_or(usize::MAX).min(avail);
                            tp.condition = Some(hex2bin(&lp, lp.pos, n, "tracepoint condition")?);
                            lp.pos = lp.pos.saturating_add(n.saturating_mul(2));
                        }
                        other => {
                            warning = Some(Warning {
                                offset: lp.offset(),
                                message: format!(
                                    "Unrecognized char '{}' in tracepoint definition, skipping rest",
                                    char::from(other.unwrap_or(b' '))
                                ),
                            });
                            break;
                        }
                    }
                }
            }
            Some(b'A') => tp
                .actions
                .push(String::from_utf8_lossy(lp.rest()).into_owned()),
            Some(b'S') => tp
                .step_actions
                .push(String::from_utf8_lossy(lp.rest()).into_owned()),
            Some(b'Z') => {
                let Some(colon) = lp.find(lp.pos, b':') else {
                    return Err(Error::BadLine {
                        offset: lp.offset(),
                        what: "tp Z line",
                        problem: "no ':' after the source type",
                        line: line_text(line),
                    });
                };
                let kind_bytes = lp.s.get(lp.pos..colon).unwrap_or_default();
                let kind = match kind_bytes {
                    b"at" => SourceKind::At,
                    b"cond" => SourceKind::Cond,
                    b"cmd" => SourceKind::Cmd,
                    other => SourceKind::Other(String::from_utf8_lossy(other).into_owned()),
                };
                lp.pos = colon.saturating_add(1);
                let _start = lp.hex();
                lp.skip1();
                let _len = lp.hex();
                lp.skip1();
                let text = hex2bin(&lp, lp.pos, lp.rest().len() / 2, "tp source string")?;
                tp.sources.push(SourceString { kind, text });
            }
            _ => {
                let hits = lp.hex();
                lp.skip1();
                let usage = lp.hex();
                tp.status.push((hits, usage));
            }
        }
        if let Some(w) = warning {
            self.warnings.push(w);
        }
        Ok(())
    }

    /// Ends the section (the empty line was at `end_offset`, frames follow it).
    pub(crate) fn finish(mut self, frames_offset: u64) -> (Description, Vec<Warning>, u64) {
        let frames = self.desc.status.as_ref().and_then(|s| s.frames);
        if frames.is_none_or(|f| f == 0) {
            self.warnings.push(Warning {
                offset: Offset(frames_offset),
                message: "No traceframes present in this file.".into(),
            });
        }
        let tdesc_offset = self.tdesc_offset.unwrap_or(0);
        (self.desc, self.warnings, tdesc_offset)
    }
}

/// GDB's `parse_trace_status` over the text after `status `.
fn parse_status(rest: &[u8], base: u64, line: &[u8]) -> Result<Status, Error> {
    const KEYS: [&[u8]; 16] = [
        b"tfull",
        b"tnotrun",
        b"tpasscount",
        b"tstop",
        b"tdisconnected",
        b"terror",
        b"tframes",
        b"tcreated",
        b"tfree",
        b"tsize",
        b"disconn",
        b"circular",
        b"starttime",
        b"stoptime",
        b"username",
        b"notes",
    ];
    let mut st = Status {
        running: rest.first() == Some(&b'1'),
        ..Status::default()
    };
    let mut lp = Lp::new(rest, base);
    lp.skip1();
    // `while (*p++)`: stop at the end, else skip one separator.
    while lp.peek().is_some() {
        lp.skip1();
        let key_start = lp.pos;
        let Some(colon) = lp.find(key_start, b':') else {
            return Err(Error::BadLine {
                offset: lp.offset(),
                what: "status",
                problem: "no ':' left (GDB: Malformed trace status)",
                line: line_text(line),
            });
        };
        let key = lp.s.get(key_start..colon).unwrap_or_default();
        // The end of this value: the next ';' after the colon, or the end of the line.
        let semi = lp.find(colon.saturating_add(1), b';').unwrap_or(lp.s.len());
        // GDB: strncmp(p, name, p1 - p) == 0, i.e. the key is a prefix of the name.
        let matched = KEYS
            .iter()
            .position(|name| name.get(..key.len()) == Some(key));
        lp.pos = colon.saturating_add(1);
        match matched {
            Some(i @ (0 | 1 | 2 | 4)) => {
                let v = lp.hex();
                st.stop_reason = match i {
                    0 => StopReason::BufferFull,
                    1 => StopReason::NotRun,
                    2 => StopReason::PassCount,
                    _ => StopReason::Disconnected,
                };
                st.stopping_tracepoint = v;
                st.stop_description = None;
            }
            Some(i @ (3 | 5)) => {
                st.stop_reason = if i == 3 {
                    StopReason::Stop
                } else {
                    StopReason::Error
                };
                match lp.find(lp.pos, b':').filter(|&p2| p2 < semi) {
                    Some(p2) => {
                        let n = p2.saturating_sub(lp.pos) / 2;
                        st.stop_description =
                            Some(hex2bin(&lp, lp.pos, n, "status stop description")?);
                        lp.pos = p2.saturating_add(1);
                    }
                    None => st.stop_description = None,
                }
                st.stopping_tracepoint = lp.hex();
            }
            Some(i @ 6..=13) => {
                let v = Some(lp.hex());
                match i {
                    6 => st.frames = v,
                    7 => st.created = v,
                    8 => st.free = v,
                    9 => st.size = v,
                    10 => st.disconnected = v,
                    11 => st.circular = v,
                    12 => st.start_time = v,
                    _ => st.stop_time = v,
                }
            }
            Some(i @ (14 | 15)) => {
                let n = semi.saturating_sub(lp.pos) / 2;
                let what = if i == 14 {
                    "status username"
                } else {
                    "status notes"
                };
                let v = hex2bin(&lp, lp.pos, n, what)?;
                if i == 14 {
                    st.username = Some(v);
                } else {
                    st.notes = Some(v);
                }
                lp.pos = semi;
            }
            None if key == b"tunknown" => {
                // What GDB writes for an unknown reason; GDB itself skips it.
                st.stop_reason = StopReason::Unknown;
                st.stopping_tracepoint = lp.hex();
                st.stop_description = None;
            }
            _ => {
                let value = lp.s.get(lp.pos..semi).unwrap_or_default();
                st.unknown.push((
                    String::from_utf8_lossy(key).into_owned(),
                    String::from_utf8_lossy(value).into_owned(),
                ));
                lp.pos = semi;
            }
        }
    }
    Ok(st)
}

/// Parses a whole description section from `bytes` (the whole file): the header, the lines
/// and the empty line. Returns the description, the warnings, the offset of the first
/// `tdesc` line and the offset of the frame section.
pub(crate) fn parse_description(
    bytes: &[u8],
) -> Result<(Description, Vec<Warning>, u64, usize), Error> {
    check_magic(bytes)?;
    let mut parser = DescriptionParser::default();
    let mut pos = crate::raw::MAGIC.len();
    loop {
        let rest = bytes.get(pos..).unwrap_or_default();
        // Look at most one byte past the longest line GDB accepts.
        let window = rest
            .get(..crate::raw::MAX_LINE_LEN.saturating_add(1))
            .unwrap_or(rest);
        let Some(nl) = window.iter().position(|&b| b == b'\n') else {
            if window.len() > crate::raw::MAX_LINE_LEN {
                return Err(Error::LineTooLong {
                    offset: Offset(pos as u64),
                    len: window.len() as u64,
                });
            }
            return Err(Error::UnterminatedDescription {
                offset: Offset(pos as u64),
            });
        };
        let line = window.get(..nl).unwrap_or_default();
        let next = pos.saturating_add(nl).saturating_add(1);
        if line.is_empty() {
            let (d, w, t) = parser.finish(next as u64);
            return Ok((d, w, t, next));
        }
        parser.line(line, pos as u64)?;
        pos = next;
    }
}

/// Checks the 8-byte header.
pub(crate) fn check_magic(bytes: &[u8]) -> Result<(), Error> {
    match bytes.get(..8) {
        None => Err(trace_core::UnexpectedEof {
            offset: Offset(0),
            needed: 8,
            available: bytes.len() as u64,
        }
        .into()),
        Some(h) if h == crate::raw::MAGIC => Ok(()),
        Some(_) => Err(Error::BadMagic { offset: Offset(0) }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(s: &str) -> Status {
        parse_status(s.as_bytes(), 0, s.as_bytes()).unwrap()
    }

    #[test]
    fn real_status_lines() {
        let s = status(
            "0;tstop:646f6e652d74726163696e67:0;tframes:1388;tcreated:1388;tfree:321adf0;tsize:4000000;starttime:14ae06e9;stoptime:14b66eda;notes:66697273742d6e6f746573;username:616c696365",
        );
        assert!(!s.running);
        assert_eq!(s.stop_reason, StopReason::Stop);
        assert_eq!(s.stop_description.as_deref(), Some(&b"done-tracing"[..]));
        assert_eq!(s.frames, Some(0x1388));
        assert_eq!(s.free, Some(0x321adf0));
        assert_eq!(s.stop_time, Some(0x14b66eda));
        assert_eq!(s.notes.as_deref(), Some(&b"first-notes"[..]));
        assert_eq!(s.username.as_deref(), Some(&b"alice"[..]));
        let s = status("0;tpasscount:5;tframes:4c;notes:;username:");
        assert_eq!(
            (s.stop_reason, s.stopping_tracepoint),
            (StopReason::PassCount, 5)
        );
        assert_eq!(s.notes.as_deref(), Some(&b""[..]));
        let s = status("0;tstop::0;tframes:27;disconn:1;circular:1");
        assert_eq!(s.stop_description.as_deref(), Some(&b""[..]));
        assert_eq!((s.disconnected, s.circular), (Some(1), Some(1)));
        let s = status("1;tnotrun:0;tframes:5");
        assert!(s.running);
        assert_eq!(s.stop_reason, StopReason::NotRun);
        // Old form without description; terror with one.
        let s = status("0;tstop:0;tframes:1;tcreated:1;tfree:100;tsize:1000");
        assert_eq!(s.stop_description, None);
        let s = status("0;terror:6d6164652d7570206572726f72:1;tframes:0");
        assert_eq!(s.stop_reason, StopReason::Error);
        assert_eq!(s.stop_description.as_deref(), Some(&b"made-up error"[..]));
        assert_eq!(s.stopping_tracepoint, 1);
        // Unknown keys kept; key prefixes match like GDB's strncmp.
        let s = status("0;zzz:12;tfr:7");
        assert_eq!(s.unknown, vec![("zzz".to_string(), "12".to_string())]);
        assert_eq!(s.frames, Some(7));
    }

    #[test]
    fn status_errors() {
        let e = parse_status(b"0;tframes", 0x40, b"status 0;tframes").unwrap_err();
        assert!(e.to_string().contains("Malformed"), "{e}");
        assert_eq!(e.offset(), Some(Offset(0x42)));
        let e = parse_status(b"0;username:7z", 0x10, b"").unwrap_err();
        assert!(matches!(e, Error::BadHex { found: 'z', .. }), "{e}");
    }

    #[test]
    fn tracepoint_lines_merge() {
        let mut p = DescriptionParser::default();
        for l in [
            "tp T5:4011fe:E:3:f",
            "tp A5:4011fe:R40",
            "tp S5:4011fe:R010080",
            "tp Z5:4011fe:at:0:6:66617374666e",
            "tp Z5:4011fe:cmd:0:3:656e64",
            "tp V5:4011fe:15:145245",
            "tp V5:4011fe:1:1",
            "tp T4:401161:E:0:0:X12,26000622100222dc16080219162022071327",
            "tp Z4:401161:cond:0:6:69203d3d2037",
            "tp T3:401211:D:0:0:F0:S:Q",
            "tp Q3:401211:zzz",
            "tsv 3:fffffffffffffffb:0:6e6567",
            "tsv 3:fffffffffffffffa:0:6e6567",
            "bogus line",
            "R 970",
        ] {
            p.line(l.as_bytes(), 0).unwrap();
        }
        let (d, w, _) = p.finish(0);
        assert_eq!(d.register_size, Some(0x970));
        let t5 = &d.tracepoints[0];
        assert_eq!(
            (t5.number, t5.address, t5.step_count, t5.pass_count),
            (5, 0x4011fe, 3, 15)
        );
        assert_eq!(t5.actions, ["R40"]);
        assert_eq!(t5.step_actions, ["R010080"]);
        assert_eq!(t5.at(), Some(&b"fastfn"[..]));
        assert_eq!(t5.cmds().collect::<Vec<_>>(), [&b"end"[..]]);
        assert_eq!(t5.hits(), 0x16);
        assert_eq!(t5.hits_decimal(), Some(16));
        let t4 = &d.tracepoints[1];
        assert_eq!(t4.condition.as_ref().map(Vec::len), Some(0x12));
        assert_eq!(t4.cond_source(), Some(&b"i == 7"[..]));
        let t3 = &d.tracepoints[2];
        assert!(!t3.enabled && t3.is_static && t3.fast == Some(0));
        assert_eq!(d.tsvs.len(), 1);
        assert_eq!(d.tsvs[0].initial, -6);
        assert_eq!(d.unknown_lines, ["tp Q3:401211:zzz", "bogus line"]);
        let msgs: Vec<_> = w.iter().map(|w| w.message.as_str()).collect();
        assert!(
            msgs.iter().any(|m| m.starts_with("Unrecognized char 'Q'")),
            "{msgs:?}"
        );
        assert!(
            msgs.iter()
                .any(|m| m.starts_with("Unrecognized tracepoint piece 'Q'"))
        );
        assert!(
            msgs.iter()
                .any(|m| m.starts_with("Ignoring trace file definition"))
        );
        assert!(msgs.iter().any(|m| m.starts_with("No traceframes")));
    }

    #[test]
    fn line_limit_is_999() {
        let mut p = DescriptionParser::default();
        let ok = format!("x{}", "a".repeat(998));
        p.line(ok.as_bytes(), 0).unwrap();
        let bad = format!("x{}", "a".repeat(999));
        assert!(matches!(
            p.line(bad.as_bytes(), 9),
            Err(Error::LineTooLong { len: 1000, .. })
        ));
    }
}
