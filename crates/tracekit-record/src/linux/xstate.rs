//! `PTRACE_GETREGSET` with `NT_X86_XSTATE`: the x87, SSE and AVX state, which nix has no
//! safe wrapper for (its `RegisterSet` trait knows only `NT_PRSTATUS` and `NT_PRFPREG`).
//! The only `unsafe` code of the crate. The bytes are parsed by the pure
//! [`crate::regs::regdump`].

use nix::errno::Errno;
use nix::libc;
use nix::unistd::Pid;

/// `NT_X86_XSTATE` (`<elf.h>`; neither nix nor libc has it).
const NT_X86_XSTATE: libc::c_int = 0x202;

/// Reads the XSAVE area of stopped tracee `pid` into `buf`; returns the bytes the kernel
/// filled (it truncates silently to `buf`'s length).
///
/// # Errors
///
/// The errno of `ptrace` (`ESRCH` when the tracee died, `EIO`/`ENODEV` without XSAVE).
pub fn read(pid: Pid, buf: &mut [u8]) -> Result<usize, Errno> {
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    // SAFETY: `iov` describes `buf`, which is valid for writes of `buf.len()` bytes and
    // borrowed mutably for the call; the kernel writes at most `iov_len` bytes there and
    // updates `iov_len` (a local) to the bytes written. The pointers do not outlive the call.
    #[allow(unsafe_code)]
    let rc = unsafe {
        libc::ptrace(
            libc::PTRACE_GETREGSET,
            libc::pid_t::from(pid),
            NT_X86_XSTATE as usize as *mut libc::c_void,
            (&raw mut iov).cast::<libc::c_void>(),
        )
    };
    if rc == -1 {
        return Err(Errno::last());
    }
    Ok(iov.iov_len.min(buf.len()))
}
