//! weft's exports: a capture's records in the formats other tools read.
//! A source's records as Parquet (whole, or in Hive-style partitions),
//! JSON lines or CSV, streamed from the capture (memory is one row group,
//! not the capture) into a temporary file that is renamed into place only
//! when complete; packets also as pcapng, PT calls as folded stacks, and
//! every source as a Perfetto trace.
//!
//! Reads captures through `weft-recording` and `weft-query`; must not
//! depend on the command line (the binary hands it an [`Export`]) or on
//! Intel PT decoding (calls are read as the capture stored them).

mod error;
mod partition;
mod pcapng;
mod perfetto;
mod stacks;
mod wall;

use std::{
    collections::HashMap,
    fs::{self, File},
    io::{BufWriter, Write},
    os::unix::fs::OpenOptionsExt as _,
    path::{Path, PathBuf},
    sync::Arc,
};

use error::refuse;
pub use error::{Error, Result};
use parquet::{
    basic::Encoding,
    basic::{
        ConvertedType, LogicalType, Repetition, TimeUnit, TimestampType, Type as PhysicalType,
    },
    data_type::{ByteArray, ByteArrayType, Int64Type},
    errors::ParquetError,
    file::{properties::WriterProperties, writer::SerializedFileWriter},
    schema::types::{ColumnPath, Type},
};
use wall::{WALL_TIME, WallClock};
use weft_capture::{
    capture,
    metadata::{Host, Metadata},
    open::Capture,
};
use weft_query::{Catalog, Cell, Header, Kind};

/// One export: what to read and where to write it.
#[derive(Clone, Debug)]
pub struct Export {
    /// The capture directory.
    pub dir: PathBuf,
    /// The file to write (with `partition`, the directory).
    pub output: PathBuf,
    pub format: FileFormat,
    /// The source whose records to write.
    pub source: String,
    /// A condition of the query language the records must meet.
    pub condition: Option<String>,
    /// A window of the query language (`last 60s`, `from … to …`).
    pub window: Option<String>,
    /// Read a capture whose damaged chunks are left out.
    pub skip_damaged: bool,
    /// Hive-style partitions by host and hour under `output` (Parquet).
    pub partition: bool,
    /// The host a partition names (default: the capture's).
    pub host: Option<String>,
    /// How Parquet column chunks are compressed.
    pub compression: Compression,
}

/// Parquet's compression codecs weft writes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Compression {
    /// zstd at its default level: the smallest files for the time it takes
    /// (docs/exports.md has the measurement).
    #[default]
    Zstd,
    /// Snappy: faster to write, larger.
    Snappy,
    /// None, as weft wrote before.
    None,
}

impl Compression {
    fn codec(self) -> parquet::basic::Compression {
        match self {
            Self::Zstd => parquet::basic::Compression::ZSTD(parquet::basic::ZstdLevel::default()),
            Self::Snappy => parquet::basic::Compression::SNAPPY,
            Self::None => parquet::basic::Compression::UNCOMPRESSED,
        }
    }
}

/// What an export writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FileFormat {
    /// Apache Parquet, one row group per million rows.
    Parquet,
    /// One JSON object per line.
    Jsonl,
    /// CSV with a header line.
    Csv,
    /// pcapng of the net source's packets.
    Pcapng,
    /// Folded stacks of the calls source (PT call traces).
    Folded,
    /// A Perfetto trace (protobuf) of every source.
    Perfetto,
}

/// Rows per Parquet row group: bounds memory (about 10 bytes per cell).
const ROW_GROUP: usize = 1 << 20;

/// Writes `export`; says what it wrote.
pub fn run(export: &Export) -> Result<String> {
    let dir = &export.dir;
    let capture = Capture::open(dir)?;
    let snapshot = capture::open(dir, export.skip_damaged)?;
    let metadata = capture.metadata()?;
    check(export)?;
    // Built where it is used: pcapng and folded stacks need no catalog.
    let catalog = || capture.catalog(&snapshot, true);
    if export.partition {
        return partitioned(export, &snapshot, &*catalog()?, &metadata);
    }
    let to_stdout = export.output.as_os_str() == "-";
    let (tmp, file) = if to_stdout {
        (PathBuf::from("standard output"), stdout()?)
    } else {
        create_temp(&export.output)?
    };
    let written = match export.format {
        FileFormat::Pcapng => write_pcapng(&snapshot, &metadata, file).map_err(|e| e.writing(&tmp)),
        FileFormat::Folded if stacks::folds(&export.source) => {
            catalog().map_err(Error::from).and_then(|catalog| {
                stacks::write(&snapshot, &catalog, &query_text(export), file)
                    .map_err(|e| e.writing(&tmp))
            })
        }
        FileFormat::Folded => write_folded(&snapshot, file).map_err(|e| e.writing(&tmp)),
        FileFormat::Perfetto => catalog()
            .map_err(Error::from)
            .and_then(|catalog| write_perfetto(export, &snapshot, &catalog, &metadata, file)),
        _ => catalog()
            .map_err(Error::from)
            .and_then(|catalog| write_rows(export, &snapshot, &catalog, file, &tmp)),
    };
    let done = written.and_then(|rows| {
        if to_stdout {
            return Ok(rows);
        }
        rename(&tmp, &export.output)?;
        Ok(rows)
    });
    let rows = match done {
        Ok(rows) => rows,
        Err(error) => {
            if !to_stdout {
                let _ = fs::remove_file(&tmp);
            }
            return Err(error);
        }
    };
    let what = if export.format == FileFormat::Perfetto {
        "records of every source"
    } else {
        &format!("{} records", export.source)
    };
    let to = if to_stdout {
        "standard output".into()
    } else {
        export.output.display().to_string()
    };
    Ok(format!("exported {rows} {what} to {to}"))
}

/// Waits until `file` is on disk; a pipe or terminal (`-o -`) has
/// nothing to sync, which the kernel says with `EINVAL`.
fn synced(file: &File) -> std::io::Result<()> {
    match file.sync_all() {
        Err(error) if error.kind() == std::io::ErrorKind::InvalidInput => Ok(()),
        other => other,
    }
}

/// Standard output as a file of its own (a copy of its descriptor), for
/// `-o -`: the writers take a file, and a pipe into `tshark -r -` or `jq`
/// is written as one.
fn stdout() -> Result<File> {
    use std::os::fd::AsFd as _;
    let fd = std::io::stdout()
        .as_fd()
        .try_clone_to_owned()
        .map_err(|error| Error::File {
            doing: "failed to use",
            path: "standard output".into(),
            error,
        })?;
    Ok(File::from(fd))
}

/// The rows of the export's query into `file` as its format says; how
/// many.
fn write_rows(
    export: &Export,
    snapshot: &weft_store::Snapshot,
    catalog: &Catalog,
    file: File,
    tmp: &Path,
) -> Result<u64> {
    let text = query_text(export);
    let mut sink = Sink::new(export.format, file, export.compression);
    let mut wall = WallClock::new(catalog.wall_offset);
    let mut failed = None;
    let mut rows = 0u64;
    let streamed_rows = weft_query::stream(snapshot, catalog, &text, &mut |headers, cells| {
        if failed.is_none() {
            rows += 1;
            let (headers, cells) = wall.row(headers, cells);
            failed = sink.row(headers, cells).err();
        }
    });
    let failed = failed.map(|error| error.writing(tmp));
    let answer = streamed(streamed_rows, failed, &text, &export.dir)?;
    sink.finish(wall.headers(&answer.columns))
        .map_err(|e| e.writing(tmp))?;
    Ok(rows)
}

/// Every source a Perfetto trace shows, over the window, into `file`; how
/// many records.
fn write_perfetto(
    export: &Export,
    snapshot: &weft_store::Snapshot,
    catalog: &Catalog,
    metadata: &Metadata,
    file: File,
) -> Result<u64> {
    let boottime = metadata.boottime_ahead();
    let mut writer = perfetto::Writer::new(BufWriter::new(file), boottime)?;
    let threads = weft_capture::tasks::threads(snapshot)?.unwrap_or_default();
    let start = snapshot.time_range()?.map_or(0, |range| *range.start());
    writer.process_tree(start, &threads)?;
    let app_shapes: Vec<perfetto::Shape> = (0..)
        .zip(&metadata.app_sources)
        .map(|(nth, (name, kinds))| perfetto::app_shape(name, nth, kinds))
        .collect();
    for shape in perfetto::SHAPES.iter().chain(&app_shapes) {
        if catalog.source(&shape.source).is_none() {
            continue;
        }
        let text = match &export.window {
            Some(window) => format!("{} {window}", shape.source),
            None => shape.source.to_string(),
        };
        let mut failed = None;
        let result = weft_query::stream(snapshot, catalog, &text, &mut |headers, cells| {
            if failed.is_none() {
                failed = writer.record(shape, headers, &cells).err().map(Error::from);
            }
        });
        streamed(result, failed, &text, &export.dir)?;
    }
    if catalog.source(SWITCH).is_some() {
        write_switches(export, snapshot, catalog, &threads, &mut writer)?;
    }
    for &(source, values, name, uuid) in perfetto::COUNTERS {
        if catalog.source(source).is_none() {
            continue;
        }
        let window = export.window.as_deref().unwrap_or_default();
        let text = format!("{source} {window} | {values}");
        let failed = |e| weft_capture::Error::of_query(e, &text, &export.dir);
        let query = weft_query::parse(&text).map_err(failed)?;
        let answer = weft_query::answer(snapshot, catalog, &query).map_err(failed)?;
        for row in &answer.rows {
            if let [Cell::Int(at), Cell::Int(value)] = row.as_slice() {
                writer.counter(uuid, name, u64::try_from(*at).unwrap_or(0), *value)?;
            }
        }
    }
    let events = writer.events;
    let file = writer
        .into_inner()
        .into_inner()
        .map_err(std::io::IntoInnerError::into_error)?;
    synced(&file)?;
    Ok(events)
}

/// The context-switch source.
const SWITCH: &str = "switch";

/// The `switch` source over the window as Perfetto's scheduling events,
/// each thread named as the capture's task records last name it.
fn write_switches<W: Write>(
    export: &Export,
    snapshot: &weft_store::Snapshot,
    catalog: &weft_query::Catalog,
    threads: &[weft_capture::tasks::Thread],
    writer: &mut perfetto::Writer<W>,
) -> Result<()> {
    let names: HashMap<u32, &str> = threads.iter().map(|t| (t.tid, t.name.as_str())).collect();
    let text = match &export.window {
        Some(window) => format!("{SWITCH} {window}"),
        None => SWITCH.to_owned(),
    };
    let mut failed = None;
    let result = weft_query::stream(snapshot, catalog, &text, &mut |headers, cells| {
        let int = |name: &str| {
            let at = headers.iter().position(|h| h.name == name)?;
            match cells.get(at) {
                Some(Cell::Int(v)) => u64::try_from(*v).ok(),
                _ => None,
            }
        };
        let (Some(cpu), Some(ts), Some(prev), Some(next)) =
            (int("cpu"), int("ts"), int("prev_tid"), int("next_tid"))
        else {
            return;
        };
        let (cpu, prev, next) = (cpu as u32, prev as u32, next as u32);
        // The idle thread is the kernel's `swapper/N`, with no task record.
        let idle = format!("swapper/{cpu}");
        let name = |tid: u32| match tid {
            0 => idle.as_str(),
            _ => names.get(&tid).copied().unwrap_or_default(),
        };
        if failed.is_none() {
            failed = writer
                .switch(cpu, ts, (prev, name(prev)), (next, name(next)))
                .err()
                .map(Error::from);
        }
    });
    streamed(result, failed, &text, &export.dir).map(|_| ())
}

/// The capture's PT calls into `file` as folded stacks; how many calls.
fn write_folded(snapshot: &weft_store::Snapshot, file: File) -> Result<u64> {
    let (lines, calls) = weft_capture::pt_calls::folded(snapshot)?;
    let mut out = BufWriter::new(file);
    for line in &lines {
        writeln!(out, "{line}")?;
    }
    let file = out
        .into_inner()
        .map_err(std::io::IntoInnerError::into_error)?;
    synced(&file)?;
    Ok(calls)
}

/// The interfaces' names each session noted when it attached to them.
fn interface_names(metadata: &Metadata) -> std::collections::HashMap<u32, String> {
    (metadata.sessions.iter())
        .filter_map(|session| session.sources.get("net"))
        .flat_map(|net| &net.interfaces)
        .filter_map(|(index, name)| Some((index.parse().ok()?, name.clone())))
        .collect()
}

/// Every packet of the capture's `net` source into `file` as pcapng.
fn write_pcapng(snapshot: &weft_store::Snapshot, metadata: &Metadata, file: File) -> Result<u64> {
    let wall_offset = metadata.wall_offset().unwrap_or(0);
    let names = interface_names(metadata);
    let mut writer = pcapng::Writer::new(BufWriter::new(file), wall_offset, names)?;
    let packets = pcapng::write_all(snapshot, &mut writer)?;
    let file = writer
        .into_inner()
        .into_inner()
        .map_err(std::io::IntoInnerError::into_error)?;
    synced(&file)?;
    Ok(packets)
}

/// Refuses what a format cannot do, before anything is written.
fn check(export: &Export) -> Result<()> {
    if export.partition && export.format != FileFormat::Parquet {
        refuse!("--partition writes Parquet: leave out --format or give --format parquet");
    }
    if export.partition && export.output.as_os_str() == "-" {
        refuse!("--partition writes a directory of files: -o - (standard output) cannot hold them");
    }
    if export.format == FileFormat::Perfetto && export.condition.is_some() {
        refuse!("--format perfetto writes every source: leave out --where (--window applies)");
    }
    // The formats of one source that write all of it.
    let whole = match export.format {
        FileFormat::Pcapng => Some(("pcapng", ["net", "packets"])),
        FileFormat::Folded if !stacks::folds(&export.source) => {
            Some(("folded", ["calls", "calls"]))
        }
        _ => None,
    };
    if let Some((format, sources)) = whole {
        if !sources.contains(&export.source.as_str()) {
            refuse!(
                "--format {format} exports the {} source{}, not {}",
                sources[0],
                if format == "folded" {
                    " (PT calls), stacks (on-CPU) or sched (off-CPU)"
                } else {
                    ""
                },
                export.source
            );
        }
        if export.condition.is_some() || export.window.is_some() {
            refuse!("--format {format} writes the whole source: leave out --where and --window");
        }
    }
    Ok(())
}

/// `--partition`: the rows into Hive-style partitions under `-o`.
fn partitioned(
    export: &Export,
    snapshot: &weft_store::Snapshot,
    catalog: &Catalog,
    metadata: &Metadata,
) -> Result<String> {
    let session = metadata.sessions.first();
    let recorded_on = (session.map(|s| s.host.hostname.clone())).filter(|h| !h.is_empty());
    let host = (export.host.clone())
        .or(recorded_on)
        .unwrap_or_else(|| Host::this_machine().hostname);
    if host.contains('/') || host.contains('=') {
        refuse!("--host {host:?}: a partition's host may not hold `/` or `=`");
    }
    let wall_offset = catalog.wall_offset.unwrap_or(0);
    let id = session.map_or(0, |s| s.start_ns);
    let mut parts =
        partition::Partitions::new(&export.output, &host, &export.source, wall_offset, id)
            .compressed(export.compression);
    let text = query_text(export);
    let (mut failed, mut rows) = (None, 0u64);
    let result = weft_query::stream(snapshot, catalog, &text, &mut |headers, cells| {
        if failed.is_none() {
            rows += 1;
            failed = parts.row(headers, cells).err();
        }
    });
    if let Err(error) = streamed(result, failed, &text, &export.dir) {
        parts.abandon();
        return Err(error);
    }
    let files = parts.finish()?;
    Ok(format!(
        "exported {rows} {} records of {host} into {files} partition(s) under {}",
        export.source,
        export.output.display()
    ))
}

/// The export's query: its source, condition and window.
fn query_text(export: &Export) -> String {
    let mut text = export.source.clone();
    if let Some(condition) = &export.condition {
        text = format!("{text} where {condition}");
    }
    if let Some(window) = &export.window {
        text = format!("{text} {window}");
    }
    text
}

/// A new file, mode 0600, at `OUT.weft-tmp` next to `out` (a leftover of
/// an earlier run there is replaced): the path and the file.
fn create_temp(out: &Path) -> Result<(PathBuf, File)> {
    let tmp = temp_path(out);
    let _ = fs::remove_file(&tmp);
    let file = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&tmp)
        .map_err(|error| Error::File {
            doing: "failed to create",
            path: tmp.clone(),
            error,
        })?;
    Ok((tmp, file))
}

/// What streaming query `text` of capture `dir` came to: its query error
/// rendered with a caret, a read error naming the capture, or the first
/// error of whoever took the rows.
fn streamed<T>(
    result: Result<T, weft_query::Error>,
    failed: Option<Error>,
    text: &str,
    dir: &Path,
) -> Result<T> {
    match (result, failed) {
        (Err(error), _) => Err(weft_capture::Error::of_query(error, text, dir).into()),
        (Ok(_), Some(error)) => Err(error),
        (Ok(answer), None) => Ok(answer),
    }
}

/// Puts the finished file `tmp` in place at `to`.
fn rename(tmp: &Path, to: &Path) -> Result<()> {
    fs::rename(tmp, to).map_err(|error| Error::Rename {
        from: tmp.to_owned(),
        to: to.to_owned(),
        error,
    })
}

/// `OUT.weft-tmp` next to `OUT`, so the final rename stays on one file system.
fn temp_path(output: &Path) -> PathBuf {
    let mut name = output.file_name().unwrap_or_default().to_os_string();
    name.push(".weft-tmp");
    output.with_file_name(name)
}

/// Where rows go: lines of text, or Parquet columns.
enum Sink {
    Lines {
        out: BufWriter<File>,
        csv: bool,
        started: bool,
    },
    Parquet {
        file: Option<File>,
        writer: Option<SerializedFileWriter<File>>,
        columns: Vec<Column>,
        compression: Compression,
    },
}

/// One Parquet column's buffered values and definition levels (1 = present).
enum Column {
    Ints(Vec<i64>, Vec<i16>),
    /// Nanoseconds written as microseconds (`wall_time`).
    Micros(Vec<i64>, Vec<i16>),
    Texts(Vec<ByteArray>, Vec<i16>),
}

impl Sink {
    fn new(format: FileFormat, file: File, compression: Compression) -> Self {
        match format {
            FileFormat::Parquet => Self::Parquet {
                file: Some(file),
                writer: None,
                columns: Vec::new(),
                compression,
            },
            FileFormat::Jsonl | FileFormat::Csv => Self::Lines {
                out: BufWriter::new(file),
                csv: format == FileFormat::Csv,
                started: false,
            },
            FileFormat::Pcapng | FileFormat::Folded | FileFormat::Perfetto => {
                unreachable!("pcapng, folded and perfetto are not written by rows")
            }
        }
    }

    fn row(&mut self, headers: &[Header], cells: Vec<Cell>) -> Result<()> {
        self.start(headers)?;
        match self {
            Self::Lines { out, csv: true, .. } => {
                out.write_all(weft_query::answer::csv_line(&cells).as_bytes())?;
            }
            Self::Lines { out, .. } => {
                out.write_all(weft_query::answer::json_line(headers, &cells).as_bytes())?;
            }
            Self::Parquet { columns, .. } => {
                for (column, cell) in columns.iter_mut().zip(cells) {
                    column.push(cell);
                }
                if columns.first().is_some_and(|c| c.len() >= ROW_GROUP) {
                    self.flush()?;
                }
            }
        }
        Ok(())
    }

    /// Writes the header or creates the Parquet writer, once.
    fn start(&mut self, headers: &[Header]) -> Result<()> {
        match self {
            Self::Lines { out, csv, started } if !*started => {
                *started = true;
                if *csv {
                    out.write_all(weft_query::answer::csv_header(headers).as_bytes())?;
                }
            }
            Self::Parquet {
                file,
                writer,
                columns,
                compression,
            } if writer.is_none() => {
                let schema = Arc::new(schema(headers)?);
                let props = Arc::new(properties(headers, *compression));
                let file = file.take().ok_or_else(|| {
                    ParquetError::General("the Parquet file was already started".into())
                })?;
                *writer = Some(SerializedFileWriter::new(file, schema, props)?);
                *columns = headers.iter().map(Column::new).collect();
            }
            _ => {}
        }
        Ok(())
    }

    /// Writes the buffered rows as one row group.
    fn flush(&mut self) -> Result<()> {
        let Self::Parquet {
            writer: Some(writer),
            columns,
            ..
        } = self
        else {
            return Ok(());
        };
        if columns.first().is_none_or(|c| c.len() == 0) {
            return Ok(());
        }
        let mut group = writer.next_row_group()?;
        for column in columns.iter_mut() {
            let mut out = group
                .next_column()?
                .ok_or_else(|| ParquetError::General("schema and columns disagree".into()))?;
            match column {
                Column::Ints(values, defs) | Column::Micros(values, defs) => {
                    out.typed::<Int64Type>()
                        .write_batch(values, Some(defs), None)?;
                    values.clear();
                    defs.clear();
                }
                Column::Texts(values, defs) => {
                    out.typed::<ByteArrayType>()
                        .write_batch(values, Some(defs), None)?;
                    values.clear();
                    defs.clear();
                }
            }
            out.close()?;
        }
        group.close()?;
        Ok(())
    }

    /// Finishes the file (a header or schema even with no rows) and syncs it.
    fn finish(mut self, headers: &[Header]) -> Result<()> {
        self.start(headers)?;
        self.flush()?;
        let file = match self {
            Self::Lines { out, .. } => out
                .into_inner()
                .map_err(std::io::IntoInnerError::into_error)?,
            Self::Parquet { writer, .. } => writer
                .ok_or_else(|| ParquetError::General("the Parquet writer never started".into()))?
                .into_inner()?,
        };
        synced(&file)?;
        Ok(())
    }
}

impl Column {
    fn new(header: &Header) -> Self {
        if header.kind.is_text() {
            Self::Texts(Vec::new(), Vec::new())
        } else if header.name == WALL_TIME {
            Self::Micros(Vec::new(), Vec::new())
        } else {
            Self::Ints(Vec::new(), Vec::new())
        }
    }

    fn len(&self) -> usize {
        match self {
            Self::Ints(_, defs) | Self::Micros(_, defs) | Self::Texts(_, defs) => defs.len(),
        }
    }

    fn push(&mut self, cell: Cell) {
        match (self, cell) {
            (Self::Ints(values, defs), Cell::Int(v)) => {
                values.push(v);
                defs.push(1);
            }
            (Self::Micros(values, defs), Cell::Int(ns)) => {
                values.push(ns.div_euclid(1000));
                defs.push(1);
            }
            (Self::Texts(values, defs), Cell::Text(t)) => {
                values.push(ByteArray::from(t.into_bytes()));
                defs.push(1);
            }
            (Self::Texts(values, defs), Cell::Int(v)) => {
                values.push(ByteArray::from(v.to_string().into_bytes()));
                defs.push(1);
            }
            (Self::Ints(_, defs) | Self::Micros(_, defs) | Self::Texts(_, defs), _) => {
                defs.push(0);
            }
        }
    }
}

/// The file's properties: the codec for every column, and times (which
/// only grow, a record after another) as deltas, not a dictionary.
fn properties(headers: &[Header], compression: Compression) -> WriterProperties {
    let mut builder = WriterProperties::builder()
        .set_created_by(format!("weft {}", env!("CARGO_PKG_VERSION")))
        .set_compression(compression.codec());
    for header in headers.iter().filter(|h| matches!(h.kind, Kind::Time)) {
        let column = ColumnPath::from(header.name.as_str());
        builder = builder
            .set_column_dictionary_enabled(column.clone(), false)
            .set_column_encoding(column, Encoding::DELTA_BINARY_PACKED);
    }
    builder.build()
}

/// A Parquet schema with one optional column per header: names and
/// addresses as UTF-8 strings, everything else as 64-bit integers.
fn schema(headers: &[Header]) -> Result<Type> {
    let fields = headers
        .iter()
        .map(|h| {
            let builder = if h.kind.is_text() {
                Type::primitive_type_builder(&h.name, PhysicalType::BYTE_ARRAY)
                    .with_converted_type(ConvertedType::UTF8)
            } else if h.name == WALL_TIME {
                // Microseconds: Spark refuses TIMESTAMP(NANOS) (tested);
                // `time` keeps the nanoseconds.
                Type::primitive_type_builder(&h.name, PhysicalType::INT64).with_logical_type(Some(
                    LogicalType::Timestamp(TimestampType {
                        is_adjusted_to_u_t_c: true,
                        unit: TimeUnit::MICROS,
                    }),
                ))
            } else {
                Type::primitive_type_builder(&h.name, PhysicalType::INT64)
            };
            Ok(Arc::new(
                builder.with_repetition(Repetition::OPTIONAL).build()?,
            ))
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(Type::group_type_builder("weft")
        .with_fields(fields)
        .build()?)
}
