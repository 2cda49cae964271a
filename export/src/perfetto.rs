//! `weft export --format perfetto`: a capture as a Perfetto trace (the
//! protobuf `Trace` of `TracePacket`s that ui.perfetto.dev and
//! `trace_processor` open), over the export's window:
//!
//! - each thread a track, named by its command, with its syscalls as slices
//!   (enter to exit), and two child tracks: its off-CPU stretches (`sched`,
//!   named by why it left) and its PT calls (`calls`, nested by time);
//! - block requests as slices and page-cache events, packets and trigger
//!   firings as instants, each on a track of its own;
//! - every other field of a record as a debug annotation of its event;
//! - the `switch` source's context switches as the kernel's `sched_switch`
//!   ftrace events, which Perfetto turns into its CPU tracks (what ran on
//!   each CPU when), and a process tree naming every process and thread
//!   the capture's task records name;
//! - per-second rates as counter tracks ([`COUNTERS`]).
//!
//! Times are `CLOCK_MONOTONIC` ns, as weft keeps them: each packet says so,
//! and a first clock snapshot makes it the trace's clock.
//! The file is streamed: a `Trace` is its packets one after the other.

use std::{
    collections::{BTreeMap, HashSet},
    io::Write,
};

use anyhow::Result;
use weft_capture::tasks::Thread;
use weft_query::{Cell, Header};

/// How the records of one source become events.
pub struct Shape {
    pub source: &'static str,
    track: Track,
    when: When,
    /// The field that names each event.
    name: &'static str,
}

enum Track {
    /// The record's thread's own track.
    Thread,
    /// A child of the record's thread's track: its name and uuid tag.
    ThreadChild(&'static str, u64),
    /// One track for the source: its name and uuid.
    Global(&'static str, u64),
}

enum When {
    /// A slice from `end - dur` to `end`: the two fields.
    Slice(&'static str, &'static str),
    /// An instant at the field.
    Instant(&'static str),
}

/// The sources a Perfetto trace shows, and how.
pub const SHAPES: &[Shape] = &[
    Shape {
        source: "syscalls",
        track: Track::Thread,
        when: When::Slice("time", "dur"),
        name: "name",
    },
    Shape {
        source: "sched",
        track: Track::ThreadChild("off-CPU", 2),
        when: When::Slice("ts", "off_cpu"),
        name: "state",
    },
    Shape {
        source: "calls",
        track: Track::ThreadChild("PT calls", 3),
        when: When::Slice("time", "dur"),
        name: "func",
    },
    Shape {
        source: "block",
        track: Track::Global("block I/O", 10),
        when: When::Slice("ts", "latency"),
        name: "op",
    },
    Shape {
        source: "pagecache",
        track: Track::Global("page cache", 11),
        when: When::Instant("ts"),
        name: "kind",
    },
    Shape {
        source: "net",
        track: Track::Global("packets", 12),
        when: When::Instant("ts"),
        name: "proto",
    },
    Shape {
        source: "triggers",
        track: Track::Global("triggers", 13),
        when: When::Instant("time"),
        name: "trigger",
    },
];

/// The counter tracks: a source, the query of its values (a value per
/// second, at each second's start), the track's name and uuid.
pub const COUNTERS: &[(&str, &str, &str, u64)] = &[
    ("syscalls", "count every 1s", "syscalls/s", 20),
    ("net", "count every 1s", "packets/s", 21),
    ("block", "count every 1s", "block requests/s", 22),
    ("block", "sum(bytes) every 1s", "block bytes/s", 23),
];

/// `TrackEvent.type` values.
const SLICE_BEGIN: u64 = 1;
const SLICE_END: u64 = 2;
const INSTANT: u64 = 3;
const COUNTER: u64 = 4;
/// `BUILTIN_CLOCK_MONOTONIC` and `BUILTIN_CLOCK_BOOTTIME`.
const MONOTONIC: u64 = 3;
const BOOTTIME: u64 = 6;
/// Every packet's sequence: one writer.
const SEQUENCE: u64 = 1;

/// Writes a Perfetto trace to `out`, one record at a time.
pub struct Writer<W: Write> {
    out: W,
    /// Tracks described so far, by uuid.
    described: HashSet<u64>,
    /// Records written.
    pub events: u64,
}

impl<W: Write> Writer<W> {
    /// Starts the trace with a clock snapshot naming `CLOCK_MONOTONIC` the
    /// trace's clock, so that its times need no conversion (Perfetto's
    /// default is `CLOCK_BOOTTIME`). BOOTTIME is given equal to it, which
    /// holds while the machine has not suspended.
    pub fn new(mut out: W) -> Result<Self> {
        let mut snapshot = Vec::new();
        for clock in [MONOTONIC, BOOTTIME] {
            let mut entry = varint_field(1, clock);
            entry.extend(varint_field(2, 0));
            snapshot.extend(bytes(1, &entry));
        }
        snapshot.extend(varint_field(2, MONOTONIC));
        let mut packet = varint_field(10, SEQUENCE);
        packet.extend(bytes(6, &snapshot));
        out.write_all(&bytes(1, &packet))?;
        Ok(Self {
            out,
            described: HashSet::new(),
            events: 0,
        })
    }

    /// Writes one record of `shape`'s source as its event(s).
    pub fn record(&mut self, shape: &Shape, headers: &[Header], cells: &[Cell]) -> Result<()> {
        let field = |name: &str| {
            headers
                .iter()
                .position(|h| h.name == name)
                .and_then(|i| cells.get(i))
        };
        let int = |name: &str| match field(name) {
            Some(Cell::Int(v)) => u64::try_from(*v).ok(),
            _ => None,
        };
        let track = match shape.track {
            Track::Thread | Track::ThreadChild(..) => {
                let (Some(pid), Some(tid)) = (int("pid"), int("tid")) else {
                    return Ok(());
                };
                let comm = match field("comm") {
                    Some(Cell::Text(comm)) => Some(comm.as_str()),
                    _ => None,
                };
                let thread = self.thread_track(pid, tid, comm)?;
                match shape.track {
                    Track::ThreadChild(name, tag) => self.child_track(thread, tag, name)?,
                    _ => thread,
                }
            }
            Track::Global(name, uuid) => {
                self.global_track(uuid, name)?;
                uuid
            }
        };
        let name = field(shape.name).map_or_else(String::new, text);
        let skip: Vec<&str> = match shape.when {
            When::Slice(end, dur) => vec![end, dur, shape.name],
            When::Instant(at) => vec![at, shape.name],
        };
        let annotations: Vec<u8> = headers
            .iter()
            .zip(cells)
            .filter(|(h, _)| !skip.contains(&h.name.as_str()))
            .flat_map(|(h, cell)| bytes(4, &annotation(&h.name, cell)))
            .collect();
        match shape.when {
            When::Slice(end, dur) => {
                let (Some(end), Some(dur)) = (int(end), int(dur)) else {
                    return Ok(());
                };
                let begin = event(SLICE_BEGIN, track, Some(&name), shape.source, &annotations);
                self.packet(end.saturating_sub(dur), &begin)?;
                let finish = event(SLICE_END, track, None, shape.source, &[]);
                self.packet(end, &finish)?;
            }
            When::Instant(at) => {
                let Some(at) = int(at) else { return Ok(()) };
                let instant = event(INSTANT, track, Some(&name), shape.source, &annotations);
                self.packet(at, &instant)?;
            }
        }
        self.events += 1;
        Ok(())
    }

    /// Names every process and thread in `threads` (the latest name of
    /// each) in one `ProcessTree` at `ns`: the CPU tracks show names, not
    /// numbers. A process is named by its main thread.
    pub fn process_tree(&mut self, ns: u64, threads: &[Thread]) -> Result<()> {
        let latest: BTreeMap<u32, &Thread> = threads.iter().map(|t| (t.tid, t)).collect();
        let mut processes: BTreeMap<u32, Option<&str>> = BTreeMap::new();
        let mut tree = Vec::new();
        for thread in latest.values() {
            let main = (thread.pid == thread.tid).then_some(thread.name.as_str());
            let name = processes.entry(thread.pid).or_default();
            *name = name.or(main);
            let mut entry = varint_field(1, thread.tid.into());
            entry.extend(bytes(2, thread.name.as_bytes()));
            entry.extend(varint_field(3, thread.pid.into()));
            tree.extend(bytes(2, &entry));
        }
        for (pid, name) in processes {
            let mut entry = varint_field(1, pid.into());
            if let Some(name) = name {
                entry.extend(bytes(3, name.as_bytes()));
                entry.extend(varint_field(9, 1));
            }
            tree.extend(bytes(1, &entry));
        }
        let mut packet = varint_field(8, ns);
        packet.extend(varint_field(10, SEQUENCE));
        packet.extend(bytes(2, &tree));
        self.out.write_all(&bytes(1, &packet))?;
        Ok(())
    }

    /// One context switch on `cpu` at `ns`, from thread `prev` to `next`
    /// (tid and name), as the kernel's `sched_switch` ftrace event. The
    /// `switch` source keeps neither priority nor why the thread left, so
    /// they are left out: Perfetto shows a thread that left as runnable.
    pub fn switch(
        &mut self,
        cpu: u32,
        ns: u64,
        prev: (u32, &str),
        next: (u32, &str),
    ) -> Result<()> {
        let mut switch = bytes(1, prev.1.as_bytes());
        switch.extend(varint_field(2, prev.0.into()));
        switch.extend(bytes(5, next.1.as_bytes()));
        switch.extend(varint_field(6, next.0.into()));
        let mut event = varint_field(1, ns);
        event.extend(varint_field(2, prev.0.into()));
        event.extend(bytes(4, &switch));
        let mut bundle = varint_field(1, cpu.into());
        bundle.extend(bytes(2, &event));
        let mut packet = varint_field(10, SEQUENCE);
        packet.extend(bytes(1, &bundle));
        self.out.write_all(&bytes(1, &packet))?;
        self.events += 1;
        Ok(())
    }

    /// Value `value` at `ns` on counter track `uuid` called `name`,
    /// described the first time.
    pub fn counter(&mut self, uuid: u64, name: &str, ns: u64, value: i64) -> Result<()> {
        if self.described.insert(uuid) {
            let mut descriptor = varint_field(1, uuid);
            descriptor.extend(bytes(2, name.as_bytes()));
            descriptor.extend(bytes(8, &[]));
            self.descriptor(&descriptor)?;
        }
        let mut event = varint_field(9, COUNTER);
        event.extend(varint_field(11, uuid));
        event.extend(varint_field(30, value.cast_unsigned()));
        self.packet(ns, &event)
    }

    /// The uuid of thread `tid`'s track, described the first time.
    fn thread_track(&mut self, pid: u64, tid: u64, comm: Option<&str>) -> Result<u64> {
        let uuid = (1 << 40) | tid;
        if self.described.insert(uuid) {
            let mut thread = varint_field(1, pid);
            thread.extend(varint_field(2, tid));
            if let Some(comm) = comm {
                thread.extend(bytes(5, comm.as_bytes()));
            }
            let mut descriptor = varint_field(1, uuid);
            descriptor.extend(bytes(4, &thread));
            self.descriptor(&descriptor)?;
        }
        Ok(uuid)
    }

    /// The uuid of `parent`'s child track `tag`, described the first time.
    fn child_track(&mut self, parent: u64, tag: u64, name: &str) -> Result<u64> {
        let uuid = (tag << 40) | (parent & ((1 << 40) - 1));
        if self.described.insert(uuid) {
            let mut descriptor = varint_field(1, uuid);
            descriptor.extend(bytes(2, name.as_bytes()));
            descriptor.extend(varint_field(5, parent));
            self.descriptor(&descriptor)?;
        }
        Ok(uuid)
    }

    fn global_track(&mut self, uuid: u64, name: &str) -> Result<()> {
        if self.described.insert(uuid) {
            let mut descriptor = varint_field(1, uuid);
            descriptor.extend(bytes(2, name.as_bytes()));
            self.descriptor(&descriptor)?;
        }
        Ok(())
    }

    fn descriptor(&mut self, descriptor: &[u8]) -> Result<()> {
        let mut packet = varint_field(10, SEQUENCE);
        packet.extend(bytes(60, descriptor));
        self.out.write_all(&bytes(1, &packet))?;
        Ok(())
    }

    /// A `TracePacket` at `ns` holding `track_event`.
    fn packet(&mut self, ns: u64, track_event: &[u8]) -> Result<()> {
        let mut packet = varint_field(8, ns);
        packet.extend(varint_field(58, MONOTONIC));
        packet.extend(varint_field(10, SEQUENCE));
        packet.extend(bytes(11, track_event));
        self.out.write_all(&bytes(1, &packet))?;
        Ok(())
    }

    pub fn into_inner(self) -> W {
        self.out
    }
}

/// A `TrackEvent`.
fn event(kind: u64, track: u64, name: Option<&str>, category: &str, annotations: &[u8]) -> Vec<u8> {
    let mut event = varint_field(9, kind);
    event.extend(varint_field(11, track));
    if let Some(name) = name {
        event.extend(bytes(23, name.as_bytes()));
    }
    event.extend(bytes(22, category.as_bytes()));
    event.extend(annotations);
    event
}

/// A `DebugAnnotation`: integers as `int_value`, the rest as text.
fn annotation(name: &str, cell: &Cell) -> Vec<u8> {
    let mut out = bytes(10, name.as_bytes());
    match cell {
        Cell::Int(v) => out.extend(varint_field(4, v.cast_unsigned())),
        other => out.extend(bytes(6, text(other).as_bytes())),
    }
    out
}

fn text(cell: &Cell) -> String {
    match cell {
        Cell::Null => String::new(),
        Cell::Int(v) => v.to_string(),
        Cell::Float(v) => v.to_string(),
        Cell::Text(t) => t.clone(),
    }
}

/// Protobuf wire format: a varint field.
fn varint_field(field: u64, value: u64) -> Vec<u8> {
    let mut out = varint(field << 3);
    out.extend(varint(value));
    out
}

/// Protobuf wire format: a length-delimited field.
fn bytes(field: u64, value: &[u8]) -> Vec<u8> {
    let mut out = varint((field << 3) | 2);
    out.extend(varint(value.len() as u64));
    out.extend(value);
    out
}

fn varint(mut value: u64) -> Vec<u8> {
    let mut out = Vec::with_capacity(10);
    loop {
        let byte = (value & 0x7f) as u8;
        value >>= 7;
        if value == 0 {
            out.push(byte);
            return out;
        }
        out.push(byte | 0x80);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_and_fields_are_protobufs_wire_format() {
        assert_eq!(varint(1), [1]);
        assert_eq!(varint(300), [0xac, 0x02]);
        assert_eq!(varint_field(8, 150), [0x40, 0x96, 0x01]);
        assert_eq!(bytes(2, b"ab"), [0x12, 2, b'a', b'b']);
        // Field 60 needs a two-byte tag.
        assert_eq!(bytes(60, b"")[..2], [0xe2, 0x03]);
    }
}
