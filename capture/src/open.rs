//! A capture opened for reading, as every asker of it shares it: the live
//! UI's refresh each second, the live socket, the metrics endpoint,
//! `weft query` and `export`. `weft.json` is read when opened and again
//! only when it was replaced; the catalog queries bind to is built again
//! only when what it describes changed: `weft.json`, the store's sources,
//! or the thread and function names (`tasks` and `symbols` records).
//! Thread names are read on from the chunks read before, not again from
//! the start: a live capture meets new threads all the time.

use std::{
    path::Path,
    sync::{Arc, Mutex, PoisonError},
};

use anyhow::Result;
use serde_json::Value;
use weft_query::Catalog;
use weft_store::{Dir, Snapshot};

use crate::{
    capture::{self, METADATA},
    registry::{SYMBOLS, TASKS},
    tasks::ThreadNames,
};

/// A capture directory opened for reading (see the module docs).
pub struct Capture {
    dir: Dir,
    cached: Mutex<Option<Cached>>,
    /// Thread names, read on from where the last question stopped.
    threads: Mutex<ThreadNames>,
}

/// A catalog and what it was built from.
struct Cached {
    key: Key,
    metadata: Arc<Value>,
    catalog: Arc<Catalog>,
    /// Whether the catalog names threads (`comm`): a pass over the
    /// `tasks` records that queries not naming `comm` do without.
    threads: bool,
}

impl Cached {
    /// Whether this catalog answers a query on the capture as `key` finds
    /// it. Thread names matter only to a query that shows them (`comm`, a
    /// listing): a live capture meets new threads all the time, and the
    /// other queries need not pay for reading their names again.
    fn serves(&self, key: &Key, threads: bool) -> bool {
        let rest = |key: &Key| Key { tasks: 0, ..*key };
        rest(&self.key) == rest(key) && (!threads || (self.threads && self.key.tasks == key.tasks))
    }
}

/// What a catalog depends on: when any of it changes, it is built again.
#[derive(Clone, Copy, PartialEq, Eq)]
struct Key {
    /// `weft.json`'s inode, size and modification time: weft replaces it
    /// whole (a rename), so a change shows in one of them.
    metadata: (u64, i64, i64, u64),
    /// The store's sources: a new one may be an application's.
    sources: usize,
    /// Records of the `tasks` and `symbols` sources.
    tasks: u64,
    symbols: u64,
}

impl Capture {
    /// Opens the capture in `dir`. Its `weft.json` is read at the first
    /// question: a live capture's askers start before its session writes it.
    pub fn open(dir: &Path) -> Result<Self> {
        Ok(Self {
            dir: Dir::open(dir)?,
            cached: Mutex::new(None),
            threads: Mutex::default(),
        })
    }

    /// The capture's directory.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// The catalog of `snapshot` of this capture, naming threads when
    /// `threads`, and the `weft.json` it was built with.
    pub fn catalog(
        &self,
        snapshot: &Snapshot,
        threads: bool,
    ) -> Result<(Arc<Catalog>, Arc<Value>)> {
        let key = self.key(snapshot)?;
        let mut cached = self.cached.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(c) = cached.as_ref().filter(|c| c.serves(&key, threads)) {
            return Ok((c.catalog.clone(), c.metadata.clone()));
        }
        let metadata = match cached.as_ref().filter(|c| c.key.metadata == key.metadata) {
            Some(c) => c.metadata.clone(),
            None => Arc::new(capture::metadata_in(&self.dir)?),
        };
        let names = if threads {
            let mut names = self.threads.lock().unwrap_or_else(PoisonError::into_inner);
            names.update(snapshot)?
        } else {
            None
        };
        let catalog = Arc::new(capture::catalog_naming(snapshot, &metadata, names)?);
        *cached = Some(Cached {
            key,
            metadata: metadata.clone(),
            catalog: catalog.clone(),
            threads,
        });
        Ok((catalog, metadata))
    }

    /// `weft.json` as of the last catalog (read now if none was built).
    pub fn metadata(&self, snapshot: &Snapshot) -> Result<Arc<Value>> {
        Ok(self.catalog(snapshot, false)?.1)
    }

    fn key(&self, snapshot: &Snapshot) -> Result<Key> {
        let metadata = match self.dir.stat(METADATA) {
            Ok(stat) => (stat.st_ino, stat.st_size, stat.st_mtime, stat.st_mtime_nsec),
            // Read (and refused, or made empty) by metadata_in.
            Err(_) => (0, 0, 0, 0),
        };
        let records = |name: &str| -> Result<u64> {
            let Some(source) = snapshot.meta().sources.iter().find(|s| s.name == name) else {
                return Ok(0);
            };
            Ok(snapshot.aggregate(source.id, 0, 0..=u64::MAX)?.0.count)
        };
        Ok(Key {
            metadata,
            sources: snapshot.meta().sources.len(),
            tasks: records(TASKS)?,
            symbols: records(SYMBOLS)?,
        })
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;
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
        let session = |offset: i64| json!({ "sessions": [{ "wall_offset_ns": offset }] });
        capture::write_metadata(store.dir(), &session(5)).unwrap();
        let capture = Capture::open(&path).unwrap();
        let reader = store.reader();
        let catalog = |threads| capture.catalog(&reader.snapshot(), threads).unwrap().0;

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
        capture::write_metadata(store.dir(), &session(7)).unwrap();
        let moved = catalog(false);
        assert_eq!(moved.wall_offset, Some(7));
        assert!(Arc::ptr_eq(&moved, &catalog(false)));

        drop(store);
        let _ = std::fs::remove_dir_all(&path);
    }
}
