//! Where the walk reaches what held events bind to (a transfer, a FUP, a
//! packet): it takes them from the query layer's [`Binding`] and shows
//! them in libipt's order; and PTWRITE, bound to an instruction.
//!
//! [`Binding`]: crate::binding::Binding

use super::{Event, Flow, Step};
use crate::binding::{Bind, Order};
use crate::insn::{Insn, Kind};
use crate::packet::{IpKind, Packet};
use crate::query::Lost;

impl Flow<'_> {
    /// Events that wait for a transfer, in the order ptxed shows them.
    /// `ip`: where the transfer goes, unless its packet suppressed it.
    pub(super) fn flush_transfer(
        &mut self,
        out: &mut dyn FnMut(Step),
        order: Order,
        ip: Option<u64>,
    ) {
        // What the branching instruction caused (an IRET's event) first.
        if let Some((event, at)) = self.after_insn.take() {
            self.event(out, Event::Control { event, ip: at });
        }
        self.flush_paging(out, order, ip);
        self.flush_mode(out, ip);
    }

    /// The PIP and VMCS waiting for a transfer: in the trace's order when
    /// they stand alone (a VM entry's), VMCS first inside an asynchronous
    /// branch (libipt: "when getting both PIP and VMCS between the FUP and
    /// TIP of an asynchronous branch, we order VMCS before PIP").
    /// Inside an asynchronous branch they take effect at its target `ip`.
    pub(super) fn flush_paging(
        &mut self,
        out: &mut dyn FnMut(Step),
        order: Order,
        ip: Option<u64>,
    ) {
        let events: Vec<Event> = self.query.binding.paging(order, ip).collect();
        for event in events {
            self.event(out, event);
        }
    }

    /// The MODE.Exec waiting for a transfer, which goes to `ip`.
    pub(super) fn flush_mode(&mut self, out: &mut dyn FnMut(Step), ip: Option<u64>) {
        let Some(mode) = self.query.binding.take_mode() else {
            return;
        };
        let known = self.known_mode.replace(mode);
        self.bits = mode.bits;
        if known.is_none_or(|k| k.bits != mode.bits) {
            self.event(
                out,
                Event::ExecMode {
                    bits: mode.bits,
                    ip,
                },
            );
        }
        if self.iflags && known.is_none_or(|k| k.interrupts != mode.interrupts) {
            self.event(
                out,
                Event::Iflags {
                    enabled: mode.interrupts,
                    ip,
                },
            );
        }
    }

    /// Hands a peeked PIP, VMCS or MODE.Exec to the query layer to hold
    /// for its transfer.
    pub(super) fn absorb_bound(&mut self) {
        if let Some((_, packet)) = self.query.peeked()
            && self.query.binding.hold(packet)
        {
            self.query.consume();
        }
    }

    /// Shows every waiting power event.
    pub(super) fn flush_power(&mut self, out: &mut dyn FnMut(Step)) {
        for event in self.query.binding.take_power() {
            self.event(out, event);
        }
    }

    /// Shows the waiting power events bound to `bind`, oldest first; the
    /// others wait on.
    /// Those bound to a FUP happened at its `ip`.
    pub(super) fn release(&mut self, bind: Bind, ip: Option<u64>, out: &mut dyn FnMut(Step)) {
        for event in self.query.binding.release(bind, ip) {
            self.event(out, event);
        }
    }

    /// A power packet, held or shown as its binding says
    /// ([`crate::binding::Binding::power`]).
    pub(super) fn power_packet(&mut self, packet: Packet, out: &mut dyn FnMut(Step)) {
        for event in self.query.binding.power(packet) {
            self.event(out, event);
        }
    }

    /// Whether the next FUP names the current IP. Read ahead only when a
    /// packet that may bind to a FUP is next, not at every instruction.
    pub(super) fn fup_here(&self) -> bool {
        self.query.lookahead_fup() == Some(self.ip)
    }

    /// The IP of the next FUP, read ahead past the peeked packet and any
    /// that wait for it, without consuming anything.
    /// BDM64: whether the abort's FUP, after a traced branch, names an
    /// address the walk cannot reach from here without branching (so the
    /// erratum hit and the branch went there instead).
    pub(super) fn bdm64_fup(&mut self) -> bool {
        let Some(target) = self.query.lookahead_fup() else {
            return false;
        };
        if !self.traced_branch || target == self.ip {
            return false;
        }
        let mut ip = self.ip;
        for _ in 0..0x100 {
            match self.insn(ip) {
                Ok(Insn {
                    kind: Kind::Next,
                    len,
                    ..
                }) => ip += u64::from(len),
                _ => return true,
            }
            if ip == target {
                return false;
            }
        }
        false
    }

    /// Whether the packet after the peeked one, past timing packets, is a
    /// FUP naming the current IP.
    pub(super) fn fup_next_names_ip(&self) -> bool {
        self.query.fup_after_bound() == Some(self.ip)
    }

    /// A PTW binds to a PTWRITE instruction: the one its FUP names
    /// (`with_ip`), or without IP the next one to run. Its event follows
    /// that instruction (libipt: "we move beyond the PTWRITE instruction";
    /// tests `tip_pge-ptw-tip_pgd`, `tip_pge-ptw-fup-tip_pgd`). Returns
    /// false: the walk runs that instruction next, or walks on to it.
    pub(super) fn bind_ptwrite(&mut self, with_ip: bool, payload: u64) -> Result<bool, Lost> {
        let here = if with_ip {
            self.fup_here()
        } else {
            self.insn(self.ip)?.ptwrite
        };
        if here {
            self.query.consume();
            if with_ip {
                self.take_fup()?;
            }
            let ip = with_ip.then_some(self.ip);
            self.after_step = Some(Event::Ptwrite { payload, ip });
        }
        Ok(false)
    }

    pub(super) fn take_fup(&mut self) -> Result<(), Lost> {
        match self.query.take()? {
            Some((
                offset,
                Packet::Ip {
                    kind: IpKind::Fup,
                    ip,
                },
            )) => {
                self.since_ip = 0;
                self.query.resolve(offset, ip).map(|_| ())
            }
            other => Err(Lost::context(
                other.map_or(self.query.offset() as usize, |(o, _)| o),
            )),
        }
    }
}
