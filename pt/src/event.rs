//! The events of the instruction flow, as libipt reports them, and the
//! packets that are an event by themselves.

use crate::control::Control;
use crate::packet::Packet;

/// An event in the flow, as libipt reports it. Where libipt gives an event
/// an IP (`ptxed --event:ip` prints it), `ip` holds it, `None` where the
/// trace suppressed it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// Tracing (re)started at `ip`; `resumed` where it had been switched off.
    Enabled {
        ip: u64,
        resumed: bool,
    },
    /// Tracing stopped. `at`: where an asynchronous disable hit (its FUP);
    /// `ip`: where the code went on, when the TIP.PGD says.
    Disabled {
        at: Option<u64>,
        ip: Option<u64>,
    },
    /// The CPU lost trace; `ip`: where tracing resumed, when a FUP says.
    Overflow {
        ip: Option<u64>,
    },
    /// An asynchronous branch (interrupt, exception) from `from` to `to`.
    Interrupt {
        from: u64,
        to: u64,
    },
    /// A new CR3; `ip` where it came with an asynchronous branch.
    Paging {
        cr3: u64,
        nr: bool,
        ip: Option<u64>,
    },
    Vmcs {
        base: u64,
        ip: Option<u64>,
    },
    ExecMode {
        bits: u32,
        ip: Option<u64>,
    },
    /// Interrupts were enabled or disabled (event tracing's MODE.Exec IF
    /// bit), shown only when asked for ([`Flow::with_iflags`]).
    Iflags {
        enabled: bool,
        ip: Option<u64>,
    },
    TxBegin {
        ip: Option<u64>,
    },
    TxCommit {
        ip: Option<u64>,
    },
    TxAbort {
        ip: Option<u64>,
    },
    Stopped,
    /// Execution stopped (C-state entry, MWAIT, ...).
    Exstop {
        ip: Option<u64>,
    },
    Mwait {
        hints: u32,
        ext: u32,
        ip: Option<u64>,
    },
    /// Power entry; C-states as in the packet (minus one, modulo 16).
    Pwre {
        state: u8,
        sub_state: u8,
        hw: bool,
    },
    Pwrx {
        last: u8,
        deepest: u8,
        wake: u8,
    },
    Ptwrite {
        payload: u64,
        ip: Option<u64>,
    },
    /// A trigger: its bit vector as ptxed prints it (`%02x`), whether
    /// several triggers fired, and instructions since the last IP (0: none
    /// given).
    Trig {
        id: u8,
        mult: bool,
        icnt: u16,
        ip: Option<u64>,
    },
    /// The core:bus ratio changed.
    Cbr {
        ratio: u8,
    },
    Mnt {
        payload: u64,
    },
    /// A control-flow event from event tracing (CFE, with its EVD data).
    Control {
        event: Control,
        ip: Option<u64>,
    },
    EndOfTrace,
    /// Time moved on at a branch the trace decides (a TNT or TIP), asked
    /// for with [`Flow::with_ticks`]; `ip` is the branch's (the TIP's) or
    /// where it went (the TNT's).
    Tick {
        ip: Option<u64>,
    },
    /// The walk lost its way; decoding resumes at the next PSB.
    Error {
        offset: u64,
        ip: u64,
        message: &'static str,
        /// It came while resyncing after an earlier error.
        resync: bool,
    },
}

/// Packets that are an event by themselves.
pub(crate) fn now_event(packet: Packet) -> Option<Event> {
    Some(match packet {
        Packet::Exstop { .. } => Event::Exstop { ip: None },
        Packet::Mwait { hints, ext } => Event::Mwait {
            hints,
            ext,
            ip: None,
        },
        Packet::Pwre {
            state,
            sub_state,
            hw,
        } => Event::Pwre {
            state,
            sub_state,
            hw,
        },
        Packet::Pwrx {
            last,
            deepest,
            wake,
        } => Event::Pwrx {
            last,
            deepest,
            wake,
        },
        Packet::Ptw { payload, .. } => Event::Ptwrite { payload, ip: None },
        Packet::Trig { id, mult, icnt, .. } => Event::Trig {
            id,
            mult,
            icnt: icnt.unwrap_or(0),
            ip: None,
        },
        Packet::Cbr(ratio) => Event::Cbr { ratio },
        Packet::Mnt(payload) => Event::Mnt { payload },
        Packet::Stop => Event::Stopped,
        _ => return None,
    })
}
