//! The instruction flow: walk the code from the image with iced-x86 and let
//! the packets decide every branch the code cannot decide by itself.
//!
//! Conditional branches take TNT bits; indirect branches and far transfers
//! take TIPs; a near return takes a TNT bit when the CPU compressed it
//! (it went back to the caller we saw) and a TIP otherwise. A FUP names
//! the instruction where an asynchronous event (interrupt, disable, TSX
//! abort) hits: the walk fires it on reaching that address, before the
//! instruction runs. PIP, VMCS and MODE.exec wait for the transfer they
//! belong to.
//!
//! This module walks the code; the packets come through the query layer
//! (`query.rs`). [`sync`] finds the trace's headers and resyncs after an
//! error, [`disabled`] handles the time tracing is off and asynchronous
//! events at FUPs, [`bound`] where the walk reaches what the events the
//! query layer holds (`binding.rs`) bind to.

mod bound;
mod disabled;
mod sync;

use crate::Errata;
use crate::binding::{Mode, Order};
use crate::control::{self, Control, Place};
pub use crate::event::Event;
use crate::image::Image;
pub use crate::insn::Class;
use crate::insn::{Cache, Insn, Kind};
use crate::packet::{IpKind, Packet, Packets};
use crate::query::{Lost, Query, is_bound};
use crate::sideband::{At, Note, Position, Sideband};
use crate::time::{Clock, Clocks};

/// One step of the flow: an instruction that ran, or an event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// The instruction at `ip` ran; `speculative` inside a transaction.
    /// `time` is in TSC ticks, as of the last timing packet the decoder
    /// read (it reads up to the next packet that steers the flow, as
    /// libipt's does), counted from 0 until the trace gives a TSC.
    Insn {
        ip: u64,
        speculative: bool,
        class: Class,
        time: u64,
    },
    /// An event, and its time in TSC ticks (libipt's: as of the timing
    /// packets before the packet it comes from), once the trace has one.
    Event(Event, Option<u64>),
    /// What the sideband said ([`Flow::with_sideband`]).
    Sideband(Note),
}

/// Instructions walked without reading a packet before the walk gives up:
/// code that loops without branching on anything the trace records cannot
/// be what ran.
const PATIENCE: u32 = 1 << 20;

/// Return addresses kept for compressed returns (the CPU keeps 64).
const STACK: usize = 64;

#[allow(
    clippy::struct_excessive_bools,
    reason = "the walk's state: tracing on, in a transaction, and two facts for errata and errors"
)]
pub struct Flow<'a> {
    /// The packets, as the walk consumes them.
    query: Query<'a>,
    errata: Errata,
    image: &'a Image,
    /// The code running at a TSC time, for traces that switch between
    /// processes (one CPU's): asked where tracing starts. `None` for a
    /// process whose code is not at hand: its stretch is skipped.
    code_at: Option<&'a dyn Fn(u64) -> Option<&'a Image>>,
    /// Tracing is on in a process without code: packets are read (for the
    /// IPs later ones compress against) but not walked.
    skipping: bool,
    /// The address ranges tracing was limited to (`IA32_RTIT_ADDRn` with
    /// `FilterEn`), inclusive; empty when it was not.
    filter: Vec<(u64, u64)>,
    cache: Cache,
    /// The mode last reported, or given by a PSB+ (libipt reports a
    /// MODE.Exec only where it changes something); `None` after a sync.
    known_mode: Option<Mode>,
    /// Report changes of the interrupt flag (`ptxed --event:iflags`).
    iflags: bool,
    /// After an error, resync at the next IP rather than the next PSB.
    resync: bool,
    /// Report [`Event::Tick`] where a TNT or TIP moved the time.
    ticks: bool,
    /// The TNT being taken moved the time: tick at its first branch.
    tick_at_tnt: bool,
    /// Records that steer the image, and the version of its image the
    /// instruction cache holds.
    sideband: Option<Sideband<'a>>,
    sideband_image: u64,
    /// The PSB of the PSB+ being read.
    header: Option<usize>,
    /// Where the last resync left the walk.
    resynced_at: Option<usize>,
    bits: u32,
    enabled: bool,
    ip: u64,
    /// Where an asynchronous disable stopped tracing, for "resumed".
    stopped_at: Option<u64>,
    in_tx: bool,
    stack: Vec<u64>,
    /// Instructions run since the last packet that gave an IP (TRIG counts).
    since_ip: u32,
    /// EVD data waiting for its CFE.
    data: control::Data,
    /// A CFE waiting for its FUP, and where it goes there.
    /// The CFE waiting for its FUP, where it goes there, and whether it
    /// names an IP (the FUP's).
    at_fup: Option<(Control, Place, bool)>,
    /// An event the next instruction caused, shown after it.
    after_insn: Option<(Control, Option<u64>)>,
    /// An event that follows the next instruction the walk runs (a PTW's).
    after_step: Option<Event>,
    /// The last instruction took its way from the trace (erratum BDM64).
    traced_branch: bool,
    /// The walk has reached an instruction since the last sync (libipt
    /// names no IP in errors before that).
    walked: bool,
}

impl<'a> Flow<'a> {
    pub fn new(trace: &'a [u8], image: &'a Image, errata: Errata) -> Self {
        let packets = Packets::with_errata(trace, errata);
        Flow {
            query: Query::new(packets, Clock::new(Clocks::default(), errata)),
            errata,
            image,
            code_at: None,
            skipping: false,
            filter: Vec::new(),
            cache: Cache::default(),
            known_mode: None,
            iflags: false,
            resync: false,
            ticks: false,
            tick_at_tnt: false,
            sideband: None,
            sideband_image: 0,
            header: None,
            resynced_at: None,
            bits: 64,
            enabled: false,
            ip: 0,
            stopped_at: None,
            in_tx: false,
            stack: Vec::with_capacity(STACK),
            since_ip: 0,
            data: control::Data::default(),
            at_fup: None,
            after_insn: None,
            after_step: None,
            walked: false,
            traced_branch: false,
        }
    }

    /// Time the flow with what is known about the recording's clocks
    /// (without, only TSC packets move the time).
    #[must_use]
    pub fn with_clocks(mut self, clocks: Clocks) -> Self {
        self.query.set_clock(Clock::new(clocks, self.errata));
        self
    }

    /// Decode a trace that switches between processes (one CPU's) with
    /// the code `code_at` says ran at the time tracing starts (a TIP.PGE,
    /// or a PSB+ with tracing on): user-space tracing stops in the kernel,
    /// where the switches happen, and starts again in the next process.
    /// Where `code_at` has no code, tracing is taken as off until it
    /// starts again (no instructions, no errors).
    #[must_use]
    pub fn with_code_at(mut self, code_at: &'a dyn Fn(u64) -> Option<&'a Image>) -> Self {
        self.code_at = Some(code_at);
        self
    }

    /// Tracing was limited to these address ranges (inclusive), as the
    /// capture's address filters said: where a direct branch leaves them,
    /// erratum SKL014 drops the TIP.PGD's IP, and the range says where
    /// tracing stopped.
    #[must_use]
    pub fn with_filter(mut self, ranges: Vec<(u64, u64)>) -> Self {
        self.filter = ranges;
        self
    }

    /// Report where interrupts are enabled or disabled ([`Event::Iflags`]),
    /// as event tracing's MODE.Exec says, as `ptxed --event:iflags` does.
    #[must_use]
    pub fn with_iflags(mut self, iflags: bool) -> Self {
        self.iflags = iflags;
        self
    }

    /// After an error, go on from the next packet that says where the code
    /// is (a TIP, a FUP, an event naming an IP), as `ptxed
    /// --resync-on-error` does, instead of from the next PSB.
    #[must_use]
    pub fn with_resync(mut self, resync: bool) -> Self {
        self.resync = resync;
        self
    }

    /// Report where time moved on at a branch the trace decides
    /// ([`Event::Tick`]), as `ptxed --event:tick` does.
    #[must_use]
    pub fn with_ticks(mut self, ticks: bool) -> Self {
        self.ticks = ticks;
        self
    }

    /// Let `perf_event` sideband steer the image as the trace's time passes
    /// its records (`ptxed --pevent:primary`): the image is that of the
    /// process the sideband says runs, once it says one (before, the
    /// flow's own). What the sideband says comes as [`Step::Sideband`].
    #[must_use]
    pub fn with_sideband(mut self, sideband: Sideband<'a>) -> Self {
        self.sideband = Some(sideband);
        self
    }

    /// Report an event, with its time; the sideband hears of it after.
    fn event(&mut self, out: &mut dyn FnMut(Step), event: Event) {
        let time = self.query.time_now();
        // Only a sideband needs to know where the event puts the trace.
        let position = self.sideband.as_ref().map(|_| position_of(&event));
        out(Step::Event(event, time));
        if let Some(position) = position {
            self.tell_sideband(time, position, out);
        }
    }

    /// Show and apply the sideband due by `time`; take a new image if the
    /// sideband switched it.
    fn tell_sideband(&mut self, time: Option<u64>, position: Position, out: &mut dyn FnMut(Step)) {
        let Some(sideband) = &mut self.sideband else {
            return;
        };
        let at = At {
            tsc: time.unwrap_or(0),
            position,
        };
        sideband.event(at, &mut |note| out(Step::Sideband(note)));
        if sideband.generation() != self.sideband_image {
            self.sideband_image = sideband.generation();
            self.cache.clear();
        }
    }

    /// The code being walked: the sideband's image of the running process,
    /// or the flow's own.
    fn code(&self) -> &Image {
        self.sideband
            .as_ref()
            .and_then(Sideband::image)
            .unwrap_or(self.image)
    }

    /// Whether the packet being taken (a TNT or TIP) comes at another time
    /// than the packet before it: then a tick is due (libipt's
    /// `pt_blk_tick`), if asked for.
    fn tick_due(&self) -> bool {
        self.ticks
            && self
                .query
                .time_now()
                .is_some_and(|now| Some(now) != self.query.tsc())
    }

    /// Whether `ip` lies outside the filtered ranges (there being some).
    fn filtered_out(&self, ip: u64) -> bool {
        !self.filter.is_empty() && !self.filter.iter().any(|(a, b)| (*a..=*b).contains(&ip))
    }

    /// Takes the code of the time now, if the trace switches and says
    /// when; returns whether there is code to walk.
    fn switch_code(&mut self) -> bool {
        let Some(code) = self.code_at.zip(self.query.tsc()).map(|(at, tsc)| at(tsc)) else {
            return true;
        };
        self.skipping = code.is_none();
        if let Some(image) = code.filter(|i| !std::ptr::eq(*i, self.image)) {
            self.image = image;
            self.cache.clear();
        }
        !self.skipping
    }

    /// Walk the whole trace, handing every step to `out`. Errors become
    /// [`Event::Error`] steps and the walk resumes at the next PSB, or with
    /// [`Flow::with_resync`] at the next packet that says where the code is.
    pub fn run(&mut self, out: &mut dyn FnMut(Step)) {
        if let Some(sideband) = &mut self.sideband {
            sideband.start(&mut |note| out(Step::Sideband(note)));
        }
        while self.query.sync_forward() {
            self.walked = false;
            self.known_mode = None;
            self.data = control::Data::default();
            self.at_fup = None;
            self.after_insn = None;
            self.after_step = None;
            let psb = self.query.read_offset();
            let mut result = self.status(psb, out).and_then(|()| self.walk(out));
            let done = loop {
                let Err(lost) = result else {
                    break true;
                };
                self.report(lost, false, out);
                if !self.resync {
                    break false;
                }
                result = match self.resync(out) {
                    Ok(true) => self.walk(out),
                    Ok(false) => Ok(()),
                    Err(lost) => {
                        self.report(lost, true, out);
                        break false;
                    }
                };
            };
            if done {
                return;
            }
            self.enabled = false;
            self.skipping = false;
            self.query.forget_time();
        }
    }

    fn walk(&mut self, out: &mut dyn FnMut(Step)) -> Result<(), Lost> {
        let mut idle = 0;
        loop {
            if !self.enabled {
                if !self.while_disabled(out)? {
                    return Ok(());
                }
                continue;
            }
            if self.at_fup_or_now(out)? {
                idle = 0;
                continue;
            }
            if !self.query.tnt_pending() && self.query.peek()?.is_none() {
                self.event(out, Event::EndOfTrace);
                return Ok(());
            }
            idle += 1;
            if idle > PATIENCE {
                return Err(Lost {
                    offset: self.query.offset(),
                    message: "no packet consumed in a million instructions",
                });
            }
            self.walked = true;
            let insn = self.insn(self.ip)?;
            out(Step::Insn {
                ip: self.ip,
                speculative: self.in_tx,
                class: insn.class(self.ip),
                time: self.query.relative_time(),
            });
            self.since_ip += 1;
            let after = self.after_step.take();
            self.traced_branch = self.execute(insn, out)?;
            if let Some(event) = after {
                self.event(out, event);
            }
            if self.traced_branch {
                idle = 0;
            }
        }
    }

    /// Tracing stops; it would have gone on at `self.ip`. `at`: where an
    /// asynchronous disable hit; `ip`: where the TIP.PGD says the code
    /// went on, unless it suppressed its IP.
    fn disable(&mut self, out: &mut dyn FnMut(Step), at: Option<u64>, ip: Option<u64>) {
        self.flush_power(out);
        self.event(out, Event::Disabled { at, ip });
        self.stopped_at = Some(self.ip);
        self.enabled = false;
        self.query.drop_tnt();
    }

    /// Run one instruction: set the next IP. Returns whether it read a packet.
    fn execute(&mut self, insn: Insn, out: &mut dyn FnMut(Step)) -> Result<bool, Lost> {
        let next = self.ip + u64::from(insn.len);
        match insn.kind {
            Kind::Next => {
                self.ip = next;
                Ok(false)
            }
            Kind::Jump(target) => {
                self.ip = target;
                self.disable_at_target(out)
            }
            Kind::Call(target) => {
                // `call next; pop reg` reads the IP (position-independent
                // code); no return will come back to it.
                if target != next {
                    self.push(next);
                }
                self.ip = target;
                self.disable_at_target(out)
            }
            Kind::Cond(target) => self.cond(target, next, out),
            Kind::Indirect | Kind::VmEntry => self.tip(next, out),
            Kind::IndirectCall => {
                self.push(next);
                self.tip(next, out)
            }
            Kind::Ret => self.ret(next, out),
            Kind::MovCr3 => {
                self.ip = next;
                if let Some((_, Packet::Pip { cr3, nr })) = self.query.peek()? {
                    self.query.consume();
                    self.event(out, Event::Paging { cr3, nr, ip: None });
                }
                if let Some((
                    _,
                    Packet::Ip {
                        kind: IpKind::TipPgd,
                        ip,
                    },
                )) = self.query.peek()?
                    && ip.compression == 0
                {
                    self.query.consume();
                    self.disable(out, None, None);
                    return Ok(true);
                }
                Ok(false)
            }
        }
    }

    fn cond(&mut self, target: u64, next: u64, out: &mut dyn FnMut(Step)) -> Result<bool, Lost> {
        if !self.query.tnt_pending() {
            match self.query.peek()? {
                Some((_, Packet::Tnt { bits, count, .. })) => {
                    self.query.consume();
                    self.load_tnt(bits, count);
                }
                // Tracing stopped on this branch: the TIP.PGD says which way.
                Some((
                    offset,
                    Packet::Ip {
                        kind: IpKind::TipPgd,
                        ip,
                    },
                )) if ip.compression != 0 => {
                    self.query.consume();
                    self.ip = self.query.resolve(offset, ip)?;
                    if self.ip != target && self.ip != next {
                        return Err(Lost::mismatch(offset));
                    }
                    self.disable(out, None, Some(self.ip));
                    return Ok(true);
                }
                _ => return Err(Lost::mismatch(self.query.offset())),
            }
        }
        self.ip = if self.take_bit()? { target } else { next };
        self.tick_after_bit(out);
        Ok(true)
    }

    /// The tick of a TNT that moved the time, after the branch that took
    /// its first bit.
    fn tick_after_bit(&mut self, out: &mut dyn FnMut(Step)) {
        if std::mem::take(&mut self.tick_at_tnt) {
            self.event(out, Event::Tick { ip: Some(self.ip) });
        }
    }

    fn ret(&mut self, next: u64, out: &mut dyn FnMut(Step)) -> Result<bool, Lost> {
        let compressed =
            self.query.tnt_pending() || matches!(self.query.peek()?, Some((_, Packet::Tnt { .. })));
        if !compressed {
            return self.tip(next, out);
        }
        let offset = self.query.offset();
        if !self.query.tnt_pending() {
            let Some((_, Packet::Tnt { bits, count, .. })) = self.query.take()? else {
                unreachable!("peeked a TNT")
            };
            self.load_tnt(bits, count);
        }
        if !self.take_bit()? {
            return Err(Lost::mismatch(offset));
        }
        self.ip = self.stack.pop().ok_or(Lost {
            offset,
            message: "compressed return without a call",
        })?;
        self.tick_after_bit(out);
        Ok(true)
    }

    /// A transfer whose target only the trace knows: TIP, or TIP.PGD.
    fn tip(&mut self, next: u64, out: &mut dyn FnMut(Step)) -> Result<bool, Lost> {
        // The CPU may send the TNT of later branches before this TIP.
        if !self.query.tnt_pending()
            && let Some((_, Packet::Tnt { bits, count, .. })) = self.query.peek()?
        {
            self.query.consume();
            self.load_tnt(bits, count);
        }
        self.peek_transfer()?;
        match self.query.take()? {
            Some((
                offset,
                Packet::Ip {
                    kind: IpKind::Tip,
                    ip,
                },
            )) => {
                let (from, tick) = (self.ip, self.tick_due());
                self.ip = self.query.resolve(offset, ip)?;
                self.since_ip = 0;
                if tick {
                    self.event(out, Event::Tick { ip: Some(from) });
                }
                self.flush_transfer(out, Order::Stream, Some(self.ip));
            }
            Some((
                offset,
                Packet::Ip {
                    kind: IpKind::TipPgd,
                    ip,
                },
            )) => {
                let to = self.query.resolve(offset, ip).ok();
                self.ip = to.unwrap_or(next);
                self.flush_transfer(out, Order::Stream, to);
                self.disable(out, None, to);
            }
            Some((offset, _)) => return Err(Lost::mismatch(offset)),
            None => {
                return Err(Lost {
                    offset: self.query.offset(),
                    message: "unexpected end of trace",
                });
            }
        }
        Ok(true)
    }

    /// A direct branch that lands where a TIP.PGD says tracing stopped, or
    /// (erratum SKL014) outside the filtered ranges, with the TIP.PGD's IP
    /// dropped.
    fn disable_at_target(&mut self, out: &mut dyn FnMut(Step)) -> Result<bool, Lost> {
        if self.query.tnt_pending() {
            return Ok(false);
        }
        let Some((
            offset,
            Packet::Ip {
                kind: IpKind::TipPgd,
                ip,
            },
        )) = self.query.peek()?
        else {
            return Ok(false);
        };
        let here = ip.compression != 0 && self.query.resolve_quietly(ip) == Some(self.ip);
        let skl014 = ip.compression == 0 && self.errata.skl014 && self.filtered_out(self.ip);
        if !here && !skl014 {
            return Ok(false);
        }
        self.query.consume();
        if here {
            self.query.resolve(offset, ip)?;
        }
        self.disable(out, None, here.then_some(self.ip));
        Ok(true)
    }

    /// Take a TNT's outcomes (held by the query layer); its first branch
    /// ticks when the time moved.
    fn load_tnt(&mut self, bits: u64, count: u8) {
        self.tick_at_tnt = self.tick_due();
        self.query.cache_tnt(bits, count);
    }

    /// The next branch outcome; a TNT packet may hold none (TNT.64 with
    /// only its stop bit), which answers no query.
    fn take_bit(&mut self) -> Result<bool, Lost> {
        let bit = self.query.take_bit();
        let bit = bit.ok_or_else(|| Lost::mismatch(self.query.offset()))?;
        self.since_ip = 0;
        Ok(bit)
    }

    fn push(&mut self, ret: u64) {
        if self.stack.len() == STACK {
            self.stack.remove(0);
        }
        self.stack.push(ret);
    }

    /// The instruction at `ip`, decoded once and cached.
    fn insn(&mut self, ip: u64) -> Result<Insn, Lost> {
        if let Some(&insn) = self.cache.get(&ip) {
            return Ok(insn);
        }
        let offset = self.query.offset();
        let (code, len) = self.code().insn_bytes(ip).ok_or(Lost {
            offset,
            message: "no memory mapped at this address",
        })?;
        let insn = Insn::decode(self.bits, &code[..len], ip).ok_or(Lost {
            offset,
            message: "cannot decode the instruction at this address",
        })?;
        self.cache.insert(ip, insn);
        Ok(insn)
    }

    fn is_vm_entry(&mut self) -> Result<bool, Lost> {
        Ok(self.insn(self.ip)?.kind == Kind::VmEntry)
    }

    /// The next packet past those that wait for a transfer, which are
    /// remembered for it.
    fn peek_transfer(&mut self) -> Result<Option<(usize, Packet)>, Lost> {
        while let Some((_, packet)) = self.query.peek()? {
            if !is_bound(packet) {
                break;
            }
            self.absorb_bound();
        }
        self.query.peek()
    }
}

/// Where an event says the trace is, for placing the sideband's context
/// switches (libipt's `ploc_from_event`).
fn position_of(event: &Event) -> Position {
    match *event {
        Event::Disabled { at, ip: None } => Position::Left { from: at },
        Event::Paging { ip: None, .. } => Position::Paging,
        Event::Enabled { ip, .. }
        | Event::Interrupt { to: ip, .. }
        | Event::Disabled { ip: Some(ip), .. }
        | Event::Paging { ip: Some(ip), .. }
        | Event::Overflow { ip: Some(ip) }
        | Event::ExecMode { ip: Some(ip), .. }
        | Event::Iflags { ip: Some(ip), .. }
        | Event::TxBegin { ip: Some(ip) }
        | Event::TxCommit { ip: Some(ip) }
        | Event::TxAbort { ip: Some(ip) }
        | Event::Exstop { ip: Some(ip) }
        | Event::Mwait { ip: Some(ip), .. }
        | Event::Ptwrite { ip: Some(ip), .. }
        | Event::Tick { ip: Some(ip) } => Position::Ip(ip),
        _ => Position::Unknown,
    }
}

/// The event of a MODE.TSX: a transaction began, committed or aborted.
fn tsx_event(intx: bool, abort: bool, ip: Option<u64>) -> Event {
    match (intx, abort) {
        (true, _) => Event::TxBegin { ip },
        (false, true) => Event::TxAbort { ip },
        (false, false) => Event::TxCommit { ip },
    }
}
