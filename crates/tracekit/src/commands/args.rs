//! Parsers of the numbers, addresses and ranges the analysis commands take: decimal or
//! `0x` hex, `ADDR[:LEN]`, `A:B` (end-exclusive). Used as clap value parsers, so a bad
//! argument is a usage error (exit 2) that names the argument.

/// A number in decimal or `0x` hex (`0X` too), with optional `_` separators.
///
/// # Errors
///
/// What was expected, for clap to print.
pub fn number(s: &str) -> Result<u64, String> {
    let t = s.trim().replace('_', "");
    let parsed = match t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        Some(hex) => u64::from_str_radix(hex, 16),
        None => t.parse::<u64>(),
    };
    parsed.map_err(|_| format!("{s:?} is not a number (decimal, or hex with 0x)"))
}

/// An address range: `ADDR` (one word: `len` is `None`) or `ADDR:LEN`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AddrLen {
    /// The first address.
    pub addr: u64,
    /// The length in bytes, if given.
    pub len: Option<u64>,
}

/// Parses `ADDR[:LEN]`; `LEN` must not be 0, and `ADDR + LEN` must not overflow.
///
/// # Errors
///
/// What was expected, for clap to print.
pub fn addr_len(s: &str) -> Result<AddrLen, String> {
    let (addr, len) = match s.split_once(':') {
        Some((a, l)) => (number(a)?, Some(number(l)?)),
        None => (number(s)?, None),
    };
    if let Some(l) = len {
        if l == 0 {
            return Err(format!("{s:?}: the length must not be 0"));
        }
        if addr.checked_add(l).is_none() {
            return Err(format!(
                "{s:?}: the range passes the end of the address space"
            ));
        }
    }
    Ok(AddrLen { addr, len })
}

/// Parses `A:B`, the addresses from `A` up to but not including `B` (`A < B`).
///
/// # Errors
///
/// What was expected, for clap to print.
pub fn range(s: &str) -> Result<std::ops::Range<u64>, String> {
    let (a, b) = s
        .split_once(':')
        .ok_or_else(|| format!("{s:?} is not a range A:B"))?;
    let (a, b) = (number(a)?, number(b)?);
    if a >= b {
        return Err(format!(
            "{s:?}: the range is empty (A:B is end-exclusive, A < B)"
        ));
    }
    Ok(a..b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_ranges_and_errors() {
        assert_eq!(number("42"), Ok(42));
        assert_eq!(number("0x7ff6_a1b2"), Ok(0x7ff6_a1b2));
        assert_eq!(number("0XFF"), Ok(255));
        assert!(number("0x").is_err());
        assert!(number("-1").is_err());
        assert!(number("12z").is_err());
        assert_eq!(number("18446744073709551615"), Ok(u64::MAX));
        assert!(number("18446744073709551616").is_err());
        assert_eq!(
            addr_len("0x10"),
            Ok(AddrLen {
                addr: 16,
                len: None
            })
        );
        assert_eq!(
            addr_len("0x10:4"),
            Ok(AddrLen {
                addr: 16,
                len: Some(4)
            })
        );
        assert!(addr_len("0x10:0").is_err());
        assert!(addr_len("0xffffffffffffffff:2").is_err());
        assert_eq!(range("0x10:0x20"), Ok(16..32));
        assert!(range("0x20:0x10").is_err());
        assert!(range("5").is_err());
    }
}
