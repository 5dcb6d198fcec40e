//! The Tenet reader and writer: hand-built lines with known answers, every error with its
//! line and column, the stream reader against the slice reader, round-trip properties,
//! never-panics, and the real Pin-tracer trace from `../shared/realdata/tenet/`.
#![allow(
    clippy::arithmetic_side_effects,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use std::path::PathBuf;

use quickcheck::{Arbitrary, Gen, QuickCheck};
use tenet_trace::{
    Arch, Entry, Error, Line, MemKind, MemOwned, Problem, ReadOptions, Reader, Registers,
    StreamReader, Trace, Writer,
};

/// Every line of `data` as (line number, registers, memory items), or the error.
fn lines(data: &[u8], options: ReadOptions) -> Result<Vec<String>, Error> {
    let mut r = Reader::parse(data, options);
    let mut out = Vec::new();
    while let Some(l) = r.next_line() {
        out.push(show(&l?));
    }
    Ok(out)
}

fn show(l: &Line<'_>) -> String {
    match l {
        Line::Comment(c) => format!("{}: {}", c.line, String::from_utf8_lossy(c.text)),
        Line::Instruction(i) => {
            let regs: Vec<String> = i.regs.iter().map(|(n, v)| format!("{n}={v:#x}")).collect();
            let mem: Vec<String> = i
                .mem()
                .map(|m| format!("{}@{:#x}:{:02x?}", m.kind.name(), m.addr, m.data))
                .collect();
            format!(
                "{} #{}: {} | {}",
                i.line,
                i.index,
                regs.join(" "),
                mem.join(" ")
            )
        }
    }
}

/// The stream reader over `data` handed out in pieces of `piece` bytes.
struct Pieces<'a>(&'a [u8], usize);

impl std::io::Read for Pieces<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.1.min(buf.len()).min(self.0.len());
        buf[..n].copy_from_slice(&self.0[..n]);
        self.0 = &self.0[n..];
        Ok(n)
    }
}

fn stream_lines(data: &[u8], piece: usize) -> Result<Vec<String>, Error> {
    let mut r = StreamReader::from_reader(Pieces(data, piece), ReadOptions::default()).unwrap();
    let mut out = Vec::new();
    while let Some(l) = r.next_line() {
        out.push(show(&l?));
    }
    Ok(out)
}

/// The syntax error of `data`: (line, column, offset, problem).
fn error(data: &[u8]) -> (u64, u64, u64, Problem) {
    let e = lines(data, ReadOptions::default()).unwrap_err();
    let s = stream_lines(data, 3).unwrap_err();
    assert_eq!(
        e.to_string(),
        s.to_string(),
        "stream and slice errors differ"
    );
    let (line, column) = e.line_column().unwrap();
    (line, column, e.offset().0, e.problem().unwrap().clone())
}

#[test]
fn reads_the_pin_tracer_style() {
    let data = b"rdi=0x7ff5,rsp=0x13ff58,rip=0x14000419c,mr=0x13ff58:f213,mw=0x13ff58:f213\nrsp=0x13ff30,rip=0x1400041a0\n";
    assert_eq!(
        lines(data, ReadOptions::default()).unwrap(),
        [
            "1 #0: rdi=0x7ff5 rsp=0x13ff58 rip=0x14000419c | read@0x13ff58:[f2, 13] write@0x13ff58:[f2, 13]",
            "2 #1: rsp=0x13ff30 rip=0x1400041a0 | ",
        ]
    );
}

/// Tenet's QEMU tracer: uppercase keys, no `0x`, x86 names; CRLF; a header comment; memory
/// before the registers; `mrw`; leading zeros.
#[test]
fn reads_qemu_style_x86_with_crlf_and_comments() {
    let data = b"# SO: a.exe @ 0x400000\r\nEAX=1A2B,EIP=00401000\r\nmrw=0X10:00FF,Esp=FFFF0000,eip=401005\r\n";
    let out = lines(data, ReadOptions::default()).unwrap();
    assert_eq!(
        out,
        [
            "1: # SO: a.exe @ 0x400000",
            "2 #0: eax=0x1a2b eip=0x401000 | ",
            "3 #1: esp=0xffff0000 eip=0x401005 | readwrite@0x10:[00, ff]",
        ]
    );
    let mut r = Reader::parse(data, ReadOptions::default());
    while r.next_line().is_some() {}
    let s = r.summary();
    assert_eq!(
        (s.arch, s.lines, s.instructions, s.crlf),
        (Some(Arch::X86), 3, 2, true)
    );
    // Written back canonical: lowercase, 0x, no leading zeros, registers first, LF.
    let t = Trace::read(data, ReadOptions::default()).unwrap();
    assert_eq!(
        String::from_utf8(t.to_bytes().unwrap()).unwrap(),
        "# SO: a.exe @ 0x400000\neax=0x1a2b,eip=0x401000\nesp=0xffff0000,eip=0x401005,mrw=0x10:00ff\n"
    );
}

#[test]
fn a_last_line_without_terminator_is_read() {
    assert_eq!(
        lines(b"rip=1", ReadOptions::default()).unwrap(),
        ["1 #0: rip=0x1 | "]
    );
    assert_eq!(stream_lines(b"rip=1", 1).unwrap(), ["1 #0: rip=0x1 | "]);
}

#[test]
fn the_architecture_can_be_given() {
    let x86 = ReadOptions {
        arch: Some(Arch::X86),
    };
    let e = lines(b"rip=0x1\n", x86).unwrap_err();
    assert_eq!(
        e.to_string(),
        "line 1, column 1: register rip is not a x86 register (the trace's architecture, as given) at offset 0x0"
    );
    // Memory items alone do not tell the architecture, but the pc is missing anyway.
    assert_eq!(lines(b"mr=1:00,eip=2\n", x86).unwrap().len(), 1);
}

/// Every problem, with its line, column and offset counted by hand.
#[test]
fn errors_say_line_and_column() {
    // (input, (line, column, offset), part of the message)
    type Case = (&'static [u8], (u64, u64, u64), &'static str);
    let cases: &[Case] = &[
        (
            b"rip=1\nrip=2,rflags=0x246\n",
            (2, 7, 12),
            "unknown key \"rflags\"",
        ),
        (
            b"rip=1\nrip=2,mr=0x10:abc\n",
            (2, 15, 20),
            "odd number of hex digits (3)",
        ),
        (
            b"rip=1\r\nrax=5\r\n",
            (2, 1, 7),
            "instruction line without rip",
        ),
        (b"rax=5\n", (1, 1, 0), "instruction line without rip"),
        (
            b"mr=0x10:00\n",
            (1, 1, 0),
            "instruction line without rip or eip",
        ),
        (b"rip=1\n\n", (2, 1, 6), "instruction line without rip"),
        (b"", (1, 1, 0), "no instruction lines"),
        (b"# only a comment\n", (2, 1, 17), "no instruction lines"),
        (
            b"rip=1,eax=2\n",
            (1, 7, 6),
            "register eax is not a amd64 register",
        ),
        (b"rip=1,rax\n", (1, 10, 9), "item without '='"),
        (b"rip=1,\n", (1, 7, 6), "item without '='"),
        (
            b"rip=0xz1\n",
            (1, 7, 6),
            "bad hex digit 'z' in register value",
        ),
        (
            b"rip=12g\n",
            (1, 7, 6),
            "bad hex digit 'g' in register value",
        ),
        (b"rip=\n", (1, 5, 4), "no hex digits in register value"),
        (
            b"eip=100000000\n",
            (1, 5, 4),
            "register value does not fit 32 bits",
        ),
        (
            b"rip=10000000000000000\n",
            (1, 5, 4),
            "register value does not fit 64 bits",
        ),
        (b"rip=1,mw=0x10\n", (1, 14, 13), "memory item without ':'"),
        (
            b"rip=1,mw=0x10:\n",
            (1, 15, 14),
            "no hex digits in memory bytes",
        ),
        (
            b"rip=1,mw=:00\n",
            (1, 10, 9),
            "no hex digits in memory address",
        ),
        (
            b"rip=1,mw=0x10:00 \n",
            (1, 17, 16),
            "bad hex digit ' ' in memory bytes",
        ),
    ];
    for (data, (line, column, offset), message) in cases {
        let (l, c, o, p) = error(data);
        assert_eq!(
            (l, c, o),
            (*line, *column, *offset),
            "{:?}",
            String::from_utf8_lossy(data)
        );
        assert!(p.to_string().contains(message), "{p} / {message}");
    }
}

/// A 33rd register item on a line (a Tenet architecture has at most 32 registers); 32
/// items (repeating names, the last value wins) are fine.
#[test]
fn a_33rd_register_item_is_an_error() {
    let regs = |n: usize| {
        let mut s: Vec<String> = (0..n - 1).map(|k| format!("rax={k:#x}")).collect();
        s.push("rip=0x1".into());
        s.join(",") + "\n"
    };
    let ok = lines(regs(32).as_bytes(), ReadOptions::default()).unwrap();
    assert_eq!(ok, ["1 #0: rax=0x1e rip=0x1 | "]);
    let line = regs(33);
    let col = line.find("rip").unwrap() as u64 + 1;
    assert_eq!(
        error(line.as_bytes()),
        (1, col, col - 1, Problem::TooManyRegisters)
    );
}

/// An error comes after every complete line before it, also from the stream reader.
#[test]
fn complete_lines_come_before_the_error() {
    let data = b"rip=1\nrip=2\nrip=3,mw=0x10:0\n";
    let mut r = Reader::parse(data, ReadOptions::default());
    let mut ok = 0;
    let mut err = None;
    while let Some(l) = r.next_line() {
        match l {
            Ok(_) => ok += 1,
            Err(e) => err = Some(e),
        }
    }
    assert_eq!(ok, 2);
    assert_eq!(err.unwrap().line_column(), Some((3, 15)));
    let mut s = StreamReader::from_reader(&data[..], ReadOptions::default()).unwrap();
    let mut n = 0;
    while let Some(Ok(_)) = s.next_line() {
        n += 1;
    }
    assert_eq!(n, 2);
    assert!(s.next_line().is_none(), "fused");
}

/// A line over the limit is an error for both readers, whether its end is there or not.
#[test]
fn long_lines_are_refused() {
    let long = tenet_trace::limits::MAX_LINE_LEN + 1;
    for end in ["\n", ""] {
        let mut data = b"rip=1\n".to_vec();
        data.extend(std::iter::repeat_n(b'0', long));
        data.extend_from_slice(end.as_bytes());
        let (line, column, offset, problem) = error(&data);
        assert_eq!(
            (line, column, offset, problem),
            (2, 1, 6, Problem::LineTooLong)
        );
    }
}

#[test]
fn the_writer_checks_its_lines() {
    let mut w = Writer::new(Vec::new(), Arch::Amd64);
    let mut regs = Registers::new(Arch::Amd64);
    regs.set(7, 5);
    assert!(w.write_instruction(&regs, []).is_err(), "no pc");
    assert!(w.write_instruction(&Registers::new(Arch::X86), []).is_err());
    assert!(w.write_comment(b"a\nb").is_err());
    regs.set(16, 0x401000);
    w.write_instruction(&regs, []).unwrap();
    w.write_comment(b"note").unwrap();
    assert_eq!(w.finish().unwrap(), b"rax=0x5,rip=0x401000\n#note\n");
}

// Round trips.

#[derive(Clone, Debug)]
struct Arb(Trace);

impl Arbitrary for Arb {
    fn arbitrary(g: &mut Gen) -> Arb {
        let arch = if bool::arbitrary(g) {
            Arch::Amd64
        } else {
            Arch::X86
        };
        let n = usize::arbitrary(g) % 12 + 1;
        let mut lines = Vec::new();
        for _ in 0..n {
            if u8::arbitrary(g) % 8 == 0 {
                let text: String = String::arbitrary(g)
                    .chars()
                    .filter(|c| *c != '\n')
                    .collect();
                lines.push(Entry::Comment(format!("#{text}.").into_bytes()));
                continue;
            }
            let mut regs = Registers::new(arch);
            for i in 0..arch.registers().len() {
                if i == arch.pc() || bool::arbitrary(g) {
                    regs.set(i, u64::arbitrary(g) >> (u8::arbitrary(g) % 64));
                }
            }
            let kinds = [MemKind::Read, MemKind::Write, MemKind::ReadWrite];
            let mem = (0..usize::arbitrary(g) % 4)
                .map(|_| MemOwned {
                    kind: *g.choose(&kinds).unwrap(),
                    addr: u64::arbitrary(g),
                    data: {
                        let mut d = Vec::<u8>::arbitrary(g);
                        d.push(u8::arbitrary(g));
                        d
                    },
                })
                .collect();
            lines.push(Entry::Instruction { regs, mem });
        }
        if lines.iter().all(|l| matches!(l, Entry::Comment(_))) {
            let mut regs = Registers::new(arch);
            regs.set(arch.pc(), 0);
            lines.push(Entry::Instruction {
                regs,
                mem: Vec::new(),
            });
        }
        Arb(Trace { arch, lines })
    }
}

/// write → read gives the model back; the written bytes are canonical (read → write gives
/// them back), and the stream reader agrees with the slice reader in any piece size.
#[test]
fn write_then_read_round_trips() {
    fn prop(t: Arb, piece: u8) -> bool {
        let bytes = t.0.to_bytes().unwrap();
        let back = Trace::read(&bytes, ReadOptions::default()).unwrap();
        let again = back.to_bytes().unwrap();
        back == t.0
            && again == bytes
            && stream_lines(&bytes, usize::from(piece) + 1).unwrap()
                == lines(&bytes, ReadOptions::default()).unwrap()
    }
    QuickCheck::new()
        .tests(300)
        .quickcheck(prop as fn(Arb, u8) -> bool);
}

/// Arbitrary bytes, and valid traces with bytes changed: never a panic, and the slice and
/// stream readers agree (checked inside `fuzz_read`).
#[test]
fn never_panics() {
    fn bytes(data: Vec<u8>) -> bool {
        tenet_trace::fuzz_read(&data);
        true
    }
    fn damaged(t: Arb, edits: Vec<(u16, u8)>) -> bool {
        let mut data = t.0.to_bytes().unwrap();
        for (at, b) in edits {
            if !data.is_empty() {
                let at = usize::from(at) % data.len();
                data[at] = b"0x,=:#\r\nrRaAmMwW9fz"[usize::from(b) % 19];
            }
        }
        tenet_trace::fuzz_read(&data);
        true
    }
    QuickCheck::new()
        .tests(500)
        .quickcheck(bytes as fn(Vec<u8>) -> bool);
    QuickCheck::new()
        .tests(500)
        .quickcheck(damaged as fn(Arb, Vec<(u16, u8)>) -> bool);
}

// The real trace.

/// A real file under `../shared/realdata/` (never copied into the repository). `None`,
/// with a note, when missing, unless `TRACEKIT_REQUIRE_REALDATA=1`.
fn realdata(rel: &str) -> Option<Vec<u8>> {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/realdata")
        .join(rel);
    match std::fs::read(&p) {
        Ok(b) => Some(b),
        Err(_) if std::env::var_os("TRACEKIT_REQUIRE_REALDATA").is_some_and(|v| v == "1") => {
            panic!(
                "real data file {} is missing and TRACEKIT_REQUIRE_REALDATA=1",
                p.display()
            )
        }
        Err(_) => {
            eprintln!("skipped: real data file {} is not there", p.display());
            None
        }
    }
}

const REAL: &str = "tenet/gaasedelen_tenet_boombox.trace.0.log";

/// Tenet's reference Pin tracer's trace: reads (2,163 lines, AMD64, 969 `mr` and 570 `mw`
/// items as counted with grep), the stream reader agrees, and read → write gives back the
/// file byte for byte.
#[test]
fn real_pin_trace_reads_and_round_trips() {
    let Some(data) = realdata(REAL) else { return };
    let t = Trace::read(&data, ReadOptions::default()).unwrap();
    assert_eq!(t.arch, Arch::Amd64);
    assert_eq!(t.lines.len(), 2163);
    let count = |k| {
        t.lines
            .iter()
            .map(|l| match l {
                Entry::Instruction { mem, .. } => mem.iter().filter(|m| m.kind == k).count(),
                Entry::Comment(_) => 0,
            })
            .sum::<usize>()
    };
    assert_eq!((count(MemKind::Read), count(MemKind::Write)), (969, 570));
    // The first line, as the file's SOURCES.md shows it.
    let Entry::Instruction { regs, mem } = &t.lines[0] else {
        panic!()
    };
    assert_eq!(regs.pc(), Some(0x14000419c));
    assert_eq!(regs.get(3), Some(0x13ff58));
    assert_eq!(mem[0].data, [0xf2, 0x13, 0x27, 0xa6, 0xfb, 0x7f, 0, 0]);
    assert!(
        t.to_bytes().unwrap() == data,
        "read → write changed the bytes"
    );
    assert_eq!(
        stream_lines(&data, 4096).unwrap(),
        lines(&data, ReadOptions::default()).unwrap()
    );
}
