//! Which thread runs each step: the trace as runs of consecutive steps of one thread,
//! found in one lean pass at the start, so that the next or previous step of a thread is
//! a lookup, not a walk over the steps.

use trace_registry::Error;
use trace_registry::steps::{ScanQuery, Steps};

/// The threads of a trace and the runs of steps each executes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Timeline {
    /// `(first step, thread)` of each run, in step order; a run ends where the next starts.
    runs: Vec<(u64, u64)>,
    /// The number of steps.
    count: u64,
    /// The recorded thread ids, in the order they first run.
    threads: Vec<u64>,
}

impl Timeline {
    /// The timeline of `steps` from their start (one lean scan, `Raw::scan`; the steps are then at
    /// their end).
    ///
    /// # Errors
    ///
    /// The trace cannot be read.
    pub fn scan(steps: &mut dyn Steps) -> Result<Timeline, Error> {
        steps.seek(0)?;
        let mut t = Timeline::default();
        let query = ScanQuery {
            all: true,
            ..ScanQuery::default()
        };
        steps.scan(&query, &mut |step| {
            t.push(step.i, step.thread);
            Ok(())
        })?;
        Ok(t)
    }

    /// A timeline of the threads of each step in turn (tests).
    #[cfg(test)]
    pub fn of(threads: &[u64]) -> Timeline {
        let mut t = Timeline::default();
        for (i, &th) in threads.iter().enumerate() {
            t.push(i as u64, th);
        }
        t
    }

    fn push(&mut self, i: u64, thread: u64) {
        if self.runs.last().is_none_or(|&(_, th)| th != thread) {
            self.runs.push((i, thread));
        }
        if !self.threads.contains(&thread) {
            self.threads.push(thread);
        }
        self.count = i.saturating_add(1);
    }

    /// The number of steps.
    #[must_use]
    pub fn count(&self) -> u64 {
        self.count
    }

    /// The recorded thread ids, in the order they first run.
    #[must_use]
    pub fn threads(&self) -> &[u64] {
        &self.threads
    }

    /// Each thread (in [`Timeline::threads`]'s order) with the number of steps it runs.
    #[must_use]
    pub fn thread_steps(&self) -> Vec<(u64, u64)> {
        let mut counts: Vec<(u64, u64)> = self.threads.iter().map(|&t| (t, 0)).collect();
        for (r, &(start, thread)) in self.runs.iter().enumerate() {
            let len = self.end_of(r).saturating_sub(start);
            if let Some(c) = counts.iter_mut().find(|(t, _)| *t == thread) {
                c.1 = c.1.saturating_add(len);
            }
        }
        counts
    }

    /// The run holding step `i`.
    fn run_of(&self, i: u64) -> Option<usize> {
        if i >= self.count {
            return None;
        }
        self.runs.partition_point(|&(s, _)| s <= i).checked_sub(1)
    }

    /// The first step after run `r`.
    fn end_of(&self, r: usize) -> u64 {
        self.runs
            .get(r.saturating_add(1))
            .map_or(self.count, |&(s, _)| s)
    }

    /// The thread of step `i`.
    #[must_use]
    pub fn thread_at(&self, i: u64) -> Option<u64> {
        self.runs.get(self.run_of(i)?).map(|&(_, th)| th)
    }

    /// The first step at or after `i` that `thread` executes.
    #[must_use]
    pub fn first_from(&self, thread: u64, i: u64) -> Option<u64> {
        let r = self.run_of(i)?;
        let rest = self.runs.get(r..)?;
        rest.iter()
            .enumerate()
            .find(|(_, (_, th))| *th == thread)
            .map(|(k, &(s, _))| if k == 0 { i } else { s })
    }

    /// The last step before `i` that `thread` executes.
    #[must_use]
    pub fn last_before(&self, thread: u64, i: u64) -> Option<u64> {
        let j = i.min(self.count).checked_sub(1)?;
        let r = self.run_of(j)?;
        (0..=r)
            .rev()
            .find(|&k| self.runs.get(k).is_some_and(|&(_, th)| th == thread))
            .map(|k| {
                if k == r {
                    j
                } else {
                    self.end_of(k).saturating_sub(1)
                }
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn next_and_previous_steps_of_a_thread() {
        let t = Timeline::of(&[5, 5, 7, 7, 5, 9]);
        assert_eq!(t.count(), 6);
        assert_eq!(t.threads(), &[5, 7, 9]);
        assert_eq!(t.thread_at(3), Some(7));
        assert_eq!(t.thread_at(6), None);
        assert_eq!(t.first_from(5, 1), Some(1));
        assert_eq!(t.first_from(5, 2), Some(4));
        assert_eq!(t.first_from(7, 5), None);
        assert_eq!(t.first_from(9, 0), Some(5));
        assert_eq!(t.last_before(5, 4), Some(1));
        assert_eq!(t.last_before(5, 5), Some(4));
        assert_eq!(t.last_before(7, 2), None);
        assert_eq!(t.last_before(7, 100), Some(3));
        assert_eq!(t.last_before(5, 0), None);
        assert_eq!(t.thread_steps(), [(5, 3), (7, 2), (9, 1)]);
    }
}
