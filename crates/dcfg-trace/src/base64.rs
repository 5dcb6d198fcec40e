//! Modified Base64 (specification section 3.7.1.1): `A–Z a–z 0–9 + -`, 6 bits per
//! character, most significant bit first, no `=` padding. Trailing bits of the last
//! character are padding, ignored once `EDGE_COUNT` edges are decoded.
//!
//! Two interfaces: [`decode_bits`] / [`encode_bits`] convert whole strings to and from a
//! [`BitVec`] (simple, for tests and tools), and [`BitReader`] / [`BitWriter`] are the
//! streaming forms the decoder and encoder use (a 64-bit window, eight characters at a
//! time, no per-bit work).
//!
//! ```
//! use dcfg_trace::base64::{decode_bits, encode_bits};
//! // The specification's example: "C+" encodes the twelve bits 0b000010111110.
//! let bits = decode_bits(b"C+").unwrap();
//! assert_eq!(bits.iter().map(|b| if *b { '1' } else { '0' }).collect::<String>(), "000010111110");
//! assert_eq!(encode_bits(&bits), "C+");
//! ```

use bitvec::prelude::{BitSlice, BitVec, Msb0};

use crate::raw::{ALPHABET, DECODE, INVALID};

/// The 6-bit value of a modified Base64 character, `None` for any other byte.
#[inline]
#[must_use]
pub fn value(c: u8) -> Option<u8> {
    match DECODE.get(usize::from(c)).copied() {
        Some(INVALID) | None => None,
        v => v,
    }
}

/// The 6-bit value of a character already known to be in the alphabet (others give 0).
#[inline]
fn val(c: u8) -> u64 {
    u64::from(DECODE.get(usize::from(c)).copied().unwrap_or(0) & 63)
}

/// The character for the low 6 bits of `v`.
#[inline]
#[must_use]
pub fn char_of(v: u8) -> u8 {
    ALPHABET.get(usize::from(v & 63)).copied().unwrap_or(b'A')
}

/// Decodes a plain modified Base64 string (no repeats or references) into its bits, 6 per
/// character, most significant first.
///
/// # Errors
///
/// The index and value of the first byte outside the alphabet.
pub fn decode_bits(s: &[u8]) -> Result<BitVec<u8, Msb0>, (usize, u8)> {
    let mut bits = BitVec::with_capacity(s.len().saturating_mul(6));
    for (i, &c) in s.iter().enumerate() {
        let v = value(c).ok_or((i, c))?;
        for k in (0..6).rev() {
            bits.push((v >> k) & 1 == 1);
        }
    }
    Ok(bits)
}

/// Encodes bits as modified Base64, padding the last character with zero bits.
#[must_use]
pub fn encode_bits(bits: &BitSlice<u8, Msb0>) -> String {
    let mut w = BitWriter::default();
    for b in bits {
        w.push(u32::from(*b), 1);
    }
    w.finish()
}

/// Packs bit codes into modified Base64 characters.
#[derive(Debug, Default, Clone)]
pub struct BitWriter {
    out: Vec<u8>,
    acc: u64,
    nbits: u32,
    total: u64,
}

impl BitWriter {
    /// Appends the low `len` bits of `code` (`len` ≤ 32), most significant first.
    #[inline]
    pub fn push(&mut self, code: u32, len: u32) {
        let len = len.min(32);
        if len == 0 {
            return;
        }
        let mask = u64::MAX.wrapping_shr(64u32.wrapping_sub(len));
        // `nbits` < 6 here, so `acc` holds at most 5 + 32 bits.
        self.acc = self.acc.wrapping_shl(len) | (u64::from(code) & mask);
        self.nbits = self.nbits.wrapping_add(len);
        self.total = self.total.wrapping_add(u64::from(len));
        while self.nbits >= 6 {
            self.nbits = self.nbits.wrapping_sub(6);
            let v = self.acc.wrapping_shr(self.nbits) & 63;
            self.out.push(char_of(v as u8));
        }
        self.acc &= (1u64 << 6).wrapping_sub(1);
    }

    /// Bits pushed so far.
    #[must_use]
    pub fn bit_len(&self) -> u64 {
        self.total
    }

    /// The characters, the last one padded with zero bits.
    #[must_use]
    pub fn finish(mut self) -> String {
        if self.nbits > 0 {
            let v = self.acc.wrapping_shl(6u32.wrapping_sub(self.nbits)) & 63;
            self.out.push(char_of(v as u8));
        }
        // Only alphabet characters were pushed.
        self.out.into_iter().map(char::from).collect()
    }
}

/// A source of runs of modified Base64 characters (the expander, or one plain string).
pub trait Runs<'p> {
    /// The next non-empty run, `None` at the end.
    fn next_run(&mut self) -> Option<&'p [u8]>;
}

/// One plain string as a single run.
#[derive(Debug, Clone)]
pub struct Plain<'p>(pub Option<&'p [u8]>);

impl<'p> Runs<'p> for Plain<'p> {
    fn next_run(&mut self) -> Option<&'p [u8]> {
        self.0.take().filter(|r| !r.is_empty())
    }
}

/// A bit window over runs of characters that are known to be in the alphabet (the
/// expander checks them when it compiles a sequence). Bits are left-aligned in a `u64`.
#[derive(Debug)]
pub struct BitReader<'p, R> {
    runs: R,
    cur: &'p [u8],
    buf: u64,
    nbits: u32,
    consumed: u64,
}

impl<'p, R: Runs<'p>> BitReader<'p, R> {
    /// A reader over `runs`.
    pub fn new(runs: R) -> Self {
        BitReader {
            runs,
            cur: &[],
            buf: 0,
            nbits: 0,
            consumed: 0,
        }
    }

    /// Fills the window to at least 59 bits, or to the end of the input.
    #[inline]
    pub fn refill(&mut self) {
        loop {
            while self.nbits <= 16 {
                let Some((eight, rest)) = self.cur.split_first_chunk::<8>() else {
                    break;
                };
                let mut v = 0u64;
                for &c in eight {
                    v = v.wrapping_shl(6) | val(c);
                }
                self.buf |= v.wrapping_shl(16u32.wrapping_sub(self.nbits));
                self.nbits = self.nbits.wrapping_add(48);
                self.cur = rest;
            }
            while self.nbits <= 58 {
                let Some((&c, rest)) = self.cur.split_first() else {
                    break;
                };
                self.buf |= val(c).wrapping_shl(58u32.wrapping_sub(self.nbits));
                self.nbits = self.nbits.wrapping_add(6);
                self.cur = rest;
            }
            if self.nbits > 58 {
                return;
            }
            match self.runs.next_run() {
                Some(r) => self.cur = r,
                None => return,
            }
        }
    }

    /// The window: the next bits, left-aligned, zero beyond [`available`](Self::available).
    #[inline]
    #[must_use]
    pub fn window(&self) -> u64 {
        self.buf
    }

    /// Bits in the window (all of the remaining input when below 59).
    #[inline]
    #[must_use]
    pub fn available(&self) -> u32 {
        self.nbits
    }

    /// Drops `n` ≤ [`available`](Self::available) bits.
    #[inline]
    pub fn consume(&mut self, n: u32) {
        let n = n.min(self.nbits);
        self.buf = if n >= 64 { 0 } else { self.buf.wrapping_shl(n) };
        self.nbits = self.nbits.wrapping_sub(n);
        self.consumed = self.consumed.wrapping_add(u64::from(n));
    }

    /// Drops `n` bits, `n` ≤ 32 and ≤ [`available`](Self::available) (the decoder's hot
    /// path; a larger `n` only corrupts the window, it cannot panic).
    #[inline]
    pub fn advance(&mut self, n: u32) {
        self.buf = self.buf.wrapping_shl(n);
        self.nbits = self.nbits.wrapping_sub(n);
        self.consumed = self.consumed.wrapping_add(u64::from(n));
    }

    /// Bits consumed so far.
    #[must_use]
    pub fn position(&self) -> u64 {
        self.consumed
    }

    /// Reads all remaining bits one by one (slow; for tests and tools).
    pub fn rest_bits(&mut self) -> BitVec<u8, Msb0> {
        let mut out = BitVec::new();
        loop {
            self.refill();
            if self.nbits == 0 {
                return out;
            }
            out.push(self.buf >> 63 == 1);
            self.consume(1);
        }
    }
}

#[cfg(test)]
// Test code: panics are failures; helpers outside #[test] functions are not exempted.
#[allow(
    clippy::arithmetic_side_effects,
    clippy::indexing_slicing,
    clippy::unwrap_used,
    clippy::panic
)]
mod tests {
    use super::*;
    use quickcheck::quickcheck;

    fn s(bits: &BitSlice<u8, Msb0>) -> String {
        bits.iter().map(|b| if *b { '1' } else { '0' }).collect()
    }

    #[test]
    fn spec_example_c_plus() {
        // Section 3.7.1.1: "C+" encodes the twelve bits 0b000010111110.
        let bits = decode_bits(b"C+").unwrap();
        assert_eq!(s(&bits), "000010111110");
        // If only eleven bits were needed, the final zero bit would be discarded.
        assert_eq!(encode_bits(&bits[..11]), "C+");
    }

    #[test]
    fn alphabet_order_and_bad_characters() {
        assert_eq!(value(b'A'), Some(0));
        assert_eq!(value(b'B'), Some(1));
        assert_eq!(value(b'a'), Some(26));
        assert_eq!(value(b'0'), Some(52));
        assert_eq!(value(b'+'), Some(62));
        assert_eq!(value(b'-'), Some(63));
        assert_eq!(value(b'/'), None);
        assert_eq!(value(b'='), None);
        assert_eq!(decode_bits(b"AB/C").unwrap_err(), (2, b'/'));
    }

    #[test]
    fn reader_over_runs_matches_decode_bits() {
        struct Many<'p>(Vec<&'p [u8]>);
        impl<'p> Runs<'p> for Many<'p> {
            fn next_run(&mut self) -> Option<&'p [u8]> {
                if self.0.is_empty() {
                    None
                } else {
                    Some(self.0.remove(0))
                }
            }
        }
        let text = b"Hello-World+0123456789abcdefghijKLMNOP";
        let mut r = BitReader::new(Many(vec![
            &text[..3],
            &text[3..4],
            &text[4..30],
            &text[30..],
        ]));
        assert_eq!(r.rest_bits(), decode_bits(text).unwrap());
        assert_eq!(r.position(), 6 * text.len() as u64);
    }

    quickcheck! {
        fn bits_round_trip(bits: Vec<bool>) -> bool {
            let bv: BitVec<u8, Msb0> = bits.iter().copied().collect();
            let text = encode_bits(&bv);
            let back = decode_bits(text.as_bytes()).unwrap();
            text.len() == bits.len().div_ceil(6) && back[..bits.len()] == bv[..] && back[bits.len()..].not_any()
        }

        fn writer_codes_round_trip(codes: Vec<(u32, u8)>) -> bool {
            let mut w = BitWriter::default();
            let mut expect = BitVec::<u8, Msb0>::new();
            for &(c, l) in &codes {
                let l = u32::from(l % 33);
                w.push(c, l);
                for k in (0..l).rev() { expect.push((u64::from(c) >> k) & 1 == 1); }
            }
            let text = w.finish();
            let mut r = BitReader::new(Plain(Some(text.as_bytes())));
            let got = r.rest_bits();
            got[..expect.len()] == expect[..]
        }
    }
}
