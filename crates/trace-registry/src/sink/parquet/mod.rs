//! Parquet datasets: every record kind of a trace as a folder of Parquet files that DuckDB,
//! Spark, Trino or DataFusion read as one table.
//!
//! The layout is the same for every format:
//!
//! ```text
//! DIR/_tracekit.json              schema version, source, tables, row counts, completeness
//! DIR/<table>/part-00000.parquet  row groups of about a million rows, with statistics
//! DIR/<table>/part-00001.parquet  (files cut at about 128 MiB, or every --rows-per-file rows)
//! ```
//!
//! The tables are those of the record reader ([`crate::Records::tables`]) and every child
//! table ([`crate::schema::Type::Rows`]) they hold: a child row starts with its parent's key
//! columns ([`crate::schema::Field::key`]), so it joins back to its parent. Nested records
//! ([`crate::schema::Type::Struct`]) are flattened into their parent's columns. Integers
//! keep their width and sign (addresses are `UInt64`), byte strings are `Binary`, names are
//! dictionary-encoded strings, lists of plain values are list columns. Every table is
//! written, with an empty file when it has no rows, so engines never miss a folder.
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

use crate::Error;
use crate::schema::{Row, Schema};
use columns::Tables;
use writer::{Files, Writer};

/// The version of the dataset layout and table schemas, in `_tracekit.json`. It changes
/// when a table or column is renamed, removed or retyped (added columns keep it).
pub const SCHEMA_VERSION: u32 = 1;

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
    /// Rows per row group (the unit engines skip by statistics).
    pub row_group_rows: usize,
    /// Rows handed from the reader to the encoder at a time (memory is a few batches).
    pub batch_rows: usize,
    /// Bytes of variable-length values (memory contents, strings) that also end a batch.
    pub batch_bytes: usize,
    /// Threads: 1 reads and encodes in turn; more read in one thread while the others
    /// encode the columns of the previous batch.
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
    /// The input's file name (or `-` for standard input).
    pub file: String,
    /// The input's size in bytes, when known.
    pub size: Option<u64>,
    /// The format's name in the registry.
    pub format: String,
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

/// A Parquet dataset being written.
#[derive(Debug)]
pub struct Dataset {
    dir: PathBuf,
    tmp: PathBuf,
    tables: Option<Tables>,
    finished: bool,
}

impl std::fmt::Debug for Tables {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tables").finish_non_exhaustive()
    }
}

impl Dataset {
    /// Starts a dataset at `dir` for records of these tables (as the record reader indexes
    /// them). Nothing appears at `dir` until [`Dataset::finish`]; an existing `dir` is an
    /// error unless `replace`.
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
                format!("{} exists (--force replaces it)", dir.display()),
                std::io::Error::from(std::io::ErrorKind::AlreadyExists),
            ));
        }
        let name = dir
            .file_name()
            .map_or_else(|| "dataset".into(), |n| n.to_string_lossy().into_owned());
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
            finished: false,
        };
        let mut tables = Tables::new(schemas, options.batch_rows, options.batch_bytes);
        let layout: Vec<_> = tables
            .tables
            .iter()
            .map(|t| (t.name.clone(), Arc::clone(&t.schema)))
            .collect();
        let files = Files::create(&dataset.tmp, &layout, options.properties(), options.clone())?;
        tables.set_writer(Writer::new(files, options.threads));
        dataset.tables = Some(tables);
        Ok(dataset)
    }

    /// The output tables and their Arrow schemas, in folder order.
    pub fn tables(&self) -> Vec<(String, Arc<arrow_schema::Schema>)> {
        self.tables.as_ref().map_or_else(Vec::new, |t| {
            t.tables
                .iter()
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
        tables.check()
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
        notes: &[String],
    ) -> Result<Vec<TableSummary>, Error> {
        let tables = self.tables.take();
        let Some(tables) = tables else {
            return Ok(Vec::new());
        };
        let columns: Vec<_> = tables
            .tables
            .iter()
            .map(|t| (t.name.clone(), Arc::clone(&t.schema)))
            .collect();
        let written = match tables.into_writer()? {
            Some(w) => w.finish()?,
            None => Vec::new(),
        };
        let summaries: Vec<TableSummary> = columns
            .iter()
            .zip(&written)
            .map(|((name, _), w)| TableSummary {
                name: name.clone(),
                rows: w.rows,
                files: w.files,
                bytes: w.bytes,
            })
            .collect();
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
    notes: &'a [String],
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
}

fn manifest<'a>(
    origin: &'a Origin,
    failure: Option<&Error>,
    notes: &'a [String],
    columns: &'a [(String, Arc<arrow_schema::Schema>)],
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
            .map(|((_, schema), s)| ManifestTable {
                name: &s.name,
                rows: s.rows,
                files: s.files,
                bytes: s.bytes,
                columns: schema
                    .fields()
                    .iter()
                    .map(|f| ManifestColumn {
                        name: f.name(),
                        ty: f.data_type().to_string(),
                        nullable: f.is_nullable(),
                    })
                    .collect(),
            })
            .collect(),
        notes,
    }
}
