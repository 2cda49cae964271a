//! `weft info DIR`: what a capture holds, where it is incomplete, and its
//! size; `weft check DIR`: whether every byte of it is intact.

use std::process::ExitCode;

use anyhow::{Context as _, Result};
use serde_json::json;
use weft_capture::{
    info::{render, summarise},
    metadata,
};

use crate::cli::InfoArgs;

pub fn run(args: &InfoArgs) -> Result<ExitCode> {
    let summary = summarise(&args.dir)?;
    if args.json {
        println!("{}", serde_json::to_string(&summary)?);
    } else {
        print!("{}", render(&args.dir, &summary));
    }
    Ok(ExitCode::SUCCESS)
}

/// `weft check DIR`: every checksum of the capture verified; exit 1 when
/// anything is damaged.
pub fn check(args: &InfoArgs) -> Result<ExitCode> {
    let dir = &args.dir;
    let report =
        weft_store::check(dir).with_context(|| format!("failed to check {}", dir.display()))?;
    // weft.json is ours, not the store's: it must at least parse.
    let metadata = metadata::read_metadata(dir).err().map(|e| format!("{e:#}"));
    let problems: Vec<&String> = report.problems.iter().chain(&metadata).collect();
    if args.json {
        println!(
            "{}",
            json!({
                "dir": dir.display().to_string(),
                "chunks": report.chunks,
                "records": report.records,
                "chunks_deleted": report.deleted,
                "problems": problems,
                "unfinished": report.unfinished,
            })
        );
    } else {
        for problem in &problems {
            println!("damaged     {problem}");
        }
        for problem in &report.unfinished {
            println!(
                "unfinished  {problem} (the capture did not close cleanly; reads leave it out)"
            );
        }
        println!(
            "{}: {} chunks ({} records) checked, {} deleted by the disk budget; {}",
            dir.display(),
            report.chunks - report.deleted,
            report.records,
            report.deleted,
            match problems.len() {
                0 => "no damage".to_owned(),
                n => format!("{n} damaged"),
            }
        );
    }
    Ok(if problems.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
