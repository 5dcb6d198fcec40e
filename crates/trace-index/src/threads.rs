//! The sidecar's timeline of threads: the trace as runs of consecutive steps of one thread
//! (`(first step, thread)` in step order), and for each thread the first steps of its
//! runs, so that the thread of a step, or a thread's next or previous step, is a binary
//! search in the file rather than a pass over the trace.
//!
//! Two sections (index version 3): the thread table (`threads`: the number of threads and
//! of runs, then per thread, in the order they first run, its id, its steps, its runs and
//! where its list of run starts begins; read whole and checked against its hash at open),
//! and the runs (`runs`: every run as `(first step, thread)`, 16 bytes, then each thread's
//! run starts, 8 bytes each, thread after thread; read a block at a time, on demand, so
//! that memory stays bounded however many runs the trace has).

use std::cell::RefCell;
use std::collections::HashMap;
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use trace_model::Error;

use super::{Runs, damaged, hash_more, u64_at};

/// Bytes per block read from the runs section.
const BLOCK: u64 = 4096;

/// How many blocks are kept; the cache is emptied past that (1 MiB).
const CACHED_BLOCKS: usize = 256;

/// The bytes per thread in the table.
const THREAD_BYTES: u64 = 32;

/// One thread of the trace, as the table lists it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ThreadInfo {
    /// The recorded thread id (0 where the format has none).
    pub id: u64,
    /// How many steps it executes.
    pub steps: u64,
    /// How many runs of consecutive steps.
    pub runs: u64,
    /// Where its run starts begin in the list of all threads' starts.
    first: u64,
}

/// Builds the two sections from the steps' threads, in step order.
pub(crate) struct TimelineBuilder {
    /// `(first step, thread)` of every run.
    runs: Runs,
    /// `(thread, first step)` of every run, sorted by thread at the end.
    starts: Runs,
    /// Thread ids in the order they first run, with their steps and runs.
    threads: Vec<(u64, u64, u64)>,
    slot: HashMap<u64, usize>,
    current: Option<u64>,
}

impl TimelineBuilder {
    /// A builder whose sorted runs spill to files named from `stem` past `limit` pairs.
    pub(crate) fn new(stem: &Path, limit: usize) -> TimelineBuilder {
        let name = |what: &str| {
            let mut n = stem.as_os_str().to_owned();
            n.push(what);
            PathBuf::from(n)
        };
        TimelineBuilder {
            runs: Runs::new(name(".runs"), limit),
            starts: Runs::new(name(".starts"), limit),
            threads: Vec::new(),
            slot: HashMap::new(),
            current: None,
        }
    }

    /// Step `i` (the next one) executed by `thread`.
    pub(crate) fn push(&mut self, i: u64, thread: u64) -> io::Result<()> {
        let slot = match self.slot.get(&thread) {
            Some(&s) => s,
            None => {
                self.threads.push((thread, 0, 0));
                let s = self.threads.len().saturating_sub(1);
                self.slot.insert(thread, s);
                s
            }
        };
        let new_run = self.current != Some(thread);
        if let Some(t) = self.threads.get_mut(slot) {
            t.1 = t.1.saturating_add(1);
            if new_run {
                t.2 = t.2.saturating_add(1);
            }
        }
        if new_run {
            self.runs.push(i, thread)?;
            self.starts.push(thread, i)?;
            self.current = Some(thread);
        }
        Ok(())
    }

    /// Writes the table and the runs: their bytes' lengths and hashes.
    pub(crate) fn write(
        mut self,
        table: &mut dyn Write,
        runs: &mut dyn Write,
    ) -> io::Result<((u64, u64), (u64, u64))> {
        let total = self.runs.total;
        let mut runs_out = Hashed::new(runs);
        self.runs.drain(&mut |start, thread| {
            runs_out.write(&start.to_le_bytes())?;
            runs_out.write(&thread.to_le_bytes())
        })?;
        // Each thread's starts, thread after thread (in id order): where each begins.
        let mut first: HashMap<u64, u64> = HashMap::new();
        let mut n = 0u64;
        self.starts.drain(&mut |thread, start| {
            first.entry(thread).or_insert(n);
            n = n.saturating_add(1);
            runs_out.write(&start.to_le_bytes())
        })?;
        let mut t = Hashed::new(table);
        t.write(&(self.threads.len() as u64).to_le_bytes())?;
        t.write(&total.to_le_bytes())?;
        for &(id, steps, runs) in &self.threads {
            for w in [id, steps, runs, first.get(&id).copied().unwrap_or(0)] {
                t.write(&w.to_le_bytes())?;
            }
        }
        Ok(((t.len, t.hash), (runs_out.len, runs_out.hash)))
    }
}

/// A writer that counts and hashes what it passes on.
struct Hashed<'a> {
    out: &'a mut dyn Write,
    len: u64,
    hash: u64,
}

impl<'a> Hashed<'a> {
    fn new(out: &'a mut dyn Write) -> Hashed<'a> {
        Hashed {
            out,
            len: 0,
            hash: super::hash(&[]),
        }
    }

    fn write(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.out.write_all(bytes)?;
        self.len = self.len.saturating_add(bytes.len() as u64);
        self.hash = hash_more(self.hash, bytes);
        Ok(())
    }
}

/// Which area of the runs section a record is in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Area {
    /// `(first step, thread)` of every run.
    Runs,
    /// Every thread's run starts.
    Starts,
}

/// The timeline of a trace's threads, read from its sidecar: the table in memory, the
/// runs a block at a time (a bounded cache of blocks kept).
/// Lookups take `&self` (the file and the cache are behind a `RefCell`).
#[derive(Debug)]
pub struct Timeline<R = std::fs::File> {
    path: PathBuf,
    file: RefCell<R>,
    /// The runs section: offset and length in the file.
    at: u64,
    count: u64,
    runs: u64,
    threads: Vec<ThreadInfo>,
    ids: Vec<u64>,
    slot: HashMap<u64, usize>,
    cache: RefCell<HashMap<(Area, u64), Vec<u64>>>,
}

impl<R: Read + Seek> Timeline<R> {
    /// The timeline of a trace of `count` steps from its table's bytes (`table`) and the
    /// runs section at `at` (of `len` bytes) in `file`.
    ///
    /// # Errors
    ///
    /// The table does not describe the runs section (damaged).
    pub(crate) fn new(
        path: &Path,
        file: R,
        count: u64,
        table: &[u8],
        at: u64,
        len: u64,
    ) -> Result<Timeline<R>, Error> {
        let bad = |what: &str| damaged(path, format!("the thread table: {what}"), None);
        let n = u64_at(table, 0).ok_or_else(|| bad("cut short"))?;
        let runs = u64_at(table, 8).ok_or_else(|| bad("cut short"))?;
        let want = n
            .checked_mul(THREAD_BYTES)
            .and_then(|b| b.checked_add(16))
            .ok_or_else(|| bad("too many threads"))?;
        if want != table.len() as u64 {
            return Err(bad("its length does not match its threads"));
        }
        if runs.checked_mul(24) != Some(len) || (runs == 0) != (count == 0) || runs > count {
            return Err(bad("its runs do not match the runs section"));
        }
        let mut threads = Vec::new();
        let mut slot = HashMap::new();
        let (mut all_runs, mut all_steps) = (0u64, 0u64);
        for chunk in table.get(16..).unwrap_or_default().chunks_exact(32) {
            let w = |k: usize| u64_at(chunk, k.saturating_mul(8)).unwrap_or(0);
            let t = ThreadInfo {
                id: w(0),
                steps: w(1),
                runs: w(2),
                first: w(3),
            };
            if t.runs == 0
                || t.first.checked_add(t.runs).is_none_or(|end| end > runs)
                || slot.insert(t.id, threads.len()).is_some()
            {
                return Err(bad("a thread's runs lie outside the list"));
            }
            all_runs = all_runs.saturating_add(t.runs);
            all_steps = all_steps.saturating_add(t.steps);
            threads.push(t);
        }
        if all_runs != runs || all_steps != count {
            return Err(bad("its threads' runs or steps do not add up"));
        }
        Ok(Timeline {
            path: path.to_owned(),
            file: RefCell::new(file),
            at,
            count,
            runs,
            ids: threads.iter().map(|t| t.id).collect(),
            threads,
            slot,
            cache: RefCell::new(HashMap::new()),
        })
    }

    /// The number of steps.
    #[must_use]
    pub fn count(&self) -> u64 {
        self.count
    }

    /// The number of runs of consecutive steps of one thread.
    #[must_use]
    pub fn runs(&self) -> u64 {
        self.runs
    }

    /// The recorded thread ids, in the order they first run.
    #[must_use]
    pub fn threads(&self) -> &[u64] {
        &self.ids
    }

    /// Each thread, in the order they first run, with its steps and runs.
    #[must_use]
    pub fn thread_table(&self) -> &[ThreadInfo] {
        &self.threads
    }

    /// Word `k` (of the record size of `area`, in words) of the runs section's `area`.
    fn word(&self, area: Area, k: u64) -> Result<u64, Error> {
        let base = match area {
            Area::Runs => 0,
            Area::Starts => self.runs.saturating_mul(16),
        };
        let words = match area {
            Area::Runs => self.runs.saturating_mul(2),
            Area::Starts => self.runs,
        };
        if k >= words {
            return Err(damaged(&self.path, "a run lies outside its list", None));
        }
        let block = k / (BLOCK / 8);
        let within = usize::try_from(k % (BLOCK / 8)).unwrap_or(0);
        if let Some(w) = self.cache.borrow().get(&(area, block)) {
            return w
                .get(within)
                .copied()
                .ok_or_else(|| damaged(&self.path, "a run lies outside its list", None));
        }
        let first = block.saturating_mul(BLOCK / 8);
        let n = words.saturating_sub(first).min(BLOCK / 8);
        let mut bytes = vec![0u8; usize::try_from(n.saturating_mul(8)).unwrap_or(0)];
        let offset = self
            .at
            .saturating_add(base)
            .saturating_add(first.saturating_mul(8));
        let mut file = self.file.borrow_mut();
        file.seek(SeekFrom::Start(offset))
            .and_then(|_| file.read_exact(&mut bytes))
            .map_err(|e| Error::io(format!("cannot read {}", self.path.display()), e))?;
        drop(file);
        let values: Vec<u64> = bytes
            .chunks_exact(8)
            .map(|c| u64_at(c, 0).unwrap_or(0))
            .collect();
        let w = values
            .get(within)
            .copied()
            .ok_or_else(|| damaged(&self.path, "a run lies outside its list", Some(offset)))?;
        let mut cache = self.cache.borrow_mut();
        if cache.len() >= CACHED_BLOCKS {
            cache.clear();
        }
        cache.insert((area, block), values);
        Ok(w)
    }

    /// The first step and thread of run `k`.
    fn run(&self, k: u64) -> Result<(u64, u64), Error> {
        let w = k.saturating_mul(2);
        Ok((
            self.word(Area::Runs, w)?,
            self.word(Area::Runs, w.saturating_add(1))?,
        ))
    }

    /// The first step after run `k`.
    fn end_of(&self, k: u64) -> Result<u64, Error> {
        let next = k.saturating_add(1);
        if next >= self.runs {
            return Ok(self.count);
        }
        Ok(self.run(next)?.0.min(self.count))
    }

    /// The number of `0..n` for which `below` holds (it holds for a prefix).
    fn partition(n: u64, mut below: impl FnMut(u64) -> Result<bool, Error>) -> Result<u64, Error> {
        let (mut lo, mut hi) = (0u64, n);
        while lo < hi {
            let mid = lo.saturating_add(hi.saturating_sub(lo) / 2);
            if below(mid)? {
                lo = mid.saturating_add(1);
            } else {
                hi = mid;
            }
        }
        Ok(lo)
    }

    /// The run holding step `i`.
    fn run_of(&self, i: u64) -> Result<Option<u64>, Error> {
        if i >= self.count {
            return Ok(None);
        }
        let k = Self::partition(self.runs, |k| Ok(self.run(k)?.0 <= i))?;
        Ok(k.checked_sub(1))
    }

    /// The thread of step `i`.
    ///
    /// # Errors
    ///
    /// The sidecar cannot be read.
    pub fn thread_at(&self, i: u64) -> Result<Option<u64>, Error> {
        match self.run_of(i)? {
            Some(k) => Ok(Some(self.run(k)?.1)),
            None => Ok(None),
        }
    }

    /// The starts of `thread`'s runs: where they begin among all starts, and how many.
    fn starts_of(&self, thread: u64) -> Option<(u64, u64)> {
        let t = self.threads.get(*self.slot.get(&thread)?)?;
        Some((t.first, t.runs))
    }

    /// The first step at or after `i` that `thread` executes.
    ///
    /// # Errors
    ///
    /// The sidecar cannot be read.
    pub fn first_from(&self, thread: u64, i: u64) -> Result<Option<u64>, Error> {
        if i >= self.count {
            return Ok(None);
        }
        if self.thread_at(i)? == Some(thread) {
            return Ok(Some(i));
        }
        let Some((first, n)) = self.starts_of(thread) else {
            return Ok(None);
        };
        let start = |k: u64| self.word(Area::Starts, first.saturating_add(k));
        let k = Self::partition(n, |k| Ok(start(k)? <= i))?;
        if k >= n {
            return Ok(None);
        }
        Ok(Some(start(k)?).filter(|&s| s < self.count))
    }

    /// The last step before `i` that `thread` executes.
    ///
    /// # Errors
    ///
    /// The sidecar cannot be read.
    pub fn last_before(&self, thread: u64, i: u64) -> Result<Option<u64>, Error> {
        let Some(j) = i.min(self.count).checked_sub(1) else {
            return Ok(None);
        };
        if self.thread_at(j)? == Some(thread) {
            return Ok(Some(j));
        }
        let Some((first, n)) = self.starts_of(thread) else {
            return Ok(None);
        };
        let start = |k: u64| self.word(Area::Starts, first.saturating_add(k));
        let Some(k) = Self::partition(n, |k| Ok(start(k)? <= j))?.checked_sub(1) else {
            return Ok(None);
        };
        let s = start(k)?;
        let Some(run) = self.run_of(s)? else {
            return Ok(None);
        };
        Ok(self.end_of(run)?.min(i).checked_sub(1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The timeline of the threads of each step in turn, through the sections' bytes.
    fn of(threads: &[u64]) -> Timeline<io::Cursor<Vec<u8>>> {
        static N: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let dir = std::env::temp_dir().join(format!("tk-timeline-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        // Two pairs in memory: the rest spill to sorted runs and merge.
        let mut b = TimelineBuilder::new(&dir.join(format!("t{n}")), 2);
        for (i, &t) in threads.iter().enumerate() {
            b.push(i as u64, t).unwrap();
        }
        let (mut table, mut runs) = (Vec::new(), Vec::new());
        let ((tl, th), (rl, rh)) = b.write(&mut table, &mut runs).unwrap();
        assert_eq!((tl, th), (table.len() as u64, crate::hash(&table)));
        assert_eq!((rl, rh), (runs.len() as u64, crate::hash(&runs)));
        let len = runs.len() as u64;
        Timeline::new(
            Path::new("t"),
            io::Cursor::new(runs),
            threads.len() as u64,
            &table,
            0,
            len,
        )
        .unwrap()
    }

    #[test]
    fn next_and_previous_steps_of_a_thread() {
        let t = of(&[5, 5, 7, 7, 5, 9]);
        assert_eq!(t.count(), 6);
        assert_eq!(t.runs(), 4);
        assert_eq!(t.threads(), &[5, 7, 9]);
        assert_eq!(t.thread_at(3).unwrap(), Some(7));
        assert_eq!(t.thread_at(6).unwrap(), None);
        assert_eq!(t.first_from(5, 1).unwrap(), Some(1));
        assert_eq!(t.first_from(5, 2).unwrap(), Some(4));
        assert_eq!(t.first_from(7, 5).unwrap(), None);
        assert_eq!(t.first_from(9, 0).unwrap(), Some(5));
        assert_eq!(t.last_before(5, 4).unwrap(), Some(1));
        assert_eq!(t.last_before(5, 5).unwrap(), Some(4));
        assert_eq!(t.last_before(7, 2).unwrap(), None);
        assert_eq!(t.last_before(7, 100).unwrap(), Some(3));
        assert_eq!(t.last_before(5, 0).unwrap(), None);
        let steps: Vec<(u64, u64)> = t.thread_table().iter().map(|t| (t.id, t.steps)).collect();
        assert_eq!(steps, [(5, 3), (7, 2), (9, 1)]);
    }

    /// Against a walk over the steps, on many runs (several blocks of each area).
    #[test]
    fn lookups_equal_a_walk() {
        let mut threads = Vec::new();
        let mut x = 12345u64;
        for _ in 0..5000 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let t = (x >> 60) % 3;
            for _ in 0..(x >> 33) % 4 + 1 {
                threads.push(t);
            }
        }
        let t = of(&threads);
        for i in (0..threads.len() as u64 + 2).step_by(31) {
            for th in 0..4u64 {
                let first = (i..threads.len() as u64).find(|&j| threads[j as usize] == th);
                let last = (0..i.min(threads.len() as u64))
                    .rev()
                    .find(|&j| threads[j as usize] == th);
                assert_eq!(t.first_from(th, i).unwrap(), first, "first {th} {i}");
                assert_eq!(t.last_before(th, i).unwrap(), last, "last {th} {i}");
            }
            assert_eq!(
                t.thread_at(i).unwrap(),
                threads.get(i as usize).copied(),
                "{i}"
            );
        }
    }

    #[test]
    fn a_damaged_table_is_an_error() {
        let t = of(&[1, 2, 1]);
        let mut table = Vec::new();
        table.extend_from_slice(&2u64.to_le_bytes());
        table.extend_from_slice(&3u64.to_le_bytes());
        for w in [1u64, 2, 2, 0, 2, 1, 1, 9] {
            table.extend_from_slice(&w.to_le_bytes());
        }
        let r = Timeline::new(
            Path::new("t"),
            io::Cursor::new(vec![0u8; 72]),
            3,
            &table,
            0,
            72,
        );
        assert!(r.is_err());
        drop(t);
    }
}
