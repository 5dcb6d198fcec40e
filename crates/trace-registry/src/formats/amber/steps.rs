//! The instruction-stream view of amber traces: one [`Step`] per instruction record.
//!
//! TT6 and TT6E record the pc, the instruction word and the effective address of loads and
//! stores, but no values and no registers: a memory access has the operand size and
//! direction the opcode gives (see `amber_tt6::opcode`; 4 bytes and unknown direction for
//! cache-block and stream operations, or where the size is not defined) and no bytes. FULL
//! records the whole user state and no addresses: no accesses, the thread state as the
//! compared registers, and every register as the named state. A merged thread directory
//! numbers its steps in timeline order, with each record's thread.

use std::borrow::Cow;

use amber_tt6::{Access, FullRecord, FullRecordOwned};

use super::{Amber, CACHE_LINE, Kind, Reader};
use crate::steps::{self, AccessKind, Isa, NamedReg, RegValue, Step, Steps};
use crate::{Ctx, Error, Input};

/// The words of `ppc_thread_state`, in order, as `dump` names them.
fn thread_state_names() -> Vec<Cow<'static, str>> {
    let mut names: Vec<Cow<'static, str>> = vec!["srr0".into(), "srr1".into()];
    names.extend((0..32).map(|n| Cow::Owned(format!("r{n}"))));
    names.extend(["cr", "xer", "lr", "ctr", "mq", "vrsave"].map(Cow::Borrowed));
    names
}

/// The words of a thread state, in [`thread_state_names`] order.
fn thread_state_words(r: &FullRecordOwned, out: &mut Vec<u64>) {
    let t = &r.thread;
    out.clear();
    out.push(u64::from(t.srr0.get()));
    out.push(u64::from(t.srr1.get()));
    out.extend(t.r.iter().map(|x| u64::from(x.get())));
    out.extend([t.cr, t.xer, t.lr, t.ctr, t.mq, t.vrsave].map(|x| u64::from(x.get())));
}

/// The steps of an amber input.
pub(super) struct AmberSteps<'a> {
    handler: Amber,
    reader: Reader<'a>,
    /// The thread of a single file (from its `thread_NNN` name, else 0).
    thread: u64,
    names: Vec<Cow<'static, str>>,
    step: Step,
    /// FULL: the current record's state.
    full: Option<Box<FullRecordOwned>>,
    regs: Vec<u64>,
    offset: u64,
    /// The reader at the start, for a seek back (a trace in memory; a stream cannot).
    start: Option<Reader<'a>>,
    /// The number of the step after the last one read (0 before the first).
    next_i: u64,
    pending: bool,
    done: bool,
}

impl<'a> AmberSteps<'a> {
    pub(super) fn open(
        handler: Amber,
        input: &'a mut Input,
        ctx: &Ctx<'_>,
    ) -> Result<AmberSteps<'a>, Error> {
        let (reader, thread) = Reader::open(handler, input, ctx)?;
        let full = handler.kind() == Kind::Full;
        let start = reader.again();
        Ok(AmberSteps {
            handler,
            reader,
            thread,
            names: if full {
                thread_state_names()
            } else {
                Vec::new()
            },
            step: Step::default(),
            full: None,
            regs: Vec::new(),
            offset: 0,
            start,
            next_i: 0,
            pending: false,
            done: false,
        })
    }

    /// Reads the next record into `step` (and `full`); `None` at the end.
    fn advance(&mut self) -> Option<Result<(), amber_tt6::Error>> {
        let step = &mut self.step;
        match &mut self.reader {
            Reader::Slice(records) => match records.next()? {
                Ok(r) => self.offset = fill_tt6(step, &r, r.index, self.thread),
                Err(e) => return Some(Err(e)),
            },
            Reader::Stream(reader) => match reader.next_record()? {
                Ok(r) => self.offset = fill_tt6(step, &r, r.index, self.thread),
                Err(e) => return Some(Err(e)),
            },
            Reader::Merged(merge) => match merge.next()? {
                Ok(m) => self.offset = fill_tt6(step, &m.record, m.seq, m.thread.0),
                Err(e) => return Some(Err(e)),
            },
            Reader::FullSlice(records) => match records.next()? {
                Ok(r) => self.offset = fill_full(step, &r, &mut self.full, &mut self.regs),
                Err(e) => return Some(Err(e)),
            },
            Reader::FullStream(reader) => match reader.next_record()? {
                Ok(r) => self.offset = fill_full(step, &r, &mut self.full, &mut self.regs),
                Err(e) => return Some(Err(e)),
            },
        }
        Some(Ok(()))
    }
}

/// Fills `step` from a TT6/TT6E record; returns the record's file offset.
fn fill_tt6(step: &mut Step, r: &amber_tt6::Record<'_>, i: u64, thread: u64) -> u64 {
    step.clear();
    step.i = i;
    step.thread = thread;
    step.pc = u64::from(r.pc);
    step.opcode.extend_from_slice(&r.opcode.to_be_bytes());
    if let Some(ea) = r.ea() {
        let size = r.operand_size(CACHE_LINE);
        step.push_access(u64::from(ea), None, None, size.unwrap_or(4));
        if let Some(a) = step.mem.last_mut() {
            a.sized = size.is_some();
            a.kind = match r.access() {
                Some(Access::Load) => AccessKind::Read,
                Some(Access::Store) => AccessKind::Write,
                _ => AccessKind::Unknown,
            };
        }
    }
    r.offset.0
}

/// Fills `step`, the state and its words from a FULL record; returns its file offset.
fn fill_full(
    step: &mut Step,
    r: &FullRecord<'_>,
    full: &mut Option<Box<FullRecordOwned>>,
    regs: &mut Vec<u64>,
) -> u64 {
    step.clear();
    step.i = r.index;
    step.thread = 0;
    step.pc = u64::from(r.pc());
    step.opcode.extend_from_slice(&r.opcode.to_be_bytes());
    let state = full.get_or_insert_with(|| Box::new(FullRecordOwned::zeroed(0)));
    **state = r.to_owned();
    thread_state_words(state, regs);
    r.offset.0
}

impl Steps for AmberSteps<'_> {
    fn isa(&self) -> Isa {
        Isa::Ppc32
    }

    fn reg_names(&self) -> &[Cow<'static, str>] {
        &self.names
    }

    fn next_step(&mut self) -> Option<Result<&Step, Error>> {
        if std::mem::take(&mut self.pending) {
            return Some(Ok(&self.step));
        }
        if self.done {
            return None;
        }
        match self.advance() {
            Some(Ok(())) => {
                self.next_i = self.step.i.saturating_add(1);
                Some(Ok(&self.step))
            }
            Some(Err(e)) => {
                self.done = true;
                Some(Err(self.handler.err(e)))
            }
            None => {
                self.done = true;
                None
            }
        }
    }

    fn regs(&self) -> &[u64] {
        &self.regs
    }

    /// FULL: the thread state, `f0`…`f31` (the IEEE-754 bits), `fpscr`, `v0`…`v31`,
    /// `vscr` and `vrvalid`, named as `dump` names them. TT6/TT6E: nothing.
    fn named_regs(&self, out: &mut Vec<NamedReg>) {
        let Some(state) = &self.full else { return };
        let word = |name: Cow<'static, str>, w: u64| NamedReg {
            name,
            value: RegValue::Word(w),
        };
        out.extend(
            self.names
                .iter()
                .zip(&self.regs)
                .map(|(n, w)| word(n.clone(), *w)),
        );
        let f = &state.float;
        out.extend(
            f.fpregs
                .iter()
                .enumerate()
                .map(|(n, x)| word(Cow::Owned(format!("f{n}")), x.get())),
        );
        out.push(word("fpscr".into(), u64::from(f.fpscr.get())));
        let v = &state.vector;
        for (n, vr) in v.save_vr.iter().enumerate() {
            // Word 0 is the most significant; `Wide` is little-endian.
            let mut le: smallvec::SmallVec<[u8; 16]> =
                vr.iter().flat_map(|w| w.get().to_be_bytes()).collect();
            le.reverse();
            out.push(NamedReg {
                name: Cow::Owned(format!("v{n}")),
                value: RegValue::Wide(le),
            });
        }
        let vscr = v.save_vscr.get(3).map_or(0, |w| w.get());
        out.push(word("vscr".into(), u64::from(vscr)));
        out.push(word("vrvalid".into(), u64::from(v.save_vrvalid.get())));
    }

    /// Reads on to step `n`; to an earlier step, from the start again (a trace in memory:
    /// a stream cannot go back).
    fn seek(&mut self, n: u64) -> Result<(), Error> {
        let first_unread = if self.pending {
            self.step.i
        } else {
            self.next_i
        };
        if n < first_unread
            && let Some(start) = self.start.as_ref().and_then(Reader::again)
        {
            self.reader = start;
            self.step.clear();
            self.full = None;
            self.offset = 0;
            self.next_i = 0;
            self.pending = false;
            self.done = false;
        }
        steps::seek_by_scan(self, n)?;
        self.pending = true;
        Ok(())
    }

    fn position(&self) -> u64 {
        self.offset
    }
}

#[cfg(test)]
#[allow(
    clippy::indexing_slicing,
    clippy::unwrap_used,
    clippy::arithmetic_side_effects
)]
mod tests {
    use super::*;
    use crate::formats::amber::{FULL, TT6, TT6E};
    use crate::schema::testing::{Val, collect, input, records, testdata};
    use crate::{Handler, Options};

    fn open_steps<'a>(handler: Amber, input: &'a mut Input) -> Box<dyn Steps + 'a> {
        let options = Options::default();
        handler.steps(input, &mut Ctx::new(&options)).unwrap()
    }

    /// Every step, with the registers and named state before it.
    fn all(steps: &mut dyn Steps) -> Vec<(Step, Vec<u64>, Vec<NamedReg>)> {
        let mut out = Vec::new();
        while let Some(step) = steps.next_step() {
            let step = step.unwrap().clone();
            let mut named = Vec::new();
            steps.named_regs(&mut named);
            out.push((step, steps.regs().to_vec(), named));
        }
        out
    }

    /// The position of field `name` in the instruction rows.
    fn at(schema: &crate::Schema, name: &str) -> usize {
        schema.fields.iter().position(|f| f.name == name).unwrap()
    }

    /// TT6/TT6E steps are `dump`'s records: pc, instruction word, effective address with
    /// the operand size and direction; in memory and streamed; seeks land on the same step.
    #[test]
    fn tt6_steps_are_the_dump_records() {
        for (name, handler) in [
            ("all-opcodes.tt6", TT6),
            ("all-opcodes.tt6e", TT6E),
            ("escapes.tt6e", TT6E),
            ("example.tt6", TT6),
            ("trap.tt6e", TT6E),
            ("threads/thread_002.tt6", TT6),
        ] {
            let bytes = testdata(&format!("amber/{name}"));
            let base = name.rsplit('/').next().unwrap();
            let mut kinds = std::collections::BTreeSet::new();
            let mut reference = None;
            for gzip in [false, true] {
                let (tables, rows) = records(&handler, base, &bytes, gzip);
                let t = &tables[0];
                let (pc, op, ea, size, store) = (
                    at(t, "pc"),
                    at(t, "op"),
                    at(t, "ea"),
                    at(t, "size"),
                    at(t, "store"),
                );
                let mut inp = input(base, &bytes, gzip);
                let mut steps = open_steps(handler, &mut inp);
                assert_eq!(steps.isa(), Isa::Ppc32);
                assert!(steps.reg_names().is_empty() && !steps.kind().memory_is_snapshot());
                let got = all(steps.as_mut());
                let rows: Vec<_> = rows.iter().filter(|(t, _)| *t == 0).collect();
                assert_eq!(got.len(), rows.len(), "{name}");
                let thread = u64::from(name.contains("thread_002")) * 2;
                for ((step, regs, named), (_, row)) in got.iter().zip(&rows) {
                    assert_eq!(step.i, row[0].u());
                    assert_eq!(step.thread, thread);
                    assert_eq!(step.pc, row[pc].u());
                    let word = u32::try_from(row[op].u()).unwrap();
                    assert_eq!(step.opcode.as_slice(), word.to_be_bytes());
                    assert!(regs.is_empty() && named.is_empty());
                    match &row[ea] {
                        Val::Null => assert!(step.mem.is_empty()),
                        Val::U(addr) => {
                            let [a] = step.mem.as_slice() else {
                                panic!("{name}: one access")
                            };
                            assert_eq!(a.addr, *addr);
                            assert!(a.old.is_none() && a.new.is_none());
                            match &row[size] {
                                Val::U(n) => assert_eq!((u64::from(a.len), a.sized), (*n, true)),
                                _ => assert_eq!((a.len, a.sized), (4, false)),
                            }
                            let kind = match &row[store] {
                                Val::B(true) => AccessKind::Write,
                                Val::B(false) => AccessKind::Read,
                                _ => AccessKind::Unknown,
                            };
                            assert_eq!(a.kind, kind, "{name} {}", step.i);
                            kinds.insert(kind.name());
                        }
                        v => panic!("ea {v:?}"),
                    }
                }
                let got: Vec<Step> = got.into_iter().map(|g| g.0).collect();
                match &reference {
                    None => reference = Some(got),
                    Some(r) => assert_eq!(r, &got, "{name}: streamed"),
                }
                let r = reference.as_ref().unwrap();
                for n in [0, r.len() / 2, r.len() - 1] {
                    let mut inp = input(base, &bytes, gzip);
                    let mut steps = open_steps(handler, &mut inp);
                    steps.seek(n as u64).unwrap();
                    assert_eq!(steps.next_step().unwrap().unwrap(), &r[n], "{name} @{n}");
                }
                // One stream sought back and forth: in memory it reads again from the
                // start; a stream (gzip) goes forwards only.
                let mut inp = input(base, &bytes, gzip);
                let mut steps = open_steps(handler, &mut inp);
                for n in [r.len() - 1, 0, r.len() / 2, r.len() / 2, r.len() - 1, 0] {
                    match steps.seek(n as u64) {
                        Ok(()) => {
                            assert_eq!(steps.next_step().unwrap().unwrap(), &r[n], "{name} @{n}")
                        }
                        Err(e) => {
                            assert!(gzip, "{name} @{n}: {e}");
                            assert!(e.to_string().contains("cannot go back"), "{e}");
                        }
                    }
                }
                let mut inp = input(base, &bytes, gzip);
                let mut steps = open_steps(handler, &mut inp);
                assert!(matches!(
                    steps.seek(r.len() as u64),
                    Err(Error::Unsupported(_))
                ));
            }
            if name.starts_with("all-opcodes") {
                assert!(
                    kinds.contains("read") && kinds.contains("write"),
                    "{kinds:?}"
                );
            }
            if name == "all-opcodes.tt6e" {
                assert!(kinds.contains("unknown"), "cache-block ops: {kinds:?}");
            }
        }
    }

    /// A merged directory: steps in timeline order (`i` = `seq`), each with its thread.
    #[test]
    fn merged_steps_follow_the_timeline() {
        let dir =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/amber/threads");
        let mut input = Input::open(dir.as_os_str()).unwrap();
        let options = Options::default();
        let mut records = TT6.records(&mut input, &mut Ctx::new(&options)).unwrap();
        let t = records.tables()[0].clone();
        let mut rows = Vec::new();
        while let Some(r) = records.next_record() {
            rows.push(collect(r.unwrap().row()));
        }
        drop(records);
        let mut input = Input::open(dir.as_os_str()).unwrap();
        let got = all(open_steps(TT6, &mut input).as_mut());
        assert_eq!(got.len(), rows.len());
        let threads: std::collections::BTreeSet<u64> = got.iter().map(|g| g.0.thread).collect();
        assert_eq!(threads.len(), 3);
        for ((step, _, _), row) in got.iter().zip(&rows) {
            assert_eq!(step.i, row[at(&t, "seq")].u());
            assert_eq!(step.thread, row[at(&t, "thread")].u());
            assert_eq!(step.pc, row[at(&t, "pc")].u());
        }
        let mut input = Input::open(dir.as_os_str()).unwrap();
        let mut steps = open_steps(TT6, &mut input);
        steps.seek(5).unwrap();
        assert_eq!(steps.next_step().unwrap().unwrap(), &got[5].0);
    }

    /// FULL: pc, instruction word, no accesses; the thread state as the compared registers
    /// and the whole state (vector registers little-endian) as the named registers, the
    /// values `dump` shows; in memory and streamed.
    #[test]
    fn full_steps_carry_the_state() {
        for name in ["full-1004.full", "full-1008.full"] {
            let bytes = testdata(&format!("amber/{name}"));
            for gzip in [false, true] {
                let (tables, rows) = records(&FULL, name, &bytes, gzip);
                let regs_at = at(&tables[0], "regs");
                let mut inp = input(name, &bytes, gzip);
                let mut steps = open_steps(FULL, &mut inp);
                let names: Vec<String> = steps.reg_names().iter().map(|n| n.to_string()).collect();
                assert_eq!(names.len(), 40);
                assert_eq!((names[0].as_str(), names[2].as_str()), ("srr0", "r0"));
                let got = all(steps.as_mut());
                assert_eq!(got.len(), rows.len());
                assert!(!got.is_empty());
                for ((step, regs, named), (_, row)) in got.iter().zip(&rows) {
                    let state = row[regs_at].items();
                    assert_eq!(step.pc, row[1].u());
                    assert_eq!(step.pc, regs[0], "srr0 is the pc");
                    assert!(step.mem.is_empty());
                    let words: Vec<u64> = state[..40].iter().map(Val::u).collect();
                    assert_eq!(regs, &words);
                    assert_eq!(named.len(), 40 + 32 + 1 + 32 + 2);
                    for (k, reg) in named.iter().enumerate() {
                        match (&reg.value, &state[k]) {
                            (RegValue::Word(w), Val::U(x)) => assert_eq!(w, x, "{}", reg.name),
                            (RegValue::Wide(le), Val::Bytes(be)) => {
                                let mut be = be.clone();
                                be.reverse();
                                assert_eq!(le.as_slice(), be.as_slice(), "{}", reg.name);
                            }
                            other => panic!("{}: {other:?}", reg.name),
                        }
                    }
                }
            }
        }
    }
}
