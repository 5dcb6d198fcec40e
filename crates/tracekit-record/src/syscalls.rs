//! The user memory system calls write (`specs/notes/record-notes.md` section 4): recorded
//! as memory writes of the `syscall` instruction's step, so that the trace knows what the
//! kernel put there (a `read`'s bytes, a `stat` buffer).
//!
//! [`kernel_writes`] is a pure function of the call's number, arguments and result and of
//! the tracee's memory (through a callback, for the iovec arrays, message headers and
//! length words some calls take). Before the step there is no result yet: it then gives
//! the most the call may write (the buffer sizes the arguments give), whose words' old
//! values the recorder reads before the call.

/// The most bytes one range counts, whatever an argument says (a block holds 256 bytes).
const MAX_RANGE: u64 = 1 << 20;

/// The most iovecs read from the tracee per call (`UIO_MAXIOV`).
const MAX_IOVECS: u64 = 1024;

/// `CLONE_PARENT_SETTID`: clone writes the new thread's id at `parent_tid`.
const CLONE_PARENT_SETTID: u64 = 0x0010_0000;

/// Reads tracee memory: fills the buffer and returns `true`, or `false` if unreadable.
pub type ReadMem<'a> = dyn FnMut(u64, &mut [u8]) -> bool + 'a;

fn read_u64(read: &mut ReadMem<'_>, addr: u64) -> Option<u64> {
    let mut b = [0u8; 8];
    read(addr, &mut b).then(|| u64::from_le_bytes(b))
}

fn read_u32(read: &mut ReadMem<'_>, addr: u64) -> Option<u64> {
    let mut b = [0u8; 4];
    read(addr, &mut b).then(|| u64::from(u32::from_le_bytes(b)))
}

/// Collects ranges, dropping null and empty ones.
struct Ranges<'a> {
    out: &'a mut Vec<(u64, u64)>,
}

impl Ranges<'_> {
    fn push(&mut self, addr: u64, len: u64) {
        if addr != 0 && len != 0 {
            self.out.push((addr, len.min(MAX_RANGE)));
        }
    }

    /// The iovec array at `iov` (`count` entries), filled in order up to `total` bytes.
    fn iovecs(&mut self, read: &mut ReadMem<'_>, iov: u64, count: u64, total: u64) {
        let mut left = total;
        for k in 0..count.min(MAX_IOVECS) {
            if left == 0 {
                break;
            }
            let at = iov.wrapping_add(16u64.wrapping_mul(k));
            let (Some(base), Some(len)) = (read_u64(read, at), read_u64(read, at.wrapping_add(8)))
            else {
                break;
            };
            let n = len.min(left);
            self.push(base, n);
            left = left.saturating_sub(n);
        }
    }

    /// A socket address buffer whose length is the u32 at `len_addr` (a value-result
    /// argument: the new length after the call), and that length word.
    fn sockaddr(&mut self, read: &mut ReadMem<'_>, addr: u64, len_addr: u64) {
        if len_addr == 0 {
            return;
        }
        if let Some(len) = read_u32(read, len_addr) {
            self.push(addr, len.min(128));
        }
        self.push(len_addr, 4);
    }
}

/// Appends to `out` the `(address, length)` ranges that system call `nr` with arguments
/// `args` (rdi, rsi, rdx, r10, r8, r9) writes in user memory: with `result` `Some(rax)`
/// after the call, what it wrote (nothing when it failed); with `None` before it, the most
/// it may write. `read` reads the tracee's memory. Calls not known to write memory add
/// nothing.
pub fn kernel_writes(
    nr: u64,
    args: [u64; 6],
    result: Option<i64>,
    read: &mut ReadMem<'_>,
    out: &mut Vec<(u64, u64)>,
) {
    if result.is_some_and(|r| r < 0) {
        return;
    }
    let [a0, a1, a2, a3, a4, a5] = args;
    // The returned byte count after the call, else the bound the arguments give.
    let count = |bound: u64| result.map_or(bound, |r| r.unsigned_abs());
    let mut r = Ranges { out };
    match nr {
        // read, pread64, getdents64, readlink: (_, buf, size) → result bytes.
        0 | 17 | 217 | 89 => r.push(a1, count(a2)),
        // getrandom, getcwd: (buf, size).
        318 | 79 => r.push(a0, count(a1)),
        // readlinkat: (dfd, path, buf, size).
        267 => r.push(a2, count(a3)),
        // sched_getaffinity: (pid, len, mask).
        204 => r.push(a2, count(a1)),
        // readv, preadv, preadv2: (fd, iov, iovcnt).
        19 | 295 | 327 => {
            let total = result.map_or(u64::MAX, i64::unsigned_abs);
            r.iovecs(read, a1, a2, total);
        }
        // recvfrom: (fd, buf, len, flags, src_addr, addrlen).
        45 => {
            r.push(a1, count(a2));
            r.sockaddr(read, a4, a5);
        }
        // recvmsg: (fd, msghdr, flags): the header (its lengths change), the name, the
        // data up to the result and the control buffer, at their new lengths.
        47 => {
            r.push(a1, 56);
            let field = |read: &mut ReadMem<'_>, off: u64| read_u64(read, a1.wrapping_add(off));
            if let (
                Some(name),
                Some(namelen),
                Some(iov),
                Some(iovlen),
                Some(control),
                Some(controllen),
            ) = (
                field(read, 0),
                read_u32(read, a1.wrapping_add(8)),
                field(read, 16),
                field(read, 24),
                field(read, 32),
                field(read, 40),
            ) {
                r.push(name, namelen.min(128));
                let total = result.map_or(u64::MAX, i64::unsigned_abs);
                r.iovecs(read, iov, iovlen, total);
                r.push(control, controllen);
            }
        }
        // accept, getsockname, getpeername, accept4: (fd, addr, addrlen).
        43 | 51 | 52 | 288 => r.sockaddr(read, a1, a2),
        // getsockopt: (fd, level, name, value, len).
        55 => r.sockaddr(read, a3, a4),
        // stat, fstat, lstat: (_, buf); newfstatat: (dfd, path, buf).
        4..=6 => r.push(a1, 144),
        262 => r.push(a2, 144),
        // statx: (dfd, path, flags, mask, buf).
        332 => r.push(a4, 256),
        63 => r.push(a0, 390),
        96 => {
            r.push(a0, 16);
            r.push(a1, 8);
        }
        // pipe, pipe2: int[2]; socketpair: (domain, type, protocol, sv).
        22 | 293 => r.push(a0, 8),
        53 => r.push(a3, 8),
        // wait4: (pid, status, options, rusage); waitid: (which, pid, info, options, rusage).
        61 => {
            r.push(a1, 4);
            r.push(a3, 144);
        }
        247 => {
            r.push(a2, 128);
            r.push(a4, 144);
        }
        // rt_sigaction: (sig, act, oldact, sigsetsize); rt_sigprocmask: (how, set, old, size).
        13 => r.push(a2, 24u64.saturating_add(a3.min(128))),
        14 => r.push(a2, a3.min(128)),
        99 => r.push(a0, 112),
        98 => r.push(a1, 144),
        100 => r.push(a0, 32),
        201 => r.push(a0, 8),
        // getrlimit (res, rlim); clock_gettime, clock_getres (clock, ts).
        97 | 228 | 229 => r.push(a1, 16),
        // prlimit64: (pid, resource, new, old).
        302 => r.push(a3, 16),
        // getresuid, getresgid.
        118 | 120 => {
            r.push(a0, 4);
            r.push(a1, 4);
            r.push(a2, 4);
        }
        // poll, ppoll: (fds, nfds): the revents of every entry.
        7 | 271 => r.push(a0, a1.saturating_mul(8)),
        // epoll_wait, epoll_pwait: (epfd, events, maxevents) → result events of 12 bytes.
        232 | 281 => r.push(a1, count(a2).saturating_mul(12)),
        // select, pselect6: (n, in, out, except, timeout): the fd sets.
        23 | 270 => {
            let set = a0.div_ceil(64).saturating_mul(8);
            r.push(a1, set);
            r.push(a2, set);
            r.push(a3, set);
        }
        // ioctl: (fd, request, arg), the size from the request.
        16 => r.push(a2, ioctl_size(a1)),
        // clone: (flags, stack, parent_tid, child_tid, tls).
        56 if a0 & CLONE_PARENT_SETTID != 0 => r.push(a2, 4),
        // clone3: (args, size): struct clone_args' flags at 0, parent_tid at 24.
        435 => {
            if let (Some(flags), Some(ptid)) =
                (read_u64(read, a0), read_u64(read, a0.wrapping_add(24)))
                && flags & CLONE_PARENT_SETTID != 0
            {
                r.push(ptid, 4);
            }
        }
        _ => {}
    }
    let _ = a5;
}

/// The bytes an `ioctl` request writes at its argument: the terminal requests glibc uses,
/// else the size encoded in the request when its direction includes `_IOC_READ`.
#[must_use]
pub fn ioctl_size(request: u64) -> u64 {
    match request {
        // TCGETS: the kernel's termios (36 bytes; glibc's struct is larger).
        0x5401 => 36,
        // TIOCGWINSZ.
        0x5413 => 8,
        // TIOCGPGRP, FIONREAD, TIOCOUTQ.
        0x540f | 0x541b | 0x5411 => 4,
        r if (r >> 30) & 2 != 0 && r >> 32 == 0 => (r >> 16) & 0x3fff,
        _ => 0,
    }
}

/// The addresses of the 8-byte words covering `ranges`, in order, at most `max`; and how
/// many words all of them need.
pub fn words_of(ranges: &[(u64, u64)], max: usize, words: &mut Vec<u64>) -> u64 {
    let mut needed = 0u64;
    for &(addr, len) in ranges {
        let n = len.div_ceil(8);
        needed = needed.saturating_add(n);
        for k in 0..n {
            if words.len() >= max {
                break;
            }
            words.push(addr.wrapping_add(k.wrapping_mul(8)));
        }
    }
    needed
}

#[cfg(test)]
mod tests {
    #![allow(clippy::indexing_slicing, clippy::arithmetic_side_effects)]
    use super::*;
    use quickcheck::quickcheck;

    fn writes(
        nr: u64,
        args: [u64; 6],
        result: Option<i64>,
        mem: &[(u64, &[u8])],
    ) -> Vec<(u64, u64)> {
        let mut read = |addr: u64, buf: &mut [u8]| {
            for (base, bytes) in mem {
                let off = addr
                    .checked_sub(*base)
                    .and_then(|o| usize::try_from(o).ok());
                if let Some(off) = off
                    && let Some(end) = off.checked_add(buf.len())
                    && let Some(src) = bytes.get(off..end)
                {
                    buf.copy_from_slice(src);
                    return true;
                }
            }
            false
        };
        let mut out = Vec::new();
        kernel_writes(nr, args, result, &mut read, &mut out);
        out
    }

    #[test]
    fn read_writes_its_result() {
        let args = [0, 0x1000, 64, 0, 0, 0];
        assert_eq!(writes(0, args, None, &[]), [(0x1000, 64)]);
        assert_eq!(writes(0, args, Some(5), &[]), [(0x1000, 5)]);
        assert!(writes(0, args, Some(-11), &[]).is_empty());
        assert!(writes(0, args, Some(0), &[]).is_empty());
        assert!(
            writes(1, args, Some(5), &[]).is_empty(),
            "write writes no user memory"
        );
        assert_eq!(
            writes(5, [3, 0x2000, 0, 0, 0, 0], Some(0), &[]),
            [(0x2000, 144)]
        );
        assert_eq!(
            writes(228, [1, 0x3000, 0, 0, 0, 0], Some(0), &[]),
            [(0x3000, 16)]
        );
    }

    #[test]
    fn readv_fills_the_iovecs_in_order() {
        let mut iov = Vec::new();
        for (base, len) in [(0x5000u64, 4u64), (0x6000, 100)] {
            iov.extend_from_slice(&base.to_le_bytes());
            iov.extend_from_slice(&len.to_le_bytes());
        }
        let mem = [(0x9000u64, iov.as_slice())];
        let args = [0, 0x9000, 2, 0, 0, 0];
        assert_eq!(writes(19, args, Some(10), &mem), [(0x5000, 4), (0x6000, 6)]);
        assert_eq!(writes(19, args, None, &mem), [(0x5000, 4), (0x6000, 100)]);
    }

    #[test]
    fn ioctl_sizes() {
        assert_eq!(ioctl_size(0x5401), 36);
        // _IOR('T', 0x30, int) = 0x80045430 (TIOCGPTN).
        assert_eq!(ioctl_size(0x8004_5430), 4);
        // _IOW: the kernel only reads.
        assert_eq!(ioctl_size(0x4004_5431), 0);
    }

    #[test]
    fn words_cover_the_ranges() {
        let mut w = Vec::new();
        assert_eq!(words_of(&[(0x1003, 9), (0x2000, 8)], 32, &mut w), 3);
        assert_eq!(w, [0x1003, 0x100b, 0x2000]);
        w.clear();
        assert_eq!(words_of(&[(0x1000, 4096)], 32, &mut w), 512);
        assert_eq!(w.len(), 32);
    }

    quickcheck! {
        /// Any call, arguments, result and memory: no panic, and after the call no range
        /// is longer than before it.
        fn never_panics(nr: u16, args: (u64, u64, u64, u64, u64, u64), result: i64, mem: Vec<u8>) -> bool {
            let args = [args.0, args.1, args.2, args.3, args.4, args.5];
            let nr = u64::from(nr % 440);
            let mem = [(args[1], mem.as_slice())];
            let before = writes(nr, args, None, &mem);
            let after = writes(nr, args, Some(result), &mem);
            after.iter().all(|(_, len)| *len <= MAX_RANGE) && before.iter().all(|(_, len)| *len <= MAX_RANGE)
        }
    }
}
