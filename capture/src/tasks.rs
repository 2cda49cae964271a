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
    let Some(source) = snapshot.meta().sources.iter().find(|s| s.name == TASKS) else {
        return Ok(None);
    };
    let mut names = Vec::new();
    snapshot.raw_scan_each(source.id, 0..=u64::MAX, |record| {
        let payload = &record.payload;
        if payload.len() >= 8 {
            let tid = u32::from_le_bytes([payload[4], payload[5], payload[6], payload[7]]);
            let comm = &payload[8..payload.len().min(8 + COMM_LEN)];
            names.push((i64::from(tid), c_string(comm)));
        }
    })?;
    // Later records (after exec) replace earlier ones.
    Ok(Some(Names::new(names, false)))
}
