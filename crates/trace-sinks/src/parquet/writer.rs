//! Arrow batches into Parquet files: one folder per table, row groups encoded on the thread
//! that built their rows (or one per table), files cut by size or row count.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
use std::thread::JoinHandle;

use arrow_array::{Array, ArrayRef};
use arrow_schema::Schema as ArrowSchema;
use parquet::arrow::ArrowSchemaConverter;
use parquet::arrow::arrow_writer::{
    ArrowColumnChunk, ArrowColumnWriter, ArrowRowGroupWriterFactory, compute_leaves,
};
use parquet::file::properties::{EnabledStatistics, WriterProperties};
use parquet::file::writer::SerializedFileWriter;

use super::ParquetOptions;
use super::columns::Spare;
use trace_model::Error;

/// A Parquet error as ours: the sink's failures are output failures.
pub(crate) fn pq(e: parquet::errors::ParquetError) -> Error {
    Error::io("writing Parquet", std::io::Error::other(e))
}

/// How one table's files are laid out and encoded.
pub(crate) struct Layout {
    /// The table (folder) name.
    pub(crate) name: String,
    /// Its columns.
    pub(crate) schema: Arc<ArrowSchema>,
    /// Per column: delta-encode it (see [`encodings`]).
    pub(crate) delta: Vec<bool>,
    /// Per column: write min/max statistics.
    pub(crate) stats: Vec<bool>,
    /// Whether the table has files at all (not for carrier tables).
    pub(crate) written: bool,
}

/// One batch of a table's rows, as Arrow arrays in column order.
pub(crate) struct Batch {
    pub(crate) table: usize,
    pub(crate) columns: Vec<ArrayRef>,
    pub(crate) rows: usize,
}

/// What was written of one table.
#[derive(Clone, Debug, Default)]
pub(crate) struct Written {
    pub(crate) rows: u64,
    pub(crate) files: u32,
    pub(crate) bytes: u64,
}

/// How one table's columns are encoded: the same for its encoders and its files.
#[derive(Debug)]
struct Plan {
    schema: Arc<ArrowSchema>,
    /// The properties every table starts from.
    base: WriterProperties,
    /// Per column: delta-encode it unless the first rows of its row group say otherwise.
    delta: Vec<bool>,
    /// Per column: write min/max statistics.
    stats: Vec<bool>,
}

impl Plan {
    /// The properties of a row group whose first rows are `first`: the encodings they
    /// suit (see [`prefers_delta`]), with the Arrow schema in the files' metadata so that
    /// Arrow readers get the dictionary-encoded and unsigned types back exactly. Chosen per
    /// row group, so that a group is encoded the same wherever and whenever it is built.
    fn props(&self, first: &[ArrayRef]) -> Arc<WriterProperties> {
        let mut delta = self.delta.clone();
        for (d, column) in delta.iter_mut().zip(first) {
            if let Some(prefers) = prefers_delta(column) {
                *d = prefers;
            }
        }
        let mut props = encodings(&self.schema, &delta, &self.stats, self.base.clone());
        parquet::arrow::add_encoded_arrow_schema_to_metadata(&self.schema, &mut props);
        Arc::new(props)
    }

    /// A Parquet file writer of these columns over `out`.
    fn file<W: Write + Send>(
        &self,
        out: W,
        props: &Arc<WriterProperties>,
    ) -> Result<SerializedFileWriter<W>, Error> {
        let parquet_schema = ArrowSchemaConverter::new()
            .with_coerce_types(props.coerce_types())
            .convert(&self.schema)
            .map_err(pq)?;
        SerializedFileWriter::new(out, parquet_schema.root_schema_ptr(), Arc::clone(props))
            .map_err(pq)
    }
}

/// A closed row group of one table: its column chunks, encoded and compressed, ready to be
/// copied into a file.
pub(crate) struct Group {
    chunks: Vec<ArrowColumnChunk>,
    rows: usize,
    /// What it was encoded with (the first group of a file gives the file's).
    props: Arc<WriterProperties>,
}

/// The row group being encoded.
struct Open {
    writers: Vec<ArrowColumnWriter>,
    rows: usize,
    props: Arc<WriterProperties>,
}

/// One table's row groups being encoded: batches in, closed groups out. Groups close at
/// `row_group_rows` rows, where the caller ends one ([`Encoder::end_group`]), and, when
/// files are cut by rows, where a file ends (counted from the encoder's first row: such an
/// encoder takes every row of its table).
pub(crate) struct Encoder {
    plan: Arc<Plan>,
    /// Batches are dropped, nothing is encoded (a carrier table).
    skip: bool,
    /// Rows taken and not encoded yet.
    pending: Pending,
    open: Option<Open>,
    /// Rows encoded.
    rows: u64,
    /// Groups closed and not taken yet.
    closed: Vec<Group>,
    /// Where the buffers of encoded rows go.
    spare: Spare,
}

impl Encoder {
    fn new(plan: Arc<Plan>, skip: bool, spare: &Spare) -> Encoder {
        Encoder {
            plan,
            skip,
            pending: Pending::default(),
            open: None,
            rows: 0,
            closed: Vec::new(),
            spare: spare.clone(),
        }
    }

    /// Takes a batch of the table's rows. They are encoded in calls cut by the rows alone,
    /// wherever the batches were cut (see [`call_len`]), so that the groups do not depend
    /// on how the rows came.
    fn take(&mut self, batch: Batch, options: &ParquetOptions) -> Result<(), Error> {
        if self.skip || batch.rows == 0 {
            return Ok(());
        }
        self.pending.push(batch.columns, batch.rows);
        self.encode_ready(options, false)
    }

    /// Takes what a table's writer is given.
    fn receive(&mut self, message: Message, options: &ParquetOptions) -> Result<(), Error> {
        match message {
            Message::Batch(batch) => self.take(batch, options),
            Message::EndGroup => self.end_group(options),
            Message::Group(group) => {
                // A group built elsewhere starts after the rows before it.
                self.end_group(options)?;
                self.closed.push(group);
                Ok(())
            }
        }
    }

    /// Encodes what is pending and closes the group in progress.
    fn end_group(&mut self, options: &ParquetOptions) -> Result<(), Error> {
        self.encode_ready(options, true)?;
        self.close()
    }

    /// Encodes the calls that are ready (all that is pending, at the `end`), closing
    /// groups where they fill.
    fn encode_ready(&mut self, options: &ParquetOptions, end: bool) -> Result<(), Error> {
        while let Some(rows) = call_len(self, options, end) {
            let Call { columns, done } = self.pending.take(rows, &self.spare)?;
            let open = match self.open.as_mut() {
                Some(open) => open,
                None => {
                    let props = self.plan.props(&columns);
                    // Column writers come from a file writer (its schema and properties);
                    // one over a sink serves a group encoded away from its file.
                    let file = self.plan.file(std::io::sink(), &props)?;
                    let writers =
                        ArrowRowGroupWriterFactory::new(&file, Arc::clone(&self.plan.schema))
                            .create_column_writers(0)
                            .map_err(pq)?;
                    self.open.insert(Open {
                        writers,
                        rows: 0,
                        props,
                    })
                }
            };
            encode(&mut open.writers, &self.plan.schema, &columns)?;
            for c in columns.into_iter().chain(done.into_iter().flatten()) {
                self.spare.give(c);
            }
            open.rows = open.rows.saturating_add(rows);
            self.rows = self.rows.saturating_add(rows as u64);
            let file_full = options
                .rows_per_file
                .is_some_and(|n| self.rows.checked_rem(n) == Some(0));
            if open.rows >= options.row_group_rows || file_full {
                self.close()?;
            }
        }
        Ok(())
    }

    fn close(&mut self) -> Result<(), Error> {
        let Some(Open {
            writers,
            rows,
            props,
        }) = self.open.take()
        else {
            return Ok(());
        };
        let chunks = writers
            .into_iter()
            .map(|w| w.close().map_err(pq))
            .collect::<Result<_, _>>()?;
        self.closed.push(Group {
            chunks,
            rows,
            props,
        });
        Ok(())
    }
}

/// An open part file.
struct Part {
    file: SerializedFileWriter<BufWriter<File>>,
    rows: u64,
}

/// One table's files, made of closed groups.
struct TableFiles {
    dir: PathBuf,
    plan: Arc<Plan>,
    part: Option<Part>,
    written: Written,
    /// No file is made (a carrier table).
    skip: bool,
}

impl TableFiles {
    /// Copies a closed group into the open file (opening one with the group's properties
    /// first), and closes the file where it is full.
    fn append(&mut self, group: Group, options: &ParquetOptions) -> Result<(), Error> {
        if self.skip || group.rows == 0 {
            return Ok(());
        }
        let part = match self.part.as_mut() {
            Some(part) => part,
            None => {
                let part = self.open(&group.props)?;
                self.part.insert(part)
            }
        };
        let mut row_group = part.file.next_row_group().map_err(pq)?;
        for chunk in group.chunks {
            chunk.append_to_row_group(&mut row_group).map_err(pq)?;
        }
        row_group.close().map_err(pq)?;
        part.rows = part.rows.saturating_add(group.rows as u64);
        self.written.rows = self.written.rows.saturating_add(group.rows as u64);
        let full = match options.rows_per_file {
            Some(n) => part.rows >= n,
            None => part.file.bytes_written() as u64 >= options.bytes_per_file,
        };
        if full {
            self.close()?;
        }
        Ok(())
    }

    /// Closes the last file; a table without rows gets one empty file, so that its folder
    /// can be read.
    fn finish(mut self) -> Result<Written, Error> {
        if self.part.is_none() && self.written.files == 0 && !self.skip {
            let props = self.plan.props(&[]);
            self.part = Some(self.open(&props)?);
        }
        self.close()?;
        Ok(self.written)
    }

    fn open(&mut self, props: &Arc<WriterProperties>) -> Result<Part, Error> {
        let path = self
            .dir
            .join(format!("part-{:05}.parquet", self.written.files));
        let file = File::create(&path)
            .map_err(|e| Error::io(format!("cannot create {}", path.display()), e))?;
        let file = self
            .plan
            .file(BufWriter::with_capacity(1 << 20, file), props)?;
        self.written.files = self.written.files.saturating_add(1);
        Ok(Part { file, rows: 0 })
    }

    fn close(&mut self) -> Result<(), Error> {
        let Some(part) = self.part.take() else {
            return Ok(());
        };
        let inner = part.file.into_inner().map_err(pq)?;
        let file = inner
            .into_inner()
            .map_err(|e| Error::io("writing Parquet", e.into_error()))?;
        self.written.bytes = self
            .written
            .bytes
            .saturating_add(file.metadata().map_or(0, |m| m.len()));
        Ok(())
    }
}

/// One table's encoder and files: what the dataset's own writer holds per table.
struct Table {
    encoder: Encoder,
    files: TableFiles,
}

impl Table {
    /// Takes what the dataset's writer is given.
    fn take(&mut self, message: Message, options: &ParquetOptions) -> Result<(), Error> {
        self.encoder.receive(message, options)?;
        for group in self.encoder.closed.drain(..) {
            self.files.append(group, options)?;
        }
        Ok(())
    }

    fn finish(mut self, options: &ParquetOptions) -> Result<Written, Error> {
        self.take(Message::EndGroup, options)?;
        self.files.finish()
    }
}

/// What a table's writer is given.
pub(crate) enum Message {
    /// Rows to encode.
    Batch(Batch),
    /// The group in progress ends.
    EndGroup,
    /// A group encoded elsewhere, to be written after the rows before it.
    Group(Group),
}

/// Every table's encoder and files: a dataset's own writer.
pub(crate) struct Files {
    tables: Vec<Table>,
    options: ParquetOptions,
}

impl Files {
    /// Creates a folder per table under `root`.
    pub(crate) fn create(
        root: &Path,
        tables: &[Layout],
        props: &WriterProperties,
        options: ParquetOptions,
        spare: &Spare,
    ) -> Result<Files, Error> {
        let mut out = Vec::with_capacity(tables.len());
        for Layout {
            name,
            schema,
            delta,
            stats,
            written,
        } in tables
        {
            let dir = root.join(name);
            if *written && !dir.exists() {
                std::fs::create_dir(&dir)
                    .map_err(|e| Error::io(format!("cannot create {}", dir.display()), e))?;
            }
            let plan = Arc::new(Plan {
                schema: Arc::clone(schema),
                base: props.clone(),
                delta: delta.clone(),
                stats: stats.clone(),
            });
            out.push(Table {
                encoder: Encoder::new(Arc::clone(&plan), !written, spare),
                files: TableFiles {
                    dir,
                    plan,
                    part: None,
                    written: Written::default(),
                    skip: !written,
                },
            });
        }
        Ok(Files {
            tables: out,
            options,
        })
    }

    /// The tables' plans, for the encoders of parts built on other threads.
    pub(crate) fn plans(&self) -> Plans {
        Plans {
            tables: self
                .tables
                .iter()
                .map(|t| (Arc::clone(&t.encoder.plan), t.encoder.skip))
                .collect(),
            options: self.options.clone(),
        }
    }

    /// Takes a message for table `table`.
    fn take(&mut self, table: usize, message: Message) -> Result<(), Error> {
        let t = self.tables.get_mut(table).ok_or_else(unknown_table)?;
        t.take(message, &self.options)
    }

    /// Closes every file; a table without rows gets one empty file, so that every table's
    /// folder can be read.
    fn finish(self) -> Result<Vec<Written>, Error> {
        let options = self.options;
        self.tables
            .into_iter()
            .map(|t| t.finish(&options))
            .collect()
    }
}

/// How every table is encoded, and which are skipped: what makes a part's [`Encoders`].
#[derive(Clone, Debug)]
pub(crate) struct Plans {
    tables: Arc<[(Arc<Plan>, bool)]>,
    options: ParquetOptions,
}

impl Plans {
    /// Fresh encoders of every table, giving the buffers of encoded rows to `spare`.
    pub(crate) fn encoders(&self, spare: &Spare) -> Encoders {
        let tables = self
            .tables
            .iter()
            .map(|(plan, skip)| Encoder::new(Arc::clone(plan), *skip, spare))
            .collect();
        Encoders {
            tables,
            options: self.options.clone(),
        }
    }
}

/// Every table's encoder, with no files: the rows of a part, encoded on the thread that
/// built them; [`Encoders::groups`] takes what they closed.
pub(crate) struct Encoders {
    tables: Vec<Encoder>,
    options: ParquetOptions,
}

impl Encoders {
    /// Ends the group in progress of every table and takes every closed group, with its
    /// table, in order.
    pub(crate) fn groups(&mut self) -> Result<Vec<(usize, Group)>, Error> {
        let mut out = Vec::new();
        for (i, t) in self.tables.iter_mut().enumerate() {
            t.end_group(&self.options)?;
            out.extend(t.closed.drain(..).map(|g| (i, g)));
        }
        Ok(out)
    }
}

fn unknown_table() -> Error {
    Error::io(
        "writing Parquet",
        std::io::Error::other("batch of an unknown table"),
    )
}

/// Rows of one table taken and not written yet: the columns of batches, or of what is left
/// of one, in order.
#[derive(Default)]
struct Pending {
    pieces: std::collections::VecDeque<Piece>,
    rows: usize,
    /// Bytes of variable-length values in the pieces.
    bytes: usize,
}

/// A batch, of which the rows from `start` on are pending.
struct Piece {
    /// The batch's columns, whole: their buffers go back to the spare ones once every row
    /// is written.
    columns: Vec<ArrayRef>,
    start: usize,
    rows: usize,
    bytes: usize,
}

impl Piece {
    /// Bytes of variable-length values in the next `rows` pending rows.
    fn bytes_of_next(&self, rows: usize) -> usize {
        if rows == self.rows {
            return self.bytes;
        }
        let head = |c: &ArrayRef| value_bytes(&c.slice(self.start, rows), rows);
        self.columns.iter().map(head).sum()
    }
}

/// The columns of one write call, and batches whose rows are all in it or written before:
/// [`Spare::give`] them once the call's columns are gone.
struct Call {
    columns: Vec<ArrayRef>,
    done: Vec<Vec<ArrayRef>>,
}

impl Pending {
    fn push(&mut self, columns: Vec<ArrayRef>, rows: usize) {
        let bytes = columns.iter().map(|c| value_bytes(c, rows)).sum();
        self.rows = self.rows.saturating_add(rows);
        self.bytes = self.bytes.saturating_add(bytes);
        self.pieces.push_back(Piece {
            columns,
            start: 0,
            rows,
            bytes,
        });
    }

    /// Bytes of variable-length values in the first `rows` rows.
    fn bytes_of_first(&self, rows: usize) -> usize {
        let (mut left, mut bytes) = (rows, 0usize);
        for p in &self.pieces {
            if left == 0 {
                break;
            }
            let n = left.min(p.rows);
            bytes = bytes.saturating_add(p.bytes_of_next(n));
            left = left.saturating_sub(n);
        }
        bytes
    }

    /// Takes the first `rows` rows (at most those pending) as one array per column: the
    /// batch itself when it is exactly that, else slices, joined where they span batches
    /// (64-bit columns into a spare buffer).
    fn take(&mut self, rows: usize, spare: &Spare) -> Result<Call, Error> {
        let mut heads: Vec<Vec<ArrayRef>> = Vec::new();
        let mut done = Vec::new();
        let mut left = rows;
        while left > 0 {
            let Some(p) = self.pieces.front_mut() else {
                break;
            };
            let n = left.min(p.rows);
            let bytes = p.bytes_of_next(n);
            if p.start == 0 && n == p.rows {
                heads.push(std::mem::take(&mut p.columns));
            } else {
                heads.push(p.columns.iter().map(|c| c.slice(p.start, n)).collect());
                p.start = p.start.saturating_add(n);
                p.bytes = p.bytes.saturating_sub(bytes);
            }
            p.rows = p.rows.saturating_sub(n);
            if p.rows == 0
                && let Some(p) = self.pieces.pop_front()
                && !p.columns.is_empty()
            {
                done.push(p.columns);
            }
            left = left.saturating_sub(n);
            self.rows = self.rows.saturating_sub(n);
            self.bytes = self.bytes.saturating_sub(bytes);
        }
        if heads.len() == 1 {
            let columns = heads.pop().unwrap_or_default();
            return Ok(Call { columns, done });
        }
        let width = heads.first().map_or(0, Vec::len);
        let columns = (0..width)
            .map(|c| {
                let arrays: Vec<&dyn Array> = heads
                    .iter()
                    .filter_map(|p| p.get(c).map(AsRef::as_ref))
                    .collect();
                match concat_wide(&arrays, spare) {
                    Some(joined) => Ok(joined),
                    None => arrow_select::concat::concat(&arrays).map_err(|e| pq(e.into())),
                }
            })
            .collect::<Result<Vec<_>, Error>>()?;
        // Copied: whole batches can give their buffers back now.
        for c in heads.into_iter().flatten() {
            spare.give(c);
        }
        Ok(Call { columns, done })
    }
}

/// 64-bit `arrays` joined into a spare buffer (one the writer can give back after, unlike
/// the 64-byte-aligned one Arrow's `concat` allocates); `None` for other types.
fn concat_wide(arrays: &[&dyn Array], spare: &Spare) -> Option<ArrayRef> {
    use arrow_array::cast::AsArray;
    use arrow_array::types::{Int64Type, UInt64Type};
    use arrow_buffer::NullBufferBuilder;
    use arrow_schema::DataType;
    let ty = arrays.first()?.data_type().clone();
    if !matches!(ty, DataType::UInt64 | DataType::Int64)
        || arrays.iter().any(|a| *a.data_type() != ty)
    {
        return None;
    }
    let len: usize = arrays.iter().map(|a| a.len()).sum();
    let mut values = spare.take(len).unwrap_or_else(|| Vec::with_capacity(len));
    for a in arrays {
        if let Some(a) = a.as_primitive_opt::<UInt64Type>() {
            values.extend_from_slice(a.values());
        } else if let Some(a) = a.as_primitive_opt::<Int64Type>() {
            values.extend(a.values().iter().map(|&v| v as u64));
        }
    }
    let nulls = if arrays.iter().any(|a| a.null_count() > 0) {
        let mut b = NullBufferBuilder::new(len);
        for a in arrays {
            match a.nulls() {
                Some(n) => b.append_buffer(n),
                None => b.append_n_non_nulls(a.len()),
            }
        }
        b.finish()
    } else {
        None
    };
    Some(super::columns::wide_array(
        ty == DataType::Int64,
        values,
        nulls,
    ))
}

/// Bytes of the variable-length values (byte strings, strings, list values) of the first
/// `rows` rows of a column: what cuts a write call short of its rows.
fn value_bytes(column: &ArrayRef, rows: usize) -> usize {
    use arrow_array::cast::AsArray;
    use arrow_schema::DataType;
    let span = |offsets: &[i32]| {
        let first = offsets.first().copied().unwrap_or(0);
        let last = offsets.get(rows).copied().unwrap_or(first);
        usize::try_from(last.saturating_sub(first)).unwrap_or(0)
    };
    match column.data_type() {
        DataType::Binary => span(column.as_binary::<i32>().value_offsets()),
        DataType::Utf8 => span(column.as_string::<i32>().value_offsets()),
        DataType::List(_) => span(column.as_list::<i32>().value_offsets()).saturating_mul(8),
        _ => 0,
    }
}

/// Rows at which an encoding call may be cut by bytes: a few pages' worth.
const CALL_STEP: usize = 1024;

/// The rows of the next encoding call of `e`, when they are pending (all that is left, at
/// the `end`): `batch_rows`, fewer where the row group or the file ends first, or the
/// first multiple of [`CALL_STEP`] rows whose variable-length values reach `batch_bytes`.
/// Parquet cuts pages at points counted from the start of each call, so calls cut by the
/// rows alone make the same groups from batches cut anywhere.
fn call_len(e: &Encoder, options: &ParquetOptions, end: bool) -> Option<usize> {
    let pending = &e.pending;
    if pending.rows == 0 {
        return None;
    }
    let group_rows = e.open.as_ref().map_or(0, |o| o.rows);
    let mut target = options
        .batch_rows
        .max(1)
        .min(options.row_group_rows.saturating_sub(group_rows).max(1));
    if let Some(n) = options.rows_per_file {
        let left = n.saturating_sub(e.rows.checked_rem(n).unwrap_or(0)).max(1);
        target = target.min(usize::try_from(left).unwrap_or(usize::MAX));
    }
    if pending.bytes >= options.batch_bytes {
        let upto = target.min(pending.rows);
        let mut rows = CALL_STEP;
        while rows < upto {
            if pending.bytes_of_first(rows) >= options.batch_bytes {
                return Some(rows);
            }
            rows = rows.saturating_add(CALL_STEP);
        }
    }
    if pending.rows >= target {
        Some(target)
    } else {
        end.then_some(pending.rows)
    }
}

/// Whether a 64-bit column is better delta-encoded than dictionary-encoded, judged on a
/// sample of the first rows of its row group. Delta encoding makes runs of equal or nearby values nearly
/// free (indices, offsets, pcs, register state, positions) and costs no hash per value; a
/// dictionary packs values that repeat out of order (the changes of different registers,
/// memory addresses), so it is kept for columns of few distinct values and far jumps.
fn prefers_delta(column: &ArrayRef) -> Option<bool> {
    use arrow_array::cast::AsArray;
    use arrow_array::types::{Int64Type, UInt64Type};
    const SAMPLE: usize = 1 << 16;
    const FEW: usize = 4096;
    let values: Vec<u64> = match column.data_type() {
        arrow_schema::DataType::UInt64 => column
            .as_primitive::<UInt64Type>()
            .values()
            .iter()
            .take(SAMPLE)
            .copied()
            .collect(),
        arrow_schema::DataType::Int64 => column
            .as_primitive::<Int64Type>()
            .values()
            .iter()
            .take(SAMPLE)
            .map(|v| *v as u64)
            .collect(),
        _ => return None,
    };
    if values.len() < 2 {
        return None;
    }
    let near = values
        .windows(2)
        .filter(|w| match w {
            [a, b] => (b.wrapping_sub(*a) as i64).unsigned_abs() < 1 << 15,
            _ => false,
        })
        .count();
    let n = values.len().saturating_sub(1);
    if near.saturating_mul(10) >= n.saturating_mul(9) {
        return Some(true);
    }
    let mut distinct = std::collections::HashSet::with_capacity(FEW);
    for v in &values {
        distinct.insert(*v);
        if distinct.len() > FEW {
            break;
        }
    }
    Some(distinct.len() > FEW && near.saturating_mul(2) >= n)
}

/// Per-column encodings: 64-bit integers delta-encoded where `delta` says (or where the
/// row group's first rows show runs, see [`prefers_delta`]), dictionaries elsewhere; byte strings
/// (opcodes, memory contents) plain, left to the page compression.
fn encodings(
    schema: &ArrowSchema,
    delta: &[bool],
    stats: &[bool],
    props: WriterProperties,
) -> WriterProperties {
    use arrow_schema::DataType;
    use parquet::basic::Encoding;
    use parquet::schema::types::ColumnPath;
    let mut b = props.into_builder();
    for ((f, delta), stats) in schema.fields().iter().zip(delta).zip(stats) {
        let path = ColumnPath::from(f.name().as_str());
        if !stats {
            b = b.set_column_statistics_enabled(path.clone(), EnabledStatistics::None);
        }
        match f.data_type() {
            DataType::UInt64 | DataType::Int64 if *delta => {
                b = b
                    .set_column_dictionary_enabled(path.clone(), false)
                    .set_column_encoding(path, Encoding::DELTA_BINARY_PACKED);
            }
            // Min/max of byte strings and names prune nothing useful and cost a comparison
            // per value.
            DataType::Binary => {
                b = b
                    .set_column_dictionary_enabled(path.clone(), false)
                    .set_column_statistics_enabled(path, EnabledStatistics::None);
            }
            DataType::Dictionary(..) | DataType::Utf8 => {
                b = b.set_column_statistics_enabled(path, EnabledStatistics::None);
            }
            _ => {}
        }
    }
    b.build()
}

/// Encodes one slice of columns into their writers.
fn encode(
    writers: &mut [ArrowColumnWriter],
    schema: &ArrowSchema,
    columns: &[ArrayRef],
) -> Result<(), Error> {
    // One leaf per column: the model has no nested columns but lists of plain values,
    // which are one leaf each.
    let mut writers = writers.iter_mut();
    for (field, array) in schema.fields().iter().zip(columns) {
        for leaf in compute_leaves(field, array).map_err(pq)? {
            let Some(w) = writers.next() else {
                return Err(pq(parquet::errors::ParquetError::General(
                    "more leaves than column writers".into(),
                )));
            };
            w.write(&leaf).map_err(pq)?;
        }
    }
    Ok(())
}

fn poisoned() -> Error {
    Error::io(
        "writing Parquet",
        std::io::Error::other("an encoding thread failed"),
    )
}

/// Where batches go: encoded and written in the caller's thread, handed to a thread per
/// table so that reading the trace and encoding the tables overlap, or encoded in the
/// caller's thread into groups for the dataset's files (a part's). The tables are
/// independent, so each table's thread writes exactly what the one thread would.
pub(crate) enum Writer {
    /// One thread does everything.
    Inline(Box<Files>),
    /// A thread per table encodes and writes; the channels are bounded, so at most a few
    /// batches wait.
    Threads(Vec<TableThread>),
    /// The caller's thread encodes, into groups taken by [`Encoders::groups`].
    Encode(Box<Encoders>),
}

/// One table's writer thread.
pub(crate) struct TableThread {
    send: SyncSender<Message>,
    /// The thread, or why it did not start (reported by `finish`).
    handle: Result<JoinHandle<Result<Written, Error>>, Error>,
}

impl Writer {
    /// A writer for `files`: a thread per table when more than one thread is allowed.
    pub(crate) fn new(files: Files, threads: usize) -> Writer {
        if threads <= 1 {
            return Writer::Inline(Box::new(files));
        }
        let Files { tables, options } = files;
        let threads = tables
            .into_iter()
            .map(|t| {
                let (send, recv) = sync_channel::<Message>(2);
                let options = options.clone();
                let handle = std::thread::Builder::new()
                    .name(format!(
                        "write-{}",
                        t.files
                            .dir
                            .file_name()
                            .map(|n| n.to_string_lossy().into_owned())
                            .unwrap_or_default()
                    ))
                    .spawn(move || write_all(t, &options, &recv))
                    .map_err(|e| Error::io("cannot start a writer thread", e));
                TableThread { send, handle }
            })
            .collect();
        Writer::Threads(threads)
    }

    /// Takes a message for table `table` (or queues it). A writer thread's error shows
    /// here or at `finish`.
    fn send(&mut self, table: usize, message: Message) -> Result<(), Error> {
        match self {
            Writer::Inline(files) => files.take(table, message),
            // A send fails only when the thread stopped on an error; `finish` reports it.
            Writer::Threads(threads) => {
                let t = threads.get(table).ok_or_else(unknown_table)?;
                let _ = t.send.send(message);
                Ok(())
            }
            Writer::Encode(encoders) => {
                let e = encoders.tables.get_mut(table).ok_or_else(unknown_table)?;
                e.receive(message, &encoders.options)
            }
        }
    }

    /// Writes a batch (or queues it).
    pub(crate) fn write(&mut self, batch: Batch) -> Result<(), Error> {
        self.send(batch.table, Message::Batch(batch))
    }

    /// Ends the row group in progress of every table.
    pub(crate) fn end_groups(&mut self, tables: usize) -> Result<(), Error> {
        (0..tables).try_for_each(|t| self.send(t, Message::EndGroup))
    }

    /// Writes a group of table `table` encoded elsewhere, after the rows before it.
    pub(crate) fn put(&mut self, table: usize, group: Group) -> Result<(), Error> {
        self.send(table, Message::Group(group))
    }

    /// Waits for every batch to be written and closes the files (none for encoders).
    pub(crate) fn finish(self) -> Result<Vec<Written>, Error> {
        match self {
            Writer::Inline(files) => files.finish(),
            Writer::Threads(threads) => {
                // Every thread is waited for (none is left writing), the first error kept.
                let written: Vec<_> = threads
                    .into_iter()
                    .map(|TableThread { send, handle }| {
                        drop(send);
                        handle?.join().unwrap_or_else(|_| Err(poisoned()))
                    })
                    .collect();
                written.into_iter().collect()
            }
            Writer::Encode(_) => Ok(Vec::new()),
        }
    }
}

fn write_all(
    mut table: Table,
    options: &ParquetOptions,
    recv: &Receiver<Message>,
) -> Result<Written, Error> {
    for message in recv {
        table.take(message, options)?;
    }
    table.finish(options)
}
