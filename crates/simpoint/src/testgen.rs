//! Synthetic `.bb` files with a known phase structure, for benchmarks and tests.

use crate::bb::{WriteError, Writer};
use crate::cluster::SplitMix64;

/// The shape of a synthetic run.
#[derive(Clone, Copy, Debug)]
pub struct Shape {
    /// Slices (`T:` lines).
    pub slices: usize,
    /// Distinct blocks over the whole run (ids `1..=blocks`).
    pub blocks: u32,
    /// Blocks executed in each slice (at most `blocks`).
    pub per_slice: u32,
    /// Phases: each has its own set of `per_slice` consecutive blocks (modulo `blocks`, so
    /// the sets overlap when `phases × per_slice > blocks`) and its own counts.
    pub phases: usize,
    /// The seed.
    pub seed: u64,
}

/// A `.bb` file of `shape.slices` slices: runs of 1 to 50 slices of one phase at a time,
/// every count jittered by ±10 %, an `M:` marker between slices. Returns the text and the
/// phase of each slice.
///
/// # Errors
///
/// The shape has no blocks or no phases.
pub fn phases(shape: Shape) -> Result<(Vec<u8>, Vec<usize>), WriteError> {
    let mut rng = SplitMix64::new(shape.seed);
    let blocks = shape.blocks.max(1);
    let per_slice = shape.per_slice.clamp(1, blocks);
    let phases = shape.phases.max(1);
    let profile: Vec<Vec<(u32, f64)>> = (0..phases)
        .map(|p| {
            let first = u32::try_from(p).unwrap_or(0).wrapping_mul(
                blocks
                    .checked_div(u32::try_from(phases).unwrap_or(1))
                    .unwrap_or(1),
            );
            let mut ids: Vec<(u32, f64)> = (0..per_slice)
                .map(|i| {
                    let id = first
                        .wrapping_add(i)
                        .checked_rem(blocks)
                        .unwrap_or(0)
                        .saturating_add(1);
                    (id, 1.0 + 999.0 * rng.next_f64())
                })
                .collect();
            ids.sort_by_key(|e| e.0);
            ids
        })
        .collect();
    let mut labels = Vec::with_capacity(shape.slices);
    let mut w = Writer::new(Vec::new());
    let mut entries: Vec<(u32, u64)> = Vec::with_capacity(per_slice as usize);
    while labels.len() < shape.slices {
        let phase = rng.below(phases);
        let run = 1usize.saturating_add(rng.below(50));
        for _ in 0..run.min(shape.slices.saturating_sub(labels.len())) {
            if !labels.is_empty() {
                w.marker(0x40_1000, labels.len() as u64)?;
            }
            entries.clear();
            for &(id, base) in profile.get(phase).into_iter().flatten() {
                let jitter = 0.9 + 0.2 * rng.next_f64();
                // At most 1100: the conversion is exact.
                #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
                entries.push((id, (base * jitter).round().max(1.0) as u64));
            }
            w.slice(entries.iter().copied())?;
            labels.push(phase);
        }
    }
    Ok((w.finish()?, labels))
}
