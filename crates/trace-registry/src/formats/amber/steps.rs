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

use amber_tt6::threads::{Merge, parse_thread_file_name};
use amber_tt6::{
    Access, FullRecord, FullRecordOwned, FullStreamReader, Tt6Reader, Tt6StreamReader,
};

use super::{Amber, CACHE_LINE, Kind, merge_dir};
use crate::steps::{self, AccessKind, Isa, NamedReg, RegValue, Step, Steps};
use crate::{Ctx, Error, Input, Source};

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

enum Reader<'a> {
    Slice(amber_tt6::Records<'a>),
    Stream(Box<Tt6StreamReader<Box<dyn std::io::Read + Send>>>),
    Merged(Merge<'a>),
    FullSlice(amber_tt6::FullRecords<'a>),
    FullStream(Box<FullStreamReader<Box<dyn std::io::Read + Send>>>),
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
    pending: bool,
    done: bool,
}

impl<'a> AmberSteps<'a> {
    pub(super) fn open(
        handler: Amber,
        input: &'a mut Input,
        ctx: &Ctx<'_>,
    ) -> Result<AmberSteps<'a>, Error> {
        let thread = parse_thread_file_name(&input.logical_name()).map_or(0, |(t, _)| t.0);
        let full = handler.kind() == Kind::Full;
        let reader = if input.is_dir() {
            if full {
                return Err(Error::Unsupported(
                    "amber FULL traces are single files, not directories".into(),
                ));
            }
            Reader::Merged(merge_dir(handler, input.parts_mut().unwrap_or_default())?)
        } else {
            let dialect = handler.dialect();
            match (input.source(), full) {
                (Source::Bytes(b), false) => Reader::Slice(
                    Tt6Reader::parse(b, dialect)
                        .map_err(|e| handler.err(e))?
                        .records(),
                ),
                (Source::Stream(s), false) => Reader::Stream(Box::new(
                    Tt6StreamReader::from_reader(s, dialect).map_err(|e| handler.err(e))?,
                )),
                (Source::Bytes(b), true) => {
                    Reader::FullSlice(handler.full_reader(b, ctx.options)?.records())
                }
                (Source::Stream(s), true) => {
                    let size = match ctx.options.record_size {
                        Some(n) => {
                            Some(amber_tt6::RecordSize::from_bytes(n).map_err(|e| handler.err(e))?)
                        }
                        None => None,
                    };
                    Reader::FullStream(Box::new(
                        FullStreamReader::from_reader(s, size).map_err(|e| handler.err(e))?,
                    ))
                }
            }
        };
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
            Some(Ok(())) => Some(Ok(&self.step)),
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

    fn seek(&mut self, n: u64) -> Result<(), Error> {
        steps::seek_by_scan(self, n)?;
        self.pending = true;
        Ok(())
    }

    fn position(&self) -> u64 {
        self.offset
    }
}
