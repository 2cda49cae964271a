//! `weft diff A [B]`: the comparison printed, and the exit status a CI job
//! reads (`weft_capture::diff` compares).

use std::process::ExitCode;

use anyhow::{Result, bail};
use weft_capture::diff::{self, Side, Threshold};

use crate::cli::DiffArgs;

pub fn run(args: &DiffArgs) -> Result<ExitCode> {
    let thresholds: Vec<Threshold> = args
        .fail_if
        .iter()
        .map(|text| Threshold::parse(text))
        .collect::<weft_capture::Result<_>>()?;
    let b_dir = match (&args.b, &args.b_window) {
        (Some(b), _) => b,
        (None, Some(_)) => &args.a,
        (None, None) => bail!("give B, or --b-window to compare two windows of A"),
    };
    let a = Side {
        dir: &args.a,
        window: args.window.as_deref(),
    };
    let b = Side {
        dir: b_dir,
        window: args.b_window.as_deref().or(args.window.as_deref()),
    };
    let diff = diff::diff(&a, &b)?;
    print!(
        "{}",
        if args.json {
            diff.json_lines()
        } else {
            diff.table()
        }
    );
    let crossed: Vec<String> = diff
        .syscalls
        .iter()
        .flat_map(|row| thresholds.iter().filter_map(|t| t.crossed(row)))
        .collect();
    for line in &crossed {
        eprintln!("weft: {line}");
    }
    Ok(if crossed.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
