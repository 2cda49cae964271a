//! A capture directory as weft writes it: the store (`weft-store`) plus
//! `weft.json` ([`crate::metadata`]), which says where the data came from
//! and where it is incomplete (drops are data); and the catalog queries
//! bind to.

use std::{collections::BTreeMap, fs, path::Path, sync::Arc};

use weft_query::{Catalog, Ids, Kind};
use weft_store::Dir;

use crate::{
    error::{Error, Result, refuse},
    metadata::{self, METADATA, Metadata, Session, SourceNote},
    registry,
};

/// Creates `dir` with mode 0700, or checks that it may be written to: an
/// existing directory must belong to the user weft runs as and be
/// writable by no one else (see [`weft_store::Dir`]), and an existing
/// capture is refused unless `append` is set. Until [`Fresh::keep`], what
/// it made is removed again when dropped.
pub fn prepare_dir(dir: &Path, append: bool) -> Result<Fresh> {
    let mut fresh = Fresh {
        dir: dir.to_owned(),
        made: None,
    };
    let existed = fs::symlink_metadata(dir).is_ok();
    let opened = Dir::open_to_write(dir)?;
    if !existed {
        fresh.made = Some(Made::Dir);
        return Ok(fresh);
    }
    if opened.contains(METADATA) || opened.contains("meta") {
        if !append {
            refuse!(
                "{} already holds a capture; pass --append to add to it",
                dir.display()
            );
        }
        return Ok(fresh);
    }
    if !opened.names()?.is_empty() {
        refuse!(
            "{} exists and is not an empty directory or a capture",
            dir.display()
        );
    }
    fresh.made = Some(Made::Contents);
    Ok(fresh)
}

/// What [`prepare_dir`] made of a capture directory, removed again if the
/// command fails before it records anything: bad input (a trigger that
/// does not bind, a probe that does not load) leaves nothing half written.
#[must_use = "dropping it removes the new capture; call keep() once it holds data"]
pub struct Fresh {
    dir: std::path::PathBuf,
    made: Option<Made>,
}

enum Made {
    /// The directory itself.
    Dir,
    /// Files in a directory that was empty.
    Contents,
}

impl Fresh {
    /// The capture now holds data: it stays whatever happens next.
    pub fn keep(&mut self) {
        self.made = None;
    }
}

impl Drop for Fresh {
    fn drop(&mut self) {
        // Best effort: this runs on an error path that already reports.
        match self.made {
            Some(Made::Dir) => {
                let _ = fs::remove_dir_all(&self.dir);
            }
            Some(Made::Contents) => {
                for entry in fs::read_dir(&self.dir).into_iter().flatten().flatten() {
                    let _ = fs::remove_file(entry.path());
                }
            }
            None => {}
        }
    }
}

/// What queries can name in a capture: its sources' fields, plus the
/// syscall source's meaning (`dur` a duration, `name` the syscall's name,
/// `enter_ns` a time, with `threads` the thread name `comm`) and the wall
/// clock of its first session.
///
/// Thread names cost a pass over the capture's chunk index (their records
/// are rare and spread out), so callers ask for them only when needed.
pub fn catalog(
    snapshot: &weft_store::Snapshot,
    metadata: &Metadata,
    threads: bool,
) -> Result<Catalog> {
    let threads = if threads {
        crate::tasks::names(snapshot)?
    } else {
        None
    };
    catalog_naming(snapshot, metadata, threads.as_ref())
}

/// [`catalog`] with the thread names `threads` already read (a
/// [`crate::tasks::ThreadNames`] keeps them between questions).
pub fn catalog_naming(
    snapshot: &weft_store::Snapshot,
    metadata: &Metadata,
    threads: Option<&crate::tasks::Threads>,
) -> Result<Catalog> {
    let mut catalog = Catalog::from_meta(snapshot.meta());
    catalog.wall_offset = metadata.wall_offset();
    for spec in crate::sources::EVERY {
        if let Some(columns) = catalog.source_mut(spec.name) {
            crate::sources::describe(spec, columns, snapshot, threads)?;
        }
        for alias in spec.aliases {
            catalog.alias_source(spec.name, alias);
        }
    }
    // Applications' and one-liners' sources, as `weft.json` describes them.
    let kept = (metadata.app_sources.iter().map(|source| (source, false))).chain(
        metadata
            .oneliner_sources
            .iter()
            .map(|source| (source, true)),
    );
    let ids = Arc::new(Ids::default());
    for ((name, fields), oneliner) in kept {
        let Some(columns) = catalog.source_mut(name) else {
            continue;
        };
        for (field, kind) in fields {
            if registry::ValueKind::parse(kind) == Some(registry::ValueKind::TraceId) {
                columns.set_id(field, &registry::low_half(field), &ids);
            } else {
                columns.set_kind(field, registry::query_kind(kind));
            }
        }
        if let (true, Some(threads)) = (oneliner, threads) {
            columns.view("tid", "comm", Kind::Named(threads.comm.clone()));
        }
    }
    Ok(catalog)
}

/// Adds a session (host, sources, start) to the `weft.json` of `dir` (the
/// store's, [`weft_store::Store::dir`]) and sets aside [`RESERVE`];
/// returns the document and the session's index.
pub fn start_session(
    dir: &Dir,
    sources: BTreeMap<String, SourceNote>,
) -> Result<(Metadata, usize)> {
    let mut metadata = metadata::metadata_or_new(dir)?;
    let index = metadata.sessions.len();
    metadata.sessions.push(Session::starting(sources));
    metadata::write_metadata(dir, &metadata)?;
    reserve(dir)?;
    Ok((metadata, index))
}

/// A file of [`RESERVE_BYTES`] set aside while recording, deleted before
/// the last write of `weft.json`: when the disk fills, that write (the
/// session's end and its losses) still finds room.
pub const RESERVE: &str = "weft.reserve";

/// Room for the largest `weft.json` a session leaves, several times over.
const RESERVE_BYTES: i64 = 4 << 20;

fn reserve(dir: &Dir) -> Result<()> {
    use std::os::fd::AsRawFd as _;
    dir.remove_if_present(RESERVE)?;
    let file = dir.create(RESERVE)?;
    // SAFETY: the call only reads its integer arguments.
    let error = unsafe { libc::posix_fallocate(file.as_raw_fd(), 0, RESERVE_BYTES) };
    if error != 0 {
        return Err(Error::File {
            doing: "failed to set aside room for the session's end in",
            path: dir.path().to_owned(),
            error: std::io::Error::from_raw_os_error(error),
        });
    }
    Ok(())
}

/// Frees the space [`reserve`] set aside (nothing when there is none).
pub fn release_reserve(dir: &Dir) {
    // Best effort: what follows reports a failure to write.
    let _ = dir.remove_if_present(RESERVE);
}

/// Opens the capture at `dir` to read, saying on stderr what a crash cut
/// from its end (a capture that closed cleanly is whole, or an error).
/// With `skip_damaged`, damaged chunks are left out instead of failing,
/// and stderr says how many records and which times they held.
pub fn open(dir: &Path, skip_damaged: bool) -> Result<weft_store::Snapshot> {
    let failed = |error| Error::Open {
        dir: dir.to_owned(),
        error,
    };
    let (snapshot, recovery) = if skip_damaged {
        let (snapshot, recovery, skipped) =
            weft_store::open_skipping_damaged(dir).map_err(failed)?;
        if skipped.chunks > 0 {
            log::warn!("weft: {}", skipped_notice(dir, &skipped));
        }
        (snapshot, recovery)
    } else {
        weft_store::open_read_only(dir).map_err(failed)?
    };
    if recovery.cut_chunks > 0 {
        let records = match recovery.cut_records {
            0 => "their records uncounted".to_owned(),
            n => format!("at least {n} records"),
        };
        log::warn!(
            "weft: {} did not close cleanly (weft stopped without closing it, or is still \
             writing it): {} unfinished chunks at its end, {records}, are left out",
            dir.display(),
            recovery.cut_chunks,
        );
    }
    Ok(snapshot)
}

/// What `--skip-damaged` left out, in one line.
fn skipped_notice(dir: &Path, skipped: &weft_store::Skipped) -> String {
    let seconds = |ns: u64| format!("{:.3}s", ns as f64 / 1e9);
    let spans: Vec<String> = (skipped.spans.iter())
        .map(|span| match *span.end() {
            u64::MAX => format!("from {} on", seconds(*span.start())),
            end => format!("{}..{}", seconds(*span.start()), seconds(end)),
        })
        .collect();
    let uncounted = match skipped.uncounted {
        0 => String::new(),
        n => format!(" and {n} chunks whose count is lost"),
    };
    let plural = if skipped.chunks == 1 { "" } else { "s" };
    format!(
        "{} is damaged: left out {} chunk{plural} ({} records{uncounted}) at {} \
         (CLOCK_MONOTONIC); `weft check {}` lists the damage",
        dir.display(),
        skipped.chunks,
        skipped.records,
        spans.join(", "),
        dir.display(),
    )
}

/// Defines in `store` the sources of another capture's `meta` and its
/// indexes still open, so that capture's records append as they are
/// (`extract`, `replay`).
pub fn define_like(store: &mut weft_store::Store, meta: &weft_store::Meta) -> Result<()> {
    for source in &meta.sources {
        store.define_source(&source.name, source.fields.clone())?;
    }
    for index in meta.indexes.iter().filter(|i| i.until_chunk.is_none()) {
        store.define_partitioned_index(
            index.source,
            &index.name,
            index.field.clone(),
            index.bins.clone(),
            index.partition.clone(),
        )?;
    }
    Ok(())
}

/// Bytes the files of a capture directory take on disk (0 if unreadable;
/// see [`weft_store::Dir::disk_use`]).
pub fn size_on_disk(dir: &Path) -> u64 {
    Dir::open(dir).and_then(|d| d.disk_use()).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A one-liner's stored source keeps its fields' kinds under the key
    /// of today's captures and under the one captures had before.
    #[test]
    fn one_liner_sources_read_under_either_key() {
        let path = std::env::temp_dir().join(format!("weft-keys-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&path);
        let mut store = weft_store::Store::open(&path, &weft_store::Config::default()).unwrap();
        let fields = vec![
            weft_store::Field::new("tid", 0, weft_store::FieldKind::U32),
            weft_store::Field::new("dur", 8, weft_store::FieldKind::U64),
        ];
        store.define_source("opens", fields).unwrap();
        store.publish();
        let snapshot = store.snapshot();
        for key in ["oneliner_sources", "trace_sources"] {
            let document = serde_json::json!({
                "format": "weft-capture 1",
                key: { "opens": { "tid": "int", "dur": "duration" } },
            });
            let metadata: Metadata = serde_json::from_value(document).unwrap();
            let catalog = catalog_naming(&snapshot, &metadata, None).unwrap();
            let opens = catalog.source("opens").unwrap();
            let (_, dur) = opens.column("dur").unwrap();
            assert!(matches!(dur.kind, Kind::Duration), "{key}: {:?}", dur.kind);
        }
        drop(store);
        std::fs::remove_dir_all(&path).unwrap();
    }
}
