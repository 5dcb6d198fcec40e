//! `state`: every named register before instruction N, found by
//! [`Steps::seek`](trace_model::steps::Steps::seek): through the index of full dumps for an
//! x64dbg file in memory (a binary search and the replay of at most one 512-instruction
//! interval, whatever N), the frame index for a tfile, a scan elsewhere.
//!
//! The registers are what the format names: x64dbg's every `REGDUMP` field (general
//! registers, flags and their bits, segments, debug, x87, XMM/YMM, MXCSR, last error), a
//! tfile frame's registers as its target description names them, amber FULL's whole user
//! state. TT6 and TT6E record no registers: asking for them is an error.
//!
//! ```
//! use trace_analyses::state::state;
//! use trace_registry::steps::RegValue;
//! use trace_registry::{Ctx, Input, Options};
//!
//! let mut input = Input::open("../../testdata/x64dbg/basic.trace64".as_ref())?;
//! let handler = trace_registry::detect(&input).expect("an x64dbg trace");
//! let options = Options::default();
//! let s = state(handler, &mut input, &mut Ctx::new(&options), 700)?;
//! // `tracekit dump` shows instruction 700 as thread 4728's `mov [rsp+0x10], rdi`
//! // (48 89 7c 24 10) at 0x7ff6a1b21011, writing 0xb63e1ba01ec921ed to 0x24fe00: so
//! // before it, rsp is 0x24fdf0 and rdi holds that value.
//! assert_eq!((s.i, s.thread, s.pc), (700, 4728, 0x7ff6_a1b2_1011));
//! assert_eq!(s.get("rip"), Some(&RegValue::Word(0x7ff6_a1b2_1011)));
//! assert_eq!(s.get("rsp"), Some(&RegValue::Word(0x24_fdf0)));
//! assert_eq!(s.get("rdi"), Some(&RegValue::Word(0xb63e_1ba0_1ec9_21ed)));
//! assert!(s.to_json().starts_with(r#"{"i":700,"thread":4728,"regs":{"rax":"0x"#));
//! # Ok::<(), trace_registry::Error>(())
//! ```

use serde::Serialize;
use serde::ser::SerializeMap;

use trace_model::steps::{NamedReg, RegValue};
use trace_model::{Ctx, Error, Handler, Input};

/// The registers before one instruction: `{"i":N,"thread":T,"regs":{"rax":"0x…",…}}` in
/// JSON (the registers in the format's order; values as [`RegValue`]'s `Display`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct State {
    /// The instruction (global index; the frame number for a tfile).
    pub i: u64,
    /// Its thread (0 where the format has none).
    pub thread: u64,
    /// Its address (not in the JSON, which has the pc register among `regs`).
    #[serde(skip)]
    pub pc: u64,
    /// The instruction's text, once [`State::disassemble`] has made it (and the bytes are
    /// recorded and decode); in the JSON only then.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub asm: Option<String>,
    /// The instruction's bytes, where recorded (not in the JSON).
    #[serde(skip)]
    pub opcode: Vec<u8>,
    /// The instruction set, to disassemble `opcode` with (not in the JSON).
    #[serde(skip)]
    pub isa: trace_model::steps::Isa,
    /// Every named register, in the format's order.
    #[serde(serialize_with = "regs_map")]
    pub regs: Vec<NamedReg>,
    /// What the text calls a step ([`StepKind::noun`](trace_model::steps::StepKind::noun)(trace_model::steps::Steps::step_noun):
    /// "instruction", or "frame" for a tfile); not in the JSON.
    #[serde(skip)]
    pub noun: &'static str,
}

fn regs_map<S: serde::Serializer>(regs: &[NamedReg], s: S) -> Result<S::Ok, S::Error> {
    let mut map = s.serialize_map(Some(regs.len()))?;
    for r in regs {
        map.serialize_entry(&*r.name, &r.value.to_string())?;
    }
    map.end()
}

impl State {
    /// Fills [`State::asm`] from the instruction's bytes (left `None` where there are
    /// none, or they do not decode).
    pub fn disassemble(&mut self) {
        self.asm = trace_registry::disasm::disassemble(self.isa, self.pc, &self.opcode);
    }

    /// The state with only the registers `names`, in that order.
    ///
    /// # Errors
    ///
    /// A name the state does not have, with the names it has.
    pub fn only(mut self, names: &[String]) -> Result<State, String> {
        let mut regs = Vec::with_capacity(names.len());
        for name in names {
            let Some(r) = self.regs.iter().find(|r| *r.name == **name) else {
                let known: Vec<&str> = self.regs.iter().map(|r| &*r.name).collect();
                return Err(format!(
                    "no register {name:?} before {} {}; it has: {}",
                    self.noun,
                    self.i,
                    known.join(", ")
                ));
            };
            regs.push(r.clone());
        }
        self.regs = regs;
        Ok(self)
    }

    /// The value of the register `name`, if the state has it.
    #[must_use]
    pub fn get(&self, name: &str) -> Option<&RegValue> {
        self.regs.iter().find(|r| r.name == name).map(|r| &r.value)
    }

    /// The JSON line `tracekit state --json` prints.
    #[must_use]
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }

    /// The text `tracekit state` prints: a title line, then the registers in groups (a
    /// family of names: `r8`…`r15`, `flags.*`, `xmm*`; the plain names between them
    /// together), word registers in aligned columns, each group's values zero-padded to
    /// one width, wide registers one per line.
    #[must_use]
    pub fn to_text(&self) -> String {
        let mut out = format!(
            "registers before {} {} (thread {}, pc {:#x})\n",
            self.noun, self.i, self.thread, self.pc
        );
        if let Some(asm) = &self.asm {
            out.push_str(&format!("{:#x}: {asm}\n", self.pc));
        }
        if self.regs.is_empty() {
            out.push_str("(none collected)\n");
        }
        let mut rest = self.regs.as_slice();
        while let Some(first) = rest.first() {
            let key = family(&first.name);
            let len = rest
                .iter()
                .position(|r| family(&r.name) != key)
                .unwrap_or(rest.len());
            let (group, tail) = rest.split_at(len);
            render_group(group, &mut out);
            rest = tail;
        }
        out
    }
}

/// What groups a register with its neighbours: a dotted name's prefix without its number
/// (`flags.z` → `flags`, `ymm3.High` → `ymm`, `x87r2.tag` → `x87r`); a numbered name's
/// stem (`xmm12` → `xmm`, `dr7` → `dr`, `r9` → `r`); "" for the other names (`rax`,
/// `rflags`, `lastError`), which group with each other, apart from x86's segment registers
/// (`cs`, `ss`, …: 16 bits beside 64).
fn family(name: &str) -> &str {
    if ["cs", "ss", "ds", "es", "fs", "gs"].contains(&name) {
        return "segment";
    }
    let (stem, dotted) = match name.split_once('.') {
        Some((prefix, _)) => (prefix, true),
        None => (name, false),
    };
    let bare = stem.trim_end_matches(|c: char| c.is_ascii_digit());
    if dotted || bare.len() < stem.len() {
        bare
    } else {
        ""
    }
}

/// The terminal width the columns are fitted to.
const TEXT_WIDTH: usize = 100;

fn render_group(group: &[NamedReg], out: &mut String) {
    use std::fmt::Write;
    out.push('\n');
    let digits = |w: u64| {
        let bits = u64::BITS.saturating_sub(w.leading_zeros()).max(1);
        usize::try_from(bits.div_ceil(4)).unwrap_or(16)
    };
    // Words zero-padded to the group's widest value, rounded up to a power of two digits
    // (a byte, a word, a dword, a qword), so that columns line up.
    let width = group
        .iter()
        .filter_map(|r| match r.value {
            RegValue::Word(w) => Some(digits(w)),
            RegValue::Wide(_) => None,
        })
        .max()
        .unwrap_or(1)
        .next_power_of_two();
    let name_width = group.iter().map(|r| r.name.len()).max().unwrap_or(0);
    let cell = name_width.saturating_add(width).saturating_add(5);
    let columns = TEXT_WIDTH.checked_div(cell).unwrap_or(1).max(1);
    let mut column = 0;
    for r in group {
        match &r.value {
            RegValue::Word(w) => {
                if column == columns {
                    out.push('\n');
                    column = 0;
                }
                if column > 0 {
                    out.push_str("  ");
                }
                let _ = write!(out, "{:<name_width$} 0x{w:0width$x}", r.name);
                column = column.saturating_add(1);
            }
            RegValue::Wide(_) => {
                if column > 0 {
                    out.push('\n');
                    column = 0;
                }
                let _ = writeln!(out, "{:<name_width$} {}", r.name, r.value);
            }
        }
    }
    if column > 0 {
        out.push('\n');
    }
}

/// The registers before instruction `at` of `input`.
///
/// # Errors
///
/// [`Error::Unsupported`] for a format without an instruction stream or without registers
/// (DCFG, TT6, TT6E), or when `at` is at or past the end (the trace's instruction count is
/// in the message); the read error of a damaged file when `at` is past the damage.
pub fn state(
    handler: &dyn Handler,
    input: &mut Input,
    ctx: &mut Ctx<'_>,
    at: u64,
) -> Result<State, Error> {
    let disasm = ctx.options.disasm;
    let mut steps = handler.steps(input, ctx)?;
    let mut s = state_of(steps.as_mut(), handler.name(), at)?;
    if disasm {
        s.disassemble();
    }
    Ok(s)
}

/// The registers before step `at` of `steps` (of a trace of the format `format`): [`state`]
/// over steps already open, so that a caller that keeps them (with their seek index)
/// pays for opening once.
///
/// # Errors
///
/// As [`state`].
pub fn state_of(
    steps: &mut dyn trace_model::steps::Steps,
    format: &str,
    at: u64,
) -> Result<State, Error> {
    steps.seek(at)?;
    let (i, thread, pc, opcode) = match steps.next_step() {
        Some(Ok(step)) => (step.i, step.thread, step.pc, step.opcode.to_vec()),
        Some(Err(e)) => return Err(e),
        None => return Err(trace_model::steps::past_end_of(steps.kind().noun(), at, at)),
    };
    // Checked after the first step: a text format (Tenet) knows its registers only then.
    let mut regs = Vec::new();
    steps.named_regs(&mut regs);
    if regs.is_empty() && steps.reg_names().is_empty() {
        return Err(Error::Unsupported(format!(
            "this {} trace has no named registers (the format records none, or the file \
             does not name them): `state` has nothing to show",
            format
        )));
    }
    Ok(State {
        i,
        thread,
        pc,
        asm: None,
        opcode,
        isa: steps.isa(),
        regs,
        noun: steps.kind().noun(),
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use super::*;

    #[test]
    fn families_group_numbered_and_dotted_names() {
        for (name, f) in [
            ("rax", ""),
            ("rflags", ""),
            ("gs", "segment"),
            ("fs_base", ""),
            ("lastError", ""),
            ("r8", "r"),
            ("r15", "r"),
            ("xmm12", "xmm"),
            ("ymm3.High", "ymm"),
            ("flags.z", "flags"),
            ("x87r2.tag", "x87r"),
            ("x87fpu.ControlWord", "x87fpu"),
            ("MxCsrFields.FZ", "MxCsrFields"),
        ] {
            assert_eq!(family(name), f, "{name}");
        }
    }

    #[test]
    fn text_aligns_words_and_puts_wide_values_on_their_own_lines() {
        let reg = |name: &'static str, value| NamedReg {
            name: name.into(),
            value,
        };
        let s = State {
            i: 5,
            thread: 7,
            pc: 0x1000,
            asm: None,
            opcode: Vec::new(),
            isa: trace_model::steps::Isa::X64,
            regs: vec![
                reg("rax", RegValue::Word(0x1111)),
                reg("rsp", RegValue::Word(0x14_fe00)),
                reg("xmm0", RegValue::Wide([1u8; 16].into_iter().collect())),
                reg("flags.c", RegValue::Word(1)),
                reg("flags.zz", RegValue::Word(0)),
            ],
            noun: "instruction",
        };
        let text = s.to_text();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines,
            [
                "registers before instruction 5 (thread 7, pc 0x1000)",
                "",
                "rax 0x00001111  rsp 0x0014fe00",
                "",
                "xmm0 0x01010101010101010101010101010101",
                "",
                "flags.c  0x1  flags.zz 0x0",
            ]
        );
        assert_eq!(
            s.to_json(),
            r#"{"i":5,"thread":7,"regs":{"rax":"0x1111","rsp":"0x14fe00","xmm0":"0x01010101010101010101010101010101","flags.c":"0x1","flags.zz":"0x0"}}"#
        );
    }
}

#[cfg(test)]
#[allow(
    clippy::unwrap_used,
    clippy::indexing_slicing,
    clippy::arithmetic_side_effects,
    clippy::cast_possible_truncation
)]
mod state_tests {
    use super::*;
    use crate::mem::tests::{Hand, hand_built};
    use quickcheck::{Arbitrary, Gen, QuickCheck};
    use trac_x64dbg::{Arch, RecorderOptions, Trace, register_fields};
    use trace_model::Options;
    use trace_model::schema::testing::{input, testdata};
    use trace_registry::detect;

    fn ask(name: &str, bytes: &[u8], gzip: bool, at: u64) -> Result<State, Error> {
        let mut input = input(name, bytes, gzip);
        let handler = detect(&input).unwrap();
        let options = Options::default();
        state(handler, &mut input, &mut Ctx::new(&options), at)
    }

    /// The state is the replay's (no index: every instruction from the start) at `at`,
    /// field by field.
    fn assert_is_the_replay(bytes: &[u8], got: &State) {
        let trace = Trace::parse(bytes).unwrap();
        let mut replay = trace.replay();
        let ins = loop {
            let ins = replay.next_instruction().unwrap().unwrap();
            if ins.index() == got.i {
                break ins;
            }
        };
        let regs = replay.regs();
        assert_eq!(got.thread, u64::from(ins.thread()));
        assert_eq!(got.pc, regs.ip());
        let fields = register_fields(trace.arch());
        assert_eq!(got.regs.len(), fields.len());
        for (r, f) in got.regs.iter().zip(fields) {
            assert_eq!(r.name, f.name);
            let bytes = regs.field(f);
            let want = if bytes.len() <= 8 {
                let mut w = [0u8; 8];
                w[..bytes.len()].copy_from_slice(&bytes);
                RegValue::Word(u64::from_le_bytes(w))
            } else {
                RegValue::Wide(bytes.into_iter().collect())
            };
            assert_eq!(r.value, want, "instruction {} {}", got.i, r.name);
        }
    }

    #[derive(Clone, Debug)]
    struct Case {
        seed: u64,
        threads: u32,
        x86: bool,
        instructions: u64,
        at: u16,
    }

    impl Arbitrary for Case {
        fn arbitrary(g: &mut Gen) -> Case {
            Case {
                seed: u64::arbitrary(g),
                threads: u32::arbitrary(g) % 3 + 1,
                x86: bool::arbitrary(g),
                instructions: u64::arbitrary(g) % 3000 + 1,
                at: u16::arbitrary(g),
            }
        }
    }

    /// `state --at N` (a seek through the index) is the replay's state at N, for random
    /// generated traces of both architectures and random N.
    #[test]
    fn state_is_the_replays_at_random_n() {
        fn prop(case: Case) -> bool {
            let opts = trac_x64dbg::testgen::Options {
                arch: if case.x86 { Arch::X86 } else { Arch::X64 },
                threads: case.threads,
                max_run: 40,
                seed: case.seed,
            };
            let bytes = trac_x64dbg::testgen::trace(
                opts,
                case.instructions,
                RecorderOptions::default(),
                "g.exe",
            );
            let n = Trace::parse(&bytes)
                .unwrap()
                .build_index()
                .unwrap()
                .instructions();
            let at = u64::from(case.at) * n / 0x1_0000;
            let got = ask("g.trace64", &bytes, false, at).unwrap();
            assert_eq!(got.i, at);
            assert_is_the_replay(&bytes, &got);
            true
        }
        QuickCheck::new()
            .tests(30)
            .quickcheck(prop as fn(Case) -> bool);
    }

    /// A hand-built trace: the registers set before each instruction, across full dumps;
    /// in memory (index) and streamed (scan).
    #[test]
    fn hand_built_registers_across_full_dumps() {
        let steps: Vec<Hand> = (0..1100u64)
            .map(|i| (vec![0x90], vec![(1, i), (3, i * 3)], vec![]))
            .collect();
        let bytes = hand_built(&steps);
        for gzip in [false, true] {
            for at in [0, 1, 511, 512, 513, 1023, 1024, 1099] {
                let s = ask("h.trace64", &bytes, gzip, at).unwrap();
                assert_eq!((s.i, s.thread), (at, 7));
                assert_eq!(s.get("rcx"), Some(&RegValue::Word(at)));
                assert_eq!(s.get("rbx"), Some(&RegValue::Word(at * 3)));
                assert_eq!(s.get("rip"), Some(&RegValue::Word(0x7ff6_0000_1000 + at)));
                assert_eq!(s.pc, 0x7ff6_0000_1000 + at);
            }
        }
    }

    /// The real x64dbg sample at a few instructions, against the replay.
    #[test]
    fn real_x64dbg_sample_is_the_replays() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../../shared/realdata/x64dbg/d-ornen_DBGLogParser_test1.trace64");
        let Ok(bytes) = std::fs::read(&path) else {
            assert!(
                std::env::var_os("TRACEKIT_REQUIRE_REALDATA").is_none_or(|v| v != "1"),
                "{} missing",
                path.display()
            );
            println!("note: {} absent; skipped", path.display());
            return;
        };
        let n = Trace::parse(&bytes)
            .unwrap()
            .build_index()
            .unwrap()
            .instructions();
        assert!(n > 100);
        for at in [0, 1, n / 2, n - 1] {
            let s = ask("test1.trace64", &bytes, false, at).unwrap();
            assert_is_the_replay(&bytes, &s);
        }
        assert!(matches!(
            ask("test1.trace64", &bytes, false, n),
            Err(Error::Unsupported(_))
        ));
    }

    /// tfile frames and amber FULL records: the named registers of step N as a read from
    /// the start gives them (the seek uses the frame index for a tfile in memory).
    #[test]
    fn tfile_and_full_states_are_the_steps() {
        for name in [
            "gdb-tfile/amd64.tf",
            "gdb-tfile/s390-big-endian.tf",
            "amber/full-1008.full",
        ] {
            let bytes = testdata(name);
            let base = name.rsplit('/').next().unwrap();
            let mut input = input(base, &bytes, false);
            let options = Options::default();
            let mut steps = detect(&input)
                .unwrap()
                .steps(&mut input, &mut Ctx::new(&options))
                .unwrap();
            let mut all = Vec::new();
            while let Some(step) = steps.next_step() {
                let step = step.unwrap().clone();
                let mut named = Vec::new();
                steps.named_regs(&mut named);
                all.push((step, named));
            }
            assert!(all.len() > 1, "{name}");
            for at in [0, all.len() / 2, all.len() - 1] {
                let s = ask(base, &bytes, at % 2 == 1, at as u64).unwrap();
                let (step, named) = &all[at];
                assert_eq!((s.i, s.thread, s.pc), (step.i, step.thread, step.pc));
                assert_eq!(&s.regs, named, "{name} {at}");
                assert!(!s.regs.is_empty(), "{name} {at}");
            }
        }
    }

    #[test]
    fn errors_say_what_is_wrong() {
        let steps: Vec<Hand> = (0..700u64)
            .map(|i| (vec![0x90], vec![(1, i)], vec![]))
            .collect();
        let bytes = hand_built(&steps);
        let e = ask("h.trace64", &bytes, false, 700).unwrap_err();
        assert!(
            matches!(&e, Error::Unsupported(m) if m.contains("700 is past the end") && m.contains("700 instructions")),
            "{e}"
        );
        // A cut file: instructions before the damage answer; past it, the damage (not
        // "past the end").
        let cut = &bytes[..bytes.len() - 2];
        for gzip in [false, true] {
            assert_eq!(ask("h.trace64", cut, gzip, 650).unwrap().i, 650);
            let e = ask("h.trace64", cut, gzip, 699).unwrap_err();
            assert!(matches!(e, Error::Format { .. }), "{e}");
            let e = ask("h.trace64", cut, gzip, 5000).unwrap_err();
            assert!(matches!(e, Error::Format { .. }), "{e}");
        }
        // No registers.
        let tt6 = testdata("amber/all-opcodes.tt6");
        let e = ask("all-opcodes.tt6", &tt6, false, 0).unwrap_err();
        assert!(
            matches!(&e, Error::Unsupported(m) if m.contains("this tt6 trace has no named registers")),
            "{e}"
        );
    }
}
