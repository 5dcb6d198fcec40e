//! Typed rows: the schema of a record kind, and the visitor through which a row hands its
//! values to a sink.
//!
//! Every format describes each of its record kinds (x64dbg instruction, tfile frame, DCFG
//! basic block, DCFG-Trace chunk, amber instruction) as a [`Schema`]: field names and types
//! (unsigned or signed integers with their width, bool, bytes, string, lists of plain
//! values, nested rows and child tables). A record is a [`Row`] that hands its values to a
//! [`Visitor`] in schema order. Sinks (JSON Lines today, Arrow and Parquet next) implement
//! [`Visitor`], so an output is written once for every format.
//!
//! Child tables ([`Type::Rows`]) are lists of nested records, such as the register changes
//! and memory accesses of an x64dbg instruction: a columnar sink keys them by the parent
//! record's index, a JSON sink nests them. Each field also says how JSON Lines shows it
//! ([`Json`]), because users read hex addresses and the dumps are a stable interface.

use std::borrow::Cow;
use std::sync::Arc;

/// The schema of one record kind: its table name and fields, in the order a row visits them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Schema {
    /// The table name, plural (`instructions`, `frames`, `basic_blocks`).
    pub name: Cow<'static, str>,
    /// The fields, in visiting order.
    pub fields: Vec<Field>,
}

impl Schema {
    /// A schema from its table name and fields.
    #[must_use]
    pub fn new(name: impl Into<Cow<'static, str>>, fields: Vec<Field>) -> Schema {
        Schema {
            name: name.into(),
            fields,
        }
    }

    /// The key fields ([`Field::key`]), in order.
    pub fn keys(&self) -> impl Iterator<Item = &Field> {
        self.fields.iter().filter(|f| f.key)
    }

    /// The field named `name`.
    #[must_use]
    pub fn field(&self, name: &str) -> Option<&Field> {
        self.fields.iter().find(|f| f.name == name)
    }
}

/// One field of a [`Schema`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Field {
    /// The field name (the JSON key, the column name).
    pub name: Cow<'static, str>,
    /// The value type.
    pub ty: Type,
    /// Whether the value may be missing ([`Visitor::null`]).
    pub nullable: bool,
    /// How JSON Lines shows the value.
    pub json: Json,
    /// Whether JSON Lines leaves the key out when the value is missing (rather than `null`).
    pub omit_null: bool,
    /// Whether the field keys the record's child tables: a columnar sink copies every key
    /// field of a record, in order, into the leading columns of each row of its child
    /// tables ([`Type::Rows`]), so that the child rows join back to their parent (`i` for
    /// instructions; `pid`, `thread`, `chunk` for DCFG-Trace chunks). Key fields come before
    /// the child tables they key (a child row takes the keys visited so far).
    pub key: bool,
}

impl Field {
    /// A required field shown plainly in JSON.
    #[must_use]
    pub fn new(name: impl Into<Cow<'static, str>>, ty: Type) -> Field {
        Field {
            name: name.into(),
            ty,
            nullable: false,
            json: Json::Plain,
            omit_null: false,
            key: false,
        }
    }

    /// A required unsigned integer of `bits` bits, shown as a `"0x…"` string in JSON.
    #[must_use]
    pub fn hex(name: impl Into<Cow<'static, str>>, bits: u8) -> Field {
        Field::new(name, Type::UInt(bits)).json(Json::Hex)
    }

    /// The same field, nullable: JSON shows a missing value as `null`.
    #[must_use]
    pub fn nullable(mut self) -> Field {
        self.nullable = true;
        self
    }

    /// The same field, nullable: JSON leaves a missing value out (no key at all).
    #[must_use]
    pub fn optional(mut self) -> Field {
        self.nullable = true;
        self.omit_null = true;
        self
    }

    /// The same field, marked as a key of the record's child tables ([`Field::key`]).
    #[must_use]
    pub fn key(mut self) -> Field {
        self.key = true;
        self
    }

    /// The same field shown in JSON as `json` says.
    #[must_use]
    pub fn json(mut self, json: Json) -> Field {
        self.json = json;
        self
    }
}

/// A value type.
///
/// Exhaustive on purpose, as the other parts of a schema are: every sink handles every
/// type, and a new one should not compile until each does.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Type {
    /// An unsigned integer of this many bits (8, 16, 32 or 64), visited with
    /// [`Visitor::uint`].
    UInt(u8),
    /// A signed integer of this many bits, visited with [`Visitor::int`].
    Int(u8),
    /// A boolean, visited with [`Visitor::bool`].
    Bool,
    /// A byte string (opcode bytes, memory contents), visited with [`Visitor::bytes`].
    Bytes,
    /// A UTF-8 string, visited with [`Visitor::str`].
    Str,
    /// A name from a small set (mnemonics, classes, register names): a string that columnar
    /// sinks dictionary-encode. Visited with [`Visitor::str`].
    Name,
    /// A list of plain values of one type, between [`Visitor::begin_list`] and
    /// [`Visitor::end_list`].
    List(Box<Type>),
    /// A child table: a list of nested records, each between [`Visitor::begin_row`] and
    /// [`Visitor::end_row`], all between [`Visitor::begin_list`] and [`Visitor::end_list`].
    /// A columnar sink writes them to their own table keyed by the parent record's index.
    Rows(Arc<Schema>),
    /// One nested record (between [`Visitor::begin_row`] and [`Visitor::end_row`]) whose
    /// fields a columnar sink flattens into the parent's columns.
    Struct(Arc<Schema>),
}

/// How JSON Lines shows a field.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Json {
    /// Integers in decimal, strings and names quoted, bytes as a hex string without `0x`,
    /// booleans as `true`/`false`, lists as arrays, nested records as objects.
    Plain,
    /// An integer as a `"0x…"` string (lowercase, no leading zeros).
    Hex,
    /// An integer as a `"0x…"` string zero-padded to this many characters, `0x` included.
    HexWidth(u8),
    /// Bytes as one `"0x…"` string of every byte (wide registers shown as one number).
    HexBytes0x,
    /// A child table shown as one JSON object: each row is an entry whose key is the row's
    /// first field (as a string) and whose value is the first non-missing of its other
    /// fields.
    Object,
    /// A child table shown as one JSON array holding, for each row, its first shown field's
    /// value (a DCFG-Trace chunk's `"edges":[…]`, whose rows also carry columns that JSON
    /// does not show).
    Values,
    /// Not shown in JSON at all (columns that only columnar sinks write).
    Skip,
}

/// One field as the tree-shaped sinks (JSON Lines, native values) lay it out: see
/// [`tree_layout`].
#[derive(Clone, Debug)]
pub struct TreeField {
    /// The field.
    pub field: Field,
    /// For a nested record or child table: where its schema's fields start.
    pub child: Option<usize>,
    /// For a child table: the field of its rows that a [`Json::Values`] table shows (the
    /// first not [`Json::Skip`]; none if all are), and how.
    pub shown: Option<(usize, Json)>,
}

/// The fields of every schema of `tables` (as the record reader indexes them), each
/// schema's contiguous and its nested schemas' laid out before it, and where each table's
/// fields start: the plan the tree-shaped sinks walk a row's values by.
#[must_use]
pub fn tree_layout(tables: &[Arc<Schema>]) -> (Vec<TreeField>, Vec<usize>) {
    fn plan(schema: &Schema, out: &mut Vec<TreeField>) -> usize {
        let children: Vec<Option<usize>> = schema
            .fields
            .iter()
            .map(|f| match &f.ty {
                Type::Rows(s) | Type::Struct(s) => Some(plan(s, out)),
                _ => None,
            })
            .collect();
        let base = out.len();
        for (f, child) in schema.fields.iter().zip(children) {
            let shown = match &f.ty {
                Type::Rows(s) => s
                    .fields
                    .iter()
                    .enumerate()
                    .find(|(_, c)| c.json != Json::Skip)
                    .map(|(i, c)| (i, c.json)),
                _ => None,
            };
            out.push(TreeField {
                field: f.clone(),
                child,
                shown,
            });
        }
        base
    }
    let mut fields = Vec::new();
    let starts = tables.iter().map(|t| plan(t, &mut fields)).collect();
    (fields, starts)
}

/// A record as a sink sees it: it hands its values to a [`Visitor`] in schema order.
pub trait Row {
    /// Visits every field of the row's schema, in order.
    fn visit(&self, v: &mut dyn Visitor);
}

/// What a sink implements to receive a row's values. Each value call fills the next field
/// of the current schema; [`Visitor::null`] leaves it missing.
pub trait Visitor {
    /// An unsigned integer ([`Type::UInt`]).
    fn uint(&mut self, v: u64);
    /// A signed integer ([`Type::Int`]).
    fn int(&mut self, v: i64);
    /// A boolean ([`Type::Bool`]).
    fn bool(&mut self, v: bool);
    /// A byte string ([`Type::Bytes`]).
    fn bytes(&mut self, v: &[u8]);
    /// A string or name ([`Type::Str`], [`Type::Name`]).
    fn str(&mut self, v: &str);
    /// A missing value of a nullable field (for a list or child table: no list at all).
    fn null(&mut self);
    /// Starts a [`Type::List`] or [`Type::Rows`] value.
    fn begin_list(&mut self);
    /// Ends the list started last.
    fn end_list(&mut self);
    /// Starts one nested record: an element of [`Type::Rows`], or a [`Type::Struct`] value.
    fn begin_row(&mut self);
    /// Ends the nested record started last.
    fn end_row(&mut self);
    /// One whole nested record (an element of [`Type::Rows`], or a [`Type::Struct`] value)
    /// in one call: the same as [`Visitor::begin_row`], the value call of each cell in order
    /// and [`Visitor::end_row`] (which the default does, through [`row_one_by_one`]). For
    /// records a reader has at hand as a few values or a slice of them (an x64dbg
    /// instruction's register state, a changed register's name and value), so that a sink
    /// may take them at once, or drop a record it does not show (JSON Lines, [`Json::Skip`])
    /// without a call per value.
    fn row(&mut self, cells: &[Cell<'_>]) {
        row_one_by_one(self, cells);
    }

    /// A run of elements of a [`Type::Rows`] child table whose fields are all unsigned
    /// integers, column by column: as many rows as the shortest [`Run::UInts`] (none
    /// without one), row `k` holding, for each run in order, its `k`-th value. The same as
    /// [`Visitor::begin_row`], [`Visitor::uint`] of each value and [`Visitor::end_row`] for
    /// each row (which the default does, through [`rows_one_by_one`]). For child tables of
    /// millions of rows (a DCFG-Trace chunk's `seq` and `edge_id`), so that a sink may take
    /// the run in one loop.
    fn rows(&mut self, runs: &[Run<'_>]) {
        rows_one_by_one(self, runs);
    }
}

/// One value of a record handed over whole ([`Visitor::row`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cell<'a> {
    /// An unsigned integer ([`Visitor::uint`]).
    UInt(u64),
    /// Unsigned integers, one field each, in order ([`Visitor::uint`] of each).
    UInts(&'a [u64]),
    /// A string or name ([`Visitor::str`]).
    Str(&'a str),
    /// A missing value ([`Visitor::null`]).
    Null,
}

impl Cell<'_> {
    /// The number of fields the cell fills.
    #[must_use]
    pub fn width(&self) -> usize {
        match self {
            Cell::UInts(v) => v.len(),
            Cell::UInt(_) | Cell::Str(_) | Cell::Null => 1,
        }
    }

    /// Hands the cell's values to `v`, one value call each.
    pub fn visit<V: Visitor + ?Sized>(&self, v: &mut V) {
        match *self {
            Cell::UInt(x) => v.uint(x),
            Cell::UInts(xs) => xs.iter().for_each(|&x| v.uint(x)),
            Cell::Str(s) => v.str(s),
            Cell::Null => v.null(),
        }
    }
}

/// One column of a run of child rows handed over at once ([`Visitor::rows`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Run<'a> {
    /// A position counting up: `first`, `first + 1`, … (wrapping).
    Counting(u64),
    /// One value per row.
    UInts(&'a [u64]),
}

impl Run<'_> {
    /// The value of row `k`.
    #[must_use]
    pub fn get(&self, k: usize) -> Option<u64> {
        match self {
            Run::Counting(first) => Some(first.wrapping_add(k as u64)),
            Run::UInts(v) => v.get(k).copied(),
        }
    }
}

/// The number of rows of a [`Visitor::rows`] call: the length of its shortest
/// [`Run::UInts`], 0 without one.
#[must_use]
pub fn run_len(runs: &[Run<'_>]) -> usize {
    runs.iter()
        .filter_map(|r| match r {
            Run::UInts(v) => Some(v.len()),
            Run::Counting(_) => None,
        })
        .min()
        .unwrap_or(0)
}

/// [`Visitor::row`] as the calls it stands for: its default, and the fallback of sinks
/// that take only some records at once.
pub fn row_one_by_one<V: Visitor + ?Sized>(v: &mut V, cells: &[Cell<'_>]) {
    v.begin_row();
    for c in cells {
        c.visit(v);
    }
    v.end_row();
}

/// [`Visitor::rows`] as the per-row calls it stands for: its default, and the fallback of
/// sinks that take only some runs at once.
pub fn rows_one_by_one<V: Visitor + ?Sized>(v: &mut V, runs: &[Run<'_>]) {
    for k in 0..run_len(runs) {
        v.begin_row();
        for r in runs {
            v.uint(r.get(k).unwrap_or(0));
        }
        v.end_row();
    }
}

/// An integer column as a columnar sink buffers it: every value as a 64-bit pattern
/// (signed values as their two's complement; the sink narrows them to the column's type),
/// and where the missing ones are. A reader's typed fast path ([`ColumnSink`]) pushes to
/// `values` directly.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct IntBuf {
    /// The values, a placeholder 0 for each missing one.
    pub values: Vec<u64>,
    /// The rows (indices into `values`) whose value is missing, in order.
    nulls: Vec<usize>,
}

impl IntBuf {
    /// Appends a value.
    #[inline]
    pub fn push(&mut self, v: u64) {
        self.values.push(v);
    }

    /// Appends a missing value.
    pub fn push_null(&mut self) {
        self.nulls.push(self.values.len());
        self.values.push(0);
    }

    /// The rows whose value is missing.
    #[must_use]
    pub fn null_rows(&self) -> &[usize] {
        &self.nulls
    }

    /// Takes the values out, leaving the buffer empty (the missing rows, read before from
    /// [`IntBuf::null_rows`], are cleared: their room stays for the next values).
    pub fn take_values(&mut self) -> Vec<u64> {
        self.nulls.clear();
        std::mem::take(&mut self.values)
    }
}

/// A byte-string column as a columnar sink buffers it: the bytes of every value, one after
/// another, and where each ends.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BytesBuf {
    /// Every value's bytes, concatenated.
    pub data: Vec<u8>,
    /// Where each value starts and ends in `data` (one more entry than values, from 0).
    /// A batch ends long before 2 GiB of values (see the sinks' byte limits); past that
    /// the offsets saturate rather than wrap.
    pub offsets: Vec<i32>,
    /// The rows whose value is missing, in order.
    nulls: Vec<usize>,
}

impl Default for BytesBuf {
    fn default() -> BytesBuf {
        BytesBuf {
            data: Vec::new(),
            offsets: vec![0],
            nulls: Vec::new(),
        }
    }
}

impl BytesBuf {
    /// Appends a value.
    #[inline]
    pub fn push(&mut self, v: &[u8]) {
        self.data.extend_from_slice(v);
        self.offsets
            .push(i32::try_from(self.data.len()).unwrap_or(i32::MAX));
    }

    /// Appends the first `len` bytes of `window` (at most 16) as a value: a copy of a fixed
    /// size, quicker than [`BytesBuf::push`] of a short value of variable length.
    #[inline]
    pub fn push_prefix(&mut self, window: &[u8; 16], len: usize) {
        let end = self.data.len().saturating_add(len.min(window.len()));
        self.data.extend_from_slice(window);
        self.data.truncate(end);
        self.offsets
            .push(i32::try_from(self.data.len()).unwrap_or(i32::MAX));
    }

    /// Appends a missing value.
    pub fn push_null(&mut self) {
        self.nulls.push(self.len());
        self.offsets
            .push(i32::try_from(self.data.len()).unwrap_or(i32::MAX));
    }

    /// The number of values.
    #[must_use]
    pub fn len(&self) -> usize {
        self.offsets.len().saturating_sub(1)
    }

    /// Whether there are no values.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The rows whose value is missing.
    #[must_use]
    pub fn null_rows(&self) -> &[usize] {
        &self.nulls
    }

    /// Takes the bytes and offsets out, leaving the buffer empty (the missing rows, read
    /// before from [`BytesBuf::null_rows`], are cleared: their room stays for the next
    /// values).
    pub fn take_values(&mut self) -> (Vec<u8>, Vec<i32>) {
        self.nulls.clear();
        (
            std::mem::take(&mut self.data),
            std::mem::replace(&mut self.offsets, vec![0]),
        )
    }
}

/// One column of a table as a reader's typed fast path fills it ([`ColumnSink`]).
pub enum Col<'a> {
    /// An integer column ([`Type::UInt`], [`Type::Int`]).
    Ints(&'a mut IntBuf),
    /// A byte-string column ([`Type::Bytes`]).
    Bytes(&'a mut BytesBuf),
    /// Any other column (names, strings, booleans, lists), a value at a time through the
    /// visitor's value calls ([`Visitor::uint`], [`Visitor::str`], [`Visitor::null`], …).
    Other(&'a mut dyn Visitor),
}

impl std::fmt::Debug for Col<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Col::Ints(b) => f.debug_tuple("Ints").field(&b.values.len()).finish(),
            Col::Bytes(b) => f.debug_tuple("Bytes").field(&b.len()).finish(),
            Col::Other(_) => f.write_str("Other"),
        }
    }
}

/// The columns of one record table (and of the child tables its records carry) that a
/// reader fills directly: see [`ColumnSink`].
#[derive(Debug)]
pub struct Columns<'a> {
    /// The record table's columns: its plain fields in visiting order, nested records
    /// ([`Type::Struct`]) flattened, child tables not counted.
    pub record: Vec<Col<'a>>,
    /// For each field of the record's schema that is a child table ([`Type::Rows`]) whose
    /// rows are wanted, in the schema's order: the field's name, and the child table's
    /// columns, which start with the key columns ([`Field::key`]) of the parent, which the
    /// reader fills too.
    pub children: Vec<(Cow<'static, str>, Vec<Col<'a>>)>,
}

/// The typed fast path of the columnar sinks (Parquet export, Arrow batches): a record
/// reader that knows its rows' layout appends whole records straight into the columns
/// ([`crate::Records::fill_columns`]), instead of handing a [`Row`] value by value to a
/// [`Visitor`]. After a reader returns, every column of a table must hold one more value
/// per row appended (a shorter column is filled up with missing values).
pub trait ColumnSink {
    /// The columns that records of the reader's table `table` go to, or `None` when the
    /// sink does not take them this way.
    fn columns(&mut self, table: usize) -> Option<Columns<'_>>;
}

/// A [`Visitor`] that keeps what a row hands it as a tree of values, for tests.
#[cfg(any(test, feature = "testing"))]
#[allow(missing_docs, clippy::unwrap_used, clippy::expect_used, clippy::panic)]
pub mod testing {
    use super::{Row, Visitor};

    /// One value of a row.
    #[derive(Clone, Debug, PartialEq, Eq)]
    pub enum Val {
        U(u64),
        I(i64),
        B(bool),
        Bytes(Vec<u8>),
        S(String),
        Null,
        /// A list of plain values or of child rows.
        List(Vec<Val>),
        /// A nested record (a child row or a struct).
        Row(Vec<Val>),
    }

    impl Val {
        /// The integer, panicking on anything else.
        pub fn u(&self) -> u64 {
            match self {
                Val::U(x) => *x,
                v => panic!("not an unsigned integer: {v:?}"),
            }
        }

        /// The elements of a list or the fields of a row.
        pub fn items(&self) -> &[Val] {
            match self {
                Val::List(v) | Val::Row(v) => v,
                v => panic!("not a list or row: {v:?}"),
            }
        }
    }

    #[derive(Default)]
    struct Collector {
        stack: Vec<Vec<Val>>,
        top: Vec<Val>,
    }

    impl Collector {
        fn open(&mut self) {
            let outer = std::mem::take(&mut self.top);
            self.stack.push(outer);
        }

        fn close(&mut self, wrap: fn(Vec<Val>) -> Val) {
            let inner = std::mem::replace(&mut self.top, self.stack.pop().unwrap());
            self.top.push(wrap(inner));
        }
    }

    impl Visitor for Collector {
        fn uint(&mut self, v: u64) {
            self.top.push(Val::U(v));
        }
        fn int(&mut self, v: i64) {
            self.top.push(Val::I(v));
        }
        fn bool(&mut self, v: bool) {
            self.top.push(Val::B(v));
        }
        fn bytes(&mut self, v: &[u8]) {
            self.top.push(Val::Bytes(v.to_vec()));
        }
        fn str(&mut self, v: &str) {
            self.top.push(Val::S(v.to_owned()));
        }
        fn null(&mut self) {
            self.top.push(Val::Null);
        }
        fn begin_list(&mut self) {
            self.open();
        }
        fn end_list(&mut self) {
            self.close(Val::List);
        }
        fn begin_row(&mut self) {
            self.open();
        }
        fn end_row(&mut self) {
            self.close(Val::Row);
        }
    }

    /// A record: its table index and values.
    pub type Rec = (usize, Vec<Val>);

    /// The tables and every record (table index, values) of `bytes` named `name`, read by
    /// `handler`; `gzip` reads them compressed, through the handler's streaming path.
    pub fn records(
        handler: &dyn crate::Handler,
        name: &str,
        bytes: &[u8],
        gzip: bool,
    ) -> (Vec<std::sync::Arc<super::Schema>>, Vec<Rec>) {
        use std::io::Write;
        let (name, bytes) = if gzip {
            let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
            gz.write_all(bytes).unwrap();
            (format!("{name}.gz"), gz.finish().unwrap())
        } else {
            (name.to_owned(), bytes.to_vec())
        };
        let options = crate::Options::default();
        let mut ctx = crate::Ctx::new(&options);
        let mut input = crate::Input::from_bytes(name, bytes).unwrap();
        assert_eq!(input.is_stream(), gzip);
        let mut records = handler.records(&mut input, &mut ctx).unwrap();
        let tables = records.tables().to_vec();
        let mut out = Vec::new();
        while let Some(r) = records.next_record() {
            let r = r.unwrap();
            out.push((r.table, collect(r.row())));
        }
        (tables, out)
    }

    /// An input of `bytes` named `name`; with `gzip`, compressed (read as a stream).
    pub fn input(name: &str, bytes: &[u8], gzip: bool) -> crate::Input {
        use std::io::Write;
        if !gzip {
            return crate::Input::from_bytes(name, bytes.to_vec()).unwrap();
        }
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        gz.write_all(bytes).unwrap();
        crate::Input::from_bytes(format!("{name}.gz"), gz.finish().unwrap()).unwrap()
    }

    /// A file of `testdata/`.
    pub fn testdata(path: &str) -> Vec<u8> {
        let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../testdata")
            .join(path);
        std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
    }

    /// The values of `row`, field by field.
    pub fn collect(row: &dyn Row) -> Vec<Val> {
        let mut c = Collector::default();
        row.visit(&mut c);
        assert!(c.stack.is_empty(), "unbalanced begin/end calls");
        c.top
    }
}
