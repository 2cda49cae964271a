//! A capture directory as one host of a fleet query (`weft query --fleet`),
//! and a host's reply to a request as the bytes it sends (what a
//! recorder's peer port answers with).

use std::path::{Path, PathBuf};

use weft_query::{
    Catalog,
    fleet::{
        Host,
        wire::{Reply, Request},
    },
};
use weft_store::Snapshot;

use crate::{
    answer::AnswerFormat,
    capture,
    error::{Error, Result},
    metadata::{self, Metadata},
    open::Capture,
};

/// A capture directory read in this process. Its replies are encoded and
/// decoded as a peer's are, so `--explain` counts the bytes a peer would
/// send.
pub struct Directory {
    name: String,
    path: PathBuf,
    snapshot: Snapshot,
    metadata: Metadata,
    /// Built at the first request: with thread names when the query
    /// names `comm`.
    catalog: Option<Catalog>,
}

impl Directory {
    /// Opens the capture at `path` to read.
    pub fn open(path: &Path, skip_damaged: bool) -> Result<Self> {
        let snapshot = capture::open(path, skip_damaged)?;
        let metadata = metadata::read_metadata(path)?;
        Ok(Self {
            name: path.display().to_string(),
            path: path.to_path_buf(),
            snapshot,
            metadata,
            catalog: None,
        })
    }
}

impl Host for Directory {
    fn name(&self) -> &str {
        &self.name
    }

    fn ask(&mut self, request: &Request) -> weft_query::Result<(Reply, u64)> {
        let failed = |e: Error| weft_query::Error::Host {
            host: self.name.clone(),
            message: e.to_string(),
        };
        let request = serde_json::to_vec(request).expect("requests encode");
        if self.catalog.is_none() {
            let query: Request = decode(&request).map_err(failed)?;
            let parsed = weft_query::parse(&query.query)?;
            let threads = parsed.names("comm");
            let mut catalog =
                capture::catalog(&self.snapshot, &self.metadata, threads).map_err(|e| {
                    weft_query::Error::Host {
                        host: self.name.clone(),
                        message: format!("failed to read {}: {e}", self.path.display()),
                    }
                })?;
            // A window `extract --fleet` copied knows how far its host's
            // wall clock was from the firing origin's: its wall-clock times
            // (windows, `every`, a correlation's anchors) are the origin's.
            let extracted = self.metadata.extracted.as_ref();
            if let Some(ahead) = extracted.and_then(|e| e.clock_offset_ns) {
                catalog.wall_offset = catalog.wall_offset.map(|w| w - ahead);
            }
            self.catalog = Some(catalog);
        }
        let catalog = self.catalog.as_ref().expect("built above");
        let bytes = reply(&self.snapshot, catalog, &request)?;
        let reply = decode(&bytes).map_err(failed)?;
        Ok((reply, bytes.len() as u64))
    }
}

/// A host's reply to the encoded `request` on `snapshot`, encoded: what it
/// sends back. A query error is the asker's to render, as on one host.
pub fn reply(
    snapshot: &Snapshot,
    catalog: &Catalog,
    request: &[u8],
) -> weft_query::Result<Vec<u8>> {
    let request: Request = decode(request).map_err(|e| weft_query::Error::Host {
        host: "here".into(),
        message: e.to_string(),
    })?;
    let query = weft_query::parse(&request.query)?;
    let reply = weft_query::fleet::reply(snapshot, catalog, &query, &request)?;
    Ok(serde_json::to_vec(&reply).expect("replies encode"))
}

fn decode<T: serde::de::DeserializeOwned>(bytes: &[u8]) -> Result<T> {
    serde_json::from_slice(bytes).map_err(|error| Error::Json {
        what: "a fleet message that does not decode".into(),
        error,
    })
}

/// Answers `query` over `hosts`, printed in `format` (times in a fleet's
/// answers are wall-clock).
pub fn answer(hosts: &mut [&mut dyn Host], query: &str, format: AnswerFormat) -> Result<String> {
    let started = std::time::Instant::now();
    let fleet = weft_query::fleet::answer(query, hosts).map_err(|e| match e {
        weft_query::Error::Query { .. } => Error::Query(e.render(query)),
        other => Error::Fleet(other),
    })?;
    if format == AnswerFormat::Explain {
        // The hosts' store work is theirs: what crossed is what matters.
        return Ok(format!(
            "{}\nrows: {}\ntime: {:.3} ms\n",
            fleet.answer.plan.join("\n"),
            fleet.answer.rows.len(),
            started.elapsed().as_secs_f64() * 1e3
        ));
    }
    Ok(crate::answer::print(
        &fleet.answer,
        format,
        Some(0),
        started.elapsed(),
    ))
}

/// A recorder's answer to a peer's fleet request on `snapshot` of the
/// capture it is writing (`now` the present): the encoded reply, or the
/// error as text for the asker (a query error with its caret).
pub fn serve_request(
    capture: &Capture,
    snapshot: &Snapshot,
    request: &[u8],
    now: u64,
) -> std::result::Result<Vec<u8>, String> {
    let decoded: Request = decode(request).map_err(|e| e.to_string())?;
    let parsed = weft_query::parse(&decoded.query).map_err(|e| e.render(&decoded.query))?;
    let catalog = capture
        .catalog(snapshot, parsed.names("comm"))
        .map_err(|e| e.to_string())?;
    let mut catalog = Catalog::clone(&catalog);
    catalog.now = Some(now);
    reply(snapshot, &catalog, request).map_err(|e| e.render(&decoded.query))
}
