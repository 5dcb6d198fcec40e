//! FULL traces: both record sizes, detection, named fields, overrides, round trips.

use amber_tt6::{Error, FullReader, FullRecordOwned, FullStreamReader, FullWriter, RecordSize};

use super::read;

#[test]
fn fixtures_in_both_sizes() {
    for (name, size) in [
        ("full-1004.full", RecordSize::Packed1004),
        ("full-1008.full", RecordSize::Struct1008),
    ] {
        let data = read(name);
        assert_eq!(data.len(), 4 + 3 * size.bytes());
        let r = FullReader::parse(&data).unwrap();
        assert_eq!(r.record_size(), size, "{name}");
        let recs: Vec<_> = r.records().map(Result::unwrap).collect();
        assert_eq!(recs.len(), 3);
        // Values the xtask generator put in (see xtask/src/formats/amber.rs `full_record`).
        let r1 = &recs[1];
        assert_eq!(r1.pc(), 0x1004);
        assert_eq!(r1.opcode, 0x9061_0010); // stw r3,16(r1): 36<<26 | 3<<21 | 1<<16 | 16
        assert_eq!(r1.thread.r[5].get(), 0x105);
        assert_eq!(r1.thread.cr.get(), 0x2200_0088);
        assert_eq!(r1.thread.lr.get(), 0x1044);
        assert_eq!(r1.thread.ctr.get(), 1);
        assert_eq!(r1.thread.vrsave.get(), 0xFFFF_FFFF);
        assert_eq!(f64::from_bits(r1.float.fpregs[3].get()), 4.0);
        assert_eq!(r1.float.fpscr.get(), 4);
        assert_eq!(r1.vector.save_vr[7][1].get(), 7);
        assert_eq!(r1.vector.save_vr[7][3].get(), 0x7FFF_DEAD);
        assert_eq!(r1.vector.save_vscr[3].get(), 0x0001_0000);
        assert_eq!(r1.vector.save_vrvalid.get(), 0xFFFF_0000);
        assert_eq!(r1.pad, (size == RecordSize::Struct1008).then_some(0));
        // Write back.
        let mut w = FullWriter::new(Vec::new(), size).unwrap();
        for r in &recs {
            w.write(&r.to_owned()).unwrap();
        }
        assert_eq!(w.finish(), data);
    }
}

#[test]
fn wrong_size_override_is_honoured() {
    let data = read("full-1004.full");
    let r = FullReader::with_size(&data, RecordSize::Struct1008).unwrap();
    let recs: Vec<_> = r.records().collect();
    // 3012 bytes = 2 records of 1008 + 996: two records, then a truncation error.
    assert_eq!(recs.len(), 3);
    assert!(matches!(recs[2], Err(Error::Truncated { record: 2, .. })));
}

#[test]
fn detection_when_both_sizes_divide() {
    // 251 records of 1008 bytes = 252 of 1004 (lcm 253008): only PC consistency decides.
    for (size, n) in [
        (RecordSize::Struct1008, 251u32),
        (RecordSize::Packed1004, 252),
    ] {
        let mut w = FullWriter::new(Vec::new(), size).unwrap();
        for k in 0..n {
            let mut r = FullRecordOwned::zeroed(0x3863_0001); // addi: falls through
            r.thread.srr0.set(0x1000 + 4 * k);
            r.thread.r[3].set(0xFFFF_0000 | k);
            w.write(&r).unwrap();
        }
        let data = w.finish();
        assert_eq!(data.len(), 4 + 253_008);
        assert_eq!(RecordSize::detect(&data), size);
    }
}

#[test]
fn negative_full_fixtures() {
    let data = read("err-truncated.full");
    let r = FullReader::parse(&data).unwrap();
    assert_eq!(r.record_size(), RecordSize::Packed1004);
    let v: Vec<_> = r.records().collect();
    assert_eq!(v.len(), 2);
    let e = v[1].as_ref().unwrap_err();
    assert_eq!(e.offset(), Some(trace_core::Offset(0x3f0)));
    let bad = read("err-bad-magic.full");
    let e = FullReader::parse(&bad).unwrap_err();
    assert!(e.to_string().ends_with("at offset 0x0"), "{e}");
    assert!(RecordSize::from_bytes(1000).is_err());
}

/// Everything a reader yields, owned: records with index and offset, or the error's text,
/// offset and record.
type Rows = Vec<Result<(u64, u64, FullRecordOwned), (String, Option<trace_core::Offset>)>>;

fn slice_rows(data: &[u8], size: RecordSize) -> Rows {
    FullReader::with_size(data, size)
        .unwrap()
        .records()
        .map(|r| {
            r.map(|r| (r.index, r.offset.0, r.to_owned()))
                .map_err(|e| (e.to_string(), e.offset()))
        })
        .collect()
}

/// Reads through `FullStreamReader`, `chunk` bytes per `read` call at most.
fn stream_rows(data: &[u8], size: Option<RecordSize>, chunk: usize) -> (RecordSize, Rows) {
    struct Trickle<'a>(&'a [u8], usize);
    impl std::io::Read for Trickle<'_> {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            let n = buf.len().min(self.1).min(self.0.len());
            buf[..n].copy_from_slice(&self.0[..n]);
            self.0 = &self.0[n..];
            Ok(n)
        }
    }
    let mut s = FullStreamReader::from_reader(Trickle(data, chunk.max(1)), size).unwrap();
    let mut rows = Vec::new();
    while let Some(r) = s.next_record() {
        rows.push(
            r.map(|r| (r.index, r.offset.0, r.to_owned()))
                .map_err(|e| (e.to_string(), e.offset())),
        );
    }
    assert!(s.next_record().is_none(), "fused");
    (s.record_size(), rows)
}

#[test]
fn stream_reader_equals_slice_reader_on_the_fixtures() {
    for name in ["full-1004.full", "full-1008.full", "err-truncated.full"] {
        let data = read(name);
        let slice = FullReader::parse(&data).unwrap();
        let size = slice.record_size();
        let expected = slice_rows(&data, size);
        assert!(!expected.is_empty(), "{name}");
        // Detected (the whole file fits in the read-ahead: same answer as the slice reader)
        // and given, in one read or byte by byte.
        for (given, chunk) in [(None, usize::MAX), (Some(size), usize::MAX), (None, 1)] {
            let (got_size, rows) = stream_rows(&data, given, chunk);
            assert_eq!(got_size, size, "{name}");
            assert_eq!(rows, expected, "{name} {given:?} {chunk}");
        }
    }
    let bad = read("err-bad-magic.full");
    let e = FullStreamReader::from_reader(&bad[..], None).unwrap_err();
    assert_eq!(
        e.to_string(),
        FullReader::parse(&bad).unwrap_err().to_string()
    );
    let e = FullStreamReader::from_reader(&[0xa1u8, 0x11][..], None).unwrap_err();
    assert!(matches!(e, Error::Eof(_)), "{e}");
}

#[test]
fn stream_reader_equals_slice_reader_on_generated_traces() {
    // Records whose state words come from `words`, in either size, with a partial last
    // record of `cut` bytes; read in chunks of `chunk` bytes.
    fn prop(words: Vec<u32>, n: u8, packed: bool, cut: u16, chunk: u16) -> bool {
        let size = if packed {
            RecordSize::Packed1004
        } else {
            RecordSize::Struct1008
        };
        let mut it = words.iter().copied().chain(1..).cycle();
        let mut w = FullWriter::new(Vec::new(), size).unwrap();
        for _ in 0..n % 40 {
            let mut r = FullRecordOwned::zeroed(it.next().unwrap());
            let bytes: Vec<u8> = (0..250)
                .flat_map(|_| it.next().unwrap().to_be_bytes())
                .collect();
            r.thread = amber_tt6::raw::ThreadState::from_bytes(&bytes[..160]).unwrap();
            r.float = amber_tt6::raw::FloatState::from_bytes(&bytes[160..424]).unwrap();
            r.vector = amber_tt6::raw::VectorState::from_bytes(&bytes[424..1000]).unwrap();
            if !packed {
                r.pad = it.next().unwrap();
            }
            w.write(&r).unwrap();
        }
        let mut data = w.finish();
        data.extend(std::iter::repeat_n(0x5a, usize::from(cut) % size.bytes()));
        let expected = slice_rows(&data, size);
        let (got, rows) = stream_rows(&data, Some(size), usize::from(chunk));
        // Detection agrees with the slice reader's whenever the whole trace was read ahead.
        let detected = stream_rows(&data, None, usize::MAX).0;
        let detect_ok = data.len() > amber_tt6::limits::FULL_DETECT_BYTES
            || detected == RecordSize::detect(&data);
        got == size && rows == expected && detect_ok
    }
    quickcheck::QuickCheck::new()
        .tests(100)
        .quickcheck(prop as fn(Vec<u32>, u8, bool, u16, u16) -> bool);
}

/// A trace exactly as long as the detection window is read whole: its length decides, as
/// for a slice (this boundary once fell to the consistency rule alone).
#[test]
fn detection_at_the_window_edge_equals_the_slice_reader() {
    for size in [RecordSize::Packed1004, RecordSize::Struct1008] {
        for extra in [-1i64, 0, 1] {
            let mut w = FullWriter::new(Vec::new(), size).unwrap();
            // Zeroed records: every PC is 0, so PC consistency cannot tell the sizes apart.
            let n = (amber_tt6::limits::FULL_DETECT_BYTES - 4) / size.bytes() + 1;
            for _ in 0..n {
                w.write(&FullRecordOwned::zeroed(0x6000_0000)).unwrap();
            }
            let mut data = w.finish();
            let len = (amber_tt6::limits::FULL_DETECT_BYTES as i64 + extra) as usize;
            data.resize(len, 0);
            let detected = stream_rows(&data, None, usize::MAX).0;
            if len <= amber_tt6::limits::FULL_DETECT_BYTES {
                assert_eq!(detected, RecordSize::detect(&data), "{size:?} {len}");
            }
        }
    }
}

#[test]
fn errors_are_located() {
    use trace_core::Located;
    let data = read("err-truncated.full");
    let mut s = FullStreamReader::from_reader(&data[..], None).unwrap();
    assert!(s.next_record().unwrap().is_ok());
    assert_eq!(s.offset(), trace_core::Offset(0x3f0));
    let e = s.next_record().unwrap().unwrap_err();
    assert_eq!(Located::offset(&e), Some(trace_core::Offset(0x3f0)));
    assert_eq!(Located::record(&e), Some(1));
}
