//! The window a trigger kept, copied into a small standalone capture that
//! opens anywhere (`weft extract DIR --trigger N -o OUT`, then `weft query
//! OUT`, `weft tui OUT`), with every source's records of that window.

use std::{ops::RangeInclusive, path::Path};

use weft_store::{Config, Record, Snapshot, Store};

use crate::{
    capture,
    error::{Error, Result, refuse},
    metadata::{self, Extracted, Metadata},
    registry::{TASKS, TRIGGERS},
};

/// Records are copied a slice of time at a time, in arrival order across
/// sources; memory is one slice's records.
const SLICE_NS: u64 = 100_000_000;

/// Copies the window kept around firing `trigger` (1-based) of the capture
/// in `from` into the new capture `to`, leaving out damaged chunks when
/// `skip_damaged`; `to` is complete or absent. Says what it copied.
pub fn extract(from: &Path, trigger: usize, to: &Path, skip_damaged: bool) -> Result<String> {
    let snapshot = capture::open(from, skip_damaged)?;
    let window = kept_window(&snapshot, trigger)?;
    let note = Extracted {
        trigger_firing: Some(trigger),
        ..Extracted::default()
    };
    copy_window(&snapshot, from, &window, to, note)
}

/// Copies the window firing `id` kept in each capture of `from` (a
/// firing that traveled between hosts: the origin's and each peer's that
/// kept it) into `to/NAME`, NAME the capture directory's own; `to` is new.
/// Says, per capture, what it copied or that it kept no such firing.
pub fn extract_fleet(from: &[&Path], id: &str, to: &Path, skip_damaged: bool) -> Result<String> {
    if to.exists() {
        refuse!(
            "{} exists; extract writes new captures into a new directory",
            to.display()
        );
    }
    let mut report = Vec::new();
    let mut windows = Vec::new();
    let metadata: Vec<Metadata> = from
        .iter()
        .map(|dir| metadata::read_metadata(dir))
        .collect::<Result<_>>()?;
    let clocks = clocks_to_origin(&metadata, id);
    for ((dir, metadata), clock) in from.iter().zip(&metadata).zip(clocks) {
        match firing_window(metadata, id) {
            Some(window) => windows.push((*dir, window, clock)),
            None => report.push(format!("{}: kept no firing {id}", dir.display())),
        }
    }
    if windows.is_empty() {
        refuse!(
            "no capture of the fleet kept firing {id} (`weft info DIR` lists the firings each kept)"
        );
    }
    capture::prepare_dir(to, false)?.keep();
    for (dir, window, clock) in windows {
        let name = dir
            .file_name()
            .map_or_else(|| "capture".into(), |n| n.to_string_lossy().into_owned());
        let snapshot = capture::open(dir, skip_damaged)?;
        let note = Extracted {
            fleet_firing: Some(id.to_owned()),
            clock_offset_ns: clock.map(|(offset, _)| offset),
            clock_error_ns: clock.map(|(_, error)| error),
            ..Extracted::default()
        };
        report.push(format!(
            "{}: {}",
            dir.display(),
            copy_window(&snapshot, dir, &window, &to.join(name), note)?
        ));
    }
    Ok(report.join("\n"))
}

/// How a capture came to keep a traveled firing.
enum Hop {
    /// It fired there.
    Origin,
    /// Host `by` asked it, whose clock minus this one's was `offset`, give
    /// or take `error` ns.
    Asked { by: String, offset: i64, error: u64 },
}

/// Each capture's clock against firing `id`'s origin: its wall clock minus
/// the origin's, and the bound on that estimate's error, composed hop by hop
/// from what each host measured of the host that asked it (`triggers.peers`
/// in `weft.json`: its own address, and each received firing's asker and
/// clock offset); `None` where a hop back to the origin is not among the
/// captures, or was not measured.
fn clocks_to_origin(metadata: &[Metadata], id: &str) -> Vec<Option<(i64, u64)>> {
    let hops: Vec<Option<Hop>> = metadata
        .iter()
        .map(|m| {
            if m.peer_logs().any(|p| p.fired.iter().any(|f| f.id == id)) {
                return Some(Hop::Origin);
            }
            let got = m
                .peer_logs()
                .find_map(|p| p.received.iter().find(|f| f.id == id))?;
            Some(Hop::Asked {
                by: got.from.clone(),
                offset: got.clock_offset_ns?,
                error: got.clock_error_ns?,
            })
        })
        .collect();
    let me: Vec<Option<&str>> = metadata
        .iter()
        .map(|m| {
            m.peer_logs()
                .map(|p| p.me.as_str())
                .find(|me| !me.is_empty())
        })
        .collect();
    let resolve = |start: usize| {
        let (mut at, mut offset, mut error) = (start, 0i64, 0u64);
        // At most one hop per capture: a longer walk is a loop.
        for _ in 0..=metadata.len() {
            match hops[at].as_ref()? {
                Hop::Origin => return Some((offset, error)),
                Hop::Asked {
                    by,
                    offset: theirs_minus_mine,
                    error: bound,
                } => {
                    offset = offset.saturating_sub(*theirs_minus_mine);
                    error = error.saturating_add(*bound);
                    at = me.iter().position(|m| *m == Some(by.as_str()))?;
                }
            }
        }
        None
    };
    (0..metadata.len()).map(resolve).collect()
}

/// The window (monotonic ns) a capture kept for the traveling firing
/// `id`: as its origin, or as a peer that kept it.
fn firing_window(metadata: &Metadata, id: &str) -> Option<RangeInclusive<u64>> {
    metadata.peer_logs().find_map(|peers| {
        let fired = (peers.fired.iter())
            .find(|f| f.id == id)
            .map(|f| f.window_ns);
        let received = (peers.received.iter())
            .find(|f| f.id == id && f.kept)
            .and_then(|f| f.window_ns);
        fired.or(received).map(|[start, end]| start..=end)
    })
}

/// Copies `window` of `snapshot` (the capture in `from`) into the new
/// capture `to`, noting `note` in its `extracted` entry.
fn copy_window(
    snapshot: &Snapshot,
    from: &Path,
    window: &RangeInclusive<u64>,
    to: &Path,
    note: Extracted,
) -> Result<String> {
    if to.exists() {
        refuse!("{} exists; extract writes a new capture", to.display());
    }
    // Written beside OUT and renamed at the end: OUT is complete or absent.
    let partial = to.with_extension("partial");
    let _ = std::fs::remove_dir_all(&partial);
    // Until renamed into place, the copy is removed on any error.
    let mut fresh = capture::prepare_dir(&partial, false)?;
    let records = copy(snapshot, &partial, window)?;
    let mut metadata = metadata::read_metadata(from)?;
    metadata.extracted = Some(Extracted {
        from: from.display().to_string(),
        start_ns: *window.start(),
        end_ns: *window.end(),
        ..note
    });
    metadata::write_metadata(&weft_store::Dir::open_to_write(&partial)?, &metadata)?;
    std::fs::rename(&partial, to).map_err(|error| Error::File {
        doing: "failed to create",
        path: to.to_owned(),
        error,
    })?;
    fresh.keep();
    Ok(format!(
        "extracted {records} records of {:.3}s into {}",
        (window.end() - window.start()) as f64 / 1e9,
        to.display()
    ))
}

/// The pinned window that holds firing `n` (1-based, in the order
/// `weft query DIR triggers` lists them): merged matches may have
/// widened it past the firing's own window.
pub fn kept_window(snapshot: &Snapshot, n: usize) -> Result<RangeInclusive<u64>> {
    let meta = snapshot.meta();
    let Some(log) = meta.sources.iter().find(|s| s.name == TRIGGERS) else {
        refuse!("this capture has no trigger firings (no `{TRIGGERS}` source)");
    };
    let (firings, _) = snapshot.raw_scan(log.id, 0..=u64::MAX)?;
    let Some(firing) = n.checked_sub(1).and_then(|i| firings.get(i)) else {
        refuse!(
            "--trigger {n}: this capture has {} trigger firings (1 to {0})",
            firings.len()
        );
    };
    let field = |i: usize| {
        let bytes = (firing.payload.get(i * 8..i * 8 + 8))
            .ok_or_else(|| Error::Damaged("a short trigger record".into()))?;
        Ok::<_, Error>(u64::from_le_bytes(bytes.try_into().expect("8 bytes")))
    };
    let (start, end) = (field(1)?, field(2)?);
    Ok(meta
        .pins
        .iter()
        .find(|(s, e)| *s <= start && end <= *e)
        .map_or(start..=end, |(s, e)| *s..=*e))
}

/// Copies the window's records, and the thread names noted before it,
/// into a new store at `dir`; returns how many records were copied.
fn copy(snapshot: &Snapshot, dir: &Path, window: &RangeInclusive<u64>) -> Result<u64> {
    let meta = snapshot.meta();
    let mut store = Store::open(dir, &Config::default())?;
    capture::define_like(&mut store, meta)?;
    let mut copied = 0;
    // Thread names noted before the window name its threads too.
    if let Some(names) = meta.sources.iter().find(|s| s.name == TASKS) {
        let before = 0..=window.start().saturating_sub(1);
        let (records, _) = snapshot.raw_scan(names.id, before)?;
        copied += append(&mut store, records)?;
    }
    let mut from = *window.start();
    while from <= *window.end() {
        let to = from.saturating_add(SLICE_NS - 1).min(*window.end());
        let mut records = Vec::new();
        for source in &meta.sources {
            snapshot.raw_scan_each(source.id, from..=to, |r| records.push(r.to_owned()))?;
        }
        records.sort_by_key(|r| (r.ts, r.addr));
        copied += append(&mut store, records)?;
        from = to + 1;
    }
    store.close()?;
    Ok(copied)
}

fn append(store: &mut Store, records: Vec<Record>) -> Result<u64> {
    let count = records.len() as u64;
    for record in records {
        store.append_at(
            record.source,
            record.ts,
            record.producer_ts,
            &record.payload,
        )?;
    }
    Ok(count)
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::{Metadata, clocks_to_origin};

    /// A capture's `weft.json` whose recorder is `me`, with `peers`'
    /// entries of firing `id` in `fired` or `received`.
    fn host(me: &str, key: &str, entry: &Value) -> Metadata {
        let document = json!({
            "format": "weft-capture 1",
            "sessions": [{ "triggers": { "peers": { "me": me, key: [entry] } } }],
        });
        serde_json::from_value(document).unwrap()
    }

    #[test]
    fn a_host_s_clock_against_the_origin_adds_up_hop_by_hop() {
        let id = "o/1/5";
        let asked = |from: &str, offset: i64, error: u64| json!({ "id": id, "from": from, "clock_offset_ns": offset, "clock_error_ns": error });
        let metadata = [
            // The client, asked by the proxy, whose clock is 30 ns behind it.
            host("c", "received", &asked("p", -30, 5)),
            host("o", "fired", &json!({ "id": id })),
            // The proxy, asked by the origin, whose clock is 100 ns ahead.
            host("p", "received", &asked("o", 100, 10)),
            // Asked by a host not among the captures.
            host("x", "received", &asked("elsewhere", 0, 1)),
            // Older weft: no clock noted.
            host("y", "received", &json!({ "id": id, "from": "o" })),
        ];
        assert_eq!(
            clocks_to_origin(&metadata, id),
            [Some((-70, 15)), Some((0, 0)), Some((-100, 10)), None, None]
        );
    }
}
