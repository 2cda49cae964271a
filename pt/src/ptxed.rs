//! ptxed's spelling of a flow (`ptxed --no-inst`), so weft's flows can be
//! compared with libipt's line by line, and read by those who know ptxed.

use std::fmt::{self, Display, Formatter};

use crate::flow::{Event, Step};
use crate::packet::{c_state, wake_name};
use crate::sideband::{Note, SampleFormat};

/// A step as ptxed prints it; `event_ips` as `ptxed --event:ip`, which adds
/// the IP libipt gives an event (where the trace did not suppress it),
/// `times` as `--event:time`, `sideband` as its `--sb:*` options.
pub struct Ptxed<'a> {
    pub step: &'a Step,
    pub event_ips: bool,
    pub times: bool,
    pub sideband: SampleFormat,
}

impl Step {
    /// This step as `ptxed --event:ip` prints it when `event_ips`.
    pub fn ptxed(&self, event_ips: bool) -> Ptxed<'_> {
        Ptxed {
            step: self,
            event_ips,
            times: false,
            sideband: SampleFormat::default(),
        }
    }
}

impl Step {
    /// Whether ptxed prints this step: errors always, sideband as `sideband`
    /// asks (its errors always), everything else unless `quiet`.
    pub fn shown_by_ptxed(&self, sideband: SampleFormat, quiet: bool) -> bool {
        match self {
            Step::Event(Event::Error { .. }, _) => true,
            Step::Sideband(note @ Note::Problem { .. }) => sideband.shows(note),
            Step::Sideband(note) => sideband.shows(note) && !quiet,
            _ => !quiet,
        }
    }
}

impl Ptxed<'_> {
    /// Events with their time (`ptxed --event:time`).
    #[must_use]
    pub fn with_times(mut self, times: bool) -> Self {
        self.times = times;
        self
    }

    /// Sideband records as `format` shows them (`ptxed --sb:*`).
    #[must_use]
    pub fn with_sideband(mut self, format: SampleFormat) -> Self {
        self.sideband = format;
        self
    }
}

impl Display for Ptxed<'_> {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        match self.step {
            Step::Insn {
                ip,
                speculative: false,
                ..
            } => write!(f, "{ip:016x}"),
            Step::Insn {
                ip,
                speculative: true,
                ..
            } => write!(f, "? {ip:016x}"),
            Step::Event(event, time) => {
                f.write_str("[")?;
                if let Some(time) = time.filter(|_| self.times) {
                    write!(f, "{time:016x}  ")?;
                }
                write_event(f, event, self.event_ips)?;
                f.write_str("]")
            }
            Step::Sideband(note) => note.show(self.sideband).fmt(f),
        }
    }
}

impl Display for Step {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        self.ptxed(false).fmt(f)
    }
}

impl Display for Event {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        write_event(f, self, false)
    }
}

fn write_event(f: &mut Formatter<'_>, event: &Event, ips: bool) -> fmt::Result {
    write_text(f, event)?;
    if ips {
        for (name, ip) in event_ips(event) {
            if let Some(ip) = ip {
                write!(f, ", {name}: {ip:016x}")?;
            }
        }
    }
    match *event {
        Event::Trig { icnt, .. } if icnt > 0 => write!(f, ", icnt: {icnt}"),
        _ => Ok(()),
    }
}

/// The IPs `ptxed --event:ip` adds to an event, by name, in its order.
fn event_ips(event: &Event) -> [(&'static str, Option<u64>); 2] {
    let none = ("", None);
    match *event {
        Event::Enabled { ip, .. } => [("ip", Some(ip)), none],
        Event::Disabled { at, ip } => [("at", at), ("ip", ip)],
        Event::Interrupt { from, to } => [("from", Some(from)), ("to", Some(to))],
        Event::Overflow { ip }
        | Event::Paging { ip, .. }
        | Event::Vmcs { ip, .. }
        | Event::ExecMode { ip, .. }
        | Event::Iflags { ip, .. }
        | Event::TxBegin { ip }
        | Event::TxCommit { ip }
        | Event::TxAbort { ip }
        | Event::Exstop { ip }
        | Event::Mwait { ip, .. }
        | Event::Ptwrite { ip, .. }
        | Event::Control { ip, .. }
        | Event::Trig { ip, .. }
        | Event::Tick { ip } => [("ip", ip), none],
        Event::Stopped
        | Event::Pwre { .. }
        | Event::Pwrx { .. }
        | Event::Cbr { .. }
        | Event::Mnt { .. }
        | Event::EndOfTrace
        | Event::Error { .. } => [none, none],
    }
}

/// The event without its IPs.
fn write_text(f: &mut Formatter<'_>, event: &Event) -> fmt::Result {
    match *event {
        Event::Enabled { resumed, .. } => f.write_str(if resumed { "resumed" } else { "enabled" }),
        Event::Disabled { .. } => f.write_str("disabled"),
        Event::Overflow { .. } => f.write_str("overflow"),
        Event::Interrupt { .. } => f.write_str("interrupt"),
        Event::Paging { cr3, nr, .. } => {
            write!(f, "paging, cr3: {cr3:016x}{}", if nr { ", nr" } else { "" })
        }
        Event::Vmcs { base, .. } => write!(f, "vmcs, base: {base:016x}"),
        Event::ExecMode { bits, .. } => write!(f, "exec mode: {bits}-bit"),
        Event::Iflags { enabled, .. } => {
            write!(
                f,
                "interrupts {}",
                if enabled { "enabled" } else { "disabled" }
            )
        }
        Event::TxBegin { .. } => f.write_str("begin transaction"),
        Event::TxCommit { .. } => f.write_str("committed"),
        Event::TxAbort { .. } => f.write_str("aborted"),
        Event::Stopped => f.write_str("stopped"),
        Event::Exstop { .. } => f.write_str("exstop"),
        Event::Mwait { hints, ext, .. } => write!(f, "mwait {hints:x} {ext:x}"),
        Event::Pwre {
            state,
            sub_state,
            hw,
        } => write!(
            f,
            "pwre c{}.{}{}",
            c_state(state),
            c_state(sub_state),
            if hw { " hw" } else { "" }
        ),
        Event::Pwrx {
            last,
            deepest,
            wake,
        } => write!(
            f,
            "pwrx {}: c{} (c{})",
            wake_name(wake),
            c_state(last),
            c_state(deepest)
        ),
        Event::Ptwrite { payload, .. } => write!(f, "ptwrite: {payload:x}"),
        Event::Control { ref event, .. } => write!(f, "{event}"),
        Event::Trig { id, mult, .. } => {
            write!(f, "trig {id:02x}{}", if mult { ", mult" } else { "" })
        }
        Event::Cbr { ratio } => write!(f, "cbr: {ratio:x}"),
        Event::Mnt { payload } => write!(f, "mnt: {payload:x}"),
        Event::EndOfTrace => f.write_str("end of trace"),
        Event::Tick { .. } => f.write_str("tick"),
        Event::Error {
            offset,
            ip,
            message,
            resync,
        } => {
            let what = if resync { "resync error" } else { "error" };
            write!(f, "{offset:x}, {ip:x}: {what}: {message}")
        }
    }
}
