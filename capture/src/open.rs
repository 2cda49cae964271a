//! A capture opened for reading, as every asker of it shares it: the live
//! UI's refresh each second, the live socket, the metrics endpoint, a
//! peer's fleet request, `weft query` and `export`. `weft.json` is read at
//! the first question and again only when it was replaced; the catalog
//! queries bind to is built again only when what it describes changed:
//! `weft.json`, the store's sources, or the thread and function names
//! (`tasks` and `symbols` records). Thread names are read on from the
//! chunks read before, not again from the start: a live capture meets new
//! threads all the time.

use std::{
    path::Path,
    sync::{Arc, Mutex, MutexGuard, PoisonError},
};

use crate::error::Result;
use weft_query::Catalog;
use weft_store::{Dir, Snapshot};

use crate::{
    capture,
    metadata::{self, METADATA, Metadata},
    registry::{PATHS, SYMBOLS, TASKS},
    tasks::ThreadNames,
};

/// A capture directory opened for reading (see the module docs).
pub struct Capture {
    dir: Dir,
    kept: Mutex<Kept>,
}

/// What a capture keeps between questions.
#[derive(Default)]
struct Kept {
    /// `weft.json` and the stamp it had when read.
    metadata: Option<(Stamp, Arc<Metadata>)>,
    catalog: Option<Cached>,
    /// Thread names, read on from where the last question stopped.
    threads: ThreadNames,
}

/// `weft.json`'s inode, size and modification time: weft replaces it whole
/// (a rename), so a change shows in one of them. Zero when it is absent.
type Stamp = (u64, i64, i64, u64);

/// A catalog and what it was built from.
struct Cached {
    key: Key,
    catalog: Arc<Catalog>,
}

/// What a catalog depends on: when any of it changes, it is built again.
#[derive(Clone, Copy, PartialEq, Eq)]
struct Key {
    metadata: Stamp,
    /// The store's sources: a new one may be an application's.
    sources: usize,
    /// Records of the `symbols` source.
    symbols: u64,
    /// Records of the `paths` source.
    paths: u64,
    /// Records of the `tasks` source when the catalog names threads
    /// (`comm`): a pass over them that questions not naming `comm` do
    /// without, and that new threads alone do not make them redo.
    tasks: Option<u64>,
}

impl Key {
    /// Whether a catalog built at `self` answers a question asked at `now`.
    fn serves(&self, now: &Self) -> bool {
        let names_current = now.tasks.is_none() || self.tasks == now.tasks;
        Self {
            tasks: None,
            ..*self
        } == Self {
            tasks: None,
            ..*now
        } && names_current
    }
}

impl Capture {
    /// Opens the capture in `dir`. Its `weft.json` is read at the first
    /// question: a live capture's askers start before its session writes it.
    pub fn open(dir: &Path) -> Result<Self> {
        Ok(Self {
            dir: Dir::open(dir)?,
            kept: Mutex::default(),
        })
    }

    /// The capture's directory.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// `weft.json`, read again only when it was replaced.
    pub fn metadata(&self) -> Result<Arc<Metadata>> {
        let stamp = self.stamp();
        metadata_at(&mut self.kept(), &self.dir, stamp)
    }

    /// The catalog of `snapshot` of this capture, naming threads when
    /// `threads`.
    pub fn catalog(&self, snapshot: &Snapshot, threads: bool) -> Result<Arc<Catalog>> {
        let key = self.key(snapshot, threads)?;
        let mut kept = self.kept();
        if let Some(cached) = kept.catalog.as_ref().filter(|c| c.key.serves(&key)) {
            return Ok(cached.catalog.clone());
        }
        let metadata = metadata_at(&mut kept, &self.dir, key.metadata)?;
        let names = if threads {
            kept.threads.update(snapshot)?
        } else {
            None
        };
        let catalog = Arc::new(capture::catalog_naming(
            snapshot,
            &metadata,
            names.as_ref(),
        )?);
        kept.catalog = Some(Cached {
            key,
            catalog: catalog.clone(),
        });
        Ok(catalog)
    }

    fn kept(&self) -> MutexGuard<'_, Kept> {
        self.kept.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn stamp(&self) -> Stamp {
        self.dir.stat(METADATA).map_or((0, 0, 0, 0), |stat| {
            (stat.st_ino, stat.st_size, stat.st_mtime, stat.st_mtime_nsec)
        })
    }

    fn key(&self, snapshot: &Snapshot, threads: bool) -> Result<Key> {
        let records = |name: &str| -> Result<u64> {
            let Some(source) = snapshot.meta().sources.iter().find(|s| s.name == name) else {
                return Ok(0);
            };
            Ok(snapshot.aggregate(source.id, 0, 0..=u64::MAX)?.0.count)
        };
        Ok(Key {
            metadata: self.stamp(),
            sources: snapshot.meta().sources.len(),
            symbols: records(SYMBOLS)?,
            paths: records(PATHS)?,
            tasks: threads.then(|| records(TASKS)).transpose()?,
        })
    }
}

/// `weft.json` as kept, or read again when its stamp is not `stamp`
/// (absent: an empty document, or refused where the store is there).
fn metadata_at(kept: &mut Kept, dir: &Dir, stamp: Stamp) -> Result<Arc<Metadata>> {
    if let Some((_, metadata)) = kept.metadata.as_ref().filter(|(s, _)| *s == stamp) {
        return Ok(metadata.clone());
    }
    let metadata = Arc::new(metadata::metadata_in(dir)?);
    kept.metadata = Some((stamp, metadata.clone()));
    Ok(metadata)
}

#[cfg(test)]
mod tests {
    use weft_ingest::tasks::TaskNames;
    use weft_query::Kind;
    use weft_store::{Config, Store};

    use super::*;

    /// The name the catalog gives thread `tid` of the syscalls source.
    fn comm(catalog: &Catalog, tid: i64) -> Option<String> {
        let (_, column) = catalog.source("syscalls")?.column("comm")?;
        match &column.kind {
            Kind::Named(names) => Some(names.name_of(tid)),
            _ => None,
        }
    }

    #[test]
    fn a_catalog_is_built_again_only_when_what_it_describes_changes() {
        let path = std::env::temp_dir().join(format!("weft-open-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&path);
        let mut store = Store::open(&path, &Config::default()).unwrap();
        weft_ingest::syscalls::define_source(&mut store).unwrap();
        let mut tasks = TaskNames::define(&mut store).unwrap();
        tasks.note(&mut store, 10, 1, 1, b"first").unwrap();
        store.publish();
        let session = |offset: i64| Metadata {
            sessions: vec![metadata::Session {
                wall_offset_ns: Some(offset),
                ..metadata::Session::default()
            }],
            ..Metadata::default()
        };
        metadata::write_metadata(store.dir(), &session(5)).unwrap();
        let capture = Capture::open(&path).unwrap();
        let reader = store.reader();
        let catalog = |threads| capture.catalog(&reader.snapshot(), threads).unwrap();

        let first = catalog(true);
        assert_eq!(comm(&first, 1).as_deref(), Some("first"));
        assert_eq!(first.wall_offset, Some(5));
        // Asked again, with or without threads: the same catalog.
        assert!(Arc::ptr_eq(&first, &catalog(true)));
        assert!(Arc::ptr_eq(&first, &catalog(false)));

        // A thread's name arrives: built again, naming it.
        tasks.note(&mut store, 20, 1, 2, b"second").unwrap();
        store.publish();
        assert!(Arc::ptr_eq(&first, &catalog(false)), "no names asked for");
        let named = catalog(true);
        assert!(!Arc::ptr_eq(&first, &named));
        assert_eq!(comm(&named, 2).as_deref(), Some("second"));
        assert_eq!(
            comm(&named, 1).as_deref(),
            Some("first"),
            "read on, not again"
        );

        // weft.json replaced: read again.
        metadata::write_metadata(store.dir(), &session(7)).unwrap();
        let moved = catalog(false);
        assert_eq!(moved.wall_offset, Some(7));
        assert!(Arc::ptr_eq(&moved, &catalog(false)));

        drop(store);
        let _ = std::fs::remove_dir_all(&path);
    }
}
