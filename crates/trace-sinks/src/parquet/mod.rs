//! Parquet datasets: every record kind of a trace as a folder of Parquet files that DuckDB,
//! Spark, Trino or DataFusion read as one table.
//!
//! The layout is the same for every format:
//!
//! ```text
//! DIR/_tracekit.json              schema version, source, tables, row counts, completeness
//! DIR/<table>/part-00000.parquet  row groups of at most a million rows, with statistics
//! DIR/<table>/part-00001.parquet  (files cut at about 128 MiB, or every --rows-per-file rows)
//! ```
//!
//! The tables are those of the record reader ([`trace_model::Records::tables`]) and every child
//! table ([`trace_model::schema::Type::Rows`]) they hold: a child row starts with its parent's key
//! columns ([`trace_model::schema::Field::key`]), so it joins back to its parent. Nested records
//! ([`trace_model::schema::Type::Struct`]) are flattened into their parent's columns. Integers
//! keep their width and sign (addresses are `UInt64`), byte strings are `Binary`, names are
//! dictionary-encoded strings, lists of plain values are list columns. Every table is
//! written, with an empty file when it has no rows, so engines never miss a folder. Row
//! groups end every [`ParquetOptions::row_group_rows`] rows of their table and, in every
//! table, after every `row_group_rows` records: a child table's row group holds rows of one
//! row group of its parent's, and each group of records is built and encoded on one thread
//! ([`Parts`]), so any number of threads writes the same bytes.
//!
//! [`Dataset`] writes under a temporary name beside `DIR` and renames it when complete: a
//! failed export leaves nothing that looks like a dataset, unless it is finished on purpose
//! as partial (`"complete": false` in `_tracekit.json`).

mod columns;
mod writer;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use parquet::basic::{Compression as ParquetCompression, ZstdLevel};
use parquet::file::properties::{EnabledStatistics, WriterProperties};

use columns::Tables;
use trace_model::schema::{Row, Schema};
use trace_model::{Error, Note, Records};
use writer::{Files, Plans, Writer};

/// The version of the dataset layout and table schemas, in `_tracekit.json`. It changes
/// when a table or column is renamed, removed or retyped (added columns keep it).
///
/// 2: x64dbg `registers` rows name one field each (`value` may be NULL, with `wide` for
/// wider fields), Tenet accesses are numbered by the instruction that made them (the
/// first line's in `memory_before`).
pub const SCHEMA_VERSION: u32 = 2;

/// The name of the dataset's manifest file.
pub const MANIFEST: &str = "_tracekit.json";

/// How Parquet pages are compressed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Compression {
    /// zstd at its fastest level: small files, fast to write and read.
    #[default]
    Zstd,
    /// Snappy: larger files, read by every engine however old.
    Snappy,
    /// No compression.
    None,
}

/// How a dataset is laid out and written.
#[derive(Clone, Debug)]
pub struct ParquetOptions {
    /// Page compression.
    pub compression: Compression,
    /// Start a new file after this many rows; `None` cuts files at about `bytes_per_file`.
    pub rows_per_file: Option<u64>,
    /// Start a new file once this many bytes are written (when `rows_per_file` is `None`).
    pub bytes_per_file: u64,
    /// Rows per row group (the unit engines skip by statistics). Row groups of every table
    /// also end after every `row_group_rows` records, so that a row group of a child table
    /// holds rows of one row group of its parent's, and each is built and encoded apart
    /// from the others (on any thread, [`Parts`]).
    pub row_group_rows: usize,
    /// Rows handed from the reader to the encoder at a time (memory is a few batches).
    pub batch_rows: usize,
    /// Bytes of variable-length values (memory contents, strings) that also end a batch.
    pub batch_bytes: usize,
    /// Threads: 1 encodes the batches as they come; more encode each table in a thread of
    /// its own (the same bytes either way).
    pub threads: usize,
}

impl Default for ParquetOptions {
    fn default() -> ParquetOptions {
        ParquetOptions {
            compression: Compression::Zstd,
            rows_per_file: None,
            bytes_per_file: 128 << 20,
            row_group_rows: 1 << 20,
            batch_rows: 1 << 16,
            batch_bytes: 32 << 20,
            threads: 1,
        }
    }
}

impl ParquetOptions {
    fn properties(&self) -> WriterProperties {
        let compression = match self.compression {
            Compression::Zstd => ParquetCompression::ZSTD(ZstdLevel::default()),
            Compression::Snappy => ParquetCompression::SNAPPY,
            Compression::None => ParquetCompression::UNCOMPRESSED,
        };
        WriterProperties::builder()
            .set_compression(compression)
            .set_created_by(concat!("tracekit ", env!("CARGO_PKG_VERSION")).into())
            .set_statistics_enabled(EnabledStatistics::Page)
            .set_max_row_group_row_count(Some(self.row_group_rows))
            .build()
    }
}

/// Where a dataset's records came from, for its manifest.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct Origin {
    /// The input's file name as given, compression extension included (or `-` for
    /// standard input).
    pub file: String,
    /// The input's size in bytes (on disk: compressed, for a compressed file), when known.
    pub size: Option<u64>,
    /// The size decompressed, for a compressed input read to its end.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub decompressed_size: Option<u64>,
    /// The format's name in the registry.
    pub format: String,
}

impl Origin {
    /// The origin of records of `format` read from `input`; call [`Origin::read`] once
    /// they have been read, for the decompressed size.
    #[must_use]
    pub fn new(input: &trace_model::Input, format: &str) -> Origin {
        Origin {
            file: input.path().and_then(|p| p.file_name()).map_or_else(
                || input.name().to_owned(),
                |n| n.to_string_lossy().into_owned(),
            ),
            size: input.file_len(),
            decompressed_size: None,
            format: format.to_owned(),
        }
    }

    /// Takes in what reading `input` found out: its decompressed size.
    pub fn read(&mut self, input: &trace_model::Input) {
        self.decompressed_size = input.decompressed_len();
    }
}

/// What was written of one table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TableSummary {
    /// The table name (its folder).
    pub name: String,
    /// Rows written.
    pub rows: u64,
    /// Files written.
    pub files: u32,
    /// Bytes written.
    pub bytes: u64,
}

/// What taking records from a reader did ([`Dataset::pull`], [`Batches::pull`]).
#[derive(Debug)]
pub enum Pulled {
    /// This many records were taken.
    Records(usize),
    /// The input has no more records.
    End,
    /// The input is damaged: the error that ends it (the records before it were taken).
    Failed(Error),
}

/// Takes the next records of `records` into `tables`: a run of them at once through the
/// reader's typed fast path when it has one, else one record through `write`.
fn pull(
    tables: &mut Tables,
    records: &mut dyn Records,
    limit: usize,
    write: impl FnOnce(&mut Tables, usize, &dyn Row),
) -> Pulled {
    match tables.fill(records, limit) {
        Some(Ok(0)) => return Pulled::End,
        Some(Ok(n)) => return Pulled::Records(n),
        Some(Err(e)) => return Pulled::Failed(e),
        None => {}
    }
    match records.next_record() {
        None => Pulled::End,
        Some(Err(e)) => Pulled::Failed(e),
        Some(Ok(r)) => {
            write(tables, r.table, r.row());
            Pulled::Records(1)
        }
    }
}

/// Records per part of batches (see [`Parts::records`]).
fn batch_records(options: &ParquetOptions) -> u64 {
    let group = options.row_group_rows.max(1) as u64;
    let most = options.batch_rows.max(1) as u64;
    let fewest = group.div_ceil(most);
    (fewest..=fewest.saturating_mul(4))
        .find(|&k| group.is_multiple_of(k))
        .and_then(|k| group.checked_div(k))
        .unwrap_or(group)
}

/// A Parquet dataset being written.
#[derive(Debug)]
pub struct Dataset {
    dir: PathBuf,
    tmp: PathBuf,
    tables: Option<Tables>,
    parts: Parts,
    /// Records written (rows of the reader's tables): row groups end after every
    /// `row_group_rows` of them.
    records: u64,
    finished: bool,
}

/// How the rows of the next records of a reader are built into a [`Part`] for
/// [`Dataset::append`], on any thread: for a caller that reads parts of one input on
/// several threads ([`trace_model::stretches::Stretches`]). Cloned from
/// [`Dataset::parts`].
///
/// Built on several threads, a part of [`Parts::records`] records holds whole row groups of
/// every table, encoded and compressed on the thread that built their rows (rows crossing
/// to another core to be encoded cost more than the encoding: measured in
/// `docs/performance.md`). Built on one thread, or where files are cut by rows
/// (`rows_per_file`: the dataset's writer alone knows where each file ends), a part holds
/// its rows as batches, which the dataset's writer encodes (on a thread per table, beside
/// the reading, when the dataset has threads); the files are the same either way.
#[derive(Clone, Debug)]
pub struct Parts {
    schemas: Arc<[Arc<Schema>]>,
    batch_rows: usize,
    batch_bytes: usize,
    /// How the tables are encoded, when parts encode their rows.
    plans: Option<Plans>,
    /// Records per row group: per part that encodes.
    group_records: u64,
    /// Records per part of batches.
    batch_records: u64,
    /// Where the buffers of encoded batches go back to, when the dataset's writer encodes.
    spare: columns::Spare,
    /// Tables of parts already built, for the next parts: their columns keep the room
    /// (and the pages) the last part grew.
    idle: Arc<std::sync::Mutex<Vec<Tables>>>,
}

/// The rows of some consecutive records, built by [`Parts::build`], in the dataset's
/// tables.
pub struct Part {
    /// The rows, encoded into closed row groups of their tables (in order per table)...
    groups: Vec<(usize, writer::Group)>,
    /// ...or as batches, for the dataset's writer to encode.
    batches: Vec<writer::Batch>,
    records: u64,
    /// Why encoding failed.
    failure: Option<Error>,
}

impl std::fmt::Debug for Part {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Part")
            .field("groups", &self.groups.len())
            .field("batches", &self.batches.len())
            .field("records", &self.records)
            .finish_non_exhaustive()
    }
}

impl Parts {
    /// Records per part: parts of this many records (the last may hold fewer), appended in
    /// order, make the dataset [`Dataset::pull`] of the records would. Parts that encode
    /// hold a row group of records; parts of batches as few records as divide a row
    /// group's into parts of at most `batch_rows` (memory: a few batches per part), or a
    /// row group's where only small parts would.
    #[must_use]
    pub fn records(&self) -> u64 {
        if self.plans.is_some() {
            self.group_records
        } else {
            self.batch_records
        }
    }

    /// The rows of the next records of `records`, at most `limit` of them, and whether the
    /// records end there (`Ok(true)`), go on (`Ok(false)`, after exactly `limit`), or the
    /// error that ends them (the rows before it are in the part): the same rows as
    /// [`Dataset::pull`] of those records. A part ends the row groups of every table.
    pub fn build(&self, records: &mut dyn Records, limit: u64) -> (Part, Result<bool, Error>) {
        let idle = self.idle.lock().ok().and_then(|mut idle| idle.pop());
        let mut tables = idle.unwrap_or_else(|| {
            let mut t = Tables::new(&self.schemas, self.batch_rows, self.batch_bytes);
            match &self.plans {
                // Buffers of its own: they stay on the thread that builds and encodes.
                Some(plans) => {
                    let encoders = plans.encoders(&t.spare);
                    t.set_writer(Writer::Encode(Box::new(encoders)));
                }
                None => {
                    t.queue = Some(std::collections::VecDeque::new());
                    t.spare = self.spare.clone();
                }
            }
            t
        });
        let mut left = limit;
        let end = loop {
            if left == 0 {
                break Ok(false);
            }
            let most = usize::try_from(left).unwrap_or(usize::MAX);
            match pull(&mut tables, records, most, |tables, table, row| {
                if let Some(t) = tables.top(table) {
                    tables.append(t, row);
                }
            }) {
                Pulled::Records(n) => left = left.saturating_sub(n as u64),
                Pulled::End => break Ok(true),
                Pulled::Failed(e) => break Err(e),
            }
        };
        tables.end_groups();
        let batches = tables
            .queue
            .as_mut()
            .map_or_else(Vec::new, |q| q.drain(..).collect());
        let groups = match tables.writer() {
            Some(Writer::Encode(encoders)) => encoders.groups(),
            _ => Ok(Vec::new()),
        };
        let (groups, failure) = match tables.check().and(groups) {
            Ok(groups) => (groups, None),
            Err(e) => (Vec::new(), Some(e)),
        };
        // Every row is in the part: the tables are as new, but for their room.
        if end.is_ok()
            && failure.is_none()
            && let Ok(mut idle) = self.idle.lock()
        {
            idle.push(tables);
        }
        let part = Part {
            groups,
            batches,
            records: limit.saturating_sub(left),
            failure,
        };
        (part, end)
    }
}

impl std::fmt::Debug for Tables {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tables").finish_non_exhaustive()
    }
}

impl Dataset {
    /// Starts a dataset at `dir` (its missing parents are created) for records of these
    /// tables (as the record reader indexes them). Nothing appears at `dir` until
    /// [`Dataset::finish`]; an existing `dir` is an error unless `replace`.
    ///
    /// # Errors
    ///
    /// `dir` exists and `replace` is false, or the temporary folder cannot be made.
    pub fn create(
        dir: &Path,
        schemas: &[Arc<Schema>],
        options: &ParquetOptions,
        replace: bool,
    ) -> Result<Dataset, Error> {
        if dir.exists() && !replace {
            return Err(Error::io(
                format!(
                    "cannot write a dataset to {} (--force replaces it)",
                    dir.display()
                ),
                std::io::Error::from(std::io::ErrorKind::AlreadyExists),
            ));
        }
        let name = dir
            .file_name()
            .map_or_else(|| "dataset".into(), |n| n.to_string_lossy().into_owned());
        trace_model::output::remove_leftovers(dir);
        let tmp = dir.with_file_name(format!(".{name}.partial-{}", std::process::id()));
        let create = |e| Error::io(format!("cannot create {}", tmp.display()), e);
        if tmp.exists() {
            std::fs::remove_dir_all(&tmp).map_err(create)?;
        }
        std::fs::create_dir_all(&tmp).map_err(create)?;
        let mut dataset = Dataset {
            dir: dir.to_path_buf(),
            tmp,
            tables: None,
            parts: Parts {
                schemas: schemas.into(),
                batch_rows: options.batch_rows,
                batch_bytes: options.batch_bytes,
                plans: None,
                group_records: options.row_group_rows.max(1) as u64,
                batch_records: batch_records(options),
                spare: columns::Spare::default(),
                idle: Arc::default(),
            },
            records: 0,
            finished: false,
        };
        let mut tables = Tables::new(schemas, options.batch_rows, options.batch_bytes);
        let layout: Vec<_> = tables
            .tables
            .iter()
            .map(|t| writer::Layout {
                name: t.name.clone(),
                schema: Arc::clone(&t.schema),
                delta: t.delta.clone(),
                stats: t.stats.clone(),
                written: !t.carrier,
            })
            .collect();
        let files = Files::create(
            &dataset.tmp,
            &layout,
            &options.properties(),
            options.clone(),
            &tables.spare,
        )?;
        dataset.parts.spare = tables.spare.clone();
        dataset.parts.plans = options.rows_per_file.is_none().then(|| files.plans());
        tables.set_writer(Writer::new(files, options.threads));
        dataset.tables = Some(tables);
        Ok(dataset)
    }

    /// The output tables and their Arrow schemas, in folder order.
    pub fn tables(&self) -> Vec<(String, Arc<arrow_schema::Schema>)> {
        self.tables.as_ref().map_or_else(Vec::new, |t| {
            t.tables
                .iter()
                .filter(|t| !t.carrier)
                .map(|t| (t.name.clone(), Arc::clone(&t.schema)))
                .collect()
        })
    }

    /// Writes one record of the reader's table `table`.
    ///
    /// # Errors
    ///
    /// Writing a full batch failed.
    #[inline]
    pub fn write(&mut self, table: usize, row: &dyn Row) -> Result<(), Error> {
        let Some(tables) = self.tables.as_mut() else {
            return Ok(());
        };
        if let Some(t) = tables.top(table) {
            tables.append(t, row);
        }
        self.count(1);
        self.check()
    }

    /// Records left before the row groups end.
    fn group_left(&self) -> u64 {
        let whole = self.parts.group_records;
        whole.saturating_sub(self.records.checked_rem(whole).unwrap_or(0))
    }

    /// Counts `n` records written, ending the row groups after every `row_group_rows`
    /// records.
    fn count(&mut self, n: u64) {
        let left = self.group_left();
        self.records = self.records.saturating_add(n);
        if n >= left
            && let Some(tables) = self.tables.as_mut()
        {
            tables.end_groups();
        }
    }

    /// The writer's first error, if any.
    fn check(&mut self) -> Result<(), Error> {
        self.tables.as_mut().map_or(Ok(()), Tables::check)
    }

    /// Takes the next records of `records` (a run at once through the reader's typed fast
    /// path, [`Records::fill_columns`], when it has one; else one): the same rows as
    /// [`Dataset::write`] of each record. Call it until [`Pulled::End`] or
    /// [`Pulled::Failed`].
    ///
    /// # Errors
    ///
    /// Writing a full batch failed.
    pub fn pull(&mut self, records: &mut dyn Records) -> Result<Pulled, Error> {
        let most = usize::try_from(self.group_left()).unwrap_or(usize::MAX);
        let Some(tables) = self.tables.as_mut() else {
            return Ok(Pulled::End);
        };
        let pulled = pull(tables, records, most, |tables, table, row| {
            if let Some(t) = tables.top(table) {
                tables.append(t, row);
            }
        });
        if let Pulled::Records(n) = pulled {
            self.count(n as u64);
        }
        self.check()?;
        Ok(pulled)
    }

    /// Writes every record of `reading`, in parts built on its threads ([`Dataset::parts`],
    /// stretches of [`Parts::records`]): the same files as [`Dataset::pull`] of the
    /// records. How the records ended (the error that ends them: every record before it
    /// is written) and the readers' notes are in the [`Ended`](trace_model::stretches::Ended).
    ///
    /// # Errors
    ///
    /// Encoding or writing failed.
    pub fn read(
        &mut self,
        reading: trace_model::stretches::Reading<'_, '_>,
        ctx: &mut trace_model::Ctx<'_>,
    ) -> Result<trace_model::stretches::Ended, Error> {
        let parts = self.parts(reading.threads());
        let reading = reading.in_stretches_of(parts.records());
        let mut written = Ok(());
        let ended = reading.run(
            ctx,
            |records, limit| parts.build(records, limit),
            |part| {
                written = self.append(part);
                written.is_ok()
            },
        );
        written.map(|()| ended)
    }

    /// How to build parts of the dataset ([`Dataset::append`]) on `threads` threads.
    #[must_use]
    pub fn parts(&self, threads: usize) -> Parts {
        let mut parts = self.parts.clone();
        if threads <= 1 {
            parts.plans = None;
        }
        parts
    }

    /// Writes a part built by [`Parts::build`]: parts of [`Parts::records`] records (the
    /// last may hold fewer), appended in the order of their records after whole row groups
    /// (such as after no rows), give the same dataset, byte for byte, as
    /// [`Dataset::pull`] of the records.
    ///
    /// # Errors
    ///
    /// Encoding the part or writing a full batch failed.
    pub fn append(&mut self, part: Part) -> Result<(), Error> {
        let Part {
            groups,
            batches,
            records,
            failure,
        } = part;
        if let Some(e) = failure {
            return Err(e);
        }
        let Some(tables) = self.tables.as_mut() else {
            return Ok(());
        };
        for t in 0..tables.tables.len() {
            tables.flush(t);
        }
        for (table, group) in groups {
            tables.put(table, group);
        }
        for batch in batches {
            tables.send(batch);
        }
        // The part ended its groups; counted, the dataset's writer ends its own too.
        self.count(records);
        self.check()
    }

    /// Completes the dataset: writes what is buffered, closes every file, writes
    /// `_tracekit.json` and renames the folder to its name (replacing an existing one).
    /// With `failure`, the dataset is finished as partial: the manifest says
    /// `"complete": false` with the error and where it is.
    ///
    /// # Errors
    ///
    /// Writing or renaming failed; the temporary folder is removed.
    pub fn finish(
        mut self,
        origin: &Origin,
        failure: Option<&Error>,
        notes: &[Note],
    ) -> Result<Vec<TableSummary>, Error> {
        let tables = self.tables.take();
        let Some(tables) = tables else {
            return Ok(Vec::new());
        };
        let planned: Vec<_> = tables
            .tables
            .iter()
            .map(|t| {
                (
                    t.name.clone(),
                    Arc::clone(&t.schema),
                    t.shown.clone(),
                    t.carrier,
                )
            })
            .collect();
        let written = match tables.into_writer()? {
            Some(w) => w.finish()?,
            None => Vec::new(),
        };
        // Carrier tables (see `columns::Table::carrier`) have no folder and no entry.
        let (columns, summaries): (Vec<_>, Vec<_>) = planned
            .into_iter()
            .zip(&written)
            .filter(|((.., carrier), _)| !carrier)
            .map(|((name, schema, shown, _), w)| {
                let summary = TableSummary {
                    name: name.clone(),
                    rows: w.rows,
                    files: w.files,
                    bytes: w.bytes,
                };
                ((name, schema, shown), summary)
            })
            .unzip();
        // Bytes read after an input was cut short are not the file's: no dataset from them.
        trace_model::check_unchanged()?;
        let manifest = manifest(origin, failure, notes, &columns, &summaries);
        let mut text = serde_json::to_vec_pretty(&manifest).unwrap_or_default();
        text.push(b'\n');
        let path = self.tmp.join(MANIFEST);
        std::fs::write(&path, text)
            .map_err(|e| Error::io(format!("cannot write {}", path.display()), e))?;
        let place = |e| {
            Error::io(
                format!("cannot move the dataset to {}", self.dir.display()),
                e,
            )
        };
        if self.dir.exists() {
            std::fs::remove_dir_all(&self.dir).map_err(place)?;
        }
        std::fs::rename(&self.tmp, &self.dir).map_err(place)?;
        self.finished = true;
        Ok(summaries)
    }
}

impl Drop for Dataset {
    /// An unfinished dataset (an error, a panic, an early return) leaves nothing behind.
    fn drop(&mut self) {
        if !self.finished {
            // Stop the writer thread before removing its files.
            if let Some(t) = self.tables.take()
                && let Ok(Some(w)) = t.into_writer()
            {
                let _ = w.finish();
            }
            let _ = std::fs::remove_dir_all(&self.tmp);
        }
    }
}

/// Rows into Arrow record batches of one output table: the same tables, columns and types
/// as a [`Dataset`]'s files, handed to the caller instead of written (the Python package's
/// `to_arrow`). Only the asked table's columns are filled: the rows of other child tables
/// are dropped as they are visited. Memory is the batch being filled plus the batches not
/// taken yet.
///
/// ```
/// use trace_sinks::parquet::Batches;
/// use trace_registry::{Ctx, Input, Options};
///
/// let mut input = Input::open("../../testdata/x64dbg/basic.trace64".as_ref())?;
/// let handler = trace_registry::detect(&input).expect("an x64dbg trace");
/// let options = Options::default();
/// let mut records = handler.records(&mut input, &mut Ctx::new(&options))?;
/// let mut batches = Batches::new(records.tables(), "memory", 1 << 16)?;
/// let mut rows = 0;
/// while let Some(record) = records.next_record() {
///     let record = record?;
///     batches.write(record.table, record.row());
///     while let Some(b) = batches.take() {
///         rows += b.num_rows();
///     }
/// }
/// batches.finish();
/// while let Some(b) = batches.take() {
///     rows += b.num_rows();
/// }
/// assert_eq!(batches.schema().field(0).name(), "i"); // the key of the parent instruction
/// assert!(rows > 0);
/// # Ok::<(), trace_registry::Error>(())
/// ```
pub struct Batches {
    tables: Tables,
    table: usize,
    /// Per record table: whether its rows reach the wanted table.
    visit: Vec<bool>,
}

impl std::fmt::Debug for Batches {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Batches")
            .field("table", &self.table)
            .finish_non_exhaustive()
    }
}

impl Batches {
    /// The output table names of a record reader's schemas, in a [`Dataset`]'s folder order.
    #[must_use]
    pub fn table_names(schemas: &[Arc<Schema>]) -> Vec<String> {
        Tables::new(schemas, 1, 0)
            .tables
            .iter()
            .filter(|t| !t.carrier)
            .map(|t| t.name.clone())
            .collect()
    }

    /// Batches of the output table `table` (one of [`Batches::table_names`]) of records of
    /// these tables, cut every `batch_rows` rows (and at 32 MiB of variable-length values).
    ///
    /// # Errors
    ///
    /// [`Error::Unsupported`] when the records have no such output table.
    pub fn new(schemas: &[Arc<Schema>], table: &str, batch_rows: usize) -> Result<Batches, Error> {
        let mut tables = Tables::new(schemas, batch_rows, ParquetOptions::default().batch_bytes);
        let Some(wanted) = tables
            .tables
            .iter()
            .position(|t| t.name == table && !t.carrier)
        else {
            return Err(Error::Unsupported(format!(
                "no table {table:?}; the tables are: {}",
                Batches::table_names(schemas).join(", ")
            )));
        };
        let skip: Vec<bool> = (0..tables.tables.len())
            .map(|t| !tables.reaches(t, wanted))
            .collect();
        let visit = (0..schemas.len())
            .map(|t| {
                tables
                    .top(t)
                    .is_some_and(|o| !skip.get(o).copied().unwrap_or(true))
            })
            .collect();
        tables.skip = skip;
        tables.queue = Some(std::collections::VecDeque::new());
        Ok(Batches {
            tables,
            table: wanted,
            visit,
        })
    }

    /// The Arrow schema of the batches.
    #[must_use]
    pub fn schema(&self) -> Arc<arrow_schema::Schema> {
        self.tables.tables.get(self.table).map_or_else(
            || Arc::new(arrow_schema::Schema::empty()),
            |t| Arc::clone(&t.schema),
        )
    }

    /// Adds one record of the reader's table `table` (records of tables that do not lead to
    /// the wanted one are ignored).
    #[inline]
    pub fn write(&mut self, table: usize, row: &dyn Row) {
        if !self.visit.get(table).copied().unwrap_or(false) {
            return;
        }
        if let Some(t) = self.tables.top(table) {
            self.tables.append(t, row);
        }
    }

    /// Takes the next records of `records` (a run at once through the reader's typed fast
    /// path, [`Records::fill_columns`], when it has one; else one): the same rows as
    /// [`Batches::write`] of each record. Call it until [`Pulled::End`] or
    /// [`Pulled::Failed`], taking the batches ([`Batches::take`]) as they fill.
    pub fn pull(&mut self, records: &mut dyn Records) -> Pulled {
        self.pull_at_most(records, usize::MAX)
    }

    /// [`Batches::pull`], taking at most `limit` records (at least one): for a caller that
    /// builds the batches of a stretch of records (such as one of several threads, each
    /// from its own [`Records::seek`]).
    pub fn pull_at_most(&mut self, records: &mut dyn Records, limit: usize) -> Pulled {
        let visit = &self.visit;
        pull(&mut self.tables, records, limit, |tables, table, row| {
            if visit.get(table).copied().unwrap_or(false)
                && let Some(t) = tables.top(table)
            {
                tables.append(t, row);
            }
        })
    }

    /// Ends the input: the rows buffered become a last batch.
    pub fn finish(&mut self) {
        self.tables.flush(self.table);
    }

    /// The next full batch, if one is ready.
    pub fn take(&mut self) -> Option<arrow_array::RecordBatch> {
        // A parent table of the wanted one fills (and is cut into batches) alongside it:
        // its batches are passed over.
        let table = self.table;
        let queue = self.tables.queue.as_mut()?;
        let batch = std::iter::from_fn(|| queue.pop_front()).find(|b| b.table == table)?;
        let options = arrow_array::RecordBatchOptions::new().with_row_count(Some(batch.rows));
        // The columns were built for this schema, so this does not fail; a batch that did
        // would be dropped rather than handed out malformed.
        arrow_array::RecordBatch::try_new_with_options(self.schema(), batch.columns, &options).ok()
    }
}

/// `_tracekit.json`, fields in the order they are written.
#[derive(serde::Serialize)]
struct Manifest<'a> {
    tracekit_schema: u32,
    created_by: &'static str,
    source: &'a Origin,
    complete: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    offset: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    record: Option<u64>,
    tables: Vec<ManifestTable<'a>>,
    notes: Vec<String>,
}

#[derive(serde::Serialize)]
struct ManifestTable<'a> {
    name: &'a str,
    rows: u64,
    files: u32,
    bytes: u64,
    columns: Vec<ManifestColumn<'a>>,
}

#[derive(serde::Serialize)]
struct ManifestColumn<'a> {
    name: &'a str,
    #[serde(rename = "type")]
    ty: String,
    nullable: bool,
    /// Whether `tracekit dump` shows the column (false: Parquet only, such as x64dbg's
    /// register state).
    #[serde(skip_serializing_if = "is_true")]
    in_dump: bool,
}

fn is_true(b: &bool) -> bool {
    *b
}

fn manifest<'a>(
    origin: &'a Origin,
    failure: Option<&Error>,
    notes: &[Note],
    columns: &'a [(String, Arc<arrow_schema::Schema>, Vec<bool>)],
    summaries: &'a [TableSummary],
) -> Manifest<'a> {
    use trace_core::Located;
    Manifest {
        tracekit_schema: SCHEMA_VERSION,
        created_by: concat!("tracekit ", env!("CARGO_PKG_VERSION")),
        source: origin,
        complete: failure.is_none(),
        error: failure.map(ToString::to_string),
        offset: failure.and_then(|e| e.offset()).map(|o| o.0),
        record: failure.and_then(Located::record),
        tables: columns
            .iter()
            .zip(summaries)
            .map(|((_, schema, shown), s)| ManifestTable {
                name: &s.name,
                rows: s.rows,
                files: s.files,
                bytes: s.bytes,
                columns: schema
                    .fields()
                    .iter()
                    .zip(shown)
                    .map(|(f, shown)| ManifestColumn {
                        name: f.name(),
                        ty: f.data_type().to_string(),
                        nullable: f.is_nullable(),
                        in_dump: *shown,
                    })
                    .collect(),
            })
            .collect(),
        notes: notes.iter().map(ToString::to_string).collect(),
    }
}

#[cfg(test)]
#[allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::arithmetic_side_effects,
    clippy::panic
)]
mod tests {
    use super::*;
    use arrow_array::cast::AsArray;
    use arrow_array::types::{Int32Type, UInt8Type, UInt16Type, UInt32Type, UInt64Type};
    use arrow_array::{Array, RecordBatch};
    use quickcheck::{Arbitrary, Gen, QuickCheck};
    use std::sync::atomic::{AtomicU32, Ordering};
    use trace_model::schema::{Field, Run, Type, Visitor};

    /// A record exercising every type of the model.
    #[derive(Clone, Debug, PartialEq)]
    struct TestRow {
        i: u64,
        a: u8,
        b: Option<i32>,
        flag: bool,
        data: Vec<u8>,
        name: String,
        words: Option<Vec<u32>>,
        nested: Option<(u64, u16)>,
        kids: Vec<(u64, Option<String>)>,
        /// A child table of (position, value) rows, visited as one run.
        nums: Vec<u64>,
    }

    impl Arbitrary for TestRow {
        fn arbitrary(g: &mut Gen) -> TestRow {
            let names = ["add", "mov", "bl", "é\"x"];
            TestRow {
                i: 0,
                a: u8::arbitrary(g),
                b: Option::arbitrary(g),
                flag: bool::arbitrary(g),
                data: Vec::arbitrary(g),
                name: (*g.choose(&names).unwrap()).to_owned(),
                words: Option::arbitrary(g),
                nested: Option::arbitrary(g),
                kids: Vec::arbitrary(g),
                nums: Vec::arbitrary(g),
            }
        }
    }

    impl Row for TestRow {
        fn visit(&self, v: &mut dyn Visitor) {
            v.uint(self.i);
            v.uint(u64::from(self.a));
            match self.b {
                Some(b) => v.int(i64::from(b)),
                None => v.null(),
            }
            v.bool(self.flag);
            v.bytes(&self.data);
            v.str(&self.name);
            match &self.words {
                Some(w) => {
                    v.begin_list();
                    for x in w {
                        v.uint(u64::from(*x));
                    }
                    v.end_list();
                }
                None => v.null(),
            }
            match self.nested {
                Some((x, y)) => {
                    v.begin_row();
                    v.uint(x);
                    v.uint(u64::from(y));
                    v.end_row();
                }
                None => v.null(),
            }
            v.begin_list();
            for (k, s) in &self.kids {
                v.begin_row();
                v.uint(*k);
                match s {
                    Some(s) => v.str(s),
                    None => v.null(),
                }
                v.end_row();
            }
            v.end_list();
            v.begin_list();
            v.rows(&[Run::Counting(0), Run::UInts(&self.nums)]);
            v.end_list();
        }
    }

    fn schema() -> Arc<Schema> {
        let nested = Schema::new(
            "nested",
            vec![
                Field::new("x", Type::UInt(64)),
                Field::new("y", Type::UInt(16)),
            ],
        );
        let kids = Schema::new(
            "kids",
            vec![
                Field::new("v", Type::UInt(64)),
                Field::new("s", Type::Str).nullable(),
            ],
        );
        let nums = Schema::new(
            "nums",
            vec![
                Field::new("seq", Type::UInt(64)),
                Field::new("value", Type::UInt(64)),
            ],
        );
        Arc::new(Schema::new(
            "rows",
            vec![
                Field::new("i", Type::UInt(64)).key(),
                Field::new("a", Type::UInt(8)),
                Field::new("b", Type::Int(32)).nullable(),
                Field::new("flag", Type::Bool),
                Field::new("data", Type::Bytes),
                Field::new("name", Type::Name),
                Field::new("words", Type::List(Box::new(Type::UInt(32)))).nullable(),
                Field::new("nested", Type::Struct(Arc::new(nested))).nullable(),
                Field::new("kids", Type::Rows(Arc::new(kids))),
                Field::new("nums", Type::Rows(Arc::new(nums))),
            ],
        ))
    }

    fn temp_dir() -> PathBuf {
        static N: AtomicU32 = AtomicU32::new(0);
        let n = N.fetch_add(1, Ordering::Relaxed);
        std::env::temp_dir().join(format!("tracekit-pq-{}-{n}", std::process::id()))
    }

    /// Every batch of every file of `dir/table`, in file order.
    fn read_table(dir: &Path, table: &str) -> Vec<RecordBatch> {
        let mut files: Vec<_> = std::fs::read_dir(dir.join(table))
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        files.sort();
        let mut out = Vec::new();
        for f in files {
            let file = std::fs::File::open(f).unwrap();
            let reader =
                parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(file)
                    .unwrap()
                    .build()
                    .unwrap();
            out.extend(reader.map(Result::unwrap));
        }
        out
    }

    /// Reads the dataset back into rows.
    fn read_back(dir: &Path) -> Vec<TestRow> {
        let mut rows = Vec::new();
        for b in read_table(dir, "rows") {
            let col = |n: &str| b.column_by_name(n).unwrap().clone();
            let (i, a, bb) = (col("i"), col("a"), col("b"));
            let (i, a, bb) = (
                i.as_primitive::<UInt64Type>(),
                a.as_primitive::<UInt8Type>(),
                bb.as_primitive::<Int32Type>(),
            );
            let (flag, data, name) = (col("flag"), col("data"), col("name"));
            let name = name.as_dictionary::<Int32Type>();
            let names = name.values().as_string::<i32>();
            let (words, x, y) = (col("words"), col("x"), col("y"));
            let words = words.as_list::<i32>();
            let (x, y) = (
                x.as_primitive::<UInt64Type>(),
                y.as_primitive::<UInt16Type>(),
            );
            for r in 0..b.num_rows() {
                rows.push(TestRow {
                    i: i.value(r),
                    a: a.value(r),
                    b: bb.is_valid(r).then(|| bb.value(r)),
                    flag: flag.as_boolean().value(r),
                    data: data.as_binary::<i32>().value(r).to_vec(),
                    name: names.value(name.keys().value(r) as usize).to_owned(),
                    words: words.is_valid(r).then(|| {
                        words
                            .value(r)
                            .as_primitive::<UInt32Type>()
                            .values()
                            .to_vec()
                    }),
                    nested: x.is_valid(r).then(|| (x.value(r), y.value(r))),
                    kids: Vec::new(),
                    nums: Vec::new(),
                });
            }
        }
        for b in read_table(dir, "kids") {
            let (i, v, s) = (b.column(0), b.column(1), b.column(2));
            let (i, v, s) = (
                i.as_primitive::<UInt64Type>(),
                v.as_primitive::<UInt64Type>(),
                s.as_string::<i32>(),
            );
            for r in 0..b.num_rows() {
                let parent = &mut rows[i.value(r) as usize];
                parent
                    .kids
                    .push((v.value(r), s.is_valid(r).then(|| s.value(r).to_owned())));
            }
        }
        for b in read_table(dir, "nums") {
            let (i, seq, v) = (b.column(0), b.column(1), b.column(2));
            let (i, seq, v) = (
                i.as_primitive::<UInt64Type>(),
                seq.as_primitive::<UInt64Type>(),
                v.as_primitive::<UInt64Type>(),
            );
            for r in 0..b.num_rows() {
                let parent = &mut rows[i.value(r) as usize];
                assert_eq!(
                    seq.value(r),
                    parent.nums.len() as u64,
                    "seq counts the rows"
                );
                parent.nums.push(v.value(r));
            }
        }
        rows
    }

    fn round_trip(mut rows: Vec<TestRow>, small: bool, threads: bool) -> bool {
        for (n, r) in rows.iter_mut().enumerate() {
            r.i = n as u64;
        }
        let options = ParquetOptions {
            rows_per_file: small.then_some(7),
            row_group_rows: if small { 5 } else { 1 << 20 },
            batch_rows: if small { 3 } else { 1 << 16 },
            threads: if threads { 2 } else { 1 },
            ..ParquetOptions::default()
        };
        let dir = temp_dir();
        let mut d = Dataset::create(&dir, &[schema()], &options, false).unwrap();
        for r in &rows {
            d.write(0, r).unwrap();
        }
        let summary = d.finish(&Origin::default(), None, &[]).unwrap();
        let back = read_back(&dir);
        let kids: usize = rows.iter().map(|r| r.kids.len()).sum();
        let manifest: serde_json::Value =
            serde_json::from_slice(&std::fs::read(dir.join(MANIFEST)).unwrap()).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(summary[0].rows, rows.len() as u64);
        assert_eq!(summary[1].rows, kids as u64);
        assert_eq!(manifest["tables"][1]["rows"], kids as u64);
        assert_eq!(manifest["complete"], true);
        back == rows
    }

    #[test]
    fn export_reads_back_as_the_rows() {
        QuickCheck::new()
            .tests(20)
            .quickcheck(round_trip as fn(Vec<TestRow>, bool, bool) -> bool);
    }

    /// Every table of x64dbg traces taken through the reader's typed fast path
    /// (`Batches::pull`) equals the rows visited one by one (`Batches::write`), with the
    /// same error at the end of a damaged trace; `instructions` also in the same batches.
    #[test]
    fn typed_fast_path_gives_the_visited_rows() {
        use trace_model::schema::testing::testdata;
        let opts = trac_x64dbg::testgen::Options {
            arch: trac_x64dbg::Arch::X64,
            threads: 3,
            max_run: 50,
            seed: 3,
        };
        let synth = trac_x64dbg::testgen::trace(
            opts,
            5000,
            trac_x64dbg::RecorderOptions::default(),
            "t.exe",
        );
        let mut inputs = vec![("t.trace64".to_owned(), synth)];
        for name in [
            "basic.trace64",
            "basic.trace32",
            "sessions.trace64",
            "legacy-tid.trace64",
            "legacy-tid.trace32",
            "err-truncated-block.bin",
            "err-too-many-registers.bin",
        ] {
            inputs.push((name.to_owned(), testdata(&format!("x64dbg/{name}"))));
        }
        inputs.push(("part.trace64".to_owned(), part_recorded()));
        for (name, bytes) in &inputs {
            let run = |table: &str, batch_rows: usize, fast: bool| {
                x64dbg_batches(name, bytes, table, batch_rows, fast)
            };
            for table in ["instructions", "registers", "memory"] {
                let (fast, error, runs) = run(table, 1 << 30, true);
                let (slow, slow_error, _) = run(table, 1 << 30, false);
                assert_eq!(fast, slow, "{name} {table}");
                assert_eq!(error, slow_error, "{name} {table}");
                let rows: usize = fast.iter().map(RecordBatch::num_rows).sum();
                assert!(
                    runs > 0 || rows < 2,
                    "{name} {table}: the fast path was not taken"
                );
            }
            let (fast, _, _) = run("instructions", 1000, true);
            let (slow, _, _) = run("instructions", 1000, false);
            assert_eq!(fast, slow, "{name}: batches of 1000");
        }
    }

    /// An x64dbg trace whose blocks after the full dump record wide fields in part (the low
    /// half of `xmm0`, a word of `st0`/`st1`): their `words` column is the recorded words,
    /// through the fast path as through the visit.
    fn part_recorded() -> Vec<u8> {
        use trac_x64dbg::{Arch, Header, InstructionRecord, Record, RegChange, ThreadField};
        let ins = |regs: &[(u16, u64)]| {
            Record::Instruction(InstructionRecord {
                thread: 7,
                thread_field: ThreadField::Flagged,
                opcode: vec![0x90],
                regs: regs
                    .iter()
                    .map(|&(index, value)| RegChange { index, value })
                    .collect(),
                mem: Vec::new(),
            })
        };
        let full: Vec<(u16, u64)> = (0..172).map(|i| (i, u64::from(i))).collect();
        let blocks = [
            ins(&full),
            ins(&[(16, 0x401000), (40, 0x1234)]),
            ins(&[(16, 0x401001), (27, 5), (40, 0x1234)]),
        ];
        let bytes = trac_x64dbg::write_records(&Header::new(Arch::X64, "p.exe"), &blocks).unwrap();
        let (batches, error, _) = x64dbg_batches("part.trace64", &bytes, "instructions", 100, true);
        assert_eq!(error, None);
        let words = batches[0].column_by_name("words").unwrap().as_list::<i32>();
        assert!(words.is_null(0));
        let at = |k: usize| {
            let v = words.value(k);
            v.as_primitive::<UInt32Type>().values().to_vec()
        };
        assert_eq!(at(1), [16, 40]);
        assert_eq!(at(2), [16, 27, 40]);
        bytes
    }

    /// The batches of output table `table` of the x64dbg trace `bytes`, `batch_rows` rows
    /// each, taken through the reader's typed fast path (`Batches::pull`, `fast`) or record
    /// by record (`Batches::write`); the error that ends them; how many pulls took more
    /// than one record.
    fn x64dbg_batches(
        name: &str,
        bytes: &[u8],
        table: &str,
        batch_rows: usize,
        fast: bool,
    ) -> (Vec<RecordBatch>, Option<String>, usize) {
        use trace_model::{Ctx, Input, Options};
        let handler = trace_registry::by_name("x64dbg").unwrap();
        let options = Options::default();
        let mut input = Input::from_bytes(name.to_owned(), bytes.to_vec()).unwrap();
        let mut records = handler
            .records(&mut input, &mut Ctx::new(&options))
            .unwrap();
        assert_eq!(
            Batches::table_names(records.tables()),
            ["instructions", "registers", "memory"]
        );
        let mut b = Batches::new(records.tables(), table, batch_rows).unwrap();
        let (mut error, mut runs) = (None, 0);
        loop {
            if fast {
                match b.pull(records.as_mut()) {
                    Pulled::Records(n) => runs += usize::from(n > 1),
                    Pulled::End => break,
                    Pulled::Failed(e) => {
                        error = Some(e.to_string());
                        break;
                    }
                }
            } else {
                match records.next_record() {
                    None => break,
                    Some(Ok(r)) => b.write(r.table, r.row()),
                    Some(Err(e)) => {
                        error = Some(e.to_string());
                        break;
                    }
                }
            }
        }
        b.finish();
        let batches: Vec<RecordBatch> = std::iter::from_fn(|| b.take()).collect();
        (batches, error, runs)
    }

    /// The typed fast path gives the visited rows (in the same batches, with the same
    /// error) on random x64dbg traces: either architecture, threads switching often or
    /// rarely, full dumps at random intervals, thread ids with or without the flag, cut
    /// anywhere near the end, in batches of any size.
    #[test]
    fn typed_fast_path_gives_the_visited_rows_on_random_traces() {
        fn prop(seed: u64, shape: (bool, u8, u8, bool), len: u16, cut: u8, batch: u16) -> bool {
            let (x86, threads, run, legacy) = shape;
            let opts = trac_x64dbg::testgen::Options {
                arch: if x86 {
                    trac_x64dbg::Arch::X86
                } else {
                    trac_x64dbg::Arch::X64
                },
                threads: 1 + u32::from(threads % 4),
                max_run: 1 + u64::from(run % 64),
                seed,
            };
            let rec = trac_x64dbg::RecorderOptions {
                full_dump_interval: match run % 4 {
                    0 => 0,
                    1 => 512,
                    _ => 1 + u32::from(run / 4),
                },
                legacy_thread_ids: legacy,
                lookahead: run % 3 != 0,
            };
            let mut bytes =
                trac_x64dbg::testgen::trace(opts, 1 + u64::from(len % 800), rec, "q.exe");
            bytes.truncate(bytes.len().saturating_sub(usize::from(cut % 40)));
            let batch_rows = 1 + usize::from(batch % 1200);
            // The instructions in the same batches; a child table's rows the same, though
            // the fast path cuts them where a fill ends (a batch may be longer).
            let rows = |b: &[RecordBatch]| {
                b.iter()
                    .flat_map(|b| (0..b.num_rows()).map(|r| b.slice(r, 1)))
                    .collect::<Vec<_>>()
            };
            ["instructions", "registers", "memory"].iter().all(|table| {
                let (fast, error, _) = x64dbg_batches("q.trace64", &bytes, table, batch_rows, true);
                let (slow, slow_error, _) =
                    x64dbg_batches("q.trace64", &bytes, table, batch_rows, false);
                let same = if *table == "instructions" {
                    fast == slow
                } else {
                    rows(&fast) == rows(&slow)
                };
                same && error == slow_error
            })
        }
        // 100 cases, or `QUICKCHECK_TESTS` (read by `QuickCheck::new`).
        QuickCheck::new().quickcheck(prop as fn(u64, (bool, u8, u8, bool), u16, u8, u16) -> bool);
    }

    /// Every file of a dataset, by its path under `dir`.
    fn dataset_files(dir: &Path) -> std::collections::BTreeMap<PathBuf, Vec<u8>> {
        let mut out = std::collections::BTreeMap::new();
        let mut dirs = vec![dir.to_path_buf()];
        while let Some(d) = dirs.pop() {
            for e in std::fs::read_dir(&d).unwrap() {
                let path = e.unwrap().path();
                if path.is_dir() {
                    dirs.push(path);
                } else {
                    let bytes = std::fs::read(&path).unwrap();
                    out.insert(path.strip_prefix(dir).unwrap().to_path_buf(), bytes);
                }
            }
        }
        out
    }

    /// The records of some `TestRow`s, in order.
    struct TestRecords {
        tables: [Arc<Schema>; 1],
        rows: Vec<TestRow>,
        at: usize,
    }

    impl Records for TestRecords {
        fn tables(&self) -> &[Arc<Schema>] {
            &self.tables
        }

        fn next_record(&mut self) -> Option<Result<trace_model::Record<'_>, Error>> {
            let row = self.rows.get(self.at)?;
            self.at += 1;
            Some(Ok(trace_model::Record::new(0, row)))
        }
    }

    /// Parts of any size, appended in order, make the files of the rows written one by
    /// one, byte for byte: the calls to the encoder are cut by the rows alone, whatever
    /// the batches of each part (every type of the model, child tables, tiny batches, row
    /// groups and files, calls cut by bytes).
    #[test]
    fn parts_make_the_bytes_of_rows_written_one_by_one() {
        fn prop(mut rows: Vec<TestRow>, sizes: (u8, u8, u8), threads: bool) -> bool {
            for (n, r) in rows.iter_mut().enumerate() {
                r.i = n as u64;
            }
            let (batch, group, bytes) = sizes;
            let options = ParquetOptions {
                rows_per_file: (group % 3 == 0).then_some(1 + u64::from(group % 11)),
                row_group_rows: 1 + usize::from(group % 9),
                batch_rows: 1 + usize::from(batch % 7),
                batch_bytes: 1 + usize::from(bytes),
                ..ParquetOptions::default()
            };
            let write = |parts: bool| {
                let dir = temp_dir();
                let mut d = Dataset::create(&dir, &[schema()], &options, false).unwrap();
                match parts {
                    false => rows.iter().for_each(|r| d.write(0, r).unwrap()),
                    true => {
                        let mut records = TestRecords {
                            tables: [schema()],
                            rows: rows.clone(),
                            at: 0,
                        };
                        let plan = d.parts(if threads { 2 } else { 1 });
                        loop {
                            let (part, end) = plan.build(&mut records, plan.records());
                            d.append(part).unwrap();
                            if end.unwrap() {
                                break;
                            }
                        }
                    }
                }
                d.finish(&Origin::default(), None, &[]).unwrap();
                let files = dataset_files(&dir);
                std::fs::remove_dir_all(&dir).unwrap();
                files
            };
            write(false) == write(true)
        }
        QuickCheck::new()
            .tests(30)
            .quickcheck(prop as fn(Vec<TestRow>, (u8, u8, u8), bool) -> bool);
    }

    /// An x64dbg trace exported through `Dataset::pull` (`None`) or through `Stretches` on
    /// `threads` threads, a part each, and `Dataset::append`: the dataset's files
    /// (finished as partial on a damaged trace), the error that ends the records, the
    /// notes.
    fn export_x64dbg(
        bytes: &Arc<[u8]>,
        options: &ParquetOptions,
        threads: Option<usize>,
    ) -> (
        std::collections::BTreeMap<PathBuf, Vec<u8>>,
        Option<String>,
        Vec<Note>,
    ) {
        use trace_model::stretches::Stretches;
        use trace_model::{Ctx, Input, Options};
        let handler = trace_registry::by_name("x64dbg").unwrap();
        let opts = Options::default();
        let mut ctx = Ctx::new(&opts);
        let mut input = Input::from_shared("q.trace64", Arc::clone(bytes)).unwrap();
        let dir = temp_dir();
        let (dataset, failure, notes) = match threads {
            None => {
                let mut records = handler.records(&mut input, &mut ctx).unwrap();
                let mut d = Dataset::create(&dir, records.tables(), options, false).unwrap();
                let failure = loop {
                    match d.pull(records.as_mut()).unwrap() {
                        Pulled::Records(_) => {}
                        Pulled::End => break None,
                        Pulled::Failed(e) => break Some(e),
                    }
                };
                (d, failure, records.finish())
            }
            Some(threads) => {
                let reading = Stretches::new(handler, 1, threads)
                    .open(&mut input, &mut ctx)
                    .unwrap();
                let mut d = Dataset::create(&dir, reading.tables(), options, false).unwrap();
                let ended = d.read(reading, &mut ctx).unwrap();
                (d, ended.failure, ended.notes)
            }
        };
        let origin = Origin::default();
        dataset.finish(&origin, failure.as_ref(), &notes).unwrap();
        let files = dataset_files(&dir);
        std::fs::remove_dir_all(&dir).unwrap();
        (files, failure.map(|e| e.to_string()), notes)
    }

    /// Random x64dbg traces (damaged or not, thread ids with or without the flag) exported
    /// from stretches (a part each) on 1 to 3 threads: the same files, byte for byte, the
    /// same error and the same notes as one reader's.
    #[test]
    fn stretches_on_threads_export_the_bytes_of_one_reader() {
        fn prop(seed: u64, shape: (u8, u8, bool), len: u16, cut: u8, sizes: (u16, u16)) -> bool {
            let (threads, run, legacy) = shape;
            let opts = trac_x64dbg::testgen::Options {
                arch: trac_x64dbg::Arch::X64,
                threads: 1 + u32::from(threads % 4),
                max_run: 1 + u64::from(run % 64),
                seed,
            };
            let rec = trac_x64dbg::RecorderOptions {
                full_dump_interval: 1 + u32::from(run % 40),
                legacy_thread_ids: legacy,
                lookahead: true,
            };
            let mut bytes =
                trac_x64dbg::testgen::trace(opts, 1 + u64::from(len % 1500), rec, "q.exe");
            bytes.truncate(bytes.len().saturating_sub(usize::from(cut % 40)));
            let bytes: Arc<[u8]> = bytes.into();
            let (batch, group) = sizes;
            let options = ParquetOptions {
                rows_per_file: (group % 3 == 0).then_some(1 + u64::from(group % 5000)),
                row_group_rows: 1 + usize::from(group % 700),
                batch_rows: 1 + usize::from(batch % 3000),
                batch_bytes: 1 + usize::from(batch % 5000),
                ..ParquetOptions::default()
            };
            let one = export_x64dbg(&bytes, &options, None);
            (1..=3).all(|threads| {
                let many = export_x64dbg(&bytes, &options, Some(threads));
                let same = many == one;
                if !same {
                    eprintln!(
                        "threads {threads}: files {}, error {:?} / {:?}, notes {:?} / {:?}",
                        many.0 == one.0,
                        many.1,
                        one.1,
                        many.2,
                        one.2
                    );
                }
                same
            })
        }
        QuickCheck::new()
            .tests(12)
            .quickcheck(prop as fn(u64, (u8, u8, bool), u16, u8, (u16, u16)) -> bool);
    }

    #[test]
    fn parts_of_batches_divide_a_row_group() {
        let records = |row_group_rows, batch_rows| {
            batch_records(&ParquetOptions {
                row_group_rows,
                batch_rows,
                ..ParquetOptions::default()
            })
        };
        assert_eq!(records(1 << 20, 1 << 16), 1 << 16);
        assert_eq!(records(1_000_000, 1 << 16), 62_500);
        assert_eq!(records(7, 1 << 16), 7);
        assert_eq!(records(12, 5), 4);
        // A prime: only parts of one record would divide it, so a part is a row group.
        assert_eq!(records(999_983, 1 << 16), 999_983);
    }

    #[test]
    fn columns_and_child_keys() {
        let dir = temp_dir();
        let d = Dataset::create(&dir, &[schema()], &ParquetOptions::default(), false).unwrap();
        let names: Vec<Vec<String>> = d
            .tables()
            .iter()
            .map(|(_, s)| s.fields().iter().map(|f| f.name().clone()).collect())
            .collect();
        assert_eq!(
            names,
            [
                vec!["i", "a", "b", "flag", "data", "name", "words", "x", "y"],
                vec!["i", "v", "s"],
                vec!["i", "seq", "value"],
            ]
        );
        drop(d);
        assert!(!dir.exists(), "an unfinished dataset leaves nothing");
    }

    #[test]
    fn an_existing_folder_is_kept_unless_replaced() {
        let dir = temp_dir();
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("mine"), b"x").unwrap();
        let o = ParquetOptions::default();
        let e = Dataset::create(&dir, &[schema()], &o, false).unwrap_err();
        assert!(e.to_string().contains("--force replaces it"), "{e}");
        assert!(dir.join("mine").exists());
        let d = Dataset::create(&dir, &[schema()], &o, true).unwrap();
        assert!(dir.join("mine").exists(), "replaced only when complete");
        d.finish(&Origin::default(), None, &[]).unwrap();
        assert!(!dir.join("mine").exists());
        assert!(dir.join("rows/part-00000.parquet").exists());
        assert!(dir.join("kids/part-00000.parquet").exists());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
