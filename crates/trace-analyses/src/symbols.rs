//! Symbols for naming call targets (`calls --symbols`): the symbol tables and exports of
//! ELF, PE and Mach-O files, read with the `object` crate and rebased to where the module
//! was loaded, and CSV files of `address,name` lines.
//!
//! A target is named `name` at a symbol's address, `name+0xOFF` past it (the nearest symbol
//! at or below it, within its size when it has one, and within its module's image for an
//! object file), else `0x<target>`.
//!
//! Rebasing: runtime address = address − link base + load base, where the link base is
//! the PE image base, the `__TEXT` segment's address (Mach-O) or the lowest segment
//! address (ELF: 0 for PIE and shared objects).
//!
//! ```
//! use trace_analyses::symbols::Symbols;
//!
//! let mut s = Symbols::default();
//! s.add_csv("address,name\n0x401000,main\n0x402000,helper\n".as_bytes(), 0, "syms.csv")?;
//! assert_eq!(s.name(0x401000), "main");
//! assert_eq!(s.name(0x402010), "helper+0x10");
//! assert_eq!(s.name(0x400000), "0x400000");
//! # Ok::<(), trace_analyses::symbols::SymbolError>(())
//! ```

use std::path::{Path, PathBuf};

use object::{Object, ObjectSection, ObjectSegment, ObjectSymbol};

/// Why a symbol file could not be read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SymbolError {
    /// The file cannot be read.
    #[error("cannot read {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// Not an ELF, PE or Mach-O file the `object` crate reads.
    #[error("{path}: not an ELF, PE or Mach-O file: {message}")]
    Object {
        /// The file.
        path: PathBuf,
        /// `object`'s message.
        message: String,
    },
    /// A CSV line that is not `address,name`.
    #[error("{path}: line {line}: expected `address,name` (address hex 0x… or decimal)")]
    Csv {
        /// The file.
        path: PathBuf,
        /// The line (1-based).
        line: u64,
    },
}

/// One symbol: where it starts, how far it reaches (0: unknown) and its name.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Symbol {
    addr: u64,
    size: u64,
    name: String,
    /// The module's image, when known: the symbol does not reach past it.
    image: Option<(u64, u64)>,
}

/// A set of symbols from any number of files.
#[derive(Clone, Debug, Default)]
pub struct Symbols {
    /// Sorted by address once [`Symbols::name`] is asked (kept sorted by the adders).
    symbols: Vec<Symbol>,
}

/// A `--symbols` argument: `FILE` or `FILE@BASE` (BASE hex `0x…` or decimal), split at the
/// last `@` when what follows is a number.
#[must_use]
pub fn parse_spec(spec: &str) -> (PathBuf, Option<u64>) {
    if let Some((file, base)) = spec.rsplit_once('@')
        && let Some(b) = parse_number(base)
    {
        return (PathBuf::from(file), Some(b));
    }
    (PathBuf::from(spec), None)
}

fn parse_number(s: &str) -> Option<u64> {
    let s = s.trim();
    match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(hex) => u64::from_str_radix(hex, 16).ok(),
        None => s.parse().ok(),
    }
}

impl Symbols {
    /// Whether there are none.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.symbols.is_empty()
    }

    /// The number of symbols.
    #[must_use]
    pub fn len(&self) -> usize {
        self.symbols.len()
    }

    /// Adds the symbols of `path` (`.csv`: `address,name` lines; else an object file),
    /// rebased to `base` when given (for a CSV file, `base` is added to its addresses).
    ///
    /// # Errors
    ///
    /// The file cannot be read or parsed.
    pub fn add_file(&mut self, path: &Path, base: Option<u64>) -> Result<(), SymbolError> {
        let data = std::fs::read(path).map_err(|source| SymbolError::Io {
            path: path.to_owned(),
            source,
        })?;
        let csv = path
            .extension()
            .is_some_and(|e| e.eq_ignore_ascii_case("csv"));
        if csv {
            self.add_csv(&data[..], base.unwrap_or(0), &path.display().to_string())
        } else {
            self.add_object(&data, base, path)
        }
    }

    /// Adds CSV symbols: `address,name` lines (a first line `address,name` is a header;
    /// empty lines and lines starting `#` are skipped), `offset` added to each address.
    ///
    /// # Errors
    ///
    /// A line that is not `address,name`.
    pub fn add_csv(&mut self, data: &[u8], offset: u64, path: &str) -> Result<(), SymbolError> {
        let text = String::from_utf8_lossy(data);
        for (n, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let bad = || SymbolError::Csv {
                path: PathBuf::from(path),
                line: (n as u64).saturating_add(1),
            };
            let (addr, name) = line.split_once(',').ok_or_else(bad)?;
            let Some(addr) = parse_number(addr) else {
                if n == 0 {
                    continue; // the header
                }
                return Err(bad());
            };
            let name = name.trim().trim_matches('"');
            if name.is_empty() {
                return Err(bad());
            }
            self.symbols.push(Symbol {
                addr: addr.wrapping_add(offset),
                size: 0,
                name: name.to_owned(),
                image: None,
            });
        }
        self.sort();
        Ok(())
    }

    /// Adds an object file's symbols (its symbol table, dynamic symbols and exports).
    fn add_object(
        &mut self,
        data: &[u8],
        base: Option<u64>,
        path: &Path,
    ) -> Result<(), SymbolError> {
        let file = object::File::parse(data).map_err(|e| SymbolError::Object {
            path: path.to_owned(),
            message: e.to_string(),
        })?;
        let link = link_base(&file);
        let rebase = |a: u64| match base {
            Some(b) => a.wrapping_sub(link).wrapping_add(b),
            None => a,
        };
        // The image: the segments' extent (sections where there are no segments).
        let mut lo = u64::MAX;
        let mut hi = 0u64;
        for s in file.segments() {
            if s.size() > 0 && !is_page_zero(&s) {
                lo = lo.min(s.address());
                hi = hi.max(s.address().saturating_add(s.size()));
            }
        }
        if lo > hi {
            for s in file.sections() {
                if s.size() > 0 {
                    lo = lo.min(s.address());
                    hi = hi.max(s.address().saturating_add(s.size()));
                }
            }
        }
        let image = (lo < hi).then(|| (rebase(lo), rebase(hi)));
        let mut add = |addr: u64, size: u64, name: &str| {
            if name.is_empty() || addr == 0 {
                return;
            }
            self.symbols.push(Symbol {
                addr: rebase(addr),
                size,
                name: name.to_owned(),
                image,
            });
        };
        for sym in file.symbols().chain(file.dynamic_symbols()) {
            if !sym.is_definition() {
                continue;
            }
            if let Ok(name) = sym.name() {
                add(sym.address(), sym.size(), name);
            }
        }
        if let Ok(exports) = file.exports() {
            for e in exports.flatten() {
                if let (
                    object::NameOrOrdinal::Name(name),
                    object::ExportTarget::Address { address },
                ) = (e.name(), e.target())
                    && let Ok(name) = std::str::from_utf8(name)
                {
                    add(address, 0, name);
                }
            }
        }
        self.sort();
        Ok(())
    }

    fn sort(&mut self) {
        self.symbols
            .sort_by(|a, b| a.addr.cmp(&b.addr).then_with(|| a.name.cmp(&b.name)));
        // One name per address: the first (sized ones first is not needed: equal sizes).
        self.symbols.dedup_by(|b, a| a.addr == b.addr);
    }

    /// The name of `target`: `name`, `name+0xOFF`, or `0x<target>`.
    #[must_use]
    pub fn name(&self, target: u64) -> String {
        let at = self.symbols.partition_point(|s| s.addr <= target);
        if let Some(s) = at.checked_sub(1).and_then(|k| self.symbols.get(k)) {
            let off = target.wrapping_sub(s.addr);
            let in_size = s.size == 0 || off < s.size;
            let in_image = s.image.is_none_or(|(lo, hi)| target >= lo && target < hi);
            if in_size && in_image {
                return if off == 0 {
                    s.name.clone()
                } else {
                    format!("{}+{off:#x}", s.name)
                };
            }
        }
        format!("{target:#x}")
    }
}

/// A Mach-O `__PAGEZERO`: no code, at 0.
fn is_page_zero<'d>(s: &impl ObjectSegment<'d>) -> bool {
    s.name().ok().flatten() == Some("__PAGEZERO")
}

/// The address the file was linked at (see the module documentation).
fn link_base(file: &object::File<'_>) -> u64 {
    let pe = file.relative_address_base();
    if pe != 0 {
        return pe;
    }
    if let Some(text) = file
        .segments()
        .find(|s| s.name().ok().flatten() == Some("__TEXT"))
    {
        return text.address();
    }
    file.segments()
        .filter(|s| !is_page_zero(s))
        .map(|s| s.address())
        .min()
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_split_at_the_last_at_sign_before_a_number() {
        assert_eq!(
            parse_spec("a.dll@0x7ff600000000"),
            (PathBuf::from("a.dll"), Some(0x7ff6_0000_0000))
        );
        assert_eq!(
            parse_spec("we@b/lib.so"),
            (PathBuf::from("we@b/lib.so"), None)
        );
        assert_eq!(
            parse_spec("x.csv@4096"),
            (PathBuf::from("x.csv"), Some(4096))
        );
    }

    #[test]
    fn csv_lines_and_errors() {
        let mut s = Symbols::default();
        s.add_csv(b"0x10,a\n# c\n\n0x20,b\n", 0x1000, "t.csv")
            .unwrap();
        assert_eq!(s.name(0x1010), "a");
        assert_eq!(s.name(0x101f), "a+0xf");
        assert_eq!(s.name(0x1020), "b");
        assert_eq!(s.name(0x100f), "0x100f");
        let e = s.add_csv(b"0x10,a\nnope\n", 0, "t.csv").unwrap_err();
        assert_eq!(
            e.to_string(),
            "t.csv: line 2: expected `address,name` (address hex 0x… or decimal)"
        );
    }

    /// The test binary itself: an ELF (this workspace builds on Linux) whose symbols
    /// include this test's function, found again at its address once rebased.
    #[test]
    fn an_elf_file_rebased() {
        let exe = std::env::current_exe().unwrap();
        let data = std::fs::read(&exe).unwrap();
        let Ok(file) = object::File::parse(&*data) else {
            return;
        };
        let Some(sym) = file
            .symbols()
            .find(|s| s.name().is_ok_and(|n| n.contains("an_elf_file_rebased")) && s.size() > 0)
        else {
            return;
        };
        let link = link_base(&file);
        let mut s = Symbols::default();
        s.add_file(&exe, Some(0x5555_0000_0000)).unwrap();
        let at = sym.address() - link + 0x5555_0000_0000;
        assert_eq!(s.name(at), sym.name().unwrap());
        assert_eq!(s.name(at + 1), format!("{}+0x1", sym.name().unwrap()));
        let mut plain = Symbols::default();
        plain.add_file(&exe, None).unwrap();
        assert_eq!(plain.name(sym.address()), sym.name().unwrap());
    }
}
