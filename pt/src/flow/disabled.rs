//! While tracing is off, and where a FUP names the instruction an
//! asynchronous event hits: the packets that turn tracing back on, the
//! trigger and control packets, interrupts, and overflows.

use super::{Event, Flow, Step, tsx_event};
use crate::binding::{Bind, Mode, Order};
use crate::control::{self, Place};
use crate::event::now_event;
use crate::packet::{IpKind, Packet};
use crate::query::Lost;

impl Flow<'_> {
    /// Tracing is off: act on packets until it comes back on. Returns false
    /// at the end of the trace.
    pub(super) fn while_disabled(&mut self, out: &mut dyn FnMut(Step)) -> Result<bool, Lost> {
        let Some((offset, packet)) = self.query.take()? else {
            return Ok(false);
        };
        self.flush_paging(out, Order::Stream, None);
        match packet {
            Packet::Ip {
                kind: IpKind::TipPge,
                ip,
            } => {
                let ip = self.query.resolve(offset, ip)?;
                if !self.switch_code() {
                    return Ok(true);
                }
                self.event(
                    out,
                    Event::Enabled {
                        ip,
                        resumed: self.stopped_at == Some(ip),
                    },
                );
                self.flush_mode(out, Some(ip));
                self.enabled = true;
                self.ip = ip;
                self.since_ip = 0;
            }
            Packet::Ovf => {
                // The overflow publishes what waits, oldest first.
                self.flush_power(out);
                self.overflow(out)?;
            }
            Packet::Psb => self.status(offset, out)?,
            Packet::Pip { cr3, nr } => self.event(out, Event::Paging { cr3, nr, ip: None }),
            Packet::Vmcs(base) => self.event(out, Event::Vmcs { base, ip: None }),
            Packet::ModeExec { .. } => {
                self.query.binding.hold_mode(Mode::of(packet));
                // With a FUP (event tracing) it happened there.
                if let Some(ip) = self.fup_while_disabled()? {
                    self.flush_mode(out, Some(ip));
                }
            }
            Packet::Ip {
                kind: IpKind::Fup,
                ip,
            } => {
                // A FUP while disabled only updates the last IP.
                self.query.resolve(offset, ip)?;
            }
            Packet::Ip { ip, .. } if self.skipping => {
                // A suppressed IP (a TIP.PGD leaving) changes nothing.
                self.query.resolve_if_given(ip);
            }
            Packet::Tnt { .. } if self.skipping => {}
            Packet::Tnt { .. } | Packet::Ip { .. } => return Err(Lost::context(offset)),
            Packet::Cfe { .. } | Packet::Evd { .. } => {
                // An event while off (RSM, a VM entry) does not make the next
                // enable at the same place any less of a resume.
                self.control(offset, packet, out)?;
                return Ok(true);
            }
            Packet::Exstop { ip: true }
            | Packet::Ptw { ip: true, .. }
            | Packet::Trig { ip: true, .. } => {
                self.named_while_disabled(packet, out)?;
                return Ok(true);
            }
            Packet::Mwait { .. }
            | Packet::Pwre { .. }
            | Packet::Exstop { .. }
            | Packet::Pwrx { .. } => {
                self.power_packet(packet, out);
                return Ok(true);
            }
            Packet::ModeTsx { intx, abort } => {
                // While tracing is off, MODE.TSX binds to the TIP.PGE that
                // follows: tracing resumes in that state, which ptxed shows
                // first (libipt's test `tip_pgd-tsx`).
                self.in_tx = intx;
                self.event(out, tsx_event(intx, abort, None));
                return Ok(true);
            }
            _ => {
                if let Some(event) = now_event(packet) {
                    self.flush_power(out);
                    self.event(out, event);
                }
                return Ok(true);
            }
        }
        self.flush_power(out);
        self.stopped_at = None;
        Ok(true)
    }

    /// A TRIG while tracing: one that names an IP fires where its FUP
    /// does; one that counts instructions, once they have run (ptxed counts
    /// them down to 0, and prints the count only while some remain). Either
    /// way its IP is where the walk is then. Returns whether it fired.
    pub(super) fn trig(&mut self, packet: Packet, out: &mut dyn FnMut(Step)) -> Result<bool, Lost> {
        let Packet::Trig {
            id,
            mult,
            icnt,
            ip: named,
        } = packet
        else {
            unreachable!("a TRIG")
        };
        let waits = if named {
            !self.fup_here()
        } else {
            icnt.is_some_and(|n| u32::from(n) > self.since_ip)
        };
        if waits {
            return Ok(false);
        }
        self.query.consume();
        if named {
            self.take_fup()?;
        }
        let ip = (named || icnt.is_some()).then_some(self.ip);
        if ip.is_some() {
            // Like any event with an IP, it is the next TRIG's anchor
            // (libipt's `pt_blk_find_trig_anchor`).
            self.since_ip = 0;
        }
        self.event(
            out,
            Event::Trig {
                id,
                mult,
                icnt: 0,
                ip,
            },
        );
        Ok(true)
    }

    /// While tracing is off, the FUP that follows a packet naming an IP
    /// (EXSTOP, PTW, TRIG) gives it (libipt's tests
    /// `mwait-pwre-exstop_ip-fup-ovf`, `ptw-fup`, `trig-fup`). Without one,
    /// an EXSTOP's events wait (`mwait-pwre-exstop_ip-ovf`).
    pub(super) fn named_while_disabled(
        &mut self,
        packet: Packet,
        out: &mut dyn FnMut(Step),
    ) -> Result<(), Lost> {
        if let Packet::Exstop { .. } = packet {
            self.power_packet(packet, out);
            if let Some(ip) = self.fup_while_disabled()? {
                self.release(Bind::Fup, Some(ip), out);
            }
            return Ok(());
        }
        let ip = self.fup_while_disabled()?;
        let event = match packet {
            Packet::Ptw { payload, .. } => Event::Ptwrite { payload, ip },
            Packet::Trig { id, mult, .. } => Event::Trig {
                id,
                mult,
                icnt: 0,
                ip,
            },
            _ => unreachable!("a packet naming an IP"),
        };
        self.flush_power(out);
        self.event(out, event);
        Ok(())
    }

    /// The IP of the FUP that comes next while tracing is off (taking it),
    /// which a packet naming an IP gets it from.
    pub(super) fn fup_while_disabled(&mut self) -> Result<Option<u64>, Lost> {
        let Some((
            offset,
            Packet::Ip {
                kind: IpKind::Fup,
                ip,
            },
        )) = self.query.peek()?
        else {
            return Ok(None);
        };
        self.query.consume();
        self.query.resolve(offset, ip).map(Some)
    }

    /// Fire what happens at the current IP: an asynchronous event whose FUP
    /// names it, or an event that is not bound to any IP.
    pub(super) fn at_fup_or_now(&mut self, out: &mut dyn FnMut(Step)) -> Result<bool, Lost> {
        if self.query.tnt_pending() {
            return Ok(false);
        }
        let Some((offset, packet)) = self.query.peek()? else {
            return Ok(false);
        };
        match packet {
            Packet::Ovf => {
                self.query.consume();
                self.flush_power(out);
                self.overflow(out)?;
            }
            // A PSB+ while tracing names, in its FUP, the IP where it was
            // sent: the flow runs up to there before taking its status
            // (libipt's tests `psb-psb`, `psb_nofup-psb`).
            Packet::Psb if self.query.psb_fup().is_some_and(|ip| ip != self.ip) => {
                return Ok(false);
            }
            Packet::Psb => {
                self.query.consume();
                self.status(offset, out)?;
            }
            // A MODE.Exec right before a FUP (event tracing: STI, CLI,
            // POPF) binds to that FUP, not to a transfer: its change
            // happens there, and the FUP is no asynchronous branch (libipt's
            // tests `ptet-mode_exec-if`, `ptet-mode_exec-spurious`).
            Packet::ModeExec { .. } if self.fup_next_names_ip() => {
                self.absorb_bound();
                self.take_fup()?;
                self.flush_mode(out, Some(self.ip));
            }
            Packet::Pip { .. } | Packet::Vmcs(_) | Packet::ModeExec { .. } if self.fup_here() => {
                self.absorb_bound();
            }
            Packet::ModeTsx { abort: true, .. } if self.errata.bdm64 && self.bdm64_fup() => {
                // Take the branch to where the abort's FUP says; the abort
                // fires there.
                self.ip = self.query.lookahead_fup().expect("bdm64_fup found it");
            }
            Packet::ModeTsx { intx, abort } if self.fup_here() => {
                self.query.consume();
                self.take_fup()?;
                self.in_tx = intx;
                self.event(out, tsx_event(intx, abort, Some(self.ip)));
                // An abort is an asynchronous branch from its FUP; a begin or
                // a commit only names where it happened (libipt binds an
                // abort's FUP as `evb_fup`, the others' as `evb_fup_bound`;
                // test `ptxed-resync-nomap-mode_tsx-tip_pgd`).
                if abort {
                    self.async_branch(out)?;
                }
            }
            Packet::Ptw { ip, payload, .. } => return self.bind_ptwrite(ip, payload),
            Packet::Exstop { ip: true } if self.fup_here() => {
                self.query.consume();
                self.take_fup()?;
                self.power_packet(packet, out);
                self.release(Bind::Fup, Some(self.ip), out);
            }
            Packet::Mwait { .. }
            | Packet::Pwre { .. }
            | Packet::Exstop { ip: false }
            | Packet::Pwrx { .. } => {
                self.query.consume();
                self.power_packet(packet, out);
            }
            Packet::Trig { .. } => return self.trig(packet, out),
            Packet::Stop => {
                self.query.consume();
                self.flush_power(out);
                self.event(out, Event::Stopped);
            }
            Packet::Cbr(_) | Packet::Mnt(_) => {
                self.query.consume();
                self.event(out, now_event(packet).expect("an event"));
            }
            Packet::Cfe { .. } | Packet::Evd { .. } => {
                self.query.consume();
                self.control(offset, packet, out)?;
            }
            Packet::Bbp { .. } | Packet::Bip { .. } | Packet::Bep { .. } => {
                // Not decoded into events yet (docs/pt.md); skipped.
                self.query.consume();
            }
            Packet::Ip {
                kind: IpKind::Fup,
                ip,
            } => return self.fup_reached(offset, ip, out),
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// A FUP: where it names the current IP, what waits for it fires (a
    /// control-flow event) and the asynchronous branch it begins is taken.
    pub(super) fn fup_reached(
        &mut self,
        offset: usize,
        ip: crate::packet::Ip,
        out: &mut dyn FnMut(Step),
    ) -> Result<bool, Lost> {
        if self.query.resolve_peek(offset, ip)? != self.ip {
            return Ok(false);
        }
        self.query.consume();
        self.query.resolve(offset, ip)?;
        match self.at_fup.take() {
            Some((event, Place::AfterFupInsn, named)) => {
                // The instruction here caused it and takes the branch.
                self.after_insn = Some((event, named.then_some(self.ip)));
                return Ok(true);
            }
            Some((event, _, named)) => self.event(
                out,
                Event::Control {
                    event,
                    ip: named.then_some(self.ip),
                },
            ),
            None => {}
        }
        if self.errata.skd022 && self.is_vm_entry()? {
            // The erratum's FUP: the VM entry runs and its TIP.PGD
            // disables tracing as usual.
            return Ok(false);
        }
        self.async_branch(out)?;
        Ok(true)
    }

    /// An EVD (kept for its CFE) or a CFE (an event now, or one waiting
    /// for its FUP or its instruction).
    pub(super) fn control(
        &mut self,
        offset: usize,
        packet: Packet,
        out: &mut dyn FnMut(Step),
    ) -> Result<(), Lost> {
        let mismatch = |_| Lost::context(offset);
        match packet {
            Packet::Evd { kind, payload } => self.data.add(kind, payload).map_err(mismatch),
            Packet::Cfe { kind, vector, ip } => {
                let data = std::mem::take(&mut self.data);
                let Some((event, place)) =
                    control::event(kind, vector, ip, self.enabled, data).map_err(mismatch)?
                else {
                    return Ok(());
                };
                if !self.enabled {
                    // While tracing is off it stands alone; the FUP that
                    // follows one naming an IP gives it.
                    let ip = if ip { self.fup_while_disabled()? } else { None };
                    self.event(out, Event::Control { event, ip });
                    return Ok(());
                }
                match place {
                    Place::Now => self.event(out, Event::Control { event, ip: None }),
                    Place::AfterInsn => self.after_insn = Some((event, None)),
                    Place::BeforeFup | Place::AfterFupInsn => {
                        self.at_fup = Some((event, place, ip));
                    }
                }
                Ok(())
            }
            _ => Ok(()),
        }
    }

    /// After a FUP at the current IP: a TIP is an interrupt, a TIP.PGD an
    /// asynchronous disable; anything else leaves the flow where it is.
    pub(super) fn async_branch(&mut self, out: &mut dyn FnMut(Step)) -> Result<(), Lost> {
        self.since_ip = 0;
        let Some((offset, packet)) = self.peek_transfer()? else {
            return Ok(());
        };
        match packet {
            Packet::Ip {
                kind: IpKind::Tip,
                ip,
            } => {
                self.query.consume();
                let to = self.query.resolve(offset, ip)?;
                self.event(out, Event::Interrupt { from: self.ip, to });
                self.flush_transfer(out, Order::Async, Some(to));
                self.ip = to;
            }
            Packet::Ip {
                kind: IpKind::TipPgd,
                ip,
            } => {
                self.query.consume();
                let to = self.query.resolve(offset, ip).ok();
                self.disable(out, Some(self.ip), to);
                // The PIP and VMCS between the FUP and this TIP.PGD.
                self.flush_paging(out, Order::Async, to);
            }
            _ => {}
        }
        Ok(())
    }

    pub(super) fn overflow(&mut self, out: &mut dyn FnMut(Step)) -> Result<(), Lost> {
        // After an OVF, timing packets, CBR and MNT may come before the FUP
        // that says where tracing resumes (libipt's tests `ovf-mnt-fup`,
        // `ovf-timing-fup`).
        // libipt reports the overflow at that FUP, so the events that stand
        // alone come out first.
        // Without that FUP (tracing resumes at a TIP.PGE) the overflow is
        // reported at once.
        while self.query.fup_after_standalone() {
            let Some((_, packet @ (Packet::Cbr(_) | Packet::Mnt(_)))) = self.peek_transfer()?
            else {
                break;
            };
            self.query.consume();
            self.event(out, now_event(packet).expect("CBR and MNT are events"));
        }
        self.enabled = false;
        self.query.drop_tnt();
        self.stack.clear();
        self.in_tx = false;
        // libipt resets its state at an overflow: the next MODE.Exec is
        // reported even where it changes nothing.
        self.known_mode = None;
        // Tracing resumes where a FUP says, or at the next TIP.PGE. A
        // MODE.TSX before that FUP is the transaction state it resumes in.
        let mut next = self.peek_transfer()?;
        let mut tsx = None;
        if let Some((_, Packet::ModeTsx { intx, abort })) = next {
            self.query.consume();
            tsx = Some((intx, abort));
            next = self.peek_transfer()?;
        }
        // APL11: the TIP.PGD means nothing. SKD010: the FUP was dropped and
        // tracing went on, then stopped at this TIP.PGD. Either way tracing
        // is off after it (libipt syncs "after the disable").
        if (self.errata.apl11 || self.errata.skd010)
            && let Some((
                offset,
                Packet::Ip {
                    kind: IpKind::TipPgd,
                    ip,
                },
            )) = next
        {
            self.query.consume();
            self.query.resolve(offset, ip).ok();
            self.event(out, Event::Overflow { ip: None });
            return Ok(());
        }
        let resume = match next {
            Some((
                offset,
                Packet::Ip {
                    kind: IpKind::Fup,
                    ip,
                },
            )) if self.errata.apl12 && self.query.enable_follows() => {
                // The erratum's FUP: tracing resumes at the TIP.PGE.
                self.query.consume();
                self.query.resolve(offset, ip)?;
                false
            }
            Some((
                _,
                Packet::Ip {
                    kind: IpKind::Fup, ..
                },
            )) => true,
            Some((
                _,
                Packet::Ip {
                    kind: IpKind::Tip, ..
                },
            )) => self.errata.skd010,
            _ => false,
        };
        let Some((offset, Packet::Ip { ip, .. })) = next.filter(|_| resume) else {
            self.event(out, Event::Overflow { ip: None });
            return Ok(());
        };
        // The overflow is reported where tracing resumes.
        self.query.consume();
        self.ip = self.query.resolve(offset, ip)?;
        self.event(out, Event::Overflow { ip: Some(self.ip) });
        self.enabled = true;
        self.since_ip = 0;
        self.flush_mode(out, Some(self.ip));
        if let Some((intx, abort)) = tsx {
            self.in_tx = intx;
            self.event(out, tsx_event(intx, abort, Some(self.ip)));
        }
        Ok(())
    }
}
