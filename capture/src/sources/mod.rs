//! Every source a capture holds, described once ([`Spec`]): its record's
//! fields (names, types, units), its default store indexes and what its
//! columns mean to queries ([`describe`]). The event sources ([`ALL`])
//! have a kernel side (programs, attach points) in `weft_kernel::source`,
//! found by the same name (`weft_recording::hooks`); syscalls and tasks
//! are described where they are ingested (`weft_ingest`), weft's own logs
//! in `own.rs`. Producers define their store source from these; `weft
//! sources`, `record` and the query catalog read them.

mod args;
mod block;
mod conns;
mod net;
pub mod own;
mod pagecache;
mod sched;
mod stacks;
pub mod switch;

use std::sync::Arc;

use crate::error::Result;
use weft_abi::syscall::MAX_SYSCALLS;
use weft_abi::syscall_names;
pub use weft_ingest::schema::{
    CPU, FieldSpec, IndexSpec, Layout, Meaning, STORED_FROM, Spec, field,
};
use weft_query::{Addresses, Kind, Names, SourceColumns};
use weft_store::Snapshot;

use crate::registry;

/// The event sources: those with a kernel side besides syscalls.
pub const ALL: &[&Spec] = &[
    &sched::SPEC,
    &block::SPEC,
    &pagecache::SPEC,
    &net::SPEC,
    &switch::SPEC,
    &conns::SPEC,
    &stacks::SPEC,
    &args::SPEC,
];

/// The source called `name`.
pub fn find(name: &str) -> Option<&'static Spec> {
    ALL.iter().copied().find(|s| s.name == name)
}

/// Every source a capture can hold besides those applications and
/// one-liners push (whose fields `weft.json` describes): weft's own
/// records, then the event sources.
pub const EVERY: &[&Spec] = &every();

/// [`EVERY`], built from [`ALL`] so that an event source is listed once.
const fn every() -> [&'static Spec; 8 + ALL.len()] {
    let own: [&Spec; 8] = [
        &weft_ingest::syscalls::SPEC,
        &weft_ingest::tasks::SPEC,
        &own::TRIGGERS,
        &own::CALLS,
        &own::SYMBOLS,
        &own::LOSSES,
        &own::FRAMES,
        &own::PATHS,
    ];
    let mut every = [own[0]; 8 + ALL.len()];
    let mut i = 0;
    while i < every.len() {
        every[i] = if i < own.len() {
            own[i]
        } else {
            ALL[i - own.len()]
        };
        i += 1;
    }
    every
}

/// The names a source of numbered names (`symbols`, `paths`: a number,
/// then the name's bytes) holds, with their numbers.
pub fn numbered(
    snapshot: &Snapshot,
    source: weft_store::SourceId,
) -> weft_store::Result<Vec<(u32, String)>> {
    let mut names = Vec::new();
    snapshot.raw_scan_each(source, 0..=u64::MAX, |record| {
        if let Some((id, name)) = record.payload.split_first_chunk::<4>() {
            let name = String::from_utf8_lossy(name).into_owned();
            names.push((u32::from_le_bytes(*id), name));
        }
    })?;
    Ok(names)
}

/// The names of the source called `name` ([`numbered`]) as a column's
/// (none without the source), 0 named `unknown`.
fn numbered_names(snapshot: &Snapshot, name: &str, unknown: Option<&str>) -> Result<Names> {
    let Some(source) = snapshot.meta().sources.iter().find(|s| s.name == name) else {
        return Ok(Names::default());
    };
    let names = numbered(snapshot, source.id)?
        .into_iter()
        .map(|(id, name)| (i64::from(id), name));
    let unknown = unknown.map(|name| (0, name.to_owned()));
    Ok(Names::new(unknown.into_iter().chain(names), false))
}

/// Gives `spec`'s columns in `snapshot` their meaning, the threads' names
/// `threads` where the source names threads.
pub fn describe(
    spec: &Spec,
    columns: &mut SourceColumns,
    snapshot: &Snapshot,
    threads: Option<&crate::tasks::Threads>,
) -> Result<()> {
    let addresses = Arc::new(Addresses::default());
    for field in spec.fields {
        let kind = match field.meaning {
            Meaning::Int => continue,
            Meaning::Duration => Kind::Duration,
            Meaning::Time => Kind::Time,
            Meaning::Addr(v6) => {
                columns.set_address(field.name, "family", spec.stored(v6), &addresses);
                continue;
            }
            Meaning::Named(names) => {
                let names = names.iter().map(|(v, n)| (*v, (*n).to_owned()));
                Kind::Named(Arc::new(Names::new(names, false)))
            }
            Meaning::Syscall => Kind::Named(Arc::new(Names::new(
                (0..MAX_SYSCALLS)
                    .filter_map(|nr| Some((i64::from(nr), syscall_names::name(nr)?.to_owned()))),
                true,
            ))),
            Meaning::Source => Kind::Named(Arc::new(Names::new(
                (snapshot.meta().sources.iter()).map(|s| (i64::from(s.id), s.name.clone())),
                true,
            ))),
            Meaning::Symbol => {
                Kind::Named(Arc::new(numbered_names(snapshot, registry::SYMBOLS, None)?))
            }
            // 0: a descriptor recording could not name.
            Meaning::Path => Kind::Named(Arc::new(numbered_names(
                snapshot,
                registry::PATHS,
                Some("?"),
            )?)),
        };
        match field.shown_as {
            Some(name) => columns.alias(field.name, name, kind),
            None => columns.set_kind(field.name, kind),
        };
    }
    if let Some((tail, _)) = spec.tail {
        columns.add_bytes(tail, spec.stored(spec.size));
    }
    if let (true, Some(threads)) = (spec.threads, threads) {
        columns.view("tid", "comm", Kind::Named(threads.comm.clone()));
        // Long paths: listed with `fields`, not in every listing.
        columns.view("tid", "cgroup", Kind::Named(threads.cgroup.clone()));
        columns.hide("cgroup");
        columns.derive("pid", "tid", &threads.pid);
    }
    columns.span = spec.span.map(str::to_owned);
    columns.late = spec.late;
    if !spec.first.is_empty() {
        columns.show_first(spec.first);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use weft_store::{Config, Store};

    use super::*;

    #[test]
    fn every_source_defines_its_indexes_and_is_described_from_its_spec() {
        let path = std::env::temp_dir().join(format!("weft-specs-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&path);
        let mut store = Store::open(&path, &Config::default()).unwrap();
        let mut names = HashSet::new();
        for spec in EVERY {
            assert!(names.insert(spec.name), "{} twice", spec.name);
            let id = spec.define(&mut store).unwrap();
            assert_eq!(
                spec.define(&mut store).unwrap(),
                id,
                "{}: found again",
                spec.name
            );
            for field in spec.fields {
                assert!(
                    field.offset >= spec.stored_from,
                    "{}.{}",
                    spec.name,
                    field.name
                );
                assert!(
                    field.offset < spec.size,
                    "{}.{} past the record",
                    spec.name,
                    field.name
                );
            }
        }
        store.publish();
        let reader = store.reader();
        let snapshot = reader.snapshot();
        let catalog =
            crate::capture::catalog(&snapshot, &crate::metadata::Metadata::default(), true)
                .unwrap();
        let kind = |source: &str, column: &str| {
            let (_, column) = catalog.source(source).unwrap().column(column).unwrap();
            column.kind.clone()
        };
        // What each source's spec says, in its columns.
        assert!(matches!(kind("syscalls", "dur"), Kind::Duration));
        assert!(matches!(kind("syscalls", "name"), Kind::Named(n) if n.name_of(0) == "read"));
        assert!(matches!(kind("syscalls", "comm"), Kind::Named(_)));
        assert_eq!(
            catalog.source("syscalls").unwrap().span.as_deref(),
            Some("dur")
        );
        assert!(matches!(kind("triggers", "start"), Kind::Time));
        assert!(matches!(kind("losses", "source"), Kind::Named(n) if n.name_of(0) == "syscalls"));
        assert!(matches!(kind("losses", "why"), Kind::Named(n) if n.name_of(0) == "ring full"));
        assert!(matches!(kind("calls", "func"), Kind::Named(_)));
        assert_eq!(
            catalog.source("calls").unwrap().late,
            Some(crate::pt_calls::LATE)
        );
        assert!(matches!(kind("sched", "state"), Kind::Named(_)));
        assert!(catalog.source("packets").is_some(), "net's alias");
        drop(store);
        let _ = std::fs::remove_dir_all(&path);
    }
}
