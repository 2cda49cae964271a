//! `weft export`: a source's records as Parquet, JSON lines or CSV, streamed
//! from the capture (memory is one row group, not the capture) into a
//! temporary file that is renamed into place only when complete; packets
//! also as pcapng.

mod partition;
mod pcapng;
mod perfetto;

use std::{
    fs::{self, File},
    io::{BufWriter, Write as _},
    os::unix::fs::OpenOptionsExt as _,
    path::{Path, PathBuf},
    process::ExitCode,
    sync::Arc,
};

use anyhow::{Context as _, Result, anyhow, bail};
use parquet::{
    basic::{ConvertedType, Repetition, Type as PhysicalType},
    data_type::{ByteArray, ByteArrayType, Int64Type},
    file::{properties::WriterProperties, writer::SerializedFileWriter},
    schema::types::Type,
};
use weft_query::{Cell, Header, Kind};
use weft_recording::capture;

use crate::cli::{ExportArgs, ExportFormat};

/// Rows per Parquet row group: bounds memory (about 10 bytes per cell).
const ROW_GROUP: usize = 1 << 20;

pub fn run(args: &ExportArgs) -> Result<ExitCode> {
    let dir = &args.dir;
    let metadata = capture::read_metadata(dir)?;
    let snapshot = capture::open(dir, args.skip_damaged)?;
    check(args)?;
    if args.partition {
        return partitioned(args, &snapshot, &metadata);
    }
    let (tmp, file) = create_temp(&args.output)?;
    let written = match args.format {
        ExportFormat::Pcapng => write_pcapng(&snapshot, &metadata, file)
            .with_context(|| format!("failed to write {}", tmp.display())),
        ExportFormat::Folded => write_folded(&snapshot, file)
            .with_context(|| format!("failed to write {}", tmp.display())),
        ExportFormat::Perfetto => write_perfetto(args, &snapshot, &metadata, file),
        _ => write_rows(args, &snapshot, &metadata, file, &tmp),
    };
    let done = written.and_then(|rows| {
        fs::rename(&tmp, &args.output).with_context(|| {
            format!(
                "failed to rename {} to {}",
                tmp.display(),
                args.output.display()
            )
        })?;
        Ok(rows)
    });
    let rows = match done {
        Ok(rows) => rows,
        Err(error) => {
            let _ = fs::remove_file(&tmp);
            return Err(error);
        }
    };
    let what = if args.format == ExportFormat::Perfetto {
        "records of every source"
    } else {
        &format!("{} records", args.source)
    };
    eprintln!("weft: exported {rows} {what} to {}", args.output.display());
    Ok(ExitCode::SUCCESS)
}

/// The rows of the export's query into `file` as its format says; how
/// many.
fn write_rows(
    args: &ExportArgs,
    snapshot: &weft_store::Snapshot,
    metadata: &serde_json::Value,
    file: File,
    tmp: &Path,
) -> Result<u64> {
    let catalog = capture::catalog(snapshot, metadata, true)?;
    let text = query_text(args);
    let mut sink = Sink::new(args.format, file);
    let mut failed = None;
    let mut rows = 0u64;
    let streamed_rows = weft_query::stream(snapshot, &catalog, &text, &mut |headers, cells| {
        if failed.is_none() {
            rows += 1;
            failed = sink.row(headers, cells).err();
        }
    });
    let writing = || format!("failed to write {}", tmp.display());
    let failed = failed.map(|error| error.context(writing()));
    let answer = streamed(streamed_rows, failed, &text, &args.dir)?;
    sink.finish(&answer.columns).with_context(writing)?;
    Ok(rows)
}

/// Every source a Perfetto trace shows, over the window, into `file`; how
/// many records.
fn write_perfetto(
    args: &ExportArgs,
    snapshot: &weft_store::Snapshot,
    metadata: &serde_json::Value,
    file: File,
) -> Result<u64> {
    let catalog = capture::catalog(snapshot, metadata, true)?;
    let mut writer = perfetto::Writer::new(BufWriter::new(file))?;
    for shape in perfetto::SHAPES {
        if catalog.source(shape.source).is_none() {
            continue;
        }
        let text = match &args.window {
            Some(window) => format!("{} {window}", shape.source),
            None => shape.source.to_owned(),
        };
        let mut failed = None;
        let result = weft_query::stream(snapshot, &catalog, &text, &mut |headers, cells| {
            if failed.is_none() {
                failed = writer.record(shape, headers, &cells).err();
            }
        });
        streamed(result, failed, &text, &args.dir)?;
    }
    let events = writer.events;
    let file = writer
        .into_inner()
        .into_inner()
        .map_err(std::io::IntoInnerError::into_error)?;
    file.sync_all()?;
    Ok(events)
}

/// The capture's PT calls into `file` as folded stacks; how many calls.
fn write_folded(snapshot: &weft_store::Snapshot, file: File) -> Result<u64> {
    let (lines, calls) = weft_recording::pt_calls::folded(snapshot)?;
    let mut out = BufWriter::new(file);
    for line in &lines {
        writeln!(out, "{line}")?;
    }
    let file = out
        .into_inner()
        .map_err(std::io::IntoInnerError::into_error)?;
    file.sync_all()?;
    Ok(calls)
}

/// Every packet of the capture's `net` source into `file` as pcapng.
fn write_pcapng(
    snapshot: &weft_store::Snapshot,
    metadata: &serde_json::Value,
    file: File,
) -> Result<u64> {
    let wall_offset = capture::wall_offset(metadata).unwrap_or(0);
    let mut writer = pcapng::Writer::new(BufWriter::new(file), wall_offset)?;
    let packets = pcapng::write_all(snapshot, &mut writer)?;
    let file = writer
        .into_inner()
        .into_inner()
        .map_err(std::io::IntoInnerError::into_error)?;
    file.sync_all()?;
    Ok(packets)
}

/// Refuses what a format cannot do, before anything is written.
fn check(args: &ExportArgs) -> Result<()> {
    if args.partition && args.format != ExportFormat::Parquet {
        bail!("--partition writes Parquet: leave out --format or give --format parquet");
    }
    if args.format == ExportFormat::Perfetto && args.condition.is_some() {
        bail!("--format perfetto writes every source: leave out --where (--window applies)");
    }
    // The formats of one source that write all of it.
    let whole = match args.format {
        ExportFormat::Pcapng => Some(("pcapng", ["net", "packets"])),
        ExportFormat::Folded => Some(("folded", ["calls", "calls"])),
        _ => None,
    };
    if let Some((format, sources)) = whole {
        if !sources.contains(&args.source.as_str()) {
            bail!(
                "--format {format} exports the {} source, not {}",
                sources[0],
                args.source
            );
        }
        if args.condition.is_some() || args.window.is_some() {
            bail!("--format {format} writes the whole source: leave out --where and --window");
        }
    }
    Ok(())
}

/// `--partition`: the rows into Hive-style partitions under `-o`.
fn partitioned(
    args: &ExportArgs,
    snapshot: &weft_store::Snapshot,
    metadata: &serde_json::Value,
) -> Result<ExitCode> {
    let session = &metadata["sessions"][0];
    let host = match &args.host {
        Some(host) => host.clone(),
        None => session["host"]["hostname"]
            .as_str()
            .filter(|h| !h.is_empty())
            .map_or_else(
                || capture::host_json()["hostname"].to_string(),
                str::to_owned,
            ),
    };
    if host.contains('/') || host.contains('=') {
        bail!("--host {host:?}: a partition's host may not hold `/` or `=`");
    }
    let wall_offset = capture::wall_offset(metadata).unwrap_or(0);
    let id = session["start_ns"].as_u64().unwrap_or(0);
    let mut parts = partition::Partitions::new(&args.output, &host, &args.source, wall_offset, id);
    let catalog = capture::catalog(snapshot, metadata, true)?;
    let text = query_text(args);
    let (mut failed, mut rows) = (None, 0u64);
    let result = weft_query::stream(snapshot, &catalog, &text, &mut |headers, cells| {
        if failed.is_none() {
            rows += 1;
            failed = parts.row(headers, cells).err();
        }
    });
    if let Err(error) = streamed(result, failed, &text, &args.dir) {
        parts.abandon();
        return Err(error);
    }
    let files = parts.finish()?;
    eprintln!(
        "weft: exported {rows} {} records of {host} into {files} partition(s) under {}",
        args.source,
        args.output.display()
    );
    Ok(ExitCode::SUCCESS)
}

/// The export's query: its source, condition and window.
fn query_text(args: &ExportArgs) -> String {
    let mut text = args.source.clone();
    if let Some(condition) = &args.condition {
        text = format!("{text} where {condition}");
    }
    if let Some(window) = &args.window {
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
        .with_context(|| format!("failed to create {}", tmp.display()))?;
    Ok((tmp, file))
}

/// What streaming query `text` of capture `dir` came to: its query error
/// rendered with a caret, a read error naming the capture, or the first
/// error of whoever took the rows.
fn streamed<T>(
    result: Result<T, weft_query::Error>,
    failed: Option<anyhow::Error>,
    text: &str,
    dir: &Path,
) -> Result<T> {
    match (result, failed) {
        (Err(weft_query::Error::Query { span, message }), _) => Err(anyhow!(
            "{}",
            weft_query::Error::Query { span, message }.render(text)
        )),
        (Err(other), _) => Err(anyhow!(other).context(format!("failed to read {}", dir.display()))),
        (Ok(_), Some(error)) => Err(error),
        (Ok(answer), None) => Ok(answer),
    }
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
    },
}

/// One Parquet column's buffered values and definition levels (1 = present).
enum Column {
    Ints(Vec<i64>, Vec<i16>),
    Texts(Vec<ByteArray>, Vec<i16>),
}

impl Sink {
    fn new(format: ExportFormat, file: File) -> Self {
        match format {
            ExportFormat::Parquet => Self::Parquet {
                file: Some(file),
                writer: None,
                columns: Vec::new(),
            },
            ExportFormat::Jsonl | ExportFormat::Csv => Self::Lines {
                out: BufWriter::new(file),
                csv: format == ExportFormat::Csv,
                started: false,
            },
            ExportFormat::Pcapng | ExportFormat::Folded | ExportFormat::Perfetto => {
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
            } if writer.is_none() => {
                let schema = Arc::new(schema(headers)?);
                let props = Arc::new(
                    WriterProperties::builder()
                        .set_created_by(format!("weft {}", env!("CARGO_PKG_VERSION")))
                        .build(),
                );
                let file = file
                    .take()
                    .context("the Parquet file was already started")?;
                *writer = Some(SerializedFileWriter::new(file, schema, props)?);
                *columns = headers.iter().map(|h| Column::new(&h.kind)).collect();
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
                .context("schema and columns disagree")?;
            match column {
                Column::Ints(values, defs) => {
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
                .context("the Parquet writer never started")?
                .into_inner()?,
        };
        file.sync_all()?;
        Ok(())
    }
}

impl Column {
    fn new(kind: &Kind) -> Self {
        if kind.is_text() {
            Self::Texts(Vec::new(), Vec::new())
        } else {
            Self::Ints(Vec::new(), Vec::new())
        }
    }

    fn len(&self) -> usize {
        match self {
            Self::Ints(_, defs) | Self::Texts(_, defs) => defs.len(),
        }
    }

    fn push(&mut self, cell: Cell) {
        match (self, cell) {
            (Self::Ints(values, defs), Cell::Int(v)) => {
                values.push(v);
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
            (Self::Ints(_, defs) | Self::Texts(_, defs), _) => defs.push(0),
        }
    }
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
