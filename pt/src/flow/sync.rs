//! Finding the trace: the PSB+ header that says where the code is and in
//! which mode, and after an error the next place the trace says so again
//! (libipt's `pt_blk_resync`), reported as an error event.

use super::{Event, Flow, Mode, Order, Step};
use crate::packet::{IpKind, Packet};
use crate::query::{Lost, is_time};
use crate::sideband::Position;

impl Flow<'_> {
    pub(super) fn report(
        &mut self,
        Lost { offset, message }: Lost,
        resync: bool,
        out: &mut dyn FnMut(Step),
    ) {
        self.event(
            out,
            Event::Error {
                offset,
                ip: if self.walked { self.ip } else { 0 },
                message,
                resync,
            },
        );
    }

    /// After an error, find the next place the trace says where the code is,
    /// as libipt's `pt_blk_resync` does: the packets between (TNTs, standalone
    /// events) are passed over. Returns false at the end of the trace.
    pub(super) fn resync(&mut self, out: &mut dyn FnMut(Step)) -> Result<bool, Lost> {
        self.query.drop_tnt();
        self.at_fup = None;
        self.after_insn = None;
        self.after_step = None;
        if let Some(psb) = self.header.take() {
            // The error was inside a PSB+: start it over.
            self.query.sync_at(psb);
            self.status(psb, out)?;
            return Ok(true);
        }
        if self.resynced_at == Some(self.query.position()) {
            // The walk failed again where the last resync left it, without
            // reading on: pass that packet, so every resync makes progress.
            self.query.take()?;
        }
        let start = self.query.position();
        loop {
            let Some((offset, packet)) = self.query.peek()? else {
                return Ok(false);
            };
            if let Some(found) = self.resync_at(offset, packet, out)? {
                // Where it found its place at the packet it started from,
                // the walk must read on from there.
                self.resynced_at = (self.query.position() == start).then_some(start);
                return Ok(found);
            }
        }
    }

    /// One packet of [`Flow::resync`]'s search: `Some` where the walk can go
    /// on from it, `None` where the search goes on past it.
    pub(super) fn resync_at(
        &mut self,
        offset: usize,
        packet: Packet,
        out: &mut dyn FnMut(Step),
    ) -> Result<Option<bool>, Lost> {
        let fup_bound = matches!(
            packet,
            Packet::ModeTsx { .. }
                | Packet::ModeExec { .. }
                | Packet::Ptw { ip: true, .. }
                | Packet::Exstop { ip: true }
                | Packet::Cfe { ip: true, .. }
        );
        // A FUP, and the events bound to one, name an IP: the walk starts
        // there and meets them (an interrupt, a disable, a TSX event).
        if let Some(ip) = fup_bound.then(|| self.query.fup_after_bound()).flatten() {
            self.ip = ip;
            self.enabled = true;
            return Ok(Some(true));
        }
        match packet {
            // A TIP says where the code went: go on from there.
            Packet::Ip {
                kind: IpKind::Tip,
                ip,
            } => {
                self.query.consume();
                self.ip = self.query.resolve(offset, ip)?;
                self.enabled = true;
                self.flush_transfer(out, Order::Stream, Some(self.ip));
            }
            Packet::Ip {
                kind: IpKind::Fup,
                ip,
            } => {
                self.ip = self.query.resolve_peek(offset, ip)?;
                self.enabled = true;
            }
            // Tracing is off from here (ptxed says "[disabled]"), or comes
            // on at a TIP.PGE the walk then meets.
            Packet::Ip {
                kind: IpKind::TipPgd,
                ip,
            } => {
                self.query.consume();
                self.query.resolve(offset, ip).ok();
                self.enabled = false;
                self.event(out, Event::Disabled { at: None, ip: None });
            }
            Packet::Ip {
                kind: IpKind::TipPge,
                ..
            } => {
                self.enabled = false;
                self.event(out, Event::Disabled { at: None, ip: None });
            }
            // An overflow says itself where tracing resumes.
            Packet::Ovf => {}
            // What waits for a transfer waits on.
            Packet::Pip { .. } | Packet::Vmcs(_) | Packet::ModeExec { .. } => {
                self.absorb_bound();
                return Ok(None);
            }
            Packet::Psb => {
                self.query.consume();
                self.status(offset, out)?;
            }
            // A PTW without IP binds to no place the search can find: it is
            // shown, and the search goes on.
            Packet::Ptw { payload, .. } => {
                self.query.consume();
                self.event(out, Event::Ptwrite { payload, ip: None });
                return Ok(None);
            }
            _ => {
                // Branches lost with the error, and events without a place.
                self.query.consume();
                return Ok(None);
            }
        }
        Ok(Some(true))
    }

    /// `psb`: where the PSB is, to start over there when resyncing after an
    /// error inside the header.
    pub(super) fn status(&mut self, psb: usize, out: &mut dyn FnMut(Step)) -> Result<(), Lost> {
        self.header = Some(psb);
        self.read_header(out)?;
        self.header = None;
        Ok(())
    }

    pub(super) fn read_header(&mut self, out: &mut dyn FnMut(Step)) -> Result<(), Lost> {
        let mut fup = None;
        self.query.drop_tnt();
        self.stack.clear();
        loop {
            let Some((offset, packet)) = self.query.read()? else {
                return Ok(());
            };
            match packet {
                Packet::PsbEnd => break,
                Packet::Ip {
                    kind: IpKind::Fup,
                    ip,
                } => {
                    fup = self.query.resolve_if_given(ip);
                }
                Packet::ModeExec { .. } => self.header_mode(offset, Mode::of(packet))?,
                Packet::ModeTsx { intx, .. } => self.in_tx = intx,
                // PIP, VMCS and CBR here are state, not changes.
                Packet::Psb | Packet::Pip { .. } | Packet::Vmcs(_) | Packet::Cbr(_) => {}
                _ if is_time(packet) => {}
                Packet::Mnt(payload) => self.event(out, Event::Mnt { payload }),
                Packet::Ovf => {
                    // An overflow inside PSB+: the header's state is stale.
                    self.query.put_back((offset, packet));
                    return Ok(());
                }
                _ => return Err(Lost::context(offset)),
            }
        }
        let was_enabled = self.enabled;
        self.enabled = fup.is_some();
        self.ip = fup.unwrap_or(0);
        self.since_ip = 0;
        if self.enabled && !self.switch_code() {
            self.enabled = false;
        }
        // The PSB+ tells the sideband where the trace is (libipt's status
        // update events, which ptxed does not print).
        let position = if self.enabled {
            Position::Ip(self.ip)
        } else {
            Position::Unknown
        };
        self.tell_sideband(self.query.time_now(), position, out);
        if self.errata.bdm70 && !was_enabled && self.enabled {
            // The FUP was the erratum's if a TIP.PGE comes next.
            if let Some((
                _,
                Packet::Ip {
                    kind: IpKind::TipPge,
                    ..
                },
            )) = self.peek_transfer()?
            {
                self.enabled = false;
            }
        }
        Ok(())
    }

    /// A MODE.Exec in a PSB+ states the mode; one that contradicts the mode
    /// the walk knows is an error (libipt's "bad status update").
    pub(super) fn header_mode(&mut self, offset: usize, mode: Mode) -> Result<(), Lost> {
        if let Some(known) = self.known_mode
            && (known.bits != mode.bits || (self.iflags && known.interrupts != mode.interrupts))
        {
            return Err(Lost {
                offset: offset as u64,
                message: "bad status update",
            });
        }
        self.bits = mode.bits;
        self.known_mode = Some(mode);
        Ok(())
    }
}
