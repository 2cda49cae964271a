//! The query layer under the instruction walk, as libipt's
//! `pt_query_decoder` is under its instruction and block decoders: it reads
//! the packets, holds the one the walk acts on next (peeked, not yet
//! consumed), keeps the last IP that compressed IPs are relative to and the
//! time the timing packets tell, and answers the walk's questions about
//! what comes next ("is a FUP naming this IP ahead?", "does tracing start
//! again?") by reading ahead on a copy, never consuming. It holds the
//! branch outcomes of the last TNT packet not yet taken, as libipt's
//! query decoder holds its TNT cache, and the events bound to a later
//! transfer, FUP or packet (`binding.rs`), as it holds its event queue.
//! It knows nothing of instructions;
//! `flow/` walks the code and asks.

use crate::Error;
use crate::binding::Binding;
use crate::packet::{Ip, IpKind, Packet, Packets};
use crate::time::Clock;

/// The packet stream as the walk consumes it.
pub(crate) struct Query<'a> {
    packets: Packets<'a>,
    /// The next packet the walk must act on, read but not acted on.
    peeked: Option<(usize, Packet)>,
    /// The IP compressed IPs are relative to.
    last_ip: u64,
    clock: Clock,
    /// Timing packets read ahead, not yet reached by the walk.
    held_time: Vec<Packet>,
    /// The outcomes of the TNT packet being taken, the next one in bit
    /// `tnt_left - 1`.
    tnt: u64,
    tnt_left: u8,
    /// Events waiting for what they bind to (a transfer, a FUP, a packet).
    pub(crate) binding: Binding,
}

impl<'a> Query<'a> {
    pub(crate) fn new(packets: Packets<'a>, clock: Clock) -> Self {
        Query {
            packets,
            peeked: None,
            last_ip: 0,
            clock,
            held_time: Vec::new(),
            tnt: 0,
            tnt_left: 0,
            binding: Binding::default(),
        }
    }

    /// Whether outcomes of the last TNT packet are left to take.
    pub(crate) fn tnt_pending(&self) -> bool {
        self.tnt_left > 0
    }

    /// Holds a TNT packet's `count` outcomes to take; the timing packets
    /// before it tell the time of its branches.
    pub(crate) fn cache_tnt(&mut self, bits: u64, count: u8) {
        self.tnt = bits;
        self.tnt_left = count;
        self.catch_up_time();
    }

    /// The next branch outcome held, if any (a TNT.64 with only its stop
    /// bit holds none).
    pub(crate) fn take_bit(&mut self) -> Option<bool> {
        self.tnt_left = self.tnt_left.checked_sub(1)?;
        Some(self.tnt >> self.tnt_left & 1 == 1)
    }

    /// Forgets the outcomes held (a sync, tracing disabled).
    pub(crate) fn drop_tnt(&mut self) {
        self.tnt_left = 0;
    }

    /// The packet the walk acts on next, if one has been read.
    pub(crate) fn peeked(&self) -> Option<(usize, Packet)> {
        self.peeked
    }

    /// The walk has acted on the peeked packet.
    pub(crate) fn consume(&mut self) {
        self.peeked = None;
    }

    /// Hand a packet back: the walk acts on it next.
    pub(crate) fn put_back(&mut self, item: (usize, Packet)) {
        self.peeked = Some(item);
    }

    /// Go to the next PSB; false at the end of the trace.
    pub(crate) fn sync_forward(&mut self) -> bool {
        self.peeked = None;
        self.packets.sync_forward()
    }

    /// Go back to the PSB at `psb`, to read its PSB+ again.
    pub(crate) fn sync_at(&mut self, psb: usize) {
        self.peeked = None;
        self.packets.sync_at(psb);
    }

    /// Where the next packet is read from.
    pub(crate) fn read_offset(&self) -> usize {
        self.packets.offset()
    }

    pub(crate) fn set_clock(&mut self, clock: Clock) {
        self.clock = clock;
    }

    /// The time in TSC ticks as far as the walk has got, once a TSC came.
    pub(crate) fn tsc(&self) -> Option<u64> {
        self.clock.tsc()
    }

    /// The time as far as the walk has got, from 0 where no TSC came yet.
    pub(crate) fn relative_time(&self) -> u64 {
        self.clock.relative()
    }

    /// Forget the time, as after a decoding error.
    pub(crate) fn forget_time(&mut self) {
        self.clock.reset();
        self.held_time.clear();
    }

    /// The full IP of `ip` without keeping it as the last IP; `None` where
    /// it was suppressed.
    pub(crate) fn resolve_quietly(&self, ip: Ip) -> Option<u64> {
        ip.resolve(self.last_ip)
    }

    /// The full IP of `ip`, kept as the last IP; `None` (and the last IP
    /// as it was) where it was suppressed.
    pub(crate) fn resolve_if_given(&mut self, ip: Ip) -> Option<u64> {
        let full = ip.resolve(self.last_ip)?;
        self.last_ip = full;
        Some(full)
    }

    /// Where the walk is in the trace: the packet it acts on next.
    pub(crate) fn position(&self) -> usize {
        self.peeked.map_or(self.packets.offset(), |(at, _)| at)
    }

    /// The IP of the FUP right after the peeked packet (past timing
    /// packets), which an event the peeked packet starts binds to.
    pub(crate) fn fup_after_bound(&self) -> Option<u64> {
        self.fup_ahead(is_time)?.resolve(self.last_ip)
    }

    /// The time at the packet being acted on: the time so far, moved by the
    /// timing packets read ahead up to it.
    pub(crate) fn time_now(&self) -> Option<u64> {
        if self.held_time.is_empty() {
            return self.clock.tsc();
        }
        let mut clock = self.clock.clone();
        for packet in &self.held_time {
            clock.update(packet, &mut |_| {});
        }
        clock.tsc()
    }

    /// Where an error is, as libipt names it: the packet its event decoder
    /// stands on after delivering the event that comes next. That is the
    /// packet the walk acts on next, except that libipt steps past a TNT or
    /// a TIP.PGD as it delivers it, past those that only wait for a
    /// transfer (PIP, VMCS, MODE.Exec), delivers an asynchronous branch at
    /// its TIP, events bound to a FUP (MODE.TSX, PTW and EXSTOP naming an
    /// IP) at that FUP, and a PSB+'s state at its PSBEND.
    pub(crate) fn offset(&self) -> u64 {
        let Some((at, packet)) = self.peeked else {
            return self.packets.offset() as u64;
        };
        let at_next = |want: fn(Packet) -> bool, pass: fn(Packet) -> bool| {
            self.packet_ahead(want, pass).map_or(at, |(next, _)| next) as u64
        };
        match packet {
            Packet::Tnt { .. }
            | Packet::Ip {
                kind: IpKind::TipPgd,
                ..
            } => self.packets.offset() as u64,
            _ if is_bound(packet) => self.packets.offset() as u64,
            Packet::Ip {
                kind: IpKind::Fup, ..
            } => at_next(
                |p| {
                    matches!(
                        p,
                        Packet::Ip {
                            kind: IpKind::Tip | IpKind::TipPgd,
                            ..
                        }
                    )
                },
                |p| is_time(p) || is_bound(p),
            ),
            Packet::ModeTsx { .. } | Packet::Ptw { ip: true, .. } | Packet::Exstop { ip: true } => {
                at_next(is_fup, is_time)
            }
            Packet::Psb => at_next(|p| p == Packet::PsbEnd, |_| true),
            _ => at as u64,
        }
    }

    /// The first packet past the peeked one that is `want`, with its
    /// offset, read ahead without consuming anything, when every packet
    /// before it passes.
    pub(crate) fn packet_ahead(
        &self,
        want: impl Fn(Packet) -> bool,
        pass: impl Fn(Packet) -> bool,
    ) -> Option<(usize, Packet)> {
        let mut ahead = self.packets.clone();
        while let Some(Ok((at, packet))) = ahead.next_packet() {
            if want(packet) {
                return Some((at, packet));
            }
            if !pass(packet) {
                return None;
            }
        }
        None
    }

    /// The next packet the walk acts on, skipping and remembering those that
    /// only wait for a transfer (PIP, VMCS, MODE.exec) or carry time.
    pub(crate) fn peek(&mut self) -> Result<Option<(usize, Packet)>, Lost> {
        if self.peeked.is_none() {
            // The packet acted on last has been reached: so has the time
            // the timing packets before it tell.
            self.catch_up_time();
            self.peeked = self.read_control()?;
        }
        Ok(self.peeked)
    }

    pub(crate) fn take(&mut self) -> Result<Option<(usize, Packet)>, Lost> {
        self.peek()?;
        Ok(self.peeked.take())
    }

    /// The next packet that steers the flow; the timing packets before it
    /// are held until the walk gets to it.
    pub(crate) fn read_control(&mut self) -> Result<Option<(usize, Packet)>, Lost> {
        while let Some((offset, packet)) = self.read_raw()? {
            if !is_time(packet) {
                self.clock.update(&packet, &mut |_| {});
                return Ok(Some((offset, packet)));
            }
            self.held_time.push(packet);
        }
        Ok(None)
    }

    pub(crate) fn read(&mut self) -> Result<Option<(usize, Packet)>, Lost> {
        let item = self.read_raw()?;
        if let Some((_, packet)) = &item {
            // Timing packets that cannot be used leave the time as is.
            self.clock.update(packet, &mut |_| {});
        }
        Ok(item)
    }

    pub(crate) fn read_raw(&mut self) -> Result<Option<(usize, Packet)>, Lost> {
        match self.packets.next_packet() {
            None => Ok(None),
            Some(Ok(item)) => Ok(Some(item)),
            Some(Err(Error::Decode { offset, fault })) => Err(Lost {
                offset,
                message: fault.message(),
            }),
        }
    }

    fn catch_up_time(&mut self) {
        for packet in self.held_time.drain(..) {
            self.clock.update(&packet, &mut |_| {});
        }
    }

    /// Whether a TIP.PGE comes after the peeked packet, with only packets
    /// that bind to it (and timing) between.
    pub(crate) fn enable_follows(&self) -> bool {
        let mut ahead = self.packets.clone();
        while let Some(Ok((_, packet))) = ahead.next_packet() {
            match packet {
                Packet::Ip {
                    kind: IpKind::TipPge,
                    ..
                } => return true,
                _ if is_time(packet) || is_bound(packet) => {}
                _ => return false,
            }
        }
        false
    }

    /// The IP of the next FUP, read ahead past the peeked packet and any
    /// that wait for it, without consuming anything.
    pub(crate) fn lookahead_fup(&self) -> Option<u64> {
        let ip = match self.peeked {
            Some((
                _,
                Packet::Ip {
                    kind: IpKind::Fup,
                    ip,
                },
            )) => ip,
            _ => self.fup_ahead(|packet| {
                is_time(packet)
                    || is_bound(packet)
                    || matches!(
                        packet,
                        Packet::ModeTsx { .. } | Packet::Exstop { .. } | Packet::Ptw { .. }
                    )
            })?,
        };
        ip.resolve(self.last_ip)
    }

    /// The IP of the next FUP past the peeked packet, read ahead without
    /// consuming anything, when every packet before it `passes`.
    pub(crate) fn fup_ahead(&self, passes: impl Fn(Packet) -> bool) -> Option<Ip> {
        match self.packet_ahead(is_fup, passes)? {
            (_, Packet::Ip { ip, .. }) => Some(ip),
            _ => None,
        }
    }

    /// The IP of the FUP in the PSB+ that the peeked PSB begins.
    pub(crate) fn psb_fup(&self) -> Option<u64> {
        self.fup_ahead(|packet| !matches!(packet, Packet::PsbEnd | Packet::Psb | Packet::Ovf))?
            .resolve(self.last_ip)
    }

    /// Whether a FUP comes next, past packets of time, packets that wait
    /// for a transfer, and the events that stand alone (CBR, MNT).
    pub(crate) fn fup_after_standalone(&self) -> bool {
        let skipped = |packet: Packet| {
            is_time(packet) || is_bound(packet) || matches!(packet, Packet::Cbr(_) | Packet::Mnt(_))
        };
        match self.peeked {
            Some((_, packet)) if is_fup(packet) => return true,
            Some((_, packet)) if !skipped(packet) => return false,
            _ => {}
        }
        self.fup_ahead(skipped).is_some()
    }

    pub(crate) fn resolve(&mut self, offset: usize, ip: Ip) -> Result<u64, Lost> {
        let ip = self.resolve_peek(offset, ip)?;
        self.last_ip = ip;
        Ok(ip)
    }

    pub(crate) fn resolve_peek(&self, offset: usize, ip: Ip) -> Result<u64, Lost> {
        ip.resolve(self.last_ip).ok_or(Lost {
            offset: offset as u64,
            message: "IP suppressed where one is needed",
        })
    }
}

/// Why the walk cannot go on; it resumes at the next PSB.
pub(crate) struct Lost {
    pub(crate) offset: u64,
    pub(crate) message: &'static str,
}

impl Lost {
    pub(crate) fn mismatch(offset: impl TryInto<u64>) -> Self {
        Lost {
            offset: offset.try_into().unwrap_or(0),
            message: "trace stream does not match query",
        }
    }

    pub(crate) fn context(offset: usize) -> Self {
        Lost {
            offset: offset as u64,
            message: "unexpected packet context",
        }
    }
}

pub(crate) fn is_fup(packet: Packet) -> bool {
    matches!(
        packet,
        Packet::Ip {
            kind: IpKind::Fup,
            ..
        }
    )
}

/// Packets that only carry time; the flow skips them.
pub(crate) fn is_time(packet: Packet) -> bool {
    matches!(
        packet,
        Packet::Pad
            | Packet::Tsc(_)
            | Packet::Mtc(_)
            | Packet::Cyc(_)
            | Packet::Tma { .. }
            | Packet::Invalid { .. }
            | Packet::PsbEnd
    )
}

/// Packets that wait for the transfer (TIP, FUP+TIP, TIP.PGE) they belong to.
pub(crate) fn is_bound(packet: Packet) -> bool {
    matches!(
        packet,
        Packet::Pip { .. } | Packet::Vmcs(_) | Packet::ModeExec { .. }
    )
}
