//! Intel PT call traces in the store: the calls a `weft pt record` capture
//! decodes to become the `calls` source of the recording that runs, so
//! that queries and the UI's timeline put them beside the syscalls and
//! packets of the same instant.
//!
//! A call is stored when it returns, if the trace saw it start: `time` is
//! its return (`CLOCK_MONOTONIC` ns), then `dur`, `pid`, `tid`, `depth` and
//! `func`, a number whose name a `symbols` record gives (names are long
//! and repeat). Calls are decoded after their capture ends, so they arrive
//! late: queries select them by their own time, up to [`LATE`] after it
//! (`weft_query::SourceColumns::late`); later ones are counted, not stored.

use std::{collections::HashMap, sync::Arc};

use anyhow::Result;
use weft_query::{Catalog, Kind, Names};
use weft_store::{Field, FieldKind, Snapshot, SourceId, Store};

use crate::registry::{CALLS, SYMBOLS};

/// How long after its own time a call may be stored: the longest capture
/// (2 s) plus its decoding, with room for a capture imported by hand.
pub const LATE: u64 = 600_000_000_000;

/// One call of a decoded capture.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Call {
    /// When it returned, `CLOCK_MONOTONIC` ns.
    pub time: u64,
    pub dur: u64,
    pub pid: u32,
    pub tid: u32,
    /// Calls deep, from where the trace started.
    pub depth: u32,
    /// Its function's symbol (`name+0x12` inside one, an address in none).
    pub func: String,
}

/// A decoded capture, on its way to the recorder.
#[derive(Debug)]
pub struct Decoded {
    pub dir: std::path::PathBuf,
    pub calls: Vec<Call>,
    /// Decoding errors met (each loses the call stack of its trace).
    pub errors: usize,
    /// Told what was stored, when someone waits for it.
    pub done: Option<std::sync::mpsc::Sender<Stored>>,
}

/// What storing one capture's calls did.
#[derive(Debug, Default, Clone, Copy)]
pub struct Stored {
    pub stored: u64,
    /// Calls more than [`LATE`] old when they came: not stored.
    pub late: u64,
}

/// The `calls` and `symbols` sources of a recording, and the numbers its
/// function names have.
pub struct CallLog {
    calls: SourceId,
    symbols: SourceId,
    numbers: HashMap<String, u32>,
}

impl CallLog {
    /// Defines (or finds again, with the names they hold) the two sources.
    pub fn define(store: &mut Store) -> Result<Self> {
        let calls = store.define_source(
            CALLS,
            vec![
                Field::new("dur", 0, FieldKind::U64),
                Field::new("pid", 8, FieldKind::U32),
                Field::new("tid", 12, FieldKind::U32),
                Field::new("depth", 16, FieldKind::U32),
                Field::new("func", 20, FieldKind::U32),
            ],
        )?;
        let symbols = store.define_source(SYMBOLS, vec![Field::new("id", 0, FieldKind::U32)])?;
        let numbers = symbol_names(&store.snapshot(), symbols)?
            .into_iter()
            .map(|(id, name)| (name, id))
            .collect();
        Ok(Self {
            calls,
            symbols,
            numbers,
        })
    }

    /// Appends `calls`, arrived `now`, naming each new function first.
    pub fn append(&mut self, store: &mut Store, now: u64, calls: &[Call]) -> Result<Stored> {
        let mut done = Stored::default();
        for call in calls {
            if now.saturating_sub(call.time) > LATE {
                done.late += 1;
                continue;
            }
            let func = self.number(store, now, &call.func)?;
            let mut payload = [0u8; 24];
            payload[..8].copy_from_slice(&call.dur.to_le_bytes());
            for (at, v) in [(8, call.pid), (12, call.tid), (16, call.depth), (20, func)] {
                payload[at..at + 4].copy_from_slice(&v.to_le_bytes());
            }
            store.append_at(self.calls, now, Some(call.time), &payload)?;
            done.stored += 1;
        }
        Ok(done)
    }

    /// The number of function `func`, given (and recorded) when new.
    fn number(&mut self, store: &mut Store, now: u64, func: &str) -> Result<u32> {
        if let Some(n) = self.numbers.get(func) {
            return Ok(*n);
        }
        let n = u32::try_from(self.numbers.len())?;
        let mut payload = n.to_le_bytes().to_vec();
        payload.extend_from_slice(func.as_bytes());
        store.append_at(self.symbols, now, None, &payload)?;
        self.numbers.insert(func.to_owned(), n);
        Ok(n)
    }
}

/// Each function number of source `symbols` with its name.
fn symbol_names(snapshot: &Snapshot, symbols: SourceId) -> weft_store::Result<Vec<(u32, String)>> {
    let mut names = Vec::new();
    snapshot.raw_scan_each(symbols, 0..=u64::MAX, |record| {
        if let Some((id, name)) = record.payload.split_first_chunk::<4>() {
            let name = String::from_utf8_lossy(name).into_owned();
            names.push((u32::from_le_bytes(*id), name));
        }
    })?;
    Ok(names)
}

/// Gives a capture's `calls` their meaning: `func` by name, `dur` the
/// span `during` uses, and their lateness.
pub fn describe(catalog: &mut Catalog, snapshot: &Snapshot) -> Result<()> {
    let Some(symbols) = snapshot.meta().sources.iter().find(|s| s.name == SYMBOLS) else {
        return Ok(());
    };
    let names = symbol_names(snapshot, symbols.id)?
        .into_iter()
        .map(|(id, name)| (i64::from(id), name));
    let Some(calls) = catalog.source_mut(CALLS) else {
        return Ok(());
    };
    calls.set_kind("func", Kind::Named(Arc::new(Names::new(names, false))));
    calls.set_kind("dur", Kind::Duration);
    calls.span = Some("dur".into());
    calls.late = Some(LATE);
    calls.show_first(&["func", "dur", "depth", "tid", "pid"]);
    Ok(())
}
