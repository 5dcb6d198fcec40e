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
