//! Owned values shared by the reader and the writer.

/// How a block stores its thread id (`specs/notes/x64dbg-notes.md` sections 4.4 and 5).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum ThreadField {
    /// No thread id: the thread is the previous block's.
    #[default]
    Absent,
    /// Flag 0x80 set and 4 thread-id bytes.
    Flagged,
    /// 4 thread-id bytes **without** the flag: the bug of x64dbg writers before PR #3920,
    /// on the first block after a thread switch.
    Unflagged,
}

/// One register change: the absolute word index in the REGDUMP and the word's value before
/// the instruction executes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RegChange {
    /// Absolute word index (0..172 on x64, 0..216 on x86).
    pub index: u16,
    /// The value (at most 32 bits on x86).
    pub value: u64,
}

/// One memory access: a whole word at `address`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct MemAccess {
    /// The flag byte: bit 0 = memory unchanged (no new value stored); bits 1-7 reserved.
    pub flags: u8,
    /// Address of the word.
    pub address: u64,
    /// Content before the instruction.
    pub old: u64,
    /// Content after the instruction, when it changed (flag bit 0 clear).
    pub new: Option<u64>,
}

/// One instruction block as an owned value, the writer's input and
/// [`Instruction::to_record`](crate::Instruction::to_record)'s output.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct InstructionRecord {
    /// The thread that executed it (written only when `thread_field` says so).
    pub thread: u32,
    /// How the block stores the thread id.
    pub thread_field: ThreadField,
    /// The instruction bytes, 1..=15.
    pub opcode: Vec<u8>,
    /// Register changes, strictly increasing indices.
    pub regs: Vec<RegChange>,
    /// Memory accesses, at most 32.
    pub mem: Vec<MemAccess>,
}

/// One block as an owned value.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Record {
    /// An executed instruction (type 0).
    Instruction(InstructionRecord),
    /// A user-defined block (type `0x80..=0xff`), not an instruction.
    User {
        /// The type byte, `0x80..=0xff`.
        block_type: u8,
        /// The payload.
        payload: Vec<u8>,
    },
}
