//! The expander of `(M*…)` repeats and `<key>` dictionary references (specification
//! sections 3.7.1.2 and 3.7.1.3).
//!
//! A sequence string is first *compiled* into a small token list ([`Program`]): the syntax
//! is checked (every error has its character position), dictionary keys are resolved, and
//! repeats that can produce no character (`(0*…)`, `(1000*)`) are dropped. Then an
//! [`Expander`] walks the tokens with a stack of frames and yields runs of modified Base64
//! characters **lazily**: memory is O(nesting depth), whatever the repeat counts, so
//! `(1000000000*(1000000000*A))` costs nothing until it is read.
//!
//! Handling of the open points of the specification (`specs/notes/dcfg-notes.md` §7):
//! - `M` is decimal, may be 0 (the repeat then produces nothing) and must fit in 64 bits;
//! - repeats nest to any depth up to [`MAX_NESTING`], references may appear inside repeats
//!   and inside dictionary values; a reference cycle is an error naming the cycle, even if
//!   the entries are never used;
//! - ASCII whitespace is skipped (not inside `(M*`); any other byte outside the alphabet and
//!   `( ) * < >` is an error;
//! - dictionary keys use the Base64 alphabet; a missing key is an error.
//!
//! ```
//! use dcfg_trace::expand::{Dictionary, expand_to_string};
//! let dict = Dictionary::new(0, [("a", "xy(2*z)")].map(|(k, v)| (k.to_owned(), v.as_bytes().to_vec(), 0))).unwrap();
//! assert_eq!(expand_to_string(b"A(4*BC)D", &dict, 100).unwrap(), "ABCBCBCBCD");
//! assert_eq!(expand_to_string(b"(2*<a>)", &dict, 100).unwrap(), "xyzzxyzz");
//! ```

use std::collections::HashMap;

use trace_core::Offset;

use crate::base64::{Runs, value};
use crate::error::{Context, Error, SequenceErrorKind};
use crate::limits::MAX_NESTING;

/// One token of a compiled sequence.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Token {
    /// Characters `text[start..end]`.
    Lit { start: u32, end: u32 },
    /// The next `len` tokens, `count` times.
    Rep { count: u64, len: u32, size: u64 },
    /// `count` copies of a `unit`-character literal, stored `k` times in a row at
    /// `text[start..]`, yielded `k` copies per run.
    RepLit {
        count: u64,
        start: u32,
        unit: u32,
        k: u32,
    },
    /// Dictionary entry `d`.
    Ref(u32),
}

/// A compiled sequence: checked, with references resolved and empty repeats removed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Program {
    tokens: Vec<Token>,
    text: Vec<u8>,
    /// Frames needed to expand it (1 + nesting, through references).
    depth: u32,
}

impl Program {
    /// Whether it expands to nothing.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.tokens.is_empty()
    }

    /// The whole program if it is one plain run of characters (the common case).
    #[must_use]
    pub fn as_plain(&self) -> Option<&[u8]> {
        match self.tokens.as_slice() {
            [Token::Lit { start, end }] => self.text.get(*start as usize..*end as usize),
            _ => None,
        }
    }
}

/// Longest literal a repeat is amplified for, and the size of an amplified run.
const AMP_UNIT: usize = 256;
const AMP_RUN: usize = 512;

/// Resolves `<key>` while compiling.
trait Keys {
    /// Index, productive?, depth of `key`.
    fn lookup(&self, key: &[u8]) -> Option<(u32, bool, u32)>;
}

struct Compiler<'k, K> {
    keys: &'k K,
    prog: Program,
    refs: Vec<u32>,
    /// Open repeats: (token index, source position).
    open: Vec<(usize, usize)>,
    amp_budget: usize,
    /// The last token is a literal that the next character may extend.
    lit_open: bool,
}

impl<K: Keys> Compiler<'_, K> {
    fn push_char(&mut self, c: u8) {
        let at = self.prog.text.len() as u32;
        self.prog.text.push(c);
        if let (true, Some(Token::Lit { end, .. })) = (self.lit_open, self.prog.tokens.last_mut())
            && *end == at
        {
            *end = at.wrapping_add(1);
            return;
        }
        self.prog.tokens.push(Token::Lit {
            start: at,
            end: at.wrapping_add(1),
        });
        self.lit_open = true;
    }

    fn depth_here(&self) -> u32 {
        // The root frame plus one per open repeat.
        (self.open.len() as u32).wrapping_add(1)
    }

    fn close(&mut self, pos: usize) -> Result<(), (SequenceErrorKind, usize)> {
        let Some((at, _)) = self.open.pop() else {
            return Err((SequenceErrorKind::UnmatchedClose, pos));
        };
        let Some(&Token::Rep { count, .. }) = self.prog.tokens.get(at) else {
            return Err((SequenceErrorKind::UnmatchedClose, pos));
        };
        let body = self.prog.tokens.len().saturating_sub(at.saturating_add(1));
        if count == 0 || body == 0 {
            // Produces nothing: drop it (and its body).
            self.prog.tokens.truncate(at);
            return Ok(());
        }
        if count == 1 {
            self.prog.tokens.remove(at);
            return Ok(());
        }
        // A body that expands to at most AMP_UNIT characters (and has no reference) is
        // expanded once and stored k times in a row, so the expander yields long runs.
        let body_tokens = self
            .prog
            .tokens
            .get(at.saturating_add(1)..)
            .unwrap_or_default();
        let size = self.size_of(body_tokens);
        let amp_bytes = AMP_RUN.saturating_add(AMP_UNIT);
        if size <= AMP_UNIT as u64
            && amp_bytes <= self.amp_budget
            && self.prog.text.len() < (u32::MAX as usize) / 2
        {
            let mut unit = Vec::with_capacity(AMP_UNIT);
            if self.expand_small(body_tokens, &mut unit) && !unit.is_empty() {
                let k = AMP_RUN
                    .checked_div(unit.len())
                    .unwrap_or(1)
                    .max(1)
                    .min(usize::try_from(count).unwrap_or(usize::MAX));
                self.amp_budget = self.amp_budget.saturating_sub(unit.len().saturating_mul(k));
                let new_start = self.prog.text.len() as u32;
                for _ in 0..k {
                    self.prog.text.extend_from_slice(&unit);
                }
                self.prog.tokens.truncate(at);
                self.prog.tokens.push(Token::RepLit {
                    count,
                    start: new_start,
                    unit: unit.len() as u32,
                    k: k as u32,
                });
                return Ok(());
            }
        }
        if let Some(Token::Rep { len, size: sz, .. }) = self.prog.tokens.get_mut(at) {
            *len = body as u32;
            *sz = size.saturating_mul(count);
        }
        Ok(())
    }

    /// Characters a token list expands to (saturating; `u64::MAX` with a reference).
    fn size_of(&self, tokens: &[Token]) -> u64 {
        let mut total = 0u64;
        let mut i = 0usize;
        while let Some(&t) = tokens.get(i) {
            i = i.saturating_add(1);
            let n = match t {
                Token::Lit { start, end } => u64::from(end.saturating_sub(start)),
                Token::RepLit { count, unit, .. } => count.saturating_mul(u64::from(unit)),
                Token::Rep { len, size, .. } => {
                    i = i.saturating_add(len as usize);
                    size
                }
                Token::Ref(_) => u64::MAX,
            };
            total = total.saturating_add(n);
        }
        total
    }

    /// Appends the expansion of a small token list (see [`Self::size_of`]) to `out`.
    fn expand_small(&self, tokens: &[Token], out: &mut Vec<u8>) -> bool {
        let text = &self.prog.text;
        let mut i = 0usize;
        while let Some(&t) = tokens.get(i) {
            i = i.saturating_add(1);
            if out.len() > AMP_UNIT {
                return false;
            }
            match t {
                Token::Lit { start, end } => {
                    out.extend_from_slice(
                        text.get(start as usize..end as usize).unwrap_or_default(),
                    );
                }
                Token::RepLit {
                    count, start, unit, ..
                } => {
                    let u = text
                        .get(start as usize..(start as usize).saturating_add(unit as usize))
                        .unwrap_or_default();
                    for _ in 0..count.min(AMP_UNIT as u64) {
                        out.extend_from_slice(u);
                    }
                }
                Token::Rep { count, len, .. } => {
                    let body = tokens
                        .get(i..i.saturating_add(len as usize))
                        .unwrap_or_default();
                    i = i.saturating_add(len as usize);
                    let mut inner = Vec::new();
                    if !self.expand_small(body, &mut inner) {
                        return false;
                    }
                    for _ in 0..count.min(AMP_UNIT as u64) {
                        out.extend_from_slice(&inner);
                        if out.len() > AMP_UNIT {
                            return false;
                        }
                    }
                }
                Token::Ref(_) => return false,
            }
        }
        out.len() <= AMP_UNIT
    }

    fn run(mut self, src: &[u8]) -> Result<(Program, Vec<u32>), (SequenceErrorKind, usize)> {
        let mut i = 0usize;
        self.prog.depth = 1;
        while let Some(&c) = src.get(i) {
            if value(c).is_some() {
                self.push_char(c);
                i = i.wrapping_add(1);
                continue;
            }
            self.lit_open = false;
            match c {
                b'(' => {
                    let digits_start = i.wrapping_add(1);
                    let mut j = digits_start;
                    let mut count: u64 = 0;
                    while let Some(&d) = src.get(j).filter(|d| d.is_ascii_digit()) {
                        count = count
                            .checked_mul(10)
                            .and_then(|v| v.checked_add(u64::from(d.wrapping_sub(b'0'))))
                            .ok_or((SequenceErrorKind::CountOverflow, digits_start))?;
                        j = j.wrapping_add(1);
                    }
                    match src.get(j) {
                        Some(b'*') if j > digits_start => {}
                        Some(b'*') => return Err((SequenceErrorKind::EmptyCount, i)),
                        _ => return Err((SequenceErrorKind::MissingStar, j)),
                    }
                    if self.open.len() >= MAX_NESTING {
                        return Err((SequenceErrorKind::TooDeep, i));
                    }
                    self.open.push((self.prog.tokens.len(), i));
                    self.prog.tokens.push(Token::Rep {
                        count,
                        len: 0,
                        size: 0,
                    });
                    self.prog.depth = self.prog.depth.max(self.depth_here());
                    i = j.wrapping_add(1);
                }
                b')' => {
                    self.close(i)?;
                    i = i.wrapping_add(1);
                }
                b'<' => {
                    let key_start = i.wrapping_add(1);
                    let rest = src.get(key_start..).unwrap_or_default();
                    let Some(len) = rest.iter().position(|&b| b == b'>') else {
                        return Err((SequenceErrorKind::UnclosedKey, i));
                    };
                    let key = rest.get(..len).unwrap_or_default();
                    if key.is_empty() || key.iter().any(|&b| value(b).is_none()) {
                        return Err((
                            SequenceErrorKind::BadKey(String::from_utf8_lossy(key).into_owned()),
                            key_start,
                        ));
                    }
                    let Some((d, productive, depth)) = self.keys.lookup(key) else {
                        return Err((
                            SequenceErrorKind::UnknownKey(
                                String::from_utf8_lossy(key).into_owned(),
                            ),
                            key_start,
                        ));
                    };
                    self.refs.push(d);
                    let total = self.depth_here().saturating_add(depth);
                    if total as usize > MAX_NESTING {
                        return Err((SequenceErrorKind::TooDeep, i));
                    }
                    self.prog.depth = self.prog.depth.max(total);
                    if productive {
                        self.prog.tokens.push(Token::Ref(d));
                    }
                    i = key_start.saturating_add(len).saturating_add(1);
                }
                c if c.is_ascii_whitespace() => i = i.wrapping_add(1),
                c => return Err((SequenceErrorKind::BadCharacter(c), i)),
            }
        }
        if let Some(&(_, pos)) = self.open.last() {
            return Err((SequenceErrorKind::UnclosedRepeat, pos));
        }
        Ok((self.prog, self.refs))
    }
}

fn compile_with<K: Keys>(
    src: &[u8],
    keys: &K,
) -> Result<(Program, Vec<u32>), (SequenceErrorKind, usize)> {
    let text_cap = src.len().min(1 << 20);
    Compiler {
        keys,
        prog: Program {
            tokens: Vec::new(),
            text: Vec::with_capacity(text_cap),
            depth: 1,
        },
        refs: Vec::new(),
        open: Vec::new(),
        amp_budget: src.len().saturating_mul(4).saturating_add(1 << 16),
        lit_open: false,
    }
    .run(src)
}

/// A process's `STRING_DICTIONARY`, compiled and checked for cycles.
#[derive(Clone, Debug, Default)]
pub struct Dictionary {
    keys: Vec<String>,
    values: Vec<Vec<u8>>,
    index: HashMap<Vec<u8>, u32>,
    programs: Vec<Program>,
}

struct DictKeys<'d> {
    index: &'d HashMap<Vec<u8>, u32>,
    /// (productive, depth) of the entries compiled so far; `None` while not known.
    known: &'d [Option<(bool, u32)>],
}

impl Keys for DictKeys<'_> {
    fn lookup(&self, key: &[u8]) -> Option<(u32, bool, u32)> {
        let d = *self.index.get(key)?;
        let (productive, depth) = self
            .known
            .get(d as usize)
            .copied()
            .flatten()
            .unwrap_or((true, 1));
        Some((d, productive, depth))
    }
}

impl Dictionary {
    /// Compiles the entries `(key, value, offset of the value)` of process `pid`.
    ///
    /// # Errors
    ///
    /// A bad key, a duplicate key, a syntax error in a value (with its position), a
    /// reference to a missing key, a reference cycle (naming it), or nesting deeper than
    /// [`MAX_NESTING`].
    pub fn new(
        pid: u64,
        entries: impl IntoIterator<Item = (String, Vec<u8>, u64)>,
    ) -> Result<Dictionary, Error> {
        let mut d = Dictionary::default();
        let mut offsets = Vec::new();
        for (key, value, offset) in entries {
            if key.is_empty() || key.bytes().any(|b| self::value(b).is_none()) {
                return Err(Error::structure(
                    offset,
                    format!(
                        "bad STRING_DICTIONARY key {key:?} in process {pid}: keys use A-Z a-z 0-9 + -"
                    ),
                ));
            }
            let at = d.keys.len() as u32;
            if d.index.insert(key.as_bytes().to_vec(), at).is_some() {
                return Err(Error::structure(
                    offset,
                    format!("duplicate STRING_DICTIONARY key {key:?} in process {pid}"),
                ));
            }
            d.keys.push(key);
            d.values.push(value);
            offsets.push(offset);
        }
        let n = d.keys.len();
        let err = |kind, pos: usize, key: usize| {
            let off = offsets.get(key).copied().unwrap_or(0);
            Error::Sequence {
                kind,
                context: Context::Dictionary {
                    pid,
                    key: d.keys.get(key).cloned().unwrap_or_default(),
                },
                position: pos as u64,
                offset: Offset(off.saturating_add(pos as u64)),
            }
        };
        // Pass 1: syntax and the reference graph.
        let unknown = vec![None; n];
        let mut graph: Vec<Vec<u32>> = Vec::with_capacity(n);
        for (i, v) in d.values.iter().enumerate() {
            let keys = DictKeys {
                index: &d.index,
                known: &unknown,
            };
            let (_, refs) = compile_with(v, &keys).map_err(|(k, p)| err(k, p, i))?;
            graph.push(refs);
        }
        // Cycles, and a post-order (references before their users).
        let order = post_order(&graph).map_err(|cycle| {
            let names: Vec<String> = cycle
                .iter()
                .map(|&k| format!("<{}>", d.keys.get(k as usize).map_or("?", String::as_str)))
                .collect();
            Error::DictionaryCycle {
                pid,
                cycle: names.join(" -> "),
                offset: Offset(
                    cycle
                        .first()
                        .and_then(|&k| offsets.get(k as usize))
                        .copied()
                        .unwrap_or(0),
                ),
            }
        })?;
        // Pass 2: compile in post-order, pruning references to empty entries.
        let mut known: Vec<Option<(bool, u32)>> = vec![None; n];
        let mut programs: Vec<Option<Program>> = vec![None; n];
        for &i in &order {
            let i = i as usize;
            let keys = DictKeys {
                index: &d.index,
                known: &known,
            };
            let value = d.values.get(i).map_or(&[][..], Vec::as_slice);
            let (prog, _) = compile_with(value, &keys).map_err(|(k, p)| err(k, p, i))?;
            if let Some(slot) = known.get_mut(i) {
                *slot = Some((!prog.is_empty(), prog.depth));
            }
            if let Some(slot) = programs.get_mut(i) {
                *slot = Some(prog);
            }
        }
        d.programs = programs
            .into_iter()
            .map(Option::unwrap_or_default)
            .collect();
        Ok(d)
    }

    /// Compiles a sequence string of `context` that starts at absolute `offset`.
    ///
    /// # Errors
    ///
    /// A syntax error with its position, or an unknown key.
    pub fn compile(&self, src: &[u8], context: &Context, offset: u64) -> Result<Program, Error> {
        let known: Vec<Option<(bool, u32)>> = self
            .programs
            .iter()
            .map(|p| Some((!p.is_empty(), p.depth)))
            .collect();
        let keys = DictKeys {
            index: &self.index,
            known: &known,
        };
        compile_with(src, &keys)
            .map(|(p, _)| p)
            .map_err(|(kind, pos)| Error::Sequence {
                kind,
                context: context.clone(),
                position: pos as u64,
                offset: Offset(offset.saturating_add(pos as u64)),
            })
    }

    /// Number of entries.
    #[must_use]
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    /// Whether it has no entry.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// The entries as written, in file order.
    pub fn entries(&self) -> impl ExactSizeIterator<Item = (&str, &[u8])> {
        self.keys
            .iter()
            .zip(&self.values)
            .map(|(k, v)| (k.as_str(), v.as_slice()))
    }

    /// Total bytes of the keys and values.
    #[must_use]
    pub fn byte_len(&self) -> u64 {
        self.keys
            .iter()
            .zip(&self.values)
            .map(|(k, v)| (k.len() as u64).saturating_add(v.len() as u64))
            .fold(0, u64::saturating_add)
    }
}

/// Post-order of a reference graph, or a cycle (keys in order, first repeated at the end).
fn post_order(graph: &[Vec<u32>]) -> Result<Vec<u32>, Vec<u32>> {
    #[derive(Clone, Copy, PartialEq)]
    enum Mark {
        New,
        Active,
        Done,
    }
    let mut mark = vec![Mark::New; graph.len()];
    let mut order = Vec::with_capacity(graph.len());
    for root in 0..graph.len() {
        if mark.get(root) != Some(&Mark::New) {
            continue;
        }
        // (node, next child index)
        let mut stack: Vec<(usize, usize)> = vec![(root, 0)];
        if let Some(m) = mark.get_mut(root) {
            *m = Mark::Active;
        }
        while let Some(&mut (node, ref mut child)) = stack.last_mut() {
            let next = graph.get(node).and_then(|c| c.get(*child)).copied();
            *child = child.wrapping_add(1);
            match next {
                None => {
                    if let Some(m) = mark.get_mut(node) {
                        *m = Mark::Done;
                    }
                    order.push(node as u32);
                    stack.pop();
                }
                Some(c) => match mark.get(c as usize) {
                    Some(Mark::New) => {
                        if let Some(m) = mark.get_mut(c as usize) {
                            *m = Mark::Active;
                        }
                        stack.push((c as usize, 0));
                    }
                    Some(Mark::Active) => {
                        let from = stack
                            .iter()
                            .position(|&(n, _)| n == c as usize)
                            .unwrap_or(0);
                        let mut cycle: Vec<u32> = stack
                            .get(from..)
                            .unwrap_or_default()
                            .iter()
                            .map(|&(n, _)| n as u32)
                            .collect();
                        cycle.push(c);
                        return Err(cycle);
                    }
                    _ => {}
                },
            }
        }
    }
    Ok(order)
}

#[derive(Clone, Copy, Debug)]
enum Frame<'p> {
    Seq {
        prog: &'p Program,
        pc: usize,
        start: usize,
        end: usize,
        remaining: u64,
    },
    Amp {
        run: &'p [u8],
        full: u64,
        tail: &'p [u8],
    },
}

/// Lazily expands a compiled sequence into runs of modified Base64 characters.
#[derive(Clone, Debug)]
pub struct Expander<'p> {
    dict: &'p [Program],
    stack: Vec<Frame<'p>>,
}

impl<'p> Expander<'p> {
    /// An expander of `prog`, whose references point into `dict`.
    #[must_use]
    pub fn new(prog: &'p Program, dict: &'p Dictionary) -> Self {
        let mut stack =
            Vec::with_capacity((prog.depth as usize).min(MAX_NESTING).saturating_add(2));
        stack.push(Frame::Seq {
            prog,
            pc: 0,
            start: 0,
            end: prog.tokens.len(),
            remaining: 1,
        });
        Expander {
            dict: &dict.programs,
            stack,
        }
    }
}

impl<'p> Runs<'p> for Expander<'p> {
    fn next_run(&mut self) -> Option<&'p [u8]> {
        loop {
            let push = match self.stack.last_mut()? {
                Frame::Amp { run, full, tail } => {
                    if *full > 0 {
                        *full = full.wrapping_sub(1);
                        return Some(run);
                    }
                    let t = *tail;
                    self.stack.pop();
                    if !t.is_empty() {
                        return Some(t);
                    }
                    continue;
                }
                Frame::Seq {
                    prog,
                    pc,
                    start,
                    end,
                    remaining,
                } => {
                    let prog: &'p Program = prog;
                    if *pc >= *end {
                        *remaining = remaining.saturating_sub(1);
                        if *remaining > 0 {
                            *pc = *start;
                        } else {
                            self.stack.pop();
                        }
                        continue;
                    }
                    let tok = prog.tokens.get(*pc).copied();
                    *pc = pc.wrapping_add(1);
                    match tok? {
                        Token::Lit { start, end } => {
                            return prog.text.get(start as usize..end as usize);
                        }
                        Token::Rep { count, len, .. } => {
                            let body = *pc;
                            *pc = pc.saturating_add(len as usize);
                            Frame::Seq {
                                prog,
                                pc: body,
                                start: body,
                                end: *pc,
                                remaining: count,
                            }
                        }
                        Token::RepLit {
                            count,
                            start,
                            unit,
                            k,
                        } => {
                            let start = start as usize;
                            let k64 = u64::from(k.max(1));
                            let tail_units = count.checked_rem(k64).unwrap_or(0) as usize;
                            let run_len = (unit as usize).saturating_mul(k as usize);
                            let tail_len = (unit as usize).saturating_mul(tail_units);
                            Frame::Amp {
                                run: prog.text.get(start..start.saturating_add(run_len))?,
                                full: count.checked_div(k64).unwrap_or(0),
                                tail: prog.text.get(start..start.saturating_add(tail_len))?,
                            }
                        }
                        Token::Ref(d) => {
                            let p = self.dict.get(d as usize)?;
                            Frame::Seq {
                                prog: p,
                                pc: 0,
                                start: 0,
                                end: p.tokens.len(),
                                remaining: 1,
                            }
                        }
                    }
                }
            };
            self.stack.push(push);
        }
    }
}

/// Expands `seq` with `dict` into a string of at most `limit` characters (for tests, tools
/// and the documentation; decoding never materialises the expansion).
///
/// # Errors
///
/// A syntax error of `seq`, with [`Context::Standalone`] and offsets relative to `seq`.
pub fn expand_to_string(seq: &[u8], dict: &Dictionary, limit: usize) -> Result<String, Error> {
    let prog = dict.compile(seq, &Context::Standalone, 0)?;
    let mut ex = Expander::new(&prog, dict);
    let mut out = String::new();
    while out.len() < limit {
        let Some(run) = ex.next_run() else { break };
        let take = run.len().min(limit.saturating_sub(out.len()));
        out.extend(run.iter().take(take).map(|&c| char::from(c)));
    }
    Ok(out)
}

/// Counts the characters `prog` expands to, stopping at `limit` (for the benchmarks and
/// tools); returns the count and a checksum (the sum of the character bytes).
#[must_use]
pub fn count_chars(prog: &Program, dict: &Dictionary, limit: u64) -> (u64, u64) {
    let mut ex = Expander::new(prog, dict);
    let (mut n, mut sum) = (0u64, 0u64);
    while n < limit {
        let Some(run) = ex.next_run() else { break };
        n = n.saturating_add(run.len() as u64);
        // Every character is read (a byte sum the compiler vectorises): this measures the
        // expander, not the Base64 stage after it.
        sum = run.iter().fold(sum, |s, &c| s.wrapping_add(u64::from(c)));
    }
    (n, sum)
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

    fn dict(entries: &[(&str, &str)]) -> Result<Dictionary, Error> {
        Dictionary::new(
            7,
            entries
                .iter()
                .map(|(k, v)| ((*k).to_owned(), v.as_bytes().to_vec(), 100)),
        )
    }

    fn ex(seq: &str, d: &Dictionary) -> String {
        expand_to_string(seq.as_bytes(), d, 1 << 20).unwrap()
    }

    /// The STRING_DICTIONARY example of section 3.7.1.3.
    fn spec_dict() -> Dictionary {
        dict(&[
            ("a", "bks2hD7kB+KDk87(6*AB)Aw3ABD9"),
            ("b", "KkDk123(42*(25*a))45690D<a>7Fjdkpm"),
        ])
        .unwrap()
    }

    #[test]
    fn spec_repeat_examples() {
        let d = Dictionary::default();
        assert_eq!(ex("A(4*BC)D", &d), "ABCBCBCBCD");
        assert_eq!(ex("123(2*(6*a)b)456", &d), "123aaaaaabaaaaaab456");
    }

    #[test]
    fn spec_dictionary_examples() {
        let d = spec_dict();
        let a = "bks2hD7kB+KDk87ABABABABABABAw3ABD9";
        assert_eq!(ex("A<a>B", &d), format!("A{a}B"));
        assert_eq!(ex("(2*A<a>B)", &d), format!("A{a}BA{a}B"));
        let b = format!("KkDk123{}45690D{a}7Fjdkpm", "a".repeat(42 * 25));
        assert_eq!(ex("A<b>B", &d), format!("A{b}B"));
    }

    #[test]
    fn lazy_bomb_costs_nothing_until_read() {
        let d = Dictionary::default();
        let prog = d
            .compile(b"(1000000000*(1000000000*A))", &Context::Standalone, 0)
            .unwrap();
        let mut e = Expander::new(&prog, &d);
        let mut n = 0usize;
        for _ in 0..1000 {
            n += e.next_run().unwrap().len();
        }
        assert!(n >= 1000);
        assert!(e.stack.len() <= 3);
        let (n, _) = count_chars(&prog, &d, 10_000_000);
        assert!(n >= 10_000_000);
    }

    #[test]
    fn empty_repeats_are_dropped() {
        let d = Dictionary::default();
        for s in ["(0*AB)", "(1000000000000*)", "(99*(0*A)(2* ))", " "] {
            let p = d.compile(s.as_bytes(), &Context::Standalone, 0).unwrap();
            assert!(p.is_empty(), "{s}");
        }
        assert_eq!(ex("A(0*B)C(1*D)(3*)", &d), "ACD");
        let d = dict(&[("e", "(0*A)"), ("f", "<e><e>")]).unwrap();
        assert_eq!(ex("(18446744073709551615*<f>)X", &d), "X");
    }

    #[test]
    fn amplified_runs_keep_counts_exact() {
        let d = Dictionary::default();
        for (count, unit) in [
            (2u64, "AB"),
            (257, "ABC"),
            (1000, "A"),
            (513, "Q"),
            (7, "0123456789"),
        ] {
            let s = format!("x({count}*{unit})y");
            let want = format!("x{}y", unit.repeat(count as usize));
            assert_eq!(ex(&s, &d), want, "{s}");
        }
        // An amplified repeat inside a repeat, and whitespace.
        assert_eq!(ex("(3*(5*AB) C\n)", &d), "ABABABABABC".repeat(3));
    }

    #[test]
    fn syntax_errors_have_positions() {
        let d = spec_dict();
        let cases: &[(&str, SequenceErrorKind, u64)] = &[
            ("AB(3*C", SequenceErrorKind::UnclosedRepeat, 2),
            ("ABC)", SequenceErrorKind::UnmatchedClose, 3),
            ("A(3C)", SequenceErrorKind::MissingStar, 3),
            ("A(*C)", SequenceErrorKind::EmptyCount, 1),
            (
                "(99999999999999999999*A)",
                SequenceErrorKind::CountOverflow,
                1,
            ),
            ("A<ab", SequenceErrorKind::UnclosedKey, 1),
            ("A<>", SequenceErrorKind::BadKey(String::new()), 2),
            ("A<zz>", SequenceErrorKind::UnknownKey("zz".into()), 2),
            ("AB/C", SequenceErrorKind::BadCharacter(b'/'), 2),
            ("A=", SequenceErrorKind::BadCharacter(b'='), 1),
        ];
        for (s, kind, pos) in cases {
            let ctx = Context::Chunk {
                pid: 1,
                thread: 0,
                chunk: 4,
            };
            match d.compile(s.as_bytes(), &ctx, 0x1000) {
                Err(Error::Sequence {
                    kind: k,
                    position,
                    offset,
                    context,
                }) => {
                    assert_eq!((&k, position), (kind, *pos), "{s}");
                    assert_eq!(offset.0, 0x1000 + pos);
                    assert_eq!(context, ctx);
                }
                other => panic!("{s}: {other:?}"),
            }
        }
        let e = d
            .compile(
                b"A<zz>",
                &Context::Chunk {
                    pid: 1,
                    thread: 0,
                    chunk: 4,
                },
                0x10,
            )
            .unwrap_err();
        assert_eq!(
            e.to_string(),
            "unknown dictionary key \"zz\" at position 2 of process 1 thread 0 chunk 4 at offset 0x12"
        );
    }

    /// A naive reference: expands the string by the specification's rewriting rules.
    fn naive(s: &[u8], dict: &[(&str, &str)]) -> String {
        let mut out = String::new();
        let mut i = 0;
        while i < s.len() {
            match s[i] {
                b'(' => {
                    let star = i + s[i..].iter().position(|&b| b == b'*').unwrap();
                    let m: usize = std::str::from_utf8(&s[i + 1..star])
                        .unwrap()
                        .parse()
                        .unwrap();
                    let mut depth = 1;
                    let mut j = star + 1;
                    while depth > 0 {
                        match s[j] {
                            b'(' => depth += 1,
                            b')' => depth -= 1,
                            _ => {}
                        }
                        j += 1;
                    }
                    let body = naive(&s[star + 1..j - 1], dict);
                    out.push_str(&body.repeat(m));
                    i = j;
                }
                b'<' => {
                    let end = i + s[i..].iter().position(|&b| b == b'>').unwrap();
                    let key = std::str::from_utf8(&s[i + 1..end]).unwrap();
                    let v = dict.iter().find(|(k, _)| *k == key).unwrap().1;
                    out.push_str(&naive(v.as_bytes(), dict));
                    i = end + 1;
                }
                c => {
                    out.push(char::from(c));
                    i += 1;
                }
            }
        }
        out
    }

    /// Builds a random well-formed sequence from bytes.
    fn build(bytes: &mut impl Iterator<Item = u8>, depth: u32, out: &mut String) {
        while let Some(b) = bytes.next() {
            match b % 10 {
                0 if depth < 5 => {
                    let m = bytes.next().unwrap_or(0) % 5;
                    out.push_str(&format!("({m}*"));
                    build(bytes, depth + 1, out);
                    out.push(')');
                }
                1 if depth > 0 => return,
                2 => out.push_str(["<a>", "<b>"][usize::from(b / 10 % 2)]),
                _ => out.push(char::from(crate::base64::char_of(b))),
            }
        }
    }

    quickcheck::quickcheck! {
        fn expansion_matches_the_naive_rewriting(bytes: Vec<u8>) -> bool {
            let entries = [("a", "xy(3*z)"), ("b", "(2*<a>Q)(0*R)")];
            let d = dict(&entries).unwrap();
            let mut s = String::new();
            build(&mut bytes.into_iter(), 0, &mut s);
            let want = naive(s.as_bytes(), &entries);
            let got = expand_to_string(s.as_bytes(), &d, 1 << 24).unwrap();
            got == want
        }
    }

    #[test]
    fn cycles_are_named() {
        let e = dict(&[("a", "A<b>"), ("b", "(2*<c>)"), ("c", "<a>")]).unwrap_err();
        assert_eq!(
            e.to_string(),
            "STRING_DICTIONARY of process 7 has a reference cycle <a> -> <b> -> <c> -> <a> at offset 0x64"
        );
        let e = dict(&[("s", "AB<s>")]).unwrap_err();
        assert!(e.to_string().contains("<s> -> <s>"), "{e}");
        // Errors inside values name the entry.
        let e = dict(&[("a", "AB"), ("k", "A(2*")]).unwrap_err();
        assert!(e.to_string().contains("dictionary entry \"k\""), "{e}");
        assert!(dict(&[("a", "A"), ("a", "B")]).is_err());
        assert!(dict(&[("a/", "A")]).is_err());
        // A deep, acyclic chain is fine; too deep is an error, not a stack overflow.
        let n = 5000;
        let entries: Vec<(String, String)> = (0..n)
            .map(|i| {
                (
                    format!("k{i}"),
                    if i + 1 < n {
                        format!("A<k{}>", i + 1)
                    } else {
                        "B".into()
                    },
                )
            })
            .collect();
        let r = Dictionary::new(
            0,
            entries
                .iter()
                .map(|(k, v)| (k.clone(), v.clone().into_bytes(), 0)),
        );
        assert!(
            matches!(
                r,
                Err(Error::Sequence {
                    kind: SequenceErrorKind::TooDeep,
                    ..
                })
            ),
            "{r:?}"
        );
        let entries = &entries[n - 1000..];
        let d = Dictionary::new(
            0,
            entries
                .iter()
                .map(|(k, v)| (k.clone(), v.clone().into_bytes(), 0)),
        )
        .unwrap();
        assert_eq!(
            ex(&format!("<k{}>", n - 1000), &d),
            format!("{}B", "A".repeat(999))
        );
    }
}
