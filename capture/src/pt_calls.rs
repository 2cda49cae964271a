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

use std::collections::HashMap;

use crate::error::Result;
use weft_store::{Snapshot, SourceId, Store};

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
        let calls = crate::sources::own::CALLS.define(store)?;
        let symbols = crate::sources::own::SYMBOLS.define(store)?;
        let numbers = crate::sources::numbered(&store.snapshot(), symbols)?
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
        // Bounded by memory long before 2^32 distinct names.
        let n = u32::try_from(self.numbers.len()).expect("fewer than 2^32 functions");
        let mut payload = n.to_le_bytes().to_vec();
        payload.extend_from_slice(func.as_bytes());
        store.append_at(self.symbols, now, None, &payload)?;
        self.numbers.insert(func.to_owned(), n);
        Ok(n)
    }
}

/// The calls of a recording as folded stacks, the input of flame graph
/// tools: one line per call path, `pid P/tid T;outer;...;inner NS`, with the
/// time spent in the innermost function itself (its duration less its
/// calls'). A call whose caller's entry the trace did not see starts its
/// thread's path (its caller was not stored). Lines come sorted, with the
/// number of calls folded.
pub fn folded(snapshot: &Snapshot) -> Result<(Vec<String>, u64)> {
    let sources = &snapshot.meta().sources;
    let (Some(calls), Some(symbols)) = (
        sources.iter().find(|s| s.name == CALLS),
        sources.iter().find(|s| s.name == SYMBOLS),
    ) else {
        crate::error::refuse!(
            "the capture has no calls (PT call traces: weft pt record, or --pt-on-trigger)"
        );
    };
    let names: HashMap<u32, String> = crate::sources::numbered(snapshot, symbols.id)?
        .into_iter()
        .collect();
    // By process and thread.
    let mut threads: std::collections::BTreeMap<(u32, u32), Vec<Span>> =
        std::collections::BTreeMap::new();
    snapshot.raw_scan_each(calls.id, 0..=u64::MAX, |record| {
        let word = |at: usize| {
            record
                .payload
                .get(at..at + 4)
                .map_or(0, |b| u32::from_le_bytes(b.try_into().expect("4 bytes")))
        };
        let (Some(time), Some(dur)) = (
            record.producer_ts,
            record
                .payload
                .get(..8)
                .map(|b| u64::from_le_bytes(b.try_into().expect("8 bytes"))),
        ) else {
            return;
        };
        threads.entry((word(8), word(12))).or_default().push(Span {
            start: time.saturating_sub(dur),
            dur,
            depth: word(16),
            func: word(20),
        });
    })?;
    let mut stacks: std::collections::BTreeMap<String, u64> = std::collections::BTreeMap::new();
    let count = threads.values().map(|calls| calls.len() as u64).sum();
    for ((pid, tid), mut calls) in threads {
        // Callers first: a caller starts no later than its callees, and
        // is less deep.
        calls.sort_unstable_by_key(|call| (call.start, call.depth));
        fold_thread(&format!("pid {pid}/tid {tid}"), &calls, &names, &mut stacks);
    }
    let lines = stacks
        .into_iter()
        .map(|(path, ns)| format!("{path} {ns}"))
        .collect();
    Ok((lines, count))
}

/// A stored call, as folding needs it.
struct Span {
    start: u64,
    dur: u64,
    depth: u32,
    func: u32,
}

/// Folds one thread's calls, callers first, into `stacks`.
fn fold_thread(
    root: &str,
    calls: &[Span],
    names: &HashMap<u32, String>,
    stacks: &mut std::collections::BTreeMap<String, u64>,
) {
    // The open calls: path, end, depth, and their own time so far.
    let mut open: Vec<(String, u64, u32, u64)> = Vec::new();
    let mut close = |open: &mut Vec<(String, u64, u32, u64)>| {
        let (path, _, _, own) = open.pop().expect("an open call");
        *stacks.entry(path).or_default() += own;
    };
    for &Span {
        start,
        dur,
        depth,
        func,
    } in calls
    {
        while open
            .last()
            .is_some_and(|&(_, end, open_depth, _)| open_depth >= depth || end <= start)
        {
            close(&mut open);
        }
        if let Some(caller) = open.last_mut() {
            caller.3 = caller.3.saturating_sub(dur);
        }
        let name = names.get(&func).map_or("?", String::as_str);
        let parent = open.last().map_or(root, |(path, ..)| path.as_str());
        let path = format!("{parent};{}", name.replace(';', ":"));
        open.push((path, start + dur, depth, dur));
    }
    while !open.is_empty() {
        close(&mut open);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calls_fold_into_paths_with_their_own_time() {
        let names: HashMap<u32, String> = [
            (0, "f".to_owned()),
            (1, "g".to_owned()),
            (2, "a;b".to_owned()),
        ]
        .into();
        let span = |start, dur, depth, func| Span {
            start,
            dur,
            depth,
            func,
        };
        // f (depth 2: its caller's entry was not traced) calls g twice;
        // then, after f, a sibling `a;b` at depth 2 and a deeper g inside.
        let calls = [
            span(0, 100, 2, 0),
            span(10, 20, 3, 1),
            span(50, 30, 3, 1),
            span(100, 40, 2, 2),
            span(110, 10, 3, 1),
        ];
        let mut stacks = std::collections::BTreeMap::new();
        fold_thread("t", &calls, &names, &mut stacks);
        let lines: Vec<(String, u64)> = stacks.into_iter().collect();
        assert_eq!(
            lines,
            [
                ("t;a:b".to_owned(), 30),
                ("t;a:b;g".to_owned(), 10),
                ("t;f".to_owned(), 50),
                ("t;f;g".to_owned(), 50),
            ]
        );
    }
}
