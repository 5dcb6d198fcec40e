//! xtask hooks for Tenet text traces: fixtures written by hand-built register states through
//! the crate's writer (plus hand-typed non-canonical and negative files), the synthetic
//! generator, the reader's benchmark row, and the rows of the x64dbg conversions
//! (`convert --to tenet` and `--to din`, next to the x64dbg stream they read; see
//! `x64dbg_convert`).

use std::sync::Arc;

use tenet_trace::{Arch, Line, MemKind, MemRef, ReadOptions, Reader, Registers, Writer};

use super::{FormatTasks, x64dbg_convert};
use crate::bench::{BenchCase, BenchConfig};
use crate::fixtures::Fixtures;

pub const TASKS: FormatTasks = FormatTasks {
    name: "tenet",
    fixtures: Some(fixtures),
    synth: Some(synth),
    bench: Some(bench),
};

/// AMD64 register indexes (canonical order).
const RSI: usize = 1;
const RBP: usize = 2;
const RSP: usize = 3;
const RBX: usize = 4;
const RAX: usize = 7;
const RIP: usize = 16;

/// `basic.log`: push rbp / mov rbp,rsp / mov rax,[rsp+0x10] / call / ret / pop rbp, as the
/// Pin tracer would write it: each line the registers changed, the pc, then the memory the
/// previous instruction accessed (bytes after it ran).
fn basic() -> Vec<u8> {
    let mut w = Writer::new(Vec::new(), Arch::Amd64);
    w.write_comment(b"# basic: push, mov, load, call, ret, pop (hand-built)")
        .unwrap();
    let line = |changes: &[(usize, u64)]| {
        let mut r = Registers::new(Arch::Amd64);
        for &(i, v) in changes {
            r.set(i, v);
        }
        r
    };
    let m = |kind, addr, data: &'static [u8]| MemRef { kind, addr, data };
    // 0x401000 push rbp: the first line sets every register.
    let mut first = line(&[]);
    for i in 0..17 {
        first.set(i, 0);
    }
    first.set(RBP, 0x1234);
    first.set(RSP, 0x7fff0);
    first.set(RBX, 0xffff_ffff_ffff_ffff);
    first.set(RSI, 0x10);
    first.set(RIP, 0x401000);
    w.write_instruction(&first, []).unwrap();
    // 0x401001 mov rbp, rsp: push wrote rbp at the new rsp.
    let rbp = 0x1234u64.to_le_bytes();
    w.write_instruction(
        &line(&[(RSP, 0x7ffe8), (RIP, 0x401001)]),
        [MemRef {
            kind: MemKind::Write,
            addr: 0x7ffe8,
            data: &rbp,
        }],
    )
    .unwrap();
    // 0x401004 mov rax, [rsp+0x10].
    w.write_instruction(&line(&[(RBP, 0x7ffe8), (RIP, 0x401004)]), [])
        .unwrap();
    // 0x401009 call 0x402000: the load read 0x55.
    w.write_instruction(
        &line(&[(RAX, 0x55), (RIP, 0x401009)]),
        [m(MemKind::Read, 0x7fff8, b"\x55\0\0\0\0\0\0\0")],
    )
    .unwrap();
    // 0x402000 ret: the call pushed the return address 0x40100e.
    w.write_instruction(
        &line(&[(RSP, 0x7ffe0), (RIP, 0x402000)]),
        [m(MemKind::Write, 0x7ffe0, b"\x0e\x10\x40\0\0\0\0\0")],
    )
    .unwrap();
    // 0x40100e pop rbp: ret read the return address.
    w.write_instruction(
        &line(&[(RSP, 0x7ffe8), (RIP, 0x40100e)]),
        [m(MemKind::Read, 0x7ffe0, b"\x0e\x10\x40\0\0\0\0\0")],
    )
    .unwrap();
    // 0x40100f: pop read the saved rbp.
    w.write_instruction(
        &line(&[(RBP, 0x1234), (RSP, 0x7fff0), (RIP, 0x40100f)]),
        [m(MemKind::Read, 0x7ffe8, &[0x34, 0x12, 0, 0, 0, 0, 0, 0])],
    )
    .unwrap();
    w.finish().unwrap()
}

/// Tenet's QEMU tracer's style, x86: uppercase keys, values without `0x`, leading zeros,
/// CRLF, a fork's header comment, a memory item before the registers, `mrw`. Typed by hand
/// (not canonical: read → write changes it).
const QEMU_X86: &[u8] = b"# SO: demo.exe @ 0x00400000\r\n\
EAX=00001A2B,EBX=0,ECX=0,EDX=0,EBP=0012FF80,ESP=0012FF70,ESI=0,EDI=0,EIP=00401000\r\n\
EIP=00401005,mrw=0X0012FF70:2B1A0000\r\n\
Eax=1A2C,eip=401006\r\n";

fn fixtures(fx: &mut Fixtures) {
    let basic = basic();
    fx.add("tenet/basic.log", basic.clone());
    fx.add("tenet/qemu-x86.log", QEMU_X86);
    // Negative fixtures, each with one problem at a known line and column.
    fx.add(
        "tenet/err-unknown-key.log",
        b"rax=0x1,rip=0x401000\nrip=0x401003,rflags=0x246\n".as_slice(),
    );
    // basic.log cut inside the last memory item's bytes: 5 hex digits are left.
    let cut = basic.len() - "00000000000\n".len();
    fx.add("tenet/err-odd-hex.log", basic[..cut].to_vec());
    fx.add(
        "tenet/err-missing-pc.log",
        b"rax=0x1,rip=0x401000\nrax=0x2,mr=0x1000:00\n".as_slice(),
    );
    // 33 register items on one line: 32 fit a Tenet architecture, the 33rd does not.
    let mut many: Vec<String> = (0..32).map(|k| format!("rax={k:#x}")).collect();
    many.push("rip=0x401000".into());
    fx.add(
        "tenet/err-33-registers.log",
        format!("rip=0x400000\n{}\n", many.join(",")).into_bytes(),
    );
    fx.add("tenet/err-empty.log", Vec::new());
}

fn synth(records: u64, seed: u64) -> Vec<u8> {
    tenet_trace::testgen::trace(Arch::Amd64, records, seed)
}

/// Reads every line, touching the registers and the memory items.
fn decode(input: &[u8]) -> u64 {
    let mut r = Reader::parse(input, ReadOptions::default());
    let mut n = 0u64;
    while let Some(l) = r.next_line() {
        if let Line::Instruction(i) = l.unwrap() {
            std::hint::black_box((i.pc(), i.regs.mask()));
            for m in i.mem() {
                std::hint::black_box((m.kind, m.addr, m.data.as_ptr(), m.data.len()));
            }
            n += 1;
        }
    }
    n
}

fn bench(config: &BenchConfig) -> Vec<BenchCase> {
    // About 52 bytes a line in the Pin tracer's shape.
    let lines = (config.mib << 20) / 52;
    let mut rows = vec![BenchCase {
        name: "tenet lines".into(),
        input: Arc::new(synth(lines, 1)),
        unit: "lines",
        run: Box::new(decode),
    }];
    rows.extend(x64dbg_convert::rows(
        x64dbg_convert::input(config.mib << 20, 4),
        "x64dbg steps (convert's input)",
        &[
            (
                "x64dbg -> tenet (convert)",
                "out bytes",
                x64dbg_convert::to_tenet,
            ),
            (
                "x64dbg -> din (convert)",
                "out bytes",
                x64dbg_convert::to_din,
            ),
        ],
    ));
    rows
}
