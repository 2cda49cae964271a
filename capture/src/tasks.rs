//! Thread names of a capture, read back: `record` notes each thread's name
//! once (`weft_ingest::tasks`), queries show them as `comm`.

use weft_ingest::tasks::COMM_LEN;
use weft_oneliner::value::c_string;
use weft_query::Names;
use weft_store::Snapshot;

use crate::registry::TASKS;

/// Thread names by tid from a capture's `tasks` records (the latest name
/// of each thread), or `None` when the capture has none.
pub fn names(snapshot: &Snapshot) -> weft_store::Result<Option<Names>> {
    let Some(threads) = threads(snapshot)? else {
        return Ok(None);
    };
    // Later records (after exec) replace earlier ones.
    let names = threads.into_iter().map(|t| (i64::from(t.tid), t.name));
    Ok(Some(Names::new(names, false)))
}

/// A thread as a `tasks` record names it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Thread {
    pub pid: u32,
    pub tid: u32,
    pub name: String,
}

/// Every `tasks` record in the order written (a thread again after it
/// exec'd), or `None` when the capture has none.
pub fn threads(snapshot: &Snapshot) -> weft_store::Result<Option<Vec<Thread>>> {
    let Some(source) = snapshot.meta().sources.iter().find(|s| s.name == TASKS) else {
        return Ok(None);
    };
    let mut threads = Vec::new();
    snapshot.raw_scan_each(source.id, 0..=u64::MAX, |record| {
        let payload = &record.payload;
        let u32_at = |at: usize| {
            u32::from_le_bytes([
                payload[at],
                payload[at + 1],
                payload[at + 2],
                payload[at + 3],
            ])
        };
        if payload.len() >= 8 {
            threads.push(Thread {
                pid: u32_at(0),
                tid: u32_at(4),
                name: c_string(&payload[8..payload.len().min(8 + COMM_LEN)]),
            });
        }
    })?;
    Ok(Some(threads))
}
