//! Folded stacks, the input of flame graph tools, of the `stacks` source
//! (on-CPU: one count per sample) and of the `sched` source (off-CPU: each
//! stretch off the CPU weighted by its time in µs, from the stacks the
//! thread left from): `comm;outer;...;inner WEIGHT`, user frames then
//! kernel frames, named from the `frames` source. `--where` and
//! `--window` choose the records: one thread over a trigger's window is
//! one slow request's flame graph.

use std::{
    collections::{BTreeMap, HashMap},
    fs::File,
    io::{BufWriter, Write as _},
};

use crate::error::Result;
use weft_capture::registry::FRAMES;
use weft_query::{Catalog, Cell};
use weft_store::Snapshot;

/// Stack texts by id: the kernel's, and each process's user stacks.
#[derive(Default)]
struct Frames {
    kernel: HashMap<u32, String>,
    user: HashMap<(u32, u32), String>,
}

/// Whether `source` is one this writes.
pub fn folds(source: &str) -> bool {
    matches!(source, "stacks" | "profile" | "sched")
}

/// The records `query` (of `stacks` or `sched`, with their `fields`
/// appended here) selects, folded into `file`; how many records.
pub fn write(snapshot: &Snapshot, catalog: &Catalog, query: &str, file: File) -> Result<u64> {
    let frames = frames(snapshot)?;
    let off_cpu = query.split_whitespace().next() == Some("sched");
    let fields = if off_cpu {
        "comm, pid, kstack, ustack, off_cpu"
    } else {
        "comm, pid, kstack, ustack"
    };
    let text = format!("{query} | fields {fields}");
    let mut weights: BTreeMap<String, u64> = BTreeMap::new();
    let mut folded = 0u64;
    let answer = weft_query::stream(snapshot, catalog, &text, &mut |_, cells| {
        let int = |i: usize| match cells.get(i) {
            Some(Cell::Int(n)) => Some(*n),
            _ => None,
        };
        let (Some(pid), Some(kstack), Some(ustack)) = (int(1), int(2), int(3)) else {
            return;
        };
        let mut path = match &cells[0] {
            Cell::Text(comm) => comm.clone(),
            _ => format!("pid {pid}"),
        };
        let pid = u32::try_from(pid).unwrap_or(0);
        let user = u32::try_from(ustack)
            .ok()
            .map(|id| frames.user.get(&(pid, id)));
        let kernel = u32::try_from(kstack).ok().map(|id| frames.kernel.get(&id));
        if user.is_none() && kernel.is_none() {
            return;
        }
        for part in [user, kernel].into_iter().flatten() {
            path.push(';');
            path.push_str(part.map_or("[unknown]", String::as_str));
        }
        let weight = if off_cpu {
            int(4).map_or(0, |ns| (ns.unsigned_abs() / 1_000).max(1))
        } else {
            1
        };
        *weights.entry(path).or_default() += weight;
        folded += 1;
    });
    if let Err(error) = answer {
        return Err(weft_capture::Error::Query(error.render(&text)).into());
    }
    let mut out = BufWriter::new(file);
    for (path, weight) in &weights {
        writeln!(out, "{path} {weight}")?;
    }
    let file = out
        .into_inner()
        .map_err(std::io::IntoInnerError::into_error)?;
    crate::synced(&file)?;
    Ok(folded)
}

/// The `frames` source's stacks (none without it).
fn frames(snapshot: &Snapshot) -> Result<Frames> {
    let mut frames = Frames::default();
    let Some(source) = snapshot.meta().sources.iter().find(|s| s.name == FRAMES) else {
        return Ok(frames);
    };
    snapshot.raw_scan_each(source.id, 0..=u64::MAX, |record| {
        let p = record.payload;
        let word = |at: usize| {
            p.get(at..at + 4)
                .map(|b| u32::from_le_bytes(b.try_into().expect("4 bytes")))
        };
        let (Some(id), Some(pid), Some(&user), Some(text)) =
            (word(0), word(4), p.get(8), p.get(12..))
        else {
            return;
        };
        let text = String::from_utf8_lossy(text).into_owned();
        if user == 1 {
            frames.user.insert((pid, id), text);
        } else {
            frames.kernel.insert(id, text);
        }
    })?;
    Ok(frames)
}
