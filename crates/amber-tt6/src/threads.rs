//! Per-thread traces (`thread_NNN.tt6` / `thread_NNN.tt6e`, one per thread) merged into one
//! timeline that respects the synchronization escapes and each thread's own order.
//!
//! Rule: a record carrying a `SYNC_WAIT`/`SYNC_TRY_WAIT` escape that observed count `k` on a
//! sync point runs only after a `SYNC_SIGNAL`/`SYNC_BROADCAST_SIGNAL` escape of count `k` (or
//! more) on that point has been emitted (count 0 needs no signal). Scheduling is
//! deterministic: the current thread runs until it blocks or ends, then the next runnable
//! thread in thread order takes over. If every remaining thread is blocked, the lowest
//! blocked thread is released and its wait is reported as unmatched.
//!
//! What a tool needs to merge a directory: [`thread_files`] lists it (thread number and
//! dialect from each `thread_NNN.tt6[e]` name), the caller reads (or maps) each file, and
//! [`merge_files`] takes `(file name, bytes)` pairs, orders them by thread number and
//! returns the merged timeline, an iterator of [`MergedRecord`]s (thread number, record,
//! sequence number). Once it has ended, [`Merge::into_unmatched`] (or
//! [`Merge::unmatched`]) gives the waits no signal matched, for the caller to report; after
//! an error, [`Merge::failed_thread`] says whose file it came from.
//!
//! ```
//! use amber_tt6::threads::merge_files;
//!
//! let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../testdata/amber/threads");
//! let mut files = Vec::new();
//! for f in amber_tt6::threads::thread_files(dir.as_ref())? {
//!     let name = f.path.file_name().unwrap().to_string_lossy().into_owned();
//!     files.push((name, std::fs::read(&f.path)?));
//! }
//! let named: Vec<(&str, &[u8])> = files.iter().map(|(n, d)| (n.as_str(), &d[..])).collect();
//! let mut merge = merge_files(&named)?;
//! for r in merge.by_ref() {
//!     let r = r?;
//!     println!("{} thread {} record {} pc {:#x}", r.seq, r.thread, r.record.index, r.record.pc);
//! }
//! for w in merge.into_unmatched() {
//!     println!("thread {} record {}: wait on {:#x} for count {} never signalled", w.thread, w.record, w.address, w.count);
//! }
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use trace_core::{Offset, ThreadId};

use crate::escape::SyncKind;
use crate::opcode::Dialect;
use crate::{Error, Record, Records, Tt6Reader};

/// One thread's trace file found in a directory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ThreadFile {
    /// `NNN` of `thread_NNN`.
    pub thread: ThreadId,
    /// The file.
    pub path: PathBuf,
    /// `.tt6` → TT6, `.tt6e` → TT6E.
    pub dialect: Dialect,
}

/// Parses `thread_NNN.tt6` / `thread_NNN.tt6e` (any case, NNN decimal digits).
#[must_use]
pub fn parse_thread_file_name(name: &str) -> Option<(ThreadId, Dialect)> {
    let lower = name.to_ascii_lowercase();
    let rest = lower.strip_prefix("thread_")?;
    let (num, dialect) = if let Some(n) = rest.strip_suffix(".tt6e") {
        (n, Dialect::Tt6e)
    } else {
        (rest.strip_suffix(".tt6")?, Dialect::Tt6)
    };
    if num.is_empty() || !num.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some((ThreadId(num.parse().ok()?), dialect))
}

/// The thread files of a directory, by thread number.
///
/// # Errors
///
/// The directory cannot be read.
pub fn thread_files(dir: &Path) -> std::io::Result<Vec<ThreadFile>> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let name = entry.file_name();
        if let Some((thread, dialect)) = name.to_str().and_then(parse_thread_file_name) {
            files.push(ThreadFile {
                thread,
                path: entry.path(),
                dialect,
            });
        }
    }
    files.sort_by_key(|f| f.thread);
    Ok(files)
}

/// One thread's trace in memory.
#[derive(Clone, Copy, Debug)]
pub struct ThreadTrace<'a> {
    /// The thread.
    pub thread: ThreadId,
    /// Its bytes.
    pub data: &'a [u8],
    /// TT6 or TT6E.
    pub dialect: Dialect,
}

impl<'a> ThreadTrace<'a> {
    /// A thread trace from its file name (`thread_NNN.tt6` / `thread_NNN.tt6e`, see
    /// [`parse_thread_file_name`]; a directory part is ignored) and its bytes; `None` for
    /// any other name.
    #[must_use]
    pub fn from_file_name(name: &str, data: &'a [u8]) -> Option<ThreadTrace<'a>> {
        let base = name.rsplit(['/', '\\']).next().unwrap_or(name);
        let (thread, dialect) = parse_thread_file_name(base)?;
        Some(ThreadTrace {
            thread,
            data,
            dialect,
        })
    }
}

/// Merges thread files given as `(file name, bytes)`, in any order: the thread number and
/// dialect come from each name ([`ThreadTrace::from_file_name`]), and the threads are
/// merged in thread-number order ([`merge`]).
///
/// # Errors
///
/// [`Error::ThreadFile`] for a name that is not `thread_NNN.tt6[e]` or a thread number
/// given twice (`thread_1.tt6` and `thread_001.tt6e`); a thread's trace without an
/// initial PC.
pub fn merge_files<'a>(files: &[(&str, &'a [u8])]) -> Result<Merge<'a>, Error> {
    let mut traces = Vec::with_capacity(files.len());
    for (name, data) in files {
        let t = ThreadTrace::from_file_name(name, data).ok_or_else(|| Error::ThreadFile {
            name: (*name).to_owned(),
            problem: "not named thread_NNN.tt6 or thread_NNN.tt6e",
        })?;
        traces.push((t, *name));
    }
    traces.sort_by_key(|(t, _)| t.thread);
    for pair in traces.windows(2) {
        if let [(a, _), (b, name)] = pair
            && a.thread == b.thread
        {
            return Err(Error::ThreadFile {
                name: (*name).to_owned(),
                problem: "another file has the same thread number",
            });
        }
    }
    let traces: Vec<ThreadTrace<'a>> = traces.into_iter().map(|(t, _)| t).collect();
    merge(&traces)
}

/// A wait the merge could not match with a signal.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UnmatchedWait {
    /// The waiting thread.
    pub thread: ThreadId,
    /// Index of its record carrying the wait.
    pub record: u64,
    /// File offset of that record.
    pub offset: Offset,
    /// The sync point.
    pub address: u32,
    /// The count the wait observed.
    pub count: u32,
    /// The highest count signalled on that point when it was released.
    pub signalled: u32,
}

/// A record of the merged timeline.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MergedRecord<'a> {
    /// Position in the merged timeline.
    pub seq: u64,
    /// Its thread.
    pub thread: ThreadId,
    /// The record.
    pub record: Record<'a>,
}

struct Lane<'a> {
    thread: ThreadId,
    records: Records<'a>,
    peeked: Option<Record<'a>>,
    finished: bool,
}

/// The merged timeline: an iterator of [`MergedRecord`]s (fused after the first error,
/// whose offset is in the file of [`Merge::failed_thread`]). [`Merge::unmatched`] lists
/// released waits.
pub struct Merge<'a> {
    lanes: Vec<Lane<'a>>,
    current: usize,
    signalled: HashMap<u32, u32>,
    unmatched: Vec<UnmatchedWait>,
    seq: u64,
    done: bool,
    failed: Option<ThreadId>,
}

impl core::fmt::Debug for Merge<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Merge")
            .field("threads", &self.lanes.len())
            .field("seq", &self.seq)
            .field("unmatched", &self.unmatched)
            .finish_non_exhaustive()
    }
}

/// Merges per-thread traces (in the order given, normally by thread number).
///
/// # Errors
///
/// A thread's trace has no initial PC.
pub fn merge<'a>(threads: &[ThreadTrace<'a>]) -> Result<Merge<'a>, Error> {
    let mut lanes = Vec::with_capacity(threads.len());
    for t in threads {
        let reader = Tt6Reader::parse(t.data, t.dialect)?;
        lanes.push(Lane {
            thread: t.thread,
            records: reader.records(),
            peeked: None,
            finished: false,
        });
    }
    Ok(Merge {
        lanes,
        current: 0,
        signalled: HashMap::new(),
        unmatched: Vec::new(),
        seq: 0,
        done: false,
        failed: None,
    })
}

impl<'a> Merge<'a> {
    /// Waits that were released without a matching signal (complete once iteration ended).
    #[must_use]
    pub fn unmatched(&self) -> &[UnmatchedWait] {
        &self.unmatched
    }

    /// [`Merge::unmatched`], owned, once iteration has ended.
    #[must_use]
    pub fn into_unmatched(self) -> Vec<UnmatchedWait> {
        self.unmatched
    }

    /// After the iterator returned an error: the thread whose trace it came from (the
    /// error's offset is in that thread's file).
    #[must_use]
    pub fn failed_thread(&self) -> Option<ThreadId> {
        self.failed
    }

    /// Fills lane `i`'s peeked record. `Err` passes a reader error on.
    fn peek(&mut self, i: usize) -> Result<Option<Record<'a>>, (ThreadId, Error)> {
        let Some(lane) = self.lanes.get_mut(i) else {
            return Ok(None);
        };
        if lane.peeked.is_none() && !lane.finished {
            match lane.records.next() {
                Some(Ok(r)) => lane.peeked = Some(r),
                Some(Err(e)) => {
                    lane.finished = true;
                    return Err((lane.thread, e));
                }
                None => lane.finished = true,
            }
        }
        Ok(lane.peeked)
    }

    /// The first wait of `r` that is not yet satisfied: (address, count, signalled).
    fn blocking_wait(&self, r: &Record<'_>) -> Option<(u32, u32, u32)> {
        r.sync_events().find_map(|e| {
            if e.kind.is_signal() || e.count == 0 {
                return None;
            }
            let have = self.signalled.get(&e.address).copied().unwrap_or(0);
            (have < e.count).then_some((e.address, e.count, have))
        })
    }

    fn emit(&mut self, i: usize, r: Record<'a>) -> MergedRecord<'a> {
        for e in r.sync_events() {
            if e.kind.is_signal() {
                let c = self.signalled.entry(e.address).or_insert(0);
                *c = (*c).max(e.count);
            } else if matches!(e.kind, SyncKind::Wait | SyncKind::TryWait) {
                // A satisfied (or released) wait also proves the count was reached.
                let c = self.signalled.entry(e.address).or_insert(0);
                *c = (*c).max(e.count);
            }
        }
        let thread = self.lanes.get_mut(i).map_or(ThreadId(0), |l| {
            l.peeked = None;
            l.thread
        });
        let seq = self.seq;
        self.seq = self.seq.wrapping_add(1);
        MergedRecord {
            seq,
            thread,
            record: r,
        }
    }
}

impl<'a> Iterator for Merge<'a> {
    type Item = Result<MergedRecord<'a>, Error>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        let n = self.lanes.len();
        let mut first_blocked: Option<(usize, Record<'a>, (u32, u32, u32))> = None;
        for step in 0..n {
            let i = self.current.wrapping_add(step).checked_rem(n).unwrap_or(0);
            match self.peek(i) {
                Err((thread, e)) => {
                    self.done = true;
                    self.failed = Some(thread);
                    return Some(Err(e));
                }
                Ok(None) => {}
                Ok(Some(r)) => match self.blocking_wait(&r) {
                    None => {
                        self.current = i;
                        return Some(Ok(self.emit(i, r)));
                    }
                    Some(w) => {
                        let lower = first_blocked.as_ref().is_none_or(|(j, ..)| i < *j);
                        if lower {
                            first_blocked = Some((i, r, w));
                        }
                    }
                },
            }
        }
        match first_blocked {
            None => {
                self.done = true;
                None
            }
            Some((i, r, (address, count, signalled))) => {
                let thread = self.lanes.get(i).map_or(ThreadId(0), |l| l.thread);
                self.unmatched.push(UnmatchedWait {
                    thread,
                    record: r.index,
                    offset: r.offset,
                    address,
                    count,
                    signalled,
                });
                self.current = i;
                Some(Ok(self.emit(i, r)))
            }
        }
    }
}
