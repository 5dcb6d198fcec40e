//! Test generators (cargo feature `testgen`, not part of the default API): builders of
//! example files, shared by the fixtures (`cargo xtask fixtures`), the benchmarks and the
//! tests: GDB's own testsuite files rebuilt from the notes (§9.1), and
//! deterministic synthetic files shaped like what gdbserver writes on amd64.

use crate::model::{
    BlockData, Description, FrameData, SourceKind, SourceString, Status, StopReason, TraceFileData,
    TraceStateVariable, Tracepoint,
};

/// Address of `write_basic_trace_file` in the rebuilt testsuite files.
pub const BASIC_TP_ADDRESS: u64 = 0x401331;
/// Address of `testglob` (4 bytes, 31415) in the rebuilt basic file.
pub const TESTGLOB: u64 = 0x40402c;
/// Address of `testglob2` (4 bytes, 271828, collected as 1 + 3 bytes).
pub const TESTGLOB2: u64 = 0x404030;

fn testsuite_description(status: Status) -> Description {
    Description {
        register_size: Some(0x1f4),
        status: Some(status),
        tracepoints: vec![Tracepoint {
            number: 1,
            address: BASIC_TP_ADDRESS,
            defined: true,
            enabled: true,
            ..Tracepoint::default()
        }],
        ..Description::default()
    }
}

/// GDB's `gdb.trace/tfile.c` basic file: `R 1f4`, an old-style `tstop` status, one
/// tracepoint, one frame of three `M` blocks, and a 6-byte end marker (146 bytes).
#[must_use]
pub fn testsuite_basic() -> TraceFileData {
    let status = Status {
        stop_reason: StopReason::Stop,
        frames: Some(1),
        created: Some(1),
        free: Some(0x100),
        size: Some(0x1000),
        ..Status::default()
    };
    let glob2 = 271_828u32.to_le_bytes();
    TraceFileData {
        description: testsuite_description(status),
        frames: vec![FrameData {
            tracepoint: 1,
            blocks: vec![
                BlockData::Memory {
                    address: TESTGLOB,
                    data: 31415u32.to_le_bytes().to_vec(),
                },
                BlockData::Memory {
                    address: TESTGLOB2,
                    data: glob2.get(..1).unwrap_or_default().to_vec(),
                },
                BlockData::Memory {
                    address: TESTGLOB2.wrapping_add(1),
                    data: glob2.get(1..).unwrap_or_default().to_vec(),
                },
            ],
        }],
        end: vec![0; 6],
    }
}

/// GDB's `gdb.trace/tfile.c` error file: stopped by the error "made-up error" at
/// tracepoint 1, no frames, a 6-byte end marker (127 bytes).
#[must_use]
pub fn testsuite_error() -> TraceFileData {
    let status = Status {
        stop_reason: StopReason::Error,
        stop_description: Some(b"made-up error".to_vec()),
        stopping_tracepoint: 1,
        frames: Some(0),
        created: Some(0),
        free: Some(0x100),
        size: Some(0x1000),
        ..Status::default()
    };
    TraceFileData {
        description: testsuite_description(status),
        frames: Vec::new(),
        end: vec![0; 6],
    }
}

/// An amd64-like target description: the 24 core registers, x87, SSE and the Linux
/// extras, in the shape gdbserver sends (`regnum` on every register). Its block size is
/// [`AMD64_REGISTER_SIZE`].
#[must_use]
pub fn amd64_tdesc_xml() -> String {
    let mut regs: Vec<(String, u32, &str)> = Vec::new();
    for r in [
        "rax", "rbx", "rcx", "rdx", "rsi", "rdi", "rbp", "rsp", "r8", "r9", "r10", "r11", "r12",
        "r13", "r14", "r15",
    ] {
        regs.push((r.into(), 64, "int64"));
    }
    regs.push(("rip".into(), 64, "code_ptr"));
    regs.push(("eflags".into(), 32, "i386_eflags"));
    for r in ["cs", "ss", "ds", "es", "fs", "gs"] {
        regs.push((r.into(), 32, "int32"));
    }
    for i in 0..8 {
        regs.push((format!("st{i}"), 80, "i387_ext"));
    }
    for r in [
        "fctrl", "fstat", "ftag", "fiseg", "fioff", "foseg", "fooff", "fop",
    ] {
        regs.push((r.into(), 32, "int"));
    }
    for i in 0..16 {
        regs.push((format!("xmm{i}"), 128, "vec128"));
    }
    regs.push(("mxcsr".into(), 32, "i386_mxcsr"));
    regs.push(("orig_rax".into(), 64, "int"));
    regs.push(("fs_base".into(), 64, "int"));
    regs.push(("gs_base".into(), 64, "int"));
    let mut xml = String::from(
        "\n<!DOCTYPE target SYSTEM \"gdb-target.dtd\">\n<target>\n  <architecture>i386:x86-64</architecture>\n  <osabi>GNU/Linux</osabi>\n  <feature name=\"org.gnu.gdb.i386.core\">\n",
    );
    for (i, (name, bits, ty)) in regs.iter().enumerate() {
        xml.push_str(&format!(
            "    <reg name=\"{name}\" bitsize=\"{bits}\" type=\"{ty}\" regnum=\"{i}\"/>\n"
        ));
    }
    xml.push_str("  </feature>\n</target>\n");
    xml
}

/// Block size of [`amd64_tdesc_xml`]: 16·8 + 8 + 7·4 + 8·10 + 8·4 + 16·16 + 4 + 3·8.
pub const AMD64_REGISTER_SIZE: u32 = 560;

/// Offset of `rip` in an [`amd64_tdesc_xml`] register block.
pub const AMD64_RIP_OFFSET: usize = 128;

/// The deterministic generator of the samples (SplitMix64, from trace-core).
pub use trace_core::rng::SplitMix64 as SplitMix;

/// The description of a synthetic amd64 session: two tracepoints (one collecting
/// registers, memory and a TSV; one with a condition and while-stepping), three TSVs, a
/// `tstop` status.
#[must_use]
pub fn amd64_description(frames: u64) -> Description {
    let mut d = Description {
        register_size: Some(AMD64_REGISTER_SIZE),
        status: Some(Status {
            stop_reason: StopReason::Stop,
            stop_description: Some(b"done-tracing".to_vec()),
            frames: Some(frames),
            created: Some(frames),
            free: Some(0x321adf0),
            size: Some(0x400_0000),
            start_time: Some(0x14ae06e9),
            stop_time: Some(0x14b66eda),
            notes: Some(b"first-notes".to_vec()),
            username: Some(b"alice".to_vec()),
            ..Status::default()
        }),
        tsvs: vec![
            TraceStateVariable {
                number: 1,
                initial: 0,
                builtin: 1,
                name: b"trace_timestamp".to_vec(),
            },
            TraceStateVariable {
                number: 2,
                initial: 0,
                builtin: 0,
                name: b"hits".to_vec(),
            },
            TraceStateVariable {
                number: 3,
                initial: -5,
                builtin: 0,
                name: b"neg".to_vec(),
            },
        ],
        tracepoints: vec![
            Tracepoint {
                number: 3,
                address: 0x40118b,
                defined: true,
                enabled: true,
                step_count: 3,
                condition: Some(vec![0x26, 0x00, 0x06, 0x22, 0x10, 0x02, 0x27]),
                actions: vec!["R010080".into()],
                step_actions: vec!["R010000".into()],
                sources: vec![
                    SourceString {
                        kind: SourceKind::At,
                        text: b"cond_fn".to_vec(),
                    },
                    SourceString {
                        kind: SourceKind::Cond,
                        text: b"i % 100 == 7".to_vec(),
                    },
                    SourceString {
                        kind: SourceKind::Cmd,
                        text: b"collect $rip, $rsp".to_vec(),
                    },
                    SourceString {
                        kind: SourceKind::Cmd,
                        text: b"while-stepping 3".to_vec(),
                    },
                    SourceString {
                        kind: SourceKind::Cmd,
                        text: b"collect $rip".to_vec(),
                    },
                    SourceString {
                        kind: SourceKind::Cmd,
                        text: b"end".to_vec(),
                    },
                ],
                status: vec![(0x12, 0x8730204)],
                ..Tracepoint::default()
            },
            Tracepoint {
                number: 2,
                address: 0x401134,
                defined: true,
                enabled: true,
                actions: vec![
                    "R0fffffffffffffffffffffffffffffffffffff".into(),
                    "M-1,404040,4".into(),
                    "M-1,404060,48".into(),
                    "X0000000C,2c000222010216402d000227".into(),
                ],
                sources: vec![
                    SourceString {
                        kind: SourceKind::At,
                        text: b"traceme".to_vec(),
                    },
                    SourceString {
                        kind: SourceKind::Cmd,
                        text: b"collect $regs".to_vec(),
                    },
                ],
                status: vec![(0x1200, 0x3033600)],
                ..Tracepoint::default()
            },
        ],
        ..Description::default()
    };
    d.set_tdesc_xml(&amd64_tdesc_xml());
    d
}

/// Frame `i` of a synthetic amd64 session: mostly tracepoint 2 (registers, two memory
/// blocks, one TSV), sometimes tracepoint 3 (registers only, stepping).
pub fn amd64_frame(i: u64, rng: &mut SplitMix) -> FrameData {
    let mut regs = vec![0u8; AMD64_REGISTER_SIZE as usize];
    for chunk in regs.chunks_mut(8) {
        let v = rng.next_u64().to_le_bytes();
        let n = chunk.len();
        chunk.copy_from_slice(v.get(..n).unwrap_or_default());
    }
    let stepping = i % 16 == 15;
    let rip: u64 = if stepping {
        0x40118b_u64.wrapping_add((i % 4).wrapping_mul(4))
    } else {
        0x401134
    };
    if let Some(dst) = regs.get_mut(AMD64_RIP_OFFSET..AMD64_RIP_OFFSET + 8) {
        dst.copy_from_slice(&rip.to_le_bytes());
    }
    if stepping {
        return FrameData {
            tracepoint: 3,
            blocks: vec![BlockData::Registers(regs)],
        };
    }
    let glob = ((i.wrapping_mul(3)) as u32).to_le_bytes().to_vec();
    let mut buf = vec![0u8; 0x48];
    for (j, b) in buf.iter_mut().enumerate() {
        *b = (i as u8).wrapping_add(j as u8);
    }
    FrameData {
        tracepoint: 2,
        blocks: vec![
            BlockData::Registers(regs),
            BlockData::Memory {
                address: 0x404040,
                data: glob,
            },
            BlockData::Memory {
                address: 0x404060,
                data: buf,
            },
            BlockData::Tsv {
                number: 2,
                value: (i as i64).wrapping_add(1),
            },
        ],
    }
}

/// A whole synthetic amd64 file of `frames` frames.
#[must_use]
pub fn amd64_file(frames: u64, seed: u64) -> TraceFileData {
    let mut rng = SplitMix::new(seed);
    TraceFileData {
        description: amd64_description(frames),
        frames: (0..frames).map(|i| amd64_frame(i, &mut rng)).collect(),
        end: crate::raw::GDB_TERMINATOR.to_vec(),
    }
}

/// The bytes of a synthetic amd64 file of about `bytes` bytes, written frame by frame
/// without building the whole model (for large benchmark inputs).
#[must_use]
pub fn amd64_bytes(bytes: u64, seed: u64) -> Vec<u8> {
    let mut rng = SplitMix::new(seed);
    let mut out = Vec::new();
    // The frame count in the status is not known in advance; GDB never checks it.
    let _ = crate::write::write_description(&amd64_description(0), &mut out);
    let mut i = 0u64;
    while (out.len() as u64) < bytes {
        let f = amd64_frame(i, &mut rng);
        let _ =
            crate::write::write_frame(&f, 0, AMD64_REGISTER_SIZE, crate::Endian::Little, &mut out);
        i = i.wrapping_add(1);
    }
    out.extend_from_slice(&crate::raw::GDB_TERMINATOR);
    out
}

/// A small big-endian target description (architecture `s390:64-bit`, which decides the
/// byte order): `pswm`, `pswa` and four 64-bit general registers (48 bytes).
pub const S390_TDESC: &str = "<target>\n  <architecture>s390:64-bit</architecture>\n  <feature name=\"org.gnu.gdb.s390.core\">\n    <reg name=\"pswm\" bitsize=\"64\" type=\"uint64\"/>\n    <reg name=\"pswa\" bitsize=\"64\" type=\"code_ptr\"/>\n    <reg name=\"r0\" bitsize=\"64\" type=\"uint64\"/>\n    <reg name=\"r1\" bitsize=\"64\" type=\"uint64\"/>\n    <reg name=\"r2\" bitsize=\"64\" type=\"uint64\"/>\n    <reg name=\"r3\" bitsize=\"64\" type=\"uint64\"/>\n  </feature>\n</target>\n";

/// A big-endian file: [`S390_TDESC`], three frames with registers, memory and a TSV.
#[must_use]
pub fn s390_file() -> TraceFileData {
    let mut description = Description {
        register_size: Some(48),
        status: Some(Status {
            stop_reason: StopReason::PassCount,
            stopping_tracepoint: 1,
            frames: Some(3),
            created: Some(3),
            notes: Some(Vec::new()),
            username: Some(Vec::new()),
            ..Status::default()
        }),
        tsvs: vec![TraceStateVariable {
            number: 1,
            initial: 0,
            builtin: 0,
            name: b"count".to_vec(),
        }],
        tracepoints: vec![Tracepoint {
            number: 1,
            address: 0x1000_0400,
            defined: true,
            enabled: true,
            pass_count: 3,
            actions: vec!["R0f".into(), "M-1,20000,8".into()],
            sources: vec![SourceString {
                kind: SourceKind::At,
                text: b"*0x10000400".to_vec(),
            }],
            status: vec![(3, 0x180)],
            ..Tracepoint::default()
        }],
        ..Description::default()
    };
    description.set_tdesc_xml(S390_TDESC);
    let frames = (0..3u64)
        .map(|i| {
            let mut regs = Vec::new();
            for v in [
                0x0705_0000_8000_0000u64,
                0x1000_0400,
                i,
                i.wrapping_mul(2),
                0xffff_ffff,
                0x1122_3344_5566_7788,
            ] {
                regs.extend_from_slice(&v.to_be_bytes());
            }
            FrameData {
                tracepoint: 1,
                blocks: vec![
                    BlockData::Registers(regs),
                    BlockData::Memory {
                        address: 0x20000,
                        data: i.wrapping_add(0x0102_0304_0506_0708).to_be_bytes().to_vec(),
                    },
                    BlockData::Tsv {
                        number: 1,
                        value: (i as i64).wrapping_add(1),
                    },
                ],
            }
        })
        .collect();
    TraceFileData {
        description,
        frames,
        end: crate::raw::GDB_TERMINATOR.to_vec(),
    }
}
