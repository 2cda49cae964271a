//! `weft export`: the command line resolved into a `weft_export::Export`.

use std::process::ExitCode;

use anyhow::Result;
use weft_export::{Compression, Export, FileFormat};

use crate::cli::{ExportArgs, ExportCompression, ExportFormat};

pub fn run(args: &ExportArgs) -> Result<ExitCode> {
    let export = Export {
        dir: args.dir.clone(),
        output: args.output.clone(),
        format: match args.format {
            ExportFormat::Parquet => FileFormat::Parquet,
            ExportFormat::Jsonl => FileFormat::Jsonl,
            ExportFormat::Csv => FileFormat::Csv,
            ExportFormat::Pcapng => FileFormat::Pcapng,
            ExportFormat::Folded => FileFormat::Folded,
            ExportFormat::Perfetto => FileFormat::Perfetto,
        },
        source: args.source.clone(),
        condition: args.condition.clone(),
        window: args.window.clone(),
        skip_damaged: args.skip_damaged,
        compression: match args.compression {
            ExportCompression::Zstd => Compression::Zstd,
            ExportCompression::Snappy => Compression::Snappy,
            ExportCompression::None => Compression::None,
        },
        partition: args.partition,
        host: args.host.clone(),
    };
    eprintln!("weft: {}", weft_export::run(&export)?);
    Ok(ExitCode::SUCCESS)
}
