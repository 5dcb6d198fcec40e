//! The memory words an instruction accesses, from iced-x86's instruction info and the
//! registers before it (`specs/notes/record-notes.md` section 3): what x64dbg records for
//! each step, whole 8-byte words, at most [`MAX_WORDS`].

use iced_x86::{
    CodeSize, CpuidFeature, Decoder, DecoderOptions, Instruction, InstructionInfoFactory, OpAccess,
    Register,
};

use crate::regs::UserRegs;

/// The most memory words one block holds (the format's limit, x64dbg-notes.md section 1).
pub const MAX_WORDS: usize = 32;

/// Decodes the instruction at `pc` from `bytes` (64-bit code). An undecodable instruction
/// comes back invalid ([`Instruction::is_invalid`]).
#[must_use]
pub fn decode(pc: u64, bytes: &[u8]) -> Instruction {
    Decoder::with_ip(64, bytes, pc, DecoderOptions::NONE).decode()
}

/// Whether `instruction` may change the x87, SSE or AVX state (so the recorder must read
/// `NT_X86_XSTATE` again after it): anything but the integer instruction sets. `syscall`
/// may (`rt_sigreturn`, `execve`), and so may an undecodable instruction.
#[must_use]
pub fn may_change_vector_state(instruction: &Instruction) -> bool {
    use CpuidFeature as F;
    instruction.is_invalid()
        || !instruction.cpuid_features().iter().all(|f| {
            matches!(
                f,
                F::INTEL8086
                    | F::INTEL186
                    | F::INTEL286
                    | F::INTEL386
                    | F::INTEL486
                    | F::X64
                    | F::CMOV
                    | F::CX8
                    | F::CMPXCHG16B
                    | F::CPUID
                    | F::TSC
                    | F::RDTSCP
                    | F::RDRAND
                    | F::BMI1
                    | F::BMI2
                    | F::LZCNT
                    | F::POPCNT
                    | F::ADX
                    | F::MOVBE
                    | F::MULTIBYTENOP
                    | F::PAUSE
                    | F::CET_IBT
            )
        })
}

/// The value iced asks for: a register (cut to its size) or a segment's base.
fn register_value(regs: &UserRegs, reg: Register) -> Option<u64> {
    let full = match reg {
        Register::ES | Register::CS | Register::SS | Register::DS => return Some(0),
        Register::FS => return Some(regs.fs_base),
        Register::GS => return Some(regs.gs_base),
        r => r.full_register(),
    };
    let value = match full {
        Register::RAX => regs.rax,
        Register::RCX => regs.rcx,
        Register::RDX => regs.rdx,
        Register::RBX => regs.rbx,
        Register::RSP => regs.rsp,
        Register::RBP => regs.rbp,
        Register::RSI => regs.rsi,
        Register::RDI => regs.rdi,
        Register::R8 => regs.r8,
        Register::R9 => regs.r9,
        Register::R10 => regs.r10,
        Register::R11 => regs.r11,
        Register::R12 => regs.r12,
        Register::R13 => regs.r13,
        Register::R14 => regs.r14,
        Register::R15 => regs.r15,
        Register::RIP => regs.rip,
        _ => return None,
    };
    Some(match reg.size() {
        1 => value & 0xff,
        2 => value & 0xffff,
        4 => value & 0xffff_ffff,
        _ => value,
    })
}

/// Finds the memory words of instructions; keeps iced's info factory between calls.
#[derive(Debug)]
pub struct Operands {
    factory: InstructionInfoFactory,
}

impl Default for Operands {
    fn default() -> Self {
        Operands::new()
    }
}

impl Operands {
    /// A new finder.
    #[must_use]
    pub fn new() -> Operands {
        Operands {
            factory: InstructionInfoFactory::new(),
        }
    }

    /// Appends to `words` the address of every 8-byte word `instruction` reads or writes
    /// with `regs` the state before it, operand by operand, the implicit ones (stack, string
    /// elements) included; `lea`, `nop` and prefetches access nothing, nor does a `rep`
    /// iteration with rcx = 0. Returns how many words were left out: past [`MAX_WORDS`] in
    /// `words`, or whose address could not be computed (gathers and scatters).
    pub fn words(
        &mut self,
        instruction: &Instruction,
        regs: &UserRegs,
        words: &mut Vec<u64>,
    ) -> u64 {
        if instruction.is_invalid() {
            return 0;
        }
        let rep = instruction.has_rep_prefix() || instruction.has_repne_prefix();
        if rep && instruction.is_string_instruction() && regs.rcx == 0 {
            return 0;
        }
        let mut cut = 0u64;
        let info = self.factory.info(instruction);
        for used in info.used_memory() {
            if used.access() == OpAccess::NoMemAccess {
                continue;
            }
            if used.vsib_size() != 0 {
                cut = cut.saturating_add(1);
                continue;
            }
            let Some(address) = used.virtual_address(0, |reg, _, _| register_value(regs, reg))
            else {
                cut = cut.saturating_add(1);
                continue;
            };
            let address = match used.address_size() {
                CodeSize::Code32 => address & 0xffff_ffff,
                CodeSize::Code16 => address & 0xffff,
                _ => address,
            };
            // String elements come with an unknown size: the instruction's element size.
            let size = match used.memory_size().size() {
                0 => instruction.memory_size().size().max(1),
                s => s,
            };
            let n = size.div_ceil(8);
            for k in 0..n {
                if words.len() >= MAX_WORDS {
                    cut = cut.saturating_add((n.saturating_sub(k)) as u64);
                    break;
                }
                words.push(address.wrapping_add(8u64.wrapping_mul(k as u64)));
            }
        }
        cut
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words_of(pc: u64, bytes: &[u8], regs: &UserRegs) -> (Vec<u64>, u64) {
        let i = decode(pc, bytes);
        let mut w = Vec::new();
        let cut = Operands::new().words(&i, regs, &mut w);
        (w, cut)
    }

    #[test]
    fn operands_give_their_words() {
        let regs = UserRegs {
            rax: 0x1000,
            rcx: 3,
            rsp: 0x7ff0,
            rdi: 0x2000,
            fs_base: 0x50_0000,
            ..UserRegs::default()
        };
        // mov [rax+rcx*4+8], edx: one word.
        assert_eq!(
            words_of(0x40_0000, &[0x89, 0x54, 0x88, 0x08], &regs).0,
            [0x1014]
        );
        // push rbp: [rsp-8].
        assert_eq!(words_of(0x40_0000, &[0x55], &regs).0, [0x7fe8]);
        // ret: [rsp].
        assert_eq!(words_of(0x40_0000, &[0xc3], &regs).0, [0x7ff0]);
        // lea rax, [rax+8]: nothing.
        assert!(
            words_of(0x40_0000, &[0x48, 0x8d, 0x40, 0x08], &regs)
                .0
                .is_empty()
        );
        // mov rax, fs:[0x28]: the fs base is added.
        let fs = [0x64, 0x48, 0x8b, 0x04, 0x25, 0x28, 0, 0, 0];
        assert_eq!(words_of(0x40_0000, &fs, &regs).0, [0x50_0028]);
        // mov eax, [rip+0x10] at 0x40_0000 (6 bytes): 0x40_0016.
        let riprel = [0x8b, 0x05, 0x10, 0, 0, 0];
        assert_eq!(words_of(0x40_0000, &riprel, &regs).0, [0x40_0016]);
        // movdqu [rdi], xmm0: two words.
        let sse = [0xf3, 0x0f, 0x7f, 0x07];
        assert_eq!(words_of(0x40_0000, &sse, &regs).0, [0x2000, 0x2008]);
        // rep stosq with rcx = 3: one element at [rdi]; with rcx = 0: nothing.
        assert_eq!(words_of(0x40_0000, &[0xf3, 0x48, 0xab], &regs).0, [0x2000]);
        let zero = UserRegs { rcx: 0, ..regs };
        assert!(words_of(0x40_0000, &[0xf3, 0x48, 0xab], &zero).0.is_empty());
        // fxsave [rdi]: 512 bytes, cut to 32 words.
        let (w, cut) = words_of(0x40_0000, &[0x0f, 0xae, 0x07], &regs);
        assert_eq!(w.len(), MAX_WORDS);
        assert_eq!(cut, 64 - 32);
    }

    #[test]
    fn vector_state_changes_are_foreseen() {
        let pc = 0x40_0000;
        // add rax, 1; push rbp; mov [rax], edx: integer only.
        for bytes in [&[0x48, 0x83, 0xc0, 0x01][..], &[0x55], &[0x89, 0x10]] {
            assert!(!may_change_vector_state(&decode(pc, bytes)), "{bytes:x?}");
        }
        // syscall; movdqu xmm0, [rdi]; fld1; vzeroupper; ldmxcsr [rdi]; xrstor [rdi].
        let changing: [&[u8]; 6] = [
            &[0x0f, 0x05],
            &[0xf3, 0x0f, 0x6f, 0x07],
            &[0xd9, 0xe8],
            &[0xc5, 0xf8, 0x77],
            &[0x0f, 0xae, 0x17],
            &[0x0f, 0xae, 0x2f],
        ];
        for bytes in changing {
            assert!(may_change_vector_state(&decode(pc, bytes)), "{bytes:x?}");
        }
    }
}
