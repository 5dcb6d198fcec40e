//! SimPoint 3.2's method: random projection, k-means for every k, the BIC choice of k and one
//! representative slice per cluster. Implemented from the method's published description
//! (Sherwood et al., ASPLOS 2002; Hamerly et al., "SimPoint 3.0", JILP 2005), not from
//! SimPoint's code.
//!
//! 1. **Normalise and project.** Each slice's vector (instructions per block) is divided by
//!    its total, so it holds fractions summing to 1, then multiplied by a random
//!    `blocks × dim` matrix whose entries are uniform in \[-1, 1). The row of a block is
//!    drawn, when the block is first seen, from a SplitMix64 stream keyed by the seed, the
//!    block id and its stream (thread), so the matrix holds only the blocks that occur.
//!    Vectors of several threads of one global slice are concatenated (LoopPoint) by giving
//!    each thread's blocks their own rows and normalising by the sum of all.
//! 2. **k-means** (Lloyd's iterations, at most [`Options::max_iterations`], default 100,
//!    with Hamerly's bounds to skip distances that cannot change an assignment) for every k
//!    from 1 to `max_k`, from `init_seeds` starts each: k distinct slices drawn at random,
//!    or furthest-first (a random slice, then repeatedly the slice farthest from the chosen
//!    ones). A cluster left empty takes the slice farthest from its centre (if any slice
//!    is off its centre). The start with the lowest distortion (weighted sum of squared
//!    distances to the centres) is kept.
//! 3. **BIC** of each clustering: the log-likelihood of a mixture of spherical Gaussians
//!    with one shared variance, minus the usual penalty (Pelleg and Moore's x-means BIC, as
//!    SimPoint uses it). With `R` slices (the sum of the point weights, scaled to mean 1),
//!    `M = dim`, `K` clusters of sizes `R_j` and distortion `D`:
//!
//!    ```text
//!    σ² = max(D / (M · max(R − K, 1)), floor)          (per-dimension variance)
//!    l  = Σ_j R_j ln(R_j / R) − (R·M / 2) ln(2π σ²) − D / (2 σ²)
//!    p  = (K − 1) + K·M + 1                            (mixing weights, centres, variance)
//!    BIC = l − (p / 2) ln R
//!    ```
//!
//!    `floor` is 10⁻²⁰ of the mean squared coordinate: a variance below it is rounding
//!    noise (identical slices, whose centre is a rounded mean), so identical slices score
//!    as a perfect fit at every k and the penalty picks the smallest.
//!    k stops one short of the number of slices (k = 1 for a single slice): with a cluster
//!    per slice there is nothing left to estimate the variance from (R − K = 0) and the
//!    score would be unbounded.
//!
//!    x-means writes the variance as `D / (R − K)` per point, not per dimension; dividing by
//!    `M` as well makes it the maximum-likelihood estimate of the model the likelihood
//!    describes, so the BIC does not drift with `dim`.
//! 4. **Choice of k**: the smallest k whose BIC reaches `min + bic_threshold · (max − min)`
//!    over the scores of every k tried (default threshold 0.9).
//! 5. **Simulation points**: in each cluster the slice closest to the centre (the lowest
//!    slice index on a tie); clusters are numbered in order of their first slice. The
//!    weight of a cluster is its share of the slices, or of the instructions with
//!    weighting by instructions (then the points also count by their instructions in the
//!    centres and the BIC, as SimPoint 3.0 does for variable-length intervals).
//!
//! Differences from SimPoint 3.2: every k in `1..=max_k` is clustered (SimPoint 3.2 can
//! bisect over k, `-searchType binary`; trying every k costs little at these sizes and
//! makes the choice independent of the search path); the random numbers are our own
//! (SplitMix64), so the same seed gives other projections and starts than SimPoint's, and
//! results match SimPoint's only up to those draws; there is no sub-sampling of slices
//! (`-sampleSize`), no `-coveragePct` and no early or variance SimPoints. The result is
//! deterministic for a seed: each (k, start) draws from its own stream, independent of the
//! order in which they run.

use std::collections::HashMap;
use std::f64::consts::PI;
use std::hash::{BuildHasherDefault, Hasher};

/// The projected dimensions by default (SimPoint's `-dim`).
pub const DEFAULT_DIM: usize = 15;
/// The k-means starts per k by default (SimPoint's `-numInitSeeds`).
pub const DEFAULT_INIT_SEEDS: usize = 5;
/// The fraction of the BIC range the chosen k must reach by default (`-bicThreshold`).
pub const DEFAULT_BIC_THRESHOLD: f64 = 0.9;
/// The cap on k-means iterations by default.
pub const DEFAULT_MAX_ITERATIONS: usize = 100;
/// The largest `dim` accepted: far beyond any use, it bounds the projection's memory.
pub const MAX_DIM: usize = 4096;

/// How k-means picks its starting centres.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Init {
    /// k distinct slices drawn at random (SimPoint's `-initkm samp`).
    #[default]
    Random,
    /// A random slice, then repeatedly the slice farthest from those chosen (`-initkm ff`).
    FurthestFirst,
}

/// The parameters of the method.
#[derive(Clone, Debug, PartialEq)]
pub struct Options {
    /// The largest k tried (SimPoint's `-maxK`); at least 1.
    pub max_k: usize,
    /// The dimensions of the random projection; at least 1, at most [`MAX_DIM`].
    pub dim: usize,
    /// The seed of every random draw (projection and starts).
    pub seed: u64,
    /// k-means starts per k; at least 1.
    pub init_seeds: usize,
    /// How starts are drawn.
    pub init: Init,
    /// The fraction of the BIC range the chosen k must reach, in \[0, 1\].
    pub bic_threshold: f64,
    /// The cap on Lloyd iterations per start; at least 1.
    pub max_iterations: usize,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            max_k: 30,
            dim: DEFAULT_DIM,
            seed: 0,
            init_seeds: DEFAULT_INIT_SEEDS,
            init: Init::Random,
            bic_threshold: DEFAULT_BIC_THRESHOLD,
            max_iterations: DEFAULT_MAX_ITERATIONS,
        }
    }
}

/// What the method cannot work with.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// There are no slices.
    #[error("no slices to cluster")]
    NoSlices,
    /// `max_k` is 0.
    #[error("max-k must be at least 1")]
    MaxKZero,
    /// `dim` is 0 or above [`MAX_DIM`].
    #[error("dim must be between 1 and {MAX_DIM}, not {0}")]
    BadDim(usize),
    /// `init_seeds` is 0.
    #[error("init-seeds must be at least 1")]
    InitSeedsZero,
    /// `max_iterations` is 0.
    #[error("the k-means iteration cap must be at least 1")]
    MaxIterationsZero,
    /// `bic_threshold` is not in \[0, 1\].
    #[error("bic-threshold must be between 0 and 1, not {0}")]
    BadThreshold(f64),
    /// A count is negative, infinite or not a number.
    #[error("slice {slice}: block {id} has count {count}, not a finite number ≥ 0")]
    BadCount {
        /// The slice (from 0).
        slice: usize,
        /// The block id.
        id: u64,
        /// The count.
        count: f64,
    },
    /// A slice's weight is negative, infinite or not a number.
    #[error("slice {slice}: weight {weight} is not a finite number ≥ 0")]
    BadWeight {
        /// The slice (from 0).
        slice: usize,
        /// The weight.
        weight: f64,
    },
    /// The points' coordinates are not `dim` per point, or not one weight per point.
    #[error("{coords} coordinates and {weights} weights do not make points of {dim} dimensions")]
    Shape {
        /// The number of coordinates.
        coords: usize,
        /// The number of weights.
        weights: usize,
        /// The dimensions.
        dim: usize,
    },
}

/// SplitMix64 (Steele, Lea and Flood, 2014): a small, fast generator whose output is the
/// same on every platform, so a seed means the same clustering everywhere.
#[derive(Clone, Debug)]
pub struct SplitMix64(u64);

impl SplitMix64 {
    const GAMMA: u64 = 0x9e37_79b9_7f4a_7c15;

    /// A generator started at `seed`.
    #[must_use]
    pub fn new(seed: u64) -> Self {
        Self(seed)
    }

    /// The finaliser of SplitMix64: a bijective mix of 64 bits.
    #[must_use]
    pub fn mix(z: u64) -> u64 {
        let z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        let z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(Self::GAMMA);
        Self::mix(self.0)
    }

    /// A uniform number in \[0, 1) with 53 random bits.
    pub fn next_f64(&mut self) -> f64 {
        unit(self.next_u64())
    }

    /// A uniform integer in `0..n` (`n` ≥ 1), by Lemire's multiply-shift (its bias, below
    /// `n / 2^64`, is immaterial here).
    pub fn below(&mut self, n: usize) -> usize {
        let wide = u128::from(self.next_u64()).wrapping_mul(n as u128);
        usize::try_from(wide >> 64).unwrap_or(0)
    }
}

/// 53 bits of `x` as a number in \[0, 1).
fn unit(x: u64) -> f64 {
    // 2^-53: the spacing of f64 values in [0.5, 1).
    (x >> 11) as f64 * (1.0 / 9_007_199_254_740_992.0)
}

/// Vectors projected to `dim` dimensions, with a weight each: the input of [`cluster`].
#[derive(Clone, Debug, PartialEq)]
pub struct Points {
    dim: usize,
    coords: Vec<f64>,
    weights: Vec<f64>,
}

impl Points {
    /// Points from their coordinates (`dim` per point, point after point) and weights.
    ///
    /// # Errors
    ///
    /// The lengths do not fit, or a weight is negative or not finite.
    pub fn new(dim: usize, coords: Vec<f64>, weights: Vec<f64>) -> Result<Self, Error> {
        if dim == 0 || dim > MAX_DIM {
            return Err(Error::BadDim(dim));
        }
        if coords.len() != weights.len().saturating_mul(dim) {
            return Err(Error::Shape {
                coords: coords.len(),
                weights: weights.len(),
                dim,
            });
        }
        if let Some((slice, &weight)) = weights
            .iter()
            .enumerate()
            .find(|(_, w)| !(w.is_finite() && **w >= 0.0))
        {
            return Err(Error::BadWeight { slice, weight });
        }
        Ok(Self {
            dim,
            coords,
            weights,
        })
    }

    /// The number of points.
    #[must_use]
    pub fn len(&self) -> usize {
        self.weights.len()
    }

    /// Whether there are no points.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.weights.is_empty()
    }

    /// The dimensions.
    #[must_use]
    pub fn dim(&self) -> usize {
        self.dim
    }

    /// The coordinates of point `i`.
    #[must_use]
    pub fn point(&self, i: usize) -> Option<&[f64]> {
        let start = i.checked_mul(self.dim)?;
        self.coords.get(start..start.checked_add(self.dim)?)
    }

    /// The weights, one per point.
    #[must_use]
    pub fn weights(&self) -> &[f64] {
        &self.weights
    }

    fn iter(&self) -> std::slice::ChunksExact<'_, f64> {
        self.coords.chunks_exact(self.dim)
    }
}

/// Builds [`Points`] slice by slice: normalises each vector to fractions and projects it
/// with the seeded random matrix, keeping only `dim` numbers per slice (and the matrix
/// rows of the blocks seen, drawn once each: memory grows with the distinct blocks, which
/// the input holds anyway).
#[derive(Clone, Debug)]
pub struct Projection {
    dim: usize,
    seed: u64,
    coords: Vec<f64>,
    weights: Vec<f64>,
    /// Where each (stream, block)'s row starts in `rows`.
    known: HashMap<(u64, u64), usize, BuildHasherDefault<MixHasher>>,
    rows: Vec<f64>,
}

/// A hasher for (stream, block) keys: SplitMix64's finaliser over the words written.
/// Keys are not attacker-chosen in any way that matters (a collision costs time, not
/// correctness), and SipHash made the lookups the projection's largest cost.
#[derive(Clone, Copy, Debug, Default)]
struct MixHasher(u64);

impl Hasher for MixHasher {
    fn finish(&self) -> u64 {
        SplitMix64::mix(self.0)
    }

    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(*b);
        }
    }

    fn write_u64(&mut self, x: u64) {
        self.0 = SplitMix64::mix(self.0 ^ x);
    }
}

impl Projection {
    /// A projection to `dim` dimensions drawn from `seed`.
    ///
    /// # Errors
    ///
    /// `dim` is 0 or above [`MAX_DIM`].
    pub fn new(dim: usize, seed: u64) -> Result<Self, Error> {
        if dim == 0 || dim > MAX_DIM {
            return Err(Error::BadDim(dim));
        }
        Ok(Self {
            dim,
            seed,
            coords: Vec::new(),
            weights: Vec::new(),
            known: HashMap::default(),
            rows: Vec::new(),
        })
    }

    /// Adds one slice: its counts as `(stream, block id, count)` (stream: the thread whose
    /// vector this part is, 0 for a single stream; a block may appear several times, its
    /// counts add up) and its weight (1, or its instructions). A slice with no instructions
    /// projects to the origin.
    ///
    /// # Errors
    ///
    /// A count or the weight is negative or not finite.
    pub fn push<I>(&mut self, counts: I, weight: f64) -> Result<(), Error>
    where
        I: IntoIterator<Item = (u64, u64, f64)>,
    {
        let slice = self.weights.len();
        if !(weight.is_finite() && weight >= 0.0) {
            return Err(Error::BadWeight { slice, weight });
        }
        let start = self.coords.len();
        self.coords.resize(start.saturating_add(self.dim), 0.0);
        let out = self.coords.get_mut(start..).unwrap_or_default();
        let mut total = 0.0;
        for (stream, id, count) in counts {
            if !(count.is_finite() && count >= 0.0) {
                self.coords.truncate(start);
                return Err(Error::BadCount { slice, id, count });
            }
            if count == 0.0 {
                continue;
            }
            total += count;
            let at = *self.known.entry((stream, id)).or_insert_with(|| {
                let at = self.rows.len();
                self.rows.resize(at.saturating_add(self.dim), 0.0);
                row(
                    self.seed,
                    stream,
                    id,
                    self.rows.get_mut(at..).unwrap_or_default(),
                );
                at
            });
            let r = self
                .rows
                .get(at..at.saturating_add(self.dim))
                .unwrap_or_default();
            for (o, r) in out.iter_mut().zip(r) {
                *o += count * r;
            }
        }
        if total > 0.0 {
            // The projection is linear: dividing the projected sum equals projecting fractions.
            out.iter_mut().for_each(|o| *o /= total);
        }
        self.weights.push(weight);
        Ok(())
    }

    /// The slices pushed so far.
    #[must_use]
    pub fn len(&self) -> usize {
        self.weights.len()
    }

    /// Whether no slice was pushed.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.weights.is_empty()
    }

    /// The projected points.
    #[must_use]
    pub fn finish(self) -> Points {
        Points {
            dim: self.dim,
            coords: self.coords,
            weights: self.weights,
        }
    }
}

/// The projection matrix's row for block `id` of `stream`: uniform in [-1, 1).
fn row(seed: u64, stream: u64, id: u64, out: &mut [f64]) {
    let key = SplitMix64::mix(seed ^ SplitMix64::mix(stream.wrapping_add(0x5349_4d50))) ^ id;
    let mut rng = SplitMix64::new(SplitMix64::mix(key));
    for o in out {
        *o = rng.next_f64() * 2.0 - 1.0;
    }
}

/// The score of one k.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Score {
    /// The number of clusters.
    pub k: usize,
    /// The BIC of the best start (higher is better).
    pub bic: f64,
    /// Its distortion: the weighted sum of squared distances to the centres.
    pub distortion: f64,
    /// The Lloyd iterations of the best start.
    pub iterations: usize,
}

/// The result: the chosen clustering, its simulation points and weights, and every k's
/// score.
#[derive(Clone, Debug, PartialEq)]
pub struct Clustering {
    /// The chosen number of clusters.
    pub k: usize,
    /// The cluster of every slice (clusters numbered from 0 in order of their first slice).
    pub labels: Vec<usize>,
    /// The simulation point of each cluster: the slice closest to its centre.
    pub simpoints: Vec<usize>,
    /// The weight of each cluster: its share of the slices (or of the point weights).
    pub weights: Vec<f64>,
    /// The score of every k tried, k = 1, 2, …
    pub scores: Vec<Score>,
}

/// One k-means run's outcome.
#[derive(Clone, Debug)]
struct Run {
    labels: Vec<usize>,
    centres: Vec<f64>,
    distortion: f64,
    iterations: usize,
}

/// Squared Euclidean distance.
fn dist2(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| (x - y) * (x - y)).sum()
}

/// The nearest centre to `p` (the first on a tie), its distance and the distance of the
/// second nearest (infinite for one centre).
fn two_nearest(p: &[f64], centres: &[f64], dim: usize) -> (usize, f64, f64) {
    let (mut best, mut d1, mut d2) = (0, f64::INFINITY, f64::INFINITY);
    for (j, c) in centres.chunks_exact(dim).enumerate() {
        let d = dist2(p, c);
        if d < d1 {
            d2 = d1;
            (best, d1) = (j, d);
        } else if d < d2 {
            d2 = d;
        }
    }
    (best, d1.sqrt(), d2.sqrt())
}

/// The starting centres of one start.
fn starts(points: &Points, k: usize, init: Init, rng: &mut SplitMix64) -> Vec<f64> {
    let n = points.len();
    let mut chosen = Vec::with_capacity(k);
    match init {
        Init::Random => {
            // Floyd's sampling of k distinct indices out of n.
            let mut set = std::collections::BTreeSet::new();
            for j in n.saturating_sub(k)..n {
                let t = rng.below(j.saturating_add(1));
                let pick = if set.insert(t) {
                    t
                } else {
                    set.insert(j);
                    j
                };
                chosen.push(pick);
            }
        }
        Init::FurthestFirst => {
            chosen.push(rng.below(n));
            let first = chosen.first().and_then(|&i| points.point(i));
            let mut near: Vec<f64> = points
                .iter()
                .map(|p| first.map_or(0.0, |c| dist2(p, c)))
                .collect();
            while chosen.len() < k {
                let mut far = (0, f64::NEG_INFINITY);
                for (i, &d) in near.iter().enumerate() {
                    if d > far.1 {
                        far = (i, d);
                    }
                }
                chosen.push(far.0);
                if let Some(c) = points.point(far.0) {
                    for (d, p) in near.iter_mut().zip(points.iter()) {
                        *d = d.min(dist2(p, c));
                    }
                }
            }
        }
    }
    chosen
        .iter()
        .filter_map(|&i| points.point(i))
        .flatten()
        .copied()
        .collect()
}

/// Lloyd's k-means from `centres`: assign every point to its nearest centre, move each
/// centre to the weighted mean of its points, until no point changes cluster or
/// `max_iterations` assignment passes. The assignments are exactly Lloyd's; Hamerly's bounds
/// ("Making k-means even faster", SDM 2010) skip the distance computations that cannot
/// change them: an upper bound on each point's distance to its centre, a lower bound on its
/// distance to every other centre, both carried over as the centres move.
fn kmeans(points: &Points, mut centres: Vec<f64>, max_iterations: usize, noise: f64) -> Run {
    let dim = points.dim;
    let k = centres.len().checked_div(dim).unwrap_or(0);
    let n = points.len();
    let mut labels = vec![0usize; n];
    let mut upper = vec![0.0; n];
    let mut lower = vec![0.0; n];
    for (((p, l), u), lo) in points
        .iter()
        .zip(&mut labels)
        .zip(&mut upper)
        .zip(&mut lower)
    {
        (*l, *u, *lo) = two_nearest(p, &centres, dim);
    }
    let mut iterations = 1;
    let mut old = centres.clone();
    let mut moved = vec![0.0; k];
    let mut half_gap = vec![0.0; k];
    let mut sums = vec![0.0; centres.len()];
    let mut mass = vec![0.0; k];
    let mut count = vec![0usize; k];
    loop {
        fill_empty(points, &centres, &mut labels, &mut upper, &mut count, noise);
        old.copy_from_slice(&centres);
        means(points, &labels, &count, &mut centres, &mut sums, &mut mass);
        if iterations >= max_iterations {
            break;
        }
        for ((m, a), b) in moved
            .iter_mut()
            .zip(old.chunks_exact(dim))
            .zip(centres.chunks_exact(dim))
        {
            *m = dist2(a, b).sqrt();
        }
        // The largest move, and the largest of the others for the centre that made it.
        let (mut far, mut m1, mut m2) = (0, 0.0, 0.0);
        for (j, &m) in moved.iter().enumerate() {
            if m > m1 {
                m2 = m1;
                (far, m1) = (j, m);
            } else if m > m2 {
                m2 = m;
            }
        }
        for (j, (g, a)) in half_gap
            .iter_mut()
            .zip(centres.chunks_exact(dim))
            .enumerate()
        {
            *g = centres
                .chunks_exact(dim)
                .enumerate()
                .filter(|(i, _)| *i != j)
                .map(|(_, b)| dist2(a, b))
                .fold(f64::INFINITY, f64::min)
                .sqrt()
                / 2.0;
        }
        let mut changed = false;
        for (((p, l), u), lo) in points
            .iter()
            .zip(&mut labels)
            .zip(&mut upper)
            .zip(&mut lower)
        {
            *u += moved.get(*l).copied().unwrap_or(0.0);
            *lo -= if *l == far { m2 } else { m1 };
            let bound = lo.max(half_gap.get(*l).copied().unwrap_or(0.0));
            if *u <= bound {
                continue;
            }
            let start = l.saturating_mul(dim);
            *u = centres
                .get(start..start.saturating_add(dim))
                .map_or(f64::INFINITY, |c| dist2(p, c).sqrt());
            if *u <= bound {
                continue;
            }
            let (j, d1, d2) = two_nearest(p, &centres, dim);
            changed |= j != *l;
            (*l, *u, *lo) = (j, d1, d2);
        }
        iterations = iterations.saturating_add(1);
        if !changed {
            break;
        }
    }
    let distortion = points
        .iter()
        .zip(&labels)
        .zip(&points.weights)
        .map(|((p, &l), &w)| {
            let start = l.saturating_mul(dim);
            centres
                .get(start..start.saturating_add(dim))
                .map_or(0.0, |c| w * dist2(p, c))
        })
        .sum();
    Run {
        labels,
        centres,
        distortion,
        iterations,
    }
}

/// Gives every empty cluster the point farthest from its centre, taken from a cluster that
/// keeps at least one (there is one while k ≤ n distinct points; otherwise clusters stay
/// empty); counts the members into `count`.
fn fill_empty(
    points: &Points,
    centres: &[f64],
    labels: &mut [usize],
    upper: &mut [f64],
    count: &mut [usize],
    noise: f64,
) {
    let dim = points.dim;
    count.iter_mut().for_each(|c| *c = 0);
    for &l in labels.iter() {
        if let Some(c) = count.get_mut(l) {
            *c = c.saturating_add(1);
        }
    }
    if count.iter().all(|&c| c > 0) {
        return;
    }
    // Rare: exact distances for this pass only.
    let mut dists: Vec<f64> = points
        .iter()
        .zip(labels.iter())
        .map(|(p, &l)| {
            let start = l.saturating_mul(dim);
            centres
                .get(start..start.saturating_add(dim))
                .map_or(0.0, |c| dist2(p, c))
        })
        .collect();
    for j in 0..count.len() {
        if count.get(j).is_some_and(|&c| c > 0) {
            continue;
        }
        let mut far: Option<(usize, f64)> = None;
        for (i, (&l, &d)) in labels.iter().zip(&dists).enumerate() {
            // Only a point away from its centre (farther than rounding noise, `noise`, a
            // squared distance): with fewer distinct points than k, stealing one that sits
            // on its centre would only move the emptiness around.
            if d > noise && count.get(l).is_some_and(|&c| c > 1) && far.is_none_or(|(_, fd)| d > fd)
            {
                far = Some((i, d));
            }
        }
        let Some((i, _)) = far else { break };
        if let (Some(l), Some(d), Some(u)) = (labels.get_mut(i), dists.get_mut(i), upper.get_mut(i))
        {
            if let Some(c) = count.get_mut(*l) {
                *c = c.saturating_sub(1);
            }
            *l = j;
            *d = 0.0;
            // Unknown until the centre moves: the next pass measures it.
            *u = f64::INFINITY;
        }
        if let Some(c) = count.get_mut(j) {
            *c = 1;
        }
    }
}

/// Moves each centre to the weighted mean of its points (the plain mean when their
/// weights are all 0; an empty cluster's centre stays).
fn means(
    points: &Points,
    labels: &[usize],
    count: &[usize],
    centres: &mut [f64],
    sums: &mut [f64],
    mass: &mut [f64],
) {
    let dim = points.dim;
    sums.iter_mut().for_each(|s| *s = 0.0);
    mass.iter_mut().for_each(|m| *m = 0.0);
    for ((p, &l), &w) in points.iter().zip(labels).zip(&points.weights) {
        let start = l.saturating_mul(dim);
        if let Some(s) = sums.get_mut(start..start.saturating_add(dim)) {
            s.iter_mut().zip(p).for_each(|(s, x)| *s += w * x);
        }
        if let Some(m) = mass.get_mut(l) {
            *m += w;
        }
    }
    for (((c, s), &m), j) in centres
        .chunks_exact_mut(dim)
        .zip(sums.chunks_exact(dim))
        .zip(mass.iter())
        .zip(0..)
    {
        if m > 0.0 {
            c.iter_mut().zip(s).for_each(|(c, s)| *c = s / m);
        } else if count.get(j).is_some_and(|&c| c > 0) {
            c.iter_mut().for_each(|c| *c = 0.0);
            let mut members = 0.0;
            for (p, _) in points.iter().zip(labels).filter(|(_, l)| **l == j) {
                c.iter_mut().zip(p).for_each(|(c, x)| *c += x);
                members += 1.0;
            }
            c.iter_mut().for_each(|c| *c /= members);
        }
    }
}

/// The BIC of a clustering (see the module documentation); `weights` sum to `r`.
fn bic(run: &Run, weights: &[f64], dim: usize, k: usize, floor: f64) -> f64 {
    let mut sizes = vec![0.0; k];
    for (&l, &w) in run.labels.iter().zip(weights) {
        if let Some(s) = sizes.get_mut(l) {
            *s += w;
        }
    }
    let r: f64 = sizes.iter().sum();
    if r <= 0.0 {
        return 0.0;
    }
    let m = dim as f64;
    let kf = k as f64;
    let var = (run.distortion / (m * (r - kf).max(1.0))).max(floor);
    let mix: f64 = sizes
        .iter()
        .filter(|&&s| s > 0.0)
        .map(|&s| s * (s / r).ln())
        .sum();
    let loglik = mix - r * m / 2.0 * (2.0 * PI * var).ln() - run.distortion / (2.0 * var);
    let params = (kf - 1.0) + kf * m + 1.0;
    loglik - params / 2.0 * r.ln()
}

/// Checks `options` on their own (before any input is read).
///
/// # Errors
///
/// The first option out of range.
pub fn check_options(options: &Options) -> Result<(), Error> {
    if options.max_k == 0 {
        return Err(Error::MaxKZero);
    }
    if options.dim == 0 || options.dim > MAX_DIM {
        return Err(Error::BadDim(options.dim));
    }
    if options.init_seeds == 0 {
        return Err(Error::InitSeedsZero);
    }
    if options.max_iterations == 0 {
        return Err(Error::MaxIterationsZero);
    }
    if !(0.0..=1.0).contains(&options.bic_threshold) {
        return Err(Error::BadThreshold(options.bic_threshold));
    }
    Ok(())
}

/// The largest k tried for `n` slices: `max_k`, at most `n − 1` (at least 1).
#[must_use]
pub fn k_limit(max_k: usize, n: usize) -> usize {
    max_k.min(n.saturating_sub(1).max(1))
}

/// Clusters `points` (already projected) for every k in `1..=k_limit(max_k, points)` and picks
/// k, the simulation points and the weights as SimPoint does. `options.dim` is not used:
/// the points have their dimensions.
///
/// # Errors
///
/// There are no points, or an option is out of range.
pub fn cluster(points: &Points, options: &Options) -> Result<Clustering, Error> {
    check_options(options)?;
    let n = points.len();
    if n == 0 {
        return Err(Error::NoSlices);
    }
    // Weights scaled to mean 1, so that R in the BIC is the number of slices; all-zero
    // weights count every slice once.
    let total: f64 = points.weights.iter().sum();
    let scaled: Vec<f64> = if total > 0.0 {
        points
            .weights
            .iter()
            .map(|w| w * n as f64 / total)
            .collect()
    } else {
        vec![1.0; n]
    };
    let work = Points {
        dim: points.dim,
        coords: points.coords.clone(),
        weights: scaled,
    };
    // Below this variance the distortion is rounding noise (identical slices whose centre
    // is a rounded mean): 1e-20 of the mean squared coordinate, about (1e-10)² relative.
    let spread: f64 = work
        .iter()
        .zip(&work.weights)
        .map(|(p, w)| w * p.iter().map(|x| x * x).sum::<f64>())
        .sum::<f64>()
        / (n as f64 * work.dim as f64);
    let floor = (spread * 1e-20).max(f64::MIN_POSITIVE);
    let max_k = k_limit(options.max_k, n);
    let mut scores = Vec::with_capacity(max_k);
    let mut runs = Vec::with_capacity(max_k);
    for k in 1..=max_k {
        let mut best: Option<Run> = None;
        for start in 0..options.init_seeds {
            // One stream per (k, start): the draws do not depend on the order of the runs.
            let key = SplitMix64::mix(options.seed ^ SplitMix64::mix(k as u64))
                ^ SplitMix64::mix((start as u64).wrapping_add(0x1000));
            let mut rng = SplitMix64::new(key);
            let centres = starts(&work, k, options.init, &mut rng);
            let run = kmeans(
                &work,
                centres,
                options.max_iterations,
                floor * work.dim as f64,
            );
            if best.as_ref().is_none_or(|b| run.distortion < b.distortion) {
                best = Some(run);
            }
        }
        let Some(run) = best else { continue };
        scores.push(Score {
            k,
            bic: bic(&run, &work.weights, work.dim, k, floor),
            distortion: run.distortion,
            iterations: run.iterations,
        });
        runs.push(run);
    }
    let lo = scores.iter().map(|s| s.bic).fold(f64::INFINITY, f64::min);
    let hi = scores
        .iter()
        .map(|s| s.bic)
        .fold(f64::NEG_INFINITY, f64::max);
    let bar = lo + options.bic_threshold * (hi - lo);
    let chosen = scores.iter().position(|s| s.bic >= bar).unwrap_or(0);
    let (Some(run), Some(score)) = (runs.get(chosen), scores.get(chosen)) else {
        return Err(Error::NoSlices);
    };
    Ok(finish(
        &work,
        run,
        score.k,
        points.weights(),
        scores.clone(),
        floor * work.dim as f64,
    ))
}

/// Renumbers the clusters by first slice, picks each one's simulation point (the first of
/// the slices nearest the centre, nearer meaning by more than the rounding `noise`, a
/// squared distance) and weight.
fn finish(
    points: &Points,
    run: &Run,
    k: usize,
    raw_weights: &[f64],
    scores: Vec<Score>,
    noise: f64,
) -> Clustering {
    let mut renumber = vec![usize::MAX; k];
    let mut next = 0usize;
    for &l in &run.labels {
        if let Some(r) = renumber.get_mut(l)
            && *r == usize::MAX
        {
            *r = next;
            next = next.saturating_add(1);
        }
    }
    let k = next;
    let labels: Vec<usize> = run
        .labels
        .iter()
        .map(|&l| renumber.get(l).copied().unwrap_or(0))
        .collect();
    let mut best = vec![(usize::MAX, f64::INFINITY); k];
    let mut mass = vec![0.0; k];
    let dim = points.dim;
    for (i, (p, &old)) in points.iter().zip(&run.labels).enumerate() {
        let new = renumber.get(old).copied().unwrap_or(0);
        let start = old.saturating_mul(dim);
        let d = run
            .centres
            .get(start..start.saturating_add(dim))
            .map_or(f64::INFINITY, |c| dist2(p, c));
        if let Some(b) = best.get_mut(new)
            && (b.0 == usize::MAX || d < b.1 - noise)
        {
            *b = (i, d);
        }
    }
    let total: f64 = raw_weights.iter().sum();
    for (&l, &w) in labels.iter().zip(raw_weights) {
        if let Some(m) = mass.get_mut(l) {
            *m += if total > 0.0 { w } else { 1.0 };
        }
    }
    let sum: f64 = mass.iter().sum();
    Clustering {
        k,
        simpoints: best.iter().map(|b| b.0).collect(),
        weights: mass.iter().map(|m| m / sum).collect(),
        labels,
        scores,
    }
}

#[cfg(test)]
#[allow(clippy::arithmetic_side_effects)]
mod tests {
    use super::*;

    /// Slices drawn around `centres` block distributions: each slice of cluster c has the
    /// blocks of c (ids 100·c + 1 …) with counts jittered by ±`noise`.
    fn synthetic(
        clusters: &[usize],
        blocks: u64,
        noise: f64,
        seed: u64,
    ) -> Vec<Vec<(u64, u64, f64)>> {
        let mut rng = SplitMix64::new(seed);
        clusters
            .iter()
            .map(|&c| {
                (1..=blocks)
                    .map(|b| {
                        let base = 1000.0 * (b as f64);
                        let jitter = 1.0 + noise * (rng.next_f64() * 2.0 - 1.0);
                        (0, 100 * c as u64 + b, base * jitter)
                    })
                    .collect()
            })
            .collect()
    }

    fn project(slices: &[Vec<(u64, u64, f64)>], dim: usize, seed: u64) -> Points {
        let mut p = Projection::new(dim, seed).unwrap();
        for s in slices {
            p.push(s.iter().copied(), 1.0).unwrap();
        }
        p.finish()
    }

    /// Whether `labels` equal `truth` up to renaming the clusters.
    fn same_partition(labels: &[usize], truth: &[usize]) -> bool {
        let mut map = std::collections::HashMap::new();
        let mut back = std::collections::HashMap::new();
        labels
            .iter()
            .zip(truth)
            .all(|(&l, &t)| *map.entry(l).or_insert(t) == t && *back.entry(t).or_insert(l) == l)
    }

    #[test]
    fn splitmix_reference_values() {
        // The first outputs for seed 0 published with the algorithm (Vigna's splitmix64.c).
        let mut r = SplitMix64::new(0);
        assert_eq!(r.next_u64(), 0xe220_a839_7b1d_cdaf);
        assert_eq!(r.next_u64(), 0x6e78_9e6a_a1b9_65f4);
        assert_eq!(r.next_u64(), 0x06c4_5d18_8009_454f);
    }

    #[test]
    fn below_stays_in_range() {
        let mut r = SplitMix64::new(7);
        for n in 1..50 {
            for _ in 0..100 {
                assert!(r.below(n) < n);
            }
        }
    }

    #[test]
    fn projection_is_of_fractions_and_linear() {
        // Scaling a vector does not move its point; splitting a block's count in two does not.
        let mut p = Projection::new(4, 9).unwrap();
        p.push([(0, 1, 10.0), (0, 2, 30.0)], 1.0).unwrap();
        p.push([(0, 1, 1.0), (0, 2, 3.0)], 1.0).unwrap();
        p.push([(0, 2, 1.0), (0, 1, 1.0), (0, 2, 2.0)], 1.0)
            .unwrap();
        p.push([(1, 1, 1.0), (1, 2, 3.0)], 1.0).unwrap();
        p.push(std::iter::empty(), 1.0).unwrap();
        let pts = p.finish();
        let a = pts.point(0).unwrap();
        for (x, y) in a.iter().zip(pts.point(1).unwrap()) {
            assert!((x - y).abs() < 1e-12);
        }
        for (x, y) in a.iter().zip(pts.point(2).unwrap()) {
            assert!((x - y).abs() < 1e-12);
        }
        // Another stream's blocks have other rows.
        assert!(dist2(a, pts.point(3).unwrap()) > 1e-6);
        assert_eq!(pts.point(4).unwrap(), &[0.0; 4]);
        // Fractions times entries in [-1, 1): every coordinate stays in [-1, 1].
        assert!(pts.coords.iter().all(|x| (-1.0..=1.0).contains(x)));
    }

    #[test]
    fn bad_counts_and_options_are_errors() {
        let mut p = Projection::new(3, 0).unwrap();
        assert_eq!(
            p.push([(0, 5, -1.0)], 1.0),
            Err(Error::BadCount {
                slice: 0,
                id: 5,
                count: -1.0
            })
        );
        assert!(matches!(
            p.push([(0, 5, f64::NAN)], 1.0),
            Err(Error::BadCount { .. })
        ));
        assert!(matches!(
            p.push([(0, 5, 1.0)], f64::INFINITY),
            Err(Error::BadWeight { .. })
        ));
        assert!(p.is_empty());
        assert_eq!(Projection::new(0, 0).unwrap_err(), Error::BadDim(0));
        let pts = project(&synthetic(&[0, 1], 3, 0.0, 1), 3, 1);
        let bad = |o: Options| cluster(&pts, &o).unwrap_err();
        assert_eq!(
            bad(Options {
                max_k: 0,
                ..Options::default()
            }),
            Error::MaxKZero
        );
        assert_eq!(
            bad(Options {
                init_seeds: 0,
                ..Options::default()
            }),
            Error::InitSeedsZero
        );
        assert_eq!(
            bad(Options {
                bic_threshold: 1.5,
                ..Options::default()
            }),
            Error::BadThreshold(1.5)
        );
        let empty = Projection::new(3, 0).unwrap().finish();
        assert_eq!(
            cluster(&empty, &Options::default()).unwrap_err(),
            Error::NoSlices
        );
    }

    #[test]
    fn recovers_well_separated_clusters() {
        // Five phases with disjoint blocks, interleaved, 5 % noise: the partition and k must
        // come out exactly. 40 starts per k: a start that misses a 5-cluster answer (about
        // one in five) then repeats 40 times with probability far below 1e-20.
        let truth: Vec<usize> = (0..200).map(|i| (i * 7 + i / 13) % 5).collect();
        let slices = synthetic(&truth, 20, 0.05, 3);
        for init in [Init::Random, Init::FurthestFirst] {
            let opts = Options {
                max_k: 7,
                init_seeds: 40,
                init,
                seed: 11,
                ..Options::default()
            };
            let c = cluster(&project(&slices, 15, 11), &opts).unwrap();
            assert_eq!(c.k, 5, "{init:?}: {:?}", c.scores);
            assert!(same_partition(&c.labels, &truth), "{init:?}");
            // Every simulation point lies in its own cluster.
            for (j, &s) in c.simpoints.iter().enumerate() {
                assert_eq!(c.labels[s], j);
            }
            let sum: f64 = c.weights.iter().sum();
            assert!((sum - 1.0).abs() < 1e-12);
            for (j, w) in c.weights.iter().enumerate() {
                let share = truth
                    .iter()
                    .filter(|&&t| t == truth[c.simpoints[j]])
                    .count();
                assert!((w - share as f64 / 200.0).abs() < 1e-12);
            }
            // Clusters are numbered in order of their first slice.
            let mut seen = 0;
            for &l in &c.labels {
                assert!(l <= seen);
                if l == seen {
                    seen += 1;
                }
            }
        }
    }

    /// A standard normal draw (Box-Muller).
    fn normal(rng: &mut SplitMix64) -> f64 {
        let u = 1.0 - rng.next_f64();
        let v = rng.next_f64();
        (-2.0 * u.ln()).sqrt() * (2.0 * PI * v).cos()
    }

    #[test]
    fn one_gaussian_gives_one_cluster() {
        // Points from one spherical Gaussian, the model the BIC assumes: k = 1 scores best.
        let mut rng = SplitMix64::new(5);
        let coords: Vec<f64> = (0..300 * 15).map(|_| normal(&mut rng)).collect();
        let pts = Points::new(15, coords, vec![1.0; 300]).unwrap();
        let c = cluster(
            &pts,
            &Options {
                max_k: 6,
                ..Options::default()
            },
        )
        .unwrap();
        let best = c
            .scores
            .iter()
            .map(|s| s.bic)
            .fold(f64::NEG_INFINITY, f64::max);
        assert_eq!(c.scores[0].bic, best, "{:?}", c.scores);
        assert_eq!(c.k, 1);
        assert_eq!(c.weights, vec![1.0]);
    }

    #[test]
    fn deterministic_for_a_seed() {
        let truth: Vec<usize> = (0..120).map(|i| i % 4).collect();
        let slices = synthetic(&truth, 12, 0.3, 8);
        let run = |seed| {
            cluster(
                &project(&slices, 15, seed),
                &Options {
                    seed,
                    max_k: 8,
                    ..Options::default()
                },
            )
            .unwrap()
        };
        assert_eq!(run(42), run(42));
        assert_ne!(run(42).scores, run(43).scores);
    }

    #[test]
    fn k_is_capped_by_the_slices_and_duplicates_are_fine() {
        // Three slices, two of them equal: k tops out at 2 (one short of the slices).
        let slices = vec![vec![(0, 1, 5.0)], vec![(0, 1, 5.0)], vec![(0, 2, 5.0)]];
        let c = cluster(&project(&slices, 15, 0), &Options::default()).unwrap();
        assert_eq!(c.scores.len(), 2);
        assert_eq!(c.k, 2);
        assert_eq!(c.labels, vec![0, 0, 1]);
        assert_eq!(c.simpoints, vec![0, 2]);
        let single = cluster(&project(&slices[..1], 15, 0), &Options::default()).unwrap();
        assert_eq!((single.k, single.simpoints.clone()), (1, vec![0]));
    }

    #[test]
    fn identical_slices_give_one_cluster() {
        // Every slice runs one block (lengths differ): all project to one point. k = 1, and
        // no run of k > 1 spins to the iteration cap moving an empty cluster around.
        let slices: Vec<Vec<(u64, u64, f64)>> = (0..24)
            .map(|i| vec![(0, 1, if i < 22 { 47.0 } else { 30.0 + i as f64 })])
            .collect();
        let c = cluster(&project(&slices, 15, 0), &Options::default()).unwrap();
        assert_eq!(c.k, 1, "{:?}", c.scores);
        assert!(
            c.scores
                .iter()
                .all(|s| s.iterations < DEFAULT_MAX_ITERATIONS),
            "{:?}",
            c.scores
        );
        assert_eq!(c.simpoints, vec![0]);
    }

    #[test]
    fn weights_by_instructions() {
        // Two phases, the second's slices ten times longer: its weight is 10/11 of the run.
        let mut p = Projection::new(15, 3).unwrap();
        for i in 0..20 {
            if i % 2 == 0 {
                p.push([(0, 1, 100.0), (0, 2, 50.0)], 100.0).unwrap();
            } else {
                p.push([(0, 3, 900.0), (0, 4, 100.0)], 1000.0).unwrap();
            }
        }
        let c = cluster(&p.finish(), &Options::default()).unwrap();
        assert_eq!(c.k, 2);
        assert!((c.weights[0] - 1.0 / 11.0).abs() < 1e-12);
        assert!((c.weights[1] - 10.0 / 11.0).abs() < 1e-12);
    }

    #[test]
    fn bic_prefers_the_true_k() {
        // The scores of a 3-phase run rise to k = 3 and do not rise much after it.
        let truth: Vec<usize> = (0..90).map(|i| i % 3).collect();
        let slices = synthetic(&truth, 10, 0.05, 4);
        let opts = Options {
            max_k: 8,
            init_seeds: 20,
            ..Options::default()
        };
        let c = cluster(&project(&slices, 15, 2), &opts).unwrap();
        let s: Vec<f64> = c.scores.iter().map(|s| s.bic).collect();
        assert!(s[0] < s[1] && s[1] < s[2], "{s:?}");
        let top = s.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        assert!(s[2] >= s[0] + 0.9 * (top - s[0]));
        assert_eq!(c.k, 3);
    }
}
