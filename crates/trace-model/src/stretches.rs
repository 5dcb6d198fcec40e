//! One input's records read on several threads, a stretch of records each, and handed on in
//! order: what `tracekit export` and the Python package's `to_arrow` build their batches
//! with, and what any later consumer of whole traces shares.
//!
//! Each thread claims the next stretch in turn and builds it with a reader of its own: a
//! reader goes on to the next stretch while its claims follow each other, else a fresh one
//! is moved there by [`Records::seek`] through the format's seek index (given, or made
//! meanwhile by one more thread that shares, as its pass goes, an index reaching each
//! stretch it has passed: [`Indexing::seek_index_reaching`](crate::steps::Indexing)). The
//! caller's thread hands the stretches on in order, so the consumer sees what one reader
//! would give.
//!
//! It reads on the caller's thread alone (the same stretches, one after the other) when one
//! thread is asked for, when the input cannot be shared between threads (a stream), when the
//! format's reader does not jump on a seek ([`Records::seeks_by_index`]: then the other
//! threads would read everything before their stretch), or when the trace is known to have
//! no seek index.
//!
//! ```
//! use trace_model::stretches::Stretches;
//! use trace_model::{Ctx, Handler, Input, Options, Records};
//! # fn count(handler: &dyn Handler, mut input: Input) -> Result<(), trace_model::Error> {
//! let options = Options::default();
//! let mut rows = 0u64;
//! let mut ctx = Ctx::new(&options);
//! let reading = Stretches::new(handler, 1 << 16, 2).open(&mut input, &mut ctx)?;
//! let ended = reading.run(
//!     &mut ctx,
//!     // On any thread: the records of one stretch (here counted), and whether they end in it.
//!     |records: &mut dyn Records, limit: u64| {
//!         let mut n = 0u64;
//!         while n < limit {
//!             match records.next_record() {
//!                 Some(Ok(_)) => n += 1,
//!                 Some(Err(e)) => return (n, Err(e)),
//!                 None => return (n, Ok(true)),
//!             }
//!         }
//!         (n, Ok(false))
//!     },
//!     // On the caller's thread, in order.
//!     |n| {
//!         rows += n;
//!         true
//!     },
//! );
//! assert!(ended.failure.is_none());
//! # Ok(())
//! # }
//! ```

use std::collections::{BTreeMap, HashMap};
use std::sync::mpsc::{Sender, channel};
use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};

use crate::steps::SeekIndex;
use crate::{Ctx, Error, Handler, Input, Note, Options, Records, merge_notes};

/// How the seek index that moves the threads' readers comes.
enum IndexFrom<'a> {
    /// Known: the index, or `None` where the trace has none.
    Known(Option<SeekIndex>),
    /// Made while the first stretches are read, then given to `keep`, which returns the
    /// index to use (a caller that keeps one returns the one it kept first).
    Made(&'a (dyn Fn(Option<SeekIndex>) -> Option<SeekIndex> + Sync)),
}

/// A reading of one input's records in stretches, on up to `threads` threads.
pub struct Stretches<'a> {
    handler: &'a dyn Handler,
    rows: u64,
    threads: usize,
    index: IndexFrom<'a>,
}

impl std::fmt::Debug for Stretches<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Stretches")
            .field("handler", &self.handler.name())
            .field("rows", &self.rows)
            .field("threads", &self.threads)
            .finish_non_exhaustive()
    }
}

/// How a [`Reading::run`] ended.
#[derive(Debug)]
pub struct Ended {
    /// The error that ends the records: the consumer has taken every stretch before the
    /// one it is in, and that stretch's records before it.
    pub failure: Option<Error>,
    /// The notes of the readers ([`Records::finish`]), as one reader's.
    pub notes: Vec<Note>,
}

/// The records of one input, opened by [`Stretches::open`], to be read in stretches.
pub struct Reading<'a, 'i> {
    how: Stretches<'a>,
    /// The reader of the first stretches, or of all on one thread.
    records: Box<dyn Records + 'i>,
    /// The input the threads share, when they read.
    base: Option<Input>,
}

impl std::fmt::Debug for Reading<'_, '_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reading")
            .field("how", &self.how)
            .field("threads", &self.base.is_some())
            .finish_non_exhaustive()
    }
}

impl Reading<'_, '_> {
    /// The schema of every table of the records.
    #[must_use]
    pub fn tables(&self) -> &[std::sync::Arc<crate::Schema>] {
        self.records.tables()
    }

    /// How many threads build the stretches: 1 when the caller's thread reads them all.
    #[must_use]
    pub fn threads(&self) -> usize {
        if self.base.is_some() {
            self.how.threads
        } else {
            1
        }
    }

    /// Reads stretches of `rows` records (at least one) instead: for a consumer whose unit
    /// depends on how many threads build them ([`Reading::threads`]).
    #[must_use]
    pub fn in_stretches_of(mut self, rows: u64) -> Self {
        self.how.rows = rows.max(1);
        self
    }

    /// Reads the records: `build` makes something of the next records of a reader, at most
    /// `limit` of them (on any thread), and says whether they end there (`Ok(true)`), go on
    /// (`Ok(false)`, after exactly `limit`), or the error that ends them; `take` gets what
    /// `build` made, in the records' order, on this thread, and returns `false` to stop.
    /// Progress goes to `ctx` after each stretch. Memory: at most `threads + 1` stretches
    /// built ahead of those taken.
    pub fn run<S: Send>(
        self,
        ctx: &mut Ctx<'_>,
        build: impl Fn(&mut dyn Records, u64) -> (S, Result<bool, Error>) + Sync,
        mut take: impl FnMut(S) -> bool,
    ) -> Ended {
        let Reading {
            how,
            mut records,
            base,
        } = self;
        if let Some(base) = base {
            // The threads open their own readers (this one's diagnostics were said).
            drop(records);
            return how.parallel(&base, ctx, &build, &mut take);
        }
        // One thread: the same stretches, one after the other.
        let failure = loop {
            let (made, end) = build(records.as_mut(), how.rows);
            ctx.progress(records.position());
            let go = take(made);
            match end {
                Err(e) => break Some(e),
                Ok(true) => break None,
                Ok(false) if !go => break None,
                Ok(false) => {}
            }
        };
        Ended {
            failure,
            notes: merge_notes(records.finish()),
        }
    }
}

/// A stretch as a thread built it.
struct Built<S> {
    made: S,
    /// Whether the records end in the stretch, or the error that ends them there.
    end: Result<bool, Error>,
    /// The reader's position after it, for progress.
    position: u64,
}

impl<'a> Stretches<'a> {
    /// Stretches of `rows` records (at least one) of the records `handler` reads, on up to
    /// `threads` threads; the seek index is made while reading.
    #[must_use]
    pub fn new(handler: &'a dyn Handler, rows: u64, threads: usize) -> Stretches<'a> {
        Stretches {
            handler,
            rows: rows.max(1),
            threads: threads.max(1),
            index: IndexFrom::Made(&|made| made),
        }
    }

    /// Uses this seek index (`None`: the trace has none, so one thread reads).
    #[must_use]
    pub fn with_index(mut self, index: Option<SeekIndex>) -> Stretches<'a> {
        self.index = IndexFrom::Known(index);
        self
    }

    /// Makes the seek index while reading and gives it to `keep`, which returns the one to
    /// use: for a caller that keeps the index of a trace for later seeks.
    #[must_use]
    pub fn keeping_index(
        mut self,
        keep: &'a (dyn Fn(Option<SeekIndex>) -> Option<SeekIndex> + Sync),
    ) -> Stretches<'a> {
        self.index = IndexFrom::Made(keep);
        self
    }

    /// Opens the records of `input` (its diagnostics go to `ctx`), to be read by
    /// [`Reading::run`].
    ///
    /// # Errors
    ///
    /// The records cannot be opened.
    pub fn open<'i>(
        self,
        input: &'i mut Input,
        ctx: &mut Ctx<'_>,
    ) -> Result<Reading<'a, 'i>, Error> {
        let base = if self.threads > 1 && !matches!(self.index, IndexFrom::Known(None)) {
            input.share()
        } else {
            None
        };
        let records = self.handler.records(input, ctx)?;
        let base = base.filter(|_| records.seeks_by_index());
        Ok(Reading {
            how: self,
            records,
            base,
        })
    }

    /// [`Reading::run`] on several threads, each reading a share of `base`.
    fn parallel<S: Send>(
        &self,
        base: &Input,
        ctx: &mut Ctx<'_>,
        build: &(impl Fn(&mut dyn Records, u64) -> (S, Result<bool, Error>) + Sync),
        take: &mut impl FnMut(S) -> bool,
    ) -> Ended {
        let options = ctx.options;
        let shared = Shared {
            claims: Mutex::new(Claims {
                next: 0,
                taken: 0,
                last: None,
                index: match &self.index {
                    IndexFrom::Known(i) => Some(i.clone()),
                    IndexFrom::Made(_) => None,
                },
                starts: HashMap::new(),
                stop: false,
            }),
            changed: Condvar::new(),
            notes: Mutex::new(Vec::new()),
        };
        // One stretch past those being built: a thread that finished goes on while
        // another still builds the stretch due next.
        let window = (self.threads as u64).saturating_add(1);
        let (tx, rx) = channel::<(u64, Result<Built<S>, Error>)>();
        let failure = std::thread::scope(|scope| {
            if let IndexFrom::Made(keep) = self.index {
                let input = base.share();
                let shared = &shared;
                let made = std::thread::Builder::new()
                    .name("tracekit-index".into())
                    .spawn_scoped(scope, move || {
                        self.make_index(input, options, keep, shared);
                    });
                if made.is_err() {
                    shared.update(|c| c.index = Some(None));
                }
            }
            for _ in 0..self.threads {
                let (input, tx, shared) = (base.share(), tx.clone(), &shared);
                // A thread that did not start leaves its share to the others; only when
                // none started does nothing read (the channel then closes).
                let _ = std::thread::Builder::new()
                    .name("tracekit-stretch".into())
                    .spawn_scoped(scope, move || {
                        self.work(input, options, build, shared, &tx, window);
                    });
            }
            drop(tx);
            let failure = hand_on(&rx, ctx, take, &shared);
            shared.update(|c| c.stop = true);
            failure
        });
        let mut notes = shared
            .notes
            .into_inner()
            .unwrap_or_else(PoisonError::into_inner);
        notes.sort_by_key(|(k, _)| *k);
        Ended {
            failure,
            notes: merge_notes(notes.into_iter().flat_map(|(_, n)| n)),
        }
    }

    /// Makes the seek index, sharing on the way the indexes that reach each stretch its
    /// pass has gone past, then the whole.
    fn make_index(
        &self,
        input: Option<Input>,
        options: &Options,
        keep: &(dyn Fn(Option<SeekIndex>) -> Option<SeekIndex> + Sync),
        shared: &Shared,
    ) {
        let run = std::panic::AssertUnwindSafe(|| {
            let mut input = input?;
            let mut ctx = Ctx::new(options);
            let mut reached = |n: u64, index: SeekIndex| {
                let k = n.checked_div(self.rows).unwrap_or(0);
                // Only a stretch not claimed yet can start through it.
                shared.update(|c| {
                    if k >= c.next {
                        c.starts.insert(k, index);
                    }
                });
            };
            let mut steps = self.handler.steps(&mut input, &mut ctx).ok()?;
            steps
                .seek_index_reaching(self.rows, &mut reached)
                .ok()
                .flatten()
                .map(SeekIndex::new)
        });
        let made = std::panic::catch_unwind(run).ok().flatten();
        let index = keep(made);
        shared.update(|c| {
            c.index = Some(index);
            c.starts.clear();
        });
    }

    /// One thread: builds the stretches it claims and sends each with its number, until
    /// there are no more or one ends the records (or fails).
    fn work<S: Send>(
        &self,
        input: Option<Input>,
        options: &Options,
        build: &(impl Fn(&mut dyn Records, u64) -> (S, Result<bool, Error>) + Sync),
        shared: &Shared,
        tx: &Sender<(u64, Result<Built<S>, Error>)>,
        window: u64,
    ) {
        // A fresh reader is at stretch 0.
        let Some((mut k, mut index)) = shared.claim(Some(0), window) else {
            return;
        };
        let run = std::panic::AssertUnwindSafe(|| -> Result<(), Error> {
            let mut input = input.ok_or_else(|| internal("cannot share the input"))?;
            let mut ctx = Ctx::new(options);
            // A reader moved to the first stretch it builds, reading on while the claims
            // follow each other, else a fresh one (`seek` moves a fresh reader).
            loop {
                let mut records = self.handler.records(&mut input, &mut ctx)?;
                let first = k;
                let ended = (|| -> Result<bool, Error> {
                    if k > 0 {
                        records.seek(k.saturating_mul(self.rows), index.as_ref())?;
                    }
                    loop {
                        let (made, end) = build(records.as_mut(), self.rows);
                        let last = !matches!(end, Ok(false));
                        if last {
                            shared.update(|c| c.last = Some(c.last.map_or(k, |l| l.min(k))));
                        }
                        let position = records.position();
                        let built = Built {
                            made,
                            end,
                            position,
                        };
                        if tx.send((k, Ok(built))).is_err() || last {
                            return Ok(true);
                        }
                        let at = k.saturating_add(1);
                        let Some((next, i)) = shared.claim(Some(at), window) else {
                            return Ok(true);
                        };
                        (k, index) = (next, i);
                        if next != at {
                            return Ok(false);
                        }
                    }
                })();
                let notes = records.finish();
                drop(records);
                shared.note(first, notes);
                if ended? {
                    return Ok(());
                }
            }
        });
        let result = std::panic::catch_unwind(run)
            .unwrap_or_else(|_| Err(internal("a reader thread panicked")));
        if let Err(e) = result {
            shared.update(|c| c.last = Some(c.last.map_or(k, |l| l.min(k))));
            let _ = tx.send((k, Err(e)));
        }
    }
}

/// The caller's part of [`Stretches::parallel`]: the stretches in order to `take`, until
/// the records end (`None`), fail (the error), or `take` stops.
fn hand_on<S>(
    rx: &std::sync::mpsc::Receiver<(u64, Result<Built<S>, Error>)>,
    ctx: &mut Ctx<'_>,
    take: &mut impl FnMut(S) -> bool,
    shared: &Shared,
) -> Option<Error> {
    let mut early = BTreeMap::new();
    for k in 0u64.. {
        let got = match early.remove(&k) {
            Some(got) => got,
            None => loop {
                let Ok((j, got)) = rx.recv() else {
                    return Some(internal("the reader threads stopped"));
                };
                if j == k {
                    break got;
                }
                early.insert(j, got);
            },
        };
        let built = match got {
            Ok(built) => built,
            Err(e) => return Some(e),
        };
        ctx.progress(built.position);
        let go = take(built.made);
        shared.update(|c| c.taken = k.saturating_add(1));
        match built.end {
            Err(e) => return Some(e),
            Ok(true) => return None,
            Ok(false) if !go => return None,
            Ok(false) => {}
        }
    }
    None
}

fn internal(what: &str) -> Error {
    Error::io("reading on several threads", std::io::Error::other(what))
}

/// What the threads of one [`Reading::run`] share.
struct Claims {
    /// The next stretch to build.
    next: u64,
    /// How many stretches the caller has taken.
    taken: u64,
    /// The last stretch, once a thread found the records end (or fail) in it.
    last: Option<u64>,
    /// `None` while the seek index is being made; then the index (`None`: there is none).
    index: Option<Option<SeekIndex>>,
    /// While it is being made, the indexes that reach the stretches its pass has gone past,
    /// by stretch, until claimed.
    starts: HashMap<u64, SeekIndex>,
    /// Set when the caller is done (the end, an error, or `take` stopped).
    stop: bool,
}

/// [`Claims`], the signal that they changed, and the readers' notes.
struct Shared {
    claims: Mutex<Claims>,
    changed: Condvar,
    /// The notes of each reader, by the first stretch it read.
    notes: Mutex<Vec<(u64, Vec<Note>)>>,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Claims> {
        self.claims.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Changes the claims and wakes the threads waiting on them.
    fn update(&self, f: impl FnOnce(&mut Claims)) {
        f(&mut self.lock());
        self.changed.notify_all();
    }

    fn note(&self, first: u64, notes: Vec<Note>) {
        if !notes.is_empty() {
            let mut all = self.notes.lock().unwrap_or_else(PoisonError::into_inner);
            all.push((first, notes));
        }
    }

    /// The next stretch to build and the seek index that reaches it, or `None` when there
    /// is nothing more to build. A thread whose reader is at stretch `at` can build that
    /// one as it is; any other needs an index that reaches it, so it waits for one, and
    /// stops where none will come. At most `window` stretches are claimed past those
    /// taken (memory).
    fn claim(&self, at: Option<u64>, window: u64) -> Option<(u64, Option<SeekIndex>)> {
        let mut c = self.lock();
        loop {
            let past_last = c.last.is_some_and(|last| c.next > last);
            let start = c.starts.get(&c.next).cloned();
            let here = at == Some(c.next);
            let never = !here && matches!(c.index, Some(None)) && start.is_none();
            if c.stop || past_last || never {
                return None;
            }
            let ready = here || matches!(c.index, Some(Some(_))) || start.is_some();
            if ready && c.next < c.taken.saturating_add(window) {
                let k = c.next;
                c.next = k.saturating_add(1);
                c.starts.remove(&k);
                return Some((k, start.or_else(|| c.index.clone().flatten())));
            }
            c = self.changed.wait(c).unwrap_or_else(PoisonError::into_inner);
        }
    }
}
