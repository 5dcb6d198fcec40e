//! Writers for TT6, TT6E and FULL, mirroring `read.rs` and `full.rs`. The TT6 writer
//! classifies each opcode with the same tables as the reader, so a record's words always
//! match its class: a caller cannot write a record the reader would split differently.

use std::io::Write;

use trace_core::Offset;
use zerocopy::{FromZeros, IntoBytes};

use crate::escape::Escape;
use crate::full::RecordSize;
use crate::opcode::{Class, Dialect, classify, is_escape};
use crate::raw::{FULL_MAGIC, FloatState, ThreadState, VectorState, escape_word};
use crate::{Error, Tt6Reader, WriteError};

/// One instruction record, owned: what [`Tt6Writer::write`] takes and
/// [`crate::Record::to_instruction`] gives.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Instruction {
    /// The opcode word (its top 6 bits must not be zero: that would be an escape).
    pub opcode: u32,
    /// The next PC: required for flow records, absent otherwise.
    pub next_pc: Option<u32>,
    /// The effective address: required for memory and memory-extended records.
    pub ea: Option<u32>,
    /// The third word: required for memory-extended records (XER or rB).
    pub extra: Option<u32>,
    /// Escapes written before the instruction.
    pub escapes: Vec<Escape>,
}

impl Instruction {
    /// A compute instruction.
    #[must_use]
    pub fn compute(opcode: u32) -> Instruction {
        Instruction {
            opcode,
            ..Instruction::default()
        }
    }

    /// A flow instruction going to `next_pc`.
    #[must_use]
    pub fn flow(opcode: u32, next_pc: u32) -> Instruction {
        Instruction {
            opcode,
            next_pc: Some(next_pc),
            ..Instruction::default()
        }
    }

    /// A memory instruction with effective address `ea`.
    #[must_use]
    pub fn memory(opcode: u32, ea: u32) -> Instruction {
        Instruction {
            opcode,
            ea: Some(ea),
            ..Instruction::default()
        }
    }

    /// A memory-extended instruction (`lswx`, `stswx`, `dst*`).
    #[must_use]
    pub fn memory_extended(opcode: u32, ea: u32, extra: u32) -> Instruction {
        Instruction {
            opcode,
            ea: Some(ea),
            extra: Some(extra),
            ..Instruction::default()
        }
    }

    /// Adds an escape before the instruction.
    #[must_use]
    pub fn with_escape(mut self, e: Escape) -> Instruction {
        self.escapes.push(e);
        self
    }
}

/// A whole TT6/TT6E trace, owned.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Trace {
    /// TT6 or TT6E.
    pub dialect: Dialect,
    /// The PC of the first instruction.
    pub initial_pc: u32,
    /// The instruction records.
    pub instructions: Vec<Instruction>,
    /// Escapes after the last instruction.
    pub trailing_escapes: Vec<Escape>,
}

impl Trace {
    /// Reads a whole trace into the owned model.
    ///
    /// # Errors
    ///
    /// The first error of the reader.
    pub fn read(data: &[u8], dialect: Dialect) -> Result<Trace, Error> {
        let reader = Tt6Reader::parse(data, dialect)?;
        let mut records = reader.records();
        let mut instructions = Vec::new();
        for r in records.by_ref() {
            instructions.push(r?.to_instruction());
        }
        let trailing_escapes = records
            .dangling_escapes()
            .iter()
            .map(|e| e.to_owned())
            .collect();
        Ok(Trace {
            dialect,
            initial_pc: reader.initial_pc(),
            instructions,
            trailing_escapes,
        })
    }

    /// Encodes the trace.
    ///
    /// # Errors
    ///
    /// [`WriteError::Inconsistent`] or [`WriteError::BadEscape`] for records that do not
    /// fit their class.
    pub fn to_bytes(&self) -> Result<Vec<u8>, WriteError> {
        let mut w = Tt6Writer::new(Vec::new(), self.dialect, self.initial_pc)?;
        for i in &self.instructions {
            w.write(i)?;
        }
        w.write_trailing_escapes(&self.trailing_escapes)?;
        Ok(w.finish())
    }
}

/// Writes TT6 or TT6E records to `W`.
#[derive(Debug)]
pub struct Tt6Writer<W> {
    out: W,
    dialect: Dialect,
    index: u64,
    offset: u64,
}

impl<W: Write> Tt6Writer<W> {
    /// Writes the initial PC.
    ///
    /// # Errors
    ///
    /// The output fails.
    pub fn new(mut out: W, dialect: Dialect, initial_pc: u32) -> Result<Tt6Writer<W>, WriteError> {
        out.write_all(&initial_pc.to_be_bytes())?;
        Ok(Tt6Writer {
            out,
            dialect,
            index: 0,
            offset: 4,
        })
    }

    fn word(&mut self, w: u32) -> Result<(), WriteError> {
        self.out.write_all(&w.to_be_bytes())?;
        self.offset = self.offset.saturating_add(4);
        Ok(())
    }

    fn escapes(&mut self, escapes: &[Escape]) -> Result<(), WriteError> {
        for e in escapes {
            let Ok(n) = u16::try_from(e.words.len()) else {
                return Err(self.bad_escape(e));
            };
            if e.code > 0x3FF {
                return Err(self.bad_escape(e));
            }
            self.word(escape_word(e.code, n))?;
            for &w in &e.words {
                self.word(w)?;
            }
        }
        Ok(())
    }

    #[cold]
    fn bad_escape(&self, e: &Escape) -> WriteError {
        WriteError::BadEscape {
            code: e.code,
            words: e.words.len(),
            offset: Offset(self.offset),
        }
    }

    /// Classifies `i.opcode` and writes its escapes and the record.
    ///
    /// # Errors
    ///
    /// [`WriteError::Inconsistent`] when the opcode is an escape word or the fields do not
    /// match the class (flow: `next_pc` only; memory: `ea` only; memory-extended: `ea` and
    /// `extra`; compute: none); nothing is written then. [`WriteError::BadEscape`],
    /// [`WriteError::Io`].
    pub fn write(&mut self, i: &Instruction) -> Result<(), WriteError> {
        let class = classify(self.dialect, i.opcode);
        let problem = if is_escape(i.opcode) {
            Some("an opcode with major 0 would read as an escape record")
        } else {
            match (class, i.next_pc, i.ea, i.extra) {
                (Class::Compute, None, None, None)
                | (Class::Flow, Some(_), None, None)
                | (Class::Memory, None, Some(_), None)
                | (Class::MemoryExtended, None, Some(_), Some(_)) => None,
                (Class::Flow, None, ..) => Some("a flow record needs next_pc"),
                (Class::Memory | Class::MemoryExtended, _, None, _) => {
                    Some("a memory record needs ea")
                }
                (Class::MemoryExtended, _, _, None) => Some("a memory-extended record needs extra"),
                _ => Some("fields that its class does not have are set"),
            }
        };
        if let Some(problem) = problem {
            return Err(WriteError::Inconsistent {
                index: self.index,
                opcode: i.opcode,
                class,
                problem,
                offset: Offset(self.offset),
            });
        }
        self.escapes(&i.escapes)?;
        self.word(i.opcode)?;
        for w in [i.next_pc, i.ea, i.extra].into_iter().flatten() {
            self.word(w)?;
        }
        self.index = self.index.wrapping_add(1);
        Ok(())
    }

    /// Writes escapes that no instruction follows (the end of a trace).
    ///
    /// # Errors
    ///
    /// [`WriteError::BadEscape`], [`WriteError::Io`].
    pub fn write_trailing_escapes(&mut self, escapes: &[Escape]) -> Result<(), WriteError> {
        self.escapes(escapes)
    }

    /// Instructions written so far.
    #[must_use]
    pub fn count(&self) -> u64 {
        self.index
    }

    /// The output.
    pub fn finish(self) -> W {
        self.out
    }
}

/// One FULL record, owned.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FullRecordOwned {
    /// The opcode word.
    pub opcode: u32,
    /// The pad word (1008-byte records only; 0 when written as 1004).
    pub pad: u32,
    /// Integer state.
    pub thread: ThreadState,
    /// Floating-point state.
    pub float: FloatState,
    /// Vector state.
    pub vector: VectorState,
}

impl FullRecordOwned {
    /// A record with all state zero.
    #[must_use]
    pub fn zeroed(opcode: u32) -> FullRecordOwned {
        FullRecordOwned {
            opcode,
            pad: 0,
            thread: ThreadState::new_zeroed(),
            float: FloatState::new_zeroed(),
            vector: VectorState::new_zeroed(),
        }
    }
}

/// Writes a FULL trace: the magic, then records of the chosen size.
#[derive(Debug)]
pub struct FullWriter<W> {
    out: W,
    size: RecordSize,
}

impl<W: Write> FullWriter<W> {
    /// Writes the magic.
    ///
    /// # Errors
    ///
    /// The output fails.
    pub fn new(mut out: W, size: RecordSize) -> Result<FullWriter<W>, WriteError> {
        out.write_all(&FULL_MAGIC.to_be_bytes())?;
        Ok(FullWriter { out, size })
    }

    /// Writes one record (the pad word only in 1008-byte records).
    ///
    /// # Errors
    ///
    /// The output fails.
    pub fn write(&mut self, r: &FullRecordOwned) -> Result<(), WriteError> {
        self.out.write_all(&r.opcode.to_be_bytes())?;
        self.out.write_all(r.thread.as_bytes())?;
        if self.size == RecordSize::Struct1008 {
            self.out.write_all(&r.pad.to_be_bytes())?;
        }
        self.out.write_all(r.float.as_bytes())?;
        self.out.write_all(r.vector.as_bytes())?;
        Ok(())
    }

    /// The output.
    pub fn finish(self) -> W {
        self.out
    }
}
