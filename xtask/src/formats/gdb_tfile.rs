//! xtask hooks for gdb-tfile: fixtures made by the crate's writer (GDB's testsuite files
//! rebuilt from the notes, generated files, negative files), synthetic amd64 traces shaped
//! like gdbserver's, and the frame-iteration benchmark.

use std::hint::black_box;
use std::sync::Arc;

use gdb_tfile::testgen;
use gdb_tfile::{
    Block, Description, Endian, ReadOptions, SourceKind, SourceString, Status, TraceFile,
    TraceFileData, TraceStateVariable, Tracepoint, write,
};

use super::{FormatTasks, x64dbg_convert};
use crate::bench::{BenchCase, BenchConfig};
use crate::fixtures::Fixtures;

pub const TASKS: FormatTasks = FormatTasks {
    name: "gdb-tfile",
    fixtures: Some(fixtures),
    synth: Some(synth),
    bench: Some(bench),
};

fn bytes(d: &TraceFileData, endian: Endian) -> Vec<u8> {
    write::to_bytes(d, endian).expect("fixture models are valid")
}

/// The quirks of real files: reverse tracepoint order, decimal `V` values, `F0`, empty
/// notes and user name, `tstop::0`, a negative TSV, unknown lines and status keys, a frame
/// without registers, overlapping memory blocks, bytes after the terminator.
fn quirks() -> TraceFileData {
    let mut d = testgen::amd64_file(6, 7);
    let desc: &mut Description = &mut d.description;
    let st: &mut Status = desc.status.as_mut().unwrap();
    st.stop_description = Some(Vec::new());
    st.notes = Some(Vec::new());
    st.username = Some(Vec::new());
    st.disconnected = Some(1);
    st.circular = Some(1);
    st.frames = Some(7);
    st.created = Some(0xc8);
    st.unknown.push(("tfuture".into(), "1f".into()));
    desc.tsvs.push(TraceStateVariable {
        number: 4,
        initial: 100,
        builtin: 0,
        name: b"fcount".to_vec(),
    });
    desc.tracepoints.insert(
        0,
        Tracepoint {
            number: 5,
            address: 0x4011fe,
            defined: true,
            enabled: true,
            fast: Some(0),
            status: vec![(0x5000, 0x14540000)],
            sources: vec![SourceString {
                kind: SourceKind::At,
                text: b"*0x4011fe".to_vec(),
            }],
            ..Tracepoint::default()
        },
    );
    desc.unknown_lines.push("future-line 1 2 3".into());
    d.frames.push(gdb_tfile::FrameData {
        tracepoint: 5,
        blocks: vec![
            gdb_tfile::BlockData::Memory {
                address: 0x404040,
                data: vec![1, 2, 3, 4, 5, 6, 7, 8],
            },
            gdb_tfile::BlockData::Memory {
                address: 0x404042,
                data: vec![0xaa, 0xbb],
            },
            gdb_tfile::BlockData::Tsv {
                number: 4,
                value: -1,
            },
            gdb_tfile::BlockData::Tsv {
                number: 4,
                value: 101,
            },
        ],
    });
    d.end = b"\0\0\0\0trailing bytes GDB ignores".to_vec();
    d
}

fn fixtures(fx: &mut Fixtures) {
    let basic = bytes(&testgen::testsuite_basic(), Endian::Little);
    fx.add("gdb-tfile/tfile-basic.tf", basic.clone());
    fx.add(
        "gdb-tfile/tfile-error.tf",
        bytes(&testgen::testsuite_error(), Endian::Little),
    );
    let amd64 = bytes(&testgen::amd64_file(40, 1), Endian::Little);
    fx.add("gdb-tfile/amd64.tf", amd64.clone());
    fx.add(
        "gdb-tfile/s390-big-endian.tf",
        bytes(&testgen::s390_file(), Endian::Big),
    );
    let mut no_tdesc = testgen::amd64_file(3, 2);
    no_tdesc.description.tdesc_lines.clear();
    fx.add("gdb-tfile/no-tdesc.tf", bytes(&no_tdesc, Endian::Little));
    fx.add("gdb-tfile/quirks.tf", bytes(&quirks(), Endian::Little));

    // Negative fixtures, each named by the error it triggers.
    let mut bad = basic.clone();
    bad[6] = b'1';
    fx.add("gdb-tfile/err-magic.tf", bad);
    fx.add("gdb-tfile/err-short.tf", basic[..5].to_vec());
    let mut long = b"\x7fTRACE0\nR 1f4\n".to_vec();
    long.extend_from_slice(&[b'x'; 1000]);
    long.extend_from_slice(b"\n\n\0\0");
    fx.add("gdb-tfile/err-long-line.tf", long);
    fx.add(
        "gdb-tfile/err-no-rsize.tf",
        b"\x7fTRACE0\nstatus 0;tstop:0;tframes:0\n\n\0\0\0\0".to_vec(),
    );
    fx.add(
        "gdb-tfile/err-status.tf",
        b"\x7fTRACE0\nR 1f4\nstatus 0;tframes\n\n\0\0\0\0".to_vec(),
    );
    fx.add(
        "gdb-tfile/err-bad-hex.tf",
        b"\x7fTRACE0\nR 1f4\nstatus 0;tstop:0;username:7z\n\n\0\0\0\0".to_vec(),
    );
    fx.add(
        "gdb-tfile/err-unterminated.tf",
        b"\x7fTRACE0\nR 1f4\nstatus 0;tstop:0;tframes:0\n".to_vec(),
    );
    // Two frames and no terminator after them (GDB: "Premature end of file while reading
    // trace file"): the writer always ends the frames, so cut its 4 zero bytes off.
    let mut no_end = bytes(&testgen::amd64_file(2, 3), Endian::Little);
    no_end.truncate(no_end.len() - gdb_tfile::raw::GDB_TERMINATOR.len());
    fx.add("gdb-tfile/err-no-terminator.tf", no_end);
    // The amd64 file cut in the middle of its last frame.
    let desc_len = {
        let f = TraceFile::parse(&amd64, ReadOptions::default()).unwrap();
        f.frames().last().unwrap().unwrap().offset.0 as usize
    };
    fx.add(
        "gdb-tfile/err-truncated-frame.tf",
        amd64[..desc_len + 100].to_vec(),
    );
    // The basic file with its second M block's type changed to 'S' (static tracepoint
    // data, which GDB cannot read either).
    let mut unknown = basic.clone();
    let second = basic.len() - 6 - 41 + 15;
    assert_eq!(unknown[second], b'M');
    unknown[second] = b'S';
    fx.add("gdb-tfile/err-unknown-block.tf", unknown);
    // The basic file with its first M block claiming 0x100 bytes.
    let mut overrun = basic;
    let first = overrun.len() - 6 - 41;
    overrun[first + 9] = 0;
    overrun[first + 10] = 1;
    fx.add("gdb-tfile/err-block-overrun.tf", overrun);
}

fn synth(records: u64, seed: u64) -> Vec<u8> {
    bytes(&testgen::amd64_file(records, seed), Endian::Little)
}

/// Parses the file and walks every block of every frame, touching every field.
fn decode(input: &[u8]) -> u64 {
    let file = TraceFile::parse(input, ReadOptions::default()).unwrap();
    let mut frames = 0u64;
    for f in file.frames() {
        let f = f.unwrap();
        black_box((f.tracepoint, f.offset));
        for b in f.blocks() {
            match b.unwrap() {
                Block::Registers { offset, data } => {
                    black_box((offset, data.as_ptr(), data.len()));
                }
                Block::Memory {
                    offset,
                    address,
                    data,
                } => {
                    black_box((offset, address, data.as_ptr(), data.len()));
                }
                Block::Tsv {
                    offset,
                    number,
                    value,
                } => {
                    black_box((offset, number, value));
                }
            }
        }
        frames += 1;
    }
    frames
}

fn bench(config: &BenchConfig) -> Vec<BenchCase> {
    let mut rows = vec![BenchCase {
        name: "gdb-tfile frames+blocks".into(),
        input: Arc::new(testgen::amd64_bytes(config.mib << 20, 1)),
        unit: "frames",
        run: Box::new(decode),
    }];
    // One thread: every instruction becomes a frame.
    rows.extend(x64dbg_convert::rows(
        x64dbg_convert::input(config.mib << 20, 1),
        "x64dbg steps (tfile convert's input)",
        &[(
            "x64dbg -> tfile (convert)",
            "frames",
            x64dbg_convert::to_tfile,
        )],
    ));
    rows
}
