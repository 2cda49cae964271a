//! `weft query DIR 'QUERY'`, `weft query --live 'QUERY'` and `weft query
//! --fleet DIR,DIR 'QUERY'`: answers a query on a capture directory, on the
//! running recorder through its socket, or over many hosts' captures, as
//! a table, JSON lines or CSV, or explains how it was answered.

use std::{
    io::{ErrorKind, Write as _},
    path::Path,
    process::ExitCode,
    sync::Arc,
};

use anyhow::{Context as _, Result, bail};
use weft_capture::{
    answer::{answer, over_firing},
    capture, fleet,
    open::Capture,
};
use weft_peer::{Peer, Secret};
use weft_query::fleet::Host;
use weft_recording::live::client;

use crate::cli::QueryArgs;

/// Asks the fleet's hosts: each a capture directory, or a recorder at a
/// peer address when no directory has that name.
fn ask_fleet(args: &QueryArgs, query: &str) -> Result<String> {
    let mut secret = None;
    let mut hosts: Vec<Box<dyn Host>> = Vec::new();
    for entry in &args.fleet {
        let dir = Path::new(entry);
        if dir.is_dir() || entry.contains('/') {
            hosts.push(Box::new(fleet::Directory::open(dir, args.skip_damaged)?));
            continue;
        }
        let secret = match &secret {
            Some(secret) => Arc::clone(secret),
            None => Arc::clone(secret.insert(Arc::new(
                Secret::read(&args.peer_secret).context("--peer-secret")?,
            ))),
        };
        hosts.push(Box::new(Peer::new(entry, secret)?));
    }
    let mut asked: Vec<&mut dyn Host> = hosts
        .iter_mut()
        .map(|h| &mut **h as &mut dyn Host)
        .collect();
    Ok(fleet::answer(&mut asked, query, args.format())?)
}

pub fn run(args: &QueryArgs) -> Result<ExitCode> {
    let text = match (args.live, &args.args[..]) {
        (false, [query]) if !args.fleet.is_empty() => ask_fleet(args, query)?,
        (false, _) if !args.fleet.is_empty() => {
            bail!("with --fleet, give only the query (the captures are --fleet's)")
        }
        (false, [dir, query @ ..]) if args.trigger.is_some() && query.len() <= 1 => {
            let dir = Path::new(dir);
            let snapshot = capture::open(dir, args.skip_damaged)?;
            let capture = Capture::open(dir)?;
            let n = args.trigger.expect("matched above");
            over_firing(
                &capture,
                &snapshot,
                n,
                query.first().map(String::as_str),
                args.format(),
            )?
        }
        (true, [query]) => client::ask(query, args.format(), args.full_scan)?,
        (false, [dir, query]) => {
            let dir = Path::new(dir);
            let snapshot = capture::open(dir, args.skip_damaged)?;
            let capture = Capture::open(dir)?;
            answer(
                &capture,
                &snapshot,
                query,
                args.format(),
                None,
                args.full_scan,
            )?
        }
        (true, _) => bail!("with --live, give only the query (no directory)"),
        (false, _) => bail!("give the capture directory and the query"),
    };
    let mut stdout = std::io::stdout().lock();
    match stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush())
    {
        // A closed pipe (`| head`) is the reader's choice, not an error.
        Err(e) if e.kind() != ErrorKind::BrokenPipe => Err(e).context("failed to write the answer"),
        _ => Ok(ExitCode::SUCCESS),
    }
}
