//! Lowercase hex encoding and decoding of byte strings (opcodes, register bytes, GDB's
//! hex-encoded names and notes).

/// The lowercase hex digit of a nibble (`n < 16`).
#[inline]
fn nibble(n: u8) -> char {
    char::from(if n < 10 {
        b'0'.wrapping_add(n)
    } else {
        b'a'.wrapping_add(n.wrapping_sub(10))
    })
}

/// Appends the lowercase hex form of `bytes` to `out`.
pub fn encode_to(out: &mut String, bytes: &[u8]) {
    out.reserve(bytes.len().saturating_mul(2));
    for &b in bytes {
        out.push(nibble(b >> 4));
        out.push(nibble(b & 0xf));
    }
}

/// The lowercase hex form of `bytes`.
#[must_use]
pub fn encode(bytes: &[u8]) -> String {
    let mut s = String::new();
    encode_to(&mut s, bytes);
    s
}

/// The sixteen lowercase hex digits of `v`, most significant first: made eight at a time
/// in a word (no table, no branch), for writers that emit hex on their hot path.
#[inline(always)]
#[must_use]
pub fn digits16(v: u64) -> [u8; 16] {
    let wide = u128::from(digits8((v >> 32) as u32)) << 64 | u128::from(digits8(v as u32));
    wide.to_be_bytes()
}

/// The hex digits of `v` without leading zeros but at least `min` of them (`min` in
/// 1..=16), leading [`digits16`]'s sixteen bytes, and how many they are: for writers that
/// copy all sixteen at a fixed size and cut back to the count.
#[inline(always)]
#[must_use]
pub fn leading_digits(v: u64, min: u32) -> ([u8; 16], usize) {
    let significant = 64u32.saturating_sub(v.leading_zeros()).div_ceil(4);
    let digits = significant.max(min).clamp(1, 16);
    // The first digit wanted in the top nibble.
    let top = v.wrapping_shl(16u32.saturating_sub(digits).wrapping_mul(4));
    (digits16(top), digits as usize)
}

/// The eight hex digits of `x` as ASCII, the most significant in the top byte (so
/// `to_be_bytes` gives them in reading order), computed on all eight at once.
#[inline(always)]
fn digits8(x: u32) -> u64 {
    const LOW_NIBBLES: u64 = 0x0F0F_0F0F_0F0F_0F0F;
    // Spread the nibbles out, one per byte: byte k (from the low end) gets nibble k.
    let x = u64::from(x);
    let x = (x | x << 16) & 0x0000_FFFF_0000_FFFF;
    let x = (x | x << 8) & 0x00FF_00FF_00FF_00FF;
    let x = (x | x << 4) & LOW_NIBBLES;
    // `'0' + n`, and `'a' - '0' - 10` more where `n` ≥ 10 (adding 6 carries into bit 4).
    // No byte carries into the next: each stays below 0x67.
    let letters = (x.wrapping_add(0x0606_0606_0606_0606) >> 4) & 0x0101_0101_0101_0101;
    x.wrapping_add(0x3030_3030_3030_3030)
        .wrapping_add(letters.wrapping_mul(u64::from(b'a' - b'0' - 10)))
}

/// The two lowercase hex digits of a byte.
#[inline(always)]
#[must_use]
pub fn pair(b: u8) -> [u8; 2] {
    let [.., hi, lo] = digits8(u32::from(b)).to_be_bytes();
    [hi, lo]
}

/// Appends the lowercase hex form of `bytes` to `out` (what [`encode_to`] makes), four
/// bytes at a time, each four with one fixed-size copy.
#[inline]
pub fn push_bytes(out: &mut Vec<u8>, bytes: &[u8]) {
    out.reserve(bytes.len().saturating_mul(2));
    let (words, rest) = bytes.as_chunks::<4>();
    for w in words {
        out.extend_from_slice(&digits8(u32::from_be_bytes(*w)).to_be_bytes());
    }
    for &b in rest {
        out.extend_from_slice(&pair(b));
    }
}

/// A hex string could not be decoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum HexError {
    /// A character that is not a hex digit, at this position of the string.
    #[error("bad hex digit {found:?} at position {position}")]
    BadDigit {
        /// Position (in bytes) within the string.
        position: usize,
        /// The character found.
        found: char,
    },
    /// An odd number of digits.
    #[error("odd number of hex digits ({len})")]
    OddLength {
        /// The string's length.
        len: usize,
    },
}

/// The value of one hex digit (either case), `None` for any other byte.
#[must_use]
pub fn digit(c: u8) -> Option<u8> {
    match c {
        b'0'..=b'9' => Some(c.wrapping_sub(b'0')),
        b'a'..=b'f' => Some(c.wrapping_sub(b'a').wrapping_add(10)),
        b'A'..=b'F' => Some(c.wrapping_sub(b'A').wrapping_add(10)),
        _ => None,
    }
}

/// Decodes a hex string (either case) into bytes.
///
/// # Errors
///
/// [`HexError`] on an odd length or a character that is not a hex digit.
pub fn decode(s: &[u8]) -> Result<Vec<u8>, HexError> {
    if !s.len().is_multiple_of(2) {
        return Err(HexError::OddLength { len: s.len() });
    }
    let bad = |position: usize| HexError::BadDigit {
        position,
        found: char::from(s.get(position).copied().unwrap_or(b'?')),
    };
    let mut out = Vec::with_capacity(s.len() / 2);
    for (i, pair) in s.chunks_exact(2).enumerate() {
        let at = i.saturating_mul(2);
        let (hi, lo) = match pair {
            [hi, lo] => (*hi, *lo),
            _ => return Err(HexError::OddLength { len: s.len() }),
        };
        let hi = digit(hi).ok_or_else(|| bad(at))?;
        let lo = digit(lo).ok_or_else(|| bad(at.saturating_add(1)))?;
        out.push((hi << 4) | lo);
    }
    Ok(out)
}

#[cfg(test)]
#[allow(clippy::arithmetic_side_effects)]
mod tests {
    use super::*;

    /// The word-at-a-time digits are `format!`'s, for every nibble value in every place
    /// and for byte strings of every length up to 19 (whole words and their tails).
    #[test]
    fn fast_digits_are_formats() {
        for place in 0..16 {
            for n in 0..16u64 {
                let v = n << (place * 4) | 0x1234_5678_9abc_def0 & !(0xf << (place * 4));
                assert_eq!(digits16(v), format!("{v:016x}").as_bytes());
            }
        }
        let bytes: Vec<u8> = (0..=255u8).rev().collect();
        for len in 0..20 {
            for window in bytes.chunks(len.max(1)).take(16) {
                let part = window.get(..len.min(window.len())).unwrap();
                let mut out = b"x".to_vec();
                push_bytes(&mut out, part);
                assert_eq!(out, [b"x".as_slice(), encode(part).as_bytes()].concat());
            }
        }
        for b in 0..=255u8 {
            assert_eq!(pair(b), format!("{b:02x}").as_bytes());
        }
        for place in 0..16 {
            for v in [
                1u64 << (place * 4),
                (1u64 << (place * 4)) - 1,
                u64::MAX >> (place * 4),
            ] {
                for min in 1..=16u32 {
                    let (d, n) = leading_digits(v, min);
                    let want = format!("{v:0w$x}", w = min as usize);
                    assert_eq!(&d[..n], want.as_bytes(), "{v:#x} at least {min}");
                }
            }
        }
    }

    #[test]
    fn round_trip_and_errors() {
        assert_eq!(encode(&[0x48, 0x83, 0xec, 0x28]), "4883ec28");
        assert_eq!(decode(b"4883EC28").unwrap(), [0x48, 0x83, 0xec, 0x28]);
        assert_eq!(decode(b"abc"), Err(HexError::OddLength { len: 3 }));
        assert_eq!(
            decode(b"a0zz"),
            Err(HexError::BadDigit {
                position: 2,
                found: 'z'
            })
        );
    }

    quickcheck::quickcheck! {
        fn encode_then_decode(bytes: Vec<u8>) -> bool {
            decode(encode(&bytes).as_bytes()).as_deref() == Ok(&bytes[..])
        }
    }
}
