//! Escape records: a word in the opcode slot whose top 6 bits are zero, with a 10-bit code
//! and a 16-bit count of payload words (notes §4). They apply to the next instruction.

use core::fmt;

use trace_core::Offset;

use crate::raw::{Word, code, escape_code, escape_count};

/// The meaning of an escape code (spec "Thread Synchronization Records").
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum EscapeKind {
    /// 0x00: segment register.
    SegmentRegister,
    /// 0x01: optional data address for the next instruction.
    OptionalDataAddress,
    /// 0x02: condition register value.
    ConditionRegister,
    /// 0x03: real address of the branch target of the next instruction.
    RealBranchTarget,
    /// 0x04: real data address for the next instruction.
    RealDataAddress,
    /// 0x05: real address of the next instruction.
    RealNextInstruction,
    /// 0x20: `SYNC_SIGNAL`.
    SyncSignal,
    /// 0x21: `SYNC_BROADCAST_SIGNAL`.
    SyncBroadcast,
    /// 0x30: `SYNC_WAIT`.
    SyncWait,
    /// 0x31: `SYNC_TRY_WAIT` (a successful try).
    SyncTryWait,
    /// Any other code (kept, never rejected).
    Unknown(u16),
}

impl EscapeKind {
    /// The kind of a 10-bit code.
    #[must_use]
    pub fn from_code(c: u16) -> EscapeKind {
        match c {
            code::SEGMENT_REGISTER => EscapeKind::SegmentRegister,
            code::OPTIONAL_DATA_ADDRESS => EscapeKind::OptionalDataAddress,
            code::CONDITION_REGISTER => EscapeKind::ConditionRegister,
            code::REAL_BRANCH_TARGET => EscapeKind::RealBranchTarget,
            code::REAL_DATA_ADDRESS => EscapeKind::RealDataAddress,
            code::REAL_NEXT_INSTRUCTION => EscapeKind::RealNextInstruction,
            code::SYNC_SIGNAL => EscapeKind::SyncSignal,
            code::SYNC_BROADCAST => EscapeKind::SyncBroadcast,
            code::SYNC_WAIT => EscapeKind::SyncWait,
            code::SYNC_TRY_WAIT => EscapeKind::SyncTryWait,
            other => EscapeKind::Unknown(other),
        }
    }

    /// The name used in dumps: `segment_register`, `optional_data_address`,
    /// `condition_register`, `real_branch_target`, `real_data_address`,
    /// `real_next_instruction`, `sync_signal`, `sync_broadcast`, `sync_wait`,
    /// `sync_try_wait`, `unknown`.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            EscapeKind::SegmentRegister => "segment_register",
            EscapeKind::OptionalDataAddress => "optional_data_address",
            EscapeKind::ConditionRegister => "condition_register",
            EscapeKind::RealBranchTarget => "real_branch_target",
            EscapeKind::RealDataAddress => "real_data_address",
            EscapeKind::RealNextInstruction => "real_next_instruction",
            EscapeKind::SyncSignal => "sync_signal",
            EscapeKind::SyncBroadcast => "sync_broadcast",
            EscapeKind::SyncWait => "sync_wait",
            EscapeKind::SyncTryWait => "sync_try_wait",
            EscapeKind::Unknown(_) => "unknown",
        }
    }

    /// Whether this is one of the four synchronization kinds.
    #[must_use]
    pub fn is_sync(self) -> bool {
        self.sync_kind().is_some()
    }

    /// The synchronization kind, if any.
    #[must_use]
    pub fn sync_kind(self) -> Option<SyncKind> {
        match self {
            EscapeKind::SyncSignal => Some(SyncKind::Signal),
            EscapeKind::SyncBroadcast => Some(SyncKind::Broadcast),
            EscapeKind::SyncWait => Some(SyncKind::Wait),
            EscapeKind::SyncTryWait => Some(SyncKind::TryWait),
            _ => None,
        }
    }
}

impl fmt::Display for EscapeKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The four thread-synchronization escape kinds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SyncKind {
    /// `SYNC_SIGNAL`: increments the sync point's count (before the function's code).
    Signal,
    /// `SYNC_BROADCAST_SIGNAL`: increments the count.
    Broadcast,
    /// `SYNC_WAIT`: the function completed having observed the count.
    Wait,
    /// `SYNC_TRY_WAIT`: a successful try, having observed the count.
    TryWait,
}

impl SyncKind {
    /// Whether the event increments the count (signal or broadcast).
    #[must_use]
    pub fn is_signal(self) -> bool {
        matches!(self, SyncKind::Signal | SyncKind::Broadcast)
    }
}

/// A synchronization event: `[code : 2] address count`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SyncEvent {
    /// Signal, broadcast, wait or try-wait.
    pub kind: SyncKind,
    /// The sync point (mutex or condition variable) address.
    pub address: u32,
    /// The sync point count.
    pub count: u32,
}

/// One escape record, borrowed from the input.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EscapeRef<'a> {
    /// File offset of the escape word.
    pub offset: Offset,
    /// The 10-bit code.
    pub code: u16,
    /// The payload words.
    pub words: &'a [Word],
}

impl<'a> EscapeRef<'a> {
    /// The code's meaning.
    #[must_use]
    pub fn kind(&self) -> EscapeKind {
        EscapeKind::from_code(self.code)
    }

    /// Payload word `i`.
    #[must_use]
    pub fn word(&self, i: usize) -> Option<u32> {
        self.words.get(i).map(|w| w.get())
    }

    /// The value of a codes 0x00-0x05 escape: its first payload word (the payload layout of
    /// these codes is undocumented; all words stay available in [`EscapeRef::words`]).
    #[must_use]
    pub fn value(&self) -> Option<u32> {
        if self.code <= code::REAL_NEXT_INSTRUCTION {
            self.word(0)
        } else {
            None
        }
    }

    /// The synchronization event of a sync escape with at least two payload words.
    #[must_use]
    pub fn sync(&self) -> Option<SyncEvent> {
        let kind = self.kind().sync_kind()?;
        Some(SyncEvent {
            kind,
            address: self.word(0)?,
            count: self.word(1)?,
        })
    }

    /// An owned copy.
    #[must_use]
    pub fn to_owned(&self) -> Escape {
        Escape {
            code: self.code,
            words: self.words.iter().map(|w| w.get()).collect(),
        }
    }
}

/// The escape records attached to one instruction: a run of escape words and payloads,
/// already checked by the reader. Iterate to get each [`EscapeRef`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Escapes<'a> {
    words: &'a [Word],
    offset: u64,
}

impl<'a> Escapes<'a> {
    /// Wraps words that the reader checked to be a sequence of complete escape records.
    pub(crate) fn new(words: &'a [Word], offset: u64) -> Escapes<'a> {
        Escapes { words, offset }
    }

    /// Whether there are none.
    #[inline]
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.words.is_empty()
    }

    /// The raw words (escape words and payloads).
    #[must_use]
    pub fn raw(&self) -> &'a [Word] {
        self.words
    }

    /// Iterates over the escape records.
    #[must_use]
    pub fn iter(&self) -> EscapeIter<'a> {
        EscapeIter {
            words: self.words,
            offset: self.offset,
        }
    }
}

impl<'a> IntoIterator for Escapes<'a> {
    type Item = EscapeRef<'a>;
    type IntoIter = EscapeIter<'a>;
    fn into_iter(self) -> EscapeIter<'a> {
        self.iter()
    }
}

/// Iterator over [`Escapes`].
#[derive(Clone, Debug)]
pub struct EscapeIter<'a> {
    words: &'a [Word],
    offset: u64,
}

impl<'a> Iterator for EscapeIter<'a> {
    type Item = EscapeRef<'a>;
    fn next(&mut self) -> Option<EscapeRef<'a>> {
        let (head, rest) = self.words.split_first()?;
        let w = head.get();
        let n = usize::from(escape_count(w)).min(rest.len());
        let (words, rest) = rest.split_at(n);
        let e = EscapeRef {
            offset: Offset(self.offset),
            code: escape_code(w),
            words,
        };
        self.words = rest;
        self.offset = self
            .offset
            .saturating_add((n as u64).saturating_add(1).saturating_mul(4));
        Some(e)
    }
}

/// An owned escape record, for writers and models.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Escape {
    /// The 10-bit code.
    pub code: u16,
    /// The payload words (at most 65535).
    pub words: Vec<u32>,
}

impl Escape {
    /// A synchronization escape `[code : 2] address count`.
    #[must_use]
    pub fn sync(kind: SyncKind, address: u32, count: u32) -> Escape {
        let code = match kind {
            SyncKind::Signal => code::SYNC_SIGNAL,
            SyncKind::Broadcast => code::SYNC_BROADCAST,
            SyncKind::Wait => code::SYNC_WAIT,
            SyncKind::TryWait => code::SYNC_TRY_WAIT,
        };
        Escape {
            code,
            words: vec![address, count],
        }
    }

    /// The code's meaning.
    #[must_use]
    pub fn kind(&self) -> EscapeKind {
        EscapeKind::from_code(self.code)
    }
}
