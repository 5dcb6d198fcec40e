//! `find`: the frames of a GDB tracepoint file that match a query, as GDB's `tfind pc`,
//! `tfind tracepoint`, `tfind range`, `tfind outside` and a memory search would find them,
//! all at once and in one pass instead of GDB's rescan from the first frame per lookup.
//!
//! A frame's pc is the one its step has (see the gdb-tfile handler): the pc register it
//! collected, or the tracepoint's address for a frame without registers where GDB would
//! infer it. (GDB's own `tfind pc` compares the tracepoint's address; the two differ only
//! for while-stepping frames.) Frames whose pc is unknown match no pc condition.
//!
//! ```
//! use trace_registry::formats::gdb_tfile::find::{FindQuery, find};
//! use trace_registry::{Ctx, Input, Options};
//!
//! let mut input = Input::open("../../testdata/gdb-tfile/amd64.tf".as_ref())?;
//! let handler = trace_registry::detect(&input).expect("a tfile");
//! // The frames of tracepoint 3 whose collected pc is 0x401197.
//! let query = FindQuery { tracepoint: Some(3), pc: Some(0x401197), ..FindQuery::default() };
//! let mut frames = Vec::new();
//! let options = Options::default();
//! find(handler, &mut input, &mut Ctx::new(&options), &query, |m| {
//!     frames.push(m.frame);
//!     Ok(())
//! })?;
//! assert_eq!(frames, [15, 31]);
//! # Ok::<(), trace_registry::Error>(())
//! ```

use std::ops::Range;

use serde::Serialize;

use crate::formats::gdb_tfile::TfileSteps;
use crate::steps::Steps;
use crate::{Ctx, Error, Handler, Input};

/// What to look for; every condition given must hold (an empty query matches every frame).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FindQuery {
    /// The frame's pc equals this.
    pub pc: Option<u64>,
    /// The frame's tracepoint number (the file's numbering; 0xffff also finds -1).
    pub tracepoint: Option<u64>,
    /// The frame's pc is inside this end-exclusive range.
    pub range: Option<Range<u64>>,
    /// The frame's pc is outside this end-exclusive range.
    pub outside: Option<Range<u64>>,
    /// The frame collected memory covering at least one byte of `addr .. addr + len`.
    pub mem: Option<MemQuery>,
}

/// A memory range to look for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MemQuery {
    /// The first address.
    pub addr: u64,
    /// The length in bytes; `None` for one word of the target (8 bytes on x86-64 and
    /// unknown targets, 4 on i386).
    pub len: Option<u64>,
}

/// One matching frame: `{"frame":N,"tracepoint":T,"pc":"0x…"}` (`pc` is `null` where it
/// is unknown).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct FrameMatch {
    /// The frame number (`tfind N`).
    pub frame: u64,
    /// The tracepoint number as the file has it (GDB shows 0xffff as -1).
    pub tracepoint: i16,
    /// The frame's pc.
    #[serde(serialize_with = "hex")]
    pub pc: Option<u64>,
}

fn hex<S: serde::Serializer>(pc: &Option<u64>, s: S) -> Result<S::Ok, S::Error> {
    match pc {
        Some(pc) => s.serialize_str(&format!("{pc:#x}")),
        None => s.serialize_none(),
    }
}

impl FrameMatch {
    /// The JSON line `tracekit find --json` prints.
    #[must_use]
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }
}

impl FindQuery {
    /// Whether a frame with this tracepoint and pc passes the tracepoint and pc conditions.
    fn frame_matches(&self, tracepoint: i16, pc: Option<u64>) -> bool {
        if let Some(t) = self.tracepoint
            && u64::try_from(tracepoint).ok() != Some(t)
            && u64::from(tracepoint.cast_unsigned()) != t
        {
            return false;
        }
        let wants_pc = self.pc.is_some() || self.range.is_some() || self.outside.is_some();
        let Some(pc) = pc else { return !wants_pc };
        self.pc.is_none_or(|p| p == pc)
            && self.range.as_ref().is_none_or(|r| r.contains(&pc))
            && self.outside.as_ref().is_none_or(|r| !r.contains(&pc))
    }
}

/// Calls `on_match` for each frame of the tfile `input` that matches `query`, in frame
/// order, as the frames are read (memory stays bounded by one frame); returns how many
/// matched.
///
/// # Errors
///
/// [`Error::Unsupported`] when `handler` has no frames to search
/// ([`Offers::frames`](crate::Offers::frames): the gdb-tfile one); the input's read error
/// (after the matches before it were handed out); what `on_match` returns.
pub fn find(
    handler: &dyn Handler,
    input: &mut Input,
    ctx: &mut Ctx<'_>,
    query: &FindQuery,
    mut on_match: impl FnMut(&FrameMatch) -> Result<(), Error>,
) -> Result<u64, Error> {
    if !handler.offers().frames {
        return Err(Error::Unsupported(format!(
            "find searches the frames of GDB tracepoint files (gdb-tfile), not {} traces",
            handler.name()
        )));
    }
    let mut frames = TfileSteps::open(input, ctx)?;
    let word = u64::from(frames.isa().word_size());
    let mem = query.mem.map(|m| {
        let len = m.len.unwrap_or(word);
        (m.addr, m.addr.saturating_add(len))
    });
    let mut found = 0u64;
    let mut seen = 0u64;
    while let Some(step) = frames.next_step() {
        let step = step?;
        let covers = |(lo, hi): (u64, u64)| {
            step.mem
                .iter()
                .any(|a| a.addr < hi && a.addr.saturating_add(u64::from(a.len)) > lo)
        };
        let frame = step.i;
        let hit =
            mem.is_none_or(covers) && query.frame_matches(frames.tracepoint(), frames.frame_pc());
        if hit {
            found = found.saturating_add(1);
            on_match(&FrameMatch {
                frame,
                tracepoint: frames.tracepoint(),
                pc: frames.frame_pc(),
            })?;
        }
        seen = seen.saturating_add(1);
        if seen.is_multiple_of(4096) {
            ctx.progress(frames.position());
        }
    }
    Ok(found)
}
