//! The frame index: one linear scan of the frame headers, then random access by frame
//! number and GDB's `tfind` lookups without GDB's rescan from the first frame.

use std::collections::HashMap;

use crate::error::Error;
use crate::read::{Frame, FrameLayout, TraceFile};
use crate::tdesc::TargetDescription;

#[derive(Clone, Copy, Debug)]
struct Entry {
    offset: u64,
    size: u32,
    tracepoint: i16,
}

/// Random access to the frames of a [`TraceFile`].
#[derive(Debug)]
pub struct FrameIndex<'a> {
    data: &'a [u8],
    layout: FrameLayout,
    entries: Vec<Entry>,
    /// Tracepoint number → address (the first `tp` definition with that number).
    addresses: HashMap<i16, u64>,
}

impl<'a> FrameIndex<'a> {
    /// Indexes every frame.
    ///
    /// # Errors
    ///
    /// The error of a truncated frame or of frames without their terminator (use
    /// [`FrameIndex::new_partial`] to keep the complete frames).
    pub fn new(file: &TraceFile<'a>) -> Result<Self, Error> {
        let (idx, err) = Self::new_partial(file);
        match err {
            Some(e) => Err(e),
            None => Ok(idx),
        }
    }

    /// Indexes the complete frames, and returns the error that stopped the scan, if any.
    #[must_use]
    pub fn new_partial(file: &TraceFile<'a>) -> (Self, Option<Error>) {
        let mut entries = Vec::new();
        let mut err = None;
        for f in file.frames() {
            match f {
                Ok(f) => entries.push(Entry {
                    offset: f.offset.0,
                    size: u32::try_from(f.data.len()).unwrap_or(u32::MAX),
                    tracepoint: f.tracepoint,
                }),
                Err(e) => err = Some(e),
            }
        }
        let mut addresses = HashMap::new();
        for t in &file.description().tracepoints {
            if let Ok(n) = i16::try_from(t.number) {
                addresses.entry(n).or_insert(t.address);
            }
        }
        (
            FrameIndex {
                data: file.data(),
                layout: file.layout(),
                entries,
                addresses,
            },
            err,
        )
    }

    /// The number of frames.
    #[must_use]
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether there are no frames.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Frame number `n` (`tfind n`).
    #[must_use]
    pub fn frame(&self, n: usize) -> Option<Frame<'a>> {
        let e = self.entries.get(n)?;
        let start = usize::try_from(e.offset)
            .ok()?
            .checked_add(crate::raw::FRAME_HEADER_LEN)?;
        let data = self.data.get(start..start.checked_add(e.size as usize)?)?;
        Some(Frame {
            index: n as u64,
            offset: trace_core::Offset(e.offset),
            tracepoint: e.tracepoint,
            data,
            layout: self.layout,
        })
    }

    /// The tracepoint number of frame `n`, from the index alone.
    #[must_use]
    pub fn tracepoint_of(&self, n: usize) -> Option<i16> {
        self.entries.get(n).map(|e| e.tracepoint)
    }

    /// Frame counts per tracepoint number, sorted by number.
    #[must_use]
    pub fn counts_by_tracepoint(&self) -> Vec<(i16, u64)> {
        let mut m: HashMap<i16, u64> = HashMap::new();
        for e in &self.entries {
            let c = m.entry(e.tracepoint).or_insert(0);
            *c = c.saturating_add(1);
        }
        let mut v: Vec<_> = m.into_iter().collect();
        v.sort_unstable();
        v
    }

    fn find_from(&self, from: usize, pred: impl Fn(usize, &Entry) -> bool) -> Option<usize> {
        self.entries
            .iter()
            .enumerate()
            .skip(from)
            .find(|(i, e)| pred(*i, e))
            .map(|(i, _)| i)
    }

    /// `tfind tracepoint N`: the first frame at or after `from` of tracepoint `tp`.
    #[must_use]
    pub fn find_tracepoint(&self, tp: i16, from: usize) -> Option<usize> {
        self.find_from(from, |_, e| e.tracepoint == tp)
    }

    /// `tfind pc ADDR` as GDB does it: the first frame at or after `from` whose
    /// tracepoint's address is `pc`.
    #[must_use]
    pub fn find_pc(&self, pc: u64, from: usize) -> Option<usize> {
        self.find_from(from, |_, e| self.addresses.get(&e.tracepoint) == Some(&pc))
    }

    /// `tfind range LO, HI` (`outside = false`) or `tfind outside LO, HI`: the first frame
    /// at or after `from` whose tracepoint address is inside (outside) `[lo, hi]`.
    #[must_use]
    pub fn find_range(&self, lo: u64, hi: u64, outside: bool, from: usize) -> Option<usize> {
        self.find_from(from, |_, e| {
            self.addresses
                .get(&e.tracepoint)
                .is_some_and(|a| ((lo..=hi).contains(a)) != outside)
        })
    }

    /// The first frame at or after `from` whose collected program counter (the
    /// description's `rip`/`eip`/`pc` register in its `R` block) is `pc`, falling back to
    /// the tracepoint's address for frames without registers, as GDB guesses.
    #[must_use]
    pub fn find_collected_pc(
        &self,
        tdesc: &TargetDescription,
        pc: u64,
        from: usize,
    ) -> Option<usize> {
        let name = tdesc.pc_register()?.name.clone();
        (from..self.len()).find(|&i| {
            let Some(f) = self.frame(i) else {
                return false;
            };
            match f.register(tdesc, &name) {
                Ok(Some(v)) => v.as_u64() == Some(pc),
                Ok(None) => self.addresses.get(&f.tracepoint) == Some(&pc),
                Err(_) => false,
            }
        })
    }

    /// The first frame at or after `from` that collected any memory in
    /// `[address, address + len)`.
    #[must_use]
    pub fn find_memory(&self, address: u64, len: u64, from: usize) -> Option<usize> {
        let end = address.saturating_add(len);
        (from..self.len()).find(|&i| {
            self.frame(i).is_some_and(|f| {
                f.blocks().any(|b| {
                    matches!(b, Ok(crate::read::Block::Memory { address: a, data, .. })
                        if a < end && a.saturating_add(data.len() as u64) > address)
                })
            })
        })
    }
}
