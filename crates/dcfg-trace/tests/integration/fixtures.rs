//! The committed fixtures: positive ones decode to values derived independently, negative
//! ones fail with the error they are named after.

use dcfg_trace::read::{Event, ReadOptions, Reader, Trace};
use dcfg_trace::{DecodeErrorKind, Error, SequenceErrorKind, decode_all};

use crate::testdata;

fn chunks(name: &str) -> Vec<Result<Vec<u64>, Error>> {
    let bytes = testdata(name);
    let t = Trace::parse(&bytes, ReadOptions::default()).unwrap();
    t.processes
        .iter()
        .flat_map(|p| &p.threads)
        .flat_map(|t| &t.chunks)
        .map(|c| c.decode())
        .collect()
}

#[test]
fn spec_examples() {
    // Section 3.5 example 1 ("w" = 110000: bits 1, 10) and example 2 ("A": bit 0, then the
    // zero-bit code of 124); "<a>" starts with 'b' = 011011 and "<b>" with 'K' = 001010,
    // both a 0 bit first: 123, 124, 456.
    let got: Vec<Vec<u64>> = chunks("spec.trace.json")
        .into_iter()
        .map(Result::unwrap)
        .collect();
    assert_eq!(
        got,
        [
            vec![123, 125, 542, 549],
            vec![123, 124, 456],
            vec![123, 124, 456],
            vec![123, 124, 456]
        ]
    );
}

#[test]
fn basic_decodes_to_the_walk_it_was_made_from() {
    let cfg = dcfg_trace::synth::Cfg::new(40, 1);
    assert_eq!(
        decode_all(&testdata("basic.trace.json")).unwrap(),
        [cfg.walk(400, 2)]
    );
    let cfg2 = dcfg_trace::synth::Cfg::new(25, 3);
    assert_eq!(
        decode_all(&testdata("multi.trace.json")).unwrap(),
        [cfg.walk(150, 4), cfg.walk(90, 5), cfg2.walk(120, 6)]
    );
}

#[test]
fn compressed_uses_every_scheme() {
    let text = String::from_utf8(testdata("compressed.trace.json")).unwrap();
    assert!(text.contains("(") && text.contains("<") && text.contains("\"STRING_DICTIONARY\""));
    let mut want = Vec::new();
    for i in 0..300u64 {
        want.extend([1, 2, 3, 4, 2, 3, 4, 2, 3, 4, 5]);
        want.extend([6, 7 + (i / 7) % 3, 8]);
    }
    want.push(9);
    assert_eq!(decode_all(text.as_bytes()).unwrap(), [want]);
}

#[test]
fn tolerant_dialect() {
    // Hex strings, unknown keys and columns, whitespace and an escape in sequences, a short
    // row with EDGE_COUNT 0, a thread with no chunks. Chunk 0: "gA" + <k>="AB" = 100000
    // 000000 000000 000001: 1 →1 2 →"" 1 →0 1 →0 1 →0 1 (6 edges).
    let bytes = testdata("tolerant.trace.json");
    let t = Trace::parse(&bytes, ReadOptions::default()).unwrap();
    assert_eq!((t.major, t.minor), (Some(1), Some(0)));
    assert_eq!(t.processes[0].process.pid, 16);
    let th = &t.processes[0].threads;
    assert_eq!(
        th.iter()
            .map(|t| (t.thread, t.chunks.len()))
            .collect::<Vec<_>>(),
        [(0, 4), (3, 0)]
    );
    let got: Vec<Vec<u64>> = th[0].chunks.iter().map(|c| c.decode().unwrap()).collect();
    assert_eq!(
        got,
        [vec![1, 2, 1, 1, 1, 1], vec![], vec![2], vec![1, 2, 1]]
    );
    assert!(t.thread(16, 1).is_none(), "thread 1 was not traced");
}

#[test]
fn bombs_cost_nothing() {
    let t0 = std::time::Instant::now();
    let got: Vec<Vec<u64>> = chunks("bomb.trace.json")
        .into_iter()
        .map(Result::unwrap)
        .collect();
    assert_eq!(got, [vec![1; 6], vec![1; 6]]);
    // Microseconds when bounded; an expanded bomb would not end: a loaded machine has room.
    assert!(t0.elapsed().as_secs() < 30);
}

#[test]
fn gaps_are_warnings() {
    let bytes = testdata("gap.trace.json");
    let t = Trace::parse(&bytes, ReadOptions::default()).unwrap();
    let gaps = t.processes[0].threads[0].chain_gaps();
    assert_eq!(gaps.len(), 2, "{gaps:?}");
    assert_eq!(gaps[0].chunk, 2);
    assert_eq!(gaps[0].found, gaps[0].expected + 1000);
    assert!(chunks("gap.trace.json").iter().all(Result::is_ok));
}

fn parse_err(name: &str) -> Error {
    let bytes = testdata(name);
    match Trace::parse(&bytes, ReadOptions::default()) {
        Err(e) => e,
        Ok(_) => chunks(name)
            .into_iter()
            .find_map(Result::err)
            .unwrap_or_else(|| panic!("{name} has no error")),
    }
}

#[test]
fn negative_fixtures_fail_as_named() {
    let check = |name: &str, ok: &dyn Fn(&Error) -> bool, text: &str| {
        let e = parse_err(&format!("err-{name}.trace.json"));
        assert!(ok(&e), "{name}: {e:?}");
        let msg = e.to_string();
        assert!(msg.contains(text), "{name}: {msg}");
        assert!(
            msg.rsplit_once(" at offset 0x")
                .is_some_and(|(_, h)| u64::from_str_radix(h, 16).is_ok()),
            "{msg}"
        );
        // The same offset, for programs, through trace_core::Located.
        let at = trace_core::Located::offset(&e).unwrap();
        assert_eq!(e.offset(), Some(at));
        assert!(msg.ends_with(&format!(" at offset {at}")), "{msg}");
    };
    check(
        "cycle",
        &|e| matches!(e, Error::DictionaryCycle { .. }),
        "<a> -> <b> -> <c> -> <a>",
    );
    check(
        "count-overflow",
        &|e| {
            matches!(
                e,
                Error::Sequence {
                    kind: SequenceErrorKind::CountOverflow,
                    position: 1,
                    ..
                }
            )
        },
        "process 1000 thread 0 chunk 0",
    );
    check(
        "bad-char",
        &|e| {
            matches!(
                e,
                Error::Sequence {
                    kind: SequenceErrorKind::BadCharacter(b'/'),
                    position: 2,
                    ..
                }
            )
        },
        "bad character",
    );
    check(
        "unbalanced",
        &|e| {
            matches!(
                e,
                Error::Sequence {
                    kind: SequenceErrorKind::UnclosedRepeat,
                    position: 1,
                    ..
                }
            )
        },
        "unbalanced",
    );
    check(
        "missing-star",
        &|e| {
            matches!(
                e,
                Error::Sequence {
                    kind: SequenceErrorKind::MissingStar,
                    ..
                }
            )
        },
        "`*`",
    );
    check(
        "unknown-key",
        &|e| {
            matches!(
                e,
                Error::Sequence {
                    kind: SequenceErrorKind::UnknownKey(_),
                    position: 2,
                    ..
                }
            )
        },
        "\"zz\"",
    );
    check(
        "unknown-transition",
        &|e| {
            matches!(
                e,
                Error::Decode {
                    kind: DecodeErrorKind::NoTransition { edge: 1, .. },
                    bit: 0,
                    ..
                }
            )
        },
        "no transition from edge 1",
    );
    check(
        "not-prefix-free",
        &|e| matches!(e, Error::Codes { edge: 1, .. }),
        "\"0\" and \"01\"",
    );
    check(
        "empty-code",
        &|e| matches!(e, Error::Codes { edge: 1, .. }),
        "\"\" and \"1\"",
    );
    check(
        "overshoot",
        &|e| {
            matches!(
                e,
                Error::Decode {
                    kind: DecodeErrorKind::Overshoot { .. },
                    ..
                }
            )
        },
        "overshoots",
    );
    check(
        "out-of-bits",
        &|e| {
            matches!(
                e,
                Error::Decode {
                    kind: DecodeErrorKind::OutOfBits { edge: 1 },
                    ..
                }
            )
        },
        "ends inside",
    );
    check(
        "no-successor",
        &|e| {
            matches!(
                e,
                Error::Decode {
                    kind: DecodeErrorKind::NoSuccessor { edge: 456 },
                    ..
                }
            )
        },
        "456",
    );
    check(
        "truncated",
        &|e| matches!(e, Error::Syntax { .. }),
        "end of input",
    );
    check("float", &|e| matches!(e, Error::Integer { .. }), "1.5");
}

#[test]
fn lenient_mode_accepts_what_the_notes_allow() {
    let lenient = ReadOptions { lenient: true };
    let bytes = testdata("err-overshoot.trace.json");
    let t = Trace::parse(&bytes, lenient).unwrap();
    assert_eq!(
        t.processes[0].threads[0].chunks[0].decode().unwrap(),
        [123, 125, 542]
    );
    let bytes = testdata("err-empty-code.trace.json");
    assert!(Trace::parse(&bytes, lenient).is_ok());
}

#[test]
fn truncated_file_yields_complete_chunks_first() {
    let full = testdata("basic.trace.json");
    let cut = testdata("err-truncated.trace.json");
    let count = |b: &[u8]| {
        let mut n = 0;
        let mut err = None;
        for ev in Reader::from_slice(b, ReadOptions::default()) {
            match ev {
                Ok(Event::Chunk(c)) => {
                    c.decode().unwrap();
                    n += 1;
                }
                Ok(_) => {}
                Err(e) => err = Some(e),
            }
        }
        (n, err)
    };
    let (all, none) = count(&full);
    assert!(none.is_none());
    let (some, err) = count(&cut);
    assert!(some > 0 && some < all, "{some} of {all}");
    assert!(err.is_some());
    // Fused: nothing after the error.
    let mut r = Reader::from_slice(&cut, ReadOptions::default());
    while let Some(Ok(_)) = r.next() {}
    assert!(r.next().is_none());
}
