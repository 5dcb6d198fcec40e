//! Rows into Arrow columns: a [`Visitor`] that appends each value to the column builder of
//! its field, flattens nested records, and sends child tables' rows (with their parent's key
//! values in front) to their own builders.

use std::borrow::Cow;
use std::sync::Arc;

use arrow_array::builder::{ArrayBuilder, BooleanBuilder, StringBuilder};
use arrow_array::types::Int32Type;
use arrow_array::{
    ArrayRef, BinaryArray, DictionaryArray, Int8Array, Int16Array, Int32Array, Int64Array,
    ListArray, UInt8Array, UInt16Array, UInt32Array, UInt64Array,
};
use arrow_buffer::{
    BooleanBufferBuilder, Buffer, NullBuffer, NullBufferBuilder, OffsetBuffer, ScalarBuffer,
};
use arrow_schema::{DataType, Field as ArrowField, Schema as ArrowSchema};

use super::writer::{Batch, Group, Writer};
use trace_model::Error;
use trace_model::schema::{
    BytesBuf, Cell, Col, Columns, Field, IntBuf, Json, Run, Schema, Type, Visitor, row_one_by_one,
    rows_one_by_one, run_len,
};

/// The Arrow type of a plain value type (`None` for nested records and child tables).
pub(crate) fn arrow_type(ty: &Type) -> Option<DataType> {
    Some(match ty {
        Type::UInt(8) => DataType::UInt8,
        Type::UInt(16) => DataType::UInt16,
        Type::UInt(32) => DataType::UInt32,
        Type::UInt(_) => DataType::UInt64,
        Type::Int(8) => DataType::Int8,
        Type::Int(16) => DataType::Int16,
        Type::Int(32) => DataType::Int32,
        Type::Int(_) => DataType::Int64,
        Type::Bool => DataType::Boolean,
        Type::Bytes => DataType::Binary,
        Type::Str => DataType::Utf8,
        Type::Name => DataType::Dictionary(Box::new(DataType::Int32), Box::new(DataType::Utf8)),
        Type::List(inner) => {
            DataType::List(Arc::new(ArrowField::new("item", arrow_type(inner)?, false)))
        }
        Type::Rows(_) | Type::Struct(_) => return None,
    })
}

/// One column being filled.
enum Column {
    /// Integers of any width and sign, kept as 64-bit patterns (a push per value, no
    /// per-type dispatch) and narrowed to `ty` when the batch is taken.
    Int(Box<IntColumn>),
    Bool(BooleanBuilder),
    Bytes(BytesBuf),
    Str(StringBuilder),
    Name(Box<NameColumn>),
    List(Box<ListColumn>),
}

/// Names, dictionary-encoded as they arrive: each distinct name of a batch is stored once.
struct NameColumn {
    keys: Vec<i32>,
    nulls: NullBufferBuilder,
    map: std::collections::HashMap<Box<str>, i32, BuildFnv>,
    values: StringBuilder,
}

impl Default for NameColumn {
    fn default() -> NameColumn {
        NameColumn {
            keys: Vec::new(),
            nulls: NullBufferBuilder::new(0),
            map: std::collections::HashMap::default(),
            values: StringBuilder::new(),
        }
    }
}

/// FNV-1a: short keys (names of a few bytes) hash in a few instructions, where the
/// default SipHash costs a hundred; the keys are the trace's own names, and a dictionary
/// of a batch is small, so flooding is no concern.
#[derive(Default)]
struct Fnv(u64);

impl std::hash::Hasher for Fnv {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        let mut h = if self.0 == 0 {
            0xcbf2_9ce4_8422_2325
        } else {
            self.0
        };
        for b in bytes {
            h = (h ^ u64::from(*b)).wrapping_mul(0x0000_0100_0000_01b3);
        }
        self.0 = h;
    }
}

type BuildFnv = std::hash::BuildHasherDefault<Fnv>;

impl NameColumn {
    #[inline]
    fn append(&mut self, v: &str) {
        let key = match self.map.get(v) {
            Some(k) => *k,
            None => {
                // At most one entry per row of a batch, so the count fits.
                let k = i32::try_from(self.map.len()).unwrap_or(i32::MAX);
                self.map.insert(v.into(), k);
                self.values.append_value(v);
                k
            }
        };
        self.keys.push(key);
        self.nulls.append_non_null();
    }

    fn append_null(&mut self) {
        self.keys.push(0);
        self.nulls.append_null();
    }

    fn finish(&mut self) -> ArrayRef {
        let keys = Int32Array::new(
            ScalarBuffer::from(std::mem::take(&mut self.keys)),
            self.nulls.finish(),
        );
        let values: ArrayRef = Arc::new(self.values.finish());
        self.map.clear();
        // The keys index the values built alongside them, so this cannot fail; an empty
        // array stands in if it somehow did.
        match DictionaryArray::<Int32Type>::try_new(keys, values) {
            Ok(a) => Arc::new(a),
            Err(_) => arrow_array::new_empty_array(&DataType::Dictionary(
                Box::new(DataType::Int32),
                Box::new(DataType::Utf8),
            )),
        }
    }
}

/// 64-bit value buffers of batches already encoded, handed back for the next batches by
/// whichever thread encoded them: growing fresh ones costs copies and fresh pages (the
/// allocator gives large freed buffers back to the system, and the kernel clears the pages
/// it hands out again). Clones share the buffers.
#[derive(Clone, Debug, Default)]
pub(crate) struct Spare(Arc<std::sync::Mutex<Vec<Vec<u64>>>>);

impl Spare {
    /// Buffers kept at most (a few batches of every table).
    const MAX: usize = 256;

    /// Keeps the value buffer of `array` when it is a 64-bit array that nothing else holds.
    pub(crate) fn give(&self, array: ArrayRef) {
        let buffer = if let Some(a) = array.as_any().downcast_ref::<UInt64Array>() {
            a.values().inner().clone()
        } else if let Some(a) = array.as_any().downcast_ref::<Int64Array>() {
            a.values().inner().clone()
        } else {
            return;
        };
        drop(array);
        if let Ok(mut v) = buffer.into_vec::<u64>() {
            v.clear();
            let mut kept = self
                .0
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            if kept.len() < Self::MAX {
                kept.push(v);
            }
        }
    }

    /// A kept buffer of room for at least `rows` values, if there is one.
    pub(crate) fn take(&self, rows: usize) -> Option<Vec<u64>> {
        let mut kept = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let at = kept.iter().rposition(|v| v.capacity() >= rows)?;
        Some(kept.swap_remove(at))
    }
}

/// 64-bit values as an Arrow array, unsigned or `signed` (a value's bits are the same),
/// on the buffer itself, so that [`Spare`] can take it back once the batch is encoded.
pub(crate) fn wide_array(signed: bool, values: Vec<u64>, nulls: Option<NullBuffer>) -> ArrayRef {
    if signed {
        let len = values.len();
        let values = ScalarBuffer::new(Buffer::from_vec(values), 0, len);
        Arc::new(Int64Array::new(values, nulls))
    } else {
        Arc::new(UInt64Array::new(ScalarBuffer::from(values), nulls))
    }
}

/// Integers: values as 64-bit patterns and where the missing ones are.
struct IntColumn {
    ty: DataType,
    buf: IntBuf,
}

/// The validity of `len` values of which the rows `nulls` are missing (none: all valid):
/// every bit set, then each missing row's cleared, one store per missing row (most rows of
/// some columns are missing, x64dbg's `registers.wide`).
fn validity(len: usize, nulls: &[usize]) -> Option<NullBuffer> {
    if nulls.is_empty() {
        return None;
    }
    let mut bits = BooleanBufferBuilder::new(len);
    bits.append_n(len, true);
    let mut at = 0;
    // In order and inside the values, as the buffers record them; any other entry (a
    // reader that cut `values` short) is passed over, so the length is always `len`.
    for &n in nulls {
        if n < at || n >= len {
            continue;
        }
        bits.set_bit(n, false);
        at = n.saturating_add(1);
    }
    Some(NullBuffer::new(bits.finish())).filter(|v| v.null_count() > 0)
}

/// A byte-string column's buffer as an Arrow array.
fn binary_array(buf: &mut BytesBuf) -> ArrayRef {
    let nulls = validity(buf.len(), buf.null_rows());
    let (data, offsets) = buf.take_values();
    // `BytesBuf` makes offsets that grow from 0 (saturating past 2 GiB, which a batch
    // never reaches); checked anyway, as `OffsetBuffer::new` panics on others. An empty
    // array stands in should they be wrong.
    let valid = offsets.first().is_some_and(|&o| o >= 0) && ascending(&offsets);
    let array = valid
        .then(|| OffsetBuffer::new(ScalarBuffer::from(offsets)))
        .and_then(|o| BinaryArray::try_new(o, Buffer::from_vec(data), nulls).ok());
    match array {
        Some(a) => Arc::new(a),
        None => arrow_array::new_empty_array(&DataType::Binary),
    }
}

/// Whether `offsets` never go down: every pair compared, without a branch each (so that
/// the comparisons run several at a time).
fn ascending(offsets: &[i32]) -> bool {
    let rest = offsets.get(1..).unwrap_or(&[]);
    !offsets
        .iter()
        .zip(rest)
        .fold(false, |down, (a, b)| down | (a > b))
}

impl IntColumn {
    fn finish(&mut self) -> ArrayRef {
        let nulls = validity(self.buf.values.len(), self.buf.null_rows());
        let mut v = self.buf.take_values();
        if matches!(self.ty, DataType::UInt64 | DataType::Int64) {
            return wide_array(self.ty == DataType::Int64, v, nulls);
        }
        // Each value was read from a field of the column's width: the casts keep it whole.
        let array: ArrayRef = match self.ty {
            DataType::UInt8 => {
                Arc::new(UInt8Array::new(v.iter().map(|x| *x as u8).collect(), nulls))
            }
            DataType::UInt16 => Arc::new(UInt16Array::new(
                v.iter().map(|x| *x as u16).collect(),
                nulls,
            )),
            DataType::UInt32 => Arc::new(UInt32Array::new(
                v.iter().map(|x| *x as u32).collect(),
                nulls,
            )),
            DataType::Int8 => Arc::new(Int8Array::new(v.iter().map(|x| *x as i8).collect(), nulls)),
            DataType::Int16 => Arc::new(Int16Array::new(
                v.iter().map(|x| *x as i16).collect(),
                nulls,
            )),
            DataType::Int32 => Arc::new(Int32Array::new(
                v.iter().map(|x| *x as i32).collect(),
                nulls,
            )),
            _ => Arc::new(UInt64Array::new(v.iter().copied().collect(), nulls)),
        };
        // The 64-bit buffer stays for the next batch.
        v.clear();
        self.buf.values = v;
        array
    }
}

/// A list of plain values: offsets, validity, and the values as one column.
struct ListColumn {
    field: Arc<ArrowField>,
    offsets: Vec<i32>,
    nulls: NullBufferBuilder,
    values: Column,
    /// Values pushed so far (the next offset).
    len: usize,
}

impl Column {
    fn new(ty: &DataType) -> Column {
        match ty {
            DataType::Boolean => Column::Bool(BooleanBuilder::new()),
            DataType::Binary => Column::Bytes(BytesBuf::default()),
            DataType::Utf8 => Column::Str(StringBuilder::new()),
            DataType::Dictionary(..) => Column::Name(Box::default()),
            DataType::List(field) => Column::List(Box::new(ListColumn {
                field: Arc::clone(field),
                offsets: vec![0],
                nulls: NullBufferBuilder::new(0),
                values: Column::new(field.data_type()),
                len: 0,
            })),
            // Integers (and any type the model does not produce, kept as UInt64).
            ty => Column::Int(Box::new(IntColumn {
                ty: ty.clone(),
                buf: IntBuf::default(),
            })),
        }
    }

    #[inline]
    fn uint(&mut self, v: u64) {
        match self {
            Column::Int(c) => c.buf.push(v),
            _ => self.null(),
        }
    }

    #[inline]
    fn int(&mut self, v: i64) {
        // The bit pattern; `IntColumn::finish` reads it back as the column's type.
        self.uint(v as u64);
    }

    fn bool(&mut self, v: bool) {
        match self {
            Column::Bool(b) => b.append_value(v),
            _ => self.null(),
        }
    }

    fn bytes(&mut self, v: &[u8]) {
        match self {
            Column::Bytes(b) => b.push(v),
            Column::Str(b) => b.append_value(String::from_utf8_lossy(v)),
            _ => self.null(),
        }
    }

    fn str(&mut self, v: &str) {
        match self {
            Column::Name(b) => b.append(v),
            Column::Str(b) => b.append_value(v),
            Column::Bytes(b) => b.push(v.as_bytes()),
            _ => self.null(),
        }
    }

    fn null(&mut self) {
        match self {
            Column::Int(c) => c.buf.push_null(),
            Column::Bool(b) => b.append_null(),
            Column::Bytes(b) => b.push_null(),
            Column::Str(b) => b.append_null(),
            Column::Name(b) => b.append_null(),
            Column::List(l) => {
                l.nulls.append_null();
                l.offsets.push(offset32(l.len));
            }
        }
    }

    /// Bytes held by variable-length values (strings, byte strings, list values).
    fn heap_bytes(&self) -> usize {
        match self {
            Column::Bytes(b) => b.data.len(),
            Column::Str(b) => b.values_slice().len(),
            Column::List(l) => l.len.saturating_mul(8),
            _ => 0,
        }
    }

    fn finish(&mut self) -> ArrayRef {
        match self {
            Column::Int(c) => c.finish(),
            Column::Bool(b) => Arc::new(b.finish()),
            Column::Bytes(b) => binary_array(b),
            Column::Str(b) => Arc::new(b.finish()),
            Column::Name(b) => b.finish(),
            Column::List(l) => {
                let offsets = std::mem::replace(&mut l.offsets, vec![0]);
                l.len = 0;
                let values = l.values.finish();
                Arc::new(ListArray::new(
                    Arc::clone(&l.field),
                    OffsetBuffer::new(ScalarBuffer::from(offsets)),
                    values,
                    l.nulls.finish(),
                ))
            }
        }
    }

    fn len(&self) -> usize {
        match self {
            Column::Int(c) => c.buf.values.len(),
            Column::Bool(b) => b.len(),
            Column::Bytes(b) => b.len(),
            Column::Str(b) => b.len(),
            Column::Name(b) => b.keys.len(),
            Column::List(l) => l.offsets.len().saturating_sub(1),
        }
    }
}

/// A column as one value's target, for a reader's typed fast path ([`Col::Other`]): the
/// value calls append to it; a list column takes the values between `begin_list` and
/// `end_list` as one list (a `null` instead: a NULL list); the row calls do nothing.
impl Visitor for Column {
    fn uint(&mut self, v: u64) {
        match self {
            Column::List(l) => {
                l.values.uint(v);
                l.len = l.len.saturating_add(1);
            }
            _ => Column::uint(self, v),
        }
    }
    fn int(&mut self, v: i64) {
        Column::int(self, v);
    }
    fn bool(&mut self, v: bool) {
        Column::bool(self, v);
    }
    fn bytes(&mut self, v: &[u8]) {
        Column::bytes(self, v);
    }
    fn str(&mut self, v: &str) {
        Column::str(self, v);
    }
    fn null(&mut self) {
        Column::null(self);
    }
    fn begin_list(&mut self) {}
    fn end_list(&mut self) {
        if let Column::List(l) = self {
            l.nulls.append_non_null();
            l.offsets.push(offset32(l.len));
        }
    }
    fn begin_row(&mut self) {}
    fn end_row(&mut self) {}
}

impl Column {
    /// The column as a reader's typed fast path fills it.
    fn as_col(&mut self) -> Col<'_> {
        match self {
            Column::Int(c) => Col::Ints(&mut c.buf),
            Column::Bytes(b) => Col::Bytes(b),
            other => Col::Other(other),
        }
    }
}

/// A list offset. A batch ends once its variable-length values pass `batch_bytes` (see
/// `Tables::end_of_row`), long before 2^31 list values, so the offset fits.
fn offset32(n: usize) -> i32 {
    i32::try_from(n).unwrap_or(i32::MAX)
}

/// What a field of a table becomes, in visiting order (nested records flattened).
#[derive(Clone, Copy, Debug)]
enum Slot {
    /// A plain value into column `col`; `key` when it keys the record's child tables.
    Value { col: usize, key: bool },
    /// A list of plain values into column `col`.
    List { col: usize },
    /// A nested record whose fields are the next `span` slots.
    Struct { span: usize },
    /// A child table: its rows go to table `table`.
    Child { table: usize },
}

/// One output table: its Arrow schema, its columns, and how a row's values reach them.
pub(crate) struct Table {
    /// The table name (the folder of its files).
    pub(crate) name: String,
    /// The Arrow schema of its files.
    pub(crate) schema: Arc<ArrowSchema>,
    /// The source schema the table was planned from (same-named child tables merge only
    /// when their source schemas and keys agree).
    source: Arc<Schema>,
    /// How many leading columns hold the parent's keys.
    keys: usize,
    /// The columns to delta-encode (see `writer::encodings`): in a record table its 64-bit
    /// integers, which run or step from row to row (indices, offsets, pcs, register
    /// state); in a child table only the parent's keys, since its other columns interleave
    /// unrelated values (the changes of different registers) that a dictionary packs better.
    pub(crate) delta: Vec<bool>,
    /// The columns that get min/max statistics: all but those of nested records (register
    /// state), which no query prunes by and which would cost a comparison per value.
    pub(crate) stats: Vec<bool>,
    /// The columns `tracekit dump` shows (the others, such as the register state of an
    /// x64dbg instruction, exist only in columnar outputs); the manifest says which.
    pub(crate) shown: Vec<bool>,
    /// A record table whose columns are only keys of its child tables (amber's dangling
    /// escapes): its rows carry child rows and are not written themselves.
    pub(crate) carrier: bool,
    slots: Vec<Slot>,
    columns: Vec<Column>,
    /// Rows buffered.
    rows: usize,
    /// Set when the row being filled skipped a nested record's slots.
    ragged: bool,
}

/// What a field inherits from the nested records around it.
#[derive(Clone, Copy, Debug, Default)]
struct Nesting {
    /// A record around it is nullable.
    nullable: bool,
    /// It is inside a nested record.
    nested: bool,
    /// A record around it is not shown in JSON.
    hidden: bool,
}

/// A table's columns as they are planned.
struct Plan<'a> {
    fields: &'a mut Vec<ArrowField>,
    /// Per column, whether it gets statistics ([`Table::stats`]).
    stats: &'a mut Vec<bool>,
    /// Per column, whether `tracekit dump` shows it ([`Table::shown`]).
    shown: &'a mut Vec<bool>,
    slots: &'a mut Vec<Slot>,
}

/// A key value copied from a parent row into its child rows.
#[derive(Clone, Debug)]
enum KeyValue {
    UInt(u64),
    Int(i64),
    Str(Box<str>),
    Bool(bool),
    Null,
}

/// A row's key values: a few, kept inline (no allocation per row).
type Keys = smallvec::SmallVec<[KeyValue; 3]>;

/// Where the visitor is.
#[derive(Debug)]
enum Frame {
    /// Filling a row of `table`: slot `slot` comes next. `structs` counts the nested
    /// records open inside it; `keys` holds its key values, for its child rows.
    Row {
        table: usize,
        slot: usize,
        structs: usize,
        keys: Keys,
    },
    /// Inside a list of plain values of column `col` of `table`.
    List { table: usize, col: usize },
    /// Inside a child table's list of rows (the parent row is the frame below).
    Child { table: usize },
}

/// Every table of an export and the visitor that fills them.
pub(crate) struct Tables {
    pub(crate) tables: Vec<Table>,
    /// Table indices of the record reader's tables (by `Record::table`).
    top: Vec<usize>,
    stack: Vec<Frame>,
    /// Where full batches go.
    out: Option<Writer>,
    /// The first error of `out`, reported by [`Tables::check`].
    error: Option<Error>,
    /// Instead of a writer: full batches are kept here, for the caller to take (Arrow
    /// record batches rather than files).
    pub(crate) queue: Option<std::collections::VecDeque<Batch>>,
    /// Per table: its rows are not wanted (no columns filled for a child table, no batches
    /// kept), when only some tables are asked for.
    pub(crate) skip: Vec<bool>,
    batch_rows: usize,
    batch_bytes: usize,
    /// Buffers of encoded batches, for the next ones.
    pub(crate) spare: Spare,
}

impl Tables {
    /// Plans the output tables of a record reader's schemas: the schemas themselves, then
    /// every child table they reach (same-named child tables with the same columns merge).
    pub(crate) fn new(schemas: &[Arc<Schema>], batch_rows: usize, batch_bytes: usize) -> Tables {
        let mut t = Tables {
            tables: Vec::new(),
            top: Vec::new(),
            stack: Vec::new(),
            out: None,
            error: None,
            queue: None,
            skip: Vec::new(),
            batch_rows: batch_rows.max(1),
            batch_bytes,
            spare: Spare::default(),
        };
        for s in schemas {
            let index = t.plan(s, None);
            t.top.push(index);
        }
        t
    }

    /// Plans `schema` as a record table (`parent_keys` is `None`) or as a child table whose
    /// rows start with `parent_keys`; returns its index.
    fn plan(&mut self, schema: &Arc<Schema>, parent_keys: Option<&[Field]>) -> usize {
        let is_child = parent_keys.is_some();
        let parent_keys = parent_keys.unwrap_or_default();
        if let Some(i) = self.tables.iter().position(|t| {
            t.name == schema.name
                && *t.source == **schema
                && t.keys == parent_keys.len()
                && t.schema
                    .fields()
                    .iter()
                    .zip(parent_keys)
                    .all(|(a, k)| *a.name() == *k.name)
        }) {
            return i;
        }
        let mut fields: Vec<ArrowField> = Vec::new();
        for k in parent_keys {
            if let Some(ty) = arrow_type(&k.ty) {
                fields.push(ArrowField::new(k.name.to_string(), ty, k.nullable));
            }
        }
        let keys = fields.len();
        let index = self.tables.len();
        // A placeholder keeps the index while child tables are planned.
        self.tables.push(Table {
            name: schema.name.to_string(),
            schema: Arc::new(ArrowSchema::empty()),
            source: Arc::clone(schema),
            keys,
            delta: Vec::new(),
            stats: Vec::new(),
            shown: Vec::new(),
            carrier: false,
            slots: Vec::new(),
            columns: Vec::new(),
            rows: 0,
            ragged: false,
        });
        let mut slots = Vec::new();
        let own_keys: Vec<Field> = schema.keys().cloned().collect();
        let mut stats = vec![true; fields.len()];
        let mut shown: Vec<bool> = parent_keys.iter().map(|k| k.json != Json::Skip).collect();
        let mut plan = Plan {
            fields: &mut fields,
            stats: &mut stats,
            shown: &mut shown,
            slots: &mut slots,
        };
        self.plan_fields(schema, Nesting::default(), &own_keys, &mut plan);

        let columns = fields.iter().map(|f| Column::new(f.data_type())).collect();
        let delta = fields
            .iter()
            .enumerate()
            .map(|(n, f)| {
                let wide = matches!(f.data_type(), DataType::UInt64 | DataType::Int64);
                wide && (!is_child || n < keys)
            })
            .collect();
        if let Some(t) = self.tables.get_mut(index) {
            t.delta = delta;
            t.stats = stats;
            t.shown = shown;
            t.carrier = !is_child
                && slots.iter().any(|s| matches!(s, Slot::Child { .. }))
                && slots
                    .iter()
                    .all(|s| matches!(s, Slot::Child { .. } | Slot::Value { key: true, .. }));
            t.schema = Arc::new(ArrowSchema::new(fields));
            t.slots = slots;
            t.columns = columns;
        }
        index
    }

    fn plan_fields(
        &mut self,
        schema: &Schema,
        outer: Nesting,
        own_keys: &[Field],
        plan: &mut Plan<'_>,
    ) {
        for f in &schema.fields {
            let nullable = f.nullable || outer.nullable;
            let hidden = f.json == Json::Skip || outer.hidden;
            match &f.ty {
                Type::Struct(s) => {
                    let at = plan.slots.len();
                    plan.slots.push(Slot::Struct { span: 0 });
                    let inner = Nesting {
                        nullable,
                        nested: true,
                        hidden,
                    };
                    self.plan_fields(s, inner, own_keys, plan);
                    let span = plan.slots.len().saturating_sub(at).saturating_sub(1);
                    if let Some(slot) = plan.slots.get_mut(at) {
                        *slot = Slot::Struct { span };
                    }
                }
                Type::Rows(child) => {
                    let table = self.plan(child, Some(own_keys));
                    plan.slots.push(Slot::Child { table });
                }
                ty => {
                    let Some(arrow) = arrow_type(ty) else {
                        continue;
                    };
                    let col = plan.fields.len();
                    plan.fields
                        .push(ArrowField::new(f.name.to_string(), arrow, nullable));
                    plan.stats.push(!outer.nested);
                    plan.shown.push(!hidden);
                    plan.slots.push(if matches!(ty, Type::List(_)) {
                        Slot::List { col }
                    } else {
                        Slot::Value { col, key: f.key }
                    });
                }
            }
        }
    }

    /// Whether output table `table` is `wanted` or holds it as a child table (at any depth).
    pub(crate) fn reaches(&self, table: usize, wanted: usize) -> bool {
        let mut todo = vec![table];
        let mut seen = vec![false; self.tables.len()];
        while let Some(t) = todo.pop() {
            if t == wanted {
                return true;
            }
            match seen.get_mut(t) {
                Some(s) if !*s => *s = true,
                _ => continue,
            }
            if let Some(t) = self.tables.get(t) {
                todo.extend(t.slots.iter().filter_map(|s| match s {
                    Slot::Child { table } => Some(*table),
                    _ => None,
                }));
            }
        }
        false
    }

    /// The output table of the record reader's table `table`.
    pub(crate) fn top(&self, table: usize) -> Option<usize> {
        self.top.get(table).copied()
    }

    /// Appends one record of output table `table`.
    pub(crate) fn append(&mut self, table: usize, row: &dyn trace_model::schema::Row) {
        self.stack.clear();
        self.stack.push(Frame::Row {
            table,
            slot: 0,
            structs: 0,
            keys: Keys::new(),
        });
        row.visit(self);
        let slot = match self.stack.first() {
            Some(Frame::Row { slot, .. }) => *slot,
            _ => 0,
        };
        self.end_of_row(table, slot);
        self.stack.clear();
    }

    /// Completes a row of `table` that stopped at slot `slot`: when the row skipped slots
    /// (a missing nested record, or a row shorter than its schema), the columns it left
    /// unfilled get nulls, so every column keeps the same length.
    fn end_of_row(&mut self, table: usize, slot: usize) {
        let Some(t) = self.tables.get_mut(table) else {
            return;
        };
        t.rows = t.rows.saturating_add(1);
        if slot != t.slots.len() || std::mem::take(&mut t.ragged) {
            let rows = t.rows;
            for c in &mut t.columns {
                while c.len() < rows {
                    c.null();
                }
            }
        }
        // Variable-length values are weighed every so many rows: a batch is cut at a
        // row count or a byte size, whichever comes first.
        let full = t.rows >= self.batch_rows
            || (t.rows % 1024 == 0
                && t.columns.iter().map(Column::heap_bytes).sum::<usize>() >= self.batch_bytes);
        if full {
            self.flush(table);
        }
    }

    /// Hands the buffered rows of `table` to the writer.
    pub(crate) fn flush(&mut self, table: usize) {
        let Some(t) = self.tables.get_mut(table) else {
            return;
        };
        if t.rows == 0 {
            return;
        }
        let rows = std::mem::take(&mut t.rows);
        let columns: Vec<ArrayRef> = t.columns.iter_mut().map(Column::finish).collect();
        if t.carrier || self.skip.get(table).copied().unwrap_or(false) {
            return;
        }
        let batch = Batch {
            table,
            columns,
            rows,
        };
        if let Some(q) = self.queue.as_mut() {
            q.push_back(batch);
            return;
        }
        self.send(batch);
    }

    /// Hands a batch to the writer (the first error is kept for [`Tables::check`]).
    pub(crate) fn send(&mut self, batch: Batch) {
        let table = batch.table;
        if !self.with_writer(|out| out.write(batch)) {
            return;
        }
        // Written in this thread, the batch's 64-bit buffers are spare again: its columns
        // take them back rather than growing fresh ones.
        if let Some(t) = self.tables.get_mut(table) {
            for c in &mut t.columns {
                if let Column::Int(c) = c
                    && c.buf.values.capacity() == 0
                    && let Some(v) = self.spare.take(0)
                {
                    c.buf.values = v;
                }
            }
        }
    }

    /// Ends the row group in progress of every table (after its buffered rows).
    pub(crate) fn end_groups(&mut self) {
        for t in 0..self.tables.len() {
            self.flush(t);
        }
        let tables = self.tables.len();
        self.with_writer(|out| out.end_groups(tables));
    }

    /// Writes a row group of `table` encoded elsewhere, after the rows before it.
    pub(crate) fn put(&mut self, table: usize, group: Group) {
        self.flush(table);
        self.with_writer(|out| out.put(table, group));
    }

    /// Hands the writer to `f` unless there is none or an earlier call failed, keeping the
    /// first error for [`Tables::check`]; whether it went through.
    fn with_writer(&mut self, f: impl FnOnce(&mut Writer) -> Result<(), Error>) -> bool {
        if self.error.is_some() {
            return false;
        }
        let Some(out) = self.out.as_mut() else {
            return false;
        };
        match f(out) {
            Ok(()) => true,
            Err(e) => {
                self.error = Some(e);
                false
            }
        }
    }

    /// Where full batches go, if set.
    pub(crate) fn writer(&mut self) -> Option<&mut Writer> {
        self.out.as_mut()
    }

    /// Sets where full batches go.
    pub(crate) fn set_writer(&mut self, out: Writer) {
        self.out = Some(out);
    }

    /// The writer's first error, if any.
    pub(crate) fn check(&mut self) -> Result<(), Error> {
        self.error.take().map_or(Ok(()), Err)
    }

    /// Flushes every table and returns the writer.
    pub(crate) fn into_writer(mut self) -> Result<Option<Writer>, Error> {
        for t in 0..self.tables.len() {
            self.flush(t);
        }
        self.check()?;
        Ok(self.out.take())
    }

    /// The column the next value of the current frame goes to, moving past its slot, and
    /// whether it is a key. `None` when the value has no column (a mismatch between a row
    /// and its schema, which drops the value rather than failing).
    #[inline]
    fn next_value(&mut self) -> Option<(&mut Column, Option<&mut Keys>)> {
        match self.stack.last_mut()? {
            Frame::Row {
                table, slot, keys, ..
            } => {
                let t = self.tables.get_mut(*table)?;
                let s = t.slots.get(*slot).copied();
                *slot = slot.saturating_add(1);
                match s? {
                    Slot::Value { col, key } => {
                        let c = t.columns.get_mut(col)?;
                        Some((c, key.then_some(keys)))
                    }
                    _ => None,
                }
            }
            Frame::List { table, col } => {
                let t = self.tables.get_mut(*table)?;
                match t.columns.get_mut(*col)? {
                    Column::List(l) => {
                        l.len = l.len.saturating_add(1);
                        Some((&mut l.values, None))
                    }
                    _ => None,
                }
            }
            Frame::Child { .. } => None,
        }
    }
}

/// Records at most this many at a time through a reader's typed fast path: a few
/// thousand rows of child tables past a batch's size at most.
const FILL_MAX: usize = 4096;

/// Rows reserved at most in a record table's integer columns at the start of a batch.
const RESERVE_ROWS: usize = 1 << 16;

/// Bytes reserved per row in a record table's byte-string columns at the start of a batch
/// (an x86 instruction is 1 to 15 bytes, a few on average).
const BYTES_PER_VALUE: usize = 8;

impl Tables {
    /// Up to a few thousand records of `records` (and `limit`) through its typed fast path
    /// ([`trace_model::Records::fill_columns`]): how many (0 at the end) or the error that ends
    /// the input; `None` when the reader has none (the caller visits a record instead).
    pub(crate) fn fill(
        &mut self,
        records: &mut dyn trace_model::Records,
        limit: usize,
    ) -> Option<Result<usize, Error>> {
        let room = records
            .tables()
            .iter()
            .enumerate()
            .filter_map(|(n, _)| self.top(n).and_then(|t| self.tables.get(t)))
            .map(|t| self.batch_rows.saturating_sub(t.rows))
            .min()
            .unwrap_or(1)
            .clamp(1, FILL_MAX)
            .min(limit.max(1));
        let filled = records.fill_columns(self, room)?;
        // The rows the reader appended, as the longest column of each table says; a
        // shorter column gets missing values, so every column keeps the same length.
        for table in 0..self.tables.len() {
            let Some(t) = self.tables.get_mut(table) else {
                continue;
            };
            let rows = t.columns.iter().map(Column::len).max().unwrap_or(0);
            if rows == t.rows {
                continue;
            }
            for c in &mut t.columns {
                while c.len() < rows {
                    c.null();
                }
            }
            t.rows = rows;
            let full = t.rows >= self.batch_rows
                || t.columns.iter().map(Column::heap_bytes).sum::<usize>() >= self.batch_bytes;
            if full {
                self.flush(table);
            }
        }
        Some(filled)
    }
}

/// The column a value slot fills.
fn value_column<'c>(columns: &'c mut [Column], slot: &Slot) -> Option<&'c mut Column> {
    match slot {
        Slot::Value { col, .. } => columns.get_mut(*col),
        _ => None,
    }
}

impl trace_model::schema::ColumnSink for Tables {
    fn columns(&mut self, table: usize) -> Option<Columns<'_>> {
        let rec = self.top(table)?;
        let t = self.tables.get(rec)?;
        // The child tables of the record's own fields (field index, table, field name); one
        // inside a nested record, or a table two fields share, is left to the visiting path.
        let mut children: Vec<(usize, usize, Cow<'static, str>)> = Vec::new();
        let mut slot = 0usize;
        for (field, f) in t.source.fields.iter().enumerate() {
            match t.slots.get(slot) {
                Some(Slot::Struct { span }) => {
                    let inner = t
                        .slots
                        .get(slot.saturating_add(1)..slot.saturating_add(1).saturating_add(*span));
                    if inner.is_some_and(|s| s.iter().any(|s| matches!(s, Slot::Child { .. }))) {
                        return None;
                    }
                    slot = slot.saturating_add(1).saturating_add(*span);
                }
                Some(Slot::Child { table }) => {
                    if !self.skip.get(*table).copied().unwrap_or(false) {
                        children.push((field, *table, f.name.clone()));
                    }
                    slot = slot.saturating_add(1);
                }
                Some(_) => slot = slot.saturating_add(1),
                None if matches!(f.ty, Type::Rows(_) | Type::Struct(_)) => return None,
                None => {}
            }
        }
        if children.iter().any(|(_, c, _)| *c == rec)
            || children.iter().enumerate().any(|(k, (_, c, _))| {
                children
                    .iter()
                    .skip(k.saturating_add(1))
                    .any(|(_, d, _)| d == c)
            })
        {
            return None;
        }
        let mut record = Vec::new();
        let mut child_cols: Vec<(usize, Cow<'static, str>, Vec<Col<'_>>)> = Vec::new();
        // A batch's integer columns at their size from its start: growing them as rows
        // come moves each several times (a tenth of the fast path's time).
        let reserve = self.batch_rows.min(RESERVE_ROWS);
        let spare = &self.spare;
        for (index, t) in self.tables.iter_mut().enumerate() {
            // Small integer columns (of a table just flushed, or of a part whose first row
            // came the visiting way, after a seek) take an encoded batch's buffer: its pages
            // are already the process's.
            for c in &mut t.columns {
                if let Column::Int(c) = c
                    && c.buf.values.capacity() < reserve
                    && let Some(mut v) = spare.take(reserve)
                {
                    v.extend_from_slice(&c.buf.values);
                    c.buf.values = v;
                }
            }
            if index == rec {
                // Also when a row came first the visiting way (as after a seek), which
                // made the columns small: growing them to the batch's size cost as much
                // again in copies and fresh pages.
                for c in &mut t.columns {
                    match c {
                        Column::Int(c) if c.buf.values.capacity() < reserve => {
                            let v = &mut c.buf.values;
                            v.reserve_exact(reserve.saturating_sub(v.len()));
                        }
                        // Byte strings (x64dbg opcodes) at a few bytes a value; past that
                        // they grow as they come.
                        Column::Bytes(b) if b.offsets.capacity() < reserve => {
                            b.offsets
                                .reserve_exact(reserve.saturating_sub(b.offsets.len()));
                            let bytes = reserve.saturating_mul(BYTES_PER_VALUE);
                            b.data.reserve(bytes.saturating_sub(b.data.len()));
                        }
                        _ => {}
                    }
                }
                record = t.columns.iter_mut().map(Column::as_col).collect();
            } else if let Some((field, _, name)) = children.iter().find(|(_, c, _)| *c == index) {
                let cols = t.columns.iter_mut().map(Column::as_col).collect();
                child_cols.push((*field, name.clone(), cols));
            }
        }
        child_cols.sort_by_key(|(field, _, _)| *field);
        Some(Columns {
            record,
            children: child_cols
                .into_iter()
                .map(|(_, name, cols)| (name, cols))
                .collect(),
        })
    }
}

impl Visitor for Tables {
    #[inline]
    fn uint(&mut self, v: u64) {
        if let Some((c, keys)) = self.next_value() {
            c.uint(v);
            if let Some(k) = keys {
                k.push(KeyValue::UInt(v));
            }
        }
    }

    fn int(&mut self, v: i64) {
        if let Some((c, keys)) = self.next_value() {
            c.int(v);
            if let Some(k) = keys {
                k.push(KeyValue::Int(v));
            }
        }
    }

    fn bool(&mut self, v: bool) {
        if let Some((c, keys)) = self.next_value() {
            c.bool(v);
            if let Some(k) = keys {
                k.push(KeyValue::Bool(v));
            }
        }
    }

    fn bytes(&mut self, v: &[u8]) {
        if let Some((c, _)) = self.next_value() {
            c.bytes(v);
        }
    }

    fn str(&mut self, v: &str) {
        if let Some((c, keys)) = self.next_value() {
            c.str(v);
            if let Some(k) = keys {
                k.push(KeyValue::Str(v.into()));
            }
        }
    }

    fn null(&mut self) {
        let Some(Frame::Row {
            table, slot, keys, ..
        }) = self.stack.last_mut()
        else {
            if let Some((c, _)) = self.next_value() {
                c.null();
            }
            return;
        };
        let Some(t) = self.tables.get_mut(*table) else {
            return;
        };
        let s = t.slots.get(*slot).copied();
        *slot = slot.saturating_add(1);
        match s {
            Some(Slot::Value { col, key }) => {
                if let Some(c) = t.columns.get_mut(col) {
                    c.null();
                }
                if key {
                    keys.push(KeyValue::Null);
                }
            }
            Some(Slot::List { col }) => {
                if let Some(c) = t.columns.get_mut(col) {
                    c.null();
                }
            }
            // A missing nested record: its columns are filled with nulls at the row's end.
            Some(Slot::Struct { span }) => {
                *slot = slot.saturating_add(span);
                t.ragged = true;
            }
            // A missing child table: no child rows.
            Some(Slot::Child { .. }) | None => {}
        }
    }

    fn begin_list(&mut self) {
        let Some(Frame::Row { table, slot, .. }) = self.stack.last_mut() else {
            return;
        };
        let table = *table;
        let s = self
            .tables
            .get(table)
            .and_then(|t| t.slots.get(*slot))
            .copied();
        *slot = slot.saturating_add(1);
        match s {
            Some(Slot::List { col }) => self.stack.push(Frame::List { table, col }),
            // An unwanted child table: its rows go nowhere (as for a list the schema lacks).
            Some(Slot::Child { table }) if self.skip.get(table).copied().unwrap_or(false) => {
                self.stack.push(Frame::Child { table: usize::MAX });
            }
            Some(Slot::Child { table }) => self.stack.push(Frame::Child { table }),
            // A list the schema does not have: its values are dropped.
            _ => self.stack.push(Frame::Child { table: usize::MAX }),
        }
    }

    fn end_list(&mut self) {
        if let Some(Frame::List { table, col }) = self.stack.pop()
            && let Some(Column::List(l)) = self
                .tables
                .get_mut(table)
                .and_then(|t| t.columns.get_mut(col))
        {
            l.nulls.append_non_null();
            l.offsets.push(offset32(l.len));
        }
    }

    fn begin_row(&mut self) {
        let child = match self.stack.last_mut() {
            Some(Frame::Child { table }) => *table,
            Some(Frame::Row { structs, slot, .. }) => {
                // A nested record: its fields are the slots that follow.
                *structs = structs.saturating_add(1);
                *slot = slot.saturating_add(1);
                return;
            }
            _ => return,
        };
        // The parent row, below the child frame, holds the keys.
        let keys: &[KeyValue] = match self.stack.iter().rev().nth(1) {
            Some(Frame::Row { keys, .. }) => keys,
            _ => &[],
        };
        if let Some(t) = self.tables.get_mut(child) {
            // A key the parent has not visited yet (a schema breaking the keys-first rule)
            // is missing rather than misplaced.
            let mut keys = keys.iter();
            for c in t.columns.iter_mut().take(t.keys) {
                match keys.next().unwrap_or(&KeyValue::Null) {
                    KeyValue::UInt(v) => c.uint(*v),
                    KeyValue::Int(v) => c.int(*v),
                    KeyValue::Str(v) => c.str(v),
                    KeyValue::Bool(v) => c.bool(*v),
                    KeyValue::Null => c.null(),
                }
            }
        }
        // Rows of a list the schema lacks go to no table and take no values.
        self.stack.push(Frame::Row {
            table: child,
            slot: 0,
            structs: 0,
            keys: Keys::new(),
        });
    }

    fn rows(&mut self, runs: &[Run<'_>]) {
        // The common case in one loop: a child table of keys and integer columns, one per
        // run.
        if let [.., Frame::Row { keys, .. }, Frame::Child { table }] = self.stack.as_slice()
            && let Some(t) = self.tables.get_mut(*table)
            && t.keys == keys.len()
            && t.slots.len() == runs.len()
            && t.slots.iter().enumerate().all(
                |(k, s)| matches!(s, Slot::Value { col, .. } if *col == t.keys.saturating_add(k)),
            )
            && t.columns.iter().all(|c| matches!(c, Column::Int(_)))
            && keys.iter().all(|k| matches!(k, KeyValue::UInt(_)))
        {
            let table = *table;
            let len = run_len(runs);
            let mut done = 0usize;
            while done < len {
                let Some(t) = self.tables.get_mut(table) else {
                    return;
                };
                // Up to a batch's worth, then hand it on (a chunk of millions of edges).
                let room = self.batch_rows.saturating_sub(t.rows).max(1);
                let n = room.min(len.saturating_sub(done));
                let mut cols = t.columns.iter_mut();
                let keys = match self.stack.iter().rev().nth(1) {
                    Some(Frame::Row { keys, .. }) => keys.as_slice(),
                    _ => &[],
                };
                for k in keys {
                    if let (Some(Column::Int(c)), KeyValue::UInt(v)) = (cols.next(), k) {
                        let values = &mut c.buf.values;
                        values.resize(values.len().saturating_add(n), *v);
                    }
                }
                for run in runs {
                    let Some(Column::Int(c)) = cols.next() else {
                        continue;
                    };
                    match run {
                        Run::Counting(first) => {
                            let start = first.wrapping_add(done as u64);
                            c.buf
                                .values
                                .extend((0u64..n as u64).map(|k| start.wrapping_add(k)));
                        }
                        Run::UInts(values) => {
                            let end = done.saturating_add(n);
                            c.buf
                                .values
                                .extend_from_slice(values.get(done..end).unwrap_or_default());
                        }
                    }
                }
                t.rows = t.rows.saturating_add(n);
                done = done.saturating_add(n);
                if t.rows >= self.batch_rows {
                    self.flush(table);
                }
            }
            return;
        }
        rows_one_by_one(self, runs);
    }

    fn row(&mut self, cells: &[Cell<'_>]) {
        // The common case at once: a struct of plain columns filled in order.
        if let Some(Frame::Row { table, slot, .. }) = self.stack.last_mut()
            && let Some(t) = self.tables.get_mut(*table)
            && let Some(Slot::Struct { span }) = t.slots.get(*slot).copied()
            && span == cells.iter().map(Cell::width).sum::<usize>()
        {
            let first = slot.saturating_add(1);
            let mut slots = t.slots.iter().skip(first);
            let columns = &mut t.columns;
            for cell in cells {
                if let Cell::UInts(values) = *cell {
                    for (&v, s) in values.iter().zip(slots.by_ref()) {
                        if let Some(c) = value_column(columns, s) {
                            c.uint(v);
                        }
                    }
                } else if let Some(c) = slots.next().and_then(|s| value_column(columns, s)) {
                    match *cell {
                        Cell::UInt(v) => c.uint(v),
                        Cell::Str(v) => c.str(v),
                        Cell::Null | Cell::UInts(_) => c.null(),
                    }
                }
            }
            *slot = first.saturating_add(span);
            return;
        }
        row_one_by_one(self, cells);
    }

    fn end_row(&mut self) {
        match self.stack.last_mut() {
            Some(Frame::Row { structs, .. }) if *structs > 0 => {
                *structs = structs.saturating_sub(1);
            }
            Some(&mut Frame::Row { table, slot, .. }) => {
                self.stack.pop();
                self.end_of_row(table, slot);
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{NullBuffer, ascending, validity};

    #[test]
    fn ascending_is_every_pair_in_order() {
        let mut cases: Vec<Vec<i32>> =
            vec![vec![], vec![0], vec![0, 0, 3], vec![0, 2, 1], vec![5, 4]];
        // A descent at each place of a run longer than a vector of comparisons.
        for at in 1..40 {
            let mut v: Vec<i32> = (0..40).collect();
            v[at] = v[at - 1] - 1;
            cases.push(v);
        }
        cases.push((0..40).collect());
        for v in cases {
            assert_eq!(ascending(&v), v.windows(2).all(|w| w[0] <= w[1]), "{v:?}");
        }
    }

    #[test]
    fn validity_clears_the_missing_rows_in_order_and_inside_the_values() {
        let valid =
            |v: &NullBuffer, len: usize| (0..len).map(|i| v.is_valid(i)).collect::<Vec<_>>();
        assert!(validity(4, &[]).is_none());
        let v = validity(6, &[1, 4]).unwrap();
        assert_eq!(valid(&v, 6), [true, false, true, true, false, true]);
        assert_eq!(v.null_count(), 2);
        // Entries out of order or past the values (a reader that cut them short) are
        // passed over.
        let v = validity(4, &[2, 1, 2, 9]).unwrap();
        assert_eq!(valid(&v, 4), [true, true, false, true]);
        assert_eq!(v.null_count(), 1);
        assert!(validity(3, &[5, 7]).is_none());
    }
}
