//! The TT6/TT6E fixtures against the independent Python oracle (`testdata/amber/oracle.py`,
//! a naive `struct.unpack` decoder written from the spec's macros; its outputs
//! `*.oracle` are committed), hand-derived values from the notes' example, negative
//! fixtures, the streaming reader, din export, and write(read(bytes)) == bytes.

use std::io::Read;

use amber_tt6::din::DinWriter;
use amber_tt6::{
    Class, Dialect, Error, EscapeKind, Record, SyncKind, SyntheticTrap, Trace, Tt6Reader,
    Tt6StreamReader,
};

use super::{read, testdata};

const TT6_FILES: &[&str] = &[
    "example.tt6",
    "all-opcodes.tt6",
    "all-opcodes.tt6e",
    "escapes.tt6",
    "escapes.tt6e",
    "trap.tt6e",
    "threads/thread_001.tt6",
    "threads/thread_002.tt6",
    "threads/thread_003.tt6",
    "err-empty.tt6",
    "err-truncated-record.tt6",
    "err-truncated-escape.tt6",
    "err-stray-bytes.tt6",
];

fn dialect(name: &str) -> Dialect {
    if name.ends_with(".tt6e") {
        Dialect::Tt6e
    } else {
        Dialect::Tt6
    }
}

fn escapes_text(e: amber_tt6::Escapes<'_>) -> String {
    let v: Vec<String> = e
        .iter()
        .map(|e| {
            let w: Vec<String> = e.words.iter().map(|w| format!("{:x}", w.get())).collect();
            format!("{:x}:{}", e.code, w.join(","))
        })
        .collect();
    v.join(";")
}

fn line(r: &Record<'_>) -> String {
    let opt = |v: Option<u32>| v.map_or("-".to_string(), |v| format!("{v:x}"));
    let esc = escapes_text(r.escapes);
    format!(
        "{} {:x} {:08x} {} {:x} {} {} {}",
        r.index,
        r.pc,
        r.opcode,
        r.class.name(),
        r.next_pc,
        opt(r.ea()),
        opt(r.extra()),
        if esc.is_empty() { "-".into() } else { esc }
    )
}

/// The reader's output in the oracle's line format.
fn oracle_text(data: &[u8], d: Dialect) -> String {
    let mut out = Vec::new();
    let reader = match Tt6Reader::parse(data, d) {
        Ok(r) => r,
        Err(e) => return format!("error {:#x}\n", e.offset().unwrap().0),
    };
    out.push(format!("initial {:x}", reader.initial_pc()));
    let mut records = reader.records();
    for r in records.by_ref() {
        match r {
            Ok(r) => out.push(line(&r)),
            Err(e) => out.push(format!("error {:#x}", e.offset().unwrap().0)),
        }
    }
    let dangling = records.dangling_escapes();
    if !dangling.is_empty() {
        out.push(format!("dangling {}", escapes_text(dangling)));
    }
    out.join("\n") + "\n"
}

#[test]
fn reader_matches_the_python_oracle() {
    for name in TT6_FILES {
        let data = read(name);
        let expected = std::fs::read_to_string(testdata(&format!("{name}.oracle"))).unwrap();
        assert_eq!(oracle_text(&data, dialect(name)), expected, "{name}");
    }
}

/// A reader that returns at most `n` bytes per call, to exercise buffer refills.
struct Trickle<'a>(&'a [u8], usize);

impl Read for Trickle<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.1.min(buf.len()).min(self.0.len());
        buf[..n].copy_from_slice(&self.0[..n]);
        self.0 = &self.0[n..];
        Ok(n)
    }
}

#[test]
fn stream_reader_agrees_with_slice_reader() {
    for name in TT6_FILES {
        let data = read(name);
        let d = dialect(name);
        for chunk in [1, 3, 7, 4096] {
            let slice = Tt6Reader::parse(&data, d).map(|r| {
                let mut it = r.records();
                let v: Vec<_> = it
                    .by_ref()
                    .map(|r| {
                        r.map(|r| (r.to_instruction(), r.pc, r.offset))
                            .map_err(|e| e.to_string())
                    })
                    .collect();
                (v, escapes_text(it.dangling_escapes()))
            });
            let stream = Tt6StreamReader::from_reader(Trickle(&data, chunk), d).map(|mut s| {
                let mut v = Vec::new();
                while let Some(r) = s.next_record() {
                    v.push(
                        r.map(|r| (r.to_instruction(), r.pc, r.offset))
                            .map_err(|e| e.to_string()),
                    );
                }
                (v, escapes_text(s.dangling_escapes()))
            });
            match (slice, stream) {
                (Ok(a), Ok(b)) => assert_eq!(a, b, "{name} chunk {chunk}"),
                (Err(a), Err(b)) => assert_eq!(a.to_string(), b.to_string()),
                (a, b) => panic!("{name}: {a:?} vs {b:?}"),
            }
        }
    }
}

#[test]
fn notes_example_by_hand() {
    // Values from the notes' §3 table (annotated by hand there).
    let data = read("example.tt6");
    let r = Tt6Reader::parse(&data, Dialect::Tt6).unwrap();
    assert_eq!(r.initial_pc(), 0x1000);
    let recs: Vec<_> = r.records().map(Result::unwrap).collect();
    assert_eq!(recs.len(), 6);
    let pcs: Vec<u32> = recs.iter().map(|r| r.pc).collect();
    assert_eq!(pcs, [0x1000, 0x1004, 0x1008, 0x1018, 0x101c, 0x1020]);
    assert_eq!(recs[1].ea(), Some(0xbfff_f9fc));
    assert!(recs[1].is_store());
    assert_eq!(recs[1].operand_size(32), Some(4));
    assert_eq!(recs[2].class, Class::Flow);
    assert_eq!(recs[2].next_pc, 0x1018);
    let cr: Vec<_> = recs[2].escapes.iter().collect();
    assert_eq!(cr.len(), 1);
    assert_eq!(cr[0].kind(), EscapeKind::ConditionRegister);
    assert_eq!(cr[0].value(), Some(0x4200_0000));
    assert_eq!(recs[3].class, Class::MemoryExtended);
    assert_eq!((recs[3].ea(), recs[3].extra()), (Some(0x2000), Some(7)));
    assert_eq!(recs[3].xer_byte_count(), Some(7));
    assert_eq!(recs[3].operand_size(32), Some(7));
    assert_eq!(recs[4].operand_size(32), Some(16));
    assert_eq!(recs[4].mnemonic(), Some("lvx"));
    let sig: Vec<_> = recs[5].escapes.iter().collect();
    assert_eq!(sig[0].kind(), EscapeKind::SyncSignal);
    // Only one payload word here: no (address, count) pair to type.
    assert_eq!(sig[0].sync(), None);
    assert_eq!(recs[5].mnemonic(), Some("rfi"));
    assert_eq!(recs[5].next_pc, 0x1000);
}

#[test]
fn escapes_of_every_code_are_typed() {
    let data = read("escapes.tt6");
    let reader = Tt6Reader::parse(&data, Dialect::Tt6).unwrap();
    let mut records = reader.records();
    let mut kinds = Vec::new();
    let mut syncs = Vec::new();
    for r in records.by_ref() {
        let r = r.unwrap();
        for e in r.escapes {
            kinds.push(e.kind());
            syncs.extend(e.sync());
        }
    }
    use EscapeKind::*;
    assert_eq!(
        kinds,
        [
            SegmentRegister,
            OptionalDataAddress,
            ConditionRegister,
            RealBranchTarget,
            RealDataAddress,
            RealNextInstruction,
            SyncSignal,
            SyncBroadcast,
            SyncWait,
            SyncTryWait,
            Unknown(6),
            Unknown(0x3ff),
            Unknown(0x22),
        ]
    );
    let k: Vec<_> = syncs.iter().map(|s| (s.kind, s.address, s.count)).collect();
    assert_eq!(
        k,
        [
            (SyncKind::Signal, 0x8000_1000, 1),
            (SyncKind::Broadcast, 0x8000_2000, 1),
            (SyncKind::Wait, 0x8000_1000, 1),
            (SyncKind::TryWait, 0x8000_1000, 1),
        ]
    );
    let dangling: Vec<_> = records.dangling_escapes().iter().collect();
    assert_eq!(dangling.len(), 1);
    assert_eq!(dangling[0].sync().unwrap().count, 2);
}

#[test]
fn tt6e_synthetic_trap_pair() {
    let data = read("trap.tt6e");
    let recs: Vec<_> = Tt6Reader::parse(&data, Dialect::Tt6e)
        .unwrap()
        .records()
        .map(Result::unwrap)
        .collect();
    let traps: Vec<_> = recs.iter().map(|r| r.trap).collect();
    assert_eq!(
        traps,
        [
            None,
            Some(SyntheticTrap::Branch),
            Some(SyntheticTrap::Return),
            None,
            None,
            None
        ]
    );
    assert_eq!(recs[2].pc, 0x700);
    assert_eq!(recs[3].pc, 0x2008);
    // The same file read as TT6 recognises no synthetic pair.
    let tt6: Vec<_> = Tt6Reader::parse(&data, Dialect::Tt6)
        .unwrap()
        .records()
        .map(|r| r.unwrap().trap)
        .collect();
    assert!(tt6.iter().all(Option::is_none));
}

#[test]
fn all_opcodes_classes_differ_only_for_cache_ops() {
    let a = read("all-opcodes.tt6");
    let b = read("all-opcodes.tt6e");
    let ra: Vec<_> = Tt6Reader::parse(&a, Dialect::Tt6)
        .unwrap()
        .records()
        .map(Result::unwrap)
        .collect();
    let rb: Vec<_> = Tt6Reader::parse(&b, Dialect::Tt6e)
        .unwrap()
        .records()
        .map(Result::unwrap)
        .collect();
    assert_eq!(ra.len(), rb.len());
    let differ: Vec<_> = ra
        .iter()
        .zip(&rb)
        .filter(|(x, y)| x.class != y.class)
        .map(|(x, _)| x.mnemonic().unwrap())
        .collect();
    assert_eq!(
        differ,
        [
            "dcba", "dcbf", "dcbi", "dcbst", "dcbt", "dcbtst", "dcbz", "dcbzl", "icbi"
        ]
    );
    // Every record has a mnemonic, and sizes follow the notes' table for a few by hand.
    assert!(rb.iter().all(|r| r.mnemonic().is_some()));
    let size = |m: &str| {
        rb.iter()
            .find(|r| r.mnemonic() == Some(m))
            .unwrap()
            .operand_size(32)
    };
    assert_eq!(size("lmw"), Some(12)); // rT = 29: (32 - 29) * 4
    assert_eq!(size("stmw"), Some(8)); // rT = 30
    assert_eq!(size("lswi"), Some(7)); // NB = 7
    assert_eq!(size("stswi"), Some(32)); // NB = 0 means 32
    assert_eq!(size("lswx"), Some(7)); // XER 0x20000007 & 0x7f
    assert_eq!(size("dcbz"), Some(32));
    assert_eq!(size("dcbzl"), Some(128));
    assert_eq!(size("lwa"), Some(4));
    assert_eq!(size("ldu"), Some(8));
    assert_eq!(size("dst"), None);
    let dst = rb.iter().find(|r| r.mnemonic() == Some("dststt")).unwrap();
    let sc = dst.stream_control().unwrap();
    assert_eq!((sc.block_size, sc.block_count, sc.stride), (1, 2, 16));
    assert!(rb.iter().filter(|r| r.is_trap()).count() == 4);
}

#[test]
fn negative_fixtures() {
    let cases: &[(&str, usize, u64)] = &[
        // (file, complete records before the error, error offset)
        ("err-empty.tt6", 0, 0),
        ("err-truncated-record.tt6", 3, 0x20),
        ("err-truncated-escape.tt6", 5, 0x34),
        ("err-stray-bytes.tt6", 6, 0x44),
    ];
    for &(name, good, offset) in cases {
        let data = read(name);
        let mut n = 0;
        let err = match Tt6Reader::parse(&data, Dialect::Tt6) {
            Err(e) => e,
            Ok(r) => {
                let mut it = r.records();
                let e = loop {
                    match it.next().unwrap() {
                        Ok(_) => n += 1,
                        Err(e) => break e,
                    }
                };
                assert!(it.next().is_none(), "fused");
                e
            }
        };
        assert_eq!(
            (n, err.offset()),
            (good, Some(trace_core::Offset(offset))),
            "{name}"
        );
        let msg = err.to_string();
        assert!(msg.ends_with(&format!("at offset {offset:#x}")), "{msg}");
        if name != "err-empty.tt6" {
            assert!(matches!(err, Error::Truncated { .. }));
        }
    }
}

#[test]
fn canonical_fixtures_write_back_byte_for_byte() {
    for name in TT6_FILES.iter().filter(|n| !n.starts_with("err-")) {
        let data = read(name);
        let t = Trace::read(&data, dialect(name)).unwrap();
        assert_eq!(t.to_bytes().unwrap(), data, "{name}");
    }
}

#[test]
fn din_export_of_the_example() {
    let data = read("example.tt6");
    let r = Tt6Reader::parse(&data, Dialect::Tt6).unwrap();
    let mut din = DinWriter::new(Vec::new());
    for rec in r.records() {
        din.write_record(&rec.unwrap()).unwrap();
    }
    // By hand: a fetch per instruction, stw writes, lswx and lvx read.
    let expected = "2 1000\n2 1004\n1 bffff9fc\n2 1008\n2 1018\n0 2000\n2 101c\n0 3008\n2 1020\n";
    assert_eq!(String::from_utf8(din.finish()).unwrap(), expected);
}
