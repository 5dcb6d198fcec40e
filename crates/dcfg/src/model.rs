//! The DCFG model: owned data for everything format 1.00 can hold.
//!
//! The model mirrors the file: a [`Dcfg`] holds the id tables (file names, edge types,
//! special nodes) and the [`Process`]es; a process holds its [`Image`]s (with symbols, source
//! lines, basic blocks and routines with their loops) and its [`Edges`]. Optional sections are
//! `Option`s so that a file without them is written back without them. Every integer is a
//! `u64`, read exactly from a JSON number or a hex string.
//!
//! For navigation (block by id or address, edges of a node, loops of a block, …) build a
//! [`Graph`](crate::Graph) over a process with [`Dcfg::graph`].

use std::fmt;

/// A whole DCFG file.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Dcfg {
    /// `MAJOR_VERSION` (1 for Intel's files, 0 for the QEMU plugin's).
    pub major_version: u64,
    /// `MINOR_VERSION`.
    pub minor_version: u64,
    /// `FILE_NAMES`: image and source file paths by id, if present.
    pub file_names: Option<Vec<FileName>>,
    /// `EDGE_TYPES`: edge-type names by id, if present.
    pub edge_types: Option<Vec<EdgeType>>,
    /// `SPECIAL_NODES`: START / END / UNKNOWN node ids, if present.
    pub special_nodes: Option<Vec<SpecialNode>>,
    /// `PROCESSES` (empty if absent).
    pub processes: Vec<Process>,
}

/// A row of `FILE_NAMES`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FileName {
    /// `FILE_NAME_ID`.
    pub id: u64,
    /// `FILE_NAME`: the full path if known.
    pub name: String,
}

/// A row of `EDGE_TYPES`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EdgeType {
    /// `EDGE_TYPE_ID` (valid only within this file).
    pub id: u64,
    /// `EDGE_TYPE`, e.g. `"FALL_THROUGH"`.
    pub name: String,
}

impl EdgeType {
    /// The predefined kind this name stands for.
    #[must_use]
    pub fn kind(&self) -> EdgeKind {
        EdgeKind::from_name(&self.name)
    }
}

/// A row of `SPECIAL_NODES`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SpecialNode {
    /// `NODE_ID`.
    pub id: u64,
    /// `NODE_NAME`: `"START"`, `"END"` or `"UNKNOWN"`.
    pub name: String,
}

/// A row of `PROCESSES` with its `PROCESS_DATA`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Process {
    /// `PROCESS_ID`: the operating system's pid.
    pub id: u64,
    /// `INSTR_COUNT`: instructions executed over all threads.
    pub instr_count: Option<u64>,
    /// `INSTR_COUNT_PER_THREAD`: instructions per thread, thread 0 first; its length is the
    /// number of threads.
    pub instr_count_per_thread: Option<Vec<u64>>,
    /// `IMAGES`.
    pub images: Option<Vec<Image>>,
    /// `EDGES`.
    pub edges: Option<Edges>,
    /// Whether the row had a `PROCESS_DATA` object at all.
    pub has_data: bool,
}

impl Process {
    /// The images (empty if the table is absent).
    #[must_use]
    pub fn images(&self) -> &[Image] {
        self.images.as_deref().unwrap_or_default()
    }

    /// The number of threads: the length of `INSTR_COUNT_PER_THREAD`, or else the longest
    /// `COUNT_PER_THREAD` of an edge.
    #[must_use]
    pub fn threads(&self) -> usize {
        match &self.instr_count_per_thread {
            Some(v) => v.len(),
            None => self
                .edges
                .as_ref()
                .map_or(0, |e| e.iter().map(|e| e.counts.len()).max().unwrap_or(0)),
        }
    }

    /// Iterates over the edges (none if the table is absent).
    pub fn edges(&self) -> EdgeIter<'_> {
        static EMPTY: Edges = Edges::new();
        self.edges.as_ref().unwrap_or(&EMPTY).iter()
    }

    /// The number of edges.
    #[must_use]
    pub fn edge_count(&self) -> usize {
        self.edges.as_ref().map_or(0, Edges::len)
    }

    /// Iterates over every basic block of every image, with its image.
    pub fn blocks(&self) -> impl Iterator<Item = (&Image, &BasicBlock)> + '_ {
        self.images()
            .iter()
            .flat_map(|i| i.basic_blocks().iter().map(move |b| (i, b)))
    }
}

/// A row of `IMAGES` with its `IMAGE_DATA`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Image {
    /// `IMAGE_ID` (can be 0; the QEMU dialect uses inode numbers).
    pub id: u64,
    /// `LOAD_ADDR`: where the image was loaded.
    pub load_addr: u64,
    /// `SIZE` in bytes from the load address.
    pub size: u64,
    /// Whether the row had an `IMAGE_DATA` object.
    pub has_data: bool,
    /// `FILE_NAME_ID` of the image's path.
    pub file_name_id: Option<u64>,
    /// `SYMBOLS`.
    pub symbols: Option<Symbols>,
    /// `SOURCE_DATA`.
    pub source_data: Option<Vec<SourceLine>>,
    /// `BASIC_BLOCKS`.
    pub basic_blocks: Option<Vec<BasicBlock>>,
    /// `ROUTINES`.
    pub routines: Option<Vec<Routine>>,
}

impl Image {
    /// The basic blocks (empty if the table is absent).
    #[must_use]
    pub fn basic_blocks(&self) -> &[BasicBlock] {
        self.basic_blocks.as_deref().unwrap_or_default()
    }

    /// The routines (empty if the table is absent).
    #[must_use]
    pub fn routines(&self) -> &[Routine] {
        self.routines.as_deref().unwrap_or_default()
    }

    /// The symbols (empty if the table is absent).
    #[must_use]
    pub fn symbols(&self) -> &Symbols {
        static EMPTY: Symbols = Symbols::new();
        self.symbols.as_ref().unwrap_or(&EMPTY)
    }

    /// The source lines (empty if the table is absent).
    #[must_use]
    pub fn source_data(&self) -> &[SourceLine] {
        self.source_data.as_deref().unwrap_or_default()
    }

    /// Whether `addr` (absolute) lies in `[load_addr, load_addr + size)`.
    #[must_use]
    pub fn contains(&self, addr: u64) -> bool {
        addr.checked_sub(self.load_addr)
            .is_some_and(|off| off < self.size)
    }
}

/// A row of `SYMBOLS`, as [`Symbols`] hands it out.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Symbol<'a> {
    /// `NAME`.
    pub name: &'a str,
    /// `ADDR_OFFSET` from the image's load address.
    pub addr_offset: u64,
    /// `SIZE` in bytes.
    pub size: Option<u64>,
}

/// The `SYMBOLS` table of an image.
///
/// Symbols are often half of a DCFG (every library's exports), so the table keeps all names
/// in one string and 24 bytes per row, rather than a `String` per symbol. Rows are handed out
/// as [`Symbol`]s; build a table with [`Symbols::push`] or by collecting `Symbol`s.
#[derive(Clone, Default, PartialEq, Eq, Hash)]
pub struct Symbols {
    /// Every name, one after the other.
    names: String,
    rows: Vec<SymbolRow>,
}

/// A stored symbol: its name is `names[previous row's end .. end]`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
struct SymbolRow {
    addr_offset: u64,
    /// Meaningful when `end_and_sized` has [`SIZED`] set.
    size: u64,
    /// The end of the name in `names`, with [`SIZED`] set if `SIZE` is present (a string's
    /// length never reaches 2^63).
    end_and_sized: u64,
}

/// The flag of [`SymbolRow::end_and_sized`] that says the size is present.
const SIZED: u64 = 1 << 63;

impl SymbolRow {
    fn end(&self) -> usize {
        usize::try_from(self.end_and_sized & !SIZED).unwrap_or(usize::MAX)
    }
}

impl Symbols {
    /// An empty table.
    #[must_use]
    pub const fn new() -> Symbols {
        Symbols {
            names: String::new(),
            rows: Vec::new(),
        }
    }

    /// Appends a symbol.
    pub fn push(&mut self, symbol: Symbol<'_>) {
        self.names.push_str(symbol.name);
        let row = self.row_ending_here(symbol.addr_offset, symbol.size);
        self.rows.push(row);
    }

    /// The row of a symbol whose name ends the names so far.
    fn row_ending_here(&self, addr_offset: u64, size: Option<u64>) -> SymbolRow {
        let end = self.names.len() as u64;
        SymbolRow {
            addr_offset,
            size: size.unwrap_or(0),
            end_and_sized: if size.is_some() { end | SIZED } else { end },
        }
    }

    /// The number of symbols.
    #[must_use]
    pub fn len(&self) -> usize {
        self.rows.len()
    }

    /// Whether there are none.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// The symbol at position `i` (file order).
    #[must_use]
    pub fn get(&self, i: usize) -> Option<Symbol<'_>> {
        let row = self.rows.get(i)?;
        let start = match i.checked_sub(1) {
            Some(prev) => self.rows.get(prev).map_or(0, SymbolRow::end),
            None => 0,
        };
        Some(self.view(start, row))
    }

    fn view(&self, start: usize, row: &SymbolRow) -> Symbol<'_> {
        Symbol {
            name: self.names.get(start..row.end()).unwrap_or_default(),
            addr_offset: row.addr_offset,
            size: (row.end_and_sized & SIZED != 0).then_some(row.size),
        }
    }

    /// Iterates in file order.
    #[must_use]
    pub fn iter(&self) -> SymbolIter<'_> {
        SymbolIter {
            table: self,
            rows: self.rows.iter(),
            start: 0,
        }
    }

    /// While reading: sets the name of the row being read (the tail of the names, after the
    /// last row's). Room grows by half, not double: less unused before the final shrink.
    pub(crate) fn set_pending_name(&mut self, name: &str) {
        self.names.truncate(self.names_end());
        if self.names.capacity().saturating_sub(self.names.len()) < name.len() {
            self.names
                .reserve_exact(name.len().max(self.names.len() / 2).max(64));
        }
        self.names.push_str(name);
    }

    /// Appends a row whose name was set by [`Symbols::set_pending_name`].
    pub(crate) fn push_row(&mut self, addr_offset: u64, size: Option<u64>) {
        let row = self.row_ending_here(addr_offset, size);
        self.rows.push(row);
    }

    /// Where the name of the next row starts.
    fn names_end(&self) -> usize {
        self.rows.last().map_or(0, SymbolRow::end)
    }

    /// The rows there is room for.
    pub(crate) fn row_capacity(&self) -> usize {
        self.rows.capacity()
    }

    /// Room for `rows` more rows.
    pub(crate) fn reserve_rows(&mut self, rows: usize) {
        self.rows.reserve_exact(rows);
    }

    /// Gives back unused room.
    pub(crate) fn shrink_to_fit(&mut self) {
        self.names.shrink_to_fit();
        self.rows.shrink_to_fit();
    }
}

impl fmt::Debug for Symbols {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

impl<'a> FromIterator<Symbol<'a>> for Symbols {
    fn from_iter<I: IntoIterator<Item = Symbol<'a>>>(iter: I) -> Symbols {
        let mut t = Symbols::new();
        t.extend(iter);
        t
    }
}

impl<'a> Extend<Symbol<'a>> for Symbols {
    fn extend<I: IntoIterator<Item = Symbol<'a>>>(&mut self, iter: I) {
        for s in iter {
            self.push(s);
        }
    }
}

impl<'a> IntoIterator for &'a Symbols {
    type Item = Symbol<'a>;
    type IntoIter = SymbolIter<'a>;
    fn into_iter(self) -> SymbolIter<'a> {
        self.iter()
    }
}

/// Iterator over [`Symbols`], in file order.
#[derive(Clone, Debug)]
pub struct SymbolIter<'a> {
    table: &'a Symbols,
    rows: core::slice::Iter<'a, SymbolRow>,
    /// Where the next name starts.
    start: usize,
}

impl<'a> Iterator for SymbolIter<'a> {
    type Item = Symbol<'a>;

    fn next(&mut self) -> Option<Symbol<'a>> {
        let row = self.rows.next()?;
        let symbol = self.table.view(self.start, row);
        self.start = row.end();
        Some(symbol)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.rows.size_hint()
    }
}

impl ExactSizeIterator for SymbolIter<'_> {}

/// A row of `SOURCE_DATA`.
///
/// Lines, sizes and instruction counts are `u32` (the reader rejects larger values): source
/// lines are as numerous as blocks, and 40 bytes a row keep the model smaller than the JSON.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SourceLine {
    /// `FILE_NAME_ID` of the source file.
    pub file_name_id: u64,
    /// `ADDR_OFFSET` from the image's load address.
    pub addr_offset: u64,
    /// `LINE_NUM`.
    pub line: u32,
    /// `SIZE` in bytes.
    pub size: Option<u32>,
    /// `NUM_INSTRS` covered.
    pub num_instrs: Option<u32>,
}

/// A row of `BASIC_BLOCKS`.
///
/// The size, instruction count and last-instruction offset of a block are `u32` (the reader
/// rejects larger values): blocks are the most numerous rows, and 48 bytes a row keep the
/// model smaller than the JSON.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BasicBlock {
    /// `NODE_ID`, unique in the process.
    pub id: u64,
    /// `ADDR_OFFSET` of the first instruction from the image's load address.
    pub addr_offset: u64,
    /// `SIZE` in bytes.
    pub size: u32,
    /// `NUM_INSTRS`.
    pub num_instrs: u32,
    /// `LAST_INSTR_OFFSET`: address of the last instruction minus that of the first.
    pub last_instr_offset: Option<u32>,
    /// `COUNT`: executions over all threads (optional; edges give it too).
    pub count: Option<u64>,
}

/// A row of `ROUTINES`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Routine {
    /// `ENTRY_NODE_ID`: also the routine's id.
    pub entry: u64,
    /// `EXIT_NODE_IDS`: blocks with edges leaving the routine.
    pub exits: Vec<u64>,
    /// `NODES`: every block of the routine with its immediate dominator.
    pub nodes: Vec<RoutineNode>,
    /// `LOOPS`, absent if the routine has none.
    pub loops: Option<Vec<Loop>>,
}

impl Routine {
    /// The loops (empty if the table is absent).
    #[must_use]
    pub fn loops(&self) -> &[Loop] {
        self.loops.as_deref().unwrap_or_default()
    }

    /// The immediate dominator of `node`, if it is in this routine.
    #[must_use]
    pub fn idom(&self, node: u64) -> Option<u64> {
        self.nodes.iter().find(|n| n.id == node).map(|n| n.idom)
    }
}

/// A row of a routine's `NODES` table.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RoutineNode {
    /// `NODE_ID`.
    pub id: u64,
    /// `IDOM_NODE_ID` (the entry is its own dominator).
    pub idom: u64,
}

/// A row of a routine's `LOOPS` table. A loop's id is its head block's id.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Loop {
    /// `LOOP_HEAD_NODE_ID`.
    pub head: u64,
    /// `LOOP_BACK_EDGE_SOURCE_NODE_IDS`.
    pub back_edge_sources: Vec<u64>,
    /// `LOOP_NODE_IDS`, including the head and inner loops' nodes.
    pub nodes: Vec<u64>,
    /// `PARENT_LOOP_HEAD_NODE_ID` as written (absent, 0 or the parent's head).
    pub parent: Option<u64>,
}

impl Loop {
    /// The parent loop's head, `None` for an outer loop (absent or 0).
    #[must_use]
    pub fn parent_head(&self) -> Option<u64> {
        self.parent.filter(|&p| p != 0)
    }
}

/// Per-thread execution counts of one edge (`COUNT_PER_THREAD`), thread 0 first.
///
/// Stored compactly, because a DCFG holds one per edge: as LEB128 varints in 16 bytes
/// inline while they fit in 13 bytes (8 threads with counts below 128, or 4 below 16384),
/// on the heap otherwise. Build one with [`Counts::push`] or by collecting `u64`s.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Counts(Repr);

/// Which representation a [`Counts`] uses is a function of its values (inline whenever they
/// fit, and values are only appended), so the derived equality is equality of the values.
#[derive(Clone, PartialEq, Eq, Hash)]
enum Repr {
    Inline {
        /// Number of values.
        len: u8,
        /// Bytes of `bytes` in use; the rest are zero.
        used: u8,
        bytes: [u8; INLINE],
    },
    Heap(Box<Spill>),
}

/// Bytes of varints a [`Counts`] holds inline.
const INLINE: usize = 13;

/// Counts that did not fit inline.
#[derive(Clone, PartialEq, Eq, Hash)]
struct Spill(Vec<u64>);

impl Default for Counts {
    fn default() -> Counts {
        Counts::new()
    }
}

/// Writes `v` as a LEB128 varint at the start of `out`; its length, or `None` if it does not
/// fit.
fn leb128(v: u64, out: &mut [u8]) -> Option<usize> {
    let mut v = v;
    let mut n = 0usize;
    loop {
        let slot = out.get_mut(n)?;
        // The low 7 bits, so the cast cannot truncate.
        let low = (v & 0x7f) as u8;
        v >>= 7;
        n = n.saturating_add(1);
        if v == 0 {
            *slot = low;
            return Some(n);
        }
        *slot = low | 0x80;
    }
}

impl Counts {
    /// No counts.
    #[must_use]
    pub const fn new() -> Counts {
        Counts(Repr::Inline {
            len: 0,
            used: 0,
            bytes: [0; INLINE],
        })
    }

    /// Appends the count of the next thread.
    pub fn push(&mut self, v: u64) {
        if let Repr::Inline { len, used, bytes } = &mut self.0 {
            let start = usize::from(*used);
            if let Some(n) = bytes.get_mut(start..).and_then(|free| leb128(v, free))
                && let Some(l) = len.checked_add(1)
            {
                *len = l;
                // start + n <= INLINE, which fits in a u8.
                *used = u8::try_from(start.saturating_add(n)).unwrap_or(u8::MAX);
                return;
            }
            let mut all: Vec<u64> = self.iter().collect();
            all.push(v);
            self.0 = Repr::Heap(Box::new(Spill(all)));
            return;
        }
        if let Repr::Heap(spill) = &mut self.0 {
            spill.0.push(v);
        }
    }

    /// The number of threads counted.
    #[must_use]
    pub fn len(&self) -> usize {
        match &self.0 {
            Repr::Inline { len, .. } => usize::from(*len),
            Repr::Heap(spill) => spill.0.len(),
        }
    }

    /// Whether there are no counts.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The count of thread `t`.
    #[must_use]
    pub fn get(&self, t: usize) -> Option<u64> {
        match &self.0 {
            Repr::Inline { .. } => self.iter().nth(t),
            Repr::Heap(spill) => spill.0.get(t).copied(),
        }
    }

    /// The counts, thread 0 first.
    #[must_use]
    pub fn iter(&self) -> CountsIter<'_> {
        match &self.0 {
            Repr::Inline { len, used, bytes } => CountsIter(IterRepr::Inline {
                bytes: bytes.get(..usize::from(*used)).unwrap_or_default(),
                left: usize::from(*len),
            }),
            Repr::Heap(spill) => CountsIter(IterRepr::Heap(spill.0.iter())),
        }
    }

    /// The counts in a `Vec`, thread 0 first.
    #[must_use]
    pub fn to_vec(&self) -> Vec<u64> {
        self.iter().collect()
    }

    /// The sum over all threads (saturating).
    #[must_use]
    pub fn total(&self) -> u64 {
        self.iter().fold(0u64, u64::saturating_add)
    }
}

impl fmt::Debug for Counts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

impl FromIterator<u64> for Counts {
    fn from_iter<I: IntoIterator<Item = u64>>(iter: I) -> Counts {
        let mut c = Counts::new();
        for v in iter {
            c.push(v);
        }
        c
    }
}

impl From<&[u64]> for Counts {
    fn from(v: &[u64]) -> Counts {
        v.iter().copied().collect()
    }
}

impl<'a> IntoIterator for &'a Counts {
    type Item = u64;
    type IntoIter = CountsIter<'a>;
    fn into_iter(self) -> CountsIter<'a> {
        self.iter()
    }
}

/// Iterator over [`Counts`].
#[derive(Clone, Debug)]
pub struct CountsIter<'a>(IterRepr<'a>);

#[derive(Clone, Debug)]
enum IterRepr<'a> {
    Inline { bytes: &'a [u8], left: usize },
    Heap(core::slice::Iter<'a, u64>),
}

impl Iterator for CountsIter<'_> {
    type Item = u64;

    fn next(&mut self) -> Option<u64> {
        match &mut self.0 {
            IterRepr::Inline { bytes, left } => {
                *left = left.checked_sub(1)?;
                let mut v = 0u64;
                let mut shift = 0u32;
                while let Some((&b, rest)) = bytes.split_first() {
                    *bytes = rest;
                    v |= u64::from(b & 0x7f).checked_shl(shift).unwrap_or(0);
                    shift = shift.saturating_add(7);
                    if b & 0x80 == 0 {
                        break;
                    }
                }
                Some(v)
            }
            IterRepr::Heap(it) => it.next().copied(),
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = match &self.0 {
            IterRepr::Inline { left, .. } => *left,
            IterRepr::Heap(it) => it.len(),
        };
        (n, Some(n))
    }
}

impl ExactSizeIterator for CountsIter<'_> {}

/// A row of `EDGES`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Edge {
    /// `EDGE_ID`.
    pub id: u64,
    /// `SOURCE_NODE_ID`: a block or special node.
    pub source: u64,
    /// `TARGET_NODE_ID`: a block or special node.
    pub target: u64,
    /// `EDGE_TYPE_ID`: see [`Dcfg::edge_kind`].
    pub type_id: u64,
    /// `COUNT_PER_THREAD`, thread 0 first.
    pub counts: Counts,
}

impl Edge {
    /// Executions over all threads (saturating).
    #[must_use]
    pub fn count(&self) -> u64 {
        self.counts.total()
    }

    /// Executions by thread `t` (0 if the array is shorter).
    #[must_use]
    pub fn count_for_thread(&self, t: usize) -> u64 {
        self.counts.get(t).unwrap_or(0)
    }
}

/// The `EDGES` table of a process.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Edges {
    rows: Vec<Edge>,
}

impl Edges {
    /// An empty table.
    #[must_use]
    pub const fn new() -> Edges {
        Edges { rows: Vec::new() }
    }

    /// Appends an edge.
    pub fn push(&mut self, edge: Edge) {
        self.rows.push(edge);
    }

    /// The number of edges.
    #[must_use]
    pub fn len(&self) -> usize {
        self.rows.len()
    }

    /// Whether there are none.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// The edge at position `i` (file order).
    #[must_use]
    pub fn get(&self, i: usize) -> Option<&Edge> {
        self.rows.get(i)
    }

    /// The edges in file order.
    #[must_use]
    pub fn as_slice(&self) -> &[Edge] {
        &self.rows
    }

    /// Iterates in file order.
    pub fn iter(&self) -> EdgeIter<'_> {
        self.rows.iter()
    }
}

impl From<Vec<Edge>> for Edges {
    fn from(rows: Vec<Edge>) -> Edges {
        Edges { rows }
    }
}

impl FromIterator<Edge> for Edges {
    fn from_iter<I: IntoIterator<Item = Edge>>(iter: I) -> Edges {
        Edges {
            rows: iter.into_iter().collect(),
        }
    }
}

/// Iterator over edges.
pub type EdgeIter<'a> = core::slice::Iter<'a, Edge>;

/// The predefined special nodes (spec 2.6), found by name, never by number.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SpecialKind {
    /// `START`: source of ENTRY edges.
    Start,
    /// `END`: target of EXIT edges.
    End,
    /// `UNKNOWN`: a construction error.
    Unknown,
}

impl SpecialKind {
    /// The name in `SPECIAL_NODES`.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            SpecialKind::Start => crate::raw::START,
            SpecialKind::End => crate::raw::END,
            SpecialKind::Unknown => crate::raw::UNKNOWN,
        }
    }
}

macro_rules! edge_kinds {
    ($($(#[$doc:meta])* $v:ident = $s:literal,)*) => {
        /// The predefined edge types (spec 2.5), by name. Ids are per file; names are not.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        #[non_exhaustive]
        pub enum EdgeKind {
            $($(#[$doc])* $v,)*
            /// A name this crate does not know.
            Other,
        }

        impl EdgeKind {
            /// Every predefined kind.
            pub const ALL: &'static [EdgeKind] = &[$(EdgeKind::$v,)*];

            /// The kind named `name` (`Other` if unknown).
            #[must_use]
            pub fn from_name(name: &str) -> EdgeKind {
                match name {
                    $($s => EdgeKind::$v,)*
                    _ => EdgeKind::Other,
                }
            }

            /// The name as written in `EDGE_TYPES`, `None` for `Other`.
            #[must_use]
            pub fn name(self) -> Option<&'static str> {
                match self {
                    $(EdgeKind::$v => Some($s),)*
                    EdgeKind::Other => None,
                }
            }
        }
    };
}

edge_kinds! {
    /// First edge of a thread, from START.
    Entry = "ENTRY",
    /// Last edge of a thread, to END.
    Exit = "EXIT",
    /// Unknown kind of branch.
    Branch = "BRANCH",
    /// Taken conditional branch.
    ConditionalBranch = "CONDITIONAL_BRANCH",
    /// Unconditional branch.
    UnconditionalBranch = "UNCONDITIONAL_BRANCH",
    /// Direct branch.
    DirectBranch = "DIRECT_BRANCH",
    /// Indirect branch.
    IndirectBranch = "INDIRECT_BRANCH",
    /// Direct conditional branch.
    DirectConditionalBranch = "DIRECT_CONDITIONAL_BRANCH",
    /// Indirect conditional branch.
    IndirectConditionalBranch = "INDIRECT_CONDITIONAL_BRANCH",
    /// Direct unconditional branch.
    DirectUnconditionalBranch = "DIRECT_UNCONDITIONAL_BRANCH",
    /// Indirect unconditional branch.
    IndirectUnconditionalBranch = "INDIRECT_UNCONDITIONAL_BRANCH",
    /// A REP-prefixed instruction repeating (a self-loop).
    Rep = "REP",
    /// Fall-through to the next address.
    FallThrough = "FALL_THROUGH",
    /// Unknown kind of call.
    Call = "CALL",
    /// Direct call.
    DirectCall = "DIRECT_CALL",
    /// Indirect call.
    IndirectCall = "INDIRECT_CALL",
    /// Return.
    Return = "RETURN",
    /// Fabricated call-site → return-site edge.
    CallBypass = "CALL_BYPASS",
    /// System call.
    SystemCall = "SYSTEM_CALL",
    /// Return from a system call.
    SystemReturn = "SYSTEM_RETURN",
    /// Fabricated edge over a system call.
    SystemCallBypass = "SYSTEM_CALL_BYPASS",
    /// Interrupt or fault to a handler.
    ContextChange = "CONTEXT_CHANGE",
    /// Return from a context-change handler.
    ContextChangeReturn = "CONTEXT_CHANGE_RETURN",
    /// Fabricated edge over a context change.
    ContextChangeBypass = "CONTEXT_CHANGE_BYPASS",
    /// Fabricated edge over excluded code.
    ExcludedCodeBypass = "EXCLUDED_CODE_BYPASS",
    /// Interrupt (the spec's example table).
    Interrupt = "INTERRUPT",
    /// Return from an interrupt (the spec's example table).
    InterruptReturn = "INTERRUPT_RETURN",
    /// Fabricated edge over an interrupt (the spec's example table).
    InterruptBypass = "INTERRUPT_BYPASS",
    /// Fabricated edge over an unknown image (the spec's example table).
    UnknownImageBypass = "UNKNOWN_IMAGE_BYPASS",
    /// Unknown edge type.
    Unknown = "UNKNOWN",
}

impl EdgeKind {
    /// ENTRY.
    #[must_use]
    pub fn is_entry(self) -> bool {
        self == EdgeKind::Entry
    }

    /// EXIT.
    #[must_use]
    pub fn is_exit(self) -> bool {
        self == EdgeKind::Exit
    }

    /// Any call: CALL, DIRECT_CALL, INDIRECT_CALL, SYSTEM_CALL, CONTEXT_CHANGE, INTERRUPT.
    #[must_use]
    pub fn is_any_call(self) -> bool {
        use EdgeKind::*;
        matches!(
            self,
            Call | DirectCall | IndirectCall | SystemCall | ContextChange | Interrupt
        )
    }

    /// Any return: RETURN, SYSTEM_RETURN, CONTEXT_CHANGE_RETURN, INTERRUPT_RETURN.
    #[must_use]
    pub fn is_any_return(self) -> bool {
        use EdgeKind::*;
        matches!(
            self,
            Return | SystemReturn | ContextChangeReturn | InterruptReturn
        )
    }

    /// Any branch: the nine `*BRANCH` kinds.
    #[must_use]
    pub fn is_any_branch(self) -> bool {
        use EdgeKind::*;
        matches!(
            self,
            Branch
                | ConditionalBranch
                | UnconditionalBranch
                | DirectBranch
                | IndirectBranch
                | DirectConditionalBranch
                | IndirectConditionalBranch
                | DirectUnconditionalBranch
                | IndirectUnconditionalBranch
        )
    }

    /// Any conditional branch (taken edge).
    #[must_use]
    pub fn is_conditional_branch(self) -> bool {
        use EdgeKind::*;
        matches!(
            self,
            ConditionalBranch | DirectConditionalBranch | IndirectConditionalBranch
        )
    }

    /// Any unconditional branch.
    #[must_use]
    pub fn is_unconditional_branch(self) -> bool {
        use EdgeKind::*;
        matches!(
            self,
            UnconditionalBranch | DirectUnconditionalBranch | IndirectUnconditionalBranch
        )
    }

    /// Any fabricated bypass edge (`*_BYPASS`).
    #[must_use]
    pub fn is_any_bypass(self) -> bool {
        use EdgeKind::*;
        matches!(
            self,
            CallBypass
                | SystemCallBypass
                | ContextChangeBypass
                | ExcludedCodeBypass
                | InterruptBypass
                | UnknownImageBypass
        )
    }

    /// FALL_THROUGH.
    #[must_use]
    pub fn is_fall_through(self) -> bool {
        self == EdgeKind::FallThrough
    }

    /// REP.
    #[must_use]
    pub fn is_rep(self) -> bool {
        self == EdgeKind::Rep
    }

    /// Whether control stays in the routine: not a call, return, entry or exit.
    #[must_use]
    pub fn is_intra_routine(self) -> bool {
        !(self.is_any_call() || self.is_any_return() || self.is_entry() || self.is_exit())
    }
}

impl Dcfg {
    /// The id of the special node named `kind`, looked up by name in `SPECIAL_NODES`.
    #[must_use]
    pub fn special_node_id(&self, kind: SpecialKind) -> Option<u64> {
        self.special_nodes
            .as_deref()?
            .iter()
            .find(|n| n.name == kind.name())
            .map(|n| n.id)
    }

    /// Whether `id` is a special node.
    #[must_use]
    pub fn is_special_node(&self, id: u64) -> bool {
        self.special_nodes
            .as_deref()
            .is_some_and(|s| s.iter().any(|n| n.id == id))
    }

    /// The name of edge type `type_id`.
    #[must_use]
    pub fn edge_type_name(&self, type_id: u64) -> Option<&str> {
        self.edge_types
            .as_deref()?
            .iter()
            .find(|t| t.id == type_id)
            .map(|t| t.name.as_str())
    }

    /// The kind of edge type `type_id` (`Other` if the id or name is unknown).
    #[must_use]
    pub fn edge_kind(&self, type_id: u64) -> EdgeKind {
        self.edge_type_name(type_id)
            .map_or(EdgeKind::Other, EdgeKind::from_name)
    }

    /// The path of file `id`.
    #[must_use]
    pub fn file_name(&self, id: u64) -> Option<&str> {
        self.file_names
            .as_deref()?
            .iter()
            .find(|f| f.id == id)
            .map(|f| f.name.as_str())
    }

    /// The process with OS pid `pid`.
    #[must_use]
    pub fn process(&self, pid: u64) -> Option<&Process> {
        self.processes.iter().find(|p| p.id == pid)
    }

    /// The version as text, minor version on two digits (`"1.00"`).
    #[must_use]
    pub fn version(&self) -> String {
        format!("{}.{:02}", self.major_version, self.minor_version)
    }
}
