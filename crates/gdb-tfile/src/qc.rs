//! Property tests: model → bytes → model, bytes → model → bytes, never panics.

// Test-only generators: small bounded arithmetic on generated sizes.
#![allow(clippy::arithmetic_side_effects, clippy::indexing_slicing)]

use quickcheck::{Arbitrary, Gen, QuickCheck, TestResult};

use crate::error::Error;
use crate::model::*;
use crate::read::{ReadOptions, TraceFile};
use crate::tdesc::Endian;
use crate::write::to_bytes;

fn small<T: Arbitrary>(g: &mut Gen, max: usize) -> Vec<T> {
    let n = usize::arbitrary(g) % (max + 1);
    (0..n).map(|_| T::arbitrary(g)).collect()
}

fn opt<T>(g: &mut Gen, v: impl FnOnce(&mut Gen) -> T) -> Option<T> {
    if bool::arbitrary(g) { Some(v(g)) } else { None }
}

/// Printable ASCII without newline (action strings are kept verbatim).
fn text(g: &mut Gen, max: usize) -> String {
    let n = usize::arbitrary(g) % (max + 1);
    (0..n)
        .map(|_| char::from(b' ' + u8::arbitrary(g) % 95))
        .collect()
}

#[derive(Clone, Debug)]
struct Model(TraceFileData, Endian);

impl Arbitrary for Model {
    fn arbitrary(g: &mut Gen) -> Self {
        let reasons = [
            StopReason::Unknown,
            StopReason::NotRun,
            StopReason::Stop,
            StopReason::BufferFull,
            StopReason::Disconnected,
            StopReason::PassCount,
            StopReason::Error,
        ];
        let reason = *g.choose(&reasons).unwrap_or(&StopReason::Unknown);
        let status = opt(g, |g| Status {
            running: bool::arbitrary(g),
            stop_reason: reason,
            stop_description: if reason.has_description() {
                opt(g, |g| small::<u8>(g, 20))
            } else {
                None
            },
            stopping_tracepoint: u64::arbitrary(g),
            frames: opt(g, u64::arbitrary),
            created: opt(g, u64::arbitrary),
            free: opt(g, u64::arbitrary),
            size: opt(g, u64::arbitrary),
            disconnected: opt(g, u64::arbitrary),
            circular: opt(g, u64::arbitrary),
            start_time: opt(g, u64::arbitrary),
            stop_time: opt(g, u64::arbitrary),
            notes: opt(g, |g| small::<u8>(g, 20)),
            username: opt(g, |g| small::<u8>(g, 20)),
            unknown: (0..usize::arbitrary(g) % 3)
                .map(|i| (format!("xk{i}"), format!("{:x}", u32::arbitrary(g))))
                .collect(),
        });
        let mut tracepoints: Vec<Tracepoint> = Vec::new();
        for _ in 0..usize::arbitrary(g) % 4 {
            let number = u64::from(u16::arbitrary(g));
            let address = u64::arbitrary(g);
            if tracepoints
                .iter()
                .any(|t| t.number == number && t.address == address)
            {
                continue;
            }
            let kinds = [SourceKind::At, SourceKind::Cond, SourceKind::Cmd];
            tracepoints.push(Tracepoint {
                number,
                address,
                defined: true,
                enabled: bool::arbitrary(g),
                step_count: u64::arbitrary(g),
                pass_count: u64::arbitrary(g),
                fast: opt(g, u64::arbitrary),
                is_static: bool::arbitrary(g),
                condition: opt(g, |g| small::<u8>(g, 30)),
                actions: (0..usize::arbitrary(g) % 3).map(|_| text(g, 40)).collect(),
                step_actions: (0..usize::arbitrary(g) % 3).map(|_| text(g, 40)).collect(),
                sources: (0..usize::arbitrary(g) % 4)
                    .map(|_| SourceString {
                        kind: g.choose(&kinds).cloned().unwrap_or(SourceKind::At),
                        text: small::<u8>(g, 30),
                    })
                    .collect(),
                status: small::<(u64, u64)>(g, 2),
            });
        }
        let mut tsvs: Vec<TraceStateVariable> = Vec::new();
        for _ in 0..usize::arbitrary(g) % 4 {
            let number = u64::arbitrary(g);
            if tsvs.iter().any(|t| t.number == number) {
                continue;
            }
            tsvs.push(TraceStateVariable {
                number,
                initial: i64::arbitrary(g),
                builtin: u64::from(bool::arbitrary(g)),
                name: small::<u8>(g, 20),
            });
        }
        let register_size = 1 + u32::from(u8::arbitrary(g) % 64);
        let description = Description {
            register_size: Some(register_size),
            tdesc_lines: (0..usize::arbitrary(g) % 3).map(|_| text(g, 50)).collect(),
            status,
            tsvs,
            tracepoints,
            unknown_lines: (0..usize::arbitrary(g) % 2)
                .map(|_| format!("x{}", text(g, 30)))
                .collect(),
        };
        let frames = (0..usize::arbitrary(g) % 6)
            .map(|_| {
                let mut tp = i16::arbitrary(g);
                if tp == 0 {
                    tp = 1;
                }
                let blocks = (0..usize::arbitrary(g) % 5)
                    .map(|_| match u8::arbitrary(g) % 3 {
                        0 => BlockData::Registers(
                            (0..register_size).map(|_| u8::arbitrary(g)).collect(),
                        ),
                        1 => BlockData::Memory {
                            address: u64::arbitrary(g),
                            data: small::<u8>(g, 40),
                        },
                        _ => BlockData::Tsv {
                            number: i32::arbitrary(g),
                            value: i64::arbitrary(g),
                        },
                    })
                    .collect();
                FrameData {
                    tracepoint: tp,
                    blocks,
                }
            })
            .collect();
        let end = match u8::arbitrary(g) % 3 {
            0 => vec![0; 4],
            1 => vec![0; 6],
            // The shortest terminator GDB accepts; a file without one is an error.
            _ => vec![0; 2],
        };
        let endian = if bool::arbitrary(g) {
            Endian::Big
        } else {
            Endian::Little
        };
        Model(
            TraceFileData {
                description,
                frames,
                end,
            },
            endian,
        )
    }
}

#[test]
fn model_round_trips() {
    fn prop(m: Model) -> TestResult {
        let Model(data, endian) = m;
        let bytes = match to_bytes(&data, endian) {
            Ok(b) => b,
            Err(e) => return TestResult::error(e.to_string()),
        };
        let file = match TraceFile::parse(
            &bytes,
            ReadOptions {
                endian: Some(endian),
            },
        ) {
            Ok(f) => f,
            Err(e) => return TestResult::error(e.to_string()),
        };
        let back = match file.to_data() {
            Ok(d) => d,
            Err(e) => return TestResult::error(e.to_string()),
        };
        if back != data {
            let (a, b) = (&data.description, &back.description);
            let what = if a.status != b.status {
                format!("{:?}\n{:?}", a.status, b.status)
            } else if a.tracepoints != b.tracepoints {
                format!("{:?}\n{:?}", a.tracepoints, b.tracepoints)
            } else if a.tsvs != b.tsvs {
                format!("{:?}\n{:?}", a.tsvs, b.tsvs)
            } else if a != b {
                format!("{a:?}\n{b:?}")
            } else {
                format!(
                    "{:?}\n{:?}\n{:?}\n{:?}",
                    data.frames, back.frames, data.end, back.end
                )
            };
            return TestResult::error(format!("model differs:\n{what}"));
        }
        // And the bytes are canonical: writing the read model again gives the same bytes.
        TestResult::from_bool(to_bytes(&back, endian).ok().as_deref() == Some(&bytes[..]))
    }
    QuickCheck::new()
        .tests(300)
        .quickcheck(prop as fn(Model) -> TestResult);
}

#[test]
fn never_panics_on_arbitrary_bytes() {
    fn prop(data: Vec<u8>, with_desc: bool) -> bool {
        if with_desc {
            crate::fuzz_frames(&data);
        } else {
            crate::fuzz_description(&data);
        }
        true
    }
    QuickCheck::new()
        .tests(2000)
        .quickcheck(prop as fn(Vec<u8>, bool) -> bool);
}

#[test]
fn never_panics_on_mutated_files() {
    // Flip bytes of a valid file: every prefix and mutation must fail cleanly or parse.
    fn prop(m: Model, flips: Vec<(u16, u8)>, cut: u16) -> bool {
        let Ok(mut bytes) = to_bytes(&m.0, m.1) else {
            return true;
        };
        let n = bytes.len();
        for (at, v) in flips {
            if let Some(b) = bytes.get_mut(usize::from(at) % n.max(1)) {
                *b = v;
            }
        }
        bytes.truncate(usize::from(cut) % (n + 1));
        crate::fuzz_frames(&bytes);
        crate::fuzz_description(&bytes);
        true
    }
    QuickCheck::new()
        .tests(500)
        .quickcheck(prop as fn(Model, Vec<(u16, u8)>, u16) -> bool);
}

#[test]
fn memory_view_matches_a_byte_model() {
    // Overlapping M blocks over a small address space: the last block wins per byte.
    fn prop(blocks: Vec<(u8, Vec<u8>)>, start: u8, len: u8) -> bool {
        let frame = FrameData {
            tracepoint: 1,
            blocks: blocks
                .iter()
                .map(|(a, d)| BlockData::Memory {
                    address: 0x1000 + u64::from(*a),
                    data: d.clone(),
                })
                .collect(),
        };
        let mut model: std::collections::HashMap<u64, u8> = std::collections::HashMap::new();
        for (a, d) in &blocks {
            for (i, b) in d.iter().enumerate() {
                model.insert(0x1000 + u64::from(*a) + i as u64, *b);
            }
        }
        let file = TraceFileData {
            description: Description {
                register_size: Some(8),
                ..Description::default()
            },
            frames: vec![frame],
            ..TraceFileData::default()
        };
        let bytes = to_bytes(&file, Endian::Little).unwrap();
        let tf = TraceFile::parse(&bytes, ReadOptions::default()).unwrap();
        let f = tf.frames().next().unwrap().unwrap();
        let at = 0x1000 + u64::from(start);
        let got = f.memory(at, usize::from(len)).unwrap();
        got.iter()
            .enumerate()
            .all(|(i, v)| *v == model.get(&(at + i as u64)).copied())
    }
    QuickCheck::new()
        .tests(500)
        .quickcheck(prop as fn(Vec<(u8, Vec<u8>)>, u8, u8) -> bool);
}

#[test]
fn writer_rejects_fields_that_would_not_read_back() {
    let mut d = TraceFileData::default();
    d.description.register_size = Some(8);
    assert!(to_bytes(&d, Endian::Little).is_ok());
    for bad in [
        "",
        "R 10",
        "status 0",
        "tp T1:2:E:0:0",
        "tsv 1:0:0:",
        "x\ny",
    ] {
        let mut e = d.clone();
        e.description.unknown_lines = vec![bad.to_string()];
        assert!(to_bytes(&e, Endian::Little).is_err(), "{bad:?}");
    }
    let mut e = d.clone();
    e.description.unknown_lines = vec!["tp Q1:2:x".into(), "future 1".into()];
    assert!(to_bytes(&e, Endian::Little).is_ok());
    let mut e = d.clone();
    e.description.status = Some(Status {
        unknown: vec![("a;b".into(), "1".into())],
        ..Status::default()
    });
    assert!(to_bytes(&e, Endian::Little).is_err());
    let mut e = d.clone();
    e.description.register_size = None;
    assert!(to_bytes(&e, Endian::Little).is_err());
    // Without the terminator GDB refuses the frames.
    let mut e = d.clone();
    e.end.clear();
    assert!(matches!(
        to_bytes(&e, Endian::Little),
        Err(crate::write::WriteError::BadEnd)
    ));
    let mut e = d;
    e.frames = vec![FrameData {
        tracepoint: 0,
        blocks: vec![],
    }];
    assert!(to_bytes(&e, Endian::Little).is_err());
}

/// (offset, tracepoint, blocks) of each frame read.
type FrameRows = Vec<(u64, i16, Vec<u8>)>;

/// Every complete frame, then the error, from the slice and the stream reader alike.
fn frames_then_error(bytes: &[u8], endian: Endian) -> (FrameRows, Option<Error>, Option<Error>) {
    let opts = ReadOptions {
        endian: Some(endian),
    };
    let file = TraceFile::parse(bytes, opts).unwrap();
    let mut slice = Vec::new();
    let mut slice_err = None;
    for f in file.frames() {
        match f {
            Ok(f) => slice.push((f.offset.0, f.tracepoint, f.data.to_vec())),
            Err(e) => slice_err = Some(e),
        }
    }
    let mut stream = crate::StreamReader::from_reader(bytes, opts).unwrap();
    let mut streamed = Vec::new();
    let stream_err = loop {
        match stream.next_frame() {
            Ok(Some(f)) => streamed.push((f.offset.0, f.tracepoint, f.data.to_vec())),
            Ok(None) => break None,
            Err(e) => break Some(e),
        }
    };
    assert_eq!(slice, streamed);
    assert!(
        stream.next_frame().unwrap().is_none(),
        "fused after the error"
    );
    (slice, slice_err, stream_err)
}

#[test]
fn missing_terminator_is_an_error_after_every_frame() {
    // A file cut right after its last frame, or one byte into the terminator: both readers
    // yield every frame, then MissingTerminator where the terminator should be (GDB:
    // "Premature end of file while reading trace file").
    fn prop(m: Model, keep: bool) -> TestResult {
        let Model(data, endian) = m;
        let Ok(full) = to_bytes(&data, endian) else {
            return TestResult::discard();
        };
        let at = full.len() - data.end.len();
        let cut = &full[..at + usize::from(keep)];
        let (frames, slice_err, stream_err) = frames_then_error(cut, endian);
        if frames.len() != data.frames.len() {
            return TestResult::error(format!("{} of {} frames", frames.len(), data.frames.len()));
        }
        for e in [slice_err, stream_err] {
            match e {
                Some(Error::MissingTerminator { offset, frames: n })
                    if offset.0 == at as u64 && n == data.frames.len() as u64 => {}
                other => return TestResult::error(format!("{other:?}, expected at {at}")),
            }
        }
        TestResult::passed()
    }
    QuickCheck::new()
        .tests(200)
        .quickcheck(prop as fn(Model, bool) -> TestResult);
}

#[test]
fn missing_terminator_message_and_location() {
    use trace_core::Located;
    let data = crate::testgen::testsuite_basic();
    let full = to_bytes(&data, Endian::Little).unwrap();
    // 146 bytes with a 6-byte end marker: the terminator belongs at 140 = 0x8c.
    let cut = &full[..full.len() - 6];
    let (frames, slice_err, stream_err) = frames_then_error(cut, Endian::Little);
    assert_eq!(frames.len(), 1);
    for e in [slice_err.unwrap(), stream_err.unwrap()] {
        assert_eq!(
            e.to_string(),
            "the trace frames end without the 2-byte zero terminator after 1 complete frames \
             (premature end of file) at offset 0x8c"
        );
        assert_eq!(Located::offset(&e), Some(trace_core::Offset(0x8c)));
        assert_eq!(e.record(), Some(1));
    }
    // The terminator alone is enough; bytes after it are never looked at.
    let (frames, slice_err, stream_err) =
        frames_then_error(&full[..full.len() - 4], Endian::Little);
    assert_eq!(frames.len(), 1);
    assert!(slice_err.is_none() && stream_err.is_none());
    // No frames at all, and no terminator: the error is at the start of the frames.
    let empty = TraceFileData {
        frames: Vec::new(),
        ..data
    };
    let full = to_bytes(&empty, Endian::Little).unwrap();
    let (frames, slice_err, _) = frames_then_error(&full[..full.len() - 6], Endian::Little);
    assert!(frames.is_empty());
    assert!(matches!(
        slice_err,
        Some(Error::MissingTerminator { frames: 0, .. })
    ));
}
