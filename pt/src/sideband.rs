//! Sideband that steers a decode, as libipt's sideband session does
//! (`libipt-sb`): the records of one or more `perf_event` channels
//! ([`pevent::Channel`]), taken in TSC order as the trace's time passes
//! them.
//!
//! A listing shows each record where the trace's time reaches it
//! ([`Sideband::show_until`]). A flow hands the session every event it
//! reports ([`Sideband::event`]): records up to the event's time are shown
//! and applied. The primary channel's records keep a code image per process
//! (MMAP, MMAP2, FORK, COMM.EXEC) and say which process runs
//! (`ITRACE_START`, `SWITCH`, `SWITCH_CPU_WIDE`); a switch waits until the trace
//! is in the kernel (or tracing is off), where switches happen, and then
//! hands the decoder that process's image. Problems with the sideband are
//! reported as notes, and decoding goes on.

use std::collections::HashMap;
use std::fmt::{self, Display, Formatter};
use std::rc::Rc;

use crate::image::Image;
use crate::pevent::{Body, Channel, Fault, Record};

/// What the session tells its user, in the order it happens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Note {
    /// A record the trace's time reached, and its channel's file.
    Record { channel: Rc<str>, record: Record },
    /// Something in a record the session could not use (a warning) or an
    /// error reading or applying it, at `offset` of the channel's file.
    Problem {
        channel: Rc<str>,
        offset: usize,
        problem: Problem,
    },
    /// The decoder now uses this process's image (`ptxed --sb:switch`).
    Switch { pid: u32 },
}

/// What went wrong with a record (libipt's `pt_sb_error_code` for
/// warnings, its error codes for errors).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Problem {
    /// Trace was lost (an AUX record with its TRUNCATED flag).
    TraceLost,
    /// Sideband was lost (a LOST record).
    SidebandLost,
    /// A mapping whose code cannot be had: anonymous, deleted, or a
    /// special file other than the vDSO.
    SectionLost,
    /// A record could not be read or applied.
    Error(&'static str),
}

impl Problem {
    pub fn is_error(self) -> bool {
        matches!(self, Problem::Error(_))
    }

    pub fn message(self) -> &'static str {
        match self {
            Problem::TraceLost => "trace lost",
            Problem::SidebandLost => "sideband lost",
            Problem::SectionLost => "image section lost",
            Problem::Error(message) => message,
        }
    }
}

/// How records are shown (ptdump's and ptxed's `--sb:*` options).
#[derive(Debug, Clone, Copy, Default)]
#[allow(
    clippy::struct_excessive_bools,
    reason = "ptdump's switches, one field each"
)]
pub struct SampleFormat {
    /// `--sb:compact`: one line per record.
    pub compact: bool,
    /// `--sb:verbose`: one line per field.
    pub verbose: bool,
    /// `--sb:filename`: the channel's file before each record.
    pub filename: bool,
    /// `--sb:offset`: the record's offset in its file.
    pub offset: bool,
    /// `--sb:time`: the record's time in TSC.
    pub time: bool,
    /// `--sb:switch`: where the decoder takes another process's image.
    pub switches: bool,
    /// `--sb:warn`: problems that are no errors.
    pub warnings: bool,
}

impl SampleFormat {
    /// Whether records are shown at all.
    pub fn shows_records(self) -> bool {
        self.compact || self.verbose
    }

    /// Whether `note` is shown (errors always are).
    pub fn shows(self, note: &Note) -> bool {
        match note {
            Note::Record { .. } => self.shows_records(),
            Note::Problem { problem, .. } => problem.is_error() || self.warnings,
            Note::Switch { .. } => self.switches,
        }
    }

    /// A record as ptdump prints it under this format.
    pub fn record<'a>(self, channel: &'a str, record: &'a Record) -> Shown<'a> {
        Shown {
            format: self,
            channel,
            record,
        }
    }
}

/// A record under a [`SampleFormat`].
pub struct Shown<'a> {
    format: SampleFormat,
    channel: &'a str,
    record: &'a Record,
}

impl Display for Shown<'_> {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        let (format, record) = (self.format, self.record);
        match (format.filename, format.offset) {
            (true, true) => write!(f, "{}:{:016x}  ", self.channel, record.offset)?,
            (true, false) => write!(f, "{}  ", self.channel)?,
            (false, true) => write!(f, "{:016x}  ", record.offset)?,
            (false, false) => {}
        }
        if format.time && record.sample.time.is_some() {
            write!(f, "{:016x}  ", record.tsc)?;
        }
        if format.verbose {
            write!(f, "{}", record.verbose())
        } else {
            write!(f, "{record}")
        }
    }
}

/// Where the trace is, for placing context switches (libipt's
/// `pt_sb_pevent_loc`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Location {
    Unknown,
    User,
    Kernel,
    LikelyUser,
    LikelyKernel,
}

impl Location {
    fn kernelish(self) -> bool {
        matches!(
            self,
            Location::Unknown | Location::Kernel | Location::LikelyKernel
        )
    }

    /// Where the trace went when it gave no IP: from the kernel to user
    /// space, or back.
    fn flipped(self) -> Self {
        match self {
            Location::Kernel | Location::LikelyKernel => Location::LikelyUser,
            Location::User | Location::LikelyUser => Location::LikelyKernel,
            Location::Unknown => Location::Unknown,
        }
    }
}

/// What the session needs to know of an event of the flow: its time, and
/// where it says the trace is.
#[derive(Debug, Clone, Copy)]
pub struct At {
    pub tsc: u64,
    pub position: Position,
}

/// Where an event puts the trace.
#[derive(Debug, Clone, Copy)]
pub enum Position {
    /// At this IP.
    Ip(u64),
    /// Tracing stopped without saying where it went, from `from` (an
    /// address, or where the trace was last).
    Left { from: Option<u64> },
    /// A new CR3 without IP: most likely the kernel.
    Paging,
    /// The event does not say.
    Unknown,
}

/// A process's code, as the sideband built it.
#[derive(Debug)]
struct Context {
    pid: u32,
    image: Image,
}

/// A channel and the record it holds, not yet due.
#[derive(Debug)]
struct Slot {
    channel: Channel,
    record: Option<Record>,
    /// The record has been shown and applied (it stays to be reached).
    done: bool,
}

/// Opens the files the mappings name; a test of the decoder can give
/// files of its own.
pub type Files<'a> = dyn Fn(&str) -> std::io::Result<Vec<u8>> + 'a;

pub struct Sideband<'a> {
    slots: Vec<Slot>,
    /// Channels with records to come, by the time of their next record
    /// (ties keep the order they came in).
    order: Vec<usize>,
    /// Channels whose records are all read; they still place a waiting
    /// switch.
    retired: Vec<usize>,
    /// Where the kernel's addresses start (`--pevent:kernel-start`).
    kernel_start: u64,
    /// The kernel's code, which every process image starts with.
    kernel: Image,
    files: Box<Files<'a>>,
    contexts: Vec<Option<Context>>,
    by_pid: HashMap<u32, usize>,
    /// The context whose image the decoder uses, and the one it will use
    /// once the trace gets to the kernel.
    current: Option<usize>,
    next: Option<usize>,
    location: Location,
    /// Changes each time the decoder's image changes.
    generation: u64,
}

impl<'a> Sideband<'a> {
    /// A session over `channels` (in the order given), with mappings read
    /// through `files`.
    pub fn new(channels: Vec<Channel>, files: Box<Files<'a>>) -> Self {
        Sideband {
            slots: channels
                .into_iter()
                .map(|channel| Slot {
                    channel,
                    record: None,
                    done: false,
                })
                .collect(),
            order: Vec::new(),
            retired: Vec::new(),
            kernel_start: u64::MAX,
            kernel: Image::new(),
            files,
            contexts: Vec::new(),
            by_pid: HashMap::new(),
            current: None,
            next: None,
            location: Location::Unknown,
            generation: 0,
        }
    }

    /// Addresses from `start` up are the kernel's.
    #[must_use]
    pub fn with_kernel_start(mut self, start: u64) -> Self {
        self.kernel_start = start;
        self
    }

    /// The kernel's code (e.g. from `/proc/kcore`), part of every process.
    #[must_use]
    pub fn with_kernel(mut self, kernel: Image) -> Self {
        self.kernel = kernel;
        self
    }

    /// Read each channel's first record (libipt's `pt_sb_init_decoders`).
    pub fn start(&mut self, note: &mut dyn FnMut(Note)) {
        // Ties go to the channel given first, as in libipt, which takes
        // its channels in reverse.
        for index in (0..self.slots.len()).rev() {
            if self.fetch(index, note) {
                self.insert(index);
            }
        }
    }

    /// Read channel `index`'s next record; false where there is none.
    fn fetch(&mut self, index: usize, note: &mut dyn FnMut(Note)) -> bool {
        let slot = &mut self.slots[index];
        slot.done = false;
        match slot.channel.next_record() {
            Ok(record) => {
                slot.record = Some(record);
                true
            }
            Err((offset, fault)) => {
                slot.record = None;
                if fault != Fault::End {
                    note(Note::Problem {
                        channel: slot.channel.name.clone(),
                        offset,
                        problem: Problem::Error(fault.message()),
                    });
                }
                false
            }
        }
    }

    fn tsc(&self, index: usize) -> u64 {
        self.slots[index]
            .record
            .as_ref()
            .map_or(u64::MAX, |r| r.tsc)
    }

    /// Put a channel among the others by its next record's time, ahead
    /// of those due at the same time.
    fn insert(&mut self, index: usize) {
        let tsc = self.tsc(index);
        let at = self
            .order
            .iter()
            .position(|&other| tsc <= self.tsc(other))
            .unwrap_or(self.order.len());
        self.order.insert(at, index);
    }

    /// The channel whose record is due at `tsc`, taken out of the order.
    fn due(&mut self, tsc: u64) -> Option<usize> {
        let &first = self.order.first()?;
        (self.tsc(first) <= tsc).then(|| self.order.remove(0))
    }

    /// Show every record due by `tsc` (ptdump's listing: records are only
    /// shown, not applied).
    pub fn show_until(&mut self, tsc: u64, note: &mut dyn FnMut(Note)) {
        while let Some(index) = self.due(tsc) {
            let record = self.slots[index].record.clone().expect("a record");
            note(Note::Record {
                channel: self.slots[index].channel.name.clone(),
                record,
            });
            if self.fetch(index, note) {
                self.insert(index);
            }
        }
    }

    /// The image of the process the decoder is in, once the sideband has
    /// said which.
    pub fn image(&self) -> Option<&Image> {
        let context = self.contexts[self.current?].as_ref()?;
        Some(&context.image)
    }

    /// Changes whenever [`Sideband::image`] may have changed.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// An event of the flow: show and apply the records due by its time,
    /// then let it place a waiting context switch.
    pub fn event(&mut self, at: At, note: &mut dyn FnMut(Note)) {
        while let Some(index) = self.due(at.tsc) {
            let record = self.slots[index].record.take().expect("a record");
            note(Note::Record {
                channel: self.slots[index].channel.name.clone(),
                record: record.clone(),
            });
            self.apply(index, &record, note);
            self.slots[index].record = Some(record);
            self.slots[index].done = true;
            if self.fetch(index, note) {
                self.insert(index);
            } else {
                self.retired.push(index);
            }
        }
        self.place(at, note);
    }

    /// Keep track of user and kernel space, and make a waiting switch where
    /// the trace is (or was) in the kernel.
    fn place(&mut self, at: At, note: &mut dyn FnMut(Note)) {
        let old = self.location;
        self.location = match at.position {
            Position::Ip(ip) => self.location_of(ip),
            Position::Left { from: Some(ip) } => self.location_of(ip).flipped(),
            Position::Left { from: None } => old.flipped(),
            Position::Paging => Location::LikelyKernel,
            Position::Unknown => Location::Unknown,
        };
        if self.next.is_some() && (old.kernelish() || self.location.kernelish()) {
            self.switch(note);
        }
    }

    fn location_of(&self, ip: u64) -> Location {
        if ip < self.kernel_start {
            Location::User
        } else {
            Location::Kernel
        }
    }

    /// The decoder takes the waiting context's image.
    fn switch(&mut self, note: &mut dyn FnMut(Note)) {
        let Some(next) = self.next.take() else {
            return;
        };
        let old = self.current.replace(next);
        self.generation += 1;
        let pid = self.contexts[next].as_ref().expect("live").pid;
        note(Note::Switch { pid });
        if let Some(old) = old.filter(|&o| !self.by_pid.values().any(|&c| c == o)) {
            // Replaced (by an exec) and no longer in use.
            self.contexts[old] = None;
        }
    }

    /// Remember to switch to `pid`'s context once the trace is in the
    /// kernel; a later switch overrides one still waiting.
    fn prepare_switch(&mut self, pid: u32) {
        let context = self.context(pid);
        self.next = (Some(context) != self.current).then_some(context);
    }

    /// `pid`'s context, made (with the kernel's code) where there is none.
    fn context(&mut self, pid: u32) -> usize {
        if let Some(&index) = self.by_pid.get(&pid) {
            return index;
        }
        self.contexts.push(Some(Context {
            pid,
            image: self.kernel.clone(),
        }));
        let index = self.contexts.len() - 1;
        self.by_pid.insert(pid, index);
        index
    }

    /// Forget `pid`'s context; its image lives on while the decoder uses it.
    fn remove(&mut self, pid: u32) {
        if let Some(index) = self.by_pid.remove(&pid)
            && self.current != Some(index)
            && self.next != Some(index)
        {
            self.contexts[index] = None;
        }
    }

    /// What a record does to the processes' images and to which runs
    /// (libipt's `pt_sb_pevent_apply_event_record`). Only the primary
    /// channel says which process runs on the traced CPU.
    fn apply(&mut self, channel: usize, record: &Record, note: &mut dyn FnMut(Note)) {
        let primary = self.slots[channel].channel.primary;
        let name = self.slots[channel].channel.name.clone();
        let mut problem = |problem| {
            note(Note::Problem {
                channel: name.clone(),
                offset: record.offset,
                problem,
            });
        };
        match &record.body {
            Body::ItraceStart { pid, .. } if primary => {
                // Tracing just started: no need to wait for the kernel.
                self.prepare_switch(*pid);
                self.switch(note);
            }
            Body::Task { pid, ppid, tid, .. } if record.is_fork() && pid != ppid => {
                if pid != tid {
                    problem(Problem::Error("internal error"));
                    return;
                }
                self.remove(*pid);
                let child = self.context(*pid);
                if let Some(&parent) = self.by_pid.get(ppid) {
                    let image = self.contexts[parent].as_ref().expect("live").image.clone();
                    self.contexts[child].as_mut().expect("live").image = image;
                }
            }
            Body::Comm { pid, .. } if record.is_exec() => {
                // A new context, switched to once in the kernel: the old
                // image is still in use until then.
                self.remove(*pid);
                self.context(*pid);
                if primary {
                    self.prepare_switch(*pid);
                }
            }
            Body::Switch if primary && !record.is_switch_out() => match record.sample.pid_tid {
                Some((pid, _)) => self.prepare_switch(pid),
                None => problem(Problem::Error("bad configuration")),
            },
            Body::SwitchCpuWide { pid, .. } if primary => {
                if record.is_switch_out() {
                    self.prepare_switch(*pid);
                } else if let Some((pid, _)) = record.sample.pid_tid {
                    self.prepare_switch(pid);
                }
            }
            Body::Mmap {
                pid,
                addr,
                len,
                pgoff,
                filename,
                ..
            } if !record.is_kernel() => {
                if let Err(p) = self.map(*pid, filename, *addr, *len, *pgoff) {
                    problem(p);
                }
            }
            Body::Lost { .. } => problem(Problem::SidebandLost),
            Body::Aux { .. } if primary && record.is_truncated() => problem(Problem::TraceLost),
            _ => {}
        }
    }

    /// Map part of a file into `pid`'s image.
    fn map(
        &mut self,
        pid: u32,
        file: &str,
        addr: u64,
        len: u64,
        pgoff: u64,
    ) -> Result<(), Problem> {
        if file == "[vdso]" {
            // The vDSO's code is not in any file; it must be given.
            return Err(Problem::Error("bad configuration"));
        }
        if file.starts_with('[') || file == "//anon" || file.contains(" (deleted)") {
            return Err(Problem::SectionLost);
        }
        let bytes = (self.files)(file).map_err(|_| Problem::Error("bad file"))?;
        let context = self.context(pid);
        let image = &mut self.contexts[context].as_mut().expect("live").image;
        image
            .add_mapping(file, &bytes, addr, len, pgoff)
            .map_err(|_| Problem::Error("bad file"))?;
        if self.current == Some(context) {
            self.generation += 1;
        }
        Ok(())
    }
}

impl Note {
    /// The note as ptxed prints it (ptdump's listing prints records the
    /// same way, and problems as errors).
    pub fn show(&self, format: SampleFormat) -> impl Display + '_ {
        ShownNote { note: self, format }
    }
}

struct ShownNote<'a> {
    note: &'a Note,
    format: SampleFormat,
}

impl Display for ShownNote<'_> {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        match self.note {
            Note::Record { channel, record } => self.format.record(channel, record).fmt(f),
            Note::Problem {
                channel,
                offset,
                problem,
            } => write!(
                f,
                "[{channel}:{offset:016x} sideband {}: {}]",
                if problem.is_error() {
                    "error"
                } else {
                    "warning"
                },
                problem.message()
            ),
            Note::Switch { pid } => write!(f, "[context: pid-{pid:x}]"),
        }
    }
}
