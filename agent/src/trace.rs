//! `weft trace`: bpftrace-style one-liners. The arguments become plain
//! [`Options`], which `weft_recording::oneliner` runs.

use std::{io::Read as _, process::ExitCode};

use anyhow::{Context as _, Result, bail};
use weft_oneliner::OutputFormat;
use weft_recording::oneliner::{self, Action, Options};

use crate::cli::{TraceArgs, TraceFormat};

pub fn run(args: &TraceArgs) -> Result<ExitCode> {
    if args.list.list && args.expression.is_none() {
        let search = args.words.first().map(String::as_str);
        let out = &mut std::io::stdout().lock();
        oneliner::list(search, args.list.verbose, args.pid, out)?;
        return Ok(ExitCode::SUCCESS);
    }
    if args.bpftrace.no_warnings {
        crate::NO_WARNINGS.store(true, std::sync::atomic::Ordering::Relaxed);
    }
    let (text, params) = program_text(args)?;
    // As bpftrace names the program in warnings.
    let source = match args.words.first() {
        Some(path) if args.expression.is_none() && path != "-" && !path.contains(['{', '\n']) => {
            path.clone()
        }
        _ => "stdin".to_owned(),
    };
    oneliner::run(Options {
        text,
        source,
        helper_errors: args.bpftrace.helper_errors,
        params,
        unsafe_calls: args.unsafe_calls,
        command: args.command.clone(),
        pid: args.pid,
        format: match args.format {
            TraceFormat::Text => OutputFormat::Text,
            TraceFormat::Json => OutputFormat::Json,
            TraceFormat::Folded => OutputFormat::Folded,
        },
        action: if args.list.list {
            Action::List
        } else if args.explain || args.bpftrace.debug > 0 {
            Action::Explain
        } else {
            Action::Run
        },
        output: args.output.clone(),
        quiet: args.quiet,
        ring_bytes: u32::try_from(args.ring_size.next_power_of_two())
            .context("--ring-size is too large")?,
        store: args.store.clone(),
        symbols: args.symbols.finder(),
        from: args.from.clone(),
        trigger: args.trigger,
        verbose: args.list.verbose,
    })?;
    Ok(ExitCode::SUCCESS)
}

/// The largest program file read: bpftrace's largest tools are a few KiB.
const MAX_PROGRAM_BYTES: u64 = 1 << 20;

/// The program and its positional parameters: `-e`'s text, or the first
/// word's, or stdin's when it is `-`, or when that word names a file (a script such as bpftrace's
/// tools, `weft trace opensnoop.bt`) its contents, as `bpftrace FILE`
/// reads it; the words after it (all of them with `-e`) are parameters.
fn program_text(args: &TraceArgs) -> Result<(String, Vec<String>)> {
    if let Some(text) = &args.expression {
        return Ok((text.clone(), args.words.clone()));
    }
    let (program, params) = args.words.split_first().context("no program given")?;
    let path = std::path::Path::new(program);
    let text = if program == "-" {
        let text = std::io::read_to_string(std::io::stdin().take(MAX_PROGRAM_BYTES + 1))
            .context("failed to read the program from stdin")?;
        if text.len() as u64 > MAX_PROGRAM_BYTES {
            bail!("the program on stdin is larger than the {MAX_PROGRAM_BYTES} bytes weft reads");
        }
        text
    } else if !program.contains(['{', '\n']) {
        // Every probe has a block: a word without one names a file.
        let bytes = weft_symbols::read_file_within(path, MAX_PROGRAM_BYTES).map_err(|e| {
            // bpftrace's words: the reason without Rust's "(os error N)".
            let reason = e.to_string();
            let reason = reason
                .split(" (os error")
                .next()
                .unwrap_or_default()
                .to_owned();
            anyhow::anyhow!("failed to open file '{program}': {reason}")
        })?;
        String::from_utf8(bytes).with_context(|| format!("{program} is not UTF-8 text"))?
    } else {
        program.clone()
    };
    Ok((text, params.to_vec()))
}
