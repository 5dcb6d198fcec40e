//! SplitMix64, the small deterministic generator behind every crate's synthetic traces and
//! generated fixtures: the same seed gives the same bytes on every machine, with no
//! dependency. Also [`property_cases`], the case count of the crates' property tests.

/// Golden-ratio increment of SplitMix64 (also used to scramble seeds in [`SplitMix64::new`]).
const GOLDEN: u64 = 0x9e37_79b9_7f4a_7c15;

/// A SplitMix64 generator. Not for cryptography.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SplitMix64(u64);

impl SplitMix64 {
    /// A generator from a seed (scrambled, so that small seeds give unrelated streams).
    #[must_use]
    pub const fn new(seed: u64) -> SplitMix64 {
        SplitMix64(seed ^ GOLDEN)
    }

    /// A generator whose internal state is exactly `state`.
    #[must_use]
    pub const fn from_state(state: u64) -> SplitMix64 {
        SplitMix64(state)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(GOLDEN);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// The next 32 random bits (the high half of [`next_u64`](Self::next_u64)).
    pub fn next_u32(&mut self) -> u32 {
        (self.next_u64() >> 32) as u32
    }

    /// A value in `0..n` by multiply-shift (Lemire); 0 when `n` is 0.
    pub fn below(&mut self, n: u64) -> u64 {
        // A u64 times a u64 always fits in a u128.
        (u128::from(self.next_u64()).wrapping_mul(u128::from(n)) >> 64) as u64
    }

    /// True with probability `percent`/100.
    pub fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }

    /// Fills `buf` with random bytes.
    pub fn fill(&mut self, buf: &mut [u8]) {
        for chunk in buf.chunks_mut(8) {
            let v = self.next_u64().to_le_bytes();
            for (d, s) in chunk.iter_mut().zip(v) {
                *d = s;
            }
        }
    }
}

/// How many cases a property test runs: `QUICKCHECK_TESTS` when it is set (as quickcheck
/// reads it), else `default`. For properties whose count is not quickcheck's default of
/// 100, which an explicit count would otherwise pin against the variable.
#[must_use]
pub fn property_cases(default: u64) -> u64 {
    std::env::var("QUICKCHECK_TESTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_values_and_ranges() {
        // Reference values of SplitMix64 from state 0 (Vigna's splitmix64.c).
        let mut r = SplitMix64::from_state(0);
        assert_eq!(r.next_u64(), 0xe220_a839_7b1d_cdaf);
        assert_eq!(r.next_u64(), 0x6e78_9e6a_a1b9_65f4);
        assert_eq!(SplitMix64::new(7), SplitMix64::from_state(7 ^ GOLDEN));
        let mut r = SplitMix64::new(1);
        assert!((0..1000).all(|_| r.below(10) < 10));
        assert_eq!(r.below(0), 0);
        let mut buf = [0u8; 13];
        r.fill(&mut buf);
        assert!(buf.iter().any(|&b| b != 0));
    }
}
