//! Quickcheck properties: write then read gives the model back; read then write gives the
//! bytes back; the readers never panic on arbitrary bytes and agree with each other.

use amber_tt6::{Class, Dialect, Escape, Instruction, Trace, Tt6Writer, WriteError, classify};
use quickcheck::{Arbitrary, Gen, QuickCheck};

#[derive(Clone, Debug)]
struct ArbTrace(Trace);

fn arb_escape(g: &mut Gen) -> Escape {
    let code = match u8::arbitrary(g) % 4 {
        0 => u16::arbitrary(g) & 0x3FF,
        1 => 0x20 + u16::from(u8::arbitrary(g) % 2),
        2 => 0x30 + u16::from(u8::arbitrary(g) % 2),
        _ => u16::from(u8::arbitrary(g) % 6),
    };
    let n = usize::arbitrary(g) % 4;
    Escape {
        code,
        words: (0..n).map(|_| u32::arbitrary(g)).collect(),
    }
}

/// An opcode word: half the time one of the interesting majors (19, 31 and memory ones)
/// with a random minor, so every class shows up often.
fn arb_opcode(g: &mut Gen) -> u32 {
    let w = u32::arbitrary(g);
    let w = if bool::arbitrary(g) {
        let major = *g
            .choose(&[16u32, 17, 18, 19, 31, 31, 31, 32, 36, 46, 58, 62])
            .unwrap();
        (major << 26) | (w & 0x03FF_FFFF)
    } else {
        w
    };
    if w >> 26 == 0 { w | (14 << 26) } else { w }
}

impl Arbitrary for ArbTrace {
    fn arbitrary(g: &mut Gen) -> Self {
        let dialect = if bool::arbitrary(g) {
            Dialect::Tt6
        } else {
            Dialect::Tt6e
        };
        let n = usize::arbitrary(g) % 40;
        let instructions = (0..n)
            .map(|_| {
                let opcode = arb_opcode(g);
                let mut i = match classify(dialect, opcode) {
                    Class::Compute => Instruction::compute(opcode),
                    Class::Flow => Instruction::flow(opcode, u32::arbitrary(g)),
                    Class::Memory => Instruction::memory(opcode, u32::arbitrary(g)),
                    Class::MemoryExtended => {
                        Instruction::memory_extended(opcode, u32::arbitrary(g), u32::arbitrary(g))
                    }
                };
                if u8::arbitrary(g) % 4 == 0 {
                    let k = usize::arbitrary(g) % 3 + 1;
                    i.escapes = (0..k).map(|_| arb_escape(g)).collect();
                }
                i
            })
            .collect();
        let trailing_escapes = if bool::arbitrary(g) {
            Vec::new()
        } else {
            vec![arb_escape(g)]
        };
        ArbTrace(Trace {
            dialect,
            initial_pc: u32::arbitrary(g),
            instructions,
            trailing_escapes,
        })
    }
}

#[test]
fn write_then_read_gives_the_model_back() {
    fn prop(t: ArbTrace) -> bool {
        let bytes = t.0.to_bytes().unwrap();
        let back = Trace::read(&bytes, t.0.dialect).unwrap();
        // And read then write gives the bytes back.
        back == t.0 && back.to_bytes().unwrap() == bytes
    }
    QuickCheck::new()
        .tests(500)
        .quickcheck(prop as fn(ArbTrace) -> bool);
}

#[test]
fn pcs_follow_flow_records() {
    fn prop(t: ArbTrace) -> bool {
        let bytes = t.0.to_bytes().unwrap();
        let r = amber_tt6::Tt6Reader::parse(&bytes, t.0.dialect).unwrap();
        let mut pc = t.0.initial_pc;
        for (rec, ins) in r.records().zip(&t.0.instructions) {
            let rec = rec.unwrap();
            if rec.pc != pc {
                return false;
            }
            pc = ins.next_pc.unwrap_or(pc.wrapping_add(4));
        }
        true
    }
    QuickCheck::new()
        .tests(300)
        .quickcheck(prop as fn(ArbTrace) -> bool);
}

#[test]
fn readers_never_panic_on_arbitrary_bytes() {
    fn prop(data: Vec<u8>) -> bool {
        amber_tt6::fuzz_read(&data);
        amber_tt6::fuzz_roundtrip(&data);
        true
    }
    QuickCheck::new()
        .tests(2000)
        .quickcheck(prop as fn(Vec<u8>) -> bool);
    // Also on valid traces with bytes flipped or cut.
    fn mutated(t: ArbTrace, at: usize, x: u8, cut: usize) -> bool {
        let mut bytes = t.0.to_bytes().unwrap();
        if !bytes.is_empty() {
            let i = at % bytes.len();
            bytes[i] ^= x;
            bytes.truncate(bytes.len() - cut % bytes.len());
        }
        amber_tt6::fuzz_read(&bytes);
        amber_tt6::fuzz_roundtrip(&bytes);
        true
    }
    QuickCheck::new()
        .tests(1000)
        .quickcheck(mutated as fn(ArbTrace, usize, u8, usize) -> bool);
}

#[test]
fn writer_rejects_inconsistent_records() {
    let mut w = Tt6Writer::new(Vec::new(), Dialect::Tt6, 0x1000).unwrap();
    let lwz = 0x8061_0010;
    let bad = [
        Instruction::compute(lwz),                // memory without ea
        Instruction::memory(0x3863_0001, 4),      // addi with an ea
        Instruction::compute(0x4800_0010),        // b without next pc
        Instruction::memory(0x7c64_2c2a, 0x2000), // lswx without extra
        Instruction::compute(0x0002_0001),        // an escape word as opcode
        Instruction::memory(0x7c03_27ec, 0x2000), // dcbz: compute in TT6
    ];
    for i in &bad {
        assert!(
            matches!(w.write(i), Err(WriteError::Inconsistent { .. })),
            "{i:?}"
        );
    }
    let mut too_long = Instruction::compute(0x3863_0001);
    too_long.escapes.push(Escape {
        code: 0x400,
        words: vec![],
    });
    assert!(matches!(
        w.write(&too_long),
        Err(WriteError::BadEscape { .. })
    ));
    assert_eq!(w.count(), 0);
    assert_eq!(w.finish(), vec![0, 0, 0x10, 0]);
    // dcbz is memory in TT6E.
    let mut w = Tt6Writer::new(Vec::new(), Dialect::Tt6e, 0).unwrap();
    w.write(&Instruction::memory(0x7c03_27ec, 0x2000)).unwrap();
}

#[test]
fn full_write_then_read() {
    use amber_tt6::{FullReader, FullRecordOwned, FullWriter, RecordSize};
    fn prop(words: Vec<u32>, packed: bool) -> bool {
        let size = if packed {
            RecordSize::Packed1004
        } else {
            RecordSize::Struct1008
        };
        // Records whose every state word comes from `words` (cycled).
        let n = words.len() % 5;
        let mut it = words.iter().copied().cycle();
        let recs: Vec<FullRecordOwned> = (0..n)
            .map(|_| {
                let mut r = FullRecordOwned::zeroed(it.next().unwrap_or(0x3863_0001));
                let bytes: Vec<u8> = (0..1000 / 4)
                    .flat_map(|_| it.next().unwrap_or(7).to_be_bytes())
                    .collect();
                r.thread = amber_tt6::raw::ThreadState::from_bytes(&bytes[..160]).unwrap();
                r.float = amber_tt6::raw::FloatState::from_bytes(&bytes[160..424]).unwrap();
                r.vector = amber_tt6::raw::VectorState::from_bytes(&bytes[424..1000]).unwrap();
                if !packed {
                    r.pad = it.next().unwrap_or(0);
                }
                r
            })
            .collect();
        let mut w = FullWriter::new(Vec::new(), size).unwrap();
        for r in &recs {
            w.write(r).unwrap();
        }
        let bytes = w.finish();
        let back: Vec<_> = FullReader::with_size(&bytes, size)
            .unwrap()
            .records()
            .map(|r| r.unwrap().to_owned())
            .collect();
        back == recs
    }
    QuickCheck::new()
        .tests(200)
        .quickcheck(prop as fn(Vec<u32>, bool) -> bool);
}

#[test]
fn internal_iteration_matches_next() {
    // `fold`/`for_each` have their own fast loop: it must yield exactly what `next` does,
    // also on damaged input.
    fn prop(t: ArbTrace, cut: usize) -> bool {
        let mut bytes = t.0.to_bytes().unwrap();
        bytes.truncate(bytes.len() - cut % 6.min(bytes.len()));
        let Ok(r) = amber_tt6::Tt6Reader::parse(&bytes, t.0.dialect) else {
            return true;
        };
        let a: Vec<String> = r.records().map(|x| format!("{x:?}")).collect();
        let mut b = Vec::new();
        r.records().for_each(|x| b.push(format!("{x:?}")));
        a == b
    }
    QuickCheck::new()
        .tests(300)
        .quickcheck(prop as fn(ArbTrace, usize) -> bool);
}

#[test]
fn try_for_each_record_matches_next_and_resumes() {
    // The same fast loop, stopped every `stop` records and resumed: the records of `next`,
    // each once, and the iterator ends where `next` ends.
    fn prop(t: ArbTrace, cut: usize, stop: u8) -> bool {
        use std::ops::ControlFlow;
        let mut bytes = t.0.to_bytes().unwrap();
        bytes.truncate(bytes.len() - cut % 6.min(bytes.len()));
        let Ok(r) = amber_tt6::Tt6Reader::parse(&bytes, t.0.dialect) else {
            return true;
        };
        let a: Vec<String> = r.records().map(|x| format!("{x:?}")).collect();
        let every = usize::from(stop % 8) + 1;
        let mut records = r.records();
        let mut b = Vec::new();
        loop {
            let before = b.len();
            let flow = records.try_for_each_record(|x| {
                b.push(format!("{x:?}"));
                if b.len() % every == 0 {
                    ControlFlow::Break(())
                } else {
                    ControlFlow::Continue(())
                }
            });
            if flow.is_continue() || b.len() == before {
                break;
            }
        }
        a == b && records.next().is_none()
    }
    QuickCheck::new()
        .tests(300)
        .quickcheck(prop as fn(ArbTrace, usize, u8) -> bool);
}

/// The runs of [`amber_tt6::Records::try_for_each_run`] are the records grouped where a
/// record's pc is not the previous one's + 4 (then the error, if any), on whole and cut
/// traces, and the same when the walk stops after every run and resumes.
#[test]
fn runs_group_the_records() {
    use std::ops::ControlFlow;

    use amber_tt6::Run;

    /// The runs from the records one by one: (first index, pc, length), or the error.
    fn grouped(bytes: &[u8], dialect: Dialect) -> Vec<Result<Run, String>> {
        let mut out = Vec::new();
        let Ok(r) = amber_tt6::Tt6Reader::parse(bytes, dialect) else {
            return out;
        };
        let mut open: Option<(Run, u64)> = None;
        for rec in r.records() {
            match rec {
                Ok(rec) => {
                    let pc = u64::from(rec.pc);
                    match &mut open {
                        Some((run, next)) if *next == pc => {
                            run.len += 1;
                            *next = pc + 4;
                        }
                        _ => {
                            out.extend(open.take().map(|(run, _)| Ok(run)));
                            open = Some((
                                Run {
                                    first: rec.index,
                                    pc: rec.pc,
                                    len: 1,
                                },
                                pc + 4,
                            ));
                        }
                    }
                }
                Err(e) => {
                    out.extend(open.take().map(|(run, _)| Ok(run)));
                    out.push(Err(e.to_string()));
                }
            }
        }
        out.extend(open.map(|(run, _)| Ok(run)));
        out
    }

    fn walked(bytes: &[u8], dialect: Dialect, stop: bool) -> Vec<Result<Run, String>> {
        let mut out = Vec::new();
        let Ok(r) = amber_tt6::Tt6Reader::parse(bytes, dialect) else {
            return out;
        };
        let mut records = r.records();
        while records
            .try_for_each_run(|run| {
                out.push(run.map_err(|e| e.to_string()));
                if stop {
                    ControlFlow::Break(())
                } else {
                    ControlFlow::Continue(())
                }
            })
            .is_break()
        {}
        out
    }

    fn prop(t: ArbTrace, cut: usize) -> bool {
        let bytes = t.0.to_bytes().unwrap();
        let cut = &bytes[..bytes.len() - cut % bytes.len().min(9)];
        [&bytes[..], cut].iter().all(|b| {
            let want = grouped(b, t.0.dialect);
            walked(b, t.0.dialect, false) == want && walked(b, t.0.dialect, true) == want
        })
    }
    QuickCheck::new()
        .tests(500)
        .quickcheck(prop as fn(ArbTrace, usize) -> bool);
}
