//! The public real file `../shared/realdata/x64dbg/d-ornen_DBGLogParser_test1.trace64`.
//!
//! Expected values were derived independently of this crate: the histograms and counts from
//! `specs/notes/x64dbg-notes.md` section 9 / the file's `SOURCES.md`, and the pcs, thread
//! and final rsp with a 25-line Python script that walks the blocks by the published layout
//! and applies the register deltas (`struct.unpack_from`, positions `idx = idx + 1 + p`).
//! The file is never copied into the repository; without it these tests are skipped
//! (unless `TRACEKIT_REQUIRE_REALDATA=1`).

use std::collections::BTreeMap;

use trac_x64dbg::{Arch, Block, Segment, ThreadField, Trace, read_records, write_records};

use crate::common::{check_seek_everywhere, replay_all, root, slice_records, stream_records};

fn real() -> Option<Vec<u8>> {
    let p = root().join("../shared/realdata/x64dbg/d-ornen_DBGLogParser_test1.trace64");
    match std::fs::read(&p) {
        Ok(b) => Some(b),
        Err(_) if std::env::var_os("TRACEKIT_REQUIRE_REALDATA").is_some_and(|v| v == "1") => {
            panic!("{} is missing", p.display())
        }
        Err(_) => {
            eprintln!("skipped: {} is not there", p.display());
            None
        }
    }
}

#[test]
fn header_counts_threads_and_dumps() {
    let Some(data) = real() else { return };
    assert_eq!(data.len(), 8660);
    let trace = Trace::parse(&data).unwrap();
    let h = trace.header();
    assert_eq!(h.arch, Arch::X64);
    assert_eq!(h.hash.as_deref(), Some("0x3A6C6FA546C8A44E"));
    assert_eq!(h.path.as_deref(), Some(r"F:\Factorio\bin\x64\factorio.exe"));
    assert_eq!(trace.first_block_offset().0, 8 + 142);

    let mut regs_hist = BTreeMap::new();
    let mut mem_hist = BTreeMap::new();
    let (mut unchanged, mut changed) = (0, 0);
    let mut with_tid = Vec::new();
    let mut full = Vec::new();
    let mut opcode_lens = std::collections::BTreeSet::new();
    let mut end = 0;
    for b in trace.blocks() {
        let Block::Instruction(ins) = b.unwrap() else {
            panic!("no user blocks in the real file")
        };
        *regs_hist.entry(ins.reg_count()).or_insert(0) += 1;
        *mem_hist.entry(ins.mem_count()).or_insert(0) += 1;
        for m in ins.mem() {
            if m.new.is_some() {
                changed += 1;
            } else {
                unchanged += 1;
            }
        }
        if ins.thread_field() != ThreadField::Absent {
            with_tid.push(ins.index());
        }
        if ins.is_full_dump() {
            full.push(ins.index());
        }
        assert_eq!(ins.thread(), 324);
        opcode_lens.insert(ins.opcode().len());
        end = ins.offset().0 + ins.bytes().len() as u64;
    }
    assert_eq!(end, 8660, "the blocks end exactly at EOF");
    let expect: BTreeMap<usize, i32> = [
        (1, 33),
        (2, 56),
        (3, 34),
        (4, 17),
        (5, 7),
        (13, 1),
        (15, 1),
        (40, 1),
        (41, 1),
        (172, 1),
    ]
    .into();
    assert_eq!(regs_hist, expect);
    assert_eq!(mem_hist, [(0, 79), (1, 62), (2, 11)].into());
    assert_eq!((unchanged, changed), (63, 21));
    assert_eq!(with_tid, [0]);
    assert_eq!(full, [0]);
    assert_eq!(opcode_lens, (1..=9).collect());
}

#[test]
fn register_state() {
    let Some(data) = real() else { return };
    let trace = Trace::parse(&data).unwrap();
    let (all, err) = replay_all(&trace);
    assert!(err.is_none());
    assert_eq!(all.len(), 152);
    assert_eq!(all[0].regs.ip(), 0x1_4135_46b7);
    assert_eq!(all[151].regs.ip(), 0x1_4135_3aa8);
    assert_eq!(all[151].regs.sp(), 0x11_fe38);
    // Layout checks from the notes (section 8): cs/ss, x87 control/tag words, MXCSR.
    let r = &all[0].regs;
    assert_eq!(r.segment(Segment::Cs), 0x33);
    assert_eq!(r.segment(Segment::Ss), 0x2b);
    assert_eq!(r.x87_fpu().control_word, 0x027f);
    assert_eq!(r.x87_fpu().tag_word, 0xffff);
    assert_eq!(r.mxcsr(), 0x1f80);
    for i in 0..8 {
        assert_eq!(r.x87_register(i).st_value, i as i32);
        assert_eq!(r.x87_register(i).tag, 3);
    }
    check_seek_everywhere(&trace);
}

#[test]
fn round_trips_byte_for_byte_and_streams() {
    let Some(data) = real() else { return };
    let (header, records) = read_records(&data).unwrap();
    assert_eq!(write_records(&header, &records).unwrap(), data);
    assert_eq!(slice_records(&data), stream_records(&data, 777));
}
