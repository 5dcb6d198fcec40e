//! Header-row tables (spec 1.2.2): the header row is mapped once to column slots, then every
//! data row is read value by value straight into its struct.
//!
//! Columns are found by name in any order (trailing spaces ignored: the specification's own
//! example writes `"SIZE "`), unknown columns are skipped, and short rows leave the trailing
//! optional columns missing. Failures name the row (data rows from 0, as validation findings
//! do) and the column, e.g. `BASIC_BLOCKS[5].NUM_INSTRS`.

use trace_core::json::{Error as JsonError, Lexer, Seg, Source};

use crate::limits::MAX_COLUMNS;
use crate::model::{
    BasicBlock, Counts, Edge, EdgeType, FileName, Loop, Routine, RoutineNode, SourceLine,
    SpecialNode, Symbols,
};
use crate::raw;

/// Slot of an unknown column.
const SKIP: u8 = u8::MAX;

/// What a table looks like, for messages.
const TABLE: &str = "a table (an array whose first element is an array of column names)";

/// A row type of a table, read into a `Vec`.
pub(crate) trait Row: Default {
    /// The known column names (index = slot, at most 32).
    const COLUMNS: &'static [&'static str];
    /// Slots that must have a value (bit i = slot i).
    const REQUIRED: u32;
    /// Slots holding an object whose keys continue the path directly (`PROCESSES[0].IMAGES`
    /// rather than `PROCESSES[0].PROCESS_DATA.IMAGES`, as validation findings write it).
    const TRANSPARENT: u32 = 0;
    /// Reads the value of column slot `slot` (the parser is before the value).
    fn cell<'a, S: Source<'a>>(&mut self, slot: u8, p: &mut Lexer<S>) -> Result<(), JsonError>;
}

/// What the table reader needs of a row type: every [`Row`] (read into a `Vec`), and the
/// symbol rows, whose names go straight into their table's one string ([`Symbols`]).
trait TableRow: Default {
    /// As [`Row::COLUMNS`].
    const COLUMNS: &'static [&'static str];
    /// As [`Row::REQUIRED`].
    const REQUIRED: u32;
    /// As [`Row::TRANSPARENT`].
    const TRANSPARENT: u32 = 0;
    /// What the rows are read into.
    type Table: Table<Self>;
    /// As [`Row::cell`]; `table` holds the rows read so far.
    fn cell<'a, S: Source<'a>>(
        &mut self,
        slot: u8,
        p: &mut Lexer<S>,
        table: &mut Self::Table,
    ) -> Result<(), JsonError>;
}

impl<T: Row> TableRow for T {
    const COLUMNS: &'static [&'static str] = <T as Row>::COLUMNS;
    const REQUIRED: u32 = <T as Row>::REQUIRED;
    const TRANSPARENT: u32 = <T as Row>::TRANSPARENT;
    type Table = Vec<T>;
    #[inline]
    fn cell<'a, S: Source<'a>>(
        &mut self,
        slot: u8,
        p: &mut Lexer<S>,
        _: &mut Vec<T>,
    ) -> Result<(), JsonError> {
        Row::cell(self, slot, p)
    }
}

/// A table being read.
trait Table<T>: Default {
    /// The rows so far.
    fn len(&self) -> usize;
    /// The rows there is room for.
    fn capacity(&self) -> usize;
    /// Room for `rows` more rows.
    fn reserve_exact(&mut self, rows: usize);
    /// Appends a row.
    fn push(&mut self, row: T);
    /// Gives back unused room.
    fn shrink_to_fit(&mut self);
}

impl<T> Table<T> for Vec<T> {
    fn len(&self) -> usize {
        Vec::len(self)
    }
    fn capacity(&self) -> usize {
        Vec::capacity(self)
    }
    fn reserve_exact(&mut self, rows: usize) {
        Vec::reserve_exact(self, rows);
    }
    fn push(&mut self, row: T) {
        Vec::push(self, row);
    }
    fn shrink_to_fit(&mut self) {
        Vec::shrink_to_fit(self);
    }
}

fn bit(slot: u8) -> u32 {
    1u32.checked_shl(u32::from(slot)).unwrap_or(0)
}

fn column_name<T: TableRow>(slot: u8) -> &'static str {
    T::COLUMNS.get(usize::from(slot)).copied().unwrap_or("?")
}

/// Reads a whole table; `null` reads as `None`.
pub(crate) fn opt_table<'a, S: Source<'a>, T: Row>(
    p: &mut Lexer<S>,
) -> Result<Option<Vec<T>>, JsonError> {
    if p.null()? {
        Ok(None)
    } else {
        table(p).map(Some)
    }
}

/// Reads a whole table of rows of type `T`.
pub(crate) fn table<'a, S: Source<'a>, T: Row>(p: &mut Lexer<S>) -> Result<Vec<T>, JsonError> {
    rows::<S, T>(p)
}

/// Reads a `SYMBOLS` table.
pub(crate) fn symbols<'a, S: Source<'a>>(p: &mut Lexer<S>) -> Result<Symbols, JsonError> {
    rows::<S, SymbolCells>(p)
}

/// Reads a whole table into its [`TableRow::Table`].
fn rows<'a, S: Source<'a>, T: TableRow>(p: &mut Lexer<S>) -> Result<T::Table, JsonError> {
    p.expect(b'[', TABLE)?;
    let mut first = true;
    p.peek()?;
    let header_at = p.offset();
    if !p.next_elem(&mut first)? {
        return Err(JsonError::msg(header_at, "the table has no header row").at(Seg::Header));
    }
    let slots = header::<S, T>(p).map_err(|f| f.at(Seg::Header))?;
    let have = slots
        .iter()
        .filter(|&&s| s != SKIP)
        .fold(0u32, |a, &s| a | bit(s));
    if let Some(missing) = (0..T::COLUMNS.len())
        .filter_map(|i| u8::try_from(i).ok())
        .find(|&i| T::REQUIRED & bit(i) != 0 && have & bit(i) == 0)
    {
        return Err(JsonError::msg(
            header_at,
            format!("the header row has no column {}", column_name::<T>(missing)),
        )
        .at(Seg::Header));
    }
    let mut rows = T::Table::default();
    let mut r = 0u64;
    let rows_at = p.offset();
    loop {
        let more = p.next_elem(&mut first).map_err(|f| f.at(Seg::Row(r)))?;
        if !more {
            break;
        }
        let value = row::<S, T>(p, &slots, &mut rows).map_err(|f| f.at(Seg::Row(r)))?;
        if rows.len() == rows.capacity() {
            let read = usize::try_from(p.offset().saturating_sub(rows_at)).unwrap_or(usize::MAX);
            rows.reserve_exact(growth(rows.len(), read, p.bytes_left()));
        }
        rows.push(value);
        r = r.saturating_add(1);
    }
    rows.shrink_to_fit();
    Ok(rows)
}

/// How many rows to make room for in a full table of `len` rows, read from `read` bytes,
/// with `left` bytes of the input left if known.
///
/// By half, not double: memory peaks while the last and largest table (usually `EDGES`) is
/// read, so less room stands unused before the final shrink. Less when the bytes left in a
/// slice cannot hold that many rows of the average size so far: the last table is then
/// allocated close to its size.
fn growth(len: usize, read: usize, left: Option<usize>) -> usize {
    let half = (len / 2).max(4);
    let Some(left) = left else { return half };
    let row_bytes = read.checked_div(len).unwrap_or(1).max(1);
    let fit = left
        .checked_div(row_bytes)
        .unwrap_or(left)
        .saturating_add(1);
    // Not below a sixteenth, so that rows shorter than the average cost few steps.
    half.min(fit).max(len / 16).max(1)
}

/// The header row: each column's slot (or [`SKIP`]).
fn header<'a, S: Source<'a>, T: TableRow>(p: &mut Lexer<S>) -> Result<Vec<u8>, JsonError> {
    p.expect(b'[', "a header row (an array of column names)")?;
    let mut slots = Vec::new();
    let mut first = true;
    while p.next_elem(&mut first)? {
        p.peek()?;
        let at = p.offset();
        let slot = p
            .string_with(|name| {
                let name = name.trim_end_matches(' ');
                T::COLUMNS
                    .iter()
                    .position(|c| *c == name)
                    .and_then(|i| u8::try_from(i).ok())
                    .unwrap_or(SKIP)
            })
            .map_err(|f| f.at(Seg::Index(slots.len() as u64)))?;
        if slots.len() >= MAX_COLUMNS {
            return Err(JsonError::msg(
                at,
                format!("more than {MAX_COLUMNS} columns"),
            ));
        }
        slots.push(slot);
    }
    Ok(slots)
}

/// One data row.
fn row<'a, S: Source<'a>, T: TableRow>(
    p: &mut Lexer<S>,
    slots: &[u8],
    table: &mut T::Table,
) -> Result<T, JsonError> {
    p.expect(b'[', "a table row (an array of values)")?;
    let mut value = T::default();
    let mut got = 0u32;
    let mut first = true;
    let mut ended = false;
    let mut values = 0usize;
    for (col, &slot) in slots.iter().enumerate() {
        if !p.next_elem(&mut first)? {
            ended = true;
            break;
        }
        values = col.saturating_add(1);
        let read = if slot == SKIP {
            p.skip_value()
        } else {
            value.cell(slot, p, table)
        };
        read.map_err(|f| {
            if slot == SKIP {
                f.at(Seg::Index(col as u64))
            } else if T::TRANSPARENT & bit(slot) != 0 && f.is_nested() {
                f
            } else {
                f.at(Seg::Column(column_name::<T>(slot)))
            }
        })?;
        got |= bit(slot);
    }
    if !ended && p.next_elem(&mut first)? {
        p.peek()?;
        return Err(JsonError::msg(
            p.offset(),
            format!(
                "more values than the {} columns of the header row",
                slots.len()
            ),
        )
        .at(Seg::Index(slots.len() as u64)));
    }
    if got & T::REQUIRED != T::REQUIRED
        && let Some(&slot) = slots
            .iter()
            .find(|&&s| s != SKIP && T::REQUIRED & bit(s) != 0 && got & bit(s) == 0)
    {
        // At the row's closing bracket.
        return Err(JsonError::msg(
            p.offset().saturating_sub(1),
            format!("missing: the row ends after {values} values"),
        )
        .at(Seg::Column(column_name::<T>(slot))));
    }
    Ok(value)
}

/// An array of integers (`null` reads as empty).
fn ids<'a, S: Source<'a>>(p: &mut Lexer<S>) -> Result<Vec<u64>, JsonError> {
    let mut v = Vec::new();
    p.u64_array(|x| v.push(x))?;
    v.shrink_to_fit();
    Ok(v)
}

/// Per-thread counts (`null` reads as empty).
fn counts<'a, S: Source<'a>>(p: &mut Lexer<S>) -> Result<Counts, JsonError> {
    let mut c = Counts::new();
    p.u64_array(|x| c.push(x))?;
    Ok(c)
}

impl Row for BasicBlock {
    const COLUMNS: &'static [&'static str] = &raw::BLOCK_COLUMNS;
    const REQUIRED: u32 = 0b1111;
    #[inline]
    fn cell<'a, S: Source<'a>>(&mut self, slot: u8, p: &mut Lexer<S>) -> Result<(), JsonError> {
        match slot {
            0 => self.id = p.u64()?,
            1 => self.addr_offset = p.u64()?,
            2 => self.size = p.u32()?,
            3 => self.num_instrs = p.u32()?,
            4 => self.last_instr_offset = p.opt(Lexer::u32)?,
            _ => self.count = p.opt(Lexer::u64)?,
        }
        Ok(())
    }
}

impl Row for Edge {
    const COLUMNS: &'static [&'static str] = &raw::EDGE_COLUMNS;
    const REQUIRED: u32 = 0b1111;
    #[inline]
    fn cell<'a, S: Source<'a>>(&mut self, slot: u8, p: &mut Lexer<S>) -> Result<(), JsonError> {
        match slot {
            0 => self.id = p.u64()?,
            1 => self.source = p.u64()?,
            2 => self.target = p.u64()?,
            3 => self.type_id = p.u64()?,
            _ => self.counts = counts(p)?,
        }
        Ok(())
    }
}

impl Row for SourceLine {
    const COLUMNS: &'static [&'static str] = &raw::SOURCE_COLUMNS;
    const REQUIRED: u32 = 0b111;
    fn cell<'a, S: Source<'a>>(&mut self, slot: u8, p: &mut Lexer<S>) -> Result<(), JsonError> {
        match slot {
            0 => self.file_name_id = p.u64()?,
            1 => self.line = p.u32()?,
            2 => self.addr_offset = p.u64()?,
            3 => self.size = p.opt(Lexer::u32)?,
            _ => self.num_instrs = p.opt(Lexer::u32)?,
        }
        Ok(())
    }
}

/// A row of `SYMBOLS` being read: its name is read straight onto the table's names.
#[derive(Default)]
struct SymbolCells {
    addr_offset: u64,
    size: Option<u64>,
}

impl TableRow for SymbolCells {
    const COLUMNS: &'static [&'static str] = &raw::SYMBOL_COLUMNS;
    const REQUIRED: u32 = 0b11;
    type Table = Symbols;
    fn cell<'a, S: Source<'a>>(
        &mut self,
        slot: u8,
        p: &mut Lexer<S>,
        table: &mut Symbols,
    ) -> Result<(), JsonError> {
        match slot {
            // A second NAME column replaces the first, as for other columns.
            0 => p.string_with(|name| table.set_pending_name(name))?,
            1 => self.addr_offset = p.u64()?,
            _ => self.size = p.opt(Lexer::u64)?,
        }
        Ok(())
    }
}

impl Table<SymbolCells> for Symbols {
    fn len(&self) -> usize {
        Symbols::len(self)
    }
    fn capacity(&self) -> usize {
        self.row_capacity()
    }
    fn reserve_exact(&mut self, rows: usize) {
        self.reserve_rows(rows);
    }
    fn push(&mut self, row: SymbolCells) {
        self.push_row(row.addr_offset, row.size);
    }
    fn shrink_to_fit(&mut self) {
        Symbols::shrink_to_fit(self);
    }
}

impl Row for RoutineNode {
    const COLUMNS: &'static [&'static str] = &raw::ROUTINE_NODE_COLUMNS;
    const REQUIRED: u32 = 0b11;
    fn cell<'a, S: Source<'a>>(&mut self, slot: u8, p: &mut Lexer<S>) -> Result<(), JsonError> {
        match slot {
            0 => self.id = p.u64()?,
            _ => self.idom = p.u64()?,
        }
        Ok(())
    }
}

impl Row for Loop {
    const COLUMNS: &'static [&'static str] = &raw::LOOP_COLUMNS;
    const REQUIRED: u32 = 0b1;
    fn cell<'a, S: Source<'a>>(&mut self, slot: u8, p: &mut Lexer<S>) -> Result<(), JsonError> {
        match slot {
            0 => self.head = p.u64()?,
            1 => self.back_edge_sources = ids(p)?,
            2 => self.nodes = ids(p)?,
            _ => self.parent = p.opt(Lexer::u64)?,
        }
        Ok(())
    }
}

impl Row for Routine {
    const COLUMNS: &'static [&'static str] = &raw::ROUTINE_COLUMNS;
    const REQUIRED: u32 = 0b1;
    fn cell<'a, S: Source<'a>>(&mut self, slot: u8, p: &mut Lexer<S>) -> Result<(), JsonError> {
        match slot {
            0 => self.entry = p.u64()?,
            1 => self.exits = ids(p)?,
            2 => self.nodes = opt_table(p)?.unwrap_or_default(),
            _ => self.loops = opt_table(p)?,
        }
        Ok(())
    }
}

/// The (id, name) tables: `FILE_NAMES`, `EDGE_TYPES` and `SPECIAL_NODES`.
macro_rules! id_name_row {
    ($($row:ty => $columns:expr),* $(,)?) => {$(
        impl Row for $row {
            const COLUMNS: &'static [&'static str] = &$columns;
            const REQUIRED: u32 = 0b11;
            fn cell<'a, S: Source<'a>>(&mut self, slot: u8, p: &mut Lexer<S>) -> Result<(), JsonError> {
                match slot {
                    0 => self.id = p.u64()?,
                    _ => self.name = p.string()?,
                }
                Ok(())
            }
        }
    )*};
}

id_name_row! {
    FileName => raw::FILE_NAME_COLUMNS,
    EdgeType => raw::EDGE_TYPE_COLUMNS,
    SpecialNode => raw::SPECIAL_NODE_COLUMNS,
}
