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
//! - per-second rates as counter tracks ([`COUNTERS`]);
//! - applications' sources as slices on their threads' tracks (a record's
//!   first duration field its length), or instants where a record has no
//!   duration ([`app_shape`]).
//!
//! Times are `CLOCK_MONOTONIC` ns, as weft keeps them: each packet says so,
//! and a first clock snapshot makes it the trace's clock (with
//! `CLOCK_BOOTTIME` as the capture noted it). Event names, categories and
//! annotation names are interned: each is written once, then named by a
//! number. A thread's track is its pid and tid, so a tid another process
//! reuses gets a track of its own. The file is streamed: a `Trace` is its
//! packets one after the other.

use std::{
    borrow::Cow,
    collections::{BTreeMap, HashMap, HashSet},
    io::Write,
};

use std::io::Result;
use weft_capture::tasks::Thread;
use weft_query::{Cell, Header};

/// How the records of one source become events.
pub struct Shape {
    pub source: Cow<'static, str>,
    track: Track,
    when: When,
    /// The field that names each event (the source's name where a record
    /// has no such field).
    name: &'static str,
}

enum Track {
    /// The record's thread's own track.
    Thread,
    /// A child of the record's thread's track: its name and uuid tag.
    ThreadChild(&'static str, u64),
    /// One track for the source: its name and uuid.
    Global(Cow<'static, str>, u64),
}

enum When {
    /// A slice from `end - dur` to `end`: the two fields.
    Slice(&'static str, Cow<'static, str>),
    /// An instant at the field.
    Instant(&'static str),
}

/// An application's source (`weft.json`'s `app_sources`: its fields'
/// kinds), the `nth`, as events on its records' threads (a `pid` or `tid`
/// field; else on a track of the source's own): a slice ending at the
/// record's time, as long as its first duration field, else an instant.
pub fn app_shape(source: &str, nth: u64, kinds: &weft_capture::metadata::FieldKinds) -> Shape {
    let duration = kinds
        .iter()
        .find(|(_, kind)| *kind == "duration")
        .map(|(field, _)| field.clone());
    let threaded = kinds.contains_key("pid") || kinds.contains_key("tid");
    Shape {
        source: Cow::Owned(source.to_owned()),
        track: if threaded {
            Track::Thread
        } else {
            Track::Global(Cow::Owned(source.to_owned()), APP_TRACKS + nth)
        },
        when: match duration {
            Some(field) => When::Slice("time", Cow::Owned(field)),
            None => When::Instant("time"),
        },
        name: "",
    }
}

/// The sources a Perfetto trace shows, and how.
pub const SHAPES: &[Shape] = &[
    Shape {
        source: Cow::Borrowed("syscalls"),
        track: Track::Thread,
        when: When::Slice("time", Cow::Borrowed("dur")),
        name: "name",
    },
    Shape {
        source: Cow::Borrowed("sched"),
        track: Track::ThreadChild("off-CPU", 2),
        when: When::Slice("ts", Cow::Borrowed("off_cpu")),
        name: "state",
    },
    Shape {
        source: Cow::Borrowed("calls"),
        track: Track::ThreadChild("PT calls", 3),
        when: When::Slice("time", Cow::Borrowed("dur")),
        name: "func",
    },
    Shape {
        source: Cow::Borrowed("block"),
        track: Track::Global(Cow::Borrowed("block I/O"), 10),
        when: When::Slice("ts", Cow::Borrowed("latency")),
        name: "op",
    },
    Shape {
        source: Cow::Borrowed("pagecache"),
        track: Track::Global(Cow::Borrowed("page cache"), 11),
        when: When::Instant("ts"),
        name: "kind",
    },
    Shape {
        source: Cow::Borrowed("net"),
        track: Track::Global(Cow::Borrowed("packets"), 12),
        when: When::Instant("ts"),
        name: "proto",
    },
    Shape {
        source: Cow::Borrowed("triggers"),
        track: Track::Global(Cow::Borrowed("triggers"), 13),
        when: When::Instant("time"),
        name: "trigger",
    },
];

/// The uuid of the first application source's own track.
const APP_TRACKS: u64 = 100;

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
/// `TracePacket.sequence_flags`: the first packet starts the sequence's
/// interned data; the others read it.
const SEQ_INCREMENTAL_STATE_CLEARED: u64 = 1;
const SEQ_NEEDS_INCREMENTAL_STATE: u64 = 2;
/// `InternedData`'s fields: event categories, names, annotation names.
const INTERNED_CATEGORY: u64 = 1;
const INTERNED_NAME: u64 = 2;
const INTERNED_ANNOTATION: u64 = 3;

/// Writes a Perfetto trace to `out`, one record at a time.
pub struct Writer<W: Write> {
    out: W,
    /// Tracks described so far, by uuid.
    described: HashSet<u64>,
    /// Interned strings by `InternedData` field and text: their ids.
    interned: HashMap<(u64, String), u64>,
    /// Strings interned by the packet being made, not yet written.
    new_interned: Vec<u8>,
    /// Records written.
    pub events: u64,
}

impl<W: Write> Writer<W> {
    /// Starts the trace with a clock snapshot naming `CLOCK_MONOTONIC` the
    /// trace's clock, so that its times need no conversion (Perfetto's
    /// default is `CLOCK_BOOTTIME`), and `CLOCK_BOOTTIME` `boottime_ahead`
    /// ns ahead of it, as the capture noted it at its start (a capture
    /// that did not note it: equal, which holds while the machine has not
    /// suspended). The packet starts the sequence's interned data.
    pub fn new(mut out: W, boottime_ahead: Option<u64>) -> Result<Self> {
        let mut snapshot = Vec::new();
        for (clock, at) in [(MONOTONIC, 0), (BOOTTIME, boottime_ahead.unwrap_or(0))] {
            let mut entry = varint_field(1, clock);
            entry.extend(varint_field(2, at));
            snapshot.extend(bytes(1, &entry));
        }
        snapshot.extend(varint_field(2, MONOTONIC));
        let mut packet = varint_field(10, SEQUENCE);
        packet.extend(varint_field(13, SEQ_INCREMENTAL_STATE_CLEARED));
        packet.extend(bytes(6, &snapshot));
        // Every later packet's times are MONOTONIC unless it says otherwise
        // (`TracePacketDefaults.timestamp_clock_id`).
        packet.extend(bytes(59, &varint_field(58, MONOTONIC)));
        out.write_all(&bytes(1, &packet))?;
        Ok(Self {
            out,
            described: HashSet::new(),
            interned: HashMap::new(),
            new_interned: Vec::new(),
            events: 0,
        })
    }

    /// The id of `text` in `InternedData` field `field`, interned (to be
    /// written with the next packet) the first time.
    fn intern(&mut self, field: u64, text: &str) -> u64 {
        if let Some(iid) = self.interned.get(&(field, text.to_owned())) {
            return *iid;
        }
        let iid = self.interned.len() as u64 + 1;
        self.interned.insert((field, text.to_owned()), iid);
        let mut entry = varint_field(1, iid);
        entry.extend(bytes(2, text.as_bytes()));
        self.new_interned.extend(bytes(field, &entry));
        iid
    }

    /// A `TrackEvent` of `kind` on `track`, named `name`, in `category`,
    /// with `annotations` (name and value), its strings interned.
    fn event(
        &mut self,
        kind: u64,
        track: u64,
        name: Option<&str>,
        category: &str,
        annotations: &[(&str, &Cell)],
    ) -> Vec<u8> {
        let mut event = varint_field(9, kind);
        event.extend(varint_field(11, track));
        if let Some(name) = name {
            let iid = self.intern(INTERNED_NAME, name);
            event.extend(varint_field(10, iid));
        }
        let iid = self.intern(INTERNED_CATEGORY, category);
        event.extend(varint_field(3, iid));
        for (name, cell) in annotations {
            let iid = self.intern(INTERNED_ANNOTATION, name);
            event.extend(bytes(4, &annotation(iid, cell)));
        }
        event
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
                // An application's record may name its process only.
                let pid = int("pid");
                let (Some(pid), Some(tid)) = (pid, int("tid").or(pid)) else {
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
            Track::Global(ref name, uuid) => {
                self.global_track(uuid, name)?;
                uuid
            }
        };
        let name = field(shape.name).map_or_else(|| shape.source.to_string(), text);
        let mut skip: Vec<&str> = match &shape.when {
            When::Slice(end, dur) => vec![end, dur, shape.name, ENTER],
            When::Instant(at) => vec![at, shape.name],
        };
        // A thread's track already says whose events these are.
        if matches!(shape.track, Track::Thread | Track::ThreadChild(..)) {
            skip.extend(["pid", "tid", "comm"]);
        }
        let annotations: Vec<(&str, &Cell)> = headers
            .iter()
            .zip(cells)
            .filter(|(h, _)| !skip.contains(&h.name.as_str()))
            .map(|(h, cell)| (h.name.as_str(), cell))
            .collect();
        let source = &shape.source;
        match &shape.when {
            When::Slice(end, dur) => {
                let (Some(end), Some(dur)) = (int(end), int(dur)) else {
                    return Ok(());
                };
                let begin = self.event(SLICE_BEGIN, track, Some(&name), source, &annotations);
                self.packet(end.saturating_sub(dur), &begin)?;
                let finish = self.event(SLICE_END, track, None, source, &[]);
                self.packet(end, &finish)?;
            }
            When::Instant(at) => {
                let Some(at) = int(at) else { return Ok(()) };
                let instant = self.event(INSTANT, track, Some(&name), source, &annotations);
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

    /// The uuid of thread `tid`'s track in process `pid`, described the
    /// first time: a tid another process reuses has a track of its own.
    fn thread_track(&mut self, pid: u64, tid: u64, comm: Option<&str>) -> Result<u64> {
        // Linux's pids and tids fit 22 bits (PID_MAX_LIMIT).
        let uuid = (1 << TAG_SHIFT) | ((pid & PID_MASK) << 22) | (tid & PID_MASK);
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
        let uuid = (tag << TAG_SHIFT) | (parent & ((1 << TAG_SHIFT) - 1));
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

    /// A `TracePacket` at `ns` holding `track_event`, and the strings it
    /// interned first.
    fn packet(&mut self, ns: u64, track_event: &[u8]) -> Result<()> {
        let mut packet = varint_field(8, ns);
        packet.extend(varint_field(10, SEQUENCE));
        packet.extend(varint_field(13, SEQ_NEEDS_INCREMENTAL_STATE));
        if !self.new_interned.is_empty() {
            packet.extend(bytes(12, &std::mem::take(&mut self.new_interned)));
        }
        packet.extend(bytes(11, track_event));
        self.out.write_all(&bytes(1, &packet))?;
        Ok(())
    }

    pub fn into_inner(self) -> W {
        self.out
    }
}

/// A slice's start, which the slice itself says (`syscalls`' `enter_ns`).
const ENTER: &str = "enter_ns";

/// Where a track's kind sits in its uuid, above its pid and tid.
const TAG_SHIFT: u64 = 48;
/// A pid's or tid's bits (Linux's `PID_MAX_LIMIT` is 2^22).
const PID_MASK: u64 = (1 << 22) - 1;

/// A `DebugAnnotation` named by interned name `name_iid`: integers as
/// `int_value`, the rest as text.
fn annotation(name_iid: u64, cell: &Cell) -> Vec<u8> {
    let mut out = varint_field(1, name_iid);
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
