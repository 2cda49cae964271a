//! Events bound to something later in the trace, held until it comes, as
//! libipt's query decoder holds them in its event queue: PIP, VMCS and
//! MODE.Exec wait for the transfer (or FUP) they belong to, MWAIT for its
//! EXSTOP, PWRE for its PWRX, an EXSTOP with IP (and its MWAIT) for the
//! next FUP. The walk (`flow/`) asks for them where it reaches what they
//! bind to, and stamps and shows them.

use crate::event::{Event, now_event};
use crate::packet::Packet;

/// What a MODE.Exec says: the code's width and the interrupt flag.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Mode {
    pub bits: u32,
    pub interrupts: bool,
}

impl Mode {
    pub(crate) fn of(packet: Packet) -> Mode {
        let Packet::ModeExec {
            cs_l,
            cs_d,
            interrupts,
        } = packet
        else {
            unreachable!("a MODE.Exec")
        };
        // The walk reads code with both bits set as 64-bit, as before
        // MODE.Exec said otherwise.
        let bits = crate::packet::exec_bits(cs_l, cs_d).unwrap_or(64);
        Mode { bits, interrupts }
    }
}

/// What a waiting power event binds to.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Bind {
    Exstop,
    Pwrx,
    Fup,
}

/// How the PIP and VMCS waiting for a transfer are shown.
#[derive(Clone, Copy)]
pub(crate) enum Order {
    /// As the trace sent them.
    Stream,
    /// Inside an asynchronous branch: VMCS first.
    Async,
}

/// The events waiting for what they bind to.
#[derive(Default)]
pub(crate) struct Binding {
    vmcs: Option<u64>,
    paging: Option<(u64, bool)>,
    /// Whether the waiting PIP came before the waiting VMCS.
    paging_first: bool,
    /// A MODE.Exec waiting for the transfer (or FUP) it binds to.
    mode: Option<Mode>,
    /// Power events waiting for the packet they bind to, oldest first.
    power: Vec<(Event, Bind)>,
}

impl Binding {
    /// Holds a PIP, VMCS or MODE.Exec for its transfer; false (and holds
    /// nothing) for any other packet.
    pub(crate) fn hold(&mut self, packet: Packet) -> bool {
        match packet {
            Packet::Pip { cr3, nr } => {
                self.paging_first = self.vmcs.is_none();
                self.paging = Some((cr3, nr));
            }
            Packet::Vmcs(base) => {
                self.paging_first = self.paging.is_some();
                self.vmcs = Some(base);
            }
            Packet::ModeExec { .. } => self.mode = Some(Mode::of(packet)),
            _ => return false,
        }
        true
    }

    /// Holds a MODE.Exec read where the walk cannot take it at once.
    pub(crate) fn hold_mode(&mut self, mode: Mode) {
        self.mode = Some(mode);
    }

    /// The PIP and VMCS waiting for a transfer: in the trace's order when
    /// they stand alone (a VM entry's), VMCS first inside an asynchronous
    /// branch (libipt: "when getting both PIP and VMCS between the FUP and
    /// TIP of an asynchronous branch, we order VMCS before PIP"). Inside
    /// an asynchronous branch they take effect at its target `ip`.
    pub(crate) fn paging(&mut self, order: Order, ip: Option<u64>) -> impl Iterator<Item = Event> {
        let ip = match order {
            Order::Async => ip,
            Order::Stream => None,
        };
        let vmcs = self.vmcs.take().map(|base| Event::Vmcs { base, ip });
        let paging = (self.paging.take()).map(|(cr3, nr)| Event::Paging { cr3, nr, ip });
        let events = match order {
            Order::Stream if self.paging_first => [paging, vmcs],
            _ => [vmcs, paging],
        };
        events.into_iter().flatten()
    }

    /// The MODE.Exec waiting for a transfer.
    pub(crate) fn take_mode(&mut self) -> Option<Mode> {
        self.mode.take()
    }

    /// Every waiting power event, oldest first.
    pub(crate) fn take_power(&mut self) -> Vec<Event> {
        std::mem::take(&mut self.power)
            .into_iter()
            .map(|(event, _)| event)
            .collect()
    }

    /// The waiting power events bound to `bind`, oldest first; the others
    /// wait on. Those bound to a FUP happened at its `ip`.
    pub(crate) fn release(&mut self, bind: Bind, ip: Option<u64>) -> Vec<Event> {
        let (now, later) = std::mem::take(&mut self.power)
            .into_iter()
            .partition(|(_, b)| *b == bind);
        self.power = later;
        now.into_iter()
            .map(|(event, _)| match event {
                Event::Mwait { hints, ext, .. } => Event::Mwait { hints, ext, ip },
                Event::Exstop { .. } => Event::Exstop { ip },
                other => other,
            })
            .collect()
    }

    /// A power packet: MWAIT waits for its EXSTOP and PWRE for its PWRX
    /// (MWAIT and PWRE announce the EXSTOP and PWRX that follow them);
    /// EXSTOP without IP and PWRX show their own events after those they
    /// release. An EXSTOP with IP binds, with its MWAIT, to the next FUP.
    /// The order is libipt's event queue's (tests
    /// `mwait-pwre-exstop_ip-ovf`, `tip_pgd-mwait-pwre-exstop-pwrx-tip_pge`).
    /// Returns the events shown now.
    pub(crate) fn power(&mut self, packet: Packet) -> Vec<Event> {
        let event = now_event(packet).expect("power packets are events");
        match packet {
            Packet::Mwait { .. } => self.power.push((event, Bind::Exstop)),
            Packet::Pwre { .. } => self.power.push((event, Bind::Pwrx)),
            Packet::Exstop { ip: true } => {
                // Its MWAIT leaves the queue and joins it again, behind
                // what waits for other packets.
                let (mwait, rest): (Vec<_>, Vec<_>) = std::mem::take(&mut self.power)
                    .into_iter()
                    .partition(|(_, b)| *b == Bind::Exstop);
                self.power = rest;
                self.power
                    .extend(mwait.into_iter().map(|(e, _)| (e, Bind::Fup)));
                self.power.push((event, Bind::Fup));
            }
            Packet::Exstop { ip: false } => {
                let mut now = self.release(Bind::Exstop, None);
                now.push(event);
                return now;
            }
            _ => {
                let mut now = self.release(Bind::Pwrx, None);
                now.push(event);
                return now;
            }
        }
        Vec::new()
    }
}
