//! What `--range` and `--module` select: the address ranges to single-step, and the
//! *entry points* where a thread running at full speed outside them is caught coming back
//! in (a breakpoint each). Pure functions over the text of `/proc/PID/maps` and the bytes
//! of an ELF file, usable and tested anywhere.
//!
//! A module is an image mapped in the process, named by its path or file name as
//! `/proc/PID/maps` shows it (`libc.so.6`, `/usr/bin/prog`, `[vdso]`). Its ranges are its
//! executable mappings; its entry points are the ELF entry point and every function symbol
//! (`.symtab` and `.dynsym`) inside them, so that calls from outside into any named
//! function are caught: `main` called by libc, a `qsort` comparator, a thread's start
//! routine. A call from outside to a function with no symbol (a stripped binary's static
//! functions) is missed.

/// One line of `/proc/PID/maps`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mapping {
    /// First address.
    pub start: u64,
    /// One past the last address.
    pub end: u64,
    /// Offset in the file.
    pub offset: u64,
    /// Mapped executable (`x` in the permissions).
    pub exec: bool,
    /// The path (or `[vdso]`, `[stack]`, …; empty for anonymous memory).
    pub path: String,
}

/// Parses the text of `/proc/PID/maps`; lines that do not parse are skipped.
#[must_use]
pub fn parse_maps(text: &str) -> Vec<Mapping> {
    text.lines().filter_map(parse_map_line).collect()
}

fn parse_map_line(line: &str) -> Option<Mapping> {
    // "start-end perms offset dev inode   path": single spaces up to the inode, then
    // padding before the path (which may itself hold spaces).
    let mut fields = line.splitn(6, ' ');
    let (start, end) = fields.next()?.split_once('-')?;
    let perms = fields.next()?;
    let offset = fields.next()?;
    let _dev = fields.next()?;
    let _inode = fields.next()?;
    let path = fields.next().unwrap_or("").trim_start();
    Some(Mapping {
        start: u64::from_str_radix(start, 16).ok()?,
        end: u64::from_str_radix(end, 16).ok()?,
        offset: u64::from_str_radix(offset, 16).ok()?,
        exec: perms.as_bytes().get(2) == Some(&b'x'),
        path: path.to_owned(),
    })
}

/// Whether `path` (of a mapping) is the module `name`: the same path, or the same file name.
#[must_use]
pub fn is_module(name: &str, path: &str) -> bool {
    !path.is_empty()
        && (path == name || std::path::Path::new(path).file_name() == Some(name.as_ref()))
}

/// A module found in the process.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Module {
    /// Its path.
    pub path: String,
    /// Its executable mappings, `(start, end)` with `end` exclusive.
    pub ranges: Vec<(u64, u64)>,
    /// Its entry point and function symbols at their run-time addresses, inside `ranges`,
    /// sorted and without repeats.
    pub entries: Vec<u64>,
}

/// Finds module `name` in `maps`; `read_file` gives the bytes of a path (its ELF symbols;
/// `None` when unreadable, as for `[vdso]`: the module then has ranges and no entry points).
/// `None` when no mapping is the module.
pub fn find_module(
    name: &str,
    maps: &[Mapping],
    read_file: impl FnOnce(&str) -> Option<Vec<u8>>,
) -> Option<Module> {
    let mine: Vec<&Mapping> = maps.iter().filter(|m| is_module(name, &m.path)).collect();
    let first = mine.first()?;
    let path = first.path.clone();
    let ranges: Vec<(u64, u64)> = mine
        .iter()
        .filter(|m| m.exec)
        .map(|m| (m.start, m.end))
        .collect();
    let mut entries = Vec::new();
    if let Some(elf) = read_file(&path).as_deref().and_then(elf_functions) {
        // The load bias: where the file's first page is mapped, against the first
        // segment's address (0 for a non-PIE executable).
        let base = mine.iter().find(|m| m.offset == 0).map(|m| m.start);
        if let Some(bias) = base.map(|b| b.wrapping_sub(elf.first_vaddr & !0xfff)) {
            entries.extend(
                std::iter::once(elf.entry)
                    .chain(elf.functions.iter().copied())
                    .map(|v| v.wrapping_add(bias))
                    .filter(|a| ranges.iter().any(|&(s, e)| (s..e).contains(a))),
            );
        }
    }
    entries.sort_unstable();
    entries.dedup();
    Some(Module {
        path,
        ranges,
        entries,
    })
}

/// What [`elf_functions`] reads from an ELF file.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ElfFunctions {
    /// `e_entry` (0 for most shared libraries).
    pub entry: u64,
    /// The lowest `p_vaddr` of a `PT_LOAD` segment.
    pub first_vaddr: u64,
    /// The values of the function symbols (`STT_FUNC`, defined) of `.symtab` and `.dynsym`.
    pub functions: Vec<u64>,
}

fn u16_at(b: &[u8], at: usize) -> Option<u64> {
    let s = b.get(at..at.checked_add(2)?)?;
    Some(u64::from(u16::from_le_bytes(s.try_into().ok()?)))
}

fn u32_at(b: &[u8], at: usize) -> Option<u64> {
    let s = b.get(at..at.checked_add(4)?)?;
    Some(u64::from(u32::from_le_bytes(s.try_into().ok()?)))
}

fn u64_at(b: &[u8], at: usize) -> Option<u64> {
    let s = b.get(at..at.checked_add(8)?)?;
    Some(u64::from_le_bytes(s.try_into().ok()?))
}

/// The `i`-th table entry of `size` bytes at `offset`, as a slice start.
fn table_entry(offset: u64, size: u64, i: u64) -> Option<usize> {
    usize::try_from(offset.checked_add(size.checked_mul(i)?)?).ok()
}

const PT_LOAD: u64 = 1;
const SHT_SYMTAB: u64 = 2;
const SHT_DYNSYM: u64 = 11;
const STT_FUNC: u8 = 2;
/// The most symbols read from one table, whatever the file says.
const MAX_SYMBOLS: u64 = 1 << 22;

/// The entry point, first segment address and function symbols of a 64-bit little-endian
/// ELF file; `None` when `bytes` is not one. Damaged tables are skipped, never trusted
/// beyond the bytes there are.
#[must_use]
pub fn elf_functions(bytes: &[u8]) -> Option<ElfFunctions> {
    // e_ident: magic, ELFCLASS64, ELFDATA2LSB.
    if bytes.get(..6)? != b"\x7fELF\x02\x01" {
        return None;
    }
    let entry = u64_at(bytes, 24)?;
    let (phoff, shoff) = (u64_at(bytes, 32)?, u64_at(bytes, 40)?);
    let (phentsize, phnum) = (u16_at(bytes, 54)?, u16_at(bytes, 56)?);
    let (shentsize, shnum) = (u16_at(bytes, 58)?, u16_at(bytes, 60)?);
    let first_vaddr = (0..phnum)
        .filter_map(|i| {
            let at = table_entry(phoff, phentsize, i)?;
            (u32_at(bytes, at)? == PT_LOAD).then(|| u64_at(bytes, at.checked_add(16)?))?
        })
        .min()
        .unwrap_or(0);
    let mut functions = Vec::new();
    for i in 0..shnum {
        let Some(at) = table_entry(shoff, shentsize, i) else {
            continue;
        };
        let kind = u32_at(bytes, at.saturating_add(4));
        if kind != Some(SHT_SYMTAB) && kind != Some(SHT_DYNSYM) {
            continue;
        }
        let (Some(offset), Some(size)) = (
            u64_at(bytes, at.saturating_add(24)),
            u64_at(bytes, at.saturating_add(32)),
        ) else {
            continue;
        };
        // Elf64_Sym: st_name 4, st_info 1, st_other 1, st_shndx 2, st_value 8, st_size 8.
        for k in 0..(size / 24).min(MAX_SYMBOLS) {
            let Some(sym) = table_entry(offset, 24, k) else {
                break;
            };
            let Some(info) = bytes.get(sym.saturating_add(4)) else {
                break;
            };
            let shndx = u16_at(bytes, sym.saturating_add(6)).unwrap_or(0);
            let value = u64_at(bytes, sym.saturating_add(8)).unwrap_or(0);
            if info & 0xf == STT_FUNC && shndx != 0 && value != 0 {
                functions.push(value);
            }
        }
    }
    Some(ElfFunctions {
        entry,
        first_vaddr,
        functions,
    })
}

/// Whether `addr` is in one of `ranges` (`end` exclusive).
#[must_use]
pub fn contains(ranges: &[(u64, u64)], addr: u64) -> bool {
    ranges
        .iter()
        .any(|&(start, end)| start <= addr && addr < end)
}

#[cfg(test)]
#[allow(
    clippy::arithmetic_side_effects,
    clippy::indexing_slicing,
    clippy::unwrap_used
)]
mod tests {
    use super::*;
    use quickcheck::quickcheck;

    const MAPS: &str = "\
00400000-00401000 r--p 00000000 08:01 1234                               /tmp/my prog
00401000-00402000 r-xp 00001000 08:01 1234                               /tmp/my prog
7ffff7fc5000-7ffff7fc7000 r-xp 00000000 00:00 0                          [vdso]
7ffff7dd0000-7ffff7f50000 r-xp 00028000 08:01 99                         /usr/lib/x86_64-linux-gnu/libc.so.6
7ffff7f50000-7ffff7f60000 rw-p 00000000 00:00 0 
not a line
";

    #[test]
    fn maps_lines_and_module_names() {
        let maps = parse_maps(MAPS);
        assert_eq!(maps.len(), 5);
        assert_eq!(
            maps[1],
            Mapping {
                start: 0x401000,
                end: 0x402000,
                offset: 0x1000,
                exec: true,
                path: "/tmp/my prog".into()
            }
        );
        assert!(!maps[0].exec);
        assert_eq!(maps[4].path, "");
        assert!(is_module("libc.so.6", &maps[3].path));
        assert!(is_module(
            "/usr/lib/x86_64-linux-gnu/libc.so.6",
            &maps[3].path
        ));
        assert!(!is_module("libc.so", &maps[3].path));
        assert!(is_module("[vdso]", &maps[2].path));
        assert!(!is_module("", ""));
        let libc = find_module("libc.so.6", &maps, |_| None).unwrap();
        assert_eq!(libc.ranges, [(0x7ffff7dd0000, 0x7ffff7f50000)]);
        assert!(libc.entries.is_empty(), "no file, no entry points");
        assert!(find_module("libm.so.6", &maps, |_| None).is_none());
    }

    /// A minimal ELF: one PT_LOAD at `vaddr`, a `.symtab` with a function at `vaddr+0x1010`,
    /// a data object and an undefined function.
    fn tiny_elf(vaddr: u64) -> Vec<u8> {
        let mut b = vec![0u8; 0x200];
        b[..6].copy_from_slice(b"\x7fELF\x02\x01");
        let put = |b: &mut Vec<u8>, at: usize, v: u64, n: usize| {
            b[at..at + n].copy_from_slice(&v.to_le_bytes()[..n]);
        };
        put(&mut b, 24, vaddr + 0x1000, 8); // e_entry
        put(&mut b, 32, 0x40, 8); // e_phoff
        put(&mut b, 40, 0x80, 8); // e_shoff
        put(&mut b, 54, 56, 2);
        put(&mut b, 56, 1, 2);
        put(&mut b, 58, 64, 2);
        put(&mut b, 60, 1, 2);
        put(&mut b, 0x40, PT_LOAD, 4);
        put(&mut b, 0x40 + 16, vaddr, 8);
        put(&mut b, 0x80 + 4, SHT_SYMTAB, 4);
        put(&mut b, 0x80 + 24, 0x100, 8);
        put(&mut b, 0x80 + 32, 3 * 24, 8);
        for (k, (info, shndx, value)) in [
            (2u64, 1u64, vaddr + 0x1010),
            (1, 1, vaddr + 0x1020),
            (2, 0, 0),
        ]
        .into_iter()
        .enumerate()
        {
            let s = 0x100 + 24 * k;
            put(&mut b, s + 4, info, 1);
            put(&mut b, s + 6, shndx, 2);
            put(&mut b, s + 8, value, 8);
        }
        b
    }

    #[test]
    fn functions_of_an_elf_at_their_run_time_addresses() {
        let elf = elf_functions(&tiny_elf(0)).unwrap();
        assert_eq!(elf.entry, 0x1000);
        assert_eq!(elf.functions, [0x1010]);
        // A PIE loaded at 0x555555554000: the bias applies; the entry and the function are
        // in the executable mapping.
        let maps = parse_maps(
            "555555554000-555555555000 r--p 00000000 08:01 7 /p\n\
             555555555000-555555556000 r-xp 00001000 08:01 7 /p\n",
        );
        let m = find_module("p", &maps, |path| (path == "/p").then(|| tiny_elf(0))).unwrap();
        assert_eq!(m.ranges, [(0x555555555000, 0x555555556000)]);
        assert_eq!(m.entries, [0x555555555000, 0x555555555010]);
        // A non-PIE executable at its link address: no bias.
        let maps = parse_maps(
            "400000-401000 r--p 00000000 08:01 7 /q\n401000-402000 r-xp 00001000 08:01 7 /q\n",
        );
        let m = find_module("/q", &maps, |_| Some(tiny_elf(0x400000))).unwrap();
        assert_eq!(m.entries, [0x401000, 0x401010]);
        assert!(elf_functions(b"\x7fELF\x01\x01").is_none(), "32-bit");
        assert!(contains(&m.ranges, 0x401fff) && !contains(&m.ranges, 0x402000));
    }

    quickcheck! {
        /// Any bytes, any ELF cut short or damaged: no panic.
        fn any_bytes_parse_without_panic(bytes: Vec<u8>, cut: usize) -> bool {
            let mut elf = tiny_elf(0x400000);
            let n = cut % (elf.len() + 1);
            elf.truncate(n);
            elf.extend_from_slice(&bytes);
            let _ = elf_functions(&elf);
            let _ = elf_functions(&bytes);
            let _ = parse_maps(&String::from_utf8_lossy(&bytes));
            true
        }
    }
}
