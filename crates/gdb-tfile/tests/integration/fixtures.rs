//! The committed fixtures (`cargo xtask fixtures` makes them with the writer): positive
//! ones read and round-trip byte for byte; negative ones fail with the expected error at
//! the expected offset (offsets derived by hand from the layouts in the notes).

use std::path::PathBuf;

use gdb_tfile::{Block, Endian, Error, FrameIndex, ReadOptions, StopReason, TraceFile, write};
use trace_core::Offset;

fn fixture(name: &str) -> Vec<u8> {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../testdata/gdb-tfile")
        .join(name);
    std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

const POSITIVE: &[&str] = &[
    "tfile-basic.tf",
    "tfile-error.tf",
    "amd64.tf",
    "s390-big-endian.tf",
    "no-tdesc.tf",
    "quirks.tf",
];

#[test]
fn positive_fixtures_round_trip() {
    for name in POSITIVE {
        let bytes = fixture(name);
        let file = TraceFile::parse(&bytes, ReadOptions::default()).unwrap();
        let data = file.to_data().unwrap_or_else(|e| panic!("{name}: {e}"));
        let again = write::to_bytes(&data, file.layout().endian).unwrap();
        assert!(again == bytes, "{name}: read + write changed the bytes");
    }
}

#[test]
fn gdb_testsuite_basic_file() {
    // tfile.c's basic file, 146 bytes as in the notes §9.1.
    let bytes = fixture("tfile-basic.tf");
    assert_eq!(bytes.len(), 146);
    let file = TraceFile::parse(&bytes, ReadOptions::default()).unwrap();
    let d = file.description();
    assert_eq!(d.register_size, Some(500));
    let st = d.status.as_ref().unwrap();
    assert_eq!(st.stop_reason, StopReason::Stop);
    assert_eq!(st.stop_description, None, "old-style tstop:0");
    assert_eq!((st.free, st.size), (Some(256), Some(4096)));
    assert_eq!(d.tracepoints.len(), 1);
    assert_eq!(d.tracepoints[0].address, 0x401331);
    let frames: Vec<_> = file.frames().map(Result::unwrap).collect();
    assert_eq!(frames.len(), 1);
    let f = frames[0];
    // 8 header + "R 1f4\n" (6) + status line (59) + tp line (19) + "\n" = 93.
    assert_eq!(f.offset, Offset(93));
    assert_eq!(f.data.len(), 41);
    let blocks: Vec<_> = f.blocks().map(Result::unwrap).collect();
    assert_eq!(blocks.len(), 3);
    assert!(matches!(
        blocks[1],
        Block::Memory {
            offset: Offset(114),
            address: 0x404030,
            data: [0xd4]
        }
    ));
    let glob: Vec<u8> = f
        .memory(0x40402c, 4)
        .unwrap()
        .into_iter()
        .map(Option::unwrap)
        .collect();
    assert_eq!(glob, 31415u32.to_le_bytes());
    let glob2: Vec<u8> = f
        .memory(0x404030, 4)
        .unwrap()
        .into_iter()
        .map(Option::unwrap)
        .collect();
    assert_eq!(glob2, 271_828u32.to_le_bytes());
    assert_eq!(
        f.memory(0x404034, 2).unwrap(),
        [None, None],
        "nonconstglob is unavailable"
    );
    assert_eq!(f.registers().unwrap(), None);
    assert_eq!(file.tdesc(), None);
}

#[test]
fn gdb_testsuite_error_file() {
    let bytes = fixture("tfile-error.tf");
    assert_eq!(bytes.len(), 127);
    let file = TraceFile::parse(&bytes, ReadOptions::default()).unwrap();
    let st = file.description().status.clone().unwrap();
    assert_eq!(st.stop_reason, StopReason::Error);
    assert_eq!(st.stop_description.as_deref(), Some(&b"made-up error"[..]));
    assert_eq!(st.stopping_tracepoint, 1);
    assert_eq!(file.frames().count(), 0);
    assert!(
        file.warnings()
            .iter()
            .any(|w| w.message.contains("No traceframes"))
    );
}

#[test]
fn big_endian_from_the_architecture() {
    let bytes = fixture("s390-big-endian.tf");
    let file = TraceFile::parse(&bytes, ReadOptions::default()).unwrap();
    assert_eq!(file.layout().endian, Endian::Big);
    let td = file.tdesc().unwrap();
    let f = file.frames().nth(2).unwrap().unwrap();
    assert_eq!(
        f.register(td, "pswa").unwrap().unwrap().as_u64(),
        Some(0x1000_0400)
    );
    assert_eq!(f.register(td, "r1").unwrap().unwrap().as_u64(), Some(4));
    assert_eq!(f.tsvs().unwrap(), [(1, 3)]);
    // Read as little-endian, the frame sizes are byte-swapped and the file is "truncated".
    let le = TraceFile::parse(
        &bytes,
        ReadOptions {
            endian: Some(Endian::Little),
        },
    )
    .unwrap();
    assert!(matches!(
        le.frames().next(),
        Some(Err(Error::TruncatedFrame { .. }))
    ));
}

#[test]
fn quirks_are_handled() {
    let bytes = fixture("quirks.tf");
    let file = TraceFile::parse(&bytes, ReadOptions::default()).unwrap();
    let d = file.description();
    let t5 = &d.tracepoints[0];
    assert_eq!((t5.number, t5.fast), (5, Some(0)));
    assert_eq!(t5.hits(), 0x5000, "GDB reads gdbserver's decimal as hex");
    assert_eq!(t5.hits_decimal(), Some(5000));
    assert_eq!(t5.usage_decimal(), Some(14_540_000));
    let st = d.status.as_ref().unwrap();
    assert_eq!(st.username.as_deref(), Some(&b""[..]));
    assert_eq!(st.stop_description.as_deref(), Some(&b""[..]));
    assert_eq!(st.unknown, [("tfuture".to_string(), "1f".to_string())]);
    assert_eq!(d.unknown_lines, ["future-line 1 2 3"]);
    assert!(file.warnings().iter().any(|w| {
        w.message
            .contains("Ignoring trace file definition \"future-line")
    }));
    let last = file.frames().last().unwrap().unwrap();
    assert_eq!(last.registers().unwrap(), None);
    // Overlapping M blocks: the last one wins.
    let m: Vec<u8> = last
        .memory(0x404040, 6)
        .unwrap()
        .into_iter()
        .map(Option::unwrap)
        .collect();
    assert_eq!(m, [1, 2, 0xaa, 0xbb, 5, 6]);
    assert_eq!(last.tsvs().unwrap(), [(4, 101)]);
    let mut it = file.frames();
    assert_eq!(it.by_ref().count(), 7);
    assert_eq!(it.trailer().unwrap(), b"\0\0\0\0trailing bytes GDB ignores");
}

#[test]
fn no_terminator_is_an_error_after_the_frames() {
    // GDB: "Premature end of file while reading trace file" when it scans past the last
    // frame. Both readers give the two frames, then the error where the terminator belongs.
    let bytes = fixture("err-no-terminator.tf");
    let file = TraceFile::parse(&bytes, ReadOptions::default()).unwrap();
    let mut it = file.frames();
    assert!(it.next().unwrap().is_ok());
    assert!(it.next().unwrap().is_ok());
    let e = it.next().unwrap().unwrap_err();
    assert!(
        matches!(e, Error::MissingTerminator { offset, frames: 2 } if offset.0 == bytes.len() as u64),
        "{e}"
    );
    assert!(it.next().is_none());
    assert_eq!(it.trailer(), None);
    let mut s = gdb_tfile::StreamReader::from_reader(&bytes[..], ReadOptions::default()).unwrap();
    assert!(s.next_frame().unwrap().is_some());
    assert!(s.next_frame().unwrap().is_some());
    let e2 = s.next_frame().unwrap_err();
    assert_eq!(e2.to_string(), e.to_string());
    assert_eq!(e2.offset(), e.offset());
    let (idx, err) = FrameIndex::new_partial(&file);
    assert_eq!(idx.len(), 2);
    assert!(matches!(err, Some(Error::MissingTerminator { .. })));
}

#[test]
fn index_and_registers_of_the_amd64_fixture() {
    let bytes = fixture("amd64.tf");
    let file = TraceFile::parse(&bytes, ReadOptions::default()).unwrap();
    let td = file.tdesc().unwrap();
    assert_eq!(td.block_size(), 560);
    let idx = FrameIndex::new(&file).unwrap();
    assert_eq!(idx.len(), 40);
    // Frames 15 and 31 are the stepping frames of tracepoint 3 (samples::amd64_frame).
    assert_eq!(idx.find_tracepoint(3, 0), Some(15));
    assert_eq!(idx.find_tracepoint(3, 16), Some(31));
    assert_eq!(idx.find_pc(0x40118b, 0), Some(15));
    assert_eq!(idx.find_range(0x401100, 0x401140, false, 0), Some(0));
    assert_eq!(idx.find_range(0x401100, 0x401140, true, 0), Some(15));
    assert_eq!(idx.find_collected_pc(td, 0x40118b + 3 * 4, 0), Some(15));
    assert_eq!(idx.counts_by_tracepoint(), [(2, 38), (3, 2)]);
    let f = idx.frame(7).unwrap();
    assert_eq!(
        f.register(td, "rip").unwrap().unwrap().as_u64(),
        Some(0x401134)
    );
    let glob: Vec<u8> = f
        .memory(0x404040, 4)
        .unwrap()
        .into_iter()
        .map(Option::unwrap)
        .collect();
    assert_eq!(glob, 21u32.to_le_bytes());
    assert_eq!(f.tsvs().unwrap(), [(2, 8)]);
    assert!(idx.frame(40).is_none());
}

fn parse_all(bytes: &[u8]) -> Result<usize, Error> {
    let file = TraceFile::parse(bytes, ReadOptions::default())?;
    let mut n = 0;
    for f in file.frames() {
        for b in f?.blocks() {
            b?;
        }
        n += 1;
    }
    Ok(n)
}

#[test]
fn negative_fixtures_fail_with_offsets() {
    let cases: &[(&str, u64, &str)] = &[
        ("err-magic.tf", 0, "not a GDB trace file"),
        ("err-short.tf", 0, "unexpected end of input"),
        ("err-long-line.tf", 14, "longer than GDB's 999-byte limit"),
        ("err-no-rsize.tf", 36, "no register block size"),
        ("err-status.tf", 23, "Malformed trace status"),
        (
            "err-bad-hex.tf",
            41,
            "invalid hex digit 'z' in status username",
        ),
        ("err-unterminated.tf", 41, "no ending empty line"),
        (
            "err-unknown-block.tf",
            114,
            "unknown block type 'S' (0x53) in trace frame 0",
        ),
        (
            "err-block-overrun.tf",
            99,
            "M block of 267 bytes does not fit in the 41 bytes left of frame 0",
        ),
        (
            "err-no-terminator.tf",
            6572,
            "the trace frames end without the 2-byte zero terminator after 2 complete frames",
        ),
    ];
    for (name, offset, msg) in cases {
        let e = parse_all(&fixture(name)).unwrap_err();
        let text = e.to_string();
        assert!(text.contains(msg), "{name}: {text}");
        assert_eq!(e.offset(), Some(Offset(*offset)), "{name}: {text}");
        assert!(
            text.ends_with(&format!("at offset {offset:#x}")),
            "{name}: {text}"
        );
    }
}

#[test]
fn truncated_file_yields_complete_frames_first() {
    let bytes = fixture("err-truncated-frame.tf");
    let file = TraceFile::parse(&bytes, ReadOptions::default()).unwrap();
    let results: Vec<_> = file.frames().collect();
    assert_eq!(results.len(), 40);
    assert!(results[..39].iter().all(Result::is_ok));
    let Err(Error::TruncatedFrame {
        frame,
        needed,
        available,
        ..
    }) = &results[39]
    else {
        panic!("{:?}", results[39]);
    };
    assert_eq!((*frame, *available), (39, 100));
    assert!(*needed > 100);
    let (idx, err) = FrameIndex::new_partial(&file);
    assert_eq!(idx.len(), 39);
    assert!(err.is_some());
}
