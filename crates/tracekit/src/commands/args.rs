//! Parsers of the numbers, addresses and ranges the commands take: decimal or `0x` hex,
//! counts and sizes with a `K`/`M`/`G` suffix, `ADDR[:LEN]`, `A:B` (end-exclusive). Used
//! as clap value parsers, so a bad argument is a usage error (exit 2) that names the
//! argument and says what was expected. The arguments that take them accept a leading `-`
//! (clap's `allow_negative_numbers`), so that `--at -1` is told it must be ≥ 0 rather than
//! to write `-- -1`.

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
    parsed.map_err(|_| not_a(s, "number (decimal, or hex with 0x)"))
}

/// "must be ≥ 0" for a negative number, else "is not a WHAT".
fn not_a(s: &str, what: &str) -> String {
    let t = s.trim();
    if t.strip_prefix('-')
        .is_some_and(|d| d.starts_with(|c: char| c.is_ascii_digit()))
    {
        format!("{s:?}: must be ≥ 0")
    } else {
        format!("{s:?} is not a {what}")
    }
}

/// A count (instructions, rows): [`number`], or decimal with a `K`, `M` or `G` suffix
/// (thousands, millions, billions: `--slice 1M` is 1 000 000; `k`, `m`, `g` too).
///
/// # Errors
///
/// What was expected, for clap to print.
pub fn count(s: &str) -> Result<u64, String> {
    suffixed(
        s,
        1000,
        "count (decimal or 0x hex, or with K, M or G: 10K, 1M, 2G)",
    )
}

/// A [`count`] of at least 1.
///
/// # Errors
///
/// What was expected, for clap to print.
pub fn positive_count(s: &str) -> Result<u64, String> {
    match count(s)? {
        0 => Err(format!("{s:?}: must be at least 1")),
        n => Ok(n),
    }
}

/// A size in bytes: [`number`], or decimal with a `K`, `M` or `G` suffix (KiB, MiB,
/// GiB: `64K` is 65 536).
///
/// # Errors
///
/// What was expected, for clap to print.
pub fn size(s: &str) -> Result<u64, String> {
    suffixed(
        s,
        1024,
        "size (decimal or 0x hex, or with K, M or G: 64K, 1M)",
    )
}

/// [`number`], or a decimal number times `unit`, `unit²` or `unit³` for a `K`, `M` or `G`
/// suffix.
fn suffixed(s: &str, unit: u64, what: &str) -> Result<u64, String> {
    let t = s.trim();
    let is_hex = t.starts_with("0x") || t.starts_with("0X");
    let power = match t.chars().last().map(|c| c.to_ascii_uppercase()) {
        Some('K') if !is_hex => 1,
        Some('M') if !is_hex => 2,
        Some('G') if !is_hex => 3,
        _ => return number(s).map_err(|_| not_a(s, what)),
    };
    let digits = t.get(..t.len().saturating_sub(1)).unwrap_or_default();
    let n = digits
        .replace('_', "")
        .parse::<u64>()
        .map_err(|_| not_a(s, what))?;
    n.checked_mul(unit.pow(power))
        .ok_or_else(|| format!("{s:?} is too large (at most {})", u64::MAX))
}

/// An address range: `ADDR` (one word: `len` is `None`) or `ADDR:LEN`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AddrLen {
    /// The first address.
    pub addr: u64,
    /// The length in bytes, if given.
    pub len: Option<u64>,
}

/// Parses `ADDR[:LEN]` (`LEN` a [`size`]); `LEN` must not be 0, and `ADDR + LEN` must not
/// overflow.
///
/// # Errors
///
/// What was expected, for clap to print.
pub fn addr_len(s: &str) -> Result<AddrLen, String> {
    let (addr, len) = match s.split_once(':') {
        Some((a, l)) => (number(a)?, Some(size(l)?)),
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

/// Where `mem` reads: an address, or a register's value at the step plus an offset.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Address {
    /// A number.
    Absolute(u64),
    /// `reg`, `reg+off` or `reg-off` (in brackets or not): the register's value before
    /// the step, plus `offset`.
    Register {
        /// The register's name, as `state` prints it.
        name: String,
        /// What is added to its value.
        offset: i128,
    },
}

impl Address {
    /// The address, given the value of the register it names (if it names one); `None`
    /// when the sum leaves the address space.
    #[must_use]
    pub fn resolve(&self, register: u64) -> Option<u64> {
        match self {
            Address::Absolute(a) => Some(*a),
            Address::Register { offset, .. } => {
                u64::try_from(i128::from(register).checked_add(*offset)?).ok()
            }
        }
    }
}

/// `mem`'s first operand: an [`Address`] and, with `:LEN`, a length.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemAddr {
    /// Where to read.
    pub addr: Address,
    /// The length in bytes, if given.
    pub len: Option<u64>,
}

/// Parses `ADDR`, `REG`, `[REG+OFF]` or `[REG-OFF]` (brackets optional), then an optional
/// `:LEN` ([`size`]).
///
/// # Errors
///
/// What was expected, for clap to print.
pub fn mem_addr(s: &str) -> Result<MemAddr, String> {
    let expected = || {
        format!(
            "{s:?} is not an address: give a number (0x7ffe0000), a register (rsp) or \
             [register+offset] ([rsp+0x10], [rbp-8]), then optionally :LEN"
        )
    };
    let (expr, len) = match s.rsplit_once(':') {
        Some((e, l)) => (e, Some(size(l)?)),
        None => (s, None),
    };
    if len == Some(0) {
        return Err(format!("{s:?}: the length must not be 0"));
    }
    let expr = expr.trim();
    let inner = match expr.strip_prefix('[') {
        Some(rest) => rest.strip_suffix(']').ok_or_else(expected)?.trim(),
        None => expr,
    };
    if inner.starts_with(|c: char| c.is_ascii_digit()) {
        let addr = number(inner).map_err(|_| expected())?;
        return Ok(MemAddr {
            addr: Address::Absolute(addr),
            len,
        });
    }
    let (name, offset) = match inner.find(['+', '-']) {
        Some(k) => {
            let (name, rest) = inner.split_at(k);
            let magnitude = number(rest.get(1..).unwrap_or_default()).map_err(|_| expected())?;
            let magnitude = i128::from(magnitude);
            (
                name.trim(),
                if rest.starts_with('-') {
                    magnitude.wrapping_neg() // a u64's magnitude: no overflow in i128
                } else {
                    magnitude
                },
            )
        }
        None => (inner, 0),
    };
    let is_name = name.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.');
    if !is_name {
        return Err(expected());
    }
    Ok(MemAddr {
        addr: Address::Register {
            name: name.to_owned(),
            offset,
        },
        len,
    })
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
        assert_eq!(addr_len("0x10:4K").map(|a| a.len), Ok(Some(4096)));
        assert!(addr_len("0xffffffffffffffff:2").is_err());
        assert_eq!(range("0x10:0x20"), Ok(16..32));
        assert!(range("0x20:0x10").is_err());
        assert!(range("5").is_err());
    }

    #[test]
    fn mem_addresses() {
        let reg = |name: &str, offset| Address::Register {
            name: name.into(),
            offset,
        };
        let m = |s| mem_addr(s).map(|m| (m.addr, m.len));
        assert_eq!(m("0x10"), Ok((Address::Absolute(16), None)));
        assert_eq!(m("0x10:4"), Ok((Address::Absolute(16), Some(4))));
        assert_eq!(m("rsp"), Ok((reg("rsp", 0), None)));
        assert_eq!(m("[rsp+0x10]"), Ok((reg("rsp", 16), None)));
        assert_eq!(m("[ rbp - 8 ]:1K"), Ok((reg("rbp", -8), Some(1024))));
        assert_eq!(m("rbp-8"), Ok((reg("rbp", -8), None)));
        assert!(
            mem_addr("[rsp+x]")
                .unwrap_err()
                .contains("is not an address")
        );
        assert!(mem_addr("[rsp").is_err());
        assert!(mem_addr("r$p").is_err());
        assert!(mem_addr("0x10:0").is_err());
        assert_eq!(reg("rbp", -8).resolve(0x100), Some(0xf8));
        assert_eq!(reg("rbp", -8).resolve(0), None);
        assert_eq!(reg("rbp", 1).resolve(u64::MAX), None);
    }

    /// No argument text makes a parser panic, and what parses prints back to itself.
    #[test]
    fn parsers_never_panic_and_round_trip() {
        fn prop(text: String, n: u64, offset: i64, pick: u8) -> bool {
            for s in [text.as_str(), &format!("{text}K"), &format!("[{text}]")] {
                let _ = (number(s), count(s), size(s), positive_count(s));
                let _ = (addr_len(s), range(s), mem_addr(s));
            }
            let name = ["rsp", "rbp", "r8", "eax"][usize::from(pick % 4)];
            let expr = if offset < 0 {
                format!("[{name}-{:#x}]", offset.unsigned_abs())
            } else {
                format!("[{name}+{offset}]")
            };
            let reg = mem_addr(&expr)
                == Ok(MemAddr {
                    addr: Address::Register {
                        name: name.into(),
                        offset: i128::from(offset),
                    },
                    len: None,
                });
            let k = n % 1_000_000;
            reg && number(&n.to_string()) == Ok(n)
                && number(&format!("{n:#x}")) == Ok(n)
                && count(&format!("{k}K")) == Ok(k * 1000)
                && size(&format!("{k}K")) == Ok(k * 1024)
        }
        quickcheck::quickcheck(prop as fn(String, u64, i64, u8) -> bool);
    }

    #[test]
    fn counts_sizes_and_negative_numbers() {
        assert_eq!(count("1M"), Ok(1_000_000));
        assert_eq!(count("10k"), Ok(10_000));
        assert_eq!(count("2G"), Ok(2_000_000_000));
        assert_eq!(count("0x10"), Ok(16));
        assert_eq!(count("1_000"), Ok(1000));
        assert_eq!(size("64K"), Ok(65_536));
        assert_eq!(size("1M"), Ok(1 << 20));
        assert!(count("1.5M").is_err());
        assert!(count("M").is_err());
        assert!(count("99999999999G").is_err());
        assert_eq!(number("-1"), Err("\"-1\": must be ≥ 0".to_owned()));
        assert_eq!(count("-5K"), Err("\"-5K\": must be ≥ 0".to_owned()));
        assert!(number("x1").unwrap_err().contains("is not a number"));
    }
}
