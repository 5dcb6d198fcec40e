//! xtask hooks for amber: fixtures hand-assembled from PowerPC encodings, a synthetic TT6
//! generator and the TT6/TT6E/FULL benchmark rows.
//!
//! Encodings (IBM bit 0 = MSB; see `specs/notes/amber-tt6-notes.md` §6): D-form
//! `op<<26 | rT<<21 | rA<<16 | d`, X-form `31<<26 | rT<<21 | rA<<16 | rB<<11 | xo<<1 | Rc`,
//! XL-form `19<<26 | BO<<21 | BI<<16 | xo<<1 | LK`, I-form `18<<26 | LI | AA<<1 | LK`,
//! B-form `16<<26 | BO<<21 | BI<<16 | BD | AA<<1 | LK`, DS-form `op<<26 | rT<<21 | rA<<16 | ds
//! | xo`. Each word of the fixtures is built by one of these from the operands written next
//! to it; the words of `example.tt6` are the cross-assembled ones of the notes' §3.

use std::hint::black_box;
use std::sync::Arc;

use amber_tt6::raw::{FloatState, ThreadState, VectorState};
use amber_tt6::{
    Class, Dialect, Escape, FullReader, FullRecordOwned, FullWriter, Instruction, RecordSize,
    SyncKind, Trace, Tt6Reader, Tt6Writer,
};

use super::FormatTasks;
use crate::bench::{BenchCase, BenchConfig};
use crate::fixtures::Fixtures;
use trace_core::rng::SplitMix64 as Rng;

pub const TASKS: FormatTasks = FormatTasks {
    name: "amber",
    fixtures: Some(fixtures),
    synth: Some(synth),
    bench: Some(bench),
};

fn be32(v: u32) -> [u8; 4] {
    v.to_be_bytes()
}

const fn d_form(op: u32, rt: u32, ra: u32, d: u32) -> u32 {
    (op << 26) | (rt << 21) | (ra << 16) | (d & 0xFFFF)
}
const fn x_form(xo: u32, rt: u32, ra: u32, rb: u32) -> u32 {
    (31 << 26) | (rt << 21) | (ra << 16) | (rb << 11) | (xo << 1)
}
const fn xl_form(xo: u32, bo: u32, bi: u32, lk: u32) -> u32 {
    (19 << 26) | (bo << 21) | (bi << 16) | (xo << 1) | lk
}
const fn i_form(li: u32, aa: u32, lk: u32) -> u32 {
    (18 << 26) | (li & 0x03FF_FFFC) | (aa << 1) | lk
}
const fn b_form(bo: u32, bi: u32, bd: u32, aa: u32, lk: u32) -> u32 {
    (16 << 26) | (bo << 21) | (bi << 16) | (bd & 0xFFFC) | (aa << 1) | lk
}
const fn ds_form(op: u32, rt: u32, ra: u32, ds: u32, xo: u32) -> u32 {
    (op << 26) | (rt << 21) | (ra << 16) | (ds & 0xFFFC) | xo
}

use Class::{Compute as C, Flow as F, Memory as M, MemoryExtended as X};

/// Every instruction of the spec's class macros (plus traps and a few compute ones), with
/// its operands and the class expected under TT6 and under TT6E, written out by hand from
/// the spec's tables (the writer rejects a record whose fields do not fit the class its
/// own tables give, so a disagreement fails `cargo xtask fixtures`).
fn all_opcodes() -> Vec<(&'static str, u32, Class, Class)> {
    vec![
        // flow
        ("b +0x10", i_form(0x10, 0, 0), F, F),
        ("ba 0x700", i_form(0x700, 1, 0), F, F),
        ("bl +0x20", i_form(0x20, 0, 1), F, F),
        ("bla 0x100", i_form(0x100, 1, 1), F, F),
        ("bc 12,2,+8", b_form(12, 2, 8, 0, 0), F, F),
        ("bcla 20,0,0x40", b_form(20, 0, 0x40, 1, 1), F, F),
        ("bcctr 20,0", xl_form(528, 20, 0, 0), F, F),
        ("bcctrl 20,0", xl_form(528, 20, 0, 1), F, F),
        ("bclr 20,0 (blr)", xl_form(16, 20, 0, 0), F, F),
        ("bclrl 20,0", xl_form(16, 20, 0, 1), F, F),
        ("rfi", xl_form(50, 0, 0, 0), F, F),
        ("sc", (17 << 26) | 2, F, F),
        ("rfid", xl_form(18, 0, 0, 0), F, F),
        // D-form loads and stores: rT=3, rA=1, d=0x10
        ("lbz r3,16(r1)", d_form(34, 3, 1, 16), M, M),
        ("lbzu r3,16(r1)", d_form(35, 3, 1, 16), M, M),
        ("lfd f3,16(r1)", d_form(50, 3, 1, 16), M, M),
        ("lfdu f3,16(r1)", d_form(51, 3, 1, 16), M, M),
        ("lfs f3,16(r1)", d_form(48, 3, 1, 16), M, M),
        ("lfsu f3,16(r1)", d_form(49, 3, 1, 16), M, M),
        ("lha r3,16(r1)", d_form(42, 3, 1, 16), M, M),
        ("lhau r3,16(r1)", d_form(43, 3, 1, 16), M, M),
        ("lhz r3,16(r1)", d_form(40, 3, 1, 16), M, M),
        ("lhzu r3,16(r1)", d_form(41, 3, 1, 16), M, M),
        ("lmw r29,16(r1)", d_form(46, 29, 1, 16), M, M),
        ("lwz r3,16(r1)", d_form(32, 3, 1, 16), M, M),
        ("lwzu r3,16(r1)", d_form(33, 3, 1, 16), M, M),
        ("stb r3,16(r1)", d_form(38, 3, 1, 16), M, M),
        ("stbu r3,16(r1)", d_form(39, 3, 1, 16), M, M),
        ("stfd f3,16(r1)", d_form(54, 3, 1, 16), M, M),
        ("stfdu f3,16(r1)", d_form(55, 3, 1, 16), M, M),
        ("stfs f3,16(r1)", d_form(52, 3, 1, 16), M, M),
        ("stfsu f3,16(r1)", d_form(53, 3, 1, 16), M, M),
        ("sth r3,16(r1)", d_form(44, 3, 1, 16), M, M),
        ("sthu r3,16(r1)", d_form(45, 3, 1, 16), M, M),
        ("stmw r30,16(r1)", d_form(47, 30, 1, 16), M, M),
        ("stw r3,16(r1)", d_form(36, 3, 1, 16), M, M),
        ("stwu r3,16(r1)", d_form(37, 3, 1, 16), M, M),
        // DS-form
        ("ld r3,16(r1)", ds_form(58, 3, 1, 16, 0), M, M),
        ("ldu r3,16(r1)", ds_form(58, 3, 1, 16, 1), M, M),
        ("lwa r3,16(r1)", ds_form(58, 3, 1, 16, 2), M, M),
        ("std r3,16(r1)", ds_form(62, 3, 1, 16, 0), M, M),
        ("stdu r3,16(r1)", ds_form(62, 3, 1, 16, 1), M, M),
        // X-form memory: rT=3, rA=4, rB=5 (lswi/stswi: NB=7 in the rB slot)
        ("lswi r3,r4,7", x_form(597, 3, 4, 7), M, M),
        ("lbzux r3,r4,r5", x_form(119, 3, 4, 5), M, M),
        ("lbzx r3,r4,r5", x_form(87, 3, 4, 5), M, M),
        ("lfdux f3,r4,r5", x_form(631, 3, 4, 5), M, M),
        ("lfdx f3,r4,r5", x_form(599, 3, 4, 5), M, M),
        ("lfsux f3,r4,r5", x_form(567, 3, 4, 5), M, M),
        ("lfsx f3,r4,r5", x_form(535, 3, 4, 5), M, M),
        ("lhaux r3,r4,r5", x_form(375, 3, 4, 5), M, M),
        ("lhax r3,r4,r5", x_form(343, 3, 4, 5), M, M),
        ("lhbrx r3,r4,r5", x_form(790, 3, 4, 5), M, M),
        ("lhzux r3,r4,r5", x_form(311, 3, 4, 5), M, M),
        ("lhzx r3,r4,r5", x_form(279, 3, 4, 5), M, M),
        ("lwarx r3,r4,r5", x_form(20, 3, 4, 5), M, M),
        ("lwbrx r3,r4,r5", x_form(534, 3, 4, 5), M, M),
        ("lwzux r3,r4,r5", x_form(55, 3, 4, 5), M, M),
        ("lwzx r3,r4,r5", x_form(23, 3, 4, 5), M, M),
        ("lvebx v3,r4,r5", x_form(7, 3, 4, 5), M, M),
        ("lvehx v3,r4,r5", x_form(39, 3, 4, 5), M, M),
        ("lvewx v3,r4,r5", x_form(71, 3, 4, 5), M, M),
        ("lvx v3,r4,r5", x_form(103, 3, 4, 5), M, M),
        ("lvxl v3,r4,r5", x_form(359, 3, 4, 5), M, M),
        ("eciwx r3,r4,r5", x_form(310, 3, 4, 5), M, M),
        ("ecowx r3,r4,r5", x_form(438, 3, 4, 5), M, M),
        ("stbux r3,r4,r5", x_form(247, 3, 4, 5), M, M),
        ("stbx r3,r4,r5", x_form(215, 3, 4, 5), M, M),
        ("stfdux f3,r4,r5", x_form(759, 3, 4, 5), M, M),
        ("stfdx f3,r4,r5", x_form(727, 3, 4, 5), M, M),
        ("stfiwx f3,r4,r5", x_form(983, 3, 4, 5), M, M),
        ("stfsux f3,r4,r5", x_form(695, 3, 4, 5), M, M),
        ("stfsx f3,r4,r5", x_form(663, 3, 4, 5), M, M),
        ("sthbrx r3,r4,r5", x_form(918, 3, 4, 5), M, M),
        ("sthux r3,r4,r5", x_form(439, 3, 4, 5), M, M),
        ("sthx r3,r4,r5", x_form(407, 3, 4, 5), M, M),
        ("stswi r3,r4,0 (32 bytes)", x_form(725, 3, 4, 0), M, M),
        ("stwbrx r3,r4,r5", x_form(662, 3, 4, 5), M, M),
        ("stwcx. r3,r4,r5", x_form(150, 3, 4, 5) | 1, M, M),
        ("stwux r3,r4,r5", x_form(183, 3, 4, 5), M, M),
        ("stwx r3,r4,r5", x_form(151, 3, 4, 5), M, M),
        ("stvebx v3,r4,r5", x_form(135, 3, 4, 5), M, M),
        ("stvehx v3,r4,r5", x_form(167, 3, 4, 5), M, M),
        ("stvewx v3,r4,r5", x_form(199, 3, 4, 5), M, M),
        ("stvx v3,r4,r5", x_form(231, 3, 4, 5), M, M),
        ("stvxl v3,r4,r5", x_form(487, 3, 4, 5), M, M),
        ("ldx r3,r4,r5", x_form(21, 3, 4, 5), M, M),
        ("ldux r3,r4,r5", x_form(53, 3, 4, 5), M, M),
        ("ldarx r3,r4,r5", x_form(84, 3, 4, 5), M, M),
        ("lwax r3,r4,r5", x_form(341, 3, 4, 5), M, M),
        ("lwaux r3,r4,r5", x_form(373, 3, 4, 5), M, M),
        ("stdx r3,r4,r5", x_form(149, 3, 4, 5), M, M),
        ("stdux r3,r4,r5", x_form(181, 3, 4, 5), M, M),
        ("stdcx. r3,r4,r5", x_form(214, 3, 4, 5) | 1, M, M),
        // cache-block operations: compute in TT6, memory in TT6E (rT=0, rA=4, rB=5)
        ("dcba r4,r5", x_form(758, 0, 4, 5), C, M),
        ("dcbf r4,r5", x_form(86, 0, 4, 5), C, M),
        ("dcbi r4,r5", x_form(470, 0, 4, 5), C, M),
        ("dcbst r4,r5", x_form(54, 0, 4, 5), C, M),
        ("dcbt r4,r5", x_form(278, 0, 4, 5), C, M),
        ("dcbtst r4,r5", x_form(246, 0, 4, 5), C, M),
        ("dcbz r4,r5", x_form(1014, 0, 4, 5), C, M),
        ("dcbzl r4,r5 (bit 10 set)", x_form(1014, 1, 4, 5), C, M),
        ("icbi r4,r5", x_form(982, 0, 4, 5), C, M),
        // memory-extended
        ("lswx r3,r4,r5", x_form(533, 3, 4, 5), X, X),
        ("stswx r3,r4,r5", x_form(661, 3, 4, 5), X, X),
        ("dst r4,r5,1", x_form(342, 1, 4, 5), X, X),
        ("dstt r4,r5,1 (T bit)", x_form(342, 0x11, 4, 5), X, X),
        ("dstst r4,r5,2", x_form(374, 2, 4, 5), X, X),
        ("dststt r4,r5,2 (T bit)", x_form(374, 0x12, 4, 5), X, X),
        // traps and compute
        ("tw 31,r0,r0 (trap)", x_form(4, 31, 0, 0), C, C),
        ("td 31,r0,r0", x_form(68, 31, 0, 0), C, C),
        ("twi 31,r0,0", d_form(3, 31, 0, 0), C, C),
        ("tdi 31,r0,0", d_form(2, 31, 0, 0), C, C),
        (
            "mflr r0 (spr 8: halves swapped = 0x100)",
            x_form(339, 0, 8, 0),
            C,
            C,
        ),
        ("mtctr r3 (spr 9)", x_form(467, 3, 9, 0), C, C),
        ("addi r3,r3,1", d_form(14, 3, 3, 1), C, C),
        ("nop (ori 0,0,0)", d_form(24, 0, 0, 0), C, C),
        ("add r3,r4,r5", x_form(266, 3, 4, 5), C, C),
        (
            "addo r3,r4,r5 (OE: xo + 512)",
            x_form(266 + 512, 3, 4, 5),
            C,
            C,
        ),
        ("lvsl v3,r4,r5 (not memory)", x_form(6, 3, 4, 5), C, C),
        ("sync", x_form(598, 0, 0, 0), C, C),
        ("dss 0", x_form(822, 0, 0, 0), C, C),
    ]
}

/// Builds the records of `all_opcodes` for `dialect`: flow records go to pc + 8 (taken),
/// memory records get EA 0x10000000 + 0x40·i, memory-extended records XER 0x20000007 (7
/// bytes) for the string ops and rB 0x01020010 (1 block of 16 bytes, 2 blocks, stride 16)
/// for dst*.
fn opcode_trace(dialect: Dialect) -> Trace {
    let mut pc: u32 = 0x0001_0000;
    let mut instructions = Vec::new();
    for (i, (name, word, tt6, tt6e)) in all_opcodes().into_iter().enumerate() {
        let class = if dialect == Dialect::Tt6 { tt6 } else { tt6e };
        let ea = 0x1000_0000 + 0x40 * i as u32;
        let ins = match class {
            C => Instruction::compute(word),
            F => Instruction::flow(word, pc + 8),
            M => Instruction::memory(word, ea),
            X => {
                let extra = if name.starts_with("ds") {
                    0x0102_0010
                } else {
                    0x2000_0007
                };
                Instruction::memory_extended(word, ea, extra)
            }
        };
        pc = match class {
            F => pc + 8,
            _ => pc + 4,
        };
        instructions.push(ins);
    }
    Trace {
        dialect,
        initial_pc: 0x0001_0000,
        instructions,
        trailing_escapes: Vec::new(),
    }
}

/// The notes' §3 example, word for word.
fn example() -> Vec<u8> {
    let words: [u32; 17] = [
        0x0000_1000, // INITIAL_PC
        0x7c08_02a6, // mflr r0                 @0x1000
        0x93e1_fffc, // stw r31,-4(r1)          @0x1004
        0xbfff_f9fc, //   EA
        0x0002_0001, // ESCAPE code 0x02 (CR), count 1
        0x4200_0000, //   payload: CR
        0x4800_0011, // bl +0x10                @0x1008
        0x0000_1018, //   next PC
        0x7c64_2c2a, // lswx r3,r4,r5           @0x1018
        0x0000_2000, //   EA
        0x0000_0007, //   XER (7 bytes)
        0x7c24_28ce, // lvx v1,r4,r5            @0x101c
        0x0000_3008, //   EA
        0x0020_0001, // ESCAPE SYNC_SIGNAL, count 1
        0x0000_0005, //   payload 5
        0x4c00_0064, // rfi                     @0x1020
        0x0000_1000, //   next PC
    ];
    words.iter().flat_map(|w| w.to_be_bytes()).collect()
}

const ADDI: u32 = d_form(14, 3, 3, 1); // addi r3,r3,1
const LWZ: u32 = d_form(32, 3, 1, 16); // lwz r3,16(r1)
const BL: u32 = i_form(0x100, 0, 1); // bl +0x100
const BLR: u32 = xl_form(16, 20, 0, 0); // blr

/// Escapes of every named code, unknown codes, an empty payload, several escapes before
/// one instruction and a dangling escape at the end.
fn escapes_trace(dialect: Dialect) -> Trace {
    let esc = |code: u16, words: &[u32]| Escape {
        code,
        words: words.to_vec(),
    };
    let ins = vec![
        Instruction::compute(ADDI).with_escape(esc(0x00, &[0x2000_0001])),
        Instruction::memory(LWZ, 0x0100_0010).with_escape(esc(0x01, &[0x0100_0010])),
        Instruction::compute(ADDI).with_escape(esc(0x02, &[0x4200_0000])),
        Instruction::flow(BL, 0x1100).with_escape(esc(0x03, &[0x0003_1100])),
        Instruction::memory(LWZ, 0x0100_0010).with_escape(esc(0x04, &[0x0203_0010])),
        Instruction::compute(ADDI).with_escape(esc(0x05, &[0x0003_1108])),
        Instruction::compute(ADDI)
            .with_escape(Escape::sync(SyncKind::Signal, 0x8000_1000, 1))
            .with_escape(Escape::sync(SyncKind::Broadcast, 0x8000_2000, 1))
            .with_escape(Escape::sync(SyncKind::Wait, 0x8000_1000, 1))
            .with_escape(Escape::sync(SyncKind::TryWait, 0x8000_1000, 1)),
        Instruction::compute(ADDI)
            .with_escape(esc(0x06, &[1, 2, 3]))
            .with_escape(esc(0x3FF, &[]))
            .with_escape(esc(0x22, &[0xDEAD_BEEF])),
        Instruction::flow(BLR, 0x100c),
    ];
    Trace {
        dialect,
        initial_pc: 0x1000,
        instructions: ins,
        trailing_escapes: vec![esc(0x20, &[0x8000_1000, 2])],
    }
}

/// Three threads with a mutex M (0x80001000), a condition variable C (0x80002000) and a
/// wait on 0x80003000 that nobody signals. Signal escapes precede the call's code, wait
/// escapes follow it (spec); counts are those after each signal.
fn thread_traces() -> [Trace; 3] {
    const M: u32 = 0x8000_1000;
    const CV: u32 = 0x8000_2000;
    let t = |initial_pc: u32, instructions: Vec<Instruction>| Trace {
        dialect: Dialect::Tt6,
        initial_pc,
        instructions,
        trailing_escapes: Vec::new(),
    };
    let sig = |a, c| Escape::sync(SyncKind::Signal, a, c);
    let wait = |a, c| Escape::sync(SyncKind::Wait, a, c);
    let c = Instruction::compute;
    // Thread 1: lock M (observed 0), work, unlock M (count 1), wait on C (needs 1).
    let t1 = t(
        0x1000,
        vec![
            c(ADDI).with_escape(wait(M, 0)),
            c(ADDI),
            c(ADDI).with_escape(sig(M, 1)),
            c(ADDI),
            c(ADDI).with_escape(wait(CV, 1)),
            c(ADDI),
        ],
    );
    // Thread 2: lock M having observed 1, unlock (2), broadcast C (1).
    let t2 = t(
        0x2000,
        vec![
            c(ADDI).with_escape(wait(M, 1)),
            c(ADDI).with_escape(sig(M, 2)),
            c(ADDI).with_escape(Escape::sync(SyncKind::Broadcast, CV, 1)),
            c(ADDI),
        ],
    );
    // Thread 3: trylock M succeeded having observed 2, unlock (3), then a wait on a sync
    // point nobody signals (reported unmatched).
    let t3 = t(
        0x3000,
        vec![
            c(ADDI).with_escape(Escape::sync(SyncKind::TryWait, M, 2)),
            c(ADDI).with_escape(sig(M, 3)),
            c(ADDI).with_escape(wait(0x8000_3000, 5)),
            c(ADDI),
        ],
    );
    [t1, t2, t3]
}

/// A FULL record with recognisable state: srr0 = pc, rN = 0x100·k + n, fN = n + k as a
/// double, vN words = (k, n, i, 0x7FFFDEAD), VSCR word 3 = 0x00010000, vrvalid = 0xFFFF0000.
fn full_record(k: u32, pc: u32, opcode: u32) -> FullRecordOwned {
    let mut bytes = Vec::with_capacity(1000);
    // ppc_thread_state, 40 words.
    let mut thread = vec![pc, 0x0000_d030];
    thread.extend((0..32).map(|n| 0x100 * k + n));
    thread.extend([0x2200_0088, 0x2000_0000, pc + 0x40, k, 0, 0xFFFF_FFFF]);
    for w in thread {
        bytes.extend(be32(w));
    }
    // ppc_float_state: 32 doubles, fpscr_pad, fpscr.
    for n in 0..32u32 {
        bytes.extend(f64::from(n + k).to_bits().to_be_bytes());
    }
    bytes.extend(be32(0));
    bytes.extend(be32(0x0000_0004));
    // ppc_vector_state: 32×4 words, vscr[4], pad5[4], vrvalid, pad6[7].
    for n in 0..32u32 {
        for w in [k, n, 2, 0x7FFF_DEAD] {
            bytes.extend(be32(w));
        }
    }
    for w in [
        0,
        0,
        0,
        0x0001_0000,
        0,
        0,
        0,
        0,
        0xFFFF_0000,
        0,
        0,
        0,
        0,
        0,
        0,
        0,
    ] {
        bytes.extend(be32(w));
    }
    let (thread, rest) = bytes.split_at(160);
    let (float, vector) = rest.split_at(264);
    FullRecordOwned {
        opcode,
        pad: 0,
        thread: ThreadState::from_bytes(thread).unwrap(),
        float: FloatState::from_bytes(float).unwrap(),
        vector: VectorState::from_bytes(vector).unwrap(),
    }
}

/// Three FULL records: addi @0x1000, stw @0x1004, b back to 0x1000.
fn full_trace(size: RecordSize) -> Vec<u8> {
    let mut w = FullWriter::new(Vec::new(), size).unwrap();
    let recs = [
        (0x1000, ADDI),
        (0x1004, d_form(36, 3, 1, 16)),
        (0x1008, i_form(0x03FF_FFF8, 0, 0)), // b -8
    ];
    for (k, (pc, op)) in recs.into_iter().enumerate() {
        w.write(&full_record(k as u32, pc, op)).unwrap();
    }
    w.finish()
}

fn fixtures(fx: &mut Fixtures) {
    fx.add("amber/example.tt6", example());
    for (d, ext) in [(Dialect::Tt6, "tt6"), (Dialect::Tt6e, "tt6e")] {
        fx.add(
            format!("amber/all-opcodes.{ext}"),
            opcode_trace(d).to_bytes().unwrap(),
        );
        fx.add(
            format!("amber/escapes.{ext}"),
            escapes_trace(d).to_bytes().unwrap(),
        );
    }
    // TT6E synthetic trap: twi traps at 0x2004, amber emits b 0x700 then rfi back to 0x2008.
    let trap = Trace {
        dialect: Dialect::Tt6e,
        initial_pc: 0x2000,
        instructions: vec![
            Instruction::compute(ADDI),
            Instruction::flow(i_form(0x700, 1, 0), 0x700), // ba 0x700
            Instruction::flow(xl_form(50, 0, 0, 0), 0x2008), // rfi
            Instruction::compute(ADDI),
            Instruction::flow(i_form(0, 0, 0), 0x3000), // acid -j's "b 0" between traces
            Instruction::compute(ADDI),
        ],
        trailing_escapes: Vec::new(),
    };
    fx.add("amber/trap.tt6e", trap.to_bytes().unwrap());
    for (i, t) in thread_traces().iter().enumerate() {
        fx.add(
            format!("amber/threads/thread_{:03}.tt6", i + 1),
            t.to_bytes().unwrap(),
        );
    }
    fx.add("amber/full-1004.full", full_trace(RecordSize::Packed1004));
    fx.add("amber/full-1008.full", full_trace(RecordSize::Struct1008));

    // Negative fixtures: each cut from a valid file.
    let ex = example();
    fx.add("amber/err-empty.tt6", Vec::new());
    // Cut inside the lswx record (opcode at 0x20, needs 12 bytes, 8 left).
    fx.add("amber/err-truncated-record.tt6", ex[..0x28].to_vec());
    // Cut inside the SYNC_SIGNAL escape (at 0x34, needs 8 bytes, 4 left).
    fx.add("amber/err-truncated-escape.tt6", ex[..0x38].to_vec());
    // Two stray bytes after the last complete record.
    let mut stray = ex.clone();
    stray.extend([0x7c, 0x08]);
    fx.add("amber/err-stray-bytes.tt6", stray);
    let full = full_trace(RecordSize::Packed1004);
    fx.add("amber/err-truncated.full", full[..4 + 1004 + 500].to_vec());
    let mut bad = full.clone();
    bad[3] = 0x18;
    fx.add("amber/err-bad-magic.full", bad);
}

/// One static instruction of the synthetic program.
#[derive(Clone, Copy)]
enum Op {
    Compute(u32),
    /// Opcode, base EA, stride.
    Memory(u32, u32, u32),
    /// Opcode, base EA, third word.
    Extended(u32, u32, u32),
}

/// A basic block: its instructions, then a conditional branch to `taken` (with
/// probability `bias` %) or to the next block.
struct Block {
    ops: Vec<Op>,
    taken: usize,
    bias: u64,
}

/// A realistic TT6 trace: the walk of a fixed program of 256 basic blocks (3-24
/// instructions: ~60% compute, ~30% loads and stores with strided addresses, ~1% lswx/dst,
/// ending in a biased conditional branch), so each PC always holds the same instruction, as
/// in a real trace, and a sync escape every ~5000 instructions.
fn synth_trace(records: u64, seed: u64, dialect: Dialect) -> Vec<u8> {
    let mut rng = Rng::new(seed);
    const BLOCKS: usize = 256;
    let compute = [
        ADDI,
        x_form(266, 3, 4, 5),     // add
        d_form(24, 0, 0, 0),      // nop
        d_form(21, 3, 4, 0x063e), // rlwinm
        x_form(339, 0, 8, 0),     // mflr
        d_form(11, 0, 3, 0),      // cmpwi
    ];
    let memory = [
        LWZ,
        d_form(36, 3, 1, 16),  // stw
        x_form(23, 3, 4, 5),   // lwzx
        d_form(50, 1, 1, 8),   // lfd
        x_form(103, 3, 4, 5),  // lvx
        d_form(46, 29, 1, 16), // lmw
    ];
    let program: Vec<Block> = (0..BLOCKS)
        .map(|_| {
            let len = 3 + rng.below(22) as usize;
            let ops = (0..len)
                .map(|_| {
                    let roll = rng.below(100);
                    let base = 0x1000_0000 + (rng.below(1 << 16) as u32) * 64;
                    if roll < 60 {
                        Op::Compute(compute[rng.below(compute.len() as u64) as usize])
                    } else if roll < 99 {
                        let op = memory[rng.below(memory.len() as u64) as usize];
                        Op::Memory(op, base, 4 * (rng.below(8) as u32))
                    } else if rng.chance(50) {
                        Op::Extended(
                            x_form(533, 3, 4, 5),
                            base,
                            0x2000_0000 | rng.below(128) as u32,
                        )
                    } else {
                        Op::Extended(x_form(342, 1, 4, 5), base, 0x0102_0010)
                    }
                })
                .collect();
            Block {
                ops,
                taken: rng.below(BLOCKS as u64) as usize,
                bias: if rng.chance(50) { 10 } else { 90 },
            }
        })
        .collect();
    let block_pc = |b: usize| 0x0001_0000 + (b as u32) * 0x100;
    let mut w = Tt6Writer::new(
        Vec::with_capacity((records * 6) as usize),
        dialect,
        block_pc(0),
    )
    .unwrap();
    let mut count = 1u32;
    let mut iteration = 0u32;
    let mut b = 0usize;
    let mut n = 0u64;
    'walk: loop {
        let block = &program[b];
        iteration = iteration.wrapping_add(1);
        for op in &block.ops {
            if n == records {
                break 'walk;
            }
            let mut ins = match *op {
                Op::Compute(o) => Instruction::compute(o),
                Op::Memory(o, base, stride) => {
                    Instruction::memory(o, base.wrapping_add(stride.wrapping_mul(iteration & 0xFF)))
                }
                Op::Extended(o, base, x) => Instruction::memory_extended(o, base, x),
            };
            if rng.below(5000) == 0 {
                ins.escapes
                    .push(Escape::sync(SyncKind::Signal, 0x8000_1000, count));
                count += 1;
            }
            w.write(&ins).unwrap();
            n += 1;
        }
        if n == records {
            break;
        }
        let next = if rng.chance(block.bias) {
            block.taken
        } else {
            (b + 1) % BLOCKS
        };
        w.write(&Instruction::flow(b_form(12, 2, 8, 0, 0), block_pc(next)))
            .unwrap();
        n += 1;
        b = next;
    }
    w.finish()
}

fn synth(records: u64, seed: u64) -> Vec<u8> {
    synth_trace(records, seed, Dialect::Tt6)
}

/// Folds every field of a record into `acc`, so the benchmark cannot skip decoding any.
fn touch(acc: u32, r: &amber_tt6::Record<'_>) -> u32 {
    acc.wrapping_add(r.pc)
        .wrapping_add(r.opcode)
        .wrapping_add(r.next_pc)
        .wrapping_add(r.ea().unwrap_or(0))
        .wrapping_add(r.extra().unwrap_or(0))
        .wrapping_add(r.class as u32)
        .wrapping_add(r.escapes.raw().len() as u32)
}

/// Decodes a TT6/TT6E trace touching every field; returns the record count.
fn decode_tt6(bytes: &[u8], dialect: Dialect) -> u64 {
    // Internal iteration (`for_each`): the reader's fast loop keeps its state in registers.
    let reader = Tt6Reader::parse(bytes, dialect).unwrap();
    let mut n = 0u64;
    let mut acc = 0u32;
    reader.records().for_each(|r| {
        let r = r.unwrap();
        acc = touch(acc, &r);
        n += 1;
    });
    black_box(acc);
    n
}

/// The same with a `for` loop (`Iterator::next` per record).
fn decode_tt6_next(bytes: &[u8]) -> u64 {
    let reader = Tt6Reader::parse(bytes, Dialect::Tt6).unwrap();
    let mut n = 0u64;
    let mut acc = 0u32;
    for r in reader.records() {
        let r = r.unwrap();
        acc = touch(acc, &r);
        n += 1;
    }
    black_box(acc);
    n
}

/// The runs of falling-through records `bbv`'s blocks are read from
/// (`Records::try_for_each_run`); returns the record count.
fn tt6_runs(bytes: &[u8]) -> u64 {
    let reader = Tt6Reader::parse(bytes, Dialect::Tt6).unwrap();
    let (mut n, mut acc) = (0u64, 0u32);
    let _ = reader.records().try_for_each_run(|r| {
        let r = r.unwrap();
        n += r.len;
        acc = acc.wrapping_add(r.pc);
        std::ops::ControlFlow::<()>::Continue(())
    });
    black_box(acc);
    n
}

fn bench(config: &BenchConfig) -> Vec<BenchCase> {
    let records = config.mib * (1 << 20) / 5 + 1; // ~5.6 bytes per record on average
    let tt6 = Arc::new(synth_trace(records, 1, Dialect::Tt6));
    let tt6e = Arc::new(synth_trace(records, 2, Dialect::Tt6e));
    let full_records = config.mib * (1 << 20) / 1004 + 1;
    let mut fw = FullWriter::new(Vec::new(), RecordSize::Packed1004).unwrap();
    let proto = full_record(1, 0x1000, ADDI);
    for i in 0..full_records {
        let mut r = proto.clone();
        r.opcode = ADDI ^ (i as u32 & 0xFFFF);
        fw.write(&r).unwrap();
    }
    let full = Arc::new(fw.finish());
    vec![
        BenchCase {
            name: "amber tt6 records".into(),
            input: tt6.clone(),
            unit: "records",
            run: Box::new(|b| decode_tt6(b, Dialect::Tt6)),
        },
        BenchCase::shared("amber tt6 bbv (slices of 1M)", &tt6, "instrs", |bytes| {
            crate::bench::run_bbv("tt6", bytes, None, None)
        }),
        BenchCase {
            name: "amber tt6 runs (bbv's record walk)".into(),
            input: tt6.clone(),
            unit: "records",
            run: Box::new(tt6_runs),
        },
        BenchCase {
            name: "amber tt6e records".into(),
            input: tt6e,
            unit: "records",
            run: Box::new(|b| decode_tt6(b, Dialect::Tt6e)),
        },
        BenchCase {
            name: "amber tt6 records (for loop)".into(),
            input: tt6.clone(),
            unit: "records",
            run: Box::new(decode_tt6_next),
        },
        BenchCase {
            name: "amber tt6 stream reader".into(),
            input: tt6.clone(),
            unit: "records",
            run: Box::new(|b| {
                let mut s = amber_tt6::Tt6StreamReader::from_reader(b, Dialect::Tt6).unwrap();
                let mut n = 0u64;
                let mut acc = 0u32;
                while let Some(r) = s.next_record() {
                    let r = r.unwrap();
                    acc = acc
                        .wrapping_add(r.pc ^ r.opcode ^ r.next_pc)
                        .wrapping_add(r.ea().unwrap_or(0) ^ r.extra().unwrap_or(0));
                    n += 1;
                }
                black_box(acc);
                n
            }),
        },
        BenchCase {
            name: "amber full records".into(),
            input: full,
            unit: "records",
            run: Box::new(|b| {
                let r = FullReader::parse(b).unwrap();
                let mut n = 0u64;
                let mut acc = 0u64;
                for rec in r.records() {
                    let rec = rec.unwrap();
                    acc = acc
                        .wrapping_add(u64::from(rec.opcode))
                        .wrapping_add(u64::from(rec.thread.srr0.get()))
                        .wrapping_add(rec.float.fpregs[31].get())
                        .wrapping_add(u64::from(rec.vector.save_vrvalid.get()));
                    n += 1;
                }
                black_box(acc);
                n
            }),
        },
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn synth_reads_back() {
        let bytes = synth(10_000, 3);
        assert_eq!(decode_tt6(&bytes, Dialect::Tt6), 10_000);
        assert_eq!(synth(100, 3), synth(100, 3));
    }

    #[test]
    fn opcode_fixtures_agree_with_hand_classes() {
        // Writing succeeds only if the crate's classes match the hand-written ones.
        for d in [Dialect::Tt6, Dialect::Tt6e] {
            let t = opcode_trace(d);
            let bytes = t.to_bytes().unwrap();
            assert_eq!(Trace::read(&bytes, d).unwrap(), t);
        }
    }
}
