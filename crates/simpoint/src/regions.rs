//! LoopPoint-style region files: where each simulation point starts and ends as
//! (pc, execution count) markers, so a simulator can fast-forward to a marker, simulate to
//! the next and scale the result by the region's multiplier.
//!
//! The CSV has LoopPoint's `*.pinpoints.csv` columns without its image-name and
//! image-offset columns (a `.bb` file does not know images), one row per cluster in
//! cluster order:
//!
//! | column | meaning |
//! |---|---|
//! | `comment` | `cluster C from slice S`, as PinPoints writes it (its scripts match this text) |
//! | `thread-id` | the thread of a per-thread `.bb`, or `global` for one stream over all threads |
//! | `region-id` | the cluster + 1 |
//! | `start-pc` | the pc of the `M:` marker before the slice (hex); `0x0` for the first slice, which starts at the trace's start |
//! | `start-pc-count` | that pc's execution count at the marker, counting the execution that starts the region; `0` for the first slice (no execution has happened: start at the beginning) |
//! | `end-pc` | the pc of the `M:` marker after the slice: the first instruction *not* in the region; `0x0` for the last slice, which runs to the end of the trace |
//! | `end-pc-count` | its execution count at that marker (the execution that ends the region); `0` for the last slice |
//! | `end-pc-relative-count` | the executions of `end-pc` from the region's start up to and including the one that ends it: `end-pc-count − start-pc-count` when both markers have the same pc (a loop header, LoopPoint's usual case); empty when the pcs differ or a marker is missing, since a `.bb` file does not say how often another pc ran before the region |
//! | `region-length` | the instructions in the slice (the sum of its `T:` counts) |
//! | `region-weight` | the cluster's weight from the `.weights` file (5 decimals, as LoopPoint) |
//! | `region-multiplier` | `region-weight × total instructions / region-length`: what the region's measurements are multiplied by to stand for the whole run (3 decimals); with equal slices, the number of slices in the cluster |
//! | `region-type` | `simulation` |

use std::fmt;
use std::io::{self, Write};

use crate::simpoints::{SimPoint, Weight};

/// The CSV's header line (without its line end).
pub const HEADER: &str = "comment,thread-id,region-id,start-pc,start-pc-count,end-pc,end-pc-count,end-pc-relative-count,region-length,region-weight,region-multiplier,region-type";

/// A marker: a pc and its execution count (counting the execution at the marker).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Marker {
    /// The pc.
    pub pc: u64,
    /// Its execution count so far.
    pub count: u64,
}

/// What a region needs to know of one slice of a `.bb` file.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Slice {
    /// The instructions in the slice: the sum of its counts.
    pub instructions: f64,
    /// The marker before it (`None` for the first slice, or where the file has none).
    pub start: Option<Marker>,
    /// The marker after it (`None` for the last slice, or where the file has none).
    pub end: Option<Marker>,
}

/// Collects [`Slice`]s from a `.bb` file's items in order: call [`Slices::slice`] for each
/// `T:` line and [`Slices::marker`] for each `M:` line.
#[derive(Clone, Debug, Default)]
pub struct Slices {
    slices: Vec<Slice>,
    pending: Option<Marker>,
}

impl Slices {
    /// No slices yet.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// A `T:` line with this many instructions.
    pub fn slice(&mut self, instructions: f64) {
        self.slices.push(Slice {
            instructions,
            start: self.pending.take(),
            end: None,
        });
    }

    /// An `M:` line: the end of the slice before it and the start of the next.
    pub fn marker(&mut self, pc: u64, count: u64) {
        let m = Marker { pc, count };
        if let Some(last) = self.slices.last_mut() {
            last.end = Some(m);
        }
        self.pending = Some(m);
    }

    /// The slices read.
    #[must_use]
    pub fn finish(self) -> Vec<Slice> {
        self.slices
    }
}

/// One row of the CSV.
#[derive(Clone, Debug, PartialEq)]
pub struct Region {
    /// The cluster.
    pub cluster: u64,
    /// The slice simulated.
    pub slice: u64,
    /// Where it starts (`None`: at the trace's start).
    pub start: Option<Marker>,
    /// Where it ends (`None`: at the trace's end).
    pub end: Option<Marker>,
    /// `end-pc-relative-count`, where known.
    pub end_relative: Option<u64>,
    /// Its instructions.
    pub length: f64,
    /// The cluster's weight.
    pub weight: f64,
    /// The multiplier.
    pub multiplier: f64,
}

/// Why regions cannot be made.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A simulation point names a slice the `.bb` file does not have.
    #[error(
        "the simpoints name slice {slice} (cluster {cluster}), but the .bb file has {slices} slices"
    )]
    NoSuchSlice {
        /// The slice.
        slice: u64,
        /// Its cluster.
        cluster: u64,
        /// The slices in the file.
        slices: usize,
    },
    /// A cluster has a simulation point but no weight.
    #[error("cluster {0} has a simulation point but no weight")]
    NoWeight(u64),
    /// A cluster has a weight but no simulation point.
    #[error("cluster {0} has a weight but no simulation point")]
    NoSimPoint(u64),
}

/// The regions of `simpoints` with their `weights`, over the slices of the `.bb` file.
///
/// # Errors
///
/// A simulation point is past the last slice, or the two files do not list the same
/// clusters.
pub fn regions(
    slices: &[Slice],
    simpoints: &[SimPoint],
    weights: &[Weight],
) -> Result<Vec<Region>, Error> {
    if let Some(w) = weights
        .iter()
        .find(|w| !simpoints.iter().any(|p| p.cluster == w.cluster))
    {
        return Err(Error::NoSimPoint(w.cluster));
    }
    let total: f64 = slices.iter().map(|s| s.instructions).sum();
    let mut out = Vec::with_capacity(simpoints.len());
    for p in simpoints {
        let s = usize::try_from(p.slice)
            .ok()
            .and_then(|i| slices.get(i))
            .ok_or(Error::NoSuchSlice {
                slice: p.slice,
                cluster: p.cluster,
                slices: slices.len(),
            })?;
        let weight = weights
            .iter()
            .find(|w| w.cluster == p.cluster)
            .ok_or(Error::NoWeight(p.cluster))?
            .weight;
        let end_relative = match (s.start, s.end) {
            (Some(a), Some(b)) if a.pc == b.pc => b.count.checked_sub(a.count),
            _ => None,
        };
        let multiplier = if s.instructions > 0.0 {
            weight * total / s.instructions
        } else {
            0.0
        };
        out.push(Region {
            cluster: p.cluster,
            slice: p.slice,
            start: s.start,
            end: s.end,
            end_relative,
            length: s.instructions,
            weight,
            multiplier,
        });
    }
    out.sort_by_key(|r| r.cluster);
    Ok(out)
}

/// The `thread-id` column: a thread number or `global`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ThreadId {
    /// One stream over every thread.
    Global,
    /// One thread's stream.
    Thread(u64),
}

impl fmt::Display for ThreadId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ThreadId::Global => f.write_str("global"),
            ThreadId::Thread(t) => write!(f, "{t}"),
        }
    }
}

/// Writes the header and one row per region.
///
/// # Errors
///
/// Writing fails.
pub fn write_csv<W: Write>(mut w: W, thread: ThreadId, regions: &[Region]) -> io::Result<()> {
    writeln!(w, "{HEADER}")?;
    let marker = |m: Option<Marker>| m.map_or((0, 0), |m| (m.pc, m.count));
    for r in regions {
        let (start_pc, start_count) = marker(r.start);
        let (end_pc, end_count) = marker(r.end);
        let relative = r.end_relative.map(|c| c.to_string()).unwrap_or_default();
        writeln!(
            w,
            "cluster {} from slice {},{thread},{},{start_pc:#x},{start_count},{end_pc:#x},{end_count},{relative},{:.0},{:.5},{:.3},simulation",
            r.cluster,
            r.slice,
            r.cluster.saturating_add(1),
            r.length,
            r.weight,
            r.multiplier,
        )?;
    }
    Ok(())
}

#[cfg(test)]
#[allow(clippy::arithmetic_side_effects)]
mod tests {
    use super::*;

    fn sp(slice: u64, cluster: u64) -> SimPoint {
        SimPoint { slice, cluster }
    }

    fn w(weight: f64, cluster: u64) -> Weight {
        Weight { weight, cluster }
    }

    /// Four slices of 100, 120, 100, 80 instructions with markers at a loop header
    /// 0x400 (counts 10, 22) and then at 0x500 (count 3).
    fn slices() -> Vec<Slice> {
        let mut s = Slices::new();
        s.slice(100.0);
        s.marker(0x400, 10);
        s.slice(120.0);
        s.marker(0x400, 22);
        s.slice(100.0);
        s.marker(0x500, 3);
        s.slice(80.0);
        s.finish()
    }

    #[test]
    fn rows_by_hand() {
        let r = regions(
            &slices(),
            &[sp(1, 1), sp(0, 0), sp(3, 2)],
            &[w(0.5, 0), w(0.25, 1), w(0.25, 2)],
        )
        .unwrap();
        let mut out = Vec::new();
        write_csv(&mut out, ThreadId::Global, &r).unwrap();
        // Total 400 instructions: multiplier = weight × 400 / length.
        let expected = [
            HEADER,
            "cluster 0 from slice 0,global,1,0x0,0,0x400,10,,100,0.50000,2.000,simulation",
            "cluster 1 from slice 1,global,2,0x400,10,0x400,22,12,120,0.25000,0.833,simulation",
            "cluster 2 from slice 3,global,3,0x500,3,0x0,0,,80,0.25000,1.250,simulation",
        ];
        assert_eq!(String::from_utf8(out).unwrap(), expected.join("\n") + "\n");
        let mut out = Vec::new();
        write_csv(&mut out, ThreadId::Thread(7), &r[..1]).unwrap();
        assert!(String::from_utf8(out).unwrap().contains(",7,1,0x0,"));
    }

    #[test]
    fn mismatches_are_errors() {
        let s = slices();
        assert_eq!(
            regions(&s, &[sp(4, 0)], &[w(1.0, 0)]),
            Err(Error::NoSuchSlice {
                slice: 4,
                cluster: 0,
                slices: 4
            })
        );
        assert_eq!(
            regions(&s, &[sp(0, 0)], &[w(1.0, 1)]),
            Err(Error::NoSimPoint(1))
        );
        assert_eq!(
            regions(&s, &[sp(0, 0), sp(1, 1)], &[w(1.0, 0)]),
            Err(Error::NoWeight(1))
        );
    }
}
