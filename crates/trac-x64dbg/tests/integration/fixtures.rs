//! The committed fixtures in `testdata/x64dbg/` (made by `cargo xtask fixtures`).

use trac_x64dbg::testgen::{Machine, Options};
use trac_x64dbg::{
    Arch, Block, Error, ReadOptions, ThreadField, ThreadIdMode, Trace, read_records, write_records,
};

use crate::common::{
    Decoded, check_seek_everywhere, replay_all, slice_records, slice_replay, stream_records,
    stream_replay, testdata,
};

const POSITIVE: [&str; 5] = [
    "basic.trace64",
    "basic.trace32",
    "legacy-tid.trace64",
    "legacy-tid.trace32",
    "sessions.trace64",
];

/// The steps the fixture generator fed to the recorder (same options as
/// `xtask/src/formats/x64dbg.rs`), as the reader should decode them.
fn steps(arch: Arch, threads: u32, max_run: u64, seed: u64, n: u64) -> Vec<Decoded> {
    let mut m = Machine::new(Options {
        arch,
        threads,
        max_run,
        seed,
    });
    (0..n)
        .map(|i| {
            let s = m.step();
            Decoded {
                index: i,
                thread: s.thread,
                opcode: s.opcode,
                regs: s.regs,
                mem: s.mem,
            }
        })
        .collect()
}

#[test]
fn canonical_fixtures_round_trip_byte_for_byte() {
    for name in POSITIVE {
        let data = testdata(name);
        let (header, records) = read_records(&data).unwrap();
        assert_eq!(write_records(&header, &records).unwrap(), data, "{name}");
    }
}

#[test]
fn streaming_reader_matches_slice_reader() {
    for name in POSITIVE {
        let data = testdata(name);
        let slice = slice_records(&data);
        assert!(slice.1.is_none(), "{name}: {:?}", slice.1);
        for chunk in [7, 4096, 1 << 20] {
            assert_eq!(
                stream_records(&data, chunk),
                slice,
                "{name}, {chunk}-byte reads"
            );
        }
    }
    for name in ["err-truncated-block.bin", "err-bad-block-type.bin"] {
        let data = testdata(name);
        assert_eq!(stream_records(&data, 5), slice_records(&data), "{name}");
    }
}

/// Streams replay like slices: the state before every instruction and every counter, on
/// every fixture (the negative ones up to their error), whatever the read sizes.
#[test]
fn stream_replay_matches_slice_replay() {
    let negative = ["err-truncated-block.bin", "err-bad-block-type.bin"];
    for name in POSITIVE.iter().chain(&negative) {
        let data = testdata(name);
        for mode in [ThreadIdMode::Recover, ThreadIdMode::Flag] {
            let opts = ReadOptions { thread_ids: mode };
            let slice = slice_replay(&data, opts);
            // Flag mode misreads the legacy files: an error, which streams must meet too.
            if mode == ThreadIdMode::Recover {
                let bad = negative.contains(name);
                assert_eq!(slice.2.is_some(), bad, "{name}: {:?}", slice.2);
            }
            assert!(!slice.0.is_empty(), "{name}");
            for (chunk, by_block) in [(7, true), (4096, false), (1 << 20, true)] {
                let stream = stream_replay(&data, chunk, opts, by_block);
                assert_eq!(stream.1, slice.1, "{name} {mode:?}, {chunk}-byte reads");
                assert_eq!(stream.2, slice.2, "{name} {mode:?}, {chunk}-byte reads");
                assert!(stream.0 == slice.0, "{name} {mode:?}, {chunk}-byte reads");
            }
        }
    }
    // The counters are the ones the files were made with.
    let (d, c, _) = slice_replay(&testdata("sessions.trace64"), ReadOptions::default());
    assert_eq!((d.len(), c.sessions, c.user_blocks), (1000, 2, 2));
    let (_, c, _) = slice_replay(&testdata("legacy-tid.trace64"), ReadOptions::default());
    assert!(c.recovered_thread_ids > 0);
}

#[test]
fn random_access_matches_replay_everywhere() {
    for name in POSITIVE {
        let data = testdata(name);
        check_seek_everywhere(&Trace::parse(&data).unwrap());
    }
}

#[test]
fn cursor_is_the_reference_replay() {
    for name in POSITIVE {
        let data = testdata(name);
        let trace = Trace::parse(&data).unwrap();
        let (replayed, _) = replay_all(&trace);
        let mut cursor = trace.replay();
        let mut states = Vec::new();
        while let Some(ins) = cursor.next_instruction() {
            states.push((ins.unwrap().index(), cursor.regs().clone()));
        }
        assert_eq!(states.len(), replayed.len(), "{name}");
        for ((index, regs), d) in states.iter().zip(&replayed) {
            assert_eq!((*index, regs), (d.index, &d.regs), "{name}");
        }
    }
}

#[test]
fn decoded_states_are_the_generated_ones() {
    for (name, arch, threads, max_run, seed, n) in [
        ("basic.trace64", Arch::X64, 3, 150, 1, 1100),
        ("basic.trace32", Arch::X86, 2, 200, 2, 700),
        ("legacy-tid.trace64", Arch::X64, 3, 6, 3, 600),
        ("legacy-tid.trace32", Arch::X86, 2, 4, 4, 300),
    ] {
        let data = testdata(name);
        let (got, err) = replay_all(&Trace::parse(&data).unwrap());
        assert!(err.is_none(), "{name}: {err:?}");
        let want = steps(arch, threads, max_run, seed, n);
        assert_eq!(got.len(), want.len(), "{name}");
        for (g, w) in got.iter().zip(&want) {
            assert_eq!(g, w, "{name}: instruction {}", w.index);
        }
    }
}

#[test]
fn basic_fixture_has_what_the_quick_start_shows() {
    let data = testdata("basic.trace64");
    let trace = Trace::parse(&data).unwrap();
    let index = trace.build_index().unwrap();
    assert_eq!(index.instructions(), 1100);
    assert_eq!(
        index
            .full_dump_positions()
            .map(|(i, _)| i)
            .collect::<Vec<_>>(),
        [0, 512, 1024]
    );
    let mut threads = std::collections::BTreeSet::new();
    let mut mem = 0;
    for b in trace.blocks() {
        if let Block::Instruction(i) = b.unwrap() {
            threads.insert(i.thread());
            mem += i.mem_count();
            // The fixed writer: flag and bytes together.
            assert_ne!(i.thread_field(), ThreadField::Unflagged);
        }
    }
    assert_eq!(threads.len(), 3);
    assert!(mem > 300, "{mem} memory accesses");
}

#[test]
fn legacy_thread_ids_are_recovered_and_needed() {
    for name in ["legacy-tid.trace64", "legacy-tid.trace32"] {
        let data = testdata(name);
        let trace = Trace::parse(&data).unwrap();
        let mut blocks = trace.blocks();
        let unflagged = blocks
            .by_ref()
            .filter(|b| {
                matches!(b, Ok(Block::Instruction(i)) if i.thread_field() == ThreadField::Unflagged)
            })
            .count();
        assert!(unflagged > 20, "{name}: {unflagged}");
        assert_eq!(blocks.recovered_thread_ids(), unflagged as u64);
        // Trusting the flag alone loses sync: an error or other threads.
        let flag_only = Trace::with_options(
            &data,
            ReadOptions {
                thread_ids: ThreadIdMode::Flag,
            },
        )
        .unwrap();
        let (naive, err) = replay_all(&flag_only);
        let (good, _) = replay_all(&trace);
        assert!(err.is_some() || naive != good, "{name}");
    }
}

#[test]
fn sessions_and_user_blocks() {
    let data = testdata("sessions.trace64");
    let trace = Trace::parse(&data).unwrap();
    let mut replay = trace.replay();
    let mut users = Vec::new();
    let mut session_starts = Vec::new();
    let mut instructions = 0;
    while let Some(b) = replay.next_block() {
        match b.unwrap() {
            Block::Instruction(i) => {
                instructions += 1;
                if i.starts_session() {
                    session_starts.push(i.index());
                }
            }
            Block::User(u) => users.push((u.block_type, u.payload.to_vec(), u.block)),
        }
    }
    assert_eq!(instructions, 1000);
    assert_eq!(session_starts, [300]);
    assert_eq!(replay.counters().sessions, 2);
    assert_eq!(replay.counters().full_dumps, 3);
    assert_eq!(users.len(), 2);
    assert_eq!(users[0].0, 0x81);
    assert_eq!(users[0].1, b"Hello LingMo");
    assert_eq!(
        users[0].2, 300,
        "after the first session's 300 instructions"
    );
    assert_eq!(users[1].0, 0x80);
    // The state of the second session is its own machine's.
    let (got, _) = replay_all(&trace);
    let want = steps(Arch::X64, 2, 120, 6, 700);
    for (g, w) in got[300..].iter().zip(&want) {
        assert_eq!((g.thread, &g.regs, &g.mem), (w.thread, &w.regs, &w.mem));
    }
}

fn first_error(name: &str) -> (usize, Error) {
    let data = testdata(name);
    let trace = match Trace::parse(&data) {
        Ok(t) => t,
        Err(e) => return (0, e),
    };
    let mut n = 0;
    for b in trace.blocks() {
        match b {
            Ok(_) => n += 1,
            Err(e) => return (n, e),
        }
    }
    panic!("{name} has no error")
}

#[test]
fn negative_fixtures_fail_where_expected() {
    type Check = fn(&Error) -> bool;
    let cases: [(&str, usize, Check); 9] = [
        ("err-truncated-header.bin", 0, |e| {
            matches!(e, Error::Eof(_))
        }),
        ("err-huge-header.bin", 0, |e| matches!(e, Error::Limit(_))),
        ("err-bad-version.bin", 0, |e| {
            matches!(e, Error::UnsupportedVersion { .. })
        }),
        ("err-bad-block-type.bin", 4, |e| {
            matches!(e, Error::BadBlockType { found: 0x33, .. })
        }),
        ("err-too-many-registers.bin", 4, |e| {
            matches!(e, Error::TooManyRegisters { found: 173, .. })
        }),
        ("err-register-out-of-range.bin", 4, |e| {
            matches!(e, Error::RegisterOutOfRange { index: 221, .. })
        }),
        ("err-too-many-memory-accesses.bin", 4, |e| {
            matches!(e, Error::TooManyMemoryAccesses { found: 33, .. })
        }),
        ("err-empty-opcode.bin", 4, |e| {
            matches!(e, Error::EmptyOpcode { .. })
        }),
        ("err-truncated-block.bin", 5, |e| {
            matches!(e, Error::TruncatedBlock { block: 5, .. })
        }),
    ];
    for (name, complete, check) in cases {
        let (n, e) = first_error(name);
        assert_eq!(n, complete, "{name}: complete blocks before the error");
        assert!(check(&e), "{name}: {e}");
        let msg = e.to_string();
        let off = e.offset().unwrap().0;
        // Programs read through the trait the offset the message names; block errors name
        // their block, header errors (no block read) none.
        let said = msg.rsplit("at offset 0x").next().unwrap();
        let said = u64::from_str_radix(said, 16).unwrap();
        assert_eq!(
            trace_core::Located::offset(&e),
            Some(trace_core::Offset(said)),
            "{name}"
        );
        let record = (n > 0).then_some(n as u64);
        assert_eq!(trace_core::Located::record(&e), record, "{name}");
        assert!(
            msg.ends_with(&format!("at offset {off:#x}")),
            "{name}: {msg}"
        );
        assert!((off as usize) < testdata(name).len(), "{name}");
    }
}
