//! Memory maps of input files that survive the file changing under them.
//!
//! A mapped file that another process truncates (or rewrites: `cp` truncates first) makes
//! every access to a page past the new end fault with `SIGBUS`, which kills the process:
//! `tracekit serve` would die on any `cp` over its trace. So each map is registered in a
//! fixed table, and a `SIGBUS` handler that finds the faulting address in a registered map
//! puts zero pages over the rest of that map (the access then reads zeros, which every
//! reader already treats as untrusted input) and records the offset. [`Map::fault`] says
//! where the file was found cut; [`first_change`] is the first cut seen in any map, for a
//! command to turn its result into the error "FILE changed while it was read", and for
//! outputs to refuse to commit. A fault outside the registered maps goes on to the action
//! that was installed before (the process dies as it would have).
//!
//! This is the crate's one module with `unsafe` code: the map itself (memmap2's `map` is
//! unsafe because of exactly this risk), the handler's installation, and the handler.

#![allow(unsafe_code)]

use std::fs::File;
use std::io;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use crate::input::Cut;

/// How many maps can be guarded at once (a map past that is made unguarded).
const SLOTS: usize = 256;

/// One registered map: `start == 0` when the slot is free. `fault` is the offset of the
/// first faulting access, `u64::MAX` while none.
struct Slot {
    taken: AtomicBool,
    start: AtomicUsize,
    len: AtomicUsize,
    fault: AtomicU64,
}

#[allow(clippy::declare_interior_mutable_const)]
const FREE: Slot = Slot {
    taken: AtomicBool::new(false),
    start: AtomicUsize::new(0),
    len: AtomicUsize::new(0),
    fault: AtomicU64::new(u64::MAX),
};

static TABLE: [Slot; SLOTS] = [FREE; SLOTS];

/// The first change seen by a map since dropped (name, offset); live maps are asked too.
static DROPPED_CHANGE: Mutex<Option<(String, u64)>> = Mutex::new(None);

/// The names of the live maps, by slot.
static NAMES: Mutex<Vec<(usize, String)>> = Mutex::new(Vec::new());

/// A read-only memory map of a file, guarded against the file shrinking (see the module).
pub(crate) struct Map {
    map: memmap2::Mmap,
    slot: Option<usize>,
    /// The file mapped, to see whether it is shorter now (the input's one handle).
    file: Arc<File>,
}

impl std::fmt::Debug for Map {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Map")
            .field("len", &self.map.len())
            .field("guarded", &self.slot.is_some())
            .finish()
    }
}

impl Map {
    /// Maps `file` (named `name` in [`first_change`]) and guards the map.
    pub(crate) fn new(file: Arc<File>, name: &str) -> io::Result<Map> {
        // SAFETY: the map is read-only and private to this process. Another process may
        // change the file while we read it: changed bytes are only bad input to readers
        // that treat every byte as untrusted, and a cut is caught by the guard below
        // instead of killing the process (see the module docs).
        let map = unsafe { memmap2::Mmap::map(&*file) }?;
        let slot = guard(map.as_ptr() as usize, map.len());
        if let Some(k) = slot {
            lock(&NAMES).push((k, name.to_owned()));
        }
        Ok(Map { map, slot, file })
    }

    /// The offset of the first access that found the file cut short, if one did (the
    /// bytes from there on then read as zeros).
    pub(crate) fn fault(&self) -> Option<u64> {
        let slot = TABLE.get(self.slot?)?;
        Some(slot.fault.load(Ordering::Acquire)).filter(|&f| f != u64::MAX)
    }

    /// Where the file was found cut: the first faulting access, or the file's length now
    /// when that is shorter than the map (no byte past it read yet).
    pub(crate) fn cut(&self) -> Option<Cut> {
        if let Some(offset) = self.fault() {
            return Some(Cut { offset, read: true });
        }
        let now = self.file.metadata().ok()?.len();
        (now < self.map.len() as u64).then_some(Cut {
            offset: now,
            read: false,
        })
    }
}

impl std::ops::Deref for Map {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        &self.map
    }
}

impl Drop for Map {
    fn drop(&mut self) {
        let Some(k) = self.slot else { return };
        let fault = self.fault();
        let mut names = lock(&NAMES);
        let name = names
            .iter()
            .position(|(s, _)| *s == k)
            .map(|i| names.swap_remove(i).1);
        drop(names);
        if let (Some(offset), Some(name)) = (fault, name) {
            lock(&DROPPED_CHANGE).get_or_insert((name, offset));
        }
        if let Some(slot) = TABLE.get(k) {
            // Unregistered before the map is unmapped (the fields drop after this).
            slot.start.store(0, Ordering::Release);
            slot.fault.store(u64::MAX, Ordering::Release);
            slot.taken.store(false, Ordering::Release);
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The first input seen cut short while it was read, by any map of this process: its name
/// and the offset of the first access past the new end.
#[must_use]
pub fn first_change() -> Option<(String, u64)> {
    if let Some(c) = lock(&DROPPED_CHANGE).clone() {
        return Some(c);
    }
    let names = lock(&NAMES);
    names
        .iter()
        .filter_map(|(k, name)| {
            let f = TABLE.get(*k)?.fault.load(Ordering::Acquire);
            (f != u64::MAX).then(|| (name.clone(), f))
        })
        .min_by_key(|(_, f)| *f)
}

/// [`Error::Changed`](crate::Error::Changed) for the [`first_change`], if there was one:
/// what a command ends with instead of its result, and why an output is not committed.
///
/// # Errors
///
/// An input was cut short while it was read.
pub fn check_unchanged() -> Result<(), crate::Error> {
    match first_change() {
        Some((file, offset)) => Err(crate::Error::Changed { file, offset }),
        None => Ok(()),
    }
}

#[cfg(target_os = "linux")]
fn guard(start: usize, len: usize) -> Option<usize> {
    if start == 0 || len == 0 || !install() {
        return None;
    }
    let k = TABLE.iter().position(|s| {
        s.taken
            .compare_exchange(false, true, Ordering::AcqRel, Ordering::Relaxed)
            .is_ok()
    })?;
    let slot = TABLE.get(k)?;
    slot.len.store(len, Ordering::Release);
    slot.fault.store(u64::MAX, Ordering::Release);
    slot.start.store(start, Ordering::Release);
    Some(k)
}

/// Elsewhere a mapped file cannot be truncated (Windows) or the guard is not written yet.
#[cfg(not(target_os = "linux"))]
fn guard(_start: usize, _len: usize) -> Option<usize> {
    None
}

#[cfg(target_os = "linux")]
static PAGE: AtomicUsize = AtomicUsize::new(0);

/// The action for `SIGBUS` before ours, restored for a fault that is not ours.
#[cfg(target_os = "linux")]
static PREVIOUS: std::sync::OnceLock<libc::sigaction> = std::sync::OnceLock::new();

/// Installs the handler once; whether it is installed.
#[cfg(target_os = "linux")]
fn install() -> bool {
    static INSTALLED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *INSTALLED.get_or_init(|| {
        // SAFETY: sysconf has no preconditions.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
        let Some(page) = usize::try_from(page).ok().filter(|p| p.is_power_of_two()) else {
            return false;
        };
        PAGE.store(page, Ordering::Release);
        // SAFETY: zeroed is a valid `sigaction` (no handler, empty mask); the handler is an
        // `extern "C"` function of the SA_SIGINFO signature; `previous` is written by the
        // call before it is read.
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = on_sigbus as *const () as usize;
            action.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK;
            libc::sigemptyset(&mut action.sa_mask);
            let mut previous: libc::sigaction = std::mem::zeroed();
            if libc::sigaction(libc::SIGBUS, &action, &mut previous) != 0 {
                return false;
            }
            let _ = PREVIOUS.set(previous);
        }
        true
    })
}

/// The `SIGBUS` handler: only atomics, `mmap` and `sigaction` (system calls).
#[cfg(target_os = "linux")]
extern "C" fn on_sigbus(_signal: libc::c_int, info: *mut libc::siginfo_t, _: *mut libc::c_void) {
    // SAFETY: the kernel passes a valid siginfo to an SA_SIGINFO handler.
    let addr = unsafe { (*info).si_addr() } as usize;
    let page = PAGE.load(Ordering::Acquire);
    for slot in &TABLE {
        let start = slot.start.load(Ordering::Acquire);
        let len = slot.len.load(Ordering::Acquire);
        let Some(offset) = addr.checked_sub(start).filter(|&o| start != 0 && o < len) else {
            continue;
        };
        let from = addr & !page.wrapping_sub(1);
        let end = start
            .saturating_add(len)
            .saturating_add(page.wrapping_sub(1))
            & !page.wrapping_sub(1);
        // SAFETY: [from, end) lies within this process's map of the file (its last page
        // included), which stays mapped until the Map is dropped after its slot is freed;
        // anonymous zero pages replace the file's pages there, read-only as the map was.
        let zeroed = unsafe {
            libc::mmap(
                from as *mut libc::c_void,
                end.saturating_sub(from),
                libc::PROT_READ,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED,
                -1,
                0,
            )
        };
        if zeroed != libc::MAP_FAILED {
            slot.fault.fetch_min(offset as u64, Ordering::AcqRel);
            return;
        }
    }
    // Not one of our maps: the previous action takes the fault when it repeats.
    if let Some(previous) = PREVIOUS.get() {
        // SAFETY: `previous` is the action sigaction reported.
        unsafe { libc::sigaction(libc::SIGBUS, previous, std::ptr::null_mut()) };
    }
}
