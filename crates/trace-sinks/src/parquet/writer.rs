//! Arrow batches into Parquet files: one folder per table, files cut by size or row count,
//! row groups closed every so many rows, each table encoded in a thread of its own.

use std::fs::File;
use std::io::BufWriter;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
use std::thread::JoinHandle;

use arrow_array::{Array, ArrayRef};
use arrow_schema::Schema as ArrowSchema;
use parquet::arrow::ArrowSchemaConverter;
use parquet::arrow::arrow_writer::{ArrowColumnWriter, ArrowRowGroupWriterFactory, compute_leaves};
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

/// An open part file with its row group in progress.
struct Part {
    file: SerializedFileWriter<BufWriter<File>>,
    factory: ArrowRowGroupWriterFactory,
    /// The column writers of the row group in progress, and its rows.
    group: Option<(Vec<ArrowColumnWriter>, usize)>,
    groups: usize,
    rows: u64,
}

/// One table's files.
struct TableFiles {
    dir: PathBuf,
    schema: Arc<ArrowSchema>,
    /// The properties every table starts from.
    base: WriterProperties,
    /// Per column: delta-encode it unless its first batch says otherwise.
    delta: Vec<bool>,
    /// Per column: write min/max statistics.
    stats: Vec<bool>,
    /// The writer properties, chosen when the first file opens (from the first batch),
    /// with the Arrow schema in the files' metadata so that Arrow readers get the
    /// dictionary-encoded and unsigned types back exactly.
    props: Option<Arc<WriterProperties>>,
    part: Option<Part>,
    written: Written,
    /// Batches are dropped, no file is made (a carrier table).
    skip: bool,
    /// Rows taken and not written yet.
    pending: Pending,
    /// Where the buffers of encoded rows go.
    spare: Spare,
}

/// Every table's files, written in the order batches arrive.
pub(crate) struct Files {
    tables: Vec<TableFiles>,
    options: ParquetOptions,
}

impl Files {
    /// Creates a folder per table under `root`.
    pub(crate) fn create(
        root: &Path,
        tables: &[Layout],
        props: WriterProperties,
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
            out.push(TableFiles {
                dir,
                schema: Arc::clone(schema),
                base: props.clone(),
                delta: delta.clone(),
                stats: stats.clone(),
                props: None,
                skip: !written,
                part: None,
                written: Written::default(),
                pending: Pending::default(),
                spare: spare.clone(),
            });
        }
        Ok(Files {
            tables: out,
            options,
        })
    }

    /// Takes a batch of a table's rows (see [`TableFiles::take`]).
    pub(crate) fn write(&mut self, batch: Batch) -> Result<(), Error> {
        let t = self.tables.get_mut(batch.table).ok_or_else(unknown_table)?;
        t.take(batch, &self.options)
    }

    /// Closes every file; a table without rows gets one empty file, so that every table's
    /// folder can be read.
    pub(crate) fn finish(self) -> Result<Vec<Written>, Error> {
        let options = self.options;
        self.tables
            .into_iter()
            .map(|t| t.finish(&options))
            .collect()
    }
}

fn unknown_table() -> Error {
    Error::io(
        "writing Parquet",
        std::io::Error::other("batch of an unknown table"),
    )
}

impl TableFiles {
    /// Takes a batch of the table's rows. They are written in calls cut by the rows alone,
    /// wherever the batches were cut (see [`call_len`]), so that the files do not depend on
    /// how the rows came: the same bytes from one reader as from several, each of which cut
    /// its own child tables' batches.
    fn take(&mut self, batch: Batch, options: &ParquetOptions) -> Result<(), Error> {
        if self.skip || batch.rows == 0 {
            return Ok(());
        }
        self.pending.push(batch.columns, batch.rows);
        write_ready(self, options, false)
    }

    /// Writes what is pending and closes the last file; a table without rows gets one empty
    /// file, so that its folder can be read.
    fn finish(mut self, options: &ParquetOptions) -> Result<Written, Error> {
        write_ready(&mut self, options, true)?;
        if self.part.is_none() && self.written.files == 0 && !self.skip {
            self.part = Some(open_part(&mut self, &[])?);
        }
        close_part(&mut self)?;
        Ok(self.written)
    }
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

/// Rows at which a write call may be cut by bytes: a few pages' worth.
const CALL_STEP: usize = 1024;

/// The rows of the next write call of table `t`, when they are pending (all that is left,
/// at the `end`): `batch_rows`, fewer where the row group or the file ends first, or the
/// first multiple of [`CALL_STEP`] rows whose variable-length values reach `batch_bytes`.
/// Parquet cuts pages at points counted from the start of each call, so calls cut by the
/// rows alone make the same files from batches cut anywhere.
fn call_len(t: &TableFiles, options: &ParquetOptions, end: bool) -> Option<usize> {
    let pending = &t.pending;
    if pending.rows == 0 {
        return None;
    }
    let (group_rows, part_rows) = t
        .part
        .as_ref()
        .map_or((0, 0), |p| (p.group.as_ref().map_or(0, |g| g.1), p.rows));
    let mut target = options
        .batch_rows
        .max(1)
        .min(options.row_group_rows.saturating_sub(group_rows).max(1));
    if let Some(limit) = options.rows_per_file {
        let left = limit.saturating_sub(part_rows).max(1);
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

/// Writes the calls of table `t` that are ready (all that is pending, at the `end`),
/// closing row groups and files where they fill.
fn write_ready(t: &mut TableFiles, options: &ParquetOptions, end: bool) -> Result<(), Error> {
    while let Some(rows) = call_len(t, options, end) {
        let Call { columns, done } = t.pending.take(rows, &t.spare)?;
        if t.part.is_none() {
            t.part = Some(open_part(t, &columns)?);
        }
        let Some(part) = t.part.as_mut() else {
            break;
        };
        if part.group.is_none() {
            part.group = Some((
                part.factory
                    .create_column_writers(part.groups)
                    .map_err(pq)?,
                0,
            ));
        }
        if let Some((writers, group_rows)) = part.group.as_mut() {
            encode(writers, &t.schema, &columns)?;
            for c in columns.into_iter().chain(done.into_iter().flatten()) {
                t.spare.give(c);
            }
            *group_rows = group_rows.saturating_add(rows);
        }
        part.rows = part.rows.saturating_add(rows as u64);
        t.written.rows = t.written.rows.saturating_add(rows as u64);
        let group_full = part
            .group
            .as_ref()
            .is_some_and(|g| g.1 >= options.row_group_rows);
        let file_full = options.rows_per_file.is_some_and(|n| part.rows >= n);
        if group_full || file_full {
            close_group(part)?;
        }
        let file_full = file_full
            || (options.rows_per_file.is_none()
                && part.file.bytes_written() as u64 >= options.bytes_per_file);
        if file_full {
            close_part(t)?;
        }
    }
    Ok(())
}

/// Whether a 64-bit column is better delta-encoded than dictionary-encoded, judged on a
/// sample of its first batch. Delta encoding makes runs of equal or nearby values nearly
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
/// first batch shows runs, see [`prefers_delta`]), dictionaries elsewhere; byte strings
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

fn open_part(t: &mut TableFiles, first: &[ArrayRef]) -> Result<Part, Error> {
    if t.props.is_none() {
        let mut delta = t.delta.clone();
        for (d, column) in delta.iter_mut().zip(first) {
            if let Some(prefers) = prefers_delta(column) {
                *d = prefers;
            }
        }
        let mut props = encodings(&t.schema, &delta, &t.stats, t.base.clone());
        parquet::arrow::add_encoded_arrow_schema_to_metadata(&t.schema, &mut props);
        t.props = Some(Arc::new(props));
    }
    let props = t
        .props
        .get_or_insert_with(|| Arc::new(WriterProperties::default()));
    let path = t.dir.join(format!("part-{:05}.parquet", t.written.files));
    let file = File::create(&path)
        .map_err(|e| Error::io(format!("cannot create {}", path.display()), e))?;
    let file = BufWriter::with_capacity(1 << 20, file);
    let parquet_schema = ArrowSchemaConverter::new()
        .with_coerce_types(props.coerce_types())
        .convert(&t.schema)
        .map_err(pq)?;
    let file = SerializedFileWriter::new(file, parquet_schema.root_schema_ptr(), Arc::clone(props))
        .map_err(pq)?;
    let factory = ArrowRowGroupWriterFactory::new(&file, Arc::clone(&t.schema));
    t.written.files = t.written.files.saturating_add(1);
    Ok(Part {
        file,
        factory,
        group: None,
        groups: 0,
        rows: 0,
    })
}

fn close_group(part: &mut Part) -> Result<(), Error> {
    let Some((writers, _)) = part.group.take() else {
        return Ok(());
    };
    let mut group = part.file.next_row_group().map_err(pq)?;
    for w in writers {
        w.close()
            .map_err(pq)?
            .append_to_row_group(&mut group)
            .map_err(pq)?;
    }
    group.close().map_err(pq)?;
    part.groups = part.groups.saturating_add(1);
    Ok(())
}

fn close_part(t: &mut TableFiles) -> Result<(), Error> {
    let Some(mut part) = t.part.take() else {
        return Ok(());
    };
    close_group(&mut part)?;
    let inner = part.file.into_inner().map_err(pq)?;
    let file = inner
        .into_inner()
        .map_err(|e| Error::io("writing Parquet", e.into_error()))?;
    t.written.bytes = t
        .written
        .bytes
        .saturating_add(file.metadata().map_or(0, |m| m.len()));
    Ok(())
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

/// Where batches go: encoded in the caller's thread, or handed to a thread per table so
/// that reading the trace and encoding the tables overlap. The tables' files are
/// independent, so each table's thread writes exactly what the one thread would.
pub(crate) enum Writer {
    /// One thread does everything.
    Inline(Box<Files>),
    /// A thread per table encodes; the channels are bounded, so at most a few batches wait.
    Threads(Vec<TableThread>),
}

/// One table's writer thread.
pub(crate) struct TableThread {
    send: SyncSender<Batch>,
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
                let (send, recv) = sync_channel::<Batch>(2);
                let options = options.clone();
                let handle = std::thread::Builder::new()
                    .name(format!(
                        "write-{}",
                        t.dir
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

    /// Writes a batch (or queues it). A writer thread's error shows here or at `finish`.
    pub(crate) fn write(&mut self, batch: Batch) -> Result<(), Error> {
        match self {
            Writer::Inline(files) => files.write(batch),
            // A send fails only when the thread stopped on an error; `finish` reports it.
            Writer::Threads(threads) => {
                let t = threads.get(batch.table).ok_or_else(unknown_table)?;
                let _ = t.send.send(batch);
                Ok(())
            }
        }
    }

    /// Waits for every batch to be written and closes the files.
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
        }
    }
}

fn write_all(
    mut table: TableFiles,
    options: &ParquetOptions,
    recv: &Receiver<Batch>,
) -> Result<Written, Error> {
    for batch in recv {
        table.take(batch, options)?;
    }
    table.finish(options)
}
