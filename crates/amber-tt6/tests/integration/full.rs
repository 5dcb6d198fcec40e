//! FULL traces: both record sizes, detection, named fields, overrides, round trips.

use amber_tt6::{Error, FullReader, FullRecordOwned, FullWriter, RecordSize};

use super::read;

#[test]
fn fixtures_in_both_sizes() {
    for (name, size) in [
        ("full-1004.full", RecordSize::Packed1004),
        ("full-1008.full", RecordSize::Struct1008),
    ] {
        let data = read(name);
        assert_eq!(data.len(), 4 + 3 * size.bytes());
        let r = FullReader::new(&data).unwrap();
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
    let r = FullReader::new(&data).unwrap();
    assert_eq!(r.record_size(), RecordSize::Packed1004);
    let v: Vec<_> = r.records().collect();
    assert_eq!(v.len(), 2);
    let e = v[1].as_ref().unwrap_err();
    assert_eq!(e.offset(), Some(0x3f0));
    let bad = read("err-bad-magic.full");
    let e = FullReader::new(&bad).unwrap_err();
    assert!(e.to_string().ends_with("at offset 0x0"), "{e}");
    assert!(RecordSize::from_bytes(1000).is_err());
}
