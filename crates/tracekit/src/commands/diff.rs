//! `tracekit diff A B`: where two traces of the same format part and join again. A text
//! summary (instructions compared, equal, the divergent regions, the first divergence with
//! context), or with `--json` one line per divergent region and a `{"summary":{…}}` line.
//! Exit 0 when equal, 1 when different, 2 on any error, as `diff` does. The comparison
//! itself is `trace_analyses::diff`.

use std::ffi::OsString;
use std::io::Write;

use clap::Args;
use trace_analyses::diff::{
    self, DEFAULT_REBASE_SIZE, DiffError, DiffOptions, Line, Rebase, Region, Summary,
};
use trace_registry::steps::Isa;
use trace_registry::{Ctx, Options};

use super::args;
use crate::CliError;

/// Arguments of `tracekit diff`.
#[derive(Debug, Clone, Args)]
pub struct DiffArgs {
    /// The first trace, or - for stdin.
    pub a: OsString,
    /// The second trace (the same format), or - for stdin.
    pub b: OsString,
    /// Compare A's thread TA with B's thread TB (repeat for more pairs; default: every
    /// thread, paired in order of first appearance).
    #[arg(long = "thread", value_name = "TA:TB", value_parser = thread_pair)]
    pub threads: Vec<(u64, u64)>,
    /// Registers not to compare, e.g. `--ignore rflags,rax`.
    #[arg(long, value_name = "REG,…", value_delimiter = ',')]
    pub ignore: Vec<String>,
    /// Do not compare memory accesses.
    #[arg(long)]
    pub no_mem: bool,
    /// How many instructions to look ahead for the point where the pcs agree again (`K`,
    /// `M`, `G`: thousands, millions, billions).
    #[arg(long, value_name = "N", default_value = "1M", value_parser = window, allow_negative_numbers = true)]
    pub window: u64,
    /// ASLR: B's pcs, addresses, register values and memory words inside
    /// [B_BASE, B_BASE+SIZE) are moved by A_BASE − B_BASE before comparing (SIZE: 0x1000000).
    #[arg(long, value_name = "A_BASE:B_BASE[:SIZE]", value_parser = rebase)]
    pub rebase: Option<Rebase>,
    /// Instructions of context around the first divergence.
    #[arg(long, value_name = "N", default_value_t = 3)]
    pub context: usize,
    /// One JSON line per divergent region, then `{"summary":{…}}`.
    #[arg(long)]
    pub json: bool,
}

/// Parses `TA:TB`.
fn thread_pair(s: &str) -> Result<(u64, u64), String> {
    let (a, b) = s
        .split_once(':')
        .ok_or_else(|| format!("{s:?} is not a thread pair TA:TB"))?;
    Ok((args::number(a)?, args::number(b)?))
}

/// Parses a window of at least 16 instructions.
fn window(s: &str) -> Result<u64, String> {
    let n = args::count(s)?;
    if n < diff::SYNC_RUN as u64 {
        return Err(format!(
            "{s:?}: the window must hold at least {} instructions",
            diff::SYNC_RUN
        ));
    }
    Ok(n)
}

/// Parses `A_BASE:B_BASE[:SIZE]`.
fn rebase(s: &str) -> Result<Rebase, String> {
    let parts: Vec<&str> = s.split(':').collect();
    let (a, b, size) = match parts.as_slice() {
        [a, b] => (a, b, None),
        [a, b, size] => (a, b, Some(size)),
        _ => return Err(format!("{s:?} is not A_BASE:B_BASE[:SIZE]")),
    };
    let size = size.map_or(Ok(DEFAULT_REBASE_SIZE), |n| args::number(n))?;
    if size == 0 {
        return Err(format!("{s:?}: the size must not be 0"));
    }
    Ok(Rebase {
        a_base: args::number(a)?,
        b_base: args::number(b)?,
        size,
    })
}

/// Compares the traces and prints what differs; `Ok` when they are equal.
///
/// # Errors
///
/// [`CliError::Different`] (exit 1) when they differ; any other error (exit 2 for `diff`,
/// see `crate::run`): traces of different formats, options that do not fit them, a
/// damaged trace (after the regions found before the damage).
pub fn run(
    forced: Option<&str>,
    options: &Options,
    args: &DiffArgs,
    out: &mut dyn Write,
) -> Result<(), CliError> {
    let (mut input_a, ha) = crate::open(&args.a, forced, options)?;
    let (mut input_b, hb) = crate::open(&args.b, forced, options)?;
    if ha.name() != hb.name() {
        return Err(CliError::Usage(format!(
            "A ({}) is a {} trace and B ({}) a {} trace: diff compares two traces of the same format",
            input_a.name(),
            ha.name(),
            input_b.name(),
            hb.name()
        )));
    }
    let (name_a, name_b) = (input_a.logical_name(), input_b.logical_name());
    // Disassembly is only for the context lines: the steps are read without it.
    let plain = Options {
        disasm: false,
        ..options.clone()
    };
    let mut steps_a = ha.steps(&mut input_a, &mut Ctx::new(&plain))?;
    let mut steps_b = hb.steps(&mut input_b, &mut Ctx::new(&plain))?;
    let isa = steps_a.isa();
    let diff_options = DiffOptions {
        threads: args.threads.clone(),
        ignore: args.ignore.clone(),
        mem: !args.no_mem,
        window: args.window,
        rebase: args.rebase,
        context: args.context,
    };
    // Text mode lists the first regions after the summary.
    let mut listed: Vec<Region> = Vec::new();
    let mut more = 0u64;
    let result = diff::diff(&mut *steps_a, &mut *steps_b, &diff_options, &mut |r| {
        if args.json {
            writeln!(out, "{}", r.to_json())?;
        } else if listed.len() < LISTED {
            listed.push(r.clone());
        } else {
            more = more.saturating_add(1);
        }
        Ok(())
    });
    let summary = match result {
        Ok(s) => s,
        Err(DiffError::Read { side, source }) => {
            let name = if side == diff::Side::A {
                &name_a
            } else {
                &name_b
            };
            return Err(CliError::Failed(format!("{side} ({name}): {source}")));
        }
        Err(DiffError::Other(e)) => return Err(e.into()),
        Err(e) => return Err(CliError::Failed(e.to_string())),
    };
    if args.json {
        writeln!(out, "{}", summary.to_json())?;
    } else {
        let disasm = options.disasm.then_some(isa);
        let text = Text {
            name_a: &name_a,
            name_b: &name_b,
            format: ha.name(),
            disasm,
        };
        text.write(out, &summary, &listed, more)?;
    }
    if summary.is_equal() {
        Ok(())
    } else {
        Err(CliError::Different)
    }
}

/// How many regions the text output lists.
const LISTED: usize = 10;

/// The text output.
struct Text<'a> {
    name_a: &'a str,
    name_b: &'a str,
    format: &'a str,
    /// With `--disasm`: the instruction set to disassemble context lines with.
    disasm: Option<Isa>,
}

impl Text<'_> {
    fn write(
        &self,
        out: &mut dyn Write,
        s: &Summary,
        listed: &[Region],
        more: u64,
    ) -> std::io::Result<()> {
        writeln!(
            out,
            "A: {} ({}, {} instructions)",
            self.name_a, self.format, s.a_instructions
        )?;
        writeln!(
            out,
            "B: {} ({}, {} instructions)",
            self.name_b, self.format, s.b_instructions
        )?;
        let pairs: Vec<String> = s
            .threads
            .iter()
            .map(|[a, b]| format!("{} = {}", thread(*a), thread(*b)))
            .collect();
        if !pairs.is_empty() {
            writeln!(out, "threads (A = B): {}", pairs.join(", "))?;
        }
        if s.skipped != [0, 0] {
            writeln!(
                out,
                "not compared (other threads): A {}, B {} instructions",
                s.skipped[0], s.skipped[1]
            )?;
        }
        writeln!(
            out,
            "compared {} instructions in lockstep: {} equal, {} divergent",
            s.compared,
            s.equal,
            s.compared.saturating_sub(s.equal)
        )?;
        if s.is_equal() {
            return writeln!(out, "the traces are equal");
        }
        let k = &s.kinds;
        writeln!(
            out,
            "{} divergent region(s): pc {}, opcode {}, regs {}, mem {}; run by A only: {}, by B only: {} instructions",
            s.regions, k.pc, k.opcode, k.regs, k.mem, s.a_only, s.b_only
        )?;
        if let Some(first) = &s.first {
            writeln!(out)?;
            write!(out, "first divergence: ")?;
            self.region(out, first)?;
            self.detail(out, first)?;
        }
        if let Some(c) = &s.context {
            self.context(out, c)?;
        }
        if listed.len() > 1 || more > 0 {
            writeln!(out)?;
            writeln!(out, "regions:")?;
            for r in listed {
                write!(out, "  ")?;
                self.region(out, r)?;
            }
            if more > 0 {
                writeln!(out, "  … and {more} more (--json lists them all)")?;
            }
        }
        Ok(())
    }

    /// `regs at A 5..6, B 5..6 (thread 7 = 7)`.
    fn region(&self, out: &mut dyn Write, r: &Region) -> std::io::Result<()> {
        let kind = serde_json::to_value(r.kind)
            .ok()
            .and_then(|v| v.as_str().map(str::to_owned))
            .unwrap_or_default();
        writeln!(
            out,
            "{kind} at A {}, B {} (thread {} = {})",
            span(r.a_start, r.a_end),
            span(r.b_start, r.b_end),
            thread(r.first.a_thread),
            thread(r.first.b_thread)
        )
    }

    /// What differs at the first instruction of `r`.
    fn detail(&self, out: &mut dyn Write, r: &Region) -> std::io::Result<()> {
        let f = &r.first;
        let pc = |p: Option<diff::Hex>| p.map_or_else(|| "(none)".to_owned(), |p| p.to_string());
        writeln!(out, "  pc: A {}, B {}", pc(f.a_pc), pc(f.b_pc))?;
        if let (Some(a), Some(b)) = (&f.a_opcode, &f.b_opcode) {
            writeln!(out, "  opcode: A {a}, B {b}")?;
        }
        for reg in &f.regs {
            writeln!(out, "  {}: A {}, B {}", reg.name, reg.a, reg.b)?;
        }
        if let Some(m) = &f.mem {
            let v = |x: &Option<String>| x.clone().unwrap_or_else(|| "-".into());
            let addr = |x: Option<diff::Hex>| x.map_or_else(|| "-".to_owned(), |a| a.to_string());
            writeln!(
                out,
                "  memory access {} (A has {}, B {}): A {} old {} new {}, B {} old {} new {}",
                m.index,
                m.a_count,
                m.b_count,
                addr(m.a_addr),
                v(&m.a_old),
                v(&m.a_new),
                addr(m.b_addr),
                v(&m.b_old),
                v(&m.b_new)
            )?;
        }
        Ok(())
    }

    /// The context lines, A and B side by side.
    fn context(&self, out: &mut dyn Write, c: &diff::Context) -> std::io::Result<()> {
        let cells = |lines: &[Line]| -> Vec<String> {
            lines
                .iter()
                .map(|l| {
                    let text = self
                        .disasm
                        .and_then(|isa| trace_registry::disasm::disassemble(isa, l.pc.0, &l.bytes))
                        .unwrap_or_else(|| l.opcode.clone());
                    format!("{:>8} {:<14} {text}", l.i, l.pc.to_string())
                })
                .collect()
        };
        let (a, b) = (cells(&c.a), cells(&c.b));
        let width = a
            .iter()
            .map(|s| s.chars().count())
            .max()
            .unwrap_or(0)
            .max(20);
        writeln!(out)?;
        writeln!(out, "  {:<width$}   B", "A")?;
        for k in 0..a.len().max(b.len()) {
            let mark = if k == c.before { '>' } else { ' ' };
            let left = a.get(k).map_or("", String::as_str);
            let right = b.get(k).map_or("", String::as_str);
            writeln!(out, "{mark} {left:<width$} | {right}")?;
        }
        Ok(())
    }
}

/// `5..9`, or `at 5` for an empty side.
fn span(start: u64, end: u64) -> String {
    if start == end {
        format!("none (at {start})")
    } else {
        format!("{start}..{end}")
    }
}

fn thread(t: Option<u64>) -> String {
    t.map_or_else(|| "none".to_owned(), |t| t.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_thread_pairs_rebases_and_windows() {
        assert_eq!(thread_pair("0x10:7"), Ok((16, 7)));
        assert!(thread_pair("5").is_err());
        assert_eq!(
            rebase("0x400000:0x7ff6_0000"),
            Ok(Rebase {
                a_base: 0x40_0000,
                b_base: 0x7ff6_0000,
                size: DEFAULT_REBASE_SIZE
            })
        );
        assert_eq!(rebase("1:2:3").map(|r| r.size), Ok(3));
        assert!(rebase("1").is_err());
        assert!(rebase("1:2:3:4").is_err());
        assert!(rebase("1:2:0").is_err());
        assert!(rebase("x:2").is_err());
        assert!(window("15").is_err());
        assert_eq!(window("16"), Ok(16));
        assert_eq!(window("2M"), Ok(2_000_000));
        assert!(window("-1").unwrap_err().contains("must be ≥ 0"));
    }
}
